/* hif8_w8a8.c: the operands of W8A8 arithmetic on HiF8 codes (see
 * include/qs/hif8.h): the quantizers' scale rule and the code-domain values
 * decode(encode_sat(x * scale)) a W8A8 matmul multiplies. */
#include <math.h>

#include "qs/cpu.h"
#include "qs/err.h"
#include "qs/hif8.h"
#include "qs/hif8_test.h"

#define HIF8_W8A8_CHUNK 1024

int hif8_scale_for_amax(float amax, int margin, float *scale)
{
    if (!(amax > 0.0f) || !isfinite(amax))
        return QS_ERANGE;
    float top = ldexpf(HIF8_MAX_FINITE, -margin);   /* 32768 / 2^margin, exact */
    float s = top / amax;
    if (!isfinite(s) || !(s > 0.0f))
        return QS_ERANGE;
    /* the boundary promise: amax * scale must not round above top */
    while (amax * s > top)
        s = nextafterf(s, 0.0f);
    *scale = s;
    return 0;
}

size_t hif8_scaled_values_ref_impl(const float *x, float *y, size_t n, float scale)
{
    float t[HIF8_W8A8_CHUNK];
    uint8_t c[HIF8_W8A8_CHUNK];
    size_t n_bad = 0;
    for (size_t i = 0; i < n; i += HIF8_W8A8_CHUNK) {
        size_t k = n - i < HIF8_W8A8_CHUNK ? n - i : HIF8_W8A8_CHUNK;
        for (size_t j = 0; j < k; j++) {
            t[j] = x[i + j] * scale;
            n_bad += !isfinite(x[i + j]);
        }
        hif8_codes_encode(t, c, k, HIF8_SAT);
        hif8_codes_decode(c, y + i, k);
    }
    return n_bad;
}

/* Through the codes (the definition); the AVX-512 path rounds in place. */
size_t hif8_scaled_values(const float *x, float *y, size_t n, float scale)
{
    if (cpu_level() >= CPU_LEVEL_AVX512)
        return hif8_scaled_values_avx512_impl(x, y, n, scale);
    return hif8_scaled_values_ref_impl(x, y, n, scale);
}

float hif8_absmax_ref_impl(const float *x, size_t n)
{
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    return amax;
}

float hif8_row_scale(const float *x, size_t n)
{
    float s;
    float amax = cpu_level() >= CPU_LEVEL_AVX512 ? hif8_absmax_avx512_impl(x, n)
                                                 : hif8_absmax_ref_impl(x, n);
    return hif8_scale_for_amax(amax, 0, &s) ? 1.0f : s;
}

float hif8_dequant_factor(float scale_x, float scale_w)
{
    return (float)(1.0 / ((double)scale_x * (double)scale_w));
}
