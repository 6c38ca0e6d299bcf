/* pool_relocation.h -- what relocation (relocation.h, above the stream
 * managers) asks of a pool whose slices can move, and the records it
 * keeps about them.  A pool kind whose slices move (ARENA:
 * pool_arena_relocation.c) gives its pool_ops a `move` table:
 *  - shape(&shape) says what relocation may find (O(1));
 *  - plan(reason, plan) picks the pages to empty for `reason` and
 *    reserves, all or nothing per page, a destination for each of their
 *    live slices on pages that serve reservations (adding pages of the
 *    current size only where the reason allows it);
 *  - commit(plan), once the copies landed, makes each moved slice's record
 *    describe its destination (its handle now resolves there) and frees
 *    the sources;
 *  - abort(plan, strand) frees the destinations -- or, with strand (a wait
 *    for the copies failed, so they may still write), keeps them out of
 *    use as stranded bytes -- and leaves every source as it was;
 *  - unstrand() frees stranded destinations once a later wait on the
 *    stream succeeded;
 *  - drain(&pages, &bytes) gives back the empty pages that serve nothing
 *    (outdated, or emptied by a commit), adding to *pages and *bytes; the
 *    first failure is returned after trying every one (a page that cannot
 *    go back waits a period).
 */
#ifndef HIPPO_POOL_RELOCATION_H
#define HIPPO_POOL_RELOCATION_H

#include "core.h"

typedef struct hippo__pool hippo__pool;

/* One planned move: the live slice `slice` (its handle's record) to the
 * destination record `target`, reserved on a page that serves
 * reservations.  src, dst: device addresses; bytes: the slice's size. */
typedef struct hippo__move {
  uint64_t src, dst, bytes;
  uint32_t slice, target;
} hippo__move;

/* A relocation plan of one pool (relocation.c owns the array).
 * Invariant: moves[0 .. count) reserve distinct destinations; pages_planned
 * pages will be empty once they are committed. */
typedef struct hippo__reloc_plan {
  hippo__move *moves;
  uint32_t count, cap;
  uint64_t bytes;            /* sum of moves[].bytes */
  uint64_t pages_planned;    /* source pages every slice of which moves */
  uint64_t pages_no_room;    /* pages left whole: no room for a slice */
  uint64_t pages_guarded;    /* pages left whole: guarded */
  uint64_t pages_added;      /* destination pages taken */
  hippo_status page_status;  /* a destination page refused: its status */
} hippo__reloc_plan;

/* The failures of a relocation (relocation.c), in the order they
 * happened.  Invariant: v[0 .. count) are kept; the report's failure_count
 * is at least count (a failure that found no host memory is counted, not
 * kept). */
typedef struct hippo__failures {
  hippo_relocation_failure *v;
  uint32_t count, cap;
} hippo__failures;

/* What relocation can see of a pool, in O(1).  Two shapes compare equal
 * when nothing relocation looks at has changed (the stall memo). */
typedef struct hippo__reloc_shape {
  uint64_t current_pages;   /* pages of the current size that serve */
  uint64_t outdated_pages;  /* pages that serve nothing new */
  uint64_t outdated_live;   /* of them, pages holding a live slice */
  uint64_t page_sizes;      /* page sizes alive */
  uint64_t guarded_pages;   /* graph holds on the pool's slices */
  uint64_t page_size;       /* the current page size */
  uint32_t sizes_full;      /* every page size slot is taken */
  uint32_t sparse;          /* a page was taken while the pool was sparse */
  uint64_t idle_bytes;      /* VIRTUAL: mapped bytes no live slice touches */
  uint32_t unmap;           /* VIRTUAL: idle_bytes reached the threshold */
  uint32_t pad;
} hippo__reloc_shape;

typedef struct hippo__pool_move_ops {
  void (*shape)(const hippo__pool *pool, hippo__reloc_shape *out);
  hippo_status (*plan)(hippo__pool *pool, hippo_relocate_reason reason,
                       hippo__reloc_plan *plan);
  void (*commit)(hippo__pool *pool, hippo__reloc_plan *plan);
  void (*abort)(hippo__pool *pool, hippo__reloc_plan *plan, bool strand);
  void (*unstrand)(hippo__pool *pool);
  hippo_status (*drain)(hippo__pool *pool, uint64_t *pages, uint64_t *bytes);
} hippo__pool_move_ops;

#endif /* HIPPO_POOL_RELOCATION_H */
