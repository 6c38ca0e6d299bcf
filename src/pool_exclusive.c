/* pool_exclusive.c -- EXCLUSIVE pools: a whole page per allocation, pages
 * reused by size class.
 *
 * Options {max_alloc_size, dealloc_period}.  The pool accepts
 * 0 < size <= max_alloc_size (pool->max_size; capped at 2^63 so class sizes
 * never overflow, and at the device's memory, since no larger page could
 * ever be had).  Every reservation gets a page of its own; the slice id
 * is the page's slot index.
 *
 * Size classes.  A request of `size` bytes is first rounded up to the
 * alignment A: a = align_up(size, A).  With k = floor(log2 a), the class
 * step is step(a) = max(2^(k-3), A) (2^(k-3) read as 1 for k < 3), and the
 * class is class(a) = a rounded up to a multiple of step(a).  So every
 * octave [2^k, 2^(k+1)) holds at most 8 classes, 2^k + j * 2^(k-3)
 * (j = 0..7), fewer where the alignment is coarser than 2^(k-3).  The class
 * index of a class size c, with m = floor(log2 c), is
 * 8 m + ((c - 2^m) >> max(m-3, 0)), below
 * 512 for every c <= 2^63 + 2^60.  A new page is always exactly class(a)
 * bytes.
 *
 * Reuse rule.  Free pages wait on one list per class.  A reservation takes
 * the most recently freed page of its own class c = class(a); failing that,
 * of the next class up, next(c) = c + step(c); failing that, a new page of
 * c bytes.  Both lookups are direct array indexing: O(1).
 *
 * Bound (exact), with a = align_up(size, A) and k = floor(log2 a):
 *  - a new page is c = class(a) bytes: c = a when a < 8A (the alignment is
 *    the step), else c - a <= 2^(k-3) - A < a/8 and c - a < c/8: at most
 *    12.5% of the page, plus the alignment padding a - size < A;
 *  - a page of p bytes is handed to the request only if p == class(a) or
 *    p == next(class(a)), so
 *        a <  8A:  p - a <= A;
 *        a >= 8A:  p - a <= 2^(k-2) - A      when class(a) < 2^(k+1),
 *                  p - a <= 3 * 2^(k-3) - A  when class(a) == 2^(k+1),
 *                  and in both cases p - a < a/4;
 *    i.e. p <= max(a + A, 1.25 a) always (p < 1.25 a once a >= 8A).
 *    (With a >= 8A, a lies in (2^k + (j-1) 2^(k-3), 2^k + j 2^(k-3)] for
 *    one j in 1..8 and is a multiple of A; class(a) = 2^k + j 2^(k-3) and
 *    next(class(a)) = class(a) + 2^(k-3), or + 2^(k-2) when j = 8.)
 *  bytes_padding of a live page is p - size.
 *
 * Exact pages.  When a class page does not fit the device (the backend is
 * out of memory, and its free memory holds a but not class(a) bytes), the
 * pool takes a page of exactly a bytes instead: a request within 12.5% of
 * the free memory still gets it.
 * Such a page is not a class size; when free it waits on its own list
 * (EXACT) and serves a later request a' only if a' <= p <= max(a' + A,
 * 1.25 a'), the bound above, looking at EXACT_SCAN of them at most and
 * only when both class lists are empty.
 *
 * Periodic deallocation.  The pool's clock is pool->now (the stream's
 * reservation clock, pool.h).  A page that becomes free at clock t goes back to the backend at the
 * first tick with now >= t + dealloc_period (0 = never).  Free pages also
 * wait on a FIFO in the order they became free, so their free times never
 * decrease along it, and tick only looks at its front: amortized O(1).
 * A page reused from the middle of the FIFO is unlinked in O(1).  tick asks
 * the pool's free gate (pool.h) only when a page is due, and frees nothing
 * while it says no (a stream of the device captures a graph); cleanup does
 * not ask (the manager refuses cleanup while a capture records).
 *
 * Failures.  A failed page_alloc (or host memory for the slot array)
 * changes nothing.  A page whose page_free fails is kept: still accounted,
 * still free, still reusable, still at its place in the FIFO; cleanup tries
 * every other page and returns the first failure; tick puts it back at the
 * end of the FIFO, due a whole period later, and goes on.
 *
 * The page slots, the FIFO, tick, cleanup and the common checks are the
 * page-slot module's (pool_pages.h), shared with DIRECT pools; this file
 * keeps the size classes and their free lists.
 *
 * All metadata lives in host memory; device addresses are plain numbers,
 * never dereferenced.
 */
