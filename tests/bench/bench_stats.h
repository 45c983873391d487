/* bench_stats.h: the timing helpers the benches share: a clock in seconds
 * (wall: CLOCK_MONOTONIC; CPU: CLOCK_PROCESS_CPUTIME_ID or
 * CLOCK_THREAD_CPUTIME_ID, which load distorts less on a shared machine) and
 * the median of a sample (sorted in place; the mean of the middle two for an
 * even count). */
#ifndef QS_BENCH_STATS_H
#define QS_BENCH_STATS_H

#include <stdlib.h>
#include <time.h>

static inline double bench_clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
