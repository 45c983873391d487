/* test_dataloader.c: (B, T) batches from shards: shift, coverage, seeded order, resume. */
#include <stdio.h>
#include <stdlib.h>

#include "qs/dataloader.h"
#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/shard_build.h"
#include "qs/shards.h"
#include "test.h"

#define HASH 0xC0FFEEULL
#define N_TOK 1001

/* A shard dir by hand: train = tokens 0..N_TOK-1 over three shards (id = position
 * mod 500), val = 50 tokens; manifest as shard_build writes it. */
static const char *make_dir(char *dir, size_t n)
{
    snprintf(dir, n, "%s/dl", test_tmp_dir());
    if (fileio_mkdir_p(dir, NULL))
        return NULL;
    int32_t tok[N_TOK];
    for (int i = 0; i < N_TOK; i++)
        tok[i] = i % 500;
    const int cuts[4] = {0, 300, 700, N_TOK};
    char p[600];
    for (int s = 0; s < 3; s++) {
        snprintf(p, sizeof p, "%s/train_%06d.qst", dir, s);
        if (shard_write(p, tok + cuts[s], (uint64_t)(cuts[s + 1] - cuts[s]), 2, HASH, 1, NULL))
            return NULL;
    }
    snprintf(p, sizeof p, "%s/val_000000.qst", dir);
    if (shard_write(p, tok, 50, 2, HASH, 1, NULL))
        return NULL;
    char m[1024];
    snprintf(m, sizeof m,
             "{\"splits\": {\"train\": {\"tokens\": %d, \"shards\": [\"train_000000.qst\", "
             "\"train_000001.qst\", \"train_000002.qst\"]}, \"val\": {\"tokens\": 50, "
             "\"shards\": [\"val_000000.qst\"]}}}\n",
             N_TOK);
    snprintf(p, sizeof p, "%s/%s", dir, SHARD_MANIFEST_NAME);
    return fileio_write_atomic(p, m, strlen(m), NULL) ? NULL : dir;
}

static dataloader_opts opts(int B, int T, uint64_t seed, int shuffle)
{
    dataloader_opts o = {.batch = B, .seq_len = T, .seed = seed, .shuffle = shuffle,
                         .vocab_size = 500};
    return o;
}

TEST(dataloader, targets_are_inputs_shifted_and_epoch_covers_every_window)
{
    char dir[512];
    ASSERT_TRUE(make_dir(dir, sizeof dir) != NULL);
    dataloader *dl;
    qs_diag d = {0};
    dataloader_opts o = opts(4, 10, 1, 1);
    ASSERT_OK(dataloader_create(&dl, dir, "train", HASH, &o, &d), &d);
    ASSERT_EQ_INT(dataloader_n_tokens(dl), N_TOK);
    ASSERT_EQ_INT(dataloader_n_windows(dl), 100); /* (1001 - 1) / 10 */
    int seen[100] = {0};
    int32_t in[40], tg[40];
    for (int k = 0; k < 25; k++) { /* 25 batches x 4 = one epoch */
        dataloader_next(dl, in, tg);
        for (int b = 0; b < 4; b++) {
            int32_t first = in[b * 10];
            ASSERT_TRUE(first % 10 == 0); /* window start = w*T (ids are positions mod 500) */
            for (int t = 0; t < 10; t++) {
                ASSERT_EQ_INT(in[b * 10 + t], (first + t) % 500);
                ASSERT_EQ_INT(tg[b * 10 + t], (first + t + 1) % 500);
            }
            int w = first / 10; /* positions 0..999 map to ids 0..499 twice */
            seen[w]++;
        }
    }
    /* ids repeat with period 500, so window w and w+50 look alike: count pairs */
    for (int w = 0; w < 50; w++)
        ASSERT_EQ_INT(seen[w] + seen[w + 50], 2);
    dataloader_pos pos;
    dataloader_pos_get(dl, &pos);
    ASSERT_EQ_INT(pos.epoch, 0);
    ASSERT_EQ_INT(pos.cursor, 100);
    dataloader_next(dl, in, tg);
    dataloader_pos_get(dl, &pos);
    ASSERT_EQ_INT(pos.epoch, 1);
    ASSERT_EQ_INT(pos.cursor, 4);
    dataloader_destroy(dl);
}

