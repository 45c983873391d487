/* prompt.h: the harness's prompt strings for multiple-choice tasks.
 *
 * Context = description + k few-shot blocks + query of the evaluated doc,
 * where a block is query(shot) + target_delimiter + gold choice(shot) +
 * fewshot_delimiter and a continuation is target_delimiter + choice text
 * (spec/tasks.md 0.1-0.2).  Templates are expanded with the fields of a doc:
 *   {question} {question|strip} {choices[i]} {subject} {subject_words} {{ }}
 * (tasks/README.md).  The HellaSwag hook is the harness's process_docs.
 */
#ifndef QS_PROMPT_H
#define QS_PROMPT_H

#include <stddef.h>

#include "qs/err.h"
#include "qs/pyrand.h"
#include "qs/task.h"

/* Check a template's syntax and field names (no doc needed). */
int prompt_template_check(const char *tmpl, const char *path, qs_diag *d);
/* 1 when a checked template has a {subject} or {subject_words} field */
int prompt_template_uses_subject(const char *tmpl);

/* Choice string i of a doc as scored (fixed list, e.g. "A", or the doc's text). */
const char *prompt_choice(const task_def *def, const task_doc *doc, int i);
int prompt_n_choices(const task_def *def, const task_doc *doc);

/* Few-shot documents for the doc at `doc`: MMLU first_n = the first k pool rows
 * of the same subject; random = rng->sample(pool, k) (one draw per evaluated
 * doc, in doc order).  out[k] receives indices into td->shots. */
int prompt_shots_pick(const task_def *def, const task_data *td, const task_doc *doc, int k,
                      pyrand *rng, size_t *out, qs_diag *d);

/* Full context string for `doc` with the given shots (indices into td->shots). */
int prompt_context_build(const task_def *def, const task_data *td, const task_doc *doc,
                         const size_t *shots, int k, char **out, qs_diag *d);

/* HellaSwag: harness preprocess(): strip, " [title]" -> ". ", drop [..] tags,
 * "  " -> " " (one pass).  Returns a qs_malloc'd string or NULL on OOM. */
char *prompt_hellaswag_preprocess(const char *text);
/* Python str.capitalize() on UTF-8 (ASCII and Latin-1/Greek/Cyrillic case pairs). */
char *prompt_capitalize(const char *text);

/* Number of Unicode code points in UTF-8 text (Python len()). */
size_t prompt_utf8_len(const char *s);

#endif
