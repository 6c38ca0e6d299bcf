/* pool_arena.h -- what the ARENA kind's two files share (pool_arena.c,
 * pool_arena_relocation.c); the sliced core (sliced.h) knows neither.
 */
#ifndef HIPPO_POOL_ARENA_H
#define HIPPO_POOL_ARENA_H

#include "sliced.h"

/* An ARENA's relocation operations (pool_relocation.h), in its table. */
extern const hippo__pool_move_ops hippo__arena_move_ops;

#endif /* HIPPO_POOL_ARENA_H */
