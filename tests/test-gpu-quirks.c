/* test-gpu-quirks.c -- the HIP backend (src/backend_hip*.c) against the
 * real runtimes' less obvious behaviour (issue 40), on the stand-ins
 * (tests/fake: libfakehip.so, libfakecudart.so, paths in
 * $FAKE_HIP_LIB and $FAKE_CUDA_LIB, set by make check), each taught what
 * the real runtime does:
 *  - CUDA 12's SetDevice creates the device's primary context, and fails
 *    on a device exclusive-process and taken (FAKE_GPU_TAKEN): a thread
 *    that never chose a device uses hippo on device 1 while device 0 is
 *    taken, and no context appears on device 0, every call succeeds, and
 *    the thread's device and context stack are what they were (item 2);
 *  - without cudaStreamGetDevice (FAKE_GPU_STREAM_DEVICE=old), a stream of
 *    another device is still refused, named by its context (item 11);
 *  - ROCm passes a reservation's alignment on to an HSA call that ignores
 *    it (FAKE_GPU_VM_ALIGN): hippo's ranges are aligned all the same
 *    (item 5);
 *  - ROCm before 7 caps one hipMemCreate (FAKE_GPU_VERSION below 7), and
 *    map calls take offset 0 only: a VIRTUAL reservation larger than the
 *    cap is mapped as several physical allocations (item 13);
 *  - a runtime the process loaded already (a framework's, under its own
 *    folder and soname) is the one hippo loads, not a second one from its
 *    list (issue 39 item 10);
 *  - ROCm before 6.1 answers success to its VMM calls and does nothing
 *    (FAKE_GPU_VERSION below 6.1): hippo offers no virtual memory there,
 *    saying why (item 4);
 *  - physical allocations ask for a shareable (POSIX file descriptor)
 *    handle and the RDMA flag where the device has them, and fall back
 *    where the create refuses (FAKE_GPU_VM_SHARE; item 6);
 *  - a granule is made accessible to every peer device that can access
 *    the owner's memory (FAKE_GPU_PEER), so a peer's copies do not fault
 *    on it (item 3).
 *
 * Every test starts and ends with no runtime loaded and none of the
 * variables below set.
 */
#include <config.h>

#include <check.h>
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "emutest.h"
#include "gpu_rt.h"
#include "manager.h"

/* A library that does not exist. */
#define NOLIB "/nonexistent/hippo-test/libnone.so"

static const char *const env_vars[] = {
    "HIPPO_GPU_RUNTIME",      "HIPPO_HIP_LIBRARY", "HIPPO_CUDA_LIBRARY",
    "FAKE_GPU_DEVICES",       "FAKE_GPU_TAKEN",    "FAKE_GPU_STREAM_DEVICE",
    "FAKE_GPU_VM_ALIGN",      "FAKE_GPU_VERSION",  "FAKE_GPU_MEMORY",
    "FAKE_GPU_VM_GRANULARITY", "FAKE_GPU_VM_CREATE_MAX", "FAKE_GPU_FAIL",
    "FAKE_GPU_VM_SHARE",      "FAKE_GPU_PEER",     NULL};

static void clean(void) {
  hippo__gpu_rt_forget();
  for (const char *const *v = env_vars; *v; v++)
    unsetenv(*v);
}

/* Only the stand-in of `flavor` loads. */
static void use(enum hippo__gpu_flavor flavor) {
  bool hip = flavor == HIPPO__GPU_HIP;
  setenv("HIPPO_GPU_RUNTIME", hip ? "hip" : "cuda", 1);
  setenv("HIPPO_HIP_LIBRARY", hip ? tu_fake_lib("FAKE_HIP_LIB") : NOLIB, 1);
  setenv("HIPPO_CUDA_LIBRARY", hip ? NOLIB : tu_fake_lib("FAKE_CUDA_LIB"), 1);
}

static hippo__backend *gpu_new(int32_t ordinal) {
  hippo__backend *be = NULL;
  CK_CORE_OK(hippo__backend_hip_create(ordinal, 0, 0, &be));
  return be;
}

/* A driver call of the CUDA stand-in, as hippo reaches it (the runtime
 * loaded first). */
