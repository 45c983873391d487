/* results.c: results.json (harness layout) and the per-item samples log.
 * Key layout follows spec/tasks.md section 4; see results.h. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/results.h"
#include "qs/version.h"
#include "qs/zlog.h"

static json_t *results_num(double v)
{
    return isfinite(v) ? json_real(v) : json_string("N/A");
}

/* version strings "1.0" / "2" as the harness writes them (numbers). */
static json_t *results_version(const char *v)
{
    char *end;
    double x = strtod(v, &end);
    if (*end)
        return json_string(v);
    if (strchr(v, '.'))
        return json_real(x);
    return json_integer((json_int_t)x);
}

static json_t *results_row_metrics(const eval_row *r, int indent)
{
    char alias[128];
    if (indent == 0)
        snprintf(alias, sizeof alias, "%s", r->alias);
    else
        snprintf(alias, sizeof alias, "%*s- %s", indent, "", r->alias);
    json_t *o = json_object();
    json_object_set_new(o, "alias", json_string(alias));
    json_object_set_new(o, "acc,none", results_num(r->acc.value));
    json_object_set_new(o, "acc_stderr,none", results_num(r->acc.stderr_));
    if (r->has_norm) {
        json_object_set_new(o, "acc_norm,none", results_num(r->acc_norm.value));
        json_object_set_new(o, "acc_norm_stderr,none", results_num(r->acc_norm.stderr_));
    }
    return o;
}

static int results_depth(const eval_row *rows, int r)
{
    int k = 0;
    for (int p = rows[r].parent; p >= 0; p = rows[p].parent)
        k++;
    return k;
}

static json_t *results_task_config(const task_def *def, const task_data *td, int shots)
{
    json_t *c = json_object();
    json_object_set_new(c, "task", json_string(def->name));
    json_object_set_new(c, "definition", json_string(def->path));
    json_object_set_new(c, "test_split", json_string(def->eval_split));
    json_object_set_new(c, "fewshot_split", json_string(def->fewshot_split));
    json_object_set_new(c, "fewshot_sampler",
                        json_string(def->sampler == TASK_SAMPLER_FIRST_N ? "first_n" : "default"));
    json_object_set_new(c, "description", json_string(def->description));
    json_object_set_new(c, "doc_to_text", json_string(def->doc_to_text));
    json_object_set_new(c, "target_delimiter", json_string(def->target_delimiter));
    json_object_set_new(c, "fewshot_delimiter", json_string(def->fewshot_delimiter));
    json_object_set_new(c, "num_fewshot", json_integer(shots));
    json_object_set_new(c, "output_type", json_string("multiple_choice"));
    json_object_set_new(c, "process_docs",
                        def->hook == TASK_HOOK_HELLASWAG && !td->contexts_as_given
                            ? json_string("hellaswag_preprocess") : json_null());
    json_object_set_new(c, "data_format", json_string(td->format));
    json_t *ml = json_array();
    json_array_append_new(ml, json_pack("{s:s,s:s,s:b}", "metric", "acc", "aggregation", "mean",
                                        "higher_is_better", 1));
    if (def->metric_acc_norm)
        json_array_append_new(ml, json_pack("{s:s,s:s,s:b}", "metric", "acc_norm", "aggregation",
                                            "mean", "higher_is_better", 1));
    json_object_set_new(c, "metric_list", ml);
    json_object_set_new(c, "metadata", json_pack("{s:o}", "version", results_version(
                                                     def->subtask_version ? def->subtask_version
                                                                          : def->version)));
    return c;
}

