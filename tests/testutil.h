/* testutil.h -- helpers shared by the Check test programs.
 *
 * Everything here is `static inline`, so a test program includes it once and
 * pays only for what it uses.  One set of assertions for every test program,
 * in three groups; a file's own helpers with a meaning of their own follow
 * the same naming (CK_* for status assertions):
 *
 *  ABI tests (they dlopen the built plugin, path in $HIPPO_PLUGIN):
 *    tu_api()             the loaded table (hippo_load; aborts the test with
 *                         hippo_load_error() when the plugin cannot load)
 *    tu_entry()           the raw hippo_plugin_entry of the loaded plugin
 *    tu_emu(api)          the emulation table (hippo_emu_api)
 *    tu_open()            open a HOST/DRY device (capacity, layout, flags)
 *    tu_attach()          create an emulated stream and attach it
 *    tu_detach()          detach it and destroy the emulated stream
 *    tu_layout_*()        build a custom layout (one or more pools)
 *    tu_usage()           a stream's (or, stream NULL, the device's) usage
 *    tu_counters()        the backend counters of a HOST/DRY device
 *    CK_STATUS(api, call, expected)   assert a status; on mismatch print
 *                         both status names and api->last_error()
 *    CK_OK(api, call)     CK_STATUS(..., HIPPO_SUCCESS)
 *    CK_CHECK(api, dev)   api->check(dev) must succeed (prints last_error)
 *    CK_ERROR_HAS(api, s) last_error() must contain s
 *    CK_NOT_LIVE(api, s, user, h)   h is no live handle of s: resolve
 *                         (writing nothing), release and, user non-NULL,
 *                         record_use(s, h, user) refuse it with
 *                         INVALID_HANDLE, last_error mentioning "handle"
 *    TU_VERIFY(api, dev, ptr, size, seed)   the bytes at ptr hold the
 *                         pattern of seed (tu_fill wrote it)
 *    TU_VERIFY_HANDLE(api, dev, s, h, size, seed)   the same, at the
 *                         address h resolves to
 *    tu_reserve_filled()  a reservation holding the pattern of a seed
 *   Fixtures of the device and manager tests (and others):
 *    tu_backends[TU_N_BACKENDS]   HOST and DRY, for tcase_add_loop_test
 *                         (a test reads tu_backends[_i])
 *    tu_layout_1m(), tu_open_1m()  one SLICED pool of 1 MiB pages, slices
 *                         up to 256 KiB; a 64 MiB device with it
 *    tu_pair, tu_pair_attach(), tu_pair_detach()   a stream and its
 *                         emulated native stream, attached / detached
 *    TU_CLOSE(api, dev, a[, b...])   detach the pairs, close the device
 *
 *  Every test program:
 *    CK_REQUIRE(cond), CK_REQUIRE_EQ(a, b), CK_REQUIRE_MSG(cond, fmt, ...)
 *                         ck_assert, ck_assert_uint_eq and ck_assert_msg
 *                         that are silent on success: Check's own asserts
 *                         report each passing point to the parent process,
 *                         too slow for hot loops
 *    tu_run(suite)        runs a suite; main's exit status
 *
 *  Unit tests (they link the core and call it directly): define TU_CORE
 *  before including this file (tests/emutest.h does) to get these; they
 *  read the core's own last error, hippo__error_get(), and are silent on
 *  success (CK_REQUIRE's way):
 *    CK_CORE_OK(call)     call returns HIPPO_SUCCESS; else the message
 *                         names the call, its status and the last error
 *    CK_CORE_STATUS(call, st)       call returns st (both statuses named)
 *    CK_CORE_FAILS(call, st, text)  call returns st and the last error
 *                         contains text
 *    CK_CORE_ERROR_HAS(text)        the last error contains text
 *    CK_CORE_ERROR_LACKS(text)      the last error does not contain text
 *    CK_CORE_ERROR_IS(text)         the last error is exactly text
 *    CK_POOL_CHECK(p)     the check walk of pool p (pool.h) passes
 *  ABI tests must not define TU_CORE: the plugin's core is not linked in.
 *
 * A test that fails an assertion ends its (forked) process, so the helpers
 * do not clean up after a failure.
 */
