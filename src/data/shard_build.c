/* shard_build.c: text files -> token shards + manifest (see include/qs/shard_build.h).
 *
 * Pipeline, one function each: read inputs -> cut documents -> choose val docs
 * (seeded shuffle) -> tokenize documents (OpenMP over documents; each thread
 * writes only its documents' slots, so the result does not depend on the thread
 * count) -> concatenate per split in input order -> shard files -> manifest.
 * Whole inputs are held in memory: this is sized for CPU-scale continued
 * pretraining (hundreds of MB of text), not for terabyte corpora.
 */
#include "qs/shard_build.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qs/fileio.h"
#include "qs/json.h"
#include "qs/mem.h"
#include "qs/rng.h"
#include "qs/shards.h"
#include "qs/tokenizer.h"

typedef struct doc {
    const char *text;
    size_t len;
    char *owned; /* decoded JSON string, or NULL when text points into a file buffer */
    int32_t *ids;
    size_t n_ids;
    int is_val;
} doc;

typedef struct corpus {
    char **files; /* (n_files) whole input files */
    int n_files;
    doc *docs;
    size_t n_docs, cap;
} corpus;

void shard_build_opts_default(shard_build_opts *o)
{
    o->val_fraction = 0.0;
    o->seed = 0;
    o->shard_tokens = (uint64_t)1 << 26;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

static int doc_add(corpus *c, const char *text, size_t len, char *owned)
{
    doc *nd = qs_grow(c->docs, &c->cap, c->n_docs + 1, sizeof *nd, 1024);
    if (!nd)
        return QS_ENOMEM;
    c->docs = nd;
    doc *dc = &c->docs[c->n_docs++];
    memset(dc, 0, sizeof *dc);
    dc->text = text;
    dc->len = len;
    dc->owned = owned;
    return 0;
}

static int line_is_blank(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\f' && s[i] != '\v')
            return 0;
    return 1;
}

/* Paragraphs: maximal runs of non-blank lines. */
static int docs_from_txt(corpus *c, const char *buf, size_t n)
{
    size_t pos = 0, start = SIZE_MAX, end = 0;
    if (n >= 3 && !memcmp(buf, "\xEF\xBB\xBF", 3))
        pos = 3; /* UTF-8 byte-order mark */
    while (pos <= n) {
        const char *nl = pos < n ? memchr(buf + pos, '\n', n - pos) : NULL;
        size_t line_end = nl ? (size_t)(nl - buf) : n;
        int blank = line_is_blank(buf + pos, line_end - pos);
        if (!blank) {
            if (start == SIZE_MAX)
                start = pos;
            end = line_end;
            if (end > start && buf[end - 1] == '\r')
                end--;
        }
        if ((blank || !nl) && start != SIZE_MAX) {
            int rc = doc_add(c, buf + start, end - start, NULL);
            if (rc)
                return rc;
            start = SIZE_MAX;
        }
        if (!nl)
            break;
        pos = line_end + 1;
    }
    return 0;
}

static int docs_from_jsonl(corpus *c, const char *path, const char *buf, size_t n, qs_diag *d)
{
    long lineno = 0;
    for (size_t pos = 0; pos < n;) {
        const char *nl = memchr(buf + pos, '\n', n - pos);
        size_t line_end = nl ? (size_t)(nl - buf) : n;
        lineno++;
        if (!line_is_blank(buf + pos, line_end - pos)) {
            json_t *o;
            const char *text;
            int rc = qs_json_load_text(buf + pos, line_end - pos, path, lineno, QS_JSON_OBJECT, &o,
                                       d);
            qs_json_at rec = qs_json_root(o, path, lineno);
            if (!rc && (rc = qs_json_str(&rec, "text", &text, d)))
                json_decref(o);
            if (rc)
                return rc;
            const json_t *t = qs_json_key(&rec, "text").v;
            size_t len = json_string_length(t);
            char *owned = len ? qs_malloc(len) : NULL;
            if (len && !owned) {
                json_decref(o);
                return diag_set(d, QS_ENOMEM, path, lineno, "out of memory");
            }
            if (len)
                memcpy(owned, text, len);
            json_decref(o);
            if (len && doc_add(c, owned, len, owned)) {
                qs_free(owned);
                return diag_set(d, QS_ENOMEM, path, lineno, "out of memory");
            }
        }
        pos = line_end + 1;
    }
    return 0;
}

static const char INPUT_TYPES[] = ".txt, .jsonl, .txt.zst or .jsonl.zst";

/* Before any work: every input is a readable file of a known type, and no file
 * is given twice (same device and inode: "a.txt", "./a.txt", a link to it), as
 * its documents would be in the shards twice. */
static int inputs_check(const char *const *inputs, int n_inputs, qs_diag *d)
{
    struct stat *st = qs_calloc((size_t)n_inputs + 1, sizeof *st);
    if (!st)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    int rc = 0;
    for (int i = 0; i < n_inputs && !rc; i++) {
        const char *p = inputs[i];
        char base[1024];
        snprintf(base, sizeof base, "%s", p);
        if (ends_with(base, ".zst"))
            base[strlen(base) - 4] = 0;
        if (stat(p, &st[i]) != 0)
            rc = diag_set(d, errno == ENOENT ? QS_ENOTFOUND : QS_EIO, p, -1,
                          "%s (expected a %s file)", strerror(errno), INPUT_TYPES);
        else if (S_ISDIR(st[i].st_mode))
            rc = diag_set(d, QS_EINVAL, p, -1, "is a directory (expected a %s file)",
                          INPUT_TYPES);
        else if (!ends_with(base, ".txt") && !ends_with(base, ".jsonl"))
            rc = diag_set(d, QS_EINVAL, p, -1, "unknown input type: expected %s", INPUT_TYPES);
        for (int j = 0; j < i && !rc; j++)
            if (st[j].st_dev == st[i].st_dev && st[j].st_ino == st[i].st_ino)
                rc = diag_set(d, QS_EINVAL, p, -1, "is the same file as input %d '%s' "
                              "(expected each input file once)", j + 1, inputs[j]);
    }
    qs_free(st);
    return rc;
}

static int corpus_read(corpus *c, const char *const *inputs, int n_inputs, qs_diag *d)
{
    c->files = qs_calloc((size_t)n_inputs + 1, sizeof *c->files);
    if (!c->files)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    for (int i = 0; i < n_inputs; i++) {
        const char *p = inputs[i];
        char base[1024];
        snprintf(base, sizeof base, "%s", p);
        if (ends_with(base, ".zst"))
            base[strlen(base) - 4] = 0;
        int is_txt = ends_with(base, ".txt");   /* else .jsonl: inputs_check saw to it */
        size_t n;
        int rc = fileio_read_all(p, &c->files[i], &n, d);
        if (rc)
            return rc;
        c->n_files = i + 1;
        rc = is_txt ? docs_from_txt(c, c->files[i], n)
                    : docs_from_jsonl(c, p, c->files[i], n, d);
        if (rc == QS_ENOMEM)
            return diag_set(d, rc, p, -1, "out of memory collecting documents");
        if (rc)
            return rc;
    }
    return 0;
}

static void corpus_free(corpus *c)
{
    for (size_t i = 0; i < c->n_docs; i++) {
        qs_free(c->docs[i].owned);
        qs_free(c->docs[i].ids);
    }
    for (int i = 0; i < c->n_files; i++)
        qs_free(c->files[i]);
    qs_free(c->files);
    qs_free(c->docs);
}

static int choose_val(corpus *c, const shard_build_opts *o, uint64_t *n_val_out)
{
    uint64_t n_val = (uint64_t)(o->val_fraction * (double)c->n_docs + 0.5);
    if (o->val_fraction > 0 && n_val == 0 && c->n_docs >= 2)
        n_val = 1;
    *n_val_out = n_val;
    if (n_val == 0)
        return 0;
    if (c->n_docs > UINT32_MAX)
        return QS_ERANGE;
    uint32_t *perm = qs_malloc(c->n_docs * sizeof *perm);
    if (!perm)
        return QS_ENOMEM;
    for (size_t i = 0; i < c->n_docs; i++)
        perm[i] = (uint32_t)i;
    rng r;
    rng_seed(&r, o->seed);
    rng_shuffle_u32(&r, perm, c->n_docs);
    for (uint64_t k = 0; k < n_val; k++)
        c->docs[perm[k]].is_val = 1;
    qs_free(perm);
    return 0;
}

/* Tokenize every document; the first failing document (in input order) reports. */
static int tokenize_docs(corpus *c, const tokenizer *t, qs_diag *d)
{
    long n = (long)c->n_docs;
    int *rcs = qs_calloc((size_t)n + 1, sizeof *rcs);
    if (!rcs)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 16)
#endif
    for (long i = 0; i < n; i++) {
        doc *dc = &c->docs[i];
        rcs[i] = tokenizer_encode(t, dc->text, dc->len, TOKENIZER_BOS_DEFAULT, &dc->ids,
                                  &dc->n_ids, NULL);
    }
    int rc = 0;
    for (long i = 0; i < n && !rc; i++)
        if (rcs[i])
            rc = tokenizer_encode(t, c->docs[i].text, c->docs[i].len, TOKENIZER_BOS_DEFAULT,
                                  &c->docs[i].ids, &c->docs[i].n_ids, d); /* fills the diag */
    qs_free(rcs);
    return rc;
}

