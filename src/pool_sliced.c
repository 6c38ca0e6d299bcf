/* pool_sliced.c -- SLICED pools: pages from the backend carved into slices.
 *
 * Options {page_size, max_slice_size, max_pool_size, dealloc_period}.
 * A reservation of `size` bytes (0 < size <= max_slice_size) takes a slice
 * of size rounded up to the alignment; the rest of the free slice it is cut
 * from stays free.  A released slice coalesces with its free neighbours at
 * once, so a page with no live slice is one free slice again.
 *
 * Free slices are found in constant time by a two-level segregated-fit index
 * (TLSF): sizes, counted in alignment units u, map to a first level
 * fl = floor(log2 u) - 3 and a second level sl = the next 4 bits below the
 * top bit (u < 16 maps to fl 0, sl u).  A bitmap of non-empty first levels
 * and one bitmap per first level find the smallest class that surely fits
 * with two count-trailing-zeros.  The search rounds the request up to the
 * next class boundary ("good fit"), so any slice of the found class fits;
 * only before taking a new page does it also look at a few slices of the
 * request's own class (bounded), so a fitting slice is not missed there.
 *
 * All metadata lives in host memory (arrays of slices and pages, linked by
 * 32-bit indices); device memory is never touched.
 *
 * The pool names its reservations itself (pool.h, handles.h): a live
 * slice's record holds the handle's generation and the request's padding,
 * so a release reads the slice record and its neighbours and no handle
 * table.  A record's generation moves on at each release; a record that has
 * handed out every generation retires: it may still describe a free slice,
 * but before that slice is reserved it moves to a fresh record, and a
 * retired record is never reused.
 *
 * Cap: max_pool_size (0 = none) allows floor(max_pool_size / page_size)
 * whole pages; a cap below the page size shrinks the page to the cap rounded
 * down to the alignment; a cap below the alignment leaves a page size of 0,
 * and every reservation fails with HIPPO_POOL_CAPACITY_EXCEEDED without
 * allocating anything.
 *
 * Periodic deallocation: a page that became empty when the stream's
 * reservation clock read t goes back to the backend at the first tick with
 * now >= t + dealloc_period.  Empty pages wait in FIFO order of the time
 * they emptied, so a tick looks only at the front; a page whose free fails
 * goes to the back, stamped anew, so it is tried again a period later and
 * holds back no other page.
 */
#include <stdlib.h>
#include <string.h>

#include "handles.h"
#include "pool.h"

#define SL_BITS 4u
#define SL_COUNT (1u << SL_BITS)
#define FL_COUNT 64u
#define NIL UINT32_MAX
#define EXACT_SCAN 8 /* slices of the request's own class tried at most */

enum { SLICE_UNUSED = 0, SLICE_FREE = 1, SLICE_LIVE = 2 };

/* A slice: a run of bytes of one page, in alignment units (32 bytes, so a
 * slice is one cache line's half and never straddles two: the index stays
 * cache-friendly with 100,000s of slices).
 * Invariant: the slices of a page, followed by next_phys from page.first,
 * tile it exactly: each starts where the previous ends, the first at
 * offset 0, the last ends at the page's end; no two neighbours are both
 * free; a free slice is in exactly the free list of its class; a live
 * slice has a generation != 0 and padding < the alignment; an UNUSED
 * record is on the unused list exactly when its generation is not 0 (else
 * it is retired). */
typedef struct slice {
  uint32_t off;       /* offset in the page, in alignment units */
  uint32_t size;      /* size in alignment units, > 0 */
  uint32_t prev_phys; /* neighbour below in the page, NIL at its start */
  uint32_t next_phys; /* neighbour above, NIL at its end */
  uint32_t prev_free; /* FREE: free list link; LIVE: the padding in bytes
                         (slice bytes - requested bytes) */
  uint32_t next_free; /* FREE: free list link; UNUSED: the unused list */
  uint32_t page;      /* the page it belongs to */
  uint32_t sg;        /* state << 24 | generation (0: retired) */
} slice;
_Static_assert(sizeof(slice) == 32, "a slice record is half a cache line");

#define STATE(s) ((s)->sg >> 24)
#define GEN(s) ((s)->sg & 0xffffffu)
static inline void set_state(slice *s, uint32_t state) {
  s->sg = state << 24 | GEN(s);
}

