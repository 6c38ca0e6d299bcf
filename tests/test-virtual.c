/* test-virtual.c -- VIRTUAL pools through the ABI (pool_virtual.c): one
 * virtual range per stream, granules mapped where live reservations touch
 * it, given back in batches; pointers that never move; exact granule
 * counts, mapped bytes and driver calls after scripted sequences; bytes
 * read back after maps and unmaps around them; a fault at every virtual-
 * memory call; the capture guard; HOST's memory really returning; layout
 * validation and the VIRTUAL preset.  HOST and DRY (HOST alone where bytes
 * or host memory are looked at); the device's check must pass after every
 * step that changes state. */
#include <config.h>

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#define KiB TU_KiB
#define MiB TU_MiB
/* The tests' granule G: 64 KiB, or the driver's virtual-memory
 * granularity where that is larger (2 MiB on a real GPU); the scripted
 * sizes are in units U of G / 64, so every figure holds for any G (main
 * sets both). */
static uint64_t G = 64 * KiB;
static uint64_t U = KiB;

/* One VIRTUAL pool: a range of `range` bytes in granules of G, unmapping
 * at `threshold` idle bytes (0: the default). */
static hippo_device *open_virtual(const hippo_api *api, hippo_backend backend,
                                  uint64_t capacity, uint64_t range,
                                  uint64_t threshold) {
  tu_layout l;
  hippo_pool_options *o;
  tu_layout_init(&l);
  o = tu_layout_add(&l, HIPPO_POOL_VIRTUAL);
  o->range_size = range;
  o->granule = G;
  o->unmap_threshold = threshold;
  return tu_open(api, backend, capacity, &l.layout);
}

static uint64_t calls(const hippo_api *api, hippo_device *dev,
                      hippo_call_kind kind) {
  return tu_counters(api, dev).calls[kind];
}

static hippo_relocation_need need_of(const hippo_api *api, hippo_stream *s) {
  hippo_relocation_need need = 99;
  CK_OK(api, api->relocation_need(s, &need));
  return need;
}

/* The figures of stream s: `mapped` granules mapped, `idle` of them idle;
 * and the backend's count of granules mapped is the device's. */
static void expect_granules_at(const hippo_api *api, hippo_device *dev,
                               hippo_stream *s, uint64_t mapped,
                               uint64_t idle, int line) {
  hippo_usage u = tu_usage(api, dev, s);
  hippo_pool_report r = tu_report(api, s, 1);
  hippo_emu_counters c = tu_counters(api, dev);
  hippo_usage all = tu_usage(api, dev, NULL);
  ck_assert_msg(u.pages == mapped && u.bytes_reserved == mapped * G &&
                    u.bytes_idle == idle * G,
                "line %d: %" PRIu64 " granules (%" PRIu64 " B), %" PRIu64
                " B idle; expected %" PRIu64 " granules, %" PRIu64
                " idle",
                line, u.pages, u.bytes_reserved, u.bytes_idle, mapped, idle);
  ck_assert_uint_eq(r.pages, mapped);
  ck_assert_uint_eq(r.bytes_idle, idle * G);
  ck_assert_uint_eq(r.granule_size, G);
  /* the backend's bytes are the device's: every stream's granules, in
   * physical allocations of one granule or more */
  ck_assert_msg(c.granules_mapped <= all.pages &&
                    (c.granules_mapped > 0) == (all.pages > 0) &&
                    c.bytes_mapped == all.bytes_reserved,
                "line %d: the backend maps %" PRIu64 " allocations (%" PRIu64
                " B), the device's streams %" PRIu64 " granules (%" PRIu64
                " B)",
                line, c.granules_mapped, c.bytes_mapped, all.pages,
                all.bytes_reserved);
  CK_CHECK(api, dev);
}
#define CK_GRANULES(s, mapped, idle)                                       \
  expect_granules_at(api, dev, (s), (mapped), (idle), __LINE__)

/* A scripted sequence with exact figures: a reservation spanning
 * granules, one sharing a granule, releases that leave granules idle, the
 * threshold crossing (relocation_need answers UNMAP and
 * relocate_when_wanted gives them back, moving no byte), cleanup. */
