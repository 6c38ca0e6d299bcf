/* test-relocation.c -- ARENA pools and relocation through the ABI: page
 * growth and its refusal, outdated pages and their drain, the page-size
 * slots, relocation need and its stall memo, relocation moving patterned
 * data across three streams with queued work, faults at every position of
 * a relocation, the capture guard, out-of-memory recovery, the report.
 * HOST unless a test needs more memory than a test should touch (DRY).
 * The device's check must pass after every step that changes state. */
#include <config.h>

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define MiB TU_MiB
#define KiB TU_KiB

/* One ARENA pool: pages from `floor` up to `max`. */
static hippo_layout *arena_layout(tu_layout *l, uint64_t floor, uint64_t max,
                                  uint64_t dealloc_period) {
  hippo_pool_options *o;
  tu_layout_init(l);
  o = tu_layout_add(l, HIPPO_POOL_ARENA);
  o->page_size = floor;
  o->max_slice_size = max;
  o->dealloc_period = dealloc_period;
  return &l->layout;
}

static hippo_device *open_arena(const hippo_api *api, hippo_backend backend,
                                uint64_t capacity, uint64_t floor,
                                uint64_t max, uint32_t flags) {
  tu_layout l;
  return tu_open_flags(api, backend, capacity,
                       arena_layout(&l, floor, max, 0), flags);
}

static hippo_pool_report arena(const hippo_api *api, hippo_stream *s) {
  return tu_report(api, s, 1);
}

static hippo_relocation_need need_of(const hippo_api *api, hippo_stream *s) {
  hippo_relocation_need need = 99;
  CK_OK(api, api->relocation_need(s, &need));
  return need;
}

static hippo_relocation_report last_report(const hippo_api *api,
                                           hippo_device *dev,
                                           hippo_stream *s) {
  hippo_relocation_report r;
  TU_SIZED(r);
  CK_OK(api, api->relocation_report(dev, s, &r));
  return r;
}

static uint64_t persistent(const hippo_api *api, hippo_stream *s,
                           uint64_t size, hippo_handle *h) {
  CK_OK(api, api->reserve(s, size, HIPPO_MODE_PERSISTENT, h));
  return size;
}

/* ---- growth ------------------------------------------------------------------ */

/* CubeCL's numbers: 1 MiB -> 2 MiB pages, 10 MiB -> 11 MiB, then 6 MiB
 * -> still 11 MiB; 16 MiB at most: 16 MiB -> 16 MiB, 16 MiB + 1 -> too
 * big.  New requests never land on an outdated page. */
START_TEST(test_page_size_grows) {
  const hippo_api *api = tu_api();
  hippo_device *dev =
      open_arena(api, HIPPO_BACKEND_DRY, 128 * MiB, 2 * MiB, 16 * MiB, 0);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_pool_report r;
  hippo_handle a, b, c, d, e, big;
  uint64_t small_page;

  a = tu_reserve(api, s, MiB);
  r = arena(api, s);
  ck_assert_uint_eq(r.kind, HIPPO_POOL_ARENA);
  ck_assert_uint_eq(r.current_page_size, 2 * MiB);
  ck_assert_uint_eq(tu_options(api, s, 1).page_size,
                    2 * MiB); /* the floor, as given */
  ck_assert_uint_eq(r.pages, 1);
  ck_assert_uint_eq(r.page_sizes, 1);
  ck_assert_uint_eq(r.outdated_pages, 0);
  small_page = tu_addr(api, s, a);
  CK_CHECK(api, dev);

  b = tu_reserve(api, s, 10 * MiB);
  r = arena(api, s);
  ck_assert_uint_eq(r.current_page_size, 11 * MiB);
  ck_assert_uint_eq(r.pages, 2);
  ck_assert_uint_eq(r.page_sizes, 2);
  ck_assert_uint_eq(r.outdated_pages, 1);
  ck_assert_uint_eq(r.outdated_bytes, 2 * MiB);
  ck_assert_uint_eq(r.bytes_reserved, 13 * MiB);
  CK_CHECK(api, dev);

  /* 512 KiB would fit the outdated page's free MiB: it goes to the 11 MiB
   * page's last MiB instead */
  c = tu_reserve(api, s, 512 * KiB);
  ck_assert_uint_eq(tu_addr(api, s, c), tu_addr(api, s, b) + 10 * MiB);
  ck_assert(tu_addr(api, s, c) - small_page >= 2 * MiB);

  d = tu_reserve(api, s, 6 * MiB); /* no room: a third page, still 11 MiB */
  r = arena(api, s);
  ck_assert_uint_eq(r.current_page_size, 11 * MiB);
  ck_assert_uint_eq(r.pages, 3);
  ck_assert_uint_eq(r.page_sizes, 2);
  CK_CHECK(api, dev);

  e = tu_reserve(api, s, 16 * MiB); /* 17 MiB clamped to the largest */
  r = arena(api, s);
  ck_assert_uint_eq(r.current_page_size, 16 * MiB);
  ck_assert_uint_eq(r.page_sizes, 3);
  ck_assert_uint_eq(r.outdated_pages, 3);
  CK_STATUS(api, api->reserve(s, 16 * MiB + 1, HIPPO_MODE_AUTO, &big),
            HIPPO_BUFFER_TOO_BIG);
  CK_ERROR_HAS(api, "16777217");
  ck_assert_uint_eq(arena(api, s).current_page_size, 16 * MiB);
  CK_CHECK(api, dev);

  CK_OK(api, api->release(s, a));
  CK_OK(api, api->release(s, b));
  CK_OK(api, api->release(s, c));
  CK_OK(api, api->release(s, d));
  CK_OK(api, api->release(s, e));
  CK_CHECK(api, dev);
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* A growth the device refuses changes nothing: the page size stays, nothing
 * is outdated, and the next small request reuses the page. */
START_TEST(test_refused_growth) {
  const hippo_api *api = tu_api();
  hippo_device *dev =
      open_arena(api, HIPPO_BACKEND_HOST, 12 * MiB, 2 * MiB, 12 * MiB, 0);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_pool_report r;
  hippo_handle a, b, h;
  uint64_t allocs;

  a = tu_reserve(api, s, MiB);
  allocs = tu_counters(api, dev).calls[HIPPO_CALL_ALLOC];
  /* 2 MiB held + an 11 MiB page > 12 MiB */
  CK_STATUS(api, api->reserve(s, 10 * MiB, HIPPO_MODE_AUTO, &h),
            HIPPO_OUT_OF_MEMORY);
  CK_ERROR_HAS(api, "reserve(10485760 B)");
  CK_ERROR_HAS(api, "2097152 B reserved");
  CK_ERROR_HAS(api, "1048576 B in use");
  CK_ERROR_HAS(api, "of 12582912 B are free");
  CK_ERROR_HAS(api, "pools have 1048576 B free but no room");
  r = arena(api, s);
  ck_assert_uint_eq(r.current_page_size, 2 * MiB);
  ck_assert_uint_eq(r.outdated_pages, 0);
  ck_assert_uint_eq(r.page_sizes, 1);
  ck_assert_uint_eq(r.pages, 1);
  CK_CHECK(api, dev);
  b = tu_reserve(api, s, MiB);
  ck_assert_uint_eq(tu_addr(api, s, b), tu_addr(api, s, a) + MiB);
  /* the refused page, asked for once: nothing to give back and less free
   * than the page, so no retry (a GPU's runtime is asked twice) */
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_ALLOC],
                    allocs + (tu_backend() == HIPPO_BACKEND_HIP ? 2 : 1));
  CK_OK(api, api->release(s, a));
  CK_OK(api, api->release(s, b));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* A destination page the ARENA's own max_pool_size refuses is no room, as
 * one the device refuses: relocate_device answers HIPPO_SUCCESS, the
 * outdated page stays whole (pages_no_room) with its bytes.  It answered
 * HIPPO_POOL_CAPACITY_EXCEEDED, found by the fuzz driver (seeds 181, 216),
 * with a message counting "3 of 0 pages": an ARENA caps bytes, and a
 * reservation its cap refuses now says so. */