/* A page held from the backend.
 * Invariant: live == number of LIVE slices in it; live == 0 exactly when the
 * page is one free slice, and then it is on the empty FIFO. */
typedef struct page {
  uint64_t addr;        /* device address from page_alloc */
  uint64_t size;        /* bytes */
  uint64_t empty_since; /* clock when live last went to 0 */
  uint32_t first;       /* slice at the page's start */
  uint32_t live;        /* live slices */
  uint32_t prev_empty;  /* empty FIFO links (live == 0) */
  uint32_t next_empty;  /*  also chains unused page slots */
  uint32_t held;        /* 1 while the page is held from the backend */
  uint32_t pad;
} page;

/* Invariant: fl_bitmap bit f set <=> sl_bitmap[f] != 0; sl_bitmap[f] bit s
 * set <=> heads[f][s] != NIL; free_bytes is the sum of free slices; the
 * head figures (pool.h) hold. */
typedef struct sliced {
  hippo__pool head;
  uint64_t page_size;  /* effective page size (0: cap below alignment) */
  uint64_t max_pages;  /* effective cap in pages (UINT64_MAX: none) */
  slice *slices;
  uint32_t slice_count, slice_cap, slice_unused; /* unused: node free list */
  uint32_t first_gen;   /* generation of a fresh record */
  uint32_t retired;     /* retired UNUSED records */
  uint32_t max_records; /* slice_cap's limit: what a handle's index names */
  page *pages;
  uint32_t page_count, page_cap, page_unused; /* page_unused: slot list */
  uint32_t empty_head, empty_tail;            /* FIFO of empty pages */
  uint64_t fl_bitmap;
  uint32_t sl_bitmap[FL_COUNT];
  uint32_t heads[FL_COUNT][SL_COUNT];
} sliced;

static inline void mapping(uint64_t u, unsigned *fl, unsigned *sl) {
  if (u < SL_COUNT) {
    *fl = 0;
    *sl = (unsigned)u;
  } else {
    unsigned l = hippo__log2_floor(u);
    *fl = l - (SL_BITS - 1);
    *sl = (unsigned)(u >> (l - SL_BITS)) & (SL_COUNT - 1);
  }
}

static void free_insert(sliced *p, uint32_t i) {
  slice *s = &p->slices[i];
  unsigned fl, sl;
  mapping(s->size, &fl, &sl);
  set_state(s, SLICE_FREE);
  s->prev_free = NIL;
  s->next_free = p->heads[fl][sl];
  if (s->next_free != NIL)
    p->slices[s->next_free].prev_free = i;
  p->heads[fl][sl] = i;
  p->sl_bitmap[fl] |= 1u << sl;
  p->fl_bitmap |= UINT64_C(1) << fl;
}

static void free_remove(sliced *p, uint32_t i) {
  slice *s = &p->slices[i];
  unsigned fl, sl;
  mapping(s->size, &fl, &sl);
  if (s->prev_free != NIL)
    p->slices[s->prev_free].next_free = s->next_free;
  else
    p->heads[fl][sl] = s->next_free;
  if (s->next_free != NIL)
    p->slices[s->next_free].prev_free = s->prev_free;
  if (p->heads[fl][sl] == NIL) {
    p->sl_bitmap[fl] &= ~(1u << sl);
    if (!p->sl_bitmap[fl])
      p->fl_bitmap &= ~(UINT64_C(1) << fl);
  }
}

/* The head of the smallest non-empty class at or above (fl, sl), or NIL. */
static inline uint32_t find_class(const sliced *p, unsigned fl, unsigned sl) {
  uint32_t slmap = p->sl_bitmap[fl] & (~0u << sl);
  if (!slmap) {
    uint64_t flmap =
        fl + 1 < FL_COUNT ? p->fl_bitmap & (~UINT64_C(0) << (fl + 1)) : 0;
    if (!flmap)
      return NIL;
    fl = (unsigned)__builtin_ctzll(flmap);
    slmap = p->sl_bitmap[fl];
  }
  return p->heads[fl][(unsigned)__builtin_ctz(slmap)];
}

/* A free slice of at least u units: good fit first, then a bounded look at
 * the request's own class. */
