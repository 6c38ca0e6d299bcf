/* test-backend-host.c -- the HOST backend against the contract of
 * src/backend.h: bytes, deferred copies, capacity, fault injection,
 * captures, bad addresses, exact counters, and pages going back to the OS.
 */
#include <config.h>

#include <check.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emutest.h"

static hippo__backend *host_new(uint64_t capacity, uint64_t alignment) {
  return emutest_new(hippo__backend_host_create, HIPPO_BACKEND_HOST, capacity,
                     alignment);
}

static void fill(hippo__backend *be, uint64_t addr, uint64_t size,
                 unsigned char seed) {
  unsigned char *buf = malloc(size);
  ck_assert_ptr_nonnull(buf);
  for (uint64_t i = 0; i < size; i++)
    buf[i] = (unsigned char)(seed + i * 7);
  CK_CORE_OK(be->ops->emu_write(be, addr, buf, size));
  free(buf);
}

/* Whether byte i at addr reads (unsigned char)(seed + i * step). */
static bool reads_as(hippo__backend *be, uint64_t addr, uint64_t size,
                     unsigned char seed, uint64_t step) {
  unsigned char *buf = malloc(size);
  bool same = true;
  ck_assert_ptr_nonnull(buf);
  CK_CORE_OK(be->ops->emu_read(be, addr, buf, size));
  for (uint64_t i = 0; i < size && same; i++)
    same = buf[i] == (unsigned char)(seed + i * step);
  free(buf);
  return same;
}

/* Whether the bytes at addr are what fill(seed) wrote. */
static bool holds(hippo__backend *be, uint64_t addr, uint64_t size,
                  unsigned char seed) {
  return reads_as(be, addr, size, seed, 7);
}

static bool all_bytes(hippo__backend *be, uint64_t addr, uint64_t size,
                      unsigned char value) {
  return reads_as(be, addr, size, value, 0);
}

static uint64_t os_page(void) { return (uint64_t)sysconf(_SC_PAGESIZE); }

/* Whether any byte of [addr, addr+len) is mapped in this process, from
 * /proc/self/maps (touches nothing, so valgrind stays quiet). */
static bool is_mapped(uint64_t addr, uint64_t len) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  bool mapped = false;
  ck_assert_ptr_nonnull(f);
  while (!mapped && fgets(line, sizeof line, f)) {
    unsigned long long lo, hi;
    if (sscanf(line, "%llx-%llx", &lo, &hi) == 2)
      mapped = lo < addr + len && addr < hi;
  }
  fclose(f);
  return mapped;
}

/* ---- bytes ------------------------------------------------------------- */

START_TEST(write_read_roundtrip) {
  hippo__backend *be = host_new(MiB, 0);
  uint64_t a, b;
  unsigned char part[100];

  ck_assert_uint_eq(be->alignment, 256);
  ck_assert_uint_eq(be->total_memory, MiB);
  a = page_new(be, 8 * KiB);
  b = page_new(be, 256);
  ck_assert_uint_eq(a % 4096, 0);
  ck_assert_uint_eq(b % 4096, 0);
  fill(be, a, 8 * KiB, 3);
  fill(be, b, 256, 99);
  ck_assert(holds(be, a, 8 * KiB, 3));
  ck_assert(holds(be, b, 256, 99));
  /* Reads inside a page at an offset. */
  CK_CORE_OK(be->ops->emu_read(be, a + 1000, part, sizeof part));
  for (unsigned i = 0; i < sizeof part; i++)
    ck_assert_uint_eq(part[i], (unsigned char)(3 + (1000 + i) * 7));
  /* The device address is the host address. */
  ck_assert_uint_eq(((unsigned char *)(uintptr_t)a)[5], (unsigned char)(3 + 35));
  /* Fresh pages read as zeros. */
  {
    uint64_t c = page_new(be, 4 * KiB);
    ck_assert(all_bytes(be, c, 4 * KiB, 0));
  }
  be->ops->destroy(be);
}
END_TEST

START_TEST(large_alignment) {
  hippo__backend *be = host_new(64 * MiB, 2 * MiB);
  uint64_t p[3];
  hippo_emu_counters c;

  ck_assert_uint_eq(be->alignment, 2 * MiB);
  for (int i = 0; i < 3; i++) {
    p[i] = page_new(be, 2 * MiB);
    ck_assert_uint_eq(p[i] % (2 * MiB), 0);
    fill(be, p[i], 2 * MiB, (unsigned char)i);
  }
  c = counters_of(be);
  ck_assert_uint_eq(c.host_bytes_mapped, 6 * MiB);
  for (int i = 0; i < 3; i++)
    ck_assert(holds(be, p[i], 2 * MiB, (unsigned char)i));
  CK_CORE_OK(be->ops->page_free(be, p[1], 2 * MiB));
  ck_assert_uint_eq(counters_of(be).host_bytes_mapped, 4 * MiB);
  be->ops->destroy(be);
}
END_TEST

START_TEST(bad_create) {
  hippo__backend *be = NULL;
  CK_CORE_FAILS(hippo__backend_host_create(MiB, 3, &be), HIPPO_INVALID_ARGUMENT,
                "alignment 3");
  CK_CORE_FAILS(hippo__backend_host_create(MiB, UINT64_C(1) << 31, &be),
                HIPPO_INVALID_ARGUMENT, "power of two");
  ck_assert_ptr_null(be);
  CK_CORE_FAILS(hippo__backend_host_create(MiB, 0, NULL),
                HIPPO_INVALID_ARGUMENT, "NULL");
  /* Zeros take the defaults. */
  be = host_new(0, 0);
  ck_assert_uint_eq(be->total_memory, HIPPO__DEFAULT_CAPACITY);
  ck_assert_uint_eq(be->alignment, HIPPO__DEFAULT_ALIGNMENT);
  be->ops->destroy(be);
}
END_TEST

