/* test-guard.c -- graph guards through the ABI (guard.h): what a stream
 * reserves, releases or resolves while it captures stays in place and out
 * of use until graph_retire; a capturing stream takes no page; guarded
 * pages survive cleanup, reclaim, relocation, install and detach; exact
 * guarded figures.  Emulated captures on HOST and DRY devices.  The
 * device's check must pass after every step that changes state. */
#include <config.h>

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define MiB TU_MiB
#define KiB TU_KiB

static uint64_t guarded(const hippo_api *api, hippo_device *dev,
                        hippo_stream *s) {
  return tu_usage(api, dev, s).bytes_guarded;
}

static uint64_t holds(const hippo_api *api, hippo_device *dev,
                      hippo_stream *s) {
  return tu_usage(api, dev, s).slices_guarded;
}

/* A slice released during the capture is reused by no reservation until
 * the graph is retired; then it is, at the same address.  Retiring twice
 * is harmless; an id hippo never guarded anything under is refused, and so
 * is retiring a graph whose capture is still recording. */
START_TEST(test_released_not_reused) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, tu_backends[_i]);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle warm, h1, h2, h3;
  uint64_t id = 0, a1, allocs;

  warm = tu_reserve(api, s, 64 * KiB); /* the warm-up takes the page */
  CK_OK(api, api->release(s, warm));
  allocs = tu_counters(api, dev).calls[HIPPO_CALL_ALLOC];
  CK_OK(api, tu_emu(api)->capture_begin(dev, n, &id));
  h1 = tu_reserve(api, s, 64 * KiB); /* from room held */
  a1 = tu_addr(api, s, h1);
  for (int i = 0; i < 10000; i++) /* a capture loop resolving it again */
    ck_assert_uint_eq(tu_addr(api, s, h1), a1);
  ck_assert_uint_eq(holds(api, dev, s), 1);
  CK_OK(api, api->release(s, h1));
  ck_assert_uint_eq(guarded(api, dev, s), 64 * KiB);
  ck_assert_uint_eq(guarded(api, dev, NULL), 64 * KiB);
  /* reserved, resolved (tu_addr), released: one hold (one per slice and
   * graph, however often the capture touches the slice) */
  ck_assert_uint_eq(holds(api, dev, s), 1);
  ck_assert_uint_eq(tu_report(api, s, 1).bytes_guarded, 64 * KiB);
  ck_assert_uint_eq(tu_report(api, s, 1).bytes_free, MiB - 64 * KiB);
  ck_assert_uint_eq(tu_usage(api, dev, s).allocations, 0);
  CK_CHECK(api, dev);
  /* retiring the graph still being captured is refused, and keeps it */
  CK_STATUS(api, api->graph_retire(dev, id), HIPPO_GRAPH_RECORDING);
  CK_ERROR_HAS(api, "still capturing");
  ck_assert_uint_eq(guarded(api, dev, NULL), 64 * KiB);
  ck_assert_uint_eq(holds(api, dev, s), 1);
  CK_CHECK(api, dev);
  CK_OK(api, tu_emu(api)->capture_end(dev, n));
  /* after the capture, before retire: the guarded bytes stay out of use,
   * on this stream and (their page never goes back) on any other */
  h2 = tu_reserve(api, s, 64 * KiB);
  ck_assert_uint_eq(tu_addr(api, s, h2), a1 + 64 * KiB);
  CK_OK(api, api->cleanup(dev, NULL));
  CK_OK(api, api->reclaim(dev, NULL));
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 1);
  {
    void *on;
    hippo_stream *o = tu_attach(api, dev, &on);
    hippo_handle oh = tu_reserve(api, o, 64 * KiB);
    ck_assert(tu_addr(api, o, oh) + 64 * KiB <= a1 ||
              tu_addr(api, o, oh) >= a1 + 64 * KiB);
    CK_OK(api, api->release(o, oh));
    tu_detach(api, dev, o, on);
  }
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 1);
  /* the other stream's page, only */
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_ALLOC],
                    allocs + 1);
  CK_CHECK(api, dev);
  CK_OK(api, api->graph_retire(dev, id));
  ck_assert_uint_eq(guarded(api, dev, NULL), 0);
  ck_assert_uint_eq(holds(api, dev, NULL), 0);
  h3 = tu_reserve(api, s, 64 * KiB);
  ck_assert_uint_eq(tu_addr(api, s, h3), a1); /* reused now */
  CK_OK(api, api->graph_retire(dev, id));      /* twice: harmless */
  CK_STATUS(api, api->graph_retire(dev, id + 1000), HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "capture");
  CK_STATUS(api, api->graph_retire(NULL, id), HIPPO_INVALID_ARGUMENT);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, h2));
  CK_OK(api, api->release(s, h3));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* A capturing stream takes no page: a reservation its pools hold no room
 * for answers HIPPO_GRAPH_NEEDS_PAGE with no driver call, also in
 * persistent mode; another stream goes on taking pages. */
START_TEST(test_capture_needs_page) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, tu_backends[_i]);
  void *na, *nb;
  hippo_stream *a = tu_attach(api, dev, &na), *b = tu_attach(api, dev, &nb);
  hippo_handle h[3], x, y;
  uint64_t id, allocs;
  hippo_usage before;

  for (int i = 0; i < 3; i++) /* 768 KiB of the 1 MiB page */
    h[i] = tu_reserve(api, a, 256 * KiB);
  CK_OK(api, tu_emu(api)->capture_begin(dev, na, &id));
  allocs = tu_counters(api, dev).calls[HIPPO_CALL_ALLOC];
  before = tu_usage(api, dev, a);
  x = tu_reserve(api, a, 256 * KiB); /* the page's last 256 KiB */
  CK_STATUS(api, api->reserve(a, 256 * KiB, HIPPO_MODE_AUTO, &y),
            HIPPO_GRAPH_NEEDS_PAGE);
  CK_ERROR_HAS(api, "captures a graph");
  CK_ERROR_HAS(api, "warm-up");
  CK_STATUS(api, api->reserve(a, 4096, HIPPO_MODE_PERSISTENT, &y),
            HIPPO_GRAPH_NEEDS_PAGE);
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_ALLOC], allocs);
  ck_assert_uint_eq(tu_usage(api, dev, a).allocations,
                    before.allocations + 1);
  /* the other stream takes a page */
  y = tu_reserve(api, b, 256 * KiB);
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_ALLOC],
                    allocs + 1);
  CK_CHECK(api, dev);
  CK_OK(api, tu_emu(api)->capture_end(dev, na));
  {
    /* failed reservations guard nothing: a capture that only failed has
     * nothing to retire (found by the fuzz driver) */
    void *nc;
    hippo_stream *c = tu_attach(api, dev, &nc);
    uint64_t idc;
    CK_OK(api, tu_emu(api)->capture_begin(dev, nc, &idc));
    CK_STATUS(api, api->reserve(c, 4096, HIPPO_MODE_AUTO, &y),
              HIPPO_GRAPH_NEEDS_PAGE);
    CK_OK(api, tu_emu(api)->capture_end(dev, nc));
    CK_STATUS(api, api->graph_retire(dev, idc), HIPPO_INVALID_ARGUMENT);
    CK_ERROR_HAS(api, "guarded nothing");
    tu_detach(api, dev, c, nc);
  }
  CK_OK(api, api->release(b, y));
  CK_OK(api, api->release(a, x));
  for (int i = 0; i < 3; i++)
    CK_OK(api, api->release(a, h[i]));
  CK_OK(api, api->graph_retire(dev, id));
  CK_CHECK(api, dev);
  tu_detach(api, dev, a, na);
  tu_detach(api, dev, b, nb);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* Nothing is given back while a capture records: not by cleanup, reclaim,
 * install or detach (refused with HIPPO_GRAPH_RECORDING) nor by periodic
 * deallocation; zero backend frees. */
