/* test-virtual-budget.c -- a VIRTUAL pool's map budget and physical
 * allocations (pool_virtual.c, issue 37), through the ABI:
 *  - idle granules stay mapped (the cache) until a reservation would map
 *    past the budget (peak live + map_budget parts per 10,000 of it, at
 *    least 8 granules); then idle allocations go back, the oldest first,
 *    down to the peak live, never one the reservation uses;
 *  - one wait for the pool's own stream per give-back (a stream sync, not
 *    the device's), counted in hippo_emu_counters.waits, and none where
 *    the allocations idle since before the last one cover the excess over
 *    the budget (then only those go, even past an unmap that failed);
 *  - a run of missing granules is one map call: allocations of at most
 *    half the budget's slack, access set once; an allocation goes back
 *    whole;
 *  - map_budget UINT64_MAX keeps every idle granule until cleanup; the
 *    option is validated and reported in force;
 *  - the out-of-memory ladder gives every idle allocation back.
 * Exact granules, allocations, calls and waits; HOST and DRY (and the
 * stand-ins, where suite-gpu.sh runs it); the device's check after every
 * step. */
#include <config.h>

#include <check.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

#define MiB TU_MiB
/* The tests' granule: 64 KiB, or the driver's granularity where larger
 * (main sets it). */
static uint64_t G = 64 * TU_KiB;

/* One VIRTUAL pool of granules G over a range of 256 G (at most the
 * device), with map_budget `budget`. */
static hippo_device *open_budget(const hippo_api *api, hippo_backend backend,
                                 uint64_t capacity, uint64_t budget) {
  tu_layout l;
  hippo_pool_options *o;
  tu_layout_init(&l);
  o = tu_layout_add(&l, HIPPO_POOL_VIRTUAL);
  o->range_size = capacity < 256 * G ? capacity / G * G : 256 * G;
  o->granule = G;
  o->map_budget = budget;
  return tu_open(api, backend, capacity, &l.layout);
}

static hippo_emu_counters counters(const hippo_api *api, hippo_device *dev) {
  return tu_counters(api, dev);
}

/* The VIRTUAL pool of stream s maps `mapped` G, `idle` of them idle, in
 * `allocs` physical allocations (the backend's count). */
static void expect_at(const hippo_api *api, hippo_device *dev,
                      hippo_stream *s, uint64_t mapped, uint64_t idle,
                      uint64_t allocs, int line) {
  hippo_pool_report r = tu_report(api, s, 1);
  hippo_emu_counters c = tu_counters(api, dev);
  ck_assert_msg(r.bytes_reserved == mapped * G && r.bytes_idle == idle * G &&
                    r.pages == mapped && c.granules_mapped == allocs &&
                    c.bytes_mapped == mapped * G,
                "line %d: %" PRIu64 " G mapped, %" PRIu64 " idle, %" PRIu64
                " allocations; expected %" PRIu64 ", %" PRIu64 ", %" PRIu64,
                line, r.bytes_reserved / G, r.bytes_idle / G,
                c.granules_mapped, mapped, idle, allocs);
  CK_CHECK(api, dev);
}
#define CK_MAPPED(s, mapped, idle, allocs)                                   \
  expect_at(api, dev, (s), (mapped), (idle), (allocs), __LINE__)

/* Between counters c0 and c1: `waits` host-side waits, each a stream
 * sync, and `unmaps` allocations unmapped (tried, a failed one too). */
static void expect_gave_back(hippo_emu_counters c0, hippo_emu_counters c1,
                             uint64_t waits, uint64_t unmaps, int line) {
  uint64_t w = c1.waits - c0.waits,
           sync = c1.calls[HIPPO_CALL_SYNC] - c0.calls[HIPPO_CALL_SYNC],
           u = c1.calls[HIPPO_CALL_VM_UNMAP] - c0.calls[HIPPO_CALL_VM_UNMAP];
  ck_assert_msg(w == waits && sync == waits && u == unmaps,
                "line %d: %" PRIu64 " waits, %" PRIu64 " stream syncs, %" PRIu64
                " unmaps; expected %" PRIu64 ", %" PRIu64 ", %" PRIu64,
                line, w, sync, u, waits, waits, unmaps);
}
#define CK_GAVE_BACK(c0, c1, waits, unmaps)                                  \
  expect_gave_back((c0), (c1), (waits), (unmaps), __LINE__)

