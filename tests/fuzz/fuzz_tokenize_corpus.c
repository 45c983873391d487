/* fuzz_tokenize_corpus.c: `qatscope tokenize --input` corpora -> shard_build_run,
 * the input as a .txt (documents split at blank lines) and as a .jsonl (one
 * {"text": ...} per line), .zst-named when it starts with the zstd magic; shards
 * and manifest written to a scratch directory (val split on) and removed. */
#include "fuzz.h"
#include "qs/shard_build.h"

int fuzz_tokenize_corpus(const uint8_t *data, size_t size)
{
    static const char *const names[2][2] = {{"corpus.txt", "corpus.txt.zst"},
                                            {"corpus.jsonl", "corpus.jsonl.zst"}};
    int z = size >= 4 && !memcmp(data, "\x28\xb5\x2f\xfd", 4);
    for (int k = 0; k < 2; k++) {
        char in_dir[512], out_dir[512], input[600];
        if (fuzz_subdir(in_dir, sizeof in_dir, "tkin") || fuzz_path(out_dir, sizeof out_dir, "tkout"))
            return 0;
        snprintf(input, sizeof input, "%s/%s", in_dir, names[k][z]);
        if (fuzz_file_write(input, data, size) == 0) {
            const char *inputs[1] = {input};
            shard_build_opts o;
            shard_build_opts_default(&o);
            o.val_fraction = 0.25;
            o.shard_tokens = 64;   /* several shards from a small input */
            shard_build_summary s;
            qs_diag d = {0};
            shard_build_run("tests/data/tok/tiny_bytelevel.json", inputs, 1, out_dir, &o, &s, &d);
        }
        fuzz_dir_remove(out_dir);
        fuzz_dir_remove(in_dir);
    }
    return 0;
}
