#!/bin/sh
# device-check.sh -- everything hippo checks on a real GPU, as one script:
# the machine and the runtime found, tests/test-hip, tests/test-gpu-device,
# kernels on hippo's memory (tests/gpu-kernels.cu, built with nvcc: a
# reservation filled and checked, granules given back under a running
# kernel, a peer GPU's kernel on them where there are two),
# the behaviour suite on the device (tests/suite-gpu.sh device), the
# device benchmark (bench/hippo-gpu-bench), then hippo under PyTorch and
# CuPy (tests/frameworks-check.py, through adapter/.libs/libhippo-alloc.so).  Meant for a machine lent with
# a GPU for a few minutes: it builds nothing and needs the build outputs of
# a machine without one, carried over:
#
#   plugin/.libs/hippo.so  tools/hippo-info  tests/test-*  tests/fake/.libs
#   adapter/.libs          (libhippo-alloc.so, for the frameworks step)
#   bench/hippo-gpu-bench (make bench/hippo-gpu-bench)
#   device-libs/           (optional: --prepare copies the shared libraries
#                           the programs link beyond the C library, e.g.
#                           libsubunit, for a machine that may lack them)
#
# Usage, in the repository root:
#   sh tests/device-check.sh [--fake[=cuda|hip]] [--quick] [--fork]
#                            [--no-suite] [--no-bench] [--no-frameworks]
#   sh tests/device-check.sh --prepare
#     --fake      rehearse without a GPU, on the stand-in runtimes of
#                 tests/fake (built by make check): HIPPO_GPU_RUNTIME and
#                 HIPPO_{CUDA,HIP}_LIBRARY name them, FAKE_GPU_MEMORY is
#                 141 GiB (as an H200), the bench runs --quick
#     --quick     the fuzz share 20,000 operations and the bench --quick
#     --fork      run each Check test in a process of its own (CK_FORK=yes)
#     --no-suite, --no-bench, --no-frameworks   leave out those steps
#     --prepare   copy the libraries (see above) into device-libs/, then stop
#
# The runtime: as hippo finds it (src/gpu_rt.c: HIP first, then CUDA, the
# sonames, /opt/rocm/lib, /usr/local/cuda/lib64), unless HIPPO_GPU_RUNTIME
# or HIPPO_{HIP,CUDA}_LIBRARY are set.  When that finds no device, the
# script tries each libcudart it can find (/usr/local/cuda*/lib64,
# /usr/local/cuda*/targets/*/lib, the system's, Python's nvidia packages)
# with HIPPO_GPU_RUNTIME=cuda and keeps the first that opens a device (a
# CUDA 13 runtime needs a driver of release 580 or later; a CUDA 12 one
# serves older drivers).
#
# Budget: about 7 minutes on an H200.  Each step has a time limit:
# test-hip 120 s, test-gpu-device 180 s, gpu-kernels 180 s, the suite
# 300 s, the bench 120 s, the frameworks 240 s (PyTorch's and CuPy's
# start-up included).  Those add up to 19 minutes, so the whole script
# also keeps to DEVICE_CHECK_BUDGET seconds (default 540: a lent machine
# runs one command for at most 10 minutes): a step gets at most what is
# left of it, and a step reached with nothing left fails as not run.
# Without PyTorch (a rehearsal, or an
# image without it) the frameworks step stops at its import and says so.  The fuzz share of the suite is
# HIPPO_FUZZ_OPS (default here 200,000 operations).  Check runs the tests
# of a program in that one process (CK_FORK=no, as make check-valgrind
# does; --fork or CK_FORK=yes for a process per test): each process starts
# the GPU runtime afresh, which can take a second or more (without
# persistence mode), and the suite holds about 240 tests.  With forks,
# Check's per-test limits are multiplied by CK_TIMEOUT_MULTIPLIER (default
# here 4: a driver call costs microseconds where HOST's cost nanoseconds).
#
# Output: stdout, and $OUT/device-check.log when OUT is set.  Exit status:
# 0 every step passed, 1 a step failed, 2 the build outputs are missing,
# 77 no GPU (nothing was checked; not with --fake).

set -u

# ---- the log: re-run under tee, keeping the exit status --------------------
if [ -n "${OUT:-}" ] && [ -z "${DEVICE_CHECK_LOGGING:-}" ]; then
  mkdir -p "$OUT"
  DEVICE_CHECK_LOGGING=1
  export DEVICE_CHECK_LOGGING
  rcfile=$(mktemp "${TMPDIR:-/tmp}/device-check.rc.XXXXXX")
  { sh "$0" "$@" 2>&1; echo $? >"$rcfile"; } | tee "$OUT/device-check.log"
  rc=$(cat "$rcfile")
  rm -f "$rcfile"
  exit "${rc:-1}"