START_TEST(test_granules_exact) {
  const hippo_api *api = tu_api();
  hippo_device *dev =
      open_virtual(api, tu_backends[_i], 4096 * G, 1024 * G, 4 * G);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle a, b, c;
  uint64_t base, maps0 = calls(api, dev, HIPPO_CALL_VM_MAP);
  hippo_relocation_report rep;

  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_RANGE), 0); /* lazily */
  a = tu_reserve(api, s, 100 * U); /* [0, 100U): granules 0 and 1 */
  base = tu_addr(api, s, a);
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_RANGE), 1);
  ck_assert_uint_eq(tu_usage(api, dev, s).bytes_virtual, 1024 * G);
  ck_assert_uint_eq(tu_counters(api, dev).bytes_virtual, 1024 * G);
  ck_assert_uint_eq(tu_counters(api, dev).ranges_held, 1);
  /* one physical allocation of both, access set once */
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_MAP) - maps0, 1);
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_ACCESS), 1);
  CK_GRANULES(s, 2, 0);
  b = tu_reserve(api, s, 20 * U); /* [100U, 120U): granule 1, mapped */
  ck_assert_uint_eq(tu_addr(api, s, b), base + 100 * U);
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_MAP) - maps0, 1);
  CK_GRANULES(s, 2, 0);
  CK_OK(api, api->release(s, a)); /* granule 0 idle; 1 still b's */
  CK_GRANULES(s, 2, 1);
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_NOTHING);
  CK_OK(api, api->release(s, b));
  CK_GRANULES(s, 2, 2);
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_UNMAP), 0); /* never at a
                                                                 release */
  c = tu_reserve(api, s, 200 * U); /* [0, 200U): 0 and 1 reused, 2, 3 new */
  ck_assert_uint_eq(tu_addr(api, s, c), base);
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_MAP) - maps0, 2);
  ck_assert_uint_eq(tu_counters(api, dev).granules_mapped, 2);
  CK_GRANULES(s, 4, 0);
  CK_OK(api, api->release(s, c));
  CK_GRANULES(s, 4, 4);
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_UNMAP); /* 4 G idle */
  TU_SIZED(rep);
  CK_OK(api, api->relocate_with(dev, s, HIPPO_RELOCATE_WANTED, &rep));
  ck_assert_uint_eq(rep.need, HIPPO_NEED_UNMAP);
  ck_assert_uint_eq(rep.reason, HIPPO_RELOCATE_WANTED);
  {
    hippo_relocation_report mine;
    TU_SIZED(mine);
    CK_OK(api, api->relocation_report(dev, s, &mine));
    ck_assert_uint_eq(mine.reason, HIPPO_RELOCATE_UNMAP); /* the need's */
  }
  ck_assert_uint_eq(rep.slices_moved, 0);
  ck_assert_uint_eq(rep.pages_freed, 4);
  ck_assert_uint_eq(rep.bytes_freed, 4 * G);
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_UNMAP), 2); /* whole */
  CK_GRANULES(s, 0, 0);
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_NOTHING);
  ck_assert_uint_eq(tu_usage(api, dev, s).bytes_relocated, 0);
  /* mapped again where a reservation lands; cleanup gives idle ones back */
  a = tu_reserve(api, s, 3 * G); /* granules 0 .. 2 */
  b = tu_reserve(api, s, 10 * U); /* granule 3 */
  ck_assert_uint_eq(tu_addr(api, s, b), base + 3 * G);
  CK_GRANULES(s, 4, 0);
  CK_OK(api, api->release(s, a));
  CK_GRANULES(s, 4, 3);
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_NOTHING); /* 3 G < 4 G */
  CK_OK(api, api->cleanup(dev, s)); /* a's allocation of 3 granules */
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_UNMAP), 3);
  CK_GRANULES(s, 1, 0);
  CK_OK(api, api->reclaim(dev, NULL)); /* nothing idle: no call */
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_UNMAP), 3);
  ck_assert_uint_eq(tu_addr(api, s, b), base + 3 * G); /* never moved */
  CK_OK(api, api->release(s, b));
  CK_OK(api, api->reclaim(dev, s));
  CK_GRANULES(s, 0, 0);
  ck_assert_uint_eq(tu_usage(api, dev, s).peak_bytes_reserved, 4 * G);
  tu_detach(api, dev, s, n);
  ck_assert_uint_eq(tu_counters(api, dev).ranges_held, 0);
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_RANGE), 2);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* Bytes survive maps and unmaps around them, and two reservations sharing
 * a granule keep it mapped until both are released. */
