#!/bin/sh
# test-info.sh -- tests of tools/hippo-info against the built plugin.
#
# Run by `make check`; the Makefile exports HIPPO_INFO (the built tool),
# HIPPO_PLUGIN (the built plugin), top_srcdir, and FAKE_HIP_LIB and
# FAKE_CUDA_LIB (the stand-in GPU runtimes of tests/fake).  By hand:
#   HIPPO_INFO=tools/hippo-info HIPPO_PLUGIN=plugin/.libs/hippo.so \
#     top_srcdir=. sh tests/test-info.sh
# (the checks on a stand-in runtime are skipped, not failed, without
# FAKE_HIP_LIB / FAKE_CUDA_LIB naming a built library).
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

# The stand-in runtimes' settings come from the checks that want them, not
# from the caller's environment.
unset HIPPO_GPU_RUNTIME HIPPO_HIP_LIBRARY HIPPO_CUDA_LIBRARY \
  FAKE_GPU_DEVICES FAKE_GPU_MEMORY FAKE_GPU_ALIGNMENT FAKE_GPU_FAIL

# skip TEXT: a check that cannot run here (counted apart, never a failure).
skipped=0
skip() {
  skipped=$((skipped + 1))
  echo "SKIP: $1"
}

# have_fake VAR: true when $VAR names a built stand-in runtime.
have_fake() {
  eval "lib=\${$1:-}"
  [ -n "$lib" ] && [ -f "$lib" ]
}

# pools: the table rows as "index kind page max cap period", one per line
# (and the notes under the table).
pools() {
  sed -n '/^index /,$p' "$out" | sed 1d | awk '{ $1 = $1; print }'
}

# ---- DRY, 16 GiB, ADAPTIVE: the default -------------------------------------
name="--backend dry --capacity 16G"
info --backend dry --capacity 16G
expect_status "$name" 0
expect_line "$name" "plugin: $HIPPO_PLUGIN"
expect_line "$name" "abi version: 1.0"
expect_line "$name" "backend: dry"
expect_line "$name" "runtime: none"
expect_line "$name" "chosen because: asked for (--backend dry)"
expect_line "$name" "device: DRY (no memory)"
expect_line "$name" "architecture: host"
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

# ---- --layout adaptive names the default -----------------------------------
name="--backend dry --capacity 16G --layout adaptive"
info --backend dry --capacity 16G --layout adaptive
expect_status "$name" 0
expect_line "$name" "preset: adaptive"
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
expect_line "$name" "runtime: none"
expect_line "$name" "chosen because: asked for (--backend host)"
expect_line "$name" "device: HOST (emulated in host memory)"
expect_line "$name" "architecture: host"
expect_line "$name" "total memory: 1073741824 (1 GiB)"
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

# ---- HIP on the stand-in CUDA runtime: a 64 MiB budget ---------------------
# FAKE_GPU_ALIGNMENT is the device's texture alignment, which hippo takes
# (it is above 256); the device has 1 GiB and --capacity makes 64 MiB of it
# hippo's, so the presets size themselves on 64 MiB.
name="fake CUDA, --backend hip --capacity 64MiB"
if have_fake FAKE_CUDA_LIB; then
  HIPPO_GPU_RUNTIME=cuda HIPPO_CUDA_LIBRARY=$FAKE_CUDA_LIB \
    FAKE_GPU_ALIGNMENT=512 info --backend hip --capacity 64MiB
  expect_status "$name" 0
  expect_line "$name" "backend: hip"
  expect_line "$name" "chosen because: asked for (--backend hip)"
  expect_line "$name" "device: Fake CUDA GPU 0"
  expect_line "$name" "architecture: sm 9.4"
  if grep -q '^runtime: CUDA .*libfakecudart\.so' "$out"; then
    pass "$name: the runtime line names libfakecudart.so"
  else fail "$name: the runtime line does not name libfakecudart.so"; fi
  expect_line "$name" "total memory: 67108864 (64 MiB)"
  expect_line "$name" "free memory: 67108864 (64 MiB)"
  expect_line "$name" "alignment: 512"
  # CUDA maps a VIRTUAL pool's granules for a capturing stream
  if grep -q '^virtual memory: yes, granularity [0-9]*, mapped during captures$' "$out"; then
    pass "$name: virtual memory is mapped during captures"
  else fail "$name: the virtual memory line does not say captures map"; fi
  expect_line "$name" "preset: adaptive"
  expect_pools "$name" <<'ROWS'
