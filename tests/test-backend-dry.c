/* test-backend-dry.c -- the DRY backend: synthetic addresses that are
 * distinct, aligned and never reused, no host memory, copies counted but not
 * performed, capacity, no bytes to read, fault injection, streams.
 */
#include <config.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emutest.h"

static hippo__backend *dry_new(uint64_t capacity, uint64_t alignment) {
  return emutest_new(hippo__backend_dry_create, HIPPO_BACKEND_DRY, capacity,
                     alignment);
}

/* Resident set size in bytes, from /proc/self/statm. */
static uint64_t rss_bytes(void) {
  unsigned long size = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fscanf(f, "%lu %lu", &size, &resident), 2);
  fclose(f);
  return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* A page handed out by the backend: [addr, addr + size). */
typedef struct range {
  uint64_t addr, size;
} range;

static void assert_disjoint(const range *r, int n) {
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      ck_assert_msg(r[i].addr + r[i].size <= r[j].addr ||
                        r[j].addr + r[j].size <= r[i].addr,
                    "pages %d [0x%llx,+%llu) and %d [0x%llx,+%llu) overlap",
                    i, (unsigned long long)r[i].addr,
                    (unsigned long long)r[i].size, j,
                    (unsigned long long)r[j].addr,
                    (unsigned long long)r[j].size);
}

START_TEST(addresses_distinct_aligned_never_reused) {
  hippo__backend *be = dry_new(GiB, 0);
  static const uint64_t sizes[] = {256, 4 * KiB, 512, 8 * KiB, 256, 1 * MiB};
  range r[12];
  uint64_t first_end = 0;

  for (int i = 0; i < 6; i++) {
    r[i].size = sizes[i];
    r[i].addr = page_new(be, sizes[i]);
    ck_assert_uint_eq(r[i].addr % 4096, 0); /* max(256, 4096) */
    ck_assert_uint_ge(r[i].addr, TiB);
    if (r[i].addr + r[i].size > first_end)
      first_end = r[i].addr + r[i].size;
  }
  assert_disjoint(r, 6);
  for (int i = 0; i < 6; i++)
    CK_CORE_OK(be->ops->page_free(be, r[i].addr, r[i].size));
  /* After the frees, new pages never land on an old range. */
  for (int i = 6; i < 12; i++) {
    r[i].size = sizes[i - 6];
    r[i].addr = page_new(be, r[i].size);
    ck_assert_uint_ge(r[i].addr, first_end);
    ck_assert_uint_eq(r[i].addr % 4096, 0);
  }
  assert_disjoint(r, 12);
  /* A freed address is gone for good. */
  CK_CORE_FAILS(be->ops->page_free(be, r[0].addr, r[0].size),
                HIPPO_INVALID_ARGUMENT, "not the start of a live page");
  be->ops->destroy(be);
}
END_TEST

START_TEST(large_alignment) {
  hippo__backend *be = dry_new(GiB, 64 * KiB);
  range r[4];
  for (int i = 0; i < 4; i++) {
    r[i].size = 64 * KiB * (uint64_t)(i + 1);
    r[i].addr = page_new(be, r[i].size);
    ck_assert_uint_eq(r[i].addr % (64 * KiB), 0);
  }
  assert_disjoint(r, 4);
  CK_CORE_FAILS(be->ops->page_alloc(be, 4 * KiB, &r[0].addr),
                HIPPO_INVALID_ARGUMENT, "multiple of the alignment 65536");
  be->ops->destroy(be);
}
END_TEST

START_TEST(no_host_memory) {
  hippo__backend *be = dry_new(2 * TiB, 0);
  uint64_t before, after, *addr;
  hippo_emu_counters c;

  addr = calloc(1024, sizeof *addr);
  ck_assert_ptr_nonnull(addr);
  before = rss_bytes();
  for (int i = 0; i < 1024; i++)
    addr[i] = page_new(be, GiB); /* 1 TiB in all */
  after = rss_bytes();
  ck_assert_msg(after < before + 16 * MiB,
                "RSS grew by %llu bytes for 1 TiB of DRY pages",
                (unsigned long long)(after - before));
  c = counters_of(be);
  ck_assert_uint_eq(c.pages_held, 1024);
  ck_assert_uint_eq(c.bytes_held, TiB);
  ck_assert_uint_eq(c.peak_bytes_held, TiB);
  ck_assert_uint_eq(c.host_bytes_mapped, 0);
  for (int i = 0; i < 1024; i++)
    CK_CORE_OK(be->ops->page_free(be, addr[i], GiB));
  c = counters_of(be);
  ck_assert_uint_eq(c.pages_held, 0);
  ck_assert_uint_eq(c.bytes_held, 0);
  ck_assert_uint_eq(c.peak_bytes_held, TiB);
  free(addr);
  be->ops->destroy(be);
}
END_TEST

