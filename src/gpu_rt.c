/* gpu_rt.c -- loading a GPU runtime at run time (gpu_rt.h). */
#include <config.h>

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "gpu_rt.h"

/* ---- what to load ---------------------------------------------------------- */

static const char *const hip_libs[] = {
    "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5",
    "libamdhip64.so", "/opt/rocm/lib/libamdhip64.so", NULL};
static const char *const cuda_libs[] = {
    "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so",
    "/usr/local/cuda/lib64/libcudart.so", NULL};

_Static_assert(sizeof hip_libs <= sizeof cuda_libs,
              "hippo__gpu_rt_load's list holds either flavor's");

/* The file names of each flavor's runtime begin so (the list above). */
static const char hip_stem[] = "libamdhip64.so";
static const char cuda_stem[] = "libcudart.so";

/* A runtime the process has loaded already (a framework's: PyTorch's
 * wheels load libcudart.so.12 or .13 from their own folder, ROCm's
 * libamdhip64.so.6 or .7): its path, the first loaded object whose file
 * name begins with the flavor's stem, so hippo calls the runtime the
 * framework calls (a stream of one HIP runtime is no stream of another)
 * instead of loading a second one. */
typedef struct loaded_find {
  const char *stem;
  char *path; /* where the path goes, cap bytes */
  size_t cap;
} loaded_find;

static int loaded_one(struct dl_phdr_info *info, size_t size, void *arg) {
  loaded_find *f = arg;
  const char *name = info->dlpi_name, *base;
  size_t n = strlen(f->stem);
  (void)size;
  if (!name || !*name)
    return 0;
  base = strrchr(name, '/');
  base = base ? base + 1 : name;
  if (strncmp(base, f->stem, n) != 0 || (base[n] != '\0' && base[n] != '.'))
    return 0;
  snprintf(f->path, f->cap, "%s", name);
  return 1;
}

static bool loaded_runtime(const char *stem, char *path, size_t cap) {
  loaded_find f = {stem, path, cap};
  return dl_iterate_phdr(loaded_one, &f) != 0;
}

/* One call: its name in each runtime, where it goes, whether required. */
typedef struct sym {
  const char *hip, *cuda;
  size_t at;
  bool required;
} sym;

#define AT(field) offsetof(hippo__gpu_rt, field)
static const sym syms[] = {
    {"hipGetDeviceCount", "cudaGetDeviceCount", AT(get_device_count), true},
    {"hipGetDevice", "cudaGetDevice", AT(get_device), true},
    {"hipSetDevice", "cudaSetDevice", AT(set_device), true},
    {"hipMalloc", "cudaMalloc", AT(malloc_), true},
    {"hipFree", "cudaFree", AT(free_), true},
    {"hipMemcpy", "cudaMemcpy", AT(memcpy_), true},
    {"hipMemcpyAsync", "cudaMemcpyAsync", AT(memcpy_async), true},
    {"hipStreamSynchronize", "cudaStreamSynchronize", AT(stream_sync), true},
    {"hipStreamCreateWithFlags", "cudaStreamCreateWithFlags",
     AT(stream_create), true},
    {"hipStreamDestroy", "cudaStreamDestroy", AT(stream_destroy), true},
    {"hipEventCreateWithFlags", "cudaEventCreateWithFlags", AT(event_create),
     true},
    {"hipEventRecord", "cudaEventRecord", AT(event_record), true},
    {"hipEventQuery", "cudaEventQuery", AT(event_query), true},
    {"hipEventSynchronize", "cudaEventSynchronize", AT(event_sync), true},
    {"hipEventDestroy", "cudaEventDestroy", AT(event_destroy), true},
    {"hipStreamIsCapturing", "cudaStreamIsCapturing",
     AT(stream_is_capturing), true},
    {"hipStreamGetCaptureInfo", "cudaStreamGetCaptureInfo",
     AT(stream_capture_info), true},
    {"hipStreamBeginCapture", "cudaStreamBeginCapture", AT(begin_capture),
     true},
    {"hipStreamEndCapture", "cudaStreamEndCapture", AT(end_capture), true},
    {"hipGraphDestroy", "cudaGraphDestroy", AT(graph_destroy), true},
    {"hipMemGetInfo", "cudaMemGetInfo", AT(mem_info), true},
    {"hipDeviceGetAttribute", "cudaDeviceGetAttribute",
     AT(device_attribute), true},
    {"hipGetErrorName", "cudaGetErrorName", AT(error_name), false},
    {"hipGetErrorString", "cudaGetErrorString", AT(error_string), false},
    {"hipRuntimeGetVersion", "cudaRuntimeGetVersion", AT(runtime_version),
     false},
    {"hipStreamGetDevice", "cudaStreamGetDevice", AT(stream_device), false},
    {"hipDeviceGetName", NULL, AT(device_name), false},
    {NULL, "cudaGetDeviceProperties", AT(device_properties), false},
    {"hipThreadExchangeStreamCaptureMode",
     "cudaThreadExchangeStreamCaptureMode", AT(exchange_capture_mode), false},
    {"hipGetLastError", "cudaGetLastError", AT(get_last_error), false},
    {"hipDeviceSynchronize", "cudaDeviceSynchronize", AT(device_sync), false},
    {"hipDeviceCanAccessPeer", "cudaDeviceCanAccessPeer",
     AT(device_can_access_peer), false},
};

