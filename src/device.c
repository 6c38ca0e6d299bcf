/* device.c -- a device: its backend, its layout, its streams (attach,
 * detach, the streams detached while a graph holds their slices), the
 * questions over all of them (does any capture? wait for their work),
 * graph_retire and cleanup.  pools_install is install.c; usage and the
 * check walk device_check.c.
 *
 * Lock order (device.h): the device lock, then stream locks in the order of
 * the stream list, then the natives lock.  Device-wide operations that must
 * see every stream at one moment (install, usage, check) hold all stream
 * locks together; cleanup takes them one at a time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"

static hippo_status backend_open(const hippo_device_desc *desc,
                                 hippo__backend **be) {
  uint64_t capacity = desc->capacity ? desc->capacity : HIPPO__DEFAULT_CAPACITY;
  uint64_t alignment =
      desc->alignment ? desc->alignment : HIPPO__DEFAULT_ALIGNMENT;
  hippo_status st;
  if ((desc->backend == HIPPO_BACKEND_HOST ||
       desc->backend == HIPPO_BACKEND_DRY ||
       desc->backend == HIPPO_BACKEND_AUTO) &&
      (!hippo__is_pow2(alignment) || alignment > (UINT64_C(1) << 30)))
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "device_open: alignment %llu is not a power of "
                            "two up to 1 GiB",
                            (unsigned long long)alignment);
  switch (desc->backend) {
  case HIPPO_BACKEND_HIP:
    return hippo__backend_hip_create(desc->hip_device, desc->capacity,
                                     desc->alignment, be);
  case HIPPO_BACKEND_HOST:
    return hippo__backend_host_create(capacity, alignment, be);
  case HIPPO_BACKEND_DRY:
    return hippo__backend_dry_create(capacity, alignment, be);
  case HIPPO_BACKEND_AUTO:
    st = hippo__backend_hip_create(desc->hip_device, desc->capacity,
                                   desc->alignment, be);
    if (st == HIPPO_NO_DEVICE) {
      char why[sizeof (*be)->note];
      snprintf(why, sizeof why, "AUTO chose HOST: %s", hippo__error_get());
      st = hippo__backend_host_create(capacity, alignment, be);
      if (st == HIPPO_SUCCESS)
        memcpy((*be)->note, why, sizeof why);
      return st;
    }
    if (st == HIPPO_SUCCESS)
      snprintf((*be)->note, sizeof (*be)->note, "AUTO chose HIP: %s",
               (*be)->runtime);
    return st;
  default:
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "device_open: backend %u is not one of "
                            "HIPPO_BACKEND_AUTO, _HIP, _HOST, _DRY",
                            desc->backend);
  }
}

hippo_status hippo__device_open(const hippo_device_desc *desc,
                                const hippo_layout *layout,
                                const hippo_pool_options *pools,
                                const hippo__stream_hooks *hooks,
                                hippo_device **out) {
  hippo_device *dev;
  hippo__backend *be;
  hippo_status st;
  const uint32_t known = HIPPO_DEVICE_FIXED_LAYOUT |
                         HIPPO_DEVICE_AUTO_RELOCATE | HIPPO_DEVICE_NO_MOVE |
                         HIPPO_DEVICE_HOST_GRAPHS;
  if (desc->flags & ~known)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "device_open: unknown flags %#x",
                            desc->flags & ~known);
  dev = calloc(1, sizeof *dev);
  if (!dev)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY, "host memory for a device");
  st = backend_open(desc, &be);
  if (st != HIPPO_SUCCESS) {
    free(dev);
    return st;
  }
  dev->be = be;
  st = hippo__layout_resolve(layout, pools, be, &dev->layout);
  if (st != HIPPO_SUCCESS) {
    be->ops->destroy(be);
    free(dev);
    return st;
  }
  hippo__mutex_init(&dev->lock);
  hippo__mutex_init(&dev->natives_lock);
  pthread_cond_init(&dev->natives_idle, NULL);
  hippo__events_init(&dev->events, be);
  hippo__graphs_init(&dev->graphs);
  dev->magic = HIPPO__DEVICE_MAGIC;
  dev->flags = desc->flags;
  dev->env = (hippo__stream_env){.device = dev,
                                 .be = be,
                                 .acct = &dev->acct,
                                 .events = &dev->events,
                                 .graphs = &dev->graphs,
                                 .hooks = hooks,
                                 .flags = desc->flags,
                                 .may_free = hippo__device_may_free,
                                 .may_free_ctx = dev};
  dev->hip_device = desc->hip_device;
  *out = dev;
  return HIPPO_SUCCESS;
}

hippo_status hippo__device_close(hippo_device *dev) {
  hippo__mutex_take(&dev->lock);
  if (dev->stream_count) {
    uint32_t n = dev->stream_count;
    hippo__mutex_drop(&dev->lock);
    return hippo__error_set(HIPPO_BUSY,
                            "device_close: %u streams are still attached; "
                            "detach them first",
                            n);
  }
  dev->magic = 0;
  hippo__mutex_drop(&dev->lock);
  /* graphs never retired keep their slices until now */
  for (uint32_t i = 0; i < dev->retained_count; i++) {
    hippo__manager_fini(dev->retained[i]);
    free(dev->retained[i]);
  }
  free(dev->retained);
  hippo__graphs_fini(&dev->graphs);
  hippo__events_fini(&dev->events);
  free(dev->last_failures.v);
  hippo__mutex_fini(&dev->lock);
  hippo__mutex_fini(&dev->natives_lock);
  pthread_cond_destroy(&dev->natives_idle);
  dev->be->ops->destroy(dev->be);
  free(dev->streams);
  free(dev);
  return HIPPO_SUCCESS;
}

