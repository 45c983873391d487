/* test_tokenizer.c: ids against independent references, decoding, bad files.
 *
 * tests/data/tok/fixtures.json comes from tools/gen_tok_fixtures.py (Python
 * references: our own GPT-2 byte-level BPE and HF BPE, and sentencepiece).  The
 * tiny_* tokenizers are self-made and always present; the real ones live in
 * ../shared and their tests SKIP without it.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/tokenizer.h"
#include "test.h"

#define FIXTURES "tests/data/tok/fixtures.json"

static int check_round_trip(const char *tok_path, int spm_like);
static int check_round_trip_tiny(const char *path);

/* Encode every fixture text (no BOS) and compare with the reference id string.
 * Returns the number of mismatches (prints the first few), -1 on setup failure. */
static int check_fixture(const char *tok_path, const char *name)
{
    json_error_t jerr;
    json_t *fix = json_load_file(FIXTURES, 0, &jerr);
    qs_diag d = {0};
    tokenizer *t = NULL;
    if (!fix || tokenizer_create(&t, tok_path, &d)) {
        fprintf(stderr, "    setup: %s %s\n", jerr.text, d.msg);
        json_decref(fix);
        return -1;
    }
    json_t *texts = json_object_get(fix, "texts");
    json_t *ids = json_object_get(json_object_get(fix, "ids"), name);
    int bad = json_array_size(ids) ? 0 : -1;
    for (size_t i = 0; i < json_array_size(ids) && bad >= 0; i++) {
        json_t *jt = json_array_get(texts, i);
        int32_t *got;
        size_t n;
        if (tokenizer_encode(t, json_string_value(jt), json_string_length(jt), TOKENIZER_BOS_NO,
                             &got, &n, &d)) {
            bad = -1;
            break;
        }
        char buf[16384];
        size_t o = 0;
        for (size_t k = 0; k < n && o + 16 < sizeof buf; k++)
            o += (size_t)snprintf(buf + o, sizeof buf - o, k ? " %d" : "%d", (int)got[k]);
        buf[o] = 0;
        const char *want = json_string_value(json_array_get(ids, i));
        if (strcmp(buf, want) != 0 && bad++ < 3)
            fprintf(stderr, "    %s text %zu \"%.60s\":\n      got  %.200s\n      want %.200s\n",
                    name, i, json_string_value(jt), buf, want);
        qs_free(got);
    }
    tokenizer_destroy(t);
    json_decref(fix);
    return bad;
}

TEST(tokenizer, tiny_bytelevel_matches_python_reference)
{
    ASSERT_EQ_INT(check_fixture("tests/data/tok/tiny_bytelevel.json", "tiny_bytelevel"), 0);
}

TEST(tokenizer, tiny_spm_matches_python_reference)
{
    ASSERT_EQ_INT(check_fixture("tests/data/tok/tiny_spm.json", "tiny_spm"), 0);
}

TEST(tokenizer, llama3_split_regex_matches_python_re)
{
    ASSERT_EQ_INT(check_fixture("tests/data/tok/tiny_llama3.json", "tiny_llama3"), 0);
}

TEST(tokenizer, qwen2_split_regex_matches_python_re)
{
    ASSERT_EQ_INT(check_fixture("tests/data/tok/tiny_qwen2.json", "tiny_qwen2"), 0);
}

TEST(tokenizer, metaspace_pretokenizer_matches_python_reference)
{
    ASSERT_EQ_INT(check_fixture("tests/data/tok/tiny_metaspace.json", "tiny_metaspace"), 0);
    ASSERT_EQ_INT(check_round_trip_tiny("tests/data/tok/tiny_metaspace.json"), 0);
}

TEST(tokenizer, gpt2_json_matches_python_reference)
{
    char p[512];
    if (!test_shared_path(p, sizeof p, "tokenizers/gpt2/tokenizer.json"))
        SKIP("%.200s missing", p);
    ASSERT_EQ_INT(check_fixture(p, "gpt2"), 0);
}

TEST(tokenizer, llama2_json_matches_sentencepiece)
{
    char p[512];
    if (!test_shared_path(p, sizeof p, "tokenizers/llama2/tokenizer.json"))
        SKIP("%.200s missing", p);
    ASSERT_EQ_INT(check_fixture(p, "llama2"), 0);
}

