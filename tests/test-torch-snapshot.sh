#!/bin/sh
# test-torch-snapshot.sh -- tools/torch-snapshot-to-csv.py on synthetic
# PyTorch memory snapshots (pickles of plain dicts and lists, made here by
# python3 without torch), and hippo-replay on what it writes.
#
# Run by `make check` (with $SHELL); the Makefile exports HIPPO_REPLAY,
# HIPPO_PLUGIN and top_srcdir.  By hand:
#   HIPPO_REPLAY=tools/hippo-replay HIPPO_PLUGIN=plugin/.libs/hippo.so \
#     top_srcdir=. sh tests/test-torch-snapshot.sh
#
# Without python3 the test is skipped (exit 77): the converter is a
# python3 script, and nothing else of hippo needs python.

set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
HIPPO_REPLAY=${HIPPO_REPLAY:-$top_srcdir/tools/hippo-replay}
HIPPO_PLUGIN=${HIPPO_PLUGIN:-$top_srcdir/plugin/.libs/hippo.so}
export HIPPO_PLUGIN
convert=$top_srcdir/tools/torch-snapshot-to-csv.py

if ! command -v python3 >/dev/null 2>&1; then
  echo "SKIP: test-torch-snapshot: no python3 (the converter needs it)"
  exit 77
fi
. "$top_srcdir/tests/lib.sh"
lib_init test-torch-snapshot "$HIPPO_REPLAY"
line_where=" in the output"

# run ARGS...: the converter; $status, $out and $err hold the result.
run() {
  python3 "$convert" "$@" >"$out" 2>"$err"
  status=$?
}

# The snapshot: device 0's trace has a block live before recording that
# the trace frees (0x...5000, 300 B), an alloc that is live at the
# snapshot (0x...1400), an address freed and allocated again on the other
# stream, an alloc at a live address (its free missing), and entries the
# converter ignores (segment_alloc, free_requested, oom: no addr).  The
# segments hold two blocks live before recording that the trace never
# frees (1000 of 1024 B requested; and a free not completed, on the second
# stream, with its own address), an inactive block, and a segment of
# device 1, which is not converted.  Device 1's trace is empty.
python3 - "$tmp/snap.pickle" <<'EOF'
import pickle, sys
S0, S1 = 0, 0x7f00aa001000
B = 0x7f0000000000
def t(action, addr, size, stream=S0):
    return {"action": action, "addr": addr, "size": size, "stream": stream,
            "frames": [{"filename": "train.py", "line": 1, "name": "f"}]}
snap = {
    "segments": [
        {"device": 0, "address": B, "total_size": 2097152, "stream": S0,
         "segment_type": "large", "allocated_size": 1536,
         "active_size": 1536, "requested_size": 1512,
         "blocks": [
             {"size": 1024, "requested_size": 1000,
              "state": "active_allocated", "frames": []},
             {"size": 4096, "requested_size": 4096, "state": "inactive",
              "frames": []},
             {"size": 512, "requested_size": 512,
              "state": "active_allocated", "frames": []},
             {"size": 2091520, "requested_size": 0, "state": "inactive",
              "frames": []}]},
        {"device": 1, "address": 0x9000, "total_size": 4096, "stream": 0,
         "blocks": [{"size": 4096, "requested_size": 4096,
                     "state": "active_allocated"}]},
        {"device": 0, "address": 0x7f0100000000, "total_size": 2097152,
         "stream": S1,
         "blocks": [{"address": 0x7f0100000000, "size": 2048,
                     "requested_size": 2000,
                     "state": "active_pending_free"}]},
    ],
    "device_traces": [[
        t("segment_alloc", B, 2097152),
        t("free_requested", B + 0x5000, 300),
        t("free_completed", B + 0x5000, 300),
        t("alloc", B + 0x1400, 512),
        t("alloc", B + 0x2000, 7000, S1),
        t("free_requested", B + 0x2000, 7000, S1),
        t("free_completed", B + 0x2000, 7000, S1),
        t("alloc", B + 0x2000, 6000),
        t("alloc", B + 0x2000, 100),
        t("free_completed", B + 0x2000, 100),
        {"action": "oom", "size": 1 << 40, "stream": 0, "device_free": 5,
         "frames": []},
    ], []],
    "allocator_settings": {"expandable_segments": False},
}
with open(sys.argv[1], "wb") as f:
    pickle.dump(snap, f)