/* ---- deferred copies --------------------------------------------------- */

START_TEST(copy_waits_for_sync) {
  hippo__backend *be = host_new(MiB, 0);
  void *s;
  uint64_t a = page_new(be, 4 * KiB), b = page_new(be, 4 * KiB);

  CK_CORE_OK(be->ops->emu_stream_create(be, &s));
  ck_assert_ptr_nonnull(s);
  fill(be, a, 4 * KiB, 17);
  CK_CORE_OK(be->ops->copy(be, s, b, a, 4 * KiB));
  /* Not run yet: the destination still holds zeros. */
  ck_assert(all_bytes(be, b, 4 * KiB, 0));
  ck_assert_uint_eq(counters_of(be).bytes_copied, 0);
  /* Syncing another stream does not run it. */
  CK_CORE_OK(be->ops->stream_sync(be, NULL));
  ck_assert(all_bytes(be, b, 4 * KiB, 0));
  CK_CORE_OK(be->ops->stream_sync(be, s));
  ck_assert(holds(be, b, 4 * KiB, 17));
  ck_assert_uint_eq(counters_of(be).bytes_copied, 4 * KiB);

  /* The default stream (NULL) queues too. */
  fill(be, a, 4 * KiB, 55);
  CK_CORE_OK(be->ops->copy(be, NULL, b + 1024, a, 1024));
  ck_assert(holds(be, b, 4 * KiB, 17));
  CK_CORE_OK(be->ops->stream_sync(be, NULL));
  ck_assert(holds(be, b + 1024, 1024, 55));
  ck_assert(holds(be, b, 1024, 17));
  ck_assert_uint_eq(counters_of(be).bytes_copied, 5 * KiB);
  CK_CORE_OK(be->ops->emu_stream_destroy(be, s));
  be->ops->destroy(be);
}
END_TEST

START_TEST(copy_in_stream_order) {
  hippo__backend *be = host_new(MiB, 0);
  uint64_t a = page_new(be, 4 * KiB), b = page_new(be, 4 * KiB),
           c = page_new(be, 4 * KiB);

  fill(be, a, 4 * KiB, 1);
  CK_CORE_OK(be->ops->copy(be, NULL, b, a, 4 * KiB));
  CK_CORE_OK(be->ops->copy(be, NULL, c, b, 4 * KiB));
  CK_CORE_OK(be->ops->stream_sync(be, NULL));
  ck_assert(holds(be, c, 4 * KiB, 1));
  be->ops->destroy(be);
}
END_TEST

START_TEST(copy_overlapping_is_memmove) {
  hippo__backend *be = host_new(MiB, 0);
  uint64_t a = page_new(be, 256);
  unsigned char buf[256];

  for (unsigned i = 0; i < 256; i++)
    buf[i] = (unsigned char)i;
  CK_CORE_OK(be->ops->emu_write(be, a, buf, 256));
  CK_CORE_OK(be->ops->copy(be, NULL, a + 1, a, 200)); /* forward overlap */
  CK_CORE_OK(
      be->ops->copy(be, NULL, a + 50, a + 60, 100)); /* backward overlap */
  CK_CORE_OK(be->ops->stream_sync(be, NULL));
  CK_CORE_OK(be->ops->emu_read(be, a, buf, 256));
  /* After the first: buf[k] = k - 1 for 1 <= k <= 200, buf[0] = 0. */
  /* After the second: buf[50 + j] = old[60 + j] = 59 + j for j < 100. */
  ck_assert_uint_eq(buf[0], 0);
  ck_assert_uint_eq(buf[1], 0);
  ck_assert_uint_eq(buf[49], 48);
  for (unsigned j = 0; j < 100; j++)
    ck_assert_uint_eq(buf[50 + j], 59 + j);
  ck_assert_uint_eq(buf[150], 149);
  ck_assert_uint_eq(buf[200], 199);
  ck_assert_uint_eq(buf[201], 201);
  be->ops->destroy(be);
}
END_TEST

/* An event marks the work queued so far; asking runs nothing (as a
 * device: the work runs at a sync, a wait, a page free that drains it);
 * a wait runs the stream up to the event and no further.  An event is
 * recorded again and again. */
