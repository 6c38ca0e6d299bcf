/* test-sliced.c -- the SLICED pool on a fake backend: exact offsets,
 * splitting and coalescing, caps and spill statuses, shrink below page,
 * cap below alignment, periodic deallocation after exactly a period,
 * cleanup, failures that change nothing, the pool's own names for its
 * reservations (generations, stale names, retirement), and a seeded
 * randomized run against a reference model with the check walk after every
 * operation.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#define TU_CORE 1
#include "handles.h"
#include "layout.h"
#include "testutil.h"

/* ---- a fake backend: bump addresses, counted calls, scripted failures --- */
typedef struct fake {
  hippo__backend head;
  uint64_t next;          /* next page address */
  uint64_t allocs, frees; /* successful calls */
  uint64_t held;          /* bytes held */
  int fail_alloc;         /* fail the next n allocs */
  int fail_free;          /* fail the next n frees */
} fake;

static hippo_status fake_alloc(hippo__backend *be, uint64_t size,
                               uint64_t *addr) {
  fake *f = (fake *)be;
  if (f->fail_alloc > 0) {
    f->fail_alloc--;
    return hippo__error_set(HIPPO_OUT_OF_MEMORY, "fake page_alloc failed");
  }
  *addr = f->next;
  f->next += (size + 0xFFFFF) & ~(uint64_t)0xFFFFF; /* 1 MiB apart */
  f->next += 1 << 20;                               /* and a gap */
  f->allocs++;
  f->held += size;
  return HIPPO_SUCCESS;
}

static hippo_status fake_free(hippo__backend *be, uint64_t addr,
                              uint64_t size) {
  fake *f = (fake *)be;
  (void)addr;
  if (f->fail_free > 0) {
    f->fail_free--;
    return hippo__error_set(HIPPO_BACKEND_ERROR, "fake page_free failed");
  }
  f->frees++;
  f->held -= size;
  return HIPPO_SUCCESS;
}

static const hippo__backend_ops fake_ops = {.page_alloc = fake_alloc,
                                            .page_free = fake_free};

static fake fb;
static hippo__page_acct acct;

static void setup(void) {
  memset(&fb, 0, sizeof fb);
  fb.head.ops = &fake_ops;
  fb.head.kind = HIPPO_BACKEND_DRY;
  fb.head.alignment = 256;
  fb.head.total_memory = UINT64_C(16) << 30;
  fb.next = UINT64_C(1) << 32;
  memset(&acct, 0, sizeof acct);
}

/* A pool of `kind` (SLICED or ARENA) on fake backend f. */
static hippo__pool *make_on(fake *f, hippo_pool_kind kind, uint64_t page,
                            uint64_t max_slice, uint64_t cap,
                            uint64_t period) {
  hippo_pool_options o = {.struct_size = sizeof o,
                          .kind = kind,
                          .page_size = page,
                          .max_slice_size = max_slice,
                          .max_pool_size = cap,
                          .dealloc_period = period};
  hippo__pool *p = NULL;
  ck_assert_int_eq(hippo__pool_create(&f->head, &acct, &o, &p),
                   HIPPO_SUCCESS);
  return p;
}

static hippo__pool *make(uint64_t page, uint64_t max_slice, uint64_t cap,
                         uint64_t period) {
  return make_on(&fb, HIPPO_POOL_SLICED, page, max_slice, cap, period);
}

static hippo__slice_ref take(hippo__pool *p, uint64_t size) {
  hippo__slice_ref r;
  hippo_status st = p->ops->reserve(p, size, &r);
  ck_assert_msg(st == HIPPO_SUCCESS, "reserve %llu: %s",
                (unsigned long long)size, hippo__error_get());
  CK_POOL_CHECK(p);
  return r;
}

#define KiB TU_KiB
#define MiB TU_MiB

START_TEST(exact_offsets_and_padding) {
  hippo__pool *p = make(MiB, 256 * KiB, 0, 0);
  hippo__slice_ref a = take(p, 1000), b = take(p, 256), c = take(p, 4097);
  hippo_pool_report r;
  uint64_t base = a.addr;
  ck_assert_uint_eq(b.addr - base, 1024);
  ck_assert_uint_eq(c.addr - base, 1280);
  ck_assert_uint_eq(p->bytes_in_use, 1000 + 256 + 4097);
  ck_assert_uint_eq(p->bytes_padding, 24 + 0 + 255);
  ck_assert_uint_eq(p->bytes_reserved, MiB);
  ck_assert_uint_eq(p->pages, 1);
  ck_assert_uint_eq(fb.allocs, 1);
  p->ops->report(p, &r);
  ck_assert_uint_eq(r.bytes_free, MiB - 1024 - 256 - 4352);
  ck_assert_uint_eq(r.largest_free, MiB - 1024 - 256 - 4352);
  ck_assert_uint_eq(r.largest_allocation, 4097);
  /* a freed hole between live slices is found again, exactly */
  p->ops->release(p, b.slice, 256);
  CK_POOL_CHECK(p);
  b = take(p, 200);
  ck_assert_uint_eq(b.addr - base, 1024);
  ck_assert_uint_eq(p->bytes_padding, 24 + 56 + 255);
  p->ops->destroy(p);
  ck_assert_uint_eq(fb.held, 0);
}
END_TEST

