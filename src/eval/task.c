/* task.c: task definitions (tasks/<name>.json) and finding their data files.
 *
 * A definition is validated completely when loaded (keys, templates, hook,
 * loader, groups), so a typo in a task file is reported before any model runs.
 * Data files are found by their official names under the data dir; every
 * candidate is tried as given and with ".zst"; when none exists the error
 * lists every path looked for.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "qs/digest.h"
#include "qs/fileio.h"
#include "qs/json.h"
#include "qs/mem.h"
#include "qs/prompt.h"
#include "qs/task.h"

static const char *const task_known_keys[] = {
    "task", "version", "subtask_version", "loader", "hook", "eval_split", "fewshot_split",
    "fewshot_sampler", "data", "description", "doc_to_text", "doc_to_choice",
    "target_delimiter", "fewshot_delimiter", "metrics", "subjects", "groups", "comment", NULL};

/* A string member copied (qs_strdup); a version may be written as a number
 * (1 -> "1", 1.0 -> "1.0").  Optional: absent or null -> dflt (NULL stays NULL). */
static int task_str_get(const qs_json_at *obj, const char *key, int required, const char *dflt,
                        char **out, qs_diag *d)
{
    const json_t *v = qs_json_key(obj, key).v;
    char num[64];
    const char *s = num;
    int rc = 0;
    if (json_is_integer(v))
        snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(num, sizeof num, "%.1f", json_real_value(v));
    else
        rc = required ? qs_json_str(obj, key, &s, d) : qs_json_str_or(obj, key, dflt, &s, d);
    if (rc)
        return rc;
    *out = s ? qs_strdup(s) : NULL;
    return s && !*out ? diag_set(d, QS_ENOMEM, obj->file, -1, "out of memory") : 0;
}

/* member `key` of obj, a string (no number spelled as one: a delimiter of 7 is
 * a mistake, not " 7"), copied into *out; absent: dflt, or an error if required */
static int task_text_get(const qs_json_at *obj, const char *key, int required, const char *dflt,
                         char **out, qs_diag *d)
{
    const char *s = NULL;
    int rc = required ? qs_json_str(obj, key, &s, d) : qs_json_str_or(obj, key, dflt, &s, d);
    if (rc)
        return rc;
    *out = s ? qs_strdup(s) : NULL;
    return s && !*out ? diag_set(d, QS_ENOMEM, obj->file, -1, "out of memory") : 0;
}

/* member `key` of obj: an array of 1 to max strings, copied into out[0..*n) */
static int task_str_list(const qs_json_at *obj, const char *key, char **out, int max, int *n,
                         qs_diag *d)
{
    qs_json_at arr;
    size_t len;
    int rc = qs_json_arr(obj, key, &arr, &len, d);
    if (rc)
        return rc;
    if (len == 0 || len > (size_t)max)
        return qs_json_fail(obj, key, QS_EFORMAT, d, "expected 1 to %d strings, found %zu", max,
                            len);
    for (size_t i = 0; i < len; i++) {
        qs_json_at e = qs_json_item(&arr, i);
        const char *s;
        if ((rc = qs_json_str(&e, NULL, &s, d)))
            return rc;
        if (!(out[i] = qs_strdup(s)))
            return diag_set(d, QS_ENOMEM, obj->file, -1, "out of memory");
        *n = (int)i + 1;
    }
    return 0;
}

static int task_lookup(const char *s, const char *const *names, const int *vals, int *out)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(s, names[i])) {
            *out = vals[i];
            return 0;
        }
    return -1;
}

