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
#define HIPPO__GPU_STUB_LIBRARY 34         /* CUDA: libcuda is a stub */
#define HIPPO__GPU_INSUFFICIENT_DRIVER 35
#define HIPPO__GPU_CALL_NEEDS_DRIVER 36 /* CUDA: the call needs a newer
                                           driver than the one installed */
#define HIPPO__GPU_DEVICES_UNAVAILABLE 46  /* CUDA: every device busy or
                                              unavailable */
#define HIPPO__GPU_NO_DEVICE 100
#define HIPPO__GPU_INVALID_DEVICE 101
#define HIPPO__GPU_INVALID_HANDLE 400
#define HIPPO__GPU_CONTEXT_DESTROYED 709 /* HIP: an unknown stream */
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
#define HIPPO__GPU_CAPTURE_RELAXED 2 /* a mode */
#define HIPPO__GPU_CAPTURE_STATUS_INVALIDATED 2 /* a status: not ended yet */
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

/* ---- virtual memory (backend_hip_vm.c: vm_*) -------------------------------
 *
 * HIP has the calls in its runtime (hipMemAddressReserve, hipMemCreate,
 * hipMemMap, ...; libamdhip64 5.2 and later); CUDA has them in the driver
 * (cuMemAddressReserve, ...; libcuda.so.1), which hippo reaches through the
 * runtime it loaded: cudaGetDriverEntryPointByVersion (CUDA 12.5 on, asked
 * for the CUDA 12.0 ABI, which the calls have kept since 10.2), else
 * cudaGetDriverEntryPoint (11.3 on).  A CUDA runtime with neither (11.0 -
 * 11.2) gives no virtual memory.  The driver's calls answer CUresult, whose
 * numbers hippo handles are the runtime's (0, 1, 2, 3, 100, 101, 400, 801,
 * 999) plus those below.
 *
 * Addresses are void * (HIP) or CUdeviceptr (CUDA: unsigned long long),
 * handles a pointer (HIP) or unsigned long long (CUDA): 64 bits each, passed
 * in the same registers; hippo declares the calls with HIP's types and a
 * handle as unsigned long long (tests/gpu-rt-headers-*.c check the sizes).
 *
 * hipMemAllocationProp is CUDA's CUmemAllocationProp from HIP 5.3 on
 * ({type; requestedHandleTypes; location; win32HandleMetaData;
 * allocFlags{compressionType, gpuDirectRDMACapable, usage[, reserved[4]]}}:
 * HIP's allocFlags has no reserved bytes, the struct is 32 bytes either
 * way), with hipDeviceAttributeVirtualMemoryManagementSupported (89).
 * hippo uses virtual memory on HIP 6.1 and later only (HIPPO__HIP_VMM_V61,
 * from hipRuntimeGetVersion): before, ROCm's calls answer success without
 * doing anything (backend_hip_vm_driver.c hippo__hip_vm_probe), so HIP
 * 5.2's older struct layout is never needed.  Checked against ROCm/HIP's
 * include/hip/hip_runtime_api.h at rocm-5.3.0 .. 5.7.0, 6.0.0 .. 6.3 and
 * ROCm 7 (rocm-systems), and CUDA 13.0's cuda.h. */
#define HIPPO__HIP_VMM_V61 60100000 /* hipRuntimeGetVersion of HIP 6.1.0 */
#define HIPPO__HIP_V7 70000000     /* hipRuntimeGetVersion of HIP 7.0.0 */
#define HIPPO__HIP_ATTR_VMM_SUPPORTED 89   /* HIP 5.3 and later */
#define HIPPO__CU_ATTR_VMM_SUPPORTED 102   /* CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
#define HIPPO__GPU_MEM_ALLOCATION_PINNED 1 /* hipMemAllocationTypePinned */
#define HIPPO__GPU_MEM_LOCATION_DEVICE 1   /* hipMemLocationTypeDevice */
#define HIPPO__GPU_MEM_HANDLE_NONE 0       /* hipMemHandleTypeNone */
#define HIPPO__GPU_MEM_HANDLE_POSIX_FD 1   /* ...PosixFileDescriptor */
#define HIPPO__CU_ATTR_POSIX_FD_SUPPORTED 103 /* CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED */
#define HIPPO__CU_ATTR_RDMA_VMM_SUPPORTED 110 /* CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED */
#define HIPPO__GPU_MEM_ACCESS_RW 3         /* hipMemAccessFlagsProtReadWrite */
#define HIPPO__GPU_MEM_GRANULARITY_MIN 0   /* ...GranularityMinimum */
#define HIPPO__CUDA_ENTRY_VERSION 12000    /* cudaGetDriverEntryPointByVersion's */
#define HIPPO__CUDA_ENTRY_DEFAULT 0ull     /* cudaEnableDefault */
#define HIPPO__CUDA_ENTRY_FOUND 0          /* cudaDriverEntryPointSuccess */

/* CUresult codes beyond the shared ones (cuda.h). */
#define HIPPO__CU_DEINITIALIZED 4
#define HIPPO__CU_INVALID_CONTEXT 201
#define HIPPO__CU_NOT_PERMITTED 800

#define HIPPO__GPU_MAX_PEERS 64 /* devices a mapping is made accessible to */

