#!/bin/sh
# test-gen-trace.sh -- tests of traces/gen-trace.py, the trace generator.
#
# Run by `make check` (with $SHELL); the Makefile exports HIPPO_REPLAY (the
# built tool), HIPPO_PLUGIN (the built plugin) and top_srcdir.  By hand:
#   HIPPO_REPLAY=tools/hippo-replay HIPPO_PLUGIN=plugin/.libs/hippo.so \
#     top_srcdir=. sh tests/test-gen-trace.sh
#
# The bundled traces (traces/*.csv) must be the generator's output, byte for
# byte, with the parameters README and the script's docstring give; the
# generator must be deterministic; every scenario's output must replay with
# hippo-replay and have the shape documented for it (checked with awk from
# the CSV, independently of the generator).  Skipped (77) without python3
# ($PYTHON names another interpreter).

set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
HIPPO_REPLAY=${HIPPO_REPLAY:-$top_srcdir/tools/hippo-replay}
HIPPO_PLUGIN=${HIPPO_PLUGIN:-$top_srcdir/plugin/.libs/hippo.so}
export HIPPO_PLUGIN
PYTHON=${PYTHON:-python3}
gen=$top_srcdir/traces/gen-trace.py

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "test-gen-trace: no $PYTHON; skipped" >&2
  exit 77
fi

. "$top_srcdir/tests/lib.sh"
lib_init test-gen-trace "$HIPPO_REPLAY"
line_where=" in the summary"

# generate FILE ARGS...: runs the generator into $tmp/FILE; $status, $err.
generate() {
  file=$tmp/$1
  shift
  "$PYTHON" "$gen" "$@" -o "$file" >"$out" 2>"$err"
  status=$?
}

# shape TRACE: "events peak_live live_ids streams min_size max_size
# odd_sized cross_0_by_1 cross_1_by_0 first_event" from the CSV, where
# odd_sized counts reservations that are not a multiple of 256 bytes and
# cross_S_by_T counts frees of stream S's reservations whose stream field
# says they follow stream T's work.
shape() {
  awk -F, '
    /^#/ || /^op,/ { next }
    $1 == "a" {
      events++; size[$2] = $3; stream[$2] = $4; live += $3; ids++
      if (live > peak) peak = live
      used[$4] = 1
      if (min == "" || $3 + 0 < min + 0) min = $3
      if ($3 + 0 > max + 0) max = $3
      if ($3 % 256) odd++
      if (first == "") first = $0
    }
    $1 == "f" {
      events++; live -= size[$2]; ids--
      if ($4 != "" && $4 != stream[$2]) cross[stream[$2] "," $4]++
      delete size[$2]; delete stream[$2]
    }
    END {
      n = 0; for (s in used) n++
      printf "%.0f %.0f %d %d %.0f %.0f %d %d %d %s\n", events, peak, ids, n,
        min, max, odd, cross["0,1"], cross["1,0"], first
    }' "$1"
}

# field N TRACE: the Nth word of shape TRACE.
field() {
  shape "$2" | cut -d' ' -f"$1"
}

# check NAME WHAT VALUE CONDITION: CONDITION is an awk expression on v.
check() {
  if awk -v v="$3" "BEGIN { exit !($4) }"; then pass "$1: $2 $3"
  else fail "$1: $2 $3, expected $4"; fi
}

# replays NAME TRACE STREAMS: hippo-replay (DRY) replays TRACE with no
# failure and agrees with the CSV on events and peak live bytes.
replays() {
  "$HIPPO_REPLAY" --backend dry --capacity 141G "$2" >"$out" 2>"$err"
  status=$?
  expect_status "$1: hippo-replay" 0
  set -- "$1" "$2" "$3" $(shape "$2")
  expect_line "$1" "events: $4"
  expect_line "$1" "peak live bytes: $5"
  expect_line "$1" "live at end: $6"
  expect_line "$1" "streams: $3 (one manager each)"
  expect_line "$1" "failed reservations: 0"
  expect_line "$1" "failed releases: 0"
}

# ---- the bundled traces are the generator's output ------------------------
# NAME ARGS (the parameters README gives for each bundled trace).
while read -r name args; do
  generate "$name.csv" $args
  expect_status "$name: gen-trace.py $args" 0
  if cmp -s "$file" "$top_srcdir/traces/$name.csv"; then
    pass "$name: regenerated trace is traces/$name.csv, byte for byte"
  else
    fail "$name: gen-trace.py $args differs from traces/$name.csv"
  fi
  # The summary on stderr and the file's second line give the CSV's figures.
  set -- $(shape "$file")
  if grep -qF "$file: $1 events, peak live bytes $2 (" "$err"; then
    pass "$name: stderr gives $1 events, peak live bytes $2"
  else
    fail "$name: stderr does not give $1 events, peak live bytes $2"
  fi
  if sed -n 2p "$file" |
     grep -qxF "# $1 events, peak live bytes $2, $3 ids live at the end."
  then pass "$name: second line gives the figures"
  else fail "$name: second line does not give $1 events, peak $2, $3 live"
  fi
  if [ "$(wc -c <"$file")" -lt 1000000 ]; then
    pass "$name: under 1 MB"
  else fail "$name: $(wc -c <"$file") bytes, not under 1 MB"; fi
