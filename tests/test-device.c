/* test-device.c -- devices and streams through the ABI, on HOST and DRY
 * devices: failing backend calls (page allocations and frees, capture
 * queries), the DRY footprint, install, the capture guard on device-wide
 * calls and on the manager's page frees, streams attached and detached
 * (busy, unknown native streams, a failed detach, handle tags of streams
 * gone).  After every step that changes state the device's check must
 * pass.  A stream's reservations, routing, figures and periodic
 * deallocation are test-manager.c's. */
#include <config.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* ---- failures of backend calls ------------------------------------------- */

/* A page allocation that fails with anything but OUT_OF_MEMORY is not
 * retried: the reservation fails with the backend's status and changes
 * nothing (the manager's out-of-memory retries are test-manager.c's). */
START_TEST(test_fault_alloc_backend_error) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, HIPPO_BACKEND_HOST);
  tu_pair a = tu_pair_attach(api, dev);
  hippo_handle h[4], failed = 0, late;
  void *p[4];
  hippo_usage before, after;
  hippo_emu_counters c0, c1;
  for (int i = 0; i < 4; i++) {
    h[i] = tu_reserve(api, a.s, 256 * TU_KiB);
    CK_OK(api, api->resolve(a.s, h[i], &p[i], NULL));
    tu_fill(api, dev, p[i], 256 * TU_KiB, (uint64_t)i);
  }
  before = tu_usage(api, dev, a.s);
  c0 = tu_counters(api, dev);
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_ALLOC, 1,
                                   HIPPO_BACKEND_ERROR));
  CK_STATUS(api, api->reserve(a.s, 1000, HIPPO_MODE_AUTO, &failed),
            HIPPO_BACKEND_ERROR);
  CK_ERROR_HAS(api, "injected fault");
  ck_assert_uint_eq(failed, 0);
  c1 = tu_counters(api, dev);
  /* no retry for anything but OUT_OF_MEMORY */
  ck_assert_uint_eq(c1.calls[HIPPO_CALL_ALLOC], c0.calls[HIPPO_CALL_ALLOC] + 1);
  ck_assert_uint_eq(c1.pages_held, c0.pages_held);
  after = tu_usage(api, dev, a.s);
  CK_USAGE_EQ(before, after);
  CK_CHECK(api, dev);
  for (int i = 0; i < 4; i++)
    TU_VERIFY(api, dev, p[i], 256 * TU_KiB, (uint64_t)i);
  /* the fault fired once; the next reservation works */
  late = tu_reserve(api, a.s, 1000);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(a.s, late));
  for (int i = 0; i < 4; i++)
    CK_OK(api, api->release(a.s, h[i]));
  TU_CLOSE(api, dev, a);
}
END_TEST

START_TEST(test_fault_free) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, tu_backends[_i]);
  tu_pair a = tu_pair_attach(api, dev), b = tu_pair_attach(api, dev);
  hippo_handle ha = tu_reserve(api, a.s, 1000);
  hippo_handle hb = tu_reserve(api, b.s, 1000);
  hippo_emu_counters c;
  hippo_usage u;
  CK_OK(api, api->release(a.s, ha));
  CK_OK(api, api->release(b.s, hb));
  CK_CHECK(api, dev);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_reserved, 2 * TU_MiB);
  /* the first free (stream a's page) fails; b's page still goes back */
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_FREE, 1,
                                   HIPPO_BACKEND_ERROR));
  CK_STATUS(api, api->cleanup(dev, NULL), HIPPO_BACKEND_ERROR);
  CK_ERROR_HAS(api, "injected fault");
  CK_CHECK(api, dev);
  c = tu_counters(api, dev);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_FREE], 2);
  ck_assert_uint_eq(c.pages_held, 1);
  u = tu_usage(api, dev, NULL);
  ck_assert_uint_eq(u.bytes_reserved, TU_MiB);
  ck_assert_uint_eq(u.pages, 1);
  ck_assert_uint_eq(tu_usage(api, dev, a.s).bytes_reserved, TU_MiB);
  ck_assert_uint_eq(tu_usage(api, dev, b.s).bytes_reserved, 0);
  /* the kept page left its pool (its free is made outside the stream's
   * lock): a new reservation takes a new page, and a later cleanup tries
   * the kept page again and frees both */
  ha = tu_reserve(api, a.s, 1000);
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_ALLOC], 3);
  ck_assert_uint_eq(tu_usage(api, dev, a.s).bytes_reserved, 2 * TU_MiB);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(a.s, ha));
  CK_OK(api, api->cleanup(dev, a.s));
  CK_CHECK(api, dev);
  c = tu_counters(api, dev);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_FREE], 4);
  ck_assert_uint_eq(c.pages_held, 0);
  u = tu_usage(api, dev, NULL);
  ck_assert_uint_eq(u.bytes_reserved, 0);
  ck_assert_uint_eq(u.pages, 0);
  ck_assert_uint_eq(u.peak_bytes_reserved, 2 * TU_MiB);
  TU_CLOSE(api, dev, a, b);
}
END_TEST

