/* backend_emu.c -- the emulated backend object HOST and DRY share: its
 * setup and teardown, the one function table of both (emu_ops), counting
 * calls by kind with fault injection (hippo__emu_call), the counters and
 * mem_info.
 *
 * The table's other ops live beside it: the page registry, pages and
 * emu_read/emu_write in backend_emu_pages.c, streams, copies, events and
 * captures in backend_emu_streams.c, virtual memory in backend_emu_vm.c
 * (backend_emu.h declares what they give each other).  See backend_emu.h
 * for the ordering model.  Every op here takes the backend's mutex;
 * helpers documented "locked" expect the caller to hold it, and so do the
 * class hooks (page_map, page_unmap).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_emu.h"

_Static_assert(HIPPO_CALL_KINDS <= HIPPO_CALL_KINDS_MAX,
               "the counters have room for every call kind");

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

static hippo__emu *emu_of(hippo__backend *be) { return (hippo__emu *)be; }

/* ---- shared ops -------------------------------------------------------- */

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
    .page_alloc = hippo__emu_page_alloc,
    .page_free = hippo__emu_page_free,
    .copy = hippo__emu_copy,
    .stream_sync = hippo__emu_stream_sync,
    .event_create = hippo__emu_event_create,
    .event_record = hippo__emu_event_record,
    .event_wait = hippo__emu_event_wait,
    .event_query = hippo__emu_event_query,
    .event_destroy = hippo__emu_event_destroy,
    .capture_status = hippo__emu_capture_status,
    .capture_word = hippo__emu_capture_word,
    .mem_info = emu_mem_info,
    .destroy = emu_destroy,
    .emu_stream_create = hippo__emu_emu_stream_create,
    .emu_stream_destroy = hippo__emu_emu_stream_destroy,
    .emu_capture_begin = hippo__emu_emu_capture_begin,
    .emu_capture_end = hippo__emu_emu_capture_end,
    .emu_inject_fault = emu_inject_fault,
    .emu_read = hippo__emu_emu_read,
    .emu_write = hippo__emu_emu_write,
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
