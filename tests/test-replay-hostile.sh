#!/bin/sh
# test-replay-hostile.sh -- tools/hippo-replay fed hostile files: empty,
# header only, binary garbage, CRLF and bare-CR line endings, overlong
# lines (and --lenient skipping them), NUL bytes, too many streams, and the
# most streams a trace may use.
#
# Run by `make check` (with $SHELL); the Makefile exports HIPPO_REPLAY,
# HIPPO_PLUGIN and top_srcdir.  By hand:
#   HIPPO_REPLAY=tools/hippo-replay HIPPO_PLUGIN=plugin/.libs/hippo.so \
#     top_srcdir=. sh tests/test-replay-hostile.sh
#
# Every file is generated here, in $tmp, deterministically (no
# /dev/urandom: a failure reproduces).  A refused file must give exit
# status 1, nothing on stdout, and exactly one line on stderr starting
# `FILE:LINE: REASON` (tools/trace.h); an accepted one exit 0 and a
# summary.  Never a crash (a status of 128 or more) or a hang (each run is
# limited to 120 s where timeout(1) exists).

set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
HIPPO_REPLAY=${HIPPO_REPLAY:-$top_srcdir/tools/hippo-replay}
HIPPO_PLUGIN=${HIPPO_PLUGIN:-$top_srcdir/plugin/.libs/hippo.so}
export HIPPO_PLUGIN

. "$top_srcdir/tests/lib.sh"
lib_init test-replay-hostile "$HIPPO_REPLAY"
line_where=" in the summary"
if [ ! -f "$HIPPO_PLUGIN" ]; then
  echo "test-replay-hostile: no plugin at $HIPPO_PLUGIN; run 'make' first" >&2
  exit 99
fi

if command -v timeout >/dev/null 2>&1; then limit="timeout 120"
else limit=; fi

# replay ARGS...: runs the tool on a DRY device; $status, $out, $err.
replay() {
  $limit "$HIPPO_REPLAY" --backend dry "$@" >"$out" 2>"$err"
  status=$?
}

# no_crash NAME: the tool ended by itself, neither killed nor timed out.
no_crash() {
  if [ "$status" -ge 124 ]; then
    fail "$1: exit $status (a crash, a signal or a hang)"
  fi
}

# refused NAME FILE LINE REASON: exit 1, no summary, and one line on
# stderr starting with FILE:LINE: REASON.
refused() {
  no_crash "$1"
  expect_status "$1" 1
  if [ -s "$out" ]; then fail "$1: printed on stdout"
  else pass "$1: nothing on stdout"; fi
  lines=$(wc -l <"$err")
  first=$(head -n 1 "$err" | LC_ALL=C cut -c 1-300)
  case $first in
    "$2:$3: $4"*) pass "$1: stderr says '$2:$3: $4...'" ;;
    *) fail "$1: stderr does not start with '$2:$3: $4'" ;;
  esac
  if [ "$lines" -eq 1 ]; then pass "$1: one line on stderr"
  else fail "$1: $lines lines on stderr, expected 1"; fi
}

# accepted NAME EVENTS STREAMS: exit 0 with a summary counting EVENTS
# events on STREAMS streams, nothing failed.
accepted() {
  no_crash "$1"
  expect_status "$1" 0
  expect_line "$1" "events: $2"
  expect_line "$1" "streams: $3 (one manager each)"
  expect_line "$1" "failed reservations: 0"
  expect_line "$1" "failed releases: 0"
}

# garbage N FILE: N deterministic bytes of every value, NULs and newlines
# included (an LCG mod 65537, each byte written as an octal escape by the
# shell's printf, 512 a call).
garbage() {
  LC_ALL=C awk -v n="$1" 'BEGIN {
    x = 12345
    for (i = 0; i < n; i++) {
      x = (x * 75 + 74) % 65537
      printf "\\%03o", x % 256
      if (i % 512 == 511) printf "\n"
    }
    printf "\n"
  }' | while IFS= read -r chunk; do printf "$chunk"; done >"$2"
}

# repeat N TEXT: TEXT N times, no newline.
repeat() {
  awk -v n="$1" -v t="$2" 'BEGIN { for (i = 0; i < n; i++) printf "%s", t }'
}

# ---- empty and header-only files -----------------------------------------
# An empty file has no header: refused at line 1 (the error format holds
# even where no line exists).
: >"$tmp/empty.csv"
replay "$tmp/empty.csv"
refused "empty file" "$tmp/empty.csv" 1 "no header line 'op,id,size,stream'"

# Only comments and blank lines: refused at the last line.
printf '# nothing\n\n   \n' >"$tmp/comments.csv"
replay "$tmp/comments.csv"
refused "comments only" "$tmp/comments.csv" 3 "no header line"