START_TEST(test_zero_frees_while_recording) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  void *na, *nb;
  hippo_stream *a, *b;
  hippo_handle h, z;
  uint64_t id, frees;
  tu_layout_sliced(&l, MiB, 256 * KiB);
  l.pools[0].dealloc_period = 1;
  dev = tu_open(api, tu_backends[_i], 64 * MiB, &l.layout);
  a = tu_attach(api, dev, &na);
  b = tu_attach(api, dev, &nb);
  h = tu_reserve(api, a, 4096);
  CK_OK(api, tu_emu(api)->capture_begin(dev, nb, &id));
  frees = tu_counters(api, dev).calls[HIPPO_CALL_FREE];
  CK_OK(api, api->release(a, h)); /* the page empties, due at once */
  for (int i = 0; i < 8; i++) {
    z = tu_reserve(api, a, 0);
    CK_OK(api, api->release(a, z));
  }
  CK_STATUS(api, api->cleanup(dev, NULL), HIPPO_GRAPH_RECORDING);
  CK_STATUS(api, api->reclaim(dev, NULL), HIPPO_GRAPH_RECORDING);
  CK_STATUS(api, api->stream_detach(a), HIPPO_GRAPH_RECORDING);
  {
    tu_layout l2;
    CK_STATUS(api,
              api->pools_install(dev, tu_layout_sliced(&l2, MiB, MiB), NULL),
              HIPPO_GRAPH_RECORDING);
  }
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_FREE], frees);
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 1);
  CK_CHECK(api, dev);
  CK_OK(api, tu_emu(api)->capture_end(dev, nb));
  /* the ticks backed off while the gate said no (1, 2, 4, ...
   * reservations): the page goes within 16 now */
  for (int i = 0; i < 16 && tu_counters(api, dev).pages_held; i++) {
    z = tu_reserve(api, a, 0);
    CK_OK(api, api->release(a, z));
  }
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 0);
  CK_STATUS(api, api->graph_retire(dev, id), HIPPO_INVALID_ARGUMENT);
  tu_detach(api, dev, a, na);
  tu_detach(api, dev, b, nb);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* A slice resolved during a capture never moves: relocation leaves its
 * page whole (pages_guarded) until the graph is retired, then moves it.
 * Released after the capture, it still stays out of use until retire. */
START_TEST(test_resolved_not_moved) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_pool_options *o;
  hippo_device *dev;
  void *n;
  hippo_stream *s;
  hippo_handle a, big, c;
  hippo_relocation_report rep;
  uint64_t id, old;
  void *p;
  tu_layout_init(&l);
  o = tu_layout_add(&l, HIPPO_POOL_ARENA);
  o->page_size = 2 * MiB;
  o->max_slice_size = 16 * MiB;
  dev = tu_open(api, HIPPO_BACKEND_HOST, 64 * MiB, &l.layout);
  s = tu_attach(api, dev, &n);
  a = tu_reserve(api, s, MiB);
  tu_fill(api, dev, (void *)(uintptr_t)tu_addr(api, s, a), MiB, 9);
  big = tu_reserve(api, s, 8 * MiB); /* grows: a's page is outdated */
  old = tu_addr(api, s, a);
  CK_OK(api, tu_emu(api)->capture_begin(dev, n, &id));
  CK_OK(api, api->resolve(s, a, &p, NULL)); /* the graph bakes it in */
  ck_assert_uint_eq((uint64_t)(uintptr_t)p, old);
  CK_OK(api, tu_emu(api)->capture_end(dev, n));
  ck_assert_uint_eq(holds(api, dev, s), 1);
  ck_assert_uint_eq(guarded(api, dev, s), 0); /* held, still live */
  memset(&rep, 0, sizeof rep);
  rep.struct_size = sizeof rep;
  CK_OK(api, api->relocate_with(dev, s, HIPPO_RELOCATE_EXPLICIT, &rep));
  ck_assert_uint_eq(rep.slices_moved, 0);
  ck_assert_uint_eq(rep.pages_guarded, 1);
  ck_assert_uint_eq(rep.outcome, HIPPO_RELOCATION_NO_ROOM);
  ck_assert_uint_eq(tu_addr(api, s, a), old);
  /* released after the capture: out of use until retire */
  CK_OK(api, api->release(s, a));
  ck_assert_uint_eq(guarded(api, dev, s), MiB);
  c = tu_reserve(api, s, 512 * KiB);
  ck_assert_uint_ne(tu_addr(api, s, c), old);
  CK_OK(api, api->cleanup(dev, s));
  ck_assert_uint_eq(tu_report(api, s, 1).outdated_pages, 1); /* kept */
  CK_CHECK(api, dev);
  CK_OK(api, api->graph_retire(dev, id));
  ck_assert_uint_eq(guarded(api, dev, s), 0);
  CK_OK(api, api->cleanup(dev, s));
  ck_assert_uint_eq(tu_report(api, s, 1).outdated_pages, 0); /* gone now */
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, big));
  CK_OK(api, api->release(s, c));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* A stream detached while a graph holds slices of it: the held pages stay
 * (retained by the device) and go when the graph is retired; never
 * retired, at device_close.  install is refused while holds remain. */
