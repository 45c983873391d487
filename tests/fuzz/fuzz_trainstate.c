/* fuzz_trainstate.c: a checkpoint's train_state.bin -> trainer_state_read into a
 * trainer (a fresh run, made once and reused): the container (trainstate_open), the meta JSON, the Adam
 * moments, the data position (the shard data source's restore), the amax
 * histories, the QSNR cursors, the alarm episodes and the eval state (forgetting
 * baselines, through an eval hook).
 *
 * Fixture (made once per process, removed at exit): a 2-block model small enough
 * that a whole state fits the fuzzer's 64 KiB inputs (hidden 8, vocab 349 of
 * tests/data/tok/tiny_spm.json: 4032 parameters with padding, 12 quantizers on
 * layers.*.mlp.*, amax history 4) and a 64-token shard of it (seq_len 8: 7
 * windows).
 * tools/gen_fuzz_corpus.py (trainstate) writes seeds for exactly this fixture;
 * keep the two in step.
 *
 * Checksums: a mutated payload almost never keeps its FNV-1a, so every input is
 * also tried with the section checksums recomputed, which lets the mutations
 * reach the section parsers behind the container's check. */
#include "fuzz.h"
#include "qs/bytes.h"
#include "qs/digest.h"
#include "qs/dataloader.h"
#include "qs/forget.h"
#include "qs/hfconfig.h"
#include "qs/hfinit.h"
#include "qs/safetensors.h"
#include "qs/shards.h"
#include "qs/tokenizer.h"
#include "qs/trainer_test.h"
#include "qs/trainstate.h"

#define TS_VOCAB 349
#define TS_TOKENS 64

static char ts_fix[400];   /* "" until the fixture is made */

/* the fixture's files (ts_trainer_remove calls it at exit) */
static void ts_fixture_remove(void)
{
    char p[700];
    snprintf(p, sizeof p, "%.400s/model", ts_fix);
    fuzz_dir_remove(p);
    snprintf(p, sizeof p, "%.400s/data", ts_fix);
    fuzz_dir_remove(p);
    rmdir(ts_fix);
    fuzz_scratch_remove();
}

static int ts_fixture(void)
{
    static int state;   /* 0: not tried, 1: ready, -1: failed */
    if (state)
        return state > 0 ? 0 : -1;
    state = -1;
    char model[700], data[700], p[800];
    if (fuzz_subdir(ts_fix, sizeof ts_fix, "tsfix"))
        return -1;
    snprintf(model, sizeof model, "%.400s/model", ts_fix);
    snprintf(data, sizeof data, "%.400s/data", ts_fix);
    if (mkdir(model, 0700) || mkdir(data, 0700))
        return -1;
    static const char config[] =
        "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":8,"
        "\"intermediate_size\":16,\"num_hidden_layers\":2,\"num_attention_heads\":2,"
        "\"num_key_value_heads\":1,\"head_dim\":4,\"vocab_size\":349,"
        "\"max_position_embeddings\":64,\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0,"
        "\"tie_word_embeddings\":true}";
    snprintf(p, sizeof p, "%s/config.json", model);
    if (fuzz_file_write(p, config, sizeof config - 1))
        return -1;
    snprintf(p, sizeof p, "%s/tokenizer.json", model);
    if (fuzz_file_copy("tests/data/tok/tiny_spm.json", p))
        return -1;
    llama_config c;
    hfinit_opts o = {1, SAFETENSORS_F32, 0};
    hfinit_summary s;
    tokenizer *tok = NULL;
    if (hfconfig_load(&c, model, NULL) || hfinit_weights_write(&c, model, &o, &s, NULL) ||
        tokenizer_create(&tok, model, NULL))
        return -1;
    uint64_t hash = tokenizer_hash(tok);
    tokenizer_destroy(tok);
    int32_t ids[TS_TOKENS];
    for (int i = 0; i < TS_TOKENS; i++)
        ids[i] = (i * 37 + 11) % TS_VOCAB;   /* gen_fuzz_corpus.py: ts_tokens() */
    snprintf(p, sizeof p, "%s/train_000000.qst", data);
    if (shard_write(p, ids, TS_TOKENS, 2, hash, 1, NULL))
        return -1;
    static const char manifest[] =
        "{\"splits\":{\"train\":{\"shards\":[\"train_000000.qst\"],\"tokens\":64}}}";
    snprintf(p, sizeof p, "%s/manifest.json", data);
    if (fuzz_file_write(p, manifest, sizeof manifest - 1))
        return -1;
    state = 1;
    return 0;
}

