#!/bin/sh
# test-install.sh -- make install: what goes where, hippo.pc, and which
# plugin the tools load (README, "Installing").
#
# Installs this build into a temporary DESTDIR (`make install DESTDIR=D`;
# the prefix stays configure's), then checks:
#  - the plugin is D$(pkglibdir)/hippo.so with no hippo.la beside it; the
#    header, hippo.pc, both tools and the three manual pages are there;
#  - hippo.pc: --modversion is the package's version; --variable=plugindir
#    is $(pkglibdir) (the path without D, as a host runtime sees it once
#    installed) and the plugin is there under D; --variable=plugin is that
#    file;
#  - a small host program built with nothing but `pkg-config --cflags
#    --libs hippo` (PKG_CONFIG_SYSROOT_DIR=D) loads the installed plugin
#    with hippo_load() and opens a HOST device: reserve, resolve, release;
#  - the plugin lookup (tools/toolutil.h, tool_plugin_path): with no
#    HIPPO_PLUGIN, the build tree's hippo-info (also through a symbolic
#    link) loads the build tree's plugin; the installed hippo-info, and a
#    plain copy of the built one, load $(pkglibdir)/hippo.so -- which
#    exists only if hippo is installed there for real, so they either load
#    it or fail naming it, and never name the build tree's plugin, though
#    it exists; HIPPO_PLUGIN names another plugin and --plugin wins over it;
#  - `make uninstall DESTDIR=D` leaves no file behind.
#
# Environment (from make check): MAKE, CC, PKG_CONFIG, top_builddir,
# top_srcdir.  The nested make gets none of the outer make's flags.
# Exits 99 when the build tree has no Makefile.

set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
MAKE=${MAKE:-make}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
CC=${CC:-cc}
unset HIPPO_PLUGIN MAKEFLAGS MFLAGS MAKELEVEL GNUMAKEFLAGS \
  PKG_CONFIG_PATH PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR

. "$top_srcdir/tests/lib.sh"
lib_init test-install "$top_builddir/tools/hippo-info"
[ -f "$top_builddir/Makefile" ] || { echo "no $top_builddir/Makefile"; exit 99; }

dest=$tmp/dest
build_plugin=$top_builddir/plugin/.libs/hippo.so

# run CMD...: runs a command; $status, $out and $err hold the result.
run() {
  "$@" >"$out" 2>"$err"
  status=$?
}

# has FILE NAME: FILE exists (under DESTDIR).
has() {
  if [ -f "$1" ]; then pass "installed: $2"
  else fail "not installed: $2 ($1)"; fi
}

# ---- make install DESTDIR ---------------------------------------------------
(cd "$top_builddir" && $MAKE install DESTDIR="$dest") >"$tmp/install.log" 2>&1
status=$?
if [ "$status" -ne 0 ]; then
  sed 's/^/  /' "$tmp/install.log" | tail -30
  fail "make install DESTDIR=$dest: exit $status"
  lib_finish
  exit 1
fi
pass "make install DESTDIR=..."

# Where things went, from the installed hippo.pc (found, like the tools, by
# what make installed).
pc=$(cd "$dest" && find . -name hippo.pc -path '*/pkgconfig/*' | head -1)
if [ -z "$pc" ]; then
  fail "no hippo.pc under DESTDIR"
  lib_finish
  exit 1