# A header and nothing else (with or without the final newline, with CRLF):
# a trace of no events.
printf 'op,id,size,stream\n' >"$tmp/header.csv"
printf 'op,id,size,stream' >"$tmp/header-no-newline.csv"
printf 'op,id,size,stream\r\n' >"$tmp/header-crlf.csv"
for f in header header-no-newline header-crlf; do
  replay "$tmp/$f.csv"
  no_crash "$f.csv"
  expect_status "$f.csv" 0
  expect_line "$f.csv" "events: 0"
  expect_line "$f.csv" "reserved/live ratio: n/a"
done

# ---- binary garbage ------------------------------------------------------
# 64 KiB of every byte value: its first line holds a NUL at byte 80,
# before any newline.  The same bytes on stdin ("-") name the file "-".
garbage 65536 "$tmp/garbage.bin"
size=$(wc -c <"$tmp/garbage.bin")
if [ "$size" -eq 65536 ]; then pass "garbage.bin: 65536 bytes"
else fail "garbage.bin: $size bytes, the generator is broken"; fi
replay "$tmp/garbage.bin"
refused "garbage.bin" "$tmp/garbage.bin" 1 \
  "byte 80 of the line is NUL; is this a text file?"
$limit "$HIPPO_REPLAY" --backend dry - <"$tmp/garbage.bin" >"$out" 2>"$err"
status=$?
refused "garbage on stdin" "-" 1 "byte 80 of the line is NUL"

# Without its NULs: the first line is no header.
tr -d '\000' <"$tmp/garbage.bin" >"$tmp/garbage-no-nul.bin"
replay "$tmp/garbage-no-nul.bin"
refused "garbage without NULs" "$tmp/garbage-no-nul.bin" 1 \
  "expected the header line 'op,id,size,stream' before the first event"

# After a valid header: the garbage is line 2, with the NUL, or (without
# NULs) an unknown op, whose text is cut at 20 bytes.
{ printf 'op,id,size,stream\n'; cat "$tmp/garbage.bin"; } >"$tmp/header-garbage.bin"
replay "$tmp/header-garbage.bin"
refused "header + garbage" "$tmp/header-garbage.bin" 2 "byte 80 of the line is NUL"
{ printf 'op,id,size,stream\n'; cat "$tmp/garbage-no-nul.bin"; } \
  >"$tmp/header-garbage-no-nul.bin"
replay "$tmp/header-garbage-no-nul.bin"
refused "header + garbage without NULs" "$tmp/header-garbage-no-nul.bin" 2 \
  "unknown op '"
errsize=$(wc -c <"$err")
if [ "$errsize" -lt 200 ]; then pass "unknown op: the garbage is cut ($errsize B)"
else fail "unknown op: $errsize B on stderr"; fi

# ---- line endings ----------------------------------------------------------
# CRLF: accepted (tools/trace.h: a CR before the newline is ignored), the
# same figures as with LF; an error in a CRLF file names its line and its
# field without the CR.
printf '%s\r\n' 'op,id,size,stream' 'a,1,4096,0' 'a,2,1000,5' 'f,1' \
  'a,3,65536,5' 'f,2,,' 'f,3,65536,5' >"$tmp/crlf.csv"
replay "$tmp/crlf.csv"
accepted "crlf.csv" 6 2
expect_line "crlf.csv" "peak live bytes: 66536" # 1000 + 65536 after f,1
tr -d '\r' <"$tmp/crlf.csv" >"$tmp/lf.csv"
replay "$tmp/lf.csv"
accepted "lf.csv (the same trace)" 6 2
expect_line "lf.csv (the same trace)" "peak live bytes: 66536"
printf '%s\r\n' 'op,id,size,stream' 'a,1,4096,0' 'a,2,4096,7x' \
  >"$tmp/crlf-bad.csv"
replay "$tmp/crlf-bad.csv"
refused "crlf with a bad stream" "$tmp/crlf-bad.csv" 3 \
  "stream '7x' is not a number"
if grep -q "$(printf '\r')" "$err"; then fail "crlf: a CR in the message"
else pass "crlf: no CR in the message"; fi

# Bare CRs (old Mac line endings) end no line: the whole file is line 1,
# which is no header.
printf '%s\r' 'op,id,size,stream' 'a,1,4096,0' 'f,1' >"$tmp/cr.csv"
replay "$tmp/cr.csv"
refused "bare CR line endings" "$tmp/cr.csv" 1 "expected the header line"

