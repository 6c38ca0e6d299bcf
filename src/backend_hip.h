/* backend_hip.h -- what the HIP backend's files share: the backend object
 * (gpu_backend), the scope of a call on the backend's device (dev_scope,
 * begin, leave), the thread's capture mode relaxed around a call
 * (relaxed_scope), and the functions the files give each other -- the
 * function table's slots among them, for the table in backend_hip.c.  The
 * runtime's calls themselves are gpu_rt.h's table (gpu_rt.c).
 *
 * The files: backend_hip.c (which runtime, opening a device, destroy, the
 * table, the thread's current device, counting calls), backend_hip_pages.c
 * (pages, memory info), backend_hip_streams.c (streams, copies, events,
 * captures), backend_hip_vm.c and backend_hip_vm_driver.c (virtual
 * memory), backend_hip_emu.c (emulation slots on a real device).
 *
 * Invariant (gpu_backend): pages is sorted by address, its entries the
 * pages page_alloc gave and page_free did not take back; ranges is sorted
 * by address, its entries the ranges vm_reserve gave and vm_release did
 * not take back, each range's runs the granules mapped in it; the granule
 * table holds exactly the mapped granules (granules_mapped of them,
 * bytes_mapped bytes, the runs' sum), orphans the allocations unmapped but
 * not released; bytes_held is the pages' bytes + bytes_mapped + the
 * orphans' bytes (+ what a page_alloc or vm_map in flight reserved);
 * bytes_virtual is the ranges' sum; streams are the ones
 * emu_stream_create made and emu_stream_destroy did not destroy (io, the
 * backend's own stream for emu_read and emu_write, is not one of them);
 * faults[k].at, when non-zero, is a future value of calls[k].
 */
#ifndef HIPPO_BACKEND_HIP_H
#define HIPPO_BACKEND_HIP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "core.h"
#include "gpu_rt.h"
#include "vm_runs.h"

typedef struct gpu_page {
  uint64_t addr, size;
} gpu_page;

/* Virtual memory (vm_*).  A range from vm_reserve, with the mapped runs of
 * its granules (vm_runs.h) inside [addr, addr + size); `mapped` is the
 * bytes of its mapped granules (a granule that stayed mapped while host
 * memory for its run ran out counts without a run). */
typedef struct vm_range {
  uint64_t addr, size;
  uint64_t base, reserved; /* the driver's reservation, holding the range
                              (larger where it ignored the alignment) */
  uint64_t mapped;
  hippo__vm_runs runs;
} vm_range;

/* A mapped granule: its physical allocation (one per granule, mapped whole
 * at offset 0) -- or, larger than one allocation may be (vm_part), its
 * parts, each vm_part bytes but the last -- in an open-addressing table
 * keyed by the address (0: an empty slot). */
typedef struct vm_granule {
  uint64_t addr, size;
  unsigned long long handle; /* the (first part's) allocation */
  unsigned long long *more;  /* the other parts' (NULL: none) */
} vm_granule;

/* A physical allocation unmapped whose release the runtime refused: still
 * held (its bytes in bytes_held), released again at the next vm_map,
 * vm_unmap or destroy. */
typedef struct vm_orphan {
  unsigned long long handle;
  uint64_t size;
} vm_orphan;