/* A peak of 30 G set and given back (cleanup), so the budget is 30 G +
 * 8 G of slack while live stays below: two reservations of 8 G (each two
 * allocations of 4 G: half the slack), one of 1 G; the second released
 * first, then the first.  A reservation of 25 G in fresh address space
 * would map to 42 G: the oldest idle allocations go back (the second
 * reservation's, then the highest of the first's) until the excess over
 * the peak went, after one wait for the stream.  Nothing moved. */
START_TEST(test_oldest_go_back) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_budget(api, tu_backends[_i], 1024 * G, 0);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle x, a1, a2, b, p, c;
  hippo_emu_counters c0, c1;
  uint64_t at1, atb;
  x = tu_reserve(api, s, 30 * G);
  CK_OK(api, api->release(s, x));
  CK_OK(api, api->cleanup(dev, s));
  CK_MAPPED(s, 0, 0, 0);
  c0 = counters(api, dev);
  a1 = tu_reserve(api, s, 8 * G); /* [0, 8) */
  a2 = tu_reserve(api, s, 8 * G); /* [8, 16) */
  b = tu_reserve(api, s, G);      /* [16, 17) */
  at1 = tu_addr(api, s, a1);
  atb = tu_addr(api, s, b);
  c1 = counters(api, dev);
  /* each 8 G one map call of two allocations, access set once */
  ck_assert_uint_eq(c1.calls[HIPPO_CALL_VM_MAP] - c0.calls[HIPPO_CALL_VM_MAP],
                    5);
  ck_assert_uint_eq(
      c1.calls[HIPPO_CALL_VM_ACCESS] - c0.calls[HIPPO_CALL_VM_ACCESS], 3);
  CK_MAPPED(s, 17, 0, 5);
  CK_OK(api, api->release(s, a2));
  CK_OK(api, api->reserve(s, 100, HIPPO_MODE_PERSISTENT, &p)); /* a tick */
  CK_OK(api, api->release(s, a1));
  CK_MAPPED(s, 17, 16, 5); /* released, still mapped: no driver call */
  c0 = counters(api, dev);
  c = tu_reserve(api, s, 25 * G); /* [17, 42): 25 new */
  c1 = counters(api, dev);
  ck_assert_uint_eq(tu_addr(api, s, c), atb + G);
  /* 42 - 30 = 12 G back: a2's two allocations, then a1's upper one */
  ck_assert_uint_eq(
      c1.calls[HIPPO_CALL_VM_UNMAP] - c0.calls[HIPPO_CALL_VM_UNMAP], 3);
  ck_assert_uint_eq(c1.waits - c0.waits, 1);
  ck_assert_uint_eq(c1.calls[HIPPO_CALL_SYNC] - c0.calls[HIPPO_CALL_SYNC], 1);
  /* 25 = 6 allocations of 4 in one call, and 1 in another */
  ck_assert_uint_eq(c1.calls[HIPPO_CALL_VM_MAP] - c0.calls[HIPPO_CALL_VM_MAP],
                    7);
  ck_assert_uint_eq(
      c1.calls[HIPPO_CALL_VM_ACCESS] - c0.calls[HIPPO_CALL_VM_ACCESS], 2);
  CK_MAPPED(s, 30, 4, 9); /* a1's lower allocation stays, idle */
  {
    /* a reservation on it maps nothing */
    hippo_handle d;
    c0 = counters(api, dev);
    d = tu_reserve(api, s, 4 * G);
    ck_assert_uint_eq(tu_addr(api, s, d), at1);
    c1 = counters(api, dev);
    ck_assert_uint_eq(
        c1.calls[HIPPO_CALL_VM_MAP] - c0.calls[HIPPO_CALL_VM_MAP], 0);
    CK_MAPPED(s, 30, 0, 9);
    CK_OK(api, api->release(s, d));
  }
  ck_assert_uint_eq(tu_usage(api, dev, s).bytes_relocated, 0);
  CK_OK(api, api->release(s, b));
  CK_OK(api, api->release(s, c));
  CK_OK(api, api->release(s, p));
  CK_OK(api, api->cleanup(dev, s)); /* one wait, every idle allocation */
  CK_MAPPED(s, 0, 0, 0);
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* Nothing the reservation itself uses goes back.  30 G, 1 G and 20 G
 * mapped (a peak of 51 G, a budget of 59 G), the first and the third
 * released: a reservation of 40 G lands on the third's idle granules and
 * maps 20 more (71 G): 20 G must go, and only the first's allocations
 * may (the highest first, as old as the third's), never the third's,
 * which it uses. */
START_TEST(test_own_granules_stay) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_budget(api, tu_backends[_i], 1024 * G, 0);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle g0, a, e, f;
  hippo_emu_counters c0, c1;
  g0 = tu_reserve(api, s, 30 * G); /* [0, 30): 7 allocations of 4, 1 of 2 */
  a = tu_reserve(api, s, G);       /* [30, 31) */
  e = tu_reserve(api, s, 20 * G);  /* [31, 51): 5 of 4 */
  CK_MAPPED(s, 51, 0, 14);
  CK_OK(api, api->release(s, g0));
  CK_OK(api, api->release(s, e));
  CK_MAPPED(s, 51, 50, 14);
  c0 = counters(api, dev);
  f = tu_reserve(api, s, 40 * G);
  c1 = counters(api, dev);
  ck_assert_uint_eq(tu_addr(api, s, f), tu_addr(api, s, a) + G);
  /* [28, 30), [24, 28), [20, 24), [16, 20), [12, 16), [8, 12): 22 G */
  ck_assert_uint_eq(
      c1.calls[HIPPO_CALL_VM_UNMAP] - c0.calls[HIPPO_CALL_VM_UNMAP], 6);
  ck_assert_uint_eq(c1.waits - c0.waits, 1);
  CK_MAPPED(s, 49, 8, 13);
  CK_OK(api, api->release(s, a));
  CK_OK(api, api->release(s, f));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* A peak of 40 G (its cleanup waits); three reservations of 8 G and one
 * of 1 G (b), the three released: a reservation of 25 G (c) gives back
 * 12 G of them after one wait (they went idle after the cleanup's): 38 G
 * mapped, the 12 G still idle went idle before that wait (a2's lower
 * allocation, a3's two), b live. */
typedef struct waited {
  hippo_handle b, c, p, q;
} waited;

static waited waited_start(const hippo_api *api, hippo_device *dev,
                           hippo_stream *s) {
  hippo_handle x, a1, a2, a3;
  hippo_emu_counters c0, c1;
  waited w;
  x = tu_reserve(api, s, 40 * G);
  CK_OK(api, api->release(s, x));
  CK_OK(api, api->cleanup(dev, s));
  CK_MAPPED(s, 0, 0, 0);
  a1 = tu_reserve(api, s, 8 * G);
  a2 = tu_reserve(api, s, 8 * G);
  a3 = tu_reserve(api, s, 8 * G);
  w.b = tu_reserve(api, s, G);
  CK_OK(api, api->release(s, a1));
  CK_OK(api, api->reserve(s, 100, HIPPO_MODE_PERSISTENT, &w.p)); /* tick */
  CK_OK(api, api->release(s, a2));
  CK_OK(api, api->release(s, a3));
  /* a release at the clock of a wait may have come after it: the clock
   * moves on before this one */
  CK_OK(api, api->reserve(s, 100, HIPPO_MODE_PERSISTENT, &w.q));
  CK_MAPPED(s, 25, 24, 7);
  /* 25 + 25 > 40 + 8: 10 G over the peak go, a1's two allocations and
   * a2's upper one, which went idle after the cleanup's wait: one wait */
  c0 = counters(api, dev);
  w.c = tu_reserve(api, s, 25 * G);
  c1 = counters(api, dev);
  CK_GAVE_BACK(c0, c1, 1, 3);
  CK_MAPPED(s, 38, 12, 11);
  return w;
}

/* A give-back waits for the stream only where an allocation it gives
 * back went idle since the stream's last wait.  From waited_start (one
 * wait for c), a reservation of 30 G (past the free room the three left)
 * gives back the 12 G idle since before that wait with no wait; released
 * after it, c's 25 G go back only after a wait again. */
START_TEST(test_waited_idle_goes_without_wait) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_budget(api, tu_backends[_i], 1024 * G, 0);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  waited w = waited_start(api, dev, s);
  hippo_handle d, e;
  hippo_emu_counters c0, c1;
  /* 38 + 30 > 56 + 8: the 12 G idle since before that wait go (a2's
   * lower allocation, a3's two), with no wait */
  c0 = counters(api, dev);
  d = tu_reserve(api, s, 30 * G);
  c1 = counters(api, dev);
  CK_GAVE_BACK(c0, c1, 0, 3);
  CK_MAPPED(s, 56, 0, 16);
  /* c went idle after the last wait: 56 + 30 > 61 + 8, its seven
   * allocations go after one */
  CK_OK(api, api->release(s, w.c));
  c0 = counters(api, dev);
  e = tu_reserve(api, s, 30 * G);
  c1 = counters(api, dev);
  CK_GAVE_BACK(c0, c1, 1, 7);
  CK_MAPPED(s, 61, 0, 17);
  ck_assert_uint_eq(tu_usage(api, dev, s).bytes_relocated, 0);
  CK_OK(api, api->release(s, w.b));
  CK_OK(api, api->release(s, d));
  CK_OK(api, api->release(s, e));
  CK_OK(api, api->release(s, w.p));
  CK_OK(api, api->release(s, w.q));
  CK_OK(api, api->cleanup(dev, s));
  CK_MAPPED(s, 0, 0, 0);
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

static void waited_end(const hippo_api *api, hippo_device *dev,
                       hippo_stream *s, void *n, waited w, hippo_handle d) {
  ck_assert_uint_eq(tu_usage(api, dev, s).bytes_relocated, 0);
  CK_OK(api, api->release(s, w.c));
  CK_OK(api, api->release(s, d));
  CK_OK(api, api->release(s, w.p));
  CK_OK(api, api->release(s, w.q));
  CK_OK(api, api->cleanup(dev, s));
  CK_MAPPED(s, 0, 0, 0);
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}

/* A give-back takes no wait where what went idle before the last wait
 * covers the excess over the budget, though not the whole slack: 38 + 33
 * > 56 + 8 by 7 G, and the 12 G idle since c's wait cover it; they go
 * (down toward the peak, 15 G over it), b (idle after the wait) stays. */
START_TEST(test_wait_only_for_the_excess) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_budget(api, tu_backends[_i], 1024 * G, 0);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  waited w = waited_start(api, dev, s);
  hippo_emu_counters c0, c1;
  hippo_handle d;
  CK_OK(api, api->release(s, w.b)); /* after c's wait */
  CK_MAPPED(s, 38, 13, 11);
  c0 = counters(api, dev);
  d = tu_reserve(api, s, 33 * G);
  c1 = counters(api, dev);
  CK_GAVE_BACK(c0, c1, 0, 3);
  CK_MAPPED(s, 59, 1, 17); /* b's 1 G idle */
  waited_end(api, dev, s, n, w, d);
}
END_TEST

/* A give-back that takes no wait stops at the first allocation idle
 * since the last wait, even past an unmap that failed: the 30 G
 * reservation's give-back needs only the 12 G idle before c's wait, so it
 * takes none.  The first unmap fails (an injected fault): a2's lower
 * allocation stays, a3's two go, and b, whose work no wait covers, stays
 * mapped (an unmap without a wait must not reach it); the reservation
 * maps past the budget. */
START_TEST(test_failed_unmap_takes_no_younger) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_budget(api, tu_backends[_i], 1024 * G, 0);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  waited w = waited_start(api, dev, s);
  hippo_emu_counters c0, c1;
  hippo_handle d;
  CK_OK(api, api->release(s, w.b)); /* after c's wait */
  CK_MAPPED(s, 38, 13, 11);
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_VM_UNMAP, 1,
                                       HIPPO_BACKEND_ERROR));
  c0 = counters(api, dev);
  d = tu_reserve(api, s, 30 * G);
  c1 = counters(api, dev);
  /* the failed one and a3's two */
  CK_GAVE_BACK(c0, c1, 0, 3);
  CK_MAPPED(s, 60, 5, 17); /* a2's lower 4 G and b's 1 G still idle */
  waited_end(api, dev, s, n, w, d);
}
END_TEST

