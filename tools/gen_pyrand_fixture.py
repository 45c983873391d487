#!/usr/bin/python3
"""Write tests/data/tasks/pyrand_sample.txt: CPython random.Random reference
values that src/base/pyrand.c must reproduce bit for bit.

Line formats:
  u32 SEED V1 V2 ... V8            first 8 getrandbits(32) after Random(SEED)
  sample SEED N K CALLS I...       indices of CALLS successive sample(range(N), K)
                                   calls on one Random(SEED), concatenated
Run: /usr/bin/python3 tools/gen_pyrand_fixture.py
"""
import random

out = []
for seed in (0, 1, 42, 1234, 2**32 + 5):
    r = random.Random(seed)
    out.append("u32 %d %s" % (seed, " ".join(str(r.getrandbits(32)) for _ in range(8))))
cases = [(1234, 2251, 25, 3), (1234, 1119, 10, 4), (42, 30, 5, 3), (1234, 70, 10, 2),
         (7, 85, 10, 2), (1234, 5, 5, 2), (3, 1000, 1, 5)]
for seed, n, k, calls in cases:
    r = random.Random(seed)
    idx = []
    for _ in range(calls):
        idx += r.sample(range(n), k)
    out.append("sample %d %d %d %d %s" % (seed, n, k, calls, " ".join(map(str, idx))))
with open("tests/data/tasks/pyrand_sample.txt", "w") as f:
    f.write("\n".join(out) + "\n")
