/* repro_report.c: the study's report from the runs' own logs.
 *
 * OUT/REPORT.md   the table (one row per run), the checklist of the paper's
 *                 claims with their verdicts and numbers, what is scaled down
 * OUT/report.json the same numbers (no timing: the same seed gives the same file)
 * OUT/summary.png final probe accuracy per run, saturated tensor-steps per
 *                 estimator, training-loss curves overlaid
 * OUT/timing.json wall times (REPORT.md shows them in its last section)
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/gate.h"
#include "qs/json.h"
#include "qs/mem.h"
#include "qs/resfile.h"
#include "repro_impl.h"

static json_t *rep_num(double v)
{
    return qs_json_real_or_null(v);
}

static const char *rep_pct(char *buf, size_t n, double frac)
{
    if (isfinite(frac))
        snprintf(buf, n, "%.1f%%", 100 * frac);
    else
        snprintf(buf, n, "-");
    return buf;
}

static const char *rep_signed(char *buf, size_t n, double v, const char *unit)
{
    if (isfinite(v))
        snprintf(buf, n, "%+.1f%s", v, unit);
    else
        snprintf(buf, n, "-");
    return buf;
}

static long rep_params(const repro_model_spec *m, int vocab)
{
    long C = m->dim, F = m->hidden_dim, hd = m->dim / m->n_heads;
    long attn = C * (m->n_heads * hd) * 2 + 2 * C * (m->n_kv_heads * hd);
    return (long)vocab * C + m->n_layers * (attn + 3 * C * F + 2 * C) + C;
}

typedef struct rep_ctx {
    const repro_opts *o;
    const repro_scale *s;
    const repro_paths *p;
    const repro_run_spec *spec;
    repro_run_result *runs;
    int n;
    repro_run_result base;        /* the pretraining run */
    double base_bench;            /* the base model's end-of-pretraining benchmark */
    repro_thresholds th;
    repro_claim claims[REPRO_N_CLAIMS];
} rep_ctx;

static void rep_table(repro_buf *b, const rep_ctx *c)
{
    repro_buf_printf(b, "| run | probe start -> end | vs BF16 same lr | loss APE vs BF16 | "
                        "saturated tensor-steps | first saturation alarm | first forgetting alarm "
                        "(steps before end) | gate vs base |\n|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < c->n; i++) {
        const repro_run_result *r = &c->runs[i];
        char a[32], b2[32], dl[32], ape[32], sat[64], sa[64], fa[64], gate[64];
        if (c->spec[i].paper_run < 0)
            continue;   /* the lr sweep has its own table */
        rep_signed(dl, sizeof dl, r->delta_points, " pp");
        if (!r->qat)
            snprintf(ape, sizeof ape, "(baseline)");
        else if (isfinite(r->ape_pct))
            snprintf(ape, sizeof ape, "%.2f%%", r->ape_pct);
        else
            snprintf(ape, sizeof ape, "-");
        if (r->qat)
            snprintf(sat, sizeof sat, "%ld of %ld", r->sat_tensor_steps, r->tensor_steps);
        else
            snprintf(sat, sizeof sat, "- (no quantizers)");
        if (r->n_sat_alarms)
            snprintf(sa, sizeof sa, "step %ld (%ld alarms)", r->first_sat_alarm, r->n_sat_alarms);
        else
            snprintf(sa, sizeof sa, "none");
        if (r->n_forget_alarms)
            snprintf(fa, sizeof fa, "step %ld (%ld)", r->first_forget_alarm, r->forget_lead_steps);
        else
            snprintf(fa, sizeof fa, "none");
        if (r->gate_verdict >= 0)
            snprintf(gate, sizeof gate, "%s (%+.1f pp, p=%.2g)", gate_verdict_name(r->gate_verdict),
                     -r->gate_drop_points, r->gate_p);
        else
            snprintf(gate, sizeof gate, "-");
        repro_buf_printf(b, "| %s%s | %s -> %s | %s | %s | %s | %s | %s | %s |\n", c->spec[i].label,
                         r->complete ? "" : " (incomplete)", rep_pct(a, sizeof a, r->probe_start),
                         rep_pct(b2, sizeof b2, r->probe_final), dl, ape, sat, sa, fa, gate);
    }
}

