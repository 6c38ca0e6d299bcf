/* test-manager.c -- a stream manager's failure paths that need host memory
 * to run out: the test program defines aligned_alloc, which the core's
 * arrays use, and makes it fail on demand. */
#include <config.h>

#include <check.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

#include "manager.h"
#include "testutil.h"

static int fail_aligned; /* aligned_alloc fails while set */

void *aligned_alloc(size_t alignment, size_t size) {
  return fail_aligned ? NULL : memalign(alignment, size);
}

#define OK(call) ck_assert_msg((call) == HIPPO_SUCCESS, "%s", hippo__error_get())

/* A DRY device of 1 GiB with one SLICED pool (64 KiB pages) and one
 * attached emulated stream; close_stream undoes it. */
static hippo_stream *open_stream(hippo_device **dev, void **native) {
  tu_layout l;
  hippo_device_desc desc;
  hippo_stream *s;
  TU_SIZED(desc);
  desc.backend = HIPPO_BACKEND_DRY;
  desc.capacity = TU_GiB;
  tu_layout_sliced(&l, 64 * TU_KiB, 64 * TU_KiB);
  OK(hippo__device_open(&desc, &l.layout, l.pools, dev));
  OK((*dev)->be->ops->emu_stream_create((*dev)->be, native));
  OK(hippo__stream_attach(*dev, *native, &s));
  return s;
}

static void close_stream(hippo_device *dev, hippo_stream *s, void *native) {
  OK(hippo__stream_detach(s));
  OK(dev->be->ops->emu_stream_destroy(dev->be, native));
  OK(hippo__device_close(dev));
}

/* A reservation that finds the handle table full and cannot grow it fails
 * before any pool serves it, even one a SLICED pool would name (the table
 * makes room before routing): no page taken, no figure moved. */
START_TEST(handle_table_full) {
  hippo_device *dev;
  hippo_stream *s;
  hippo_usage before, after;
  hippo_pool_report rb, ra;
  hippo_handle h;
  void *native;
  s = open_stream(&dev, &native);
  /* fill the table: the SLICED pool names its reservations itself, so
   * zero-size ones take the slots */
  OK(hippo__reserve(s, 256, HIPPO_MODE_AUTO, &h));
  ck_assert_uint_eq(s->handles.count, 0);
  ck_assert_uint_gt(s->handles.cap, 0);
  while (s->handles.count < s->handles.cap)
    OK(hippo__reserve(s, 0, HIPPO_MODE_AUTO, &h));
  OK(hippo__stream_usage(s, &before));
  OK(hippo__pool_report_get(s, 1, &rb));
  fail_aligned = 1;
  ck_assert_int_eq(hippo__reserve(s, 60000, HIPPO_MODE_AUTO, &h),
                   HIPPO_OUT_OF_MEMORY);
  fail_aligned = 0;
  ck_assert_ptr_nonnull(strstr(hippo__error_get(), "handle table"));
  OK(hippo__stream_usage(s, &after));
  OK(hippo__pool_report_get(s, 1, &ra));
  ck_assert_mem_eq(&before, &after, sizeof before);
  ck_assert_mem_eq(&rb, &ra, sizeof rb);
  OK(hippo__device_check(dev));
  OK(hippo__reserve(s, 60000, HIPPO_MODE_AUTO, &h)); /* memory is back */
  OK(hippo__device_check(dev));
  close_stream(dev, s, native);
}
END_TEST

/* The check walk sees a stream's page figures disagree with its pools,
 * its peak below what it holds included. */
START_TEST(check_sees_stream_peak) {
  hippo_device *dev;
  hippo_stream *s;
  hippo_handle h;
  void *native;
  uint64_t peak;
  s = open_stream(&dev, &native);
  OK(hippo__reserve(s, 1000, HIPPO_MODE_AUTO, &h));
  OK(hippo__device_check(dev));
  peak = atomic_load(&s->acct.peak_bytes_reserved);
  atomic_store(&s->acct.peak_bytes_reserved, 0);
  ck_assert_int_eq(hippo__device_check(dev), HIPPO_INTERNAL);
  ck_assert_ptr_nonnull(strstr(hippo__error_get(), "peak"));
  atomic_store(&s->acct.peak_bytes_reserved, peak);
  OK(hippo__device_check(dev));
  OK(hippo__release(s, h));
  close_stream(dev, s, native);
}
END_TEST

int main(void) {
  Suite *s;
  void *probe;
  /* Tools that replace the allocator (valgrind, run by make check-valgrind
   * with HIPPO_VALGRIND set) replace aligned_alloc for the core too: then
   * no failure can be injected, and the test is skipped. */
  fail_aligned = 1;
  probe = getenv("HIPPO_VALGRIND") ? &fail_aligned : aligned_alloc(64, 64);
  fail_aligned = 0;
  if (probe == (void *)&fail_aligned) {
    fprintf(stderr, "under valgrind aligned_alloc is not ours: skip\n");
    return 77;
  }
  if (probe) {
    free(probe);
    fprintf(stderr, "aligned_alloc is not ours here (valgrind?): skip\n");
    return 77;
  }
  s = suite_create("manager");
  TCase *t = tcase_create("host memory");
  tcase_add_test(t, handle_table_full);
  tcase_add_test(t, check_sees_stream_peak);
  suite_add_tcase(s, t);
  return tu_run(s);
}
