/* leaving.c -- pages a stream's pools gave up under the stream lock,
 * freed after it (pool.h, hippo__leaving): no thread waits on the lock
 * while the driver frees (hipFree may synchronize the device).  A page
 * whose free fails stays, counted, and is tried again a period later
 * (RETRY_PERIOD reservations) or at the next cleanup.
 */
#include <stdlib.h>
#include <string.h>

#include "manager.h"

#define RETRY_PERIOD HIPPO__DEFAULT_DEALLOC_PERIOD /* reservations */

/* The entry of leaving page `addr` in state `state` (stream lock held). */
static uint32_t leaving_find(const hippo__leaving *l, uint64_t addr,
                             uint32_t state) {
  for (uint32_t i = 0; i < l->count; i++)
    if (l->pages[i].addr == addr && l->pages[i].state == state)
      return i;
  return UINT32_MAX;
}

/* The outcome of one leaving page's free (stream lock held). */
static void leaving_done(hippo_stream *s, uint32_t i, hippo_status st) {
  hippo__leaving *l = &s->leaving;
  if (st == HIPPO_SUCCESS) {
    hippo__pool_unaccount(&s->acct, l->pages[i].size);
    l->pages[i] = l->pages[--l->count];
  } else {
    l->pages[i].state = HIPPO__LEAVING_FAILED;
    l->pages[i].retry_at = s->clock + RETRY_PERIOD;
  }
}

hippo_status hippo__manager_flush(hippo_stream *s, bool failed_too) {
  enum { BATCH = 16 };
  hippo__backend *be = s->env->be;
  hippo__leaving *l = &s->leaving;
  hippo__leaving_page todo[BATCH];
  hippo_status res[BATCH], first = HIPPO_SUCCESS;
  uint32_t n;
  hippo__lock_take(&s->lock);
  if (failed_too)
    for (uint32_t i = 0; i < l->count; i++)
      if (l->pages[i].state == HIPPO__LEAVING_FAILED) {
        l->pages[i].state = HIPPO__LEAVING_PENDING;
        l->pending++;
      }
  do {
    n = 0;
    for (uint32_t i = 0; i < l->count && n < BATCH; i++)
      if (l->pages[i].state == HIPPO__LEAVING_PENDING) {
        l->pages[i].state = HIPPO__LEAVING_FREEING;
        l->pending--;
        todo[n++] = l->pages[i];
      }
    hippo__lock_drop(&s->lock);
    for (uint32_t k = 0; k < n; k++) /* no lock held: hipFree may wait */
      res[k] = be->ops->page_free(be, todo[k].addr, todo[k].size);
    hippo__lock_take(&s->lock);
    for (uint32_t k = 0; k < n; k++) {
      leaving_done(s, leaving_find(l, todo[k].addr, HIPPO__LEAVING_FREEING),
                   res[k]);
      if (res[k] != HIPPO_SUCCESS && first == HIPPO_SUCCESS)
        first = hippo__error_wrap(res[k],
                                  "freeing a page of %llu B (it stays held "
                                  "and is tried again)",
                                  (unsigned long long)todo[k].size);
    }
  } while (n == BATCH);
  hippo__lock_drop(&s->lock);
  return first;
}

/* Leaving pages freed now, under the lock (detach, cleanup without
 * deferral): the first failure; those pages stay. */
hippo_status hippo__leaving_free_now_locked(hippo_stream *s) {
  hippo__backend *be = s->env->be;
  hippo__leaving *l = &s->leaving;
  hippo_status first = HIPPO_SUCCESS;
  for (uint32_t i = l->count; i-- > 0;) {
    hippo__leaving_page *p = &l->pages[i];
    hippo_status st;
    if (p->state == HIPPO__LEAVING_FREEING)
      continue; /* another thread's flush has it */
    if (p->state == HIPPO__LEAVING_PENDING)
      l->pending--;
    p->state = HIPPO__LEAVING_FREEING;
    st = be->ops->page_free(be, p->addr, p->size);
    leaving_done(s, i, st);
    if (st != HIPPO_SUCCESS && first == HIPPO_SUCCESS)
      first = st;
  }
  return first;
}

/* After a tick: failed leaving pages whose retry is due are pending again
 * (stream lock held). */
void hippo__leaving_retry_due_locked(hippo_stream *s) {
  hippo__leaving *l = &s->leaving;
  for (uint32_t i = 0; i < l->count; i++)
    if (l->pages[i].state == HIPPO__LEAVING_FAILED &&
        s->clock >= l->pages[i].retry_at) {
      l->pages[i].state = HIPPO__LEAVING_PENDING;
      l->pending++;
    }
}

void hippo__leaving_fini(hippo_stream *s) {
  hippo__backend *be = s->env->be;
  for (uint32_t i = 0; i < s->leaving.count; i++) /* device_close */
    if (be->ops->page_free(be, s->leaving.pages[i].addr,
                           s->leaving.pages[i].size) == HIPPO_SUCCESS)
      hippo__pool_unaccount(&s->acct, s->leaving.pages[i].size);
  free(s->leaving.pages);
  memset(&s->leaving, 0, sizeof s->leaving);
}
