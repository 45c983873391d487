/* matmul_hif8.c: B packs whose elements are HiF8 codes (1 byte each), decoded
 * through a 256-entry table into the micro-panel as the GEMM uses it.
 *
 * A HiF8 checkpoint's quantized Linear keeps its weight only as codes: the
 * forward pack (B = w^T) holds them in the panel order of the other formats,
 *   panel p (columns [p MM_NR, (p + 1) MM_NR)), pair kp, column j:
 *     uint16 at p * panel_elems + kp * MM_NR + j = t(2 kp) | t(2 kp + 1) << 8
 * (t(k) the pack byte of code(k) of B(k, n) = w[n, k]; columns past N and the
 * odd-K pad: code 0 = +0, byte 0).  The pack byte keeps the code's sign bit
 * and renumbers its 7 magnitude bits (mm_codes_order: 0 stays 0, so NaN stays
 * 0x80 and t | 0x80 is still the negation), so that the low byte of the bf16
 * value of every finite code is a 64-entry table of t's low 6 bits with bit 6
 * cleared unless t has it: one vpermb instead of a 128-entry lookup in the
 * few-row kernel (matmul_gemv_codes_avx512bf16vbmi.c).  All tables here are
 * indexed by the pack byte.
 * The layout does not depend on the kernel, only the decoding does: the GEMM
 * turns the MM_NR-wide rows of one k block into exactly what the fp32 or bf16
 * micro-panel of those values would hold (mm_codes_decode_impl, the place
 * where the FMA path widens bf16 pairs; AVX-512 VBMI byte permutes where the
 * CPU has them, matmul_hif8_avx512vbmi.c, else the tables here).  Every HiF8 value is exact in bf16
 * and fp32 (at most 4 significant bits, exponents within [-22, 15]), so the
 * products are the bits of packing the decoded weight (tests/test_matmul_hif8.c).
 */
#include <assert.h>
#include <string.h>

#include "matmul_impl.h"
#include "qs/cpu.h"
#include "qs/err.h"
#include "qs/hif8.h"
#include "qs/mem.h"

/* decode of pack byte t as fp32 and as bf16 bits (exact: the low 16 bits are
 * zero); the pack byte of a magnitude and back; the low-byte table. */
static float mm_hif8_f32[256];
static uint32_t mm_hif8_bf16[256];
static uint8_t mm_hif8_enc[128], mm_hif8_dec[128], mm_hif8_lo6[64];
static int mm_hif8_ready, mm_hif8_vbmi;

/* The magnitude order (enc: magnitude -> t, t < 128) and lo6 such that for
 * every finite magnitude m, with t = enc[m]:
 *   low byte of bf16(m) = lo6[t & 63] & ~(0x40 & ~t)
 * i.e. two magnitudes share a slot s (t = s and s | 0x40) when their low bytes
 * are equal or differ only in bit 6, the one with bit 6 at t = s | 0x40.  The
 * low bytes (exponent bit 0, 3 mantissa bits) fall in 8 groups up to bit 6;
 * each group fills slots with its pairs (bit 6 clear, set), then with two
 * clear ones per slot.  That takes exactly 64 slots for the 127 finite
 * magnitudes; infinity (0x6F) takes the one t left.  Magnitude 0 is first in
 * the first group: t = 0. */
static void mm_codes_order(uint8_t enc[128], uint8_t lo6[64], const uint32_t *bf16)
{
    static const uint8_t groups[8] = {0x00, 0x10, 0x20, 0x30, 0x80, 0x90, 0xA0, 0xB0};
    enum { MM_HIF8_INF_MAG = 0x6F };
    uint8_t taken[128] = {0};
    int slot = 0;
    for (int g = 0; g < 8; g++) {
        uint8_t clear[128], set[128];
        int nc = 0, ns = 0;
        for (int m = 0; m < 128; m++) {
            int lo = (int)(bf16[m] & 0xFF);
            if (m == MM_HIF8_INF_MAG || (lo & ~0x40) != groups[g])
                continue;
            if (lo & 0x40)
                set[ns++] = (uint8_t)m;
            else
                clear[nc++] = (uint8_t)m;
        }
        assert(ns <= nc);
        int i = 0;
        for (int j = 0; j < ns; j++, slot++) {
            enc[clear[i++]] = (uint8_t)slot;
            enc[set[j]] = (uint8_t)(slot | 0x40);
            lo6[slot] = (uint8_t)(groups[g] | 0x40);
        }
        for (; i < nc; slot++) {
            enc[clear[i++]] = (uint8_t)slot;
            if (i < nc)
                enc[clear[i++]] = (uint8_t)(slot | 0x40);
            else
                taken[slot | 0x40] = 2;   /* free */
            lo6[slot] = groups[g];
        }
    }
    assert(slot == 64);   /* a property of the HiF8 table */
    for (int m = 0; m < 128; m++)
        if (m != MM_HIF8_INF_MAG)
            taken[enc[m]] = 1;
    for (int t = 0; t < 128; t++)
        if (taken[t] != 1)
            enc[MM_HIF8_INF_MAG] = (uint8_t)t;
}

static uint8_t mm_codes_byte(uint8_t c) { return (uint8_t)((c & 0x80) | mm_hif8_enc[c & 0x7F]); }