hippo_status hippo__device_info(hippo_device *dev, hippo_device_info *out) {
  uint64_t free_bytes = 0, total = 0;
  hippo_status st = dev->be->ops->mem_info(dev->be, &free_bytes, &total);
  if (st != HIPPO_SUCCESS)
    return hippo__error_wrap(st, "device_info");
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->backend = dev->be->kind;
  out->hip_device = dev->hip_device;
  out->total_memory = total;
  out->free_memory = free_bytes;
  out->alignment = dev->be->alignment;
  memcpy(out->name, dev->be->device_name, sizeof out->name);
  memcpy(out->arch, dev->be->arch, sizeof out->arch);
  memcpy(out->runtime, dev->be->runtime, sizeof out->runtime);
  memcpy(out->note, dev->be->note, sizeof out->note);
  if (dev->be->ops->vm_granularity &&
      dev->be->ops->vm_granularity(dev->be, &out->vm_granularity) !=
          HIPPO_SUCCESS)
    out->vm_granularity = 0;
  out->capture_maps = out->vm_granularity && dev->be->vm_captures;
  hippo__mutex_take(&dev->lock);
  out->streams = dev->stream_count;
  out->preset = dev->layout.preset;
  out->pool_count = dev->layout.count;
  if (dev->layout.note) { /* after the backend's, if any, with why the
                             device has no virtual memory when known */
    size_t n = strnlen(out->note, sizeof out->note);
    snprintf(out->note + n, sizeof out->note - n, "%s%s%s%s%s",
             n ? "; " : "", dev->layout.note,
             dev->be->vm_why[0] ? " (" : "", dev->be->vm_why,
             dev->be->vm_why[0] ? ")" : "");
  }
  hippo__mutex_drop(&dev->lock);
  return HIPPO_SUCCESS;
}