fi
pcdir=$dest${pc#.}
pcdir=${pcdir%/hippo.pc}
pass "installed: hippo.pc (${pcdir#"$dest"})"
pkgconf() {
  PKG_CONFIG_PATH=$pcdir "$PKG_CONFIG" "$@" hippo
}

version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' \
  "$top_builddir/config.h")
got=$(pkgconf --modversion)
if [ -n "$version" ] && [ "$got" = "$version" ]; then
  pass "pkg-config --modversion hippo: $got"
else fail "pkg-config --modversion hippo: '$got', expected '$version'"; fi

plugindir=$(pkgconf --variable=plugindir)
plugin=$(pkgconf --variable=plugin)
prefix=$(pkgconf --variable=prefix)
includedir=$(pkgconf --variable=includedir)
case $plugindir in
  /*/hippo) pass "pkg-config --variable=plugindir hippo: $plugindir" ;;
  *) fail "pkg-config --variable=plugindir hippo: '$plugindir'" ;;
esac
if [ "$plugin" = "$plugindir/hippo.so" ]; then
  pass "pkg-config --variable=plugin hippo: $plugin"
else fail "pkg-config --variable=plugin hippo: '$plugin'"; fi

has "$dest$plugindir/hippo.so" "the plugin in plugindir"
if [ ! -e "$dest$plugindir/hippo.la" ]; then pass "no hippo.la installed"
else fail "hippo.la is installed in $plugindir"; fi
others=$(ls "$dest$plugindir" | grep -v '^hippo\.so$')
if [ -z "$others" ]; then pass "plugindir holds hippo.so only"
else fail "plugindir holds more: $(echo $others)"; fi
has "$dest$includedir/hippo.h" "hippo.h in includedir"
if cmp -s "$dest$includedir/hippo.h" "$top_srcdir/include/hippo.h"; then
  pass "the installed hippo.h is include/hippo.h"
else fail "the installed hippo.h differs from include/hippo.h"; fi
tool=$(cd "$dest" && find . -path '*/bin/hippo-info' | head -1)
tool=$dest${tool#.}
replay=${tool%/hippo-info}/hippo-replay
has "$tool" "hippo-info"
has "$replay" "hippo-replay"
for page in man1/hippo-replay.1 man1/hippo-info.1 man3/hippo.3 \
  man3/hippo-alloc.3; do
  found=$(cd "$dest" && find . -path "*/man/$page" | head -1)
  if [ -n "$found" ]; then pass "installed: ${found#.}"
  else fail "not installed: $page"; fi
done

# ---- the PyTorch / CuPy adapter (hippo-alloc(3)) -----------------------------
adapter=$(pkgconf --variable=adapter)
pythondir=$(pkgconf --variable=pythondir)
has "$dest$adapter" "libhippo-alloc.so (pkg-config --variable=adapter)"
has "$dest$includedir/hippo-alloc.h" "hippo-alloc.h in includedir"
has "$dest$pythondir/hippo_alloc.py" \
  "hippo_alloc.py (pkg-config --variable=pythondir)"
if grep -q "^_DEFAULT_LIB = \"$adapter\"\$" "$dest$pythondir/hippo_alloc.py" \
  2>/dev/null; then
  pass "the installed hippo_alloc.py loads the installed adapter by its path"
else fail "the installed hippo_alloc.py does not name $adapter"; fi
case $pythondir in
  */site-packages|*/dist-packages) pass "pythondir is a site folder: $pythondir" ;;
  *) if command -v python3 >/dev/null 2>&1; then
       fail "pythondir $pythondir is no site folder although python3 is here"
     else pass "no python3: pythondir $pythondir"; fi ;;
esac
exported=$(${NM:-nm} -D --defined-only "$dest$adapter" 2>/dev/null |
  awk '$2 == "T" { print $3 }' | grep -v '^hippo_\(alloc\|free\|cupy_\)' )
if [ -f "$dest$adapter" ] && [ -z "$exported" ]; then
  pass "libhippo-alloc.so exports only its own functions"
else fail "libhippo-alloc.so exports more: $(echo $exported)"; fi
# The installed module drives the installed adapter (the build tree's
# plugin: the installed one exists only under DESTDIR).
# A sanitizer build's adapter needs its runtime loaded first, which python3
# does not do.
if ldd "$dest$adapter" 2>/dev/null | grep -q 'lib[at]san'; then
  echo "SKIP: hippo_alloc.py: a sanitizer build (python3 would need the" \
    "sanitizer's runtime preloaded)"
elif command -v python3 >/dev/null 2>&1; then
  run env PYTHONPATH="$dest$pythondir" HIPPO_ALLOC_LIB="$dest$adapter" \
    HIPPO_PLUGIN="$build_plugin" HIPPO_ALLOC_BACKEND=host python3 -c '
