/* test-device.c -- devices, streams and reservations through the ABI, on
 * HOST and DRY devices: handles, data, capacity, fault injection, exact
 * usage figures, persistent windows, install, routing, the capture guard.
 * After every step that changes state the device's check must pass. */
#include <config.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static const hippo_backend backends[] = {HIPPO_BACKEND_HOST,
                                         HIPPO_BACKEND_DRY};
#define N_BACKENDS 2

/* A stream plus its emulated native stream. */
typedef struct stream_pair {
  hippo_stream *s;
  void *native;
} stream_pair;

static stream_pair attach(const hippo_api *api, hippo_device *dev) {
  stream_pair p;
  p.s = tu_attach(api, dev, &p.native);
  return p;
}

/* Failures name the caller's line. */
#define detach(api, dev, p) tu_detach((api), (dev), (p).s, (p).native)

/* One custom SLICED pool: page 1 MiB, slices up to 256 KiB. */
static hippo_layout *layout_1m(tu_layout *l) {
  return tu_layout_sliced(l, TU_MiB, 256 * TU_KiB);
}

/* A 64 MiB device of `backend` with layout_1m (the device keeps a copy). */
static hippo_device *open_1m(const hippo_api *api, hippo_backend backend) {
  tu_layout l;
  return tu_open(api, backend, 64 * TU_MiB, layout_1m(&l));
}

/* Detaches the streams `p[0..n)` in order, then closes `dev`; failures name
 * the caller's line. */
static void close_at(const hippo_api *api, hippo_device *dev,
                     const stream_pair *p, size_t n, int line) {
  for (size_t i = 0; i < n; i++)
    tu_detach_at(api, dev, p[i].s, p[i].native, __FILE__, line);
  CK_OK_AT(api, api->device_close(dev), __FILE__, line);
}
/* CLOSE(api, dev, a[, b...]): detach(a), detach(b)..., device_close(dev). */
#define CLOSE(api, dev, ...)                                                   \
  close_at((api), (dev), (const stream_pair[]){__VA_ARGS__},                  \
           sizeof((const stream_pair[]){__VA_ARGS__}) / sizeof(stream_pair),   \
           __LINE__)

/* ---- handles --------------------------------------------------------------- */

/* `h` is not a live handle of `s`: resolve and release refuse it and write
 * nothing. */
static void expect_invalid_at(const hippo_api *api, hippo_stream *s,
                              hippo_handle h, int line) {
  void *sentinel = (void *)&sentinel;
  void *ptr = sentinel;
  uint64_t size = 0xdeadbeef;
  hippo_status st = api->resolve(s, h, &ptr, &size);
  ck_assert_msg(st == HIPPO_INVALID_HANDLE,
                "line %d: resolve(%#llx) gave %s: %s", line,
                (unsigned long long)h, api->status_name(st),
                api->last_error());
  ck_assert_msg(ptr == sentinel && size == 0xdeadbeef,
                "line %d: a refused resolve wrote its outputs", line);
  CK_ERROR_HAS(api, "handle");
  st = api->release(s, h);
  ck_assert_msg(st == HIPPO_INVALID_HANDLE,
                "line %d: release(%#llx) gave %s: %s", line,
                (unsigned long long)h, api->status_name(st),
                api->last_error());
}
#define EXPECT_INVALID(api, s, h) expect_invalid_at((api), (s), (h), __LINE__)

START_TEST(test_handles_invalid) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_1m(api, backends[_i]);
  hippo_device *dev2 = open_1m(api, backends[_i]);
  stream_pair a = attach(api, dev), b = attach(api, dev);
  stream_pair o = attach(api, dev2);
  hippo_handle ha, hb, ho, hz, h1, h2;
  uint64_t addr_a, addr_b, addr_o, addr2;
  hippo_usage before, before_a, after, after_a;
  void *ptr = NULL;
  uint64_t size = 1;

  ha = tu_reserve(api, a.s, 1000);
  hb = tu_reserve(api, b.s, 1000);
  ho = tu_reserve(api, o.s, 1000);
  hz = tu_reserve(api, a.s, 0);
  CK_CHECK(api, dev);
  CK_CHECK(api, dev2);
  addr_a = tu_addr(api, a.s, ha);
  addr_b = tu_addr(api, b.s, hb);
  addr_o = tu_addr(api, o.s, ho);
  /* a zero-size reservation holds no memory */
  ptr = (void *)&ptr;
  CK_OK(api, api->resolve(a.s, hz, &ptr, &size));
  ck_assert_ptr_null(ptr);
  ck_assert_uint_eq(size, 0);

  /* released, and stale after its slot was reused */
  h1 = tu_reserve(api, a.s, 2048);
  CK_OK(api, api->release(a.s, h1));
  CK_CHECK(api, dev);
  EXPECT_INVALID(api, a.s, h1);
  h2 = tu_reserve(api, a.s, 2048);
  CK_CHECK(api, dev);
  ck_assert_uint_ne(h1, h2);
  addr2 = tu_addr(api, a.s, h2);
  EXPECT_INVALID(api, a.s, h1);
  ck_assert_uint_eq(tu_addr(api, a.s, h2), addr2);

  before = tu_usage(api, dev, NULL);
  before_a = tu_usage(api, dev, a.s);
  EXPECT_INVALID(api, a.s, 0);
  /* forged: generation bits, index bits, tag bits, everything */
  {
    const hippo_handle forged[] = {
        ha ^ (UINT64_C(1) << 28), ha ^ (UINT64_C(1) << 40),
        ha ^ (UINT64_C(1) << 51), ha ^ (UINT64_C(1) << 27),
        ha ^ (UINT64_C(1) << 20), ha ^ (UINT64_C(1) << 52),
        ha ^ (UINT64_C(1) << 63), ha ^ (UINT64_C(0xfff) << 52),
        ~ha,                      UINT64_MAX,
        h2 ^ (UINT64_C(1) << 29), (UINT64_C(1) << 28),
        /* the pool field (bits 46..51): the persistent pool, a pool the
         * stream lacks, the handle table, and a table handle made a pool's */
        ha ^ (UINT64_C(1) << 46), ha ^ (UINT64_C(1) << 47),
        ha ^ (UINT64_C(1) << 51), ha | (UINT64_C(0x3f) << 46),
        hz & ~(UINT64_C(0x3e) << 46), hz ^ (UINT64_C(1) << 46)};
    for (size_t i = 0; i < sizeof forged / sizeof forged[0]; i++)
      EXPECT_INVALID(api, a.s, forged[i]);
  }
  /* another stream's handle on the same device, another device's handle */
  EXPECT_INVALID(api, a.s, hb);
  EXPECT_INVALID(api, b.s, ha);
  EXPECT_INVALID(api, a.s, ho);
  EXPECT_INVALID(api, o.s, ha);
  /* nothing changed */
  after = tu_usage(api, dev, NULL);
  after_a = tu_usage(api, dev, a.s);
  CK_USAGE_EQ(before, after);
  CK_USAGE_EQ(before_a, after_a);
  CK_CHECK(api, dev);
  CK_CHECK(api, dev2);
  ck_assert_uint_eq(tu_addr(api, a.s, ha), addr_a);
  ck_assert_uint_eq(tu_addr(api, b.s, hb), addr_b);
  ck_assert_uint_eq(tu_addr(api, o.s, ho), addr_o);

  CK_OK(api, api->release(a.s, ha));
  CK_OK(api, api->release(a.s, hz));
  EXPECT_INVALID(api, a.s, hz);
  CK_OK(api, api->release(a.s, h2));
  CK_OK(api, api->release(b.s, hb));
  CK_OK(api, api->release(o.s, ho));
  CK_CHECK(api, dev);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).allocations, 0);
  CLOSE(api, dev, a, b);
  CLOSE(api, dev2, o);
}
END_TEST