done <<EOF
train train
infer infer
two-streams two-streams
random random --ops 40000
EOF

# ---- deterministic: same options, same bytes; another seed, others --------
for scenario in "train --steps 1" "infer --requests 4" \
    "two-streams --steps 2" "random --ops 5000 --sizes log2 --p 0.6"; do
  name=${scenario%% *}
  generate a.csv $scenario --seed 12345
  generate b.csv $scenario --seed 12345
  if cmp -s "$tmp/a.csv" "$tmp/b.csv"; then pass "$scenario: deterministic"
  else fail "$scenario: two runs with --seed 12345 differ"; fi
  "$PYTHON" "$gen" $scenario --seed 12345 >"$tmp/c.csv" 2>"$err"
  if cmp -s "$tmp/a.csv" "$tmp/c.csv"; then pass "$scenario: stdout = -o"
  else fail "$scenario: stdout differs from -o FILE"; fi
  generate b.csv $scenario --seed 12346
  if cmp -s "$tmp/a.csv" "$tmp/b.csv"; then
    fail "$scenario: --seed 12346 gives the same trace as 12345"
  else pass "$scenario: another seed, another trace"; fi
  if sed -n 3p "$tmp/a.csv" |
     grep -q "^# made with: gen-trace.py $name .*--seed 0x3039"; then
    pass "$scenario: '# made with:' names the options"
  else fail "$scenario: no '# made with:' line naming --seed 0x3039"; fi
done

# ---- train ----------------------------------------------------------------
# Unchanged since README's figures were taken: 53,939 events, peak live
# 1,748,903,940 B, the weights (101 tensors) live at the end, two streams.
train=$top_srcdir/traces/train.csv
replays train.csv "$train" 2
set -- $(shape "$train")
check train.csv events "$1" 'v == 53939'
check train.csv "peak live bytes" "$2" 'v == 1748903940'
check train.csv "ids live at the end" "$3" 'v == 101'
# --odd-temps: the same events, small temporaries of any byte count.
# odd FILE: reservations that are neither a multiple of 256 B nor a 4-byte
# scalar.
odd() {
  awk -F, '$1 == "a" && $3 % 256 && $3 != 4' "$1" | wc -l
}
generate plain.csv train --steps 1
generate odd.csv train --steps 1 --odd-temps
expect_status "train --odd-temps" 0
check "train --odd-temps" "events" "$(field 1 "$tmp/odd.csv")" \
  "v == $(field 1 "$tmp/plain.csv")"
check "train (plain)" "odd-sized reservations" "$(odd "$tmp/plain.csv")" \
  'v == 0'
check "train --odd-temps" "odd-sized reservations" "$(odd "$tmp/odd.csv")" \
  'v > 100'

# ---- infer ----------------------------------------------------------------
infer=$top_srcdir/traces/infer.csv
replays infer.csv "$infer" 1
check infer.csv "ids live at the end (the weights)" "$(field 3 "$infer")" \
  'v == 101'
# Paged KV blocks of 16 tokens x 8 layers x K,V x 1024 x 2 B = 512 KiB: every
# block is freed, and blocks are freed (a request finishes) before the last
# one is allocated (the others still grow).
awk -F, '
  $1 == "a" && $3 == 524288 { blocks++; last = NR; kv[$2] = 1 }
  $1 == "f" && ($2 in kv) { freed++; if (!first) first = NR; delete kv[$2] }
  END { print blocks + 0, freed + 0, (first && first < last) }
' "$infer" >"$tmp/kv"
read -r blocks freed interleaved <"$tmp/kv"
check infer.csv "KV blocks allocated" "$blocks" 'v > 100'
check infer.csv "KV blocks freed" "$freed" "v == $blocks"
check infer.csv "a request finished while others grew" "$interleaved" 'v == 1'
# The other KV policies replay and free their caches too.
for kv in concat double; do
  generate "infer-$kv.csv" infer --requests 4 --kv "$kv"
  expect_status "infer --kv $kv" 0
  replays "infer --kv $kv" "$tmp/infer-$kv.csv" 1