# ---- overlong lines ----------------------------------------------------------
# A line has at most 4096 bytes (tools/trace.h), comments too: 1 MiB on one
# line is refused wherever it is, naming its length -- as the first line,
# as a size of 1 Mi digits, as spaces after a valid event, as a comment,
# as commas -- and --lenient skips it (not the first line: a trace needs
# its header).  Just under the limit, the field errors are the usual ones
# (a size of 4000 digits quoted only in part; 4000 commas).
repeat 1048576 x >"$tmp/long-first.csv"
printf '\n' >>"$tmp/long-first.csv"
replay "$tmp/long-first.csv"
refused "1 MiB first line" "$tmp/long-first.csv" 1 \
  "the line is 1048576 bytes long; a trace line has at most 4096"
replay --lenient "$tmp/long-first.csv"
refused "1 MiB first line, --lenient" "$tmp/long-first.csv" 1 \
  "no header line 'op,id,size,stream'"

{ printf 'op,id,size,stream\na,1,'; repeat 1048576 9; printf ',0\n'; } \
  >"$tmp/long-size.csv"
replay "$tmp/long-size.csv"
refused "1 MiB size" "$tmp/long-size.csv" 2 "the line is 1048582 bytes long"
errsize=$(wc -c <"$err")
if [ "$errsize" -lt 300 ]; then pass "1 MiB size: not quoted ($errsize B)"
else fail "1 MiB size: $errsize B on stderr"; fi

{ printf 'op,id,size,stream\na,1,'; repeat 4000 9; printf ',0\n'; } \
  >"$tmp/size-4000.csv"
replay "$tmp/size-4000.csv"
refused "4000-digit size" "$tmp/size-4000.csv" 2 \
  "size '9999999999999999999999999999999999999999' overflows 64 bits"
errsize=$(wc -c <"$err")
if [ "$errsize" -lt 300 ]; then pass "4000-digit size: quoted in part ($errsize B)"
else fail "4000-digit size: $errsize B on stderr"; fi

{ printf 'op,id,size,stream\na,1,4096,0'; repeat 1048576 ' '; printf '\nf,1\n'; } \
  >"$tmp/long-spaces.csv"
replay "$tmp/long-spaces.csv"
refused "1 MiB of trailing spaces" "$tmp/long-spaces.csv" 2 \
  "the line is 1048586 bytes long"
# --lenient: the reservation's line is skipped, so its free is too.
replay --lenient "$tmp/long-spaces.csv"
accepted "1 MiB of trailing spaces, --lenient" 0 0
expect_line "1 MiB of trailing spaces, --lenient" \
  "skipped: 2 lines (first: $tmp/long-spaces.csv:2: the line is 1048586 bytes long; a trace line has at most 4096 (is this a trace?))"

{ printf 'op,id,size,stream\n#'; repeat 1048576 c; printf '\na,1,1,0\n'; } \
  >"$tmp/long-comment.csv"
replay "$tmp/long-comment.csv"
refused "1 MiB comment" "$tmp/long-comment.csv" 2 "the line is 1048577 bytes long"
replay --lenient "$tmp/long-comment.csv"
accepted "1 MiB comment, --lenient" 1 1
expect_line "1 MiB comment, --lenient" \
  "skipped: 1 line (first: $tmp/long-comment.csv:2: the line is 1048577 bytes long; a trace line has at most 4096 (is this a trace?))"

# 4096 bytes exactly (a comment, an event padded with spaces, CRLF not
# counted) pass; 4097 do not.
{ printf 'op,id,size,stream\r\n#'; repeat 4095 c; printf '\r\na,1,1,0'
  repeat 4088 ' '; printf '\r\n'; } >"$tmp/line-4096.csv"
replay "$tmp/line-4096.csv"
accepted "4096-byte lines" 1 1
{ printf 'op,id,size,stream\n#'; repeat 4096 c; printf '\n'; } >"$tmp/line-4097.csv"
replay "$tmp/line-4097.csv"
refused "a 4097-byte line" "$tmp/line-4097.csv" 2 \
  "the line is 4097 bytes long; a trace line has at most 4096"

{ printf 'op,id,size,stream\na'; repeat 1048576 ,; printf '\n'; } >"$tmp/long-commas.csv"
replay "$tmp/long-commas.csv"
refused "1 MiB of commas" "$tmp/long-commas.csv" 2 "the line is 1048577 bytes long"
{ printf 'op,id,size,stream\na'; repeat 4000 ,; printf '\n'; } >"$tmp/commas-4000.csv"
replay "$tmp/commas-4000.csv"
refused "4000 commas" "$tmp/commas-4000.csv" 2 "too many fields"

