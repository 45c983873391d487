/* repro_base.c: the reproduction's base model before pretraining: a small
 * Llama's config.json, the tokenizer's files and random weights from `qatscope
 * init`'s library (include/qs/hfinit.h), F32. */
#include <stdio.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/hfconfig.h"
#include "qs/mem.h"
#include "qs/hfinit.h"
#include "qs/safetensors.h"
#include "qs/tokenizer.h"
#include "repro_impl.h"

static const char *const base_tok_files[] = {"tokenizer.json", "tokenizer.model",
                                             "tokenizer_config.json", "special_tokens_map.json"};

static int base_copy_tokenizer(const char *tok_dir, const char *out_dir, qs_diag *d)
{
    char src[1100], dst[1100];
    for (size_t i = 0; i < sizeof base_tok_files / sizeof *base_tok_files; i++) {
        snprintf(src, sizeof src, "%s/%s", tok_dir, base_tok_files[i]);
        snprintf(dst, sizeof dst, "%s/%s", out_dir, base_tok_files[i]);
        if (!fileio_exists(src))
            continue;
        char *data;
        size_t n;
        int rc = fileio_read_all(src, &data, &n, d);
        if (!rc)
            rc = fileio_write_atomic(dst, data, n, d);
        qs_free(data);
        if (rc)
            return rc;
    }
    return 0;
}

int repro_base_init(const repro_model_spec *spec, const char *tok_dir, const char *out_dir,
                    uint64_t seed, qs_diag *d)
{
    tokenizer *tok;
    int rc = tokenizer_create(&tok, tok_dir, d);
    if (rc)
        return rc;
    int vocab = tokenizer_vocab_size(tok), bos = tokenizer_bos_id(tok), eos = tokenizer_eos_id(tok);
    tokenizer_destroy(tok);
    if ((rc = fileio_mkdir_p(out_dir, d)) || (rc = base_copy_tokenizer(tok_dir, out_dir, d)))
        return rc;
    char cfg[2048], path[1100];
    int n = snprintf(cfg, sizeof cfg,
                     "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
                     "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n"
                     "  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n"
                     "  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n  \"vocab_size\": %d,\n"
                     "  \"max_position_embeddings\": %d,\n  \"rms_norm_eps\": 1e-05,\n"
                     "  \"rope_theta\": 10000.0,\n  \"hidden_act\": \"silu\",\n"
                     "  \"attention_bias\": false,\n  \"mlp_bias\": false,\n"
                     "  \"tie_word_embeddings\": true,\n  \"initializer_range\": 0.02,\n"
                     "  \"bos_token_id\": %d,\n  \"eos_token_id\": %d,\n  \"torch_dtype\": \"float32\"\n}\n",
                     spec->dim, spec->hidden_dim, spec->n_layers, spec->n_heads, spec->n_kv_heads,
                     spec->dim / spec->n_heads, vocab, spec->max_pos, bos, eos);
    snprintf(path, sizeof path, "%s/config.json", out_dir);
    llama_config c;
    if ((rc = fileio_write_atomic(path, cfg, (size_t)n, d)) || (rc = hfconfig_load(&c, out_dir, d)))
        return rc;
    hfinit_opts o = {seed, SAFETENSORS_F32, 0};
    hfinit_summary sum;
    return hfinit_weights_write(&c, out_dir, &o, &sum, d);
}
