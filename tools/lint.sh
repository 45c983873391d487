#!/bin/sh
# lint.sh: the project's source rules (make lint), after curl's checksrc.
#  - C files <= 800 lines
#  - no raw malloc/calloc/realloc/free outside src/base/mem.c
#  - no exit( / printf( / puts( outside src/cli, tests, tools
#  - no dependency header (jansson.h, png.h, zstd.h, cblas.h) in include/
status=0
fail() { echo "lint: $*"; status=1; }

for f in $(git ls-files '*.c' '*.h'); do
  n=$(wc -l < "$f")
  [ "$n" -gt 800 ] && fail "$f has $n lines (limit 800): split it by concept"
done
for f in $(git ls-files 'src/*.c' 'plots/*.c' | grep -v '^src/cli/' | grep -v '^src/base/mem.c$'); do
  grep -nE '(^|[^_a-z])(malloc|calloc|realloc|free)\(' "$f" | grep -v 'qs_' | while read -r l; do
    echo "lint: $f:$l: raw allocation, use qs_malloc/qs_free"; done | grep . && status=1
  grep -nE '(^|[^_a-z.])(exit|printf|puts)\(' "$f" | while read -r l; do
    echo "lint: $f:$l: library code must not exit or print to stdout"; done | grep . && status=1
done
for f in $(git ls-files 'include/*.h'); do
  grep -nE '#include *<(jansson|png|zstd|cblas)\.h>' "$f" && fail "$f includes a dependency header"
done
[ $status = 0 ] && echo "lint: ok"
exit $status
