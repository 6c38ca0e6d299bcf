/* pool_sliced.c -- SLICED and ARENA pools: pages from the backend carved
 * into slices.
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
 * Periodic deallocation (pool_fifo.h, shared with EXCLUSIVE and DIRECT): a
 * page that became empty when the stream's reservation clock read t goes
 * back to the backend at the first tick with now >= t + dealloc_period.
 * Empty pages wait in FIFO order of the time they emptied, so a tick looks
 * only at the front; a page whose free fails goes to the back, stamped
 * anew, so it is tried again a period later and holds back no other page.
 *
 * ARENA pools (kind HIPPO_POOL_ARENA) are SLICED pools whose page size
 * grows with the largest request served.  Options: page_size is the
 * smallest page (the floor), max_slice_size the largest request and the
 * largest page, max_pool_size a cap on the bytes of all pages (0: none).
 * The rules and their numbers:
 *  - A request fits the current page size when its aligned size does.
 *    A larger one grows the pool: the new page size is the aligned request
 *    + 1 MiB, rounded up to a whole MiB and to the alignment, clamped
 *    between the floor and max_slice_size (HIPPO__ARENA_SLACK,
 *    HIPPO__ARENA_ROUND).  The page size never shrinks.
 *  - Each page size lives in one of HIPPO__ARENA_SIZES (64) slots.  The
 *    slot of the newest size is current; the pages of every other slot are
 *    *outdated*.  A growth takes a slot that holds no page (or the current
 *    one, when it holds none); none free: HIPPO_PAGE_SIZES_EXHAUSTED, and
 *    the manager relocates (reason ARENA_FULL) and retries.  A growth
 *    takes effect only when the backend grants its first page; a refused
 *    page changes nothing (the page size stays).
 *  - An outdated page is *closed*: its free slices are out of the free
 *    index, so it serves no new reservation, and its live slices stay
 *    where they are.  Once empty it goes back to the backend at the next
 *    tick or cleanup (the drain list), without waiting for dealloc_period;
 *    its slot is free again when its last page went back.
 *  - Best fit: an ARENA looks at up to BEST_SCAN slices of the request's
 *    own class, then of the next non-empty class, and takes the smallest
 *    that fits, the lowest page among equals (so later pages stay emptier
 *    and can go back); a SLICED pool takes the first slice of the class
 *    above the request's, its fast path.
 *  - Sparse: when an ARENA takes a page (of the current size) although its
 *    free bytes could hold the request and its pages hold more than
 *    HIPPO__SPARSE_NUM / HIPPO__SPARSE_DEN (6/5) of the bytes its slices
 *    use (with the request), it notes that it is sparse: relocation_need
 *    then answers SPARSE, and a relocation for it moves the slices of the
 *    sparsest current pages (at most half full) into room other current
 *    pages hold, so those pages can go back.
 *  - Relocation (pool.h, relocation.h): outdated pages are emptied
 *    cheapest first (fewest live bytes), each all or nothing; a destination
 *    is found as a reservation would be, on pages that serve.  Committing
 *    makes the moved slice's record describe its destination, so its
 *    handle (which names the record) resolves there.  Destinations of a
 *    failed wait are kept as stranded slices (out of use, not free) until
 *    a later wait succeeds.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "handles.h"
#include "pool.h"
#include "pool_fifo.h"

#define SL_BITS 4u
#define SL_COUNT (1u << SL_BITS)
#define FL_COUNT 64u
#define NIL UINT32_MAX
/* A class as one number, fl * SL_COUNT + sl, and back. */
#define CLS(fl, sl) ((uint32_t)(fl) << SL_BITS | (uint32_t)(sl))
#define CLS_FL(c) ((c) >> SL_BITS)
#define CLS_SL(c) ((c) & (SL_COUNT - 1))
#define EXACT_SCAN 8 /* slices of the request's own class tried at most */
#define BEST_SCAN 2  /* ARENA: slices of a class compared for the best fit
                        (every footprint of make bench's F is the same with
                        2 as with 4, random.csv's without relocation lower,
                        1.2225 -> 1.2066; 1 costs pt_cs336 1.0274 -> 1.0386
                        and somas 1.1946 -> 1.2319; each slice looked at is
                        a dependent load on the reservation path) */
#define MiB (UINT64_C(1) << 20)
/* Records (2 MiB of them) above which a pool is crowded: the free lists
 * are long, so whether a class empties or was empty is a branch a
 * predictor learns, and the bitmaps are written only then (free_insert,
 * free_unlink).  Below it those outcomes are data a predictor cannot
 * learn and the writes stay unconditional, without a branch.  With
 * 100,000 live (about 200,000 records) the unconditional writes' addresses
 * and values come from records that miss the cache, and the next
 * reservation's loads of the same bitmaps wait for them: make bench B at
 * 100,000 live 83 -> 75 ns a pair (4 GiB page), 80-115 -> 69-75 (the
 * presets), at 100 live unchanged (49-54). */
#define CROWDED_RECORDS 65536u
/* The reservation path's helpers, inlined into it (calls cost more than
 * their bodies here). */
#define HOT static inline __attribute__((always_inline))
#define HIPPO__ARENA_SIZES 64u         /* page sizes alive at once */
#define HIPPO__ARENA_SLACK MiB         /* added to a request at a growth */
#define HIPPO__ARENA_ROUND MiB         /* a grown page is a multiple of it */
#define HIPPO__SPARSE_NUM 11u          /* sparse: pages > 6/5 of the bytes */
#define HIPPO__SPARSE_DEN 10u          /*   slices use, with the request */

/* HELD: a relocation destination kept out of use after a failed wait.
 * GUARDED: a released slice a graph holds (pool.h, hold), out of use until
 * its last hold goes. */
enum {
  SLICE_UNUSED = 0,
  SLICE_FREE = 1,
  SLICE_LIVE = 2,
  SLICE_HELD = 3,
  SLICE_GUARDED = 4
};

/* A slice: a run of bytes of one page, in alignment units (32 bytes, so a
 * slice is one cache line's half and never straddles two: the index stays
 * cache-friendly with 100,000s of slices).
 * Invariant: the slices of a page, followed by next_phys from page.first,
 * tile it exactly: each starts where the previous ends, the first at
 * offset 0, the last ends at the page's end; no two neighbours are both
 * free; a free slice of an open page is in exactly the free list of its
 * class, one of a closed page in none (links NIL); a live slice has a
 * generation != 0 and padding < the alignment; an UNUSED record is on the
 * unused list exactly when its generation is not 0 (else it is retired);
 * a HELD or GUARDED slice keeps its page from emptying and is in no list;
 * a LIVE or GUARDED slice counts its graph holds in next_free (GUARDED:
 * at least one). */
typedef struct slice {
  uint32_t off;       /* offset in the page, in alignment units */
  uint32_t size;      /* size in alignment units, > 0 */
  uint32_t prev_phys; /* neighbour below in the page, NIL at its start */
  uint32_t next_phys; /* neighbour above, NIL at its end */
  uint32_t prev_free; /* FREE: free list link; LIVE, HELD: the padding in
                         bytes (slice bytes - requested bytes) */
  uint32_t next_free; /* FREE: free list link; UNUSED: the unused list;
                         LIVE, GUARDED: graph holds */
  uint32_t page;      /* the page it belongs to */
  uint32_t sg;        /* state << 24 | generation (0: retired) */
} slice;
_Static_assert(sizeof(slice) == 32, "a slice record is half a cache line");

/* A fresh or reused record is UNUSED: becoming FREE is an OR. */
_Static_assert(SLICE_UNUSED == 0, "an unused record's state bits are 0");

#define STATE(s) ((s)->sg >> 24)
#define GEN(s) ((s)->sg & 0xffffffu)
static inline void set_state(slice *s, uint32_t state) {
  s->sg = state << 24 | GEN(s);
}

/* A page held from the backend.
 * Invariant: a page is *empty* when it holds no LIVE, HELD or GUARDED
 * slice, which (the slices coalesce) is exactly when it is one free slice
 * (page_empty: the reservation path keeps no count); an empty page is on
 * the empty FIFO (on == ON_FIFO) or, closed, on the drain list (ON_DRAIN),
 * any other on no list; a closed page's free slices are out of the free
 * index; szslot names its page-size slot, whose size it has. */
enum { ON_NONE = 0, ON_FIFO = 1, ON_DRAIN = 2 };
typedef struct page {
  uint64_t addr;        /* device address from page_alloc */
  uint64_t size;        /* bytes */
  hippo__fifo_link wait; /* on the empty FIFO or the drain list (live ==
                           0): since is the clock when it emptied; an
                           unused page slot: `newer` chains the unused */
  uint32_t first;       /* slice at the page's start */
  uint8_t held;         /* 1 while the page is held from the backend */
  uint8_t closed;       /* serves no new reservation (outdated, or being
                           emptied by a relocation) */
  uint8_t on;           /* ON_NONE, ON_FIFO or ON_DRAIN */
  uint8_t mark;         /* during a relocation plan: took a destination */
  uint32_t szslot;      /* page-size slot (ARENA; 0 for SLICED) */
} page;

/* A page-size slot (ARENA).  Invariant: pages == held pages of szslot ==
 * this slot; a slot is alive when it is current or pages > 0. */
typedef struct sizeslot {
  uint64_t size;
  uint64_t pages;
} sizeslot;