done
# concat reallocates K and V of every layer for every token: more events.
check "infer --kv concat" events "$(field 1 "$tmp/infer-concat.csv")" \
  "v > 1.5 * $(field 1 "$tmp/infer-double.csv")"

# ---- two-streams ----------------------------------------------------------
two=$top_srcdir/traces/two-streams.csv
replays two-streams.csv "$two" 2
set -- $(shape "$two")
check two-streams.csv "ids live at the end (embedding, head)" "$3" 'v == 5'
check two-streams.csv "stream-0 reservations freed after stream 1" "$8" \
  'v > 0'
check two-streams.csv "stream-1 reservations freed after stream 0" "$9" \
  'v > 0'

# ---- random: the benchmark's workload A ------------------------------------
random=$top_srcdir/traces/random.csv
replays random.csv "$random" 1
set -- $(shape "$random")
check random.csv "peak live bytes (cap 4 GiB)" "$2" 'v <= 4294967296'
check random.csv "peak live bytes (the cap is reached)" "$2" \
  'v > 4294967296 - 67108864'
check random.csv "smallest reservation" "$5" 'v >= 256'
check random.csv "largest reservation" "$6" 'v <= 67108864'
check random.csv "reservations not a multiple of 256" "$7" 'v == 0'
# The first sizes of hippo-bench's a_generate() for its cases (seeds 0x41
# and 0x44).
if [ "${10}" = "a,1,18539008,0" ]; then pass "random.csv: A's first size"
else fail "random.csv: first event ${10}, A's is a,1,18539008,0"; fi
generate log2.csv random --sizes log2 --p 0.6 --ops 20000 --cap 256M
expect_status "random --sizes log2 --p 0.6 --cap 256M" 0
replays "random log2" "$tmp/log2.csv" 1
set -- $(shape "$tmp/log2.csv")
check "random log2" "first event" "${10}" 'v == "a,1,1229568,0"'
check "random log2" "peak live bytes (cap 256 MiB)" "$2" 'v <= 268435456'
check "random log2" "smallest reservation" "$5" 'v < 4096'

# ---- usage -----------------------------------------------------------------
# argparse prints the usage, then "PROG: error: MESSAGE" (checked without
# what argparse adds after it, which changes across Python versions).
"$PYTHON" "$gen" >"$out" 2>"$err"
status=$?
expect_status "no scenario" 2
expect_err "no scenario" \
  "gen-trace.py: error: the following arguments are required: SCENARIO"
for bad in \
    "train --heads 5|gen-trace.py train: error: --heads 5 does not divide --hidden 1024" \
    "train --micro 3|gen-trace.py train: error: --micro 3 does not divide --batch 8" \
    "random --p 2|gen-trace.py random: error: argument --p: not in [0, 1]: '2'" \
    "random --max-size 1000|gen-trace.py random: error: --max-size must be a multiple of 256" \
    "infer --prompt 9:8|gen-trace.py infer: error: argument --prompt: need 1 <= LO <= HI: '9:8'" \
    "infer --prompt 3:|gen-trace.py infer: error: argument --prompt: not a range LO:HI: '3:'" \
    "infer --kv linear|gen-trace.py infer: error: argument --kv: invalid choice: 'linear'" \
    "two-streams --steps 0|gen-trace.py two-streams: error: argument --steps: must be at least 1: '0'" \
    "nosuch|gen-trace.py: error: argument SCENARIO: invalid choice: 'nosuch'"; do
  "$PYTHON" "$gen" ${bad%%|*} >"$out" 2>"$err"
  status=$?
  expect_status "gen-trace.py ${bad%%|*}" 2
  expect_err "gen-trace.py ${bad%%|*}" "${bad#*|}"
done
# An output that cannot be written: one line, status 1, before the work
# (a million operations would take seconds), and no traceback.
for where in "$tmp/no-such-dir/x.csv" "$tmp"; do
  "$PYTHON" "$gen" random --ops 1000000 -o "$where" >"$out" 2>"$err"
  status=$?
  expect_status "gen-trace.py random -o $where" 1
  if grep -qF "gen-trace.py: cannot write $where: " "$err" &&
     [ "$(wc -l <"$err")" -eq 1 ]; then
    pass "gen-trace.py random -o $where: one line naming the file"
  else fail "gen-trace.py random -o $where: '$(head -c 300 "$err")'"; fi
done
for scenario in "" train infer two-streams random; do
  "$PYTHON" "$gen" $scenario --help >"$out" 2>"$err"
  status=$?
  expect_status "gen-trace.py $scenario --help" 0
  if grep -q '^usage: gen-trace.py' "$out"; then
    pass "gen-trace.py $scenario --help: usage on stdout"
  else fail "gen-trace.py $scenario --help: no usage on stdout"; fi
done

lib_finish