START_TEST(test_detach_retains) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, tu_backends[_i]);
  void *na, *nb;
  hippo_stream *a = tu_attach(api, dev, &na), *b = tu_attach(api, dev, &nb);
  hippo_handle h, k;
  uint64_t id, id2;
  tu_layout l;
  h = tu_reserve(api, a, 64 * KiB);
  (void)tu_reserve(api, a, 64 * KiB); /* live at detach: dropped */
  CK_OK(api, tu_emu(api)->capture_begin(dev, na, &id));
  CK_OK(api, api->release(a, h)); /* guarded */
  CK_OK(api, tu_emu(api)->capture_end(dev, na));
  CK_STATUS(api,
            api->pools_install(dev, tu_layout_sliced(&l, MiB, MiB), NULL),
            HIPPO_POOLS_IN_USE);
  CK_ERROR_HAS(api, "graph_retire");
  tu_detach(api, dev, a, na); /* g goes; h's page stays */
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 1);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_reserved, MiB);
  ck_assert_uint_eq(guarded(api, dev, NULL), 64 * KiB);
  ck_assert_uint_eq(holds(api, dev, NULL), 1);
  ck_assert_uint_eq(tu_info(api, dev).streams, 1);
  CK_CHECK(api, dev);
  CK_OK(api, api->graph_retire(dev, id));
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 0);
  ck_assert_uint_eq(guarded(api, dev, NULL), 0);
  CK_CHECK(api, dev);
  /* never retired: the page stays until device_close */
  CK_OK(api, tu_emu(api)->capture_begin(dev, nb, &id2));
  k = tu_reserve(api, b, 0);
  CK_STATUS(api, api->reserve(b, 4096, HIPPO_MODE_AUTO, &k),
            HIPPO_GRAPH_NEEDS_PAGE);
  CK_OK(api, tu_emu(api)->capture_end(dev, nb));
  k = tu_reserve(api, b, 4096);
  CK_OK(api, tu_emu(api)->capture_begin(dev, nb, &id2));
  CK_OK(api, api->release(b, k));
  CK_OK(api, tu_emu(api)->capture_end(dev, nb));
  tu_detach(api, dev, b, nb);
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 1);
  CK_CHECK(api, dev);
  CK_OK(api, api->device_close(dev)); /* gives it back (valgrind: no leak) */
}
END_TEST

/* graph_retire while another stream of the device captures (issue 30): a
 * detached stream left its page for a graph; retiring that graph drops
 * the holds at once, but the page goes back only once no stream captures
 * (hippo frees no page then): it stays with the device, reserved and
 * free, and the next graph_retire, cleanup(device, NULL) or stream_detach
 * after the capture gives it back. */
START_TEST(test_retire_while_other_captures) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, tu_backends[_i]);
  void *na, *nb;
  hippo_stream *a = tu_attach(api, dev, &na), *b = tu_attach(api, dev, &nb);
  hippo_handle h, k;
  hippo_usage u;
  uint64_t id, idb, frees;
  h = tu_reserve(api, a, 64 * KiB);
  k = tu_reserve(api, b, 4096); /* b's own page, held throughout */
  CK_OK(api, tu_emu(api)->capture_begin(dev, na, &id));
  CK_OK(api, api->release(a, h)); /* guarded */
  CK_OK(api, tu_emu(api)->capture_end(dev, na));
  tu_detach(api, dev, a, na); /* h's page stays, retained */
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 2);
  CK_OK(api, tu_emu(api)->capture_begin(dev, nb, &idb));
  frees = tu_counters(api, dev).calls[HIPPO_CALL_FREE];
  CK_OK(api, api->graph_retire(dev, id)); /* the holds go, not the page */
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_FREE], frees);
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 2);
  u = tu_usage(api, dev, NULL);
  ck_assert_uint_eq(u.pages, 2);
  ck_assert_uint_eq(u.bytes_reserved, 2 * MiB);
  ck_assert_uint_eq(u.bytes_guarded, 0);
  ck_assert_uint_eq(u.slices_guarded, 0);
  ck_assert_uint_eq(u.bytes_waiting, 0);
  ck_assert_uint_eq(u.bytes_in_use, 4096);
  CK_CHECK(api, dev);
  CK_OK(api, api->graph_retire(dev, id)); /* again: still capturing */
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 2);
  CK_STATUS(api, api->cleanup(dev, NULL), HIPPO_GRAPH_RECORDING);
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_FREE], frees);
  CK_OK(api, tu_emu(api)->capture_end(dev, nb));
  CK_OK(api, api->graph_retire(dev, id)); /* no capture now: it goes */
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_FREE], frees + 1);
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 1);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_reserved, MiB);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(b, k));
  tu_detach(api, dev, b, nb);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* Pools that keep a page per reservation (EXCLUSIVE, DIRECT, persistent)
 * guard the same way: a page released during a capture is not reused
 * before retire. */
START_TEST(test_page_pools_guard) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  void *n;
  hippo_stream *s;
  hippo_handle w, h, x, y;
  uint64_t id, a, p;
  tu_layout_init(&l);
  tu_layout_add(&l, HIPPO_POOL_EXCLUSIVE)->max_alloc_size = 4 * MiB;
  dev = tu_open(api, tu_backends[_i], 64 * MiB, &l.layout);
  s = tu_attach(api, dev, &n);
  w = tu_reserve(api, s, MiB); /* warm-up: a free 1 MiB page */
  CK_OK(api, api->release(s, w));
  CK_OK(api, api->reserve(s, 8192, HIPPO_MODE_PERSISTENT, &w));
  CK_OK(api, api->release(s, w)); /* and a free persistent page */
  CK_OK(api, tu_emu(api)->capture_begin(dev, n, &id));
  h = tu_reserve(api, s, MiB);
  a = tu_addr(api, s, h);
  CK_OK(api, api->release(s, h));
  CK_OK(api, api->reserve(s, 8192, HIPPO_MODE_PERSISTENT, &w));
  p = tu_addr(api, s, w);
  CK_OK(api, api->release(s, w));
  ck_assert_uint_eq(guarded(api, dev, s), MiB + 8192);
  ck_assert_uint_eq(tu_report(api, s, 0).bytes_guarded, 8192);
  CK_OK(api, tu_emu(api)->capture_end(dev, n));
  x = tu_reserve(api, s, MiB); /* a new page, not the guarded one */
  ck_assert_uint_ne(tu_addr(api, s, x), a);
  CK_OK(api, api->reserve(s, 8192, HIPPO_MODE_PERSISTENT, &y));
  ck_assert_uint_ne(tu_addr(api, s, y), p);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, x));
  CK_OK(api, api->release(s, y));
  CK_OK(api, api->graph_retire(dev, id));
  ck_assert_uint_eq(guarded(api, dev, s), 0);
  CK_CHECK(api, dev);
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* ---- record_use ---------------------------------------------------------------- */

