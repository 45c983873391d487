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

/* the bytes of <root>/<run>/<file> (NULL when missing); qs_free */
static char *g_read(const char *run, const char *file, size_t *n)
{
    char path[900], *text = NULL;
    snprintf(path, sizeof path, "%s/%s/%s", g_root(), run, file);
    *n = 0;
    return fileio_read_all(path, &text, n, NULL) ? NULL : text;
}

static int g_same(const char *a, size_t na, const char *b, size_t nb)
{
    return (!a && !b) || (a && b && na == nb && !memcmp(a, b, na));
}

/* A resume refused for a damaged or incomplete log changes no file of the run
 * (the stop event was cut from events.jsonl before the quantizer log's damage
 * was found), and a log missing records before the checkpoint is refused by
 * name (they resumed with exit 0 and a gap: quantizer steps 0 1 4 5). */
TEST(cli_train_guard, resume_refuses_damaged_or_incomplete_logs_untouched)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    const char *cfg = g_config("gaps", "");
    ASSERT_TRUE(cfg != NULL);
    const char *root = g_root();
    ASSERT_EQ_INT(g_cli("train --config %s --steps 4 --quiet%s", cfg, ""), 0);
    ASSERT_EQ_INT(g_sh("rm -rf '@/gaps0' && cp -r '@/gaps' '@/gaps0'", root), 0);
    static const char *const cases[][2] = {
        {"echo garbage >> '@/gaps/quant.jsonl.zst'", "quant.jsonl.zst"},
        {"truncate -s 2000 '@/gaps/quant.jsonl.zst'", "quant.jsonl.zst"},
        {": > '@/gaps/quant.jsonl.zst'", "quant.jsonl.zst"},
        {"rm '@/gaps/quant.jsonl.zst'", "quant.jsonl.zst"},
        {"head -n 2 '@/gaps0/metrics.jsonl' > '@/gaps/metrics.jsonl'", "metrics.jsonl"},
        {"rm '@/gaps/metrics.jsonl'", "metrics.jsonl"},
        {"rm '@/gaps/events.jsonl'", "events.jsonl"},
        {"grep -v phase '@/gaps0/events.jsonl' > '@/gaps/events.jsonl'", "events.jsonl"},
    };
    static const char *const files[] = {"metrics.jsonl", "events.jsonl", "quant.jsonl.zst"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ASSERT_EQ_INT(g_sh("rm -rf '@/gaps' && cp -r '@/gaps0' '@/gaps'", root), 0);
        ASSERT_EQ_INT(g_sh(cases[i][0], root), 0);
        char *before[3];
        size_t nb[3];
        for (int f = 0; f < 3; f++)
            before[f] = g_read("gaps", files[f], &nb[f]);
        int rc = g_cli("train --resume %s/gaps --set steps=6 --quiet%s", root, "");
        int same = 1;
        for (int f = 0; f < 3; f++) {
            size_t na;
            char *after = g_read("gaps", files[f], &na);
            same &= g_same(before[f], nb[f], after, na);
            qs_free(after);
            qs_free(before[f]);
        }
        if (rc != 2 || !strstr(g_err, cases[i][1]) || !same)
            fprintf(stderr, "    case %zu (%s): rc %d, same %d: %s", i, cases[i][0], rc, same,
                    g_err);
        ASSERT_EQ_INT(rc, 2);
        ASSERT_TRUE(strstr(g_err, cases[i][1]) != NULL);
        ASSERT_TRUE(strstr(g_err, "ckpt/step_4") != NULL || strstr(g_err, "corrupt") != NULL);
        ASSERT_TRUE(g_one_line());
        ASSERT_TRUE(same);
    }
    /* the logs as written resume */
    ASSERT_EQ_INT(g_sh("rm -rf '@/gaps' && cp -r '@/gaps0' '@/gaps'", root), 0);
    ASSERT_EQ_INT(g_cli("train --resume %s/gaps --set steps=6 --quiet%s", root, ""), 0);
}

/* Editing RUN/config.json between runs went round the --resume --set guard
 * (batch_size 2 -> 3 resumed with other losses): the checkpoint records the
 * config it was made with and a changed frozen key is refused by name with
 * both values; a checkpoint without the record (older) resumes as before. */
TEST(cli_train_guard, resume_refuses_a_frozen_key_edited_in_the_run_config)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    const char *cfg = g_config("frozen", "");
    ASSERT_TRUE(cfg != NULL);
    const char *root = g_root();
    ASSERT_EQ_INT(g_cli("train --config %s --steps 4 --quiet%s", cfg, ""), 0);
    ASSERT_EQ_INT(g_sh("rm -rf '@/frozen0' && cp -r '@/frozen' '@/frozen0'", root), 0);
    static const char *const edits[][3] = {
        {"s/\"batch_size\": *2/\"batch_size\": 3/", "batch_size: 3", "made with 2"},
        {"s/\"log_every\": *1/\"log_every\": 2/", "log_every: 2", "made with 1"},
        {"s/\"precision\": *\"fp32\"/\"precision\": \"bf16\"/", "precision: 'bf16'",
         "made with 'fp32'"},
        {"s/\"bf16_warmup_steps\": *2/\"bf16_warmup_steps\": 1/", "bf16_warmup_steps: 1",
         "made with 2"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
        char sh[600];
        snprintf(sh, sizeof sh, "rm -rf '@/frozen' && cp -r '@/frozen0' '@/frozen' && "
                                "sed -i '%s' '@/frozen/config.json'", edits[i][0]);
        ASSERT_EQ_INT(g_sh(sh, root), 0);
        int rc = g_cli("train --resume %s/frozen --set steps=6 --quiet%s", root, "");
        if (rc != 2 || !strstr(g_err, edits[i][1]) || !strstr(g_err, edits[i][2]))
            fprintf(stderr, "    edit %zu: rc %d: %s", i, rc, g_err);
        ASSERT_EQ_INT(rc, 2);
        ASSERT_TRUE(strstr(g_err, "config.json") != NULL);
        ASSERT_TRUE(strstr(g_err, edits[i][1]) != NULL && strstr(g_err, edits[i][2]) != NULL);
        ASSERT_TRUE(g_one_line());
    }
    /* a checkpoint without the record resumes as before */
    ASSERT_EQ_INT(g_sh("rm -rf '@/frozen' && cp -r '@/frozen0' '@/frozen' && "
                       "rm '@/frozen/ckpt/step_4/run_config.json'", root), 0);
    ASSERT_EQ_INT(g_cli("train --resume %s/frozen --set steps=6 --quiet%s", root, ""), 0);
}