/* ---- DRY: a footprint without the bytes ---------------------------------- */

static uint64_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long long total = 0, resident = 0;
  if (!f)
    return 0;
  if (fscanf(f, "%llu %llu", &total, &resident) != 2)
    resident = 0;
  fclose(f);
  return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

START_TEST(test_dry_terabyte) {
  const hippo_api *api = tu_api();
  tu_layout l;
  enum { N = 4096 };
  const uint64_t size = 256 * TU_MiB;
  hippo_device *dev = tu_open(api, HIPPO_BACKEND_DRY, 2 * TU_TiB,
                              tu_layout_sliced(&l, TU_GiB, size));
  tu_pair a = tu_pair_attach(api, dev);
  hippo_handle *h = calloc(N, sizeof *h);
  uint64_t *addr = calloc(N, sizeof *addr);
  uint64_t rss0, rss1;
  hippo_emu_counters c;
  hippo_usage u;
  ck_assert_ptr_nonnull(h);
  ck_assert_ptr_nonnull(addr);
  rss0 = rss_bytes();
  for (int i = 0; i < N; i++) {
    h[i] = tu_reserve(api, a.s, size);
    addr[i] = tu_addr(api, a.s, h[i]);
  }
  rss1 = rss_bytes();
  CK_CHECK(api, dev);
  c = tu_counters(api, dev);
  ck_assert_uint_eq(c.host_bytes_mapped, 0);
  ck_assert_uint_eq(c.bytes_held, TU_TiB);
  ck_assert_uint_eq(c.pages_held, 1024);
  u = tu_usage(api, dev, a.s);
  ck_assert_uint_eq(u.allocations, N);
  ck_assert_uint_eq(u.bytes_in_use, TU_TiB);
  ck_assert_uint_eq(u.bytes_padding, 0);
  ck_assert_uint_eq(u.bytes_reserved, TU_TiB);
  ck_assert_uint_eq(u.pages, 1024);
  ck_assert_msg(rss1 < rss0 + 32 * TU_MiB,
                "RSS grew by %llu B for 1 TiB of DRY reservations",
                (unsigned long long)(rss1 - rss0));
  qsort(addr, N, sizeof *addr, cmp_u64);
  for (int i = 0; i < N; i++) {
    ck_assert_uint_ne(addr[i], 0);
    ck_assert_uint_eq(addr[i] % 256, 0);
    if (i > 0)
      ck_assert_msg(addr[i - 1] + size <= addr[i],
                    "reservations at %#llx and %#llx overlap",
                    (unsigned long long)addr[i - 1],
                    (unsigned long long)addr[i]);
  }
  for (int i = 0; i < N; i++)
    CK_OK(api, api->release(a.s, h[i]));
  CK_OK(api, api->cleanup(dev, NULL));
  CK_CHECK(api, dev);
  c = tu_counters(api, dev);
  ck_assert_uint_eq(c.pages_held, 0);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_FREE], 1024);
  free(h);
  free(addr);
  TU_CLOSE(api, dev, a);
}
END_TEST

/* ---- install ------------------------------------------------------------- */

