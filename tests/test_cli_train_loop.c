/* test_cli_train_loop.c: `qatscope train` with the in-loop evaluation on the
 * bundled tiny model: eval records (baseline, steps, quantized, val_loss),
 * frozen quantizers (the eval changes neither training nor the amax log), the
 * forgetting alarm (on a self-made task the training is built to forget), and
 * --plot-every PNGs. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/plots.h"
#include "test.h"
#include "test_run_logs.h"

static int loop_cli(const char *args)
{
    const char *bin = getenv("QS_BIN");
    if (!bin)
        return -100;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s >%s/loop_out.txt 2>&1", bin, args, test_tmp_dir());
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -102;
}

/* shards of data/demo/train.txt with a val split, made once */
static const char *loop_shards(void)
{
    static char dir[512];
    if (dir[0])
        return dir;
    char args[1200];
    snprintf(dir, sizeof dir, "%s/loop_shards", test_tmp_dir());
    snprintf(args, sizeof args,
             "tokenize --model data/demo/model --input data/demo/train.txt --out %s "
             "--val-fraction 0.1", dir);
    if (loop_cli(args) != 0) {
        dir[0] = 0;
        return NULL;
    }
    return dir;
}

/* run dir sub/name; extra = more JSON keys; quiet: --quiet (else the progress
 * lines go to loop_out.txt); returns the exit status */
static int loop_train_q(const char *sub, const char *name, const char *lr, int steps, int subset,
                        const char *extra, const char *flags, int quiet)
{
    char bench[512];
    if (!test_shared_path(bench, sizeof bench, "bench/arc") || !loop_shards())
        return -200;
    bench[strlen(bench) - 4] = 0;
    char path[700], js[3000], args[1600];
    snprintf(path, sizeof path, "%s/%s_%s.json", test_tmp_dir(), sub, name);
    int n = snprintf(js, sizeof js,
                     "{\"model\":\"data/demo/model\",\"train_data\":\"%s\",\"out_dir\":\"%s/%s/%s\","
                     "\"batch_size\":2,\"seq_len\":16,\"steps\":%d,\"lr\":%s,"
                     "\"bf16_warmup_steps\":1,\"quant_modules\":[\"layers.*.mlp.*\"],"
                     "\"eval_tasks\":[\"arc_easy\"],\"eval_data_dir\":\"%s\",\"eval_subset\":%d,"
                     "\"eval_val_batches\":2%s}",
                     loop_shards(), test_tmp_dir(), sub, name, steps, lr, bench, subset, extra);
    if (fileio_write_atomic(path, js, (size_t)n, NULL))
        return -201;
    snprintf(args, sizeof args, "train --config %s%s %s", path, quiet ? " --quiet" : "", flags);
    return loop_cli(args);
}

static int loop_train(const char *sub, const char *name, const char *lr, int steps, int subset,
                      const char *extra, const char *flags)
{
    return loop_train_q(sub, name, lr, steps, subset, extra, flags, 1);
}

static char *loop_read(const char *sub, const char *name, const char *file, size_t *n)
{
    char path[800];
    char *text = NULL;
    snprintf(path, sizeof path, "%s/%s/%s/%s", test_tmp_dir(), sub, name, file);
    if (fileio_read_all(path, &text, n, NULL))
        return NULL;
    return text;
}

static double loop_number_after(const char *s, const char *key)
{
    const char *p = strstr(s, key);
    return p ? strtod(p + strlen(key), NULL) : NAN;
}

/* the shared run: evals every 2 steps, pictures every 3 (and at the end) */
static int loop_run_a(void)
{
    static int rc = -1000;
    if (rc == -1000)
        rc = loop_train("a", "run", "1e-3", 4, 6, ",\"eval_every\":2", "--plot-every 3");
    return rc;
}

