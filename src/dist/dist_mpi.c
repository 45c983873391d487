/* dist_mpi.c: dist.h on Open MPI (built only by `make MPI=1`, CC=mpicc).
 *
 * Everything runs on MPI_COMM_WORLD from the main thread (MPI_THREAD_FUNNELED:
 * OpenMP threads never call MPI).  MPI errors keep the default handler
 * (MPI_ERRORS_ARE_FATAL): a broken transport ends the job, it never hangs it.
 * Without MPI_Init (library users, the unit tests) every call acts as rank 0 of 1.
 *
 * The rank-ordered sum: per block of at most DIST_BLOCK_ELEMS elements, an
 * MPI_Alltoallv hands segment s of every rank's block to rank s (a reduce-scatter
 * whose operands arrive separately), rank s adds them in rank order, and an
 * MPI_Allgatherv returns the sums to everyone.  That moves the bytes a ring
 * all-reduce moves (2 (N-1)/N of the buffer per rank) and fixes the order of the
 * additions, which MPI_Allreduce does not (its ring starts each chunk at a
 * different rank).  Scratch: one block.
 */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qs/dist.h"
#include "qs/mem.h"

#define DIST_BLOCK_ELEMS ((size_t)1 << 22)   /* 16 MiB of floats per alltoallv round */
#define DIST_TAG_STREAM 7101

static int dist_inited_here, dist_agreed_flag;

static int dist_on(void)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    if (init)
        MPI_Finalized(&fin);
    return init && !fin;
}

int dist_init(int *argc, char ***argv, qs_diag *d)
{
    if (dist_on())
        return 0;
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return diag_set(d, QS_EIO, NULL, -1, "MPI_Init_thread failed");
    dist_inited_here = 1;
    return 0;
}

void dist_finalize(void)
{
    if (dist_inited_here && dist_on())
        MPI_Finalize();
    dist_inited_here = 0;
}

int dist_rank(void)
{
    int r = 0;
    if (dist_on())
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

int dist_size(void)
{
    int s = 1;
    if (dist_on())
        MPI_Comm_size(MPI_COMM_WORLD, &s);
    return s;
}

const char *dist_impl_name(void) { return "mpi"; }

static int dist_too_big(size_t n, qs_diag *d)
{
    return diag_set(d, QS_ERANGE, NULL, -1, "dist: %zu elements in one call (limit %d)", n, INT_MAX);
}

/* The rank-ordered in-place sum of n elements of `type` (esz bytes each). */
static int dist_sum_ordered(void *buf, size_t n, MPI_Datatype type, size_t esz, qs_diag *d)
{
    int N = dist_size(), me = dist_rank();
    if (N == 1 || n == 0)
        return 0;
    size_t blk = n < DIST_BLOCK_ELEMS ? n : DIST_BLOCK_ELEMS;
    unsigned char *scratch = qs_malloc((blk / (size_t)N + 1) * (size_t)N * esz);
    int *cnt = qs_malloc(4 * (size_t)N * sizeof *cnt);
    if (!scratch || !cnt) {
        qs_free(scratch);
        qs_free(cnt);
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory (all-reduce scratch)");
    }
    int *seg_len = cnt, *seg_lo = cnt + N, *rcnt = cnt + 2 * N, *rdis = cnt + 3 * N;
    unsigned char *base = buf;
    for (size_t b0 = 0; b0 < n; b0 += blk) {
        size_t m = n - b0 < blk ? n - b0 : blk;
        for (int s = 0; s < N; s++) {
            seg_lo[s] = (int)(m * (size_t)s / (size_t)N);
            seg_len[s] = (int)(m * (size_t)(s + 1) / (size_t)N) - seg_lo[s];
        }
        int mine = seg_len[me];
        for (int s = 0; s < N; s++) {
            rcnt[s] = mine;
            rdis[s] = s * mine;
        }
        unsigned char *blkp = base + b0 * esz;
        MPI_Alltoallv(blkp, seg_len, seg_lo, type, scratch, rcnt, rdis, type, MPI_COMM_WORLD);
        if (esz == sizeof(float)) {
            float *acc = (float *)(void *)scratch;
            for (int s = 1; s < N; s++) {
                const float *x = acc + (size_t)s * (size_t)mine;
                for (int i = 0; i < mine; i++)
                    acc[i] += x[i];
            }
        } else {
            double *acc = (double *)(void *)scratch;
            for (int s = 1; s < N; s++) {
                const double *x = acc + (size_t)s * (size_t)mine;
                for (int i = 0; i < mine; i++)
                    acc[i] += x[i];
            }
        }
        memcpy(blkp + (size_t)seg_lo[me] * esz, scratch, (size_t)mine * esz);
        MPI_Allgatherv(MPI_IN_PLACE, 0, type, blkp, seg_len, seg_lo, type, MPI_COMM_WORLD);
    }
    qs_free(scratch);
    qs_free(cnt);
    return 0;
}

int dist_allreduce_sum_f32(float *buf, size_t n, qs_diag *d)
{
    return dist_sum_ordered(buf, n, MPI_FLOAT, sizeof(float), d);
}

int dist_allreduce_sum_f64(double *buf, size_t n, qs_diag *d)
{
    return dist_sum_ordered(buf, n, MPI_DOUBLE, sizeof(double), d);
}

static int dist_allreduce_op(void *buf, size_t n, MPI_Datatype type, MPI_Op op, qs_diag *d)
{
    if (dist_size() == 1 || n == 0)
        return 0;
    if (n > INT_MAX)
        return dist_too_big(n, d);
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, type, op, MPI_COMM_WORLD);
    return 0;
}

