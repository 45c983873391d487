/* hif8.c: scalar HiF8 codec (reference path), following spec/hif8.md §2-§7.
 *
 * Encoding uses the bit-level recipe of spec §6: unpack fp32, pick the mantissa
 * width M(E) of the binade, add half of the last kept position to the 23-bit
 * fraction (ties therefore go away from zero), carry into the exponent, then
 * pack DOT/EXP/MAN.  Denormal binades E in [-22, -16] hold only powers of two;
 * their decision threshold is the linear midpoint 1.5 * 2^E.
 */
#include "qs/hif8.h"

#include <math.h>
#include <string.h>

static inline uint32_t f32_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

/* stored mantissa bits by |E| for normal binades */
static const uint8_t hif8_mant_bits[16] = {3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1};

/* Pack a normal value 2^E * (1 + mant / 2^M), E in [-15, 15], sign s. */
static uint8_t hif8_pack_normal(int E, uint32_t mant, uint32_t s)
{
    int ae = E < 0 ? -E : E;
    int M = hif8_mant_bits[ae];
    int D = ae == 0 ? 0 : ae == 1 ? 1 : ae <= 3 ? 2 : ae <= 7 ? 3 : 4;
    uint32_t prefix, prefix_len;
    switch (D) {
    case 4: prefix = 3; prefix_len = 2; break;
    case 3: prefix = 2; prefix_len = 2; break;
    case 2: prefix = 1; prefix_len = 2; break;
    case 1: prefix = 1; prefix_len = 3; break;
    default: prefix = 1; prefix_len = 4; break;
    }
    uint32_t expf = 0;
    if (D > 0)
        expf = ((uint32_t)(E < 0) << (D - 1)) | (uint32_t)(ae - (1 << (D - 1)));
    uint32_t code = (prefix << (7 - prefix_len)) | (expf << M) | mant;
    return (uint8_t)(code | (s << 7));
}

uint8_t hif8_encode(float x, int mode)
{
    uint32_t b = f32_bits(x);
    uint32_t s = b >> 31, a = b & 0x7FFFFFFFu;
    uint8_t ovf = mode == HIF8_SAT ? (uint8_t)(HIF8_CODE_POS_MAX | (s << 7))
                                   : (uint8_t)(HIF8_CODE_POS_INF | (s << 7));
    if (a > 0x7F800000u)
        return HIF8_CODE_NAN;
    if (a == 0x7F800000u)
        return ovf;
    if ((a >> 23) == 0)
        return HIF8_CODE_ZERO; /* +-0 and fp32 subnormals (< 2^-126) */
    int E = (int)(a >> 23) - 127;
    uint32_t f = a & 0x7FFFFFu;
    if (E < -23)
        return HIF8_CODE_ZERO;
    if (E == -23) /* [2^-23, 2^-22): 2^-23 is the midpoint to 0, ties up */
        return (uint8_t)(0x01 | (s << 7));
    if (E > 15)
        return ovf;
    if (E < -15) { /* denormal powers of two; threshold 1.5 * 2^E */
        int e = E + (f >= 0x400000u);
        if (e <= -16)
            return (uint8_t)((uint32_t)(e + 23) | (s << 7));
        return hif8_pack_normal(-15, 0, s);
    }
    int M = hif8_mant_bits[E < 0 ? -E : E];
    uint32_t r = f + (1u << (22 - M));
    if (r >> 23) {
        E++;
        r = 0;
    }
    uint32_t mant = r >> (23 - M);
    if (E == 16 || (E == 15 && mant))
        return ovf;
    return hif8_pack_normal(E, mant, s);
}

float hif8_decode(uint8_t code)
{
    uint32_t s = code >> 7, c = code & 0x7Fu;
    float sign = s ? -1.0f : 1.0f;
    if (code == HIF8_CODE_NAN)
        return NAN;
    if (c == HIF8_CODE_POS_INF)
        return sign * INFINITY;
    if ((c >> 3) == 0) { /* DML: 0000kkk */
        if (c == 0)
            return 0.0f;
        return sign * ldexpf(1.0f, (int)c - 23);
    }
    int D, prefix_len;
    if ((c >> 5) == 3) { D = 4; prefix_len = 2; }
    else if ((c >> 5) == 2) { D = 3; prefix_len = 2; }
    else if ((c >> 5) == 1) { D = 2; prefix_len = 2; }
    else if ((c >> 4) == 1) { D = 1; prefix_len = 3; }
    else { D = 0; prefix_len = 4; }
    int M = 7 - prefix_len - D;
    uint32_t mant = c & ((1u << M) - 1);
    int E = 0;
    if (D > 0) {
        uint32_t expf = (c >> M) & ((1u << D) - 1);
        int mag = (1 << (D - 1)) + (int)(expf & ((1u << (D - 1)) - 1));
        E = (expf >> (D - 1)) ? -mag : mag;
    }
    return sign * ldexpf(1.0f + (float)mant / (float)(1u << M), E);
}

void hif8_fakequant_ref(const float *x, float *y, size_t n, float scale, int want_sq_err,
                        hif8_stats *st)
{
    float amax = 0.0f;
    size_t n_clip = 0, n_under = 0, n_nan = 0;
    double sq = 0.0, ss = 0.0;
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        float a = fabsf(v);
        if (v != v) {
            n_nan++;
            y[i] = v;
            continue;
        }
        if (a > amax)
            amax = a;
        float t = v * scale;
        n_clip += fabsf(t) > HIF8_MAX_FINITE;
        float q = hif8_decode(hif8_encode(t, HIF8_SAT)) / scale;
        n_under += (q == 0.0f) & (v != 0.0f);
        if (want_sq_err) {
            double e = (double)q - (double)v;
            sq += e * e;
            ss += (double)v * v;
        }
        y[i] = q;
    }
    st->amax = amax;
    st->n_clipped = n_clip;
    st->n_underflow = n_under;
    st->n_nan = n_nan;
    st->sq_err = sq;
    st->sq_sum = ss;
}

void hif8_fakequant(const float *x, float *y, size_t n, float scale, int want_sq_err,
                    hif8_stats *st)
{
    hif8_fakequant_ref(x, y, n, scale, want_sq_err, st);
}
