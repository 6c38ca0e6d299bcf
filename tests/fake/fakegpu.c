/* fakegpu.c -- a stand-in GPU runtime for tests: the calls hippo's HIP
 * backend loads (src/gpu_rt.h), over host memory.  Built twice: with
 * FAKE_HIP as libfakehip.so (hip* names, HIP's attribute numbers) and with
 * FAKE_CUDA as libfakecudart.so (cuda* names).  Pointing HIPPO_HIP_LIBRARY
 * or HIPPO_CUDA_LIBRARY at one runs the HIP backend's code -- every call,
 * every error path the environment can provoke -- on a machine without a
 * GPU.  It proves hippo drives a runtime as documented; it proves nothing
 * of a real GPU (tests/device-check.sh does, where one is lent).
 *
 * Like hippo's HOST backend, a stream's work (copies) waits until the
 * stream is synchronized, an event recorded after it is waited for, a free
 * or the stream's destruction: a missing synchronization shows as stale
 * bytes.  A capturing stream records its copies into the graph (they never
 * run) and refuses to be synchronized (StreamCaptureUnsupported), as a
 * real one does.
 *
 * Capture modes, as CUDA documents them (cudaThreadExchangeStreamCaptureMode):
 * while a capture begun in mode global (0) or thread-local (1) runs, a
 * potentially unsafe call -- Malloc, Free, EventQuery, EventSynchronize,
 * DeviceSynchronize here -- made by the thread that began it, or (global
 * captures) by any thread whose own mode is global, answers
 * StreamCaptureUnsupported (900) and invalidates that capture: its
 * EndCapture answers StreamCaptureInvalidated (901) and no graph.  A
 * thread whose mode is relaxed (2) may make them.
 *
 * An invalidated capture runs on until EndCapture: StreamIsCapturing and
 * StreamGetCaptureInfo answer status 2 (invalidated) and no id, work
 * queued on the stream answers StreamCaptureInvalidated (901), as clr's
 * hip_graph.cpp and STREAM_CAPTURE macro do.  Besides the unsafe calls,
 * a capture is invalidated by a StreamSynchronize of its stream (900), by
 * an EventQuery or EventSynchronize of an event last recorded in it
 * (CapturedEvent, 907; clr hip_event.cpp), and by the blocking calls of
 * sync_checks (HIP's Memcpy: every capture, 906).
 *
 * Environment (read at each call that needs it):
 *   FAKE_GPU_DEVICES    devices (default 1; 0 answers NoDevice)
 *   FAKE_GPU_MEMORY     bytes per device (default 1 GiB)
 *   FAKE_GPU_ALIGNMENT  texture alignment (default 256)
 *   FAKE_GPU_FAIL       "nodevice" (GetDeviceCount answers 100), "driver"
 *                       (35), "stub" (34, CUDA's stub libcuda),
 *                       "unavailable" (46, every device exclusive and
 *                       taken), "prohibited" (compute mode prohibited),
 *                       "free" (Free answers 400 and frees nothing)
 *   FAKE_GPU_SLOW_US    Malloc and StreamCreateWithFlags first sleep
 *                       this long (default 0), and Free sleeps twice as
 *                       long after it freed, all outside the lock: a slow
 *                       driver, so that calls of several threads overlap
 *                       (tests/test-stress.c)
 * Contexts, as CUDA 12 keeps them: a device's primary context is created
 * by SetDevice, by cuDevicePrimaryCtxRetain, or by the first Malloc,
 * MemGetInfo or StreamCreateWithFlags of a thread without one (on its
 * runtime device: SetDevice's, 0 until set), and lives on.  Each thread
 * has a context stack (cuCtxPushCurrent, cuCtxPopCurrent; SetDevice
 * replaces its top): the runtime's calls and GetDevice go to the top
 * context's device, else to the thread's runtime device; GetDevice
 * creates nothing.  cuDevicePrimaryCtxGetState says which exist.
 * The thread's last error (GetLastError, PeekAtLastError) is what the
 * last failing Malloc, EventQuery or StreamIsCapturing answered, as a
 * runtime keeps it; the legacy default stream (NULL), asked whether it
 * captures while a blocking stream (flags 0) of the device captures,
 * answers StreamCaptureImplicit (906), as CUDA documents.
 *
 *   FAKE_GPU_REUSE      1: a freed allocation is kept and the next Malloc
 *                       that fits in it (any thread's, any smaller size)
 *                       gets its address back, as a driver reuses address
 *                       space (default 0: freed to the host)
 *   FAKE_GPU_TAKEN      devices (ordinals, comma-separated) in
 *                       exclusive-process mode and taken by another
 *                       process: their compute mode reads 3, and creating
 *                       their context answers 46 (cudaErrorDevicesUnavailable,
 *                       CUresult CUDA_ERROR_DEVICE_UNAVAILABLE), as
 *                       cudaSetDevice documents
 *   FAKE_GPU_STREAM_DEVICE  "old": cudaStreamGetDevice answers 36
 *                       (cudaErrorCallRequiresNewerDriver: a 12.8 runtime
 *                       on an older driver; before 12.8 there is no call)
 *   FAKE_GPU_VERSION    what RuntimeGetVersion answers (default 60200000
 *                       for HIP, 13000 for CUDA); HIP below 50300000 reads
 *                       hipMemAllocationProp in HIP 5.2's layout and has
 *                       no attribute 89 (VirtualMemoryManagementSupported);
 *                       HIP below 60100000 has ROCm 5's and 6.0's virtual
 *                       memory, which does nothing on Linux (clr at
 *                       rocm-6.0.2): the reserve answers success and
 *                       address NULL, SetAccess checks its arguments and
 *                       does nothing, Map answers success and maps
 *                       nothing
 *
 * Virtual memory, over host memory as hippo's HOST backend does it: HIP's
 * hipMemAddressReserve, hipMemAddressFree, hipMemCreate, hipMemRelease,
 * hipMemMap, hipMemSetAccess, hipMemUnmap, hipMemGetAllocationGranularity
 * are exported by libfakehip.so; CUDA's are the driver's (cuMem*, with
 * cuDeviceGet, cuDeviceGetAttribute, cuGetErrorName, cuGetErrorString),
 * which libfakecudart.so does not export: they are reached only as
 * hippo reaches the real driver's, through the runtime's
 * cudaGetDriverEntryPointByVersion / cudaGetDriverEntryPoint.  A reserved
 * range is a PROT_NONE mapping; an allocation (hipMemCreate) a memfd of
 * its size, counted in the device's memory (FAKE_GPU_MEMORY); a map
 * mmaps the memfd MAP_SHARED|MAP_FIXED at the address, inaccessible until
 * SetAccess makes it read-write; an unmap puts a PROT_NONE mapping back;
 * a release frees the allocation once unmapped (a mapped one is freed at
 * its unmap, as CUDA documents).  While a capture runs (the modes above),
 * an unmap is a potentially unsafe call on both runtimes, and so is
 * hipMemMap (it waits on the null stream); cuMemAddressReserve, cuMemCreate,
 * cuMemMap and cuMemSetAccess are not (CUDA documents no capture check on
 * them, and PyTorch's expandable segments call them in captures).
 * hipMemUnmap first runs the device's
 * queued work (HIP's synchronizes); cuMemUnmap does not, so a copy still
 * queued on unmapped memory faults when its stream runs.  The calls check
 * what a driver checks (sizes and offsets multiples of the granularity,
 * whole mappings, the allocation properties' fields, the access
 * descriptor; a map's offset 0, as cuMemMap documents and clr's hipMemMap
 * checks), answering InvalidValue (1) otherwise.  HIP before 7
 * (FAKE_GPU_VERSION) caps one hipMemCreate at FAKE_GPU_VM_CREATE_MAX
 * (default 256 MiB, the chunk vLLM's cumem_allocator.cpp creates on
 * ROCm), answering OutOfMemory above it, as clr does above its own
 * maximum.
 *   FAKE_GPU_VM_GRANULARITY  the granularity (default 2 MiB)
 *   FAKE_GPU_VM_ALIGN   N: the reserve ignores the alignment asked, as
 *                       ROCm's does (clr passes it to an HSA call that has
 *                       none), and answers an address that is a multiple
 *                       of N but not of 2N.  HIP's reserve answers
 *                       hipErrorMemoryAllocation (2) for a size not a
 *                       multiple of the granularity or an alignment not a
 *                       power of two (clr hip_vm.cpp), CUDA's InvalidValue
 *   FAKE_GPU_PEER       1: every two devices are peers (DeviceCanAccessPeer
 *                       answers 1); default none.  A mapping's access is
 *                       kept per device: SetAccess for a device that is no
 *                       peer of the memory's answers InvalidDevice (101),
 *                       and a copy (MemcpyAsync by its stream's device,
 *                       Memcpy by the current one) touching a mapping that
 *                       device has no access to faults: IllegalAddress
 *                       (700), as a peer's copy or kernel does on memory
 *                       it was not given (Malloc'd memory never faults)
 *   FAKE_GPU_VM_SHARE   shareable allocations: by default the CUDA device
 *                       says it has POSIX file descriptor handles and RDMA
 *                       with VMM (attributes 103, 110), and a create may
 *                       ask for them (HIP from 6.2: clr 6.1 answers
 *                       NotSupported for any handle type); "refuse": the
 *                       attributes say yes, but a create asking for either
 *                       answers NotSupported (801); "none": they say no.
 *                       fakeGpuLastCreate says what the last create asked
 *   FAKE_GPU_NO_VMM     1: no virtual memory (the support attribute answers
 *                       0, every VMM call NotSupported, 801); "calls": the
 *                       attribute says yes but the calls answer 801
 *   FAKE_GPU_ENTRY      CUDA: "legacy" (cudaGetDriverEntryPointByVersion
 *                       answers NotSupported, the older call serves) or
 *                       "none" (neither finds a driver call)
 *   FAKE_GPU_FAIL       also "vmreserve", "vmfree", "vmcreate", "vmmap",
 *                       "vmaccess", "vmunmap", "vmrelease", "vmgranularity"
 *                       (that call answers OutOfMemory for vmcreate and
 *                       vmreserve, NotSupported for vmgranularity,
 *                       InvalidValue for the others -- ROCm's spurious
 *                       hipMemSetAccess answer), optionally ":N": the Nth
 *                       such call since the variable last changed, and
 *                       every one after it; several, comma-separated
 *                       ("vmaccess:3,vmrelease")
 *
 * One mutex guards everything: it is a test double, not a fast one.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#if defined(FAKE_HIP)
#define FN(x) hip##x
#define ATTR_TEX 81
#define ATTR_MODE 6
#define ATTR_MAJOR 23
#define ATTR_MINOR 61
#define NAME "Fake HIP GPU"
#define VERSION 60200000
#elif defined(FAKE_CUDA)
#define FN(x) cuda##x
#define ATTR_TEX 14
#define ATTR_MODE 20
#define ATTR_MAJOR 75
#define ATTR_MINOR 76
#define NAME "Fake CUDA GPU"
#define VERSION 13000
#else
#error "build with -DFAKE_HIP or -DFAKE_CUDA"
#endif

#define EXPORT __attribute__((visibility("default")))

enum { OK = 0, E_VALUE = 1, E_OOM = 2, E_DRIVER = 35, E_NEWER_DRIVER = 36,
       E_UNAVAILABLE = 46, E_NODEV = 100, E_BADDEV = 101, E_CONTEXT = 201,
       E_HANDLE = 400, E_NOT_READY = 600,
       E_NOT_SUPPORTED = 801,
       E_CAPTURE_UNSUPPORTED = 900, E_CAPTURE_INVALIDATED = 901,
       E_CAPTURE_IMPLICIT = 906, E_CAPTURED_EVENT = 907,
       E_ILLEGAL_ADDRESS = 700 };
/* A handle that is no stream: CUDA's invalid handle (400); ROCm answers
 * hipErrorContextIsDestroyed (709) for a stream it does not know. */