START_TEST(event_query_and_wait) {
  hippo__backend *be = host_new(MiB, 0);
  void *s, *ev, *ev2;
  bool done = true;
  uint64_t a = page_new(be, 4 * KiB), b = page_new(be, 4 * KiB),
           c = page_new(be, 4 * KiB);

  CK_CORE_OK(be->ops->emu_stream_create(be, &s));
  CK_CORE_OK(be->ops->event_create(be, &ev));
  ck_assert_ptr_nonnull(ev);
  CK_CORE_OK(be->ops->event_query(be, ev, &done)); /* recorded on nothing */
  ck_assert(done);
  fill(be, a, 4 * KiB, 9);
  CK_CORE_OK(be->ops->copy(be, s, b, a, 4 * KiB));
  CK_CORE_OK(be->ops->event_record(be, ev, s));
  CK_CORE_OK(be->ops->copy(be, s, c, a, 4 * KiB)); /* after the event */
  CK_CORE_OK(be->ops->event_query(be, ev, &done));
  ck_assert(!done);
  ck_assert(all_bytes(be, b, 4 * KiB, 0)); /* the query ran nothing */
  CK_CORE_OK(be->ops->event_wait(be, ev));
  CK_CORE_OK(be->ops->event_query(be, ev, &done));
  ck_assert(done);
  ck_assert(holds(be, b, 4 * KiB, 9));
  ck_assert(all_bytes(be, c, 4 * KiB, 0)); /* still queued */
  ck_assert_uint_eq(counters_of(be).bytes_copied, 4 * KiB);
  /* recorded again: it marks the copy to c now; a sync finishes it */
  CK_CORE_OK(be->ops->event_record(be, ev, s));
  CK_CORE_OK(be->ops->event_query(be, ev, &done));
  ck_assert(!done);
  CK_CORE_OK(be->ops->stream_sync(be, s));
  CK_CORE_OK(be->ops->event_query(be, ev, &done));
  ck_assert(done);
  ck_assert(holds(be, c, 4 * KiB, 9));
  /* an event with nothing before it is done at once */
  CK_CORE_OK(be->ops->event_create(be, &ev2));
  CK_CORE_OK(be->ops->event_record(be, ev2, NULL));
  done = false;
  CK_CORE_OK(be->ops->event_query(be, ev2, &done));
  ck_assert(done);
  CK_CORE_OK(be->ops->event_destroy(be, ev2));
  /* an event of a destroyed stream: its work ran, the event is done */
  CK_CORE_OK(be->ops->copy(be, s, c, b, 1024));
  CK_CORE_OK(be->ops->event_record(be, ev, s));
  CK_CORE_OK(be->ops->emu_stream_destroy(be, s));
  done = false;
  CK_CORE_OK(be->ops->event_query(be, ev, &done));
  ck_assert(done);
  CK_CORE_OK(be->ops->event_destroy(be, ev));
  ck_assert_uint_eq(counters_of(be).bytes_copied, 9 * KiB);
  be->ops->destroy(be);
}
END_TEST

START_TEST(free_drains_pending_copies) {
  hippo__backend *be = host_new(MiB, 0);
  void *s;
  uint64_t a = page_new(be, 4 * KiB), b = page_new(be, 4 * KiB);

  CK_CORE_OK(be->ops->emu_stream_create(be, &s));
  fill(be, a, 4 * KiB, 77);
  CK_CORE_OK(be->ops->copy(be, s, b, a, 4 * KiB));
  CK_CORE_OK(be->ops->page_free(be, a, 4 * KiB)); /* the copy runs first */
  ck_assert(holds(be, b, 4 * KiB, 77));
  ck_assert_uint_eq(counters_of(be).bytes_copied, 4 * KiB);
  /* Destroying the stream and the backend with work queued is fine. */
  CK_CORE_OK(be->ops->copy(be, s, b, b + 2048, 1024));
  CK_CORE_OK(be->ops->emu_stream_destroy(be, s));
  ck_assert(holds(be, b, 1024, (unsigned char)(77 + 2048 * 7)));
  CK_CORE_OK(be->ops->copy(be, NULL, b, b + 1024, 1024));
  be->ops->destroy(be);
}
END_TEST

/* ---- capacity ---------------------------------------------------------- */

START_TEST(capacity_exhaustion) {
  hippo__backend *be = host_new(16 * KiB, 0);
  uint64_t p[3], q, fr = 1, tot = 0, addr = 0;
  hippo_emu_counters c;

  for (int i = 0; i < 3; i++) {
    p[i] = page_new(be, 4 * KiB);
    fill(be, p[i], 4 * KiB, (unsigned char)(10 * i));
  }
  CK_CORE_FAILS(
      be->ops->page_alloc(be, 8 * KiB, &addr), HIPPO_OUT_OF_MEMORY,
      "HOST page_alloc: 8192 bytes requested, 4096 of 16384 bytes free "
      "(emulated capacity)");
  ck_assert_uint_eq(addr, 0);
  c = counters_of(be);
  ck_assert_uint_eq(c.pages_held, 3);
  ck_assert_uint_eq(c.bytes_held, 12 * KiB);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_ALLOC], 4);
  for (int i = 0; i < 3; i++)
    ck_assert(holds(be, p[i], 4 * KiB, (unsigned char)(10 * i)));
  CK_CORE_OK(be->ops->mem_info(be, &fr, &tot));
  ck_assert_uint_eq(fr, 4 * KiB);
  ck_assert_uint_eq(tot, 16 * KiB);
  q = page_new(be, 4 * KiB); /* exactly full */
  CK_CORE_OK(be->ops->mem_info(be, &fr, &tot));
  ck_assert_uint_eq(fr, 0);
  CK_CORE_FAILS(be->ops->page_alloc(be, 256, &addr), HIPPO_OUT_OF_MEMORY,
                "256 bytes requested, 0 of 16384 bytes free");
  CK_CORE_OK(be->ops->page_free(be, q, 4 * KiB));
  CK_CORE_OK(be->ops->mem_info(be, &fr, NULL));
  ck_assert_uint_eq(fr, 4 * KiB);
  be->ops->destroy(be);
}
END_TEST

/* ---- fault injection --------------------------------------------------- */

