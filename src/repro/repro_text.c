/* repro_text.c: text helpers of the reproduction's world generator: a growable
 * string buffer and the seeded general-text grammar (short stories in the demo
 * corpus's vocabulary, which the bundled 512-piece tokenizer encodes compactly).
 *
 * General text never mentions a person of the fact table (their surnames occur
 * nowhere in it): it is the continued-pretraining data (the paper's FineWeb role)
 * and the filler of the pretraining mix.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "repro_impl.h"

int repro_buf_printf(repro_buf *b, const char *fmt, ...)
{
    if (b->failed)
        return QS_ENOMEM;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->cap ? b->p + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return QS_EINVAL;
        }
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return 0;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->len <= (size_t)n)
            cap *= 2;
        char *p = qs_realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return QS_ENOMEM;
        }
        b->p = p;
        b->cap = cap;
    }
}

void repro_buf_free(repro_buf *b)
{
    qs_free(b->p);
    memset(b, 0, sizeof *b);
}

int repro_json_write(const json_t *v, const char *path, qs_diag *d)
{
    size_t flags = JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9);
    size_t n = v ? json_dumpb(v, NULL, 0, flags) : 0;
    char *text = n ? qs_malloc(n + 1) : NULL;
    if (!text)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory (or an incomplete JSON value)");
    json_dumpb(v, text, n, flags);
    text[n] = '\n';
    int rc = fileio_write_atomic(path, text, n + 1, d);
    qs_free(text);
    return rc;
}

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
#define PICK(r, a) ((a)[rng_below((r), (uint32_t)N_OF(a))])

static const char *const story_names[] = {"Tom", "Mia", "Ben", "Lily", "Sam",
                                          "Zoe", "Max", "Ana", "Leo", "Ivy"};
static const char *const story_animals[] = {"cat", "dog",  "bird", "fox", "frog",
                                            "duck", "bear", "fish", "owl", "mouse"};
static const char *const story_places[] = {"park", "garden", "forest", "river", "house",
                                           "hill", "beach",  "farm",   "town",  "lake"};
static const char *const story_things[] = {"ball", "kite", "box",  "hat",  "apple",
                                           "cake", "book", "boat", "star", "shell"};
static const char *const story_adjs[] = {"big", "small", "red",   "blue", "happy",
                                         "sad", "old",   "shiny", "soft", "funny"};
static const char *const story_verbs[] = {"found", "saw",    "lost", "made", "liked",
                                          "wanted", "took", "gave", "hid",  "painted"};
static const char *const story_feel[] = {"happy", "sad",  "tired",  "brave",  "scared",
                                         "proud", "calm", "hungry", "sleepy", "glad"};

int repro_story_append(repro_buf *b, rng *r)
{
    const char *n = PICK(r, story_names), *a = PICK(r, story_animals);
    const char *t = PICK(r, story_things);
    repro_buf_printf(b, "Once upon a time, %s went to the %s. ", n, PICK(r, story_places));
    repro_buf_printf(b, "%s %s a %s %s near a %s. ", n, PICK(r, story_verbs), PICK(r, story_adjs),
                     t, a);
    repro_buf_printf(b, "The %s was %s and said, \"Can I play with the %s?\" ", a,
                     PICK(r, story_feel), t);
    repro_buf_printf(b, "%s said, \"Yes, let us play!\" ", n);
    int extra = 1 + (int)rng_below(r, 4);
    for (int i = 0; i < extra; i++) {
        switch (rng_below(r, 5)) {
        case 0: repro_buf_printf(b, "They ran to the %s with the %s. ", PICK(r, story_places), t); break;
        case 1:
            repro_buf_printf(b, "The %s %s a %s %s. ", a, PICK(r, story_verbs), PICK(r, story_adjs),
                             PICK(r, story_things));
            break;
        case 2: repro_buf_printf(b, "%s felt %s. ", n, PICK(r, story_feel)); break;
        case 3:
            repro_buf_printf(b, "It was %u o'clock and the sun was %s. ", 2 + rng_below(r, 8),
                             PICK(r, story_adjs));
            break;
        default:
            repro_buf_printf(b, "\"Look, a %s %s!\" said %s. ", PICK(r, story_adjs),
                             PICK(r, story_animals), n);
            break;
        }
    }
    return repro_buf_printf(b, "At the end of the day, %s and the %s were %s. The end.", n, a,
                            PICK(r, story_feel));
}
