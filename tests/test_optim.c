/* test_optim.c: AdamW against torch.optim.AdamW, decoupled decay, clipping. */
#include <string.h>

#include "qs/cpu.h"
#include "qs/mem.h"
#include "qs/optim.h"
#include "test.h"

TEST(optim, adamw_three_steps_match_torch)
{
    /* reference: torch.optim.AdamW(lr=1e-2, betas=(0.9, 0.95), eps=1e-8,
     * weight_decay=0.1, foreach=False), three steps of the gradients below */
    float p[4] = {0.5f, -1.25f, 2.0f, 0.0f};
    const float g[3][4] = {{0.1f, -0.2f, 0.3f, 1e-3f}, {0.05f, 0.4f, -0.3f, 0.0f},
                           {-0.2f, 0.1f, 0.0f, 2.0f}};
    const double want[4] = {0.481172174, -1.24407661, 1.98496401, -0.0229942575};
    adamw_state s;
    ASSERT_EQ_INT(adamw_init(&s, 4), 0);
    adamw_hparams h = {0.9, 0.95, 1e-8, 0.1};
    for (int t = 0; t < 3; t++)
        adamw_step(&s, p, g[t], 1e-2, &h);
    ASSERT_EQ_INT(s.t, 3);
    for (int i = 0; i < 4; i++)
        ASSERT_NEAR(p[i], want[i], 2e-7);
    adamw_free(&s);
}

TEST(optim, weight_decay_is_decoupled_from_the_gradient)
{
    float p[2] = {3.0f, -2.0f};
    const float g[2] = {0.0f, 0.0f};
    adamw_state s;
    ASSERT_EQ_INT(adamw_init(&s, 2), 0);
    adamw_hparams h = {0.9, 0.999, 1e-8, 0.5};
    adamw_step(&s, p, g, 0.1, &h);
    ASSERT_NEAR(p[0], 3.0 * (1.0 - 0.05), 1e-6);
    ASSERT_NEAR(p[1], -2.0 * (1.0 - 0.05), 1e-6);
    adamw_free(&s);
}

TEST(optim, first_step_moves_each_weight_by_lr)
{
    /* bias correction: the first update is lr * g / |g| (eps aside) */
    float p[3] = {1.0f, 1.0f, 1.0f};
    const float g[3] = {1e-3f, -50.0f, 7.0f};
    adamw_state s;
    ASSERT_EQ_INT(adamw_init(&s, 3), 0);
    adamw_hparams h = {0.9, 0.95, 1e-12, 0.0};
    adamw_step(&s, p, g, 1e-3, &h);
    ASSERT_NEAR(p[0], 1.0 - 1e-3, 1e-7);
    ASSERT_NEAR(p[1], 1.0 + 1e-3, 1e-7);
    ASSERT_NEAR(p[2], 1.0 - 1e-3, 1e-7);
    adamw_free(&s);
}

TEST(optim, grad_norm_over_many_chunks_is_exact)
{
    size_t n = 300000;
    float *g = qs_malloc(n * sizeof *g);
    ASSERT_TRUE(g != NULL);
    for (size_t i = 0; i < n; i++)
        g[i] = (i % 2) ? 0.5f : -0.5f;
    double norm = optim_grad_norm(g, n);
    ASSERT_NEAR(norm, sqrt(0.25 * (double)n), 1e-9);
    qs_free(g);
}

TEST(optim, clip_scales_to_max_norm_only_when_above)
{
    float g[2] = {3.0f, 4.0f};
    double n = optim_grad_norm(g, 2);
    ASSERT_NEAR(n, 5.0, 1e-12);
    ASSERT_NEAR(optim_grad_clip(g, 2, n, 10.0), 1.0, 0);
    ASSERT_NEAR(g[0], 3.0, 0);
    double f = optim_grad_clip(g, 2, n, 1.0);
    ASSERT_NEAR(f, 0.2, 1e-6);
    ASSERT_NEAR(optim_grad_norm(g, 2), 1.0, 1e-6);
    ASSERT_NEAR(optim_grad_clip(g, 2, 1.0, 0.0), 1.0, 0);
}

static void optim_test_fill(float *g, size_t n, unsigned long seed, float amp)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ul + 1442695040888963407ul;
        g[i] = amp * ((float)(seed >> 40) / (float)(1ul << 24) - 0.5f);
    }
}

/* The trainer's fused form against the two passes it replaces, on the portable
 * loop and the dispatched one: params and moments the same bits, grads zeroed. */