START_TEST(test_install) {
  const hippo_api *api = tu_api();
  tu_layout l1, l2;
  hippo_device *dev =
      tu_open(api, tu_backends[_i], 64 * TU_MiB, tu_layout_1m(&l1));
  tu_pair a = tu_pair_attach(api, dev), b = tu_pair_attach(api, dev);
  hippo_handle d1, d2, d3, p;
  uint64_t live = 12345, paddr;

  tu_layout_init(&l2);
  tu_layout_add_sliced(&l2, 2 * TU_MiB, 64 * TU_KiB, 0);
  tu_layout_add_sliced(&l2, 8 * TU_MiB, 2 * TU_MiB, 0);
  d1 = tu_reserve(api, a.s, 1000);
  d2 = tu_reserve(api, a.s, 3000);
  d3 = tu_reserve(api, b.s, 500);
  CK_OK(api, api->reserve(a.s, 700, HIPPO_MODE_PERSISTENT, &p));
  paddr = tu_addr(api, a.s, p);
  CK_CHECK(api, dev);
  CK_STATUS(api, api->pools_install(dev, &l2.layout, &live),
            HIPPO_POOLS_IN_USE);
  ck_assert_uint_eq(live, 1000 + 3000 + 500);
  CK_ERROR_HAS(api, "4500");
  CK_CHECK(api, dev);
  ck_assert_uint_eq(tu_info(api, dev).pool_count, 1);
  ck_assert_uint_eq(tu_options(api, a.s, 1).page_size, TU_MiB);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).allocations, 4);
  CK_OK(api, api->release(a.s, d1));
  CK_OK(api, api->release(a.s, d2));
  {
    /* refused, it changes nothing: a's page, empty now, stays */
    uint64_t frees = tu_counters(api, dev).calls[HIPPO_CALL_FREE];
    uint64_t reserved = tu_usage(api, dev, NULL).bytes_reserved;
    CK_STATUS(api, api->pools_install(dev, &l2.layout, &live),
              HIPPO_POOLS_IN_USE);
    ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_FREE], frees);
    ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_reserved, reserved);
    CK_ERROR_HAS(api, "nothing was given back");
  }
  ck_assert_uint_eq(live, 500);
  CK_OK(api, api->release(b.s, d3));
  /* only a persistent reservation is live: it does not block */
  live = 12345;
  CK_OK(api, api->pools_install(dev, &l2.layout, &live));
  ck_assert_uint_eq(live, 0);
  CK_CHECK(api, dev);
  {
    hippo_device_info info = tu_info(api, dev);
    hippo_usage u = tu_usage(api, dev, a.s);
    ck_assert_uint_eq(info.pool_count, 2);
    ck_assert_uint_eq(info.preset, HIPPO_PRESET_CUSTOM);
    ck_assert_uint_eq(u.pool_count, 3);
    ck_assert_uint_eq(u.allocations, 1);
    ck_assert_uint_eq(u.bytes_in_use, 700);
    ck_assert_uint_eq(tu_options(api, a.s, 1).page_size, 2 * TU_MiB);
    ck_assert_uint_eq(tu_options(api, b.s, 2).page_size, 8 * TU_MiB);
  }
  /* the new layout routes */
  d1 = tu_reserve(api, a.s, TU_MiB);
  ck_assert_uint_eq(tu_report(api, a.s, 2).allocations, 1);
  CK_OK(api, api->release(a.s, d1));
  /* handles of the replaced pools stay stale, on both streams */
  {
    void *ptr;
    uint64_t size;
    CK_STATUS(api, api->release(a.s, d2), HIPPO_INVALID_HANDLE);
    CK_STATUS(api, api->resolve(a.s, d2, &ptr, &size), HIPPO_INVALID_HANDLE);
    CK_STATUS(api, api->release(b.s, d3), HIPPO_INVALID_HANDLE);
    CK_CHECK(api, dev);
  }
  /* the persistent handle made before the swap still works */
  ck_assert_uint_eq(tu_addr(api, a.s, p), paddr);
  CK_OK(api, api->release(a.s, p));
  CK_CHECK(api, dev);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).allocations, 0);
  TU_CLOSE(api, dev, a, b);
}
END_TEST

