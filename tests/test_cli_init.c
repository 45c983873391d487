/* test_cli_init.c: `qatscope init` end to end on small configs: the output
 * loads with the model loader, holds exactly the table's tensors, follows the
 * documented scheme (statistics with tolerances from the sample size), is
 * deterministic (bytes, thread count), bf16 = RNE(f32), shards load, bad
 * input is one line, exit 2, with nothing left behind, and so is a signal. */
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "qs/digest.h"
#include "qs/fileio.h"
#include "qs/hfinit.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/safetensors.h"
#include "qs/tokenizer.h"
#include "test.h"

#define INIT_TOKDIR "data/demo/model"   /* tokenizer.json + .model + config, vocab 512 */

/* tmp/<name>.json holding a config of the given shape; extra: more "key": value pairs */
static const char *init_cfg(const char *name, const char *arch, int dim, int inter, int layers,
                            int heads, int kv, int vocab, const char *extra)
{
    static char path[8][600];
    static int k;
    char *p = path[k++ % 8], json[1024];
    snprintf(p, 600, "%s/%s.json", test_tmp_dir(), name);
    snprintf(json, sizeof json,
             "{\n  \"architectures\": [\"%s\"],\n  \"hidden_size\": %d,\n"
             "  \"intermediate_size\": %d,\n  \"num_hidden_layers\": %d,\n"
             "  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n"
             "  \"vocab_size\": %d,\n  \"max_position_embeddings\": 64%s%s\n}\n",
             arch, dim, inter, layers, heads, kv, vocab, extra ? ",\n  " : "", extra ? extra : "");
    qs_diag d = {0};
    return fileio_write_atomic(p, json, strlen(json), &d) ? NULL : p;
}

/* Runs `init ARGS --out tmp/<out>`; the path goes to dir. */
static int init_cli(const char *args, const char *out, char *dir, size_t dn, char *err, size_t en)
{
    char cmd[2048], so[1024];
    snprintf(dir, dn, "%s/%s", test_tmp_dir(), out);
    snprintf(cmd, sizeof cmd, "init %s --out %s", args, dir);
    int rc = test_run_cli(cmd, so, sizeof so, err, en);
    if (rc != 0)
        fprintf(stderr, "    init %s: exit %d: %s", args, rc, err);
    return rc;
}

static int init_same_file(const char *a, const char *b)
{
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    qs_diag d = {0};
    int same = !fileio_read_all(a, &x, &nx, &d) && !fileio_read_all(b, &y, &ny, &d) && nx == ny &&
               !memcmp(x, y, nx);
    qs_free(x);
    qs_free(y);
    return same;
}

TEST(cli_init, every_architecture_loads_with_the_tables_tensors_and_nothing_else)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    struct {
        const char *arch, *extra;
    } cases[] = {
        {"LlamaForCausalLM", "\"tie_word_embeddings\": false"},
        {"MistralForCausalLM",
         "\"attention_bias\": true, \"tie_word_embeddings\": true, \"sliding_window\": 64"},
        {"Qwen2ForCausalLM", "\"tie_word_embeddings\": true"},
        {"PanguEmbeddedForCausalLM", "\"bias\": true, \"tie_word_embeddings\": true"},
        {"PanguEmbeddedForCausalLM", "\"bias\": false"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char name[32], dir[600], err[1024], args[1024], path[700];
        snprintf(name, sizeof name, "arch%zu", k);
        const char *cfg = init_cfg(name, cases[k].arch, 32, 48, 2, 4, 2, 512, cases[k].extra);
        ASSERT_TRUE(cfg != NULL);
        snprintf(args, sizeof args, "--config %s --tokenizer-dir %s --dtype f32 --seed 3", cfg,
                 INIT_TOKDIR);
        ASSERT_EQ_INT(init_cli(args, name, dir, sizeof dir, err, sizeof err), 0);
        llama_model m;
        qs_diag d = {0};
        ASSERT_OK(model_load_dir(&m, dir, &d), &d);   /* every table tensor, with its shape */
        safetensors_dir sd;
        ASSERT_OK(safetensors_dir_open(&sd, dir, &d), &d);
        int n_file = 0;
        for (int i = 0; i < sd.n_files; i++)
            n_file += sd.files[i].n_tensors;
        int has_head = safetensors_dir_find(&sd, "lm_head.weight", NULL) != NULL;
        int has_obias = safetensors_dir_find(&sd, "model.layers.1.self_attn.o_proj.bias", NULL) != NULL;
        int has_qbias = safetensors_dir_find(&sd, "model.layers.1.self_attn.q_proj.bias", NULL) != NULL;
        safetensors_dir_close(&sd);
        ASSERT_EQ_INT(n_file, m.n_tensors);   /* nothing else */
        ASSERT_EQ_INT(has_head, !m.cfg.tied);
        ASSERT_EQ_INT(has_qbias, m.cfg.qkv_bias);
        ASSERT_EQ_INT(has_obias, m.cfg.o_bias);
        ASSERT_EQ_STR(m.cfg.torch_dtype, "float32");
        ASSERT_EQ_STR(m.dtypes, "F32");
        model_free(&m);
        static const char *const toks[] = {"tokenizer.json", "tokenizer.model",
                                           "tokenizer_config.json"};
        for (int i = 0; i < 3; i++) {
            char src[600];
            snprintf(path, sizeof path, "%s/%s", dir, toks[i]);
            snprintf(src, sizeof src, "%s/%s", INIT_TOKDIR, toks[i]);
            ASSERT_TRUE(init_same_file(path, src));
        }
    }
}

