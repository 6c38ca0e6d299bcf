/* gpu_rt.h -- a GPU runtime, loaded at run time: AMD's HIP runtime
 * (libamdhip64) or NVIDIA's CUDA runtime (libcudart), whose calls are the
 * ones HIP's NVIDIA platform maps each HIP call onto.
 *
 * hippo links no GPU library: `readelf -d hippo.so` names none, so HOST and
 * DRY devices work on a machine with neither runtime.  The first HIP (or
 * AUTO) device_open loads one with dlopen and fills this table with dlsym;
 * only the calls hippo makes are declared here (no toolkit header is needed
 * to build), with the numeric values both runtimes give their enums
 * (tests/test-gpu-rt checks them against the real headers when they are
 * installed).
 *
 * Which library: $HIPPO_HIP_LIBRARY (HIP) or $HIPPO_CUDA_LIBRARY (CUDA),
 * when set, and only that; else the sonames of current releases, then the
 * usual install directories (/opt/rocm/lib, /usr/local/cuda/lib64).  A
 * runtime loads once per process and stays loaded (a process-wide cache,
 * read-only once filled, so two devices or two plugin copies share
 * nothing else): once loaded, changing the environment changes nothing
 * until the process ends (tests call hippo__gpu_rt_forget); a failed load
 * is tried again at the next open.
 *
 * Calls take and give `int` error codes (hipError_t and cudaError_t are
 * int-sized enums with the same numbers for everything hippo looks at:
 * 0 success, 2 out of memory, 35 insufficient driver, 100 no device,
 * 101 invalid device, 600 not ready, 906 capture implicit).  Streams,
 * events and graphs are opaque pointers.
 *
 * cudaStreamGetCaptureInfo takes 3 arguments in CUDA 11-12 and 7 in CUDA
 * 13 (graph, dependencies, edge data, count): hippo always passes 7, the
 * last four NULL, which the 3-argument form ignores (the SysV and Win64
 * calling conventions leave extra arguments unread).
 */
#ifndef HIPPO_GPU_RT_H
#define HIPPO_GPU_RT_H

#include <stddef.h>
#include <stdint.h>

#include "hippo.h"

enum hippo__gpu_flavor { HIPPO__GPU_HIP = 1, HIPPO__GPU_CUDA = 2 };

/* Error codes, the same in both runtimes. */
#define HIPPO__GPU_SUCCESS 0
#define HIPPO__GPU_INVALID_VALUE 1
#define HIPPO__GPU_OUT_OF_MEMORY 2
#define HIPPO__GPU_INIT_ERROR 3
#define HIPPO__GPU_INSUFFICIENT_DRIVER 35
#define HIPPO__GPU_NO_DEVICE 100
#define HIPPO__GPU_INVALID_DEVICE 101
#define HIPPO__GPU_INVALID_HANDLE 400
#define HIPPO__GPU_NOT_READY 600
#define HIPPO__GPU_NOT_SUPPORTED 801
#define HIPPO__GPU_DRIVER_MISMATCH 803  /* CUDA: system driver mismatch */
#define HIPPO__GPU_COMPAT_UNSUPPORTED 804 /* CUDA: compat not supported */
#define HIPPO__GPU_CAPTURE_UNSUPPORTED 900
#define HIPPO__GPU_CAPTURE_INVALIDATED 901
#define HIPPO__GPU_CAPTURE_IMPLICIT 906
#define HIPPO__GPU_UNKNOWN 999

/* Other enums, the same in both. */
#define HIPPO__GPU_MEMCPY_H2D 1
#define HIPPO__GPU_MEMCPY_D2H 2
#define HIPPO__GPU_MEMCPY_D2D 3
#define HIPPO__GPU_EVENT_DISABLE_TIMING 2u
#define HIPPO__GPU_STREAM_NON_BLOCKING 1u
#define HIPPO__GPU_CAPTURE_NONE 0
#define HIPPO__GPU_CAPTURE_RELAXED 2
#define HIPPO__GPU_COMPUTE_PROHIBITED 2

