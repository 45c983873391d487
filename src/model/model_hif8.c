/* model_hif8.c: reading HiF8 W8A8 checkpoints: the quantization_config of
 * config.json and the coded weights (format: include/qs/model_hif8.h; the
 * writer is model_hif8_export.c). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/hif8.h"
#include "qs/json.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_hif8.h"
#include "qs/safetensors.h"

/* MODEL_LIN_* order */
static const char *const hif8_module_suffix[MODEL_LIN_COUNT] = {
    "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
    "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj",
};

void model_hif8_module_name(char *buf, size_t buf_bytes, int layer, int module)
{
    snprintf(buf, buf_bytes, "model.layers.%d.%s", layer,
             module >= 0 && module < MODEL_LIN_COUNT ? hif8_module_suffix[module] : "?");
}

/* "model.layers.<L>.<suffix>" -> layer, module; 0 or -1.  L is written as
 * model_hif8_module_name writes it (decimal digits, no sign, space or leading
 * zero), so one module has one name. */
static int hif8_module_parse(const char *name, int n_layers, int *layer, int *module)
{
    static const char prefix[] = "model.layers.";
    if (strncmp(name, prefix, sizeof prefix - 1))
        return -1;
    const char *digits = name + sizeof prefix - 1, *end = digits;
    long l = 0;
    while (*end >= '0' && *end <= '9' && end - digits < 9)
        l = 10 * l + (*end++ - '0');
    if (end == digits || *end != '.' || (digits[0] == '0' && end - digits > 1) ||
        l >= n_layers)
        return -1;
    for (int k = 0; k < MODEL_LIN_COUNT; k++)
        if (!strcmp(end + 1, hif8_module_suffix[k])) {
            *layer = (int)l;
            *module = k;
            return 0;
        }
    return -1;
}

void model_hif8_free(model_hif8 *q)
{
    if (!q)
        return;
    for (int i = 0; q->packs && i < q->n; i++)
        matmul_wpack_destroy(q->packs[i]);
    qs_free(q->packs);
    qs_free(q->row_scale);
    qs_free(q->lin);
    qs_free(q->slot);
    qs_free(q);
}

static int hif8_config_modules(model_hif8 *q, const llama_config *c, const qs_json_at *qc,
                               qs_diag *d)
{
    qs_json_at mods, scales = {0};
    size_t n;
    const char *act;
    int rc;
    if ((rc = qs_json_arr(qc, "modules", &mods, &n, d)) ||
        (rc = qs_json_str(qc, "activation_scaling", &act, d)))
        return rc;
    if (n == 0 || n > (size_t)c->n_layers * MODEL_LIN_COUNT)
        return qs_json_fail(&mods, NULL, QS_EFORMAT, d, "expected 1 to %d module names, found %zu",
                            c->n_layers * MODEL_LIN_COUNT, n);
    if (strcmp(act, "static") && strcmp(act, "dynamic"))
        return qs_json_fail(qc, "activation_scaling", QS_EFORMAT, d,
                            "expected \"static\" or \"dynamic\", found \"%s\"", act);
    q->dynamic = !strcmp(act, "dynamic");
    if (!q->dynamic && (rc = qs_json_obj(qc, "input_scales", &scales, d)))
        return rc;
    q->lin = qs_calloc(n, sizeof *q->lin);
    q->packs = qs_calloc(n, sizeof *q->packs);
    q->slot = qs_malloc((size_t)c->n_layers * MODEL_LIN_COUNT * sizeof *q->slot);
    if (!q->lin || !q->packs || !q->slot)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    for (int k = 0; k < c->n_layers * MODEL_LIN_COUNT; k++)
        q->slot[k] = -1;
    for (size_t i = 0; i < n; i++) {
        qs_json_at e = qs_json_item(&mods, i);
        const char *name;
        model_hif8_linear *l = &q->lin[i];
        if ((rc = qs_json_str(&e, NULL, &name, d)))
            return rc;
        if (hif8_module_parse(name, c->n_layers, &l->layer, &l->module))
            return qs_json_fail(&e, NULL, QS_EFORMAT, d, "expected a Linear module of this "
                                "%d-block model such as \"model.layers.0.mlp.up_proj\", found "
                                "\"%.200s\"", c->n_layers, name);
        int *slot = &q->slot[l->layer * MODEL_LIN_COUNT + l->module];
        if (*slot >= 0)
            return qs_json_fail(&e, NULL, QS_EFORMAT, d, "\"%.200s\" listed twice", name);
        *slot = (int)i;
        q->n = (int)i + 1;
        if (q->dynamic)
            continue;
        double v;
        if ((rc = qs_json_num(&scales, name, &v, d)))
            return rc;
        if (!(v > 0) || v > 3.4e38)
            return qs_json_fail(&scales, name, QS_EFORMAT, d, "expected a positive finite fp32 "
                                "scale, found %g", v);
        if ((float)v != v)   /* the export writes fp32 values, which print and read back exactly */
            return qs_json_fail(&scales, name, QS_EFORMAT, d, "expected a value exact in fp32 "
                                "(as the export writes it), found %.17g", v);
        if (!isfinite(HIF8_MAX_FINITE / (float)v))
            return qs_json_fail(&scales, name, QS_EFORMAT, d, "scale %g is too small: 32768 / "
                                "scale overflows fp32", v);
        l->input_scale = (float)v;
    }
    if (q->dynamic && json_object_get(qc->v, "input_scales"))
        return qs_json_fail(qc, "input_scales", QS_EFORMAT, d, "input scales given, but "
                            "activation_scaling is \"dynamic\" (scales per row at run time): "
                            "expected \"static\", or no input_scales");
    if (!q->dynamic && json_object_size(scales.v) != n)
        return qs_json_fail(&scales, NULL, QS_EFORMAT, d, "expected one scale per module (%zu), "
                            "found %zu", n, json_object_size(scales.v));
    return 0;
}

