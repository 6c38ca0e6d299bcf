#!/bin/sh
# test-header.sh -- include/hippo.h stands alone: it compiles by itself as
# C11 and, where a C++ compiler is present, as C++11, with warnings as
# errors, and its loader helper links.  Host runtimes include it from both.
pass=0 fail=0 skip=0
hdr="$top_srcdir/include/hippo.h"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/use.c" <<'EOC'
#include "hippo.h"
int main(void) {
  void *lib;
  const hippo_api *api;
  return hippo_load("/nonexistent/hippo.so", &lib, &api) == HIPPO_LOAD_FAILED &&
                 hippo_load_error()[0] != '\0'
             ? 0
             : 1;
}
EOC
cp "$tmp/use.c" "$tmp/use.cc"

check() { # name command...
  name=$1; shift
  if "$@" > "$tmp/out" 2>&1; then
    pass=$((pass + 1)); echo "PASS: $name"
  else
    fail=$((fail + 1)); echo "FAIL: $name"; cat "$tmp/out"
  fi
}

CC_=${CC:-cc}
check "C11 alone" $CC_ -std=c11 -Wall -Wextra -Werror -pedantic \
  -I"$top_srcdir/include" -o "$tmp/c" "$tmp/use.c" -ldl
check "C11 loader reports a missing file" "$tmp/c"
if command -v c++ > /dev/null 2>&1; then
  check "C++11 alone" c++ -std=c++11 -Wall -Wextra -Werror \
    -I"$top_srcdir/include" -o "$tmp/cc" "$tmp/use.cc" -ldl
  check "C++11 loader reports a missing file" "$tmp/cc"
else
  skip=$((skip + 1)); echo "SKIP: no C++ compiler"
fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