TEST(tokenizer, llama2_model_matches_sentencepiece)
{
    char p[512];
    if (!test_shared_path(p, sizeof p, "tokenizers/llama2/tokenizer.model"))
        SKIP("%.200s missing", p);
    ASSERT_EQ_INT(check_fixture(p, "llama2"), 0);
}

TEST(tokenizer, stories260k_matches_python_reference)
{
    char p[512];
    if (!test_shared_path(p, sizeof p, "models/stories260K"))
        SKIP("%.200s missing", p);
    ASSERT_EQ_INT(check_fixture(p, "stories260K"), 0);
}

/* llama.cpp's tinyllama vocab test: texts split by "\n__ggml_vocab_test__\n",
 * one line of ids per text (HF ids, no BOS). */
TEST(tokenizer, llama2_json_matches_llamacpp_vocab_test)
{
    char inp[512], outp[512], tp[512];
    if (!test_shared_path(inp, sizeof inp,
                          "tokenizers/llama2/llamacpp_tinyllama_vocab_test/ggml-vocab-tinyllama.gguf.inp") ||
        !test_shared_path(outp, sizeof outp,
                          "tokenizers/llama2/llamacpp_tinyllama_vocab_test/ggml-vocab-tinyllama.gguf.out") ||
        !test_shared_path(tp, sizeof tp, "tokenizers/llama2/tokenizer.json"))
        SKIP("llama.cpp vocab test files missing under ../shared/tokenizers/llama2");
    char *in, *out;
    size_t in_len, out_len;
    qs_diag d = {0};
    tokenizer *t;
    ASSERT_OK(fileio_read_all(inp, &in, &in_len, &d), &d);
    ASSERT_OK(fileio_read_all(outp, &out, &out_len, &d), &d);
    ASSERT_OK(tokenizer_create(&t, tp, &d), &d);
    const char *sep = "\n__ggml_vocab_test__\n";
    char *text = in, *line = out;
    int n_cases = 0, bad = 0;
    for (char *end; (end = strstr(text, sep)) != NULL; text = end + strlen(sep)) {
        char *nl = strchr(line, '\n');
        if (!nl)
            break;
        *nl = 0;
        int32_t *ids;
        size_t n;
        if (tokenizer_encode(t, text, (size_t)(end - text), TOKENIZER_BOS_NO, &ids, &n, &d)) {
            bad++;
            break;
        }
        char buf[8192];
        size_t o = 0;
        for (size_t k = 0; k < n && o + 16 < sizeof buf; k++)
            o += (size_t)snprintf(buf + o, sizeof buf - o, k ? " %d" : "%d", (int)ids[k]);
        buf[o] = 0;
        const char *want = line;
        while (*want == ' ')
            want++;
        if (strcmp(buf, want) != 0 && bad++ < 3)
            fprintf(stderr, "    case %d \"%.40s\": got %.120s want %.120s\n", n_cases, text, buf,
                    want);
        qs_free(ids);
        line = nl + 1;
        n_cases++;
    }
    tokenizer_destroy(t);
    qs_free(in);
    qs_free(out);
    ASSERT_TRUE(n_cases > 10);
    ASSERT_EQ_INT(bad, 0);
}

/* decode(encode(x)) == x for every fixture text the tokenizer can represent */
static int check_round_trip(const char *tok_path, int spm_like)
{
    json_t *fix = json_load_file(FIXTURES, 0, NULL);
    qs_diag d = {0};
    tokenizer *t;
    if (!fix || tokenizer_create(&t, tok_path, &d)) {
        json_decref(fix);
        return -1;
    }
    json_t *texts = json_object_get(fix, "texts");
    int bad = 0;
    for (size_t i = 0; i < json_array_size(texts); i++) {
        const char *s = json_string_value(json_array_get(texts, i));
        size_t len = json_string_length(json_array_get(texts, i));
        /* metaspace tokenizers cannot tell a literal ▁ from a space, and put a
         * space after a special token: HF behaves the same */
        if (spm_like && (strstr(s, "\xE2\x96\x81") || strchr(s, '<')))
            continue;
        if (spm_like == 2 && s[0] == ' ')
            continue;
        int32_t *ids;
        size_t n;
        char *back;
        size_t back_len;
        if (tokenizer_encode(t, s, len, TOKENIZER_BOS_DEFAULT, &ids, &n, &d) ||
            tokenizer_decode(t, ids, n, 0, &back, &back_len, &d)) {
            bad++;
            continue;
        }
        /* with specials kept, a BOS decodes to its text: skip it */
        const char *cmp = back;
        if (tokenizer_adds_bos(t) && n > 0) {
            qs_free(back);
            if (tokenizer_decode(t, ids + 1, n - 1, 0, &back, &back_len, &d))
                return -1;
            cmp = back;
        }
        if ((back_len != len || memcmp(cmp, s, len)) && bad++ < 3)
            fprintf(stderr, "    text %zu: \"%.60s\" came back as \"%.60s\"\n", i, s, cmp);
        qs_free(back);
        qs_free(ids);
    }
    tokenizer_destroy(t);
    json_decref(fix);
    return bad;
}