static void *driver_fn(const char *name) {
  typedef int (*entry_fn)(const char *, void **, unsigned long long, int *);
  const hippo__gpu_rt *rt;
  void *lib = hippo__gpu_rt_load(HIPPO__GPU_CUDA, &rt) != HIPPO_SUCCESS
                  ? NULL
                  : dlopen(tu_fake_lib("FAKE_CUDA_LIB"), RTLD_NOW | RTLD_NOLOAD);
  void *fn = NULL, *entry;
  int status = -1;
  ck_assert_ptr_nonnull(lib);
  entry = dlsym(lib, "cudaGetDriverEntryPoint");
  ck_assert_ptr_nonnull(entry);
  ck_assert_int_eq(((entry_fn)(uintptr_t)entry)(name, &fn, 0, &status), 0);
  ck_assert_int_eq(status, 0);
  dlclose(lib);
  return fn;
}

/* ---- item 2: the caller's device, on CUDA ------------------------------ */

/* What a thread that never chose a device saw of hippo on device 1. */
typedef struct fresh_thread {
  hippo_status open, use, close;
  char error[512];
  int device_after;  /* GetDevice once hippo is done */
  void *ctx_after;   /* cuCtxGetCurrent once hippo is done */
  int active[2];     /* cuDevicePrimaryCtxGetState of devices 0 and 1 */
} fresh_thread;

static void *fresh_run(void *arg) {
  fresh_thread *t = arg;
  int (*get_current)(void **) = (int (*)(void **))(uintptr_t)driver_fn(
      "cuCtxGetCurrent");
  int (*state)(int, unsigned *, int *) =
      (int (*)(int, unsigned *, int *))(uintptr_t)driver_fn(
          "cuDevicePrimaryCtxGetState");
  const hippo__gpu_rt *rt = NULL;
  hippo__backend *be = NULL;
  uint64_t addr = 0;
  void *s = NULL;
  unsigned flags;

  t->open = hippo__backend_hip_create(1, 0, 0, &be);
  if (t->open == HIPPO_SUCCESS) {
    t->use = be->ops->page_alloc(be, 4096, &addr);
    if (t->use == HIPPO_SUCCESS)
      t->use = be->ops->emu_stream_create(be, &s);
    if (t->use == HIPPO_SUCCESS)
      t->use = be->ops->copy(be, s, addr, addr + 2048, 64);
    if (t->use == HIPPO_SUCCESS)
      t->use = be->ops->emu_stream_destroy(be, s);
    if (t->use == HIPPO_SUCCESS)
      t->use = be->ops->page_free(be, addr, 4096);
    be->ops->destroy(be);
  }
  snprintf(t->error, sizeof t->error, "%s", hippo__error_get());
  (void)hippo__gpu_rt_load(HIPPO__GPU_CUDA, &rt);
  t->device_after = -1;
  (void)rt->get_device(&t->device_after);
  (void)get_current(&t->ctx_after);
  (void)state(0, &flags, &t->active[0]);
  (void)state(1, &flags, &t->active[1]);
  return NULL;
}

/* A thread that never set a device calls into hippo on device 1 of two,
 * device 0 exclusive-process and taken by another process: CUDA 12's
 * SetDevice would create device 0's context to put the thread back, and
 * fail.  Every call succeeds, no context is created on device 0, and the
 * thread's device (0, never chosen) and its context stack (empty) are
 * what they were. */
START_TEST(test_fresh_thread_device_kept) {
  fresh_thread t;
  pthread_t th;
  memset(&t, 0, sizeof t);
  use(HIPPO__GPU_CUDA);
  setenv("FAKE_GPU_DEVICES", "2", 1);
  setenv("FAKE_GPU_TAKEN", "0", 1);
  ck_assert_int_eq(pthread_create(&th, NULL, fresh_run, &t), 0);
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_assert_msg(t.open == HIPPO_SUCCESS && t.use == HIPPO_SUCCESS,
                "open %s, use %s: %s", hippo__status_name(t.open),
                hippo__status_name(t.use), t.error);
  ck_assert_int_eq(t.device_after, 0);
  ck_assert_ptr_null(t.ctx_after);
  ck_assert_int_eq(t.active[0], 0); /* none created on device 0 */
  ck_assert_int_eq(t.active[1], 1);
}
END_TEST

