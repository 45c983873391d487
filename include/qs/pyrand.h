/* pyrand.h: Python's `random.Random(seed)` (MT19937), bit for bit, for the
 * parts the harness uses to pick few-shot examples: seeding from a
 * non-negative integer, getrandbits(k <= 32), _randbelow(n) and sample(n, k).
 * Checked against CPython output (tests/data/tasks/pyrand_*.txt, written by
 * tools/gen_pyrand_fixture.py with /usr/bin/python3).
 */
#ifndef QS_PYRAND_H
#define QS_PYRAND_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"

typedef struct pyrand {
    uint32_t mt[624];
    int mti;
} pyrand;

void pyrand_seed(pyrand *r, uint64_t seed);        /* random.seed(seed) for seed >= 0 */
uint32_t pyrand_u32(pyrand *r);                    /* genrand_uint32 */
/* random.sample(range(n), k) -> out[k] indices, in Python's order.  Uses a
 * scratch of n entries for the pool method; QS_EINVAL if k > n. */
int pyrand_sample(pyrand *r, size_t n, size_t k, size_t *out, qs_diag *d);

#endif