/* Invariant: fl_bitmap bit f set <=> sl_bitmap[f] != 0; sl_bitmap[f] bit s
 * set <=> heads[CLS(f, s)] != NIL; the head figures (pool.h) hold;
 * page_size == sizes[cur].size; sizes_alive counts the alive slots;
 * closed_pages, closed_bytes and closed_busy count the closed pages, their
 * bytes and those with a live slice; stranded bytes are HELD slices';
 * unused_count is the length of the unused list; crowded == (slice_cap >
 * crowd_at).  Between two calls at most one released slice waits to be
 * merged (pending, see settle): FREE, its generation moved on, in no free
 * list and not merged with its neighbours, its page not on a list for
 * that release; every other entry settles it first, so the invariants
 * above hold again inside every call (and in the check walk). */
typedef struct sliced {
  hippo__pool head;
  uint64_t page_size;  /* effective (current) page size (0: cap below
                          alignment) */
  uint64_t max_pages;  /* effective cap in pages (UINT64_MAX: none) */
  bool arena;          /* kind ARENA: grows, best fit, relocation */
  bool crowded;        /* slice_cap > crowd_at (CROWDED_RECORDS) */
  bool sparse;         /* ARENA: took a page while sparse */
  uint64_t floor;      /* ARENA: smallest page */
  uint64_t cap_bytes;  /* ARENA: cap on page bytes (UINT64_MAX: none) */
  uint32_t cur;        /* the current page-size slot */
  uint32_t sizes_alive;
  sizeslot sizes[HIPPO__ARENA_SIZES];
  uint64_t closed_pages, closed_bytes, closed_busy;
  hippo__fifo drain;   /* empty closed pages, going back at the next tick */
  slice *slices;
  uint32_t slice_count, slice_cap, slice_unused; /* unused: node free list */
  uint32_t unused_count; /* records on the unused list */
  uint32_t scratch;      /* written where a link to NIL would be */
  uint32_t first_gen;   /* generation of a fresh record */
  uint32_t retired;     /* retired UNUSED records */
  uint32_t max_records; /* slice_cap's limit: what a handle's index names */
  uint32_t crowd_at;    /* CROWDED_RECORDS (tests may lower it) */
  uint32_t pending;     /* a released slice not merged yet (NIL: none) */
  uint64_t pending_now; /* the clock of its release */
  page *pages;
  uint32_t page_count, page_cap, page_unused; /* page_unused: slot list */
  hippo__fifo empty;   /* empty pages, waiting for dealloc_period */
  uint64_t fl_bitmap;
  uint32_t sl_bitmap[FL_COUNT];
  uint32_t heads[FL_COUNT * SL_COUNT]; /* by class: one index, no
                                          2-D address to compute */
} sliced;

static void settle(const sliced *cp);
HOT void settle_kind(sliced *p, bool arena);

/* Whether slice i, free, is a whole page (its page is empty). */
static inline bool whole_page(const sliced *p, uint32_t i) {
  return (p->slices[i].prev_phys & p->slices[i].next_phys) == NIL;
}

/* Whether page pg is empty: one free slice. */
static inline bool page_empty(const sliced *p, uint32_t pg) {
  uint32_t f = p->pages[pg].first;
  return STATE(&p->slices[f]) == SLICE_FREE && whole_page(p, f);
}

/* The class of u units, fl * SL_COUNT + sl, without a branch (log-uniform
 * sizes make a branch on u < SL_COUNT unpredictable): with sh = floor(log2
 * u) - SL_BITS (0 below 2 * SL_COUNT), u >> sh is SL_COUNT + sl, and
 * u < SL_COUNT lands in first level 0 with sl = u.  *shift is sh (a
 * class holds sizes 2^sh apart). */
static inline uint32_t class_shift(uint64_t u, unsigned *shift) {
  unsigned sh = hippo__log2_floor(u | SL_COUNT) - SL_BITS;
  *shift = sh;
  return (sh << SL_BITS) + (uint32_t)(u >> sh);
}

static inline uint32_t class_of(uint64_t u) {
  unsigned sh;
  return class_shift(u, &sh);
}

/* The 32-bit field at byte `off` of record i, or (i == NIL) `other`,
 * chosen without a branch (the compiler turned the plain conditional into
 * one): whether a class list already holds a slice, or a slice ends its
 * page, is data a branch predictor cannot learn on a pool of few slices
 * per class, and a mispredicted branch costs more than computing both
 * addresses (make bench A presets 12 % faster, B at 100 live 9 %).  The
 * address of record NIL is computed as an integer, never used. */
static inline uint32_t *link_or(const sliced *p, uint32_t i, size_t off,
                                uint32_t *other) {
  uintptr_t at = (uintptr_t)p->slices + (uintptr_t)i * sizeof(slice) + off;
  uintptr_t nil = -(uintptr_t)(i == NIL);
  return (uint32_t *)((at & ~nil) | ((uintptr_t)other & nil));
}

/* Where a list link back to a slice is written: i's prev_free, or (i ==
 * NIL: no slice follows) the pool's scratch word. */
static inline uint32_t *prev_link(sliced *p, uint32_t i) {
  return link_or(p, i, offsetof(slice, prev_free), &p->scratch);
}

/* Where a neighbour link to `i` is written (its prev_phys, or scratch). */
static inline uint32_t *phys_link(sliced *p, uint32_t i) {
  return link_or(p, i, offsetof(slice, prev_phys), &p->scratch);
}

/* Free slice i (state FREE already) enters the list of its class.
 * Crowded (see sliced.crowded), the lists are long: a branch on whether
 * the class was empty is learnt, and the bitmaps are written only when it
 * was.  Otherwise the writes are unconditional, without a branch. */
HOT void free_insert(sliced *p, uint32_t i) {
  slice *s = &p->slices[i];
  uint32_t c = class_of(s->size);
  uint32_t next = p->heads[c];
  s->prev_free = NIL;
  s->next_free = next;
  p->heads[c] = i;
  if (p->crowded) {
    if (HIPPO__LIKELY(next != NIL)) {
      p->slices[next].prev_free = i;
      return;
    }
  } else {
    *prev_link(p, next) = i;
  }
  p->sl_bitmap[CLS_FL(c)] |= 1u << CLS_SL(c);
  p->fl_bitmap |= UINT64_C(1) << CLS_FL(c);
}

/* Free slice i, of class c, leaves its list.  A reservation (`taking`)
 * takes a class's head, so prev is NIL, a branch the predictor learns;
 * there the conditionals stay branches, measured: on long lists (100,000
 * live) a select made each store wait for the record's links to load (B
 * at 100,000 live 52 -> 57 ns a pair).  A release's neighbour sits
 * anywhere in its list, and there both links are chosen without a branch
 * (B at 100 live 45.0 -> 43.3), unless the pool is crowded (long lists:
 * the branches are learnt, as for a reservation). */
HOT void free_unlink(sliced *p, uint32_t i, uint32_t c, bool taking) {
  slice *s = &p->slices[i];
  uint32_t next = s->next_free, prev = s->prev_free, slmap;
  unsigned fl = CLS_FL(c), sl = CLS_SL(c);
  if (taking || p->crowded) {
    *(prev != NIL ? &p->slices[prev].next_free : &p->heads[c]) = next;
    *(next != NIL ? &p->slices[next].prev_free : &p->scratch) = prev;
  } else {
    *link_or(p, prev, offsetof(slice, next_free), &p->heads[c]) = next;
    *prev_link(p, next) = prev;
  }
  /* the list is empty now when i was its only slice (the values in hand,
   * not a reload of what was just stored); crowded, as for free_insert */
  if (p->crowded) {
    if (HIPPO__LIKELY((prev & next) != NIL))
      return;
    slmap = p->sl_bitmap[fl] & ~(1u << sl);
    p->sl_bitmap[fl] = slmap;
    if (!slmap)
      p->fl_bitmap &= ~(UINT64_C(1) << fl);
    return;
  }
  slmap = p->sl_bitmap[fl] & ~((uint32_t)((prev & next) == NIL) << sl);
  p->sl_bitmap[fl] = slmap;
  p->fl_bitmap &= ~((uint64_t)(slmap == 0) << fl);
}

/* Free slice i leaves its list (not a reservation's take). */
HOT void free_remove(sliced *p, uint32_t i) {
  free_unlink(p, i, class_of(p->slices[i].size), false);
}

/* Whether slice i's page serves: only an ARENA closes pages, so where
 * the kind is known (`arena` constant) a SLICED pool answers without
 * reading the page record. */
static inline bool serves_kind(const sliced *p, uint32_t i, bool arena) {
  return !arena || !p->pages[p->slices[i].page].closed;
}

/* Slice i, now FREE, goes into the free index when its page serves
 * (`open`: serves_kind, asked once by a caller that frees several slices
 * of one page), else (closed page) in no list. */
HOT void free_put(sliced *p, uint32_t i, bool open) {
  slice *s = &p->slices[i];
  if (HIPPO__LIKELY(open)) {
    free_insert(p, i);
    return;
  }
  s->prev_free = s->next_free = NIL;
}

/* Free slice i leaves the free index (if its page serves: `open`, as
 * for free_put). */
HOT void free_take(sliced *p, uint32_t i, bool open) {
  if (HIPPO__LIKELY(open))
    free_remove(p, i);
}

/* A free slice the index offers and its class, fl * SL_COUNT + sl (i NIL:
 * none).  Returned by value, in one register: the class stays out of
 * memory on the reservation's critical path. */
typedef struct found {
  uint32_t i, cls;
} found;

/* The head of the smallest non-empty class at or above class c.  (A
 * select instead of the branch between c's first level and the next was
 * measured slower.) */