typedef struct gpu_backend {
  hippo__backend base; /* must stay first */
  const hippo__gpu_rt *rt;
  int32_t ordinal;
  uint64_t budget;    /* bytes hippo may hold of the device */
  _Atomic uint64_t calls[HIPPO_CALL_KINDS];
  _Atomic uint64_t waits; /* host-side waits (hippo_emu_counters) */
  void *primary;      /* CUDA: the device's primary context, retained from
                         open to destroy; NULL: hippo__hip_enter uses
                         SetDevice */
  int primary_device; /* its CUdevice */
  atomic_bool armed;  /* any fault armed: then take the lock */
  pthread_mutex_t lock; /* faults, pages, streams, byte counts */
  struct {
    uint64_t at;
    hippo_status status;
  } faults[HIPPO_CALL_KINDS];
  gpu_page *pages;
  size_t npages, cap_pages;
  size_t pages_coming; /* calls in the runtime outside the lock, each
                          promised one of the records beyond npages: a
                          page_alloc's new page, a page_free's page should
                          the free be refused; npages + pages_coming <=
                          cap_pages */
  void **streams;
  size_t nstreams, cap_streams;
  void *io; /* emu_read and emu_write's own stream (NULL until the first) */
  size_t streams_coming; /* emu_stream_creates in the runtime, each
                            promised a record, as pages_coming */
  uint64_t bytes_held, peak_bytes_held, bytes_copied;

  /* Virtual memory: decided at open (hippo__hip_vm_probe); base.ops is
   * gpu_vm_ops when the device has it, gpu_ops (vm_* NULL) when not, why
   * in base.vm_why. */
  bool vm;
  uint64_t vm_granularity; /* the driver's minimum */
  uint64_t vm_part;        /* the largest physical allocation (0: any) */
  int vm_device;           /* the location id: CUDA's CUdevice, HIP's
                              ordinal */
  hippo__gpu_mem_prop vm_prop; /* what hipMemCreate/cuMemCreate get */
  /* vm_access: read-write for the device, then for every peer that can
   * access its memory (vm_peers), set at once on each map */
  hippo__gpu_mem_access vm_access[HIPPO__GPU_MAX_PEERS];
  size_t vm_naccess;
  /* One VMM call of the device at a time (ROCm has had races between
   * concurrent map calls), and the registries' writers: taken before
   * `lock`, held across the driver's calls. */
  pthread_mutex_t vm_lock;
  /* Written under vm_lock and lock, read under either: */
  vm_range *ranges; /* sorted by addr */
  size_t nranges, cap_ranges;
  uint64_t bytes_virtual, bytes_mapped, peak_bytes_mapped, granules_mapped;
  /* vm_lock only: */
  vm_granule *granules; /* cap_granules slots, a power of two (or 0) */
  size_t ngranules, cap_granules;
  vm_orphan *orphans;
  size_t norphans, cap_orphans;
} gpu_backend;

static inline gpu_backend *gpu_of(hippo__backend *be) {
  return (gpu_backend *)be;
}

/* ---- the thread's current device (backend_hip.c) ---- */

/* CUDA 12's cudaSetDevice creates the device's primary context (CUDA
 * Programming Guide, "Initialization"; cudaSetDevice in
 * cuda_runtime_api.h), and fails where the device is exclusive-process
 * and taken: putting back a thread's device 0 it never chose would create
 * a context there, or fail and leave the thread on hippo's device (issue
 * 40 item 2).  So on CUDA the device's primary context is pushed onto the
 * thread's context stack and popped after (the driver's way for a library
 * to use a context unbeknownst to its caller: the Programming Guide's
 * "Context" section; vLLM's cumem_allocator.cpp retains and sets the
 * primary context the same way): the runtime's calls go to the pushed
 * context, and the thread's own device and contexts are never touched.
 * PyTorch's MaybeExchangeDevice (c10/cuda/CUDAFunctions.cpp) avoids the
 * same context by not switching at all. */
typedef struct dev_scope {
  int prev;     /* the thread's device before */
  bool restore; /* whether it was switched */
  bool pushed;  /* whether g->primary was pushed */
} dev_scope;

/* The backend's device made current for a call; leave puts the thread's
 * own back (backend_hip.c). */
hippo_status hippo__hip_enter(gpu_backend *g, const char *why, dev_scope *sc);
hippo_status hippo__hip_set_device(gpu_backend *g, const char *why,
                                   dev_scope *sc, int cur);
/* Counts a call of `kind` (named `name` in the message); an injected fault
 * makes it fail (backend_hip.c). */
hippo_status hippo__hip_call_named(gpu_backend *g, hippo_call_kind kind,
                                   const char *name);
hippo_status hippo__hip_call(gpu_backend *g, hippo_call_kind kind);

static inline hippo_status leave(gpu_backend *g, const dev_scope *sc,
                                 hippo_status st) {
  void *ctx;
  if (sc->pushed)
    (void)g->rt->ctx.pop(&ctx); /* pushed a moment ago */
  else if (sc->restore)
    (void)g->rt->set_device(sc->prev); /* it was current a moment ago */
  return st;
}

