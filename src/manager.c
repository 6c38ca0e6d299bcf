/* manager.c -- one stream's memory manager (manager.h): its life (init,
 * fini), its pools (built from a layout, swapped in with the generation
 * histories handed on), persistent windows, and what the device asks of
 * it under the stream lock: cleanup, unstranding, emptying the dynamic
 * pools, dropping a graph's hold, capture announcements.
 *
 * pools[0] is the persistent pool, kept across layouts; pools[1 ..
 * pool_count) the dynamic pools of the device's current layout.  The
 * generation history of pool index k lives in the pool there when it
 * names its reservations (names_take/names_give), else parked in
 * s->parked[k].  The ticking and movable lists are allocated at init for
 * HIPPO__MAX_POOLS + 1 entries, so a swap cannot fail.  Reserving,
 * releasing and resolving are manager_reserve.c; the figures are
 * manager_usage.c.
 */
#include <stdlib.h>
#include <string.h>

#include "manager.h"

hippo_status hippo__manager_init(hippo_stream *s, const hippo__stream_env *env,
                                 void *native) {
  hippo_status st;
  memset(s, 0, sizeof *s);
  s->magic = HIPPO__STREAM_MAGIC;
  s->device = env->device;
  s->env = env;
  s->native = native;
  hippo__lock_init(&s->lock);
  st = hippo__handles_init(&s->handles);
  if (st != HIPPO_SUCCESS)
    return st;
  s->acct.parent = env->acct;
  s->gate.ask = env->may_free;
  s->gate.ctx = env->may_free_ctx;
  s->gate.answer = -1;
  s->gate.leaving = &s->leaving;
  s->gate.due_min = 0; /* the first reservation looks at the pools */
  s->gate.native = native;
  s->gate.own_waits = true;
  s->gate.clock = &s->clock;
  s->pools = calloc(1, sizeof *s->pools);
  s->auto_relocate = (env->flags & HIPPO_DEVICE_AUTO_RELOCATE) != 0 &&
                     env->hooks && env->hooks->before_reserve;
  hippo__capture_init(&s->capture, env->be, native);
  s->ticking = calloc(HIPPO__MAX_POOLS + 1, sizeof *s->ticking);
  s->movable = calloc(HIPPO__MAX_POOLS + 1, sizeof *s->movable);
  if (!s->pools || !s->ticking || !s->movable) {
    free(s->pools);
    free(s->ticking);
    free(s->movable);
    hippo__handles_fini(&s->handles);
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "host memory for a stream manager");
  }
  st = hippo__pool_persistent_create(env->be, &s->acct, &s->pools[0]);
  if (st != HIPPO_SUCCESS) {
    free(s->pools);
    free(s->ticking);
    free(s->movable);
    hippo__handles_fini(&s->handles);
    return st;
  }
  s->pools[0]->gate = &s->gate;
  s->pool_count = 1;
  return HIPPO_SUCCESS;
}

void hippo__pools_destroy(hippo__pool **pools, uint32_t from,
                          uint32_t count) {
  for (uint32_t i = from; i < count; i++)
    if (pools[i])
      pools[i]->ops->destroy(pools[i]);
}

void hippo__manager_fini(hippo_stream *s) {
  s->magic = 0;
  hippo__manager_uses_fini(s);
  free(s->last_failures.v);
  hippo__leaving_fini(s);
  for (uint32_t k = 0; k <= HIPPO__MAX_POOLS; k++)
    free(s->parked[k].records);
  hippo__pools_destroy(s->pools, 0, s->pool_count);
  free(s->pools);
  free(s->ticking);
  free(s->movable);
  hippo__handles_fini(&s->handles);
}

hippo_status hippo__manager_build(hippo_stream *s, const hippo__layout *layout,
                                  hippo__pool ***out, uint32_t *count) {
  uint32_t n = layout->count + 1;
  hippo__pool **pools = calloc(n, sizeof *pools);
  if (!pools)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "host memory for %u pools", n);
  pools[0] = s->pools[0];
  for (uint32_t i = 1; i < n; i++) {
    hippo_status st = hippo__pool_create(s->env->be, &s->acct,
                                         &layout->pools[i - 1], &pools[i]);
    if (st != HIPPO_SUCCESS) {
      hippo__pools_destroy(pools, 1, i);
      free(pools);
      return hippo__error_wrap(st, "building pool %u", i - 1);
    }
    pools[i]->gate = &s->gate;
  }
  *out = pools;
  *count = n;
  return HIPPO_SUCCESS;
}

/* The generation history at pool index k moves from the old pool there
 * (or the parked one) to the new pool there, or is parked. */
static void names_pass(hippo_stream *s, hippo__pool **old, uint32_t old_count,
                       hippo__pool **pools, uint32_t count, uint32_t k) {
  hippo__names names;
  if (k < old_count && old[k]->ops->names_take) {
    old[k]->ops->names_take(old[k], &names);
  } else {
    names = s->parked[k];
    memset(&s->parked[k], 0, sizeof s->parked[k]);
  }
  if (!names.records)
    return;
  if (k < count && pools[k]->ops->names_give)
    pools[k]->ops->names_give(pools[k], &names);
  else
    s->parked[k] = names;
}