START_TEST(test_bytes_stay) {
  const hippo_api *api = tu_api();
  hippo_device *dev;
  void *n, *p, *q;
  hippo_stream *s;
  hippo_handle x, y, big[8];
  uint64_t px, py;
  if (!tu_host_only("bytes are read back"))
    return;
  dev = open_virtual(api, HIPPO_BACKEND_HOST, 4096 * G, 1024 * G, 0);
  s = tu_attach(api, dev, &n);
  x = tu_reserve(api, s, 40 * U); /* x and y share granule 0 */
  y = tu_reserve(api, s, 20 * U);
  px = tu_addr(api, s, x);
  py = tu_addr(api, s, y);
  ck_assert_uint_eq(py, px + 40 * U);
  CK_OK(api, api->resolve(s, x, &p, NULL));
  CK_OK(api, api->resolve(s, y, &q, NULL));
  tu_fill(api, dev, p, 40 * U, 1);
  tu_fill(api, dev, q, 20 * U, 2);
  for (int round = 0; round < 16; round++) {
    /* neighbours come and go, their granules mapped and unmapped */
    for (int i = 0; i < 8; i++)
      big[i] = tu_reserve(api, s, (uint64_t)(i + 1 + round % 3) * G + 1000);
    for (int i = round % 2; i < 8; i += 2)
      CK_OK(api, api->release(s, big[i]));
    CK_OK(api, api->cleanup(dev, s));
    for (int i = 1 - round % 2; i < 8; i += 2)
      CK_OK(api, api->release(s, big[i]));
    CK_OK(api, api->reclaim(dev, NULL));
    ck_assert_uint_eq(tu_addr(api, s, x), px);
    ck_assert_uint_eq(tu_addr(api, s, y), py);
    TU_VERIFY(api, dev, p, 40 * U, 1);
    TU_VERIFY(api, dev, q, 20 * U, 2);
    CK_CHECK(api, dev);
  }
  /* x released: granule 0 stays mapped for y, through cleanup */
  CK_GRANULES(s, 1, 0);
  CK_OK(api, api->release(s, x));
  CK_OK(api, api->cleanup(dev, s));
  CK_GRANULES(s, 1, 0);
  TU_VERIFY(api, dev, q, 20 * U, 2);
  CK_OK(api, api->release(s, y)); /* both gone: it goes at the cleanup */
  CK_GRANULES(s, 1, 1);
  CK_OK(api, api->cleanup(dev, s));
  CK_GRANULES(s, 0, 0);
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* A fault at every virtual-memory call of a scenario: the call that met it
 * answers the fault's status and changes nothing it did not say it
 * changed, every live reservation keeps its address (and, HOST, its
 * bytes), last_error names the call, and after the scenario nothing is
 * left mapped or reserved in the backend. */
typedef struct vm_run {
  hippo_device *dev;
  hippo_stream *s;
  void *n;
  hippo_handle keep;      /* a reservation that lives through it all */
  uint64_t keep_at;
  int failed, absorbed;   /* steps the fault failed, steps it did not */
  bool bytes;             /* the device holds bytes (HOST) */
} vm_run;

static void vm_step(const hippo_api *api, vm_run *w, hippo_status st,
                    hippo_status fault, const char *what, int line) {
  if (st == HIPPO_SUCCESS) {
    w->absorbed++;
  } else {
    ck_assert_msg(st == fault || st == HIPPO_OUT_OF_MEMORY,
                  "line %d: %s answered %s: %s", line, what,
                  api->status_name(st), api->last_error());
    ck_assert_msg(strstr(api->last_error(), "injected fault") != NULL,
                  "line %d: %s: last_error does not name the call: %s", line,
                  what, api->last_error());
    w->failed++;
  }
  ck_assert_uint_eq(tu_addr(api, w->s, w->keep), w->keep_at);
  if (w->bytes) {
    void *p;
    CK_OK(api, api->resolve(w->s, w->keep, &p, NULL));
    TU_VERIFY(api, w->dev, p, 10 * U, 9);
  }
  CK_CHECK(api, w->dev);
}

START_TEST(test_faults_every_call) {
  static const hippo_call_kind kinds[] = {HIPPO_CALL_VM_RANGE,
                                          HIPPO_CALL_VM_MAP,
                                          HIPPO_CALL_VM_UNMAP};
  const hippo_api *api = tu_api();
  hippo_call_kind kind = kinds[_i % 3];
  hippo_backend backend = tu_backends[_i / 3];
  int total = 0, fired_steps = 0;
  for (uint64_t nth = 1;; nth++) {
    vm_run w;
    hippo_handle h[6];
    hippo_status st;
    uint64_t before;
    int live = 0;
    bool armed = true;
    memset(&w, 0, sizeof w);
    w.dev = open_virtual(api, backend, 1024 * G, 256 * G, 0);
    w.s = tu_attach(api, w.dev, &w.n);
    w.keep = tu_reserve(api, w.s, 10 * U);
    w.keep_at = tu_addr(api, w.s, w.keep);
    w.bytes = tu_backend() == HIPPO_BACKEND_HOST && backend == HIPPO_BACKEND_HOST;
    if (w.bytes) {
      void *p;
      CK_OK(api, api->resolve(w.s, w.keep, &p, NULL));
      tu_fill(api, w.dev, p, 10 * U, 9);
    }
    before = calls(api, w.dev, kind);
    CK_OK(api, tu_emu(api)->inject_fault(w.dev, kind, nth,
                                         HIPPO_BACKEND_ERROR));
    /* the scenario: reservations spanning granules, releases, cleanup,
     * a second stream (its range), reclaim, detach */
    for (int i = 0; i < 6; i++) {
      hippo_pool_report was = tu_report(api, w.s, 1), now;
      st = api->reserve(w.s, (uint64_t)(i + 1) * G / 2 + 4096,
                        HIPPO_MODE_AUTO, &h[live]);
      vm_step(api, &w, st, HIPPO_BACKEND_ERROR, "reserve", __LINE__);
      if (st == HIPPO_SUCCESS) {
        live++;
        continue;
      }
      /* a reservation that could not map counted nowhere */
      now = tu_report(api, w.s, 1);
      ck_assert_uint_eq(now.allocations, was.allocations);
      ck_assert_uint_eq(now.bytes_in_use, was.bytes_in_use);
      ck_assert_uint_eq(now.bytes_padding, was.bytes_padding);
      ck_assert_uint_eq(now.largest_allocation, was.largest_allocation);
      ck_assert_uint_eq(now.bytes_reserved, was.bytes_reserved);
      ck_assert_uint_eq(now.bytes_idle, was.bytes_idle);
      ck_assert_uint_eq(now.largest_free, was.largest_free);
    }
    for (int i = 0; i < live; i += 2)
      CK_OK(api, api->release(w.s, h[i]));
    {
      st = api->cleanup(w.dev, NULL);
      vm_step(api, &w, st, HIPPO_BACKEND_ERROR, "cleanup", __LINE__);
    }
    {
      void *n2;
      hippo_stream *s2 = tu_attach(api, w.dev, &n2);
      hippo_handle h2 = 0;
      st = api->reserve(s2, 3 * G, HIPPO_MODE_AUTO, &h2);
      vm_step(api, &w, st, HIPPO_BACKEND_ERROR, "reserve on s2", __LINE__);
      if (st == HIPPO_SUCCESS)
        CK_OK(api, api->release(s2, h2));
      st = api->stream_detach(s2);
      vm_step(api, &w, st, HIPPO_BACKEND_ERROR, "detach s2", __LINE__);
      if (st != HIPPO_SUCCESS) /* a granule stayed: detach again */
        CK_OK(api, api->stream_detach(s2));
      CK_OK(api, tu_emu(api)->stream_destroy(w.dev, n2));
    }
    for (int i = 1; i < live; i += 2)
      CK_OK(api, api->release(w.s, h[i]));
    {
      st = api->reclaim(w.dev, NULL);
      vm_step(api, &w, st, HIPPO_BACKEND_ERROR, "reclaim", __LINE__);
    }
    armed = calls(api, w.dev, kind) < before + nth;
    CK_OK(api, tu_emu(api)->inject_fault(w.dev, kind, 0, HIPPO_SUCCESS));
    CK_OK(api, api->release(w.s, w.keep));
    CK_OK(api, api->cleanup(w.dev, NULL)); /* what a fault left goes now */
    tu_detach(api, w.dev, w.s, w.n);
    {
      hippo_emu_counters c = tu_counters(api, w.dev);
      ck_assert_msg(c.bytes_mapped == 0 && c.ranges_held == 0 &&
                        c.granules_mapped == 0 && c.bytes_held == 0,
                    "kind %u fault %" PRIu64 ": %" PRIu64 " B mapped, %" PRIu64
                    " ranges left at close",
                    kind, nth, c.bytes_mapped, c.ranges_held);
    }
    CK_OK(api, api->device_close(w.dev));
    total++;
    fired_steps += w.failed;
    if (armed) /* the scenario made fewer calls than nth: done */
      break;
  }
  /* every call of the kind was failed once, and some step saw it */
  ck_assert_int_gt(total, 1);
  ck_assert_int_gt(fired_steps, 0);
}
END_TEST

/* Stream s's granules 0 and 2 unmapped, granule 1 mapped and idle
 * between them; the range's address. */
static uint64_t idle_between_holes(const hippo_api *api, hippo_device *dev,
                                   hippo_stream *s) {
  hippo_handle a = tu_reserve(api, s, G); /* granules 0, 1, 2 */
  hippo_handle b = tu_reserve(api, s, G);
  hippo_handle c = tu_reserve(api, s, G);
  uint64_t base = tu_addr(api, s, a);
  ck_assert_uint_eq(tu_addr(api, s, b), base + G);
  ck_assert_uint_eq(tu_addr(api, s, c), base + 2 * G);
  CK_OK(api, api->release(s, a));
  CK_OK(api, api->release(s, c));
  CK_OK(api, api->cleanup(dev, NULL)); /* 0 and 2 go back */
  CK_GRANULES(s, 1, 0);
  CK_OK(api, api->release(s, b)); /* 1 stays, idle */
  CK_GRANULES(s, 1, 1);
  return base;
}

/* A reservation whose second map fails gives back the granule its first
 * map took and nothing else: the idle granule between them stays mapped
 * (work queued before its slice's release may still use it, and the
 * failure's unmap does not wait). */
START_TEST(test_failed_map_keeps_idle) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_virtual(api, tu_backends[_i], 4096 * G, 64 * G, 0);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle h = 0;
  uint64_t base = idle_between_holes(api, dev, s), maps0, unmaps0;
  hippo_status st;
  maps0 = calls(api, dev, HIPPO_CALL_VM_MAP);
  unmaps0 = calls(api, dev, HIPPO_CALL_VM_UNMAP);
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_VM_MAP, 2,
                                       HIPPO_BACKEND_ERROR));
  st = api->reserve(s, 3 * G, HIPPO_MODE_AUTO, &h); /* maps 0, then 2 */
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_VM_MAP, 0,
                                       HIPPO_SUCCESS));
  ck_assert_msg(st == HIPPO_BACKEND_ERROR, "reserve answered %s: %s",
                api->status_name(st), api->last_error());
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_MAP) - maps0, 2);
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_UNMAP) - unmaps0, 1);
  CK_GRANULES(s, 1, 1); /* granule 1 still mapped and idle */
  h = tu_reserve(api, s, 3 * G); /* the fault gone: it serves, in place */
  ck_assert_uint_eq(tu_addr(api, s, h), base);
  CK_GRANULES(s, 3, 0);
  CK_OK(api, api->release(s, h));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* A nearly full range: the head of the request's own size class is too
 * small and no larger class holds a free slice, but another slice of the
 * class fits; the reservation takes it, rather than failing while it
 * fits.  40U and 41U are one class: the same sixteenth of a power of
 * two. */