/* |mean| and |std/sigma - 1| within 5 standard errors of n normal samples, and
 * the share within one sigma near 0.6827 (a normal, not just any law) */
static int init_stats_ok(const float *x, size_t n, double sigma, const char *name)
{
    double s = 0, ss = 0;
    size_t in1 = 0;
    for (size_t i = 0; i < n; i++) {
        s += x[i];
        ss += (double)x[i] * x[i];
        in1 += fabs(x[i]) <= sigma;
    }
    double mean = s / n, sd = sqrt(ss / n - mean * mean), p1 = (double)in1 / n;
    int ok = fabs(mean) <= 5 * sigma / sqrt((double)n) &&
             fabs(sd / sigma - 1) <= 5 / sqrt(2.0 * n) &&
             fabs(p1 - 0.682689) <= 5 * sqrt(0.682689 * 0.317311 / n);
    if (!ok)
        fprintf(stderr, "    %s: n %zu mean %.3g std %.5g (want %.5g) within-1-sigma %.4f\n", name,
                n, mean, sd, sigma, p1);
    return ok;
}

TEST(cli_init, values_follow_the_documented_scheme)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const int L = 4;
    const char *cfg = init_cfg("scheme", "PanguEmbeddedForCausalLM", 128, 256, L, 4, 2, 1024,
                               "\"bias\": true, \"tie_word_embeddings\": false");
    char dir[600], err[1024], args[1024];
    snprintf(args, sizeof args, "--config %s --tokenizer-dir %s --dtype f32 --seed 11", cfg,
             INIT_TOKDIR);
    ASSERT_EQ_INT(init_cli(args, "scheme", dir, sizeof dir, err, sizeof err), 0);
    llama_model m;
    qs_diag d = {0};
    ASSERT_OK(model_load_dir(&m, dir, &d), &d);
    int bad = 0, n_scaled = 0, n_plain = 0, n_norm = 0, n_bias = 0;
    for (int i = 0; i < m.n_tensors; i++) {
        const model_tensor *t = &m.tensors[i];
        const float *x = m.params + t->offset_elems;
        if (t->ndim == 2) {
            int scaled = strstr(t->name, ".o_proj.") || strstr(t->name, ".down_proj.");
            n_scaled += scaled;
            n_plain += !scaled;
            bad |= !init_stats_ok(x, t->n_elems, scaled ? 0.02 / sqrt(2.0 * L) : 0.02, t->name);
            continue;
        }
        float want = strstr(t->name, "norm.weight") ? 1.0f : 0.0f;
        n_norm += want == 1.0f;
        n_bias += want == 0.0f;
        for (size_t j = 0; j < t->n_elems; j++)
            bad |= x[j] != want;   /* exactly */
    }
    model_free(&m);
    ASSERT_EQ_INT(bad, 0);
    ASSERT_EQ_INT(n_scaled, 2 * L);
    ASSERT_EQ_INT(n_plain, 5 * L + 2);
    ASSERT_EQ_INT(n_norm, 2 * L + 1);
    ASSERT_EQ_INT(n_bias, 4 * L);
}

