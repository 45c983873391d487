/* eval.c: evaluation sessions (see eval.h for the contract).
 *
 * Item selection, documented in README `### eval`:
 * - limit N: the first N documents of every leaf task, like the harness's
 *   --limit (for MMLU that is N per subject).
 * - subset N, seed S: N documents per task drawn without replacement by a
 *   splitmix64 generator seeded with S and the task name, kept in file order.
 * Few-shot (random sampler): one Python random.Random(fewshot_seed) per task,
 * consumed by sample(train, k) for EVERY document in file order, selected or
 * not, so a document gets the same shots in a full run, a limited run (= the
 * harness) and a subset run.  MMLU: the first k dev rows of its subject.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "eval_impl.h"
#include "qs/mem.h"
#include "qs/prompt.h"
#include "qs/pyrand.h"
#include "qs/rng.h"

void eval_options_default(eval_options *o)
{
    memset(o, 0, sizeof *o);
    o->tasks_dir = "tasks";
    o->fewshot_seed = 1234;
    o->add_bos = -1;   /* TOKENIZER_BOS_DEFAULT */
    o->batch_items = 32;
}

/* sel[n] = 1 for the documents of task t that are evaluated. */
static int eval_select(const eval_options *o, const task_def *def, const task_data *td,
                       unsigned char *sel, qs_diag *d)
{
    size_t n = td->n_docs;
    if (o->subset > 0) {
        size_t k = (size_t)o->subset < n ? (size_t)o->subset : n;
        size_t *idx = qs_malloc((n ? n : 1) * sizeof *idx);
        if (!idx)
            return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
        uint64_t st = o->subset_seed;
        for (const char *p = def->name; *p; p++)
            st = st * 1099511628211ull ^ (unsigned char)*p;
        for (size_t i = 0; i < n; i++)
            idx[i] = i;
        for (size_t i = 0; i < k; i++) {   /* partial Fisher-Yates */
            size_t j = i + (size_t)(rng_splitmix64(&st) % (n - i));
            size_t tmp = idx[i];
            idx[i] = idx[j];
            idx[j] = tmp;
            sel[idx[i]] = 1;
        }
        qs_free(idx);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        sel[i] = o->limit <= 0 || td->docs[i].doc_id < o->limit;
    return 0;
}

/* Python str.rstrip(): number of trailing whitespace bytes. */
static size_t eval_trailing_space(const char *s, size_t n)
{
    size_t e = n;
    for (;;) {
        if (e && (s[e - 1] == ' ' || (s[e - 1] >= 0x09 && s[e - 1] <= 0x0d) ||
                  (s[e - 1] >= 0x1c && s[e - 1] <= 0x1f)))
            e--;
        else if (e >= 2 && (unsigned char)s[e - 2] == 0xc2 &&
                 ((unsigned char)s[e - 1] == 0xa0 || (unsigned char)s[e - 1] == 0x85))
            e -= 2;
        else if (e >= 3 && (unsigned char)s[e - 3] == 0xe3 && (unsigned char)s[e - 2] == 0x80 &&
                 (unsigned char)s[e - 1] == 0x80)
            e -= 3;
        else if (e >= 3 && (unsigned char)s[e - 3] == 0xe2 && (unsigned char)s[e - 2] == 0x80 &&
                 (((unsigned char)s[e - 1] >= 0x80 && (unsigned char)s[e - 1] <= 0x8a) ||
                  (unsigned char)s[e - 1] == 0xa8 || (unsigned char)s[e - 1] == 0xa9 ||
                  (unsigned char)s[e - 1] == 0xaf))
            e -= 3;
        else
            return n - e;
    }
}

int eval_pair_encode_impl(const eval_encoder *enc, int add_bos, const char *ctx, size_t n_ctx,
                          const char *cont, int32_t **ctx_ids, size_t *n_ctx_ids,
                          int32_t **cont_ids, size_t *n_cont_ids, qs_diag *d)
{
    size_t sp = eval_trailing_space(ctx, n_ctx), nc = strlen(cont);
    size_t cn = n_ctx - sp;   /* context without its trailing whitespace */
    char *whole = qs_malloc(n_ctx + nc + 1);
    if (!whole)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    memcpy(whole, ctx, n_ctx);          /* ctx[:cn] + ctx[cn:] + cont */
    memcpy(whole + n_ctx, cont, nc + 1);
    int32_t *w = NULL;
    size_t nw = 0;
    int rc;
    *ctx_ids = NULL;
    *cont_ids = NULL;
    if (cn == 0) {   /* empty context: the prefix token, continuation encoded alone, no BOS */
        if (enc->prefix_id < 0) {
            qs_free(whole);
            return diag_set(d, QS_EINVAL, NULL, -1, "empty context and the tokenizer has no BOS/EOS");
        }
        rc = enc->encode(enc->self, whole, n_ctx + nc, 0, &w, &nw, d);
        if (!rc && !(*ctx_ids = qs_malloc(sizeof **ctx_ids)))
            rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
        if (!rc) {
            (*ctx_ids)[0] = enc->prefix_id;
            *n_ctx_ids = 1;
            *cont_ids = w;
            *n_cont_ids = nw;
            w = NULL;
        }
    } else {
        rc = enc->encode(enc->self, whole, cn, add_bos, ctx_ids, n_ctx_ids, d);
        if (!rc)
            rc = enc->encode(enc->self, whole, n_ctx + nc, add_bos, &w, &nw, d);
        if (!rc) {
            size_t k = nw > *n_ctx_ids ? nw - *n_ctx_ids : 0;
            *cont_ids = qs_malloc((k ? k : 1) * sizeof **cont_ids);
            if (!*cont_ids)
                rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
            else {
                if (k)
                    memcpy(*cont_ids, w + *n_ctx_ids, k * sizeof *w);
                *n_cont_ids = k;
            }
        }
    }
    qs_free(w);
    qs_free(whole);
    if (rc) {
        qs_free(*ctx_ids);
        qs_free(*cont_ids);
        *ctx_ids = *cont_ids = NULL;
    }
    return rc;
}

/* Build and tokenize one item. */
static int eval_item_build(eval_session *s, int t, const task_doc *doc, const size_t *shots,
                           int k, int row, qs_diag *d)
{
    const task_def *def = &s->defs[t];
    const task_data *td = &s->datas[t];
    eval_item *it = &s->items[s->n_items];
    eval_req *rq = &s->reqs[s->n_items];
    memset(it, 0, sizeof *it);
    memset(rq, 0, sizeof *rq);
    int n = prompt_n_choices(def, doc);
    it->task = t;
    it->row = row;
    it->doc_id = doc->doc_id;
    it->subject = doc->subject;
    it->n_choices = n;
    it->gold = doc->gold;
    if (doc->gold >= n)
        return diag_set(d, QS_EFORMAT, td->files[0].path, doc->line,
                        "gold %d is outside the %d choices", doc->gold, n);
    it->loglik = qs_calloc((size_t)n, sizeof *it->loglik);
    it->greedy = qs_calloc((size_t)n, sizeof *it->greedy);
    it->n_tokens = qs_calloc((size_t)n, sizeof *it->n_tokens);
    it->char_lens = qs_calloc((size_t)n, sizeof *it->char_lens);
    rq->cont = qs_calloc((size_t)n, sizeof *rq->cont);
    rq->n_cont = qs_calloc((size_t)n, sizeof *rq->n_cont);
    s->n_items++;   /* from here on the item is owned by the session (freed on error) */
    if (!it->loglik || !it->greedy || !it->n_tokens || !it->char_lens || !rq->cont || !rq->n_cont)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    char *ctx = NULL;
    int rc = prompt_context_build(def, td, doc, shots, k, &ctx, d);
    if (rc)
        return rc;
    size_t n_ctx = strlen(ctx);
    for (int c = 0; c < n && !rc; c++) {
        const char *choice = prompt_choice(def, doc, c);
        size_t dl = strlen(def->target_delimiter), cl = strlen(choice);
        char *cont = qs_malloc(dl + cl + 1);
        if (!cont) {
            rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
            break;
        }
        memcpy(cont, def->target_delimiter, dl);
        memcpy(cont + dl, choice, cl + 1);
        int32_t *cids = NULL, *kids = NULL;
        size_t ncids = 0, nkids = 0;
        rc = eval_pair_encode_impl(&s->enc, s->o.add_bos, ctx, n_ctx, cont, &cids, &ncids, &kids,
                                   &nkids, d);
        qs_free(cont);
        if (rc)
            break;
        if (!nkids) {
            qs_free(cids);
            qs_free(kids);
            rc = diag_set(d, QS_EFORMAT, td->files[0].path, doc->line,
                          "%s doc %ld: choice %d tokenizes to no continuation token", def->name,
                          doc->doc_id, c);
            break;
        }
        if (c == 0) {
            rq->ctx = cids;
            rq->n_ctx = ncids;
        } else if (ncids != rq->n_ctx || memcmp(cids, rq->ctx, ncids * sizeof *cids)) {
            qs_free(cids);   /* cannot happen: the context is encoded alone every time */
            qs_free(kids);
            rc = diag_set(d, QS_EINVAL, NULL, -1, "encoder is not deterministic");
            break;
        } else
            qs_free(cids);
        rq->cont[c] = kids;
        rq->n_cont[c] = nkids;
        it->n_tokens[c] = (int)nkids;
        it->char_lens[c] = (int)prompt_utf8_len(choice);
    }
    it->n_ctx_tokens = (int)rq->n_ctx;
    qs_free(ctx);
    return rc;
}

static int eval_task_add(eval_session *s, int t, qs_diag *d)
{
    const task_def *def = &s->defs[t];
    const task_data *td = &s->datas[t];
    int rc = eval_rows_add_impl(s, t, d);
    if (rc)
        return rc;
    unsigned char *sel = qs_calloc(td->n_docs + 1, 1);
    size_t *shots = qs_calloc((size_t)s->o.shots + 1, sizeof *shots);
    if (!sel || !shots) {
        qs_free(sel);
        qs_free(shots);
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    }
    rc = eval_select(&s->o, def, td, sel, d);
    size_t want = 0;
    for (size_t i = 0; i < td->n_docs; i++)
        want += sel[i];
    eval_item *ni = rc ? NULL : qs_realloc(s->items, (s->n_items + want + 1) * sizeof *ni);
    if (ni)
        s->items = ni;
    eval_req *nr = ni ? qs_realloc(s->reqs, (s->n_items + want + 1) * sizeof *nr) : NULL;
    if (nr)
        s->reqs = nr;
    if (!rc && (!ni || !nr))
        rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    pyrand shot_rng;
    pyrand_seed(&shot_rng, s->o.fewshot_seed);
    for (size_t i = 0; i < td->n_docs && !rc; i++) {
        const task_doc *doc = &td->docs[i];
        rc = prompt_shots_pick(def, td, doc, s->o.shots, &shot_rng, shots, d);
        if (!rc && sel[i])
            rc = eval_item_build(s, t, doc, shots, s->o.shots, eval_rows_leaf_impl(s, t, doc), d);
    }
    qs_free(sel);
    qs_free(shots);
    return rc;
}

int eval_session_create(eval_session **out, const eval_options *o, const eval_encoder *enc,
                        qs_diag *d)
{
    *out = NULL;
    if (!o->n_tasks || !o->data_dir || !o->tasks_dir || !enc || !enc->encode)
        return diag_set(d, QS_EINVAL, NULL, -1, "eval: tasks, data dir and encoder are required");
    if (o->shots < 0 || o->limit < 0 || o->subset < 0 || (o->limit > 0 && o->subset > 0))
        return diag_set(d, QS_EINVAL, NULL, -1, "eval: shots/limit/subset must be >= 0, and limit "
                        "and subset are exclusive");
    eval_session *s = qs_calloc(1, sizeof *s);
    if (!s)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    s->o = *o;
    s->enc = *enc;
    if (s->o.batch_items <= 0)
        s->o.batch_items = 32;
    s->defs = qs_calloc((size_t)o->n_tasks, sizeof *s->defs);
    s->datas = qs_calloc((size_t)o->n_tasks, sizeof *s->datas);
    s->tasks_dir = qs_strdup(o->tasks_dir);
    s->data_dir = qs_strdup(o->data_dir);
    int rc = 0;
    if (!s->defs || !s->datas || !s->tasks_dir || !s->data_dir)
        rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    s->o.tasks_dir = s->tasks_dir;
    s->o.data_dir = s->data_dir;
    s->o.tasks = NULL;
    for (int t = 0; t < o->n_tasks && !rc; t++) {
        for (int u = 0; u < t; u++)
            if (!strcmp(o->tasks[u], o->tasks[t]))
                rc = diag_set(d, QS_EINVAL, NULL, -1, "task '%s' requested twice", o->tasks[t]);
        if (!rc)
            rc = task_def_load_named(&s->defs[t], o->tasks_dir, o->tasks[t], d);
        if (!rc)
            s->n_tasks = t + 1;
        if (!rc)
            rc = task_data_load(&s->datas[t], &s->defs[t], o->data_dir, o->shots > 0, d);
        if (!rc)
            rc = eval_task_add(s, t, d);
    }
    if (rc) {
        eval_session_destroy(s);
        return rc;
    }
    *out = s;
    return 0;
}

void eval_session_destroy(eval_session *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_items; i++) {
        eval_item *it = &s->items[i];
        eval_req *rq = &s->reqs[i];
        qs_free(it->loglik);
        qs_free(it->greedy);
        qs_free(it->n_tokens);
        qs_free(it->char_lens);
        qs_free(rq->ctx);
        for (int c = 0; rq->cont && c < it->n_choices; c++)
            qs_free(rq->cont[c]);
        qs_free(rq->cont);
        qs_free(rq->n_cont);
    }
    qs_free(s->items);
    qs_free(s->reqs);
    for (int t = 0; t < s->n_tasks; t++) {
        task_def_free(&s->defs[t]);
        task_data_free(&s->datas[t]);
    }
    qs_free(s->defs);
    qs_free(s->datas);
    qs_free(s->rows);
    for (int t = 0; s->subject_row && t < s->o.n_tasks; t++)
        qs_free(s->subject_row[t]);
    qs_free(s->subject_row);
    qs_free(s->task_row);
    qs_free(s->tasks_dir);
    qs_free(s->data_dir);
    qs_free(s);
}

