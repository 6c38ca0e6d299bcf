/* test-vm-gpu.c -- the HIP backend's virtual memory (src/backend_hip_vm.c:
 * vm_granularity, vm_reserve, vm_release, vm_map, vm_unmap; the calls it
 * loads, src/gpu_rt.c), without a GPU.
 *
 * Every test runs on both stand-in runtimes (tests/fake: libfakehip.so,
 * whose hipMem* calls are its exports, and libfakecudart.so, whose cuMem*
 * calls are reached only through cudaGetDriverEntryPointByVersion, as the
 * real driver's are; paths in $FAKE_HIP_LIB and $FAKE_CUDA_LIB, set by make
 * check), both serving host memory:
 *  - the granularity asked of the runtime; a range reserved, granules
 *    mapped, bytes written and read inside them (and copied across a
 *    granule boundary), one of two given back; the counters exactly;
 *  - an injected fault at each VM call kind: nothing changes that was not
 *    meant to (vm_map all or nothing, vm_unmap's *done exact), and
 *    last_error names the call;
 *  - the runtime's own refusals at each driver call (FAKE_GPU_FAIL):
 *    last_error names the call, vm_map gives back what it mapped (the
 *    fake's memory is whole again), a refused release keeps the memory
 *    held until a later call releases it;
 *  - the budget (desc.capacity) and the device's memory bound mapped bytes
 *    as pages; argument checks; a range with mapped granules is not
 *    released;
 *  - on CUDA, vm_unmap with `wait` synchronizes the device first (the
 *    fake's cuMemUnmap does not: a copy queued on the granule would read
 *    unmapped memory and crash the test);
 *  - no virtual memory (FAKE_GPU_NO_VMM=1, or calls answering
 *    NotSupported, or no entry point to the driver's calls): the
 *    backend's vm ops are NULL, all five, as on HIP before 6.1
 *    (FAKE_GPU_VERSION); CUDA's older entry point serves;
 *  - several threads mapping and unmapping at once;
 *  - destroy gives every granule, held allocation and range back.
 *
 * Every test starts and ends with no runtime loaded (hippo__gpu_rt_forget)
 * and none of the variables below set, so it reads the environment it sets
 * itself, forked (CK_FORK) or not.
 */
#include <config.h>

#include <check.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "emutest.h"
#include "gpu_rt.h"

/* A library that does not exist. */
#define NOLIB "/nonexistent/hippo-test/libnone.so"

static const char *const env_vars[] = {
    "HIPPO_GPU_RUNTIME",  "HIPPO_HIP_LIBRARY", "HIPPO_CUDA_LIBRARY",
    "FAKE_GPU_DEVICES",   "FAKE_GPU_MEMORY",   "FAKE_GPU_ALIGNMENT",
    "FAKE_GPU_FAIL",      "FAKE_GPU_NO_VMM",   "FAKE_GPU_VM_GRANULARITY",
    "FAKE_GPU_VERSION",   "FAKE_GPU_ENTRY",    "FAKE_GPU_SLOW_US",
    "HIPPO_CUDA_DRIVER_LIBRARY", NULL};

static void clean(void) {
  hippo__gpu_rt_forget();
  for (const char *const *v = env_vars; *v; v++)
    unsetenv(*v);
}

static void env(const char *name, const char *value) {
  setenv(name, value, 1);
}

/* ---- the runtime under test: _i of the loop tests ------------------------ */

#define G (2 * MiB) /* the stand-ins' default granularity */

typedef struct flavor {
  const char *rt;     /* "HIP", "CUDA" */
  const char *prefix; /* of the VMM calls: "hip", "cu" */
  const char *var;    /* the stand-in's path */
} flavor;

static const flavor flavors[2] = {{"HIP", "hip", "FAKE_HIP_LIB"},
                                  {"CUDA", "cu", "FAKE_CUDA_LIB"}};

/* Only flavor f's stand-in may load. */
static void use(int f) {
  env("HIPPO_GPU_RUNTIME", f == 0 ? "hip" : "cuda");
  env("HIPPO_HIP_LIBRARY", f == 0 ? tu_fake_lib(flavors[0].var) : NOLIB);
  env("HIPPO_CUDA_LIBRARY", f == 1 ? tu_fake_lib(flavors[1].var) : NOLIB);
}

static hippo__backend *gpu_new(uint64_t capacity) {
  hippo__backend *be = NULL;
  CK_CORE_OK(hippo__backend_hip_create(0, capacity, 0, &be));
  ck_assert_ptr_nonnull(be);
  ck_assert_uint_eq(be->kind, HIPPO_BACKEND_HIP);
  return be;
}

/* A backend of flavor f with virtual memory. */
static hippo__backend *vm_new(int f, uint64_t capacity) {
  hippo__backend *be;
  use(f);
  be = gpu_new(capacity);
  ck_assert_msg(be->ops->vm_granularity && be->ops->vm_reserve &&
                    be->ops->vm_release && be->ops->vm_map &&
                    be->ops->vm_unmap,
                "%s: the backend has no virtual memory", flavors[f].rt);
  return be;
}

static void no_vm(const hippo__backend *be) {
  ck_assert_ptr_null(be->ops->vm_granularity);
  ck_assert_ptr_null(be->ops->vm_reserve);
  ck_assert_ptr_null(be->ops->vm_release);
  ck_assert_ptr_null(be->ops->vm_map);
  ck_assert_ptr_null(be->ops->vm_unmap);
}

static uint64_t range_new(hippo__backend *be, uint64_t size) {
  uint64_t addr = 0;
  CK_CORE_OK(be->ops->vm_reserve(be, size, G, &addr));
  ck_assert_uint_ne(addr, 0);
  ck_assert_uint_eq(addr % G, 0);
  return addr;
}

/* The stand-in device's free bytes, asked of the runtime itself. */
static uint64_t device_free(void) {
  const hippo__gpu_rt *rt = NULL;
  size_t fr = 0, tot = 0;
  const char *force = getenv("HIPPO_GPU_RUNTIME");
  CK_CORE_OK(hippo__gpu_rt_load(
      force && !strcmp(force, "cuda") ? HIPPO__GPU_CUDA : HIPPO__GPU_HIP,
      &rt));
  ck_assert_int_eq(rt->mem_info(&fr, &tot), HIPPO__GPU_SUCCESS);
  return fr;
}

/* "<RT> <prefix><call> failed" */
static const char *failed(int f, const char *call) {
  static char text[128];
  snprintf(text, sizeof text, "%s %s%s failed", flavors[f].rt,
           flavors[f].prefix, call);
  return text;
}

/* "injected fault: <RT> <call> call #<n> failed with <status>" */
static const char *injected(int f, const char *call, unsigned n,
                            hippo_status st) {
  static char text[160];
  snprintf(text, sizeof text, "injected fault: %s %s call #%u failed with %s",
           flavors[f].rt, call, n, hippo__status_name(st));
  return text;
}