START_TEST(test_install_fixed_layout) {
  const hippo_api *api = tu_api();
  tu_layout l1, l2;
  hippo_device *dev =
      tu_open_flags(api, tu_backends[_i], 64 * TU_MiB, tu_layout_1m(&l1),
                    HIPPO_DEVICE_FIXED_LAYOUT);
  uint64_t live = 12345;
  CK_STATUS(api,
            api->pools_install(
                dev, tu_layout_preset(&l2, HIPPO_PRESET_EXCLUSIVE_PAGES),
                &live),
            HIPPO_UNSUPPORTED);
  CK_ERROR_HAS(api, "FIXED_LAYOUT");
  ck_assert_uint_eq(live, 0);
  ck_assert_uint_eq(tu_info(api, dev).preset, HIPPO_PRESET_CUSTOM);
  ck_assert_uint_eq(tu_info(api, dev).pool_count, 1);
  CK_CHECK(api, dev);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* ---- the capture guard --------------------------------------------------- */

START_TEST(test_cleanup_during_capture) {
  const hippo_api *api = tu_api();
  tu_layout l2;
  hippo_device *dev = tu_open_1m(api, tu_backends[_i]);
  tu_pair a = tu_pair_attach(api, dev), b = tu_pair_attach(api, dev);
  hippo_handle h = tu_reserve(api, b.s, 1000);
  uint64_t id = 0;
  CK_OK(api, api->release(b.s, h)); /* b holds an empty page */
  CK_OK(api, tu_emu(api)->capture_begin(dev, a.native, &id));
  ck_assert_uint_ne(id, 0);
  CK_STATUS(api, api->cleanup(dev, NULL), HIPPO_GRAPH_RECORDING);
  CK_ERROR_HAS(api, "capturing");
  {
    char who[64]; /* the native stream the caller knows, by its address */
    snprintf(who, sizeof who, "native stream %p", a.native);
    CK_ERROR_HAS(api, who);
  }
  CK_STATUS(api, api->cleanup(dev, b.s), HIPPO_GRAPH_RECORDING);
  CK_STATUS(api,
            api->pools_install(dev, tu_layout_sliced(&l2, 2 * TU_MiB, TU_MiB),
                               NULL),
            HIPPO_GRAPH_RECORDING);
  CK_CHECK(api, dev);
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 1);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_reserved, TU_MiB);
  CK_OK(api, tu_emu(api)->capture_end(dev, a.native));
  CK_OK(api, api->cleanup(dev, NULL));
  CK_CHECK(api, dev);
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 0);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_reserved, 0);
  TU_CLOSE(api, dev, a, b);
}
END_TEST

/* ---- streams and closing ------------------------------------------------- */

START_TEST(test_busy) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open(api, tu_backends[_i], 64 * TU_MiB, NULL);
  tu_pair a = tu_pair_attach(api, dev);
  hippo_stream *again = NULL, *dflt = NULL, *dflt2 = NULL;
  hippo_device_info info;
  CK_STATUS(api, api->stream_attach(dev, a.native, &again), HIPPO_BUSY);
  CK_ERROR_HAS(api, "already attached");
  ck_assert_ptr_null(again);
  /* the default stream (NULL) is a stream too, once */
  CK_OK(api, api->stream_attach(dev, NULL, &dflt));
  CK_STATUS(api, api->stream_attach(dev, NULL, &dflt2), HIPPO_BUSY);
  info = tu_info(api, dev);
  ck_assert_uint_eq(info.streams, 2);
  CK_STATUS(api, api->device_close(dev), HIPPO_BUSY);
  CK_ERROR_HAS(api, "attached");
  CK_STATUS(api, tu_emu(api)->stream_destroy(dev, a.native), HIPPO_BUSY);
  CK_CHECK(api, dev);
  CK_OK(api, api->stream_detach(dflt));
  CK_STATUS(api, api->device_close(dev), HIPPO_BUSY);
  tu_pair_detach(api, dev, a);
  ck_assert_uint_eq(tu_info(api, dev).streams, 0);
  CK_CHECK(api, dev);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* ---- stream identity and the capture guard on freeing -------------------- */

/* Zeroed memory posing as a native stream no backend created. */
static union {
  unsigned char bytes[512];
  uint64_t align;
} fake_native;