hippo_status hippo__stream_attach(hippo_device *dev, void *native,
                                  hippo_stream **out) {
  hippo_stream *s;
  hippo__pool **pools;
  uint32_t count;
  hippo_status st;

  /* The runtimes' per-thread default stream handle (cudaStreamPerThread,
   * hipStreamPerThread: 2, cuda_runtime_api.h, hip_runtime_api.h) names
   * another stream on each thread that passes it: one manager for it
   * would reuse a block one thread's work freed for another thread's
   * work, unordered (issue 40 item 10).  The legacy handle (1) names the
   * one null stream, as NULL does (attached apart, two managers of one
   * stream: safe, each reuses its own). */
  if (dev->be->kind == HIPPO_BACKEND_HIP && native == (void *)2)
    return hippo__error_set(
        HIPPO_INVALID_ARGUMENT,
        "stream_attach: stream handle 2 is the per-thread default stream "
        "(cudaStreamPerThread, hipStreamPerThread), another stream on each "
        "thread: attach a stream of its own per thread instead");
  s = malloc(sizeof *s);
  if (!s)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY, "host memory for a stream");
  hippo__mutex_take(&dev->lock);
  for (uint32_t i = 0; i < dev->stream_count; i++)
    if (dev->streams[i]->native == native) {
      hippo__mutex_drop(&dev->lock);
      free(s);
      return hippo__error_set(HIPPO_BUSY,
                              "stream_attach: native stream %p is already "
                              "attached to this device (one manager per "
                              "stream)",
                              native);
    }
  {
    /* The backend must know the stream: asking for its capture status
     * validates it (hipStreamIsCapturing on HIP). */
    bool capturing;
    uint64_t id;
    st = dev->be->ops->capture_status(dev->be, native, &capturing, &id);
    if (st == HIPPO_SUCCESS && dev->be->ops->stream_check)
      st = dev->be->ops->stream_check(dev->be, native);
    if (st != HIPPO_SUCCESS) {
      hippo__mutex_drop(&dev->lock);
      free(s);
      return hippo__error_wrap(st,
                               "stream_attach: native stream %p: the backend "
                               "does not take it as a stream of this device",
                               native);
    }
  }
  if (dev->stream_count == dev->stream_cap) {
    uint32_t cap = dev->stream_cap ? dev->stream_cap * 2 : 8;
    hippo_stream **grown;
    /* streams is read holding either the device lock or the natives lock
     * (view_open, the out-of-memory message): it moves holding both */
    hippo__mutex_take(&dev->natives_lock);
    grown = realloc(dev->streams, cap * sizeof *grown);
    if (grown)
      dev->streams = grown;
    hippo__mutex_drop(&dev->natives_lock);
    if (!grown) {
      hippo__mutex_drop(&dev->lock);
      free(s);
      return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                              "host memory for %u streams", cap);
    }
    dev->stream_cap = cap;
  }
  st = hippo__manager_init(s, &dev->env, native);
  if (st == HIPPO_SUCCESS) {
    st = hippo__manager_build(s, &dev->layout, &pools, &count);
    if (st == HIPPO_SUCCESS)
      hippo__manager_swap(s, pools, count);
    else
      hippo__manager_fini(s);
  }
  if (st != HIPPO_SUCCESS) {
    hippo__mutex_drop(&dev->lock);
    free(s);
    return st;
  }
  hippo__mutex_take(&dev->natives_lock);
  dev->streams[dev->stream_count++] = s;
  hippo__mutex_drop(&dev->natives_lock);
  hippo__mutex_drop(&dev->lock);
  *out = s;
  return HIPPO_SUCCESS;
}

/* The attached streams, copied under the natives lock, so the backend
 * calls made on their native streams (capture questions, waits) hold no
 * lock: while a view is open (natives_users > 0) no detach removes (or
 * frees) a stream, so each stays valid.  Without host memory for a long
 * list, the view keeps the lock instead. */
typedef struct streams_view {
  hippo_stream **v;
  uint32_t n;
  bool locked;
  hippo_stream *buf[32];
} streams_view;