static json_t *results_build_root(const eval_session *s, const results_meta *m)
{
    int n_rows;
    const eval_row *rows = eval_session_rows(s, &n_rows);
    const eval_options *o = eval_session_options(s);
    json_t *root = json_object(), *results = json_object(), *groups = json_object(),
           *gsub = json_object(), *configs = json_object(), *versions = json_object(),
           *nshot = json_object(), *hib = json_object(), *nsamp = json_object(),
           *submean = json_object();
    for (int r = 0; r < n_rows; r++) {
        const eval_row *row = &rows[r];
        if (!row->n_effective)
            continue;   /* a subject with no item in a subset run */
        json_object_set_new(results, row->name, results_row_metrics(row, results_depth(rows, r)));
        json_object_set_new(versions, row->name, results_version(row->version));
        json_object_set_new(nshot, row->name, json_integer(row->n_shot));
        json_object_set_new(hib, row->name, row->has_norm
                                                ? json_pack("{s:b,s:b}", "acc", 1, "acc_norm", 1)
                                                : json_pack("{s:b}", "acc", 1));
        if (row->is_group) {
            json_object_set_new(groups, row->name, results_row_metrics(row, 0));
            json_object_set_new(submean, row->name, results_num(row->acc_subject_mean));
            json_t *kids = json_array();
            for (int c = 0; c < n_rows; c++)
                if (rows[c].parent == r && rows[c].n_effective)
                    json_array_append_new(kids, json_string(rows[c].name));
            json_object_set_new(gsub, row->name, kids);
        } else {
            if (row->parent < 0)
                json_object_set_new(gsub, row->name, json_array());
            json_object_set_new(nsamp, row->name,
                                json_pack("{s:I,s:I}", "original", (json_int_t)row->n_original,
                                          "effective", (json_int_t)row->n_effective));
            const task_def *def = eval_session_task_def(s, row->task);
            json_object_set_new(configs, row->name,
                                results_task_config(def, eval_session_task_data(s, row->task),
                                                    row->n_shot));
        }
    }
    json_object_set_new(root, "results", results);
    json_object_set_new(root, "groups", groups);
    json_object_set_new(root, "group_subtasks", gsub);
    json_object_set_new(root, "configs", configs);
    json_object_set_new(root, "versions", versions);
    json_object_set_new(root, "n-shot", nshot);
    json_object_set_new(root, "higher_is_better", hib);
    json_object_set_new(root, "n-samples", nsamp);

    json_t *cfg = json_object();
    json_object_set_new(cfg, "model", json_string("qatscope"));
    char margs[1200];
    snprintf(margs, sizeof margs, "pretrained=%s,dtype=%s", m->model_path ? m->model_path : "",
             m->precision ? m->precision : "fp32");
    json_object_set_new(cfg, "model_args", json_string(margs));
    json_object_set_new(cfg, "model_path", m->model_path ? json_string(m->model_path) : json_null());
    json_object_set_new(cfg, "model_sha256", m->model_hash ? json_string(m->model_hash) : json_null());
    json_object_set_new(cfg, "precision", json_string(m->precision ? m->precision : "fp32"));
    json_t *qm = json_array();
    for (int i = 0; i < m->n_quant; i++)
        json_array_append_new(qm, json_string(m->quant_modules[i]));
    json_object_set_new(cfg, "quant_modules", qm);
    json_object_set_new(cfg, "quant_scaling",
                        m->n_quant && m->quant_scaling ? json_string(m->quant_scaling) : json_null());
    json_object_set_new(cfg, "quant_recipe",
                        m->n_quant && m->quant_recipe ? json_string(m->quant_recipe) : json_null());
    json_object_set_new(cfg, "quant_state_sha256",
                        m->n_quant && m->quant_state_hash ? json_string(m->quant_state_hash)
                                                          : json_null());
    json_object_set_new(cfg, "threads", json_integer(m->threads));
    json_object_set_new(cfg, "batch_size", json_integer(o->batch_items));
    json_object_set_new(cfg, "batch_sizes", json_array());
    json_object_set_new(cfg, "device", json_string("cpu"));
    json_object_set_new(cfg, "use_cache", json_null());
    json_object_set_new(cfg, "limit", o->limit > 0 ? json_integer(o->limit) : json_null());
    json_object_set_new(cfg, "subset", o->subset > 0 ? json_pack("{s:I,s:I}", "n",
                                                                 (json_int_t)o->subset, "seed",
                                                                 (json_int_t)o->subset_seed)
                                                     : json_null());
    json_object_set_new(cfg, "bootstrap_iters", json_integer(100000));
    json_object_set_new(cfg, "gen_kwargs", json_null());
    json_object_set_new(cfg, "random_seed", json_integer(0));
    json_object_set_new(cfg, "numpy_seed", json_integer(1234));
    json_object_set_new(cfg, "torch_seed", json_integer(1234));
    json_object_set_new(cfg, "fewshot_seed", json_integer((json_int_t)o->fewshot_seed));
    json_object_set_new(cfg, "add_bos_token", json_boolean(m->bos_added));
    json_object_set_new(cfg, "bos_rule", json_string(m->bos_rule ? m->bos_rule : ""));
    json_object_set_new(root, "config", cfg);

    json_t *q = json_object(), *files = json_object(), *notes = json_object();
    for (int t = 0; t < eval_session_n_tasks(s); t++) {
        const task_data *td = eval_session_task_data(s, t);
        for (int f = 0; f < td->n_files; f++)
            json_object_set_new(files, td->files[f].path,
                                json_pack("{s:s,s:I}", "sha256", td->files[f].sha256, "records",
                                          (json_int_t)td->files[f].n_records));
        json_object_set_new(notes, eval_session_task_def(s, t)->name, json_string(td->format));
    }
    json_object_set_new(q, "version", json_string(QS_VERSION));
    json_object_set_new(q, "data_dir", json_string(o->data_dir));
    json_object_set_new(q, "tasks_dir", json_string(o->tasks_dir));
    json_object_set_new(q, "data_files", files);
    json_object_set_new(q, "data_format", notes);
    json_object_set_new(q, "acc_subject_mean", submean);
    json_object_set_new(q, "tokenizer_kind", json_string(m->tokenizer_kind ? m->tokenizer_kind : ""));
    json_object_set_new(q, "command_line", m->command_line ? json_string(m->command_line) : json_null());
    json_object_set_new(root, "qatscope", q);
    json_object_set_new(root, "max_length", json_integer(m->max_length));
    json_object_set_new(root, "date", json_real((double)m->date_unix));
    char secs[64];
    snprintf(secs, sizeof secs, "%.3f", m->total_seconds);
    json_object_set_new(root, "total_evaluation_time_seconds", json_string(secs));
    return root;
}