/* A thread on device 0 (its context current) uses hippo on device 1: it
 * is on device 0 after, its context the current one again. */
START_TEST(test_chosen_device_kept) {
  int (*get_current)(void **);
  const hippo__gpu_rt *rt;
  hippo__backend *be;
  void *before = NULL, *after = NULL;
  int dev = -1;
  use(HIPPO__GPU_CUDA);
  setenv("FAKE_GPU_DEVICES", "2", 1);
  get_current = (int (*)(void **))(uintptr_t)driver_fn("cuCtxGetCurrent");
  CK_CORE_OK(hippo__gpu_rt_load(HIPPO__GPU_CUDA, &rt));
  ck_assert_int_eq(rt->set_device(0), 0);
  ck_assert_int_eq(get_current(&before), 0);
  ck_assert_ptr_nonnull(before);
  be = gpu_new(1);
  CK_CORE_OK(be->ops->page_free(be, page_new(be, 4096), 4096));
  ck_assert_int_eq(rt->get_device(&dev), 0);
  ck_assert_int_eq(dev, 0);
  ck_assert_int_eq(get_current(&after), 0);
  ck_assert_ptr_eq(before, after);
  be->ops->destroy(be);
}
END_TEST

/* ---- item 11: a stream of another device without cudaStreamGetDevice --- */

/* cudaStreamGetDevice answers CallRequiresNewerDriver (a 12.8 runtime on
 * an older driver; before 12.8 there is none): the stream's context
 * names its device, and a stream of device 1 attached to device 0 is
 * refused with the clear status, one of device 0 taken. */
START_TEST(test_stream_device_from_context) {
  hippo_device *dev0, *dev1;
  hippo_device_desc d;
  hippo_stream *s = NULL;
  void *n0 = NULL, *n1 = NULL;
  use(HIPPO__GPU_CUDA);
  setenv("FAKE_GPU_DEVICES", "2", 1);
  setenv("FAKE_GPU_STREAM_DEVICE", "old", 1);
  TU_SIZED(d);
  d.backend = HIPPO_BACKEND_HIP;
  CK_CORE_OK(hippo__device_open(&d, NULL, NULL, NULL, &dev0));
  d.hip_device = 1;
  CK_CORE_OK(hippo__device_open(&d, NULL, NULL, NULL, &dev1));
  CK_CORE_OK(dev1->be->ops->emu_stream_create(dev1->be, &n1));
  CK_CORE_OK(dev0->be->ops->emu_stream_create(dev0->be, &n0));
  CK_CORE_FAILS(hippo__stream_attach(dev0, n1, &s), HIPPO_INVALID_ARGUMENT,
                "belongs to device 1, this hippo device is CUDA device 0");
  ck_assert_ptr_null(s);
  CK_CORE_FAILS(dev1->be->ops->stream_check(dev1->be, n0),
                HIPPO_INVALID_ARGUMENT, "belongs to device 0");
  CK_CORE_OK(dev1->be->ops->stream_check(dev1->be, (void *)1)); /* legacy */
  CK_CORE_OK(hippo__stream_attach(dev0, n0, &s));
  CK_CORE_OK(hippo__stream_detach(s));
  CK_CORE_OK(hippo__emu_stream_destroy(dev0, n0));
  CK_CORE_OK(hippo__emu_stream_destroy(dev1, n1));
  CK_CORE_OK(hippo__device_close(dev0));
  CK_CORE_OK(hippo__device_close(dev1));
}
END_TEST

/* ---- item 5: the reserved range's alignment ------------------------------ */

#define G (2 * MiB) /* the stand-ins' default granularity */

/* A range of `size` aligned to `align` while the stand-in's reserve
 * answers addresses aligned to `given` only: aligned all the same,
 * granules map at both its ends and hold bytes, and it goes back whole
 * (the stand-in frees only the reservation it gave). */