TEST(cli_train_loop, eval_records_baseline_steps_quantized_val_loss_and_items)
{
    int rc = loop_run_a();
    if (rc == -100 || rc == -200)
        SKIP("QS_BIN or ../shared/bench/arc not present");
    ASSERT_EQ_INT(rc, 0);
    size_t n;
    char *text = loop_read("a", "run", "metrics.jsonl", &n);
    ASSERT_TRUE(text != NULL);
    /* baseline first, before any train line; bf16 warmup -> master weights */
    ASSERT_TRUE(strncmp(text, "{\"type\":\"eval\",\"step\":0,\"quantized\":false,\"val_loss\":", 53) == 0);
    const char *e2 = strstr(text, "{\"type\":\"eval\",\"step\":2,\"quantized\":true,");
    const char *e4 = strstr(text, "{\"type\":\"eval\",\"step\":4,\"quantized\":true,");
    ASSERT_TRUE(e2 && e4 && e2 < e4);
    ASSERT_TRUE(strstr(text, "\"step\":1,\"quantized\"") == NULL);
    ASSERT_TRUE(strstr(text, "\"step\":3,\"quantized\"") == NULL);
    /* eval at step 2 comes after train step 1 and before train step 2 */
    const char *t1 = strstr(text, "{\"type\":\"train\",\"step\":1,");
    const char *t2 = strstr(text, "{\"type\":\"train\",\"step\":2,");
    ASSERT_TRUE(t1 && t2 && t1 < e2 && e2 < t2);
    for (const char *e = text; (e = strstr(e, "{\"type\":\"eval\"")); e++) {
        double vl = loop_number_after(e, "\"val_loss\":"), vp = loop_number_after(e, "\"val_ppl\":");
        ASSERT_TRUE(vl > 0 && vl < 20);
        ASSERT_NEAR(vp, exp(vl), 1e-5 * vp);
        ASSERT_TRUE(strstr(e, "\"val_batches\":2,\"tasks\":{\"arc_easy\":{\"acc\":") ==
                    strstr(e, "\"val_batches\""));
        const char *items = strstr(e, "\"n\":6,\"items_acc\":\"");
        ASSERT_TRUE(items != NULL);
        items += strlen("\"n\":6,\"items_acc\":\"");
        for (int i = 0; i < 6; i++)
            ASSERT_TRUE(items[i] == '0' || items[i] == '1');
        ASSERT_TRUE(items[6] == '"');
    }
    qs_free(text);
}

/* The line of an in-loop evaluation in the progress output, at its place (after
 * the step it follows), with the figures of its metrics.jsonl record. */
static int loop_eval_line_matches(const char *out, const char *metrics, long step, const char *what)
{
    char key[64], head[96], want[512];
    snprintf(key, sizeof key, "{\"type\":\"eval\",\"step\":%ld,", step);
    const char *e = strstr(metrics, key);
    if (!e)
        return 0;
    double vl = loop_number_after(e, "\"val_loss\":"), vp = loop_number_after(e, "\"val_ppl\":");
    double kl = loop_number_after(e, "\"val_kl_ref\":"), t1 = loop_number_after(e, "\"val_top1_ref\":");
    double acc = loop_number_after(e, "\"acc\":"), an = loop_number_after(e, "\"acc_norm\":");
    snprintf(head, sizeof head, "eval @ step %ld (%s, ", step, what);
    const char *l = strstr(out, head);
    if (!l)
        return 0;
    l = strstr(l, " s): ");
    snprintf(want, sizeof want,
             " s): val_loss %.4f ppl %#.4g | vs step 0 (bf16): KL %.3g top-1 %.1f%% | arc_easy acc "
             "%.3f acc_norm %.3f n 6\n", vl, vp, kl, 100.0 * t1, acc, an);
    return l && !strncmp(l, want, strlen(want));
}

/* The console shows each in-loop evaluation (issue 7's figures, live): the
 * baseline before step 0, then one line after every eval_every-th step, with
 * the values the run logs. */