/* Metaspace pre-tokenizers (unlike the legacy Prepend normalizer) do not prepend
 * to text that starts with a space, and the decoder strips it: HF loses that
 * leading space too, so those texts are left out. */
static int check_round_trip_tiny(const char *path)
{
    return check_round_trip(path, 2);
}

TEST(tokenizer, decode_round_trips_bytelevel)
{
    ASSERT_EQ_INT(check_round_trip("tests/data/tok/tiny_bytelevel.json", 0), 0);
    char p[512];
    if (!test_shared_path(p, sizeof p, "tokenizers/gpt2/tokenizer.json"))
        SKIP("%.200s missing", p);
    ASSERT_EQ_INT(check_round_trip(p, 0), 0);
}

TEST(tokenizer, decode_round_trips_spm_json_and_model)
{
    ASSERT_EQ_INT(check_round_trip("tests/data/tok/tiny_spm.json", 1), 0);
    char p[512];
    if (!test_shared_path(p, sizeof p, "tokenizers/llama2/tokenizer.model"))
        SKIP("%.200s missing", p);
    ASSERT_EQ_INT(check_round_trip(p, 1), 0);
    ASSERT_TRUE(test_shared_path(p, sizeof p, "tokenizers/llama2/tokenizer.json") != NULL);
    ASSERT_EQ_INT(check_round_trip(p, 1), 0);
}

TEST(tokenizer, byte_fallback_decodes_to_the_bytes)
{
    qs_diag d = {0};
    tokenizer *t;
    ASSERT_OK(tokenizer_create(&t, "tests/data/tok/tiny_spm.json", &d), &d);
    const char text[] = "a\tb\x01";
    int32_t *ids;
    size_t n;
    ASSERT_OK(tokenizer_encode(t, text, sizeof text - 1, TOKENIZER_BOS_NO, &ids, &n, &d), &d);
    int saw_tab = 0;
    for (size_t i = 0; i < n; i++)
        saw_tab |= !strcmp(tokenizer_piece(t, ids[i]), "<0x09>");
    char *back;
    size_t len;
    ASSERT_OK(tokenizer_decode(t, ids, n, 1, &back, &len, &d), &d);
    ASSERT_TRUE(saw_tab);
    ASSERT_EQ_INT(len, sizeof text - 1);
    ASSERT_EQ_STR(back, text);
    qs_free(back);
    qs_free(ids);
    tokenizer_destroy(t);
}

TEST(tokenizer, bos_follows_config_and_post_processor)
{
    qs_diag d = {0};
    tokenizer *t;
    int32_t *ids;
    size_t n;
    /* tiny_spm: TemplateProcessing puts <s> before $A, no tokenizer_config.json */
    ASSERT_OK(tokenizer_create(&t, "tests/data/tok/tiny_spm.json", &d), &d);
    ASSERT_EQ_INT(tokenizer_adds_bos(t), 1);
    ASSERT_EQ_INT(tokenizer_bos_id(t), 1);
    ASSERT_EQ_INT(tokenizer_eos_id(t), 2);
    ASSERT_OK(tokenizer_encode(t, "", 0, TOKENIZER_BOS_DEFAULT, &ids, &n, &d), &d);
    ASSERT_EQ_INT(n, 1);
    ASSERT_EQ_INT(ids[0], 1);
    qs_free(ids);
    ASSERT_OK(tokenizer_encode(t, "", 0, TOKENIZER_BOS_NO, &ids, &n, &d), &d);
    ASSERT_EQ_INT(n, 0);
    qs_free(ids);
    tokenizer_destroy(t);
    ASSERT_OK(tokenizer_create(&t, "tests/data/tok/tiny_bytelevel.json", &d), &d);
    ASSERT_EQ_INT(tokenizer_adds_bos(t), 0);
    ASSERT_EQ_STR(tokenizer_piece(t, tokenizer_eos_id(t)), "<|endoftext|>");
    ASSERT_EQ_STR(tokenizer_kind(t), "bpe-bytelevel");
    tokenizer_destroy(t);
}

