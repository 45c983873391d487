/* bench_tokenizer.c: tokenizer load time and encode throughput (make bench).
 *
 * Load: median of 5 tokenizer_create() calls, with the ratio to a bare Jansson
 * parse of the same file measured in the same run (our work on top of parsing).
 * A synthetic byte-level tokenizer.json with a 150k vocabulary (the size of
 * Qwen2 / openPangu) is generated in /tmp so this runs without ../shared.
 * Encode: median of 3 passes over a corpus file from ../shared (skipped when absent).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/tokenizer.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* GPT-2 byte -> printable code point, written as UTF-8 */
static size_t byte_piece(unsigned b, char *o)
{
    int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    unsigned cp = b;
    if (!printable) {
        unsigned k = 0;
        for (unsigned x = 0; x < b; x++)
            k += !((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE);
        cp = 0x100 + k;
    }
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    o[0] = (char)(0xC0 | cp >> 6);
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* vocab: 256 byte pieces + n_merges merged pieces "piece(a) piece(b)" */
static int write_synthetic(const char *path, int n_merges)
{
    json_t *vocab = json_object(), *merges = json_array();
    char **piece = calloc((size_t)(256 + n_merges), sizeof *piece);
    if (!piece)
        return -1;
    for (unsigned b = 0; b < 256; b++) {
        char s[4] = {0};
        byte_piece(b, s);
        piece[b] = strdup(s);
        json_object_set_new(vocab, s, json_integer(b));
    }
    unsigned long long x = 88172645463325252ULL;
    int n = 256;
    while (n < 256 + n_merges) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int a = (int)(x % (unsigned long long)n), b = (int)((x >> 20) % 256);
        size_t la = strlen(piece[a]), lb = strlen(piece[b]);
        if (la + lb > 40)
            continue;
        char *m = malloc(la + lb + 1);
        memcpy(m, piece[a], la);
        memcpy(m + la, piece[b], lb + 1);
        if (json_object_get(vocab, m)) {
            free(m);
            continue;
        }
        char *rule = malloc(la + lb + 2);
        sprintf(rule, "%s %s", piece[a], piece[b]);
        json_array_append_new(merges, json_string(rule));
        free(rule);
        json_object_set_new(vocab, m, json_integer(n));
        piece[n++] = m;
    }
    json_t *root = json_pack("{s:{s:s, s:b, s:b}, s:{s:s}, s:{s:s, s:o, s:o}}", "pre_tokenizer",
                             "type", "ByteLevel", "add_prefix_space", 0, "use_regex", 1,
                             "decoder", "type", "ByteLevel", "model", "type", "BPE", "vocab",
                             vocab, "merges", merges);
    int rc = json_dump_file(root, path, 0);
    json_decref(root);
    for (int i = 0; i < n; i++)
        free(piece[i]);
    free(piece);
    return rc;
}

static void bench_load(const char *label, const char *path)
{
    double t_ours[5], t_parse[5];
    for (int r = 0; r < 5; r++) {
        double t0 = now_s();
        json_t *j = json_load_file(path, 0, NULL);
        t_parse[r] = now_s() - t0;
        json_decref(j);
        qs_diag d = {0};
        tokenizer *t;
        t0 = now_s();
        if (tokenizer_create(&t, path, &d)) {
            printf("%-22s load failed: %s\n", label, d.msg);
            return;
        }
        t_ours[r] = now_s() - t0;
        if (r == 0)
            printf("%-22s vocab %6d  ", label, tokenizer_vocab_size(t));
        tokenizer_destroy(t);
    }
    double mo = median(t_ours, 5), mp = median(t_parse, 5);
    int is_json = strstr(path, ".json") != NULL;
    printf("load median %7.1f ms", 1e3 * mo);
    if (is_json)
        printf("  (bare Jansson parse %7.1f ms, ratio %.2f)", 1e3 * mp, mo / mp);
    printf("\n");
}

static void bench_encode(const char *label, const char *tok_path, const char *text_path)
{
    char *text;
    size_t len;
    qs_diag d = {0};
    tokenizer *t;
    if (fileio_read_all(text_path, &text, &len, &d) || tokenizer_create(&t, tok_path, &d)) {
        printf("%-22s skipped: %s\n", label, d.msg);
        return;
    }
    double tm[3];
    size_t n = 0;
    for (int r = 0; r < 3; r++) {
        int32_t *ids;
        double t0 = now_s();
        if (tokenizer_encode(t, text, len, TOKENIZER_BOS_NO, &ids, &n, &d)) {
            printf("%-22s encode failed: %s\n", label, d.msg);
            break;
        }
        tm[r] = now_s() - t0;
        qs_free(ids);
    }
    double m = median(tm, 3);
    printf("%-22s encode %zu bytes -> %zu tokens: median %.1f ms, %.2f MB/s, %.0f ktok/s\n",
           label, len, n, 1e3 * m, (double)len / m / 1e6, (double)n / m / 1e3);
    tokenizer_destroy(t);
    qs_free(text);
}

int main(void)
{
    const char *root = getenv("QS_SHARED");
    char p[1024], corpus[1024];
    if (!root || !*root)
        root = "../shared";
    const char *synth = "/tmp/qatscope_bench_tok150k.json";
    if (write_synthetic(synth, 150000 - 256) != 0) {
        fprintf(stderr, "bench_tokenizer: cannot write %s\n", synth);
        return 1;
    }
    bench_load("synthetic-150k", synth);
    static const char *const names[][2] = {
        {"gpt2 json", "tokenizers/gpt2/tokenizer.json"},
        {"llama2 json", "tokenizers/llama2/tokenizer.json"},
        {"llama2 model", "tokenizers/llama2/tokenizer.model"},
    };
    snprintf(corpus, sizeof corpus, "%s/corpora/sherlock-holmes/sherlock.txt", root);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", root, names[i][1]);
        if (!fileio_exists(p)) {
            printf("%-22s skipped: %s missing\n", names[i][0], p);
            continue;
        }
        bench_load(names[i][0], p);
        bench_encode(names[i][0], p, corpus);
    }
    bench_encode("synthetic-150k", synth, corpus);
    remove(synth);
    return 0;
}
