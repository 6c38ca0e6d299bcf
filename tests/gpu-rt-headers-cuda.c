/* gpu-rt-headers-cuda.c -- hippo's CUDA constants and error names against
 * cuda_runtime_api.h (gpu-rt-headers.h). */
#include <config.h>

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "gpu-rt-headers.h"
#include "gpu_rt.h"

#ifdef HAVE_CUDA_HEADERS
#include <cuda_runtime_api.h>
/* the driver's header, beside the runtime's (the virtual-memory calls) */
#if defined(__has_include)
#if __has_include(<cuda.h>)
#include <cuda.h>
#define HIPPO_HAVE_CUDA_DRIVER_HEADER 1
#endif
#endif

int gpu_rt_headers_cuda(char *bad, size_t len) {
  int n = 0;
  bad[0] = '\0';
#define SAME(mine, theirs)                                                     \
  do {                                                                         \
    n++;                                                                       \
    if ((long)(mine) != (long)(theirs))                                        \
      gpu_rt_headers_note(bad, len, #mine " vs " #theirs, (long)(mine),        \
                          (long)(theirs));                                     \
  } while (0)
  /* error codes hippo handles */
  SAME(HIPPO__GPU_SUCCESS, cudaSuccess);
  SAME(HIPPO__GPU_INVALID_VALUE, cudaErrorInvalidValue);
  SAME(HIPPO__GPU_OUT_OF_MEMORY, cudaErrorMemoryAllocation);
  SAME(HIPPO__GPU_INIT_ERROR, cudaErrorInitializationError);
  SAME(HIPPO__GPU_INSUFFICIENT_DRIVER, cudaErrorInsufficientDriver);
  SAME(HIPPO__GPU_NO_DEVICE, cudaErrorNoDevice);
  SAME(HIPPO__GPU_INVALID_DEVICE, cudaErrorInvalidDevice);
  SAME(HIPPO__GPU_INVALID_HANDLE, cudaErrorInvalidResourceHandle);
  SAME(HIPPO__GPU_NOT_READY, cudaErrorNotReady);
  SAME(HIPPO__GPU_NOT_SUPPORTED, cudaErrorNotSupported);
  SAME(HIPPO__GPU_DRIVER_MISMATCH, cudaErrorSystemDriverMismatch);
  SAME(HIPPO__GPU_COMPAT_UNSUPPORTED, cudaErrorCompatNotSupportedOnDevice);
  SAME(HIPPO__GPU_CAPTURE_UNSUPPORTED, cudaErrorStreamCaptureUnsupported);
  SAME(HIPPO__GPU_CAPTURE_INVALIDATED, cudaErrorStreamCaptureInvalidated);
  SAME(HIPPO__GPU_CAPTURE_STATUS_INVALIDATED, cudaStreamCaptureStatusInvalidated);
  SAME(HIPPO__GPU_CAPTURE_IMPLICIT, cudaErrorStreamCaptureImplicit);
  SAME(HIPPO__GPU_UNKNOWN, cudaErrorUnknown);
  SAME(sizeof(int), sizeof(cudaError_t));
  /* the other enums */
  SAME(HIPPO__GPU_MEMCPY_H2D, cudaMemcpyHostToDevice);
  SAME(HIPPO__GPU_MEMCPY_D2H, cudaMemcpyDeviceToHost);
  SAME(HIPPO__GPU_MEMCPY_D2D, cudaMemcpyDeviceToDevice);
  SAME(HIPPO__GPU_EVENT_DISABLE_TIMING, cudaEventDisableTiming);
  SAME(HIPPO__GPU_STREAM_NON_BLOCKING, cudaStreamNonBlocking);
  SAME(HIPPO__GPU_CAPTURE_NONE, cudaStreamCaptureStatusNone);
  SAME(HIPPO__GPU_CAPTURE_RELAXED, cudaStreamCaptureModeRelaxed);
  SAME(HIPPO__GPU_COMPUTE_PROHIBITED, cudaComputeModeProhibited);
  SAME(sizeof(int), sizeof(enum cudaStreamCaptureStatus));
  SAME(sizeof(int), sizeof(enum cudaStreamCaptureMode));
  /* device attributes */
  SAME(HIPPO__CUDA_ATTR_TEXTURE_ALIGNMENT, cudaDevAttrTextureAlignment);
  SAME(HIPPO__CUDA_ATTR_COMPUTE_MODE, cudaDevAttrComputeMode);
  SAME(HIPPO__CUDA_ATTR_CC_MAJOR, cudaDevAttrComputeCapabilityMajor);
  SAME(HIPPO__CUDA_ATTR_CC_MINOR, cudaDevAttrComputeCapabilityMinor);
  /* backend_hip.c reads the device's name from cudaGetDeviceProperties
   * into a 16 KiB buffer: name[256] first, the struct smaller */
  SAME(0, offsetof(struct cudaDeviceProp, name));
  SAME(256, sizeof(((struct cudaDeviceProp *)NULL)->name));
  SAME(1, sizeof(struct cudaDeviceProp) <= 16384);
  /* the runtime's entry points to the driver's calls (gpu_rt.c) */
#if CUDART_VERSION >= 11030
  SAME(HIPPO__CUDA_ENTRY_DEFAULT, cudaEnableDefault);
#endif
#if CUDART_VERSION >= 12000
  SAME(HIPPO__CUDA_ENTRY_FOUND, cudaDriverEntryPointSuccess);
  SAME(sizeof(int), sizeof(enum cudaDriverEntryPointQueryResult));
#endif
  SAME(sizeof(int), sizeof(cudaError_t));
#ifdef HIPPO_HAVE_CUDA_DRIVER_HEADER
  /* virtual memory: the driver's codes, enums and structs (gpu_rt.h) */
  SAME(sizeof(int), sizeof(CUresult));
  SAME(HIPPO__GPU_SUCCESS, CUDA_SUCCESS);
  SAME(HIPPO__GPU_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE);
  SAME(HIPPO__GPU_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY);
  SAME(HIPPO__GPU_INIT_ERROR, CUDA_ERROR_NOT_INITIALIZED);
  SAME(HIPPO__CU_DEINITIALIZED, CUDA_ERROR_DEINITIALIZED);
  SAME(HIPPO__GPU_NO_DEVICE, CUDA_ERROR_NO_DEVICE);
  SAME(HIPPO__GPU_INVALID_DEVICE, CUDA_ERROR_INVALID_DEVICE);
  SAME(HIPPO__CU_INVALID_CONTEXT, CUDA_ERROR_INVALID_CONTEXT);
  SAME(HIPPO__GPU_INVALID_HANDLE, CUDA_ERROR_INVALID_HANDLE);
  SAME(HIPPO__CU_NOT_PERMITTED, CUDA_ERROR_NOT_PERMITTED);
  SAME(HIPPO__GPU_NOT_SUPPORTED, CUDA_ERROR_NOT_SUPPORTED);
  SAME(HIPPO__GPU_UNKNOWN, CUDA_ERROR_UNKNOWN);
  SAME(HIPPO__CU_ATTR_VMM_SUPPORTED,
       CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
  SAME(HIPPO__GPU_MEM_ALLOCATION_PINNED, CU_MEM_ALLOCATION_TYPE_PINNED);
  SAME(HIPPO__GPU_MEM_LOCATION_DEVICE, CU_MEM_LOCATION_TYPE_DEVICE);
  SAME(HIPPO__GPU_MEM_HANDLE_NONE, CU_MEM_HANDLE_TYPE_NONE);
  SAME(HIPPO__GPU_MEM_HANDLE_POSIX_FD, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  SAME(HIPPO__CU_ATTR_POSIX_FD_SUPPORTED,
       CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED);
  SAME(HIPPO__CU_ATTR_RDMA_VMM_SUPPORTED,
       CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED);
  SAME(HIPPO__GPU_MEM_ACCESS_RW, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  SAME(HIPPO__GPU_MEM_GRANULARITY_MIN, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  SAME(sizeof(int), sizeof(CUmemAllocationType));
  SAME(sizeof(int), sizeof(CUmemAllocationHandleType));
  SAME(sizeof(int), sizeof(CUmemLocationType));
  SAME(sizeof(int), sizeof(CUmemAccess_flags));
  SAME(sizeof(int), sizeof(CUmemAllocationGranularity_flags));
  SAME(sizeof(int), sizeof(CUdevice));
  SAME(sizeof(int), sizeof(CUdevice_attribute));
  SAME(sizeof(void *), sizeof(CUdeviceptr));
  SAME(sizeof(unsigned long long), sizeof(CUmemGenericAllocationHandle));
  SAME(sizeof(hippo__gpu_mem_location), sizeof(CUmemLocation));
  SAME(offsetof(hippo__gpu_mem_location, type), offsetof(CUmemLocation, type));
  SAME(offsetof(hippo__gpu_mem_location, id), offsetof(CUmemLocation, id));
  SAME(sizeof(hippo__gpu_mem_access), sizeof(CUmemAccessDesc));
  SAME(offsetof(hippo__gpu_mem_access, location),
       offsetof(CUmemAccessDesc, location));
  SAME(offsetof(hippo__gpu_mem_access, flags),
       offsetof(CUmemAccessDesc, flags));
  SAME(sizeof(hippo__gpu_mem_prop), sizeof(CUmemAllocationProp));
  SAME(offsetof(hippo__gpu_mem_prop, type),
       offsetof(CUmemAllocationProp, type));
  SAME(offsetof(hippo__gpu_mem_prop, requested_handle_types),
       offsetof(CUmemAllocationProp, requestedHandleTypes));
  SAME(offsetof(hippo__gpu_mem_prop, location),
       offsetof(CUmemAllocationProp, location));
  SAME(offsetof(hippo__gpu_mem_prop, win32_handle_metadata),
       offsetof(CUmemAllocationProp, win32HandleMetaData));
  SAME(offsetof(hippo__gpu_mem_prop, alloc_flags.compression_type),
       offsetof(CUmemAllocationProp, allocFlags.compressionType));
  SAME(offsetof(hippo__gpu_mem_prop, alloc_flags.gpu_direct_rdma_capable),
       offsetof(CUmemAllocationProp, allocFlags.gpuDirectRDMACapable));
  SAME(offsetof(hippo__gpu_mem_prop, alloc_flags.usage),
       offsetof(CUmemAllocationProp, allocFlags.usage));
  SAME(offsetof(hippo__gpu_mem_prop, alloc_flags.reserved),
       offsetof(CUmemAllocationProp, allocFlags.reserved));
#endif
#undef SAME
#define NAMED(code)                                                            \
  do {                                                                         \
    const char *mine = hippo__gpu_err_name(HIPPO__GPU_CUDA, NULL, (code));     \
    n++;                                                                       \
    if (strcmp(mine, #code)) {                                                 \
      size_t at = strlen(bad);                                                 \
      if (at < len)                                                            \
        snprintf(bad + at, len - at, "%sname of %d: hippo %s, header %s",      \
                 at ? "; " : "", (int)(code), mine, #code);                    \
    }                                                                          \
  } while (0)
  NAMED(cudaSuccess);
  NAMED(cudaErrorInvalidValue);
  NAMED(cudaErrorMemoryAllocation);
  NAMED(cudaErrorInitializationError);
  NAMED(cudaErrorInsufficientDriver);
  NAMED(cudaErrorNoDevice);
  NAMED(cudaErrorInvalidDevice);
  NAMED(cudaErrorInvalidResourceHandle);
  NAMED(cudaErrorNotReady);
  NAMED(cudaErrorNotSupported);
  NAMED(cudaErrorSystemDriverMismatch);
  NAMED(cudaErrorCompatNotSupportedOnDevice);
  NAMED(cudaErrorStreamCaptureUnsupported);
  NAMED(cudaErrorStreamCaptureInvalidated);
  NAMED(cudaErrorStreamCaptureImplicit);
  NAMED(cudaErrorUnknown);
#undef NAMED
#ifdef HIPPO_HAVE_CUDA_DRIVER_HEADER
  /* hippo's CUresult names (when the driver gives none) */
#define CU_NAMED(code)                                                         \
  do {                                                                         \
    const char *mine = hippo__cu_err_name(code);                               \
    n++;                                                                       \
    if (strcmp(mine, #code)) {                                                 \
      size_t at = strlen(bad);                                                 \
      if (at < len)                                                            \
        snprintf(bad + at, len - at, "%sdriver name of %d: hippo %s, header "  \
                 "%s", at ? "; " : "", (int)(code), mine, #code);              \
    }                                                                          \
  } while (0)
  CU_NAMED(CUDA_SUCCESS);
  CU_NAMED(CUDA_ERROR_INVALID_VALUE);
  CU_NAMED(CUDA_ERROR_OUT_OF_MEMORY);
  CU_NAMED(CUDA_ERROR_NOT_INITIALIZED);
  CU_NAMED(CUDA_ERROR_DEINITIALIZED);
  CU_NAMED(CUDA_ERROR_NO_DEVICE);
  CU_NAMED(CUDA_ERROR_INVALID_DEVICE);
  CU_NAMED(CUDA_ERROR_INVALID_CONTEXT);
  CU_NAMED(CUDA_ERROR_INVALID_HANDLE);
  CU_NAMED(CUDA_ERROR_NOT_PERMITTED);
  CU_NAMED(CUDA_ERROR_NOT_SUPPORTED);
  CU_NAMED(CUDA_ERROR_UNKNOWN);
#undef CU_NAMED
#endif
  return n;
}
#else
int gpu_rt_headers_cuda(char *bad, size_t len) {
  (void)len;
  bad[0] = '\0';
  return 0;
}
#endif
