/* heatmap_scan.c: fast path for quant.jsonl step records.
 *
 * A 10,000-step log of 100 quantizers is ~270 MB of JSON; building a Jansson tree
 * per line costs seconds (one allocation per value).  This scanner walks a step
 * record in place and pulls out only step, phase and one metric per quantizer.
 *
 * Contract: it returns 1 only for a syntactically valid record it fully understood,
 * with exactly the values the Jansson path (heatmap_data.c) would produce; anything
 * unusual (another record type, escapes in a name, a non-integer step, a name out
 * of header order, malformed JSON) returns 0 and the caller re-reads the line with
 * Jansson, which also produces the error message.  All reads are bounded by `end`.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plot_impl.h"

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

/* raw string body [*a, *a + *n); *esc = 1 when it holds an escape */
static int str(scan *s, const char **a, size_t *n, int *esc)
{
    ws(s);
    if (s->p >= s->end || *s->p != '"')
        return 0;
    *a = ++s->p;
    *esc = 0;
    while (s->p < s->end && *s->p != '"') {
        if ((unsigned char)*s->p < 0x20 || (unsigned char)*s->p >= 0x80)
            return 0;   /* control bytes; non-ASCII is left to Jansson's UTF-8 check */
        if (*s->p == '\\') {
            *esc = 1;
            if (++s->p >= s->end)
                return 0;
        }
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
    return *e == 0 && isfinite(*v);
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

/* number -> value, null -> NAN, anything else (valid) -> NAN, as json_is_number does */
static int num_or_nan(scan *s, double *v)
{
    int integral;
    ws(s);
    if (s->p < s->end && (*s->p == '-' || (*s->p >= '0' && *s->p <= '9')))
        return num(s, v, &integral);
    *v = NAN;
    return skip_value(s, 1);
}

static int scan_q(scan *s, const char *want_name, int metric, float *out)
{
    const char *a;
    size_t n;
    int esc;
    double val = NAN, amax = NAN, pred = NAN;
    if (!lit(s, '{'))
        return 0;
    if (!lit(s, '}')) {
        do {
            if (!str(s, &a, &n, &esc) || esc || !lit(s, ':'))
                return 0;
            if (key_is(a, n, "name")) {
                const char *v;
                size_t vn;
                ws(s);
                if (s->p < s->end && *s->p == '"') {
                    if (!str(s, &v, &vn, &esc) || esc || strlen(want_name) != vn ||
                        memcmp(v, want_name, vn))
                        return 0;   /* out of order or escaped: Jansson path decides */
                } else if (!skip_value(s, 1)) {
                    return 0;
                }
            } else if ((metric == PLOTS_METRIC_CLIP_RATE && key_is(a, n, "clip_rate")) ||
                       (metric == PLOTS_METRIC_UNDERFLOW_RATE && key_is(a, n, "under_rate")) ||
                       (metric == PLOTS_METRIC_QSNR && key_is(a, n, "qsnr_db"))) {
                if (!num_or_nan(s, &val))
                    return 0;
            } else if (metric == PLOTS_METRIC_AMAX_RATIO && key_is(a, n, "amax")) {
                if (!num_or_nan(s, &amax))
                    return 0;
            } else if (metric == PLOTS_METRIC_AMAX_RATIO && key_is(a, n, "pred_amax")) {
                if (!num_or_nan(s, &pred))
                    return 0;
            } else if (!skip_value(s, 1)) {
                return 0;
            }
        } while (lit(s, ','));
        if (!lit(s, '}'))
            return 0;
    }
    if (metric == PLOTS_METRIC_AMAX_RATIO)
        val = pred > 0 && amax >= 0 ? amax / pred : NAN;
    *out = (float)val;
    return 1;
}

int heatmap_scan_step_impl(const char *line, size_t len, int n_q, char *const *names,
                           int metric, long *step, int *is_qat, float *row)
{
    scan s = {line, line + len};
    const char *a;
    size_t n;
    int esc, integral, seen_type = 0, seen_step = 0, seen_q = 0;
    double v;
    *is_qat = 0;
    if (!lit(&s, '{') || lit(&s, '}'))
        return 0;
    do {
        if (!str(&s, &a, &n, &esc) || esc || !lit(&s, ':'))
            return 0;
        if (key_is(a, n, "type")) {
            const char *t;
            size_t tn;
            if (!str(&s, &t, &tn, &esc) || !key_is(t, tn, "step"))
                return 0;
            seen_type = 1;
        } else if (key_is(a, n, "step")) {
            if (!num(&s, &v, &integral) || !integral || fabs(v) > 9e15)
                return 0;
            *step = (long)v;
            seen_step = 1;
        } else if (key_is(a, n, "phase")) {
            ws(&s);
            if (s.p < s.end && *s.p == '"') {
                const char *t;
                size_t tn;
                if (!str(&s, &t, &tn, &esc))
                    return 0;
                *is_qat = !esc && key_is(t, tn, "qat");
            } else if (!skip_value(&s, 1)) {
                return 0;
            }
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
    return s.p == s.end && seen_type && seen_step && seen_q;
}