START_TEST(fault_alloc_nth) {
  hippo__backend *be = host_new(MiB, 0);
  uint64_t addr = 0;
  hippo_emu_counters c;

  CK_CORE_OK(
      be->ops->emu_inject_fault(be, HIPPO_CALL_ALLOC, 3, HIPPO_BACKEND_ERROR));
  page_new(be, 4 * KiB);
  page_new(be, 4 * KiB);
  CK_CORE_FAILS(be->ops->page_alloc(be, 4 * KiB, &addr), HIPPO_BACKEND_ERROR,
                "injected fault: HOST page_alloc call #3 failed with "
                "HIPPO_BACKEND_ERROR");
  ck_assert_uint_eq(addr, 0);
  c = counters_of(be);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_ALLOC], 3);
  ck_assert_uint_eq(c.pages_held, 2);
  ck_assert_uint_eq(c.bytes_held, 8 * KiB);
  ck_assert_uint_eq(c.host_bytes_mapped, 8 * KiB);
  /* The fault fires once: the next call succeeds. */
  page_new(be, 4 * KiB);
  c = counters_of(be);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_ALLOC], 4);
  ck_assert_uint_eq(c.pages_held, 3);

  /* nth counts from the injection, 1 = the very next call. */
  CK_CORE_OK(
      be->ops->emu_inject_fault(be, HIPPO_CALL_ALLOC, 1, HIPPO_OUT_OF_MEMORY));
  CK_CORE_FAILS(be->ops->page_alloc(be, 4 * KiB, &addr), HIPPO_OUT_OF_MEMORY,
                "injected fault: HOST page_alloc call #5 failed with "
                "HIPPO_OUT_OF_MEMORY");
  ck_assert_uint_eq(counters_of(be).bytes_held, 12 * KiB);

  /* nth == 0 clears. */
  CK_CORE_OK(
      be->ops->emu_inject_fault(be, HIPPO_CALL_ALLOC, 1, HIPPO_OUT_OF_MEMORY));
  CK_CORE_OK(be->ops->emu_inject_fault(be, HIPPO_CALL_ALLOC, 0, HIPPO_SUCCESS));
  page_new(be, 4 * KiB);
  be->ops->destroy(be);
}
END_TEST

START_TEST(fault_bad_arguments) {
  hippo__backend *be = host_new(MiB, 0);
  CK_CORE_FAILS(
      be->ops->emu_inject_fault(be, HIPPO_CALL_KINDS, 1, HIPPO_BACKEND_ERROR),
      HIPPO_INVALID_ARGUMENT, "call kind 10");
  CK_CORE_FAILS(
      be->ops->emu_inject_fault(be, HIPPO_CALL_ALLOC, 1, HIPPO_SUCCESS),
      HIPPO_INVALID_ARGUMENT, "not a failure status");
  CK_CORE_FAILS(be->ops->emu_inject_fault(be, HIPPO_CALL_ALLOC, 1, 999),
                HIPPO_INVALID_ARGUMENT, "not a failure status");
  CK_CORE_FAILS(be->ops->emu_inject_fault(be, HIPPO_CALL_ALLOC, 1, -1),
                HIPPO_INVALID_ARGUMENT, "not a failure status");
  page_new(be, 4 * KiB); /* nothing was armed */
  be->ops->destroy(be);
}
END_TEST

START_TEST(fault_free_keeps_page) {
  hippo__backend *be = host_new(MiB, 0);
  uint64_t a = page_new(be, 4 * KiB);
  hippo_emu_counters c;

  fill(be, a, 4 * KiB, 5);
  CK_CORE_OK(
      be->ops->emu_inject_fault(be, HIPPO_CALL_FREE, 1, HIPPO_BACKEND_ERROR));
  CK_CORE_FAILS(be->ops->page_free(be, a, 4 * KiB), HIPPO_BACKEND_ERROR,
                "injected fault: HOST page_free call #1 failed with "
                "HIPPO_BACKEND_ERROR");
  c = counters_of(be);
  ck_assert_uint_eq(c.pages_held, 1);
  ck_assert_uint_eq(c.bytes_held, 4 * KiB);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_FREE], 1);
  ck_assert(holds(be, a, 4 * KiB, 5));
  CK_CORE_OK(be->ops->page_free(be, a, 4 * KiB));
  c = counters_of(be);
  ck_assert_uint_eq(c.pages_held, 0);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_FREE], 2);
  be->ops->destroy(be);
}
END_TEST

START_TEST(fault_copy_queues_nothing) {
  hippo__backend *be = host_new(MiB, 0);
  uint64_t a = page_new(be, 4 * KiB), b = page_new(be, 4 * KiB);

  fill(be, a, 4 * KiB, 8);
  CK_CORE_OK(
      be->ops->emu_inject_fault(be, HIPPO_CALL_COPY, 2, HIPPO_BACKEND_ERROR));
  CK_CORE_OK(be->ops->copy(be, NULL, b, a, 1024));
  CK_CORE_FAILS(be->ops->copy(be, NULL, b + 1024, a + 1024, 1024),
                HIPPO_BACKEND_ERROR, "HOST copy call #2 failed");
  CK_CORE_OK(be->ops->stream_sync(be, NULL));
  ck_assert(holds(be, b, 1024, 8));
  ck_assert(all_bytes(be, b + 1024, 3 * KiB, 0));
  ck_assert_uint_eq(counters_of(be).bytes_copied, 1024);
  ck_assert_uint_eq(counters_of(be).calls[HIPPO_CALL_COPY], 2);
  be->ops->destroy(be);
}
END_TEST

START_TEST(fault_sync_runs_nothing) {
  hippo__backend *be = host_new(MiB, 0);
  uint64_t a = page_new(be, 4 * KiB), b = page_new(be, 4 * KiB);

  fill(be, a, 4 * KiB, 8);
  CK_CORE_OK(be->ops->copy(be, NULL, b, a, 4 * KiB));
  CK_CORE_OK(
      be->ops->emu_inject_fault(be, HIPPO_CALL_SYNC, 1, HIPPO_BACKEND_ERROR));
  CK_CORE_FAILS(be->ops->stream_sync(be, NULL), HIPPO_BACKEND_ERROR,
                "HOST stream_sync call #1 failed with HIPPO_BACKEND_ERROR");
  ck_assert(all_bytes(be, b, 4 * KiB, 0));
  CK_CORE_OK(be->ops->stream_sync(be, NULL));
  ck_assert(holds(be, b, 4 * KiB, 8));
  ck_assert_uint_eq(counters_of(be).calls[HIPPO_CALL_SYNC], 2);
  be->ops->destroy(be);
}
END_TEST