/* The mapped figures: granules, bytes (held == mapped + extra). */
static void mapped_is(hippo__backend *be, uint64_t granules, uint64_t bytes,
                      uint64_t held) {
  hippo_emu_counters c = counters_of(be);
  ck_assert_uint_eq(c.granules_mapped, granules);
  ck_assert_uint_eq(c.bytes_mapped, bytes);
  ck_assert_uint_eq(c.bytes_held, held);
}

static void fill(unsigned char *buf, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    buf[i] = (unsigned char)(seed * 131u + i * 7u + 1u);
}

/* Writes n pattern bytes at addr and reads them back. */
static void bytes_ok(hippo__backend *be, uint64_t addr, size_t n,
                     unsigned seed) {
  unsigned char in[256], out[256];
  ck_assert_uint_le(n, sizeof in);
  fill(in, n, seed);
  memset(out, 0, sizeof out);
  CK_CORE_OK(be->ops->emu_write(be, addr, in, n));
  CK_CORE_OK(be->ops->emu_read(be, addr, out, n));
  ck_assert_mem_eq(in, out, n);
}

/* A range of two granules mapped, 16 pattern bytes at `off` in it read
 * back, unmapped and given back; then the backend goes. */
static void two_granules_then_destroy(hippo__backend *be, uint64_t off,
                                      unsigned seed) {
  uint64_t r = range_new(be, 2 * G), done = 0;
  CK_CORE_OK(be->ops->vm_map(be, r, 2 * G, G));
  bytes_ok(be, r + off, 16, seed);
  CK_CORE_OK(be->ops->vm_unmap(be, r, 2 * G, G, true, &done));
  CK_CORE_OK(be->ops->vm_release(be, r, 2 * G));
  be->ops->destroy(be);
}

/* ---- the whole life of a range ------------------------------------------- */

/* The granularity is the runtime's; a range is address space only; mapped
 * granules hold bytes (emu_write/emu_read, a copy across a granule
 * boundary), count as held memory, and go back one by one; a range with
 * mapped granules is not released; every figure is exact. */
START_TEST(test_range_life) {
  int f = _i;
  hippo__backend *be = vm_new(f, 0);
  unsigned char in[64], out[64];
  uint64_t gran = 0, r, done = 7, fr, tot;
  hippo_emu_counters c;

  CK_CORE_OK(be->ops->vm_granularity(be, &gran));
  ck_assert_uint_eq(gran, G);
  ck_assert_uint_eq(device_free(), GiB);

  r = range_new(be, 8 * G);
  c = counters_of(be);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_VM_RANGE], 1);
  ck_assert_uint_eq(c.ranges_held, 1);
  ck_assert_uint_eq(c.bytes_virtual, 8 * G);
  ck_assert_uint_eq(c.bytes_held, 0);
  ck_assert_uint_eq(device_free(), GiB); /* no memory behind it */
  /* nothing mapped yet: no bytes there */
  CK_CORE_FAILS(be->ops->emu_read(be, r, out, 8), HIPPO_INVALID_ARGUMENT,
                "emu_read");

  CK_CORE_OK(be->ops->vm_map(be, r, 2 * G, G));
  c = counters_of(be);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_VM_MAP], 2);
  ck_assert_uint_eq(c.granules_mapped, 2);
  ck_assert_uint_eq(c.bytes_mapped, 2 * G);
  ck_assert_uint_eq(c.peak_bytes_mapped, 2 * G);
  ck_assert_uint_eq(c.bytes_held, 2 * G);
  ck_assert_uint_eq(c.peak_bytes_held, 2 * G);
  ck_assert_uint_eq(c.pages_held, 0);
  ck_assert_uint_eq(device_free(), GiB - 2 * G);
  CK_CORE_OK(be->ops->mem_info(be, &fr, &tot));
  ck_assert_uint_eq(fr, GiB - 2 * G);

  /* bytes inside, across the boundary of the two granules */
  bytes_ok(be, r, 64, 1);
  bytes_ok(be, r + G - 32, 64, 2);
  bytes_ok(be, r + 2 * G - 64, 64, 3);
  /* past the mapped run: refused, naming the argument */
  CK_CORE_FAILS(be->ops->emu_read(be, r + 2 * G - 8, out, 16),
                HIPPO_INVALID_ARGUMENT, "device_ptr");
  /* a copy on the default stream, across the boundary, into a page */
  {
    uint64_t page = page_new(be, 4096);
    CK_CORE_OK(be->ops->copy(be, NULL, page, r + G - 32, 64));
    CK_CORE_OK(be->ops->stream_sync(be, NULL));
    fill(in, 64, 2);
    CK_CORE_OK(be->ops->emu_read(be, page, out, 64));
    ck_assert_mem_eq(in, out, 64);
    CK_CORE_OK(be->ops->page_free(be, page, 4096));
  }

  /* the second granule goes back */
  CK_CORE_OK(be->ops->vm_unmap(be, r + G, G, G, true, &done));
  ck_assert_uint_eq(done, G);
  c = counters_of(be);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_VM_UNMAP], 1);
  ck_assert_uint_eq(c.granules_mapped, 1);
  ck_assert_uint_eq(c.bytes_mapped, G);
  ck_assert_uint_eq(c.peak_bytes_mapped, 2 * G);
  ck_assert_uint_eq(c.bytes_held, G);
  ck_assert_uint_eq(device_free(), GiB - G);
  CK_CORE_FAILS(be->ops->emu_read(be, r + G, out, 8), HIPPO_INVALID_ARGUMENT,
                "emu_read");
  fill(in, 64, 1); /* the first one's bytes are intact */
  CK_CORE_OK(be->ops->emu_read(be, r, out, 64));
  ck_assert_mem_eq(in, out, 64);

  /* a range with a mapped granule is not released (the call counted) */
  CK_CORE_FAILS(be->ops->vm_release(be, r, 8 * G), HIPPO_INVALID_ARGUMENT,
                "still has 2097152 B mapped");
  ck_assert_uint_eq(counters_of(be).calls[HIPPO_CALL_VM_RANGE], 2);
  ck_assert_uint_eq(counters_of(be).ranges_held, 1);

  /* mapped again where it was given back: fresh memory */
  CK_CORE_OK(be->ops->vm_map(be, r + G, G, G));
  bytes_ok(be, r + G, 64, 4);
  CK_CORE_OK(be->ops->vm_unmap(be, r, 2 * G, G, false, &done));
  ck_assert_uint_eq(done, 2 * G);
  CK_CORE_OK(be->ops->vm_release(be, r, 8 * G));
  c = counters_of(be);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_VM_RANGE], 3);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_VM_MAP], 3);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_VM_UNMAP], 3);
  ck_assert_uint_eq(c.ranges_held, 0);
  ck_assert_uint_eq(c.bytes_virtual, 0);
  ck_assert_uint_eq(c.granules_mapped, 0);
  ck_assert_uint_eq(c.bytes_mapped, 0);
  ck_assert_uint_eq(c.peak_bytes_mapped, 2 * G);
  ck_assert_uint_eq(c.bytes_held, 0);
  ck_assert_uint_eq(device_free(), GiB);
  /* released twice: refused */
  CK_CORE_FAILS(be->ops->vm_release(be, r, 8 * G), HIPPO_INVALID_ARGUMENT,
                "is not a range vm_reserve gave");
  be->ops->destroy(be);
}
END_TEST