/* ---- data on a HOST device ---------------------------------------------------- */

static uint64_t lcg(uint64_t *state) {
  *state = *state * UINT64_C(6364136223846793005) + 1442695040888963407u;
  return *state >> 33;
}

START_TEST(test_host_data) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev = tu_open(api, HIPPO_BACKEND_HOST, 256 * TU_MiB,
                              layout_1m(&l));
  stream_pair a = attach(api, dev);
  enum { KEEP = 32, TEMP = 16, CYCLES = 1500 };
  hippo_handle keep[KEEP], temp[TEMP] = {0};
  uint64_t keep_size[KEEP], temp_size[TEMP] = {0};
  void *keep_ptr[KEEP];
  uint64_t rng = 42;

  for (int i = 0; i < KEEP; i++) {
    uint64_t size;
    keep_size[i] = 1 + lcg(&rng) % (256 * TU_KiB);
    keep[i] = tu_reserve(api, a.s, keep_size[i]);
    CK_OK(api, api->resolve(a.s, keep[i], &keep_ptr[i], &size));
    ck_assert_uint_eq(size, keep_size[i]);
    tu_fill(api, dev, keep_ptr[i], keep_size[i], (uint64_t)i);
    TU_VERIFY(api, dev, keep_ptr[i], keep_size[i], (uint64_t)i);
  }
  CK_CHECK(api, dev);
  for (int c = 0; c < CYCLES; c++) {
    unsigned t = (unsigned)(lcg(&rng) % TEMP);
    void *p;
    if (temp[t]) {
      CK_OK(api, api->resolve(a.s, temp[t], &p, NULL));
      TU_VERIFY(api, dev, p, temp_size[t], 1000u + t);
      CK_OK(api, api->release(a.s, temp[t]));
      temp[t] = 0;
    } else {
      temp_size[t] = lcg(&rng) % (64 * TU_KiB);
      temp[t] = tu_reserve(api, a.s, temp_size[t]);
      CK_OK(api, api->resolve(a.s, temp[t], &p, NULL));
      if (temp_size[t])
        tu_fill(api, dev, p, temp_size[t], 1000u + t);
    }
    if (c % 50 == 0)
      CK_CHECK(api, dev);
  }
  CK_CHECK(api, dev);
  for (int i = 0; i < KEEP; i++) {
    void *p;
    CK_OK(api, api->resolve(a.s, keep[i], &p, NULL));
    ck_assert_ptr_eq(p, keep_ptr[i]);
    TU_VERIFY(api, dev, p, keep_size[i], (uint64_t)i);
  }
  for (int t = 0; t < TEMP; t++)
    if (temp[t])
      CK_OK(api, api->release(a.s, temp[t]));
  for (int i = 0; i < KEEP; i++)
    CK_OK(api, api->release(a.s, keep[i]));
  CK_CHECK(api, dev);
  {
    hippo_usage u = tu_usage(api, dev, a.s);
    ck_assert_uint_eq(u.allocations, 0);
    ck_assert_uint_eq(u.bytes_in_use, 0);
    ck_assert_uint_eq(u.bytes_padding, 0);
  }
  CLOSE(api, dev, a);
}
END_TEST

/* ---- capacity ------------------------------------------------------------------- */

START_TEST(test_capacity_exhaustion) {
  const hippo_api *api = tu_api();
  tu_layout l;
  const uint64_t cap = 64 * TU_MiB, page = 4 * TU_MiB, size = TU_MiB;
  enum { N = 64 };
  hippo_device *dev = tu_open(api, HIPPO_BACKEND_HOST, cap,
                              tu_layout_sliced(&l, page, TU_MiB));
  stream_pair a = attach(api, dev);
  hippo_handle h[N];
  void *ptr[N];
  hippo_handle extra = 0;
  hippo_usage before, after;
  char text[64];

  for (int i = 0; i < N; i++) {
    h[i] = tu_reserve(api, a.s, size);
    CK_OK(api, api->resolve(a.s, h[i], &ptr[i], NULL));
    tu_fill(api, dev, ptr[i], size, (uint64_t)i);
  }
  CK_CHECK(api, dev);
  before = tu_usage(api, dev, a.s);
  ck_assert_uint_eq(before.bytes_reserved, cap);
  ck_assert_uint_eq(before.pages, N / 4);
  /* the device is full: one more page does not fit */
  CK_STATUS(api, api->reserve(a.s, size, HIPPO_MODE_AUTO, &extra),
            HIPPO_OUT_OF_MEMORY);
  ck_assert_uint_eq(extra, 0);
  snprintf(text, sizeof text, "%llu", (unsigned long long)page);
  CK_ERROR_HAS(api, text);
  snprintf(text, sizeof text, "%llu", (unsigned long long)cap);
  CK_ERROR_HAS(api, text);
  CK_STATUS(api, api->reserve(a.s, 256, HIPPO_MODE_AUTO, &extra),
            HIPPO_OUT_OF_MEMORY);
  after = tu_usage(api, dev, a.s);
  CK_USAGE_EQ(before, after);
  CK_CHECK(api, dev);
  for (int i = 0; i < N; i++) {
    void *p;
    CK_OK(api, api->resolve(a.s, h[i], &p, NULL));
    ck_assert_ptr_eq(p, ptr[i]);
    TU_VERIFY(api, dev, p, size, (uint64_t)i);
  }
  /* a released slice is served again, without a new page */
  CK_OK(api, api->release(a.s, h[17]));
  h[17] = tu_reserve(api, a.s, size);
  ck_assert_uint_eq(tu_addr(api, a.s, h[17]), (uint64_t)(uintptr_t)ptr[17]);
  CK_CHECK(api, dev);
  for (int i = 0; i < N; i++)
    CK_OK(api, api->release(a.s, h[i]));
  CK_OK(api, api->cleanup(dev, NULL));
  CK_CHECK(api, dev);
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 0);
  CLOSE(api, dev, a);
}
END_TEST

/* ---- fault injection --------------------------------------------------------- */

/* The 2nd page allocation fails with OUT_OF_MEMORY: the manager cleans up
 * (nothing is empty) and retries once (the 3rd call), which succeeds. */
START_TEST(test_fault_alloc_oom_retried) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_1m(api, backends[_i]);
  stream_pair a = attach(api, dev);
  hippo_handle h[5];
  hippo_emu_counters c;
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_ALLOC, 2,
                                   HIPPO_OUT_OF_MEMORY));
  for (int i = 0; i < 4; i++) /* four slices of 256 KiB fill page 1 */
    h[i] = tu_reserve(api, a.s, 256 * TU_KiB);
  c = tu_counters(api, dev);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_ALLOC], 1);
  h[4] = tu_reserve(api, a.s, 256 * TU_KiB);
  c = tu_counters(api, dev);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_ALLOC], 3);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_FREE], 0);
  ck_assert_uint_eq(c.pages_held, 2);
  ck_assert_uint_eq(tu_usage(api, dev, a.s).pages, 2);
  CK_CHECK(api, dev);
  for (int i = 0; i < 5; i++)
    CK_OK(api, api->release(a.s, h[i]));
  CK_CHECK(api, dev);
  CLOSE(api, dev, a);
}
END_TEST

/* A real OUT_OF_MEMORY where an empty page of another pool is what the
 * device lacks: the manager gives it back and the retry succeeds. */
