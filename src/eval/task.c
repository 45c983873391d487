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
#include "qs/mem.h"
#include "qs/prompt.h"
#include "qs/task.h"

static const char *const task_known_keys[] = {
    "task", "version", "subtask_version", "loader", "hook", "eval_split", "fewshot_split",
    "fewshot_sampler", "data", "description", "doc_to_text", "doc_to_choice",
    "target_delimiter", "fewshot_delimiter", "metrics", "subjects", "groups", "comment", NULL};

static int task_str_get(const json_t *obj, const char *key, int required, const char *dflt,
                        char **out, const char *path, qs_diag *d)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required)
            return diag_set(d, QS_EFORMAT, path, -1, "missing key \"%s\"", key);
        *out = dflt ? qs_strdup(dflt) : NULL;
        return (dflt && !*out) ? diag_set(d, QS_ENOMEM, path, -1, "out of memory") : 0;
    }
    char num[64];
    const char *s;
    if (json_is_string(v))
        s = json_string_value(v);
    else if (json_is_integer(v)) {
        snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
        s = num;
    } else if (json_is_real(v)) {
        snprintf(num, sizeof num, "%.1f", json_real_value(v));
        s = num;
    } else
        return diag_set(d, QS_EFORMAT, path, -1, "key \"%s\": expected a string", key);
    *out = qs_strdup(s);
    return *out ? 0 : diag_set(d, QS_ENOMEM, path, -1, "out of memory");
}