TEST(cli_train_loop, progress_prints_each_evaluation_after_its_step)
{
    int rc = loop_train_q("v", "run", "1e-3", 4, 6, ",\"eval_every\":2", "", 0);
    if (rc == -100 || rc == -200)
        SKIP("QS_BIN or ../shared/bench/arc not present");
    ASSERT_EQ_INT(rc, 0);
    char path[600];
    size_t n;
    char *out, *metrics = loop_read("v", "run", "metrics.jsonl", &n);
    snprintf(path, sizeof path, "%s/loop_out.txt", test_tmp_dir());
    ASSERT_TRUE(metrics != NULL);
    ASSERT_OK(fileio_read_all(path, &out, &n, NULL), NULL);
    const char *e0 = strstr(out, "eval @ step 0 (unquantized, "), *s0 = strstr(out, "step 0/3 ");
    const char *s1 = strstr(out, "step 1/3 "), *e2 = strstr(out, "eval @ step 2 (HiF8 as trained, ");
    const char *s2 = strstr(out, "step 2/3 "), *s3 = strstr(out, "step 3/3 ");
    const char *e4 = strstr(out, "eval @ step 4 (HiF8 as trained, ");
    int order = e0 && s0 && s1 && e2 && s2 && s3 && e4 && e0 < s0 && s1 < e2 && e2 < s2 &&
                s3 < e4 && !strstr(out, "eval @ step 1") && !strstr(out, "eval @ step 3");
    int same = loop_eval_line_matches(out, metrics, 0, "unquantized") &&
               loop_eval_line_matches(out, metrics, 2, "HiF8 as trained") &&
               loop_eval_line_matches(out, metrics, 4, "HiF8 as trained");
    if (!order || !same)
        fprintf(stderr, "  progress output:\n%s", out);
    qs_free(out);
    qs_free(metrics);
    ASSERT_TRUE(order);
    ASSERT_TRUE(same);
}

/* The frozen quantizers: a run with in-loop evals trains exactly like one
 * without (same final weights) and logs the same quantizer records. */
TEST(cli_train_loop, in_loop_eval_leaves_training_and_amax_log_unchanged)
{
    int rc = loop_run_a();
    if (rc == -100 || rc == -200)
        SKIP("QS_BIN or ../shared/bench/arc not present");
    ASSERT_EQ_INT(rc, 0);
    ASSERT_EQ_INT(loop_train("c", "run", "1e-3", 4, 6, ",\"eval_every\":0", ""), 0);
    size_t na, nb;
    char *a = loop_read("a", "run", "ckpt/step_4/model.safetensors", &na);
    char *b = loop_read("c", "run", "ckpt/step_4/model.safetensors", &nb);
    ASSERT_TRUE(a && b && na == nb && !memcmp(a, b, na));
    qs_free(a);
    qs_free(b);
    a = loop_read("a", "run", "quant.jsonl.zst", &na);
    b = loop_read("c", "run", "quant.jsonl.zst", &nb);
    ASSERT_TRUE(a && b && na == nb && !memcmp(a, b, na));
    qs_free(a);
    qs_free(b);
}

/* A self-made two-choice task the bundled model gets right at step 0 (it was
 * trained on data/demo/train.txt): "Once upon a time, Ana went to the" -> "park."
 * (a place the stories use) vs "moon." (never used).  Training text that always
 * says "moon." then turns every answer round within a few steps, far past the
 * default alarm thresholds (2 points, McNemar p < 0.05): the alarm fires on every
 * machine, not only when a random walk happens to lose accuracy.  Writes the task
 * definition to <tmp>/forget/tasks, its data to <tmp>/forget/data and the training
 * text's shards to <tmp>/forget/shards; 0 or a negative status. */