/* the embedding spans two chunks, so two threads really draw in parallel */
static const char *init_cfg_two_chunks(void)
{
    return init_cfg("twochunks", "LlamaForCausalLM", 128, 256, 1, 4, 2, 4096,
                    "\"tie_word_embeddings\": false");
}

TEST(cli_init, same_seed_gives_the_same_bytes_at_any_thread_count_another_seed_differs)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const char *cfg = init_cfg_two_chunks();
    char d1[600], d2[600], d3[600], err[1024], args[1024], a[700], b[700];
    const char *old = getenv("OMP_NUM_THREADS");
    char saved[64] = "";
    if (old)
        snprintf(saved, sizeof saved, "%s", old);
    snprintf(args, sizeof args, "--config %s --tokenizer-dir %s --seed 5", cfg, INIT_TOKDIR);
    setenv("OMP_NUM_THREADS", "1", 1);
    int r1 = init_cli(args, "det1", d1, sizeof d1, err, sizeof err);
    setenv("OMP_NUM_THREADS", "2", 1);
    int r2 = init_cli(args, "det2", d2, sizeof d2, err, sizeof err);
    if (old)
        setenv("OMP_NUM_THREADS", saved, 1);
    else
        unsetenv("OMP_NUM_THREADS");
    ASSERT_EQ_INT(r1, 0);
    ASSERT_EQ_INT(r2, 0);
    snprintf(args, sizeof args, "--config %s --tokenizer-dir %s --seed 6", cfg, INIT_TOKDIR);
    ASSERT_EQ_INT(init_cli(args, "det3", d3, sizeof d3, err, sizeof err), 0);
    snprintf(a, sizeof a, "%s/model.safetensors", d1);
    snprintf(b, sizeof b, "%s/model.safetensors", d2);
    ASSERT_TRUE(init_same_file(a, b));
    snprintf(b, sizeof b, "%s/model.safetensors", d3);
    ASSERT_TRUE(!init_same_file(a, b));
    snprintf(a, sizeof a, "%s/config.json", d1);
    snprintf(b, sizeof b, "%s/config.json", d3);
    ASSERT_TRUE(init_same_file(a, b));
}

TEST(cli_init, bf16_holds_the_round_to_nearest_even_of_the_f32_values)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const char *cfg = init_cfg_two_chunks();
    char df[600], db[600], err[1024], args[1024], pf[700], pb[700];
    snprintf(args, sizeof args, "--config %s --tokenizer-dir %s --seed 9 --dtype f32", cfg,
             INIT_TOKDIR);
    ASSERT_EQ_INT(init_cli(args, "rne_f32", df, sizeof df, err, sizeof err), 0);
    snprintf(args, sizeof args, "--config %s --tokenizer-dir %s --seed 9 --dtype bf16", cfg,
             INIT_TOKDIR);
    ASSERT_EQ_INT(init_cli(args, "rne_bf16", db, sizeof db, err, sizeof err), 0);
    snprintf(pf, sizeof pf, "%s/model.safetensors", df);
    snprintf(pb, sizeof pb, "%s/model.safetensors", db);
    safetensors_file ff = {0}, fb = {0};
    qs_diag d = {0};
    ASSERT_OK(safetensors_open(&ff, pf, &d), &d);
    ASSERT_OK(safetensors_open(&fb, pb, &d), &d);
    ASSERT_EQ_INT(ff.n_tensors, fb.n_tensors);
    size_t n_bad = 0, n_checked = 0;
    for (int i = 0; i < ff.n_tensors; i++) {
        const safetensors_tensor *tf = &ff.tensors[i];
        const safetensors_tensor *tb = safetensors_find(&fb, tf->name);
        if (!tb || tb->dtype != SAFETENSORS_BF16 || tf->dtype != SAFETENSORS_F32 ||
            tb->n_elems != tf->n_elems) {
            n_bad++;
            continue;
        }
        for (size_t j = 0; j < tf->n_elems; j++) {
            float x;
            memcpy(&x, tf->data + 4 * j, 4);
            uint16_t h = (uint16_t)(tb->data[2 * j] | tb->data[2 * j + 1] << 8);
            n_bad += h != safetensors_f32_to_bf16(x);
            n_checked++;
        }
    }
    safetensors_close(&ff);
    safetensors_close(&fb);
    ASSERT_EQ_INT(n_bad, 0);
    ASSERT_TRUE(n_checked > 1000000);
    llama_config c;
    ASSERT_OK(hfconfig_load(&c, db, &d), &d);
    ASSERT_EQ_STR(c.torch_dtype, "bfloat16");
}

