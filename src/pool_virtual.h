/* pool_virtual.h -- what the VIRTUAL kind's files share (pool_virtual.c,
 * pool_virtual_check.c, pool_virtual_moves.c): reading the granules
 * (sliced.h, hippo__vgranules, states their invariant), giving the idle
 * ones back, the relocation operations.  The sliced core knows none of
 * these files.
 */
#ifndef HIPPO_POOL_VIRTUAL_H
#define HIPPO_POOL_VIRTUAL_H

#include "sliced.h"

/* The physical allocations (sliced.h): a bit per granule where one
 * starts. */
static inline bool is_head(const hippo__vgranules *v, uint64_t g) {
  return v->heads[g >> 6] >> (g & 63) & 1;
}

/* The granules slice s of a VIRTUAL pool touches: [*first, *last]. */
static inline void vgranules_of(const sliced *p, const slice *s,
                                uint64_t *first, uint64_t *last) {
  *first = s->off >> p->vg.ushift;
  *last = ((uint64_t)s->off + s->size - 1) >> p->vg.ushift;
}

/* Every idle allocation goes back, after one wait for the stream's work;
 * the first failure after trying every one (pool_virtual.c). */
hippo_status hippo__virtual_give_back(sliced *p);
/* The kind's relocation operations (pool_virtual_moves.c). */
extern const hippo__pool_move_ops hippo__virtual_move_ops;
/* The check walk's part for the granules (the kind's `check` hook). */
hippo_status hippo__virtual_check(const sliced *p);

#endif /* HIPPO_POOL_VIRTUAL_H */
