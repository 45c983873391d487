/* test_evalquant_delayed.c: eval --precision hif8 on a QAT run checkpoint uses
 * DELAYED scaling from the checkpoint's stored amax histories (the run's
 * estimator and margin, frozen), checked against an independent reference that
 * reads train_state.bin itself; the scaling choice, the CLI flag and the errors;
 * eval's load time counting that preparation. */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "qs/digest.h"
#include "qs/evalquant.h"
#include "qs/fileio.h"
#include "qs/hif8.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_infer.h"
#include "qs/quant.h"
#include "qs/runcfg.h"
#include "qs/trainer.h"
#include "qs/trainstate.h"
#include "test.h"
#include "test_amax_section.h"
#include "test_token_stream.h"

/* the in-memory stream's pair at index i */
static void dq_pair(long i, int vocab, int32_t *tok, int32_t *tgt)
{
    (void)vocab;
    *tok = (int32_t)((i * 37 + 11) % 500 + 3);
    *tgt = (int32_t)(((i + 1) * 37 + 11) % 500 + 3);
}

/* A 7-step run of the bundled 8-block model (5 warmup + 2 QAT steps, default
 * selection: 9 Linears = 18 quantizers), trained once per test process; returns
 * its run dir (checkpoint: RUN/ckpt/step_7) or NULL. */
static const char *dq_run(void)
{
    static char run[400];
    static int state;   /* 0 not tried, 1 ok, -1 failed */
    if (state)
        return state > 0 ? run : NULL;
    state = -1;
    snprintf(run, sizeof run, "%s/evalq_run", test_tmp_dir());
    static const char *const sets[] = {"batch_size=2", "seq_len=16", "grad_accum=1", "steps=7",
                                       "lr=1e-3", "bf16_warmup_steps=5", "amax_estimator=max-window:4"};
    test_stream stream = {0, 0, dq_pair};
    qs_diag d = {0};
    if (test_stream_train_demo(run, sets, sizeof sets / sizeof *sets, &stream, &d)) {
        fprintf(stderr, "    trainer: %s\n", d.msg);
        return NULL;
    }
    state = 1;
    return run;
}

/* Reference hook: layer 4 up_proj at two fixed scales, in the code domain
 * (HiF8 values of x * s_x and w * s_w, one factor 1 / (s_x s_w) per row). */
static float dq_ref_scale[2], dq_ref_rows[4096];
static const float *dq_ref_row_scale(void *self)
{
    (void)self;
    return dq_ref_rows;
}

static int dq_ref_hook(void *self, int layer, int module, const float *x, float *xq, int N, int IN,
                       const float *w, float *wq, int O)
{
    (void)self;
    if (layer != 4 || module != MODEL_LIN_UP || N > 4096)
        return 0;
    for (size_t i = 0; i < (size_t)N * IN; i++)
        xq[i] = hif8_decode(hif8_encode(x[i] * dq_ref_scale[0], HIF8_SAT));
    for (size_t i = 0; i < (size_t)O * IN; i++)
        wq[i] = hif8_decode(hif8_encode(w[i] * dq_ref_scale[1], HIF8_SAT));
    for (int r = 0; r < N; r++)
        dq_ref_rows[r] = (float)(1.0 / ((double)dq_ref_scale[0] * (double)dq_ref_scale[1]));
    return 2;
}

static void dq_score(llama_model *m, double ll[2])
{
    static const int32_t ctx[5] = {1, 70, 33, 9, 250}, c0[3] = {4, 200, 8}, c1[3] = {5, 5, 61};
    const int32_t *conts[2] = {c0, c1};
    size_t lens[2] = {3, 3};
    lm_request req = {ctx, 5, 2, conts, lens};
    lm_result res = {ll, NULL};
    model_lm *lm = NULL;
    qs_diag d = {0};
    ll[0] = ll[1] = NAN;
    if (model_lm_create(&lm, m, 32, &d))
        return;
    lm_scorer s = model_lm_scorer(lm);
    s.score(s.self, &req, &res, 1, &d);
    model_lm_destroy(lm);
}

