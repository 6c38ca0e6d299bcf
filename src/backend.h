/* backend.h -- the contract every backend meets (HIP, HOST, DRY).
 *
 * A backend is the only code that talks to a driver.  The core (pools,
 * managers, devices) sees device memory as 64-bit addresses it never
 * dereferences, and asks the backend for everything else through the
 * function table below.
 *
 * Every function returns HIPPO_SUCCESS or a failure status, and on failure
 * has already written last_error (hippo__error_set) naming the backend call
 * and, for HIP, the hipError_t name and number.  A failed call changes
 * nothing: a failed page_alloc holds no memory, a failed page_free keeps the
 * page (the caller keeps it accounted), a failed copy may have copied part
 * of the bytes but the source is intact.
 *
 *  page_alloc(size)      -> a fresh page of exactly `size` bytes (a multiple
 *                           of the alignment), aligned to at least
 *                           `alignment`.  HIPPO_OUT_OF_MEMORY when the device
 *                           has no room.  Never returns address 0.
 *  page_free(addr, size) -> gives a page from page_alloc back.
 *  copy(stream, dst, src, size)
 *                        -> a device-to-device copy ordered on `stream`:
 *                           it may run later, and is only guaranteed done
 *                           after stream_sync(stream) or once an event
 *                           recorded after it reports done.  HOST defers
 *                           it until then on purpose, so a missing
 *                           synchronization shows up as wrong data.
 *  stream_sync(stream)   -> waits for all work queued on `stream`.
 *  event_create          -> an event (recorded on nothing: done).  hippo
 *                           creates events off the reservation path and
 *                           records them again and again.
 *  event_record(event, stream) -> the event now marks the work queued on
 *                           `stream` so far.
 *  event_query(event)    -> *done = whether that work has finished; never
 *                           waits, and on HOST runs nothing (an emulated
 *                           stream's work runs at a sync, a wait, a page
 *                           free that touches it, or its destruction).
 *  event_wait(event)     -> waits until that work has finished.
 *  event_destroy(event)
 *  capture_status(stream)-> *capturing and, when capturing, *capture_id
 *                           (hipStreamIsCapturing/hipStreamGetCaptureInfo).
 *  capture_word(stream)  -> optional: a word holding the stream's capture id
 *                           (0: not capturing) that hippo may read at any
 *                           time without a call, valid while the stream
 *                           exists; NULL where the backend has none (HIP:
 *                           hippo calls capture_status instead).  HOST and
 *                           DRY give the emulated stream's.
 *  mem_info              -> free and total bytes of the device.
 *
 * Virtual memory (optional, all or none: NULL where the device has none):
 *  vm_granularity(&g)    -> the driver's allocation granularity for
 *                           physical memory mapped into a virtual range
 *                           (asked, never assumed); a granule hippo maps
 *                           is a multiple of it.
 *  vm_reserve(size, align) -> a virtual range of `size` bytes (a multiple
 *                           of the granularity) aligned to `align`, with no
 *                           memory behind it (HIPPO_CALL_VM_RANGE).
 *  vm_release(addr, size)-> gives a range back; every granule of it is
 *                           unmapped first by the caller (VM_RANGE).
 *  vm_map(addr, size, granule) -> backs [addr, addr+size) with physical
 *                           allocations of `granule` bytes each (a
 *                           multiple of the granularity: created, mapped
 *                           whole at offset 0), then makes the span
 *                           accessible with one set-access, inside a
 *                           reserved range; one HIPPO_CALL_VM_MAP per
 *                           allocation, one HIPPO_CALL_VM_ACCESS per call;
 *                           all or nothing (a failure unmaps the
 *                           allocations this call made, one
 *                           HIPPO_CALL_VM_UNMAP each).  HIPPO_OUT_OF_MEMORY
 *                           when the device has no room; counts against
 *                           the capacity like pages.
 *  vm_unmap(addr, size, granule, wait, &done) -> gives the allocations of
 *                           `granule` bytes of [addr, addr+size) back
 *                           (unmapped, released), each one a vm_map made
 *                           whole (part of one is HIPPO_INVALID_ARGUMENT,
 *                           as a driver refuses it): one
 *                           HIPPO_CALL_VM_UNMAP each.  With `wait`,
 *                           the device's queued work finishes first
 *                           (neither cuMemUnmap nor hipMemUnmap waits for
 *                           every stream: the GPU path synchronizes the
 *                           device);
 *                           without it the granules must be ones no work
 *                           can touch (just mapped).  On failure *done
 *                           says how many bytes, from addr, went back; the
 *                           rest stays mapped.
 *
 * Streams are the host runtime's native streams (hipStream_t for HIP, the
 * value emu_stream_create gave for HOST/DRY), passed through as void *.
 * NULL is the default stream.
 *
 * Calls are counted by kind (HIPPO_CALL_*) and, on HOST and DRY, can be made
 * to fail (emu_inject_fault): the nth call of a kind from now fails with the
 * chosen status and changes nothing.
 *
 * Thread safety: every function may be called concurrently from several
 * threads; a backend protects its own state.
 */
