/* pool_exclusive.c -- EXCLUSIVE pools: a whole page per allocation, pages
 * reused by size class.
 *
 * Options {max_alloc_size, dealloc_period}.  The pool accepts
 * 0 < size <= max_alloc_size (pool->max_size; capped at 2^63 so class sizes
 * never overflow).  Every reservation gets a page of its own; the slice id
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
 * Periodic deallocation.  The pool's clock is the largest `now` given to
 * tick.  A page that becomes free at clock t goes back to the backend at the
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
 * every other page and returns the first failure, tick stops at it.
 *
 * All metadata lives in host memory; device addresses are plain numbers,
 * never dereferenced.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"

#define NIL UINT32_MAX
#define CLASS_COUNT 512u
#define SLOT_MAX (UINT32_MAX - 1u) /* slot ids stay below NIL */
#define MAX_REQUEST (UINT64_C(1) << 63)

enum { SLOT_EMPTY = 0, PAGE_FREE = 1, PAGE_LIVE = 2 };

/* One slot of the page array.
 * Invariant by state:
 *  EMPTY: holds no page (addr == size == requested == 0); on the empty-slot
 *         list through `next`.
 *  FREE:  holds a page of `size` = a class size, index `cls`; requested ==
 *         0; on exactly the free list of class `cls` (prev/next) and on the
 *         FIFO (older/newer) at its free time `freed_at`.
 *  LIVE:  holds a page serving one allocation of `requested` bytes,
 *         0 < requested <= max_size, size in {class(requested),
 *         next(class(requested))}; on no list. */
typedef struct xpage {
  uint64_t addr;      /* device address of the page (0: none) */
  uint64_t size;      /* page bytes, a class size */
  uint64_t requested; /* LIVE: the reservation's size */
  uint64_t freed_at;  /* FREE: pool clock when it became free */
  uint32_t state;     /* SLOT_EMPTY, PAGE_FREE or PAGE_LIVE */
  uint32_t cls;       /* class index of size */
  uint32_t prev;      /* FREE: class free list links; */
  uint32_t next;      /*  EMPTY: next empty slot */
  uint32_t older;     /* FREE: FIFO neighbour freed earlier (NIL: front) */
  uint32_t newer;     /* FREE: FIFO neighbour freed later (NIL: back) */
} xpage;

/* Invariant: slot[0..nslots) are the slots ever used, cap >= nslots;
 * class_head[c] != NIL <=> bit c of class_bits is set <=> some FREE page
 * has class c; free_pages and bytes_free count and sum the FREE pages;
 * fifo_front..fifo_back chain all FREE pages with non-decreasing freed_at
 * <= clock; the head figures (pool.h) count FREE and LIVE pages. */