START_TEST(fault_event_and_capture_query) {
  hippo__backend *be = host_new(MiB, 0);
  uint64_t a = page_new(be, 4 * KiB), b = page_new(be, 4 * KiB), id = 99;
  void *ev = NULL, *s;
  bool done = false, capturing = true;

  fill(be, a, 4 * KiB, 8);
  CK_CORE_OK(be->ops->copy(be, NULL, b, a, 4 * KiB));
  /* event_create, _record, _query and _wait share the HIPPO_CALL_EVENT
   * count. */
  CK_CORE_OK(
      be->ops->emu_inject_fault(be, HIPPO_CALL_EVENT, 1, HIPPO_OUT_OF_MEMORY));
  CK_CORE_FAILS(be->ops->event_create(be, &ev), HIPPO_OUT_OF_MEMORY,
                "HOST event_create call #1 failed");
  ck_assert_ptr_null(ev);
  CK_CORE_OK(be->ops->event_create(be, &ev));
  CK_CORE_OK(
      be->ops->emu_inject_fault(be, HIPPO_CALL_EVENT, 1, HIPPO_BACKEND_ERROR));
  CK_CORE_FAILS(be->ops->event_record(be, ev, NULL), HIPPO_BACKEND_ERROR,
                "HOST event_record call #3 failed");
  CK_CORE_OK(be->ops->event_record(be, ev, NULL));
  CK_CORE_OK(
      be->ops->emu_inject_fault(be, HIPPO_CALL_EVENT, 1, HIPPO_BACKEND_ERROR));
  CK_CORE_FAILS(be->ops->event_wait(be, ev), HIPPO_BACKEND_ERROR,
                "HOST event_wait call #5 failed");
  ck_assert(all_bytes(be, b, 4 * KiB, 0)); /* the failed wait ran nothing */
  CK_CORE_OK(
      be->ops->emu_inject_fault(be, HIPPO_CALL_EVENT, 1, HIPPO_BACKEND_ERROR));
  CK_CORE_FAILS(be->ops->event_query(be, ev, &done), HIPPO_BACKEND_ERROR,
                "HOST event_query call #6 failed");
  ck_assert(!done);
  CK_CORE_OK(be->ops->event_wait(be, ev));
  CK_CORE_OK(be->ops->event_query(be, ev, &done));
  ck_assert(done);
  ck_assert(holds(be, b, 4 * KiB, 8));
  ck_assert_uint_eq(counters_of(be).calls[HIPPO_CALL_EVENT], 8);
  CK_CORE_OK(be->ops->event_destroy(be, ev));
  ck_assert_uint_eq(counters_of(be).calls[HIPPO_CALL_EVENT], 8);

  CK_CORE_OK(be->ops->emu_stream_create(be, &s));
  CK_CORE_OK(be->ops->emu_capture_begin(be, s, &id));
  CK_CORE_OK(be->ops->emu_inject_fault(be, HIPPO_CALL_CAPTURE_QUERY, 1,
                                       HIPPO_BACKEND_ERROR));
  capturing = false;
  CK_CORE_FAILS(be->ops->capture_status(be, s, &capturing, &id),
                HIPPO_BACKEND_ERROR, "HOST capture_status call #1 failed");
  ck_assert(!capturing);
  CK_CORE_OK(be->ops->capture_status(be, s, &capturing, &id));
  ck_assert(capturing);
  ck_assert_uint_eq(id, 1);
  ck_assert_uint_eq(counters_of(be).calls[HIPPO_CALL_CAPTURE_QUERY], 2);
  CK_CORE_OK(be->ops->emu_capture_end(be, s));
  CK_CORE_OK(be->ops->emu_stream_destroy(be, s));
  be->ops->destroy(be);
}
END_TEST

/* ---- captures ---------------------------------------------------------- */