#ifndef HIPPO_BACKEND_H
#define HIPPO_BACKEND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "hippo.h"

typedef struct hippo__backend hippo__backend;

typedef struct hippo__backend_ops {
  hippo_status (*page_alloc)(hippo__backend *be, uint64_t size,
                             uint64_t *addr);
  hippo_status (*page_free)(hippo__backend *be, uint64_t addr, uint64_t size);
  hippo_status (*copy)(hippo__backend *be, void *stream, uint64_t dst,
                       uint64_t src, uint64_t size);
  hippo_status (*stream_sync)(hippo__backend *be, void *stream);
  hippo_status (*event_create)(hippo__backend *be, void **event);
  hippo_status (*event_record)(hippo__backend *be, void *event, void *stream);
  hippo_status (*event_query)(hippo__backend *be, void *event, bool *done);
  hippo_status (*event_wait)(hippo__backend *be, void *event);
  hippo_status (*event_destroy)(hippo__backend *be, void *event);
  hippo_status (*capture_status)(hippo__backend *be, void *stream,
                                 bool *capturing, uint64_t *capture_id);
  const _Atomic uint64_t *(*capture_word)(hippo__backend *be, void *stream);
  /* optional: refuses a stream stream_attach must not take (another
   * device's); NULL where the backend cannot tell */
  hippo_status (*stream_check)(hippo__backend *be, void *stream);
  /* optional: refuses a stream the emulation slots (emu_copy,
   * emu_stream_sync) must not pass on: on HIP, one emu_stream_create did
   * not make (a foreign pointer would reach the runtime) */
  hippo_status (*emu_stream_check)(hippo__backend *be, void *stream,
                                   const char *call);
  hippo_status (*mem_info)(hippo__backend *be, uint64_t *free_bytes,
                           uint64_t *total_bytes);
  /* Virtual memory: NULL where the device has none. */
  hippo_status (*vm_granularity)(hippo__backend *be, uint64_t *granule);
  hippo_status (*vm_reserve)(hippo__backend *be, uint64_t size,
                             uint64_t align, uint64_t *addr);
  hippo_status (*vm_release)(hippo__backend *be, uint64_t addr,
                             uint64_t size);
  hippo_status (*vm_map)(hippo__backend *be, uint64_t addr, uint64_t size,
                         uint64_t granule);
  hippo_status (*vm_unmap)(hippo__backend *be, uint64_t addr, uint64_t size,
                           uint64_t granule, bool wait, uint64_t *done);
  void (*destroy)(hippo__backend *be);

  /* Emulation: NULL where the backend has none (HIP). */
  hippo_status (*emu_stream_create)(hippo__backend *be, void **stream);
  hippo_status (*emu_stream_destroy)(hippo__backend *be, void *stream);
  hippo_status (*emu_capture_begin)(hippo__backend *be, void *stream,
                                    uint64_t *capture_id);
  hippo_status (*emu_capture_end)(hippo__backend *be, void *stream);
  hippo_status (*emu_inject_fault)(hippo__backend *be, hippo_call_kind kind,
                                   uint64_t nth, hippo_status status);
  hippo_status (*emu_read)(hippo__backend *be, uint64_t addr, void *host,
                           uint64_t size);
  hippo_status (*emu_write)(hippo__backend *be, uint64_t addr,
                            const void *host, uint64_t size);
  hippo_status (*emu_counters)(hippo__backend *be, hippo_emu_counters *out);
} hippo__backend_ops;

