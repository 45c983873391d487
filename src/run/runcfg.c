/* runcfg.c: run config table, JSON loading, --set overrides (see include/qs/runcfg.h). */
#include "qs/runcfg.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qs/json.h"
#include "qs/mem.h"

typedef struct runcfg_row {
    runcfg_key key;
    size_t offset;     /* field in struct runcfg */
    size_t size;       /* bytes of string fields */
    double min, max;   /* numeric range */
} runcfg_row;

#define RC_STR(f) offsetof(runcfg, f), sizeof(((runcfg *)0)->f)
#define RC_NUM(f) offsetof(runcfg, f), 0

static const runcfg_row runcfg_rows[] = {
    {{"model", RUNCFG_STRING, "", "", "Hugging Face checkpoint directory to train (config.json, model.safetensors, tokenizer files). Required."}, RC_STR(model), 0, 0},
    {{"train_data", RUNCFG_STRING, "", "", "Token-shard directory written by `qatscope tokenize --input` (its train split is used). Required."}, RC_STR(train_data), 0, 0},
    {{"out_dir", RUNCFG_STRING, "", "", "Run directory (created; holds config.json, metrics.jsonl, events.jsonl, quant.jsonl.zst, ckpt/). Required."}, RC_STR(out_dir), 0, 0},
    {{"run_name", RUNCFG_STRING, "", "", "Name written into the logs; default: the last component of out_dir."}, RC_STR(run_name), 0, 0},
    {{"seed", RUNCFG_INT, "1337", "[0, 2^31-1]", "Seed of the data order (and every other random choice)."}, RC_NUM(seed), 0, 2147483647.0},
    {{"batch_size", RUNCFG_INT, "4", "[1, 65536]", "Sequences per micro-batch (B)."}, RC_NUM(batch_size), 1, 65536},
    {{"seq_len", RUNCFG_INT, "256", "[2, 1048576]", "Tokens per sequence (T); at most the model's max_position_embeddings."}, RC_NUM(seq_len), 2, 1048576},
    {{"grad_accum", RUNCFG_INT, "1", "[1, 65536]", "Micro-batches accumulated per optimizer step (global batch = B x grad_accum sequences)."}, RC_NUM(grad_accum), 1, 65536},
    {{"recompute", RUNCFG_BOOL, "false", "true|false", "Per-block activation recomputation: keep only each block's input for the backward and recompute the rest of a block just before its backward (quantized operands replayed at the forward's scales, nothing recorded twice). About a third more matmul work for a fraction of the activation memory; the same bits as false."}, RC_NUM(recompute), 0, 1},
    {{"steps", RUNCFG_INT, "1000", "[1, 1e9]", "Optimizer steps of the run."}, RC_NUM(steps), 1, 1e9},
    {{"lr", RUNCFG_DOUBLE, "1e-5", "[0, 1]", "Peak learning rate (the method: 1e-5)."}, RC_NUM(lr), 0, 1},
    {{"lr_min", RUNCFG_DOUBLE, "0", "[0, 1]", "Floor of the cosine decay (unused with lr_decay=constant)."}, RC_NUM(lr_min), 0, 1},
    {{"lr_warmup_steps", RUNCFG_INT, "0", "[0, 1e9]", "Linear learning-rate warmup steps: step s < N uses lr * (s+1) / N."}, RC_NUM(lr_warmup_steps), 0, 1e9},
    {{"lr_decay", RUNCFG_ENUM, "constant", "constant|cosine", "After the warmup: constant lr, or cosine decay to lr_min at the last step."}, RC_STR(lr_decay), 0, 0},
    {{"beta1", RUNCFG_DOUBLE, "0.9", "[0, 1)", "AdamW first-moment decay."}, RC_NUM(beta1), 0, 0.999999},
    {{"beta2", RUNCFG_DOUBLE, "0.95", "[0, 1)", "AdamW second-moment decay."}, RC_NUM(beta2), 0, 0.99999999},
    {{"eps", RUNCFG_DOUBLE, "1e-8", "(0, 1]", "AdamW epsilon."}, RC_NUM(eps), 1e-30, 1},
    {{"weight_decay", RUNCFG_DOUBLE, "0", "[0, 10]", "Decoupled weight decay, applied to every parameter."}, RC_NUM(weight_decay), 0, 10},
    {{"grad_clip", RUNCFG_DOUBLE, "1", "[0, 1e9]", "Global gradient-norm clip; 0 disables."}, RC_NUM(grad_clip), 0, 1e9},
    {{"precision", RUNCFG_ENUM, "fp32", "fp32|bf16|bf16-amx", "Matmul compute precision (master weights and optimizer state are always fp32); bf16-amx: bf16 operands on the AMX tiles (AMX CPUs)."}, RC_STR(precision), 0, 0},
    {{"qat", RUNCFG_BOOL, "true", "true|false", "HiF8 W8A8 fake quantization of the planned Linear modules after the bf16 warmup; false = unquantized baseline."}, RC_NUM(qat), 0, 1},
    {{"quant_modules", RUNCFG_LIST, "default", "patterns", "Quantized Linear modules, qplan patterns applied in order: `default` (mlp gate/up/down of all blocks but the first 3 and last 2), `layers.3-23.mlp.*`, `*.self_attn.o_proj`, `!pattern` removes."}, RC_STR(quant_modules), 0, 0},
    {{"bf16_warmup_steps", RUNCFG_INT, "500", "[0, 1e9]", "Unquantized steps before QAT turns on; quantizers observe amax meanwhile (fills their history)."}, RC_NUM(bf16_warmup_steps), 0, 1e9},
    {{"ste", RUNCFG_ENUM, "pass", "pass|masked", "Backward through the quantizers: pure straight-through (as published) or zero gradient at clipped elements."}, RC_STR(ste), 0, 0},
    {{"amax_estimator", RUNCFG_STRING, "max-window:64", "", "Scale estimator of every quantizer (the quant module's names, e.g. max-window:64, most-recent, current)."}, RC_STR(amax_estimator), 0, 0},
    {{"amax_history", RUNCFG_INT, "1024", "[1, 1e6]", "Steps of amax history kept per quantizer."}, RC_NUM(amax_history), 1, 1e6},
    {{"amax_margin", RUNCFG_INT, "0", "[0, 24]", "Scale margin: scale = 32768 / 2^margin / estimated amax (powers of two of headroom)."}, RC_NUM(amax_margin), 0, 24},
    {{"stop_on_saturation", RUNCFG_BOOL, "false", "true|false", "Stop the run (exit 1, event `stop`/`saturation`) when a quantizer's clip rate passes saturation_clip_rate."}, RC_NUM(stop_on_saturation), 0, 1},
    {{"saturation_clip_rate", RUNCFG_DOUBLE, "1e-4", "[0, 1]", "Clip rate above which a quantized tensor counts as saturating (QAT steps only)."}, RC_NUM(saturation_clip_rate), 0, 1},
    {{"saturation_alarm_steps", RUNCFG_INT, "1", "[1, 1e6]", "Consecutive saturating steps that raise one alarm (warning line + `saturation` event)."}, RC_NUM(saturation_alarm_steps), 1, 1e6},
    {{"ckpt_every", RUNCFG_INT, "0", "[0, 1e9]", "Steps between checkpoints (ckpt/step_N); 0 = only at the end. The last good one is kept on a NaN stop."}, RC_NUM(ckpt_every), 0, 1e9},
    {{"log_every", RUNCFG_INT, "1", "[1, 1e9]", "Steps between quant.jsonl.zst records (the detector runs every step)."}, RC_NUM(log_every), 1, 1e9},
    {{"eval_every", RUNCFG_INT, "0", "[0, 1e9]", "In-loop evaluation every N steps (plus the baseline before step 0); 0 = off."}, RC_NUM(eval_every), 0, 1e9},
    {{"eval_tasks", RUNCFG_LIST, "arc_easy", "task names", "Tasks of the in-loop evaluation (tasks/<name>.json: mmlu, hellaswag, arc_easy, arc_challenge); empty (`[]`, `eval_tasks=`): val_loss / val_ppl (and the KL reference) only, which needs eval_val_batches > 0."}, RC_STR(eval_tasks), 0, 0},
    {{"eval_data_dir", RUNCFG_STRING, "", "", "Benchmark data root for the in-loop evaluation (mmlu/, hellaswag/, arc/ below it; see ### eval); required when `eval_every` > 0 and `eval_tasks` is not empty."}, RC_STR(eval_data_dir), 0, 0},
    {{"eval_tasks_dir", RUNCFG_STRING, "", "", "Directory of the task definitions; default: the tasks/ folder of the qatscope tree the binary lives in (as `qatscope eval`), whatever the current directory."}, RC_STR(eval_tasks_dir), 0, 0},
    {{"eval_subset", RUNCFG_INT, "200", "[0, 1e9]", "Documents per task, a fixed seeded subset (the same items at every evaluation); 0 = all."}, RC_NUM(eval_subset), 0, 1e9},
    {{"eval_val_batches", RUNCFG_INT, "8", "[0, 1e6]", "Held-out perplexity at each in-loop evaluation: val_loss / val_ppl over the first N batch_size x seq_len batches of train_data's `val` split (tokenize --val-fraction), the same batches every time; 0 = off."}, RC_NUM(eval_val_batches), 0, 1e6},
    {{"eval_kl_reference", RUNCFG_BOOL, "auto", "true|false|auto", "At each in-loop evaluation, also KL(step-0 weights in bf16 || model as trained) and top-1 agreement on the eval_val_batches batches (val_kl_ref, val_top1_ref); keeps a bf16 copy of the base model; auto = on when qat is."}, RC_NUM(eval_kl_reference), 0, 1},
    {{"plot_every", RUNCFG_INT, "0", "[0, 1e9]", "Write RUN_DIR/heatmap.png (clip rate) and RUN_DIR/curves.png every N steps and at the end (atomic replace); 0 = off."}, RC_NUM(plot_every), 0, 1e9},
    {{"stop_on_forgetting", RUNCFG_BOOL, "false", "true|false", "Stop the run (checkpoint, event `stop`/`forgetting`, exit 1) on a forgetting alarm; needs `eval_every` > 0 and `eval_tasks` (refused otherwise: it could never fire)."}, RC_NUM(stop_on_forgetting), 0, 1},
    {{"forgetting_drop_points", RUNCFG_DOUBLE, "2", "[0, 100]", "Forgetting alarm: accuracy drop vs the step-0 baseline above this many points ..."}, RC_NUM(forgetting_drop_points), 0, 100},
    {{"forgetting_alpha", RUNCFG_DOUBLE, "0.05", "(0, 1]", "... and McNemar p-value below this (paired on the same items)."}, RC_NUM(forgetting_alpha), 1e-12, 1},
    {{"spike_rate", RUNCFG_DOUBLE, "0", "[0, 1]", "Spike injector (opt-in; include/qs/spike.h): probability per step and planned Linear that one seeded token row of its input is multiplied by spike_scale as the quantizer sees it (an outlier the delayed scale may not predict); each spike is an events.jsonl record. 0 = off."}, RC_NUM(spike_rate), 0, 1},
    {{"spike_scale", RUNCFG_DOUBLE, "32", "[1, 65536]", "Factor of an injected spike's row (spike_rate > 0)."}, RC_NUM(spike_scale), 1, 65536},
    {{"zero", RUNCFG_INT, "0", "[0, 1]", "Data-parallel runs (mpirun): 1 = ZeRO stage 1, each rank keeps only its shard of the Adam moments and updates only its shard of the fp32 parameters, which are then all-gathered (the same bits as 0); 0 = every rank keeps and updates everything."}, RC_NUM(zero), 0, 1},
    {{"max_memory_gb", RUNCFG_DOUBLE, "0", "[0, 1e6]", "Refuse to start when the estimated memory exceeds this; 0 = the machine's available memory."}, RC_NUM(max_memory_gb), 0, 1e6},
};