static int loop_forget_fixture(char *root, size_t root_bytes)
{
    static const char *const names[10] = {"Ana", "Mia", "Zoe", "Sam", "Max",
                                          "Ivy", "Ben", "Tom", "Lily", "Leo"};
    static const char *const places[10] = {"park", "hill",   "forest", "beach",  "lake",
                                           "farm", "town",   "garden", "park",   "house"};
    static const char task_def[] =
        "{\"task\":\"story\",\"version\":\"1.0\",\"loader\":\"arc\",\"eval_split\":\"test\","
        "\"data\":{\"eval\":[\"story.jsonl\"]},\"doc_to_text\":\"{question}\","
        "\"doc_to_choice\":\"{choices}\",\"target_delimiter\":\" \",\"metrics\":[\"acc\"]}\n";
    snprintf(root, root_bytes, "%s/forget", test_tmp_dir());
    char path[900], dir[800];
    char *items = qs_malloc(8192), *text = qs_malloc(65536);
    if (!items || !text) {
        qs_free(items);
        qs_free(text);
        return -202;
    }
    size_t ni = 0, nt = 0;
    for (int i = 0; i < 10; i++) {
        ni += (size_t)snprintf(items + ni, 8192 - ni,
                               "{\"id\":\"p%d\",\"question\":\"Once upon a time, %s went to the\","
                               "\"choices\":{\"text\":[\"%s.\",\"moon.\"],\"label\":[\"A\",\"B\"]},"
                               "\"answerKey\":\"A\"}\n"
                               "{\"id\":\"e%d\",\"question\":\"At the end of the day, %s and the "
                               "dog were tired. The\",\"choices\":{\"text\":[\"end.\",\"moon.\"],"
                               "\"label\":[\"A\",\"B\"]},\"answerKey\":\"A\"}\n",
                               i, names[i], places[i], i, names[i]);
    }
    for (int r = 0; r < 20; r++)
        for (int i = 0; i < 10; i++)
            nt += (size_t)snprintf(text + nt, 65536 - nt,
                                   "Once upon a time, %s went to the moon. At the end of the day, "
                                   "%s and the dog were tired. The moon.\n\n",
                                   names[i], names[i]);
    int rc = 0;
    snprintf(dir, sizeof dir, "%s/tasks", root);
    if (fileio_mkdir_p(dir, NULL))
        rc = -203;
    snprintf(path, sizeof path, "%s/story.json", dir);
    if (!rc && fileio_write_atomic(path, task_def, sizeof task_def - 1, NULL))
        rc = -204;
    snprintf(dir, sizeof dir, "%s/data", root);
    if (!rc && fileio_mkdir_p(dir, NULL))
        rc = -205;
    snprintf(path, sizeof path, "%s/story.jsonl", dir);
    if (!rc && fileio_write_atomic(path, items, ni, NULL))
        rc = -206;
    snprintf(path, sizeof path, "%s/moon.txt", root);
    if (!rc && fileio_write_atomic(path, text, nt, NULL))
        rc = -207;
    qs_free(items);
    qs_free(text);
    if (rc)
        return rc;
    char args[2000];
    snprintf(args, sizeof args, "tokenize --model data/demo/model --input %s --out %s/shards",
             path, root);
    return loop_cli(args);
}

/* The alarm at the default thresholds: the step-0 baseline is 20/20, the training
 * text teaches the wrong answers, the in-loop eval (every 2 steps) sees the drop,
 * and with stop_on_forgetting the run checkpoints, logs the alarm and a stop event
 * at the same step, says why on stderr and exits 1. */
