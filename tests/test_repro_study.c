/* test_repro_study.c: `qatscope reproduce` end to end on a tiny scale (a few
 * seconds): the same seed gives the same report (timing aside), and a second
 * invocation reuses every cached product; the shipped files are found from any
 * directory, and a missing one is refused before anything is written. */
#include <stdlib.h>
#include <sys/wait.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/repro.h"
#include "test.h"

static void tiny_scale(repro_scale *s)
{
    repro_scale_preset(1, s);
    s->name = "test";
    s->world = (repro_world_opts){0, 8, 2, 2, 6, 30};
    s->model = (repro_model_spec){12, 16, 32, 2, 1, 128};
    s->batch = 2;
    s->seq = 32;
    s->pre_steps = 12;
    s->pre_lr_warmup = 2;
    s->pre_eval_every = 6;
    s->steps = 8;
    s->eval_every = 4;
    s->warmup_frac = 0.25;
}

static int study(const char *name, const repro_scale *s)
{
    repro_opts o;
    repro_opts_default(&o);
    char out[600];
    snprintf(out, sizeof out, "%s/%s", test_tmp_dir(), name);
    o.out_dir = out;
    o.scale = s;
    o.runs = "1,5,8";
    o.seed = 3;
    qs_diag d = {0};
    int rc = repro_study_run(&o, &d);
    if (rc)
        fprintf(stderr, "    study %s: %s: %s\n", name, d.path, d.msg);
    return rc;
}

static char *slurp(const char *name, const char *file)
{
    char path[700], *text = NULL;
    size_t n;
    snprintf(path, sizeof path, "%s/%s/%s", test_tmp_dir(), name, file);
    return fileio_read_all(path, &text, &n, NULL) ? NULL : text;
}

TEST(repro_study, same_seed_same_report_and_a_rerun_reuses_everything)
{
    repro_scale s;
    tiny_scale(&s);
    ASSERT_EQ_INT(study("study_a", &s), 0);
    ASSERT_EQ_INT(study("study_b", &s), 0);
    char *ja = slurp("study_a", "report.json"), *jb = slurp("study_b", "report.json");
    char *ma = slurp("study_a", "REPORT.md"), *mb = slurp("study_b", "REPORT.md");
    ASSERT_TRUE(ja && jb && ma && mb);
    ASSERT_TRUE(!strcmp(ja, jb));
    char *ta = strstr(ma, "## Timing"), *tb = strstr(mb, "## Timing");
    ASSERT_TRUE(ta && tb);
    *ta = *tb = 0;                           /* timing aside */
    ASSERT_TRUE(!strcmp(ma, mb));
    ASSERT_TRUE(strstr(ja, "\"1-most-recent-high\"") && strstr(ja, "\"5-bf16-high\"") &&
                strstr(ja, "\"8-max-window-low-warmup\"") && !strstr(ja, "\"6-bf16-low\""));
    ASSERT_TRUE(strstr(ma, "not assessed") != NULL);   /* (e) needs run 6 */
    char path[700];
    snprintf(path, sizeof path, "%s/study_a/summary.png", test_tmp_dir());
    ASSERT_TRUE(fileio_exists(path));
    qs_free(jb);
    qs_free(ma);
    qs_free(mb);

    ASSERT_EQ_INT(study("study_a", &s), 0);   /* again: every product cached */
    char *tj = slurp("study_a", "timing.json"), *ja2 = slurp("study_a", "report.json");
    ASSERT_TRUE(tj && ja2);
    ASSERT_TRUE(strstr(tj, "\"base_reused\": true") != NULL);
    ASSERT_TRUE(strstr(tj, "\"reused\": false") == NULL);
    ASSERT_TRUE(!strcmp(ja, ja2));
    qs_free(tj);
    qs_free(ja2);
    qs_free(ja);
}

TEST(repro_study, unknown_run_name_is_one_clear_error)
{
    repro_opts o;
    repro_opts_default(&o);
    char out[600];
    snprintf(out, sizeof out, "%s/study_bad", test_tmp_dir());
    o.out_dir = out;
    o.runs = "1,9";
    qs_diag d = {0};
    ASSERT_EQ_INT(repro_study_run(&o, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "'9'") != NULL);
    ASSERT_TRUE(!fileio_exists(out));        /* nothing written */
}