#include <stdlib.h>

#include "pool_pages.h"

#define NIL HIPPO__SLOT_NIL
#define CLASS_COUNT 512u
#define CLASS_EXACT CLASS_COUNT /* cls of an exact page (its own list) */
#define EXACT_SCAN 8            /* exact pages looked at per reservation */
#define MAX_REQUEST (UINT64_C(1) << 63)

/* Pages live in page slots (pool_pages.h); a slot's `cls` is the class
 * index of its size (CLASS_EXACT for an exact page), and a FREE page is on
 * the free list of that class (prev/next).  A LIVE page serves
 * 0 < requested <= max_size with size in {class(requested),
 * next(class(requested))}, or, exact, within the reuse bound of it.
 * Invariant: for c < CLASS_COUNT, class_head[c] != NIL <=> bit c of
 * class_bits is set <=> some FREE page has class c; the page-slot
 * invariant holds. */
typedef struct xpool {
  hippo__pool head;
  hippo__page_slots pages;               /* the page slots and FIFO */
  uint64_t class_bits[CLASS_COUNT / 64]; /* non-empty class free lists */
  uint32_t class_head[CLASS_COUNT + 1];  /* most recently freed page */
} xpool;

/* ---- size classes -------------------------------------------------------*/

static unsigned step_shift(uint64_t x, unsigned align_shift) {
  unsigned k = hippo__log2_floor(x);
  unsigned s = k >= 3 ? k - 3 : 0;
  return s > align_shift ? s : align_shift;
}

/* class(a) for a = align_up(size); size <= MAX_REQUEST. */
static uint64_t class_of(uint64_t size, unsigned align_shift) {
  uint64_t align = UINT64_C(1) << align_shift;
  uint64_t a = (size + align - 1) & ~(align - 1);
  uint64_t step = UINT64_C(1) << step_shift(a, align_shift);
  return (a + step - 1) & ~(step - 1);
}

/* The class after class size c. */
static uint64_t class_next(uint64_t c, unsigned align_shift) {
  return c + (UINT64_C(1) << step_shift(c, align_shift));
}

static uint32_t class_index(uint64_t c) {
  unsigned k = hippo__log2_floor(c);
  unsigned s = k >= 3 ? k - 3 : 0;
  return 8u * k + (uint32_t)((c - (UINT64_C(1) << k)) >> s);
}

/* ---- class lists ---------------------------------------------------------*/

static void class_push(xpool *p, uint32_t i) {
  hippo__page_slot *pg = &p->pages.slot[i];
  uint32_t c = pg->cls;
  pg->prev = NIL;
  pg->next = p->class_head[c];
  if (pg->next != NIL)
    p->pages.slot[pg->next].prev = i;
  p->class_head[c] = i;
  if (c < CLASS_COUNT)
    p->class_bits[c / 64] |= UINT64_C(1) << (c % 64);
}

static void class_unlink(xpool *p, uint32_t i) {
  hippo__page_slot *pg = &p->pages.slot[i];
  uint32_t c = pg->cls;
  if (pg->prev != NIL)
    p->pages.slot[pg->prev].next = pg->next;
  else
    p->class_head[c] = pg->next;
  if (pg->next != NIL)
    p->pages.slot[pg->next].prev = pg->prev;
  if (p->class_head[c] == NIL && c < CLASS_COUNT)
    p->class_bits[c / 64] &= ~(UINT64_C(1) << (c % 64));
  pg->prev = pg->next = NIL;
}

