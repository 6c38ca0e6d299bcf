/* backend_hip.c -- HIP: a real GPU through a runtime loaded at run time
 * (gpu_rt.h): AMD's HIP runtime, or on NVIDIA GPUs the CUDA runtime that
 * HIP's NVIDIA platform maps its calls onto.
 *
 * Which runtime: $HIPPO_GPU_RUNTIME = "hip" (AMD) or "cuda" (NVIDIA) forces
 * one; unset, the HIP runtime is tried first and the CUDA runtime second,
 * and the first that loads and sees at least one device serves.
 *
 * Every runtime call's return code is checked; a failure becomes the status
 * hippo__gpu_status maps it to, and last_error names the runtime, the call,
 * the error's name and number and the runtime's message.  Every device call
 * runs on the backend's device and gives the thread its own current device
 * back afterwards (enter/leave), so hippo never changes which device the
 * host runtime's next call goes to: on CUDA with the driver's context calls
 * by pushing the device's primary context and popping it, never setting
 * the thread's device; else with SetDevice, when the thread's current one
 * differs.
 *
 * The device:
 *  - alignment: the device's texture alignment, at least 256; a
 *    desc.alignment that is a power of two at or above it is honoured, any
 *    other is refused (HIPPO_INVALID_ARGUMENT, naming the device's);
 *  - memory: the device's total; a desc.capacity below it is a budget:
 *    hippo holds at most that many bytes of the device (HIPPO_OUT_OF_MEMORY
 *    beyond, without asking the runtime), and the presets size themselves
 *    on it;
 *  - name and architecture (device_info), from the runtime.
 *
 * Virtual memory (backend.h vm_*; the section "virtual memory" below):
 * hipMemAddressReserve, hipMemCreate, hipMemMap, ... on HIP, the driver's
 * cuMem* calls on CUDA; decided per device at open (vm_probe): where the
 * runtime lacks a call, the device says it has none or the runtime
 * answers NotSupported, the device's ops table has no vm_* (gpu_ops), so
 * layouts fall back.
 *
 * Emulation slots work on a real device too (the behaviour suite runs on
 * every backend): streams (non-blocking), captures (relaxed mode, so other
 * threads may allocate meanwhile, as on HOST), copies, synchronous host
 * reads and writes of bytes inside a page hippo holds or a mapped granule,
 * fault injection and counters (calls by kind, pages and bytes held, bytes
 * copied, ranges and granules).
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
#include <config.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
                         open to destroy; NULL: enter uses SetDevice */
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

  /* Virtual memory: decided at open (vm_probe); base.ops is gpu_vm_ops
   * when the device has it, gpu_ops (vm_* NULL) when not, why in
   * base.vm_why. */
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

static gpu_backend *gpu_of(hippo__backend *be) { return (gpu_backend *)be; }

static const char *const kind_names[HIPPO_CALL_KINDS] = {
    "page_alloc", "page_free", "copy", "stream_sync", "event", "capture_query",
    "vm_range", "vm_map", "vm_unmap", "vm_access"};

/* Counts a call of `kind` (named `name` in the message); an injected fault
 * makes it fail. */
static hippo_status call_named(gpu_backend *g, hippo_call_kind kind,
                               const char *name) {
  uint64_t n = atomic_fetch_add_explicit(&g->calls[kind], 1,
                                         memory_order_relaxed) +
               1;
  hippo_status st = HIPPO_SUCCESS;
  if (!atomic_load_explicit(&g->armed, memory_order_acquire))
    return HIPPO_SUCCESS;
  pthread_mutex_lock(&g->lock);
  if (g->faults[kind].at == n) {
    st = g->faults[kind].status;
    g->faults[kind].at = 0;
  }
  pthread_mutex_unlock(&g->lock);
  if (st != HIPPO_SUCCESS)
    return hippo__error_set(st, "injected fault: %s %s call #%llu failed with "
                            "%s",
                            g->rt->name, name, (unsigned long long)n,
                            hippo__status_name(st));
  return HIPPO_SUCCESS;
}

static hippo_status call(gpu_backend *g, hippo_call_kind kind) {
  return call_named(g, kind, kind_names[kind]);
}

/* ---- the thread's current device ------------------------------------------ */

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

static hippo_status enter(gpu_backend *g, const char *why, dev_scope *sc) {
  int cur = -1, err;
  sc->restore = sc->pushed = false;
  if (g->primary) {
    void *ctx = NULL;
    if (g->rt->ctx.get_current(&ctx) == HIPPO__GPU_SUCCESS &&
        ctx == g->primary)
      return HIPPO_SUCCESS;
    err = g->rt->ctx.push(g->primary);
    if (err != HIPPO__GPU_SUCCESS)
      return hippo__error_wrap(hippo__gpu_vm_fail(g->rt, err,
                                                  "CtxPushCurrent", NULL),
                               "%s on %s device %d", why, g->rt->name,
                               (int)g->ordinal);
    sc->pushed = true;
    return HIPPO_SUCCESS;
  }
  if (g->rt->get_device(&cur) == HIPPO__GPU_SUCCESS && cur == g->ordinal)
    return HIPPO_SUCCESS;
  err = g->rt->set_device(g->ordinal);
  if (err != HIPPO__GPU_SUCCESS)
    return hippo__error_wrap(hippo__gpu_fail(g->rt, err, "SetDevice", NULL),
                             "%s on %s device %d", why, g->rt->name,
                             (int)g->ordinal);
  sc->prev = cur;
  sc->restore = cur >= 0;
  return HIPPO_SUCCESS;
}

static hippo_status leave(gpu_backend *g, const dev_scope *sc,
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
static hippo_status begin(gpu_backend *g, hippo_call_kind kind,
                          const char *why, dev_scope *sc) {
  hippo_status st = call(g, kind);
  return st != HIPPO_SUCCESS ? st : enter(g, why, sc);
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
 * hippo was never given is not seen (README: attach it). */
typedef struct relaxed_scope {
  int prev;     /* the thread's mode before */
  bool restore; /* whether it was exchanged */
} relaxed_scope;

static void relax(const gpu_backend *g, relaxed_scope *rs) {
  rs->prev = HIPPO__GPU_CAPTURE_RELAXED;
  rs->restore = g->rt->exchange_capture_mode &&
                g->rt->exchange_capture_mode(&rs->prev) == HIPPO__GPU_SUCCESS;
}

static void unrelax(const gpu_backend *g, const relaxed_scope *rs) {
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
static void handled(const hippo__gpu_rt *rt) {
  if (rt->get_last_error)
    (void)rt->get_last_error();
}

#define RT(g, expr, name, hint)                                                \
  ((err = (expr)) == HIPPO__GPU_SUCCESS                                        \
       ? HIPPO_SUCCESS                                                         \
       : hippo__gpu_fail((g)->rt, err, (name), (hint)))

/* ---- pages ------------------------------------------------------------------ */

/* Index of the page holding addr, or of where a page at addr would go. */
static size_t page_at(const gpu_backend *g, uint64_t addr) {
  size_t lo = 0, hi = g->npages;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (g->pages[mid].addr + g->pages[mid].size <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Page [addr, addr+size) enters the registry, in address order (a
 * promised place: npages < cap_pages).  Locked. */
static void page_record(gpu_backend *g, uint64_t addr, uint64_t size) {
  size_t i = page_at(g, addr);
  memmove(&g->pages[i + 1], &g->pages[i], (g->npages - i) * sizeof *g->pages);
  g->pages[i] = (gpu_page){addr, size};
  g->npages++;
}

static hippo_status gpu_page_alloc(hippo__backend *be, uint64_t size,
                                   uint64_t *addr) {
  gpu_backend *g = gpu_of(be);
  dev_scope sc;
  hippo_status st;
  void *p = NULL;
  int err;

  if ((st = call(g, HIPPO_CALL_ALLOC)) != HIPPO_SUCCESS)
    return st;
  if (!addr || size == 0 || (size & (be->alignment - 1)) != 0)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s page_alloc: size %llu must be a positive "
                            "multiple of %llu",
                            g->rt->name, (unsigned long long)size,
                            (unsigned long long)be->alignment);
  pthread_mutex_lock(&g->lock);
  if (size > g->budget - g->bytes_held) {
    uint64_t held = g->bytes_held;
    pthread_mutex_unlock(&g->lock);
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s page_alloc: %llu bytes requested, %llu of "
                            "the device's budget of %llu bytes held "
                            "(hippo_device_desc.capacity)",
                            g->rt->name, (unsigned long long)size,
                            (unsigned long long)held,
                            (unsigned long long)g->budget);
  }
  /* room for the record first, beyond those promised to the calls of
   * other threads in flight: a page is never taken without one */
  if (g->npages + g->pages_coming == g->cap_pages) {
    size_t cap = g->cap_pages ? g->cap_pages * 2 : 64;
    gpu_page *grown = realloc(g->pages, cap * sizeof *grown);
    if (!grown) {
      pthread_mutex_unlock(&g->lock);
      return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                              "%s page_alloc: host memory for %zu page "
                              "records",
                              g->rt->name, cap);
    }
    g->pages = grown;
    g->cap_pages = cap;
  }
  g->bytes_held += size; /* reserved while the runtime allocates */
  g->pages_coming++;
  pthread_mutex_unlock(&g->lock);
  st = enter(g, "page_alloc", &sc);
  if (st == HIPPO_SUCCESS) {
    relaxed_scope rs;
    relax(g, &rs);
    err = g->rt->malloc_(&p, (size_t)size);
    unrelax(g, &rs);
    if (err == HIPPO__GPU_OUT_OF_MEMORY)
      handled(g->rt); /* the caller frees cached pages and retries */
    st = RT(g, err, "Malloc",
            err == HIPPO__GPU_OUT_OF_MEMORY
                ? "release or clean up device memory"
                : NULL);
    if (st == HIPPO_SUCCESS && !p)
      st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s Malloc of %llu bytes returned NULL",
                            g->rt->name, (unsigned long long)size);
    st = leave(g, &sc, st);
  }
  pthread_mutex_lock(&g->lock);
  g->pages_coming--;
  if (st != HIPPO_SUCCESS) {
    g->bytes_held -= size;
    pthread_mutex_unlock(&g->lock);
    return hippo__error_wrap(st, "%s page_alloc of %llu bytes", g->rt->name,
                             (unsigned long long)size);
  }
  page_record(g, (uint64_t)(uintptr_t)p, size);
  if (g->bytes_held > g->peak_bytes_held)
    g->peak_bytes_held = g->bytes_held;
  pthread_mutex_unlock(&g->lock);
  *addr = (uint64_t)(uintptr_t)p;
  return HIPPO_SUCCESS;
}

static hippo_status gpu_page_free(hippo__backend *be, uint64_t addr,
                                  uint64_t size) {
  gpu_backend *g = gpu_of(be);
  dev_scope sc;
  hippo_status st;
  size_t i;
  int err;

  if ((st = call(g, HIPPO_CALL_FREE)) != HIPPO_SUCCESS)
    return st;
  pthread_mutex_lock(&g->lock);
  i = page_at(g, addr);
  if (i == g->npages || g->pages[i].addr != addr || g->pages[i].size != size) {
    pthread_mutex_unlock(&g->lock);
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s page_free: %#llx (%llu bytes) is not a page "
                            "of this device",
                            g->rt->name, (unsigned long long)addr,
                            (unsigned long long)size);
  }
  /* The record leaves before the runtime frees the page: once freed, its
   * address may come back from another thread's page_alloc, whose record
   * must not meet this one.  Its place stays promised (pages_coming), so
   * a refused free puts it back without growing the registry. */
  memmove(&g->pages[i], &g->pages[i + 1],
          (g->npages - i - 1) * sizeof *g->pages);
  g->npages--;
  g->pages_coming++;
  pthread_mutex_unlock(&g->lock);
  st = enter(g, "page_free", &sc);
  if (st == HIPPO_SUCCESS)
    st = leave(g, &sc,
               RT(g, g->rt->free_((void *)(uintptr_t)addr), "Free", NULL));
  pthread_mutex_lock(&g->lock);
  g->pages_coming--;
  if (st == HIPPO_SUCCESS) {
    g->bytes_held -= size;
  } else { /* still held: back in the registry */
    page_record(g, addr, size);
  }
  pthread_mutex_unlock(&g->lock);
  return st;
}

