/* task.h: benchmark task definitions (tasks/<name>.json) and their data.
 *
 * A task is data: a JSON file names the loader for its data layout, the files
 * to look for under the data dir, the prompt templates (tasks/README.md), the
 * choices, the metrics and, only where the data needs massaging, a named hook.
 * Every document becomes one task_doc: a question, its own number of choices
 * and a gold index.  Loaders never skip a row: a bad row is an error naming the
 * file, the line and what was wrong.  Any data file may be zstd-compressed
 * (the same name + ".zst").
 */
#ifndef QS_TASK_H
#define QS_TASK_H

#include <stddef.h>

#include "qs/err.h"

enum {
    TASK_LOADER_MMLU_CSV = 1,   /* hendrycks per-subject CSVs, no header, answer letter */
    TASK_LOADER_HELLASWAG = 2,  /* official jsonl, or llama.cpp 6-line text (*.txt) */
    TASK_LOADER_ARC = 3,        /* jsonl, HF record layout or AI2 layout */
};

enum { TASK_HOOK_NONE = 0, TASK_HOOK_HELLASWAG = 1 };
enum { TASK_SAMPLER_FIRST_N = 0, TASK_SAMPLER_RANDOM = 1 };

#define TASK_MAX_PATHS 8
#define TASK_MAX_GROUPS 8

typedef struct task_group {
    char *name;        /* "mmlu_stem" */
    char *alias;       /* "stem" */
    int n_subjects;
    int *subjects;     /* [n_subjects] indices into task_def.subjects */
} task_group;

typedef struct task_def {
    char *name;              /* "arc_easy", "mmlu" */
    char *version;           /* version of the task (of the group for MMLU), as written */
    char *subtask_version;   /* MMLU subjects' version, else NULL */
    char *path;              /* the json file it came from */
    int loader;              /* TASK_LOADER_* */
    int hook;                /* TASK_HOOK_* */
    int sampler;             /* TASK_SAMPLER_* */
    char *eval_split, *fewshot_split;
    int n_eval_paths, n_fewshot_paths;   /* candidate paths relative to the data dir; */
    char *eval_paths[TASK_MAX_PATHS];    /* "{subject}" is replaced for MMLU */
    char *fewshot_paths[TASK_MAX_PATHS];
    char *description;       /* template, "" for none */
    char *doc_to_text;       /* template of the query */
    int n_fixed_choices;     /* > 0: choices scored are these strings (MMLU letters) */
    char **fixed_choices;
    char *target_delimiter, *fewshot_delimiter;
    int metric_acc_norm;     /* 1 if acc_norm is reported */
    int n_subjects;          /* MMLU: leaf subtasks, else 0 */
    char **subjects;         /* "abstract_algebra" */
    int n_groups;
    task_group groups[TASK_MAX_GROUPS];
} task_def;

/* Parse one task file.  Unknown keys, unknown template fields, unknown hooks
 * are errors naming the file. */
int task_def_load(task_def *def, const char *path, qs_diag *d);
/* tasks_dir/<name>.json */
int task_def_load_named(task_def *def, const char *tasks_dir, const char *name, qs_diag *d);
void task_def_free(task_def *def);   /* safe on a zeroed def */

typedef struct task_doc {
    char *question;    /* query text source (after the hook when there is one) */
    char **choices;    /* [n_choices] choice texts (after the hook) */
    int n_choices;
    int gold;          /* 0-based index into choices */
    int subject;       /* MMLU subject index, else -1 */
    long doc_id;       /* 0-based position in its data file */
    long line;         /* 1-based line where the record starts */
} task_doc;

#define TASK_MAX_FILES 128

typedef struct task_file {
    char *path;          /* as opened */
    char sha256[65];     /* hex */
    long n_records;
    int subject;         /* MMLU subject index, else -1 */
    int shots;           /* 1: a few-shot pool's file */
} task_file;

typedef struct task_data {
    task_doc *docs;        /* evaluated split; MMLU: subjects in definition order, rows in file order */
    size_t n_docs;
    task_doc *shots;       /* few-shot pool in file order (MMLU: all subjects' dev rows) */
    size_t n_shots;
    int n_files;
    task_file files[TASK_MAX_FILES];
    int contexts_as_given;   /* 1: data came pre-processed (llama.cpp text); hook not applied */
    char format[96];         /* layout that was read, e.g. "hf jsonl", "llama.cpp 6-line text" */
} task_data;

/* Find and load the data of `def` under data_dir.  need_shots: also load the
 * few-shot pool (an error when none of its paths exists).  A missing file is
 * QS_ENOTFOUND with every path looked for in the message. */
int task_data_load(task_data *td, const task_def *def, const char *data_dir, int need_shots,
                   qs_diag *d);
void task_data_free(task_data *td);   /* safe on a zeroed td */

/* The evaluated document of `subject` (-1 when not MMLU) at doc_id, and the file
 * it came from; NULL when there is none. */
const task_doc *task_data_find(const task_data *td, int subject, long doc_id, const char **path);

/* Loaders for one file (used by task_data_load, exposed for tests).  Documents
 * are appended to *docs / *n_docs (qs_realloc'd); subject is stored in each. */
int task_load_mmlu_csv(const char *path, int subject, task_doc **docs, size_t *n_docs,
                       size_t *cap, qs_diag *d);
int task_load_hellaswag(const char *path, int apply_hook, task_doc **docs, size_t *n_docs,
                        size_t *cap, int *as_given, qs_diag *d);
int task_load_arc(const char *path, task_doc **docs, size_t *n_docs, size_t *cap, qs_diag *d);
void task_docs_free(task_doc *docs, size_t n_docs);

#endif
