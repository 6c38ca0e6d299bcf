/* test-virtual-limits.c -- the limits and figures of VIRTUAL pools and
 * NO_MOVE devices that tests from outside found wrong (issue 38), each
 * through the ABI as a user would meet it:
 *  - a stream whose granules crossed vm.max_map_count on HOST can still
 *    be cleaned up, detached and closed;
 *  - an empty outdated ARENA page goes back at a relocation on a
 *    HIPPO_DEVICE_NO_MOVE device as on any other;
 *  - a reservation larger than the device is HIPPO_BUFFER_TOO_BIG on a
 *    VIRTUAL pool too (whatever a fault or a capture would say), and a
 *    range or granule larger than the device is refused when the layout
 *    is validated;
 *  - largest_free never exceeds bytes_free; the range's largest free slice
 *    is largest_free_range;
 *  - the options in force say the unmap threshold in force, and the
 *    backend counts the unmaps that undo a failed map.
 * HOST and DRY (and the stand-ins, where suite-gpu.sh runs it); the
 * device's check after every step that changes state. */
#include <config.h>

#include <check.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define KiB TU_KiB
#define MiB TU_MiB
/* A sanitizer's runtime maps memory of its own as it goes: at the kernel's
 * mapping limit it dies ("Failed to mmap"), so the test that drives the
 * process there skips under one (and under valgrind, whose own mappings
 * count too). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif
#ifndef UNDER_SANITIZER
#define UNDER_SANITIZER 0
#endif
/* The driver's granularity (4 KiB on HOST and DRY, the stand-ins' own,
 * 2 MiB on a GPU): main sets it. */
static uint64_t GRAN = 4 * KiB;

static hippo_device *open_one(const hippo_api *api, hippo_backend backend,
                              uint64_t capacity, hippo_pool_options *opt,
                              uint32_t flags) {
  hippo_layout l = {.struct_size = sizeof l,
                    .preset = HIPPO_PRESET_CUSTOM,
                    .pool_count = 1,
                    .pool_options_size = sizeof *opt,
                    .pools = opt};
  return tu_open_flags(api, backend, capacity, &l, flags);
}

static hippo_pool_options virtual_opt(uint64_t range, uint64_t granule) {
  hippo_pool_options o;
  TU_SIZED(o);
  o.kind = HIPPO_POOL_VIRTUAL;
  o.range_size = range;
  o.granule = granule;
  return o;
}

/* A device whose layout must be refused naming `field`. */
static void expect_refused_at(const hippo_api *api, hippo_pool_options o,
                              uint64_t capacity, const char *field,
                              int line) {
  hippo_layout l = {.struct_size = sizeof l,
                    .preset = HIPPO_PRESET_CUSTOM,
                    .pool_count = 1,
                    .pool_options_size = sizeof o,
                    .pools = &o};
  hippo_device_desc d;
  TU_SIZED(d);
  d.backend = HIPPO_BACKEND_DRY;
  d.capacity = capacity;
  d.layout = &l;
  tu_config_refused_at(api, &d, field, line);
}
#define CK_REFUSED(o, capacity, field)                                       \
  expect_refused_at(api, (o), (capacity), (field), __LINE__)

/* 1. HOST: granules of 4 KiB mapped as one run, every other one given
 * back, split the kernel's mapping into more pieces than
 * vm.max_map_count allows.  The cleanup gives them back all the same
 * (their memory returns; the mapping stays), so the stream detaches and
 * the device closes; today's code answered HIPPO_BACKEND_ERROR at the
 * cleanup and at every detach after it. */
