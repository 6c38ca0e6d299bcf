# hippo_hip.m4 -- find the HIP runtime (libamdhip64) for hippo's HIP backend.
#
# HIPPO_CHECK_HIP
#   --with-hip[=DIR]  default "check": look in the standard paths (Debian's
#                     libamdhip64-dev installs under /usr); DIR adds
#                     DIR/include and DIR/lib.  --without-hip builds HOST and
#                     DRY only.  An explicit --with-hip that fails is an error.
#   Sets HIP_CPPFLAGS, HIP_LDFLAGS, HIP_LIBS, defines HAVE_HIP and the
#   AM_CONDITIONAL HAVE_HIP.  CPPFLAGS/LDFLAGS/LIBS are saved and restored
#   around the checks, so nothing else links against HIP by accident.
AC_DEFUN([HIPPO_CHECK_HIP], [
  AC_ARG_WITH([hip],
    [AS_HELP_STRING([--with-hip@<:@=DIR@:>@],
      [build the HIP backend against ROCm HIP (default: if found)])],
    [], [with_hip=check])

  hippo_have_hip=no
  HIP_CPPFLAGS="-D__HIP_PLATFORM_AMD__"
  HIP_LDFLAGS=
  HIP_LIBS=
  AS_IF([test "x$with_hip" != xno], [
    AS_CASE(["$with_hip"],
      [yes|check], [],
      [HIP_CPPFLAGS="$HIP_CPPFLAGS -I$with_hip/include"
       HIP_LDFLAGS="-L$with_hip/lib"])
    hippo_save_CPPFLAGS=$CPPFLAGS
    hippo_save_LDFLAGS=$LDFLAGS
    hippo_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $HIP_CPPFLAGS"
    LDFLAGS="$LDFLAGS $HIP_LDFLAGS"
    LIBS=
    hippo_hip_header=no
    AC_CHECK_HEADERS([hip/hip_runtime_api.h], [hippo_hip_header=yes])
    AS_IF([test "x$hippo_hip_header" = xyes],
      [AC_SEARCH_LIBS([hipMalloc], [amdhip64],
        [hippo_have_hip=yes; HIP_LIBS=$LIBS])])
    CPPFLAGS=$hippo_save_CPPFLAGS
    LDFLAGS=$hippo_save_LDFLAGS
    LIBS=$hippo_save_LIBS
    AS_IF([test "x$hippo_have_hip" = xno && test "x$with_hip" != xcheck],
      [AC_MSG_ERROR([--with-hip was given but hip/hip_runtime_api.h or libamdhip64 was not found (install libamdhip64-dev, or pass --with-hip=DIR)])])
  ])
  AS_IF([test "x$hippo_have_hip" = xyes], [
    AC_DEFINE([HAVE_HIP], [1], [Define to 1 to build the HIP backend.])
    hippo_hip_summary="yes ($HIP_LIBS)"
    hippo_backends="HIP HOST DRY"
  ], [
    HIP_CPPFLAGS=
    hippo_hip_summary="no (HOST and DRY only)"
    hippo_backends="HOST DRY"
  ])
  AC_SUBST([HIP_CPPFLAGS])
  AC_SUBST([HIP_LDFLAGS])
  AC_SUBST([HIP_LIBS])
  AM_CONDITIONAL([HAVE_HIP], [test "x$hippo_have_hip" = xyes])
])

# HIPPO_WARN_FLAGS: the warnings hippo builds with (gcc and clang), and
# -fvisibility=hidden where the compiler takes it.
AC_DEFUN([HIPPO_WARN_FLAGS], [
  WARN_CFLAGS=
  for hippo_flag in -Wall -Wextra -Wshadow -Wstrict-prototypes \
      -Wmissing-prototypes -Wpointer-arith -Wformat=2 -Wvla; do
    AX_CHECK_COMPILE_FLAG([$hippo_flag], [WARN_CFLAGS="$WARN_CFLAGS $hippo_flag"],
                          [], [-Werror])
  done
  AC_SUBST([WARN_CFLAGS])
  VISIBILITY_CFLAGS=
  AX_CHECK_COMPILE_FLAG([-fvisibility=hidden],
                        [VISIBILITY_CFLAGS=-fvisibility=hidden], [], [-Werror])
  AC_SUBST([VISIBILITY_CFLAGS])
])

# HIPPO_SANITIZERS: --enable-sanitizers=LIST builds everything (the core,
# the plugin, the tools and the tests, which dlopen the plugin) with
# -fsanitize=LIST, e.g. "address,undefined" or "thread".  The flags go into
# CC, so libtool passes them to every compile and link.
AC_DEFUN([HIPPO_SANITIZERS], [
  AC_ARG_ENABLE([sanitizers],
    [AS_HELP_STRING([--enable-sanitizers=LIST],
      [build with -fsanitize=LIST (address,undefined or thread)])],
    [], [enable_sanitizers=no])
  hippo_sanitizers=no
  AS_IF([test "x$enable_sanitizers" != xno], [
    AS_IF([test "x$enable_sanitizers" = xyes], [enable_sanitizers=address,undefined])
    hippo_san_flags="-fsanitize=$enable_sanitizers -fno-omit-frame-pointer -fno-sanitize-recover=all -g"
    hippo_save_CC=$CC
    CC="$CC $hippo_san_flags"
    AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])], [hippo_sanitizers=$enable_sanitizers],
      [AC_MSG_ERROR([the compiler cannot build with -fsanitize=$enable_sanitizers])])
  ])
  AM_CONDITIONAL([HAVE_SANITIZERS], [test "x$hippo_sanitizers" != xno])
])

# HIPPO_FUZZ: --enable-fuzz builds tests/fuzz/hippo-fuzz, the fuzz driver
# as a libFuzzer target (make fuzz).  It needs clang (CC=clang): every
# object is built with -fsanitize=fuzzer-no-link (coverage for libFuzzer)
# plus address and undefined, and the target links -fsanitize=fuzzer.
AC_DEFUN([HIPPO_FUZZ], [
  AC_ARG_ENABLE([fuzz],
    [AS_HELP_STRING([--enable-fuzz],
      [build the libFuzzer target tests/fuzz/hippo-fuzz (needs CC=clang)])],
    [], [enable_fuzz=no])
  hippo_fuzz=no
  AS_IF([test "x$enable_fuzz" = xyes], [
    hippo_save_CC=$CC
    CC="$CC -fsanitize=fuzzer"
    AC_LINK_IFELSE([AC_LANG_SOURCE([[
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return d && n ? 0 : 0; }
]])], [hippo_fuzz=yes],
      [AC_MSG_ERROR([--enable-fuzz needs a compiler with libFuzzer: configure CC=clang --enable-fuzz])])
    CC="$hippo_save_CC -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g"
  ])
  AM_CONDITIONAL([FUZZ], [test "x$hippo_fuzz" = xyes])
])
