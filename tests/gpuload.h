/* gpuload.h -- the GPU runtime hippo's HIP backend drives, loaded again by
 * a program that makes its own runtime calls next to hippo's: the device
 * test (tests/test-gpu-device.c: a real capture, a graph launched) and the
 * device benchmark (bench/hippo-gpu-bench.c: the runtime's own allocators
 * as the baseline).  Header-only (static inline functions); no toolkit header.
 *
 * Which runtime, as src/gpu_rt.c and src/backend_hip.c choose it:
 *  - the flavour: $HIPPO_GPU_RUNTIME = hip|amd or cuda|nvidia when set;
 *    else the one hippo's device_info().runtime names ("HIP ..." or
 *    "CUDA ..."), when the caller passes it; else HIP first, then CUDA,
 *    the first that loads and sees a device;
 *  - the library: $HIPPO_HIP_LIBRARY / $HIPPO_CUDA_LIBRARY when set, and
 *    only that; else the library device_info().runtime names in its
 *    parentheses (so the process holds one copy of the runtime and its
 *    streams are the plugin's), then the sonames and install directories
 *    gpu_rt.c tries.
 * Loading the library hippo loaded gives the same handle (dlopen counts
 * references), so streams, graphs and pointers are shared with hippo.
 *
 * Error codes are ints (hipError_t, cudaError_t: 0 is success); streams,
 * graphs and executable graphs are opaque pointers.  Enum values the two
 * runtimes share: memcpy kind device-to-device 3, capture mode relaxed 2,
 * capture status active 1, stream flag non-blocking 1.
 *
 * Signatures that differ between releases (checked against CUDA 13's
 * cuda_runtime_api.h and HIP 5's hip_runtime_api.h):
 *  - instantiating a graph: {hip,cuda}GraphInstantiateWithFlags(exec *,
 *    graph, unsigned long long flags) where present (HIP >= 4.5, CUDA >=
 *    11.4); else CUDA >= 12's cudaGraphInstantiate(exec *, graph, unsigned
 *    long long flags); else the five-argument form of HIP and CUDA 11,
 *    (exec *, graph, error node *, char *log, size_t log size);
 *  - {hip,cuda}StreamGetCaptureInfo: 3 arguments (HIP, CUDA 11), 6 (CUDA
 *    12) or 7 (CUDA 13); called with 7, the last four NULL, as hippo does
 *    (the shorter forms leave the extra arguments unread).
 */
#ifndef HIPPO_GPULOAD_H
#define HIPPO_GPULOAD_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GL_SUCCESS 0
#define GL_MEMCPY_D2D 3
#define GL_CAPTURE_GLOBAL 0
#define GL_CAPTURE_RELAXED 2
#define GL_CAPTURE_ACTIVE 1
#define GL_STREAM_NON_BLOCKING 1u

typedef struct gl_rt {
  bool cuda;        /* NVIDIA's runtime; else AMD's */
  const char *name; /* "HIP" or "CUDA" */
  char path[256];   /* what dlopen loaded */
  int version;      /* runtime version, 0 when unknown */
  void *lib;
  /* required */
  int (*get_device_count)(int *count);
  int (*set_device)(int dev);
  int (*malloc_)(void **ptr, size_t size);
  int (*free_)(void *ptr);
  int (*memcpy_async)(void *dst, const void *src, size_t size, int kind,
                      void *stream);
  int (*stream_sync)(void *stream);
  int (*stream_create)(void **stream, unsigned flags);
  int (*stream_destroy)(void *stream);
  int (*is_capturing)(void *stream, int *status);
  int (*capture_info)(void *stream, int *status, unsigned long long *id,
                      void *graph, void *deps, void *edges, void *count);
  int (*begin_capture)(void *stream, int mode);
  int (*end_capture)(void *stream, void **graph);
  int (*graph_destroy)(void *graph);
  int (*graph_launch)(void *exec, void *stream);
  int (*graph_exec_destroy)(void *exec);
  /* one of the two */
  int (*instantiate3)(void **exec, void *graph, unsigned long long flags);
  int (*instantiate5)(void **exec, void *graph, void *error_node, char *log,
                      size_t log_size);
  /* optional (NULL when the runtime has none) */
  int (*malloc_async)(void **ptr, size_t size, void *stream);
  int (*free_async)(void *ptr, void *stream);
  const char *(*error_name)(int err);
  int (*runtime_version)(int *version);
  int (*peek_last_error)(void); /* the thread's last error, kept */
} gl_rt;