START_TEST(test_capped_destination_is_no_room) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  void *n;
  hippo_stream *s;
  hippo_handle a, b, c, h;
  hippo_relocation_report rep;
  uint64_t addr;
  arena_layout(&l, 2 * MiB, 16 * MiB, 0);
  l.pools[0].max_pool_size = 14 * MiB;
  dev = tu_open(api, HIPPO_BACKEND_HOST, 64 * MiB, &l.layout);
  s = tu_attach(api, dev, &n);
  a = tu_reserve(api, s, MiB);      /* the 2 MiB page */
  b = tu_reserve(api, s, 10 * MiB); /* grows: an 11 MiB page, 2 outdated */
  c = tu_reserve(api, s, MiB);      /* fills the 11 MiB page */
  ck_assert_uint_eq(arena(api, s).outdated_pages, 1);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_reserved, 13 * MiB);
  addr = tu_addr(api, s, a);
  tu_fill(api, dev, (void *)(uintptr_t)addr, MiB, 7);
  /* a must move to a new 11 MiB page: 13 + 11 MiB pass the 14 MiB cap */
  TU_SIZED(rep);
  CK_OK(api, api->relocate_with(dev, NULL, HIPPO_RELOCATE_CAPTURE, &rep));
  ck_assert_uint_eq(rep.failure_count, 0);
  ck_assert_uint_eq(rep.slices_moved, 0);
  ck_assert_uint_eq(rep.pages_no_room, 1);
  ck_assert_uint_eq(rep.pages_added, 0);
  ck_assert_uint_eq(tu_addr(api, s, a), addr);
  TU_VERIFY(api, dev, (void *)(uintptr_t)addr, MiB, 7);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_reserved, 13 * MiB);
  CK_CHECK(api, dev);
  /* a reservation the cap refuses names the ARENA and its bytes */
  CK_STATUS(api, api->reserve(s, 4 * MiB, HIPPO_MODE_AUTO, &h),
            HIPPO_POOL_CAPACITY_EXCEEDED);
  CK_ERROR_HAS(api, "ARENA pool (max_pool_size 14680064 B)");
  CK_ERROR_HAS(api, "its pages hold 13631488 B");
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, a));
  CK_OK(api, api->release(s, b));
  CK_OK(api, api->release(s, c));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* An outdated page that empties goes back at the next reservation's tick
 * (a release makes no driver call), whatever dealloc_period says; its slot
 * is free again.  Without a period (no ticks) cleanup gives it back. */
START_TEST(test_outdated_page_drains) {
  const hippo_api *api = tu_api();
  uint64_t period = _i ? 1000 : 0;
  tu_layout l;
  hippo_device *dev = tu_open(api, HIPPO_BACKEND_HOST, 64 * MiB,
                              arena_layout(&l, 2 * MiB, 16 * MiB, period));
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle a, b, c;
  uint64_t frees;

  a = tu_reserve(api, s, MiB);
  b = tu_reserve(api, s, 10 * MiB);
  frees = tu_counters(api, dev).calls[HIPPO_CALL_FREE];
  CK_OK(api, api->release(s, a));
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_FREE], frees);
  ck_assert_uint_eq(arena(api, s).pages, 2);
  ck_assert_uint_eq(arena(api, s).outdated_pages, 1);
  CK_CHECK(api, dev);
  c = tu_reserve(api, s, MiB); /* lands on the 11 MiB page */
  if (period) {
    ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_FREE],
                      frees + 1);
  } else {
    ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_FREE], frees);
    ck_assert_uint_eq(arena(api, s).pages, 2);
    CK_OK(api, api->cleanup(dev, s));
  }
  ck_assert_uint_eq(arena(api, s).pages, 1);
  ck_assert_uint_eq(arena(api, s).outdated_pages, 0);
  ck_assert_uint_eq(arena(api, s).page_sizes, 1);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_reserved, 11 * MiB);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, b));
  CK_OK(api, api->release(s, c));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* 1 MiB, then 63 growing requests (3, 5, ... 127 MiB): every page size
 * slot holds a live slice, so the need is ARENA_FULL; the next growth
 * finds no slot, relocates (ARENA_FULL: may add pages of the current
 * size), which moves the 63 outdated slices and frees their slots, and
 * then grows.  While a capture records, the growth fails instead. */
START_TEST(test_page_sizes_exhausted) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_arena(api, HIPPO_BACKEND_DRY, 64 * TU_GiB,
                                 2 * MiB, 16 * TU_GiB, 0);
  void *n, *other;
  hippo_stream *s = tu_attach(api, dev, &n), *so;
  hippo_handle h[65], x;
  hippo_relocation_report rep;
  hippo_pool_report r;
  uint64_t id;

  h[0] = tu_reserve(api, s, MiB);
  for (uint32_t k = 1; k < 64; k++)
    h[k] = tu_reserve(api, s, (2 * k + 1) * MiB);
  r = arena(api, s);
  ck_assert_uint_eq(r.page_sizes, 64);
  ck_assert_uint_eq(r.current_page_size, 128 * MiB);
  ck_assert_uint_eq(r.outdated_pages, 63);
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_ARENA_FULL);
  CK_CHECK(api, dev);

  /* while another stream captures, nothing moves: the growth fails */
  so = tu_attach(api, dev, &other);
  CK_OK(api, tu_emu(api)->capture_begin(dev, other, &id));
  CK_STATUS(api, api->reserve(s, 129 * MiB, HIPPO_MODE_AUTO, &x),
            HIPPO_PAGE_SIZES_EXHAUSTED);
  CK_ERROR_HAS(api, "all 64 page sizes");
  CK_ERROR_HAS(api, "relocate");
  ck_assert_uint_eq(arena(api, s).page_sizes, 64);
  CK_OK(api, tu_emu(api)->capture_end(dev, other));
  tu_detach(api, dev, so, other);
  CK_CHECK(api, dev);

  h[64] = tu_reserve(api, s, 129 * MiB);
  rep = last_report(api, dev, s);
  ck_assert_uint_eq(rep.reason, HIPPO_RELOCATE_ARENA_FULL);
  ck_assert_uint_eq(rep.outcome, HIPPO_RELOCATION_MOVED);
  ck_assert_uint_eq(rep.slices_moved, 63);
  ck_assert_uint_eq(rep.bytes_moved, 63 * 63 * MiB); /* 1 + 3 + ... + 125 */
  ck_assert_uint_eq(rep.pages_emptied, 63);
  ck_assert_uint_eq(rep.pages_freed, 63);
  ck_assert_uint_eq(rep.failure_count, 0);
  ck_assert_uint_gt(rep.pages_added, 0);
  r = arena(api, s);
  ck_assert_uint_eq(r.current_page_size, 130 * MiB);
  ck_assert_uint_eq(r.page_sizes, 2);
  ck_assert_uint_eq(tu_usage(api, dev, s).slices_relocated, 63);
  for (uint32_t k = 0; k < 64; k++)
    ck_assert_uint_eq(tu_addr(api, s, h[k]) != 0, 1);
  CK_CHECK(api, dev);
  for (uint32_t k = 0; k < 65; k++)
    CK_OK(api, api->release(s, h[k]));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* ---- need ----------------------------------------------------------------------- */

/* A 24 MiB device, 4 MiB pages: 10 MiB held wants nothing, 17 MiB wants a
 * relocation (17 + 4 > 24 - 4).  Held bytes are the device's, persistent
 * pages included. */