static inline found find_class(const sliced *p, uint32_t c) {
  unsigned fl = CLS_FL(c);
  uint32_t slmap = p->sl_bitmap[fl] & (~0u << CLS_SL(c));
  if (!slmap) {
    uint64_t flmap =
        fl + 1 < FL_COUNT ? p->fl_bitmap & (~UINT64_C(0) << (fl + 1)) : 0;
    if (!flmap)
      return (found){NIL, 0};
    fl = (unsigned)__builtin_ctzll(flmap);
    slmap = p->sl_bitmap[fl];
  }
  c = CLS(fl, __builtin_ctz(slmap));
  return (found){p->heads[c], c};
}

/* A free slice of at least u units: good fit first, then a bounded look at
 * the request's own class. */
static inline found find_free(const sliced *p, uint64_t u) {
  /* u's own class, and the class of the next class boundary at or above
   * u (one log2 for both: this is the reservation's critical path), the
   * smallest class all of whose slices fit. */
  unsigned sh;
  uint32_t own = class_shift(u, &sh);
  uint32_t up = (uint32_t)((sh << SL_BITS) +
                           ((u + (UINT64_C(1) << sh) - 1) >> sh));
  found f = find_class(p, up);
  uint32_t i;
  if (f.i != NIL || up == own) /* up == own: every slice of it fits */
    return f;
  i = p->heads[own];
  for (int n = 0; i != NIL && n < EXACT_SCAN; n++, i = p->slices[i].next_free)
    if (p->slices[i].size >= u)
      return (found){i, own};
  return (found){NIL, 0};
}

/* Record i, or (i == NIL) a record of size 0 that ends its list: fits
 * nothing, leads nowhere.  Chosen without a branch (link_or). */
static const slice nil_record = {.next_free = NIL};
static inline const slice *record_or_nil(const sliced *p, uint32_t i) {
  return (const slice *)link_or(p, i, 0, (uint32_t *)&nil_record);
}

/* The smallest of the first BEST_SCAN (2) slices of list i that holds u
 * units, the lowest page among equals (NIL: none does).  Both are looked
 * at without a branch: whether a list holds zero, one or two slices, and
 * which fits, is data a predictor cannot learn (a loop over them
 * mispredicted about once per reservation, callgrind's branch model). */
_Static_assert(BEST_SCAN == 2, "smallest_of compares two slices");
static inline uint32_t smallest_of(const sliced *p, uint32_t i, uint64_t u) {
  const slice *a = record_or_nil(p, i);
  uint32_t j = a->next_free;
  const slice *b = record_or_nil(p, j);
  uint64_t key_a = (uint64_t)a->size << 32 | a->page; /* size, then page */
  uint64_t key_b = (uint64_t)b->size << 32 | b->page;
  bool fits_a = a->size >= u, fits_b = b->size >= u;
  uint32_t best = fits_a ? i : NIL;
  uint64_t best_key = fits_a ? key_a : UINT64_MAX;
  return fits_b & (key_b < best_key) ? j : best;
}

/* ARENA: a free slice of at least u units, best fit: the smallest of a
 * few of the request's own class, else of the next non-empty class (every
 * slice of which fits). */
HOT found find_best(const sliced *p, uint64_t u) {
  found f;
  f.cls = class_of(u);
  f.i = smallest_of(p, p->heads[f.cls], u);
  if (f.i != NIL || f.cls + 1 == CLS(FL_COUNT, 0))
    return f;
  f = find_class(p, f.cls + 1);
  if (f.i != NIL)
    f.i = smallest_of(p, f.i, u);
  return f;
}

/* crowded follows slice_cap: called wherever slice_cap or crowd_at
 * changes. */
static void crowd_update(sliced *p) {
  p->crowded = p->slice_cap > p->crowd_at;
}

/* reserve_nodes' slow path: the record array doubles (up to what a
 * handle's index names). */
static hippo_status grow_nodes(sliced *p) {
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
    crowd_update(p);
  }
  return HIPPO_SUCCESS;
}

/* Make room for `n` (<= 1024) more slice nodes, so a reservation cannot
 * fail halfway on host memory. */
static inline hippo_status reserve_nodes(sliced *p, uint32_t n) {
  if (HIPPO__LIKELY(p->slice_cap - p->slice_count + p->unused_count >= n))
    return HIPPO_SUCCESS;
  return grow_nodes(p);
}