#if defined(FAKE_HIP)
#define E_NOSTREAM 709
#else
#define E_NOSTREAM E_HANDLE
#endif
enum { MODE_GLOBAL = 0, MODE_THREAD_LOCAL = 1, MODE_RELAXED = 2 };

enum { OP_COPY, OP_FREE };

typedef struct op {
  int kind;
  void *dst; /* OP_FREE: the allocation to free */
  const void *src;
  size_t size;
} op;

/* A list of ops: a stream's queue, a graph, an executable graph. */
typedef struct oplist {
  op *ops;
  size_t n, cap;
} oplist;

typedef struct fgraph {
  uint32_t magic;
  oplist list;
} fgraph;

typedef struct fstream {
  uint32_t magic;
  int device;
  op *ops;
  size_t queued, done, cap; /* ops[done..queued) wait */
  uint64_t base;            /* ops run before ops[0] (the queue restarts) */
  bool capturing;
  unsigned long long capture_id;
  fgraph *graph; /* while capturing: what the capture recorded */
  int capture_mode;         /* while capturing: the mode it began in */
  pthread_t capture_thread; /* and the thread that began it */
  bool invalidated;         /* an unsafe call broke the capture */
  unsigned flags;           /* StreamCreateWithFlags' (1: non-blocking) */
  struct fstream *next;
} fstream;

typedef struct fevent {
  uint32_t magic;
  fstream *stream; /* NULL: done */
  fstream *captured; /* recorded in this stream's capture (capture_id) */
  unsigned long long capture_id;
  uint64_t target; /* done once stream's base + done reaches it */
  struct fevent *next;
} fevent;

typedef struct falloc {
  void *p;
  size_t size;
  int device;
  struct falloc *next;
} falloc;

#define STREAM_MAGIC 0x5354524du
#define EVENT_MAGIC 0x45564e54u
#define GRAPH_MAGIC 0x47525048u
#define EXEC_MAGIC 0x47455845u

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static fstream default_stream = {.magic = STREAM_MAGIC};
static fstream *streams;
static fevent *events;
static falloc *allocs;
static falloc *reusable; /* freed, kept for FAKE_GPU_REUSE */
static size_t used[64];
static unsigned long long next_capture = 1;
static _Thread_local int current;     /* the runtime device: SetDevice's */
static _Thread_local int ctx_top[8];  /* the context stack: devices */
static _Thread_local int ctx_depth;
static bool ctx_live[64];             /* primary contexts (under mu) */
static int ctx_refs[64];              /* their retains */
static char ctx_obj[64];              /* &ctx_obj[d]: device d's context */
static _Thread_local int thread_mode; /* MODE_GLOBAL until exchanged */
static _Thread_local int last_error;  /* GetLastError's */

/* An answer of a call that keeps the thread's last error. */
static int answer(int err) {
  if (err != OK)
    last_error = err;
  return err;
}

EXPORT int FN(GetLastError)(void) {
  int err = last_error;
  last_error = OK;
  return err;
}

EXPORT int FN(PeekAtLastError)(void) { return last_error; }

static uint64_t env_u64(const char *name, uint64_t dflt) {
  const char *v = getenv(name);
  return v && *v ? strtoull(v, NULL, 0) : dflt;
}

static int devices(void) {
  return (int)env_u64("FAKE_GPU_DEVICES", 1);
}

static int version(void) {
  return (int)env_u64("FAKE_GPU_VERSION", VERSION);
}

/* FAKE_GPU_NO_VMM: the attribute says none ("1"), or the calls answer
 * NotSupported ("1" or "calls"). */
static bool no_vmm_attr(void) {
  const char *v = getenv("FAKE_GPU_NO_VMM");
  return v && *v && strcmp(v, "0") && strcmp(v, "calls");
}
static bool no_vmm_calls(void) {
  const char *v = getenv("FAKE_GPU_NO_VMM");
  return v && *v && strcmp(v, "0");
}

static const char *fail_mode(void) {
  const char *v = getenv("FAKE_GPU_FAIL");
  return v ? v : "";
}

/* A slow driver call (FAKE_GPU_SLOW_US), outside the lock. */
static void slow(void) {
  uint64_t us = env_u64("FAKE_GPU_SLOW_US", 0);
  if (us) {
    struct timespec t = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    nanosleep(&t, NULL);
  }
}

/* The stream a handle names, or NULL (the caller answers E_NOSTREAM).
 * The legacy (1) and per-thread (2) special handles are the default
 * stream here, as the runtimes accept them. */
static fstream *stream_of(void *s) {
  fstream *f = s && (uintptr_t)s > 2 ? s : &default_stream;
  return f->magic == STREAM_MAGIC ? f : NULL;
}

