/* model_packed.c: inference models whose matrices live only in frozen packs
 * (model_load_packed), constant weight substitutes (model_packs_substitute)
 * and the bf16 rounding of evaluation in the export's arithmetic
 * (model_params_round_bf16); see include/qs/model.h.
 *
 * Memory of a loaded inference model, per precision (V x C embedding, P the
 * parameters of the Linears and the embedding; tied: the lm_head's pack is the
 * embedding):
 *   bf16 checkpoint, bf16 forwards   2 P bytes (bf16 packs) + norms/biases fp32
 *   any checkpoint, fp32 forwards    4 P bytes (fp32 packs)  + norms/biases fp32
 *   F32/F16 checkpoint, bf16         4 P (fp32 block) + 2 P (bf16 packs): the
 *                                    fp32 values are kept, so the embedding
 *                                    lookup and hook substitutes see them
 * plus the workspace and the activation arenas of the caller.
 * model_packed_memory_estimate() gives these figures without loading (inspect):
 * the same route decision, the same table and the pack sizes of matmul.h.
 *
 * Loading: tensors are taken in the size table's order; each matrix is packed
 * from the mapping (bf16 bits directly; F32 from the mapping, F16 through an
 * fp32 copy of that one tensor) and its pages are released right after, so
 * the process never holds the mapped checkpoint and the packs at once.  A
 * BF16 matrix is scanned first: NaN/Inf is the same error as model_load_dir's,
 * a subnormal value (which a bf16 pack would flush to zero) sends the whole
 * load down model_load_dir + model_packs_create, which keeps it.
 *
 * A HiF8 checkpoint (qs/model_hif8.h): its coded weights go into code packs
 * made for the precision of the forwards (m->hif8; 1 byte per weight, no
 * entry in m->packs), everything else as above (the export stores it as BF16,
 * so in bf16 nothing takes the model_load_dir route).
 */
#include <stdint.h>
#include <string.h>

#include "model_impl.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_hif8.h"
#include "qs/safetensors.h"

enum { MODEL_PACKED_INEXACT = 1 };   /* internal: take the model_load_dir route */

/* BF16 bits of t: QS_ENAN naming the first NaN/Inf (as safetensors_tensor_to_f32
 * words it), else 1 when a subnormal value is present, else 0.  The pass over
 * every weight runs on all threads, vectorized (one compare per element into
 * two OR-reductions): at one byte pair per step on one thread it was ~1.2 s of
 * the 1B checkpoint's 4 s load. */
static int model_bf16_scan(const safetensors_tensor *t, const char *file, qs_diag *d)
{
    const unsigned char *p = t->data;
    const size_t n = t->n_elems;
    unsigned any_max = 0, any_sub = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint16_t *w = (const uint16_t *)(const void *)p;   /* 2-aligned: the caller checks */
#ifdef _OPENMP
#pragma omp parallel for simd schedule(static) reduction(| : any_max, any_sub) if (n > (1u << 20))
#endif
    for (size_t i = 0; i < n; i++) {
        unsigned h = w[i], e = h & 0x7F80u;
        any_max |= e == 0x7F80u;
        any_sub |= (e == 0) & ((h & 0x7Fu) != 0);
    }
#else
    for (size_t i = 0; i < n; i++) {
        unsigned h = (unsigned)p[2 * i] | (unsigned)p[2 * i + 1] << 8, e = h & 0x7F80u;
        any_max |= e == 0x7F80u;
        any_sub |= e == 0 && (h & 0x7Fu);
    }
#endif
    for (size_t i = 0; any_max && i < n; i++) {
        unsigned h = (unsigned)p[2 * i] | (unsigned)p[2 * i + 1] << 8;
        if ((h & 0x7F80u) == 0x7F80u)
            return diag_set(d, QS_ENAN, file, -1, "tensor '%s': element %zu is %s", t->name, i,
                            h & 0x7Fu ? "NaN" : "Inf");
    }
    return any_sub ? 1 : 0;
}