/* A record (room was made) that keeps its generation, or a fresh one. */
static uint32_t node_new(sliced *p) {
  uint32_t i;
  if (p->slice_unused != NIL) {
    i = p->slice_unused;
    p->slice_unused = p->slices[i].next_free;
    p->unused_count--;
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
  p->unused_count++;
}

/* Free slice i, off its free list, is about to be reserved but its record
 * has handed out every generation: the slice moves to a fresh record
 * (room was made), which it returns; i retires. */
static uint32_t rehome(sliced *p, uint32_t i) {
  uint32_t j = node_new(p);
  slice *s = &p->slices[i], *t = &p->slices[j];
  uint32_t sg = t->sg;
  *t = *s;
  t->sg = sg | SLICE_FREE << 24; /* from UNUSED (0): the slice is free */
  if (s->prev_phys != NIL)
    p->slices[s->prev_phys].next_phys = j;
  else
    p->pages[s->page].first = j;
  if (s->next_phys != NIL)
    p->slices[s->next_phys].prev_phys = j;
  node_drop(p, i);
  return j;
}

/* What pool->due should be: 0 (the next tick) while a closed page waits
 * on the drain list, else the end of the oldest empty page's period. */
static uint64_t due_of(const sliced *p) {
  if (p->drain.front != NIL)
    return 0;
  return hippo__fifo_due(&p->empty, p->pages, &p->head);
}

/* Empty page pg waits at the back of the drain list or of the empty FIFO,
 * stamped with the clock `since` (when it emptied). */
static void empty_push_to(sliced *p, uint32_t pg, bool drain,
                          uint64_t since) {
  hippo__fifo *f = drain ? &p->drain : &p->empty;
  bool first = f->front == NIL;
  p->pages[pg].on = drain ? ON_DRAIN : ON_FIFO;
  hippo__fifo_push(f, p->pages, pg, since);
  if (first)
    hippo__pool_due_set(&p->head, due_of(p));
}

/* Page pg, emptied (or taken) at clock `since`, waits: on the drain list
 * when closed, else on the empty FIFO. */
static inline void empty_push(sliced *p, uint32_t pg, uint64_t since) {
  empty_push_to(p, pg, p->pages[pg].closed, since);
}

/* Page pg leaves the list it waits on. */
static void empty_remove(sliced *p, uint32_t pg) {
  page *g = &p->pages[pg];
  hippo__fifo *f = g->on == ON_DRAIN ? &p->drain : &p->empty;
  g->on = ON_NONE;
  if (hippo__fifo_unlink(f, p->pages, pg))
    hippo__pool_due_set(&p->head, due_of(p));
}

/* Page pg serves no new reservation: its free slices leave the index; empty,
 * it moves to the drain list. */
static void page_close(sliced *p, uint32_t pg) {
  page *g = &p->pages[pg];
  if (g->closed)
    return;
  for (uint32_t i = g->first; i != NIL; i = p->slices[i].next_phys)
    if (STATE(&p->slices[i]) == SLICE_FREE) {
      free_remove(p, i);
      p->slices[i].prev_free = p->slices[i].next_free = NIL;
    }
  if (g->on != ON_NONE)
    empty_remove(p, pg);
  g->closed = 1;
  p->closed_pages++;
  p->closed_bytes += g->size;
  if (!page_empty(p, pg))
    p->closed_busy++;
  else
    empty_push(p, pg, p->head.now);
}

/* Page pg (closed, of the current size) serves again. */
static void page_open(sliced *p, uint32_t pg) {
  page *g = &p->pages[pg];
  if (!g->closed)
    return;
  if (g->on != ON_NONE)
    empty_remove(p, pg);
  g->closed = 0;
  p->closed_pages--;
  p->closed_bytes -= g->size;
  if (!page_empty(p, pg))
    p->closed_busy--;
  for (uint32_t i = g->first; i != NIL; i = p->slices[i].next_phys)
    if (STATE(&p->slices[i]) == SLICE_FREE)
      free_insert(p, i);
  if (page_empty(p, pg))
    empty_push(p, pg, p->head.now);
}

/* The lazy message of a request no page may hold (a cap). */
static hippo_status no_page(sliced *p, uint64_t bytes, uint64_t size) {
  uint64_t args[] = {size, p->head.opt.max_pool_size, bytes, p->head.pages,
                     p->max_pages == UINT64_MAX ? 0 : p->max_pages};
  return hippo__error_lazy(
      HIPPO_POOL_CAPACITY_EXCEEDED,
      "SLICED pool (page %llu B, max_pool_size %llu B): %llu B do not "
      "fit: %llu of %llu pages held and no free slice fits; release, "
      "raise max_pool_size, or let a later pool take it",
      args, 5);
}

/* The lazy message of a page an ARENA's max_pool_size leaves no room for
 * (no_page's numbers would read "of 0 pages": an ARENA caps bytes). */
static hippo_status no_room_under_cap(sliced *p, uint64_t bytes,
                                      uint64_t size) {
  uint64_t args[] = {p->cap_bytes, bytes, p->head.bytes_reserved, size};
  return hippo__error_lazy(
      HIPPO_POOL_CAPACITY_EXCEEDED,
      "ARENA pool (max_pool_size %llu B): %llu B do not fit: its pages "
      "hold %llu B and a page of %llu B more would pass max_pool_size; "
      "release, relocate, raise max_pool_size, or let a later pool take it",
      args, 4);
}

/* Take a page of `size` bytes for page-size slot `slot` from the backend;
 * it becomes one free slice (on the empty FIFO).  Nodes were reserved by
 * the caller.  A cap or a refused page changes nothing. */
static hippo_status page_add(sliced *p, uint64_t bytes, uint64_t size,
                             uint32_t slot, uint32_t *slice_out) {
  uint64_t addr;
  uint32_t pg, si;
  hippo_status st;
  if (p->head.bytes_reserved + size > p->cap_bytes)
    return no_room_under_cap(p, bytes, size);
  if (bytes > size || (uint64_t)p->head.pages >= p->max_pages)
    return no_page(p, bytes, size);
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
  st = hippo__pool_page_alloc(&p->head, size, &addr);
  if (st != HIPPO_SUCCESS) {
    uint64_t args[] = {size};
    return hippo__error_lazy_wrap(st,
                                  p->arena ? "ARENA pool (page %llu B)"
                                           : "SLICED pool (page %llu B)",
                                  args, 1);
  }
  if (p->page_unused != NIL) {
    pg = p->page_unused;
    p->page_unused = p->pages[pg].wait.newer;
  } else {
    pg = p->page_count++;
  }
  si = node_new(p);
  p->slices[si].sg |= SLICE_FREE << 24; /* from UNUSED (0) */
  p->slices[si].off = 0;
  p->slices[si].size = (uint32_t)(size >> p->head.align_shift);
  p->slices[si].prev_phys = p->slices[si].next_phys = NIL;
  p->slices[si].page = pg;
  p->pages[pg] = (page){.addr = addr,
                        .size = size,
                        .first = si,
                        .held = 1,
                        .szslot = slot};
  if (p->sizes[slot].pages++ == 0 && slot != p->cur)
    p->sizes_alive++;
  free_insert(p, si);
  empty_push(p, pg, p->head.now);
  *slice_out = si;
  return HIPPO_SUCCESS;
}

/* ARENA: the page size a growth for `bytes` picks (see the top). */
static uint64_t grown_size(const sliced *p, uint64_t bytes) {
  uint64_t max = p->head.max_size, size;
  size = bytes + HIPPO__ARENA_SLACK;
  size = (size + HIPPO__ARENA_ROUND - 1) / HIPPO__ARENA_ROUND *
         HIPPO__ARENA_ROUND;
  size = (size + p->head.alignment - 1) & ~(p->head.alignment - 1);
  if (size > max)
    size = hippo__align_down(max, p->head.alignment);
  if (size < p->floor)
    size = p->floor;
  return size;
}

/* ARENA: a request of `bytes` above the current page size grows the pool
 * (see the top); *slice_out is the new page's free slice. */
static hippo_status grow(sliced *p, uint64_t bytes, uint32_t *slice_out) {
  uint64_t size = grown_size(p, bytes);
  uint32_t slot = p->cur, old = p->cur;
  hippo_status st;
  if (p->sizes[slot].pages) { /* the current size holds pages: a new slot */
    for (slot = 0; slot < HIPPO__ARENA_SIZES; slot++)
      if (slot != p->cur && p->sizes[slot].pages == 0)
        break;
    if (slot == HIPPO__ARENA_SIZES) {
      uint64_t args[] = {bytes, HIPPO__ARENA_SIZES, p->page_size};
      return hippo__error_lazy(
          HIPPO_PAGE_SIZES_EXHAUSTED,
          "ARENA pool: %llu B need a larger page, but all %llu page sizes "
          "hold live slices (current page %llu B); relocate or reclaim to "
          "empty outdated pages",
          args, 3);
    }
  }
  st = page_add(p, bytes, size, slot, slice_out);
  if (st != HIPPO_SUCCESS)
    return st; /* the page size stays */
  if (slot != old) {
    p->cur = slot;
    for (uint32_t pg = 0; pg < p->page_count; pg++)
      if (p->pages[pg].held && p->pages[pg].szslot == old)
        page_close(p, pg);
    if (p->sizes[old].pages == 0)
      p->sizes_alive--;
  }
  p->sizes[slot].size = size;
  p->page_size = size;
  return HIPPO_SUCCESS;
}

/* Free slice i (found in the index, in class (fl, sl)) now serves `size`
 * bytes in `u` units: off the index, on a fresh record if its own is
 * retired, split, live.  Returns the record (i, or where it moved). */
HOT uint32_t
take_free(sliced *p, found f, uint64_t u, uint32_t padding) {
  uint32_t i = f.i;
  slice *s;
  free_unlink(p, i, f.cls, true);
  if (HIPPO__UNLIKELY(whole_page(p, i))) /* its page is empty no more */
    empty_remove(p, p->slices[i].page);
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
    rest->sg |= SLICE_FREE << 24; /* from UNUSED (0) */
    *phys_link(p, s->next_phys) = r;
    s->next_phys = r;
    s->size = (uint32_t)u;
    free_insert(p, r);
  }
  s->sg ^= (SLICE_FREE ^ SLICE_LIVE) << 24; /* FREE to LIVE */
  s->prev_free = padding;
  s->next_free = 0; /* no graph holds it yet */
  return i;
}

/* A free slice for u units (bytes) when the index has none: a page of the
 * current size, or (ARENA) a growth.  An ARENA notes when it takes a page
 * while sparse. */
static hippo_status new_room(sliced *p, uint64_t bytes, uint32_t *i) {
  if (!p->arena)
    return page_add(p, bytes, p->page_size, p->cur, i);
  if (bytes > p->page_size)
    return grow(p, bytes, i);
  {
    uint64_t used = p->head.bytes_in_use + p->head.bytes_padding +
                    p->head.bytes_stranded;
    uint64_t reserved = p->head.bytes_reserved;
    hippo_status st = page_add(p, bytes, p->page_size, p->cur, i);
    if (st == HIPPO_SUCCESS && reserved - used >= bytes &&
        reserved / HIPPO__SPARSE_NUM > (used + bytes) / HIPPO__SPARSE_DEN)
      p->sparse = true;
    return st;
  }
}

/* A reservation, written once for both kinds; `arena` is a constant in
 * each caller, so the SLICED path carries no ARENA branch. */
HOT hippo_status reserve_kind(hippo__pool *pool, uint64_t size,
                              hippo__slice_ref *out, bool arena) {
  sliced *p = (sliced *)pool;
  uint64_t bytes, u;
  uint32_t i;
  found f;
  slice *s;
  hippo_status st;

  settle_kind(p, arena);
  /* size <= max_size, validated not to overflow when aligned */
  bytes = (size + pool->alignment - 1) & ~(pool->alignment - 1);
  u = bytes >> pool->align_shift;
  /* at most two: a new page's slice or a retired record's move, and a
   * split */
  st = reserve_nodes(p, 2);
  if (st != HIPPO_SUCCESS)
    return st;
  f = arena ? find_best(p, u) : find_free(p, u);
  if (HIPPO__UNLIKELY(f.i == NIL)) {
    if (!arena && p->head.pages >= p->max_pages) /* page_add's answer */
      return no_page(p, bytes, p->page_size);
    st = new_room(p, bytes, &f.i);
    if (st != HIPPO_SUCCESS)
      return st;
    f.cls = class_of(p->slices[f.i].size);
  }
  i = take_free(p, f, u, (uint32_t)(bytes - size));
  s = &p->slices[i];
  hippo__pool_note_reserve(pool, size, bytes);
  out->addr = p->pages[s->page].addr + ((uint64_t)s->off << pool->align_shift);
  out->slice = i;
  out->gen = GEN(s);
  return HIPPO_SUCCESS;
}

static hippo_status sliced_reserve(hippo__pool *pool, uint64_t size,
                                   hippo__slice_ref *out) {
  return reserve_kind(pool, size, out, false);
}

static hippo_status arena_reserve(hippo__pool *pool, uint64_t size,
                                  hippo__slice_ref *out) {
  return reserve_kind(pool, size, out, true);
}

/* Merge slice b (above) into a (below); b's node is dropped. */
HOT void merge(sliced *p, uint32_t a, uint32_t b) {
  slice *sa = &p->slices[a], *sb = &p->slices[b];
  sa->size += sb->size;
  sa->next_phys = sb->next_phys;
  *phys_link(p, sb->next_phys) = a;
  node_drop(p, b);
}

/* Live or held slice i becomes free: its generation moves on, it merges
 * with its free neighbours, and its page waits once empty.  The page is
 * read once (an ARENA's closed flag) for the slice and its neighbours;
 * `arena` is p->arena, a constant where the caller knows the kind.
 * (Measured and dropped: two bits in each live record noting which
 * neighbour is free, so a release reads a neighbour only to merge it; the
 * writes that keep the notes, into neighbour records that miss the cache
 * as the reads did, cost more: B at 100,000 live 75 -> 80 ns a pair.) */
HOT void coalesce_kind(sliced *p, uint32_t i, bool arena, uint64_t now) {
  slice *s = &p->slices[i];
  bool open = serves_kind(p, i, arena);
  uint32_t n;
  n = s->prev_phys;
  if (n != NIL && STATE(&p->slices[n]) == SLICE_FREE) {
    free_take(p, n, open);
    merge(p, n, i);
    i = n;
  }
  n = p->slices[i].next_phys;
  if (n != NIL && STATE(&p->slices[n]) == SLICE_FREE) {
    free_take(p, n, open);
    merge(p, i, n);
  }
  free_put(p, i, open);
  if (HIPPO__UNLIKELY(whole_page(p, i))) { /* its page is empty now */
    uint32_t pg = p->slices[i].page;
    if (p->pages[pg].closed)
      p->closed_busy--;
    empty_push(p, pg, now); /* stamped with the clock of the release */
  }
}

