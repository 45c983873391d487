/* amax.c: amax history ring and the estimator table (see include/qs/amax.h).
 *
 * Design: estimators are stateless functions of (history, current amax), so a
 * replay over a logged amax series reproduces exactly what a run computed, and
 * a resumed run only needs the history ring.  exp-smoothing therefore re-runs
 * the smoothing over the retained ring each call (O(capacity), per quantizer per
 * step, i.e. nothing next to the per-element pass); its seed is the oldest
 * retained value, so after `capacity` steps it differs from an unbounded EMA by
 * (1-ALPHA)^capacity relative, far below float precision for ALPHA >= 0.05.
 */
#include "qs/amax.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qs/mem.h"

int amax_history_init(amax_history *h, int capacity_steps)
{
    memset(h, 0, sizeof *h);
    if (capacity_steps < 1)
        return QS_EINVAL;
    h->vals = qs_calloc((size_t)capacity_steps, sizeof *h->vals);
    if (!h->vals)
        return QS_ENOMEM;
    h->capacity_steps = capacity_steps;
    h->owns = 1;
    return 0;
}

void amax_history_init_view(amax_history *h, float *storage, int capacity_steps)
{
    memset(h, 0, sizeof *h);
    h->vals = storage;
    h->capacity_steps = capacity_steps;
}

void amax_history_free(amax_history *h)
{
    if (h->owns)
        qs_free(h->vals);
    memset(h, 0, sizeof *h);
}

void amax_history_clear(amax_history *h)
{
    h->len_steps = 0;
    h->head = 0;
}

void amax_history_push(amax_history *h, float amax)
{
    h->vals[h->head] = amax;
    h->head = (h->head + 1) % h->capacity_steps;
    if (h->len_steps < h->capacity_steps)
        h->len_steps++;
}

float amax_history_get(const amax_history *h, int age_steps)
{
    int i = h->head - 1 - age_steps;
    if (i < 0)
        i += h->capacity_steps;
    return h->vals[i];
}

/* ---- estimators: one function each, one row each in the table below ---- */

static int est_most_recent(const amax_estimator *e, const amax_history *h, float cur, float *out)
{
    (void)e;
    (void)cur;
    if (h->len_steps < 1)
        return 0;
    *out = amax_history_get(h, 0);
    return 1;
}

static int est_exp_smoothing(const amax_estimator *e, const amax_history *h, float cur, float *out)
{
    (void)cur;
    if (h->len_steps < 1)
        return 0;
    double s = amax_history_get(h, h->len_steps - 1);
    for (int age = h->len_steps - 2; age >= 0; age--)
        s = e->alpha * amax_history_get(h, age) + (1.0 - e->alpha) * s;
    *out = (float)s;
    return 1;
}

static int est_max_window(const amax_estimator *e, const amax_history *h, float cur, float *out)
{
    (void)cur;
    if (h->len_steps < 1)
        return 0;
    int n = e->window_steps < h->len_steps ? e->window_steps : h->len_steps;
    float m = 0.0f;
    /* the newest n values: slots [head - n, head) of the ring, maybe wrapped */
    int first = h->head - n;
    for (int i = first < 0 ? 0 : first; i < h->head; i++)
        m = h->vals[i] > m ? h->vals[i] : m;
    for (int i = first < 0 ? h->capacity_steps + first : h->capacity_steps; i < h->capacity_steps; i++)
        m = h->vals[i] > m ? h->vals[i] : m;
    *out = m;
    return 1;
}

static int est_current(const amax_estimator *e, const amax_history *h, float cur, float *out)
{
    (void)e;
    (void)h;
    *out = cur;
    return 1;
}

enum { PARAM_NONE, PARAM_ALPHA, PARAM_WINDOW };

static const struct {
    int algo;
    const char *name;
    int param;           /* PARAM_*: what ":X" sets */
    int needs_current;
    int (*estimate)(const amax_estimator *, const amax_history *, float, float *);
} est_table[] = {
    {AMAX_ALGO_MOST_RECENT, "most-recent", PARAM_NONE, 0, est_most_recent},
    {AMAX_ALGO_EXP_SMOOTHING, "exp-smoothing", PARAM_ALPHA, 0, est_exp_smoothing},
    {AMAX_ALGO_MAX_WINDOW, "max-window", PARAM_WINDOW, 0, est_max_window},
    {AMAX_ALGO_CURRENT, "current", PARAM_NONE, 1, est_current},
};
#define EST_COUNT (int)(sizeof est_table / sizeof est_table[0])

