/* test_plots_scales.c: what the pictures must make visible (issue 16), checked on
 * rendered PNGs decoded back: amax_ratio's colour scale diverges at 1.0 (clips
 * red, 0.95-1.0 on the sequential map, the legend marked at 1.0); BF16-warmup
 * "would have" cells striped apart from real QAT values; heatmap of a log file
 * with a truncation flag; curves with val_loss / val_ppl, the clip rate drawn as
 * steps, no QAT boundary for a run without quantizers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/plots.h"
#include "qs/plots_test.h"
#include "qs/zlog.h"
#include "test.h"

static const plot_rgb INK = {34, 34, 34}, PAPER = {255, 255, 255}, PHASE = {230, 40, 90};

static const char *scale_dir(const char *name)
{
    static char buf[4][600];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 600, "%s/%s", test_tmp_dir(), name);
    mkdir(p, 0755);
    return p;
}

/* quant log of two quantizers, 8 steps, QAT from step 4; per step and quantizer
 * (pred_amax, amax, clip_rate) from the tables; observe mode in warmup */
static int write_log(const char *dir, double pred[8][2], double amax[8][2], double clip[8][2])
{
    char path[700], line[2048];
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", dir);
    zlog_writer *w;
    qs_diag d = {0};
    if (zlog_writer_create(&w, path, ZLOG_TRUNCATE, &d))
        return -1;
    int k = snprintf(line, sizeof line,
                     "{\"v\":1,\"type\":\"header\",\"run\":\"scales\",\"recipe\":{\"estimator\":"
                     "\"max-window:64\"},\"quantizers\":[\"layers.3.mlp.up_proj.input\","
                     "\"layers.3.mlp.up_proj.weight\"]}");
    if (zlog_write(w, line, (size_t)k, &d))
        return -1;
    for (int s = 0; s < 8; s++) {
        k = snprintf(line, sizeof line, "{\"v\":1,\"type\":\"step\",\"step\":%d,\"phase\":\"%s\",\"q\":[",
                     s, s >= 4 ? "qat" : "warmup");
        for (int q = 0; q < 2; q++)
            k += snprintf(line + k, sizeof line - (size_t)k,
                          "%s{\"name\":\"layers.3.mlp.up_proj.%s\",\"mode\":\"%s\",\"pred_amax\":%g,"
                          "\"amax\":%g,\"clip_rate\":%g}",
                          q ? "," : "", q ? "weight" : "input", s >= 4 ? "quant" : "observe",
                          pred[s][q], amax[s][q], clip[s][q]);
        k += snprintf(line + k, sizeof line - (size_t)k, "]}");
        if (zlog_write(w, line, (size_t)k, &d) || zlog_flush(w, &d))   /* a frame per step */
            return -1;
    }
    return zlog_close(w, &d);
}

static plot_rgb px_at(const plots_image *img, int x, int y)
{
    const unsigned char *p = img->rgb + ((size_t)y * (size_t)img->width + (size_t)x) * 3;
    plot_rgb c = {p[0], p[1], p[2]};
    return c;
}

static int same(plot_rgb a, plot_rgb b)
{
    return a.r == b.r && a.g == b.g && a.b == b.b;
}

static int reddish(plot_rgb c)
{
    return c.r >= 100 && c.g < 70 && c.b < 70;
}

/* the centre pixel of cell (r, c) */
static plot_rgb cell(const plots_heatmap *hm, const plots_image *img, int r, int c)
{
    return px_at(img, hm->plot_x + c * hm->cell_w + hm->cell_w / 2,
                 hm->plot_y + r * hm->cell_h + hm->cell_h / 2);
}

/* every pixel of a cell has colour c (1), or some are PAPER stripes and the rest c (2) */
static int cell_texture(const plots_heatmap *hm, const plots_image *img, int r, int col, plot_rgb c)
{
    int n_c = 0, n_paper = 0, other = 0;
    for (int y = 1; y < hm->cell_h - 1; y++)
        for (int x = 1; x < hm->cell_w - 1; x++) {
            plot_rgb p = px_at(img, hm->plot_x + col * hm->cell_w + x, hm->plot_y + r * hm->cell_h + y);
            n_c += same(p, c);
            n_paper += same(p, PAPER);
            other += !same(p, c) && !same(p, PAPER);
        }
    if (other)
        return 0;
    return n_paper == 0 ? 1 : n_c > 0 ? 2 : 0;
}

/* rows of the heatmap: input before weight */
enum { R_IN = 0, R_W = 1 };