HOT void free_slice_kind(sliced *p, uint32_t i, bool arena) {
  slice *s = &p->slices[i];
  s->sg = SLICE_FREE << 24 | hippo__gen_next(GEN(s), p->first_gen);
  coalesce_kind(p, i, arena, p->head.now);
}

static void free_slice(sliced *p, uint32_t i) {
  free_slice_kind(p, i, p->arena);
}

/* The pending slice, if any, is merged now (see sliced.pending). */
HOT void settle_kind(sliced *p, bool arena) {
  uint32_t i = p->pending;
  if (i == NIL)
    return;
  p->pending = NIL;
  if (p->head.gate)
    p->head.gate->unsettled = NULL;
  coalesce_kind(p, i, arena, p->pending_now);
}

/* settle_kind for the entries off the reservation path.  A const entry
 * (a report, the check walk) settles too: merging is the release's own
 * work finished late, and changes no figure a caller can see. */
static void __attribute__((noinline)) settle(const sliced *cp) {
  sliced *p = (sliced *)(uintptr_t)cp; /* pools are never const objects */
  settle_kind(p, p->arena);
}

/* The table's settle: another pool of the stream releases, or the
 * manager ticks (pool.h). */
static void sliced_settle(hippo__pool *pool) {
  settle((const sliced *)pool);
}

/* Release live slice i; returns the size it was reserved with.  A slice a
 * graph holds is kept out of use (GUARDED) instead of becoming free.
 * `arena` as for free_slice_kind. */
HOT uint64_t release_kind(sliced *p, uint32_t i, bool arena, bool defer) {
  slice *s = &p->slices[i];
  uint64_t bytes = (uint64_t)s->size << p->head.align_shift;
  uint64_t size = bytes - s->prev_free;
  hippo__pool_note_release(&p->head, size, bytes);
  if (HIPPO__UNLIKELY(s->next_free)) {
    s->sg = SLICE_GUARDED << 24 | hippo__gen_next(GEN(s), p->first_gen);
    p->head.bytes_guarded += bytes;
    return size;
  }
  if (defer) { /* see sliced.pending */
    s->sg = SLICE_FREE << 24 | hippo__gen_next(GEN(s), p->first_gen);
    p->pending = i;
    p->pending_now = p->head.now;
    if (p->head.gate) { /* at most one pool of the stream waits */
      hippo__pool *other = p->head.gate->unsettled;
      if (HIPPO__UNLIKELY(other != NULL && other != &p->head))
        other->ops->settle(other);
      p->head.gate->unsettled = &p->head;
    }
    return size;
  }
  free_slice_kind(p, i, arena);
  return size;
}

static uint64_t release_slice(sliced *p, uint32_t i) {
  return release_kind(p, i, p->arena, false);
}

static void sliced_hold(hippo__pool *pool, uint32_t i) {
  settle((const sliced *)pool);
  ((sliced *)pool)->slices[i].next_free++;
  pool->holds++;
}

static void sliced_unhold(hippo__pool *pool, uint32_t i) {
  sliced *p = (sliced *)pool;
  slice *s = &p->slices[i];
  settle(p);
  pool->holds--;
  if (--s->next_free || STATE(s) != SLICE_GUARDED)
    return;
  pool->bytes_guarded -= (uint64_t)s->size << pool->align_shift;
  free_slice(p, i);
}

static void sliced_release(hippo__pool *pool, uint32_t i, uint64_t size) {
  settle((const sliced *)pool);
  (void)size; /* the record keeps it */
  (void)release_slice((sliced *)pool, i);
}

static inline bool is_live(const sliced *p, uint32_t i, uint32_t gen) {
  return i < p->slice_count && p->slices[i].sg == (SLICE_LIVE << 24 | gen);
}

/* release_named, written once for both kinds (`arena` constant in each
 * caller, as for reserve_kind: the SLICED release reads no page). */
HOT bool release_named_kind(hippo__pool *pool, uint32_t i, uint32_t gen,
                            uint64_t *size, bool arena) {
  sliced *p = (sliced *)pool;
  settle_kind(p, arena);
  if (HIPPO__UNLIKELY(!is_live(p, i, gen)))
    return false;
  *size = release_kind(p, i, arena, true);
  return true;
}

static bool sliced_release_named(hippo__pool *pool, uint32_t i, uint32_t gen,
                                 uint64_t *size) {
  return release_named_kind(pool, i, gen, size, false);
}

static bool arena_release_named(hippo__pool *pool, uint32_t i, uint32_t gen,
                                uint64_t *size) {
  return release_named_kind(pool, i, gen, size, true);
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
  settle(p);
  /* a release drops only free records, so every live one is still met;
   * held slices go too (stream_detach: the stream is going away); slices a
   * graph holds stay, guarded, until graph_retire or destroy */
  for (uint32_t i = 0; i < p->slice_count; i++)
    if (STATE(&p->slices[i]) == SLICE_LIVE) {
      (void)release_slice(p, i);
    } else if (STATE(&p->slices[i]) == SLICE_HELD) {
      pool->bytes_stranded -= (uint64_t)p->slices[i].size << pool->align_shift;
      free_slice(p, i);
    }
}

/* Give an empty page back; on failure it stays, still one free slice. */
static hippo_status page_drop(sliced *p, uint32_t pg) {
  page *g = &p->pages[pg];
  hippo_status st = hippo__pool_page_free(&p->head, g->addr, g->size);
  if (st != HIPPO_SUCCESS)
    return hippo__error_wrap(st, "%s pool: freeing a page of %llu B",
                             p->arena ? "ARENA" : "SLICED",
                             (unsigned long long)g->size);
  empty_remove(p, pg);
  free_take(p, g->first, !g->closed);
  node_drop(p, g->first);
  if (g->closed) {
    p->closed_pages--;
    p->closed_bytes -= g->size;
  }
  if (--p->sizes[g->szslot].pages == 0 && g->szslot != p->cur)
    p->sizes_alive--;
  g->held = 0;
  g->closed = 0;
  g->wait.newer = p->page_unused;
  p->page_unused = pg;
  return HIPPO_SUCCESS;
}

/* A page whose free failed is kept and waits a whole period behind the
 * others (so a free that keeps failing costs a call per period, not per
 * reservation); a closed page of the current size serves again meanwhile,
 * so a page that cannot go back is at least used. */
static void drop_failed(sliced *p, uint32_t pg) {
  page *g = &p->pages[pg];
  empty_remove(p, pg);
  if (g->closed && g->szslot == p->cur) {
    page_open(p, pg); /* back on the FIFO */
    return;
  }
  /* outdated ones wait there too, closed */
  empty_push_to(p, pg, false, p->head.now);
}

static hippo_status fifo_drop(void *ctx, uint32_t pg) {
  return page_drop(ctx, pg);
}

static void fifo_failed(void *ctx, uint32_t pg) { drop_failed(ctx, pg); }

static const hippo__fifo_drop page_dropper = {fifo_drop, fifo_failed, "page"};

static hippo_status sliced_cleanup(hippo__pool *pool) {
  sliced *p = (sliced *)pool;
  hippo_status st, st2;
  settle(p);
  st = hippo__fifo_give_back(&p->drain, p->pages, pool, false, false,
                             &page_dropper, p);
  st2 = hippo__fifo_give_back(&p->empty, p->pages, pool, false, false,
                              &page_dropper, p);
  return st != HIPPO_SUCCESS ? st : st2;
}

static bool sliced_gives_back(const hippo__pool *pool) {
  const sliced *p = (const sliced *)pool;
  settle(p);
  return p->drain.front != HIPPO__FIFO_NIL ||
         p->empty.front != HIPPO__FIFO_NIL;
}

static hippo_status sliced_tick(hippo__pool *pool, uint64_t now) {
  sliced *p = (sliced *)pool;
  hippo_status st, st2;
  settle(p);
  if (now > pool->now)
    pool->now = now;
  if (pool->opt.dealloc_period == 0)
    return HIPPO_SUCCESS;
  st = hippo__fifo_give_back(&p->drain, p->pages, pool, false, true,
                             &page_dropper, p);
  st2 = hippo__fifo_give_back(&p->empty, p->pages, pool, true, true,
                              &page_dropper, p);
  return st != HIPPO_SUCCESS ? st : st2;
}