import ctypes, hippo_alloc as h
h.lib.hippo_alloc.restype = ctypes.c_void_p
h.lib.hippo_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
p = h.lib.hippo_alloc(1 << 20, 0, None)
assert p and h.figure("allocations") == 1, h.last_error()
assert h.figure("bytes_in_use") == 1 << 20
h.lib.hippo_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                             ctypes.c_void_p]
h.lib.hippo_free(p, 0, 0, None)
h.lib.hippo_free(p, 0, 0, None)
assert h.figure("allocations") == 0 and h.figure("foreign_frees") == 1
assert "did not hand out" in h.last_error()
try:
    h.figure("bytes_in_us")
    raise SystemExit("figure took a name that is no figure")
except ValueError as e:
    assert "bytes_in_use" in str(e), e
for hook in ("torch", "cupy"):
    try:
        getattr(h, hook)()
    except ImportError:
        pass
print("ok")'
  if [ "$status" -eq 0 ] && [ "$(cat "$out")" = ok ]; then
    pass "hippo_alloc.py allocates and frees through the installed adapter"
  else fail "hippo_alloc.py through the installed adapter (exit $status)"; fi
  # no library where it looks: an ImportError that says what to set
  run env PYTHONPATH="$dest$pythondir" HIPPO_ALLOC_LIB="$tmp/none.so" \
    python3 -c '
try:
    import hippo_alloc
except ImportError as e:
    print("HIPPO_ALLOC_LIB" in str(e) and "none.so" in str(e))'
  if [ "$(cat "$out")" = True ]; then
    pass "hippo_alloc.py without its library: an ImportError naming HIPPO_ALLOC_LIB"
  else fail "hippo_alloc.py without its library: $(cat "$out" "$err")"; fi
else
  echo "SKIP: no python3 to import hippo_alloc.py with"
fi

# ---- a host program built with pkg-config alone ------------------------------
cat >"$tmp/consumer.c" <<'EOC'
/* Loads the plugin named by argv[1] and uses a HOST device. */
#include <hippo.h>
#include <stdio.h>

int main(int argc, char **argv) {
  void *lib, *ptr = NULL;
  const hippo_api *api;
  hippo_device_desc desc = {sizeof desc, HIPPO_BACKEND_HOST, 0, 0, 0, 0, 0};
  hippo_device *dev;
  hippo_stream *s;
  hippo_handle h;
  uint64_t size = 0;

  if (argc != 2 || hippo_load(argv[1], &lib, &api) != HIPPO_SUCCESS) {
    fprintf(stderr, "%s\n", hippo_load_error());
    return 1;
  }
  desc.capacity = 64u << 20;
  if (api->device_open(&desc, &dev) != HIPPO_SUCCESS ||
      api->stream_attach(dev, NULL, &s) != HIPPO_SUCCESS ||
      api->reserve(s, 1u << 20, HIPPO_MODE_AUTO, &h) != HIPPO_SUCCESS ||
      api->resolve(s, h, &ptr, &size) != HIPPO_SUCCESS ||
      api->release(s, h) != HIPPO_SUCCESS ||
      api->stream_detach(s) != HIPPO_SUCCESS ||
      api->device_close(dev) != HIPPO_SUCCESS) {
    fprintf(stderr, "hippo: %s\n", api->last_error());
    return 1;
  }
  printf("abi %u.%u: reserved %llu bytes at %p on a HOST device\n",
         (unsigned)api->abi_version >> 16, (unsigned)api->abi_version & 0xffff,
         (unsigned long long)size, ptr);
  dlclose(lib);
  return size == 1u << 20 && ptr ? 0 : 1;
}
EOC
cflags=$(PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 \
  pkgconf --cflags)
libs=$(PKG_CONFIG_SYSROOT_DIR=$dest pkgconf --libs)
echo "pkg-config --cflags --libs hippo (sysroot DESTDIR): $cflags $libs"
case " $cflags " in
  *" -I$dest"*) pass "--cflags names the installed include directory" ;;
  *) fail "--cflags '$cflags' does not name an include directory under DESTDIR" ;;
