/* test.h: the unit-test harness.
 *
 *   TEST(hif8, encode_ties_away) { ASSERT_EQ_INT(hif8_encode(1.0625f, 0), 0x09); }
 *
 * Tests register themselves (constructor attribute) and run in one process
 * through tests/runner.c, which prints one line per test and ends with
 * "N passed, N failed, N skipped"; any failure makes the exit code 1.
 * Asserts print both expressions and values and are never compiled out.
 * SKIP("why") ends a test as skipped (e.g. ../shared missing).
 */
#ifndef QS_TEST_H
#define QS_TEST_H

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef void (*test_fn)(void);
void test_register(const char *suite, const char *name, test_fn fn);

/* per-test state, owned by the runner */
extern int test_failed_flag;
extern int test_skipped_flag;
extern char test_skip_reason[256];

#define TEST(suite, name)                                                             \
    static void test_##suite##_##name(void);                                          \
    __attribute__((constructor)) static void test_reg_##suite##_##name(void)          \
    {                                                                                 \
        test_register(#suite, #name, test_##suite##_##name);                          \
    }                                                                                 \
    static void test_##suite##_##name(void)

#define TEST_FAIL_AT(...)                                                             \
    do {                                                                              \
        fprintf(stderr, "    %s:%d: ", __FILE__, __LINE__);                           \
        fprintf(stderr, __VA_ARGS__);                                                 \
        fprintf(stderr, "\n");                                                        \
        test_failed_flag = 1;                                                         \
    } while (0)

#define ASSERT_TRUE(c)                                                                \
    do {                                                                              \
        if (!(c)) {                                                                   \
            TEST_FAIL_AT("ASSERT_TRUE(%s) failed", #c);                               \
            return;                                                                   \
        }                                                                             \
    } while (0)

#define ASSERT_EQ_INT(a, b)                                                           \
    do {                                                                              \
        long long va_ = (long long)(a), vb_ = (long long)(b);                         \
        if (va_ != vb_) {                                                             \
            TEST_FAIL_AT("ASSERT_EQ_INT(%s, %s): %lld != %lld", #a, #b, va_, vb_);    \
            return;                                                                   \
        }                                                                             \
    } while (0)

#define ASSERT_EQ_STR(a, b)                                                           \
    do {                                                                              \
        const char *va_ = (a), *vb_ = (b);                                            \
        if (!va_ || !vb_ || strcmp(va_, vb_) != 0) {                                  \
            TEST_FAIL_AT("ASSERT_EQ_STR(%s, %s): \"%s\" != \"%s\"", #a, #b,           \
                         va_ ? va_ : "(null)", vb_ ? vb_ : "(null)");                 \
            return;                                                                   \
        }                                                                             \
    } while (0)

/* |a - b| <= tol (NaN never passes) */
#define ASSERT_NEAR(a, b, tol)                                                        \
    do {                                                                              \
        double va_ = (double)(a), vb_ = (double)(b), vt_ = (double)(tol);             \
        if (!(fabs(va_ - vb_) <= vt_)) {                                              \
            TEST_FAIL_AT("ASSERT_NEAR(%s, %s, %s): %.9g vs %.9g (diff %.3g)", #a, #b, \
                         #tol, va_, vb_, fabs(va_ - vb_));                            \
            return;                                                                   \
        }                                                                             \
    } while (0)

/* library call must return 0; prints the diag otherwise */
#define ASSERT_OK(expr, diagp)                                                        \
    do {                                                                              \
        int rc_ = (expr);                                                             \
        const qs_diag *dg_ = (diagp);                                                 \
        if (rc_ != 0) {                                                               \
            TEST_FAIL_AT("%s returned %d (%s): %s", #expr, rc_, qs_strerror(rc_),     \
                         dg_ ? dg_->msg : "");                                        \
            return;                                                                   \
        }                                                                             \
    } while (0)

#define SKIP(...)                                                                     \
    do {                                                                              \
        snprintf(test_skip_reason, sizeof test_skip_reason, __VA_ARGS__);             \
        test_skipped_flag = 1;                                                        \
        return;                                                                       \
    } while (0)

/* Path of a file under the shared data dir ($QS_SHARED, default ../shared),
 * written into buf; returns buf if it exists, else NULL (then SKIP). */
const char *test_shared_path(char *buf, size_t buf_bytes, const char *rel);
/* Run "$QS_BIN ARGS" through the shell, stdout into out and stderr into err
 * (both NUL-terminated, truncated to fit); returns the exit status, or a
 * negative value when QS_BIN is unset or the command could not run. */
int test_run_cli(const char *args, char *out, size_t out_bytes, char *err, size_t err_bytes);
/* Writable scratch directory for this test run (created on demand). */
const char *test_tmp_dir(void);
/* setenv(name, value) for the rest of a test; returns the old value (a copy,
 * or NULL when unset) for test_env_restore, which puts it back and frees it. */
char *test_env_set(const char *name, const char *value);
void test_env_restore(const char *name, char *saved);
/* A train_state.bin image (buf, as read) relabelled as version v, its section
 * checksums recomputed as that version makes them (FNV-1a before 3, then
 * digest_lanes64): an older file, as an older qatscope wrote it. */
void test_trainstate_relabel(unsigned char *buf, unsigned v);

#endif
