#!/bin/sh
# anchors.sh -- the team's anchors harness (../shared/anchors, read-only
# there) run on a copy that speaks ABI 1.x (the emulation table,
# pool_report's fourth argument) and has a hippo_virtual4g row: one VIRTUAL
# pool with a 4 GiB range beside hippo_sliced4g, with its ratios to it.
# bench/anchors.patch is the change; this script copies the harness,
# applies it, builds and runs it (run.sh: validate, then pinned runs).
#
#   bench/anchors.sh [OPS] [REPS] [RUNS] [CORE]     from a built checkout
#
# ANCHORS_SRC: the harness (default: ../shared/anchors beside the checkout);
# ANCHORS_BUILD: where the copy, the build and the results go (default
# /tmp/hippo-anchors-v); HIPPO_PLUGIN: the plugin measured (default this
# checkout's).  Needs g++ and libvulkan-dev, as the harness does.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
src=${ANCHORS_SRC:-$top/../shared/anchors}
out=${ANCHORS_BUILD:-/tmp/hippo-anchors-v}
if [ ! -f "$src/bench.cpp" ]; then
  echo "anchors.sh: no harness at $src; set ANCHORS_SRC" >&2
  exit 2
fi
rm -rf "$out/src" "$out/bench" "$out/validate"
mkdir -p "$out"
cp -R "$src" "$out/src"
chmod -R u+w "$out/src"
patch -s -d "$out/src" -p1 < "$top/bench/anchors.patch"
HIPPO_INCLUDE=${HIPPO_INCLUDE:-$top/include}
HIPPO_PLUGIN=${HIPPO_PLUGIN:-$top/plugin/.libs/hippo.so}
ANCHORS_BUILD=$out
export HIPPO_INCLUDE HIPPO_PLUGIN ANCHORS_BUILD
exec sh "$out/src/run.sh" "$@"
