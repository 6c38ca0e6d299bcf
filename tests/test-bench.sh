#!/bin/sh
# test-bench.sh -- bench/hippo-bench's options and output shape, on the
# built plugin (the figures themselves belong to `make bench`, never to a
# test: nothing here depends on how fast the machine is).
#
# Run by `make check` (the Makefile exports HIPPO_PLUGIN, top_builddir and
# top_srcdir).  By hand:
#   top_builddir=. HIPPO_PLUGIN=plugin/.libs/hippo.so sh tests/test-bench.sh

set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
HIPPO_BENCH=${HIPPO_BENCH:-$top_builddir/bench/hippo-bench}
HIPPO_PLUGIN=${HIPPO_PLUGIN:-$top_builddir/plugin/.libs/hippo.so}
export HIPPO_PLUGIN

. "$top_srcdir/tests/lib.sh"
lib_init test-bench "$HIPPO_BENCH"

bench() {
  "$HIPPO_BENCH" "$@" >"$out" 2>"$err"
  status=$?
}

# expect_rows NAME REGEX COUNT: COUNT lines of the output match REGEX.
expect_rows() {
  n=$(grep -cE -- "$2" "$out")
  if [ "$n" -eq "$3" ]; then pass "$1: $3 lines like /$2/"
  else fail "$1: $n lines like /$2/, expected $3"; fi
}

num='[0-9]+\.[0-9]+'

# A alone, small: the four cases with their figures, the target line.
bench --quick --only A
expect_status "A" 0
expect_rows "A" "^(uniform|log2) p=0\.[56] +$num +$num +[0-9]+ +(-|$num/$num/$num) " 4
expect_rows "A presets" "^(uniform|log2) p=0\.5 +$num +$num +[0-9]+ +[0-9]+ +$num +\(target <= 1\.10: (met|MISSED) by $num\)$" 2
# every target says how far the figure is from it
expect_rows "A" "^uniform p=0\.5 .*<= 35 ns/op: (met|MISSED) by $num$" 1
expect_rows "A summary" "^\| A \| (uniform|log2) p=0\.[56] \| " 4
expect_rows "A summary" "\| (<= 35 ns/op|ADAPTIVE / SUB_SLICES <= 1\.10) \((met|MISSED) by $num\) \|$" 3

# W alone: three counts of waiting slices, each with its figures.
bench --quick --only W
expect_status "W" 0
expect_rows "W" "^## W: " 1
expect_rows "W" "^(0|64|1024) +$num +$num +[0-9]+$" 3
expect_rows "W summary" "^\| W \| (0|64|1024) slices waiting on one user's queued work \| $num ns a pair \(min $num\), queries [0-9]+ \|  \|$" 3

# F on one trace: four layouts x three policies, a target line under the
# default (ADAPTIVE, wanted) and one under VIRTUAL with its default policy,
# which also asks that nothing moved.
bench --only F --trace "$top_srcdir/traces/train.csv"
expect_status "F" 0
expect_rows "F" "^train\.csv +(sub_slices|exclusive_pages|adaptive|virtual) +(never|wanted|explicit-every=1000) +$num +[0-9]+ MB +$num" 12
expect_rows "F default" "^ +target <= 1\.050: (met|MISSED) by $num$" 1
expect_rows "F virtual" "^ +target <= 1\.020, nothing moved: (met|MISSED) by $num(, yet bytes MOVED)?$" 1
expect_rows "F summary" "^\| F \| train\.csv virtual wanted \| reserved/live $num, $num calls/1k \| <= 1\.020, 0 moved \((met|MISSED) by $num(, yet bytes MOVED)?\) \|$" 1
# and the three steps of the VIRTUAL preset (issue 37): steps 1 and 3 with
# their targets
expect_rows "F steps" "^train\.csv +virtual, 3 steps: step 1 $num, $num calls/1k, $num waits/1k; step 3 $num, $num calls/1k, $num waits/1k$" 1
expect_rows "F steps target" "^ +target step 1 <= 500 calls/1k: (met|MISSED) by $num; step 3 <= 50 calls/1k: (met|MISSED) by $num, <= 1 wait/1k: (met|MISSED) by $num; every step <= 1\.020: (met|MISSED) by $num$" 1
expect_rows "F steps summary" "^\| F \| train\.csv virtual, steps 1 and 3 \| $num / $num, $num / $num calls/1k, $num / $num waits/1k \| calls <= 500 / 50: (met|MISSED) / (met|MISSED); waits <= 1: (met|MISSED); ratio <= 1\.020: (met|MISSED) \|$" 1

# V: this plugin against a second copy of itself.  Both are loaded (a
# copy, so the loader gives two instances), the four cases print both
# medians and minima and a ratio, and the summary has four V rows.
cp "$HIPPO_PLUGIN" "$tmp/versus.so"
bench --quick --versus "$tmp/versus.so"
expect_status "V" 0
expect_rows "V" "^hippo-bench: versus $tmp/versus.so \(ABI 1.0\)$" 1
expect_rows "V" "^## V: " 1
expect_rows "V" "^(uniform|log2) p=0\.[56] +$num +$num +$num +$num +[0-9]+\.[0-9]{3}$" 4
expect_rows "V alone" "^## A: " 0
expect_rows "V summary" "^\| V \| (uniform|log2) p=0\.[56] \| $num vs $num ns/op" 4
# the same build places the same way: no note about differing failures
expect_rows "V" "failures differ" 0

# V with other workloads, when asked for.
bench --quick --only A --only V --versus "$tmp/versus.so"
expect_status "A and V" 0
expect_rows "A and V" "^## (A|V): " 2

# Bad input: a clear message and exit 1 (2 for an unknown option).
bench --quick --only V
expect_status "V without --versus" 1
expect_err "V without --versus" "give the other with --versus"
bench --quick --versus "$tmp/none.so"
expect_status "--versus missing file" 1
expect_err "--versus missing file" "$tmp/none.so"
bench --quick --only X
expect_status "--only X" 1
expect_err "--only X" "--only wants A, B, C, E, R, F, V or W, not 'X'"
bench --versus
expect_status "--versus without a value" 1
expect_err "--versus without a value" "--versus needs a value"
bench --frobnicate
expect_status "unknown option" 2
expect_first_err "unknown option" "hippo-bench: unknown option '--frobnicate'"

lib_finish