TEST(plots_scales, amax_ratio_clips_are_red_and_the_legend_marks_one)
{
    const char *dir = scale_dir("sc_ratio");
    double pred[8][2], amax[8][2], clip[8][2] = {{0}};
    for (int s = 0; s < 8; s++) {
        pred[s][0] = pred[s][1] = 2.0;
        amax[s][0] = 1.9;   /* 0.95 */
        amax[s][1] = 1.6;   /* 0.8 */
    }
    amax[5][0] = 2.0002;   /* 1.0001: clipped, barely */
    amax[6][0] = 1.999;    /* 0.9995: not clipped */
    amax[6][1] = 2.6;      /* 1.3 */
    ASSERT_EQ_INT(write_log(dir, pred, amax, clip), 0);
    plots_heatmap_opts o;
    plots_heatmap_opts_default(&o);
    o.metric = PLOTS_METRIC_AMAX_RATIO;
    plots_heatmap hm;
    plots_image img = {0}, back = {0};
    qs_diag d = {0};
    ASSERT_OK(plots_heatmap_load(&hm, dir, &o, &d), &d);
    ASSERT_OK(plots_heatmap_render(&hm, &o, &img, &d), &d);
    char png[700];
    snprintf(png, sizeof png, "%s/ratio.png", dir);
    ASSERT_OK(plots_png_write(png, &img, &d), &d);
    ASSERT_OK(plots_png_read(png, &back, &d), &d);
    /* cells: anything above 1 is red, however close; 0.95..1.0 is not */
    ASSERT_TRUE(reddish(cell(&hm, &back, R_IN, 5)));
    ASSERT_TRUE(reddish(cell(&hm, &back, R_W, 6)));
    ASSERT_TRUE(!reddish(cell(&hm, &back, R_IN, 6)));
    ASSERT_TRUE(!reddish(cell(&hm, &back, R_IN, 7)));
    ASSERT_TRUE(same(cell(&hm, &back, R_IN, 6), colormap_rgb_impl(1.0)) ||
                cell(&hm, &back, R_IN, 6).g > 200);   /* the top of the sequential map */
    /* legend: one dark line across the bar at 1.0; red above it, the map below */
    int y1 = -1, run = 0;
    for (int y = hm.bar_y; y < hm.bar_y + hm.bar_h; y++)
        if (same(px_at(&back, hm.bar_x - 4, y), INK)) {
            y1 = y1 < 0 ? y : y1;
            run++;
        }
    ASSERT_TRUE(y1 > hm.bar_y + 10 && y1 < hm.bar_y + hm.bar_h / 2);   /* the clip side: top */
    ASSERT_TRUE(run >= 2 && run <= 4);
    ASSERT_TRUE(reddish(px_at(&back, hm.bar_x + hm.bar_w / 2, y1 - 3)));
    ASSERT_TRUE(reddish(px_at(&back, hm.bar_x + hm.bar_w / 2, hm.bar_y + 1)));
    plot_rgb below = px_at(&back, hm.bar_x + hm.bar_w / 2, y1 + 5);
    ASSERT_TRUE(!reddish(below) && below.g > 200);
    ASSERT_TRUE(same(px_at(&back, hm.bar_x + hm.bar_w / 2, hm.bar_y + hm.bar_h - 1),
                     colormap_rgb_impl(0.0)));
    plots_image_free(&img);
    plots_image_free(&back);
    plots_heatmap_free(&hm);
}

