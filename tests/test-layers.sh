#!/bin/sh
# test-layers.sh -- the core's layers point one way (src/layers.txt): no
# file of src/ (nor plugin/entry.c) includes the header of a layer above
# its own, and every file of src/ has a layer.
#
# Environment (from make check): top_srcdir.

set -u
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
table=$top_srcdir/src/layers.txt

. "$top_srcdir/tests/lib.sh"
lib_init test-layers /bin/sh

# "FILE LAYER" lines, one per file of the table
files=$(awk '!/^#/ && NF >= 3 { for (i = 3; i <= NF; i++) print $i, $1 }' \
  "$table")
layer_of() { # layer_of NAME: the layer of src/NAME, or nothing
  printf '%s\n' "$files" | awk -v f="$1" '$1 == f { print $2; exit }'
}

# every file of src/ is in the table, once
for path in "$top_srcdir"/src/*.c "$top_srcdir"/src/*.h; do
  name=$(basename "$path")
  n=$(printf '%s\n' "$files" | awk -v f="$name" '$1 == f' | wc -l)
  case $n in
    1) ;;
    0) fail "src/$name has no layer in src/layers.txt" ;;
    *) fail "src/$name is in src/layers.txt $n times" ;;
  esac
done
# and every file of the table exists
for name in $(printf '%s\n' "$files" | awk '{ print $1 }'); do
  [ -f "$top_srcdir/src/$name" ] ||
    fail "src/layers.txt names src/$name, which does not exist"
done

# no include points up
checked=0
for name in $(printf '%s\n' "$files" | awk '{ print $1 }'); do
  path=$top_srcdir/src/$name
  [ -f "$path" ] || continue
  own=$(layer_of "$name")
  for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$path"); do
    case $inc in config.h|hippo.h) continue ;; esac
    theirs=$(layer_of "$inc")
    if [ -z "$theirs" ]; then
      fail "src/$name includes \"$inc\", which has no layer"
    elif [ "$theirs" -gt "$own" ]; then
      fail "src/$name (layer $own) includes $inc (layer $theirs, above it)"
    else
      checked=$((checked + 1))
    fi
  done
done
# The sliced core calls no kind: its files (sliced.h states the contract a
# kind supplies) name none of the kinds' functions or headers; the kinds
# (pool_sliced.c, pool_arena*.c, pool_virtual.c) call down into it.
for name in sliced.h sliced_index.h sliced_paths.h sliced.c \
            pool_sliced_check.c; do
  up=$(grep -nE 'hippo__(virtual|arena)_[a-z_]+|hippo__pool_(sliced|arena|virtual)_create|"pool_(arena|virtual|sliced)\.h"' \
         "$top_srcdir/src/$name" | head -1)
  [ -z "$up" ] || fail "src/$name (the sliced core) calls up into a kind: $up"
done
pass "the sliced core's five files name no kind's function"
[ "$checked" -gt 50 ] || fail "only $checked includes checked: is the table read?"
pass "$checked includes of $(printf '%s\n' "$files" | wc -l) files point down or sideways"
lib_finish