TEST(repro_study, pretraining_stops_when_the_probe_reaches_the_target)
{
    repro_scale s;
    tiny_scale(&s);
    s.probe_target = 0.0;                    /* reached at the first evaluation after step 0 */
    repro_opts o;
    repro_opts_default(&o);
    char out[600];
    snprintf(out, sizeof out, "%s/study_target", test_tmp_dir());
    o.out_dir = out;
    o.scale = &s;
    o.runs = "6";
    qs_diag d = {0};
    ASSERT_OK(repro_study_run(&o, &d), &d);
    char *j = slurp("study_target", "report.json"), *ev = slurp("study_target", "base/pretrain/events.jsonl");
    ASSERT_TRUE(j && ev);
    ASSERT_TRUE(strstr(j, "\"pretrain_steps\": 6,") != NULL);
    ASSERT_TRUE(strstr(ev, "{\"step\":6,\"type\":\"stop\",\"reason\":\"target\"}") != NULL);
    char path[700];
    snprintf(path, sizeof path, "%s/base/pretrain/ckpt/step_6/model.safetensors", out);
    ASSERT_TRUE(fileio_exists(path));
    qs_free(j);
    qs_free(ev);
    ASSERT_OK(repro_study_run(&o, &d), &d);   /* a stopped pretraining is reused too */
    char *tj = slurp("study_target", "timing.json");
    ASSERT_TRUE(tj && strstr(tj, "\"base_reused\": true") != NULL);
    qs_free(tj);
}

/* A tokenizer directory that is not there is refused before the world is
 * written (it was found only after OUT/world existed). */
TEST(repro_study, missing_tokenizer_is_refused_before_anything_is_written)
{
    repro_opts o;
    repro_opts_default(&o);
    char out[600];
    snprintf(out, sizeof out, "%s/study_notok", test_tmp_dir());
    o.out_dir = out;
    o.tokenizer_dir = "no/such/tokenizer";
    qs_diag d = {0};
    ASSERT_EQ_INT(repro_study_run(&o, &d), QS_ENOTFOUND);
    ASSERT_EQ_STR(d.path, "no/such/tokenizer");
    ASSERT_TRUE(!fileio_exists(out));        /* nothing written */
}

/* The CLI finds tasks/fact_probe.json and the bundled tokenizer in the binary's
 * tree, as demo and eval find theirs, not in the current directory: started
 * elsewhere it gets past both checks to the world (here refused at once: OUT is
 * a file, so nothing long runs). */
TEST(repro_study, cli_finds_the_shipped_files_from_any_directory)
{
    char bin[4096];
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    ASSERT_TRUE(realpath(getenv("QS_BIN"), bin) != NULL);
    char away[700], out[800], cmd[6000], path[900];
    snprintf(away, sizeof away, "%s/repro_elsewhere", test_tmp_dir());
    ASSERT_OK(fileio_mkdir_p(away, NULL), NULL);
    snprintf(out, sizeof out, "%s/not_a_dir", away);
    ASSERT_OK(fileio_write_atomic(out, "x", 1, NULL), NULL);
    snprintf(cmd, sizeof cmd, "cd %s && %s reproduce --quick --out %s >out.txt 2>err.txt", away,
             bin, out);
    ASSERT_EQ_INT(WEXITSTATUS(system(cmd)), 2);
    char *so = NULL, *se = NULL;
    size_t n;
    snprintf(path, sizeof path, "%s/out.txt", away);
    ASSERT_OK(fileio_read_all(path, &so, &n, NULL), NULL);
    snprintf(path, sizeof path, "%s/err.txt", away);
    ASSERT_OK(fileio_read_all(path, &se, &n, NULL), NULL);
    int past = strstr(so, "== world") != NULL, named = strstr(se, out) != NULL,
        shipped = strstr(se, "fact_probe") || strstr(se, "tokenizer");
    if (!past || !named || shipped)
        fprintf(stderr, "    stdout: %s    stderr: %s", so, se);
    qs_free(so);
    qs_free(se);
    ASSERT_TRUE(past && named && !shipped);
}