static int task_def_groups(task_def *def, const qs_json_at *r, qs_diag *d)
{
    const char *path = r->file;
    if (!qs_json_key(r, "subjects").v && !qs_json_key(r, "groups").v)
        return 0;
    qs_json_at subj, groups;
    size_t ns, ng;
    int rc;
    if ((rc = qs_json_arr(r, "subjects", &subj, &ns, d)) ||
        (rc = qs_json_arr(r, "groups", &groups, &ng, d)))
        return rc;
    def->subjects = qs_calloc(ns ? ns : 1, sizeof *def->subjects);
    if (!def->subjects)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    for (size_t i = 0; i < ns; i++) {
        qs_json_at e = qs_json_item(&subj, i);
        const char *s;
        if ((rc = qs_json_str(&e, NULL, &s, d)))
            return rc;
        if (!*s)
            return qs_json_fail(&e, NULL, QS_EFORMAT, d, "expected a name, found \"\"");
        if (!(def->subjects[i] = qs_strdup(s)))
            return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
        def->n_subjects = (int)i + 1;
    }
    if (ng > TASK_MAX_GROUPS)
        return qs_json_fail(r, "groups", QS_EFORMAT, d, "at most %d groups, found %zu",
                            TASK_MAX_GROUPS, ng);
    int *owner = qs_calloc((size_t)def->n_subjects + 1, sizeof *owner);
    if (!owner)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    for (size_t g = 0; g < ng && !rc; g++) {
        qs_json_at go = qs_json_item(&groups, g), members;
        size_t nm;
        task_group *tg = &def->groups[g];
        def->n_groups = (int)g + 1;
        if ((rc = qs_json_obj(&go, NULL, &go, d)) ||
            (rc = qs_json_arr(&go, "subjects", &members, &nm, d)) ||
            (rc = task_str_get(&go, "name", 1, NULL, &tg->name, d)) ||
            (rc = task_str_get(&go, "alias", 0, NULL, &tg->alias, d)))
            break;
        tg->subjects = qs_calloc(nm + 1, sizeof *tg->subjects);
        if (!tg->subjects) {
            rc = diag_set(d, QS_ENOMEM, path, -1, "out of memory");
            break;
        }
        for (size_t m = 0; m < nm; m++) {
            qs_json_at e = qs_json_item(&members, m);
            const char *name;
            if ((rc = qs_json_str(&e, NULL, &name, d)))
                break;
            int found = -1;
            for (int s = 0; s < def->n_subjects; s++)
                if (!strcmp(name, def->subjects[s]))
                    found = s;
            if (found < 0) {
                rc = qs_json_fail(&e, NULL, QS_EFORMAT, d, "\"%s\" is not in $.subjects", name);
                break;
            }
            if (owner[found]++) {
                rc = qs_json_fail(&e, NULL, QS_EFORMAT, d, "subject \"%s\" is in two groups",
                                  name);
                break;
            }
            tg->subjects[tg->n_subjects++] = found;
        }
    }
    for (int s = 0; !rc && s < def->n_subjects; s++)
        if (def->n_groups && !owner[s])
            rc = diag_set(d, QS_EFORMAT, path, -1, "subject \"%s\" is in no group", def->subjects[s]);
    qs_free(owner);
    return rc;
}

