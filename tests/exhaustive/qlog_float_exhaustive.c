/* qlog_float_exhaustive.c: every finite fp32 value (or every STRIDE-th bit
 * pattern: `qlog_float_exhaustive 37`) through qlog_float_format must read back
 * (strtof) to the identical float.  The log's replay-exactness rests on this. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qs/qlog.h"

int main(int argc, char **argv)
{
    uint64_t stride = argc > 1 ? strtoull(argv[1], NULL, 10) : 1;
    if (stride < 1) {
        fprintf(stderr, "usage: qlog_float_exhaustive [STRIDE >= 1]\n");
        return 2;
    }
    char buf[32];
    uint64_t n = 0, bad = 0;
    for (uint64_t u = 0; u <= 0xffffffffull; u += stride) {
        uint32_t b = (uint32_t)u;
        float f;
        memcpy(&f, &b, sizeof f);
        if (!isfinite(f))
            continue;
        qlog_float_format(buf, f);
        char *end;
        float back = strtof(buf, &end);
        n++;
        if (back != f || *end) {
            if (bad < 10)
                printf("mismatch: %a -> '%s' -> %a\n", (double)f, buf, (double)back);
            bad++;
        }
    }
    printf("qlog_float_format: %llu finite floats (stride %llu), %llu mismatches: %s\n",
           (unsigned long long)n, (unsigned long long)stride, (unsigned long long)bad,
           bad ? "FAIL" : "PASS");
    return bad ? 1 : 0;
}