static void sliced_report(const hippo__pool *pool, hippo_pool_report *out) {
  const sliced *p = (const sliced *)pool;
  settle(p);
  hippo__pool_report_head(pool, out);
  out->current_page_size = p->page_size;
  out->outdated_pages = p->closed_pages;
  out->outdated_bytes = p->closed_bytes;
  out->page_sizes = p->sizes_alive;
  if (p->fl_bitmap) {
    unsigned fl = hippo__log2_floor(p->fl_bitmap);
    unsigned sl = hippo__log2_floor(p->sl_bitmap[fl]);
    for (uint32_t i = p->heads[CLS(fl, sl)]; i != NIL;
         i = p->slices[i].next_free)
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

/* Whether page pg belongs on the empty FIFO, or on the drain list. */
static bool on_fifo(const void *ctx, uint32_t pg) {
  const page *g = &((const sliced *)ctx)->pages[pg];
  return g->held && page_empty(ctx, pg) && g->on == ON_FIFO;
}

static bool on_drain(const void *ctx, uint32_t pg) {
  const page *g = &((const sliced *)ctx)->pages[pg];
  return g->held && page_empty(ctx, pg) && g->on == ON_DRAIN && g->closed;
}

static hippo_status sliced_check(const hippo__pool *pool) {
  const sliced *p = (const sliced *)pool;
  uint64_t pages = 0, reserved = 0, live_bytes = 0, free_slices = 0;
  uint64_t live_slices = 0, listed = 0, indexed = 0, padding = 0;
  uint64_t unused = 0, retired = 0, held_slices = 0, stranded = 0;
  uint64_t guarded_slices = 0, guarded = 0, holds = 0;
  uint64_t closed = 0, closed_bytes = 0, closed_busy = 0, empty = 0;
  uint64_t fifo = 0, drain = 0, size_pages[HIPPO__ARENA_SIZES] = {0};
  uint32_t alive = 0;
  hippo_status st;

  /* a release that waits (see sliced.pending): a FREE slice of a held
   * page, named by the stream's gate; then it is finished, and the walk
   * below sees the pool as every other call does */
  if (p->pending != NIL) {
    const slice *w = &p->slices[p->pending];
    CHECK(p->pending < p->slice_count && STATE(w) == SLICE_FREE &&
              w->page < p->page_count &&
              p->pages[w->page].held && p->pending_now <= pool->now,
          "the waiting release %u is not a free slice of a held page, "
          "released at or before the clock",
          p->pending);
  }
  CHECK(!pool->gate || (pool->gate->unsettled == pool) == (p->pending != NIL),
        "the stream's gate %s this pool, which %s a waiting release",
        pool->gate && pool->gate->unsettled == pool ? "names" : "does not name",
        p->pending != NIL ? "has" : "has no");
  settle(p);

  for (uint32_t pg = 0; pg < p->page_count; pg++) {
    const page *g = &p->pages[pg];
    uint64_t at, live = 0;
    uint32_t prev = NIL;
    if (!g->held)
      continue;
    pages++;
    reserved += g->size;
    CHECK(g->szslot < HIPPO__ARENA_SIZES &&
              g->size == p->sizes[g->szslot].size,
          "page %u of %llu B in size slot %u of %llu B", pg,
          (unsigned long long)g->size, g->szslot,
          g->szslot < HIPPO__ARENA_SIZES
              ? (unsigned long long)p->sizes[g->szslot].size
              : 0ULL);
    size_pages[g->szslot]++;
    CHECK(g->closed || g->szslot == p->cur,
          "page %u of an outdated size serves reservations", pg);
    CHECK(p->arena || !g->closed, "page %u of a SLICED pool is closed", pg);
    if (g->closed) {
      closed++;
      closed_bytes += g->size;
      closed_busy += !page_empty(p, pg);
    }
    CHECK(page_empty(p, pg) == (g->on != ON_NONE),
          "page %u: empty %d, on list %u", pg, page_empty(p, pg), g->on);
    empty += page_empty(p, pg);
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
      CHECK(STATE(s) != SLICE_UNUSED, "slice %u in page %u is unused", i, pg);
      CHECK(GEN(s) <= HIPPO__HANDLE_GEN_MASK, "slice %u: generation %u", i,
            GEN(s));
      if (STATE(s) == SLICE_FREE) {
        CHECK(prev == NIL || STATE(&p->slices[prev]) != SLICE_FREE,
              "slices %u and %u are free neighbours (not coalesced)", prev, i);
        CHECK(!g->closed ||
                  (s->prev_free == NIL && s->next_free == NIL),
              "free slice %u of closed page %u is linked", i, pg);
        free_slices++;
        indexed += !g->closed;
      } else {
        CHECK(GEN(s) != 0, "slice %u in use has a retired record", i);
        CHECK(s->prev_free < pool->alignment,
              "slice %u: %u B of padding, alignment %llu B", i, s->prev_free,
              (unsigned long long)pool->alignment);
        live++;
        if (STATE(s) == SLICE_HELD) {
          held_slices++;
          stranded += (uint64_t)s->size << pool->align_shift;
        } else if (STATE(s) == SLICE_GUARDED) {
          CHECK(s->next_free > 0, "guarded slice %u has no hold", i);
          guarded_slices++;
          guarded += (uint64_t)s->size << pool->align_shift;
          holds += s->next_free;
        } else {
          live_slices++;
          live_bytes += (uint64_t)s->size << pool->align_shift;
          padding += s->prev_free;
          holds += s->next_free;
        }
      }
      at += s->size;
      prev = i;
    }
    CHECK(at << pool->align_shift == g->size,
          "page %u: slices end at byte %llu of %llu (bytes missing)", pg,
          (unsigned long long)(at << pool->align_shift),
          (unsigned long long)g->size);
    CHECK((live == 0) == page_empty(p, pg),
          "page %u: %llu slices in use, but empty %d", pg,
          (unsigned long long)live, page_empty(p, pg));
  }
  CHECK(p->crowded == (p->slice_cap > p->crowd_at),
        "crowded %d with %u records (crowded above %u)", p->crowded,
        p->slice_cap, p->crowd_at);
  for (unsigned fl = 0; fl < FL_COUNT; fl++) {
    CHECK(!!(p->fl_bitmap & (UINT64_C(1) << fl)) == !!p->sl_bitmap[fl],
          "first-level bitmap bit %u disagrees", fl);
    for (unsigned sl = 0; sl < SL_COUNT; sl++) {
      uint32_t prev = NIL;
      CHECK(!!(p->sl_bitmap[fl] & (1u << sl)) ==
                (p->heads[CLS(fl, sl)] != NIL),
            "second-level bitmap bit %u/%u disagrees", fl, sl);
      for (uint32_t i = p->heads[CLS(fl, sl)]; i != NIL;
           i = p->slices[i].next_free) {
        CHECK(i < p->slice_count && STATE(&p->slices[i]) == SLICE_FREE &&
                  p->slices[i].page < p->page_count,
              "slice %u in free list %u/%u is not free", i, fl, sl);
        CHECK(!p->pages[p->slices[i].page].closed,
              "slice %u in free list %u/%u is on a closed page", i, fl, sl);
        CHECK(p->slices[i].prev_free == prev, "free list %u/%u broken at %u",
              fl, sl, i);
        CHECK(class_of(p->slices[i].size) == CLS(fl, sl), "slice %u of %u units is in class %u/%u", i,
              p->slices[i].size, fl, sl);
        CHECK(++listed <= indexed, "free lists hold more than %llu slices",
              (unsigned long long)indexed);
        prev = i;
      }
    }
  }
  CHECK(listed == indexed, "%llu free slices on open pages, %llu in free "
        "lists",
        (unsigned long long)indexed, (unsigned long long)listed);
  for (uint32_t i = p->slice_unused; i != NIL; i = p->slices[i].next_free) {
    CHECK(i < p->slice_count && STATE(&p->slices[i]) == SLICE_UNUSED &&
              GEN(&p->slices[i]) != 0,
          "unused list broken at record %u", i);
    CHECK(++unused <= p->slice_count, "unused list longer than %u records",
          p->slice_count);
  }
  CHECK(unused == p->unused_count, "unused list holds %llu records, %u "
        "counted", (unsigned long long)unused, p->unused_count);
  for (uint32_t i = 0; i < p->slice_count; i++)
    retired += STATE(&p->slices[i]) == SLICE_UNUSED && GEN(&p->slices[i]) == 0;
  CHECK(retired == p->retired &&
            live_slices + held_slices + guarded_slices + free_slices +
                    unused + retired ==
                p->slice_count,
        "%llu live + %llu held + %llu guarded + %llu free + %llu unused + "
        "%llu retired records of %u (%u retired counted)",
        (unsigned long long)live_slices, (unsigned long long)held_slices,
        (unsigned long long)guarded_slices, (unsigned long long)free_slices,
        (unsigned long long)unused, (unsigned long long)retired,
        p->slice_count, p->retired);
  CHECK(guarded == pool->bytes_guarded && holds == pool->holds,
        "guarded slices hold %llu B and slices %llu holds, figures say %llu "
        "B and %llu",
        (unsigned long long)guarded, (unsigned long long)holds,
        (unsigned long long)pool->bytes_guarded,
        (unsigned long long)pool->holds);
  if ((st = hippo__fifo_check(&p->empty, p->pages, p->page_count, pages,
                              on_fifo, p, "SLICED check: the empty FIFO",
                              &fifo)) != HIPPO_SUCCESS ||
      (st = hippo__fifo_check(&p->drain, p->pages, p->page_count, pages,
                              on_drain, p, "SLICED check: the drain list",
                              &drain)) != HIPPO_SUCCESS)
    return st;
  CHECK(fifo + drain == empty, "%llu empty pages, %llu on the lists",
        (unsigned long long)empty, (unsigned long long)(fifo + drain));
  CHECK(due_of(p) == pool->due,
        "due at clock %llu, the empty lists say %llu",
        (unsigned long long)pool->due, (unsigned long long)due_of(p));
  for (uint32_t k = 0; k < HIPPO__ARENA_SIZES; k++) {
    CHECK(size_pages[k] == p->sizes[k].pages,
          "size slot %u holds %llu pages, counted %llu", k,
          (unsigned long long)size_pages[k],
          (unsigned long long)p->sizes[k].pages);
    alive += k == p->cur || size_pages[k] > 0;
  }
  CHECK(alive == p->sizes_alive && p->page_size == p->sizes[p->cur].size,
        "%u page sizes alive, counted %u; page size %llu B, current slot "
        "%llu B",
        alive, p->sizes_alive, (unsigned long long)p->page_size,
        (unsigned long long)p->sizes[p->cur].size);
  CHECK(p->arena || alive == 1, "a SLICED pool with %u page sizes", alive);
  CHECK(closed == p->closed_pages && closed_bytes == p->closed_bytes &&
            closed_busy == p->closed_busy,
        "%llu closed pages of %llu B (%llu busy), counted %llu of %llu B "
        "(%llu)",
        (unsigned long long)closed, (unsigned long long)closed_bytes,
        (unsigned long long)closed_busy, (unsigned long long)p->closed_pages,
        (unsigned long long)p->closed_bytes,
        (unsigned long long)p->closed_busy);
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
  CHECK(stranded == pool->bytes_stranded,
        "held slices hold %llu B, stranded figure %llu B",
        (unsigned long long)stranded,
        (unsigned long long)pool->bytes_stranded);
  CHECK(pool->pages <= pool->peak_pages, "pages above peak");
  CHECK(p->max_pages == UINT64_MAX || pool->pages <= p->max_pages,
        "%llu pages held, cap is %llu", (unsigned long long)pool->pages,
        (unsigned long long)p->max_pages);
  CHECK(p->cap_bytes == UINT64_MAX || pool->bytes_reserved <= p->cap_bytes,
        "%llu B of pages held, cap is %llu B",
        (unsigned long long)pool->bytes_reserved,
        (unsigned long long)p->cap_bytes);
  return HIPPO_SUCCESS;
}

static void sliced_destroy(hippo__pool *pool) {
  sliced *p = (sliced *)pool;
  settle(p);
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
  settle(p);
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
  p->slice_count = p->slice_cap = p->retired = p->unused_count = 0;
  p->slice_unused = NIL;
  crowd_update(p);
}

/* A fresh pool (no record yet) adopts handed-over records. */
static void sliced_names_give(hippo__pool *pool, const hippo__names *in) {
  sliced *p = (sliced *)pool;
  settle(p);
  free(p->slices);
  p->slices = in->records;
  p->slice_count = in->count;
  p->slice_cap = in->cap;
  crowd_update(p);
  p->slice_unused = in->unused;
  p->unused_count = in->count - in->retired; /* every record unused or
                                                retired */
  p->retired = in->retired;
  p->first_gen = in->first_gen;
}

static uint64_t sliced_addr(const hippo__pool *pool, uint32_t i) {
  const sliced *p = (const sliced *)pool;
  return p->pages[p->slices[i].page].addr +
         ((uint64_t)p->slices[i].off << pool->align_shift);
}

/* ---- relocation (ARENA) --------------------------------------------------
 * See pool.h for the operations and the top of this file for the rules. */

static void arena_reloc_shape(const hippo__pool *pool,
                              hippo__reloc_shape *out) {
  const sliced *p = (const sliced *)pool;
  settle(p);
  memset(out, 0, sizeof *out);
  out->current_pages = p->sizes[p->cur].pages;
  out->outdated_pages = p->closed_pages;
  out->outdated_live = p->closed_busy;
  out->guarded_pages = pool->holds; /* guards added or dropped: a change */
  out->page_sizes = p->sizes_alive;
  out->page_size = p->page_size;
  /* a growth reuses the current slot while it holds no page */
  out->sizes_full = p->sizes_alive >= HIPPO__ARENA_SIZES &&
                    p->sizes[p->cur].pages > 0;
  out->sparse = p->sparse;
}

/* A page to empty, and the live bytes that would move. */
typedef struct candidate {
  uint64_t live_bytes;
  uint32_t page;
  uint32_t sparse; /* an open page of the current size (SPARSE) */
} candidate;

static int candidate_cmp(const void *a, const void *b) {
  const candidate *x = a, *y = b;
  if (x->sparse != y->sparse) /* outdated pages first */
    return x->sparse < y->sparse ? -1 : 1;
  if (x->live_bytes != y->live_bytes)
    return x->live_bytes < y->live_bytes ? -1 : 1;
  return x->page < y->page ? -1 : x->page > y->page;
}

/* Whether page pg can be emptied, and the live bytes that would move. */
enum { MOVABLE, STRANDED, GUARDED };
static int page_movable(const sliced *p, uint32_t pg, uint64_t *bytes) {
  *bytes = 0;
  for (uint32_t i = p->pages[pg].first; i != NIL; i = p->slices[i].next_phys) {
    const slice *s = &p->slices[i];
    if (STATE(s) == SLICE_GUARDED || (STATE(s) == SLICE_LIVE && s->next_free))
      return GUARDED; /* a graph may use it: nothing on the page moves */
    if (STATE(s) == SLICE_HELD)
      return STRANDED;
    if (STATE(s) == SLICE_LIVE)
      *bytes += (uint64_t)s->size << p->head.align_shift;
  }
  return MOVABLE;
}

static hippo_status plan_room(hippo__reloc_plan *plan) {
  if (plan->count < plan->cap)
    return HIPPO_SUCCESS;
  {
    uint32_t cap = plan->cap ? plan->cap * 2 : 64;
    hippo__move *grown = realloc(plan->moves, (size_t)cap * sizeof *grown);
    if (!grown)
      return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                              "relocation: host memory for %u moves", cap);
    plan->moves = grown;
    plan->cap = cap;
  }
  return HIPPO_SUCCESS;
}

