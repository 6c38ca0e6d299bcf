/* backend_hip.c -- HIP: a real GPU through a runtime loaded at run time
 * (gpu_rt.h): AMD's HIP runtime, or on NVIDIA GPUs the CUDA runtime that
 * HIP's NVIDIA platform maps its calls onto.  This file opens a device,
 * holds the function table, destroys the backend, makes the backend's
 * device current for a call and counts calls; the rest is split by
 * concept (backend_hip.h, which also states gpu_backend's invariant):
 * pages and memory info (backend_hip_pages.c), streams, copies, events
 * and captures (backend_hip_streams.c), virtual memory
 * (backend_hip_vm.c, backend_hip_vm_driver.c), emulation slots
 * (backend_hip_emu.c).
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
 *  - name and architecture (device_info), from the runtime;
 *  - virtual memory: decided at open (hippo__hip_vm_probe,
 *    backend_hip_vm_driver.c): where the runtime lacks a call, the device
 *    says it has none or the runtime answers NotSupported, the device's
 *    ops table has no vm_* (gpu_ops), so layouts fall back.
 */
#include <config.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_hip.h"

static const char *const kind_names[HIPPO_CALL_KINDS] = {
    "page_alloc", "page_free", "copy", "stream_sync", "event", "capture_query",
    "vm_range", "vm_map", "vm_unmap", "vm_access"};

/* Counts a call of `kind` (named `name` in the message); an injected fault
 * makes it fail. */
hippo_status hippo__hip_call_named(gpu_backend *g, hippo_call_kind kind,
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

hippo_status hippo__hip_call(gpu_backend *g, hippo_call_kind kind) {
  return hippo__hip_call_named(g, kind, kind_names[kind]);
}

/* ---- the thread's current device ------------------------------------------ */

/* How the device is made current and the thread's put back: dev_scope
 * (backend_hip.h, with leave and begin). */
hippo_status hippo__hip_enter(gpu_backend *g, const char *why, dev_scope *sc) {
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
  return hippo__hip_set_device(g, why, sc, cur);
}

/* SetDevice to g's device, the thread's device before being `cur` (-1:
 * unknown); the scope puts back cur on leaving where it was another. */
hippo_status hippo__hip_set_device(gpu_backend *g, const char *why,
                                   dev_scope *sc, int cur) {
  int err = g->rt->set_device(g->ordinal);
  if (err != HIPPO__GPU_SUCCESS)
    return hippo__error_wrap(hippo__gpu_fail(g->rt, err, "SetDevice", NULL),
                             "%s on %s device %d", why, g->rt->name,
                             (int)g->ordinal);
  sc->prev = cur;
  sc->restore = cur >= 0 && cur != g->ordinal;
  return HIPPO_SUCCESS;
}

static void gpu_destroy(hippo__backend *be) {
  gpu_backend *g = gpu_of(be);
  dev_scope sc;
  /* What the caller left -- emulated streams, pages -- goes back to the
   * runtime, as HOST's does.  destroy reports nothing, so a failure here
   * only leaves that resource to the runtime's own teardown. */
  if ((g->nstreams || g->io) &&
      hippo__hip_enter(g, "destroy", &sc) == HIPPO_SUCCESS) {
    for (size_t i = 0; i < g->nstreams; i++) /* its work finishes first */
      (void)g->rt->stream_destroy(g->streams[i]);
    if (g->io)
      (void)g->rt->stream_destroy(g->io);
    (void)leave(g, &sc, HIPPO_SUCCESS);
  }
  hippo__hip_vm_fini(g); /* granules, then ranges */
  if (g->npages && hippo__hip_enter(g, "destroy", &sc) == HIPPO_SUCCESS) {
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

/* Two tables: without virtual memory (vm_* NULL, so layouts fall back) and
 * with it; hippo__hip_vm_probe chooses one per device at open. */
#define GPU_OPS_COMMON                                                         \
  .page_alloc = hippo__hip_page_alloc,                                         \
  .page_free = hippo__hip_page_free, .copy = hippo__hip_copy,                  \
  .stream_sync = hippo__hip_stream_sync,                                       \
  .event_create = hippo__hip_event_create,                                     \
  .event_record = hippo__hip_event_record,                                     \
  .event_wait = hippo__hip_event_wait,                                         \
  .event_query = hippo__hip_event_query,                                       \
  .event_destroy = hippo__hip_event_destroy,                                   \
  .capture_status = hippo__hip_capture_status,                                 \
  .stream_check = hippo__hip_stream_check,                                     \
  .mem_info = hippo__hip_mem_info, .destroy = gpu_destroy,                     \
  .emu_stream_check = hippo__hip_emu_stream_check,                             \
  .emu_stream_create = hippo__hip_emu_stream_create,                           \
  .emu_stream_destroy = hippo__hip_emu_stream_destroy,                         \
  .emu_capture_begin = hippo__hip_emu_capture_begin,                           \
  .emu_capture_end = hippo__hip_emu_capture_end,                               \
  .emu_inject_fault = hippo__hip_emu_inject_fault,                             \
  .emu_read = hippo__hip_emu_read, .emu_write = hippo__hip_emu_write,          \
  .emu_counters = hippo__hip_emu_counters

static const hippo__backend_ops gpu_ops = {GPU_OPS_COMMON};

static const hippo__backend_ops gpu_vm_ops = {
    GPU_OPS_COMMON,
    .vm_granularity = hippo__hip_vm_granularity,
    .vm_reserve = hippo__hip_vm_reserve,
    .vm_release = hippo__hip_vm_release,
    .vm_map = hippo__hip_vm_map,
    .vm_unmap = hippo__hip_vm_unmap,
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
 * retained (created if none: hippo works on this device) for
 * hippo__hip_enter. */
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
    st = hippo__hip_mem_info(&g->base, NULL, &tot);
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
  hippo__hip_vm_probe(g);
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