TEST(evalquant_delayed, scales_are_the_stored_histories_max_window_frozen)
{
    const char *run = dq_run();
    ASSERT_TRUE(run != NULL);
    char ck[700], state[800];
    snprintf(ck, sizeof ck, "%s/ckpt/step_7", run);
    snprintf(state, sizeof state, "%s/train_state.bin", ck);
    /* reference scales straight from the file: max over the last 4 stored amaxes */
    static const char *const qn[2] = {"layers.4.mlp.up_proj.input", "layers.4.mlp.up_proj.weight"};
    for (int k = 0; k < 2; k++) {
        float h[64], est = 0;
        int n;
        ASSERT_EQ_INT(test_amax_history(state, qn[k], h, 64, &n), 0);
        ASSERT_EQ_INT(n, 7);   /* one amax per step, warmup included */
        for (int i = n - 4; i < n; i++)
            est = h[i] > est ? h[i] : est;
        ASSERT_OK(quant_scale_from_amax(est, 0, &dq_ref_scale[k]), NULL);
    }
    llama_model m;
    qs_diag d = {0};
    ASSERT_OK(model_load_dir(&m, ck, &d), &d);
    evalquant *eq = NULL;
    evalquant_options o = {"layers.4.mlp.up_proj", EVALQUANT_DELAYED, ck};
    ASSERT_OK(evalquant_create_opts(&eq, &m, &o, &d), &d);
    ASSERT_EQ_INT(evalquant_count(eq), 1);
    ASSERT_EQ_INT(evalquant_scaling(eq), EVALQUANT_DELAYED);
    ASSERT_EQ_STR(evalquant_scaling_name(eq), "delayed (train_state step 7)");
    ASSERT_TRUE(strstr(evalquant_recipe_text(eq), "max-window:4") != NULL);
    double dl[2], dl2[2], ref[2], cur[2];
    dq_score(&m, dl);
    dq_score(&m, dl2);   /* frozen: a second pass sees the same scales */
    evalquant_destroy(eq);
    m.hook.fn = dq_ref_hook;
    m.hook.row_scale = dq_ref_row_scale;
    dq_score(&m, ref);
    m.hook.fn = NULL;
    o.scaling = EVALQUANT_CURRENT;
    ASSERT_OK(evalquant_create_opts(&eq, &m, &o, &d), &d);
    ASSERT_EQ_STR(evalquant_scaling_name(eq), "current");
    dq_score(&m, cur);
    evalquant_destroy(eq);
    for (int c = 0; c < 2; c++) {
        ASSERT_TRUE(isfinite(dl[c]));
        ASSERT_TRUE(dl[c] == dl2[c]);
        ASSERT_TRUE(dl[c] == ref[c]);
        ASSERT_TRUE(fabs(dl[c] - cur[c]) > 1e-7);   /* the scalings really differ here */
    }
    model_free(&m);
}

TEST(evalquant_delayed, auto_uses_the_runs_selection_and_falls_back_to_current)
{
    const char *run = dq_run();
    ASSERT_TRUE(run != NULL);
    char ck[700];
    snprintf(ck, sizeof ck, "%s/ckpt/step_7", run);
    llama_model m;
    qs_diag d = {0};
    ASSERT_OK(model_load_dir(&m, ck, &d), &d);
    evalquant *eq = NULL;
    evalquant_options o = {NULL, EVALQUANT_AUTO, ck};
    ASSERT_OK(evalquant_create_opts(&eq, &m, &o, &d), &d);
    ASSERT_EQ_INT(evalquant_scaling(eq), EVALQUANT_DELAYED);
    ASSERT_EQ_INT(evalquant_count(eq), 9);   /* the run's default plan: blocks 3-5 x gate/up/down */
    ASSERT_EQ_STR(evalquant_module(eq, 0), "layers.3.mlp.gate_proj");
    evalquant_destroy(eq);
    o.model_dir = "data/demo/model";   /* no train_state.bin: current, default plan */
    ASSERT_OK(evalquant_create_opts(&eq, &m, &o, &d), &d);
    ASSERT_EQ_INT(evalquant_scaling(eq), EVALQUANT_CURRENT);
    ASSERT_EQ_INT(evalquant_count(eq), 9);
    evalquant_destroy(eq);
    model_free(&m);
}

/* bytes after the amax section of a run's train_state.bin with 18 quantizers: the
 * log-state sections "qsnr" (32 + 4 + 8 x 18) and "alarm" (32 + 4 + 4 x 18) */
#define DQ_AFTER_AMAX 288

static int dq_copy(const char *src, const char *dst, long flip_at)
{
    char *buf;
    size_t n;
    qs_diag d = {0};
    if (fileio_read_all(src, &buf, &n, &d))
        return -1;
    if (flip_at >= 0 && (size_t)flip_at < n)
        buf[n - 1 - flip_at] ^= 0x40;
    int rc = fileio_write_atomic(dst, buf, n, &d);
    qs_free(buf);
    return rc;
}

