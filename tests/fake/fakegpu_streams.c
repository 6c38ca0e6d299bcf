/* fakegpu_streams.c -- the stand-in runtimes' streams and events.  Like
 * hippo's HOST backend, a stream's work (copies, stream-ordered frees)
 * waits in its queue until the stream is synchronized, an event recorded
 * after it is waited for, a Free or the stream's destruction: a missing
 * synchronization shows as stale bytes.  An event is a position in its
 * stream's queue (base + done reaching the target: done).  The handles
 * 1 and 2 (legacy, per-thread) are the default stream.  The lists are
 * under the lock (fake_mu); what a capturing stream does with its work is
 * fakegpu_capture.c's.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fakegpu.h"

fstream fake_default_stream = {.magic = STREAM_MAGIC};
fstream *fake_streams;
static fevent *events;

/* The stream a handle names, or NULL (the caller answers E_NOSTREAM).
 * The legacy (1) and per-thread (2) special handles are the default
 * stream here, as the runtimes accept them. */
fstream *fake_stream_of(void *s) {
  fstream *f = s && (uintptr_t)s > 2 ? s : &fake_default_stream;
  return f->magic == STREAM_MAGIC ? f : NULL;
}

/* Appends o to l (false: out of host memory). */
bool fake_push(oplist *l, op o) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    op *grown = realloc(l->ops, cap * sizeof *grown);
    if (!grown)
      return false;
    l->ops = grown;
    l->cap = cap;
  }
  l->ops[l->n++] = o;
  return true;
}

/* Queues o on s: into its capture's graph while it captures, else into its
 * queue (the queue's fields are the stream's own). */
int fake_enqueue(fstream *s, op o) {
  if (s->capturing && s->invalidated)
    return E_CAPTURE_INVALIDATED; /* clr's STREAM_CAPTURE macro */
  if (s->capturing)
    return fake_push(&s->graph->list, o) ? OK : E_OOM;
  {
    oplist q = {s->ops, s->queued, s->cap};
    bool ok = fake_push(&q, o);
    s->ops = q.ops;
    s->queued = q.n;
    s->cap = q.cap;
    return ok ? OK : E_OOM;
  }
}

/* Runs a stream's waiting work up to `upto` (absolute count). */
void fake_run(fstream *s, uint64_t upto) {
  while (s->done < s->queued && s->base + s->done < upto) {
    op *o = &s->ops[s->done++];
    if (o->kind == OP_FREE)
      (void)fake_free_now(o->dst);
    else
      memmove(o->dst, o->src, o->size);
  }
  if (s->done == s->queued) {
    s->base += s->done;
    s->done = s->queued = 0;
  }
}

void fake_run_all(void) {
  fake_run(&fake_default_stream, UINT64_MAX);
  for (fstream *s = fake_streams; s; s = s->next)
    fake_run(s, UINT64_MAX);
}

/* ---- streams ---------------------------------------------------------------- */

EXPORT int FN(StreamCreateWithFlags)(void **out, unsigned flags) {
  fstream *s;
  fake_slow();
  s = calloc(1, sizeof *s);
  if (!s)
    return E_OOM;
  s->flags = flags;
  s->magic = STREAM_MAGIC;
  pthread_mutex_lock(&fake_mu);
  if (fake_need_ctx() != OK) {
    pthread_mutex_unlock(&fake_mu);
    free(s);
    return E_UNAVAILABLE;
  }
  s->device = fake_dev_now();
  s->next = fake_streams;
  fake_streams = s;
  pthread_mutex_unlock(&fake_mu);
  *out = s;
  return OK;
}

EXPORT int FN(StreamDestroy)(void *stream) {
  fstream **link;
  pthread_mutex_lock(&fake_mu);
  for (link = &fake_streams; *link; link = &(*link)->next)
    if (*link == stream) {
      fstream *s = *link;
      fake_run(s, UINT64_MAX);
      for (fevent *e = events; e; e = e->next) {
        if (e->stream == s)
          e->stream = NULL;
        if (e->captured == s)
          e->captured = NULL;
      }
      *link = s->next;
      s->magic = 0;
      if (s->graph) { /* destroyed while capturing: the capture is lost */
        free(s->graph->list.ops);
        free(s->graph);
      }
      free(s->ops);
      free(s);
      pthread_mutex_unlock(&fake_mu);
      return OK;
    }
  pthread_mutex_unlock(&fake_mu);
  return E_NOSTREAM;
}