START_TEST(test_oom_retry_after_cleanup) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  stream_pair a;
  hippo_handle small, big, keep;
  hippo_emu_counters c0, c1;
  hippo_usage u;
  tu_layout_init(&l);
  tu_layout_add_sliced(&l, TU_MiB, 64 * TU_KiB, 0);
  tu_layout_add_sliced(&l, 2 * TU_MiB, TU_MiB, 0);
  dev = tu_open(api, backends[_i], 2 * TU_MiB + 512 * TU_KiB, &l.layout);
  a = attach(api, dev);
  small = tu_reserve(api, a.s, 64 * TU_KiB);
  CK_OK(api, api->release(a.s, small)); /* pool 1's page is now empty */
  CK_CHECK(api, dev);
  c0 = tu_counters(api, dev);
  ck_assert_uint_eq(c0.pages_held, 1);
  big = tu_reserve(api, a.s, 512 * TU_KiB);
  CK_CHECK(api, dev);
  c1 = tu_counters(api, dev);
  ck_assert_uint_eq(c1.calls[HIPPO_CALL_ALLOC], c0.calls[HIPPO_CALL_ALLOC] + 2);
  ck_assert_uint_eq(c1.calls[HIPPO_CALL_FREE], c0.calls[HIPPO_CALL_FREE] + 1);
  ck_assert_uint_eq(c1.pages_held, 1);
  ck_assert_uint_eq(c1.bytes_held, 2 * TU_MiB);
  u = tu_usage(api, dev, a.s);
  ck_assert_uint_eq(u.pages, 1);
  ck_assert_uint_eq(u.bytes_reserved, 2 * TU_MiB);
  ck_assert_uint_eq(tu_report(api, a.s, 2).allocations, 1);
  /* with a live slice in pool 1, nothing can be given back: OOM */
  CK_OK(api, api->release(a.s, big));
  keep = tu_reserve(api, a.s, 64 * TU_KiB); /* pool 1 takes a page again */
  CK_CHECK(api, dev);
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 1); /* pool 2's went */
  {
    hippo_handle h3 = 0;
    hippo_usage before, after;
    before = tu_usage(api, dev, a.s);
    c0 = tu_counters(api, dev);
    CK_STATUS(api, api->reserve(a.s, 512 * TU_KiB, HIPPO_MODE_AUTO, &h3),
              HIPPO_OUT_OF_MEMORY);
    ck_assert_uint_eq(h3, 0);
    c1 = tu_counters(api, dev);
    /* one page request: nothing to give back, and the emulated device
     * has less free than the page it refused, so no retry (on a GPU the
     * runtime is asked again) */
    ck_assert_uint_eq(c1.calls[HIPPO_CALL_ALLOC],
                      c0.calls[HIPPO_CALL_ALLOC] +
                          (tu_backend() == HIPPO_BACKEND_HIP &&
                                   backends[_i] == HIPPO_BACKEND_HOST
                               ? 2
                               : 1));
    ck_assert_uint_eq(c1.calls[HIPPO_CALL_FREE], c0.calls[HIPPO_CALL_FREE]);
    after = tu_usage(api, dev, a.s);
    CK_USAGE_EQ(before, after);
    CK_CHECK(api, dev);
  }
  CK_OK(api, api->release(a.s, keep));
  CK_CHECK(api, dev);
  CLOSE(api, dev, a);
}
END_TEST

START_TEST(test_fault_alloc_backend_error) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_1m(api, HIPPO_BACKEND_HOST);
  stream_pair a = attach(api, dev);
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
  CLOSE(api, dev, a);
}
END_TEST

START_TEST(test_fault_free) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_1m(api, backends[_i]);
  stream_pair a = attach(api, dev), b = attach(api, dev);
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
  CLOSE(api, dev, a, b);
}
END_TEST

/* ---- DRY: a footprint without the bytes ----------------------------------------- */

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
  stream_pair a = attach(api, dev);
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
  CLOSE(api, dev, a);
}
END_TEST

/* ---- exact figures ------------------------------------------------------------------- */

