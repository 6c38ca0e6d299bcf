/* test-manager.c -- a stream manager through the ABI, on HOST and DRY
 * devices: reservations and handles as a manager gives them, data read
 * back, the device full and the out-of-memory retries, exact usage
 * figures and pool reports, exact fit before a new page, persistent
 * windows, routing across pools, periodic deallocation (its exact period,
 * a late merge across pools, the tick back-off while a capture records)
 * and a failed reservation that changes nothing.  After every step that
 * changes state the device's check must pass.  Devices and streams as
 * such (attach, detach, install, the capture guard on device-wide calls,
 * failing backend calls) are test-device.c's; the manager's paths that
 * need host memory to run out are test-host-memory.c's. */
#include <config.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* ---- handles ------------------------------------------------------------- */

START_TEST(test_handles_invalid) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, tu_backends[_i]);
  hippo_device *dev2 = tu_open_1m(api, tu_backends[_i]);
  tu_pair a = tu_pair_attach(api, dev), b = tu_pair_attach(api, dev);
  tu_pair o = tu_pair_attach(api, dev2);
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
  CK_NOT_LIVE(api, a.s, NULL, h1);
  h2 = tu_reserve(api, a.s, 2048);
  CK_CHECK(api, dev);
  ck_assert_uint_ne(h1, h2);
  addr2 = tu_addr(api, a.s, h2);
  CK_NOT_LIVE(api, a.s, NULL, h1);
  ck_assert_uint_eq(tu_addr(api, a.s, h2), addr2);

  before = tu_usage(api, dev, NULL);
  before_a = tu_usage(api, dev, a.s);
  CK_NOT_LIVE(api, a.s, NULL, 0);
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
      CK_NOT_LIVE(api, a.s, NULL, forged[i]);
  }
  /* another stream's handle on the same device, another device's handle */
  CK_NOT_LIVE(api, a.s, NULL, hb);
  CK_NOT_LIVE(api, b.s, NULL, ha);
  CK_NOT_LIVE(api, a.s, NULL, ho);
  CK_NOT_LIVE(api, o.s, NULL, ha);
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
  CK_NOT_LIVE(api, a.s, NULL, hz);
  CK_OK(api, api->release(a.s, h2));
  CK_OK(api, api->release(b.s, hb));
  CK_OK(api, api->release(o.s, ho));
  CK_CHECK(api, dev);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).allocations, 0);
  TU_CLOSE(api, dev, a, b);
  TU_CLOSE(api, dev2, o);
}
END_TEST

/* ---- data read back on a HOST device ------------------------------------- */

static uint64_t lcg(uint64_t *state) {
  *state = *state * UINT64_C(6364136223846793005) + 1442695040888963407u;
  return *state >> 33;
}

START_TEST(test_host_data) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev = tu_open(api, HIPPO_BACKEND_HOST, 256 * TU_MiB,
                              tu_layout_1m(&l));
  tu_pair a = tu_pair_attach(api, dev);
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
  TU_CLOSE(api, dev, a);
}
END_TEST

/* ---- capacity ------------------------------------------------------------ */

START_TEST(test_capacity_exhaustion) {
  const hippo_api *api = tu_api();
  tu_layout l;
  const uint64_t cap = 64 * TU_MiB, page = 4 * TU_MiB, size = TU_MiB;
  enum { N = 64 };
  hippo_device *dev = tu_open(api, HIPPO_BACKEND_HOST, cap,
                              tu_layout_sliced(&l, page, TU_MiB));
  tu_pair a = tu_pair_attach(api, dev);
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
  TU_CLOSE(api, dev, a);
}
END_TEST

/* ---- out of memory: the retries ------------------------------------------ */

/* The 2nd page allocation fails with OUT_OF_MEMORY: the manager cleans up
 * (nothing is empty) and retries once (the 3rd call), which succeeds. */
START_TEST(test_fault_alloc_oom_retried) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, tu_backends[_i]);
  tu_pair a = tu_pair_attach(api, dev);
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
  TU_CLOSE(api, dev, a);
}
END_TEST

