/* pool.h -- the one internal interface every pool kind implements.
 *
 * A pool hands out slices of device memory that it takes from the backend
 * in pages.  Pools know nothing of streams or locks: the stream manager
 * (manager.c, manager_reserve.c) owns a pool, routes a size to it, and
 * holds the stream lock around every call.  The manager's handle table
 * names the slices of most pools; a pool with the *_named operations
 * (SLICED) names its own: each slice id carries a generation, which the
 * handle holds (handles.h).
 *
 * Contract of every pool kind:
 *  - reserve(size) with 0 < size <= pool->max_size: a slice of at least
 *    `size` bytes at an address aligned to pool->alignment, named by a
 *    32-bit slice id the pool chooses.  Fails with
 *    HIPPO_POOL_CAPACITY_EXCEEDED (a cap is reached; the manager spills to
 *    the next accepting pool) or the backend's status (HIPPO_OUT_OF_MEMORY,
 *    ...), having written last_error and changed nothing.
 *  - release(slice, size): the slice is free for the next reserve at once
 *    (stream order).  `size` is the size given to reserve (for the figures).
 *  - addr(slice): the device address of a live slice, now.  A reservation
 *    lives in one place only -- its pool -- so a slice that moves
 *    (relocation) is found at its new address by everyone who asks.
 *  - optional, all three or none: release_named(slice, gen, &size) is
 *    release for a slice that is live with generation `gen` (what reserve
 *    gave in out->gen), handing back the size given to reserve; for any
 *    other (slice, gen) it returns false and changes nothing.
 *    resolve_named(slice, gen, &addr, &size) looks one up the same way.
 *    release_all() releases every live slice (stream_detach).
 *  - optional: settle().  A pool may finish a release_named late: the
 *    slice leaves use and the figures at once, but merging it with its
 *    free neighbours waits for the pool's next call (any entry of its
 *    table finishes it first), so the cache misses of that merge overlap
 *    the caller's next work instead of stalling the release.  Such a pool
 *    names itself in gate->unsettled while a release waits, and settle()
 *    finishes it (and clears the name); the manager calls it where it
 *    reads what the merge may change without calling the pool (a page
 *    that empties moves pool->due).
 *  - optional, with the *_named ones: names_take(&names) hands over the
 *    records that carry the pool's generations (the pool holds no page:
 *    it is being replaced by pools_install) and names_give(&names) makes
 *    a fresh pool adopt them, so the records it serves go on from the
 *    generations the old pool reached and no handle the old pool gave
 *    ever names a reservation of the new one.
 *  - cleanup(): every page with no live slice goes back to the backend.  A
 *    page whose free fails is kept (and stays accounted); the first failure
 *    is returned after trying every page.
 *  - tick(now): periodic deallocation.  `now` counts the stream's
 *    reservations; a page that has been empty since `now - dealloc_period`
 *    or earlier goes back.  Amortized O(1).  A pool stamps a page that
 *    becomes empty with pool->now and keeps pool->due (the clock at which
 *    tick next has work), so the manager calls tick only when it is due.
 *  - report(): the figures of hippo_pool_report.
 *  - hold(slice): a graph (graph guards, guard.h) or another stream's
 *    work (record_use) may use live slice `slice`: while it holds any hold
 *    the slice never moves, and once released it stays out of use (not
 *    free, its page never empties) instead of becoming free.
 *    unhold(slice, wait) drops one hold (wait: a record_use one); a
 *    released slice whose last hold goes becomes free.  Several holds
 *    count.  A slice with holds is released as usual: its bytes leave
 *    bytes_in_use and enter bytes_guarded; waits(slice, n), right after
 *    the release, says n of its holds are record_use ones, and a released
 *    slice whose every hold is one counts in bytes_waiting instead (the
 *    bytes move between the two as holds go).
 *  - optional: move (pools relocation acts on: ARENA moves slices off
 *    outdated pages; VIRTUAL moves none and gives back its idle granules),
 *    the operations relocation drives, in their own table
 *    (pool_relocation.h).
 *  - check(): walks every page and slice and verifies the invariants written
 *    in the pool's file; HIPPO_INTERNAL with last_error naming the first
 *    broken one.  For tests; O(pages + slices).
 *  - destroy(): frees every page, live or not, and the pool itself.
 *
 * Figures kept in the common head (exact at every moment):
 *   bytes_reserved = sum of the sizes of the pages held,
 *   bytes_in_use   = sum of the requested sizes of the live slices,
 *   bytes_padding  = sum over live slices of (slice size - requested size).
 */
