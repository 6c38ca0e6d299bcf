/* backend_emu.h -- the emulation state HOST and DRY share.
 *
 * HOST (backend_host.c) and DRY (backend_dry.c) differ only in where a page
 * lives: HOST maps host memory for it, DRY hands out a synthetic address and
 * holds nothing.  Everything else -- the page registry that validates
 * addresses, emulated streams with their queues of deferred copies, events,
 * captures, fault injection, counters, the capacity rule -- is here, in one
 * object both embed (hippo__emu, whose first member is the hippo__backend
 * head, so a hippo__backend * of either is a hippo__emu *).
 *
 * Locking: one pthread mutex per backend protects all its state.  The shared
 * ops below take it themselves; the hippo__emu_* helpers marked "locked"
 * expect the caller (a HOST or DRY op) to hold it.
 *
 * Ordering model: a copy is queued on its stream and runs only when the
 * stream is synchronized, when an event recorded after it is queried (a
 * query lets the emulated device run up to that event), when a page it
 * touches is freed, when its stream is destroyed, or when the backend is
 * destroyed.  emu_read/emu_write are NOT ordered with the queues.
 */
#ifndef HIPPO_BACKEND_EMU_H
#define HIPPO_BACKEND_EMU_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "core.h"

/* Largest alignment an emulated device accepts (HOST over-maps by it). */
#define HIPPO__EMU_MAX_ALIGNMENT (UINT64_C(1) << 30)

/* One live page.
 * Invariant: addr != 0; size > 0 and a multiple of the backend alignment;
 * addr is aligned to the backend alignment; HOST: map == (void *)addr and
 * mapped >= size is the length of the mapping; DRY: map == NULL, mapped == 0.
 */
typedef struct hippo__emu_page {
  uint64_t addr;   /* device address (HOST: the host address) */
  uint64_t size;   /* bytes, as requested from page_alloc */
  uint64_t mapped; /* host bytes mapped for it (HOST), 0 (DRY) */
  void *map;       /* the mapping (HOST), NULL (DRY) */
} hippo__emu_page;

/* A queued device-to-device copy.
 * Invariant: [src, src+size) and [dst, dst+size) each lay inside one live
 * page when it was queued, and those pages stay live until it has run
 * (page_free drains every queue touching a page first). */
typedef struct hippo__emu_op {
  uint64_t dst;
  uint64_t src;
  uint64_t size;
} hippo__emu_op;

/* An emulated stream: an ordered queue of pending copies.
 * Invariant: ops[head .. tail) are the pending copies in queue order;
 * head <= tail <= cap; done + (tail - head) == queued; capture_id != 0
 * exactly when capturing. */
typedef struct hippo__emu_stream {
  uint32_t magic;                  /* HIPPO__EMU_STREAM_MAGIC while live */
  struct hippo__emu_stream *next;  /* the backend's list of created streams */
  hippo__emu_op *ops;              /* the queue (grown by doubling) */
  size_t head, tail, cap;
  uint64_t queued;                 /* copies ever queued on it */
  uint64_t done;                   /* copies that have run */
  bool capturing;
  uint64_t capture_id;             /* this capture's id, 0 when not capturing */
} hippo__emu_stream;

/* An event: a position in one stream's queue.
 * Invariant: stream == NULL (its stream was destroyed: the work is done) or
 * stream is a live stream of the backend and target <= stream->queued. */
typedef struct hippo__emu_event {
  uint32_t magic;                  /* HIPPO__EMU_EVENT_MAGIC while live */
  const void *owner;               /* the hippo__emu that recorded it */
  struct hippo__emu_event *prev, *next; /* the backend's list of events */
  hippo__emu_stream *stream;
  uint64_t target;                 /* done once stream->done >= target */
} hippo__emu_event;

/* An armed fault: the call with calls[kind] == at fails with status.
 * Invariant: at == 0 (none armed) or at > calls[kind]; status != SUCCESS. */
typedef struct hippo__emu_fault {
  uint64_t at;
  hippo_status status;
} hippo__emu_fault;

/* The shared emulation object.
 * Invariant: pages[0 .. page_count) sorted by addr, non-overlapping;
 * bytes_held == sum of their sizes <= capacity; pages_held == page_count;
 * host_bytes_mapped == sum of their mapped; peak_bytes_held >= bytes_held;
 * every created stream is on `streams`; every live event is on `events`. */