/* ---- streams, copies, events ------------------------------------------------ */

static bool vm_run_holding(const gpu_backend *g, uint64_t addr,
                           uint64_t run[2]);

/* [addr, addr+size) inside one page hippo holds, or one mapped run of
 * granules (`what`: the argument). */
static hippo_status inside(gpu_backend *g, uint64_t addr, uint64_t size,
                           const char *call, const char *what) {
  uint64_t page[2];
  bool found;
  size_t i;
  pthread_mutex_lock(&g->lock);
  i = page_at(g, addr);
  found = i < g->npages && g->pages[i].addr <= addr;
  if (found) {
    page[0] = g->pages[i].addr;
    page[1] = g->pages[i].size;
  } else {
    found = vm_run_holding(g, addr, page);
  }
  pthread_mutex_unlock(&g->lock);
  return hippo__range_check(g->rt->name, call, what, addr, size,
                            found ? page : NULL);
}

static hippo_status gpu_copy(hippo__backend *be, void *stream, uint64_t dst,
                             uint64_t src, uint64_t size) {
  gpu_backend *g = gpu_of(be);
  dev_scope sc;
  hippo_status st;
  int err;

  if ((st = call(g, HIPPO_CALL_COPY)) != HIPPO_SUCCESS)
    return st;
  if (size == 0)
    return HIPPO_SUCCESS;
  /* inside pages hippo holds (emu_copy takes the caller's addresses) */
  if ((st = inside(g, src, size, "copy", "source")) != HIPPO_SUCCESS ||
      (st = inside(g, dst, size, "copy", "destination")) != HIPPO_SUCCESS)
    return st;
  if ((st = enter(g, "copy", &sc)) != HIPPO_SUCCESS)
    return st;
  st = leave(g, &sc,
             RT(g,
                g->rt->memcpy_async((void *)(uintptr_t)dst,
                                    (const void *)(uintptr_t)src, (size_t)size,
                                    HIPPO__GPU_MEMCPY_D2D, stream),
                "MemcpyAsync", NULL));
  if (st == HIPPO_SUCCESS) {
    pthread_mutex_lock(&g->lock);
    g->bytes_copied += size;
    pthread_mutex_unlock(&g->lock);
  }
  return st;
}

static hippo_status gpu_stream_sync(hippo__backend *be, void *stream) {
  gpu_backend *g = gpu_of(be);
  int cs = HIPPO__GPU_CAPTURE_NONE, err;
  dev_scope sc;
  hippo_status st;

  if ((st = begin(g, HIPPO_CALL_SYNC, "stream_sync", &sc)) != HIPPO_SUCCESS)
    return st;
  /* A stream that captures is refused before the runtime is asked: its
   * synchronize would invalidate the capture (clr hip_stream.cpp
   * StreamCaptureOngoing; CUDA lists it among the operations a capture
   * prohibits), and so would the legacy stream's while a blocking stream
   * captures (906) -- hippo never breaks its caller's capture (issue 40
   * item 8). */
  err = g->rt->stream_is_capturing(stream, &cs);
  if (err == HIPPO__GPU_CAPTURE_IMPLICIT)
    handled(g->rt);
  if (err == HIPPO__GPU_CAPTURE_IMPLICIT ||
      (err == HIPPO__GPU_SUCCESS && cs != HIPPO__GPU_CAPTURE_NONE))
    return leave(g, &sc,
                 hippo__error_set(HIPPO_BACKEND_ERROR,
                                  "%s stream_sync: stream %p %s; "
                                  "synchronizing it would invalidate the "
                                  "capture (%sStreamSynchronize answers "
                                  "StreamCaptureUnsupported): end the "
                                  "capture first",
                                  g->rt->name, stream,
                                  err == HIPPO__GPU_SUCCESS
                                      ? "is capturing"
                                      : "is the legacy stream, and a "
                                        "blocking stream captures",
                                  g->rt->prefix));
  atomic_fetch_add_explicit(&g->waits, 1, memory_order_relaxed);
  return leave(g, &sc,
               RT(g, g->rt->stream_sync(stream), "StreamSynchronize", NULL));
}

static hippo_status gpu_event_create(hippo__backend *be, void **event) {
  gpu_backend *g = gpu_of(be);
  dev_scope sc;
  hippo_status st;
  int err;

  if ((st = begin(g, HIPPO_CALL_EVENT, "event_create", &sc)) != HIPPO_SUCCESS)
    return st;
  return leave(g, &sc,
               RT(g,
                  g->rt->event_create(event, HIPPO__GPU_EVENT_DISABLE_TIMING),
                  "EventCreateWithFlags", NULL));
}

static hippo_status gpu_event_record(hippo__backend *be, void *event,
                                     void *stream) {
  gpu_backend *g = gpu_of(be);
  dev_scope sc;
  hippo_status st;
  int err;

  if ((st = begin(g, HIPPO_CALL_EVENT, "event_record", &sc)) != HIPPO_SUCCESS)
    return st;
  return leave(g, &sc,
               RT(g, g->rt->event_record(event, stream), "EventRecord", NULL));
}

static hippo_status gpu_event_wait(hippo__backend *be, void *event) {
  gpu_backend *g = gpu_of(be);
  hippo_status st;
  int err;

  if ((st = call(g, HIPPO_CALL_EVENT)) != HIPPO_SUCCESS)
    return st;
  atomic_fetch_add_explicit(&g->waits, 1, memory_order_relaxed);
  return RT(g, g->rt->event_sync(event), "EventSynchronize", NULL);
}

static hippo_status gpu_event_query(hippo__backend *be, void *event,
                                    bool *done) {
  gpu_backend *g = gpu_of(be);
  hippo_status st;
  int err;

  relaxed_scope rs;

  if ((st = call(g, HIPPO_CALL_EVENT)) != HIPPO_SUCCESS)
    return st;
  relax(g, &rs);
  err = g->rt->event_query(event);
  unrelax(g, &rs);
  *done = err == HIPPO__GPU_SUCCESS;
  if (err == HIPPO__GPU_NOT_READY)
    handled(g->rt);
  if (err == HIPPO__GPU_SUCCESS || err == HIPPO__GPU_NOT_READY)
    return HIPPO_SUCCESS;
  return hippo__gpu_fail(g->rt, err, "EventQuery", NULL);
}

static hippo_status gpu_event_destroy(hippo__backend *be, void *event) {
  gpu_backend *g = gpu_of(be);
  int err;
  return RT(g, g->rt->event_destroy(event), "EventDestroy", NULL);
}

static hippo_status gpu_capture_status(hippo__backend *be, void *stream,
                                       bool *capturing, uint64_t *capture_id) {
  gpu_backend *g = gpu_of(be);
  unsigned long long id = 0;
  dev_scope sc;
  hippo_status st;
  int cs = HIPPO__GPU_CAPTURE_NONE, err;

  if ((st = begin(g, HIPPO_CALL_CAPTURE_QUERY, "capture_status", &sc)) != HIPPO_SUCCESS)
    return st;
  err = g->rt->stream_is_capturing(stream, &cs);
  if (err == HIPPO__GPU_CAPTURE_IMPLICIT) {
    /* The legacy default stream, while a blocking stream of the device
     * captures: the runtime refuses work on it until that capture ends
     * (CUDA: "the legacy stream is in an unusable state"), so nothing may
     * be asked of the driver for it -- no page, no copy, no event.  It
     * records no graph of its own, so there is no id to hold for: the
     * call is refused as one made during a capture, and the caller
     * retries once the capture ended. */
    handled(g->rt);
    return leave(g, &sc,
                 hippo__error_set(HIPPO_GRAPH_RECORDING,
                                  "%s StreamIsCapturing: the legacy default "
                                  "stream is unusable while another stream "
                                  "of the device captures (%s, %d); retry "
                                  "once that capture ended, or attach a "
                                  "stream of your own",
                                  g->rt->name,
                                  hippo__gpu_err_name(g->rt->flavor, g->rt,
                                                      err),
                                  err));
  }
  /* not a stream: CUDA's 400; ROCm answers 709 (clr hip_stream.cpp,
   * hipErrorContextIsDestroyed for a stream it does not know) */
  if (err == HIPPO__GPU_INVALID_HANDLE ||
      (g->rt->flavor == HIPPO__GPU_HIP &&
       err == HIPPO__GPU_CONTEXT_DESTROYED))
    return leave(g, &sc,
                 hippo__error_set(HIPPO_INVALID_ARGUMENT,
                                  "%s StreamIsCapturing: %p is not a stream "
                                  "of the runtime (%s, %d)",
                                  g->rt->name, stream,
                                  hippo__gpu_err_name(g->rt->flavor, g->rt,
                                                      err),
                                  err));
  if (err != HIPPO__GPU_SUCCESS)
    return leave(g, &sc, hippo__gpu_fail(g->rt, err, "StreamIsCapturing",
                                         NULL));
  /* An invalidated capture has not ended yet: still capturing, but with
   * no id to hold for (both runtimes give the id of an active capture
   * only: clr hip_graph.cpp hipStreamGetCaptureInfo_common), so the call
   * is refused and nothing changes until the caller ends it (issue 40
   * item 8) */
  if (cs == HIPPO__GPU_CAPTURE_STATUS_INVALIDATED)
    return leave(g, &sc,
                 hippo__error_set(HIPPO_GRAPH_RECORDING,
                                  "%s StreamIsCapturing: the runtime "
                                  "invalidated the capture of stream %p "
                                  "(status %d: a call the capture "
                                  "prohibits was made); end it (%sStream"
                                  "EndCapture answers StreamCapture"
                                  "Invalidated), then retry",
                                  g->rt->name, stream, cs, g->rt->prefix));
  *capturing = cs != HIPPO__GPU_CAPTURE_NONE;
  if (*capturing && capture_id) {
    err = g->rt->stream_capture_info(stream, &cs, &id, NULL, NULL, NULL,
                                     NULL);
    if (err != HIPPO__GPU_SUCCESS)
      return leave(g, &sc, hippo__gpu_fail(g->rt, err,
                                           "StreamGetCaptureInfo", NULL));
  }
  if (*capturing && capture_id && id == 0)
    /* CUDA gives the id only for an active capture: an invalidated one
     * (still to be ended) may answer none, and 0 would read as "not
     * capturing" (backend.h) */
    return leave(g, &sc,
                 hippo__error_set(HIPPO_GRAPH_RECORDING,
                                  "%s StreamGetCaptureInfo: stream %p is "
                                  "capturing (status %d) but the runtime "
                                  "gives no capture id, as for a capture "
                                  "it invalidated; end the capture, then "
                                  "retry",
                                  g->rt->name, stream, cs));
  if (capture_id)
    *capture_id = *capturing ? (uint64_t)id : 0;
  return leave(g, &sc, HIPPO_SUCCESS);
}