EOF

# The CSV, exactly.
cat >"$tmp/expected.csv" <<EOF
# torch-snapshot-to-csv.py: $tmp/snap.pickle, device 0
# trace entries: alloc 4, free_completed 3, free_requested 2, oom 1, segment_alloc 1
# used: alloc (a reservation) and free_completed or free (its release); the others are ignored
# blocks live before recording began, reserved first: 3 (1 freed in the trace, 2 still live at the snapshot)
# allocs at a live address (its free missing from the trace; released first): 1
# streams: torch 0x0 -> 0, torch 0x7f00aa001000 -> 1
op,id,size,stream
a,1,300,0
a,2,1000,0
a,3,2000,1
f,1,300,0
a,4,512,0
a,5,7000,1
f,5,7000,1
a,6,6000,0
f,6,6000,0
a,7,100,0
f,7,100,0
EOF
run "$tmp/snap.pickle"
expect_status "snapshot to stdout" 0
if cmp -s "$out" "$tmp/expected.csv"; then pass "snapshot: the expected CSV"
else fail "snapshot: not the expected CSV"; diff "$tmp/expected.csv" "$out"; fi
if [ -s "$err" ]; then fail "snapshot: printed on stderr"
else pass "snapshot: nothing on stderr"; fi
run -o "$tmp/snap.csv" "$tmp/snap.pickle"
expect_status "snapshot -o FILE" 0
if cmp -s "$tmp/snap.csv" "$tmp/expected.csv"; then pass "-o FILE: the same CSV"
else fail "-o FILE: not the same CSV"; fi
if [ -s "$out" ]; then fail "-o FILE: printed on stdout"
else pass "-o FILE: nothing on stdout"; fi

# hippo-replay reads it: 11 events; peak live 300 + 1000 + 2000 + 512 +
# 7000 after the first free (10512 B); 3 blocks still live at the end
# (2 from before recording, 0x...1400).
for backend in host dry; do
  name="the CSV replayed --backend $backend --check"
  "$HIPPO_REPLAY" --backend "$backend" --check "$tmp/snap.csv" >"$out" 2>"$err"
  status=$?
  expect_status "$name" 0
  expect_line "$name" "format: hippo (op,id,size,stream)"
  expect_line "$name" "events: 11"
  expect_line "$name" "reservations: 7"
  expect_line "$name" "streams: 2 (one manager each)"
  expect_line "$name" "peak live bytes: 10512"
  expect_line "$name" "live at end: 3"
  expect_line "$name" "failed reservations: 0"
done

# PyTorch before 2.0: `free` rather than free_requested/free_completed,
# and no block addresses (blocks tile their segment).
python3 -c 'import pickle, sys
t = lambda a, addr, size: {"action": a, "addr": addr, "size": size, "stream": 0}
pickle.dump({"segments": [{"address": 4096, "stream": 0, "blocks": [
    {"size": 512, "state": "active_allocated", "requested_size": 500},
    {"size": 512, "state": "inactive"},
    {"size": 1024, "state": "active_allocated", "requested_size": 1024}]}],
  "device_traces": [[t("alloc", 5120, 1024), t("alloc", 8192, 64),
    t("free", 8192, 64), t("free", 65536, 32)]]}, open(sys.argv[1], "wb"))' \
  "$tmp/old.pickle"
run "$tmp/old.pickle"
expect_status "a snapshot of PyTorch 1.x" 0
grep -v '^#' "$out" >"$tmp/old.csv"
printf '%s\n' op,id,size,stream a,1,32,0 a,2,500,0 a,3,1024,0 a,4,64,0 \
  f,4,64,0 f,1,32,0 >"$tmp/old-expected.csv"
if cmp -s "$tmp/old.csv" "$tmp/old-expected.csv"; then
  pass "a snapshot of PyTorch 1.x: 'free' releases, blocks at segment offsets"
