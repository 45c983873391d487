/* cmd_heatmap.c: qatscope heatmap RUN_DIR|LOG — saturation heatmap PNG (plots/heatmap.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "qs/fileio.h"
#include "qs/plots.h"

static const char heatmap_help[] =
    "usage: qatscope heatmap RUN_DIR|LOG [--metric clip_rate|amax_ratio|underflow_rate|qsnr]\n"
    "                        [--tensors input|weight|all] [--log] [--range LO:HI]\n"
    "                        [--max-cols N] [--out FILE.png]\n"
    "Reads RUN_DIR/quant.jsonl.zst (or the log file LOG); writes FILE.png (default\n"
    "heatmap_<metric>.png beside the log) atomically.  Rows: quantizers grouped by layer\n"
    "and module; columns: steps, binned to at most N columns (default 1000) keeping the\n"
    "worst value per bin (max of rates and ratios, min of QSNR).  amax_ratio uses a\n"
    "diverging scale with 1.0 (clipping starts) as its boundary: red above 1.  Cells from\n"
    "BF16-warmup steps (would have clipped, nothing was quantized) are striped.  A log cut\n"
    "mid-record is drawn up to its last complete step with a warning.  --range fixes the\n"
    "colour scale so runs compare (amax_ratio's always holds 1.0).\n";

int cmd_heatmap(int argc, char **argv)
{
    plots_heatmap_opts o;
    plots_heatmap_opts_default(&o);
    const char *run_dir = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *v;
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            fputs(heatmap_help, stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(arg, "--log")) {
            o.log_scale = 1;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0) {
            if (run_dir)
                return cli_error("heatmap: unexpected argument '%s' (argument %d)", arg, i);
            run_dir = arg;
            continue;
        }
        static const char *const valued[] = {"--metric", "--tensors", "--out", "--max-cols",
                                             "--range", NULL};
        if (!cli_flag_in(arg, valued))
            return cli_error("heatmap: unknown option '%s' (argument %d); see --help", arg, i);
        if (!(v = cli_flag_value(argc, argv, &i)))
            return CLI_EXIT_USAGE;
        if (cli_flag_is(arg, "--metric")) {
            if ((o.metric = plots_metric_parse(v)) < 0)
                return cli_error("--metric: expected clip_rate, amax_ratio, underflow_rate or "
                                 "qsnr, got '%s'", v);
        } else if (cli_flag_is(arg, "--tensors")) {
            if ((o.tensors = plots_tensors_parse(v)) < 0)
                return cli_error("--tensors: expected input, weight or all, got '%s'", v);
        } else if (cli_flag_is(arg, "--out")) {
            out = v;
        } else if (cli_flag_is(arg, "--max-cols")) {
            long n;
            if (cli_parse_long(arg, v, 10, 8000, &n))
                return CLI_EXIT_USAGE;
            o.max_cols = (int)n;
        } else {   /* --range */
            char *end;
            o.lo = strtod(v, &end);
            if (end == v || *end != ':' || (o.hi = strtod(end + 1, &end), *end) ||
                !isfinite(o.lo) || !isfinite(o.hi) || !(o.hi > o.lo))
                return cli_error("--range: expected LO:HI with LO < HI, got '%s'", v);
        }
    }
    if (!run_dir)
        return cli_error("heatmap: RUN_DIR is required; see --help");
    if (o.log_scale && !isnan(o.lo) && !(o.lo > 0))
        return cli_error("--range: a log scale needs LO > 0, got %g", o.lo);
    /* an explicit --out is checked before any work, as eval's and gate's outputs
     * are (missing parents created, a directory name or an unwritable place
     * refused); the default lies beside the log, which must exist anyway */
    cli_outputs out_check = {0};
    int rc;
    if (out && ((rc = cli_output_png_or_new("--out", out)) ||
                (rc = cli_outputs_add(&out_check, "--out", out))))
        return rc;
    char def[1024], name[64], dir[1024];
    if (!out) {   /* beside the log: in RUN_DIR, or in the directory of LOG */
        snprintf(dir, sizeof dir, "%s", run_dir);
        if (!fileio_is_dir(run_dir) && fileio_exists(run_dir)) {
            char *slash = strrchr(dir, '/');
            if (slash)
                *slash = 0;
            else
                snprintf(dir, sizeof dir, ".");
        }
        snprintf(name, sizeof name, "heatmap_%s.png", plots_metric_name(o.metric));
        if (fileio_join(def, sizeof def, dir, name))
            return cli_error("heatmap: RUN_DIR path too long");
        out = def;
    }
    qs_diag d = {0};
    plots_heatmap hm;
    plots_image img = {0};
    rc = plots_heatmap_load(&hm, run_dir, &o, &d);
    if (!rc && hm.truncated)
        fprintf(stderr, "qatscope: warning: %s (heatmap of the complete steps)\n", hm.truncated_msg);
    if (!rc)
        rc = plots_heatmap_render(&hm, &o, &img, &d);
    if (!rc)
        rc = plots_png_write(out, &img, &d);
    plots_image_free(&img);
    plots_heatmap_free(&hm);
    if (rc)
        return cli_diag_error(&d);
    printf("heatmap: wrote %s\n", out);
    return CLI_EXIT_OK;
}
