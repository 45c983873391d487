/* test_plots.c: heatmap and curve PNGs decoded back and checked; binning; bad run dirs.
 * Run dirs are crafted here (tests/test_plots.c writes them into the scratch dir). */
#include <dirent.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/plots.h"
#include "qs/plots_test.h"
#include "qs/zlog.h"
#include "test.h"

/* ---------- crafted run dirs ---------- */

static const char *run_path(const char *name)
{
    static char buf[4][600];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 600, "%s/%s", test_tmp_dir(), name);
    mkdir(p, 0755);
    return p;
}

/* quantizer names in a deliberately scrambled header order */
static const char *const QNAMES[] = {
    "layers.4.mlp.down_proj.input", "layers.3.mlp.up_proj.weight", "layers.3.mlp.gate_proj.input",
    "layers.4.mlp.gate_proj.weight", "layers.3.mlp.down_proj.weight", "layers.4.mlp.up_proj.input",
    "layers.3.mlp.gate_proj.weight", "layers.4.mlp.down_proj.weight", "layers.3.mlp.up_proj.input",
    "layers.4.mlp.gate_proj.input", "layers.3.mlp.down_proj.input", "layers.4.mlp.up_proj.weight",
};
enum { NQ = 12 };

/* n_steps steps, QAT from step qat; quantizer `spike_q` clips at rate `spike` on step
 * `spike_step`, everything else clips 0; QSNR 30 dB (spike step: 10 dB); warmup: nulls */
static int write_quant_log(const char *dir, int n_steps, int qat, int spike_q, int spike_step,
                           double spike, int n_q)
{
    char path[700], line[8192];
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", dir);
    qs_diag d = {0};
    zlog_writer *w;
    if (zlog_writer_create(&w, path, ZLOG_TRUNCATE, &d))
        return -1;
    int k = snprintf(line, sizeof line, "{\"v\":1,\"type\":\"header\",\"run\":\"crafted\",\"recipe\":"
                                        "{\"estimator\":\"max-window:64\"},\"quantizers\":[");
    for (int i = 0; i < n_q; i++)
        k += snprintf(line + k, sizeof line - (size_t)k, "%s\"%s\"", i ? "," : "", QNAMES[i]);
    k += snprintf(line + k, sizeof line - (size_t)k, "]}");
    if (zlog_write(w, line, (size_t)k, &d))
        return -1;
    for (int s = 0; s < n_steps; s++) {
        int q_on = s >= qat;
        k = snprintf(line, sizeof line, "{\"v\":1,\"type\":\"step\",\"step\":%d,\"phase\":\"%s\",\"q\":[",
                     s, q_on ? "qat" : "warmup");
        for (int i = 0; i < n_q; i++) {
            int hit = i == spike_q && s == spike_step;
            double cr = hit ? spike : 0.0;
            if (q_on)
                k += snprintf(line + k, sizeof line - (size_t)k,
                              "%s{\"name\":\"%s\",\"pred_amax\":2.0,\"amax\":%g,\"clip_rate\":%g,"
                              "\"under_rate\":1e-4,\"qsnr_db\":%g}",
                              i ? "," : "", QNAMES[i], hit ? 3.0 : 1.0, cr, hit ? 10.0 : 30.0);
            else
                k += snprintf(line + k, sizeof line - (size_t)k,
                              "%s{\"name\":\"%s\",\"pred_amax\":2.0,\"amax\":1.0,\"clip_rate\":%g,"
                              "\"under_rate\":null,\"qsnr_db\":null}",
                              i ? "," : "", QNAMES[i], cr);
        }
        k += snprintf(line + k, sizeof line - (size_t)k, "]}");
        if (zlog_write(w, line, (size_t)k, &d))
            return -1;
        if (s % 500 == 499 && zlog_flush(w, &d))
            return -1;
    }
    return zlog_close(w, &d);
}

static int pixel_eq(const plots_image *img, int x, int y, plot_rgb c)
{
    const unsigned char *p = img->rgb + ((size_t)y * (size_t)img->width + (size_t)x) * 3;
    return p[0] == c.r && p[1] == c.g && p[2] == c.b;
}

static int pixel_is(const plots_image *img, int x, int y, plot_rgb c)
{
    const unsigned char *p = img->rgb + ((size_t)y * (size_t)img->width + (size_t)x) * 3;
    if (p[0] == c.r && p[1] == c.g && p[2] == c.b)
        return 1;
    fprintf(stderr, "    pixel (%d,%d) = (%d,%d,%d), expected (%d,%d,%d)\n", x, y, p[0], p[1],
            p[2], c.r, c.g, c.b);
    return 0;
}

