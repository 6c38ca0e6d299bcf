#!/bin/sh
# test-torch-alloc-sim.sh -- tools/torch-alloc-sim.py, the simulation of
# PyTorch's CUDA caching allocator, on tiny traces whose peaks are worked
# out by hand from PyTorch's rules (c10/cuda/CUDACachingAllocator.cpp:
# round_size, get_allocation_size, get_free_block, should_split,
# free_block, find_expandable_block, map_block); each case says which rule
# it pins.  Then the segment trace it writes, replayed by hippo-replay, and
# the figures docs/benchmarks.md quotes for traces/two-streams.csv.
#
# Run by `make check` (with $SHELL); the Makefile exports HIPPO_REPLAY,
# HIPPO_PLUGIN and top_srcdir.  By hand:
#   HIPPO_REPLAY=tools/hippo-replay HIPPO_PLUGIN=plugin/.libs/hippo.so \
#     top_srcdir=. sh tests/test-torch-alloc-sim.sh
#
# Without python3 the test is skipped (exit 77).

set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
HIPPO_REPLAY=${HIPPO_REPLAY:-$top_srcdir/tools/hippo-replay}
HIPPO_PLUGIN=${HIPPO_PLUGIN:-$top_srcdir/plugin/.libs/hippo.so}
export HIPPO_PLUGIN
simtool=$top_srcdir/tools/torch-alloc-sim.py

if ! command -v python3 >/dev/null 2>&1; then
  echo "SKIP: test-torch-alloc-sim: no python3 (the simulator needs it)"
  exit 77
fi
. "$top_srcdir/tests/lib.sh"
lib_init test-torch-alloc-sim "$HIPPO_REPLAY"
line_where=" in the output"

MiB=1048576

# run ARGS...: the simulator; $status, $out and $err hold the result.
run() {
  python3 "$simtool" "$@" >"$out" 2>"$err"
  status=$?
}

# sim NAME MODE RESERVED ALLOCATED REQUESTED: the events on stdin (after
# the header), simulated with --check; the three peaks must be these.
sim() {
  { echo "# $1"; echo "op,id,size,stream"; cat; } >"$tmp/t.csv"
  run --mode "$2" --check "$tmp/t.csv"
  expect_status "$1" 0
  expect_line "$1" "peak reserved bytes: $3"
  expect_line "$1" "peak allocated bytes: $4"
  expect_line "$1" "peak requested bytes: $5"
}

# ---- default allocator (segments) -----------------------------------------

# round_size: 100 B is a 512 B block; get_allocation_size: a small request
# gets a 2 MiB segment.
sim "100 B" segments $((2 * MiB)) 512 100 <<EOF
a,1,100,0
EOF

# Exactly 1 MiB is small (kSmallSize is <=): 2 MiB segments, split when 512
# B or more remain, so two share one segment and a third needs another.
sim "three 1 MiB" segments $((4 * MiB)) $((3 * MiB)) $((3 * MiB)) <<EOF
a,1,$MiB,0
a,2,$MiB,0
a,3,$MiB,0
EOF

# should_split, small pool: 512 B left over is split off (not fewer than
# kMinBlockSize), so 1 MiB, then 1 MiB - 512, then 512 B share one 2 MiB
# segment.
sim "512 B remainder" segments $((2 * MiB)) $((2 * MiB)) $((2 * MiB)) <<EOF
a,1,$MiB,0
a,2,$((MiB - 512)),0
a,3,512,0
EOF

# One byte over 1 MiB rounds to 1 MiB + 512: the large pool, a 20 MiB
# segment, split (more than 1 MiB remains).
sim "1 MiB + 1" segments $((20 * MiB)) $((MiB + 512)) $((MiB + 1)) <<EOF
a,1,$((MiB + 1)),0
EOF

# 1..10 MiB: a 20 MiB segment, split; the second 5 MiB takes the remainder.
sim "two 5 MiB" segments $((20 * MiB)) $((10 * MiB)) $((10 * MiB)) <<EOF
a,1,$((5 * MiB)),0
a,2,$((5 * MiB)),0
EOF

# 10 MiB and over: the request rounded up to 2 MiB.
sim "12 MiB" segments $((12 * MiB)) $((12 * MiB)) $((12 * MiB)) <<EOF
a,1,$((12 * MiB)),0
EOF

