/* backend_emu.h -- the emulation HOST and DRY share.
 *
 * HOST (backend_host.c) and DRY (backend_dry.c) differ only in where a page
 * lives: HOST maps host memory for it, DRY hands out a synthetic address and
 * holds nothing.  Everything else -- the function table, the page registry
 * that validates addresses, emulated streams with their queues of deferred
 * copies, events, captures, fault injection, counters, the capacity rule,
 * emu_read/emu_write -- is backend_emu.c (the object, the table, calls and
 * faults, counters), backend_emu_pages.c (the page registry, pages,
 * emu_read/emu_write) and backend_emu_streams.c (streams, copies, events,
 * captures), in one object both use (hippo__emu, whose first member is the
 * hippo__backend head, so a hippo__backend * of either is a hippo__emu *).
 * A backend describes itself with a hippo__emu_class (its name, whether it
 * holds bytes, and how a page gets and gives back its memory) and is
 * created by hippo__emu_create.
 *
 * Locking: one pthread mutex per backend protects all its state.  The shared
 * ops take it themselves; the class hooks are called with it held.
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
#include "vm_runs.h"

/* Largest alignment an emulated device accepts (HOST over-maps by it). */
#define HIPPO__EMU_MAX_ALIGNMENT (UINT64_C(1) << 30)

/* The magic of a live stream and of a live event (below). */
#define HIPPO__EMU_STREAM_MAGIC 0x53747265u /* "Stre" */
#define HIPPO__EMU_EVENT_MAGIC 0x45766e74u  /* "Evnt" */

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
 * exactly when capturing; capture_word == capture_id once the mutex is
 * dropped. */
