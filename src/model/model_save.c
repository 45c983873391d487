/* model_save.c: write a model as a Hugging Face directory (the trainer's
 * HF-compatible checkpoint): the source directory's config and tokenizer files
 * copied as they are, then model.safetensors from the params block.  Every file
 * is written atomically (tmp + rename); the weights are written last, so a
 * directory with a model.safetensors is complete. */
#include <string.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/safetensors.h"

static const char *const save_copied_files[] = {
    "config.json",      "generation_config.json", "tokenizer.json",
    "tokenizer_config.json", "tokenizer.model",   "special_tokens_map.json",
};

int model_save_hf_dir(const llama_model *m, const char *src_dir, const char *out_dir, int dtype,
                      qs_diag *d)
{
    int rc = fileio_mkdir_p(out_dir, d);
    if (rc)
        return rc;
    char src[4096], dst[4096];
    for (size_t i = 0; i < sizeof save_copied_files / sizeof save_copied_files[0]; i++) {
        if (fileio_join(src, sizeof src, src_dir, save_copied_files[i]) ||
            fileio_join(dst, sizeof dst, out_dir, save_copied_files[i]))
            return diag_set(d, QS_ERANGE, out_dir, -1, "path too long");
        if (!fileio_exists(src)) {
            if (i == 0)
                return diag_set(d, QS_ENOTFOUND, src, -1, "config.json to copy is missing");
            continue;
        }
        char *data = NULL;
        size_t n = 0;
        if ((rc = fileio_read_all(src, &data, &n, d)))
            return rc;
        rc = fileio_write_atomic(dst, data, n, d);
        qs_free(data);
        if (rc)
            return rc;
    }
    if (fileio_join(dst, sizeof dst, out_dir, "model.safetensors"))
        return diag_set(d, QS_ERANGE, out_dir, -1, "path too long");
    return model_save_safetensors(m, dst, dtype, d);
}
