/* test_model_stories.c: the real pretrained stories260K (../shared/models) must
 * reproduce llama2.c run.c's greedy continuation.  Token ids are decoded with
 * the vocabulary of its tokenizer.json (metaspace + <0xXX> byte pieces), so
 * this test does not depend on the tokenizer module. */
#include <jansson.h>
#include <stdlib.h>

#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_infer.h"
#include "qs/sampler.h"
#include "test.h"

/* id -> piece, decoded like the file's decoder: "▁" -> " ", <0xXX> -> byte. */
static void stories_decode(json_t *vocab, const int32_t *ids, int n, char *out, size_t cap)
{
    size_t w = 0;
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        const char *key;
        json_t *v;
        const char *piece = "";
        json_object_foreach(vocab, key, v)
        {
            if (json_integer_value(v) == ids[i]) {
                piece = key;
                break;
            }
        }
        unsigned byte;
        if (strlen(piece) == 6 && sscanf(piece, "<0x%2X>", &byte) == 1) {
            if (w + 1 < cap)
                out[w++] = (char)byte;
            continue;
        }
        for (const char *p = piece; *p && w + 1 < cap;) {
            if (!strncmp(p, "\xe2\x96\x81", 3)) {
                out[w++] = ' ';
                p += 3;
            } else {
                out[w++] = *p++;
            }
        }
    }
    out[w] = 0;
}

TEST(model, stories260K_greedy_matches_llama2c_run)
{
    char dir[512], tokpath[600];
    if (!test_shared_path(dir, sizeof dir, "models/stories260K"))
        SKIP("../shared/models/stories260K not present");
    llama_model m;
    llama_acts a;
    sampler s;
    qs_diag d = {0};
    ASSERT_OK(model_load_dir(&m, dir, &d), &d);
    ASSERT_EQ_INT(m.cfg.n_kv_heads, 4);
    ASSERT_TRUE(m.cfg.tied);
    /* "Once upon a time" with BOS, as run.c encodes it */
    const int32_t prompt[5] = {1, 403, 407, 261, 378};
    int32_t out[64];
    int n_out = 0;
    ASSERT_OK(model_acts_init(&a, &m.cfg, 1, 4, 5 + 64, 0, &d), &d);   /* prompt in 2 chunks */
    ASSERT_OK(sampler_init(&s, m.cfg.vocab_size, 0.0f, 1.0f, 1, &d), &d);
    const int32_t stop[2] = {1, 2};
    ASSERT_OK(model_generate(&m, &a, prompt, 5, 64, &s, stop, 2, out, &n_out, NULL, NULL, &d), &d);
    sampler_free(&s);
    model_acts_free(&a);
    model_free(&m);
    ASSERT_EQ_INT(n_out, 64);

    snprintf(tokpath, sizeof tokpath, "%s/tokenizer.json", dir);
    json_error_t je;
    json_t *root = json_load_file(tokpath, 0, &je);
    ASSERT_TRUE(root != NULL);
    json_t *vocab = json_object_get(json_object_get(root, "model"), "vocab");
    ASSERT_TRUE(json_is_object(vocab));
    char text[1024];
    int32_t all[69];
    memcpy(all, prompt + 1, 4 * sizeof *all);
    memcpy(all + 4, out, 64 * sizeof *all);
    stories_decode(vocab, all, 68, text, sizeof text);
    json_decref(root);
    const char *want = " Once upon a time, there was a little girl named Lily. She loved to play "
                       "outside in the park. One day, she saw a big, red ball.";
    if (strncmp(text, want, strlen(want)))
        fprintf(stderr, "    got: %s\n", text);
    ASSERT_TRUE(strncmp(text, want, strlen(want)) == 0);
}