/* Granules of several granularities in one range, and two ranges. */
START_TEST(test_granules_and_ranges) {
  int f = _i;
  hippo__backend *be = vm_new(f, 0);
  uint64_t a = range_new(be, 16 * G), b = range_new(be, 4 * G), done = 0;
  hippo_emu_counters c;

  CK_CORE_OK(be->ops->vm_map(be, a, 8 * G, 4 * G)); /* 2 granules of 8 MiB */
  CK_CORE_OK(be->ops->vm_map(be, a + 12 * G, 2 * G, G));
  CK_CORE_OK(be->ops->vm_map(be, b, 4 * G, G));
  c = counters_of(be);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_VM_MAP], 2 + 2 + 4);
  ck_assert_uint_eq(c.granules_mapped, 8);
  ck_assert_uint_eq(c.bytes_mapped, 14 * G);
  ck_assert_uint_eq(c.ranges_held, 2);
  ck_assert_uint_eq(c.bytes_virtual, 20 * G);
  bytes_ok(be, a + 4 * G - 16, 32, 5);
  bytes_ok(be, b + 4 * G - 32, 32, 6);
  /* given back in other granules than mapped: refused */
  CK_CORE_FAILS(be->ops->vm_unmap(be, a, 4 * G, G, true, &done),
                HIPPO_INVALID_ARGUMENT, "is not mapped whole");
  ck_assert_uint_eq(done, 0);
  CK_CORE_OK(be->ops->vm_unmap(be, a + 4 * G, 4 * G, 4 * G, true, &done));
  ck_assert_uint_eq(done, 4 * G);
  mapped_is(be, 7, 10 * G, 10 * G);
  ck_assert_uint_eq(device_free(), GiB - 10 * G);
  be->ops->destroy(be);
  ck_assert_uint_eq(device_free(), GiB);
}
END_TEST

/* ---- faults ------------------------------------------------------------------ */

/* An injected fault at each VM call kind: the call fails with the status,
 * last_error names it, and nothing changed that the call was not done
 * with: vm_reserve reserves nothing, vm_map gives back the granules it had
 * mapped (all or nothing), vm_unmap stops there and *done says how far it
 * got; the calls are counted all the same. */
START_TEST(test_injected_faults) {
  int f = _i;
  hippo__backend *be = vm_new(f, 0);
  uint64_t r, other = 0, done = 1;
  hippo_emu_counters c;

  /* VM_RANGE */
  CK_CORE_OK(be->ops->emu_inject_fault(be, HIPPO_CALL_VM_RANGE, 1,
                                       HIPPO_OUT_OF_MEMORY));
  CK_CORE_STATUS(be->ops->vm_reserve(be, 4 * G, G, &other),
                 HIPPO_OUT_OF_MEMORY);
  CK_CORE_ERROR_IS(injected(f, "vm_reserve", 1, HIPPO_OUT_OF_MEMORY));
  ck_assert_uint_eq(other, 0);
  c = counters_of(be);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_VM_RANGE], 1);
  ck_assert_uint_eq(c.ranges_held, 0);
  ck_assert_uint_eq(c.bytes_virtual, 0);
  r = range_new(be, 8 * G);

  /* VM_MAP: the third granule of four fails, the two before go back */
  CK_CORE_OK(be->ops->emu_inject_fault(be, HIPPO_CALL_VM_MAP, 3,
                                       HIPPO_BACKEND_ERROR));
  CK_CORE_STATUS(be->ops->vm_map(be, r, 4 * G, G), HIPPO_BACKEND_ERROR);
  CK_CORE_ERROR_IS(injected(f, "vm_map", 3, HIPPO_BACKEND_ERROR));
  c = counters_of(be);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_VM_MAP], 3);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_VM_UNMAP], 2); /* the undo's */
  ck_assert_uint_eq(c.granules_mapped, 0);
  ck_assert_uint_eq(c.bytes_mapped, 0);
  ck_assert_uint_eq(c.peak_bytes_mapped, 0);
  ck_assert_uint_eq(c.bytes_held, 0);
  ck_assert_uint_eq(device_free(), GiB); /* released, not only unmapped */
  {
    unsigned char b[8];
    CK_CORE_FAILS(be->ops->emu_read(be, r, b, 8), HIPPO_INVALID_ARGUMENT,
                  "emu_read");
  }
  /* once only: the same map succeeds */
  CK_CORE_OK(be->ops->vm_map(be, r, 4 * G, G));
  mapped_is(be, 4, 4 * G, 4 * G);
  ck_assert_uint_eq(counters_of(be).calls[HIPPO_CALL_VM_MAP], 7);
  bytes_ok(be, r + 3 * G, 16, 7);

  /* VM_UNMAP: the third granule of four fails; two went back */
  CK_CORE_OK(be->ops->emu_inject_fault(be, HIPPO_CALL_VM_UNMAP, 3,
                                       HIPPO_BACKEND_ERROR));
  CK_CORE_STATUS(be->ops->vm_unmap(be, r, 4 * G, G, true, &done),
                 HIPPO_BACKEND_ERROR);
  CK_CORE_ERROR_IS(injected(f, "vm_unmap", 5, HIPPO_BACKEND_ERROR));
  ck_assert_uint_eq(done, 2 * G);
  c = counters_of(be);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_VM_UNMAP], 5);
  ck_assert_uint_eq(c.granules_mapped, 2);
  ck_assert_uint_eq(c.bytes_held, 2 * G);
  ck_assert_uint_eq(device_free(), GiB - 2 * G);
  bytes_ok(be, r + 2 * G, 16, 8); /* the rest stays mapped */
  {
    unsigned char b[8];
    CK_CORE_FAILS(be->ops->emu_read(be, r + G, b, 8), HIPPO_INVALID_ARGUMENT,
                  "emu_read");
  }
  /* vm_release with mapped granules: refused; a fault on it too */
  CK_CORE_FAILS(be->ops->vm_release(be, r, 8 * G), HIPPO_INVALID_ARGUMENT,
                "still has 4194304 B mapped");
  CK_CORE_OK(be->ops->vm_unmap(be, r + 2 * G, 2 * G, G, true, &done));
  ck_assert_uint_eq(done, 2 * G);
  CK_CORE_OK(be->ops->emu_inject_fault(be, HIPPO_CALL_VM_RANGE, 1,
                                       HIPPO_BUSY));
  CK_CORE_STATUS(be->ops->vm_release(be, r, 8 * G), HIPPO_BUSY);
  CK_CORE_ERROR_HAS(injected(f, "vm_release", 4, HIPPO_BUSY));
  ck_assert_uint_eq(counters_of(be).ranges_held, 1);
  CK_CORE_OK(be->ops->vm_release(be, r, 8 * G));
  c = counters_of(be);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_VM_RANGE], 5);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_VM_MAP], 7);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_VM_UNMAP], 7);
  ck_assert_uint_eq(c.ranges_held, 0);
  ck_assert_uint_eq(c.bytes_held, 0);
  ck_assert_uint_eq(device_free(), GiB);
  be->ops->destroy(be);
}
END_TEST

