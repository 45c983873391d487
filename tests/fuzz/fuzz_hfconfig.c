/* fuzz_hfconfig.c: config.json text -> hfconfig_parse (in memory), and on success
 * what the model derives from a config before allocating anything: the tensor
 * table, the parameter count and groups, the memory estimate, what init
 * derives (each tensor's rule, the config text with torch_dtype set), and a
 * HiF8 checkpoint's quantization_config (model_hif8_config_parse). */
#include "fuzz.h"
#include "qs/hfconfig.h"
#include "qs/hfinit.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_hif8.h"

int fuzz_hfconfig(const uint8_t *data, size_t size)
{
    llama_config c;
    memset(&c, 0, sizeof c);
    qs_diag d = {0};
    if (hfconfig_parse(&c, (const char *)data, size, "fuzz/config.json", &d) != 0)
        return 0;
    (void)hfconfig_max_context(&c);
    model_tensor *tensors = NULL;
    int n_tensors = 0;
    if (model_table_create(&c, &tensors, &n_tensors) == 0) {
        for (int i = 0; i < n_tensors; i++) {
            hfinit_rule r;
            hfinit_tensor_rule(&c, &tensors[i], &r, &d);
        }
        qs_free(tensors);
    }
    char *edited = NULL;
    size_t n_edited = 0;
    if (hfinit_config_text((const char *)data, size, "bfloat16", &edited, &n_edited,
                           "fuzz/config.json", &d) == 0)
        qs_free(edited);
    model_hif8 *q8 = NULL;
    if (model_hif8_config_parse((const char *)data, size, "fuzz/config.json", &c, &q8, &d) == 1)
        model_hif8_free(q8);
    model_param_groups g;
    model_param_groups_count(&c, &g);
    model_memory mm;
    model_memory_estimate(&c, 1, 64, 128, &mm);
    return 0;
}