START_TEST(test_map_count_detach) {
  const hippo_api *api = tu_api();
  FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
  unsigned long long limit = 0;
  uint64_t n, granule = 4 * KiB;
  hippo_pool_options o;
  hippo_device *dev;
  hippo_stream *s;
  hippo_handle *h;
  hippo_usage u;
  void *native;
  if (tu_backend() != HIPPO_BACKEND_HOST)
    return (void)tu_host_only("HOST's kernel mappings");
  if (UNDER_SANITIZER || getenv("HIPPO_VALGRIND")) {
    printf("skipped: a sanitizer's or valgrind's own mappings would meet "
           "vm.max_map_count first\n");
    return;
  }
  if (!f || fscanf(f, "%llu", &limit) != 1 || limit > 1000000) {
    if (f)
      fclose(f);
    printf("skipped: vm.max_map_count unreadable or above 1,000,000\n");
    return;
  }
  fclose(f);
  if (GRAN > granule)
    granule = GRAN;
  n = limit + limit / 4 + 1000; /* n/2 holes: about n pieces */
  o = virtual_opt(0, granule);
  o.unmap_threshold = UINT64_MAX; /* only cleanup gives back */
  dev = open_one(api, HIPPO_BACKEND_HOST, (n + 64) * granule, &o, 0);
  s = tu_attach(api, dev, &native);
  h = calloc(n, sizeof *h);
  ck_assert_ptr_nonnull(h);
  for (uint64_t i = 0; i < n; i++)
    CK_OK(api, api->reserve(s, granule, HIPPO_MODE_AUTO, &h[i]));
  for (uint64_t i = 0; i < n; i += 2)
    CK_OK(api, api->release(s, h[i]));
  u = tu_usage(api, dev, s);
  ck_assert_uint_eq(u.bytes_idle, (n + 1) / 2 * granule);
  CK_OK(api, api->cleanup(dev, s));
  u = tu_usage(api, dev, s);
  ck_assert_uint_eq(u.bytes_idle, 0);
  ck_assert_uint_eq(u.pages, n / 2);
  ck_assert_uint_eq(tu_counters(api, dev).granules_mapped, n / 2);
  CK_CHECK(api, dev);
  /* the live half reads and writes as before */
  {
    void *p;
    CK_OK(api, api->resolve(s, h[1], &p, NULL));
    tu_fill(api, dev, p, granule, 3);
    TU_VERIFY(api, dev, p, granule, 3);
  }
  tu_detach(api, dev, s, native); /* releases the live half, unmaps all */
  ck_assert_uint_eq(tu_counters(api, dev).granules_mapped, 0);
  ck_assert_uint_eq(tu_counters(api, dev).ranges_held, 0);
  CK_OK(api, api->device_close(dev));
  free(h);
}
END_TEST

/* 2. One ARENA pool of 2 MiB pages, a 1,000 B and a 10 MiB reservation
 * (the arena grows: the first page is outdated), the small one released:
 * the empty outdated page goes back at relocate, relocate_with and
 * relocate_device alike, with HIPPO_DEVICE_NO_MOVE as without, and the
 * live 10 MiB stays where it is. */