/* The runtime's own refusals, at each driver call: last_error names the
 * call (with the runtime's prefix), vm_map gives back what it had mapped
 * (the device's memory is whole again), vm_unmap says how far it got; a
 * refused release (the granule unmapped) keeps the memory held until the
 * next call releases it. */
START_TEST(test_driver_refusals) {
  int f = _i;
  hippo__backend *be = vm_new(f, 0);
  uint64_t r = range_new(be, 8 * G), x = 0, done = 0;

  /* hipMemSetAccess's spurious refusal (ROCm), set once over the span of
   * four allocations: all four go back */
  env("FAKE_GPU_FAIL", "vmaccess:1");
  CK_CORE_STATUS(be->ops->vm_map(be, r, 4 * G, G), HIPPO_BACKEND_ERROR);
  CK_CORE_ERROR_HAS(failed(f, "MemSetAccess"));
  CK_CORE_ERROR_HAS("vm_map: [");
  mapped_is(be, 0, 0, 0);
  ck_assert_uint_eq(device_free(), GiB);

  env("FAKE_GPU_FAIL", "vmcreate:2"); /* the device is full */
  CK_CORE_STATUS(be->ops->vm_map(be, r, 2 * G, G), HIPPO_OUT_OF_MEMORY);
  CK_CORE_ERROR_HAS(failed(f, "MemCreate"));
  mapped_is(be, 0, 0, 0);
  ck_assert_uint_eq(device_free(), GiB);

  env("FAKE_GPU_FAIL", "vmmap:2");
  CK_CORE_STATUS(be->ops->vm_map(be, r, 2 * G, G), HIPPO_BACKEND_ERROR);
  CK_CORE_ERROR_HAS(failed(f, "MemMap"));
  mapped_is(be, 0, 0, 0);
  ck_assert_uint_eq(device_free(), GiB);

  env("FAKE_GPU_FAIL", "vmreserve");
  CK_CORE_STATUS(be->ops->vm_reserve(be, 2 * G, G, &x), HIPPO_OUT_OF_MEMORY);
  CK_CORE_ERROR_HAS(failed(f, "MemAddressReserve"));
  ck_assert_uint_eq(counters_of(be).ranges_held, 1);

  unsetenv("FAKE_GPU_FAIL");
  CK_CORE_OK(be->ops->vm_map(be, r, 4 * G, G));
  mapped_is(be, 4, 4 * G, 4 * G);

  /* the second unmap refused: one granule went back */
  env("FAKE_GPU_FAIL", "vmunmap:2");
  CK_CORE_STATUS(be->ops->vm_unmap(be, r, 3 * G, G, true, &done),
                 HIPPO_BACKEND_ERROR);
  CK_CORE_ERROR_HAS(failed(f, "MemUnmap"));
  ck_assert_uint_eq(done, G);
  mapped_is(be, 3, 3 * G, 3 * G);
  ck_assert_uint_eq(device_free(), GiB - 3 * G);
  bytes_ok(be, r + G, 16, 9);

  /* the release refused: the granule is unmapped (counted in *done) but
   * its memory stays held; the next call releases it */
  env("FAKE_GPU_FAIL", "vmrelease");
  CK_CORE_STATUS(be->ops->vm_unmap(be, r + G, 2 * G, G, true, &done),
                 HIPPO_BACKEND_ERROR);
  CK_CORE_ERROR_HAS(failed(f, "MemRelease"));
  CK_CORE_ERROR_HAS("stays held");
  ck_assert_uint_eq(done, G);
  mapped_is(be, 2, 2 * G, 3 * G);
  ck_assert_uint_eq(device_free(), GiB - 3 * G);
  unsetenv("FAKE_GPU_FAIL");
  CK_CORE_OK(be->ops->vm_unmap(be, r + 2 * G, G, G, true, &done));
  mapped_is(be, 1, G, G);
  ck_assert_uint_eq(device_free(), GiB - G);

  /* the range's free refused: still held */
  CK_CORE_OK(be->ops->vm_unmap(be, r + 3 * G, G, G, false, &done));
  env("FAKE_GPU_FAIL", "vmfree");
  CK_CORE_STATUS(be->ops->vm_release(be, r, 8 * G), HIPPO_BACKEND_ERROR);
  CK_CORE_ERROR_HAS(failed(f, "MemAddressFree"));
  ck_assert_uint_eq(counters_of(be).ranges_held, 1);
  unsetenv("FAKE_GPU_FAIL");
  CK_CORE_OK(be->ops->vm_release(be, r, 8 * G));
  ck_assert_uint_eq(counters_of(be).ranges_held, 0);
  mapped_is(be, 0, 0, 0);
  ck_assert_uint_eq(device_free(), GiB);
  be->ops->destroy(be);
}
END_TEST

/* vm_map's giving back refused too: granules the runtime will not unmap
 * stay mapped and counted (the message says so), allocations it will not
 * release stay held until a later call releases them; the figures say
 * exactly what is held. */