static void aligned_range(hippo__backend *be, uint64_t size, uint64_t align,
                          const char *given) {
  uint64_t r = 0, done = 0;
  unsigned char in[16] = "aligned by hand", out[16];
  setenv("FAKE_GPU_VM_ALIGN", given, 1);
  CK_CORE_OK(be->ops->vm_reserve(be, size, align, &r));
  ck_assert_msg(r % align == 0, "range %#llx, alignment %llu (given %s)",
                (unsigned long long)r, (unsigned long long)align, given);
  CK_CORE_OK(be->ops->vm_map(be, r, G, G));
  CK_CORE_OK(be->ops->vm_map(be, r + size - G, G, G));
  CK_CORE_OK(be->ops->emu_write(be, r + size - 16, in, 16));
  CK_CORE_OK(be->ops->emu_read(be, r + size - 16, out, 16));
  ck_assert_mem_eq(in, out, 16);
  CK_CORE_OK(be->ops->vm_unmap(be, r, G, G, true, &done));
  CK_CORE_OK(be->ops->vm_unmap(be, r + size - G, G, G, true, &done));
  CK_CORE_OK(be->ops->vm_release(be, r, size));
  ck_assert_uint_eq(counters_of(be).bytes_virtual, 0);
}

/* ROCm's hipMemAddressReserve passes the alignment to an HSA call that
 * has none: a range asked aligned to 4 granules comes back aligned to
 * one, and one asked aligned to the granule comes back aligned to a 4 KiB
 * page.  hippo's ranges are aligned all the same.  A size that is no
 * multiple of the granularity is refused before the runtime is asked,
 * whose answer (hipErrorMemoryAllocation) would read as out of memory. */
START_TEST(test_reserve_alignment) {
  const hippo__gpu_rt *rt;
  hippo__backend *be;
  uint64_t r = 0;
  void *p = NULL;
  use(HIPPO__GPU_HIP);
  be = gpu_new(0);
  ck_assert_ptr_nonnull(be->ops->vm_reserve);
  aligned_range(be, 8 * G, 4 * G, "2097152");
  aligned_range(be, 3 * G, G, "4096");
  aligned_range(be, 4 * G, 2 * G, "1048576");
  CK_CORE_FAILS(be->ops->vm_reserve(be, G + 4096, G, &r),
                HIPPO_INVALID_ARGUMENT, "is not a positive multiple of the "
                "granule");
  CK_CORE_OK(hippo__gpu_rt_load(HIPPO__GPU_HIP, &rt));
  ck_assert_int_eq(rt->vm.reserve(&p, G + 4096, 0, NULL, 0),
                   HIPPO__GPU_OUT_OF_MEMORY);
  be->ops->destroy(be);
}
END_TEST

/* ---- item 13: one hipMemCreate's size before ROCm 7 --------------------- */

/* The stand-in device's free bytes, asked of the runtime itself. */
static uint64_t device_free(void) {
  const hippo__gpu_rt *rt = NULL;
  size_t fr = 0, tot = 0;
  CK_CORE_OK(hippo__gpu_rt_load(HIPPO__GPU_HIP, &rt));
  ck_assert_int_eq(rt->mem_info(&fr, &tot), HIPPO__GPU_SUCCESS);
  return fr;
}

/* HIP 6.3 caps one hipMemCreate (the stand-in at 256 MiB): an allocation
 * of 640 MiB is mapped as three, its bytes whole across their seams, and
 * goes back whole; a VIRTUAL reservation of 600 MiB succeeds the same
 * way.  Every map call takes offset 0 (the stand-in refuses another). */
