#!/bin/sh
# test-exports.sh -- the plugin exports exactly one symbol and links no GPU
# runtime.
#
# `nm -D --defined-only` lists the dynamic symbols the plugin defines.  The
# only one allowed is hippo_plugin_entry, a function (type T).  With
# --defined-only, GNU nm does not list the undefined (U) or weak undefined
# (w) references the plugin makes; should a toolchain ever list _init/_fini
# or similar there, this test fails on purpose: the version script
# (plugin/hippo.map) must hide every other name, and a new exported name is
# an ABI change to be decided, not ignored.
#
# It also checks that the plugin references no hippo__* symbol it does not
# define (a core file missing from the build would otherwise only show up
# when dlopen(RTLD_NOW) fails).
#
# Environment (from make check): HIPPO_PLUGIN, the built plugin; NM.
# Prints "N passed, N failed"; exits 0 when all passed, 1 otherwise.

NM=${NM:-nm}
passed=0
failed=0

pass() { passed=$((passed + 1)); echo "PASS: $1"; }
fail() { failed=$((failed + 1)); echo "FAIL: $1"; }

finish() {
  echo "$passed passed, $failed failed"
  test "$failed" -eq 0 && exit 0
  exit 1
}

if test -z "$HIPPO_PLUGIN" || test ! -f "$HIPPO_PLUGIN"; then
  fail "HIPPO_PLUGIN ('$HIPPO_PLUGIN') is not a built plugin"
  finish
fi

if ! defined=$($NM -D --defined-only "$HIPPO_PLUGIN" 2>&1); then
  fail "$NM -D --defined-only $HIPPO_PLUGIN failed: $defined"
  finish
fi
echo "$NM -D --defined-only $HIPPO_PLUGIN:"
echo "$defined" | sed 's/^/  /'

# The names, whatever the symbol type (the last field of each line).
names=$(echo "$defined" | awk 'NF >= 2 { print $NF }' | sed 's/@.*//' | sort -u)
if test "$names" = "hippo_plugin_entry"; then
  pass "the only defined dynamic symbol is hippo_plugin_entry"
else
  fail "defined dynamic symbols are: $(echo $names)"
fi

# hippo_plugin_entry is a function in the text section.
type=$(echo "$defined" | awk '$NF ~ /^hippo_plugin_entry(@.*)?$/ { print $(NF-1) }')
if test "$type" = "T"; then
  pass "hippo_plugin_entry is a function (type T)"
else
  fail "hippo_plugin_entry has type '$type', expected T"
fi

# No dangling internal references.
undefined=$($NM -D --undefined-only "$HIPPO_PLUGIN" 2>/dev/null |
  awk '{ print $NF }' | grep '^hippo' || true)
if test -z "$undefined"; then
  pass "no undefined hippo* symbols"
else
  fail "undefined hippo symbols (a source missing from the build?): $(echo $undefined)"
fi

# No GPU library is linked: the HIP backend loads its runtime at run time
# (src/gpu_rt.h), so the plugin loads on a machine with neither ROCm nor
# CUDA.  readelf -d lists what the dynamic loader must find first.
if command -v readelf >/dev/null 2>&1; then
  needed=$(readelf -d "$HIPPO_PLUGIN" | awk '/NEEDED/ { print $NF }' |
    tr -d '[]')
  echo "NEEDED: $(echo $needed)"
  gpu=$(echo "$needed" | grep -i -E 'amdhip|hiprt|cudart|libcuda|rocm' || true)
  if test -z "$gpu"; then
    pass "no GPU runtime among the plugin's NEEDED libraries"
  else
    fail "the plugin needs GPU libraries at load time: $(echo $gpu)"
  fi
  undefined=$($NM -D --undefined-only "$HIPPO_PLUGIN" 2>/dev/null |
    awk '{ print $NF }' | grep -E '^(hip|cuda)[A-Z]' || true)
  if test -z "$undefined"; then
    pass "no hip* or cuda* symbol is resolved at load time"
  else
    fail "GPU symbols resolved at load time: $(echo $undefined)"
  fi
else
  echo "SKIP: readelf is not installed"
fi

finish
