/* pool_pages.h -- page slots: what the EXCLUSIVE and DIRECT pools share.
 *
 * Both pools hold whole backend pages (an EXCLUSIVE page, a DIRECT
 * allocation), one per live reservation, and keep each in a slot of a
 * growable array; the slice id is the slot index.  This module owns that
 * array and everything about it that does not depend on how a pool finds a
 * free page again:
 *  - the slots and the empty-slot list (slots are reused, the array never
 *    shrinks before destroy);
 *  - the FIFO of FREE pages in the order they became free, by the pool's
 *    clock pool->now (pool.h), which tick and DIRECT's reclaim read from
 *    the front; pool->due follows its front;
 *  - reserve/release bookkeeping (state, request, free time, free figures);
 *  - tick (periodic deallocation, asking the pool's free gate before giving
 *    a page back), cleanup, destroy, and the common half of check().
 * Each pool keeps its own index of FREE pages (EXCLUSIVE: one list per size
 * class; DIRECT: a hash map from exact size to a list) threaded through the
 * slots' prev/next links, and hands this module the function that takes a
 * FREE page off that index (`unlink`), called when a page goes back.
 *
 * The reserve/release helpers are static inline; only growing the array,
 * giving pages back and checking are out of line.
 */
#ifndef HIPPO_POOL_PAGES_H
#define HIPPO_POOL_PAGES_H

#include "pool.h"
#include "pool_fifo.h"

#define HIPPO__SLOT_NIL UINT32_MAX
#define HIPPO__SLOT_MAX (UINT32_MAX - 1u) /* slot ids stay below NIL */

enum {
  HIPPO__SLOT_EMPTY = 0,
  HIPPO__SLOT_FREE = 1,
  HIPPO__SLOT_LIVE = 2,
  HIPPO__SLOT_GUARDED = 3
};

/* One slot.
 * Invariant by state:
 *  EMPTY: holds no page (addr == size == requested == 0); on the empty-slot
 *         list through `next`.
 *  FREE:  holds a page of `size` bytes, requested == 0; on exactly one list
 *         of the pool's own index (prev/next) and on the FIFO (fifo), which
 *         it joined at its free time fifo.since <= the clock.
 *  LIVE:  holds a page serving one reservation of `requested` bytes (the
 *         pool states how `size` relates to it); on no list; `holds`
 *         holds (pool.h), waits == 0.
 *  GUARDED: a released page with holds > 0, `waits` <= holds of them
 *         record_use ones: on no list, requested == 0, its bytes counted
 *         in the pool's bytes_guarded while holds > waits (a graph's
 *         remain), else in bytes_waiting. */
typedef struct hippo__page_slot {
  uint64_t addr;      /* device address of the page (0: none) */
  uint64_t size;      /* page bytes, a multiple of the alignment */
  uint64_t requested; /* LIVE: the reservation's size */
  uint32_t state;     /* HIPPO__SLOT_EMPTY, _FREE, _LIVE or _GUARDED */
  uint32_t cls;       /* the pool's own key (EXCLUSIVE: class index) */
  uint32_t prev;      /* FREE: links of the pool's own free list; */
  uint32_t next;      /*  EMPTY: next empty slot */
  hippo__fifo_link fifo; /* FREE: its place on the FIFO */
  uint32_t holds;     /* LIVE, GUARDED: holds (graphs', record_use's) */
  uint32_t waits;     /* GUARDED: the record_use holds among them */
} hippo__page_slot;

/* Invariant: slot[0..nslots) are the slots ever used, cap >= nslots;
 * `empty` chains every EMPTY slot; the FIFO (pool_fifo.h) chains every FREE
 * slot, which joined at a clock <= the pool's; free_count and bytes_free
 * count and sum the FREE pages; the pool's head figures (pool.h) count FREE
 * and LIVE pages, and only LIVE ones as allocations. */
typedef struct hippo__page_slots {
  hippo__page_slot *slot; /* the slots */
  uint32_t nslots;        /* slots in use (any state) */
  uint32_t cap;           /* slots allocated */
  uint32_t empty;         /* first EMPTY slot (NIL: none) */
  hippo__fifo fifo;       /* the FREE pages, in the order they became free */
  uint64_t free_count;    /* FREE pages */
  uint64_t bytes_free;    /* their bytes */
  uint64_t bad_releases;  /* releases of a slice that was not live, or with
                             a size other than the reserved one */
  const char *name;       /* the pool kind, for messages: "EXCLUSIVE"... */
  const char *one;        /* what a slot holds: "page" or "allocation" */
  const char *many;       /*  and its plural */
  /* Take FREE slot i off the pool's own free index (page going back). */
  void (*unlink)(hippo__pool *pool, uint32_t i);
} hippo__page_slots;