START_TEST(test_full_range_finds_fit) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_virtual(api, tu_backends[_i], 4096 * G, 4 * G, 0);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle a, x, b, y, c, h;
  uint64_t base;
  hippo_pool_report r;
  a = tu_reserve(api, s, 40 * U);
  x = tu_reserve(api, s, 40 * U);
  b = tu_reserve(api, s, 10 * U);
  y = tu_reserve(api, s, 41 * U);
  c = tu_reserve(api, s, 4 * G - 131 * U); /* the range is full */
  base = tu_addr(api, s, a);
  ck_assert_uint_eq(tu_addr(api, s, y), base + 90 * U);
  ck_assert_uint_eq(tu_addr(api, s, c), base + 131 * U);
  CK_OK(api, api->release(s, y));
  CK_OK(api, api->release(s, x)); /* x, smaller, heads the class */
  r = tu_report(api, s, 1);
  ck_assert_uint_eq(r.largest_free, 41 * U);
  ck_assert_uint_eq(r.bytes_free, 81 * U);
  h = tu_reserve(api, s, 41 * U);
  ck_assert_uint_eq(tu_addr(api, s, h), base + 90 * U);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, h));
  CK_OK(api, api->release(s, a));
  CK_OK(api, api->release(s, b));
  CK_OK(api, api->release(s, c));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* The capture guard: a capturing stream maps no new granule
 * (HIPPO_GRAPH_NEEDS_PAGE) but is served from mapped ones; nothing is
 * unmapped while it records; a granule a guarded (released during the
 * capture) reservation touches stays mapped until graph_retire. */