START_TEST(test_no_move_drains_outdated) {
  const hippo_api *api = tu_api();
  uint32_t flags = (_i & 1) ? HIPPO_DEVICE_NO_MOVE : 0;
  int how = _i >> 1;
  hippo_pool_options o;
  hippo_device *dev;
  hippo_stream *s;
  hippo_handle small, big;
  hippo_pool_report r;
  hippo_relocation_report rep = {.struct_size = sizeof rep};
  hippo_relocation_need need = 99;
  uint64_t at;
  void *native;
  TU_SIZED(o);
  o.kind = HIPPO_POOL_ARENA;
  o.page_size = 2 * MiB;
  o.max_slice_size = 64 * MiB;
  dev = open_one(api, HIPPO_BACKEND_DRY, 256 * MiB, &o, flags);
  s = tu_attach(api, dev, &native);
  small = tu_reserve(api, s, 1000);
  big = tu_reserve(api, s, 10 * MiB);
  at = tu_addr(api, s, big);
  CK_OK(api, api->release(s, small));
  r = tu_report(api, s, 1);
  ck_assert_uint_eq(r.outdated_pages, 1);
  ck_assert_uint_eq(r.pages, 2);
  switch (how) {
  case 0:
    CK_OK(api, api->relocate(s));
    break;
  case 1:
    CK_OK(api, api->relocate_with(dev, s, HIPPO_RELOCATE_EXPLICIT, &rep));
    ck_assert_uint_eq(rep.slices_moved, 0);
    ck_assert_uint_eq(rep.pages_freed, 1);
    ck_assert_uint_eq(rep.bytes_freed, 2 * MiB);
    break;
  default:
    CK_OK(api, api->relocate_device(dev));
    break;
  }
  r = tu_report(api, s, 1);
  ck_assert_uint_eq(r.outdated_pages, 0);
  ck_assert_uint_eq(r.pages, 1);
  ck_assert_uint_eq(tu_addr(api, s, big), at);
  CK_OK(api, api->relocation_need(s, &need));
  ck_assert_uint_eq(need, HIPPO_NEED_NOTHING);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, big));
  tu_detach(api, dev, s, native);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* 2b. NO_MOVE: an outdated page that still holds a live slice is not
 * moved, and wants no relocation (a relocation could only drain). */
START_TEST(test_no_move_keeps_live) {
  const hippo_api *api = tu_api();
  hippo_pool_options o;
  hippo_device *dev;
  hippo_stream *s;
  hippo_handle small, big;
  hippo_relocation_need need = 99;
  hippo_relocation_report rep = {.struct_size = sizeof rep};
  uint64_t at;
  void *native;
  TU_SIZED(o);
  o.kind = HIPPO_POOL_ARENA;
  o.page_size = 2 * MiB;
  o.max_slice_size = 16 * MiB;
  dev = open_one(api, HIPPO_BACKEND_DRY, 24 * MiB, &o,
                 HIPPO_DEVICE_NO_MOVE);
  s = tu_attach(api, dev, &native);
  small = tu_reserve(api, s, 1000);
  at = tu_addr(api, s, small);
  big = tu_reserve(api, s, 10 * MiB); /* 13 of 24 MiB held: pressure */
  CK_OK(api, api->relocation_need(s, &need));
  ck_assert_uint_eq(need, HIPPO_NEED_NOTHING);
  CK_OK(api, api->relocate_with(dev, s, HIPPO_RELOCATE_EXPLICIT, &rep));
  ck_assert_uint_eq(rep.slices_moved, 0);
  ck_assert_uint_eq(tu_addr(api, s, small), at);
  ck_assert_uint_eq(tu_report(api, s, 1).outdated_pages, 1);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, small));
  CK_OK(api, api->release(s, big));
  tu_detach(api, dev, s, native);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* 3. Larger than the device: the layout is refused for a range or a
 * granule above it; a reservation above it is HIPPO_BUFFER_TOO_BIG before
 * anything else could answer (an injected fault, a capture). */
