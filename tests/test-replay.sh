#!/bin/sh
# test-replay.sh -- tests of tools/hippo-replay against the built plugin.
#
# Run by `make check` (with $SHELL); the Makefile exports HIPPO_REPLAY (the
# built tool), HIPPO_PLUGIN (the built plugin) and top_srcdir.  By hand:
#   HIPPO_REPLAY=tools/hippo-replay HIPPO_PLUGIN=plugin/.libs/hippo.so \
#     top_srcdir=. sh tests/test-replay.sh
#
# The expected figures (events, reservations, releases, peak live bytes) are
# computed here with awk straight from the CSV, independently of the tool.
# Every file in tests/bad-traces/ starts with `# expect: LINE: REASON`; the
# tool must exit 1, print nothing on stdout and print `FILE:LINE: REASON...`
# on stderr.

set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
HIPPO_REPLAY=${HIPPO_REPLAY:-$top_srcdir/tools/hippo-replay}
HIPPO_PLUGIN=${HIPPO_PLUGIN:-$top_srcdir/plugin/.libs/hippo.so}
export HIPPO_PLUGIN
train=$top_srcdir/traces/train.csv

. "$top_srcdir/tests/lib.sh"
lib_replay_init test-replay

# value KEY: the first word after 'KEY: ' in the summary.
value() {
  sed -n "s/^$1: \\([^ ]*\\).*/\\1/p" "$out" | head -1
}

# figures TRACE: "events reservations releases peak_live" from the CSV.
figures() {
  awk -F, '
    { sub(/\r$/, ""); line = $0; gsub(/[ \t]/, "", line) }
    line == "" || substr(line, 1, 1) == "#" { next }
    !header { header = 1; next }
    {
      n = split(line, f, ",")
      if (f[1] == "a") {
        events++; reserves++
        size[f[2]] = f[3] + 0; live += f[3]
        if (live > peak) peak = live
      } else if (f[1] == "f") {
        events++; releases++
        live -= size[f[2]]; delete size[f[2]]
      }
    }
    END { printf "%.0f %.0f %.0f %.0f\n", events, reserves, releases, peak }
  ' "$1"
}

# expect_figures NAME TRACE: the summary's counts match the CSV's.
expect_figures() {
  set -- "$1" $(figures "$2")
  expect_line "$1" "events: $2"
  expect_line "$1" "reservations: $3"
  expect_line "$1" "releases: $4"
  expect_line "$1" "peak live bytes: $5"
  expect_line "$1" "failed reservations: 0"
  expect_line "$1" "failed releases: 0"
  # hippo holds at least what is live, so the ratio is >= 1.
  reserved=$(value 'peak reserved bytes')
  if [ -n "$reserved" ] &&
     awk -v r="$reserved" -v l="$5" 'BEGIN { exit !(r + 0 >= l + 0) }'; then
    pass "$1: peak reserved bytes $reserved >= peak live bytes $5"
  else
    fail "$1: peak reserved bytes '$reserved' < peak live bytes $5"
  fi
}

# ---- the bundled trace, HOST and DRY, every layout ------------------------
for backend in host dry; do
  for layout in adaptive sub_slices exclusive_pages; do
    name="train.csv --backend $backend --layout $layout"
    replay --backend "$backend" --layout "$layout" "$train"
    expect_status "$name" 0
    expect_line "$name" "backend: $backend"
    expect_line "$name" "layout: $layout"
    expect_line "$name" "streams: 2 (one manager each)"
    expect_figures "$name" "$train"
    allocs=$(value 'driver allocations')
    case $allocs in
      '' | *[!0-9]* | 0) fail "$name: driver allocations '$allocs' is not > 0" ;;
      *) pass "$name: driver allocations $allocs > 0" ;;
    esac
    case $(value 'ns per event') in
      [0-9]*) pass "$name: ns per event is a number" ;;
      *) fail "$name: ns per event is not a number" ;;
    esac
  done
done