static uint32_t find_free(const sliced *p, uint64_t u) {
  unsigned fl, sl;
  uint32_t i;
  uint64_t r = u;
  if (u >= SL_COUNT)
    r = u + (UINT64_C(1) << (hippo__log2_floor(u) - SL_BITS)) - 1;
  mapping(r, &fl, &sl);
  i = find_class(p, fl, sl);
  if (i != NIL || r == u)
    return i;
  mapping(u, &fl, &sl);
  i = p->heads[fl][sl];
  for (int n = 0; i != NIL && n < EXACT_SCAN; n++, i = p->slices[i].next_free)
    if (p->slices[i].size >= u)
      return i;
  return NIL;
}

/* Make room for `n` more slice nodes, so a reservation cannot fail halfway
 * on host memory. */
static hippo_status reserve_nodes(sliced *p, uint32_t n) {
  uint32_t spare = p->slice_cap - p->slice_count;
  for (uint32_t i = p->slice_unused; i != NIL && spare < n;
       i = p->slices[i].next_free)
    spare++;
  if (spare >= n)
    return HIPPO_SUCCESS;
  {
    uint32_t cap = p->slice_cap ? p->slice_cap * 2 : 1024;
    slice *grown;
    /* a limit of the pool's own, like a cap: the manager spills */
    if (p->slice_cap >= p->max_records)
      return hippo__error_set(HIPPO_POOL_CAPACITY_EXCEEDED,
                              "SLICED pool: all %u slice records in use, the "
                              "most a pool's handles can name; release some, "
                              "or let a later pool take it",
                              p->slice_cap);
    if (cap > p->max_records)
      cap = p->max_records;
    grown = hippo__grow_aligned(p->slices, (size_t)p->slice_cap * sizeof *grown,
                                (size_t)cap * sizeof *grown);
    if (!grown)
      return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                              "SLICED pool: host memory for %u slice records",
                              cap);
    p->slices = grown;
    p->slice_cap = cap;
  }
  return HIPPO_SUCCESS;
}

/* A record (room was made) that keeps its generation, or a fresh one. */
static uint32_t node_new(sliced *p) {
  uint32_t i;
  if (p->slice_unused != NIL) {
    i = p->slice_unused;
    p->slice_unused = p->slices[i].next_free;
  } else {
    i = p->slice_count++;
    p->slices[i].sg = SLICE_UNUSED << 24 | p->first_gen;
  }
  return i;
}

static void node_drop(sliced *p, uint32_t i) {
  slice *s = &p->slices[i];
  set_state(s, SLICE_UNUSED);
  if (HIPPO__UNLIKELY(GEN(s) == 0)) { /* retired: never again */
    s->next_free = NIL;
    p->retired++;
    return;
  }
  s->next_free = p->slice_unused;
  p->slice_unused = i;
}

/* Free slice i, off its free list, is about to be reserved but its record
 * has handed out every generation: the slice moves to a fresh record
 * (room was made), which it returns; i retires. */
static uint32_t rehome(sliced *p, uint32_t i) {
  uint32_t j = node_new(p);
  slice *s = &p->slices[i], *t = &p->slices[j];
  uint32_t sg = t->sg;
  *t = *s;
  t->sg = sg;
  if (s->prev_phys != NIL)
    p->slices[s->prev_phys].next_phys = j;
  else
    p->pages[s->page].first = j;
  if (s->next_phys != NIL)
    p->slices[s->next_phys].prev_phys = j;
  node_drop(p, i);
  return j;
}

static void empty_push(sliced *p, uint32_t pg) {
  page *g = &p->pages[pg];
  g->empty_since = p->head.now;
  g->next_empty = NIL;
  g->prev_empty = p->empty_tail;
  if (p->empty_tail != NIL) {
    p->pages[p->empty_tail].next_empty = pg;
  } else {
    p->empty_head = pg;
    hippo__pool_set_due(&p->head, true, g->empty_since);
  }
  p->empty_tail = pg;
}

static void empty_remove(sliced *p, uint32_t pg) {
  page *g = &p->pages[pg];
  if (g->prev_empty != NIL) {
    p->pages[g->prev_empty].next_empty = g->next_empty;
  } else {
    p->empty_head = g->next_empty;
    hippo__pool_set_due(&p->head, g->next_empty != NIL,
                        g->next_empty != NIL
                            ? p->pages[g->next_empty].empty_since
                            : 0);
  }
  if (g->next_empty != NIL)
    p->pages[g->next_empty].prev_empty = g->prev_empty;
  else
    p->empty_tail = g->prev_empty;
}