typedef struct xpool {
  hippo__pool head;
  xpage *slot;             /* the page slots */
  uint32_t nslots;         /* slots in use (any state) */
  uint32_t cap;            /* slots allocated */
  uint32_t empty;          /* first EMPTY slot (NIL: none) */
  uint32_t fifo_front;     /* FREE page freed first */
  uint32_t fifo_back;      /* FREE page freed last */
  uint32_t pad;
  uint64_t free_pages;     /* FREE pages */
  uint64_t bytes_free;     /* their bytes */
  uint64_t clock;          /* largest `now` seen by tick */
  uint64_t bad_releases;   /* releases of a slice that was not live, or
                              with a size other than the reserved one */
  uint64_t class_bits[CLASS_COUNT / 64]; /* non-empty class free lists */
  uint32_t class_head[CLASS_COUNT];      /* most recently freed page */
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

/* ---- lists ---------------------------------------------------------------*/

static void class_push(xpool *p, uint32_t i) {
  xpage *pg = &p->slot[i];
  uint32_t c = pg->cls;
  pg->prev = NIL;
  pg->next = p->class_head[c];
  if (pg->next != NIL)
    p->slot[pg->next].prev = i;
  p->class_head[c] = i;
  p->class_bits[c / 64] |= UINT64_C(1) << (c % 64);
}

static void class_unlink(xpool *p, uint32_t i) {
  xpage *pg = &p->slot[i];
  uint32_t c = pg->cls;
  if (pg->prev != NIL)
    p->slot[pg->prev].next = pg->next;
  else
    p->class_head[c] = pg->next;
  if (pg->next != NIL)
    p->slot[pg->next].prev = pg->prev;
  if (p->class_head[c] == NIL)
    p->class_bits[c / 64] &= ~(UINT64_C(1) << (c % 64));
  pg->prev = pg->next = NIL;
}

static void fifo_push(xpool *p, uint32_t i) {
  xpage *pg = &p->slot[i];
  pg->newer = NIL;
  pg->older = p->fifo_back;
  if (p->fifo_back != NIL)
    p->slot[p->fifo_back].newer = i;
  else
    p->fifo_front = i;
  p->fifo_back = i;
}

static void fifo_unlink(xpool *p, uint32_t i) {
  xpage *pg = &p->slot[i];
  if (pg->older != NIL)
    p->slot[pg->older].newer = pg->newer;
  else
    p->fifo_front = pg->newer;
  if (pg->newer != NIL)
    p->slot[pg->newer].older = pg->older;
  else
    p->fifo_back = pg->older;
  pg->older = pg->newer = NIL;
}

/* Make sure a slot can be taken without allocating. */
static hippo_status slot_reserve(xpool *p) {
  uint32_t cap;
  xpage *grown;
  if (p->empty != NIL || p->nslots < p->cap)
    return HIPPO_SUCCESS;
  if (p->cap >= SLOT_MAX)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "EXCLUSIVE pool: %u pages, the most one pool "
                            "can hold",
                            p->cap);
  cap = p->cap ? (p->cap > SLOT_MAX / 2 ? SLOT_MAX : p->cap * 2) : 16;
  grown = realloc(p->slot, (size_t)cap * sizeof *grown);
  if (!grown)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "EXCLUSIVE pool: no host memory for the metadata "
                            "of %u pages",
                            cap);
  p->slot = grown;
  p->cap = cap;
  return HIPPO_SUCCESS;
}

static uint32_t slot_take(xpool *p) {
  uint32_t i = p->empty;
  if (i != NIL) {
    p->empty = p->slot[i].next;
    return i;
  }
  return p->nslots++;
}

/* Give FREE page i back to the backend; on failure it stays as it was. */
static hippo_status page_drop(xpool *p, uint32_t i) {
  xpage *pg = &p->slot[i];
  hippo_status st = hippo__pool_page_free(&p->head, pg->addr, pg->size);
  if (st != HIPPO_SUCCESS)
    return hippo__error_wrap(st,
                             "EXCLUSIVE pool: giving back a free page of %llu "
                             "bytes",
                             (unsigned long long)pg->size);
  class_unlink(p, i);
  fifo_unlink(p, i);
  p->free_pages--;
  p->bytes_free -= pg->size;
  memset(pg, 0, sizeof *pg);
  pg->state = SLOT_EMPTY;
  pg->prev = pg->older = pg->newer = NIL;
  pg->next = p->empty;
  p->empty = i;
  return HIPPO_SUCCESS;
}

/* ---- operations ----------------------------------------------------------*/

static hippo_status exclusive_reserve(hippo__pool *pool, uint64_t size,
                                      hippo__slice_ref *out) {
  xpool *p = (xpool *)pool;
  uint64_t c, addr;
  uint32_t i;
  xpage *pg;
  hippo_status st;

  if (size == 0 || size > pool->max_size)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "EXCLUSIVE pool: a reservation of %llu bytes is "
                            "outside 1..%llu (max_alloc_size)",
                            (unsigned long long)size,
                            (unsigned long long)pool->max_size);
  c = class_of(size, pool->align_shift);
  i = p->class_head[class_index(c)];
  if (i == NIL)
    i = p->class_head[class_index(class_next(c, pool->align_shift))];
  if (i != NIL) {
    pg = &p->slot[i];
    class_unlink(p, i);
    fifo_unlink(p, i);
    p->free_pages--;
    p->bytes_free -= pg->size;
  } else {
    st = slot_reserve(p);
    if (st != HIPPO_SUCCESS)
      return st;
    st = hippo__pool_page_alloc(pool, c, &addr);
    if (st != HIPPO_SUCCESS)
      return hippo__error_wrap(st,
                               "EXCLUSIVE pool: a page of %llu bytes for a "
                               "reservation of %llu",
                               (unsigned long long)c,
                               (unsigned long long)size);
    i = slot_take(p);
    pg = &p->slot[i];
    pg->addr = addr;
    pg->size = c;
    pg->cls = class_index(c);
    pg->prev = pg->next = pg->older = pg->newer = NIL;
  }
  pg->state = PAGE_LIVE;
  pg->requested = size;
  pg->freed_at = 0;
  hippo__pool_note_reserve(pool, size, pg->size);
  out->addr = pg->addr;
  out->slice = i;
  return HIPPO_SUCCESS;
}

