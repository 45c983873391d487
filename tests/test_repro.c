/* test_repro.c: the reproduction's parts that need no training: the fact world
 * (deterministic, probes held out of the training text, continued-pretraining
 * text without the people), a run's logs read back, and the claims decided on
 * synthetic results. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/prompt.h"
#include "qs/qlog.h"
#include "qs/repro.h"
#include "qs/runcfg.h"
#include "qs/task.h"
#include "test.h"

static const repro_world_opts small_world = {7, 30, 3, 2, 20, 40};

static char *slurp(const char *dir, const char *name)
{
    char path[700], *text = NULL;
    size_t n;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (fileio_read_all(path, &text, &n, NULL))
        return NULL;
    return text;
}

/* the small world written into test_tmp_dir()/name (each test its own) */
static int world_dir(char *dir, size_t n, const char *name)
{
    repro_world_summary s;
    snprintf(dir, n, "%s/%s", test_tmp_dir(), name);
    return repro_world_write(&small_world, dir, &s, NULL);
}

TEST(repro, world_is_deterministic_and_complete)
{
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/world_a", test_tmp_dir());
    snprintf(b, sizeof b, "%s/world_b", test_tmp_dir());
    qs_diag d = {0};
    repro_world_summary sa, sb;
    ASSERT_OK(repro_world_write(&small_world, a, &sa, &d), &d);
    ASSERT_OK(repro_world_write(&small_world, b, &sb, &d), &d);
    ASSERT_EQ_INT(sa.n_facts, 30 * repro_world_n_attrs());
    ASSERT_EQ_INT(sa.probe_items, sa.n_facts);
    ASSERT_EQ_INT(sa.pretrain_docs, 30 * 3 + 30 * 2 + 20);
    const char *files[] = {"pretrain.txt", "cpt.txt", REPRO_PROBE_FILE, "facts.tsv", "world.json"};
    for (int i = 0; i < 5; i++) {
        char *x = slurp(a, files[i]), *y = slurp(b, files[i]);
        ASSERT_TRUE(x && y && !strcmp(x, y));
        qs_free(x);
        qs_free(y);
    }
    /* another seed, another world */
    repro_world_opts other = small_world;
    other.seed = 8;
    ASSERT_OK(repro_world_write(&other, b, &sb, &d), &d);
    char *x = slurp(a, "facts.tsv"), *y = slurp(b, "facts.tsv");
    ASSERT_TRUE(x && y && strcmp(x, y));
    qs_free(x);
    qs_free(y);
}

TEST(repro, probe_items_have_four_distinct_choices_with_the_fact)
{
    char dir[600];
    ASSERT_EQ_INT(world_dir(dir, sizeof dir, "world_probe"), 0);
    char *probe = slurp(dir, REPRO_PROBE_FILE), *facts = slurp(dir, "facts.tsv");
    ASSERT_TRUE(probe && facts);
    int n = 0;
    char *fl = strchr(facts, '\n') + 1;   /* past the header: facts in probe order */
    for (char *s = probe, *e; (e = strchr(s, '\n')); s = e + 1, n++) {
        json_t *o = json_loadb(s, (size_t)(e - s), 0, NULL);
        const json_t *text = json_object_get(json_object_get(o, "choices"), "text");
        ASSERT_EQ_INT(json_array_size(text), 4);
        const char *key = json_string_value(json_object_get(o, "answerKey"));
        ASSERT_TRUE(key && key[0] >= 'A' && key[0] <= 'D');
        const char *gold = json_string_value(json_array_get(text, (size_t)(key[0] - 'A')));
        char *tab2 = strchr(strchr(fl, '\t') + 1, '\t') + 1, *nl = strchr(fl, '\n');
        ASSERT_TRUE(gold && strlen(gold) == (size_t)(nl - tab2) && !strncmp(gold, tab2, strlen(gold)));
        for (int i = 0; i < 4; i++)
            for (int j = i + 1; j < 4; j++)
                ASSERT_TRUE(strcmp(json_string_value(json_array_get(text, (size_t)i)),
                                   json_string_value(json_array_get(text, (size_t)j))));
        json_decref(o);
        fl = nl + 1;
    }
    ASSERT_EQ_INT(n, 30 * repro_world_n_attrs());
    qs_free(probe);
    qs_free(facts);
}

/* The probe's phrasings occur nowhere in the training text: no probe template
 * is a training template, every probe template has a fixed part (the text before
 * or after {N}) that pretrain.txt never contains, and no probe template filled
 * with ANY person's name occurs in it. */
