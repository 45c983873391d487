/* cmd_plot.c: qatscope plot RUN_DIR — training curves PNG (plots/curve.c). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "qs/fileio.h"
#include "qs/plots.h"

static const char plot_help[] =
    "usage: qatscope plot RUN_DIR [--out curves.png] [--compare RUN_DIR2 ...]\n"
    "Reads RUN_DIR/metrics.jsonl (+ events.jsonl); writes train and val loss, val\n"
    "perplexity, learning rate, max clip rate (as steps) and in-loop eval accuracy over\n"
    "steps, the BF16 -> QAT boundary marked for runs with quantizers, to --out (default\n"
    "RUN_DIR/curves.png), atomically.  --compare overlays up to 5 more runs.  A log cut\n"
    "mid-record (a run still writing it) is drawn up to its last complete record, with a\n"
    "warning naming the file and line.\n";

int cmd_plot(int argc, char **argv)
{
    const char *runs[6], *out = NULL;
    int n_runs = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *v;
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            fputs(plot_help, stdout);
            return CLI_EXIT_OK;
        }
        if (strncmp(arg, "--", 2) != 0) {
            if (n_runs > 0)
                return cli_error("plot: unexpected argument '%s' (argument %d); extra runs go "
                                 "after --compare", arg, i);
            runs[n_runs++] = arg;
            continue;
        }
        if (cli_flag_is(arg, "--compare")) {
            if (n_runs == 0)
                return cli_error("plot: RUN_DIR must come before --compare");
            if (!(v = cli_flag_value(argc, argv, &i)))
                return CLI_EXIT_USAGE;
            do {
                if (n_runs == 6)
                    return cli_error("--compare: at most 5 runs to compare");
                runs[n_runs++] = v;
            } while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0 && (v = argv[++i]));
            continue;
        }
        if (!cli_flag_is(arg, "--out"))
            return cli_error("plot: unknown option '%s' (argument %d); see --help", arg, i);
        if (!(out = cli_flag_value(argc, argv, &i)))
            return CLI_EXIT_USAGE;
    }
    if (n_runs == 0)
        return cli_error("plot: RUN_DIR is required; see --help");
    /* an explicit --out is checked before any work, as eval's and gate's outputs
     * are (missing parents created, a directory name or an unwritable place
     * refused); the default lies in RUN_DIR, which must exist anyway */
    cli_outputs out_check = {0};
    int rc;
    if (out && ((rc = cli_output_png_or_new("--out", out)) ||
                (rc = cli_outputs_add(&out_check, "--out", out))))
        return rc;
    char def[1024];
    if (!out) {
        if (fileio_join(def, sizeof def, runs[0], "curves.png"))
            return cli_error("plot: RUN_DIR path too long");
        out = def;
    }
    qs_diag d = {0};
    static plots_curves_cuts cuts;
    if (plots_curves_write_cuts(runs, n_runs, out, &cuts, &d))
        return cli_diag_error(&d);
    /* a log cut mid-record (a run still writing it, or killed) is drawn up to its
     * last complete record with a warning, as heatmap, satstat and replay do */
    for (int i = 0; i < cuts.n; i++)
        fprintf(stderr, "qatscope: warning: %s (plot of the complete records)\n", cuts.msg[i]);
    printf("plot: wrote %s\n", out);
    return CLI_EXIT_OK;
}