static int task_def_parse(task_def *def, const qs_json_at *r, qs_diag *d)
{
    int rc;
    const char *key, *path = r->file;
    json_t *val;
    json_object_foreach((json_t *)r->v, key, val) {
        int ok = 0;
        for (int i = 0; task_known_keys[i]; i++)
            ok |= !strcmp(key, task_known_keys[i]);
        if (!ok)
            return diag_set(d, QS_EFORMAT, path, -1, "unknown key \"%s\"", key);
    }
    char *loader = NULL, *hook = NULL, *sampler = NULL;
    if ((rc = task_str_get(r, "task", 1, NULL, &def->name, d)) ||
        (rc = task_str_get(r, "version", 1, NULL, &def->version, d)) ||
        (rc = task_str_get(r, "subtask_version", 0, NULL, &def->subtask_version, d)) ||
        (rc = task_text_get(r, "eval_split", 1, NULL, &def->eval_split, d)) ||
        (rc = task_text_get(r, "fewshot_split", 0, "train", &def->fewshot_split, d)) ||
        (rc = task_text_get(r, "description", 0, "", &def->description, d)) ||
        (rc = task_text_get(r, "doc_to_text", 1, NULL, &def->doc_to_text, d)) ||
        (rc = task_text_get(r, "target_delimiter", 0, " ", &def->target_delimiter, d)) ||
        (rc = task_text_get(r, "fewshot_delimiter", 0, "\n\n", &def->fewshot_delimiter, d)))
        return rc;
    if ((rc = task_text_get(r, "loader", 1, NULL, &loader, d)) ||
        (rc = task_text_get(r, "hook", 0, "", &hook, d)) ||
        (rc = task_text_get(r, "fewshot_sampler", 0, "random", &sampler, d)))
        goto out;
    static const char *const loaders[] = {"mmlu_csv", "hellaswag", "arc", NULL};
    static const int loader_v[] = {TASK_LOADER_MMLU_CSV, TASK_LOADER_HELLASWAG, TASK_LOADER_ARC};
    static const char *const hooks[] = {"", "hellaswag_preprocess", NULL};
    static const int hook_v[] = {TASK_HOOK_NONE, TASK_HOOK_HELLASWAG};
    static const char *const samplers[] = {"first_n", "random", NULL};
    static const int sampler_v[] = {TASK_SAMPLER_FIRST_N, TASK_SAMPLER_RANDOM};
    if (task_lookup(loader, loaders, loader_v, &def->loader)) {
        rc = qs_json_fail(r, "loader", QS_EFORMAT, d,
                          "expected mmlu_csv, hellaswag or arc, found \"%s\"", loader);
        goto out;
    }
    if (task_lookup(hook, hooks, hook_v, &def->hook)) {
        rc = qs_json_fail(r, "hook", QS_EFORMAT, d,
                          "the only named hook is hellaswag_preprocess, found \"%s\"", hook);
        goto out;
    }
    if (def->hook == TASK_HOOK_HELLASWAG && def->loader != TASK_LOADER_HELLASWAG) {
        rc = qs_json_fail(r, "hook", QS_EFORMAT, d, "hellaswag_preprocess works on the hellaswag "
                          "loader's fields, found loader \"%s\" (it would be ignored)", loader);
        goto out;
    }
    if (task_lookup(sampler, samplers, sampler_v, &def->sampler)) {
        rc = qs_json_fail(r, "fewshot_sampler", QS_EFORMAT, d,
                          "expected first_n or random, found \"%s\"", sampler);
        goto out;
    }
    qs_json_at data, metrics;
    if ((rc = qs_json_obj(r, "data", &data, d)) ||
        (rc = task_str_list(&data, "eval", def->eval_paths, TASK_MAX_PATHS, &def->n_eval_paths,
                            d)))
        goto out;
    json_object_foreach((json_t *)data.v, key, val)
        if (strcmp(key, "eval") && strcmp(key, "fewshot")) {
            rc = qs_json_fail(&data, key, QS_EFORMAT, d, "unknown key (expected \"eval\" and "
                              "\"fewshot\")");
            goto out;
        }
    if (qs_json_key(&data, "fewshot").v &&
        (rc = task_str_list(&data, "fewshot", def->fewshot_paths, TASK_MAX_PATHS,
                            &def->n_fewshot_paths, d)))
        goto out;
    const json_t *choice = qs_json_key(r, "doc_to_choice").v;
    if (json_is_array(choice)) {
        def->fixed_choices = qs_calloc(json_array_size(choice) + 1, sizeof *def->fixed_choices);
        if (!def->fixed_choices) {
            rc = diag_set(d, QS_ENOMEM, path, -1, "out of memory");
            goto out;
        }
        if ((rc = task_str_list(r, "doc_to_choice", def->fixed_choices, 64,
                                &def->n_fixed_choices, d)))
            goto out;
    } else if (!json_is_string(choice) || strcmp(json_string_value(choice), "{choices}")) {
        rc = qs_json_fail(r, "doc_to_choice", QS_EFORMAT, d,
                          "expected \"{choices}\" or an array of strings");
        goto out;
    }
    size_t n_metrics;
    if ((rc = qs_json_arr(r, "metrics", &metrics, &n_metrics, d)))
        goto out;
    if (!n_metrics) {
        rc = qs_json_fail(r, "metrics", QS_EFORMAT, d, "expected [\"acc\"] or [\"acc\", \"acc_norm\"]");
        goto out;
    }
    int has_acc = 0;
    for (size_t i = 0; i < n_metrics && !rc; i++) {
        qs_json_at e = qs_json_item(&metrics, i);
        const char *m = "";
        if (!(rc = qs_json_str(&e, NULL, &m, d)) && strcmp(m, "acc") && strcmp(m, "acc_norm"))
            rc = qs_json_fail(&e, NULL, QS_EFORMAT, d,
                              "expected \"acc\" or \"acc_norm\", found \"%s\"", m);
        else if (!rc && (!strcmp(m, "acc") ? has_acc : def->metric_acc_norm))
            rc = qs_json_fail(&e, NULL, QS_EFORMAT, d, "\"%s\" listed twice", m);
        has_acc |= !strcmp(m, "acc");
        def->metric_acc_norm |= !strcmp(m, "acc_norm");
    }
    if (!rc && !has_acc)   /* acc is always reported: a list without it would not say so */
        rc = qs_json_fail(r, "metrics", QS_EFORMAT, d,
                          "expected [\"acc\"] or [\"acc\", \"acc_norm\"] (acc is always "
                          "reported), found no \"acc\"");
    if (rc)
        goto out;
    if ((rc = prompt_template_check(def->description, path, d)) ||
        (rc = prompt_template_check(def->doc_to_text, path, d)))
        goto out;
    /* {subject} of a loader without subjects would expand to "" (and change every prompt) */
    if (def->loader != TASK_LOADER_MMLU_CSV) {
        const char *field = prompt_template_uses_subject(def->description) ? "description"
                            : prompt_template_uses_subject(def->doc_to_text) ? "doc_to_text"
                                                                            : NULL;
        if (field) {
            rc = qs_json_fail(r, field, QS_EFORMAT, d, "{subject} and {subject_words} need a task "
                              "with subjects (loader mmlu_csv), this one's loader has none");
            goto out;
        }
    }
    if ((def->loader == TASK_LOADER_MMLU_CSV) != (qs_json_key(r, "subjects").v != NULL)) {
        rc = diag_set(d, QS_EFORMAT, path, -1, "\"subjects\" is required by (and only by) mmlu_csv");
        goto out;
    }
    if ((rc = task_def_groups(def, r, d)))
        goto out;
    if ((def->loader == TASK_LOADER_MMLU_CSV) != (def->n_subjects > 0))
        rc = diag_set(d, QS_EFORMAT, path, -1, "\"subjects\" is required by (and only by) mmlu_csv");
out:
    qs_free(loader);
    qs_free(hook);
    qs_free(sampler);
    return rc;
}

