/* model.c: the parameter size table, the one fp32 block, named views, loading
 * from an HF directory, saving, and the memory formula (see include/qs/model.h).
 *
 * Checklist: a new tensor kind = a row in model_kinds[] + a case in
 * model_weights_point() + a line in tools/gen_fixtures.py's writer.
 */
#include "qs/model.h"
#include "qs/model_acts.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_impl.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model_hif8.h"
#include "qs/rng.h"
#include "qs/safetensors.h"

/* Per-layer tensors in HF order.  rows/cols: 'C' dim, 'F' hidden, 'Q' H*hd,
 * 'K' KVH*hd, 0 = 1-D. */
static const struct {
    int kind;
    const char *suffix;
    char rows, cols;
    int need;   /* 0 always, 1 needs qkv_bias, 2 needs o_bias */
} model_kinds[] = {
    {MK_ATTN_NORM, "input_layernorm.weight", 'C', 0, 0},
    {MK_WQ, "self_attn.q_proj.weight", 'Q', 'C', 0},
    {MK_BQ, "self_attn.q_proj.bias", 'Q', 0, 1},
    {MK_WK, "self_attn.k_proj.weight", 'K', 'C', 0},
    {MK_BK, "self_attn.k_proj.bias", 'K', 0, 1},
    {MK_WV, "self_attn.v_proj.weight", 'K', 'C', 0},
    {MK_BV, "self_attn.v_proj.bias", 'K', 0, 1},
    {MK_WO, "self_attn.o_proj.weight", 'C', 'Q', 0},
    {MK_BO, "self_attn.o_proj.bias", 'C', 0, 2},
    {MK_MLP_NORM, "post_attention_layernorm.weight", 'C', 0, 0},
    {MK_GATE, "mlp.gate_proj.weight", 'F', 'C', 0},
    {MK_UP, "mlp.up_proj.weight", 'F', 'C', 0},
    {MK_DOWN, "mlp.down_proj.weight", 'C', 'F', 0},
};
#define MODEL_KINDS_PER_LAYER ((int)(sizeof model_kinds / sizeof model_kinds[0]))

static int64_t model_dim_of(const llama_config *c, char k)
{
    switch (k) {
    case 'C': return c->dim;
    case 'F': return c->hidden_dim;
    case 'Q': return (int64_t)c->n_heads * c->head_dim;
    case 'K': return (int64_t)c->n_kv_heads * c->head_dim;
    default: return 0;
    }
}

/* Appends one row (t NULL: only counts) and advances the block offset; a row
 * without storage (a HiF8 checkpoint's coded weight, kept in its code pack)
 * gets MODEL_NO_STORAGE and no room in the block. */
static void model_table_add(model_tensor *t, int *n, size_t *off, const char *name, int layer,
                            int kind, int64_t rows, int64_t cols, int no_storage)
{
    size_t n_elems = (size_t)rows * (size_t)(cols ? cols : 1);
    if (t) {
        model_tensor *e = &t[*n];
        snprintf(e->name, sizeof e->name, "%s", name);
        e->layer = layer;
        e->kind = kind;
        e->ndim = cols ? 2 : 1;
        e->shape[0] = rows;
        e->shape[1] = cols;
        e->n_elems = n_elems;
        e->offset_elems = no_storage ? MODEL_NO_STORAGE : *off;
    }
    (*n)++;
    if (!no_storage)
        *off += (n_elems + 15) / 16 * 16;   /* keep every tensor 64-byte aligned */
}

/* Fills t (may be NULL to count); returns the number of tensors, *n_params the block size.
 * q8 (may be NULL): a HiF8 checkpoint's quantized Linears get no storage. */