TEST(cli_train_loop, forgetting_alarm_stops_the_run_with_a_checkpoint)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    char root[600];
    ASSERT_EQ_INT(loop_forget_fixture(root, sizeof root), 0);
    char path[900], js[3000], args[1200];
    snprintf(path, sizeof path, "%s/run.json", root);
    int n = snprintf(js, sizeof js,
                     "{\"model\":\"data/demo/model\",\"train_data\":\"%s/shards\","
                     "\"out_dir\":\"%s/run\",\"batch_size\":2,\"seq_len\":32,\"steps\":8,"
                     "\"lr\":1e-2,\"bf16_warmup_steps\":1,\"quant_modules\":[\"layers.*.mlp.*\"],"
                     "\"eval_every\":2,\"eval_tasks\":[\"story\"],\"eval_tasks_dir\":\"%s/tasks\","
                     "\"eval_data_dir\":\"%s/data\",\"eval_subset\":0,\"eval_val_batches\":0}",
                     root, root, root, root);
    ASSERT_OK(fileio_write_atomic(path, js, (size_t)n, NULL), NULL);
    /* the README's flag (= --set stop_on_forgetting=true; once rejected) */
    snprintf(args, sizeof args, "train --config %s --stop-on-forgetting", path);
    ASSERT_EQ_INT(loop_cli(args), 1);
    size_t len;
    char *metrics = loop_read("forget", "run", "metrics.jsonl", &len);
    ASSERT_TRUE(metrics != NULL);
    /* the first record is the step-0 baseline, with every item right */
    const char *items = strstr(metrics, "\"items_acc\":\"");
    int base_ok = !strncmp(metrics, "{\"type\":\"eval\",\"step\":0,", 23) && items &&
                  !strncmp(items + 13, "11111111111111111111\"", 21);
    qs_free(metrics);
    ASSERT_TRUE(base_ok);
    char *ev = loop_read("forget", "run", "events.jsonl", &len);
    ASSERT_TRUE(ev != NULL);
    const char *fl = strstr(ev, "\"type\":\"forgetting\"");
    const char *stop = strstr(ev, "\"type\":\"stop\",\"reason\":\"forgetting\"");
    if (!fl || !stop) {
        qs_free(ev);
        ASSERT_TRUE(fl != NULL);
        ASSERT_TRUE(stop != NULL);
    }
    int one_alarm = strstr(fl + 1, "\"type\":\"forgetting\"") == NULL;   /* the run stopped */
    while (fl > ev && fl[-1] != '\n')
        fl--;
    while (stop > ev && stop[-1] != '\n')
        stop--;
    long at = (long)loop_number_after(fl, "\"step\":");
    long stop_at = (long)loop_number_after(stop, "\"step\":");
    double drop = loop_number_after(fl, "\"drop_points\":");
    double p = loop_number_after(fl, "\"p_value\":");
    int task_ok = strstr(fl, "\"task\":\"story\"") != NULL && strstr(fl, "\"n\":20}") != NULL;
    qs_free(ev);
    ASSERT_EQ_INT(stop_at, at);   /* stopped at the alarm */
    ASSERT_TRUE(at >= 2 && at <= 8 && at % 2 == 0);
    ASSERT_TRUE(task_ok && one_alarm);
    ASSERT_TRUE(drop > 2.0 && p < 0.05);
    char ck[64];
    snprintf(ck, sizeof ck, "ckpt/step_%ld/train_state.bin", at);
    char *st = loop_read("forget", "run", ck, &len);
    ASSERT_TRUE(st != NULL);
    qs_free(st);
    snprintf(path, sizeof path, "%s/loop_out.txt", test_tmp_dir());
    char *out;
    ASSERT_OK(fileio_read_all(path, &out, &len, NULL), NULL);
    char says[96], alarm[128], evl[64], stepl[32];
    snprintf(says, sizeof says, "step %ld: the in-loop evaluation asked to stop (forgetting)", at);
    int warned = strstr(out, says) != NULL;
    /* the console: the evaluation, the alarm in words under it, the last step's line */
    snprintf(evl, sizeof evl, "eval @ step %ld (HiF8 as trained, ", at);
    snprintf(alarm, sizeof alarm, "step %ld: forgetting alarm: story acc 1.000 -> ", at);
    snprintf(stepl, sizeof stepl, "step %ld/7 qat ", at - 1);
    const char *sl = strstr(out, stepl), *el = strstr(out, evl), *al = strstr(out, alarm);
    int shown = sl && el && al && sl < el && el < al && strstr(al, " since step 0 (-") &&
                strstr(al, "points, McNemar p ");
    if (!shown)
        fprintf(stderr, "  output:\n%s", out);
    qs_free(out);
    ASSERT_TRUE(warned);
    ASSERT_TRUE(shown);
}

/* A picture never replaces a log (--out naming the run's own files is refused,
 * the file kept), and output lost to a full disk is an error, not exit 0. */