typedef struct split_out {
    const char *name;
    json_t *files; /* array of shard names */
    uint64_t tokens, docs;
    int shards;
} split_out;

/* Token sink that cuts the split's stream into shard files of `cap` tokens. */
typedef struct shard_sink {
    const char *out_dir;
    int width;
    uint64_t hash;
    int32_t *buf;
    uint64_t cap, fill, docs_started;
    split_out *s;
    qs_diag *d;
} shard_sink;

static int sink_flush(shard_sink *k)
{
    if (k->fill == 0)
        return 0;
    char name[64], path[1200];
    snprintf(name, sizeof name, "%s_%06d.qst", k->s->name, k->s->shards);
    if (fileio_join(path, sizeof path, k->out_dir, name))
        return diag_set(k->d, QS_ERANGE, k->out_dir, -1, "path too long");
    int rc = shard_write(path, k->buf, k->fill, k->width, k->hash, k->docs_started, k->d);
    if (rc)
        return rc;
    json_array_append_new(k->s->files, json_string(name));
    k->s->shards++;
    k->s->tokens += k->fill;
    k->fill = 0;
    k->docs_started = 0;
    return 0;
}

static int sink_put(shard_sink *k, const int32_t *ids, size_t n)
{
    while (n > 0) {
        size_t m = (size_t)(k->cap - k->fill) < n ? (size_t)(k->cap - k->fill) : n;
        memcpy(k->buf + k->fill, ids, m * sizeof *ids);
        k->fill += m;
        ids += m;
        n -= m;
        if (k->fill == k->cap) {
            int rc = sink_flush(k);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* The split's documents in input order, each followed by EOS. */
static int write_split(const corpus *c, int want_val, const tokenizer *t, const char *out_dir,
                       const shard_build_opts *o, split_out *s, qs_diag *d)
{
    shard_sink k = {.out_dir = out_dir, .width = shard_token_bytes_for(tokenizer_vocab_size(t)),
                    .hash = tokenizer_hash(t), .cap = o->shard_tokens, .s = s, .d = d};
    k.buf = qs_malloc((size_t)k.cap * sizeof *k.buf);
    if (!k.buf)
        return diag_set(d, QS_ENOMEM, out_dir, -1, "out of memory for a %llu-token shard",
                        (unsigned long long)k.cap);
    int32_t eos = tokenizer_eos_id(t);
    int rc = 0;
    for (size_t i = 0; i < c->n_docs && !rc; i++) {
        const doc *dc = &c->docs[i];
        if (dc->is_val != want_val)
            continue;
        k.docs_started++;
        s->docs++;
        rc = sink_put(&k, dc->ids, dc->n_ids);
        if (!rc)
            rc = sink_put(&k, &eos, 1);
    }
    if (!rc)
        rc = sink_flush(&k);
    qs_free(k.buf);
    return rc;
}

static int write_manifest(const char *out_dir, const tokenizer *t, const char *tok_path,
                          const char *const *inputs, int n_inputs, const shard_build_opts *o,
                          split_out *splits, qs_diag *d)
{
    char hash[24], path[1200];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)tokenizer_hash(t));
    json_t *in = json_array();
    for (int i = 0; i < n_inputs; i++)
        json_array_append_new(in, json_string(inputs[i]));
    json_t *sp = json_object();
    for (int i = 0; i < 2; i++)
        json_object_set_new(sp, splits[i].name,
                            json_pack("{s:I, s:I, s:O}", "tokens", (json_int_t)splits[i].tokens,
                                      "documents", (json_int_t)splits[i].docs, "shards",
                                      splits[i].files));
    json_t *m = json_pack("{s:s, s:i, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:o, s:f, s:I, s:o}",
                          "format", "qatscope-token-shards", "version", SHARD_VERSION,
                          "tokenizer", tok_path, "tokenizer_kind", tokenizer_kind(t),
                          "tokenizer_hash", hash, "vocab_size", tokenizer_vocab_size(t),
                          "token_bytes", shard_token_bytes_for(tokenizer_vocab_size(t)),
                          "bos_id", (int)tokenizer_bos_id(t), "eos_id", (int)tokenizer_eos_id(t),
                          "inputs", in, "val_fraction", o->val_fraction, "seed",
                          (json_int_t)o->seed, "splits", sp);
    const size_t flags = JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12);
    size_t need = m ? json_dumpb(m, NULL, 0, flags) : 0;
    char *text = need ? qs_malloc(need + 1) : NULL;
    if (text) {
        json_dumpb(m, text, need, flags);
        text[need] = '\n';
    }
    json_decref(m);
    if (!text)
        return diag_set(d, QS_ENOMEM, out_dir, -1, "out of memory writing the manifest");
    int rc = fileio_join(path, sizeof path, out_dir, SHARD_MANIFEST_NAME);
    if (rc)
        rc = diag_set(d, rc, out_dir, -1, "path too long");
    else
        rc = fileio_write_atomic(path, text, need + 1, d);
    qs_free(text);
    return rc;
}