static const fileio_map *model_map_of(const safetensors_dir *sd, const unsigned char *p)
{
    for (int i = 0; i < sd->n_files; i++) {
        const fileio_map *mp = &sd->files[i].map;
        if (p >= mp->data && p < mp->data + mp->bytes)
            return mp;
    }
    return NULL;
}

/* The frozen pack of one matrix w [rows, cols] (O = rows, IN = cols). */
static int model_pack_tensor(const safetensors_tensor *t, int IN, int O, int precision,
                             matmul_wpack **out, const char *file, qs_diag *d)
{
    *out = NULL;
    if (t->dtype == SAFETENSORS_BF16 && ((uintptr_t)t->data & 1) == 0) {
        int rc = model_bf16_scan(t, file, d);
        if (rc < 0)
            return rc;
        if (rc == 1 && (precision == MATMUL_BF16 || precision == MATMUL_BF16_AMX))
            return MODEL_PACKED_INEXACT;
        *out = matmul_wpack_create_frozen_bf16((const uint16_t *)(const void *)t->data, IN, O,
                                               precision);
    } else if (precision != MATMUL_FP32) {
        return MODEL_PACKED_INEXACT;   /* F32/F16 values would be rounded by a bf16 pack */
    } else if (t->dtype == SAFETENSORS_F32 && ((uintptr_t)t->data & 3) == 0) {
        const float *w = (const float *)(const void *)t->data;
        const size_t n = t->n_elems;
        unsigned bad = 0;   /* NaN or Inf anywhere (all threads), then the first one */
#ifdef _OPENMP
#pragma omp parallel for simd schedule(static) reduction(| : bad) if (n > (1u << 20))
#endif
        for (size_t i = 0; i < n; i++)
            bad |= w[i] - w[i] != 0.0f;
        for (size_t i = 0; bad && i < n; i++)
            if (w[i] - w[i] != 0.0f)   /* NaN or Inf, worded as safetensors_tensor_to_f32 */
                return diag_set(d, QS_ENAN, file, -1, "tensor '%s': element %zu is %s", t->name,
                                i, w[i] != w[i] ? "NaN" : "Inf");
        *out = matmul_wpack_create_frozen(w, IN, O, precision);
    } else {
        float *tmp = qs_malloc(t->n_elems * sizeof *tmp);
        if (!tmp)
            return diag_set(d, QS_ENOMEM, file, -1, "out of memory converting tensor '%s'",
                            t->name);
        int rc = safetensors_tensor_to_f32(t, tmp, file, d);
        if (!rc)
            *out = matmul_wpack_create_frozen(tmp, IN, O, precision);
        qs_free(tmp);
        if (rc)
            return rc;
    }
    if (!*out)
        return diag_set(d, QS_ENOMEM, file, -1, "out of memory packing tensor '%s'", t->name);
    return 0;
}

/* q8: the checkpoint's quantization (NULL: none), owned by m from here on. */
static int model_load_packed_try(llama_model *m, const llama_config *cfg, model_hif8 *q8,
                                 const safetensors_dir *sd, const char *dir, int precision,
                                 qs_diag *d)
{
    int rc = model_init_packed_impl(m, cfg, d);
    if (rc) {
        model_hif8_free(q8);
        return rc;
    }
    m->hif8 = q8;
    const int n_packs = cfg->n_layers * MODEL_LIN_COUNT + 1;
    m->precision = m->packs_precision = precision;
    m->packs = qs_calloc((size_t)n_packs, sizeof *m->packs);
    m->ws = matmul_ws_create();
    if (!m->packs || !m->ws)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory for weight packs");
    for (int i = 0; i < m->n_tensors && !rc; i++) {
        const model_tensor *e = &m->tensors[i];
        const safetensors_tensor *t;
        const char *file = NULL;
        if ((rc = model_tensor_find_impl(sd, e, dir, &t, &file, d)))
            break;
        model_note_dtype_impl(m, t->dtype);
        if (!model_kind_is_packed_impl(e->kind)) {
            rc = safetensors_tensor_to_f32(t, m->params + e->offset_elems, file, d);
            continue;
        }
        matmul_wpack *pk = NULL;
        int coded = model_tensor_coded_impl(m, e);
        if (coded)   /* its code pack (m->hif8) */
            rc = model_load_hif8_weight_impl(m, sd, e, t, file, precision, d);
        else
            rc = model_pack_tensor(t, (int)e->shape[1], (int)e->shape[0], precision, &pk, file,
                                   d);
        const fileio_map *mp = model_map_of(sd, t->data);
        if (mp)
            fileio_map_release(mp, t->data, t->n_bytes);
        if (rc || coded)
            continue;
        int module = model_kind_module_impl(e->kind);
        if (module >= 0)
            m->packs[e->layer * MODEL_LIN_COUNT + module] = pk;
        else if (e->kind == MK_LM_HEAD || (e->kind == MK_WTE && cfg->tied))
            m->packs[n_packs - 1] = pk;
        else
            m->embed_pack = pk;
    }
    return rc;
}

