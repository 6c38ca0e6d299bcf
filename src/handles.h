/* handles.h -- handles, and the generation-tagged handle table of one
 * stream manager.
 *
 * A handle is 64 bits:  [ tag:12 | pool:6 | generation:20 | index:26 ]
 *   tag         the owning stream's tag, unique among the live streams of
 *               the process, so a handle of another stream or device is
 *               foreign (tags 1..4095: at most 4095 live streams,
 *               HIPPO_BUSY beyond);
 *   pool        who names the reservation: HIPPO__HANDLE_TABLE, this
 *               stream's handle table (below); or the index of a pool that
 *               names its own reservations (a SLICED pool: its slice
 *               records carry the generation, so releasing a slice touches
 *               no table -- one random cache line less per release with
 *               100,000s of live slices);
 *   generation  the record's generation when the handle was made; it moves
 *               on when the record is freed, so a handle kept after its
 *               release is stale; never 0, so no handle is 0.  A record
 *               whose generation would come back to its first is retired
 *               (never reused), so no stale handle ever names a live
 *               reservation of the same table or pool again; a pool that
 *               pools_install puts in another's place adopts its records
 *               and their generations (pool.h, names_take/names_give).
 *               First generations differ between tables (a process-wide
 *               counter), so a handle of a detached stream whose tag was
 *               given out again names a live reservation of the new
 *               stream only by about a 1 in 2^20 chance per use;
 *   index       the slot in the table, or the pool's record.
 * Lookup is O(1): split, bound-check the index, compare generation and tag.
 * The table never shrinks while the stream lives; freed slots are reused
 * LIFO through a free list.
 */
#ifndef HIPPO_HANDLES_H
#define HIPPO_HANDLES_H

#include <stdint.h>

#include "core.h"

#define HIPPO__HANDLE_INDEX_BITS 26u
#define HIPPO__HANDLE_GEN_BITS 20u
#define HIPPO__HANDLE_POOL_BITS 6u
#define HIPPO__HANDLE_TAG_BITS 12u
#define HIPPO__HANDLE_GEN_SHIFT HIPPO__HANDLE_INDEX_BITS
#define HIPPO__HANDLE_POOL_SHIFT (HIPPO__HANDLE_GEN_SHIFT + HIPPO__HANDLE_GEN_BITS)
#define HIPPO__HANDLE_TAG_SHIFT (HIPPO__HANDLE_POOL_SHIFT + HIPPO__HANDLE_POOL_BITS)
#define HIPPO__HANDLE_MAX_SLOTS (UINT32_C(1) << HIPPO__HANDLE_INDEX_BITS)
#define HIPPO__HANDLE_GEN_MASK ((UINT32_C(1) << HIPPO__HANDLE_GEN_BITS) - 1)
#define HIPPO__HANDLE_TABLE ((1u << HIPPO__HANDLE_POOL_BITS) - 1u)
#define HIPPO__POOL_NONE UINT16_MAX /* a zero-size reservation: no pool */

_Static_assert(HIPPO__HANDLE_TAG_SHIFT + HIPPO__HANDLE_TAG_BITS == 64,
               "a handle is 64 bits");

/* The parts of a handle. */
typedef struct hippo__handle_parts {
  uint32_t index, gen, pool, tag;
} hippo__handle_parts;

static inline hippo_handle hippo__handle_make(uint32_t tag, uint32_t pool,
                                              uint32_t gen, uint32_t index) {
  return ((uint64_t)tag << HIPPO__HANDLE_TAG_SHIFT) |
         ((uint64_t)pool << HIPPO__HANDLE_POOL_SHIFT) |
         ((uint64_t)gen << HIPPO__HANDLE_GEN_SHIFT) | index;
}
static inline hippo__handle_parts hippo__handle_split(hippo_handle h) {
  hippo__handle_parts p;
  p.index = (uint32_t)(h & (HIPPO__HANDLE_MAX_SLOTS - 1));
  p.gen = (uint32_t)(h >> HIPPO__HANDLE_GEN_SHIFT) & HIPPO__HANDLE_GEN_MASK;
  p.pool = (uint32_t)(h >> HIPPO__HANDLE_POOL_SHIFT) &
           ((1u << HIPPO__HANDLE_POOL_BITS) - 1);
  p.tag = (uint32_t)(h >> HIPPO__HANDLE_TAG_SHIFT);
  return p;
}

