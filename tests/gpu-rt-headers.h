/* gpu-rt-headers.h -- hippo's copies of the GPU runtimes' constants
 * (src/gpu_rt.h) and error names (gpu_rt.c) against the real headers, for
 * tests/test-gpu-rt.c.
 *
 * HIP's header (hip/hip_runtime_api.h, AMD platform) and CUDA's
 * (cuda_runtime_api.h) cannot share a translation unit (both declare
 * char1, dim3, ...), so each is read in a file of its own:
 * gpu-rt-headers-hip.c and gpu-rt-headers-cuda.c.
 *
 * Each function compares every value and name hippo keeps for that runtime
 * and returns how many comparisons it made: 0 when the header was not
 * installed at configure time (HAVE_HIP_HEADERS / HAVE_CUDA_HEADERS).
 * `bad` receives the mismatches, "; "-separated ("" when none).
 */
#ifndef HIPPO_GPU_RT_HEADERS_H
#define HIPPO_GPU_RT_HEADERS_H

#include <stddef.h>

int gpu_rt_headers_hip(char *bad, size_t len);
int gpu_rt_headers_cuda(char *bad, size_t len);

/* Appends one mismatch to `bad` (shared by both files). */
void gpu_rt_headers_note(char *bad, size_t len, const char *what, long hippo,
                         long header);

#endif /* HIPPO_GPU_RT_HEADERS_H */