/* Device attributes: their numbers differ. */
#define HIPPO__HIP_ATTR_COMPUTE_MODE 6
#define HIPPO__HIP_ATTR_CC_MAJOR 23
#define HIPPO__HIP_ATTR_CC_MINOR 61
#define HIPPO__HIP_ATTR_TEXTURE_ALIGNMENT 81
#define HIPPO__CUDA_ATTR_TEXTURE_ALIGNMENT 14
#define HIPPO__CUDA_ATTR_COMPUTE_MODE 20
#define HIPPO__CUDA_ATTR_CC_MAJOR 75
#define HIPPO__CUDA_ATTR_CC_MINOR 76

/* The calls.  Every field is set once loaded; `optional` ones may be NULL
 * (an older runtime): error names, versions, the device of a stream, the
 * device name. */
typedef struct hippo__gpu_rt {
  enum hippo__gpu_flavor flavor;
  const char *name;  /* "HIP" or "CUDA" */
  const char *prefix; /* of its calls' names: "hip" or "cuda" */
  char path[256];    /* what dlopen loaded */
  int version;       /* runtime version, 0 when unknown */
  int attr_texture_alignment, attr_compute_mode, attr_cc_major, attr_cc_minor;
  int (*get_device_count)(int *count);
  int (*get_device)(int *dev);
  int (*set_device)(int dev);
  int (*malloc_)(void **ptr, size_t size);
  int (*free_)(void *ptr);
  int (*memcpy_)(void *dst, const void *src, size_t size, int kind);
  int (*memcpy_async)(void *dst, const void *src, size_t size, int kind,
                      void *stream);
  int (*stream_sync)(void *stream);
  int (*stream_create)(void **stream, unsigned flags);
  int (*stream_destroy)(void *stream);
  int (*event_create)(void **event, unsigned flags);
  int (*event_record)(void *event, void *stream);
  int (*event_query)(void *event);
  int (*event_sync)(void *event);
  int (*event_destroy)(void *event);
  int (*stream_is_capturing)(void *stream, int *status);
  int (*stream_capture_info)(void *stream, int *status,
                             unsigned long long *id, void *graph, void *deps,
                             void *edges, void *count);
  int (*begin_capture)(void *stream, int mode);
  int (*end_capture)(void *stream, void **graph);
  int (*graph_destroy)(void *graph);
  int (*mem_info)(size_t *free_bytes, size_t *total_bytes);
  int (*device_attribute)(int *value, int attr, int dev);
  /* optional */
  const char *(*error_name)(int err);
  const char *(*error_string)(int err);
  int (*runtime_version)(int *version);
  int (*stream_device)(void *stream, int *dev);
  int (*device_name)(char *name, int len, int dev); /* HIP */
  int (*device_properties)(void *props, int dev);   /* CUDA: name first */
  int (*exchange_capture_mode)(int *mode); /* the thread's capture mode */
  int (*get_last_error)(void); /* returns and resets the thread's last error */
} hippo__gpu_rt;

/* The runtime of `flavor`, loaded once.  HIPPO_NO_DEVICE when no library
 * serves: last_error names each one tried and why (dlopen's message, or
 * "it has no <call>" for a library lacking a required call: it is closed
 * and the next name tried) and what to do. */
hippo_status hippo__gpu_rt_load(enum hippo__gpu_flavor flavor,
                                const hippo__gpu_rt **out);

/* For tests only: forgets the loaded runtimes (dlclose), so the next
 * hippo__gpu_rt_load reads the environment again.  Not thread-safe: no
 * backend may be open and no other thread may be loading. */
void hippo__gpu_rt_forget(void);

/* The status of a runtime error code: HIPPO_OUT_OF_MEMORY (2),
 * HIPPO_NO_DEVICE (no device, invalid device, insufficient driver, a
 * driver the runtime cannot use), else HIPPO_BACKEND_ERROR. */
hippo_status hippo__gpu_status(int err);

/* The error's name ("hipErrorNoDevice", "cudaErrorMemoryAllocation"): the
 * runtime's own when it has one, else hippo's table, else "unknown". */
const char *hippo__gpu_err_name(enum hippo__gpu_flavor flavor,
                                const hippo__gpu_rt *rt, int err);

/* A failed call (`call` without its prefix: "Malloc"): its status, and
 * last_error "<RT> <prefix><call> failed: <name> (<code>): <runtime's
 * message>[; hint]", e.g. "CUDA cudaMalloc failed: ...". */
hippo_status hippo__gpu_fail(const hippo__gpu_rt *rt, int err,
                             const char *call, const char *hint);

#endif /* HIPPO_GPU_RT_H */