START_TEST(test_usage_exact) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_1m(api, backends[_i]);
  stream_pair a = attach(api, dev), b = attach(api, dev);
  hippo_handle h1000, h256, h0, h4097, h200, hb;
  uint64_t base;
  hippo_usage u;
  hippo_pool_report r;
  hippo_emu_counters c;
  void *ptr;
  uint64_t size;

  h1000 = tu_reserve(api, a.s, 1000);
  h256 = tu_reserve(api, a.s, 256);
  h0 = tu_reserve(api, a.s, 0);
  h4097 = tu_reserve(api, a.s, 4097);
  CK_CHECK(api, dev);
  base = tu_addr(api, a.s, h1000);
  ck_assert_uint_eq(base % 256, 0);
  ck_assert_uint_eq(tu_addr(api, a.s, h256) - base, 1024);
  ck_assert_uint_eq(tu_addr(api, a.s, h4097) - base, 1280);
  ptr = (void *)&ptr;
  size = 1;
  CK_OK(api, api->resolve(a.s, h0, &ptr, &size));
  ck_assert_ptr_null(ptr);
  ck_assert_uint_eq(size, 0);
  CK_OK(api, api->resolve(a.s, h4097, &ptr, &size));
  ck_assert_uint_eq(size, 4097);

  u = tu_usage(api, dev, a.s);
  ck_assert_uint_eq(u.struct_size, sizeof u);
  ck_assert_uint_eq(u.pool_count, 2);
  ck_assert_uint_eq(u.allocations, 4);
  ck_assert_uint_eq(u.bytes_in_use, 5353);
  ck_assert_uint_eq(u.bytes_padding, 24 + 0 + 0 + 255);
  ck_assert_uint_eq(u.bytes_reserved, TU_MiB);
  ck_assert_uint_eq(u.pages, 1);
  ck_assert_uint_eq(u.peak_bytes_in_use, 5353);
  ck_assert_uint_eq(u.peak_bytes_reserved, TU_MiB);

  /* The freed 256 B hole (one alignment unit, class 0/1) is the only slice
   * of the smallest class that fits 200 B: the TLSF search takes it. */
  CK_OK(api, api->release(a.s, h256));
  CK_CHECK(api, dev);
  h200 = tu_reserve(api, a.s, 200);
  CK_CHECK(api, dev);
  ck_assert_uint_eq(tu_addr(api, a.s, h200) - base, 1024);
  u = tu_usage(api, dev, a.s);
  ck_assert_uint_eq(u.allocations, 4);
  ck_assert_uint_eq(u.bytes_in_use, 1000 + 0 + 4097 + 200);
  ck_assert_uint_eq(u.bytes_padding, 24 + 0 + 255 + 56);
  ck_assert_uint_eq(u.peak_bytes_in_use, 5353);
  ck_assert_uint_eq(u.bytes_reserved, TU_MiB);
  ck_assert_uint_eq(u.peak_bytes_reserved, TU_MiB);
  ck_assert_uint_eq(u.pages, 1);

  r = tu_report(api, a.s, 1);
  ck_assert_uint_eq(r.kind, HIPPO_POOL_SLICED);
  ck_assert_uint_eq(tu_options(api, a.s, 1).page_size, TU_MiB);
  ck_assert_uint_eq(tu_options(api, a.s, 1).max_slice_size, 256 * TU_KiB);
  ck_assert_uint_eq(r.pages, 1);
  ck_assert_uint_eq(r.peak_pages, 1);
  ck_assert_uint_eq(r.allocations, 3); /* the zero-size one is in no pool */
  ck_assert_uint_eq(r.bytes_in_use, 5297);
  ck_assert_uint_eq(r.bytes_padding, 335);
  ck_assert_uint_eq(r.bytes_reserved, TU_MiB);
  ck_assert_uint_eq(r.largest_allocation, 4097);
  ck_assert_uint_eq(r.bytes_free, TU_MiB - 5632);
  ck_assert_uint_eq(r.largest_free, TU_MiB - 5632);
  r = tu_report(api, a.s, 0);
  ck_assert_uint_eq(r.kind, HIPPO_POOL_PERSISTENT);
  ck_assert_uint_eq(r.allocations, 0);
  ck_assert_uint_eq(r.bytes_reserved, 0);

  /* a second stream; the device sums both */
  hb = tu_reserve(api, b.s, 3000);
  CK_CHECK(api, dev);
  u = tu_usage(api, dev, b.s);
  ck_assert_uint_eq(u.allocations, 1);
  ck_assert_uint_eq(u.bytes_in_use, 3000);
  ck_assert_uint_eq(u.bytes_padding, 72);
  ck_assert_uint_eq(u.bytes_reserved, TU_MiB);
  u = tu_usage(api, dev, NULL);
  ck_assert_uint_eq(u.pool_count, 2);
  ck_assert_uint_eq(u.allocations, 5);
  ck_assert_uint_eq(u.bytes_in_use, 5297 + 3000);
  ck_assert_uint_eq(u.bytes_padding, 335 + 72);
  ck_assert_uint_eq(u.bytes_reserved, 2 * TU_MiB);
  ck_assert_uint_eq(u.pages, 2);
  ck_assert_uint_eq(u.peak_bytes_in_use, 5353 + 3000);
  ck_assert_uint_eq(u.peak_bytes_reserved, 2 * TU_MiB);
  c = tu_counters(api, dev);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_ALLOC], 2);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_FREE], 0);
  ck_assert_uint_eq(c.pages_held, 2);
  ck_assert_uint_eq(c.bytes_held, 2 * TU_MiB);

  /* release everything: pages stay until cleanup */
  CK_OK(api, api->release(a.s, h1000));
  CK_OK(api, api->release(a.s, h0));
  CK_OK(api, api->release(a.s, h4097));
  CK_OK(api, api->release(a.s, h200));
  CK_OK(api, api->release(b.s, hb));
  CK_CHECK(api, dev);
  u = tu_usage(api, dev, NULL);
  ck_assert_uint_eq(u.allocations, 0);
  ck_assert_uint_eq(u.bytes_in_use, 0);
  ck_assert_uint_eq(u.bytes_padding, 0);
  ck_assert_uint_eq(u.bytes_reserved, 2 * TU_MiB);
  ck_assert_uint_eq(u.pages, 2);
  r = tu_report(api, a.s, 1);
  ck_assert_uint_eq(r.bytes_free, TU_MiB);
  ck_assert_uint_eq(r.largest_free, TU_MiB);
  CK_OK(api, api->cleanup(dev, NULL));
  CK_CHECK(api, dev);
  c = tu_counters(api, dev);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_FREE], 2);
  ck_assert_uint_eq(c.pages_held, 0);
  ck_assert_uint_eq(c.bytes_held, 0);
  u = tu_usage(api, dev, NULL);
  ck_assert_uint_eq(u.bytes_reserved, 0);
  ck_assert_uint_eq(u.pages, 0);
  ck_assert_uint_eq(u.peak_bytes_reserved, 2 * TU_MiB);
  ck_assert_uint_eq(u.peak_bytes_in_use, 5353 + 3000);
  u = tu_usage(api, dev, a.s);
  ck_assert_uint_eq(u.bytes_reserved, 0);
  ck_assert_uint_eq(u.peak_bytes_reserved, TU_MiB);
  ck_assert_uint_eq(u.peak_bytes_in_use, 5353);
  r = tu_report(api, a.s, 1);
  ck_assert_uint_eq(r.pages, 0);
  ck_assert_uint_eq(r.peak_pages, 1);
  ck_assert_uint_eq(r.largest_allocation, 4097);
  /* a cleanup with nothing to do frees nothing */
  CK_OK(api, api->cleanup(dev, NULL));
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_FREE], 2);
  CLOSE(api, dev, a, b);
}
END_TEST

/* A freed hole of exactly the request's aligned size is reused before a new
 * page is taken, even where the TLSF good-fit class (rounded up) is empty:
 * 33 units of 256 B lie in class [32, 34), the search starts at [34, 36). */
START_TEST(test_exact_fit_before_new_page) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev = tu_open(api, backends[_i], 64 * TU_MiB,
                              tu_layout_sliced(&l, TU_MiB, TU_MiB));
  stream_pair a = attach(api, dev);
  const uint64_t hole = 33 * 256;
  hippo_handle h1 = tu_reserve(api, a.s, hole);
  hippo_handle h2 = tu_reserve(api, a.s, TU_MiB - hole); /* page full */
  uint64_t base = tu_addr(api, a.s, h1);
  CK_OK(api, api->release(a.s, h1));
  CK_CHECK(api, dev);
  h1 = tu_reserve(api, a.s, hole - 255); /* same 33 units */
  CK_CHECK(api, dev);
  ck_assert_uint_eq(tu_addr(api, a.s, h1), base);
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_ALLOC], 1);
  ck_assert_uint_eq(tu_usage(api, dev, a.s).pages, 1);
  ck_assert_uint_eq(tu_usage(api, dev, a.s).bytes_padding, 255);
  CK_OK(api, api->release(a.s, h1));
  /* one unit more does not fit the hole: a new page */
  h1 = tu_reserve(api, a.s, hole + 1);
  ck_assert_uint_eq(tu_usage(api, dev, a.s).pages, 2);
  ck_assert_uint_ne(tu_addr(api, a.s, h1), base);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(a.s, h1));
  CK_OK(api, api->release(a.s, h2));
  CLOSE(api, dev, a);
}
END_TEST

/* ---- persistent windows ---------------------------------------------------------------- */