/* The device of a stream from its context (CUDA: cuStreamGetCtx, then
 * cuCtxGetDevice with that context pushed; the legacy stream's context is
 * the current one, hence enter). */
static hippo_status device_of_ctx(gpu_backend *g, void *stream, int *dev) {
  const hippo__gpu_ctx_calls *c = &g->rt->ctx;
  void *ctx = NULL, *popped;
  hippo_status st;
  dev_scope sc;
  int err;
  if ((st = enter(g, "stream_check", &sc)) != HIPPO_SUCCESS)
    return st;
  if ((err = c->stream_ctx(stream, &ctx)) != HIPPO__GPU_SUCCESS)
    st = hippo__gpu_vm_fail(g->rt, err, "StreamGetCtx", NULL);
  else if ((err = c->push(ctx)) != HIPPO__GPU_SUCCESS)
    st = hippo__gpu_vm_fail(g->rt, err, "CtxPushCurrent", NULL);
  else {
    if ((err = c->get_device(dev)) != HIPPO__GPU_SUCCESS)
      st = hippo__gpu_vm_fail(g->rt, err, "CtxGetDevice", NULL);
    (void)c->pop(&popped);
  }
  return leave(g, &sc, st);
}

/* A stream of another device is refused (where the runtime can tell).
 * cudaStreamGetDevice came with CUDA 12.8 (cuda_runtime_api.h), and a 12.8
 * runtime on an older driver answers CallRequiresNewerDriver: then the
 * stream's context says, which the driver has told since CUDA 9.2
 * (cuStreamGetCtx, cuCtxGetDevice in cuda.h); without either the check is
 * skipped, and such a stream fails later at EventRecord (issue 40 item
 * 11). */
static hippo_status gpu_stream_check(hippo__backend *be, void *stream) {
  gpu_backend *g = gpu_of(be);
  int dev = -1, err = HIPPO__GPU_NOT_SUPPORTED;
  hippo_status st;
  if (!stream)
    return HIPPO_SUCCESS;
  if (g->rt->stream_device)
    err = g->rt->stream_device(stream, &dev);
  if (g->rt->flavor == HIPPO__GPU_CUDA &&
      (err == HIPPO__GPU_NOT_SUPPORTED ||
       err == HIPPO__GPU_CALL_NEEDS_DRIVER)) {
    if (g->rt->stream_device)
      handled(g->rt);
    if (!g->primary || !g->rt->ctx.stream_ctx || !g->rt->ctx.get_device)
      return HIPPO_SUCCESS;
    if ((st = device_of_ctx(g, stream, &dev)) != HIPPO_SUCCESS)
      return hippo__error_wrap(st, "%s stream %p: its device", g->rt->name,
                               stream);
    err = HIPPO__GPU_SUCCESS;
  } else if (!g->rt->stream_device) {
    return HIPPO_SUCCESS;
  }
  if (err != HIPPO__GPU_SUCCESS)
    return hippo__gpu_fail(g->rt, err, "StreamGetDevice", NULL);
  if (dev != g->ordinal)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s stream %p belongs to device %d, this hippo "
                            "device is %s device %d: attach it to a device "
                            "opened with hip_device %d",
                            g->rt->name, stream, dev, g->rt->name,
                            (int)g->ordinal, dev);
  return HIPPO_SUCCESS;
}

static hippo_status gpu_mem_info(hippo__backend *be, uint64_t *free_bytes,
                                 uint64_t *total_bytes) {
  gpu_backend *g = gpu_of(be);
  dev_scope sc;
  size_t fr = 0, tot = 0;
  hippo_status st;
  int err;

  if ((st = enter(g, "mem_info", &sc)) != HIPPO_SUCCESS)
    return st;
  st = leave(g, &sc, RT(g, g->rt->mem_info(&fr, &tot), "MemGetInfo", NULL));
  if (st != HIPPO_SUCCESS)
    return st;
  if (g->budget) { /* the budget, and what of it the device still has */
    uint64_t left;
    pthread_mutex_lock(&g->lock);
    left = g->budget - g->bytes_held;
    pthread_mutex_unlock(&g->lock);
    tot = g->budget < tot ? g->budget : tot;
    fr = left < fr ? left : fr;
  }
  if (free_bytes)
    *free_bytes = fr;
  if (total_bytes)
    *total_bytes = tot;
  return HIPPO_SUCCESS;
}

/* ---- virtual memory ------------------------------------------------------------
 *
 * vm_reserve/vm_release are hipMemAddressReserve/hipMemAddressFree (CUDA:
 * cuMemAddressReserve/cuMemAddressFree, the driver's calls through the
 * runtime's entry point: gpu_rt.h).  vm_map backs each granule with its
 * own physical allocation -- hipMemCreate of `granule` bytes, hipMemMap of
 * it whole at the granule's address, hipMemSetAccess read-write for the
 * device -- so granules go back one by one: vm_unmap is hipMemUnmap and
 * hipMemRelease of each (on HIP before 7 a granule larger than 256 MiB is
 * several allocations, vm_part: map_one).  A table (granule address ->
 * handle) finds the handle again; each range keeps its mapped runs, so
 * copies and emu_read/emu_write inside mapped granules are accepted like
 * those inside pages.  Mapped bytes are held bytes (bytes_held, the budget, mem_info).
 *
 * Every call's status is checked; a failure names the call in last_error
 * ("HIP hipMemMap failed: ...", "CUDA cuMemMap failed: ...").  vm_map is
 * all or nothing: a failure unmaps and releases what the call mapped.  A
 * granule whose unmap the runtime refuses stays mapped (and counted); a
 * handle whose release it refuses after the unmap stays held (an orphan)
 * and is released again at the next vm_map, vm_unmap or destroy.
 *
 * cuMemUnmap does not wait for the device's work, and hipMemUnmap waits
 * only for the null stream and the blocking streams (not hippo's
 * non-blocking ones), so a vm_unmap with `wait` synchronizes the device
 * first on both (DeviceSynchronize), once per call.  The VMM calls of a device run
 * one at a time (vm_lock): ROCm releases have had races between concurrent
 * map calls and spurious hipMemSetAccess failures, so nothing overlaps and
 * every answer is checked.
 *
 * Calls are counted as on HOST and DRY: vm_reserve and vm_release one
 * HIPPO_CALL_VM_RANGE each, one HIPPO_CALL_VM_MAP per allocation created
 * and mapped (a granule in parts counts once), one HIPPO_CALL_VM_ACCESS
 * per map call (access is set once over its span), one
 * HIPPO_CALL_VM_UNMAP per allocation unmapped and released; an injected
 * fault fails that
 * call with nothing changed (vm_map gives back what the call had mapped,
 * vm_unmap stops there and says how far it got). */

/* The device current for the driver's calls.  On CUDA without the
 * context calls the device is set even when current: cudaSetDevice binds
 * its primary context to the thread, which the driver's calls need
 * (cudaGetDevice answers 0 on a thread that never had one); with them,
 * enter's push makes it current. */
static hippo_status vm_enter(gpu_backend *g, const char *why, dev_scope *sc) {
  int cur = -1, err;
  if (g->rt->flavor == HIPPO__GPU_HIP || g->primary)
    return enter(g, why, sc);
  sc->restore = sc->pushed = false;
  if (g->rt->get_device(&cur) != HIPPO__GPU_SUCCESS)
    cur = -1;
  err = g->rt->set_device(g->ordinal);
  if (err != HIPPO__GPU_SUCCESS)
    return hippo__error_wrap(hippo__gpu_fail(g->rt, err, "SetDevice", NULL),
                             "%s on %s device %d", why, g->rt->name,
                             (int)g->ordinal);
  sc->prev = cur;
  sc->restore = cur >= 0 && cur != g->ordinal;
  return HIPPO_SUCCESS;
}

/* A failed VMM call's status, last_error naming it (and, on HIP, the
 * runtime's last error reset for an out-of-memory answer: the caller gives
 * idle memory back and retries, as after a failed Malloc). */
static hippo_status vm_fail(gpu_backend *g, int err, const char *call) {
  bool oom = err == HIPPO__GPU_OUT_OF_MEMORY;
  if (oom && g->rt->flavor == HIPPO__GPU_HIP)
    handled(g->rt);
  return hippo__gpu_vm_fail(g->rt, err, call,
                            oom ? "release or clean up device memory" : NULL);
}

