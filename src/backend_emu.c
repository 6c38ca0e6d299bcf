/* backend_emu.c -- emulated streams, events, captures, fault injection,
 * counters and the page registry, shared by the HOST and DRY backends.
 *
 * See backend_emu.h for the ordering model.  Every op here takes the
 * backend's mutex; helpers documented "locked" expect the caller to hold it,
 * and so do the class hooks (page_map, page_unmap).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_emu.h"

_Static_assert(HIPPO_CALL_KINDS <= HIPPO_CALL_KINDS_MAX,
               "the counters have room for every call kind");

#define HIPPO__EMU_STREAM_MAGIC 0x53747265u /* "Stre" */
#define HIPPO__EMU_EVENT_MAGIC 0x45766e74u  /* "Evnt" */

const char *hippo__call_kind_name(hippo_call_kind kind) {
  switch (kind) {
  case HIPPO_CALL_ALLOC:
    return "HIPPO_CALL_ALLOC";
  case HIPPO_CALL_FREE:
    return "HIPPO_CALL_FREE";
  case HIPPO_CALL_COPY:
    return "HIPPO_CALL_COPY";
  case HIPPO_CALL_SYNC:
    return "HIPPO_CALL_SYNC";
  case HIPPO_CALL_EVENT:
    return "HIPPO_CALL_EVENT";
  case HIPPO_CALL_CAPTURE_QUERY:
    return "HIPPO_CALL_CAPTURE_QUERY";
  case HIPPO_CALL_VM_RANGE:
    return "HIPPO_CALL_VM_RANGE";
  case HIPPO_CALL_VM_MAP:
    return "HIPPO_CALL_VM_MAP";
  case HIPPO_CALL_VM_UNMAP:
    return "HIPPO_CALL_VM_UNMAP";
  case HIPPO_CALL_VM_ACCESS:
    return "HIPPO_CALL_VM_ACCESS";
  default:
    return "an unknown call kind";
  }
}

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

/* Counts a call of `kind`; if an injected fault fires on it, returns its
 * status with last_error "injected fault: <NAME> <call> call #N failed with
 * HIPPO_X".  Locked. */
hippo_status hippo__emu_call(hippo__emu *emu, hippo_call_kind kind,
                             const char *call) {
  hippo__emu_fault *f = &emu->faults[kind];
  uint64_t n = ++emu->calls[kind];
  if (f->at != 0 && f->at == n) {
    hippo_status st = f->status;
    f->at = 0;
    return hippo__error_set(st, "injected fault: %s %s call #%llu failed with %s",
                            emu->name, call, (unsigned long long)n,
                            hippo__status_name(st));
  }
  return HIPPO_SUCCESS;
}

/* The checks page_alloc makes before taking memory: size > 0, a multiple of
 * the alignment, room under the capacity.  Locked. */
static hippo_status alloc_check(hippo__emu *emu, uint64_t size) {
  uint64_t free_bytes = emu->capacity - emu->bytes_held;
  if (size == 0 || (size & (emu->base.alignment - 1)) != 0)
    return hippo__error_set(
        HIPPO_INVALID_ARGUMENT,
        "%s page_alloc: size %llu is not a positive multiple of the "
        "alignment %llu; round the page size up",
        emu->name, (unsigned long long)size,
        (unsigned long long)emu->base.alignment);
  if (size > free_bytes) { /* kept unformatted: a full device is common */
    uint64_t args[] = {size, free_bytes, emu->capacity};
    return hippo__error_lazy(
        HIPPO_OUT_OF_MEMORY,
        emu->cls->has_bytes
            ? "HOST page_alloc: %llu bytes requested, %llu of %llu bytes "
              "free (emulated capacity); release or clean up memory, or "
              "open the device with a larger capacity"
            : "DRY page_alloc: %llu bytes requested, %llu of %llu bytes "
              "free (emulated capacity); release or clean up memory, or "
              "open the device with a larger capacity",
        args, 3);
  }
  return HIPPO_SUCCESS;
}

/* Index of the last page with addr <= a, or -1.  Locked. */
static ptrdiff_t page_floor(const hippo__emu *emu, uint64_t a) {
  size_t lo = 0, hi = emu->page_count; /* answer in [lo, hi) + 1 */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (emu->pages[mid].addr <= a)
      lo = mid + 1;
    else
      hi = mid;
  }
  return (ptrdiff_t)lo - 1;
}

/* Adds a page to the registry and the counters (HIPPO_OUT_OF_MEMORY when
 * the registry cannot grow).  Locked. */