START_TEST(test_need_pressure) {
  const hippo_api *api = tu_api();
  hippo_device *dev =
      open_arena(api, HIPPO_BACKEND_HOST, 24 * MiB, 2 * MiB, 6 * MiB, 0);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle a, b, p1, p2;

  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_NOTHING);
  a = tu_reserve(api, s, MiB);     /* a 2 MiB page */
  b = tu_reserve(api, s, 3 * MiB); /* grows: a 4 MiB page */
  ck_assert_uint_eq(arena(api, s).current_page_size, 4 * MiB);
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_NOTHING); /* 6 MiB held */
  persistent(api, s, 4 * MiB, &p1);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_reserved, 10 * MiB);
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_NOTHING);
  persistent(api, s, 7 * MiB, &p2);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_reserved, 17 * MiB);
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_PRESSURE);
  /* without outdated pages, no need however full */
  CK_OK(api, api->release(s, a));
  CK_OK(api, api->cleanup(dev, s));
  ck_assert_uint_eq(arena(api, s).outdated_pages, 0);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_reserved, 15 * MiB);
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_NOTHING);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, b));
  CK_OK(api, api->release(s, p1));
  CK_OK(api, api->release(s, p2));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* 24 MiB device: 1 MiB, then 10 MiB (13 MiB held, next page 11 MiB) is
 * under pressure; relocating leaves one 11 MiB page holding both, nothing
 * outdated, no further need; the moved slice keeps its bytes and its
 * handle resolves into the 11 MiB page. */
START_TEST(test_pressure_relocation) {
  const hippo_api *api = tu_api();
  hippo_device *dev =
      open_arena(api, HIPPO_BACKEND_HOST, 24 * MiB, 2 * MiB, 11 * MiB, 0);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle a, b;
  hippo_relocation_report rep;
  hippo_usage u;
  uint64_t old, syncs, copied;

  a = tu_reserve_filled(api, dev, s, MiB, 1);
  b = tu_reserve_filled(api, dev, s, 10 * MiB, 2);
  old = tu_addr(api, s, a);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_reserved, 13 * MiB);
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_PRESSURE);
  /* wanted, but never while a stream of the device records */
  {
    void *cn;
    hippo_stream *cs = tu_attach(api, dev, &cn);
    uint64_t id;
    char before[512];
    CK_OK(api, tu_emu(api)->capture_begin(dev, cn, &id));
    /* a failure first: the skip, a success, leaves its message */
    CK_STATUS(api, api->release(s, 12345), HIPPO_INVALID_HANDLE);
    snprintf(before, sizeof before, "%s", api->last_error());
    ck_assert_uint_gt(strlen(before), 0);
    syncs = tu_counters(api, dev).calls[HIPPO_CALL_SYNC];
    CK_OK(api, api->relocate_when_wanted(s));
    ck_assert_str_eq(api->last_error(), before);
    ck_assert_uint_eq(last_report(api, dev, s).outcome,
                      HIPPO_RELOCATION_RECORDING);
    ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_SYNC], syncs);
    ck_assert_uint_eq(tu_addr(api, s, a), old);
    ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_PRESSURE); /* still */
    CK_OK(api, tu_emu(api)->capture_end(dev, cn));
    tu_detach(api, dev, cs, cn);
  }
  syncs = tu_counters(api, dev).calls[HIPPO_CALL_SYNC];
  copied = tu_counters(api, dev).bytes_copied;
  CK_OK(api, api->relocate_when_wanted(s));
  rep = last_report(api, dev, s);
  ck_assert_uint_eq(rep.reason, HIPPO_RELOCATE_PRESSURE);
  ck_assert_uint_eq(rep.need, HIPPO_NEED_PRESSURE);
  ck_assert_uint_eq(rep.outcome, HIPPO_RELOCATION_MOVED);
  ck_assert_uint_eq(rep.slices_moved, 1);
  ck_assert_uint_eq(rep.bytes_moved, MiB);
  ck_assert_uint_eq(rep.pages_emptied, 1);
  ck_assert_uint_eq(rep.pages_freed, 1);
  ck_assert_uint_eq(rep.bytes_freed, 2 * MiB);
  ck_assert_uint_eq(rep.pages_added, 0);
  /* the device's last report is the same one */
  ck_assert_uint_eq(last_report(api, dev, NULL).slices_moved, 1);
  /* one wait for the stream's work, one for the copy */
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_SYNC], syncs + 2);
  ck_assert_uint_eq(tu_counters(api, dev).bytes_copied, copied + MiB);
  ck_assert_uint_ne(tu_addr(api, s, a), old);
  ck_assert_uint_eq(tu_addr(api, s, a), tu_addr(api, s, b) + 10 * MiB);
  TU_VERIFY_HANDLE(api, dev, s, a, MiB, 1);
  TU_VERIFY_HANDLE(api, dev, s, b, 10 * MiB, 2);
  u = tu_usage(api, dev, s);
  ck_assert_uint_eq(u.bytes_reserved, 11 * MiB);
  ck_assert_uint_eq(u.pages, 1);
  ck_assert_uint_eq(u.allocations, 2);
  ck_assert_uint_eq(u.bytes_in_use, 11 * MiB);
  ck_assert_uint_eq(u.relocations, 1);
  ck_assert_uint_eq(u.slices_relocated, 1);
  ck_assert_uint_eq(u.bytes_relocated, MiB);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_relocated, MiB);
  ck_assert_uint_eq(arena(api, s).outdated_pages, 0);
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_NOTHING);
  CK_CHECK(api, dev);
  /* wanted again: nothing to do, and it says so */
  CK_OK(api, api->relocate_when_wanted(s));
  ck_assert_uint_eq(last_report(api, dev, s).outcome,
                    HIPPO_RELOCATION_NOT_WANTED);
  CK_OK(api, api->release(s, a));
  CK_OK(api, api->release(s, b));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* A relocation that moved nothing (no room) is not retried until the pools
 * change: the same shape wants nothing; one more current page wants a
 * relocation again, which then moves -- after one that failed (a backend
 * call), which does not silence the need. */
START_TEST(test_stall_memo) {
  const hippo_api *api = tu_api();
  hippo_device *dev =
      open_arena(api, HIPPO_BACKEND_HOST, 48 * MiB, 2 * MiB, 12 * MiB, 0);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle a, b, c, p;
  hippo_relocation_report rep;

  a = tu_reserve_filled(api, dev, s, 3 * MiB / 2, 7); /* a 2 MiB page */
  b = tu_reserve(api, s, 43 * MiB / 4);    /* a 12 MiB page, 1.25 MiB free */
  persistent(api, s, 11 * MiB, &p);        /* 25 MiB held: 25 + 12 > 36 */
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_PRESSURE);
  CK_OK(api, api->relocate_when_wanted(s));
  rep = last_report(api, dev, s);
  ck_assert_uint_eq(rep.outcome, HIPPO_RELOCATION_NO_ROOM);
  ck_assert_uint_eq(rep.pages_no_room, 1);
  ck_assert_uint_eq(rep.slices_moved, 0);
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_NOTHING);
  CK_OK(api, api->relocate_when_wanted(s));
  ck_assert_uint_eq(last_report(api, dev, s).outcome,
                    HIPPO_RELOCATION_NOT_WANTED);
  CK_CHECK(api, dev);
  c = tu_reserve(api, s, 2 * MiB); /* a second 12 MiB page */
  ck_assert_uint_eq(arena(api, s).pages, 3);
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_PRESSURE);
  /* a relocation that failed (a refused copy) moved nothing, but that may
   * pass: the need stays */
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_COPY, 1,
                                   HIPPO_BACKEND_ERROR));
  CK_STATUS(api, api->relocate_when_wanted(s), HIPPO_BACKEND_ERROR);
  rep = last_report(api, dev, s);
  ck_assert_uint_eq(rep.outcome, HIPPO_RELOCATION_FAILED);
  ck_assert_uint_eq(rep.slices_moved, 0);
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_PRESSURE);
  TU_VERIFY_HANDLE(api, dev, s, a, 3 * MiB / 2, 7);
  CK_OK(api, api->relocate_when_wanted(s));
  rep = last_report(api, dev, s);
  ck_assert_uint_eq(rep.outcome, HIPPO_RELOCATION_MOVED);
  ck_assert_uint_eq(rep.slices_moved, 1);
  ck_assert_uint_eq(tu_addr(api, s, a), tu_addr(api, s, c) + 2 * MiB);
  TU_VERIFY_HANDLE(api, dev, s, a, 3 * MiB / 2, 7);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, a));
  CK_OK(api, api->release(s, b));
  CK_OK(api, api->release(s, c));
  CK_OK(api, api->release(s, p));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* SPARSE: an ARENA that takes a page while its pages hold far more room
 * than its slices use asks for a relocation that empties the sparsest
 * current pages into room the others hold. */