static void run_batches(dataloader *dl, int n, int32_t *out /* n * B*T */, int bt)
{
    int32_t *tg = qs_malloc((size_t)bt * sizeof *tg);
    for (int k = 0; k < n; k++)
        dataloader_next(dl, out + (size_t)k * bt, tg);
    qs_free(tg);
}

TEST(dataloader, order_is_fixed_by_seed)
{
    char dir[512];
    ASSERT_TRUE(make_dir(dir, sizeof dir) != NULL);
    qs_diag d = {0};
    dataloader *a, *b, *c;
    dataloader_opts o1 = opts(3, 8, 42, 1), o2 = opts(3, 8, 43, 1);
    ASSERT_OK(dataloader_create(&a, dir, "train", HASH, &o1, &d), &d);
    ASSERT_OK(dataloader_create(&b, dir, "train", HASH, &o1, &d), &d);
    ASSERT_OK(dataloader_create(&c, dir, "train", HASH, &o2, &d), &d);
    static int32_t xa[60 * 24], xb[60 * 24], xc[60 * 24];
    run_batches(a, 60, xa, 24); /* 60 batches: crosses into a second epoch */
    run_batches(b, 60, xb, 24);
    run_batches(c, 60, xc, 24);
    ASSERT_TRUE(memcmp(xa, xb, sizeof xa) == 0);
    ASSERT_TRUE(memcmp(xa, xc, sizeof xa) != 0);
    /* the second epoch is a different permutation from the first */
    ASSERT_TRUE(memcmp(xa, xa + 41 * 24, 5 * 24 * sizeof *xa) != 0);
    dataloader_destroy(a);
    dataloader_destroy(b);
    dataloader_destroy(c);
}

TEST(dataloader, resume_continues_bit_exactly)
{
    char dir[512];
    ASSERT_TRUE(make_dir(dir, sizeof dir) != NULL);
    qs_diag d = {0};
    dataloader_opts o = opts(4, 16, 7, 1);
    dataloader *full, *first, *resumed;
    ASSERT_OK(dataloader_create(&full, dir, "train", HASH, &o, &d), &d);
    static int32_t straight[40 * 64], tail[25 * 64], scratch[15 * 64];
    run_batches(full, 40, straight, 64); /* 62 windows/epoch: crosses epochs */
    ASSERT_OK(dataloader_create(&first, dir, "train", HASH, &o, &d), &d);
    run_batches(first, 15, scratch, 64);
    dataloader_pos pos;
    dataloader_pos_get(first, &pos);
    dataloader_destroy(first); /* "kill" */
    ASSERT_OK(dataloader_create(&resumed, dir, "train", HASH, &o, &d), &d);
    ASSERT_OK(dataloader_pos_set(resumed, &pos, &d), &d);
    run_batches(resumed, 25, tail, 64);
    ASSERT_TRUE(memcmp(straight + 15 * 64, tail, sizeof tail) == 0);
    /* a position from other data is refused */
    dataloader_pos bad = pos;
    bad.data_hash ^= 1;
    ASSERT_EQ_INT(dataloader_pos_set(resumed, &bad, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "other data") != NULL);
    /* the same shards cut into other windows: seq_len changed, and the message says so */
    bad = pos;
    bad.n_windows += 7;
    ASSERT_EQ_INT(dataloader_pos_set(resumed, &bad, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "seq_len (the window length) changed") != NULL);
    dataloader_destroy(resumed);
    dataloader_destroy(full);
}

TEST(dataloader, val_split_runs_in_stream_order)
{
    char dir[512];
    ASSERT_TRUE(make_dir(dir, sizeof dir) != NULL);
    qs_diag d = {0};
    dataloader_opts o = opts(2, 7, 0, 0);
    dataloader *dl;
    ASSERT_OK(dataloader_create(&dl, dir, "val", HASH, &o, &d), &d);
    ASSERT_EQ_INT(dataloader_n_windows(dl), 7); /* (50 - 1) / 7 */
    int32_t in[14], tg[14];
    dataloader_next(dl, in, tg);
    ASSERT_EQ_INT(in[0], 0);
    ASSERT_EQ_INT(in[7], 7);
    ASSERT_EQ_INT(tg[13], 14);
    dataloader_rewind(dl);
    dataloader_next(dl, in, tg);
    ASSERT_EQ_INT(in[7], 7);
    dataloader_destroy(dl);
}

