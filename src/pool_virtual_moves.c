/* pool_virtual_moves.c -- a VIRTUAL pool's part in relocation
 * (pool_relocation.h states the operations, relocation.h the protocol):
 * no slice of a virtual range ever moves, so a plan is empty and there is
 * nothing to commit or undo; the drain gives every idle allocation back
 * (after one wait for the stream), and the shape asks for a relocation
 * (HIPPO_NEED_UNMAP) once the idle bytes reach unmap_threshold.
 */
#include <string.h>

#include "pool_virtual.h"

/* The idle bytes at which the pool wants an unmap: its unmap_threshold,
 * or (0) the default, HIPPO__VIRTUAL_DEFAULT_THRESHOLD. */
static uint64_t threshold_of(const sliced *p) {
  return p->vg.threshold ? p->vg.threshold : HIPPO__VIRTUAL_DEFAULT_THRESHOLD;
}

static void virtual_shape(const hippo__pool *pool, hippo__reloc_shape *out) {
  const sliced *p = (const sliced *)pool;
  hippo__sliced_settle(p);
  memset(out, 0, sizeof *out);
  out->current_pages = pool->pages;
  out->guarded_pages = pool->holds;
  out->idle_bytes = pool->bytes_idle;
  out->unmap = pool->bytes_idle && pool->bytes_idle >= threshold_of(p);
}

static hippo_status virtual_plan(hippo__pool *pool,
                                 hippo_relocate_reason reason,
                                 hippo__reloc_plan *plan) {
  (void)pool;
  (void)reason;
  (void)plan; /* no slice of a virtual range ever moves */
  return HIPPO_SUCCESS;
}

static void virtual_commit(hippo__pool *pool, hippo__reloc_plan *plan) {
  (void)pool;
  (void)plan;
}

static void virtual_abort(hippo__pool *pool, hippo__reloc_plan *plan,
                          bool strand) {
  (void)pool;
  (void)plan;
  (void)strand;
}

static void virtual_unstrand(hippo__pool *pool) { (void)pool; }

static hippo_status virtual_drain(hippo__pool *pool, uint64_t *pages,
                                  uint64_t *bytes) {
  sliced *p = (sliced *)pool;
  uint64_t n = pool->pages, b = pool->bytes_reserved;
  hippo_status st;
  hippo__sliced_settle(p);
  st = hippo__virtual_give_back(p);
  *pages += n - pool->pages;
  *bytes += b - pool->bytes_reserved;
  return st;
}

const hippo__pool_move_ops hippo__virtual_move_ops = {
    .shape = virtual_shape,
    .plan = virtual_plan,
    .commit = virtual_commit,
    .abort = virtual_abort,
    .unstrand = virtual_unstrand,
    .drain = virtual_drain,
};