START_TEST(test_sparse_compaction) {
  const hippo_api *api = tu_api();
  hippo_device *dev =
      open_arena(api, HIPPO_BACKEND_HOST, 64 * MiB, 2 * MiB, 16 * MiB, 0);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle first, h[16], keep[4], x;
  hippo_relocation_report rep;
  hippo_pool_report r;

  first = tu_reserve(api, s, 3 * MiB); /* grows to 4 MiB pages */
  CK_OK(api, api->release(s, first));
  CK_OK(api, api->cleanup(dev, s));
  for (int i = 0; i < 16; i++) /* four full 4 MiB pages */
    h[i] = tu_reserve(api, s, MiB);
  ck_assert_uint_eq(arena(api, s).pages, 4);
  for (int pg = 0; pg < 4; pg++) { /* keep the first MiB of each */
    keep[pg] = h[4 * pg];
    tu_fill(api, dev, (void *)(uintptr_t)tu_addr(api, s, keep[pg]), MiB,
            (uint64_t)pg);
    for (int i = 1; i < 4; i++)
      CK_OK(api, api->release(s, h[4 * pg + i]));
  }
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_NOTHING);
  /* 3.5 MiB fits no page's 3 MiB: a fifth page, while 12 MiB are free */
  x = tu_reserve(api, s, 7 * MiB / 2);
  ck_assert_uint_eq(arena(api, s).pages, 5);
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_SPARSE);
  CK_CHECK(api, dev);
  CK_OK(api, api->relocate_when_wanted(s));
  rep = last_report(api, dev, s);
  ck_assert_uint_eq(rep.reason, HIPPO_RELOCATE_SPARSE);
  ck_assert_uint_eq(rep.outcome, HIPPO_RELOCATION_MOVED);
  /* page 0's MiB goes to page 1 (lowest of the best fits), then page 2's
   * and page 3's to page 1's 2 MiB and 1 MiB holes */
  ck_assert_uint_eq(rep.slices_moved, 3);
  ck_assert_uint_eq(rep.pages_emptied, 3);
  ck_assert_uint_eq(rep.pages_freed, 3);
  r = arena(api, s);
  ck_assert_uint_eq(r.pages, 2);
  ck_assert_uint_eq(r.bytes_reserved, 8 * MiB);
  for (int pg = 0; pg < 4; pg++)
    TU_VERIFY_HANDLE(api, dev, s, keep[pg], MiB, (uint64_t)pg);
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_NOTHING);
  CK_CHECK(api, dev);
  for (int pg = 0; pg < 4; pg++)
    CK_OK(api, api->release(s, keep[pg]));
  CK_OK(api, api->release(s, x));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* Outdated pages are emptied cheapest first, each all or nothing, so when
 * room runs out the most pages were emptied: pages holding [3, 2], [1]
 * and [4] MiB, with 5 MiB of room, give up [1] and [4] and keep [3, 2]
 * whole. */
START_TEST(test_cheapest_first) {
  const hippo_api *api = tu_api();
  hippo_device *dev =
      open_arena(api, HIPPO_BACKEND_HOST, 128 * MiB, 6 * MiB, 32 * MiB, 0);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle a3, a2, b1, c4, x[2], pad, big;
  hippo_relocation_report rep;
  uint64_t before[4];
  /* three 6 MiB pages: [3, 2], [1], [4] (filled, then the rest released) */
  a3 = tu_reserve_filled(api, dev, s, 3 * MiB, 1);
  a2 = tu_reserve_filled(api, dev, s, 2 * MiB, 2);
  pad = tu_reserve(api, s, MiB);
  b1 = tu_reserve_filled(api, dev, s, MiB, 3);
  x[0] = tu_reserve(api, s, 5 * MiB);
  c4 = tu_reserve_filled(api, dev, s, 4 * MiB, 4);
  x[1] = tu_reserve(api, s, 2 * MiB);
  ck_assert_uint_eq(arena(api, s).pages, 3);
  CK_OK(api, api->release(s, pad));
  CK_OK(api, api->release(s, x[0]));
  CK_OK(api, api->release(s, x[1]));
  /* grow: a 16 MiB page, then 11 MiB at its start: 5 MiB of room in one
   * piece (so [3, 2] would fit too, if it were planned first) */
  big = tu_reserve(api, s, 15 * MiB);
  ck_assert_uint_eq(arena(api, s).current_page_size, 16 * MiB);
  CK_OK(api, api->release(s, big));
  big = tu_reserve(api, s, 11 * MiB);
  ck_assert_uint_eq(arena(api, s).outdated_pages, 3);
  ck_assert_uint_eq(arena(api, s).pages, 4);
  ck_assert_uint_eq(arena(api, s).largest_free, 5 * MiB);
  before[0] = tu_addr(api, s, a3);
  before[1] = tu_addr(api, s, a2);
  CK_OK(api, api->relocate(s));
  rep = last_report(api, dev, s);
  ck_assert_uint_eq(rep.outcome, HIPPO_RELOCATION_MOVED);
  ck_assert_uint_eq(rep.slices_moved, 2); /* [1] and [4] */
  ck_assert_uint_eq(rep.bytes_moved, 5 * MiB);
  ck_assert_uint_eq(rep.pages_emptied, 2);
  ck_assert_uint_eq(rep.pages_no_room, 1); /* [3, 2] */
  ck_assert_uint_eq(tu_addr(api, s, a3), before[0]);
  ck_assert_uint_eq(tu_addr(api, s, a2), before[1]);
  ck_assert_uint_eq(arena(api, s).outdated_pages, 1);
  TU_VERIFY_HANDLE(api, dev, s, a3, 3 * MiB, 1);
  TU_VERIFY_HANDLE(api, dev, s, a2, 2 * MiB, 2);
  TU_VERIFY_HANDLE(api, dev, s, b1, MiB, 3);
  TU_VERIFY_HANDLE(api, dev, s, c4, 4 * MiB, 4);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, a3));
  CK_OK(api, api->release(s, a2));
  CK_OK(api, api->release(s, b1));
  CK_OK(api, api->release(s, c4));
  CK_OK(api, api->release(s, big));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* ---- relocation across streams ------------------------------------------------ */

#define STREAMS 3
#define SLICES 6 /* per stream, on the outdated pages (and the staging) */
#define MOVED (SLICES + 1) /* slices per stream on its outdated page */

/* Three streams, each with SLICES patterned slices on 2 MiB pages that a
 * growth then outdates, a staging slice, and a new pattern queued (not yet
 * run) from the staging slice onto its first slice: the host runtime's
 * work in flight. */
typedef struct world {
  hippo_device *dev;
  hippo_stream *s[STREAMS];
  void *n[STREAMS];
  hippo_handle h[STREAMS][SLICES], big[STREAMS], staging[STREAMS];
  uint64_t size[SLICES];
} world;

static uint64_t seed_of(int st, int k) { return (uint64_t)(st * 100 + k); }

static void world_open(const hippo_api *api, world *w, bool queue_work) {
  w->dev = open_arena(api, HIPPO_BACKEND_HOST, 256 * MiB, 2 * MiB,
                      64 * MiB, 0);
  for (int k = 0; k < SLICES; k++)
    w->size[k] = 64 * KiB * (uint64_t)(k + 1) + 256 * (uint64_t)k;
  for (int st = 0; st < STREAMS; st++) {
    w->s[st] = tu_attach(api, w->dev, &w->n[st]);
    for (int k = 0; k < SLICES; k++)
      w->h[st][k] =
          tu_reserve_filled(api, w->dev, w->s[st], w->size[k], seed_of(st, k));
    w->staging[st] =
        tu_reserve_filled(api, w->dev, w->s[st], w->size[0], seed_of(st, 50));
    w->big[st] =
        tu_reserve_filled(api, w->dev, w->s[st], 8 * MiB, seed_of(st, 99));
    ck_assert_uint_eq(arena(api, w->s[st]).outdated_pages, 1);
    if (queue_work)
      CK_OK(api, tu_emu(api)->copy(
                     w->dev, w->n[st],
                     (void *)(uintptr_t)tu_addr(api, w->s[st], w->h[st][0]),
                     (const void *)(uintptr_t)tu_addr(api, w->s[st],
                                                      w->staging[st]),
                     w->size[0]));
  }
  CK_CHECK(api, w->dev);
}