START_TEST(captures) {
  hippo__backend *be = host_new(MiB, 0);
  void *s1, *s2;
  uint64_t id = 99, a = page_new(be, 4 * KiB), b = page_new(be, 4 * KiB);
  bool capturing = true;

  CK_CORE_OK(be->ops->emu_stream_create(be, &s1));
  CK_CORE_OK(be->ops->emu_stream_create(be, &s2));
  ck_assert_ptr_ne(s1, s2);
  CK_CORE_OK(be->ops->capture_status(be, s1, &capturing, &id));
  ck_assert(!capturing);
  ck_assert_uint_eq(id, 0);
  CK_CORE_OK(be->ops->capture_status(be, NULL, &capturing, &id));
  ck_assert(!capturing);

  CK_CORE_OK(be->ops->emu_capture_begin(be, s1, &id));
  ck_assert_uint_eq(id, 1);
  CK_CORE_OK(be->ops->emu_capture_begin(be, s2, &id));
  ck_assert_uint_eq(id, 2);
  CK_CORE_OK(be->ops->capture_status(be, s1, &capturing, &id));
  ck_assert(capturing);
  ck_assert_uint_eq(id, 1);
  CK_CORE_OK(be->ops->capture_status(be, s2, &capturing, &id));
  ck_assert(capturing);
  ck_assert_uint_eq(id, 2);
  CK_CORE_OK(be->ops->capture_status(be, NULL, &capturing, &id));
  ck_assert(!capturing);
  ck_assert_uint_eq(id, 0);

  CK_CORE_FAILS(be->ops->emu_capture_begin(be, s1, &id), HIPPO_INVALID_ARGUMENT,
                "already capturing graph 1");
  CK_CORE_FAILS(be->ops->emu_stream_destroy(be, s1), HIPPO_BUSY, "capturing");
  /* No copy and no sync on a capturing stream (HIP would bake the copy into
   * the graph, and refuses the sync). */
  CK_CORE_FAILS(be->ops->copy(be, s1, b, a, 16), HIPPO_BACKEND_ERROR,
                "capturing graph 1");
  CK_CORE_FAILS(be->ops->stream_sync(be, s1), HIPPO_BACKEND_ERROR,
                "hipErrorStreamCaptureUnsupported");

  CK_CORE_OK(be->ops->emu_capture_end(be, s1));
  CK_CORE_OK(be->ops->capture_status(be, s1, &capturing, &id));
  ck_assert(!capturing);
  ck_assert_uint_eq(id, 0);
  CK_CORE_FAILS(be->ops->emu_capture_end(be, s1), HIPPO_INVALID_ARGUMENT,
                "not capturing");
  CK_CORE_OK(be->ops->emu_capture_begin(be, s1, &id));
  ck_assert_uint_eq(id, 3); /* ids never repeat */
  CK_CORE_OK(be->ops->emu_capture_end(be, s1));
  CK_CORE_OK(be->ops->emu_capture_end(be, s2));

  CK_CORE_FAILS(be->ops->emu_capture_begin(be, NULL, &id),
                HIPPO_INVALID_ARGUMENT, "default stream");
  CK_CORE_FAILS(be->ops->emu_capture_end(be, NULL), HIPPO_INVALID_ARGUMENT,
                "not capturing");
  CK_CORE_OK(be->ops->emu_stream_destroy(be, s1));
  CK_CORE_FAILS(be->ops->emu_stream_destroy(be, s1), HIPPO_INVALID_ARGUMENT,
                "not an emulated stream");
  CK_CORE_FAILS(be->ops->emu_capture_begin(be, s1, &id), HIPPO_INVALID_ARGUMENT,
                "not an emulated stream");
  CK_CORE_FAILS(be->ops->capture_status(be, s1, &capturing, &id),
                HIPPO_INVALID_ARGUMENT, "not an emulated stream");
  CK_CORE_FAILS(be->ops->emu_stream_destroy(be, NULL), HIPPO_INVALID_ARGUMENT,
                "default stream");
  CK_CORE_OK(be->ops->emu_stream_destroy(be, s2));
  be->ops->destroy(be);
}
END_TEST

/* ---- bad addresses ----------------------------------------------------- */

START_TEST(bad_addresses) {
  hippo__backend *be = host_new(MiB, 0);
  uint64_t a = page_new(be, 4 * KiB), b = page_new(be, 4 * KiB), addr = 0;
  unsigned char buf[64];
  int local = 0;
  void *ev = NULL;
  bool done;

  CK_CORE_FAILS(be->ops->emu_read(be, 0, buf, 1), HIPPO_INVALID_ARGUMENT,
                "not inside a live page");
  CK_CORE_FAILS(be->ops->emu_read(be, (uint64_t)(uintptr_t)&local, buf, 1),
                HIPPO_INVALID_ARGUMENT, "not inside a live page");
  CK_CORE_FAILS(be->ops->emu_read(be, a + 4 * KiB - 32, buf, 64),
                HIPPO_INVALID_ARGUMENT,
                "runs 32 bytes past the end of its page");
  CK_CORE_FAILS(be->ops->emu_write(be, a + 4 * KiB - 32, buf, 64),
                HIPPO_INVALID_ARGUMENT,
                "runs 32 bytes past the end of its page");
  CK_CORE_FAILS(be->ops->emu_read(be, UINT64_MAX - 8, buf, 64),
                HIPPO_INVALID_ARGUMENT, "wraps around");
  CK_CORE_FAILS(be->ops->copy(be, NULL, b, a + 4000, 200),
                HIPPO_INVALID_ARGUMENT, "source");
  CK_CORE_FAILS(be->ops->copy(be, NULL, a + 4000, b, 200),
                HIPPO_INVALID_ARGUMENT, "destination");
  CK_CORE_FAILS(be->ops->copy(be, (void *)&local, b, a, 16),
                HIPPO_INVALID_ARGUMENT, "not an emulated stream");
  CK_CORE_FAILS(be->ops->stream_sync(be, (void *)&local),
                HIPPO_INVALID_ARGUMENT, "not an emulated stream");
  CK_CORE_OK(be->ops->event_create(be, &ev));
  CK_CORE_FAILS(be->ops->event_record(be, ev, (void *)&local),
                HIPPO_INVALID_ARGUMENT, "not an emulated stream");
  CK_CORE_FAILS(be->ops->event_record(be, (void *)&local, NULL),
                HIPPO_INVALID_ARGUMENT, "not a live event");
  CK_CORE_FAILS(be->ops->event_wait(be, NULL), HIPPO_INVALID_ARGUMENT,
                "not a live event");
  CK_CORE_OK(be->ops->event_destroy(be, ev));
  CK_CORE_FAILS(be->ops->event_query(be, NULL, &done), HIPPO_INVALID_ARGUMENT,
                "not a live event");
  CK_CORE_FAILS(be->ops->event_destroy(be, NULL), HIPPO_INVALID_ARGUMENT,
                "not a live event");

  CK_CORE_FAILS(be->ops->page_alloc(be, 0, &addr), HIPPO_INVALID_ARGUMENT,
                "not a positive multiple of the alignment 256");
  CK_CORE_FAILS(be->ops->page_alloc(be, 300, &addr), HIPPO_INVALID_ARGUMENT,
                "size 300");
  CK_CORE_FAILS(be->ops->page_free(be, a + 256, 4 * KiB),
                HIPPO_INVALID_ARGUMENT, "not the start of a live page");
  CK_CORE_FAILS(be->ops->page_free(be, a, 8 * KiB), HIPPO_INVALID_ARGUMENT,
                "has 4096 bytes, not the 8192 given");
  CK_CORE_FAILS(be->ops->page_free(be, 0, 4 * KiB), HIPPO_INVALID_ARGUMENT,
                "not the start of a live page");
  CK_CORE_OK(be->ops->page_free(be, a, 4 * KiB));
  CK_CORE_FAILS(be->ops->page_free(be, a, 4 * KiB), HIPPO_INVALID_ARGUMENT,
                "not the start of a live page");
  CK_CORE_FAILS(be->ops->emu_read(be, a, buf, 1), HIPPO_INVALID_ARGUMENT,
                "not inside a live page");
  CK_CORE_FAILS(be->ops->copy(be, NULL, b, a, 16), HIPPO_INVALID_ARGUMENT,
                "source");
  /* Nothing above changed the books. */
  ck_assert_uint_eq(counters_of(be).pages_held, 1);
  ck_assert_uint_eq(counters_of(be).bytes_held, 4 * KiB);
  be->ops->destroy(be);
}
END_TEST