esac
# shellcheck disable=SC2086 # the flags are words
run $CC -std=c11 -Wall -Wextra -Werror $cflags -o "$tmp/consumer" \
  "$tmp/consumer.c" $libs
if [ "$status" -eq 0 ]; then pass "a host program builds with pkg-config's flags"
else fail "a host program does not build with pkg-config's flags"; fi
run "$tmp/consumer" "$dest$plugin"
expect_status "the host program loads the installed plugin" 0
if grep -q '^abi 1.0: reserved 1048576 bytes' "$out"; then
  pass "the installed plugin served a HOST device"
else fail "the installed plugin did not serve a HOST device"; fi

# ---- which plugin the tools load -------------------------------------------
# The build tree's tool, run uninstalled: the build tree's plugin.
run "$top_builddir/tools/hippo-info" --backend dry
expect_status "uninstalled hippo-info" 0
expect_line "uninstalled hippo-info" "plugin: $build_plugin"
ln -s "$top_builddir/tools/hippo-info" "$tmp/hippo-info-link"
run "$tmp/hippo-info-link" --backend dry
expect_status "a link to the uninstalled hippo-info" 0
expect_line "a link to the uninstalled hippo-info" "plugin: $build_plugin"
run "$top_builddir/tools/hippo-replay" --backend dry \
  "$top_srcdir/traces/train.csv"
expect_status "uninstalled hippo-replay traces/train.csv" 0
expect_line "uninstalled hippo-replay traces/train.csv" "plugin: $build_plugin"

# installed CMD...: the tool loaded $plugindir/hippo.so (installed there for
# real) or failed naming it; it never named the build tree's plugin.
installed() {
  name=$1
  shift
  run "$@" --backend dry
  if grep -qF "$build_plugin" "$out" "$err"; then
    fail "$name: loaded or named the build tree's plugin"
  elif [ "$status" -eq 0 ] && grep -qxF "plugin: $plugindir/hippo.so" "$out"; then
    pass "$name: loaded $plugindir/hippo.so"
  elif [ "$status" -eq 1 ] && grep -qF "'$plugindir/hippo.so'" "$err"; then
    pass "$name: looked for $plugindir/hippo.so (not installed there)"
  else
    fail "$name: exit $status, did not look for $plugindir/hippo.so"
  fi
}
installed "installed hippo-info" "$tool"
cp "$top_builddir/tools/hippo-info" "$tmp/hippo-info-copy"
installed "a copy of the built hippo-info" "$tmp/hippo-info-copy"

# HIPPO_PLUGIN names the plugin; --plugin wins over it.
HIPPO_PLUGIN=$dest$plugin run "$tool" --backend dry
expect_status "installed hippo-info, HIPPO_PLUGIN=DESTDIR's" 0
expect_line "installed hippo-info, HIPPO_PLUGIN=DESTDIR's" "plugin: $dest$plugin"
HIPPO_PLUGIN=$tmp/no-such-plugin.so run "$tool" --plugin "$dest$plugin" \
  --backend dry
expect_status "installed hippo-info --plugin over HIPPO_PLUGIN" 0
expect_line "installed hippo-info --plugin over HIPPO_PLUGIN" \
  "plugin: $dest$plugin"
HIPPO_PLUGIN=$dest$plugin run "$replay" --backend dry \
  "$top_srcdir/traces/train.csv"
expect_status "installed hippo-replay traces/train.csv" 0
expect_line "installed hippo-replay traces/train.csv" "events: 53939"

# ---- make uninstall DESTDIR ---------------------------------------------------
(cd "$top_builddir" && $MAKE uninstall DESTDIR="$dest") >"$tmp/uninstall.log" 2>&1
status=$?
if [ "$status" -eq 0 ]; then pass "make uninstall DESTDIR=..."
else
  sed 's/^/  /' "$tmp/uninstall.log" | tail -30
  fail "make uninstall DESTDIR=...: exit $status"
fi
left=$(cd "$dest" && find . ! -type d)
if [ -z "$left" ]; then pass "make uninstall left no file"
else fail "make uninstall left: $(echo $left)"; fi

lib_finish