/* Every slice holds its pattern (the first its queued one when `queued`;
 * skip_first: the queued copy may still be waiting). */
static void world_verify_some(const hippo_api *api, world *w, bool queued,
                              bool skip_first) {
  for (int st = 0; st < STREAMS; st++) {
    for (int k = skip_first ? 1 : 0; k < SLICES; k++)
      TU_VERIFY_HANDLE(api, w->dev, w->s[st], w->h[st][k], w->size[k],
                       queued && k == 0 ? seed_of(st, 50) : seed_of(st, k));
    TU_VERIFY_HANDLE(api, w->dev, w->s[st], w->staging[st], w->size[0],
                     seed_of(st, 50));
    TU_VERIFY_HANDLE(api, w->dev, w->s[st], w->big[st], 8 * MiB,
                     seed_of(st, 99));
  }
}

static void world_verify(const hippo_api *api, world *w, bool queued) {
  world_verify_some(api, w, queued, false);
}

static void world_close(const hippo_api *api, world *w) {
  hippo_emu_counters c;
  for (int st = 0; st < STREAMS; st++) {
    for (int k = 0; k < SLICES; k++)
      CK_OK(api, api->release(w->s[st], w->h[st][k]));
    CK_OK(api, api->release(w->s[st], w->big[st]));
    CK_OK(api, api->release(w->s[st], w->staging[st]));
    tu_detach(api, w->dev, w->s[st], w->n[st]);
  }
  c = tu_counters(api, w->dev);
  ck_assert_uint_eq(c.pages_held, 0); /* nothing leaked */
  ck_assert_uint_eq(c.bytes_held, 0);
  CK_OK(api, api->device_close(w->dev));
}

/* relocate_device: every stream's queued work lands before the first
 * copy (else a slice would move with its old bytes), every handle
 * resolves to its new address with its exact bytes, and the emptied pages
 * went back. */
START_TEST(test_relocate_device_data) {
  const hippo_api *api = tu_api();
  world w;
  hippo_emu_counters before, after;
  hippo_relocation_report rep;
  uint64_t old[STREAMS][SLICES], moved = 0;

  world_open(api, &w, true);
  for (int st = 0; st < STREAMS; st++) {
    for (int k = 0; k < SLICES; k++) {
      old[st][k] = tu_addr(api, w.s[st], w.h[st][k]);
      moved += w.size[k];
    }
    moved += w.size[0]; /* the staging slice */
  }
  before = tu_counters(api, w.dev);
  if (tu_backend() == HIPPO_BACKEND_HOST) /* HOST counts a copy once it ran */
    ck_assert_uint_eq(before.bytes_copied, 0); /* the queued work waits */
  CK_OK(api, api->relocate_device(w.dev));
  after = tu_counters(api, w.dev);
  rep = last_report(api, w.dev, NULL);
  ck_assert_uint_eq(rep.reason, HIPPO_RELOCATE_CAPTURE);
  ck_assert_uint_eq(rep.outcome, HIPPO_RELOCATION_MOVED);
  ck_assert_uint_eq(rep.streams, STREAMS);
  ck_assert_uint_eq(rep.slices_moved, STREAMS * MOVED);
  ck_assert_uint_eq(rep.bytes_moved, moved);
  ck_assert_uint_eq(rep.pages_emptied, STREAMS);
  ck_assert_uint_eq(rep.pages_freed, STREAMS);
  ck_assert_uint_eq(rep.bytes_freed, STREAMS * 2 * MiB);
  ck_assert_uint_eq(rep.failure_count, 0);
  /* a wait for each stream's work, then one for each stream's copies */
  ck_assert_uint_eq(after.calls[HIPPO_CALL_SYNC],
                    before.calls[HIPPO_CALL_SYNC] + 2 * STREAMS);
  ck_assert_uint_eq(after.calls[HIPPO_CALL_COPY],
                    before.calls[HIPPO_CALL_COPY] + STREAMS * MOVED);
  ck_assert_uint_eq(after.calls[HIPPO_CALL_FREE],
                    before.calls[HIPPO_CALL_FREE] + STREAMS);
  /* the runtime's queued copies, then hippo's */
  ck_assert_uint_eq(after.bytes_copied, STREAMS * w.size[0] + moved);
  for (int st = 0; st < STREAMS; st++) {
    ck_assert_uint_eq(arena(api, w.s[st]).outdated_pages, 0);
    ck_assert_uint_eq(last_report(api, w.dev, w.s[st]).slices_moved, MOVED);
    for (int k = 0; k < SLICES; k++)
      ck_assert_uint_ne(tu_addr(api, w.s[st], w.h[st][k]), old[st][k]);
  }
  world_verify(api, &w, true);
  ck_assert_uint_eq(tu_usage(api, w.dev, NULL).bytes_relocated, moved);
  ck_assert_uint_eq(tu_usage(api, w.dev, NULL).slices_relocated,
                    STREAMS * MOVED);
  CK_CHECK(api, w.dev);
  /* nothing outdated: a second relocation waits on nothing */
  before = tu_counters(api, w.dev);
  CK_OK(api, api->relocate_device(w.dev));
  ck_assert_uint_eq(tu_counters(api, w.dev).calls[HIPPO_CALL_SYNC],
                    before.calls[HIPPO_CALL_SYNC]);
  ck_assert_uint_eq(last_report(api, w.dev, NULL).outcome,
                    HIPPO_RELOCATION_NOTHING_TO_MOVE);
  world_close(api, &w);
}
END_TEST

/* reclaim(dev, NULL): relocate (EXPLICIT: into room held) then clean up.
 * The 8 MiB reservation left 1 MiB of each 9 MiB page, less than the
 * 1.4 MiB the outdated page holds, so it stays, whole. */
START_TEST(test_reclaim_explicit) {
  const hippo_api *api = tu_api();
  world w;
  hippo_relocation_report rep;
  world_open(api, &w, false);
  CK_OK(api, api->reclaim(w.dev, NULL));
  rep = last_report(api, w.dev, NULL);
  ck_assert_uint_eq(rep.reason, HIPPO_RELOCATE_EXPLICIT);
  ck_assert_uint_eq(rep.outcome, HIPPO_RELOCATION_NO_ROOM);
  ck_assert_uint_eq(rep.pages_no_room, STREAMS);
  ck_assert_uint_eq(rep.slices_moved, 0);
  world_verify(api, &w, false);
  CK_CHECK(api, w.dev);
  /* with the big ones gone, there is room */
  for (int st = 0; st < STREAMS; st++) {
    CK_OK(api, api->release(w.s[st], w.big[st]));
    w.big[st] =
        tu_reserve_filled(api, w.dev, w.s[st], 4 * MiB, seed_of(st, 99));
  }
  CK_OK(api, api->reclaim(w.dev, w.s[1])); /* one stream */
  rep = last_report(api, w.dev, w.s[1]);
  ck_assert_uint_eq(rep.outcome, HIPPO_RELOCATION_MOVED);
  ck_assert_uint_eq(rep.slices_moved, MOVED);
  ck_assert_uint_eq(arena(api, w.s[1]).outdated_pages, 0);
  ck_assert_uint_eq(arena(api, w.s[0]).outdated_pages, 1);
  for (int st = 0; st < STREAMS; st++)
    for (int k = 0; k < SLICES; k++)
      TU_VERIFY_HANDLE(api, w.dev, w.s[st], w.h[st][k], w.size[k],
                       seed_of(st, k));
  CK_CHECK(api, w.dev);
  for (int st = 0; st < STREAMS; st++) {
    CK_OK(api, api->release(w.s[st], w.big[st]));
    w.big[st] =
        tu_reserve_filled(api, w.dev, w.s[st], 8 * MiB, seed_of(st, 99));
  }
  world_close(api, &w);
}
END_TEST

