/* fuzz_hfconfig.c: config.json text -> hfconfig_parse (in memory), and on success
 * the derived context length. */
#include "fuzz.h"
#include "qs/hfconfig.h"

int fuzz_hfconfig(const uint8_t *data, size_t size)
{
    llama_config c;
    memset(&c, 0, sizeof c);
    qs_diag d = {0};
    if (hfconfig_parse(&c, (const char *)data, size, "fuzz/config.json", &d) == 0)
        (void)hfconfig_max_context(&c);
    return 0;
}