TEST(tokenizer, hash_differs_between_vocabularies_and_is_stable)
{
    qs_diag d = {0};
    tokenizer *a, *b, *c;
    ASSERT_OK(tokenizer_create(&a, "tests/data/tok/tiny_spm.json", &d), &d);
    ASSERT_OK(tokenizer_create(&b, "tests/data/tok/tiny_spm.json", &d), &d);
    ASSERT_OK(tokenizer_create(&c, "tests/data/tok/tiny_bytelevel.json", &d), &d);
    ASSERT_TRUE(tokenizer_hash(a) == tokenizer_hash(b));
    ASSERT_TRUE(tokenizer_hash(a) != tokenizer_hash(c));
    tokenizer_destroy(a);
    tokenizer_destroy(b);
    tokenizer_destroy(c);
}

TEST(tokenizer, decode_refuses_out_of_range_id)
{
    qs_diag d = {0};
    tokenizer *t;
    ASSERT_OK(tokenizer_create(&t, "tests/data/tok/tiny_spm.json", &d), &d);
    int32_t ids[2] = {5, 1 << 20};
    char *s;
    size_t n;
    ASSERT_EQ_INT(tokenizer_decode(t, ids, 2, 0, &s, &n, &d), QS_ERANGE);
    ASSERT_TRUE(strstr(d.msg, "outside the vocabulary") != NULL);
    tokenizer_destroy(t);
}

/* Every file in tests/data/tok/bad/ is refused with exactly the one-line error
 * stored next to it in NAME.expected (path included, as the CLI prints it). */
TEST(tokenizer, bad_files_give_one_line_errors)
{
    static const char *const names[] = {
        "bad_merge.json", "bad_regex.json", "bad_vocab_id.json", "dup_vocab_id.json", "no_pipeline.json",
        "not_object.json", "truncated.json", "unigram.json", "bad_wire.model",
        "truncated.model", "unigram.model",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[256], exp_path[300], line[1200];
        snprintf(path, sizeof path, "tests/data/tok/bad/%s", names[i]);
        snprintf(exp_path, sizeof exp_path, "%s.expected", path);
        char *want;
        size_t want_len;
        qs_diag d = {0};
        ASSERT_OK(fileio_read_all(exp_path, &want, &want_len, &d), &d);
        while (want_len && want[want_len - 1] == '\n')
            want[--want_len] = 0;
        tokenizer *t = NULL;
        int rc = tokenizer_create(&t, path, &d);
        diag_format(&d, line, sizeof line);
        if (rc == 0 || strcmp(line, want) != 0)
            fprintf(stderr, "    %s: rc %d, got '%s'\n      want '%s'\n", names[i], rc, line, want);
        int same = strcmp(line, want) == 0;
        qs_free(want);
        ASSERT_TRUE(rc < 0);
        ASSERT_TRUE(t == NULL);
        ASSERT_TRUE(strchr(line, '\n') == NULL);
        ASSERT_TRUE(same);
        ASSERT_TRUE(strstr(line, "expected") != NULL);
    }
}

TEST(tokenizer, truncated_real_model_is_refused)
{
    char p[512], tmp[600];
    if (!test_shared_path(p, sizeof p, "tokenizers/llama2/tokenizer.model"))
        SKIP("%.200s missing", p);
    char *data;
    size_t n;
    qs_diag d = {0};
    ASSERT_OK(fileio_read_all(p, &data, &n, &d), &d);
    snprintf(tmp, sizeof tmp, "%s/cut.model", test_tmp_dir());
    int ok = 1;
    for (size_t cut = 1; cut < n && ok; cut += n / 7) { /* cuts inside pieces and specs */
        ASSERT_OK(fileio_write_atomic(tmp, data, cut, &d), &d);
        tokenizer *t = NULL;
        int rc = tokenizer_create(&t, tmp, &d);
        if (rc == 0) { /* a cut exactly between two pieces is a valid, smaller model */
            tokenizer_destroy(t);
            continue;
        }
        ok = rc == QS_ETRUNC || rc == QS_EFORMAT || rc == QS_EUNSUPPORTED;
    }
    qs_free(data);
    ASSERT_TRUE(ok);
}