/* dlsym's object pointer stored into a function pointer field. */
static inline void gl_store(void *field, void *obj) {
  union {
    void *obj;
    void (*fn)(void);
  } u;
  u.obj = obj;
  memcpy(field, &u.fn, sizeof u.fn);
}

/* prefix + name looked up in lib into *field; false when missing. */
static inline bool gl_sym(void *lib, const char *prefix, const char *name,
                   void *field) {
  char full[96];
  void *obj;
  snprintf(full, sizeof full, "%s%s", prefix, name);
  obj = dlsym(lib, full);
  gl_store(field, obj);
  return obj != NULL;
}

/* The error's name ("cudaErrorMemoryAllocation"), or "error". */
static inline const char *gl_err(const gl_rt *rt, int err) {
  const char *n = rt->error_name ? rt->error_name(err) : NULL;
  return n && *n ? n : "error";
}

/* Instantiates graph into *exec with the form the runtime has. */
static inline int gl_instantiate(const gl_rt *rt, void **exec,
                                 void *graph) {
  if (rt->instantiate3)
    return rt->instantiate3(exec, graph, 0);
  return rt->instantiate5(exec, graph, NULL, NULL, 0);
}

/* Fills rt from lib; false with the missing call in why. */
static inline bool gl_fill(gl_rt *rt, void *lib, char *why, size_t len) {
  const char *p = rt->cuda ? "cuda" : "hip";
  struct {
    const char *name;
    void *field;
  } req[] = {
      {"GetDeviceCount", &rt->get_device_count},
      {"SetDevice", &rt->set_device},
      {"Malloc", &rt->malloc_},
      {"Free", &rt->free_},
      {"MemcpyAsync", &rt->memcpy_async},
      {"StreamSynchronize", &rt->stream_sync},
      {"StreamCreateWithFlags", &rt->stream_create},
      {"StreamDestroy", &rt->stream_destroy},
      {"StreamIsCapturing", &rt->is_capturing},
      {"StreamGetCaptureInfo", &rt->capture_info},
      {"StreamBeginCapture", &rt->begin_capture},
      {"StreamEndCapture", &rt->end_capture},
      {"GraphDestroy", &rt->graph_destroy},
      {"GraphLaunch", &rt->graph_launch},
      {"GraphExecDestroy", &rt->graph_exec_destroy},
  };
  for (size_t i = 0; i < sizeof req / sizeof *req; i++)
    if (!gl_sym(lib, p, req[i].name, req[i].field)) {
      snprintf(why, len, "it has no %s%s", p, req[i].name);
      return false;
    }
  (void)gl_sym(lib, p, "MallocAsync", &rt->malloc_async);
  (void)gl_sym(lib, p, "FreeAsync", &rt->free_async);
  (void)gl_sym(lib, p, "GetErrorName", &rt->error_name);
  (void)gl_sym(lib, p, "RuntimeGetVersion", &rt->runtime_version);
  (void)gl_sym(lib, p, "PeekAtLastError", &rt->peek_last_error);
  rt->version = 0;
  if (rt->runtime_version)
    (void)rt->runtime_version(&rt->version);
  rt->instantiate3 = NULL;
  rt->instantiate5 = NULL;
  if (!gl_sym(lib, p, "GraphInstantiateWithFlags", &rt->instantiate3)) {
    if (rt->cuda && rt->version >= 12000)
      (void)gl_sym(lib, p, "GraphInstantiate", &rt->instantiate3);
    else
      (void)gl_sym(lib, p, "GraphInstantiate", &rt->instantiate5);
  }
  if (!rt->instantiate3 && !rt->instantiate5) {
    snprintf(why, len, "it has no %sGraphInstantiate", p);
    return false;
  }
  return true;
}

/* Tries one library of one flavour; true when it loaded with every
 * required call (and, when must_see_device, sees a device). */