0 PERSISTENT - - - never
1 SLICED 2 MiB 64 KiB none 10000
2 ARENA 2 MiB 16 MiB none 10000
3 EXCLUSIVE - 64 MiB - 10000

(ARENA: page_size is the smallest page; the pages grow with the largest request
served, up to max_size)
ROWS
  if [ ! -s "$err" ]; then pass "$name: nothing on stderr"
  else fail "$name: something on stderr"; fi

  # A budget above the device's memory: all of the device, and a note.
  name="fake CUDA, --capacity 4T"
  HIPPO_GPU_RUNTIME=cuda HIPPO_CUDA_LIBRARY=$FAKE_CUDA_LIB \
    info --backend hip --capacity 4T
  expect_status "$name" 0
  expect_line "$name" "total memory: 1073741824 (1 GiB)"
  expect_err "$name" "is more than the hip device has"
else
  skip "$name: FAKE_CUDA_LIB names no built library"
fi

# ---- HIP on the stand-in HIP runtime, chosen by AUTO -----------------------
name="fake HIP, --backend auto --layout sub_slices"
if have_fake FAKE_HIP_LIB; then
  HIPPO_GPU_RUNTIME=hip HIPPO_HIP_LIBRARY=$FAKE_HIP_LIB \
    FAKE_GPU_MEMORY=1073741824 info --backend auto --layout sub_slices
  expect_status "$name" 0
  expect_line "$name" "backend: hip"
  expect_line "$name" "device: Fake HIP GPU 0"
  expect_line "$name" "architecture: cc 9.4"
  if grep -q '^runtime: HIP .*libfakehip\.so' "$out"; then
    pass "$name: the runtime line names libfakehip.so"
  else fail "$name: the runtime line does not name libfakehip.so"; fi
  if grep -q '^chosen because: AUTO chose HIP: .*libfakehip\.so' "$out"; then
    pass "$name: chosen because AUTO chose HIP"
  else fail "$name: no 'chosen because: AUTO chose HIP' line"; fi
  expect_line "$name" "total memory: 1073741824 (1 GiB)"
  expect_line "$name" "alignment: 256"
  expect_pools "$name" <<'ROWS'
0 PERSISTENT - - - never
1 SLICED 4 MiB 1 MiB none 10000
2 SLICED 16 MiB 4 MiB none 10000
3 SLICED 64 MiB 16 MiB none 10000
4 SLICED 256 MiB 64 MiB none 10000
5 EXCLUSIVE - 1 GiB - 10000
ROWS
else
  skip "$name: FAKE_HIP_LIB names no built library"
fi

# ---- the VIRTUAL preset: one VIRTUAL pool (DRY has virtual memory) --------
name="--backend dry --capacity 16G --layout virtual"
info --backend dry --capacity 16G --layout virtual
expect_status "$name" 0
expect_line "$name" "virtual memory: yes, granularity 4096"
expect_line "$name" "preset: virtual"
expect_pools "$name" <<'ROWS'
0 PERSISTENT - - - never
1 VIRTUAL - 16 GiB - never

(VIRTUAL pool 1: a range of 16 GiB per stream, granules of 2 MiB, mapped bytes at most 1.50 % above peak live, no unmap threshold)
ROWS

