/* test_cli_train_signal.c: `qatscope train` stopped by a signal, on the bundled
 * tiny model: SIGTERM (timeout, schedulers) and SIGINT (Ctrl-C) both stop after
 * the current step with a checkpoint and a "stop" event and exit 128 + signal;
 * a second signal ends the process at once; the checkpoint resumes. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "test.h"

/* shards of data/demo/train.txt, made once */
static const char *sig_shards(void)
{
    static char dir[512];
    if (dir[0])
        return dir;
    char args[1200], out[256], err[2048];
    snprintf(dir, sizeof dir, "%s/sig_shards", test_tmp_dir());
    snprintf(args, sizeof args,
             "tokenize --model data/demo/model --input data/demo/train.txt --out %s", dir);
    if (test_run_cli(args, out, sizeof out, err, sizeof err) != 0) {
        dir[0] = 0;
        return NULL;
    }
    return dir;
}

static void sig_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Starts a long run in <tmp>/<name> (stdout+stderr to <tmp>/<name>.out), waits
 * until it has logged its first training step, sends sig1 (then sig2 right
 * after, if nonzero) and returns the wait status (-1 if it could not run). */
static int sig_run(const char *name, int sig1, int sig2)
{
    const char *bin = getenv("QS_BIN"), *shards = sig_shards();
    if (!bin || !shards)
        return -1;
    char cfg[600], js[2000], out[600], metrics[700];
    snprintf(cfg, sizeof cfg, "%s/%s.json", test_tmp_dir(), name);
    int n = snprintf(js, sizeof js,
                     "{\"model\":\"data/demo/model\",\"train_data\":\"%s\",\"out_dir\":\"%s/%s\","
                     "\"batch_size\":2,\"seq_len\":16,\"steps\":1000000,\"lr\":1e-3,"
                     "\"bf16_warmup_steps\":2,\"quant_modules\":[\"layers.*.mlp.*\"]}",
                     shards, test_tmp_dir(), name);
    if (fileio_write_atomic(cfg, js, (size_t)n, NULL))
        return -1;
    snprintf(out, sizeof out, "%s/%s.out", test_tmp_dir(), name);
    snprintf(metrics, sizeof metrics, "%s/%s/metrics.jsonl", test_tmp_dir(), name);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl(bin, bin, "train", "--config", cfg, "--quiet", (char *)NULL);
        _exit(127);
    }
    int started = 0, st = 0;
    for (int i = 0; i < 3000 && !started; i++) {   /* at most ~60 s */
        char *text = NULL;
        size_t len;
        if (!fileio_read_all(metrics, &text, &len, NULL)) {
            started = strstr(text, "\"type\":\"train\"") != NULL;
            qs_free(text);
        }
        if (!started) {
            if (waitpid(pid, &st, WNOHANG) == pid)
                return -1;   /* ended before it trained */
            sig_sleep_ms(20);
        }
    }
    kill(pid, sig1);
    if (sig2)
        kill(pid, sig2);
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return started ? st : -1;
}

static char *sig_read(const char *name, const char *file)
{
    char path[800], *text = NULL;
    size_t n;
    snprintf(path, sizeof path, "%s/%s%s", test_tmp_dir(), name, file);
    return fileio_read_all(path, &text, &n, NULL) ? NULL : text;
}

/* The stop after a signal: exit status, the stop event as the last event, a
 * checkpoint at that step, the one-line note; returns the step (or -1). */
static long sig_check_stopped(const char *name, int st, int sig, const char *sig_name)
{
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 128 + sig) {
        fprintf(stderr, "    %s: status 0x%x, expected exit %d\n", name, st, 128 + sig);
        return -1;
    }
    char *ev = sig_read(name, "/events.jsonl"), *out = sig_read(name, ".out");
    long step = -1;
    const char *last = ev ? strstr(ev, "\"type\":\"stop\",\"reason\":\"interrupted\"") : NULL;
    if (last) {
        const char *line = last;
        while (line > ev && line[-1] != '\n')
            line--;
        if (sscanf(line, "{\"step\":%ld,", &step) != 1 || strchr(last, '\n')[1] != 0)
            step = -1;   /* not the last event */
    }
    char want[160], ck[160];
    snprintf(want, sizeof want, "train: %s: stopped after %ld steps with a checkpoint", sig_name,
             step);
    if (step < 1 || !out || !strstr(out, want)) {
        fprintf(stderr, "    %s: events:\n%s\n    output:\n%s\n", name, ev ? ev : "(none)",
                out ? out : "(none)");
        step = -1;
    }
    qs_free(ev);
    qs_free(out);
    snprintf(ck, sizeof ck, "/ckpt/step_%ld/train_state.bin", step);
    char *state = step > 0 ? sig_read(name, ck) : NULL;
    if (!state)
        step = -1;
    qs_free(state);
    return step;
}

TEST(cli_train_signal, sigterm_stops_with_a_checkpoint_exit_143_and_resumes)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    int st = sig_run("sig_term", SIGTERM, 0);
    ASSERT_TRUE(st != -1);
    long step = sig_check_stopped("sig_term", st, SIGTERM, "SIGTERM");
    ASSERT_TRUE(step > 0);
    char args[1200], out[4096], err[4096];
    snprintf(args, sizeof args, "train --resume %s/sig_term --set steps=%ld --quiet",
             test_tmp_dir(), step + 2);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
    char ck[160];
    snprintf(ck, sizeof ck, "/ckpt/step_%ld/train_state.bin", step + 2);
    char *state = sig_read("sig_term", ck);
    ASSERT_TRUE(state != NULL);
    qs_free(state);
}

TEST(cli_train_signal, sigint_stops_with_a_checkpoint_exit_130)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    int st = sig_run("sig_int", SIGINT, 0);
    ASSERT_TRUE(st != -1);
    ASSERT_TRUE(sig_check_stopped("sig_int", st, SIGINT, "SIGINT") > 0);
}

/* Two different signals are never merged into one pending signal: whichever is
 * handled first, the other finds the default action back and ends the process
 * at once (no stop event, no checkpoint). */
TEST(cli_train_signal, a_second_signal_ends_the_run_at_once)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    int st = sig_run("sig_twice", SIGTERM, SIGINT);
    ASSERT_TRUE(st != -1);
    ASSERT_TRUE(WIFSIGNALED(st));
    ASSERT_TRUE(WTERMSIG(st) == SIGTERM || WTERMSIG(st) == SIGINT);
    char *ev = sig_read("sig_twice", "/events.jsonl");
    int stopped = ev && strstr(ev, "\"type\":\"stop\"") != NULL;
    qs_free(ev);
    ASSERT_TRUE(!stopped);
}
