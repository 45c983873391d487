/* test_cli_dist.c: `mpirun -np N qatscope train|eval` against one process, on
 * the bundled demo model (each case runs in about a second).
 *
 * Needs QS_MPI_BIN (a `make MPI=1` binary; `make test-mpi` builds one in
 * build/mpi/bin and sets it; .ci/run does) and mpirun; skipped otherwise.
 * Every mpirun is bounded by `timeout`, so a hang fails the test instead of
 * the suite.  Ranks run one OpenMP thread each (the kernels give the same bits
 * for any thread count; this keeps 2-3 ranks cheap on a 2-core machine).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "test.h"
#include "test_run_logs.h"

#define DIST_MPIRUN "OMP_NUM_THREADS=1 timeout 120 mpirun -q --allow-run-as-root --oversubscribe"

static char dist_err[8192];

/* The MPI binary (absolute path), or NULL with the skip reason in why. */
static const char *dist_bin(char *why, size_t n)
{
    static char bin[1024];
    const char *b = getenv("QS_MPI_BIN");
    if (!b || !*b) {
        snprintf(why, n, "QS_MPI_BIN not set (make test-mpi builds build/mpi/bin/qatscope)");
        return NULL;
    }
    if (system("command -v mpirun > /dev/null 2>&1") != 0) {
        snprintf(why, n, "mpirun not found (apt-get install openmpi-bin)");
        return NULL;
    }
    if (!realpath(b, bin)) {
        snprintf(why, n, "QS_MPI_BIN=%s does not exist", b);
        return NULL;
    }
    /* Open MPI's session files under our tmp dir: another mpirun on the machine
     * (a shared one) cannot race ours over /tmp/ompi.* */
    setenv("OMPI_MCA_orte_tmpdir_base", test_tmp_dir(), 1);
    return bin;
}

#define DIST_NEED_BIN(bin)                                                            \
    char why_[256];                                                                   \
    const char *bin = dist_bin(why_, sizeof why_);                                    \
    if (!bin)                                                                         \
        SKIP("%s", why_)

