/* gate.c: per-task verdicts from two results files (+ optional per-item logs); see qs/gate.h. */
#include "qs/gate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/stats.h"

const char *gate_verdict_name(int verdict)
{
    switch (verdict) {
    case GATE_PASS: return "pass";
    case GATE_FAIL: return "FAIL";
    case GATE_INCONCLUSIVE: return "inconclusive";
    default: return "?";
    }
}

void gate_opts_default(gate_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_drop_points = 0.5;
    o->alpha = 0.05;
    o->n_resamples = 2000;
    o->seed = 20240607;
}

void gate_report_free(gate_report *r)
{
    if (!r)
        return;
    qs_free(r->rows);
    memset(r, 0, sizeof *r);
}

static const gate_task_opt *task_opt(const gate_opts *o, const char *task)
{
    for (int i = 0; i < o->n_per_task; i++)
        if (!strcmp(o->per_task[i].task, task))
            return &o->per_task[i];
    return NULL;
}

static const char *default_metric(const resfile_task *t)
{
    return resfile_default_metric(t->name, !isnan(t->acc), !isnan(t->acc_norm));
}

/* task names whose items make up t: the task itself plus its leaves */
static int item_tasks(const resfile_task *t, const char **names, int max)
{
    int n = 0;
    names[n++] = t->name;
    for (int i = 0; i < t->n_leaves && n < max; i++)
        names[n++] = t->leaves[i];
    return n;
}

/* per-item 0/1 vector of one side, sorted by key; NULL/0 when the log has none */
static int side_items(const itemlog *il, const resfile_task *t, const char **names, int n_names,
                      const itemlog_item ***sel, size_t *n, qs_diag *d)
{
    *sel = NULL;
    *n = 0;
    if (!il)
        return 0;
    (void)t;
    return itemlog_select(il, names, n_names, sel, n, d);
}

static int check_items_match_results(const itemlog_item **it, size_t n, const char *metric,
                                     double value, const char *task, const char *side,
                                     const char *path, qs_diag *d)
{
    long right = 0;
    for (size_t i = 0; i < n; i++) {
        int v = !strcmp(metric, "acc") ? it[i]->acc : it[i]->acc_norm;
        if (v < 0)
            return diag_set(d, QS_EFORMAT, it[i]->file, it[i]->line,
                            "%s per-item log for task %s has no per-item %s (item %s)", side,
                            task, metric, it[i]->key);
        right += v;
    }
    if (fabs((double)right - value * (double)n) >= 0.5)
        return diag_set(d, QS_EFORMAT, path, -1,
                        "task %s: %s per-item log gives %s %.6f over %zu items, the results "
                        "file says %.6f (samples from another run?)",
                        task, side, metric, (double)right / (double)n, n, value);
    return 0;
}

static int paired_test(gate_row *row, const itemlog_item **bi, const itemlog_item **ci, size_t n,
                       const gate_opts *o, qs_diag *d)
{
    unsigned char *bv = qs_malloc(2 * n);
    if (!bv)
        return diag_set(d, QS_ENOMEM, NULL, -1, "%zu items", n);
    unsigned char *cv = bv + n;
    int norm = !strcmp(row->metric, "acc_norm");
    for (size_t i = 0; i < n; i++) {
        bv[i] = (unsigned char)(norm ? bi[i]->acc_norm : bi[i]->acc);
        cv[i] = (unsigned char)(norm ? ci[i]->acc_norm : ci[i]->acc);
    }
    stats_pairs pairs;
    stats_bootstrap_opts bo = {o->n_resamples, 0.95, o->seed};
    double lo = NAN, hi = NAN;
    int rc = stats_pairs_count(bv, cv, n, &pairs, d);
    if (!rc)
        rc = stats_mcnemar_exact(pairs.base_only, pairs.cand_only, &row->p_value, d);
    if (!rc)
        rc = stats_paired_bootstrap(bv, cv, n, &bo, &lo, &hi, d);
    qs_free(bv);
    if (rc)
        return rc;
    row->paired = 1;
    row->b = pairs.base_only;
    row->c = pairs.cand_only;
    row->ci_lo_points = 100.0 * lo;
    row->ci_hi_points = 100.0 * hi;
    row->n_items = (long)n;
    return 0;
}