/* Index of the range holding addr, or g->nranges.  Locked (either lock). */
static size_t range_at(const gpu_backend *g, uint64_t addr) {
  size_t lo = 0, hi = g->nranges;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (g->ranges[mid].addr + g->ranges[mid].size <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < g->nranges && g->ranges[lo].addr <= addr ? lo : g->nranges;
}

static bool vm_run_holding(const gpu_backend *g, uint64_t addr,
                           uint64_t run[2]) {
  size_t i = range_at(g, addr);
  return i < g->nranges && hippo__vm_runs_holding(&g->ranges[i].runs, addr,
                                                  run);
}

/* ---- the granule table (vm_lock) ---- */

static size_t gran_home(const gpu_backend *g, uint64_t addr) {
  uint64_t h = (addr >> 12) * UINT64_C(0x9E3779B97F4A7C15);
  return (size_t)(h >> 32) & (g->cap_granules - 1);
}

static vm_granule *gran_find(const gpu_backend *g, uint64_t addr) {
  if (!g->cap_granules)
    return NULL;
  for (size_t i = gran_home(g, addr);; i = (i + 1) & (g->cap_granules - 1)) {
    if (g->granules[i].addr == addr)
      return &g->granules[i];
    if (g->granules[i].addr == 0)
      return NULL;
  }
}

/* Puts e in (room made; its address not in the table). */
static void gran_put(gpu_backend *g, vm_granule e) {
  size_t i = gran_home(g, e.addr);
  while (g->granules[i].addr)
    i = (i + 1) & (g->cap_granules - 1);
  g->granules[i] = e;
  g->ngranules++;
}

/* Room for `more` entries, the table at most half full (false: no host
 * memory). */
static bool gran_room(gpu_backend *g, size_t more) {
  size_t cap = g->cap_granules ? g->cap_granules : 64;
  vm_granule *old = g->granules, *grown;
  size_t old_cap = g->cap_granules;
  if (more > SIZE_MAX / 4 - g->ngranules)
    return false;
  while (cap < 2 * (g->ngranules + more))
    cap *= 2;
  if (cap == g->cap_granules)
    return true;
  grown = calloc(cap, sizeof *grown);
  if (!grown)
    return false;
  g->granules = grown;
  g->cap_granules = cap;
  g->ngranules = 0;
  for (size_t i = 0; i < old_cap; i++)
    if (old[i].addr)
      gran_put(g, old[i]);
  free(old);
  return true;
}

/* Takes e (in the table) out: backward-shift deletion. */
static void gran_del(gpu_backend *g, vm_granule *e) {
  size_t mask = g->cap_granules - 1, i = (size_t)(e - g->granules), j = i;
  for (;;) {
    size_t k;
    j = (j + 1) & mask;
    if (g->granules[j].addr == 0)
      break;
    k = gran_home(g, g->granules[j].addr);
    /* j's entry may move to i unless its home lies cyclically in (i, j] */
    if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
      continue;
    g->granules[i] = g->granules[j];
    i = j;
  }
  g->granules[i] = (vm_granule){0, 0, 0, NULL};
  g->ngranules--;
}

/* ---- the driver's steps ---- */

static bool orphan_keep(gpu_backend *g, unsigned long long handle,
                        uint64_t size);

/* One physical allocation of `size` bytes: created and mapped whole at
 * `at` (the caller sets access over the call's span).  On failure what
 * it took is given back; *orphaned counts the bytes of an allocation the
 * runtime would not release, kept held (an orphan). */
static hippo_status map_part(gpu_backend *g, uint64_t at, uint64_t size,
                             unsigned long long *handle, uint64_t *orphaned) {
  const hippo__gpu_vm_calls *vm = &g->rt->vm;
  unsigned long long h = 0;
  hippo_status st;
  int err = vm->create(&h, (size_t)size, &g->vm_prop, 0);
  if (err != HIPPO__GPU_SUCCESS && err != HIPPO__GPU_OUT_OF_MEMORY &&
      (g->vm_prop.requested_handle_types ||
       g->vm_prop.alloc_flags.gpu_direct_rdma_capable)) {
    /* refused for the sharing asked (ROCm 6.1 refuses any handle type:
     * clr hip_vm.cpp at rocm-6.1.0; drivers and containers without
     * POSIX handles or RDMA): asked without, from now on, as PyTorch
     * falls back on any answer but out of memory (vm_lock held) */
    hippo__gpu_mem_prop plain = g->vm_prop;
    plain.requested_handle_types = HIPPO__GPU_MEM_HANDLE_NONE;
    plain.alloc_flags.gpu_direct_rdma_capable = 0;
    if (g->rt->flavor == HIPPO__GPU_HIP)
      handled(g->rt);
    if ((err = vm->create(&h, (size_t)size, &plain, 0)) ==
        HIPPO__GPU_SUCCESS)
      g->vm_prop = plain;
  }
  if (err != HIPPO__GPU_SUCCESS)
    return vm_fail(g, err, "MemCreate");
  err = vm->map((void *)(uintptr_t)at, (size_t)size, 0, h, 0);
  if (err != HIPPO__GPU_SUCCESS) {
    st = vm_fail(g, err, "MemMap");
    if (vm->release(h) != HIPPO__GPU_SUCCESS) {
      pthread_mutex_lock(&g->lock);
      if (orphan_keep(g, h, size))
        *orphaned += size;
      pthread_mutex_unlock(&g->lock);
    }
    return st;
  }
  *handle = h;
  return HIPPO_SUCCESS;
}

/* Parts of granule e: how many, and part i's handle and size. */
static size_t parts(const gpu_backend *g, uint64_t size) {
  return g->vm_part && size > g->vm_part
             ? (size_t)((size + g->vm_part - 1) / g->vm_part)
             : 1;
}
static unsigned long long *part_handle(vm_granule *e, size_t i) {
  return i ? &e->more[i - 1] : &e->handle;
}
static uint64_t part_size(const gpu_backend *g, const vm_granule *e,
                          size_t i) {
  uint64_t left = e->size - i * g->vm_part;
  return parts(g, e->size) == 1 ? e->size
         : left < g->vm_part    ? left
                                : g->vm_part;
}

/* Granule e (addr, size set) created and mapped, in parts where it is
 * larger than one allocation may be (HIP before 7: vm_part), all or
 * nothing, as map_part. */
static hippo_status map_one(gpu_backend *g, vm_granule *e,
                            uint64_t *orphaned) {
  size_t n = parts(g, e->size), i;
  hippo_status st = HIPPO_SUCCESS;
  e->more = n > 1 ? calloc(n - 1, sizeof *e->more) : NULL;
  if (n > 1 && !e->more)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY, "%s vm_map: out of host "
                            "memory for %zu parts", g->rt->name, n);
  for (i = 0; i < n && st == HIPPO_SUCCESS; i++)
    st = map_part(g, e->addr + i * g->vm_part, part_size(g, e, i),
                  part_handle(e, i), orphaned);
  for (i--; st != HIPPO_SUCCESS && i-- > 0;) { /* the parts mapped go */
    uint64_t at = e->addr + i * g->vm_part, size = part_size(g, e, i);
    (void)g->rt->vm.unmap((void *)(uintptr_t)at, (size_t)size);
    if (g->rt->vm.release(*part_handle(e, i)) != HIPPO__GPU_SUCCESS) {
      pthread_mutex_lock(&g->lock);
      if (orphan_keep(g, *part_handle(e, i), size))
        *orphaned += size;
      pthread_mutex_unlock(&g->lock);
    }
  }
  if (st != HIPPO_SUCCESS) {
    free(e->more);
    e->more = NULL;
  }
  return st;
}

enum { UNMAPPED, UNMAP_REFUSED, RELEASE_REFUSED };

/* Granule e given back: its parts unmapped, then released.  *res:
 * UNMAPPED, UNMAP_REFUSED (still mapped: parts unmapped before the
 * refusal are mapped again, with access) or RELEASE_REFUSED (unmapped;
 * *kept bytes of parts still held, orphans), the status saying why. */
static hippo_status unmap_one(gpu_backend *g, vm_granule *e, int *res,
                              uint64_t *kept) {
  const hippo__gpu_vm_calls *vm = &g->rt->vm;
  hippo_status st = HIPPO_SUCCESS;
  size_t n = parts(g, e->size), i;
  int err = HIPPO__GPU_SUCCESS;
  *res = UNMAP_REFUSED;
  *kept = 0;
  for (i = 0; i < n && err == HIPPO__GPU_SUCCESS; i++)
    err = vm->unmap((void *)(uintptr_t)(e->addr + i * g->vm_part),
                    (size_t)part_size(g, e, i));
  if (err != HIPPO__GPU_SUCCESS) {
    st = vm_fail(g, err, "MemUnmap");
    for (i--; i-- > 0;) {
      uint64_t at = e->addr + i * g->vm_part, size = part_size(g, e, i);
      if (vm->map((void *)(uintptr_t)at, (size_t)size, 0,
                  *part_handle(e, i), 0) == HIPPO__GPU_SUCCESS)
        (void)vm->set_access((void *)(uintptr_t)at, (size_t)size,
                             g->vm_access, g->vm_naccess);
    }
    return st;
  }
  *res = UNMAPPED;
  for (i = 0; i < n; i++) {
    uint64_t size = part_size(g, e, i);
    if ((err = vm->release(*part_handle(e, i))) == HIPPO__GPU_SUCCESS)
      continue;
    st = vm_fail(g, err, "MemRelease");
    *res = RELEASE_REFUSED;
    pthread_mutex_lock(&g->lock);
    if (orphan_keep(g, *part_handle(e, i), size))
      *kept += size;
    pthread_mutex_unlock(&g->lock);
  }
  free(e->more);
  e->more = NULL;
  return st;
}

/* A handle unmapped but not released is kept (its bytes stay held).
 * Locked.  False without host memory: it is then lost to hippo. */
static bool orphan_keep(gpu_backend *g, unsigned long long handle,
                        uint64_t size) {
  if (g->norphans == g->cap_orphans) {
    size_t cap = g->cap_orphans ? g->cap_orphans * 2 : 8;
    vm_orphan *grown = realloc(g->orphans, cap * sizeof *grown);
    if (!grown)
      return false;
    g->orphans = grown;
    g->cap_orphans = cap;
  }
  g->orphans[g->norphans++] = (vm_orphan){handle, size};
  return true;
}

/* Releases the orphans again (vm_lock held, the device current). */
static void orphans_retry(gpu_backend *g) {
  for (size_t i = 0; i < g->norphans;) {
    if (g->rt->vm.release(g->orphans[i].handle) != HIPPO__GPU_SUCCESS) {
      i++;
      continue;
    }
    pthread_mutex_lock(&g->lock);
    g->bytes_held -= g->orphans[i].size;
    g->orphans[i] = g->orphans[--g->norphans];
    pthread_mutex_unlock(&g->lock);
  }
}

/* ---- the operations ---- */

static hippo_status gpu_vm_granularity(hippo__backend *be,
                                       uint64_t *granule) {
  *granule = gpu_of(be)->vm_granularity;
  return HIPPO_SUCCESS;
}