int dist_allreduce_sum_i64(int64_t *buf, size_t n, qs_diag *d)
{
    return dist_allreduce_op(buf, n, MPI_INT64_T, MPI_SUM, d);
}

int dist_allreduce_max_f32(float *buf, size_t n, qs_diag *d)
{
    return dist_allreduce_op(buf, n, MPI_FLOAT, MPI_MAX, d);
}

int dist_allreduce_max_i64(int64_t *buf, size_t n, qs_diag *d)
{
    return dist_allreduce_op(buf, n, MPI_INT64_T, MPI_MAX, d);
}

int dist_bcast(void *buf, size_t bytes, int root, qs_diag *d)
{
    if (dist_size() == 1)
        return root == 0 ? 0 : diag_set(d, QS_EINVAL, NULL, -1, "dist: no rank %d", root);
    unsigned char *p = buf;
    for (size_t off = 0; off < bytes; off += INT_MAX) {
        size_t k = bytes - off < INT_MAX ? bytes - off : INT_MAX;
        MPI_Bcast(p + off, (int)k, MPI_BYTE, root, MPI_COMM_WORLD);
    }
    return 0;
}

int dist_gatherv(const void *send, void *recv, const size_t *counts, int root, qs_diag *d)
{
    int N = dist_size(), me = dist_rank();
    if (N == 1) {
        if (counts[0] && recv != send)
            memmove(recv, send, counts[0]);
        return 0;
    }
    int *c = qs_malloc(2 * (size_t)N * sizeof *c);
    if (!c)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    size_t off = 0;
    for (int r = 0; r < N; r++) {
        if (counts[r] > INT_MAX || off > INT_MAX) {
            qs_free(c);
            return dist_too_big(off + counts[r], d);
        }
        c[r] = (int)counts[r];
        c[N + r] = (int)off;
        off += counts[r];
    }
    MPI_Gatherv(send, c[me], MPI_BYTE, recv, c, c + N, MPI_BYTE, root, MPI_COMM_WORLD);
    qs_free(c);
    return 0;
}

int dist_allgather_f32(float *buf, const size_t *lo, qs_diag *d)
{
    int N = dist_size();
    if (N == 1)
        return 0;
    if (lo[N] > INT_MAX)
        return dist_too_big(lo[N], d);
    int *c = qs_malloc(2 * (size_t)N * sizeof *c);
    if (!c)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    for (int r = 0; r < N; r++) {
        c[r] = (int)(lo[r + 1] - lo[r]);
        c[N + r] = (int)lo[r];
    }
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, buf, c, c + N, MPI_FLOAT, MPI_COMM_WORLD);
    qs_free(c);
    return 0;
}