else
  fail "a snapshot of PyTorch 1.x: not the expected CSV"
  diff "$tmp/old-expected.csv" "$tmp/old.csv"
fi

# Device 1: an empty trace; the live block of its segment is reserved.
run --device 1 "$tmp/snap.pickle"
expect_status "--device 1" 0
expect_line "--device 1" "a,1,4096,0"
expect_line "--device 1" "# streams: torch 0x0 -> 0"

# ---- refused snapshots: exit 1, one message naming the file -------------
# refused NAME TEXT: exit 1, nothing on stdout, TEXT on stderr.
refused() {
  expect_status "$1" 1
  if [ -s "$out" ]; then fail "$1: printed on stdout"
  else pass "$1: nothing on stdout"; fi
  if grep -qF -- "$2" "$err"; then pass "$1: says '$2'"
  else fail "$1: does not say '$2'"; fi
}
# expect_csv NAME LINES: the output's lines that are no comment, joined
# with spaces, are LINES.
expect_csv() {
  got=$(grep -v '^#' "$out" | tr '\n' ' ')
  if [ "$got" = "$2" ]; then pass "$1: the lines '$2'"
  else fail "$1: the lines '$got', expected '$2'"; fi
}

# expect_lines NAME LINE...: each LINE is a whole line of the output.
expect_lines() {
  name=$1
  shift
  for line in "$@"; do
    if grep -qxF -- "$line" "$out"; then pass "$name: '$line'"
    else fail "$name: no '$line'"; fi
  done
}

run --device 2 "$tmp/snap.pickle"
refused "--device 2" "torch-snapshot-to-csv.py: $tmp/snap.pickle: no trace for device 2 (it has 2)"
run "$tmp/no-such.pickle"
refused "a missing file" "$tmp/no-such.pickle: cannot read it"
printf 'not a pickle\n' >"$tmp/text.pickle"
run "$tmp/text.pickle"
refused "a text file" "$tmp/text.pickle: not a readable pickle"
: >"$tmp/empty.pickle"
run "$tmp/empty.pickle"
refused "an empty file" "$tmp/empty.pickle: not a readable pickle"
# A snapshot taken without _record_memory_history (no device_traces), and
# the old list of segments.
python3 -c 'import pickle, sys
pickle.dump({"segments": []}, open(sys.argv[1], "wb"))
pickle.dump([{"address": 1, "blocks": []}], open(sys.argv[2], "wb"))' \
  "$tmp/no-traces.pickle" "$tmp/segments.pickle"
run "$tmp/no-traces.pickle"
refused "no device_traces" "no 'device_traces': record with torch.cuda.memory._record_memory_history()"
run "$tmp/segments.pickle"
refused "a list of segments" "no 'device_traces'"
# A pickle that would call a function when loaded is refused unloaded.
python3 -c 'import os, pickle, sys
class Boom:
    def __reduce__(self):
        return (os.system, ("touch " + sys.argv[2],))
pickle.dump({"device_traces": [[Boom()]]}, open(sys.argv[1], "wb"))' \
  "$tmp/hostile.pickle" "$tmp/pwned"
run "$tmp/hostile.pickle"
refused "a pickle calling os.system" "the pickle asks for"
if [ -e "$tmp/pwned" ]; then fail "a pickle calling os.system: it ran"
else pass "a pickle calling os.system: nothing ran"; fi
# An entry without an address or with a negative size.
python3 -c 'import pickle, sys
pickle.dump({"device_traces": [[{"action": "alloc", "size": 4}]]}, open(sys.argv[1], "wb"))
pickle.dump({"device_traces": [[{"action": "alloc", "addr": 16, "size": -4}]]}, open(sys.argv[2], "wb"))' \
  "$tmp/no-addr.pickle" "$tmp/negative.pickle"
run "$tmp/no-addr.pickle"
refused "an alloc without addr" "trace entry 0 has no usable 'addr' (None)"
run "$tmp/negative.pickle"
refused "an alloc of -4 bytes" "trace entry 0 has no usable 'size' (-4)"
# 1025 streams: more than a hippo trace may have.
python3 -c 'import pickle, sys
pickle.dump({"device_traces": [[{"action": "alloc", "addr": 4096 * i, "size": 8, "stream": i} for i in range(1025)]]}, open(sys.argv[1], "wb"))' \
  "$tmp/streams.pickle"