fi

fake=
quick=no
suite=yes
bench=yes
frameworks=yes
prepare=no
for arg in "$@"; do
  case $arg in
  --fake | --fake=cuda) fake=cuda ;;
  --fake=hip) fake=hip ;;
  --quick) quick=yes ;;
  --fork) CK_FORK=yes ;;
  --no-suite) suite=no ;;
  --no-bench) bench=no ;;
  --no-frameworks) frameworks=no ;;
  --prepare) prepare=yes ;;
  -h | --help)
    sed -n '2,/^$/s/^# \{0,1\}//p' "$0"
    exit 0 ;;
  *)
    echo "device-check.sh: unknown argument '$arg' (try --help)" >&2
    exit 2 ;;
  esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
t_start=$(date +%s)
progs="tests/test-hip tests/test-gpu-device tests/test-abi tests/test-status
       tests/test-device tests/test-manager tests/test-layout tests/test-relocation
       tests/test-guard tests/test-faults tests/test-hostile tests/test-stress
       tests/test-fuzz tests/test-virtual tests/test-virtual-limits
       tests/test-virtual-budget
       tests/test-adapter"
bins="tools/hippo-info $progs bench/hippo-gpu-bench
      adapter/.libs/libhippo-alloc.so"

say() { printf '%s\n' "$*"; }
elapsed() { echo $(($(date +%s) - t_start)); }

# ---- --prepare: the shared libraries beyond the C library ------------------
if [ "$prepare" = yes ]; then
  mkdir -p device-libs
  for b in $bins plugin/.libs/hippo.so; do
    [ -f "$b" ] || continue
    ldd "$b" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
  done | sort -u | while read -r lib; do
    case ${lib##*/} in
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | \
      ld-linux*) ;;
    *) cp -L "$lib" device-libs/ && say "device-libs/${lib##*/} <- $lib" ;;
    esac
  done
  exit 0
fi

say "# hippo device check, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
say "host: $(uname -n) $(uname -srm); $(nproc 2>/dev/null || echo '?') cores"
say "root: $root"
if git rev-parse --short HEAD >/dev/null 2>&1; then
  changed=$(git diff --quiet HEAD 2>/dev/null || echo ' (with changes)')
  say "commit: $(git rev-parse --short HEAD)$changed"
fi

# ---- the build outputs -----------------------------------------------------
if [ ! -f bench/hippo-gpu-bench ] && [ "$bench" = yes ]; then
  say "note: bench/hippo-gpu-bench is not built (make bench/hippo-gpu-bench):" \
      "the bench is left out"
  bench=no
fi
missing=
for f in plugin/.libs/hippo.so $bins; do
  [ -f "$f" ] || [ "$f" = bench/hippo-gpu-bench ] || missing="$missing $f"
done
if [ -n "$missing" ]; then
  say "device-check.sh: build outputs missing (run make, then make check" \
      "for the test programs):$missing"
  exit 2