TEST(dataloader, refuses_other_tokenizer_missing_manifest_and_short_split)
{
    char dir[512];
    ASSERT_TRUE(make_dir(dir, sizeof dir) != NULL);
    qs_diag d = {0};
    dataloader *dl = NULL;
    dataloader_opts o = opts(2, 8, 0, 1);
    ASSERT_EQ_INT(dataloader_create(&dl, dir, "train", HASH + 1, &o, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "tokenizer hash") != NULL);
    ASSERT_TRUE(strstr(d.path, "train_000000.qst") != NULL);
    ASSERT_TRUE(dl == NULL);
    ASSERT_EQ_INT(dataloader_create(&dl, test_tmp_dir(), "train", HASH, &o, &d), QS_ENOTFOUND);
    ASSERT_TRUE(strstr(d.path, "manifest.json") != NULL);
    o.seq_len = 50; /* val has 50 tokens: needs 51 */
    ASSERT_EQ_INT(dataloader_create(&dl, dir, "val", HASH, &o, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "at least seq_len + 1") != NULL);
    o.seq_len = 8;
    o.vocab_size = 100; /* ids go up to 499 */
    ASSERT_EQ_INT(dataloader_create(&dl, dir, "train", HASH, &o, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "vocab size") != NULL);
}

TEST(dataloader, reads_what_tokenize_input_writes)
{
    char txt[512], out[512];
    snprintf(txt, sizeof txt, "%s/dl_docs.txt", test_tmp_dir());
    snprintf(out, sizeof out, "%s/dl_built", test_tmp_dir());
    const char *text = "The quick brown fox jumps over the lazy dog.\n\nThe dog sleeps.\n\n"
                       "Numbers like 12, 345 and 6789.\n\nTokens, merges and merging.\n";
    ASSERT_OK(fileio_write_atomic(txt, text, strlen(text), NULL), NULL);
    const char *inputs[1] = {txt};
    shard_build_opts bo;
    shard_build_opts_default(&bo);
    shard_build_summary sum;
    qs_diag d = {0};
    ASSERT_OK(shard_build_run("tests/data/tok/tiny_spm.json", inputs, 1, out, &bo, &sum, &d), &d);
    char shard[600];
    snprintf(shard, sizeof shard, "%s/train_000000.qst", out);
    shard_header h;
    ASSERT_OK(shard_header_read(shard, &h, &d), &d);
    dataloader_opts o = {.batch = 2, .seq_len = 4, .seed = 3, .shuffle = 1, .vocab_size = 0};
    dataloader *dl;
    ASSERT_OK(dataloader_create(&dl, out, "train", h.tokenizer_hash, &o, &d), &d);
    ASSERT_EQ_INT(dataloader_n_tokens(dl), sum.train_tokens);
    dataloader_destroy(dl);
    /* no val split (val fraction 0, the default): the message says how to get one */
    ASSERT_EQ_INT(sum.val_tokens, 0);
    ASSERT_EQ_INT(dataloader_create(&dl, out, "val", h.tokenizer_hash, &o, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "split 'val' has no tokens") && strstr(d.msg, "--val-fraction"));
}

TEST(dataloader, position_bytes_round_trip_and_reject_garbage)
{
    dataloader_pos a = {3, 17, 100, 0x0123456789ABCDEFULL}, b;
    unsigned char buf[DATALOADER_POS_BYTES];
    dataloader_pos_to_bytes(&a, buf);
    qs_diag d = {0};
    ASSERT_OK(dataloader_pos_from_bytes(&b, buf, sizeof buf, &d), &d);
    ASSERT_TRUE(memcmp(&a, &b, sizeof a) == 0);
    buf[4] = 2;
    ASSERT_EQ_INT(dataloader_pos_from_bytes(&b, buf, sizeof buf, &d), QS_EFORMAT);
    ASSERT_EQ_INT(dataloader_pos_from_bytes(&b, buf, 12, &d), QS_EFORMAT);
}

