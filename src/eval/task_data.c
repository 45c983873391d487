/* task_data.c: find a task's data files under the data dir and load them.
 *
 * Candidate paths come from the task file ("data": {"eval": [...],
 * "fewshot": [...]}), relative to the data dir, "{subject}" expanded for
 * MMLU; each is tried as written and with ".zst".  The first that exists is
 * used; none -> QS_ENOTFOUND listing every path looked for.  Each file used
 * is recorded with its SHA-256 and record count.
 */
#include <stdio.h>
#include <string.h>

#include "qs/digest.h"
#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/task.h"

/* The first existing file among `rel` and `rel`.zst under dir; QS_ENOTFOUND else. */
static int task_file_find(char *out, size_t out_bytes, const char *dir, const char *rel)
{
    char zst[1024];
    if (fileio_join(out, out_bytes, dir, rel))
        return QS_ERANGE;
    if (fileio_exists(out) && !fileio_is_dir(out))
        return 0;
    snprintf(zst, sizeof zst, "%s.zst", out);
    if (fileio_exists(zst) && strlen(zst) < out_bytes) {
        memcpy(out, zst, strlen(zst) + 1);
        return 0;
    }
    return QS_ENOTFOUND;
}

static void task_subst_subject(char *out, size_t n, const char *tmpl, const char *subject)
{
    const char *p = strstr(tmpl, "{subject}");
    if (!p || !subject)
        snprintf(out, n, "%s", tmpl);
    else
        snprintf(out, n, "%.*s%s%s", (int)(p - tmpl), tmpl, subject, p + strlen("{subject}"));
}

/* First existing file among the candidates, or QS_ENOTFOUND with the list. */
static int task_find_any(char *out, size_t out_bytes, const char *dir, char *const *cands, int n,
                         const char *subject, const char *what, qs_diag *d)
{
    char rel[512], tried[QS_DIAG_MSG_MAX] = "";
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        task_subst_subject(rel, sizeof rel, cands[i], subject);
        if (task_file_find(out, out_bytes, dir, rel) == 0)
            return 0;
        int w = snprintf(tried + used, sizeof tried - used, "%s%s/%s[.zst]", i ? ", " : "", dir, rel);
        if (w > 0 && (size_t)w < sizeof tried - used)
            used += (size_t)w;
    }
    return diag_set(d, QS_ENOTFOUND, NULL, -1, "no %s data found; looked for %s", what, tried);
}

static int task_file_record(task_data *td, const char *path, long n_records, int subject,
                            int shots, qs_diag *d)
{
    if (td->n_files >= TASK_MAX_FILES)
        return diag_set(d, QS_ERANGE, path, -1, "more than %d data files", TASK_MAX_FILES);
    task_file *f = &td->files[td->n_files];
    memset(f, 0, sizeof *f);
    int rc = digest_sha256_file(path, f->sha256, d);
    if (rc)
        return rc;
    if (!(f->path = qs_strdup(path)))
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    f->n_records = n_records;
    f->subject = subject;
    f->shots = shots;
    td->n_files++;
    return 0;
}

static int task_load_one(task_data *td, const task_def *def, const char *path, int subject,
                         int shots, size_t *cap, qs_diag *d)
{
    task_doc **docs = shots ? &td->shots : &td->docs;
    size_t *n = shots ? &td->n_shots : &td->n_docs, before = *n;
    int rc, as_given = 0;
    switch (def->loader) {
    case TASK_LOADER_MMLU_CSV:
        rc = task_load_mmlu_csv(path, subject, docs, n, cap, d);
        snprintf(td->format, sizeof td->format, "hendrycks csv");
        break;
    case TASK_LOADER_HELLASWAG:
        rc = task_load_hellaswag(path, def->hook == TASK_HOOK_HELLASWAG, docs, n, cap, &as_given, d);
        if (!shots) {
            td->contexts_as_given = as_given;
            snprintf(td->format, sizeof td->format, "%s",
                     as_given ? "llama.cpp 6-line text (contexts scored as given, no harness "
                                "preprocessing)" : "official jsonl (harness preprocessing)");
        }
        break;
    default:
        rc = task_load_arc(path, docs, n, cap, d);
        snprintf(td->format, sizeof td->format, "arc jsonl");
        break;
    }
    if (!rc && *n == before)
        rc = diag_set(d, QS_EFORMAT, path, -1, "no records");
    if (!rc)
        rc = task_file_record(td, path, (long)(*n - before), subject, shots, d);
    return rc;
}

const task_doc *task_data_find(const task_data *td, int subject, long doc_id, const char **path)
{
    *path = NULL;
    for (int i = 0; i < td->n_files; i++)
        if (!td->files[i].shots && td->files[i].subject == subject)
            *path = td->files[i].path;
    for (size_t i = 0; i < td->n_docs; i++)
        if (td->docs[i].subject == subject && td->docs[i].doc_id == doc_id)
            return &td->docs[i];
    return NULL;
}

int task_data_load(task_data *td, const task_def *def, const char *data_dir, int need_shots,
                   qs_diag *d)
{
    memset(td, 0, sizeof *td);
    char path[1024], what[160];
    size_t cap = 0, shot_cap = 0;
    int rc = 0;
    int n_units = def->loader == TASK_LOADER_MMLU_CSV ? def->n_subjects : 1;
    for (int u = 0; u < n_units && !rc; u++) {
        const char *subj = def->loader == TASK_LOADER_MMLU_CSV ? def->subjects[u] : NULL;
        snprintf(what, sizeof what, "%s %s%s%s", def->name, def->eval_split, subj ? " for " : "",
                 subj ? subj : "");
        rc = task_find_any(path, sizeof path, data_dir, def->eval_paths, def->n_eval_paths, subj,
                           what, d);
        if (!rc)
            rc = task_load_one(td, def, path, subj ? u : -1, 0, &cap, d);
        if (rc || !need_shots)
            continue;
        if (!def->n_fewshot_paths) {
            rc = diag_set(d, QS_EINVAL, def->path, -1, "task %s declares no few-shot data", def->name);
            break;
        }
        snprintf(what, sizeof what, "%s few-shot (%s)%s%s", def->name, def->fewshot_split,
                 subj ? " for " : "", subj ? subj : "");
        rc = task_find_any(path, sizeof path, data_dir, def->fewshot_paths, def->n_fewshot_paths,
                           subj, what, d);
        if (!rc)
            rc = task_load_one(td, def, path, subj ? u : -1, 1, &shot_cap, d);
    }
    if (rc)
        task_data_free(td);
    return rc;
}

void task_data_free(task_data *td)
{
    if (!td)
        return;
    task_docs_free(td->docs, td->n_docs);
    task_docs_free(td->shots, td->n_shots);
    for (int i = 0; i < td->n_files; i++)
        qs_free(td->files[i].path);
    memset(td, 0, sizeof *td);
}