TEST(plots_scales, warmup_would_have_cells_are_striped_qat_cells_plain)
{
    const char *dir = scale_dir("sc_warm");
    double pred[8][2], amax[8][2], clip[8][2] = {{0}};
    for (int s = 0; s < 8; s++)
        for (int q = 0; q < 2; q++) {
            pred[s][q] = 2.0;
            amax[s][q] = 1.0;
        }
    clip[2][0] = 0.5;   /* warmup: would have clipped */
    clip[6][0] = 0.5;   /* QAT: clipped */
    ASSERT_EQ_INT(write_log(dir, pred, amax, clip), 0);
    plots_heatmap_opts o;
    plots_heatmap_opts_default(&o);
    plots_heatmap hm;
    plots_image img = {0};
    qs_diag d = {0};
    ASSERT_OK(plots_heatmap_load(&hm, dir, &o, &d), &d);
    ASSERT_EQ_INT(hm.cell_warmup[R_IN * 8 + 2], 1);
    ASSERT_EQ_INT(hm.cell_warmup[R_IN * 8 + 6], 0);
    ASSERT_OK(plots_heatmap_render(&hm, &o, &img, &d), &d);
    ASSERT_TRUE(hm.cell_w >= 4 && hm.cell_h >= 4);
    /* the same value, 0.5 (the top of the scale), in both phases: one texture each */
    ASSERT_EQ_INT(cell_texture(&hm, &img, R_IN, 6, colormap_rgb_impl(1.0)), 1);
    ASSERT_EQ_INT(cell_texture(&hm, &img, R_IN, 2, colormap_rgb_impl(1.0)), 2);
    ASSERT_EQ_INT(cell_texture(&hm, &img, R_W, 5, colormap_rgb_impl(0.0)), 1);
    ASSERT_EQ_INT(cell_texture(&hm, &img, R_W, 1, colormap_rgb_impl(0.0)), 2);
    /* the legend has a striped swatch below "no data" */
    int sy = hm.bar_y + hm.bar_h + 14 + 22, paper = 0, colour = 0;
    for (int y = sy; y < sy + 12; y++)
        for (int x = hm.bar_x; x < hm.bar_x + hm.bar_w; x++) {
            paper += same(px_at(&img, x, y), PAPER);
            colour += !same(px_at(&img, x, y), PAPER);
        }
    ASSERT_TRUE(paper > 20 && colour > 100);
    plots_image_free(&img);
    plots_heatmap_free(&hm);
}

TEST(plots_scales, heatmap_reads_a_log_file_and_flags_a_cut_one)
{
    const char *dir = scale_dir("sc_file");
    double pred[8][2], amax[8][2], clip[8][2] = {{0}};
    for (int s = 0; s < 8; s++)
        for (int q = 0; q < 2; q++) {
            pred[s][q] = 2.0;
            amax[s][q] = 1.0;
        }
    ASSERT_EQ_INT(write_log(dir, pred, amax, clip), 0);
    char path[700], cut[700];
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", dir);
    snprintf(cut, sizeof cut, "%s/cut.jsonl.zst", dir);
    plots_heatmap_opts o;
    plots_heatmap_opts_default(&o);
    plots_heatmap hm;
    qs_diag d = {0};
    ASSERT_OK(plots_heatmap_load(&hm, path, &o, &d), &d);
    ASSERT_EQ_INT(hm.n_steps, 8);
    ASSERT_EQ_INT(hm.truncated, 0);
    plots_heatmap_free(&hm);
    fileio_map m;
    ASSERT_OK(fileio_map_open(&m, path, &d), &d);
    ASSERT_OK(fileio_write_atomic(cut, m.data, m.bytes - 5, &d), &d);
    fileio_unmap(&m);
    ASSERT_OK(plots_heatmap_load(&hm, cut, &o, &d), &d);
    ASSERT_EQ_INT(hm.truncated, 1);
    ASSERT_TRUE(strstr(hm.truncated_msg, "cut.jsonl.zst") && strstr(hm.truncated_msg, "truncated"));
    plots_heatmap_free(&hm);
    const char *bin = getenv("QS_BIN");
    if (!bin)
        SKIP("QS_BIN not set (the CLI half)");
    char cmd[2400], out[700], *text;
    size_t n;
    snprintf(out, sizeof out, "%s/cli.txt", dir);
    snprintf(cmd, sizeof cmd, "%s heatmap %s >%s 2>&1", bin, cut, out);
    int st = system(cmd);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ASSERT_OK(fileio_read_all(out, &text, &n, &d), &d);
    ASSERT_TRUE(strstr(text, "warning:") && strstr(text, "truncated"));
    qs_free(text);
    snprintf(out, sizeof out, "%s/heatmap_clip_rate.png", dir);   /* beside the log */
    ASSERT_TRUE(fileio_exists(out));
}

/* curve.c's layout: panel i of 5 at x (i % 2) * 700 + 110, y 126 + (i / 2) * 360,
 * 560 x 270 (the last one 1260 wide) */
static int panel_x(int i) { return (i % 2) * 700 + 110; }
static int panel_y(int i) { return 126 + (i / 2) * 360; }

static long count_in(const plots_image *img, int x0, int y0, int w, int h, plot_rgb c)
{
    long n = 0;
    for (int y = y0; y < y0 + h; y++)
        for (int x = x0; x < x0 + w; x++)
            n += same(px_at(img, x, y), c);
    return n;
}

/* 10 steps; QAT from step 5 unless no_quant (then: phase names only, no phase
 * event, no quant log); clip rate 0 in warmup, 1e-3 after; evals with val_loss
 * and val_ppl at 0, 5, 9 when with_val */