START_TEST(test_larger_than_device) {
  const hippo_api *api = tu_api();
  hippo_backend backend = tu_backends[_i];
  uint64_t cap = 256 * MiB;
  hippo_pool_options o = virtual_opt(512 * MiB, 0);
  hippo_device *dev;
  hippo_stream *s;
  hippo_handle h = 0;
  uint64_t id = 0;
  void *native;
  CK_REFUSED(o, cap, "range_size");
  o = virtual_opt(0, 512 * MiB);
  CK_REFUSED(o, cap, "granule");
  o = virtual_opt(0, 0);
  o.max_slice_size = 300 * MiB;
  CK_REFUSED(o, cap, "max_slice_size");
  /* the default range is the device; the largest slice at most it */
  o = virtual_opt(0, 0);
  dev = open_one(api, backend, cap, &o, 0);
  s = tu_attach(api, dev, &native);
  ck_assert_uint_le(tu_options(api, s, 1).max_slice_size, cap);
  CK_STATUS(api, api->reserve(s, 300 * MiB, HIPPO_MODE_AUTO, &h),
            HIPPO_BUFFER_TOO_BIG);
  ck_assert_uint_eq(h, 0);
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_VM_RANGE, 1,
                                       HIPPO_BACKEND_ERROR));
  CK_STATUS(api, api->reserve(s, 300 * MiB, HIPPO_MODE_AUTO, &h),
            HIPPO_BUFFER_TOO_BIG);
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_VM_RANGE, 0,
                                       HIPPO_BACKEND_ERROR));
  CK_OK(api, tu_emu(api)->capture_begin(dev, native, &id));
  CK_STATUS(api, api->reserve(s, 300 * MiB, HIPPO_MODE_AUTO, &h),
            HIPPO_BUFFER_TOO_BIG);
  CK_OK(api, tu_emu(api)->capture_end(dev, native)); /* nothing guarded */
  ck_assert_uint_eq(tu_usage(api, dev, s).bytes_virtual, 0); /* untouched */
  /* the device's whole memory still goes in one reservation */
  h = tu_reserve(api, s, cap);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, h));
  tu_detach(api, dev, s, native);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* 4. largest_free <= bytes_free: one reservation of 1,000 B on the
 * VIRTUAL preset maps one granule; its free room is the rest of that
 * granule, and the range's largest free slice is the rest of the
 * range.  A hole of unmapped granules between two mapped runs is room in
 * the range, not mapped room. */
START_TEST(test_largest_free) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev = tu_open(api, tu_backends[_i], 256 * MiB,
                              tu_layout_preset(&l, HIPPO_PRESET_VIRTUAL));
  hippo_stream *s;
  hippo_handle a, b, c;
  hippo_pool_report r;
  uint64_t g, range;
  void *native;
  s = tu_attach(api, dev, &native);
  g = tu_options(api, s, 1).granule;
  range = tu_options(api, s, 1).range_size;
  a = tu_reserve(api, s, 1000); /* 1,024 B of granule 0 */
  r = tu_report(api, s, 1);
  ck_assert_uint_eq(r.bytes_free, g - 1024);
  ck_assert_uint_eq(r.largest_free, g - 1024);
  ck_assert_uint_eq(r.largest_free_range, range - 1024);
  CK_OK(api, api->release(s, a));
  /* granule 0 a's, 1 and 2 b's (one allocation), half of 3 c's; b's
   * allocation given back under a live c */
  a = tu_reserve(api, s, g);          /* [0, g) */
  b = tu_reserve(api, s, 2 * g);      /* [g, 3g) */
  c = tu_reserve(api, s, g / 2);      /* [3g, 3.5g) */
  CK_OK(api, api->release(s, b));     /* granules 1, 2 idle */
  r = tu_report(api, s, 1);
  ck_assert_uint_eq(r.bytes_free, 2 * g + g / 2); /* b's, c's tail */
  ck_assert_uint_eq(r.largest_free, 2 * g); /* b's slice, all mapped */
  CK_OK(api, api->cleanup(dev, s));   /* 1 and 2 go back */
  r = tu_report(api, s, 1);
  ck_assert_uint_eq(r.bytes_reserved, 2 * g); /* granules 0 and 3 */
  ck_assert_uint_eq(r.bytes_free, g / 2);
  /* b's old slice is unmapped: the largest mapped run is c's tail */
  ck_assert_uint_eq(r.largest_free, g / 2);
  ck_assert_uint_le(r.largest_free, r.bytes_free);
  ck_assert_uint_eq(r.largest_free_range, range - 3 * g - g / 2);
  CK_CHECK(api, dev);
  CK_OK(api, api->release(s, a));
  CK_OK(api, api->release(s, c));
  /* other kinds: the two figures are one */
  {
    hippo_pool_report p0 = tu_report(api, s, 0);
    ck_assert_uint_eq(p0.largest_free_range, p0.largest_free);
  }
  tu_detach(api, dev, s, native);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* 5. A multi-granule map that fails part-way counts the unmaps that undo
 * it; the options in force say the threshold in force (below). */
