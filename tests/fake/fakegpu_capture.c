/* fakegpu_capture.c -- stream capture in the stand-in runtimes: the
 * capture modes (ThreadExchangeStreamCaptureMode) and the checks a
 * potentially unsafe or blocking call makes while captures run, the
 * capture calls (BeginCapture, EndCapture, IsCapturing, GetCaptureInfo)
 * and the graphs a capture makes (instantiated, launched, destroyed).  A
 * capturing stream records its work into the graph, where it never runs;
 * a prohibited call invalidates the capture, which runs on until
 * EndCapture answers StreamCaptureInvalidated and no graph.  The rules,
 * as CUDA documents them and clr implements them, are at the head of
 * fakegpu.c.  Everything here is under the lock (fake_mu) but the
 * thread's own mode.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "fakegpu.h"

enum { MODE_GLOBAL = 0, MODE_THREAD_LOCAL = 1, MODE_RELAXED = 2 };

static unsigned long long next_capture = 1;
static _Thread_local int thread_mode; /* MODE_GLOBAL until exchanged */

/* A potentially unsafe call is about to run (the lock held): OK, or
 * E_CAPTURE_UNSUPPORTED when a capture prohibits it, each such capture
 * invalidated (see the head of fakegpu.c). */
int fake_unsafe_call(void) {
  int err = OK;
  if (thread_mode == MODE_RELAXED)
    return OK;
  for (fstream *s = fake_streams; s; s = s->next) {
    bool own;
    if (!s->capturing)
      continue;
    own = pthread_equal(s->capture_thread, pthread_self());
    if ((own && s->capture_mode != MODE_RELAXED) ||
        (!own && thread_mode == MODE_GLOBAL &&
         s->capture_mode == MODE_GLOBAL)) {
      s->invalidated = true;
      err = E_CAPTURE_UNSUPPORTED;
    }
  }
  return err;
}

/* A stream's capture status: 0 none, 1 active, 2 invalidated (the lock
 * held). */
static int capture_status(const fstream *s) {
  return !s->capturing ? 0 : s->invalidated ? 2 : 1;
}

/* The event's last record was in a capture still active (the lock held):
 * querying or waiting for it is refused with CapturedEvent (907) and
 * invalidates that capture (clr hip_event.cpp ihipEventQuery,
 * hipEventSynchronize; CUDA's cudaErrorCapturedEvent). */
bool fake_captured_event(fevent *e) {
  fstream *s = e->captured;
  if (!s || !s->capturing || s->capture_id != e->capture_id ||
      s->invalidated)
    return false;
  s->invalidated = true;
  return true;
}

/* A blocking call -- Memcpy (legacy: true), a StreamSynchronize of stream
 * s (legacy: the null stream's) -- while captures run (the lock held).
 * HIP: Memcpy while any stream captures, in any mode, invalidates every
 * capture and answers StreamCaptureImplicit (906; clr hip_memory.cpp
 * hipMemcpy_common, CHECK_STREAM_CAPTURING in hip_internal.hpp); a
 * StreamSynchronize of a stream that does not capture is refused (900)
 * as a potentially unsafe call (clr hip_stream.cpp StreamCaptureOngoing),
 * which the null stream is not asked (hipStreamSynchronize_common).
 * CUDA: the legacy stream waits for the blocking streams, so a blocking
 * stream of the device that captures is invalidated and the call answers
 * 906 (cudaErrorStreamCaptureImplicit in driver_types.h). */
int fake_sync_checks(fstream *s, bool legacy) {
  int err = OK;
#if defined(FAKE_HIP)
  if (legacy && !s) {
    for (fstream *o = fake_streams; o; o = o->next)
      if (o->capturing) {
        o->invalidated = true;
        err = E_CAPTURE_IMPLICIT;
      }
  } else if (!legacy) {
    err = fake_unsafe_call();
  }
#else
  (void)s;
  if (legacy)
    for (fstream *o = fake_streams; o; o = o->next)
      if (o->capturing && !(o->flags & 1) && o->device == fake_dev_now()) {
        o->invalidated = true;
        err = E_CAPTURE_IMPLICIT;
      }
#endif
  return err;
}

EXPORT int FN(ThreadExchangeStreamCaptureMode)(int *mode) {
  int old;
  if (!mode || *mode < MODE_GLOBAL || *mode > MODE_RELAXED)
    return E_VALUE;
  old = thread_mode;
  thread_mode = *mode;
  *mode = old;
  return OK;
}

EXPORT int FN(StreamIsCapturing)(void *stream, int *status) {
  fstream *s;
  int err;
  pthread_mutex_lock(&fake_mu);
  s = fake_stream_of(stream);
  err = s ? OK : E_NOSTREAM;
  if (s)
    *status = capture_status(s);
  if (s && !stream) /* the legacy stream: a blocking stream capturing? */
    for (fstream *o = fake_streams; o; o = o->next)
      if (o->capturing && !(o->flags & 1) && o->device == fake_dev_now())
        err = E_CAPTURE_IMPLICIT;
  pthread_mutex_unlock(&fake_mu);
  return fake_answer(err);
}

