#!/bin/sh
# test-layout-cli.sh -- --layout SPEC through the command lines of
# tools/hippo-info and tools/hippo-replay (tests/test-layout-spec checks
# the parser itself, tool_parse_layout, message by message).
#
# Run by `make check`; the Makefile exports HIPPO_INFO, HIPPO_REPLAY,
# HIPPO_PLUGIN and top_srcdir.  By hand:
#   HIPPO_INFO=tools/hippo-info HIPPO_REPLAY=tools/hippo-replay \
#     HIPPO_PLUGIN=plugin/.libs/hippo.so top_srcdir=. sh tests/test-layout-cli.sh
#
# Round trips: a spec's pools are the rows of hippo-info's table (pool N of
# the spec is index N; index 0 is the persistent pool); the "layout:" line
# hippo-info prints, fed back, gives the same table; each preset's table,
# written as a spec, gives the preset's table again, and hippo-replay
# replays the bundled trace with it to the same figures as with the
# preset.

set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
HIPPO_INFO=${HIPPO_INFO:-$top_srcdir/tools/hippo-info}
HIPPO_REPLAY=${HIPPO_REPLAY:-$top_srcdir/tools/hippo-replay}
HIPPO_PLUGIN=${HIPPO_PLUGIN:-$top_srcdir/plugin/.libs/hippo.so}
export HIPPO_PLUGIN
train=$top_srcdir/traces/train.csv

. "$top_srcdir/tests/lib.sh"
lib_init test-layout-cli "$HIPPO_INFO"
if [ ! -x "$HIPPO_REPLAY" ]; then
  echo "test-layout-cli: $HIPPO_REPLAY is not built; run 'make' first" >&2
  exit 99
fi

# info / replay ARGS...: run the tool; $status, $out and $err hold the result.

# expect_no_out NAME: nothing on stdout.
expect_no_out() {
  if [ -s "$out" ]; then fail "$1: something on stdout"
  else pass "$1: nothing on stdout"; fi
}

# pools: hippo-info's table rows as "index kind page max cap period".
pools() {
  sed -n '/^index /,/^$/p' "$out" | sed '1d;/^$/d' | awk '{ $1 = $1; print }'
}

# table_spec: hippo-info's table (in $out) written as a --layout spec.
# "4 MiB" -> 4M, "256 B" -> 256, "none" -> no cap, "never" -> period=0.
table_spec() {
  pools | awk '
    function size(n, unit) {
      if (unit == "B") return n
      return n substr(unit, 1, 1)
    }
    $2 == "PERSISTENT" { next }
    {
      # fields after the kind: a size is two words, "-" and "none" one
      i = 3; k = 0
      while (i <= NF) {
        if ($i == "-" || $i == "none" || i == NF) { v[++k] = $i; i++ }
        else { v[++k] = size($i, $(i + 1)); i += 2 }
      }
      period = v[4] == "never" ? 0 : v[4]
      if ($2 == "SLICED" || $2 == "ARENA") {
        s = tolower($2) ":page=" v[1] ",slice=" v[2]
        if (v[3] != "none") s = s ",cap=" v[3]
      } else if ($2 == "EXCLUSIVE") {
        s = "exclusive:max=" v[2]
      } else {
        s = "direct"
      }
      s = s (index(s, ":") ? "," : ":") "period=" period
      spec = spec (spec == "" ? "" : ";") s
    }
    END { print spec }'
}

# ---- a spec's pools are the table's rows ----------------------------------
spec='sliced:page=4M,slice=1M;exclusive:max=1G'
name="hippo-info --layout '$spec'"
info --backend dry --capacity 16G --layout "$spec"
expect_status "$name" 0
expect_line "$name" "preset: custom"
expect_line "$name" "layout: $spec"
expect_line "$name" "pools: 3 (index 0 is the persistent pool)"
expect_pools "$name" <<'ROWS'
0 PERSISTENT - - - never
1 SLICED 4 MiB 1 MiB none 10000
2 EXCLUSIVE - 1 GiB - 10000
ROWS

# Every kind and key, spaces around them, sizes in other spellings; the
# layout: line is the canonical text (defaults left out).
spec=' sliced : page = 64MiB , slice=8388608, cap=1G ; arena:page=2M,slice=4G,cap=8G,period=5;direct:reclaim=1G,period=0;exclusive:max=16GB '
canon='sliced:page=64M,slice=8M,cap=1G;arena:page=2M,slice=4G,cap=8G,period=5;direct:reclaim=1G,period=0;exclusive:max=16G'
name="hippo-info, every kind"
info --backend dry --capacity 16G --layout "$spec"
expect_status "$name" 0
expect_line "$name" "layout: $canon"
expect_pools "$name" <<'ROWS'
0 PERSISTENT - - - never
1 SLICED 64 MiB 8 MiB 1 GiB 10000
2 ARENA 2 MiB 4 GiB 8 GiB 5
3 DIRECT - - - never
4 EXCLUSIVE - 16 GiB - 10000
ROWS
cp "$out" "$tmp/every.out"

