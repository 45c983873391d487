/* dataloader.c: (B, T) batches from token shards (contract in include/qs/dataloader.h).
 *
 * All of a split's tokens are held in memory as int32 (CPU-scale data).  The
 * only mutable state is (epoch, cursor) plus the current epoch's permutation,
 * which is recomputed from (seed, epoch) on restore, so nothing else needs
 * saving for a bit-exact resume.
 */
#include "qs/dataloader.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "qs/bytes.h"
#include "qs/digest.h"
#include "qs/fileio.h"
#include "qs/json.h"
#include "qs/mem.h"
#include "qs/rng.h"
#include "qs/shard_build.h"
#include "qs/shards.h"

struct dataloader {
    dataloader_opts o;
    int32_t *tokens; /* (n_tokens) */
    uint64_t n_tokens, n_windows, data_hash;
    uint32_t *order; /* (n_windows) window order of the current epoch */
    uint64_t epoch, cursor;
};

static void order_build(dataloader *dl)
{
    for (uint64_t i = 0; i < dl->n_windows; i++)
        dl->order[i] = (uint32_t)i;
    if (dl->o.shuffle) {
        rng r;
        rng_seed_stream(&r, dl->o.seed, dl->epoch);
        rng_shuffle_u32(&r, dl->order, (size_t)dl->n_windows);
    }
}

static int load_one_file(dataloader *dl, const char *path, const char *split, uint64_t hash,
                         qs_diag *d)
{
    if (strcmp(split, "train"))
        return diag_set(d, QS_ENOTFOUND, path, -1,
                        "a single shard file is the train split: no '%s' split (expected a "
                        "shard directory with a manifest for it)",
                        split);
    shard_header h;
    int rc = shard_read(path, &hash, &h, &dl->tokens, d);
    if (!rc)
        dl->n_tokens = h.n_tokens;
    return rc;
}