static int model_table_build(const llama_config *c, const model_hif8 *q8, model_tensor *t,
                             size_t *n_params)
{
    int n = 0;
    size_t off = 0;
    char name[80];
    model_table_add(t, &n, &off, "model.embed_tokens.weight", -1, MK_WTE, c->vocab_size, c->dim,
                    0);
    for (int l = 0; l < c->n_layers; l++)
        for (int k = 0; k < MODEL_KINDS_PER_LAYER; k++) {
            if ((model_kinds[k].need == 1 && !c->qkv_bias) ||
                (model_kinds[k].need == 2 && !c->o_bias))
                continue;
            snprintf(name, sizeof name, "model.layers.%d.%s", l, model_kinds[k].suffix);
            int mod = model_kind_module_impl(model_kinds[k].kind);
            model_table_add(t, &n, &off, name, l, model_kinds[k].kind,
                            model_dim_of(c, model_kinds[k].rows),
                            model_dim_of(c, model_kinds[k].cols),
                            q8 && mod >= 0 && q8->slot[l * MODEL_LIN_COUNT + mod] >= 0);
        }
    model_table_add(t, &n, &off, "model.norm.weight", -1, MK_NORM, c->dim, 0, 0);
    if (!c->tied)
        model_table_add(t, &n, &off, "lm_head.weight", -1, MK_LM_HEAD, c->vocab_size, c->dim, 0);
    *n_params = off;
    return n;
}

/* floats in the parameter block (with padding) */
static size_t model_param_count(const llama_config *c)
{
    size_t n_params;
    model_table_build(c, NULL, NULL, &n_params);
    return n_params;
}

int model_table_layout_impl(const llama_config *c, const model_hif8 *q8, int packed,
                            model_tensor **tensors, int *n_tensors, size_t *n_params)
{
    int n = model_table_build(c, q8, NULL, n_params);
    *tensors = qs_calloc((size_t)n, sizeof **tensors);
    if (!*tensors)
        return QS_ENOMEM;
    *n_tensors = model_table_build(c, q8, *tensors, n_params);
    if (packed) {   /* no matrix in the block; the other tensors laid out compactly */
        size_t off = 0;
        for (int i = 0; i < n; i++) {
            model_tensor *e = &(*tensors)[i];
            e->offset_elems = model_kind_is_packed_impl(e->kind) ? MODEL_NO_STORAGE : off;
            off += e->offset_elems == MODEL_NO_STORAGE ? 0 : (e->n_elems + 15) / 16 * 16;
        }
        *n_params = off;
    }
    return 0;
}

int model_table_create(const llama_config *c, model_tensor **tensors, int *n_tensors)
{
    size_t n_params;
    return model_table_layout_impl(c, NULL, 0, tensors, n_tensors, &n_params);
}

int model_param_groups_count(const llama_config *c, model_param_groups *g)
{
    model_tensor *t;
    int n;
    memset(g, 0, sizeof *g);
    if (model_table_create(c, &t, &n))
        return QS_ENOMEM;
    for (int i = 0; i < n; i++) {
        size_t k = t[i].n_elems;
        switch (t[i].kind) {
        case MK_WTE: g->embed += k; break;
        case MK_LM_HEAD: g->lm_head += k; break;
        case MK_NORM:
        case MK_ATTN_NORM:
        case MK_MLP_NORM: g->norms += k; break;
        case MK_GATE:
        case MK_UP:
        case MK_DOWN: g->mlp += k; break;
        default: g->attn += k; break;
        }
        g->total += k;
    }
    qs_free(t);
    return 0;
}

int model_weights_point(llama_weights *w, const llama_model *m, float *block)
{
    for (int i = 0; i < m->n_tensors; i++) {
        const model_tensor *e = &m->tensors[i];
        float *p = e->offset_elems == MODEL_NO_STORAGE ? NULL : block + e->offset_elems;
        llama_layer_weights *lw = e->layer >= 0 ? &w->layer[e->layer] : NULL;
        switch (e->kind) {
        case MK_WTE: w->wte = p; break;
        case MK_NORM: w->norm = p; break;
        case MK_LM_HEAD: w->lm_head = p; break;
        case MK_ATTN_NORM: lw->attn_norm = p; break;
        case MK_WQ: lw->wq = p; break;
        case MK_BQ: lw->bq = p; break;
        case MK_WK: lw->wk = p; break;
        case MK_BK: lw->bk = p; break;
        case MK_WV: lw->wv = p; break;
        case MK_BV: lw->bv = p; break;
        case MK_WO: lw->wo = p; break;
        case MK_BO: lw->bo = p; break;
        case MK_MLP_NORM: lw->mlp_norm = p; break;
        case MK_GATE: lw->w_gate = p; break;
        case MK_UP: lw->w_up = p; break;
        case MK_DOWN: lw->w_down = p; break;
        default: return QS_EINVAL;
        }
    }
    if (m->cfg.tied)
        w->lm_head = w->wte;
    return 0;
}

