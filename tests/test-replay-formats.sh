#!/bin/sh
# test-replay-formats.sh -- tools/hippo-replay's input side: RMM's
# logging_resource_adaptor logs (tests/traces-rmm/ and generated ones),
# format detection, --lenient on every file of tests/bad-traces/ and on
# files with several bad lines, the DRY fallback for a trace larger than
# the HOST device, --quiet, and the progress line on a terminal.
#
# Run by `make check` (with $SHELL); the Makefile exports HIPPO_REPLAY,
# HIPPO_PLUGIN and top_srcdir.  By hand:
#   HIPPO_REPLAY=tools/hippo-replay HIPPO_PLUGIN=plugin/.libs/hippo.so \
#     top_srcdir=. sh tests/test-replay-formats.sh
#
# The expected figures of an RMM log (events, reservations, releases, peak
# live bytes, streams, allocate failures, lines of pointer 0) are computed
# here with awk straight from the CSV, independently of the tool.

set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
HIPPO_REPLAY=${HIPPO_REPLAY:-$top_srcdir/tools/hippo-replay}
HIPPO_PLUGIN=${HIPPO_PLUGIN:-$top_srcdir/plugin/.libs/hippo.so}
export HIPPO_PLUGIN
rmm_header='Thread,Time,Action,Pointer,Size,Stream'

. "$top_srcdir/tests/lib.sh"
lib_replay_init test-replay-formats