/* map_budget UINT64_MAX: no budget, every idle granule stays until
 * cleanup, and a run is one allocation however long. */
START_TEST(test_no_budget) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_budget(api, tu_backends[_i], 1024 * G, UINT64_MAX);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle a, b;
  hippo_emu_counters c0, c1;
  ck_assert_uint_eq(tu_options(api, s, 1).map_budget, UINT64_MAX);
  a = tu_reserve(api, s, 40 * G); /* one allocation of 40 */
  CK_MAPPED(s, 40, 0, 1);
  CK_OK(api, api->release(s, a));
  b = tu_reserve(api, s, G); /* [0, 1): on the idle allocation */
  c0 = counters(api, dev);
  a = tu_reserve(api, s, 60 * G); /* [1, 61): 39 idle, 21 new */
  CK_MAPPED(s, 61, 0, 2);
  CK_OK(api, api->release(s, a));
  CK_OK(api, api->release(s, b));
  c1 = counters(api, dev);
  ck_assert_uint_eq(c1.waits, c0.waits); /* nothing went back */
  ck_assert_uint_eq(c1.calls[HIPPO_CALL_VM_UNMAP],
                    c0.calls[HIPPO_CALL_VM_UNMAP]);
  CK_MAPPED(s, 61, 61, 2);
  CK_OK(api, api->cleanup(dev, s));
  CK_MAPPED(s, 0, 0, 0);
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* The device full: the out-of-memory ladder gives the stream's idle
 * allocations back, all of them, and the retry maps.  A device of 40 G:
 * s maps 28 G (24 of them idle), a second stream 10 G; 8 G more for s do
 * not fit until s's idle allocation went. */