START_TEST(test_persistent_windows) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_1m(api, backends[_i]);
  stream_pair a = attach(api, dev);
  hippo_handle h[6], p1, p2, p3;
  uint64_t addr;
  hippo_pool_report r;
  hippo_emu_counters c;

  CK_OK(api, api->persistent_begin(a.s));
  CK_OK(api, api->persistent_begin(a.s));
  h[0] = tu_reserve(api, a.s, 1000);
  CK_OK(api, api->persistent_end(a.s));
  h[1] = tu_reserve(api, a.s, 2000); /* one window still open */
  CK_CHECK(api, dev);
  r = tu_report(api, a.s, 0);
  ck_assert_uint_eq(r.kind, HIPPO_POOL_PERSISTENT);
  ck_assert_uint_eq(r.allocations, 2);
  ck_assert_uint_eq(r.bytes_in_use, 3000);
  ck_assert_uint_eq(r.bytes_padding, 24 + 48);
  ck_assert_uint_eq(r.bytes_reserved, 1024 + 2048);
  ck_assert_uint_eq(r.pages, 2);
  ck_assert_uint_eq(tu_report(api, a.s, 1).allocations, 0);
  CK_OK(api, api->persistent_end(a.s));
  h[2] = tu_reserve(api, a.s, 3000); /* back to automatic: pool 1 */
  CK_CHECK(api, dev);
  ck_assert_uint_eq(tu_report(api, a.s, 0).allocations, 2);
  ck_assert_uint_eq(tu_report(api, a.s, 1).allocations, 1);
  CK_STATUS(api, api->persistent_end(a.s), HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "persistent_end");
  h[3] = tu_reserve(api, a.s, 3000);
  ck_assert_uint_eq(tu_report(api, a.s, 1).allocations, 2);
  /* per call */
  CK_OK(api, api->reserve(a.s, 4000, HIPPO_MODE_PERSISTENT, &h[4]));
  CK_CHECK(api, dev);
  ck_assert_uint_eq(tu_report(api, a.s, 0).allocations, 3);
  ck_assert_uint_eq(tu_report(api, a.s, 1).allocations, 2);
  {
    hippo_usage u = tu_usage(api, dev, a.s);
    ck_assert_uint_eq(u.allocations, 5);
    ck_assert_uint_eq(u.bytes_in_use, 1000 + 2000 + 3000 + 3000 + 4000);
    ck_assert_uint_eq(u.pages, 3 + 1);
  }
  /* persistent reuse by exact (aligned) size */
  CK_OK(api, api->reserve(a.s, 5000, HIPPO_MODE_PERSISTENT, &p1));
  addr = tu_addr(api, a.s, p1);
  CK_OK(api, api->release(a.s, p1));
  CK_CHECK(api, dev);
  c = tu_counters(api, dev);
  CK_OK(api, api->reserve(a.s, 5000, HIPPO_MODE_PERSISTENT, &p2));
  ck_assert_uint_eq(tu_addr(api, a.s, p2), addr);
  CK_OK(api, api->release(a.s, p2));
  CK_OK(api, api->reserve(a.s, 5100, HIPPO_MODE_PERSISTENT, &p3)); /* 5120 */
  ck_assert_uint_eq(tu_addr(api, a.s, p3), addr);
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_ALLOC],
                    c.calls[HIPPO_CALL_ALLOC]);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(a.s, p3));
  for (int i = 0; i < 5; i++)
    CK_OK(api, api->release(a.s, h[i]));
  CK_CHECK(api, dev);
  CLOSE(api, dev, a);
}
END_TEST

/* ---- install ---------------------------------------------------------------------------- */

START_TEST(test_install) {
  const hippo_api *api = tu_api();
  tu_layout l1, l2;
  hippo_device *dev = tu_open(api, backends[_i], 64 * TU_MiB, layout_1m(&l1));
  stream_pair a = attach(api, dev), b = attach(api, dev);
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
  CLOSE(api, dev, a, b);
}
END_TEST

START_TEST(test_install_fixed_layout) {
  const hippo_api *api = tu_api();
  tu_layout l1, l2;
  hippo_device *dev = tu_open_flags(api, backends[_i], 64 * TU_MiB,
                                    layout_1m(&l1), HIPPO_DEVICE_FIXED_LAYOUT);
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

/* ---- routing ---------------------------------------------------------------------------------- */

START_TEST(test_route_too_big) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_1m(api, backends[_i]);
  stream_pair a = attach(api, dev);
  hippo_handle h = 0;
  hippo_usage before = tu_usage(api, dev, a.s);
  CK_STATUS(api, api->reserve(a.s, 256 * TU_KiB + 1, HIPPO_MODE_AUTO, &h),
            HIPPO_BUFFER_TOO_BIG);
  CK_ERROR_HAS(api, "262145");
  CK_ERROR_HAS(api, "262144");
  CK_STATUS(api, api->reserve(a.s, UINT64_MAX, HIPPO_MODE_AUTO, &h),
            HIPPO_BUFFER_TOO_BIG);
  ck_assert_uint_eq(h, 0);
  {
    hippo_usage after = tu_usage(api, dev, a.s);
    CK_USAGE_EQ(before, after);
  }
  CK_CHECK(api, dev);
  h = tu_reserve(api, a.s, 256 * TU_KiB); /* the largest accepted size */
  CK_OK(api, api->release(a.s, h));
  CK_CHECK(api, dev);
  CLOSE(api, dev, a);
}
END_TEST

/* Every pool full and capped: the reservation fails with the last pool's
 * POOL_CAPACITY_EXCEEDED and its message, through both pools (the first
 * full pool spills, the last one answers without a retry), and changes
 * nothing. */
START_TEST(test_route_all_full) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  stream_pair a;
  hippo_handle h[4], bad = 0;
  hippo_usage before, after;
  tu_layout_init(&l);
  tu_layout_add_sliced(&l, TU_MiB, 512 * TU_KiB, TU_MiB); /* one page */
  tu_layout_add_sliced(&l, TU_MiB, TU_MiB, TU_MiB);       /* one page */
  dev = tu_open(api, backends[_i], 64 * TU_MiB, &l.layout);
  a = attach(api, dev);
  h[0] = tu_reserve(api, a.s, 512 * TU_KiB);
  h[1] = tu_reserve(api, a.s, 512 * TU_KiB);
  h[2] = tu_reserve(api, a.s, 512 * TU_KiB); /* spills to pool 2 */
  h[3] = tu_reserve(api, a.s, 512 * TU_KiB);
  before = tu_usage(api, dev, a.s);
  ck_assert_int_eq(api->reserve(a.s, 1000, HIPPO_MODE_AUTO, &bad),
                   HIPPO_POOL_CAPACITY_EXCEEDED);
  ck_assert_uint_eq(bad, 0);
  ck_assert_msg(strstr(api->last_error(), "SLICED pool (page 1048576 B, "
                                          "max_pool_size 1048576 B): 1024 B "
                                          "do not fit: 1 of 1 pages held") !=
                    NULL,
                "%s", api->last_error());
  /* larger than pool 1 accepts: pool 2 alone answers */
  ck_assert_int_eq(api->reserve(a.s, 600 * TU_KiB, HIPPO_MODE_AUTO, &bad),
                   HIPPO_POOL_CAPACITY_EXCEEDED);
  ck_assert_msg(strstr(api->last_error(), "614400 B do not fit") != NULL, "%s",
                api->last_error());
  after = tu_usage(api, dev, a.s);
  ck_assert_uint_eq(after.bytes_in_use, before.bytes_in_use);
  ck_assert_uint_eq(after.bytes_reserved, before.bytes_reserved);
  ck_assert_uint_eq(after.allocations, before.allocations);
  ck_assert_uint_eq(tu_report(api, a.s, 1).allocations, 2);
  ck_assert_uint_eq(tu_report(api, a.s, 2).allocations, 2);
  CK_CHECK(api, dev);
  /* room in the last pool again: it serves */
  CK_OK(api, api->release(a.s, h[3]));
  h[3] = tu_reserve(api, a.s, 1000);
  ck_assert_uint_eq(tu_report(api, a.s, 2).allocations, 2);
  for (int i = 0; i < 4; i++)
    CK_OK(api, api->release(a.s, h[i]));
  CK_CHECK(api, dev);
  CLOSE(api, dev, a);
}
END_TEST

