#!/bin/sh
# test-replay-svg.sh -- hippo-replay --svg FILE: the timeline.
#
# Run by `make check`; the Makefile exports HIPPO_REPLAY, HIPPO_PLUGIN and
# top_srcdir.  By hand:
#   HIPPO_REPLAY=tools/hippo-replay HIPPO_PLUGIN=plugin/.libs/hippo.so \
#     top_srcdir=. sh tests/test-replay-svg.sh
#
# Every SVG must be well-formed XML (xmllint --noout, Debian package
# libxml2-utils; without it those checks are skipped and the test ends
# with 77, SKIP, unless something failed) and hold each series by its id
# (tools/timeline.h lists them).  The summary and --json stay as they are
# without --svg but for the timing.  With HIPPO_VALGRIND set (make
# check-valgrind) one replay with --svg runs under valgrind too.

set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
HIPPO_REPLAY=${HIPPO_REPLAY:-$top_srcdir/tools/hippo-replay}
HIPPO_PLUGIN=${HIPPO_PLUGIN:-$top_srcdir/plugin/.libs/hippo.so}
export HIPPO_PLUGIN
train=$top_srcdir/traces/train.csv

. "$top_srcdir/tests/lib.sh"
lib_init test-replay-svg "$HIPPO_REPLAY"

skipped=0
skip() {
  skipped=$((skipped + 1))
  echo "SKIP: $1"
}
if command -v xmllint >/dev/null 2>&1; then have_xmllint=yes
else
  have_xmllint=no
  echo "test-replay-svg: no xmllint (apt-get install libxml2-utils);" \
    "the well-formedness checks are skipped"
fi

# replay ARGS... (lib.sh) runs hippo-replay.

# well_formed NAME FILE: xmllint --noout accepts FILE.
well_formed() {
  if [ $have_xmllint = no ]; then skip "$1: xmllint --noout"; return; fi
  if xmllint --noout "$2" 2>"$tmp/xmllint.err"; then
    pass "$1: well-formed XML"
  else
    fail "$1: not well-formed XML"
    sed 's/^/  xmllint: /' "$tmp/xmllint.err" | head -5
  fi
}

# has NAME FILE TEXT: FILE has TEXT (a fixed string).
has() {
  if grep -qF -- "$3" "$2"; then pass "$1: has $3"
  else fail "$1: lacks $3"; fi
}

# count FILE TEXT: occurrences of TEXT (a fixed string) in FILE.
count() {
  grep -oF -- "$2" "$1" | wc -l | tr -d ' '
}

# points FILE ID: the points of polyline ID.
points() {
  sed -n "s/.*<polyline id=\"$2\"[^>]* points=\"\\([^\"]*\\)\".*/\\1/p" "$1" |
    wc -w | tr -d ' '
}

# value KEY: the first word after 'KEY: ' in the summary.
value() {
  sed -n "s/^$1: \\([^ ]*\\).*/\\1/p" "$out" | head -1
}

# ---- the bundled trace: every series, the title ---------------------------
svg=$tmp/train.svg
name="train.csv --svg"
replay --backend dry --svg "$svg" "$train"
expect_status "$name" 0
well_formed "$name" "$svg"
has "$name" "$svg" '<svg xmlns="http://www.w3.org/2000/svg" version="1.1"'
for id in title subtitle chart grid x-axis y-axis reserved reserved-pool-1 \
    reserved-pool-2 reserved-total live relocations oom legend; do
  has "$name" "$svg" "id=\"$id\""
done
has "$name" "$svg" "<title>hippo-replay: $train (layout adaptive)</title>"
has "$name" "$svg" 'class="pool kind-SLICED"'
has "$name" "$svg" 'class="pool kind-ARENA"'
has "$name" "$svg" '>events replayed</text>'
has "$name" "$svg" '>1.5 GiB</text>'
has "$name" "$svg" '>50k</text>'
has "$name" "$svg" 'live bytes (peak 1.63 GiB)'
has "$name" "$svg" 'relocations that moved slices: 0'
has "$name" "$svg" 'failed reservations: 0'
# The pools that held nothing (the persistent pool, the EXCLUSIVE tail)
# are left out.
if grep -q 'id="reserved-pool-[03]"' "$svg"; then
  fail "$name: draws a pool that held nothing"
