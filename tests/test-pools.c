/* test-pools.c -- the EXCLUSIVE, DIRECT and PERSISTENT pools against
 * src/pool.h: acceptance, reuse rules with exact addresses, class sizes and
 * the documented waste bound, alignment padding, periodic deallocation to
 * the exact tick, cleanup, the reclaim watermark, failed and failing
 * backend calls, peaks, exact reports, check() catching damage, and one
 * seeded randomized run per kind against a reference model with check()
 * after every operation.
 *
 * Most tests run on a small fake backend defined here (deterministic
 * addresses, a page registry, a log of frees, fault injection by call
 * number and by address), so they depend on nothing but the pool files;
 * one test runs each kind on the DRY backend too.
 */
#include <config.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emutest.h"
#include "layout.h"

#define ALIGN UINT64_C(256)
#define FAKE_BASE UINT64_C(0x100000)

/* ---- a fake backend -------------------------------------------------------
 * Addresses come from a bump pointer starting at FAKE_BASE with one
 * alignment unit of gap after every page, never reused.  Invariant:
 * addr[0..n) increasing; size[i] == 0 once page i was freed; held_* are the
 * live pages' count and bytes. */
typedef struct fake_be {
  hippo__backend head;
  uint64_t next;
  uint64_t *addr, *size;
  size_t n, cap;
  uint64_t held_pages, held_bytes, peak_bytes;
  uint64_t calls[HIPPO_CALL_KINDS];
  uint64_t fault_at[HIPPO_CALL_KINDS]; /* call number that fails, 0: none */
  hippo_status fault_st[HIPPO_CALL_KINDS];
  uint64_t fail_free_addr; /* page_free of this address always fails */
  uint64_t *freed;         /* every freed address, in order */
  size_t nfreed, freed_cap;
} fake_be;

static fake_be *fake_of(hippo__backend *be) { return (fake_be *)be; }

static hippo_status fake_call(fake_be *f, hippo_call_kind kind) {
  f->calls[kind]++;
  if (f->fault_at[kind] != 0 && f->fault_at[kind] == f->calls[kind]) {
    f->fault_at[kind] = 0;
    return hippo__error_set(f->fault_st[kind], "fake: injected fault on call "
                            "%llu of kind %u",
                            (unsigned long long)f->calls[kind], kind);
  }
  return HIPPO_SUCCESS;
}

/* Index of the last page at or below x, or SIZE_MAX. */
static size_t fake_find(const fake_be *f, uint64_t x) {
  size_t lo = 0, hi = f->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (f->addr[mid] <= x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo == 0 ? SIZE_MAX : lo - 1;
}

static hippo_status fake_page_alloc(hippo__backend *be, uint64_t size,
                                    uint64_t *addr) {
  fake_be *f = fake_of(be);
  hippo_status st = fake_call(f, HIPPO_CALL_ALLOC);
  if (st != HIPPO_SUCCESS)
    return st;
  if (size == 0 || size % be->alignment != 0)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "fake: page of %llu bytes",
                            (unsigned long long)size);
  if (size > be->total_memory - f->held_bytes)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "fake: out of memory for %llu bytes",
                            (unsigned long long)size);
  if (f->n == f->cap) {
    f->cap = f->cap ? 2 * f->cap : 64;
    f->addr = realloc(f->addr, f->cap * sizeof *f->addr);
    f->size = realloc(f->size, f->cap * sizeof *f->size);
    CK_REQUIRE(f->addr && f->size);
  }
  f->addr[f->n] = f->next;
  f->size[f->n] = size;
  f->n++;
  *addr = f->next;
  f->next += size + be->alignment;
  f->held_pages++;
  f->held_bytes += size;
  if (f->held_bytes > f->peak_bytes)
    f->peak_bytes = f->held_bytes;
  return HIPPO_SUCCESS;
}

static hippo_status fake_page_free(hippo__backend *be, uint64_t addr,
                                   uint64_t size) {
  fake_be *f = fake_of(be);
  size_t i;
  hippo_status st = fake_call(f, HIPPO_CALL_FREE);
  if (st != HIPPO_SUCCESS)
    return st;
  if (addr != 0 && addr == f->fail_free_addr)
    return hippo__error_set(HIPPO_BACKEND_ERROR,
                            "fake: page_free(0x%llx) refused",
                            (unsigned long long)addr);
  i = fake_find(f, addr);
  CK_REQUIRE_MSG(i != SIZE_MAX && f->addr[i] == addr && f->size[i] == size,
                 "fake: page_free(0x%llx, %llu) names no live page",
                 (unsigned long long)addr, (unsigned long long)size);
  f->size[i] = 0;
  f->held_pages--;
  f->held_bytes -= size;
  if (f->nfreed == f->freed_cap) {
    f->freed_cap = f->freed_cap ? 2 * f->freed_cap : 64;
    f->freed = realloc(f->freed, f->freed_cap * sizeof *f->freed);
    CK_REQUIRE(f->freed != NULL);
  }
  f->freed[f->nfreed++] = addr;
  return HIPPO_SUCCESS;
}

static hippo_status fake_inject(hippo__backend *be, hippo_call_kind kind,
                                uint64_t nth, hippo_status status) {
  fake_be *f = fake_of(be);
  f->fault_at[kind] = nth ? f->calls[kind] + nth : 0;
  f->fault_st[kind] = status;
  return HIPPO_SUCCESS;
}

static void fake_destroy(hippo__backend *be) {
  fake_be *f = fake_of(be);
  free(f->addr);
  free(f->size);
  free(f->freed);
  free(f);
}

static const hippo__backend_ops fake_ops = {
    .page_alloc = fake_page_alloc,
    .page_free = fake_page_free,
    .destroy = fake_destroy,
    .emu_inject_fault = fake_inject,
};

static fake_be *fake_new(uint64_t capacity, uint64_t alignment) {
  fake_be *f = calloc(1, sizeof *f);
  ck_assert_ptr_nonnull(f);
  f->head.ops = &fake_ops;
  f->head.kind = HIPPO_BACKEND_DRY;
  f->head.alignment = alignment;
  f->head.total_memory = capacity;
  f->next = FAKE_BASE;
  return f;
}

/* The live page holding [x, x+len), or SIZE_MAX. */
static size_t fake_page_of(const fake_be *f, uint64_t x, uint64_t len) {
  size_t i = fake_find(f, x);
  if (i == SIZE_MAX || f->size[i] == 0 || x + len > f->addr[i] + f->size[i])
    return SIZE_MAX;
  return i;
}

/* ---- helpers --------------------------------------------------------------*/

static void acct_init(hippo__page_acct *a) {
  atomic_init(&a->bytes_reserved, 0);
  atomic_init(&a->peak_bytes_reserved, 0);
  atomic_init(&a->pages, 0);
  a->parent = NULL;
}

static hippo_pool_options opts(hippo_pool_kind kind, uint64_t max_alloc,
                               uint64_t reclaim_at, uint64_t period) {
  hippo_pool_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.kind = kind;
  o.max_alloc_size = max_alloc;
  o.reclaim_at = reclaim_at;
  o.dealloc_period = period;
  return o;
}

static hippo__pool *excl_new(fake_be *f, hippo__page_acct *acct,
                             uint64_t max_alloc, uint64_t period) {
  hippo__pool *p = NULL;
  hippo_pool_options o = opts(HIPPO_POOL_EXCLUSIVE, max_alloc, 0, period);
  CK_CORE_OK(hippo__pool_create(&f->head, acct, &o, &p));
  ck_assert_ptr_nonnull(p);
  return p;
}

static hippo__pool *direct_new(fake_be *f, hippo__page_acct *acct,
                               uint64_t reclaim_at, uint64_t period) {
  hippo__pool *p = NULL;
  hippo_pool_options o = opts(HIPPO_POOL_DIRECT, 0, reclaim_at, period);
  CK_CORE_OK(hippo__pool_create(&f->head, acct, &o, &p));
  ck_assert_ptr_nonnull(p);
  return p;
}

static hippo__pool *persistent_new(fake_be *f, hippo__page_acct *acct) {
  hippo__pool *p = NULL;
  CK_CORE_OK(hippo__pool_persistent_create(&f->head, acct, &p));
  ck_assert_ptr_nonnull(p);
  return p;
}

static hippo__slice_ref reserve(hippo__pool *p, uint64_t size) {
  hippo__slice_ref r = {0, 0, 0};
  hippo_status st = p->ops->reserve(p, size, &r);
  if (st != HIPPO_SUCCESS)
    ck_abort_msg("reserve(%llu) = %d: %s", (unsigned long long)size, st,
                 hippo__error_get());
  CK_REQUIRE(r.addr != 0);
  CK_REQUIRE_EQ(r.addr % p->alignment, 0);
  CK_POOL_CHECK(p);
  return r;
}

static void release(hippo__pool *p, hippo__slice_ref r, uint64_t size) {
  p->ops->release(p, r.slice, size);
  CK_POOL_CHECK(p);
}

static hippo_pool_report report(hippo__pool *p) {
  hippo_pool_report r;
  p->ops->report(p, &r);
  return r;
}

static void done(hippo__pool *p, fake_be *f) {
  CK_POOL_CHECK(p);
  p->ops->destroy(p);
  ck_assert_uint_eq(f->held_pages, 0);
  ck_assert_uint_eq(f->held_bytes, 0);
  fake_destroy(&f->head);
}

