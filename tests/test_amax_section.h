/* test_amax_section.h: an independent reader of a train_state.bin's "amax"
 * section (records of u32 name length, name, u32 count, count f32 values), for
 * the tests that check delayed scaling against the stored histories
 * (test_evalquant_delayed.c, test_export.c). */
#ifndef QS_TEST_AMAX_SECTION_H
#define QS_TEST_AMAX_SECTION_H

#include <stdint.h>
#include <string.h>

#include "qs/trainstate.h"

/* The stored history of quantizer `name`, oldest first, into vals (at most max
 * values; *n = its length).  -1 (and *n = -1) when the file, the section or a
 * record of `name` with at most max values is missing. */
static inline int test_amax_history(const char *state_path, const char *name, float *vals, int max, int *n)
{
    trainstate_reader r;
    qs_diag d = {0};
    const void *sec;
    size_t bytes;
    *n = -1;
    if (trainstate_open(&r, state_path, &d))
        return -1;
    if (trainstate_section(&r, "amax", &sec, &bytes, &d) == 0) {
        const unsigned char *p = sec, *end = p + bytes;
        while (end - p >= 8) {
            uint32_t nl, nv;
            memcpy(&nl, p, 4);
            memcpy(&nv, p + 4 + nl, 4);
            if (nl == strlen(name) && !memcmp(p + 4, name, nl) && (int)nv <= max) {
                memcpy(vals, p + 8 + nl, 4 * (size_t)nv);
                *n = (int)nv;
            }
            p += 8 + nl + 4 * (size_t)nv;
        }
    }
    trainstate_close(&r);
    return *n >= 0 ? 0 : -1;
}

#endif