START_TEST(test_capture_guard) {
  const hippo_api *api = tu_api();
  hippo_device *dev =
      open_virtual(api, tu_backends[_i], 1024 * G, 256 * G, G);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle warm, h, big = 0, keep;
  uint64_t id = 0, unmaps;
  bool maps = tu_info(api, dev).capture_maps != 0;

  warm = tu_reserve(api, s, 2 * G); /* maps granules 0 and 1 */
  keep = tu_reserve(api, s, 10 * U); /* granule 2 */
  CK_OK(api, api->release(s, warm));
  CK_GRANULES(s, 3, 2);
  unmaps = calls(api, dev, HIPPO_CALL_VM_UNMAP);
  CK_OK(api, tu_emu(api)->capture_begin(dev, n, &id));
  h = tu_reserve(api, s, G); /* from mapped granule 0: fine */
  if (maps) { /* CUDA: granules 3 .. 10 mapped for the graph, one a call */
    uint64_t m0 = calls(api, dev, HIPPO_CALL_VM_MAP);
    CK_OK(api, api->reserve(s, 8 * G, HIPPO_MODE_AUTO, &big));
    ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_MAP) - m0, 8);
    CK_OK(api, api->release(s, big)); /* guarded */
  } else {
    CK_STATUS(api, api->reserve(s, 8 * G, HIPPO_MODE_AUTO, &big),
              HIPPO_GRAPH_NEEDS_PAGE);
  }
  CK_OK(api, api->release(s, h)); /* guarded for the graph */
  ck_assert_uint_eq(tu_usage(api, dev, s).bytes_guarded, maps ? 9 * G : G);
  CK_STATUS(api, api->cleanup(dev, NULL), HIPPO_GRAPH_RECORDING);
  CK_OK(api, api->relocate_with(dev, NULL, HIPPO_RELOCATE_UNMAP, NULL));
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_UNMAP), unmaps);
  CK_OK(api, tu_emu(api)->capture_end(dev, n));
  /* granule 0 is touched by the guarded slice, and granules 0 and 1 are
   * one physical allocation (warm's), which goes back whole: cleanup
   * keeps both */
  CK_OK(api, api->cleanup(dev, NULL));
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_UNMAP), unmaps);
  CK_GRANULES(s, maps ? 11 : 3, 1);
  CK_OK(api, api->graph_retire(dev, id));
  CK_GRANULES(s, maps ? 11 : 3, maps ? 10 : 2);
  CK_OK(api, api->cleanup(dev, NULL));
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_UNMAP),
                    unmaps + (maps ? 9 : 1));
  CK_GRANULES(s, 1, 0);
  CK_OK(api, api->release(s, keep));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* A capturing stream's first reservation on a VIRTUAL pool that has no
 * range yet: refused before the range is reserved (a driver call), with
 * nothing changed; after the capture the range comes as usual. */
START_TEST(test_capture_reserves_no_range) {
  const hippo_api *api = tu_api();
  hippo_device *dev =
      open_virtual(api, tu_backends[_i], 1024 * G, 256 * G, G);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle h = 0;
  uint64_t id = 0;
  CK_OK(api, tu_emu(api)->capture_begin(dev, n, &id));
  if (tu_info(api, dev).capture_maps) {
    /* CUDA: the range is reserved and the granule mapped in the capture
     * (PyTorch's expandable segments do both) */
    h = tu_reserve(api, s, G);
    ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_RANGE), 1);
    CK_GRANULES(s, 1, 0);
    CK_OK(api, api->release(s, h)); /* guarded */
    CK_OK(api, tu_emu(api)->capture_end(dev, n));
    CK_OK(api, api->graph_retire(dev, id));
    CK_GRANULES(s, 1, 1);
    tu_detach(api, dev, s, n);
    CK_OK(api, api->device_close(dev));
    return;
  }
  CK_STATUS(api, api->reserve(s, G, HIPPO_MODE_AUTO, &h),
            HIPPO_GRAPH_NEEDS_PAGE);
  ck_assert_msg(strstr(api->last_error(), "captures a graph"), "%s",
                api->last_error());
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_RANGE), 0);
  ck_assert_uint_eq(tu_usage(api, dev, s).bytes_virtual, 0);
  ck_assert_uint_eq(tu_counters(api, dev).ranges_held, 0);
  CK_GRANULES(s, 0, 0);
  CK_OK(api, tu_emu(api)->capture_end(dev, n));
  h = tu_reserve(api, s, G);
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_RANGE), 1);
  ck_assert_uint_eq(tu_usage(api, dev, s).bytes_virtual, 256 * G);
  CK_GRANULES(s, 1, 0);
  CK_OK(api, api->release(s, h));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* While stream B captures, stream A's reservation fails part-way through
 * its maps: nothing is unmapped (hipMemUnmap synchronizes the device),
 * neither a run this call mapped before the failure nor granules of the
 * failing run; they stay mapped and idle until a cleanup after the
 * capture.  Two runs (granule 1 mapped between them), then one run of
 * four, which goes one granule a call. */
START_TEST(test_capture_elsewhere_unmaps_nothing) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_virtual(api, tu_backends[_i], 4096 * G, 64 * G, 0);
  void *n, *nb;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_stream *sb = tu_attach(api, dev, &nb);
  hippo_handle h = 0, hb = tu_reserve(api, sb, 10 * U); /* B's own range */
  uint64_t id = 0, base = idle_between_holes(api, dev, s), maps0, unmaps0;
  hippo_status st;
  CK_OK(api, tu_emu(api)->capture_begin(dev, nb, &id));
  maps0 = calls(api, dev, HIPPO_CALL_VM_MAP);
  unmaps0 = calls(api, dev, HIPPO_CALL_VM_UNMAP);
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_VM_MAP, 2,
                                       HIPPO_OUT_OF_MEMORY));
  st = api->reserve(s, 3 * G, HIPPO_MODE_AUTO, &h); /* maps 0, then 2 */
  ck_assert_msg(st == HIPPO_OUT_OF_MEMORY, "reserve answered %s: %s",
                api->status_name(st), api->last_error());
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_MAP) - maps0, 2);
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_UNMAP) - unmaps0, 0);
  CK_GRANULES(s, 2, 2); /* 0 (this call's) and 1, idle */
  CK_STATUS(api, api->cleanup(dev, NULL), HIPPO_GRAPH_RECORDING);
  CK_GRANULES(s, 2, 2);
  CK_OK(api, tu_emu(api)->capture_end(dev, nb));
  CK_OK(api, api->cleanup(dev, NULL));
  CK_GRANULES(s, 0, 0);
  /* one run of four granules, the third refused */
  CK_OK(api, tu_emu(api)->capture_begin(dev, nb, &id));
  maps0 = calls(api, dev, HIPPO_CALL_VM_MAP);
  unmaps0 = calls(api, dev, HIPPO_CALL_VM_UNMAP);
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_VM_MAP, 3,
                                       HIPPO_OUT_OF_MEMORY));
  CK_STATUS(api, api->reserve(s, 4 * G, HIPPO_MODE_AUTO, &h),
            HIPPO_OUT_OF_MEMORY);
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_VM_MAP, 0,
                                       HIPPO_SUCCESS));
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_MAP) - maps0, 3);
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_UNMAP) - unmaps0, 0);
  CK_GRANULES(s, 2, 2); /* granules 0 and 1 mapped before the fault */
  h = tu_reserve(api, s, 4 * G); /* maps 2 and 3 only */
  ck_assert_uint_eq(tu_addr(api, s, h), base);
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_MAP) - maps0, 5);
  CK_GRANULES(s, 4, 0);
  CK_OK(api, tu_emu(api)->capture_end(dev, nb));
  CK_OK(api, api->release(s, h));
  CK_OK(api, api->release(sb, hb));
  tu_detach(api, dev, s, n);
  tu_detach(api, dev, sb, nb);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* A capturing stream maps nothing, but a reservation that fits in mapped
 * free room takes it even where its best fit lies over an unmapped
 * granule: [0, 4G) is mapped and free, the best fit for G (a slice of
 * 2G - 10U at 4G + 10U) touches granule 5, given back. */