/* "weight": {"dtype": "U8", "granularity": "tensor", "saturating": true}, the
 * one storage this reader decodes (absent: the same); anything else, e.g. scales
 * per channel, would be read as one scale per tensor. */
static int hif8_config_weight(const qs_json_at *qc, qs_diag *d)
{
    if (!json_object_get(qc->v, "weight"))
        return 0;
    qs_json_at w;
    const char *dtype, *gran;
    int sat, rc;
    if ((rc = qs_json_obj(qc, "weight", &w, d)) || (rc = qs_json_str(&w, "dtype", &dtype, d)) ||
        (rc = qs_json_str(&w, "granularity", &gran, d)) ||
        (rc = qs_json_bool(&w, "saturating", &sat, d)))
        return rc;
    if (strcmp(dtype, "U8"))
        return qs_json_fail(&w, "dtype", QS_EUNSUPPORTED, d, "\"%.60s\": only \"U8\" codes are read",
                            dtype);
    if (strcmp(gran, "tensor"))
        return qs_json_fail(&w, "granularity", QS_EUNSUPPORTED, d,
                            "\"%.60s\": only one scale per tensor (\"tensor\") is read", gran);
    if (!sat)
        return qs_json_fail(&w, "saturating", QS_EUNSUPPORTED, d,
                            "false: only codes of the saturating encoder are read");
    return 0;
}

int model_hif8_config_parse(const char *text, size_t len, const char *path,
                            const llama_config *c, model_hif8 **out, qs_diag *d)
{
    *out = NULL;
    json_t *root;
    int rc = qs_json_load_text(text, len, path, 1, QS_JSON_OBJECT, &root, d);
    if (rc)
        return rc;
    qs_json_at r = qs_json_root(root, path, -1), qc;
    const char *method, *format;
    long long version;
    if (!json_object_get(root, "quantization_config")) {
        json_decref(root);
        return 0;
    }
    model_hif8 *q = qs_calloc(1, sizeof *q);
    if (!q)
        rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    else if (!(rc = qs_json_obj(&r, "quantization_config", &qc, d)) &&
             !(rc = qs_json_str(&qc, "quant_method", &method, d))) {
        if (strcmp(method, "hif8"))
            rc = qs_json_fail(&qc, "quant_method", QS_EUNSUPPORTED, d,
                              "\"%.60s\": only \"hif8\" checkpoints are read", method);
        else if (!(rc = qs_json_i64(&qc, "version", 1, MODEL_HIF8_VERSION, &version, d)) &&
                 !(rc = qs_json_str(&qc, "format", &format, d))) {
            if (strcmp(format, "hifloat8"))   /* codes of another 8-bit format would decode wrong */
                rc = qs_json_fail(&qc, "format", QS_EUNSUPPORTED, d,
                                  "\"%.60s\": only \"hifloat8\" codes are read", format);
            else if (!(rc = hif8_config_weight(&qc, d)))
                rc = hif8_config_modules(q, c, &qc, d);
        }
    }
    json_decref(root);
    if (rc) {
        model_hif8_free(q);
        return rc;
    }
    *out = q;
    return 1;
}