# rmm_figures LOG: "events reservations releases peak_live streams
# failures nulls" of an RMM log.  Pointers and streams are hexadecimal,
# 0x optional: compared without 0x and leading zeros ("" is pointer 0);
# "(nil)" (glibc's %p of nullptr) is pointer 0.
rmm_figures() {
  awk -F, '
    { sub(/\r$/, "") }
    /^[ \t]*(#|$)/ { next }
    !header { header = 1; next }
    {
      for (i = 1; i <= NF; i++) gsub(/^[ \t]+|[ \t]+$/, "", $i)
      p = tolower($4); sub(/^0x/, "", p); sub(/^0+/, "", p)
      if (p == "(nil)") p = ""
      s = tolower($6); sub(/^0x/, "", s); sub(/^0+/, "", s)
      if ($3 == "allocate failure") { failures++; next }
      if (p == "") { nulls++; next }
      events++
      if ($3 == "allocate") {
        reserves++; size[p] = $5; live += $5
        if (live > peak) peak = live
        if (!(s in seen)) { seen[s] = 1; streams++ }
      } else {
        releases++; live -= size[p]; delete size[p]
      }
    }
    END { printf "%.0f %.0f %.0f %.0f %.0f %.0f %.0f\n", events, reserves,
      releases, peak, streams, failures, nulls }
  ' "$1"
}

# expect_rmm NAME LOG: the summary's figures match the log's.
expect_rmm() {
  set -- "$1" $(rmm_figures "$2")
  expect_line "$1" "format: rmm ($rmm_header)"
  expect_line "$1" "events: $2"
  expect_line "$1" "reservations: $3"
  expect_line "$1" "releases: $4"
  expect_line "$1" "peak live bytes: $5"
  expect_line "$1" "streams: $6 (one manager each)"
  expect_line "$1" "allocate failures: $7 (not replayed)"
  expect_line "$1" "null pointer lines: $8 (not replayed)"
  expect_line "$1" "failed reservations: 0"
  expect_line "$1" "failed releases: 0"
}

# ---- RMM logs: the fixtures, both pointer styles, HOST and DRY -----------
# rmm-fmt.csv is RMM before 24.12 (fmt: 0x7f..., 0x0), with a failure, a
# pointer freed and allocated again on another stream, a free on another
# stream than its allocation, and a 0-byte request (pointer 0 and its
# free); rmm-llx.csv is RMM since (%llx: 7f..., 0), CRLF, spaces around
# fields, upper-case hex, `deallocate`, a comment and a blank line;
# rmm-p.csv is RMM now (%p: 0x7f..., and (nil) for a failure's pointer
# and a 0-byte request's).
for log in "$top_srcdir"/tests/traces-rmm/*.csv; do
  for backend in host dry; do
    name="$(basename "$log") --backend $backend --check"
    replay --backend "$backend" --check "$log"
    expect_status "$name" 0
    expect_rmm "$name" "$log"
  done
done
# The figures the awk above must find (so a broken awk cannot agree with a
# broken tool): by hand from the files.
set -- $(rmm_figures "$top_srcdir/tests/traces-rmm/rmm-fmt.csv")
if [ "$*" = "9 5 4 4196864 3 1 2" ]; then pass "rmm-fmt.csv: awk's figures"
else fail "rmm-fmt.csv: awk's figures are '$*'"; fi
set -- $(rmm_figures "$top_srcdir/tests/traces-rmm/rmm-llx.csv")
if [ "$*" = "7 4 3 74028 2 2 0" ]; then pass "rmm-llx.csv: awk's figures"
else fail "rmm-llx.csv: awk's figures are '$*'"; fi
set -- $(rmm_figures "$top_srcdir/tests/traces-rmm/rmm-p.csv")
if [ "$*" = "6 3 3 69632 2 1 2" ]; then pass "rmm-p.csv: awk's figures"
else fail "rmm-p.csv: awk's figures are '$*'"; fi

# --json: the format and the failures.
replay --backend dry --quiet --json - "$top_srcdir/tests/traces-rmm/rmm-fmt.csv"
for pair in '"format": "rmm",' '"allocate_failures": 1,' \
    '"null_pointer_lines": 2,' '"skipped_lines": 0,' '"first_skipped": null,' \
    '"backend_note": null,' '"events": 9,' '"streams": 3,' \
    '"peak_live_bytes": 4196864,'; do
  if grep -qF "$pair" "$out"; then pass "rmm --json: $pair"
  else fail "rmm --json: no $pair"; fi
done

# A generated log: 30,000 calls of 8 threads on 7 streams, pointers from a
# pool of 500 addresses reused as soon as freed, 1 in 50 allocations
# failing; HOST with --check after every event.
awk -v h="$rmm_header" 'BEGIN {
  print h; x = 7; n = 0
  for (k = 0; k < 30000; k++) {
    x = (x * 75 + 74) % 65537
    slot = x % 500; t = 140000 + x % 8
    if (live[slot]) {
      printf "%d,10:00:%02d.%06d,free,0x7f00%08x,%d,0x%x\n", t, k % 60, k, slot * 65536, live[slot], 21920 + x % 7
      live[slot] = 0
    } else if (x % 50 == 0) {
      printf "%d,10:00:%02d.%06d,allocate failure,0x0,1099511627776,0x%x\n", t, k % 60, k, 21920 + x % 7
    } else {
      live[slot] = 256 + x % 60000
      printf "%d,10:00:%02d.%06d,allocate,0x7f00%08x,%d,0x%x\n", t, k % 60, k, slot * 65536, live[slot], 21920 + x % 7
    }
  }
}' >"$tmp/rmm-gen.csv"
replay --backend host --check "$tmp/rmm-gen.csv"
expect_status "generated RMM log --check" 0
expect_rmm "generated RMM log --check" "$tmp/rmm-gen.csv"

# Streams: 1024 distinct values are trace streams 0..1023; a 1025th is
# refused at its line (1026: the header is line 1), or skipped with
# --lenient (and the free of its pointer then too).
awk -v h="$rmm_header" -v n=1025 'BEGIN { print h
  for (i = 0; i < n; i++) printf "1,10:00:00.%06d,allocate,0x%x,256,0x%x\n", i, 4096 * (i + 1), 28672 + i
  for (i = 0; i < n; i++) printf "1,10:00:01.%06d,free,0x%x,256,0x0\n", i, 4096 * (i + 1) }' \
  >"$tmp/rmm-1025.csv"
head -n 1025 "$tmp/rmm-1025.csv" >"$tmp/rmm-1024.csv"
replay --backend dry "$tmp/rmm-1024.csv"
expect_status "RMM, 1024 streams" 0
expect_line "RMM, 1024 streams" "streams: 1024 (one manager each)"
replay --backend dry "$tmp/rmm-1025.csv"
expect_status "RMM, 1025 streams" 1
if [ ! -s "$out" ] && grep -qF "$tmp/rmm-1025.csv:1026: stream 0x7400 is one stream too many" "$err"
then pass "RMM, 1025 streams: refused at line 1026"
else fail "RMM, 1025 streams: not refused at line 1026"; fi
replay --backend dry --lenient "$tmp/rmm-1025.csv"
expect_status "RMM, 1025 streams --lenient" 0
expect_line "RMM, 1025 streams --lenient" "streams: 1024 (one manager each)"
expect_line "RMM, 1025 streams --lenient" "events: 2048"
if grep -q "^skipped: 2 lines (first: $tmp/rmm-1025.csv:1026: stream 0x7400 is one stream too many" "$out"
then pass "RMM, 1025 streams --lenient: 2 lines skipped, the first named"
else fail "RMM, 1025 streams --lenient: no 'skipped: 2 lines (first: ...:1026: ...'"; fi

# ---- hippo's format: what changed with the formats -----------------------
# Only reserving streams count: a trace on stream 5 alone has 1 stream
# (a release used to count stream 0).
printf 'op,id,size,stream\na,1,4096,5\nf,1\n' >"$tmp/stream5.csv"
replay --backend dry "$tmp/stream5.csv"
expect_status "a trace on stream 5" 0
expect_line "a trace on stream 5" "streams: 1 (one manager each)"
expect_line "a trace on stream 5" "format: hippo (op,id,size,stream)"
replay --backend dry --quiet --json - "$tmp/stream5.csv"
if grep -qF '"format": "hippo",' "$out"; then pass "--json: format hippo"
else fail "--json: no \"format\": \"hippo\""; fi

# ---- --lenient on every malformed trace ----------------------------------
# Each file of tests/bad-traces/ has one bad line (its `# expect: LINE:
# REASON`): --lenient skips it, replays the rest and names it in the
# summary -- but for a file with no header or an unknown one, which
# --lenient refuses as before.
for trace in "$top_srcdir"/tests/bad-traces/*.csv; do
  name="$(basename "$trace") --lenient"
  expect=$(sed -n '1s/^# expect: //p' "$trace")
  line=${expect%%:*}
  reason=${expect#*: }
  replay --backend dry --lenient "$trace"
  case $reason in
    'expected the header line'* | 'unknown header'*)
      expect_status "$name" 1
      if [ ! -s "$out" ] && grep -qF -- "$trace:$line: $reason" "$err"; then
        pass "$name: refused, '$trace:$line: $reason'"
      else fail "$name: not refused with '$trace:$line: $reason'"; fi
      continue ;;
  esac
  expect_status "$name" 0
  if grep -qF -- "skipped: 1 line (first: $trace:$line: $reason" "$out"; then
    pass "$name: skipped: 1 line (first: $trace:$line: ...)"
  else
    fail "$name: no 'skipped: 1 line (first: $trace:$line: $reason'"
  fi
  if [ -s "$err" ]; then fail "$name: printed on stderr"
  else pass "$name: nothing on stderr"; fi
done

# Several bad lines: each skipped and counted; what they would have
# reserved or freed is not replayed (the free of a skipped reservation is
# skipped in turn); the first is named, in the summary and in --json.
printf '%s\n' 'op,id,size,stream' 'a,1,4096,0' 'a,2,12ab,0' 'f,2' 'x,3' \
  'a,3,1000,1' 'f,1' 'f,1' 'a,4,-1,0' 'f,3,,' >"$tmp/several.csv"
replay --backend dry --lenient --json "$tmp/several.json" "$tmp/several.csv"
expect_status "several bad lines --lenient" 0
expect_line "several bad lines --lenient" "events: 4"
expect_line "several bad lines --lenient" "peak live bytes: 5096"
expect_line "several bad lines --lenient" \
  "skipped: 5 lines (first: $tmp/several.csv:3: size '12ab' is not a number; write it as plain decimal digits)"
for pair in '"skipped_lines": 5,' \
    "\"first_skipped\": \"$tmp/several.csv:3: size '12ab' is not a number; write it as plain decimal digits\","; do
  if grep -qF "$pair" "$tmp/several.json"; then pass "--lenient --json: $pair"
  else fail "--lenient --json: no $pair"; fi
done
# ... and without --lenient the first one stops it.
replay --backend dry "$tmp/several.csv"
expect_status "several bad lines" 1
if grep -qxF "$tmp/several.csv:3: size '12ab' is not a number; write it as plain decimal digits" "$err"
then pass "several bad lines: the first refused"
else fail "several bad lines: the first is not the message"; fi
# No bad line: "skipped: 0 lines".
replay --backend dry --lenient "$tmp/stream5.csv"
expect_line "--lenient, nothing bad" "skipped: 0 lines"
# A NUL byte and an overlong line are skipped too; an RMM log likewise.
{ printf 'op,id,size,stream\na,1,4096,0\na,2,\000,0\n'
  awk 'BEGIN { printf "#"; for (i = 0; i < 5000; i++) printf "c"; printf "\n" }'
  printf 'f,1\n'; } >"$tmp/nul-long.csv"
replay --backend dry --lenient "$tmp/nul-long.csv"
expect_status "NUL and overlong lines --lenient" 0
expect_line "NUL and overlong lines --lenient" "events: 2"
expect_line "NUL and overlong lines --lenient" \
  "skipped: 2 lines (first: $tmp/nul-long.csv:3: byte 5 of the line is NUL; is this a text file?)"
{ cat "$top_srcdir/tests/traces-rmm/rmm-fmt.csv"
  printf '%s\n' '1,10:00:00.1,allocate,0xzz,1,0x0' '1,10:00:00.2,free,0x7f8a50000000,4194304,0x0' \
    '1,10:00:00.3,free,0x7f8a50000000,4194304,0x0'; } >"$tmp/rmm-bad.csv"
replay --backend dry --lenient "$tmp/rmm-bad.csv"
expect_status "RMM log with bad lines --lenient" 0
expect_line "RMM log with bad lines --lenient" "events: 10"
expect_line "RMM log with bad lines --lenient" \
  "skipped: 2 lines (first: $tmp/rmm-bad.csv:14: pointer '0xzz' is not a hexadecimal number; RMM writes it as 0x7f3a4c000000 or 7f3a4c000000)"

# ---- a trace larger than the HOST device: DRY ----------------------------
# Three 8 GiB reservations live at once: 24 GiB, more than HOST's default
# 16 GiB.  Left to AUTO with no GPU (AUTO picks HOST), it replays on DRY
# and says so; with a GPU AUTO picks HIP and none of this applies.
printf '%s\n' 'op,id,size,stream' 'a,1,8589934592,0' 'a,2,8589934592,0' \
  'a,3,8589934592,0' 'f,1' 'f,2' 'f,3' >"$tmp/big.csv"
note="the trace's peak live 25769803776 B exceeds the HOST capacity 17179869184 B"
replay --json "$tmp/big.json" "$tmp/big.csv"
if grep -qx 'backend: hip' "$out"; then
  echo "SKIP: the DRY fallback: AUTO chose HIP here (a GPU)"
else
  expect_status "24 GiB trace, AUTO" 0
  expect_line "24 GiB trace, AUTO" "backend: dry ($note)"
  expect_line "24 GiB trace, AUTO" "failed reservations: 0"
  expect_line "24 GiB trace, AUTO" "peak live bytes: 25769803776"
  if grep -qF "hippo-replay: note: $note: replaying on DRY, capacity 68719476736 B" "$err"
  then pass "24 GiB trace, AUTO: the note on stderr"
  else fail "24 GiB trace, AUTO: no note on stderr"; fi
  for pair in '"backend": "dry",' "\"backend_note\": \"$note\","; do
    if grep -qF "$pair" "$tmp/big.json"; then pass "24 GiB trace --json: $pair"
    else fail "24 GiB trace --json: no $pair"; fi
  done
  # --quiet: no note, no summary; the JSON still says why.
  replay --quiet --json "$tmp/big.json" "$tmp/big.csv"
  expect_status "24 GiB trace, AUTO --quiet" 0
  if [ -s "$out" ] || [ -s "$err" ]; then
    fail "24 GiB trace, AUTO --quiet: printed something"
  else pass "24 GiB trace, AUTO --quiet: nothing printed"; fi
  if grep -qF "\"backend_note\": \"$note\"," "$tmp/big.json"; then
    pass "24 GiB trace --quiet --json: backend_note"
  else fail "24 GiB trace --quiet --json: no backend_note"; fi
  # A capacity given keeps HOST (that device is what was asked for).
  replay --capacity 32G "$tmp/big.csv"
  expect_status "24 GiB trace, AUTO --capacity 32G" 0
  expect_line "24 GiB trace, AUTO --capacity 32G" "backend: host"
  # A trace that fits stays on HOST.
  replay "$tmp/stream5.csv"
  expect_line "a small trace, AUTO" "backend: host"
fi
# --backend host is obeyed: the reservations beyond 16 GiB fail there.
replay --backend host "$tmp/big.csv"
expect_status "24 GiB trace --backend host" 0
expect_line "24 GiB trace --backend host" "backend: host"
expect_line "24 GiB trace --backend host" "failed reservations: 1"

# ---- --quiet and the progress line -----------------------------------------
# 1,000,002 events: a long trace.  stderr is no terminal here, so no
# progress line; under script(1) it is one, and the progress line is drawn
# (after a \r) -- unless --quiet.
awk 'BEGIN { print "op,id,size,stream"
  for (i = 0; i < 500001; i++) printf "a,%d,256,%d\nf,%d\n", i, i % 3, i }' \
  >"$tmp/long.csv"
replay --backend dry "$tmp/long.csv"
expect_status "1,000,002 events" 0
expect_line "1,000,002 events" "events: 1000002"
if [ -s "$err" ]; then fail "1,000,002 events, stderr no terminal: printed on stderr"
else pass "1,000,002 events, stderr no terminal: no progress line"; fi
replay --backend dry --quiet "$tmp/long.csv"
if [ -s "$out" ] || [ -s "$err" ]; then fail "1,000,002 events --quiet: printed something"
else pass "1,000,002 events --quiet: nothing printed"; fi
# script -qc CMD FILE (util-linux) runs CMD on a pseudo-terminal.
if command -v script >/dev/null 2>&1 &&
   script -qc 'test -t 2' /dev/null </dev/null >/dev/null 2>&1; then
  # (script needs a plain command line: the paths are quoted for sh.)
  script -qc "'$HIPPO_REPLAY' --backend dry '$tmp/long.csv' >'$out'" \
    /dev/null </dev/null >"$tmp/tty" 2>&1
  if tr '\r' '\n' <"$tmp/tty" | grep -q '^hippo-replay: replaying: .*% ([0-9]* of 1000002 events)'
  then pass "progress on a terminal: 'hippo-replay: replaying: P% (N of 1000002 events)' after a CR"
  else fail "progress on a terminal: no progress line"; od -c "$tmp/tty" | head -5; fi
  expect_line "progress on a terminal: the summary" "events: 1000002"
  script -qc "'$HIPPO_REPLAY' --backend dry --quiet '$tmp/long.csv'" \
    /dev/null </dev/null >"$tmp/tty" 2>&1
  if [ -s "$tmp/tty" ]; then fail "--quiet on a terminal: printed something"
  else pass "--quiet on a terminal: nothing printed"; fi
  script -qc "'$HIPPO_REPLAY' --backend dry '$tmp/stream5.csv' >'$out'" \
    /dev/null </dev/null >"$tmp/tty" 2>&1
  if [ -s "$tmp/tty" ]; then fail "a short trace on a terminal: printed on the terminal"
  else pass "a short trace on a terminal: no progress line"; fi
else
  echo "SKIP: progress on a terminal: no script(1) to fake one"
fi

# ---- usage ----------------------------------------------------------------
replay --help
if grep -qF -- '--lenient' "$out" && grep -qF "$rmm_header" "$out"; then
  pass "--help: --lenient and the RMM header"
else fail "--help: no --lenient or no RMM header"; fi
replay --lenient=yes "$tmp/stream5.csv"
expect_status "--lenient=yes" 2
expect_first_err "--lenient=yes" "hippo-replay: unknown option '--lenient=yes'"

lib_finish