#ifndef HIPPO_TESTUTIL_H
#define HIPPO_TESTUTIL_H

#include <check.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hippo.h"

#define TU_KiB (UINT64_C(1) << 10)
#define TU_MiB (UINT64_C(1) << 20)
#define TU_GiB (UINT64_C(1) << 30)
#define TU_TiB (UINT64_C(1) << 40)

/* Zeroes a versioned struct and sets its struct_size. */
#define TU_SIZED(x) (memset(&(x), 0, sizeof(x)), (x).struct_size = sizeof(x))

/* ---- loading the plugin -------------------------------------------------- */

/* The plugin's path: $HIPPO_PLUGIN (set by make check). */
static inline const char *tu_plugin_path(void) {
  const char *path = getenv("HIPPO_PLUGIN");
  if (!path || !*path)
    ck_abort_msg("HIPPO_PLUGIN is not set; run the test through make check "
                 "or set it to the built plugin/.libs/hippo.so");
  return path;
}

/* A stand-in GPU runtime's path, from $var (FAKE_HIP_LIB or FAKE_CUDA_LIB,
 * set by make check). */
static inline const char *tu_fake_lib(const char *var) {
  const char *p = getenv(var);
  if (!p || !*p)
    ck_abort_msg("%s is not set; run this test through make check, or set "
                 "FAKE_HIP_LIB and FAKE_CUDA_LIB to the built "
                 "tests/fake/.libs/libfakehip.so and libfakecudart.so",
                 var);
  return p;
}

/* Loads the plugin once per process (forked tests inherit it). */
static inline const hippo_api *tu_load(void **lib_out) {
  static const hippo_api *api;
  static void *lib;
  if (!api) {
    const char *path = tu_plugin_path();
    hippo_status st = hippo_load(path, &lib, &api);
    if (st != HIPPO_SUCCESS) {
      api = NULL;
      ck_abort_msg("hippo_load(%s) failed with status %d: %s", path, (int)st,
                   hippo_load_error());
    }
  }
  if (lib_out)
    *lib_out = lib;
  return api;
}

static inline const hippo_api *tu_api(void) { return tu_load(NULL); }

/* The emulation table of `api` (hippo_api.emulation). */
static inline const hippo_emu_api *tu_emu(const hippo_api *api) {
  const hippo_emu_api *emu = NULL;
  hippo_status st = api->emulation(&emu);
  if (st != HIPPO_SUCCESS || !emu)
    ck_abort_msg("emulation() failed with status %d: %s", (int)st,
                 api->last_error());
  return emu;
}

/* The plugin's raw entry point (for negotiation tests). */
static inline hippo_plugin_entry_fn tu_entry(void) {
  void *lib;
  union {
    void *obj;
    hippo_plugin_entry_fn fn;
  } entry;
  (void)tu_load(&lib);
  entry.obj = dlsym(lib, "hippo_plugin_entry");
  ck_assert_msg(entry.obj != NULL, "dlsym(hippo_plugin_entry): %s",
                dlerror());
  return entry.fn;
}

/* ---- assertions ---------------------------------------------------------- */

#define CK_STATUS(api, call, expected)                                         \
  do {                                                                         \
    const hippo_api *ck_api_ = (api);                                          \
    hippo_status ck_got_ = (call);                                             \
    hippo_status ck_want_ = (expected);                                        \
    ck_assert_msg(ck_got_ == ck_want_,                                         \
                  "%s\n  returned %s (%d), expected %s (%d)\n"                 \
                  "  last_error: %s",                                          \
                  #call, ck_api_->status_name(ck_got_), (int)ck_got_,          \
                  ck_api_->status_name(ck_want_), (int)ck_want_,               \
                  ck_api_->last_error());                                      \
  } while (0)

#define CK_OK(api, call) CK_STATUS(api, call, HIPPO_SUCCESS)

