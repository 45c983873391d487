/* hif8.c: scalar HiF8 codec (the reference path) and the run-time dispatch.
 *
 * Encoding follows the bit-level recipe of spec/hif8.md §6: unpack fp32, pick
 * the mantissa width M(E) of the binade, add half of the last kept position to
 * the 23-bit fraction (so ties go away from zero), carry into the exponent,
 * then pack DOT/EXP/MAN (§2-§3).  Denormal binades E in [-22, -16] hold only
 * powers of two; their decision threshold is the linear midpoint 1.5 * 2^E.
 * Decoding builds the fp32 bit pattern directly (every HiF8 value is an fp32
 * value), so it is exact and needs no libm.
 *
 * hif8_fakequant_ref() is the definition the vector paths are tested against:
 * it goes through codes (encode, decode), an independent route from the
 * vector paths' in-place rounding (see hif8_impl.h).
 */
#include "qs/hif8.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "hif8_impl.h"
#include "qs/cpu.h"

static inline uint32_t f32_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static inline float f32_from_bits(uint32_t b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* stored mantissa bits by |E| for normal binades (spec §5) */
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

void hif8_fields_get(uint8_t code, hif8_fields *f)
{
    uint32_t c = code & 0x7Fu;
    memset(f, 0, sizeof *f);
    f->sign = code >> 7;
    f->prefix_len = 4;
    f->dot = HIF8_DOT_DML;
    if ((c >> 3) == 0) {
        f->cls = code == HIF8_CODE_NAN ? HIF8_CLASS_NAN
                 : c == 0              ? HIF8_CLASS_ZERO
                                       : HIF8_CLASS_DENORMAL;
        f->exponent = c ? (int)c - 23 : 0;
        return;
    }
    if ((c >> 5) == 3) { f->dot = 4; f->prefix_len = 2; }
    else if ((c >> 5) == 2) { f->dot = 3; f->prefix_len = 2; }
    else if ((c >> 5) == 1) { f->dot = 2; f->prefix_len = 2; }
    else if ((c >> 4) == 1) { f->dot = 1; f->prefix_len = 3; }
    else { f->dot = 0; f->prefix_len = 4; }
    f->mant_bits = 7 - f->prefix_len - f->dot;
    f->mantissa = (int)(c & ((1u << f->mant_bits) - 1));
    if (f->dot > 0) {
        uint32_t expf = (c >> f->mant_bits) & ((1u << f->dot) - 1);
        int mag = (1 << (f->dot - 1)) + (int)(expf & ((1u << (f->dot - 1)) - 1));
        f->exponent = (expf >> (f->dot - 1)) ? -mag : mag;
    }
    f->cls = c == HIF8_CODE_POS_INF ? HIF8_CLASS_INF : HIF8_CLASS_NORMAL;
}

const char *hif8_class_name(int cls)
{
    static const char *const names[] = {"zero", "nan", "inf", "normal", "denormal"};
    return cls >= 0 && cls <= HIF8_CLASS_DENORMAL ? names[cls] : "unknown";
}

char *hif8_fields_format(uint8_t code, char *buf, size_t buf_bytes)
{
    hif8_fields f;
    hif8_fields_get(code, &f);
    char bits[9];
    for (int j = 0; j < 8; j++)
        bits[j] = (char)('0' + ((code >> (7 - j)) & 1));
    bits[8] = 0;
    int dlen = f.dot > 0 ? f.dot : 0;
    /* sign _ prefix _ [exponent _] mantissa-or-k */
    snprintf(buf, buf_bytes, "%c_%.*s%s%.*s_%s", bits[0], f.prefix_len, bits + 1,
             dlen ? "_" : "", dlen, bits + 1 + f.prefix_len, bits + 1 + f.prefix_len + dlen);
    return buf;
}

float hif8_decode(uint8_t code)
{
    hif8_fields f;
    hif8_fields_get(code, &f);
    uint32_t sign = (uint32_t)f.sign << 31;
    switch (f.cls) {
    case HIF8_CLASS_NAN: return NAN;
    case HIF8_CLASS_ZERO: return 0.0f;
    case HIF8_CLASS_INF: return f32_from_bits(sign | 0x7F800000u);
    default: /* normal, or a DML power of two (no mantissa bits) */
        return f32_from_bits(sign | ((uint32_t)(f.exponent + 127) << 23) |
                             ((uint32_t)f.mantissa << (23 - f.mant_bits)));
    }
}

/* hif8_decode of every code, made once (pthread_once: callers may be threads)
 * and then read: a load per code instead of the field parse. */
static float hif8_decode_table[256];
static pthread_once_t hif8_decode_once = PTHREAD_ONCE_INIT;

static void hif8_decode_table_init(void)
{
    for (int c = 0; c < 256; c++)
        hif8_decode_table[c] = hif8_decode((uint8_t)c);
}

void hif8_codes_decode(const uint8_t *codes, float *y, size_t n)
{
    pthread_once(&hif8_decode_once, hif8_decode_table_init);
    for (size_t i = 0; i < n; i++)
        y[i] = hif8_decode_table[codes[i]];
}

void hif8_codes_encode_ref_impl(const float *x, uint8_t *codes, size_t n, int mode)
{
    for (size_t i = 0; i < n; i++)
        codes[i] = hif8_encode(x[i], mode);
}

void hif8_codes_encode(const float *x, uint8_t *codes, size_t n, int mode)
{
    int level = cpu_level();
    if (level >= CPU_LEVEL_AVX512)
        hif8_codes_encode_avx512_impl(x, codes, n, mode);
    else if (level >= CPU_LEVEL_AVX2)
        hif8_codes_encode_avx2_impl(x, codes, n, mode);
    else
        hif8_codes_encode_ref_impl(x, codes, n, mode);
}

void hif8_fakequant_ref(const float *x, float *y, size_t n, float scale, int want_sq_err,
                        hif8_stats *st)
{
    float amax = 0.0f;
    size_t n_clip = 0, n_under = 0, n_nan = 0;
    double sq[HIF8_SQ_LANES] = {0}, ss[HIF8_SQ_LANES] = {0};
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
            double e2 = e * e, v2 = (double)v * (double)v;
            sq[i % HIF8_SQ_LANES] += e2;
            ss[i % HIF8_SQ_LANES] += v2;
        }
        y[i] = q;
    }
    st->amax = amax;
    st->n_clipped = n_clip;
    st->n_underflow = n_under;
    st->n_nan = n_nan;
    st->sq_err = want_sq_err ? hif8_lanes_fold_impl(sq) : 0.0;
    st->sq_sum = want_sq_err ? hif8_lanes_fold_impl(ss) : 0.0;
}

void hif8_fakequant(const float *x, float *y, size_t n, float scale, int want_sq_err,
                    hif8_stats *st)
{
    int level = cpu_level();
    if (level >= CPU_LEVEL_AVX512)
        hif8_fakequant_avx512_impl(x, y, n, scale, want_sq_err, st);
    else if (level >= CPU_LEVEL_AVX2)
        hif8_fakequant_avx2_impl(x, y, n, scale, want_sq_err, st);
    else
        hif8_fakequant_ref(x, y, n, scale, want_sq_err, st);
}
