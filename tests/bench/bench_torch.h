/* bench_torch.h: how the benches run their PyTorch baselines (issue 13.7:
 * honest baselines).  Every baseline runs twice:
 *  - out of the box: /usr/bin/python3 as installed (glibc malloc, the default
 *    OpenMP wait policy);
 *  - tuned, as PyTorch's CPU performance guides run it: LD_PRELOAD of
 *    libtcmalloc_minimal (Debian libtcmalloc-minimal4, `make deps`) and
 *    OMP_WAIT_POLICY=PASSIVE; without the library only the wait policy is set,
 *    and the label says so.
 * Targets are judged against the tuned run.  The load average is read next to
 * each run (the machine may be shared: figures are provisional). */
#ifndef QS_BENCH_TORCH_H
#define QS_BENCH_TORCH_H

#include <stdio.h>
#include <unistd.h>

#define BENCH_TCMALLOC "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"

/* The environment prefix of a baseline command ("" out of the box). */
static inline const char *bench_torch_env(int tuned)
{
    if (!tuned)
        return "";
    return access(BENCH_TCMALLOC, R_OK) == 0
               ? "LD_PRELOAD=" BENCH_TCMALLOC " OMP_WAIT_POLICY=PASSIVE "
               : "OMP_WAIT_POLICY=PASSIVE ";
}

/* What the tuned run had, for the report. */
static inline const char *bench_torch_tuning(void)
{
    return access(BENCH_TCMALLOC, R_OK) == 0
               ? "tcmalloc + OMP_WAIT_POLICY=PASSIVE"
               : "OMP_WAIT_POLICY=PASSIVE only (libtcmalloc-minimal4 not installed)";
}

/* 1-minute load average, -1 when unreadable. */
static inline double bench_loadavg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

#endif