static void view_open(hippo_device *dev, streams_view *sv) {
  hippo__mutex_take(&dev->natives_lock);
  sv->n = dev->stream_count;
  sv->locked = false;
  sv->v = sv->n <= 32 ? sv->buf : malloc(sv->n * sizeof *sv->v);
  if (!sv->v) {
    sv->v = dev->streams;
    sv->locked = true;
    return;
  }
  if (sv->n)
    memcpy(sv->v, dev->streams, sv->n * sizeof *sv->v);
  dev->natives_users++;
  hippo__mutex_drop(&dev->natives_lock);
}

static void view_close(hippo_device *dev, streams_view *sv) {
  if (!sv->locked) {
    hippo__mutex_take(&dev->natives_lock);
    if (--dev->natives_users == 0)
      pthread_cond_broadcast(&dev->natives_idle);
    if (sv->v != sv->buf)
      free(sv->v);
  }
  hippo__mutex_drop(&dev->natives_lock);
}


hippo_status hippo__device_refuse_while_recording(hippo_device *dev,
                                                  const char *call) {
  hippo_status st = HIPPO_SUCCESS;
  streams_view sv;
  view_open(dev, &sv);
  for (uint32_t i = 0; i < sv.n && st == HIPPO_SUCCESS; i++) {
    uint64_t id = 0;
    bool capturing;
    st = hippo__stream_capture(sv.v[i], &id); /* O(1) a stream */
    capturing = id != 0;
    if (st != HIPPO_SUCCESS)
      st = hippo__error_wrap(st, "%s", call);
    else if (capturing)
      st = hippo__error_set(HIPPO_GRAPH_RECORDING,
                            "%s: native stream %p is capturing graph %llu; "
                            "the pages it touches keep their addresses "
                            "until the capture ends: retry after it",
                            call, sv.v[i]->native, (unsigned long long)id);
  }
  view_close(dev, &sv);
  return st;
}

hippo_status hippo__device_may_free(void *ctx, bool *may_free) {
  hippo__error_kept kept;
  hippo_status st;
  /* the answer is a yes or a no, not the caller's failure: last_error
   * keeps what it said (an out-of-memory's detail, say) */
  hippo__error_keep(&kept);
  st = hippo__device_refuse_while_recording(ctx, "freeing pages");
  hippo__error_restore(&kept);
  *may_free = st == HIPPO_SUCCESS;
  return st == HIPPO_GRAPH_RECORDING ? HIPPO_SUCCESS : st;
}

/* The device's bytes in use, summed over the streams whose lock is free
 * now (and `s`, whose lock the caller holds); *missed counts the others. */
uint64_t hippo__device_in_use(hippo_device *dev, const hippo_stream *s,
                             uint32_t *missed) {
  uint64_t bytes = s->in_use;
  *missed = 0;
  hippo__mutex_take(&dev->natives_lock);
  for (uint32_t i = 0; i < dev->stream_count; i++) {
    hippo_stream *o = dev->streams[i];
    if (o == s)
      continue;
    if (hippo__lock_try(&o->lock)) {
      bytes += o->in_use;
      hippo__lock_drop(&o->lock);
    } else {
      ++*missed;
    }
  }
  hippo__mutex_drop(&dev->natives_lock);
  return bytes;
}

hippo_status hippo__device_finish(hippo_device *dev) {
  hippo_status first = HIPPO_SUCCESS;
  streams_view sv;
  view_open(dev, &sv);
  for (uint32_t i = 0; i < sv.n; i++) {
    void *native = sv.v[i]->native;
    hippo_status st = dev->be->ops->stream_sync(dev->be, native);
    if (st != HIPPO_SUCCESS && first == HIPPO_SUCCESS)
      first = hippo__error_wrap(st, "waiting for the work of native stream "
                                "%p",
                                native);
  }
  view_close(dev, &sv);
  return first;
}