/* stream_attach must refuse a native stream the device's backend does not
 * know (another device's emulated stream, a destroyed or made-up one).
 * Otherwise every device-wide call that asks the streams whether they
 * capture (cleanup, pools_install) fails from then on. */
START_TEST(test_attach_unknown_native) {
  const hippo_api *api = tu_api();
  hippo_device *dev;
  if (tu_backends[_i] == HIPPO_BACKEND_HOST &&
      !tu_host_only("a pointer that is no stream would reach the GPU "
                    "runtime: undefined behaviour there"))
    return;
  dev = tu_open(api, tu_backends[_i], 64 * TU_MiB, NULL);
  hippo_device *dev2 = tu_open(api, tu_backends[_i], 64 * TU_MiB, NULL);
  void *n2 = NULL, *gone = NULL;
  hippo_stream *s = NULL;
  CK_OK(api, tu_emu(api)->stream_create(dev2, &n2));
  CK_OK(api, tu_emu(api)->stream_create(dev, &gone));
  CK_OK(api, tu_emu(api)->stream_destroy(dev, gone));
  CK_STATUS(api, api->stream_attach(dev, n2, &s), HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->stream_attach(dev, (void *)&fake_native, &s),
            HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->stream_attach(dev, gone, &s), HIPPO_INVALID_ARGUMENT);
  ck_assert_ptr_null(s);
  CK_OK(api, api->cleanup(dev, NULL));
  CK_CHECK(api, dev);
  CK_OK(api, tu_emu(api)->stream_destroy(dev2, n2));
  CK_OK(api, api->device_close(dev));
  CK_OK(api, api->device_close(dev2));
}
END_TEST

/* The capture guard: nothing is freed while a stream of the device
 * captures -- not even by the out-of-memory retry inside reserve on
 * another stream (the capture may have baked in the address of any
 * page). */
START_TEST(test_capture_guard_oom_retry) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  tu_pair a, b;
  hippo_handle small, big = 0;
  hippo_emu_counters c0, c1;
  uint64_t id = 0;
  tu_layout_init(&l);
  tu_layout_add_sliced(&l, TU_MiB, 64 * TU_KiB, 0);
  tu_layout_add_sliced(&l, 2 * TU_MiB, TU_MiB, 0);
  dev = tu_open(api, tu_backends[_i], 2 * TU_MiB + 512 * TU_KiB, &l.layout);
  a = tu_pair_attach(api, dev);
  b = tu_pair_attach(api, dev);
  CK_OK(api, tu_emu(api)->capture_begin(dev, b.native, &id));
  small = tu_reserve(api, a.s, 64 * TU_KiB);
  CK_OK(api, api->release(a.s, small));
  c0 = tu_counters(api, dev);
  CK_STATUS(api, api->reserve(a.s, 512 * TU_KiB, HIPPO_MODE_AUTO, &big),
            HIPPO_OUT_OF_MEMORY);
  /* the message is the out-of-memory's, not the capture question's */
  CK_ERROR_HAS(api, "page_alloc");
  ck_assert_ptr_null(strstr(api->last_error(), "capturing"));
  c1 = tu_counters(api, dev);
  ck_assert_msg(c1.calls[HIPPO_CALL_FREE] == c0.calls[HIPPO_CALL_FREE],
                "a page was freed while the stream captured");
  ck_assert_uint_eq(c1.pages_held, 1);
  CK_CHECK(api, dev);
  CK_OK(api, tu_emu(api)->capture_end(dev, b.native));
  big = tu_reserve(api, a.s, 512 * TU_KiB); /* now the retry may free */
  CK_OK(api, api->release(a.s, big));
  CK_CHECK(api, dev);
  TU_CLOSE(api, dev, a, b);
}
END_TEST

/* The capture guard: periodic deallocation waits while a stream of the
 * device captures. */
