/* backend_emu_streams.c -- emulated streams, copies, events and captures
 * (backend.h copy, stream_sync, event_*, capture_status, capture_word,
 * emu_stream_create, emu_stream_destroy, emu_capture_begin,
 * emu_capture_end) on HOST and DRY.
 *
 * See backend_emu.h for the ordering model: a copy is queued on its
 * stream and runs only when something waits for it (a sync, an event
 * wait, a page free that touches it, the stream's or the backend's
 * destruction); an event is done once its stream ran up to it, and
 * asking runs nothing.  A capturing stream refuses copies (hippo must
 * never move memory while a capture records) and syncs (HIP refuses
 * them).  Every op here takes the backend's mutex; helpers documented
 * "locked" expect the caller to hold it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend_emu.h"

static hippo__emu *emu_of(hippo__backend *be) { return (hippo__emu *)be; }

/* Performs one queued copy.  Locked. */
static void op_run(hippo__emu *emu, const hippo__emu_op *op) {
  if (emu->cls->has_bytes)
    memmove((void *)(uintptr_t)op->dst, (const void *)(uintptr_t)op->src,
            (size_t)op->size);
  emu->bytes_copied += op->size;
}

/* Lets the emulated device run `s` until `target` copies have run (all of
 * them when target is UINT64_MAX).  Locked. */
static void stream_run(hippo__emu *emu, hippo__emu_stream *s,
                       uint64_t target) {
  while (s->done < target && s->head < s->tail) {
    op_run(emu, &s->ops[s->head]);
    s->head++;
    s->done++;
  }
  if (s->head == s->tail)
    s->head = s->tail = 0;
}

/* Runs every stream's queue (the device finishes all its work).  Locked. */
void hippo__emu_drain(hippo__emu *emu) {
  stream_run(emu, &emu->default_stream, UINT64_MAX);
  for (hippo__emu_stream *s = emu->streams; s; s = s->next)
    stream_run(emu, s, UINT64_MAX);
}

/* ---- helpers (locked) -------------------------------------------------- */

/* Whether a pending copy of any stream touches [addr, addr+size).  Locked. */
static bool queue_touches(const hippo__emu_stream *s, uint64_t addr,
                          uint64_t size) {
  for (size_t i = s->head; i < s->tail; i++) {
    const hippo__emu_op *op = &s->ops[i];
    if ((op->dst < addr + size && addr < op->dst + op->size) ||
        (op->src < addr + size && addr < op->src + op->size))
      return true;
  }
  return false;
}

bool hippo__emu_queued_on(const hippo__emu *emu, uint64_t addr,
                          uint64_t size) {
  if (queue_touches(&emu->default_stream, addr, size))
    return true;
  for (const hippo__emu_stream *s = emu->streams; s; s = s->next)
    if (queue_touches(s, addr, size))
      return true;
  return false;
}

/* The emulated stream behind a native stream (NULL: the default stream).
 * Locked. */
static hippo_status stream_find(hippo__emu *emu, void *stream,
                                const char *call, hippo__emu_stream **out) {
  if (!stream) {
    *out = &emu->default_stream;
    return HIPPO_SUCCESS;
  }
  for (hippo__emu_stream *s = emu->streams; s; s = s->next)
    if ((void *)s == stream) {
      *out = s;
      return HIPPO_SUCCESS;
    }
  return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s %s: stream %p is not an emulated stream of this "
                          "device (destroyed, or not from emu_stream_create)",
                          emu->name, call, stream);
}

/* An event of this backend, or HIPPO_INVALID_ARGUMENT.  Locked. */
static hippo_status event_check(const hippo__emu *emu, void *event,
                                const char *call, hippo__emu_event **out) {
  hippo__emu_event *e = event;
  if (!e || e->magic != HIPPO__EMU_EVENT_MAGIC || e->owner != emu)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s %s: %p is not a live event of this device "
                            "(NULL, destroyed, or from another device)",
                            emu->name, call, event);
  *out = e;
  return HIPPO_SUCCESS;
}