/* Stream b uses a's slice x (record_use), with its work still queued (a
 * copy that reads x): released by a, x is reused by no reservation a makes
 * before b's work ran, and by the first one after; b read x's bytes
 * intact. */
START_TEST(test_use_order) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, HIPPO_BACKEND_HOST);
  void *na, *nb;
  hippo_stream *a = tu_attach(api, dev, &na), *b = tu_attach(api, dev, &nb);
  hippo_handle x, y, r1, r2;
  uint64_t ax;
  hippo_usage u;

  x = tu_reserve(api, a, 64 * KiB);
  ax = tu_addr(api, a, x);
  tu_fill(api, dev, (void *)(uintptr_t)ax, 64 * KiB, 21);
  y = tu_reserve(api, b, 64 * KiB);
  CK_OK(api, api->record_use(a, x, b));
  CK_OK(api, api->record_use(a, x, b)); /* once per user */
  CK_OK(api, api->record_use(a, x, a)); /* the owner: nothing to do */
  /* b's work: a copy of x, queued, not run */
  CK_OK(api, tu_emu(api)->copy(dev, nb, (void *)(uintptr_t)tu_addr(api, b, y),
                           (const void *)(uintptr_t)ax, 64 * KiB));
  CK_OK(api, api->release(a, x));
  u = tu_usage(api, dev, a);
  ck_assert_uint_eq(u.slices_waiting, 1);
  ck_assert_uint_eq(u.bytes_waiting, 64 * KiB);
  ck_assert_uint_eq(u.bytes_guarded, 0);
  ck_assert_uint_eq(u.allocations, 0);
  CK_CHECK(api, dev);
  r1 = tu_reserve(api, a, 64 * KiB); /* before b's work ran: not x */
  ck_assert_uint_ne(tu_addr(api, a, r1), ax);
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 1);
  CK_OK(api, tu_emu(api)->stream_sync(dev, nb)); /* b's work runs */
  r2 = tu_reserve(api, a, 64 * KiB); /* after: x again */
  ck_assert_uint_eq(tu_addr(api, a, r2), ax);
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 0);
  ck_assert_uint_eq(tu_usage(api, dev, a).bytes_waiting, 0);
  tu_verify_at(api, dev, (void *)(uintptr_t)tu_addr(api, b, y), 64 * KiB,
               21, __FILE__, __LINE__);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(a, r1));
  CK_OK(api, api->release(a, r2));
  CK_OK(api, api->release(b, y));
  tu_detach(api, dev, a, na);
  tu_detach(api, dev, b, nb);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* Released slices that wait for record_use users count in bytes_waiting,
 * not bytes_guarded (issue 30); a slice a graph holds too counts as
 * guarded until the graph is retired, then as waiting until its users'
 * work ran; one whose waits end first stays guarded until retire.  Exact
 * figures in usage (stream and device) and pool_report, on a SLICED pool
 * (_i 0) and an EXCLUSIVE one (_i 1, a page per reservation). */
START_TEST(test_use_waiting_figures) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  void *na, *nb;
  hippo_stream *a, *b;
  hippo_handle x, x2, x3, keep, y;
  uint64_t id2, id3, sz = 64 * KiB;
  hippo_usage u;
  if (_i == 0) {
    tu_layout_sliced(&l, MiB, 256 * KiB);
  } else {
    tu_layout_init(&l);
    tu_layout_add(&l, HIPPO_POOL_EXCLUSIVE)->max_alloc_size = 4 * MiB;
  }
  dev = tu_open(api, HIPPO_BACKEND_HOST, 64 * MiB, &l.layout);
  a = tu_attach(api, dev, &na);
  b = tu_attach(api, dev, &nb);
  x = tu_reserve(api, a, sz);
  x2 = tu_reserve(api, a, sz);
  x3 = tu_reserve(api, a, sz);
  keep = tu_reserve(api, a, sz); /* keeps a SLICED page from emptying */
  y = tu_reserve(api, b, sz);
  for (int i = 0; i < 3; i++)
    CK_OK(api, api->record_use(a, i == 0 ? x : i == 1 ? x2 : x3, b));
  /* b's work on them, queued */
  CK_OK(api, tu_emu(api)->copy(dev, nb, (void *)(uintptr_t)tu_addr(api, b, y),
                               (const void *)(uintptr_t)tu_addr(api, a, x),
                               sz));
  /* x2 and x3 are resolved in captures on a: a graph holds each too */
  CK_OK(api, tu_emu(api)->capture_begin(dev, na, &id2));
  (void)tu_addr(api, a, x2);
  CK_OK(api, tu_emu(api)->capture_end(dev, na));
  CK_OK(api, tu_emu(api)->capture_begin(dev, na, &id3));
  (void)tu_addr(api, a, x3);
  CK_OK(api, tu_emu(api)->capture_end(dev, na));

  CK_OK(api, api->release(a, x)); /* only b's work holds it: waiting */
  u = tu_usage(api, dev, a);
  ck_assert_uint_eq(u.bytes_waiting, sz);
  ck_assert_uint_eq(u.bytes_guarded, 0);
  ck_assert_uint_eq(u.slices_waiting, 1);
  ck_assert_uint_eq(u.slices_guarded, 2); /* x2's and x3's, live */
  ck_assert_uint_eq(tu_report(api, a, 1).bytes_waiting, sz);
  ck_assert_uint_eq(tu_report(api, a, 1).bytes_guarded, 0);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_waiting, sz);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(a, x2)); /* a graph and b's work: guarded */
  CK_OK(api, api->release(a, x3));
  u = tu_usage(api, dev, a);
  ck_assert_uint_eq(u.bytes_waiting, sz);
  ck_assert_uint_eq(u.bytes_guarded, 2 * sz);
  ck_assert_uint_eq(u.slices_waiting, 3);
  ck_assert_uint_eq(tu_report(api, a, 1).bytes_guarded, 2 * sz);
  {
    hippo_pool_report r = tu_report(api, a, 1);
    ck_assert_uint_eq(r.bytes_free, r.bytes_reserved - r.bytes_in_use -
                                        r.bytes_padding - 3 * sz);
  }
  CK_CHECK(api, dev);
  CK_OK(api, api->graph_retire(dev, id2)); /* x2: b's work still holds it */
  u = tu_usage(api, dev, a);
  ck_assert_uint_eq(u.bytes_waiting, 2 * sz);
  ck_assert_uint_eq(u.bytes_guarded, sz);
  ck_assert_uint_eq(u.slices_guarded, 1);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_guarded, sz);
  CK_CHECK(api, dev);
  CK_OK(api, tu_emu(api)->stream_sync(dev, nb)); /* b's work ran */
  CK_OK(api, api->cleanup(dev, a)); /* the waits end: x, x2 free */
  u = tu_usage(api, dev, a);
  ck_assert_uint_eq(u.bytes_waiting, 0);
  ck_assert_uint_eq(u.slices_waiting, 0);
  ck_assert_uint_eq(u.bytes_guarded, sz); /* x3: its graph remains */
  ck_assert_uint_eq(tu_report(api, a, 1).bytes_waiting, 0);
  CK_CHECK(api, dev);
  CK_OK(api, api->graph_retire(dev, id3));
  u = tu_usage(api, dev, a);
  ck_assert_uint_eq(u.bytes_guarded, 0);
  ck_assert_uint_eq(u.slices_guarded, 0);
  ck_assert_uint_eq(u.allocations, 1);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(a, keep));
  CK_OK(api, api->release(b, y));
  tu_detach(api, dev, a, na);
  tu_detach(api, dev, b, nb);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* A fault recording the event fails the release, which changes nothing
 * (the reservation stays live); a fault in the query at a later
 * reservation leaves the slice waiting, counted; cleanup waits for the
 * work and then the bytes are free. */
