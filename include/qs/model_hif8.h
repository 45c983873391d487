/* model_hif8.h: HiF8 W8A8 checkpoints (`qatscope export --format hif8`): the
 * quantized Linears' weights stored as HiF8 codes with their scales, every
 * other tensor in bf16, and a `quantization_config` in config.json.
 *
 * Directory layout (an HF directory; version 1):
 *   config.json     the source config with "torch_dtype": "bfloat16" and
 *     "quantization_config": {
 *       "quant_method": "hif8", "format": "hifloat8", "version": 1,
 *       "modules": ["model.layers.3.mlp.gate_proj", ...],       (HF module names)
 *       "weight": {"dtype": "U8", "granularity": "tensor", "saturating": true},
 *       "activation_scaling": "static" | "dynamic",
 *       "input_scales": {"model.layers.3.mlp.gate_proj": 1234.5, ...}  (static only),
 *       "scale_convention": "code = hif8_encode_saturating(x * scale); x ~ hif8_decode(code) / scale",
 *       "source": {...}                                          (provenance, free form)
 *     }
 *   model.safetensors
 *     <module>.weight        U8 [O, IN]  HiF8 codes of w * weight_scale (saturating, ties away)
 *     <module>.weight_scale  F32 [1]     the weight's scale
 *     every other tensor     BF16        (the source's values rounded to nearest even)
 *   tokenizer files copied from the source.
 * Scales multiply INTO the HiF8 range (the quantizers' convention): a value
 * is encoded as code = encode_sat(x * scale), read back as decode(code) / scale.
 * Static activation scaling: each quantized Linear encodes its whole input with
 * its input scale (the scale the run's delayed scaling held at the exported
 * step); dynamic: each input row (token) with 32768 / max|row| (current
 * scaling, margin 0, as `eval --precision hif8 --quant-scaling current`).
 */
#ifndef QS_MODEL_HIF8_H
#define QS_MODEL_HIF8_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"
#include "qs/hfconfig.h"

#define MODEL_HIF8_VERSION 1

struct llama_model;

/* One quantized Linear. */
typedef struct model_hif8_linear {
    int layer, module;       /* block, MODEL_LIN_* */
    float weight_scale;      /* > 0, finite */
    float input_scale;       /* > 0: static; 0: dynamic (per token) */
} model_hif8_linear;

/* "model.layers.<layer>.<self_attn.q_proj | ... | mlp.down_proj>" */
void model_hif8_module_name(char *buf, size_t buf_bytes, int layer, int module);

/* Writes out_dir (which must not exist) as above from m's fp32 weights: into a
 * temporary directory beside it, renamed when complete (a failure leaves
 * nothing behind).  src_dir gives config.json and the tokenizer files; every
 * quantized Linear has the same activation scaling (all static or all dynamic);
 * source_json (NULL or a JSON object text) becomes quantization_config.source. */
int model_hif8_export(const struct llama_model *m, const char *src_dir,
                      const model_hif8_linear *lin, int n_lin, const char *source_json,
                      const char *out_dir, qs_diag *d);

/* The quantization of a loaded HiF8 checkpoint (llama_model.hif8). */
typedef struct model_hif8 {
    int n;                       /* quantized Linears */
    model_hif8_linear *lin;      /* [n], in the order of config's "modules" */
    int *slot;                   /* [n_layers * MODEL_LIN_COUNT]: index into lin or -1 */
    int dynamic;                 /* activation scaling per token */
    struct matmul_wpack **packs; /* [n] the weights: HiF8 code packs (matmul_wpack_create_hif8),
                                  * 1 byte per weight, the only copy; made for the
                                  * loader's precision (model_load_dir: MATMUL_BF16,
                                  * model_load_packed: its own), re-made on a forward
                                  * in another precision */
    float *row_scale;            /* [row_cap] scratch of model_hif8_forward */
    size_t row_cap;
} model_hif8;

