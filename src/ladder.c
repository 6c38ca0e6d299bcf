/* ladder.c -- what a reservation that found no room climbs before it
 * fails, and AUTO_RELOCATE's relocation before a reservation: the stream
 * managers' hooks (manager.h, hippo__stream_hooks), which the device
 * hands every stream (device_open's argument; the plugin gives
 * hippo__ladder_hooks).  It sits above the managers, the device and
 * relocation, and calls down to each.
 *
 * The ladder, for a reservation that found no room (st), its stream lock
 * held:
 *  1. every page size of an ARENA taken (HIPPO_PAGE_SIZES_EXHAUSTED):
 *     relocate (ARENA_FULL) and retry, unless the last relocation moved
 *     nothing from the same pages (the stall memo);
 *  2. out of memory: when a retry could help (retry_may_help: an empty
 *     page waits, pages are leaving, a relocation could empty an outdated
 *     page, or the memory is a GPU's, which other code may free), and no
 *     stream of the device captures (the free gate): relocate what
 *     outdated pages hold into room held (EXPLICIT), give the stream's
 *     empty pages back -- freed with the stream lock dropped, so the
 *     handle table's room is made again after -- and retry once;
 *  3. still out of memory: the message says what the device holds, what
 *     is in use (other streams' figures read where their lock is free),
 *     what is free and how cut up this stream's pools are.
 * Neither relocation runs while a capture records (relocation skips
 * itself, the free gate says no).
 */
#include "ladder.h"
#include "relocation.h"

/* Out of memory after every retry: say what the device holds and how
 * fragmented the stream's pools are (formatted only when last_error is
 * read: a full device may see many failures). */
static hippo_status out_of_memory(hippo_stream *s, uint64_t size) {
  hippo_device *dev = s->device;
  hippo__backend *be = dev->be;
  uint64_t free_dev = 0, total = 0, free_pools = 0;
  uint32_t missed;
  uint64_t in_use = hippo__device_in_use(dev, s, &missed);
  (void)be->ops->mem_info(be, &free_dev, &total);
  /* the pools' head figures (pool.h invariant): O(1) a pool; where the
   * room is and how cut up, pool_report tells */
  for (uint32_t i = 0; i < s->pool_count; i++) {
    const hippo__pool *p = s->pools[i];
    free_pools += hippo__pool_bytes_free(p);
  }
  {
    uint64_t args[] = {size,
                       atomic_load(&dev->acct.bytes_reserved),
                       in_use,
                       missed,
                       free_dev,
                       total,
                       free_pools};
    return hippo__error_lazy_wrap(
        HIPPO_OUT_OF_MEMORY,
        "reserve(%llu B): out of memory after giving back what this stream "
        "held empty or outdated; the device holds %llu B reserved and %llu "
        "B in use (%llu streams busy meanwhile not counted), %llu B of %llu "
        "B are free; this stream's pools have %llu B free but no room for "
        "it (pool_report says where: largest_free); release or reclaim, "
        "then retry",
        args, 7);
  }
}

/* Whether a retry could help a reservation the device refused: an empty
 * page waits, pages are leaving, a relocation could empty an outdated
 * page -- or the device's memory may have changed.  An emulated device
 * (HOST, DRY) has only hippo's pages: when the page it refused is larger
 * than what it has free, and this stream has nothing to give back, the
 * retry would fail the same way.  A GPU's runtime is always asked again
 * (other code may free memory).  No driver call. */
static bool retry_may_help(hippo_stream *s) {
  hippo__backend *be = s->env->be;
  uint64_t refused = s->acct.refused, free_dev = 0, total = 0;
  s->acct.refused = 0;
  if (s->leaving.count || be->kind == HIPPO_BACKEND_HIP || !refused)
    return true;
  /* an emulated device has only this device's pages (counted, leaving
   * ones too, until their free succeeds) */
  total = be->total_memory;
  free_dev = total - atomic_load_explicit(&s->device->acct.bytes_reserved,
                                          memory_order_relaxed);
  if (free_dev >= refused) /* refused for another reason (an injected
                              fault): worth asking again */
    return true;
  for (uint32_t i = 0; i < s->pool_count; i++)
    if (s->pools[i]->ops->gives_back(s->pools[i]))
      return true;
  return hippo__relocation_may_help_locked(s);
}

/* The ladder (see the top): the stream's hooks' no_room. */
static hippo_status no_room(hippo_stream *s, uint64_t size, bool persistent,
                            uint32_t *pool, hippo__slice_ref *ref,
                            hippo_status st) {
  if (st == HIPPO_PAGE_SIZES_EXHAUSTED) {
    hippo__error_kept kept;
    if (!hippo__relocation_may_help_locked(s))
      return st;
    hippo__error_keep(&kept);
    if (hippo__relocate_locked(s, HIPPO_RELOCATE_ARENA_FULL, NULL) !=
            HIPPO_SUCCESS ||
        s->last_report.slices_moved + s->last_report.pages_freed == 0) {
      hippo__error_restore(&kept);
      return st;
    }
    st = hippo__manager_route_locked(s, size, persistent, pool, ref);
  }
  if (st == HIPPO_OUT_OF_MEMORY && !retry_may_help(s))
    return out_of_memory(s, size); /* nothing to give back: a retry fails */
  if (st == HIPPO_OUT_OF_MEMORY && hippo__gate_allows(&s->gate)) {
    /* Room held by outdated pages and empty pages of this stream may be
     * what the device lacks; not while a capture records (the gate), since
     * its graph may hold them. */
    hippo__manager_defer_frees(s, true); /* the frees come after the lock */
    if (hippo__relocation_may_help_locked(s))
      (void)hippo__relocate_locked(s, HIPPO_RELOCATE_EXPLICIT, NULL);
    (void)hippo__manager_cleanup_locked(s);
    hippo__manager_defer_frees(s, false);
    if (s->leaving.count) {
      hippo__lock_drop(&s->lock);
      (void)hippo__manager_flush(s, true);
      hippo__lock_take(&s->lock);
      /* another thread of the stream may have taken the table's room
       * meanwhile: make it again before a pool serves (nothing to undo) */
      st = hippo__handles_make_room(&s->handles);
      if (st != HIPPO_SUCCESS)
        return hippo__error_wrap(st, "reserve(%llu B)",
                                 (unsigned long long)size);
    }
    st = hippo__manager_route_locked(s, size, persistent, pool, ref);
    if (st == HIPPO_OUT_OF_MEMORY)
      return out_of_memory(s, size);
  }
  return st;
}

/* HIPPO_DEVICE_AUTO_RELOCATE: relocate when the memory wants it. */
static void before_reserve(hippo_stream *s) {
  if (hippo__relocation_need_locked(s) != HIPPO_NEED_NOTHING)
    (void)hippo__relocate_locked(s, HIPPO_RELOCATE_WANTED, NULL);
}

const hippo__stream_hooks hippo__ladder_hooks = {
    .no_room = no_room,
    .before_reserve = before_reserve,
};
