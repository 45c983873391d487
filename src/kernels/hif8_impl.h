/* hif8_impl.h: internals shared by the HiF8 paths (src/kernels/hif8*.c); their
 * per-path entry points are declared in qs/hif8_test.h for the tests.
 *
 * The scalar reference (hif8.c) works through codes: hif8_encode() then
 * hif8_decode().  The vector paths (hif8_avx2.c, hif8_avx512.c) never build a
 * code for fake-quant; they round the fp32 bit pattern in place ("code-free"):
 *
 *   a  = min(|t| bits, 32768 bits)                 saturate (also +-Inf)
 *   E  = exponent of a,  k = (|E|>3)+(|E|>7)+(|E|>15),  M = 3 - k
 *   r  = (a + 2^(19+k)) & ~(2^(20+k) - 1)           half-ulp of the kept
 *        position, then truncate; a carry moves into the exponent by itself
 *   a < 2^-22:  r = (a >= 2^-23) ? 2^-22 : 0       binade -23 and underflow
 *
 * k = 3 (M = 0) also covers the denormal powers of two E in [-22, -16]: their
 * threshold is the linear midpoint 1.5 * 2^E, exactly what the rule gives.
 * The result r is the HiF8 value itself (HiF8 values are fp32 values).
 * Encoding to codes adds one table lookup by the exponent of r
 * (hif8_code_base_impl) plus the kept mantissa bits.
 *
 * The division y = q / scale is not done by a divide: q = m * 2^E with m one
 * of the 8 significands 1 + j/8 (j = the top 3 fraction bits of q), so
 * q / scale = 2^E * (m / scale), and 2^E * RN(m / scale) == RN(q / scale) as long
 * as nothing leaves the normal fp32 range (scaling by 2^E commutes with
 * rounding there).  hif8_recip_table_impl() builds the 8 correctly rounded
 * m / scale and says whether the whole range E in [-22, 15] stays normal; if
 * not (|log2 scale| beyond ~100), the vector paths divide.
 *
 * Every path must be bit-identical to the reference; tests/test_hif8_simd.c
 * and tests/exhaustive/hif8_exhaustive.c check that.
 */
#ifndef QS_HIF8_IMPL_H
#define QS_HIF8_IMPL_H

#include <stdint.h>
#include <string.h>

#include "qs/hif8.h"
#include "qs/hif8_test.h" /* the per-path entry points (hif8_*_avx2_impl, ...) */

#define HIF8_BITS_MAX 0x47000000u       /* 32768 */
#define HIF8_BITS_INF_SLOT 0x47400000u  /* 49152: the value slot of the Inf code */
#define HIF8_BITS_2P16 0x47800000u      /* 65536 */
#define HIF8_BITS_MIN 0x34800000u       /* 2^-22, smallest non-zero HiF8 */
#define HIF8_BITS_UNDER 0x34000000u     /* 2^-23, smallest input that is not 0 */
#define HIF8_SQ_LANES 16                /* partial sums for sq_err / sq_sum */
#define HIF8_CODE_TABLE_LEN 40

/* Code (sign 0, mantissa 0) of the HiF8 value 2^E, indexed by the fp32 biased
 * exponent of the rounded magnitude minus 104: index 0 = zero (code 0x00),
 * 1..7 = denormals 2^-22..2^-16, 8..38 = normals 2^-15..2^15, 39 = 2^16 (a
 * non-saturating round-up carry out of 2^15: the Inf code).  The kept mantissa
 * bits are ORed in; 49152 (2^15 with mantissa 1) therefore also gives 0x6F.
 * Defined in hif8_tables.c, read only by the vector paths. */
extern const int32_t hif8_code_base_impl[HIF8_CODE_TABLE_LEN];

/* Fold the 16 partial sums in the documented order (8, 4, 2, 1); s is clobbered. */
static inline double hif8_lanes_fold_impl(double s[HIF8_SQ_LANES])
{
    for (int w = HIF8_SQ_LANES / 2; w > 0; w /= 2)
        for (int j = 0; j < w; j++)
            s[j] += s[j + w];
    return s[0];
}

/* tab[j] = fp32 bits of RN((1 + j/8) / scale) minus the bits of 2^0's exponent
 * (127 << 23), so tab[j] + (biased exponent of q << 23) are the bits of q / scale.
 * Returns 1 when every q / scale with q in [2^-22, 2^15] is a normal fp32 (the
 * table path is exact), 0 otherwise (divide). */
static inline int hif8_recip_table_impl(float scale, int32_t tab[8])
{
    int ok = scale > 0.0f;
    for (int j = 0; j < 8; j++) {
        float t = ((float)(8 + j) / 8.0f) / scale;
        uint32_t b;
        memcpy(&b, &t, sizeof b);
        uint32_t be = (b >> 23) & 0xFFu; /* biased exponent; 2^-22 .. 2^15 moves it by -22 .. +15 */
        ok = ok && be >= 23 && be <= 239;
        tab[j] = (int32_t)(b - (127u << 23));
    }
    return ok;
}

#endif