static long count_color(const plots_image *img, plot_rgb c)
{
    long n = 0;
    for (size_t i = 0; i < (size_t)img->width * (size_t)img->height; i++)
        n += img->rgb[3 * i] == c.r && img->rgb[3 * i + 1] == c.g && img->rgb[3 * i + 2] == c.b;
    return n;
}

static int row_of(const plots_heatmap *hm, const char *name)
{
    for (int r = 0; r < hm->n_rows; r++)
        if (!strcmp(hm->row_names[r], name))
            return r;
    return -1;
}

static int no_temp_files(const char *dir)
{
    DIR *dp = opendir(dir);
    struct dirent *e;
    int clean = 1;
    while (dp && (e = readdir(dp)))
        if (strstr(e->d_name, ".tmp"))
            clean = 0;
    if (dp)
        closedir(dp);
    return clean;
}

/* ---------- primitives ---------- */

TEST(plots, png_roundtrip_is_exact_and_atomic)
{
    plots_image img;
    ASSERT_OK(canvas_init_impl(&img, 37, 23, (plot_rgb){1, 2, 3}, NULL), NULL);
    canvas_rect_impl(&img, 5, 6, 4, 3, (plot_rgb){200, 100, 50});
    canvas_rect_impl(&img, -10, -10, 12, 12, (plot_rgb){9, 9, 9});   /* clipped, no crash */
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s", run_path("png_rt"));
    snprintf(path, sizeof path, "%s/a.png", dir);
    ASSERT_OK(plots_png_write(path, &img, NULL), NULL);
    plots_image back;
    qs_diag d = {0};
    ASSERT_OK(plots_png_read(path, &back, &d), &d);
    ASSERT_EQ_INT(back.width, 37);
    ASSERT_EQ_INT(back.height, 23);
    ASSERT_TRUE(memcmp(back.rgb, img.rgb, 37 * 23 * 3) == 0);
    ASSERT_TRUE(no_temp_files(dir));
    plots_image_free(&back);
    plots_image_free(&img);
    snprintf(path, sizeof path, "%s/missing/dir/a.png", dir);
    ASSERT_OK(canvas_init_impl(&img, 4, 4, (plot_rgb){0, 0, 0}, NULL), NULL);
    ASSERT_TRUE(plots_png_write(path, &img, &d) < 0);
    plots_image_free(&img);
    snprintf(path, sizeof path, "%s/not.png", dir);
    ASSERT_OK(fileio_write_atomic(path, "hello", 5, NULL), NULL);
    ASSERT_EQ_INT(plots_png_read(path, &back, &d), QS_EFORMAT);
}

TEST(plots, font_draws_known_glyph_bits)
{
    plots_image img;
    plot_rgb ink = {0, 0, 0};
    ASSERT_OK(canvas_init_impl(&img, 40, 20, (plot_rgb){255, 255, 255}, NULL), NULL);
    ASSERT_EQ_INT(canvas_text_impl(&img, 0, 0, "T|", 1, ink), 12);
    /* 'T': full top row, stem in column 2 down to row 6, nothing in row 7 */
    for (int x = 0; x < 5; x++)
        ASSERT_TRUE(pixel_is(&img, x, 0, ink));
    ASSERT_TRUE(pixel_is(&img, 2, 6, ink));
    ASSERT_TRUE(!(img.rgb[(7 * 40 + 2) * 3] == 0));
    ASSERT_TRUE(!(img.rgb[(3 * 40 + 0) * 3] == 0));
    ASSERT_TRUE(pixel_is(&img, 6 + 2, 3, ink));   /* '|' at the second cell */
    ASSERT_EQ_INT(canvas_text_width_impl("abc", 2), 34);
    /* every printable glyph but space has ink */
    for (int ch = 33; ch < 127; ch++) {
        int ink_rows = 0;
        for (int r = 0; r < 8; r++)
            ink_rows += font_glyphs_impl[ch - 32][r] != 0;
        ASSERT_TRUE(ink_rows > 0);
    }
    plots_image_free(&img);
}

TEST(plots, colormap_lightness_is_monotonic)
{
    double prev = -1;
    for (int i = 0; i < 256; i++) {
        unsigned char c[3];
        plots_colormap_rgb(i / 255.0, c);
        /* relative luminance (sRGB decoded) must rise with the value */
        double lin[3];
        for (int k = 0; k < 3; k++) {
            double v = c[k] / 255.0;
            lin[k] = v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4);
        }
        double y = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2];
        ASSERT_TRUE(y >= prev - 3e-4);   /* 8-bit rounding wobbles by ~1e-4 */
        prev = y;
        if (i == 0)
            ASSERT_TRUE(y < 0.05);
    }
    unsigned char lo[3], hi[3], nan_c[3];
    plots_colormap_rgb(0, lo);
    plots_colormap_rgb(1, hi);
    plots_colormap_rgb(NAN, nan_c);
    ASSERT_TRUE(prev > 0.75);
    ASSERT_TRUE(lo[2] > lo[1] && hi[0] > 200 && hi[1] > 200 && hi[2] < 100);   /* blue-violet .. yellow */
    ASSERT_TRUE(memcmp(lo, nan_c, 3) == 0);
}