static int ts_eval_save(void *self, void **bytes, size_t *n, qs_diag *d)
{
    return forget_tracker_save(self, bytes, n, d);
}

static int ts_eval_restore(void *self, const void *bytes, size_t n, qs_diag *d)
{
    return forget_tracker_restore(self, bytes, n, d);
}

/* trainstate.c's section checksum: FNV-1a 64 from this start value */
#define TS_HASH_SEED 1469598103934665603ull

/* Recompute every section checksum the layout lets us find; 1 if any changed. */
static int ts_fix_checksums(unsigned char *b, size_t size)
{
    if (size < 16)
        return 0;
    uint32_t n = bytes_get_u32le(b + 12);
    size_t off = 16;
    int changed = 0;
    for (uint32_t i = 0; i < n && size - off >= TRAINSTATE_TAG_BYTES + 16; i++) {
        unsigned char *h = b + off + TRAINSTATE_TAG_BYTES;
        uint64_t bytes = bytes_get_u64le(h);
        off += TRAINSTATE_TAG_BYTES + 16;
        if (bytes > size - off)
            break;
        uint64_t want = bytes_get_u32le(b + 8) >= 3
                            ? digest_lanes64_once(TS_HASH_SEED, b + off, (size_t)bytes)
                            : digest_fnv1a64(TS_HASH_SEED, b + off, (size_t)bytes);
        changed |= bytes_get_u64le(h + 8) != want;
        bytes_put_u64le(h + 8, want);
        off += (size_t)bytes;
    }
    return changed;
}

/* The trainer every input is restored into: made once (a fresh run in
 * scratch/tsfix/run), removed at exit.  A restore that fails half-way leaves it
 * partly restored, which is as good a starting point as any for the next input:
 * every section read overwrites what it covers. */
static trainer *ts_trainer;
static forget_tracker *ts_forget;
static train_data ts_src;

static void ts_trainer_remove(void)
{
    char run[700];
    trainer_destroy(ts_trainer);
    forget_tracker_destroy(ts_forget);
    trainer_data_close(&ts_src);
    snprintf(run, sizeof run, "%s/run", ts_fix);
    fuzz_dir_remove(run);
    ts_fixture_remove();
}

static int ts_trainer_make(void)
{
    static int state;   /* 0: not tried, 1: ready, -1: failed */
    if (state)
        return state > 0 ? 0 : -1;
    state = -1;
    atexit(ts_trainer_remove);   /* also what a half-made fixture left */
    if (ts_fixture())
        return -1;
    runcfg cfg;
    qs_diag d = {0};
    runcfg_defaults(&cfg);
    snprintf(cfg.model, sizeof cfg.model, "%.400s/model", ts_fix);
    snprintf(cfg.train_data, sizeof cfg.train_data, "%.400s/data", ts_fix);
    snprintf(cfg.out_dir, sizeof cfg.out_dir, "%.400s/run", ts_fix);
    static const char *const sets[] = {
        "batch_size=1", "seq_len=8", "steps=10", "bf16_warmup_steps=2",
        "quant_modules=layers.*.mlp.*", "amax_history=4", "amax_estimator=max-window:4",
        "seed=1337"};
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++)
        if (runcfg_set(&cfg, sets[i], &d))
            return -1;
    forget_opts fo;
    forget_opts_default(&fo);
    if (trainer_data_open_shards(&ts_src, &cfg, &d) || forget_tracker_create(&ts_forget, &fo, &d))
        return -1;
    train_eval_hook hook = {ts_forget, 0, NULL, ts_eval_save, ts_eval_restore, NULL, 0};
    trainer_options opt = {NULL, 0, &hook};
    if (trainer_create(&ts_trainer, &cfg, &ts_src, &opt, &d))
        return -1;
    state = 1;
    return 0;
}

static void ts_restore(const uint8_t *data, size_t size)
{
    char path[700];
    qs_diag d = {0};
    snprintf(path, sizeof path, "%s/run/state.bin", ts_fix);
    if (fuzz_file_write(path, data, size) == 0)
        trainer_state_read(ts_trainer, path, &d);
    remove(path);
}

int fuzz_trainstate(const uint8_t *data, size_t size)
{
    if (ts_trainer_make())
        return 0;
    ts_restore(data, size);
    unsigned char *fixed = malloc(size ? size : 1);
    if (fixed) {
        memcpy(fixed, data, size);
        if (ts_fix_checksums(fixed, size))
            ts_restore(fixed, size);
        free(fixed);
    }
    return 0;
}
