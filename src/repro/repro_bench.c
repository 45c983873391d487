/* repro_bench.c: the end-of-run benchmark of the reproduction and its gate.
 *
 * After a run (and for the base model) every fact-probe item is scored on the
 * final checkpoint AS DEPLOYED: a QAT run's planned Linears fake-quantized in
 * HiF8 with delayed scaling from the checkpoint's amax histories (the scales
 * the run's next step would have used, eval --precision hif8-fp32), a BF16 run
 * in fp32.  results.json + samples.jsonl.zst go to BENCH_DIR; the gate then
 * compares a run's results with the base model's (paired McNemar on the same
 * items), exactly as `qatscope gate` would.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "qs/eval.h"
#include "qs/evalquant.h"
#include "qs/fileio.h"
#include "qs/gate.h"
#include "qs/hfconfig.h"
#include "qs/itemlog.h"
#include "qs/model.h"
#include "qs/model_infer.h"
#include "qs/resfile.h"
#include "qs/results.h"
#include "qs/tokenizer.h"
#include "repro_impl.h"

static int bench_encode(void *self, const char *text, size_t len, int add_bos, int32_t **ids,
                        size_t *n_ids, qs_diag *d)
{
    return tokenizer_encode(self, text, len, add_bos, ids, n_ids, d);
}

int repro_bench_eval(const char *model_dir, int quantized, const char *world_dir,
                     const char *tasks_dir, const char *bench_dir, double *acc, qs_diag *d)
{
    tokenizer *tok = NULL;
    llama_model m;
    memset(&m, 0, sizeof m);
    evalquant *eq = NULL;
    model_lm *mlm = NULL;
    eval_session *s = NULL;
    char path[1100];
    int rc;
    if ((rc = fileio_mkdir_p(bench_dir, d)) || (rc = tokenizer_create(&tok, model_dir, d)) ||
        (rc = model_load_dir(&m, model_dir, d)))
        goto done;
    evalquant_options qo = {NULL, EVALQUANT_DELAYED, model_dir};
    if (quantized && (rc = evalquant_create_opts(&eq, &m, &qo, d)))
        goto done;
    if ((rc = model_lm_create(&mlm, &m, hfconfig_max_context(&m.cfg), d)))
        goto done;
    eval_options o;
    eval_options_default(&o);
    const char *tasks[1] = {REPRO_PROBE_TASK};
    o.tasks_dir = tasks_dir;
    o.data_dir = world_dir;
    o.tasks = tasks;
    o.n_tasks = 1;
    int32_t bos = tokenizer_bos_id(tok);
    eval_encoder enc = {tok, bench_encode, bos >= 0 ? bos : tokenizer_eos_id(tok)};
    if ((rc = eval_session_create(&s, &o, &enc, d)))
        goto done;
    lm_scorer lm = model_lm_scorer(mlm);
    if ((rc = eval_session_run(s, &lm, NULL, NULL, d)))
        goto done;
    const char *qmods[64];
    results_meta meta = {model_dir, NULL, quantized ? "hif8-fp32" : "fp32", 0,
                         tokenizer_adds_bos(tok), "tokenizer default", tokenizer_kind(tok),
                         hfconfig_max_context(&m.cfg), 0.0, 0, "qatscope reproduce",
                         NULL, 0, NULL, NULL, NULL};
    for (int i = 0; i < evalquant_count(eq) && meta.n_quant < 64; i++)
        qmods[meta.n_quant++] = evalquant_module(eq, i);
    meta.quant_modules = qmods;
    meta.quant_scaling = eq ? evalquant_scaling_name(eq) : NULL;
    meta.quant_recipe = eq ? evalquant_recipe_text(eq) : NULL;
    snprintf(path, sizeof path, "%s/samples.jsonl.zst", bench_dir);
    if ((rc = results_samples_write(path, s, d)))
        goto done;
    snprintf(path, sizeof path, "%s/results.json", bench_dir);   /* last: marks completion */
    if ((rc = results_json_write(path, s, &meta, d)))
        goto done;
    int n_rows;
    const eval_row *rows = eval_session_rows(s, &n_rows);
    *acc = n_rows ? rows[0].acc.value : NAN;
done:
    eval_session_destroy(s);
    model_lm_destroy(mlm);
    evalquant_destroy(eq);
    model_free(&m);
    tokenizer_destroy(tok);
    return rc;
}

int repro_bench_gate(const char *base_results, const char *cand_results, double max_drop_points,
                     repro_run_result *r, qs_diag *d)
{
    resfile base = {0}, cand = {0};
    itemlog bi = {0}, ci = {0};
    gate_report rep = {0};
    const char *tasks[1] = {REPRO_PROBE_TASK};
    int found_b = 0, found_c = 0;
    int rc = resfile_load(&base, base_results, d);
    if (!rc)
        rc = resfile_load(&cand, cand_results, d);
    if (!rc)
        rc = itemlog_discover(&bi, base_results, tasks, 1, &found_b, d);
    if (!rc)
        rc = itemlog_discover(&ci, cand_results, tasks, 1, &found_c, d);
    if (!rc) {
        gate_opts go;
        gate_opts_default(&go);
        go.max_drop_points = max_drop_points;
        rc = gate_compare(&base, &cand, found_b ? &bi : NULL, found_c ? &ci : NULL, &go, &rep, d);
    }
    if (!rc && rep.n_rows >= 1) {
        const resfile_task *t = resfile_task_find(&cand, REPRO_PROBE_TASK);
        r->bench_acc = t ? resfile_task_metric(t, "acc") : NAN;
        r->gate_verdict = rep.rows[0].verdict;
        r->gate_drop_points = rep.rows[0].drop_points;
        r->gate_p = rep.rows[0].p_value;
    }
    gate_report_free(&rep);
    itemlog_free(&bi);
    itemlog_free(&ci);
    resfile_free(&base);
    resfile_free(&cand);
    return rc;
}
