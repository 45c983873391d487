/* fuzz_tok_common.h: the tokenizer targets' shared body (tokenizer.json and
 * tokenizer.model differ only in the file name). */
#ifndef QS_FUZZ_TOK_COMMON_H
#define QS_FUZZ_TOK_COMMON_H

#include "fuzz.h"
#include "qs/mem.h"
#include "qs/tokenizer.h"

/* Load DIR/file_name holding the input, then encode a fixed mixed-script text
 * and decode the ids back, and decode every id of a small vocabulary once. */
static inline int fuzz_tok_run(const char *file_name, const uint8_t *data, size_t size)
{
    char dir[512], path[600];
    if (fuzz_subdir(dir, sizeof dir, "tok"))
        return 0;
    snprintf(path, sizeof path, "%s/%s", dir, file_name);
    if (fuzz_file_write(path, data, size) == 0) {
        tokenizer *t = NULL;
        qs_diag d = {0};
        if (tokenizer_create(&t, path, &d) == 0) {
            static const char text[] = " Hello  world!\n\tcaf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 "
                                       "12345 <s></s> \xf0\x9f\x99\x82 \xff\xfe end";
            int32_t *ids = NULL;
            size_t n_ids = 0;
            char *out = NULL;
            size_t out_len = 0;
            if (tokenizer_encode(t, text, sizeof text - 1, TOKENIZER_BOS_DEFAULT, &ids, &n_ids,
                                 &d) == 0 &&
                tokenizer_decode(t, ids, n_ids, 0, &out, &out_len, &d) == 0)
                qs_free(out);
            qs_free(ids);
            int n_vocab = tokenizer_vocab_size(t);
            for (int32_t id = 0; id < n_vocab && id < 512; id++) {
                out = NULL;
                if (tokenizer_decode(t, &id, 1, 1, &out, &out_len, &d) == 0)
                    qs_free(out);
                (void)tokenizer_piece(t, id);
            }
            (void)tokenizer_hash(t);
            tokenizer_destroy(t);
        }
    }
    remove(path);
    rmdir(dir);
    return 0;
}

#endif