START_TEST(test_rollback_refused) {
  int f = _i;
  hippo__backend *be = vm_new(f, 0);
  uint64_t r = range_new(be, 8 * G), done = 0;

  /* the span's access refused, and every release after it */
  env("FAKE_GPU_FAIL", "vmaccess:1,vmrelease");
  CK_CORE_STATUS(be->ops->vm_map(be, r, 4 * G, G), HIPPO_BACKEND_ERROR);
  CK_CORE_ERROR_HAS(failed(f, "MemSetAccess"));
  mapped_is(be, 0, 0, 4 * G); /* unmapped, four allocations held */
  ck_assert_uint_eq(device_free(), GiB - 4 * G);
  unsetenv("FAKE_GPU_FAIL");
  CK_CORE_OK(be->ops->vm_map(be, r, G, G)); /* releases them first */
  mapped_is(be, 1, G, G);
  ck_assert_uint_eq(device_free(), GiB - G);
  CK_CORE_OK(be->ops->vm_unmap(be, r, G, G, true, &done));

  /* a map refused, and its allocation's release */
  env("FAKE_GPU_FAIL", "vmmap:2,vmrelease");
  CK_CORE_STATUS(be->ops->vm_map(be, r, 2 * G, G), HIPPO_BACKEND_ERROR);
  CK_CORE_ERROR_HAS(failed(f, "MemMap"));
  mapped_is(be, 0, 0, 2 * G);
  unsetenv("FAKE_GPU_FAIL");
  CK_CORE_OK(be->ops->vm_map(be, r + 4 * G, G, G));
  mapped_is(be, 1, G, G);
  CK_CORE_OK(be->ops->vm_unmap(be, r + 4 * G, G, G, true, &done));

  /* the unmaps refused: the four allocations stay mapped, and say so */
  env("FAKE_GPU_FAIL", "vmaccess:1,vmunmap");
  CK_CORE_STATUS(be->ops->vm_map(be, r, 4 * G, G), HIPPO_BACKEND_ERROR);
  CK_CORE_ERROR_HAS(failed(f, "MemSetAccess"));
  CK_CORE_ERROR_HAS("4 granules of this call could not be unmapped and stay "
                    "mapped");
  mapped_is(be, 4, 4 * G, 4 * G);
  ck_assert_uint_eq(device_free(), GiB - 4 * G);
  unsetenv("FAKE_GPU_FAIL");
  CK_CORE_OK(be->ops->vm_unmap(be, r, 4 * G, G, true, &done));
  ck_assert_uint_eq(done, 4 * G);
  mapped_is(be, 0, 0, 0);
  ck_assert_uint_eq(device_free(), GiB);
  CK_CORE_OK(be->ops->vm_release(be, r, 8 * G));
  be->ops->destroy(be);
}
END_TEST

/* ---- memory bounds and arguments ---------------------------------------- */

/* A budget (desc.capacity) bounds mapped bytes and pages together, without
 * asking the runtime; the device's own memory bounds them too (the
 * runtime's out-of-memory answer, nothing left mapped). */
START_TEST(test_budget_and_device_full) {
  int f = _i;
  hippo__backend *be = vm_new(f, 8 * G);
  uint64_t r = range_new(be, 8 * G), page = 0, done = 0;

  CK_CORE_OK(be->ops->vm_map(be, r, 3 * G, G));
  page = page_new(be, G);
  CK_CORE_FAILS(be->ops->vm_map(be, r + 3 * G, 5 * G, G), HIPPO_OUT_OF_MEMORY,
                "budget");
  ck_assert_uint_eq(counters_of(be).calls[HIPPO_CALL_VM_MAP], 3);
  CK_CORE_OK(be->ops->vm_map(be, r + 3 * G, 4 * G, G));
  mapped_is(be, 7, 7 * G, 8 * G);
  {
    uint64_t more = 0;
    CK_CORE_FAILS(be->ops->page_alloc(be, 4096, &more), HIPPO_OUT_OF_MEMORY,
                  "budget");
  }
  CK_CORE_OK(be->ops->page_free(be, page, G));
  CK_CORE_OK(be->ops->vm_map(be, r + 7 * G, G, G));
  CK_CORE_OK(be->ops->vm_unmap(be, r, 8 * G, G, true, &done));
  CK_CORE_OK(be->ops->vm_release(be, r, 8 * G));
  be->ops->destroy(be);
  clean();

  /* the device: 8 granules of memory, 3 taken by someone else, so the
   * runtime refuses the sixth granule before the budget does */
  env("FAKE_GPU_MEMORY", "16777216");
  be = vm_new(f, 0);
  {
    const hippo__gpu_rt *rt = NULL;
    void *other = NULL;
    CK_CORE_OK(hippo__gpu_rt_load(f ? HIPPO__GPU_CUDA : HIPPO__GPU_HIP, &rt));
    ck_assert_int_eq(rt->malloc_(&other, 3 * G), HIPPO__GPU_SUCCESS);
    r = range_new(be, 8 * G);
    CK_CORE_STATUS(be->ops->vm_map(be, r, 6 * G, G), HIPPO_OUT_OF_MEMORY);
    CK_CORE_ERROR_HAS(failed(f, "MemCreate"));
    CK_CORE_ERROR_HAS("release or clean up device memory");
    mapped_is(be, 0, 0, 0);
    ck_assert_uint_eq(counters_of(be).calls[HIPPO_CALL_VM_MAP], 6);
    ck_assert_uint_eq(device_free(), 5 * G);
    CK_CORE_OK(be->ops->vm_map(be, r, 5 * G, G));
    ck_assert_uint_eq(device_free(), 0);
    be->ops->destroy(be);
    ck_assert_uint_eq(device_free(), 5 * G);
    ck_assert_int_eq(rt->free_(other), HIPPO__GPU_SUCCESS);
  }
}
END_TEST

/* Bad arguments are refused before any driver call, and the map and
 * unmap kinds are not counted for them (as on HOST). */
START_TEST(test_arguments) {
  int f = _i;
  hippo__backend *be = vm_new(f, 0);
  uint64_t r = range_new(be, 4 * G), x = 0, done = 5;
  hippo_emu_counters c;

  CK_CORE_FAILS(be->ops->vm_reserve(be, G + 4096, G, &x),
                HIPPO_INVALID_ARGUMENT, "is not a positive multiple");
  CK_CORE_FAILS(be->ops->vm_reserve(be, 0, G, &x), HIPPO_INVALID_ARGUMENT,
                "vm_reserve");
  CK_CORE_FAILS(be->ops->vm_map(be, r, G, G / 2), HIPPO_INVALID_ARGUMENT,
                "granule");
  CK_CORE_FAILS(be->ops->vm_map(be, r, G + 4096, G), HIPPO_INVALID_ARGUMENT,
                "size");
  CK_CORE_FAILS(be->ops->vm_map(be, r + 4096, G, G), HIPPO_INVALID_ARGUMENT,
                "not granule-aligned inside a range");
  CK_CORE_FAILS(be->ops->vm_map(be, r + 3 * G, 2 * G, G),
                HIPPO_INVALID_ARGUMENT, "not granule-aligned inside a range");
  CK_CORE_FAILS(be->ops->vm_map(be, r + 8 * G, G, G), HIPPO_INVALID_ARGUMENT,
                "not granule-aligned inside a range");
  CK_CORE_OK(be->ops->vm_map(be, r + G, G, G));
  CK_CORE_FAILS(be->ops->vm_map(be, r, 2 * G, G), HIPPO_INVALID_ARGUMENT,
                "mapped already");
  CK_CORE_FAILS(be->ops->vm_unmap(be, r, 2 * G, G, true, &done),
                HIPPO_INVALID_ARGUMENT, "is not mapped whole");
  ck_assert_uint_eq(done, 0);
  CK_CORE_FAILS(be->ops->vm_release(be, r + G, 3 * G),
                HIPPO_INVALID_ARGUMENT, "is not a range vm_reserve gave");
  c = counters_of(be);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_VM_MAP], 1);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_VM_UNMAP], 0);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_VM_RANGE], 4);
  mapped_is(be, 1, G, G);
  be->ops->destroy(be);
  ck_assert_uint_eq(device_free(), GiB);
}
END_TEST