static hippo_status not_granular(const gpu_backend *g, const char *call,
                                 const char *what, uint64_t value,
                                 uint64_t granule) {
  return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s %s: %s %#llx is not a positive multiple of "
                          "the granule %llu B",
                          g->rt->name, call, what, (unsigned long long)value,
                          (unsigned long long)granule);
}

static hippo_status gpu_vm_reserve(hippo__backend *be, uint64_t size,
                                   uint64_t align, uint64_t *addr) {
  gpu_backend *g = gpu_of(be);
  uint64_t gran = g->vm_granularity, over = 0, at;
  const char *call = "MemAddressReserve";
  void *p = NULL;
  dev_scope sc;
  hippo_status st;
  size_t i;
  int err;

  pthread_mutex_lock(&g->vm_lock);
  if ((st = call_named(g, HIPPO_CALL_VM_RANGE, "vm_reserve")))
    goto out;
  if (!addr || size == 0 || size % gran) {
    st = not_granular(g, "vm_reserve", "size", size, gran);
    goto out;
  }
  if (!hippo__is_pow2(align) || align < gran)
    align = gran;
  pthread_mutex_lock(&g->lock);
  if (g->nranges == g->cap_ranges) {
    size_t cap = g->cap_ranges ? g->cap_ranges * 2 : 8;
    vm_range *grown = realloc(g->ranges, cap * sizeof *grown);
    if (grown) {
      g->ranges = grown;
      g->cap_ranges = cap;
    }
  }
  if (g->nranges == g->cap_ranges)
    st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                          "%s vm_reserve: out of host memory for %zu ranges",
                          g->rt->name, g->nranges + 1);
  pthread_mutex_unlock(&g->lock);
  if (st || (st = vm_enter(g, "vm_reserve", &sc)))
    goto out;
  {
    relaxed_scope rs; /* a capture may run (base.vm_captures) */
    relax(g, &rs);
    err = g->rt->vm.reserve(&p, (size_t)size, (size_t)align, NULL, 0);
    /* ROCm passes the alignment to an HSA reserve that takes none (clr
     * hip_vm.cpp hipMemAddressReserve, rocdevice.cpp virtualAlloc): a
     * misaligned answer is given back and `align` more reserved, the
     * range aligned inside it by hand (issue 40 item 5) */
    if (err == HIPPO__GPU_SUCCESS && p && (uintptr_t)p % align) {
      over = align;
      err = g->rt->vm.free_range(p, (size_t)size);
      call = "MemAddressFree (of a range it answered misaligned)";
      if (err == HIPPO__GPU_SUCCESS) {
        p = NULL;
        err = g->rt->vm.reserve(&p, (size_t)(size + over), (size_t)align,
                                NULL, 0);
        call = "MemAddressReserve (again, one alignment larger)";
      }
    }
    unrelax(g, &rs);
  }
  st = err != HIPPO__GPU_SUCCESS ? vm_fail(g, err, call)
       : !p ? hippo__error_set(HIPPO_BACKEND_ERROR,
                               "%s %sMemAddressReserve returned address 0",
                               g->rt->name, g->rt->vm.prefix)
            : HIPPO_SUCCESS;
  st = leave(g, &sc, st);
  if (st) {
    st = hippo__error_wrap(st, "%s vm_reserve of %llu B", g->rt->name,
                           (unsigned long long)size);
    goto out;
  }
  at = ((uint64_t)(uintptr_t)p + align - 1) & ~(align - 1);
  pthread_mutex_lock(&g->lock);
  i = 0;
  while (i < g->nranges && g->ranges[i].addr < at)
    i++;
  memmove(&g->ranges[i + 1], &g->ranges[i],
          (g->nranges - i) * sizeof *g->ranges);
  g->ranges[i] = (vm_range){.addr = at, .size = size,
                            .base = (uint64_t)(uintptr_t)p,
                            .reserved = size + over};
  g->nranges++;
  g->bytes_virtual += size;
  pthread_mutex_unlock(&g->lock);
  *addr = at;
out:
  pthread_mutex_unlock(&g->vm_lock);
  return st;
}

static hippo_status gpu_vm_release(hippo__backend *be, uint64_t addr,
                                   uint64_t size) {
  gpu_backend *g = gpu_of(be);
  uint64_t mapped = 0;
  dev_scope sc;
  hippo_status st;
  size_t i;
  int err;

  pthread_mutex_lock(&g->vm_lock);
  if ((st = call_named(g, HIPPO_CALL_VM_RANGE, "vm_release")))
    goto out;
  pthread_mutex_lock(&g->lock);
  i = range_at(g, addr);
  if (i < g->nranges)
    mapped = g->ranges[i].mapped;
  pthread_mutex_unlock(&g->lock);
  if (i == g->nranges || g->ranges[i].addr != addr ||
      g->ranges[i].size != size) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s vm_release: [%#llx, +%llu) is not a range "
                          "vm_reserve gave (released twice?)",
                          g->rt->name, (unsigned long long)addr,
                          (unsigned long long)size);
    goto out;
  }
  if (mapped) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s vm_release: range %#llx still has %llu B "
                          "mapped; unmap them first",
                          g->rt->name, (unsigned long long)addr,
                          (unsigned long long)mapped);
    goto out;
  }
  if ((st = vm_enter(g, "vm_release", &sc)))
    goto out;
  err = g->rt->vm.free_range((void *)(uintptr_t)g->ranges[i].base,
                             (size_t)g->ranges[i].reserved);
  st = leave(g, &sc,
             err != HIPPO__GPU_SUCCESS ? vm_fail(g, err, "MemAddressFree")
                                       : HIPPO_SUCCESS);
  if (st) {
    st = hippo__error_wrap(st, "%s vm_release of range %#llx", g->rt->name,
                           (unsigned long long)addr);
    goto out;
  }
  pthread_mutex_lock(&g->lock);
  hippo__vm_runs_free(&g->ranges[i].runs);
  memmove(&g->ranges[i], &g->ranges[i + 1],
          (g->nranges - i - 1) * sizeof *g->ranges);
  g->nranges--;
  g->bytes_virtual -= size;
  pthread_mutex_unlock(&g->lock);
out:
  pthread_mutex_unlock(&g->vm_lock);
  return st;
}

/* The checks vm_map and vm_unmap share: granule a positive multiple of the
 * granularity, [addr, addr + size) granule-aligned inside one range (its
 * index in *ri).  Locked. */
static hippo_status span_check(const gpu_backend *g, const char *call,
                               uint64_t addr, uint64_t size, uint64_t granule,
                               size_t *ri) {
  uint64_t gran = g->vm_granularity;
  const vm_range *r;
  size_t i;
  if (granule == 0 || granule % gran)
    return not_granular(g, call, "granule", granule, gran);
  if (size == 0 || size % granule)
    return not_granular(g, call, "size", size, granule);
  i = range_at(g, addr);
  r = i < g->nranges ? &g->ranges[i] : NULL;
  if (!r || (addr - r->addr) % gran || size > r->size - (addr - r->addr))
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s %s: [%#llx, +%llu) is not granule-aligned "
                            "inside a range vm_reserve gave",
                            g->rt->name, call, (unsigned long long)addr,
                            (unsigned long long)size);
  *ri = i;
  return HIPPO_SUCCESS;
}

static hippo_status gpu_vm_map(hippo__backend *be, uint64_t addr,
                               uint64_t size, uint64_t granule) {
  gpu_backend *g = gpu_of(be);
  vm_granule *hs = NULL; /* the call's granules */
  uint64_t n = 0, k = 0, kept = 0;
  size_t ri = 0;
  bool entered = false;
  relaxed_scope rs;
  dev_scope sc;
  hippo_status st;

  pthread_mutex_lock(&g->vm_lock);
  pthread_mutex_lock(&g->lock);
  st = span_check(g, "vm_map", addr, size, granule, &ri);
  if (st == HIPPO_SUCCESS &&
      hippo__vm_runs_mapped_in(&g->ranges[ri].runs, addr, addr + size) != 0)
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s vm_map: [%#llx, +%llu) is mapped already (in "
                          "part)",
                          g->rt->name, (unsigned long long)addr,
                          (unsigned long long)size);
  if (st == HIPPO_SUCCESS && size > g->budget - g->bytes_held)
    st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                          "%s vm_map: %llu bytes requested, %llu of the "
                          "device's budget of %llu bytes held "
                          "(hippo_device_desc.capacity)",
                          g->rt->name, (unsigned long long)size,
                          (unsigned long long)g->bytes_held,
                          (unsigned long long)g->budget);
  if (st == HIPPO_SUCCESS) {
    /* host memory first, so the records cannot fail once mapped: the
     * granules' handles, one run (the call's granules merge), the table */
    n = size / granule;
    hs = n <= SIZE_MAX / sizeof *hs ? malloc((size_t)n * sizeof *hs) : NULL;
    if (!hs || !hippo__vm_runs_room(&g->ranges[ri].runs, 1) || !gran_room(g, (size_t)n))
      st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s vm_map: out of host memory for the records "
                            "of %llu granules",
                            g->rt->name, (unsigned long long)n);
  }
  if (st == HIPPO_SUCCESS)
    g->bytes_held += size; /* reserved while the driver maps */
  pthread_mutex_unlock(&g->lock);
  if (st)
    goto out;
  st = vm_enter(g, "vm_map", &sc);
  entered = st == HIPPO_SUCCESS;
  if (entered && g->norphans)
    orphans_retry(g);
  /* a capture may run (base.vm_captures): the creates, maps and the
   * access in relaxed mode, as NCCL's cuMem allocations are */
  relax(g, &rs);
  for (; st == HIPPO_SUCCESS && k < n; k++) {
    if ((st = call_named(g, HIPPO_CALL_VM_MAP, "vm_map")))
      break;
    hs[k] = (vm_granule){addr + k * granule, granule, 0, NULL};
    st = map_one(g, &hs[k], &kept);
    if (st) {
      st = hippo__error_wrap(st, "%s vm_map: allocation %#llx of %llu B",
                             g->rt->name,
                             (unsigned long long)(addr + k * granule),
                             (unsigned long long)granule);
      break;
    }
  }
  /* access once for the whole span, as PyTorch's expandable segments set
   * it once per growth (cuMemSetAccess covers mappings back to back) */
  if (st == HIPPO_SUCCESS && entered &&
      (st = call_named(g, HIPPO_CALL_VM_ACCESS, "vm_map (set access)")) ==
          HIPPO_SUCCESS) {
    int err = g->rt->vm.set_access((void *)(uintptr_t)addr, (size_t)size,
                                   g->vm_access, g->vm_naccess);
    if (err != HIPPO__GPU_SUCCESS)
      st = hippo__error_wrap(vm_fail(g, err, "MemSetAccess"),
                             "%s vm_map: [%#llx, +%llu)", g->rt->name,
                             (unsigned long long)addr,
                             (unsigned long long)size);
  }
  unrelax(g, &rs);
  if (st) { /* all or nothing: what this call mapped goes back */
    hippo__error_kept why;
    uint64_t stuck = 0;
    hippo__error_keep(&why);
    while (k-- > 0) {
      uint64_t at = addr + k * granule, held = 0;
      int res;
      /* counted as the unmap it is (no fault injected into an undo) */
      atomic_fetch_add_explicit(&g->calls[HIPPO_CALL_VM_UNMAP], 1,
                                memory_order_relaxed);
      (void)unmap_one(g, &hs[k], &res, &held);
      pthread_mutex_lock(&g->lock);
      if (res == UNMAP_REFUSED) { /* still mapped: recorded as such */
        vm_range *r = &g->ranges[ri];
        if (hippo__vm_runs_room(&r->runs, 1))
          hippo__vm_runs_add(&r->runs, at, at + granule);
        r->mapped += granule;
        gran_put(g, hs[k]);
        g->bytes_mapped += granule;
        g->granules_mapped++;
        kept += granule;
        stuck++;
      } else {
        kept += held;
      }
      pthread_mutex_unlock(&g->lock);
    }
    hippo__error_restore(&why);
    if (stuck)
      st = hippo__error_wrap(st, "%s vm_map (%llu granules of this call "
                             "could not be unmapped and stay mapped)",
                             g->rt->name, (unsigned long long)stuck);
  }
  if (entered)
    st = leave(g, &sc, st);
  pthread_mutex_lock(&g->lock);
  if (st == HIPPO_SUCCESS) {
    hippo__vm_runs_add(&g->ranges[ri].runs, addr, addr + size);
    g->ranges[ri].mapped += size;
    for (k = 0; k < n; k++)
      gran_put(g, hs[k]);
    g->bytes_mapped += size;
    g->granules_mapped += n;
  } else {
    g->bytes_held -= size - kept;
  }
  if (g->bytes_mapped > g->peak_bytes_mapped)
    g->peak_bytes_mapped = g->bytes_mapped;
  if (g->bytes_held > g->peak_bytes_held)
    g->peak_bytes_held = g->bytes_held;
  pthread_mutex_unlock(&g->lock);