/* A fault at every position of a relocation, for every backend call kind
 * it makes (copy, the waits, a destination page, giving a page back, the
 * capture question): afterwards every slice reads back its pattern, every
 * handle is valid, the report names the failure, the check passes, and a
 * relocation without a fault then moves everything; nothing leaks. */
START_TEST(test_relocation_faults) {
  static const hippo_call_kind kinds[] = {HIPPO_CALL_COPY, HIPPO_CALL_SYNC,
                                          HIPPO_CALL_ALLOC, HIPPO_CALL_FREE,
                                          HIPPO_CALL_CAPTURE_QUERY};
  static const uint32_t steps[] = {HIPPO_RELOCATION_STEP_COPY, 0,
                                   HIPPO_RELOCATION_STEP_PAGE,
                                   HIPPO_RELOCATION_STEP_FREE, 0};
  const hippo_api *api = tu_api();
  hippo_call_kind kind = kinds[_i];
  uint64_t injected = 0;
  for (uint64_t nth = 1;; nth++) {
    world w;
    hippo_emu_counters before, after;
    hippo_relocation_report rep;
    hippo_status st;
    bool fired;
    world_open(api, &w, true); /* 1 MiB free per current page: reason
                                  CAPTURE adds destination pages */
    if (kind == HIPPO_CALL_CAPTURE_QUERY) /* ask as on HIP */
      for (int s = 0; s < STREAMS; s++)
        CK_OK(api, api->capture_announce(w.s[s], HIPPO_CAPTURE_QUERY));
    before = tu_counters(api, w.dev);
    CK_OK(api, tu_emu(api)->inject_fault(w.dev, kind, nth, HIPPO_BACKEND_ERROR));
    st = api->relocate_with(w.dev, NULL, HIPPO_RELOCATE_CAPTURE, NULL);
    after = tu_counters(api, w.dev);
    CK_OK(api, tu_emu(api)->inject_fault(w.dev, kind, 0, HIPPO_SUCCESS));
    fired = after.calls[kind] - before.calls[kind] >= nth;
    rep = last_report(api, w.dev, NULL);
    if (fired) {
      injected++;
      ck_assert_msg(st == HIPPO_BACKEND_ERROR,
                    "kind %u call %llu: relocate returned %s: %s", kind,
                    (unsigned long long)nth, api->status_name(st),
                    api->last_error());
      CK_ERROR_HAS(api, "injected fault");
      if (kind == HIPPO_CALL_CAPTURE_QUERY) /* the call named is the one made */
        ck_assert_msg(strncmp(api->last_error(), "relocate_with: ", 15) == 0,
                      "%s", api->last_error());
      if (kind != HIPPO_CALL_CAPTURE_QUERY) {
        hippo_relocation_failure f0;
        ck_assert_uint_ge(rep.failure_count, 1);
        f0 = tu_failure(api, w.dev, NULL, 0);
        ck_assert_int_eq(f0.status, HIPPO_BACKEND_ERROR);
        ck_assert_ptr_nonnull(f0.stream);
        if (steps[_i])
          ck_assert_uint_eq(f0.step, steps[_i]);
        else
          ck_assert(f0.step == HIPPO_RELOCATION_STEP_FINISH ||
                    f0.step == HIPPO_RELOCATION_STEP_WAIT);
        if (f0.step == HIPPO_RELOCATION_STEP_WAIT)
          ck_assert_uint_gt(tu_usage(api, w.dev, NULL).bytes_stranded, 0);
      }
    } else {
      CK_OK(api, st);
    }
    /* the data is intact wherever it now lives, every handle valid (the
     * runtime's queued copy waits while the streams' work was not done) */
    world_verify_some(api, &w, true, true);
    CK_CHECK(api, w.dev);
    /* and a relocation without faults finishes the job */
    CK_OK(api, api->relocate_with(w.dev, NULL, HIPPO_RELOCATE_CAPTURE, NULL));
    for (int s = 0; s < STREAMS; s++)
      ck_assert_uint_eq(arena(api, w.s[s]).outdated_pages, 0);
    ck_assert_uint_eq(tu_usage(api, w.dev, NULL).bytes_stranded, 0);
    world_verify(api, &w, true);
    CK_CHECK(api, w.dev);
    world_close(api, &w);
    if (!fired)
      break;
  }
  ck_assert_uint_gt(injected, 0);
}
END_TEST

/* While a stream captures, nothing moves and nothing is freed: a wanted
 * relocation skips itself, relocate and relocate_device too, reclaim is
 * refused naming the stream; no backend free or wait happens. */
START_TEST(test_capture_no_relocation) {
  const hippo_api *api = tu_api();
  world w;
  hippo_emu_counters before, after;
  uint64_t id;
  char name[64];
  world_open(api, &w, false);
  CK_OK(api, tu_emu(api)->capture_begin(w.dev, w.n[2], &id));
  before = tu_counters(api, w.dev);
  CK_OK(api, api->relocate_device(w.dev));
  ck_assert_uint_eq(last_report(api, w.dev, NULL).outcome,
                    HIPPO_RELOCATION_RECORDING);
  CK_OK(api, api->relocate(w.s[0]));
  ck_assert_uint_eq(last_report(api, w.dev, w.s[0]).outcome,
                    HIPPO_RELOCATION_RECORDING);
  CK_OK(api, api->relocate_with(w.dev, w.s[0], HIPPO_RELOCATE_EXPLICIT,
                                NULL));
  CK_STATUS(api, api->reclaim(w.dev, NULL), HIPPO_GRAPH_RECORDING);
  snprintf(name, sizeof name, "%p", w.n[2]);
  CK_ERROR_HAS(api, name);
  CK_ERROR_HAS(api, "reclaim");
  CK_STATUS(api, api->reclaim(w.dev, w.s[0]), HIPPO_GRAPH_RECORDING);
  after = tu_counters(api, w.dev);
  ck_assert_uint_eq(after.calls[HIPPO_CALL_FREE],
                    before.calls[HIPPO_CALL_FREE]);
  ck_assert_uint_eq(after.calls[HIPPO_CALL_SYNC],
                    before.calls[HIPPO_CALL_SYNC]);
  ck_assert_uint_eq(after.calls[HIPPO_CALL_COPY],
                    before.calls[HIPPO_CALL_COPY]);
  for (int st = 0; st < STREAMS; st++)
    ck_assert_uint_eq(arena(api, w.s[st]).outdated_pages, 1);
  CK_OK(api, tu_emu(api)->capture_end(w.dev, w.n[2]));
  CK_OK(api, api->relocate_device(w.dev));
  ck_assert_uint_eq(last_report(api, w.dev, NULL).slices_moved,
                    STREAMS * MOVED);
  world_verify(api, &w, false);
  CK_CHECK(api, w.dev);
  world_close(api, &w);
}
END_TEST

/* HIPPO_DEVICE_AUTO_RELOCATE: reserve relocates by itself when the memory
 * wants it (CubeCL's rule). */
START_TEST(test_auto_relocate) {
  const hippo_api *api = tu_api();
  hippo_device *dev =
      open_arena(api, HIPPO_BACKEND_HOST, 24 * MiB, 2 * MiB, 11 * MiB,
                 HIPPO_DEVICE_AUTO_RELOCATE);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle a, b, c;
  a = tu_reserve_filled(api, dev, s, MiB, 3);
  b = tu_reserve(api, s, 10 * MiB);
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_PRESSURE);
  c = tu_reserve(api, s, 256); /* relocates first, then lands */
  ck_assert_uint_eq(tu_usage(api, dev, s).relocations, 1);
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_NOTHING);
  TU_VERIFY_HANDLE(api, dev, s, a, MiB, 3);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, a));
  CK_OK(api, api->release(s, b));
  CK_OK(api, api->release(s, c));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
  /* without the flag, nothing moves by itself */
  dev = open_arena(api, HIPPO_BACKEND_HOST, 24 * MiB, 2 * MiB, 11 * MiB, 0);
  s = tu_attach(api, dev, &n);
  a = tu_reserve(api, s, MiB);
  b = tu_reserve(api, s, 10 * MiB);
  c = tu_reserve(api, s, 256);
  ck_assert_uint_eq(tu_usage(api, dev, s).relocations, 0);
  CK_OK(api, api->release(s, a));
  CK_OK(api, api->release(s, b));
  CK_OK(api, api->release(s, c));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* Out of memory: the manager relocates what outdated pages hold into room
 * held and gives empty pages back before it gives up; when that is not
 * enough, the message says what the device holds. */