/* Counts a `call` of `kind` on `stream` (see emu_call) and finds the
 * stream's emulated stream.  Locked. */
static hippo_status stream_call(hippo__emu *emu, hippo_call_kind kind,
                                const char *call, void *stream,
                                hippo__emu_stream **out) {
  hippo_status st = hippo__emu_call(emu, kind, call);
  return st ? st : stream_find(emu, stream, call, out);
}

/* `call` refused because `stream` (s) is capturing: "<NAME> <call>: stream
 * P is capturing graph N; <advice>".  Locked. */
static hippo_status capturing_refused(hippo_status st, const hippo__emu *emu,
                                      const char *call, void *stream,
                                      const hippo__emu_stream *s,
                                      const char *advice) {
  return hippo__error_set(st, "%s %s: stream %p is capturing graph %llu; %s",
                          emu->name, call, stream,
                          (unsigned long long)s->capture_id, advice);
}

/* stream_call for work a capturing stream refuses with HIPPO_BACKEND_ERROR
 * (copy, stream_sync), `advice` ending the message.  Locked. */
static hippo_status work_call(hippo__emu *emu, hippo_call_kind kind,
                              const char *call, void *stream,
                              const char *advice, hippo__emu_stream **out) {
  hippo_status st = stream_call(emu, kind, call, stream, out);
  if (st == HIPPO_SUCCESS && (*out)->capturing)
    st = capturing_refused(HIPPO_BACKEND_ERROR, emu, call, stream, *out,
                           advice);
  return st;
}

/* ---- shared ops -------------------------------------------------------- */

hippo_status hippo__emu_copy(hippo__backend *be, void *stream, uint64_t dst,
                             uint64_t src, uint64_t size) {
  hippo__emu *emu = emu_of(be);
  hippo__emu_stream *s = NULL;
  hippo_status st;

  pthread_mutex_lock(&emu->mutex);
  /* In HIP the copy would become a node of the graph being captured and run
   * only when the graph is launched: hippo must never move memory while a
   * capture records. */
  if ((st = work_call(emu, HIPPO_CALL_COPY, "copy", stream,
                      "a copy now would be baked into the graph instead of "
                      "running (end the capture first)",
                      &s)) ||
      size == 0)
    goto out;
  if ((st = hippo__emu_range_check(emu, src, size, "copy", "source")) ||
      (st = hippo__emu_range_check(emu, dst, size, "copy", "destination")))
    goto out;
  if (s->tail == s->cap) {
    if (s->head > 0) {
      memmove(s->ops, &s->ops[s->head], (s->tail - s->head) * sizeof *s->ops);
      s->tail -= s->head;
      s->head = 0;
    } else {
      size_t cap = s->cap ? s->cap * 2 : 16;
      hippo__emu_op *grown = realloc(s->ops, cap * sizeof *grown);
      if (!grown) {
        st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                              "%s copy: out of host memory for the queue of "
                              "stream %p (%zu copies pending)",
                              emu->name, stream, s->tail - s->head);
        goto out;
      }
      s->ops = grown;
      s->cap = cap;
    }
  }
  s->ops[s->tail++] = (hippo__emu_op){dst, src, size};
  s->queued++;
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

hippo_status hippo__emu_stream_sync(hippo__backend *be, void *stream) {
  hippo__emu *emu = emu_of(be);
  hippo__emu_stream *s = NULL;
  hippo_status st;

  pthread_mutex_lock(&emu->mutex);
  /* As HIP: synchronizing a capturing stream is illegal. */
  if ((st = work_call(emu, HIPPO_CALL_SYNC, "stream_sync", stream,
                      "HIP refuses this (hipErrorStreamCaptureUnsupported); "
                      "end the capture first",
                      &s)))
    goto out;
  stream_run(emu, s, UINT64_MAX);
  emu->waits++;
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

hippo_status hippo__emu_event_create(hippo__backend *be, void **event) {
  hippo__emu *emu = emu_of(be);
  hippo__emu_event *e = NULL;
  hippo_status st;

  pthread_mutex_lock(&emu->mutex);
  if ((st = hippo__emu_call(emu, HIPPO_CALL_EVENT, "event_create")))
    goto out;
  if (!event) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s event_create: event must not be NULL",
                          emu->name);
    goto out;
  }
  e = calloc(1, sizeof *e);
  if (!e) {
    st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                          "%s event_create: out of host memory", emu->name);
    goto out;
  }
  e->magic = HIPPO__EMU_EVENT_MAGIC;
  e->owner = emu;
  e->stream = NULL; /* recorded on nothing: done */
  e->next = emu->events;
  if (emu->events)
    emu->events->prev = e;
  emu->events = e;
  *event = e;
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

