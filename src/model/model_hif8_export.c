/* model_hif8_export.c: write a HiF8 W8A8 checkpoint (layout and scale
 * convention: include/qs/model_hif8.h).
 *
 * Everything goes into OUT.tmp.<pid>/ first; the directory is renamed to OUT
 * only after every file was written and closed, so an OUT that exists is
 * whole.  The weights are streamed tensor by tensor (memory: one 64 Ki-value
 * chunk beyond the model).  Codes are hif8_encode(fl(w * scale), HIF8_SAT):
 * the products and codes of hif8_fakequant's y = decode(code) / scale, so the
 * stored weight is exactly the fake-quantized weight the scale gives. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "qs/fileio.h"
#include "qs/hif8.h"
#include "qs/json.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_hif8.h"
#include "qs/safetensors.h"

#define HIF8_EXPORT_CHUNK 65536

static const char *const export_copied_files[] = {
    "generation_config.json", "tokenizer.json", "tokenizer_config.json", "tokenizer.model",
    "special_tokens_map.json",
};

/* index into lin of the Linear whose weight tensor e is, or -1 */
static int export_lin_of(const model_tensor *e, const model_hif8_linear *lin, int n_lin)
{
    char name[160];
    for (int i = 0; i < n_lin; i++) {
        model_hif8_module_name(name, sizeof name, lin[i].layer, lin[i].module);
        size_t k = strlen(name);
        if (!strncmp(e->name, name, k) && !strcmp(e->name + k, ".weight"))
            return i;
    }
    return -1;
}

static int export_check(const llama_model *m, const model_hif8_linear *lin, int n_lin, qs_diag *d)
{
    if (n_lin < 1)
        return diag_set(d, QS_EINVAL, NULL, -1, "export: no quantized Linear");
    for (int i = 0; i < n_lin; i++) {
        if (lin[i].layer < 0 || lin[i].layer >= m->cfg.n_layers || lin[i].module < 0 ||
            lin[i].module >= MODEL_LIN_COUNT)
            return diag_set(d, QS_EINVAL, NULL, -1, "export: Linear %d is (%d, %d), not a "
                            "Linear of this %d-block model", i, lin[i].layer, lin[i].module,
                            m->cfg.n_layers);
        for (int j = 0; j < i; j++)
            if (lin[j].layer == lin[i].layer && lin[j].module == lin[i].module)
                return diag_set(d, QS_EINVAL, NULL, -1, "export: Linear %d listed twice", i);
        if (!(lin[i].weight_scale > 0.0f) || !isfinite(lin[i].weight_scale) ||
            !(lin[i].input_scale >= 0.0f) || !isfinite(lin[i].input_scale))
            return diag_set(d, QS_ERANGE, NULL, -1, "export: Linear %d has scales %g, %g: "
                            "expected finite, weight > 0, input >= 0", i,
                            (double)lin[i].weight_scale, (double)lin[i].input_scale);
        if ((lin[i].input_scale > 0) != (lin[0].input_scale > 0))
            return diag_set(d, QS_EINVAL, NULL, -1, "export: mixed static and dynamic input "
                            "scales (one activation scaling per checkpoint)");
    }
    return 0;
}

static int export_copy_files(const char *src_dir, const char *dir, qs_diag *d)
{
    char src[4096], dst[4096];
    for (size_t i = 0; i < sizeof export_copied_files / sizeof *export_copied_files; i++) {
        if (fileio_join(src, sizeof src, src_dir, export_copied_files[i]) ||
            fileio_join(dst, sizeof dst, dir, export_copied_files[i]))
            return diag_set(d, QS_ERANGE, dir, -1, "path too long");
        if (!fileio_exists(src))
            continue;
        char *data = NULL;
        size_t n = 0;
        int rc = fileio_read_all(src, &data, &n, d);
        if (!rc)
            rc = fileio_write_atomic(dst, data, n, d);
        qs_free(data);
        if (rc)
            return rc;
    }
    return 0;
}

