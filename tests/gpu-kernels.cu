// gpu-kernels.cu -- kernels on hippo's memory, one source for both
// vendors (hipcc for AMD, nvcc for NVIDIA: <<<>>> launches, the runtime's
// header chosen by platform).  make check compiles it with hipcc for AMD
// targets wherever hipcc works (tests/test-hipcc.sh, compile only: no GPU
// here); tests/device-check.sh builds it with nvcc on an NVIDIA GPU and
// runs it:
//   fill   a VIRTUAL reservation filled by a kernel and checked by
//          another on hippo's stream: no word wrong;
//   unmap  a kernel that spins, then writes the whole reservation, still
//          running while the reservation is released and hippo gives its
//          granules back (cleanup): hippo's wait keeps the unmap after the
//          kernel, so no fault, and the stream's work ends cleanly;
//   peer   with two GPUs or more: device 1's kernel fills device 0's
//          VIRTUAL reservation (peer access enabled, hippo granting access
//          to every peer), device 0's checks it; with one GPU it says so
//          and passes.
// Usage: gpu-kernels [fill|unmap|peer]... (default all three); HIPPO_PLUGIN
// names the plugin.  Exit 0, 1 (a check failed), 77 (no GPU).
#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
#define gpuStream_t hipStream_t
#define gpuSuccess hipSuccess
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamNonBlocking hipStreamNonBlocking
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuStreamDestroy hipStreamDestroy
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemcpy hipMemcpy
#define gpuMemset hipMemset
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuGetLastError hipGetLastError
#define gpuGetErrorString hipGetErrorString
#define gpuDeviceSynchronize hipDeviceSynchronize
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuSetDevice hipSetDevice
#define gpuDeviceCanAccessPeer hipDeviceCanAccessPeer
#define gpuDeviceEnablePeerAccess hipDeviceEnablePeerAccess
#define gpuErrorPeerAccessAlreadyEnabled hipErrorPeerAccessAlreadyEnabled
typedef hipError_t gpuError_t;
#else
#include <cuda_runtime.h>
#define gpuStream_t cudaStream_t
#define gpuSuccess cudaSuccess
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuStreamDestroy cudaStreamDestroy
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemcpy cudaMemcpy
#define gpuMemset cudaMemset
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuGetLastError cudaGetLastError
#define gpuGetErrorString cudaGetErrorString
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuSetDevice cudaSetDevice
#define gpuDeviceCanAccessPeer cudaDeviceCanAccessPeer
#define gpuDeviceEnablePeerAccess cudaDeviceEnablePeerAccess
#define gpuErrorPeerAccessAlreadyEnabled cudaErrorPeerAccessAlreadyEnabled
typedef cudaError_t gpuError_t;
#endif

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "hippo.h"

__global__ void fill(unsigned *p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = seed ^ (unsigned)(i * 2654435761u);
}

__global__ void check(const unsigned *p, size_t n, unsigned seed,
                      unsigned long long *bad) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    if (p[i] != (seed ^ (unsigned)(i * 2654435761u)))
      atomicAdd(bad, 1ull);
}

// Spins about `cycles` clock ticks, then fills: still writing when the
// host releases the reservation.
__global__ void spin_fill(unsigned *p, size_t n, unsigned seed,
                          long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = seed + (unsigned)i;
}