# ---- relocation policies and --json ----------------------------------------
# A 44 MiB device, ADAPTIVE: arena pages up to 11 MiB.  1 MiB takes a 2 MiB
# page; 10 MiB grows the arena to 11 MiB pages (the 2 MiB page is outdated);
# a second 10 MiB takes a second 11 MiB page: 24 MiB held, and the next page
# would leave less than a page (24 + 11 > 44 - 11), so `wanted` moves the
# 1 MiB slice into the last MiB of the first 11 MiB page before the 4 KiB
# reservation; explicit-every=1 moves it right after the growth; never
# leaves it.
printf '%s\n' 'op,id,size,stream' 'a,1,1048576,0' 'a,2,10485760,0' \
  'a,3,10485760,0' 'a,4,4096,0' 'f,1,,' 'f,2,,' 'f,3,,' 'f,4,,' \
  >"$tmp/reloc.csv"
for policy in wanted explicit-every=1 never; do
  name="reloc.csv --relocate $policy"
  replay --backend host --capacity 44M --relocate "$policy" --check \
    "$tmp/reloc.csv"
  expect_status "$name" 0
  expect_line "$name" "layout: adaptive"
  expect_line "$name" "relocation policy: $policy"
  if [ "$policy" = never ]; then
    expect_line "$name" "relocations: 0"
    expect_line "$name" "relocated bytes: 0"
  else
    expect_line "$name" "relocations: 1"
    expect_line "$name" "relocated slices: 1"
    expect_line "$name" "relocated bytes: 1048576"
  fi
  expect_line "$name" "out-of-memory reservations: 0"
done
# the default policy is `wanted`
replay --backend host --capacity 44M "$tmp/reloc.csv"
expect_line "reloc.csv (default policy)" "relocation policy: wanted"
expect_line "reloc.csv (default policy)" "relocations: 1"

# --json FILE: one object with the keys README lists
replay --backend dry --capacity 44M --json "$tmp/out.json" "$tmp/reloc.csv"
expect_status "--json" 0
for key in events streams peak_live_bytes peak_reserved_bytes \
    reserved_to_live driver_allocs driver_frees relocated_bytes relocations \
    oom_count wall_seconds ns_per_event pools; do
  if grep -q "^  \"$key\": " "$tmp/out.json"; then pass "--json: key $key"
  else fail "--json: no key $key"; fi
done
for pair in '"events": 8,' '"streams": 1,' '"peak_live_bytes": 22024192,' \
    '"relocated_bytes": 1048576,' '"relocations": 1,' '"oom_count": 0,' \
    '"layout": "adaptive",' '"relocate": "wanted",'; do
  if grep -qF "$pair" "$tmp/out.json"; then pass "--json: $pair"
  else fail "--json: no $pair"; fi
done
if grep -q '"kind": "ARENA", "peak_reserved_bytes": 25165824' "$tmp/out.json"
then pass "--json: the ARENA pool's peak (2 + 11 + 11 MiB)"
else fail "--json: no ARENA pool with a peak of 25165824 B"; fi
# braces balance and the object closes
if [ "$(tr -cd '{' <"$tmp/out.json" | wc -c)" = \
     "$(tr -cd '}' <"$tmp/out.json" | wc -c)" ] &&
   [ "$(tail -n 1 "$tmp/out.json")" = "}" ]; then pass "--json: well formed"
else fail "--json: braces do not balance"; fi
replay --backend dry --quiet --json - "$tmp/reloc.csv"
if grep -q '"reserved_to_live": ' "$out"; then pass "--json -: on stdout"
else fail "--json -: nothing on stdout"; fi
replay --backend dry --json "$tmp/no-such-dir/out.json" "$tmp/reloc.csv"
expect_status "--json into a missing directory" 1
if grep -qF "no-such-dir/out.json" "$err"; then pass "--json: unwritable named"
else fail "--json: the unwritable file is not named"; fi
# ---- where --json and --svg write ------------------------------------------
# Never over the trace; never into one file twice; a failed run leaves a
# path as it was (a file that was there keeps its bytes, a FIFO or device
# stays); a write that fails (a full disk) is exit 1, stdout included.
cp "$tmp/reloc.csv" "$tmp/keep.csv"
replay --backend dry --quiet --json "$tmp/keep.csv" "$tmp/keep.csv"
expect_status "--json naming the trace" 2
expect_first_err "--json naming the trace" \
  "hippo-replay: --json $tmp/keep.csv is the trace itself; it would be overwritten"
