/* hif8_exhaustive.c: every fp32 bit pattern through every HiF8 path (make test-exhaustive).
 *
 * For all 2^32 patterns, in chunks of 2^20 (OpenMP over chunks):
 *  - fake-quant, scalar reference vs AVX2 vs AVX-512 (paths the CPU has), at
 *    scale 1, 0.37 (both use the vector paths' reciprocal table) and 3e35
 *    (division path): y bit for bit, and per chunk amax, clipped, underflow,
 *    NaN counts, sq_err and sq_sum bit for bit;
 *  - encode to codes in both modes, reference vs AVX2 vs AVX-512;
 * then encode(decode(c)) == c for every non-NaN code in both modes (Inf codes
 * saturate to +-max).  Prints counts, mismatches and time; exit 1 on any
 * mismatch.  Takes minutes: the scalar reference is the slow part.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qs/cpu.h"
#include "qs/hif8.h"
#include "qs/hif8_test.h"
#include "qs/mem.h"

#define EXH_CHUNK_BITS 20
#define EXH_CHUNK ((size_t)1 << EXH_CHUNK_BITS)
#define EXH_N_CHUNKS ((size_t)1 << (32 - EXH_CHUNK_BITS))
#define EXH_MAX_REPORTS 20

typedef void (*fq_fn)(const float *, float *, size_t, float, int, hif8_stats *);
typedef void (*enc_fn)(const float *, uint8_t *, size_t, int);

static const float exh_scales[] = {1.0f, 0.37f, 3.0e35f};
#define EXH_N_SCALES (sizeof exh_scales / sizeof exh_scales[0])

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int stats_equal(const hif8_stats *a, const hif8_stats *b)
{
    return !memcmp(&a->amax, &b->amax, sizeof a->amax) && a->n_clipped == b->n_clipped &&
           a->n_underflow == b->n_underflow && a->n_nan == b->n_nan &&
           !memcmp(&a->sq_err, &b->sq_err, sizeof a->sq_err) &&
           !memcmp(&a->sq_sum, &b->sq_sum, sizeof a->sq_sum);
}

static long reports;

static void report_mismatch(const char *what, const char *path, uint32_t xb, float scale)
{
    long r;
#ifdef _OPENMP
#pragma omp atomic capture
#endif
    r = ++reports;
    if (r <= EXH_MAX_REPORTS)
        fprintf(stderr, "mismatch: %s %s x=0x%08X scale %a\n", what, path, xb, (double)scale);
}

/* Checks one chunk; returns the number of mismatching elements (or stats). */
static size_t check_chunk(uint32_t first, float *x, float *y_ref, float *y, uint8_t *c_ref,
                          uint8_t *c, int n_paths, const char *const *names, const fq_fn *fqs,
                          const enc_fn *encs)
{
    size_t bad = 0;
    for (size_t i = 0; i < EXH_CHUNK; i++) {
        uint32_t b = first + (uint32_t)i;
        memcpy(&x[i], &b, sizeof b);
    }
    for (size_t s = 0; s < EXH_N_SCALES; s++) {
        hif8_stats st_ref, st;
        hif8_fakequant_ref(x, y_ref, EXH_CHUNK, exh_scales[s], 1, &st_ref);
        for (int p = 0; p < n_paths; p++) {
            fqs[p](x, y, EXH_CHUNK, exh_scales[s], 1, &st);
            if (!stats_equal(&st, &st_ref)) {
                bad++;
                report_mismatch("fake-quant stats of chunk at", names[p], first, exh_scales[s]);
            }
            if (memcmp(y, y_ref, EXH_CHUNK * sizeof *y))
                for (size_t i = 0; i < EXH_CHUNK; i++)
                    if (memcmp(&y[i], &y_ref[i], sizeof *y)) {
                        bad++;
                        report_mismatch("fake-quant", names[p], first + (uint32_t)i, exh_scales[s]);
                    }
        }
    }
    for (int mode = 0; mode < 2; mode++) {
        hif8_codes_encode_ref_impl(x, c_ref, EXH_CHUNK, mode);
        for (int p = 0; p < n_paths; p++) {
            encs[p](x, c, EXH_CHUNK, mode);
            if (memcmp(c, c_ref, EXH_CHUNK))
                for (size_t i = 0; i < EXH_CHUNK; i++)
                    if (c[i] != c_ref[i]) {
                        bad++;
                        report_mismatch(mode ? "encode sat" : "encode nonsat", names[p],
                                        first + (uint32_t)i, 1.0f);
                    }
        }
    }
    return bad;
}