TEST(repro, probe_phrasings_are_held_out_of_the_training_text)
{
    char dir[600];
    ASSERT_EQ_INT(world_dir(dir, sizeof dir, "world_held_out"), 0);
    char *pre = slurp(dir, "pretrain.txt"), *facts = slurp(dir, "facts.tsv");
    ASSERT_TRUE(pre && facts);
    int filled = 0;
    for (int a = 0; a < repro_world_n_attrs(); a++) {
        const repro_attr *at = repro_world_attr(a);
        for (int p = 0; p < at->n_probe; p++) {
            for (int t = 0; t < at->n_train; t++)
                ASSERT_TRUE(strcmp(at->probe[p], at->train[t]));
            for (int t = 0; t < at->n_qa; t++)
                ASSERT_TRUE(strcmp(at->probe[p], at->qa[t]));
            const char *tpl = at->probe[p], *hole = strstr(tpl, "{N}");
            ASSERT_TRUE(hole != NULL);
            char before[160], after[160], q[256];
            snprintf(before, sizeof before, "%.*s", (int)(hole - tpl), tpl);
            snprintf(after, sizeof after, "%s", hole + 3);
            int unseen = (strlen(before) > 4 && !strstr(pre, before)) ||
                         (strlen(after) > 4 && !strstr(pre, after));
            if (!unseen)
                fprintf(stderr, "    probe template '%s': every fixed part is in the text\n", tpl);
            ASSERT_TRUE(unseen);
            for (char *s = strchr(facts, '\n') + 1, *tab; (tab = strchr(s, '\t'));
                 s = strchr(s, '\n') + 1) {
                snprintf(q, sizeof q, "%s%.*s%s", before, (int)(tab - s), s, after);
                ASSERT_TRUE(strstr(pre, q) == NULL);
                filled++;
            }
        }
    }
    ASSERT_TRUE(filled >= 30 * repro_world_n_attrs());
    ASSERT_TRUE(strstr(pre, "Question: ") != NULL);   /* the format itself is trained */
    qs_free(pre);
    qs_free(facts);
}

TEST(repro, continued_pretraining_text_never_names_a_person)
{
    char dir[600];
    ASSERT_EQ_INT(world_dir(dir, sizeof dir, "world_cpt"), 0);
    char *cpt = slurp(dir, "cpt.txt"), *facts = slurp(dir, "facts.tsv");
    ASSERT_TRUE(cpt && facts);
    int people = 0;
    for (char *s = strchr(facts, '\n') + 1, *tab; (tab = strchr(s, '\t')); s = strchr(s, '\n') + 1) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(tab - s), s);
        const char *sur = strchr(name, ' ') + 1;   /* surnames are invented: never in stories */
        ASSERT_TRUE(strstr(cpt, sur) == NULL);
        people++;
    }
    ASSERT_EQ_INT(people, 30 * repro_world_n_attrs());
    qs_free(cpt);
    qs_free(facts);
}

/* tasks/fact_probe.json: ARC's loader and prompt (Question/Answer, 0-shot, 4 choices) on a
 * self-made item in the layout the world writes (tests/data/tasks/data/facts/). */
TEST(repro, fact_probe_task_prompt_is_arc_style)
{
    task_def def;
    task_data td;
    qs_diag d = {0};
    ASSERT_OK(task_def_load_named(&def, "tasks", REPRO_PROBE_TASK, &d), &d);
    ASSERT_OK(task_data_load(&td, &def, "tests/data/tasks/data", 0, &d), &d);
    ASSERT_EQ_INT(td.n_docs, 2);
    char *c = NULL;
    ASSERT_OK(prompt_context_build(&def, &td, &td.docs[0], NULL, 0, &c, &d), &d);
    ASSERT_EQ_STR(c, "Question: What is the home town of Ana Barby?\nAnswer:");
    qs_free(c);
    ASSERT_EQ_STR(prompt_choice(&def, &td.docs[1], 3), "cat");
    ASSERT_EQ_INT(td.docs[1].gold, 3);
    ASSERT_EQ_INT(td.docs[0].n_choices, 4);
    task_data_free(&td);
    task_def_free(&def);
}

