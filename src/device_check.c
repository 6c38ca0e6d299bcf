/* device_check.c -- the device's figures and its check walk (device.h):
 * usage summed over the streams at one moment (every stream lock held),
 * and check, which walks every stream's manager (manager_check.c), the
 * retained streams, and the graph registry's holds against theirs.
 */
#include <string.h>

#include "device.h"

/* The device's figures: sums over its streams, read holding every stream
 * lock, so they are one consistent snapshot.
 * bytes_reserved, pages and peak_bytes_reserved are the device's own page
 * figures (exact); peak_bytes_in_use is the sum of the peaks of every
 * stream ever attached (detached ones included, so it never goes down), an
 * upper bound of the device's true peak (streams peak at different times,
 * and keeping one exact figure would put an atomic on every reserve). */
hippo_status hippo__device_usage(hippo_device *dev, hippo_usage *out) {
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  hippo__mutex_take(&dev->lock);
  hippo__device_lock_streams(dev); /* one moment for every figure */
  for (uint32_t i = 0; i < dev->stream_count; i++) {
    hippo_usage u;
    hippo__manager_usage_locked(dev->streams[i], &u);
    out->allocations += u.allocations;
    out->bytes_in_use += u.bytes_in_use;
    out->bytes_padding += u.bytes_padding;
    out->peak_bytes_in_use += u.peak_bytes_in_use;
    out->bytes_stranded += u.bytes_stranded;
    out->bytes_guarded += u.bytes_guarded;
    out->bytes_waiting += u.bytes_waiting;
    out->slices_guarded += u.slices_guarded;
    out->slices_waiting += u.slices_waiting;
    out->event_failures += u.event_failures;
    out->bytes_idle += u.bytes_idle;
    out->bytes_virtual += u.bytes_virtual;
  }
  for (uint32_t i = 0; i < dev->retained_count; i++) {
    hippo_usage u;
    hippo__manager_usage_locked(dev->retained[i], &u);
    out->bytes_guarded += u.bytes_guarded;
    out->slices_guarded += u.slices_guarded;
  }
  out->relocations = atomic_load(&dev->relocations);
  out->slices_relocated = atomic_load(&dev->slices_relocated);
  out->bytes_relocated = atomic_load(&dev->bytes_relocated);
  out->peak_bytes_in_use += dev->detached_peak_in_use;
  out->pool_count = dev->layout.count + 1;
  out->bytes_reserved = atomic_load(&dev->acct.bytes_reserved);
  out->peak_bytes_reserved = atomic_load(&dev->acct.peak_bytes_reserved);
  out->pages = atomic_load(&dev->acct.pages);
  hippo__device_unlock_streams(dev);
  hippo__mutex_drop(&dev->lock);
  return HIPPO_SUCCESS;
}

hippo_status hippo__device_check(hippo_device *dev) {
  hippo_status st = HIPPO_SUCCESS;
  uint64_t reserved = 0, pages = 0, holds = 0;
  uint32_t n;
  hippo__mutex_take(&dev->lock);
  hippo__device_lock_streams(dev);
  n = dev->stream_count + dev->retained_count;
  for (uint32_t i = 0; i < n && st == HIPPO_SUCCESS; i++) {
    bool retained = i >= dev->stream_count;
    hippo_stream *s = retained ? dev->retained[i - dev->stream_count]
                               : dev->streams[i];
    if (s->device != dev)
      st = hippo__error_set(HIPPO_INTERNAL,
                            "device check: stream %u names another device", i);
    else if (retained && (s->holds == 0 && atomic_load(&s->acct.pages) == 0))
      st = hippo__error_set(HIPPO_INTERNAL,
                            "device check: retained stream %u holds nothing",
                            i - dev->stream_count);
    else
      st = hippo__manager_check_locked(s);
    if (st != HIPPO_SUCCESS)
      st = hippo__error_wrap(st, "%s %u", retained ? "retained stream" :
                             "stream", i);
    reserved += atomic_load(&s->acct.bytes_reserved);
    pages += atomic_load(&s->acct.pages);
    holds += s->holds;
  }
  if (st == HIPPO_SUCCESS && holds != hippo__graphs_holds(&dev->graphs))
    st = hippo__error_set(HIPPO_INTERNAL,
                          "device check: streams count %llu graph holds, the "
                          "registry %llu",
                          (unsigned long long)holds,
                          (unsigned long long)hippo__graphs_holds(
                              &dev->graphs));
  if (st == HIPPO_SUCCESS &&
      (reserved != atomic_load(&dev->acct.bytes_reserved) ||
       pages != atomic_load(&dev->acct.pages) ||
       reserved > atomic_load(&dev->acct.peak_bytes_reserved)))
    st = hippo__error_set(HIPPO_INTERNAL,
                          "device check: streams hold %llu pages of %llu B, "
                          "the device's figures say %llu of %llu B",
                          (unsigned long long)pages,
                          (unsigned long long)reserved,
                          (unsigned long long)atomic_load(&dev->acct.pages),
                          (unsigned long long)atomic_load(
                              &dev->acct.bytes_reserved));
  hippo__device_unlock_streams(dev);
  hippo__mutex_drop(&dev->lock);
  return st;
}