out:
  free(hs);
  pthread_mutex_unlock(&g->vm_lock);
  return st;
}

static hippo_status gpu_vm_unmap(hippo__backend *be, uint64_t addr,
                                 uint64_t size, uint64_t granule, bool wait,
                                 uint64_t *done) {
  gpu_backend *g = gpu_of(be);
  uint64_t at = addr;
  size_t ri = 0;
  dev_scope sc;
  hippo_status st;

  pthread_mutex_lock(&g->vm_lock);
  pthread_mutex_lock(&g->lock);
  st = span_check(g, "vm_unmap", addr, size, granule, &ri);
  for (uint64_t a = addr; st == HIPPO_SUCCESS && a < addr + size;
       a += granule) {
    const vm_granule *e = gran_find(g, a);
    if (!e || e->size != granule)
      st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s vm_unmap: [%#llx, +%llu) is not mapped whole "
                            "in granules of %llu B (at %#llx)",
                            g->rt->name, (unsigned long long)addr,
                            (unsigned long long)size,
                            (unsigned long long)granule,
                            (unsigned long long)a);
  }
  if (st == HIPPO_SUCCESS && !hippo__vm_runs_room(&g->ranges[ri].runs, 1))
    st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                          "%s vm_unmap: out of host memory for a run",
                          g->rt->name);
  pthread_mutex_unlock(&g->lock);
  if (st || (st = vm_enter(g, "vm_unmap", &sc)))
    goto out;
  if (g->norphans)
    orphans_retry(g);
  /* cuMemUnmap does not wait for the device's work, and hipMemUnmap
   * waits only for the null stream and the blocking streams (clr
   * hip_vm.cpp, hip_device.cpp WaitActiveStreams), not hippo's
   * non-blocking ones: the device is synchronized first on both, as
   * PyTorch does before it unmaps (issue 40 item 1); one wait a call */
  if (wait) {
    int err;
    atomic_fetch_add_explicit(&g->waits, 1, memory_order_relaxed);
    err = g->rt->device_sync();
    if (err != HIPPO__GPU_SUCCESS)
      st = hippo__error_wrap(hippo__gpu_fail(g->rt, err, "DeviceSynchronize",
                                             NULL),
                             "%s vm_unmap: waiting for the device's work",
                             g->rt->name);
  }
  while (st == HIPPO_SUCCESS && at < addr + size) {
    uint64_t held = 0;
    vm_granule *e;
    int res;
    if ((st = call_named(g, HIPPO_CALL_VM_UNMAP, "vm_unmap")))
      break;
    e = gran_find(g, at);
    st = unmap_one(g, e, &res, &held);
    if (st)
      st = hippo__error_wrap(st, "%s vm_unmap: granule %#llx of %llu B%s",
                             g->rt->name, (unsigned long long)at,
                             (unsigned long long)granule,
                             res == RELEASE_REFUSED
                                 ? " (unmapped; its memory stays held and "
                                   "is released again later)"
                                 : "");
    if (res == UNMAP_REFUSED)
      break;
    pthread_mutex_lock(&g->lock);
    hippo__vm_runs_remove(&g->ranges[ri].runs, at, at + granule);
    g->ranges[ri].mapped -= granule;
    g->bytes_mapped -= granule;
    g->granules_mapped--;
    g->bytes_held -= granule - held;
    gran_del(g, e);
    pthread_mutex_unlock(&g->lock);
    at += granule;
  }
  st = leave(g, &sc, st);
out:
  if (done)
    *done = at - addr;
  pthread_mutex_unlock(&g->vm_lock);
  return st;
}

/* Gives every granule, orphan and range back (destroy: no call runs). */
static void vm_fini(gpu_backend *g) {
  const hippo__gpu_vm_calls *vm = &g->rt->vm;
  dev_scope sc;
  if ((g->ngranules || g->norphans || g->nranges) &&
      vm_enter(g, "destroy", &sc) == HIPPO_SUCCESS) {
    if (g->ngranules)
      (void)g->rt->device_sync(); /* neither unmap waits for all streams */
    for (size_t i = 0; i < g->cap_granules; i++) {
      uint64_t held;
      int res;
      if (g->granules[i].addr)
        (void)unmap_one(g, &g->granules[i], &res, &held);
    }
    for (size_t i = 0; i < g->norphans; i++) /* those just made too */
      (void)vm->release(g->orphans[i].handle);
    for (size_t i = 0; i < g->nranges; i++)
      (void)vm->free_range((void *)(uintptr_t)g->ranges[i].base,
                           (size_t)g->ranges[i].reserved);
    (void)leave(g, &sc, HIPPO_SUCCESS);
  }
  for (size_t i = 0; i < g->nranges; i++)
    hippo__vm_runs_free(&g->ranges[i].runs);
  for (size_t i = 0; i < g->cap_granules; i++)
    free(g->granules[i].more); /* a granule left mapped */
  free(g->ranges);
  free(g->granules);
  free(g->orphans);
}

#define HIP6_PART_MAX (UINT64_C(256) << 20)

/* Every other device that can access this one's memory gets read-write
 * access to each mapping too, as to this device's Malloc'd pages once
 * peer access is enabled: without a descriptor of its own a peer's copies
 * and kernels fault on VIRTUAL memory (cuMemSetAccess, hipMemSetAccess
 * grant per device).  NCCL's ncclMemAlloc (src/allocator.cc) grants every
 * device cudaDeviceCanAccessPeer allows; PyTorch's ExpandableSegment
 * grants its peers_ (CUDACachingAllocator.cpp) -- issue 40 item 3.  A
 * failed question leaves that device out.  The device current. */
static void vm_peers(gpu_backend *g) {
  const hippo__gpu_rt *rt = g->rt;
  int count = 0;
  if (!rt->device_can_access_peer ||
      rt->get_device_count(&count) != HIPPO__GPU_SUCCESS)
    return;
  for (int i = 0; i < count && g->vm_naccess < HIPPO__GPU_MAX_PEERS; i++) {
    int ok = 0, loc = i;
    if (i == g->ordinal ||
        rt->device_can_access_peer(&ok, i, g->ordinal) != HIPPO__GPU_SUCCESS ||
        !ok ||
        (rt->flavor == HIPPO__GPU_CUDA &&
         rt->vm.device_get(&loc, i) != HIPPO__GPU_SUCCESS))
      continue;
    g->vm_access[g->vm_naccess++] = (hippo__gpu_mem_access){
        {HIPPO__GPU_MEM_LOCATION_DEVICE, loc}, HIPPO__GPU_MEM_ACCESS_RW};
  }
  handled(rt); /* a refused question is no error of the caller's */
}

/* Whether the device has virtual memory, decided once at open: every call
 * loaded, HIP 6.1 or later, the device says so (the attribute), and
 * the granularity is asked and usable.  Sets g->vm and what the calls
 * take, or g->base.vm_why. */