hippo_status hippo__emu_stream_destroy(hippo_device *dev, void *native) {
  hippo_status st;
  hippo__mutex_take(&dev->lock);
  for (uint32_t i = 0; i < dev->stream_count; i++)
    if (dev->streams[i]->native == native) {
      hippo__mutex_drop(&dev->lock);
      return hippo__error_set(HIPPO_BUSY,
                              "emu_stream_destroy: the stream is still "
                              "attached; detach it first");
    }
  st = dev->be->ops->emu_stream_destroy(dev->be, native);
  hippo__mutex_drop(&dev->lock);
  return st;
}

static hippo_status retained_sweep(hippo_device *dev);

/* A detach is also a time to give back what retained streams still hold
 * after a free that failed (graph_retire's sweep): without it a page
 * whose free failed once stayed, after every stream was detached and
 * every graph retired, until a cleanup of every stream or device_close
 * (the fuzz driver, seed 32).  That sweep's failure is not the detach's:
 * the stream it concerns stays retained for the next try (device lock
 * held). */
static void retained_retry(hippo_device *dev) {
  if (dev->retained_count)
    (void)retained_sweep(dev);
}

/* Room for one more retained stream, so a detach never fails halfway. */
static hippo_status retained_room(hippo_device *dev) {
  if (dev->retained_count < dev->retained_cap)
    return HIPPO_SUCCESS;
  {
    uint32_t cap = dev->retained_cap ? dev->retained_cap * 2 : 4;
    hippo_stream **grown = realloc(dev->retained, cap * sizeof *grown);
    if (!grown)
      return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                              "stream_detach: host memory for %u retained "
                              "streams",
                              cap);
    dev->retained = grown;
    dev->retained_cap = cap;
  }
  return HIPPO_SUCCESS;
}

/* Detach: every reservation of the stream is dropped and every page given
 * back.  Refused while a stream of the device captures (nothing is freed
 * then).  When a page cannot be given back, the stream stays attached --
 * its reservations released, the page still held and accounted -- and the
 * backend's status is returned: detach again to retry. */
hippo_status hippo__stream_detach(hippo_stream *s) {
  hippo_device *dev = s->device;
  hippo_status st;
  uint32_t i;
  hippo__mutex_take(&dev->lock);
  for (i = 0; i < dev->stream_count && dev->streams[i] != s; i++)
    ;
  if (i == dev->stream_count) {
    hippo__mutex_drop(&dev->lock);
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "stream_detach: the stream is not attached");
  }
  st = hippo__device_refuse_while_recording(dev, "stream_detach");
  if (st == HIPPO_SUCCESS)
    st = retained_room(dev);
  if (st != HIPPO_SUCCESS) {
    hippo__mutex_drop(&dev->lock);
    return st;
  }
  /* record_use, in an order where a failure changes nothing: (1) what
   * other streams use of this one's slices is waited for; (2) the events
   * of what this stream uses of the others' slices are recorded (its work
   * so far); (3) only then those uses are marked as recorded */
  hippo__lock_take(&s->lock);
  st = hippo__manager_drop_uses_locked(s);
  hippo__lock_drop(&s->lock);
  if (st != HIPPO_SUCCESS) {
    hippo__mutex_drop(&dev->lock);
    return hippo__error_wrap(st, "stream_detach: waiting for the streams "
                             "that use its reservations (record_use); "
                             "nothing was released, retry");
  }
  for (int mark = 0; mark < 2; mark++)
    for (uint32_t k = 0; k < dev->stream_count && st == HIPPO_SUCCESS; k++) {
      hippo_stream *o = dev->streams[k];
      if (o == s)
        continue;
      hippo__lock_take(&o->lock);
      st = hippo__manager_user_leaves_locked(o, s, mark);
      hippo__lock_drop(&o->lock);
    }
  if (st != HIPPO_SUCCESS) {
    hippo__mutex_drop(&dev->lock);
    return st;
  }
  hippo__lock_take(&s->lock);
  hippo__manager_release_all_locked(s);
  st = hippo__manager_cleanup_locked(s);
  if (st != HIPPO_SUCCESS) {
    uint64_t pages = atomic_load(&s->acct.pages);
    hippo__lock_drop(&s->lock);
    hippo__mutex_drop(&dev->lock);
    return hippo__error_wrap(st,
                             "stream_detach: %llu pages could not be given "
                             "back, so the stream stays attached (its "
                             "reservations are released); detach again to "
                             "retry",
                             (unsigned long long)pages);
  }
  /* Keep the order of the others: it is the lock order.  A view of the
   * natives in use (a capture question, a wait) may still call on this
   * one: it goes once they are done. */
  hippo__mutex_take(&dev->natives_lock);
  while (dev->natives_users)
    pthread_cond_wait(&dev->natives_idle, &dev->natives_lock.m);
  memmove(&dev->streams[i], &dev->streams[i + 1],
          (dev->stream_count - i - 1) * sizeof *dev->streams);
  dev->stream_count--;
  hippo__mutex_drop(&dev->natives_lock);
  dev->detached_peak_in_use += s->peak_in_use;
  if (s->holds) {
    /* a graph still holds slices of it: those pages stay, retained, until
     * graph_retire or device_close (guard.h) */
    /* the native may go: never asked again */
    hippo__capture_forget(&s->capture);
    s->native = NULL;
    s->gate.own_waits = false; /* its work: the device's wait */
    dev->retained[dev->retained_count++] = s;
    hippo__lock_drop(&s->lock);
    retained_retry(dev);
    hippo__mutex_drop(&dev->lock);
    return HIPPO_SUCCESS;
  }
  hippo__manager_fini(s); /* no page left to free */
  hippo__lock_drop(&s->lock);
  free(s);
  retained_retry(dev);
  hippo__mutex_drop(&dev->lock);
  return HIPPO_SUCCESS;
}