START_TEST(test_capture_takes_mapped_room) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_virtual(api, tu_backends[_i], 4096 * G, 64 * G,
                                   64 * G);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle a, b, c, d, h = 0, big = 0;
  uint64_t id = 0, base, maps0;
  a = tu_reserve(api, s, 4 * G);          /* granules 0..3 */
  b = tu_reserve(api, s, 10 * U);         /* granule 4 */
  c = tu_reserve(api, s, 2 * G - 10 * U); /* granules 4, 5 */
  d = tu_reserve(api, s, 10 * U);         /* granule 6 */
  base = tu_addr(api, s, a);
  ck_assert_uint_eq(tu_addr(api, s, c), base + 4 * G + 10 * U);
  CK_OK(api, api->release(s, c));
  CK_OK(api, api->cleanup(dev, NULL)); /* granule 5 goes */
  CK_OK(api, api->release(s, a));      /* 0..3 idle */
  CK_GRANULES(s, 6, 4);
  maps0 = calls(api, dev, HIPPO_CALL_VM_MAP);
  CK_OK(api, tu_emu(api)->capture_begin(dev, n, &id));
  h = tu_reserve(api, s, G);
  if (tu_info(api, dev).capture_maps) {
    /* CUDA: the best fit maps granule 5 in the capture */
    ck_assert_uint_eq(tu_addr(api, s, h), base + 4 * G + 10 * U);
    ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_MAP), maps0 + 1);
    CK_OK(api, api->release(s, h));
    CK_OK(api, tu_emu(api)->capture_end(dev, n));
    CK_OK(api, api->graph_retire(dev, id));
    CK_OK(api, api->release(s, b));
    CK_OK(api, api->release(s, d));
    tu_detach(api, dev, s, n);
    CK_OK(api, api->device_close(dev));
    return;
  }
  ck_assert_uint_eq(tu_addr(api, s, h), base);
  ck_assert_uint_eq(calls(api, dev, HIPPO_CALL_VM_MAP), maps0);
  CK_GRANULES(s, 6, 3);
  /* no mapped room for 4G: refused, nothing changed */
  CK_STATUS(api, api->reserve(s, 4 * G, HIPPO_MODE_AUTO, &big),
            HIPPO_GRAPH_NEEDS_PAGE);
  CK_GRANULES(s, 6, 3);
  CK_OK(api, api->release(s, h)); /* guarded for the graph */
  CK_OK(api, tu_emu(api)->capture_end(dev, n));
  CK_OK(api, api->graph_retire(dev, id));
  CK_GRANULES(s, 6, 4);
  CK_OK(api, api->release(s, b));
  CK_OK(api, api->release(s, d));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* The bytes the memfds behind HOST's ranges hold (their allocated
 * blocks), over every such file the process has open. */
static uint64_t memfd_bytes(void) {
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  uint64_t total = 0;
  ck_assert_ptr_nonnull(d);
  while ((e = readdir(d)) != NULL) {
    char path[300], target[256];
    ssize_t n;
    struct stat st;
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    n = readlink(path, target, sizeof target - 1);
    if (n <= 0)
      continue;
    target[n] = '\0';
    if (!strstr(target, "memfd:hippo-range"))
      continue;
    if (stat(path, &st) == 0)
      total += (uint64_t)st.st_blocks * 512;
  }
  closedir(d);
  return total;
}

/* HOST: memory really returns.  After cleanup the bytes the memfds hold
 * are within one granule per stream of the mapped figure (pages of the
 * granules written: all of them here), and go to zero with the granules. */
START_TEST(test_host_memory_returns) {
  const hippo_api *api = tu_api();
  hippo_device *dev;
  hippo_stream *s[2];
  void *n[2];
  hippo_handle h[2][8];
  uint64_t mapped, held;
  if (!tu_host_only("HOST's memfds are looked at"))
    return;
  dev = open_virtual(api, HIPPO_BACKEND_HOST, 4096 * G, 512 * G, 0);
  for (int k = 0; k < 2; k++) {
    s[k] = tu_attach(api, dev, &n[k]);
    for (int i = 0; i < 8; i++) {
      void *p;
      h[k][i] = tu_reserve(api, s[k], 2 * G);
      CK_OK(api, api->resolve(s[k], h[k][i], &p, NULL));
      tu_fill(api, dev, p, 2 * G, (uint64_t)(k * 8 + i));
    }
  }
  ck_assert_uint_eq(memfd_bytes(), 32 * G);
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < 8; i += 2)
      CK_OK(api, api->release(s[k], h[k][i]));
  ck_assert_uint_eq(memfd_bytes(), 32 * G); /* idle: still held */
  CK_OK(api, api->cleanup(dev, NULL));
  mapped = tu_counters(api, dev).bytes_mapped;
  held = memfd_bytes();
  ck_assert_uint_eq(mapped, 16 * G);
  ck_assert_msg(held <= mapped + 2 * G && held + 2 * G >= mapped,
                "the memfds hold %" PRIu64 " B, %" PRIu64 " B are mapped",
                held, mapped);
  for (int k = 0; k < 2; k++) {
    for (int i = 1; i < 8; i += 2)
      CK_OK(api, api->release(s[k], h[k][i]));
    tu_detach(api, dev, s[k], n[k]);
  }
  ck_assert_uint_eq(memfd_bytes(), 0);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* pools_install over a VIRTUAL pool whose granules all went back: its
 * range goes back too and its slice records pass to the pool that takes
 * its index (a SLICED one here, then VIRTUAL again) with every record
 * unused, so the check walk holds and the old handles stay stale. */