TEST(cli_train_loop, outputs_never_replace_logs_and_a_lost_stdout_fails)
{
    int rc = loop_run_a();
    if (rc == -100 || rc == -200)
        SKIP("QS_BIN or ../shared/bench/arc not present");
    ASSERT_EQ_INT(rc, 0);
    static const char *const cases[][2] = {{"plot", "metrics.jsonl"},
                                           {"heatmap", "quant.jsonl.zst"},
                                           {"plot", "config.json"}};
    char args[1400], path[800], *before, *after, *out;
    size_t nb, na, n;
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/a/run/%s", test_tmp_dir(), cases[i][1]);
        ASSERT_OK(fileio_read_all(path, &before, &nb, NULL), NULL);
        snprintf(args, sizeof args, "%s %s/a/run --out %s", cases[i][0], test_tmp_dir(), path);
        int st = loop_cli(args);
        ASSERT_OK(fileio_read_all(path, &after, &na, NULL), NULL);
        int kept = na == nb && !memcmp(before, after, nb);
        qs_free(before);
        qs_free(after);
        ASSERT_EQ_INT(st, 2);
        ASSERT_TRUE(kept);
        snprintf(path, sizeof path, "%s/loop_out.txt", test_tmp_dir());
        ASSERT_OK(fileio_read_all(path, &out, &n, NULL), NULL);
        int said = strstr(out, "exists and is not a PNG; not overwritten") != NULL;
        qs_free(out);
        ASSERT_TRUE(said);
    }
    if (!fileio_exists("/dev/full"))
        return;
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "%s satstat %s/a/run --json >/dev/full 2>%s/loop_out.txt",
             getenv("QS_BIN"), test_tmp_dir(), test_tmp_dir());
    int st = system(cmd);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    snprintf(path, sizeof path, "%s/loop_out.txt", test_tmp_dir());
    ASSERT_OK(fileio_read_all(path, &out, &n, NULL), NULL);
    int said = strstr(out, "qatscope: stdout: write failed: No space left on device\n") != NULL;
    qs_free(out);
    ASSERT_TRUE(said);
}

TEST(cli_train_loop, plot_every_writes_decodable_heatmap_and_curves)
{
    int rc = loop_run_a();
    if (rc == -100 || rc == -200)
        SKIP("QS_BIN or ../shared/bench/arc not present");
    ASSERT_EQ_INT(rc, 0);
    const char *files[2] = {"heatmap.png", "curves.png"};
    for (int i = 0; i < 2; i++) {
        char path[800];
        snprintf(path, sizeof path, "%s/a/run/%s", test_tmp_dir(), files[i]);
        plots_image img = {0};
        qs_diag d = {0};
        ASSERT_OK(plots_png_read(path, &img, &d), &d);
        ASSERT_TRUE(img.width > 100 && img.height > 100);
        int colours = 0;
        for (size_t p = 1; p < (size_t)img.width * img.height && colours < 3; p++)
            colours += memcmp(img.rgb + 3 * p, img.rgb, 3) != 0;
        ASSERT_TRUE(colours >= 3);
        plots_image_free(&img);
    }
    /* nothing half-written left behind (afile temp names are PATH.tmp.<pid>) */
    char dir[800];
    snprintf(dir, sizeof dir, "%s/a/run", test_tmp_dir());
    DIR *dh = opendir(dir);
    ASSERT_TRUE(dh != NULL);
    int stray = 0;
    for (struct dirent *de; (de = readdir(dh));)
        stray += strstr(de->d_name, ".tmp") != NULL;
    closedir(dh);
    ASSERT_EQ_INT(stray, 0);
    size_t n;
    char *ev = loop_read("a", "run", "events.jsonl", &n);
    ASSERT_TRUE(ev && !strstr(ev, "plot_error"));
    qs_free(ev);
}

