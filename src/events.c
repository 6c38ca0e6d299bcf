/* events.c -- a device's backend events ready for reuse (events.h). */
#include <stdlib.h>
#include <string.h>

#include "events.h"

void hippo__events_init(hippo__events *e, hippo__backend *be) {
  memset(e, 0, sizeof *e);
  hippo__mutex_init(&e->lock);
  e->be = be;
}

void hippo__events_fini(hippo__events *e) {
  for (uint32_t i = 0; i < e->count; i++)
    (void)e->be->ops->event_destroy(e->be, e->v[i]);
  free(e->v);
  hippo__mutex_fini(&e->lock);
  memset(e, 0, sizeof *e);
}

hippo_status hippo__events_get(hippo__events *e, void **event) {
  hippo__mutex_take(&e->lock);
  if (e->count) {
    *event = e->v[--e->count];
    hippo__mutex_drop(&e->lock);
    return HIPPO_SUCCESS;
  }
  hippo__mutex_drop(&e->lock);
  return e->be->ops->event_create(e->be, event);
}

void hippo__events_put(hippo__events *e, void *event) {
  hippo__mutex_take(&e->lock);
  if (e->count == e->cap) {
    uint32_t cap = e->cap ? e->cap * 2 : 16;
    void **grown = realloc(e->v, cap * sizeof *grown);
    if (!grown) { /* no host memory to keep it: it goes */
      hippo__mutex_drop(&e->lock);
      (void)e->be->ops->event_destroy(e->be, event);
      return;
    }
    e->v = grown;
    e->cap = cap;
  }
  e->v[e->count++] = event;
  hippo__mutex_drop(&e->lock);
}