static void vm_probe(gpu_backend *g) {
  char *why = g->base.vm_why;
  const size_t wn = sizeof g->base.vm_why;
  const hippo__gpu_rt *rt = g->rt;
  const hippo__gpu_vm_calls *vm = &rt->vm;
  bool hip = rt->flavor == HIPPO__GPU_HIP;
  const void *prop = &g->vm_prop;
  hippo__error_kept kept;
  size_t gran = 0;
  dev_scope sc;
  int err, yes = 1, dev = g->ordinal;
  const char *asked = NULL;

  g->vm = false;
  if (vm->missing[0]) {
    snprintf(why, wn, "%.120s has no %.100s", rt->path,
             vm->missing);
    return;
  }
  if (!rt->device_sync) {
    snprintf(why, wn, "%.120s has no %sDeviceSynchronize",
             rt->path, rt->prefix);
    return;
  }
  /* Before ROCm 6.1 the calls exist but do nothing on Linux: the ROCm
   * device's virtualAlloc answers NULL, which hipMemAddressReserve returns
   * as success; hipMemSetAccess checks its arguments and returns;
   * hipMemMap does not look at its command's status (clr at rocm-6.0.2:
   * hip_vm.cpp, rocdevice.cpp Device::virtualAlloc; the ROCm path came
   * with "Initial VMM changes for ROCm path", first in rocm-6.1.0).  Debian
   * 12's ROCm is 5.2.  So the version decides, not a round trip at every
   * open (issue 40 item 4). */
  if (hip && rt->version < HIPPO__HIP_VMM_V61) {
    char v[48] = "unknown";
    if (rt->version > 0)
      snprintf(v, sizeof v, "%d.%d (%d)", rt->version / 10000000,
               rt->version / 100000 % 100, rt->version);
    snprintf(why, wn,
             "HIP runtime version %s: ROCm before 6.1 answers success to "
             "hipMemAddressReserve, hipMemMap and hipMemSetAccess without "
             "doing them; 6.1 or later is needed",
             v);
    return;
  }
  hippo__error_keep(&kept);
  if (vm_enter(g, "virtual memory", &sc) != HIPPO_SUCCESS) {
    snprintf(why, wn, "%s", hippo__error_get());
    hippo__error_restore(&kept);
    return;
  }
  err = HIPPO__GPU_SUCCESS;
  if (!hip) {
    err = vm->device_get(&dev, g->ordinal);
    asked = "cuDeviceGet";
  }
  if (err == HIPPO__GPU_SUCCESS && !hip) {
    err = vm->device_attribute(&yes, HIPPO__CU_ATTR_VMM_SUPPORTED, dev);
    asked = "cuDeviceGetAttribute(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)";
  } else if (hip) {
    err = rt->device_attribute(&yes, HIPPO__HIP_ATTR_VMM_SUPPORTED, dev);
    asked = "hipDeviceGetAttribute(VirtualMemoryManagementSupported)";
  }
  g->vm_device = dev;
  g->vm_prop = (hippo__gpu_mem_prop){
      .type = HIPPO__GPU_MEM_ALLOCATION_PINNED,
      .requested_handle_types = HIPPO__GPU_MEM_HANDLE_NONE,
      .location = {HIPPO__GPU_MEM_LOCATION_DEVICE, dev}};
  g->vm_access[0] = (hippo__gpu_mem_access){
      {HIPPO__GPU_MEM_LOCATION_DEVICE, dev}, HIPPO__GPU_MEM_ACCESS_RW};
  g->vm_naccess = 1;
  if (err == HIPPO__GPU_SUCCESS && yes) {
    err = vm->granularity(&gran, prop, HIPPO__GPU_MEM_GRANULARITY_MIN);
    asked = hip ? "hipMemGetAllocationGranularity"
                : "cuMemGetAllocationGranularity";
  }
  (void)leave(g, &sc, HIPPO_SUCCESS);
  if (err != HIPPO__GPU_SUCCESS) {
    if (hip)
      handled(rt); /* answered, and handled: no virtual memory */
    snprintf(why, wn, "%s answered %s (%d)", asked,
             hip ? hippo__gpu_err_name(rt->flavor, rt, err)
                 : hippo__cu_err_name(err),
             err);
  } else if (!yes) {
    snprintf(why, wn, "%s says the device has none",
             asked);
  } else if (gran == 0 || !hippo__is_pow2(gran)) {
    snprintf(why, wn,
             "%s answered a granularity of %zu B, not a power of two", asked,
             gran);
  } else {
    g->vm = true;
    g->vm_granularity = gran;
    /* Shareable: a POSIX file descriptor handle, and on CUDA the RDMA
     * flag, where the device says so (cuDeviceGetAttribute 103 and 110;
     * HIP has no attribute: clr accepts the handle type from 6.2), as
     * PyTorch's ExpandableSegment::map and NCCL's ncclCuMemAlloc ask;
     * without them cuMemExportToShareableHandle, torch.multiprocessing's
     * CUDA tensors, NCCL registration and GPUDirect RDMA fail on VIRTUAL
     * memory.  map_part asks without where the create refuses (issue 40
     * item 6). */
    if (hip)
      g->vm_prop.requested_handle_types = HIPPO__GPU_MEM_HANDLE_POSIX_FD;
    if (vm_enter(g, "virtual memory", &sc) == HIPPO_SUCCESS) {
      int fd = 0, rdma = 0;
      if (!hip && vm->device_attribute(&fd, HIPPO__CU_ATTR_POSIX_FD_SUPPORTED,
                                       dev) == HIPPO__GPU_SUCCESS && fd)
        g->vm_prop.requested_handle_types = HIPPO__GPU_MEM_HANDLE_POSIX_FD;
      if (!hip && vm->device_attribute(&rdma, HIPPO__CU_ATTR_RDMA_VMM_SUPPORTED,
                                       dev) == HIPPO__GPU_SUCCESS && rdma)
        g->vm_prop.alloc_flags.gpu_direct_rdma_capable = 1;
      vm_peers(g);
      (void)leave(g, &sc, HIPPO_SUCCESS);
    }
    /* ROCm before 7: one hipMemCreate of at most HIP6_PART_MAX (vLLM's
     * cumem_allocator.cpp creates in 256 MiB chunks on ROCm; clr
     * hip_vm.cpp answers hipErrorOutOfMemory above its own maximum):
     * larger granules are mapped in parts (issue 40 item 13) */
    if (hip && rt->version < HIPPO__HIP_V7)
      g->vm_part = HIP6_PART_MAX < gran ? gran : HIP6_PART_MAX / gran * gran;
    why[0] = '\0';
  }
  hippo__error_restore(&kept);
}

static void gpu_destroy(hippo__backend *be) {
  gpu_backend *g = gpu_of(be);
  dev_scope sc;
  /* What the caller left -- emulated streams, pages -- goes back to the
   * runtime, as HOST's does.  destroy reports nothing, so a failure here
   * only leaves that resource to the runtime's own teardown. */
  if ((g->nstreams || g->io) && enter(g, "destroy", &sc) == HIPPO_SUCCESS) {
    for (size_t i = 0; i < g->nstreams; i++) /* its work finishes first */
      (void)g->rt->stream_destroy(g->streams[i]);
    if (g->io)
      (void)g->rt->stream_destroy(g->io);
    (void)leave(g, &sc, HIPPO_SUCCESS);
  }
  vm_fini(g); /* granules, then ranges */
  if (g->npages && enter(g, "destroy", &sc) == HIPPO_SUCCESS) {
    for (size_t i = 0; i < g->npages; i++)
      (void)g->rt->free_((void *)(uintptr_t)g->pages[i].addr);
    (void)leave(g, &sc, HIPPO_SUCCESS);
  }
  if (g->primary)
    (void)g->rt->ctx.primary_release(g->primary_device);
  pthread_mutex_destroy(&g->vm_lock);
  pthread_mutex_destroy(&g->lock);
  free(g->pages);
  free(g->streams);
  free(g);
}

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