#define RUNCFG_N_ROWS ((int)(sizeof runcfg_rows / sizeof runcfg_rows[0]))

int runcfg_key_count(void) { return RUNCFG_N_ROWS; }

const runcfg_key *runcfg_key_at(int i)
{
    return i >= 0 && i < RUNCFG_N_ROWS ? &runcfg_rows[i].key : NULL;
}

static const runcfg_row *runcfg_row_find(const char *name)
{
    for (int i = 0; i < RUNCFG_N_ROWS; i++)
        if (!strcmp(runcfg_rows[i].key.name, name))
            return &runcfg_rows[i];
    return NULL;
}

static int runcfg_enum_has(const char *choices, const char *v)
{
    size_t n = strlen(v);
    for (const char *s = choices; *s;) {
        const char *bar = strchr(s, '|');
        size_t len = bar ? (size_t)(bar - s) : strlen(s);
        if (len == n && !strncmp(s, v, n))
            return 1;
        if (!bar)
            break;
        s = bar + 1;
    }
    return 0;
}

/* Sets one field from its text form (the form --set and defaults use). */
static int runcfg_field_parse(runcfg *c, const runcfg_row *r, const char *v, const char *path,
                              qs_diag *d)
{
    char *field = (char *)c + r->offset;
    const char *name = r->key.name;
    switch (r->key.type) {
    case RUNCFG_INT: {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (errno || end == v || *end || x != floor(x) || x < r->min || x > r->max)
            return diag_set(d, QS_EINVAL, path, -1, "%s: expected an integer in [%.0f, %.0f], got '%s'",
                            name, r->min, r->max, v);
        *(long *)field = (long)x;
        return 0;
    }
    case RUNCFG_DOUBLE: {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (errno || end == v || *end || !(x >= r->min && x <= r->max))
            return diag_set(d, QS_EINVAL, path, -1, "%s: expected a number in [%g, %g], got '%s'",
                            name, r->min, r->max, v);
        *(double *)field = x;
        return 0;
    }
    case RUNCFG_BOOL:
        if (!strcmp(v, "true") || !strcmp(v, "1"))
            *(int *)field = 1;
        else if (!strcmp(v, "false") || !strcmp(v, "0"))
            *(int *)field = 0;
        else if (runcfg_enum_has(r->key.choices, "auto") && !strcmp(v, "auto"))
            *(int *)field = -1;   /* resolved by the key's reader (runcfg_kl_reference) */
        else
            return diag_set(d, QS_EINVAL, path, -1, "%s: expected %s, got '%s'", name,
                            runcfg_enum_has(r->key.choices, "auto") ? "true, false or auto"
                                                                    : "true or false", v);
        return 0;
    case RUNCFG_ENUM:
        if (!runcfg_enum_has(r->key.choices, v))
            return diag_set(d, QS_EINVAL, path, -1, "%s: expected one of %s, got '%s'", name,
                            r->key.choices, v);
        break; /* stored like a string, below */
    default:
        break;
    }
    if (strlen(v) >= r->size)
        return diag_set(d, QS_ERANGE, path, -1, "%s: value longer than %zu bytes", name,
                        r->size - 1);
    memcpy(field, v, strlen(v) + 1);
    return 0;
}

