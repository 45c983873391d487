/* tok_spm.c: SentencePiece tokenizer.model (protobuf ModelProto), BPE type.
 *
 * The protobuf is parsed by hand; only the fields encoding needs are read:
 *   ModelProto      1 pieces (repeated), 2 trainer_spec, 3 normalizer_spec
 *   SentencePiece   1 piece (string), 2 score (float), 3 type (enum, 1..6)
 *   TrainerSpec     3 model_type (2 = BPE), 24 treat_whitespace_as_suffix (refused),
 *                   35 byte_fallback, 40 unk_id, 41 bos_id, 42 eos_id
 *   NormalizerSpec  1 name, 2 precompiled_charsmap, 3 add_dummy_prefix,
 *                   4 remove_extra_whitespaces, 5 escape_whitespaces
 * Every length is checked against the bytes left, so a truncated or corrupt file
 * is an error naming the byte offset, never a read past the end.
 * Encoding is sentencepiece's bpe_model.cc: characters merged greedily, highest
 * score first (leftmost on ties), only into pieces that exist and are NORMAL or
 * USER_DEFINED; what is left unknown becomes <0xXX> bytes (byte_fallback) or unk.
 * Normalization (charsmap, whitespace rules, dummy prefix) is tok_spm_norm.c.
 */
#include <string.h>

#include "qs/bytes.h"
#include "qs/fileio.h"
#include "qs/mem.h"
#include "tok_impl.h"

typedef struct pb {
    const unsigned char *p, *end;
    const unsigned char *base; /* start of the file, for offsets in errors */
} pb;

static int pb_varint(pb *b, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end)
            return QS_ETRUNC;
        unsigned c = *b->p++;
        x |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return QS_EFORMAT;
}

/* Next field: *field, *wire; for wire type 2 *sub is the payload; for 0 *v; for 5 *v (bits). */
static int pb_field(pb *b, uint32_t *field, int *wire, pb *sub, uint64_t *v)
{
    uint64_t key;
    int rc = pb_varint(b, &key);
    if (rc)
        return rc;
    *field = (uint32_t)(key >> 3);
    *wire = (int)(key & 7);
    switch (*wire) {
    case 0: return pb_varint(b, v);
    case 1:
        if (b->end - b->p < 8)
            return QS_ETRUNC;
        b->p += 8;
        return 0;
    case 2: {
        uint64_t n;
        if ((rc = pb_varint(b, &n)) != 0)
            return rc;
        if (n > (uint64_t)(b->end - b->p))
            return QS_ETRUNC;
        sub->p = b->p;
        sub->end = b->p + n;
        sub->base = b->base;
        b->p += n;
        return 0;
    }
    case 5: {
        if (b->end - b->p < 4)
            return QS_ETRUNC;
        *v = bytes_get_u32le(b->p);
        b->p += 4;
        return 0;
    }
    default: return QS_EFORMAT;
    }
}

/* One field: number, wire type, payload (wire 2) or value (wires 0 and 5). */
typedef struct pb_fld {
    uint32_t f;
    int w;
    pb sub;
    uint64_t v;
} pb_fld;

/* The next field of b: 1, 0 at the end of b, or a negative code (b stops where it broke). */
static int pb_next(pb *b, pb_fld *x)
{
    if (b->p >= b->end)
        return 0;
    x->v = 0;
    int rc = pb_field(b, &x->f, &x->w, &x->sub, &x->v);
    return rc ? rc : 1;
}

typedef struct spm_spec {
    int64_t model_type, byte_fallback, unk_id, bos_id, eos_id, ws_suffix;
    int64_t add_dummy_prefix, remove_extra_ws, escape_ws;
    const unsigned char *charsmap; /* into the mapped file */
    size_t charsmap_bytes;
    char name[64];
} spm_spec;

static int bad(const char *path, pb *b, int rc, const char *what, qs_diag *d)
{
    return diag_set(d, rc == QS_ETRUNC ? QS_ETRUNC : QS_EFORMAT, path, -1,
                    "%s at byte %ld (expected a SentencePiece ModelProto)", what,
                    (long)(b->p - b->base));
}