/* Reads dir/config.json's quantization_config: 0 when there is none (*out
 * NULL), else a validated model_hif8 without codes (the loader fills them);
 * errors name the file and the JSON path. */
int model_hif8_config_read(const char *dir, const llama_config *c, model_hif8 **out, qs_diag *d);
/* The same from config.json's text (path for messages; the fuzz target). */
int model_hif8_config_parse(const char *text, size_t len, const char *path,
                            const llama_config *c, model_hif8 **out, qs_diag *d);
void model_hif8_free(model_hif8 *q);   /* NULL ok */
/* The loader's part for one stored tensor of m->hif8's Linear (layer, module):
 * weight t (U8 [O, IN]) and its scale tensor ws (F32 [1]): checks both and
 * packs the codes for precision (q->packs; no decoded copy is made).  path:
 * for messages. */
struct safetensors_tensor;
int model_hif8_load_weight(model_hif8 *q, int layer, int module,
                           const struct safetensors_tensor *t,
                           const struct safetensors_tensor *ws, int64_t O, int64_t IN,
                           int precision, const char *path, qs_diag *d);
/* The checks of model_hif8_load_weight that need no values (inspect): t is
 * U8 [O, IN] and its scale tensor ws (NULL: missing) F32 with one element. */
int model_hif8_check_stored(const struct safetensors_tensor *t,
                            const struct safetensors_tensor *ws, int64_t O, int64_t IN,
                            const char *path, qs_diag *d);
/* Every "<module>.weight_scale" tensor of sd belongs to a module q lists:
 * a scale of a Linear the config does not quantize means the two disagree. */
struct safetensors_dir;
int model_hif8_check_scales(const model_hif8 *q, const struct safetensors_dir *sd, int n_layers,
                            qs_diag *d);
/* Quantized Linear i's weight read back from its pack as the values
 * hif8_decode(code) [O * IN] (the code domain, without 1 / weight_scale). */
void model_hif8_weight_values(const model_hif8 *q, int i, float *values);
/* Bytes the code packs hold. */
size_t model_hif8_bytes(const model_hif8 *q);

/* W8A8 arithmetic of a quantized Linear (the "real path"): 1 when m is a
 * HiF8 checkpoint that quantizes (layer, module).  model_forward then calls
 * model_hif8_forward instead of a plain matmul:
 *   xc = decode(encode_sat(fl(x * s_x)))    s_x the stored input scale, or
 *                                           hif8_row_scale per row (dynamic)
 *   wc = decode(code)                       the codes, decoded into the GEMM's
 *                                           micro-panels from the code pack (exact)
 *   acc = xc wc^T                           the matmul of m->precision: products
 *                                           exact, fp32 accumulation
 *   out = fl(acc * hif8_dequant_factor(s_x, s_w)) + bias    (model_linear_rows_finish)
 * xq[N * IN] is scratch (the activation arena's).  QS_ENAN when x holds NaN
 * or Inf, QS_ENOMEM when the pack for another precision cannot be made. */
int model_hif8_planned(const struct llama_model *m, int layer, int module);
int model_hif8_forward(struct llama_model *m, int layer, int module, float *out, const float *x,
                       const float *bias, int N, int IN, int O, float *xq);
/* Several quantized Linears of one x (gate/up, q/k/v), n <= MODEL_HIF8_GROUP_MAX:
 * x encoded once and the products in one GEMM call (matmul_forward_packed_multi_ws),
 * each output finished as model_hif8_forward finishes it, then ep (may be NULL)
 * on each block: the bits of model_hif8_forward per module and ep on the whole.
 * 1 (nothing done) when the Linears do not share one encoding of x (different
 * stored input scales) or their widths O differ; else 0 or model_hif8_forward's errors. */
enum { MODEL_HIF8_GROUP_MAX = 4 };
struct matmul_epilogue;
int model_hif8_forward_group(struct llama_model *m, int layer, int n, const int *modules,
                             float *const *out, const float *x, const float *const *bias, int N,
                             int IN, const int *O, float *xq, const struct matmul_epilogue *ep);

#endif