START_TEST(test_oom_recovers_by_relocation) {
  const hippo_api *api = tu_api();
  hippo_device *dev =
      open_arena(api, HIPPO_BACKEND_HOST, 16 * MiB, 2 * MiB, 4 * MiB, 0);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle a, b[4], c;
  a = tu_reserve_filled(api, dev, s, MiB, 5); /* 2 MiB page */
  b[0] = tu_reserve(api, s, 3 * MiB);    /* 4 MiB pages from here */
  b[1] = tu_reserve(api, s, 3 * MiB);
  b[2] = tu_reserve(api, s, 3 * MiB);    /* 14 MiB held */
  /* a fourth 4 MiB page does not fit; moving `a` into a 1 MiB hole frees
   * the 2 MiB page, and then it does */
  b[3] = tu_reserve(api, s, 3 * MiB);
  ck_assert_uint_eq(tu_usage(api, dev, s).relocations, 1);
  ck_assert_uint_eq(last_report(api, dev, s).reason,
                    HIPPO_RELOCATE_EXPLICIT);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_reserved, 16 * MiB);
  TU_VERIFY_HANDLE(api, dev, s, a, MiB, 5);
  CK_CHECK(api, dev);
  /* nothing left to move: out of memory, and what the device holds */
  CK_STATUS(api, api->reserve(s, 2 * MiB, HIPPO_MODE_AUTO, &c),
            HIPPO_OUT_OF_MEMORY);
  CK_ERROR_HAS(api, "reserve(2097152 B): out of memory");
  CK_ERROR_HAS(api, "16777216 B reserved and 13631488 B in use (0 "
                    "streams busy");
  CK_ERROR_HAS(api, "0 B of 16777216 B are free");
  CK_ERROR_HAS(api, "3145728 B free but no room for it");
  ck_assert_uint_eq(tu_usage(api, dev, s).relocations, 1);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, a));
  for (int i = 0; i < 4; i++)
    CK_OK(api, api->release(s, b[i]));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* HIPPO_DEVICE_NO_MOVE: the same out-of-memory as above fails instead of
 * moving `a`; relocate_device and reclaim move nothing either; `a` keeps
 * its address and bytes; once it is released its outdated page goes. */
START_TEST(test_no_move) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_arena(api, HIPPO_BACKEND_HOST, 16 * MiB, 2 * MiB,
                                 4 * MiB, HIPPO_DEVICE_NO_MOVE);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle a, b[3], c;
  uint64_t addr;
  a = tu_reserve_filled(api, dev, s, MiB, 5); /* 2 MiB page */
  addr = tu_addr(api, s, a);
  for (int i = 0; i < 3; i++)
    b[i] = tu_reserve(api, s, 3 * MiB); /* 4 MiB pages: 14 MiB held */
  CK_STATUS(api, api->reserve(s, 3 * MiB, HIPPO_MODE_AUTO, &c),
            HIPPO_OUT_OF_MEMORY);
  CK_OK(api, api->relocate_device(dev));
  CK_OK(api, api->reclaim(dev, NULL));
  ck_assert_uint_eq(tu_usage(api, dev, s).relocations, 0);
  ck_assert_uint_eq(tu_usage(api, dev, s).slices_relocated, 0);
  ck_assert_uint_eq(tu_addr(api, s, a), addr);
  TU_VERIFY_HANDLE(api, dev, s, a, MiB, 5);
  ck_assert_uint_eq(arena(api, s).outdated_pages, 1);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, a));
  CK_OK(api, api->cleanup(dev, NULL)); /* the outdated page, empty, goes */
  ck_assert_uint_eq(arena(api, s).outdated_pages, 0);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_reserved, 12 * MiB);
  c = tu_reserve(api, s, 3 * MiB);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, c));
  for (int i = 0; i < 3; i++)
    CK_OK(api, api->release(s, b[i]));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* Bad arguments of the new slots, each with its exact status. */
START_TEST(test_relocation_arguments) {
  const hippo_api *api = tu_api();
  hippo_device *dev =
      open_arena(api, HIPPO_BACKEND_HOST, 24 * MiB, 2 * MiB, 6 * MiB, 0);
  hippo_device *other = tu_open(api, HIPPO_BACKEND_DRY, 0, NULL);
  void *n, *no;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_stream *so = tu_attach(api, other, &no);
  hippo_relocation_report rep;
  hippo_relocation_need need;

  ck_assert(HIPPO_API_HAS(api, relocation_failure));
  CK_STATUS(api, api->relocate_with(dev, s, 7, NULL), HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "reason 7");
  CK_STATUS(api, api->relocate_with(dev, so, HIPPO_RELOCATE_EXPLICIT, NULL),
            HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "another device");
  CK_STATUS(api, api->relocate_with(NULL, s, HIPPO_RELOCATE_EXPLICIT, NULL),
            HIPPO_INVALID_ARGUMENT);
  TU_SIZED(rep);
  rep.struct_size = 12; /* not a multiple of 8 */
  CK_STATUS(api,
            api->relocate_with(dev, s, HIPPO_RELOCATE_EXPLICIT, &rep),
            HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->relocation_report(dev, s, &rep),
            HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->relocation_report(dev, s, NULL),
            HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->relocation_report(dev, so, NULL),
            HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->relocation_need(s, NULL), HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->relocation_need(NULL, &need), HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->relocate(NULL), HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->relocate_when_wanted(NULL), HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->relocate_device(NULL), HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->reclaim(NULL, NULL), HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->reclaim(dev, so), HIPPO_INVALID_ARGUMENT);
  /* an older caller's report (the first 8 bytes) is filled that far */
  memset(&rep, 0xab, sizeof rep);
  rep.struct_size = 8;
  CK_OK(api, api->relocation_report(dev, s, &rep));
  ck_assert_uint_eq(rep.struct_size, 8);
  ck_assert_uint_eq(rep.reason, HIPPO_RELOCATE_WANTED);
  ck_assert_uint_eq(rep.need, 0xabababab); /* untouched beyond its size */
  /* nothing was run yet */
  ck_assert_uint_eq(last_report(api, dev, s).outcome, HIPPO_RELOCATION_NONE);
  /* emu_copy checks the ranges like a copy does */
  CK_STATUS(api, tu_emu(api)->copy(dev, n, (void *)(uintptr_t)16,
                               (const void *)(uintptr_t)32, 8),
            HIPPO_INVALID_ARGUMENT);
  tu_detach(api, dev, s, n);
  tu_detach(api, other, so, no);
  CK_OK(api, api->device_close(dev));
  CK_OK(api, api->device_close(other));
}
END_TEST

/* Failures past the fourth: six streams each hold a slice on an outdated
 * page; the wait for every stream's work fails once (an injected fault),
 * so each stream's moves fail at step FINISH: six failures, each read back
 * by relocation_failure, the device's in stream order and each stream's
 * its own; an index past them is refused, and so is a bad struct. */
