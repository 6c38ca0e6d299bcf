/* backend_hip_streams.c -- the HIP backend's streams, copies and events
 * (backend.h copy, stream_sync, event_*, capture_status, stream_check):
 * each a runtime call on the backend's device (begin or hippo__hip_enter,
 * then leave: backend_hip.h), with what hippo needs of the runtime's
 * answers: a copy only inside pages or mapped granules hippo holds, a
 * capturing stream never synchronized, a capture's id or why there is
 * none, a stream of another device refused.
 */
#include <config.h>

#include <pthread.h>
#include <stdatomic.h>

#include "backend_hip.h"

/* ---- streams, copies, events ------------------------------------------------ */

hippo_status hippo__hip_copy(hippo__backend *be, void *stream, uint64_t dst,
                             uint64_t src, uint64_t size) {
  gpu_backend *g = gpu_of(be);
  dev_scope sc;
  hippo_status st;
  int err;

  if ((st = hippo__hip_call(g, HIPPO_CALL_COPY)) != HIPPO_SUCCESS)
    return st;
  if (size == 0)
    return HIPPO_SUCCESS;
  /* inside pages hippo holds (emu_copy takes the caller's addresses) */
  if ((st = hippo__hip_inside(g, src, size, "copy", "source")) !=
          HIPPO_SUCCESS ||
      (st = hippo__hip_inside(g, dst, size, "copy", "destination")) !=
          HIPPO_SUCCESS)
    return st;
  if ((st = hippo__hip_enter(g, "copy", &sc)) != HIPPO_SUCCESS)
    return st;
  st = leave(g, &sc,
             RT(g,
                g->rt->memcpy_async((void *)(uintptr_t)dst,
                                    (const void *)(uintptr_t)src, (size_t)size,
                                    HIPPO__GPU_MEMCPY_D2D, stream),
                "MemcpyAsync", NULL));
  if (st == HIPPO_SUCCESS) {
    pthread_mutex_lock(&g->lock);
    g->bytes_copied += size;
    pthread_mutex_unlock(&g->lock);
  }
  return st;
}

hippo_status hippo__hip_stream_sync(hippo__backend *be, void *stream) {
  gpu_backend *g = gpu_of(be);
  int cs = HIPPO__GPU_CAPTURE_NONE, err;
  dev_scope sc;
  hippo_status st;

  if ((st = begin(g, HIPPO_CALL_SYNC, "stream_sync", &sc)) != HIPPO_SUCCESS)
    return st;
  /* A stream that captures is refused before the runtime is asked: its
   * synchronize would invalidate the capture (clr hip_stream.cpp
   * StreamCaptureOngoing; CUDA lists it among the operations a capture
   * prohibits), and so would the legacy stream's while a blocking stream
   * captures (906) -- hippo never breaks its caller's capture (issue 40
   * item 8). */
  err = g->rt->stream_is_capturing(stream, &cs);
  if (err == HIPPO__GPU_CAPTURE_IMPLICIT)
    handled(g->rt);
  if (err == HIPPO__GPU_CAPTURE_IMPLICIT ||
      (err == HIPPO__GPU_SUCCESS && cs != HIPPO__GPU_CAPTURE_NONE))
    return leave(g, &sc,
                 hippo__error_set(HIPPO_BACKEND_ERROR,
                                  "%s stream_sync: stream %p %s; "
                                  "synchronizing it would invalidate the "
                                  "capture (%sStreamSynchronize answers "
                                  "StreamCaptureUnsupported): end the "
                                  "capture first",
                                  g->rt->name, stream,
                                  err == HIPPO__GPU_SUCCESS
                                      ? "is capturing"
                                      : "is the legacy stream, and a "
                                        "blocking stream captures",
                                  g->rt->prefix));
  atomic_fetch_add_explicit(&g->waits, 1, memory_order_relaxed);
  return leave(g, &sc,
               RT(g, g->rt->stream_sync(stream), "StreamSynchronize", NULL));
}

hippo_status hippo__hip_event_create(hippo__backend *be, void **event) {
  gpu_backend *g = gpu_of(be);
  dev_scope sc;
  hippo_status st;
  int err;

  if ((st = begin(g, HIPPO_CALL_EVENT, "event_create", &sc)) != HIPPO_SUCCESS)
    return st;
  return leave(g, &sc,
               RT(g,
                  g->rt->event_create(event, HIPPO__GPU_EVENT_DISABLE_TIMING),
                  "EventCreateWithFlags", NULL));
}

hippo_status hippo__hip_event_record(hippo__backend *be, void *event,
                                     void *stream) {
  gpu_backend *g = gpu_of(be);
  dev_scope sc;
  hippo_status st;
  int err;

  if ((st = begin(g, HIPPO_CALL_EVENT, "event_record", &sc)) != HIPPO_SUCCESS)
    return st;
  return leave(g, &sc,
               RT(g, g->rt->event_record(event, stream), "EventRecord", NULL));
}

