/* hfinit.c: random-initialised HF checkpoints, tensor by tensor (see
 * include/qs/hfinit.h for the scheme, the random streams and the sharding).
 *
 * Memory: the size table, one shard's header and a batch of HFINIT_BATCH_CHUNKS
 * chunks of fp32 values; the values go to the file through the streaming
 * safetensors writer, so a 1B model needs the same few MiB as a tiny one.
 * The chunks of a batch are drawn in parallel (each has its own stream, so the
 * bits do not depend on the thread count).
 */
#include "qs/hfinit.h"

#include "qs/digest.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/rng.h"
#include "qs/safetensors.h"

#define HFINIT_BATCH_CHUNKS 16

static int hfi_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

int hfinit_tensor_rule(const llama_config *c, const model_tensor *t, hfinit_rule *r, qs_diag *d)
{
    r->std = 0.0f;
    r->value = 0.0f;
    if (t->ndim == 2) {
        r->std = (float)HFINIT_STD;
        if (hfi_ends_with(t->name, ".o_proj.weight") || hfi_ends_with(t->name, ".down_proj.weight"))
            r->std = (float)(HFINIT_STD / sqrt(2.0 * c->n_layers));
        return 0;
    }
    if (t->ndim == 1 && hfi_ends_with(t->name, "norm.weight")) {
        r->value = 1.0f;
        return 0;
    }
    if (t->ndim == 1 && hfi_ends_with(t->name, ".bias"))
        return 0;
    return diag_set(d, QS_EUNSUPPORTED, NULL, -1,
                    "tensor '%s' has no initialisation rule (see include/qs/hfinit.h)", t->name);
}

uint64_t hfinit_name_hash(const char *name)
{
    return digest_fnv1a64(DIGEST_FNV1A64_SEED, name, strlen(name));
}

size_t hfinit_chunk_fill(const model_tensor *t, const hfinit_rule *r, uint64_t seed, size_t chunk,
                         float *out)
{
    size_t begin = chunk * HFINIT_CHUNK_ELEMS;
    if (begin >= t->n_elems)
        return 0;
    size_t n = t->n_elems - begin < HFINIT_CHUNK_ELEMS ? t->n_elems - begin : HFINIT_CHUNK_ELEMS;
    if (!(r->std > 0.0f)) {
        for (size_t i = 0; i < n; i++)
            out[i] = r->value;
        return n;
    }
    rng g;
    rng_seed_stream(&g, seed ^ hfinit_name_hash(t->name), chunk);
    for (size_t i = 0; i < n; i++)
        out[i] = r->std * rng_normal(&g);
    return n;
}

int hfinit_shard_plan(const uint64_t *bytes, int n, uint64_t max_shard_bytes, int *shard_of)
{
    int n_shards = 0, open = 0, first = 0;
    uint64_t size = 0;
    for (int i = 0; i <= n; i++) {
        int last = i == n;
        if (!last && bytes[i] > max_shard_bytes) {   /* its own shard, now */
            shard_of[i] = n_shards++;
            continue;
        }
        if (open && (last || size + bytes[i] > max_shard_bytes)) {   /* close the open one */
            for (int j = first; j < i; j++)
                if (shard_of[j] < 0)
                    shard_of[j] = n_shards;
            n_shards++;
            open = 0;
            size = 0;
        }
        if (last)
            break;
        if (!open) {
            open = 1;
            first = i;
        }
        shard_of[i] = -1;
        size += bytes[i];
    }
    return n_shards;
}

const char *hfinit_torch_dtype(int dtype)
{
    return dtype == SAFETENSORS_BF16 ? "bfloat16" : dtype == SAFETENSORS_F32 ? "float32" : NULL;
}

/* One shard: header from the table rows in it, then every tensor's chunks in
 * batches drawn in parallel. */
static int hfi_shard_write(const llama_config *c, const model_tensor *t, int nt,
                           const int *shard_of, int shard, const char *path,
                           const hfinit_opts *o, float *buf, qs_diag *d)
{
    safetensors_entry *e = qs_calloc((size_t)nt, sizeof *e);
    if (!e)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    int ne = 0;
    for (int i = 0; i < nt; i++)
        if (shard_of[i] == shard) {
            e[ne].name = t[i].name;
            e[ne].ndim = t[i].ndim;
            e[ne].shape[0] = t[i].shape[0];
            e[ne].shape[1] = t[i].shape[1];
            ne++;
        }
    static const char *const meta[] = {"format", "pt", NULL};
    safetensors_stream *s;
    int rc = safetensors_stream_create(&s, path, e, ne, o->dtype, meta, d);
    qs_free(e);
    for (int i = 0; i < nt && !rc; i++) {
        if (shard_of[i] != shard)
            continue;
        hfinit_rule r;
        if ((rc = hfinit_tensor_rule(c, &t[i], &r, d)))
            break;
        long n_chunks = (long)((t[i].n_elems + HFINIT_CHUNK_ELEMS - 1) / HFINIT_CHUNK_ELEMS);
        for (long c0 = 0; c0 < n_chunks && !rc; c0 += HFINIT_BATCH_CHUNKS) {
            long nb = n_chunks - c0 < HFINIT_BATCH_CHUNKS ? n_chunks - c0 : HFINIT_BATCH_CHUNKS;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) if (nb > 1 && r.std > 0.0f)
#endif
            for (long k = 0; k < nb; k++)
                hfinit_chunk_fill(&t[i], &r, o->seed, (size_t)(c0 + k),
                                  buf + (size_t)k * HFINIT_CHUNK_ELEMS);
            size_t begin = (size_t)c0 * HFINIT_CHUNK_ELEMS;
            size_t n = t[i].n_elems - begin;
            if (n > (size_t)nb * HFINIT_CHUNK_ELEMS)
                n = (size_t)nb * HFINIT_CHUNK_ELEMS;
            rc = safetensors_stream_append(s, buf, n, d);
        }
    }
    if (rc) {
        safetensors_stream_abort(s);
        return rc;
    }
    return safetensors_stream_commit(s, d);
}