int model_hif8_config_read(const char *dir, const llama_config *c, model_hif8 **out, qs_diag *d)
{
    *out = NULL;
    char path[4096], *text = NULL;
    size_t len = 0;
    if (fileio_join(path, sizeof path, dir, "config.json"))
        return diag_set(d, QS_ERANGE, dir, -1, "path too long");
    int rc = fileio_read_all(path, &text, &len, d);
    if (!rc)
        rc = model_hif8_config_parse(text, len, path, c, out, d);
    qs_free(text);
    return rc;
}

int model_hif8_check_stored(const safetensors_tensor *t, const safetensors_tensor *ws, int64_t O,
                            int64_t IN, const char *path, qs_diag *d)
{
    if (t->dtype != SAFETENSORS_U8 || t->ndim != 2 || t->shape[0] != O || t->shape[1] != IN)
        return diag_set(d, QS_ESHAPE, path, -1, "tensor '%s': expected U8 [%lld, %lld] HiF8 "
                        "codes (quantization_config lists it), found %s with %d dims",
                        t->name, (long long)O, (long long)IN, safetensors_dtype_name(t->dtype),
                        t->ndim);
    if (!ws)
        return diag_set(d, QS_ENOTFOUND, path, -1, "tensor '%s_scale' (F32 [1]) is missing",
                        t->name);
    /* exactly the exporter's [1]: a [] or [1, 1] scale holds one value too, but is
     * no file this format writes (another tool's layout, read as ours by luck) */
    if (ws->dtype != SAFETENSORS_F32 || ws->ndim != 1 || ws->shape[0] != 1) {
        char sh[160];
        safetensors_shape_str(ws, sh, sizeof sh);
        return diag_set(d, QS_ESHAPE, path, -1, "tensor '%s': expected F32 [1] (one scale per "
                        "tensor), found %s %s", ws->name, safetensors_dtype_name(ws->dtype), sh);
    }
    return 0;
}

int model_hif8_load_weight(model_hif8 *q, int layer, int module, const safetensors_tensor *t,
                           const safetensors_tensor *ws, int64_t O, int64_t IN,
                           int precision, const char *path, qs_diag *d)
{
    int i = q->slot[layer * MODEL_LIN_COUNT + module];
    int rc = model_hif8_check_stored(t, ws, O, IN, path, d);
    if (rc)
        return rc;
    float scale;
    if (safetensors_tensor_to_f32(ws, &scale, path, d) || !(scale > 0.0f))
        return diag_set(d, QS_EFORMAT, path, -1, "tensor '%s': expected one positive finite F32 "
                        "scale", ws->name);
    /* a scale so small that the weights it stands for, or the dequantization
     * factor of a static input, overflow fp32 (the forward would give Inf/NaN) */
    const float sx = q->lin[i].input_scale;   /* 0: dynamic */
    const int range_ok = isfinite(HIF8_MAX_FINITE / scale);
    if (!range_ok || (sx > 0.0f && !isfinite(hif8_dequant_factor(sx, scale))))
        return diag_set(d, QS_ERANGE, path, -1, "tensor '%s': scale %g is too small: %s overflows "
                        "fp32", ws->name, scale,
                        range_ok ? "1 / (input scale x scale)" : "32768 / scale");
    const size_t n = (size_t)O * (size_t)IN;
    for (size_t j = 0; j < n; j++) {
        uint8_t c = t->data[j];
        if (c == HIF8_CODE_NAN || c == HIF8_CODE_POS_INF || c == HIF8_CODE_NEG_INF)
            return diag_set(d, QS_EFORMAT, path, -1, "tensor '%s': element %zu is code 0x%02X "
                            "(%s), expected a finite saturating code", t->name, j, c,
                            c == HIF8_CODE_NAN ? "NaN" : "Inf");
    }
    if (O > INT32_MAX || IN > INT32_MAX ||
        !(q->packs[i] = matmul_wpack_create_hif8(t->data, (int)IN, (int)O, precision)))
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory packing '%s'", t->name);
    q->lin[i].weight_scale = scale;
    return 0;
}