START_TEST(test_install_over_virtual) {
  const hippo_api *api = tu_api();
  hippo_device *dev =
      open_virtual(api, tu_backends[_i], 4096 * G, 1024 * G, 0);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle a = tu_reserve(api, s, 100 * U), b;
  tu_layout sl, vl;
  hippo_pool_options *o;
  CK_OK(api, api->release(s, a));
  CK_OK(api, api->cleanup(dev, s));
  CK_GRANULES(s, 0, 0);
  ck_assert_uint_eq(tu_counters(api, dev).ranges_held, 1);
  tu_layout_sliced(&sl, 16 * G, 16 * G);
  CK_OK(api, api->pools_install(dev, &sl.layout, NULL));
  CK_CHECK(api, dev);
  ck_assert_uint_eq(tu_counters(api, dev).ranges_held, 0);
  ck_assert_uint_eq(tu_counters(api, dev).bytes_virtual, 0);
  ck_assert_uint_eq(tu_usage(api, dev, s).bytes_virtual, 0);
  CK_NOT_LIVE(api, s, NULL, a);
  b = tu_reserve(api, s, 100 * U);
  ck_assert_uint_ne(b, a);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, b));
  tu_layout_init(&vl);
  o = tu_layout_add(&vl, HIPPO_POOL_VIRTUAL);
  o->range_size = 1024 * G;
  o->granule = G;
  CK_OK(api, api->pools_install(dev, &vl.layout, NULL));
  CK_CHECK(api, dev);
  a = tu_reserve(api, s, 100 * U);
  ck_assert_uint_ne(a, b);
  CK_NOT_LIVE(api, s, NULL, b);
  CK_GRANULES(s, 2, 0);
  CK_OK(api, api->release(s, a));
  tu_detach(api, dev, s, n);
  ck_assert_uint_eq(tu_counters(api, dev).ranges_held, 0);
  ck_assert_uint_eq(tu_counters(api, dev).granules_mapped, 0);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* Layout validation of VIRTUAL options (HIPPO_POOL_CONFIG naming the
 * field), and the options in force. */
static void expect_config_at(const hippo_api *api, uint64_t range,
                             uint64_t granule, uint64_t slice, uint64_t page,
                             uint64_t period, const char *field, int line) {
  tu_layout l;
  hippo_pool_options *o;
  hippo_device_desc d;
  tu_layout_init(&l);
  o = tu_layout_add(&l, HIPPO_POOL_VIRTUAL);
  o->range_size = range;
  o->granule = granule;
  o->max_slice_size = slice;
  o->page_size = page;
  o->dealloc_period = period;
  TU_SIZED(d);
  d.backend = HIPPO_BACKEND_DRY;
  d.capacity = 64 * MiB;
  d.layout = &l.layout;
  tu_config_refused_at(api, &d, field, line);
}
#define CK_CONFIG(range, granule, slice, page, period, field)              \
  expect_config_at(api, (range), (granule), (slice), (page), (period),        \
                   (field), __LINE__)