#ifndef HIPPO_POOL_H
#define HIPPO_POOL_H

#include <stdint.h>

#include "backend.h"
#include "core.h"
#include "pool_relocation.h"

typedef struct hippo__pool hippo__pool;

/* What reserve hands back. */
typedef struct hippo__slice_ref {
  uint64_t addr;  /* device address of the slice */
  uint32_t slice; /* the pool's id for it, given back to release */
  uint32_t gen;   /* pools with release_named: the slice's generation,
                     never 0; other pools leave it as the caller set it
                     (0: the manager's sign that a table handle is due) */
} hippo__slice_ref;

/* The generation history of a pool that names its reservations: its
 * record array, all records unused or retired.  records == NULL: none. */
typedef struct hippo__names {
  void *records;
  uint32_t count, cap, unused, retired, first_gen;
} hippo__names;

typedef struct hippo__pool_ops {
  hippo_status (*reserve)(hippo__pool *pool, uint64_t size,
                          hippo__slice_ref *out);
  void (*release)(hippo__pool *pool, uint32_t slice, uint64_t size);
  uint64_t (*addr)(const hippo__pool *pool, uint32_t slice);
  hippo_status (*cleanup)(hippo__pool *pool);
  /* Whether cleanup would give a page back (an empty page waits): O(1),
   * so a failing reservation skips a cleanup that frees nothing. */
  bool (*gives_back)(const hippo__pool *pool);
  hippo_status (*tick)(hippo__pool *pool, uint64_t now);
  void (*report)(const hippo__pool *pool, hippo_pool_report *out);
  hippo_status (*check)(const hippo__pool *pool);
  void (*destroy)(hippo__pool *pool);
  /* Holds (graphs, guard.h; record_use): every kind has them. */
  void (*hold)(hippo__pool *pool, uint32_t slice);
  void (*unhold)(hippo__pool *pool, uint32_t slice, bool wait);
  void (*waits)(hippo__pool *pool, uint32_t slice, uint32_t n);
  /* Optional: pools that name their reservations (SLICED, ARENA). */
  bool (*release_named)(hippo__pool *pool, uint32_t slice, uint32_t gen,
                        uint64_t *size);
  bool (*resolve_named)(const hippo__pool *pool, uint32_t slice, uint32_t gen,
                        uint64_t *addr, uint64_t *size);
  void (*release_all)(hippo__pool *pool);
  void (*settle)(hippo__pool *pool);
  void (*names_take)(hippo__pool *pool, hippo__names *out);
  void (*names_give)(hippo__pool *pool, const hippo__names *in);
  /* A pool relocation acts on (ARENA, VIRTUAL): what relocation asks of
   * it (pool_relocation.h); NULL: relocation leaves it alone. */
  const struct hippo__pool_move_ops *move;
} hippo__pool_ops;

/* Page-level figures: a stream's pools share the stream's, whose parent is
 * the device's.  Updated only when a page is taken or given back (never on
 * the reserve/release fast path), atomically, so the device's figures need
 * no stream lock.  Invariant: bytes_reserved <= peak_bytes_reserved; each
 * figure equals the sum over the pools that account into it. */
typedef struct hippo__page_acct {
  _Atomic uint64_t bytes_reserved;
  _Atomic uint64_t peak_bytes_reserved;
  _Atomic uint64_t pages;
  struct hippo__page_acct *parent; /* the device's, or NULL */
  /* The size of the last page the backend refused for want of memory
   * (stream accounts, under the stream's lock; 0 once the manager read
   * it): whether a retry could succeed. */
  uint64_t refused;
} hippo__page_acct;

/* Pages a stream's pools gave up whose backend free is still to be made
 * (pool.c, hippo__pool_page_free while `defer` is set): the stream frees
 * them once its lock is dropped, so no thread waits on its lock while the
 * driver frees (hipFree may synchronize the device).  Such a page is still
 * counted in the stream's and the device's figures until its free
 * succeeds; a page whose free failed stays, tried again by the stream's
 * next cleanup.
 * Invariant: the stream's page figures == its pools' + these pages. */
enum { HIPPO__LEAVING_PENDING = 0, HIPPO__LEAVING_FREEING = 1,
       HIPPO__LEAVING_FAILED = 2 };
