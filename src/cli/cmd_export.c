/* cmd_export.c: qatscope export --format hif8 - a HiF8 W8A8 checkpoint of a
 * model: the planned Linears' weights as HiF8 codes with the scales the
 * evaluation's fake-quant uses, every other tensor in bf16 (layout:
 * include/qs/model_hif8.h).
 *
 *   qatscope export --format hif8 --model DIR --out DIR
 *                   [--quant-modules PATTERNS] [--quant-scaling current|delayed|auto]
 *
 * Scales as `eval --precision hif8` makes them (evalquant.h): a run checkpoint
 * RUN/ckpt/step_N exports with the scales its delayed scaling held at step N
 * (weights and static input scales; the run's quant_modules); a plain HF
 * checkpoint with current scaling (weights: their own amax; inputs: dynamic,
 * per token) on --quant-modules (default: "default").
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "qs/evalquant.h"
#include "qs/fileio.h"
#include "qs/interrupt.h"
#include "qs/json.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_hif8.h"

static const char USAGE[] =
    "usage: qatscope export --format hif8 --model DIR --out DIR\n"
    "                       [--quant-modules PATTERNS] [--quant-scaling current|delayed|auto]\n"
    "Writes a new directory: config.json with quantization_config, model.safetensors (planned\n"
    "Linears' weights as U8 HiF8 codes + F32 <name>.weight_scale, the rest BF16), tokenizer\n"
    "files.  A run checkpoint exports the scales of its delayed scaling at that step; a plain\n"
    "checkpoint current scaling (README '### export').\n";

static const float *export_weight_of(const llama_model *m, int layer, int module)
{
    const llama_layer_weights *lw = &m->w.layer[layer];
    const float *w[MODEL_LIN_COUNT] = {lw->wq, lw->wk, lw->wv, lw->wo,
                                       lw->w_gate, lw->w_up, lw->w_down};
    return w[module];
}

/* provenance for quantization_config.source */
static char *export_source(const char *dir, const evalquant *eq, qs_diag *d)
{
    char hex[65];
    if (model_dir_sha256(dir, hex, d))
        return NULL;
    char *qd = qs_json_quote_dup(dir), *qs = qs_json_quote_dup(evalquant_scaling_name(eq));
    char *qr = qs_json_quote_dup(evalquant_recipe_text(eq));
    size_t n = (qd ? strlen(qd) : 0) + (qs ? strlen(qs) : 0) + (qr ? strlen(qr) : 0) + 160;
    char *out = qd && qs && qr ? qs_malloc(n) : NULL;
    if (out)
        snprintf(out, n, "{\"model\": %s, \"model_sha256\": \"%s\", \"scaling\": %s, \"recipe\": %s}",
                 qd, hex, qs, qr);
    else
        diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    qs_free(qd);
    qs_free(qs);
    qs_free(qr);
    return out;
}

