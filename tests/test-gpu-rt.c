/* test-gpu-rt.c -- the GPU runtime loader (src/gpu_rt.[ch]) and the HIP
 * backend (src/backend_hip*.c), without a GPU.
 *
 *  - constants: hippo's copies of the runtimes' enum values and error names
 *    against the real headers, when installed (gpu-rt-headers-*.c);
 *  - errors: every error code hippo names mapped to its status and name,
 *    hippo__gpu_fail's message, with no runtime and with a loaded one;
 *  - the loader: a missing library, a library lacking a call, the
 *    process-wide cache;
 *  - the backend on the stand-in runtimes (tests/fake: libfakehip.so,
 *    libfakecudart.so, paths in $FAKE_HIP_LIB and $FAKE_CUDA_LIB, set by
 *    make check): alignment, capacity as a budget, ordinals, the runtime's
 *    refusals (no device, old driver, prohibited mode), which runtime
 *    serves, the device's strings, streams of another device, range
 *    checks, fault injection and counters, what destroy gives back;
 *  - devices (device.c): AUTO's choice and its note, the presets sized on
 *    the budget, stream_attach refusing another device's stream.
 *
 * Every test starts and ends with no runtime loaded (hippo__gpu_rt_forget)
 * and none of the variables below set, so it reads the environment it sets
 * itself, forked (CK_FORK) or not (make check-valgrind).  A library
 * variable hippo would search with is always pointed at the fake or at a
 * path that does not exist, so the machine's own runtimes (if any) never
 * load here.
 */
#include <config.h>

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "emutest.h"
#include "gpu-rt-headers.h"
#include "gpu_rt.h"
#include "layout.h"

/* A library that does not exist. */
#define NOLIB "/nonexistent/hippo-test/libnone.so"

static const char *const env_vars[] = {
    "HIPPO_GPU_RUNTIME", "HIPPO_HIP_LIBRARY",  "HIPPO_CUDA_LIBRARY",
    "FAKE_GPU_DEVICES",  "FAKE_GPU_MEMORY",    "FAKE_GPU_ALIGNMENT",
    "FAKE_GPU_FAIL",     NULL};

static void clean(void) {
  hippo__gpu_rt_forget();
  for (const char *const *v = env_vars; *v; v++)
    unsetenv(*v);
}

/* ---- helpers ------------------------------------------------------------- */

/* The stand-in runtimes' paths, from make check's environment. */
static const char *fake_hip(void) { return tu_fake_lib("FAKE_HIP_LIB"); }
static const char *fake_cuda(void) { return tu_fake_lib("FAKE_CUDA_LIB"); }

/* The libraries hippo may load: a path each (NULL: one that does not
 * exist, so nothing installed on this machine loads). */
static void runtimes(const char *hip, const char *cuda) {
  setenv("HIPPO_HIP_LIBRARY", hip ? hip : NOLIB, 1);
  setenv("HIPPO_CUDA_LIBRARY", cuda ? cuda : NOLIB, 1);
}

static void env(const char *name, const char *value) {
  setenv(name, value, 1);
}

/* A HIP backend that opens. */
static hippo__backend *gpu_new(int32_t ordinal, uint64_t capacity,
                               uint64_t alignment) {
  hippo__backend *be = NULL;
  CK_CORE_OK(hippo__backend_hip_create(ordinal, capacity, alignment, &be));
  ck_assert_ptr_nonnull(be);
  ck_assert_uint_eq(be->kind, HIPPO_BACKEND_HIP);
  return be;
}

/* hippo__backend_hip_create fails with st and leaves *out alone. */
static void gpu_refused(int32_t ordinal, uint64_t capacity,
                        uint64_t alignment, hippo_status st) {
  hippo__backend *be = (hippo__backend *)&be;
  CK_CORE_STATUS(hippo__backend_hip_create(ordinal, capacity, alignment, &be),
                 st);
  ck_assert_ptr_eq(be, (hippo__backend *)&be);
}

/* The loaded runtime of `flavor` (the backend's: the cache). */
static const hippo__gpu_rt *rt_of(enum hippo__gpu_flavor flavor) {
  const hippo__gpu_rt *rt = NULL;
  CK_CORE_OK(hippo__gpu_rt_load(flavor, &rt));
  return rt;
}

/* The fake device's free bytes, asked of the runtime itself. */
static uint64_t device_free(const hippo__gpu_rt *rt) {
  size_t fr = 0, tot = 0;
  ck_assert_int_eq(rt->mem_info(&fr, &tot), HIPPO__GPU_SUCCESS);
  return fr;
}

/* ---- constants ----------------------------------------------------------- */

/* Every HIPPO__GPU_* and HIPPO__HIP_ATTR_* value (and the int-sized enums,
 * and hippo's HIP error names) is what hip/hip_runtime_api.h says. */
START_TEST(test_constants_hip) {
  char bad[2048];
  int n = gpu_rt_headers_hip(bad, sizeof bad);
#ifdef HAVE_HIP_HEADERS
  ck_assert_int_gt(n, 40);
#else
  ck_assert_int_eq(n, 0);
  fprintf(stderr, "test-gpu-rt: no HIP headers: HIP constants unchecked\n");
#endif
  ck_assert_msg(bad[0] == '\0', "hippo and hip_runtime_api.h differ: %s",
                bad);
}
END_TEST

/* The same for CUDA: HIPPO__GPU_*, HIPPO__CUDA_ATTR_*, the names, and
 * cudaDeviceProp's name (first, 256 bytes, the struct under 16 KiB). */
START_TEST(test_constants_cuda) {
  char bad[2048];
  int n = gpu_rt_headers_cuda(bad, sizeof bad);
#ifdef HAVE_CUDA_HEADERS
  ck_assert_int_gt(n, 40);
#else
  ck_assert_int_eq(n, 0);
  fprintf(stderr, "test-gpu-rt: no CUDA headers: CUDA constants "
                  "unchecked\n");
#endif
  ck_assert_msg(bad[0] == '\0', "hippo and cuda_runtime_api.h differ: %s",
                bad);
}
END_TEST

/* ---- error codes --------------------------------------------------------- */

static const struct {
  int err;
  hippo_status status;
  const char *hip, *cuda; /* hippo's names, no runtime loaded */
} codes[] = {
    {0, HIPPO_SUCCESS, "hipSuccess", "cudaSuccess"},
    {1, HIPPO_BACKEND_ERROR, "hipErrorInvalidValue", "cudaErrorInvalidValue"},
    {2, HIPPO_OUT_OF_MEMORY, "hipErrorOutOfMemory",
     "cudaErrorMemoryAllocation"},
    {3, HIPPO_BACKEND_ERROR, "hipErrorNotInitialized",
     "cudaErrorInitializationError"},
    /* CUDA only (HIP has no 34, 46): a stub libcuda (a container without
     * the driver), every device exclusive and taken */
    {34, HIPPO_NO_DEVICE, "unknown", "cudaErrorStubLibrary"},
    {35, HIPPO_NO_DEVICE, "hipErrorInsufficientDriver",
     "cudaErrorInsufficientDriver"},
    {46, HIPPO_NO_DEVICE, "unknown", "cudaErrorDevicesUnavailable"},
    {100, HIPPO_NO_DEVICE, "hipErrorNoDevice", "cudaErrorNoDevice"},
    {101, HIPPO_NO_DEVICE, "hipErrorInvalidDevice", "cudaErrorInvalidDevice"},
    {400, HIPPO_BACKEND_ERROR, "hipErrorInvalidResourceHandle",
     "cudaErrorInvalidResourceHandle"},
    {401, HIPPO_BACKEND_ERROR, "hipErrorIllegalState",
     "cudaErrorIllegalState"},
    {709, HIPPO_BACKEND_ERROR, "hipErrorContextIsDestroyed",
     "cudaErrorContextIsDestroyed"},
    {600, HIPPO_BACKEND_ERROR, "hipErrorNotReady", "cudaErrorNotReady"},
    {801, HIPPO_BACKEND_ERROR, "hipErrorNotSupported",
     "cudaErrorNotSupported"},
    /* CUDA only: HIP has no 803 or 804 */
    {803, HIPPO_NO_DEVICE, "unknown", "cudaErrorSystemDriverMismatch"},
    {804, HIPPO_NO_DEVICE, "unknown", "cudaErrorCompatNotSupportedOnDevice"},
    {900, HIPPO_BACKEND_ERROR, "hipErrorStreamCaptureUnsupported",
     "cudaErrorStreamCaptureUnsupported"},
    {901, HIPPO_BACKEND_ERROR, "hipErrorStreamCaptureInvalidated",
     "cudaErrorStreamCaptureInvalidated"},
    {906, HIPPO_BACKEND_ERROR, "hipErrorStreamCaptureImplicit",
     "cudaErrorStreamCaptureImplicit"},
    {907, HIPPO_BACKEND_ERROR, "hipErrorCapturedEvent",
     "cudaErrorCapturedEvent"},
    {999, HIPPO_BACKEND_ERROR, "hipErrorUnknown", "cudaErrorUnknown"},
    /* codes hippo does not name */
    {4242, HIPPO_BACKEND_ERROR, "unknown", "unknown"},
    {-1, HIPPO_BACKEND_ERROR, "unknown", "unknown"},
};
#define NCODES (sizeof codes / sizeof *codes)