void mm_codes_tables_impl(void)
{
    if (mm_hif8_ready)
        return;
    uint32_t by_code[128];
    for (int c = 0; c < 128; c++) {
        union { float f; uint32_t u; } v = {hif8_decode((uint8_t)c)};
        by_code[c] = v.u >> 16;
    }
    mm_codes_order(mm_hif8_enc, mm_hif8_lo6, by_code);
    for (int m = 0; m < 128; m++)
        mm_hif8_dec[mm_hif8_enc[m]] = (uint8_t)m;
    for (int t = 0; t < 256; t++) {
        uint8_t c = (uint8_t)((t & 0x80) | mm_hif8_dec[t & 0x7F]);
        union { float f; uint32_t u; } v = {hif8_decode(c)};
        if (v.f != v.f)   /* NaN (code 0x80): the canonical bf16 NaN, as mm_bf16_bits */
            v.u = 0x7FC00000u;
        mm_hif8_f32[t] = v.f;
        mm_hif8_bf16[t] = v.u >> 16;
    }
    mm_hif8_vbmi = cpu_level() >= CPU_LEVEL_AVX512 && __builtin_cpu_supports("avx512vbmi");
    if (mm_hif8_vbmi)
        mm_codes_vtab_init_avx512vbmi_impl(mm_hif8_bf16, mm_hif8_lo6);
    mm_hif8_ready = 1;
}

static int mm_codes_gemv_mode = -1;

void mm_codes_gemv_force_impl(int mode) { mm_codes_gemv_mode = mode; }

int mm_codes_gemv_dp_impl(void)
{
    return mm_codes_gemv_mode != 0 && mm_hif8_vbmi && cpu_level() >= CPU_LEVEL_AVX512BF16;
}

void mm_codes_decode_impl(void *dst, const uint16_t *src, int kp, int mode)
{
    if (mm_hif8_vbmi && cpu_level() >= CPU_LEVEL_AVX512) {
        mm_codes_decode_avx512vbmi_impl(dst, src, kp, mode);
        return;
    }
    mode &= MM_DECODE_MODE;
    const int n = kp * MM_NR;
    if (mode == MM_DECODE_PAIRS) {
        uint32_t *d = dst;
        for (int i = 0; i < n; i++)
            d[i] = mm_hif8_bf16[src[i] & 0xFF] | mm_hif8_bf16[src[i] >> 8] << 16;
        return;
    }
    float *d = dst;
    const int lo = mode == MM_DECODE_F32_SWAP;   /* the odd term first (mm_bf16_order) */
    for (int p = 0; p < kp; p++) {
        const uint16_t *s = src + (size_t)p * MM_NR;
        float *r0 = d + (size_t)(2 * p) * MM_NR, *r1 = r0 + MM_NR;
        for (int j = 0; j < MM_NR; j++) {
            r0[j] = mm_hif8_f32[lo ? s[j] >> 8 : s[j] & 0xFF];
            r1[j] = mm_hif8_f32[lo ? s[j] & 0xFF : s[j] >> 8];
        }
    }
}

int mm_bpack_fill_codes_impl(mm_bpack *bp, const uint8_t *codes, int K, int N, mm_kernel kernel,
                             int round_bf16)
{
    mm_codes_tables_impl();
    const int kp_n = (K + 1) / 2, n_panels = (N + MM_NR - 1) / MM_NR;
    const size_t panel_elems = (size_t)kp_n * MM_NR;
    const size_t bytes = panel_elems * (size_t)n_panels * sizeof(uint16_t);
    int rc = mm_pack_reserve_impl(bp, bytes);
    if (rc)
        return rc;
    bp->panel_elems = panel_elems;
    bp->K = K;
    bp->N = N;
    bp->kernel = kernel;
    bp->round_bf16 = kernel == MM_KERNEL_AVX512BF16 ? 1 : round_bf16;
    bp->row_pairs = 0;
    bp->codes = 1;
    bp->codes_nan = memchr(codes, 0x80, (size_t)K * N) != NULL;
    bp->codes_inf = memchr(codes, HIF8_CODE_POS_INF, (size_t)K * N) != NULL ||
                    memchr(codes, HIF8_CODE_NEG_INF, (size_t)K * N) != NULL;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((size_t)K * N > ((size_t)1 << 22))
#endif
    for (int p = 0; p < n_panels; p++) {
        uint16_t *dst = (uint16_t *)bp->data + (size_t)p * panel_elems;
        const int j0 = p * MM_NR, nj = N - j0 < MM_NR ? N - j0 : MM_NR;
        if (nj < MM_NR)
            memset(dst, 0, panel_elems * sizeof *dst);
        for (int j = 0; j < nj; j++) {
            const uint8_t *row = codes + (size_t)(j0 + j) * K;
            for (int q = 0; q < K / 2; q++)
                dst[(size_t)q * MM_NR + j] =
                    (uint16_t)(mm_codes_byte(row[2 * q]) | mm_codes_byte(row[2 * q + 1]) << 8);
            if (K & 1)
                dst[(size_t)(K / 2) * MM_NR + j] = mm_codes_byte(row[K - 1]);
        }
    }
    return 0;
}

void mm_bpack_codes_row_impl(const mm_bpack *bp, int n, int k0, int kc, uint8_t *codes,
                             float *values)
{
    const uint16_t *pan = (const uint16_t *)bp->data + (size_t)(n / MM_NR) * bp->panel_elems;
    const int j = n % MM_NR;
    for (int k = k0; k < k0 + kc; k++) {
        uint16_t u = pan[(size_t)(k / 2) * MM_NR + j];
        uint8_t t = (uint8_t)(k & 1 ? u >> 8 : u & 0xFF);
        if (codes)
            codes[k - k0] = (uint8_t)((t & 0x80) | mm_hif8_dec[t & 0x7F]);
        if (values)
            values[k - k0] = mm_hif8_f32[t];
    }
}
