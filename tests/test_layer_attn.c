/* test_layer_attn.c: the tiled (transposed-keys) attention path equals the row-by-row
 * path, with GQA, a KV cache offset and saved probabilities; RoPE tables follow
 * HF's inverse frequencies and llama3 scaling. */
#include <math.h>

#include "qs/cpu.h"
#include "qs/err.h"
#include "qs/layers.h"
#include "qs/mem.h"
#include "test.h"

static void fill(float *x, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        m = e > m || e != e ? e : m;
    }
    return m;
}

TEST(layer_attn, tiled_path_matches_rows_with_gqa_and_cache_offset)
{
    const int B = 2, T = 12, pos0 = 5, Tcap = 20, H = 6, KVH = 2, hd = 16;
    size_t nq = (size_t)B * T * H * hd, nkv = (size_t)B * Tcap * KVH * hd;
    float *q = qs_malloc(nq * 4), *k = qs_malloc(nkv * 4), *v = qs_malloc(nkv * 4);
    float *o1 = qs_malloc(nq * 4), *o2 = qs_malloc(nq * 4);
    float *scratch = qs_malloc(attn_scratch_elems(B, Tcap, KVH, hd) * 4);
    ASSERT_TRUE(q && k && v && o1 && o2 && scratch);
    fill(q, nq, 1);
    fill(k, nkv, 2);
    fill(v, nkv, 3);
    attn_forward(o1, NULL, q, k, v, B, T, pos0, Tcap, H, KVH, hd, NULL);
    attn_forward(o2, NULL, q, k, v, B, T, pos0, Tcap, H, KVH, hd, scratch);
    ASSERT_NEAR(max_diff(o1, o2, nq), 0.0, 1e-5);
    /* keys past the causal limit must not matter: poison the unused cache rows */
    for (int b = 0; b < B; b++)
        for (size_t i = (size_t)(pos0 + T) * KVH * hd; i < (size_t)Tcap * KVH * hd; i++)
            k[(size_t)b * Tcap * KVH * hd + i] = v[(size_t)b * Tcap * KVH * hd + i] = 1e30f;
    attn_forward(o2, NULL, q, k, v, B, T, pos0, Tcap, H, KVH, hd, scratch);
    ASSERT_NEAR(max_diff(o1, o2, nq), 0.0, 1e-5);
    qs_free(q);
    qs_free(k);
    qs_free(v);
    qs_free(o1);
    qs_free(o2);
    qs_free(scratch);
}

TEST(layer_attn, saved_probabilities_agree_between_paths)
{
    const int B = 1, T = 10, H = 4, KVH = 2, hd = 8;
    size_t nq = (size_t)B * T * H * hd, nkv = (size_t)B * T * KVH * hd, na = (size_t)B * H * T * T;
    float *q = qs_malloc(nq * 4), *k = qs_malloc(nkv * 4), *v = qs_malloc(nkv * 4);
    float *o1 = qs_malloc(nq * 4), *o2 = qs_malloc(nq * 4);
    float *a1 = qs_malloc(na * 4), *a2 = qs_malloc(na * 4);
    float *scratch = qs_malloc(attn_scratch_elems(B, T, KVH, hd) * 4);
    ASSERT_TRUE(q && k && v && o1 && o2 && a1 && a2 && scratch);
    fill(q, nq, 4);
    fill(k, nkv, 5);
    fill(v, nkv, 6);
    attn_forward(o1, a1, q, k, v, B, T, 0, T, H, KVH, hd, NULL);
    attn_forward(o2, a2, q, k, v, B, T, 0, T, H, KVH, hd, scratch);
    ASSERT_NEAR(max_diff(o1, o2, nq), 0.0, 1e-5);
    ASSERT_NEAR(max_diff(a1, a2, na), 0.0, 1e-6);
    ASSERT_TRUE(a2[1] == 0.0f);                      /* query 0 cannot see key 1 */
    ASSERT_NEAR(a2[(size_t)(T - 1) * T] + 0.0, a1[(size_t)(T - 1) * T], 1e-6);
    qs_free(q);
    qs_free(k);
    qs_free(v);
    qs_free(o1);
    qs_free(o2);
    qs_free(a1);
    qs_free(a2);
    qs_free(scratch);
}

/* The AVX-512 backward equals the portable one up to the dot products' summation
 * order (16 lanes + tree vs sequential): a few ulps of the gradients' scale. */