fi
if [ -d device-libs ]; then
  LD_LIBRARY_PATH=$root/device-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export LD_LIBRARY_PATH
  say "device-libs/:" device-libs/*
fi
unresolved=
for b in $bins plugin/.libs/hippo.so; do
  [ -f "$b" ] || continue
  nf=$(ldd "$b" 2>/dev/null | grep 'not found' | awk '{print $1}' |
       tr '\n' ' ')
  [ -n "$nf" ] && unresolved="$unresolved
  $b: $nf"
done
if [ -n "$unresolved" ]; then
  say "device-check.sh: shared libraries not found (run 'sh" \
      "tests/device-check.sh --prepare' where the build was made and carry" \
      "device-libs/):$unresolved"
  exit 2
fi

# ---- the environment --------------------------------------------------------
HIPPO_PLUGIN=$root/plugin/.libs/hippo.so
HIPPO_ALLOC_LIB=$root/adapter/.libs/libhippo-alloc.so
export HIPPO_PLUGIN HIPPO_ALLOC_LIB
HIPPO_FUZZ_OPS=${HIPPO_FUZZ_OPS:-200000}
budget=${DEVICE_CHECK_BUDGET:-540}
CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-4}
CK_FORK=${CK_FORK:-no}
bench_args="--reps 5 --iters 2048 --batch 32 --calls 100000 --relocate-mib 1024"
if [ "$quick" = yes ]; then
  HIPPO_FUZZ_OPS=20000
  bench_args=--quick
fi
if [ -n "$fake" ]; then
  HIPPO_GPU_RUNTIME=$fake
  if [ "$fake" = cuda ]; then
    HIPPO_CUDA_LIBRARY=$root/tests/fake/.libs/libfakecudart.so
    export HIPPO_CUDA_LIBRARY
  else
    HIPPO_HIP_LIBRARY=$root/tests/fake/.libs/libfakehip.so
    export HIPPO_HIP_LIBRARY
  fi
  FAKE_GPU_MEMORY=${FAKE_GPU_MEMORY:-151397597184} # 141 GiB, as an H200
  export HIPPO_GPU_RUNTIME FAKE_GPU_MEMORY
  bench_args=--quick
  say "REHEARSAL (--fake=$fake): the stand-in runtime tests/fake, no GPU"
fi
export HIPPO_PLUGIN HIPPO_FUZZ_OPS CK_TIMEOUT_MULTIPLIER CK_FORK

say ""
say "## the machine"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi -L 2>&1
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,persistence_mode \
    --format=csv 2>&1
else
  say "nvidia-smi: not present"
fi
if command -v rocm-smi >/dev/null 2>&1; then
  rocm-smi --showproductname 2>&1 | grep -i 'card\|gpu' | head -8
fi
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && say "$d:" "$d"/libcudart.so*
done
say "environment: HIPPO_GPU_RUNTIME=${HIPPO_GPU_RUNTIME:-} HIPPO_HIP_LIBRARY=${HIPPO_HIP_LIBRARY:-}" \
    "HIPPO_CUDA_LIBRARY=${HIPPO_CUDA_LIBRARY:-} HIPPO_FUZZ_OPS=$HIPPO_FUZZ_OPS" \
    "CK_FORK=$CK_FORK CK_TIMEOUT_MULTIPLIER=$CK_TIMEOUT_MULTIPLIER"

# ---- the runtime: as hippo finds it, else any libcudart that opens a device
say ""
say "## the runtime (tools/hippo-info --backend hip)"
if ! tools/hippo-info --backend hip >/dev/null 2>&1 &&
  [ -z "$fake" ] && [ -z "${HIPPO_CUDA_LIBRARY:-}" ] &&
  [ -z "${HIPPO_HIP_LIBRARY:-}" ]; then
  say "hippo finds no device by itself; trying each libcudart found:"
  # pip's CUDA runtime under python3's own site directories too (a venv's,
  # site-packages as well as dist-packages): nvidia/cuda_runtime/lib (CUDA
  # 12 wheels) and nvidia/cu13/lib (assumed for CUDA 13 wheels); the
  # patterns are expanded unquoted below
  py_libs=$(python3 -c 'import site
for d in site.getsitepackages() + [site.getusersitepackages()]:
    print(d + "/nvidia/cuda_runtime/lib/libcudart.so.*",
          d + "/nvidia/cu1*/lib/libcudart.so.*")' 2>/dev/null)
  # shellcheck disable=SC2086 # $py_libs: patterns, split and expanded
  for lib in /usr/local/cuda/lib64/libcudart.so.* \
    /usr/local/cuda*/lib64/libcudart.so.* \
    /usr/local/cuda*/targets/*/lib/libcudart.so.* \
    /usr/lib/x86_64-linux-gnu/libcudart.so.* \
    /usr/local/lib/python3*/*-packages/nvidia/cuda_runtime/lib/libcudart.so.* \
    /usr/local/lib/python3*/*-packages/nvidia/cu1*/lib/libcudart.so.* \
    /usr/lib/python3/dist-packages/nvidia/cuda_runtime/lib/libcudart.so.* \
    $py_libs; do
    [ -f "$lib" ] || continue
    real=$(readlink -f "$lib")
    case " ${seen:-} " in *" $real "*) continue ;; esac
    seen="${seen:-} $real"
    if HIPPO_GPU_RUNTIME=cuda HIPPO_CUDA_LIBRARY=$lib \
      tools/hippo-info --backend hip >/dev/null 2>&1; then
      HIPPO_GPU_RUNTIME=cuda
      HIPPO_CUDA_LIBRARY=$lib
      export HIPPO_GPU_RUNTIME HIPPO_CUDA_LIBRARY
      say "  $lib: opens a device; using it"
      break
    fi
    say "  $lib: $(HIPPO_GPU_RUNTIME=cuda HIPPO_CUDA_LIBRARY=$lib \
      tools/hippo-info --backend hip 2>&1 | grep -m1 'cannot open' |
      sed 's/.*HIPPO_NO_DEVICE: //' | cut -c1-240)"
  done
fi
if ! tools/hippo-info --backend hip 2>&1; then
  say ""
  say "device-check.sh: NO GPU: hippo cannot open a HIP device (above);" \
      "nothing was checked ($(elapsed) s)"
  exit 77
fi