/* A vocabulary with a piece "a▁" must not be cut before ▁ (the fast path for
 * sentencepiece vocabularies is only taken when no such piece exists). */
TEST(tokenizer, merge_across_metaspace_when_vocab_has_such_piece)
{
    char p[512];
    snprintf(p, sizeof p, "%s/a_ms.json", test_tmp_dir());
    const char *j =
        "{\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": ["
        "{\"type\": \"Prepend\", \"prepend\": \"\xE2\x96\x81\"},"
        "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\xE2\x96\x81\"}]},"
        "\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"vocab\": {\"<unk>\": 0, "
        "\"\xE2\x96\x81\": 1, \"a\": 2, \"b\": 3, \"a\xE2\x96\x81\": 4, \"\xE2\x96\x81" "b\": 5},"
        "\"merges\": [\"a \xE2\x96\x81\", \"\xE2\x96\x81 b\"]}}";
    qs_diag d = {0};
    ASSERT_OK(fileio_write_atomic(p, j, strlen(j), &d), &d);
    tokenizer *t;
    ASSERT_OK(tokenizer_create(&t, p, &d), &d);
    int32_t *ids;
    size_t n;
    ASSERT_OK(tokenizer_encode(t, "a b", 3, TOKENIZER_BOS_NO, &ids, &n, &d), &d);
    /* "▁a▁b": rank 0 merges a+▁ first -> ▁ a▁ b */
    ASSERT_EQ_INT(n, 3);
    ASSERT_EQ_INT(ids[0], 1);
    ASSERT_EQ_INT(ids[1], 4);
    ASSERT_EQ_INT(ids[2], 3);
    qs_free(ids);
    tokenizer_destroy(t);
}

TEST(tokenizer, tiny_model_matches_sentencepiece)
{
    ASSERT_EQ_INT(check_fixture("tests/data/tok/tiny_spm.model", "tiny_spm_model"), 0);
}

/* precompiled charsmap (our own rules) + remove_extra_whitespaces, vs sentencepiece */
TEST(tokenizer, model_charsmap_normalizer_matches_sentencepiece)
{
    ASSERT_EQ_INT(check_fixture("tests/data/tok/tiny_rules.model", "tiny_rules_model"), 0);
}

/* Mutation replay (a poor man's fuzzer, deterministic): truncated and bit-flipped
 * copies of the in-repo tokenizers either load and encode/decode, or fail with a
 * diagnostic; never crash (this runs under ASan+UBSan in make check). */
TEST(tokenizer, mutated_files_never_crash)
{
    static const char *const files[] = {"tests/data/tok/tiny_spm.model",
                                        "tests/data/tok/tiny_rules.model",
                                        "tests/data/tok/tiny_spm.json",
                                        "tests/data/tok/tiny_bytelevel.json"};
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    int loaded = 0, refused = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char *data, tmp[512];
        size_t n;
        qs_diag d = {0};
        ASSERT_OK(fileio_read_all(files[f], &data, &n, &d), &d);
        snprintf(tmp, sizeof tmp, "%s/mut%s", test_tmp_dir(), strrchr(files[f], '.'));
        for (int k = 0; k < 40; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            char *m = qs_malloc(n + 1);
            memcpy(m, data, n);
            size_t len = n;
            if (k % 2 == 0)
                len = (size_t)(x % n); /* truncate */
            else
                for (int b = 0; b < 4; b++) /* flip a few bytes */
                    m[(x >> (8 * b)) % n] ^= (char)(1u << (b + (int)(x & 3)));
            ASSERT_OK(fileio_write_atomic(tmp, m, len, &d), &d);
            qs_free(m);
            tokenizer *t = NULL;
            memset(&d, 0, sizeof d);
            if (tokenizer_create(&t, tmp, &d) == 0) {
                int32_t *ids;
                size_t n_ids;
                char *back;
                size_t blen;
                const char s[] = "The quick  fox\tit's \xE6\x97\xA5\xE6\x9C\xAC </s> 123";
                if (tokenizer_encode(t, s, sizeof s - 1, TOKENIZER_BOS_DEFAULT, &ids, &n_ids, &d) ==
                    0) {
                    if (tokenizer_decode(t, ids, n_ids, 0, &back, &blen, &d) == 0)
                        qs_free(back);
                    qs_free(ids);
                }
                tokenizer_destroy(t);
                loaded++;
            } else {
                ASSERT_TRUE(d.msg[0] != 0);
                ASSERT_TRUE(t == NULL);
                refused++;
            }
        }
        qs_free(data);
    }
    ASSERT_TRUE(refused > 20);
}