TEST(dataloader, single_shard_file_is_the_train_split)
{
    char dir[512], p[600];
    ASSERT_TRUE(make_dir(dir, sizeof dir) != NULL);
    snprintf(p, sizeof p, "%s/train_000001.qst", dir); /* 400 tokens */
    qs_diag d = {0};
    dataloader_opts o = opts(2, 9, 0, 1);
    dataloader *dl;
    ASSERT_OK(dataloader_create(&dl, p, "train", HASH, &o, &d), &d);
    ASSERT_EQ_INT(dataloader_n_tokens(dl), 400);
    dataloader_destroy(dl);
    ASSERT_EQ_INT(dataloader_create(&dl, p, "val", HASH, &o, &d), QS_ENOTFOUND);
    ASSERT_EQ_INT(dataloader_create(&dl, p, "train", HASH ^ 1, &o, &d), QS_EINVAL);
}

/* A manifest token count that disagrees with the shards is refused before it
 * sizes anything: 2^62 + 10 tokens once wrapped the allocation to 44 bytes
 * (fuzz: tests/fuzz/corpus/manifest/tokens_wrap.json). */
TEST(dataloader, manifest_token_count_is_checked_against_the_shard_headers)
{
    char dir[512], p[700];
    ASSERT_TRUE(make_dir(dir, sizeof dir) != NULL);
    snprintf(p, sizeof p, "%s/%s", dir, SHARD_MANIFEST_NAME);
    static const char *const bad[] = {
        "{\"splits\":{\"train\":{\"tokens\":4611686018427387914,\"shards\":[\"train_000000.qst\"]}}}",
        "{\"splits\":{\"train\":{\"tokens\":301,\"shards\":[\"train_000000.qst\"]}}}",
        "{\"splits\":{\"train\":{\"tokens\":300,\"shards\":[\"..\"]}}}",
        /* one shard read twice and another never (the total may still match) */
        "{\"splits\":{\"train\":{\"tokens\":600,\"shards\":[\"train_000000.qst\",\"train_000000.qst\"]}}}",
        /* the manifest names another tokenizer than its shards were made with */
        "{\"tokenizer_hash\":\"zz\",\"splits\":{\"train\":{\"tokens\":300,\"shards\":[\"train_000000.qst\"]}}}",
        /* what it says of itself and of the encoding, when it says it */
        "{\"format\":\"other\",\"splits\":{\"train\":{\"tokens\":300,\"shards\":[\"train_000000.qst\"]}}}",
        "{\"version\":7,\"splits\":{\"train\":{\"tokens\":300,\"shards\":[\"train_000000.qst\"]}}}",
        "{\"token_bytes\":3,\"splits\":{\"train\":{\"tokens\":300,\"shards\":[\"train_000000.qst\"]}}}",
        "{\"vocab_size\":100000,\"token_bytes\":2,\"splits\":{\"train\":{\"tokens\":300,\"shards\":[\"train_000000.qst\"]}}}",
        "{\"vocab_size\":100000,\"token_bytes\":4,\"splits\":{\"train\":{\"tokens\":300,\"shards\":[\"train_000000.qst\"]}}}"};
    static const char *const why[] = {"manifest says 4611686018427387914 tokens, shards hold 300",
                                      "manifest says 301 tokens, shards hold 300",
                                      "expected a file name",
                                      "$.splits.train.shards[1]: 'train_000000.qst' listed twice (also at [0])",
                                      "$.tokenizer_hash: \"zz\", but train_000000.qst was made with tokenizer ",
                                      "$.format: expected \"qatscope-token-shards\", found \"other\"",
                                      "$.version: ",
                                      "$.token_bytes: expected 2 or 4, found 3",
                                      "$.token_bytes: 2, but a vocabulary of 100000 takes 4 bytes a token",
                                      "$.token_bytes: 4, but train_000000.qst holds 2-byte tokens"};
    dataloader_opts o = opts(2, 8, 0, 1);
    for (int i = 0; i < (int)(sizeof bad / sizeof *bad); i++) {
        ASSERT_OK(fileio_write_atomic(p, bad[i], strlen(bad[i]), NULL), NULL);
        qs_diag d = {0};
        dataloader *dl = NULL;
        int rc = dataloader_create(&dl, dir, "train", HASH, &o, &d);
        ASSERT_TRUE(rc == QS_EFORMAT || rc == QS_ERANGE);
        if (!strstr(d.msg, why[i]))
            fprintf(stderr, "    case %d: %s\n", i, d.msg);
        ASSERT_TRUE(strstr(d.msg, why[i]) != NULL);
        ASSERT_TRUE(dl == NULL);
    }
    ASSERT_TRUE(make_dir(dir, sizeof dir) != NULL);   /* the good manifest back */
}