static int hfi_index_write(const model_tensor *t, int nt, const int *shard_of, int n_shards,
                           uint64_t total_bytes, const char *dir, qs_diag *d)
{
    char path[4096], shard[64];
    if (fileio_join(path, sizeof path, dir, "model.safetensors.index.json"))
        return diag_set(d, QS_ERANGE, dir, -1, "path too long");
    json_t *root = json_object(), *meta = json_object(), *wm = json_object();
    int bad = !root || !meta || !wm;
    if (!bad) {
        bad |= json_object_set_new(meta, "total_size", json_integer((json_int_t)total_bytes));
        for (int i = 0; i < nt && !bad; i++) {
            snprintf(shard, sizeof shard, "model-%05d-of-%05d.safetensors", shard_of[i] + 1,
                     n_shards);
            bad |= json_object_set_new(wm, t[i].name, json_string(shard));
        }
        bad |= json_object_set(root, "metadata", meta) | json_object_set(root, "weight_map", wm);
    }
    const size_t flags = JSON_INDENT(2) | JSON_SORT_KEYS;
    size_t n = bad ? 0 : json_dumpb(root, NULL, 0, flags);
    char *text = n ? qs_malloc(n + 1) : NULL;
    int rc;
    if (!text || json_dumpb(root, text, n, flags) != n) {
        rc = diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    } else {
        text[n] = '\n';   /* transformers ends the file with a newline */
        rc = fileio_write_atomic(path, text, n + 1, d);
    }
    qs_free(text);
    json_decref(meta);
    json_decref(wm);
    json_decref(root);
    return rc;
}

int hfinit_weights_write(const llama_config *c, const char *dir, const hfinit_opts *o,
                         hfinit_summary *s, qs_diag *d)
{
    memset(s, 0, sizeof *s);
    if (!hfinit_torch_dtype(o->dtype))
        return diag_set(d, QS_EUNSUPPORTED, dir, -1, "init stores F32 or BF16, not %s",
                        safetensors_dtype_name(o->dtype));
    uint64_t max_bytes = o->max_shard_bytes ? o->max_shard_bytes : HFINIT_MAX_SHARD_BYTES_DEFAULT;
    model_tensor *t = NULL;
    int nt = 0;
    if (model_table_create(c, &t, &nt))
        return diag_set(d, QS_ENOMEM, dir, -1, "out of memory");
    uint64_t *bytes = qs_calloc((size_t)nt + 1, sizeof *bytes);
    int *shard_of = qs_calloc((size_t)nt + 1, sizeof *shard_of);
    float *buf = qs_malloc(HFINIT_BATCH_CHUNKS * HFINIT_CHUNK_ELEMS * sizeof *buf);
    int rc = 0;
    if (!bytes || !shard_of || !buf) {
        rc = diag_set(d, QS_ENOMEM, dir, -1, "out of memory");
        goto done;
    }
    hfinit_rule r;
    for (int i = 0; i < nt && !rc; i++) {   /* every tensor has a rule before a byte is written */
        rc = hfinit_tensor_rule(c, &t[i], &r, d);
        bytes[i] = (uint64_t)t[i].n_elems * safetensors_dtype_bytes(o->dtype);
        s->n_params += t[i].n_elems;
        s->total_bytes += bytes[i];
    }
    if (rc)
        goto done;
    int n_shards = hfinit_shard_plan(bytes, nt, max_bytes, shard_of);
    char path[4096], name[64];
    for (int k = 0; k < n_shards && !rc; k++) {
        if (n_shards == 1)
            snprintf(name, sizeof name, "model.safetensors");
        else
            snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", k + 1, n_shards);
        if (fileio_join(path, sizeof path, dir, name))
            rc = diag_set(d, QS_ERANGE, dir, -1, "path too long");
        else
            rc = hfi_shard_write(c, t, nt, shard_of, k, path, o, buf, d);
    }
    if (!rc && n_shards > 1)
        rc = hfi_index_write(t, nt, shard_of, n_shards, s->total_bytes, dir, d);
    s->n_tensors = nt;
    s->n_files = n_shards;
done:
    qs_free(buf);
    qs_free(shard_of);
    qs_free(bytes);
    qs_free(t);
    return rc;
}
