/* pool_virtual.h -- what the VIRTUAL kind's two files share (pool_virtual.c,
 * pool_virtual_check.c): reading the granules (sliced.h,
 * hippo__vgranules, states their invariant).  The sliced core knows
 * neither file.
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

/* The check walk's part for the granules (the kind's `check` hook). */
hippo_status hippo__virtual_check(const sliced *p);

#endif /* HIPPO_POOL_VIRTUAL_H */