/* Take a page from the backend; it becomes one free slice (on the empty
 * FIFO).  Nodes were reserved by the caller. */
static hippo_status page_add(sliced *p, uint64_t bytes, uint32_t *slice_out) {
  uint64_t addr;
  uint32_t pg, si;
  hippo_status st;
  if (bytes > p->page_size || (uint64_t)p->head.pages >= p->max_pages) {
    uint64_t args[] = {p->page_size, p->head.opt.max_pool_size, bytes,
                       p->head.pages,
                       p->max_pages == UINT64_MAX ? 0 : p->max_pages};
    return hippo__error_lazy(
        HIPPO_POOL_CAPACITY_EXCEEDED,
        "SLICED pool (page %llu B, max_pool_size %llu B): %llu B do not "
        "fit: %llu of %llu pages held and no free slice fits; release, "
        "raise max_pool_size, or let a later pool take it",
        args, 5);
  }
  if (p->page_unused == NIL && p->page_count == p->page_cap) {
    uint32_t cap = p->page_cap ? p->page_cap * 2 : 16;
    page *grown = realloc(p->pages, (size_t)cap * sizeof *grown);
    if (!grown)
      return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                              "SLICED pool: host memory for %u page records",
                              cap);
    p->pages = grown;
    p->page_cap = cap;
  }
  st = hippo__pool_page_alloc(&p->head, p->page_size, &addr);
  if (st != HIPPO_SUCCESS)
    return hippo__error_wrap(st, "SLICED pool (page %llu B)",
                             (unsigned long long)p->page_size);
  if (p->page_unused != NIL) {
    pg = p->page_unused;
    p->page_unused = p->pages[pg].next_empty;
  } else {
    pg = p->page_count++;
  }
  si = node_new(p);
  p->slices[si].off = 0;
  p->slices[si].size = (uint32_t)(p->page_size >> p->head.align_shift);
  p->slices[si].prev_phys = p->slices[si].next_phys = NIL;
  p->slices[si].page = pg;
  p->pages[pg] = (page){.addr = addr,
                        .size = p->page_size,
                        .first = si,
                        .live = 0,
                        .held = 1};
  free_insert(p, si);
  empty_push(p, pg);
  *slice_out = si;
  return HIPPO_SUCCESS;
}

static hippo_status sliced_reserve(hippo__pool *pool, uint64_t size,
                                   hippo__slice_ref *out) {
  sliced *p = (sliced *)pool;
  uint64_t bytes, u;
  uint32_t i;
  slice *s;
  hippo_status st;

  /* size <= max_size, validated not to overflow when aligned */
  bytes = (size + pool->alignment - 1) & ~(pool->alignment - 1);
  u = bytes >> pool->align_shift;
  /* at most two: a new page's slice or a retired record's move, and a
   * split */
  st = reserve_nodes(p, 2);
  if (st != HIPPO_SUCCESS)
    return st;
  i = find_free(p, u);
  if (HIPPO__UNLIKELY(i == NIL)) {
    st = page_add(p, bytes, &i);
    if (st != HIPPO_SUCCESS)
      return st;
  }
  free_remove(p, i);
  if (HIPPO__UNLIKELY(GEN(&p->slices[i]) == 0))
    i = rehome(p, i);
  s = &p->slices[i];
  if (s->size > u) { /* split: the rest stays free */
    uint32_t r = node_new(p);
    slice *rest;
    s = &p->slices[i];
    rest = &p->slices[r];
    rest->off = s->off + (uint32_t)u;
    rest->size = s->size - (uint32_t)u;
    rest->prev_phys = i;
    rest->next_phys = s->next_phys;
    rest->page = s->page;
    if (s->next_phys != NIL)
      p->slices[s->next_phys].prev_phys = r;
    s->next_phys = r;
    s->size = (uint32_t)u;
    free_insert(p, r);
  }
  set_state(s, SLICE_LIVE);
  s->prev_free = (uint32_t)(bytes - size);
  if (p->pages[s->page].live++ == 0)
    empty_remove(p, s->page);
  hippo__pool_note_reserve(pool, size, bytes);
  out->addr = p->pages[s->page].addr + ((uint64_t)s->off << pool->align_shift);
  out->slice = i;
  out->gen = GEN(s);
  return HIPPO_SUCCESS;
}