static hippo_status gpu_emu_stream_create(hippo__backend *be, void **out) {
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
  st = enter(g, "emu_stream_create", &sc);
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
static hippo_status gpu_emu_stream_check(hippo__backend *be, void *stream,
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

static hippo_status gpu_emu_stream_destroy(hippo__backend *be, void *stream) {
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
  if ((st = enter(g, "emu_stream_destroy", &sc)) != HIPPO_SUCCESS)
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

static hippo_status gpu_emu_capture_begin(hippo__backend *be, void *stream,
                                          uint64_t *capture_id) {
  gpu_backend *g = gpu_of(be);
  unsigned long long id = 0;
  dev_scope sc;
  hippo_status st;
  bool capturing;
  int cs, err;

  if ((st = known_stream(g, stream, "emu_capture_begin")) != HIPPO_SUCCESS)
    return st;
  if ((st = enter(g, "emu_capture_begin", &sc)) != HIPPO_SUCCESS)
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

static hippo_status gpu_emu_capture_end(hippo__backend *be, void *stream) {
  gpu_backend *g = gpu_of(be);
  void *graph = NULL;
  dev_scope sc;
  hippo_status st;
  bool capturing;
  int err;

  if ((st = known_stream(g, stream, "emu_capture_end")) != HIPPO_SUCCESS)
    return st;
  if ((st = enter(g, "emu_capture_end", &sc)) != HIPPO_SUCCESS)
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

static hippo_status gpu_emu_inject_fault(hippo__backend *be,
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

static hippo_status gpu_emu_read(hippo__backend *be, uint64_t addr,
                                 void *host, uint64_t size) {
  gpu_backend *g = gpu_of(be);
  dev_scope sc;
  hippo_status st;
  if (size == 0)
    return HIPPO_SUCCESS;
  if ((st = inside(g, addr, size, "emu_read", "device_ptr")) !=
          HIPPO_SUCCESS ||
      (st = enter(g, "emu_read", &sc)) != HIPPO_SUCCESS)
    return st;
  return leave(g, &sc,
               host_copy(g, host, (const void *)(uintptr_t)addr, size,
                         HIPPO__GPU_MEMCPY_D2H, "emu_read"));
}

static hippo_status gpu_emu_write(hippo__backend *be, uint64_t addr,
                                  const void *host, uint64_t size) {
  gpu_backend *g = gpu_of(be);
  dev_scope sc;
  hippo_status st;
  if (size == 0)
    return HIPPO_SUCCESS;
  if ((st = inside(g, addr, size, "emu_write", "device_ptr")) !=
          HIPPO_SUCCESS ||
      (st = enter(g, "emu_write", &sc)) != HIPPO_SUCCESS)
    return st;
  /* landed once its stream is synchronized */
  return leave(g, &sc,
               host_copy(g, (void *)(uintptr_t)addr, host, size,
                         HIPPO__GPU_MEMCPY_H2D, "emu_write"));
}

static hippo_status gpu_emu_counters(hippo__backend *be,
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

/* Two tables: without virtual memory (vm_* NULL, so layouts fall back) and
 * with it; vm_probe chooses one per device at open. */
#define GPU_OPS_COMMON                                                         \
  .page_alloc = gpu_page_alloc,                                               \
  .page_free = gpu_page_free, .copy = gpu_copy,                              \
  .stream_sync = gpu_stream_sync, .event_create = gpu_event_create,           \
  .event_record = gpu_event_record, .event_wait = gpu_event_wait,             \
  .event_query = gpu_event_query, .event_destroy = gpu_event_destroy,         \
  .capture_status = gpu_capture_status, .stream_check = gpu_stream_check,     \
  .mem_info = gpu_mem_info, .destroy = gpu_destroy,                           \
  .emu_stream_check = gpu_emu_stream_check,                                   \
  .emu_stream_create = gpu_emu_stream_create,                                 \
  .emu_stream_destroy = gpu_emu_stream_destroy,                               \
  .emu_capture_begin = gpu_emu_capture_begin,                                 \
  .emu_capture_end = gpu_emu_capture_end,                                     \
  .emu_inject_fault = gpu_emu_inject_fault, .emu_read = gpu_emu_read,         \
  .emu_write = gpu_emu_write, .emu_counters = gpu_emu_counters

static const hippo__backend_ops gpu_ops = {GPU_OPS_COMMON};

static const hippo__backend_ops gpu_vm_ops = {
    GPU_OPS_COMMON,
    .vm_granularity = gpu_vm_granularity,
    .vm_reserve = gpu_vm_reserve,
    .vm_release = gpu_vm_release,
    .vm_map = gpu_vm_map,
    .vm_unmap = gpu_vm_unmap,
};

/* ---- opening a device ----------------------------------------------------------- */

/* The device's name and architecture into the backend's strings. */
static void describe(gpu_backend *g) {
  const hippo__gpu_rt *rt = g->rt;
  int major = 0, minor = 0;
  char name[256] = "";
  /* a call that fails leaves its string empty (unknown), as documented */
  if (rt->device_name) {
    if (rt->device_name(name, (int)sizeof name, g->ordinal) !=
        HIPPO__GPU_SUCCESS)
      name[0] = '\0';
  } else if (rt->device_properties) {
    /* cudaDeviceProp starts with char name[256] in every CUDA release;
     * the rest of the struct (about 1 KiB, growing) lands in a buffer
     * far larger than any release's */
    char *props = calloc(1, 16384); /* once per open: the heap, not TLS */
    if (props && rt->device_properties(props, g->ordinal) ==
                     HIPPO__GPU_SUCCESS)
      memcpy(name, props, sizeof name - 1);
    free(props);
  }
  name[sizeof name - 1] = '\0';
  snprintf(g->base.device_name, sizeof g->base.device_name, "%s", name);
  if (rt->device_attribute(&major, rt->attr_cc_major, g->ordinal) ==
          HIPPO__GPU_SUCCESS &&
      rt->device_attribute(&minor, rt->attr_cc_minor, g->ordinal) ==
          HIPPO__GPU_SUCCESS)
    snprintf(g->base.arch, sizeof g->base.arch, "%s %d.%d",
             rt->flavor == HIPPO__GPU_CUDA ? "sm" : "cc", major, minor);
  snprintf(g->base.runtime, sizeof g->base.runtime, "%s %d (%.100s)", rt->name,
           rt->version, rt->path);
}

/* CUDA with the driver's context calls: the device's primary context,
 * retained (created if none: hippo works on this device) for enter. */
static hippo_status primary_open(gpu_backend *g) {
  const hippo__gpu_ctx_calls *c = &g->rt->ctx;
  int dev = g->ordinal, err;
  if (g->rt->flavor != HIPPO__GPU_CUDA || !c->get_current || !c->push ||
      !c->pop || !c->primary_retain || !c->primary_release)
    return HIPPO_SUCCESS;
  if (g->rt->vm.device_get &&
      g->rt->vm.device_get(&dev, g->ordinal) != HIPPO__GPU_SUCCESS)
    dev = g->ordinal; /* CUdevice is the ordinal in every release */
  err = c->primary_retain(&g->primary, dev);
  if (err != HIPPO__GPU_SUCCESS || !g->primary) {
    g->primary = NULL;
    return hippo__error_wrap(
        hippo__gpu_vm_fail(g->rt, err ? err : HIPPO__GPU_UNKNOWN,
                           "DevicePrimaryCtxRetain", NULL),
        "%s device %d", g->rt->name, (int)g->ordinal);
  }
  g->primary_device = dev;
  return HIPPO_SUCCESS;
}

/* Opens device `ordinal` of a loaded runtime. */
static hippo_status open_on(const hippo__gpu_rt *rt, int32_t ordinal,
                            uint64_t capacity, uint64_t alignment,
                            hippo__backend **out) {
  gpu_backend *g;
  hippo_status st;
  int devices = 0, mode = 0, tex = 0, err;
  uint64_t device_align, tot = 0;

  err = rt->get_device_count(&devices);
  if (err == HIPPO__GPU_SUCCESS && devices == 0)
    err = HIPPO__GPU_NO_DEVICE;
  if (err == HIPPO__GPU_INSUFFICIENT_DRIVER ||
      err == HIPPO__GPU_DRIVER_MISMATCH || err == HIPPO__GPU_COMPAT_UNSUPPORTED)
    return hippo__gpu_fail(rt, err, "GetDeviceCount",
                           rt->flavor == HIPPO__GPU_HIP
                               ? "the GPU driver is older than this HIP "
                                 "runtime: update the amdgpu driver (or use "
                                 "an older ROCm), or use backend HOST or DRY"
                               : "the NVIDIA driver does not support this "
                                 "CUDA runtime: update the driver (or use an "
                                 "older libcudart), or use backend HOST or "
                                 "DRY");
  if (err != HIPPO__GPU_SUCCESS)
    return hippo__gpu_fail(rt, err, "GetDeviceCount",
                           rt->flavor == HIPPO__GPU_HIP
                               ? "no ROCm device is visible: check /dev/kfd "
                                 "permissions, or use backend HOST or DRY"
                               : "no CUDA device is visible: check the "
                                 "NVIDIA driver, or use backend HOST or DRY");
  if (ordinal < 0 || ordinal >= devices)
    return hippo__error_set(HIPPO_NO_DEVICE,
                            "%s device ordinal %d is out of range: %d "
                            "device(s) visible (ordinals 0..%d)",
                            rt->name, (int)ordinal, devices, devices - 1);
  err = rt->device_attribute(&mode, rt->attr_compute_mode, ordinal);
  if (err != HIPPO__GPU_SUCCESS)
    return hippo__gpu_fail(rt, err, "DeviceGetAttribute(compute mode)", NULL);
  if (mode == HIPPO__GPU_COMPUTE_PROHIBITED)
    return hippo__error_set(HIPPO_NO_DEVICE,
                            "%s device %d is in prohibited compute mode; no "
                            "host thread may use it",
                            rt->name, (int)ordinal);
  err = rt->device_attribute(&tex, rt->attr_texture_alignment, ordinal);
  if (err != HIPPO__GPU_SUCCESS)
    return hippo__gpu_fail(rt, err, "DeviceGetAttribute(texture alignment)",
                           NULL);
  device_align = HIPPO__DEFAULT_ALIGNMENT;
  while (tex > 0 && device_align < (uint64_t)tex) /* tex <= INT_MAX: ends */
    device_align *= 2;
  if (alignment &&
      (!hippo__is_pow2(alignment) || alignment < device_align ||
       alignment > (UINT64_C(1) << 30)))
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "device_open: alignment %llu on %s device %d: it "
                            "must be a power of two from the device's %llu "
                            "up to 1 GiB (0 takes the device's)",
                            (unsigned long long)alignment, rt->name,
                            (int)ordinal, (unsigned long long)device_align);
  if (capacity && capacity < (alignment ? alignment : device_align))
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "device_open: capacity %llu B is below the "
                            "alignment %llu B of %s device %d, so nothing "
                            "could ever be reserved; give at least the "
                            "alignment (0: the device's memory)",
                            (unsigned long long)capacity,
                            (unsigned long long)(alignment ? alignment
                                                           : device_align),
                            rt->name, (int)ordinal);
  g = calloc(1, sizeof *g);
  if (!g)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s device: out of host memory", rt->name);
  pthread_mutex_init(&g->lock, NULL);
  pthread_mutex_init(&g->vm_lock, NULL);
  g->base.ops = &gpu_ops;
  g->base.kind = HIPPO_BACKEND_HIP;
  g->base.alignment = alignment ? alignment : device_align;
  g->rt = rt;
  g->ordinal = ordinal;
  g->budget = 0; /* mem_info below gives the device's whole memory */
  for (unsigned k = 0; k < HIPPO_CALL_KINDS; k++)
    atomic_init(&g->calls[k], 0);
  atomic_init(&g->armed, false);
  st = primary_open(g);
  if (st == HIPPO_SUCCESS)
    st = gpu_mem_info(&g->base, NULL, &tot);
  if (st != HIPPO_SUCCESS) {
    gpu_destroy(&g->base);
    return st;
  }
  g->budget = capacity && capacity < tot ? capacity : tot;
  g->base.total_memory = g->budget;
  /* CUDA's VMM calls have no capture check and PyTorch's expandable
   * segments map during captures; ROCm's hipMemMap (clr hip_vm.cpp)
   * queues on the null stream and waits for it, which conflicts with a
   * capture: a capturing stream maps only on CUDA (decisions.md) */
  g->base.vm_captures = g->rt->flavor == HIPPO__GPU_CUDA;
  describe(g);
  vm_probe(g);
  if (g->vm)
    g->base.ops = &gpu_vm_ops;
  *out = &g->base;
  return HIPPO_SUCCESS;
}

hippo_status hippo__backend_hip_create(int32_t ordinal, uint64_t capacity,
                                       uint64_t alignment,
                                       hippo__backend **out) {
  static const enum hippo__gpu_flavor order[2] = {HIPPO__GPU_HIP,
                                                  HIPPO__GPU_CUDA};
  const char *force = getenv("HIPPO_GPU_RUNTIME");
  char why[2][512];
  hippo_status st[2] = {HIPPO_NO_DEVICE, HIPPO_NO_DEVICE};
  bool tried[2] = {false, false};

  if (force && *force && strcmp(force, "hip") && strcmp(force, "amd") &&
      strcmp(force, "cuda") && strcmp(force, "nvidia"))
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "HIPPO_GPU_RUNTIME is '%s': use hip (AMD's "
                            "runtime) or cuda (NVIDIA's), or unset it to try "
                            "both",
                            force);
  for (int i = 0; i < 2; i++) {
    const hippo__gpu_rt *rt;
    bool hip = order[i] == HIPPO__GPU_HIP;
    if (force && *force &&
        (hip ? strcmp(force, "hip") && strcmp(force, "amd")
             : strcmp(force, "cuda") && strcmp(force, "nvidia")))
      continue;
    tried[i] = true;
    st[i] = hippo__gpu_rt_load(order[i], &rt);
    if (st[i] == HIPPO_SUCCESS)
      st[i] = open_on(rt, ordinal, capacity, alignment, out);
    if (st[i] == HIPPO_SUCCESS)
      return HIPPO_SUCCESS;
    if (st[i] != HIPPO_NO_DEVICE) /* a device, but a real failure */
      return st[i];
    snprintf(why[i], sizeof why[i], "%s", hippo__error_get());
  }
  return hippo__error_set(HIPPO_NO_DEVICE, "no GPU: %s%s%s%s%s%s",
                          tried[0] ? why[0] : "",
                          tried[0] && tried[1] ? "; " : "",
                          tried[1] ? why[1] : "",
                          force && *force ? " (HIPPO_GPU_RUNTIME=" : "",
                          force && *force ? force : "",
                          force && *force ? ")" : "");
}