/* ---- the output directory: new, empty, or an earlier build (replaced whole) ---- */

/* A name an earlier build writes: manifest.json, {train,val}_NNNNNN.qst, or a temp
 * file of either left by an interrupted write (NAME.tmp.<pid>). */
static int shard_out_name_ours(const char *name)
{
    size_t n = strlen(name);
    const char *tmp = strstr(name, ".tmp.");
    if (tmp) {   /* NAME.tmp.<digits>: judge NAME */
        const char *pid = tmp + 5;
        if (!*pid || pid[strspn(pid, "0123456789")])
            return 0;
        n = (size_t)(tmp - name);
    }
    if (n == strlen(SHARD_MANIFEST_NAME) && !strncmp(name, SHARD_MANIFEST_NAME, n))
        return 1;
    size_t pre = !strncmp(name, "train_", 6) ? 6 : !strncmp(name, "val_", 4) ? 4 : 0;
    size_t digits = pre ? strspn(name + pre, "0123456789") : 0;
    return pre && digits >= 6 && n == pre + digits + 4 && !strncmp(name + pre + digits, ".qst", 4);
}

/* Creates OUT, or checks that everything in it is an earlier build's; nothing is
 * removed yet (a bad input must not cost the old shards). */
static int shard_out_check(const char *out_dir, qs_diag *d)
{
    int rc = fileio_mkdir_p(out_dir, d);
    if (rc)
        return rc;
    DIR *dp = opendir(out_dir);
    if (!dp)
        return diag_set(d, QS_EIO, out_dir, -1, "cannot open the directory: %s", strerror(errno));
    for (struct dirent *e; !rc && (e = readdir(dp));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !shard_out_name_ours(e->d_name))
            rc = diag_set(d, QS_EINVAL, out_dir, -1,
                          "not empty and not an earlier shard output (found '%s'); give a new "
                          "or empty directory",
                          e->d_name);
    closedir(dp);
    return rc;
}