hippo_status hippo__hip_event_wait(hippo__backend *be, void *event) {
  gpu_backend *g = gpu_of(be);
  hippo_status st;
  int err;

  if ((st = hippo__hip_call(g, HIPPO_CALL_EVENT)) != HIPPO_SUCCESS)
    return st;
  atomic_fetch_add_explicit(&g->waits, 1, memory_order_relaxed);
  return RT(g, g->rt->event_sync(event), "EventSynchronize", NULL);
}

hippo_status hippo__hip_event_query(hippo__backend *be, void *event,
                                    bool *done) {
  gpu_backend *g = gpu_of(be);
  hippo_status st;
  int err;

  relaxed_scope rs;

  if ((st = hippo__hip_call(g, HIPPO_CALL_EVENT)) != HIPPO_SUCCESS)
    return st;
  relax(g, &rs);
  err = g->rt->event_query(event);
  unrelax(g, &rs);
  *done = err == HIPPO__GPU_SUCCESS;
  if (err == HIPPO__GPU_NOT_READY)
    handled(g->rt);
  if (err == HIPPO__GPU_SUCCESS || err == HIPPO__GPU_NOT_READY)
    return HIPPO_SUCCESS;
  return hippo__gpu_fail(g->rt, err, "EventQuery", NULL);
}

hippo_status hippo__hip_event_destroy(hippo__backend *be, void *event) {
  gpu_backend *g = gpu_of(be);
  int err;
  return RT(g, g->rt->event_destroy(event), "EventDestroy", NULL);
}

hippo_status hippo__hip_capture_status(hippo__backend *be, void *stream,
                                       bool *capturing, uint64_t *capture_id) {
  gpu_backend *g = gpu_of(be);
  unsigned long long id = 0;
  dev_scope sc;
  hippo_status st;
  int cs = HIPPO__GPU_CAPTURE_NONE, err;

  if ((st = begin(g, HIPPO_CALL_CAPTURE_QUERY, "capture_status", &sc)) != HIPPO_SUCCESS)
    return st;
  err = g->rt->stream_is_capturing(stream, &cs);
  if (err == HIPPO__GPU_CAPTURE_IMPLICIT) {
    /* The legacy default stream, while a blocking stream of the device
     * captures: the runtime refuses work on it until that capture ends
     * (CUDA: "the legacy stream is in an unusable state"), so nothing may
     * be asked of the driver for it -- no page, no copy, no event.  It
     * records no graph of its own, so there is no id to hold for: the
     * call is refused as one made during a capture, and the caller
     * retries once the capture ended. */
    handled(g->rt);
    return leave(g, &sc,
                 hippo__error_set(HIPPO_GRAPH_RECORDING,
                                  "%s StreamIsCapturing: the legacy default "
                                  "stream is unusable while another stream "
                                  "of the device captures (%s, %d); retry "
                                  "once that capture ended, or attach a "
                                  "stream of your own",
                                  g->rt->name,
                                  hippo__gpu_err_name(g->rt->flavor, g->rt,
                                                      err),
                                  err));
  }
  /* not a stream: CUDA's 400; ROCm answers 709 (clr hip_stream.cpp,
   * hipErrorContextIsDestroyed for a stream it does not know) */
  if (err == HIPPO__GPU_INVALID_HANDLE ||
      (g->rt->flavor == HIPPO__GPU_HIP &&
       err == HIPPO__GPU_CONTEXT_DESTROYED))
    return leave(g, &sc,
                 hippo__error_set(HIPPO_INVALID_ARGUMENT,
                                  "%s StreamIsCapturing: %p is not a stream "
                                  "of the runtime (%s, %d)",
                                  g->rt->name, stream,
                                  hippo__gpu_err_name(g->rt->flavor, g->rt,
                                                      err),
                                  err));
  if (err != HIPPO__GPU_SUCCESS)
    return leave(g, &sc, hippo__gpu_fail(g->rt, err, "StreamIsCapturing",
                                         NULL));
  /* An invalidated capture has not ended yet: still capturing, but with
   * no id to hold for (both runtimes give the id of an active capture
   * only: clr hip_graph.cpp hipStreamGetCaptureInfo_common), so the call
   * is refused and nothing changes until the caller ends it (issue 40
   * item 8) */
  if (cs == HIPPO__GPU_CAPTURE_STATUS_INVALIDATED)
    return leave(g, &sc,
                 hippo__error_set(HIPPO_GRAPH_RECORDING,
                                  "%s StreamIsCapturing: the runtime "
                                  "invalidated the capture of stream %p "
                                  "(status %d: a call the capture "
                                  "prohibits was made); end it (%sStream"
                                  "EndCapture answers StreamCapture"
                                  "Invalidated), then retry",
                                  g->rt->name, stream, cs, g->rt->prefix));
  *capturing = cs != HIPPO__GPU_CAPTURE_NONE;
  if (*capturing && capture_id) {
    err = g->rt->stream_capture_info(stream, &cs, &id, NULL, NULL, NULL,
                                     NULL);
    if (err != HIPPO__GPU_SUCCESS)
      return leave(g, &sc, hippo__gpu_fail(g->rt, err,
                                           "StreamGetCaptureInfo", NULL));
  }
  if (*capturing && capture_id && id == 0)
    /* CUDA gives the id only for an active capture: an invalidated one
     * (still to be ended) may answer none, and 0 would read as "not
     * capturing" (backend.h) */
    return leave(g, &sc,
                 hippo__error_set(HIPPO_GRAPH_RECORDING,
                                  "%s StreamGetCaptureInfo: stream %p is "
                                  "capturing (status %d) but the runtime "
                                  "gives no capture id, as for a capture "
                                  "it invalidated; end the capture, then "
                                  "retry",
                                  g->rt->name, stream, cs));
  if (capture_id)
    *capture_id = *capturing ? (uint64_t)id : 0;
  return leave(g, &sc, HIPPO_SUCCESS);
}

