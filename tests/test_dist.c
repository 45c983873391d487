/* test_dist.c: dist.h in one process (the default build's dist_single.c, and
 * dist_mpi.c without mpirun, which must behave the same): collectives leave the
 * caller's data as the one-rank result, streams arrive in chunks, agreement
 * returns the caller's status.  The multi-rank behaviour: test_cli_dist.c. */
#include <string.h>

#include "qs/dist.h"
#include "test.h"

TEST(dist, one_process_collectives_are_the_identity)
{
    qs_diag d = {0};
    ASSERT_EQ_INT(dist_rank(), 0);
    ASSERT_EQ_INT(dist_size(), 1);
    float f[3] = {1.5f, -0.0f, 3.0f};
    double g[2] = {0.1, 0.2};
    int64_t k[2] = {7, -3};
    ASSERT_OK(dist_allreduce_sum_f32(f, 3, &d), &d);
    ASSERT_OK(dist_allreduce_max_f32(f, 3, &d), &d);
    ASSERT_OK(dist_allreduce_sum_f64(g, 2, &d), &d);
    ASSERT_OK(dist_allreduce_sum_i64(k, 2, &d), &d);
    ASSERT_OK(dist_allreduce_max_i64(k, 2, &d), &d);
    ASSERT_TRUE(f[0] == 1.5f && f[1] == 0.0f && signbit(f[1]) && f[2] == 3.0f);
    ASSERT_TRUE(g[0] == 0.1 && g[1] == 0.2 && k[0] == 7 && k[1] == -3);
    char src[5] = "abcd", dst[5] = "";
    size_t counts[1] = {5};
    ASSERT_OK(dist_gatherv(src, dst, counts, 0, &d), &d);
    ASSERT_EQ_STR(dst, "abcd");
    ASSERT_OK(dist_bcast(src, 5, 0, &d), &d);
    ASSERT_EQ_INT(dist_bcast(src, 5, 1, &d), QS_EINVAL);   /* no rank 1 */
    size_t lo[2] = {0, 3};
    ASSERT_OK(dist_allgather_f32(f, lo, &d), &d);
    ASSERT_TRUE(f[2] == 3.0f);
}

typedef struct sink_ctx {
    char buf[32];
    size_t n;
    int calls, fail_at;
} sink_ctx;

static int test_sink(void *ctx, const void *data, size_t n, qs_diag *d)
{
    sink_ctx *s = ctx;
    if (++s->calls == s->fail_at)
        return diag_set(d, QS_EIO, NULL, -1, "sink full");
    memcpy(s->buf + s->n, data, n);
    s->n += n;
    return 0;
}

TEST(dist, gather_stream_hands_out_pieces_in_order)
{
    qs_diag d = {0};
    sink_ctx s = {{0}, 0, 0, 0};
    size_t bytes[1] = {10};
    ASSERT_OK(dist_gather_stream("0123456789", bytes, 0, 4, test_sink, &s, &d), &d);
    ASSERT_EQ_INT(s.calls, 3);   /* 4 + 4 + 2 */
    ASSERT_EQ_STR(s.buf, "0123456789");
    sink_ctx f = {{0}, 0, 0, 2};
    ASSERT_EQ_INT(dist_gather_stream("0123456789", bytes, 0, 4, test_sink, &f, &d), QS_EIO);
    ASSERT_EQ_STR(d.msg, "sink full");
}

TEST(dist, agreement_of_one_is_its_own_status)
{
    qs_diag d = {0};
    ASSERT_EQ_INT(dist_agree(0, 42, "x", &d), 0);
    ASSERT_EQ_INT(dist_agree(1, 0, NULL, &d), 1);   /* a request is not a failure */
    ASSERT_EQ_INT(dist_failure_agreed(), 0);
    diag_set(&d, QS_EIO, "f.bin", -1, "disk full");
    ASSERT_EQ_INT(dist_agree(QS_EIO, 0, NULL, &d), QS_EIO);
    ASSERT_EQ_STR(d.msg, "disk full");   /* one rank: no "rank K:" prefix */
    ASSERT_EQ_INT(dist_failure_agreed(), 1);
}