static size_t check_roundtrip(void)
{
    size_t bad = 0;
    for (int code = 0; code < 256; code++) {
        if (code == HIF8_CODE_NAN)
            continue;
        float v = hif8_decode((uint8_t)code);
        int inf = (code & 0x7F) == HIF8_CODE_POS_INF;
        int want_sat = inf ? (code & 0x80) | HIF8_CODE_POS_MAX : code;
        if (hif8_encode(v, HIF8_NONSAT) != code || hif8_encode(v, HIF8_SAT) != want_sat) {
            fprintf(stderr, "mismatch: encode(decode(0x%02X)) != 0x%02X\n", code, code);
            bad++;
        }
    }
    return bad;
}

int main(void)
{
    const char *names[2];
    fq_fn fqs[2];
    enc_fn encs[2];
    int n_paths = 0;
    if (cpu_detected_level() >= CPU_LEVEL_AVX2) {
        names[n_paths] = "avx2";
        fqs[n_paths] = hif8_fakequant_avx2_impl;
        encs[n_paths++] = hif8_codes_encode_avx2_impl;
    }
    if (cpu_detected_level() >= CPU_LEVEL_AVX512) {
        names[n_paths] = "avx512";
        fqs[n_paths] = hif8_fakequant_avx512_impl;
        encs[n_paths++] = hif8_codes_encode_avx512_impl;
    }
    printf("hif8_exhaustive: 2^32 fp32 patterns, paths:");
    for (int p = 0; p < n_paths; p++)
        printf(" %s", names[p]);
    printf(" vs scalar reference; fake-quant at %zu scales (+stats), encode in 2 modes\n",
           EXH_N_SCALES);
    fflush(stdout);
    double t0 = now_s();
    size_t bad = 0, done = 0;
    int alloc_failed = 0;
#ifdef _OPENMP
#pragma omp parallel reduction(+ : bad) reduction(| : alloc_failed)
#endif
    {
        float *x = qs_malloc(EXH_CHUNK * sizeof(float)), *y_ref = qs_malloc(EXH_CHUNK * sizeof(float)),
              *y = qs_malloc(EXH_CHUNK * sizeof(float));
        uint8_t *c_ref = qs_malloc(EXH_CHUNK), *c = qs_malloc(EXH_CHUNK);
        if (!x || !y_ref || !y || !c_ref || !c)
            alloc_failed = 1;
        else {
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 4)
#endif
            for (size_t k = 0; k < EXH_N_CHUNKS; k++) {
                bad += check_chunk((uint32_t)(k << EXH_CHUNK_BITS), x, y_ref, y, c_ref, c, n_paths,
                                   names, fqs, encs);
                size_t d;
#ifdef _OPENMP
#pragma omp atomic capture
#endif
                d = ++done;
                if (d % 512 == 0) {
#ifdef _OPENMP
#pragma omp critical
#endif
                    {
                        printf("  %zu/%zu chunks, %.0f s\n", d, EXH_N_CHUNKS, now_s() - t0);
                        fflush(stdout);
                    }
                }
            }
        }
        qs_free(x);
        qs_free(y_ref);
        qs_free(y);
        qs_free(c_ref);
        qs_free(c);
    }
    if (alloc_failed) {
        fprintf(stderr, "hif8_exhaustive: out of memory\n");
        return 2;
    }
    size_t bad_rt = check_roundtrip();
    double sec = now_s() - t0;
    unsigned long long n_checked = (unsigned long long)EXH_N_CHUNKS * EXH_CHUNK;
    printf("patterns: %llu; per pattern %zu fake-quant + 2 encode comparisons per path\n",
           n_checked, EXH_N_SCALES);
    printf("mismatches: %zu (vector paths) + %zu (encode(decode(c)) round trip, 255 codes)\n", bad,
           bad_rt);
    printf("time: %.1f s\n", sec);
    printf("%s\n", bad || bad_rt ? "FAIL" : "PASS");
    return bad || bad_rt ? 1 : 0;
}
