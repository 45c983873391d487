/* hif8.h: the HiF8 (Ascend HiFloat8) number format, per ../shared/spec/hif8.md.
 *
 * Code layout S | DOT | EXP | MAN (tapered precision); 0x00 is the only zero,
 * 0x80 the only NaN, 0x6F/0xEF are +-Inf, 0x6E/0xEE are +-32768 (largest finite).
 * Encoding rounds the exact fp32 value to the nearest HiF8 value, ties away from
 * zero ("TA").  Two overflow modes:
 *   non-saturating (spec reference): |x| >= 40960 and +-Inf -> +-Inf;
 *   saturating (QAT): |x| > 32768 and +-Inf -> +-32768.
 * NaN encodes to 0x80 in both modes.  fp32 subnormals and |x| < 2^-23 encode to 0x00.
 */
#ifndef QS_HIF8_H
#define QS_HIF8_H

#include <stddef.h>
#include <stdint.h>

#define HIF8_CODE_ZERO 0x00
#define HIF8_CODE_NAN 0x80
#define HIF8_CODE_POS_INF 0x6F
#define HIF8_CODE_NEG_INF 0xEF
#define HIF8_CODE_POS_MAX 0x6E
#define HIF8_CODE_NEG_MAX 0xEE
#define HIF8_MAX_FINITE 32768.0f        /* 2^15 */
#define HIF8_OVERFLOW_THRESHOLD 40960.0f /* 1.25 * 2^15: first |x| that is Inf (non-saturating) */

enum { HIF8_NONSAT = 0, HIF8_SAT = 1 };

/* Value of a code (exact; 0x80 -> quiet NaN, 0x6F/0xEF -> +-Inf, never -0). */
float hif8_decode(uint8_t code);
/* fp32 -> code, mode HIF8_NONSAT or HIF8_SAT. */
uint8_t hif8_encode(float x, int mode);

/* Statistics of one fused fake-quant pass. */
typedef struct hif8_stats {
    float amax;          /* max |x| over the input (NaN inputs ignored) */
    size_t n_clipped;    /* elements with |x * scale| > 32768 */
    size_t n_underflow;  /* non-zero inputs whose output is 0 */
    size_t n_nan;        /* NaN inputs (output NaN; callers treat as an error) */
    double sq_err;       /* sum of (y - x)^2, when requested; else 0 */
    double sq_sum;       /* sum of x^2, when requested (QSNR = 10 log10(sq_sum / sq_err)); else 0 */
} hif8_stats;

/* Fused fake-quant: y[i] = decode(encode_sat(x[i] * scale)) / scale, plus stats,
 * in one read of x.  scale > 0 and finite.  x and y may alias (in place).
 * Dispatches to the fastest path the CPU supports; every path is bit-identical
 * in y, amax and the counts. */
void hif8_fakequant(const float *x, float *y, size_t n, float scale, int want_sq_err,
                    hif8_stats *st);

/* The portable scalar reference for the above (always built, used by tests). */
void hif8_fakequant_ref(const float *x, float *y, size_t n, float scale, int want_sq_err,
                        hif8_stats *st);

#endif