START_TEST(test_capture_guard_tick) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  tu_pair a, b;
  hippo_handle h, z;
  uint64_t id = 0;
  tu_layout_1m(&l);
  l.pools[0].dealloc_period = 2;
  dev = tu_open(api, tu_backends[_i], 64 * TU_MiB, &l.layout);
  a = tu_pair_attach(api, dev);
  b = tu_pair_attach(api, dev);
  CK_OK(api, tu_emu(api)->capture_begin(dev, b.native, &id));
  h = tu_reserve(api, a.s, 1000);
  CK_OK(api, api->release(a.s, h)); /* the page is empty from clock 1 */
  for (int i = 0; i < 4; i++) {
    z = tu_reserve(api, a.s, 0); /* each reservation ticks the clock */
    CK_OK(api, api->release(a.s, z));
  }
  CK_CHECK(api, dev);
  ck_assert_msg(tu_counters(api, dev).calls[HIPPO_CALL_FREE] == 0,
                "periodic deallocation freed a page during a capture");
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 1);
  CK_OK(api, tu_emu(api)->capture_end(dev, b.native));
  for (int i = 0; i < 4; i++) {
    z = tu_reserve(api, a.s, 0);
    CK_OK(api, api->release(a.s, z));
  }
  CK_CHECK(api, dev);
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 0);
  TU_CLOSE(api, dev, a, b);
}
END_TEST

/* A stream whose page cannot be given back stays attached (its
 * reservations released, the page still accounted); detach again works. */
START_TEST(test_detach_free_fails) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, tu_backends[_i]);
  tu_pair a = tu_pair_attach(api, dev);
  hippo_handle h = tu_reserve(api, a.s, 1000);
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_FREE, 1,
                                   HIPPO_BACKEND_ERROR));
  CK_STATUS(api, api->stream_detach(a.s), HIPPO_BACKEND_ERROR);
  CK_ERROR_HAS(api, "stays attached");
  CK_CHECK(api, dev);
  CK_NOT_LIVE(api, a.s, NULL, h); /* its reservation was released */
  ck_assert_uint_eq(tu_info(api, dev).streams, 1);
  ck_assert_uint_eq(tu_usage(api, dev, a.s).allocations, 0);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_reserved, TU_MiB);
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 1);
  TU_CLOSE(api, dev, a); /* the retry gives the page back */
}
END_TEST

/* Nothing is freed while a stream captures: detach is refused. */
START_TEST(test_detach_while_capturing) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, tu_backends[_i]);
  tu_pair a = tu_pair_attach(api, dev), b = tu_pair_attach(api, dev);
  uint64_t id = 0;
  tu_reserve(api, b.s, 1000);
  CK_OK(api, tu_emu(api)->capture_begin(dev, a.native, &id));
  CK_STATUS(api, api->stream_detach(b.s), HIPPO_GRAPH_RECORDING);
  CK_STATUS(api, api->stream_detach(a.s), HIPPO_GRAPH_RECORDING);
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_FREE], 0);
  ck_assert_uint_eq(tu_usage(api, dev, b.s).allocations, 1);
  CK_CHECK(api, dev);
  CK_OK(api, tu_emu(api)->capture_end(dev, a.native));
  TU_CLOSE(api, dev, a, b);
}
END_TEST

/* An install frees the old pools' empty pages after the stream locks; one
 * whose free fails stays held by its stream (counted in its figures) and
 * goes at the stream's next cleanup; the new layout is in force. */
START_TEST(test_install_free_fails) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, tu_backends[_i]);
  tu_pair a = tu_pair_attach(api, dev);
  tu_layout l;
  CK_OK(api, api->release(a.s, tu_reserve(api, a.s, 1000)));
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_FREE, 1,
                                   HIPPO_BACKEND_ERROR));
  /* the pages leave the old pools under the locks and are freed after
   * them: a free that fails keeps that page held by its stream (counted),
   * tried again by its next cleanup; the layout is installed */
  CK_OK(api, api->pools_install(
                 dev, tu_layout_preset(&l, HIPPO_PRESET_EXCLUSIVE_PAGES), NULL));
  ck_assert_uint_eq(tu_info(api, dev).preset, HIPPO_PRESET_EXCLUSIVE_PAGES);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_reserved, TU_MiB);
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 1);
  CK_CHECK(api, dev);
  CK_OK(api, api->cleanup(dev, a.s));
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_reserved, 0);
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 0);
  CK_CHECK(api, dev);
  TU_CLOSE(api, dev, a);
}
END_TEST