TEST(cli_init, small_max_shard_size_gives_a_loadable_sharded_dir_with_the_same_values)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const char *cfg = init_cfg_two_chunks();
    char d1[600], ds[600], err[1024], args[1024], path[700];
    snprintf(args, sizeof args, "--config %s --tokenizer-dir %s --seed 4 --dtype f32", cfg,
             INIT_TOKDIR);
    ASSERT_EQ_INT(init_cli(args, "shard1", d1, sizeof d1, err, sizeof err), 0);
    snprintf(args, sizeof args,
             "--config %s --tokenizer-dir %s --seed 4 --dtype f32 --max-shard-size 300000", cfg,
             INIT_TOKDIR);
    ASSERT_EQ_INT(init_cli(args, "shardN", ds, sizeof ds, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/model.safetensors", ds);
    ASSERT_TRUE(!fileio_exists(path));
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", ds);
    json_error_t je;
    json_t *idx = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    ASSERT_TRUE(idx != NULL);
    json_int_t total = json_integer_value(json_object_get(json_object_get(idx, "metadata"),
                                                          "total_size"));
    size_t n_map = json_object_size(json_object_get(idx, "weight_map"));
    json_decref(idx);
    llama_model a, b;
    qs_diag d = {0};
    ASSERT_OK(model_load_dir(&a, d1, &d), &d);
    ASSERT_OK(model_load_dir(&b, ds, &d), &d);
    safetensors_dir sd;
    ASSERT_OK(safetensors_dir_open(&sd, ds, &d), &d);
    int n_files = sd.n_files;
    safetensors_dir_close(&sd);
    int same = a.n_params == b.n_params &&
               !memcmp(a.params, b.params, a.n_params * sizeof *a.params);
    model_param_groups g;
    ASSERT_OK(model_param_groups_count(&a.cfg, &g), NULL);
    ASSERT_EQ_INT(n_map, a.n_tensors);
    model_free(&a);
    model_free(&b);
    ASSERT_TRUE(same);
    ASSERT_EQ_INT(total, (json_int_t)(4 * g.total));
    /* embed and lm_head (2 MiB each) exceed 300000 bytes: own shards; the rest packs */
    ASSERT_TRUE(n_files >= 4);
    snprintf(path, sizeof path, "%s/model-00001-of-%05d.safetensors", ds, n_files);
    ASSERT_TRUE(fileio_exists(path));
}

TEST(cli_init, tokenizer_file_is_copied_under_the_name_of_its_kind)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const char *cfg = init_cfg("tokfile", "LlamaForCausalLM", 32, 48, 1, 4, 2, 512, NULL);
    static const char *const srcs[] = {"tests/data/tok/tiny_spm.model", INIT_TOKDIR "/tokenizer.json"};
    static const char *const names[] = {"tokenizer.model", "tokenizer.json"};
    for (int k = 0; k < 2; k++) {
        char out[32], dir[600], err[1024], args[1024], path[700];
        snprintf(out, sizeof out, "tokfile%d", k);
        snprintf(args, sizeof args, "--config %s --tokenizer %s", cfg, srcs[k]);
        ASSERT_EQ_INT(init_cli(args, out, dir, sizeof dir, err, sizeof err), 0);
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        ASSERT_TRUE(init_same_file(path, srcs[k]));
        snprintf(path, sizeof path, "%s/%s", dir, names[1 - k]);
        ASSERT_TRUE(!fileio_exists(path));
        snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
        ASSERT_TRUE(!fileio_exists(path));
        tokenizer *t = NULL;
        qs_diag d = {0};
        ASSERT_OK(tokenizer_create(&t, dir, &d), &d);
        tokenizer_destroy(t);
    }
}

/* init allows a vocabulary larger than the tokenizer's (the 1B config with the
 * Llama-2 tokenizer); generate on such a model printed nothing past the prompt,
 * silently, once it drew an id the tokenizer cannot decode.  Now those ids are
 * left out of the text and counted in a warning (untied head: greedy ids spread
 * over the whole vocabulary, most of them past the tokenizer's 512). */