/* CK_STATUS for helpers: the message names the caller's file and line. */
static inline void tu_status_at(const hippo_api *api, hippo_status got,
                                hippo_status want, const char *call,
                                const char *file, int line) {
  ck_assert_msg(got == want,
                "%s:%d: %s\n  returned %s (%d), expected %s (%d)\n"
                "  last_error: %s",
                file, line, call, api->status_name(got), (int)got,
                api->status_name(want), (int)want, api->last_error());
}
#define CK_OK_AT(api, call, file, line)                                        \
  tu_status_at((api), (call), HIPPO_SUCCESS, #call, (file), (line))

#define CK_ERROR_HAS(api, text)                                                \
  do {                                                                         \
    const char *ck_msg_ = (api)->last_error();                                 \
    const char *ck_text_ = (text);                                             \
    ck_assert_msg(ck_msg_ && strstr(ck_msg_, ck_text_) != NULL,                \
                  "last_error \"%s\" does not mention \"%s\"",                 \
                  ck_msg_ ? ck_msg_ : "(null)", ck_text_);                     \
  } while (0)

/* Every invariant of the device's bookkeeping holds. */
static inline void tu_check_at(const hippo_api *api, hippo_device *dev,
                               const char *file, int line) {
  hippo_status st = api->check(dev);
  ck_assert_msg(st == HIPPO_SUCCESS, "%s:%d: check(dev) failed with %s: %s",
                file, line, api->status_name(st), api->last_error());
}
#define CK_CHECK(api, dev) tu_check_at((api), (dev), __FILE__, __LINE__)

/* ck_assert, ck_assert_uint_eq and ck_assert_msg, silent on success: Check
 * reports every passing point of its own asserts to the parent process,
 * too slow for hot loops. */
#define CK_REQUIRE(cond)                                                       \
  do {                                                                         \
    if (!(cond))                                                               \
      ck_abort_msg("%s:%d: %s failed", __FILE__, __LINE__, #cond);             \
  } while (0)
#define CK_REQUIRE_EQ(a, b)                                                    \
  do {                                                                         \
    uint64_t ck_a_ = (a), ck_b_ = (b);                                         \
    if (ck_a_ != ck_b_)                                                        \
      ck_abort_msg("%s:%d: %s == %llu, %s == %llu", __FILE__, __LINE__, #a,    \
                   (unsigned long long)ck_a_, #b, (unsigned long long)ck_b_);  \
  } while (0)
#define CK_REQUIRE_MSG(cond, ...)                                              \
  do {                                                                         \
    if (!(cond))                                                               \
      ck_abort_msg(__VA_ARGS__);                                               \
  } while (0)

/* ---- layouts --------------------------------------------------------------- */

#define TU_MAX_POOLS 40u

/* A custom layout and room for its pools. */
typedef struct tu_layout {
  hippo_layout layout;
  hippo_pool_options pools[TU_MAX_POOLS];
} tu_layout;

/* A preset layout (no pools). */
static inline hippo_layout *tu_layout_preset(tu_layout *l,
                                             hippo_preset preset) {
  memset(l, 0, sizeof *l);
  l->layout.struct_size = sizeof l->layout;
  l->layout.preset = preset;
  return &l->layout;
}

/* An empty custom layout. */
static inline hippo_layout *tu_layout_init(tu_layout *l) {
  tu_layout_preset(l, HIPPO_PRESET_CUSTOM);
  l->layout.pool_options_size = sizeof(hippo_pool_options);
  l->layout.pools = l->pools;
  return &l->layout;
}

/* Appends a zeroed pool of `kind`; the caller sets its fields. */
static inline hippo_pool_options *tu_layout_add(tu_layout *l,
                                                hippo_pool_kind kind) {
  hippo_pool_options *o;
  ck_assert_uint_lt(l->layout.pool_count, TU_MAX_POOLS);
  o = &l->pools[l->layout.pool_count++];
  TU_SIZED(*o);
  o->kind = kind;
  return o;
}

static inline hippo_pool_options *tu_layout_add_sliced(tu_layout *l,
                                                       uint64_t page_size,
                                                       uint64_t max_slice,
                                                       uint64_t max_pool) {
  hippo_pool_options *o = tu_layout_add(l, HIPPO_POOL_SLICED);
  o->page_size = page_size;
  o->max_slice_size = max_slice;
  o->max_pool_size = max_pool;
  return o;
}

/* The most common test layout: one custom SLICED pool, no cap, no periodic
 * deallocation. */
static inline hippo_layout *tu_layout_sliced(tu_layout *l, uint64_t page_size,
                                             uint64_t max_slice) {
  tu_layout_init(l);
  tu_layout_add_sliced(l, page_size, max_slice, 0);
  return &l->layout;
}

/* ---- devices and streams ------------------------------------------------- */

/* The backend the behaviour tests run on where they ask for HOST:
 * $HIPPO_TEST_BACKEND = "hip" runs them on a GPU (a real one, or a stand-in
 * runtime named by HIPPO_HIP_LIBRARY / HIPPO_CUDA_LIBRARY: see
 * tests/test-suite-gpu.sh); unset or "host", on HOST. */
static inline hippo_backend tu_backend(void) {
  const char *b = getenv("HIPPO_TEST_BACKEND");
  return b && !strcmp(b, "hip") ? HIPPO_BACKEND_HIP : HIPPO_BACKEND_HOST;
}

/* A test that only HOST can run (it needs HOST's own messages, lazily
 * mapped host memory, or its deferred copies): true when the suite runs
 * on HOST; else the caller returns (the test passes, saying why). */
static inline int tu_host_only(const char *why) {
  if (tu_backend() == HIPPO_BACKEND_HOST)
    return 1;
  printf("skipped on a GPU backend: %s\n", why);
  return 0;
}

/* Opens a device of `backend` (HOST or DRY; HOST means tu_backend()) with
 * `capacity` bytes (0: the default 16 GiB; on a GPU, a budget), `layout`
 * (NULL: the default preset) and `flags`. */
static inline hippo_device *tu_open_flags(const hippo_api *api,
                                          hippo_backend backend,
                                          uint64_t capacity,
                                          const hippo_layout *layout,
                                          uint32_t flags) {
  hippo_device_desc desc;
  hippo_device *dev = NULL;
  TU_SIZED(desc);
  if (backend == HIPPO_BACKEND_HOST)
    backend = tu_backend();
  if (backend == HIPPO_BACKEND_HIP && capacity == 0)
    capacity = UINT64_C(16) << 30; /* as HOST's default, where it fits */
  desc.backend = backend;
  desc.capacity = capacity;
  desc.flags = flags;
  desc.layout = layout;
  CK_OK(api, api->device_open(&desc, &dev));
  ck_assert_ptr_nonnull(dev);
  return dev;
}

static inline hippo_device *tu_open(const hippo_api *api,
                                    hippo_backend backend, uint64_t capacity,
                                    const hippo_layout *layout) {
  return tu_open_flags(api, backend, capacity, layout, 0);
}

/* Creates an emulated stream, attaches it; *native (may be NULL) gets it. */
static inline hippo_stream *tu_attach(const hippo_api *api, hippo_device *dev,
                                      void **native) {
  void *n = NULL;
  hippo_stream *s = NULL;
  CK_OK(api, tu_emu(api)->stream_create(dev, &n));
  ck_assert_ptr_nonnull(n);
  CK_OK(api, api->stream_attach(dev, n, &s));
  ck_assert_ptr_nonnull(s);
  if (native)
    *native = n;
  return s;
}

/* Detaches a stream from tu_attach and destroys its emulated stream
 * (failures name the caller's line). */
static inline void tu_detach_at(const hippo_api *api, hippo_device *dev,
                                hippo_stream *s, void *native,
                                const char *file, int line) {
  CK_OK_AT(api, api->stream_detach(s), file, line);
  CK_OK_AT(api, tu_emu(api)->stream_destroy(dev, native), file, line);
}
#define tu_detach(api, dev, s, native)                                         \
  tu_detach_at((api), (dev), (s), (native), __FILE__, __LINE__)

/* ---- figures -------------------------------------------------------------- */

static inline hippo_usage tu_usage(const hippo_api *api, hippo_device *dev,
                                   hippo_stream *s) {
  hippo_usage u;
  TU_SIZED(u);
  CK_OK(api, api->usage(dev, s, &u));
  return u;
}

static inline hippo_emu_counters tu_counters(const hippo_api *api,
                                             hippo_device *dev) {
  hippo_emu_counters c;
  TU_SIZED(c);
  CK_OK(api, tu_emu(api)->counters(dev, &c));
  return c;
}

static inline hippo_pool_report tu_report(const hippo_api *api,
                                          hippo_stream *s, uint32_t pool) {
  hippo_pool_report r;
  TU_SIZED(r);
  CK_OK(api, api->pool_report(s, pool, &r, NULL));
  return r;
}

/* Failure `index` of the last relocation report of stream s (NULL: the
 * device's). */
static inline hippo_relocation_failure tu_failure(const hippo_api *api,
                                                  hippo_device *dev,
                                                  hippo_stream *s,
                                                  uint32_t index) {
  hippo_relocation_failure f;
  TU_SIZED(f);
  CK_OK(api, api->relocation_failure(dev, s, index, &f));
  return f;
}

/* The options in force of pool `pool` of stream s (pool_report's). */
static inline hippo_pool_options tu_options(const hippo_api *api,
                                            hippo_stream *s, uint32_t pool) {
  hippo_pool_report r;
  hippo_pool_options o;
  TU_SIZED(r);
  TU_SIZED(o);
  CK_OK(api, api->pool_report(s, pool, &r, &o));
  return o;
}

static inline hippo_device_info tu_info(const hippo_api *api,
                                        hippo_device *dev) {
  hippo_device_info i;
  TU_SIZED(i);
  CK_OK(api, api->device_info(dev, &i));
  return i;
}

/* Two usages are equal field by field (the message names the first that
 * differs). */
static inline void tu_usage_eq_at(const hippo_usage *a, const hippo_usage *b,
                                  const char *file, int line) {
#define TU_FIELD(f)                                                            \
  ck_assert_msg(a->f == b->f, "%s:%d: usage." #f " %" PRIu64 " != %" PRIu64,   \
                file, line, (uint64_t)a->f, (uint64_t)b->f)
  TU_FIELD(pool_count);
  TU_FIELD(allocations);
  TU_FIELD(bytes_in_use);
  TU_FIELD(bytes_padding);
  TU_FIELD(bytes_reserved);
  TU_FIELD(peak_bytes_in_use);
  TU_FIELD(peak_bytes_reserved);
  TU_FIELD(pages);
#undef TU_FIELD
}
#define CK_USAGE_EQ(a, b) tu_usage_eq_at(&(a), &(b), __FILE__, __LINE__)

/* ---- reservations --------------------------------------------------------- */

/* A successful AUTO reservation (failures name the caller's line). */
static inline hippo_handle tu_reserve_at(const hippo_api *api,
                                         hippo_stream *s, uint64_t size,
                                         const char *file, int line) {
  hippo_handle h = 0;
  hippo_status st = api->reserve(s, size, HIPPO_MODE_AUTO, &h);
  ck_assert_msg(st == HIPPO_SUCCESS,
                "%s:%d: reserve(%" PRIu64 " B) returned %s: %s", file, line,
                size, api->status_name(st), api->last_error());
  ck_assert_msg(h != 0, "%s:%d: reserve gave handle 0", file, line);
  return h;
}
#define tu_reserve(api, s, size)                                               \
  tu_reserve_at((api), (s), (size), __FILE__, __LINE__)

/* The device address a live handle resolves to. */
static inline uint64_t tu_addr_at(const hippo_api *api, hippo_stream *s,
                                  hippo_handle h, const char *file,
                                  int line) {
  void *p = NULL;
  uint64_t size = 0;
  hippo_status st = api->resolve(s, h, &p, &size);
  ck_assert_msg(st == HIPPO_SUCCESS, "%s:%d: resolve(%#" PRIx64 ") returned "
                "%s: %s", file, line, h, api->status_name(st),
                api->last_error());
  return (uint64_t)(uintptr_t)p;
}
#define tu_addr(api, s, h) tu_addr_at((api), (s), (h), __FILE__, __LINE__)

/* A deterministic byte pattern for reservation `seed`. */
static inline unsigned char tu_pattern(uint64_t seed, uint64_t i) {
  uint64_t x = (seed + 1) * UINT64_C(0x9E3779B97F4A7C15) + i * 131u;
  return (unsigned char)(x >> 56 ^ x >> 13 ^ i);
}

/* Writes the pattern of `seed` into the first `size` bytes at `ptr`. */
static inline void tu_fill(const hippo_api *api, hippo_device *dev, void *ptr,
                           uint64_t size, uint64_t seed) {
  unsigned char *buf = malloc(size ? size : 1);
  ck_assert_ptr_nonnull(buf);
  for (uint64_t i = 0; i < size; i++)
    buf[i] = tu_pattern(seed, i);
  CK_OK(api, tu_emu(api)->write(dev, ptr, buf, size));
  free(buf);
}

/* The first `size` bytes at `ptr` hold the pattern of `seed`. */
static inline void tu_verify_at(const hippo_api *api, hippo_device *dev,
                                const void *ptr, uint64_t size, uint64_t seed,
                                const char *file, int line) {
  unsigned char *buf = malloc(size ? size : 1);
  ck_assert_ptr_nonnull(buf);
  CK_OK(api, tu_emu(api)->read(dev, ptr, buf, size));
  for (uint64_t i = 0; i < size; i++)
    if (buf[i] != tu_pattern(seed, i)) {
      unsigned got = buf[i], want = tu_pattern(seed, i);
      free(buf);
      ck_abort_msg("%s:%d: byte %" PRIu64 " of %" PRIu64 " at %p is %#x, "
                   "expected %#x (pattern %" PRIu64 ")",
                   file, line, i, size, ptr, got, want, seed);
    }
  free(buf);
}
#define TU_VERIFY(api, dev, ptr, size, seed)                                   \
  tu_verify_at((api), (dev), (ptr), (size), (seed), __FILE__, __LINE__)

/* A successful AUTO reservation of `size` bytes on s, filled with the
 * pattern of `seed`. */
static inline hippo_handle tu_reserve_filled(const hippo_api *api,
                                             hippo_device *dev,
                                             hippo_stream *s, uint64_t size,
                                             uint64_t seed) {
  hippo_handle h = tu_reserve(api, s, size);
  tu_fill(api, dev, (void *)(uintptr_t)tu_addr(api, s, h), size, seed);
  return h;
}

/* The reservation h of stream s holds the pattern of `seed`. */
#define TU_VERIFY_HANDLE(api, dev, s, h, size, seed)                           \
  tu_verify_at((api), (dev), (void *)(uintptr_t)tu_addr((api), (s), (h)),      \
               (size), (seed), __FILE__, __LINE__)

/* `h` is not a live handle of `s`: resolve refuses it with INVALID_HANDLE,
 * writes neither output and says "handle" in last_error; release refuses
 * it with INVALID_HANDLE; with `user` (NULL: not asked),
 * record_use(s, h, user) refuses it with INVALID_HANDLE too. */
static inline void tu_not_live_at(const hippo_api *api, hippo_stream *s,
                                  hippo_stream *user, hippo_handle h,
                                  const char *file, int line) {
  void *sentinel = (void *)&sentinel;
  void *ptr = sentinel;
  uint64_t size = 0xdeadbeef;
  hippo_status st = api->resolve(s, h, &ptr, &size);
  ck_assert_msg(st == HIPPO_INVALID_HANDLE,
                "%s:%d: resolve(%#" PRIx64 ") returned %s: %s", file, line, h,
                api->status_name(st), api->last_error());
  ck_assert_msg(ptr == sentinel && size == 0xdeadbeef,
                "%s:%d: a refused resolve wrote its outputs", file, line);
  ck_assert_msg(strstr(api->last_error(), "handle") != NULL,
                "%s:%d: resolve(%#" PRIx64 "): last_error \"%s\" does not "
                "mention \"handle\"", file, line, h, api->last_error());
  st = api->release(s, h);
  ck_assert_msg(st == HIPPO_INVALID_HANDLE,
                "%s:%d: release(%#" PRIx64 ") returned %s: %s", file, line, h,
                api->status_name(st), api->last_error());
  if (user) {
    st = api->record_use(s, h, user);
    ck_assert_msg(st == HIPPO_INVALID_HANDLE,
                  "%s:%d: record_use(%#" PRIx64 ") returned %s: %s", file,
                  line, h, api->status_name(st), api->last_error());
  }
}
#define CK_NOT_LIVE(api, s, user, h)                                           \
  tu_not_live_at((api), (s), (user), (h), __FILE__, __LINE__)

/* ---- fixtures of the device and manager tests ---------------------------- */

/* The two emulated backends a behaviour test runs on, one per iteration
 * of tcase_add_loop_test(tc, test, 0, TU_N_BACKENDS): tu_backends[_i]. */
static const hippo_backend tu_backends[] = {HIPPO_BACKEND_HOST,
                                            HIPPO_BACKEND_DRY};
#define TU_N_BACKENDS 2

/* One custom SLICED pool: page 1 MiB, slices up to 256 KiB. */
static inline hippo_layout *tu_layout_1m(tu_layout *l) {
  return tu_layout_sliced(l, TU_MiB, 256 * TU_KiB);
}

/* A 64 MiB device of `backend` with tu_layout_1m (the device keeps a
 * copy of the layout). */
static inline hippo_device *tu_open_1m(const hippo_api *api,
                                       hippo_backend backend) {
  tu_layout l;
  return tu_open(api, backend, 64 * TU_MiB, tu_layout_1m(&l));
}

/* A stream plus its emulated native stream. */
typedef struct tu_pair {
  hippo_stream *s;
  void *native;
} tu_pair;

/* tu_attach, as a pair. */
static inline tu_pair tu_pair_attach(const hippo_api *api, hippo_device *dev) {
  tu_pair p;
  p.s = tu_attach(api, dev, &p.native);
  return p;
}

/* tu_detach of a pair (failures name the caller's line). */
#define tu_pair_detach(api, dev, p) tu_detach((api), (dev), (p).s, (p).native)

/* Detaches the pairs `p[0..n)` in order, then closes `dev`; failures name
 * the caller's line. */
static inline void tu_close_at(const hippo_api *api, hippo_device *dev,
                               const tu_pair *p, size_t n, const char *file,
                               int line) {
  for (size_t i = 0; i < n; i++)
    tu_detach_at(api, dev, p[i].s, p[i].native, file, line);
  CK_OK_AT(api, api->device_close(dev), file, line);
}
/* TU_CLOSE(api, dev, a[, b...]): detaches a, b..., closes dev. */
#define TU_CLOSE(api, dev, ...)                                                \
  tu_close_at((api), (dev), (const tu_pair[]){__VA_ARGS__},                    \
              sizeof((const tu_pair[]){__VA_ARGS__}) / sizeof(tu_pair),        \
              __FILE__, __LINE__)

/* device_open(d) must answer HIPPO_POOL_CONFIG, open nothing, and name
 * `field` in last_error (`line`: the caller's, for the message). */
static inline void tu_config_refused_at(const hippo_api *api,
                                        const hippo_device_desc *d,
                                        const char *field, int line) {
  hippo_device *dev = NULL;
  hippo_status st = api->device_open(d, &dev);
  ck_assert_msg(st == HIPPO_POOL_CONFIG,
                "line %d: device_open gave %s, expected HIPPO_POOL_CONFIG",
                line, api->status_name(st));
  ck_assert_msg(strstr(api->last_error(), field) != NULL,
                "line %d: last_error \"%s\" does not name %s", line,
                api->last_error(), field);
  ck_assert_ptr_null(dev);
}

/* The virtual-memory granularity of the device the suite runs on
 * (tu_backend: HOST's 4 KiB, the stand-ins' $FAKE_GPU_VM_GRANULARITY, a
 * GPU's 2 MiB), for main() before the tests run: no Check macro, 0 when
 * the device cannot be opened (the tests then say what failed). */
static inline uint64_t tu_vm_granularity(const hippo_api *api) {
  hippo_device_desc d = {.struct_size = sizeof d, .backend = tu_backend()};
  hippo_device_info info = {.struct_size = sizeof info};
  hippo_device *dev = NULL;
  uint64_t g = 0;
  if (api->device_open(&d, &dev) == HIPPO_SUCCESS) {
    if (api->device_info(dev, &info) == HIPPO_SUCCESS)
      g = info.vm_granularity;
    (void)api->device_close(dev);
  }
  return g;
}

/* ---- running --------------------------------------------------------------- */

/* Runs `suite`: EXIT_SUCCESS when no test failed. */
static inline int tu_run(Suite *suite) {
  SRunner *sr = srunner_create(suite);
  int failed;
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif /* HIPPO_TESTUTIL_H */

/* ---- unit tests: assertions on the core's own calls -------------------------
 * Outside the include guard above, so a unit test that included this file
 * before defining TU_CORE (through another header) still gets them. */
#if defined(TU_CORE) && !defined(HIPPO_TESTUTIL_CORE)
#define HIPPO_TESTUTIL_CORE

#include "core.h"

/* `call` returns `want`; else the message names the call, both statuses
 * and the core's last error. */
#define CK_CORE_STATUS(call, want)                                             \
  do {                                                                         \
    hippo_status ck_got_ = (call);                                             \
    hippo_status ck_want_ = (want);                                            \
    if (ck_got_ != ck_want_)                                                   \
      ck_abort_msg("%s\n  returned %s (%d), expected %s (%d)\n"                \
                   "  last_error: %s",                                         \
                   #call, hippo__status_name(ck_got_), (int)ck_got_,           \
                   hippo__status_name(ck_want_), (int)ck_want_,                \
                   hippo__error_get());                                        \
  } while (0)

#define CK_CORE_OK(call) CK_CORE_STATUS(call, HIPPO_SUCCESS)

/* The core's last error contains `text`. */
#define CK_CORE_ERROR_HAS(text)                                                \
  do {                                                                         \
    const char *ck_text_ = (text);                                             \
    if (strstr(hippo__error_get(), ck_text_) == NULL)                          \
      ck_abort_msg("last_error \"%s\" does not contain \"%s\"",                \
                   hippo__error_get(), ck_text_);                              \
  } while (0)

/* The core's last error does not contain `text`. */
#define CK_CORE_ERROR_LACKS(text)                                              \
  do {                                                                         \
    const char *ck_text_ = (text);                                             \
    if (strstr(hippo__error_get(), ck_text_) != NULL)                          \
      ck_abort_msg("last_error \"%s\" contains \"%s\"", hippo__error_get(),    \
                   ck_text_);                                                  \
  } while (0)

/* The core's last error is exactly `text`. */
#define CK_CORE_ERROR_IS(text)                                                 \
  do {                                                                         \
    const char *ck_text_ = (text);                                             \
    if (strcmp(hippo__error_get(), ck_text_) != 0)                             \
      ck_abort_msg("last_error \"%s\", expected \"%s\"", hippo__error_get(),   \
                   ck_text_);                                                  \
  } while (0)

/* `call` returns `want` and the core's last error contains `text`. */
#define CK_CORE_FAILS(call, want, text)                                        \
  do {                                                                         \
    CK_CORE_STATUS(call, want);                                                \
    CK_CORE_ERROR_HAS(text);                                                   \
  } while (0)

/* The check walk of pool `p` (a hippo__pool *, pool.h) passes. */
#define CK_POOL_CHECK(p) CK_CORE_OK((p)->ops->check(p))

#endif /* TU_CORE */