run -o "$tmp/streams.csv" "$tmp/streams.pickle"
refused "1025 streams" "more than 1024 streams"
if [ -e "$tmp/streams.csv" ]; then fail "1025 streams: -o FILE written"
else pass "1025 streams: -o FILE not written"; fi
# An action that is not a string.
python3 -c 'import pickle, sys
pickle.dump({"device_traces": [[{"action": ["alloc"], "addr": 16, "size": 4}]]}, open(sys.argv[1], "wb"))' \
  "$tmp/list-action.pickle"
run "$tmp/list-action.pickle"
refused "a list as action" "trace entry 0 has no usable 'action' (['alloc'])"

# A free repeated at a freed address: ignored and counted, not a block
# from before recording; no 'segments': said in a comment.
python3 -c 'import pickle, sys
pickle.dump({"device_traces": [[
  {"action": "alloc", "addr": 16, "size": 8, "stream": 0},
  {"action": "free_completed", "addr": 16, "size": 8, "stream": 0},
  {"action": "free_completed", "addr": 16, "size": 8, "stream": 0}]]},
  open(sys.argv[1], "wb"))' "$tmp/twice.pickle"
run "$tmp/twice.pickle"
expect_status "a free repeated" 0
expect_csv "a free repeated" "op,id,size,stream a,1,8,0 f,1,8,0 "
expect_lines "a free repeated" \
  "# frees at an address freed already (nothing live there; ignored): 1" \
  "# blocks live before recording began, reserved first: 0 (0 freed in the trace, 0 still live at the snapshot)" \
  "# the snapshot has no 'segments': blocks allocated before recording and never freed in the trace are not known, so not reserved"

# Text from the pickle or a file name goes into comment lines: a newline
# in an action's name cannot start a line of its own, and what no UTF-8
# file can hold (a lone surrogate, a file name's stray byte) becomes ?.
python3 -c 'import pickle, sys
pickle.dump({"device_traces": [[
  {"action": "x\nop,id,size,stream\na,77,5,0"}, {"action": "\ud800"},
  {"action": "alloc", "addr": 16, "size": 8, "stream": 0}]], "segments": []},
  open(sys.argv[1], "wb"))' "$tmp/names.pickle"
cp "$tmp/names.pickle" "$tmp/$(printf 'n\377.pickle')"
run "$tmp/$(printf 'n\377.pickle')"
expect_status "odd text in names" 0
expect_csv "odd text in names" "op,id,size,stream a,1,8,0 "
expect_lines "odd text in names" \
  "# torch-snapshot-to-csv.py: $tmp/n?.pickle, device 0" \
  "# trace entries: alloc 1, x?op,id,size,stream?a,77,5,0 1, ? 1"
# A size past 64 bits (hippo-replay reads 64-bit numbers).
python3 -c 'import pickle, sys
pickle.dump({"device_traces": [[
  {"action": "alloc", "addr": 16, "size": 2**70, "stream": 0}]]},
  open(sys.argv[1], "wb"))' "$tmp/huge.pickle"
run "$tmp/huge.pickle"
refused "a size past 64 bits" \
  "trace entry 0 has a 'size' of 1180591620717411303424, more than 64 bits"
# A full disk on stdout: one line, exit 1.
if [ -w /dev/full ]; then
  python3 "$convert" "$tmp/names.pickle" >/dev/full 2>"$err"
  status=$?
  expect_status "stdout on a full disk" 1
  if [ "$(wc -l <"$err")" -eq 1 ] &&
    grep -qF "names.pickle: cannot write stdout: No space left on device" "$err"
  then pass "stdout on a full disk: one line"
  else fail "stdout on a full disk: '$(cat "$err")'"; fi
fi

# Usage: exit 2.
run
expect_status "no snapshot given" 2
expect_err "no snapshot given" \
  "torch-snapshot-to-csv.py: error: the following arguments are required: snapshot"

lib_finish