/* JSON text of v in a qs_malloc'd NUL-terminated buffer (jansson's own
 * allocation is never handed out), or NULL. */
static char *results_dump(const json_t *v, size_t flags)
{
    size_t n = v ? json_dumpb(v, NULL, 0, flags) : 0;
    char *buf = n ? qs_malloc(n + 2) : NULL;
    if (!buf)
        return NULL;
    if (json_dumpb(v, buf, n, flags) != n) {
        qs_free(buf);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

/* Compose the JSON text (qs_malloc'd, NUL-terminated). */
static int results_json_build(const eval_session *s, const results_meta *m, char **json_text,
                              qs_diag *d)
{
    json_t *root = results_build_root(s, m);
    *json_text = results_dump(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    json_decref(root);
    return *json_text ? 0 : diag_set(d, QS_ENOMEM, NULL, -1, "out of memory building results JSON");
}

int results_json_write(const char *path, const eval_session *s, const results_meta *m,
                       qs_diag *d)
{
    char *txt = NULL;
    int rc = results_json_build(s, m, &txt, d);
    if (rc)
        return rc;
    size_t n = strlen(txt);
    txt[n] = '\n';   /* replace the NUL by a final newline for the file */
    rc = fileio_write_atomic(path, txt, n + 1, d);
    qs_free(txt);
    return rc;
}

static json_t *results_item_json(const eval_session *s, const eval_item *it)
{
    const task_def *def = eval_session_task_def(s, it->task);
    json_t *o = json_object(), *ll = json_array(), *nt = json_array(), *cl = json_array(),
           *gr = json_array();
    for (int c = 0; c < it->n_choices; c++) {
        json_array_append_new(ll, json_real(it->loglik[c]));
        json_array_append_new(nt, json_integer(it->n_tokens[c]));
        json_array_append_new(cl, json_integer(it->char_lens[c]));
        json_array_append_new(gr, json_boolean(it->greedy[c]));
    }
    json_object_set_new(o, "task", json_string(def->name));
    json_object_set_new(o, "doc_id", json_integer(it->doc_id));
    if (it->subject >= 0)
        json_object_set_new(o, "subject", json_string(def->subjects[it->subject]));
    json_object_set_new(o, "loglikelihoods", ll);
    json_object_set_new(o, "n_tokens", nt);
    json_object_set_new(o, "char_lens", cl);
    json_object_set_new(o, "is_greedy", gr);
    json_object_set_new(o, "n_ctx_tokens", json_integer(it->n_ctx_tokens));
    json_object_set_new(o, "pred", json_integer(it->pred));
    json_object_set_new(o, "pred_norm", json_integer(it->pred_norm));
    json_object_set_new(o, "gold", json_integer(it->gold));
    json_object_set_new(o, "acc", json_integer(it->correct));
    if (def->metric_acc_norm)
        json_object_set_new(o, "acc_norm", json_integer(it->correct_norm));
    return o;
}

int results_samples_write(const char *path, const eval_session *s, qs_diag *d)
{
    size_t n = strlen(path);
    int plain = n >= 6 && !strcmp(path + n - 6, ".jsonl");
    zlog_writer *w = NULL;
    int rc = zlog_writer_create(&w, path, ZLOG_TRUNCATE | ZLOG_ATOMIC | (plain ? ZLOG_PLAIN : 0), d);
    if (rc)
        return rc;
    size_t n_items;
    const eval_item *items = eval_session_items(s, &n_items);
    for (size_t i = 0; i < n_items && !rc; i++) {
        json_t *o = results_item_json(s, &items[i]);
        char *line = results_dump(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
        json_decref(o);
        if (!line)
            rc = diag_set(d, QS_ENOMEM, path, -1, "out of memory");
        else
            rc = zlog_write(w, line, strlen(line), d);
        qs_free(line);
    }
    if (rc) {
        zlog_writer_destroy(w);
        return rc;
    }
    return zlog_close(w, d);
}