typedef struct hippo__leaving_page {
  uint64_t addr, size;
  uint64_t retry_at; /* FAILED: the stream's clock for the next try */
  uint32_t state;    /* HIPPO__LEAVING_* */
  uint32_t pad;
} hippo__leaving_page;
typedef struct hippo__leaving {
  hippo__leaving_page *pages;
  uint32_t count, cap;
  uint32_t pending;  /* in state PENDING */
} hippo__leaving;

/* Whether pages may be given back now: no stream of the device captures a
 * graph.  A stream's manager resets `answer` before each reservation's
 * ticks; a pool asks (hippo__pool_may_free) only right before it would
 * give a page back in tick, so the question -- a driver call on HIP -- is
 * asked only when a page is due, at most once per reservation. */
typedef struct hippo__free_gate {
  hippo_status (*ask)(void *ctx, bool *may_free);
  void *ctx;
  int answer; /* -1: not asked since the reset; 0: no; 1: yes */
  /* Set by the manager while its stream captures: no pool may take a
   * page (a driver allocation inside a capture is illegal), so
   * hippo__pool_page_alloc answers HIPPO_GRAPH_NEEDS_PAGE. */
  bool no_pages;
  /* Set by the manager around work under its lock whose page frees it
   * makes after the lock (hippo__leaving). */
  bool defer;
  hippo__leaving *leaving;
  /* The stream's native, which a pool waits for before it gives back
   * what the stream's work used (hippo__pool_stream_wait), while
   * own_waits: false once the stream is detached (its native may be
   * gone), when the device's work is waited for instead. */
  void *native;
  bool own_waits;
  /* The stream's reservation clock (which the pools' `now` follows only
   * at releases and ticks): read when a pool's wait ends, so what went
   * idle before the wait is known (pool_virtual.c); NULL: none. */
  const uint64_t *clock;
  /* The pool of the stream whose release waits to be finished (settle),
   * or NULL; at most one: a pool that leaves a release waiting settles
   * the one named here first. */
  hippo__pool *unsettled;
  /* A lower bound on the due of every pool of the stream that ticks
   * (hippo__pool_due_set lowers it with a pool's due; the manager sets it
   * to their minimum when it looks at them): a reservation reads this one
   * word, not each pool, to know no tick is due. */
  uint64_t due_min;
} hippo__free_gate;

/* The common head of every pool.
 * Invariant: allocations == number of live slices; the figures above hold;
 * pages <= peak_pages; bytes_reserved == bytes_in_use + bytes_padding +
 * bytes_stranded + bytes_guarded + bytes_waiting + the free bytes
 * (hippo__pool_bytes_free). */
struct hippo__pool {
  const hippo__pool_ops *ops;
  hippo__backend *be;
  hippo__page_acct *acct;   /* the stream's page figures (may be NULL) */
  hippo__free_gate *gate;   /* asked before tick frees (NULL: always may) */
  hippo_pool_kind kind;
  hippo_pool_options opt;   /* options in force (page shrunk to a cap...) */
  uint64_t max_size;        /* largest request the pool accepts */
  uint64_t alignment;       /* slice alignment (the backend's) */
  unsigned align_shift;     /* log2(alignment) */
  /* periodic deallocation */
  uint64_t now;             /* the stream's reservation clock: set by tick,
                               and by the manager before each release */
  uint64_t due;             /* clock at which the oldest empty page's period
                               ends (UINT64_MAX: none, or no period): the
                               manager calls tick only once now >= due */
  /* figures */
  uint64_t pages;
  uint64_t peak_pages;
  uint64_t allocations;
  uint64_t bytes_in_use;
  uint64_t bytes_padding;
  uint64_t bytes_reserved;
  uint64_t largest_allocation;
  uint64_t bytes_stranded;  /* relocation destinations kept out of use */
  uint64_t bytes_guarded;   /* released slices a graph holds (guard.h) */
  uint64_t bytes_waiting;   /* released slices only record_use holds */
  uint64_t holds;           /* holds on slices, live or released */
  uint64_t peak_bytes_reserved;
  uint64_t bytes_idle;      /* VIRTUAL: mapped bytes no live slice touches */
  uint64_t bytes_virtual;   /* VIRTUAL: its range's bytes (no memory) */
  /* relocation's stall memo: the shape when a relocation last moved
   * nothing (valid while stalled) */
  hippo__reloc_shape stall;
  bool stalled;
};

/* Constructors: `opt` has been validated (layout.c).  HIPPO_OUT_OF_MEMORY
 * (host memory) with last_error on failure. */