TEST(cli_init, generate_on_a_vocab_larger_than_the_tokenizer_warns)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const char *cfg = init_cfg("bigvocab", "LlamaForCausalLM", 32, 48, 1, 4, 2, 8192,
                               "\"tie_word_embeddings\": false");
    char dir[600], err[1024], args[1024], so[4096];
    snprintf(args, sizeof args, "--config %s --tokenizer-dir %s", cfg, INIT_TOKDIR);
    ASSERT_EQ_INT(init_cli(args, "bigvocab", dir, sizeof dir, err, sizeof err), 0);
    snprintf(args, sizeof args, "generate --model %s --prompt 'Once upon' -n 8 --temperature 0 "
             "--stop-ids 0", dir);
    ASSERT_EQ_INT(test_run_cli(args, so, sizeof so, err, sizeof err), 0);
    if (!strstr(err, "outside the tokenizer's vocabulary [0, 512)"))
        fprintf(stderr, "    stdout: %s    stderr: %s", so, err);
    ASSERT_TRUE(strstr(err, "outside the tokenizer's vocabulary [0, 512)") != NULL);
    ASSERT_TRUE(strstr(err, "vocab_size is 8192") != NULL);
    ASSERT_TRUE(!strncmp(so, "Once upon", 9));
}

TEST(cli_init, an_existing_empty_out_directory_is_filled)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char dir[600], err[1024], args[1024];
    snprintf(dir, sizeof dir, "%s/empty_out", test_tmp_dir());
    ASSERT_EQ_INT(mkdir(dir, 0777), 0);
    snprintf(args, sizeof args, "--config data/configs/tiny-llama.json --tokenizer-dir %s",
             INIT_TOKDIR);
    ASSERT_EQ_INT(init_cli(args, "empty_out", dir, sizeof dir, err, sizeof err), 0);
    llama_model m;
    qs_diag d = {0};
    ASSERT_OK(model_load_dir(&m, dir, &d), &d);
    ASSERT_EQ_STR(m.dtypes, "BF16");
    model_free(&m);
}

/* entries of dir other than . and ..; *tmp_left set when one looks like init's temp dir */
static int init_dir_entries(const char *dir, int *tmp_left)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            n++;
            *tmp_left |= strstr(e->d_name, ".tmp.") != NULL;
        }
    closedir(dp);
    return n;
}

