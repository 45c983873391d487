/* matmul_hif8_avx512vbmi.c: the code-pack decode (mm_codes_decode_impl) with
 * AVX-512 VBMI byte permutes, 64 codes (one pair row of a micro-panel) at a
 * time: the high and low bytes of each code's bf16 value are looked up in two
 * 256-byte tables (vpermi2b over 128 entries, the code's top bit choosing the
 * half), then interleaved into bf16 words or fp32 values.  The interleaving
 * (unpack within 128-bit lanes) is undone in advance by one vpermb of the
 * codes, so the results come out in panel order.  Same values as the scalar
 * tables (matmul_hif8.c; tests/test_matmul_hif8.c runs both). */
#include <immintrin.h>
#include <stdint.h>

#include "matmul_hif8_vbmi_impl.h"

/* The byte order that makes the lane-wise unpacks produce want[0..63]:
 * unpacking lo/hi bytes and then zero/word puts source byte L*16 + 4q + t at
 * dword 4L + t of output q (fp32), and byte L*16 + t (t < 8) / L*16 + 8 + t
 * at word 8L + t of the low / high word vector (bf16 words). */
static void mm_codes_perm(uint8_t perm[64], const uint8_t want[64], int words)
{
    for (int L = 0; L < 4; L++)
        for (int t = 0; t < 16; t++) {
            if (words)
                perm[L * 16 + t] = t < 8 ? want[8 * L + t] : want[32 + 8 * L + (t - 8)];
            else
                perm[L * 16 + t] = want[16 * (t / 4) + 4 * L + (t % 4)];
        }
}

static mm_codes_vtab mm_vtab;
static int mm_vtab_ready;

const mm_codes_vtab *mm_codes_vtab_avx512vbmi_impl(void) { return &mm_vtab; }

void mm_codes_vtab_init_avx512vbmi_impl(const uint32_t *bf16, const uint8_t *lo6)
{
    if (mm_vtab_ready)
        return;
    uint8_t hi[256], lo[256], want[64], perm[64];
    for (int c = 0; c < 256; c++) {
        hi[c] = (uint8_t)(bf16[c] >> 8);
        lo[c] = (uint8_t)bf16[c];
    }
    for (int i = 0; i < 4; i++) {
        mm_vtab.hi[i] = _mm512_loadu_si512(hi + 64 * i);
        mm_vtab.lo[i] = _mm512_loadu_si512(lo + 64 * i);
    }
    for (int swap = 0; swap < 2; swap++) {
        for (int i = 0; i < 32; i++) {   /* the bytes of pair row: [2 j] even, [2 j + 1] odd */
            want[i] = (uint8_t)(2 * i + swap);
            want[32 + i] = (uint8_t)(2 * i + 1 - swap);
        }
        mm_codes_perm(perm, want, 0);
        mm_vtab.perm_f32[swap] = _mm512_loadu_si512(perm);
    }
    for (int i = 0; i < 64; i++)
        want[i] = (uint8_t)i;
    mm_codes_perm(perm, want, 1);
    mm_vtab.perm_pairs = _mm512_loadu_si512(perm);
    mm_vtab.lo6 = _mm512_loadu_si512(lo6);
    mm_vtab_ready = 1;
}

void mm_codes_decode_avx512vbmi_impl(void *dst, const uint16_t *src, int kp, int mode)
{
    const int no_nan = (mode & MM_DECODE_NO_NAN) != 0;
    mode &= MM_DECODE_MODE;
    _Static_assert(MM_NR == 32, "one pair row of a micro-panel is 64 codes");
    const __m512i zero = _mm512_setzero_si512();
    if (mode == MM_DECODE_PAIRS) {
        uint32_t *d = dst;
        for (int p = 0; p < kp; p++) {
            __m512i c = _mm512_permutexvar_epi8(mm_vtab.perm_pairs,
                                                _mm512_loadu_si512(src + (size_t)p * MM_NR));
            __m512i hi, lo;
            mm_codes_lookup(&mm_vtab, c, no_nan, &hi, &lo);
            _mm512_storeu_si512(d + (size_t)p * MM_NR, _mm512_unpacklo_epi8(lo, hi));
            _mm512_storeu_si512(d + (size_t)p * MM_NR + 16, _mm512_unpackhi_epi8(lo, hi));
        }
        return;
    }
    const __m512i perm = mm_vtab.perm_f32[mode == MM_DECODE_F32_SWAP];
    float *d = dst;
    for (int p = 0; p < kp; p++) {
        __m512i c = _mm512_permutexvar_epi8(perm, _mm512_loadu_si512(src + (size_t)p * MM_NR));
        __m512i hi, lo;
        mm_codes_lookup(&mm_vtab, c, no_nan, &hi, &lo);
        __m512i wl = _mm512_unpacklo_epi8(lo, hi), wh = _mm512_unpackhi_epi8(lo, hi);
        float *r = d + (size_t)(2 * p) * MM_NR;   /* rows 2p (q = 0, 1) and 2p + 1 (q = 2, 3) */
        _mm512_storeu_si512(r, _mm512_unpacklo_epi16(zero, wl));
        _mm512_storeu_si512(r + 16, _mm512_unpackhi_epi16(zero, wl));
        _mm512_storeu_si512(r + 32, _mm512_unpacklo_epi16(zero, wh));
        _mm512_storeu_si512(r + 48, _mm512_unpackhi_epi16(zero, wh));
    }
}