int model_load_packed(llama_model *m, const char *dir, int precision, qs_diag *d)
{
    llama_config cfg;
    memset(m, 0, sizeof *m);
    if (precision != MATMUL_FP32 && precision != MATMUL_BF16 && precision != MATMUL_BF16_AMX)
        return diag_set(d, QS_EINVAL, dir, -1,
                        "packed load: precision %d, expected fp32, bf16 or bf16-amx", precision);
    int rc = hfconfig_load(&cfg, dir, d);
    if (rc)
        return rc;
    if (matmul_frozen_available(precision)) {
        safetensors_dir sd;
        model_hif8 *q8 = NULL;
        if ((rc = model_hif8_config_read(dir, &cfg, &q8, d)) < 0)
            return rc;
        if ((rc = safetensors_dir_open(&sd, dir, d))) {
            model_hif8_free(q8);
            return rc;
        }
        if ((rc = model_check_layers_impl(&sd, &cfg, d)) ||
            (q8 && (rc = model_hif8_check_scales(q8, &sd, cfg.n_layers, d)))) {
            model_hif8_free(q8);
            safetensors_dir_close(&sd);
            return rc;
        }
        rc = model_load_packed_try(m, &cfg, q8, &sd, dir, precision, d);
        safetensors_dir_close(&sd);
        if (rc <= 0) {
            if (rc)
                model_free(m);
            return rc;
        }
        model_free(m);   /* MODEL_PACKED_INEXACT: keep the fp32 values */
    }
    if ((rc = model_load_dir(m, dir, d)))
        return rc;
    m->precision = precision;
    if ((rc = model_packs_create(m, d)))
        model_free(m);
    return rc;
}

int model_packed_memory_estimate(const llama_config *c, int precision, const model_hif8 *q8,
                                 int matrices_bf16, model_packed_memory *pm)
{
    memset(pm, 0, sizeof *pm);
    if (precision != MATMUL_FP32 && precision != MATMUL_BF16 && precision != MATMUL_BF16_AMX)
        return QS_EINVAL;
    /* model_load_packed's route: packed from the mapping where the packs hold the
     * stored values exactly, else (MODEL_PACKED_INEXACT) model_load_dir's fp32
     * block with model_packs_create's packs, whose forward forms are the frozen
     * packs' size once built (an inference model builds no other) */
    pm->fp32_copy = !matmul_frozen_available(precision) ||
                    (precision != MATMUL_FP32 && !matrices_bf16);
    model_tensor *t;
    int nt;
    size_t n_params;
    if (model_table_layout_impl(c, q8, !pm->fp32_copy, &t, &nt, &n_params))
        return QS_ENOMEM;
    pm->params_bytes = mem_mul(sizeof(float), n_params);
    pm->packs_bytes = (size_t)(c->n_layers * MODEL_LIN_COUNT + 1) * sizeof(matmul_wpack *);
    for (int i = 0; i < nt; i++) {
        const model_tensor *e = &t[i];
        int IN = (int)e->shape[1], O = (int)e->shape[0], mod = model_kind_module_impl(e->kind);
        if (!model_kind_is_packed_impl(e->kind))
            continue;
        if (mod >= 0 && q8 && q8->slot[e->layer * MODEL_LIN_COUNT + mod] >= 0)   /* coded */
            pm->codes_bytes = mem_add(pm->codes_bytes, matmul_wpack_hif8_bytes_estimate(IN, O));
        else if (!pm->fp32_copy || e->kind != MK_WTE || c->tied)   /* fp32 route: no embed pack */
            pm->packs_bytes =
                mem_add(pm->packs_bytes, matmul_wpack_frozen_bytes_estimate(IN, O, precision));
    }
    qs_free(t);
    pm->rope_bytes = rope_table_bytes(hfconfig_max_context(c), c->head_dim);
    pm->bytes = mem_add(mem_add(pm->packs_bytes, pm->codes_bytes),
                        mem_add(pm->params_bytes, pm->rope_bytes));
    return pm->bytes == SIZE_MAX ? QS_ERANGE : 0;
}