/* Whether a page of p bytes may serve an aligned request of a bytes: the
 * reuse bound p <= max(a + A, 1.25 a). */
static bool within_bound(uint64_t p, uint64_t a, uint64_t align) {
  uint64_t slack = a / 4 > align ? a / 4 : align;
  return p >= a && p - a <= slack;
}

/* After a class page of c bytes ran out of memory: whether the device's
 * free memory holds a but not c (asked of the backend, off the fast path),
 * so an exact page may succeed where the class page cannot.  Any other
 * out-of-memory (a transient one, fragmentation) is reported as it is. */
static bool exact_would_fit(hippo__pool *pool, uint64_t a, uint64_t c) {
  hippo__error_kept kept;
  uint64_t free_bytes = 0, total = 0;
  bool fits;
  if (!pool->be->ops->mem_info)
    return false;
  hippo__error_keep(&kept); /* the out-of-memory's message stays */
  fits = pool->be->ops->mem_info(pool->be, &free_bytes, &total) ==
             HIPPO_SUCCESS &&
         free_bytes >= a && free_bytes < c;
  hippo__error_restore(&kept);
  return fits;
}

/* A free exact page that may serve a, among the first EXACT_SCAN. */
static uint32_t exact_fit(const xpool *p, uint64_t a) {
  uint32_t i = p->class_head[CLASS_EXACT];
  for (int n = 0; i != NIL && n < EXACT_SCAN; n++, i = p->pages.slot[i].next)
    if (within_bound(p->pages.slot[i].size, a, p->head.alignment))
      return i;
  return NIL;
}

/* The page slots' `unlink`: a FREE page goes back to the backend. */
static void class_unlink_page(hippo__pool *pool, uint32_t i) {
  class_unlink((xpool *)pool, i);
}

/* ---- operations ----------------------------------------------------------*/

static hippo_status exclusive_reserve(hippo__pool *pool, uint64_t size,
                                      hippo__slice_ref *out) {
  xpool *p = (xpool *)pool;
  uint64_t a, c, addr;
  uint32_t i;
  hippo_status st;

  if (size == 0 || size > pool->max_size)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "EXCLUSIVE pool: a reservation of %llu bytes is "
                            "outside 1..%llu (max_alloc_size)",
                            (unsigned long long)size,
                            (unsigned long long)pool->max_size);
  a = (size + pool->alignment - 1) & ~(pool->alignment - 1);
  c = class_of(size, pool->align_shift);
  i = p->class_head[class_index(c)];
  if (i == NIL)
    i = p->class_head[class_index(class_next(c, pool->align_shift))];
  if (i == NIL && p->class_head[CLASS_EXACT] != NIL)
    i = exact_fit(p, a);
  if (i != NIL) {
    class_unlink(p, i);
    hippo__page_slots_reuse(&p->pages, pool, i);
  } else {
    uint64_t bytes = c;
    st = hippo__page_slots_make_room(&p->pages);
    if (st != HIPPO_SUCCESS)
      return st;
    st = hippo__pool_page_alloc(pool, c, &addr);
    if (st == HIPPO_OUT_OF_MEMORY && a < c && exact_would_fit(pool, a, c)) {
      bytes = a;
      st = hippo__pool_page_alloc(pool, a, &addr);
    }
    if (st != HIPPO_SUCCESS)
      return hippo__error_wrap(st,
                               "EXCLUSIVE pool: a page of %llu bytes for a "
                               "reservation of %llu",
                               (unsigned long long)bytes,
                               (unsigned long long)size);
    i = hippo__page_slots_take(&p->pages, addr, bytes);
    p->pages.slot[i].cls = bytes == c ? class_index(c) : CLASS_EXACT;
  }
  hippo__page_slots_serve(&p->pages, pool, i, size, out);
  return HIPPO_SUCCESS;
}

static void exclusive_release(hippo__pool *pool, uint32_t slice,
                              uint64_t size) {
  xpool *p = (xpool *)pool;
  if (hippo__page_slots_release(&p->pages, pool, slice, size))
    class_push(p, slice);
}