static void write_run(const char *dir, int no_quant, int with_val)
{
    char path[700];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    for (int s = 0; s < 10; s++) {
        if (with_val && (s == 0 || s == 5 || s == 9))
            fprintf(f, "{\"type\":\"eval\",\"step\":%d,\"val_loss\":%g,\"val_ppl\":%g,\"tasks\":{}}\n",
                    s, 3.0 - 0.1 * s, exp(3.0 - 0.1 * s));
        fprintf(f, "{\"type\":\"train\",\"step\":%d,\"phase\":\"%s\",\"loss\":%g,\"lr\":1e-5,"
                   "\"max_clip_rate\":%g}\n",
                s, s >= 5 ? "qat" : "warmup", 3.0 - 0.1 * s, s >= 5 && !no_quant ? 1e-3 : 0.0);
    }
    fclose(f);
    if (no_quant)
        return;
    snprintf(path, sizeof path, "%s/events.jsonl", dir);
    f = fopen(path, "w");
    if (f) {
        fprintf(f, "{\"step\":5,\"type\":\"phase\",\"phase\":\"qat\",\"msg\":\"QAT on\"}\n");
        fclose(f);
    }
}

TEST(plots_scales, curves_show_val_loss_ppl_and_clip_rate_as_steps)
{
    static const plot_rgb RUN = {38, 96, 200};
    const char *dir = scale_dir("sc_curves");
    write_run(dir, 0, 1);
    plots_image img = {0};
    qs_diag d = {0};
    ASSERT_OK(plots_curves_render(&dir, 1, &img, &d), &d);
    ASSERT_EQ_INT(img.height, 86 + 3 * 360 + 10);
    /* val_ppl panel (1) holds the run's line and markers */
    ASSERT_TRUE(count_in(&img, panel_x(1), panel_y(1), 560, 270, RUN) > 300);
    /* clip panel (3): between steps 4 and 5 (x at step 4.5) the line is on the floor
     * only: a step up at 5, no slope from the last warmup step */
    int x45 = panel_x(3) + (int)lrint(4.5 / 9.0 * 559), above = 0, floor_px = 0;
    for (int y = panel_y(3); y < panel_y(3) + 270; y++) {
        int hit = same(px_at(&img, x45, y), RUN);
        if (y >= panel_y(3) + 262)
            floor_px += hit;
        else
            above += hit;
    }
    ASSERT_EQ_INT(above, 0);
    ASSERT_TRUE(floor_px >= 1);
    int x5 = panel_x(3) + (int)lrint(5.0 / 9.0 * 559), rise = 0;
    for (int dx = -2; dx <= 2; dx++)
        rise += (int)count_in(&img, x5 + dx, panel_y(3), 1, 270, RUN);
    ASSERT_TRUE(rise > 60);   /* the vertical from the floor to 1e-3 */
    ASSERT_TRUE(count_in(&img, 0, 0, img.width, img.height, PHASE) > 300);   /* QAT lines */
    plots_image_free(&img);
    /* a run without val records says so (no run colour in that panel) */
    const char *plain = scale_dir("sc_curves_noval");
    write_run(plain, 0, 0);
    ASSERT_OK(plots_curves_render(&plain, 1, &img, &d), &d);
    ASSERT_EQ_INT(count_in(&img, panel_x(1), panel_y(1), 560, 270, RUN), 0);
    plots_image_free(&img);
}

TEST(plots_scales, run_without_quantizers_has_no_qat_boundary)
{
    const char *dir = scale_dir("sc_noquant");
    write_run(dir, 1, 0);   /* metrics say phase "qat" from step 5, but nothing was quantized */
    plots_image img = {0};
    qs_diag d = {0};
    ASSERT_OK(plots_curves_render(&dir, 1, &img, &d), &d);
    ASSERT_EQ_INT(count_in(&img, 0, 0, img.width, img.height, PHASE), 0);
    plots_image_free(&img);
    /* with its quantizer log beside it, the same metrics do mark QAT */
    char path[700];
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", dir);
    ASSERT_OK(fileio_write_atomic(path, "", 0, &d), &d);
    ASSERT_OK(plots_curves_render(&dir, 1, &img, &d), &d);
    ASSERT_TRUE(count_in(&img, 0, 0, img.width, img.height, PHASE) > 300);
    plots_image_free(&img);
}

/* A metrics.jsonl (or events.jsonl) cut mid-line is a run still writing it, or a
 * killed one: plot draws its complete records, exactly the picture of those
 * records alone, and warns with one line naming the file and the line it stopped
 * at, as heatmap, satstat and replay do for a cut quant log (plot said nothing). */