static inline bool gl_try(gl_rt *rt, bool cuda, const char *path,
                   bool must_see_device, char *why, size_t len) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  int count = 0, err;
  if (!lib) {
    const char *e = dlerror();
    snprintf(why, len, "%s", e ? e : "cannot be loaded");
    return false;
  }
  memset(rt, 0, sizeof *rt);
  rt->cuda = cuda;
  rt->name = cuda ? "CUDA" : "HIP";
  if (!gl_fill(rt, lib, why, len)) {
    dlclose(lib);
    return false;
  }
  if (must_see_device && ((err = rt->get_device_count(&count)) != 0 ||
                          count == 0)) {
    snprintf(why, len, "%sGetDeviceCount: %s (%d), %d device(s)",
             cuda ? "cuda" : "hip", gl_err(rt, err), err, count);
    dlclose(lib);
    return false;
  }
  rt->lib = lib;
  snprintf(rt->path, sizeof rt->path, "%s", path);
  return true;
}

/* Loads the runtime (see the top).  runtime_info: hippo's
 * device_info().runtime ("CUDA 13000 (libcudart.so.13)"), or NULL.
 * false: why says what was tried and why each failed. */
static inline bool gl_load(gl_rt *rt, const char *runtime_info, char *why,
                    size_t len) {
  static const char *const hip_libs[] = {
      "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so",
      "/opt/rocm/lib/libamdhip64.so", NULL};
  static const char *const cuda_libs[] = {
      "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
      "libcudart.so", "/usr/local/cuda/lib64/libcudart.so", NULL};
  const char *force = getenv("HIPPO_GPU_RUNTIME");
  bool info_hip = runtime_info && !strncmp(runtime_info, "HIP ", 4);
  bool info_cuda = runtime_info && !strncmp(runtime_info, "CUDA ", 5);
  bool try_hip = true, try_cuda = true;
  char info_path[256] = "";
  size_t at = 0;

  why[0] = '\0';
  if (force && *force) {
    try_hip = !strcmp(force, "hip") || !strcmp(force, "amd");
    try_cuda = !strcmp(force, "cuda") || !strcmp(force, "nvidia");
  } else if (info_hip || info_cuda) {
    try_hip = info_hip;
    try_cuda = info_cuda;
  }
  if (runtime_info) { /* "NAME VERSION (PATH)", PATH cut at 100 bytes */
    const char *open = strchr(runtime_info, '(');
    const char *close = open ? strrchr(open, ')') : NULL;
    if (close && close[1] == '\0' && close - open - 1 < 100 &&
        (size_t)(close - open) < sizeof info_path) {
      memcpy(info_path, open + 1, (size_t)(close - open - 1));
      info_path[close - open - 1] = '\0';
    }
  }
  for (int cuda = 0; cuda < 2; cuda++) {
    const char *env =
        getenv(cuda ? "HIPPO_CUDA_LIBRARY" : "HIPPO_HIP_LIBRARY");
    const char *const *names = cuda ? cuda_libs : hip_libs;
    const char *one[3] = {NULL, NULL, NULL};
    /* hippo runs on this flavour: the library it names, and whatever
     * loads (it saw the device) */
    bool from_info = cuda ? info_cuda : info_hip;
    if (!(cuda ? try_cuda : try_hip))
      continue;
    if (env && *env) {
      one[0] = env;
      names = one;
    } else if (from_info && *info_path) {
      /* the library hippo loaded (dlopen hands back its handle), then the
       * list */
      if (gl_try(rt, cuda, info_path, false, why + at, len - at))
        return true;
      at = strlen(why);
      at += (size_t)snprintf(why + at, len - at, " (%s); ", info_path);
      if (at >= len)
        at = len - 1;
    }
    for (; *names; names++) {
      if (gl_try(rt, cuda, *names, !from_info, why + at, len - at))
        return true;
      at = strlen(why);
      at += (size_t)snprintf(why + at, len - at, " (%s); ", *names);
      if (at >= len)
        at = len - 1;
    }
  }
  if (at == 0)
    snprintf(why, len, "HIPPO_GPU_RUNTIME is '%s': no runtime to try",
             force ? force : "");
  return false;
}

static inline void gl_close(gl_rt *rt) {
  if (rt->lib)
    dlclose(rt->lib);
  rt->lib = NULL;
}

#endif /* HIPPO_GPULOAD_H */
