/* gpu-rt-headers-hip.c -- hippo's HIP constants and error names against
 * hip/hip_runtime_api.h (gpu-rt-headers.h). */
#include <config.h>

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "gpu-rt-headers.h"
#include "gpu_rt.h"

void gpu_rt_headers_note(char *bad, size_t len, const char *what, long hippo,
                         long header) {
  size_t at = strlen(bad);
  if (at < len)
    snprintf(bad + at, len - at, "%s%s: hippo %ld, header %ld",
             at ? "; " : "", what, hippo, header);
}

#ifdef HAVE_HIP_HEADERS
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime_api.h>

int gpu_rt_headers_hip(char *bad, size_t len) {
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
  SAME(HIPPO__GPU_SUCCESS, hipSuccess);
  SAME(HIPPO__GPU_INVALID_VALUE, hipErrorInvalidValue);
  SAME(HIPPO__GPU_OUT_OF_MEMORY, hipErrorOutOfMemory);
  SAME(HIPPO__GPU_INIT_ERROR, hipErrorNotInitialized);
  SAME(HIPPO__GPU_INSUFFICIENT_DRIVER, hipErrorInsufficientDriver);
  SAME(HIPPO__GPU_NO_DEVICE, hipErrorNoDevice);
  SAME(HIPPO__GPU_INVALID_DEVICE, hipErrorInvalidDevice);
  SAME(HIPPO__GPU_INVALID_HANDLE, hipErrorInvalidHandle);
  SAME(HIPPO__GPU_NOT_READY, hipErrorNotReady);
  SAME(HIPPO__GPU_NOT_SUPPORTED, hipErrorNotSupported);
  SAME(HIPPO__GPU_CAPTURE_UNSUPPORTED, hipErrorStreamCaptureUnsupported);
  SAME(HIPPO__GPU_CAPTURE_INVALIDATED, hipErrorStreamCaptureInvalidated);
  SAME(HIPPO__GPU_CAPTURE_STATUS_INVALIDATED, hipStreamCaptureStatusInvalidated);
  SAME(HIPPO__GPU_CAPTURE_IMPLICIT, hipErrorStreamCaptureImplicit);
  SAME(HIPPO__GPU_UNKNOWN, hipErrorUnknown);
  /* hippo calls through int-returning pointers: the enum is int-sized */
  SAME(sizeof(int), sizeof(hipError_t));
  /* the other enums */
  SAME(HIPPO__GPU_MEMCPY_H2D, hipMemcpyHostToDevice);
  SAME(HIPPO__GPU_MEMCPY_D2H, hipMemcpyDeviceToHost);
  SAME(HIPPO__GPU_MEMCPY_D2D, hipMemcpyDeviceToDevice);
  SAME(HIPPO__GPU_EVENT_DISABLE_TIMING, hipEventDisableTiming);
  SAME(HIPPO__GPU_STREAM_NON_BLOCKING, hipStreamNonBlocking);
  SAME(HIPPO__GPU_CAPTURE_NONE, hipStreamCaptureStatusNone);
  SAME(HIPPO__GPU_CAPTURE_RELAXED, hipStreamCaptureModeRelaxed);
  SAME(HIPPO__GPU_COMPUTE_PROHIBITED, hipComputeModeProhibited);
  SAME(sizeof(int), sizeof(hipStreamCaptureStatus));
  SAME(sizeof(int), sizeof(hipStreamCaptureMode));
  SAME(sizeof(int), sizeof(hipDevice_t)); /* hipDeviceGetName's device */
  /* device attributes */
  SAME(HIPPO__HIP_ATTR_COMPUTE_MODE, hipDeviceAttributeComputeMode);
  SAME(HIPPO__HIP_ATTR_CC_MAJOR, hipDeviceAttributeComputeCapabilityMajor);
  SAME(HIPPO__HIP_ATTR_CC_MINOR, hipDeviceAttributeComputeCapabilityMinor);
  SAME(HIPPO__HIP_ATTR_TEXTURE_ALIGNMENT, hipDeviceAttributeTextureAlignment);
  /* virtual memory: the enums and structs hippo passes (gpu_rt.h) */
  SAME(HIPPO__GPU_MEM_ALLOCATION_PINNED, hipMemAllocationTypePinned);
  SAME(HIPPO__GPU_MEM_LOCATION_DEVICE, hipMemLocationTypeDevice);
  SAME(HIPPO__GPU_MEM_HANDLE_NONE, hipMemHandleTypeNone);
  SAME(HIPPO__GPU_MEM_HANDLE_POSIX_FD, hipMemHandleTypePosixFileDescriptor);
  SAME(HIPPO__GPU_MEM_ACCESS_RW, hipMemAccessFlagsProtReadWrite);
  SAME(HIPPO__GPU_MEM_GRANULARITY_MIN, hipMemAllocationGranularityMinimum);
  SAME(sizeof(int), sizeof(hipMemAllocationType));
  SAME(sizeof(int), sizeof(hipMemAllocationHandleType));
  SAME(sizeof(int), sizeof(hipMemLocationType));
  SAME(sizeof(int), sizeof(hipMemAccessFlags));
  SAME(sizeof(int), sizeof(hipMemAllocationGranularity_flags));
  SAME(sizeof(unsigned long long), sizeof(hipMemGenericAllocationHandle_t));
  SAME(sizeof(hippo__gpu_mem_location), sizeof(hipMemLocation));
  SAME(offsetof(hippo__gpu_mem_location, type), offsetof(hipMemLocation, type));
  SAME(offsetof(hippo__gpu_mem_location, id), offsetof(hipMemLocation, id));
  SAME(sizeof(hippo__gpu_mem_access), sizeof(hipMemAccessDesc));
  SAME(offsetof(hippo__gpu_mem_access, location),
       offsetof(hipMemAccessDesc, location));
  SAME(offsetof(hippo__gpu_mem_access, flags),
       offsetof(hipMemAccessDesc, flags));
  /* the first version hippo maps on, as HIP_VERSION counts */
  SAME(HIPPO__HIP_VMM_V61, 6 * 10000000 + 1 * 100000);
#if HIP_VERSION >= 50300000
  /* HIP 5.3 and later: CUDA's layout, and the support attribute */
  SAME(HIPPO__HIP_ATTR_VMM_SUPPORTED,
       hipDeviceAttributeVirtualMemoryManagementSupported);
  SAME(sizeof(hippo__gpu_mem_prop), sizeof(hipMemAllocationProp));
  SAME(offsetof(hippo__gpu_mem_prop, type),
       offsetof(hipMemAllocationProp, type));
  SAME(offsetof(hippo__gpu_mem_prop, requested_handle_types),
       offsetof(hipMemAllocationProp, requestedHandleType));
  SAME(offsetof(hippo__gpu_mem_prop, location),
       offsetof(hipMemAllocationProp, location));
  SAME(offsetof(hippo__gpu_mem_prop, win32_handle_metadata),
       offsetof(hipMemAllocationProp, win32HandleMetaData));
  SAME(offsetof(hippo__gpu_mem_prop, alloc_flags.compression_type),
       offsetof(hipMemAllocationProp, allocFlags.compressionType));
  SAME(offsetof(hippo__gpu_mem_prop, alloc_flags.gpu_direct_rdma_capable),
       offsetof(hipMemAllocationProp, allocFlags.gpuDirectRDMACapable));
  SAME(offsetof(hippo__gpu_mem_prop, alloc_flags.usage),
       offsetof(hipMemAllocationProp, allocFlags.usage));
#endif
#undef SAME
  /* hippo's name table (used when the runtime has no hipGetErrorName)
   * spells each code as the header does */
#define NAMED(code)                                                            \
  do {                                                                         \
    const char *mine = hippo__gpu_err_name(HIPPO__GPU_HIP, NULL, (code));      \
    n++;                                                                       \
    if (strcmp(mine, #code)) {                                                 \
      size_t at = strlen(bad);                                                 \
      if (at < len)                                                            \
        snprintf(bad + at, len - at, "%sname of %d: hippo %s, header %s",      \
                 at ? "; " : "", (int)(code), mine, #code);                    \
    }                                                                          \
  } while (0)
  NAMED(hipSuccess);
  NAMED(hipErrorInvalidValue);
  NAMED(hipErrorOutOfMemory);
  NAMED(hipErrorNotInitialized);
  NAMED(hipErrorInsufficientDriver);
  NAMED(hipErrorNoDevice);
  NAMED(hipErrorInvalidDevice);
  NAMED(hipErrorInvalidResourceHandle);
  NAMED(hipErrorNotReady);
  NAMED(hipErrorNotSupported);
  NAMED(hipErrorStreamCaptureUnsupported);
  NAMED(hipErrorStreamCaptureInvalidated);
  NAMED(hipErrorStreamCaptureImplicit);
  NAMED(hipErrorUnknown);
#undef NAMED
  return n;
}
#else
int gpu_rt_headers_hip(char *bad, size_t len) {
  (void)len;
  bad[0] = '\0';
  return 0;
}
#endif
