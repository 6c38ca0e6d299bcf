#!/bin/sh
# test-info.sh -- tests of tools/hippo-info against the built plugin.
#
# Run by `make check`; the Makefile exports HIPPO_INFO (the built tool),
# HIPPO_PLUGIN (the built plugin) and top_srcdir.  By hand:
#   HIPPO_INFO=tools/hippo-info HIPPO_PLUGIN=plugin/.libs/hippo.so \
#     top_srcdir=. sh tests/test-info.sh
#
# The expected layouts are those of src/layout.c: ADAPTIVE (the default) on
# a device of T bytes has a SLICED pool of 2 MiB pages for requests up to
# 64 KiB, an ARENA whose pages grow from 2 MiB up to T/4, and an EXCLUSIVE
# pool up to T; SUB_SLICES has SLICED pages 4 MiB, 16 MiB, ... (x4) up to
# T/4, each taking slices up to a quarter of its page, then an EXCLUSIVE
# pool up to T; EXCLUSIVE_PAGES has EXCLUSIVE pools up to 1 MiB, 8 MiB, ...
# (x8) below T, then one up to T.  Every preset pool has dealloc_period
# 10000.

set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
HIPPO_INFO=${HIPPO_INFO:-$top_srcdir/tools/hippo-info}
HIPPO_PLUGIN=${HIPPO_PLUGIN:-$top_srcdir/plugin/.libs/hippo.so}
export HIPPO_PLUGIN

. "$top_srcdir/tests/lib.sh"
lib_init test-info "$HIPPO_INFO"

# info ARGS...: runs the tool; $status, $out and $err hold the result.
info() {
  "$HIPPO_INFO" "$@" >"$out" 2>"$err"
  status=$?
}

# pools: the table rows as "index kind page max cap period", one per line.
pools() {
  sed -n '/^index /,$p' "$out" | sed 1d | awk '{ $1 = $1; print }'
}

# expect_pools NAME: stdin holds the expected rows.
expect_pools() {
  cat >"$tmp/want"
  pools >"$tmp/got"
  if cmp -s "$tmp/want" "$tmp/got"; then pass "$1: the pool table"
  else
    fail "$1: the pool table differs"
    diff "$tmp/want" "$tmp/got" | sed 's/^/  /'
  fi
}

# ---- DRY, 16 GiB, ADAPTIVE: the default -------------------------------------
name="--backend dry --capacity 16G"
info --backend dry --capacity 16G
expect_status "$name" 0
expect_line "$name" "plugin: $HIPPO_PLUGIN"
expect_line "$name" "abi version: 1"
expect_line "$name" "backend: dry"
expect_line "$name" "total memory: 17179869184 (16 GiB)"
expect_line "$name" "alignment: 256"
expect_line "$name" "preset: adaptive"
expect_line "$name" "pools: 4 (index 0 is the persistent pool)"
expect_pools "$name" <<'ROWS'
0 PERSISTENT - - - never
1 SLICED 2 MiB 64 KiB none 10000
2 ARENA 2 MiB 4 GiB none 10000
3 EXCLUSIVE - 16 GiB - 10000

(ARENA: page_size is the smallest page; the pages grow with the largest request
served, up to max_size)
ROWS

# ---- DRY, 16 GiB, SUB_SLICES: the ladder ------------------------------------
name="--backend dry --capacity 16G --layout sub_slices"
info --backend dry --capacity 16G --layout sub_slices
expect_status "$name" 0
expect_line "$name" "preset: sub_slices"
expect_line "$name" "pools: 8 (index 0 is the persistent pool)"
expect_pools "$name" <<'ROWS'
0 PERSISTENT - - - never
1 SLICED 4 MiB 1 MiB none 10000
2 SLICED 16 MiB 4 MiB none 10000
3 SLICED 64 MiB 16 MiB none 10000
4 SLICED 256 MiB 64 MiB none 10000
5 SLICED 1 GiB 256 MiB none 10000
6 SLICED 4 GiB 1 GiB none 10000
7 EXCLUSIVE - 16 GiB - 10000
ROWS

# ---- HOST, 1 GiB: the ladder stops at T/4 ----------------------------------
name="--backend host --capacity 1G --layout sub_slices"
info --backend host --capacity 1G --layout sub_slices
expect_status "$name" 0
expect_line "$name" "backend: host"
expect_pools "$name" <<'ROWS'
0 PERSISTENT - - - never
1 SLICED 4 MiB 1 MiB none 10000
2 SLICED 16 MiB 4 MiB none 10000
3 SLICED 64 MiB 16 MiB none 10000
4 SLICED 256 MiB 64 MiB none 10000
5 EXCLUSIVE - 1 GiB - 10000
ROWS

# ---- DRY, 16 GiB, EXCLUSIVE_PAGES ------------------------------------------
name="--backend dry --capacity 16G --layout exclusive_pages"
info --backend dry --capacity 16G --layout exclusive_pages
expect_status "$name" 0
expect_line "$name" "preset: exclusive_pages"
expect_pools "$name" <<'ROWS'
0 PERSISTENT - - - never
1 EXCLUSIVE - 1 MiB - 10000
2 EXCLUSIVE - 8 MiB - 10000
3 EXCLUSIVE - 64 MiB - 10000
4 EXCLUSIVE - 512 MiB - 10000
5 EXCLUSIVE - 4 GiB - 10000
6 EXCLUSIVE - 16 GiB - 10000
ROWS

# ---- errors ----------------------------------------------------------------
# HIP: prints the GPU's pools, or fails with the status name without one.
info --backend hip
case $status in
  0) expect_line "--backend hip" "backend: hip" ;;
  1)
    if [ ! -s "$out" ] && grep -q 'HIPPO_[A-Z_]*: ' "$err"; then
      pass "--backend hip without a device: exit 1, status named"
    else fail "--backend hip without a device: no status name, or output"; fi ;;
  *) fail "--backend hip: exit $status, expected 0 or 1" ;;
esac
info --plugin "$tmp/no-such-plugin.so" --backend dry
expect_status "--plugin missing" 1
if grep -qF "no-such-plugin.so" "$err"; then pass "--plugin missing: named"
else fail "--plugin missing: the message does not name the file"; fi
info --backend gpu
expect_status "--backend gpu" 2
info --layout round_robin
expect_status "--layout round_robin" 2
info --capacity 12X
expect_status "--capacity 12X" 2
info extra-argument
expect_status "an argument" 2
info --help
expect_status "--help" 0
if grep -q '^usage: hippo-info' "$out"; then pass "--help: usage on stdout"
else fail "--help: no usage on stdout"; fi

lib_finish
