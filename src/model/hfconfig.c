/* hfconfig.c: config.json -> llama_config (see include/qs/hfconfig.h).
 *
 * Every field is type- and range-checked; a wrong type names the key
 * ("config.json: $.num_attention_heads: expected integer, found string").
 * Missing optional keys take Hugging Face's defaults for that architecture.
 */
#include "qs/hfconfig.h"

#include <jansson.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/json.h"
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

/* optional number > min: absent or null -> def */
static int hfc_num(const qs_json_at *o, const char *key, double min, double def, double *out,
                   qs_diag *d)
{
    int rc = qs_json_num_or(o, key, def, out, d);
    if (!rc && !(*out > min))
        rc = qs_json_fail(o, key, QS_ERANGE, d, "expected number > %g, found %g", min, *out);
    return rc;
}

static int hfc_arch(llama_config *c, const qs_json_at *r, const char *path, qs_diag *d)
{
    const json_t *archs = qs_json_key(r, "architectures").v;
    const json_t *type = qs_json_key(r, "model_type").v;
    const char *name = NULL;
    int by_arch = 1;
    if (archs && !json_is_null(archs)) {   /* present: a list of class names */
        if (!json_is_array(archs))
            return qs_json_fail(r, "architectures", QS_EFORMAT, d,
                                "expected an array of strings, found %s", qs_json_type_name(archs));
        for (size_t i = 0; i < json_array_size(archs); i++)
            if (!json_is_string(json_array_get(archs, i)))
                return qs_json_fail(r, "architectures", QS_EFORMAT, d,
                                    "expected an array of strings, found %s at index %zu",
                                    qs_json_type_name(json_array_get(archs, i)), i);
        if (json_array_size(archs) > 0)
            name = json_string_value(json_array_get(archs, 0));
    }
    if (type && !json_is_null(type) && !json_is_string(type))
        return qs_json_fail(r, "model_type", QS_EFORMAT, d, "expected a string, found %s",
                            qs_json_type_name(type));
    if (!name) {
        name = json_string_value(type);
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

static int hfc_rope_scaling(llama_config *c, const qs_json_at *r, qs_diag *d)
{
    rope_scaling *rs = &c->rope_scale;
    memset(rs, 0, sizeof *rs);
    qs_json_at o = qs_json_key(r, "rope_scaling");
    if (!o.v || json_is_null(o.v))
        return 0;
    const char *type = NULL;
    int rc = qs_json_obj(r, "rope_scaling", &o, d);
    if (!rc && !(rc = qs_json_str_or(&o, "rope_type", NULL, &type, d)) && !type)
        rc = qs_json_str(&o, "type", &type, d);
    if (rc)
        return rc;
    if (!strcmp(type, "default"))
        return 0;
    if ((rc = qs_json_num(&o, "factor", &rs->factor, d)))
        return rc;
    if (!(rs->factor > 0))
        return qs_json_fail(&o, "factor", QS_ERANGE, d, "expected number > 0, found %g",
                            rs->factor);
    if (!strcmp(type, "linear")) {
        rs->type = ROPE_SCALING_LINEAR;
        return 0;
    }
    if (strcmp(type, "llama3"))
        return qs_json_fail(&o, NULL, QS_EUNSUPPORTED, d,
                            "type '%s' is not supported (supported: linear, llama3)", type);
    rs->type = ROPE_SCALING_LLAMA3;
    /* required, as Hugging Face requires them (a filled-in default would give
     * frequencies no other implementation computes for this config) */
    static const char *const keys[] = {"low_freq_factor", "high_freq_factor",
                                       "original_max_position_embeddings"};
    for (int k = 0; k < 3; k++)
        if (!json_object_get(o.v, keys[k]))
            return qs_json_fail(&o, keys[k], QS_EFORMAT, d, "required by rope_type llama3");
    if ((rc = hfc_num(&o, "low_freq_factor", 0.0, 1.0, &rs->low_freq_factor, d)) ||
        (rc = hfc_num(&o, "high_freq_factor", 0.0, 4.0, &rs->high_freq_factor, d)) ||
        (rc = qs_json_int_or(&o, "original_max_position_embeddings", 1, 1 << 24, 8192,
                             &rs->original_max_position, d)))
        return rc;
    if (rs->high_freq_factor <= rs->low_freq_factor)
        return qs_json_fail(&o, NULL, QS_ERANGE, d,
                            "high_freq_factor %g must exceed low_freq_factor %g",
                            rs->high_freq_factor, rs->low_freq_factor);
    return 0;
}

static int hfc_special_ids(llama_config *c, const qs_json_at *r, qs_diag *d)
{
    int rc = qs_json_int_or(r, "bos_token_id", 0, 1 << 30, -1, &c->bos_id, d);
    if (rc)
        return rc;
    qs_json_at e = qs_json_key(r, "eos_token_id");
    c->n_eos = 0;
    if (json_is_integer(e.v)) {
        c->eos_ids[c->n_eos++] = (int)json_integer_value(e.v);
    } else if (json_is_array(e.v)) {
        for (size_t i = 0; i < json_array_size(e.v) && c->n_eos < LLAMA_MAX_EOS; i++) {
            qs_json_at id = qs_json_item(&e, i);
            if (!json_is_integer(id.v))
                return qs_json_fail(&id, NULL, QS_EFORMAT, d, "expected integer, found %s",
                                    qs_json_type_name(id.v));
            c->eos_ids[c->n_eos++] = (int)json_integer_value(id.v);
        }
    } else if (e.v && !json_is_null(e.v)) {
        return qs_json_fail(&e, NULL, QS_EFORMAT, d, "expected integer or array, found %s",
                            qs_json_type_name(e.v));
    }
    return 0;
}

int hfconfig_parse(llama_config *c, const char *json_text, size_t len, const char *path,
                   qs_diag *d)
{
    memset(c, 0, sizeof *c);
    json_t *root;
    int rc = qs_json_load_text(json_text, len, path, 1, QS_JSON_OBJECT, &root, d);
    if (rc)
        return rc;
    qs_json_at r = qs_json_root(root, path, -1);
    const long big = 1L << 24;
    if ((rc = hfc_arch(c, &r, path, d)) ||
        (rc = qs_json_int(&r, "hidden_size", 1, big, &c->dim, d)) ||
        (rc = qs_json_int(&r, "intermediate_size", 1, big, &c->hidden_dim, d)) ||
        (rc = qs_json_int(&r, "num_hidden_layers", 1, 4096, &c->n_layers, d)) ||
        (rc = qs_json_int(&r, "num_attention_heads", 1, 4096, &c->n_heads, d)) ||
        (rc = qs_json_int_or(&r, "num_key_value_heads", 1, 4096, c->n_heads, &c->n_kv_heads, d)) ||
        (rc = qs_json_int(&r, "vocab_size", 1, 1L << 30, &c->vocab_size, d)) ||
        (rc = qs_json_int_or(&r, "max_position_embeddings", 1, big, 2048, &c->max_pos, d)) ||
        (rc = qs_json_int_or(&r, "head_dim", 2, 4096, c->dim / c->n_heads, &c->head_dim, d)))
        goto done;
    if (c->head_dim < 2) {   /* the default, hidden_size / num_attention_heads, is not checked */
        rc = qs_json_fail(&r, "hidden_size", QS_ERANGE, d,
                          "%d / num_attention_heads %d gives head_dim %d, expected >= 2 (or set "
                          "head_dim)", c->dim, c->n_heads, c->head_dim);
        goto done;
    }
    double eps = 1e-6, theta = 10000.0;
    if ((rc = hfc_num(&r, "rms_norm_eps", 0.0, 1e-6, &eps, d)) ||
        (rc = hfc_num(&r, "rope_theta", 1.0, 10000.0, &theta, d)) ||
        (rc = hfc_rope_scaling(c, &r, d)) || (rc = hfc_special_ids(c, &r, d)))
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
    const char *act, *td;
    if ((rc = qs_json_str_or(&r, "hidden_act", NULL, &act, d)) ||
        (rc = qs_json_str_or(&r, "torch_dtype", "", &td, d)))
        goto done;
    if (act && strcmp(act, "silu")) {
        rc = qs_json_fail(&r, "hidden_act", QS_EUNSUPPORTED, d,
                          "'%s' is not supported (only silu: SwiGLU)", act);
        goto done;
    }
    int mlp_bias = 0, attn_bias = 0, pangu_bias = 0, use_sw = 0;
    if ((rc = qs_json_bool_or(&r, "tie_word_embeddings", c->arch == LLAMA_ARCH_PANGU ? 0 : 1,
                              &c->tied, d)) ||
        (rc = qs_json_bool_or(&r, "mlp_bias", 0, &mlp_bias, d)) ||
        (rc = qs_json_bool_or(&r, "attention_bias", 0, &attn_bias, d)) ||
        (rc = qs_json_bool_or(&r, "bias", 0, &pangu_bias, d)) ||
        (rc = qs_json_bool_or(&r, "use_sliding_window", 0, &use_sw, d)))
        goto done;
    /* HF's PretrainedConfig default is tie_word_embeddings=True; Llama/Mistral/Qwen2
     * configs written by transformers always state it, so the default rarely matters. */
    if (mlp_bias) {
        rc = qs_json_fail(&r, "mlp_bias", QS_EUNSUPPORTED, d, "true is not supported");
        goto done;
    }
    switch (c->arch) {
    case LLAMA_ARCH_QWEN2:
        c->qkv_bias = 1;
        if (use_sw) {
            rc = qs_json_fail(&r, "use_sliding_window", QS_EUNSUPPORTED, d,
                              "true is not supported for Qwen2");
            goto done;
        }
        break;
    case LLAMA_ARCH_PANGU: c->qkv_bias = c->o_bias = pangu_bias; break;
    default: c->qkv_bias = c->o_bias = attn_bias; break;
    }
    if (c->arch == LLAMA_ARCH_MISTRAL &&
        (rc = qs_json_int_or(&r, "sliding_window", 1, 1L << 30, 0, &c->sliding_window, d)))
        goto done;
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
    if (!fileio_is_dir(dir_or_file)) {   /* a file given as the model: its config.json? */
        FILE *f = fopen(path, "rb");
        int ch = ' ';
        while (f && (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'))
            ch = fgetc(f);
        if (f)
            fclose(f);
        if (f && ch != '{')   /* a weights file, a text: not read whole */
            return diag_set(d, QS_EINVAL, dir_or_file, -1,
                            "expected a model directory (config.json and *.safetensors); this "
                            "is a file, and not a JSON config");
    }
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