/* Reserve a destination for every live slice of page pg (closed), all or
 * nothing; false leaves the pool as it was (but pages added, which wait
 * empty on the FIFO). */
static bool plan_page(sliced *p, uint32_t pg, bool may_add,
                      hippo__reloc_plan *plan) {
  uint32_t first = plan->count;
  for (uint32_t i = p->pages[pg].first; i != NIL; i = p->slices[i].next_phys) {
    slice *s = &p->slices[i];
    uint64_t u = s->size, bytes = u << p->head.align_shift;
    found f;
    uint32_t j;
    if (STATE(s) != SLICE_LIVE)
      continue;
    if (reserve_nodes(p, 2) != HIPPO_SUCCESS ||
        plan_room(plan) != HIPPO_SUCCESS)
      goto undo;
    f = find_best(p, u);
    if (f.i == NIL && may_add && plan->page_status == HIPPO_SUCCESS) {
      hippo_status st = page_add(p, bytes, p->page_size, p->cur, &f.i);
      if (st != HIPPO_SUCCESS) {
        plan->page_status = st;
        f.i = NIL;
      } else {
        plan->pages_added++;
        f.cls = class_of(p->slices[f.i].size);
      }
    }
    j = f.i;
    if (j == NIL)
      goto undo;
    s = &p->slices[i]; /* reserve_nodes may have moved the array */
    j = take_free(p, f, u, s->prev_free);
    hippo__pool_note_reserve(&p->head, bytes - s->prev_free, bytes);
    p->pages[p->slices[j].page].mark = 1;
    plan->moves[plan->count++] = (hippo__move){
        .src = sliced_addr(&p->head, i),
        .dst = sliced_addr(&p->head, j),
        .bytes = bytes,
        .slice = i,
        .target = j};
    plan->bytes += bytes;
  }
  plan->pages_planned++;
  return true;
undo:
  while (plan->count > first) {
    hippo__move *m = &plan->moves[--plan->count];
    plan->bytes -= m->bytes;
    (void)release_slice(p, m->target);
  }
  plan->pages_no_room++;
  return false;
}

static hippo_status arena_reloc_plan(hippo__pool *pool,
                                     hippo_relocate_reason reason,
                                     hippo__reloc_plan *plan) {
  sliced *p = (sliced *)pool;
  bool may_add = reason == HIPPO_RELOCATE_ARENA_FULL ||
                 reason == HIPPO_RELOCATE_CAPTURE;
  bool sparse = reason == HIPPO_RELOCATE_SPARSE;
  candidate *c;
  uint32_t n = 0;
  settle(p);
  if (p->page_count == 0)
    return HIPPO_SUCCESS;
  c = malloc((size_t)p->page_count * sizeof *c);
  if (!c)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "relocation: host memory to plan %u pages",
                            p->page_count);
  for (uint32_t pg = 0; pg < p->page_count; pg++) {
    const page *g = &p->pages[pg];
    uint64_t bytes;
    bool open_sparse = sparse && !g->closed && g->szslot == p->cur;
    int movable;
    if (!g->held || page_empty(p, pg) || !(g->closed || open_sparse))
      continue;
    movable = page_movable(p, pg, &bytes);
    if (movable == GUARDED)
      plan->pages_guarded++;
    if (movable != MOVABLE)
      continue;
    /* a page at least half full is not worth emptying */
    if (open_sparse && bytes * 2 > g->size)
      continue;
    c[n++] = (candidate){bytes, pg, open_sparse};
  }
  qsort(c, n, sizeof *c, candidate_cmp);
  for (uint32_t k = 0; k < n; k++) {
    uint32_t pg = c[k].page;
    if (c[k].sparse) {
      if (p->pages[pg].mark)
        continue; /* it took destinations of this plan */
      page_close(p, pg);
    }
    if (!plan_page(p, pg, may_add && !c[k].sparse, plan) && c[k].sparse)
      page_open(p, pg);
  }
  for (uint32_t pg = 0; pg < p->page_count; pg++)
    p->pages[pg].mark = 0;
  free(c);
  return HIPPO_SUCCESS;
}