START_TEST(coalesce_back_to_one_slice) {
  hippo__pool *p = make(MiB, 256 * KiB, 0, 0);
  hippo__slice_ref s[8];
  hippo_pool_report r;
  for (int i = 0; i < 8; i++)
    s[i] = take(p, 10 * KiB);
  /* release in an order that merges with the left, the right and both */
  int order[8] = {1, 3, 2, 0, 6, 4, 5, 7};
  for (int i = 0; i < 8; i++) {
    p->ops->release(p, s[order[i]].slice, 10 * KiB);
    CK_POOL_CHECK(p);
  }
  p->ops->report(p, &r);
  ck_assert_uint_eq(r.largest_free, MiB); /* one free slice again */
  ck_assert_uint_eq(r.bytes_free, MiB);
  ck_assert_uint_eq(p->allocations, 0);
  /* the whole page is reusable as one slice of max size */
  s[0] = take(p, 256 * KiB);
  ck_assert_uint_eq(s[0].addr, (UINT64_C(1) << 32));
  ck_assert_uint_eq(fb.allocs, 1);
  p->ops->destroy(p);
}
END_TEST

START_TEST(new_page_when_full) {
  hippo__pool *p = make(MiB, MiB, 0, 0);
  hippo__slice_ref a = take(p, MiB), b = take(p, 1);
  ck_assert_uint_eq(p->pages, 2);
  ck_assert_uint_eq(p->peak_pages, 2);
  ck_assert_uint_ne(a.addr, b.addr);
  p->ops->release(p, a.slice, MiB);
  CK_POOL_CHECK(p);
  ck_assert_int_eq(p->ops->cleanup(p), HIPPO_SUCCESS);
  CK_POOL_CHECK(p);
  ck_assert_uint_eq(p->pages, 1); /* the empty one went back */
  ck_assert_uint_eq(p->peak_pages, 2);
  ck_assert_uint_eq(fb.frees, 1);
  ck_assert_uint_eq(atomic_load(&acct.bytes_reserved), MiB);
  ck_assert_uint_eq(atomic_load(&acct.peak_bytes_reserved), 2 * MiB);
  p->ops->destroy(p);
}
END_TEST

START_TEST(cap_in_whole_pages) {
  hippo__pool *p = make(64 * KiB, 64 * KiB, 200 * KiB, 0); /* 3 pages */
  hippo__slice_ref r;
  for (int i = 0; i < 3; i++)
    take(p, 64 * KiB);
  ck_assert_int_eq(p->ops->reserve(p, 1, &r), HIPPO_POOL_CAPACITY_EXCEEDED);
  ck_assert_ptr_nonnull(strstr(hippo__error_get(), "max_pool_size"));
  ck_assert_uint_eq(fb.allocs, 3);
  ck_assert_uint_eq(p->pages, 3);
  CK_POOL_CHECK(p);
  p->ops->destroy(p);
}
END_TEST

START_TEST(cap_below_page_shrinks_page) {
  hippo__pool *p = make(MiB, 256 * KiB, 300 * KiB + 100, 0);
  hippo_pool_report r;
  hippo__slice_ref s;
  p->ops->report(p, &r);
  ck_assert_uint_eq(p->opt.page_size, 300 * KiB); /* rounded down */
  take(p, 200 * KiB);
  ck_assert_uint_eq(p->bytes_reserved, 300 * KiB);
  ck_assert_int_eq(p->ops->reserve(p, 200 * KiB, &s),
                   HIPPO_POOL_CAPACITY_EXCEEDED);
  take(p, 100 * KiB); /* exactly the rest */
  ck_assert_uint_eq(fb.allocs, 1);
  p->ops->destroy(p);
}
END_TEST

START_TEST(slice_larger_than_shrunk_page) {
  hippo__pool *p = make(MiB, 512 * KiB, 256 * KiB, 0);
  hippo__slice_ref s;
  ck_assert_uint_eq(p->max_size, 512 * KiB);
  ck_assert_int_eq(p->ops->reserve(p, 300 * KiB, &s),
                   HIPPO_POOL_CAPACITY_EXCEEDED);
  ck_assert_uint_eq(fb.allocs, 0);
  CK_POOL_CHECK(p);
  p->ops->destroy(p);
}
END_TEST

START_TEST(cap_below_alignment_never_allocates) {
  hippo__pool *p = make(MiB, 256 * KiB, 100, 0);
  hippo__slice_ref s;
  for (uint64_t size = 1; size <= 256 * KiB; size *= 4)
    ck_assert_int_eq(p->ops->reserve(p, size, &s),
                     HIPPO_POOL_CAPACITY_EXCEEDED);
  ck_assert_uint_eq(fb.allocs, 0);
  ck_assert_uint_eq(p->pages, 0);
  CK_POOL_CHECK(p);
  p->ops->destroy(p);
}
END_TEST

START_TEST(dealloc_after_exactly_a_period) {
  hippo__pool *p = make(MiB, MiB, 0, 5);
  hippo__slice_ref s;
  ck_assert_int_eq(p->ops->tick(p, 1), HIPPO_SUCCESS);
  s = take(p, 1000);
  ck_assert_int_eq(p->ops->tick(p, 2), HIPPO_SUCCESS);
  p->ops->release(p, s.slice, 1000); /* empty since clock 2 */
  for (uint64_t now = 3; now < 7; now++) {
    ck_assert_int_eq(p->ops->tick(p, now), HIPPO_SUCCESS);
    ck_assert_uint_eq(p->pages, 1);
  }
  ck_assert_int_eq(p->ops->tick(p, 7), HIPPO_SUCCESS); /* 7 - 2 == 5 */
  ck_assert_uint_eq(p->pages, 0);
  ck_assert_uint_eq(fb.frees, 1);
  CK_POOL_CHECK(p);
  /* a page reused before its period ends is kept */
  s = take(p, 1000);
  ck_assert_int_eq(p->ops->tick(p, 8), HIPPO_SUCCESS);
  p->ops->release(p, s.slice, 1000);
  ck_assert_int_eq(p->ops->tick(p, 12), HIPPO_SUCCESS);
  s = take(p, 1000);
  ck_assert_int_eq(p->ops->tick(p, 100), HIPPO_SUCCESS);
  ck_assert_uint_eq(p->pages, 1);
  CK_POOL_CHECK(p);
  p->ops->destroy(p);
}
END_TEST