/* ---- counters ---------------------------------------------------------- */

START_TEST(counters_exact) {
  hippo__backend *be = host_new(MiB, 0);
  hippo_emu_counters c;
  uint64_t a, b, d, addr;
  void *ev;
  bool done, capturing;

  c = counters_of(be);
  for (unsigned k = 0; k < HIPPO_CALL_KINDS; k++)
    ck_assert_uint_eq(c.calls[k], 0);
  ck_assert_uint_eq(c.pages_held + c.bytes_held + c.peak_bytes_held +
                        c.host_bytes_mapped + c.bytes_copied,
                    0);

  a = page_new(be, 256);       /* maps one OS page */
  b = page_new(be, 8 * KiB);   /* two */
  d = page_new(be, 64 * KiB);
  CK_CORE_FAILS(be->ops->page_alloc(be, 2 * MiB, &addr), HIPPO_OUT_OF_MEMORY,
                "2097152 bytes requested");
  c = counters_of(be);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_ALLOC], 4);
  ck_assert_uint_eq(c.pages_held, 3);
  ck_assert_uint_eq(c.bytes_held, 256 + 8 * KiB + 64 * KiB);
  ck_assert_uint_eq(c.peak_bytes_held, 256 + 8 * KiB + 64 * KiB);
  ck_assert_uint_eq(c.host_bytes_mapped, os_page() + 8 * KiB + 64 * KiB);

  CK_CORE_OK(be->ops->page_free(be, d, 64 * KiB));
  CK_CORE_OK(be->ops->copy(be, NULL, b, a, 256));
  CK_CORE_OK(be->ops->copy(be, NULL, b + 256, a, 100));
  CK_CORE_OK(be->ops->copy(be, NULL, b, a, 0)); /* counted, copies nothing */
  CK_CORE_OK(be->ops->stream_sync(be, NULL));
  CK_CORE_OK(be->ops->stream_sync(be, NULL));
  CK_CORE_OK(be->ops->event_create(be, &ev));
  CK_CORE_OK(be->ops->event_record(be, ev, NULL));
  CK_CORE_OK(be->ops->event_query(be, ev, &done));
  CK_CORE_OK(be->ops->event_destroy(be, ev));
  CK_CORE_OK(be->ops->capture_status(be, NULL, &capturing, NULL));
  c = counters_of(be);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_ALLOC], 4);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_FREE], 1);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_COPY], 3);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_SYNC], 2);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_EVENT], 3);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_CAPTURE_QUERY], 1);
  ck_assert_uint_eq(c.pages_held, 2);
  ck_assert_uint_eq(c.bytes_held, 256 + 8 * KiB);
  ck_assert_uint_eq(c.peak_bytes_held, 256 + 8 * KiB + 64 * KiB);
  ck_assert_uint_eq(c.host_bytes_mapped, os_page() + 8 * KiB);
  ck_assert_uint_eq(c.bytes_copied, 356);

  /* A peak is a peak: a bigger set later raises it. */
  d = page_new(be, 128 * KiB);
  ck_assert_uint_eq(counters_of(be).peak_bytes_held, 256 + 136 * KiB);
  CK_CORE_OK(be->ops->page_free(be, d, 128 * KiB));
  CK_CORE_OK(be->ops->page_free(be, a, 256));
  CK_CORE_OK(be->ops->page_free(be, b, 8 * KiB));
  c = counters_of(be);
  ck_assert_uint_eq(c.pages_held, 0);
  ck_assert_uint_eq(c.bytes_held, 0);
  ck_assert_uint_eq(c.host_bytes_mapped, 0);
  ck_assert_uint_eq(c.peak_bytes_held, 256 + 136 * KiB);
  be->ops->destroy(be);
}
END_TEST