/* The virtual-memory calls (gpu_rt.h): HIP's names are the runtime's
 * exports, CUDA's the driver's, asked of the runtime's entry point.
 * `required` ones make virtual memory: without one, vm.missing names it. */
static const sym vm_syms[] = {
    {"hipMemAddressReserve", "cuMemAddressReserve", AT(vm.reserve), true},
    {"hipMemAddressFree", "cuMemAddressFree", AT(vm.free_range), true},
    {"hipMemCreate", "cuMemCreate", AT(vm.create), true},
    {"hipMemRelease", "cuMemRelease", AT(vm.release), true},
    {"hipMemMap", "cuMemMap", AT(vm.map), true},
    {"hipMemSetAccess", "cuMemSetAccess", AT(vm.set_access), true},
    {"hipMemUnmap", "cuMemUnmap", AT(vm.unmap), true},
    {"hipMemGetAllocationGranularity", "cuMemGetAllocationGranularity",
     AT(vm.granularity), true},
    {NULL, "cuDeviceGet", AT(vm.device_get), true},
    {NULL, "cuDeviceGetAttribute", AT(vm.device_attribute), true},
    {NULL, "cuGetErrorName", AT(vm.error_name), false},
    {NULL, "cuGetErrorString", AT(vm.error_string), false},
};

/* CUDA's context calls (gpu_rt.h hippo__gpu_ctx_calls): the entry point
 * only, so an old driver library's unversioned ABI never serves them. */
static const sym ctx_syms[] = {
    {NULL, "cuCtxGetCurrent", AT(ctx.get_current), false},
    {NULL, "cuCtxPushCurrent", AT(ctx.push), false},
    {NULL, "cuCtxPopCurrent", AT(ctx.pop), false},
    {NULL, "cuDevicePrimaryCtxRetain", AT(ctx.primary_retain), false},
    {NULL, "cuDevicePrimaryCtxRelease", AT(ctx.primary_release), false},
    {NULL, "cuStreamGetCtx", AT(ctx.stream_ctx), false},
    {NULL, "cuCtxGetDevice", AT(ctx.get_device), false},
};
#undef AT

/* ---- the process-wide cache ------------------------------------------------- */

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static hippo__gpu_rt loaded[2];      /* [flavor - 1] */
static const hippo__gpu_rt *ready[2]; /* set once filled; unset only by
                                         hippo__gpu_rt_forget (tests) */
static void *libs[2];                 /* ready[i]'s dlopen handle */
static void *driver_lib;              /* CUDA's driver library, when the
                                         runtime had no way to its calls */

/* dlsym's object pointer read as a function pointer, stored at `at`. */
static void store(hippo__gpu_rt *rt, size_t at, void *obj) {
  union {
    void *obj;
    void (*fn)(void);
  } u;
  u.obj = obj;
  memcpy((char *)rt + at, &u.fn, sizeof u.fn);
}