static int export_run(const char *dir, const char *out, const char *patterns, int scaling)
{
    qs_diag d = {0};
    llama_model m;
    evalquant *eq = NULL;
    model_hif8_linear *lin = NULL;
    char *source = NULL;
    int rc = 0;
    if (model_load_dir(&m, dir, &d))
        return cli_diag_error(&d);
    if (m.hif8) {
        rc = cli_error("%s: already a HiF8 checkpoint (quantization_config in config.json)", dir);
        goto done;
    }
    evalquant_options qo = {patterns, scaling, dir};
    if (evalquant_create_opts(&eq, &m, &qo, &d)) {
        rc = cli_diag_error(&d);
        goto done;
    }
    int n = evalquant_count(eq);
    size_t n_params = 0;
    if (!(lin = qs_calloc((size_t)n, sizeof *lin))) {
        rc = cli_error("export: out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        evalquant_module_at(eq, i, &lin[i].layer, &lin[i].module);
        const model_tensor *t = NULL;
        char name[160];
        model_hif8_module_name(name, sizeof name, lin[i].layer, lin[i].module);
        for (int k = 0; k < m.n_tensors && !t; k++)
            if (!strncmp(m.tensors[k].name, name, strlen(name)) &&
                !strcmp(m.tensors[k].name + strlen(name), ".weight"))
                t = &m.tensors[k];
        if (!t || evalquant_weight_scale(eq, i, export_weight_of(&m, lin[i].layer, lin[i].module),
                                         t->n_elems, &lin[i].weight_scale, &d)) {
            rc = t ? cli_diag_error(&d) : cli_error("export: no weight for %s", name);
            goto done;
        }
        if (!evalquant_input_scale(eq, i, &lin[i].input_scale))
            lin[i].input_scale = 0.0f;   /* dynamic: per token */
        n_params += t->n_elems;
    }
    /* from here Ctrl-C / SIGTERM stop the writer, whose temporary directory is
     * removed; cmd_export then ends the process by the signal (qs/interrupt.h) */
    interrupt_catch();
    if (!(source = export_source(dir, eq, &d)) ||
        model_hif8_export(&m, dir, lin, n, source, out, &d)) {
        rc = cli_diag_error(&d);
        goto done;
    }
    printf("export: %d Linear modules (%zu weights) as HiF8 codes, activation scaling %s, "
           "scales %s\n", n, n_params, lin[0].input_scale > 0 ? "static" : "dynamic (per token)",
           evalquant_scaling_name(eq));
    printf("wrote %s\n", out);
    if (fflush(stdout))
        rc = CLI_EXIT_USAGE;   /* main() names the error */
done:
    qs_free(source);
    qs_free(lin);
    evalquant_destroy(eq);
    model_free(&m);
    return rc;
}

int cmd_export(int argc, char **argv)
{
    const char *format = NULL, *model = NULL, *out = NULL, *patterns = NULL, *scaling_arg = NULL;
    const cli_opt opts[] = {
        {"--format", CLI_OPT_STR, .out = &format},
        {"--model", CLI_OPT_STR, .out = &model},
        {"--out", CLI_OPT_STR, .out = &out},
        {"--quant-modules", CLI_OPT_STR, .out = &patterns},
        {"--quant-scaling", CLI_OPT_STR, .out = &scaling_arg},
    };
    int rc = cli_args_parse("export", USAGE, argc, argv, opts, sizeof opts / sizeof *opts, NULL,
                            NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!format || !model || !out)
        return cli_error("export: --format, --model and --out are required; see 'qatscope export "
                         "--help'");
    if (strcmp(format, "hif8"))
        return cli_error("--format: expected hif8, got '%s'", format);
    qs_diag d = {0};
    int scaling = EVALQUANT_AUTO;
    if (scaling_arg && evalquant_scaling_parse(scaling_arg, &scaling, &d))
        return cli_diag_error(&d);
    /* "OUT/" (a shell completion) names OUT: with the slash kept, OUT.tmp.<pid>
     * became OUT/.tmp.<pid>, which cannot be renamed onto its own parent */
    char out_dir[CLI_PATH_MAX];
    if ((size_t)snprintf(out_dir, sizeof out_dir, "%s", out) >= sizeof out_dir)
        return cli_error("%s: path too long", out);
    for (size_t n = strlen(out_dir); n > 1 && out_dir[n - 1] == '/'; n--)
        out_dir[n - 1] = 0;
    /* refused before the model is loaded (a 1B load takes seconds and GBs);
     * model_hif8_export checks again before it writes */
    if (fileio_exists(out_dir))
        return cli_error("%s: already exists: export writes a new directory (remove it or "
                         "choose another --out)", out_dir);
    /* and the directory it goes in must take a new one: probed with the
     * writer's own temporary name (made, with any missing parents, and removed) */
    char probe[CLI_PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s.tmp.%ld", out_dir, (long)getpid());
    if (fileio_mkdir_p(probe, &d))
        return cli_diag_error(&d);
    (void)rmdir(probe);
    rc = export_run(model, out_dir, patterns, scaling);
    if (rc)
        interrupt_exit(); /* stopped by a signal while writing: the process ends by it */
    return rc;
}
