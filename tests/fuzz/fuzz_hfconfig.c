/* fuzz_hfconfig.c: config.json text -> hfconfig_parse (in memory), and on success
 * what the model derives from a config before allocating anything: the tensor
 * table, the parameter count and groups, and the memory estimate. */
#include "fuzz.h"
#include "qs/hfconfig.h"
#include "qs/mem.h"
#include "qs/model.h"

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
    if (model_table_create(&c, &tensors, &n_tensors) == 0)
        qs_free(tensors);
    model_param_groups g;
    model_param_groups_count(&c, &g);
    model_memory mm;
    model_memory_estimate(&c, 1, 64, 128, &mm);
    return 0;
}