TEST(evalquant_delayed, errors_name_the_file_and_what_is_wrong)
{
    const char *run = dq_run();
    ASSERT_TRUE(run != NULL);
    char ck[700], state[800], dir[700], path[800];
    snprintf(ck, sizeof ck, "%s/ckpt/step_7", run);
    snprintf(state, sizeof state, "%s/train_state.bin", ck);
    llama_model m;
    qs_diag d = {0};
    ASSERT_OK(model_load_dir(&m, ck, &d), &d);
    evalquant *eq = NULL;
    /* delayed without a state */
    evalquant_options o = {"*.mlp.*", EVALQUANT_DELAYED, "data/demo/model"};
    ASSERT_EQ_INT(evalquant_create_opts(&eq, &m, &o, &d), QS_ENOTFOUND);
    ASSERT_EQ_STR(d.path, "data/demo/model/train_state.bin");
    ASSERT_TRUE(strstr(d.msg, "no training state") != NULL);
    /* a module the run did not quantize */
    o.model_dir = ck;
    o.patterns = "layers.0.mlp.up_proj";
    ASSERT_EQ_INT(evalquant_create_opts(&eq, &m, &o, &d), QS_ENOTFOUND);
    ASSERT_TRUE(strstr(d.msg, "no amax history for 'layers.0.mlp.up_proj.input'") != NULL);
    ASSERT_TRUE(eq == NULL && m.hook.fn == NULL);
    /* a state outside its run directory: no config snapshot two levels up */
    snprintf(dir, sizeof dir, "%s/evalq_loose/a", test_tmp_dir());
    ASSERT_OK(fileio_mkdir_p(dir, &d), &d);
    snprintf(path, sizeof path, "%s/train_state.bin", dir);
    ASSERT_EQ_INT(dq_copy(state, path, -1), 0);
    o.model_dir = dir;
    o.patterns = NULL;
    o.scaling = EVALQUANT_AUTO;
    ASSERT_EQ_INT(evalquant_create_opts(&eq, &m, &o, &d), QS_ENOTFOUND);
    ASSERT_TRUE(strstr(d.path, "/../../config.json") != NULL);
    ASSERT_TRUE(strstr(d.msg, "run config snapshot not found") != NULL);
    /* a corrupt state (a flipped bit in the last history) is an error, even in auto */
    snprintf(dir, sizeof dir, "%s/evalq_bad/ckpt/step_7", test_tmp_dir());
    ASSERT_OK(fileio_mkdir_p(dir, &d), &d);
    snprintf(path, sizeof path, "%s/train_state.bin", dir);
    ASSERT_EQ_INT(dq_copy(state, path, DQ_AFTER_AMAX + 2), 0);
    char snap_src[800], snap_dst[800];
    snprintf(snap_src, sizeof snap_src, "%s/config.json", run);
    snprintf(snap_dst, sizeof snap_dst, "%s/evalq_bad/config.json", test_tmp_dir());
    ASSERT_EQ_INT(dq_copy(snap_src, snap_dst, -1), 0);
    o.model_dir = dir;
    ASSERT_EQ_INT(evalquant_create_opts(&eq, &m, &o, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "checksum mismatch") != NULL);
    /* the snapshot's quant_modules no longer match the stored histories */
    ASSERT_EQ_INT(dq_copy(state, path, -1), 0);
    runcfg c;
    ASSERT_OK(runcfg_load(&c, snap_src, &d), &d);
    ASSERT_OK(runcfg_set(&c, "quant_modules=*.mlp.*", &d), &d);
    char *js = runcfg_to_json(&c);
    ASSERT_TRUE(js != NULL);
    ASSERT_OK(fileio_write_atomic(snap_dst, js, strlen(js), &d), &d);
    qs_free(js);
    ASSERT_EQ_INT(evalquant_create_opts(&eq, &m, &o, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "holds 18 amax histories, the run config's quant_modules select 48") !=
                NULL);
    /* well-formed file, bad amax section: a NaN amax, then an entry cut short */
    unsigned char sec[64];
    static const char nm[] = "layers.3.mlp.up_proj.input";
    uint32_t nl = sizeof nm - 1, nv = 2;
    float h[2] = {1.5f, NAN};
    memcpy(sec, &nl, 4);
    memcpy(sec + 4, nm, nl);
    memcpy(sec + 4 + nl, &nv, 4);
    memcpy(sec + 8 + nl, h, sizeof h);
    static const size_t lens[2] = {8 + sizeof nm - 1 + 8, 8 + sizeof nm - 1 + 6};
    static const char *const want[2] = {"'layers.3.mlp.up_proj.input': entry 1 is nan",
                                        "amax history of 'layers.3.mlp.up_proj.input' truncated"};
    for (int k = 0; k < 2; k++) {
        trainstate_writer w;
        ASSERT_OK(trainstate_write_begin(&w, path, 2, &d), &d);
        ASSERT_OK(trainstate_write_section(&w, "meta", "{\"step\":1}", 10, &d), &d);
        ASSERT_OK(trainstate_write_section(&w, "amax", sec, lens[k], &d), &d);
        ASSERT_OK(trainstate_write_commit(&w, &d), &d);
        ASSERT_EQ_INT(evalquant_create_opts(&eq, &m, &o, &d), QS_EFORMAT);
        if (!strstr(d.msg, want[k]))
            fprintf(stderr, "    got: %s\n", d.msg);
        ASSERT_TRUE(strstr(d.msg, want[k]) != NULL);
    }
    model_free(&m);
}