static void exclusive_release(hippo__pool *pool, uint32_t slice,
                              uint64_t size) {
  xpool *p = (xpool *)pool;
  xpage *pg;
  if (slice >= p->nslots || p->slot[slice].state != PAGE_LIVE) {
    p->bad_releases++; /* reported by check() */
    return;
  }
  pg = &p->slot[slice];
  if (size != pg->requested)
    p->bad_releases++;
  hippo__pool_note_release(pool, pg->requested, pg->size);
  pg->state = PAGE_FREE;
  pg->requested = 0;
  pg->freed_at = p->clock;
  class_push(p, slice);
  fifo_push(p, slice);
  p->free_pages++;
  p->bytes_free += pg->size;
}

static hippo_status exclusive_cleanup(hippo__pool *pool) {
  xpool *p = (xpool *)pool;
  hippo_status first = HIPPO_SUCCESS;
  char msg[512];
  unsigned failed = 0;
  uint32_t i = p->fifo_front;
  while (i != NIL) {
    uint32_t newer = p->slot[i].newer;
    hippo_status st = page_drop(p, i);
    if (st != HIPPO_SUCCESS) {
      if (failed++ == 0) {
        first = st;
        snprintf(msg, sizeof msg, "%s", hippo__error_get());
      }
    }
    i = newer;
  }
  if (failed > 1)
    hippo__error_set(first, "%s (and %u more page frees failed)", msg,
                     failed - 1);
  else if (failed == 1)
    hippo__error_set(first, "%s", msg);
  return first;
}

static hippo_status exclusive_tick(hippo__pool *pool, uint64_t now) {
  xpool *p = (xpool *)pool;
  uint64_t period = pool->opt.dealloc_period;
  if (now > p->clock)
    p->clock = now;
  if (period == 0)
    return HIPPO_SUCCESS;
  while (p->fifo_front != NIL &&
         p->clock - p->slot[p->fifo_front].freed_at >= period) {
    hippo_status st;
    if (!hippo__pool_may_free(pool))
      return HIPPO_SUCCESS; /* a capture records: wait */
    st = page_drop(p, p->fifo_front);
    if (st != HIPPO_SUCCESS)
      return st;
  }
  return HIPPO_SUCCESS;
}

static void exclusive_report(const hippo__pool *pool, hippo_pool_report *out) {
  const xpool *p = (const xpool *)pool;
  hippo__pool_report_head(pool, out);
  out->bytes_free = p->bytes_free;
  out->largest_free = 0;
  for (unsigned w = CLASS_COUNT / 64; w-- > 0;) {
    if (p->class_bits[w]) {
      unsigned c = w * 64 + hippo__log2_floor(p->class_bits[w]);
      out->largest_free = p->slot[p->class_head[c]].size;
      break;
    }
  }
}

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond))                                                               \
      return hippo__error_set(HIPPO_INTERNAL,                                  \
                              "EXCLUSIVE check: " __VA_ARGS__);                \
  } while (0)