/* Generations, for the table and for pools that name their reservations:
 * a fresh record starts at hippo__gen_first() (spread over 1 .. 2^20-1 by
 * a process-wide counter); hippo__gen_next gives the generation after
 * `gen`, skipping 0, or 0 when it would come back to `first`: the record
 * has handed out every generation and must retire. */
uint32_t hippo__gen_first(void);
static inline uint32_t hippo__gen_next(uint32_t gen, uint32_t first) {
  gen = (gen + 1) & HIPPO__HANDLE_GEN_MASK;
  if (gen == 0)
    gen = 1;
  return gen == first ? 0 : gen;
}

/* One slot.  Invariant: live slots have pool set and gen != 0; a free slot
 * is on the free list (next_free) and its gen is the one the next handle of
 * this slot will carry.  A slot keeps no address: the pool knows where the
 * slice lives (pool.h, addr), so a slice that moves needs no slot fixed. */
typedef struct hippo__slot {
  uint64_t size;      /* requested bytes */
  uint32_t slice;     /* the pool's slice id */
  uint16_t pool;      /* pool index in the manager, or HIPPO__POOL_NONE */
  uint8_t live;       /* 1 while reserved */
  uint8_t flags;      /* reserved for guards */
  uint32_t gen;       /* generation, 1 .. 2^20-1 */
  uint32_t next_free; /* next free slot index (UINT32_MAX ends the list;
                         UINT32_MAX - 1 marks a retired slot) */
} hippo__slot;
_Static_assert(sizeof(hippo__slot) == 24, "a slot is 24 bytes");

/* Invariant: live + length of free list + retired == count <= cap;
 * slots[0 .. count) are initialized. */
typedef struct hippo__handles {
  hippo__slot *slots;
  uint32_t count;     /* slots handed out at least once */
  uint32_t cap;       /* slots allocated */
  uint32_t free_head; /* first free slot, UINT32_MAX when none */
  uint32_t tag;       /* this table's tag */
  uint32_t first_gen; /* generation a fresh slot starts at */
  uint64_t live;      /* live handles */
  uint64_t retired;   /* slots retired at the end of their generations */
} hippo__handles;

hippo_status hippo__handles_init(hippo__handles *h);
void hippo__handles_fini(hippo__handles *h);
/* A fresh slot; *handle gets its handle.  HIPPO_OUT_OF_MEMORY when the
 * table cannot grow. */
hippo_status hippo__handles_alloc(hippo__handles *h, hippo_handle *handle,
                                  hippo__slot **slot);
/* The live slot of `handle`, or NULL (0, stale, forged, foreign). */
static inline hippo__slot *hippo__handles_get(hippo__handles *h,
                                              hippo_handle handle) {
  hippo__handle_parts p = hippo__handle_split(handle);
  hippo__slot *s;
  if (HIPPO__UNLIKELY(p.index >= h->count || p.tag != h->tag ||
                      p.pool != HIPPO__HANDLE_TABLE))
    return NULL;
  s = &h->slots[p.index];
  if (HIPPO__UNLIKELY(!s->live || s->gen != p.gen))
    return NULL;
  return s;
}
/* Free a live slot: its generation moves on, its old handle goes stale. */
void hippo__handles_free(hippo__handles *h, hippo__slot *slot);
/* Make sure the next hippo__handles_alloc cannot fail (grow now if need
 * be), so a reservation never has to be undone for want of a handle. */
hippo_status hippo__handles_grow(hippo__handles *h);
/* Whether a slot is free without growing. */
static inline bool hippo__handles_room(const hippo__handles *h) {
  return h->free_head != UINT32_MAX || h->count < h->cap;
}
static inline hippo_status hippo__handles_make_room(hippo__handles *h) {
  if (HIPPO__LIKELY(hippo__handles_room(h)))
    return HIPPO_SUCCESS;
  return hippo__handles_grow(h);
}
/* Verify the invariant; HIPPO_INTERNAL with last_error when broken. */
hippo_status hippo__handles_check(const hippo__handles *h);

#endif /* HIPPO_HANDLES_H */
