/* fuzz_safetensors.c: one .safetensors file -> safetensors_open (header parse and
 * validation), then every F32/BF16/F16/I32 tensor converted, which reads each
 * tensor's bytes and so checks the validated offsets against the mapping. */
#include "fuzz.h"
#include "qs/mem.h"
#include "qs/safetensors.h"

int fuzz_safetensors(const uint8_t *data, size_t size)
{
    char path[512];
    if (fuzz_path(path, sizeof path, "fuzz.safetensors") || fuzz_file_write(path, data, size))
        return 0;
    safetensors_file f;
    memset(&f, 0, sizeof f);
    qs_diag d = {0};
    if (safetensors_open(&f, path, &d) == 0) {
        for (int i = 0; i < f.n_tensors; i++) {
            const safetensors_tensor *t = &f.tensors[i];
            if (safetensors_find(&f, t->name) == NULL)
                abort();   /* a listed tensor must be found by its own name */
            void *out = qs_malloc(t->n_elems ? t->n_elems * 4 : 1);
            if (!out)
                continue;
            if (t->dtype == SAFETENSORS_I32)
                safetensors_tensor_to_i32(t, out, path, &d);
            else
                safetensors_tensor_to_f32(t, out, path, &d);
            qs_free(out);
        }
    }
    safetensors_close(&f);
    remove(path);
    return 0;
}
