/* runner.c: runs every registered test (optionally those whose "suite.name"
 * contains argv[1]), prints one line each and the final tally.  The table grows
 * with the tests (no fixed maximum); a registration that cannot be stored (out of
 * memory) fails the run loudly before any test runs. */
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qs/bytes.h"
#include "qs/digest.h"
#include "qs/trainstate.h"
#include "test.h"

typedef struct test_entry {
    const char *suite, *name;
    test_fn fn;
} test_entry;
/* plain realloc, not qs_malloc: tests count and fail qs_malloc's allocations */
static test_entry *tests;
static int n_tests, cap_tests, n_lost;

int test_failed_flag;
int test_skipped_flag;
char test_skip_reason[256];

void test_register(const char *suite, const char *name, test_fn fn)
{
    if (n_tests == cap_tests) {
        int cap = cap_tests ? 2 * cap_tests : 512;
        test_entry *grown = realloc(tests, (size_t)cap * sizeof *grown);
        if (!grown) {
            fprintf(stderr, "runner: cannot register %s.%s: out of memory\n", suite, name);
            n_lost++;
            return;
        }
        tests = grown;
        cap_tests = cap;
    }
    tests[n_tests++] = (test_entry){suite, name, fn};
}

const char *test_shared_path(char *buf, size_t buf_bytes, const char *rel)
{
    const char *root = getenv("QS_SHARED");
    if (!root || !*root)
        root = "../shared";
    snprintf(buf, buf_bytes, "%s/%s", root, rel);
    struct stat st;
    return stat(buf, &st) == 0 ? buf : NULL;
}

char *test_env_set(const char *name, const char *value)
{
    const char *old = getenv(name);
    char *saved = old ? strdup(old) : NULL;
    setenv(name, value, 1);
    return saved;
}

void test_env_restore(const char *name, char *saved)
{
    if (saved)
        setenv(name, saved, 1);
    else
        unsetenv(name);
    free(saved);
}

const char *test_tmp_dir(void)
{
    static char dir[256];
    if (!dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/qatscope-test.%ld", base && *base ? base : "/tmp",
                 (long)getpid());
        mkdir(dir, 0777);
    }
    return dir;
}

int test_run_cli(const char *args, char *out, size_t out_bytes, char *err, size_t err_bytes)
{
    const char *bin = getenv("QS_BIN");
    if (!bin)
        return -100;
    char errpath[600], cmd[8192];
    snprintf(errpath, sizeof errpath, "%s/cli_stderr.txt", test_tmp_dir());
    snprintf(cmd, sizeof cmd, "%s %s 2>%s", bin, args, errpath);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -101;
    size_t n = fread(out, 1, out_bytes - 1, p);
    out[n] = 0;
    while (fgetc(p) != EOF) {
    }
    int st = pclose(p);
    err[0] = 0;
    FILE *f = fopen(errpath, "r");
    if (f) {
        size_t k = fread(err, 1, err_bytes - 1, f);
        err[k] = 0;
        fclose(f);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -102;
}

static int cmp_tests(const void *a, const void *b)
{
    const test_entry *x = a, *y = b;
    int c = strcmp(x->suite, y->suite);
    return c ? c : strcmp(x->name, y->name);
}

int main(int argc, char **argv)
{
    const char *filter = argc > 1 ? argv[1] : NULL;
    int passed = 0, failed = 0, skipped = 0;
    if (n_lost) {
        fprintf(stderr, "runner: %d test(s) could not be registered; nothing run\n", n_lost);
        return 1;
    }
    if (n_tests)
        qsort(tests, (size_t)n_tests, sizeof tests[0], cmp_tests);
    for (int i = 0; i < n_tests; i++) {
        char full[256];
        snprintf(full, sizeof full, "%s.%s", tests[i].suite, tests[i].name);
        if (filter && !strstr(full, filter))
            continue;
        test_failed_flag = test_skipped_flag = 0;
        test_skip_reason[0] = 0;
        tests[i].fn();
        if (test_failed_flag) {
            failed++;
            printf("FAIL %s\n", full);
        } else if (test_skipped_flag) {
            skipped++;
            printf("skip %s (%s)\n", full, test_skip_reason);
        } else {
            passed++;
            printf("ok   %s\n", full);
        }
        fflush(stdout);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", test_tmp_dir());
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", test_tmp_dir());
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    free(tests);
    return failed ? 1 : 0;
}

void test_trainstate_relabel(unsigned char *buf, unsigned v)
{
    const uint64_t seed = 1469598103934665603ull;   /* train_state.bin's */
    bytes_put_u32le(buf + 8, v);
    uint32_t n = bytes_get_u32le(buf + 12);
    size_t off = 16;
    for (uint32_t i = 0; i < n; i++) {
        unsigned char *h = buf + off + TRAINSTATE_TAG_BYTES;
        size_t bytes = (size_t)bytes_get_u64le(h);
        off += TRAINSTATE_TAG_BYTES + 16;
        bytes_put_u64le(h + 8, v >= 3 ? digest_lanes64_once(seed, buf + off, bytes)
                                      : digest_fnv1a64(seed, buf + off, bytes));
        off += bytes;
    }
}