/* Fills rt from lib; false (why in `why`) when a required call is missing. */
static bool fill(hippo__gpu_rt *rt, void *lib, char *why, size_t len) {
  for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
    const char *name =
        rt->flavor == HIPPO__GPU_HIP ? syms[i].hip : syms[i].cuda;
    void *obj = name ? dlsym(lib, name) : NULL;
    if (!obj && name && syms[i].required) {
      snprintf(why, len, "it has no %s", name);
      return false;
    }
    store(rt, syms[i].at, obj);
  }
  return true;
}

/* The CUDA runtime's two ways to the driver's calls. */
typedef int (*entry_by_version_fn)(const char *symbol, void **fn,
                                   unsigned version, unsigned long long flags,
                                   int *status);
typedef int (*entry_fn)(const char *symbol, void **fn,
                        unsigned long long flags, int *status);

/* dlsym's object pointer as a function pointer of type T. */
#define FN_OF(T, obj)                                                          \
  (((union {                                                                   \
     void *o;                                                                  \
     T f;                                                                      \
   }){.o = (obj)})                                                             \
       .f)

/* One driver call through the CUDA runtime: the versioned entry point
 * first, the older one second.  NULL (why in `why`) when neither gives
 * it. */
static void *driver_call(void *lib, const char *name, const char **via,
                         char *why, size_t len) {
  void *by_version = dlsym(lib, "cudaGetDriverEntryPointByVersion");
  void *legacy = dlsym(lib, "cudaGetDriverEntryPoint");
  void *fn = NULL;
  int err = 0, status = HIPPO__CUDA_ENTRY_FOUND;
  if (by_version) {
    err = FN_OF(entry_by_version_fn, by_version)(
        name, &fn, HIPPO__CUDA_ENTRY_VERSION, HIPPO__CUDA_ENTRY_DEFAULT,
        &status);
    if (err == HIPPO__GPU_SUCCESS && status == HIPPO__CUDA_ENTRY_FOUND && fn) {
      *via = "cudaGetDriverEntryPointByVersion";
      return fn;
    }
    snprintf(why, len, "%s (cudaGetDriverEntryPointByVersion answered %d, "
             "status %d)", name, err, status);
    fn = NULL;
  }
  if (legacy) {
    /* CUDA 11 takes no status: it stays "found", and fn says */
    status = HIPPO__CUDA_ENTRY_FOUND;
    err = FN_OF(entry_fn, legacy)(name, &fn, HIPPO__CUDA_ENTRY_DEFAULT,
                                   &status);
    if (err == HIPPO__GPU_SUCCESS && status == HIPPO__CUDA_ENTRY_FOUND && fn) {
      *via = "cudaGetDriverEntryPoint";
      return fn;
    }
    if (by_version)
      snprintf(why, len, "%s (cudaGetDriverEntryPointByVersion and "
               "cudaGetDriverEntryPoint answered %d, status %d)",
               name, err, status);
    else
      snprintf(why, len, "%s (cudaGetDriverEntryPoint answered %d, status "
               "%d)", name, err, status);
    return NULL;
  }
  if (!by_version)
    snprintf(why, len, "%s (the runtime has no cudaGetDriverEntryPoint: "
             "CUDA 11.3 or later has)", name);
  return NULL;
}

/* CUDA 11.0 to 11.2: the runtime has no entry point to the driver, so
 * the driver library itself serves its calls by name ($HIPPO_CUDA_DRIVER_
 * LIBRARY, else libcuda.so.1, which NVIDIA's driver installs), once
 * cuInit answered success (load_lock held).  NULL when it cannot. */
