/* tokenizer.h: text <-> token ids, the way Hugging Face tokenizers does it.
 *
 * Backends: tokenizer.json BPE (byte-level GPT-2/Qwen2/Llama-3 style, and
 * SentencePiece-style with metaspace and <0xXX> byte fallback) and SentencePiece
 * tokenizer.model (protobuf, BPE type).  Added/special tokens are matched in the
 * text as HF does; BOS/EOS come from tokenizer_config.json when present.
 * Implementation: src/tok/tokenizer.c over src/tok/tok_*.c (README "tokenize, detokenize").
 *
 * Threads: a created tokenizer is read-only; tokenizer_encode/decode may run
 * concurrently on the same tokenizer (shard building does, under OpenMP).
 */
#ifndef QS_TOKENIZER_H
#define QS_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"

typedef struct tokenizer tokenizer;

/* path: a tokenizer.json, a tokenizer.model, or a model directory (which
 * uses its own tokenizer.json, else tokenizer.model, plus tokenizer_config.json). */
int tokenizer_create(tokenizer **out, const char *path, qs_diag *d);
void tokenizer_destroy(tokenizer *t);   /* NULL ok */

enum { TOKENIZER_BOS_DEFAULT = -1, TOKENIZER_BOS_NO = 0, TOKENIZER_BOS_YES = 1 };

/* Encode len bytes of UTF-8 text.  add_bos: TOKENIZER_BOS_DEFAULT uses the
 * tokenizer's own default (HF add_special_tokens=True behaviour: BOS, and EOS
 * when add_eos_token), TOKENIZER_BOS_NO adds neither, TOKENIZER_BOS_YES adds BOS
 * (and EOS when add_eos_token).  *ids is qs_malloc'd (free with qs_free), also
 * for zero ids. */
int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int add_bos,
                     int32_t **ids, size_t *n_ids, qs_diag *d);
/* Decode ids to UTF-8 (special tokens, i.e. BOS/EOS/unk/control pieces, skipped
 * when skip_special).  Byte-fallback and byte-level tokens give their raw bytes,
 * so decode(encode(x)) == x even when a partial sequence is not valid UTF-8.
 * An id outside [0, vocab_size) is QS_ERANGE.  *text is qs_malloc'd and
 * NUL-terminated. */
int tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n_ids, int skip_special,
                     char **text, size_t *len, qs_diag *d);

int tokenizer_vocab_size(const tokenizer *t);
int32_t tokenizer_bos_id(const tokenizer *t);   /* -1 if none */
int32_t tokenizer_eos_id(const tokenizer *t);   /* -1 if none */
int tokenizer_adds_bos(const tokenizer *t);     /* default BOS behaviour, 0/1 */
const char *tokenizer_piece(const tokenizer *t, int32_t id);  /* vocab string or NULL */
const char *tokenizer_kind(const tokenizer *t); /* "bpe-bytelevel", "bpe-spm", "spm-model" */
/* 64-bit FNV-1a hash of the vocabulary + merges: token shards record it. */
uint64_t tokenizer_hash(const tokenizer *t);

/* Token ids as text (`qatscope detokenize` arguments and stdin, `tokenize --ids`
 * output): decimal integers in [0, 2^31 - 1], an optional '+', separated by
 * spaces, tabs, newlines, CRs or commas.  Appends the ids of text[0..len) to
 * (*ids, *n, *cap), growing *ids with qs_realloc (start from NULL, 0, 0; the
 * caller qs_free's it, also after an error).  A bad token is QS_EFORMAT naming
 * its first bytes.  src/tok/tok_ids.c. */
int tokenizer_ids_parse(const char *text, size_t len, int32_t **ids, size_t *n, size_t *cap,
                        qs_diag *d);

#endif