/* Install built pools (fresh: none has served yet); the old dynamic pools
 * (which must hold no page) are destroyed after handing their generation
 * histories on.  Cannot fail: the ticking and movable lists were allocated
 * at init for HIPPO__MAX_POOLS + 1 entries. */
void hippo__manager_swap(hippo_stream *s, hippo__pool **pools,
                         uint32_t count) {
  hippo__pool **old = s->pools;
  uint32_t old_count = s->pool_count;
  for (uint32_t k = 1; k <= HIPPO__MAX_POOLS; k++)
    names_pass(s, old, old_count, pools, count, k);
  s->pools = pools;
  s->pool_count = count;
  s->gate.due_min = 0; /* new pools: looked at by the next reservation */
  s->ticking_count = 0;
  s->movable_count = 0;
  for (uint32_t i = 0; i < count; i++) {
    if (pools[i]->opt.dealloc_period)
      s->ticking[s->ticking_count++] = pools[i];
    if (hippo__manager_relocates(pools[i]))
      s->movable[s->movable_count++] = pools[i];
  }
  hippo__pools_destroy(old, 1, old_count);
  free(old);
}

hippo_status hippo__persistent_begin(hippo_stream *s) {
  hippo_status st = HIPPO_SUCCESS;
  hippo__lock_take(&s->lock);
  if (s->persistent_depth == UINT32_MAX)
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "persistent_begin: %u windows are open on this "
                          "stream, the most it counts; end some",
                          UINT32_MAX);
  else
    s->persistent_depth++;
  hippo__lock_drop(&s->lock);
  return st;
}

hippo_status hippo__persistent_end(hippo_stream *s) {
  hippo_status st = HIPPO_SUCCESS;
  hippo__lock_take(&s->lock);
  if (s->persistent_depth == 0)
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "persistent_end: no persistent window is open on "
                          "this stream (each end needs a begin)");
  else
    s->persistent_depth--;
  hippo__lock_drop(&s->lock);
  return st;
}

hippo_status hippo__manager_unstrand_locked(hippo_stream *s) {
  hippo__backend *be = s->env->be;
  hippo_status st;
  if (hippo__manager_stranded_locked(s) == 0)
    return HIPPO_SUCCESS;
  st = be->ops->stream_sync(be, s->native);
  if (st != HIPPO_SUCCESS)
    return hippo__error_wrap(st, "waiting for the copies of a relocation "
                             "whose wait failed (their destinations stay "
                             "stranded)");
  for (uint32_t k = 0; k < s->movable_count; k++)
    if (s->movable[k]->bytes_stranded)
      s->movable[k]->ops->move->unstrand(s->movable[k]);
  return HIPPO_SUCCESS;
}

hippo_status hippo__manager_cleanup_locked(hippo_stream *s) {
  /* the bytes other streams used are waited for: they may go back now */
  hippo_status first = hippo__manager_wait_uses_locked(s);
  /* and the copies of a relocation whose wait failed: their stranded
   * destinations go free, and their pages may empty */
  hippo_status ust = hippo__manager_unstrand_locked(s);
  if (first == HIPPO_SUCCESS)
    first = ust;
  if (!s->gate.defer && s->leaving.count) {
    hippo_status st = hippo__leaving_free_now_locked(s);
    if (first == HIPPO_SUCCESS)
      first = st;
  }
  for (uint32_t i = 0; i < s->pool_count; i++) {
    hippo_status st = s->pools[i]->ops->cleanup(s->pools[i]);
    if (st != HIPPO_SUCCESS && first == HIPPO_SUCCESS)
      first = st;
  }
  return first;
}

const hippo__pool *hippo__manager_held_pool_locked(const hippo_stream *s,
                                                   uint32_t *index) {
  for (uint32_t p = 1; p < s->pool_count; p++)
    if (s->pools[p]->holds || s->pools[p]->bytes_stranded) {
      *index = p - 1;
      return s->pools[p];
    }
  return NULL;
}

hippo_status hippo__manager_empty_dynamic_locked(hippo_stream *s,
                                                 uint64_t *held) {
  hippo_status first = HIPPO_SUCCESS;
  s->gate.defer = true; /* the frees come after the lock */
  for (uint32_t p = 1; p < s->pool_count; p++) {
    hippo_status st = s->pools[p]->ops->cleanup(s->pools[p]);
    if (st != HIPPO_SUCCESS && first == HIPPO_SUCCESS)
      first = st;
    *held += s->pools[p]->pages;
  }
  s->gate.defer = false;
  return first;
}

void hippo__manager_unhold_locked(hippo_stream *s, uint32_t pool,
                                  uint32_t slice) {
  hippo__pool *p = s->pools[pool];
  p->now = s->clock; /* stamps the page if it empties */
  p->ops->unhold(p, slice, false);
  s->holds--;
}

hippo_status hippo__stream_announce(hippo_stream *s,
                                    hippo_capture_announcement what) {
  return hippo__capture_announce(&s->capture, s->env->be, s->native, what);
}