static void *driver_library(void) {
  typedef int (*init_fn)(unsigned flags);
  const char *env = getenv("HIPPO_CUDA_DRIVER_LIBRARY");
  void *lib, *init;
  if (driver_lib)
    return driver_lib;
  lib = dlopen(env && *env ? env : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return NULL;
  init = dlsym(lib, "cuInit");
  if (!init || FN_OF(init_fn, init)(0) != HIPPO__GPU_SUCCESS) {
    dlclose(lib);
    return NULL;
  }
  return driver_lib = lib;
}

/* Fills rt->vm (and on CUDA rt->ctx) from lib (never fails: a VMM call
 * not found leaves vm.missing naming it, and no virtual memory; a context
 * call not found is NULL). */
static void fill_vm(hippo__gpu_rt *rt, void *lib) {
  bool hip = rt->flavor == HIPPO__GPU_HIP;
  hippo__gpu_vm_calls *vm = &rt->vm;
  vm->prefix = hip ? "hip" : "cu";
  vm->via = hip ? "the runtime's exports" : "none";
  vm->missing[0] = '\0';
  for (size_t i = 0; i < sizeof vm_syms / sizeof *vm_syms; i++) {
    const char *name = hip ? vm_syms[i].hip : vm_syms[i].cuda;
    const char *via = NULL;
    char why[sizeof vm->missing];
    void *obj;
    if (!name)
      continue;
    snprintf(why, sizeof why, "%s", name);
    obj = hip ? dlsym(lib, name)
              : driver_call(lib, name, &via, why, sizeof why);
    if (!obj && !hip && driver_library() &&
        (obj = dlsym(driver_lib, name)) != NULL)
      via = "the driver library (libcuda)";
    if (!obj && vm_syms[i].required && !vm->missing[0])
      snprintf(vm->missing, sizeof vm->missing, "%s", why);
    if (obj && via && !strcmp(vm->via, "none"))
      vm->via = via;
    store(rt, vm_syms[i].at, obj);
  }
  for (size_t i = 0; !hip && i < sizeof ctx_syms / sizeof *ctx_syms; i++) {
    const char *via = NULL;
    char why[sizeof vm->missing];
    store(rt, ctx_syms[i].at,
          driver_call(lib, ctx_syms[i].cuda, &via, why, sizeof why));
  }
}

static void set_attrs(hippo__gpu_rt *rt) {
  if (rt->flavor == HIPPO__GPU_HIP) {
    rt->name = "HIP";
    rt->prefix = "hip";
    rt->attr_texture_alignment = HIPPO__HIP_ATTR_TEXTURE_ALIGNMENT;
    rt->attr_compute_mode = HIPPO__HIP_ATTR_COMPUTE_MODE;
    rt->attr_cc_major = HIPPO__HIP_ATTR_CC_MAJOR;
    rt->attr_cc_minor = HIPPO__HIP_ATTR_CC_MINOR;
  } else {
    rt->name = "CUDA";
    rt->prefix = "cuda";
    rt->attr_texture_alignment = HIPPO__CUDA_ATTR_TEXTURE_ALIGNMENT;
    rt->attr_compute_mode = HIPPO__CUDA_ATTR_COMPUTE_MODE;
    rt->attr_cc_major = HIPPO__CUDA_ATTR_CC_MAJOR;
    rt->attr_cc_minor = HIPPO__CUDA_ATTR_CC_MINOR;
  }
}

hippo_status hippo__gpu_rt_load(enum hippo__gpu_flavor flavor,
                                const hippo__gpu_rt **out) {
  bool hip = flavor == HIPPO__GPU_HIP;
  const char *env = getenv(hip ? "HIPPO_HIP_LIBRARY" : "HIPPO_CUDA_LIBRARY");
  const char *const *names = hip ? hip_libs : cuda_libs;
  const char *one[2] = {env, NULL};
  char tried[1024], present[512];
  /* the process's own runtime, then the usual list (NULL-ended) */
  const char *list[sizeof cuda_libs / sizeof *cuda_libs + 1];
  size_t at = 0;
  hippo__gpu_rt *rt = &loaded[flavor - 1];

  pthread_mutex_lock(&load_lock);
  if (ready[flavor - 1]) {
    *out = ready[flavor - 1];
    pthread_mutex_unlock(&load_lock);
    return HIPPO_SUCCESS;
  }
  tried[0] = '\0';
  if (env && *env) {
    names = one;
  } else if (loaded_runtime(hip ? hip_stem : cuda_stem, present,
                            sizeof present)) {
    size_t n = 0;
    list[0] = present;
    do
      list[n + 1] = names[n];
    while (names[n++]);
    names = list;
  }
  for (; *names; names++) {
    char why[200];
    void *lib = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      /* dlerror repeats the name; "not found" says the common case */
      const char *e = dlerror();
      size_t n = strlen(*names);
      if (e && !strncmp(e, *names, n) && !strncmp(e + n, ": ", 2))
        e += n + 2;
      if (e && strstr(e, "No such file or directory"))
        e = "not found";
      snprintf(why, sizeof why, "%s", e ? e : "cannot be loaded");
    } else {
      memset(rt, 0, sizeof *rt);
      rt->flavor = flavor;
      set_attrs(rt);
      if (fill(rt, lib, why, sizeof why)) {
        snprintf(rt->path, sizeof rt->path, "%s", *names);
        if (rt->runtime_version)
          (void)rt->runtime_version(&rt->version);
        fill_vm(rt, lib);
        ready[flavor - 1] = rt; /* stays loaded for the process */
        libs[flavor - 1] = lib;
        *out = rt;
        pthread_mutex_unlock(&load_lock);
        return HIPPO_SUCCESS;
      }
      dlclose(lib);
    }
    if (at < sizeof tried)
      at += (size_t)snprintf(tried + at, sizeof tried - at, "%s%s: %s",
                             at ? "; " : "", *names, why);
  }
  pthread_mutex_unlock(&load_lock);
  return hippo__error_set(
      HIPPO_NO_DEVICE,
      "no %s runtime could be loaded (%s)%s", hip ? "HIP" : "CUDA", tried,
      env && *env
          ? (hip ? "; HIPPO_HIP_LIBRARY names it: correct the path, or unset "
                   "it to search the usual places"
                 : "; HIPPO_CUDA_LIBRARY names it: correct the path, or unset "
                   "it to search the usual places")
      : hip ? "; install ROCm, or name the library in HIPPO_HIP_LIBRARY"
            : "; install the CUDA runtime, or name libcudart in "
              "HIPPO_CUDA_LIBRARY");
}