TEST(evalquant_delayed, cli_quant_scaling_flag_and_results_json)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const char *run = dq_run();
    ASSERT_TRUE(run != NULL);
    char args[2048], out[8192], err[2048], res[700], *text;
    size_t n;
    qs_diag d = {0};
    snprintf(res, sizeof res, "%s/evalq_results.json", test_tmp_dir());
    char state[800], state_hex[65];
    snprintf(state, sizeof state, "%s/ckpt/step_7/train_state.bin", run);
    ASSERT_OK(digest_sha256_file(state, state_hex, &d), &d);
    static const char *const modes[3] = {"", "--quant-scaling delayed", "--quant-scaling current"};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "eval --model %s/ckpt/step_7 --tasks arc_easy --data-dir "
                 "tests/data/tasks/data --precision hif8 --output %s %s", run, res, modes[i]);
        ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
        ASSERT_OK(fileio_read_all(res, &text, &n, &d), &d);
        const char *want = i < 2 ? "delayed (train_state step 7)" : "current";
        ASSERT_TRUE(strstr(text, want) != NULL);
        ASSERT_TRUE(strstr(out, want) != NULL);   /* the summary says it too */
        ASSERT_TRUE((strstr(text, "delayed") != NULL) == (i < 2));
        ASSERT_TRUE(strstr(text, "layers.5.mlp.down_proj") != NULL);
        ASSERT_TRUE((strstr(text, state_hex) != NULL) == (i < 2));   /* quant_state_sha256 */
        qs_free(text);
    }
    /* errors: one line, exit 2 */
    static const char *const bad[3][2] = {
        {"--model data/demo/model --precision hif8 "
         "--quant-scaling delayed", "data/demo/model/train_state.bin"},
        {"--model data/fixtures/llama_gqa_f32 --precision hif8 --quant-scaling sometimes",
         "expected current, delayed or auto"},
        {"--model data/fixtures/llama_gqa_f32 --precision bf16 --quant-scaling current",
         "only with --precision hif8"},
    };
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "eval %s --tasks arc_easy --data-dir tests/data/tasks/data "
                 "--output %s/evalq_bad.json", bad[i][0], test_tmp_dir());
        ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 2);
        if (!strstr(err, bad[i][1]))
            fprintf(stderr, "    got: %s", err);
        ASSERT_TRUE(strstr(err, bad[i][1]) != NULL);
        ASSERT_TRUE(strchr(err, '\n') == err + strlen(err) - 1);
    }
}

/* eval's last line, "N items in T s (load L s, scoring S s, hash wait W s)": the
 * HiF8 preparation after the read (delayed scales from the run's state and config
 * snapshot, the planned weights fake-quantized and packed) is counted in load; it
 * was in none of the fields, seconds at 1B.  To make that visible on a tiny model
 * without a timing threshold, the run's config snapshot (RUN/config.json, read
 * only by that preparation) is a FIFO that a child fills DQ_HOLD_S seconds after
 * eval starts: the preparation cannot end before, so load holds most of the hold
 * (it can lose only what eval takes to start its clock) however loaded the
 * machine is. */