/* A real OUT_OF_MEMORY where an empty page of another pool is what the
 * device lacks: the manager gives it back and the retry succeeds. */
START_TEST(test_oom_retry_after_cleanup) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  tu_pair a;
  hippo_handle small, big, keep;
  hippo_emu_counters c0, c1;
  hippo_usage u;
  tu_layout_init(&l);
  tu_layout_add_sliced(&l, TU_MiB, 64 * TU_KiB, 0);
  tu_layout_add_sliced(&l, 2 * TU_MiB, TU_MiB, 0);
  dev = tu_open(api, tu_backends[_i], 2 * TU_MiB + 512 * TU_KiB, &l.layout);
  a = tu_pair_attach(api, dev);
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
                                   tu_backends[_i] == HIPPO_BACKEND_HOST
                               ? 2
                               : 1));
    ck_assert_uint_eq(c1.calls[HIPPO_CALL_FREE], c0.calls[HIPPO_CALL_FREE]);
    after = tu_usage(api, dev, a.s);
    CK_USAGE_EQ(before, after);
    CK_CHECK(api, dev);
  }
  CK_OK(api, api->release(a.s, keep));
  CK_CHECK(api, dev);
  TU_CLOSE(api, dev, a);
}
END_TEST

/* ---- exact figures ------------------------------------------------------- */

START_TEST(test_usage_exact) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, tu_backends[_i]);
  tu_pair a = tu_pair_attach(api, dev), b = tu_pair_attach(api, dev);
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
  TU_CLOSE(api, dev, a, b);
}
END_TEST

/* A freed hole of exactly the request's aligned size is reused before a new
 * page is taken, even where the TLSF good-fit class (rounded up) is empty:
 * 33 units of 256 B lie in class [32, 34), the search starts at [34, 36). */
START_TEST(test_exact_fit_before_new_page) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev = tu_open(api, tu_backends[_i], 64 * TU_MiB,
                              tu_layout_sliced(&l, TU_MiB, TU_MiB));
  tu_pair a = tu_pair_attach(api, dev);
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
  TU_CLOSE(api, dev, a);
}
END_TEST

/* ---- persistent windows -------------------------------------------------- */

START_TEST(test_persistent_windows) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, tu_backends[_i]);
  tu_pair a = tu_pair_attach(api, dev);
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
  TU_CLOSE(api, dev, a);
}
END_TEST

/* ---- routing ------------------------------------------------------------- */

START_TEST(test_route_too_big) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open_1m(api, tu_backends[_i]);
  tu_pair a = tu_pair_attach(api, dev);
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
  TU_CLOSE(api, dev, a);
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
  tu_pair a;
  hippo_handle h[4], bad = 0;
  hippo_usage before, after;
  tu_layout_init(&l);
  tu_layout_add_sliced(&l, TU_MiB, 512 * TU_KiB, TU_MiB); /* one page */
  tu_layout_add_sliced(&l, TU_MiB, TU_MiB, TU_MiB);       /* one page */
  dev = tu_open(api, tu_backends[_i], 64 * TU_MiB, &l.layout);
  a = tu_pair_attach(api, dev);
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
  TU_CLOSE(api, dev, a);
}
END_TEST

START_TEST(test_route_spill) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  tu_pair a;
  hippo_handle h[4];
  tu_layout_init(&l);
  tu_layout_add_sliced(&l, TU_MiB, 512 * TU_KiB, TU_MiB); /* one page */
  tu_layout_add_sliced(&l, 4 * TU_MiB, TU_MiB, 0);
  dev = tu_open(api, tu_backends[_i], 64 * TU_MiB, &l.layout);
  a = tu_pair_attach(api, dev);
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
  TU_CLOSE(api, dev, a);
}
END_TEST

START_TEST(test_route_capacity_exceeded) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  tu_pair a;
  hippo_handle h[2], x = 0;
  hippo_usage before, after;
  tu_layout_init(&l);
  tu_layout_add_sliced(&l, TU_MiB, 512 * TU_KiB, TU_MiB);
  dev = tu_open(api, tu_backends[_i], 64 * TU_MiB, &l.layout);
  a = tu_pair_attach(api, dev);
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
  TU_CLOSE(api, dev, a);
}
END_TEST