TEST(optim, scaled_step_is_clip_then_step_bit_for_bit_and_zeroes_grads)
{
    const size_t n = 2 * 65536 + 37;   /* several chunks (threads) and a tail */
    float *buf = qs_malloc(5 * n * sizeof *buf);
    ASSERT_TRUE(buf != NULL);
    float *p1 = buf, *p2 = buf + n, *g1 = buf + 2 * n, *g2 = buf + 3 * n, *g0 = buf + 4 * n;
    adamw_hparams h = {0.9, 0.95, 1e-8, 0.1};
    int saved = cpu_level();
    for (int portable = 0; portable < 2; portable++) {
        if (portable)
            cpu_limit(CPU_LEVEL_AVX2);
        adamw_state s1, s2;
        ASSERT_EQ_INT(adamw_init(&s1, n), 0);
        ASSERT_EQ_INT(adamw_init(&s2, n), 0);
        optim_test_fill(p1, n, 1, 2.0f);
        memcpy(p2, p1, n * sizeof *p1);
        const double max_norm[3] = {1.0, 1e9, 0.0};   /* clipped, under the limit, off */
        for (int t = 0; t < 3; t++) {
            optim_test_fill(g1, n, 10 + (unsigned long)t, 0.05f);
            memcpy(g2, g1, n * sizeof *g1);
            double norm = optim_grad_norm(g1, n);
            ASSERT_TRUE(t != 0 || norm > max_norm[0]);
            float f = optim_grad_clip_factor(norm, max_norm[t]);
            ASSERT_NEAR(optim_grad_clip(g1, n, norm, max_norm[t]), f, 0);
            adamw_step(&s1, p1, g1, 1e-3, &h);
            adamw_step_scaled(&s2, p2, g2, f, 1, 1e-3, &h);
            ASSERT_TRUE(memcmp(p1, p2, n * sizeof *p1) == 0);
            ASSERT_TRUE(memcmp(s1.m, s2.m, n * sizeof *p1) == 0);
            ASSERT_TRUE(memcmp(s1.v, s2.v, n * sizeof *p1) == 0);
            memset(g0, 0, n * sizeof *g0);
            ASSERT_TRUE(memcmp(g2, g0, n * sizeof *g0) == 0);
        }
        /* zero_grads = 0 leaves the gradients as they were */
        optim_test_fill(g1, n, 99, 0.05f);
        memcpy(g2, g1, n * sizeof *g1);
        adamw_step_scaled(&s2, p2, g2, 0.5f, 0, 1e-3, &h);
        ASSERT_TRUE(memcmp(g1, g2, n * sizeof *g1) == 0);
        cpu_limit(saved);
        adamw_free(&s1);
        adamw_free(&s2);
    }
    qs_free(buf);
}

static void optim_test_segment_count(void *ctx, size_t lo, size_t hi)
{
    size_t *seen = ctx;   /* [0]: segments, [1]: the end of the last one */
    if (lo == seen[1])
        seen[1] = hi;
    seen[0]++;
}

/* A step in segments (the trainer's, weight by weight) gives the step's bits
 * and calls back once per non-empty segment, in order, covering every element. */
TEST(optim, segmented_step_equals_the_whole_step_bit_for_bit)
{
    const size_t n = 3 * 65536 + 1000;
    const size_t ends[] = {0, 17, 4096, 4096, 70000, 70001, 2 * 65536 + 5, n};
    float *buf = qs_malloc(4 * n * sizeof *buf);
    ASSERT_TRUE(buf != NULL);
    float *p1 = buf, *p2 = buf + n, *g1 = buf + 2 * n, *g2 = buf + 3 * n;
    adamw_hparams h = {0.9, 0.95, 1e-8, 0.1};
    int saved = cpu_level();
    for (int portable = 0; portable < 2; portable++) {
        if (portable)
            cpu_limit(CPU_LEVEL_AVX2);
        adamw_state s1, s2;
        ASSERT_EQ_INT(adamw_init(&s1, n), 0);
        ASSERT_EQ_INT(adamw_init(&s2, n), 0);
        optim_test_fill(p1, n, 3, 2.0f);
        memcpy(p2, p1, n * sizeof *p1);
        for (int t = 0; t < 2; t++) {
            optim_test_fill(g1, n, 20 + (unsigned long)t, 0.05f);
            memcpy(g2, g1, n * sizeof *g1);
            size_t seen[2] = {0, 0};
            adamw_step_scaled(&s1, p1, g1, 0.75f, 1, 1e-3, &h);
            adamw_step_scaled_segments(&s2, p2, g2, 0.75f, 1, 1e-3, &h, ends,
                                       (int)(sizeof ends / sizeof ends[0]),
                                       optim_test_segment_count, seen);
            ASSERT_EQ_INT((int)seen[0], 6);   /* the empty [0, 0), [4096, 4096), [n, n) skipped */
            ASSERT_TRUE(seen[1] == n);
            ASSERT_TRUE(memcmp(p1, p2, n * sizeof *p1) == 0);
            ASSERT_TRUE(memcmp(s1.m, s2.m, n * sizeof *p1) == 0);
            ASSERT_TRUE(memcmp(s1.v, s2.v, n * sizeof *p1) == 0);
            ASSERT_TRUE(memcmp(g1, g2, n * sizeof *g1) == 0);   /* both zeroed */
            ASSERT_TRUE(s1.t == s2.t);
        }
        cpu_limit(saved);
        adamw_free(&s1);
        adamw_free(&s2);
    }
    qs_free(buf);
}

/* The norm's documented order: a double sum per 65536-element chunk, the chunk
 * sums added in chunk order; the interleaved blocks must keep it bit for bit
 * (two groups of 64 chunks, full and partial blocks of 8, a short last chunk). */
TEST(optim, grad_norm_keeps_the_chunk_order_bit_for_bit)
{
    const size_t chunk = 65536, sizes[2] = {65 * chunk + 123, 16 * chunk};
    float *g = qs_malloc(sizes[0] * sizeof *g);
    ASSERT_TRUE(g != NULL);
    optim_test_fill(g, sizes[0], 5, 3.0f);
    for (int k = 0; k < 2; k++) {
        size_t n = sizes[k];
        double total = 0.0;
        for (size_t lo = 0; lo < n; lo += chunk) {
            double acc = 0.0;
            for (size_t i = lo; i < lo + chunk && i < n; i++)
                acc += (double)g[i] * g[i];
            total += acc;
        }
        double want = sqrt(total), got = optim_grad_norm(g, n);
        ASSERT_TRUE(memcmp(&want, &got, sizeof got) == 0);
    }
    qs_free(g);
}