EXPORT int FN(StreamGetCaptureInfo)(void *stream, int *status,
                                    unsigned long long *id, void *graph,
                                    void *deps, void *edges, void *count) {
  fstream *s;
  (void)graph, (void)deps, (void)edges, (void)count;
  pthread_mutex_lock(&fake_mu);
  s = fake_stream_of(stream);
  if (s) { /* the id of an active capture only (clr hip_graph.cpp) */
    *status = capture_status(s);
    if (id)
      *id = *status == 1 ? s->capture_id : 0;
  }
  pthread_mutex_unlock(&fake_mu);
  return s ? OK : E_NOSTREAM;
}

EXPORT int FN(StreamBeginCapture)(void *stream, int mode) {
  fstream *s;
  int err = OK;
  pthread_mutex_lock(&fake_mu);
  s = fake_stream_of(stream);
  if (!s)
    err = E_NOSTREAM;
  else if (mode < MODE_GLOBAL || mode > MODE_RELAXED)
    err = E_VALUE;
  else if (!stream || s->capturing)
    err = E_CAPTURE_UNSUPPORTED;
  else if (!(s->graph = calloc(1, sizeof *s->graph)))
    err = E_OOM;
  else {
    s->graph->magic = GRAPH_MAGIC;
    s->capturing = true;
    s->capture_id = next_capture++;
    s->capture_mode = mode;
    s->capture_thread = pthread_self();
    s->invalidated = false;
  }
  pthread_mutex_unlock(&fake_mu);
  return err;
}

EXPORT int FN(StreamEndCapture)(void *stream, void **graph) {
  fstream *s;
  int err = OK;
  pthread_mutex_lock(&fake_mu);
  s = fake_stream_of(stream);
  if (!s)
    err = E_NOSTREAM;
  else if (!s->capturing)
    err = E_VALUE;
  else if (s->invalidated) { /* an unsafe call broke it: no graph */
    s->capturing = false;
    free(s->graph->list.ops);
    free(s->graph);
    s->graph = NULL;
    *graph = NULL;
    err = E_CAPTURE_INVALIDATED;
  } else {
    s->capturing = false;
    *graph = s->graph;
    s->graph = NULL;
  }
  pthread_mutex_unlock(&fake_mu);
  return err;
}

EXPORT int FN(GraphDestroy)(void *graph) {
  fgraph *g = graph;
  if (!g || g->magic != GRAPH_MAGIC)
    return E_VALUE;
  g->magic = 0;
  free(g->list.ops);
  free(g);
  return OK;
}

/* An executable graph: a copy of the graph's ops. */
static int instantiate(void **exec, void *graph) {
  fgraph *g = graph, *x;
  if (!exec || !g || g->magic != GRAPH_MAGIC)
    return E_VALUE;
  x = calloc(1, sizeof *x);
  if (!x)
    return E_OOM;
  x->magic = EXEC_MAGIC;
  for (size_t i = 0; i < g->list.n; i++)
    if (!fake_push(&x->list, g->list.ops[i])) {
      free(x->list.ops);
      free(x);
      return E_OOM;
    }
  *exec = x;
  return OK;
}

#if defined(FAKE_HIP)
/* HIP's: (exec, graph, error node, log buffer, its size) */
EXPORT int hipGraphInstantiate(void **exec, void *graph, void *error_node,
                               char *log, size_t log_size) {
  (void)error_node;
  if (log && log_size)
    log[0] = '\0';
  return instantiate(exec, graph);
}
#else
/* CUDA 12 and later: (exec, graph, flags) */
EXPORT int cudaGraphInstantiate(void **exec, void *graph,
                                unsigned long long flags) {
  (void)flags;
  return instantiate(exec, graph);
}
#endif

EXPORT int FN(GraphInstantiateWithFlags)(void **exec, void *graph,
                                         unsigned long long flags) {
  (void)flags;
  return instantiate(exec, graph);
}

/* Queues the graph's ops on the stream, as if issued there now. */
EXPORT int FN(GraphLaunch)(void *exec, void *stream) {
  fgraph *x = exec;
  fstream *s;
  int err = OK;
  pthread_mutex_lock(&fake_mu);
  s = fake_stream_of(stream);
  if (!x || x->magic != EXEC_MAGIC)
    err = E_VALUE;
  else if (!s)
    err = E_NOSTREAM;
  for (size_t i = 0; err == OK && i < x->list.n; i++)
    err = fake_enqueue(s, x->list.ops[i]);
  pthread_mutex_unlock(&fake_mu);
  return err;
}

EXPORT int FN(GraphExecDestroy)(void *exec) {
  fgraph *x = exec;
  if (!x || x->magic != EXEC_MAGIC)
    return E_VALUE;
  x->magic = 0;
  free(x->list.ops);
  free(x);
  return OK;
}