/* Read the split's shard list from the manifest and concatenate the shards. */
static int load_split(dataloader *dl, const char *dir, const char *split, uint64_t hash,
                      qs_diag *d)
{
    char mpath[1200], spath[1200];
    if (fileio_exists(dir) && !fileio_is_dir(dir))
        return load_one_file(dl, dir, split, hash, d);
    if (fileio_join(mpath, sizeof mpath, dir, SHARD_MANIFEST_NAME))
        return diag_set(d, QS_ERANGE, dir, -1, "path too long");
    if (!fileio_exists(mpath))
        return diag_set(d, QS_ENOTFOUND, mpath, -1,
                        "not found: expected a shard directory written by 'qatscope tokenize "
                        "--input' (an interrupted run leaves no manifest)");
    json_t *m;
    int rc = qs_json_load_file(mpath, QS_JSON_OBJECT, &m, d);
    if (rc)
        return rc;
    qs_json_at r = qs_json_root(m, mpath, -1), splits, sp, files;
    size_t n_files;
    long long tokens, version, vocab, width;
    const char *format;
    /* what the manifest says of itself and of the shards' encoding, checked when
     * present (tokenize writes every key; a hand-made list of shards may omit them) */
    if ((rc = qs_json_str_or(&r, "format", "qatscope-token-shards", &format, d)))
        goto done;
    if (strcmp(format, "qatscope-token-shards")) {
        rc = qs_json_fail(&r, "format", QS_EFORMAT, d, "expected \"qatscope-token-shards\", "
                          "found \"%.60s\"", format);
        goto done;
    }
    if ((rc = qs_json_i64_or(&r, "version", SHARD_VERSION, SHARD_VERSION, SHARD_VERSION, &version,
                             d)) ||
        (rc = qs_json_i64_or(&r, "vocab_size", 1, INT32_MAX, 0, &vocab, d)) ||
        (rc = qs_json_i64_or(&r, "token_bytes", 2, 4, 0, &width, d)))
        goto done;
    if (width == 3) {
        rc = qs_json_fail(&r, "token_bytes", QS_EFORMAT, d, "expected 2 or 4, found 3");
        goto done;
    }
    if (vocab && width && width != shard_token_bytes_for((int32_t)vocab)) {
        rc = qs_json_fail(&r, "token_bytes", QS_EFORMAT, d, "%lld, but a vocabulary of %lld "
                          "takes %d bytes a token", width, vocab,
                          shard_token_bytes_for((int32_t)vocab));
        goto done;
    }
    if ((rc = qs_json_obj(&r, "splits", &splits, d)) || (rc = qs_json_obj(&splits, split, &sp, d)) ||
        (rc = qs_json_i64(&sp, "tokens", 0, LLONG_MAX, &tokens, d)) ||
        (rc = qs_json_arr(&sp, "shards", &files, &n_files, d)))
        goto done;
    uint64_t want = (uint64_t)tokens, held = 0;
    /* the shards' headers first: the manifest's count is only trusted once they
     * agree with it, since it sizes the allocation (a wrapped count once
     * overflowed it: tests/fuzz/corpus/manifest/tokens_wrap.json) */
    for (size_t i = 0; i < n_files; i++) {
        qs_json_at f = qs_json_item(&files, i);
        const char *name;
        if ((rc = qs_json_str(&f, NULL, &name, d)))
            goto done;
        if (!name[0] || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..") ||
            fileio_join(spath, sizeof spath, dir, name)) {
            rc = qs_json_fail(&f, NULL, QS_EFORMAT, d, "expected a file name, found '%.200s'",
                              name);
            goto done;
        }
        for (size_t j = 0; j < i; j++)   /* one shard read twice, another never */
            if (!strcmp(json_string_value(json_array_get(files.v, j)), name)) {
                rc = qs_json_fail(&f, NULL, QS_EFORMAT, d, "'%.200s' listed twice (also at "
                                  "[%zu])", name, j);
                goto done;
            }
        shard_header h;
        if ((rc = shard_header_read(spath, &h, d)))
            goto done;
        /* the manifest's tokenizer, when it names one, is the shards' */
        const char *mh = json_string_value(json_object_get(m, "tokenizer_hash"));
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h.tokenizer_hash);
        if (mh && strcmp(mh, hex)) {
            rc = qs_json_fail(&r, "tokenizer_hash", QS_EFORMAT, d, "\"%.40s\", but %s was made "
                              "with tokenizer %s", mh, name, hex);
            goto done;
        }
        if (width && h.token_bytes != (uint32_t)width) {
            rc = qs_json_fail(&r, "token_bytes", QS_EFORMAT, d, "%lld, but %s holds %u-byte "
                              "tokens", width, name, h.token_bytes);
            goto done;
        }
        if (h.n_tokens > UINT64_MAX - held) {
            rc = diag_set(d, QS_EFORMAT, spath, -1, "token counts of the shards overflow");
            goto done;
        }
        held += h.n_tokens;
    }
    if (held != want) {
        rc = diag_set(d, QS_EFORMAT, mpath, -1, "splits.%s: manifest says %llu tokens, shards hold %llu",
                      split, (unsigned long long)want, (unsigned long long)held);
        goto done;
    }
    if (want > (SIZE_MAX - 4) / sizeof *dl->tokens ||
        !(dl->tokens = qs_malloc((size_t)want * sizeof *dl->tokens + 4))) {
        rc = diag_set(d, QS_ENOMEM, mpath, -1, "out of memory for %llu tokens",
                      (unsigned long long)want);
        goto done;
    }
    for (size_t i = 0; i < n_files; i++) {
        qs_json_at f = qs_json_item(&files, i);
        const char *name;
        if ((rc = qs_json_str(&f, NULL, &name, d)))
            goto done;
        if (fileio_join(spath, sizeof spath, dir, name)) {
            rc = diag_set(d, QS_ERANGE, mpath, -1, "path too long");
            goto done;
        }
        shard_header h;
        int32_t *t;
        if ((rc = shard_read(spath, &hash, &h, &t, d)) != 0)
            goto done;
        if (h.n_tokens > want - dl->n_tokens) {
            qs_free(t);
            rc = diag_set(d, QS_EFORMAT, spath, -1,
                          "shards hold more tokens than the manifest's %llu",
                          (unsigned long long)want);
            goto done;
        }
        memcpy(dl->tokens + dl->n_tokens, t, (size_t)h.n_tokens * sizeof *t);
        dl->n_tokens += h.n_tokens;
        qs_free(t);
    }
    if (dl->n_tokens != want)
        rc = diag_set(d, QS_EFORMAT, mpath, -1, "splits.%s: manifest says %llu tokens, shards hold %llu",
                      split, (unsigned long long)want, (unsigned long long)dl->n_tokens);
done:
    json_decref(m);
    return rc;
}

int dataloader_create(dataloader **out, const char *shard_dir, const char *split,
                      uint64_t tokenizer_hash, const dataloader_opts *o, qs_diag *d)
{
    *out = NULL;
    if (o->batch < 1 || o->seq_len < 1)
        return diag_set(d, QS_EINVAL, NULL, -1, "batch %d, seq_len %d: expected both >= 1",
                        o->batch, o->seq_len);
    dataloader *dl = qs_calloc(1, sizeof *dl);
    if (!dl)
        return diag_set(d, QS_ENOMEM, shard_dir, -1, "out of memory");
    dl->o = *o;
    int rc = load_split(dl, shard_dir, split, tokenizer_hash, d);
    uint64_t T = (uint64_t)o->seq_len;
    if (!rc && dl->n_tokens == 0)   /* e.g. the val split of shards tokenized without one */
        rc = diag_set(d, QS_EINVAL, shard_dir, -1,
                      "split '%s' has no tokens (written with 'tokenize --val-fraction 0'? "
                      "tokenize with --val-fraction F > 0, or use the other split)", split);
    else if (!rc && dl->n_tokens < T + 1)
        rc = diag_set(d, QS_EINVAL, shard_dir, -1,
                      "split '%s' has %llu tokens: expected at least seq_len + 1 = %llu", split,
                      (unsigned long long)dl->n_tokens, (unsigned long long)(T + 1));
    if (!rc) {
        dl->n_windows = (dl->n_tokens - 1) / T;
        if (dl->n_windows > UINT32_MAX)
            rc = diag_set(d, QS_ERANGE, shard_dir, -1, "%llu windows: expected < 2^32",
                          (unsigned long long)dl->n_windows);
    }
    uint64_t h = DIGEST_FNV1A64_SEED;   /* over each token's 4 little-endian bytes */
    for (uint64_t i = 0; !rc && i < dl->n_tokens; i++) {
        int32_t t = dl->tokens[i];
        if (o->vocab_size > 0 && t >= o->vocab_size) {
            rc = diag_set(d, QS_EFORMAT, shard_dir, -1,
                          "split '%s' token %llu is id %ld: expected < vocab size %ld", split,
                          (unsigned long long)i, (long)t, (long)o->vocab_size);
            break;
        }
        unsigned char le[4];
        bytes_put_u32le(le, (uint32_t)t);
        h = digest_fnv1a64(h, le, sizeof le);
    }
    dl->data_hash = h;
    if (!rc && !(dl->order = qs_malloc((size_t)dl->n_windows * sizeof *dl->order)))
        rc = diag_set(d, QS_ENOMEM, shard_dir, -1, "out of memory");
    if (rc) {
        dataloader_destroy(dl);
        return rc;
    }
    order_build(dl);
    *out = dl;
    return 0;
}