START_TEST(counters_struct_size) {
  hippo__backend *be = host_new(MiB, 0);
  struct {
    hippo_emu_counters c;
    uint64_t newer[2];
  } big;
  hippo_emu_counters small;

  page_new(be, 4 * KiB);
  /* An older caller's smaller struct, every size hippo.h promises to
   * take (8 .. sizeof, multiples of 8): filled that far, no further. */
  for (uint32_t size = 8; size <= sizeof small; size += 8) {
    memset(&small, 0xab, sizeof small);
    small.struct_size = size;
    CK_CORE_OK(be->ops->emu_counters(be, &small));
    ck_assert_uint_eq(small.struct_size, size);
    if (size >= offsetof(hippo_emu_counters, bytes_held) + 8)
      ck_assert_uint_eq(small.pages_held, 1);
    if (size < sizeof small)
      ck_assert_uint_eq(((unsigned char *)&small)[size], 0xab);
  }
  small.struct_size = 12;
  CK_CORE_FAILS(be->ops->emu_counters(be, &small), HIPPO_INVALID_ARGUMENT,
                "struct_size is 12");
  small.struct_size = 4;
  CK_CORE_FAILS(be->ops->emu_counters(be, &small), HIPPO_INVALID_ARGUMENT,
                "struct_size is 4");
  CK_CORE_FAILS(be->ops->emu_counters(be, NULL), HIPPO_INVALID_ARGUMENT,
                "NULL");
  /* A newer caller's larger struct: known fields filled, the rest zeroed,
   * its size the plugin's (HIPPO_HAS: the fields past it were not
   * filled). */
  memset(&big, 0xff, sizeof big);
  big.c.struct_size = sizeof big;
  CK_CORE_OK(be->ops->emu_counters(be, &big.c));
  ck_assert_uint_eq(big.c.struct_size, sizeof big.c);
  ck_assert_uint_eq(big.c.pages_held, 1);
  ck_assert_uint_eq(big.c.bytes_held, 4 * KiB);
  ck_assert_uint_eq(big.newer[0], 0);
  ck_assert_uint_eq(big.newer[1], 0);
  be->ops->destroy(be);
}
END_TEST

/* ---- pages go back to the OS ------------------------------------------- */

START_TEST(freed_page_is_unmapped) {
  hippo__backend *be = host_new(MiB, 0);
  uint64_t a = page_new(be, 16 * KiB);
  void *p = (void *)(uintptr_t)a;

  fill(be, a, 16 * KiB, 1);
  ck_assert_int_eq(msync(p, 16 * KiB, MS_ASYNC), 0);
  ck_assert(is_mapped(a, 16 * KiB));
  CK_CORE_OK(be->ops->page_free(be, a, 16 * KiB));
  ck_assert(!is_mapped(a, 16 * KiB));
  be->ops->destroy(be);
}
END_TEST

START_TEST(destroy_unmaps_everything) {
  hippo__backend *be = host_new(MiB, 0);
  uint64_t a = page_new(be, 4 * KiB), b = page_new(be, 4 * KiB);
  CK_CORE_OK(be->ops->copy(be, NULL, b, a, 4 * KiB)); /* still queued */
  ck_assert(is_mapped(a, 4 * KiB) && is_mapped(b, 4 * KiB));
  be->ops->destroy(be);
  ck_assert(!is_mapped(a, 4 * KiB));
  ck_assert(!is_mapped(b, 4 * KiB));
}
END_TEST

/* ---- threads ----------------------------------------------------------- */

#define THREADS 4
#define ROUNDS 500

static void *churn(void *arg) {
  hippo__backend *be = arg;
  uint64_t held[8];
  for (int r = 0; r < ROUNDS; r++) {
    for (int i = 0; i < 8; i++)
      if (be->ops->page_alloc(be, 4 * KiB, &held[i]) != HIPPO_SUCCESS)
        return (void *)1;
    if (be->ops->copy(be, NULL, held[1], held[0], 64) != HIPPO_SUCCESS)
      return (void *)1;
    for (int i = 0; i < 8; i++)
      if (be->ops->page_free(be, held[i], 4 * KiB) != HIPPO_SUCCESS)
        return (void *)1;
  }
  return NULL;
}

START_TEST(threads_share_one_backend) {
  hippo__backend *be = host_new(THREADS * 8 * 4 * KiB, 0);
  pthread_t t[THREADS];
  hippo_emu_counters c;
  void *rv;

  for (int i = 0; i < THREADS; i++)
    ck_assert_int_eq(pthread_create(&t[i], NULL, churn, be), 0);
  for (int i = 0; i < THREADS; i++) {
    ck_assert_int_eq(pthread_join(t[i], &rv), 0);
    ck_assert_ptr_null(rv);
  }
  c = counters_of(be);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_ALLOC], THREADS * ROUNDS * 8);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_FREE], THREADS * ROUNDS * 8);
  ck_assert_uint_eq(c.bytes_copied, THREADS * ROUNDS * 64);
  ck_assert_uint_eq(c.pages_held, 0);
  ck_assert_uint_eq(c.bytes_held, 0);
  ck_assert_uint_le(c.peak_bytes_held, THREADS * 8 * 4 * KiB);
  be->ops->destroy(be);
}
END_TEST

static Suite *host_suite(void) {
  Suite *s = suite_create("backend-host");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, write_read_roundtrip);
  tcase_add_test(tc, large_alignment);
  tcase_add_test(tc, bad_create);
  tcase_add_test(tc, copy_waits_for_sync);
  tcase_add_test(tc, copy_in_stream_order);
  tcase_add_test(tc, copy_overlapping_is_memmove);
  tcase_add_test(tc, event_query_and_wait);
  tcase_add_test(tc, free_drains_pending_copies);
  tcase_add_test(tc, capacity_exhaustion);
  tcase_add_test(tc, fault_alloc_nth);
  tcase_add_test(tc, fault_bad_arguments);
  tcase_add_test(tc, fault_free_keeps_page);
  tcase_add_test(tc, fault_copy_queues_nothing);
  tcase_add_test(tc, fault_sync_runs_nothing);
  tcase_add_test(tc, fault_event_and_capture_query);
  tcase_add_test(tc, captures);
  tcase_add_test(tc, bad_addresses);
  tcase_add_test(tc, counters_exact);
  tcase_add_test(tc, counters_struct_size);
  tcase_add_test(tc, freed_page_is_unmapped);
  tcase_add_test(tc, destroy_unmaps_everything);
  tcase_add_test(tc, threads_share_one_backend);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(host_suite()); }