void runcfg_defaults(runcfg *c)
{
    memset(c, 0, sizeof *c);
    for (int i = 0; i < RUNCFG_N_ROWS; i++)
        if (runcfg_rows[i].key.dflt[0] || runcfg_rows[i].key.type == RUNCFG_STRING)
            runcfg_field_parse(c, &runcfg_rows[i], runcfg_rows[i].key.dflt, NULL, NULL);
}

static int runcfg_json_set(runcfg *c, const runcfg_row *r, const qs_json_at *root,
                           const char *path, qs_diag *d)
{
    const char *name = r->key.name;
    qs_json_at at = qs_json_key(root, name);
    const json_t *v = at.v;
    char buf[RUNCFG_STR_MAX];
    switch (r->key.type) {
    case RUNCFG_INT:
    case RUNCFG_DOUBLE:
        if (!json_is_number(v))
            break;
        snprintf(buf, sizeof buf, "%.17g", json_number_value(v));
        return runcfg_field_parse(c, r, buf, path, d);
    case RUNCFG_BOOL:
        if (json_is_string(v) && runcfg_enum_has(r->key.choices, "auto"))
            return runcfg_field_parse(c, r, json_string_value(v), path, d);
        if (!json_is_boolean(v))
            break;
        *(int *)((char *)c + r->offset) = json_is_true(v);
        return 0;
    case RUNCFG_STRING:
    case RUNCFG_ENUM:
        if (!json_is_string(v))
            break;
        return runcfg_field_parse(c, r, json_string_value(v), path, d);
    case RUNCFG_LIST: {
        if (!json_is_array(v))
            break;
        size_t used = 0;
        buf[0] = 0;
        for (size_t i = 0; i < json_array_size(v); i++) {
            qs_json_at e = qs_json_item(&at, i);
            const char *s;
            int rc = qs_json_str(&e, NULL, &s, d);
            if (rc)
                return rc;
            if (strchr(s, ','))
                return qs_json_fail(&e, NULL, QS_EINVAL, d, "',' is not allowed in '%s'", s);
            size_t n = strlen(s);
            if (used + n + 2 > sizeof buf)
                return diag_set(d, QS_ERANGE, path, -1, "%s: list longer than %zu bytes", name,
                                sizeof buf - 1);
            if (i)
                buf[used++] = ',';
            memcpy(buf + used, s, n + 1);
            used += n;
        }
        return runcfg_field_parse(c, r, buf, path, d);
    }
    }
    static const char *const want[] = {"integer", "number", "boolean", "string", "string",
                                       "array of strings"};
    return qs_json_fail(root, name, QS_EINVAL, d, "expected %s, found %s", want[r->key.type],
                        qs_json_type_name(v));
}