/* ---- the reference size classes -------------------------------------------
 * An independent description of the EXCLUSIVE classes: the multiples of A
 * below 8A, then 8 evenly spaced sizes per octave, 2^k + j 2^(k-3). */
#define REF_MAX 2048
static uint64_t ref_cls[REF_MAX];
static size_t ref_n;
static uint64_t ref_align;

static void ref_build(uint64_t a) {
  ref_n = 0;
  ref_align = a;
  for (uint64_t c = a; c < 8 * a; c += a)
    ref_cls[ref_n++] = c;
  for (uint64_t k = 8 * a; k <= (UINT64_C(1) << 62); k *= 2)
    for (uint64_t j = 0; j < 8; j++)
      ref_cls[ref_n++] = k + j * (k / 8);
  ref_cls[ref_n++] = UINT64_C(1) << 63;
}

/* Index of the smallest class >= s. */
static size_t ref_index(uint64_t s) {
  size_t lo = 0, hi = ref_n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (ref_cls[mid] < s)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static uint64_t ref_class(uint64_t s) { return ref_cls[ref_index(s)]; }
static uint64_t ref_next(uint64_t s) { return ref_cls[ref_index(s) + 1]; }
static uint64_t align_up(uint64_t s, uint64_t a) {
  return (s + a - 1) / a * a;
}

/* ===== EXCLUSIVE ========================================================== */

START_TEST(excl_accept) {
  fake_be *f = fake_new(GiB, ALIGN);
  hippo__pool *p = excl_new(f, NULL, MiB, 0);
  hippo__slice_ref r;
  hippo_pool_report rep;
  ck_assert_uint_eq(p->max_size, MiB);
  ck_assert_uint_eq(p->alignment, ALIGN);
  ck_assert_uint_eq(p->kind, HIPPO_POOL_EXCLUSIVE);
  r = reserve(p, MiB);
  ck_assert_uint_eq(r.addr, FAKE_BASE);
  rep = report(p);
  ck_assert_uint_eq(rep.bytes_reserved, MiB);
  ck_assert_uint_eq(rep.bytes_padding, 0);
  ck_assert_uint_eq(rep.kind, HIPPO_POOL_EXCLUSIVE);
  ck_assert_uint_eq(p->opt.max_alloc_size, MiB);
  /* Outside the contract, but refused cleanly. */
  CK_CORE_FAILS(p->ops->reserve(p, MiB + 1, &r), HIPPO_INVALID_ARGUMENT,
                "EXCLUSIVE pool");
  CK_CORE_FAILS(p->ops->reserve(p, 0, &r), HIPPO_INVALID_ARGUMENT,
                "EXCLUSIVE pool");
  ck_assert_uint_eq(f->calls[HIPPO_CALL_ALLOC], 1);
  done(p, f);

  /* A huge max_alloc_size is capped at 2^63. */
  f = fake_new(UINT64_MAX, ALIGN);
  p = excl_new(f, NULL, UINT64_MAX, 0);
  ck_assert_uint_eq(p->max_size, UINT64_C(1) << 63);
  ck_assert_uint_eq(p->opt.max_alloc_size, UINT64_C(1) << 63);
  /* The largest request still gets its exact class. */
  r = reserve(p, (UINT64_C(1) << 62) + 1);
  ck_assert_uint_eq(p->bytes_reserved,
                    (UINT64_C(1) << 62) + (UINT64_C(1) << 59));
  release(p, r, (UINT64_C(1) << 62) + 1);
  done(p, f);
}
END_TEST

/* Exact page sizes for chosen requests (A = 256). */
START_TEST(excl_class_sizes) {
  static const uint64_t table[][2] = {
      {1, 256},
      {255, 256},
      {256, 256},
      {257, 512},
      {1000, 1024},
      {1025, 1280},
      {1792, 1792},
      {1793, 2048},
      {2049, 2304},
      {5000, 5120},
      {5121, 5632},
      {MiB - 1, MiB},
      {MiB, MiB},
      {MiB + 1, MiB + 128 * KiB},
      {MiB + 128 * KiB + 1, MiB + 256 * KiB},
      {3 * MiB + 1, 3 * MiB + 256 * KiB},
      {2 * MiB - 128 * KiB + 1, 2 * MiB}, /* rounds into the next octave */
      {2 * MiB - 128 * KiB, 2 * MiB - 128 * KiB},
      {2 * MiB - 1, 2 * MiB},
      {2 * MiB + 1, 2 * MiB + 256 * KiB},
  };
  fake_be *f = fake_new(64 * GiB, ALIGN);
  hippo__pool *p = excl_new(f, NULL, 16 * GiB, 0);
  for (size_t t = 0; t < sizeof table / sizeof table[0]; t++) {
    hippo__slice_ref r = reserve(p, table[t][0]);
    hippo_pool_report rep = report(p);
    ck_assert_msg(rep.bytes_reserved == table[t][1],
                  "%llu bytes got a page of %llu, expected %llu",
                  (unsigned long long)table[t][0],
                  (unsigned long long)rep.bytes_reserved,
                  (unsigned long long)table[t][1]);
    ck_assert_uint_eq(rep.bytes_padding, table[t][1] - table[t][0]);
    ck_assert_uint_eq(rep.bytes_in_use, table[t][0]);
    release(p, r, table[t][0]);
    CK_CORE_OK(p->ops->cleanup(p));
    ck_assert_uint_eq(report(p).pages, 0);
  }
  done(p, f);
}
END_TEST

/* Every request size up to 160 KiB + a few big ones gets exactly the
 * reference class, and a new page wastes < 1/8 of itself (a >= 8A) or
 * nothing beyond the alignment (a < 8A). */
START_TEST(excl_class_exhaustive) {
  fake_be *f = fake_new(64 * GiB, ALIGN);
  hippo__pool *p = excl_new(f, NULL, UINT64_C(1) << 40, 0);
  ref_build(ALIGN);
  for (uint64_t s = 1; s <= 160 * KiB + 300; s++) {
    hippo__slice_ref r;
    uint64_t page, a = align_up(s, ALIGN);
    CK_CORE_OK(p->ops->reserve(p, s, &r));
    page = p->bytes_reserved;
    CK_REQUIRE_MSG(page == ref_class(s), "%llu bytes: page %llu, class %llu",
                   (unsigned long long)s, (unsigned long long)page,
                   (unsigned long long)ref_class(s));
    if (a < 8 * ALIGN)
      CK_REQUIRE_EQ(page, a);
    else
      CK_REQUIRE(8 * (page - a) < page && 8 * (page - a) < a);
    p->ops->release(p, r.slice, s);
    CK_CORE_OK(p->ops->cleanup(p));
  }
  CK_POOL_CHECK(p);
  CK_REQUIRE_EQ(f->calls[HIPPO_CALL_ALLOC], 160 * KiB + 300);
  done(p, f);
}
END_TEST

/* A free page of p bytes serves request s exactly when p is class(s) or
 * the class after it, and then p <= max(a + A, 1.25 a) -- the bound the
 * banner of pool_exclusive.c documents. */
START_TEST(excl_reuse_bound) {
  fake_be *f = fake_new(64 * GiB, ALIGN);
  hippo__pool *p = excl_new(f, NULL, UINT64_C(1) << 40, 0);
  uint64_t tried = 0, reused = 0;
  ref_build(ALIGN);
  for (size_t ci = 0; ref_cls[ci] <= 4 * MiB; ci++) {
    uint64_t page = ref_cls[ci];
    uint64_t step = page / 64 > ALIGN ? page / 64 : ALIGN;
    uint64_t lo = page / 2 > step ? page / 2 - step : 1;
    for (uint64_t s = lo; s <= page + step; s += step / 2 + 1) {
      hippo__slice_ref r, q;
      uint64_t a = align_up(s, ALIGN), calls;
      bool expect = page == ref_class(s) || page == ref_next(s);
      r = reserve(p, page);
      CK_REQUIRE_EQ(p->bytes_reserved, page);
      release(p, r, page);
      calls = f->calls[HIPPO_CALL_ALLOC];
      CK_CORE_OK(p->ops->reserve(p, s, &q));
      CK_POOL_CHECK(p);
      tried++;
      if (expect) {
        reused++;
        CK_REQUIRE_MSG(q.addr == r.addr && q.slice == r.slice &&
                           f->calls[HIPPO_CALL_ALLOC] == calls,
                       "page %llu not reused for %llu bytes",
                       (unsigned long long)page, (unsigned long long)s);
        CK_REQUIRE_EQ(p->bytes_padding, page - s);
        /* The documented bound. */
        CK_REQUIRE(page - a <= ALIGN || 4 * (page - a) < a);
        if (a >= 8 * ALIGN)
          CK_REQUIRE(4 * (page - a) < a);
        else
          CK_REQUIRE(page - a <= ALIGN);
      } else {
        CK_REQUIRE_MSG(q.addr != r.addr &&
                           f->calls[HIPPO_CALL_ALLOC] == calls + 1,
                       "page %llu reused for %llu bytes (class %llu)",
                       (unsigned long long)page, (unsigned long long)s,
                       (unsigned long long)ref_class(s));
        CK_REQUIRE_EQ(p->pages, 2);
      }
      release(p, q, s);
      CK_CORE_OK(p->ops->cleanup(p));
      CK_REQUIRE_EQ(p->pages, 0);
    }
  }
  CK_REQUIRE(reused > 100);
  CK_REQUIRE(tried - reused > 100);
  done(p, f);
}
END_TEST

START_TEST(excl_reuse) {
  fake_be *f = fake_new(GiB, ALIGN);
  hippo__pool *p = excl_new(f, NULL, 64 * MiB, 0);
  hippo__slice_ref a, b, c, d;
  hippo_pool_report rep;

  /* Same class: the same page, same slice id, no new backend call. */
  a = reserve(p, 1000);
  ck_assert_uint_eq(a.addr, FAKE_BASE);
  release(p, a, 1000);
  b = reserve(p, 900);
  ck_assert_uint_eq(b.addr, a.addr);
  ck_assert_uint_eq(b.slice, a.slice);
  ck_assert_uint_eq(f->calls[HIPPO_CALL_ALLOC], 1);
  ck_assert_uint_eq(report(p).bytes_padding, 1024 - 900);
  release(p, b, 900);

  /* Most recently freed first within a class. */
  a = reserve(p, 1024);             /* the old page */
  b = reserve(p, 1024);             /* a new one at FAKE_BASE + 1024 + 256 */
  ck_assert_uint_eq(b.addr, FAKE_BASE + 1024 + ALIGN);
  release(p, a, 1024);
  release(p, b, 1024);
  c = reserve(p, 1000);
  ck_assert_uint_eq(c.addr, b.addr);
  d = reserve(p, 1000);
  ck_assert_uint_eq(d.addr, a.addr);
  ck_assert_uint_eq(f->calls[HIPPO_CALL_ALLOC], 2);
  release(p, c, 1000);
  release(p, d, 1000);
  CK_CORE_OK(p->ops->cleanup(p));
  ck_assert_uint_eq(f->calls[HIPPO_CALL_FREE], 2);

  /* The next class up serves: a page of 1 MiB + 128 KiB for 1 MiB. */
  a = reserve(p, MiB + 1);
  ck_assert_uint_eq(report(p).bytes_reserved, MiB + 128 * KiB);
  release(p, a, MiB + 1);
  b = reserve(p, MiB);
  ck_assert_uint_eq(b.addr, a.addr);
  rep = report(p);
  ck_assert_uint_eq(rep.bytes_padding, 128 * KiB);
  ck_assert_uint_eq(rep.pages, 1);
  release(p, b, MiB);

  /* Two classes down does not: 896 KiB is class 896 KiB, next 960 KiB. */
  c = reserve(p, 896 * KiB);
  ck_assert_uint_ne(c.addr, a.addr);
  ck_assert_uint_eq(report(p).bytes_reserved,
                    MiB + 128 * KiB + 896 * KiB);
  /* A smaller page never serves a larger request. */
  release(p, c, 896 * KiB);
  d = reserve(p, 1152 * KiB + 1);
  ck_assert_uint_ne(d.addr, a.addr);
  ck_assert_uint_ne(d.addr, c.addr);
  ck_assert_uint_eq(report(p).pages, 3);
  ck_assert_uint_eq(report(p).bytes_reserved,
                    MiB + 128 * KiB + 896 * KiB + MiB + 256 * KiB);
  release(p, d, 1152 * KiB + 1);
  done(p, f);
}
END_TEST

START_TEST(excl_padding) {
  fake_be *f = fake_new(GiB, 512);
  hippo__pool *p = excl_new(f, NULL, MiB, 0);
  hippo__slice_ref a, b;
  hippo_pool_report rep;
  ck_assert_uint_eq(p->alignment, 512);
  a = reserve(p, 1);
  b = reserve(p, 513);
  rep = report(p);
  ck_assert_uint_eq(rep.bytes_reserved, 512 + 1024);
  ck_assert_uint_eq(rep.bytes_in_use, 514);
  ck_assert_uint_eq(rep.bytes_padding, 511 + 511);
  ck_assert_uint_eq(rep.bytes_free, 0);
  ck_assert_uint_eq(b.addr, FAKE_BASE + 512 + 512);
  release(p, a, 1);
  release(p, b, 513);
  done(p, f);
}
END_TEST

START_TEST(excl_periodic) {
  fake_be *f = fake_new(GiB, ALIGN);
  hippo__pool *p = excl_new(f, NULL, MiB, 10);
  hippo__slice_ref a, b, c;

  CK_CORE_OK(p->ops->tick(p, 5));
  a = reserve(p, 1000);
  b = reserve(p, 5000);
  c = reserve(p, 300);
  release(p, a, 1000); /* free since 5 */
  CK_CORE_OK(p->ops->tick(p, 8));
  release(p, b, 5000); /* free since 8 */
  CK_CORE_OK(p->ops->tick(p, 14));
  CK_POOL_CHECK(p);
  ck_assert_uint_eq(p->pages, 3);
  ck_assert_uint_eq(f->calls[HIPPO_CALL_FREE], 0);
  CK_CORE_OK(p->ops->tick(p, 15)); /* exactly one period after 5 */
  CK_POOL_CHECK(p);
  ck_assert_uint_eq(p->pages, 2);
  ck_assert_uint_eq(f->nfreed, 1);
  ck_assert_uint_eq(f->freed[0], a.addr);
  CK_CORE_OK(p->ops->tick(p, 17));
  ck_assert_uint_eq(p->pages, 2);
  CK_CORE_OK(p->ops->tick(p, 18));
  CK_POOL_CHECK(p);
  ck_assert_uint_eq(p->pages, 1);
  ck_assert_uint_eq(f->freed[1], b.addr);
  ck_assert_uint_eq(report(p).bytes_reserved, 512);

  /* A reused page restarts its period when freed again. */
  release(p, c, 300); /* free since 18 */
  CK_CORE_OK(p->ops->tick(p, 20));
  a = reserve(p, 300);
  ck_assert_uint_eq(a.addr, c.addr);
  CK_CORE_OK(p->ops->tick(p, 30));
  release(p, a, 300); /* free since 30 */
  CK_CORE_OK(p->ops->tick(p, 39));
  ck_assert_uint_eq(p->pages, 1);
  /* A smaller `now` does not turn the clock back. */
  CK_CORE_OK(p->ops->tick(p, 3));
  ck_assert_uint_eq(p->pages, 1);
  CK_CORE_OK(p->ops->tick(p, 40));
  ck_assert_uint_eq(p->pages, 0);
  ck_assert_uint_eq(f->calls[HIPPO_CALL_FREE], 3);
  done(p, f);

  /* dealloc_period 0: never. */
  f = fake_new(GiB, ALIGN);
  p = excl_new(f, NULL, MiB, 0);
  a = reserve(p, 1000);
  release(p, a, 1000);
  CK_CORE_OK(p->ops->tick(p, UINT64_MAX));
  ck_assert_uint_eq(p->pages, 1);
  done(p, f);
}
END_TEST

START_TEST(excl_cleanup) {
  fake_be *f = fake_new(GiB, ALIGN);
  hippo__page_acct acct;
  hippo__pool *p = excl_new(f, &acct, MiB, 0);
  hippo__slice_ref r[5];
  hippo_pool_report rep;
  acct_init(&acct);
  uint64_t sizes[5] = {100, 2000, 3000, 70000, 256};
  for (int i = 0; i < 5; i++)
    r[i] = reserve(p, sizes[i]);
  /* pages: 256, 2048, 3072, 73728, 256 */
  ck_assert_uint_eq(atomic_load(&acct.bytes_reserved),
                    256 + 2048 + 3072 + 73728 + 256);
  ck_assert_uint_eq(atomic_load(&acct.pages), 5);
  release(p, r[1], 2000);
  release(p, r[3], 70000);
  CK_CORE_OK(p->ops->cleanup(p));
  CK_POOL_CHECK(p);
  ck_assert_uint_eq(f->calls[HIPPO_CALL_FREE], 2);
  ck_assert_uint_eq(f->held_pages, 3);
  ck_assert_uint_eq(f->held_bytes, 256 + 3072 + 256);
  rep = report(p);
  ck_assert_uint_eq(rep.pages, 3);
  ck_assert_uint_eq(rep.peak_pages, 5);
  ck_assert_uint_eq(rep.bytes_reserved, 256 + 3072 + 256);
  ck_assert_uint_eq(rep.bytes_free, 0);
  ck_assert_uint_eq(atomic_load(&acct.bytes_reserved), 256 + 3072 + 256);
  ck_assert_uint_eq(atomic_load(&acct.peak_bytes_reserved),
                    256 + 2048 + 3072 + 73728 + 256);
  ck_assert_uint_eq(atomic_load(&acct.pages), 3);
  /* Cleanup with nothing free calls nothing. */
  CK_CORE_OK(p->ops->cleanup(p));
  ck_assert_uint_eq(f->calls[HIPPO_CALL_FREE], 2);
  release(p, r[0], 100);
  release(p, r[2], 3000);
  release(p, r[4], 256);
  done(p, f);
  ck_assert_uint_eq(atomic_load(&acct.bytes_reserved), 0);
  ck_assert_uint_eq(atomic_load(&acct.pages), 0);
}
END_TEST

/* A page whose free fails is kept, accounted, free and reusable; the rest
 * go; the first failure is returned.  tick stops at it. */
START_TEST(excl_free_failure) {
  fake_be *f = fake_new(GiB, ALIGN);
  hippo__pool *p = excl_new(f, NULL, MiB, 4);
  hippo__slice_ref a, b, c;
  hippo_pool_report rep;
  a = reserve(p, 1000);
  b = reserve(p, 5000);
  c = reserve(p, 9000);
  release(p, a, 1000);
  release(p, b, 5000);
  release(p, c, 9000);
  f->fail_free_addr = b.addr;
  CK_CORE_FAILS(p->ops->cleanup(p), HIPPO_BACKEND_ERROR, "refused");
  ck_assert(strstr(hippo__error_get(), "EXCLUSIVE pool") != NULL);
  CK_POOL_CHECK(p);
  rep = report(p);
  ck_assert_uint_eq(rep.pages, 1);
  ck_assert_uint_eq(rep.bytes_reserved, 5120);
  ck_assert_uint_eq(rep.bytes_free, 5120);
  ck_assert_uint_eq(rep.largest_free, 5120);
  ck_assert_uint_eq(f->nfreed, 2);
  /* Still reusable. */
  a = reserve(p, 5000);
  ck_assert_uint_eq(a.addr, b.addr);
  ck_assert_uint_eq(f->calls[HIPPO_CALL_ALLOC], 3);
  release(p, a, 5000); /* free since clock 0 */
  /* tick keeps a page whose free fails and tries it again a whole period
   * later (one call per period, not one per reservation) */
  CK_CORE_FAILS(p->ops->tick(p, 4), HIPPO_BACKEND_ERROR, "refused");
  CK_POOL_CHECK(p);
  ck_assert_uint_eq(p->pages, 1);
  ck_assert_uint_eq(p->due, 8);
  f->fail_free_addr = 0;
  CK_CORE_OK(p->ops->tick(p, 7));
  ck_assert_uint_eq(p->pages, 1);
  CK_CORE_OK(p->ops->tick(p, 8));
  ck_assert_uint_eq(p->pages, 0);
  /* a failing page holds back no other: the one behind it goes */
  a = reserve(p, 1000);
  b = reserve(p, 5000);
  release(p, a, 1000); /* free since clock 8, first in the FIFO */
  release(p, b, 5000);
  f->fail_free_addr = a.addr;
  CK_CORE_FAILS(p->ops->tick(p, 12), HIPPO_BACKEND_ERROR, "refused");
  CK_POOL_CHECK(p);
  ck_assert_uint_eq(p->pages, 1);
  ck_assert_uint_eq(f->freed[f->nfreed - 1], b.addr);
  f->fail_free_addr = 0;
  CK_CORE_OK(p->ops->tick(p, 16));
  ck_assert_uint_eq(p->pages, 0);
  done(p, f);
}
END_TEST

START_TEST(excl_alloc_failure) {
  fake_be *f = fake_new(64 * KiB, ALIGN);
  hippo__page_acct acct;
  hippo__pool *p = excl_new(f, &acct, MiB, 0);
  hippo__slice_ref a, r = {7, 7, 0};
  hippo_pool_report before, after;
  acct_init(&acct);
  a = reserve(p, 1000);
  release(p, a, 1000);
  before = report(p);
  CK_CORE_OK(f->head.ops->emu_inject_fault(&f->head, HIPPO_CALL_ALLOC, 1,
                                           HIPPO_OUT_OF_MEMORY));
  CK_CORE_FAILS(p->ops->reserve(p, 5000, &r), HIPPO_OUT_OF_MEMORY, "injected");
  ck_assert(strstr(hippo__error_get(), "EXCLUSIVE pool") != NULL);
  ck_assert_uint_eq(r.addr, 7);
  after = report(p);
  ck_assert_int_eq(memcmp(&before, &after, sizeof before), 0);
  ck_assert_uint_eq(atomic_load(&acct.pages), 1);
  CK_POOL_CHECK(p);
  /* The free page is still there; the next reserve works. */
  a = reserve(p, 1000);
  ck_assert_uint_eq(a.addr, FAKE_BASE);
  /* Real out of memory (capacity 64 KiB) changes nothing either. */
  before = report(p);
  CK_CORE_FAILS(p->ops->reserve(p, 64 * KiB, &r), HIPPO_OUT_OF_MEMORY,
                "out of memory");
  after = report(p);
  ck_assert_int_eq(memcmp(&before, &after, sizeof before), 0);
  CK_POOL_CHECK(p);
  release(p, a, 1000);
  done(p, f);
}
END_TEST

START_TEST(excl_report) {
  fake_be *f = fake_new(GiB, ALIGN);
  hippo__pool *p = excl_new(f, NULL, 4 * MiB, 0);
  hippo__slice_ref a, b, c, d, e;
  hippo_pool_report rep;
  a = reserve(p, 1000);    /* page 1024 */
  b = reserve(p, MiB + 1); /* page 1179648 */
  c = reserve(p, 5000);    /* page 5120 */
  d = reserve(p, 1);       /* page 256 */
  e = reserve(p, 3 * MiB); /* page 3 MiB */
  release(p, c, 5000);
  release(p, d, 1);
  release(p, e, 3 * MiB);
  CK_CORE_OK(p->ops->cleanup(p)); /* e, c, d go */
  c = reserve(p, 5000);
  d = reserve(p, 1);
  release(p, c, 5000);
  release(p, d, 1);
  rep = report(p);
  ck_assert_uint_eq(rep.struct_size, sizeof rep);
  ck_assert_uint_eq(rep.kind, HIPPO_POOL_EXCLUSIVE);
  ck_assert_uint_eq(p->opt.max_alloc_size, 4 * MiB);
  ck_assert_uint_eq(rep.pages, 4);
  ck_assert_uint_eq(rep.peak_pages, 5);
  ck_assert_uint_eq(rep.allocations, 2);
  ck_assert_uint_eq(rep.bytes_in_use, 1000 + MiB + 1);
  ck_assert_uint_eq(rep.bytes_padding, 24 + 128 * KiB - 1);
  ck_assert_uint_eq(rep.bytes_reserved, 1024 + 1179648 + 5120 + 256);
  ck_assert_uint_eq(rep.largest_allocation, 3 * MiB);
  ck_assert_uint_eq(rep.bytes_free, 5120 + 256);
  ck_assert_uint_eq(rep.largest_free, 5120);
  release(p, a, 1000);
  release(p, b, MiB + 1);
  rep = report(p);
  ck_assert_uint_eq(rep.largest_free, 1179648);
  ck_assert_uint_eq(rep.bytes_free, rep.bytes_reserved);
  ck_assert_uint_eq(rep.allocations, 0);
  ck_assert_uint_eq(rep.bytes_in_use, 0);
  ck_assert_uint_eq(rep.bytes_padding, 0);
  done(p, f);
}
END_TEST

/* check() is not vacuous: a bad release is flagged. */
START_TEST(check_catches) {
  for (int kind = 0; kind < 3; kind++) {
    fake_be *f = fake_new(GiB, ALIGN);
    hippo__pool *p = kind == 0   ? excl_new(f, NULL, MiB, 0)
                     : kind == 1 ? direct_new(f, NULL, 0, 0)
                                 : persistent_new(f, NULL);
    hippo__slice_ref a = reserve(p, 1000);
    p->ops->release(p, a.slice + 5, 1000); /* no such slice */
    CK_CORE_FAILS(p->ops->check(p), HIPPO_INTERNAL, "releases");
    p->ops->destroy(p);
    fake_destroy(&f->head);

    f = fake_new(GiB, ALIGN);
    p = kind == 0 ? excl_new(f, NULL, MiB, 0)
        : kind == 1 ? direct_new(f, NULL, 0, 0)
                    : persistent_new(f, NULL);
    a = reserve(p, 1000);
    release(p, a, 1000);
    p->ops->release(p, a.slice, 1000); /* twice */
    CK_CORE_FAILS(p->ops->check(p), HIPPO_INTERNAL, "check");
    p->ops->destroy(p);
    fake_destroy(&f->head);

    f = fake_new(GiB, ALIGN);
    p = kind == 0 ? excl_new(f, NULL, MiB, 0)
        : kind == 1 ? direct_new(f, NULL, 0, 0)
                    : persistent_new(f, NULL);
    a = reserve(p, 1000);
    p->bytes_in_use++; /* a figure out of step */
    CK_CORE_FAILS(p->ops->check(p), HIPPO_INTERNAL, "bytes_in_use");
    p->bytes_in_use--;
    release(p, a, 1000);
    done(p, f);
  }
}
END_TEST

/* ===== DIRECT ============================================================= */

START_TEST(direct_accept) {
  fake_be *f = fake_new(GiB, ALIGN);
  hippo__pool *p = direct_new(f, NULL, 0, 0);
  hippo__slice_ref r;
  ck_assert_uint_eq(p->kind, HIPPO_POOL_DIRECT);
  /* anything up to the device (rounded down to the alignment) */
  ck_assert_uint_eq(p->max_size, GiB);
  ck_assert_uint_eq(p->max_size % ALIGN, 0);
  ck_assert_uint_eq(report(p).kind, HIPPO_POOL_DIRECT);
  /* A request bigger than the device is too big: no allocation tried. */
  CK_CORE_FAILS(p->ops->reserve(p, p->max_size + 1, &r), HIPPO_BUFFER_TOO_BIG,
                "DIRECT pool");
  CK_CORE_FAILS(p->ops->reserve(p, UINT64_MAX - ALIGN, &r),
                HIPPO_BUFFER_TOO_BIG, "DIRECT pool");
  CK_CORE_FAILS(p->ops->reserve(p, 0, &r), HIPPO_INVALID_ARGUMENT,
                "DIRECT pool");
  CK_POOL_CHECK(p);
  ck_assert_uint_eq(p->pages, 0);
  done(p, f);
}
END_TEST

START_TEST(direct_reuse) {
  fake_be *f = fake_new(GiB, ALIGN);
  hippo__pool *p = direct_new(f, NULL, 0, 0);
  hippo__slice_ref a, b, c, d;
  hippo_pool_report rep;
  a = reserve(p, 1000);
  ck_assert_uint_eq(a.addr, FAKE_BASE);
  ck_assert_uint_eq(report(p).bytes_reserved, 1024);
  ck_assert_uint_eq(report(p).bytes_padding, 24);
  release(p, a, 1000);
  /* Same aligned size: the same allocation. */
  b = reserve(p, 1024);
  ck_assert_uint_eq(b.addr, a.addr);
  ck_assert_uint_eq(b.slice, a.slice);
  ck_assert_uint_eq(report(p).bytes_padding, 0);
  release(p, b, 1024);
  /* Another aligned size: a new allocation, exactly its size. */
  c = reserve(p, 1025);
  ck_assert_uint_eq(c.addr, FAKE_BASE + 1024 + ALIGN);
  rep = report(p);
  ck_assert_uint_eq(rep.bytes_reserved, 1024 + 1280);
  ck_assert_uint_eq(rep.bytes_padding, 255);
  ck_assert_uint_eq(rep.bytes_free, 1024);
  ck_assert_uint_eq(rep.largest_free, 1024);
  /* Smaller, same aligned size: reuses. */
  d = reserve(p, 769);
  ck_assert_uint_eq(d.addr, a.addr);
  ck_assert_uint_eq(report(p).bytes_padding, 255 + 255);
  ck_assert_uint_eq(f->calls[HIPPO_CALL_ALLOC], 2);
  /* Smaller aligned size does not reuse a larger one. */
  release(p, c, 1025);
  b = reserve(p, 1024);
  ck_assert_uint_eq(f->calls[HIPPO_CALL_ALLOC], 3);
  ck_assert_uint_eq(report(p).largest_free, 1280);
  release(p, d, 769);
  release(p, b, 1024);
  /* Two free of 1024 and one of 1280: LIFO per size. */
  a = reserve(p, 1024);
  ck_assert_uint_eq(a.addr, b.addr);
  release(p, a, 1024);
  done(p, f);
}
END_TEST

START_TEST(direct_many_sizes) {
  /* Many distinct sizes: the size map grows and shrinks. */
  fake_be *f = fake_new(64 * GiB, ALIGN);
  hippo__pool *p = direct_new(f, NULL, 0, 0);
  hippo__slice_ref *r = calloc(3000, sizeof *r);
  ck_assert_ptr_nonnull(r);
  for (uint64_t i = 0; i < 3000; i++)
    r[i] = reserve(p, (i + 1) * ALIGN - 3);
  for (uint64_t i = 0; i < 3000; i += 2)
    release(p, r[i], (i + 1) * ALIGN - 3);
  ck_assert_uint_eq(report(p).largest_free, 2999 * ALIGN);
  for (uint64_t i = 0; i < 3000; i += 2) {
    hippo__slice_ref q = reserve(p, (i + 1) * ALIGN);
    ck_assert_uint_eq(q.addr, r[i].addr);
    r[i] = q;
  }
  ck_assert_uint_eq(f->calls[HIPPO_CALL_ALLOC], 3000);
  ck_assert_uint_eq(report(p).bytes_free, 0);
  for (uint64_t i = 0; i < 3000; i++)
    p->ops->release(p, r[i].slice, (i + 1) * ALIGN - (i % 2 ? 3 : 0));
  CK_POOL_CHECK(p);
  CK_CORE_OK(p->ops->cleanup(p));
  ck_assert_uint_eq(f->held_pages, 0);
  ck_assert_uint_eq(f->calls[HIPPO_CALL_FREE], 3000);
  free(r);
  done(p, f);
}
END_TEST

START_TEST(direct_reclaim) {
  fake_be *f = fake_new(GiB, ALIGN);
  hippo__pool *p = direct_new(f, NULL, 4096, 0);
  hippo__slice_ref x, y, z, a, b, c;
  hippo_pool_report rep;
  ck_assert_uint_eq(p->opt.reclaim_at, 4096);
  x = reserve(p, 1024);
  y = reserve(p, 1024);
  z = reserve(p, 2048);
  ck_assert_uint_eq(p->bytes_reserved, 4096);
  release(p, x, 1024);
  release(p, z, 2048);
  release(p, y, 1024); /* FIFO: x, z, y */
  /* A reuse needs no new allocation: no reclaim. */
  a = reserve(p, 2048);
  ck_assert_uint_eq(a.addr, z.addr);
  ck_assert_uint_eq(f->nfreed, 0);
  release(p, a, 2048); /* FIFO: x, y, z */
  /* 512 new: 4096 + 512 > 4096, the oldest (x) goes: 3072 + 512 fits. */
  a = reserve(p, 512);
  ck_assert_uint_eq(f->nfreed, 1);
  ck_assert_uint_eq(f->freed[0], x.addr);
  ck_assert_uint_eq(p->bytes_reserved, 3584);
  /* 3072 new: y (1024) then z (2048) go: 512 + 3072 fits. */
  b = reserve(p, 3000);
  ck_assert_uint_eq(f->nfreed, 3);
  ck_assert_uint_eq(f->freed[1], y.addr);
  ck_assert_uint_eq(f->freed[2], z.addr);
  ck_assert_uint_eq(p->bytes_reserved, 3584);
  /* Nothing free and above the watermark: served anyway. */
  c = reserve(p, 8192);
  rep = report(p);
  ck_assert_uint_eq(rep.bytes_reserved, 3584 + 8192);
  ck_assert_uint_eq(rep.allocations, 3);
  ck_assert_uint_eq(rep.bytes_in_use, 512 + 3000 + 8192);
  ck_assert_uint_eq(rep.bytes_padding, 72);
  ck_assert_uint_eq(f->nfreed, 3);
  /* Free what is there, but stop as soon as it fits: releasing c and a,
   * then 1024 new: 11776 + 1024 > 4096; c (oldest) goes -> 3584 + 1024 >
   * 4096, a goes -> 3072 + 1024 = 4096 fits. */
  release(p, c, 8192);
  release(p, a, 512);
  x = reserve(p, 1024);
  ck_assert_uint_eq(f->nfreed, 5);
  ck_assert_uint_eq(f->freed[3], c.addr);
  ck_assert_uint_eq(f->freed[4], a.addr);
  ck_assert_uint_eq(p->bytes_reserved, 4096);
  release(p, x, 1024);
  release(p, b, 3000);
  ck_assert_uint_eq(p->pages, 2);
  done(p, f);

  /* Exactly at the watermark is under it: reclaim stops there. */
  {
    hippo__slice_ref u1, u2, v, w;
    f = fake_new(GiB, ALIGN);
    p = direct_new(f, NULL, 4096, 0);
    u1 = reserve(p, 256);
    u2 = reserve(p, 256);
    v = reserve(p, 1024);
    w = reserve(p, 2560);
    release(p, u1, 256);
    release(p, u2, 256);
    release(p, v, 1024); /* FIFO: u1, u2, v */
    a = reserve(p, 512); /* 4096 + 512: u1, u2 go; 3584 + 512 = 4096 */
    ck_assert_uint_eq(f->nfreed, 2);
    ck_assert_uint_eq(f->freed[0], u1.addr);
    ck_assert_uint_eq(f->freed[1], u2.addr);
    ck_assert_uint_eq(p->bytes_reserved, 4096);
    ck_assert_uint_eq(report(p).bytes_free, 1024);
    release(p, a, 512);
    release(p, w, 2560);
    done(p, f);
  }
}
END_TEST

/* Reclaim runs once the new allocation is taken: a reservation whose
 * page_alloc fails gives nothing back. */
START_TEST(direct_failed_reserve_reclaims_nothing) {
  fake_be *f = fake_new(GiB, ALIGN);
  hippo__pool *p = direct_new(f, NULL, 4096, 0);
  hippo__slice_ref x = reserve(p, 2048), y = reserve(p, 2048), r = {9, 9, 9};
  hippo_pool_report before, after;
  release(p, x, 2048);
  release(p, y, 2048); /* 4096 held, all free; FIFO: x, y */
  before = report(p);
  CK_CORE_OK(f->head.ops->emu_inject_fault(&f->head, HIPPO_CALL_ALLOC, 1,
                                           HIPPO_BACKEND_ERROR));
  CK_CORE_FAILS(p->ops->reserve(p, 3000, &r), HIPPO_BACKEND_ERROR,
                "DIRECT pool");
  after = report(p);
  ck_assert_int_eq(memcmp(&before, &after, sizeof before), 0);
  ck_assert_uint_eq(f->nfreed, 0);
  ck_assert_uint_eq(r.addr, 9);
  CK_POOL_CHECK(p);
  /* 4096 + 3072 > 4096: x, then y go, after the new one was taken */
  r = reserve(p, 3000);
  ck_assert_uint_eq(f->nfreed, 2);
  ck_assert_uint_eq(f->freed[0], x.addr);
  ck_assert_uint_eq(f->freed[1], y.addr);
  ck_assert_uint_eq(p->bytes_reserved, 3072);
  release(p, r, 3000);
  done(p, f);
}
END_TEST

/* An oversized request in Persistent mode is too big, as in Auto mode. */
START_TEST(persistent_too_big) {
  fake_be *f = fake_new(GiB, ALIGN);
  hippo__pool *p = persistent_new(f, NULL);
  hippo__slice_ref r;
  CK_CORE_FAILS(p->ops->reserve(p, UINT64_MAX, &r), HIPPO_BUFFER_TOO_BIG,
                "PERSISTENT pool");
  CK_POOL_CHECK(p);
  done(p, f);
}
END_TEST

/* A free allocation whose free fails during reclaim is skipped and kept. */
START_TEST(direct_reclaim_failure) {
  fake_be *f = fake_new(GiB, ALIGN);
  hippo__pool *p = direct_new(f, NULL, 2048, 0);
  hippo__slice_ref x, y, a;
  x = reserve(p, 1024);
  y = reserve(p, 1024);
  release(p, x, 1024);
  release(p, y, 1024);
  f->fail_free_addr = x.addr;
  a = reserve(p, 512); /* wants 1536 gone, x refuses, y goes */
  ck_assert_uint_eq(f->nfreed, 1);
  ck_assert_uint_eq(f->freed[0], y.addr);
  ck_assert_uint_eq(p->bytes_reserved, 1024 + 512);
  ck_assert_uint_eq(report(p).bytes_free, 1024);
  x = reserve(p, 1000); /* x is still reusable */
  ck_assert_uint_eq(x.addr, f->fail_free_addr);
  f->fail_free_addr = 0;
  release(p, x, 1000);
  release(p, a, 512);
  done(p, f);
}
END_TEST

START_TEST(direct_periodic_cleanup) {
  fake_be *f = fake_new(GiB, ALIGN);
  hippo__page_acct acct;
  hippo__pool *p;
  hippo__slice_ref a, b, c;
  hippo_pool_options o = opts(HIPPO_POOL_DIRECT, 0, 0, 100);
  acct_init(&acct);
  CK_CORE_OK(hippo__pool_direct_create(&f->head, &acct, &o, &p));
  CK_CORE_OK(p->ops->tick(p, 1000));
  a = reserve(p, 100);
  b = reserve(p, 200);
  c = reserve(p, 300);
  release(p, b, 200);  /* free since 1000 */
  CK_CORE_OK(p->ops->tick(p, 1050));
  release(p, a, 100);  /* free since 1050 */
  CK_CORE_OK(p->ops->tick(p, 1099));
  ck_assert_uint_eq(p->pages, 3);
  CK_CORE_OK(p->ops->tick(p, 1100));
  CK_POOL_CHECK(p);
  ck_assert_uint_eq(p->pages, 2);
  ck_assert_uint_eq(f->freed[0], b.addr);
  ck_assert_uint_eq(atomic_load(&acct.pages), 2);
  CK_CORE_OK(p->ops->tick(p, 1149));
  ck_assert_uint_eq(p->pages, 2);
  /* cleanup frees the rest of the free ones, not the live one. */
  CK_CORE_OK(p->ops->cleanup(p));
  CK_POOL_CHECK(p);
  ck_assert_uint_eq(p->pages, 1);
  ck_assert_uint_eq(f->freed[1], a.addr);
  ck_assert_uint_eq(f->calls[HIPPO_CALL_FREE], 2);
  ck_assert_uint_eq(p->peak_pages, 3);
  ck_assert_uint_eq(atomic_load(&acct.peak_bytes_reserved), 256 + 256 + 512);
  ck_assert_uint_eq(atomic_load(&acct.bytes_reserved), 512);
  ck_assert_uint_eq(p->largest_allocation, 300);
  release(p, c, 300);
  done(p, f);
}
END_TEST

START_TEST(direct_failures) {
  fake_be *f = fake_new(GiB, ALIGN);
  hippo__pool *p = direct_new(f, NULL, 0, 0);
  hippo__slice_ref a, b, c, r = {9, 9, 0};
  hippo_pool_report before, after;
  a = reserve(p, 1000);
  b = reserve(p, 2000);
  c = reserve(p, 3000);
  release(p, a, 1000);
  before = report(p);
  CK_CORE_OK(f->head.ops->emu_inject_fault(&f->head, HIPPO_CALL_ALLOC, 1,
                                           HIPPO_OUT_OF_MEMORY));
  CK_CORE_FAILS(p->ops->reserve(p, 5000, &r), HIPPO_OUT_OF_MEMORY,
                "DIRECT pool");
  ck_assert(strstr(hippo__error_get(), "injected") != NULL);
  after = report(p);
  ck_assert_int_eq(memcmp(&before, &after, sizeof before), 0);
  ck_assert_uint_eq(r.addr, 9);
  CK_POOL_CHECK(p);
  release(p, b, 2000);
  release(p, c, 3000);
  /* cleanup: two refuse (second and third in FIFO order via the injected
   * call fault and the address), one goes; the first failure returns. */
  CK_CORE_OK(f->head.ops->emu_inject_fault(&f->head, HIPPO_CALL_FREE, 2,
                                           HIPPO_BACKEND_ERROR));
  f->fail_free_addr = c.addr;
  CK_CORE_FAILS(p->ops->cleanup(p), HIPPO_BACKEND_ERROR, "injected");
  ck_assert(strstr(hippo__error_get(), "1 more") != NULL);
  CK_POOL_CHECK(p);
  ck_assert_uint_eq(p->pages, 2);
  ck_assert_uint_eq(f->nfreed, 1);
  ck_assert_uint_eq(f->freed[0], a.addr);
  ck_assert_uint_eq(report(p).bytes_free, 2048 + 3072);
  f->fail_free_addr = 0;
  CK_CORE_OK(p->ops->cleanup(p));
  ck_assert_uint_eq(p->pages, 0);
  done(p, f);
}
END_TEST

/* ===== PERSISTENT ========================================================= */

START_TEST(persistent_basics) {
  fake_be *f = fake_new(GiB, ALIGN);
  hippo__page_acct acct;
  hippo__pool *p = persistent_new(f, &acct);
  hippo__slice_ref a, b, c;
  hippo_pool_report rep;
  acct_init(&acct);
  hippo_pool_options zero;
  ck_assert_uint_eq(p->kind, HIPPO_POOL_PERSISTENT);
  ck_assert_uint_eq(p->max_size, GiB); /* the device, no more */
  a = reserve(p, 4000);
  b = reserve(p, 4096);
  rep = report(p);
  ck_assert_uint_eq(rep.kind, HIPPO_POOL_PERSISTENT);
  memset(&zero, 0, sizeof zero);
  zero.struct_size = sizeof zero;
  zero.kind = HIPPO_POOL_PERSISTENT;
  ck_assert_int_eq(memcmp(&p->opt, &zero, sizeof zero), 0);
  ck_assert_uint_eq(rep.bytes_reserved, 8192);
  ck_assert_uint_eq(rep.bytes_padding, 96);
  ck_assert_uint_eq(b.addr, FAKE_BASE + 4096 + ALIGN);
  release(p, a, 4000);
  /* Exact aligned size only. */
  c = reserve(p, 3841);
  ck_assert_uint_eq(c.addr, a.addr);
  release(p, c, 3841);
  c = reserve(p, 3840);
  ck_assert_uint_ne(c.addr, a.addr);
  ck_assert_uint_eq(f->calls[HIPPO_CALL_ALLOC], 3);
  /* Never periodically freed. */
  CK_CORE_OK(p->ops->tick(p, UINT64_MAX));
  ck_assert_uint_eq(p->pages, 3);
  rep = report(p);
  ck_assert_uint_eq(rep.bytes_free, 4096);
  ck_assert_uint_eq(rep.largest_free, 4096);
  ck_assert_uint_eq(rep.peak_pages, 3);
  /* cleanup frees the free one. */
  CK_CORE_OK(p->ops->cleanup(p));
  ck_assert_uint_eq(p->pages, 2);
  ck_assert_uint_eq(f->freed[0], a.addr);
  ck_assert_uint_eq(atomic_load(&acct.bytes_reserved), 4096 + 3840);
  /* A failed allocation changes nothing. */
  CK_CORE_OK(f->head.ops->emu_inject_fault(&f->head, HIPPO_CALL_ALLOC, 1,
                                           HIPPO_OUT_OF_MEMORY));
  rep = report(p);
  {
    hippo_pool_report after;
    CK_CORE_FAILS(p->ops->reserve(p, 100, &a), HIPPO_OUT_OF_MEMORY,
                  "PERSISTENT pool");
    after = report(p);
    ck_assert_int_eq(memcmp(&rep, &after, sizeof rep), 0);
  }
  release(p, b, 4096);
  release(p, c, 3840);
  done(p, f);
}
END_TEST

/* ===== on the DRY backend ================================================= */

START_TEST(on_dry) {
  for (int kind = 0; kind < 3; kind++) {
    hippo__backend *be = NULL;
    hippo__pool *p = NULL;
    hippo__slice_ref a, b, c;
    hippo_emu_counters k;
    hippo_pool_options o = kind == 0 ? opts(HIPPO_POOL_EXCLUSIVE, MiB, 0, 0)
                                     : opts(HIPPO_POOL_DIRECT, 0, 0, 0);
    CK_CORE_OK(hippo__backend_dry_create(GiB, 256, &be));
    if (kind == 2)
      CK_CORE_OK(hippo__pool_persistent_create(be, NULL, &p));
    else
      CK_CORE_OK(hippo__pool_create(be, NULL, &o, &p));
    a = reserve(p, 1000);
    b = reserve(p, 70000);
    c = reserve(p, 1000);
    release(p, a, 1000);
    release(p, b, 70000);
    k = counters_of(be);
    ck_assert_uint_eq(k.calls[HIPPO_CALL_ALLOC], 3);
    ck_assert_uint_eq(k.pages_held, 3);
    ck_assert_uint_eq(k.bytes_held, kind == 0 ? 1024 + 73728 + 1024
                                              : 1024 + 70144 + 1024);
    CK_CORE_OK(be->ops->emu_inject_fault(be, HIPPO_CALL_ALLOC, 1,
                                         HIPPO_OUT_OF_MEMORY));
    ck_assert_int_eq(p->ops->reserve(p, 300000, &a), HIPPO_OUT_OF_MEMORY);
    CK_POOL_CHECK(p);
    CK_CORE_OK(p->ops->cleanup(p));
    k = counters_of(be);
    ck_assert_uint_eq(k.calls[HIPPO_CALL_ALLOC], 4);
    ck_assert_uint_eq(k.calls[HIPPO_CALL_FREE], 2);
    ck_assert_uint_eq(k.pages_held, 1);
    ck_assert_uint_eq(k.bytes_held, 1024);
    ck_assert_uint_eq(p->bytes_reserved, 1024);
    release(p, c, 1000);
    p->ops->destroy(p);
    k = counters_of(be);
    ck_assert_uint_eq(k.pages_held, 0);
    be->ops->destroy(be);
  }
}
END_TEST

/* A request whose class page does not fit the device's free memory gets a
 * page of exactly its aligned size; free, that page serves a request
 * within the reuse bound, not one beyond it, and goes back like any page. */
START_TEST(excl_exact_page) {
  hippo__backend *be;
  hippo__pool *p;
  hippo__slice_ref a, b, r;
  hippo_pool_report rep;
  hippo_pool_options o = opts(HIPPO_POOL_EXCLUSIVE, GiB, 0, 0);
  CK_CORE_OK(hippo__backend_dry_create(1000 * MiB, 256, &be));
  CK_CORE_OK(hippo__pool_create(be, NULL, &o, &p));
  /* class(970 MiB) = 1 GiB > the 1000 MiB free: two calls, one page */
  a = reserve(p, 970 * MiB);
  ck_assert_uint_eq(counters_of(be).calls[HIPPO_CALL_ALLOC], 2);
  ck_assert_uint_eq(counters_of(be).pages_held, 1);
  ck_assert_uint_eq(p->bytes_reserved, 970 * MiB);
  ck_assert_uint_eq(p->bytes_padding, 0);
  CK_POOL_CHECK(p);
  release(p, a, 970 * MiB);
  rep = report(p);
  ck_assert_uint_eq(rep.bytes_free, 970 * MiB);
  ck_assert_uint_eq(rep.largest_free, 970 * MiB);
  CK_POOL_CHECK(p);
  /* 800 MiB: 970 <= 1.25 * 800, the exact page serves it */
  b = reserve(p, 800 * MiB);
  ck_assert_uint_eq(b.addr, a.addr);
  ck_assert_uint_eq(counters_of(be).calls[HIPPO_CALL_ALLOC], 2);
  ck_assert_uint_eq(p->bytes_padding, 170 * MiB);
  CK_POOL_CHECK(p);
  release(p, b, 800 * MiB);
  /* 700 MiB: 970 > 1.25 * 700, not taken; 30 MiB free fit neither its
   * class nor an exact page */
  CK_CORE_FAILS(p->ops->reserve(p, 700 * MiB, &r), HIPPO_OUT_OF_MEMORY,
                "EXCLUSIVE pool");
  ck_assert_uint_eq(p->bytes_reserved, 970 * MiB);
  CK_POOL_CHECK(p);
  CK_CORE_OK(p->ops->cleanup(p));
  ck_assert_uint_eq(counters_of(be).pages_held, 0);
  r = reserve(p, 700 * MiB); /* now its class page fits */
  ck_assert_uint_eq(p->bytes_reserved, 704 * MiB);
  release(p, r, 700 * MiB);
  CK_POOL_CHECK(p);
  p->ops->destroy(p);
  be->ops->destroy(be);
}
END_TEST

/* ===== the free gate ====================================================== */

typedef struct gate_ctx {
  bool allow;
  unsigned asked;
} gate_ctx;

static hippo_status gate_ask(void *ctx, bool *may_free) {
  gate_ctx *g = ctx;
  g->asked++;
  *may_free = g->allow;
  return HIPPO_SUCCESS;
}

/* While the gate says no, tick and reclaim free nothing; the gate is asked
 * only when a page is due, once per reset; cleanup does not ask. */
START_TEST(free_gate) {
  for (int kind = 0; kind < 2; kind++) {
    fake_be *f = fake_new(GiB, ALIGN);
    hippo__pool *p = kind == 0 ? excl_new(f, NULL, MiB, 10)
                               : direct_new(f, NULL, 2048, 10);
    gate_ctx g = {false, 0};
    hippo__free_gate gate = {.ask = gate_ask, .ctx = &g, .answer = -1};
    hippo__slice_ref a, b, c;
    p->gate = &gate;
    a = reserve(p, 1024);
    b = reserve(p, 1024);
    release(p, a, 1024); /* free since 0 */
    release(p, b, 1024);
    CK_CORE_OK(p->ops->tick(p, 9)); /* nothing due: not asked */
    ck_assert_uint_eq(g.asked, 0);
    gate.answer = -1;
    CK_CORE_OK(p->ops->tick(p, 10)); /* due, but no */
    CK_POOL_CHECK(p);
    ck_assert_uint_eq(g.asked, 1);
    ck_assert_uint_eq(p->pages, 2);
    CK_CORE_OK(p->ops->tick(p, 11)); /* the answer holds until reset */
    ck_assert_uint_eq(g.asked, 1);
    if (kind == 1) {
      /* reclaim: 2048 + 512 > 2048, but the gate says no: served above. */
      gate.answer = -1;
      c = reserve(p, 512);
      ck_assert_uint_eq(g.asked, 2);
      ck_assert_uint_eq(p->bytes_reserved, 2048 + 512);
      ck_assert_uint_eq(f->nfreed, 0);
      release(p, c, 512); /* free since 11 */
    }
    g.allow = true;
    gate.answer = -1;
    CK_CORE_OK(p->ops->tick(p, 12));
    CK_POOL_CHECK(p);
    ck_assert_uint_eq(g.asked, kind == 0 ? 2 : 3);
    ck_assert_uint_eq(p->pages, kind == 0 ? 0 : 1);
    if (kind == 1) {
      /* reclaim with the gate open (the answer still cached: yes). */
      c = reserve(p, 2048);
      ck_assert_uint_eq(g.asked, 3);
      ck_assert_uint_eq(p->bytes_reserved, 2048);
      release(p, c, 2048);
    }
    g.allow = false;
    gate.answer = -1;
    CK_CORE_OK(p->ops->cleanup(p)); /* cleanup does not ask */
    ck_assert_uint_eq(g.asked, kind == 0 ? 2 : 3);
    ck_assert_uint_eq(p->pages, 0);
    done(p, f);
  }
}
END_TEST

/* ===== randomized ========================================================= */

static uint64_t rng_state;
static uint64_t rnd(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * UINT64_C(2685821657736338717);
}
static uint64_t rnd_below(uint64_t n) { return rnd() % n; }

typedef struct live {
  uint64_t addr, size, page;
  uint32_t slice;
} live;

#define LIVE_MAX 256

/* kind 0: EXCLUSIVE (max 4 MiB, period 2000); 1: DIRECT (reclaim at
 * 320 MiB, period 3000); 2: PERSISTENT. */
static void random_run(int kind, uint64_t seed, int ops) {
  fake_be *f = fake_new(kind == 0 ? 512 * MiB : kind == 1 ? 2 * GiB : 16 * GiB,
                        ALIGN);
  hippo__pool *p = kind == 0   ? excl_new(f, NULL, 4 * MiB, 2000)
                   : kind == 1 ? direct_new(f, NULL, 320 * MiB, 3000)
                               : persistent_new(f, NULL);
  live *lv = calloc(LIVE_MAX, sizeof *lv);
  size_t n = 0;
  uint64_t clock = 0, in_use = 0, padding = 0, served = 0, failed = 0;
  uint64_t reuses = 0, largest = 0, reclaims = 0;
  uint64_t fixed[40];
  ck_assert_ptr_nonnull(lv);
  ref_build(ALIGN);
  rng_state = seed;
  for (int i = 0; i < 40; i++)
    fixed[i] = 1 + rnd_below(i < 20 ? 8 * KiB : 2 * MiB);

  for (int op = 0; op < ops; op++) {
    uint64_t dice = rnd_below(1000);
    if (dice < 540 && n < LIVE_MAX) { /* reserve */
      uint64_t size, calls = f->calls[HIPPO_CALL_ALLOC];
      uint64_t frees = f->calls[HIPPO_CALL_FREE];
      uint64_t held = f->held_bytes;
      hippo__slice_ref r = {0, 0, 0};
      hippo_pool_report before, after;
      hippo_status st;
      bool inject = rnd_below(100) == 0;
      uint64_t pick = rnd_below(10);
      if (pick < 5)
        size = fixed[rnd_below(40)];
      else if (pick < 8)
        size = 1 + rnd_below(16 * KiB);
      else
        size = 1 + rnd_below(4 * MiB);
      p->ops->report(p, &before);
      if (inject)
        CK_CORE_OK(f->head.ops->emu_inject_fault(&f->head, HIPPO_CALL_ALLOC, 1,
                                                 HIPPO_OUT_OF_MEMORY));
      st = p->ops->reserve(p, size, &r);
      f->fault_at[HIPPO_CALL_ALLOC] = 0;
      clock++;
      if (st != HIPPO_SUCCESS) {
        CK_REQUIRE_EQ(st, HIPPO_OUT_OF_MEMORY);
        CK_REQUIRE_EQ(f->calls[HIPPO_CALL_ALLOC], calls + 1);
        p->ops->report(p, &after);
        if (kind != 1) /* DIRECT may have reclaimed free allocations */
          CK_REQUIRE_EQ(memcmp(&before, &after, sizeof before), 0);
        CK_REQUIRE_EQ(after.allocations, before.allocations);
        CK_REQUIRE_EQ(after.bytes_in_use, before.bytes_in_use);
        CK_REQUIRE_EQ(after.bytes_padding, before.bytes_padding);
        failed++;
      } else {
        size_t pg = fake_page_of(f, r.addr, size);
        uint64_t page;
        served++;
        if (f->calls[HIPPO_CALL_ALLOC] == calls)
          reuses++;
        if (kind == 1 && f->calls[HIPPO_CALL_ALLOC] != calls) {
          /* The watermark: reclaim ran only when the new allocation did not
           * fit under it, and stopped once it did or nothing was free. */
          uint64_t a = align_up(size, ALIGN);
          if (f->calls[HIPPO_CALL_FREE] != frees) {
            CK_REQUIRE(held + a > 320 * MiB);
            reclaims++;
          }
          CK_REQUIRE(f->held_bytes <= 320 * MiB ||
                     p->bytes_reserved - p->bytes_in_use - p->bytes_padding ==
                         0);
        }
        if (kind != 1)
          CK_REQUIRE_EQ(f->calls[HIPPO_CALL_FREE], frees);
        CK_REQUIRE_MSG(pg != SIZE_MAX, "slice 0x%llx+%llu in no page",
                       (unsigned long long)r.addr, (unsigned long long)size);
        CK_REQUIRE_EQ(r.addr % ALIGN, 0);
        CK_REQUIRE_EQ(f->addr[pg], r.addr); /* a page per slice */
        page = f->size[pg];
        if (kind == 0)
          CK_REQUIRE(page == ref_class(size) || page == ref_next(size));
        else
          CK_REQUIRE_EQ(page, align_up(size, ALIGN));
        for (size_t j = 0; j < n; j++) {
          CK_REQUIRE(lv[j].slice != r.slice);
          CK_REQUIRE(r.addr + size <= lv[j].addr ||
                     lv[j].addr + lv[j].size <= r.addr);
        }
        lv[n].addr = r.addr;
        lv[n].size = size;
        lv[n].page = page;
        lv[n].slice = r.slice;
        n++;
        in_use += size;
        padding += page - size;
        if (size > largest)
          largest = size;
      }
    } else if (dice < 960 && n > 0) { /* release */
      size_t j = (size_t)rnd_below(n);
      p->ops->release(p, lv[j].slice, lv[j].size);
      in_use -= lv[j].size;
      padding -= lv[j].page - lv[j].size;
      lv[j] = lv[--n];
    } else if (dice < 995) {
      hippo_status st;
      if (rnd_below(4) == 0)
        f->fail_free_addr = f->n ? f->addr[rnd_below(f->n)] : 0;
      st = p->ops->tick(p, clock);
      CK_REQUIRE(st == HIPPO_SUCCESS || st == HIPPO_BACKEND_ERROR);
      f->fail_free_addr = 0;
    } else {
      hippo_status st;
      if (rnd_below(2) == 0)
        f->fail_free_addr = f->n ? f->addr[rnd_below(f->n)] : 0;
      st = p->ops->cleanup(p);
      CK_REQUIRE(st == HIPPO_SUCCESS || st == HIPPO_BACKEND_ERROR);
      f->fail_free_addr = 0;
      if (st == HIPPO_SUCCESS)
        CK_REQUIRE_EQ(p->pages, n);
    }
    CK_POOL_CHECK(p);
    CK_REQUIRE_EQ(p->allocations, n);
    CK_REQUIRE_EQ(p->bytes_in_use, in_use);
    CK_REQUIRE_EQ(p->bytes_padding, padding);
    CK_REQUIRE_EQ(p->bytes_reserved, f->held_bytes);
    CK_REQUIRE_EQ(p->pages, f->held_pages);
    CK_REQUIRE_EQ(p->largest_allocation, largest);
    CK_REQUIRE(p->pages >= n);
  }
  if (getenv("POOLS_STATS"))
    fprintf(stderr, "kind %d: served %llu reuses %llu reclaims %llu failed "
            "%llu frees %llu\n",
            kind, (unsigned long long)served, (unsigned long long)reuses,
            (unsigned long long)reclaims,
            (unsigned long long)failed,
            (unsigned long long)f->calls[HIPPO_CALL_FREE]);
  /* The run exercised every path. */
  CK_REQUIRE(served > (uint64_t)ops / 3);
  CK_REQUIRE(reuses > served / 10);
  CK_REQUIRE(failed > 10);
  CK_REQUIRE(f->calls[HIPPO_CALL_FREE] > 100);
  if (kind == 1)
    CK_REQUIRE(reclaims > (uint64_t)ops / 1000);
  while (n > 0) {
    n--;
    p->ops->release(p, lv[n].slice, lv[n].size);
  }
  CK_CORE_OK(p->ops->cleanup(p));
  CK_REQUIRE_EQ(p->pages, 0);
  free(lv);
  done(p, f);
}

/* 120,000 operations per kind; a fifth of that under valgrind
 * (make check-valgrind sets HIPPO_VALGRIND), which runs ~60x slower. */
static int random_ops(void) { return getenv("HIPPO_VALGRIND") ? 24000 : 120000; }

START_TEST(random_exclusive) {
  random_run(0, UINT64_C(0x9e3779b97f4a7c15), random_ops());
}
END_TEST
START_TEST(random_direct) {
  random_run(1, UINT64_C(0xdeadbeefcafef00d), random_ops());
}
END_TEST
START_TEST(random_persistent) {
  random_run(2, UINT64_C(0x0123456789abcdef), random_ops());
}
END_TEST

static Suite *pools_suite(void) {
  Suite *s = suite_create("pools");
  TCase *tc = tcase_create("exclusive");
  tcase_add_test(tc, excl_accept);
  tcase_add_test(tc, excl_class_sizes);
  tcase_add_test(tc, excl_class_exhaustive);
  tcase_add_test(tc, excl_reuse_bound);
  tcase_add_test(tc, excl_reuse);
  tcase_add_test(tc, excl_padding);
  tcase_add_test(tc, excl_periodic);
  tcase_add_test(tc, excl_cleanup);
  tcase_add_test(tc, excl_free_failure);
  tcase_add_test(tc, excl_alloc_failure);
  tcase_add_test(tc, excl_exact_page);
  tcase_add_test(tc, excl_report);
  tcase_add_test(tc, check_catches);
  tcase_set_timeout(tc, 60);
  suite_add_tcase(s, tc);
  tc = tcase_create("direct");
  tcase_add_test(tc, direct_accept);
  tcase_add_test(tc, direct_reuse);
  tcase_add_test(tc, direct_many_sizes);
  tcase_add_test(tc, direct_reclaim);
  tcase_add_test(tc, direct_reclaim_failure);
  tcase_add_test(tc, direct_failed_reserve_reclaims_nothing);
  tcase_add_test(tc, persistent_too_big);
  tcase_add_test(tc, direct_periodic_cleanup);
  tcase_add_test(tc, direct_failures);
  tcase_set_timeout(tc, 60);
  suite_add_tcase(s, tc);
  tc = tcase_create("persistent");
  tcase_add_test(tc, persistent_basics);
  tcase_add_test(tc, on_dry);
  tcase_add_test(tc, free_gate);
  suite_add_tcase(s, tc);
  tc = tcase_create("random");
  tcase_add_test(tc, random_exclusive);
  tcase_add_test(tc, random_direct);
  tcase_add_test(tc, random_persistent);
  tcase_set_timeout(tc, 120);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(pools_suite()); }