TEST(repro, bad_world_options_are_one_clear_error)
{
    repro_world_opts o = small_world;
    o.n_entities = 0;
    repro_world_summary s;
    qs_diag d = {0};
    char dir[600];
    snprintf(dir, sizeof dir, "%s/world_bad", test_tmp_dir());
    ASSERT_EQ_INT(repro_world_write(&o, dir, &s, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "people") != NULL);
}

/* ---- a run's logs ---- */

static void write_text(const char *dir, const char *name, const char *text)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    fileio_write_atomic(path, text, strlen(text), NULL);
}

/* A QAT run of 4 steps (1 warmup) with 2 quantizers: the logs written by hand. */
static int fake_run(const char *dir, double loss_offset, qs_diag *d)
{
    int rc = fileio_mkdir_p(dir, d);
    if (rc)
        return rc;
    runcfg c;
    runcfg_defaults(&c);
    snprintf(c.amax_estimator, sizeof c.amax_estimator, "most-recent");
    c.steps = 4;
    c.bf16_warmup_steps = 1;
    c.lr = 1e-3;
    char *js = runcfg_to_json(&c);
    write_text(dir, "config.json", js);
    qs_free(js);
    char m[2048] = "";
    for (int s = 0; s < 4; s++) {
        size_t k = strlen(m);
        snprintf(m + k, sizeof m - k, "{\"type\":\"train\",\"step\":%d,\"loss\":%.3f}\n", s,
                 2.0 - 0.1 * s + loss_offset);
        if (s == 1 || s == 3) {
            k = strlen(m);
            snprintf(m + k, sizeof m - k,
                     "{\"type\":\"eval\",\"step\":%d,\"val_loss\":1.5,\"tasks\":{\"fact_probe\":"
                     "{\"acc\":%s,\"n\":4,\"items_acc\":\"1101\"}}}\n", s + 1, s == 1 ? "0.75" : "0.5");
        }
    }
    write_text(dir, "metrics.jsonl", m);
    write_text(dir, "events.jsonl",
               "{\"step\":1,\"type\":\"phase\",\"phase\":\"qat\"}\n"
               "{\"step\":2,\"type\":\"saturation\",\"tensor\":\"a.input\"}\n"
               "{\"step\":2,\"type\":\"spike\",\"tensor\":\"a.input\",\"row\":1,\"scale\":32,\"amax\":9}\n"
               "{\"step\":3,\"type\":\"forgetting\",\"task\":\"fact_probe\"}\n"
               "{\"step\":3,\"type\":\"saturation\",\"tensor\":\"b.weight\"}\n"
               "{\"step\":4,\"type\":\"stop\",\"reason\":\"done\"}\n");
    quant_recipe r;
    quant_recipe_default(&r);
    const char *names[2] = {"a.input", "b.weight"};
    char path[700];
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", dir);
    qlog_writer *w;
    if ((rc = qlog_writer_create(&w, path, "fake", &r, names, 2, 0, d)))
        return rc;
    for (int s = 0; s < 4; s++) {
        qlog_row rows[2];
        for (int q = 0; q < 2; q++) {
            memset(&rows[q], 0, sizeof rows[q]);
            rows[q].mode = s ? QUANT_MODE_QUANT : QUANT_MODE_OBSERVE;
            rows[q].est_idx = 0;
            rows[q].pred_amax = rows[q].amax = 1.0f;
            rows[q].scale = 32768.0f;
            rows[q].n = 1000;
            rows[q].clip = (s == 2 && q == 0) ? 5 : (s == 3 && q == 1) ? 1 : 0;
            rows[q].clip_rate = (float)rows[q].clip / 1000.0f;
            rows[q].under = -1;
            rows[q].under_rate = rows[q].qsnr_db = NAN;
        }
        if ((rc = qlog_write_step(w, s, s ? QLOG_PHASE_QAT : QLOG_PHASE_WARMUP, rows, d)))
            return rc;
    }
    return qlog_writer_close(w, d);
}

