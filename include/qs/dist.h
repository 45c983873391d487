/* dist.h: the few collectives data-parallel training and sharded evaluation use.
 *
 * Two implementations, one picked by the Makefile (no other file has #ifdef):
 *   src/dist/dist_mpi.c     `make MPI=1` (CC=mpicc): Open MPI over MPI_COMM_WORLD;
 *   src/dist/dist_single.c  the default build: one process, rank 0 of 1, every
 *                           collective a no-op on the caller's own data.
 * The MPI build also behaves as one process when MPI was never initialised
 * (library users, the unit tests), so the library never requires mpirun.
 *
 * Numerical contract: dist_allreduce_sum_* add the ranks' buffers in RANK ORDER,
 * ((x0 + x1) + x2) + ..., element by element, identically on every rank, for
 * any rank count; so N ranks each holding one micro-batch's gradient produce the
 * bits one process gets by adding the same N gradients in micro-batch order.
 * Max and integer sums are exact in any order.
 *
 * Agreement (dist_agree) is how a job fails as one: every rank states its local
 * status; when any is non-zero every rank returns the same code and diag (the
 * failing rank's, its message prefixed "rank K: " when there are several ranks)
 * and only rank 0 prints it.  Callers keep one rule: between two agreements all
 * ranks run the same collectives, and local work that can fail is followed by an
 * agreement before the next other collective; a rank that leaves early therefore
 * meets the others in their next dist_agree (the CLI's closing agreement).
 *
 * Calls come from one thread (MPI_THREAD_FUNNELED).  Sizes are element counts
 * below 2^31 per call (the implementation chunks large buffers where it can).
 */
#ifndef QS_DIST_H
#define QS_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"

/* Start the runtime (MPI_Init_thread under mpirun; a singleton otherwise). */
int dist_init(int *argc, char ***argv, qs_diag *d);
void dist_finalize(void);               /* safe without dist_init */
int dist_rank(void);                    /* 0 without dist_init */
int dist_size(void);                    /* 1 without dist_init */
const char *dist_impl_name(void);       /* "mpi" or "single" */

/* In place, every rank ends with the same bits (see the contract above). */
int dist_allreduce_sum_f32(float *buf, size_t n, qs_diag *d);
int dist_allreduce_sum_f64(double *buf, size_t n, qs_diag *d);
int dist_allreduce_sum_i64(int64_t *buf, size_t n, qs_diag *d);
int dist_allreduce_max_f32(float *buf, size_t n, qs_diag *d);
int dist_allreduce_max_i64(int64_t *buf, size_t n, qs_diag *d);

/* buf[0..bytes) of rank root to every rank. */
int dist_bcast(void *buf, size_t bytes, int root, qs_diag *d);

/* Root receives every rank's send[0..counts[rank]) bytes concatenated in rank
 * order into recv (root's own first); counts[] is known to every rank. */
int dist_gatherv(const void *send, void *recv, const size_t *counts, int root, qs_diag *d);

/* buf holds n floats; rank r owns [lo[r], lo[r+1]) (lo[size] = n).  Afterwards
 * every rank holds every rank's part (ZeRO-1's parameter all-gather). */
int dist_allgather_f32(float *buf, const size_t *lo, qs_diag *d);

/* Root receives each rank's part (in rank order, its own first), in pieces of
 * at most chunk_bytes handed to sink(); other ranks send theirs.  bytes[] is
 * known to every rank.  A failing sink keeps draining (so no rank blocks) and
 * its first error is returned on root. */
typedef int (*dist_sink_fn)(void *ctx, const void *data, size_t n, qs_diag *d);
int dist_gather_stream(const void *mine, const size_t *bytes, int root, size_t chunk_bytes,
                       dist_sink_fn sink, void *ctx, qs_diag *d);

/* The job-wide status (see above).  rc: this rank's status (0 fine; < 0 an
 * error, > 0 a request such as "stop"), d its diag.  check: a value that must be
 * equal on every rank (a hash of the config or of the build; 0 when unused);
 * `what` names it for the message.  Returns 0 when every rank said 0 and the
 * checks agree; else the first error (lowest rank; errors before requests) with
 * its diag in d on every rank, or QS_EINVAL "rank K: WHAT differs from rank 0's". */
int dist_agree(int rc, uint64_t check, const char *what, qs_diag *d);
/* 1 once a dist_agree returned an error (< 0): every rank knows and fails with
 * it.  0: a failure (if any) is this rank's alone so far (the CLI's closing
 * agreement makes it everyone's). */
int dist_failure_agreed(void);

/* End every rank of the job now with exit status code (MPI_Abort; one process:
 * _Exit).  For the CLI's exit path only; the line explaining it is printed first. */
void dist_abort(int code);

#endif