hippo_status hippo__pool_sliced_create(hippo__backend *be,
                                       hippo__page_acct *acct,
                                       const hippo_pool_options *opt,
                                       hippo__pool **out);
hippo_status hippo__pool_exclusive_create(hippo__backend *be,
                                          hippo__page_acct *acct,
                                          const hippo_pool_options *opt,
                                          hippo__pool **out);
hippo_status hippo__pool_arena_create(hippo__backend *be,
                                      hippo__page_acct *acct,
                                      const hippo_pool_options *opt,
                                      hippo__pool **out);
hippo_status hippo__pool_direct_create(hippo__backend *be,
                                       hippo__page_acct *acct,
                                       const hippo_pool_options *opt,
                                       hippo__pool **out);
/* opt: resolved by layout.c (range_size, granule and unmap_threshold
 * set). */
hippo_status hippo__pool_virtual_create(hippo__backend *be,
                                        hippo__page_acct *acct,
                                        const hippo_pool_options *opt,
                                        hippo__pool **out);
/* The most granules a VIRTUAL pool's range is cut into (4 bytes of host
 * memory each). */
#define HIPPO__VIRTUAL_MAX_GRANULES (UINT64_C(1) << 22)
/* A VIRTUAL pool's default unmap threshold (unmap_threshold 0): never --
 * idle granules are the cache, and the map budget gives them back. */
#define HIPPO__VIRTUAL_DEFAULT_THRESHOLD UINT64_MAX
/* A VIRTUAL pool's default map budget (map_budget 0): mapped bytes up to
 * 1.5 % above the running peak of its live bytes, and its floor in
 * granules (docs/decisions.md has the sweep behind both). */
#define HIPPO__VIRTUAL_DEFAULT_BUDGET UINT64_C(150)
#define HIPPO__VIRTUAL_BUDGET_FLOOR UINT64_C(8)
hippo_status hippo__pool_persistent_create(hippo__backend *be,
                                           hippo__page_acct *acct,
                                           hippo__pool **out);
/* For tests: a SLICED pool keeps at most `n` slice records (at most, and by
 * default, the 2^26 a handle's index names); beyond, a reservation that
 * needs one fails with HIPPO_POOL_CAPACITY_EXCEEDED. */
void hippo__pool_sliced_limit_records(hippo__pool *pool, uint32_t n);
/* For tests: a SLICED or ARENA pool is crowded (its free index takes the
 * branches that suit long free lists, sliced_index.h) once its record array
 * holds more than `n` records (default 65536); 0: from the start.  Returns
 * whether it is crowded now. */
bool hippo__pool_sliced_crowd_at(hippo__pool *pool, uint32_t n);

/* Helpers for pool files (pool_common in layout.c). */
/* Initialize the common head. */
void hippo__pool_head_init(hippo__pool *pool, const hippo__pool_ops *ops,
                           hippo__backend *be, hippo__page_acct *acct,
                           hippo_pool_kind kind,
                           const hippo_pool_options *opt, uint64_t max_size);
/* Take a page of `size` bytes from the backend and account it (pool and
 * device figures); on failure nothing changes. */
hippo_status hippo__pool_page_alloc(hippo__pool *pool, uint64_t size,
                                    uint64_t *addr);
/* VIRTUAL: reserve a range of `size` bytes of address space, aligned to
 * `granule` (backend.h vm_reserve), at *addr; refused with
 * HIPPO_GRAPH_NEEDS_PAGE while the stream captures (the gate), as a page
 * is.  Nothing is accounted here: the pool counts its range. */
hippo_status hippo__pool_vm_reserve(hippo__pool *pool, uint64_t size,
                                    uint64_t granule, uint64_t *addr);
/* VIRTUAL: back [addr, addr + size) of a reserved range with physical
 * allocations of `alloc` bytes (backend.h vm_map) and account them as
 * pages, one per `unit` bytes (the pool's granule); refused with
 * HIPPO_GRAPH_NEEDS_PAGE while the stream captures (the gate), as a page
 * is.  On failure nothing changes. */
hippo_status hippo__pool_vm_map(hippo__pool *pool, uint64_t addr,
                                uint64_t size, uint64_t alloc, uint64_t unit);
/* VIRTUAL: give the allocations of `alloc` bytes of [addr, addr + size)
 * back (vm_unmap; `wait`: the device's work first) and unaccount the
 * *done bytes that went (all of them on success), a page per `unit`. */