static hippo_status page_add(hippo__emu *emu, const hippo__emu_page *page) {
  size_t at;
  if (emu->page_count == emu->page_cap) {
    size_t cap = emu->page_cap ? emu->page_cap * 2 : 64;
    hippo__emu_page *grown = realloc(emu->pages, cap * sizeof *grown);
    if (!grown)
      return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                              "%s page_alloc: out of host memory for the page "
                              "registry (%zu pages)",
                              emu->name, emu->page_count);
    emu->pages = grown;
    emu->page_cap = cap;
  }
  at = (size_t)(page_floor(emu, page->addr) + 1);
  memmove(&emu->pages[at + 1], &emu->pages[at],
          (emu->page_count - at) * sizeof *emu->pages);
  emu->pages[at] = *page;
  emu->page_count++;
  emu->bytes_held += page->size;
  if (emu->bytes_held > emu->peak_bytes_held)
    emu->peak_bytes_held = emu->bytes_held;
  emu->host_bytes_mapped += page->mapped;
  if (page->addr + page->size > emu->addr_end)
    emu->addr_end = page->addr + page->size;
  return HIPPO_SUCCESS;
}

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

/* The page starting exactly at addr with exactly size bytes, after running
 * every queue if one touches it; HIPPO_INVALID_ARGUMENT otherwise.  The
 * caller then frees its memory and calls page_remove.  Locked. */
static hippo_status page_take(hippo__emu *emu, uint64_t addr, uint64_t size,
                              const char *call, size_t *index) {
  ptrdiff_t i = page_floor(emu, addr);
  if (i < 0 || emu->pages[i].addr != addr)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s %s: 0x%llx is not the start of a live page "
                            "(freed twice, or never allocated here)",
                            emu->name, call, (unsigned long long)addr);
  if (emu->pages[i].size != size)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s %s: page 0x%llx has %llu bytes, not the %llu "
                            "given; pass the size it was allocated with",
                            emu->name, call, (unsigned long long)addr,
                            (unsigned long long)emu->pages[i].size,
                            (unsigned long long)size);
  /* A real driver orders the free after the work using the page. */
  if (hippo__emu_queued_on(emu, addr, size))
    hippo__emu_drain(emu);
  *index = (size_t)i;
  return HIPPO_SUCCESS;
}

static void page_remove(hippo__emu *emu, size_t index) {
  const hippo__emu_page *p = &emu->pages[index];
  emu->bytes_held -= p->size;
  emu->host_bytes_mapped -= p->mapped;
  memmove(&emu->pages[index], &emu->pages[index + 1],
          (emu->page_count - index - 1) * sizeof *emu->pages);
  emu->page_count--;
}

hippo_status hippo__range_check(const char *backend, const char *call,
                                const char *what, uint64_t addr,
                                uint64_t size, const uint64_t *page) {
  if (addr > UINT64_MAX - size)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s %s: %s 0x%llx + %llu bytes wraps around the "
                            "address space",
                            backend, call, what, (unsigned long long)addr,
                            (unsigned long long)size);
  if (!page || addr < page[0] || addr - page[0] >= page[1])
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s %s: %s 0x%llx is not inside a live page of "
                            "this device (freed, or never allocated here)",
                            backend, call, what, (unsigned long long)addr);
  if (addr + size > page[0] + page[1])
    return hippo__error_set(
        HIPPO_INVALID_ARGUMENT,
        "%s %s: %s [0x%llx, +%llu) runs %llu bytes past the end of its page "
        "[0x%llx, +%llu); a range must lie inside one page",
        backend, call, what, (unsigned long long)addr,
        (unsigned long long)size,
        (unsigned long long)(addr + size - (page[0] + page[1])),
        (unsigned long long)page[0], (unsigned long long)page[1]);
  return HIPPO_SUCCESS;
}

/* HIPPO_INVALID_ARGUMENT unless [addr, addr+size) lies inside one live
 * page.  `what` names the argument in last_error.  Locked. */