/* ---------- heatmap ---------- */

TEST(plots, heatmap_rows_grouped_and_cells_coloured)
{
    const char *dir = run_path("hm_small");
    ASSERT_EQ_INT(write_quant_log(dir, 40, 10, 0, 25, 0.5, NQ), 0);
    plots_heatmap_opts o;
    plots_heatmap_opts_default(&o);
    plots_heatmap hm;
    qs_diag d = {0};
    ASSERT_OK(plots_heatmap_load(&hm, dir, &o, &d), &d);
    ASSERT_EQ_INT(hm.n_rows, NQ);
    ASSERT_EQ_INT(hm.n_cols, 40);
    ASSERT_EQ_INT(hm.qat_step, 10);
    ASSERT_EQ_STR(hm.run, "crafted");
    ASSERT_EQ_STR(hm.estimator, "max-window:64");
    ASSERT_EQ_STR(hm.row_names[0], "layers.3.mlp.gate_proj.input");
    ASSERT_EQ_STR(hm.row_names[1], "layers.3.mlp.gate_proj.weight");
    ASSERT_EQ_STR(hm.row_names[5], "layers.3.mlp.down_proj.weight");
    ASSERT_EQ_STR(hm.row_names[10], "layers.4.mlp.down_proj.input");
    plots_image img;
    ASSERT_OK(plots_heatmap_render(&hm, &o, &img, &d), &d);
    char png[700];
    snprintf(png, sizeof png, "%s/hm.png", dir);
    ASSERT_OK(plots_png_write(png, &img, &d), &d);
    plots_image back;
    ASSERT_OK(plots_png_read(png, &back, &d), &d);
    ASSERT_EQ_INT(back.width, img.width);
    ASSERT_EQ_INT(back.height, img.height);
    int r = row_of(&hm, "layers.4.mlp.down_proj.input");
    int cx = hm.plot_x + 25 * hm.cell_w + hm.cell_w / 2, cy = hm.plot_y + r * hm.cell_h + hm.cell_h / 2;
    ASSERT_TRUE(pixel_is(&back, cx, cy, colormap_rgb_impl(1.0)));                 /* the clip */
    ASSERT_TRUE(pixel_is(&back, cx + hm.cell_w, cy, colormap_rgb_impl(0.0)));     /* next step */
    ASSERT_TRUE(pixel_is(&back, cx, cy - hm.cell_h, colormap_rgb_impl(0.0)));     /* other row */
    /* legend: colour bar runs from the top colour to the bottom colour */
    ASSERT_TRUE(pixel_is(&back, hm.bar_x + hm.bar_w / 2, hm.bar_y, colormap_rgb_impl(1.0)));
    ASSERT_TRUE(pixel_is(&back, hm.bar_x + hm.bar_w / 2, hm.bar_y + hm.bar_h - 1, colormap_rgb_impl(0.0)));
    ASSERT_TRUE(count_color(&back, (plot_rgb){34, 34, 34}) > 2000);   /* labels were drawn */
    /* phase boundary: dashed line at the left edge of column 10 */
    long phase_px = 0;
    for (int y = hm.plot_y; y < hm.plot_y + hm.n_rows * hm.cell_h; y++)
        phase_px += pixel_eq(&back, hm.plot_x + 10 * hm.cell_w, y, (plot_rgb){230, 40, 90});
    ASSERT_TRUE(phase_px > hm.n_rows * hm.cell_h / 3);
    plots_image_free(&back);
    plots_image_free(&img);
    plots_heatmap_free(&hm);
}