START_TEST(test_route_spill) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  stream_pair a;
  hippo_handle h[4];
  tu_layout_init(&l);
  tu_layout_add_sliced(&l, TU_MiB, 512 * TU_KiB, TU_MiB); /* one page */
  tu_layout_add_sliced(&l, 4 * TU_MiB, TU_MiB, 0);
  dev = tu_open(api, backends[_i], 64 * TU_MiB, &l.layout);
  a = attach(api, dev);
  h[0] = tu_reserve(api, a.s, 512 * TU_KiB);
  h[1] = tu_reserve(api, a.s, 512 * TU_KiB);
  CK_CHECK(api, dev);
  ck_assert_uint_eq(tu_report(api, a.s, 1).allocations, 2);
  ck_assert_uint_eq(tu_report(api, a.s, 1).pages, 1);
  h[2] = tu_reserve(api, a.s, 512 * TU_KiB); /* pool 1 is full: spills */
  h[3] = tu_reserve(api, a.s, 1000);
  CK_CHECK(api, dev);
  ck_assert_uint_eq(tu_report(api, a.s, 1).allocations, 2);
  ck_assert_uint_eq(tu_report(api, a.s, 1).pages, 1);
  ck_assert_uint_eq(tu_report(api, a.s, 2).allocations, 2);
  ck_assert_uint_eq(tu_report(api, a.s, 2).pages, 1);
  ck_assert_uint_eq(tu_usage(api, dev, a.s).bytes_reserved, 5 * TU_MiB);
  /* room again in pool 1: it serves first */
  CK_OK(api, api->release(a.s, h[0]));
  CK_OK(api, api->release(a.s, h[3]));
  h[0] = tu_reserve(api, a.s, 1000);
  ck_assert_uint_eq(tu_report(api, a.s, 1).allocations, 2);
  ck_assert_uint_eq(tu_report(api, a.s, 2).allocations, 1);
  CK_CHECK(api, dev);
  for (int i = 0; i < 3; i++)
    CK_OK(api, api->release(a.s, h[i]));
  CK_CHECK(api, dev);
  CLOSE(api, dev, a);
}
END_TEST

START_TEST(test_route_capacity_exceeded) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  stream_pair a;
  hippo_handle h[2], x = 0;
  hippo_usage before, after;
  tu_layout_init(&l);
  tu_layout_add_sliced(&l, TU_MiB, 512 * TU_KiB, TU_MiB);
  dev = tu_open(api, backends[_i], 64 * TU_MiB, &l.layout);
  a = attach(api, dev);
  h[0] = tu_reserve(api, a.s, 512 * TU_KiB);
  h[1] = tu_reserve(api, a.s, 512 * TU_KiB);
  before = tu_usage(api, dev, a.s);
  CK_STATUS(api, api->reserve(a.s, 512 * TU_KiB, HIPPO_MODE_AUTO, &x),
            HIPPO_POOL_CAPACITY_EXCEEDED);
  CK_ERROR_HAS(api, "max_pool_size");
  CK_STATUS(api, api->reserve(a.s, 1, HIPPO_MODE_AUTO, &x),
            HIPPO_POOL_CAPACITY_EXCEEDED);
  ck_assert_uint_eq(x, 0);
  after = tu_usage(api, dev, a.s);
  CK_USAGE_EQ(before, after);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(a.s, h[1]));
  h[1] = tu_reserve(api, a.s, 512 * TU_KiB);
  CK_OK(api, api->release(a.s, h[0]));
  CK_OK(api, api->release(a.s, h[1]));
  CK_CHECK(api, dev);
  CLOSE(api, dev, a);
}
END_TEST

/* ---- the capture guard ---------------------------------------------------------------------- */

START_TEST(test_cleanup_during_capture) {
  const hippo_api *api = tu_api();
  tu_layout l2;
  hippo_device *dev = open_1m(api, backends[_i]);
  stream_pair a = attach(api, dev), b = attach(api, dev);
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
  CLOSE(api, dev, a, b);
}
END_TEST

/* ---- streams and closing ---------------------------------------------------------------------- */

START_TEST(test_busy) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open(api, backends[_i], 64 * TU_MiB, NULL);
  stream_pair a = attach(api, dev);
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
  detach(api, dev, a);
  ck_assert_uint_eq(tu_info(api, dev).streams, 0);
  CK_CHECK(api, dev);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* ---- stream identity and the capture guard on freeing --------------------- */

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
  if (backends[_i] == HIPPO_BACKEND_HOST &&
      !tu_host_only("a pointer that is no stream would reach the GPU "
                    "runtime: undefined behaviour there"))
    return;
  dev = tu_open(api, backends[_i], 64 * TU_MiB, NULL);
  hippo_device *dev2 = tu_open(api, backends[_i], 64 * TU_MiB, NULL);
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
  stream_pair a, b;
  hippo_handle small, big = 0;
  hippo_emu_counters c0, c1;
  uint64_t id = 0;
  tu_layout_init(&l);
  tu_layout_add_sliced(&l, TU_MiB, 64 * TU_KiB, 0);
  tu_layout_add_sliced(&l, 2 * TU_MiB, TU_MiB, 0);
  dev = tu_open(api, backends[_i], 2 * TU_MiB + 512 * TU_KiB, &l.layout);
  a = attach(api, dev);
  b = attach(api, dev);
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
  CLOSE(api, dev, a, b);
}
END_TEST

/* A release's merge may wait for its pool's next call (pool.h, settle).
 * A page it empties still leaves after exactly dealloc_period
 * reservations when every later one goes to another pool (the ticks
 * finish the waiting release first), and a release in another pool
 * finishes it too: the same pages leave at the same reservations as when
 * a release merged at once. */
START_TEST(test_late_merge_across_pools) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  stream_pair a;
  hippo_handle h, big[4], small;
  hippo_usage u;
  int i;
  tu_layout_init(&l);
  tu_layout_add_sliced(&l, 64 * TU_KiB, 4 * TU_KiB, 0)->dealloc_period = 3;
  tu_layout_add_sliced(&l, TU_MiB, TU_MiB, 0);
  dev = tu_open(api, HIPPO_BACKEND_DRY, 64 * TU_MiB, &l.layout);
  a = attach(api, dev);
  h = tu_reserve(api, a.s, 1000); /* clock 1: the small pool's page */
  big[0] = tu_reserve(api, a.s, 8 * TU_KiB); /* clock 2: the big pool's */
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 2);
  CK_OK(api, api->release(a.s, h)); /* empties the small page at clock 2 */
  u = tu_usage(api, dev, a.s);
  ck_assert_uint_eq(u.bytes_in_use, 8 * TU_KiB);
  ck_assert_uint_eq(u.allocations, 1);
  /* only the big pool serves from here: the page leaves at clock 5 */
  for (i = 1; i < 4; i++) {
    big[i] = tu_reserve(api, a.s, 8 * TU_KiB);
    ck_assert_uint_eq(tu_counters(api, dev).pages_held, i < 3 ? 2 : 1);
  }
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_FREE], 1);
  CK_CHECK(api, dev);
  /* a release in the small pool waits; one in the big pool finishes it */
  small = tu_reserve(api, a.s, 1000);
  CK_OK(api, api->release(a.s, small));
  CK_OK(api, api->release(a.s, big[0]));
  CK_CHECK(api, dev);
  u = tu_usage(api, dev, a.s);
  ck_assert_uint_eq(u.bytes_in_use, 3 * 8 * TU_KiB);
  ck_assert_uint_eq(u.allocations, 3);
  for (i = 1; i < 4; i++)
    CK_OK(api, api->release(a.s, big[i]));
  CK_CHECK(api, dev);
  CLOSE(api, dev, a);
}
END_TEST

/* While a capture records and a page is due, reservations do not ask the
 * driver each time whether a stream captures: the ticks back off (1, 2,
 * 4, ... up to 1024 reservations), and once the capture ends the page
 * goes within that many.  (The streams ask the driver, as on HIP:
 * capture_announce(QUERY); an emulated stream's word is read for free.) */