int model_kind_is_packed_impl(int kind)
{
    switch (kind) {
    case MK_WTE: case MK_LM_HEAD: case MK_WQ: case MK_WK: case MK_WV: case MK_WO:
    case MK_GATE: case MK_UP: case MK_DOWN:
        return 1;
    default:
        return 0;
    }
}

int model_kind_module_impl(int kind)
{
    switch (kind) {
    case MK_WQ: return MODEL_LIN_Q;
    case MK_WK: return MODEL_LIN_K;
    case MK_WV: return MODEL_LIN_V;
    case MK_WO: return MODEL_LIN_O;
    case MK_GATE: return MODEL_LIN_GATE;
    case MK_UP: return MODEL_LIN_UP;
    case MK_DOWN: return MODEL_LIN_DOWN;
    default: return -1;
    }
}

/* q8 (may be NULL): a HiF8 checkpoint, whose coded weights get no room in the
 * block; packed: no matrix gets room (MODEL_NO_STORAGE), the other tensors are
 * laid out compactly in table order. */
static int model_init_layout(llama_model *m, const llama_config *cfg, const model_hif8 *q8,
                             int packed, qs_diag *d)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    /* m->tensors stays NULL when it fails (checked below with the others) */
    (void)model_table_layout_impl(cfg, q8, packed, &m->tensors, &m->n_tensors, &m->n_params);
    m->w.layer = qs_calloc((size_t)cfg->n_layers, sizeof *m->w.layer);
    m->weights_packed = packed && m->tensors;
    m->params = qs_malloc((m->n_params ? m->n_params : 1) * sizeof *m->params);
    if (!m->tensors || !m->w.layer || !m->params) {
        size_t n = m->n_params;
        model_free(m);
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory for %zu parameters (%.1f MiB)",
                        n, n * 4.0 / (1 << 20));
    }
    memset(m->params, 0, m->n_params * sizeof *m->params);   /* alignment padding too */
    model_weights_point(&m->w, m, m->params);
    int rc = rope_table_init(&m->rope, hfconfig_max_context(cfg), cfg->head_dim, cfg->rope_theta,
                             &cfg->rope_scale);
    if (rc) {
        model_free(m);
        return diag_set(d, rc, NULL, -1, "cannot build the RoPE table");
    }
    m->precision = MATMUL_FP32;
    return 0;
}

int model_init(llama_model *m, const llama_config *cfg, qs_diag *d)
{
    return model_init_layout(m, cfg, NULL, 0, d);
}

int model_init_packed_impl(llama_model *m, const llama_config *cfg, qs_diag *d)
{
    return model_init_layout(m, cfg, NULL, 1, d);
}

static const float *model_linear_weight(const llama_layer_weights *lw, int module)
{
    switch (module) {
    case MODEL_LIN_Q: return lw->wq;
    case MODEL_LIN_K: return lw->wk;
    case MODEL_LIN_V: return lw->wv;
    case MODEL_LIN_O: return lw->wo;
    case MODEL_LIN_GATE: return lw->w_gate;
    case MODEL_LIN_UP: return lw->w_up;
    default: return lw->w_down;
    }
}

/* Input and output width of Linear module k (MODEL_LIN_*). */
static void model_linear_dims(const llama_config *c, int k, int *in, int *out)
{
    int QD = c->n_heads * c->head_dim, KD = c->n_kv_heads * c->head_dim;
    const int in_dim[MODEL_LIN_COUNT] = {c->dim, c->dim, c->dim, QD, c->dim, c->dim,
                                         c->hidden_dim};
    const int out_dim[MODEL_LIN_COUNT] = {QD, KD, KD, c->dim, c->hidden_dim, c->hidden_dim,
                                          c->dim};
    *in = in_dim[k];
    *out = out_dim[k];
}