START_TEST(test_options) {
  const hippo_api *api = tu_api();
  hippo_device *dev;
  void *n;
  hippo_stream *s;
  hippo_pool_options o;
  hippo_device_info info;
  tu_layout l;
  CK_CONFIG(0, 3 * G, 0, 0, 0, "granule");       /* not a power of 2 */
  CK_CONFIG(0, 1024, 0, 0, 0, "granule");        /* below 4 KiB */
  CK_CONFIG(G * 3 + 4096, G, 0, 0, 0, "range_size");
  CK_CONFIG(4 * G, G, 5 * G, 0, 0, "max_slice_size");
  CK_CONFIG(0, 0, 0, MiB, 0, "page_size");
  CK_CONFIG(0, 0, 0, 0, 100, "dealloc_period");
  CK_CONFIG(TU_TiB, G, 0, 0, 0, "range_size"); /* too many granules */
  /* a range of granules for a SLICED pool is refused too */
  {
    tu_layout bad;
    hippo_device_desc d;
    hippo_device *none = NULL;
    tu_layout_sliced(&bad, MiB, MiB);
    bad.pools[0].granule = G;
    TU_SIZED(d);
    d.backend = HIPPO_BACKEND_DRY;
    d.layout = &bad.layout;
    CK_STATUS(api, api->device_open(&d, &none), HIPPO_POOL_CONFIG);
    CK_ERROR_HAS(api, "granule");
  }
  /* defaults resolved: the granule the driver's (4 KiB on HOST and DRY,
   * $FAKE_GPU_VM_GRANULARITY on the stand-ins) but at least 2 MiB, the
   * range the device's memory */
  dev = open_virtual(api, tu_backends[_i], 100 * MiB, 0, 0);
  s = tu_attach(api, dev, &n);
  info = tu_info(api, dev);
  {
    const char *b = getenv("HIPPO_TEST_BACKEND");
    const char *fake = getenv("FAKE_GPU_VM_GRANULARITY");
    bool hip = b && strcmp(b, "hip") == 0 &&
               tu_backends[_i] == HIPPO_BACKEND_HOST; /* HOST runs as HIP */
    if (hip && !fake) /* a real GPU: the driver's own, a power of 2 */
      ck_assert(info.vm_granularity >= 4096 &&
                (info.vm_granularity & (info.vm_granularity - 1)) == 0);
    else
      ck_assert_uint_eq(info.vm_granularity,
                        hip ? strtoull(fake, NULL, 0) : 4096);
  }
  o = tu_options(api, s, 1);
  ck_assert_uint_eq(o.kind, HIPPO_POOL_VIRTUAL);
  ck_assert_uint_eq(o.granule, G); /* as asked */
  ck_assert_uint_eq(o.range_size, 100 * MiB);
  ck_assert_uint_eq(o.max_slice_size, 100 * MiB);
  ck_assert_uint_eq(o.dealloc_period, 0);
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
  /* the VIRTUAL preset */
  dev = tu_open(api, tu_backends[_i], 100 * MiB,
                tu_layout_preset(&l, HIPPO_PRESET_VIRTUAL));
  s = tu_attach(api, dev, &n);
  info = tu_info(api, dev);
  ck_assert_uint_eq(info.preset, HIPPO_PRESET_VIRTUAL);
  ck_assert_uint_eq(info.pool_count, 1);
  ck_assert_str_eq(info.note, "");
  o = tu_options(api, s, 1);
  ck_assert_uint_eq(o.kind, HIPPO_POOL_VIRTUAL);
  ck_assert_uint_eq(o.granule, 2 * MiB);
  ck_assert_uint_eq(o.range_size, 100 * MiB);
  ck_assert_uint_eq(o.unmap_threshold, UINT64_MAX); /* the default: never */
  ck_assert_uint_eq(o.map_budget, 150); /* the default, in force */
  {
    hippo_handle h = tu_reserve(api, s, 5 * MiB); /* 3 granules of 2 MiB */
    ck_assert_uint_eq(tu_usage(api, dev, s).bytes_reserved, 6 * MiB);
    CK_OK(api, api->release(s, h));
  }
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* A range full: the next reservation spills to a later pool, or (none)
 * HIPPO_POOL_CAPACITY_EXCEEDED; the device full: HIPPO_OUT_OF_MEMORY after
 * the ladder gave idle granules back, with which the retry succeeds. */
START_TEST(test_range_and_device_full) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_pool_options *o;
  hippo_device *dev;
  void *n;
  hippo_stream *s;
  hippo_handle a, b, c;
  tu_layout_init(&l);
  o = tu_layout_add(&l, HIPPO_POOL_VIRTUAL);
  o->range_size = 8 * G;
  o->granule = G;
  o->unmap_threshold = UINT64_MAX; /* only cleanup and the ladder unmap */
  dev = tu_open(api, tu_backends[_i], 10 * G, &l.layout);
  s = tu_attach(api, dev, &n);
  a = tu_reserve(api, s, 6 * G);
  CK_STATUS(api, api->reserve(s, 3 * G, HIPPO_MODE_AUTO, &b),
            HIPPO_POOL_CAPACITY_EXCEEDED);
  CK_ERROR_HAS(api, "VIRTUAL pool");
  CK_OK(api, api->release(s, a));
  CK_GRANULES(s, 6, 6);
  ck_assert_uint_eq(need_of(api, s), HIPPO_NEED_NOTHING); /* never */
  /* a's 6 granules were an allocation of 4 (at most half the budget's
   * floor of 8 granules) and one of 2 */
  ck_assert_uint_eq(tu_counters(api, dev).granules_mapped, 2);
  b = tu_reserve(api, s, 2 * G); /* granules 0, 1 reused */
  CK_GRANULES(s, 6, 4);
  CK_CHECK(api, dev);
  {
    /* another stream needs 7 G of a device of 10 G, 6 G of which s
     * holds: out of memory, then s's idle granules ... are not s2's to
     * give: the ladder gives back only the stream's own, so it fails;
     * s's cleanup gives back the allocation b does not touch (2 G) */
    void *n2;
    hippo_stream *s2 = tu_attach(api, dev, &n2);
    CK_STATUS(api, api->reserve(s2, 7 * G, HIPPO_MODE_AUTO, &c),
              HIPPO_OUT_OF_MEMORY);
    CK_OK(api, api->cleanup(dev, s));
    CK_GRANULES(s, 4, 2);
    c = tu_reserve(api, s2, 6 * G);
    CK_GRANULES(s2, 6, 0);
    CK_OK(api, api->release(s2, c));
    tu_detach(api, dev, s2, n2);
  }
  /* s's own reservation takes its idle granules and maps the rest */
  CK_OK(api, api->release(s, b));
  c = tu_reserve(api, s, 8 * G);
  CK_GRANULES(s, 8, 0);
  CK_OK(api, api->release(s, c));
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

static Suite *virtual_suite(void) {
  Suite *s = suite_create("virtual");
  TCase *tc = tcase_create("granules");
  tcase_add_loop_test(tc, test_granules_exact, 0, TU_N_BACKENDS);
  tcase_add_test(tc, test_bytes_stay);
  tcase_add_loop_test(tc, test_options, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_install_over_virtual, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_range_and_device_full, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_full_range_finds_fit, 0, TU_N_BACKENDS);
  suite_add_tcase(s, tc);
  tc = tcase_create("faults");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_faults_every_call, 0, 3 * TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_failed_map_keeps_idle, 0, TU_N_BACKENDS);
  suite_add_tcase(s, tc);
  tc = tcase_create("captures");
  tcase_add_loop_test(tc, test_capture_guard, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_capture_reserves_no_range, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_capture_elsewhere_unmaps_nothing, 0,
                      TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_capture_takes_mapped_room, 0, TU_N_BACKENDS);
  tcase_add_test(tc, test_host_memory_returns);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  /* G from the device the suite runs on: valid on DRY too, whose
   * granularity is 4 KiB */
  uint64_t g = tu_vm_granularity(tu_api());
  if (g > G)
    G = g;
  U = G / 64;
  return tu_run(virtual_suite());
}