static hippo_status range_check(const hippo__emu *emu, uint64_t addr,
                                uint64_t size, const char *call,
                                const char *what) {
  ptrdiff_t i = page_floor(emu, addr);
  uint64_t page[2];
  if (i >= 0 && addr - emu->pages[i].addr < emu->pages[i].size) {
    page[0] = emu->pages[i].addr;
    page[1] = emu->pages[i].size;
  } else if (hippo__emu_vm_holds(emu, addr, size, page)) {
    i = 0; /* a mapped run of a virtual range holds it */
  } else if (i >= 0) {
    page[0] = emu->pages[i].addr;
    page[1] = emu->pages[i].size;
  }
  return hippo__range_check(emu->name, call, what, addr, size,
                            i >= 0 ? page : NULL);
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

static hippo__emu *emu_of(hippo__backend *be) { return (hippo__emu *)be; }

/* ---- shared ops -------------------------------------------------------- */

static hippo_status emu_copy(hippo__backend *be, void *stream, uint64_t dst,
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
  if ((st = range_check(emu, src, size, "copy", "source")) ||
      (st = range_check(emu, dst, size, "copy", "destination")))
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

static hippo_status emu_stream_sync(hippo__backend *be, void *stream) {
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

static hippo_status emu_event_create(hippo__backend *be, void **event) {
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

static hippo_status emu_event_record(hippo__backend *be, void *event,
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

static hippo_status emu_event_query(hippo__backend *be, void *event,
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

static hippo_status emu_event_wait(hippo__backend *be, void *event) {
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

static hippo_status emu_event_destroy(hippo__backend *be, void *event) {
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

static hippo_status emu_capture_status(hippo__backend *be, void *stream,
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

static const _Atomic uint64_t *emu_capture_word(hippo__backend *be,
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

static hippo_status emu_mem_info(hippo__backend *be, uint64_t *free_bytes,
                                 uint64_t *total_bytes) {
  hippo__emu *emu = emu_of(be);
  pthread_mutex_lock(&emu->mutex);
  if (free_bytes)
    *free_bytes = emu->capacity - emu->bytes_held;
  if (total_bytes)
    *total_bytes = emu->capacity;
  pthread_mutex_unlock(&emu->mutex);
  return HIPPO_SUCCESS;
}

static hippo_status emu_stream_create(hippo__backend *be, void **stream) {
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

static hippo_status emu_stream_destroy(hippo__backend *be, void *stream) {
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

static hippo_status emu_capture_begin(hippo__backend *be, void *stream,
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

static hippo_status emu_capture_end(hippo__backend *be, void *stream) {
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

hippo_status hippo__fault_arm(const char *backend, hippo_call_kind kind,
                              uint64_t nth, hippo_status status,
                              uint64_t calls, uint64_t *at) {
  if (kind >= HIPPO_CALL_KINDS)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s emu_inject_fault: call kind %u is unknown; "
                            "use HIPPO_CALL_ALLOC .. HIPPO_CALL_VM_ACCESS",
                            backend, (unsigned)kind);
  if (nth != 0 && (status <= HIPPO_SUCCESS || status > HIPPO_INTERNAL))
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s emu_inject_fault: status %d is not a failure "
                            "status; pick one such as HIPPO_OUT_OF_MEMORY or "
                            "HIPPO_BACKEND_ERROR",
                            backend, (int)status);
  if (nth > UINT64_MAX - calls)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s emu_inject_fault: nth %llu of %s is too far "
                            "away to count",
                            backend, (unsigned long long)nth,
                            hippo__call_kind_name(kind));
  *at = nth ? calls + nth : 0;
  return HIPPO_SUCCESS;
}

static hippo_status emu_inject_fault(hippo__backend *be,
                                     hippo_call_kind kind, uint64_t nth,
                                     hippo_status status) {
  hippo__emu *emu = emu_of(be);
  hippo_status st;
  uint64_t at = 0;

  pthread_mutex_lock(&emu->mutex);
  st = hippo__fault_arm(emu->name, kind, nth, status,
                        kind < HIPPO_CALL_KINDS ? emu->calls[kind] : 0, &at);
  if (st == HIPPO_SUCCESS) {
    emu->faults[kind].at = at;
    emu->faults[kind].status = status;
  }
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

static hippo_status emu_counters(hippo__backend *be,
                                 hippo_emu_counters *out) {
  hippo__emu *emu = emu_of(be);
  hippo_emu_counters c;

  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  pthread_mutex_lock(&emu->mutex);
  memcpy(c.calls, emu->calls, sizeof emu->calls);
  c.pages_held = emu->page_count;
  c.bytes_held = emu->bytes_held;
  c.peak_bytes_held = emu->peak_bytes_held;
  c.host_bytes_mapped = emu->host_bytes_mapped;
  c.bytes_copied = emu->bytes_copied;
  c.ranges_held = emu->range_count;
  c.bytes_virtual = emu->bytes_virtual;
  c.granules_mapped = emu->granules_mapped;
  c.bytes_mapped = emu->bytes_mapped;
  c.peak_bytes_mapped = emu->peak_bytes_mapped;
  c.waits = emu->waits;
  pthread_mutex_unlock(&emu->mutex);
  /* an older caller's smaller struct (from 8 bytes) gets what it knows */
  return hippo__struct_out(out, &c, sizeof c, 8, "hippo_emu_counters");
}

/* ---- pages ------------------------------------------------------------- */

static hippo_status emu_page_alloc(hippo__backend *be, uint64_t size,
                                   uint64_t *addr) {
  hippo__emu *emu = emu_of(be);
  hippo__emu_page page;
  hippo_status st;

  pthread_mutex_lock(&emu->mutex);
  if ((st = hippo__emu_call(emu, HIPPO_CALL_ALLOC, "page_alloc")))
    goto out;
  if (!addr) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s page_alloc: addr must not be NULL", emu->name);
    goto out;
  }
  if ((st = alloc_check(emu, size)) ||
      (st = emu->cls->page_map(emu, size, &page)))
    goto out;
  if ((st = page_add(emu, &page))) {
    if (emu->cls->page_unmap)
      (void)emu->cls->page_unmap(&page);
    goto out;
  }
  *addr = page.addr;
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

static hippo_status emu_page_free(hippo__backend *be, uint64_t addr,
                                  uint64_t size) {
  hippo__emu *emu = emu_of(be);
  hippo_status st;
  size_t i = 0;
  int err;

  pthread_mutex_lock(&emu->mutex);
  if ((st = hippo__emu_call(emu, HIPPO_CALL_FREE, "page_free")) ||
      (st = page_take(emu, addr, size, "page_free", &i)))
    goto out;
  if (emu->cls->page_unmap &&
      (err = emu->cls->page_unmap(&emu->pages[i])) != 0) {
    st = hippo__error_set(HIPPO_BACKEND_ERROR,
                          "%s page_free: munmap of page 0x%llx failed: %s",
                          emu->name, (unsigned long long)addr, strerror(err));
    goto out;
  }
  page_remove(emu, i);
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

/* emu_read (into != NULL) and emu_write (from != NULL) peek at device bytes
 * the way a debugger would: at once, NOT ordered with any stream's queue.  A
 * copy still queued has not happened yet; synchronize the stream first to
 * see its result.  A device without bytes (DRY) refuses. */
static hippo_status emu_peek(hippo__backend *be, const char *call,
                             uint64_t addr, void *into, const void *from,
                             uint64_t size) {
  hippo__emu *emu = emu_of(be);
  hippo_status st = HIPPO_SUCCESS;

  if (!emu->cls->has_bytes)
    return hippo__error_set(HIPPO_UNSUPPORTED,
                            "%s %s of %llu bytes at 0x%llx: a %s device has "
                            "no bytes; use a HOST device to see data",
                            emu->name, call, (unsigned long long)size,
                            (unsigned long long)addr, emu->name);
  if (!into && !from && size > 0)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s %s: host buffer must not be NULL", emu->name,
                            call);
  pthread_mutex_lock(&emu->mutex);
  if (size > 0 && !(st = range_check(emu, addr, size, call, "address"))) {
    if (into)
      memcpy(into, (const void *)(uintptr_t)addr, (size_t)size);
    else
      memcpy((void *)(uintptr_t)addr, from, (size_t)size);
  }
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

static hippo_status emu_read(hippo__backend *be, uint64_t addr, void *host,
                             uint64_t size) {
  return emu_peek(be, "emu_read", addr, host, NULL, size);
}

static hippo_status emu_write(hippo__backend *be, uint64_t addr,
                              const void *host, uint64_t size) {
  return emu_peek(be, "emu_write", addr, NULL, host, size);
}

/* ---- setup and teardown ------------------------------------------------ */

/* Runs every queue, gives every page's memory back and frees the backend
 * object with everything it holds. */
static void emu_destroy(hippo__backend *be) {
  hippo__emu *emu = emu_of(be);
  hippo__emu_stream *s, *snext;
  hippo__emu_event *e, *enext;

  pthread_mutex_lock(&emu->mutex);
  hippo__emu_drain(emu);
  if (emu->cls->page_unmap)
    for (size_t i = 0; i < emu->page_count; i++)
      (void)emu->cls->page_unmap(&emu->pages[i]);
  emu->page_count = 0;
  hippo__emu_vm_fini(emu);
  pthread_mutex_unlock(&emu->mutex);

  free(emu->default_stream.ops);
  for (s = emu->streams; s; s = snext) {
    snext = s->next;
    s->magic = 0;
    free(s->ops);
    free(s);
  }
  for (e = emu->events; e; e = enext) {
    enext = e->next;
    e->magic = 0;
    free(e);
  }
  free(emu->pages);
  pthread_mutex_destroy(&emu->mutex);
  free(emu);
}

/* The one function table of HOST and DRY. */
static const hippo__backend_ops emu_ops = {
    .page_alloc = emu_page_alloc,
    .page_free = emu_page_free,
    .copy = emu_copy,
    .stream_sync = emu_stream_sync,
    .event_create = emu_event_create,
    .event_record = emu_event_record,
    .event_wait = emu_event_wait,
    .event_query = emu_event_query,
    .event_destroy = emu_event_destroy,
    .capture_status = emu_capture_status,
    .capture_word = emu_capture_word,
    .mem_info = emu_mem_info,
    .destroy = emu_destroy,
    .emu_stream_create = emu_stream_create,
    .emu_stream_destroy = emu_stream_destroy,
    .emu_capture_begin = emu_capture_begin,
    .emu_capture_end = emu_capture_end,
    .emu_inject_fault = emu_inject_fault,
    .emu_read = emu_read,
    .emu_write = emu_write,
    .emu_counters = emu_counters,
    .vm_granularity = hippo__emu_vm_granularity,
    .vm_reserve = hippo__emu_vm_reserve,
    .vm_release = hippo__emu_vm_release,
    .vm_map = hippo__emu_vm_map,
    .vm_unmap = hippo__emu_vm_unmap,
};

static hippo_status emu_init(hippo__emu *emu, const hippo__emu_class *cls,
                             uint64_t capacity, uint64_t alignment) {
  const char *name = cls->name;
  if (alignment == 0)
    alignment = HIPPO__DEFAULT_ALIGNMENT;
  if (!hippo__is_pow2(alignment) || alignment > HIPPO__EMU_MAX_ALIGNMENT)
    return hippo__error_set(
        HIPPO_INVALID_ARGUMENT,
        "%s device: alignment %llu is not a power of two in [1, %llu]; pass "
        "0 for the default (%llu)",
        name, (unsigned long long)alignment,
        (unsigned long long)HIPPO__EMU_MAX_ALIGNMENT,
        (unsigned long long)HIPPO__DEFAULT_ALIGNMENT);
  if (capacity == 0)
    capacity = HIPPO__DEFAULT_CAPACITY;
  if (capacity < alignment)
    return hippo__error_set(
        HIPPO_INVALID_ARGUMENT,
        "%s device: capacity %llu B is below the alignment %llu B, so "
        "nothing could ever be reserved; give at least the alignment (0: "
        "%llu B)",
        name, (unsigned long long)capacity, (unsigned long long)alignment,
        (unsigned long long)HIPPO__DEFAULT_CAPACITY);

  memset(emu, 0, sizeof *emu);
  if (pthread_mutex_init(&emu->mutex, NULL) != 0)
    return hippo__error_set(HIPPO_BACKEND_ERROR,
                            "%s device: pthread_mutex_init failed", name);
  emu->base.ops = &emu_ops;
  emu->base.kind = cls->kind;
  emu->base.alignment = alignment;
  emu->base.total_memory = capacity;
  emu->base.vm_captures = false; /* as HIP, hippo's first runtime: a
                                     capture maps nothing (backend.h) */
  snprintf(emu->base.device_name, sizeof emu->base.device_name, "%s",
           cls->has_bytes ? "HOST (emulated in host memory)"
                          : "DRY (no memory)");
  snprintf(emu->base.arch, sizeof emu->base.arch, "host");
  snprintf(emu->base.runtime, sizeof emu->base.runtime, "none");
  emu->cls = cls;
  emu->name = name;
  emu->capacity = capacity;
  emu->default_stream.magic = HIPPO__EMU_STREAM_MAGIC;
  emu->next_capture_id = 1;
  emu->vm_granularity = cls->vm_granularity;
  return HIPPO_SUCCESS;
}

hippo_status hippo__emu_create(const hippo__emu_class *cls, uint64_t capacity,
                               uint64_t alignment, hippo__backend **out) {
  hippo__emu *emu;
  hippo_status st;

  if (!out)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s device: out must not be NULL", cls->name);
  emu = calloc(1, cls->object_size);
  if (!emu)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s device: out of host memory", cls->name);
  st = emu_init(emu, cls, capacity, alignment);
  if (st != HIPPO_SUCCESS) {
    free(emu);
    return st;
  }
  *out = &emu->base;
  return HIPPO_SUCCESS;
}
