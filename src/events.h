/* events.h -- a device's backend events ready for reuse (events.c).
 *
 * record_use records an event on the stream that uses a reservation; the
 * event is made off the reservation path (event_create) and given back
 * here once its wait is done, so a device makes few events however many
 * uses come and go.
 *
 * Locking: the cache has its own mutex, a leaf: taken under a stream lock,
 * never while waiting for another lock of hippo's, never held across a
 * backend call.
 */
#ifndef HIPPO_EVENTS_H
#define HIPPO_EVENTS_H

#include "backend.h"
#include "core.h"

/* Invariant: v[0 .. count) are events of `be`, recorded or not, that no
 * use holds; count <= cap. */
typedef struct hippo__events {
  hippo__mutex lock;
  hippo__backend *be;
  void **v;
  uint32_t count, cap;
} hippo__events;

void hippo__events_init(hippo__events *e, hippo__backend *be);
/* Destroys every event kept (device_close). */
void hippo__events_fini(hippo__events *e);
/* An event: one ready for reuse, else a new one (the backend's
 * event_create; its status on failure). */
hippo_status hippo__events_get(hippo__events *e, void **event);
/* `event` is ready for reuse; without host memory to keep it, it is
 * destroyed. */
void hippo__events_put(hippo__events *e, void *event);

#endif /* HIPPO_EVENTS_H */