static int task_str_list(const json_t *arr, const char *what, char **out, int max, int *n,
                         const char *path, qs_diag *d)
{
    if (!json_is_array(arr) || json_array_size(arr) == 0 || (int)json_array_size(arr) > max)
        return diag_set(d, QS_EFORMAT, path, -1, "%s: expected an array of 1 to %d strings", what,
                        max);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *s = json_array_get(arr, i);
        if (!json_is_string(s))
            return diag_set(d, QS_EFORMAT, path, -1, "%s[%zu]: expected a string", what, i);
        out[i] = qs_strdup(json_string_value(s));
        if (!out[i])
            return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
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

static int task_def_groups(task_def *def, const json_t *root, const char *path, qs_diag *d)
{
    json_t *subj = json_object_get(root, "subjects");
    json_t *groups = json_object_get(root, "groups");
    if (!subj && !groups)
        return 0;
    if (!json_is_array(subj) || !json_is_array(groups))
        return diag_set(d, QS_EFORMAT, path, -1, "\"subjects\" and \"groups\" must be arrays");
    size_t ns = json_array_size(subj);
    def->subjects = qs_calloc(ns ? ns : 1, sizeof *def->subjects);
    if (!def->subjects)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    for (size_t i = 0; i < ns; i++) {
        json_t *s = json_array_get(subj, i);
        if (!json_is_string(s) || !json_string_length(s))
            return diag_set(d, QS_EFORMAT, path, -1, "subjects[%zu]: expected a name", i);
        def->subjects[i] = qs_strdup(json_string_value(s));
        if (!def->subjects[i])
            return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
        def->n_subjects = (int)i + 1;
    }
    if (json_array_size(groups) > TASK_MAX_GROUPS)
        return diag_set(d, QS_EFORMAT, path, -1, "at most %d groups", TASK_MAX_GROUPS);
    int *owner = qs_calloc((size_t)def->n_subjects + 1, sizeof *owner);
    if (!owner)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    int rc = 0;
    for (size_t g = 0; g < json_array_size(groups) && !rc; g++) {
        json_t *go = json_array_get(groups, g);
        json_t *members = json_object_get(go, "subjects");
        task_group *tg = &def->groups[g];
        def->n_groups = (int)g + 1;
        if (!json_is_object(go) || !json_is_array(members)) {
            rc = diag_set(d, QS_EFORMAT, path, -1, "groups[%zu]: expected {name, alias, subjects}", g);
            break;
        }
        if ((rc = task_str_get(go, "name", 1, NULL, &tg->name, path, d)) ||
            (rc = task_str_get(go, "alias", 0, NULL, &tg->alias, path, d)))
            break;
        tg->subjects = qs_calloc(json_array_size(members) + 1, sizeof *tg->subjects);
        if (!tg->subjects) {
            rc = diag_set(d, QS_ENOMEM, path, -1, "out of memory");
            break;
        }
        for (size_t m = 0; m < json_array_size(members); m++) {
            const char *name = json_string_value(json_array_get(members, m));
            int found = -1;
            for (int s = 0; name && s < def->n_subjects; s++)
                if (!strcmp(name, def->subjects[s]))
                    found = s;
            if (found < 0) {
                rc = diag_set(d, QS_EFORMAT, path, -1, "group \"%s\": \"%s\" is not in \"subjects\"",
                              tg->name, name ? name : "(not a string)");
                break;
            }
            if (owner[found]++) {
                rc = diag_set(d, QS_EFORMAT, path, -1, "subject \"%s\" is in two groups", name);
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

static int task_def_parse(task_def *def, const json_t *root, const char *path, qs_diag *d)
{
    int rc;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)root, key, val) {
        int ok = 0;
        for (int i = 0; task_known_keys[i]; i++)
            ok |= !strcmp(key, task_known_keys[i]);
        if (!ok)
            return diag_set(d, QS_EFORMAT, path, -1, "unknown key \"%s\"", key);
    }
    char *loader = NULL, *hook = NULL, *sampler = NULL;
    if ((rc = task_str_get(root, "task", 1, NULL, &def->name, path, d)) ||
        (rc = task_str_get(root, "version", 1, NULL, &def->version, path, d)) ||
        (rc = task_str_get(root, "subtask_version", 0, NULL, &def->subtask_version, path, d)) ||
        (rc = task_str_get(root, "eval_split", 1, NULL, &def->eval_split, path, d)) ||
        (rc = task_str_get(root, "fewshot_split", 0, "train", &def->fewshot_split, path, d)) ||
        (rc = task_str_get(root, "description", 0, "", &def->description, path, d)) ||
        (rc = task_str_get(root, "doc_to_text", 1, NULL, &def->doc_to_text, path, d)) ||
        (rc = task_str_get(root, "target_delimiter", 0, " ", &def->target_delimiter, path, d)) ||
        (rc = task_str_get(root, "fewshot_delimiter", 0, "\n\n", &def->fewshot_delimiter, path, d)))
        return rc;
    if ((rc = task_str_get(root, "loader", 1, NULL, &loader, path, d)) ||
        (rc = task_str_get(root, "hook", 0, "", &hook, path, d)) ||
        (rc = task_str_get(root, "fewshot_sampler", 0, "random", &sampler, path, d)))
        goto out;
    static const char *const loaders[] = {"mmlu_csv", "hellaswag", "arc", NULL};
    static const int loader_v[] = {TASK_LOADER_MMLU_CSV, TASK_LOADER_HELLASWAG, TASK_LOADER_ARC};
    static const char *const hooks[] = {"", "hellaswag_preprocess", NULL};
    static const int hook_v[] = {TASK_HOOK_NONE, TASK_HOOK_HELLASWAG};
    static const char *const samplers[] = {"first_n", "random", NULL};
    static const int sampler_v[] = {TASK_SAMPLER_FIRST_N, TASK_SAMPLER_RANDOM};
    if (task_lookup(loader, loaders, loader_v, &def->loader)) {
        rc = diag_set(d, QS_EFORMAT, path, -1, "loader \"%s\": expected mmlu_csv, hellaswag or arc",
                      loader);
        goto out;
    }
    if (task_lookup(hook, hooks, hook_v, &def->hook)) {
        rc = diag_set(d, QS_EFORMAT, path, -1, "hook \"%s\": the only named hook is "
                      "hellaswag_preprocess", hook);
        goto out;
    }
    if (task_lookup(sampler, samplers, sampler_v, &def->sampler)) {
        rc = diag_set(d, QS_EFORMAT, path, -1, "fewshot_sampler \"%s\": expected first_n or random",
                      sampler);
        goto out;
    }
    json_t *data = json_object_get(root, "data");
    if (!json_is_object(data)) {
        rc = diag_set(d, QS_EFORMAT, path, -1, "\"data\": expected {\"eval\": [...], \"fewshot\": [...]}");
        goto out;
    }
    if ((rc = task_str_list(json_object_get(data, "eval"), "data.eval", def->eval_paths,
                            TASK_MAX_PATHS, &def->n_eval_paths, path, d)))
        goto out;
    if (json_object_get(data, "fewshot") &&
        (rc = task_str_list(json_object_get(data, "fewshot"), "data.fewshot", def->fewshot_paths,
                            TASK_MAX_PATHS, &def->n_fewshot_paths, path, d)))
        goto out;
    json_t *choice = json_object_get(root, "doc_to_choice");
    if (json_is_array(choice)) {
        def->fixed_choices = qs_calloc(json_array_size(choice) + 1, sizeof *def->fixed_choices);
        if (!def->fixed_choices) {
            rc = diag_set(d, QS_ENOMEM, path, -1, "out of memory");
            goto out;
        }
        if ((rc = task_str_list(choice, "doc_to_choice", def->fixed_choices, 64,
                                &def->n_fixed_choices, path, d)))
            goto out;
    } else if (!json_is_string(choice) || strcmp(json_string_value(choice), "{choices}")) {
        rc = diag_set(d, QS_EFORMAT, path, -1,
                      "doc_to_choice: expected \"{choices}\" or an array of strings");
        goto out;
    }
    json_t *metrics = json_object_get(root, "metrics");
    if (!json_is_array(metrics) || !json_array_size(metrics)) {
        rc = diag_set(d, QS_EFORMAT, path, -1, "metrics: expected [\"acc\"] or [\"acc\", \"acc_norm\"]");
        goto out;
    }
    for (size_t i = 0; i < json_array_size(metrics); i++) {
        const char *m = json_string_value(json_array_get(metrics, i));
        if (m && !strcmp(m, "acc_norm"))
            def->metric_acc_norm = 1;
        else if (!m || strcmp(m, "acc")) {
            rc = diag_set(d, QS_EFORMAT, path, -1, "metrics[%zu]: expected \"acc\" or \"acc_norm\"", i);
            goto out;
        }
    }
    if ((rc = prompt_template_check(def->description, path, d)) ||
        (rc = prompt_template_check(def->doc_to_text, path, d)) ||
        (rc = task_def_groups(def, root, path, d)))
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
    char *text = NULL;
    size_t bytes = 0;
    int rc = fileio_read_all(path, &text, &bytes, d);
    if (rc)
        return rc;
    json_error_t jerr;
    json_t *root = json_loadb(text, bytes, JSON_REJECT_DUPLICATES, &jerr);
    qs_free(text);
    if (!root)
        return diag_set(d, QS_EFORMAT, path, jerr.line, "invalid JSON: %s", jerr.text);
    if (!json_is_object(root))
        rc = diag_set(d, QS_EFORMAT, path, -1, "expected a JSON object");
    else
        rc = task_def_parse(def, root, path, d);
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