/* A backend call of `kind` on the device: counted (and failed, when a
 * fault is armed for it), then the device made current; leave() ends it. */
static inline hippo_status begin(gpu_backend *g, hippo_call_kind kind,
                                 const char *why, dev_scope *sc) {
  hippo_status st = hippo__hip_call(g, kind);
  return st != HIPPO_SUCCESS ? st : hippo__hip_enter(g, why, sc);
}

/* Around the calls the runtimes count as potentially unsafe while a
 * stream captures that hippo makes while one may (hipMalloc for another
 * stream's page, hipEventQuery polling record_use's events), the thread's
 * capture mode is relaxed: otherwise such a call fails
 * (hipErrorStreamCaptureUnsupported) and invalidates any capture in mode
 * global, and one this thread began.  Neither call conflicts with a
 * capture: hippo never takes a page for a capturing stream
 * (HIPPO_GRAPH_NEEDS_PAGE) and never records an event on one.  PyTorch's
 * allocator relaxes its cudaMalloc the same way.  The thread's mode is put
 * back after; a runtime without the call is used as it is.  Frees and
 * waits are not relaxed: they synchronize, which a capture forbids in
 * every mode, so hippo makes none while a stream it knows captures (the
 * free gate; cleanup and detach are refused) -- a capture on a stream
 * hippo was never given is not seen (docs/captures.md: attach it). */
typedef struct relaxed_scope {
  int prev;     /* the thread's mode before */
  bool restore; /* whether it was exchanged */
} relaxed_scope;

static inline void relax(const gpu_backend *g, relaxed_scope *rs) {
  rs->prev = HIPPO__GPU_CAPTURE_RELAXED;
  rs->restore = g->rt->exchange_capture_mode &&
                g->rt->exchange_capture_mode(&rs->prev) == HIPPO__GPU_SUCCESS;
}

static inline void unrelax(const gpu_backend *g, const relaxed_scope *rs) {
  int mode = rs->prev;
  if (rs->restore)
    (void)g->rt->exchange_capture_mode(&mode);
}

/* A runtime call's error code as a status (last_error set on failure). */
/* An error answer of the runtime that hippo handles itself (out of
 * memory before it frees cached pages and retries, an event not ready
 * yet, the legacy stream's "another stream captures"): the runtime keeps
 * it as the thread's last error, which the caller's own check after its
 * next kernel launch (cudaGetLastError, PyTorch's
 * C10_CUDA_KERNEL_LAUNCH_CHECK) would then report against that launch.
 * Reset it, as PyTorch's caching allocator does after the same answers;
 * a sticky error (a kernel's fault) survives the reset, so nothing of the
 * caller's is lost. */
static inline void handled(const hippo__gpu_rt *rt) {
  if (rt->get_last_error)
    (void)rt->get_last_error();
}

#define RT(g, expr, name, hint)                                                \
  ((err = (expr)) == HIPPO__GPU_SUCCESS                                        \
       ? HIPPO_SUCCESS                                                         \
       : hippo__gpu_fail((g)->rt, err, (name), (hint)))

/* ---- backend_hip_pages.c: pages and memory info ---- */

hippo_status hippo__hip_page_alloc(hippo__backend *be, uint64_t size,
                                   uint64_t *addr);
hippo_status hippo__hip_page_free(hippo__backend *be, uint64_t addr,
                                  uint64_t size);
hippo_status hippo__hip_mem_info(hippo__backend *be, uint64_t *free_bytes,
                                 uint64_t *total_bytes);
/* [addr, addr+size) inside one page hippo holds, or one mapped run of
 * granules (else INVALID_ARGUMENT naming `call` and `what`). */
hippo_status hippo__hip_inside(gpu_backend *g, uint64_t addr, uint64_t size,
                               const char *call, const char *what);

/* ---- backend_hip_streams.c: streams, copies, events, captures ---- */

hippo_status hippo__hip_copy(hippo__backend *be, void *stream, uint64_t dst,
                             uint64_t src, uint64_t size);