START_TEST(test_failures_past_four) {
  enum { NSTREAMS = 6 };
  const hippo_api *api = tu_api();
  hippo_device *dev =
      open_arena(api, HIPPO_BACKEND_DRY, 256 * MiB, 2 * MiB, 16 * MiB, 0);
  hippo_stream *s[NSTREAMS];
  void *n[NSTREAMS];
  hippo_handle old[NSTREAMS], big[NSTREAMS];
  hippo_relocation_report rep;
  hippo_relocation_failure f;
  for (int i = 0; i < NSTREAMS; i++) {
    s[i] = tu_attach(api, dev, &n[i]);
    old[i] = tu_reserve(api, s[i], MiB);     /* on a 2 MiB page */
    big[i] = tu_reserve(api, s[i], 3 * MiB); /* grows: a 4 MiB page with
                                                room for the old slice */
    ck_assert_uint_eq(arena(api, s[i]).outdated_pages, 1);
  }
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_SYNC, 1,
                                       HIPPO_BACKEND_ERROR));
  TU_SIZED(rep);
  CK_STATUS(api, api->relocate_with(dev, NULL, HIPPO_RELOCATE_EXPLICIT, &rep),
            HIPPO_BACKEND_ERROR);
  CK_ERROR_HAS(api, "6 relocation failures");
  ck_assert_uint_eq(rep.failure_count, NSTREAMS);
  ck_assert_uint_eq(rep.outcome, HIPPO_RELOCATION_FAILED);
  ck_assert_uint_eq(rep.slices_moved, 0);
  ck_assert_uint_eq(last_report(api, dev, NULL).failure_count, NSTREAMS);
  for (uint32_t i = 0; i < NSTREAMS; i++) {
    f = tu_failure(api, dev, NULL, i);
    ck_assert_uint_eq(f.struct_size, sizeof f);
    ck_assert_int_eq(f.status, HIPPO_BACKEND_ERROR);
    ck_assert_uint_eq(f.step, HIPPO_RELOCATION_STEP_FINISH);
    ck_assert_ptr_eq(f.stream, s[i]);
    ck_assert_uint_eq(f.slices, 1);
    ck_assert_uint_eq(f.bytes, MiB);
    /* the stream's own report holds its one failure */
    ck_assert_uint_eq(last_report(api, dev, s[i]).failure_count, 1);
    f = tu_failure(api, dev, s[i], 0);
    ck_assert_ptr_eq(f.stream, s[i]);
    TU_SIZED(f);
    CK_STATUS(api, api->relocation_failure(dev, s[i], 1, &f),
              HIPPO_INVALID_ARGUMENT);
    CK_ERROR_HAS(api, "index 1, but the last relocation of the stream had "
                      "1 failures");
  }
  TU_SIZED(f);
  CK_STATUS(api, api->relocation_failure(dev, NULL, NSTREAMS, &f),
            HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "index 6, but the last relocation of the device had 6 "
                    "failures");
  CK_STATUS(api, api->relocation_failure(dev, NULL, 0, NULL),
            HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->relocation_failure(NULL, NULL, 0, &f),
            HIPPO_INVALID_ARGUMENT);
  f.struct_size = 12;
  CK_STATUS(api, api->relocation_failure(dev, NULL, 0, &f),
            HIPPO_INVALID_ARGUMENT);
  /* an older caller's smaller struct gets what fits */
  memset(&f, 0xab, sizeof f);
  f.struct_size = 16;
  CK_OK(api, api->relocation_failure(dev, NULL, 0, &f));
  ck_assert_uint_eq(f.step, HIPPO_RELOCATION_STEP_FINISH);
  ck_assert_ptr_eq(f.stream, (hippo_stream *)(uintptr_t)0xababababababababull);
  CK_CHECK(api, dev);
  /* the slices stayed; a relocation without the fault moves them */
  CK_OK(api, api->relocate_with(dev, NULL, HIPPO_RELOCATE_EXPLICIT, &rep));
  ck_assert_uint_eq(rep.failure_count, 0);
  ck_assert_uint_eq(rep.slices_moved, NSTREAMS);
  TU_SIZED(f);
  CK_STATUS(api, api->relocation_failure(dev, NULL, 0, &f),
            HIPPO_INVALID_ARGUMENT);
  for (int i = 0; i < NSTREAMS; i++) {
    CK_OK(api, api->release(s[i], old[i]));
    CK_OK(api, api->release(s[i], big[i]));
    tu_detach(api, dev, s[i], n[i]);
  }
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* Randomized: reservations of growing and shrinking sizes on two streams,
 * patterns written at reservation, relocations of every reason now and
 * then; every live slice reads back its pattern after each relocation and
 * at the end, and the check passes throughout. */
START_TEST(test_relocation_random) {
  const hippo_api *api = tu_api();
  enum { LIVE = 48, STEPS = 1500 };
  hippo_device *dev =
      open_arena(api, HIPPO_BACKEND_HOST, TU_GiB, 2 * MiB, 64 * MiB, 0);
  void *n[2];
  hippo_stream *s[2];
  hippo_handle h[2][LIVE] = {{0}};
  uint64_t size[2][LIVE] = {{0}}, seed[2][LIVE] = {{0}};
  uint64_t x = 0x5eed + (uint64_t)_i;
  for (int k = 0; k < 2; k++)
    s[k] = tu_attach(api, dev, &n[k]);
  for (int step = 0; step < STEPS; step++) {
    int k, i;
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    k = (int)(x >> 62) & 1;
    i = (int)((x >> 40) % LIVE);
    if (h[k][i]) {
      TU_VERIFY_HANDLE(api, dev, s[k], h[k][i], size[k][i], seed[k][i]);
      CK_OK(api, api->release(s[k], h[k][i]));
      h[k][i] = 0;
    } else {
      /* sizes grow over the run, so the arena keeps growing */
      uint64_t cap = 64 * KiB + (uint64_t)step * 4 * KiB;
      size[k][i] = 1 + (x >> 20) % cap;
      seed[k][i] = (uint64_t)step;
      h[k][i] = tu_reserve_filled(api, dev, s[k], size[k][i], seed[k][i]);
    }
    if (step % 97 == 0) {
      hippo_relocate_reason r = (hippo_relocate_reason)((x >> 8) % 6);
      CK_OK(api, api->relocate_with(dev, (x >> 12) & 1 ? NULL : s[k], r,
                                    NULL));
      for (int kk = 0; kk < 2; kk++)
        for (int j = 0; j < LIVE; j++)
          if (h[kk][j])
            TU_VERIFY_HANDLE(api, dev, s[kk], h[kk][j], size[kk][j],
                             seed[kk][j]);
    }
    if (step % 50 == 0)
      CK_CHECK(api, dev);
  }
  ck_assert_uint_gt(tu_usage(api, dev, NULL).slices_relocated, 0);
  for (int k = 0; k < 2; k++) {
    for (int j = 0; j < LIVE; j++)
      if (h[k][j]) {
        TU_VERIFY_HANDLE(api, dev, s[k], h[k][j], size[k][j], seed[k][j]);
        CK_OK(api, api->release(s[k], h[k][j]));
      }
    tu_detach(api, dev, s[k], n[k]);
  }
  CK_OK(api, api->device_close(dev));
}
END_TEST

static Suite *relocation_suite(void) {
  Suite *s = suite_create("relocation");
  TCase *tc = tcase_create("arena");
  tcase_add_test(tc, test_page_size_grows);
  tcase_add_test(tc, test_refused_growth);
  tcase_add_test(tc, test_capped_destination_is_no_room);
  tcase_add_loop_test(tc, test_outdated_page_drains, 0, 2);
  tcase_add_test(tc, test_page_sizes_exhausted);
  suite_add_tcase(s, tc);
  tc = tcase_create("need");
  tcase_add_test(tc, test_need_pressure);
  tcase_add_test(tc, test_pressure_relocation);
  tcase_add_test(tc, test_stall_memo);
  tcase_add_test(tc, test_sparse_compaction);
  tcase_add_test(tc, test_cheapest_first);
  suite_add_tcase(s, tc);
  tc = tcase_create("streams");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_relocate_device_data);
  tcase_add_test(tc, test_reclaim_explicit);
  tcase_add_loop_test(tc, test_relocation_faults, 0, 5);
  tcase_add_test(tc, test_capture_no_relocation);
  tcase_add_test(tc, test_auto_relocate);
  tcase_add_test(tc, test_oom_recovers_by_relocation);
  tcase_add_test(tc, test_no_move);
  tcase_add_test(tc, test_relocation_arguments);
  tcase_add_test(tc, test_failures_past_four);
  tcase_add_loop_test(tc, test_relocation_random, 0, 4);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(relocation_suite()); }