/* Merge slice b (above) into a (below); b's node is dropped. */
static void merge(sliced *p, uint32_t a, uint32_t b) {
  slice *sa = &p->slices[a], *sb = &p->slices[b];
  sa->size += sb->size;
  sa->next_phys = sb->next_phys;
  if (sb->next_phys != NIL)
    p->slices[sb->next_phys].prev_phys = a;
  node_drop(p, b);
}

/* Release live slice i; returns the size it was reserved with. */
static uint64_t release_slice(sliced *p, uint32_t i) {
  slice *s = &p->slices[i];
  uint32_t pg = s->page, n;
  uint64_t bytes = (uint64_t)s->size << p->head.align_shift;
  uint64_t size = bytes - s->prev_free;
  hippo__pool_note_release(&p->head, size, bytes);
  s->sg = SLICE_FREE << 24 | hippo__gen_next(GEN(s), p->first_gen);
  n = s->prev_phys;
  if (n != NIL && STATE(&p->slices[n]) == SLICE_FREE) {
    free_remove(p, n);
    merge(p, n, i);
    i = n;
  }
  n = p->slices[i].next_phys;
  if (n != NIL && STATE(&p->slices[n]) == SLICE_FREE) {
    free_remove(p, n);
    merge(p, i, n);
  }
  free_insert(p, i);
  if (--p->pages[pg].live == 0)
    empty_push(p, pg);
  return size;
}

static void sliced_release(hippo__pool *pool, uint32_t i, uint64_t size) {
  (void)size; /* the record keeps it */
  (void)release_slice((sliced *)pool, i);
}

static inline bool is_live(const sliced *p, uint32_t i, uint32_t gen) {
  return i < p->slice_count && p->slices[i].sg == (SLICE_LIVE << 24 | gen);
}

static bool sliced_release_named(hippo__pool *pool, uint32_t i, uint32_t gen,
                                 uint64_t *size) {
  sliced *p = (sliced *)pool;
  if (HIPPO__UNLIKELY(!is_live(p, i, gen)))
    return false;
  *size = release_slice(p, i);
  return true;
}

static bool sliced_resolve_named(const hippo__pool *pool, uint32_t i,
                                 uint32_t gen, uint64_t *addr,
                                 uint64_t *size) {
  const sliced *p = (const sliced *)pool;
  const slice *s;
  uint64_t bytes;
  if (HIPPO__UNLIKELY(!is_live(p, i, gen)))
    return false;
  s = &p->slices[i];
  bytes = (uint64_t)s->size << pool->align_shift;
  *addr = p->pages[s->page].addr + ((uint64_t)s->off << pool->align_shift);
  *size = bytes - s->prev_free;
  return true;
}

static void sliced_release_all(hippo__pool *pool) {
  sliced *p = (sliced *)pool;
  /* a release drops only free records, so every live one is still met */
  for (uint32_t i = 0; i < p->slice_count; i++)
    if (STATE(&p->slices[i]) == SLICE_LIVE)
      (void)release_slice(p, i);
}

/* Give an empty page back; on failure it stays, still one free slice. */
static hippo_status page_drop(sliced *p, uint32_t pg) {
  page *g = &p->pages[pg];
  hippo_status st = hippo__pool_page_free(&p->head, g->addr, g->size);
  if (st != HIPPO_SUCCESS)
    return hippo__error_wrap(st, "SLICED pool: freeing a page of %llu B",
                             (unsigned long long)g->size);
  empty_remove(p, pg);
  free_remove(p, g->first);
  node_drop(p, g->first);
  g->held = 0;
  g->next_empty = p->page_unused;
  p->page_unused = pg;
  return HIPPO_SUCCESS;
}

static hippo_status sliced_cleanup(hippo__pool *pool) {
  sliced *p = (sliced *)pool;
  hippo_status first = HIPPO_SUCCESS;
  uint32_t pg = p->empty_head;
  while (pg != NIL) {
    uint32_t next = p->pages[pg].next_empty;
    hippo_status st = page_drop(p, pg);
    if (st != HIPPO_SUCCESS && first == HIPPO_SUCCESS)
      first = st;
    pg = next;
  }
  return first;
}