int model_hif8_check_scales(const model_hif8 *q, const safetensors_dir *sd, int n_layers,
                            qs_diag *d)
{
    static const char suffix[] = ".weight_scale";
    const size_t ns = sizeof suffix - 1;
    for (int f = 0; f < sd->n_files; f++)
        for (int i = 0; i < sd->files[f].n_tensors; i++) {
            const char *name = sd->files[f].tensors[i].name;
            size_t len = strlen(name);
            if (len <= ns || strcmp(name + len - ns, suffix))
                continue;
            char mod[256];
            int layer, module;
            int listed = len - ns < sizeof mod &&
                         snprintf(mod, sizeof mod, "%.*s", (int)(len - ns), name) > 0 &&
                         !hif8_module_parse(mod, n_layers, &layer, &module) &&
                         q->slot[layer * MODEL_LIN_COUNT + module] >= 0;
            if (!listed)
                return diag_set(d, QS_EFORMAT, sd->files[f].path, -1,
                                "tensor '%.200s': a HiF8 weight scale, but config.json's "
                                "quantization_config.modules does not list '%.*s'", name,
                                (int)(len - ns > 200 ? 200 : len - ns), name);
        }
    return 0;
}

void model_hif8_weight_values(const model_hif8 *q, int i, float *values)
{
    matmul_wpack_hif8_read(q->packs[i], NULL, values);
}

size_t model_hif8_bytes(const model_hif8 *q)
{
    size_t b = 0;
    for (int i = 0; q && q->packs && i < q->n; i++)
        b += matmul_wpack_bytes(q->packs[i]);
    return b;
}

/* Linear i's pack for the precision of the forward: the loader packs for its
 * precision; another precision re-packs the same codes (read back). */
static int model_hif8_pack_for(model_hif8 *q, int i, int precision, int IN, int O)
{
    if (matmul_wpack_precision(q->packs[i]) == precision)
        return 0;
    uint8_t *codes = qs_malloc((size_t)O * IN);
    if (!codes)
        return QS_ENOMEM;
    matmul_wpack_hif8_read(q->packs[i], codes, NULL);
    matmul_wpack *pk = matmul_wpack_create_hif8(codes, IN, O, precision);
    qs_free(codes);
    if (!pk)
        return QS_ENOMEM;
    matmul_wpack_destroy(q->packs[i]);
    q->packs[i] = pk;
    return 0;
}

int model_hif8_planned(const llama_model *m, int layer, int module)
{
    return m->hif8 && m->hif8->slot[layer * MODEL_LIN_COUNT + module] >= 0;
}

/* y[c] = y[c] * f (+ b[c]): one multiply (and one add), as written in C
 * (no contraction in ISO C mode), vectorised (the branch out of the loop). */
static void model_hif8_row_finish(float *restrict y, const float *restrict b, float f, int n)
{
    if (b) {
#ifdef _OPENMP
#pragma omp simd
#endif
        for (int c = 0; c < n; c++)
            y[c] = y[c] * f + b[c];
    } else {
#ifdef _OPENMP
#pragma omp simd
#endif
        for (int c = 0; c < n; c++)
            y[c] = y[c] * f;
    }
}

void model_linear_rows_finish(float *out, const float *row_scale, const float *bias, int N, int O)
{
    if ((size_t)N * O > 65536) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
        for (int r = 0; r < N; r++)
            model_hif8_row_finish(out + (size_t)r * O, bias, row_scale[r], O);
    } else {
        /* serial: no OpenMP region at all (an if(0) region still costs 1-3 us) */
        for (int r = 0; r < N; r++)
            model_hif8_row_finish(out + (size_t)r * O, bias, row_scale[r], O);
    }
}

static size_t model_hif8_encode_row(float input_scale, const float *x, float *xq, float *row_scale,
                                    int r, int IN)
{
    const float *xr = x + (size_t)r * IN;
    const float s = input_scale > 0.0f ? input_scale : hif8_row_scale(xr, (size_t)IN);
    row_scale[r] = s;
    return hif8_scaled_values(xr, xq + (size_t)r * IN, (size_t)IN, s);
}

/* x[N, IN] encoded into xq with the input scale (> 0), or a scale per row
 * (hif8_row_scale) when there is none; each row's scale s_x in q->row_scale.
 * Rows are independent, so they are shared out over the threads (a scoring
 * batch's 2k rows: 5% of a bf16-amx forward on one thread). */
