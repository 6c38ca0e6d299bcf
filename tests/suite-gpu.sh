#!/bin/sh
# suite-gpu.sh RUNTIME -- the behaviour suite on the HIP backend.
#
# The ABI test programs open HOST devices for their behaviour tests (pools,
# install, modes, handles, relocation with bytes read back, the capture
# guard, record_use, faults, hostile inputs, threads, the fuzz driver).
# With HIPPO_TEST_BACKEND=hip (tests/testutil.h, tu_backend) they open HIP
# devices instead, so one source runs on every backend.  RUNTIME:
#   fake-hip   AMD's calls, served by tests/fake (libfakehip.so)
#   fake-cuda  NVIDIA's calls, served by tests/fake (libfakecudart.so)
#   device     the real runtimes and a real GPU; exit 77 (skip) without one
# make check runs the three as suite-fake-hip.sh, suite-fake-cuda.sh and
# suite-device.sh.  A test HOST alone can run says so and passes
# (tu_host_only).  test-hip (HIP device 0 as such) and test-gpu-device
# (what only a GPU shows: a real capture and its graph, relocation read
# back, the whole device out of memory; on the stand-ins a 2 GiB one) run
# in each too.  Prints each program's result; exits 0, 1 or 77.
#
# Environment (from make check): top_builddir, HIPPO_PLUGIN, FAKE_HIP_LIB,
# FAKE_CUDA_LIB.  By hand, from the build tree:
#   top_builddir=. HIPPO_PLUGIN=plugin/.libs/hippo.so \
#     FAKE_CUDA_LIB=tests/fake/.libs/libfakecudart.so \
#     sh tests/suite-gpu.sh fake-cuda

set -u
runtime=${1:?usage: suite-gpu.sh fake-hip|fake-cuda|device}
top_builddir=${top_builddir:-.}
# HIPPO_SUITE_PROGS narrows the list (.ci/run's ThreadSanitizer pass runs
# the threaded programs only).
progs=${HIPPO_SUITE_PROGS:-"test-abi test-status test-device test-manager test-layout
       test-relocation test-guard test-faults test-hostile test-stress
       test-fuzz test-hip test-gpu-device test-virtual test-virtual-limits
       test-virtual-budget
       test-adapter test-frameworks"}

HIPPO_TEST_BACKEND=hip
export HIPPO_TEST_BACKEND
case $runtime in
fake-hip)
  HIPPO_GPU_RUNTIME=hip HIPPO_HIP_LIBRARY=$FAKE_HIP_LIB
  export HIPPO_GPU_RUNTIME HIPPO_HIP_LIBRARY ;;
fake-cuda)
  HIPPO_GPU_RUNTIME=cuda HIPPO_CUDA_LIBRARY=$FAKE_CUDA_LIB
  export HIPPO_GPU_RUNTIME HIPPO_CUDA_LIBRARY ;;
device) ;;
*) echo "suite-gpu.sh: unknown runtime '$runtime'" >&2; exit 99 ;;
esac
case $runtime in
fake-*)
  # room for HOST's default 16 GiB devices (pages map lazily)
  FAKE_GPU_MEMORY=${FAKE_GPU_MEMORY:-68719476736}
  # the fuzz driver's share here: 200,000 operations (1,000,000 on HOST)
  HIPPO_FUZZ_OPS=${HIPPO_FUZZ_OPS:-200000}
  # the virtual-memory granularity: 2 MiB on fake-cuda (as NVIDIA's GPUs
  # report), 64 KiB on fake-hip (as ROCm releases that report less than
  # 2 MiB); test-virtual scales its scripted sizes to either
  if [ "$runtime" = fake-cuda ]; then
    FAKE_GPU_VM_GRANULARITY=${FAKE_GPU_VM_GRANULARITY:-2097152}
  else
    FAKE_GPU_VM_GRANULARITY=${FAKE_GPU_VM_GRANULARITY:-65536}
  fi
  export FAKE_GPU_MEMORY HIPPO_FUZZ_OPS FAKE_GPU_VM_GRANULARITY ;;
esac

# Is there a GPU?  hippo-info answers for the backend HIP.
if [ "$runtime" = device ]; then
  if ! "$top_builddir/tools/hippo-info" --backend hip >/dev/null 2>&1; then
    echo "suite-gpu.sh: no GPU is present (hippo-info --backend hip" \
         "fails): skipped"
    "$top_builddir/tools/hippo-info" --backend hip 2>&1 | sed 's/^/  /'
    exit 77
  fi
fi

failed=0
for p in $progs; do
  start=$(date +%s)
  # test-gpu-device takes the whole device until it runs out of memory:
  # on the stand-ins, a 2 GiB one
  mem=${FAKE_GPU_MEMORY:-}
  case $runtime/$p in
  fake-*/test-gpu-device) mem=2147483648 ;;
  esac
  if FAKE_GPU_MEMORY=$mem "$top_builddir/tests/$p" >"$p.$runtime.out" 2>&1
  then
    echo "PASS: $p on $runtime ($(($(date +%s) - start)) s)"
  else
    failed=$((failed + 1))
    echo "FAIL: $p on $runtime; its output:"
    sed 's/^/  /' "$p.$runtime.out"
  fi
  grep '^test-\|skipped on a GPU' "$p.$runtime.out" | sort | uniq -c |
    sed 's/^/  /'
  rm -f "$p.$runtime.out"
done
[ "$failed" -eq 0 ]
