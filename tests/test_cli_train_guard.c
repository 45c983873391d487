/* test_cli_train_guard.c: `qatscope train` guards of the run directory, on the
 * bundled tiny model: an out_dir over an input (the model, the shards) is
 * refused before any work; a resume checks every log and the frozen config
 * before it changes any file of the run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "test.h"

static char g_out[16384], g_err[8192];

static int g_cli(const char *fmt, const char *a, const char *b)
{
    char args[3000];
    snprintf(args, sizeof args, fmt, a, b);
    return test_run_cli(args, g_out, sizeof g_out, g_err, sizeof g_err);
}

/* a shell command: each '@' of fmt is the guard root */
static int g_sh(const char *fmt, const char *root)
{
    char cmd[4000], *o = cmd;
    for (const char *p = fmt; *p && o < cmd + sizeof cmd - 700; p++)
        if (p[0] == '@')
            o += snprintf(o, 700, "%s", root);
        else
            *o++ = *p;
    *o = 0;
    return system(cmd);
}

/* <tmp>/guard: a copy of the demo model (M) and shards with a val split (S),
 * made once */
static const char *g_root(void)
{
    static char root[600];
    if (root[0])
        return root;
    snprintf(root, sizeof root, "%s/guard", test_tmp_dir());
    if (g_sh("rm -rf '@' && mkdir -p '@' && cp -r data/demo/model '@/M'", root) ||
        g_cli("tokenize --model %s/M --input data/demo/train.txt --out %s/S --val-fraction 0.1",
              root, root)) {
        root[0] = 0;
        return NULL;
    }
    return root;
}

/* <root>/<name>.json: B=2, T=16, 6 steps, 2 of warmup, a checkpoint every 2,
 * plus extra (",\"key\":value"...) */
static const char *g_config(const char *name, const char *extra)
{
    static char path[800];
    const char *root = g_root();
    if (!root)
        return NULL;
    char js[2048];
    snprintf(path, sizeof path, "%s/%s.json", root, name);
    int n = snprintf(js, sizeof js,
                     "{\"model\":\"%s/M\",\"train_data\":\"%s/S\",\"out_dir\":\"%s/%s\","
                     "\"batch_size\":2,\"seq_len\":16,\"steps\":6,\"lr\":1e-3,"
                     "\"bf16_warmup_steps\":2,\"ckpt_every\":2,"
                     "\"quant_modules\":[\"layers.*.mlp.*\"]%s}",
                     root, root, root, name, extra);
    return fileio_write_atomic(path, js, (size_t)n, NULL) ? NULL : path;
}

static int g_one_line(void)
{
    size_t n = strlen(g_err);
    return n > 0 && strchr(g_err, '\n') == g_err + n - 1;
}

/* the probe's cases: out_dir = the model (config.json was replaced), a
 * directory holding the model (its final checkpoint replaced the input), the
 * shards directory; any spelling and a symbolic link count */
TEST(cli_train_guard, out_dir_over_the_model_or_the_shards_is_refused_untouched)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    const char *cfg = g_config("over", "");
    ASSERT_TRUE(cfg != NULL);
    const char *root = g_root();
    char m_cfg[800], *before, *after;
    size_t nb, na;
    snprintf(m_cfg, sizeof m_cfg, "%s/M/config.json", root);
    ASSERT_OK(fileio_read_all(m_cfg, &before, &nb, NULL), NULL);
    ASSERT_EQ_INT(g_sh("mkdir -p '@/X/ckpt' && cp -r '@/M' '@/X/ckpt/step_6' && "
                       "ln -sfn M '@/L'", root), 0);
    static const char *const sets[][3] = {
        {"--set out_dir=%s/M", "is the model directory", "model"},
        {"--set out_dir=%s/M/", "is the model directory", "model"},
        {"--set out_dir=%s/L --set model=%s/L", "is the model directory", "model"},
        {"--set out_dir=%s/X --set model=%s/X/ckpt/step_6", "contains the model directory",
         "model"},
        {"--set out_dir=%s/S", "is the train_data directory", "train_data"},
        {"--set out_dir=%s --set model=%s/M", "contains the model directory", "model"},
    };
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++) {
        char set[1400], args[2400];
        snprintf(set, sizeof set, sets[i][0], root, root);
        snprintf(args, sizeof args, "train --config %s %s --quiet", cfg, set);
        ASSERT_EQ_INT(test_run_cli(args, g_out, sizeof g_out, g_err, sizeof g_err), 2);
        if (!strstr(g_err, sets[i][1]))
            fprintf(stderr, "    case %zu: %s", i, g_err);
        ASSERT_TRUE(strstr(g_err, sets[i][1]) != NULL);
        ASSERT_TRUE(strstr(g_err, "out_dir '") != NULL);
        ASSERT_TRUE(g_one_line());
    }
    ASSERT_OK(fileio_read_all(m_cfg, &after, &na, NULL), NULL);
    int same = na == nb && !memcmp(before, after, nb);
    qs_free(before);
    qs_free(after);
    ASSERT_TRUE(same);
    ASSERT_EQ_INT(g_sh("test ! -e '@/S/metrics.jsonl' && test ! -e '@/M/metrics.jsonl'", root),
                  0);
    ASSERT_EQ_INT(g_sh("test ! -e '@/X/config.json' && test -f '@/X/ckpt/step_6/config.json'",
                       root), 0);
    /* a directory below the model is a new directory, not the input: fine */
    ASSERT_EQ_INT(g_cli("train --config %s --set out_dir=%s/M/run --steps 3 --quiet", cfg, root),
                  0);
}