/* sh -c CMD (from the repository root) with stderr into dist_err; exit status */
static int dist_sh(const char *cmd)
{
    char full[8192], errpath[600];
    snprintf(errpath, sizeof errpath, "%s/dist_stderr.txt", test_tmp_dir());
    snprintf(full, sizeof full, "%s > /dev/null 2> %s", cmd, errpath);
    int st = system(full);
    dist_err[0] = 0;
    FILE *f = fopen(errpath, "r");
    if (f) {
        size_t k = fread(dist_err, 1, sizeof dist_err - 1, f);
        dist_err[k] = 0;
        fclose(f);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* exit status of a dist_sh / dist_train call, its stderr shown when it differs */
#define ASSERT_SH(expr, want)                                                         \
    do {                                                                              \
        int st_ = (expr);                                                             \
        if (st_ != (want))                                                            \
            fprintf(stderr, "    stderr: %s\n", dist_err);                            \
        ASSERT_EQ_INT(st_, want);                                                     \
    } while (0)

/* Token shards of data/demo/train.txt, made once. */
static const char *dist_shards(const char *bin)
{
    static char dir[600];
    if (!dir[0]) {
        char cmd[2000];
        snprintf(dir, sizeof dir, "%s/dist_shards", test_tmp_dir());
        snprintf(cmd, sizeof cmd, "%s tokenize --model data/demo/model --input data/demo/train.txt "
                 "--out %s", bin, dir);
        if (dist_sh(cmd) != 0)
            dir[0] = 0;
    }
    return dir[0] ? dir : NULL;
}

/* A run config NAME.json in the tmp dir: 6 steps, 3 of bf16 warmup then QAT;
 * extra is appended to the JSON object.  Returns its path. */
static const char *dist_config(const char *bin, const char *name, const char *extra)
{
    static char path[700];
    char cwd[512], js[3000];
    const char *shards = dist_shards(bin);
    if (!shards || !getcwd(cwd, sizeof cwd))
        return NULL;
    /* defaults for the keys extra does not set (JSON keys must be unique) */
    char dflt[200] = "";
    static const char *const keys[3][2] = {
        {"\"steps\"", ",\"steps\":6"}, {"\"lr\"", ",\"lr\":1e-3"},
        {"\"bf16_warmup_steps\"", ",\"bf16_warmup_steps\":3"}};
    for (int k = 0; k < 3; k++)
        if (!strstr(extra, keys[k][0]))
            strcat(dflt, keys[k][1]);
    int n = snprintf(js, sizeof js,
                     "{\"model\":\"%s/data/demo/model\",\"train_data\":\"%s\",\"out_dir\":\"%s/%s\","
                     "\"run_name\":\"r\",\"batch_size\":2,\"seq_len\":16%s%s}",
                     cwd, shards, test_tmp_dir(), name, dflt, extra);
    snprintf(path, sizeof path, "%s/%s.json", test_tmp_dir(), name);
    return fileio_write_atomic(path, js, (size_t)n, NULL) ? NULL : path;
}

static int dist_train(const char *bin, int ranks, const char *name, const char *extra,
                      const char *args)
{
    const char *cfg = dist_config(bin, name, extra);
    if (!cfg)
        return -1;
    char cmd[3000];
    if (ranks)
        snprintf(cmd, sizeof cmd, DIST_MPIRUN " -np %d %s train --config %s --quiet %s", ranks, bin,
                 cfg, args);
    else
        snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 %s train --config %s --quiet %s", bin, cfg, args);
    return dist_sh(cmd);
}

static char *dist_read(const char *dir, const char *file, size_t *n)
{
    char path[1200];
    char *buf = NULL;
    snprintf(path, sizeof path, "%s/%s/%s", test_tmp_dir(), dir, file);
    if (fileio_read_all(path, &buf, n, NULL))
        return NULL;
    return buf;
}

/* RUN_A/file and RUN_B/file hold the same bytes (.zst files compared decompressed). */
static int dist_same(const char *a, const char *b, const char *file)
{
    size_t na, nb;
    char *x = dist_read(a, file, &na), *y = dist_read(b, file, &nb);
    int eq = x && y && na == nb && !memcmp(x, y, na);
    if (!eq)
        fprintf(stderr, "    %s/%s and %s/%s differ\n", a, file, b, file);
    qs_free(x);
    qs_free(y);
    return eq;
}

static int dist_same_metrics(const char *a, const char *b)
{
    size_t na, nb;
    char *x = dist_read(a, "metrics.jsonl", &na), *y = dist_read(b, "metrics.jsonl", &nb);
    int eq = 0;
    if (x && y) {
        test_drop_timing(x);
        test_drop_timing(y);
        eq = !strcmp(x, y) && strstr(x, "\"loss\"") != NULL;
    }
    qs_free(x);
    qs_free(y);
    return eq;
}

static int dist_same_run(const char *a, const char *b, const char *ckpt)
{
    char w[64], s[64];
    snprintf(w, sizeof w, "ckpt/%s/model.safetensors", ckpt);
    snprintf(s, sizeof s, "ckpt/%s/train_state.bin", ckpt);
    return dist_same(a, b, w) && dist_same(a, b, s) && dist_same(a, b, "quant.jsonl.zst") &&
           dist_same(a, b, "events.jsonl") && dist_same_metrics(a, b);
}

TEST(cli_dist, two_ranks_equal_one_process_with_grad_accum_2)
{
    DIST_NEED_BIN(bin);
    ASSERT_SH(dist_train(bin, 0, "one_ga2", ",\"grad_accum\":2", ""), 0);
    ASSERT_SH(dist_train(bin, 2, "two_ga1", "", ""), 0);
    ASSERT_TRUE(dist_same_run("one_ga2", "two_ga1", "step_6"));
    /* three ranks: the rank-ordered sum is micro-batch order too */
    ASSERT_SH(dist_train(bin, 0, "one_ga3", ",\"grad_accum\":3", ""), 0);
    ASSERT_SH(dist_train(bin, 3, "three_ga1", "", ""), 0);
    ASSERT_TRUE(dist_same_run("one_ga3", "three_ga1", "step_6"));
}

TEST(cli_dist, zero1_gives_the_bits_of_the_plain_path)
{
    DIST_NEED_BIN(bin);
    ASSERT_SH(dist_train(bin, 2, "plain2", ",\"ckpt_every\":3", ""), 0);
    ASSERT_SH(dist_train(bin, 2, "zero2", ",\"ckpt_every\":3,\"zero\":1", ""), 0);
    ASSERT_TRUE(dist_same_run("plain2", "zero2", "step_3"));
    ASSERT_TRUE(dist_same_run("plain2", "zero2", "step_6"));
}

/* With lr 0 the weights never move and with QAT from step 0 and the `current`
 * estimator every micro-batch is quantized at its own scale, so the 2-rank step
 * s sees exactly the micro-batches 2s and 2s+1 that a one-process grad_accum-1
 * run takes as steps 2s and 2s+1: its amax must be their MAX, its element
 * count their sum. */
TEST(cli_dist, amax_is_the_max_over_ranks_and_counts_add_up)
{
    DIST_NEED_BIN(bin);
    const char *x = ",\"lr\":0,\"steps\":4,\"bf16_warmup_steps\":0,\"amax_estimator\":\"current\"";
    ASSERT_SH(dist_train(bin, 0, "amax_one", x, "--steps 8"), 0);
    ASSERT_SH(dist_train(bin, 2, "amax_two", x, ""), 0);
    size_t n1, n2;
    char *a = dist_read("amax_one", "quant.jsonl.zst", &n1), *b = dist_read("amax_two", "quant.jsonl.zst", &n2);
    ASSERT_TRUE(a && b);
    json_t *one[8] = {0}, *two[4] = {0};
    int k1 = 0, k2 = 0;
    for (char *save, *l = strtok_r(a, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        json_t *j = json_loads(l, 0, NULL);
        if (j && json_object_get(j, "q") && k1 < 8)
            one[k1++] = j;
        else
            json_decref(j);
    }
    for (char *save, *l = strtok_r(b, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        json_t *j = json_loads(l, 0, NULL);
        if (j && json_object_get(j, "q") && k2 < 4)
            two[k2++] = j;
        else
            json_decref(j);
    }
    qs_free(a);
    qs_free(b);
    ASSERT_EQ_INT(k1, 8);
    ASSERT_EQ_INT(k2, 4);
    int differ = 0, checked = 0, ok = 1;
    for (int s = 0; s < 4; s++) {
        json_t *q0 = json_object_get(one[2 * s], "q"), *q1 = json_object_get(one[2 * s + 1], "q");
        json_t *q = json_object_get(two[s], "q");
        for (size_t i = 0; i < json_array_size(q); i++) {
            json_t *e = json_array_get(q, i), *e0 = json_array_get(q0, i), *e1 = json_array_get(q1, i);
            double a0 = json_number_value(json_object_get(e0, "amax"));
            double a1 = json_number_value(json_object_get(e1, "amax"));
            double am = json_number_value(json_object_get(e, "amax"));
            long long n = json_integer_value(json_object_get(e, "n"));
            long long m0 = json_integer_value(json_object_get(e0, "n"));
            long long m1 = json_integer_value(json_object_get(e1, "n"));
            differ += a0 != a1;
            checked++;
            if (am != (a0 > a1 ? a0 : a1) || n != m0 + m1) {
                fprintf(stderr, "    step %d quantizer %zu: amax %g from %g / %g, n %lld from %lld + %lld\n",
                        s, i, am, a0, a1, n, m0, m1);
                ok = 0;
            }
        }
    }
    for (int i = 0; i < 8; i++)
        json_decref(one[i]);
    for (int i = 0; i < 4; i++)
        json_decref(two[i]);
    ASSERT_TRUE(ok);
    ASSERT_TRUE(checked > 0);
    ASSERT_TRUE(differ > 0);   /* the ranks did see different amaxes */
}

TEST(cli_dist, resume_with_another_rank_count_continues_bit_exactly)
{
    DIST_NEED_BIN(bin);
    ASSERT_SH(dist_train(bin, 0, "straight_ga2", ",\"grad_accum\":2", ""), 0);
    ASSERT_SH(dist_train(bin, 2, "halves2", ",\"zero\":1", "--steps 4"), 0);
    char cmd[2000];
    /* 1 process: the step must stay 2 micro-batches */
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 %s train --resume %s/halves2 --set steps=6 --quiet",
             bin, test_tmp_dir());
    ASSERT_SH(dist_sh(cmd), 2);
    ASSERT_TRUE(strstr(dist_err, "ranks x grad_accum must stay 2") != NULL);
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 %s train --resume %s/halves2 --set steps=6 "
             "--set grad_accum=2 --quiet", bin, test_tmp_dir());
    ASSERT_SH(dist_sh(cmd), 0);
    ASSERT_TRUE(dist_same("straight_ga2", "halves2", "ckpt/step_6/model.safetensors"));
    ASSERT_TRUE(dist_same("straight_ga2", "halves2", "ckpt/step_6/train_state.bin"));
    /* 3 micro-batches a step cannot be made by 2 ranks: say which launches can
     * (it suggested --set grad_accum=0, which is refused) */
    ASSERT_SH(dist_train(bin, 0, "thirds", ",\"grad_accum\":3", "--steps 4"), 0);
    snprintf(cmd, sizeof cmd, DIST_MPIRUN " -np 2 %s train --resume %s/thirds --set steps=6 --quiet",
             bin, test_tmp_dir());
    ASSERT_SH(dist_sh(cmd), 2);
    ASSERT_TRUE(strstr(dist_err, "must stay 3 (launch a number of ranks that divides 3)") != NULL);
    ASSERT_TRUE(strstr(dist_err, "grad_accum=0") == NULL);
}

/* A wrapper script (tmp/NAME) that runs its command, and on rank 1 sends it
 * `kill SIG` once the file $KILL_AT exists; NULL when it cannot be written. */
static const char *dist_rank1_signaller(const char *name, const char *sig)
{
    static char path[700];
    char sh[400], cmd[800];
    snprintf(path, sizeof path, "%s/%s", test_tmp_dir(), name);
    int n = snprintf(sh, sizeof sh, "#!/bin/sh\n"
                     "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then\n"
                     "  ( while [ ! -e \"$KILL_AT\" ]; do sleep 0.02; done; kill %s $$ ) &\n"
                     "fi\nexec \"$@\"\n", sig);
    snprintf(cmd, sizeof cmd, "chmod +x %s", path);
    if (fileio_write_atomic(path, sh, (size_t)n, NULL) || system(cmd) != 0)
        return NULL;
    return path;
}

/* Rank 1 SIGKILLs itself once ckpt/step_4 exists: the job ends (no hang) with
 * a non-zero status, the checkpoint is whole, and --resume on 2 ranks ends
 * where the uninterrupted run ends. */
TEST(cli_dist, dying_rank_ends_the_job_and_the_checkpoint_resumes)
{
    DIST_NEED_BIN(bin);
    char cmd[3000];
    const char *killer = dist_rank1_signaller("kill_rank1.sh", "-9");
    ASSERT_TRUE(killer != NULL);
    const char *cfg = dist_config(bin, "killed", ",\"steps\":400,\"ckpt_every\":4");
    ASSERT_TRUE(cfg != NULL);
    snprintf(cmd, sizeof cmd, "KILL_AT=%s/killed/ckpt/step_4 " DIST_MPIRUN " -x KILL_AT -np 2 %s %s "
             "train --config %s --quiet", test_tmp_dir(), killer, bin, cfg);
    int st = dist_sh(cmd);
    ASSERT_TRUE(st != 0 && st != 124);   /* 124: timeout, i.e. a hang */
    char path[1200];
    snprintf(path, sizeof path, "%s/killed/ckpt/step_4/train_state.bin", test_tmp_dir());
    ASSERT_TRUE(fileio_exists(path));
    snprintf(cmd, sizeof cmd, DIST_MPIRUN " -np 2 %s train --resume %s/killed --set steps=40 "
             "--set ckpt_every=0 --quiet", bin, test_tmp_dir());
    ASSERT_SH(dist_sh(cmd), 0);
    ASSERT_SH(dist_train(bin, 2, "unkilled", ",\"steps\":400", "--steps 40"), 0);
    ASSERT_TRUE(dist_same("killed", "unkilled", "ckpt/step_40/model.safetensors"));
    ASSERT_TRUE(dist_same("killed", "unkilled", "ckpt/step_40/train_state.bin"));
}

/* SIGTERM on rank 1 alone stops every rank before the same step with a
 * checkpoint; the job exits 143 and rank 0 names SIGTERM (every rank exited 2,
 * and rank 0 said SIGINT, when it had not taken the signal itself). */
TEST(cli_dist, a_signal_on_one_rank_is_every_ranks_exit_status)
{
    DIST_NEED_BIN(bin);
    char cmd[3000];
    const char *killer = dist_rank1_signaller("term_rank1.sh", "-TERM");
    ASSERT_TRUE(killer != NULL);
    const char *cfg = dist_config(bin, "termed", ",\"steps\":4000,\"ckpt_every\":4");
    ASSERT_TRUE(cfg != NULL);
    snprintf(cmd, sizeof cmd, "KILL_AT=%s/termed/ckpt/step_4 " DIST_MPIRUN " -x KILL_AT -np 2 %s %s "
             "train --config %s --quiet", test_tmp_dir(), killer, bin, cfg);
    ASSERT_SH(dist_sh(cmd), 143);
    ASSERT_TRUE(strstr(dist_err, "qatscope: train: SIGTERM: stopped after ") != NULL);
    ASSERT_TRUE(strstr(dist_err, "SIGINT") == NULL);
}

/* Two "nodes": each rank runs in its own directory, where the same relative
 * paths may hold different files. */
static int dist_two_dirs(const char *bin_a, const char *bin_b, const char *args)
{
    char cmd[4000];
    snprintf(cmd, sizeof cmd, DIST_MPIRUN " -np 1 --wdir %s/nodeA %s %s : -np 1 --wdir %s/nodeB %s %s",
             test_tmp_dir(), bin_a, args, test_tmp_dir(), bin_b, args);
    return dist_sh(cmd);
}

static int dist_node_config(const char *node, const char *out)
{
    char path[900], js[2000], cwd[512];
    if (!getcwd(cwd, sizeof cwd))
        return -1;
    int n = snprintf(js, sizeof js,
                     "{\"model\":\"%s/data/demo/model\",\"train_data\":\"shards\",\"out_dir\":\"%s/%s\","
                     "\"batch_size\":2,\"seq_len\":16,\"steps\":2,\"bf16_warmup_steps\":1}",
                     cwd, test_tmp_dir(), out);
    snprintf(path, sizeof path, "%s/%s/run.json", test_tmp_dir(), node);
    return fileio_write_atomic(path, js, (size_t)n, NULL);
}

TEST(cli_dist, mismatched_config_binary_or_shard_is_reported_once_by_rank_0)
{
    DIST_NEED_BIN(bin);
    const char *shards = dist_shards(bin);
    ASSERT_TRUE(shards != NULL);
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "cd %s && mkdir -p nodeA nodeB && cp -r %s nodeA/shards && "
             "cp -r %s nodeB/shards && cp %s qatscope_copy && echo >> qatscope_copy",
             test_tmp_dir(), shards, shards, bin);
    ASSERT_EQ_INT(system(cmd), 0);
    /* the run config differs (out_dir) */
    ASSERT_OK(dist_node_config("nodeA", "nodeA/out"), NULL);
    ASSERT_OK(dist_node_config("nodeB", "nodeB/out"), NULL);
    ASSERT_SH(dist_two_dirs(bin, bin, "train --config run.json --quiet"), 2);
    ASSERT_TRUE(strstr(dist_err, "qatscope: rank 1: the run config differs from rank 0's") == dist_err);
    ASSERT_TRUE(strchr(dist_err, '\n') == dist_err + strlen(dist_err) - 1);   /* one line */
    /* the binary differs */
    ASSERT_OK(dist_node_config("nodeB", "nodeA/out"), NULL);
    char copy[700];
    snprintf(copy, sizeof copy, "%s/qatscope_copy", test_tmp_dir());
    ASSERT_SH(dist_two_dirs(bin, copy, "train --config run.json --quiet"), 2);
    ASSERT_TRUE(strstr(dist_err, "qatscope: rank 1: the qatscope binary differs") == dist_err);
    /* rank 1's shard is corrupt: rank 0 names rank 1 and the file, no run dir is made */
    snprintf(cmd, sizeof cmd, "printf 'x' | dd of=%s/nodeB/shards/train_000000.qst bs=1 seek=9000 "
             "conv=notrunc 2>/dev/null", test_tmp_dir());
    ASSERT_EQ_INT(system(cmd), 0);
    ASSERT_SH(dist_two_dirs(bin, bin, "train --config run.json --quiet"), 2);
    ASSERT_TRUE(strstr(dist_err, "qatscope: rank 1: shards/train_000000.qst: ") == dist_err);
    ASSERT_TRUE(strchr(dist_err, '\n') == dist_err + strlen(dist_err) - 1);
    char out[800];
    snprintf(out, sizeof out, "%s/nodeA/out", test_tmp_dir());
    ASSERT_TRUE(!fileio_exists(out));
    /* and with the same files everywhere the same job runs */
    snprintf(cmd, sizeof cmd, "cp %s/train_000000.qst %s/nodeB/shards/", shards, test_tmp_dir());
    ASSERT_EQ_INT(system(cmd), 0);
    ASSERT_SH(dist_two_dirs(bin, bin, "train --config run.json --quiet"), 0);
    /* rank 1's copy of the model is cut short: one line, and rank 0 has made no
     * run directory (it had written config.json and two empty logs, which a retry
     * then refused as an earlier run) */
    snprintf(cmd, sizeof cmd, "cd %s && rm -rf nodeA/model nodeB/model && cp -r %s/data/demo/model "
             "nodeA/model && cp -r nodeA/model nodeB/model && truncate -s 50000 "
             "nodeB/model/model.safetensors && sed -i 's#\"model\":\"[^\"]*\"#\"model\":\"model\"#; "
             "s#nodeA/out#nodeA/out_bad#' nodeA/run.json nodeB/run.json",
             test_tmp_dir(), getcwd(out, sizeof out) ? out : ".");
    ASSERT_EQ_INT(system(cmd), 0);
    ASSERT_SH(dist_two_dirs(bin, bin, "train --config run.json --quiet"), 2);
    ASSERT_TRUE(strstr(dist_err, "qatscope: rank 1: the copy of the model model differs") == dist_err);
    snprintf(out, sizeof out, "%s/nodeA/out_bad", test_tmp_dir());
    ASSERT_TRUE(!fileio_exists(out));
}

/* Each rank on its own "node" with its own copy of the model and the task data:
 * copies that differ (another checkpoint of the same shape, a reordered data
 * file) are refused by rank 0 in one line before any scoring or training (they
 * were scored and trained on silently: the odd documents got the other model's
 * log-likelihoods, or other documents under the same ids). */
TEST(cli_dist, ranks_with_other_model_or_data_copies_are_refused)
{
    DIST_NEED_BIN(bin);
    const char *shards = dist_shards(bin);
    ASSERT_TRUE(shards != NULL);
    char cmd[4000], cwd[512];
    ASSERT_TRUE(getcwd(cwd, sizeof cwd) != NULL);
    snprintf(cmd, sizeof cmd, "cd %s && rm -rf nodeA nodeB && mkdir -p nodeA nodeB && "
             "cp -r %s/data/demo/model nodeA/model && cp -r %s/tests/data/tasks/data nodeA/data && "
             "cp -r nodeA/data nodeB/data && cp -r %s nodeA/shards && cp -r %s nodeB/shards && "
             "%s init --config nodeA/model/config.json --tokenizer-dir nodeA/model --out nodeB/model "
             "--seed 7 > /dev/null", test_tmp_dir(), cwd, cwd, shards, shards, bin);
    ASSERT_EQ_INT(system(cmd), 0);
    const char *ev = "eval --model model --tasks arc_easy --data-dir data --limit 6 --threads 1 "
                     "--tasks-dir %s/tasks --output out.json";
    char args[1200];
    snprintf(args, sizeof args, ev, cwd);
    ASSERT_SH(dist_two_dirs(bin, bin, args), 2);
    if (strstr(dist_err, "qatscope: rank 1: the copy of the model model differs from rank 0's") != dist_err)
        fprintf(stderr, "    stderr: %s", dist_err);
    ASSERT_TRUE(strstr(dist_err, "qatscope: rank 1: the copy of the model model differs from rank 0's") ==
                dist_err);
    ASSERT_TRUE(strchr(dist_err, '\n') == dist_err + strlen(dist_err) - 1);
    /* the same model, but rank 1's ARC file in another order */
    snprintf(cmd, sizeof cmd, "cd %s && rm -rf nodeB/model && cp -r nodeA/model nodeB/model && "
             "tac nodeA/data/arc/hf_layout/ARC-Easy-test.jsonl > nodeB/data/arc/hf_layout/"
             "ARC-Easy-test.jsonl", test_tmp_dir());
    ASSERT_EQ_INT(system(cmd), 0);
    ASSERT_SH(dist_two_dirs(bin, bin, args), 2);
    ASSERT_TRUE(strstr(dist_err, "qatscope: rank 1: the task data under --data-dir differs") == dist_err);
    snprintf(cmd, sizeof cmd, "cp %s/nodeA/data/arc/hf_layout/ARC-Easy-test.jsonl "
             "%s/nodeB/data/arc/hf_layout/", test_tmp_dir(), test_tmp_dir());
    ASSERT_EQ_INT(system(cmd), 0);
    ASSERT_SH(dist_two_dirs(bin, bin, args), 0);
    /* train: another checkpoint on rank 1's node, no run directory made */
    snprintf(cmd, sizeof cmd, "cd %s && rm -rf nodeB/model && %s init --config nodeA/model/config.json "
             "--tokenizer-dir nodeA/model --out nodeB/model --seed 7 > /dev/null", test_tmp_dir(), bin);
    ASSERT_EQ_INT(system(cmd), 0);
    for (int k = 0; k < 2; k++) {
        char path[900];
        snprintf(path, sizeof path, "%s/node%c/run.json", test_tmp_dir(), "AB"[k]);
        char js[1200];
        int n = snprintf(js, sizeof js, "{\"model\":\"model\",\"train_data\":\"shards\",\"out_dir\":"
                         "\"%s/nodeA/out_m\",\"batch_size\":2,\"seq_len\":16,\"steps\":2,"
                         "\"bf16_warmup_steps\":1}", test_tmp_dir());
        ASSERT_OK(fileio_write_atomic(path, js, (size_t)n, NULL), NULL);
    }
    ASSERT_SH(dist_two_dirs(bin, bin, "train --config run.json --quiet"), 2);
    ASSERT_TRUE(strstr(dist_err, "qatscope: rank 1: the copy of the model model differs from rank 0's") ==
                dist_err);
    snprintf(cmd, sizeof cmd, "%s/nodeA/out_m", test_tmp_dir());
    ASSERT_TRUE(!fileio_exists(cmd));
}

/* Under mpirun: --help is printed once (rank 0's), and a one-process command is
 * refused in one line instead of leaving the job's train/eval ranks waiting for
 * it forever. */
TEST(cli_dist, help_once_and_one_process_commands_refused)
{
    DIST_NEED_BIN(bin);
    char cmd[2000], out[800];
    snprintf(out, sizeof out, "%s/dist_help.txt", test_tmp_dir());
    snprintf(cmd, sizeof cmd, DIST_MPIRUN " -np 2 %s eval --help > %s", bin, out);
    ASSERT_EQ_INT(system(cmd), 0);
    char *text;
    size_t n;
    ASSERT_OK(fileio_read_all(out, &text, &n, NULL), NULL);
    int copies = 0;
    for (const char *p = text; (p = strstr(p, "usage: qatscope eval")); p++)
        copies++;
    qs_free(text);
    ASSERT_EQ_INT(copies, 1);
    snprintf(cmd, sizeof cmd, DIST_MPIRUN " -np 2 %s version", bin);
    ASSERT_SH(dist_sh(cmd), 2);
    ASSERT_TRUE(strstr(dist_err, "qatscope: version: a one-process command, run here as one of 2 "
                                 "mpirun ranks") == dist_err);
    ASSERT_TRUE(strchr(dist_err, '\n') == dist_err + strlen(dist_err) - 1);
    snprintf(cmd, sizeof cmd, DIST_MPIRUN " -np 1 %s eval --model data/demo/model --tasks arc_easy "
             "--data-dir tests/data/tasks/data --output %s/dist_mixed.json : -np 1 %s version",
             bin, test_tmp_dir(), bin);
    int st = dist_sh(cmd);
    ASSERT_TRUE(st != 0 && st != 124);   /* 124: the timeout, i.e. the hang */
}

TEST(cli_dist, sharded_eval_writes_the_one_process_files)
{
    DIST_NEED_BIN(bin);
    const char *args = "eval --model data/demo/model --tasks arc_easy,hellaswag --data-dir "
                       "tests/data/tasks/data --batch 2 --threads 1";
    char cmd[3000];
    static const int rank_counts[] = {0, 2, 3};   /* 0: one process without mpirun */
    for (int c = 0; c < 3; c++) {
        int ranks = rank_counts[c];
        char pre[200];
        if (ranks)
            snprintf(pre, sizeof pre, DIST_MPIRUN " -np %d", ranks);
        else
            snprintf(pre, sizeof pre, "OMP_NUM_THREADS=1");
        snprintf(cmd, sizeof cmd, "%s %s %s --output %s/ev/%d.json --log-samples %s/ev/%d.jsonl.zst",
                 pre, bin, args, test_tmp_dir(), ranks, test_tmp_dir(), ranks);
        char mk[800];
        snprintf(mk, sizeof mk, "mkdir -p %s/ev", test_tmp_dir());
        ASSERT_EQ_INT(system(mk), 0);
        ASSERT_SH(dist_sh(cmd), 0);
        if (!ranks)
            continue;
        char a[64], b[64];
        snprintf(a, sizeof a, "0.jsonl.zst");
        snprintf(b, sizeof b, "%d.jsonl.zst", ranks);
        size_t na, nb;
        char *x = dist_read("ev", a, &na), *y = dist_read("ev", b, &nb);
        ASSERT_TRUE(x && y && na == nb && !memcmp(x, y, na));
        qs_free(x);
        qs_free(y);
        /* results.json: equal but for the time fields and the command line */
        snprintf(a, sizeof a, "0.json");
        snprintf(b, sizeof b, "%d.json", ranks);
        json_t *r0, *r1;
        char p0[900], p1[900];
        snprintf(p0, sizeof p0, "%s/ev/%s", test_tmp_dir(), a);
        snprintf(p1, sizeof p1, "%s/ev/%s", test_tmp_dir(), b);
        ASSERT_TRUE((r0 = json_load_file(p0, 0, NULL)) && (r1 = json_load_file(p1, 0, NULL)));
        static const char *const skip[] = {"date", "total_evaluation_time_seconds"};
        for (int i = 0; i < 2; i++) {
            json_object_del(r0, skip[i]);
            json_object_del(r1, skip[i]);
        }
        json_object_del(json_object_get(r0, "qatscope"), "command_line");
        json_object_del(json_object_get(r1, "qatscope"), "command_line");
        int eq = json_equal(r0, r1);
        if (!eq) {
            char *s0 = json_dumps(r0, JSON_SORT_KEYS), *s1 = json_dumps(r1, JSON_SORT_KEYS);
            fprintf(stderr, "    results differ:\n%s\n%s\n", s0, s1);
            free(s0);
            free(s1);
        }
        json_decref(r0);
        json_decref(r1);
        ASSERT_TRUE(eq);
    }
}