/* ---- periodic deallocation ----------------------------------------------- */

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
  tu_pair a;
  hippo_handle h, big[4], small;
  hippo_usage u;
  int i;
  tu_layout_init(&l);
  tu_layout_add_sliced(&l, 64 * TU_KiB, 4 * TU_KiB, 0)->dealloc_period = 3;
  tu_layout_add_sliced(&l, TU_MiB, TU_MiB, 0);
  dev = tu_open(api, HIPPO_BACKEND_DRY, 64 * TU_MiB, &l.layout);
  a = tu_pair_attach(api, dev);
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
  TU_CLOSE(api, dev, a);
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
  tu_pair a, b;
  hippo_handle h, z;
  uint64_t id = 0, q0, q1, failed = 0;
  int i;
  tu_layout_1m(&l);
  l.pools[0].dealloc_period = 2;
  dev = tu_open(api, HIPPO_BACKEND_DRY, 64 * TU_MiB, &l.layout);
  a = tu_pair_attach(api, dev);
  b = tu_pair_attach(api, dev);
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
  TU_CLOSE(api, dev, a, b);
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
  tu_pair a;
  hippo_handle h, z;
  tu_layout_1m(&l);
  l.pools[0].dealloc_period = 3;
  dev = tu_open(api, tu_backends[_i], 64 * TU_MiB, &l.layout);
  a = tu_pair_attach(api, dev);
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
  TU_CLOSE(api, dev, a);
}
END_TEST

/* A failed reservation changes nothing: not the clock, not the pages a
 * period would give back. */
START_TEST(test_failed_reserve_changes_nothing) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  tu_pair a;
  hippo_handle h = 0;
  hippo_usage before, after;
  tu_layout_init(&l);
  tu_layout_add(&l, HIPPO_POOL_EXCLUSIVE)->max_alloc_size = TU_MiB;
  l.pools[0].dealloc_period = 1;
  dev = tu_open(api, tu_backends[_i], 64 * TU_MiB, &l.layout);
  a = tu_pair_attach(api, dev);
  CK_OK(api, api->release(a.s, tu_reserve(api, a.s, 4096)));
  before = tu_usage(api, dev, NULL);
  ck_assert_uint_eq(before.pages, 1); /* free, due at the next reservation */
  CK_STATUS(api, api->reserve(a.s, TU_GiB, HIPPO_MODE_AUTO, &h),
            HIPPO_BUFFER_TOO_BIG);
  after = tu_usage(api, dev, NULL);
  CK_USAGE_EQ(before, after);
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_FREE], 0);
  CK_CHECK(api, dev);
  TU_CLOSE(api, dev, a);
}
END_TEST

static Suite *manager_suite(void) {
  Suite *s = suite_create("manager");
  TCase *tc = tcase_create("handles");
  tcase_add_loop_test(tc, test_handles_invalid, 0, TU_N_BACKENDS);
  tcase_add_test(tc, test_host_data);
  suite_add_tcase(s, tc);
  tc = tcase_create("capacity");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_capacity_exhaustion);
  tcase_add_loop_test(tc, test_fault_alloc_oom_retried, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_oom_retry_after_cleanup, 0, TU_N_BACKENDS);
  suite_add_tcase(s, tc);
  tc = tcase_create("figures");
  tcase_add_loop_test(tc, test_usage_exact, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_exact_fit_before_new_page, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_persistent_windows, 0, TU_N_BACKENDS);
  suite_add_tcase(s, tc);
  tc = tcase_create("routing");
  tcase_add_loop_test(tc, test_route_too_big, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_route_spill, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_route_all_full, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_route_capacity_exceeded, 0, TU_N_BACKENDS);
  suite_add_tcase(s, tc);
  tc = tcase_create("periods");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_late_merge_across_pools);
  tcase_add_test(tc, test_capture_tick_backoff);
  tcase_add_loop_test(tc, test_dealloc_period_exact, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_failed_reserve_changes_nothing, 0,
                      TU_N_BACKENDS);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(manager_suite()); }