else pass "$name: only the pools that held pages"; fi
# At most 2000 intervals: 2001 points a line, and a small file.
n=$(points "$svg" live)
if [ "$n" -ge 100 ] && [ "$n" -le 2001 ]; then pass "$name: $n live points"
else fail "$name: $n live points, expected 100..2001"; fi
size=$(wc -c <"$svg" | tr -d ' ')
if [ "$size" -lt 204800 ]; then pass "$name: $size bytes"
else fail "$name: $size bytes, 200 KiB or more"; fi

# The summary and --json are those of a replay without --svg, but for the
# timing (and the note on the wall time).
replay --backend dry --json "$tmp/plain.json" "$train"
grep -v -e '^wall time:' -e '^ns per event:' "$out" >"$tmp/plain.sum"
replay --backend dry --json "$tmp/svg.json" --svg "$tmp/again.svg" "$train"
grep -v -e '^wall time:' -e '^ns per event:' "$out" >"$tmp/svg.sum"
if cmp -s "$tmp/plain.sum" "$tmp/svg.sum"; then
  pass "--svg: the summary is unchanged"
else
  fail "--svg: the summary changed"
  diff "$tmp/plain.sum" "$tmp/svg.sum" | sed 's/^/  /'
fi
if grep -q '^wall time: .* s (includes the --svg samples)$' "$out"; then
  pass "--svg: the wall time says it includes the samples"
else fail "--svg: the wall time does not mention the samples"; fi
grep -v -e '"wall_seconds"' -e '"ns_per_event"' "$tmp/plain.json" \
  >"$tmp/plain.j"
grep -v -e '"wall_seconds"' -e '"ns_per_event"' "$tmp/svg.json" >"$tmp/svg.j"
if cmp -s "$tmp/plain.j" "$tmp/svg.j"; then pass "--svg: --json is unchanged"
else fail "--svg: --json changed"; fi
# The drawing is the same each time (nothing timed in it).
if cmp -s "$svg" "$tmp/again.svg"; then pass "--svg: the same drawing twice"
else fail "--svg: two replays drew differently"; fi

# ---- stacked pools --------------------------------------------------------
svg=$tmp/sub.svg
name="train.csv --layout sub_slices --svg"
replay --backend dry --layout sub_slices --svg "$svg" "$train"
expect_status "$name" 0
well_formed "$name" "$svg"
for p in 1 2 3 4; do has "$name" "$svg" "id=\"reserved-pool-$p\""; done
has "$name" "$svg" "(layout sub_slices)</title>"
has "$name" "$svg" "pool 3 SLICED 64 MiB pages, up to 16 MiB"

# ---- relocation markers ---------------------------------------------------
# tests/test-replay.sh's reloc.csv: on a 44 MiB device `wanted` and
# explicit-every=1 move the 1 MiB slice once; never moves nothing.
printf '%s\n' 'op,id,size,stream' 'a,1,1048576,0' 'a,2,10485760,0' \
  'a,3,10485760,0' 'a,4,4096,0' 'f,1,,' 'f,2,,' 'f,3,,' 'f,4,,' \
  >"$tmp/reloc.csv"
for policy in wanted explicit-every=1 never; do
  svg=$tmp/reloc-$policy.svg
  name="reloc.csv --relocate $policy --svg"
  replay --backend host --capacity 44M --relocate "$policy" --svg "$svg" \
    "$tmp/reloc.csv"
  expect_status "$name" 0
  well_formed "$name" "$svg"
  if [ "$policy" = never ]; then want=0; else want=1; fi
  n=$(count "$svg" '<line class="relocation"')
  if [ "$n" = "$want" ]; then pass "$name: $n relocation markers"
  else fail "$name: $n relocation markers, expected $want"; fi
  has "$name" "$svg" "relocations that moved slices: $want"
  has "$name" "$svg" "relocate $policy"
done

