/* sliced.h -- the sliced core's contract (private to sliced.c and the
 * files of the SLICED, ARENA and VIRTUAL pools: pool_sliced.c,
 * pool_sliced_check.c, pool_arena.c, pool_arena_relocation.c,
 * pool_virtual.c): the records of slices and pages, the pool struct and
 * their invariants, the table of hooks a kind supplies
 * (hippo__sliced_kind), and the functions the core gives the kinds.  The
 * free index over the slices is sliced_index.h, the hot paths
 * sliced_paths.h.
 *
 * All metadata lives in host memory (arrays of slices and pages, linked by
 * 32-bit indices); device memory is never touched.
 */
#ifndef HIPPO_SLICED_H
#define HIPPO_SLICED_H

#include <stddef.h>

#include "handles.h"
#include "pool.h"
#include "pool_fifo.h"
#include "pool_relocation.h"

/* The free index's shape (sliced_index.h): classes fl * SL_COUNT + sl. */
#define SL_BITS 4u
#define SL_COUNT (1u << SL_BITS)
#define FL_COUNT 64u
#define NIL UINT32_MAX
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

/* HELD: a relocation destination kept out of use after a failed wait.
 * GUARDED: a released slice with holds (pool.h, hold: a graph's or a
 * record_use user's), out of use until its last hold goes. */
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
 * a LIVE or GUARDED slice counts its holds in next_free (GUARDED: at
 * least one, prev_free of them record_use waits, at most next_free; it
 * counts in bytes_guarded while a graph's remain, else bytes_waiting). */
typedef struct slice {
  uint32_t off;       /* offset in the page, in alignment units */
  uint32_t size;      /* size in alignment units, > 0 */
  uint32_t prev_phys; /* neighbour below in the page, NIL at its start */
  uint32_t next_phys; /* neighbour above, NIL at its end */
  uint32_t prev_free; /* FREE: free list link; LIVE, HELD: the padding in
                         bytes (slice bytes - requested bytes); GUARDED:
                         its record_use holds (pool.h, waits) */
  uint32_t next_free; /* FREE: free list link; UNUSED: the unused list;
                         LIVE, GUARDED: holds */
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

/* The granules of a VIRTUAL pool's range (pool_virtual.c).
 * Invariant: ref[g] is GMAPPED when granule g is mapped, plus the number
 * of LIVE or GUARDED slices that touch it (a slice touches the granules
 * its bytes, padding included, overlap); an unmapped granule has 0; idle
 * counts the mapped granules no slice touches; the head's pages and
 * bytes_reserved are the mapped granules and their bytes, bytes_idle the
 * idle ones' bytes; no granule at or above high was ever mapped.  The
 * mapped granules are cut into physical allocations: heads has bit g set
 * exactly where one starts (only on a mapped granule; every mapped
 * granule after an unmapped one, or the first, is one), and an
 * allocation runs to the next head or unmapped granule; it goes back
 * whole.  stamp[g] of an idle granule is the pool's clock when it went
 * idle (the oldest go back first); peak_live >= every bytes_in_use the
 * pool reached; when `waited`, every work the stream queued before the
 * pool's clock read waited_at is done. */
#define GMAPPED 0x80000000u
#define GCOUNT 0x7fffffffu
/* Inside map_missing only (pool_virtual.c): mapped by this call, so a
 * failure gives back exactly those; clear at every other moment (a
 * granule is touched by far fewer than 2^30 slices). */
#define GFRESH 0x40000000u
typedef struct hippo__vgranules {
  uint32_t *ref;           /* by granule of the range */
  uint64_t count;          /* granules of the range */
  uint64_t size;           /* bytes of a granule, a power of two */
  unsigned shift;          /* log2(size) */
  unsigned ushift;         /* log2(size / the pool's alignment): a slice's
                              granules are its units >> ushift */
  uint64_t idle;           /* mapped granules no slice touches */
  uint64_t high;           /* above the highest granule ever mapped */
  uint64_t threshold;      /* idle bytes at which the pool wants an unmap */
  uint64_t range;          /* the range's address (0: not reserved yet) */
  uint64_t range_size;
  uint64_t maps, unmaps;   /* granules mapped and unmapped, ever */
  uint64_t *heads;         /* bit per granule: an allocation starts here */
  uint32_t *stamp;         /* by granule: the clock when it went idle */
  uint64_t budget;         /* mapped bytes allowed above peak_live, in
                              parts per 10,000 of it (UINT64_MAX: none) */
  uint64_t peak_live;      /* the most bytes in use the pool reached */
  bool waited;             /* a wait for the pool's stream succeeded */
  uint64_t waited_at;      /* the pool's clock (head.now) at the last */
} hippo__vgranules;

/* A kind's contract with the sliced core: what SLICED, ARENA and VIRTUAL
 * supply (pool_sliced.c, pool_arena.c, pool_virtual.c), one constant
 * table each.  The core's hot paths (sliced_paths.h) are inlined into the
 * kind's own file with its table, so their hooks are read at compile time
 * and cost no indirect call; the core's own files call only the cold
 * ones, through sliced.kind.  A kind calls down into the core, never the
 * core up into a kind but through this table. */
typedef enum hippo__fit {
  HIPPO__FIT_GOOD, /* find_free: the first slice of the class above */
  HIPPO__FIT_BEST, /* find_best: the smallest of a few */
  HIPPO__FIT_NEAR  /* find_near: best fit to a class's resolution */
} hippo__fit;
struct sliced;
typedef struct hippo__sliced_kind {
  const char *name; /* in messages: "SLICED", "ARENA", "VIRTUAL" */
  bool arena;       /* its pages close (outdated, emptied by relocation) */
  hippo__fit fit;   /* how a free slice is chosen */
  /* A free slice for `bytes` (*i) when the index has none: a page, a
   * growth, the range; a refusal changes nothing. */
  hippo_status (*new_room)(struct sliced *p, uint64_t bytes, uint32_t *i);
  /* NULL, or: a slice just taken counts on what it touches (VIRTUAL: its
   * granules, mapped as needed), and a live one no graph holds, released,
   * counts off; a refused touch hands the slice to `refused`, which frees
   * it, or serves the reservation otherwise (then HIPPO_SUCCESS). */
  hippo_status (*touch)(struct sliced *p, uint32_t i);
  void (*untouch)(struct sliced *p, uint32_t i);
  hippo_status (*refused)(struct sliced *p, uint32_t i, uint64_t size,
                          uint64_t bytes, hippo_status st,
                          hippo__slice_ref *out);
  /* NULL, or the kind's part of the check walk (pool_sliced_check.c). */
  hippo_status (*check)(const struct sliced *p);
} hippo__sliced_kind;

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
  const hippo__sliced_kind *kind; /* its contract (the cold hooks) */
  uint64_t page_size;  /* effective (current) page size (0: cap below
                          alignment) */
  uint64_t max_pages;  /* effective cap in pages (UINT64_MAX: none) */
  bool arena;          /* kind ARENA: grows, best fit, relocation */
  bool crowded;        /* slice_cap > crowd_at (CROWDED_RECORDS) */
  bool sparse;         /* ARENA: took a page while sparse */
  bool virt;           /* kind VIRTUAL: one page, the stream's virtual
                          range, with granules mapped (pool_virtual.c) */
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
  hippo__vgranules vg;  /* VIRTUAL only */
} sliced;

/* A free slice the index offers and its class, fl * SL_COUNT + sl (i NIL:
 * none).  Returned by value, in one register: the class stays out of
 * memory on the reservation's critical path. */
typedef struct found {
  uint32_t i, cls;
} found;

/* Whether slice i, free, is a whole page (its page is empty). */
static inline bool whole_page(const sliced *p, uint32_t i) {
  return (p->slices[i].prev_phys & p->slices[i].next_phys) == NIL;
}

/* Whether page pg is empty: one free slice. */
static inline bool page_empty(const sliced *p, uint32_t pg) {
  uint32_t f = p->pages[pg].first;
  return STATE(&p->slices[f]) == SLICE_FREE && whole_page(p, f);
}

/* Whether slice i's page serves: only an ARENA closes pages, so where
 * the kind is known (`arena` constant) a SLICED pool answers without
 * reading the page record. */
static inline bool serves_kind(const sliced *p, uint32_t i, bool arena) {
  return !arena || !p->pages[p->slices[i].page].closed;
}

/* ---- records (sliced.c) ---------------------------------------------------- */

/* The record array doubles (up to what a handle's index names);
 * HIPPO_POOL_CAPACITY_EXCEEDED past max_records, HIPPO_OUT_OF_MEMORY
 * without host memory. */
hippo_status hippo__sliced_grow_nodes(sliced *p);
/* Make room for `n` (<= 1024) more slice records, so a reservation cannot
 * fail halfway on host memory. */
static inline hippo_status reserve_nodes(sliced *p, uint32_t n) {
  if (HIPPO__LIKELY(p->slice_cap - p->slice_count + p->unused_count >= n))
    return HIPPO_SUCCESS;
  return hippo__sliced_grow_nodes(p);
}

/* ---- what the core (sliced.c) gives the kinds ------------------------------ */

/* The release a pool left waiting is merged now (see sliced.pending);
 * every entry off the reservation path calls it first. */
void hippo__sliced_settle(const sliced *p);
/* What pool->due should be (the check walk compares). */
uint64_t hippo__sliced_due_of(const sliced *p);
/* Take a page of `size` bytes for page-size slot `slot`; it becomes one
 * free slice (*slice_out), on the empty FIFO.  A cap or a refused page
 * changes nothing.  `bytes`: the request it is for (messages). */
hippo_status hippo__sliced_page_add(sliced *p, uint64_t bytes, uint64_t size,
                                    uint32_t slot, uint32_t *slice_out);
/* Room for one more page record (host memory). */
hippo_status hippo__sliced_page_room(sliced *p);
/* A page of `size` bytes at `addr` (room was made) for page-size slot
 * `slot` becomes one free slice, returned, on the empty FIFO; its bytes
 * were accounted by the caller (pages from the backend:
 * hippo__pool_page_alloc; a VIRTUAL range: none). */
uint32_t hippo__sliced_page_install(sliced *p, uint64_t addr, uint64_t size,
                                    uint32_t slot);
/* Page pg serves no new reservation (its free slices leave the index;
 * empty, it moves to the drain list), or serves again. */
void hippo__sliced_page_close(sliced *p, uint32_t pg);
void hippo__sliced_page_open(sliced *p, uint32_t pg);
/* Give an empty page back; on failure it stays, one free slice. */
hippo_status hippo__sliced_page_drop(sliced *p, uint32_t pg);
/* Empty page pg's records go (its memory is the caller's). */
void hippo__sliced_page_forget(sliced *p, uint32_t pg);
/* How the FIFOs give a page back (pool_fifo.h). */
extern const hippo__fifo_drop hippo__sliced_page_dropper;
/* The page pg emptied (or taken) at clock `since` waits (the empty FIFO;
 * closed: the drain list), or leaves the list it waits on. */
void hippo__sliced_empty_push(sliced *p, uint32_t pg, uint64_t since);
void hippo__sliced_empty_remove(sliced *p, uint32_t pg);
/* Free slice f (found in the index) now serves u units with `padding`
 * bytes: off the index, on a fresh record if its own is retired, split,
 * live.  Returns the record. */
uint32_t hippo__sliced_take(sliced *p, found f, uint64_t u, uint32_t padding);
/* Release live slice i (its figures, its generation moves on, it merges
 * with its free neighbours); returns the size it was reserved with. */
uint64_t hippo__sliced_release_slice(sliced *p, uint32_t i);
/* A HELD or GUARDED slice i becomes free (generation, merge). */
void hippo__sliced_free_slice(sliced *p, uint32_t i);
/* The device address of slice i. */
uint64_t hippo__sliced_addr(const hippo__pool *pool, uint32_t i);

/* ---- pool_sliced_check.c -------------------------------------------------- */

/* The check walk of both kinds (pool.h: check). */
hippo_status hippo__sliced_check(const hippo__pool *pool);

/* ---- the shared operations of the pool table (sliced.c) ----------------- */

void hippo__sliced_release(hippo__pool *pool, uint32_t i, uint64_t size);
void hippo__sliced_hold(hippo__pool *pool, uint32_t i);
void hippo__sliced_unhold(hippo__pool *pool, uint32_t i, bool wait);
void hippo__sliced_waits(hippo__pool *pool, uint32_t i, uint32_t n);
bool hippo__sliced_resolve_named(const hippo__pool *pool, uint32_t i,
                                 uint32_t gen, uint64_t *addr, uint64_t *size);
void hippo__sliced_release_all(hippo__pool *pool);
hippo_status hippo__sliced_cleanup(hippo__pool *pool);
bool hippo__sliced_gives_back(const hippo__pool *pool);
hippo_status hippo__sliced_tick(hippo__pool *pool, uint64_t now);
void hippo__sliced_report(const hippo__pool *pool, hippo_pool_report *out);
void hippo__sliced_destroy(hippo__pool *pool);
void hippo__sliced_settle_op(hippo__pool *pool);
void hippo__sliced_names_take(hippo__pool *pool, hippo__names *out);
void hippo__sliced_names_give(hippo__pool *pool, const hippo__names *in);

/* The operations SLICED and ARENA take from the core as they are; a kind
 * adds its reserve and release_named (sliced_paths.h with its table), an
 * ARENA relocation's. */
#define HIPPO__SLICED_OPS                                                      \
  .release = hippo__sliced_release, .addr = hippo__sliced_addr,               \
  .hold = hippo__sliced_hold, .unhold = hippo__sliced_unhold,                  \
  .waits = hippo__sliced_waits, .cleanup = hippo__sliced_cleanup,              \
  .gives_back = hippo__sliced_gives_back, .tick = hippo__sliced_tick,          \
  .report = hippo__sliced_report, .check = hippo__sliced_check,                \
  .destroy = hippo__sliced_destroy,                                            \
  .resolve_named = hippo__sliced_resolve_named,                                \
  .release_all = hippo__sliced_release_all, .settle = hippo__sliced_settle_op, \
  .names_take = hippo__sliced_names_take,                                      \
  .names_give = hippo__sliced_names_give

/* A pool of the kind (`ops` its table, `k` its hooks), set up alike for
 * every kind: no page, no record yet; NULL (last_error set) without host
 * memory. */
sliced *hippo__sliced_new(hippo__backend *be, hippo__page_acct *acct,
                          const hippo__pool_ops *ops,
                          const hippo__sliced_kind *k, hippo_pool_kind kind,
                          const hippo_pool_options *opt, uint64_t page_size);
/* Frees the pool's records and the pool (its pages went back). */
void hippo__sliced_free(sliced *p);

#endif /* HIPPO_SLICED_H */
