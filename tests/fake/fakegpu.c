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
 *
 * This file holds what the others lean on: the lock, the environment's
 * readers, the thread's last error, devices and contexts.  fakegpu.h lists
 * the other files and declares what they share.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fakegpu.h"

pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int current;     /* the runtime device: SetDevice's */
_Thread_local int fake_ctx_top[8];    /* the context stack: devices */
_Thread_local int fake_ctx_depth;
bool fake_ctx_live[64];               /* primary contexts (under fake_mu) */
static _Thread_local int last_error;  /* GetLastError's */

/* An answer of a call that keeps the thread's last error. */
int fake_answer(int err) {
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

uint64_t fake_env_u64(const char *name, uint64_t dflt) {
  const char *v = getenv(name);
  return v && *v ? strtoull(v, NULL, 0) : dflt;
}

int fake_devices(void) { return (int)fake_env_u64("FAKE_GPU_DEVICES", 1); }

int fake_version(void) {
  return (int)fake_env_u64("FAKE_GPU_VERSION", VERSION);
}

/* FAKE_GPU_NO_VMM: the attribute says none ("1"), or the calls answer
 * NotSupported ("1" or "calls"). */
bool fake_no_vmm_attr(void) {
  const char *v = getenv("FAKE_GPU_NO_VMM");
  return v && *v && strcmp(v, "0") && strcmp(v, "calls");
}
bool fake_no_vmm_calls(void) {
  const char *v = getenv("FAKE_GPU_NO_VMM");
  return v && *v && strcmp(v, "0");
}

const char *fake_fail_mode(void) {
  const char *v = getenv("FAKE_GPU_FAIL");
  return v ? v : "";
}

/* A slow driver call (FAKE_GPU_SLOW_US), outside the lock. */
void fake_slow(void) {
  uint64_t us = fake_env_u64("FAKE_GPU_SLOW_US", 0);
  if (us) {
    struct timespec t = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    nanosleep(&t, NULL);
  }
}

/* ---- devices ----------------------------------------------------------------- */

EXPORT int FN(GetDeviceCount)(int *count) {
  if (!strcmp(fake_fail_mode(), "nodevice"))
    return E_NODEV;
  if (!strcmp(fake_fail_mode(), "driver"))
    return E_DRIVER;
  if (!strcmp(fake_fail_mode(), "stub"))
    return 34; /* cudaErrorStubLibrary */
  if (!strcmp(fake_fail_mode(), "unavailable"))
    return 46; /* cudaErrorDevicesUnavailable */
  *count = fake_devices();
  return *count ? OK : E_NODEV;
}

/* ---- contexts (see the head of this file) ---- */

/* The device the thread's runtime calls go to. */
int fake_dev_now(void) {
  return fake_ctx_depth ? fake_ctx_top[fake_ctx_depth - 1] : current;
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
int fake_ctx_create(int dev) {
  if (!fake_ctx_live[dev] && taken(dev))
    return E_UNAVAILABLE;
  fake_ctx_live[dev] = true;
  return OK;
}

/* A context for a runtime call (the lock held): the thread's current one,
 * else its runtime device's, created and made current. */
int fake_need_ctx(void) {
  int err = fake_ctx_depth ? OK : fake_ctx_create(current);
  if (err == OK && !fake_ctx_depth)
    fake_ctx_top[fake_ctx_depth++] = current;
  return err;
}

EXPORT int FN(GetDevice)(int *dev) {
  *dev = fake_dev_now();
  return OK;
}

EXPORT int FN(SetDevice)(int dev) {
  int err;
  if (dev < 0 || dev >= fake_devices())
    return E_BADDEV;
  pthread_mutex_lock(&fake_mu);
  err = fake_ctx_create(dev);
  pthread_mutex_unlock(&fake_mu);
  if (err != OK)
    return err;
  current = dev;
  fake_ctx_top[fake_ctx_depth ? fake_ctx_depth - 1 : fake_ctx_depth++] = dev;
  return OK;
}

EXPORT int FN(DeviceGetAttribute)(int *value, int attr, int dev) {
  if (dev < 0 || dev >= fake_devices())
    return E_BADDEV;
  if (attr == ATTR_TEX)
    *value = (int)fake_env_u64("FAKE_GPU_ALIGNMENT", 256);
  else if (attr == ATTR_MODE)
    *value = !strcmp(fake_fail_mode(), "prohibited") ? 2 : taken(dev) ? 3 : 0;
  else if (attr == ATTR_MAJOR)
    *value = 9;
  else if (attr == ATTR_MINOR)
    *value = 4;
#if defined(FAKE_HIP)
  else if (attr == 89 && fake_version() >= 50300000) /* VMM supported */
    *value = !fake_no_vmm_attr();
#endif
  else
    return E_VALUE;
  return OK;
}

/* Whether device `dev` can access device `peer`'s memory: FAKE_GPU_PEER
 * "1" makes every two devices peers (default: none are). */
bool fake_peers(int dev, int peer) {
  const char *v = getenv("FAKE_GPU_PEER");
  return dev != peer && v && !strcmp(v, "1");
}

EXPORT int FN(DeviceCanAccessPeer)(int *can, int dev, int peer) {
  if (!can)
    return E_VALUE;
  if (dev < 0 || dev >= fake_devices() || peer < 0 || peer >= fake_devices())
    return E_BADDEV;
  *can = fake_peers(dev, peer);
  return OK;
}

EXPORT int FN(MemGetInfo)(size_t *free_bytes, size_t *total) {
  uint64_t mem = fake_env_u64("FAKE_GPU_MEMORY", UINT64_C(1) << 30);
  int err;
  pthread_mutex_lock(&fake_mu);
  if ((err = fake_need_ctx()) == OK) {
    *total = mem;
    *free_bytes = mem - fake_used[fake_dev_now()];
  }
  pthread_mutex_unlock(&fake_mu);
  return err;
}

EXPORT int FN(RuntimeGetVersion)(int *v) {
  *v = fake_version();
  return OK;
}

#if defined(FAKE_HIP)
EXPORT int hipDeviceGetName(char *name, int len, int dev) {
  if (dev < 0 || dev >= fake_devices())
    return E_BADDEV;
  snprintf(name, (size_t)len, "%s %d", NAME, dev);
  return OK;
}
#else
EXPORT int cudaGetDeviceProperties(void *props, int dev) {
  if (dev < 0 || dev >= fake_devices())
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