# should_split, large pool: 11 MiB in a 12 MiB segment leaves exactly 1
# MiB, not more: the block is allocated whole (12 MiB allocated), and a
# 1.5 MiB request needs a new 20 MiB segment.
sim "11 MiB, unsplit" segments $((32 * MiB)) $((12 * MiB + 3 * MiB / 2)) \
  $((11 * MiB + 3 * MiB / 2)) <<EOF
a,1,$((11 * MiB)),0
a,2,$((3 * MiB / 2)),0
EOF

# ... while 10.5 MiB leaves 1.5 MiB, split off, and the 1.5 MiB request
# takes it.
sim "10.5 MiB, split" segments $((12 * MiB)) $((12 * MiB)) $((12 * MiB)) <<EOF
a,1,$((21 * MiB / 2)),0
a,2,$((3 * MiB / 2)),0
EOF

# A block freed on stream 0 serves stream 0 again ...
sim "same stream reuses" segments $((20 * MiB)) $((5 * MiB)) $((5 * MiB)) <<EOF
a,1,$((5 * MiB)),0
f,1
a,2,$((5 * MiB)),0
EOF

# ... never stream 1, whatever stream the free line names (the block goes
# back to the stream that allocated it).
sim "other stream does not" segments $((40 * MiB)) $((5 * MiB)) \
  $((5 * MiB)) <<EOF
a,1,$((5 * MiB)),0
f,1,,1
a,2,$((5 * MiB)),1
EOF

# free_block merges free neighbours: four 5 MiB blocks fill a 20 MiB
# segment; the middle two freed are one 10 MiB block, which a 10 MiB
# request takes (unmerged, it would need a new 10 MiB segment).
sim "coalescing" segments $((20 * MiB)) $((20 * MiB)) $((20 * MiB)) <<EOF
a,1,$((5 * MiB)),0
a,2,$((5 * MiB)),0
a,3,$((5 * MiB)),0
a,4,$((5 * MiB)),0
f,2,$((5 * MiB)),0
f,3
a,5,$((10 * MiB)),0
EOF

# get_free_block is best fit: with 12 and 14 MiB blocks free, 12 MiB takes
# the 12 MiB one and 14 MiB the other (taking the 14 for the 12 would
# need a third segment).
sim "best fit" segments $((26 * MiB)) $((26 * MiB)) $((26 * MiB)) <<EOF
a,1,$((12 * MiB)),0
a,2,$((14 * MiB)),0
f,1
f,2
a,3,$((12 * MiB)),0
a,4,$((14 * MiB)),0
EOF

# A 2 MiB request takes (and splits) a free 24 MiB block; with
# max_split_size 20 MiB it may not (a request under it takes no block at
# or over it), and a new 20 MiB segment is made; with 30 MiB it may.
sim "max_split_size unset" segments $((24 * MiB)) $((24 * MiB)) \
  $((24 * MiB)) <<EOF
a,1,$((24 * MiB)),0
f,1
a,2,$((2 * MiB)),0
EOF
run --max-split-size 20M --check "$tmp/t.csv"
expect_status "max_split_size 20M" 0
expect_line "max_split_size 20M" "peak reserved bytes: $((44 * MiB))"
run --max-split-size 30M --check "$tmp/t.csv"
expect_status "max_split_size 30M" 0
expect_line "max_split_size 30M" "peak reserved bytes: $((24 * MiB))"

# A 0-byte tensor has no block.
sim "0 bytes" segments 0 0 0 <<EOF
a,1,0,0
f,1
EOF

# ---- expandable_segments:True ---------------------------------------------

# The large pool maps 20 MiB pages: two 5 MiB blocks in one.
sim "expandable: two 5 MiB" expandable $((20 * MiB)) $((10 * MiB)) \
  $((10 * MiB)) <<EOF
a,1,$((5 * MiB)),0
a,2,$((5 * MiB)),0
EOF

# 12 MiB more: the 10 MiB free at the end grows by one page (segments: a
# new 12 MiB segment, 32 MiB).
sim "expandable: grows at the end" expandable $((40 * MiB)) $((22 * MiB)) \
  $((22 * MiB)) <<EOF
a,1,$((5 * MiB)),0
a,2,$((5 * MiB)),0
a,3,$((12 * MiB)),0
EOF
sim "segments: same trace" segments $((32 * MiB)) $((22 * MiB)) \
  $((22 * MiB)) <<EOF
a,1,$((5 * MiB)),0
a,2,$((5 * MiB)),0
a,3,$((12 * MiB)),0
EOF

