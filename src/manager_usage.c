/* manager_usage.c -- the figures of a stream's manager (manager.h):
 * stranded and dynamic bytes, usage (hippo_usage, summed over the pools)
 * and one pool's report with its options in force, read from the pools'
 * own figures.  The _locked ones expect the stream lock held;
 * hippo__stream_usage and hippo__pool_report_get take it.
 */
#include <string.h>

#include "manager.h"

/* Live reservations: the table's and those the pools name. */
static uint64_t live_reservations(const hippo_stream *s) {
  uint64_t n = s->handles.live;
  for (uint32_t i = 0; i < s->pool_count; i++)
    if (s->pools[i]->ops->release_named)
      n += s->pools[i]->allocations;
  return n;
}

uint64_t hippo__manager_stranded_locked(const hippo_stream *s) {
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < s->pool_count; i++)
    bytes += s->pools[i]->bytes_stranded;
  return bytes;
}

uint64_t hippo__manager_dynamic_bytes_locked(const hippo_stream *s) {
  uint64_t bytes = 0;
  for (uint32_t i = 1; i < s->pool_count; i++)
    bytes += s->pools[i]->bytes_in_use;
  return bytes;
}

void hippo__manager_usage_locked(const hippo_stream *s, hippo_usage *out) {
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->pool_count = s->pool_count;
  out->allocations = live_reservations(s);
  out->bytes_in_use = s->in_use;
  out->peak_bytes_in_use = s->peak_in_use;
  for (uint32_t i = 0; i < s->pool_count; i++)
    out->bytes_padding += s->pools[i]->bytes_padding;
  out->bytes_reserved = atomic_load(&s->acct.bytes_reserved);
  out->peak_bytes_reserved = atomic_load(&s->acct.peak_bytes_reserved);
  out->pages = atomic_load(&s->acct.pages);
  out->relocations = s->relocations;
  out->slices_relocated = s->slices_relocated;
  out->bytes_relocated = s->bytes_relocated;
  out->bytes_stranded = hippo__manager_stranded_locked(s);
  for (uint32_t i = 0; i < s->pool_count; i++) {
    out->bytes_guarded += s->pools[i]->bytes_guarded;
    out->bytes_waiting += s->pools[i]->bytes_waiting;
    out->bytes_idle += s->pools[i]->bytes_idle;
    out->bytes_virtual += s->pools[i]->bytes_virtual;
  }
  out->slices_guarded = s->holds;
  out->slices_waiting = s->wait_count;
  out->event_failures = s->event_failures;
}

hippo_status hippo__stream_usage(hippo_stream *s, hippo_usage *out) {
  hippo__lock_take(&s->lock);
  hippo__manager_usage_locked(s, out);
  hippo__lock_drop(&s->lock);
  return HIPPO_SUCCESS;
}

hippo_status hippo__pool_report_get(hippo_stream *s, uint32_t index,
                                    hippo_pool_report *out,
                                    hippo_pool_options *options) {
  hippo_status st = HIPPO_SUCCESS;
  hippo__lock_take(&s->lock);
  if (index >= s->pool_count)
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "pool_report: pool index %u, but the stream has %u "
                          "pools (0 is the persistent pool)",
                          index, s->pool_count);
  else {
    s->pools[index]->ops->report(s->pools[index], out);
    if (s->pools[index]->kind != HIPPO_POOL_VIRTUAL)
      out->largest_free_range = out->largest_free;
    *options = s->pools[index]->opt;
  }
  hippo__lock_drop(&s->lock);
  return st;
}