/* Churns `cycles` reserve/release pairs of `size` bytes on `s`; returns
 * how many of them got the handle `stale` (assertions after the loop:
 * Check would record each one passed). */
static uint64_t churn_hits(const hippo_api *api, hippo_stream *s,
                           uint64_t size, uint64_t cycles,
                           hippo_handle stale) {
  uint64_t hits = 0, failed = 0;
  for (uint64_t i = 0; i < cycles; i++) {
    hippo_handle h = 0;
    failed += api->reserve(s, size, HIPPO_MODE_AUTO, &h) != HIPPO_SUCCESS;
    hits += h == stale;
    failed += api->release(s, h) != HIPPO_SUCCESS;
  }
  ck_assert_uint_eq(failed, 0);
  return hits;
}

/* A handle of a SLICED pool that pools_install replaced never names a
 * reservation of the pool that takes its index, however long that pool
 * reuses its records: the new pool goes on from the generations the old
 * one reached (also through a layout whose pool at that index names
 * nothing).  Each churn runs a record through all its 2^20 - 1
 * generations, so a new pool starting its records afresh would hand the
 * stale handle out again. */
START_TEST(test_install_stale_never_live) {
  const hippo_api *api = tu_api();
  const uint64_t cycles = (UINT64_C(1) << 20) + 16;
  tu_layout one, other;
  hippo_device *dev = tu_open(api, HIPPO_BACKEND_DRY, 64 * TU_MiB,
                              tu_layout_1m(&one));
  tu_pair a = tu_pair_attach(api, dev);
  hippo_handle stale = tu_reserve(api, a.s, 1000);
  CK_OK(api, api->release(a.s, stale));

  CK_OK(api, api->pools_install(dev, tu_layout_1m(&one), NULL));
  ck_assert_uint_eq(churn_hits(api, a.s, 1000, cycles, stale), 0);
  CK_NOT_LIVE(api, a.s, NULL, stale);
  CK_CHECK(api, dev);

  /* through an EXCLUSIVE pool at index 1, and back */
  tu_layout_init(&other);
  tu_layout_add(&other, HIPPO_POOL_EXCLUSIVE)->max_alloc_size = TU_MiB;
  CK_OK(api, api->pools_install(dev, &other.layout, NULL));
  ck_assert_uint_eq(churn_hits(api, a.s, 1000, 1000, stale), 0);
  CK_CHECK(api, dev);
  CK_OK(api, api->pools_install(dev, tu_layout_1m(&one), NULL));
  ck_assert_uint_eq(churn_hits(api, a.s, 1000, cycles, stale), 0);
  CK_NOT_LIVE(api, a.s, NULL, stale);
  CK_CHECK(api, dev);
  TU_CLOSE(api, dev, a);
}
END_TEST

/* The device's peak in use never goes down: a detached stream's peak stays
 * in it. */
START_TEST(test_peak_survives_detach) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, HIPPO_BACKEND_DRY);
  tu_pair a = tu_pair_attach(api, dev), b = tu_pair_attach(api, dev);
  hippo_handle h = tu_reserve(api, a.s, 100000);
  hippo_handle g = tu_reserve(api, b.s, 3000);
  CK_OK(api, api->release(a.s, h));
  ck_assert_uint_eq(tu_usage(api, dev, NULL).peak_bytes_in_use, 103000);
  tu_pair_detach(api, dev, a);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).peak_bytes_in_use, 103000);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_in_use, 3000);
  CK_OK(api, api->release(b.s, g));
  CK_CHECK(api, dev);
  TU_CLOSE(api, dev, b);
}
END_TEST

/* stream_attach keeps the backend's status: a failed capture query is
 * the backend's failure, not a bad argument. */
