/* fuzz_tokenizer_model.c: sentencepiece tokenizer.model (protobuf) ->
 * tokenizer_create, encode, decode. */
#include "fuzz_tok_common.h"

int fuzz_tokenizer_model(const uint8_t *data, size_t size)
{
    return fuzz_tok_run("tokenizer.model", data, size);
}