TEST(repro, run_logs_read_back_into_the_report_fields)
{
    char dir[600], dir2[600];
    snprintf(dir, sizeof dir, "%s/repro_run/4-max-window-high", test_tmp_dir());
    snprintf(dir2, sizeof dir2, "%s/repro_run/other", test_tmp_dir());
    qs_diag d = {0};
    ASSERT_OK(fake_run(dir, 0.0, &d), &d);
    ASSERT_OK(fake_run(dir2, 0.1, &d), &d);
    repro_run_result r, r2;
    ASSERT_OK(repro_run_read(dir, &r, &d), &d);
    ASSERT_EQ_STR(r.name, "4-max-window-high");
    ASSERT_EQ_INT(r.qat, 1);
    ASSERT_EQ_STR(r.estimator, "most-recent");
    ASSERT_EQ_INT(r.complete, 1);
    ASSERT_EQ_INT(r.n_loss, 4);
    ASSERT_EQ_INT(r.n_evals, 2);
    ASSERT_NEAR(r.probe_start, 0.75, 1e-12);
    ASSERT_NEAR(r.probe_final, 0.5, 1e-12);
    ASSERT_EQ_INT(r.probe_items, 4);
    ASSERT_EQ_INT(r.first_sat_alarm, 2);
    ASSERT_EQ_INT(r.n_sat_alarms, 2);
    ASSERT_EQ_INT(r.first_forget_alarm, 3);
    ASSERT_EQ_INT(r.n_spikes, 1);
    ASSERT_EQ_INT(r.tensor_steps, 6);          /* 3 QAT steps x 2 quantizers */
    ASSERT_EQ_INT(r.sat_tensor_steps, 2);
    ASSERT_EQ_INT(r.alarm_tensor_steps, 2);    /* 5e-3 and 1e-3 > 1e-4 */
    ASSERT_OK(repro_run_read(dir2, &r2, &d), &d);
    /* APE: mean |a - b| / b with b = 2.1, 2.0, 1.9, 1.8 and |a - b| = 0.1 */
    double want = 100.0 * (0.1 / 2.1 + 0.1 / 2.0 + 0.1 / 1.9 + 0.1 / 1.8) / 4;
    ASSERT_NEAR(repro_loss_ape(&r, &r2), want, 1e-9);
    repro_run_result_free(&r);
    repro_run_result_free(&r2);
    /* a QAT run without its quantizer log is an error naming the file */
    char path[700];
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", dir2);
    remove(path);
    ASSERT_TRUE(repro_run_read(dir2, &r2, &d) != 0);
    ASSERT_TRUE(strstr(d.path, "quant.jsonl.zst") != NULL || strstr(d.msg, "quant.jsonl.zst") != NULL);
}

/* ---- the claims ---- */