/* quantization_config (see model_hif8.h) */
static json_t *export_qconfig(const model_hif8_linear *lin, int n_lin, const char *source_json,
                              qs_diag *d)
{
    json_t *q = json_object(), *mods = json_array(), *scales = json_object();
    json_t *src = NULL;
    if (source_json && !(src = json_loads(source_json, 0, NULL))) {
        json_decref(q);
        json_decref(mods);
        json_decref(scales);
        diag_set(d, QS_EINVAL, NULL, -1, "export: the source description is not JSON");
        return NULL;
    }
    int bad = !q || !mods || !scales, dynamic = lin[0].input_scale == 0.0f;
    char name[160];
    for (int i = 0; i < n_lin && !bad; i++) {
        model_hif8_module_name(name, sizeof name, lin[i].layer, lin[i].module);
        bad |= json_array_append_new(mods, json_string(name));
        if (!dynamic)
            bad |= json_object_set_new(scales, name, json_real(lin[i].input_scale));
    }
    bad |= json_object_set_new(q, "quant_method", json_string("hif8")) ||
           json_object_set_new(q, "format", json_string("hifloat8")) ||
           json_object_set_new(q, "version", json_integer(MODEL_HIF8_VERSION)) ||
           json_object_set_new(q, "modules", mods) ||
           json_object_set_new(q, "weight", json_pack("{s:s,s:s,s:b}", "dtype", "U8",
                                                       "granularity", "tensor", "saturating", 1)) ||
           json_object_set_new(q, "activation_scaling",
                               json_string(dynamic ? "dynamic" : "static"));
    mods = NULL;
    if (!dynamic)
        bad |= json_object_set_new(q, "input_scales", scales);
    else
        json_decref(scales);
    bad |= json_object_set_new(q, "scale_convention",
                               json_string("code = hif8_encode_saturating(x * scale); x ~ "
                                           "hif8_decode(code) / scale"));
    if (src)
        bad |= json_object_set_new(q, "source", src);
    if (bad) {
        json_decref(q);
        diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
        return NULL;
    }
    return q;
}

static int export_config(const char *src_dir, const char *dir, const model_hif8_linear *lin,
                         int n_lin, const char *source_json, qs_diag *d)
{
    char src[4096], dst[4096];
    if (fileio_join(src, sizeof src, src_dir, "config.json") ||
        fileio_join(dst, sizeof dst, dir, "config.json"))
        return diag_set(d, QS_ERANGE, dir, -1, "path too long");
    json_t *cfg;
    int rc = qs_json_load_file(src, QS_JSON_OBJECT, &cfg, d);
    if (rc)
        return rc;
    json_t *q = export_qconfig(lin, n_lin, source_json, d);
    if (!q) {
        json_decref(cfg);
        return QS_EINVAL;   /* d says why */
    }
    const size_t flags = JSON_INDENT(2) | JSON_PRESERVE_ORDER;
    size_t n = 0;
    char *buf = NULL;
    if (!json_object_set_new(cfg, "quantization_config", q) &&
        !json_object_set_new(cfg, "torch_dtype", json_string("bfloat16")) &&
        (n = json_dumpb(cfg, NULL, 0, flags)) && (buf = qs_malloc(n + 1)) &&
        json_dumpb(cfg, buf, n, flags) == n) {
        buf[n] = '\n';
        rc = fileio_write_atomic(dst, buf, n + 1, d);
    } else {
        rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    }
    json_decref(cfg);
    qs_free(buf);
    return rc;
}

/* codes of w[n] * scale, streamed in chunks */
static int export_codes(safetensors_stream *s, const float *w, size_t n, float scale, float *tmp,
                        uint8_t *codes, qs_diag *d)
{
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i += HIF8_EXPORT_CHUNK) {
        size_t k = n - i < HIF8_EXPORT_CHUNK ? n - i : HIF8_EXPORT_CHUNK;
        for (size_t j = 0; j < k; j++)
            tmp[j] = w[i + j] * scale;
        hif8_codes_encode(tmp, codes, k, HIF8_SAT);
        rc = safetensors_stream_append_u8(s, codes, k, d);
    }
    return rc;
}

