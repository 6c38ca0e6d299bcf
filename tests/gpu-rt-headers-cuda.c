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
  return n;
}
#else
int gpu_rt_headers_cuda(char *bad, size_t len) {
  (void)len;
  bad[0] = '\0';
  return 0;
}
#endif