static int runcfg_load_json(runcfg *c, json_t *root, const char *path, qs_diag *d)
{
    qs_json_at at = qs_json_root(root, path, -1);
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        const runcfg_row *r = runcfg_row_find(k);
        if (!r)
            return diag_set(d, QS_EINVAL, path, -1,
                            "unknown key '%s' (see `qatscope train --help-config`)", k);
        int rc = runcfg_json_set(c, r, &at, path, d);
        if (rc)
            return rc;
    }
    return 0;
}

int runcfg_load_text(runcfg *c, const char *text, const char *path, qs_diag *d)
{
    json_t *root;
    runcfg_defaults(c);
    int rc = qs_json_load_text(text, strlen(text), path, 1,
                               QS_JSON_NO_DUPLICATES | QS_JSON_OBJECT, &root, d);
    if (!rc)
        rc = runcfg_load_json(c, root, path, d);
    json_decref(root);
    return rc;
}

int runcfg_load(runcfg *c, const char *path, qs_diag *d)
{
    json_t *root;
    runcfg_defaults(c);
    int rc = qs_json_load_file(path, QS_JSON_NO_DUPLICATES | QS_JSON_OBJECT, &root, d);
    if (!rc)
        rc = runcfg_load_json(c, root, path, d);
    json_decref(root);
    return rc;
}