hippo_status hippo__emu_event_record(hippo__backend *be, void *event,
                                     void *stream) {
  hippo__emu *emu = emu_of(be);
  hippo__emu_stream *s = NULL;
  hippo__emu_event *e = NULL;
  hippo_status st;

  pthread_mutex_lock(&emu->mutex);
  if ((st = stream_call(emu, HIPPO_CALL_EVENT, "event_record", stream, &s)) ||
      (st = event_check(emu, event, "event_record", &e)))
    goto out;
  /* As HIP: on a capturing stream the record becomes a node of the graph
   * and leaves the event as it was (it marks none of the queued work). */
  if (!s->capturing) {
    e->stream = s;
    e->target = s->queued;
  }
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

hippo_status hippo__emu_event_query(hippo__backend *be, void *event,
                                    bool *done) {
  hippo__emu *emu = emu_of(be);
  hippo__emu_event *e = NULL;
  hippo_status st;

  pthread_mutex_lock(&emu->mutex);
  if ((st = hippo__emu_call(emu, HIPPO_CALL_EVENT, "event_query")) ||
      (st = event_check(emu, event, "event_query", &e)))
    goto out;
  if (!done) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s event_query: done must not be NULL", emu->name);
    goto out;
  }
  /* As a device: done once the stream's queue ran up to the event (a
   * sync, a wait, a page free that drains it); asking runs nothing. */
  *done = !e->stream || e->stream->done >= e->target;
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

hippo_status hippo__emu_event_wait(hippo__backend *be, void *event) {
  hippo__emu *emu = emu_of(be);
  hippo__emu_event *e = NULL;
  hippo_status st;

  pthread_mutex_lock(&emu->mutex);
  if ((st = hippo__emu_call(emu, HIPPO_CALL_EVENT, "event_wait")) ||
      (st = event_check(emu, event, "event_wait", &e)))
    goto out;
  if (e->stream)
    stream_run(emu, e->stream, e->target);
  emu->waits++;
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

hippo_status hippo__emu_event_destroy(hippo__backend *be, void *event) {
  hippo__emu *emu = emu_of(be);
  hippo__emu_event *e = NULL;
  hippo_status st;

  pthread_mutex_lock(&emu->mutex);
  if ((st = event_check(emu, event, "event_destroy", &e)))
    goto out;
  if (e->prev)
    e->prev->next = e->next;
  else
    emu->events = e->next;
  if (e->next)
    e->next->prev = e->prev;
  e->magic = 0;
  free(e);
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

hippo_status hippo__emu_capture_status(hippo__backend *be, void *stream,
                                       bool *capturing, uint64_t *capture_id) {
  hippo__emu *emu = emu_of(be);
  hippo__emu_stream *s = NULL;
  hippo_status st;

  pthread_mutex_lock(&emu->mutex);
  if ((st = stream_call(emu, HIPPO_CALL_CAPTURE_QUERY, "capture_status",
                        stream, &s)))
    goto out;
  if (!capturing) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s capture_status: capturing must not be NULL",
                          emu->name);
    goto out;
  }
  *capturing = s->capturing;
  if (capture_id)
    *capture_id = s->capturing ? s->capture_id : 0;
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

const _Atomic uint64_t *hippo__emu_capture_word(hippo__backend *be,
                                                void *stream) {
  hippo__emu *emu = emu_of(be);
  hippo__emu_stream *s = NULL;
  const _Atomic uint64_t *word = NULL;
  pthread_mutex_lock(&emu->mutex);
  if (stream_find(emu, stream, "capture_word", &s) == HIPPO_SUCCESS)
    word = &s->capture_word;
  pthread_mutex_unlock(&emu->mutex);
  return word;
}

hippo_status hippo__emu_emu_stream_create(hippo__backend *be, void **stream) {
  hippo__emu *emu = emu_of(be);
  hippo__emu_stream *s = NULL;

  if (!stream)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s emu_stream_create: stream must not be NULL",
                            emu->name);
  s = calloc(1, sizeof *s);
  if (!s)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s emu_stream_create: out of host memory",
                            emu->name);
  s->magic = HIPPO__EMU_STREAM_MAGIC;
  pthread_mutex_lock(&emu->mutex);
  s->next = emu->streams;
  emu->streams = s;
  pthread_mutex_unlock(&emu->mutex);
  *stream = s;
  return HIPPO_SUCCESS;
}

