/* test-host-memory.c -- what happens when host memory runs out, and a
 * reservation whose lock is dropped: a stream manager's failure paths
 * that need host memory to run out (the test program defines
 * aligned_alloc, which the core's arrays use, and makes it fail on
 * demand; skipped under valgrind, whose allocator replaces it), and the
 * out-of-memory retry, which drops the stream lock, racing another
 * thread of the same stream. */
#include <config.h>

#include <check.h>
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>

#define TU_CORE 1
#include "ladder.h"
#include "manager.h"
#include "testutil.h"

static int fail_aligned; /* aligned_alloc fails while set */

void *aligned_alloc(size_t alignment, size_t size) {
  return fail_aligned ? NULL : memalign(alignment, size);
}

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
  CK_CORE_OK(
      hippo__device_open(&desc, &l.layout, l.pools, &hippo__ladder_hooks, dev));
  CK_CORE_OK((*dev)->be->ops->emu_stream_create((*dev)->be, native));
  CK_CORE_OK(hippo__stream_attach(*dev, *native, &s));
  return s;
}

static void close_stream(hippo_device *dev, hippo_stream *s, void *native) {
  CK_CORE_OK(hippo__stream_detach(s));
  CK_CORE_OK(dev->be->ops->emu_stream_destroy(dev->be, native));
  CK_CORE_OK(hippo__device_close(dev));
}

/* A reservation that finds the handle table full and cannot grow it fails
 * before any pool serves it, even one a SLICED pool would name (the table
 * makes room before routing): no page taken, no figure moved. */
START_TEST(handle_table_full) {
  hippo_device *dev;
  hippo_stream *s;
  hippo_usage before, after;
  hippo_pool_report rb, ra;
  hippo_pool_options ob, oa;
  hippo_handle h;
  hippo_status st;
  void *native;
  s = open_stream(&dev, &native);
  /* fill the table: the SLICED pool names its reservations itself, so
   * zero-size ones take the slots */
  CK_CORE_OK(hippo__reserve(s, 256, HIPPO_MODE_AUTO, &h));
  ck_assert_uint_eq(s->handles.count, 0);
  ck_assert_uint_gt(s->handles.cap, 0);
  while (s->handles.count < s->handles.cap)
    CK_CORE_OK(hippo__reserve(s, 0, HIPPO_MODE_AUTO, &h));
  CK_CORE_OK(hippo__stream_usage(s, &before));
  CK_CORE_OK(hippo__pool_report_get(s, 1, &rb, &ob));
  fail_aligned = 1;
  st = hippo__reserve(s, 60000, HIPPO_MODE_AUTO, &h);
  fail_aligned = 0;
  CK_CORE_FAILS(st, HIPPO_OUT_OF_MEMORY, "handle table");
  CK_CORE_OK(hippo__stream_usage(s, &after));
  CK_CORE_OK(hippo__pool_report_get(s, 1, &ra, &oa));
  ck_assert_mem_eq(&before, &after, sizeof before);
  ck_assert_mem_eq(&rb, &ra, sizeof rb);
  ck_assert_mem_eq(&ob, &oa, sizeof ob);
  CK_CORE_OK(hippo__device_check(dev));
  /* memory is back */
  CK_CORE_OK(hippo__reserve(s, 60000, HIPPO_MODE_AUTO, &h));
  CK_CORE_OK(hippo__device_check(dev));
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
  CK_CORE_OK(hippo__reserve(s, 1000, HIPPO_MODE_AUTO, &h));
  CK_CORE_OK(hippo__device_check(dev));
  peak = atomic_load(&s->acct.peak_bytes_reserved);
  atomic_store(&s->acct.peak_bytes_reserved, 0);
  CK_CORE_FAILS(hippo__device_check(dev), HIPPO_INTERNAL, "peak");
  atomic_store(&s->acct.peak_bytes_reserved, peak);
  CK_CORE_OK(hippo__device_check(dev));
  CK_CORE_OK(hippo__release(s, h));
  close_stream(dev, s, native);
}
END_TEST

/* ---- a reservation that drops its lock (the out-of-memory retry) ---------
 * The retry gives the stream's empty pages back and frees them with the
 * stream lock dropped (hipFree may wait).  Another thread of the same
 * stream may meanwhile take the handle table's last free slot: the
 * retry must make room again before a pool serves, and fail cleanly when
 * the table cannot grow, instead of naming the reservation by a slot it
 * never got.  The DRY backend's page_free is wrapped so the first free
 * of the retry waits until the other thread's reservation is done. */

static const hippo__backend_ops *real_ops;
static hippo__backend_ops blocking_ops;
static sem_t in_flush, go_on;
static int block_next_free; /* the next page_free waits for go_on */