# ---- NUL bytes inside lines ------------------------------------------------
# A NUL would silently cut the line: refused, naming its line and byte.
printf 'op,id,size,stream\na,1,4096,0\na,2,40\00096,0\nf,1\n' >"$tmp/nul.csv"
replay "$tmp/nul.csv"
refused "NUL in a size" "$tmp/nul.csv" 3 "byte 7 of the line is NUL"
printf 'op,id,size,stream\n\000a,1,4096,0\n' >"$tmp/nul-first.csv"
replay "$tmp/nul-first.csv"
refused "NUL first on a line" "$tmp/nul-first.csv" 2 "byte 1 of the line is NUL"
printf 'op,id,size,stream\na,1,4096,0\n# a comment \000 with a NUL\n' \
  >"$tmp/nul-comment.csv"
replay "$tmp/nul-comment.csv"
refused "NUL in a comment" "$tmp/nul-comment.csv" 3 "byte 13 of the line is NUL"
printf 'op,id,\000size,stream\n' >"$tmp/nul-header.csv"
replay "$tmp/nul-header.csv"
refused "NUL in the header" "$tmp/nul-header.csv" 1 "byte 7 of the line is NUL"

# ---- input that cannot begin a trace is not read whole ----------------------
# /dev/zero (a NUL at byte 1, never a newline) and an endless pipe of events
# without a header are refused at once, not after filling host memory.
replay /dev/zero
refused "/dev/zero" /dev/zero 1 "byte 1 of the line is NUL"
yes a,1,4096,0 | $limit "$HIPPO_REPLAY" --backend dry - >"$out" 2>"$err"
status=$?
refused "an endless pipe without a header" - 1 \
  "expected the header line 'op,id,size,stream' before the first event"
# a first line of 17 MiB without a newline: read to 16 MiB, and so said
awk 'BEGIN { s = "x"; while (length(s) < 17 * 1048576) s = s s
  printf "%s", substr(s, 1, 17 * 1048576) }' >"$tmp/long17.csv"
replay "$tmp/long17.csv"
refused "17 MiB first line" "$tmp/long17.csv" 1 "the line is at least "

# ---- the trace's bytes in a message cannot drive the terminal ------------------
# A CR would put the cursor back over FILE:LINE, an ESC start a command:
# each control byte of an excerpt is printed as ?.
printf 'op,id,size,stream\na,1,10,0\rx\na,2,1\033[2J,0\n' >"$tmp/ctl.csv"
replay "$tmp/ctl.csv"
refused "a CR inside a field" "$tmp/ctl.csv" 2 \
  "stream '0?x' is not a number"
replay --lenient "$tmp/ctl.csv"
expect_line "an ESC inside a field, --lenient" \
  "skipped: 2 lines (first: $tmp/ctl.csv:2: stream '0?x' is not a number; write it as plain decimal digits)"
if LC_ALL=C grep -q "$(printf '[\001-\011\013-\037]')" "$out" "$err"; then
  fail "a control byte of the trace was printed"
else pass "no control byte of the trace was printed"; fi

# ---- streams -----------------------------------------------------------------
# Streams 0..4999: traces/README.md says 0..1023, so the first
# reservation on stream 1024 (line 1026, after the header) is refused,
# and nothing is replayed.
awk 'BEGIN { print "op,id,size,stream"
  for (i = 0; i < 5000; i++) printf "a,%d,4096,%d\n", i, i }' >"$tmp/s5000.csv"
replay "$tmp/s5000.csv"
refused "5,000 streams" "$tmp/s5000.csv" 1026 \
  "stream 1024 is out of range; use stream numbers 0 to 1023"
# ... on a release too (its stream is checked, though ignored)
printf 'op,id,size,stream\na,1,4096,1023\nf,1,4096,1024\n' >"$tmp/free-1024.csv"
replay "$tmp/free-1024.csv"
refused "release naming stream 1024" "$tmp/free-1024.csv" 3 \
  "stream 1024 is out of range"

# All 1024 streams, 0..1023: one manager each, every reservation served,
# on DRY and HOST (sizes 256 B .. 256 KiB, all live at once).
awk 'BEGIN { print "op,id,size,stream"
  for (i = 0; i < 1024; i++) printf "a,%d,%d,%d\n", i, 256 * (i + 1), 1023 - i
  for (i = 0; i < 1024; i++) printf "f,%d\n", i }' >"$tmp/s1024.csv"
for backend in dry host; do
  $limit "$HIPPO_REPLAY" --backend "$backend" "$tmp/s1024.csv" >"$out" 2>"$err"
  status=$?
  accepted "1024 streams ($backend)" 2048 1024
  expect_line "1024 streams ($backend)" "live at end: 0"
  expect_line "1024 streams ($backend)" "peak live bytes: 134348800"
done

lib_finish