#define DQ_HOLD_S 2
TEST(evalquant_delayed, cli_load_time_counts_the_hif8_preparation)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const char *run = dq_run();
    ASSERT_TRUE(run != NULL);
    char src[800], dir[700], path[1000], fifo[700], res[700], args[2400];
    static char out[8192], err[2048];
    qs_diag d = {0};
    /* evalq_hold/ckpt/step_7: links to the checkpoint's files; evalq_hold/config.json
     * (its run config snapshot) the FIFO */
    snprintf(dir, sizeof dir, "%s/evalq_hold/ckpt/step_7", test_tmp_dir());
    ASSERT_OK(fileio_mkdir_p(dir, &d), &d);
    snprintf(src, sizeof src, "%s/ckpt/step_7", run);
    DIR *dp = opendir(src);
    ASSERT_TRUE(dp != NULL);
    int n_links = 0;
    for (struct dirent *e; (e = readdir(dp));) {
        if (e->d_name[0] == '.')
            continue;
        char target[1100];
        snprintf(target, sizeof target, "%s/%s", src, e->d_name);
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        n_links += symlink(target, path) == 0;
    }
    closedir(dp);
    ASSERT_TRUE(n_links >= 3);
    char *snap;
    size_t snap_n;
    snprintf(path, sizeof path, "%s/config.json", run);
    ASSERT_OK(fileio_read_all(path, &snap, &snap_n, &d), &d);
    snprintf(fifo, sizeof fifo, "%s/evalq_hold/config.json", test_tmp_dir());
    ASSERT_EQ_INT(mkfifo(fifo, 0644), 0);
    fflush(NULL);
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {   /* async-signal-safe calls only: the parent may have threads */
        struct timespec hold = {DQ_HOLD_S, 0};
        while (nanosleep(&hold, &hold) != 0) {
        }
        int fd = open(fifo, O_WRONLY);   /* waits for eval to open it for reading */
        for (size_t done = 0; fd >= 0 && done < snap_n;) {
            ssize_t w = write(fd, snap + done, snap_n - done);
            if (w <= 0)
                break;
            done += (size_t)w;
        }
        _exit(fd >= 0 ? 0 : 1);
    }
    qs_free(snap);
    snprintf(res, sizeof res, "%s/evalq_hold.json", test_tmp_dir());
    snprintf(args, sizeof args, "eval --model %s --tasks arc_easy --data-dir tests/data/tasks/data "
             "--precision hif8 --output %s", dir, res);
    int rc = test_run_cli(args, out, sizeof out, err, sizeof err);
    kill(pid, SIGKILL);   /* still waiting on the FIFO only when eval failed before it */
    waitpid(pid, NULL, 0);
    if (rc)
        fprintf(stderr, "    eval: %s", err);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_TRUE(strstr(out, "delayed (train_state step 7)") != NULL);   /* the FIFO was read */
    const char *line = strstr(out, " items in ");
    double total = -1, load = -1, scoring = -1, wait = -1;
    ASSERT_TRUE(line != NULL);
    ASSERT_EQ_INT(sscanf(line, " items in %lf s (load %lf s, scoring %lf s, hash wait %lf s)",
                         &total, &load, &scoring, &wait), 4);
    if (load < DQ_HOLD_S - 1)
        fprintf(stderr, "    got: %s", line);
    ASSERT_TRUE(load >= DQ_HOLD_S - 1);
    ASSERT_TRUE(total >= load);
}

TEST(evalquant_delayed, inspect_describes_the_train_state_and_refuses_a_corrupt_one)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const char *run = dq_run();
    ASSERT_TRUE(run != NULL);
    char args[1024], out[8192], err[2048], dir[600], src[800], dst[800];
    snprintf(args, sizeof args, "inspect %s/ckpt/step_7", run);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
    ASSERT_TRUE(strstr(out, "train state:  step 7, 18 amax histories (eval --precision hif8 "
                            "defaults to delayed scaling)") != NULL);
    /* the same checkpoint with one flipped bit in train_state.bin */
    qs_diag d = {0};
    snprintf(dir, sizeof dir, "%s/evalq_inspect", test_tmp_dir());
    ASSERT_OK(fileio_mkdir_p(dir, &d), &d);
    static const char *const files[3] = {"config.json", "model.safetensors", "train_state.bin"};
    for (int i = 0; i < 3; i++) {
        snprintf(src, sizeof src, "%s/ckpt/step_7/%s", run, files[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        ASSERT_EQ_INT(dq_copy(src, dst, i == 2 ? DQ_AFTER_AMAX + 5 : -1), 0);
    }
    snprintf(args, sizeof args, "inspect %s", dir);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 2);
    ASSERT_EQ_STR(out, "");
    ASSERT_TRUE(strstr(err, "train_state.bin: section 'amax': checksum mismatch") != NULL);
    ASSERT_TRUE(strchr(err, '\n') == err + strlen(err) - 1);
}