# ---- out-of-memory markers -------------------------------------------------
svg=$tmp/oom.svg
name="train.csv --capacity 256M --svg"
replay --backend dry --capacity 256M --svg "$svg" "$train"
expect_status "$name" 0
well_formed "$name" "$svg"
failures=$(value 'failed reservations')
has "$name" "$svg" "failed reservations: $failures"
n=$(count "$svg" '<line class="oom"')
case $failures in
  '' | *[!0-9]* | 0) fail "$name: failed reservations '$failures' is not > 0" ;;
  *)
    if [ "$n" -ge 1 ] && [ "$n" -le "$failures" ] && [ "$n" -le 2000 ]; then
      pass "$name: $n failure markers for $failures failures"
    else fail "$name: $n failure markers for $failures failures"; fi ;;
esac

# ---- a long trace: at most 2000 samples -----------------------------------
awk 'BEGIN {
  print "op,id,size,stream"
  for (i = 0; i < 60000; i++) printf "a,%d,%d,%d\n", i, 4096 + (i % 97) * 256, i % 2
  for (i = 0; i < 60000; i++) printf "f,%d,,\n", i
}' >"$tmp/long.csv"
svg=$tmp/long.svg
name="120000 events --svg"
replay --backend dry --quiet --svg "$svg" "$tmp/long.csv"
expect_status "$name" 0
well_formed "$name" "$svg"
n=$(points "$svg" live)
if [ "$n" -le 2001 ]; then pass "$name: $n live points"
else fail "$name: $n live points, more than 2001"; fi

# ---- XML special characters and odd bytes in the trace's path -------------
odd="$tmp/a&b<c>\"d'e	$(printf '\377')f.csv"
cp "$tmp/reloc.csv" "$odd"
svg=$tmp/odd.svg
name="a trace path with & < > \" ' TAB 0xff"
replay --backend dry --quiet --svg "$svg" "$odd"
expect_status "$name" 0
well_formed "$name" "$svg"
has "$name" "$svg" "a&amp;b&lt;c&gt;&quot;d&apos;e??f.csv (layout adaptive)</title>"

# A spec's canonical text in the title.
svg=$tmp/spec.svg
name="--layout spec --svg"
replay --backend dry --quiet --layout ' sliced:page=16M, slice=4M;arena:page=2M,slice=1G' \
  --svg "$svg" "$train"
expect_status "$name" 0
well_formed "$name" "$svg"
has "$name" "$svg" "(layout sliced:page=16M,slice=4M;arena:page=2M,slice=1G)</title>"
has "$name" "$svg" "pool 2 ARENA 2 MiB..1 GiB pages"

# ---- edge cases ------------------------------------------------------------
printf '# nothing\nop,id,size,stream\n' >"$tmp/empty-events.csv"
svg=$tmp/empty.svg
name="header-only trace --svg"
replay --backend dry --svg "$svg" "$tmp/empty-events.csv"
expect_status "$name" 0
well_formed "$name" "$svg"
has "$name" "$svg" ">no events</text>"
has "$name" "$svg" 'id="live"'

name="--svg - (stdout)"
replay --backend dry --quiet --svg - "$tmp/reloc.csv"
expect_status "$name" 0
well_formed "$name" "$out"
has "$name" "$out" '</svg>'

# Without --quiet the summary goes to stderr: stdout is the SVG alone.
name="--svg - without --quiet"
replay --backend dry --svg - "$tmp/reloc.csv"
expect_status "$name" 0
well_formed "$name" "$out"
if grep -q '^events: ' "$err" && ! grep -q '^events: ' "$out"; then
  pass "$name: the summary on stderr"
else fail "$name: the summary is not on stderr alone"; fi
name="--json - without --quiet"
replay --backend dry --json - "$tmp/reloc.csv"
expect_status "$name" 0
if [ "$(head -c 1 "$out")" = "{" ] && [ "$(tail -n 1 "$out")" = "}" ] &&
   grep -q '^events: ' "$err"; then
  pass "$name: the JSON alone on stdout, the summary on stderr"