void hippo__gpu_rt_forget(void) {
  pthread_mutex_lock(&load_lock);
  for (int i = 0; i < 2; i++) {
    if (!ready[i])
      continue;
    ready[i] = NULL;
    (void)dlclose(libs[i]); /* a test double: nothing to do if it stays */
    libs[i] = NULL;
    memset(&loaded[i], 0, sizeof loaded[i]);
  }
  if (driver_lib)
    (void)dlclose(driver_lib);
  driver_lib = NULL;
  pthread_mutex_unlock(&load_lock);
}

/* ---- errors ---------------------------------------------------------------- */

hippo_status hippo__gpu_status(int err) {
  switch (err) {
  case HIPPO__GPU_SUCCESS:
    return HIPPO_SUCCESS;
  case HIPPO__GPU_OUT_OF_MEMORY:
    return HIPPO_OUT_OF_MEMORY;
  case HIPPO__GPU_STUB_LIBRARY:     /* a container's stub libcuda */
  case HIPPO__GPU_INSUFFICIENT_DRIVER:
  case HIPPO__GPU_DEVICES_UNAVAILABLE: /* exclusive-process, taken */
  case HIPPO__GPU_NO_DEVICE:
  case HIPPO__GPU_INVALID_DEVICE:
  case HIPPO__GPU_DRIVER_MISMATCH:
  case HIPPO__GPU_COMPAT_UNSUPPORTED:
    return HIPPO_NO_DEVICE;
  default:
    return HIPPO_BACKEND_ERROR;
  }
}

