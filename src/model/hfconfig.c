/* hfconfig.c: config.json -> llama_config (see include/qs/hfconfig.h).
 *
 * Every field is type- and range-checked; a wrong type names the key
 * ("config.json: 'num_attention_heads': expected a positive integer, found string").
 * Missing optional keys take Hugging Face's defaults for that architecture.
 */
#include "qs/hfconfig.h"

#include <jansson.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/mem.h"

static const struct {
    const char *arch, *model_type;
    int id;
} hfc_archs[] = {
    {"LlamaForCausalLM", "llama", LLAMA_ARCH_LLAMA},
    {"MistralForCausalLM", "mistral", LLAMA_ARCH_MISTRAL},
    {"Qwen2ForCausalLM", "qwen2", LLAMA_ARCH_QWEN2},
    {"PanguEmbeddedForCausalLM", "PanguEmbedded", LLAMA_ARCH_PANGU},
};

static const char *hfc_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    default: return "null";
    }
}

/* Integer key in [min, max]; absent (or null) -> def, or an error when def < min. */
static int hfc_int(const json_t *o, const char *key, long min, long max, long def, int *out,
                   const char *path, qs_diag *d)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (def < min)
            return diag_set(d, QS_EFORMAT, path, -1, "missing key '%s'", key);
        *out = (int)def;
        return 0;
    }
    if (!json_is_integer(v))
        return diag_set(d, QS_EFORMAT, path, -1, "'%s': expected an integer, found %s", key,
                        hfc_type_name(v));
    json_int_t x = json_integer_value(v);
    if (x < min || x > max)
        return diag_set(d, QS_ERANGE, path, -1, "'%s': expected an integer in [%ld, %ld], found %lld",
                        key, min, max, (long long)x);
    *out = (int)x;
    return 0;
}

static int hfc_num(const json_t *o, const char *key, double min, double def, double *out,
                   const char *path, qs_diag *d)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_number(v))
        return diag_set(d, QS_EFORMAT, path, -1, "'%s': expected a number, found %s", key,
                        hfc_type_name(v));
    double x = json_number_value(v);
    if (!(x > min))
        return diag_set(d, QS_ERANGE, path, -1, "'%s': expected a number > %g, found %g", key,
                        min, x);
    *out = x;
    return 0;
}

static int hfc_bool(const json_t *o, const char *key, int def, int *out, const char *path,
                    qs_diag *d)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v))
        return diag_set(d, QS_EFORMAT, path, -1, "'%s': expected true or false, found %s", key,
                        hfc_type_name(v));
    *out = json_is_true(v);
    return 0;
}

static int hfc_arch(llama_config *c, const json_t *root, const char *path, qs_diag *d)
{
    const json_t *archs = json_object_get(root, "architectures");
    const char *name = NULL;
    int by_arch = 1;
    if (json_is_array(archs) && json_array_size(archs) > 0)
        name = json_string_value(json_array_get(archs, 0));
    if (!name) {
        name = json_string_value(json_object_get(root, "model_type"));
        by_arch = 0;
    }
    if (!name)
        return diag_set(d, QS_EFORMAT, path, -1, "no 'architectures' or 'model_type' key");
    snprintf(c->arch_name, sizeof c->arch_name, "%s", name);
    for (size_t i = 0; i < sizeof hfc_archs / sizeof hfc_archs[0]; i++)
        if (!strcmp(name, by_arch ? hfc_archs[i].arch : hfc_archs[i].model_type)) {
            c->arch = hfc_archs[i].id;
            return 0;
        }
    return diag_set(d, QS_EUNSUPPORTED, path, -1,
                    "architecture '%s' is not supported (supported: LlamaForCausalLM, "
                    "MistralForCausalLM, Qwen2ForCausalLM, PanguEmbeddedForCausalLM)",
                    name);
}