# ---- a stand-in without virtual memory: the preset falls back, and says so -
name="fake HIP, FAKE_GPU_NO_VMM=1, --layout virtual"
if have_fake FAKE_HIP_LIB; then
  HIPPO_GPU_RUNTIME=hip HIPPO_HIP_LIBRARY=$FAKE_HIP_LIB FAKE_GPU_NO_VMM=1 \
    FAKE_GPU_MEMORY=1073741824 info --backend hip --layout virtual
  expect_status "$name" 0
  expect_line "$name" "virtual memory: no (VIRTUAL pools unavailable)"
  expect_line "$name" "preset: adaptive"
  if grep -q '^chosen because: the VIRTUAL preset needs virtual memory.*ADAPTIVE serves instead' "$out"; then
    pass "$name: the note says ADAPTIVE serves instead"
  else fail "$name: no note that ADAPTIVE serves instead"; fi
  name="fake HIP, FAKE_GPU_NO_VMM=1, --layout virtual:range=64M"
  HIPPO_GPU_RUNTIME=hip HIPPO_HIP_LIBRARY=$FAKE_HIP_LIB FAKE_GPU_NO_VMM=1 \
    FAKE_GPU_MEMORY=1073741824 info --backend hip --layout virtual:range=64M
  expect_status "$name" 1
  if grep -q 'HIPPO_UNSUPPORTED' "$err" && grep -q 'no virtual memory' "$err"; then
    pass "$name: refused, HIPPO_UNSUPPORTED, no virtual memory"
  else fail "$name: not refused with HIPPO_UNSUPPORTED naming no virtual memory"; fi
else
  skip "$name: FAKE_HIP_LIB names no built library"
fi

# ---- no GPU: --backend hip says why; AUTO falls back to HOST and says why ---
name="FAKE_GPU_FAIL=nodevice"
if have_fake FAKE_HIP_LIB && have_fake FAKE_CUDA_LIB; then
  export FAKE_GPU_FAIL=nodevice
  HIPPO_HIP_LIBRARY=$FAKE_HIP_LIB HIPPO_CUDA_LIBRARY=$FAKE_CUDA_LIB \
    info --backend hip
  expect_status "$name, --backend hip" 1
  if [ ! -s "$out" ]; then pass "$name, --backend hip: nothing on stdout"
  else fail "$name, --backend hip: something on stdout"; fi
  expect_err "$name, --backend hip" "HIPPO_NO_DEVICE"
  # last_error names both runtimes' calls, and the hint of the last one:
  # the message reached stderr whole.
  expect_err "$name, --backend hip" "hipGetDeviceCount"
  expect_err "$name, --backend hip" "cudaGetDeviceCount"
  expect_err "$name, --backend hip" "check the NVIDIA driver"

  HIPPO_HIP_LIBRARY=$FAKE_HIP_LIB HIPPO_CUDA_LIBRARY=$FAKE_CUDA_LIB \
    info --backend auto
  expect_status "$name, --backend auto" 0
  expect_line "$name, --backend auto" "backend: host"
  expect_line "$name, --backend auto" "runtime: none"
  expect_line "$name, --backend auto" \
    "device: HOST (emulated in host memory)"
  # The plugin's note is cut at 191 characters; the line has the reason
  # whole (both runtimes tried, each with its call and hint).
  if grep -q '^chosen because: AUTO chose HOST: no GPU: .*hipGetDeviceCount.*cudaGetDeviceCount.*check the NVIDIA driver' "$out"; then
    pass "$name, --backend auto: chosen because AUTO chose HOST, and why"
  else fail "$name, --backend auto: no whole 'chosen because' line"; fi
  unset FAKE_GPU_FAIL
else
  skip "$name: FAKE_HIP_LIB or FAKE_CUDA_LIB names no built library"
fi

# HIPPO_GPU_RUNTIME=cuda with a library that is not there: the path tried
# and the loader's reason reach stderr.
name="HIPPO_CUDA_LIBRARY missing"
HIPPO_GPU_RUNTIME=cuda HIPPO_CUDA_LIBRARY=$tmp/no-such-libcudart.so \
  info --backend hip
