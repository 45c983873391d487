/* shard_build.h: text files -> token shards + manifest (qatscope tokenize --input).
 *
 * Inputs: .txt, .jsonl and their .zst forms.
 *   .txt    one document per paragraph: documents are separated by one or more
 *           blank (whitespace-only) lines; a document keeps its inner newlines.
 *   .jsonl  one JSON object per line with a string field "text" (FineWeb layout);
 *           blank lines are skipped, anything else is an error with its line number.
 * Each document becomes [BOS if the tokenizer adds one] ids EOS, so EOS separates
 * documents.  Documents go to the val split by a seeded shuffle (exactly
 * round(val_fraction * n_docs) of them, at least one when val_fraction > 0),
 * and keep their input order inside each split.
 * Output in OUT: train_NNNNNN.qst, val_NNNNNN.qst (format in qs/shards.h) and
 * manifest.json, written last: a directory without a manifest is incomplete.
 * OUT must be new, empty or an earlier output (only manifest.json and shard files):
 * an earlier output is replaced whole once the inputs have been read and tokenized
 * (no stale shards beside the new manifest); anything else in OUT is refused.
 * The same inputs, tokenizer and options give the same bytes (documents are
 * tokenized in parallel with OpenMP but written in input order).
 */
#ifndef QS_SHARD_BUILD_H
#define QS_SHARD_BUILD_H

#include <stdint.h>

#include "qs/err.h"

typedef struct shard_build_opts {
    double val_fraction;   /* in [0, 0.5]; default 0 */
    uint64_t seed;         /* val selection; default 0 */
    uint64_t shard_tokens; /* tokens per shard file; default 2^26 */
} shard_build_opts;

typedef struct shard_build_summary {
    uint64_t n_docs, train_docs, val_docs;
    uint64_t train_tokens, val_tokens;
    int train_shards, val_shards;
} shard_build_summary;

void shard_build_opts_default(shard_build_opts *o);

/* tok_path: model directory or tokenizer file (as tokenizer_create takes). */
int shard_build_run(const char *tok_path, const char *const *inputs, int n_inputs,
                    const char *out_dir, const shard_build_opts *opts, shard_build_summary *sum,
                    qs_diag *d);

#define SHARD_MANIFEST_NAME "manifest.json"

#endif
