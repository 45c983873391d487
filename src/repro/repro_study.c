/* repro_study.c: `qatscope reproduce` end to end (include/qs/repro.h).
 *
 *   OUT/world/            the fact world (world.json, pretrain.txt, cpt.txt, facts/, facts.tsv)
 *                         + token shards pretrain_shards/, cpt_shards/
 *   OUT/base/init/        random init of the base model
 *   OUT/base/pretrain/    its pretraining run (ckpt/step_N = the base model)
 *   OUT/base/bench/       the base model's probe results (the gate's baseline)
 *   OUT/runs/<name>/      each grid run (+ bench/: its end-of-run benchmark)
 *   OUT/REPORT.md, OUT/report.json, OUT/summary.png
 * Everything is a function of the seed and the scale: the study key (every size
 * and hyperparameter as text) is stored next to each cached product, and a
 * product is rebuilt when its key differs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/shard_build.h"
#include "repro_impl.h"

void repro_opts_default(repro_opts *o)
{
    memset(o, 0, sizeof *o);
    o->out_dir = "build/reproduce";
    o->seed = 1;
    o->tasks_dir = "tasks";
    o->tokenizer_dir = "data/demo/model";
}

static int study_paths(const repro_opts *o, const repro_scale *s, repro_paths *p, qs_diag *d)
{
    memset(p, 0, sizeof *p);
    if (strlen(o->out_dir) >= sizeof p->out - 64 || strlen(o->tasks_dir) >= sizeof p->tasks ||
        strlen(o->tokenizer_dir) >= sizeof p->tokenizer)
        return diag_set(d, QS_ERANGE, o->out_dir, -1, "path too long (at most %zu bytes)",
                        sizeof p->out - 64);
    snprintf(p->out, sizeof p->out, "%s", o->out_dir);
    snprintf(p->tasks, sizeof p->tasks, "%s", o->tasks_dir);
    snprintf(p->tokenizer, sizeof p->tokenizer, "%s", o->tokenizer_dir);
    snprintf(p->world, sizeof p->world, "%s/world", p->out);
    snprintf(p->pre_shards, sizeof p->pre_shards, "%s/world/pretrain_shards", p->out);
    snprintf(p->cpt_shards, sizeof p->cpt_shards, "%s/world/cpt_shards", p->out);
    snprintf(p->init, sizeof p->init, "%s/base/init", p->out);
    snprintf(p->pretrain, sizeof p->pretrain, "%s/base/pretrain", p->out);
    snprintf(p->base_model, sizeof p->base_model, "%s/base/pretrain/ckpt/step_%ld", p->out,
             s->pre_steps);
    snprintf(p->base_bench, sizeof p->base_bench, "%s/base/bench", p->out);
    snprintf(p->runs, sizeof p->runs, "%s/runs", p->out);
    return 0;
}

/* Every number the products depend on, as text (the cache key). */
static void study_key(const repro_scale *s, uint64_t seed, char *key, size_t n)
{
    const repro_world_opts *w = &s->world;
    const repro_model_spec *m = &s->model;
    snprintf(key, n,
             "qatscope reproduce 1 scale=%s seed=%llu world=%d,%d,%d,%ld,%ld "
             "model=%d,%d,%d,%d,%d,%d bt=%ld,%ld pre=%ld,%ld,%ld,%.9g grid=%ld,%ld,%.9g,%.9g,"
             "%.9g,%.9g,%.9g",
             s->name, (unsigned long long)seed, w->n_entities, w->renders_per_entity,
             w->qa_per_entity, w->pretrain_stories, w->cpt_stories, m->n_layers, m->dim, m->hidden_dim, m->n_heads,
             m->n_kv_heads, m->max_pos, s->batch, s->seq, s->pre_steps, s->pre_lr_warmup,
             s->pre_eval_every, s->pre_lr, s->steps, s->eval_every, s->lr_high, s->lr_low,
             s->warmup_frac, s->spike_rate, s->spike_scale);
}