int runcfg_set(runcfg *c, const char *assignment, qs_diag *d)
{
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return diag_set(d, QS_EINVAL, NULL, -1, "--set: expected key=value, got '%s'", assignment);
    char key[64];
    size_t n = (size_t)(eq - assignment);
    if (n >= sizeof key)
        return diag_set(d, QS_EINVAL, NULL, -1, "--set: unknown key '%.*s'", (int)n, assignment);
    memcpy(key, assignment, n);
    key[n] = 0;
    const runcfg_row *r = runcfg_row_find(key);
    if (!r)
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "--set: unknown key '%s' (see `qatscope train --help-config`)", key);
    return runcfg_field_parse(c, r, eq + 1, NULL, d);
}

int runcfg_validate(const runcfg *c, qs_diag *d)
{
    static const char *const required[] = {"model", "train_data", "out_dir"};
    for (int i = 0; i < 3; i++) {
        const runcfg_row *r = runcfg_row_find(required[i]);
        if (!((const char *)c + r->offset)[0])
            return diag_set(d, QS_EINVAL, NULL, -1, "%s: required, expected a non-empty path "
                            "(missing, or set to \"\")", required[i]);
    }
    if (c->lr_min > c->lr)
        return diag_set(d, QS_EINVAL, NULL, -1, "lr_min (%g) must not exceed lr (%g)", c->lr_min,
                        c->lr);
    if ((double)c->batch_size * (double)c->seq_len > 2147483647.0)
        return diag_set(d, QS_ERANGE, NULL, -1, "batch_size x seq_len = %.0f tokens is too large",
                        (double)c->batch_size * (double)c->seq_len);
    if (c->spike_rate > 0 && (!c->qat || !strcmp(c->ste, "masked")))
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "spike_rate > 0 needs qat=true (spikes go into the quantizers' inputs) "
                        "and ste=pass (the masked STE would not see them)");
    if (c->qat && !c->quant_modules[0])
        return diag_set(d, QS_EINVAL, NULL, -1, "quant_modules: empty while qat is true");
    if (c->eval_every > 0 && c->eval_tasks[0] && !c->eval_data_dir[0])
        return diag_set(d, QS_EINVAL, NULL, -1, "eval_data_dir: required when eval_every > 0 and "
                        "eval_tasks is not empty (the benchmark data root: arc/, hellaswag/, mmlu/ "
                        "below it), or set eval_tasks=[] for the val loss only");
    if (c->stop_on_forgetting && (c->eval_every == 0 || !c->eval_tasks[0]))
        return diag_set(d, QS_EINVAL, NULL, -1, "stop_on_forgetting: true needs eval_every > 0 "
                        "and eval_tasks (the forgetting alarm watches the in-loop benchmark "
                        "accuracy): it could never fire");
    if (c->eval_kl_reference == 1 && c->eval_every > 0 && c->eval_val_batches == 0)
        return diag_set(d, QS_EINVAL, NULL, -1, "eval_kl_reference: true needs eval_val_batches "
                        "> 0 (the KL is measured on the val batches)");
    return 0;
}