/* Removes an earlier build, manifest first: interrupted from here on, OUT has no
 * manifest and reads as incomplete, never as old and new shards mixed. */
static int shard_out_clear(const char *out_dir, qs_diag *d)
{
    char path[1200];
    if (fileio_join(path, sizeof path, out_dir, SHARD_MANIFEST_NAME))
        return diag_set(d, QS_ERANGE, out_dir, -1, "path too long");
    if (unlink(path) && errno != ENOENT)
        return diag_set(d, QS_EIO, path, -1, "cannot remove the old manifest: %s", strerror(errno));
    DIR *dp = opendir(out_dir);
    if (!dp)
        return diag_set(d, QS_EIO, out_dir, -1, "cannot open the directory: %s", strerror(errno));
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(dp));) {
        if (!shard_out_name_ours(e->d_name))
            continue;
        if (fileio_join(path, sizeof path, out_dir, e->d_name))
            rc = diag_set(d, QS_ERANGE, out_dir, -1, "path too long");
        else if (unlink(path) && errno != ENOENT)
            rc = diag_set(d, QS_EIO, path, -1, "cannot remove an old shard: %s", strerror(errno));
    }
    closedir(dp);
    return rc;
}

int shard_build_run(const char *tok_path, const char *const *inputs, int n_inputs,
                    const char *out_dir, const shard_build_opts *opts, shard_build_summary *sum,
                    qs_diag *d)
{
    memset(sum, 0, sizeof *sum);
    if (!(opts->val_fraction >= 0 && opts->val_fraction <= 0.5) || opts->shard_tokens == 0)
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "val_fraction %g, shard_tokens %llu: expected [0, 0.5] and > 0",
                        opts->val_fraction, (unsigned long long)opts->shard_tokens);
    tokenizer *t = NULL;
    corpus c = {0};
    split_out splits[2] = {{.name = "train"}, {.name = "val"}};
    splits[0].files = json_array();
    splits[1].files = json_array();
    uint64_t n_val = 0;
    int rc = tokenizer_create(&t, tok_path, d);
    if (!rc && tokenizer_eos_id(t) < 0)
        rc = diag_set(d, QS_EUNSUPPORTED, tok_path, -1,
                      "tokenizer has no EOS token: expected one to separate documents");
    int made_dir = !fileio_exists(out_dir), writing = 0;
    if (!rc)
        rc = inputs_check(inputs, n_inputs, d);
    if (!rc)
        rc = shard_out_check(out_dir, d);
    if (!rc)
        rc = corpus_read(&c, inputs, n_inputs, d);
    if (!rc && c.n_docs == 0)
        rc = diag_set(d, QS_EINVAL, inputs[0], -1, "no documents found in the %d input file(s)",
                      n_inputs);
    if (!rc && (rc = choose_val(&c, opts, &n_val)) != 0)
        rc = diag_set(d, rc, NULL, -1, "out of memory choosing validation documents");
    if (!rc)
        rc = tokenize_docs(&c, t, d);
    if (!rc) {   /* the inputs are good: only now does an earlier build go */
        rc = shard_out_clear(out_dir, d);
        writing = 1;
    }
    for (int i = 0; i < 2 && !rc; i++)
        rc = write_split(&c, i, t, out_dir, opts, &splits[i], d);
    if (!rc)
        rc = write_manifest(out_dir, t, tok_path, inputs, n_inputs, opts, splits, d);
    if (rc && writing) {   /* no shards without their manifest (a full disk, no memory) */
        qs_diag ignored = {0};
        shard_out_clear(out_dir, &ignored);
    }
    if (rc && made_dir)   /* a directory this call made, now empty */
        rmdir(out_dir);
    if (!rc) {
        sum->n_docs = c.n_docs;
        sum->train_docs = splits[0].docs;
        sum->val_docs = splits[1].docs;
        sum->train_tokens = splits[0].tokens;
        sum->val_tokens = splits[1].tokens;
        sum->train_shards = splits[0].shards;
        sum->val_shards = splits[1].shards;
    }
    json_decref(splits[0].files);
    json_decref(splits[1].files);
    corpus_free(&c);
    tokenizer_destroy(t);
    return rc;
}
