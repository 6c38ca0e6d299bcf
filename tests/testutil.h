/* testutil.h -- helpers shared by the Check test programs.
 *
 * Everything here is `static inline`, so a test program includes it once and
 * pays only for what it uses.  Two groups:
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
 *    tu_run(suite)        runs a suite; main's exit status (for every test
 *                         program, ABI or not)
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
  ck_assert_msg(a->f == b->f, "%s:%d: usage." #f " %" PRIu64 " != %" PRIu64,  \
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