hippo_status hippo__pool_vm_unmap(hippo__pool *pool, uint64_t addr,
                                  uint64_t size, uint64_t alloc,
                                  uint64_t unit, bool wait, uint64_t *done);
/* Give a page back and unaccount it; on failure it stays accounted.
 * While the gate defers, the page leaves the pool at once and joins the
 * stream's leaving pages (its free comes later); a page that finds no room
 * there is freed now. */
hippo_status hippo__pool_page_free(hippo__pool *pool, uint64_t addr,
                                   uint64_t size);
/* A leaving page's free succeeded: out of the stream's (and the device's)
 * figures. */
void hippo__pool_unaccount(hippo__page_acct *acct, uint64_t size);
/* Account a served request of `size` in a slice of `slice_size` bytes, and
 * its release. */
static inline void hippo__pool_note_reserve(hippo__pool *pool, uint64_t size,
                                            uint64_t slice_size) {
  pool->allocations++;
  pool->bytes_in_use += size;
  pool->bytes_padding += slice_size - size;
  if (size > pool->largest_allocation)
    pool->largest_allocation = size;
}
static inline void hippo__pool_note_release(hippo__pool *pool, uint64_t size,
                                            uint64_t slice_size) {
  pool->allocations--;
  pool->bytes_in_use -= size;
  pool->bytes_padding -= slice_size - size;
}
/* The reserved bytes free for a reservation (the head's invariant). */
static inline uint64_t hippo__pool_bytes_free(const hippo__pool *pool) {
  return pool->bytes_reserved - pool->bytes_in_use - pool->bytes_padding -
         pool->bytes_stranded - pool->bytes_guarded - pool->bytes_waiting;
}
/* Which figure a released slice with `holds` holds, `waits` of them
 * record_use ones, counts in (pool.h: hold). */
static inline uint64_t *hippo__pool_held_figure(hippo__pool *pool,
                                                uint32_t holds,
                                                uint32_t waits) {
  return holds > waits ? &pool->bytes_guarded : &pool->bytes_waiting;
}
/* A released slice of `bytes` whose counts are *holds and *waits: they
 * change by dh and dw, and its bytes move into the figure they count in
 * now (none once the last hold went).  Every kind's GUARDED records use
 * it (sliced.h's slice, pool_pages.h's page slot). */
static inline void hippo__pool_holds_change(hippo__pool *pool, uint64_t bytes,
                                            uint32_t *holds, uint32_t *waits,
                                            int dh, int dw) {
  *hippo__pool_held_figure(pool, *holds, *waits) -= bytes;
  *holds += (uint32_t)dh;
  *waits += (uint32_t)dw;
  if (*holds)
    *hippo__pool_held_figure(pool, *holds, *waits) += bytes;
}
/* What pool->due should be: `any` says whether an empty page waits,
 * `since` is when the oldest became empty.  Check walks compare with it. */
static inline uint64_t hippo__pool_due_of(const hippo__pool *pool, bool any,
                                          uint64_t since) {
  uint64_t period = pool->opt.dealloc_period;
  if (!any || !period)
    return UINT64_MAX;
  return since > UINT64_MAX - period ? UINT64_MAX : since + period;
}
/* pool->due becomes `due`, and the stream's bound follows a lowering
 * (hippo__free_gate.due_min).  Every write of due goes through here. */
static inline void hippo__pool_due_set(hippo__pool *pool, uint64_t due) {
  pool->due = due;
  if (pool->gate && due < pool->gate->due_min)
    pool->gate->due_min = due;
}
/* Whether pages may be given back now (see hippo__free_gate). */
static inline bool hippo__gate_allows(hippo__free_gate *g) {
  if (!g)
    return true;
  if (g->answer < 0) {
    bool ok = false;
    g->answer = g->ask(g->ctx, &ok) == HIPPO_SUCCESS && ok;
  }
  return g->answer != 0;
}
static inline bool hippo__pool_may_free(hippo__pool *pool) {
  return hippo__gate_allows(pool->gate);
}
/* Waits for the work queued so far on the pool's own stream (its gate's
 * native): a stream-ordered wait before giving back memory that only the
 * stream's work can still use.  False when it cannot (no gate, a
 * detached stream, or the wait failed: last_error says why): the caller
 * then waits for the whole device instead. */
bool hippo__pool_stream_wait(hippo__pool *pool);
/* Fill the common part of a report (kind, options, figures). */
void hippo__pool_report_head(const hippo__pool *pool, hippo_pool_report *out);

#endif /* HIPPO_POOL_H */