START_TEST(test_attach_backend_failure) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, tu_backends[_i]);
  hippo_stream *s = NULL;
  void *n = NULL;
  CK_OK(api, tu_emu(api)->stream_create(dev, &n));
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_CAPTURE_QUERY, 1,
                                   HIPPO_BACKEND_ERROR));
  CK_STATUS(api, api->stream_attach(dev, n, &s), HIPPO_BACKEND_ERROR);
  CK_ERROR_HAS(api, "injected");
  ck_assert_ptr_null(s);
  ck_assert_uint_eq(tu_info(api, dev).streams, 0);
  CK_OK(api, api->stream_attach(dev, n, &s)); /* the retry works */
  CK_OK(api, api->stream_detach(s));
  CK_OK(api, tu_emu(api)->stream_destroy(dev, n));
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* A handle of a detached stream does not work on a stream attached later
 * with the same tag (after 4095 more attachments). */
START_TEST(test_handle_of_detached_stream) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, HIPPO_BACKEND_DRY);
  tu_pair a = tu_pair_attach(api, dev), b;
  hippo_handle ha = tu_reserve(api, a.s, 1000), hb;
  void *n = NULL;
  tu_pair_detach(api, dev, a);
  CK_OK(api, tu_emu(api)->stream_create(dev, &n));
  for (int i = 0; i < 4095; i++) {
    hippo_stream *s = NULL;
    CK_OK(api, api->stream_attach(dev, n, &s));
    CK_OK(api, api->stream_detach(s));
  }
  CK_OK(api, tu_emu(api)->stream_destroy(dev, n));
  b = tu_pair_attach(api, dev);
  hb = tu_reserve(api, b.s, 2048);
  ck_assert_uint_ne(ha, hb);
  CK_NOT_LIVE(api, b.s, NULL, ha);
  CK_CHECK(api, dev);
  TU_CLOSE(api, dev, b);
}
END_TEST

/* Two live streams never accept each other's handles, however many streams
 * were attached in between (the handle tag has 12 bits: a counter would
 * give the 4097th table the tag of the 1st; tags in use are never reused). */
START_TEST(test_foreign_handle_after_many_streams) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, HIPPO_BACKEND_DRY);
  tu_pair a = tu_pair_attach(api, dev), b;
  hippo_handle ha = tu_reserve(api, a.s, 1000), hb;
  void *n = NULL;
  CK_OK(api, tu_emu(api)->stream_create(dev, &n));
  for (int i = 0; i < 4095; i++) {
    hippo_stream *s = NULL;
    CK_OK(api, api->stream_attach(dev, n, &s));
    CK_OK(api, api->stream_detach(s));
  }
  CK_OK(api, tu_emu(api)->stream_destroy(dev, n));
  b = tu_pair_attach(api, dev);
  hb = tu_reserve(api, b.s, 1000);
  ck_assert_msg(ha != hb, "two live streams handed out the same handle %#llx",
                (unsigned long long)ha);
  CK_NOT_LIVE(api, b.s, NULL, ha);
  CK_NOT_LIVE(api, a.s, NULL, hb);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(a.s, ha));
  CK_OK(api, api->release(b.s, hb));
  TU_CLOSE(api, dev, a, b);
}
END_TEST

static Suite *device_suite(void) {
  Suite *s = suite_create("device");
  TCase *tc = tcase_create("backend");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_fault_alloc_backend_error);
  tcase_add_loop_test(tc, test_fault_free, 0, TU_N_BACKENDS);
  tcase_add_test(tc, test_dry_terabyte);
  suite_add_tcase(s, tc);
  tc = tcase_create("install");
  tcase_add_loop_test(tc, test_install, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_install_fixed_layout, 0, TU_N_BACKENDS);
  suite_add_tcase(s, tc);
  tc = tcase_create("streams");
  tcase_add_loop_test(tc, test_cleanup_during_capture, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_busy, 0, TU_N_BACKENDS);
  suite_add_tcase(s, tc);
  tc = tcase_create("guards");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_attach_unknown_native, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_capture_guard_oom_retry, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_capture_guard_tick, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_detach_free_fails, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_detach_while_capturing, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_install_free_fails, 0, TU_N_BACKENDS);
  tcase_add_test(tc, test_install_stale_never_live);
  tcase_add_test(tc, test_peak_survives_detach);
  tcase_add_loop_test(tc, test_attach_backend_failure, 0, TU_N_BACKENDS);
  tcase_add_test(tc, test_handle_of_detached_stream);
  tcase_add_test(tc, test_foreign_handle_after_many_streams);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(device_suite()); }