static int model_hif8_encode(model_hif8 *q, float input_scale, const float *x, float *xq, int N,
                             int IN)
{
    if ((size_t)N > q->row_cap) {
        float *rs = qs_realloc(q->row_scale, (size_t)N * sizeof *rs);
        if (!rs)
            return QS_ENOMEM;
        q->row_scale = rs;
        q->row_cap = (size_t)N;
    }
    size_t bad = 0;
    float *row_scale = q->row_scale;
    if ((size_t)N * IN > 65536) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) reduction(+ : bad)
#endif
        for (int r = 0; r < N; r++)
            bad += model_hif8_encode_row(input_scale, x, xq, row_scale, r, IN);
    } else {
        /* serial: no OpenMP region at all (an if(0) region still costs 1-3 us) */
        for (int r = 0; r < N; r++)
            bad += model_hif8_encode_row(input_scale, x, xq, row_scale, r, IN);
    }
    return bad ? QS_ENAN : 0;
}

int model_hif8_forward(llama_model *m, int layer, int module, float *out, const float *x,
                       const float *bias, int N, int IN, int O, float *xq)
{
    model_hif8 *q = m->hif8;
    const int i = q->slot[layer * MODEL_LIN_COUNT + module];
    const model_hif8_linear *l = &q->lin[i];
    int rc = model_hif8_encode(q, l->input_scale, x, xq, N, IN);
    if (rc)
        return rc;
    for (int r = 0; r < N; r++)   /* s_x -> the row's dequantization factor */
        q->row_scale[r] = hif8_dequant_factor(q->row_scale[r], l->weight_scale);
    if ((rc = model_hif8_pack_for(q, i, m->precision, IN, O)))
        return rc;
    matmul_forward_packed_ws(out, xq, q->packs[i], NULL, N, m->ws);
    model_linear_rows_finish(out, q->row_scale, bias, N, O);
    return 0;
}

/* The finishing of model_hif8_forward_group's outputs on one block, then the
 * caller's epilogue there (while the block is in cache). */
typedef struct model_hif8_group_ep {
    int n, O;
    float *const *out;
    const float *const *bias;
    const float *sx;   /* [N] each row's s_x */
    float sw[MODEL_HIF8_GROUP_MAX];
    const matmul_epilogue *inner;
} model_hif8_group_ep;

static void model_hif8_group_block(void *ctx, int row0, int rows, int col0, int cols)
{
    const model_hif8_group_ep *g = ctx;
    for (int i = 0; i < g->n; i++) {
        const float *b = g->bias && g->bias[i] ? g->bias[i] + col0 : NULL;
        for (int r = row0; r < row0 + rows; r++)   /* as model_linear_rows_finish */
            model_hif8_row_finish(g->out[i] + (size_t)r * g->O + col0, b,
                                  hif8_dequant_factor(g->sx[r], g->sw[i]), cols);
    }
    if (g->inner)
        g->inner->fn(g->inner->ctx, row0, rows, col0, cols);
}

int model_hif8_forward_group(llama_model *m, int layer, int n, const int *modules,
                             float *const *out, const float *x, const float *const *bias, int N,
                             int IN, const int *O, float *xq, const matmul_epilogue *ep)
{
    model_hif8 *q = m->hif8;
    int slot[MODEL_HIF8_GROUP_MAX];
    if (n < 2 || n > MODEL_HIF8_GROUP_MAX)
        return 1;
    for (int i = 0; i < n; i++) {
        slot[i] = q->slot[layer * MODEL_LIN_COUNT + modules[i]];
        if (slot[i] < 0 || O[i] != O[0])
            return 1;
        const float s0 = q->lin[slot[0]].input_scale, si = q->lin[slot[i]].input_scale;
        if (!(si == s0 || (si <= 0.0f && s0 <= 0.0f)))
            return 1;   /* not one encoding of x */
    }
    int rc = model_hif8_encode(q, q->lin[slot[0]].input_scale, x, xq, N, IN);
    if (rc)
        return rc;
    matmul_wpack *pk[MODEL_HIF8_GROUP_MAX];
    model_hif8_group_ep g = {n, O[0], out, bias, q->row_scale, {0}, ep && ep->fn ? ep : NULL};
    for (int i = 0; i < n; i++) {
        if ((rc = model_hif8_pack_for(q, slot[i], m->precision, IN, O[i])))
            return rc;
        pk[i] = q->packs[slot[i]];
        g.sw[i] = q->lin[slot[i]].weight_scale;
    }
    matmul_epilogue wrap = {model_hif8_group_block, &g};
    matmul_forward_packed_multi_ws(out, xq, pk, NULL, n, N, m->ws, &wrap);
    return 0;
}