START_TEST(test_use_faults) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, tu_backends[_i]);
  void *na, *nb, *p;
  hippo_stream *a = tu_attach(api, dev, &na), *b = tu_attach(api, dev, &nb);
  hippo_handle x, r, q;
  uint64_t ax;
  x = tu_reserve(api, a, 64 * KiB);
  ax = tu_addr(api, a, x);
  q = tu_reserve(api, a, 64 * KiB); /* keeps the page from emptying */
  CK_OK(api, api->record_use(a, x, b));
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_EVENT, 1,
                                   HIPPO_BACKEND_ERROR));
  CK_STATUS(api, api->release(a, x), HIPPO_BACKEND_ERROR);
  CK_ERROR_HAS(api, "record_use");
  CK_OK(api, api->resolve(a, x, &p, NULL)); /* still live */
  ck_assert_uint_eq(tu_usage(api, dev, a).allocations, 2);
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 0);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(a, x));
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 1);
  /* the event is done (nothing queued on b): but the query fails */
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_EVENT, 1,
                                   HIPPO_BACKEND_ERROR));
  r = tu_reserve(api, a, 64 * KiB);
  ck_assert_uint_ne(tu_addr(api, a, r), ax);
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 1);
  ck_assert_uint_eq(tu_usage(api, dev, a).event_failures, 1);
  CK_CHECK(api, dev);
  CK_OK(api, api->cleanup(dev, a)); /* waits: the bytes are free now */
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 0);
  ck_assert_uint_eq(tu_usage(api, dev, a).bytes_guarded, 0);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(a, r));
  CK_OK(api, api->release(a, q));
  tu_detach(api, dev, a, na);
  tu_detach(api, dev, b, nb);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* A detach that fails while recording the work of the detaching stream
 * on the reservations it uses leaves those uses as they were: the stream
 * stays attached and goes on using them, so a later release still waits
 * for its later work (found by the fault campaign's review). */
START_TEST(test_use_failed_detach) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, tu_backends[_i]);
  void *na, *nb, *nc, *src, *dst;
  hippo_stream *a = tu_attach(api, dev, &na), *b = tu_attach(api, dev, &nb),
               *c = tu_attach(api, dev, &nc);
  hippo_handle x, keep, y, bs, bd, r;
  uint64_t ax;
  x = tu_reserve(api, a, 64 * KiB);
  ax = tu_addr(api, a, x);
  keep = tu_reserve(api, a, 64 * KiB); /* keeps the page from emptying */
  y = tu_reserve(api, c, 64 * KiB);
  CK_OK(api, api->record_use(a, x, b));
  CK_OK(api, api->record_use(c, y, b));
  /* the second event record (c's use, after a's) fails */
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_EVENT, 2,
                                   HIPPO_BACKEND_ERROR));
  CK_STATUS(api, api->stream_detach(b), HIPPO_BACKEND_ERROR);
  CK_ERROR_HAS(api, "nothing was released");
  CK_CHECK(api, dev);
  /* b stays and queues more work */
  bs = tu_reserve(api, b, 4096);
  bd = tu_reserve(api, b, 4096);
  CK_OK(api, api->resolve(b, bs, &src, NULL));
  CK_OK(api, api->resolve(b, bd, &dst, NULL));
  CK_OK(api, tu_emu(api)->copy(dev, nb, dst, src, 4096));
  /* x's release records b's work now: its bytes wait for the copy */
  CK_OK(api, api->release(a, x));
  r = tu_reserve(api, a, 64 * KiB);
  ck_assert_uint_ne(tu_addr(api, a, r), ax);
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 1);
  CK_OK(api, tu_emu(api)->stream_sync(dev, nb));
  CK_OK(api, api->cleanup(dev, a));
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 0);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(a, r));
  CK_OK(api, api->release(a, keep));
  CK_OK(api, api->release(c, y));
  CK_OK(api, api->release(b, bs));
  CK_OK(api, api->release(b, bd));
  tu_detach(api, dev, b, nb);
  tu_detach(api, dev, a, na);
  tu_detach(api, dev, c, nc);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* A detach of the owner that fails while waiting for what its released
 * slices wait on keeps the uses of its live reservations: a user's later
 * work still holds their bytes at their release (the uses were dropped
 * before that wait, and the bytes given out under the user's queued copy,
 * in review). */