START_TEST(test_create_cap_before_rocm7) {
  const uint64_t big = 640 * MiB, part = 256 * MiB;
  unsigned char in[32], out[32];
  hippo_device_desc d;
  hippo_device *dev;
  hippo_stream *s = NULL;
  hippo_handle h = 0;
  tu_layout l;
  hippo__backend *be;
  uint64_t r = 0, done = 0, mem = 2 * GiB, size = 0;
  void *ptr = NULL;
  use(HIPPO__GPU_HIP);
  setenv("FAKE_GPU_VERSION", "60300000", 1);
  setenv("FAKE_GPU_MEMORY", "2147483648", 1);
  be = gpu_new(0);
  CK_CORE_OK(be->ops->vm_reserve(be, GiB, G, &r));
  CK_CORE_OK(be->ops->vm_map(be, r, big, big));
  ck_assert_uint_eq(device_free(), mem - big);
  for (unsigned i = 0; i < sizeof in; i++)
    in[i] = (unsigned char)(i * 7 + 3);
  for (uint64_t seam = part; seam < big; seam += part) {
    CK_CORE_OK(be->ops->emu_write(be, r + seam - 16, in, sizeof in));
    CK_CORE_OK(be->ops->emu_read(be, r + seam - 16, out, sizeof out));
    ck_assert_mem_eq(in, out, sizeof in);
  }
  ck_assert_uint_eq(counters_of(be).bytes_mapped, big);
  CK_CORE_FAILS(be->ops->vm_unmap(be, r, part, part, true, &done),
                HIPPO_INVALID_ARGUMENT, "is not mapped whole");
  /* the second part's unmap refused: the first is mapped back, bytes and
   * all, and the allocation stays whole */
  setenv("FAKE_GPU_FAIL", "vmunmap:2", 1);
  CK_CORE_FAILS(be->ops->vm_unmap(be, r, big, big, true, &done),
                HIPPO_BACKEND_ERROR, "hipMemUnmap failed");
  unsetenv("FAKE_GPU_FAIL");
  ck_assert_uint_eq(done, 0);
  CK_CORE_OK(be->ops->emu_read(be, r + part - 16, out, sizeof out));
  ck_assert_mem_eq(in, out, sizeof in);
  CK_CORE_OK(be->ops->vm_unmap(be, r, big, big, true, &done));
  ck_assert_uint_eq(done, big);
  ck_assert_uint_eq(device_free(), mem);
  CK_CORE_OK(be->ops->vm_map(be, r, big, big)); /* destroy gives it back */
  be->ops->destroy(be);
  ck_assert_uint_eq(device_free(), mem);

  TU_SIZED(d);
  d.backend = HIPPO_BACKEND_HIP;
  CK_CORE_OK(hippo__device_open(
      &d, tu_layout_preset(&l, HIPPO_PRESET_VIRTUAL), NULL, NULL, &dev));
  CK_CORE_OK(hippo__stream_attach(dev, NULL, &s));
  CK_CORE_OK(hippo__reserve(s, 600 * MiB, HIPPO_MODE_AUTO, &h));
  CK_CORE_OK(hippo__resolve(s, h, &ptr, &size));
  ck_assert_uint_ge(size, 600 * MiB);
  ck_assert_uint_le(device_free(), mem - 600 * MiB);
  CK_CORE_OK(dev->be->ops->emu_write(dev->be,
                                     (uint64_t)(uintptr_t)ptr + size - 32,
                                     in, sizeof in));
  CK_CORE_OK(hippo__release(s, h));
  CK_CORE_OK(hippo__stream_detach(s));
  CK_CORE_OK(hippo__device_close(dev));
  ck_assert_uint_eq(device_free(), mem);
}
END_TEST

/* Whether an object whose file name begins with `stem` is loaded. */
static int stem_found(struct dl_phdr_info *info, size_t size, void *arg) {
  const char *name = info->dlpi_name, *base;
  (void)size;
  if (!name || !*name)
    return 0;
  base = strrchr(name, '/');
  base = base ? base + 1 : name;
  return strncmp(base, arg, strlen(arg)) == 0;
}

/* The runtime a framework loaded (here the stand-in, through a link
 * named as PyTorch's wheels name theirs) is the one hippo takes when no
 * HIPPO_*_LIBRARY names one, over its own list (which finds Debian's
 * ROCm 5 on this machine, and would take libcudart.so.13 before .12):
 * on ROCm a stream of one runtime is no stream of another.  Both
 * flavors. */