/* Weight of Linear (layer, module): from the fp32 block, or read back out of its pack into buf. */
static const float *model_linear_w(llama_model *m, int layer, int module, float *buf)
{
    const llama_layer_weights *lw = &m->w.layer[layer];
    const float *const views[MODEL_LIN_COUNT] = {lw->wq, lw->wk, lw->wv, lw->wo,
                                                 lw->w_gate, lw->w_up, lw->w_down};
    if (views[module])
        return views[module];
    matmul_wpack *pk = m->packs[layer * MODEL_LIN_COUNT + module];
    const llama_config *c = &m->cfg;
    int IN = module == MODEL_LIN_O ? c->n_heads * c->head_dim
             : module == MODEL_LIN_DOWN ? c->hidden_dim : c->dim;
    int O = module == MODEL_LIN_Q ? c->n_heads * c->head_dim
            : module == MODEL_LIN_K || module == MODEL_LIN_V ? c->n_kv_heads * c->head_dim
            : module == MODEL_LIN_O || module == MODEL_LIN_DOWN ? c->dim : c->hidden_dim;
    for (int o = 0; o < O; o++)
        matmul_wpack_row(pk, o, buf + (size_t)o * IN);
    return buf;
}

int model_packs_substitute(llama_model *m, qs_diag *d)
{
    const llama_config *c = &m->cfg;
    if (!m->packs || !m->hook.weight)
        return diag_set(d, QS_EINVAL, NULL, -1, "weight substitutes need packs and hook.weight");
    if (m->packs_substituted || !matmul_frozen_available(m->packs_precision))
        return 0;   /* no packed format (sgemm): the hook keeps substituting per call */
    size_t max_w = 0;
    int QD = c->n_heads * c->head_dim, KD = c->n_kv_heads * c->head_dim;
    const int in_dim[MODEL_LIN_COUNT] = {c->dim, c->dim, c->dim, QD, c->dim, c->dim, c->hidden_dim};
    const int out_dim[MODEL_LIN_COUNT] = {QD, KD, KD, c->dim, c->hidden_dim, c->hidden_dim, c->dim};
    for (int k = 0; k < MODEL_LIN_COUNT; k++)
        max_w = (size_t)in_dim[k] * out_dim[k] > max_w ? (size_t)in_dim[k] * out_dim[k] : max_w;
    float *buf = qs_malloc(max_w * sizeof *buf), *wq = qs_malloc(max_w * sizeof *wq);
    int rc = buf && wq ? 0 : diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    for (int l = 0; l < c->n_layers && !rc; l++)
        for (int k = 0; k < MODEL_LIN_COUNT && !rc; k++) {
            if ((m->hook.planned && !m->hook.planned(m->hook.self, l, k)) ||
                model_hif8_planned(m, l, k))   /* a code pack is the weight */
                continue;
            matmul_wpack *pk = m->packs[l * MODEL_LIN_COUNT + k];
            const float *w = model_linear_w(m, l, k, buf);
            if ((rc = m->hook.weight(m->hook.self, l, k, w, wq, out_dim[k], in_dim[k])))
                rc = diag_set(d, rc, NULL, -1, "weight substitute failed at layer %d", l);
            else if (matmul_wpack_frozen(pk))
                rc = matmul_wpack_frozen_set(pk, wq);
            else {   /* a plain pack points at the fp32 view: give it a frozen one */
                matmul_wpack *fz = matmul_wpack_create_frozen(wq, in_dim[k], out_dim[k],
                                                              m->packs_precision);
                if (fz) {
                    matmul_wpack_destroy(pk);
                    m->packs[l * MODEL_LIN_COUNT + k] = fz;
                }
                rc = fz ? 0 : QS_ENOMEM;
            }
            if (rc == QS_ENOMEM)
                rc = diag_set(d, rc, NULL, -1, "out of memory for substitute packs");
            m->packs_substituted = 1;   /* from the first one on, the packs are mixed */
        }
    qs_free(buf);
    qs_free(wq);
    return rc;
}