/* "doc 12" or "subject anatomy doc 12" from an item key "task|subject|000000000012" */
static void item_label(const char *key, char *buf, size_t n)
{
    const char *a = strchr(key, '|'), *b = a ? strchr(a + 1, '|') : NULL;
    if (!b) {
        snprintf(buf, n, "item %s", key);
        return;
    }
    long long doc = strtoll(b + 1, NULL, 10);
    if (b > a + 1)
        snprintf(buf, n, "subject %.*s doc %lld", (int)(b - a - 1), a + 1, doc);
    else
        snprintf(buf, n, "doc %lld", doc);
}

static int compare_items(gate_row *row, const resfile_task *bt, const resfile *base,
                         const resfile *cand, const itemlog *base_items,
                         const itemlog *cand_items, const gate_opts *o, qs_diag *d)
{
    const char *names[1024];
    int n_names = item_tasks(bt, names, 1024);
    const itemlog_item **bi = NULL, **ci = NULL;
    size_t nb = 0, nc = 0;
    int rc = side_items(base_items, bt, names, n_names, &bi, &nb, d);
    if (!rc)
        rc = side_items(cand_items, bt, names, n_names, &ci, &nc, d);
    /* logs on both sides, but one holds none of this task's items (another task's
     * log): not "no per-item logs", which would fall back to the threshold rule */
    if (!rc && base_items && cand_items && base_items->n_paths > 0 && cand_items->n_paths > 0 &&
        (nb == 0) != (nc == 0)) {
        const itemlog *empty = nb == 0 ? base_items : cand_items;
        rc = diag_set(d, QS_EINVAL, empty->paths[0], -1,
                      "task %s: the %s per-item log%s no item of it, the %s's %zu (a log of "
                      "another run? or pass --no-samples)", row->task,
                      nb == 0 ? "baseline" : "candidate", empty->n_paths > 1 ? "s hold" : " holds",
                      nb == 0 ? "candidate" : "baseline", nb == 0 ? nc : nb);
    }
    if (!rc && nb > 0 && nc > 0) {
        if (bt->n_items >= 0 && (nb != (size_t)bt->n_items || nc != (size_t)bt->n_items))
            rc = diag_set(d, QS_EINVAL, (nb != (size_t)bt->n_items ? bi[0] : ci[0])->file, -1,
                          "task %s: the per-item logs cover %zu (baseline) and %zu (candidate) "
                          "items, the results files say %ld (a samples file missing? or pass "
                          "--no-samples)",
                          row->task, nb, nc, bt->n_items);
        if (!rc)
            rc = check_items_match_results(bi, nb, row->metric, row->base, row->task, "baseline",
                                       base->path, d);
        if (!rc)
            rc = check_items_match_results(ci, nc, row->metric, row->cand, row->task,
                                           "candidate", cand->path, d);
        for (size_t i = 0; !rc && i < (nb > nc ? nb : nc); i++) {
            const char *kb = i < nb ? bi[i]->key : "(none)", *kc = i < nc ? ci[i]->key : "(none)";
            /* the first item one side has and the other lacks names the file and line */
            int odd_base = i >= nc || (i < nb && strcmp(kb, kc) < 0);
            const itemlog_item *odd = odd_base ? bi[i] : ci[i];
            if (strcmp(kb, kc)) {
                char item[160];
                item_label(odd->key, item, sizeof item);
                rc = diag_set(d, QS_EINVAL, odd->file, odd->line,
                              "task %s: %s is in the %s's per-item log only: baseline and "
                              "candidate were scored on different items (%zu vs %zu items)",
                              row->task, item, odd_base ? "baseline" : "candidate", nb, nc);
            }
        }
        if (!rc)
            rc = paired_test(row, bi, ci, nb, o, d);
    }
    qs_free(bi);
    qs_free(ci);
    return rc;
}