/* Give back what retained streams hold once no graph holds it (device lock
 * held; the caller has made sure no stream of the device captures:
 * stream_detach and cleanup refuse then, graph_retire asks the gate); a
 * stream whose pages could not all go back stays, to be tried
 * again by the next stream_detach, graph_retire or cleanup of every
 * stream.  The first failure.  A stream goes once it holds nothing, even
 * when its cleanup answered a failure: a page whose free failed may have
 * gone in the same cleanup after all (an ARENA's outdated page fails on
 * the drain list, waits on the empty FIFO and goes from there), and a
 * retained stream holding nothing broke the device's invariant (the fuzz
 * driver, seeds 38, 41, 56, 67, 73, 98 and 110). */
static hippo_status retained_sweep(hippo_device *dev) {
  hippo_status first = HIPPO_SUCCESS;
  uint32_t kept = 0;
  for (uint32_t i = 0; i < dev->retained_count; i++) {
    hippo_stream *s = dev->retained[i];
    hippo_status st = s->holds ? HIPPO_SUCCESS
                               : hippo__manager_cleanup_locked(s);
    if (s->holds == 0 && atomic_load(&s->acct.pages) == 0) {
      hippo__manager_fini(s);
      free(s);
    } else {
      dev->retained[kept++] = s;
    }
    if (st != HIPPO_SUCCESS && first == HIPPO_SUCCESS)
      first = st;
  }
  dev->retained_count = kept;
  return first;
}

/* HIPPO_GRAPH_RECORDING (naming the stream) while a stream of dev still
 * captures graph `id`: its slices are in a graph being built. */
static hippo_status refuse_while_capturing(hippo_device *dev, uint64_t id) {
  hippo_status st = HIPPO_SUCCESS;
  streams_view sv;
  view_open(dev, &sv);
  for (uint32_t i = 0; i < sv.n && st == HIPPO_SUCCESS; i++) {
    uint64_t now = 0;
    st = hippo__stream_capture(sv.v[i], &now);
    if (st != HIPPO_SUCCESS)
      st = hippo__error_wrap(st, "graph_retire");
    else if (now == id)
      st = hippo__error_set(HIPPO_GRAPH_RECORDING,
                            "graph_retire: native stream %p is still "
                            "capturing graph %llu, whose slices stay kept; "
                            "retire it once the capture ended and its "
                            "graph was destroyed",
                            sv.v[i]->native, (unsigned long long)id);
  }
  view_close(dev, &sv);
  return st;
}

