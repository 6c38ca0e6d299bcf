#!/bin/sh
# test-hipcc.sh -- tests/gpu-kernels.cu (kernels that fill and check a
# hippo reservation, one source for HIP and CUDA) compiled by hipcc for
# AMD targets: make check has no GPU, so it is compiled and linked, the
# fat binary holding code for every target of HIPCC_TARGETS, and run only
# to see it start and find no GPU (exit 77).  tests/device-check.sh builds
# it with nvcc on an NVIDIA GPU and runs it.
#
# Skipped (77) without hipcc (configure found none), or where hipcc cannot
# compile a one-line kernel for the targets (docs/testing.md: what
# Debian's hipcc needs); a kernel hipcc compiles but gpu-kernels.cu not
# fails.  Environment (make check): HIPCC, HIPCC_TARGETS, HIPPO_PLUGIN,
# top_srcdir.
set -u
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
HIPCC=${HIPCC:-}
HIPCC_TARGETS=${HIPCC_TARGETS:-gfx90a gfx940 gfx1030}
if [ -z "$HIPCC" ]; then
  echo "SKIP: test-hipcc: configure found no hipcc"
  exit 77
fi
. "$top_srcdir/tests/lib.sh"
lib_init test-hipcc "$HIPCC"
arch=
for t in $HIPCC_TARGETS; do arch="$arch --offload-arch=$t"; done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hippo-hipcc.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# hipcc asks rocm_agent_enumerator for the GPUs it has; with targets given
# it does not need the answer (a traceback without /dev/kfd is harmless)
cat >"$tmp/one.hip" <<'KERNEL'
#include <hip/hip_runtime.h>
__global__ void one(int *p) { *p = 1; }
KERNEL
# shellcheck disable=SC2086 # $arch splits into options
if ! "$HIPCC" $arch -c "$tmp/one.hip" -o "$tmp/one.o" >"$tmp/one.log" 2>&1
then
  echo "SKIP: test-hipcc: $HIPCC cannot compile a kernel for" \
    "$HIPCC_TARGETS here:"
  grep -v 'rocm_agent_enumerator\|Traceback\|File "\|readFromKFD\|main()' \
    "$tmp/one.log" | head -5 | sed 's/^/  /'
  exit 77
fi
# shellcheck disable=SC2086
if "$HIPCC" $arch -x hip -I"$top_srcdir/include" \
  "$top_srcdir/tests/gpu-kernels.cu" -o "$tmp/gpu-kernels" -ldl \
  >"$tmp/build.log" 2>&1; then
  pass "gpu-kernels.cu compiled and linked by $HIPCC for $HIPCC_TARGETS"
else
  fail "gpu-kernels.cu does not compile with $HIPCC:"
  grep -v 'rocm_agent_enumerator\|Traceback\|File "\|readFromKFD\|main()' \
    "$tmp/build.log" | head -20 | sed 's/^/  /'
fi
if [ -f "$tmp/gpu-kernels" ]; then
  for t in $HIPCC_TARGETS; do
    if strings "$tmp/gpu-kernels" | grep -q "amdgcn-amd-amdhsa--$t"; then
      pass "the fat binary holds code for $t"
    else fail "the fat binary holds no code for $t"; fi
  done
  # a sanitizer build's plugin needs its runtime loaded first, which this
  # program (built by hipcc, without it) does not do
  if ldd "${HIPPO_PLUGIN:-}" 2>/dev/null | grep -q 'lib[at]san'; then
    echo "SKIP (run): a sanitizer build's plugin"
    lib_finish
    exit $?
  fi
  "$tmp/gpu-kernels" >"$tmp/run.log" 2>&1
  rc=$?
  case $rc in
  77) pass "gpu-kernels starts and finds no GPU (exit 77): $(head -c 80 "$tmp/run.log")..." ;;
  0) pass "gpu-kernels ran on a GPU: $(tr '\n' ' ' <"$tmp/run.log")" ;;
  *) fail "gpu-kernels exit $rc: $(cat "$tmp/run.log")" ;;
  esac
fi
lib_finish
