/* hfinit.h: a random-initialised Hugging Face checkpoint for a llama_config
 * (`qatscope init`), written tensor by tensor in memory that does not grow
 * with the model.
 *
 * Tensors: exactly model_table_create()'s list (names, shapes, order), the
 * table model_load_dir validates a checkpoint against, so init and load cannot
 * disagree.  The rule of each tensor (hfinit_tensor_rule):
 *   1-D "...norm.weight" (RMSNorm gains)                 1
 *   1-D "....bias"                                       0
 *   2-D "....o_proj.weight", "....down_proj.weight"      N(0, (0.02 / sqrt(2 L))^2)
 *   every other 2-D weight (embed_tokens, q/k/v, gate,   N(0, 0.02^2)
 *   up, lm_head when untied)
 * (L = num_hidden_layers; the scaled output projections are GPT-2's
 * residual-path scaling).  Any other tensor the table may gain later is an
 * error here until it is given a rule.
 *
 * Random stream: a tensor's values, in row-major order, are cut into chunks
 * of HFINIT_CHUNK_ELEMS; chunk c of tensor NAME comes from
 *     rng r; rng_seed_stream(&r, seed ^ hfinit_name_hash(NAME), c);
 *     x[i] = std * rng_normal(&r)          (float multiply, one call per value)
 * for its values in order.  A value therefore depends only on (seed, tensor
 * name, index): not on the thread count, the writing order or the sharding.
 * BF16 storage holds the round-to-nearest-even of exactly those fp32 values.
 *
 * Sharding follows huggingface_hub's split_state_dict_into_shards (what
 * save_pretrained uses): tensors in table order fill a shard until the next
 * one would push it past max_shard_bytes; a tensor larger than that gets a
 * shard of its own, placed before the shard being filled.  One shard is
 * DIR/model.safetensors; more are model-0000i-of-0000n.safetensors plus
 * model.safetensors.index.json {"metadata": {"total_size": bytes},
 * "weight_map": {...}} (keys sorted, indent 2, as transformers writes it).
 */
#ifndef QS_HFINIT_H
#define QS_HFINIT_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"
#include "qs/hfconfig.h"
#include "qs/model.h"

#define HFINIT_STD 0.02   /* double; the scaled std is (float)(HFINIT_STD / sqrt(2.0 * L)) */
#define HFINIT_CHUNK_ELEMS ((size_t)1 << 18)
/* huggingface_hub's default max_shard_size "5GB" (decimal units) */
#define HFINIT_MAX_SHARD_BYTES_DEFAULT 5000000000ull

/* The rule of one tensor: std > 0 draws N(0, std^2), else every value is `value`. */
typedef struct hfinit_rule {
    float std;
    float value;
} hfinit_rule;
int hfinit_tensor_rule(const llama_config *c, const model_tensor *t, hfinit_rule *r, qs_diag *d);

/* FNV-1a 64 of the name's bytes (the per-tensor stream key above). */
uint64_t hfinit_name_hash(const char *name);

/* Values of chunk `chunk` of tensor t into out[]; returns how many (at most
 * HFINIT_CHUNK_ELEMS, 0 past the end). */
size_t hfinit_chunk_fill(const model_tensor *t, const hfinit_rule *r, uint64_t seed, size_t chunk,
                         float *out);

/* Shard assignment of n tensors of bytes[i] each (see above): shard_of[i] in
 * [0, n_shards); returns n_shards (0 when n == 0). */
int hfinit_shard_plan(const uint64_t *bytes, int n, uint64_t max_shard_bytes, int *shard_of);

typedef struct hfinit_opts {
    uint64_t seed;
    int dtype;                  /* SAFETENSORS_F32 or SAFETENSORS_BF16 */
    uint64_t max_shard_bytes;   /* 0: HFINIT_MAX_SHARD_BYTES_DEFAULT */
} hfinit_opts;

typedef struct hfinit_summary {
    int n_tensors;
    size_t n_params;            /* exact element count */
    int n_files;                /* safetensors files written */
    uint64_t total_bytes;       /* tensor data bytes (the index's total_size) */
} hfinit_summary;

/* Writes the weights of c into the existing directory dir (model.safetensors,
 * or the shards and the index).  Each file appears only complete (tmp +
 * rename); the caller makes the directory as a whole atomic.  Peak memory:
 * the table plus a batch of chunks (16 x HFINIT_CHUNK_ELEMS floats). */
int hfinit_weights_write(const llama_config *c, const char *dir, const hfinit_opts *o,
                         hfinit_summary *s, qs_diag *d);

/* "bfloat16" / "float32" for SAFETENSORS_BF16 / SAFETENSORS_F32, else NULL. */
const char *hfinit_torch_dtype(int dtype);

/* config.json text with every top-level "torch_dtype" value set to
 * torch_dtype (added as the last key when absent); every other byte kept.
 * The result is checked to parse (duplicate keys refused) to the same
 * llama_config.  *out is qs_malloc'd.  path is for diagnostics. */
int hfinit_config_text(const char *text, size_t n, const char *torch_dtype, char **out,
                       size_t *out_n, const char *path, qs_diag *d);

#endif