hippo_status hippo__hip_stream_sync(hippo__backend *be, void *stream);
hippo_status hippo__hip_event_create(hippo__backend *be, void **event);
hippo_status hippo__hip_event_record(hippo__backend *be, void *event,
                                     void *stream);
hippo_status hippo__hip_event_wait(hippo__backend *be, void *event);
hippo_status hippo__hip_event_query(hippo__backend *be, void *event,
                                    bool *done);
hippo_status hippo__hip_event_destroy(hippo__backend *be, void *event);
hippo_status hippo__hip_capture_status(hippo__backend *be, void *stream,
                                       bool *capturing, uint64_t *capture_id);
hippo_status hippo__hip_stream_check(hippo__backend *be, void *stream);

/* ---- backend_hip_vm.c: the ranges, the granule table, the operations ---- */

hippo_status hippo__hip_vm_granularity(hippo__backend *be,
                                       uint64_t *granule);
hippo_status hippo__hip_vm_reserve(hippo__backend *be, uint64_t size,
                                   uint64_t align, uint64_t *addr);
hippo_status hippo__hip_vm_release(hippo__backend *be, uint64_t addr,
                                   uint64_t size);
hippo_status hippo__hip_vm_map(hippo__backend *be, uint64_t addr,
                               uint64_t size, uint64_t granule);
hippo_status hippo__hip_vm_unmap(hippo__backend *be, uint64_t addr,
                                 uint64_t size, uint64_t granule, bool wait,
                                 uint64_t *done);
/* The mapped run holding addr, as {start, size} in run[] (false: none).
 * Locked (either lock). */
bool hippo__hip_vm_run_holding(const gpu_backend *g, uint64_t addr,
                               uint64_t run[2]);
/* Gives every granule, orphan and range back (destroy: no call runs). */
void hippo__hip_vm_fini(gpu_backend *g);

/* ---- backend_hip_vm_driver.c: the driver's steps, the probe at open ---- */

/* The device current for the driver's calls. */
hippo_status hippo__hip_vm_enter(gpu_backend *g, const char *why,
                                 dev_scope *sc);
/* A failed VMM call's status, last_error naming it. */
hippo_status hippo__hip_vm_fail(gpu_backend *g, int err, const char *call);
/* hippo__hip_unmap_one's outcomes (*res). */
enum { UNMAPPED, UNMAP_REFUSED, RELEASE_REFUSED };
/* Granule e (addr, size set) created and mapped, all or nothing; *orphaned
 * counts the bytes of allocations the runtime would not release. */
hippo_status hippo__hip_map_one(gpu_backend *g, vm_granule *e,
                                uint64_t *orphaned);
/* Granule e given back: unmapped, then released (*res says how far). */
hippo_status hippo__hip_unmap_one(gpu_backend *g, vm_granule *e, int *res,
                                  uint64_t *kept);
/* Releases the orphans again (vm_lock held, the device current). */
void hippo__hip_orphans_retry(gpu_backend *g);
/* Whether the device has virtual memory, decided once at open. */
void hippo__hip_vm_probe(gpu_backend *g);

/* ---- backend_hip_emu.c: emulation slots on a real device ---- */

hippo_status hippo__hip_emu_stream_check(hippo__backend *be, void *stream,
                                         const char *call);
hippo_status hippo__hip_emu_stream_create(hippo__backend *be, void **out);
hippo_status hippo__hip_emu_stream_destroy(hippo__backend *be, void *stream);
hippo_status hippo__hip_emu_capture_begin(hippo__backend *be, void *stream,
                                          uint64_t *capture_id);
hippo_status hippo__hip_emu_capture_end(hippo__backend *be, void *stream);
hippo_status hippo__hip_emu_inject_fault(hippo__backend *be,
                                         hippo_call_kind kind, uint64_t nth,
                                         hippo_status status);
hippo_status hippo__hip_emu_read(hippo__backend *be, uint64_t addr,
                                 void *host, uint64_t size);
hippo_status hippo__hip_emu_write(hippo__backend *be, uint64_t addr,
                                  const void *host, uint64_t size);
hippo_status hippo__hip_emu_counters(hippo__backend *be,
                                     hippo_emu_counters *out);

#endif /* HIPPO_BACKEND_HIP_H */