/* Every code hippo names maps to its status: out of memory, the ones that
 * mean "no usable device" (none, invalid, a driver the runtime cannot
 * use), and everything else a backend error; unknown codes too. */
START_TEST(test_status_of_every_code) {
  for (size_t i = 0; i < NCODES; i++)
    ck_assert_msg(hippo__gpu_status(codes[i].err) == codes[i].status,
                  "code %d: %s, expected %s", codes[i].err,
                  hippo__status_name(hippo__gpu_status(codes[i].err)),
                  hippo__status_name(codes[i].status));
}
END_TEST

/* With no runtime (rt NULL), names come from hippo's table, per flavor;
 * a code it does not know is "unknown". */
START_TEST(test_names_without_runtime) {
  for (size_t i = 0; i < NCODES; i++) {
    ck_assert_str_eq(hippo__gpu_err_name(HIPPO__GPU_HIP, NULL, codes[i].err),
                     codes[i].hip);
    ck_assert_str_eq(
        hippo__gpu_err_name(HIPPO__GPU_CUDA, NULL, codes[i].err),
        codes[i].cuda);
  }
}
END_TEST

/* Stand-ins for a runtime's own error calls. */
static const char *name_empty(int err) { return err == 2 ? "" : NULL; }
static const char *text_oom(int err) {
  return err == 2 ? "out of memory" : "";
}

/* A runtime whose GetErrorName answers NULL or "" leaves the name to
 * hippo's table. */
START_TEST(test_names_runtime_without_answer) {
  hippo__gpu_rt rt;
  memset(&rt, 0, sizeof rt);
  rt.flavor = HIPPO__GPU_CUDA;
  rt.error_name = name_empty;
  ck_assert_str_eq(hippo__gpu_err_name(HIPPO__GPU_CUDA, &rt, 2),
                   "cudaErrorMemoryAllocation");
  ck_assert_str_eq(hippo__gpu_err_name(HIPPO__GPU_CUDA, &rt, 100),
                   "cudaErrorNoDevice");
  ck_assert_str_eq(hippo__gpu_err_name(HIPPO__GPU_CUDA, &rt, 4242),
                   "unknown");
}
END_TEST

/* A loaded runtime's own names win over hippo's table (the fakes answer
 * "fake..." names), for both flavors. */
START_TEST(test_names_from_runtime) {
  const hippo__gpu_rt *hip, *cuda;
  runtimes(fake_hip(), fake_cuda());
  hip = rt_of(HIPPO__GPU_HIP);
  cuda = rt_of(HIPPO__GPU_CUDA);
  ck_assert_str_eq(hippo__gpu_err_name(HIPPO__GPU_HIP, hip, 100),
                   "fakeErrorNoDevice");
  ck_assert_str_eq(hippo__gpu_err_name(HIPPO__GPU_HIP, hip, 35),
                   "fakeErrorInsufficientDriver");
  ck_assert_str_eq(hippo__gpu_err_name(HIPPO__GPU_CUDA, cuda, 2),
                   "fakeErrorOutOfMemory");
  ck_assert_str_eq(hippo__gpu_err_name(HIPPO__GPU_CUDA, cuda, 4242),
                   "fakeError");
}
END_TEST

/* hippo__gpu_fail: the status of the code and last_error "<RT>
 * <prefix><call> failed: <name> (<code>): <message>[; hint]"; no message
 * from the runtime reads "no message"; no hint, no "; ". */
START_TEST(test_fail_message) {
  hippo__gpu_rt rt;
  const hippo__gpu_rt *hip;
  memset(&rt, 0, sizeof rt);
  rt.flavor = HIPPO__GPU_CUDA;
  rt.name = "CUDA";
  rt.prefix = "cuda";
  rt.error_string = text_oom;
  CK_CORE_STATUS(
      hippo__gpu_fail(&rt, 2, "Malloc", "release or clean up device memory"),
      HIPPO_OUT_OF_MEMORY);
  CK_CORE_ERROR_IS("CUDA cudaMalloc failed: cudaErrorMemoryAllocation (2): out "
                   "of memory; release or clean up device memory");
  CK_CORE_STATUS(hippo__gpu_fail(&rt, 100, "GetDeviceCount", NULL),
                 HIPPO_NO_DEVICE);
  CK_CORE_ERROR_IS(
      "CUDA cudaGetDeviceCount failed: cudaErrorNoDevice (100): no "
      "message");
  rt.error_string = NULL;
  CK_CORE_STATUS(hippo__gpu_fail(&rt, 400, "StreamDestroy", NULL),
                 HIPPO_BACKEND_ERROR);
  CK_CORE_ERROR_IS("CUDA cudaStreamDestroy failed: "
                   "cudaErrorInvalidResourceHandle (400): no message");

  runtimes(fake_hip(), NULL);
  hip = rt_of(HIPPO__GPU_HIP);
  CK_CORE_STATUS(hippo__gpu_fail(hip, 2, "Malloc", "hint"),
                 HIPPO_OUT_OF_MEMORY);
  CK_CORE_ERROR_IS("HIP hipMalloc failed: fakeErrorOutOfMemory (2): a fake "
                   "runtime's error; hint");
  CK_CORE_STATUS(hippo__gpu_fail(hip, 35, "GetDeviceCount", NULL),
                 HIPPO_NO_DEVICE);
  CK_CORE_ERROR_IS("HIP hipGetDeviceCount failed: fakeErrorInsufficientDriver "
                   "(35): a fake runtime's error");
}
END_TEST

/* ---- the loader ---------------------------------------------------------- */

/* A library that does not exist: HIPPO_NO_DEVICE naming the runtime, the
 * path, dlopen's reason and the variable that named it. */
START_TEST(test_load_missing_library) {
  const hippo__gpu_rt *rt = NULL;
  runtimes(NULL, NULL);
  CK_CORE_STATUS(hippo__gpu_rt_load(HIPPO__GPU_HIP, &rt), HIPPO_NO_DEVICE);
  ck_assert_ptr_null(rt);
  CK_CORE_ERROR_HAS("no HIP runtime could be loaded (" NOLIB ": ");
  CK_CORE_ERROR_HAS(NOLIB ": not found"); /* dlerror shortened */
  CK_CORE_ERROR_HAS(
      "HIPPO_HIP_LIBRARY names it: correct the path, or unset it");
  CK_CORE_STATUS(hippo__gpu_rt_load(HIPPO__GPU_CUDA, &rt), HIPPO_NO_DEVICE);
  CK_CORE_ERROR_HAS("no CUDA runtime could be loaded (" NOLIB ": ");
  CK_CORE_ERROR_HAS(NOLIB ": not found"); /* dlerror shortened */
  CK_CORE_ERROR_HAS("HIPPO_CUDA_LIBRARY names it");
}
END_TEST

/* A library that loads but lacks a required call is closed and refused:
 * HIPPO_NO_DEVICE, "it has no <call>" (libc; the other flavor's fake). */
