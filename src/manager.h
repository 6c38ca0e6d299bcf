/* manager.h -- devices, their streams' memory managers, and layouts.
 *
 * A device (device.c) owns a backend, a layout and the list of attached
 * streams.  Each attached stream has one memory manager (manager.c): its
 * own dynamic pools built from the device's layout, a persistent pool, and
 * a handle table.  Memory is never pooled across streams.
 *
 * Locking rule: reserve, release and resolve take only their stream's lock,
 * so different streams never serialize on one lock.  A device-wide
 * operation (attach, detach, install, cleanup, usage of the device, check,
 * close) takes the device lock first, then the stream locks one at a time or
 * all together in the order of the device's stream list (attach order).
 * Nothing takes a device lock while holding a stream lock.
 *
 * The functions here assume their arguments were checked by the plugin
 * layer (non-NULL, struct sizes interpreted).
 */
#ifndef HIPPO_MANAGER_H
#define HIPPO_MANAGER_H

#include "backend.h"
#include "core.h"
#include "handles.h"
#include "pool.h"

#define HIPPO__MAX_POOLS 32u               /* pools in a layout */
#define HIPPO__MAX_PAGES (UINT64_C(1) << 22) /* pages one pool may need */
#define HIPPO__DEFAULT_DEALLOC_PERIOD 10000u /* reservations (presets) */
#define HIPPO__TICK_BACKOFF_MAX 1024u /* reservations between capture asks */
_Static_assert(HIPPO__MAX_POOLS + 1 < HIPPO__HANDLE_TABLE,
               "a handle names any pool of a stream apart from the table");

/* A resolved layout: the pools in routing order, all fields validated. */
typedef struct hippo__layout {
  hippo_preset preset;
  uint32_t count;
  hippo_pool_options pools[HIPPO__MAX_POOLS];
} hippo__layout;

/* Validate `in` (already size-checked) against the backend's alignment and
 * memory, and resolve presets into pools.  HIPPO_POOL_CONFIG with
 * last_error naming the pool index, the field and why. */
hippo_status hippo__layout_resolve(const hippo_layout *in,
                                   const hippo_pool_options *pools_in,
                                   const hippo__backend *be,
                                   hippo__layout *out);
/* The preset for a device of `total` bytes and `alignment`. */
void hippo__layout_preset(hippo_preset preset, uint64_t total,
                          uint64_t alignment, hippo__layout *out);

/* One stream's memory manager.
 * Invariant: pools[0] is the persistent pool, pools[1 .. pool_count) the
 * dynamic pools of the device's current layout; every live handle slot
 * names a pool index < pool_count (or HIPPO__POOL_NONE for size 0) and a
 * live slice of it; in_use == sum over pools of bytes_in_use;
 * peak_in_use >= in_use; acct.bytes_reserved == sum of pool bytes_reserved.
 */
#define HIPPO__STREAM_MAGIC 0x5354524du /* live hippo_stream ("STRM") */
#define HIPPO__DEVICE_MAGIC 0x44455643u /* live hippo_device ("DEVC") */

struct hippo_stream {
  uint32_t magic;           /* HIPPO__STREAM_MAGIC while attached */
  hippo_device *device;
  void *native;             /* hipStream_t, or the emulated stream */
  hippo__lock lock;         /* guards everything below */
  hippo__handles handles;
  hippo__pool **pools;      /* [0] persistent, then the layout's pools */
  uint32_t pool_count;
  uint32_t persistent_depth; /* open persistent windows */
  hippo__pool **ticking;    /* pools with a dealloc_period */
  uint32_t ticking_count;
  uint64_t clock;           /* reservations made on this stream */
  uint64_t tick_quiet_until; /* no ticks before this clock (gate said no) */
  uint64_t tick_backoff;     /* the last pause, 0 after a yes */
  uint64_t in_use;          /* requested bytes live */
  uint64_t peak_in_use;
  uint64_t zero_live;       /* live zero-size reservations */
  hippo__page_acct acct;    /* page figures; parent = the device's */
  hippo__free_gate gate;    /* asks the device whether pages may go back */
  /* Generation histories of pool indices whose pool no longer names its
   * reservations (pools_install put another kind there, or fewer pools):
   * parked[k].records != NULL only where k >= pool_count or pools[k] has
   * no names_give; the next pool at k that names adopts it. */
  hippo__names parked[HIPPO__MAX_POOLS + 1];
};

/* A device.
 * Invariant: streams[0 .. stream_count) are the attached streams, each with
 * stream->device == this and a distinct native stream; acct sums theirs. */
struct hippo_device {
  uint32_t magic;           /* HIPPO__DEVICE_MAGIC while open */
  hippo__backend *be;
  hippo__lock lock;         /* guards streams and layout */
  uint32_t flags;           /* HIPPO_DEVICE_* */
  int32_t hip_device;
  hippo__layout layout;     /* the layout in force */
  hippo_stream **streams;
  uint32_t stream_count, stream_cap;
  hippo__page_acct acct;
  uint64_t detached_peak_in_use; /* sum of detached streams' peaks */
  /* The native streams, under their own lock, taken last: holding it, hippo
   * takes no other lock of its own (only the backend's, in the capture
   * query), so a stream holding its lock can ask whether any stream of the
   * device captures.  A capture that begins after that question was
   * answered is not seen: the driver gives no way to be told. */
  hippo__lock natives_lock;
  void **natives;           /* natives[i] == streams[i]->native */
};

/* device.c */
hippo_status hippo__device_open(const hippo_device_desc *desc,
                                const hippo_layout *layout,
                                const hippo_pool_options *pools,
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
/* hippo__free_gate's question for a device (ctx): true when no stream of
 * it captures.  May be called holding a stream lock. */
hippo_status hippo__device_may_free(void *dev, bool *may_free);

/* manager.c: a stream's manager.  The _locked variants expect the stream
 * lock held by the caller. */
hippo_status hippo__manager_init(hippo_stream *s, hippo_device *dev,
                                 void *native);
void hippo__manager_fini(hippo_stream *s);
/* Build the dynamic pools of `layout` (pools[0] is kept). */
hippo_status hippo__manager_build(hippo_stream *s, const hippo__layout *layout,
                                  hippo__pool ***pools, uint32_t *count);
void hippo__manager_swap(hippo_stream *s, hippo__pool **pools, uint32_t count);
void hippo__pools_destroy(hippo__pool **pools, uint32_t from, uint32_t count);
hippo_status hippo__reserve(hippo_stream *s, uint64_t size, hippo_mode mode,
                            hippo_handle *out);
hippo_status hippo__release(hippo_stream *s, hippo_handle h);
hippo_status hippo__resolve(hippo_stream *s, hippo_handle h, void **ptr,
                            uint64_t *size);
hippo_status hippo__persistent_begin(hippo_stream *s);
hippo_status hippo__persistent_end(hippo_stream *s);
hippo_status hippo__manager_cleanup_locked(hippo_stream *s);
/* Release every live reservation of the stream (stream_detach). */
void hippo__manager_release_all_locked(hippo_stream *s);
uint64_t hippo__manager_dynamic_bytes_locked(const hippo_stream *s);
void hippo__manager_usage_locked(const hippo_stream *s, hippo_usage *out);
hippo_status hippo__stream_usage(hippo_stream *s, hippo_usage *out);
hippo_status hippo__pool_report_get(hippo_stream *s, uint32_t index,
                                    hippo_pool_report *out);
hippo_status hippo__manager_check_locked(const hippo_stream *s);

#endif /* HIPPO_MANAGER_H */