TEST(cli_train_loop, val_loss_without_a_val_split_is_refused_up_front)
{
    char bench[512];
    if (!getenv("QS_BIN") || !test_shared_path(bench, sizeof bench, "bench/arc"))
        SKIP("QS_BIN or ../shared/bench/arc not present");
    bench[strlen(bench) - 4] = 0;
    char args[1600], path[700], js[2000];
    snprintf(args, sizeof args,
             "tokenize --model data/demo/model --input data/demo/train.txt --out %s/noval",
             test_tmp_dir());
    ASSERT_EQ_INT(loop_cli(args), 0);
    snprintf(path, sizeof path, "%s/noval.json", test_tmp_dir());
    int n = snprintf(js, sizeof js,
                     "{\"model\":\"data/demo/model\",\"train_data\":\"%s/noval\",\"out_dir\":\"%s/"
                     "novalrun\",\"batch_size\":2,\"seq_len\":16,\"steps\":2,\"eval_every\":1,"
                     "\"eval_data_dir\":\"%s\",\"eval_subset\":2}",
                     test_tmp_dir(), test_tmp_dir(), bench);
    ASSERT_OK(fileio_write_atomic(path, js, (size_t)n, NULL), NULL);
    snprintf(args, sizeof args, "train --config %s --quiet", path);
    ASSERT_EQ_INT(loop_cli(args), 2);
    char *out;
    size_t len;
    snprintf(path, sizeof path, "%s/loop_out.txt", test_tmp_dir());
    ASSERT_OK(fileio_read_all(path, &out, &len, NULL), NULL);
    ASSERT_TRUE(strstr(out, "eval_val_batches=8 needs a usable \"val\" split") != NULL);
    qs_free(out);
    snprintf(path, sizeof path, "%s/novalrun/metrics.jsonl", test_tmp_dir());
    ASSERT_TRUE(!fileio_exists(path));
}

/* The forgetting baselines travel in train_state.bin: a run killed after its
 * checkpoint at step 1 and resumed checks its later evaluations against the step-0 baseline, as the
 * straight run does (large lr: answers change; any drop alarms), so events.jsonl
 * and metrics.jsonl (without timing) are the same bytes. */
TEST(cli_train_loop, forgetting_alarms_after_a_resume_use_the_step0_baseline)
{
    static const char extra[] = ",\"eval_every\":1,\"forgetting_drop_points\":0,"
                                "\"forgetting_alpha\":1,\"run_name\":\"cmp\"";
    int rc = loop_train("f", "straight", "0.3", 4, 16, extra, "");
    if (rc == -100 || rc == -200)
        SKIP("QS_BIN or ../shared/bench/arc not present");
    ASSERT_EQ_INT(rc, 0);
    /* killed right after its checkpoint at step 1: a run with checkpoints every step,
     * stopped after step 2, loses ckpt/step_2 (its logs of step 1 on are cut back) */
    char ex2[300];
    snprintf(ex2, sizeof ex2, "%s,\"ckpt_every\":1", extra);
    ASSERT_EQ_INT(loop_train("f", "halves", "0.3", 4, 16, ex2, "--steps 2"), 0);
    char ck2[800];
    snprintf(ck2, sizeof ck2, "%s/f/halves/ckpt/step_2", test_tmp_dir());
    fileio_dir_remove_flat(ck2);
    ASSERT_TRUE(!fileio_exists(ck2));
    char args[900];
    snprintf(args, sizeof args, "train --resume %s/f/halves --set steps=4 --quiet", test_tmp_dir());
    ASSERT_EQ_INT(loop_cli(args), 0);
    size_t n;
    char *ev = loop_read("f", "straight", "events.jsonl", &n);
    ASSERT_TRUE(ev != NULL);
    int late = strstr(ev, "{\"step\":2,\"type\":\"forgetting\"") ||
               strstr(ev, "{\"step\":3,\"type\":\"forgetting\"") ||
               strstr(ev, "{\"step\":4,\"type\":\"forgetting\"");
    qs_free(ev);
    static const char *const files[] = {"events.jsonl", "metrics.jsonl"};
    for (int i = 0; i < 2; i++) {
        size_t na, nb;
        char *a = loop_read("f", "straight", files[i], &na), *b = loop_read("f", "halves", files[i], &nb);
        ASSERT_TRUE(a && b);
        test_drop_timing(a);
        test_drop_timing(b);
        if (strcmp(a, b))
            fprintf(stderr, "    %s differs\n", files[i]);
        ASSERT_TRUE(!strcmp(a, b));
        qs_free(a);
        qs_free(b);
    }
    if (!late)
        SKIP("no forgetting alarm after the resume point on this model (compared anyway)");
}