TEST(plots, heatmap_missing_values_are_grey)
{
    const char *dir = run_path("hm_under");
    ASSERT_EQ_INT(write_quant_log(dir, 20, 10, 0, 15, 0.1, NQ), 0);
    plots_heatmap_opts o;
    plots_heatmap_opts_default(&o);
    o.metric = PLOTS_METRIC_UNDERFLOW_RATE;
    o.tensors = PLOTS_TENSORS_INPUT;
    plots_heatmap hm;
    plots_image img;
    qs_diag d = {0};
    ASSERT_OK(plots_heatmap_load(&hm, dir, &o, &d), &d);
    ASSERT_EQ_INT(hm.n_rows, 6);
    ASSERT_TRUE(isnan(hm.values[3]));          /* warmup: under_rate null */
    ASSERT_NEAR(hm.values[12], 1e-4, 1e-9);
    ASSERT_OK(plots_heatmap_render(&hm, &o, &img, &d), &d);
    ASSERT_TRUE(pixel_is(&img, hm.plot_x + 3 * hm.cell_w + 1, hm.plot_y + hm.cell_h / 2,
                         (plot_rgb){190, 190, 190}));
    plots_image_free(&img);
    plots_heatmap_free(&hm);
}

TEST(plots, binning_keeps_single_step_spike)
{
    const char *dir = run_path("hm_long");
    ASSERT_EQ_INT(write_quant_log(dir, 12000, 500, 1, 7777, 3e-5, 2), 0);
    plots_heatmap_opts o;
    plots_heatmap_opts_default(&o);
    plots_heatmap hm;
    qs_diag d = {0};
    ASSERT_OK(plots_heatmap_load(&hm, dir, &o, &d), &d);
    ASSERT_EQ_INT(hm.n_steps, 12000);
    ASSERT_EQ_INT(hm.n_cols, 1000);
    int r = row_of(&hm, QNAMES[1]), hits = 0, spike_col = -1;
    for (int c = 0; c < hm.n_cols; c++)
        if (hm.values[(size_t)r * 1000 + (size_t)c] > 0) {
            hits++;
            spike_col = c;
        }
    ASSERT_EQ_INT(hits, 1);
    ASSERT_TRUE(hm.col_first[spike_col] <= 7777 && hm.col_last[spike_col] >= 7777);
    ASSERT_NEAR(hm.values[(size_t)r * 1000 + (size_t)spike_col], 3e-5, 1e-12);
    ASSERT_EQ_INT(hm.col_first[0], 0);
    ASSERT_EQ_INT(hm.col_last[999], 11999);
    /* the spike is the brightest cell of the image */
    plots_image img;
    ASSERT_OK(plots_heatmap_render(&hm, &o, &img, &d), &d);
    ASSERT_EQ_INT(hm.cell_w, 1);
    ASSERT_TRUE(pixel_is(&img, hm.plot_x + spike_col, hm.plot_y + r * hm.cell_h + hm.cell_h / 2,
                         colormap_rgb_impl(1.0)));
    plots_image_free(&img);
    plots_heatmap_free(&hm);
    /* QSNR bins keep the minimum */
    o.metric = PLOTS_METRIC_QSNR;
    ASSERT_OK(plots_heatmap_load(&hm, dir, &o, &d), &d);
    ASSERT_NEAR(hm.values[(size_t)r * 1000 + (size_t)spike_col], 10.0, 1e-6);
    ASSERT_NEAR(hm.values[(size_t)r * 1000 + (size_t)spike_col + 1], 30.0, 1e-6);
    plots_heatmap_free(&hm);
}

TEST(plots, resumed_log_replaces_repeated_steps)
{
    const char *dir = run_path("hm_resume");
    ASSERT_EQ_INT(write_quant_log(dir, 30, 5, 0, 20, 0.25, 2), 0);
    /* resume from step 15: header again, steps 15.. again without the spike */
    char path[700];
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", dir);
    qs_diag d = {0};
    zlog_writer *w;
    ASSERT_OK(zlog_writer_create(&w, path, ZLOG_APPEND, &d), &d);
    char line[512];
    int k = snprintf(line, sizeof line, "{\"v\":1,\"type\":\"header\",\"run\":\"crafted\",\"recipe\":{},\"quantizers\":[\"%s\",\"%s\"]}", QNAMES[0], QNAMES[1]);
    ASSERT_OK(zlog_write(w, line, (size_t)k, &d), &d);
    for (int s = 15; s < 25; s++) {
        k = snprintf(line, sizeof line, "{\"v\":1,\"type\":\"step\",\"step\":%d,\"phase\":\"qat\",\"q\":[{\"name\":\"%s\",\"clip_rate\":0},{\"name\":\"%s\",\"clip_rate\":0}]}", s, QNAMES[0], QNAMES[1]);
        ASSERT_OK(zlog_write(w, line, (size_t)k, &d), &d);
    }
    ASSERT_OK(zlog_close(w, &d), &d);
    plots_heatmap_opts o;
    plots_heatmap_opts_default(&o);
    plots_heatmap hm;
    ASSERT_OK(plots_heatmap_load(&hm, dir, &o, &d), &d);
    ASSERT_EQ_INT(hm.n_steps, 25);
    for (size_t i = 0; i < (size_t)hm.n_rows * (size_t)hm.n_cols; i++)
        ASSERT_TRUE(hm.values[i] == 0.0f);
    plots_heatmap_free(&hm);
}

