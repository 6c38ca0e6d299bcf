/* pool_fifo.h -- periodic deallocation, written once: a FIFO of empty pages
 * in the order they emptied, and the loop that gives pages back from it.
 *
 * SLICED and ARENA pools (sliced.c) keep their empty pages on one such
 * FIFO and their empty outdated pages on a second (the drain list);
 * EXCLUSIVE and DIRECT pools (pool_pages.c) their free pages.  Each record
 * of a pool's array carries a hippo__fifo_link at a fixed offset; the FIFO
 * knows the array's stride and that offset, and the array itself is passed
 * to every call (it moves when it grows).
 *
 * Periodic deallocation (pool.h, tick): a record that joined the FIFO when
 * the stream's reservation clock read t goes back at the first tick with
 * now >= t + dealloc_period.  Records join at the back, so a tick looks at
 * the front only, and pool->due follows the front (hippo__fifo_due).  A
 * record whose free fails moves to the back stamped anew: it is tried
 * again a whole period later and holds back no other record, so a free
 * that keeps failing costs a driver call per period, not per reservation.
 */
#ifndef HIPPO_POOL_FIFO_H
#define HIPPO_POOL_FIFO_H

#include <stddef.h>

#include "pool.h"

#define HIPPO__FIFO_NIL UINT32_MAX

/* A record's place on a FIFO.  `newer` also serves the pool as a free-list
 * link while the record is on no FIFO. */
typedef struct hippo__fifo_link {
  uint64_t since; /* the pool clock when it joined */
  uint32_t older; /* NIL at the front */
  uint32_t newer; /* NIL at the back */
} hippo__fifo_link;

/* Invariant: following `newer` from front reaches back and only records
 * on this FIFO, `older` mirrors it, and `since` does not decrease along
 * it. */
typedef struct hippo__fifo {
  uint32_t front, back;
  uint32_t stride; /* bytes per record of the pool's array */
  uint32_t offset; /* of the hippo__fifo_link in a record */
} hippo__fifo;

static inline void hippo__fifo_init(hippo__fifo *f, size_t stride,
                                    size_t offset) {
  f->front = f->back = HIPPO__FIFO_NIL;
  f->stride = (uint32_t)stride;
  f->offset = (uint32_t)offset;
}

static inline hippo__fifo_link *hippo__fifo_link_of(const hippo__fifo *f,
                                                    const void *base,
                                                    uint32_t i) {
  return (hippo__fifo_link *)((char *)(uintptr_t)base +
                              (size_t)i * f->stride + f->offset);
}

/* Record i joins at the back, at clock `since`. */
static inline void hippo__fifo_push(hippo__fifo *f, void *base, uint32_t i,
                                    uint64_t since) {
  hippo__fifo_link *l = hippo__fifo_link_of(f, base, i);
  l->since = since;
  l->newer = HIPPO__FIFO_NIL;
  l->older = f->back;
  if (f->back != HIPPO__FIFO_NIL)
    hippo__fifo_link_of(f, base, f->back)->newer = i;
  else
    f->front = i;
  f->back = i;
}

/* Record i leaves; true when it was the front (pool->due may change). */
static inline bool hippo__fifo_unlink(hippo__fifo *f, void *base,
                                      uint32_t i) {
  hippo__fifo_link *l = hippo__fifo_link_of(f, base, i);
  bool was_front = l->older == HIPPO__FIFO_NIL;
  if (l->newer != HIPPO__FIFO_NIL)
    hippo__fifo_link_of(f, base, l->newer)->older = l->older;
  else
    f->back = l->older;
  if (!was_front)
    hippo__fifo_link_of(f, base, l->older)->newer = l->newer;
  else
    f->front = l->newer;
  l->older = l->newer = HIPPO__FIFO_NIL;
  return was_front;
}

/* What pool->due is for this FIFO: the end of its front's period. */
static inline uint64_t hippo__fifo_due(const hippo__fifo *f, const void *base,
                                       const hippo__pool *pool) {
  return hippo__pool_due_of(pool, f->front != HIPPO__FIFO_NIL,
                            f->front != HIPPO__FIFO_NIL
                                ? hippo__fifo_link_of(f, base, f->front)->since
                                : 0);
}

/* How a pool gives one record of the FIFO back (ctx: the pool's, passed
 * through). */
typedef struct hippo__fifo_drop {
  /* Give record i back (off the FIFO); on failure, last_error set and the
   * record as it was. */
  hippo_status (*drop)(void *ctx, uint32_t i);
  /* Record i could not go back: where it waits now (at the back stamped
   * with pool->now, or on another list). */
  void (*failed)(void *ctx, uint32_t i);
  const char *what; /* "page", "allocation": "... N more page frees" */
} hippo__fifo_drop;

/* Give back the records of FIFO f (of the array at `base`), oldest first:
 * every one, or (due_only) those whose dealloc_period has passed at
 * pool->now, asking the pool's free gate before each when `ask` (tick; a
 * capture records: stop).  Every record is tried once; the first failure
 * is returned, with last_error "<its message> (and N more <what> frees
 * failed)" when more than one failed. */
hippo_status hippo__fifo_give_back(hippo__fifo *f, void *base,
                                   hippo__pool *pool, bool due_only, bool ask,
                                   const hippo__fifo_drop *how, void *ctx);

/* The checks of the invariant over records 0 .. count-1 of `base`;
 * HIPPO_INTERNAL naming `name` and the first broken link.  on(ctx, i) says
 * whether record i belongs on this FIFO; *n gets its length (at most
 * `limit`). */
hippo_status hippo__fifo_check(const hippo__fifo *f, const void *base,
                               uint32_t count, uint64_t limit,
                               bool (*on)(const void *ctx, uint32_t i),
                               const void *ctx, const char *name,
                               uint64_t *n);

#endif /* HIPPO_POOL_FIFO_H */