static repro_run_result *synth(repro_run_result *runs, int *n, const char *name, int qat,
                               double lr, double final, long sat, long sat_alarms,
                               long forget_at)
{
    repro_run_result *r = &runs[(*n)++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->qat = qat;
    r->lr = lr;
    r->steps = 100;
    r->complete = 1;
    r->n_evals = 5;
    r->probe_start = 0.9;
    r->probe_final = final;
    r->sat_tensor_steps = sat;
    r->tensor_steps = 1000;
    r->n_sat_alarms = sat_alarms;
    r->first_sat_alarm = sat_alarms ? 3 : -1;
    r->n_forget_alarms = forget_at >= 0;
    r->first_forget_alarm = forget_at;
    r->gate_verdict = -1;
    static double loss[2][20];
    for (int i = 0; i < 20; i++) {
        loss[0][i] = 2.0 - 0.01 * i;   /* falling */
        loss[1][i] = 2.0 - 0.01 * i;
    }
    r->loss = loss[qat];
    r->n_loss = 20;
    return r;
}

/* The paper's outcome: every claim reproduced. */
static int paper_grid(repro_run_result *runs)
{
    int n = 0;
    synth(runs, &n, REPRO_RUN_MR_HIGH, 1, 1e-2, 0.60, 900, 50, 40);
    synth(runs, &n, REPRO_RUN_ES_HIGH, 1, 1e-2, 0.61, 800, 40, 40);
    synth(runs, &n, REPRO_RUN_CUR_HIGH, 1, 1e-2, 0.62, 0, 0, 40);
    synth(runs, &n, REPRO_RUN_MW_HIGH, 1, 1e-2, 0.63, 100, 5, 40);
    synth(runs, &n, REPRO_RUN_BF16_HIGH, 0, 1e-2, 0.64, 0, 0, 40);
    synth(runs, &n, REPRO_RUN_BF16_LOW, 0, 1e-3, 0.89, 0, 0, -1);
    synth(runs, &n, REPRO_RUN_MR_LOW, 1, 1e-3, 0.885, 700, 30, -1);
    synth(runs, &n, REPRO_RUN_MW_LOW, 1, 1e-3, 0.885, 50, 2, -1);
    return n;
}

TEST(repro, claims_all_reproduced_on_the_papers_outcome)
{
    repro_run_result runs[12];
    int n = paper_grid(runs);
    repro_runs_derive(runs, n, 0.9);
    ASSERT_EQ_STR(runs[0].baseline, REPRO_RUN_BF16_HIGH);
    ASSERT_EQ_STR(runs[7].baseline, REPRO_RUN_BF16_LOW);
    ASSERT_NEAR(runs[7].delta_points, -0.5, 1e-9);
    ASSERT_NEAR(runs[4].drop_points, 26.0, 1e-9);
    ASSERT_EQ_INT(runs[0].forget_lead_steps, 60);
    ASSERT_NEAR(runs[0].ape_pct, 0.0, 1e-12);
    repro_thresholds th;
    repro_thresholds_default(&th);
    repro_claim c[REPRO_N_CLAIMS];
    repro_claims_assess(runs, n, &th, c);
    for (int i = 0; i < REPRO_N_CLAIMS; i++) {
        if (c[i].verdict != REPRO_REPRODUCED)
            fprintf(stderr, "    (%c): %s\n", c[i].id, c[i].numbers);
        ASSERT_EQ_INT(c[i].verdict, REPRO_REPRODUCED);
        ASSERT_TRUE(c[i].numbers[0] != 0);
    }
}

TEST(repro, claims_fail_where_the_numbers_do_not_hold)
{
    repro_run_result runs[12];
    int n = paper_grid(runs);
    runs[0].sat_tensor_steps = 150;          /* (a) most-recent only 1.5x max-window */
    runs[4].probe_final = 0.89;              /* (b) BF16 at the high lr keeps its knowledge */
    runs[4].n_forget_alarms = 0;
    runs[4].first_forget_alarm = -1;
    runs[7].probe_final = 0.85;              /* (e) recipe 3 pp below its BF16 baseline */
    runs[3].first_forget_alarm = 100;        /* (f) alarm only at the end */
    repro_runs_derive(runs, n, 0.9);
    repro_thresholds th;
    repro_thresholds_default(&th);
    repro_claim c[REPRO_N_CLAIMS];
    repro_claims_assess(runs, n, &th, c);
    ASSERT_EQ_INT(c[0].verdict, REPRO_NOT_REPRODUCED);
    ASSERT_TRUE(strstr(c[0].numbers, "150") != NULL);
    ASSERT_EQ_INT(c[1].verdict, REPRO_NOT_REPRODUCED);
    ASSERT_TRUE(strstr(c[1].numbers, "no forgetting alarm") != NULL);
    ASSERT_EQ_INT(c[4].verdict, REPRO_NOT_REPRODUCED);
    ASSERT_EQ_INT(c[5].verdict, REPRO_NOT_REPRODUCED);
    ASSERT_TRUE(strstr(c[5].numbers, REPRO_RUN_MW_HIGH) != NULL);
    /* (c): a QAT run whose loss APE is large shows its drop in the loss */
    static double noisy[20];
    for (int i = 0; i < 20; i++)
        noisy[i] = 2.3 - 0.01 * i;
    runs[1].loss = noisy;
    repro_runs_derive(runs, n, 0.9);
    repro_claims_assess(runs, n, &th, c);
    ASSERT_EQ_INT(c[2].verdict, REPRO_NOT_REPRODUCED);
    ASSERT_TRUE(strstr(c[2].numbers, "the loss shows it") != NULL);
}

TEST(repro, claims_without_their_runs_are_not_assessed)
{
    repro_run_result runs[12];
    int n = paper_grid(runs);
    runs[4].complete = 0;                    /* BF16 high lr interrupted */
    runs[7].complete = 0;                    /* the recipe interrupted */
    repro_runs_derive(runs, n, 0.9);
    repro_thresholds th;
    repro_thresholds_default(&th);
    repro_claim c[REPRO_N_CLAIMS];
    repro_claims_assess(runs, n, &th, c);
    ASSERT_EQ_INT(c[1].verdict, REPRO_NOT_ASSESSED);
    ASSERT_EQ_INT(c[3].verdict, REPRO_NOT_ASSESSED);
    ASSERT_EQ_INT(c[4].verdict, REPRO_NOT_ASSESSED);
    ASSERT_EQ_STR(repro_verdict_name(c[4].verdict), "not assessed");
    ASSERT_EQ_STR(runs[0].baseline, "");     /* no complete BF16 run at its lr */
    ASSERT_TRUE(isnan(runs[0].delta_points));
}
