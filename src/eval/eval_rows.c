/* eval_rows.c: results rows of a session and their metrics.
 *
 * A plain task is one row.  MMLU is the group row "mmlu", then for each
 * sub-group ("mmlu_stem", ...) its row followed by its subjects' rows
 * ("mmlu_<subject>").  Leaves are means over their items; every group (the
 * top one included) aggregates directly over its leaf subjects, size-weighted
 * with the pooled stderr, as the harness does (scorer.h).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "eval_impl.h"
#include "qs/mem.h"

static eval_row *eval_row_push(eval_session *s, qs_diag *d)
{
    if (s->n_rows == s->cap_rows) {
        int nc = s->cap_rows ? 2 * s->cap_rows : 16;
        eval_row *r = qs_realloc(s->rows, (size_t)nc * sizeof *r);
        if (!r) {
            diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
            return NULL;
        }
        s->rows = r;
        s->cap_rows = nc;
    }
    eval_row *r = &s->rows[s->n_rows++];
    memset(r, 0, sizeof *r);
    r->parent = -1;
    r->acc.value = r->acc.stderr_ = NAN;
    r->acc_norm.value = r->acc_norm.stderr_ = NAN;
    r->acc_subject_mean = NAN;
    return r;
}

/* Is row `leaf` inside group row `g` (at any depth)? */
static int eval_row_under(const eval_session *s, int leaf, int g)
{
    for (int p = s->rows[leaf].parent; p >= 0; p = s->rows[p].parent)
        if (p == g)
            return 1;
    return 0;
}

int eval_rows_add_impl(eval_session *s, int t, qs_diag *d)
{
    const task_def *def = &s->defs[t];
    const task_data *td = &s->datas[t];
    if (!s->task_row) {
        s->task_row = qs_calloc((size_t)s->o.n_tasks, sizeof *s->task_row);
        s->subject_row = qs_calloc((size_t)s->o.n_tasks, sizeof *s->subject_row);
        if (!s->task_row || !s->subject_row)
            return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    }
    int top = s->n_rows;
    eval_row *r = eval_row_push(s, d);
    if (!r)
        return QS_ENOMEM;
    s->task_row[t] = top;
    snprintf(r->name, sizeof r->name, "%s", def->name);
    snprintf(r->alias, sizeof r->alias, "%s", def->name);
    r->version = def->version;
    r->task = t;
    r->has_norm = def->metric_acc_norm;
    r->n_shot = s->o.shots;
    r->n_original = td->n_docs;
    if (!def->n_subjects)
        return 0;
    r->is_group = 1;
    s->subject_row[t] = qs_calloc((size_t)def->n_subjects, sizeof **s->subject_row);
    if (!s->subject_row[t])
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    for (int g = 0; g < def->n_groups; g++) {
        const task_group *tg = &def->groups[g];
        int grow = s->n_rows;
        if (!(r = eval_row_push(s, d)))
            return QS_ENOMEM;
        snprintf(r->name, sizeof r->name, "%s", tg->name);
        snprintf(r->alias, sizeof r->alias, "%s", tg->alias ? tg->alias : tg->name);
        r->version = def->version;
        r->task = t;
        r->is_group = 1;
        r->parent = top;
        r->has_norm = def->metric_acc_norm;
        r->n_shot = s->o.shots;
        for (int m = 0; m < tg->n_subjects; m++) {
            int subj = tg->subjects[m];
            s->subject_row[t][subj] = s->n_rows;
            if (!(r = eval_row_push(s, d)))
                return QS_ENOMEM;
            snprintf(r->name, sizeof r->name, "%s_%s", def->name, def->subjects[subj]);
            snprintf(r->alias, sizeof r->alias, "%s", def->subjects[subj]);
            r->version = def->subtask_version ? def->subtask_version : def->version;
            r->task = t;
            r->parent = grow;
            r->has_norm = def->metric_acc_norm;
            r->n_shot = s->o.shots;
            for (size_t i = 0; i < td->n_docs; i++)
                r->n_original += td->docs[i].subject == subj;
        }
    }
    for (int g = top; g < s->n_rows; g++)   /* group sizes from their leaves */
        if (s->rows[g].is_group)
            for (int i = top + 1; i < s->n_rows; i++)
                if (!s->rows[i].is_group && eval_row_under(s, i, g))
                    s->rows[g].n_original += s->rows[i].n_original;
    return 0;
}

int eval_rows_leaf_impl(const eval_session *s, int t, const task_doc *doc)
{
    if (s->subject_row && s->subject_row[t] && doc->subject >= 0)
        return s->subject_row[t][doc->subject];
    return s->task_row[t];
}

int eval_rows_compute_impl(eval_session *s, qs_diag *d)
{
    unsigned char *acc = qs_malloc(s->n_items + 1), *norm = qs_malloc(s->n_items + 1);
    scorer_stat *la = qs_calloc((size_t)s->n_rows + 1, sizeof *la);
    scorer_stat *ln = qs_calloc((size_t)s->n_rows + 1, sizeof *ln);
    if (!acc || !norm || !la || !ln) {
        qs_free(acc);
        qs_free(norm);
        qs_free(la);
        qs_free(ln);
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    }
    for (int r = 0; r < s->n_rows; r++) {   /* leaves */
        eval_row *row = &s->rows[r];
        if (row->is_group)
            continue;
        size_t m = 0;
        for (size_t i = 0; i < s->n_items; i++)
            if (s->items[i].row == r) {
                acc[m] = s->items[i].correct;
                norm[m++] = s->items[i].correct_norm;
            }
        row->n_effective = m;
        row->acc = scorer_stat_mean(acc, m);
        if (row->has_norm)
            row->acc_norm = scorer_stat_mean(norm, m);
    }
    for (int g = 0; g < s->n_rows; g++) {   /* groups over their leaves */
        eval_row *row = &s->rows[g];
        if (!row->is_group)
            continue;
        int k = 0;
        row->n_effective = 0;
        for (int r = 0; r < s->n_rows; r++)
            if (!s->rows[r].is_group && eval_row_under(s, r, g) && s->rows[r].n_effective) {
                la[k] = s->rows[r].acc;
                ln[k++] = s->rows[r].acc_norm;
            }
        row->acc = scorer_stat_group(la, k);
        row->n_effective = row->acc.n;
        row->acc_subject_mean = scorer_stat_macro(la, k);
        if (row->has_norm)
            row->acc_norm = scorer_stat_group(ln, k);
    }
    qs_free(acc);
    qs_free(norm);
    qs_free(la);
    qs_free(ln);
    return 0;
}