if cmp -s "$tmp/keep.csv" "$tmp/reloc.csv"; then pass "the trace is untouched"
else fail "--json overwrote the trace"; fi
ln -s keep.csv "$tmp/keep-link.csv"
replay --backend dry --quiet --svg "$tmp/keep-link.csv" "$tmp/keep.csv"
expect_status "--svg naming the trace through a link" 2
expect_first_err "--svg naming the trace through a link" \
  "hippo-replay: --svg $tmp/keep-link.csv is the trace itself; it would be overwritten"
echo kept >"$tmp/kept.json"
replay --backend dry --capacity 1 --json "$tmp/kept.json" "$tmp/reloc.csv"
expect_status "--json FILE, the device refused" 1
expect_err "--json FILE, the device refused" \
  "hippo-replay: cannot open a dry device: HIPPO_INVALID_ARGUMENT: DRY device: capacity 1 B is below the alignment 256 B"
if [ "$(cat "$tmp/kept.json" 2>/dev/null)" = kept ]; then
  pass "a failed run leaves the file that was there"
else fail "a failed run removed or changed the file that was there"; fi
if ls "$tmp"/kept.json.* >/dev/null 2>&1; then fail "a temporary file is left"
else pass "no temporary file is left"; fi
replay --backend dry --quiet --json "$tmp/kept.json" "$tmp/reloc.csv"
expect_status "--json over a file" 0
if grep -q '"events": 8,' "$tmp/kept.json"; then pass "--json replaced it"
else fail "--json did not replace the file"; fi
ln -s kept.json "$tmp/kept-link.json"
replay --backend dry --quiet --json "$tmp/kept-link.json" "$tmp/reloc.csv"
expect_status "--json through a symbolic link" 0
if [ -L "$tmp/kept-link.json" ] && grep -q '"events": 8,' "$tmp/kept.json"
then pass "--json through a link: the link stays, its file is replaced"
else fail "--json through a link: the link was replaced"; fi
if command -v mkfifo >/dev/null 2>&1 && mkfifo "$tmp/fifo"; then
  cat "$tmp/fifo" >/dev/null &
  replay --backend dry --capacity 1 --json "$tmp/fifo" "$tmp/reloc.csv"
  wait
  expect_status "--json FIFO, the device refused" 1
  expect_err "--json FIFO, the device refused" \
    "hippo-replay: cannot open a dry device: HIPPO_INVALID_ARGUMENT: DRY device: capacity 1 B is below the alignment 256 B"
  if [ -p "$tmp/fifo" ]; then pass "a failed run leaves the FIFO"
  else fail "a failed run removed the FIFO"; fi
fi
replay --backend dry --quiet --json "$tmp/o.out" --svg "$tmp/o.out" \
  "$tmp/reloc.csv"
expect_status "--json and --svg naming one file" 2
expect_first_err "--json and --svg naming one file" \
  "hippo-replay: --json $tmp/o.out and --svg $tmp/o.out name the same file; give each its own"
"$HIPPO_REPLAY" --backend dry --quiet --json /dev/stdout --svg - \
  "$tmp/reloc.csv" >"$out" 2>"$err"
status=$?
expect_status "--json /dev/stdout with --svg - into a file" 2
expect_first_err "--json /dev/stdout with --svg - into a file" \
  "hippo-replay: --json /dev/stdout and --svg - name the same file; give each its own"
replay --backend dry --quiet --json '' "$tmp/reloc.csv"
expect_status "--json ''" 2
expect_first_err "--json ''" "hippo-replay: --json needs a file name (- for stdout)"
replay --backend dry "$tmp/reloc.csv" --json "$tmp/after.json"
expect_status "an option after the trace" 2
expect_first_err "an option after the trace" \
  "hippo-replay: options come before the trace, not after it: '--json'"