static int compare_task(gate_row *row, const resfile_task *bt, const resfile *base,
                        const resfile *cand, const itemlog *base_items,
                        const itemlog *cand_items, const gate_opts *o, qs_diag *d)
{
    memset(row, 0, sizeof *row);
    snprintf(row->task, sizeof row->task, "%s", bt->name);
    const gate_task_opt *to = task_opt(o, bt->name);
    const char *metric = to && to->metric[0] ? to->metric : o->metric[0] ? o->metric
                                                                         : default_metric(bt);
    snprintf(row->metric, sizeof row->metric, "%s", metric);
    row->max_drop_points = to && to->max_drop_points >= 0 ? to->max_drop_points
                                                          : o->max_drop_points;
    row->p_value = row->ci_lo_points = row->ci_hi_points = NAN;
    row->base = resfile_task_metric(bt, metric);
    if (isnan(row->base))
        return diag_set(d, QS_ENOTFOUND, base->path, -1, "task %s has no metric %s", bt->name,
                        metric);
    const resfile_task *ct = resfile_task_find(cand, bt->name);
    if (!ct)
        return diag_set(d, QS_ENOTFOUND, cand->path, -1,
                        "task %s is in the baseline but missing from the candidate", bt->name);
    row->cand = resfile_task_metric(ct, metric);
    if (isnan(row->cand))
        return diag_set(d, QS_ENOTFOUND, cand->path, -1, "task %s has no metric %s", bt->name,
                        metric);
    for (int i = 0; i < bt->n_leaves; i++) {
        int found = 0;
        for (int j = 0; j < ct->n_leaves && !found; j++)
            found = !strcmp(bt->leaves[i], ct->leaves[j]);
        if (!found)
            return diag_set(d, QS_EINVAL, cand->path, -1,
                            "group %s: subtask %s of the baseline is missing from the candidate "
                            "(different item sets)",
                            bt->name, bt->leaves[i]);
    }
    if (bt->n_leaves != ct->n_leaves)
        return diag_set(d, QS_EINVAL, cand->path, -1,
                        "group %s has %d subtasks in the baseline, %d in the candidate (different "
                        "item sets)",
                        bt->name, bt->n_leaves, ct->n_leaves);
    if (bt->n_items >= 0 && ct->n_items >= 0 && bt->n_items != ct->n_items)
        return diag_set(d, QS_EINVAL, cand->path, -1,
                        "task %s: baseline was scored on %ld items, candidate on %ld (different "
                        "item sets)",
                        bt->name, bt->n_items, ct->n_items);
    row->n_items = bt->n_items;
    row->drop_points = 100.0 * (row->base - row->cand);
    int rc = compare_items(row, bt, base, cand, base_items, cand_items, o, d);
    if (rc)
        return rc;
    /* a drop within 1e-9 pp of the threshold is at the threshold (decimal inputs) */
    if (row->drop_points <= row->max_drop_points + 1e-9)
        row->verdict = GATE_PASS;
    else if (!row->paired || row->p_value < o->alpha)
        row->verdict = GATE_FAIL;
    else
        row->verdict = GATE_INCONCLUSIVE;
    row->counts_as_failure = row->verdict == GATE_FAIL ||
                             (row->verdict == GATE_INCONCLUSIVE && !o->inconclusive_passes);
    return 0;
}

int gate_compare(const resfile *base, const resfile *cand, const itemlog *base_items,
                 const itemlog *cand_items, const gate_opts *opts, gate_report *out, qs_diag *d)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < opts->n_per_task; i++)
        if (!resfile_task_find(base, opts->per_task[i].task))
            return diag_set(d, QS_ENOTFOUND, base->path, -1,
                            "a per-task option names task %s, which the baseline does not have",
                            opts->per_task[i].task);
    out->rows = qs_calloc(base->n_tasks ? (size_t)base->n_tasks : 1, sizeof *out->rows);
    if (!out->rows)
        return diag_set(d, QS_ENOMEM, NULL, -1, "%d rows", base->n_tasks);
    for (int i = 0; i < base->n_tasks; i++) {
        const resfile_task *bt = &base->tasks[i];
        if (!bt->top_level && !opts->include_subtasks)
            continue;
        gate_row *row = &out->rows[out->n_rows];
        int rc = compare_task(row, bt, base, cand, base_items, cand_items, opts, d);
        if (rc) {
            gate_report_free(out);
            return rc;
        }
        out->n_rows++;
        out->n_pass += row->verdict == GATE_PASS;
        out->n_fail += row->verdict == GATE_FAIL;
        out->n_inconclusive += row->verdict == GATE_INCONCLUSIVE;
        out->failed |= row->counts_as_failure;
    }
    if (out->n_rows == 0) {
        gate_report_free(out);
        return diag_set(d, QS_EFORMAT, base->path, -1, "the baseline has no tasks to compare");
    }
    return 0;
}