void eval_session_request(const eval_session *s, size_t i, lm_request *req)
{
    const eval_req *rq = &s->reqs[i];
    req->ctx = rq->ctx;
    req->n_ctx = rq->n_ctx;
    req->n_cont = s->items[i].n_choices;
    req->cont = (const int32_t *const *)rq->cont;
    req->n_cont_tok = rq->n_cont;
}

void eval_item_preds_impl(eval_item *it)
{
    scorer_item_preds(it->loglik, it->char_lens, it->n_choices, &it->pred, &it->pred_norm);
    it->correct = it->pred == it->gold;
    it->correct_norm = it->pred_norm == it->gold;
}

int eval_score_impl(eval_session *s, const lm_scorer *lm, size_t first, size_t stride,
                    eval_progress_fn progress, void *user, qs_diag *d)
{
    size_t b = (size_t)s->o.batch_items;
    lm_request *req = qs_calloc(b, sizeof *req);
    lm_result *res = qs_calloc(b, sizeof *res);
    size_t *idx = qs_calloc(b, sizeof *idx);
    if (!req || !res || !idx) {
        qs_free(req);
        qs_free(res);
        qs_free(idx);
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    }
    int rc = 0;
    size_t done = 0;
    for (size_t next = first; next < s->n_items && !rc;) {
        size_t m = 0;
        for (; m < b && next < s->n_items; m++, next += stride) {
            idx[m] = next;
            eval_session_request(s, next, &req[m]);
            res[m].loglik = s->items[next].loglik;
            res[m].greedy = s->items[next].greedy;
        }
        rc = lm->score(lm->self, req, res, m, d);
        /* an item's own error (too long, non-finite): name it, scoring the batch's items
         * alone to find the one that fails */
        if ((rc == QS_ERANGE || rc == QS_EINVAL || rc == QS_ENAN) && !d->path[0]) {
            size_t bad = m == 1 ? 0 : m;
            for (size_t j = 0; m > 1 && j < m && bad == m; j++)
                if (lm->score(lm->self, &req[j], &res[j], 1, d))
                    bad = j;
            if (bad < m) {   /* else only the batch fails: its message as it is */
                const eval_item *it = &s->items[idx[bad]];
                char why[QS_DIAG_MSG_MAX];
                snprintf(why, sizeof why, "%s", d->msg);
                diag_set(d, rc, NULL, -1, "%s doc %ld: %.400s", s->defs[it->task].name,
                         it->doc_id, why);
            }
        }
        for (size_t j = 0; j < m && !rc; j++) {
            eval_item *it = &s->items[idx[j]];
            for (int c = 0; c < it->n_choices; c++)
                if (!isfinite(it->loglik[c]))
                    rc = diag_set(d, QS_ENAN, NULL, -1, "%s doc %ld choice %d: log-likelihood is %g",
                                  s->defs[it->task].name, it->doc_id, c, it->loglik[c]);
            eval_item_preds_impl(it);
        }
        done += m;
        /* a share of every stride-th item: its progress stands for everyone's */
        size_t shown = done * stride < s->n_items ? done * stride : s->n_items;
        if (!rc && progress)
            progress(user, next >= s->n_items ? s->n_items : shown, s->n_items);
    }
    qs_free(req);
    qs_free(res);
    qs_free(idx);
    return rc;
}

int eval_session_run(eval_session *s, const lm_scorer *lm, eval_progress_fn progress, void *user,
                     qs_diag *d)
{
    int rc = eval_score_impl(s, lm, 0, 1, progress, user, d);
    if (!rc)
        rc = eval_rows_compute_impl(s, d);
    return rc;
}

int eval_session_n_tasks(const eval_session *s) { return s->n_tasks; }
const task_def *eval_session_task_def(const eval_session *s, int t) { return &s->defs[t]; }
const task_data *eval_session_task_data(const eval_session *s, int t) { return &s->datas[t]; }
const eval_options *eval_session_options(const eval_session *s) { return &s->o; }

const eval_item *eval_session_items(const eval_session *s, size_t *n)
{
    *n = s->n_items;
    return s->items;
}

const eval_row *eval_session_rows(const eval_session *s, int *n)
{
    *n = s->n_rows;
    return s->rows;
}