START_TEST(test_capture_tick_backoff) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  stream_pair a, b;
  hippo_handle h, z;
  uint64_t id = 0, q0, q1, failed = 0;
  int i;
  layout_1m(&l);
  l.pools[0].dealloc_period = 2;
  dev = tu_open(api, HIPPO_BACKEND_DRY, 64 * TU_MiB, &l.layout);
  a = attach(api, dev);
  b = attach(api, dev);
  CK_OK(api, api->capture_announce(a.s, HIPPO_CAPTURE_QUERY));
  CK_OK(api, api->capture_announce(b.s, HIPPO_CAPTURE_QUERY));
  CK_OK(api, tu_emu(api)->capture_begin(dev, b.native, &id));
  h = tu_reserve(api, a.s, 1000);
  CK_OK(api, api->release(a.s, h)); /* due two reservations later */
  q0 = tu_counters(api, dev).calls[HIPPO_CALL_CAPTURE_QUERY];
  for (i = 0; i < 5000; i++) {
    failed += api->reserve(a.s, 0, HIPPO_MODE_AUTO, &z) != HIPPO_SUCCESS;
    failed += api->release(a.s, z) != HIPPO_SUCCESS;
  }
  q1 = tu_counters(api, dev).calls[HIPPO_CALL_CAPTURE_QUERY];
  ck_assert_uint_eq(failed, 0);
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 1);
  /* each reserve and release asks about its own stream (10000); each
   * gate question asks both streams: 11 asks to reach 1024, then 1 per
   * 1024 reservations */
  ck_assert_msg(q1 - q0 <= 10000 + 2 * 20, "%llu capture queries in 5000 "
                "reservations", (unsigned long long)(q1 - q0));
  ck_assert_uint_gt(q1 - q0, 10000);
  ck_assert_uint_gt(q1 - q0, 0);
  CK_OK(api, tu_emu(api)->capture_end(dev, b.native));
  for (i = 0; i < 1025 && tu_counters(api, dev).pages_held != 0; i++) {
    z = tu_reserve(api, a.s, 0);
    CK_OK(api, api->release(a.s, z));
  }
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 0);
  CK_CHECK(api, dev);
  CLOSE(api, dev, a, b);
}
END_TEST

/* The capture guard: periodic deallocation waits while a stream of the
 * device captures. */
START_TEST(test_capture_guard_tick) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  stream_pair a, b;
  hippo_handle h, z;
  uint64_t id = 0;
  layout_1m(&l);
  l.pools[0].dealloc_period = 2;
  dev = tu_open(api, backends[_i], 64 * TU_MiB, &l.layout);
  a = attach(api, dev);
  b = attach(api, dev);
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
  CLOSE(api, dev, a, b);
}
END_TEST

/* Periodic deallocation through the manager is exact: a page empty since
 * reservation t goes back at reservation t + period, not one earlier, even
 * when it empties long after the pool last had work (the stamp is the
 * stream's clock at the release). */
START_TEST(test_dealloc_period_exact) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  stream_pair a;
  hippo_handle h, z;
  layout_1m(&l);
  l.pools[0].dealloc_period = 3;
  dev = tu_open(api, backends[_i], 64 * TU_MiB, &l.layout);
  a = attach(api, dev);
  for (int i = 0; i < 10; i++) { /* clock 1..10, nothing to free */
    z = tu_reserve(api, a.s, 0);
    CK_OK(api, api->release(a.s, z));
  }
  h = tu_reserve(api, a.s, 1000); /* clock 11: a page */
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 1);
  CK_OK(api, api->release(a.s, h)); /* empty since clock 11 */
  for (int clock = 12; clock <= 14; clock++) {
    z = tu_reserve(api, a.s, 0);
    CK_OK(api, api->release(a.s, z));
    CK_CHECK(api, dev);
    ck_assert_msg(tu_counters(api, dev).pages_held == (clock < 14 ? 1u : 0u),
                  "at clock %d: %llu pages held", clock,
                  (unsigned long long)tu_counters(api, dev).pages_held);
  }
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_FREE], 1);
  ck_assert_uint_eq(tu_usage(api, dev, a.s).bytes_reserved, 0);
  ck_assert_uint_eq(tu_usage(api, dev, a.s).peak_bytes_reserved, TU_MiB);
  CLOSE(api, dev, a);
}
END_TEST

/* A stream whose page cannot be given back stays attached (its
 * reservations released, the page still accounted); detach again works. */
START_TEST(test_detach_free_fails) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_1m(api, backends[_i]);
  stream_pair a = attach(api, dev);
  hippo_handle h = tu_reserve(api, a.s, 1000);
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_FREE, 1,
                                   HIPPO_BACKEND_ERROR));
  CK_STATUS(api, api->stream_detach(a.s), HIPPO_BACKEND_ERROR);
  CK_ERROR_HAS(api, "stays attached");
  CK_CHECK(api, dev);
  EXPECT_INVALID(api, a.s, h); /* its reservation was released */
  ck_assert_uint_eq(tu_info(api, dev).streams, 1);
  ck_assert_uint_eq(tu_usage(api, dev, a.s).allocations, 0);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_reserved, TU_MiB);
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 1);
  CLOSE(api, dev, a); /* the retry gives the page back */
}
END_TEST

/* Nothing is freed while a stream captures: detach is refused. */
START_TEST(test_detach_while_capturing) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_1m(api, backends[_i]);
  stream_pair a = attach(api, dev), b = attach(api, dev);
  uint64_t id = 0;
  tu_reserve(api, b.s, 1000);
  CK_OK(api, tu_emu(api)->capture_begin(dev, a.native, &id));
  CK_STATUS(api, api->stream_detach(b.s), HIPPO_GRAPH_RECORDING);
  CK_STATUS(api, api->stream_detach(a.s), HIPPO_GRAPH_RECORDING);
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_FREE], 0);
  ck_assert_uint_eq(tu_usage(api, dev, b.s).allocations, 1);
  CK_CHECK(api, dev);
  CK_OK(api, tu_emu(api)->capture_end(dev, a.native));
  CLOSE(api, dev, a, b);
}
END_TEST

/* An install frees the old pools' empty pages after the stream locks; one
 * whose free fails stays held by its stream (counted in its figures) and
 * goes at the stream's next cleanup; the new layout is in force. */
START_TEST(test_install_free_fails) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_1m(api, backends[_i]);
  stream_pair a = attach(api, dev);
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
  CLOSE(api, dev, a);
}
END_TEST

/* A failed reservation changes nothing: not the clock, not the pages a
 * period would give back. */
START_TEST(test_failed_reserve_changes_nothing) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  stream_pair a;
  hippo_handle h = 0;
  hippo_usage before, after;
  tu_layout_init(&l);
  tu_layout_add(&l, HIPPO_POOL_EXCLUSIVE)->max_alloc_size = TU_MiB;
  l.pools[0].dealloc_period = 1;
  dev = tu_open(api, backends[_i], 64 * TU_MiB, &l.layout);
  a = attach(api, dev);
  CK_OK(api, api->release(a.s, tu_reserve(api, a.s, 4096)));
  before = tu_usage(api, dev, NULL);
  ck_assert_uint_eq(before.pages, 1); /* free, due at the next reservation */
  CK_STATUS(api, api->reserve(a.s, TU_GiB, HIPPO_MODE_AUTO, &h),
            HIPPO_BUFFER_TOO_BIG);
  after = tu_usage(api, dev, NULL);
  CK_USAGE_EQ(before, after);
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_FREE], 0);
  CK_CHECK(api, dev);
  CLOSE(api, dev, a);
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
                              layout_1m(&one));
  stream_pair a = attach(api, dev);
  hippo_handle stale = tu_reserve(api, a.s, 1000);
  CK_OK(api, api->release(a.s, stale));

  CK_OK(api, api->pools_install(dev, layout_1m(&one), NULL));
  ck_assert_uint_eq(churn_hits(api, a.s, 1000, cycles, stale), 0);
  EXPECT_INVALID(api, a.s, stale);
  CK_CHECK(api, dev);

  /* through an EXCLUSIVE pool at index 1, and back */
  tu_layout_init(&other);
  tu_layout_add(&other, HIPPO_POOL_EXCLUSIVE)->max_alloc_size = TU_MiB;
  CK_OK(api, api->pools_install(dev, &other.layout, NULL));
  ck_assert_uint_eq(churn_hits(api, a.s, 1000, 1000, stale), 0);
  CK_CHECK(api, dev);
  CK_OK(api, api->pools_install(dev, layout_1m(&one), NULL));
  ck_assert_uint_eq(churn_hits(api, a.s, 1000, cycles, stale), 0);
  EXPECT_INVALID(api, a.s, stale);
  CK_CHECK(api, dev);
  CLOSE(api, dev, a);
}
END_TEST