/* vm_unmap with `wait`: the device's queued work finishes first.  A copy
 * reading the granule is queued on a stream (the stand-ins run it at the
 * stream's synchronization); after the unmap its bytes have landed.  On
 * both this is hippo's device synchronize: the fake's cuMemUnmap does not
 * wait, and its hipMemUnmap waits only for the null and the blocking
 * streams, as ROCm's does, while hippo's stream is non-blocking: the copy
 * would then read unmapped memory and crash (issue 40 item 1: it did on
 * HIP before). */
START_TEST(test_unmap_waits) {
  int f = _i;
  hippo__backend *be = vm_new(f, 0);
  uint64_t r = range_new(be, 2 * G), page, done = 0;
  unsigned char in[64], out[64];
  void *s = NULL;

  CK_CORE_OK(be->ops->vm_map(be, r, 2 * G, G));
  page = page_new(be, 4096);
  fill(in, sizeof in, 11);
  CK_CORE_OK(be->ops->emu_write(be, r + G + 128, in, sizeof in));
  CK_CORE_OK(be->ops->emu_stream_create(be, &s));
  CK_CORE_OK(be->ops->copy(be, s, page, r + G + 128, sizeof in));
  CK_CORE_OK(be->ops->vm_unmap(be, r, 2 * G, G, true, &done));
  ck_assert_uint_eq(done, 2 * G);
  CK_CORE_OK(be->ops->stream_sync(be, s));
  CK_CORE_OK(be->ops->emu_read(be, page, out, sizeof out));
  ck_assert_mem_eq(in, out, sizeof in);
  CK_CORE_OK(be->ops->emu_stream_destroy(be, s));
  CK_CORE_OK(be->ops->page_free(be, page, 4096));
  CK_CORE_OK(be->ops->vm_release(be, r, 2 * G));
  be->ops->destroy(be);
}
END_TEST

/* ---- without virtual memory, and the other ways to it ----------------------- */

/* The device says it has none, or the calls answer NotSupported: the
 * backend's vm ops are all NULL (so layouts fall back), the rest works;
 * device_info says granularity 0. */
START_TEST(test_no_vmm) {
  int f = _i;
  static const char *const how[] = {"1", "calls"};
  for (int k = 0; k < 2; k++) {
    hippo__backend *be;
    uint64_t page;
    clean();
    env("FAKE_GPU_NO_VMM", how[k]);
    use(f);
    be = gpu_new(0);
    no_vm(be);
    /* why, for device_info's note: the attribute, or the call's answer */
    ck_assert_msg(strstr(be->vm_why, k == 0 ? "says the device has none"
                                            : "answered") != NULL,
                  "vm_why: \"%s\"", be->vm_why);
    page = page_new(be, 4096);
    bytes_ok(be, page, 16, 12);
    CK_CORE_OK(be->ops->page_free(be, page, 4096));
    be->ops->destroy(be);
  }
  {
    hippo_device_desc d;
    hippo_device *dev = NULL;
    hippo_device_info info;
    hippo_layout virt = {sizeof virt, HIPPO_PRESET_VIRTUAL, 0, 0, NULL};
    TU_SIZED(d);
    d.backend = HIPPO_BACKEND_HIP;
    CK_CORE_OK(hippo__device_open(&d, &virt, NULL, NULL, &dev));
    TU_SIZED(info);
    CK_CORE_OK(hippo__device_info(dev, &info));
    ck_assert_uint_eq(info.vm_granularity, 0);
    ck_assert_uint_eq(info.preset, HIPPO_PRESET_ADAPTIVE);
    /* the note says the preset fell back, and why (the calls answer
     * NotSupported: FAKE_GPU_NO_VMM=calls, from the loop above) */
    ck_assert_msg(strstr(info.note, "ADAPTIVE serves instead (") != NULL &&
                      strstr(info.note, "GetAllocationGranularity answered") !=
                          NULL,
                  "note: \"%s\"", info.note);
    CK_CORE_OK(hippo__device_close(dev));
    unsetenv("FAKE_GPU_NO_VMM");
    CK_CORE_OK(hippo__device_open(&d, NULL, NULL, NULL, &dev));
    TU_SIZED(info);
    CK_CORE_OK(hippo__device_info(dev, &info));
    ck_assert_uint_eq(info.vm_granularity, G);
    CK_CORE_OK(hippo__device_close(dev));
  }
}
END_TEST

/* The granularity is asked, never assumed. */
START_TEST(test_granularity_asked) {
  int f = _i;
  hippo__backend *be;
  uint64_t gran = 0, r, done = 0;
  env("FAKE_GPU_VM_GRANULARITY", "65536");
  be = vm_new(f, 0);
  CK_CORE_OK(be->ops->vm_granularity(be, &gran));
  ck_assert_uint_eq(gran, 65536);
  CK_CORE_OK(be->ops->vm_reserve(be, 16 * 65536, 65536, &r));
  CK_CORE_OK(be->ops->vm_map(be, r, 4 * 65536, 65536));
  bytes_ok(be, r + 65536 - 8, 16, 13);
  CK_CORE_OK(be->ops->vm_unmap(be, r, 4 * 65536, 65536, true, &done));
  CK_CORE_OK(be->ops->vm_release(be, r, 16 * 65536));
  be->ops->destroy(be);
  clean();
  /* one that is no power of two is refused: no virtual memory */
  env("FAKE_GPU_VM_GRANULARITY", "3000000");
  use(f);
  be = gpu_new(0);
  no_vm(be);
  be->ops->destroy(be);
}
END_TEST

/* HIP 5.2 (Debian 12's): ROCm before 6.1 has no virtual memory on Linux,
 * whatever its calls answer (issue 40 item 4; test-gpu-quirks); there, a
 * runtime that answers NotSupported says the same. */
START_TEST(test_hip52_none) {
  hippo__backend *be;
  env("FAKE_GPU_VERSION", "50221153");
  use(0);
  be = gpu_new(0);
  no_vm(be);
  ck_assert_msg(strstr(be->vm_why, "5.2 (50221153)") != NULL, "%s",
                be->vm_why);
  be->ops->destroy(be);
  clean();
  env("FAKE_GPU_VERSION", "50221153");
  env("FAKE_GPU_NO_VMM", "1");
  use(0);
  be = gpu_new(0);
  no_vm(be);
  be->ops->destroy(be);
}
END_TEST

/* CUDA: the driver's calls through cudaGetDriverEntryPoint when the
 * versioned entry point does not serve; none at all: no virtual memory,
 * vm.missing naming the call. */
