/* device.h -- a device (device.c): its backend, its layout, its attached
 * streams, and the operations that span them (install, cleanup, figures,
 * check, the capture question).
 *
 * Lock order, the one rule every file follows (outermost first):
 *   1. the device lock (dev->lock);
 *   2. stream locks (s->lock), one at a time or all together, in the order
 *      of dev->streams (attach order);
 *   3. the natives lock (dev->natives_lock), taken last: holding it, hippo
 *      waits for no other lock of its own (only the backend's, inside a
 *      backend call); it may *try* a stream lock, which never waits (the
 *      out-of-memory message sums the other streams' bytes that way).
 * reserve, release and resolve take only their stream's lock, so different
 * streams never serialize on one lock.  Nothing takes a device lock while
 * holding a stream lock; a stream holding its lock may still ask whether
 * any stream of the device captures (natives lock) and wait for every
 * stream's work (relocation), since both need only the natives.
 */
#ifndef HIPPO_DEVICE_H
#define HIPPO_DEVICE_H

#include "backend.h"
#include "core.h"
#include "events.h"
#include "guard.h"
#include "layout.h"
#include "manager.h"
#include "pool.h"

#define HIPPO__DEVICE_MAGIC 0x44455643u /* live hippo_device ("DEVC") */

/* A device.
 * Invariant: streams[0 .. stream_count) are the attached streams, each with
 * stream->device == this and a distinct native stream; acct sums the streams' page figures;
 * the relocation totals count every relocation of every stream ever
 * attached. */
struct hippo_device {
  uint32_t magic;           /* HIPPO__DEVICE_MAGIC while open */
  hippo__backend *be;
  hippo__mutex lock;        /* guards streams, layout, retained */
  hippo__stream_env env;    /* what its streams' managers get (manager.h) */
  uint32_t flags;           /* HIPPO_DEVICE_* */
  int32_t hip_device;
  hippo__layout layout;     /* the layout in force */
  hippo_stream **streams;
  uint32_t stream_count, stream_cap;
  hippo__page_acct acct;
  uint64_t detached_peak_in_use; /* sum of detached streams' peaks */
  /* Relocation totals (atomic: streams relocate under their own lock). */
  _Atomic uint64_t relocations, slices_relocated, bytes_relocated;
  /* The native streams, under their own lock, taken last (see above).  A
   * capture that begins after the question was answered is not seen: the
   * driver gives no way to be told.  The device's last relocation report
   * is kept under the same lock. */
  hippo__mutex natives_lock;
  uint32_t natives_users;   /* open views (device.c): no native is removed
                               while one is open */
  pthread_cond_t natives_idle; /* signalled when natives_users drops to 0 */
  hippo_relocation_report last_report;
  hippo__failures last_failures; /* last_report's */
  /* Graph guards (guard.h): the registry, and the streams detached while
   * a graph still held slices of theirs (retained[0 .. retained_count),
   * each with holds > 0, its native stream forgotten), under the device
   * lock. */
  hippo__graphs graphs;
  hippo_stream **retained;
  uint32_t retained_count, retained_cap;
  /* Backend events ready for reuse (record_use): a leaf lock. */
  hippo__events events;
};

/* hooks: what the streams' managers call up to (manager.h; the plugin
 * gives the out-of-memory ladder, ladder.h; NULL: none). */
hippo_status hippo__device_open(const hippo_device_desc *desc,
                                const hippo_layout *layout,
                                const hippo_pool_options *pools,
                                const hippo__stream_hooks *hooks,
                                hippo_device **out);
hippo_status hippo__device_close(hippo_device *dev);
hippo_status hippo__device_info(hippo_device *dev, hippo_device_info *out);
hippo_status hippo__stream_attach(hippo_device *dev, void *native,
                                  hippo_stream **out);
hippo_status hippo__stream_detach(hippo_stream *s);
hippo_status hippo__pools_install(hippo_device *dev, const hippo_layout *in,
                                  const hippo_pool_options *pools,
                                  uint64_t *bytes_in_use);
hippo_status hippo__cleanup(hippo_device *dev, hippo_stream *s);
hippo_status hippo__device_usage(hippo_device *dev, hippo_usage *out);
hippo_status hippo__device_check(hippo_device *dev);
/* Take (and drop) every stream lock, in the lock order; the device lock is
 * held. */
void hippo__device_lock_streams(hippo_device *dev);
void hippo__device_unlock_streams(hippo_device *dev);
/* Destroys an emulated native stream, refused (HIPPO_BUSY) while it is
 * attached; under the device lock, so no attach slips in between. */
hippo_status hippo__emu_stream_destroy(hippo_device *dev, void *native);

/* The capture question.  HIPPO_GRAPH_RECORDING (last_error naming the
 * native stream and its capture) when any stream of the device captures,
 * or the status of a failed capture query.  Takes only the natives lock,
 * so it may be called holding the device lock or a stream lock. */
hippo_status hippo__device_refuse_while_recording(hippo_device *dev,
                                                  const char *call);
/* hippo__free_gate's question for a device (ctx): true when no stream of
 * it captures.  May be called holding a stream lock. */
hippo_status hippo__device_may_free(void *dev, bool *may_free);
/* graph_retire: the holds capture `id` took are dropped (guard.h). */
hippo_status hippo__graph_retire(hippo_device *dev, uint64_t id);
/* The device's bytes in use, summed over the streams whose lock is free
 * now (and `s`, whose lock the caller holds); *missed counts the others
 * (the out-of-memory message).  Takes the natives lock. */
uint64_t hippo__device_in_use(hippo_device *dev, const hippo_stream *s,
                              uint32_t *missed);
/* Waits until every attached stream's queued work has finished (the
 * backend's stream_sync on each native).  The first failure is returned
 * after asking every stream.  Takes only the natives lock. */
hippo_status hippo__device_finish(hippo_device *dev);

#endif /* HIPPO_DEVICE_H */