START_TEST(test_use_failed_owner_detach) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, HIPPO_BACKEND_HOST);
  void *na, *nb, *src, *dst;
  hippo_stream *a = tu_attach(api, dev, &na), *b = tu_attach(api, dev, &nb);
  hippo_handle x, y, keep, bd, r;
  uint64_t ax;
  x = tu_reserve(api, a, 64 * KiB);
  ax = tu_addr(api, a, x);
  y = tu_reserve(api, a, 64 * KiB);
  keep = tu_reserve(api, a, 64 * KiB); /* keeps the page from emptying */
  bd = tu_reserve(api, b, 64 * KiB);
  tu_fill(api, dev, (void *)(uintptr_t)ax, 64 * KiB, 61);
  CK_OK(api, api->record_use(a, x, b));
  CK_OK(api, api->record_use(a, y, b));
  CK_OK(api, api->release(a, y)); /* waits on b's (empty) work */
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 1);
  /* the detach records and waits for x's use (event calls 1 and 2), then
   * waits for y's wait: the third fails */
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_EVENT, 3,
                                   HIPPO_BACKEND_ERROR));
  CK_STATUS(api, api->stream_detach(a), HIPPO_BACKEND_ERROR);
  CK_ERROR_HAS(api, "nothing was released");
  ck_assert_uint_eq(tu_usage(api, dev, a).allocations, 2);
  CK_CHECK(api, dev);
  /* b goes on reading x; x's release waits for that */
  CK_OK(api, api->resolve(a, x, &src, NULL));
  CK_OK(api, api->resolve(b, bd, &dst, NULL));
  CK_OK(api, tu_emu(api)->copy(dev, nb, dst, src, 64 * KiB));
  CK_OK(api, api->release(a, x));
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 2);
  r = tu_reserve(api, a, 64 * KiB);
  ck_assert_uint_ne(tu_addr(api, a, r), ax);
  tu_fill(api, dev, (void *)(uintptr_t)tu_addr(api, a, r), 64 * KiB, 62);
  CK_OK(api, tu_emu(api)->stream_sync(dev, nb)); /* the copy runs */
  tu_verify_at(api, dev, dst, 64 * KiB, 61, __FILE__, __LINE__);
  CK_OK(api, api->cleanup(dev, a));
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 0);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(a, r));
  CK_OK(api, api->release(a, keep));
  CK_OK(api, api->release(b, bd));
  tu_detach(api, dev, a, na);
  tu_detach(api, dev, b, nb);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* The event queries a reservation makes (HOST counts them). */
static uint64_t event_calls(const hippo_api *api, hippo_device *dev) {
  return tu_counters(api, dev).calls[HIPPO_CALL_EVENT];
}

/* 48 of a's slices wait on b's queued copy, 16 on c's, released in turn.
 * A reservation asks about the oldest event of each user and no further
 * (stream order: the later ones are not done either): 2 queries, not 64.
 * c holds no page (its copy is between two of a's reservations), so its
 * detach runs nothing (a page free would run every queue) and its waits,
 * no longer naming it, are asked each on its own from then on: behind
 * b's pending oldest too (_i 1: the poll stops early only once no unnamed
 * wait is left).  _i 0: b's work runs first, then c detaches; _i 1: c
 * detaches first. */
START_TEST(test_use_poll_per_user) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, HIPPO_BACKEND_HOST);
  void *na, *nb, *nc, *p, *q;
  hippo_stream *a = tu_attach(api, dev, &na), *b = tu_attach(api, dev, &nb),
               *c = tu_attach(api, dev, &nc);
  hippo_handle x[64], r[4], bs, bd, k1, k2;
  uint64_t before;
  enum { RESERVE, SYNC_B, DETACH_C, SYNC_C };
  static const int steps[2][4] = {{RESERVE, SYNC_B, DETACH_C, SYNC_C},
                                  {RESERVE, DETACH_C, SYNC_B, SYNC_C}};
  /* the event queries of the reservation after each step, and the slices
   * still waiting then */
  static const uint64_t queries[2][4] = {{2, 48 + 1, 16, 16},
                                         {2, 1 + 16, 48 + 16, 16}};
  static const uint64_t waiting[2][4] = {{64, 16, 16, 0}, {64, 64, 16, 0}};

  for (int i = 0; i < 64; i++)
    x[i] = tu_reserve(api, a, 16 * KiB);
  k1 = tu_reserve(api, a, 4096);
  k2 = tu_reserve(api, a, 4096);
  bs = tu_reserve(api, b, 4096);
  bd = tu_reserve(api, b, 4096);
  for (int i = 0; i < 64; i++)
    CK_OK(api, api->record_use(a, x[i], i < 48 ? b : c));
  CK_OK(api, api->resolve(b, bs, &p, NULL));
  CK_OK(api, api->resolve(b, bd, &q, NULL));
  CK_OK(api, tu_emu(api)->copy(dev, nb, q, p, 4096)); /* queued, not run */
  CK_OK(api, api->resolve(a, k1, &p, NULL));
  CK_OK(api, api->resolve(a, k2, &q, NULL));
  CK_OK(api, tu_emu(api)->copy(dev, nc, q, p, 4096));
  /* three of b's, then one of c's: the two users' waits interleave */
  for (int k = 0, nextb = 0, nextc = 48; k < 64; k++)
    CK_OK(api, api->release(a, x[k % 4 == 3 ? nextc++ : nextb++]));
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 64);
  CK_CHECK(api, dev);

  for (int k = 0; k < 4; k++) {
    if (steps[_i][k] == SYNC_B)
      CK_OK(api, tu_emu(api)->stream_sync(dev, nb));
    else if (steps[_i][k] == SYNC_C)
      CK_OK(api, tu_emu(api)->stream_sync(dev, nc));
    else if (steps[_i][k] == DETACH_C)
      CK_OK(api, api->stream_detach(c));
    CK_CHECK(api, dev);
    before = event_calls(api, dev);
    r[k] = tu_reserve(api, a, 16 * KiB);
    ck_assert_uint_eq(event_calls(api, dev) - before, queries[_i][k]);
    ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, waiting[_i][k]);
    ck_assert_uint_eq(tu_usage(api, dev, a).bytes_waiting,
                      waiting[_i][k] * 16 * KiB);
    ck_assert_uint_eq(tu_usage(api, dev, a).bytes_guarded, 0);
    CK_CHECK(api, dev);
  }
  for (int k = 0; k < 4; k++)
    CK_OK(api, api->release(a, r[k]));
  CK_OK(api, api->release(a, k1));
  CK_OK(api, api->release(a, k2));
  CK_OK(api, api->release(b, bs));
  CK_OK(api, api->release(b, bd));
  CK_OK(api, tu_emu(api)->stream_destroy(dev, nc));
  tu_detach(api, dev, a, na);
  tu_detach(api, dev, b, nb);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* Detaching: the owner waits for its users' work before its pages go (b
 * read the bytes intact); a user that detaches first has its work marked,
 * and the owner's release then waits for that mark. */