# The layout: line fed back gives the same output.
name="hippo-info, the layout: line fed back"
info --backend dry --capacity 16G --layout "$canon"
expect_status "$name" 0
if cmp -s "$tmp/every.out" "$out"; then pass "$name: the same output"
else fail "$name: the output differs"; fi

# ---- each preset's table, written as a spec, is the preset again ----------
for capacity in 16G 1G; do
  for preset in adaptive sub_slices exclusive_pages; do
    name="$preset --capacity $capacity as a spec"
    info --backend dry --capacity "$capacity" --layout "$preset"
    pools >"$tmp/preset-rows"
    spec=$(table_spec)
    info --backend dry --capacity "$capacity" --layout "$spec"
    expect_status "$name" 0
    expect_line "$name" "preset: custom"
    expect_pools "$name" <"$tmp/preset-rows"
  done
done

# hippo-replay: the adaptive preset and its pools as a spec replay the
# bundled trace alike.
info --backend dry --capacity 16G --layout adaptive
spec=$(table_spec)
replay --backend dry --capacity 16G --layout adaptive "$train"
grep -E '^(events|peak live bytes|peak reserved bytes|driver allocations|driver frees|relocations):' "$out" >"$tmp/preset.fig"
replay --backend dry --capacity 16G --layout "$spec" "$train"
name="hippo-replay --layout '$spec'"
expect_status "$name" 0
# the canonical text leaves out period=10000, the default
expect_line "$name" "layout: $(printf '%s' "$spec" | sed 's/,period=10000//g')"
grep -E '^(events|peak live bytes|peak reserved bytes|driver allocations|driver frees|relocations):' "$out" >"$tmp/spec.fig"
if [ -s "$tmp/spec.fig" ] && cmp -s "$tmp/preset.fig" "$tmp/spec.fig"; then
  pass "$name: the same figures as --layout adaptive"
else
  fail "$name: figures differ from --layout adaptive"
  diff "$tmp/preset.fig" "$tmp/spec.fig" | sed 's/^/  /'
fi

# --json names the layout by its canonical text.
printf 'op,id,size,stream\na,1,4096,0\na,2,8388608,1\nf,1,,\nf,2,,\n' \
  >"$tmp/four.csv"
replay --backend dry --quiet --json - \
  --layout 'sliced:page=4M,slice=1M;exclusive:max=1G' "$tmp/four.csv"
expect_status "--json with a spec" 0
if grep -qxF '  "layout": "sliced:page=4M,slice=1M;exclusive:max=1G",' "$out"
then pass "--json with a spec: \"layout\" is the spec"
else fail "--json with a spec: no \"layout\" naming the spec"; fi
if grep -q '"index": 2, "kind": "EXCLUSIVE", "peak_reserved_bytes": [1-9]' "$out"
then pass "--json with a spec: the 8 MiB went to the EXCLUSIVE pool"
else fail "--json with a spec: the EXCLUSIVE pool held nothing"; fi

# ---- malformed specs: exit 2, the message, nothing on stdout --------------
check_bad() { # NAME TOOL SPEC MESSAGE
  if [ "$2" = info ]; then info --backend dry --layout "$3"
  else replay --backend dry --layout "$3" "$tmp/four.csv"; fi
  expect_status "$1" 2
  expect_no_out "$1"
  expect_err "$1" "$4"
  expect_err "$1" "in '$3'"
}
for tool in info replay; do
  check_bad "$tool --layout pages" $tool 'sliced:page=64M,slice=8M;sliced:pages=4M' \
    "--layout: layout spec: pool 2 (sliced): unknown key 'pages' (page, slice, cap, period)"
  check_bad "$tool --layout round_robin" $tool round_robin \
    "layout spec: 'round_robin' is neither a preset (adaptive, sub_slices, exclusive_pages, virtual) nor a pool kind (sliced, exclusive, direct, arena, virtual)"
  check_bad "$tool --layout missing key" $tool 'exclusive:period=5' \
    "layout spec: pool 1 (exclusive): key 'max' is missing (exclusive needs max)"
  check_bad "$tool --layout bad size" $tool 'sliced:page=4Q,slice=1M' \
    "layout spec: pool 1 (sliced): page '4Q' is not a size"
  check_bad "$tool --layout empty" $tool '' "layout spec: empty"
done

# ---- well-formed, refused by the plugin: exit 1 and the plugin's reason ---
spec='direct;sliced:page=1M,slice=2M'
for tool in info replay; do
  name="$tool --layout '$spec'"
  if [ $tool = info ]; then info --backend dry --layout "$spec"
  else replay --backend dry --layout "$spec" "$tmp/four.csv"; fi
  expect_status "$name" 1
  expect_no_out "$name"
  expect_err "$name" "HIPPO_POOL_CONFIG: layout pool 1 (SLICED) field max_slice_size"
  expect_err "$name" "(the plugin's layout pool N is pool N+1 of --layout $spec)"
done

# ---- --help names the spec form -------------------------------------------
for tool in info replay; do
  $tool --help
  if grep -qF "sliced:page=4M,slice=1M;exclusive:max=1G" "$out"; then
    pass "$tool --help: shows a spec"
  else fail "$tool --help: no spec example"; fi
done

lib_finish