if [ -w /dev/full ]; then
  "$HIPPO_REPLAY" --backend dry "$tmp/reloc.csv" >/dev/full 2>"$err"
  status=$?
  expect_status "the summary into a full disk" 1
  expect_err "the summary into a full disk" \
    "hippo-replay: cannot write the summary to stdout:"
  "$HIPPO_REPLAY" --backend dry --quiet --json - "$tmp/reloc.csv" \
    >/dev/full 2>"$err"
  status=$?
  expect_status "--json - into a full disk" 1
  expect_err "--json - into a full disk" "hippo-replay: cannot write stdout:"
fi

# The JSON is valid UTF-8 whatever the trace's bytes (an excerpt of a bad
# line, cut at 40 bytes); a pool names the trace's stream number; the
# ratio is null when nothing was live.
printf 'op,id,size,stream\na,1,\377\376,0\na,2,xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\303\251,0\na,3,4096,7\n' \
  >"$tmp/bytes.csv"
replay --backend dry --quiet --lenient --json - "$tmp/bytes.csv"
expect_status "--json of a trace with bytes that are no UTF-8" 0
if LC_ALL=C grep -q "$(printf '[\200-\377]')" "$out"; then
  fail "--json: a byte above 0x7f was copied (maybe no UTF-8)"
else pass "--json: no raw byte above 0x7f"; fi
expect_out "--json: the bad bytes, each a ?" \
  "first_skipped\": \"$tmp/bytes.csv:2: size '??' is not a number"
expect_out "--json: the trace's stream" '{"stream": 7, "index": 1,'
cp "$tmp/reloc.csv" "$tmp/$(printf 'name\377.csv')"
replay --backend dry --quiet --json - "$tmp/$(printf 'name\377.csv')"
expect_out "--json: a file name that is no UTF-8" \
  "\"trace\": \"$tmp/name\\ufffd.csv\","
printf 'op,id,size,stream\na,1,0,0\nf,1\n' >"$tmp/zero.csv"
replay --backend dry --quiet --json - "$tmp/zero.csv"
expect_out "--json: no live byte" '"reserved_to_live": null,'

for bad in sometimes explicit-every=0 explicit-every= explicit-every=x \
    explicit-every=-1 explicit-every=5x; do
  replay --relocate "$bad" "$tmp/reloc.csv"
  expect_status "--relocate $bad" 2
  expect_first_err "--relocate $bad" \
    "hippo-replay: --relocate takes never, wanted or explicit-every=N (N >= 1), not '$bad'"
done

# ---- --check on small traces ---------------------------------------------
# The first 3000 events of train.csv (frees only refer to earlier lines).
head -n 3003 "$train" >"$tmp/small.csv"
for backend in host dry; do
  replay --backend "$backend" --check "$tmp/small.csv"
  expect_status "small.csv --check --backend $backend" 0
  expect_figures "small.csv --check --backend $backend" "$tmp/small.csv"
done

# Edge cases of the format: comments, blank lines, CRLF, spaces, ids at the
# ends of uint64, an id reused after its free, sparse stream numbers, frees
# with and without the ignored fields, reservations still live at the end.
printf '%s\r\n' '# edge cases' ' op , id , size , stream ' \
  'a,0,1,0' 'a,18446744073709551615,4096,3' '' '  # comment' \
  'a,42,100000,1023' 'f,0' 'a,0,256,3' 'f,18446744073709551615,,' \
  'a, 7 ,65536, 0 ' 'f,42,100000,1023' 'f,7,,5' 'a,42,1048576,1' \
  >"$tmp/edge.csv"
for backend in host dry; do
  name="edge.csv --check --backend $backend"
  replay --backend "$backend" --check "$tmp/edge.csv"
  expect_status "$name" 0
  expect_figures "$name" "$tmp/edge.csv"
  expect_line "$name" "streams: 4 (one manager each)"
  expect_line "$name" "live at end: 2"
done