TEST(plots_scales, curves_of_a_cut_log_draw_its_complete_records_with_a_warning)
{
    /* the run name is drawn: the cut run and the one of its complete lines share it */
    char cut_dir[700], kept_dir[700];
    snprintf(cut_dir, sizeof cut_dir, "%s/run", scale_dir("sc_cut"));
    snprintf(kept_dir, sizeof kept_dir, "%s/run", scale_dir("sc_cut_kept"));
    mkdir(cut_dir, 0755);
    mkdir(kept_dir, 0755);
    const char *full = scale_dir("sc_cut_full"), *cut = cut_dir, *kept = kept_dir;
    write_run(full, 0, 1);
    char path[800], *text;
    size_t n;
    qs_diag d = {0};
    snprintf(path, sizeof path, "%s/metrics.jsonl", full);
    ASSERT_OK(fileio_read_all(path, &text, &n, &d), &d);
    size_t line8 = 0;   /* the end of line 8: line 9 (train step 6) is the one cut */
    for (int k = 0; k < 8; k++)
        line8 = (size_t)(strchr(text + line8, '\n') - text) + 1;
    const char *dirs[3] = {cut, kept, full};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/metrics.jsonl", dirs[i]);
        ASSERT_OK(fileio_write_atomic(path, text, i == 0 ? line8 + 20 : line8, &d), &d);
        snprintf(path, sizeof path, "%s/events.jsonl", dirs[i]);
        static const char ev[] = "{\"step\":5,\"type\":\"phase\",\"phase\":\"qat\",\"msg\":\"QAT on\"}\n";
        ASSERT_OK(fileio_write_atomic(path, ev, strlen(ev), &d), &d);
    }
    qs_free(text);
    plots_image img = {0}, want = {0};
    plots_curves_cuts cuts;
    ASSERT_OK(plots_curves_render_cuts(&cut, 1, &img, &cuts, &d), &d);
    ASSERT_OK(plots_curves_render_cuts(&kept, 1, &want, &cuts, &d), &d);
    ASSERT_EQ_INT(cuts.n, 0);   /* complete lines only: nothing to say */
    plots_image_free(&img);
    ASSERT_OK(plots_curves_render_cuts(&cut, 1, &img, &cuts, &d), &d);
    ASSERT_EQ_INT(cuts.n, 1);
    ASSERT_TRUE(strstr(cuts.msg[0], "sc_cut/run/metrics.jsonl:9: log is truncated after 8 complete "
                                    "records (last line has no newline)") != NULL);
    ASSERT_TRUE(img.width == want.width && img.height == want.height &&
                !memcmp(img.rgb, want.rgb, (size_t)img.width * (size_t)img.height * 3));
    plots_image_free(&want);
    /* the events log cut too, and a --compare run: each cut log is named */
    snprintf(path, sizeof path, "%s/events.jsonl", cut);
    static const char ev_cut[] = "{\"step\":5,\"type\":\"phase\",\"phase\":\"qat\"}\n{\"step\":7,\"ty";
    ASSERT_OK(fileio_write_atomic(path, ev_cut, strlen(ev_cut), &d), &d);
    const char *both[2] = {full, cut};
    plots_image_free(&img);
    ASSERT_OK(plots_curves_render_cuts(both, 2, &img, &cuts, &d), &d);
    ASSERT_EQ_INT(cuts.n, 2);
    ASSERT_TRUE(strstr(cuts.msg[0], "sc_cut/run/metrics.jsonl:9: ") != NULL);
    ASSERT_TRUE(strstr(cuts.msg[1], "sc_cut/run/events.jsonl:2: log is truncated after 1 complete") != NULL);
    plots_image_free(&img);
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (the CLI half)");
    static char out[8192], err[8192];
    char args[1800], png[900];
    snprintf(path, sizeof path, "%s/events.jsonl", cut);   /* the metrics cut alone */
    ASSERT_OK(fileio_write_atomic(path, ev_cut, strlen(ev_cut) - 13, &d), &d);
    snprintf(png, sizeof png, "%s/curves_cli.png", cut);
    snprintf(args, sizeof args, "plot %s --out %s", cut, png);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
    ASSERT_TRUE(strstr(err, "qatscope: warning: ") == err &&
                strstr(err, "sc_cut/run/metrics.jsonl:9: log is truncated after 8 complete records") &&
                strchr(err, '\n') == err + strlen(err) - 1);   /* one line */
    ASSERT_TRUE(fileio_exists(png));
}