typedef struct hippo__emu_stream {
  uint32_t magic;                  /* HIPPO__EMU_STREAM_MAGIC while live */
  struct hippo__emu_stream *next;  /* the backend's list of created streams */
  hippo__emu_op *ops;              /* the queue (grown by doubling) */
  size_t head, tail, cap;
  uint64_t queued;                 /* copies ever queued on it */
  uint64_t done;                   /* copies that have run */
  bool capturing;
  uint64_t capture_id;             /* this capture's id, 0 when not capturing */
  _Atomic uint64_t capture_word;   /* capture_id, for readers without the
                                      mutex (backend.h, capture_word) */
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

/* A virtual range (vm_reserve): address space, with memory only where
 * granules were mapped (backend_emu_vm.c).
 * Invariant: runs (vm_runs.h) lie inside [addr, addr + size); mapped is
 * the sum of their lengths; HOST: fd is the memfd behind the range (the bytes
 * of a run live at offset start - addr of it), DRY: fd == -1. */
typedef struct hippo__emu_range {
  uint64_t addr, size;
  hippo__vm_runs runs;
  uint64_t mapped;
  int fd;
  /* A bit per unit of the granularity: set where a physical allocation
   * vm_map made starts (so an unmap of part of one, which a driver
   * refuses, is refused too); NULL until the first map.  Invariant: a
   * bit is set only at a mapped unit, and every mapped run starts at a
   * set bit. */
  uint64_t *heads;
} hippo__emu_range;

/* The shared emulation object.
 * Invariant: pages[0 .. page_count) sorted by addr, non-overlapping;
 * bytes_held == sum of their sizes <= capacity; pages_held == page_count;
 * every page ever added ended at or below addr_end;
 * host_bytes_mapped == sum of their mapped; peak_bytes_held >= bytes_held;
 * every created stream is on `streams`; every live event is on `events`. */
typedef struct hippo__emu {
  hippo__backend base;             /* must stay first */
  pthread_mutex_t mutex;           /* protects everything below */
  const struct hippo__emu_class *cls; /* the backend's class */
  const char *name;                /* cls->name, for messages */
  uint64_t capacity;               /* emulated device bytes */

  hippo__emu_page *pages;          /* the registry, sorted by addr */
  size_t page_count, page_cap;
  uint64_t addr_end;               /* end of the highest page ever added */

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

  /* Virtual ranges (backend_emu_vm.c): sorted by addr, disjoint from each
   * other and from the pages; their mapped bytes count in bytes_held. */
  hippo__emu_range *ranges;
  size_t range_count, range_cap;
  uint64_t bytes_virtual;          /* sum of the ranges' sizes */
  uint64_t bytes_mapped;           /* sum of their mapped bytes */
  uint64_t peak_bytes_mapped;
  uint64_t granules_mapped;        /* physical allocations mapped */
  uint64_t waits;                  /* host-side waits (hippo_emu_counters) */
  uint64_t vm_granularity;         /* cls->vm_granularity, or the host's
                                      page where larger (HOST) */
} hippo__emu;

/* What sets one emulated backend apart.  The hooks run with the mutex
 * held. */
typedef struct hippo__emu_class {
  hippo_backend kind;  /* HIPPO_BACKEND_HOST or _DRY */
  const char *name;    /* "HOST" or "DRY", for messages */
  bool has_bytes;      /* a page's address is host memory holding its bytes:
                          copies move them, emu_read/emu_write see them */
  size_t object_size;  /* the backend object, a hippo__emu first */
  /* Memory for a new page of `size` bytes (already checked: a positive
   * multiple of the alignment, room under the capacity): fills *page, or
   * writes last_error and returns the failure. */
  hippo_status (*page_map)(hippo__emu *emu, uint64_t size,
                           hippo__emu_page *page);
  /* Gives a page's memory back, as munmap does: 0, or an errno (the page
   * is then kept).  NULL when pages hold no memory. */
  int (*page_unmap)(const hippo__emu_page *page);
  /* Virtual memory: the granularity vm_granularity answers (0: the
   * backend has no virtual memory), and the hooks behind the ranges
   * (NULL where a range holds no memory, as on DRY; range_reserve then
   * hands out synthetic addresses). */
  uint64_t vm_granularity;
  /* Address space for r->size bytes aligned to `align`: sets r->addr (and
   * r->fd), or writes last_error. */
  hippo_status (*range_reserve)(hippo__emu *emu, uint64_t align,
                                hippo__emu_range *r);
  /* Gives the address space back (no run is mapped): 0 or an errno. */
  int (*range_release)(hippo__emu_range *r);
  /* Memory behind [addr, addr + len) of r: 0 or an errno. */
  int (*range_back)(hippo__emu_range *r, uint64_t addr, uint64_t len);
  /* Gives it back, so it really returns to the host: 0 or an errno. */
  int (*range_drop)(hippo__emu_range *r, uint64_t addr, uint64_t len);
} hippo__emu_class;

/* Creates a backend of `cls` (a zeroed object of cls->object_size bytes
 * whose hippo__emu is set up, its ops the shared table).  capacity 0 takes
 * HIPPO__DEFAULT_CAPACITY, alignment 0 HIPPO__DEFAULT_ALIGNMENT; an
 * alignment that is not a power of two or above HIPPO__EMU_MAX_ALIGNMENT is
 * HIPPO_INVALID_ARGUMENT.  As the constructors in backend.h: on failure
 * *out is untouched. */
hippo_status hippo__emu_create(const hippo__emu_class *cls, uint64_t capacity,
                               uint64_t alignment, hippo__backend **out);

/* What backend_emu.c, backend_emu_pages.c, backend_emu_streams.c and
 * backend_emu_vm.c share (locked: the caller holds the mutex). */
/* Counts a call of `kind` and fires an armed fault on it (backend_emu.c). */
hippo_status hippo__emu_call(hippo__emu *emu, hippo_call_kind kind,
                             const char *call);
/* Runs every stream's queue (the device finishes all its work;
 * backend_emu_streams.c). */
void hippo__emu_drain(hippo__emu *emu);
/* Whether a queued copy of any stream touches [addr, addr + size)
 * (backend_emu_streams.c). */
bool hippo__emu_queued_on(const hippo__emu *emu, uint64_t addr,
                          uint64_t size);
/* HIPPO_INVALID_ARGUMENT unless [addr, addr+size) lies inside one live
 * page or one mapped run of a range; `what` names the argument in
 * last_error (backend_emu_pages.c). */
hippo_status hippo__emu_range_check(const hippo__emu *emu, uint64_t addr,
                                    uint64_t size, const char *call,
                                    const char *what);
/* The mapped run of a range that holds [addr, addr + size) whole, as
 * {start, size} in run[] (false: none does). */
bool hippo__emu_vm_holds(const hippo__emu *emu, uint64_t addr, uint64_t size,
                         uint64_t run[2]);
/* The ops of the function table (backend.h; backend_emu.c's emu_ops)
 * that live beside it, each named hippo__emu_ and the op's name; each
 * takes the mutex itself.  Pages and the bytes (backend_emu_pages.c): */
hippo_status hippo__emu_page_alloc(hippo__backend *be, uint64_t size,
                                   uint64_t *addr);
hippo_status hippo__emu_page_free(hippo__backend *be, uint64_t addr,
                                  uint64_t size);
hippo_status hippo__emu_emu_read(hippo__backend *be, uint64_t addr, void *host,
                                 uint64_t size);
hippo_status hippo__emu_emu_write(hippo__backend *be, uint64_t addr,
                                  const void *host, uint64_t size);
/* Streams, copies, events, captures (backend_emu_streams.c): */
hippo_status hippo__emu_copy(hippo__backend *be, void *stream, uint64_t dst,
                             uint64_t src, uint64_t size);
hippo_status hippo__emu_stream_sync(hippo__backend *be, void *stream);
hippo_status hippo__emu_event_create(hippo__backend *be, void **event);
hippo_status hippo__emu_event_record(hippo__backend *be, void *event,
                                     void *stream);
hippo_status hippo__emu_event_query(hippo__backend *be, void *event,
                                    bool *done);
hippo_status hippo__emu_event_wait(hippo__backend *be, void *event);
hippo_status hippo__emu_event_destroy(hippo__backend *be, void *event);
hippo_status hippo__emu_capture_status(hippo__backend *be, void *stream,
                                       bool *capturing, uint64_t *capture_id);
const _Atomic uint64_t *hippo__emu_capture_word(hippo__backend *be,
                                                void *stream);
hippo_status hippo__emu_emu_stream_create(hippo__backend *be, void **stream);
hippo_status hippo__emu_emu_stream_destroy(hippo__backend *be, void *stream);
hippo_status hippo__emu_emu_capture_begin(hippo__backend *be, void *stream,
                                          uint64_t *capture_id);
hippo_status hippo__emu_emu_capture_end(hippo__backend *be, void *stream);
/* The virtual-memory ops (backend_emu_vm.c): */
hippo_status hippo__emu_vm_granularity(hippo__backend *be, uint64_t *granule);
hippo_status hippo__emu_vm_reserve(hippo__backend *be, uint64_t size,
                                   uint64_t align, uint64_t *addr);
hippo_status hippo__emu_vm_release(hippo__backend *be, uint64_t addr,
                                   uint64_t size);
hippo_status hippo__emu_vm_map(hippo__backend *be, uint64_t addr,
                               uint64_t size, uint64_t granule);
hippo_status hippo__emu_vm_unmap(hippo__backend *be, uint64_t addr,
                                 uint64_t size, uint64_t granule, bool wait,
                                 uint64_t *done);
/* Gives every range back (destroy; locked). */
void hippo__emu_vm_fini(hippo__emu *emu);

#endif /* HIPPO_BACKEND_EMU_H */