/* The device of a stream from its context (CUDA: cuStreamGetCtx, then
 * cuCtxGetDevice with that context pushed; the legacy stream's context is
 * the current one, hence hippo__hip_enter). */
static hippo_status device_of_ctx(gpu_backend *g, void *stream, int *dev) {
  const hippo__gpu_ctx_calls *c = &g->rt->ctx;
  void *ctx = NULL, *popped;
  hippo_status st;
  dev_scope sc;
  int err;
  if ((st = hippo__hip_enter(g, "stream_check", &sc)) != HIPPO_SUCCESS)
    return st;
  if ((err = c->stream_ctx(stream, &ctx)) != HIPPO__GPU_SUCCESS)
    st = hippo__gpu_vm_fail(g->rt, err, "StreamGetCtx", NULL);
  else if ((err = c->push(ctx)) != HIPPO__GPU_SUCCESS)
    st = hippo__gpu_vm_fail(g->rt, err, "CtxPushCurrent", NULL);
  else {
    if ((err = c->get_device(dev)) != HIPPO__GPU_SUCCESS)
      st = hippo__gpu_vm_fail(g->rt, err, "CtxGetDevice", NULL);
    (void)c->pop(&popped);
  }
  return leave(g, &sc, st);
}

/* A stream of another device is refused (where the runtime can tell).
 * cudaStreamGetDevice came with CUDA 12.8 (cuda_runtime_api.h), and a 12.8
 * runtime on an older driver answers CallRequiresNewerDriver: then the
 * stream's context says, which the driver has told since CUDA 9.2
 * (cuStreamGetCtx, cuCtxGetDevice in cuda.h); without either the check is
 * skipped, and such a stream fails later at EventRecord (issue 40 item
 * 11). */
hippo_status hippo__hip_stream_check(hippo__backend *be, void *stream) {
  gpu_backend *g = gpu_of(be);
  int dev = -1, err = HIPPO__GPU_NOT_SUPPORTED;
  hippo_status st;
  if (!stream)
    return HIPPO_SUCCESS;
  if (g->rt->stream_device)
    err = g->rt->stream_device(stream, &dev);
  if (g->rt->flavor == HIPPO__GPU_CUDA &&
      (err == HIPPO__GPU_NOT_SUPPORTED ||
       err == HIPPO__GPU_CALL_NEEDS_DRIVER)) {
    if (g->rt->stream_device)
      handled(g->rt);
    if (!g->primary || !g->rt->ctx.stream_ctx || !g->rt->ctx.get_device)
      return HIPPO_SUCCESS;
    if ((st = device_of_ctx(g, stream, &dev)) != HIPPO_SUCCESS)
      return hippo__error_wrap(st, "%s stream %p: its device", g->rt->name,
                               stream);
    err = HIPPO__GPU_SUCCESS;
  } else if (!g->rt->stream_device) {
    return HIPPO_SUCCESS;
  }
  if (err != HIPPO__GPU_SUCCESS)
    return hippo__gpu_fail(g->rt, err, "StreamGetDevice", NULL);
  if (dev != g->ordinal)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s stream %p belongs to device %d, this hippo "
                            "device is %s device %d: attach it to a device "
                            "opened with hip_device %d",
                            g->rt->name, stream, dev, g->rt->name,
                            (int)g->ordinal, dev);
  return HIPPO_SUCCESS;
}