static hippo_status blocking_free(hippo__backend *be, uint64_t addr,
                                  uint64_t size) {
  if (block_next_free) {
    block_next_free = 0;
    sem_post(&in_flush);
    while (sem_wait(&go_on) != 0)
      ;
  }
  return real_ops->page_free(be, addr, size);
}

typedef struct taker {
  hippo_stream *s;
  hippo_status st;
} taker;

/* The other thread: once the retry is in its free, a zero-size
 * reservation takes the table's last slot; then the table may not grow. */
static void *take_last_slot(void *arg) {
  taker *t = arg;
  hippo_handle h;
  while (sem_wait(&in_flush) != 0)
    ;
  t->st = hippo__reserve(t->s, 0, HIPPO_MODE_AUTO, &h);
  fail_aligned = 1;
  sem_post(&go_on);
  return NULL;
}

START_TEST(retry_flush_loses_room) {
  tu_layout l;
  hippo_device_desc desc;
  hippo_device *dev;
  hippo_stream *s;
  hippo_handle a1, a2, h;
  hippo_pool_options *o;
  hippo_usage u;
  pthread_t th;
  taker t;
  void *native;
  hippo_status st;
  /* a DRY device of 4 MiB, one EXCLUSIVE pool: its reservations are
   * named by the table */
  TU_SIZED(desc);
  desc.backend = HIPPO_BACKEND_DRY;
  desc.capacity = 4 * TU_MiB;
  tu_layout_init(&l);
  o = tu_layout_add(&l, HIPPO_POOL_EXCLUSIVE);
  o->max_alloc_size = 4 * TU_MiB;
  CK_CORE_OK(hippo__device_open(&desc, &l.layout, l.pools, &hippo__ladder_hooks,
                                &dev));
  CK_CORE_OK(dev->be->ops->emu_stream_create(dev->be, &native));
  CK_CORE_OK(hippo__stream_attach(dev, native, &s));
  real_ops = dev->be->ops;
  blocking_ops = *real_ops;
  blocking_ops.page_free = blocking_free;
  dev->be->ops = &blocking_ops;
  ck_assert_int_eq(sem_init(&in_flush, 0, 0), 0);
  ck_assert_int_eq(sem_init(&go_on, 0, 0), 0);
  /* two pages fill the device; the table fills up with zero-size
   * reservations; then the two are released (two free slots, two free
   * pages) and one slot is taken again: one free slot is left */
  CK_CORE_OK(hippo__reserve(s, 2 * TU_MiB, HIPPO_MODE_AUTO, &a1));
  CK_CORE_OK(hippo__reserve(s, 2 * TU_MiB, HIPPO_MODE_AUTO, &a2));
  while (s->handles.count < s->handles.cap)
    CK_CORE_OK(hippo__reserve(s, 0, HIPPO_MODE_AUTO, &h));
  CK_CORE_OK(hippo__release(s, a1));
  CK_CORE_OK(hippo__release(s, a2));
  CK_CORE_OK(hippo__reserve(s, 0, HIPPO_MODE_AUTO, &h));
  ck_assert(hippo__handles_room(&s->handles));
  CK_CORE_OK(hippo__device_check(dev));
  /* 4 MiB: no free page fits, the device is full; the retry gives the
   * two free pages back and, in their free, the other thread takes the
   * last slot */
  t.s = s;
  t.st = HIPPO_INTERNAL;
  block_next_free = 1;
  ck_assert_int_eq(pthread_create(&th, NULL, take_last_slot, &t), 0);
  st = hippo__reserve(s, 4 * TU_MiB, HIPPO_MODE_AUTO, &h);
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  fail_aligned = 0;
  ck_assert_int_eq(t.st, HIPPO_SUCCESS);
  CK_CORE_FAILS(st, HIPPO_OUT_OF_MEMORY, "handle table");
  /* nothing served: no page held, every slot live is a zero-size one */
  CK_CORE_OK(hippo__stream_usage(s, &u));
  ck_assert_uint_eq(u.pages, 0);
  ck_assert_uint_eq(u.bytes_reserved, 0);
  ck_assert_uint_eq(u.bytes_in_use, 0);
  ck_assert_uint_eq(u.allocations, s->handles.cap);
  CK_CORE_OK(hippo__device_check(dev));
  /* memory back */
  CK_CORE_OK(hippo__reserve(s, 4 * TU_MiB, HIPPO_MODE_AUTO, &h));
  ck_assert_uint_eq(s->handles.cap, 512);
  CK_CORE_OK(hippo__device_check(dev));
  dev->be->ops = real_ops;
  sem_destroy(&in_flush);
  sem_destroy(&go_on);
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
  s = suite_create("host-memory");
  TCase *t = tcase_create("host memory");
  tcase_add_test(t, handle_table_full);
  tcase_add_test(t, check_sees_stream_peak);
  tcase_add_test(t, retry_flush_loses_room);
  suite_add_tcase(s, t);
  return tu_run(s);
}