TEST(plots, heatmap_bad_run_dirs_name_the_file)
{
    plots_heatmap_opts o;
    plots_heatmap_opts_default(&o);
    plots_heatmap hm;
    qs_diag d = {0};
    const char *empty = run_path("hm_empty");
    ASSERT_EQ_INT(plots_heatmap_load(&hm, empty, &o, &d), QS_ENOTFOUND);
    ASSERT_TRUE(strstr(d.path, "hm_empty/quant.jsonl.zst") != NULL);
    const char *bad = run_path("hm_bad");
    char path[700];
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", bad);
    const char *text = "{\"v\":1,\"type\":\"header\",\"run\":\"x\",\"recipe\":{},\"quantizers\":[\"a.input\"]}\n"
                       "{\"v\":1,\"type\":\"step\",\"step\":0,\"q\":[{\"name\":\"a.input\",\"clip_rate\":0}]}\n"
                       "{\"v\":1,\"type\":\"step\",\"step\":1,\"q\":[{\"name\":\"a.input\",\"clip_rate\":0},"
                       "{\"name\":\"b.input\"}]}\n";
    ASSERT_OK(fileio_write_atomic(path, text, strlen(text), NULL), NULL);
    ASSERT_EQ_INT(plots_heatmap_load(&hm, bad, &o, &d), QS_EFORMAT);
    ASSERT_EQ_INT(d.line, 3);
    ASSERT_TRUE(strstr(d.msg, "step 1: quantizer 'b.input' is not in the header's list") != NULL);
    text = "{\"v\":2,\"type\":\"header\",\"run\":\"x\",\"quantizers\":[\"a.input\"]}\n";
    ASSERT_OK(fileio_write_atomic(path, text, strlen(text), NULL), NULL);
    ASSERT_EQ_INT(plots_heatmap_load(&hm, bad, &o, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "$.v: expected version 1, found 2") != NULL);
    /* a name listed twice in the header: said so, not "not in the header's list" later */
    text = "{\"v\":1,\"type\":\"header\",\"run\":\"x\",\"recipe\":{},"
           "\"quantizers\":[\"a.input\",\"b.input\",\"a.input\"]}\n";
    ASSERT_OK(fileio_write_atomic(path, text, strlen(text), NULL), NULL);
    ASSERT_EQ_INT(plots_heatmap_load(&hm, bad, &o, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "quantizer 'a.input' is listed twice in the header (entries 0 and 2)"));
    /* a log cut inside its last frame still plots its complete records */
    const char *cut = run_path("hm_cut");
    ASSERT_EQ_INT(write_quant_log(cut, 1000, 10, 0, 5, 0.5, 2), 0);
    fileio_map m;
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", cut);
    ASSERT_OK(fileio_map_open(&m, path, &d), &d);
    char *copy = qs_malloc(m.bytes);
    ASSERT_TRUE(copy != NULL);
    memcpy(copy, m.data, m.bytes);
    size_t n = m.bytes - 7;
    fileio_unmap(&m);
    ASSERT_OK(fileio_write_atomic(path, copy, n, &d), &d);
    qs_free(copy);
    ASSERT_OK(plots_heatmap_load(&hm, cut, &o, &d), &d);
    /* frames of 500 steps; the second was cut: its complete lines survive, not all */
    ASSERT_TRUE(hm.n_steps >= 500 && hm.n_steps < 1000);
    plots_heatmap_free(&hm);
}

/* ---------- curves ---------- */

static void write_metrics(const char *dir, int n_steps, int qat, int with_evals, double clip_at)
{
    char path[700];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    for (int s = 0; s < n_steps; s++) {
        if (with_evals && s % 50 == 0)
            fprintf(f, "{\"type\":\"eval\",\"step\":%d,\"tasks\":{\"arc_easy\":{\"acc\":0.4,\"acc_norm\":%g,\"n\":100},"
                       "\"mmlu\":{\"acc\":%g,\"n\":100}},\"val_loss\":3.0}\n", s, 0.42 - s * 1e-4, 0.26);
        fprintf(f, "{\"type\":\"train\",\"step\":%d,\"phase\":\"%s\",\"loss\":%g,\"lr\":1e-5,"
                   "\"max_clip_rate\":%g,\"grad_norm\":null}\n",
                s, s >= qat ? "qat" : "warmup", 3.0 - s * 0.001, s == (int)clip_at ? 1e-3 : 0.0);
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/events.jsonl", dir);
    f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f, "{\"step\":%d,\"type\":\"phase\",\"phase\":\"qat\",\"msg\":\"QAT on\"}\n", qat);
    fprintf(f, "{\"step\":150,\"type\":\"forgetting\",\"task\":\"arc_easy\",\"baseline\":0.42,\"acc\":0.4,"
               "\"drop_points\":2.0,\"p_value\":0.01}\n");
    fclose(f);
}