/* HF AddedToken lstrip/rstrip: the token swallows the whitespace next to it. */
TEST(tokenizer, added_token_lstrip_rstrip_swallow_spaces)
{
    json_t *j = json_load_file("tests/data/tok/tiny_spm.json", 0, NULL);
    ASSERT_TRUE(j != NULL);
    json_int_t id = (json_int_t)json_object_size(json_object_get(json_object_get(j, "model"), "vocab"));
    json_array_append_new(json_object_get(j, "added_tokens"),
                          json_pack("{s:I, s:s, s:b, s:b, s:b, s:b, s:b}", "id", id, "content",
                                    "<mask>", "lstrip", 1, "rstrip", 1, "special", 1,
                                    "single_word", 0, "normalized", 0));
    char p[512];
    snprintf(p, sizeof p, "%s/mask.json", test_tmp_dir());
    ASSERT_EQ_INT(json_dump_file(j, p, 0), 0);
    json_decref(j);
    qs_diag d = {0};
    tokenizer *t;
    ASSERT_OK(tokenizer_create(&t, p, &d), &d);
    int32_t *a, *b, *both;
    size_t na, nb, nboth;
    ASSERT_OK(tokenizer_encode(t, "a", 1, TOKENIZER_BOS_NO, &a, &na, &d), &d);
    ASSERT_OK(tokenizer_encode(t, "b", 1, TOKENIZER_BOS_NO, &b, &nb, &d), &d);
    ASSERT_OK(tokenizer_encode(t, "a  <mask> b", 11, TOKENIZER_BOS_NO, &both, &nboth, &d), &d);
    ASSERT_EQ_INT(nboth, na + 1 + nb);
    ASSERT_TRUE(memcmp(both, a, na * sizeof *a) == 0);
    ASSERT_EQ_INT(both[na], id);
    ASSERT_TRUE(memcmp(both + na + 1, b, nb * sizeof *b) == 0);
    qs_free(a);
    qs_free(b);
    qs_free(both);
    tokenizer_destroy(t);
}

/* NFC (Qwen2 normalizer) against Python's unicodedata.normalize on random strings
 * of marks, jamo, singletons and precomposed letters: byte-level decoding gives
 * back exactly the normalized bytes. */
TEST(tokenizer, nfc_normalizer_matches_python_unicodedata)
{
    json_t *fix = json_load_file(FIXTURES, 0, NULL);
    qs_diag d = {0};
    tokenizer *t;
    ASSERT_TRUE(fix != NULL);
    ASSERT_OK(tokenizer_create(&t, "tests/data/tok/tiny_qwen2.json", &d), &d);
    json_t *cases = json_object_get(fix, "nfc");
    int bad = 0, changed = 0;
    for (size_t i = 0; i < json_array_size(cases); i++) {
        json_t *in = json_array_get(json_array_get(cases, i), 0);
        json_t *want = json_array_get(json_array_get(cases, i), 1);
        int32_t *ids;
        size_t n, len;
        char *back;
        if (tokenizer_encode(t, json_string_value(in), json_string_length(in), TOKENIZER_BOS_NO,
                             &ids, &n, &d) ||
            tokenizer_decode(t, ids, n, 0, &back, &len, &d)) {
            bad++;
            continue;
        }
        changed += !json_equal(in, want);
        if ((len != json_string_length(want) || memcmp(back, json_string_value(want), len)) &&
            bad++ < 3)
            fprintf(stderr, "    case %zu: got \"%s\" want \"%s\"\n", i, back,
                    json_string_value(want));
        qs_free(back);
        qs_free(ids);
    }
    size_t n_cases = json_array_size(cases);
    tokenizer_destroy(t);
    json_decref(fix);
    ASSERT_TRUE(n_cases >= 100);
    ASSERT_TRUE(changed > 50); /* the cases do exercise normalization */
    ASSERT_EQ_INT(bad, 0);
}