void dataloader_destroy(dataloader *dl)
{
    if (!dl)
        return;
    qs_free(dl->tokens);
    qs_free(dl->order);
    qs_free(dl);
}

void dataloader_next(dataloader *dl, int32_t *inputs, int32_t *targets)
{
    size_t T = (size_t)dl->o.seq_len;
    for (int b = 0; b < dl->o.batch; b++) {
        if (dl->cursor == dl->n_windows) {
            dl->epoch++;
            dl->cursor = 0;
            order_build(dl);
        }
        const int32_t *w = dl->tokens + (size_t)dl->order[dl->cursor++] * T;
        memcpy(inputs + (size_t)b * T, w, T * sizeof *w);
        memcpy(targets + (size_t)b * T, w + 1, T * sizeof *w);
    }
}

uint64_t dataloader_n_tokens(const dataloader *dl) { return dl->n_tokens; }
uint64_t dataloader_n_windows(const dataloader *dl) { return dl->n_windows; }
const int32_t *dataloader_tokens(const dataloader *dl) { return dl->tokens; }

void dataloader_pos_get(const dataloader *dl, dataloader_pos *pos)
{
    pos->epoch = dl->epoch;
    pos->cursor = dl->cursor;
    pos->n_windows = dl->n_windows;
    pos->data_hash = dl->data_hash;
}

int dataloader_pos_set(dataloader *dl, const dataloader_pos *pos, qs_diag *d)
{
    if (pos->data_hash != dl->data_hash)
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "saved data position is for other data (shard hash %016llx, now "
                        "%016llx): resume on the shards the run was started with",
                        (unsigned long long)pos->data_hash, (unsigned long long)dl->data_hash);
    if (pos->n_windows != dl->n_windows)   /* the same tokens cut into other windows */
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "saved data position is for %llu windows of these shards, now %llu: "
                        "seq_len (the window length) changed since the run started; resume "
                        "with the run's seq_len",
                        (unsigned long long)pos->n_windows, (unsigned long long)dl->n_windows);
    if (pos->cursor > dl->n_windows)
        return diag_set(d, QS_EINVAL, NULL, -1, "saved cursor %llu: expected <= %llu",
                        (unsigned long long)pos->cursor, (unsigned long long)dl->n_windows);
    dl->epoch = pos->epoch;
    dl->cursor = pos->cursor;
    order_build(dl);
    return 0;
}

void dataloader_rewind(dataloader *dl)
{
    dl->epoch = 0;
    dl->cursor = 0;
    order_build(dl);
}

void dataloader_pos_to_bytes(const dataloader_pos *pos, unsigned char out[DATALOADER_POS_BYTES])
{
    memcpy(out, "QSDP", 4);
    out[4] = 1, out[5] = out[6] = out[7] = 0; /* version 1 */
    bytes_put_u64le(out + 8, pos->epoch);
    bytes_put_u64le(out + 16, pos->cursor);
    bytes_put_u64le(out + 24, pos->n_windows);
    bytes_put_u64le(out + 32, pos->data_hash);
}

int dataloader_pos_from_bytes(dataloader_pos *pos, const void *bytes, size_t n_bytes, qs_diag *d)
{
    const unsigned char *p = bytes;
    if (n_bytes != DATALOADER_POS_BYTES || memcmp(p, "QSDP", 4) || p[4] != 1 || p[5] || p[6] ||
        p[7])
        return diag_set(d, QS_EFORMAT, NULL, -1,
                        "data position: expected %d bytes starting \"QSDP\" version 1, found %zu "
                        "bytes",
                        DATALOADER_POS_BYTES, n_bytes);
    pos->epoch = bytes_get_u64le(p + 8);
    pos->cursor = bytes_get_u64le(p + 16);
    pos->n_windows = bytes_get_u64le(p + 24);
    pos->data_hash = bytes_get_u64le(p + 32);
    return 0;
}