typedef struct hippo__emu {
  hippo__backend base;             /* must stay first */
  pthread_mutex_t mutex;           /* protects everything below */
  const char *name;                /* "HOST" or "DRY", for messages */
  bool has_bytes;                  /* HOST: copies move bytes */
  uint64_t capacity;               /* emulated device bytes */

  hippo__emu_page *pages;          /* the registry, sorted by addr */
  size_t page_count, page_cap;

  hippo__emu_stream default_stream; /* NULL; always exists, never captures */
  hippo__emu_stream *streams;       /* created streams */
  hippo__emu_event *events;         /* live events */
  uint64_t next_capture_id;         /* the next capture's id (from 1) */

  hippo__emu_fault faults[HIPPO_CALL_KINDS];
  uint64_t calls[HIPPO_CALL_KINDS];
  uint64_t bytes_held;
  uint64_t peak_bytes_held;
  uint64_t host_bytes_mapped;
  uint64_t bytes_copied;
} hippo__emu;

/* Sets up the shared state.  capacity 0 takes HIPPO__DEFAULT_CAPACITY,
 * alignment 0 HIPPO__DEFAULT_ALIGNMENT; an alignment that is not a power of
 * two or above HIPPO__EMU_MAX_ALIGNMENT is HIPPO_INVALID_ARGUMENT. */
hippo_status hippo__emu_init(hippo__emu *emu, const hippo__backend_ops *ops,
                             hippo_backend kind, const char *name,
                             bool has_bytes, uint64_t capacity,
                             uint64_t alignment);
/* Runs every queue, frees streams, events and the registry (the caller has
 * given the pages' memory back first, or does it from the registry before
 * calling this).  Does not free emu itself. */
void hippo__emu_fini(hippo__emu *emu);

/* ---- helpers for HOST and DRY (locked: caller holds emu->mutex) -------- */

/* Counts a call of `kind`; if an injected fault fires on it, returns its
 * status with last_error "injected fault: <NAME> <call> call #N failed with
 * HIPPO_X".  Locked. */
hippo_status hippo__emu_call(hippo__emu *emu, hippo_call_kind kind,
                             const char *call);
/* Runs every stream's queue (the device finishes all its work).  Locked. */
void hippo__emu_drain(hippo__emu *emu);
/* The checks page_alloc makes before taking memory: size > 0, a multiple of
 * the alignment, room under the capacity.  Locked. */
hippo_status hippo__emu_alloc_check(hippo__emu *emu, uint64_t size);
/* Adds a page to the registry and the counters (HIPPO_OUT_OF_MEMORY when
 * the registry cannot grow).  Locked. */
hippo_status hippo__emu_page_add(hippo__emu *emu, const hippo__emu_page *page);
/* The page starting exactly at addr with exactly size bytes, after running
 * every queue if one touches it; HIPPO_INVALID_ARGUMENT otherwise.  The
 * caller then frees its memory and calls hippo__emu_page_remove.  Locked. */
hippo_status hippo__emu_page_take(hippo__emu *emu, uint64_t addr,
                                  uint64_t size, const char *call,
                                  size_t *index);
void hippo__emu_page_remove(hippo__emu *emu, size_t index);
/* HIPPO_INVALID_ARGUMENT unless [addr, addr+size) lies inside one live
 * page.  `what` names the argument in last_error.  Locked. */
hippo_status hippo__emu_range_check(const hippo__emu *emu, uint64_t addr,
                                    uint64_t size, const char *call,
                                    const char *what);

/* ---- ops shared by HOST and DRY (take the mutex themselves) ------------ */
hippo_status hippo__emu_copy(hippo__backend *be, void *stream, uint64_t dst,
                             uint64_t src, uint64_t size);
hippo_status hippo__emu_stream_sync(hippo__backend *be, void *stream);
hippo_status hippo__emu_event_record(hippo__backend *be, void *stream,
                                     void **event);
hippo_status hippo__emu_event_query(hippo__backend *be, void *event,
                                    bool *done);
hippo_status hippo__emu_event_destroy(hippo__backend *be, void *event);
hippo_status hippo__emu_capture_status(hippo__backend *be, void *stream,
                                       bool *capturing, uint64_t *capture_id);
hippo_status hippo__emu_mem_info(hippo__backend *be, uint64_t *free_bytes,
                                 uint64_t *total_bytes);
hippo_status hippo__emu_stream_create(hippo__backend *be, void **stream);
hippo_status hippo__emu_stream_destroy(hippo__backend *be, void *stream);
hippo_status hippo__emu_capture_begin(hippo__backend *be, void *stream,
                                      uint64_t *capture_id);
hippo_status hippo__emu_capture_end(hippo__backend *be, void *stream);
hippo_status hippo__emu_inject_fault(hippo__backend *be, hippo_call_kind kind,
                                     uint64_t nth, hippo_status status);
hippo_status hippo__emu_counters(hippo__backend *be, hippo_emu_counters *out);

#endif /* HIPPO_BACKEND_EMU_H */