static int study_world(const repro_opts *o, const repro_scale *s, const repro_paths *p,
                       qs_diag *d)
{
    repro_world_summary ws;
    int rc = repro_world_write(&s->world, p->world, &ws, d);
    if (rc)
        return rc;
    const struct { const char *text; const char *out; } corp[2] = {{"pretrain.txt", p->pre_shards},
                                                                    {"cpt.txt", p->cpt_shards}};
    for (int i = 0; i < 2; i++) {
        char in[RUNCFG_STR_MAX + 32];
        snprintf(in, sizeof in, "%s/%s", p->world, corp[i].text);
        const char *inputs[1] = {in};
        shard_build_opts so;
        shard_build_opts_default(&so);
        so.val_fraction = 0.02;
        so.seed = o->seed;
        shard_build_summary sum;
        if ((rc = shard_build_run(p->tokenizer, inputs, 1, corp[i].out, &so, &sum, d)))
            return rc;
        repro_log(o, "   %s: %llu documents, %llu train + %llu val tokens", corp[i].text,
                  (unsigned long long)sum.n_docs, (unsigned long long)sum.train_tokens,
                  (unsigned long long)sum.val_tokens);
    }
    repro_log(o, "   %d people x %d attributes = %d facts; probe: %ld questions (4 choices, "
              "phrasings held out of the training text)", ws.n_entities, ws.n_attrs, ws.n_facts,
              ws.probe_items);
    return 0;
}

/* bench_dir/results.json for model_dir unless bench_dir/repro.key already says key */
static int study_bench(const repro_opts *o, const char *model_dir, int quantized,
                       const repro_paths *p, const char *bench_dir, const char *key, int force,
                       qs_diag *d)
{
    char key_path[RUNCFG_STR_MAX + 32], res[RUNCFG_STR_MAX + 32];
    snprintf(key_path, sizeof key_path, "%s/repro.key", bench_dir);
    snprintf(res, sizeof res, "%s/results.json", bench_dir);
    if (!force && fileio_exists(res) && repro_key_matches(key_path, key))
        return 0;
    double acc = 0;
    int rc = repro_bench_eval(model_dir, quantized, p->world, p->tasks, bench_dir, &acc, d);
    if (!rc)
        rc = fileio_write_atomic(key_path, key, strlen(key), d);
    if (!rc)
        repro_log(o, "   end-of-run benchmark (%s): probe acc %.2f%%", quantized ? "HiF8, delayed "
                  "scales from the checkpoint" : "fp32", 100 * acc);
    return rc;
}

/* "1-most-recent-high,5" or "1,5,8s": names or their leading label */
static int study_selected(const char *list, const repro_run_spec *r)
{
    if (!list || !*list)
        return 1;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        size_t n = strlen(t);
        if (!strcmp(t, r->name) || (!strncmp(t, r->name, n) && r->name[n] == '-'))
            return 1;
    }
    return 0;
}

static int study_check_runs(const char *list, qs_diag *d)
{
    if (!list || !*list)
        return 0;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int hit = 0;
        for (int i = 0; i < repro_grid_count() && !hit; i++) {
            repro_run_spec one = *repro_grid_spec(i);
            hit = study_selected(t, &one);
        }
        if (!hit)
            return diag_set(d, QS_EINVAL, NULL, -1,
                            "--runs: no grid run '%s' (expected a name such as %s or its number "
                            "1..8, 7s, 8s)", t, REPRO_RUN_MW_LOW);
    }
    return 0;
}

/* "1e-3,3e-4" -> BF16 runs sweep-bf16-lr1e-3, ... appended to sel */
static int study_sweep(const char *list, repro_run_spec *sel, int *n_sel,
                       char names[16][REPRO_NAME_MAX], char labels[16][64], qs_diag *d)
{
    if (!list || !*list)
        return 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    int k = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), k++) {
        char *end;
        double lr = strtod(t, &end);
        if (end == t || *end || !(lr > 0 && lr <= 1) || strlen(t) > 16)
            return diag_set(d, QS_EINVAL, NULL, -1, "--lr-sweep: expected learning rates in (0, 1] "
                            "separated by commas, got '%s'", t);
        if (k == 16 || *n_sel == 32)
            return diag_set(d, QS_ERANGE, NULL, -1, "--lr-sweep: at most 16 learning rates");
        snprintf(names[k], REPRO_NAME_MAX, "sweep-bf16-lr%s", t);
        snprintf(labels[k], 64, "sweep: BF16 at lr %s", t);
        sel[(*n_sel)++] = (repro_run_spec){names[k], labels[k], -1, NULL, 0, 0, 0, lr};
    }
    return 0;
}