TEST(layer_attn, backward_simd_matches_portable_with_gqa_and_tail)
{
    if (cpu_detected_level() < CPU_LEVEL_AVX512)
        SKIP("no AVX-512 on this CPU");
    const int B = 2, T = 37, H = 4, KVH = 2, hd = 40;
    size_t nq = (size_t)B * T * H * hd, nkv = (size_t)B * T * KVH * hd, na = (size_t)B * H * T * T;
    float *q = qs_malloc(nq * 4), *k = qs_malloc(nkv * 4), *v = qs_malloc(nkv * 4);
    float *o = qs_malloc(nq * 4), *g = qs_malloc(nq * 4), *att = qs_malloc(na * 4);
    float *d1 = qs_calloc(nq + 2 * nkv, 4), *d2 = qs_calloc(nq + 2 * nkv, 4);
    ASSERT_TRUE(q && k && v && o && g && att && d1 && d2);
    fill(q, nq, 7);
    fill(k, nkv, 8);
    fill(v, nkv, 9);
    fill(g, nq, 10);
    attn_forward(o, att, q, k, v, B, T, 0, T, H, KVH, hd, NULL);
    int saved = cpu_level();
    cpu_limit(CPU_LEVEL_AVX2);
    attn_backward(d1, d1 + nq, d1 + nq + nkv, g, att, q, k, v, B, T, H, KVH, hd);
    cpu_limit(saved);
    attn_backward(d2, d2 + nq, d2 + nq + nkv, g, att, q, k, v, B, T, H, KVH, hd);
    double scale = 0.0;
    for (size_t i = 0; i < nq + 2 * nkv; i++)
        scale = fabs(d1[i]) > scale ? fabs(d1[i]) : scale;
    ASSERT_TRUE(scale > 0.0);
    ASSERT_NEAR(max_diff(d1, d2, nq + 2 * nkv) / scale, 0.0, 1e-5);
    ASSERT_TRUE(max_diff(d1 + nq + nkv, d2 + nq + nkv, nkv) == 0.0); /* dv: same order */
    qs_free(q);
    qs_free(k);
    qs_free(v);
    qs_free(o);
    qs_free(g);
    qs_free(att);
    qs_free(d1);
    qs_free(d2);
}

TEST(layer_rope, tables_follow_hf_frequencies_and_llama3_scaling)
{
    rope_table t;
    rope_scaling s = {ROPE_SCALING_LLAMA3, 8.0, 1.0, 4.0, 16};
    ASSERT_OK(rope_table_init(&t, 4, 16, 500000.0, &s), NULL);
    /* i = 0: wavelength 2*pi lies between 16/4 and 16/1 -> blended:
     * smooth = (16 / 2pi - 1) / (4 - 1), f = (1 - smooth) / 8 + smooth */
    double sm = (16.0 / (2 * M_PI) - 1.0) / 3.0, f0 = (1 - sm) / 8.0 + sm;
    ASSERT_NEAR(t.sin[3 * 8 + 0], sin(3 * f0), 1e-7);
    /* i = 1: wavelength 2*pi*500000^(1/8) ~ 32.9 > 16 -> divided by 8 */
    ASSERT_NEAR(t.cos[3 * 8 + 1], cos(3 * pow(500000.0, -2.0 / 16) / 8.0), 1e-7);
    /* i = 7: wavelength 2*pi*500000^(7/8) > 16 -> divided by 8 */
    double f7 = pow(500000.0, -14.0 / 16) / 8.0;
    ASSERT_NEAR(t.cos[2 * 8 + 7], cos(2 * f7), 1e-7);
    rope_table_free(&t);
    /* rotate_half: x = (1, 0 | 0, 0) at position p -> (cos, 0 | sin, 0) */
    ASSERT_OK(rope_table_init(&t, 8, 4, 10000.0, NULL), NULL);
    float x[4] = {1, 0, 0, 0};
    int32_t pos = 7;
    rope_forward(x, &pos, &t, 1, 1);
    ASSERT_NEAR(x[0], cos(7.0), 1e-6);
    ASSERT_NEAR(x[2], sin(7.0), 1e-6);
    ASSERT_NEAR(x[1], 0.0, 0);
    rope_table_free(&t);
}

TEST(layer_attn, avx512_and_portable_loops_give_the_same_bits)
{
    const int B = 1, T = 70, Tcap = 80, H = 2, KVH = 1, hd = 80;   /* tails in both loops */
    if (cpu_detected_level() < CPU_LEVEL_AVX512)
        SKIP("CPU without AVX-512");
    size_t nq = (size_t)B * T * H * hd, nkv = (size_t)B * Tcap * KVH * hd;
    float *q = qs_malloc(nq * 4), *k = qs_malloc(nkv * 4), *v = qs_malloc(nkv * 4);
    float *o1 = qs_malloc(nq * 4), *o2 = qs_malloc(nq * 4);
    float *scratch = qs_malloc(attn_scratch_elems(B, Tcap, KVH, hd) * 4);
    ASSERT_TRUE(q && k && v && o1 && o2 && scratch);
    fill(q, nq, 7);
    fill(k, nkv, 8);
    fill(v, nkv, 9);
    int level = cpu_level();
    cpu_limit(CPU_LEVEL_AVX2);
    attn_forward(o1, NULL, q, k, v, B, T, 3, Tcap, H, KVH, hd, scratch);
    cpu_limit(level);
    attn_forward(o2, NULL, q, k, v, B, T, 3, Tcap, H, KVH, hd, scratch);
    ASSERT_TRUE(memcmp(o1, o2, nq * 4) == 0);
    qs_free(q);
    qs_free(k);
    qs_free(v);
    qs_free(o1);
    qs_free(o2);
    qs_free(scratch);
}
