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

int model_hf_files_copy(const char *src_dir, const char *dst_dir, int with_config, qs_diag *d)
{
    char src[4096], dst[4096];
    for (size_t i = with_config ? 0 : 1; i < sizeof save_copied_files / sizeof *save_copied_files;
         i++) {
        if (fileio_join(src, sizeof src, src_dir, save_copied_files[i]) ||
            fileio_join(dst, sizeof dst, dst_dir, save_copied_files[i]))
            return diag_set(d, QS_ERANGE, dst_dir, -1, "path too long");
        if (!fileio_exists(src)) {
            if (i == 0)
                return diag_set(d, QS_ENOTFOUND, src, -1, "config.json to copy is missing");
            continue;
        }
        int rc = fileio_copy(src, dst, d);
        if (rc)
            return rc;
    }
    return 0;
}

int model_save_hf_dir(const llama_model *m, const char *src_dir, const char *out_dir, int dtype,
                      qs_diag *d)
{
    int rc = fileio_mkdir_p(out_dir, d);
    if (rc || (rc = model_hf_files_copy(src_dir, out_dir, 1, d)))
        return rc;
    char dst[4096];
    if (fileio_join(dst, sizeof dst, out_dir, "model.safetensors"))
        return diag_set(d, QS_ERANGE, out_dir, -1, "path too long");
    return model_save_safetensors(m, dst, dtype, d);
}