# ---- the steps ---------------------------------------------------------------
results=
failed=0
# step NAME LIMIT COMMAND...: runs it with a time limit (LIMIT, or what is
# left of the script's budget if less; DEVICE_CHECK_STEP_LIMIT tells the
# command), prints its output and its result; a skip (77) counts as a
# failure: a device answered.  A step reached with under 10 s of the
# budget left is not run and fails.
step() {
  name=$1 limit=$2
  shift 2
  left=$((budget - $(elapsed)))
  [ "$left" -lt "$limit" ] && limit=$left
  say ""
  if [ "$limit" -lt 10 ]; then
    say "## $name: not run, the budget of $budget s is spent" \
        "(DEVICE_CHECK_BUDGET)"
    failed=$((failed + 1))
    results="$results
$(printf '%-34s %-8s %5s s' "$name" "NOT-RUN" 0)"
    return
  fi
  say "## $name (limit ${limit} s)"
  DEVICE_CHECK_STEP_LIMIT=$limit
  export DEVICE_CHECK_STEP_LIMIT
  s0=$(date +%s)
  if command -v timeout >/dev/null 2>&1; then
    timeout -k 10 "$limit" "$@"
  else
    "$@"
  fi
  rc=$?
  secs=$(($(date +%s) - s0))
  case $rc in
  0) verdict=PASS ;;
  77) if [ "${skip_ok:-no}" = yes ]; then
        verdict="SKIP (exit 77: $skip_why)"
        rc=0
      else
        verdict="FAIL (skipped, exit 77, although hippo-info opened a device)"
      fi ;;
  124 | 137) verdict="FAIL (over its limit of $limit s)" ;;
  *) verdict="FAIL (exit $rc)" ;;
  esac
  [ "$rc" -eq 0 ] || failed=$((failed + 1))
  say "-- $name: $verdict, $secs s"
  results="$results
$(printf '%-34s %-8s %5s s' "$name" "${verdict%% *}" "$secs")"
}

step test-hip 120 tests/test-hip
step test-gpu-device 180 tests/test-gpu-device
# Kernels on hippo's memory (tests/gpu-kernels.cu): a VIRTUAL reservation
# filled and checked by kernels, and granules given back while a kernel
# still writes them (no fault: hippo waits), built here with nvcc (an
# NVIDIA machine's toolkit; hipcc where ROCm is installed).
gpu_cc=
for c in nvcc /usr/local/cuda/bin/nvcc hipcc; do
  if command -v "$c" >/dev/null 2>&1; then gpu_cc=$c; break; fi
done
if [ -z "$fake" ] && [ -n "$gpu_cc" ]; then
  kernels=$(mktemp "${TMPDIR:-/tmp}/gpu-kernels.XXXXXX")
  case $gpu_cc in
  *hipcc) lang="-x hip" ;;
  *) lang="-x cu" ;;
  esac
  # shellcheck disable=SC2086 # $lang splits into options
  step "gpu-kernels ($gpu_cc)" 180 sh -c '"$1" $2 -Iinclude tests/gpu-kernels.cu -o "$3" -ldl && "$3"' \
    sh "$gpu_cc" "$lang" "$kernels"
  rm -f "$kernels"
else
  say ""
  say "## gpu-kernels: ${fake:+a rehearsal, }no nvcc or hipcc${fake:+ needed}: left out"
fi
if [ "$suite" = yes ]; then
  step "suite-gpu.sh device" 300 env top_builddir=. sh tests/suite-gpu.sh device
fi
if [ "$bench" = yes ]; then
  # shellcheck disable=SC2086 # bench_args splits into options
  step hippo-gpu-bench 120 bench/hippo-gpu-bench --plugin "$HIPPO_PLUGIN" \
    $bench_args
fi
if [ "$frameworks" = yes ]; then
  if command -v python3 >/dev/null 2>&1; then
    # no PyTorch is a skip only in a rehearsal: a lent GPU machine has it
    skip_ok=no
    skip_why="no PyTorch or no GPU it sees"
    [ -n "$fake" ] && skip_ok=yes
    # -u: its lines reach the log as they are printed, not lost in
    # python3's pipe buffer when the step's limit kills it
    step "frameworks (PyTorch, CuPy)" 240 python3 -u tests/frameworks-check.py
    skip_ok=no
  else
    say ""
    say "## frameworks: no python3, left out"
  fi
fi

say ""
[ -n "$fake" ] && rehearsal=" (REHEARSAL on the stand-in runtime, no GPU)"
say "## summary${rehearsal:-}"
say "$results" | sed '/^$/d'
say "total: $(elapsed) s; $failed step(s) failed"
[ "$failed" -eq 0 ]