static int parse_specs(pb b, spm_spec *s, int which, const char *path, qs_diag *d)
{
    pb_fld x;
    int rc;
    while ((rc = pb_next(&b, &x)) == 1) {
        uint32_t f = x.f;
        int w = x.w;
        pb sub = x.sub;
        uint64_t v = x.v;
        if (which == 2 && w == 0) {
            if (f == 3) s->model_type = (int64_t)v;
            if (f == 24) s->ws_suffix = (int64_t)v;
            if (f == 35) s->byte_fallback = (int64_t)v;
            if (f == 40) s->unk_id = (int32_t)v;
            if (f == 41) s->bos_id = (int32_t)v;
            if (f == 42) s->eos_id = (int32_t)v;
        } else if (which == 3) {
            if (f == 1 && w == 2)
                snprintf(s->name, sizeof s->name, "%.*s", (int)(sub.end - sub.p), sub.p);
            if (f == 2 && w == 2) {
                s->charsmap = sub.p;
                s->charsmap_bytes = (size_t)(sub.end - sub.p);
            }
            if (f == 3 && w == 0) s->add_dummy_prefix = (int64_t)v;
            if (f == 4 && w == 0) s->remove_extra_ws = (int64_t)v;
            if (f == 5 && w == 0) s->escape_ws = (int64_t)v;
        }
    }
    return rc ? bad(path, &b, rc, which == 2 ? "broken trainer_spec" : "broken normalizer_spec", d)
              : 0;
}

/* One SentencePiece message -> piece, score, type. */
static int parse_piece(pb b, const unsigned char **s, size_t *len, float *score, int *type)
{
    *s = NULL;
    *len = 0;
    *score = 0;
    *type = TOK_TYPE_NORMAL;
    pb_fld x;
    int rc;
    while ((rc = pb_next(&b, &x)) == 1) {
        if (x.f == 1 && x.w == 2) {
            *s = x.sub.p;
            *len = (size_t)(x.sub.end - x.sub.p);
        } else if (x.f == 2 && x.w == 5) {
            uint32_t bits = (uint32_t)x.v;
            memcpy(score, &bits, sizeof *score);
        } else if (x.f == 3 && x.w == 0) {
            if (x.v < 1 || x.v > 6)
                return QS_EFORMAT;
            *type = (int)x.v;
        }
    }
    return rc ? rc : *s ? 0 : QS_EFORMAT;
}

static int load_pieces(struct tokenizer *t, const fileio_map *m, const char *path, qs_diag *d,
                       spm_spec *spec)
{
    pb top = {m->data, m->data + m->bytes, m->data};
    int32_t n = 0;
    pb b = top;
    pb_fld x;
    int rc;
    while ((rc = pb_next(&b, &x)) == 1) { /* pass 1: count pieces, read the specs */
        if (x.f == 1 && x.w == 2 && n < INT32_MAX / 2)
            n++;
        if ((x.f == 2 || x.f == 3) && x.w == 2 &&
            (rc = parse_specs(x.sub, spec, (int)x.f, path, d)) != 0)
            return rc;
    }
    if (rc)
        return bad(path, &b, rc, rc == QS_ETRUNC ? "file ends inside a field" : "bad field", d);
    if (n == 0)
        return diag_set(d, QS_EFORMAT, path, -1,
                        "no pieces found (expected a SentencePiece ModelProto)");
    if (spec->model_type != 2)
        return diag_set(d, QS_EUNSUPPORTED, path, -1,
                        "model_type %lld is not supported (expected 2 = BPE)",
                        (long long)spec->model_type);
    if (spec->ws_suffix)
        return diag_set(d, QS_EUNSUPPORTED, path, -1,
                        "treat_whitespace_as_suffix is not supported (expected a prefix "
                        "\xE2\x96\x81 as in Llama-style models)");
    rc = tok_vocab_alloc_impl(t, n);
    t->score = qs_calloc((size_t)n, sizeof *t->score);
    t->added = qs_calloc((size_t)n, sizeof *t->added);
    if (rc || !t->score || !t->added)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory for %d pieces", n);
    int32_t id = 0;
    for (b = top; pb_next(&b, &x) == 1;) { /* broken fields were refused in pass 1 */
        if (!(x.f == 1 && x.w == 2))
            continue;
        pb sub = x.sub;
        int type;
        const unsigned char *s;
        size_t len;
        float score;
        if (parse_piece(sub, &s, &len, &score, &type))
            return diag_set(d, QS_EFORMAT, path, -1,
                            "piece %d at byte %ld is broken (expected piece, score, type)", id,
                            (long)(sub.p - m->data));
        if ((rc = tok_set_piece_impl(t, id, (const char *)s, len, (const char *)s, len)) != 0)
            return diag_set(d, rc, path, -1, "out of memory for pieces");
        t->score[id] = score;
        t->type[id] = (uint8_t)type;
        if (type == TOK_TYPE_CONTROL || type == TOK_TYPE_UNKNOWN || type == TOK_TYPE_USER) {
            tok_added *a = &t->added[t->n_added++];
            a->id = id;
            a->content_off = t->piece_off[id];
            a->len_bytes = (uint32_t)len;
            a->special = type != TOK_TYPE_USER;
        }
        id++;
    }
    return 0;
}