/* Appends o to l (false: out of host memory). */
static bool push(oplist *l, op o) {
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
static int enqueue(fstream *s, op o) {
  if (s->capturing && s->invalidated)
    return E_CAPTURE_INVALIDATED; /* clr's STREAM_CAPTURE macro */
  if (s->capturing)
    return push(&s->graph->list, o) ? OK : E_OOM;
  {
    oplist q = {s->ops, s->queued, s->cap};
    bool ok = push(&q, o);
    s->ops = q.ops;
    s->queued = q.n;
    s->cap = q.cap;
    return ok ? OK : E_OOM;
  }
}

static int free_now(void *p);

/* Runs a stream's waiting work up to `upto` (absolute count). */
static void run(fstream *s, uint64_t upto) {
  while (s->done < s->queued && s->base + s->done < upto) {
    op *o = &s->ops[s->done++];
    if (o->kind == OP_FREE)
      (void)free_now(o->dst);
    else
      memmove(o->dst, o->src, o->size);
  }
  if (s->done == s->queued) {
    s->base += s->done;
    s->done = s->queued = 0;
  }
}

/* A potentially unsafe call is about to run (the lock held): OK, or
 * E_CAPTURE_UNSUPPORTED when a capture prohibits it, each such capture
 * invalidated (see the head of this file). */
static int unsafe_call(void) {
  int err = OK;
  if (thread_mode == MODE_RELAXED)
    return OK;
  for (fstream *s = streams; s; s = s->next) {
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
static bool captured_event(fevent *e) {
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
static int dev_now(void);
static int sync_checks(fstream *s, bool legacy) {
  int err = OK;
#if defined(FAKE_HIP)
  if (legacy && !s) {
    for (fstream *o = streams; o; o = o->next)
      if (o->capturing) {
        o->invalidated = true;
        err = E_CAPTURE_IMPLICIT;
      }
  } else if (!legacy) {
    err = unsafe_call();
  }
#else
  (void)s;
  if (legacy)
    for (fstream *o = streams; o; o = o->next)
      if (o->capturing && !(o->flags & 1) && o->device == dev_now()) {
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

static void run_all(void) {
  run(&default_stream, UINT64_MAX);
  for (fstream *s = streams; s; s = s->next)
    run(s, UINT64_MAX);
}

/* ---- devices ----------------------------------------------------------------- */

EXPORT int FN(GetDeviceCount)(int *count) {
  if (!strcmp(fail_mode(), "nodevice"))
    return E_NODEV;
  if (!strcmp(fail_mode(), "driver"))
    return E_DRIVER;
  if (!strcmp(fail_mode(), "stub"))
    return 34; /* cudaErrorStubLibrary */
  if (!strcmp(fail_mode(), "unavailable"))
    return 46; /* cudaErrorDevicesUnavailable */
  *count = devices();
  return *count ? OK : E_NODEV;
}

/* ---- contexts (see the head of this file) ---- */

/* The device the thread's runtime calls go to. */
static int dev_now(void) {
  return ctx_depth ? ctx_top[ctx_depth - 1] : current;
}

/* Whether FAKE_GPU_TAKEN names dev. */
static bool taken(int dev) {
  const char *v = getenv("FAKE_GPU_TAKEN");
  for (char *end; v && *v; v = *end ? end + 1 : end) {
    long d = strtol(v, &end, 10);
    if (end == v)
      return false;
    if (d == dev)
      return true;
  }
  return false;
}

/* Device dev's primary context, created if none (the lock held). */
static int ctx_create(int dev) {
  if (!ctx_live[dev] && taken(dev))
    return E_UNAVAILABLE;
  ctx_live[dev] = true;
  return OK;
}

/* A context for a runtime call (the lock held): the thread's current one,
 * else its runtime device's, created and made current. */
static int need_ctx(void) {
  int err = ctx_depth ? OK : ctx_create(current);
  if (err == OK && !ctx_depth)
    ctx_top[ctx_depth++] = current;
  return err;
}

EXPORT int FN(GetDevice)(int *dev) {
  *dev = dev_now();
  return OK;
}

EXPORT int FN(SetDevice)(int dev) {
  int err;
  if (dev < 0 || dev >= devices())
    return E_BADDEV;
  pthread_mutex_lock(&mu);
  err = ctx_create(dev);
  pthread_mutex_unlock(&mu);
  if (err != OK)
    return err;
  current = dev;
  ctx_top[ctx_depth ? ctx_depth - 1 : ctx_depth++] = dev;
  return OK;
}

EXPORT int FN(DeviceGetAttribute)(int *value, int attr, int dev) {
  if (dev < 0 || dev >= devices())
    return E_BADDEV;
  if (attr == ATTR_TEX)
    *value = (int)env_u64("FAKE_GPU_ALIGNMENT", 256);
  else if (attr == ATTR_MODE)
    *value = !strcmp(fail_mode(), "prohibited") ? 2 : taken(dev) ? 3 : 0;
  else if (attr == ATTR_MAJOR)
    *value = 9;
  else if (attr == ATTR_MINOR)
    *value = 4;
#if defined(FAKE_HIP)
  else if (attr == 89 && version() >= 50300000) /* VMM supported */
    *value = !no_vmm_attr();
#endif
  else
    return E_VALUE;
  return OK;
}

/* Whether device `dev` can access device `peer`'s memory: FAKE_GPU_PEER
 * "1" makes every two devices peers (default: none are). */
static bool peers(int dev, int peer) {
  const char *v = getenv("FAKE_GPU_PEER");
  return dev != peer && v && !strcmp(v, "1");
}

EXPORT int FN(DeviceCanAccessPeer)(int *can, int dev, int peer) {
  if (!can)
    return E_VALUE;
  if (dev < 0 || dev >= devices() || peer < 0 || peer >= devices())
    return E_BADDEV;
  *can = peers(dev, peer);
  return OK;
}

static bool copy_faults(int dev, const void *p, size_t size);

EXPORT int FN(MemGetInfo)(size_t *free_bytes, size_t *total) {
  uint64_t mem = env_u64("FAKE_GPU_MEMORY", UINT64_C(1) << 30);
  int err;
  pthread_mutex_lock(&mu);
  if ((err = need_ctx()) == OK) {
    *total = mem;
    *free_bytes = mem - used[dev_now()];
  }
  pthread_mutex_unlock(&mu);
  return err;
}

EXPORT int FN(RuntimeGetVersion)(int *v) {
  *v = version();
  return OK;
}

#if defined(FAKE_HIP)
EXPORT int hipDeviceGetName(char *name, int len, int dev) {
  if (dev < 0 || dev >= devices())
    return E_BADDEV;
  snprintf(name, (size_t)len, "%s %d", NAME, dev);
  return OK;
}
#else
EXPORT int cudaGetDeviceProperties(void *props, int dev) {
  if (dev < 0 || dev >= devices())
    return E_BADDEV;
  snprintf(props, 256, "%s %d", NAME, dev);
  return OK;
}
#endif

EXPORT const char *FN(GetErrorName)(int err) {
  switch (err) {
  case OK:
    return "fakeSuccess";
  case E_OOM:
    return "fakeErrorOutOfMemory";
  case E_NODEV:
    return "fakeErrorNoDevice";
  case E_DRIVER:
    return "fakeErrorInsufficientDriver";
  case E_CAPTURE_UNSUPPORTED:
    return "fakeErrorStreamCaptureUnsupported";
  case E_CAPTURE_INVALIDATED:
    return "fakeErrorStreamCaptureInvalidated";
  default:
    return "fakeError";
  }
}

EXPORT const char *FN(GetErrorString)(int err) {
  return err == E_NODEV ? "no fake device" : "a fake runtime's error";
}

/* ---- memory -------------------------------------------------------------------- */

/* A freed allocation kept for FAKE_GPU_REUSE that holds `size` bytes,
 * off the list and now of that size, or NULL (the lock held). */
static falloc *reuse(size_t size) {
  for (falloc **link = &reusable; *link; link = &(*link)->next)
    if ((*link)->size >= size) {
      falloc *a = *link;
      *link = a->next;
      a->size = size;
      return a;
    }
  return NULL;
}

/* A new allocation of `size` bytes (the lock held), or NULL. */
static falloc *fresh(size_t size) {
  size_t align = (size_t)env_u64("FAKE_GPU_ALIGNMENT", 256);
  falloc *a = malloc(sizeof *a);
  if (align < 4096)
    align = 4096;
  if (a)
    a->p = aligned_alloc(align, (size + align - 1) / align * align);
  if (!a || !a->p) {
    free(a);
    return NULL;
  }
  a->size = size;
  return a;
}

static int malloc_answer(void **p, size_t size);

EXPORT int FN(Malloc)(void **p, size_t size) {
  return answer(malloc_answer(p, size));
}

static int malloc_answer(void **p, size_t size) {
  uint64_t mem = env_u64("FAKE_GPU_MEMORY", UINT64_C(1) << 30);
  falloc *a;
  if (!p)
    return E_VALUE;
  slow();
  pthread_mutex_lock(&mu);
  if (unsafe_call() != OK) {
    pthread_mutex_unlock(&mu);
    return E_CAPTURE_UNSUPPORTED;
  }
  if (need_ctx() != OK) {
    pthread_mutex_unlock(&mu);
    return E_UNAVAILABLE;
  }
  if (size > mem - used[dev_now()]) {
    pthread_mutex_unlock(&mu);
    return E_OOM;
  }
  a = reuse(size); /* a freed address comes back first */
  if (!a && !(a = fresh(size))) {
    pthread_mutex_unlock(&mu);
    return E_OOM;
  }
  a->device = dev_now();
  a->next = allocs;
  allocs = a;
  used[a->device] += size;
  *p = a->p;
  pthread_mutex_unlock(&mu);
  return OK;
}

/* Frees allocation p (the lock held); E_VALUE when it is none. */
static int free_now(void *p) {
  for (falloc **link = &allocs; *link; link = &(*link)->next)
    if ((*link)->p == p) {
      falloc *a = *link;
      *link = a->next;
      used[a->device] -= a->size;
      if (env_u64("FAKE_GPU_REUSE", 0)) {
        a->next = reusable;
        reusable = a;
        return OK;
      }
      free(a->p);
      free(a);
      return OK;
    }
  return E_VALUE;
}

EXPORT int FN(Free)(void *p) {
  int err;
  if (!p)
    return OK;
  if (!strcmp(fail_mode(), "free"))
    return E_HANDLE;
  pthread_mutex_lock(&mu);
  if (unsafe_call() != OK) {
    pthread_mutex_unlock(&mu);
    return E_CAPTURE_UNSUPPORTED;
  }
  run_all(); /* a free waits for the device, as the real one does */
  err = free_now(p);
  pthread_mutex_unlock(&mu);
  slow(); /* freed: the address may be handed out meanwhile */
  slow();
  return err;
}

EXPORT int FN(Memcpy)(void *dst, const void *src, size_t size, int kind) {
  int err;
  (void)kind;
  pthread_mutex_lock(&mu);
  err = sync_checks(NULL, true);
  if (err == OK &&
      (copy_faults(dev_now(), dst, size) || copy_faults(dev_now(), src, size)))
    err = E_ILLEGAL_ADDRESS;
  pthread_mutex_unlock(&mu);
  if (err == OK)
    memmove(dst, src, size);
  return err;
}

EXPORT int FN(MemcpyAsync)(void *dst, const void *src, size_t size, int kind,
                           void *stream) {
  fstream *s;
  int err;
  (void)kind;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  if (s && (copy_faults(s == &default_stream ? dev_now() : s->device, dst,
                        size) ||
            copy_faults(s == &default_stream ? dev_now() : s->device, src,
                        size)))
    err = E_ILLEGAL_ADDRESS;
  else
    err = s ? enqueue(s, (op){OP_COPY, dst, src, size}) : E_NOSTREAM;
  pthread_mutex_unlock(&mu);
  return err;
}

/* The stream-ordered allocator: memory at once, given back when the
 * stream's work reaches the free. */
EXPORT int FN(MallocAsync)(void **p, size_t size, void *stream) {
  fstream *s;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  if (!s || s->capturing) {
    pthread_mutex_unlock(&mu);
    return s ? E_CAPTURE_UNSUPPORTED : E_NOSTREAM;
  }
  pthread_mutex_unlock(&mu);
  return FN(Malloc)(p, size);
}

EXPORT int FN(FreeAsync)(void *p, void *stream) {
  fstream *s;
  int err;
  if (!p)
    return OK;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  if (!s || s->capturing)
    err = s ? E_CAPTURE_UNSUPPORTED : E_NOSTREAM;
  else
    err = enqueue(s, (op){OP_FREE, p, NULL, 0});
  pthread_mutex_unlock(&mu);
  return err;
}

EXPORT int FN(DeviceSynchronize)(void) {
  int err;
  pthread_mutex_lock(&mu);
  err = unsafe_call();
  if (err == OK)
    run_all();
  pthread_mutex_unlock(&mu);
  return err;
}

/* ---- streams ---------------------------------------------------------------- */

EXPORT int FN(StreamCreateWithFlags)(void **out, unsigned flags) {
  fstream *s;
  slow();
  s = calloc(1, sizeof *s);
  if (!s)
    return E_OOM;
  s->flags = flags;
  s->magic = STREAM_MAGIC;
  pthread_mutex_lock(&mu);
  if (need_ctx() != OK) {
    pthread_mutex_unlock(&mu);
    free(s);
    return E_UNAVAILABLE;
  }
  s->device = dev_now();
  s->next = streams;
  streams = s;
  pthread_mutex_unlock(&mu);
  *out = s;
  return OK;
}

EXPORT int FN(StreamDestroy)(void *stream) {
  fstream **link;
  pthread_mutex_lock(&mu);
  for (link = &streams; *link; link = &(*link)->next)
    if (*link == stream) {
      fstream *s = *link;
      run(s, UINT64_MAX);
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
      pthread_mutex_unlock(&mu);
      return OK;
    }
  pthread_mutex_unlock(&mu);
  return E_NOSTREAM;
}

EXPORT int FN(StreamSynchronize)(void *stream) {
  fstream *s;
  int err;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  if (!s) {
    pthread_mutex_unlock(&mu);
    return E_NOSTREAM;
  }
  if (s->capturing) { /* prohibited: the capture is invalidated */
    s->invalidated = true;
    pthread_mutex_unlock(&mu);
    return E_CAPTURE_UNSUPPORTED;
  }
  if ((err = sync_checks(s, stream == NULL)) != OK) {
    pthread_mutex_unlock(&mu);
    return err;
  }
  run(s, UINT64_MAX);
  pthread_mutex_unlock(&mu);
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
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  if (s)
    *dev = stream ? s->device : dev_now();
  pthread_mutex_unlock(&mu);
  return s ? OK : E_NOSTREAM;
}

EXPORT int FN(StreamIsCapturing)(void *stream, int *status) {
  fstream *s;
  int err;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  err = s ? OK : E_NOSTREAM;
  if (s)
    *status = capture_status(s);
  if (s && !stream) /* the legacy stream: a blocking stream capturing? */
    for (fstream *o = streams; o; o = o->next)
      if (o->capturing && !(o->flags & 1) && o->device == dev_now())
        err = E_CAPTURE_IMPLICIT;
  pthread_mutex_unlock(&mu);
  return answer(err);
}

EXPORT int FN(StreamGetCaptureInfo)(void *stream, int *status,
                                    unsigned long long *id, void *graph,
                                    void *deps, void *edges, void *count) {
  fstream *s;
  (void)graph, (void)deps, (void)edges, (void)count;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  if (s) { /* the id of an active capture only (clr hip_graph.cpp) */
    *status = capture_status(s);
    if (id)
      *id = *status == 1 ? s->capture_id : 0;
  }
  pthread_mutex_unlock(&mu);
  return s ? OK : E_NOSTREAM;
}

EXPORT int FN(StreamBeginCapture)(void *stream, int mode) {
  fstream *s;
  int err = OK;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
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
  pthread_mutex_unlock(&mu);
  return err;
}

EXPORT int FN(StreamEndCapture)(void *stream, void **graph) {
  fstream *s;
  int err = OK;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
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
  pthread_mutex_unlock(&mu);
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
    if (!push(&x->list, g->list.ops[i])) {
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
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  if (!x || x->magic != EXEC_MAGIC)
    err = E_VALUE;
  else if (!s)
    err = E_NOSTREAM;
  for (size_t i = 0; err == OK && i < x->list.n; i++)
    err = enqueue(s, x->list.ops[i]);
  pthread_mutex_unlock(&mu);
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

/* ---- events --------------------------------------------------------------------- */

EXPORT int FN(EventCreateWithFlags)(void **out, unsigned flags) {
  fevent *e = calloc(1, sizeof *e);
  (void)flags;
  if (!e)
    return E_OOM;
  e->magic = EVENT_MAGIC;
  pthread_mutex_lock(&mu);
  e->next = events;
  events = e;
  pthread_mutex_unlock(&mu);
  *out = e;
  return OK;
}

EXPORT int FN(EventRecord)(void *event, void *stream) {
  fevent *e = event;
  fstream *s;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  if (!e || e->magic != EVENT_MAGIC || !s) {
    pthread_mutex_unlock(&mu);
    return E_HANDLE;
  }
  if (s->capturing && s->invalidated) {
    pthread_mutex_unlock(&mu);
    return E_CAPTURE_INVALIDATED;
  }
  e->captured = s->capturing ? s : NULL;
  e->capture_id = s->capturing ? s->capture_id : 0;
  if (!s->capturing) {
    e->stream = s;
    e->target = s->base + s->queued;
  }
  pthread_mutex_unlock(&mu);
  return OK;
}

EXPORT int FN(EventQuery)(void *event) {
  fevent *e = event;
  int err;
  pthread_mutex_lock(&mu);
  if (!e || e->magic != EVENT_MAGIC)
    err = E_HANDLE;
  else if (captured_event(e))
    err = E_CAPTURED_EVENT;
  else if ((err = unsafe_call()) != OK)
    ;
  else
    err = !e->stream || e->stream->base + e->stream->done >= e->target
              ? OK
              : E_NOT_READY;
  pthread_mutex_unlock(&mu);
  return answer(err);
}

EXPORT int FN(EventSynchronize)(void *event) {
  fevent *e = event;
  pthread_mutex_lock(&mu);
  if (!e || e->magic != EVENT_MAGIC) {
    pthread_mutex_unlock(&mu);
    return E_HANDLE;
  }
  if (captured_event(e)) {
    pthread_mutex_unlock(&mu);
    return E_CAPTURED_EVENT;
  }
  if (unsafe_call() != OK) {
    pthread_mutex_unlock(&mu);
    return E_CAPTURE_UNSUPPORTED;
  }
  if (e->stream)
    run(e->stream, e->target);
  pthread_mutex_unlock(&mu);
  return OK;
}

EXPORT int FN(EventDestroy)(void *event) {
  fevent **link;
  pthread_mutex_lock(&mu);
  for (link = &events; *link; link = &(*link)->next)
    if (*link == event) {
      fevent *e = *link;
      *link = e->next;
      e->magic = 0;
      free(e);
      pthread_mutex_unlock(&mu);
      return OK;
    }
  pthread_mutex_unlock(&mu);
  return E_HANDLE;
}

/* ---- virtual memory ------------------------------------------------------------- */

/* hipMemLocation / CUmemLocation, hipMemAccessDesc / CUmemAccessDesc */
typedef struct vloc {
  int type, id;
} vloc;
typedef struct vaccess {
  vloc location;
  int flags;
} vaccess;
/* hipMemAllocationProp from HIP 5.3 on, CUmemAllocationProp */
typedef struct vprop {
  int type, handle_types;
  vloc location;
  void *win32;
  unsigned char compression, rdma;
  unsigned short usage;
  unsigned char reserved[4];
} vprop;
/* hipMemAllocationProp of HIP 5.2 */
typedef struct vprop52 {
  unsigned char compression;
  vloc location;
  int handle_type, type;
  unsigned short usage;
  void *win32;
} vprop52;

#define VHANDLE_MAGIC 0x564d4841u

typedef struct vres { /* a reserved range */
  char *base;
  size_t size;
  struct vres *next;
} vres;

typedef struct vhandle { /* a physical allocation */
  uint32_t magic;
  int fd, device;
  size_t size;
  int maps;      /* mappings of it */
  bool released; /* freed once maps is 0 */
  struct vhandle *next;
} vhandle;

typedef struct vmapping {
  char *addr;
  size_t size;
  vhandle *h;
  uint64_t access; /* bit d: device d may read and write it (SetAccess) */
  struct vmapping *next;
} vmapping;

static vres *vreses;
static vhandle *vhandles;
static vmapping *vmappings;
static char fail_spec[128]; /* FAKE_GPU_FAIL as last seen by a VMM call */
static unsigned long fail_counts[8]; /* calls of each of its modes since */

static size_t granularity(void) {
  return (size_t)env_u64("FAKE_GPU_VM_GRANULARITY", UINT64_C(2) << 20);
}

/* Whether this VMM call (`mode`: "vmmap", ...) fails now (the lock held):
 * FAKE_GPU_FAIL names the mode -- a comma-separated list of "mode" or
 * "mode:N", N counting this mode's calls since the variable changed: the
 * Nth and every later one fail. */
static bool vm_fails(const char *mode) {
  const char *spec = fail_mode(), *at = spec;
  size_t n = strlen(mode);
  if (strncmp(spec, fail_spec, sizeof fail_spec)) {
    snprintf(fail_spec, sizeof fail_spec, "%s", spec);
    memset(fail_counts, 0, sizeof fail_counts);
  }
  for (unsigned i = 0; *at && i < 8; i++) {
    const char *end = strchr(at, ',');
    if (!end)
      end = at + strlen(at);
    if (!strncmp(at, mode, n) && (at + n == end || at[n] == ':'))
      return ++fail_counts[i] >=
             (at[n] == ':' ? strtoul(at + n + 1, NULL, 0) : 1);
    at = *end ? end + 1 : end;
  }
  return false;
}

/* The device an allocation's properties name, or -1 (a field a driver
 * would refuse): the layout of the runtime's version. */
static int last_handles = -1, last_rdma = -1; /* the last create's */
static int seen_handles, seen_rdma; /* prop_device's last properties */

/* What the last create was asked for, -1 before any (tests read it). */
EXPORT void fakeGpuLastCreate(int *handle_types, int *rdma) {
  pthread_mutex_lock(&mu);
  *handle_types = last_handles;
  *rdma = last_rdma;
  pthread_mutex_unlock(&mu);
}

/* Whether a create asking for sharing is refused: FAKE_GPU_VM_SHARE
 * "refuse", or HIP before 6.2 asked any handle type (clr hip_vm.cpp at
 * rocm-6.1.0 answers hipErrorNotSupported; VMM IPC came with 6.2). */
static bool share_refused(int handles, int rdma) {
  const char *v = getenv("FAKE_GPU_VM_SHARE");
  if (v && !strcmp(v, "refuse"))
    return handles || rdma;
#if defined(FAKE_HIP)
  return handles && version() < 60200000;
#else
  return false;
#endif
}

static int prop_device(const void *prop) {
  int type, handles, rdma = 0, dev;
  vloc loc;
  void *win32;
  if (!prop)
    return -1;
#if defined(FAKE_HIP)
  if (version() < 50300000) {
    const vprop52 *p = prop;
    type = p->type;
    handles = p->handle_type;
    loc = p->location;
    win32 = p->win32;
  } else
#endif
  {
    const vprop *p = prop;
    type = p->type;
    handles = p->handle_types;
    loc = p->location;
    win32 = p->win32;
    rdma = p->rdma;
  }
  dev = loc.id;
  /* handle types: none or a POSIX file descriptor (1) */
  if (type != 1 || (handles & ~1) || rdma > 1 || loc.type != 1 || win32 ||
      dev < 0 || dev >= devices())
    return -1;
  seen_handles = handles;
  seen_rdma = rdma;
  return dev;
}

/* ROCm before 6.1: the VMM calls answer success and do nothing. */
static bool vmm_hollow(void) {
#if defined(FAKE_HIP)
  return version() < 60100000;
#else
  return false;
#endif
}

/* The largest hipMemCreate: FAKE_GPU_VM_CREATE_MAX on HIP before 7. */
static uint64_t create_max(void) {
#if defined(FAKE_HIP)
  if (version() < 70000000)
    return env_u64("FAKE_GPU_VM_CREATE_MAX", UINT64_C(256) << 20);
#endif
  return UINT64_MAX;
}

static int vm_granularity(size_t *g, const void *prop, int option) {
  int err = OK;
  pthread_mutex_lock(&mu);
  if (no_vmm_calls() || vm_fails("vmgranularity"))
    err = E_NOT_SUPPORTED;
  else if (!g || prop_device(prop) < 0 || option < 0 || option > 1)
    err = E_VALUE;
  else
    *g = granularity();
  pthread_mutex_unlock(&mu);
  return err;
}

static int vm_reserve(void **ptr, size_t size, size_t align, void *addr,
                      unsigned long long flags) {
  size_t gran = granularity(), ignored;
  uintptr_t base, start;
  vres *r;
  char *m;
  (void)addr; /* a hint */
  pthread_mutex_lock(&mu);
  if (no_vmm_calls()) {
    pthread_mutex_unlock(&mu);
    return E_NOT_SUPPORTED;
  }
  if (vm_fails("vmreserve")) {
    pthread_mutex_unlock(&mu);
    return E_OOM;
  }
  pthread_mutex_unlock(&mu);
  if (!ptr || flags)
    return E_VALUE;
  if (vmm_hollow()) { /* rocm-6.0.2 hip_vm.cpp: virtualAlloc's NULL */
    *ptr = NULL;
    return OK;
  }
  if (size == 0 || size % gran || (align & (align - 1)) != 0)
#if defined(FAKE_HIP)
    return E_OOM;
#else
    return E_VALUE;
#endif
  if (align < gran)
    align = gran;
  if ((ignored = (size_t)env_u64("FAKE_GPU_VM_ALIGN", 0)) != 0)
    align = 2 * ignored; /* start below: a multiple of N, not of 2N */
  m = mmap(NULL, size + align, PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  r = malloc(sizeof *r);
  if (m == MAP_FAILED || !r) {
    if (m != MAP_FAILED)
      munmap(m, size + align);
    free(r);
    return E_OOM;
  }
  base = (uintptr_t)m;
  start = (base + align - 1) & ~(uintptr_t)(align - 1);
  if (ignored) {
    size_t room = align; /* the mapping is size + 2N: shift within it */
    start = start + ignored <= base + room ? start + ignored
                                           : start - ignored;
  }
  if (start > base)
    munmap(m, start - base);
  if (base + align > start)
    munmap((char *)start + size, base + align - start);
  r->base = (char *)start;
  r->size = size;
  pthread_mutex_lock(&mu);
  r->next = vreses;
  vreses = r;
  pthread_mutex_unlock(&mu);
  *ptr = r->base;
  return OK;
}

static int vm_free_range(void *ptr, size_t size) {
  int err = E_VALUE;
  pthread_mutex_lock(&mu);
  if (no_vmm_calls())
    err = E_NOT_SUPPORTED;
  else if (vm_fails("vmfree"))
    err = E_VALUE;
  else
    for (vres **link = &vreses; *link; link = &(*link)->next) {
      vres *r = *link;
      if (r->base != ptr || r->size != size)
        continue;
      for (vmapping *m = vmappings; m; m = m->next)
        if (m->addr >= r->base && m->addr < r->base + r->size)
          goto out; /* still mapped */
      *link = r->next;
      munmap(r->base, r->size);
      free(r);
      err = OK;
      break;
    }
out:
  pthread_mutex_unlock(&mu);
  return err;
}

static int vm_create(unsigned long long *handle, size_t size,
                     const void *prop, unsigned long long flags) {
  uint64_t mem = env_u64("FAKE_GPU_MEMORY", UINT64_C(1) << 30);
  vhandle *h;
  int dev, fd;
  slow();
  pthread_mutex_lock(&mu);
  if (no_vmm_calls()) {
    pthread_mutex_unlock(&mu);
    return E_NOT_SUPPORTED;
  }
  dev = prop_device(prop);
  if (!handle || dev < 0 || size == 0 || size % granularity() || flags) {
    pthread_mutex_unlock(&mu);
    return E_VALUE;
  }
  last_handles = seen_handles;
  last_rdma = seen_rdma;
  if (share_refused(last_handles, last_rdma)) {
    pthread_mutex_unlock(&mu);
    return E_NOT_SUPPORTED;
  }
  if (vm_fails("vmcreate") || size > mem - used[dev] ||
      size > create_max()) {
    pthread_mutex_unlock(&mu);
    return E_OOM;
  }
  fd = memfd_create("fakegpu-vm", MFD_CLOEXEC);
  h = calloc(1, sizeof *h);
  if (fd < 0 || !h || ftruncate(fd, (off_t)size) != 0) {
    if (fd >= 0)
      close(fd);
    free(h);
    pthread_mutex_unlock(&mu);
    return E_OOM;
  }
  h->magic = VHANDLE_MAGIC;
  h->fd = fd;
  h->device = dev;
  h->size = size;
  h->next = vhandles;
  vhandles = h;
  used[dev] += size;
  pthread_mutex_unlock(&mu);
  *handle = (unsigned long long)(uintptr_t)h;
  return OK;
}

/* The live allocation `handle` names, or NULL (the lock held). */
static vhandle *handle_of(unsigned long long handle) {
  for (vhandle *h = vhandles; h; h = h->next)
    if ((unsigned long long)(uintptr_t)h == handle && !h->released)
      return h;
  return NULL;
}

/* Frees h once released and unmapped (the lock held). */
static void handle_drop(vhandle *h) {
  if (!h->released || h->maps)
    return;
  for (vhandle **link = &vhandles; *link; link = &(*link)->next)
    if (*link == h) {
      *link = h->next;
      break;
    }
  used[h->device] -= h->size;
  close(h->fd);
  h->magic = 0;
  free(h);
}

static int vm_release(unsigned long long handle) {
  vhandle *h;
  int err = OK;
  pthread_mutex_lock(&mu);
  if (no_vmm_calls())
    err = E_NOT_SUPPORTED;
  else if (!(h = handle_of(handle)) || vm_fails("vmrelease"))
    err = E_VALUE;
  else {
    h->released = true;
    handle_drop(h);
  }
  pthread_mutex_unlock(&mu);
  return err;
}

/* The reservation holding [p, p + size) whole, or NULL (the lock held). */
static vres *res_of(const char *p, size_t size) {
  for (vres *r = vreses; r; r = r->next)
    if (p >= r->base && size <= r->size &&
        (size_t)(p - r->base) <= r->size - size)
      return r;
  return NULL;
}

static int vm_map(void *ptr, size_t size, size_t offset,
                  unsigned long long handle, unsigned long long flags) {
  size_t gran = granularity();
  char *p = ptr;
  vmapping *m;
  vhandle *h;
  int err = OK;
  pthread_mutex_lock(&mu);
  if (no_vmm_calls()) {
    err = E_NOT_SUPPORTED;
    goto out;
  }
#if defined(FAKE_HIP)
  /* ROCm's hipMemMap queues on the null stream and waits for it (clr
   * hip_vm.cpp): not while a capture runs; CUDA's cuMemMap has no capture
   * check (PyTorch maps expandable segments in captures) */
  if ((err = unsafe_call()) != OK)
    goto out;
#endif
  if (vmm_hollow()) { /* the command's status is never looked at */
    err = p && handle && size && !offset && !flags ? OK : E_VALUE;
    goto out;
  }
  h = handle_of(handle);
  if (!h || !p || size == 0 || size % gran || offset || flags ||
      size > h->size || !res_of(p, size) ||
      (uintptr_t)p % gran || vm_fails("vmmap")) {
    err = E_VALUE;
    goto out;
  }
  for (m = vmappings; m; m = m->next)
    if (p < m->addr + m->size && m->addr < p + size) {
      err = E_VALUE; /* mapped already */
      goto out;
    }
  m = malloc(sizeof *m);
  if (!m || mmap(p, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd, 0) ==
                MAP_FAILED) {
    free(m);
    err = E_OOM;
    goto out;
  }
  m->addr = p;
  m->size = size;
  m->h = h;
  m->access = 0; /* none until SetAccess */
  m->next = vmappings;
  vmappings = m;
  h->maps++;
out:
  pthread_mutex_unlock(&mu);
  return err;
}

/* The mapping starting at p, or NULL (the lock held). */
static vmapping *mapping_at(const char *p) {
  for (vmapping *m = vmappings; m; m = m->next)
    if (m->addr == p)
      return m;
  return NULL;
}

/* A copy by device `dev` touching [p, p + size) faults: part of it is
 * mapped, and that mapping gives dev no access (the lock held). */
static bool copy_faults(int dev, const void *p, size_t size) {
  const char *c = p;
  for (vmapping *m = vmappings; m; m = m->next)
    if (c < m->addr + m->size && m->addr < c + size &&
        !(m->access & (UINT64_C(1) << (dev & 63))))
      return true;
  return false;
}

static int vm_set_access(void *ptr, size_t size, const vaccess *desc,
                         size_t count) {
  char *p = ptr, *at;
  int err = OK;
  pthread_mutex_lock(&mu);
  if (no_vmm_calls()) {
    err = E_NOT_SUPPORTED;
    goto out;
  }
  if (!p || size == 0 || !desc || count == 0 || vm_fails("vmaccess")) {
    err = E_VALUE;
    goto out;
  }
  if (vmm_hollow()) /* rocm-6.0.2: the arguments checked, nothing done */
    goto out;
  for (size_t i = 0; i < count; i++)
    if (desc[i].location.type != 1 || desc[i].location.id < 0 ||
        desc[i].location.id >= devices() ||
        (desc[i].flags != 0 && desc[i].flags != 1 && desc[i].flags != 3)) {
      err = E_VALUE;
      goto out;
    }
  /* whole mappings, back to back, each given its device's access */
  for (at = p; at < p + size;) {
    vmapping *m = mapping_at(at);
    const vaccess *mine = NULL;
    if (!m || m->size > (size_t)(p + size - at)) {
      err = E_VALUE;
      goto out;
    }
    for (size_t i = 0; i < count; i++)
      if (desc[i].location.id == m->h->device)
        mine = &desc[i];
      else if (!peers(desc[i].location.id, m->h->device)) {
        err = E_BADDEV; /* no peer access between the two */
        goto out;
      }
    if (!mine) {
      err = E_VALUE;
      goto out;
    }
    at += m->size;
  }
  for (at = p; at < p + size;) {
    vmapping *m = mapping_at(at);
    int f = 0, prot;
    for (size_t i = 0; i < count; i++) {
      uint64_t bit = UINT64_C(1) << (desc[i].location.id & 63);
      if (desc[i].location.id == m->h->device)
        f = desc[i].flags;
      m->access = desc[i].flags ? m->access | bit : m->access & ~bit;
    }
    prot = f == 3 ? PROT_READ | PROT_WRITE : f == 1 ? PROT_READ : PROT_NONE;
    if (mprotect(m->addr, m->size, prot) != 0) {
      err = E_VALUE;
      goto out;
    }
    at += m->size;
  }
out:
  pthread_mutex_unlock(&mu);
  return err;
}

static int vm_unmap(void *ptr, size_t size) {
  char *p = ptr, *at;
  int err = OK;
  pthread_mutex_lock(&mu);
  if (no_vmm_calls()) {
    err = E_NOT_SUPPORTED;
    goto out;
  }
  if (!p || size == 0 || vm_fails("vmunmap")) {
    err = E_VALUE;
    goto out;
  }
  for (at = p; at < p + size;) { /* whole mappings, back to back */
    vmapping *m = mapping_at(at);
    if (!m || m->size > (size_t)(p + size - at)) {
      err = E_VALUE;
      goto out;
    }
    at += m->size;
  }
  /* an unmap synchronizes (ROCm waits for every stream; CUDA documents
   * cuMemUnmap as synchronous, and PyTorch never unmaps in a capture):
   * a potentially unsafe call while a capture runs */
  if ((err = unsafe_call()) != OK)
    goto out;
#if defined(FAKE_HIP)
  /* hipMemUnmap waits for the null stream and the blocking streams only
   * (clr hip_vm.cpp queues it on the null stream; hip_device.cpp
   * WaitActiveStreams skips non-blocking ones): a copy still queued on a
   * non-blocking stream runs after the unmap, and faults */
  run(&default_stream, UINT64_MAX);
  for (fstream *o = streams; o; o = o->next)
    if (!(o->flags & 1))
      run(o, UINT64_MAX);
#endif
  for (at = p; at < p + size;) {
    vmapping *m = mapping_at(at);
    for (vmapping **link = &vmappings; *link; link = &(*link)->next)
      if (*link == m) {
        *link = m->next;
        break;
      }
    (void)mmap(m->addr, m->size, PROT_NONE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    at += m->size;
    m->h->maps--;
    handle_drop(m->h);
    free(m);
  }
out:
  pthread_mutex_unlock(&mu);
  return err;
}

#if defined(FAKE_HIP)
EXPORT int hipMemGetAllocationGranularity(size_t *g, const void *prop,
                                          int option) {
  return vm_granularity(g, prop, option);
}
EXPORT int hipMemAddressReserve(void **ptr, size_t size, size_t align,
                                void *addr, unsigned long long flags) {
  return vm_reserve(ptr, size, align, addr, flags);
}
EXPORT int hipMemAddressFree(void *ptr, size_t size) {
  return vm_free_range(ptr, size);
}
EXPORT int hipMemCreate(void **handle, size_t size, const void *prop,
                        unsigned long long flags) {
  unsigned long long h = 0;
  int err = vm_create(&h, size, prop, flags);
  if (err == OK)
    *handle = (void *)(uintptr_t)h;
  return err;
}
EXPORT int hipMemRelease(void *handle) {
  return vm_release((unsigned long long)(uintptr_t)handle);
}
EXPORT int hipMemMap(void *ptr, size_t size, size_t offset, void *handle,
                     unsigned long long flags) {
  return vm_map(ptr, size, offset, (unsigned long long)(uintptr_t)handle,
                flags);
}
EXPORT int hipMemSetAccess(void *ptr, size_t size, const void *desc,
                           size_t count) {
  return vm_set_access(ptr, size, desc, count);
}
EXPORT int hipMemUnmap(void *ptr, size_t size) {
  return vm_unmap(ptr, size);
}
#else
/* The driver's calls (CUresult; CUdeviceptr is unsigned long long),
 * reached through the entry points below only. */
static int cu_mem_address_reserve(unsigned long long *ptr, size_t size,
                                  size_t align, unsigned long long addr,
                                  unsigned long long flags) {
  void *p = NULL;
  int err = vm_reserve(&p, size, align, (void *)(uintptr_t)addr, flags);
  if (err == OK)
    *ptr = (unsigned long long)(uintptr_t)p;
  return err;
}
static int cu_mem_address_free(unsigned long long ptr, size_t size) {
  return vm_free_range((void *)(uintptr_t)ptr, size);
}
static int cu_mem_map(unsigned long long ptr, size_t size, size_t offset,
                      unsigned long long handle, unsigned long long flags) {
  return vm_map((void *)(uintptr_t)ptr, size, offset, handle, flags);
}
static int cu_mem_set_access(unsigned long long ptr, size_t size,
                             const vaccess *desc, size_t count) {
  return vm_set_access((void *)(uintptr_t)ptr, size, desc, count);
}
static int cu_mem_unmap(unsigned long long ptr, size_t size) {
  return vm_unmap((void *)(uintptr_t)ptr, size);
}
static int cu_device_get(int *dev, int ordinal) {
  if (!dev)
    return E_VALUE;
  if (ordinal < 0 || ordinal >= devices())
    return E_BADDEV;
  *dev = ordinal;
  return OK;
}
static int cu_device_get_attribute(int *value, int attr, int dev) {
  if (!value)
    return E_VALUE;
  if (dev < 0 || dev >= devices())
    return E_BADDEV;
  if (attr == 103 || attr == 110) { /* POSIX handles, RDMA with VMM */
    const char *v = getenv("FAKE_GPU_VM_SHARE");
    *value = !(v && !strcmp(v, "none"));
    return OK;
  }
  if (attr != 102) /* VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
    return E_VALUE;
  *value = !no_vmm_attr();
  return OK;
}
/* The context calls (see the head of this file). */
static int ctx_dev(const void *ctx) { /* its device, or -1 */
  const char *c = ctx;
  return c >= ctx_obj && c < ctx_obj + devices() && ctx_live[c - ctx_obj]
             ? (int)(c - ctx_obj)
             : -1;
}
static int cu_ctx_get_current(void **ctx) {
  if (!ctx)
    return E_VALUE;
  *ctx = ctx_depth ? &ctx_obj[ctx_top[ctx_depth - 1]] : NULL;
  return OK;
}
static int cu_ctx_push(void *ctx) {
  int dev;
  pthread_mutex_lock(&mu);
  dev = ctx_dev(ctx);
  pthread_mutex_unlock(&mu);
  if (dev < 0 || ctx_depth == 8)
    return dev < 0 ? E_CONTEXT : E_OOM;
  ctx_top[ctx_depth++] = dev;
  return OK;
}
static int cu_ctx_pop(void **ctx) {
  if (!ctx_depth)
    return E_CONTEXT;
  ctx_depth--;
  if (ctx)
    *ctx = &ctx_obj[ctx_top[ctx_depth]];
  return OK;
}
static int cu_primary_retain(void **ctx, int dev) {
  int err;
  if (!ctx)
    return E_VALUE;
  if (dev < 0 || dev >= devices())
    return E_BADDEV;
  pthread_mutex_lock(&mu);
  if ((err = ctx_create(dev)) == OK) {
    ctx_refs[dev]++;
    *ctx = &ctx_obj[dev];
  }
  pthread_mutex_unlock(&mu);
  return err;
}
static int cu_primary_release(int dev) {
  int err = E_CONTEXT;
  if (dev < 0 || dev >= devices())
    return E_BADDEV;
  pthread_mutex_lock(&mu);
  if (ctx_refs[dev] > 0) {
    ctx_refs[dev]--; /* the context lives on: the runtime holds it too */
    err = OK;
  }
  pthread_mutex_unlock(&mu);
  return err;
}
static int cu_primary_state(int dev, unsigned *flags, int *active) {
  if (!flags || !active)
    return E_VALUE;
  if (dev < 0 || dev >= devices())
    return E_BADDEV;
  pthread_mutex_lock(&mu);
  *flags = 0;
  *active = ctx_live[dev];
  pthread_mutex_unlock(&mu);
  return OK;
}
static int cu_stream_get_ctx(void *stream, void **ctx) {
  fstream *s;
  int err = OK;
  if (!ctx)
    return E_VALUE;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  if (!s)
    err = E_HANDLE;
  else if (s != &default_stream)
    *ctx = &ctx_obj[s->device];
  else if (!ctx_depth) /* the legacy stream: the current context's */
    err = E_CONTEXT;
  else
    *ctx = &ctx_obj[ctx_top[ctx_depth - 1]];
  pthread_mutex_unlock(&mu);
  return err;
}
static int cu_ctx_get_device(int *dev) {
  if (!dev)
    return E_VALUE;
  if (!ctx_depth)
    return E_CONTEXT;
  *dev = ctx_top[ctx_depth - 1];
  return OK;
}
static int cu_get_error_name(int err, const char **name) {
  static const struct {
    int err;
    const char *name;
  } names[] = {{OK, "CUDA_SUCCESS"},
               {E_VALUE, "CUDA_ERROR_INVALID_VALUE"},
               {E_OOM, "CUDA_ERROR_OUT_OF_MEMORY"},
               {E_BADDEV, "CUDA_ERROR_INVALID_DEVICE"},
               {E_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"}};
  if (!name)
    return E_VALUE;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (names[i].err == err) {
      *name = names[i].name;
      return OK;
    }
  *name = NULL;
  return E_VALUE;
}
static int cu_get_error_string(int err, const char **text) {
  if (!text)
    return E_VALUE;
  *text = err == OK ? "no error" : "a fake driver's error";
  return OK;
}

/* The driver's calls by name, with the CUDA version that introduced each. */
static const struct {
  const char *name;
  unsigned since;
  void (*fn)(void);
} driver_calls[] = {
    {"cuMemAddressReserve", 10020, (void (*)(void))cu_mem_address_reserve},
    {"cuMemAddressFree", 10020, (void (*)(void))cu_mem_address_free},
    {"cuMemCreate", 10020, (void (*)(void))vm_create},
    {"cuMemRelease", 10020, (void (*)(void))vm_release},
    {"cuMemMap", 10020, (void (*)(void))cu_mem_map},
    {"cuMemSetAccess", 10020, (void (*)(void))cu_mem_set_access},
    {"cuMemUnmap", 10020, (void (*)(void))cu_mem_unmap},
    {"cuMemGetAllocationGranularity", 10020,
     (void (*)(void))vm_granularity},
    {"cuDeviceGet", 2000, (void (*)(void))cu_device_get},
    {"cuDeviceGetAttribute", 2000, (void (*)(void))cu_device_get_attribute},
    {"cuGetErrorName", 6000, (void (*)(void))cu_get_error_name},
    {"cuGetErrorString", 6000, (void (*)(void))cu_get_error_string},
    {"cuCtxGetCurrent", 4000, (void (*)(void))cu_ctx_get_current},
    {"cuCtxPushCurrent", 4000, (void (*)(void))cu_ctx_push},
    {"cuCtxPopCurrent", 4000, (void (*)(void))cu_ctx_pop},
    {"cuDevicePrimaryCtxRetain", 7000, (void (*)(void))cu_primary_retain},
    {"cuDevicePrimaryCtxRelease", 11000, (void (*)(void))cu_primary_release},
    {"cuDevicePrimaryCtxGetState", 7000, (void (*)(void))cu_primary_state},
    {"cuStreamGetCtx", 9020, (void (*)(void))cu_stream_get_ctx},
    {"cuCtxGetDevice", 2000, (void (*)(void))cu_ctx_get_device},
};

/* As NVIDIA's libcuda.so.1 serves them (loaded as the driver library,
 * HIPPO_CUDA_DRIVER_LIBRARY): cuInit and the calls by name. */
EXPORT int cuInit(unsigned flags) {
  (void)flags;
  return OK;
}
#define DRIVER_EXPORT(name, fn)                                                \
  EXPORT __typeof__(fn) name __attribute__((alias(#fn)))
DRIVER_EXPORT(cuMemAddressReserve, cu_mem_address_reserve);
DRIVER_EXPORT(cuMemAddressFree, cu_mem_address_free);
DRIVER_EXPORT(cuMemCreate, vm_create);
DRIVER_EXPORT(cuMemRelease, vm_release);
DRIVER_EXPORT(cuMemMap, cu_mem_map);
DRIVER_EXPORT(cuMemSetAccess, cu_mem_set_access);
DRIVER_EXPORT(cuMemUnmap, cu_mem_unmap);
DRIVER_EXPORT(cuMemGetAllocationGranularity, vm_granularity);
DRIVER_EXPORT(cuDeviceGet, cu_device_get);
DRIVER_EXPORT(cuDeviceGetAttribute, cu_device_get_attribute);
DRIVER_EXPORT(cuGetErrorName, cu_get_error_name);
DRIVER_EXPORT(cuGetErrorString, cu_get_error_string);

/* cudaDriverEntryPointQueryResult: 0 found, 1 no such symbol, 2 the
 * version asked predates it. */
static int entry(const char *symbol, void **fn, unsigned version,
                 int *status) {
  const char *mode = getenv("FAKE_GPU_ENTRY");
  int st = 1;
  if (!symbol || !fn)
    return E_VALUE;
  *fn = NULL;
  if (!mode || strcmp(mode, "none"))
    for (size_t i = 0; i < sizeof driver_calls / sizeof *driver_calls; i++)
      if (!strcmp(driver_calls[i].name, symbol)) {
        st = version < driver_calls[i].since ? 2 : 0;
        if (st == 0)
          memcpy(fn, &driver_calls[i].fn, sizeof *fn);
        break;
      }
  if (status)
    *status = st;
  return OK;
}

EXPORT int cudaGetDriverEntryPointByVersion(const char *symbol, void **fn,
                                            unsigned version,
                                            unsigned long long flags,
                                            int *status) {
  const char *mode = getenv("FAKE_GPU_ENTRY");
  (void)flags;
  if (mode && !strcmp(mode, "legacy"))
    return E_NOT_SUPPORTED;
  if (version > VERSION) /* newer than the driver: documented */
    return E_VALUE;
  return entry(symbol, fn, version, status);
}

/* CUDA 12's (CUDA 11's had no status: a caller passing one still works) */
EXPORT int cudaGetDriverEntryPoint(const char *symbol, void **fn,
                                   unsigned long long flags, int *status) {
  (void)flags;
  return entry(symbol, fn, VERSION, status);
}
#endif

/* Unloaded (hippo__gpu_rt_forget dlcloses it): the default stream's queue
 * and the VMM records go with it, so a leak checker sees none of ours. */
__attribute__((destructor)) static void fake_unload(void) {
  free(default_stream.ops);
  default_stream.ops = NULL;
  default_stream.cap = default_stream.queued = default_stream.done = 0;
  while (vmappings) {
    vmapping *m = vmappings;
    vmappings = m->next;
    free(m);
  }
  while (vhandles) {
    vhandle *h = vhandles;
    vhandles = h->next;
    close(h->fd);
    free(h);
  }
  while (vreses) {
    vres *r = vreses;
    vreses = r->next;
    free(r);
  }
}