static hippo_status exclusive_check(const hippo__pool *pool) {
  const xpool *p = (const xpool *)pool;
  unsigned sh = pool->align_shift;
  uint64_t pages = 0, reserved = 0, allocs = 0, in_use = 0, padding = 0;
  uint64_t nfree = 0, free_bytes = 0, nempty = 0, n;
  uint64_t largest_free = 0;
  uint32_t i, prev;

  CHECK(p->bad_releases == 0,
        "%llu releases named a slice that was not live or gave another size",
        (unsigned long long)p->bad_releases);
  CHECK(p->nslots <= p->cap, "%u slots used of %u allocated", p->nslots,
        p->cap);
  for (i = 0; i < p->nslots; i++) {
    const xpage *pg = &p->slot[i];
    if (pg->state == SLOT_EMPTY) {
      CHECK(pg->addr == 0 && pg->size == 0 && pg->requested == 0,
            "empty slot %u holds a page", i);
      nempty++;
      continue;
    }
    CHECK(pg->state == PAGE_FREE || pg->state == PAGE_LIVE,
          "slot %u has state %u", i, pg->state);
    CHECK(pg->addr != 0 && (pg->addr & (pool->alignment - 1)) == 0,
          "page %u at 0x%llx is not aligned to %llu", i,
          (unsigned long long)pg->addr,
          (unsigned long long)pool->alignment);
    CHECK(pg->size != 0 && class_of(pg->size, sh) == pg->size,
          "page %u has %llu bytes, not a class size", i,
          (unsigned long long)pg->size);
    CHECK(pg->cls == class_index(pg->size),
          "page %u of %llu bytes is filed under class %u, not %u", i,
          (unsigned long long)pg->size, pg->cls, class_index(pg->size));
    pages++;
    reserved += pg->size;
    if (pg->state == PAGE_LIVE) {
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
      CHECK(pg->requested <= pool->largest_allocation,
            "live page %u serves %llu bytes, above largest_allocation %llu",
            i, (unsigned long long)pg->requested,
            (unsigned long long)pool->largest_allocation);
      allocs++;
      in_use += pg->requested;
      padding += pg->size - pg->requested;
    } else {
      CHECK(pg->requested == 0, "free page %u still has a request", i);
      CHECK(pg->freed_at <= p->clock,
            "free page %u freed at %llu, after the clock %llu", i,
            (unsigned long long)pg->freed_at,
            (unsigned long long)p->clock);
      nfree++;
      free_bytes += pg->size;
      if (pg->size > largest_free)
        largest_free = pg->size;
    }
  }
  CHECK(pages == pool->pages, "%llu pages held, the pool counts %llu",
        (unsigned long long)pages, (unsigned long long)pool->pages);
  CHECK(pool->pages <= pool->peak_pages, "pages %llu above peak_pages %llu",
        (unsigned long long)pool->pages,
        (unsigned long long)pool->peak_pages);
  CHECK(reserved == pool->bytes_reserved,
        "pages hold %llu bytes, bytes_reserved is %llu",
        (unsigned long long)reserved,
        (unsigned long long)pool->bytes_reserved);
  CHECK(allocs == pool->allocations, "%llu live pages, allocations is %llu",
        (unsigned long long)allocs, (unsigned long long)pool->allocations);
  CHECK(in_use == pool->bytes_in_use,
        "live pages serve %llu bytes, bytes_in_use is %llu",
        (unsigned long long)in_use, (unsigned long long)pool->bytes_in_use);
  CHECK(padding == pool->bytes_padding,
        "live pages pad %llu bytes, bytes_padding is %llu",
        (unsigned long long)padding,
        (unsigned long long)pool->bytes_padding);
  CHECK(nfree == p->free_pages && free_bytes == p->bytes_free,
        "%llu free pages of %llu bytes, counted %llu of %llu",
        (unsigned long long)nfree, (unsigned long long)free_bytes,
        (unsigned long long)p->free_pages,
        (unsigned long long)p->bytes_free);

  /* The empty-slot list. */
  n = 0;
  for (i = p->empty; i != NIL; i = p->slot[i].next) {
    CHECK(i < p->nslots, "empty-slot list reaches slot %u of %u", i,
          p->nslots);
    CHECK(p->slot[i].state == SLOT_EMPTY,
          "empty-slot list holds slot %u in state %u", i, p->slot[i].state);
    CHECK(++n <= nempty, "empty-slot list is longer than the %llu empty "
          "slots (a cycle?)", (unsigned long long)nempty);
  }
  CHECK(n == nempty, "empty-slot list has %llu of %llu empty slots",
        (unsigned long long)n, (unsigned long long)nempty);

  /* The class free lists. */
  n = 0;
  for (uint32_t c = 0; c < CLASS_COUNT; c++) {
    bool bit = (p->class_bits[c / 64] >> (c % 64)) & 1;
    CHECK(bit == (p->class_head[c] != NIL),
          "class %u: bitmap bit %d but list head %u", c, (int)bit,
          p->class_head[c]);
    prev = NIL;
    for (i = p->class_head[c]; i != NIL; i = p->slot[i].next) {
      CHECK(i < p->nslots, "class %u list reaches slot %u of %u", c, i,
            p->nslots);
      CHECK(p->slot[i].state == PAGE_FREE,
            "class %u list holds slot %u in state %u", c, i,
            p->slot[i].state);
      CHECK(p->slot[i].cls == c, "class %u list holds page %u of class %u",
            c, i, p->slot[i].cls);
      CHECK(p->slot[i].prev == prev,
            "class %u list: page %u links back to %u, not %u", c, i,
            p->slot[i].prev, prev);
      CHECK(++n <= nfree, "class lists are longer than the %llu free pages",
            (unsigned long long)nfree);
      prev = i;
    }
  }
  CHECK(n == nfree, "class lists hold %llu of %llu free pages",
        (unsigned long long)n, (unsigned long long)nfree);

  /* The FIFO. */
  {
    hippo_pool_report r;
    uint64_t last = 0;
    n = 0;
    prev = NIL;
    for (i = p->fifo_front; i != NIL; i = p->slot[i].newer) {
      CHECK(i < p->nslots, "FIFO reaches slot %u of %u", i, p->nslots);
      CHECK(p->slot[i].state == PAGE_FREE, "FIFO holds slot %u in state %u",
            i, p->slot[i].state);
      CHECK(p->slot[i].older == prev, "FIFO: page %u links back to %u, not %u",
            i, p->slot[i].older, prev);
      CHECK(p->slot[i].freed_at >= last,
            "FIFO: page %u freed at %llu after one freed at %llu", i,
            (unsigned long long)p->slot[i].freed_at,
            (unsigned long long)last);
      CHECK(++n <= nfree, "FIFO is longer than the %llu free pages",
            (unsigned long long)nfree);
      last = p->slot[i].freed_at;
      prev = i;
    }
    CHECK(prev == p->fifo_back, "FIFO ends at %u, its back is %u", prev,
          p->fifo_back);
    CHECK(n == nfree, "FIFO holds %llu of %llu free pages",
          (unsigned long long)n, (unsigned long long)nfree);
    exclusive_report(pool, &r);
    CHECK(r.largest_free == largest_free,
          "largest_free reported %llu, the largest free page has %llu",
          (unsigned long long)r.largest_free,
          (unsigned long long)largest_free);
    CHECK(r.bytes_free == pool->bytes_reserved - pool->bytes_in_use -
                              pool->bytes_padding,
          "bytes_free %llu does not match reserved - in use - padding",
          (unsigned long long)r.bytes_free);
  }
  return HIPPO_SUCCESS;
}

static void exclusive_destroy(hippo__pool *pool) {
  xpool *p = (xpool *)pool;
  if (!p)
    return;
  for (uint32_t i = 0; i < p->nslots; i++)
    if (p->slot[i].state != SLOT_EMPTY)
      (void)hippo__pool_page_free(pool, p->slot[i].addr, p->slot[i].size);
  free(p->slot);
  free(p);
}

static const hippo__pool_ops exclusive_ops = {
    .reserve = exclusive_reserve,
    .release = exclusive_release,
    .cleanup = exclusive_cleanup,
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
  hippo__pool_head_init(&p->head, &exclusive_ops, be, acct,
                        HIPPO_POOL_EXCLUSIVE, opt, max);
  p->head.opt.max_alloc_size = max; /* in force: capped at 2^63 */
  p->empty = p->fifo_front = p->fifo_back = NIL;
  for (unsigned c = 0; c < CLASS_COUNT; c++)
    p->class_head[c] = NIL;
  *out = &p->head;
  return HIPPO_SUCCESS;
}