# should_split with expandable segments: 512 B or more left over is split
# off in the large pool too, so 19.5 MiB allocates 19.5 MiB of its page
# (the default allocator's rule, more than 1 MiB, would allocate 20).
sim "expandable: split rule" expandable $((20 * MiB)) $((39 * MiB / 2)) \
  $((39 * MiB / 2)) <<EOF
a,1,$((39 * MiB / 2)),0
EOF

# 25 MiB: two pages (segments: 26 MiB).
sim "expandable: 25 MiB" expandable $((40 * MiB)) $((25 * MiB)) \
  $((25 * MiB)) <<EOF
a,1,$((25 * MiB)),0
EOF

# The small pool maps 2 MiB pages, one segment per stream.
sim "expandable: small, two streams" expandable $((4 * MiB)) 1024 200 <<EOF
a,1,100,0
a,2,100,1
EOF

# A stream's pages serve only that stream.
sim "expandable: other stream" expandable $((40 * MiB)) $((5 * MiB)) \
  $((5 * MiB)) <<EOF
a,1,$((5 * MiB)),0
f,1
a,2,$((5 * MiB)),1
EOF

# get_free_block counts the free block at the end as its size plus the
# unmapped room after it: 5 MiB takes the freed 8 MiB block at the start,
# not the 6 MiB one at the end, which then grows by one page for 26 MiB
# (40 MiB mapped; taking the 6 MiB block would leave 1 MiB to grow, three
# pages, 60 MiB).
sim "expandable: best fit skips the end" expandable $((40 * MiB)) \
  $((37 * MiB)) $((37 * MiB)) <<EOF
a,1,$((8 * MiB)),0
a,2,$((6 * MiB)),0
f,1
a,3,$((5 * MiB)),0
a,4,$((26 * MiB)),0
EOF

# ---- the segment trace, through hippo-replay -------------------------------

{ echo "op,id,size,stream"; cat; } >"$tmp/t.csv" <<EOF
a,1,100,0
a,2,$((5 * MiB)),0
a,3,$((5 * MiB)),1
a,4,$((16 * MiB)),0
f,2
a,5,$((5 * MiB)),0
EOF
run --segments-out "$tmp/seg.csv" --json "$tmp/sim.json" "$tmp/t.csv"
expect_status "--segments-out" 0
expect_line "--segments-out" "peak reserved bytes: $((58 * MiB))"
expect_line "--segments-out" "segments: 4"
want="op,id,size,stream a,1,$((2 * MiB)),0 a,2,$((20 * MiB)),0"
want="$want a,3,$((20 * MiB)),1 a,4,$((16 * MiB)),0 "
if grep -v '^#' "$tmp/seg.csv" | tr '\n' ' ' | grep -qxF "$want"
then pass "--segments-out: the four segments, in order"
else fail "--segments-out: $(grep -v '^#' "$tmp/seg.csv" | tr '\n' ' ')"; fi
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1]));
sys.exit(not (d["peak_reserved_bytes"] == 58 * 2**20 and
              d["peak_requested_bytes"] == 26 * 2**20 + 100 and
              d["mode"] == "segments"))' "$tmp/sim.json"
then pass "--json: the figures"
else fail "--json: $(cat "$tmp/sim.json")"; fi
replay --backend dry --layout virtual "$tmp/seg.csv"
expect_status "hippo-replay of the segment trace" 0
expect_line "hippo-replay of the segment trace" \
  "peak live bytes: $((58 * MiB))"

# ---- the figures docs/benchmarks.md quotes ---------------------------------

two=$top_srcdir/traces/two-streams.csv
run "$two"
expect_status "two-streams.csv, segments" 0
expect_line "two-streams.csv, segments" "peak requested bytes: 257241344"
expect_line "two-streams.csv, segments" "peak reserved bytes: 534773760"
run --mode expandable --check "$two"
expect_status "two-streams.csv, expandable" 0
expect_line "two-streams.csv, expandable" "peak reserved bytes: 297795584"

# ---- refusals ---------------------------------------------------------------

printf 'op,id,size,stream\nf,7\n' >"$tmp/bad.csv"
run "$tmp/bad.csv"
expect_status "free of an id not live" 1
expect_err "free of an id not live" \
  "bad.csv:2: free of id 7, which is not live"
printf 'id,size\n' >"$tmp/bad.csv"
run "$tmp/bad.csv"
expect_status "wrong header" 1
expect_err "wrong header" "header 'op,id,size,stream' expected"
run --mode expandable --segments-out "$tmp/x.csv" "$two"
expect_status "--segments-out with expandable" 2

lib_finish