int model_packs_create(llama_model *m, qs_diag *d)
{
    if (m->weights_packed)
        return diag_set(d, QS_EINVAL, NULL, -1, "the weights live in their packs (model_load_packed): "
                        "nothing to pack them from");
    model_packs_destroy(m);
    const llama_config *c = &m->cfg;
    int n = c->n_layers * MODEL_LIN_COUNT + 1;
    m->packs = qs_calloc((size_t)n, sizeof *m->packs);
    if (!m->packs)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory for weight packs");
    for (int l = 0; l < c->n_layers; l++)
        for (int k = 0; k < MODEL_LIN_COUNT; k++) {
            if (model_hif8_planned(m, l, k))   /* its code pack (m->hif8) is the weight */
                continue;
            int in, out;
            model_linear_dims(c, k, &in, &out);
            m->packs[l * MODEL_LIN_COUNT + k] = matmul_wpack_create(
                model_linear_weight(&m->w.layer[l], k), in, out, m->precision);
        }
    m->packs[n - 1] = matmul_wpack_create(m->w.lm_head, c->dim, c->vocab_size, m->precision);
    m->packs_precision = m->precision;
    m->ws = matmul_ws_create();
    if (!m->ws) {
        model_packs_destroy(m);
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory for weight packs");
    }
    for (int i = 0; i < n; i++)
        if (!m->packs[i] && !(i < n - 1 && model_hif8_planned(m, i / MODEL_LIN_COUNT,
                                                             i % MODEL_LIN_COUNT))) {
            model_packs_destroy(m);
            return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory for weight packs");
        }
    return 0;
}

void model_packs_refresh(llama_model *m)
{
    if (!m->packs)
        return;
    for (int i = 0; i < m->cfg.n_layers * MODEL_LIN_COUNT + 1; i++)
        matmul_wpack_refresh(m->packs[i]);
}

/* The end (in floats from m->params) of pack i's weight, or 0 when it has no
 * pack or its weight is not in the params block. */
static size_t model_pack_end(const llama_model *m, int i)
{
    const llama_config *c = &m->cfg;
    int n = c->n_layers * MODEL_LIN_COUNT + 1;
    if (!m->packs || !m->packs[i] || !m->params)
        return 0;
    const float *w = i == n - 1 ? m->w.lm_head
                                : model_linear_weight(&m->w.layer[i / MODEL_LIN_COUNT],
                                                      i % MODEL_LIN_COUNT);
    if (!w || w < m->params || w >= m->params + m->n_params)
        return 0;
    int in = c->dim, out = c->vocab_size;   /* the lm_head */
    if (i < n - 1)
        model_linear_dims(c, i % MODEL_LIN_COUNT, &in, &out);
    return (size_t)(w - m->params) + (size_t)in * (size_t)out;
}