/* An empty set of slots; names are static strings. */
void hippo__page_slots_init(hippo__page_slots *s, const char *name,
                            const char *one, const char *many,
                            void (*unlink)(hippo__pool *, uint32_t));

/* Grow the array so one slot can be taken (HIPPO_OUT_OF_MEMORY with
 * last_error: changes nothing). */
hippo_status hippo__page_slots_grow(hippo__page_slots *s);

/* Make sure hippo__page_slots_take will not need to allocate. */
static inline hippo_status hippo__page_slots_make_room(hippo__page_slots *s) {
  if (s->empty != HIPPO__SLOT_NIL || s->nslots < s->cap)
    return HIPPO_SUCCESS;
  return hippo__page_slots_grow(s);
}

/* A slot (after make_room) for a new page of `size` bytes at `addr`, on no
 * list; the caller fills its state with hippo__page_slots_serve. */
static inline uint32_t hippo__page_slots_take(hippo__page_slots *s,
                                              uint64_t addr, uint64_t size) {
  uint32_t i = s->empty;
  hippo__page_slot *sl;
  if (i != HIPPO__SLOT_NIL)
    s->empty = s->slot[i].next;
  else
    i = s->nslots++;
  sl = &s->slot[i];
  sl->addr = addr;
  sl->size = size;
  sl->prev = sl->next = HIPPO__SLOT_NIL;
  sl->fifo.older = sl->fifo.newer = HIPPO__FIFO_NIL;
  return i;
}

/* Slot i joins the FIFO at the pool's clock; pool->due follows its front. */
static inline void hippo__page_slots_fifo_push(hippo__page_slots *s,
                                               hippo__pool *pool, uint32_t i) {
  bool first = s->fifo.front == HIPPO__FIFO_NIL;
  hippo__fifo_push(&s->fifo, s->slot, i, pool->now);
  if (first)
    hippo__pool_due_set(pool, hippo__fifo_due(&s->fifo, s->slot, pool));
}

static inline void hippo__page_slots_fifo_unlink(hippo__page_slots *s,
                                                 hippo__pool *pool,
                                                 uint32_t i) {
  if (hippo__fifo_unlink(&s->fifo, s->slot, i))
    hippo__pool_due_set(pool, hippo__fifo_due(&s->fifo, s->slot, pool));
}

/* FREE slot i, already off the pool's own index, is about to be served
 * again: off the FIFO and out of the free figures. */
static inline void hippo__page_slots_reuse(hippo__page_slots *s,
                                           hippo__pool *pool, uint32_t i) {
  hippo__page_slots_fifo_unlink(s, pool, i);
  s->free_count--;
  s->bytes_free -= s->slot[i].size;
}

/* Slot i (taken or reused) now serves a reservation of `size` bytes. */
static inline void hippo__page_slots_serve(hippo__page_slots *s,
                                           hippo__pool *pool, uint32_t i,
                                           uint64_t size,
                                           hippo__slice_ref *out) {
  hippo__page_slot *sl = &s->slot[i];
  sl->state = HIPPO__SLOT_LIVE;
  sl->requested = size;
  sl->holds = 0;
  sl->waits = 0;
  hippo__pool_note_reserve(pool, size, sl->size);
  out->addr = sl->addr;
  out->slice = i;
}

/* Slot i (a LIVE or GUARDED page) became FREE: back of the FIFO, in the
 * free figures; the caller files it in its own index. */
static inline void hippo__page_slots_freed(hippo__page_slots *s,
                                           hippo__pool *pool, uint32_t i) {
  hippo__page_slot *sl = &s->slot[i];
  sl->state = HIPPO__SLOT_FREE;
  sl->requested = 0;
  hippo__page_slots_fifo_push(s, pool, i);
  s->free_count++;
  s->bytes_free += sl->size;
}

/* The release of `slice`, reserved with `size` bytes: it becomes FREE at
 * the back of the FIFO, and the caller files it in its own index (true);
 * or, held by a graph, GUARDED (false).  false too (counted in
 * bad_releases, nothing else changes) when the slice is not live. */