/* XML attribute-safe copy */
static void xml_escape(char *dst, size_t dst_bytes, const char *src)
{
    size_t k = 0;
    for (; *src && k + 7 < dst_bytes; src++) {
        const char *rep = *src == '<' ? "&lt;" : *src == '>' ? "&gt;" : *src == '&' ? "&amp;"
                        : *src == '"' ? "&quot;" : NULL;
        if (rep) {
            memcpy(dst + k, rep, strlen(rep));
            k += strlen(rep);
        } else if ((unsigned char)*src >= 0x20) {
            dst[k++] = *src;
        }
    }
    dst[k] = 0;
}

static void row_summary(const gate_row *r, char *buf, size_t n)
{
    int k = snprintf(buf, n, "%s %.2f -> %.2f (drop %.2f pp, max %.2f pp)", r->metric,
                     100 * r->base, 100 * r->cand, r->drop_points, r->max_drop_points);
    if (k > 0 && (size_t)k < n && r->paired)
        snprintf(buf + k, n - (size_t)k, ", McNemar p=%.3g (b=%ld c=%ld), 95%% CI [%+.2f, %+.2f] pp",
                 r->p_value, r->b, r->c, r->ci_lo_points, r->ci_hi_points);
    else if (k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, ", no per-item logs: threshold rule only");
}

int gate_junit_write(const gate_report *r, const char *path, qs_diag *d)
{
    afile af = {0};
    int rc = afile_open(&af, path, d);
    if (rc)
        return rc;
    int failures = 0, skipped = 0;
    for (int i = 0; i < r->n_rows; i++) {
        failures += r->rows[i].counts_as_failure;
        skipped += r->rows[i].verdict == GATE_INCONCLUSIVE && !r->rows[i].counts_as_failure;
    }
    fprintf(af.f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(af.f, "<testsuites name=\"qatscope gate\" tests=\"%d\" failures=\"%d\" skipped=\"%d\">\n",
            r->n_rows, failures, skipped);
    fprintf(af.f, "  <testsuite name=\"qatscope.gate\" tests=\"%d\" failures=\"%d\" errors=\"0\" "
                  "skipped=\"%d\">\n", r->n_rows, failures, skipped);
    for (int i = 0; i < r->n_rows; i++) {
        const gate_row *row = &r->rows[i];
        char name[GATE_NAME_MAX * 6], summary[512], esc[1024];
        xml_escape(name, sizeof name, row->task);
        row_summary(row, summary, sizeof summary);
        xml_escape(esc, sizeof esc, summary);
        fprintf(af.f, "    <testcase classname=\"qatscope.gate\" name=\"%s\">\n", name);
        if (row->counts_as_failure)
            fprintf(af.f, "      <failure message=\"%s: %s\" type=\"%s\"/>\n",
                    gate_verdict_name(row->verdict), esc,
                    row->verdict == GATE_FAIL ? "regression" : "inconclusive");
        else if (row->verdict == GATE_INCONCLUSIVE)
            fprintf(af.f, "      <skipped message=\"inconclusive: %s\"/>\n", esc);
        fprintf(af.f, "      <system-out>%s</system-out>\n", esc);
        fprintf(af.f, "    </testcase>\n");
    }
    fprintf(af.f, "  </testsuite>\n</testsuites>\n");
    if (ferror(af.f)) {
        afile_abort(&af);
        return diag_set(d, QS_EIO, path, -1, "write failed");
    }
    return afile_commit(&af, d);
}

int gate_junit_write_error(const char *message, const char *path, qs_diag *d)
{
    afile af = {0};
    int rc = afile_open(&af, path, d);
    if (rc)
        return rc;
    char esc[2048];
    xml_escape(esc, sizeof esc, message);
    fprintf(af.f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                  "<testsuites name=\"qatscope gate\" tests=\"1\" failures=\"0\" errors=\"1\">\n"
                  "  <testsuite name=\"qatscope.gate\" tests=\"1\" failures=\"0\" errors=\"1\">\n"
                  "    <testcase classname=\"qatscope.gate\" name=\"gate\">\n"
                  "      <error message=\"unusable input: %s\" type=\"input\"/>\n"
                  "    </testcase>\n  </testsuite>\n</testsuites>\n", esc);
    if (ferror(af.f)) {
        afile_abort(&af);
        return diag_set(d, QS_EIO, path, -1, "write failed");
    }
    return afile_commit(&af, d);
}
