#!/bin/sh
# fuzz.sh: build every tests/fuzz/fuzz_<target>.c as a libFuzzer binary (clang,
# -fsanitize=fuzzer,address,undefined) and run each for FUZZ_SECONDS (default 30).
#   sh tools/fuzz.sh [target...]        (make fuzz [FUZZ_TARGETS="shard qlog"])
# Seeds come from tests/fuzz/corpus/<target>/ (read-only); new interesting inputs
# go to build/fuzz/corpus/<target>/ (not committed).  A crash, leak or sanitizer
# report is written as tests/fuzz/corpus/<target>/crash-<sha1> (likewise leak-,
# timeout-, oom-), which `make test` then replays: fix the library, keep the file.
# Needs: apt-get install clang libclang-rt-14-dev (libFuzzer runtime).
set -u
FUZZ_CC=${FUZZ_CC:-clang}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
OUT=build/fuzz
FUZZ_SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"

command -v "$FUZZ_CC" >/dev/null 2>&1 || {
  echo "fuzz: $FUZZ_CC not found (apt-get install clang libclang-rt-14-dev)"; exit 2; }
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){(void)d;(void)n;return 0;}\n' \
  > /tmp/qs-fuzz-probe.$$.c
if ! "$FUZZ_CC" -fsanitize=fuzzer /tmp/qs-fuzz-probe.$$.c -o /tmp/qs-fuzz-probe.$$ 2>/dev/null; then
  rm -f /tmp/qs-fuzz-probe.$$.c
  echo "fuzz: $FUZZ_CC cannot link libFuzzer (apt-get install libclang-rt-14-dev)"; exit 2
fi
rm -f /tmp/qs-fuzz-probe.$$.c /tmp/qs-fuzz-probe.$$

# the library, instrumented for coverage (no OpenMP: clang's libomp is not a dependency)
make -s CC="$FUZZ_CC" NO_OMP=1 BUILD=$OUT BIN=$OUT/bin \
  EXTRA_CFLAGS="-fsanitize=fuzzer-no-link $FUZZ_SAN -Wno-unknown-pragmas" $OUT/libqatscope.a || exit 1

PKGS="jansson libpng libzstd openblas"
CFLAGS="-std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -O1 -g -Iinclude $(pkg-config --cflags $PKGS)"
LIBS="$(pkg-config --libs $PKGS) -lm"
TARGETS=${*:-$(ls tests/fuzz/fuzz_*.c | sed 's|tests/fuzz/fuzz_||; s|\.c$||')}
mkdir -p $OUT/bin
failed=""
for t in $TARGETS; do
  bin=$OUT/bin/fuzz_$t
  echo "== fuzz_$t: build"
  # shellcheck disable=SC2086
  "$FUZZ_CC" $CFLAGS -fsanitize=fuzzer $FUZZ_SAN -DFUZZ_TARGET="$t" -o "$bin" \
    tests/fuzz/libfuzzer_main.c tests/fuzz/fuzz_*.c $OUT/libqatscope.a $LIBS || exit 1
  mkdir -p "$OUT/corpus/$t" "tests/fuzz/corpus/$t"
  echo "== fuzz_$t: ${FUZZ_SECONDS}s"
  if ! "$bin" -max_total_time="$FUZZ_SECONDS" -max_len=65536 -rss_limit_mb=2048 -timeout=20 \
       -print_final_stats=1 -artifact_prefix="tests/fuzz/corpus/$t/" \
       "$OUT/corpus/$t" "tests/fuzz/corpus/$t" > "$OUT/fuzz_$t.log" 2>&1; then
    failed="$failed $t"
    echo "fuzz_$t: FAILED, see $OUT/fuzz_$t.log and tests/fuzz/corpus/$t/"
    grep -m3 -E 'ERROR|runtime error|SUMMARY' "$OUT/fuzz_$t.log"
  fi
  grep -E '^stat::(number_of_executed_units|new_units_added)' "$OUT/fuzz_$t.log" | tr '\n' ' '
  echo
done
if [ -n "$failed" ]; then
  echo "fuzz: findings in:$failed (reproducers kept in tests/fuzz/corpus/<target>/)"
  exit 1
fi
echo "fuzz: no findings"