/* The common head of every backend object. */
struct hippo__backend {
  const hippo__backend_ops *ops;
  hippo_backend kind;     /* HIPPO_BACKEND_HIP, _HOST or _DRY */
  uint64_t alignment;     /* page and slice alignment, a power of two */
  uint64_t total_memory;  /* device bytes (HOST/DRY: the emulated capacity;
                             HIP: the device's, or the budget below it) */
  /* What device_info tells (NUL-terminated; empty when unknown). */
  char device_name[64];   /* "NVIDIA H200", "AMD Instinct MI300X", "HOST" */
  char arch[32];          /* "sm 9.0", "cc 9.4", "host" */
  char runtime[128];      /* "CUDA 13000 (libcudart.so.13)", "none" */
  char note[512];         /* AUTO: why this backend was chosen */
  char vm_why[256];       /* why the device offers no virtual memory (its
                             vm_* ops NULL), when the backend knows; "" */
  bool vm_captures;       /* a capturing stream may reserve a range and
                             map (vm_reserve, vm_map: create, map, set
                             access) -- CUDA; not HIP, whose map waits on
                             the null stream, nor HOST and DRY, which
                             follow HIP (docs/decisions.md) */
};

/* Constructors.  On failure they return the status, write last_error and
 * leave *out untouched. */
hippo_status hippo__backend_host_create(uint64_t capacity, uint64_t alignment,
                                        hippo__backend **out);
hippo_status hippo__backend_dry_create(uint64_t capacity, uint64_t alignment,
                                       hippo__backend **out);
/* A GPU through a runtime loaded now (gpu_rt.h, backend_hip.c): capacity
 * 0 = the device's memory, else a budget below it; alignment 0 = the
 * device's, else a power of two at or above it.  HIPPO_NO_DEVICE when no
 * runtime loads, none sees a device, or the ordinal is out of range
 * (last_error says what was tried). */
hippo_status hippo__backend_hip_create(int32_t ordinal, uint64_t capacity,
                                       uint64_t alignment,
                                       hippo__backend **out);

/* emu_inject_fault's rules, for every backend: `kind` known, `status` a
 * failure, `nth` countable past `calls` (the calls of the kind so far);
 * *at = the call number to fail (0: clear).  HIPPO_INVALID_ARGUMENT naming
 * `backend` otherwise. */
hippo_status hippo__fault_arm(const char *backend, hippo_call_kind kind,
                              uint64_t nth, hippo_status status,
                              uint64_t calls, uint64_t *at);
/* HIPPO_INVALID_ARGUMENT unless [addr, addr+size) lies inside `page`
 * ({address, size}: the live page at or below addr, NULL when none), with
 * last_error naming the backend, the call and the argument (`what`). */
hippo_status hippo__range_check(const char *backend, const char *call,
                                const char *what, uint64_t addr,
                                uint64_t size, const uint64_t *page);
/* "HIPPO_CALL_ALLOC", ... */
const char *hippo__call_kind_name(hippo_call_kind kind);

/* The default emulated capacity and alignment (hippo_device_desc zeros). */
#define HIPPO__DEFAULT_CAPACITY (UINT64_C(16) << 30)
#define HIPPO__DEFAULT_ALIGNMENT UINT64_C(256)

#endif /* HIPPO_BACKEND_H */