else fail "$name: stdout is not the JSON alone"; head -3 "$out"; fi
replay --backend dry --json - --svg - "$tmp/reloc.csv"
expect_status "--json - --svg -: both on stdout" 2
if [ ! -s "$out" ] && grep -qF -- "--json - and --svg - would both write to stdout" "$err"
then pass "--json - --svg -: refused, why said"
else fail "--json - --svg -: no usage message"; fi

# A path that cannot be written fails before the replay: no summary.
name="--svg into a missing directory"
replay --backend dry --svg "$tmp/no-such-dir/x.svg" "$tmp/reloc.csv"
expect_status "$name" 1
if grep -qF "cannot write $tmp/no-such-dir/x.svg" "$err" &&
   grep -qF "nothing was replayed" "$err"; then
  pass "$name: the file is named"
else fail "$name: the file is not named"; fi
if [ -s "$out" ]; then fail "$name: a summary although nothing was replayed"
else pass "$name: nothing on stdout"; fi
# A replay that fails after the files were opened leaves none behind.
name="--svg and --json, a plugin that does not load"
rm -f "$tmp/gone.svg" "$tmp/gone.json"
replay --backend dry --plugin "$tmp/no-such-plugin.so" --svg "$tmp/gone.svg" \
  --json "$tmp/gone.json" "$tmp/reloc.csv"
expect_status "$name" 1
expect_err "$name" "hippo-replay: hippo_load: cannot load '$tmp/no-such-plugin.so'"
if [ -e "$tmp/gone.svg" ] || [ -e "$tmp/gone.json" ]; then
  fail "$name: a file is left behind"
else pass "$name: no file left behind"; fi

replay --backend dry "$tmp/reloc.csv" --svg
expect_status "--svg without a value" 2
# (after the trace, the option is refused for its place before its value
# is looked for; test-replay.sh has --svg alone, "option needs an argument")
expect_first_err "--svg without a value" \
  "hippo-replay: options come before the trace, not after it: '--svg'"
replay --help
if grep -q -- '--svg FILE' "$out"; then pass "--help: --svg"
else fail "--help: no --svg"; fi

# ---- the virtual layout: what it holds is its mapped granules -------------
name="--svg, virtual"
"$HIPPO_REPLAY" --backend dry --capacity 141G --layout virtual --quiet \
  --svg "$tmp/virtual.svg" "$train" >"$out" 2>"$err"
status=$?
expect_status "$name" 0
well_formed "$name" "$tmp/virtual.svg"
has "$name" "$tmp/virtual.svg" "reserved bytes (VIRTUAL: mapped), all pools"
has "$name" "$tmp/virtual.svg" "pool 1 VIRTUAL, mapped granules of 2 MiB"

# ---- the example in README ------------------------------------------------
doc=$top_srcdir/docs/replay-train.svg
name="docs/replay-train.svg"
if [ -f "$doc" ]; then
  well_formed "$name" "$doc"
  has "$name" "$doc" "<title>hippo-replay: traces/train.csv"
  size=$(wc -c <"$doc" | tr -d ' ')
  if [ "$size" -lt 204800 ]; then pass "$name: $size bytes"
  else fail "$name: $size bytes, 200 KiB or more"; fi
else
  fail "$name: missing"
fi

# ---- valgrind (make check-valgrind) ----------------------------------------
if [ -n "${HIPPO_VALGRIND:-}" ] && command -v valgrind >/dev/null 2>&1; then
  head -n 3003 "$train" >"$tmp/small.csv"
  name="valgrind: --svg"
  valgrind --quiet --error-exitcode=99 --leak-check=full \
    --errors-for-leak-kinds=definite "$HIPPO_REPLAY" --backend dry --quiet \
    --layout 'sliced:page=4M,slice=1M;arena:page=2M,slice=1G' \
    --svg "$tmp/vg.svg" "$tmp/small.csv" >"$out" 2>"$err"
  status=$?
  expect_status "$name" 0
fi

[ "$skipped" -eq 0 ] || echo "($skipped checks skipped)"
lib_finish || exit 1
[ "$skipped" -eq 0 ] || exit 77
exit 0
