#!/bin/sh
# test-alloc-python.sh -- adapter/hippo_alloc.py against stand-ins of
# PyTorch and CuPy (tests/test-alloc-python.py says what it checks).
# Run by make check, which exports HIPPO_ALLOC_LIB, HIPPO_PLUGIN and
# top_srcdir.  Without python3 the test is skipped (exit 77).
set -u
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
if ! command -v python3 >/dev/null 2>&1; then
  echo "SKIP: test-alloc-python: no python3"
  exit 77
fi
# A sanitizer build's adapter needs its runtime loaded first, which
# python3 does not do.
if ldd "${HIPPO_ALLOC_LIB:-}" 2>/dev/null | grep -q 'lib[at]san'; then
  echo "SKIP: test-alloc-python: a sanitizer build (python3 would need the" \
    "sanitizer's runtime preloaded)"
  exit 77
fi
exec python3 "$top_srcdir/tests/test-alloc-python.py"