START_TEST(copies_counted_not_performed) {
  hippo__backend *be = dry_new(GiB, 0);
  uint64_t a = page_new(be, 1 * MiB), b = page_new(be, 1 * MiB);
  void *s, *ev;
  bool done = false;
  hippo_emu_counters c;

  CK_CORE_OK(be->ops->emu_stream_create(be, &s));
  /* Would crash if the synthetic addresses were dereferenced. */
  CK_CORE_OK(be->ops->copy(be, s, b, a, 1 * MiB));
  CK_CORE_OK(be->ops->copy(be, s, b, a + 1000, 2000));
  c = counters_of(be);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_COPY], 2);
  ck_assert_uint_eq(c.bytes_copied, 0); /* queued, not run */
  CK_CORE_OK(be->ops->event_create(be, &ev));
  CK_CORE_OK(be->ops->event_record(be, ev, s));
  CK_CORE_OK(be->ops->copy(be, s, a, b, 4 * KiB));
  CK_CORE_OK(be->ops->event_query(be, ev, &done));
  ck_assert(!done); /* asking runs nothing */
  CK_CORE_OK(be->ops->event_wait(be, ev));
  CK_CORE_OK(be->ops->event_query(be, ev, &done));
  ck_assert(done);
  ck_assert_uint_eq(counters_of(be).bytes_copied, 1 * MiB + 2000);
  CK_CORE_OK(be->ops->stream_sync(be, s));
  c = counters_of(be);
  ck_assert_uint_eq(c.bytes_copied, 1 * MiB + 2000 + 4 * KiB);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_COPY], 3);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_SYNC], 1);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_EVENT], 5);
  CK_CORE_OK(be->ops->event_destroy(be, ev));
  /* Ranges are still checked. */
  CK_CORE_FAILS(be->ops->copy(be, s, b, a + 1 * MiB - 8, 16),
                HIPPO_INVALID_ARGUMENT, "past the end of its page");
  CK_CORE_FAILS(be->ops->copy(be, s, 12345, a, 16), HIPPO_INVALID_ARGUMENT,
                "destination 0x3039 is not inside a live page");
  CK_CORE_OK(be->ops->emu_stream_destroy(be, s));
  be->ops->destroy(be);
}
END_TEST

START_TEST(out_of_memory_at_capacity) {
  hippo__backend *be = dry_new(64 * KiB, 0);
  uint64_t addr = 0, fr = 0, tot = 0;

  ck_assert_uint_eq(be->total_memory, 64 * KiB);
  page_new(be, 32 * KiB);
  page_new(be, 16 * KiB);
  CK_CORE_FAILS(
      be->ops->page_alloc(be, 32 * KiB, &addr), HIPPO_OUT_OF_MEMORY,
      "DRY page_alloc: 32768 bytes requested, 16384 of 65536 bytes free "
      "(emulated capacity)");
  ck_assert_uint_eq(addr, 0);
  CK_CORE_OK(be->ops->mem_info(be, &fr, &tot));
  ck_assert_uint_eq(fr, 16 * KiB);
  ck_assert_uint_eq(tot, 64 * KiB);
  page_new(be, 16 * KiB);
  ck_assert_uint_eq(counters_of(be).bytes_held, 64 * KiB);
  ck_assert_uint_eq(counters_of(be).calls[HIPPO_CALL_ALLOC], 4);
  be->ops->destroy(be);
}
END_TEST

