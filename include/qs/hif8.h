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

/* Array forms: codes[i] = hif8_encode(x[i], mode) (vectorised, dispatched like
 * hif8_fakequant; every path gives the same codes) and y[i] = hif8_decode(codes[i]). */
void hif8_codes_encode(const float *x, uint8_t *codes, size_t n, int mode);
void hif8_codes_decode(const uint8_t *codes, float *y, size_t n);

/* Fields of a code (spec §2-§4), as in the code tables. */
enum { HIF8_CLASS_ZERO, HIF8_CLASS_NAN, HIF8_CLASS_INF, HIF8_CLASS_NORMAL, HIF8_CLASS_DENORMAL };
#define HIF8_DOT_DML (-1)
typedef struct hif8_fields {
    int cls;        /* HIF8_CLASS_* */
    int sign;       /* bit 7 */
    int dot;        /* dot value D = stored exponent bits 0..4, or HIF8_DOT_DML (prefix 0000) */
    int prefix_len; /* DOT prefix bits: 2, 3 or 4 */
    int exponent;   /* E: normal 2^E binade, denormal k - 23, Inf 15 (its pattern); 0 for zero/NaN */
    int mant_bits;  /* stored mantissa bits M (0 for DML codes) */
    int mantissa;   /* stored mantissa field */
} hif8_fields;

void hif8_fields_get(uint8_t code, hif8_fields *f);
/* Class name: "zero", "nan", "inf", "normal", "denormal". */
const char *hif8_class_name(int cls);
/* Binary spelling split as sign_dot_exponent_mantissa, e.g. 0x10 -> "0_001_0_000",
 * 0x08 -> "0_0001_000" (no exponent field), DML codes "0_0000_kkk".  buf >= 12 bytes. */
char *hif8_fields_format(uint8_t code, char *buf, size_t buf_bytes);

/* Statistics of one fused fake-quant pass. */
typedef struct hif8_stats {
    float amax;          /* max |x| over the input (NaN inputs ignored) */
    size_t n_clipped;    /* elements with |x * scale| > 32768 */
    size_t n_underflow;  /* non-zero inputs whose output is 0 */
    size_t n_nan;        /* NaN inputs (output NaN; callers treat as an error) */
    double sq_err;       /* sum of (y - x)^2 over non-NaN x, when requested; else 0 */
    double sq_sum;       /* sum of x^2 over non-NaN x, when requested; else 0
                            (QSNR = 10 log10(sq_sum / sq_err)) */
} hif8_stats;

/* Fused fake-quant: y[i] = decode(encode_sat(x[i] * scale)) / scale, plus stats,
 * in one read of x.  scale > 0 and finite (other scales: unspecified output).
 * x and y may alias exactly (in place), not partially.
 *
 * Contract, identical in every path (scalar, AVX2, AVX-512), bit for bit:
 *  - x[i] * scale and the final division are single correctly rounded fp32
 *    operations, never a multiply by 1/scale (the vector paths get the same
 *    bits from a small exact reciprocal table, see src/kernels/hif8_impl.h);
 *  - NaN x[i]: y[i] = x[i] (same bits), counted in n_nan, excluded from all
 *    other statistics;  +-Inf x[i]: y = +-32768 / scale, clipped, amax = Inf;
 *  - n_underflow counts x[i] != 0 with y[i] == 0 (includes fp32 underflow of
 *    the division);
 *  - sq_err/sq_sum are double sums of e*e with e = (double)y - (double)x, and
 *    of (double)x * x (no FMA); element i goes to partial sum i mod 16 (counted
 *    from x[0]), added in element order, and the 16 partials are folded
 *    pairwise (8, 4, 2, 1), so the result does not depend on the vector width.
 * Dispatches to the fastest path cpu_level() allows. */
void hif8_fakequant(const float *x, float *y, size_t n, float scale, int want_sq_err,
                    hif8_stats *st);

/* W8A8 on codes (hif8_w8a8.c).  The quantizers' scale rule (quant.h):
 * scale = 32768 / 2^margin / amax, nudged down one ulp at a time while
 * fl(amax * scale) > 32768 / 2^margin; QS_ERANGE for an amax that is not > 0
 * and finite or a scale that is not finite. */
int hif8_scale_for_amax(float amax, int margin, float *scale);
/* Current scaling of one row (a token), margin 0: 32768 / max|x|, or 1 when
 * the row is all zero (or holds no finite maximum), as quant_apply falls back. */
float hif8_row_scale(const float *x, size_t n);
/* Code-domain values: y[i] = decode(encode_sat(fl(x[i] * scale))), the HiF8
 * values a W8A8 matmul multiplies (exact in bf16 and fp32; the fake-quantized
 * value is y[i] / scale).  Returns how many x[i] are not finite (NaN gives
 * NaN, +-Inf the saturated +-32768: callers refuse both, as quant_apply does). */
size_t hif8_scaled_values(const float *x, float *y, size_t n, float scale);

/* The one factor that takes a W8A8 product back to real units:
 * fl(1 / (scale_x * scale_w)), the product and quotient in double. */
float hif8_dequant_factor(float scale_x, float scale_w);

/* The portable scalar reference for the above (always built, used by tests). */
void hif8_fakequant_ref(const float *x, float *y, size_t n, float scale, int want_sq_err,
                        hif8_stats *st);

#endif