START_TEST(test_cuda_entry_points) {
  hippo__backend *be;
  const hippo__gpu_rt *rt = NULL;

  use(1);
  CK_CORE_OK(hippo__gpu_rt_load(HIPPO__GPU_CUDA, &rt));
  ck_assert_str_eq(rt->vm.via, "cudaGetDriverEntryPointByVersion");
  ck_assert_str_eq(rt->vm.missing, "");
  ck_assert_str_eq(rt->vm.prefix, "cu");
  ck_assert_ptr_nonnull(rt->vm.error_name);
  clean();

  env("FAKE_GPU_ENTRY", "legacy");
  be = vm_new(1, 0);
  CK_CORE_OK(hippo__gpu_rt_load(HIPPO__GPU_CUDA, &rt));
  ck_assert_str_eq(rt->vm.via, "cudaGetDriverEntryPoint");
  two_granules_then_destroy(be, 0, 15);
  clean();

  env("FAKE_GPU_ENTRY", "none");
  use(1);
  be = gpu_new(0);
  no_vm(be);
  CK_CORE_OK(hippo__gpu_rt_load(HIPPO__GPU_CUDA, &rt));
  ck_assert_msg(strstr(rt->vm.missing, "cuMemAddressReserve") ==
                    rt->vm.missing,
                "missing: %s", rt->vm.missing);
  be->ops->destroy(be);
  clean();

  /* CUDA 11.0 to 11.2 (no entry point): the driver library serves the
   * calls by name once cuInit answered, here the stand-in as libcuda */
  env("FAKE_GPU_ENTRY", "none");
  env("HIPPO_CUDA_DRIVER_LIBRARY", getenv("FAKE_CUDA_LIB"));
  be = vm_new(1, 0);
  CK_CORE_OK(hippo__gpu_rt_load(HIPPO__GPU_CUDA, &rt));
  ck_assert_str_eq(rt->vm.via, "the driver library (libcuda)");
  ck_assert_str_eq(rt->vm.missing, "");
  two_granules_then_destroy(be, 0, 16);
}
END_TEST

/* HIP's calls are the runtime's exports. */
START_TEST(test_hip_exports) {
  const hippo__gpu_rt *rt = NULL;
  use(0);
  CK_CORE_OK(hippo__gpu_rt_load(HIPPO__GPU_HIP, &rt));
  ck_assert_str_eq(rt->vm.prefix, "hip");
  ck_assert_str_eq(rt->vm.missing, "");
  ck_assert_ptr_nonnull(rt->vm.reserve);
  ck_assert_ptr_nonnull(rt->vm.granularity);
  ck_assert_ptr_null(rt->vm.device_get); /* CUDA's */
  ck_assert_ptr_nonnull(rt->device_sync);
}
END_TEST

/* Many granules mapped and given back one by one in a random order (the
 * granule table grows, and entries leave it from the middle of their
 * probe runs while others join): every unmap finds its granule, the
 * figures follow, and the bytes of each granule are its own. */
START_TEST(test_many_granules) {
  int f = _i;
  enum { N = 600, STEPS = 4 * N };
  const uint64_t g = 65536;
  static bool mapped[N];
  static unsigned char value[N];
  hippo__backend *be;
  uint64_t r = 0, done = 0, live = 0;
  unsigned seed = 12345;

  env("FAKE_GPU_VM_GRANULARITY", "65536");
  be = vm_new(f, 0);
  CK_CORE_OK(be->ops->vm_reserve(be, N * g, g, &r));
  memset(mapped, 0, sizeof mapped);
  for (int i = 0; i < STEPS; i++) {
    int k;
    seed = seed * 1103515245u + 12345u;
    k = (int)((seed >> 8) % N);
    if (!mapped[k]) {
      value[k] = (unsigned char)(seed >> 20);
      CK_CORE_OK(be->ops->vm_map(be, r + k * g, g, g));
      CK_CORE_OK(be->ops->emu_write(be, r + k * g + 100, &value[k], 1));
      live++;
    } else {
      unsigned char back = 0;
      CK_CORE_OK(be->ops->emu_read(be, r + k * g + 100, &back, 1));
      CK_REQUIRE_EQ(back, value[k]);
      CK_CORE_OK(be->ops->vm_unmap(be, r + k * g, g, g, i % 2, &done));
      CK_REQUIRE_EQ(done, g);
      live--;
    }
    mapped[k] = !mapped[k];
    if (i % N == N - 1)
      mapped_is(be, live, live * g, live * g);
  }
  ck_assert_uint_gt(live, 0);
  for (int k = 0; k < N; k++)
    if (mapped[k]) {
      unsigned char back = 0;
      CK_CORE_OK(be->ops->emu_read(be, r + k * g + 100, &back, 1));
      CK_REQUIRE_EQ(back, value[k]);
      CK_CORE_OK(be->ops->vm_unmap(be, r + k * g, g, g, true, &done));
    }
  mapped_is(be, 0, 0, 0);
  CK_CORE_OK(be->ops->vm_release(be, r, N * g));
  be->ops->destroy(be);
  ck_assert_uint_eq(device_free(), GiB);
}
END_TEST

/* ---- threads ------------------------------------------------------------------ */

typedef struct worker {
  hippo__backend *be;
  uint64_t range;
  unsigned seed;
  int failures;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  for (unsigned i = 0; i < 40; i++) {
    unsigned char in[32], out[32];
    uint64_t n = 1 + (i + w->seed) % 3, at = w->range + (i % 2) * 4 * G;
    uint64_t done = 0;
    fill(in, sizeof in, w->seed + i);
    if (w->be->ops->vm_map(w->be, at, n * G, G) != HIPPO_SUCCESS ||
        w->be->ops->emu_write(w->be, at + n * G - 16, in, 32) !=
            HIPPO_INVALID_ARGUMENT || /* crosses the end of the run */
        w->be->ops->emu_write(w->be, at + n * G - 32, in, 32) !=
            HIPPO_SUCCESS ||
        w->be->ops->emu_read(w->be, at + n * G - 32, out, 32) !=
            HIPPO_SUCCESS ||
        memcmp(in, out, 32) != 0 ||
        w->be->ops->vm_unmap(w->be, at, n * G, G, i % 2 == 0, &done) !=
            HIPPO_SUCCESS ||
        done != n * G)
      w->failures++;
  }
  return NULL;
}

/* Threads map, use and unmap granules of their own ranges at once (the
 * backend serializes the driver's calls); the figures add up after. */