hippo_status hippo__emu_emu_stream_destroy(hippo__backend *be, void *stream) {
  hippo__emu *emu = emu_of(be);
  hippo__emu_stream **link, *s = NULL;
  hippo_status st = HIPPO_SUCCESS;

  pthread_mutex_lock(&emu->mutex);
  if (!stream) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s emu_stream_destroy: the default stream (NULL) "
                          "cannot be destroyed",
                          emu->name);
    goto out;
  }
  for (link = &emu->streams; *link; link = &(*link)->next)
    if ((void *)*link == stream) {
      s = *link;
      break;
    }
  if (!s) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s emu_stream_destroy: stream %p is not an "
                          "emulated stream of this device (destroyed twice?)",
                          emu->name, stream);
    goto out;
  }
  if (s->capturing) {
    st = capturing_refused(HIPPO_BUSY, emu, "emu_stream_destroy", stream, s,
                           "end the capture first");
    goto out;
  }
  stream_run(emu, s, UINT64_MAX);
  for (hippo__emu_event *e = emu->events; e; e = e->next)
    if (e->stream == s)
      e->stream = NULL; /* its work has run: the event stays done */
  *link = s->next;
  s->magic = 0;
  free(s->ops);
  free(s);
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

hippo_status hippo__emu_emu_capture_begin(hippo__backend *be, void *stream,
                                          uint64_t *capture_id) {
  hippo__emu *emu = emu_of(be);
  hippo__emu_stream *s = NULL;
  hippo_status st;

  pthread_mutex_lock(&emu->mutex);
  if (!stream) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s emu_capture_begin: the default stream (NULL) "
                          "cannot capture, as in HIP; capture on a stream "
                          "from emu_stream_create",
                          emu->name);
    goto out;
  }
  if ((st = stream_find(emu, stream, "emu_capture_begin", &s)))
    goto out;
  if (s->capturing) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s emu_capture_begin: stream %p is already "
                          "capturing graph %llu; end that capture first",
                          emu->name, stream,
                          (unsigned long long)s->capture_id);
    goto out;
  }
  s->capturing = true;
  s->capture_id = emu->next_capture_id++;
  atomic_store_explicit(&s->capture_word, s->capture_id,
                        memory_order_release);
  if (capture_id)
    *capture_id = s->capture_id;
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

hippo_status hippo__emu_emu_capture_end(hippo__backend *be, void *stream) {
  hippo__emu *emu = emu_of(be);
  hippo__emu_stream *s = NULL;
  hippo_status st;

  pthread_mutex_lock(&emu->mutex);
  if ((st = stream_find(emu, stream, "emu_capture_end", &s)))
    goto out;
  if (!s->capturing) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s emu_capture_end: stream %p is not capturing",
                          emu->name, stream);
    goto out;
  }
  s->capturing = false;
  s->capture_id = 0;
  atomic_store_explicit(&s->capture_word, 0, memory_order_release);
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}