static hippo_status sliced_tick(hippo__pool *pool, uint64_t now) {
  sliced *p = (sliced *)pool;
  uint64_t period = pool->opt.dealloc_period;
  if (now > pool->now)
    pool->now = now;
  if (period == 0)
    return HIPPO_SUCCESS;
  hippo_status first = HIPPO_SUCCESS;
  while (p->empty_head != NIL &&
         pool->now - p->pages[p->empty_head].empty_since >= period) {
    uint32_t pg = p->empty_head;
    hippo_status st;
    if (!hippo__pool_may_free(pool))
      return first; /* a capture records: wait */
    st = page_drop(p, pg);
    if (st != HIPPO_SUCCESS) {
      /* kept; it waits a whole period again, behind the others */
      empty_remove(p, pg);
      empty_push(p, pg);
      if (first == HIPPO_SUCCESS)
        first = st;
    }
  }
  return first;
}

static void sliced_report(const hippo__pool *pool, hippo_pool_report *out) {
  const sliced *p = (const sliced *)pool;
  hippo__pool_report_head(pool, out);
  out->options.page_size = p->page_size;
  if (p->fl_bitmap) {
    unsigned fl = hippo__log2_floor(p->fl_bitmap);
    unsigned sl = hippo__log2_floor(p->sl_bitmap[fl]);
    for (uint32_t i = p->heads[fl][sl]; i != NIL; i = p->slices[i].next_free)
      if (((uint64_t)p->slices[i].size << pool->align_shift) >
          out->largest_free)
        out->largest_free = (uint64_t)p->slices[i].size << pool->align_shift;
  }
}

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond))                                                               \
      return hippo__error_set(HIPPO_INTERNAL, "SLICED check: " __VA_ARGS__);   \
  } while (0)