EXPORT int FN(StreamSynchronize)(void *stream) {
  fstream *s;
  int err;
  pthread_mutex_lock(&fake_mu);
  s = fake_stream_of(stream);
  if (!s) {
    pthread_mutex_unlock(&fake_mu);
    return E_NOSTREAM;
  }
  if (s->capturing) { /* prohibited: the capture is invalidated */
    s->invalidated = true;
    pthread_mutex_unlock(&fake_mu);
    return E_CAPTURE_UNSUPPORTED;
  }
  if ((err = fake_sync_checks(s, stream == NULL)) != OK) {
    pthread_mutex_unlock(&fake_mu);
    return err;
  }
  fake_run(s, UINT64_MAX);
  pthread_mutex_unlock(&fake_mu);
  return OK;
}

#if defined(FAKE_HIP)
EXPORT int hipStreamGetDevice(void *stream, int *dev) {
#else
EXPORT int cudaStreamGetDevice(void *stream, int *dev) {
#endif
  fstream *s;
#if defined(FAKE_CUDA)
  const char *old = getenv("FAKE_GPU_STREAM_DEVICE");
  if (old && !strcmp(old, "old"))
    return E_NEWER_DRIVER;
#endif
  pthread_mutex_lock(&fake_mu);
  s = fake_stream_of(stream);
  if (s)
    *dev = stream ? s->device : fake_dev_now();
  pthread_mutex_unlock(&fake_mu);
  return s ? OK : E_NOSTREAM;
}

/* ---- events --------------------------------------------------------------------- */

EXPORT int FN(EventCreateWithFlags)(void **out, unsigned flags) {
  fevent *e = calloc(1, sizeof *e);
  (void)flags;
  if (!e)
    return E_OOM;
  e->magic = EVENT_MAGIC;
  pthread_mutex_lock(&fake_mu);
  e->next = events;
  events = e;
  pthread_mutex_unlock(&fake_mu);
  *out = e;
  return OK;
}

EXPORT int FN(EventRecord)(void *event, void *stream) {
  fevent *e = event;
  fstream *s;
  pthread_mutex_lock(&fake_mu);
  s = fake_stream_of(stream);
  if (!e || e->magic != EVENT_MAGIC || !s) {
    pthread_mutex_unlock(&fake_mu);
    return E_HANDLE;
  }
  if (s->capturing && s->invalidated) {
    pthread_mutex_unlock(&fake_mu);
    return E_CAPTURE_INVALIDATED;
  }
  e->captured = s->capturing ? s : NULL;
  e->capture_id = s->capturing ? s->capture_id : 0;
  if (!s->capturing) {
    e->stream = s;
    e->target = s->base + s->queued;
  }
  pthread_mutex_unlock(&fake_mu);
  return OK;
}

EXPORT int FN(EventQuery)(void *event) {
  fevent *e = event;
  int err;
  pthread_mutex_lock(&fake_mu);
  if (!e || e->magic != EVENT_MAGIC)
    err = E_HANDLE;
  else if (fake_captured_event(e))
    err = E_CAPTURED_EVENT;
  else if ((err = fake_unsafe_call()) != OK)
    ;
  else
    err = !e->stream || e->stream->base + e->stream->done >= e->target
              ? OK
              : E_NOT_READY;
  pthread_mutex_unlock(&fake_mu);
  return fake_answer(err);
}

EXPORT int FN(EventSynchronize)(void *event) {
  fevent *e = event;
  pthread_mutex_lock(&fake_mu);
  if (!e || e->magic != EVENT_MAGIC) {
    pthread_mutex_unlock(&fake_mu);
    return E_HANDLE;
  }
  if (fake_captured_event(e)) {
    pthread_mutex_unlock(&fake_mu);
    return E_CAPTURED_EVENT;
  }
  if (fake_unsafe_call() != OK) {
    pthread_mutex_unlock(&fake_mu);
    return E_CAPTURE_UNSUPPORTED;
  }
  if (e->stream)
    fake_run(e->stream, e->target);
  pthread_mutex_unlock(&fake_mu);
  return OK;
}

EXPORT int FN(EventDestroy)(void *event) {
  fevent **link;
  pthread_mutex_lock(&fake_mu);
  for (link = &events; *link; link = &(*link)->next)
    if (*link == event) {
      fevent *e = *link;
      *link = e->next;
      e->magic = 0;
      free(e);
      pthread_mutex_unlock(&fake_mu);
      return OK;
    }
  pthread_mutex_unlock(&fake_mu);
  return E_HANDLE;
}