START_TEST(test_ladder_gives_idle_back) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_budget(api, tu_backends[_i], 40 * G, UINT64_MAX);
  void *n, *n2;
  hippo_stream *s = tu_attach(api, dev, &n), *s2 = tu_attach(api, dev, &n2);
  hippo_handle a, b, c, d;
  a = tu_reserve(api, s, 24 * G); /* one allocation of 24 */
  b = tu_reserve(api, s, 4 * G);  /* [24, 28) */
  d = tu_reserve(api, s2, 10 * G);
  CK_OK(api, api->release(s, a));
  ck_assert_uint_eq(tu_report(api, s, 1).bytes_idle, 24 * G);
  c = tu_reserve(api, s, 8 * G); /* [28, 36): only 2 G free on the device */
  ck_assert_uint_eq(tu_addr(api, s, c), tu_addr(api, s, b) + 4 * G);
  ck_assert_uint_eq(tu_report(api, s, 1).bytes_reserved, 12 * G);
  ck_assert_uint_eq(tu_report(api, s, 1).bytes_idle, 0);
  ck_assert_uint_eq(tu_counters(api, dev).bytes_mapped, 22 * G);
  ck_assert_uint_eq(tu_counters(api, dev).granules_mapped, 3);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, b));
  CK_OK(api, api->release(s, c));
  CK_OK(api, api->release(s2, d));
  tu_detach(api, dev, s2, n2);
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* The option: refused on another kind, resolved (0: 150) and reported. */
START_TEST(test_option) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device_desc d;
  hippo_device *dev = NULL;
  void *n;
  hippo_stream *s;
  tu_layout_sliced(&l, MiB, MiB);
  l.pools[0].map_budget = 10;
  TU_SIZED(d);
  d.backend = HIPPO_BACKEND_DRY;
  d.layout = &l.layout;
  CK_STATUS(api, api->device_open(&d, &dev), HIPPO_POOL_CONFIG);
  CK_ERROR_HAS(api, "map_budget");
  ck_assert_ptr_null(dev);
  dev = open_budget(api, tu_backends[_i], 1024 * G, 0);
  s = tu_attach(api, dev, &n);
  ck_assert_uint_eq(tu_options(api, s, 1).map_budget, 150);
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
  dev = open_budget(api, tu_backends[_i], 1024 * G, 500);
  s = tu_attach(api, dev, &n);
  ck_assert_uint_eq(tu_options(api, s, 1).map_budget, 500);
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

static Suite *budget_suite(void) {
  Suite *s = suite_create("virtual-budget");
  TCase *tc = tcase_create("budget");
  tcase_add_loop_test(tc, test_oldest_go_back, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_own_granules_stay, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_waited_idle_goes_without_wait, 0,
                      TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_wait_only_for_the_excess, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_failed_unmap_takes_no_younger, 0,
                      TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_no_budget, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_ladder_gives_idle_back, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_option, 0, TU_N_BACKENDS);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  uint64_t g = tu_vm_granularity(tu_api());
  if (g > G)
    G = g;
  return tu_run(budget_suite());
}
