#!/bin/sh
# lint.sh: the project's source rules (make lint), after curl's checksrc.
#  - C files <= 800 lines
#  - no raw malloc/calloc/realloc/free outside src/base/mem.c
#  - no exit( / printf( / puts( outside src/cli, tests, tools
#  - no dependency header (jansson.h, png.h, zstd.h, cblas.h) in include/
#  - dependencies point down (DEPS below): each src/<part>, plots/ and each
#    include/qs header (by the part that implements it) includes qs/X.h only of
#    its own part or of a part below it, and private headers (../<part>/x_impl.h)
#    only of a part below it; a qs/X_test.h (test-only, not API) only from its
#    own part or tests/
#  - tests/ include only qs/ headers and files of tests/ (never ../src, ../plots)
#  - no include cycle among the files of include/, src/ and plots/
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

# ---- include rules: one awk pass over every #include "..." line ----
# The dependency table: a part may include its own headers and those of the
# parts listed after it (every listed part must have its row above: a DAG).
# cli (src/cli) may include any part.  A new part needs a row here.
DEPS='
base:
dist: base
kernels: base
layers: base kernels
model: base kernels layers
quant: base kernels
run: base
tok: base
data: base tok
gate: base
plots: base gate quant
eval: base dist kernels layers model quant run tok data
train: base dist kernels layers model quant run tok data eval gate plots
repro: base dist kernels layers model quant run tok data eval gate plots train
'
# include/qs/X.h belongs to the part whose folder holds X.c (X_test.h: that of
# X.h); headers without a .c of their name are listed here.
HEADERS='
layers.h: layers
lm.h: model
model_train.h: model
model_infer.h: model
plots.h: plots
repro.h: repro
version.h: base
json.h: base
bytes.h: base
dist.h: dist
'
INC_FILES=$(git ls-files -co --exclude-standard 'include/*.h' 'src/*.c' 'src/*.h' 'src/*.def' \
                         'plots/*.c' 'plots/*.h' 'tests/*.c' 'tests/*.h')
{
  for f in $INC_FILES; do echo "F $f"; done
  grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' $INC_FILES /dev/null |
    sed -n 's/^\([^:]*\):\([0-9]*\):[^"]*"\([^"]*\)".*/I \1 \2 \3/p'
} | awk -v deps="$DEPS" -v headers="$HEADERS" '
function norm(p,   n, a, st, k, i, s) {      # a/b/../c -> a/c
  n = split(p, a, "/"); k = 0
  for (i = 1; i <= n; i++) {
    if (a[i] == "" || a[i] == ".") continue
    if (a[i] == ".." && k > 0 && st[k] != "..") { k--; continue }
    st[++k] = a[i]
  }
  s = ""
  for (i = 1; i <= k; i++) s = s (i > 1 ? "/" : "") st[i]
  return s
}
function dir(p) { return sub(/\/[^\/]*$/, "", p) ? p : "." }
function base(p) { sub(/.*\//, "", p); return p }
function part_of(p,   a) {          # a part, "cli", "tests", or "" (not ours)
  if (p ~ /^src\/[^\/]+\//) { split(p, a, "/"); return a[2] }
  if (p ~ /^plots\//) return "plots"
  if (p ~ /^tests\//) return "tests"
  if (p ~ /^include\/qs\/[^\/]+\.h$/) return hpart[p]
  return ""
}
function bad(f, l, msg) { print "lint: " f ":" l ": " msg; status = 1 }
function cyc(path, w,   n, a, i, s, on) {     # the part of path from w on
  n = split(path, a, " "); s = ""; on = 0
  for (i = 1; i <= n; i++) { if (a[i] == w) on = 1; if (on) s = s a[i] " -> " }
  return s w
}
function dfs(v, path,   i, w) {               # colour 1 = on the stack, 2 = done
  color[v] = 1
  for (i = 1; i <= nout[v]; i++) {
    w = out[v, i]
    if (color[w] == 1)
      bad(v, outl[v, i], "include cycle " cyc(path, w) ": a header must not (indirectly) include itself; move what both need into a lower header")
    else if (!color[w])
      dfs(w, path " " w)
  }
  color[v] = 2
}
BEGIN {
  n = split(deps, L, "\n")
  for (i = 1; i <= n; i++) {
    if (L[i] !~ /:/) continue
    p = L[i]; sub(/:.*/, "", p); rest = L[i]; sub(/^[^:]*:/, "", rest)
    m = split(rest, D, " ")
    for (j = 1; j <= m; j++) {
      if (!(D[j] in row))
        bad("tools/lint.sh", "DEPS", "part " p " lists " D[j] ", which has no row above it (the table must stay a DAG)")
      allow[p, D[j]] = 1; list[p] = list[p] " " D[j]
    }
    row[p] = 1
  }
  n = split(headers, L, "\n")
  for (i = 1; i <= n; i++)
    if (L[i] ~ /:/) { h = L[i]; sub(/:.*/, "", h); p = L[i]; sub(/^[^:]*: */, "", p); hmap[h] = p }
}
$1 == "F" {
  file[$2] = 1; files[++nf] = $2
  if ($2 ~ /^src\/[^\/]+\/[^\/]+\.c$/ && $2 !~ /^src\/cli\//) { split($2, a, "/"); cpart[a[3]] = a[2] }
  if ($2 ~ /^plots\/[^\/]+\.c$/) cpart[base($2)] = "plots"
  next
}
$1 == "I" { nr++; sf[nr] = $2; sl[nr] = $3; st[nr] = $4 }
END {
  for (i = 1; i <= nf; i++) {          # every public header maps to a part
    f = files[i]
    if (f !~ /^include\//) continue
    if (f !~ /^include\/qs\/[^\/]+\.h$/) { bad(f, 1, "public headers live in include/qs/"); continue }
    h = base(f); c = h; sub(/\.h$/, "", c); sub(/_test$/, "", c)
    p = (h in hmap) ? hmap[h] : ((c ".h") in hmap) ? hmap[c ".h"] : cpart[c ".c"]
    if (p == "")
      bad(f, 1, "header belongs to no part: name it after the .c that implements it or add it to HEADERS in tools/lint.sh")
    else if (!(p in row))
      bad(f, 1, "header maps to part " p ", which has no row in DEPS in tools/lint.sh")
    hpart[f] = p
  }
  for (i = 1; i <= nf; i++) {          # every library folder has a row
    f = files[i]
    if (f ~ /^src\/[^\/]+$/)
      bad(f, 1, "source files live in a part folder, src/<part>/")
    else if (f ~ /^src\/[^\/]+\// && f !~ /^src\/cli\//) {
      split(f, a, "/")
      if (!(a[2] in row) && !seen[a[2]]++)
        bad(f, 1, "part " a[2] " has no row in DEPS in tools/lint.sh (say which parts it may include)")
    }
  }
  for (k = 1; k <= nr; k++) {
    f = sf[k]; l = sl[k]; t = st[k]
    r = norm(dir(f) "/" t)
    if (!(r in file)) r = (("include/" t) in file) ? "include/" t : ""
    if (r == "") continue              # a system or generated file: not ours
    if (f ~ /^(include|src|plots)\// && r ~ /^(include|src|plots)\//) { out[f, ++nout[f]] = r; outl[f, nout[f]] = l }
    p = part_of(f); q = part_of(r)
    if (p == "tests") {
      if (r !~ /^include\/qs\// && r !~ /^tests\//)
        bad(f, l, "includes " t ": tests reach the library only through include/qs/ (internals: a documented qs/<module>_test.h)")
      continue
    }
    if (r ~ /_test\.h$/ && q != p)
      bad(f, l, "includes " t ": a _test.h header is not API; only tests/ and its own part (" q ") may include it")
    if (r ~ /^tests\//)
      bad(f, l, "includes " t ": library code must not include test files")
    if (p == "" || p == "cli" || q == "" || q == "tests") continue
    if (r ~ /^include\//) {
      if (q != p && !allow[p, q])
        bad(f, l, "includes " t " of part " q ": part " p " may include only its own headers and those of" (list[p] == "" ? " no other part" : list[p]) " (dependencies point down; DEPS in tools/lint.sh)")
    } else if (f ~ /^include\//)
      bad(f, l, "includes " t ": a public header must not include a private one")
    else if (q != p && !allow[p, q])
      bad(f, l, "includes private header " t " of part " q ": part " p " may include private headers only of" (list[p] == "" ? " no other part" : list[p]) " (DEPS in tools/lint.sh)")
  }
  for (i = 1; i <= nf; i++)            # include cycles
    if (!color[files[i]] && nout[files[i]])
      dfs(files[i], files[i])
  exit status
}' || status=1

[ $status = 0 ] && echo "lint: ok"
exit $status
