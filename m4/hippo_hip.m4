# hippo_hip.m4 -- configure macros of hippo.  All of hippo's own: the
# build needs Autoconf, Automake, Libtool and pkg-config's pkg.m4, and no
# autoconf-archive.
#
# HIPPO_GPU_HEADERS
#   hippo links no GPU runtime: the HIP backend loads AMD's HIP runtime or
#   NVIDIA's CUDA runtime at run time (src/gpu_rt.h), and needs no header to
#   build.  When the runtimes' headers are installed, tests/test-gpu-rt
#   compares hippo's copies of their constants with them:
#   HAVE_HIP_HEADERS (hip/hip_runtime_api.h, ROCm's AMD platform) and
#   HAVE_CUDA_HEADERS (cuda_runtime_api.h, in the standard paths or
#   /usr/local/cuda/include; CUDA_HEADERS_CPPFLAGS says where).
AC_DEFUN([HIPPO_GPU_HEADERS], [
  hippo_gpu_headers=
  hippo_save_CPPFLAGS=$CPPFLAGS
  CPPFLAGS="$CPPFLAGS -D__HIP_PLATFORM_AMD__"
  AC_CHECK_HEADER([hip/hip_runtime_api.h],
    [AC_DEFINE([HAVE_HIP_HEADERS], [1], [ROCm HIP headers are installed.])
     hippo_gpu_headers="HIP"])
  CPPFLAGS=$hippo_save_CPPFLAGS
  CUDA_HEADERS_CPPFLAGS=
  for hippo_dir in "" /usr/local/cuda/include; do
    CPPFLAGS="$hippo_save_CPPFLAGS${hippo_dir:+ -I$hippo_dir}"
    AS_UNSET([ac_cv_header_cuda_runtime_api_h])
    AC_CHECK_HEADER([cuda_runtime_api.h], [hippo_cuda_h=yes], [hippo_cuda_h=no])
    CPPFLAGS=$hippo_save_CPPFLAGS
    AS_IF([test "x$hippo_cuda_h" = xyes], [
      AC_DEFINE([HAVE_CUDA_HEADERS], [1], [CUDA runtime headers are installed.])
      CUDA_HEADERS_CPPFLAGS="${hippo_dir:+-I$hippo_dir}"
      hippo_gpu_headers="$hippo_gpu_headers${hippo_gpu_headers:+ and }CUDA"
      break])
  done
  AC_SUBST([CUDA_HEADERS_CPPFLAGS])
  hippo_gpu_headers=${hippo_gpu_headers:-none}
])

# HIPPO_CHECK_CFLAG(FLAG, [IF-ACCEPTED], [IF-NOT])
#   Whether the C compiler compiles a trivial program with FLAG added to
#   CFLAGS and -Werror (so a flag the compiler only warns about counts as
#   not accepted).  The answer is cached as hippo_cv_cflag_FLAG (FLAG made
#   a shell name); FLAG may be a shell variable.
AC_DEFUN([HIPPO_CHECK_CFLAG], [
  AS_VAR_PUSHDEF([hippo_cflag_var], [hippo_cv_cflag_$1])
  AC_CACHE_CHECK([whether $CC accepts $1], [hippo_cflag_var], [
    hippo_cflag_save=$CFLAGS
    CFLAGS="$CFLAGS -Werror $1"
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([], [])],
      [AS_VAR_SET([hippo_cflag_var], [yes])],
      [AS_VAR_SET([hippo_cflag_var], [no])])
    CFLAGS=$hippo_cflag_save])
  AS_VAR_IF([hippo_cflag_var], [yes], [$2], [$3])
  AS_VAR_POPDEF([hippo_cflag_var])
])

