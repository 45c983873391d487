/* fuzz_hif8_text.c: the stdin of `qatscope hif8 encode` (numbers, --bits patterns)
 * and `hif8 decode` (codes) -> hif8_text_parse, then the encode / decode the CLI
 * runs on the result. */
#include "fuzz.h"
#include "qs/hif8.h"
#include "qs/hif8_text.h"
#include "qs/mem.h"

int fuzz_hif8_text(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    for (int kind = HIF8_TEXT_NUMBERS; kind <= HIF8_TEXT_CODES; kind++) {
        float *v = NULL;
        uint8_t *codes = NULL;
        size_t n = 0;
        hif8_text_error e;
        if (hif8_text_parse(text, size, kind, &v, &codes, &n, &e) != 0)
            continue;
        if (kind == HIF8_TEXT_CODES) {
            for (size_t i = 0; i < n; i++)
                (void)hif8_decode(codes[i]);
        } else {
            uint8_t *out = qs_malloc(n ? n : 1);
            if (out) {
                hif8_codes_encode(v, out, n, HIF8_SAT);
                hif8_codes_encode(v, out, n, HIF8_NONSAT);
            }
            qs_free(out);
        }
        qs_free(v);
        qs_free(codes);
    }
    return 0;
}