hippo_status hippo__graph_retire(hippo_device *dev, uint64_t id) {
  hippo__guard *g = NULL;
  uint32_t n = 0;
  hippo_status st;
  if (hippo__graphs_known(&dev->graphs, id) &&
      (st = refuse_while_capturing(dev, id)) != HIPPO_SUCCESS)
    return st;
  /* the registry's entries and the streams' hold counts change under the
   * device lock together, so a check (which holds it and every stream's)
   * never sees the one without the other; the registry's lock is a leaf
   * below it */
  hippo__mutex_take(&dev->lock);
  st = hippo__graphs_take(&dev->graphs, id, &g, &n);
  if (st != HIPPO_SUCCESS) {
    hippo__mutex_drop(&dev->lock);
    return st;
  }
  for (uint32_t i = 0; i < n; i++) {
    hippo_stream *s = g[i].s;
    hippo__lock_take(&s->lock);
    hippo__manager_unhold_locked(s, g[i].pool, g[i].slice);
    hippo__lock_drop(&s->lock);
  }
  /* the pages of detached streams go back now unless a stream of the
   * device captures (hippo frees no page then: they stay with the device,
   * reserved and free, until the next stream_detach, graph_retire or
   * cleanup of every stream after the capture; issue 30); a page whose
   * free fails stays the same way.  The holds are gone all the same. */
  if (dev->retained_count) {
    bool may_free = false;
    if (hippo__device_may_free(dev, &may_free) == HIPPO_SUCCESS && may_free)
      (void)retained_sweep(dev);
  }
  hippo__mutex_drop(&dev->lock);
  free(g);
  return HIPPO_SUCCESS;
}

void hippo__device_lock_streams(hippo_device *dev) {
  for (uint32_t i = 0; i < dev->stream_count; i++)
    hippo__lock_take(&dev->streams[i]->lock);
}

void hippo__device_unlock_streams(hippo_device *dev) {
  for (uint32_t i = dev->stream_count; i-- > 0;)
    hippo__lock_drop(&dev->streams[i]->lock);
}

hippo_status hippo__cleanup(hippo_device *dev, hippo_stream *only) {
  hippo_status first = HIPPO_SUCCESS, st;
  hippo__mutex_take(&dev->lock);
  st = hippo__device_refuse_while_recording(dev, "cleanup");
  if (st != HIPPO_SUCCESS) {
    hippo__mutex_drop(&dev->lock);
    return st;
  }
  for (uint32_t i = 0; i < dev->stream_count; i++) {
    hippo_stream *s = dev->streams[i];
    if (only && s != only)
      continue;
    hippo__lock_take(&s->lock);
    hippo__manager_defer_frees(s, true); /* the frees come after the lock */
    st = hippo__manager_cleanup_locked(s);
    hippo__manager_defer_frees(s, false);
    hippo__lock_drop(&s->lock);
    if (st == HIPPO_SUCCESS)
      st = hippo__manager_flush(s, true);
    else
      (void)hippo__manager_flush(s, true);
    if (st != HIPPO_SUCCESS && first == HIPPO_SUCCESS)
      first = st;
  }
  /* and the empty pages of detached streams whose graphs were retired (a
   * free that failed in graph_retire's sweep) */
  if (!only && dev->retained_count) {
    st = retained_sweep(dev);
    if (st != HIPPO_SUCCESS && first == HIPPO_SUCCESS)
      first = st;
  }
  hippo__mutex_drop(&dev->lock);
  return first;
}