/* eval reads two sections of train_state.bin (meta, amax) and checks their
 * checksums alone: a checkpoint whose optimizer moments are damaged still
 * evaluates, to the same results; damaged amax histories are refused. */
TEST(evalquant_delayed, eval_checks_the_sections_it_reads)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const char *run = dq_run();
    ASSERT_TRUE(run != NULL);
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json",
                                        "tokenizer.model", "tokenizer_config.json",
                                        "train_state.bin"};
    char ck[600], src[900], dst[900], args[2048], out[8192], err[2048], res[3][700];
    qs_diag d = {0};
    /* a run of its own: RUN/config.json (the snapshot) and RUN/ckpt/step_7 */
    snprintf(ck, sizeof ck, "%s/evalq_damaged/ckpt/step_7", test_tmp_dir());
    ASSERT_OK(fileio_mkdir_p(ck, &d), &d);
    snprintf(src, sizeof src, "%s/config.json", run);
    snprintf(dst, sizeof dst, "%s/evalq_damaged/config.json", test_tmp_dir());
    ASSERT_OK(fileio_copy(src, dst, &d), &d);
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(src, sizeof src, "%s/ckpt/step_7/%s", run, files[i]);
        snprintf(dst, sizeof dst, "%s/%s", ck, files[i]);
        if (fileio_exists(src))
            ASSERT_OK(fileio_copy(src, dst, &d), &d);
    }
    /* the offsets of two payloads in the file */
    trainstate_reader r;
    const void *p;
    size_t n;
    snprintf(dst, sizeof dst, "%s/train_state.bin", ck);
    ASSERT_OK(trainstate_open(&r, dst, &d), &d);
    ASSERT_OK(trainstate_section(&r, "adam_m", &p, &n, &d), &d);
    long off_m = (long)((const unsigned char *)p - (const unsigned char *)r.map.data);
    ASSERT_OK(trainstate_section(&r, "amax", &p, &n, &d), &d);
    long off_a = (long)((const unsigned char *)p - (const unsigned char *)r.map.data);
    trainstate_close(&r);
    char *bytes;
    size_t len;
    ASSERT_OK(fileio_read_all(dst, &bytes, &len, &d), &d);
    for (int k = 0; k < 3; k++) {
        if (k > 0) {
            bytes[k == 1 ? off_m + 3 : off_a + 3] ^= 0x40;
            ASSERT_OK(fileio_write_atomic(dst, bytes, len, &d), &d);
            bytes[k == 1 ? off_m + 3 : off_a + 3] ^= 0x40;
        }
        snprintf(res[k], sizeof res[0], "%s/evalq_dmg_%d.json", test_tmp_dir(), k);
        snprintf(args, sizeof args, "eval --model %.600s --tasks arc_easy --data-dir "
                 "tests/data/tasks/data --precision hif8 --quant-scaling delayed --output %.700s",
                 ck, res[k]);
        int rc = test_run_cli(args, out, sizeof out, err, sizeof err);
        if (k < 2) {
            ASSERT_EQ_INT(rc, 0);
        } else {
            ASSERT_EQ_INT(rc, 2);
            ASSERT_TRUE(strstr(err, "train_state.bin") && strstr(err, "'amax': checksum"));
        }
    }
    qs_free(bytes);
    /* the damaged moments changed nothing the eval reads */
    char *a, *b;
    ASSERT_OK(fileio_read_all(res[0], &a, &len, &d), &d);
    ASSERT_OK(fileio_read_all(res[1], &b, &n, &d), &d);
    const char *ra = strstr(a, "\"results\""), *rb = strstr(b, "\"results\"");
    const char *ea = strstr(a, "\"quant_state_sha256\""), *eb = strstr(b, "\"quant_state_sha256\"");
    ASSERT_TRUE(ra && rb && ea && eb);
    ASSERT_TRUE(!strncmp(ra, rb, 200));
    ASSERT_TRUE(strncmp(ea, eb, 90) != 0);   /* the file's hash does tell them apart */
    qs_free(a);
    qs_free(b);
}
