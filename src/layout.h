/* layout.h -- pool layouts: the presets and the validation of custom ones
 * (layout.c).
 *
 * A resolved layout is what every stream of a device builds its dynamic
 * pools from: the pools in routing order, every field validated against the
 * device's alignment and memory.
 */
#ifndef HIPPO_LAYOUT_H
#define HIPPO_LAYOUT_H

#include "backend.h"
#include "core.h"
#include "pool.h"

#define HIPPO__MAX_POOLS 32u               /* pools in a layout */
#define HIPPO__MAX_PAGES (UINT64_C(1) << 22) /* pages one pool may need */
#define HIPPO__DEFAULT_DEALLOC_PERIOD 10000u /* reservations (presets) */

/* A resolved layout: the pools in routing order, all fields validated.
 * Invariant: 1 <= count <= HIPPO__MAX_POOLS; pools[0 .. count) passed
 * validation (layout.c). */
typedef struct hippo__layout {
  hippo_preset preset;
  uint32_t count;
  hippo_pool_options pools[HIPPO__MAX_POOLS];
  const char *note; /* why the layout is not the one asked for (NULL) */
} hippo__layout;

/* VIRTUAL pools: the smallest granule hippo takes by default (the
 * driver's granularity where larger). */
#define HIPPO__VIRTUAL_MIN_GRANULE (UINT64_C(2) << 20)

/* Validate `in` (already size-checked; NULL: the default preset) against
 * the backend's alignment and memory, and resolve presets into pools.
 * HIPPO_POOL_CONFIG with last_error naming the pool index, the field and
 * why. */
hippo_status hippo__layout_resolve(const hippo_layout *in,
                                   const hippo_pool_options *pools_in,
                                   const hippo__backend *be,
                                   hippo__layout *out);
/* The preset for a device of `total` bytes and `alignment`. */
void hippo__layout_preset(hippo_preset preset, uint64_t total,
                          uint64_t alignment, hippo__layout *out);
/* The pool of one validated layout entry: the kind's constructor
 * (pool.h), for the stream whose page figures are `acct`. */
hippo_status hippo__pool_create(hippo__backend *be, hippo__page_acct *acct,
                                const hippo_pool_options *opt,
                                hippo__pool **out);
/* The name of a pool kind ("SLICED", ...), for messages. */
const char *hippo__pool_kind_name(hippo_pool_kind kind);

#endif /* HIPPO_LAYOUT_H */