START_TEST(test_takes_the_loaded_runtime) {
  static const char *const stems[] = {"libamdhip64.so", "libcudart.so"};
  static const char *const names[] = {"libamdhip64.so.6", "libcudart.so.12"};
  enum hippo__gpu_flavor fl = _i == 0 ? HIPPO__GPU_HIP : HIPPO__GPU_CUDA;
  const char *fake = tu_fake_lib(_i == 0 ? "FAKE_HIP_LIB" : "FAKE_CUDA_LIB");
  char dir[] = "/tmp/hippo-loaded-XXXXXX", link[512];
  const hippo__gpu_rt *rt = NULL;
  void *framework;
  if (dl_iterate_phdr(stem_found, (void *)stems[_i])) {
    printf("SKIP: a %s is loaded already\n", stems[_i]);
    return;
  }
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(link, sizeof link, "%s/%s", dir, names[_i]);
  ck_assert_int_eq(symlink(fake, link), 0);
  framework = dlopen(link, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(framework != NULL, "%s", dlerror());
  CK_CORE_OK(hippo__gpu_rt_load(fl, &rt));
  ck_assert_str_eq(rt->path, link);
  hippo__gpu_rt_forget();
  /* named, the variable wins: a library that does not exist fails */
  setenv(_i == 0 ? "HIPPO_HIP_LIBRARY" : "HIPPO_CUDA_LIBRARY", NOLIB, 1);
  CK_CORE_STATUS(hippo__gpu_rt_load(fl, &rt), HIPPO_NO_DEVICE);
  dlclose(framework);
  unlink(link);
  rmdir(dir);
}
END_TEST

/* ---- item 4: ROCm before 6.1 ------------------------------------------- */

/* ROCm 6.0 (FAKE_GPU_VERSION 6.0.32830): every VMM call answers success
 * and does nothing -- the reserve answers address NULL, SetAccess and Map
 * do nothing -- and the attribute says yes.  The device has no virtual
 * memory, and says why naming the version: the VIRTUAL preset falls back
 * to ADAPTIVE (device_info's note), reservations work from pages, and a
 * custom layout with a VIRTUAL pool is refused.  Nothing is mapped, so
 * nothing faults. */
START_TEST(test_hollow_vmm_before_rocm61) {
  const char *v = "6.0 (60032830)";
  hippo_device_desc d;
  hippo_device_info info;
  hippo_device *dev;
  hippo_stream *s = NULL;
  hippo_handle h = 0;
  hippo__backend *be;
  unsigned char in[8] = "pages!", out[8];
  void *ptr = NULL;
  uint64_t size = 0;
  tu_layout l;
  use(HIPPO__GPU_HIP);
  setenv("FAKE_GPU_VERSION", "60032830", 1);
  be = gpu_new(0);
  ck_assert_ptr_null(be->ops->vm_reserve);
  ck_assert_ptr_null(be->ops->vm_map);
  ck_assert_msg(strstr(be->vm_why, v) && strstr(be->vm_why, "6.1"), "%s",
                be->vm_why);
  be->ops->destroy(be);

  TU_SIZED(d);
  d.backend = HIPPO_BACKEND_HIP;
  CK_CORE_OK(hippo__device_open(
      &d, tu_layout_preset(&l, HIPPO_PRESET_VIRTUAL), NULL, NULL, &dev));
  TU_SIZED(info);
  CK_CORE_OK(hippo__device_info(dev, &info));
  ck_assert_uint_eq(info.vm_granularity, 0);
  ck_assert_msg(strstr(info.note, v), "%s", info.note);
  CK_CORE_OK(hippo__stream_attach(dev, NULL, &s));
  CK_CORE_OK(hippo__reserve(s, 3 * MiB, HIPPO_MODE_AUTO, &h));
  CK_CORE_OK(hippo__resolve(s, h, &ptr, &size));
  CK_CORE_OK(dev->be->ops->emu_write(dev->be, (uint64_t)(uintptr_t)ptr, in,
                                     sizeof in));
  CK_CORE_OK(dev->be->ops->emu_read(dev->be, (uint64_t)(uintptr_t)ptr, out,
                                    sizeof out));
  ck_assert_mem_eq(in, out, sizeof in);
  CK_CORE_OK(hippo__release(s, h));
  CK_CORE_OK(hippo__stream_detach(s));
  CK_CORE_OK(hippo__device_close(dev));

  tu_layout_init(&l);
  tu_layout_add(&l, HIPPO_POOL_VIRTUAL);
  CK_CORE_FAILS(hippo__device_open(&d, &l.layout, l.pools, NULL, &dev),
                HIPPO_UNSUPPORTED, v);
}
END_TEST

/* ---- item 3: peers' access to mapped granules --------------------------- */

/* Device 1 copies from and into a granule device 0 mapped, on a stream of
 * its own: what it answers (0, or 700 where device 1 has no access). */
static int peer_copies(const hippo__gpu_rt *rt, uint64_t at) {
  unsigned char mine[32];
  void *s1 = NULL;
  int err;
  memset(mine, 0x5a, sizeof mine);
  ck_assert_int_eq(rt->set_device(1), 0);
  ck_assert_int_eq(rt->stream_create(&s1, HIPPO__GPU_STREAM_NON_BLOCKING), 0);
  err = rt->memcpy_async((void *)(uintptr_t)at, mine, sizeof mine,
                         HIPPO__GPU_MEMCPY_D2D, s1);
  if (err == 0)
    err = rt->memcpy_async(mine + 16, (const void *)(uintptr_t)at, 16,
                           HIPPO__GPU_MEMCPY_D2D, s1);
  ck_assert_int_eq(rt->stream_sync(s1), 0);
  ck_assert_int_eq(rt->stream_destroy(s1), 0);
  ck_assert_int_eq(rt->set_device(0), 0);
  if (rt->get_last_error)
    (void)rt->get_last_error();
  return err;
}

/* Two devices, peers (FAKE_GPU_PEER): a granule device 0 maps is given to
 * device 1 too, whose copies from and to it work, as they would on
 * device 0's Malloc'd pages; without peer capability only the owner is
 * given access, the map succeeds, and device 1's copy faults. */
START_TEST(test_peer_access) {
  for (int f = 0; f < 2; f++) {
    enum hippo__gpu_flavor flavor = f ? HIPPO__GPU_CUDA : HIPPO__GPU_HIP;
    for (int peer = 1; peer >= 0; peer--) {
      const hippo__gpu_rt *rt;
      unsigned char out[32], want[32];
      hippo__backend *be;
      uint64_t r = 0, done = 0;
      use(flavor);
      setenv("FAKE_GPU_DEVICES", "2", 1);
      if (peer)
        setenv("FAKE_GPU_PEER", "1", 1);
      CK_CORE_OK(hippo__gpu_rt_load(flavor, &rt));
      be = gpu_new(0);
      CK_CORE_OK(be->ops->vm_reserve(be, 2 * G, G, &r));
      CK_CORE_OK(be->ops->vm_map(be, r, G, G));
      ck_assert_int_eq(peer_copies(rt, r + 64), peer ? 0 : 700);
      memset(want, peer ? 0x5a : 0, sizeof want);
      CK_CORE_OK(be->ops->emu_read(be, r + 64, out, sizeof out));
      ck_assert_mem_eq(out, want, sizeof out);
      CK_CORE_OK(be->ops->vm_unmap(be, r, G, G, true, &done));
      CK_CORE_OK(be->ops->vm_release(be, r, 2 * G));
      be->ops->destroy(be);
      clean();
    }
  }
}
END_TEST

/* ---- item 6: shareable physical allocations ---------------------------- */

/* What the stand-in's last create was asked for. */
static void last_create(enum hippo__gpu_flavor flavor, int *handles,
                        int *rdma) {
  void *lib = dlopen(tu_fake_lib(flavor == HIPPO__GPU_HIP ? "FAKE_HIP_LIB"
                                                          : "FAKE_CUDA_LIB"),
                     RTLD_NOW | RTLD_NOLOAD);
  void *fn;
  ck_assert_ptr_nonnull(lib);
  fn = dlsym(lib, "fakeGpuLastCreate");
  ck_assert_ptr_nonnull(fn);
  ((void (*)(int *, int *))(uintptr_t)fn)(handles, rdma);
  dlclose(lib);
}

/* Two granules mapped (two creates), their bytes read back; what the
 * creates asked for. */
static void map_two(enum hippo__gpu_flavor flavor, int *handles, int *rdma) {
  unsigned char in[8] = "shared", out[8];
  hippo__backend *be = gpu_new(0);
  uint64_t r = 0, done = 0;
  ck_assert_ptr_nonnull(be->ops->vm_map);
  CK_CORE_OK(be->ops->vm_reserve(be, 4 * G, G, &r));
  CK_CORE_OK(be->ops->vm_map(be, r, G, G));
  CK_CORE_OK(be->ops->vm_map(be, r + G, G, G));
  CK_CORE_OK(be->ops->emu_write(be, r + G - 4, in, sizeof in));
  CK_CORE_OK(be->ops->emu_read(be, r + G - 4, out, sizeof out));
  ck_assert_mem_eq(in, out, sizeof in);
  last_create(flavor, handles, rdma);
  CK_CORE_OK(be->ops->vm_unmap(be, r, 2 * G, G, true, &done));
  CK_CORE_OK(be->ops->vm_release(be, r, 4 * G));
  be->ops->destroy(be);
}

/* Physical allocations ask for a POSIX file descriptor handle, and on
 * CUDA the RDMA flag, where the device says it has them (as PyTorch's
 * expandable segments and NCCL do); a create that refuses them (a
 * container, ROCm 6.1) is asked again without, and so are the next; a
 * CUDA device without them is never asked. */
START_TEST(test_shareable_allocations) {
  int handles = -1, rdma = -1;
  for (int f = 0; f < 2; f++) {
    enum hippo__gpu_flavor flavor = f ? HIPPO__GPU_CUDA : HIPPO__GPU_HIP;
    use(flavor);
    map_two(flavor, &handles, &rdma);
    ck_assert_int_eq(handles, HIPPO__GPU_MEM_HANDLE_POSIX_FD);
    ck_assert_int_eq(rdma, f); /* HIP has no attribute to ask */
    clean();
    use(flavor);
    setenv("FAKE_GPU_VM_SHARE", "refuse", 1);
    map_two(flavor, &handles, &rdma);
    ck_assert_int_eq(handles, 0);
    ck_assert_int_eq(rdma, 0);
    clean();
  }
  use(HIPPO__GPU_HIP);
  setenv("FAKE_GPU_VERSION", "60100000", 1); /* 6.1: no handle types */
  map_two(HIPPO__GPU_HIP, &handles, &rdma);
  ck_assert_int_eq(handles, 0);
  clean();
  use(HIPPO__GPU_CUDA);
  setenv("FAKE_GPU_VM_SHARE", "none", 1);
  map_two(HIPPO__GPU_CUDA, &handles, &rdma);
  ck_assert_int_eq(handles, 0);
  ck_assert_int_eq(rdma, 0);
}
END_TEST

/* Handle 2 (cudaStreamPerThread, hipStreamPerThread) is another stream
 * on each thread: attaching it is refused, saying why (one manager would
 * reuse one thread's freed block for another's work, unordered); handle 1
 * (the legacy stream) attaches as a stream (item 10).  Both flavors. */
START_TEST(test_per_thread_handle_refused) {
  hippo_device_desc d = {.struct_size = sizeof d,
                         .backend = HIPPO_BACKEND_HIP};
  hippo_device *dev;
  hippo_stream *s;
  tu_layout l;
  use(_i == 0 ? HIPPO__GPU_HIP : HIPPO__GPU_CUDA);
  CK_CORE_OK(hippo__device_open(&d, tu_layout_preset(&l, HIPPO_PRESET_ADAPTIVE),
                                NULL, NULL, &dev));
  CK_CORE_FAILS(hippo__stream_attach(dev, (void *)2, &s),
                HIPPO_INVALID_ARGUMENT, "per-thread default stream");
  CK_CORE_OK(hippo__stream_attach(dev, (void *)1, &s));
  CK_CORE_OK(hippo__stream_detach(s));
  CK_CORE_OK(hippo__device_close(dev));
}
END_TEST

int main(void) {
  Suite *s = suite_create("gpu-quirks");
  TCase *tc = tcase_create("issue 40");
  tcase_add_checked_fixture(tc, clean, clean);
  tcase_add_test(tc, test_fresh_thread_device_kept);
  tcase_add_test(tc, test_chosen_device_kept);
  tcase_add_test(tc, test_stream_device_from_context);
  tcase_add_test(tc, test_reserve_alignment);
  tcase_add_test(tc, test_create_cap_before_rocm7);
  tcase_add_loop_test(tc, test_takes_the_loaded_runtime, 0, 2);
  tcase_add_loop_test(tc, test_per_thread_handle_refused, 0, 2);
  tcase_add_test(tc, test_hollow_vmm_before_rocm61);
  tcase_add_test(tc, test_shareable_allocations);
  tcase_add_test(tc, test_peer_access);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