START_TEST(test_use_detach) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, HIPPO_BACKEND_HOST);
  void *na, *nb, *nc;
  hippo_stream *a = tu_attach(api, dev, &na), *b = tu_attach(api, dev, &nb);
  hippo_stream *c;
  hippo_handle x, y, z, w;
  x = tu_reserve(api, a, 64 * KiB);
  tu_fill(api, dev, (void *)(uintptr_t)tu_addr(api, a, x), 64 * KiB, 33);
  y = tu_reserve(api, b, 64 * KiB);
  CK_OK(api, api->record_use(a, x, b));
  CK_OK(api, tu_emu(api)->copy(dev, nb, (void *)(uintptr_t)tu_addr(api, b, y),
                           (const void *)(uintptr_t)tu_addr(api, a, x),
                           64 * KiB));
  tu_detach(api, dev, a, na); /* waits for b's copy, then frees */
  tu_verify_at(api, dev, (void *)(uintptr_t)tu_addr(api, b, y), 64 * KiB, 33,
               __FILE__, __LINE__);
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 1); /* b's page */
  CK_CHECK(api, dev);
  /* the user detaches first */
  c = tu_attach(api, dev, &nc);
  z = tu_reserve(api, c, 64 * KiB);
  w = tu_reserve(api, c, 64 * KiB);
  CK_OK(api, api->record_use(c, z, b));
  CK_OK(api, api->release(b, y));
  tu_detach(api, dev, b, nb);
  CK_OK(api, api->release(c, z)); /* its event was recorded at b's detach */
  ck_assert_uint_eq(tu_usage(api, dev, c).slices_waiting, 1);
  CK_OK(api, api->cleanup(dev, c));
  ck_assert_uint_eq(tu_usage(api, dev, c).slices_waiting, 0);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(c, w));
  tu_detach(api, dev, c, nc);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* Stream b used a's slice x with a copy still queued, then began a
 * capture; a releases x while b captures.  An event recorded on b then
 * would be baked into b's graph and mark nothing (HIP), so x waits, late:
 * no reservation gets x's bytes while b captures, nor after the capture
 * ended until b's copy ran; b read x's bytes intact.  A second late wait
 * is marked when b detaches with its copy still queued, and holds the
 * bytes until the copy ran (found by fake-hip fuzz seed 45). */
START_TEST(test_use_released_while_capturing) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, HIPPO_BACKEND_HOST);
  void *na, *nb;
  hippo_stream *a = tu_attach(api, dev, &na), *b = tu_attach(api, dev, &nb);
  hippo_handle x, y, keep, r1, r2, r3, r4;
  uint64_t ax, id;
  x = tu_reserve(api, a, 64 * KiB);
  ax = tu_addr(api, a, x);
  keep = tu_reserve(api, a, 64 * KiB); /* keeps the page from emptying */
  tu_fill(api, dev, (void *)(uintptr_t)ax, 64 * KiB, 45);
  y = tu_reserve(api, b, 64 * KiB);
  CK_OK(api, api->record_use(a, x, b));
  CK_OK(api, tu_emu(api)->copy(dev, nb, (void *)(uintptr_t)tu_addr(api, b, y),
                           (const void *)(uintptr_t)ax, 64 * KiB));
  CK_OK(api, tu_emu(api)->capture_begin(dev, nb, &id));
  CK_OK(api, api->release(a, x));
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 1);
  CK_CHECK(api, dev);
  r1 = tu_reserve(api, a, 64 * KiB); /* b captures: not x */
  ck_assert_uint_ne(tu_addr(api, a, r1), ax);
  tu_fill(api, dev, (void *)(uintptr_t)tu_addr(api, a, r1), 64 * KiB, 46);
  CK_STATUS(api, api->cleanup(dev, a), HIPPO_GRAPH_RECORDING);
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 1);
  CK_OK(api, tu_emu(api)->capture_end(dev, nb));
  r2 = tu_reserve(api, a, 64 * KiB); /* marked now; the copy is queued */
  ck_assert_uint_ne(tu_addr(api, a, r2), ax);
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 1);
  CK_CHECK(api, dev);
  CK_OK(api, tu_emu(api)->stream_sync(dev, nb)); /* b's copy runs */
  r3 = tu_reserve(api, a, 64 * KiB); /* x again */
  ck_assert_uint_eq(tu_addr(api, a, r3), ax);
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 0);
  tu_verify_at(api, dev, (void *)(uintptr_t)tu_addr(api, b, y), 64 * KiB,
               45, __FILE__, __LINE__);
  CK_CHECK(api, dev);
  /* late again, and b detaches before a reserves, its copy (into a's
   * keep) still queued: b holds no page, so its detach frees none (a free
   * would run the queue); the detach marks b's work, and a's next
   * reservation still gets other bytes */
  CK_OK(api, api->release(b, y));
  CK_OK(api, api->cleanup(dev, b));
  ck_assert_uint_eq(tu_usage(api, dev, b).bytes_reserved, 0);
  CK_OK(api, api->record_use(a, r3, b));
  CK_OK(api, tu_emu(api)->copy(dev, nb, (void *)(uintptr_t)tu_addr(api, a, keep),
                           (const void *)(uintptr_t)ax, 64 * KiB));
  CK_OK(api, tu_emu(api)->capture_begin(dev, nb, &id));
  CK_OK(api, api->release(a, r3));
  CK_OK(api, tu_emu(api)->capture_end(dev, nb));
  CK_OK(api, api->stream_detach(b));
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 1);
  CK_CHECK(api, dev); /* the wait no longer names b */
  r4 = tu_reserve(api, a, 64 * KiB); /* b's copy is queued: not x */
  ck_assert_uint_ne(tu_addr(api, a, r4), ax);
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 1);
  CK_OK(api, tu_emu(api)->stream_destroy(dev, nb)); /* runs the copy */
  CK_OK(api, api->cleanup(dev, a));
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 0);
  tu_verify_at(api, dev, (void *)(uintptr_t)tu_addr(api, a, keep), 64 * KiB,
               45, __FILE__, __LINE__); /* what the copy read */
  tu_verify_at(api, dev, (void *)(uintptr_t)tu_addr(api, a, r1), 64 * KiB,
               46, __FILE__, __LINE__);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(a, r1));
  CK_OK(api, api->release(a, r2));
  CK_OK(api, api->release(a, r4));
  CK_OK(api, api->release(a, keep));
  tu_detach(api, dev, a, na);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* A user that captures a graph: the slice is guarded for that graph. */