namespace {

const hippo_api *api;
hippo_device *dev;
hippo_stream *s;
gpuStream_t stream;

bool gpu_ok(gpuError_t e, const char *what) {
  if (e == gpuSuccess)
    return true;
  std::printf("FAIL: %s: %s\n", what, gpuGetErrorString(e));
  return false;
}

bool hippo_ok(hippo_status st, const char *what) {
  if (st == HIPPO_SUCCESS)
    return true;
  std::printf("FAIL: %s: %s\n", what, api->last_error());
  return false;
}

bool case_fill() {
  const size_t bytes = 64u << 20, n = bytes / 4;
  hippo_handle h = 0;
  void *p = nullptr;
  unsigned long long *bad = nullptr, nbad = ~0ull;
  bool ok = hippo_ok(api->reserve(s, bytes, HIPPO_MODE_AUTO, &h), "reserve") &&
            hippo_ok(api->resolve(s, h, &p, nullptr), "resolve") &&
            gpu_ok(gpuMalloc((void **)&bad, sizeof *bad), "Malloc") &&
            gpu_ok(gpuMemset(bad, 0, sizeof *bad), "Memset");
  if (ok) {
    fill<<<256, 256, 0, stream>>>((unsigned *)p, n, 0x5eedu);
    check<<<256, 256, 0, stream>>>((const unsigned *)p, n, 0x5eedu, bad);
    ok = gpu_ok(gpuGetLastError(), "launch") &&
         gpu_ok(gpuStreamSynchronize(stream), "StreamSynchronize") &&
         gpu_ok(gpuMemcpy(&nbad, bad, sizeof nbad, gpuMemcpyDeviceToHost),
                "Memcpy");
  }
  if (ok && nbad != 0) {
    std::printf("FAIL: fill: %llu of %zu words wrong\n", nbad, n);
    ok = false;
  }
  if (h)
    ok = hippo_ok(api->release(s, h), "release") && ok;
  if (bad)
    gpuFree(bad);
  std::printf("%s: fill: 64 MiB of a VIRTUAL reservation filled and "
              "checked by kernels on hippo's stream\n",
              ok ? "PASS" : "FAIL");
  return ok;
}

bool case_unmap() {
  const size_t bytes = 32u << 20, n = bytes / 4;
  hippo_handle h = 0;
  void *p = nullptr;
  bool ok = hippo_ok(api->reserve(s, bytes, HIPPO_MODE_AUTO, &h), "reserve") &&
            hippo_ok(api->resolve(s, h, &p, nullptr), "resolve");
  if (ok) {
    // about 50 ms at 1-2 GHz
    spin_fill<<<64, 256, 0, stream>>>((unsigned *)p, n, 7u, 100000000ll);
    ok = gpu_ok(gpuGetLastError(), "launch");
  }
  // released and given back at once, the kernel still running
  if (h)
    ok = hippo_ok(api->release(s, h), "release") && ok;
  ok = hippo_ok(api->cleanup(dev, s), "cleanup (the granules back)") && ok;
  ok = gpu_ok(gpuStreamSynchronize(stream), "the kernel's end") && ok;
  ok = gpu_ok(gpuGetLastError(), "after the kernel") && ok;
  std::printf("%s: unmap: granules given back while a kernel still wrote "
              "them: no fault\n",
              ok ? "PASS" : "FAIL");
  return ok;
}

bool case_peer() {
  const size_t bytes = 16u << 20, n = bytes / 4;
  int count = 0, can = 0;
  hippo_handle h = 0;
  void *p = nullptr;
  unsigned long long *bad = nullptr, nbad = ~0ull;
  bool ok;
  if (gpuGetDeviceCount(&count) != gpuSuccess || count < 2) {
    std::printf("PASS: peer: one GPU here, nothing to check\n");
    return true;
  }
  if (gpuDeviceCanAccessPeer(&can, 1, 0) != gpuSuccess || !can) {
    std::printf("PASS: peer: device 1 cannot access device 0's memory\n");
    return true;
  }
  ok = hippo_ok(api->reserve(s, bytes, HIPPO_MODE_AUTO, &h), "reserve") &&
       hippo_ok(api->resolve(s, h, &p, nullptr), "resolve") &&
       gpu_ok(gpuSetDevice(1), "SetDevice(1)");
  if (ok) {
    gpuError_t e = gpuDeviceEnablePeerAccess(0, 0);
    ok = e == gpuSuccess || e == gpuErrorPeerAccessAlreadyEnabled ||
         gpu_ok(e, "DeviceEnablePeerAccess");
    (void)gpuGetLastError();
  }
  if (ok) { // device 1 writes device 0's granules
    fill<<<128, 256>>>((unsigned *)p, n, 0xbeefu);
    ok = gpu_ok(gpuGetLastError(), "launch on device 1") &&
         gpu_ok(gpuDeviceSynchronize(), "device 1's kernel");
  }
  ok = gpu_ok(gpuSetDevice(0), "SetDevice(0)") && ok;
  if (ok && gpu_ok(gpuMalloc((void **)&bad, sizeof *bad), "Malloc") &&
      gpu_ok(gpuMemset(bad, 0, sizeof *bad), "Memset")) {
    check<<<128, 256, 0, stream>>>((const unsigned *)p, n, 0xbeefu, bad);
    ok = gpu_ok(gpuStreamSynchronize(stream), "check") &&
         gpu_ok(gpuMemcpy(&nbad, bad, sizeof nbad, gpuMemcpyDeviceToHost),
                "Memcpy") &&
         nbad == 0;
  }
  if (bad)
    gpuFree(bad);
  if (h)
    ok = hippo_ok(api->release(s, h), "release") && ok;
  std::printf("%s: peer: device 1 filled device 0's VIRTUAL reservation, "
              "device 0 checked it\n",
              ok ? "PASS" : "FAIL");
  return ok;
}

} // namespace

int main(int argc, char **argv) {
  const char *plugin = std::getenv("HIPPO_PLUGIN");
  void *lib = nullptr;
  hippo_device_desc d;
  hippo_layout l;
  bool ok = true;
  if (hippo_load(plugin ? plugin : "hippo.so", &lib, &api) != HIPPO_SUCCESS) {
    std::printf("FAIL: %s\n", hippo_load_error());
    return 1;
  }
  std::memset(&d, 0, sizeof d);
  std::memset(&l, 0, sizeof l);
  l.struct_size = sizeof l;
  l.preset = HIPPO_PRESET_VIRTUAL;
  d.struct_size = sizeof d;
  d.backend = HIPPO_BACKEND_HIP;
  d.layout = &l;
  if (api->device_open(&d, &dev) != HIPPO_SUCCESS) {
    std::printf("SKIP: no GPU: %s\n", api->last_error());
    return 77;
  }
  if (!gpu_ok(gpuStreamCreateWithFlags(&stream, gpuStreamNonBlocking),
              "StreamCreateWithFlags") ||
      !hippo_ok(api->stream_attach(dev, stream, &s), "stream_attach"))
    return 1;
  static const char *const all[] = {"fill", "unmap", "peer"};
  for (int i = argc > 1 ? 1 : 0; i < (argc > 1 ? argc : 3); i++) {
    const char *c = argc > 1 ? argv[i] : all[i];
    if (!std::strcmp(c, "fill"))
      ok = case_fill() && ok;
    else if (!std::strcmp(c, "unmap"))
      ok = case_unmap() && ok;
    else if (!std::strcmp(c, "peer"))
      ok = case_peer() && ok;
    else {
      std::printf("gpu-kernels: unknown case '%s' (fill, unmap, peer)\n", c);
      return 2;
    }
  }
  ok = hippo_ok(api->stream_detach(s), "stream_detach") && ok;
  ok = hippo_ok(api->device_close(dev), "device_close") && ok;
  gpuStreamDestroy(stream);
  return ok ? 0 : 1;
}
