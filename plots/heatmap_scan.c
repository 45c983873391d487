/* heatmap_scan.c: fast path for quant.jsonl step records.
 *
 * A 10,000-step log of 100 quantizers is ~270 MB of JSON; building a Jansson tree
 * per line costs seconds (one allocation per value).  This scanner walks a step
 * record in place and pulls out only step, phase and one metric per quantizer.
 *
 * Contract: it returns 1 only for a syntactically valid record it fully understood
 * that qlog's record rules accept, with exactly the values the Jansson path
 * (heatmap_data.c, through qlog_step_parse) would produce.  It reads JSON types
 * only: every value it scanned is judged by qlog's own rule functions
 * (qlog_step_check, qlog_entry_check: the ones qlog_step_parse calls), and the
 * metric comes from the row they fill (heatmap_metric_value_impl), so the two
 * paths cannot drift apart.  Anything unusual (another record type, any string
 * escape or non-ASCII byte, a non-integer step or count, a name out of header
 * order or missing, a value the rules refuse, an integer literal past 2^53,
 * malformed JSON) returns 0 and the caller re-reads the line with Jansson, which
 * also words the error.  All reads are bounded by `end`.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plot_impl.h"
#include "qs/qlog.h"

typedef struct scan {
    const char *p, *end;
} scan;

static void ws(scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\r' || *s->p == '\n'))
        s->p++;
}

static int lit(scan *s, char c)
{
    ws(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return 1;
    }
    return 0;
}

/* raw string body [*a, *a + *n); any escape or non-ASCII byte hands the line to Jansson
 * (it validates escapes, surrogates and UTF-8; our logs never need them).  *esc is
 * kept for the callers' clarity and is always 0 on success. */
static int str(scan *s, const char **a, size_t *n, int *esc)
{
    ws(s);
    if (s->p >= s->end || *s->p != '"')
        return 0;
    *a = ++s->p;
    *esc = 0;
    while (s->p < s->end && *s->p != '"') {
        unsigned char c = (unsigned char)*s->p;
        if (c < 0x20 || c >= 0x80 || c == '\\')
            return 0;
        s->p++;
    }
    if (s->p >= s->end)
        return 0;
    *n = (size_t)(s->p - *a);
    s->p++;
    return 1;
}

static int digits(scan *s)
{
    const char *a = s->p;
    while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
        s->p++;
    return s->p > a;
}

/* JSON number, strict grammar -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?;
 * *integral = 1 when written without fraction or exponent */
static int num(scan *s, double *v, int *integral)
{
    ws(s);
    const char *a = s->p;
    if (s->p < s->end && *s->p == '-')
        s->p++;
    if (s->p < s->end && *s->p == '0')
        s->p++;
    else if (!digits(s))
        return 0;
    *integral = 1;
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        *integral = 0;
        if (!digits(s))
            return 0;
    }
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
        s->p++;
        *integral = 0;
        if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
            s->p++;
        if (!digits(s))
            return 0;
    }
    char buf[64];
    size_t n = (size_t)(s->p - a);
    if (n >= sizeof buf)
        return 0;
    memcpy(buf, a, n);
    buf[n] = 0;
    char *e;
    *v = strtod(buf, &e);
    /* an integer literal beyond 2^53 is Jansson's to judge (too big, or inexact) */
    return *e == 0 && isfinite(*v) && !(*integral && fabs(*v) > 9e15);
}

static int word(scan *s, const char *w)
{
    ws(s);
    size_t n = strlen(w);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, w, n))
        return 0;
    s->p += n;
    return 1;
}

static int skip_value(scan *s, int depth)
{
    const char *a;
    size_t n;
    int esc, integral;
    double v;
    ws(s);
    if (s->p >= s->end || depth > 32)
        return 0;
    char c = *s->p;
    if (c == '"')
        return str(s, &a, &n, &esc);
    if (c == 't')
        return word(s, "true");
    if (c == 'f')
        return word(s, "false");
    if (c == 'n')
        return word(s, "null");
    if (c == '[' || c == '{') {
        char close = c == '[' ? ']' : '}';
        s->p++;
        if (lit(s, close))
            return 1;
        do {
            if (c == '{' && !(str(s, &a, &n, &esc) && lit(s, ':')))
                return 0;
            if (!skip_value(s, depth + 1))
                return 0;
        } while (lit(s, ','));
        return lit(s, close);
    }
    return num(s, &v, &integral);
}

static int key_is(const char *a, size_t n, const char *k)
{
    return strlen(k) == n && !memcmp(a, k, n);
}

/* number -> value, null -> NAN; anything else is refused by qlog's rules (the
 * caller hands the line back) */
static int num_or_null(scan *s, double *v, int *integral)
{
    ws(s);
    *integral = 0;
    if (s->p < s->end && (*s->p == '-' || (*s->p >= '0' && *s->p <= '9')))
        return num(s, v, integral);
    *v = NAN;
    return word(s, "null");
}