int dist_gather_stream(const void *mine, const size_t *bytes, int root, size_t chunk_bytes,
                       dist_sink_fn sink, void *ctx, qs_diag *d)
{
    int N = dist_size(), me = dist_rank();
    size_t chunk = chunk_bytes && chunk_bytes < INT_MAX ? chunk_bytes : (size_t)1 << 26;
    int rc = 0;
    if (me != root) {
        const unsigned char *p = mine;
        for (size_t off = 0; off < bytes[me]; off += chunk) {
            size_t k = bytes[me] - off < chunk ? bytes[me] - off : chunk;
            MPI_Send(p + off, (int)k, MPI_BYTE, root, DIST_TAG_STREAM, MPI_COMM_WORLD);
        }
        return 0;
    }
    unsigned char *tmp = N > 1 ? qs_malloc(chunk) : NULL;
    if (N > 1 && !tmp)
        rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory (gather buffer)");
    for (int r = 0; r < N; r++) {
        for (size_t off = 0; off < bytes[r]; off += chunk) {
            size_t k = bytes[r] - off < chunk ? bytes[r] - off : chunk;
            const void *src = (const unsigned char *)mine + off;
            if (r != root) {
                if (!tmp)   /* cannot drain without a buffer: end the job instead of blocking */
                    MPI_Abort(MPI_COMM_WORLD, 2);
                MPI_Recv(tmp, (int)k, MPI_BYTE, r, DIST_TAG_STREAM, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                src = tmp;
            }
            if (!rc)
                rc = sink(ctx, src, k, d);   /* after a failure: keep draining */
        }
    }
    qs_free(tmp);
    return rc;
}

int dist_agree(int rc, uint64_t check, const char *what, qs_diag *d)
{
    int N = dist_size(), me = dist_rank();
    if (N == 1) {
        if (rc < 0)
            dist_agreed_flag = 1;
        return rc;
    }
    /* errors (rank) before requests (N + rank); UINT64_MAX = fine */
    uint64_t v[3] = {rc == 0 ? UINT64_MAX : (uint64_t)(rc < 0 ? me : N + me), check, ~check};
    MPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    if (v[0] != UINT64_MAX) {
        int who = (int)(v[0] < (uint64_t)N ? v[0] : v[0] - (uint64_t)N);
        struct {
            int rc;
            qs_diag d;
        } msg;
        memset(&msg, 0, sizeof msg);
        if (me == who) {
            msg.rc = rc;
            if (d)
                msg.d = *d;
            else
                snprintf(msg.d.msg, sizeof msg.d.msg, "%s", qs_strerror(rc));
        }
        MPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, who, MPI_COMM_WORLD);
        if (d) {
            char line[QS_DIAG_PATH_MAX + QS_DIAG_MSG_MAX + 32];
            diag_format(&msg.d, line, sizeof line);
            diag_set(d, msg.rc, NULL, -1, "rank %d: %s", who, line);
        }
        if (msg.rc < 0)
            dist_agreed_flag = 1;
        return msg.rc;
    }
    if (v[1] == ~v[2])
        return 0;
    uint64_t c0 = check;   /* rank 0's, then the first rank that differs from it */
    MPI_Bcast(&c0, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    int64_t k = check != c0 ? me : N;
    MPI_Allreduce(MPI_IN_PLACE, &k, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
    uint64_t ck = check;
    MPI_Bcast(&ck, 1, MPI_UINT64_T, (int)k, MPI_COMM_WORLD);
    dist_agreed_flag = 1;
    return diag_set(d, QS_EINVAL, NULL, -1,
                    "rank %d: %s differs from rank 0's (hash %016llx, rank 0 has %016llx); "
                    "every rank must run the same binary on the same config and input files",
                    (int)k, what ? what : "state", (unsigned long long)ck,
                    (unsigned long long)c0);
}

int dist_failure_agreed(void) { return dist_agreed_flag; }

void dist_abort(int code)
{
    if (dist_on())
        MPI_Abort(MPI_COMM_WORLD, code);
    _Exit(code);
}
