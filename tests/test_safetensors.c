/* test_safetensors.c: the loader rejects every hand-made broken file in
 * tests/data/safetensors/ (tools/gen_bad_safetensors.py) with exactly the
 * one-line error in NAME.err; the writer round-trips; conversions are exact. */
#include <dirent.h>
#include <stdlib.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/safetensors.h"
#include "test.h"

#define ST_DATA "tests/data/safetensors"

/* Returns the diag line for path (opening, then converting every tensor). */
static void st_error_line(const char *path, char *line, size_t n)
{
    safetensors_file f;
    qs_diag d = {0};
    line[0] = 0;
    if (safetensors_open(&f, path, &d)) {
        diag_format(&d, line, n);
        return;
    }
    for (int i = 0; i < f.n_tensors && !line[0]; i++) {
        float *buf = qs_malloc(f.tensors[i].n_elems * 4 + 4);
        if (buf && safetensors_tensor_to_f32(&f.tensors[i], buf, path, &d))
            diag_format(&d, line, n);
        qs_free(buf);
    }
    safetensors_close(&f);
}

TEST(safetensors, every_broken_file_gives_its_one_line_error)
{
    DIR *dir = opendir(ST_DATA);
    ASSERT_TRUE(dir != NULL);
    struct dirent *e;
    int n_cases = 0, n_bad = 0;
    while ((e = readdir(dir))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".err"))
            continue;
        char err_path[512], st_path[512], line[1200];
        snprintf(err_path, sizeof err_path, "%s/%s", ST_DATA, e->d_name);
        snprintf(st_path, sizeof st_path, "%s/%.*s.safetensors", ST_DATA, (int)(len - 4), e->d_name);
        char *want = NULL;
        size_t wn = 0;
        qs_diag d = {0};
        if (fileio_read_all(err_path, &want, &wn, &d))
            continue;
        while (wn && (want[wn - 1] == '\n' || want[wn - 1] == '\r'))
            want[--wn] = 0;
        st_error_line(st_path, line, sizeof line);
        if (strcmp(line, want)) {
            fprintf(stderr, "    %s:\n      want: %s\n      got:  %s\n", st_path, want, line);
            n_bad++;
        }
        qs_free(want);
        n_cases++;
    }
    closedir(dir);
    ASSERT_TRUE(n_cases >= 15);
    ASSERT_EQ_INT(n_bad, 0);
}

TEST(safetensors, missing_file_names_the_path)
{
    safetensors_file f;
    qs_diag d = {0};
    ASSERT_EQ_INT(safetensors_open(&f, ST_DATA "/no_such.safetensors", &d), QS_ENOTFOUND);
    ASSERT_TRUE(strstr(d.path, "no_such.safetensors") != NULL);
}

TEST(safetensors, writer_round_trips_f32_and_bf16)
{
    float a[6] = {1.0f, -2.5f, 3.14159274f, 1e-3f, 65504.0f, -0.0f}, b[3] = {7, 8, 9};
    safetensors_entry e[2] = {{"layer.a", a, 2, {2, 3}}, {"b", b, 1, {3}}};
    const char *meta[] = {"format", "pt", NULL};
    char path[512];
    qs_diag d = {0};
    snprintf(path, sizeof path, "%s/rt.safetensors", test_tmp_dir());
    for (int dt = 0; dt < 2; dt++) {
        int dtype = dt ? SAFETENSORS_BF16 : SAFETENSORS_F32;
        ASSERT_OK(safetensors_write(path, e, 2, dtype, meta, &d), &d);
        safetensors_file f;
        ASSERT_OK(safetensors_open(&f, path, &d), &d);
        const safetensors_tensor *t = safetensors_find(&f, "layer.a");
        ASSERT_TRUE(t != NULL);
        ASSERT_EQ_INT(t->dtype, dtype);
        ASSERT_EQ_INT(t->shape[0], 2);
        ASSERT_EQ_INT(t->shape[1], 3);
        ASSERT_EQ_INT((uintptr_t)(t->data - f.map.data) % 8, 0);
        float out[6];
        ASSERT_OK(safetensors_tensor_to_f32(t, out, path, &d), &d);
        for (int i = 0; i < 6; i++) {
            float want = dt ? safetensors_bf16_to_f32(safetensors_f32_to_bf16(a[i])) : a[i];
            ASSERT_TRUE(memcmp(&out[i], &want, 4) == 0);
        }
        ASSERT_TRUE(safetensors_find(&f, "b") != NULL);
        safetensors_close(&f);
    }
}

TEST(safetensors, bf16_rounds_to_nearest_even_and_f16_decodes_exactly)
{
    /* 1 + 2^-8 is halfway between bf16 1.0 and 1+2^-7: ties to even (1.0) */
    ASSERT_EQ_INT(safetensors_f32_to_bf16(1.00390625f), 0x3f80);
    ASSERT_EQ_INT(safetensors_f32_to_bf16(1.01171875f), 0x3f82);   /* 1+3*2^-8 -> up to even */
    ASSERT_EQ_INT(safetensors_f32_to_bf16(-2.0f), 0xc000);
    ASSERT_NEAR(safetensors_f16_to_f32(0x3c00), 1.0, 0);
    ASSERT_NEAR(safetensors_f16_to_f32(0xc000), -2.0, 0);
    ASSERT_NEAR(safetensors_f16_to_f32(0x7bff), 65504.0, 0);
    ASSERT_NEAR(safetensors_f16_to_f32(0x0001), ldexp(1.0, -24), 0);   /* smallest subnormal */
    ASSERT_NEAR(safetensors_f16_to_f32(0x03ff), 1023 * ldexp(1.0, -24), 0);
    ASSERT_TRUE(isinf(safetensors_f16_to_f32(0x7c00)));
    ASSERT_TRUE(isnan(safetensors_f16_to_f32(0x7e00)));
}

TEST(safetensors, sharded_index_with_missing_tensor_names_the_shard)
{
    char dir[512], path[600];
    qs_diag d = {0};
    snprintf(dir, sizeof dir, "%s/shard_bad", test_tmp_dir());
    ASSERT_OK(fileio_mkdir_p(dir, &d), &d);
    float x[2] = {1, 2};
    safetensors_entry e = {"a", x, 1, {2}};
    snprintf(path, sizeof path, "%s/s1.safetensors", dir);
    ASSERT_OK(safetensors_write(path, &e, 1, SAFETENSORS_F32, NULL, &d), &d);
    const char *idx = "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s1.safetensors\"}}";
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    ASSERT_OK(fileio_write_atomic(path, idx, strlen(idx), &d), &d);
    safetensors_dir sd;
    ASSERT_EQ_INT(safetensors_dir_open(&sd, dir, &d), QS_ENOTFOUND);
    ASSERT_TRUE(strstr(d.msg, "tensor 'b'") != NULL);
    ASSERT_TRUE(strstr(d.path, "s1.safetensors") != NULL);
    const char *escape = "{\"weight_map\": {\"a\": \"../s1.safetensors\"}}";
    ASSERT_OK(fileio_write_atomic(path, escape, strlen(escape), &d), &d);
    ASSERT_EQ_INT(safetensors_dir_open(&sd, dir, &d), QS_EFORMAT);
}