/* a plain string (no escape) or null, as qlog reads "mode", "est", "phase" */
static int str_or_null(scan *s, const char **a, size_t *n)
{
    int esc;
    ws(s);
    if (s->p < s->end && *s->p == '"')
        return str(s, a, n, &esc) && !esc;
    *a = NULL;
    *n = 0;
    return word(s, "null");
}

/* one q entry: its values as read, judged by qlog_entry_check */
static int scan_q(scan *s, const char *want_name, int metric, float *out)
{
    const char *a;
    size_t n;
    int esc, integral, named = 0, cf;
    qlog_entry_in in;
    qlog_entry_in_init(&in);
    if (!lit(s, '{') || lit(s, '}'))
        return 0;   /* {}: no name */
    do {
        if (!str(s, &a, &n, &esc) || esc || !lit(s, ':'))
            return 0;
        int fl = qlog_float_field(a, n);
        double v;
        if (key_is(a, n, "name")) {
            const char *nm;
            size_t vn;
            if (!str(s, &nm, &vn, &esc) || esc || strlen(want_name) != vn ||
                memcmp(nm, want_name, vn))
                return 0;   /* out of order, escaped or not a string: Jansson path decides */
            named = 1;
        } else if (key_is(a, n, "mode")) {
            if (!str_or_null(s, &in.mode, &in.mode_len))
                return 0;
        } else if (key_is(a, n, "est")) {
            const char *t;
            size_t tn;
            if (!str_or_null(s, &t, &tn))
                return 0;
        } else if (fl >= 0) {
            if (!num_or_null(s, &v, &integral))
                return 0;
            in.f[fl] = v;
        } else if ((cf = qlog_count_field(a, n)) >= 0) {
            if (!num_or_null(s, &v, &integral) || (!isnan(v) && !integral))
                return 0;   /* not an integer: the Jansson path words it */
            in.c_given[cf] = !isnan(v);
            in.c[cf] = in.c_given[cf] ? (long long)v : 0;
        } else if (!skip_value(s, 1)) {
            return 0;
        }
    } while (lit(s, ','));
    if (!lit(s, '}') || !named)
        return 0;
    qlog_row row;
    if (qlog_entry_check(NULL, 0, want_name, &in, &row, NULL))
        return 0;   /* refused by the rules: the Jansson path words it */
    *out = heatmap_metric_value_impl(&row, metric);
    return 1;
}

int heatmap_scan_step_impl(const char *line, size_t len, int n_q, char *const *names,
                           int metric, long *step, int *is_qat, float *row)
{
    scan s = {line, line + len};
    const char *a;
    size_t n;
    int esc, integral, seen_v = 0, seen_type = 0, seen_step = 0, seen_q = 0;
    double v;
    long long step_in = 0;
    const char *phase_s = NULL;   /* null or absent: warmup */
    size_t phase_len = 0;
    *is_qat = 0;
    if (!lit(&s, '{') || lit(&s, '}'))
        return 0;
    do {
        if (!str(&s, &a, &n, &esc) || esc || !lit(&s, ':'))
            return 0;
        if (key_is(a, n, "v")) {
            if (!num(&s, &v, &integral) || !integral || v != QLOG_VERSION)
                return 0;
            seen_v = 1;
        } else if (key_is(a, n, "type")) {
            const char *t;
            size_t tn;
            if (!str(&s, &t, &tn, &esc) || !key_is(t, tn, "step"))
                return 0;
            seen_type = 1;
        } else if (key_is(a, n, "step")) {
            if (!num(&s, &v, &integral) || !integral)   /* num: |v| <= 9e15 */
                return 0;
            step_in = (long long)v;
            seen_step = 1;
        } else if (key_is(a, n, "phase")) {
            if (!str_or_null(&s, &phase_s, &phase_len))
                return 0;
        } else if (key_is(a, n, "q")) {
            if (seen_q || !lit(&s, '['))
                return 0;
            int i = 0;
            if (!lit(&s, ']')) {
                do {
                    if (i >= n_q || !scan_q(&s, names[i], metric, &row[i]))
                        return 0;
                    i++;
                } while (lit(&s, ','));
                if (!lit(&s, ']'))
                    return 0;
            }
            if (i != n_q)
                return 0;
            seen_q = 1;
        } else if (!skip_value(&s, 1)) {
            return 0;
        }
    } while (lit(&s, ','));
    if (!lit(&s, '}'))
        return 0;
    ws(&s);
    int phase;
    if (s.p != s.end || !seen_v || !seen_type || !seen_step || !seen_q ||
        qlog_step_check(NULL, step_in, phase_s, phase_len, &phase, NULL))
        return 0;   /* refused by the rules: the Jansson path words it */
    *step = (long)step_in;
    *is_qat = phase == QLOG_PHASE_QAT;
    return 1;
}
