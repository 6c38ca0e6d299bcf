/* install.c -- pools_install: a new layout for the dynamic pools of
 * every stream of a device (device.h).  Validated first; refused, with
 * nothing changed, while a stream captures or the dynamic pools hold live
 * reservations (HIPPO_POOLS_IN_USE), graph holds or stranded bytes; then
 * every stream's new pools are built before anything changes, the old
 * pools' empty pages leave (freed after the stream locks), and the new
 * pools go in.  A refused install gives nothing back.
 */
#include <stdlib.h>

#include "device.h"

hippo_status hippo__pools_install(hippo_device *dev, const hippo_layout *in,
                                  const hippo_pool_options *pools,
                                  uint64_t *bytes_in_use) {
  hippo__layout layout;
  hippo__pool ***built = NULL;
  uint32_t *counts = NULL, built_count = 0;
  uint64_t live = 0, held = 0;
  bool left = false; /* step 3 ran: pages may wait on leaving lists */
  hippo_status st;

  if (bytes_in_use)
    *bytes_in_use = 0;
  if (dev->flags & HIPPO_DEVICE_FIXED_LAYOUT)
    return hippo__error_set(HIPPO_UNSUPPORTED,
                            "pools_install: this device was opened with "
                            "HIPPO_DEVICE_FIXED_LAYOUT; its layout never "
                            "changes (retrying will not help)");
  st = hippo__layout_resolve(in, pools, dev->be, &layout);
  if (st != HIPPO_SUCCESS)
    return st;
  hippo__mutex_take(&dev->lock);
  st = hippo__device_refuse_while_recording(dev, "pools_install");
  if (st != HIPPO_SUCCESS) {
    hippo__mutex_drop(&dev->lock);
    return st;
  }
  hippo__device_lock_streams(dev);
  /* 1. in use?  Then nothing changes (not even empty pages go back).
   * Live bytes first (the caller learns them whatever else holds). */
  {
    uint32_t held_index = 0;
    const hippo__pool *held_by = NULL;
    for (uint32_t i = 0; i < dev->stream_count; i++) {
      hippo_stream *s = dev->streams[i];
      if (!held_by)
        held_by = hippo__manager_held_pool_locked(s, &held_index);
      live += hippo__manager_dynamic_bytes_locked(s);
    }
    if (bytes_in_use)
      *bytes_in_use = live;
    if (live) {
      st = hippo__error_set(HIPPO_POOLS_IN_USE,
                            "pools_install: %llu B are still live in the "
                            "dynamic pools, so the old layout was kept "
                            "(nothing was given back); release them and "
                            "retry (persistent reservations do not "
                            "count)%s",
                            (unsigned long long)live,
                            held_by ? "; slices that graphs not yet retired "
                                      "or other streams' work may use are "
                                      "held too: graph_retire, cleanup"
                                    : "");
      goto out;
    }
    if (held_by) {
      st = hippo__error_set(HIPPO_POOLS_IN_USE,
                            "pools_install: pool %u of a stream holds "
                            "slices that graphs not yet retired or other "
                            "streams' work may use (%llu holds) or that a "
                            "failed relocation wait keeps (%llu B), so "
                            "the old layout was kept; graph_retire, "
                            "cleanup and retry",
                            held_index, (unsigned long long)held_by->holds,
                            (unsigned long long)held_by->bytes_stranded);
      goto out;
    }
  }
  /* 2. the new pools, before anything changes */
  built = calloc(dev->stream_count + 1, sizeof *built);
  counts = calloc(dev->stream_count + 1, sizeof *counts);
  if (!built || !counts) {
    st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                          "pools_install: host memory for the new pools");
    goto out;
  }
  for (uint32_t i = 0; i < dev->stream_count; i++) {
    st = hippo__manager_build(dev->streams[i], &layout, &built[i], &counts[i]);
    if (st != HIPPO_SUCCESS) {
      built_count = i;
      goto out;
    }
  }
  built_count = dev->stream_count;
  /* 3. the old pools' pages leave (freed after the locks); a page that
   * must be freed now and cannot keeps the old layout */
  left = true;
  for (uint32_t i = 0; i < dev->stream_count; i++) {
    hippo_status cst =
        hippo__manager_empty_dynamic_locked(dev->streams[i], &held);
    if (cst != HIPPO_SUCCESS && st == HIPPO_SUCCESS)
      st = cst;
  }
  if (held) {
    st = hippo__error_wrap(st == HIPPO_SUCCESS ? HIPPO_INTERNAL : st,
                           "pools_install: %llu empty pages could not be "
                           "given back, so the old layout was kept; retry",
                           (unsigned long long)held);
    goto out;
  }
  st = HIPPO_SUCCESS;
  for (uint32_t i = 0; i < dev->stream_count; i++)
    hippo__manager_swap(dev->streams[i], built[i], counts[i]);
  built_count = 0;
  dev->layout = layout;
out:
  for (uint32_t j = 0; j < built_count; j++) { /* not installed */
    hippo__pools_destroy(built[j], 1, counts[j]);
    free(built[j]);
  }
  hippo__device_unlock_streams(dev);
  /* 4. the frees, with no stream lock held (hipFree may wait): a page
   * whose free fails stays held by its stream, tried again later.  Only
   * after step 3 (a refused install gives nothing back), and never by a
   * look at a leaving list without its stream's lock: the stream's own
   * thread may be ticking (flush takes the lock to read it) */
  if (left)
    for (uint32_t i = 0; i < dev->stream_count; i++)
      (void)hippo__manager_flush(dev->streams[i], false);
  hippo__mutex_drop(&dev->lock);
  free(built);
  free(counts);
  return st;
}