static int hfc_rope_scaling(llama_config *c, const json_t *root, const char *path, qs_diag *d)
{
    rope_scaling *rs = &c->rope_scale;
    memset(rs, 0, sizeof *rs);
    const json_t *o = json_object_get(root, "rope_scaling");
    if (!o || json_is_null(o))
        return 0;
    if (!json_is_object(o))
        return diag_set(d, QS_EFORMAT, path, -1, "'rope_scaling': expected an object or null");
    const char *type = json_string_value(json_object_get(o, "rope_type"));
    if (!type)
        type = json_string_value(json_object_get(o, "type"));
    if (!type)
        return diag_set(d, QS_EFORMAT, path, -1, "'rope_scaling': missing 'rope_type'");
    if (!strcmp(type, "default"))
        return 0;
    int rc = hfc_num(o, "factor", 0.0, -1.0, &rs->factor, path, d);
    if (rc)
        return rc;
    if (rs->factor <= 0)
        return diag_set(d, QS_EFORMAT, path, -1, "'rope_scaling': missing 'factor'");
    if (!strcmp(type, "linear")) {
        rs->type = ROPE_SCALING_LINEAR;
        return 0;
    }
    if (strcmp(type, "llama3"))
        return diag_set(d, QS_EUNSUPPORTED, path, -1,
                        "'rope_scaling': type '%s' is not supported (supported: linear, llama3)",
                        type);
    rs->type = ROPE_SCALING_LLAMA3;
    if ((rc = hfc_num(o, "low_freq_factor", 0.0, 1.0, &rs->low_freq_factor, path, d)) ||
        (rc = hfc_num(o, "high_freq_factor", 0.0, 4.0, &rs->high_freq_factor, path, d)) ||
        (rc = hfc_int(o, "original_max_position_embeddings", 1, 1 << 24, 8192,
                      &rs->original_max_position, path, d)))
        return rc;
    if (rs->high_freq_factor <= rs->low_freq_factor)
        return diag_set(d, QS_ERANGE, path, -1,
                        "'rope_scaling': high_freq_factor %g must exceed low_freq_factor %g",
                        rs->high_freq_factor, rs->low_freq_factor);
    return 0;
}

static int hfc_special_ids(llama_config *c, const json_t *root, const char *path, qs_diag *d)
{
    const json_t *b = json_object_get(root, "bos_token_id");
    c->bos_id = -1;
    if (b && !json_is_null(b)) {
        int rc = hfc_int(root, "bos_token_id", 0, 1 << 30, 0, &c->bos_id, path, d);
        if (rc)
            return rc;
    }
    const json_t *e = json_object_get(root, "eos_token_id");
    c->n_eos = 0;
    if (json_is_integer(e)) {
        c->eos_ids[c->n_eos++] = (int)json_integer_value(e);
    } else if (json_is_array(e)) {
        for (size_t i = 0; i < json_array_size(e) && c->n_eos < LLAMA_MAX_EOS; i++) {
            if (!json_is_integer(json_array_get(e, i)))
                return diag_set(d, QS_EFORMAT, path, -1, "'eos_token_id': expected integers");
            c->eos_ids[c->n_eos++] = (int)json_integer_value(json_array_get(e, i));
        }
    } else if (e && !json_is_null(e)) {
        return diag_set(d, QS_EFORMAT, path, -1, "'eos_token_id': expected an integer or a list");
    }
    return 0;
}