START_TEST(test_failed_map_counts) {
  const hippo_api *api = tu_api();
  hippo_pool_options o = virtual_opt(64 * GRAN, GRAN);
  hippo_device *dev;
  hippo_stream *s;
  hippo_handle h = 0;
  hippo_emu_counters c0, c1;
  void *native;
  dev = open_one(api, tu_backends[_i], 128 * GRAN, &o, 0);
  s = tu_attach(api, dev, &native);
  h = tu_reserve(api, s, 100); /* the range, granule 0 */
  CK_OK(api, api->release(s, h));
  c0 = tu_counters(api, dev);
  /* granules 1 to 8 are new: one map call of two allocations of 4 (at
   * most half the budget's floor of 8 granules each); the second fails
   * and the first is undone */
  CK_OK(api, tu_emu(api)->inject_fault(dev, HIPPO_CALL_VM_MAP, 2,
                                       HIPPO_BACKEND_ERROR));
  CK_STATUS(api, api->reserve(s, 9 * GRAN, HIPPO_MODE_AUTO, &h),
            HIPPO_BACKEND_ERROR);
  c1 = tu_counters(api, dev);
  ck_assert_uint_eq(c1.calls[HIPPO_CALL_VM_MAP] - c0.calls[HIPPO_CALL_VM_MAP],
                    2);
  ck_assert_uint_eq(
      c1.calls[HIPPO_CALL_VM_UNMAP] - c0.calls[HIPPO_CALL_VM_UNMAP], 1);
  ck_assert_uint_eq(
      c1.calls[HIPPO_CALL_VM_ACCESS] - c0.calls[HIPPO_CALL_VM_ACCESS], 0);
  ck_assert_uint_eq(c1.granules_mapped, 1);
  ck_assert_uint_eq(c1.bytes_mapped, GRAN);
  CK_CHECK(api, dev);
  tu_detach(api, dev, s, native);
  CK_OK(api, api->device_close(dev));
}
END_TEST

START_TEST(test_threshold_in_force) {
  const hippo_api *api = tu_api();
  hippo_pool_options o = virtual_opt(64 * GRAN, GRAN);
  hippo_device *dev = open_one(api, tu_backends[_i], 128 * GRAN, &o, 0);
  void *native;
  hippo_stream *s = tu_attach(api, dev, &native);
  ck_assert_uint_eq(tu_options(api, s, 1).unmap_threshold, UINT64_MAX);
  ck_assert_uint_eq(tu_options(api, s, 1).map_budget, 150);
  tu_detach(api, dev, s, native);
  CK_OK(api, api->device_close(dev));
  /* a threshold asked for stays as asked */
  o.unmap_threshold = 5 * GRAN;
  dev = open_one(api, tu_backends[_i], 128 * GRAN, &o, 0);
  s = tu_attach(api, dev, &native);
  ck_assert_uint_eq(tu_options(api, s, 1).unmap_threshold, 5 * GRAN);
  tu_detach(api, dev, s, native);
  CK_OK(api, api->device_close(dev));
}
END_TEST

static Suite *limits_suite(void) {
  Suite *s = suite_create("virtual-limits");
  TCase *tc = tcase_create("limits");
  tcase_set_timeout(tc, 300); /* the map count under valgrind */
  tcase_add_test(tc, test_map_count_detach);
  tcase_add_loop_test(tc, test_no_move_drains_outdated, 0, 6);
  tcase_add_test(tc, test_no_move_keeps_live);
  tcase_add_loop_test(tc, test_larger_than_device, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_largest_free, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_failed_map_counts, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_threshold_in_force, 0, TU_N_BACKENDS);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  uint64_t g = tu_vm_granularity(tu_api());
  if (g > GRAN)
    GRAN = g;
  return tu_run(limits_suite());
}