/* A model dir with a tokenizer.model and a tokenizer_config.json that declares an
 * extra special token in added_tokens_decoder (as chat models do). */
TEST(tokenizer, config_added_tokens_decoder_adds_special_tokens)
{
    char dir[512], p[600];
    snprintf(dir, sizeof dir, "%.400s/cfgdir", test_tmp_dir());
    qs_diag d = {0};
    char *model;
    size_t n;
    ASSERT_OK(fileio_mkdir_p(dir, &d), &d);
    ASSERT_OK(fileio_read_all("tests/data/tok/tiny_spm.model", &model, &n, &d), &d);
    snprintf(p, sizeof p, "%s/tokenizer.model", dir);
    ASSERT_OK(fileio_write_atomic(p, model, n, &d), &d);
    qs_free(model);
    const char *cfg = "{\"add_bos_token\": false, \"eos_token\": \"<|end|>\",\n"
                      " \"added_tokens_decoder\": {\"399\": {\"content\": \"<|end|>\", "
                      "\"special\": true}}}\n";
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    ASSERT_OK(fileio_write_atomic(p, cfg, strlen(cfg), &d), &d);
    tokenizer *t;
    ASSERT_OK(tokenizer_create(&t, dir, &d), &d);
    ASSERT_EQ_INT(tokenizer_eos_id(t), 399);
    ASSERT_EQ_INT(tokenizer_adds_bos(t), 0);
    int32_t *ids;
    size_t n_ids;
    ASSERT_OK(tokenizer_encode(t, "the<|end|>", 10, TOKENIZER_BOS_DEFAULT, &ids, &n_ids, &d), &d);
    ASSERT_TRUE(n_ids >= 2);
    ASSERT_EQ_INT(ids[n_ids - 1], 399);
    char *back;
    size_t len;
    ASSERT_OK(tokenizer_decode(t, ids, n_ids, 1, &back, &len, &d), &d);
    ASSERT_EQ_STR(back, "the");
    qs_free(back);
    qs_free(ids);
    tokenizer_destroy(t);
}

/* tests/data/tok/NAME changed by `edit`, written to the temp dir and loaded: the
 * return code, and the one diag line (or "") in line. */
static int load_edited(const char *name, void (*edit)(json_t *), char *line, size_t line_bytes)
{
    char src[256], p[600];
    snprintf(src, sizeof src, "tests/data/tok/%s", name);
    snprintf(p, sizeof p, "%.400s/edited_%s", test_tmp_dir(), name);
    json_t *j = json_load_file(src, 0, NULL);
    if (!j)
        return -1000;
    edit(j);
    int wrote = json_dump_file(j, p, 0);
    json_decref(j);
    if (wrote)
        return -1000;
    qs_diag d = {0};
    tokenizer *t = NULL;
    int rc = tokenizer_create(&t, p, &d);
    line[0] = 0;
    if (rc)
        diag_format(&d, line, line_bytes);
    tokenizer_destroy(t);
    return rc;
}

static json_t *vocab_of(json_t *j)
{
    return json_object_get(json_object_get(j, "model"), "vocab");
}

static void edit_sparse_vocab_id(json_t *j)
{
    json_object_set_new(vocab_of(j), "\xE2\x96\x81" "a", json_integer(1000000));
}

static void edit_sparse_added_id(json_t *j)
{
    json_array_append_new(json_object_get(j, "added_tokens"),
                          json_pack("{s:i, s:s, s:b}", "id", 1000000, "content", "<far>",
                                    "special", 1));
}

static void edit_vocab_gap(json_t *j)
{
    json_object_del(vocab_of(j), "\xE2\x96\x81" "a");
}

/* Ids add one past another (model.vocab 0..N-1, added_tokens after): one id
 * near 1e9 in a small file would size the token table by it (17 GB), so ids
 * beyond the entry count, or leaving a gap, are refused naming token and id. */