static int est_row(int algo)
{
    for (int i = 0; i < EST_COUNT; i++)
        if (est_table[i].algo == algo)
            return i;
    return -1;
}

amax_estimator amax_estimator_default(void)
{
    amax_estimator e = {AMAX_ALGO_MAX_WINDOW, AMAX_WINDOW_DEFAULT_STEPS, 0.9};
    return e;
}

#define EST_FORMS "most-recent, exp-smoothing:ALPHA (0 < ALPHA <= 1), max-window[:N] (N >= 1), current"

int amax_estimator_parse(const char *name, amax_estimator *e, qs_diag *d)
{
    *e = amax_estimator_default();
    const char *colon = strchr(name, ':');
    size_t base = colon ? (size_t)(colon - name) : strlen(name);
    for (int i = 0; i < EST_COUNT; i++) {
        if (strlen(est_table[i].name) != base || strncmp(est_table[i].name, name, base) != 0)
            continue;
        e->algo = est_table[i].algo;
        if (!colon) {
            if (est_table[i].param == PARAM_ALPHA)
                return diag_set(d, QS_EINVAL, NULL, -1,
                                "estimator '%s': missing ALPHA, expected exp-smoothing:ALPHA", name);
            return 0;
        }
        const char *p = colon + 1;
        char *end;
        errno = 0;
        if (est_table[i].param == PARAM_ALPHA) {
            double a = strtod(p, &end);
            if (errno || end == p || *end || !(a > 0.0 && a <= 1.0))
                return diag_set(d, QS_EINVAL, NULL, -1,
                                "estimator '%s': expected ALPHA in (0, 1], got '%s'", name, p);
            e->alpha = a;
            return 0;
        }
        if (est_table[i].param == PARAM_WINDOW) {
            long n = strtol(p, &end, 10);
            if (errno || end == p || *end || n < 1 || n > 1000000)
                return diag_set(d, QS_EINVAL, NULL, -1,
                                "estimator '%s': expected window N in [1, 1000000], got '%s'", name, p);
            e->window_steps = (int)n;
            return 0;
        }
        return diag_set(d, QS_EINVAL, NULL, -1, "estimator '%s': '%.*s' takes no parameter", name,
                        (int)base, name);
    }
    return diag_set(d, QS_EINVAL, NULL, -1, "unknown estimator '%s', expected one of: " EST_FORMS,
                    name);
}

void amax_estimator_format(const amax_estimator *e, char *buf, size_t buf_bytes)
{
    int r = est_row(e->algo);
    if (r < 0) {
        snprintf(buf, buf_bytes, "unknown");
        return;
    }
    if (est_table[r].param == PARAM_ALPHA)
        snprintf(buf, buf_bytes, "%s:%.6g", est_table[r].name, e->alpha);
    else if (est_table[r].param == PARAM_WINDOW)
        snprintf(buf, buf_bytes, "%s:%d", est_table[r].name, e->window_steps);
    else
        snprintf(buf, buf_bytes, "%s", est_table[r].name);
}

int amax_estimator_parse_list(const char *list, amax_estimator *e, int max_n, int *n, qs_diag *d)
{
    *n = 0;
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char one[AMAX_NAME_MAX + 16];
        if (len == 0 || len >= sizeof one)
            return diag_set(d, QS_EINVAL, NULL, -1,
                            "estimator list '%s': empty or over-long entry %d", list, *n + 1);
        if (*n >= max_n)
            return diag_set(d, QS_ERANGE, NULL, -1, "estimator list '%s': more than %d entries",
                            list, max_n);
        memcpy(one, p, len);
        one[len] = 0;
        int rc = amax_estimator_parse(one, &e[*n], d);
        if (rc)
            return rc;
        (*n)++;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

int amax_estimator_needs_current(const amax_estimator *e)
{
    int r = est_row(e->algo);
    return r >= 0 && est_table[r].needs_current;
}

int amax_estimate(const amax_estimator *e, const amax_history *h, float current_amax, float *out)
{
    int r = est_row(e->algo);
    if (r < 0)
        return 0;
    return est_table[r].estimate(e, h, current_amax, out);
}