TEST(plots, curves_png_has_runs_phase_and_legend)
{
    const char *a = run_path("cv_a"), *b = run_path("cv_b");
    write_metrics(a, 200, 50, 1, 120);
    write_metrics(b, 180, 60, 1, 30);
    const char *runs[2] = {a, b};
    char png[700];
    snprintf(png, sizeof png, "%s/curves.png", a);
    qs_diag d = {0};
    ASSERT_OK(plots_curves_write(runs, 2, png, &d), &d);
    plots_image img;
    ASSERT_OK(plots_png_read(png, &img, &d), &d);
    ASSERT_EQ_INT(img.width, 1400);
    ASSERT_TRUE(img.height > 600);
    ASSERT_TRUE(count_color(&img, (plot_rgb){38, 96, 200}) > 500);   /* run 1 colour */
    ASSERT_TRUE(count_color(&img, (plot_rgb){232, 118, 18}) > 300);  /* run 2 colour */
    ASSERT_TRUE(count_color(&img, (plot_rgb){230, 40, 90}) > 400);   /* QAT lines */
    ASSERT_TRUE(count_color(&img, (plot_rgb){170, 20, 20}) > 20);    /* forgetting mark */
    ASSERT_TRUE(count_color(&img, (plot_rgb){34, 34, 34}) > 3000);   /* axes and text */
    ASSERT_TRUE(no_temp_files(a));
    plots_image_free(&img);
    /* a run without evals or clipping still plots */
    const char *c = run_path("cv_c");
    write_metrics(c, 30, 10, 0, -1);
    ASSERT_OK(plots_curves_render(&c, 1, &img, &d), &d);
    plots_image_free(&img);
}