START_TEST(failed_page_alloc_changes_nothing) {
  hippo__pool *p = make(MiB, MiB, 0, 0);
  hippo__slice_ref s = take(p, MiB), t;
  uint64_t used = p->bytes_in_use, res = p->bytes_reserved;
  fb.fail_alloc = 1;
  ck_assert_int_eq(p->ops->reserve(p, 4096, &t), HIPPO_OUT_OF_MEMORY);
  ck_assert_ptr_nonnull(strstr(hippo__error_get(), "fake page_alloc"));
  ck_assert_uint_eq(p->bytes_in_use, used);
  ck_assert_uint_eq(p->bytes_reserved, res);
  ck_assert_uint_eq(p->allocations, 1);
  CK_POOL_CHECK(p);
  t = take(p, 4096); /* and the next try works */
  ck_assert_uint_ne(t.addr, s.addr);
  p->ops->destroy(p);
}
END_TEST

/* Periodic deallocation keeps a page whose free fails and tries it a
 * whole period later; the page behind it in the FIFO still goes. */
START_TEST(tick_free_failure_waits_a_period) {
  hippo__pool *p = make(MiB, MiB, 0, 4);
  hippo__slice_ref s = take(p, 5000), t = take(p, MiB);
  ck_assert_int_eq(p->ops->tick(p, 1), HIPPO_SUCCESS);
  p->ops->release(p, s.slice, 5000); /* empty since 1, first */
  p->ops->release(p, t.slice, MiB);  /* empty since 1 */
  fb.fail_free = 1;
  ck_assert_int_eq(p->ops->tick(p, 5), HIPPO_BACKEND_ERROR);
  ck_assert_uint_eq(p->pages, 1); /* the second went */
  ck_assert_uint_eq(fb.frees, 1);
  ck_assert_uint_eq(p->due, 9);
  CK_POOL_CHECK(p);
  ck_assert_int_eq(p->ops->tick(p, 8), HIPPO_SUCCESS);
  ck_assert_uint_eq(p->pages, 1);
  ck_assert_int_eq(p->ops->tick(p, 9), HIPPO_SUCCESS);
  ck_assert_uint_eq(p->pages, 0);
  ck_assert_uint_eq(fb.held, 0);
  CK_POOL_CHECK(p);
  p->ops->destroy(p);
}
END_TEST

START_TEST(failed_page_free_keeps_page) {
  hippo__pool *p = make(MiB, MiB, 0, 0);
  hippo__slice_ref s = take(p, 5000), t = take(p, MiB);
  p->ops->release(p, s.slice, 5000);
  p->ops->release(p, t.slice, MiB);
  fb.fail_free = 1;
  ck_assert_int_eq(p->ops->cleanup(p), HIPPO_BACKEND_ERROR);
  ck_assert_uint_eq(p->pages, 1); /* one freed, one kept */
  ck_assert_uint_eq(p->bytes_reserved, MiB);
  CK_POOL_CHECK(p);
  s = take(p, 5000); /* the kept page still serves */
  p->ops->release(p, s.slice, 5000);
  ck_assert_int_eq(p->ops->cleanup(p), HIPPO_SUCCESS);
  ck_assert_uint_eq(p->pages, 0);
  ck_assert_uint_eq(fb.held, 0);
  CK_POOL_CHECK(p);
  p->ops->destroy(p);
}
END_TEST

START_TEST(classes_cover_large_sizes) {
  /* sizes across many first levels, up to a 1 GiB page */
  hippo__pool *p = make(UINT64_C(1) << 30, UINT64_C(1) << 30, 0, 0);
  hippo__slice_ref s[40];
  uint64_t sizes[40];
  int n = 0;
  for (uint64_t size = 1; size <= (UINT64_C(1) << 28); size = size * 2 + 7) {
    sizes[n] = size;
    s[n++] = take(p, size);
  }
  ck_assert_uint_eq(p->pages, 1);
  for (int i = 0; i < n; i += 2) {
    p->ops->release(p, s[i].slice, sizes[i]);
    CK_POOL_CHECK(p);
  }
  for (int i = 0; i < n; i += 2) { /* each size fits a hole again */
    hippo__slice_ref t = take(p, sizes[i]);
    int hole = 0;
    for (int j = 0; j < n; j += 2)
      hole |= t.addr == s[j].addr;
    ck_assert_msg(hole, "size %llu did not go back into a hole",
                  (unsigned long long)sizes[i]);
  }
  ck_assert_uint_eq(p->pages, 1);
  p->ops->destroy(p);
}
END_TEST