int repro_study_run(const repro_opts *o, qs_diag *d)
{
    repro_scale s;
    if (o->scale)
        s = *o->scale;
    else
        repro_scale_preset(o->quick, &s);
    s.world.seed = o->seed;
    repro_paths p;
    int rc = study_paths(o, &s, &p, d);
    if (rc || (rc = study_check_runs(o->runs, d)))
        return rc;
    char probe_def[RUNCFG_STR_MAX + 32];
    snprintf(probe_def, sizeof probe_def, "%s/%s.json", p.tasks, REPRO_PROBE_TASK);
    if (!fileio_exists(probe_def))
        return diag_set(d, QS_ENOTFOUND, probe_def, -1,
                        "the fact probe's task definition is missing (run from the repository "
                        "root or pass --tasks-dir)");
    char key[1024];
    study_key(&s, o->seed, key, sizeof key);
    repro_timing tm;
    memset(&tm, 0, sizeof tm);
    double t_all = repro_now_s(), t0 = t_all;

    repro_log(o, "== world (%s scale, seed %llu) -> %s", s.name, (unsigned long long)o->seed, p.world);
    if ((rc = study_world(o, &s, &p, d)))
        return rc;
    tm.world_s = repro_now_s() - t0;

    t0 = repro_now_s();
    runcfg pre;
    repro_pretrain_config(&s, o->seed, &p, &pre);
    repro_log(o, "== base model: %d blocks x dim %d, pretrained %ld steps on the world -> %s",
              s.model.n_layers, s.model.dim, s.pre_steps, p.base_model);
    char pre_key[RUNCFG_STR_MAX + 32];
    snprintf(pre_key, sizeof pre_key, "%s/repro.key", p.pretrain);
    if ((rc = repro_base_init(&s.model, p.tokenizer, p.init, o->seed, d)))
        return rc;
    if ((rc = repro_train(&pre, key, o, d)) < 0)
        return rc;
    tm.base_reused = rc == 1;
    if (tm.base_reused)
        repro_log(o, "   reused (same key)");
    if ((rc = study_bench(o, p.base_model, 0, &p, p.base_bench, key, !tm.base_reused, d)))
        return rc;
    tm.base_s = repro_now_s() - t0;

    repro_run_spec sel[32];
    char sweep_names[16][REPRO_NAME_MAX], sweep_labels[16][64];
    int n_sel = 0;
    for (int i = 0; i < repro_grid_count(); i++)
        if (study_selected(o->runs, repro_grid_spec(i)))
            sel[n_sel++] = *repro_grid_spec(i);
    if ((rc = study_sweep(o->lr_sweep, sel, &n_sel, sweep_names, sweep_labels, d)))
        return rc;
    for (int i = 0; i < n_sel; i++) {
        t0 = repro_now_s();
        runcfg c;
        repro_run_config(&s, &sel[i], o->seed, &p, &c);
        repro_log(o, "== run %d/%d %s: %s, lr %g, %ld steps%s", i + 1, n_sel, sel[i].name,
                  sel[i].label, c.lr, c.steps, c.spike_rate > 0 ? ", spikes on" : "");
        int reused = rc = repro_train(&c, key, o, d);
        if (rc < 0)
            return rc;
        if (reused)
            repro_log(o, "   reused (same key)");
        char model[RUNCFG_STR_MAX + 32], bench[RUNCFG_STR_MAX + 32];
        snprintf(model, sizeof model, "%s/ckpt/step_%ld", c.out_dir, c.steps);
        snprintf(bench, sizeof bench, "%s/bench", c.out_dir);
        if ((rc = study_bench(o, model, c.qat, &p, bench, key, !reused, d)))
            return rc;
        tm.run_s[i] = repro_now_s() - t0;
        tm.run_reused[i] = reused;
    }
    tm.total_s = repro_now_s() - t_all;
    repro_log(o, "== report -> %s/REPORT.md", p.out);
    return repro_report_write(o, &s, &p, sel, n_sel, &tm, d);
}