START_TEST(test_use_by_capture) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, tu_backends[_i]);
  void *na, *nb;
  hippo_stream *a = tu_attach(api, dev, &na), *b = tu_attach(api, dev, &nb);
  hippo_device *other = tu_open(api, HIPPO_BACKEND_DRY, 0, NULL);
  void *no;
  hippo_stream *so = tu_attach(api, other, &no);
  hippo_handle x, r;
  uint64_t id, ax;
  x = tu_reserve(api, a, 64 * KiB);
  ax = tu_addr(api, a, x);
  CK_OK(api, tu_emu(api)->capture_begin(dev, nb, &id));
  CK_OK(api, api->record_use(a, x, b));
  CK_OK(api, tu_emu(api)->capture_end(dev, nb));
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_guarded, 1);
  CK_OK(api, api->release(a, x));
  r = tu_reserve(api, a, 64 * KiB);
  ck_assert_uint_ne(tu_addr(api, a, r), ax);
  CK_OK(api, api->graph_retire(dev, id));
  ck_assert_uint_eq(tu_usage(api, dev, a).bytes_guarded, 0);
  /* bad arguments */
  CK_STATUS(api, api->record_use(a, x, b), HIPPO_INVALID_HANDLE);
  CK_STATUS(api, api->record_use(a, r, so), HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "another device");
  CK_STATUS(api, api->record_use(a, r, NULL), HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->record_use(NULL, r, b), HIPPO_INVALID_ARGUMENT);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(a, r));
  tu_detach(api, dev, a, na);
  tu_detach(api, dev, b, nb);
  tu_detach(api, other, so, no);
  CK_OK(api, api->device_close(dev));
  CK_OK(api, api->device_close(other));
}
END_TEST

/* capture_announce: checked with the driver (the emulated one here), and
 * the guard works the same with announcements. */
START_TEST(test_capture_announce) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, tu_backends[_i]);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle warm, h, r;
  uint64_t id, a;
  warm = tu_reserve(api, s, 64 * KiB);
  CK_OK(api, api->release(s, warm));
  CK_STATUS(api, api->capture_announce(s, HIPPO_CAPTURE_BEGINS),
            HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "does not capture");
  CK_OK(api, tu_emu(api)->capture_begin(dev, n, &id));
  CK_OK(api, api->capture_announce(s, HIPPO_CAPTURE_BEGINS));
  CK_STATUS(api, api->capture_announce(s, HIPPO_CAPTURE_ENDED),
            HIPPO_GRAPH_RECORDING);
  CK_ERROR_HAS(api, "still captures");
  h = tu_reserve(api, s, 64 * KiB);
  a = tu_addr(api, s, h);
  CK_OK(api, api->release(s, h));
  CK_OK(api, tu_emu(api)->capture_end(dev, n));
  CK_OK(api, api->capture_announce(s, HIPPO_CAPTURE_ENDED));
  r = tu_reserve(api, s, 64 * KiB); /* guarded: not the same bytes */
  ck_assert_uint_ne(tu_addr(api, s, r), a);
  CK_OK(api, api->capture_announce(s, HIPPO_CAPTURE_QUERY));
  CK_STATUS(api, api->capture_announce(s, 3), HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->capture_announce(NULL, HIPPO_CAPTURE_QUERY),
            HIPPO_INVALID_ARGUMENT);
  CK_OK(api, api->graph_retire(dev, id));
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, r));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* graph_retire on one thread, check on another (the header allows any
 * call from any thread): the registry's holds and the streams' counts
 * change together, so check never sees one without the other (it
 * answered HIPPO_INTERNAL, "streams count 1 graph holds, the registry
 * 0", thousands of times a second). */
struct retire_loop {
  const hippo_api *api;
  hippo_device *dev;
  void *native;
  hippo_stream *s;
  hippo_handle h;
  atomic_bool stop;
  atomic_long rounds; /* read by the checking thread */
  hippo_status first_bad;
};

static void *retire_rounds(void *arg) {
  struct retire_loop *r = arg;
  while (!atomic_load(&r->stop) && r->first_bad == HIPPO_SUCCESS) {
    uint64_t id = 0;
    void *ptr;
    hippo_status st = tu_emu(r->api)->capture_begin(r->dev, r->native, &id);
    if (st == HIPPO_SUCCESS)
      st = r->api->resolve(r->s, r->h, &ptr, NULL); /* a hold */
    if (st == HIPPO_SUCCESS)
      st = tu_emu(r->api)->capture_end(r->dev, r->native);
    if (st == HIPPO_SUCCESS)
      st = r->api->graph_retire(r->dev, id);
    if (st != HIPPO_SUCCESS)
      r->first_bad = st;
    r->rounds++;
  }
  return NULL;
}

START_TEST(test_retire_beside_check) {
  struct retire_loop r = {.api = tu_api()};
  const hippo_api *api = r.api;
  pthread_t t;
  long checks = 0, bad = 0;
  r.dev = tu_open_1m(api, HIPPO_BACKEND_HOST);
  r.s = tu_attach(api, r.dev, &r.native);
  r.h = tu_reserve(api, r.s, 4 * KiB);
  atomic_init(&r.stop, false);
  atomic_init(&r.rounds, 0);
  ck_assert_int_eq(pthread_create(&t, NULL, retire_rounds, &r), 0);
  /* until the other thread made 2,000 rounds, or 20,000 checks passed */
  while (checks < 20000 && atomic_load(&r.rounds) < 2000) {
    if (api->check(r.dev) != HIPPO_SUCCESS)
      bad++;
    checks++;
  }
  atomic_store(&r.stop, true);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  ck_assert_msg(bad == 0, "check failed %ld of %ld times beside graph_retire "
                "(%ld rounds)", bad, checks, atomic_load(&r.rounds));
  ck_assert_int_eq(r.first_bad, HIPPO_SUCCESS);
  CK_CHECK(api, r.dev);
  CK_OK(api, api->release(r.s, r.h));
  tu_detach(api, r.dev, r.s, r.native);
  CK_OK(api, api->device_close(r.dev));
}
END_TEST

static Suite *guard_suite(void) {
  Suite *s = suite_create("guard");
  TCase *tc = tcase_create("graph");
  tcase_add_loop_test(tc, test_released_not_reused, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_capture_needs_page, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_zero_frees_while_recording, 0, TU_N_BACKENDS);
  tcase_add_test(tc, test_resolved_not_moved);
  tcase_add_loop_test(tc, test_detach_retains, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_retire_while_other_captures, 0,
                      TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_page_pools_guard, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_capture_announce, 0, TU_N_BACKENDS);
  tcase_add_test(tc, test_retire_beside_check);
  suite_add_tcase(s, tc);
  tc = tcase_create("record_use");
  tcase_add_test(tc, test_use_order);
  tcase_add_loop_test(tc, test_use_waiting_figures, 0, 2);
  tcase_add_loop_test(tc, test_use_faults, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_use_poll_per_user, 0, 2);
  tcase_add_test(tc, test_use_detach);
  tcase_add_loop_test(tc, test_use_failed_detach, 0, TU_N_BACKENDS);
  tcase_add_test(tc, test_use_failed_owner_detach);
  tcase_add_test(tc, test_use_released_while_capturing);
  tcase_add_loop_test(tc, test_use_by_capture, 0, TU_N_BACKENDS);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(guard_suite()); }
