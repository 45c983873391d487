/* hfconfig.h: a Hugging Face config.json -> llama_config, the blueprint of a model.
 *
 * Supported (by `architectures[0]`, else `model_type`): LlamaForCausalLM (llama),
 * MistralForCausalLM (mistral), Qwen2ForCausalLM (qwen2), PanguEmbeddedForCausalLM
 * (PanguEmbedded).  Anything else, or a feature these do not compute
 * (hidden_act other than silu, mlp_bias, rope_scaling other than linear/llama3,
 * Qwen2 sliding windows), is refused by name: never silently ignored.
 *
 * Linear biases per architecture: Llama/Mistral `attention_bias` = q/k/v/o bias;
 * Qwen2 always q/k/v bias; PanguEmbedded `bias` = q/k/v/o bias.
 */
#ifndef QS_HFCONFIG_H
#define QS_HFCONFIG_H

#include "qs/err.h"
#include "qs/layers.h"

enum { LLAMA_ARCH_LLAMA = 0, LLAMA_ARCH_MISTRAL, LLAMA_ARCH_QWEN2, LLAMA_ARCH_PANGU };
#define LLAMA_MAX_EOS 8

typedef struct llama_config {
    int arch;                 /* LLAMA_ARCH_* */
    char arch_name[64];       /* as written in the file */
    int dim;                  /* hidden_size C */
    int hidden_dim;           /* intermediate_size F */
    int n_layers;
    int n_heads;              /* H */
    int n_kv_heads;           /* KVH, divides H */
    int head_dim;             /* hd, even; head_dim key or C / H */
    int vocab_size;           /* V */
    int max_pos;              /* max_position_embeddings */
    int sliding_window;       /* 0 = none; contexts longer than this are refused */
    float norm_eps;           /* rms_norm_eps */
    double rope_theta;
    rope_scaling rope_scale;
    int qkv_bias;             /* 1: q/k/v projections have a bias */
    int o_bias;               /* 1: o_proj has a bias */
    int tied;                 /* tie_word_embeddings: lm_head = embed_tokens */
    int bos_id;               /* -1 if none */
    int n_eos;
    int eos_ids[LLAMA_MAX_EOS];
    char torch_dtype[16];     /* informational ("" if absent) */
} llama_config;

/* Parse JSON text (path only for diagnostics). */
int hfconfig_parse(llama_config *c, const char *json_text, size_t len, const char *path,
                   qs_diag *d);
/* Read DIR/config.json (or a config file path). */
int hfconfig_load(llama_config *c, const char *dir_or_file, qs_diag *d);
/* Maximum context this config supports: min(max_pos, sliding_window if set). */
int hfconfig_max_context(const llama_config *c);

#endif