TEST(tokenizer, sparse_or_gapped_vocab_ids_are_refused)
{
    char line[1200];
    ASSERT_EQ_INT(load_edited("tiny_spm.json", edit_sparse_vocab_id, line, sizeof line),
                  QS_EFORMAT);
    ASSERT_TRUE(strstr(line, "edited_tiny_spm.json: $.model.vocab[\"\xE2\x96\x81" "a\"]: id "
                             "1000000 is beyond the 352 entries") != NULL);
    ASSERT_TRUE(strstr(line, "expected ids 0..351, without gaps") != NULL);
    ASSERT_EQ_INT(load_edited("tiny_bytelevel.json", edit_sparse_added_id, line, sizeof line),
                  QS_EFORMAT);
    ASSERT_TRUE(strstr(line, "$.added_tokens[1].id: '<far>' has id 1000000, beyond") != NULL);
    ASSERT_EQ_INT(load_edited("tiny_spm.json", edit_vocab_gap, line, sizeof line), QS_EFORMAT);
    ASSERT_TRUE(strstr(line, "$.model.vocab: no token has id 313, yet ids go up to 348") != NULL);
    ASSERT_TRUE(strstr(line, "expected ids 0..348, without gaps") != NULL);
    ASSERT_TRUE(strchr(line, '\n') == NULL);
}

static void edit_decoder_weird(json_t *j)
{
    json_t *list = json_object_get(json_object_get(j, "decoder"), "decoders");
    json_array_set_new(list, 1, json_pack("{s:s}", "type", "Weird"));
}

static void edit_post_unknown_special(json_t *j)
{
    json_t *single = json_object_get(json_object_get(j, "post_processor"), "single");
    json_object_set_new(json_object_get(json_array_get(single, 0), "SpecialToken"), "id",
                        json_string("<zz>"));
}

static void edit_post_special_id(json_t *j)
{
    json_t *sp = json_object_get(json_object_get(j, "post_processor"), "special_tokens");
    json_object_set_new(json_object_get(sp, "<s>"), "ids", json_pack("[i]", 4000));
}

static void edit_unk_missing(json_t *j)
{
    json_object_set_new(json_object_get(j, "model"), "unk_token", json_string("<nope>"));
}

static void edit_unk_absent(json_t *j)
{
    json_object_del(json_object_get(j, "model"), "unk_token");
}

/* An unknown decoder, a post_processor special token outside the vocabulary and
 * an unk_token not in it are refused as unknown normalizers are (an absent
 * unk_token is fine: byte-level BPE has none). */
TEST(tokenizer, bad_decoder_post_processor_and_unk_are_refused)
{
    char line[1200];
    ASSERT_EQ_INT(load_edited("tiny_spm.json", edit_decoder_weird, line, sizeof line),
                  QS_EUNSUPPORTED);
    ASSERT_TRUE(strstr(line, "edited_tiny_spm.json: $.decoder.decoders[1].type: decoder type "
                             "'Weird' is not supported (expected ByteLevel, Metaspace") != NULL);
    ASSERT_EQ_INT(load_edited("tiny_spm.json", edit_post_unknown_special, line, sizeof line),
                  QS_EFORMAT);
    ASSERT_TRUE(strstr(line, "$.post_processor.single[0].SpecialToken.id: special token '<zz>' "
                             "is not listed in special_tokens") != NULL);
    ASSERT_EQ_INT(load_edited("tiny_spm.json", edit_post_special_id, line, sizeof line),
                  QS_EFORMAT);
    ASSERT_TRUE(strstr(line, "$.post_processor.special_tokens[\"<s>\"].ids: special token '<s>' "
                             "has id 4000, not in the vocabulary (expected ids 0..348)") != NULL);
    ASSERT_EQ_INT(load_edited("tiny_spm.json", edit_unk_missing, line, sizeof line), QS_EFORMAT);
    ASSERT_TRUE(strstr(line, "$.model.unk_token: '<nope>' is not in the vocabulary") != NULL);
    ASSERT_TRUE(strchr(line, '\n') == NULL);
    ASSERT_EQ_INT(load_edited("tiny_spm.json", edit_unk_absent, line, sizeof line), 0);
    ASSERT_EQ_INT(load_edited("tiny_bytelevel.json", edit_unk_absent, line, sizeof line), 0);
}