TEST(cli_init, bad_input_is_one_line_exit_2_and_leaves_nothing)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char base[600], cfg_ok[700], cfg_gpt2[700], cfg_small[700], keep[800];
    qs_diag d = {0};
    snprintf(base, sizeof base, "%s/bad", test_tmp_dir());
    ASSERT_OK(fileio_mkdir_p(base, &d), &d);
    snprintf(cfg_ok, sizeof cfg_ok, "%s", "data/configs/tiny-llama.json");
    const char *g = init_cfg("gpt2", "GPT2LMHeadModel", 32, 48, 1, 4, 2, 512, NULL);
    const char *s = init_cfg("smallvocab", "LlamaForCausalLM", 32, 48, 1, 4, 2, 64, NULL);
    ASSERT_TRUE(g && s);
    snprintf(cfg_gpt2, sizeof cfg_gpt2, "%s", g);
    snprintf(cfg_small, sizeof cfg_small, "%s", s);
    snprintf(keep, sizeof keep, "%s/full", base);   /* a non-empty --out */
    ASSERT_OK(fileio_mkdir_p(keep, &d), &d);
    snprintf(keep, sizeof keep, "%s/full/keep.txt", base);
    ASSERT_OK(fileio_write_atomic(keep, "x", 1, &d), &d);
    struct {
        const char *out, *args, *want;
    } cases[] = {
        {"c_missing", "--config %s/no_such_config.json --tokenizer-dir " INIT_TOKDIR, "no_such_config.json"},
        {"c_arch", "--config %s --tokenizer-dir " INIT_TOKDIR, "GPT2LMHeadModel"},
        {"c_tok", "--config %s --tokenizer %s/no_such_tokenizer.json", "no_such_tokenizer.json"},
        {"full", "--config %s --tokenizer-dir " INIT_TOKDIR, "not an empty directory"},
        {"c_dtype", "--config %s --tokenizer-dir " INIT_TOKDIR " --dtype fp16", "--dtype"},
        {"c_vocab", "--config %s --tokenizer-dir " INIT_TOKDIR, "more than the config's vocab_size 64"},
        {"c_both", "--config %s --tokenizer-dir " INIT_TOKDIR " --tokenizer x.json", "exactly one"},
        {"c_seed", "--config %s --tokenizer-dir " INIT_TOKDIR " --seed -1", "--seed"},
        {"full/keep.txt", "--config %s --tokenizer-dir " INIT_TOKDIR,
         "keep.txt: exists and is a file, not a directory (init never overwrites)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char args[1400], out[1024], err[1024], cmd[2200], dir[700];
        const char *cfg = k == 1 ? cfg_gpt2 : k == 5 ? cfg_small : cfg_ok;
        if (k == 0)
            snprintf(args, sizeof args, cases[k].args, base);
        else if (k == 2)
            snprintf(args, sizeof args, cases[k].args, cfg, base);
        else
            snprintf(args, sizeof args, cases[k].args, cfg);
        snprintf(dir, sizeof dir, "%s/%s", base, cases[k].out);
        snprintf(cmd, sizeof cmd, "init %s --out %s", args, dir);
        int rc = test_run_cli(cmd, out, sizeof out, err, sizeof err);
        if (rc != 2 || !strstr(err, cases[k].want))
            fprintf(stderr, "    case %s: exit %d, stderr: %s", cases[k].out, rc, err);
        ASSERT_EQ_INT(rc, 2);
        ASSERT_EQ_STR(out, "");
        ASSERT_TRUE(strncmp(err, "qatscope: ", 10) == 0);
        ASSERT_TRUE(strchr(err, '\n') == err + strlen(err) - 1);   /* one line */
        ASSERT_TRUE(strstr(err, cases[k].want) != NULL);
        int tmp_left = 0;
        ASSERT_EQ_INT(init_dir_entries(base, &tmp_left), 1);   /* only "full" */
        ASSERT_EQ_INT(tmp_left, 0);
    }
    int tmp_left = 0;
    snprintf(keep, sizeof keep, "%s/full", base);
    ASSERT_EQ_INT(init_dir_entries(keep, &tmp_left), 1);   /* keep.txt, untouched */
}

/* A checkpoint init writes records its hash as it writes it: right after init
 * the weights file is in the hash cache (nothing else hashed it: a hash made by
 * reading a file changed in the last 2 s is not stored), with the hash of its
 * bytes, so the model hash eval records costs a lookup. */
TEST(cli_init, a_large_checkpoint_has_its_hash_recorded_as_written)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    /* one block of 1024 x 4096 in f32: ~71 MB, past DIGEST_CACHE_MIN_BYTES */
    const char *cfg = init_cfg("init_hashed", "LlamaForCausalLM", 1024, 4096, 1, 8, 8, 512, NULL);
    ASSERT_TRUE(cfg != NULL);
    char dir[600], err[1024], args[1024], cache[600], w[700], hex[65], ref[65], all[65], all_off[65];
    snprintf(cache, sizeof cache, "%s/init_hash_cache/sha256.tsv", test_tmp_dir());
    remove(cache);
    char *saved = test_env_set("QS_HASH_CACHE", cache);
    snprintf(args, sizeof args, "--config %s --tokenizer-dir %s --dtype f32", cfg, INIT_TOKDIR);
    int rc = init_cli(args, "init_hashed", dir, sizeof dir, err, sizeof err);
    snprintf(w, sizeof w, "%s/model.safetensors", dir);
    int hit = rc == 0 && digest_cache_lookup(w, hex);
    qs_diag d = {0};
    int ok = rc == 0 && !model_dir_sha256(dir, all, &d);
    setenv("QS_HASH_CACHE", "off", 1);
    ok = ok && !digest_sha256_file(w, ref, &d) && !model_dir_sha256(dir, all_off, &d);
    test_env_restore("QS_HASH_CACHE", saved);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_TRUE(ok);
    ASSERT_TRUE(hit);
    ASSERT_EQ_STR(hex, ref);
    ASSERT_EQ_STR(all, all_off);
    struct stat st;
    ASSERT_TRUE(stat(w, &st) == 0 && (size_t)st.st_size >= DIGEST_CACHE_MIN_BYTES);
}