# The id map: 20000 scattered 64-bit ids live at once, freed in a scrambled
# order, then every id reserved and freed again.
awk 'BEGIN {
  n = 20000; print "op,id,size,stream"
  for (i = 0; i < n; i++) printf "a,%d%012d,%d,%d\n", i + 1, (i * 7919) % 1000003, 256 + i % 777, i % 3
  for (k = 0; k < n; k++) { i = (k * 7) % n; printf "f,%d%012d,,\n", i + 1, (i * 7919) % 1000003 }
  for (i = 0; i < n; i++) printf "a,%d%012d,%d,0\nf,%d%012d,,\n", i + 1, (i * 7919) % 1000003, 64, i + 1, (i * 7919) % 1000003
}' >"$tmp/ids.csv"
replay --backend dry "$tmp/ids.csv"
expect_status "ids.csv --backend dry" 0
expect_figures "ids.csv --backend dry" "$tmp/ids.csv"
expect_line "ids.csv --backend dry" "events: 80000"
expect_line "ids.csv --backend dry" "live at end: 0"

# A trace with a header and no events.
printf '# nothing\nop,id,size,stream\n' >"$tmp/empty-events.csv"
replay --backend dry "$tmp/empty-events.csv"
expect_status "header-only trace" 0
expect_line "header-only trace" "events: 0"
expect_line "header-only trace" "reserved/live ratio: n/a"

# The trace from stdin.
"$HIPPO_REPLAY" --backend dry - <"$tmp/small.csv" >"$out" 2>"$err"
status=$?
expect_status "trace on stdin" 0
expect_figures "trace on stdin" "$tmp/small.csv"

# --quiet prints no summary.
replay --backend dry --quiet "$tmp/small.csv"
expect_status "--quiet" 0
if [ -s "$out" ]; then fail "--quiet: printed a summary"
else pass "--quiet: no summary"; fi

# ---- failed reservations: a device too small for the trace ---------------
replay --backend host --capacity 256M "$train"
expect_status "train.csv --capacity 256M" 0
failures=$(value 'failed reservations')
case $failures in
  '' | *[!0-9]* | 0) fail "--capacity 256M: failed reservations '$failures' is not > 0" ;;
  *) pass "--capacity 256M: $failures failed reservations" ;;
esac
if grep -q '^first failed reservation: .*:[0-9][0-9]*: HIPPO_[A-Z_]*: ' "$out"
then pass "--capacity 256M: names the first failure"
else fail "--capacity 256M: no 'first failed reservation' line"; fi
replay --backend host --capacity 256M --strict --quiet "$train"
expect_status "train.csv --capacity 256M --strict" 3
if grep -q 'HIPPO_' "$err"; then pass "--strict: the reason is on stderr"
else fail "--strict: no reason on stderr"; fi

# ---- HIP: runs on a GPU, fails cleanly without one -----------------------
replay --backend hip "$tmp/small.csv"
case $status in
  0)
    expect_line "--backend hip" "backend: hip"
    expect_line "--backend hip" "driver allocations: n/a"
    expect_figures "--backend hip" "$tmp/small.csv" ;;
  1)
    if [ ! -s "$out" ] && [ -s "$err" ]; then
      pass "--backend hip without a device: exit 1 with a message"
    else fail "--backend hip without a device: no message or a summary"; fi ;;
  *) fail "--backend hip: exit $status, expected 0 or 1" ;;
esac