static inline bool hippo__page_slots_release(hippo__page_slots *s,
                                             hippo__pool *pool,
                                             uint32_t slice, uint64_t size) {
  hippo__page_slot *sl;
  if (slice >= s->nslots || s->slot[slice].state != HIPPO__SLOT_LIVE) {
    s->bad_releases++; /* reported by check() */
    return false;
  }
  sl = &s->slot[slice];
  if (size != sl->requested)
    s->bad_releases++;
  hippo__pool_note_release(pool, sl->requested, sl->size);
  if (HIPPO__UNLIKELY(sl->holds)) {
    sl->state = HIPPO__SLOT_GUARDED;
    sl->requested = 0;
    sl->waits = 0;
    pool->bytes_guarded += sl->size;
    return false;
  }
  hippo__page_slots_freed(s, pool, slice);
  return true;
}

/* Holds (pool.h): a GUARDED slot's holds change by dh, its record_use
 * ones by dw (hippo__pool_holds_change). */
static inline void hippo__page_slots_held(hippo__pool *pool,
                                          hippo__page_slot *sl, int dh,
                                          int dw) {
  hippo__pool_holds_change(pool, sl->size, &sl->holds, &sl->waits, dh, dw);
}
/* hold on a LIVE (or GUARDED) slot; unhold answers true when the slot
 * became FREE (the caller files it); waits after a release. */
static inline void hippo__page_slots_hold(hippo__page_slots *s,
                                          hippo__pool *pool, uint32_t i) {
  hippo__page_slot *sl = &s->slot[i];
  pool->holds++;
  if (sl->state == HIPPO__SLOT_GUARDED)
    hippo__page_slots_held(pool, sl, 1, 0);
  else
    sl->holds++;
}
static inline bool hippo__page_slots_unhold(hippo__page_slots *s,
                                            hippo__pool *pool, uint32_t i,
                                            bool wait) {
  hippo__page_slot *sl = &s->slot[i];
  pool->holds--;
  if (sl->state != HIPPO__SLOT_GUARDED) {
    sl->holds--;
    return false;
  }
  hippo__page_slots_held(pool, sl, -1, wait && sl->waits ? -1 : 0);
  if (sl->holds)
    return false;
  hippo__page_slots_freed(s, pool, i);
  return true;
}
static inline void hippo__page_slots_waits(hippo__page_slots *s,
                                           hippo__pool *pool, uint32_t i,
                                           uint32_t n) {
  hippo__page_slot *sl = &s->slot[i];
  if (sl->state == HIPPO__SLOT_GUARDED)
    hippo__page_slots_held(pool, sl, 0, (int)n - (int)sl->waits);
}

/* Give FREE page i back to the backend and empty its slot (off the pool's
 * index through `unlink`, off the FIFO).  On failure (last_error names the
 * pool) the page stays as it was: accounted, free, at its FIFO place. */
hippo_status hippo__page_slots_drop(hippo__page_slots *s, hippo__pool *pool,
                                    uint32_t i);

/* The pool operations, for the pool's ops table to call (pool.h):
 * cleanup gives back every FREE page, oldest first, and returns the first
 * failure ("... (and N more <one> frees failed)"); tick advances the clock
 * and gives back, oldest first, the FREE pages due after dealloc_period,
 * asking the free gate only when one is due; a page whose free fails goes
 * to the back of the FIFO, due a whole period later, and tick returns the
 * first failure; destroy gives back every page held and frees the array. */
hippo_status hippo__page_slots_cleanup(hippo__page_slots *s,
                                       hippo__pool *pool);
hippo_status hippo__page_slots_tick(hippo__page_slots *s, hippo__pool *pool,
                                    uint64_t now);
void hippo__page_slots_destroy(hippo__page_slots *s, hippo__pool *pool);

/* The checks common to both pools: bad releases, every slot by state (with
 * `held_ok` for the pool's own checks of each FREE or LIVE slot), the head
 * figures, the free figures, the empty-slot list, the FIFO, and the
 * report's bytes_free and largest_free.  HIPPO_INTERNAL with last_error
 * "<name> check: ..." naming the first broken one. */
hippo_status hippo__page_slots_check(
    const hippo__page_slots *s, const hippo__pool *pool,
    hippo_status (*held_ok)(const hippo__pool *pool, uint32_t i));

#endif /* HIPPO_POOL_PAGES_H */