/* BF16 runs of --lr-sweep with the grid's BF16 runs, by lr: how much each lr forgets */
static void rep_sweep_table(repro_buf *b, const rep_ctx *c)
{
    int idx[64], k = 0, sweep = 0;
    for (int i = 0; i < c->n && k < 64; i++)
        if (c->spec[i].paper_run < 0 || !c->runs[i].qat) {
            sweep += c->spec[i].paper_run < 0;
            idx[k++] = i;
        }
    if (!sweep)
        return;
    for (int i = 1; i < k; i++)   /* insertion sort, highest lr first */
        for (int j = i; j > 0 && c->runs[idx[j]].lr > c->runs[idx[j - 1]].lr; j--) {
            int t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    repro_buf_printf(b, "## lr sweep (BF16: how the high lr was chosen)\n\n"
                        "| lr | run | probe start -> end | vs base model | first forgetting alarm "
                        "(steps before end) | val loss start -> end |\n|---|---|---|---|---|---|\n");
    for (int j = 0; j < k; j++) {
        const repro_run_result *r = &c->runs[idx[j]];
        char a[32], e[32], fa[64];
        if (r->n_forget_alarms)
            snprintf(fa, sizeof fa, "step %ld (%ld)", r->first_forget_alarm, r->forget_lead_steps);
        else
            snprintf(fa, sizeof fa, "none");
        repro_buf_printf(b, "| %g | %s | %s -> %s | %+.1f pp | %s | %.3f -> %.3f |\n", r->lr,
                         r->name, rep_pct(a, sizeof a, r->probe_start),
                         rep_pct(e, sizeof e, r->probe_final), -r->drop_points, fa,
                         r->n_evals ? r->eval_val_loss[0] : NAN,
                         r->n_evals ? r->eval_val_loss[r->n_evals - 1] : NAN);
    }
    repro_buf_printf(b, "\nThe grid's high lr is %g (its BF16 run must forget measurably), the "
                        "low lr %g (10x lower).\n\n", c->s->lr_high, c->s->lr_low);
}

static void rep_markdown(repro_buf *b, const rep_ctx *c, const repro_timing *tm)
{
    const repro_scale *s = c->s;
    char x[32], y[32];
    int n_blocks = s->model.n_layers - 5 > 0 ? s->model.n_layers - 5 : 0;
    repro_buf_printf(b, "# qatscope reproduce: the paper's grid at small scale\n\n");
    repro_buf_printf(b,
        "Scale **%s**, seed %llu. Every number below comes from the runs' own logs "
        "(`metrics.jsonl`, `events.jsonl`, `quant.jsonl.zst` under `runs/<name>/`) and their "
        "end-of-run benchmark (`runs/<name>/bench/`).\n\n",
        s->name, (unsigned long long)c->o->seed);
    repro_buf_printf(b,
        "**Base model**: Llama, %d blocks, dim %d, MLP %d, %d heads (%d KV), vocab 512 "
        "(the bundled BPE), %ld parameters; random init (`qatscope init`), pretrained on the "
        "fact world (%d people x 4 attributes, each fact in rotating declarative and "
        "question-answer templates, mixed with short stories), %ld x %ld tokens per step, lr %g "
        "(cosine over at most %ld steps), until the fact probe reached %s: **%ld steps**. Fact "
        "probe (%ld questions, 4 choices, chance 25%%, question templates never seen in "
        "training): **%s** at the end of pretraining, %s as benchmarked (target %s: %s).\n\n",
        s->model.n_layers, s->model.dim, s->model.hidden_dim, s->model.n_heads,
        s->model.n_kv_heads, rep_params(&s->model, 512), s->world.n_entities, s->batch, s->seq,
        s->pre_lr, s->pre_steps, rep_pct((char[32]){0}, 32, s->probe_target), c->base.n_loss,
        c->base.probe_items, rep_pct(x, sizeof x, c->base.probe_final),
        rep_pct(y, sizeof y, c->base_bench), rep_pct((char[32]){0}, 32, s->probe_target),
        c->base_bench >= s->probe_target ? "met" : "NOT met");
    repro_buf_printf(b,
        "**Grid**: continued pretraining on general text only (no facts), %ld steps of %ld x %ld "
        "tokens, constant lr: high %g, low %g (10x lower); runs 7-8 start with %ld BF16 warmup "
        "steps (%.0f%% of the run). HiF8 W8A8 on the published selection (MLP gate/up/down of "
        "blocks 3..%d: %d Linears, %d quantizers), saturating, margin 0, amax history 1024. "
        "In-loop probe (every item) + val loss every %ld steps; forgetting alarm: drop > %.0f pp "
        "and McNemar p < 0.05 against step 0; saturation alarm: clip rate > 1e-4. Spike variants: "
        "spike_rate %g per step and Linear, spike_scale %g.\n\n",
        s->steps, s->batch, s->seq, s->lr_high, s->lr_low,
        (long)(s->warmup_frac * (double)s->steps + 0.5), 100 * s->warmup_frac,
        s->model.n_layers - 3, 3 * n_blocks, 6 * n_blocks, s->eval_every, c->th.forget_points,
        s->spike_rate, s->spike_scale);
    repro_buf_printf(b, "## Runs\n\n");
    rep_table(b, c);
    repro_buf_printf(b,
        "\nvs BF16 same lr: final probe accuracy minus the BF16 run's at the same lr. Loss APE: "
        "mean over steps of |loss - BF16 loss| / BF16 loss (the paper's metric). Saturated "
        "tensor-steps: (quantizer, QAT step) pairs with any clipped element. Gate: `qatscope "
        "gate` of the final checkpoint (as deployed: HiF8 with its delayed scales) against the "
        "base model, max drop %.0f pp, paired McNemar. Probe start is the run's step-0 "
        "evaluation, the baseline of its forgetting alarm: the base model, except in runs 1-4, "
        "which are quantized from step 0 (no BF16 warmup) and so start from the HiF8 model at "
        "current scales; every \"vs base\" figure compares with the base model itself.\n\n",
        c->th.forget_points);
    rep_sweep_table(b, c);
    repro_buf_printf(b, "## Checklist of the paper's claims\n\n");
    for (int i = 0; i < REPRO_N_CLAIMS; i++) {
        const repro_claim *cl = &c->claims[i];
        repro_buf_printf(b, "- (%c) %s: **%s**. %s.\n  Test: %s.\n", cl->id, cl->claim,
                         repro_verdict_name(cl->verdict), cl->numbers[0] ? cl->numbers : "-",
                         cl->test);
    }
    repro_buf_printf(b,
        "\nThresholds: forget_points %.1f pp, ape_small_pct %.1f%%, sat_ratio %.1fx, "
        "recipe_points %.1f pp (fixed before the runs; see `repro_thresholds_default`).\n\n",
        c->th.forget_points, c->th.ape_small_pct, c->th.sat_ratio, c->th.recipe_points);
    repro_buf_printf(b,
        "## What is scaled down\n\n"
        "| | paper | here |\n|---|---|---|\n"
        "| model | OpenPangu-Embedded-1B, 26 blocks | %d blocks, dim %d, %ld parameters |\n"
        "| knowledge | pretrained commonsense (MMLU, HellaSwag, ARC) | %d invented people x 4 "
        "attributes, learned here |\n"
        "| continued pretraining | FineWeb, 10,000 steps x 1024 x 1024 tokens | generated "
        "stories, %ld steps x %ld x %ld tokens |\n"
        "| lr high / low | 1e-4 / 1e-5 | %g / %g |\n"
        "| BF16 warmup | 500 steps (5%%) | %ld steps (%.0f%%) |\n"
        "| quantized | MLP of the middle 21 blocks | MLP of the middle %d blocks |\n\n",
        s->model.n_layers, s->model.dim, rep_params(&s->model, 512), s->world.n_entities,
        s->steps, s->batch, s->seq, s->lr_high, s->lr_low,
        (long)(s->warmup_frac * (double)s->steps + 0.5), 100 * s->warmup_frac, n_blocks);
    repro_buf_printf(b, "## Timing\n\nWall times of this invocation (cached products reused "
                        "count ~0): world %.1f s, base model %.1f s%s", tm->world_s, tm->base_s,
                     tm->base_reused ? " (reused)" : "");
    for (int i = 0; i < c->n; i++)
        repro_buf_printf(b, ", %s %.1f s%s", c->runs[i].name, tm->run_s[i],
                         tm->run_reused[i] ? " (reused)" : "");
    repro_buf_printf(b, "; total %.1f s.\n", tm->total_s);
}

static json_t *rep_run_json(const repro_run_spec *sp, const repro_run_result *r)
{
    json_t *evals = json_array();
    for (long i = 0; i < r->n_evals; i++)
        json_array_append_new(evals, json_pack("[I,o]", (json_int_t)r->eval_step[i],
                                               rep_num(r->eval_acc[i])));
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(r->name));
    json_object_set_new(o, "label", json_string(sp->label));
    json_object_set_new(o, "paper_run", json_integer(sp->paper_run));
    json_object_set_new(o, "estimator", r->qat ? json_string(r->estimator) : json_null());
    json_object_set_new(o, "lr", json_real(r->lr));
    json_object_set_new(o, "steps", json_integer(r->steps));
    json_object_set_new(o, "bf16_warmup_steps", json_integer(r->bf16_warmup_steps));
    json_object_set_new(o, "spike_rate", json_real(r->spike_rate));
    json_object_set_new(o, "complete", json_boolean(r->complete));
    json_object_set_new(o, "probe_items", json_integer(r->probe_items));
    json_object_set_new(o, "probe_start", rep_num(r->probe_start));
    json_object_set_new(o, "probe_final", rep_num(r->probe_final));
    json_object_set_new(o, "baseline", r->baseline[0] ? json_string(r->baseline) : json_null());
    json_object_set_new(o, "delta_points", rep_num(r->delta_points));
    json_object_set_new(o, "drop_points", rep_num(r->drop_points));
    json_object_set_new(o, "loss_ape_pct", rep_num(r->ape_pct));
    json_object_set_new(o, "tensor_steps", json_integer(r->tensor_steps));
    json_object_set_new(o, "sat_tensor_steps", json_integer(r->sat_tensor_steps));
    json_object_set_new(o, "alarm_tensor_steps", json_integer(r->alarm_tensor_steps));
    json_object_set_new(o, "saturation_alarms", json_integer(r->n_sat_alarms));
    json_object_set_new(o, "first_saturation_alarm", json_integer(r->first_sat_alarm));
    json_object_set_new(o, "forgetting_alarms", json_integer(r->n_forget_alarms));
    json_object_set_new(o, "first_forgetting_alarm", json_integer(r->first_forget_alarm));
    json_object_set_new(o, "forgetting_lead_steps", json_integer(r->forget_lead_steps));
    json_object_set_new(o, "spikes", json_integer(r->n_spikes));
    json_object_set_new(o, "bench_acc", rep_num(r->bench_acc));
    json_object_set_new(o, "gate", r->gate_verdict < 0 ? json_null()
                                   : json_pack("{s:s,s:o,s:o}", "verdict",
                                               gate_verdict_name(r->gate_verdict), "drop_points",
                                               rep_num(r->gate_drop_points), "p",
                                               rep_num(r->gate_p)));
    json_object_set_new(o, "probe_evals", evals);
    return o;
}

