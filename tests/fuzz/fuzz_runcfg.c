/* fuzz_runcfg.c: the run config of `qatscope train`: the input as a config file
 * (runcfg_load_text, runcfg_validate, runcfg_to_json and that JSON loaded back),
 * then each of its lines as one `--set key=value` override (runcfg_set) on the
 * defaults, validated at the end. */
#include "fuzz.h"
#include "qs/mem.h"
#include "qs/runcfg.h"

static void fuzz_runcfg_check(const runcfg *c)
{
    qs_diag d = {0};
    runcfg_validate(c, &d);
    char *js = runcfg_to_json(c);
    if (js) {
        runcfg back;
        runcfg_load_text(&back, js, "fuzz-roundtrip.json", &d);
        qs_free(js);
    }
}

int fuzz_runcfg(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    if (!text)
        return 0;
    runcfg c;
    qs_diag d = {0};
    if (runcfg_load_text(&c, text, "fuzz.json", &d) == 0)
        fuzz_runcfg_check(&c);
    runcfg_defaults(&c);
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save))
        runcfg_set(&c, line, &d);
    fuzz_runcfg_check(&c);
    free(text);
    return 0;
}