int tok_spm_load_impl(struct tokenizer *t, const char *path, qs_diag *d)
{
    fileio_map m = {0};
    int rc = fileio_map_open(&m, path, d);
    if (rc)
        return rc;
    if (m.bytes == 0) { /* an empty mapping has no base pointer to walk from */
        fileio_unmap(&m);
        return diag_set(d, QS_EFORMAT, path, -1,
                        "empty file (expected a sentencepiece model protobuf)");
    }
    spm_spec spec = {.model_type = 1, .unk_id = 0, .bos_id = 1, .eos_id = 2,
                     .add_dummy_prefix = 1, .remove_extra_ws = 1, .escape_ws = 1};
    t->kind = TOK_KIND_SPM_MODEL;
    rc = load_pieces(t, &m, path, d, &spec);
    if (!rc && spec.charsmap_bytes > 0)
        rc = tok_spm_charsmap_load_impl(t, spec.charsmap, spec.charsmap_bytes, path, d);
    fileio_unmap(&m);
    if (rc)
        return rc;
    if ((rc = tok_strmap_build_impl(t)) != 0)
        return diag_set(d, rc, path, -1, "out of memory for the vocabulary index");
    tok_byte_ids_find_impl(t);
    for (int b = 0; b < 256; b++)
        if (t->byte_id[b] >= 0 && t->type[t->byte_id[b]] != TOK_TYPE_BYTE)
            t->byte_id[b] = -1;
    t->byte_fallback = spec.byte_fallback != 0;
    int64_t ids[3] = {spec.unk_id, spec.bos_id, spec.eos_id};
    int32_t *dst[3] = {&t->unk_id, &t->bos_id, &t->eos_id};
    for (int k = 0; k < 3; k++)
        *dst[k] = ids[k] >= 0 && ids[k] < t->n_vocab ? (int32_t)ids[k] : -1;
    t->add_bos = t->bos_id >= 0; /* LlamaTokenizer's default; tokenizer_config may override */
    t->norm_prepend = spec.add_dummy_prefix != 0;
    t->norm_replace_space = spec.escape_ws != 0;
    t->remove_extra_ws = spec.remove_extra_ws != 0;
    t->decode_strip_space = t->norm_prepend;
    tok_ms_cut_check_impl(t);
    return 0;
}

int tok_spm_encode_impl(const struct tokenizer *t, const char *s, size_t len, tok_ids *out)
{
    char *norm;
    size_t n;
    int rc = tok_spm_normalize_impl(t, s, len, &norm, &n);
    if (rc || !norm)
        return rc;
    rc = tok_bpe_metaspace_impl(t, norm, n, out);
    qs_free(norm);
    return rc;
}
