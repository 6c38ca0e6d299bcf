/* backend_hip_emu.c -- emulation slots on a real device (backend.h
 * emu_*): the behaviour suite runs on every backend, so the HIP backend
 * has them too: streams (non-blocking), captures (relaxed mode, so other
 * threads may allocate meanwhile, as on HOST), copies, synchronous host
 * reads and writes of bytes inside a page hippo holds or a mapped
 * granule, fault injection and counters (calls by kind, pages and bytes
 * held, bytes copied, ranges and granules).
 */
#include <config.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend_hip.h"

/* ---- emulation slots on a real device ---------------------------------------- */

static bool own_stream(const gpu_backend *g, void *stream, size_t *at) {
  for (size_t i = 0; i < g->nstreams; i++)
    if (g->streams[i] == stream) {
      if (at)
        *at = i;
      return true;
    }
  return false;
}

hippo_status hippo__hip_emu_stream_create(hippo__backend *be, void **out) {
  gpu_backend *g = gpu_of(be);
  void *s = NULL;
  dev_scope sc;
  hippo_status st;
  int err;

  pthread_mutex_lock(&g->lock);
  if (g->nstreams + g->streams_coming == g->cap_streams) {
    size_t cap = g->cap_streams ? g->cap_streams * 2 : 8;
    void **grown = realloc(g->streams, cap * sizeof *grown);
    if (!grown) {
      pthread_mutex_unlock(&g->lock);
      return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                              "emu_stream_create: host memory");
    }
    g->streams = grown;
    g->cap_streams = cap;
  }
  g->streams_coming++;
  pthread_mutex_unlock(&g->lock);
  st = hippo__hip_enter(g, "emu_stream_create", &sc);
  if (st == HIPPO_SUCCESS)
    st = leave(
        g, &sc,
        RT(g, g->rt->stream_create(&s, HIPPO__GPU_STREAM_NON_BLOCKING),
           "StreamCreateWithFlags", NULL));
  pthread_mutex_lock(&g->lock);
  g->streams_coming--;
  if (st == HIPPO_SUCCESS)
    g->streams[g->nstreams++] = s;
  pthread_mutex_unlock(&g->lock);
  if (st != HIPPO_SUCCESS)
    return st;
  *out = s;
  return HIPPO_SUCCESS;
}

/* A stream emu_stream_create made (else INVALID_ARGUMENT naming `call`). */
static hippo_status known_stream(gpu_backend *g, void *stream,
                                 const char *call) {
  bool known;
  pthread_mutex_lock(&g->lock);
  known = stream && own_stream(g, stream, NULL);
  pthread_mutex_unlock(&g->lock);
  if (known)
    return HIPPO_SUCCESS;
  if (!stream)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s %s: the default stream (NULL) is not "
                            "capturing and cannot capture; use a stream from "
                            "emu_stream_create",
                            g->rt->name, call);
  return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s %s: stream %p is not an emulated stream of this "
                          "device (destroyed, or not from emu_stream_create)",
                          g->rt->name, call, stream);
}

/* emu_copy and emu_stream_sync: the default stream or one of ours. */
hippo_status hippo__hip_emu_stream_check(hippo__backend *be, void *stream,
                                         const char *call) {
  return stream ? known_stream(gpu_of(be), stream, call) : HIPPO_SUCCESS;
}

static hippo_status is_capturing(gpu_backend *g, void *stream, bool *yes,
                                 const char *call) {
  int cs = HIPPO__GPU_CAPTURE_NONE, err;
  hippo_status st = RT(g, g->rt->stream_is_capturing(stream, &cs),
                       "StreamIsCapturing", NULL);
  *yes = cs != HIPPO__GPU_CAPTURE_NONE;
  return st == HIPPO_SUCCESS ? st : hippo__error_wrap(st, "%s", call);
}

