/* test_cli_interrupt.c: Ctrl-C (SIGINT) or SIGTERM while `init` writes a
 * checkpoint of a few hundred MB: one error line, the process ends by the
 * signal (a shell's 130 / 143), and neither the output directory nor its
 * temporary one is left behind (qs/interrupt.h; export takes the same path
 * through the safetensors writer). */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "test.h"

/* Size in bytes of the largest safetensors file in dir (as it is written: its
 * name.tmp.<pid>), or -1 without one. */
static long long intr_largest_safetensors(const char *dir)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return -1;
    long long best = -1;
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (!strstr(e->d_name, ".safetensors"))
            continue;
        char path[1200];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (!stat(path, &st) && (long long)st.st_size > best)
            best = (long long)st.st_size;
    }
    closedir(dp);
    return best;
}

/* Entries of dir other than . and .. (-1: no dir). */
static int intr_entries(const char *dir)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(dp);
    return n;
}

/* Starts `init` of a ~330M-parameter config into <tmp>/intr_<name>/m, sends sig
 * once its temporary directory holds more than 1 MB of tensor data, and
 * returns the wait status (-1: it could not run or ended before the signal).
 * The child's stderr goes to <tmp>/intr_<name>.err. */
static int intr_run(const char *name, int sig)
{
    const char *bin = getenv("QS_BIN");
    char dir[700], cfg[800], out[800], tmp[900], err[800];
    snprintf(dir, sizeof dir, "%s/intr_%s", test_tmp_dir(), name);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(out, sizeof out, "%s/m", dir);
    snprintf(err, sizeof err, "%s/intr_%s.err", test_tmp_dir(), name);
    qs_diag d = {0};
    if (fileio_mkdir_p(dir, &d))
        return -1;
    const char *json = "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 1024,"
                       " \"intermediate_size\": 4096, \"num_hidden_layers\": 16,"
                       " \"num_attention_heads\": 16, \"num_key_value_heads\": 16,"
                       " \"vocab_size\": 32000, \"max_position_embeddings\": 256}\n";
    if (fileio_write_atomic(cfg, json, strlen(json), &d))
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0)
            dup2(fd, 2);
        execl(bin, bin, "init", "--config", cfg, "--tokenizer-dir", "data/demo/model", "--out",
              out, (char *)NULL);
        _exit(127);
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)pid);
    int st = 0, writing = 0;
    for (int i = 0; i < 6000 && !writing; i++) { /* at most ~60 s */
        writing = intr_largest_safetensors(tmp) > (1 << 20);
        if (!writing) {
            if (waitpid(pid, &st, WNOHANG) == pid)
                return -1; /* ended before it wrote */
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    kill(pid, writing ? sig : SIGKILL);
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return writing ? st : -1;
}

static void intr_check(const char *name, int sig)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    int st = intr_run(name, sig);
    ASSERT_TRUE(st != -1);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != sig) {
        TEST_FAIL_AT("status 0x%x: expected the end by signal %d", st, sig);
        return;
    }
    char dir[700], errf[800], *text = NULL;
    size_t n = 0;
    snprintf(dir, sizeof dir, "%s/intr_%s", test_tmp_dir(), name);
    snprintf(errf, sizeof errf, "%s/intr_%s.err", test_tmp_dir(), name);
    ASSERT_EQ_INT(fileio_read_all(errf, &text, &n, NULL), 0);
    /* one line naming the file being written and the signal */
    int one_line = n > 0 && text[n - 1] == '\n' && memchr(text, '\n', n - 1) == NULL;
    char want[64];
    snprintf(want, sizeof want, "interrupted by signal %d", sig);
    int named = strstr(text, ".safetensors: ") && strstr(text, want);
    if (!one_line || !named)
        fprintf(stderr, "    stderr: %s", text);
    qs_free(text);
    ASSERT_TRUE(one_line && named);
    /* only the config the test wrote: no m, no m.tmp.<pid> */
    ASSERT_EQ_INT(intr_entries(dir), 1);
}

TEST(cli_interrupt, ctrl_c_during_init_leaves_nothing_and_ends_by_the_signal)
{
    intr_check("int", SIGINT);
}

TEST(cli_interrupt, sigterm_during_init_leaves_nothing_and_ends_by_the_signal)
{
    intr_check("term", SIGTERM);
}