START_TEST(test_threads) {
  int f = _i;
  enum { T = 4 };
  hippo__backend *be;
  pthread_t t[T];
  worker w[T];
  hippo_emu_counters c;

  env("FAKE_GPU_SLOW_US", "50");
  be = vm_new(f, 0);
  for (int i = 0; i < T; i++) {
    w[i] = (worker){be, range_new(be, 8 * G), (unsigned)i * 17u, 0};
    ck_assert_int_eq(pthread_create(&t[i], NULL, work, &w[i]), 0);
  }
  for (int i = 0; i < T; i++) {
    ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    ck_assert_int_eq(w[i].failures, 0);
  }
  c = counters_of(be);
  ck_assert_uint_eq(c.granules_mapped, 0);
  ck_assert_uint_eq(c.bytes_held, 0);
  ck_assert_uint_eq(c.calls[HIPPO_CALL_VM_MAP], c.calls[HIPPO_CALL_VM_UNMAP]);
  ck_assert_uint_eq(c.ranges_held, T);
  ck_assert_uint_le(c.peak_bytes_mapped, (uint64_t)T * 3 * G);
  ck_assert_uint_ge(c.peak_bytes_mapped, 3 * G);
  for (int i = 0; i < T; i++)
    CK_CORE_OK(be->ops->vm_release(be, w[i].range, 8 * G));
  be->ops->destroy(be);
  ck_assert_uint_eq(device_free(), GiB);
}
END_TEST

/* ---- destroy ---------------------------------------------------------------- */

/* destroy gives back what the caller left: mapped granules (after the
 * device's work), a held allocation whose release was refused, ranges,
 * pages -- the device's memory is whole again; the device's queued work
 * finished first. */
START_TEST(test_destroy_gives_back) {
  int f = _i;
  hippo__backend *be = vm_new(f, 0);
  uint64_t a = range_new(be, 8 * G), b = range_new(be, 4 * G), done = 0;
  void *s = NULL;

  CK_CORE_OK(be->ops->vm_map(be, a, 6 * G, G));
  CK_CORE_OK(be->ops->vm_map(be, b, 4 * G, 2 * G));
  (void)page_new(be, 4096);
  env("FAKE_GPU_FAIL", "vmrelease");
  CK_CORE_STATUS(be->ops->vm_unmap(be, a, G, G, true, &done),
                 HIPPO_BACKEND_ERROR);
  unsetenv("FAKE_GPU_FAIL");
  ck_assert_uint_eq(done, G);
  mapped_is(be, 7, 9 * G, 10 * G + 4096);
  CK_CORE_OK(be->ops->emu_stream_create(be, &s));
  CK_CORE_OK(be->ops->copy(be, s, a + 2 * G, b, 64)); /* queued */
  /* queued on the default stream, which destroy does not destroy: the
   * device's work finishes before the granules go (on CUDA hippo waits;
   * else the copy would run later on unmapped memory) */
  CK_CORE_OK(be->ops->copy(be, NULL, b + G, a + 3 * G, 64));
  ck_assert_uint_eq(device_free(), GiB - 10 * G - 4096);
  be->ops->destroy(be);
  ck_assert_uint_eq(device_free(), GiB);
  {
    const hippo__gpu_rt *rt = NULL;
    CK_CORE_OK(hippo__gpu_rt_load(f ? HIPPO__GPU_CUDA : HIPPO__GPU_HIP, &rt));
    ck_assert_int_eq(rt->stream_sync(NULL), HIPPO__GPU_SUCCESS);
  }
}
END_TEST

/* While a stream captures in mode global, an unmap is a potentially
 * unsafe call on both runtimes (an unmap synchronizes; PyTorch never
 * unmaps in a capture): the stand-in refuses it and invalidates the
 * capture, the granule stays mapped and counted; after the capture it
 * goes.  hippo itself never unmaps while a stream it knows captures (the
 * free gate); this is the stand-in's half of that rule. */
START_TEST(test_unmap_in_capture) {
  int f = _i;
  hippo__backend *be = vm_new(f, 0);
  uint64_t r = range_new(be, 4 * G), done = 0;
  void *lib = dlopen(tu_fake_lib(flavors[f].var), RTLD_NOW | RTLD_NOLOAD);
  int (*create)(void **, unsigned);
  int (*begin)(void *, int);
  int (*end)(void *, void **);
  int (*destroy)(void *);
  void *s = NULL, *graph = NULL;
  ck_assert_ptr_nonnull(lib);
  *(void **)&create = dlsym(lib, f ? "cudaStreamCreateWithFlags"
                                   : "hipStreamCreateWithFlags");
  *(void **)&begin = dlsym(lib, f ? "cudaStreamBeginCapture"
                                  : "hipStreamBeginCapture");
  *(void **)&end = dlsym(lib, f ? "cudaStreamEndCapture"
                                : "hipStreamEndCapture");
  *(void **)&destroy = dlsym(lib, f ? "cudaStreamDestroy"
                                    : "hipStreamDestroy");
  ck_assert(create && begin && end && destroy);
  CK_CORE_OK(be->ops->vm_map(be, r, G, G));
  ck_assert_int_eq(create(&s, 1), 0);
  ck_assert_int_eq(begin(s, 0), 0); /* mode global */
  CK_CORE_STATUS(be->ops->vm_unmap(be, r, G, G, false, &done),
                 HIPPO_BACKEND_ERROR);
  ck_assert_uint_eq(done, 0);
  mapped_is(be, 1, G, G);
  ck_assert_int_eq(end(s, &graph), 901); /* invalidated */
  CK_CORE_OK(be->ops->vm_unmap(be, r, G, G, true, &done));
  mapped_is(be, 0, 0, 0);
  ck_assert_int_eq(destroy(s), 0);
  CK_CORE_OK(be->ops->vm_release(be, r, 4 * G));
  be->ops->destroy(be);
  dlclose(lib);
}
END_TEST

int main(void) {
  Suite *s = suite_create("vm-gpu");
  TCase *tc;

  tc = tcase_create("both runtimes");
  tcase_add_checked_fixture(tc, clean, clean);
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_range_life, 0, 2);
  tcase_add_loop_test(tc, test_granules_and_ranges, 0, 2);
  tcase_add_loop_test(tc, test_injected_faults, 0, 2);
  tcase_add_loop_test(tc, test_driver_refusals, 0, 2);
  tcase_add_loop_test(tc, test_rollback_refused, 0, 2);
  tcase_add_loop_test(tc, test_budget_and_device_full, 0, 2);
  tcase_add_loop_test(tc, test_arguments, 0, 2);
  tcase_add_loop_test(tc, test_unmap_waits, 0, 2);
  tcase_add_loop_test(tc, test_no_vmm, 0, 2);
  tcase_add_loop_test(tc, test_unmap_in_capture, 0, 2);
  tcase_add_loop_test(tc, test_granularity_asked, 0, 2);
  tcase_add_loop_test(tc, test_many_granules, 0, 2);
  tcase_add_loop_test(tc, test_threads, 0, 2);
  tcase_add_loop_test(tc, test_destroy_gives_back, 0, 2);
  suite_add_tcase(s, tc);

  tc = tcase_create("one runtime");
  tcase_add_checked_fixture(tc, clean, clean);
  tcase_add_test(tc, test_hip52_none);
  tcase_add_test(tc, test_cuda_entry_points);
  tcase_add_test(tc, test_hip_exports);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
