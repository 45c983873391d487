/* hif8_test.h: NOT API.  The per-path HiF8 entry points, declared for the code
 * that compares every path with the scalar reference bit for bit
 * (tests/test_hif8_simd.c, tests/bench/bench_hif8.c,
 * tests/exhaustive/hif8_exhaustive.c).  Everything else calls hif8_fakequant /
 * hif8_codes_encode (qs/hif8.h), which pick the path by cpu_level().  Only
 * tests and src/kernels may include this header (make lint); names and
 * signatures may change without notice.
 */
#ifndef QS_HIF8_TEST_H
#define QS_HIF8_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "qs/hif8.h"

/* Same contracts as hif8_fakequant / hif8_codes_encode (the _ref one is the
 * scalar path: codes[i] = hif8_encode(x[i], mode)).  Call the avx2 / avx512
 * ones only when cpu_detected_level() has that ISA. */
void hif8_fakequant_avx2_impl(const float *x, float *y, size_t n, float scale, int want_sq_err,
                              hif8_stats *st);
void hif8_fakequant_avx512_impl(const float *x, float *y, size_t n, float scale,
                                int want_sq_err, hif8_stats *st);
void hif8_codes_encode_ref_impl(const float *x, uint8_t *codes, size_t n, int mode);
void hif8_codes_encode_avx2_impl(const float *x, uint8_t *codes, size_t n, int mode);
void hif8_codes_encode_avx512_impl(const float *x, uint8_t *codes, size_t n, int mode);
/* hif8_scaled_values (the ref: through the codes) and the max |x| over non-NaN x
 * behind hif8_row_scale (0 for none). */
size_t hif8_scaled_values_ref_impl(const float *x, float *y, size_t n, float scale);
size_t hif8_scaled_values_avx512_impl(const float *x, float *y, size_t n, float scale);
float hif8_absmax_ref_impl(const float *x, size_t n);
float hif8_absmax_avx512_impl(const float *x, size_t n);

#endif
