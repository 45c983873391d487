/* test_repro_study.c: `qatscope reproduce` end to end on a tiny scale (a few
 * seconds): the same seed gives the same report (timing aside), and a second
 * invocation reuses every cached product. */
#include <stdlib.h>

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