static hippo_status sliced_check(const hippo__pool *pool) {
  const sliced *p = (const sliced *)pool;
  uint64_t pages = 0, reserved = 0, live_bytes = 0, free_slices = 0;
  uint64_t live_slices = 0, listed = 0, empty = 0, padding = 0;
  uint64_t unused = 0, retired = 0;

  for (uint32_t pg = 0; pg < p->page_count; pg++) {
    const page *g = &p->pages[pg];
    uint64_t at, live = 0;
    uint32_t prev = NIL;
    if (!g->held)
      continue;
    pages++;
    reserved += g->size;
    at = 0; /* in alignment units */
    for (uint32_t i = g->first; i != NIL; i = p->slices[i].next_phys) {
      const slice *s = &p->slices[i];
      CHECK(i < p->slice_count, "page %u: slice index %u out of range", pg, i);
      CHECK(s->page == pg, "slice %u claims page %u, found in page %u", i,
            s->page, pg);
      CHECK(s->off == at, "page %u: slice %u starts at unit %u, expected %llu",
            pg, i, s->off, (unsigned long long)at);
      CHECK(s->size > 0, "slice %u has size 0", i);
      CHECK(s->prev_phys == prev, "slice %u: prev_phys %u, expected %u", i,
            s->prev_phys, prev);
      CHECK(STATE(s) == SLICE_FREE || STATE(s) == SLICE_LIVE,
            "slice %u in page %u is unused", i, pg);
      CHECK(GEN(s) <= HIPPO__HANDLE_GEN_MASK, "slice %u: generation %u", i,
            GEN(s));
      if (STATE(s) == SLICE_FREE) {
        CHECK(prev == NIL || STATE(&p->slices[prev]) != SLICE_FREE,
              "slices %u and %u are free neighbours (not coalesced)", prev, i);
        free_slices++;
      } else {
        CHECK(GEN(s) != 0, "live slice %u has a retired record", i);
        CHECK(s->prev_free < pool->alignment,
              "live slice %u: %u B of padding, alignment %llu B", i,
              s->prev_free, (unsigned long long)pool->alignment);
        live++;
        live_bytes += (uint64_t)s->size << pool->align_shift;
        padding += s->prev_free;
      }
      at += s->size;
      prev = i;
    }
    CHECK(at << pool->align_shift == g->size,
          "page %u: slices end at byte %llu of %llu (bytes missing)", pg,
          (unsigned long long)(at << pool->align_shift),
          (unsigned long long)g->size);
    CHECK(live == g->live, "page %u: %llu live slices, counter says %u", pg,
          (unsigned long long)live, g->live);
    live_slices += live;
  }
  for (unsigned fl = 0; fl < FL_COUNT; fl++) {
    CHECK(!!(p->fl_bitmap & (UINT64_C(1) << fl)) == !!p->sl_bitmap[fl],
          "first-level bitmap bit %u disagrees", fl);
    for (unsigned sl = 0; sl < SL_COUNT; sl++) {
      uint32_t prev = NIL;
      CHECK(!!(p->sl_bitmap[fl] & (1u << sl)) == (p->heads[fl][sl] != NIL),
            "second-level bitmap bit %u/%u disagrees", fl, sl);
      for (uint32_t i = p->heads[fl][sl]; i != NIL;
           i = p->slices[i].next_free) {
        unsigned f, s;
        CHECK(STATE(&p->slices[i]) == SLICE_FREE,
              "slice %u in free list %u/%u is not free", i, fl, sl);
        CHECK(p->slices[i].prev_free == prev, "free list %u/%u broken at %u",
              fl, sl, i);
        mapping(p->slices[i].size, &f, &s);
        CHECK(f == fl && s == sl, "slice %u of %u units is in class %u/%u", i,
              p->slices[i].size, fl, sl);
        CHECK(++listed <= free_slices, "free lists hold more than %llu slices",
              (unsigned long long)free_slices);
        prev = i;
      }
    }
  }
  CHECK(listed == free_slices, "%llu free slices, %llu in free lists",
        (unsigned long long)free_slices, (unsigned long long)listed);
  for (uint32_t i = p->slice_unused; i != NIL; i = p->slices[i].next_free) {
    CHECK(i < p->slice_count && STATE(&p->slices[i]) == SLICE_UNUSED &&
              GEN(&p->slices[i]) != 0,
          "unused list broken at record %u", i);
    CHECK(++unused <= p->slice_count, "unused list longer than %u records",
          p->slice_count);
  }
  for (uint32_t i = 0; i < p->slice_count; i++)
    retired += STATE(&p->slices[i]) == SLICE_UNUSED && GEN(&p->slices[i]) == 0;
  CHECK(retired == p->retired &&
            live_slices + free_slices + unused + retired == p->slice_count,
        "%llu live + %llu free + %llu unused + %llu retired records of %u "
        "(%u retired counted)",
        (unsigned long long)live_slices, (unsigned long long)free_slices,
        (unsigned long long)unused, (unsigned long long)retired,
        p->slice_count, p->retired);
  for (uint32_t pg = p->empty_head, prev = NIL; pg != NIL;
       prev = pg, pg = p->pages[pg].next_empty) {
    CHECK(p->pages[pg].held && p->pages[pg].live == 0,
          "page %u on the empty FIFO is not empty", pg);
    CHECK(p->pages[pg].prev_empty == prev, "empty FIFO broken at page %u", pg);
    CHECK(++empty <= pages, "empty FIFO longer than %llu pages",
          (unsigned long long)pages);
  }
  for (uint32_t pg = 0; pg < p->page_count; pg++)
    if (p->pages[pg].held && p->pages[pg].live == 0)
      empty--;
  CHECK(empty == 0, "empty FIFO and empty pages disagree");
  {
    uint64_t due = hippo__pool_due_of(
        pool, p->empty_head != NIL,
        p->empty_head != NIL ? p->pages[p->empty_head].empty_since : 0);
    CHECK(due == pool->due, "due at clock %llu, the oldest empty page says "
          "%llu", (unsigned long long)pool->due, (unsigned long long)due);
  }
  CHECK(pages == pool->pages && reserved == pool->bytes_reserved,
        "%llu pages of %llu B held, figures say %llu pages of %llu B",
        (unsigned long long)pages, (unsigned long long)reserved,
        (unsigned long long)pool->pages,
        (unsigned long long)pool->bytes_reserved);
  CHECK(live_slices == pool->allocations,
        "%llu live slices, figures say %llu", (unsigned long long)live_slices,
        (unsigned long long)pool->allocations);
  CHECK(live_bytes == pool->bytes_in_use + pool->bytes_padding &&
            padding == pool->bytes_padding,
        "live slices hold %llu B with %llu B of padding, figures say in use "
        "%llu B + padding %llu B",
        (unsigned long long)live_bytes, (unsigned long long)padding,
        (unsigned long long)pool->bytes_in_use,
        (unsigned long long)pool->bytes_padding);
  CHECK(pool->pages <= pool->peak_pages, "pages above peak");
  CHECK(p->max_pages == UINT64_MAX || pool->pages <= p->max_pages,
        "%llu pages held, cap is %llu", (unsigned long long)pool->pages,
        (unsigned long long)p->max_pages);
  return HIPPO_SUCCESS;
}