static int model_size_cmp(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

int model_packs_ends(const llama_model *m, size_t *ends)
{
    int n = m->cfg.n_layers * MODEL_LIN_COUNT + 1, k = 0;
    for (int i = 0; i < n; i++) {
        size_t e = model_pack_end(m, i);
        if (e)
            ends[k++] = e;
    }
    /* equal ends (two packs of one weight) would only make an empty segment */
    qsort(ends, (size_t)k, sizeof *ends, model_size_cmp);
    return k;
}

void model_packs_repack_range(llama_model *m, size_t lo, size_t hi)
{
    int n = m->cfg.n_layers * MODEL_LIN_COUNT + 1;
    for (int i = 0; m->packs && i < n; i++) {
        size_t e = model_pack_end(m, i);
        if (e > lo && e <= hi)
            matmul_wpack_repack(m->packs[i]);
    }
}

size_t model_packs_bytes_estimate(const llama_config *c, int precision, int N, int n_unpacked)
{
    int in_dim[MODEL_LIN_COUNT], out_dim[MODEL_LIN_COUNT];
    for (int k = 0; k < MODEL_LIN_COUNT; k++)
        model_linear_dims(c, k, &in_dim[k], &out_dim[k]);
    size_t total = (size_t)(c->n_layers * MODEL_LIN_COUNT + 1) * sizeof(struct matmul_wpack *);
    int max_in = c->dim, max_out = c->vocab_size;
    for (int k = 0; k < MODEL_LIN_COUNT; k++) {
        total += (size_t)c->n_layers * matmul_wpack_bytes_estimate(in_dim[k], out_dim[k], precision);
        max_in = in_dim[k] > max_in ? in_dim[k] : max_in;
        max_out = out_dim[k] > max_out ? out_dim[k] : max_out;
    }
    total += matmul_wpack_bytes_estimate(c->dim, c->vocab_size, precision);
    /* the workspace grows to the largest dW operands (and unpacked MLP weights) */
    size_t ws = matmul_ws_bytes_estimate(N, max_in, max_out, precision, 0);
    for (int k = MODEL_LIN_GATE; n_unpacked && k <= MODEL_LIN_DOWN; k++) {
        size_t u = matmul_ws_bytes_estimate(N, in_dim[k], out_dim[k], precision, 1);
        ws = u > ws ? u : ws;
    }
    return total + ws;
}

void model_packs_destroy(llama_model *m)
{
    matmul_ws_destroy(m->ws);   /* also a workspace without packs (model_ws_create) */
    m->ws = NULL;
    if (!m->packs)
        return;
    for (int i = 0; i < m->cfg.n_layers * MODEL_LIN_COUNT + 1; i++)
        matmul_wpack_destroy(m->packs[i]);
    qs_free(m->packs);
    m->packs = NULL;
    m->packs_substituted = 0;
}

int model_ws_create(llama_model *m, qs_diag *d)
{
    if (m->weights_packed)
        return diag_set(d, QS_EINVAL, NULL, -1, "the weights live in their packs (model_load_packed): "
                        "a training workspace needs the fp32 weights");
    model_packs_destroy(m);
    m->ws = matmul_ws_create();
    return m->ws ? 0 : diag_set(d, QS_ENOMEM, NULL, -1, "out of memory for the matmul workspace");
}

size_t model_ws_bytes_estimate(const llama_config *c, int precision, int N)
{
    int QD = c->n_heads * c->head_dim, KD = c->n_kv_heads * c->head_dim;
    const int in_dim[MODEL_LIN_COUNT + 1] = {c->dim, c->dim, c->dim, QD, c->dim, c->dim,
                                             c->hidden_dim, c->dim};
    const int out_dim[MODEL_LIN_COUNT + 1] = {QD, KD, KD, c->dim, c->hidden_dim, c->hidden_dim,
                                              c->dim, c->vocab_size};
    size_t ws = 0;
    for (int k = 0; k <= MODEL_LIN_COUNT; k++) {   /* the 7 Linears and the lm_head */
        size_t u = matmul_ws_bytes_estimate(N, in_dim[k], out_dim[k], precision, 1);
        ws = u > ws ? u : ws;
    }
    return ws;
}

void model_free(llama_model *m)
{
    model_packs_destroy(m);
    model_hif8_free(m->hif8);
    matmul_wpack_destroy(m->embed_pack);
    qs_free(m->tensors);
    qs_free(m->w.layer);
    qs_free(m->params);
    rope_table_free(&m->rope);
    memset(m, 0, sizeof *m);
}

void model_note_dtype_impl(llama_model *m, int dtype)
{
    const char *n = safetensors_dtype_name(dtype);
    char *p = m->dtypes;
    size_t len = strlen(p), nl = strlen(n);
    for (const char *s = p; *s;) {   /* already listed? */
        size_t w = strcspn(s, "+");
        if (w == nl && !strncmp(s, n, nl))
            return;
        s += w + (s[w] == '+');
    }
    if (len + nl + 2 < sizeof m->dtypes)
        snprintf(p + len, sizeof m->dtypes - len, "%s%s", len ? "+" : "", n);
}

int model_tensor_find_impl(const safetensors_dir *sd, const model_tensor *e, const char *dir,
                           const safetensors_tensor **out, const char **file, qs_diag *d)
{
    const safetensors_tensor *t = safetensors_dir_find(sd, e->name, file);
    *out = t;
    if (!t)
        return diag_set(d, QS_ENOTFOUND, dir, -1,
                        "tensor '%s' [%lld%s%.0lld] is missing from the checkpoint",
                        e->name, (long long)e->shape[0], e->ndim == 2 ? ", " : "",
                        e->ndim == 2 ? (long long)e->shape[1] : 0LL);
    int ok = t->ndim == e->ndim && t->shape[0] == e->shape[0] &&
             (e->ndim == 1 || t->shape[1] == e->shape[1]);
    if (ok)
        return 0;
    char found[96] = "[";
    for (int k = 0; k < t->ndim; k++)
        snprintf(found + strlen(found), sizeof found - strlen(found), "%s%lld", k ? ", " : "",
                 (long long)t->shape[k]);
    snprintf(found + strlen(found), sizeof found - strlen(found), "]");
    if (e->ndim == 2)
        return diag_set(d, QS_ESHAPE, *file, -1, "tensor '%s': expected [%lld, %lld], found %s",
                        e->name, (long long)e->shape[0], (long long)e->shape[1], found);
    return diag_set(d, QS_ESHAPE, *file, -1, "tensor '%s': expected [%lld], found %s", e->name,
                    (long long)e->shape[0], found);
}

int model_check_layers_impl(const safetensors_dir *sd, const llama_config *c, qs_diag *d)
{
    static const char prefix[] = "model.layers.";
    for (int f = 0; f < sd->n_files; f++)
        for (int i = 0; i < sd->files[f].n_tensors; i++) {
            const char *name = sd->files[f].tensors[i].name;
            if (strncmp(name, prefix, sizeof prefix - 1))
                continue;
            char *end;
            long l = strtol(name + sizeof prefix - 1, &end, 10);
            if (end != name + sizeof prefix - 1 && *end == '.' && l >= c->n_layers)
                return diag_set(d, QS_EFORMAT, sd->files[f].path, -1,
                                "tensor '%.200s' of block %ld, but config.json's "
                                "num_hidden_layers is %d: the checkpoint has more blocks than "
                                "the config says (they would be left out)", name, l, c->n_layers);
        }
    return 0;
}

int model_tensor_coded_impl(const llama_model *m, const model_tensor *e)
{
    int mod = model_kind_module_impl(e->kind);
    return mod >= 0 && model_hif8_planned(m, e->layer, mod);
}

int model_load_hif8_weight_impl(llama_model *m, const safetensors_dir *sd, const model_tensor *e,
                                const safetensors_tensor *t, const char *file, int precision,
                                qs_diag *d)
{
    char name[sizeof e->name + 8];
    snprintf(name, sizeof name, "%s_scale", e->name);
    return model_hif8_load_weight(m->hif8, e->layer, model_kind_module_impl(e->kind), t,
                                  safetensors_dir_find(sd, name, NULL), e->shape[0], e->shape[1],
                                  precision, file, d);
}

/* The mapped pages of t leave the resident set once t is converted (read
 * again, they come back from the page cache): the fp32 load of a 4.6 GB
 * checkpoint does not hold its whole mapping next to the 4.6 GB it fills. */
static void model_tensor_release(const safetensors_dir *sd, const safetensors_tensor *t)
{
    for (int k = 0; k < sd->n_files; k++) {
        const fileio_map *mp = &sd->files[k].map;
        if (t->data >= (const unsigned char *)mp->data &&
            t->data < (const unsigned char *)mp->data + mp->bytes)
            fileio_map_release(mp, t->data, t->n_bytes);
    }
}

static int model_load_tensors(llama_model *m, const safetensors_dir *sd, const char *dir,
                              qs_diag *d)
{
    for (int i = 0; i < m->n_tensors; i++) {
        const model_tensor *e = &m->tensors[i];
        const char *file = NULL;
        const safetensors_tensor *t;
        int rc = model_tensor_find_impl(sd, e, dir, &t, &file, d);
        if (rc)
            return rc;
        if (model_tensor_coded_impl(m, e))   /* into its code pack only */
            rc = model_load_hif8_weight_impl(m, sd, e, t, file, MATMUL_BF16, d);
        else
            rc = safetensors_tensor_to_f32(t, m->params + e->offset_elems, file, d);
        if (rc)
            return rc;
        model_tensor_release(sd, t);
        model_note_dtype_impl(m, t->dtype);
    }
    return 0;
}

int model_load_dir(llama_model *m, const char *dir, qs_diag *d)
{
    llama_config cfg;
    memset(m, 0, sizeof *m);
    int rc = hfconfig_load(&cfg, dir, d);
    if (rc)
        return rc;
    model_hif8 *q8 = NULL;
    if ((rc = model_hif8_config_read(dir, &cfg, &q8, d)) < 0)
        return rc;
    safetensors_dir sd;
    rc = safetensors_dir_open(&sd, dir, d);
    if (rc) {
        model_hif8_free(q8);
        return rc;
    }
    rc = model_check_layers_impl(&sd, &cfg, d);
    if (!rc && q8)
        rc = model_hif8_check_scales(q8, &sd, cfg.n_layers, d);
    if (!rc)
        rc = model_init_layout(m, &cfg, q8, 0, d);
    if (rc)
        model_hif8_free(q8);
    else
        m->hif8 = q8;
    if (!rc)
        rc = model_load_tensors(m, &sd, dir, d);
    safetensors_dir_close(&sd);
    if (rc)
        model_free(m);
    return rc;
}

/* splitmix64 (rng_splitmix64) + Box-Muller: deterministic, independent of the thread count. */

void model_params_randomize(llama_model *m, uint64_t seed, float std)
{
    uint64_t s = seed;
    for (int i = 0; i < m->n_tensors; i++) {
        const model_tensor *e = &m->tensors[i];
        if (e->offset_elems == MODEL_NO_STORAGE)
            continue;
        float *p = m->params + e->offset_elems;
        int is_norm = e->kind == MK_NORM || e->kind == MK_ATTN_NORM || e->kind == MK_MLP_NORM;
        for (size_t j = 0; j < e->n_elems; j++) {
            if (is_norm) {
                p[j] = 1.0f;
                continue;
            }
            double u1 = ((rng_splitmix64(&s) >> 11) + 1.0) / 9007199254740993.0;
            double u2 = (rng_splitmix64(&s) >> 11) / 9007199254740992.0;
            p[j] = (float)(std * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
        }
    }
}

int model_save_safetensors(const llama_model *m, const char *path, int dtype, qs_diag *d)
{
    if (m->weights_packed)
        return diag_set(d, QS_EINVAL, path, -1, "an inference model (weights in packs) cannot be saved");
    safetensors_entry *e = qs_calloc((size_t)m->n_tensors, sizeof *e);
    if (!e)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    for (int i = 0; i < m->n_tensors; i++) {
        e[i].name = m->tensors[i].name;
        e[i].data = m->params + m->tensors[i].offset_elems;
        e[i].ndim = m->tensors[i].ndim;
        e[i].shape[0] = m->tensors[i].shape[0];
        e[i].shape[1] = m->tensors[i].shape[1];
    }
    static const char *const meta[] = {"format", "pt", NULL};
    int rc = safetensors_write(path, e, m->n_tensors, dtype, meta, d);
    qs_free(e);
    return rc;
}

int model_memory_estimate(const llama_config *c, int B, int T, int infer_ctx, model_memory *mm)
{
    size_t np = model_param_count(c);
    memset(mm, 0, sizeof *mm);
    mm->params_bytes = mem_mul(4, np);
    mm->grads_bytes = mem_mul(4, np);
    mm->adam_bytes = mem_mul(8, np);
    mm->acts_train_bytes = mem_mul(4, model_acts_elems(c, B, T, T, 1));
    mm->rope_bytes = rope_table_bytes(hfconfig_max_context(c), c->head_dim);
    size_t fixed = mem_add(mem_add(mm->params_bytes, mm->grads_bytes),
                           mem_add(mm->adam_bytes, mm->rope_bytes));
    mm->train_bytes = mem_add(fixed, mm->acts_train_bytes);
    mm->acts_recompute_bytes = mem_mul(4, model_acts_elems(c, B, T, T, MODEL_ACTS_RECOMPUTE));
    mm->train_recompute_bytes = mem_add(fixed, mm->acts_recompute_bytes);
    mm->acts_infer_bytes = mem_mul(4, model_acts_elems(c, 1, infer_ctx, infer_ctx, 0));
    mm->infer_bytes = mem_add(mem_add(mm->params_bytes, mm->acts_infer_bytes), mm->rope_bytes);
    /* every sum includes its parts: the two totals saturate when anything did */
    return mm->train_bytes == SIZE_MAX || mm->infer_bytes == SIZE_MAX ? QS_ERANGE : 0;
}
