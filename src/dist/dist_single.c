/* dist_single.c: dist.h for the default (MPI-free) build: one process, rank 0
 * of 1.  Reductions leave the caller's buffer as it is (the sum over one rank),
 * gathers copy, agreement returns the caller's own status. */
#include <stdlib.h>
#include <string.h>

#include "qs/dist.h"

static int dist_agreed_flag;   /* dist_failure_agreed(): process state, like MPI's */

int dist_init(int *argc, char ***argv, qs_diag *d)
{
    (void)argc;
    (void)argv;
    (void)d;
    return 0;
}

void dist_finalize(void) {}
int dist_rank(void) { return 0; }
int dist_size(void) { return 1; }
const char *dist_impl_name(void) { return "single"; }

int dist_allreduce_sum_f32(float *buf, size_t n, qs_diag *d)
{
    (void)buf, (void)n, (void)d;
    return 0;
}

int dist_allreduce_sum_f64(double *buf, size_t n, qs_diag *d)
{
    (void)buf, (void)n, (void)d;
    return 0;
}

int dist_allreduce_sum_i64(int64_t *buf, size_t n, qs_diag *d)
{
    (void)buf, (void)n, (void)d;
    return 0;
}

int dist_allreduce_max_f32(float *buf, size_t n, qs_diag *d)
{
    (void)buf, (void)n, (void)d;
    return 0;
}

int dist_allreduce_max_i64(int64_t *buf, size_t n, qs_diag *d)
{
    (void)buf, (void)n, (void)d;
    return 0;
}

int dist_bcast(void *buf, size_t bytes, int root, qs_diag *d)
{
    (void)buf, (void)bytes, (void)d;
    return root == 0 ? 0 : diag_set(d, QS_EINVAL, NULL, -1, "dist: no rank %d in a 1-process job", root);
}

int dist_gatherv(const void *send, void *recv, const size_t *counts, int root, qs_diag *d)
{
    if (root != 0)
        return diag_set(d, QS_EINVAL, NULL, -1, "dist: no rank %d in a 1-process job", root);
    if (counts[0] && recv != send)
        memmove(recv, send, counts[0]);
    return 0;
}

int dist_allgather_f32(float *buf, const size_t *lo, qs_diag *d)
{
    (void)buf, (void)lo, (void)d;
    return 0;
}

int dist_gather_stream(const void *mine, const size_t *bytes, int root, size_t chunk_bytes,
                       dist_sink_fn sink, void *ctx, qs_diag *d)
{
    if (root != 0)
        return diag_set(d, QS_EINVAL, NULL, -1, "dist: no rank %d in a 1-process job", root);
    const unsigned char *p = mine;
    size_t chunk = chunk_bytes ? chunk_bytes : bytes[0] + 1;
    for (size_t off = 0; off < bytes[0]; off += chunk) {
        int rc = sink(ctx, p + off, bytes[0] - off < chunk ? bytes[0] - off : chunk, d);
        if (rc)
            return rc;
    }
    return 0;
}

int dist_agree(int rc, uint64_t check, const char *what, qs_diag *d)
{
    (void)check;
    (void)what;
    (void)d;
    if (rc < 0)
        dist_agreed_flag = 1;
    return rc;
}

int dist_failure_agreed(void) { return dist_agreed_flag; }

/* Like MPI_Abort: no atexit handlers, no flushing beyond what was written. */
void dist_abort(int code) { _Exit(code); }