/* Records i (live, at the source) and j (live, at the destination, as
 * large) trade places: i now describes the destination, j the source. */
static void swap_places(sliced *p, uint32_t i, uint32_t j) {
  slice *a = &p->slices[i], *b = &p->slices[j];
  slice ta = *a;
  uint32_t k, r;
  a->off = b->off;
  a->page = b->page;
  a->prev_phys = b->prev_phys;
  a->next_phys = b->next_phys;
  b->off = ta.off;
  b->page = ta.page;
  b->prev_phys = ta.prev_phys;
  b->next_phys = ta.next_phys;
  for (k = 0, r = i; k < 2; k++, r = j) { /* the neighbours of each place */
    slice *x = &p->slices[r];
    if (x->prev_phys != NIL)
      p->slices[x->prev_phys].next_phys = r;
    else
      p->pages[x->page].first = r;
    if (x->next_phys != NIL)
      p->slices[x->next_phys].prev_phys = r;
  }
}

static void arena_reloc_commit(hippo__pool *pool, hippo__reloc_plan *plan) {
  sliced *p = (sliced *)pool;
  settle(p);
  for (uint32_t k = 0; k < plan->count; k++) {
    swap_places(p, plan->moves[k].slice, plan->moves[k].target);
    (void)release_slice(p, plan->moves[k].target);
  }
  if (plan->count)
    p->sparse = false;
}

static void arena_reloc_abort(hippo__pool *pool, hippo__reloc_plan *plan,
                              bool strand) {
  sliced *p = (sliced *)pool;
  settle(p);
  for (uint32_t k = 0; k < plan->count; k++) {
    uint32_t j = plan->moves[k].target;
    if (strand) { /* a copy may still write it: out of use, not free */
      slice *t = &p->slices[j];
      uint64_t bytes = (uint64_t)t->size << pool->align_shift;
      hippo__pool_note_release(pool, bytes - t->prev_free, bytes);
      set_state(t, SLICE_HELD);
      pool->bytes_stranded += bytes;
    } else {
      (void)release_slice(p, j);
    }
  }
  /* pages of the current size closed to be emptied serve again */
  for (uint32_t pg = 0; pg < p->page_count; pg++)
    if (p->pages[pg].held && p->pages[pg].closed &&
        p->pages[pg].szslot == p->cur)
      page_open(p, pg);
}

static void arena_reloc_unstrand(hippo__pool *pool) {
  sliced *p = (sliced *)pool;
  settle(p);
  for (uint32_t i = 0; i < p->slice_count && pool->bytes_stranded; i++)
    if (STATE(&p->slices[i]) == SLICE_HELD) {
      pool->bytes_stranded -= (uint64_t)p->slices[i].size << pool->align_shift;
      free_slice(p, i);
    }
}

static hippo_status arena_reloc_drain(hippo__pool *pool, uint64_t *pages,
                                      uint64_t *bytes) {
  sliced *p = (sliced *)pool;
  uint64_t n = pool->pages, b = pool->bytes_reserved;
  hippo_status st;
  settle(p);
  st = hippo__fifo_give_back(&p->drain, p->pages, pool, false, false,
                             &page_dropper, p);
  /* and the outdated ones whose free failed before (waiting on the FIFO) */
  for (uint32_t pg = p->empty.front, next; pg != NIL; pg = next) {
    next = p->pages[pg].wait.newer;
    if (p->pages[pg].closed) {
      hippo_status fst = page_drop(p, pg);
      if (fst != HIPPO_SUCCESS && st == HIPPO_SUCCESS)
        st = fst; /* it stays where it is */
    }
  }
  *pages += n - pool->pages;
  *bytes += b - pool->bytes_reserved;
  return st;
}

void hippo__pool_sliced_limit_records(hippo__pool *pool, uint32_t n) {
  sliced *p = (sliced *)pool;
  p->max_records = n < HIPPO__HANDLE_MAX_SLOTS ? n : HIPPO__HANDLE_MAX_SLOTS;
}

bool hippo__pool_sliced_crowd_at(hippo__pool *pool, uint32_t n) {
  sliced *p = (sliced *)pool;
  p->crowd_at = n;
  crowd_update(p);
  return p->crowded;
}


/* The operations both kinds share; an ARENA adds relocation's. */
#define SLICED_OPS                                                             \
  .release = sliced_release, .addr = sliced_addr,                             \
  .hold = sliced_hold, .unhold = sliced_unhold,                                \
  .cleanup = sliced_cleanup, .gives_back = sliced_gives_back,                  \
  .tick = sliced_tick, .report = sliced_report,                                \
  .check = sliced_check, .destroy = sliced_destroy,                            \
  .resolve_named = sliced_resolve_named, .release_all = sliced_release_all,    \
  .settle = sliced_settle,                                                     \
  .names_take = sliced_names_take, .names_give = sliced_names_give

static const hippo__pool_ops sliced_ops = {
    SLICED_OPS, .reserve = sliced_reserve,
    .release_named = sliced_release_named};

static const hippo__pool_ops arena_ops = {
    SLICED_OPS,
    .reserve = arena_reserve,
    .release_named = arena_release_named,
    .reloc_shape = arena_reloc_shape,
    .reloc_plan = arena_reloc_plan,
    .reloc_commit = arena_reloc_commit,
    .reloc_abort = arena_reloc_abort,
    .reloc_unstrand = arena_reloc_unstrand,
    .reloc_drain = arena_reloc_drain,
};

/* What both kinds set up alike; NULL (last_error set) without host
 * memory. */
static sliced *sliced_new(hippo__backend *be, hippo__page_acct *acct,
                          const hippo__pool_ops *ops, hippo_pool_kind kind,
                          const hippo_pool_options *opt, uint64_t page_size) {
  sliced *p = calloc(1, sizeof *p);
  if (!p) {
    hippo__error_set(HIPPO_OUT_OF_MEMORY, "host memory for a %s pool",
                     kind == HIPPO_POOL_ARENA ? "ARENA" : "SLICED");
    return NULL;
  }
  hippo__pool_head_init(&p->head, ops, be, acct, kind, opt,
                        opt->max_slice_size);
  p->page_size = page_size;
  p->sizes[0].size = page_size;
  p->sizes_alive = 1;
  p->max_pages = UINT64_MAX;
  p->cap_bytes = UINT64_MAX;
  p->slice_unused = NIL;
  p->pending = NIL;
  p->first_gen = hippo__gen_first();
  p->max_records = HIPPO__HANDLE_MAX_SLOTS;
  p->crowd_at = CROWDED_RECORDS;
  p->page_unused = NIL;
  hippo__fifo_init(&p->empty, sizeof(page), offsetof(page, wait));
  hippo__fifo_init(&p->drain, sizeof(page), offsetof(page, wait));
  memset(p->heads, 0xff, sizeof p->heads);
  return p;
}

hippo_status hippo__pool_sliced_create(hippo__backend *be,
                                       hippo__page_acct *acct,
                                       const hippo_pool_options *opt,
                                       hippo__pool **out) {
  sliced *p;
  uint64_t page_size = hippo__align_down(opt->page_size, be->alignment);
  uint64_t max_pages = UINT64_MAX;
  if ((page_size >> hippo__log2_floor(be->alignment)) > UINT32_MAX)
    return hippo__error_set(HIPPO_POOL_CONFIG,
                            "SLICED pool: page_size %llu is more than 2^32 "
                            "alignment units of %llu B",
                            (unsigned long long)page_size,
                            (unsigned long long)be->alignment);
  if (opt->max_pool_size) {
    if (opt->max_pool_size < page_size)
      page_size = hippo__align_down(opt->max_pool_size, be->alignment);
    max_pages = page_size ? opt->max_pool_size / page_size : 0;
  }
  /* It accepts up to max_slice_size even where the page shrank below it:
   * such a request fails with HIPPO_POOL_CAPACITY_EXCEEDED and spills. */
  p = sliced_new(be, acct, &sliced_ops, HIPPO_POOL_SLICED, opt, page_size);
  if (!p)
    return HIPPO_OUT_OF_MEMORY;
  p->max_pages = max_pages;
  p->head.opt.page_size = page_size; /* in force: shrunk to a cap */
  *out = &p->head;
  return HIPPO_SUCCESS;
}

hippo_status hippo__pool_arena_create(hippo__backend *be,
                                      hippo__page_acct *acct,
                                      const hippo_pool_options *opt,
                                      hippo__pool **out) {
  uint64_t floor = hippo__align_down(opt->page_size, be->alignment);
  uint64_t max = hippo__align_down(opt->max_slice_size, be->alignment);
  sliced *p;
  if (floor == 0 || max < floor ||
      (max >> hippo__log2_floor(be->alignment)) > UINT32_MAX)
    return hippo__error_set(HIPPO_POOL_CONFIG,
                            "ARENA pool: pages of %llu .. %llu B do not fit "
                            "alignment %llu B and 2^32 alignment units",
                            (unsigned long long)floor,
                            (unsigned long long)max,
                            (unsigned long long)be->alignment);
  p = sliced_new(be, acct, &arena_ops, HIPPO_POOL_ARENA, opt, floor);
  if (!p)
    return HIPPO_OUT_OF_MEMORY;
  p->arena = true;
  p->floor = floor;
  p->head.max_size = max;
  if (opt->max_pool_size)
    p->cap_bytes = opt->max_pool_size;
  *out = &p->head;
  return HIPPO_SUCCESS;
}