int task_def_load(task_def *def, const char *path, qs_diag *d)
{
    memset(def, 0, sizeof *def);
    json_t *root;
    int rc = qs_json_load_file(path, QS_JSON_NO_DUPLICATES | QS_JSON_OBJECT, &root, d);
    if (rc)
        return rc;
    qs_json_at r = qs_json_root(root, path, -1);
    rc = task_def_parse(def, &r, d);
    json_decref(root);
    if (!rc && !(def->path = qs_strdup(path)))
        rc = diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    if (rc)
        task_def_free(def);
    return rc;
}

int task_def_load_named(task_def *def, const char *tasks_dir, const char *name, qs_diag *d)
{
    char file[600], path[1100];
    memset(def, 0, sizeof *def);
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
            return diag_set(d, QS_EINVAL, NULL, -1, "task name '%s': only a-z, 0-9 and _ allowed",
                            name);
    snprintf(file, sizeof file, "%s.json", name);
    if (fileio_join(path, sizeof path, tasks_dir, file))
        return diag_set(d, QS_ERANGE, tasks_dir, -1, "path too long");
    if (!fileio_exists(path))
        return diag_set(d, QS_ENOTFOUND, path, -1, "no such task '%s' (looked for %s)", name, path);
    int rc = task_def_load(def, path, d);
    if (!rc && strcmp(def->name, name)) {
        rc = diag_set(d, QS_EFORMAT, path, -1, "\"task\" is \"%s\", expected \"%s\"", def->name, name);
        task_def_free(def);
    }
    return rc;
}

static void task_strv_free(char **v, int n)
{
    for (int i = 0; v && i < n; i++)
        qs_free(v[i]);
}

void task_def_free(task_def *def)
{
    if (!def)
        return;
    qs_free(def->name);
    qs_free(def->version);
    qs_free(def->subtask_version);
    qs_free(def->path);
    qs_free(def->eval_split);
    qs_free(def->fewshot_split);
    task_strv_free(def->eval_paths, def->n_eval_paths);
    task_strv_free(def->fewshot_paths, def->n_fewshot_paths);
    qs_free(def->description);
    qs_free(def->doc_to_text);
    task_strv_free(def->fixed_choices, def->n_fixed_choices);
    qs_free(def->fixed_choices);
    qs_free(def->target_delimiter);
    qs_free(def->fewshot_delimiter);
    task_strv_free(def->subjects, def->n_subjects);
    qs_free(def->subjects);
    for (int g = 0; g < def->n_groups; g++) {
        qs_free(def->groups[g].name);
        qs_free(def->groups[g].alias);
        qs_free(def->groups[g].subjects);
    }
    memset(def, 0, sizeof *def);
}