static int rep_json(const rep_ctx *c, const char *path, qs_diag *d)
{
    json_t *runs = json_array(), *claims = json_array();
    for (int i = 0; i < c->n; i++)
        json_array_append_new(runs, rep_run_json(&c->spec[i], &c->runs[i]));
    for (int i = 0; i < REPRO_N_CLAIMS; i++) {
        const repro_claim *cl = &c->claims[i];
        char id[2] = {cl->id, 0};
        json_array_append_new(claims, json_pack("{s:s,s:s,s:s,s:s,s:s}", "id", id, "claim",
                                                cl->claim, "test", cl->test, "verdict",
                                                repro_verdict_name(cl->verdict), "numbers",
                                                cl->numbers));
    }
    const repro_scale *s = c->s;
    json_t *root = json_object();
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "scale", json_string(s->name));
    json_object_set_new(root, "seed", json_integer((json_int_t)c->o->seed));
    json_object_set_new(root, "model", json_pack("{s:i,s:i,s:i,s:i,s:i,s:I}", "layers",
                                                 s->model.n_layers, "dim", s->model.dim, "hidden",
                                                 s->model.hidden_dim, "heads", s->model.n_heads,
                                                 "kv_heads", s->model.n_kv_heads, "parameters",
                                                 (json_int_t)rep_params(&s->model, 512)));
    json_object_set_new(root, "base", json_pack("{s:I,s:o,s:o,s:f,s:b}", "pretrain_steps",
                                                (json_int_t)c->base.n_loss, "probe_pretrain_final",
                                                rep_num(c->base.probe_final), "probe_bench",
                                                rep_num(c->base_bench), "target", s->probe_target,
                                                "target_met", c->base_bench >= s->probe_target));
    json_object_set_new(root, "grid", json_pack("{s:I,s:I,s:I,s:f,s:f,s:f,s:f,s:f}", "steps",
                                                (json_int_t)s->steps, "batch", (json_int_t)s->batch,
                                                "seq", (json_int_t)s->seq, "lr_high", s->lr_high,
                                                "lr_low", s->lr_low, "warmup_frac", s->warmup_frac,
                                                "spike_rate", s->spike_rate, "spike_scale",
                                                s->spike_scale));
    json_object_set_new(root, "thresholds", json_pack("{s:f,s:f,s:f,s:f}", "forget_points",
                                                      c->th.forget_points, "ape_small_pct",
                                                      c->th.ape_small_pct, "sat_ratio",
                                                      c->th.sat_ratio, "recipe_points",
                                                      c->th.recipe_points));
    json_object_set_new(root, "runs", runs);
    json_object_set_new(root, "claims", claims);
    int rc = repro_json_write(root, path, d);
    json_decref(root);
    return rc;
}