static void exclusive_hold(hippo__pool *pool, uint32_t slice) {
  hippo__page_slots_hold(&((xpool *)pool)->pages, pool, slice);
}

static void exclusive_unhold(hippo__pool *pool, uint32_t slice, bool wait) {
  xpool *p = (xpool *)pool;
  if (hippo__page_slots_unhold(&p->pages, pool, slice, wait))
    class_push(p, slice);
}

static void exclusive_waits(hippo__pool *pool, uint32_t slice, uint32_t n) {
  hippo__page_slots_waits(&((xpool *)pool)->pages, pool, slice, n);
}

static uint64_t exclusive_addr(const hippo__pool *pool, uint32_t slice) {
  return ((const xpool *)pool)->pages.slot[slice].addr;
}

static hippo_status exclusive_cleanup(hippo__pool *pool) {
  return hippo__page_slots_cleanup(&((xpool *)pool)->pages, pool);
}

static bool exclusive_gives_back(const hippo__pool *pool) {
  return ((const xpool *)pool)->pages.free_count != 0;
}

static hippo_status exclusive_tick(hippo__pool *pool, uint64_t now) {
  return hippo__page_slots_tick(&((xpool *)pool)->pages, pool, now);
}

static void exclusive_report(const hippo__pool *pool, hippo_pool_report *out) {
  const xpool *p = (const xpool *)pool;
  hippo__pool_report_head(pool, out);
  out->bytes_free = p->pages.bytes_free;
  out->largest_free = 0;
  for (unsigned w = CLASS_COUNT / 64; w-- > 0;) {
    if (p->class_bits[w]) {
      unsigned c = w * 64 + hippo__log2_floor(p->class_bits[w]);
      out->largest_free = p->pages.slot[p->class_head[c]].size;
      break;
    }
  }
  for (uint32_t i = p->class_head[CLASS_EXACT]; i != NIL;
       i = p->pages.slot[i].next)
    if (p->pages.slot[i].size > out->largest_free)
      out->largest_free = p->pages.slot[i].size;
}

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond))                                                               \
      return hippo__error_set(HIPPO_INTERNAL,                                  \
                              "EXCLUSIVE check: " __VA_ARGS__);                \
  } while (0)

/* What check() asks of each held page beyond the page-slot invariant. */
static hippo_status exclusive_page_ok(const hippo__pool *pool, uint32_t i) {
  const xpool *p = (const xpool *)pool;
  const hippo__page_slot *pg = &p->pages.slot[i];
  unsigned sh = pool->align_shift;
  if (pg->cls == CLASS_EXACT) {
    CHECK(pg->size != 0 && pg->size % pool->alignment == 0 &&
              class_of(pg->size, sh) != pg->size,
          "exact page %u has %llu bytes: not a multiple of the alignment, "
          "or a class size",
          i, (unsigned long long)pg->size);
    CHECK(pg->state != HIPPO__SLOT_LIVE ||
              (pg->requested != 0 && pg->requested <= pool->max_size &&
               within_bound(pg->size,
                            (pg->requested + pool->alignment - 1) &
                                ~(pool->alignment - 1),
                            pool->alignment)),
          "live exact page %u of %llu bytes serves %llu bytes: beyond the "
          "reuse bound",
          i, (unsigned long long)pg->size, (unsigned long long)pg->requested);
    return HIPPO_SUCCESS;
  }
  CHECK(pg->size != 0 && class_of(pg->size, sh) == pg->size,
        "page %u has %llu bytes, not a class size", i,
        (unsigned long long)pg->size);
  CHECK(pg->cls == class_index(pg->size),
        "page %u of %llu bytes is filed under class %u, not %u", i,
        (unsigned long long)pg->size, pg->cls, class_index(pg->size));
  if (pg->state == HIPPO__SLOT_LIVE) {
    uint64_t c = class_of(pg->requested ? pg->requested : 1, sh);
    CHECK(pg->requested != 0 && pg->requested <= pool->max_size,
          "live page %u serves %llu bytes, outside 1..%llu", i,
          (unsigned long long)pg->requested,
          (unsigned long long)pool->max_size);
    CHECK(pg->size == c || pg->size == class_next(c, sh),
          "live page %u of %llu bytes serves %llu bytes (class %llu): "
          "beyond the reuse bound",
          i, (unsigned long long)pg->size,
          (unsigned long long)pg->requested, (unsigned long long)c);
  }
  return HIPPO_SUCCESS;
}

