/* fuzz_detokenize_ids.c: `qatscope detokenize` id lists (arguments and stdin) ->
 * tokenizer_ids_parse, then tokenizer_decode of the ids (out-of-vocabulary ids
 * included) with a SentencePiece-style and a byte-level tokenizer, with and
 * without special tokens.  The tokenizers are loaded once (tests/data/tok). */
#include "fuzz.h"
#include "qs/mem.h"
#include "qs/tokenizer.h"

int fuzz_detokenize_ids(const uint8_t *data, size_t size)
{
    static tokenizer *toks[2];
    static int loaded;
    if (!loaded) {
        loaded = 1;
        tokenizer_create(&toks[0], "tests/data/tok/tiny_spm.json", NULL);
        tokenizer_create(&toks[1], "tests/data/tok/tiny_bytelevel.json", NULL);
    }
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    qs_diag d = {0};
    if (tokenizer_ids_parse((const char *)data, size, &ids, &n, &cap, &d) == 0)
        for (int t = 0; t < 2; t++)
            for (int skip = 0; toks[t] && skip < 2; skip++) {
                char *text = NULL;
                size_t len = 0;
                if (tokenizer_decode(toks[t], ids, n, skip, &text, &len, &d) == 0)
                    qs_free(text);
            }
    qs_free(ids);
    return 0;
}