static int export_weights(const llama_model *m, const char *dir, const model_hif8_linear *lin,
                          int n_lin, qs_diag *d)
{
    char path[4096];
    if (fileio_join(path, sizeof path, dir, "model.safetensors"))
        return diag_set(d, QS_ERANGE, dir, -1, "path too long");
    int n = 0, rc = 0;
    safetensors_entry *e = qs_calloc((size_t)m->n_tensors + (size_t)n_lin, sizeof *e);
    int *dtypes = qs_calloc((size_t)m->n_tensors + (size_t)n_lin, sizeof *dtypes);
    int *of = qs_calloc((size_t)m->n_tensors, sizeof *of);
    char (*scale_names)[192] = qs_calloc((size_t)n_lin, sizeof *scale_names);
    float *tmp = qs_malloc(HIF8_EXPORT_CHUNK * sizeof *tmp);
    uint8_t *codes = qs_malloc(HIF8_EXPORT_CHUNK);
    if (!e || !dtypes || !of || !scale_names || !tmp || !codes) {
        rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
        goto done;
    }
    for (int i = 0; i < m->n_tensors; i++) {
        const model_tensor *t = &m->tensors[i];
        of[i] = export_lin_of(t, lin, n_lin);
        e[n] = (safetensors_entry){t->name, m->params + t->offset_elems, t->ndim,
                                   {t->shape[0], t->shape[1]}};
        dtypes[n++] = of[i] >= 0 ? SAFETENSORS_U8 : SAFETENSORS_BF16;
        if (of[i] >= 0) {   /* its scale right after it */
            snprintf(scale_names[of[i]], sizeof scale_names[0], "%.180s_scale", t->name);
            e[n] = (safetensors_entry){scale_names[of[i]], &lin[of[i]].weight_scale, 1, {1}};
            dtypes[n++] = SAFETENSORS_F32;
        }
    }
    for (int i = 0; i < n_lin; i++)
        if (!scale_names[i][0]) {
            rc = diag_set(d, QS_ENOTFOUND, NULL, -1, "export: Linear %d has no weight tensor", i);
            goto done;
        }
    static const char *const meta[] = {"format", "pt", "quantization", "hif8", NULL};
    safetensors_stream *s;
    if ((rc = safetensors_stream_create_mixed(&s, path, e, dtypes, n, meta, d)))
        goto done;
    for (int i = 0; i < m->n_tensors && !rc; i++) {
        const model_tensor *t = &m->tensors[i];
        const float *w = m->params + t->offset_elems;
        if (of[i] < 0)
            rc = safetensors_stream_append(s, w, t->n_elems, d);
        else if (!(rc = export_codes(s, w, t->n_elems, lin[of[i]].weight_scale, tmp, codes, d)))
            rc = safetensors_stream_append(s, &lin[of[i]].weight_scale, 1, d);
    }
    if (rc)
        safetensors_stream_abort(s);
    else
        rc = safetensors_stream_commit(s, d);
done:
    qs_free(e);
    qs_free(dtypes);
    qs_free(of);
    qs_free(scale_names);
    qs_free(tmp);
    qs_free(codes);
    return rc;
}

int model_hif8_export(const llama_model *m, const char *src_dir, const model_hif8_linear *lin,
                      int n_lin, const char *source_json, const char *out_dir, qs_diag *d)
{
    int rc = export_check(m, lin, n_lin, d);
    if (rc)
        return rc;
    if (fileio_exists(out_dir))
        return diag_set(d, QS_EINVAL, out_dir, -1, "already exists: export writes a new "
                        "directory (remove it or choose another --out)");
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out_dir, (long)getpid()) >= sizeof tmp)
        return diag_set(d, QS_ERANGE, out_dir, -1, "path too long");
    if ((rc = fileio_mkdir_p(tmp, d)))
        return rc;
    if (!(rc = export_copy_files(src_dir, tmp, d)) &&
        !(rc = export_config(src_dir, tmp, lin, n_lin, source_json, d)) &&
        !(rc = export_weights(m, tmp, lin, n_lin, d)) && rename(tmp, out_dir))
        rc = diag_set(d, QS_EIO, out_dir, -1, "cannot rename %s into place: %s", tmp,
                      strerror(errno));
    if (rc) {
        fileio_dir_remove_flat(tmp);
        diag_rebase(d, tmp, out_dir);   /* name OUT/x, not OUT.tmp.<pid>/x */
    }
    return rc;
}
