/* amx_bf16_order.c: why MATMUL_BF16 has no AMX path (matmul.h's contract).
 *
 * The contract adds each exact bf16 product to an fp32 accumulator with one
 * rounding, in vdpbf16ps's order: within each pair of k the odd term first.
 * Intel's SDM writes TDPBF16PS as two such additions per pair, the even term
 * first, so packing both operands with each pair swapped looked like it would
 * give the contract's order.  This probe runs TDPBF16PS on random tiles and
 * compares every element with (a) the contract's order on natural and on
 * swapped pairs and (b) "acc + round(even + odd)": the two products of a pair
 * summed (and rounded) first, then added.  Measured on a Xeon (Emerald
 * Rapids, family 6 model 207): with one pair per instruction (b) matches every
 * element and (a) 96% either way (the same elements: a pair sum is symmetric in
 * its two terms, so no packing makes AMX follow the contract); with 2 and 16
 * pairs per instruction the pair sums are combined before the accumulator is
 * touched, and (a) matches 81% and 38%.  The only exact use, one product per
 * instruction (pairs (a, 0)), runs at ~38 GFLOP/s, below vdpbf16ps.
 * Exit 0 when those facts hold (or the CPU/kernel has no AMX: skipped), 1 when
 * this CPU behaves otherwise: then the notes are out of date and an AMX path
 * could be reconsidered.  Values stay in [2^-10, 2^10] (no denormals).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18, TRIALS = 4000 };

typedef struct amx_tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_tilecfg;

static uint64_t amx_state = 88172645463325252ull;

static uint16_t amx_rand_bf16(void)
{
    amx_state ^= amx_state << 13;
    amx_state ^= amx_state >> 7;
    amx_state ^= amx_state << 17;
    uint64_t r = amx_state;
    int e = 127 + (int)(r % 21) - 10;
    return (uint16_t)(((r >> 8) & 1) << 15 | (unsigned)e << 7 | ((r >> 16) & 0x7F));
}

static float amx_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static int amx_available(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return 0;
    if (!(d & (1u << 22)) || !(d & (1u << 24))) /* AMX-BF16, AMX-TILE */
        return 0;
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

/* C[16][16] += A[16][2 kp] B[kp][16 pairs] on the tiles (kp pairs per instruction). */
__attribute__((target("amx-tile,amx-bf16"))) static void
amx_dot(float c[16][16], uint16_t a[16][32], uint16_t b[16][32], int kp)
{
    amx_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    cfg.colsb[0] = 64;
    cfg.rows[0] = 16;
    cfg.colsb[1] = (uint16_t)(4 * kp);
    cfg.rows[1] = 16;
    cfg.colsb[2] = 64;
    cfg.rows[2] = (uint8_t)kp;
    _tile_loadconfig(&cfg);
    _tile_loadd(0, c, 64);
    _tile_loadd(1, a, 64);
    _tile_loadd(2, b, 64);
    _tile_dpbf16ps(0, 1, 2);
    _tile_stored(0, c, 64);
    _tile_release();
}

/* Matches of TDPBF16PS with kp pairs per instruction: [0] contract order on
 * natural pairs, [1] contract order on swapped pairs, [2] pair sums first. */
static void amx_count(int kp, long match[3], long *total)
{
    for (int t = 0; t < TRIALS; t++) {
        uint16_t a[16][32], b[16][32], as[16][32], bs[16][32];
        float c0[16][16], c[16][16], cs[16][16];
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 32; j++) {
                a[i][j] = amx_rand_bf16();
                b[i][j] = amx_rand_bf16();
            }
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 32; j++) {
                as[i][j] = a[i][j ^ 1];
                bs[i][j] = b[i][j ^ 1];
            }
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++)
                c0[i][j] = amx_f32(amx_rand_bf16());
        memcpy(c, c0, sizeof c);
        memcpy(cs, c0, sizeof cs);
        amx_dot(c, a, b, kp);
        amx_dot(cs, as, bs, kp);
        for (int m = 0; m < 16; m++)
            for (int n = 0; n < 16; n++) {
                float contract = c0[m][n], pairsum = c0[m][n];
                for (int p = 0; p < kp; p++) {
                    float pe = amx_f32(a[m][2 * p]) * amx_f32(b[p][2 * n]);
                    float po = amx_f32(a[m][2 * p + 1]) * amx_f32(b[p][2 * n + 1]);
                    contract = contract + po; /* one rounding each (C11: no contraction) */
                    contract = contract + pe;
                    pairsum = pairsum + (pe + po);
                }
                match[0] += !memcmp(&c[m][n], &contract, sizeof contract);
                match[1] += !memcmp(&cs[m][n], &contract, sizeof contract);
                match[2] += !memcmp(&c[m][n], &pairsum, sizeof pairsum);
                (*total)++;
            }
    }
}

int main(void)
{
    if (!amx_available()) {
        printf("amx_bf16_order: no AMX-BF16 (or no tile permission): SKIP\n");
        return 0;
    }
    int ok = 1;
    static const int kps[] = {1, 2, 16};
    for (int i = 0; i < 3; i++) {
        long match[3] = {0, 0, 0}, total = 0;
        amx_count(kps[i], match, &total);
        printf("amx_bf16_order: %2d pair(s) per TDPBF16PS, %ld elements: contract order %.4f "
               "(natural pairs) %.4f (swapped pairs); pair sums first %.4f\n",
               kps[i], total, (double)match[0] / total, (double)match[1] / total,
               (double)match[2] / total);
        ok &= match[0] < total && match[1] < total; /* neither packing follows the contract */
        if (kps[i] == 1)
            ok &= match[2] == total; /* the measured rule */
    }
    printf("amx_bf16_order: %s\n", ok ? "PASS (AMX cannot give the contract's bits)"
                                      : "FAIL (this CPU differs from the notes)");
    return ok ? 0 : 1;
}

#else
int main(void)
{
    printf("amx_bf16_order: not an x86-64 Linux build: SKIP\n");
    return 0;
}
#endif
