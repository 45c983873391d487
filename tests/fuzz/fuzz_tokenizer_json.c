/* fuzz_tokenizer_json.c: HF tokenizer.json -> tokenizer_create, encode, decode. */
#include "fuzz_tok_common.h"

int fuzz_tokenizer_json(const uint8_t *data, size_t size)
{
    return fuzz_tok_run("tokenizer.json", data, size);
}