hippo_status hippo__hip_emu_stream_destroy(hippo__backend *be, void *stream) {
  gpu_backend *g = gpu_of(be);
  dev_scope sc;
  hippo_status st;
  bool capturing;
  size_t at;
  int err;

  if (!stream)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s emu_stream_destroy: the default stream (NULL) "
                            "cannot be destroyed",
                            g->rt->name);
  if (known_stream(g, stream, "emu_stream_destroy") != HIPPO_SUCCESS)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s emu_stream_destroy: stream %p is not an "
                            "emulated stream of this device (destroyed "
                            "twice?)",
                            g->rt->name, stream);
  if ((st = hippo__hip_enter(g, "emu_stream_destroy", &sc)) != HIPPO_SUCCESS)
    return st;
  st = is_capturing(g, stream, &capturing, "emu_stream_destroy");
  if (st == HIPPO_SUCCESS && capturing)
    st = hippo__error_set(HIPPO_BUSY,
                          "%s emu_stream_destroy: stream %p is capturing; "
                          "end the capture first",
                          g->rt->name, stream);
  if (st == HIPPO_SUCCESS)
    st = RT(g, g->rt->stream_sync(stream), "StreamSynchronize", NULL);
  if (st == HIPPO_SUCCESS)
    st = RT(g, g->rt->stream_destroy(stream), "StreamDestroy", NULL);
  st = leave(g, &sc, st);
  if (st != HIPPO_SUCCESS)
    return st;
  pthread_mutex_lock(&g->lock);
  if (own_stream(g, stream, &at))
    g->streams[at] = g->streams[--g->nstreams];
  pthread_mutex_unlock(&g->lock);
  return HIPPO_SUCCESS;
}

hippo_status hippo__hip_emu_capture_begin(hippo__backend *be, void *stream,
                                          uint64_t *capture_id) {
  gpu_backend *g = gpu_of(be);
  unsigned long long id = 0;
  dev_scope sc;
  hippo_status st;
  bool capturing;
  int cs, err;

  if ((st = known_stream(g, stream, "emu_capture_begin")) != HIPPO_SUCCESS)
    return st;
  if ((st = hippo__hip_enter(g, "emu_capture_begin", &sc)) != HIPPO_SUCCESS)
    return st;
  st = is_capturing(g, stream, &capturing, "emu_capture_begin");
  if (st == HIPPO_SUCCESS && capturing)
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s emu_capture_begin: stream %p is already "
                          "capturing; end that capture first",
                          g->rt->name, stream);
  if (st == HIPPO_SUCCESS)
    st = RT(g, g->rt->begin_capture(stream, HIPPO__GPU_CAPTURE_RELAXED),
            "StreamBeginCapture", NULL);
  if (st == HIPPO_SUCCESS)
    st = RT(g,
            g->rt->stream_capture_info(stream, &cs, &id, NULL, NULL, NULL,
                                       NULL),
            "StreamGetCaptureInfo", NULL);
  if (st == HIPPO_SUCCESS)
    *capture_id = id;
  return leave(g, &sc, st);
}

hippo_status hippo__hip_emu_capture_end(hippo__backend *be, void *stream) {
  gpu_backend *g = gpu_of(be);
  void *graph = NULL;
  dev_scope sc;
  hippo_status st;
  bool capturing;
  int err;

  if ((st = known_stream(g, stream, "emu_capture_end")) != HIPPO_SUCCESS)
    return st;
  if ((st = hippo__hip_enter(g, "emu_capture_end", &sc)) != HIPPO_SUCCESS)
    return st;
  st = is_capturing(g, stream, &capturing, "emu_capture_end");
  if (st == HIPPO_SUCCESS && !capturing)
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s emu_capture_end: stream %p is not capturing",
                          g->rt->name, stream);
  if (st == HIPPO_SUCCESS)
    st = RT(g, g->rt->end_capture(stream, &graph), "StreamEndCapture", NULL);
  if (st == HIPPO_SUCCESS && graph)
    st = RT(g, g->rt->graph_destroy(graph), "GraphDestroy", NULL);
  return leave(g, &sc, st);
}

hippo_status hippo__hip_emu_inject_fault(hippo__backend *be,
                                         hippo_call_kind kind, uint64_t nth,
                                         hippo_status status) {
  gpu_backend *g = gpu_of(be);
  hippo_status st;
  uint64_t at = 0;
  bool any = false;
  pthread_mutex_lock(&g->lock);
  st = hippo__fault_arm(g->rt->name, kind, nth, status,
                        kind < HIPPO_CALL_KINDS ? atomic_load(&g->calls[kind])
                                                : 0,
                        &at);
  if (st == HIPPO_SUCCESS) {
    g->faults[kind].at = at;
    g->faults[kind].status = status;
  }
  for (unsigned k = 0; k < HIPPO_CALL_KINDS; k++)
    any = any || g->faults[k].at != 0;
  atomic_store_explicit(&g->armed, any, memory_order_release);
  pthread_mutex_unlock(&g->lock);
  return st;
}