int runcfg_kl_reference(const runcfg *c)
{
    int on = c->eval_kl_reference < 0 ? c->qat : c->eval_kl_reference;
    return on && c->eval_every > 0 && c->eval_val_batches > 0;
}

char *runcfg_to_json(const runcfg *c)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    for (int i = 0; i < RUNCFG_N_ROWS; i++) {
        const runcfg_row *r = &runcfg_rows[i];
        const char *field = (const char *)c + r->offset;
        json_t *v = NULL;
        switch (r->key.type) {
        case RUNCFG_INT: v = json_integer(*(const long *)field); break;
        case RUNCFG_DOUBLE: v = json_real(*(const double *)field); break;
        case RUNCFG_BOOL:
            v = *(const int *)field < 0 ? json_string("auto") : json_boolean(*(const int *)field);
            break;
        case RUNCFG_LIST: {
            v = json_array();
            char buf[RUNCFG_STR_MAX];
            memcpy(buf, field, r->size);
            for (char *save, *t = strtok_r(buf, ",", &save); t && v; t = strtok_r(NULL, ",", &save))
                json_array_append_new(v, json_string(t));
            break;
        }
        default: v = json_string(field); break;
        }
        json_object_set_new(o, r->key.name, v);
    }
    /* 15 digits: every value a person types round-trips (resume reloads this text) */
    size_t flags = JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15);
    size_t n = json_dumpb(o, NULL, 0, flags);
    char *out = n ? qs_malloc(n + 2) : NULL;
    if (out) {
        json_dumpb(o, out, n, flags);
        out[n] = '\n';
        out[n + 1] = 0;
    }
    json_decref(o);
    return out;
}

static const char *const runcfg_resumable[] = {
    "steps", "ckpt_every", "stop_on_saturation", "stop_on_forgetting", "max_memory_gb",
    "plot_every", "zero", "grad_accum", "recompute"};

int runcfg_key_resumable(const char *name)
{
    for (size_t i = 0; i < sizeof runcfg_resumable / sizeof *runcfg_resumable; i++)
        if (!strcmp(name, runcfg_resumable[i]))
            return 1;
    return 0;
}

const char *runcfg_resumable_list(void)
{
    static char list[256];
    if (!list[0])
        for (size_t i = 0, k = 0; i < sizeof runcfg_resumable / sizeof *runcfg_resumable; i++)
            k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "",
                                  runcfg_resumable[i]);
    return list;
}