/* The frozen pack that holds table row e of a packed model (NULL: none). */
static matmul_wpack *model_pack_of(const llama_model *m, const model_tensor *e)
{
    int module = model_kind_module_impl(e->kind);
    if (module >= 0)
        return m->packs[e->layer * MODEL_LIN_COUNT + module];
    if (e->kind == MK_WTE && m->embed_pack)
        return m->embed_pack;
    return e->kind == MK_WTE || e->kind == MK_LM_HEAD ? m->packs[m->cfg.n_layers * MODEL_LIN_COUNT]
                                                      : NULL;
}

int model_params_round_bf16(llama_model *m, qs_diag *d)
{
    float *buf = NULL;
    size_t cap = 0;
    int rc = 0;
    for (int i = 0; i < m->n_tensors && !rc; i++) {
        const model_tensor *e = &m->tensors[i];
        int mod = model_kind_module_impl(e->kind);
        if (mod >= 0 && (model_hif8_planned(m, e->layer, mod) ||
                         (m->hook.fn && (!m->hook.planned ||
                                         m->hook.planned(m->hook.self, e->layer, mod)))))
            continue;
        if (e->offset_elems != MODEL_NO_STORAGE) {
            float *p = m->params + e->offset_elems;
            for (size_t j = 0; j < e->n_elems; j++)
                p[j] = safetensors_bf16_to_f32(safetensors_f32_to_bf16(p[j]));
            continue;
        }
        /* in a frozen pack: a bf16 one holds bf16 values (rounded to nearest
         * even when it was made); an fp32 one is read back, rounded, re-packed */
        matmul_wpack *pk = m->packs ? model_pack_of(m, e) : NULL;
        if (!pk || !matmul_wpack_frozen(pk) || matmul_wpack_precision(pk) == MATMUL_BF16 ||
            matmul_wpack_precision(pk) == MATMUL_BF16_AMX)
            continue;
        if (e->n_elems > cap) {
            qs_free(buf);
            cap = e->n_elems;
            if (!(buf = qs_malloc(cap * sizeof *buf))) {
                rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory rounding '%s'", e->name);
                break;
            }
        }
        const size_t IN = (size_t)e->shape[1];
        for (int64_t o = 0; o < e->shape[0]; o++)
            matmul_wpack_row(pk, (int)o, buf + (size_t)o * IN);
        for (size_t j = 0; j < e->n_elems; j++)
            buf[j] = safetensors_bf16_to_f32(safetensors_f32_to_bf16(buf[j]));
        if ((rc = matmul_wpack_frozen_set(pk, buf)))
            rc = diag_set(d, rc, NULL, -1, "out of memory re-packing '%s'", e->name);
    }
    qs_free(buf);
    model_packs_refresh(m);   /* plain packs re-pack the rounded views */
    return rc;
}

int model_dir_matrices_bf16(const char *dir, int *all_bf16, qs_diag *d)
{
    safetensors_dir sd;
    int rc = safetensors_dir_open(&sd, dir, d);
    if (rc)
        return rc;
    *all_bf16 = 1;
    for (int f = 0; f < sd.n_files; f++)
        for (int i = 0; i < sd.files[f].n_tensors; i++) {
            const safetensors_tensor *t = &sd.files[f].tensors[i];
            if (t->ndim == 2 && t->dtype != SAFETENSORS_BF16 && t->dtype != SAFETENSORS_U8)
                *all_bf16 = 0;
        }
    safetensors_dir_close(&sd);
    return 0;
}