START_TEST(test_load_missing_symbol) {
  const hippo__gpu_rt *rt = NULL;
  runtimes(fake_cuda(), "libc.so.6");
  CK_CORE_STATUS(hippo__gpu_rt_load(HIPPO__GPU_CUDA, &rt), HIPPO_NO_DEVICE);
  CK_CORE_ERROR_HAS("no CUDA runtime could be loaded (libc.so.6: it has no "
                    "cudaGetDeviceCount)");
  CK_CORE_STATUS(hippo__gpu_rt_load(HIPPO__GPU_HIP, &rt), HIPPO_NO_DEVICE);
  CK_CORE_ERROR_HAS(": it has no hipGetDeviceCount)");
  CK_CORE_ERROR_HAS(fake_cuda());
  env("HIPPO_CUDA_LIBRARY", fake_hip());
  CK_CORE_STATUS(hippo__gpu_rt_load(HIPPO__GPU_CUDA, &rt), HIPPO_NO_DEVICE);
  CK_CORE_ERROR_HAS(": it has no cudaGetDeviceCount)");
  ck_assert_ptr_null(rt);
  /* the backend passes it on: no GPU, naming the call */
  env("HIPPO_GPU_RUNTIME", "cuda");
  gpu_refused(0, 0, 0, HIPPO_NO_DEVICE);
  CK_CORE_ERROR_HAS("no GPU: no CUDA runtime could be loaded");
  CK_CORE_ERROR_HAS("it has no cudaGetDeviceCount");
}
END_TEST

/* A loaded runtime fills every call, its name, prefix, path, version and
 * attribute numbers; the optional calls the fake has are found, the other
 * flavor's (device_name / device_properties) stay NULL. */
START_TEST(test_load_fills_table) {
  const hippo__gpu_rt *hip, *cuda;
  runtimes(fake_hip(), fake_cuda());
  hip = rt_of(HIPPO__GPU_HIP);
  ck_assert_int_eq(hip->flavor, HIPPO__GPU_HIP);
  ck_assert_str_eq(hip->name, "HIP");
  ck_assert_str_eq(hip->prefix, "hip");
  ck_assert_str_eq(hip->path, fake_hip());
  ck_assert_int_eq(hip->version, 60200000);
  ck_assert_int_eq(hip->attr_texture_alignment, 81);
  ck_assert_int_eq(hip->attr_compute_mode, 6);
  ck_assert_int_eq(hip->attr_cc_major, 23);
  ck_assert_int_eq(hip->attr_cc_minor, 61);
  ck_assert_ptr_nonnull(hip->malloc_);
  ck_assert_ptr_nonnull(hip->device_attribute);
  ck_assert_ptr_nonnull(hip->error_name);
  ck_assert_ptr_nonnull(hip->error_string);
  ck_assert_ptr_nonnull(hip->stream_device);
  ck_assert_ptr_nonnull(hip->device_name);
  ck_assert_ptr_null(hip->device_properties);

  cuda = rt_of(HIPPO__GPU_CUDA);
  ck_assert_ptr_ne(cuda, hip);
  ck_assert_int_eq(cuda->flavor, HIPPO__GPU_CUDA);
  ck_assert_str_eq(cuda->name, "CUDA");
  ck_assert_str_eq(cuda->prefix, "cuda");
  ck_assert_str_eq(cuda->path, fake_cuda());
  ck_assert_int_eq(cuda->version, 13000);
  ck_assert_int_eq(cuda->attr_texture_alignment, 14);
  ck_assert_int_eq(cuda->attr_compute_mode, 20);
  ck_assert_int_eq(cuda->attr_cc_major, 75);
  ck_assert_int_eq(cuda->attr_cc_minor, 76);
  ck_assert_ptr_nonnull(cuda->stream_device);
  ck_assert_ptr_null(cuda->device_name);
  ck_assert_ptr_nonnull(cuda->device_properties);
}
END_TEST

/* The cache: once loaded, a runtime stays (the same table, whatever the
 * environment says afterwards) until the process ends -- or a test calls
 * hippo__gpu_rt_forget; a failed load is tried again at the next call. */
START_TEST(test_load_cache) {
  const hippo__gpu_rt *a = NULL, *b = NULL;
  runtimes(NULL, NULL);
  CK_CORE_STATUS(hippo__gpu_rt_load(HIPPO__GPU_HIP, &a), HIPPO_NO_DEVICE);
  env("HIPPO_HIP_LIBRARY", fake_hip()); /* a failure is not cached */
  CK_CORE_OK(hippo__gpu_rt_load(HIPPO__GPU_HIP, &a));
  env("HIPPO_HIP_LIBRARY", NOLIB); /* a success is */
  CK_CORE_OK(hippo__gpu_rt_load(HIPPO__GPU_HIP, &b));
  ck_assert_ptr_eq(a, b);
  ck_assert_str_eq(b->path, fake_hip());
  hippo__gpu_rt_forget();
  CK_CORE_STATUS(hippo__gpu_rt_load(HIPPO__GPU_HIP, &b), HIPPO_NO_DEVICE);
  CK_CORE_ERROR_HAS(NOLIB);
  hippo__gpu_rt_forget(); /* nothing loaded: nothing to do */
}
END_TEST

/* ---- the backend: the device's rules ------------------------------------- */

/* Alignment: the device's texture alignment, at least 256 and rounded up
 * to a power of two; desc.alignment honoured when a power of two at or
 * above it (up to 1 GiB), refused otherwise with a message naming the
 * device's; page sizes must be multiples of it. */