START_TEST(no_bytes) {
  hippo__backend *be = dry_new(GiB, 0);
  uint64_t a = page_new(be, 4 * KiB);
  char buf[16] = {0};

  CK_CORE_FAILS(be->ops->emu_read(be, a, buf, sizeof buf), HIPPO_UNSUPPORTED,
                "a DRY device has no bytes");
  CK_CORE_FAILS(be->ops->emu_write(be, a, buf, sizeof buf), HIPPO_UNSUPPORTED,
                "a DRY device has no bytes");
  be->ops->destroy(be);
}
END_TEST

START_TEST(fault_injection) {
  hippo__backend *be = dry_new(GiB, 0);
  uint64_t a, addr = 0;
  hippo_emu_counters c;

  CK_CORE_OK(
      be->ops->emu_inject_fault(be, HIPPO_CALL_ALLOC, 2, HIPPO_OUT_OF_MEMORY));
  a = page_new(be, 4 * KiB);
  CK_CORE_FAILS(be->ops->page_alloc(be, 4 * KiB, &addr), HIPPO_OUT_OF_MEMORY,
                "injected fault: DRY page_alloc call #2 failed with "
                "HIPPO_OUT_OF_MEMORY");
  c = counters_of(be);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_ALLOC], 2);
  ck_assert_uint_eq(c.pages_held, 1);
  ck_assert_uint_eq(c.bytes_held, 4 * KiB);
  page_new(be, 4 * KiB);

  CK_CORE_OK(
      be->ops->emu_inject_fault(be, HIPPO_CALL_FREE, 1, HIPPO_BACKEND_ERROR));
  CK_CORE_FAILS(be->ops->page_free(be, a, 4 * KiB), HIPPO_BACKEND_ERROR,
                "injected fault: DRY page_free call #1");
  ck_assert_uint_eq(counters_of(be).pages_held, 2);
  CK_CORE_OK(be->ops->page_free(be, a, 4 * KiB));
  ck_assert_uint_eq(counters_of(be).pages_held, 1);

  CK_CORE_FAILS(be->ops->emu_inject_fault(be, HIPPO_CALL_KINDS, 1, HIPPO_BACKEND_ERROR),
                HIPPO_INVALID_ARGUMENT, "call kind 10");
  CK_CORE_FAILS(
      be->ops->emu_inject_fault(be, HIPPO_CALL_SYNC, 1, HIPPO_SUCCESS),
      HIPPO_INVALID_ARGUMENT, "not a failure status");
  be->ops->destroy(be);
}
END_TEST

START_TEST(streams_and_captures) {
  hippo__backend *be = dry_new(GiB, 0);
  void *s;
  uint64_t id = 0;
  bool capturing = false;

  CK_CORE_OK(be->ops->emu_stream_create(be, &s));
  CK_CORE_OK(be->ops->emu_capture_begin(be, s, &id));
  ck_assert_uint_eq(id, 1);
  CK_CORE_OK(be->ops->capture_status(be, s, &capturing, &id));
  ck_assert(capturing);
  ck_assert_uint_eq(id, 1);
  CK_CORE_FAILS(be->ops->emu_stream_destroy(be, s), HIPPO_BUSY, "capturing");
  CK_CORE_OK(be->ops->emu_capture_end(be, s));
  CK_CORE_OK(be->ops->emu_capture_begin(be, s, &id));
  ck_assert_uint_eq(id, 2);
  CK_CORE_OK(be->ops->emu_capture_end(be, s));
  CK_CORE_OK(be->ops->emu_stream_destroy(be, s));
  CK_CORE_FAILS(be->ops->stream_sync(be, s), HIPPO_INVALID_ARGUMENT,
                "not an emulated stream");
  be->ops->destroy(be);
}
END_TEST

static Suite *dry_suite(void) {
  Suite *s = suite_create("backend-dry");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, addresses_distinct_aligned_never_reused);
  tcase_add_test(tc, large_alignment);
  tcase_add_test(tc, no_host_memory);
  tcase_add_test(tc, copies_counted_not_performed);
  tcase_add_test(tc, out_of_memory_at_capacity);
  tcase_add_test(tc, no_bytes);
  tcase_add_test(tc, fault_injection);
  tcase_add_test(tc, streams_and_captures);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(dry_suite()); }