# HIPPO_PTHREAD: POSIX threads.  PTHREAD_CFLAGS is -pthread when the
#   compiler builds and links a threaded program with it (gcc and clang
#   do; it also defines _REENTRANT), else empty; PTHREAD_LIBS is what
#   pthread_create needs beyond the C library with those flags: empty
#   (glibc 2.34 and later, musl) or -lpthread.  Stops configure when no
#   program calling pthread_create links.  Both are AC_SUBSTed; the caller
#   adds them to CFLAGS and LIBS.
AC_DEFUN([HIPPO_PTHREAD], [
  m4_pushdef([hippo_pthread_program], [AC_LANG_PROGRAM([[#include <pthread.h>
static void *hippo_run(void *arg) { return arg; }]],
    [[pthread_t t;
  if (pthread_create(&t, 0, hippo_run, 0) != 0) return 1;
  return pthread_join(t, 0);]])])
  AC_CACHE_CHECK([whether $CC takes -pthread], [hippo_cv_pthread_flag], [
    hippo_pthread_save=$CFLAGS
    CFLAGS="$CFLAGS -Werror -pthread"
    AC_LINK_IFELSE([hippo_pthread_program],
      [hippo_cv_pthread_flag=yes], [hippo_cv_pthread_flag=no])
    CFLAGS=$hippo_pthread_save])
  AS_IF([test "x$hippo_cv_pthread_flag" = xyes],
    [PTHREAD_CFLAGS=-pthread], [PTHREAD_CFLAGS=])
  AC_CACHE_CHECK([for the library of pthread_create], [hippo_cv_pthread_libs], [
    hippo_cv_pthread_libs=no
    hippo_pthread_save=$CFLAGS
    hippo_pthread_save_libs=$LIBS
    CFLAGS="$CFLAGS $PTHREAD_CFLAGS"
    for hippo_lib in "" -lpthread; do
      LIBS="$hippo_lib $hippo_pthread_save_libs"
      AC_LINK_IFELSE([hippo_pthread_program],
        [hippo_cv_pthread_libs=${hippo_lib:-none needed}; break])
    done
    CFLAGS=$hippo_pthread_save
    LIBS=$hippo_pthread_save_libs])
  AS_CASE([$hippo_cv_pthread_libs],
    [no], [AC_MSG_ERROR([hippo needs POSIX threads: no program calling pthread_create links])],
    ["none needed"], [PTHREAD_LIBS=],
    [PTHREAD_LIBS=$hippo_cv_pthread_libs])
  m4_popdef([hippo_pthread_program])
  AC_SUBST([PTHREAD_CFLAGS])
  AC_SUBST([PTHREAD_LIBS])
])

# HIPPO_WARN_FLAGS: the warnings hippo builds with (gcc and clang),
# -fvisibility=hidden where the compiler takes it, and the core's tuning
# (HOT_CFLAGS): -fno-tree-slp-vectorize, because GCC 12's -O2 packs the
# 32-bit fields of a slice record and the pool figures into SSE registers
# with shuffles on the reservation path, more instructions than the plain
# stores it replaces (measured: 2 % of a reserve+release).
AC_DEFUN([HIPPO_WARN_FLAGS], [
  WARN_CFLAGS=
  for hippo_flag in -Wall -Wextra -Wshadow -Wstrict-prototypes \
      -Wmissing-prototypes -Wpointer-arith -Wformat=2 -Wvla; do
    HIPPO_CHECK_CFLAG([$hippo_flag], [WARN_CFLAGS="$WARN_CFLAGS $hippo_flag"])
  done
  AC_SUBST([WARN_CFLAGS])
  VISIBILITY_CFLAGS=
  HIPPO_CHECK_CFLAG([-fvisibility=hidden], [VISIBILITY_CFLAGS=-fvisibility=hidden])
  AC_SUBST([VISIBILITY_CFLAGS])
  HOT_CFLAGS=
  HIPPO_CHECK_CFLAG([-fno-tree-slp-vectorize], [HOT_CFLAGS=-fno-tree-slp-vectorize])
  AC_SUBST([HOT_CFLAGS])
])

# HIPPO_SANITIZERS: --enable-sanitizers=LIST builds everything (the core,
# the plugin, the tools and the tests, which dlopen the plugin) with
# -fsanitize=LIST, e.g. "address,undefined" or "thread".  The flags go into
# CC (and CXX), so libtool passes them to every compile and link.
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
    # the C++ test (tests/test-frameworks.cpp) dlopens the instrumented
    # adapter: it is instrumented too (AC_PROG_CXX comes first)
    AS_IF([test -n "$CXX"], [CXX="$CXX $hippo_san_flags"])
  ])
  AM_CONDITIONAL([HAVE_SANITIZERS], [test "x$hippo_sanitizers" != xno])
  # Check's per-test timeouts, scaled in a sanitizer build (make check sets
  # CK_TIMEOUT_MULTIPLIER unless the caller did): ThreadSanitizer runs the
  # threaded tests 5-15 times slower, AddressSanitizer about 2-3 times.
  AS_CASE([$hippo_sanitizers],
    [*thread*], [HIPPO_CK_TIMEOUT_MULTIPLIER=10],
    [no], [HIPPO_CK_TIMEOUT_MULTIPLIER=1],
    [HIPPO_CK_TIMEOUT_MULTIPLIER=3])
  AC_SUBST([HIPPO_CK_TIMEOUT_MULTIPLIER])
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