# ---- malformed traces ----------------------------------------------------
for trace in "$top_srcdir"/tests/bad-traces/*.csv; do
  name=$(basename "$trace")
  expect=$(sed -n '1s/^# expect: //p' "$trace")
  line=${expect%%:*}
  reason=${expect#*: }
  if [ -z "$expect" ] || [ "$line" = "$expect" ]; then
    fail "$name: first line is not '# expect: LINE: REASON'"
    continue
  fi
  replay --backend dry "$trace"
  expect_status "$name" 1
  if grep -qF -- "$trace:$line: $reason" "$err"; then
    pass "$name: stderr says '$trace:$line: $reason'"
  else
    fail "$name: stderr does not say '$trace:$line: $reason'"
  fi
  if [ -s "$out" ]; then fail "$name: printed a summary"
  else pass "$name: no summary"; fi
done

# A UTF-8 byte order mark before the header (some editors write one).
printf '\357\273\277' >"$tmp/bom.csv"
cat "$tmp/small.csv" >>"$tmp/bom.csv"
replay --backend dry "$tmp/bom.csv"
expect_status "trace with a UTF-8 byte order mark" 0
if [ -s "$out" ]; then pass "trace with a byte order mark: summary printed"
else fail "trace with a byte order mark: no summary"; fi

# A missing trace, an empty one.
replay --backend dry "$tmp/no-such-trace.csv"
expect_status "missing trace" 1
if grep -qF "$tmp/no-such-trace.csv" "$err"; then pass "missing trace: named"
else fail "missing trace: the message does not name the file"; fi
: >"$tmp/empty.csv"
replay --backend dry "$tmp/empty.csv"
expect_status "empty trace file" 1
expect_first_err "empty trace file" \
  "$tmp/empty.csv:1: no header line 'op,id,size,stream' and no events; is this a trace? (an RMM log starts with 'Thread,Time,Action,Pointer,Size,Stream')"

# ---- the plugin path -----------------------------------------------------
replay --plugin "$tmp/no-such-plugin.so" --backend dry "$tmp/small.csv"
expect_status "--plugin missing" 1
if grep -qF "no-such-plugin.so" "$err"; then pass "--plugin missing: named"
else fail "--plugin missing: the message does not name the file"; fi
HIPPO_PLUGIN=$tmp/env-plugin.so replay --backend dry "$tmp/small.csv"
expect_status "HIPPO_PLUGIN missing" 1
if grep -qF "env-plugin.so" "$err"; then pass "HIPPO_PLUGIN is used"
else fail "HIPPO_PLUGIN is not used"; fi
HIPPO_PLUGIN=$tmp/env-plugin.so replay --plugin "$HIPPO_PLUGIN" --backend dry \
  "$tmp/small.csv"
expect_status "--plugin wins over HIPPO_PLUGIN" 0
expect_line "--plugin wins over HIPPO_PLUGIN" "plugin: $HIPPO_PLUGIN"

# ---- usage ---------------------------------------------------------------
replay
expect_status "no arguments" 2
if grep -q '^usage: hippo-replay' "$err"; then pass "no arguments: usage line"
else fail "no arguments: no usage line on stderr"; fi
replay --backend gpu "$train"
expect_status "--backend gpu" 2
expect_first_err "--backend gpu" \
  "hippo-replay: --backend takes auto, host, dry or hip, not 'gpu'"
replay --layout round_robin "$train"
expect_status "--layout round_robin" 2
expect_first_err "--layout round_robin" \
  "hippo-replay: --layout: layout spec: 'round_robin' is neither a preset (adaptive, sub_slices, exclusive_pages, virtual) nor a pool kind (sliced, exclusive, direct, arena, virtual); in 'round_robin'"
replay --capacity 12X "$train"
expect_status "--capacity 12X" 2
expect_first_err "--capacity 12X" \
  "hippo-replay: --capacity takes a byte count such as 1073741824 or 1G, not '12X'"
replay --no-such-option "$train"
expect_status "--no-such-option" 2
expect_first_err "--no-such-option" \
  "hippo-replay: unknown option '--no-such-option'"
replay "$train" "$train"
expect_status "two traces" 2
expect_first_err "two traces" "hippo-replay: more than one trace: '$train'"
replay --backend
expect_status "--backend without a value" 2
expect_first_err "--backend without a value" \
  "hippo-replay: option needs an argument: '--backend'"
replay --help
expect_status "--help" 0
if grep -q '^usage: hippo-replay' "$out"; then pass "--help: usage on stdout"
else fail "--help: no usage on stdout"; fi

# A usage error names the option (a short one in a cluster by its letter)
# and says what is missing without an empty quote.
for args in "--backend dry -xq|unknown option '-x'" \
    "--nosuch|unknown option '--nosuch'" \
    "--svg|option needs an argument: '--svg'" "|no trace given"; do
  replay ${args%%|*}
  expect_status "'${args%%|*}'" 2
  expect_first_err "'${args%%|*}'" "hippo-replay: ${args#*|}"
done

lib_finish