TEST(plots, curves_bad_inputs_name_the_file)
{
    const char *e = run_path("cv_empty");
    plots_image img;
    qs_diag d = {0};
    ASSERT_EQ_INT(plots_curves_render(&e, 1, &img, &d), QS_ENOTFOUND);
    ASSERT_TRUE(strstr(d.path, "cv_empty/metrics.jsonl") != NULL);
    char path[700];
    snprintf(path, sizeof path, "%s/metrics.jsonl", e);
    const char *text = "{\"type\":\"train\",\"step\":0,\"loss\":3}\n{\"type\":\"train\",\"loss\":3}\n";
    ASSERT_OK(fileio_write_atomic(path, text, strlen(text), NULL), NULL);
    ASSERT_EQ_INT(plots_curves_render(&e, 1, &img, &d), QS_EFORMAT);
    ASSERT_EQ_INT(d.line, 2);
    /* the file too (it was lost when the README hint was appended) */
    ASSERT_TRUE(strstr(d.path, "cv_empty/metrics.jsonl") != NULL);
    char line[QS_DIAG_MSG_MAX + QS_DIAG_PATH_MAX + 32];
    diag_format(&d, line, sizeof line);
    ASSERT_TRUE(strstr(line, "cv_empty/metrics.jsonl:2: $.step") != NULL);
    /* values outside their range (an accuracy in percent drew 170%) */
    static const struct { const char *rec, *want; } bad[] = {
        {"{\"type\":\"eval\",\"step\":2,\"tasks\":{\"arc_easy\":{\"acc\":1.7,\"acc_norm\":1.7}}}",
         "$.tasks.arc_easy.acc_norm: expected an accuracy in [0, 1], found 1.7"},
        {"{\"type\":\"eval\",\"step\":2,\"val_kl_ref\":-0.5,\"val_top1_ref\":0.5,\"tasks\":{}}",
         "$.val_kl_ref: expected a KL >= 0, found -0.5"},
        {"{\"type\":\"eval\",\"step\":2,\"val_kl_ref\":0.5,\"val_top1_ref\":1.5,\"tasks\":{}}",
         "$.val_top1_ref: expected a fraction in [0, 1], found 1.5"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char rec[512];
        int len = snprintf(rec, sizeof rec, "{\"type\":\"train\",\"step\":0,\"loss\":3}\n%s\n",
                           bad[i].rec);
        ASSERT_OK(fileio_write_atomic(path, rec, (size_t)len, NULL), NULL);
        ASSERT_EQ_INT(plots_curves_render(&e, 1, &img, &d), QS_ERANGE);
        if (!strstr(d.msg, bad[i].want))
            fprintf(stderr, "    case %zu: %s\n", i, d.msg);
        ASSERT_TRUE(strstr(d.msg, bad[i].want) != NULL && d.line == 2);
    }
}

/* A malformed metrics.jsonl line cites where the format is written down: the
 * README section that exists, not a formats.md that does not (issue 16.8). */
TEST(plots, curves_format_error_cites_an_existing_readme_section)
{
    const char *e = run_path("cv_cite");
    char path[700];
    snprintf(path, sizeof path, "%s/metrics.jsonl", e);
    const char *text = "{\"type\":\"train\",\"loss\":3}\n";
    ASSERT_OK(fileio_write_atomic(path, text, strlen(text), NULL), NULL);
    plots_image img;
    qs_diag d = {0};
    ASSERT_EQ_INT(plots_curves_render(&e, 1, &img, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "formats.md") == NULL);
    const char *cite = strstr(d.msg, "README '");
    ASSERT_TRUE(cite != NULL);
    char heading[64];
    ASSERT_EQ_INT(sscanf(cite + 8, "%63[^']", heading), 1);   /* "### run directory" */
    char *readme;
    size_t n;
    ASSERT_OK(fileio_read_all("README.md", &readme, &n, NULL), NULL);
    char line[80];
    snprintf(line, sizeof line, "\n%s\n", heading);
    int found = strstr(readme, line) != NULL;
    qs_free(readme);
    ASSERT_TRUE(found);
}

/* ---------- CLI ---------- */

static int run_cli(const char *args)
{
    const char *bin = getenv("QS_BIN");
    if (!bin)
        return -1;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s > %s/plots_cli.txt 2>&1", bin, args, test_tmp_dir());
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(plots, cli_heatmap_and_plot_exit_codes)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const char *dir = run_path("cli_run");
    ASSERT_EQ_INT(write_quant_log(dir, 60, 20, 3, 40, 0.01, NQ), 0);
    write_metrics(dir, 60, 20, 1, 40);
    char args[1024], png[700];
    snprintf(args, sizeof args, "heatmap %s --metric amax_ratio --tensors weight --log", dir);
    ASSERT_EQ_INT(run_cli(args), 0);
    snprintf(png, sizeof png, "%s/heatmap_amax_ratio.png", dir);
    plots_image img;
    qs_diag d = {0};
    ASSERT_OK(plots_png_read(png, &img, &d), &d);
    plots_image_free(&img);
    snprintf(args, sizeof args, "plot %s --compare %s --out %s/cmp.png", dir, dir, dir);
    ASSERT_EQ_INT(run_cli(args), 0);
    snprintf(png, sizeof png, "%s/cmp.png", dir);
    ASSERT_OK(plots_png_read(png, &img, &d), &d);
    plots_image_free(&img);
    snprintf(args, sizeof args, "heatmap %s --metric clipping", dir);
    ASSERT_EQ_INT(run_cli(args), 2);
    snprintf(args, sizeof args, "heatmap %s/nope", dir);
    ASSERT_EQ_INT(run_cli(args), 2);
    snprintf(args, sizeof args, "heatmap %s --range 5:1", dir);
    ASSERT_EQ_INT(run_cli(args), 2);
    snprintf(args, sizeof args, "heatmap %s --range -inf:1", dir);
    ASSERT_EQ_INT(run_cli(args), 2);
    snprintf(args, sizeof args, "heatmap %s --range 0:0.01 --out %s/fixed.png", dir, dir);
    ASSERT_EQ_INT(run_cli(args), 0);
    ASSERT_EQ_INT(run_cli("plot"), 2);
}

/* --out as eval's --output and gate's --junit: missing parents are created; a path
 * under a regular file or in an unwritable place is one error line, exit 2, before
 * any work, and leaves nothing behind.  Both commands failed here with an
 * open error deep in the PNG writer. */
TEST(plots, cli_out_creates_missing_parents_and_refuses_unusable_ones)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    static char out[4096], err[4096];
    const char *dir = run_path("cli_out_run");
    ASSERT_EQ_INT(write_quant_log(dir, 30, 10, 3, 20, 0.01, NQ), 0);
    write_metrics(dir, 30, 10, 0, 20);
    char args[2048], png[700], file[700];
    plots_image img;
    qs_diag d = {0};
    for (int k = 0; k < 2; k++) {
        const char *cmd = k ? "plot" : "heatmap";
        snprintf(png, sizeof png, "%s/new_%s/a/b/out.png", dir, cmd);
        snprintf(args, sizeof args, "%s %s --out %s", cmd, dir, png);
        ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
        ASSERT_OK(plots_png_read(png, &img, &d), &d);
        plots_image_free(&img);
        snprintf(file, sizeof file, "%s/new_%s/a/b", dir, cmd);
        ASSERT_TRUE(no_temp_files(file));

        snprintf(file, sizeof file, "%s/plain_%s", dir, cmd);
        ASSERT_OK(fileio_write_atomic(file, "x", 1, NULL), NULL);
        snprintf(args, sizeof args, "%s %s --out %s/out.png", cmd, dir, file);
        ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 2);
        ASSERT_TRUE(strstr(err, "--out: cannot create the directory of") != NULL);
        ASSERT_TRUE(strstr(err, "not a directory") != NULL);
        ASSERT_TRUE(strchr(err, '\n') == err + strlen(err) - 1);
        ASSERT_EQ_STR(out, "");

        snprintf(args, sizeof args, "%s %s --out %s", cmd, dir, dir);
        ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 2);
        ASSERT_TRUE(strstr(err, "is a directory; expected a file name") != NULL);

        if (geteuid() != 0) {   /* root writes into a 0555 directory anyway */
            char ro[700];
            snprintf(ro, sizeof ro, "%s/read_only_%s", dir, cmd);
            ASSERT_OK(fileio_mkdir_p(ro, NULL), NULL);
            ASSERT_EQ_INT(chmod(ro, 0555), 0);
            snprintf(args, sizeof args, "%s %s --out %s/out.png", cmd, dir, ro);
            int rc = test_run_cli(args, out, sizeof out, err, sizeof err);
            chmod(ro, 0755);
            ASSERT_EQ_INT(rc, 2);
            ASSERT_TRUE(strstr(err, "--out: cannot write in") != NULL);
            ASSERT_TRUE(no_temp_files(ro));
        }
    }
    ASSERT_TRUE(no_temp_files(dir));
}