/* hipMemLocation, CUmemLocation. */
typedef struct hippo__gpu_mem_location {
  int type; /* HIPPO__GPU_MEM_LOCATION_DEVICE */
  int id;   /* the device ordinal */
} hippo__gpu_mem_location;

/* hipMemAllocationProp (HIP 5.3 and later), CUmemAllocationProp. */
typedef struct hippo__gpu_mem_prop {
  int type;                   /* HIPPO__GPU_MEM_ALLOCATION_PINNED */
  int requested_handle_types; /* HIPPO__GPU_MEM_HANDLE_NONE */
  hippo__gpu_mem_location location;
  void *win32_handle_metadata;
  struct {
    unsigned char compression_type;
    unsigned char gpu_direct_rdma_capable;
    unsigned short usage;
    unsigned char reserved[4]; /* CUDA's; padding in HIP's */
  } alloc_flags;
} hippo__gpu_mem_prop;

/* hipMemAccessDesc, CUmemAccessDesc. */
typedef struct hippo__gpu_mem_access {
  hippo__gpu_mem_location location;
  int flags; /* HIPPO__GPU_MEM_ACCESS_RW */
} hippo__gpu_mem_access;

/* The virtual-memory calls (HIP: the runtime's; CUDA: the driver's, through
 * the runtime's entry point, else -- CUDA 11.0 to 11.2 -- from the driver
 * library, libcuda.so.1).  All set, or `missing` names the first that is
 * not. */
typedef struct hippo__gpu_vm_calls {
  const char *prefix; /* of the calls' names: "hip" or "cu" */
  const char *via;    /* how they were found ("hipMem* exports",
                         "cudaGetDriverEntryPointByVersion", ...) */
  char missing[160];  /* "" when every call loaded, else which did not */
  int (*reserve)(void **ptr, size_t size, size_t align, void *addr,
                 unsigned long long flags);
  int (*free_range)(void *ptr, size_t size);
  int (*create)(unsigned long long *handle, size_t size, const void *prop,
                unsigned long long flags);
  int (*release)(unsigned long long handle);
  int (*map)(void *ptr, size_t size, size_t offset, unsigned long long handle,
             unsigned long long flags);
  int (*set_access)(void *ptr, size_t size, const hippo__gpu_mem_access *desc,
                    size_t count);
  int (*unmap)(void *ptr, size_t size);
  int (*granularity)(size_t *granule, const void *prop, int option);
  /* CUDA only (the driver's device and attribute calls, cuDeviceGet's
   * CUdevice for an ordinal, and its error names; the last two optional) */
  int (*device_get)(int *device, int ordinal);
  int (*device_attribute)(int *value, int attr, int device);
  int (*error_name)(int err, const char **name);
  int (*error_string)(int err, const char **text);
} hippo__gpu_vm_calls;

/* CUDA: the driver's context calls, through the runtime's entry point only
 * (CUDA 11.3 on; never from libcuda by name, whose unversioned symbols
 * are older ABIs); all optional.  With the first five the backend makes
 * its device current by pushing that device's primary context and pops
 * it after, so the thread's runtime device is never set (backend_hip.c
 * hippo__hip_enter); the last two name the device of a stream when the runtime has
 * no cudaStreamGetDevice (before CUDA 12.8).  Contexts are opaque
 * pointers; a CUdevice is an int. */
typedef struct hippo__gpu_ctx_calls {
  int (*get_current)(void **ctx);                /* cuCtxGetCurrent */
  int (*push)(void *ctx);                        /* cuCtxPushCurrent */
  int (*pop)(void **ctx);                        /* cuCtxPopCurrent */
  int (*primary_retain)(void **ctx, int device); /* cuDevicePrimaryCtxRetain */
  int (*primary_release)(int device);          /* cuDevicePrimaryCtxRelease */
  int (*stream_ctx)(void *stream, void **ctx);   /* cuStreamGetCtx */
  int (*get_device)(int *device);                /* cuCtxGetDevice */
} hippo__gpu_ctx_calls;

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
  int (*device_sync)(void);    /* hipDeviceSynchronize, cudaDeviceSynchronize */
  int (*device_can_access_peer)(int *can, int device, int peer);
  /* virtual memory: found at load, never required (see above) */
  hippo__gpu_vm_calls vm;
  hippo__gpu_ctx_calls ctx; /* CUDA only (see above) */
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

/* A failed virtual-memory call (`call` without its prefix: "MemMap"): its
 * status (hippo__gpu_status), and last_error "<RT> <vm prefix><call>
 * failed: <name> (<code>): <message>[; hint]": "HIP hipMemMap failed: ...",
 * "CUDA cuMemMap failed: CUDA_ERROR_OUT_OF_MEMORY (2): ..." (the driver's
 * names, else hippo's table of CUresult names). */
hippo_status hippo__gpu_vm_fail(const hippo__gpu_rt *rt, int err,
                                const char *call, const char *hint);

/* A CUresult's name from hippo's table ("CUDA_ERROR_NOT_SUPPORTED"), or
 * "unknown". */
const char *hippo__cu_err_name(int err);

#endif /* HIPPO_GPU_RT_H */