/* emu_read and emu_write: an async copy on the backend's own
 * non-blocking stream (made at the first, destroyed with the backend) and
 * a wait for that stream only, the thread's capture mode relaxed.  A
 * blocking copy is refused while any stream of the process captures, in
 * every mode, and invalidates every capture on ROCm (clr hip_memory.cpp
 * hipMemcpy_common: CHECK_STREAM_CAPTURING in hip_internal.hpp answers
 * hipErrorStreamCaptureImplicit, 906); CUDA's cudaMemcpy goes through the
 * legacy stream, which breaks a blocking stream's capture the same way
 * (cudaErrorStreamCaptureImplicit, driver_types.h).  A synchronize of a
 * stream that does not capture is a potentially unsafe call while a
 * capture in mode global runs (clr hip_stream.cpp StreamCaptureOngoing),
 * which relaxed mode allows (issue 40 item 7).  The device is current. */
static hippo_status host_copy(gpu_backend *g, void *dst, const void *src,
                              uint64_t size, int kind, const char *what) {
  relaxed_scope rs;
  hippo_status st = HIPPO_SUCCESS;
  void *io, *made = NULL;
  int err;
  pthread_mutex_lock(&g->lock);
  io = g->io;
  pthread_mutex_unlock(&g->lock);
  if (!io) {
    st = RT(g, g->rt->stream_create(&made, HIPPO__GPU_STREAM_NON_BLOCKING),
            "StreamCreateWithFlags (for host reads and writes)", NULL);
    if (st != HIPPO_SUCCESS)
      return st;
    pthread_mutex_lock(&g->lock);
    if (!g->io) { /* else another thread's came first */
      g->io = made;
      made = NULL;
    }
    io = g->io;
    pthread_mutex_unlock(&g->lock);
    if (made)
      (void)g->rt->stream_destroy(made);
  }
  relax(g, &rs);
  err = g->rt->memcpy_async(dst, src, (size_t)size, kind, io);
  if (err != HIPPO__GPU_SUCCESS)
    st = hippo__gpu_fail(g->rt, err, "MemcpyAsync", NULL);
  else if ((err = g->rt->stream_sync(io)) != HIPPO__GPU_SUCCESS)
    st = hippo__gpu_fail(g->rt, err, "StreamSynchronize", NULL);
  unrelax(g, &rs);
  return st == HIPPO_SUCCESS
             ? st
             : hippo__error_wrap(st, "%s %s", g->rt->name, what);
}

hippo_status hippo__hip_emu_read(hippo__backend *be, uint64_t addr,
                                 void *host, uint64_t size) {
  gpu_backend *g = gpu_of(be);
  dev_scope sc;
  hippo_status st;
  if (size == 0)
    return HIPPO_SUCCESS;
  if ((st = hippo__hip_inside(g, addr, size, "emu_read", "device_ptr")) !=
          HIPPO_SUCCESS ||
      (st = hippo__hip_enter(g, "emu_read", &sc)) != HIPPO_SUCCESS)
    return st;
  return leave(g, &sc,
               host_copy(g, host, (const void *)(uintptr_t)addr, size,
                         HIPPO__GPU_MEMCPY_D2H, "emu_read"));
}

hippo_status hippo__hip_emu_write(hippo__backend *be, uint64_t addr,
                                  const void *host, uint64_t size) {
  gpu_backend *g = gpu_of(be);
  dev_scope sc;
  hippo_status st;
  if (size == 0)
    return HIPPO_SUCCESS;
  if ((st = hippo__hip_inside(g, addr, size, "emu_write", "device_ptr")) !=
          HIPPO_SUCCESS ||
      (st = hippo__hip_enter(g, "emu_write", &sc)) != HIPPO_SUCCESS)
    return st;
  /* landed once its stream is synchronized */
  return leave(g, &sc,
               host_copy(g, (void *)(uintptr_t)addr, host, size,
                         HIPPO__GPU_MEMCPY_H2D, "emu_write"));
}

hippo_status hippo__hip_emu_counters(hippo__backend *be,
                                     hippo_emu_counters *out) {
  gpu_backend *g = gpu_of(be);
  hippo_emu_counters c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  for (unsigned k = 0; k < HIPPO_CALL_KINDS; k++)
    c.calls[k] = atomic_load(&g->calls[k]);
  pthread_mutex_lock(&g->lock);
  c.pages_held = g->npages;
  c.bytes_held = g->bytes_held;
  c.peak_bytes_held = g->peak_bytes_held;
  c.bytes_copied = g->bytes_copied;
  c.ranges_held = g->nranges;
  c.bytes_virtual = g->bytes_virtual;
  c.granules_mapped = g->granules_mapped;
  c.bytes_mapped = g->bytes_mapped;
  c.peak_bytes_mapped = g->peak_bytes_mapped;
  c.waits = atomic_load(&g->waits);
  pthread_mutex_unlock(&g->lock);
  return hippo__struct_out(out, &c, sizeof c, 8, "hippo_emu_counters");
}
