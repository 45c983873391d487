/* fuzz_tokenizer_config.c: a model directory's tokenizer_config.json (BOS/EOS
 * names, add_bos/add_eos, added_tokens_decoder) beside a valid tokenizer.json
 * (tests/data/tok/tiny_spm.json) or tokenizer.model (tiny_spm.model) ->
 * tokenizer_create on the directory, then encode and decode (fixed text and the
 * input itself, so added tokens from the config get matched). */
#include "fuzz.h"
#include "qs/mem.h"
#include "qs/tokenizer.h"

static void fuzz_tok_use(tokenizer *t, const char *text, size_t len)
{
    int32_t *ids = NULL;
    size_t n = 0;
    char *out = NULL;
    size_t out_len = 0;
    qs_diag d = {0};
    for (int bos = TOKENIZER_BOS_DEFAULT; bos <= TOKENIZER_BOS_YES; bos++) {
        if (tokenizer_encode(t, text, len, bos, &ids, &n, &d) == 0 &&
            tokenizer_decode(t, ids, n, bos == TOKENIZER_BOS_NO, &out, &out_len, &d) == 0)
            qs_free(out);
        qs_free(ids);
        ids = NULL;
        out = NULL;
    }
}

int fuzz_tokenizer_config(const uint8_t *data, size_t size)
{
    static const char *const srcs[2][2] = {{"tests/data/tok/tiny_spm.json", "tokenizer.json"},
                                           {"tests/data/tok/tiny_spm.model", "tokenizer.model"}};
    static const char text[] = "<s>Hello <unk> world</s><|im_start|> caf\xc3\xa9 \xff end";
    for (int k = 0; k < 2; k++) {
        char dir[512], tok[600], cfg[600];
        if (fuzz_subdir(dir, sizeof dir, "tokcfg"))
            return 0;
        snprintf(tok, sizeof tok, "%s/%s", dir, srcs[k][1]);
        snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
        tokenizer *t = NULL;
        qs_diag d = {0};
        if (fuzz_file_copy(srcs[k][0], tok) == 0 && fuzz_file_write(cfg, data, size) == 0 &&
            tokenizer_create(&t, dir, &d) == 0) {
            fuzz_tok_use(t, text, sizeof text - 1);
            fuzz_tok_use(t, (const char *)data, size);
            (void)tokenizer_hash(t);
            tokenizer_destroy(t);
        }
        fuzz_dir_remove(dir);
    }
    return 0;
}