static const struct {
  int err;
  const char *hip, *cuda;
} err_names[] = {
    {0, "hipSuccess", "cudaSuccess"},
    {1, "hipErrorInvalidValue", "cudaErrorInvalidValue"},
    {2, "hipErrorOutOfMemory", "cudaErrorMemoryAllocation"},
    {3, "hipErrorNotInitialized", "cudaErrorInitializationError"},
    {34, NULL, "cudaErrorStubLibrary"}, /* HIP has no 34, 46 */
    {35, "hipErrorInsufficientDriver", "cudaErrorInsufficientDriver"},
    {36, NULL, "cudaErrorCallRequiresNewerDriver"},
    {46, NULL, "cudaErrorDevicesUnavailable"},
    {100, "hipErrorNoDevice", "cudaErrorNoDevice"},
    {101, "hipErrorInvalidDevice", "cudaErrorInvalidDevice"},
    {400, "hipErrorInvalidResourceHandle", "cudaErrorInvalidResourceHandle"},
    {401, "hipErrorIllegalState", "cudaErrorIllegalState"},
    {600, "hipErrorNotReady", "cudaErrorNotReady"},
    {709, "hipErrorContextIsDestroyed", "cudaErrorContextIsDestroyed"},
    {801, "hipErrorNotSupported", "cudaErrorNotSupported"},
    {803, NULL, "cudaErrorSystemDriverMismatch"}, /* HIP has no 803, 804 */
    {804, NULL, "cudaErrorCompatNotSupportedOnDevice"},
    {900, "hipErrorStreamCaptureUnsupported",
     "cudaErrorStreamCaptureUnsupported"},
    {901, "hipErrorStreamCaptureInvalidated",
     "cudaErrorStreamCaptureInvalidated"},
    {906, "hipErrorStreamCaptureImplicit", "cudaErrorStreamCaptureImplicit"},
    {907, "hipErrorCapturedEvent", "cudaErrorCapturedEvent"},
    {999, "hipErrorUnknown", "cudaErrorUnknown"},
};

const char *hippo__gpu_err_name(enum hippo__gpu_flavor flavor,
                                const hippo__gpu_rt *rt, int err) {
  const char *name = rt && rt->error_name ? rt->error_name(err) : NULL;
  if (name && *name)
    return name;
  name = NULL;
  for (size_t i = 0; i < sizeof err_names / sizeof *err_names; i++)
    if (err_names[i].err == err) {
      name = flavor == HIPPO__GPU_HIP ? err_names[i].hip : err_names[i].cuda;
      break;
    }
  return name ? name : "unknown";
}

hippo_status hippo__gpu_fail(const hippo__gpu_rt *rt, int err,
                             const char *call, const char *hint) {
  const char *text = rt->error_string ? rt->error_string(err) : NULL;
  return hippo__error_set(hippo__gpu_status(err),
                          "%s %s%s failed: %s (%d): %s%s%s", rt->name,
                          rt->prefix, call,
                          hippo__gpu_err_name(rt->flavor, rt, err), err,
                          text && *text ? text : "no message",
                          hint ? "; " : "",
                          hint ? hint : "");
}

/* ---- virtual memory's errors --------------------------------------------- */

static const struct {
  int err;
  const char *name;
} cu_names[] = {
    {0, "CUDA_SUCCESS"},
    {1, "CUDA_ERROR_INVALID_VALUE"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY"},
    {3, "CUDA_ERROR_NOT_INITIALIZED"},
    {4, "CUDA_ERROR_DEINITIALIZED"},
    {100, "CUDA_ERROR_NO_DEVICE"},
    {101, "CUDA_ERROR_INVALID_DEVICE"},
    {201, "CUDA_ERROR_INVALID_CONTEXT"},
    {400, "CUDA_ERROR_INVALID_HANDLE"},
    {800, "CUDA_ERROR_NOT_PERMITTED"},
    {801, "CUDA_ERROR_NOT_SUPPORTED"},
    {999, "CUDA_ERROR_UNKNOWN"},
};

const char *hippo__cu_err_name(int err) {
  for (size_t i = 0; i < sizeof cu_names / sizeof *cu_names; i++)
    if (cu_names[i].err == err)
      return cu_names[i].name;
  return "unknown";
}

hippo_status hippo__gpu_vm_fail(const hippo__gpu_rt *rt, int err,
                                const char *call, const char *hint) {
  const char *name = NULL, *text = NULL;
  if (rt->flavor == HIPPO__GPU_HIP)
    return hippo__gpu_fail(rt, err, call, hint);
  if (!rt->vm.error_name || rt->vm.error_name(err, &name) != 0 || !name ||
      !*name)
    name = hippo__cu_err_name(err);
  if (!rt->vm.error_string || rt->vm.error_string(err, &text) != 0)
    text = NULL;
  return hippo__error_set(hippo__gpu_status(err),
                          "%s %s%s failed: %s (%d): %s%s%s", rt->name,
                          rt->vm.prefix, call, name, err,
                          text && *text ? text : "no message",
                          hint ? "; " : "", hint ? hint : "");
}