int hfconfig_parse(llama_config *c, const char *json_text, size_t len, const char *path,
                   qs_diag *d)
{
    memset(c, 0, sizeof *c);
    json_error_t je;
    json_t *root = json_loadb(json_text, len, 0, &je);
    if (!root)
        return diag_set(d, QS_EFORMAT, path, je.line, "invalid JSON: %s", je.text);
    int rc = 0;
    if (!json_is_object(root)) {
        rc = diag_set(d, QS_EFORMAT, path, -1, "expected a JSON object");
        goto done;
    }
    const long big = 1L << 24;
    if ((rc = hfc_arch(c, root, path, d)) ||
        (rc = hfc_int(root, "hidden_size", 1, big, -1, &c->dim, path, d)) ||
        (rc = hfc_int(root, "intermediate_size", 1, big, -1, &c->hidden_dim, path, d)) ||
        (rc = hfc_int(root, "num_hidden_layers", 1, 4096, -1, &c->n_layers, path, d)) ||
        (rc = hfc_int(root, "num_attention_heads", 1, 4096, -1, &c->n_heads, path, d)) ||
        (rc = hfc_int(root, "num_key_value_heads", 1, 4096, c->n_heads, &c->n_kv_heads, path,
                      d)) ||
        (rc = hfc_int(root, "vocab_size", 1, 1L << 30, -1, &c->vocab_size, path, d)) ||
        (rc = hfc_int(root, "max_position_embeddings", 1, big, 2048, &c->max_pos, path, d)) ||
        (rc = hfc_int(root, "head_dim", 2, 4096, c->dim / c->n_heads, &c->head_dim, path, d)))
        goto done;
    double eps = 1e-6, theta = 10000.0;
    if ((rc = hfc_num(root, "rms_norm_eps", 0.0, 1e-6, &eps, path, d)) ||
        (rc = hfc_num(root, "rope_theta", 1.0, 10000.0, &theta, path, d)) ||
        (rc = hfc_rope_scaling(c, root, path, d)) || (rc = hfc_special_ids(c, root, path, d)))
        goto done;
    c->norm_eps = (float)eps;
    c->rope_theta = theta;
    if (c->n_heads % c->n_kv_heads || c->head_dim % 2) {
        rc = diag_set(d, QS_ERANGE, path, -1,
                      "num_attention_heads %d must be a multiple of num_key_value_heads %d and "
                      "head_dim %d even",
                      c->n_heads, c->n_kv_heads, c->head_dim);
        goto done;
    }
    /* size sanity before anyone multiplies these in size_t: <= 2^38 parameters */
    double qd = (double)c->n_heads * c->head_dim, kd = (double)c->n_kv_heads * c->head_dim;
    double approx = 2.0 * c->vocab_size * c->dim +
                    (double)c->n_layers * (2.0 * c->dim * qd + 2.0 * c->dim * kd +
                                           3.0 * c->dim * c->hidden_dim);
    if (approx > 274877906944.0) {
        rc = diag_set(d, QS_ERANGE, path, -1, "model of ~%.3g parameters is beyond this engine",
                      approx);
        goto done;
    }
    const char *act = json_string_value(json_object_get(root, "hidden_act"));
    if (act && strcmp(act, "silu")) {
        rc = diag_set(d, QS_EUNSUPPORTED, path, -1,
                      "'hidden_act': '%s' is not supported (only silu: SwiGLU)", act);
        goto done;
    }
    int mlp_bias = 0, attn_bias = 0, pangu_bias = 0, use_sw = 0;
    if ((rc = hfc_bool(root, "tie_word_embeddings", c->arch == LLAMA_ARCH_PANGU ? 0 : 1,
                       &c->tied, path, d)) ||
        (rc = hfc_bool(root, "mlp_bias", 0, &mlp_bias, path, d)) ||
        (rc = hfc_bool(root, "attention_bias", 0, &attn_bias, path, d)) ||
        (rc = hfc_bool(root, "bias", 0, &pangu_bias, path, d)) ||
        (rc = hfc_bool(root, "use_sliding_window", 0, &use_sw, path, d)))
        goto done;
    /* HF's PretrainedConfig default is tie_word_embeddings=True; Llama/Mistral/Qwen2
     * configs written by transformers always state it, so the default rarely matters. */
    if (mlp_bias) {
        rc = diag_set(d, QS_EUNSUPPORTED, path, -1, "'mlp_bias': true is not supported");
        goto done;
    }
    switch (c->arch) {
    case LLAMA_ARCH_QWEN2:
        c->qkv_bias = 1;
        if (use_sw) {
            rc = diag_set(d, QS_EUNSUPPORTED, path, -1,
                          "'use_sliding_window': true is not supported for Qwen2");
            goto done;
        }
        break;
    case LLAMA_ARCH_PANGU: c->qkv_bias = c->o_bias = pangu_bias; break;
    default: c->qkv_bias = c->o_bias = attn_bias; break;
    }
    if (c->arch == LLAMA_ARCH_MISTRAL &&
        (rc = hfc_int(root, "sliding_window", 1, 1L << 30, 0, &c->sliding_window, path, d)))
        goto done;
    const char *td = json_string_value(json_object_get(root, "torch_dtype"));
    snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s", td ? td : "");
done:
    json_decref(root);
    return rc;
}

int hfconfig_load(llama_config *c, const char *dir_or_file, qs_diag *d)
{
    char path[4096];
    if (fileio_is_dir(dir_or_file)) {
        if (fileio_join(path, sizeof path, dir_or_file, "config.json"))
            return diag_set(d, QS_ERANGE, dir_or_file, -1, "path too long");
    } else if (fileio_exists(dir_or_file)) {
        snprintf(path, sizeof path, "%s", dir_or_file);
    } else {
        return diag_set(d, QS_ENOTFOUND, dir_or_file, -1,
                        "no such model directory (expected config.json and model.safetensors)");
    }
    char *text = NULL;
    size_t n = 0;
    int rc = fileio_read_all(path, &text, &n, d);
    if (rc)
        return rc;
    rc = hfconfig_parse(c, text, n, path, d);
    qs_free(text);
    return rc;
}

int hfconfig_max_context(const llama_config *c)
{
    if (c->sliding_window > 0 && c->sliding_window < c->max_pos)
        return c->sliding_window;
    return c->max_pos;
}
