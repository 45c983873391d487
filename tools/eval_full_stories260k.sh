#!/bin/sh
# eval_full_stories260k.sh: the full integration run (every item of ARC-Easy
# test, ARC-Challenge test, the HellaSwag file and MMLU test) of
# ../shared/models/stories260K on ../shared/bench.  Too slow for `make test`
# (tests/test_eval_model.c scores a subset); run by hand:
#   sh tools/eval_full_stories260k.sh [OUT_DIR] [extra eval flags...]
# Writes OUT_DIR/results.json, OUT_DIR/samples.jsonl.zst, OUT_DIR/summary.txt
# and checks that every item was scored (n-samples effective == original).
set -e
out=${1:-build/eval_full}
[ $# -gt 0 ] && shift
shared=${QS_SHARED:-../shared}
bin=${QS_BIN:-bin/qatscope}
mkdir -p "$out"
"$bin" eval --model "$shared/models/stories260K" \
  --tasks arc_easy,arc_challenge,hellaswag,mmlu --data-dir "$shared/bench" \
  --output "$out/results.json" --log-samples "$out/samples.jsonl.zst" "$@" | tee "$out/summary.txt"
/usr/bin/python3 - "$out/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
want = {"arc_easy": 2376, "arc_challenge": 1172, "hellaswag": 10042}
ns = r["n-samples"]
bad = [t for t, n in want.items() if ns[t]["effective"] != n or ns[t]["original"] != n]
mmlu = sum(v["effective"] for k, v in ns.items() if k.startswith("mmlu_"))
if mmlu != 14042:
    bad.append("mmlu (%d of 14042)" % mmlu)
print("every item scored" if not bad else "NOT every item scored: %s" % bad)
sys.exit(1 if bad else 0)
PY