static hippo_status exclusive_check(const hippo__pool *pool) {
  const xpool *p = (const xpool *)pool;
  const hippo__page_slots *s = &p->pages;
  uint64_t nfree = s->free_count, n = 0;
  uint32_t i, prev;

  /* The class free lists, and the exact pages' (CLASS_EXACT). */
  for (uint32_t c = 0; c <= CLASS_EXACT; c++) {
    bool bit = c < CLASS_COUNT && ((p->class_bits[c / 64] >> (c % 64)) & 1);
    CHECK(c == CLASS_EXACT || bit == (p->class_head[c] != NIL),
          "class %u: bitmap bit %d but list head %u", c, (int)bit,
          p->class_head[c]);
    prev = NIL;
    for (i = p->class_head[c]; i != NIL; i = s->slot[i].next) {
      CHECK(i < s->nslots, "class %u list reaches slot %u of %u", c, i,
            s->nslots);
      CHECK(s->slot[i].state == HIPPO__SLOT_FREE,
            "class %u list holds slot %u in state %u", c, i,
            s->slot[i].state);
      CHECK(s->slot[i].cls == c, "class %u list holds page %u of class %u",
            c, i, s->slot[i].cls);
      CHECK(s->slot[i].prev == prev,
            "class %u list: page %u links back to %u, not %u", c, i,
            s->slot[i].prev, prev);
      CHECK(++n <= nfree, "class lists are longer than the %llu free pages",
            (unsigned long long)nfree);
      prev = i;
    }
  }
  CHECK(n == nfree, "class lists hold %llu of %llu free pages",
        (unsigned long long)n, (unsigned long long)nfree);
  /* after the lists: the common checks read the report, which follows
   * them */
  return hippo__page_slots_check(s, pool, exclusive_page_ok);
}

static void exclusive_destroy(hippo__pool *pool) {
  xpool *p = (xpool *)pool;
  if (!p)
    return;
  hippo__page_slots_destroy(&p->pages, pool);
  free(p);
}

static const hippo__pool_ops exclusive_ops = {
    .reserve = exclusive_reserve,
    .release = exclusive_release,
    .addr = exclusive_addr,
    .hold = exclusive_hold,
    .unhold = exclusive_unhold,
    .waits = exclusive_waits,
    .cleanup = exclusive_cleanup,
    .gives_back = exclusive_gives_back,
    .tick = exclusive_tick,
    .report = exclusive_report,
    .check = exclusive_check,
    .destroy = exclusive_destroy,
};

hippo_status hippo__pool_exclusive_create(hippo__backend *be,
                                          hippo__page_acct *acct,
                                          const hippo_pool_options *opt,
                                          hippo__pool **out) {
  xpool *p = calloc(1, sizeof *p);
  uint64_t max;
  if (!p)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "EXCLUSIVE pool: no host memory for the pool");
  max = opt->max_alloc_size < MAX_REQUEST ? opt->max_alloc_size : MAX_REQUEST;
  if (max > be->total_memory) /* a page larger than the device: never */
    max = be->total_memory;
  hippo__pool_head_init(&p->head, &exclusive_ops, be, acct,
                        HIPPO_POOL_EXCLUSIVE, opt, max);
  p->head.opt.max_alloc_size = max; /* in force: capped at 2^63 and at
                                       the device */
  hippo__page_slots_init(&p->pages, "EXCLUSIVE", "page", "pages",
                         class_unlink_page);
  for (unsigned c = 0; c <= CLASS_EXACT; c++)
    p->class_head[c] = NIL;
  *out = &p->head;
  return HIPPO_SUCCESS;
}