/* Ctrl-C (SIGINT) or SIGTERM while init writes a checkpoint of a few hundred MB:
 * one error line, the process ends by the signal (a shell's 130 / 143), and
 * neither the output directory nor its temporary one is left behind
 * (qs/interrupt.h; export takes the same path through the safetensors writer). */
/* Size in bytes of the largest safetensors file in dir (as it is written: its
 * name.tmp.<pid>), or -1 without one. */
static long long intr_largest_safetensors(const char *dir)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return -1;
    long long best = -1;
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (!strstr(e->d_name, ".safetensors"))
            continue;
        char path[1200];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (!stat(path, &st) && (long long)st.st_size > best)
            best = (long long)st.st_size;
    }
    closedir(dp);
    return best;
}

/* Starts `init` of a ~330M-parameter config into <tmp>/intr_<name>/m, sends sig
 * once its temporary directory holds more than 1 MB of tensor data, and
 * returns the wait status (-1: it could not run or ended before the signal).
 * The child's stderr goes to <tmp>/intr_<name>.err. */
static int intr_run(const char *name, int sig)
{
    const char *bin = getenv("QS_BIN");
    char dir[700], cfg[800], out[800], tmp[900], err[800];
    snprintf(dir, sizeof dir, "%s/intr_%s", test_tmp_dir(), name);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(out, sizeof out, "%s/m", dir);
    snprintf(err, sizeof err, "%s/intr_%s.err", test_tmp_dir(), name);
    qs_diag d = {0};
    if (fileio_mkdir_p(dir, &d))
        return -1;
    const char *json = "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 1024,"
                       " \"intermediate_size\": 4096, \"num_hidden_layers\": 16,"
                       " \"num_attention_heads\": 16, \"num_key_value_heads\": 16,"
                       " \"vocab_size\": 32000, \"max_position_embeddings\": 256}\n";
    if (fileio_write_atomic(cfg, json, strlen(json), &d))
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0)
            dup2(fd, 2);
        execl(bin, bin, "init", "--config", cfg, "--tokenizer-dir", "data/demo/model", "--out",
              out, (char *)NULL);
        _exit(127);
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)pid);
    int st = 0, writing = 0;
    for (int i = 0; i < 6000 && !writing; i++) { /* at most ~60 s */
        writing = intr_largest_safetensors(tmp) > (1 << 20);
        if (!writing) {
            if (waitpid(pid, &st, WNOHANG) == pid)
                return -1; /* ended before it wrote */
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    kill(pid, writing ? sig : SIGKILL);
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return writing ? st : -1;
}

static void intr_check(const char *name, int sig)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    int st = intr_run(name, sig);
    ASSERT_TRUE(st != -1);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != sig) {
        TEST_FAIL_AT("status 0x%x: expected the end by signal %d", st, sig);
        return;
    }
    char dir[700], errf[800], *text = NULL;
    size_t n = 0;
    snprintf(dir, sizeof dir, "%s/intr_%s", test_tmp_dir(), name);
    snprintf(errf, sizeof errf, "%s/intr_%s.err", test_tmp_dir(), name);
    ASSERT_EQ_INT(fileio_read_all(errf, &text, &n, NULL), 0);
    /* one line naming the file being written and the signal */
    int one_line = n > 0 && text[n - 1] == '\n' && memchr(text, '\n', n - 1) == NULL;
    char want[64];
    snprintf(want, sizeof want, "interrupted by signal %d", sig);
    int named = strstr(text, ".safetensors: ") && strstr(text, want);
    if (!one_line || !named)
        fprintf(stderr, "    stderr: %s", text);
    qs_free(text);
    ASSERT_TRUE(one_line && named);
    /* only the config the test wrote: no m, no m.tmp.<pid> */
    int tmp_left = 0;
    ASSERT_EQ_INT(init_dir_entries(dir, &tmp_left), 1);
    ASSERT_TRUE(!tmp_left);
}

TEST(cli_init, ctrl_c_during_init_leaves_nothing_and_ends_by_the_signal)
{
    intr_check("int", SIGINT);
}

TEST(cli_init, sigterm_during_init_leaves_nothing_and_ends_by_the_signal)
{
    intr_check("term", SIGTERM);
}