/* The device's peak in use never goes down: a detached stream's peak stays
 * in it. */
START_TEST(test_peak_survives_detach) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_1m(api, HIPPO_BACKEND_DRY);
  stream_pair a = attach(api, dev), b = attach(api, dev);
  hippo_handle h = tu_reserve(api, a.s, 100000);
  hippo_handle g = tu_reserve(api, b.s, 3000);
  CK_OK(api, api->release(a.s, h));
  ck_assert_uint_eq(tu_usage(api, dev, NULL).peak_bytes_in_use, 103000);
  detach(api, dev, a);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).peak_bytes_in_use, 103000);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_in_use, 3000);
  CK_OK(api, api->release(b.s, g));
  CK_CHECK(api, dev);
  CLOSE(api, dev, b);
}
END_TEST

/* stream_attach keeps the backend's status: a failed capture query is
 * the backend's failure, not a bad argument. */
START_TEST(test_attach_backend_failure) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_1m(api, backends[_i]);
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
  hippo_device *dev = open_1m(api, HIPPO_BACKEND_DRY);
  stream_pair a = attach(api, dev), b;
  hippo_handle ha = tu_reserve(api, a.s, 1000), hb;
  void *n = NULL;
  detach(api, dev, a);
  CK_OK(api, tu_emu(api)->stream_create(dev, &n));
  for (int i = 0; i < 4095; i++) {
    hippo_stream *s = NULL;
    CK_OK(api, api->stream_attach(dev, n, &s));
    CK_OK(api, api->stream_detach(s));
  }
  CK_OK(api, tu_emu(api)->stream_destroy(dev, n));
  b = attach(api, dev);
  hb = tu_reserve(api, b.s, 2048);
  ck_assert_uint_ne(ha, hb);
  EXPECT_INVALID(api, b.s, ha);
  CK_CHECK(api, dev);
  CLOSE(api, dev, b);
}
END_TEST

/* Two live streams never accept each other's handles, however many streams
 * were attached in between (the handle tag has 12 bits: a counter would
 * give the 4097th table the tag of the 1st; tags in use are never reused). */
START_TEST(test_foreign_handle_after_many_streams) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_1m(api, HIPPO_BACKEND_DRY);
  stream_pair a = attach(api, dev), b;
  hippo_handle ha = tu_reserve(api, a.s, 1000), hb;
  void *n = NULL;
  CK_OK(api, tu_emu(api)->stream_create(dev, &n));
  for (int i = 0; i < 4095; i++) {
    hippo_stream *s = NULL;
    CK_OK(api, api->stream_attach(dev, n, &s));
    CK_OK(api, api->stream_detach(s));
  }
  CK_OK(api, tu_emu(api)->stream_destroy(dev, n));
  b = attach(api, dev);
  hb = tu_reserve(api, b.s, 1000);
  ck_assert_msg(ha != hb, "two live streams handed out the same handle %#llx",
                (unsigned long long)ha);
  EXPECT_INVALID(api, b.s, ha);
  EXPECT_INVALID(api, a.s, hb);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(a.s, ha));
  CK_OK(api, api->release(b.s, hb));
  CLOSE(api, dev, a, b);
}
END_TEST

static Suite *device_suite(void) {
  Suite *s = suite_create("device");
  TCase *tc = tcase_create("handles");
  tcase_add_loop_test(tc, test_handles_invalid, 0, N_BACKENDS);
  tcase_add_test(tc, test_host_data);
  suite_add_tcase(s, tc);
  tc = tcase_create("capacity");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_capacity_exhaustion);
  tcase_add_loop_test(tc, test_fault_alloc_oom_retried, 0, N_BACKENDS);
  tcase_add_loop_test(tc, test_oom_retry_after_cleanup, 0, N_BACKENDS);
  tcase_add_test(tc, test_fault_alloc_backend_error);
  tcase_add_loop_test(tc, test_fault_free, 0, N_BACKENDS);
  tcase_add_test(tc, test_dry_terabyte);
  suite_add_tcase(s, tc);
  tc = tcase_create("figures");
  tcase_add_loop_test(tc, test_usage_exact, 0, N_BACKENDS);
  tcase_add_loop_test(tc, test_exact_fit_before_new_page, 0, N_BACKENDS);
  tcase_add_loop_test(tc, test_persistent_windows, 0, N_BACKENDS);
  suite_add_tcase(s, tc);
  tc = tcase_create("install");
  tcase_add_loop_test(tc, test_install, 0, N_BACKENDS);
  tcase_add_loop_test(tc, test_install_fixed_layout, 0, N_BACKENDS);
  suite_add_tcase(s, tc);
  tc = tcase_create("routing");
  tcase_add_loop_test(tc, test_route_too_big, 0, N_BACKENDS);
  tcase_add_loop_test(tc, test_route_spill, 0, N_BACKENDS);
  tcase_add_loop_test(tc, test_route_all_full, 0, N_BACKENDS);
  tcase_add_loop_test(tc, test_route_capacity_exceeded, 0, N_BACKENDS);
  suite_add_tcase(s, tc);
  tc = tcase_create("streams");
  tcase_add_loop_test(tc, test_cleanup_during_capture, 0, N_BACKENDS);
  tcase_add_loop_test(tc, test_busy, 0, N_BACKENDS);
  suite_add_tcase(s, tc);
  tc = tcase_create("guards");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_attach_unknown_native, 0, N_BACKENDS);
  tcase_add_loop_test(tc, test_capture_guard_oom_retry, 0, N_BACKENDS);
  tcase_add_loop_test(tc, test_capture_guard_tick, 0, N_BACKENDS);
  tcase_add_test(tc, test_capture_tick_backoff);
  tcase_add_test(tc, test_late_merge_across_pools);
  tcase_add_loop_test(tc, test_dealloc_period_exact, 0, N_BACKENDS);
  tcase_add_loop_test(tc, test_detach_free_fails, 0, N_BACKENDS);
  tcase_add_loop_test(tc, test_detach_while_capturing, 0, N_BACKENDS);
  tcase_add_loop_test(tc, test_install_free_fails, 0, N_BACKENDS);
  tcase_add_loop_test(tc, test_failed_reserve_changes_nothing, 0, N_BACKENDS);
  tcase_add_test(tc, test_install_stale_never_live);
  tcase_add_test(tc, test_peak_survives_detach);
  tcase_add_loop_test(tc, test_attach_backend_failure, 0, N_BACKENDS);
  tcase_add_test(tc, test_handle_of_detached_stream);
  tcase_add_test(tc, test_foreign_handle_after_many_streams);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(device_suite()); }