expect_status "$name" 1
expect_err "$name" "no CUDA runtime could be loaded"
expect_err "$name" "$tmp/no-such-libcudart.so"

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
expect_first_err "--backend gpu" \
  "hippo-info: --backend takes auto, host, dry or hip, not 'gpu'"
info --layout round_robin
expect_status "--layout round_robin" 2
expect_first_err "--layout round_robin" \
  "hippo-info: --layout: layout spec: 'round_robin' is neither a preset (adaptive, sub_slices, exclusive_pages, virtual) nor a pool kind (sliced, exclusive, direct, arena, virtual); in 'round_robin'"
info --capacity 12X
expect_status "--capacity 12X" 2
expect_first_err "--capacity 12X" \
  "hippo-info: --capacity takes a byte count such as 1073741824 or 1G, not '12X'"
# Below one alignment an emulated device could serve nothing: the plugin
# refuses it; 0 is the default (16 GiB).
info --backend dry --capacity 1
expect_status "--capacity 1" 1
if grep -qF "capacity 1 B is below the alignment 256 B" "$err"
then pass "--capacity 1: refused, why said"
else fail "--capacity 1: '$(head -c 300 "$err")'"; fi
# A spec the plugin fits to its rules (a cap below the page, a size above
# the device) gets a note per pool changed; one it takes as it is, none.
info --backend dry --layout 'sliced:page=4M,slice=1M,cap=1M;exclusive:max=17G'
expect_status "a spec fitted" 0
expect_line "a spec fitted" "note: pool 1: page_size 4 MiB asked, 1 MiB in force (the pool's rules fit it to the device and the cap: hippo(3))"
expect_line "a spec fitted" "note: pool 2: max_size 17 GiB asked, 16 GiB in force (the pool's rules fit it to the device and the cap: hippo(3))"
info --backend dry --layout 'sliced:page=4M,slice=1M;exclusive:max=8G'
expect_status "a spec as it is" 0
if grep -q '^note:' "$out"; then fail "a spec as it is: a note"
else pass "a spec as it is: no note"; fi

# Sizes that are no whole unit keep the table's columns: each cell starts
# under its heading.
info --backend dry --capacity 12345678901
expect_status "--capacity 12345678901" 0
if awk '/^index  kind/ { h = index($0, "max_pool_size"); d = index($0, "dealloc_period") }
        /^3 +EXCLUSIVE/ { if (h && substr($0, h, 2) == "- " && substr($0, d, 5) == "10000") ok = 1 }
        END { exit !ok }' "$out"
then pass "--capacity 12345678901: the columns stay aligned"
else fail "--capacity 12345678901: columns shifted"; sed -n '/^index/,/^$/p' "$out"; fi
info --backend dry --capacity 0
expect_status "--capacity 0" 0
expect_line "--capacity 0" "total memory: 17179869184 (16 GiB)"
info extra-argument
expect_status "an argument" 2
expect_first_err "an argument" \
  "hippo-info: takes no arguments, but got 'extra-argument'"
# A usage error names the option: a short one in a cluster by its letter
# (not the argument before it), a long one as given.
for args in "--backend dry -xh|unknown option '-x'" \
    "--nosuch|unknown option '--nosuch'" \
    "--backend|option needs an argument: '--backend'"; do
  info ${args%%|*}
  expect_status "${args%%|*}" 2
  expect_first_err "${args%%|*}" "hippo-info: ${args#*|}"
done
# A write that fails (a full disk) is exit 1 with a message.
if [ -w /dev/full ]; then
  "$HIPPO_INFO" --backend dry >/dev/full 2>"$err"
  status=$?
  expect_status "stdout on a full disk" 1
  expect_err "stdout on a full disk" "hippo-info: cannot write to stdout:"
fi
info --help
expect_status "--help" 0
if grep -q '^usage: hippo-info' "$out"; then pass "--help: usage on stdout"
else fail "--help: no usage on stdout"; fi

[ "$skipped" -eq 0 ] || echo "($skipped groups of checks skipped)"
lib_finish
