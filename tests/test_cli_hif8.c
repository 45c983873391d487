/* test_cli_hif8.c: `qatscope hif8 ...` end to end (binary from $QS_BIN, set by make test).
 *
 * Checks exact outputs of encode/decode/table and the value view, and that bad
 * input gives exit 2, ONE stderr line naming the token and its position, and
 * nothing on stdout.
 */
#include <stdlib.h>
#include <sys/wait.h>

#include "test.h"

#define CLI_OUT_MAX 65536

/* Runs `printf '%s' STDIN | $QS_BIN ARGS`; stdout into out, stderr into err.
 * Returns the exit status, or -1 when QS_BIN is unset or the shell failed. */
static int run_cli(const char *stdin_text, const char *args, char *out, char *err)
{
    const char *bin = getenv("QS_BIN");
    if (!bin || !*bin)
        return -1;
    char err_path[512], cmd[2048];
    snprintf(err_path, sizeof err_path, "%s/cli_hif8.err", test_tmp_dir());
    snprintf(cmd, sizeof cmd, "printf '%s' | '%s' %s 2>'%s'", stdin_text ? stdin_text : "", bin,
             args, err_path);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, CLI_OUT_MAX - 1, p);
    out[n] = 0;
    int st = pclose(p);
    FILE *e = fopen(err_path, "r");
    n = e ? fread(err, 1, CLI_OUT_MAX - 1, e) : 0;
    err[n] = 0;
    if (e)
        fclose(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static char out[CLI_OUT_MAX], err[CLI_OUT_MAX];

#define NEED_BIN()                                                                    \
    do {                                                                              \
        if (!getenv("QS_BIN"))                                                        \
            SKIP("QS_BIN not set (run through make test)");                           \
    } while (0)

TEST(cli_hif8, encode_reads_decimal_hexfloat_and_prints_codes)
{
    NEED_BIN();
    ASSERT_EQ_INT(run_cli("1.0 1.0625\\n0x1p-22  -5e10 nan 40960 -0\\n", "hif8 encode", out, err), 0);
    ASSERT_EQ_STR(out, "0x08\n0x09\n0x01\n0xEF\n0x80\n0x6F\n0x00\n");
    ASSERT_EQ_INT(run_cli("40960 -inf 32769", "hif8 encode --saturate", out, err), 0);
    ASSERT_EQ_STR(out, "0x6E\n0xEE\n0x6E\n");
    ASSERT_EQ_INT(run_cli("0x3F800000 0xFF800000 0x7FC00000 0x34000000", "hif8 encode --bits", out, err), 0);
    ASSERT_EQ_STR(out, "0x08\n0xEF\n0x80\n0x01\n");
    ASSERT_EQ_INT(run_cli("", "hif8 encode", out, err), 0); /* empty input: no output */
    ASSERT_EQ_STR(out, "");
}

TEST(cli_hif8, decode_prints_hex_floats)
{
    NEED_BIN();
    ASSERT_EQ_INT(run_cli("8 0x09 0x80\\n0x6F 239 0 0x01 0xee", "hif8 decode", out, err), 0);
    ASSERT_EQ_STR(out, "0x1p+0\n0x1.2p+0\nnan\ninf\n-inf\n0x0p+0\n0x1p-22\n-0x1p+15\n");
}

TEST(cli_hif8, table_lists_all_256_codes)
{
    NEED_BIN();
    ASSERT_EQ_INT(run_cli(NULL, "hif8 table", out, err), 0);
    ASSERT_EQ_INT(count_lines(out), 257);
    ASSERT_TRUE(strstr(out, "\n0x6F\t0_11_0111_1\tinf\t0\t4\t15\t1\t1\tinf\tinf\n") != NULL);
    ASSERT_TRUE(strstr(out, "\n0x10\t0_001_0_000\tnormal\t0\t1\t1\t3\t0\t2\t0x1p+1\n") != NULL);
}

TEST(cli_hif8, value_view_shows_code_fields_value_and_error)
{
    NEED_BIN();
    ASSERT_EQ_INT(run_cli(NULL, "hif8 1.0625 -0.3", out, err), 0);
    ASSERT_EQ_INT(count_lines(out), 3); /* header + one line per value */
    const char *l = strstr(out, "\n1.0625 ");
    ASSERT_TRUE(l != NULL);
    ASSERT_TRUE(strstr(l, "0x09") && strstr(l, "0_0001_001") && strstr(l, "1.125") &&
                strstr(l, "+5.8824e-02"));
    ASSERT_TRUE(strstr(out, "0xB2  1_01_10_010") != NULL);
    ASSERT_EQ_INT(run_cli(NULL, "hif8 --saturate 40960", out, err), 0);
    ASSERT_TRUE(strstr(out, "0x6E") && strstr(out, "32768") && strstr(out, "-2.0000e-01"));
}

TEST(cli_hif8, garbage_input_is_one_error_line_naming_token_and_position)
{
    NEED_BIN();
    ASSERT_EQ_INT(run_cli("1.0\\n2.0 abc 3", "hif8 encode", out, err), 2);
    ASSERT_EQ_STR(out, ""); /* nothing printed before the error */
    ASSERT_EQ_INT(count_lines(err), 1);
    ASSERT_TRUE(strstr(err, "'abc'") && strstr(err, "line 2") && strstr(err, "token 3"));
    ASSERT_EQ_INT(run_cli("0x3F80000G", "hif8 encode --bits", out, err), 2);
    ASSERT_TRUE(strstr(err, "'0x3F80000G'") && strstr(err, "token 1"));
    ASSERT_EQ_INT(run_cli("12 256", "hif8 decode", out, err), 2);
    ASSERT_TRUE(strstr(err, "'256'") && strstr(err, "token 2"));
    ASSERT_EQ_INT(run_cli("1.5", "hif8 decode", out, err), 2);
    ASSERT_EQ_INT(count_lines(err), 1);
}

TEST(cli_hif8, unknown_options_and_subcommands_exit_2)
{
    NEED_BIN();
    ASSERT_EQ_INT(run_cli(NULL, "hif8 encode --xyz", out, err), 2);
    ASSERT_TRUE(strstr(err, "'--xyz'") && strstr(err, "argument 2"));
    ASSERT_EQ_INT(count_lines(err), 1);
    ASSERT_EQ_INT(run_cli(NULL, "hif8 frobnicate", out, err), 2);
    ASSERT_TRUE(strstr(err, "'frobnicate'") && strstr(err, "argument 1"));
    ASSERT_EQ_INT(run_cli(NULL, "hif8 1.0 --what", out, err), 2);
    ASSERT_TRUE(strstr(err, "'--what'"));
    ASSERT_EQ_INT(run_cli(NULL, "hif8 table extra", out, err), 2);
    ASSERT_EQ_INT(run_cli(NULL, "hif8", out, err), 2);
    ASSERT_EQ_INT(count_lines(err), 1);
}

/* clipped column (4th after the 26-char name) of the demo row starting with `name` */
static long demo_clipped(const char *text, const char *name)
{
    const char *l = strstr(text, name);
    if (!l)
        return -1;
    double scale, ymax;
    long clipped;
    if (sscanf(l + 26, "%lf %lf %ld", &scale, &ymax, &clipped) != 3)
        return -1;
    return clipped;
}

TEST(cli_demo, stale_scale_clips_the_spike_and_good_scale_does_not)
{
    NEED_BIN();
    ASSERT_EQ_INT(run_cli(NULL, "demo --hif8", out, err), 0);
    ASSERT_EQ_STR(err, "");
    ASSERT_EQ_INT(demo_clipped(out, "this step's amax (good)"), 0);
    ASSERT_TRUE(demo_clipped(out, "previous amax (stale)") >= 24); /* every outlier */
    ASSERT_TRUE(strstr(out, "1.0625     0x09") != NULL);
    char again[CLI_OUT_MAX];
    memcpy(again, out, sizeof again);
    ASSERT_EQ_INT(run_cli(NULL, "demo --hif8", out, err), 0);
    ASSERT_EQ_STR(out, again); /* deterministic */
    ASSERT_EQ_INT(run_cli(NULL, "demo --hif8 extra", out, err), 2);
}