/* ---- randomized against a model ---------------------------------------- */
static uint64_t rng_state;
static uint64_t rnd(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* ---- names: (slice, generation) pairs the pool checks itself ---------- */

/* release_named/resolve_named of a live name give its address and size;
 * after the release the name is stale and nothing changes when it is
 * used. */
START_TEST(named_release_and_resolve) {
  hippo__pool *p = make(MiB, 256 * KiB, 0, 0);
  hippo__slice_ref a = take(p, 1000), b = take(p, 300);
  uint64_t addr = 0, size = 0;
  ck_assert_ptr_nonnull(p->ops->release_named);
  ck_assert_uint_ne(a.gen, 0);
  ck_assert(p->ops->resolve_named(p, a.slice, a.gen, &addr, &size));
  ck_assert_uint_eq(addr, a.addr);
  ck_assert_uint_eq(size, 1000);
  ck_assert(p->ops->resolve_named(p, b.slice, b.gen, &addr, &size));
  ck_assert_uint_eq(addr, a.addr + 1024);
  ck_assert_uint_eq(size, 300);
  /* wrong generation, wrong or out-of-range index, the free rest */
  ck_assert(!p->ops->release_named(p, a.slice, a.gen ^ 1, &size));
  ck_assert(!p->ops->release_named(p, a.slice, 0, &size));
  ck_assert(!p->ops->release_named(p, 12345, a.gen, &size));
  ck_assert(!p->ops->release_named(p, UINT32_MAX, a.gen, &size));
  for (uint32_t i = 0; i < 8; i++)
    if (i != a.slice && i != b.slice)
      for (uint32_t g = 0; g < 4; g++)
        ck_assert(!p->ops->resolve_named(p, i, g, &addr, &size));
  ck_assert_uint_eq(p->allocations, 2);
  ck_assert_uint_eq(p->bytes_in_use, 1300);
  CK_POOL_CHECK(p);
  /* the release hands back the size reserved */
  size = 0;
  ck_assert(p->ops->release_named(p, a.slice, a.gen, &size));
  ck_assert_uint_eq(size, 1000);
  CK_POOL_CHECK(p);
  ck_assert_uint_eq(p->bytes_in_use, 300);
  ck_assert_uint_eq(p->bytes_padding, 212);
  /* stale: twice, resolve, and after the record served again */
  ck_assert(!p->ops->release_named(p, a.slice, a.gen, &size));
  ck_assert(!p->ops->resolve_named(p, a.slice, a.gen, &addr, &size));
  {
    hippo__slice_ref c = take(p, 1000);
    ck_assert_uint_eq(c.addr, a.addr);
    ck_assert(c.slice != a.slice || c.gen != a.gen);
    ck_assert(!p->ops->release_named(p, a.slice, a.gen, &size));
    ck_assert(p->ops->resolve_named(p, c.slice, c.gen, &addr, &size));
    ck_assert_uint_eq(addr, a.addr);
    ck_assert(p->ops->release_named(p, c.slice, c.gen, &size));
  }
  ck_assert_uint_eq(p->bytes_in_use, 300);
  CK_POOL_CHECK(p);
  /* release_all releases what is live, by the sizes reserved */
  take(p, 5000);
  p->ops->release_all(p);
  CK_POOL_CHECK(p);
  ck_assert_uint_eq(p->allocations, 0);
  ck_assert_uint_eq(p->bytes_in_use, 0);
  ck_assert_uint_eq(p->bytes_padding, 0);
  ck_assert(!p->ops->resolve_named(p, b.slice, b.gen, &addr, &size));
  p->ops->destroy(p);
}
END_TEST

/* A named release finishes late (pool.h, settle): the slice leaves use
 * and the figures at once, its merge waits for the pool's next call, and
 * the pool names itself in its stream's gate meanwhile.  Every later call
 * sees the merged pool: the space comes back at the same address, a
 * report counts it, and a page the release emptied is stamped with the
 * clock of the release, not of the call that finished it. */
START_TEST(named_release_finishes_at_the_next_call) {
  hippo__pool *p = make(MiB, MiB, 0, 5);
  hippo__free_gate gate;
  hippo__slice_ref a, b;
  hippo_pool_report r;
  uint64_t size = 0, addr = 0;
  memset(&gate, 0, sizeof gate);
  gate.due_min = UINT64_MAX;
  gate.answer = 1; /* pages may go back */
  p->gate = &gate;
  a = take(p, 1000);
  b = take(p, 3000);
  p->now = 2;
  ck_assert(p->ops->release_named(p, b.slice, b.gen, &size));
  ck_assert_uint_eq(size, 3000);
  /* waiting: out of use and out of the figures already */
  ck_assert_ptr_eq(gate.unsettled, p);
  ck_assert_uint_eq(p->allocations, 1);
  ck_assert_uint_eq(p->bytes_in_use, 1000);
  ck_assert_uint_eq(p->bytes_padding, 24);
  ck_assert(!p->ops->resolve_named(p, b.slice, b.gen, &addr, &size));
  /* the next call finishes it: the freed slice merged with the rest */
  p->ops->report(p, &r);
  ck_assert_ptr_null(gate.unsettled);
  ck_assert_uint_eq(r.bytes_free, MiB - 1024);
  ck_assert_uint_eq(r.largest_free, MiB - 1024);
  CK_POOL_CHECK(p);
  b = take(p, 3000);
  ck_assert_uint_eq(b.addr, a.addr + 1024);
  /* a stale name fails, and finishes the waiting release first */
  ck_assert(p->ops->release_named(p, a.slice, a.gen, &size));
  ck_assert_ptr_eq(gate.unsettled, p);
  ck_assert(!p->ops->release_named(p, a.slice, a.gen, &size));
  ck_assert_ptr_null(gate.unsettled);
  CK_POOL_CHECK(p);
  /* the page empties at clock 2; the merge runs once the pool's clock
   * reads 6 (the manager stamps p->now before each release): the page
   * still leaves at 2 + 5, not 6 + 5 */
  ck_assert(p->ops->release_named(p, b.slice, b.gen, &size));
  ck_assert_ptr_eq(gate.unsettled, p);
  p->now = 6;
  ck_assert(p->ops->gives_back(p));
  ck_assert_ptr_null(gate.unsettled);
  ck_assert_uint_eq(p->due, 7);
  ck_assert_uint_le(gate.due_min, 7);
  ck_assert_int_eq(p->ops->tick(p, 6), HIPPO_SUCCESS);
  ck_assert_uint_eq(p->pages, 1);
  ck_assert_int_eq(p->ops->tick(p, 7), HIPPO_SUCCESS);
  ck_assert_uint_eq(p->pages, 0);
  ck_assert_uint_eq(fb.frees, 1);
  CK_POOL_CHECK(p);
  /* a release still waiting when the pool goes is finished, not lost */
  a = take(p, 1000);
  ck_assert(p->ops->release_named(p, a.slice, a.gen, &size));
  p->ops->destroy(p);
  ck_assert_ptr_null(gate.unsettled);
  ck_assert_uint_eq(fb.held, 0);
}
END_TEST

/* One record serves a slice again and again: it hands out each of its
 * 2^20 - 1 generations once, never 0, then retires; the free slice it
 * described moves to a fresh record, and no name it gave becomes live
 * again. */
START_TEST(record_retires_after_every_generation) {
  const uint32_t gens = HIPPO__HANDLE_GEN_MASK;
  hippo__pool *p = make(MiB, 256 * KiB, 0, 0);
  hippo__slice_ref first = take(p, 4096), cur;
  uint64_t size;
  uint32_t failed = 0, zero_gen = 0, first_again = 0, same_record = 0;
  ck_assert(p->ops->release_named(p, first.slice, first.gen, &size));
  /* assertions after the loop: Check would record each one passed */
  for (uint32_t i = 0; i < gens; i++) {
    uint64_t a, s;
    failed += p->ops->reserve(p, 4096, &cur) != HIPPO_SUCCESS;
    zero_gen += cur.gen == 0;
    first_again += (cur.slice == first.slice && cur.gen == first.gen) ||
                   p->ops->resolve_named(p, first.slice, first.gen, &a, &s);
    same_record += cur.slice == first.slice;
    failed += !p->ops->release_named(p, cur.slice, cur.gen, &size);
  }
  ck_assert_uint_eq(failed, 0);
  ck_assert_uint_eq(zero_gen, 0);
  ck_assert_uint_eq(first_again, 0);
  /* the record served `first` and gens - 1 more: every generation */
  ck_assert_uint_eq(same_record, gens - 1);
  ck_assert_uint_ne(cur.slice, first.slice);
  ck_assert_uint_eq(cur.addr, first.addr);
  CK_POOL_CHECK(p);
  /* still one free slice per page, all bytes accounted */
  ck_assert_uint_eq(p->bytes_in_use, 0);
  ck_assert_int_eq(p->ops->cleanup(p), HIPPO_SUCCESS);
  ck_assert_uint_eq(p->pages, 0);
  CK_POOL_CHECK(p);
  p->ops->destroy(p);
}
END_TEST

/* A free slice between two live ones serves a reservation of exactly its
 * size again and again, on the same record; when that record retires, the
 * slice moves to a fresh record that its neighbours link to. */
START_TEST(retired_record_between_live_neighbours) {
  const uint32_t gens = HIPPO__HANDLE_GEN_MASK;
  hippo__pool *p = make(MiB, 256 * KiB, 0, 0);
  hippo__slice_ref a = take(p, 4096), x = take(p, 4096), b = take(p, 4096);
  hippo__slice_ref cur = x, first = x;
  uint64_t size, addr, s;
  uint32_t failed = 0, moved = 0, elsewhere = 0;
  ck_assert(p->ops->release_named(p, x.slice, x.gen, &size));
  CK_POOL_CHECK(p);
  for (uint32_t i = 0; i < gens; i++) {
    uint32_t before = cur.slice;
    failed += p->ops->reserve(p, 4096, &cur) != HIPPO_SUCCESS;
    elsewhere += cur.addr != x.addr;
    moved += cur.slice != before;
    failed += !p->ops->release_named(p, cur.slice, cur.gen, &size);
  }
  ck_assert_uint_eq(failed, 0);
  ck_assert_uint_eq(elsewhere, 0);
  ck_assert_uint_eq(moved, 1); /* once, on the last reservation */
  ck_assert_uint_ne(cur.slice, first.slice);
  /* neighbours link to the fresh record, the old one retired */
  CK_POOL_CHECK(p);
  ck_assert(!p->ops->resolve_named(p, first.slice, first.gen, &addr, &s));
  /* the neighbours still work and coalesce with it */
  ck_assert(p->ops->resolve_named(p, a.slice, a.gen, &addr, &s));
  ck_assert_uint_eq(addr, x.addr - 4096);
  ck_assert(p->ops->release_named(p, a.slice, a.gen, &size));
  CK_POOL_CHECK(p);
  ck_assert(p->ops->release_named(p, b.slice, b.gen, &size));
  CK_POOL_CHECK(p);
  ck_assert_uint_eq(p->allocations, 0);
  ck_assert_int_eq(p->ops->cleanup(p), HIPPO_SUCCESS);
  ck_assert_uint_eq(p->pages, 0);
  CK_POOL_CHECK(p);
  p->ops->destroy(p);
}
END_TEST

/* A pool whose slice records are all in use is full like a capped one:
 * HIPPO_POOL_CAPACITY_EXCEEDED (the manager spills), nothing changes, and
 * releases that merge records away make room again. */
START_TEST(record_limit_is_a_cap) {
  hippo__pool *p = make(MiB, 256 * KiB, 0, 0);
  hippo__slice_ref refs[1100];
  hippo_pool_report before, after;
  uint64_t size;
  uint32_t n = 0;
  hippo_status st;
  hippo__pool_sliced_limit_records(p, 1024);
  /* each 256 B reservation splits the free tail: one record more */
  while ((st = p->ops->reserve(p, 256, &refs[n])) == HIPPO_SUCCESS)
    ck_assert_uint_lt(++n, 1100);
  ck_assert_int_eq(st, HIPPO_POOL_CAPACITY_EXCEEDED);
  ck_assert_ptr_nonnull(strstr(hippo__error_get(), "slice records"));
  ck_assert_uint_eq(n, 1022); /* 1024 records: n live, the tail, 1 spare */
  CK_POOL_CHECK(p);
  p->ops->report(p, &before);
  ck_assert_int_eq(p->ops->reserve(p, 256, &refs[n]),
                   HIPPO_POOL_CAPACITY_EXCEEDED);
  p->ops->report(p, &after);
  ck_assert_mem_eq(&before, &after, sizeof before);
  ck_assert_uint_eq(fb.allocs, 1);
  /* the two newest merge into the tail: two records back */
  ck_assert(p->ops->release_named(p, refs[n - 1].slice, refs[n - 1].gen,
                                  &size));
  ck_assert(p->ops->release_named(p, refs[n - 2].slice, refs[n - 2].gen,
                                  &size));
  CK_POOL_CHECK(p);
  refs[n - 2] = take(p, 256);
  ck_assert_uint_eq(p->allocations, n - 1);
  p->ops->destroy(p);
}
END_TEST

typedef struct live {
  uint64_t addr, size, bytes;
  uint32_t slice, gen;
} live;

static int by_addr(const void *a, const void *b) {
  const live *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

START_TEST(randomized_against_model) {
  enum { OPS = 150000, MAXLIVE = 600 };
  hippo__pool *p = make(256 * KiB, 64 * KiB, 2 * MiB, 3000);
  live *l = calloc(MAXLIVE, sizeof *l), *sorted = calloc(MAXLIVE, sizeof *l);
  uint64_t n = 0, in_use = 0, bytes = 0, now = 0, fails = 0;
  rng_state = 42;
  for (int op = 0; op < OPS; op++) {
    uint64_t r = rnd();
    if (n < MAXLIVE && (n == 0 || r % 100 < 52)) {
      uint64_t size = 1 + rnd() % (rnd() % 4 == 0 ? 64 * KiB : 4 * KiB);
      hippo__slice_ref ref;
      hippo_status st;
      now++;
      ck_assert_int_eq(p->ops->tick(p, now), HIPPO_SUCCESS);
      st = p->ops->reserve(p, size, &ref);
      if (st == HIPPO_POOL_CAPACITY_EXCEEDED) {
        fails++;
      } else {
        ck_assert_int_eq(st, HIPPO_SUCCESS);
        ck_assert_uint_eq(ref.addr % 256, 0);
        l[n] = (live){ref.addr, size, (size + 255) & ~(uint64_t)255,
                      ref.slice, ref.gen};
        in_use += size;
        bytes += l[n].bytes;
        n++;
      }
    } else if (n > 0) {
      uint64_t i = rnd() % n, addr, size;
      if (r % 2) { /* by name: resolve, release, then the name is stale */
        ck_assert(p->ops->resolve_named(p, l[i].slice, l[i].gen, &addr,
                                        &size));
        ck_assert_uint_eq(addr, l[i].addr);
        ck_assert_uint_eq(size, l[i].size);
        ck_assert(p->ops->release_named(p, l[i].slice, l[i].gen, &size));
        ck_assert_uint_eq(size, l[i].size);
        ck_assert(!p->ops->release_named(p, l[i].slice, l[i].gen, &size));
      } else {
        p->ops->release(p, l[i].slice, l[i].size);
      }
      in_use -= l[i].size;
      bytes -= l[i].bytes;
      l[i] = l[--n];
    }
    if (r % 997 == 0)
      ck_assert_int_eq(p->ops->cleanup(p), HIPPO_SUCCESS);
    CK_POOL_CHECK(p);
    ck_assert_uint_eq(p->allocations, n);
    ck_assert_uint_eq(p->bytes_in_use, in_use);
    ck_assert_uint_eq(p->bytes_in_use + p->bytes_padding, bytes);
    ck_assert_uint_le(p->bytes_reserved, 2 * MiB);
    if (op % 500 == 0 && n > 1) { /* live slices never overlap */
      memcpy(sorted, l, n * sizeof *l);
      qsort(sorted, n, sizeof *l, by_addr);
      for (uint64_t i = 1; i < n; i++)
        ck_assert_uint_le(sorted[i - 1].addr + sorted[i - 1].bytes,
                          sorted[i].addr);
    }
  }
  ck_assert_uint_gt(fails, 0); /* the cap was reached at times */
  while (n > 0) {
    n--;
    p->ops->release(p, l[n].slice, l[n].size);
  }
  CK_POOL_CHECK(p);
  ck_assert_int_eq(p->ops->cleanup(p), HIPPO_SUCCESS);
  ck_assert_uint_eq(p->pages, 0);
  ck_assert_uint_eq(fb.held, 0);
  p->ops->destroy(p);
  free(l);
  free(sorted);
}
END_TEST

#define NIL UINT32_MAX

/* An ARENA relocation on two pools that must decide alike: the same plan;
 * then (how % 3) committed, undone, or undone with the destinations
 * stranded and freed again.  Returns the moves. */
static uint32_t relocate_both(hippo__pool *a, hippo__pool *b, unsigned how) {
  hippo__reloc_plan pa, pb;
  uint64_t pages = 0, bytes = 0;
  memset(&pa, 0, sizeof pa);
  memset(&pb, 0, sizeof pb);
  ck_assert_int_eq(a->ops->move->plan(a, HIPPO_RELOCATE_CAPTURE, &pa),
                   HIPPO_SUCCESS);
  ck_assert_int_eq(b->ops->move->plan(b, HIPPO_RELOCATE_CAPTURE, &pb),
                   HIPPO_SUCCESS);
  ck_assert_uint_eq(pa.count, pb.count);
  ck_assert_uint_eq(pa.bytes, pb.bytes);
  for (uint32_t k = 0; k < pa.count; k++) {
    ck_assert_uint_eq(pa.moves[k].dst, pb.moves[k].dst);
    ck_assert_uint_eq(pa.moves[k].target, pb.moves[k].target);
  }
  if (how == 0) {
    a->ops->move->commit(a, &pa);
    b->ops->move->commit(b, &pb);
  } else {
    a->ops->move->abort(a, &pa, how == 2);
    b->ops->move->abort(b, &pb, how == 2);
    CK_POOL_CHECK(a);
    CK_POOL_CHECK(b);
    a->ops->move->unstrand(a);
    b->ops->move->unstrand(b);
  }
  CK_POOL_CHECK(a);
  CK_POOL_CHECK(b);
  ck_assert_int_eq(a->ops->move->drain(a, &pages, &bytes), HIPPO_SUCCESS);
  ck_assert_int_eq(b->ops->move->drain(b, &pages, &bytes), HIPPO_SUCCESS);
  free(pa.moves);
  free(pb.moves);
  return pa.count;
}

/* Live reservation i of l (a's generation in l, b's in gen_b) released on
 * both pools, which both give back its size; the last one takes its
 * place. */
static void release_both(hippo__pool *a, hippo__pool *b, live *l,
                         uint32_t *gen_b, uint64_t *n, uint64_t i) {
  uint64_t sa, sb;
  ck_assert(a->ops->release_named(a, l[i].slice, l[i].gen, &sa));
  ck_assert(b->ops->release_named(b, l[i].slice, gen_b[i], &sb));
  ck_assert_uint_eq(sa, l[i].size);
  ck_assert_uint_eq(sb, l[i].size);
  gen_b[i] = gen_b[*n - 1];
  l[i] = l[--*n];
}

/* A crowded pool (its free index takes the branches that suit long
 * lists, pool_sliced.c) decides exactly as an uncrowded one: the same
 * slices and addresses, the same pages, through holds on released
 * slices and (ARENA) relocations; both pools' walks pass along the way.
 * _i: 0 SLICED, 1 ARENA. */
START_TEST(crowded_pool_decides_the_same) {
  enum { OPS = 60000, MAXLIVE = 2000 };
  hippo_pool_kind kind = _i ? HIPPO_POOL_ARENA : HIPPO_POOL_SLICED;
  fake f2 = fb; /* the same addresses from a second backend */
  uint64_t page = _i ? 256 * KiB : MiB; /* an ARENA's floor */
  uint64_t max = _i ? 64 * MiB : MiB;
  hippo__pool *a = make_on(&fb, kind, page, max, 0, 300);
  hippo__pool *b = make_on(&f2, kind, page, max, 0, 300);
  live *l = calloc(MAXLIVE, sizeof *l);
  uint32_t *gen_b = calloc(MAXLIVE, sizeof *gen_b); /* l[].gen is a's */
  uint32_t guarded = NIL; /* released while held */
  uint64_t n = 0, now = 0, moved = 0;
  ck_assert(!hippo__pool_sliced_crowd_at(a, 65536));
  ck_assert(!hippo__pool_sliced_crowd_at(b, 0)); /* no record yet */
  rng_state = 7 + (uint64_t)_i;
  for (int op = 0; op < OPS; op++) {
    uint64_t r = rnd();
    if (n < MAXLIVE && (n == 0 || r % 100 < 55)) {
      /* mostly small, at times large: an ARENA grows all along */
      uint64_t large = _i ? (uint64_t)(op / 2000 + 1) * 256 * KiB : MiB;
      uint64_t size = 1 + rnd() % (r % 50 == 0 ? large : 8 * KiB);
      hippo__slice_ref ra, rb;
      hippo_status sa, sb;
      now++;
      ck_assert_int_eq(a->ops->tick(a, now), HIPPO_SUCCESS);
      ck_assert_int_eq(b->ops->tick(b, now), HIPPO_SUCCESS);
      sa = a->ops->reserve(a, size, &ra);
      sb = b->ops->reserve(b, size, &rb);
      ck_assert_int_eq(sa, HIPPO_SUCCESS);
      ck_assert_int_eq(sb, HIPPO_SUCCESS);
      ck_assert_uint_eq(ra.addr, rb.addr);
      ck_assert_uint_eq(ra.slice, rb.slice);
      ck_assert_uint_ne(rb.gen, 0); /* each pool starts its own */
      gen_b[n] = rb.gen;
      l[n++] = (live){ra.addr, size, 0, ra.slice, ra.gen};
    } else {
      release_both(a, b, l, gen_b, &n, rnd() % n);
    }
    if (r % 4999 == 0) {
      ck_assert_int_eq(a->ops->cleanup(a), HIPPO_SUCCESS);
      ck_assert_int_eq(b->ops->cleanup(b), HIPPO_SUCCESS);
    }
    if (op % 211 == 0 && n > 0) { /* a graph holds one; it is released */
      uint64_t i = rnd() % n;
      uint32_t held = l[i].slice;
      a->ops->hold(a, held);
      b->ops->hold(b, held);
      release_both(a, b, l, gen_b, &n, i);
      if (guarded != NIL) { /* the previous one's hold goes: it is free */
        a->ops->unhold(a, guarded, false);
        b->ops->unhold(b, guarded, false);
      }
      guarded = held;
    }
    if (_i && op % 3001 == 3000) /* ARENA: moves, kept or undone */
      moved += relocate_both(a, b, (unsigned)(op / 3001) % 3);
    if (op % 1000 == 0) {
      CK_POOL_CHECK(a);
      CK_POOL_CHECK(b);
    }
    ck_assert_uint_eq(a->bytes_reserved, b->bytes_reserved);
    ck_assert_uint_eq(a->bytes_padding, b->bytes_padding);
  }
  ck_assert(!hippo__pool_sliced_crowd_at(a, 65536));
  ck_assert(hippo__pool_sliced_crowd_at(b, 0));
  if (_i)
    ck_assert_uint_gt(moved, 100);
  if (guarded != NIL) {
    a->ops->unhold(a, guarded, false);
    b->ops->unhold(b, guarded, false);
  }
  while (n > 0)
    release_both(a, b, l, gen_b, &n, n - 1);
  CK_POOL_CHECK(a);
  CK_POOL_CHECK(b);
  ck_assert_int_eq(a->ops->cleanup(a), HIPPO_SUCCESS);
  ck_assert_int_eq(b->ops->cleanup(b), HIPPO_SUCCESS);
  ck_assert_uint_eq(a->pages, 0);
  ck_assert_uint_eq(b->pages, 0);
  a->ops->destroy(a);
  b->ops->destroy(b);
  free(gen_b);
  free(l);
}
END_TEST

/* A pool crowds itself once its record array passes 65536 records (60,000
 * slices and the free rest of the page fit in 65,536; 70,000 do not), and
 * a crowded pool keeps its invariants (every other slice released: none
 * can merge) and merges back to one free slice. */
START_TEST(crowds_itself_past_the_threshold) {
  enum { N = 70000 };
  hippo__pool *p = make(64 * MiB, 4 * KiB, 0, 0);
  hippo__slice_ref *r = calloc(N, sizeof *r);
  for (uint32_t i = 0; i < N; i++) {
    ck_assert_int_eq(p->ops->reserve(p, 256, &r[i]), HIPPO_SUCCESS);
    if (i == 60000)
      ck_assert(!hippo__pool_sliced_crowd_at(p, 65536));
  }
  ck_assert(hippo__pool_sliced_crowd_at(p, 65536)); /* 131,072 records */
  for (uint32_t i = 0; i < N; i += 2)
    p->ops->release(p, r[i].slice, 256);
  CK_POOL_CHECK(p);
  rng_state = 11;
  for (uint32_t i = 1; i < N; i += 2) { /* a random order of the rest */
    uint32_t j = 1 + 2 * (uint32_t)(rnd() % ((N - i + 1) / 2)) + (i - 1);
    hippo__slice_ref t = r[i];
    r[i] = r[j];
    r[j] = t;
    p->ops->release(p, r[i].slice, 256);
    if (i % 10001 == 0)
      CK_POOL_CHECK(p);
  }
  CK_POOL_CHECK(p);
  ck_assert_uint_eq(p->allocations, 0);
  ck_assert_int_eq(p->ops->cleanup(p), HIPPO_SUCCESS);
  ck_assert_uint_eq(p->pages, 0);
  p->ops->destroy(p);
  free(r);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("sliced");
  TCase *t = tcase_create("pool");
  tcase_add_checked_fixture(t, setup, NULL);
  tcase_set_timeout(t, 120);
  tcase_add_test(t, exact_offsets_and_padding);
  tcase_add_test(t, coalesce_back_to_one_slice);
  tcase_add_test(t, new_page_when_full);
  tcase_add_test(t, cap_in_whole_pages);
  tcase_add_test(t, cap_below_page_shrinks_page);
  tcase_add_test(t, slice_larger_than_shrunk_page);
  tcase_add_test(t, cap_below_alignment_never_allocates);
  tcase_add_test(t, dealloc_after_exactly_a_period);
  tcase_add_test(t, failed_page_alloc_changes_nothing);
  tcase_add_test(t, failed_page_free_keeps_page);
  tcase_add_test(t, tick_free_failure_waits_a_period);
  tcase_add_test(t, classes_cover_large_sizes);
  tcase_add_test(t, named_release_and_resolve);
  tcase_add_test(t, named_release_finishes_at_the_next_call);
  tcase_add_test(t, record_retires_after_every_generation);
  tcase_add_test(t, retired_record_between_live_neighbours);
  tcase_add_test(t, record_limit_is_a_cap);
  tcase_add_test(t, randomized_against_model);
  tcase_add_loop_test(t, crowded_pool_decides_the_same, 0, 2);
  tcase_add_test(t, crowds_itself_past_the_threshold);
  suite_add_tcase(s, t);
  return s;
}

int main(void) { return tu_run(suite()); }