static void sliced_destroy(hippo__pool *pool) {
  sliced *p = (sliced *)pool;
  for (uint32_t pg = 0; pg < p->page_count; pg++)
    if (p->pages[pg].held)
      (void)hippo__pool_page_free(pool, p->pages[pg].addr, p->pages[pg].size);
  free(p->slices);
  free(p->pages);
  free(p);
}

/* Hand the records over (pools_install replaces the pool, which holds no
 * page, so every record is unused or retired); the pool keeps none.  With
 * a page still held (never, by pools_install's rule) nothing is handed. */
static void sliced_names_take(hippo__pool *pool, hippo__names *out) {
  sliced *p = (sliced *)pool;
  memset(out, 0, sizeof *out);
  if (pool->pages != 0 || !p->slices)
    return;
  *out = (hippo__names){.records = p->slices,
                        .count = p->slice_count,
                        .cap = p->slice_cap,
                        .unused = p->slice_unused,
                        .retired = p->retired,
                        .first_gen = p->first_gen};
  p->slices = NULL;
  p->slice_count = p->slice_cap = p->retired = 0;
  p->slice_unused = NIL;
}

/* A fresh pool (no record yet) adopts handed-over records. */
static void sliced_names_give(hippo__pool *pool, const hippo__names *in) {
  sliced *p = (sliced *)pool;
  free(p->slices);
  p->slices = in->records;
  p->slice_count = in->count;
  p->slice_cap = in->cap;
  p->slice_unused = in->unused;
  p->retired = in->retired;
  p->first_gen = in->first_gen;
}

void hippo__pool_sliced_limit_records(hippo__pool *pool, uint32_t n) {
  sliced *p = (sliced *)pool;
  p->max_records = n < HIPPO__HANDLE_MAX_SLOTS ? n : HIPPO__HANDLE_MAX_SLOTS;
}

static const hippo__pool_ops sliced_ops = {
    .reserve = sliced_reserve,
    .release = sliced_release,
    .cleanup = sliced_cleanup,
    .tick = sliced_tick,
    .report = sliced_report,
    .check = sliced_check,
    .destroy = sliced_destroy,
    .release_named = sliced_release_named,
    .resolve_named = sliced_resolve_named,
    .release_all = sliced_release_all,
    .names_take = sliced_names_take,
    .names_give = sliced_names_give,
};

hippo_status hippo__pool_sliced_create(hippo__backend *be,
                                       hippo__page_acct *acct,
                                       const hippo_pool_options *opt,
                                       hippo__pool **out) {
  sliced *p = calloc(1, sizeof *p);
  uint64_t page_size = hippo__align_down(opt->page_size, be->alignment);
  uint64_t max_pages = UINT64_MAX;
  if (!p)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "host memory for a SLICED pool");
  if ((page_size >> hippo__log2_floor(be->alignment)) > UINT32_MAX) {
    free(p);
    return hippo__error_set(HIPPO_POOL_CONFIG,
                            "SLICED pool: page_size %llu is more than 2^32 "
                            "alignment units of %llu B",
                            (unsigned long long)page_size,
                            (unsigned long long)be->alignment);
  }
  if (opt->max_pool_size) {
    if (opt->max_pool_size < page_size)
      page_size = hippo__align_down(opt->max_pool_size, be->alignment);
    max_pages = page_size ? opt->max_pool_size / page_size : 0;
  }
  /* It accepts up to max_slice_size even where the page shrank below it:
   * such a request fails with HIPPO_POOL_CAPACITY_EXCEEDED and spills. */
  hippo__pool_head_init(&p->head, &sliced_ops, be, acct, HIPPO_POOL_SLICED,
                        opt, opt->max_slice_size);
  p->page_size = page_size;
  p->max_pages = max_pages;
  p->slice_unused = NIL;
  p->first_gen = hippo__gen_first();
  p->max_records = HIPPO__HANDLE_MAX_SLOTS;
  p->page_unused = NIL;
  p->empty_head = p->empty_tail = NIL;
  memset(p->heads, 0xff, sizeof p->heads);
  *out = &p->head;
  return HIPPO_SUCCESS;
}