static int rep_timing_json(const rep_ctx *c, const repro_timing *tm, const char *path, qs_diag *d)
{
    json_t *runs = json_object();
    for (int i = 0; i < c->n; i++)
        json_object_set_new(runs, c->runs[i].name,
                            json_pack("{s:f,s:b}", "wall_s", tm->run_s[i], "reused",
                                      tm->run_reused[i]));
    json_t *root = json_pack("{s:f,s:f,s:b,s:o,s:f}", "world_s", tm->world_s, "base_s", tm->base_s,
                             "base_reused", tm->base_reused, "runs", runs, "total_s", tm->total_s);
    int rc = repro_json_write(root, path, d);
    json_decref(root);
    return rc;
}

int repro_report_write(const repro_opts *o, const repro_scale *s, const repro_paths *p,
                       const repro_run_spec *spec, int n, const repro_timing *tm, qs_diag *d)
{
    rep_ctx c;
    memset(&c, 0, sizeof c);
    c.o = o;
    c.s = s;
    c.p = p;
    c.spec = spec;
    c.n = n;
    repro_thresholds_default(&c.th);
    char path[RUNCFG_STR_MAX + 64], base_res[RUNCFG_STR_MAX + 64];
    snprintf(base_res, sizeof base_res, "%s/results.json", p->base_bench);
    c.runs = qs_calloc((size_t)(n ? n : 1), sizeof *c.runs);
    if (!c.runs)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    int rc = repro_run_read(p->pretrain, &c.base, d);
    resfile base = {0};
    if (!rc && !(rc = resfile_load(&base, base_res, d))) {
        const resfile_task *t = resfile_task_find(&base, REPRO_PROBE_TASK);
        c.base_bench = t ? resfile_task_metric(t, "acc") : NAN;
    }
    resfile_free(&base);
    for (int i = 0; i < n && !rc; i++) {
        snprintf(path, sizeof path, "%s/%s", p->runs, spec[i].name);
        if ((rc = repro_run_read(path, &c.runs[i], d)))
            break;
        snprintf(path, sizeof path, "%s/%s/bench/results.json", p->runs, spec[i].name);
        rc = repro_bench_gate(base_res, path, c.th.forget_points, &c.runs[i], d);
    }
    repro_buf md = {0};
    if (!rc) {
        repro_runs_derive(c.runs, n, c.base.probe_final);
        repro_claims_assess(c.runs, n, &c.th, c.claims);
        rep_markdown(&md, &c, tm);
        snprintf(path, sizeof path, "%s/report.json", p->out);
        rc = md.failed ? diag_set(d, QS_ENOMEM, NULL, -1, "out of memory") : rep_json(&c, path, d);
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/timing.json", p->out);
        rc = rep_timing_json(&c, tm, path, d);
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/summary.png", p->out);
        int n_grid = 0;   /* the sweep runs come last and stay out of the picture */
        while (n_grid < n && spec[n_grid].paper_run >= 0)
            n_grid++;
        rc = repro_summary_png(c.runs, n_grid, c.base_bench, path, d);
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/REPORT.md", p->out);
        rc = fileio_write_atomic(path, md.p, md.len, d);
    }
    for (int i = 0; i < REPRO_N_CLAIMS && !rc; i++)
        repro_log(o, "   (%c) %s: %s", c.claims[i].id, c.claims[i].claim,
                  repro_verdict_name(c.claims[i].verdict));
    repro_buf_free(&md);
    for (int i = 0; i < n; i++)
        repro_run_result_free(&c.runs[i]);
    qs_free(c.runs);
    repro_run_result_free(&c.base);
    return rc;
}