START_TEST(test_alignment) {
  hippo__backend *be;
  uint64_t addr = 0;
  runtimes(fake_hip(), NULL);
  env("FAKE_GPU_ALIGNMENT", "512");
  be = gpu_new(0, 0, 0);
  ck_assert_uint_eq(be->alignment, 512);
  CK_CORE_STATUS(be->ops->page_alloc(be, 256, &addr), HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_IS("HIP page_alloc: size 256 must be a positive multiple of "
                   "512");
  CK_CORE_STATUS(be->ops->page_alloc(be, 0, &addr), HIPPO_INVALID_ARGUMENT);
  be->ops->destroy(be);
  be = gpu_new(0, 0, 1024);
  ck_assert_uint_eq(be->alignment, 1024);
  be->ops->destroy(be);
  be = gpu_new(0, 0, UINT64_C(1) << 30);
  ck_assert_uint_eq(be->alignment, UINT64_C(1) << 30);
  be->ops->destroy(be);
  gpu_refused(0, 0, 256, HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_IS("device_open: alignment 256 on HIP device 0: it must be a "
                   "power of two from the device's 512 up to 1 GiB (0 takes "
                   "the device's)");
  gpu_refused(0, 0, 384, HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_HAS("alignment 384 on HIP device 0");
  CK_CORE_ERROR_HAS("the device's 512");
  gpu_refused(0, 0, 3, HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_HAS("alignment 3 on HIP device 0");
  CK_CORE_ERROR_HAS("the device's 512");
  gpu_refused(0, 0, UINT64_C(1) << 31, HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_HAS("up to 1 GiB");

  env("FAKE_GPU_ALIGNMENT", "100"); /* below 256: 256 */
  be = gpu_new(0, 0, 0);
  ck_assert_uint_eq(be->alignment, 256);
  be->ops->destroy(be);
  env("FAKE_GPU_ALIGNMENT", "3000"); /* not a power of two: the next one */
  be = gpu_new(0, 0, 0);
  ck_assert_uint_eq(be->alignment, 4096);
  be->ops->destroy(be);
  env("FAKE_GPU_ALIGNMENT", "0"); /* none given: 256 */
  be = gpu_new(0, 0, 0);
  ck_assert_uint_eq(be->alignment, 256);
  be->ops->destroy(be);
}
END_TEST

/* desc.capacity is a budget: total_memory and mem_info's total are the
 * budget, free is the budget less what hippo holds (or the device's free,
 * when lower); a page beyond the budget is HIPPO_OUT_OF_MEMORY naming it,
 * and the runtime is not asked (the device's free bytes do not move). */
START_TEST(test_capacity_budget) {
  hippo__backend *be;
  const hippo__gpu_rt *rt;
  uint64_t fr = 0, tot = 0, p1, before;
  runtimes(fake_hip(), NULL);
  be = gpu_new(0, 64 * MiB, 0);
  rt = rt_of(HIPPO__GPU_HIP);
  ck_assert_uint_eq(be->total_memory, 64 * MiB);
  CK_CORE_OK(be->ops->mem_info(be, &fr, &tot));
  ck_assert_uint_eq(tot, 64 * MiB);
  ck_assert_uint_eq(fr, 64 * MiB);
  p1 = page_new(be, 48 * MiB);
  CK_CORE_OK(be->ops->mem_info(be, &fr, &tot));
  ck_assert_uint_eq(fr, 16 * MiB);
  ck_assert_uint_eq(tot, 64 * MiB);
  before = device_free(rt);
  ck_assert_uint_eq(before, GiB - 48 * MiB);
  CK_CORE_STATUS(be->ops->page_alloc(be, 32 * MiB, &(uint64_t){0}),
                 HIPPO_OUT_OF_MEMORY);
  CK_CORE_ERROR_IS("HIP page_alloc: 33554432 bytes requested, 50331648 of the "
                   "device's budget of 67108864 bytes held "
                   "(hippo_device_desc.capacity)");
  ck_assert_uint_eq(device_free(rt), before);
  ck_assert_uint_eq(counters_of(be).bytes_held, 48 * MiB);
  CK_CORE_OK(be->ops->page_free(be, p1, 48 * MiB));
  CK_CORE_OK(be->ops->mem_info(be, &fr, &tot));
  ck_assert_uint_eq(fr, 64 * MiB);
  be->ops->destroy(be);

  /* capacity 0: the device's memory; a capacity above it: the device's */
  env("FAKE_GPU_MEMORY", "268435456");
  be = gpu_new(0, 0, 0);
  ck_assert_uint_eq(be->total_memory, 256 * MiB);
  be->ops->destroy(be);
  be = gpu_new(0, 2 * GiB, 0);
  ck_assert_uint_eq(be->total_memory, 256 * MiB);
  CK_CORE_OK(be->ops->mem_info(be, &fr, &tot));
  ck_assert_uint_eq(tot, 256 * MiB);
  be->ops->destroy(be);
}
END_TEST

/* Within the budget the device may still be full (another user holds
 * it): free is the device's, and the runtime's out-of-memory is
 * HIPPO_OUT_OF_MEMORY naming the call, its error and what to do; nothing
 * stays held. */
START_TEST(test_device_full) {
  hippo__backend *a, *b;
  uint64_t fr = 0, tot = 0, pa, addr = 0;
  runtimes(fake_hip(), NULL);
  env("FAKE_GPU_MEMORY", "4194304");
  a = gpu_new(0, 0, 0);
  b = gpu_new(0, 0, 0);
  pa = page_new(a, 3 * MiB);
  CK_CORE_OK(b->ops->mem_info(b, &fr, &tot));
  ck_assert_uint_eq(tot, 4 * MiB);
  ck_assert_uint_eq(fr, 1 * MiB);
  CK_CORE_STATUS(b->ops->page_alloc(b, 2 * MiB, &addr), HIPPO_OUT_OF_MEMORY);
  CK_CORE_ERROR_HAS("HIP page_alloc of 2097152 bytes");
  CK_CORE_ERROR_HAS(
      "HIP hipMalloc failed: fakeErrorOutOfMemory (2): a fake runtime's "
      "error; release or clean up device memory");
  ck_assert_uint_eq(addr, 0);
  ck_assert_uint_eq(counters_of(b).bytes_held, 0);
  ck_assert_uint_eq(counters_of(b).pages_held, 0);
  CK_CORE_OK(a->ops->page_free(a, pa, 3 * MiB));
  addr = page_new(b, 2 * MiB);
  CK_CORE_OK(b->ops->page_free(b, addr, 2 * MiB));
  a->ops->destroy(a);
  b->ops->destroy(b);
}
END_TEST

/* An ordinal the runtime does not have: HIPPO_NO_DEVICE "out of range",
 * with how many devices there are. */
START_TEST(test_ordinal_out_of_range) {
  hippo__backend *be;
  runtimes(fake_hip(), NULL);
  env("FAKE_GPU_DEVICES", "2");
  env("HIPPO_GPU_RUNTIME", "hip");
  gpu_refused(2, 0, 0, HIPPO_NO_DEVICE);
  CK_CORE_ERROR_IS("no GPU: HIP device ordinal 2 is out of range: 2 device(s) "
                   "visible (ordinals 0..1) (HIPPO_GPU_RUNTIME=hip)");
  gpu_refused(-1, 0, 0, HIPPO_NO_DEVICE);
  CK_CORE_ERROR_HAS("HIP device ordinal -1 is out of range");
  be = gpu_new(1, 0, 0);
  be->ops->destroy(be);
  /* unforced, the CUDA runtime is tried next and named too */
  unsetenv("HIPPO_GPU_RUNTIME");
  gpu_refused(2, 0, 0, HIPPO_NO_DEVICE);
  CK_CORE_ERROR_HAS("no GPU: HIP device ordinal 2 is out of range");
  CK_CORE_ERROR_HAS("; no CUDA runtime could be loaded (" NOLIB);
}
END_TEST

/* A runtime that sees no device (GetDeviceCount answers 100, or 0
 * devices): HIPPO_NO_DEVICE naming the call, the runtime's name and
 * message for the code, and what to check -- for both flavors. */
START_TEST(test_no_device) {
  runtimes(fake_hip(), fake_cuda());
  env("FAKE_GPU_FAIL", "nodevice");
  env("HIPPO_GPU_RUNTIME", "hip");
  gpu_refused(0, 0, 0, HIPPO_NO_DEVICE);
  CK_CORE_ERROR_HAS(
      "no GPU: HIP hipGetDeviceCount failed: fakeErrorNoDevice (100): no "
      "fake device; no ROCm device is visible: check /dev/kfd permissions, "
      "or use backend HOST or DRY");
  env("HIPPO_GPU_RUNTIME", "cuda");
  gpu_refused(0, 0, 0, HIPPO_NO_DEVICE);
  CK_CORE_ERROR_HAS(
      "no GPU: CUDA cudaGetDeviceCount failed: fakeErrorNoDevice (100): "
      "no fake device; no CUDA device is visible: check the NVIDIA driver");
  /* zero devices reads the same */
  unsetenv("FAKE_GPU_FAIL");
  env("FAKE_GPU_DEVICES", "0");
  unsetenv("HIPPO_GPU_RUNTIME");
  gpu_refused(0, 0, 0, HIPPO_NO_DEVICE);
  CK_CORE_ERROR_HAS(
      "no GPU: HIP hipGetDeviceCount failed: fakeErrorNoDevice (100)");
  CK_CORE_ERROR_HAS(
      "; CUDA cudaGetDeviceCount failed: fakeErrorNoDevice (100)");
}
END_TEST

/* A driver too old for the runtime (35): HIPPO_NO_DEVICE, saying to update
 * the driver, for both flavors. */
START_TEST(test_insufficient_driver) {
  runtimes(fake_hip(), fake_cuda());
  env("FAKE_GPU_FAIL", "driver");
  env("HIPPO_GPU_RUNTIME", "hip");
  gpu_refused(0, 0, 0, HIPPO_NO_DEVICE);
  CK_CORE_ERROR_HAS(
      "HIP hipGetDeviceCount failed: fakeErrorInsufficientDriver (35)");
  CK_CORE_ERROR_HAS("update the amdgpu driver");
  env("HIPPO_GPU_RUNTIME", "cuda");
  gpu_refused(0, 0, 0, HIPPO_NO_DEVICE);
  CK_CORE_ERROR_HAS(
      "CUDA cudaGetDeviceCount failed: fakeErrorInsufficientDriver (35)");
  CK_CORE_ERROR_HAS(
      "the NVIDIA driver does not support this CUDA runtime: update the "
      "driver");
}
END_TEST

/* A device in prohibited compute mode: HIPPO_NO_DEVICE "prohibited". */
START_TEST(test_prohibited) {
  runtimes(fake_hip(), fake_cuda());
  env("FAKE_GPU_FAIL", "prohibited");
  gpu_refused(0, 0, 0, HIPPO_NO_DEVICE);
  CK_CORE_ERROR_HAS(
      "HIP device 0 is in prohibited compute mode; no host thread may use "
      "it");
  CK_CORE_ERROR_HAS("CUDA device 0 is in prohibited compute mode");
}
END_TEST

/* Which runtime serves: HIPPO_GPU_RUNTIME=cuda (or nvidia) takes CUDA's
 * even when HIP's is there; =hip (or amd) only HIP's; unset, HIP's first
 * when both see a device, CUDA's when HIP's is missing; another value is
 * HIPPO_INVALID_ARGUMENT; none loading names both. */
START_TEST(test_runtime_choice) {
  hippo__backend *be;
  runtimes(fake_hip(), fake_cuda());
  be = gpu_new(0, 0, 0); /* unset, both: HIP */
  ck_assert_msg(strncmp(be->runtime, "HIP 60200000 (", 14) == 0, "%s",
                be->runtime);
  be->ops->destroy(be);
  env("HIPPO_GPU_RUNTIME", "cuda");
  be = gpu_new(0, 0, 0);
  ck_assert_msg(strncmp(be->runtime, "CUDA 13000 (", 12) == 0, "%s",
                be->runtime);
  be->ops->destroy(be);
  env("HIPPO_GPU_RUNTIME", "nvidia");
  be = gpu_new(0, 0, 0);
  ck_assert_msg(strncmp(be->runtime, "CUDA ", 5) == 0, "%s", be->runtime);
  be->ops->destroy(be);
  env("HIPPO_GPU_RUNTIME", "amd");
  be = gpu_new(0, 0, 0);
  ck_assert_msg(strncmp(be->runtime, "HIP ", 4) == 0, "%s", be->runtime);
  be->ops->destroy(be);
  env("HIPPO_GPU_RUNTIME", "bogus");
  gpu_refused(0, 0, 0, HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_IS("HIPPO_GPU_RUNTIME is 'bogus': use hip (AMD's runtime) or "
                   "cuda (NVIDIA's), or unset it to try both");
  hippo__gpu_rt_forget();

  /* only CUDA's installed */
  runtimes(NULL, fake_cuda());
  unsetenv("HIPPO_GPU_RUNTIME");
  be = gpu_new(0, 0, 0);
  ck_assert_msg(strncmp(be->runtime, "CUDA 13000 (", 12) == 0, "%s",
                be->runtime);
  be->ops->destroy(be);
  env("HIPPO_GPU_RUNTIME", "hip");
  gpu_refused(0, 0, 0, HIPPO_NO_DEVICE);
  CK_CORE_ERROR_HAS("no GPU: no HIP runtime could be loaded (" NOLIB);
  CK_CORE_ERROR_HAS("(HIPPO_GPU_RUNTIME=hip)");
  CK_CORE_ERROR_LACKS("CUDA");
  hippo__gpu_rt_forget();

  /* neither */
  runtimes(NULL, NULL);
  unsetenv("HIPPO_GPU_RUNTIME");
  gpu_refused(0, 0, 0, HIPPO_NO_DEVICE);
  CK_CORE_ERROR_HAS("no GPU: no HIP runtime could be loaded (" NOLIB);
  CK_CORE_ERROR_HAS("; no CUDA runtime could be loaded (" NOLIB);
}
END_TEST

/* The device's name, architecture and runtime reach the backend's strings
 * (device_info's): HIP's name call, CUDA's properties; "cc"/"sm" and the
 * compute capability; the runtime's version and library. */
START_TEST(test_device_strings) {
  hippo__backend *be;
  char want[300];
  runtimes(fake_hip(), fake_cuda());
  env("FAKE_GPU_DEVICES", "2");
  be = gpu_new(1, 0, 0);
  ck_assert_str_eq(be->device_name, "Fake HIP GPU 1");
  ck_assert_str_eq(be->arch, "cc 9.4");
  snprintf(want, sizeof want, "HIP 60200000 (%.100s)", fake_hip());
  ck_assert_str_eq(be->runtime, want);
  ck_assert_str_eq(be->note, "");
  be->ops->destroy(be);
  env("HIPPO_GPU_RUNTIME", "cuda");
  be = gpu_new(0, 0, 0);
  ck_assert_str_eq(be->device_name, "Fake CUDA GPU 0");
  ck_assert_str_eq(be->arch, "sm 9.4");
  snprintf(want, sizeof want, "CUDA 13000 (%.100s)", fake_cuda());
  ck_assert_str_eq(be->runtime, want);
  be->ops->destroy(be);
}
END_TEST

/* ---- the backend: streams, pages, ranges --------------------------------- */

/* stream_check refuses a stream of another device (StreamGetDevice),
 * naming both and what to do; takes its own and the default stream.
 * Every call runs on the backend's device and gives the thread its own
 * current device back. */
START_TEST(test_stream_of_another_device) {
  hippo__backend *be0, *be1;
  const hippo__gpu_rt *rt;
  void *s1 = NULL, *s0 = NULL;
  char want[200];
  int cur = -1;
  runtimes(fake_hip(), NULL);
  env("FAKE_GPU_DEVICES", "2");
  be0 = gpu_new(0, 0, 0);
  be1 = gpu_new(1, 0, 0);
  rt = rt_of(HIPPO__GPU_HIP);
  CK_CORE_OK(be1->ops->emu_stream_create(be1, &s1)); /* made on device 1 */
  ck_assert_int_eq(rt->get_device(&cur), 0);
  ck_assert_int_eq(cur, 0); /* the thread's device is back */
  CK_CORE_OK(be0->ops->emu_stream_create(be0, &s0));
  CK_CORE_STATUS(be0->ops->stream_check(be0, s1), HIPPO_INVALID_ARGUMENT);
  snprintf(want, sizeof want,
           "HIP stream %p belongs to device 1, this hippo device is HIP "
           "device 0: attach it to a device opened with hip_device 1",
           s1);
  CK_CORE_ERROR_IS(want);
  CK_CORE_STATUS(be1->ops->stream_check(be1, s0), HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_HAS("belongs to device 0, this hippo device is HIP device 1");
  CK_CORE_OK(be1->ops->stream_check(be1, s1));
  CK_CORE_OK(be0->ops->stream_check(be0, s0));
  CK_CORE_OK(be0->ops->stream_check(be0, NULL));
  /* the thread on device 1: be0's calls run on 0 and leave it on 1 */
  ck_assert_int_eq(rt->set_device(1), 0);
  CK_CORE_OK(be0->ops->page_free(be0, page_new(be0, 4096), 4096));
  ck_assert_int_eq(rt->get_device(&cur), 0);
  ck_assert_int_eq(cur, 1);
  ck_assert_int_eq(rt->set_device(0), 0);
  /* emu_stream_check: only streams emu_stream_create made here */
  CK_CORE_STATUS(be0->ops->emu_stream_check(be0, s1, "emu_copy"),
                 HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_HAS("HIP emu_copy: stream");
  CK_CORE_ERROR_HAS("is not an emulated stream of this device");
  CK_CORE_OK(be0->ops->emu_stream_check(be0, NULL, "emu_copy"));
  CK_CORE_OK(be1->ops->emu_stream_destroy(be1, s1));
  CK_CORE_STATUS(be1->ops->emu_stream_destroy(be1, s1), HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_HAS("destroyed twice?");
  CK_CORE_STATUS(be1->ops->emu_stream_destroy(be1, NULL),
                 HIPPO_INVALID_ARGUMENT);
  CK_CORE_OK(be0->ops->emu_stream_destroy(be0, s0));
  be0->ops->destroy(be0);
  be1->ops->destroy(be1);
}
END_TEST

/* page_free of something page_alloc did not give (an unknown address, a
 * wrong size) is HIPPO_INVALID_ARGUMENT and reaches no runtime call: the
 * page stays. */
START_TEST(test_page_free_unknown) {
  hippo__backend *be;
  uint64_t p;
  runtimes(fake_hip(), NULL);
  be = gpu_new(0, 0, 0);
  CK_CORE_STATUS(be->ops->page_free(be, 0x1000, 512), HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_IS("HIP page_free: 0x1000 (512 bytes) is not a page of this "
                   "device");
  p = page_new(be, 8192);
  CK_CORE_STATUS(be->ops->page_free(be, p, 4096), HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_HAS("is not a page of this device");
  CK_CORE_STATUS(be->ops->page_free(be, p + 256, 7936), HIPPO_INVALID_ARGUMENT);
  ck_assert_uint_eq(counters_of(be).pages_held, 1);
  CK_CORE_OK(be->ops->emu_write(be, p, "x", 1)); /* still live */
  CK_CORE_OK(be->ops->page_free(be, p, 8192));
  CK_CORE_STATUS(be->ops->page_free(be, p, 8192), HIPPO_INVALID_ARGUMENT);
  be->ops->destroy(be);
}
END_TEST

/* A page whose free the runtime refuses stays held and in the registry
 * (page_free takes its record out before the runtime frees, so that an
 * address handed out again meanwhile meets no stale record, and puts it
 * back): its bytes read back, and a later free succeeds. */
START_TEST(test_page_free_refused) {
  hippo__backend *be;
  unsigned char in[256], out[256];
  uint64_t p;
  runtimes(fake_hip(), NULL);
  be = gpu_new(0, 0, 0);
  p = page_new(be, 8192);
  for (size_t i = 0; i < sizeof in; i++)
    in[i] = (unsigned char)(i * 5 + 3);
  CK_CORE_OK(be->ops->emu_write(be, p + 4096, in, sizeof in));
  env("FAKE_GPU_FAIL", "free");
  CK_CORE_STATUS(be->ops->page_free(be, p, 8192), HIPPO_BACKEND_ERROR);
  CK_CORE_ERROR_HAS("HIP hipFree failed: fakeError (400)");
  unsetenv("FAKE_GPU_FAIL");
  ck_assert_uint_eq(counters_of(be).pages_held, 1);
  ck_assert_uint_eq(counters_of(be).bytes_held, 8192);
  memset(out, 0, sizeof out);
  CK_CORE_OK(be->ops->emu_read(be, p + 4096, out, sizeof out)); /* still live */
  ck_assert_int_eq(memcmp(in, out, sizeof in), 0);
  CK_CORE_OK(be->ops->page_free(be, p, 8192));
  ck_assert_uint_eq(counters_of(be).pages_held, 0);
  CK_CORE_STATUS(be->ops->emu_read(be, p, out, 1), HIPPO_INVALID_ARGUMENT);
  be->ops->destroy(be);
}
END_TEST

/* emu_read, emu_write and copy take only ranges inside one live page
 * (HIPPO_INVALID_ARGUMENT naming the call and the argument); inside, the
 * bytes move, a copy once its stream is synchronized. */
START_TEST(test_ranges_and_bytes) {
  hippo__backend *be;
  unsigned char in[4096], out[4096];
  uint64_t a, b;
  void *s = NULL;
  runtimes(fake_hip(), NULL);
  be = gpu_new(0, 0, 0);
  a = page_new(be, 4096);
  b = page_new(be, 4096);
  for (size_t i = 0; i < sizeof in; i++)
    in[i] = (unsigned char)(i * 7 + 1);
  memset(out, 0, sizeof out);
  CK_CORE_OK(be->ops->emu_write(be, a, in, 4096));
  CK_CORE_OK(be->ops->emu_write(be, b, out, 4096));
  CK_CORE_STATUS(be->ops->emu_write(be, a + 4000, in, 200),
                 HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_HAS("HIP emu_write: device_ptr [");
  CK_CORE_ERROR_HAS("runs 104 bytes past the end of its page");
  CK_CORE_STATUS(be->ops->emu_read(be, 0x10, out, 1), HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_IS("HIP emu_read: device_ptr 0x10 is not inside a live page of "
                   "this device (freed, or never allocated here)");
  CK_CORE_STATUS(be->ops->emu_read(be, UINT64_MAX - 4, out, 16),
                 HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_HAS("wraps around the address space");
  CK_CORE_OK(be->ops->emu_read(be, 0x10, out, 0)); /* nothing to read */

  CK_CORE_OK(be->ops->emu_stream_create(be, &s));
  CK_CORE_STATUS(be->ops->copy(be, s, b, a + 4000, 200),
                 HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_HAS("HIP copy: source [");
  CK_CORE_STATUS(be->ops->copy(be, s, 0x20, a, 16), HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_HAS("HIP copy: destination 0x20 is not inside a live page");
  CK_CORE_OK(be->ops->copy(be, s, b, a, 0));
  CK_CORE_OK(be->ops->copy(be, s, b + 96, a, 4000));
  CK_CORE_OK(be->ops->stream_sync(be, s));
  CK_CORE_OK(be->ops->emu_read(be, b, out, 4096));
  for (size_t i = 0; i < 96; i++)
    ck_assert_uint_eq(out[i], 0);
  ck_assert_int_eq(memcmp(out + 96, in, 4000), 0);
  ck_assert_uint_eq(counters_of(be).bytes_copied, 4000);
  ck_assert_uint_eq(counters_of(be).calls[HIPPO_CALL_COPY], 4);
  CK_CORE_OK(be->ops->emu_stream_destroy(be, s));
  CK_CORE_OK(be->ops->page_free(be, a, 4096));
  CK_CORE_OK(be->ops->page_free(be, b, 4096));
  be->ops->destroy(be);
}
END_TEST

/* Events and captures on the runtime: an event recorded after a copy is
 * done once waited for; a capture gives an id capture_status reports,
 * refuses a second begin, the destruction of its stream (HIPPO_BUSY) and
 * a sync (the runtime's error, named); it ends once.  The default stream
 * cannot capture. */
START_TEST(test_events_and_captures) {
  hippo__backend *be;
  void *s = NULL, *ev = NULL;
  uint64_t id = 0, id2 = 0, a;
  bool capturing = true, done = false;
  runtimes(fake_hip(), NULL);
  be = gpu_new(0, 0, 0);
  a = page_new(be, 4096);
  CK_CORE_OK(be->ops->emu_write(be, a, (unsigned char[512]){1}, 512));
  CK_CORE_OK(be->ops->emu_stream_create(be, &s));
  CK_CORE_OK(be->ops->event_create(be, &ev));
  CK_CORE_OK(be->ops->copy(be, s, a + 2048, a, 512));
  CK_CORE_OK(be->ops->event_record(be, ev, s));
  CK_CORE_OK(be->ops->event_query(be, ev, &done));
  ck_assert(!done); /* the fake runs the copy at a wait */
  CK_CORE_OK(be->ops->event_wait(be, ev));
  CK_CORE_OK(be->ops->event_query(be, ev, &done));
  ck_assert(done);
  CK_CORE_OK(be->ops->event_destroy(be, ev));
  ck_assert_uint_eq(counters_of(be).calls[HIPPO_CALL_EVENT], 5);

  CK_CORE_OK(be->ops->capture_status(be, s, &capturing, &id));
  ck_assert(!capturing);
  ck_assert_uint_eq(id, 0);
  CK_CORE_OK(be->ops->emu_capture_begin(be, s, &id));
  ck_assert_uint_ne(id, 0);
  CK_CORE_OK(be->ops->capture_status(be, s, &capturing, &id2));
  ck_assert(capturing);
  ck_assert_uint_eq(id2, id);
  CK_CORE_STATUS(be->ops->emu_capture_begin(be, s, &id2),
                 HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_HAS("is already capturing; end that capture first");
  CK_CORE_STATUS(be->ops->emu_stream_destroy(be, s), HIPPO_BUSY);
  CK_CORE_ERROR_HAS("is capturing; end the capture first");
  CK_CORE_STATUS(be->ops->stream_sync(be, s), HIPPO_BACKEND_ERROR);
  /* refused before the runtime is asked, whose synchronize would
   * invalidate the capture (clr hip_stream.cpp): it ends with its graph */
  CK_CORE_ERROR_HAS("is capturing; synchronizing it would invalidate the "
                    "capture");
  CK_CORE_OK(be->ops->emu_capture_end(be, s));
  CK_CORE_STATUS(be->ops->emu_capture_end(be, s), HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_HAS("is not capturing");
  CK_CORE_STATUS(be->ops->emu_capture_begin(be, NULL, &id2),
                 HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_HAS("the default stream (NULL)");
  ck_assert_uint_eq(counters_of(be).calls[HIPPO_CALL_CAPTURE_QUERY], 2);
  CK_CORE_OK(be->ops->emu_stream_destroy(be, s));
  CK_CORE_OK(be->ops->page_free(be, a, 4096));
  be->ops->destroy(be);
}
END_TEST

/* Fault injection: the nth call of a kind from now fails with the chosen
 * status and changes nothing (a refused page_free keeps the page); the
 * calls are counted all the same; pages, bytes and the peak are counted;
 * a bad kind or a success status is refused. */
START_TEST(test_faults_and_counters) {
  hippo__backend *be;
  hippo_emu_counters c;
  uint64_t p1, p2, p3, addr = 0;
  runtimes(fake_hip(), NULL);
  be = gpu_new(0, 0, 0);
  CK_CORE_OK(
      be->ops->emu_inject_fault(be, HIPPO_CALL_ALLOC, 2, HIPPO_OUT_OF_MEMORY));
  p1 = page_new(be, 4096);
  CK_CORE_STATUS(be->ops->page_alloc(be, 8192, &addr), HIPPO_OUT_OF_MEMORY);
  CK_CORE_ERROR_IS("injected fault: HIP page_alloc call #2 failed with "
                   "HIPPO_OUT_OF_MEMORY");
  ck_assert_uint_eq(addr, 0);
  p2 = page_new(be, 8192); /* once only */
  p3 = page_new(be, 4096);
  c = counters_of(be);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_ALLOC], 4);
  ck_assert_uint_eq(c.pages_held, 3);
  ck_assert_uint_eq(c.bytes_held, 16384);
  ck_assert_uint_eq(c.peak_bytes_held, 16384);
  ck_assert_uint_eq(c.host_bytes_mapped, 0);

  CK_CORE_OK(
      be->ops->emu_inject_fault(be, HIPPO_CALL_FREE, 1, HIPPO_BACKEND_ERROR));
  CK_CORE_STATUS(be->ops->page_free(be, p2, 8192), HIPPO_BACKEND_ERROR);
  CK_CORE_ERROR_HAS("injected fault: HIP page_free call #1");
  ck_assert_uint_eq(counters_of(be).pages_held, 3);
  CK_CORE_OK(be->ops->page_free(be, p2, 8192));
  c = counters_of(be);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_FREE], 2);
  ck_assert_uint_eq(c.pages_held, 2);
  ck_assert_uint_eq(c.bytes_held, 8192);
  ck_assert_uint_eq(c.peak_bytes_held, 16384);

  /* armed and cleared (nth 0) */
  CK_CORE_OK(be->ops->emu_inject_fault(be, HIPPO_CALL_SYNC, 1, HIPPO_BUSY));
  CK_CORE_OK(be->ops->emu_inject_fault(be, HIPPO_CALL_SYNC, 0, HIPPO_SUCCESS));
  CK_CORE_OK(be->ops->stream_sync(be, NULL));
  CK_CORE_OK(be->ops->emu_inject_fault(be, HIPPO_CALL_SYNC, 1, HIPPO_BUSY));
  CK_CORE_STATUS(be->ops->stream_sync(be, NULL), HIPPO_BUSY);
  CK_CORE_STATUS(be->ops->emu_inject_fault(be, HIPPO_CALL_KINDS, 1, HIPPO_BUSY),
                 HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_HAS("HIP emu_inject_fault: call kind 10 is unknown");
  CK_CORE_STATUS(
      be->ops->emu_inject_fault(be, HIPPO_CALL_COPY, 1, HIPPO_SUCCESS),
      HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_HAS("is not a failure status");
  CK_CORE_OK(be->ops->page_free(be, p1, 4096));
  CK_CORE_OK(be->ops->page_free(be, p3, 4096));
  c = counters_of(be);
  ck_assert_uint_eq(c.pages_held, 0);
  ck_assert_uint_eq(c.bytes_held, 0);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_SYNC], 2);
  be->ops->destroy(be);
}
END_TEST

/* destroy gives the runtime back what the caller left: pages and
 * emulated streams (the device's free memory is whole again). */
START_TEST(test_destroy_gives_back) {
  hippo__backend *be;
  const hippo__gpu_rt *rt;
  void *s = NULL;
  runtimes(fake_hip(), NULL);
  be = gpu_new(0, 0, 0);
  rt = rt_of(HIPPO__GPU_HIP);
  (void)page_new(be, 1 * MiB);
  (void)page_new(be, 2 * MiB);
  CK_CORE_OK(be->ops->emu_stream_create(be, &s));
  CK_CORE_OK(be->ops->copy(be, s, page_new(be, 4096), page_new(be, 4096), 16));
  ck_assert_uint_eq(device_free(rt), GiB - 3 * MiB - 8192);
  be->ops->destroy(be);
  ck_assert_uint_eq(device_free(rt), GiB);
}
END_TEST

/* ---- devices: AUTO, presets, stream_attach ------------------------------- */

static hippo_device *device_open(hippo_backend backend, int32_t ordinal,
                                 uint64_t capacity, uint64_t alignment) {
  hippo_device_desc d;
  hippo_device *dev = NULL;
  TU_SIZED(d);
  d.backend = backend;
  d.hip_device = ordinal;
  d.capacity = capacity;
  d.alignment = alignment;
  CK_CORE_OK(hippo__device_open(&d, NULL, NULL, NULL, &dev));
  return dev;
}

static hippo_device_info info_of(hippo_device *dev) {
  hippo_device_info i;
  CK_CORE_OK(hippo__device_info(dev, &i));
  return i;
}

/* AUTO with no GPU runtime: HOST, and device_info's note says AUTO chose
 * HOST and why, naming the library it tried. */
START_TEST(test_auto_without_gpu) {
  hippo_device *dev;
  hippo_device_info i;
  runtimes(NULL, NULL);
  dev = device_open(HIPPO_BACKEND_AUTO, 0, 0, 0);
  i = info_of(dev);
  ck_assert_uint_eq(i.backend, HIPPO_BACKEND_HOST);
  ck_assert_msg(strncmp(i.note,
                        "AUTO chose HOST: no GPU: no HIP runtime could be "
                        "loaded (" NOLIB,
                        strlen("AUTO chose HOST: no GPU: no HIP runtime "
                               "could be loaded (" NOLIB)) == 0,
                "note: %s", i.note);
  ck_assert_str_eq(i.runtime, "none");
  CK_CORE_OK(hippo__device_close(dev));

  /* a runtime without a device (an old driver): HOST, saying so */
  runtimes(fake_hip(), fake_cuda());
  env("FAKE_GPU_FAIL", "driver");
  dev = device_open(HIPPO_BACKEND_AUTO, 0, 0, 0);
  i = info_of(dev);
  ck_assert_uint_eq(i.backend, HIPPO_BACKEND_HOST);
  ck_assert_msg(strstr(i.note, "AUTO chose HOST: no GPU: HIP "
                               "hipGetDeviceCount failed: "
                               "fakeErrorInsufficientDriver (35)") == i.note,
                "note: %s", i.note);
  CK_CORE_OK(hippo__device_close(dev));

  /* CUDA's stub libcuda (34: a container without the driver) and every
   * device unavailable (46: exclusive-process, taken): HOST too */
  runtimes(NULL, fake_cuda());
  env("HIPPO_GPU_RUNTIME", "cuda");
  for (int k = 0; k < 2; k++) {
    env("FAKE_GPU_FAIL", k ? "unavailable" : "stub");
    dev = device_open(HIPPO_BACKEND_AUTO, 0, 0, 0);
    i = info_of(dev);
    ck_assert_uint_eq(i.backend, HIPPO_BACKEND_HOST);
    ck_assert_msg(strstr(i.note, k ? "cudaGetDeviceCount failed: fakeError "
                                     "(46)"
                                   : "cudaGetDeviceCount failed: fakeError "
                                     "(34)"),
                  "note: %s", i.note);
    CK_CORE_OK(hippo__device_close(dev));
  }
}
END_TEST

/* AUTO with a runtime that sees a device: HIP, the note naming the
 * runtime, device_info carrying the device's name, arch and memory.  A
 * bad HIPPO_GPU_RUNTIME is an error, not a silent HOST. */
START_TEST(test_auto_with_gpu) {
  hippo_device *dev;
  hippo_device_info i;
  hippo_device_desc d;
  char want[300];
  runtimes(fake_hip(), fake_cuda());
  env("FAKE_GPU_MEMORY", "536870912");
  dev = device_open(HIPPO_BACKEND_AUTO, 0, 0, 0);
  i = info_of(dev);
  ck_assert_uint_eq(i.backend, HIPPO_BACKEND_HIP);
  snprintf(want, sizeof want, "AUTO chose HIP: HIP 60200000 (%.100s)",
           fake_hip());
  ck_assert_str_eq(i.note, want);
  ck_assert_str_eq(i.name, "Fake HIP GPU 0");
  ck_assert_str_eq(i.arch, "cc 9.4");
  ck_assert_uint_eq(i.total_memory, 512 * MiB);
  ck_assert_uint_eq(i.free_memory, 512 * MiB);
  ck_assert_uint_eq(i.alignment, 256);
  CK_CORE_OK(hippo__device_close(dev));

  /* HIP asked for: no note */
  dev = device_open(HIPPO_BACKEND_HIP, 0, 0, 0);
  ck_assert_str_eq(info_of(dev).note, "");
  CK_CORE_OK(hippo__device_close(dev));

  env("HIPPO_GPU_RUNTIME", "bogus");
  TU_SIZED(d);
  d.backend = HIPPO_BACKEND_AUTO;
  CK_CORE_STATUS(
      hippo__device_open(&d, NULL, NULL, NULL, &(hippo_device *){NULL}),
      HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_HAS("HIPPO_GPU_RUNTIME is 'bogus'");
}
END_TEST

/* The presets size themselves on the device's memory as the runtime gives
 * it, or on the budget below it; device_info reports the budget; an
 * alignment below the device's is refused through device_open too. */
START_TEST(test_presets_from_memory) {
  hippo_device *dev;
  hippo__layout want, other;
  hippo_device_desc d;
  hippo_device_info i;
  runtimes(fake_hip(), NULL);
  env("FAKE_GPU_ALIGNMENT", "1024");
  dev = device_open(HIPPO_BACKEND_HIP, 0, 64 * MiB, 0);
  hippo__layout_preset(HIPPO_PRESET_ADAPTIVE, 64 * MiB, 1024, &want);
  hippo__layout_preset(HIPPO_PRESET_ADAPTIVE, GiB, 1024, &other);
  ck_assert_int_ne(memcmp(&want, &other, sizeof want), 0);
  ck_assert_int_eq(memcmp(&dev->layout, &want, sizeof want), 0);
  i = info_of(dev);
  ck_assert_uint_eq(i.total_memory, 64 * MiB);
  ck_assert_uint_eq(i.free_memory, 64 * MiB);
  ck_assert_uint_eq(i.alignment, 1024);
  CK_CORE_OK(hippo__device_close(dev));

  dev = device_open(HIPPO_BACKEND_HIP, 0, 0, 0);
  ck_assert_int_eq(memcmp(&dev->layout, &other, sizeof other), 0);
  ck_assert_uint_eq(info_of(dev).total_memory, GiB);
  CK_CORE_OK(hippo__device_close(dev));

  TU_SIZED(d);
  d.backend = HIPPO_BACKEND_HIP;
  d.alignment = 512;
  CK_CORE_STATUS(
      hippo__device_open(&d, NULL, NULL, NULL, &(hippo_device *){NULL}),
      HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_HAS("alignment 512 on HIP device 0");
  CK_CORE_ERROR_HAS("the device's 1024");
}
END_TEST

/* stream_attach refuses a stream of another device and takes one of its
 * own. */
START_TEST(test_attach_other_device) {
  hippo_device *dev0, *dev1;
  hippo_stream *s = NULL;
  void *n1 = NULL, *n0 = NULL;
  runtimes(fake_hip(), NULL);
  env("FAKE_GPU_DEVICES", "2");
  dev0 = device_open(HIPPO_BACKEND_HIP, 0, 0, 0);
  dev1 = device_open(HIPPO_BACKEND_HIP, 1, 0, 0);
  CK_CORE_OK(dev1->be->ops->emu_stream_create(dev1->be, &n1));
  CK_CORE_OK(dev0->be->ops->emu_stream_create(dev0->be, &n0));
  CK_CORE_STATUS(hippo__stream_attach(dev0, n1, &s), HIPPO_INVALID_ARGUMENT);
  CK_CORE_ERROR_HAS("stream_attach: native stream");
  CK_CORE_ERROR_HAS("belongs to device 1, this hippo device is HIP device 0");
  ck_assert_ptr_null(s);
  CK_CORE_OK(hippo__stream_attach(dev0, n0, &s));
  CK_CORE_OK(hippo__stream_detach(s));
  CK_CORE_OK(hippo__emu_stream_destroy(dev0, n0));
  CK_CORE_OK(hippo__emu_stream_destroy(dev1, n1));
  CK_CORE_OK(hippo__device_close(dev0));
  CK_CORE_OK(hippo__device_close(dev1));
}
END_TEST

/* A pointer that is no stream: CUDA answers 400 and ROCm 709
 * (hipErrorContextIsDestroyed): stream_attach refuses it as not a stream
 * on both.  The legacy (1) and per-thread (2) special handles are
 * streams to the runtimes: asked whether they capture, they answer. */
START_TEST(test_attach_no_stream) {
  int not_a_stream = 0;
  for (int f = 0; f < 2; f++) {
    hippo_device *dev;
    hippo_stream *s = NULL;
    bool capturing = true;
    uint64_t id = 7;
    runtimes(f ? NULL : fake_hip(), f ? fake_cuda() : NULL);
    env("HIPPO_GPU_RUNTIME", f ? "cuda" : "hip");
    dev = device_open(HIPPO_BACKEND_HIP, 0, 0, 0);
    CK_CORE_STATUS(hippo__stream_attach(dev, &not_a_stream, &s),
                   HIPPO_INVALID_ARGUMENT);
    CK_CORE_ERROR_HAS("is not a stream of the runtime");
    CK_CORE_ERROR_HAS(f ? ", 400)" : ", 709)");
    ck_assert_ptr_null(s);
    for (uintptr_t special = 1; special <= 2; special++) {
      CK_CORE_OK(dev->be->ops->capture_status(dev->be, (void *)special,
                                              &capturing, &id));
      ck_assert(!capturing);
      ck_assert_uint_eq(id, 0);
    }
    CK_CORE_OK(hippo__device_close(dev));
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("gpu-rt");
  TCase *tc;

  tc = tcase_create("constants");
  tcase_add_checked_fixture(tc, clean, clean);
  tcase_add_test(tc, test_constants_hip);
  tcase_add_test(tc, test_constants_cuda);
  suite_add_tcase(s, tc);

  tc = tcase_create("errors");
  tcase_add_checked_fixture(tc, clean, clean);
  tcase_add_test(tc, test_status_of_every_code);
  tcase_add_test(tc, test_names_without_runtime);
  tcase_add_test(tc, test_names_runtime_without_answer);
  tcase_add_test(tc, test_names_from_runtime);
  tcase_add_test(tc, test_fail_message);
  suite_add_tcase(s, tc);

  tc = tcase_create("loader");
  tcase_add_checked_fixture(tc, clean, clean);
  tcase_add_test(tc, test_load_missing_library);
  tcase_add_test(tc, test_load_missing_symbol);
  tcase_add_test(tc, test_load_fills_table);
  tcase_add_test(tc, test_load_cache);
  suite_add_tcase(s, tc);

  tc = tcase_create("device");
  tcase_add_checked_fixture(tc, clean, clean);
  tcase_add_test(tc, test_alignment);
  tcase_add_test(tc, test_capacity_budget);
  tcase_add_test(tc, test_device_full);
  tcase_add_test(tc, test_ordinal_out_of_range);
  tcase_add_test(tc, test_no_device);
  tcase_add_test(tc, test_insufficient_driver);
  tcase_add_test(tc, test_prohibited);
  tcase_add_test(tc, test_runtime_choice);
  tcase_add_test(tc, test_device_strings);
  suite_add_tcase(s, tc);

  tc = tcase_create("ops");
  tcase_add_checked_fixture(tc, clean, clean);
  tcase_add_test(tc, test_stream_of_another_device);
  tcase_add_test(tc, test_page_free_unknown);
  tcase_add_test(tc, test_page_free_refused);
  tcase_add_test(tc, test_ranges_and_bytes);
  tcase_add_test(tc, test_events_and_captures);
  tcase_add_test(tc, test_faults_and_counters);
  tcase_add_test(tc, test_destroy_gives_back);
  suite_add_tcase(s, tc);

  tc = tcase_create("devices");
  tcase_add_checked_fixture(tc, clean, clean);
  tcase_add_test(tc, test_auto_without_gpu);
  tcase_add_test(tc, test_auto_with_gpu);
  tcase_add_test(tc, test_presets_from_memory);
  tcase_add_test(tc, test_attach_other_device);
  tcase_add_test(tc, test_attach_no_stream);
  suite_add_tcase(s, tc);

  return tu_run(s);
}