/* eval lines with val_kl_ref / val_top1_ref (eval_kl_reference) add the KL and
 * agreement row; a malformed value names its line */
TEST(plots, curves_kl_reference_row_appears_with_kl_records)
{
    const char *a = run_path("cv_kl"), *b = run_path("cv_nokl");
    write_metrics(b, 100, 50, 1, -1);
    char path[700];
    snprintf(path, sizeof path, "%s/metrics.jsonl", a);
    FILE *f = fopen(path, "w");
    ASSERT_TRUE(f != NULL);
    for (int s = 0; s <= 100; s += 20)
        fprintf(f, "{\"type\":\"eval\",\"step\":%d,\"quantized\":%s,\"val_loss\":3.0,"
                   "\"val_kl_ref\":%g,\"val_top1_ref\":%g,\"tasks\":{}}\n",
                s, s >= 40 ? "true" : "false", s ? 0.01 * s : 2e-7, 1.0 - 0.001 * s);
    fclose(f);
    plots_image with, without;
    qs_diag d = {0};
    ASSERT_OK(plots_curves_render(&a, 1, &with, &d), &d);
    ASSERT_OK(plots_curves_render(&b, 1, &without, &d), &d);
    ASSERT_TRUE(with.height > without.height + 300);
    ASSERT_TRUE(count_color(&with, (plot_rgb){38, 96, 200}) > 200);
    /* every panel title stays inside the picture: no text in the right margin,
     * beyond the right-hand panels' frames, on a title line (86 + 360 r + 16: the
     * picture's top, row r's panel and its title 24 px above; the agreement panel's
     * title once ran off the edge) */
    long margin_ink = 0;
    for (int r = 0; r < 4; r++)
        for (int y = 86 + 360 * r + 16; y < 86 + 360 * r + 16 + 16; y++)
            for (int x = with.width - 24; x < with.width; x++) {
                const unsigned char *p = with.rgb + 3 * ((size_t)y * (size_t)with.width + (size_t)x);
                margin_ink += p[0] == 34 && p[1] == 34 && p[2] == 34;   /* INK */
            }
    ASSERT_EQ_INT(margin_ink, 0);
    plots_image_free(&with);
    plots_image_free(&without);
    const char *bad = "{\"type\":\"eval\",\"step\":0,\"val_kl_ref\":\"x\",\"tasks\":{}}\n";
    ASSERT_OK(fileio_write_atomic(path, bad, strlen(bad), NULL), NULL);
    ASSERT_EQ_INT(plots_curves_render(&a, 1, &with, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "val_kl_ref") != NULL);
    ASSERT_EQ_INT(d.line, 1);
}
