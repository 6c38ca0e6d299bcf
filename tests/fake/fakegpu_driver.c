/* fakegpu_driver.c -- CUDA's driver in libfakecudart.so (nothing of it in
 * libfakehip.so): the calls hippo reaches through the runtime's
 * cudaGetDriverEntryPointByVersion / cudaGetDriverEntryPoint, or by name
 * where the library is loaded as the driver (HIPPO_CUDA_DRIVER_LIBRARY):
 * cuInit, devices and their attributes, the context calls over the
 * primary contexts of fakegpu.c, the error names, and the virtual memory
 * calls (cuMem*) over fakegpu_vm.c's.  Each call has the CUDA version that
 * introduced it; an entry point asked for an older version finds none.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fakegpu.h"

#if !defined(FAKE_HIP)
static int ctx_refs[64];              /* primary contexts' retains */
static char ctx_obj[64];              /* &ctx_obj[d]: device d's context */

/* The driver's calls (CUresult; CUdeviceptr is unsigned long long),
 * reached through the entry points below only. */
static int cu_mem_address_reserve(unsigned long long *ptr, size_t size,
                                  size_t align, unsigned long long addr,
                                  unsigned long long flags) {
  void *p = NULL;
  int err = fake_vm_reserve(&p, size, align, (void *)(uintptr_t)addr, flags);
  if (err == OK)
    *ptr = (unsigned long long)(uintptr_t)p;
  return err;
}
static int cu_mem_address_free(unsigned long long ptr, size_t size) {
  return fake_vm_free_range((void *)(uintptr_t)ptr, size);
}
static int cu_mem_map(unsigned long long ptr, size_t size, size_t offset,
                      unsigned long long handle, unsigned long long flags) {
  return fake_vm_map((void *)(uintptr_t)ptr, size, offset, handle, flags);
}
static int cu_mem_set_access(unsigned long long ptr, size_t size,
                             const vaccess *desc, size_t count) {
  return fake_vm_set_access((void *)(uintptr_t)ptr, size, desc, count);
}
static int cu_mem_unmap(unsigned long long ptr, size_t size) {
  return fake_vm_unmap((void *)(uintptr_t)ptr, size);
}
static int cu_device_get(int *dev, int ordinal) {
  if (!dev)
    return E_VALUE;
  if (ordinal < 0 || ordinal >= fake_devices())
    return E_BADDEV;
  *dev = ordinal;
  return OK;
}
static int cu_device_get_attribute(int *value, int attr, int dev) {
  if (!value)
    return E_VALUE;
  if (dev < 0 || dev >= fake_devices())
    return E_BADDEV;
  if (attr == 103 || attr == 110) { /* POSIX handles, RDMA with VMM */
    const char *v = getenv("FAKE_GPU_VM_SHARE");
    *value = !(v && !strcmp(v, "none"));
    return OK;
  }
  if (attr != 102) /* VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
    return E_VALUE;
  *value = !fake_no_vmm_attr();
  return OK;
}
/* The context calls (see the head of this file). */
static int ctx_dev(const void *ctx) { /* its device, or -1 */
  const char *c = ctx;
  return c >= ctx_obj && c < ctx_obj + fake_devices() &&
                 fake_ctx_live[c - ctx_obj]
             ? (int)(c - ctx_obj)
             : -1;
}
static int cu_ctx_get_current(void **ctx) {
  if (!ctx)
    return E_VALUE;
  *ctx = fake_ctx_depth ? &ctx_obj[fake_ctx_top[fake_ctx_depth - 1]] : NULL;
  return OK;
}
static int cu_ctx_push(void *ctx) {
  int dev;
  pthread_mutex_lock(&fake_mu);
  dev = ctx_dev(ctx);
  pthread_mutex_unlock(&fake_mu);
  if (dev < 0 || fake_ctx_depth == 8)
    return dev < 0 ? E_CONTEXT : E_OOM;
  fake_ctx_top[fake_ctx_depth++] = dev;
  return OK;
}
static int cu_ctx_pop(void **ctx) {
  if (!fake_ctx_depth)
    return E_CONTEXT;
  fake_ctx_depth--;
  if (ctx)
    *ctx = &ctx_obj[fake_ctx_top[fake_ctx_depth]];
  return OK;
}
static int cu_primary_retain(void **ctx, int dev) {
  int err;
  if (!ctx)
    return E_VALUE;
  if (dev < 0 || dev >= fake_devices())
    return E_BADDEV;
  pthread_mutex_lock(&fake_mu);
  if ((err = fake_ctx_create(dev)) == OK) {
    ctx_refs[dev]++;
    *ctx = &ctx_obj[dev];
  }
  pthread_mutex_unlock(&fake_mu);
  return err;
}
static int cu_primary_release(int dev) {
  int err = E_CONTEXT;
  if (dev < 0 || dev >= fake_devices())
    return E_BADDEV;
  pthread_mutex_lock(&fake_mu);
  if (ctx_refs[dev] > 0) {
    ctx_refs[dev]--; /* the context lives on: the runtime holds it too */
    err = OK;
  }
  pthread_mutex_unlock(&fake_mu);
  return err;
}
static int cu_primary_state(int dev, unsigned *flags, int *active) {
  if (!flags || !active)
    return E_VALUE;
  if (dev < 0 || dev >= fake_devices())
    return E_BADDEV;
  pthread_mutex_lock(&fake_mu);
  *flags = 0;
  *active = fake_ctx_live[dev];
  pthread_mutex_unlock(&fake_mu);
  return OK;
}
static int cu_stream_get_ctx(void *stream, void **ctx) {
  fstream *s;
  int err = OK;
  if (!ctx)
    return E_VALUE;
  pthread_mutex_lock(&fake_mu);
  s = fake_stream_of(stream);
  if (!s)
    err = E_HANDLE;
  else if (s != &fake_default_stream)
    *ctx = &ctx_obj[s->device];
  else if (!fake_ctx_depth) /* the legacy stream: the current context's */
    err = E_CONTEXT;
  else
    *ctx = &ctx_obj[fake_ctx_top[fake_ctx_depth - 1]];
  pthread_mutex_unlock(&fake_mu);
  return err;
}
static int cu_ctx_get_device(int *dev) {
  if (!dev)
    return E_VALUE;
  if (!fake_ctx_depth)
    return E_CONTEXT;
  *dev = fake_ctx_top[fake_ctx_depth - 1];
  return OK;
}
static int cu_get_error_name(int err, const char **name) {
  static const struct {
    int err;
    const char *name;
  } names[] = {{OK, "CUDA_SUCCESS"},
               {E_VALUE, "CUDA_ERROR_INVALID_VALUE"},
               {E_OOM, "CUDA_ERROR_OUT_OF_MEMORY"},
               {E_BADDEV, "CUDA_ERROR_INVALID_DEVICE"},
               {E_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"}};
  if (!name)
    return E_VALUE;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (names[i].err == err) {
      *name = names[i].name;
      return OK;
    }
  *name = NULL;
  return E_VALUE;
}
static int cu_get_error_string(int err, const char **text) {
  if (!text)
    return E_VALUE;
  *text = err == OK ? "no error" : "a fake driver's error";
  return OK;
}

/* The driver's calls by name, with the CUDA version that introduced each. */
static const struct {
  const char *name;
  unsigned since;
  void (*fn)(void);
} driver_calls[] = {
    {"cuMemAddressReserve", 10020, (void (*)(void))cu_mem_address_reserve},
    {"cuMemAddressFree", 10020, (void (*)(void))cu_mem_address_free},
    {"cuMemCreate", 10020, (void (*)(void))fake_vm_create},
    {"cuMemRelease", 10020, (void (*)(void))fake_vm_release},
    {"cuMemMap", 10020, (void (*)(void))cu_mem_map},
    {"cuMemSetAccess", 10020, (void (*)(void))cu_mem_set_access},
    {"cuMemUnmap", 10020, (void (*)(void))cu_mem_unmap},
    {"cuMemGetAllocationGranularity", 10020,
     (void (*)(void))fake_vm_granularity},
    {"cuDeviceGet", 2000, (void (*)(void))cu_device_get},
    {"cuDeviceGetAttribute", 2000, (void (*)(void))cu_device_get_attribute},
    {"cuGetErrorName", 6000, (void (*)(void))cu_get_error_name},
    {"cuGetErrorString", 6000, (void (*)(void))cu_get_error_string},
    {"cuCtxGetCurrent", 4000, (void (*)(void))cu_ctx_get_current},
    {"cuCtxPushCurrent", 4000, (void (*)(void))cu_ctx_push},
    {"cuCtxPopCurrent", 4000, (void (*)(void))cu_ctx_pop},
    {"cuDevicePrimaryCtxRetain", 7000, (void (*)(void))cu_primary_retain},
    {"cuDevicePrimaryCtxRelease", 11000, (void (*)(void))cu_primary_release},
    {"cuDevicePrimaryCtxGetState", 7000, (void (*)(void))cu_primary_state},
    {"cuStreamGetCtx", 9020, (void (*)(void))cu_stream_get_ctx},
    {"cuCtxGetDevice", 2000, (void (*)(void))cu_ctx_get_device},
};

/* As NVIDIA's libcuda.so.1 serves them (loaded as the driver library,
 * HIPPO_CUDA_DRIVER_LIBRARY): cuInit and the calls by name. */
EXPORT int cuInit(unsigned flags) {
  (void)flags;
  return OK;
}
DRIVER_EXPORT(cuMemAddressReserve, cu_mem_address_reserve);
DRIVER_EXPORT(cuMemAddressFree, cu_mem_address_free);
DRIVER_EXPORT(cuMemMap, cu_mem_map);
DRIVER_EXPORT(cuMemSetAccess, cu_mem_set_access);
DRIVER_EXPORT(cuMemUnmap, cu_mem_unmap);
DRIVER_EXPORT(cuDeviceGet, cu_device_get);
DRIVER_EXPORT(cuDeviceGetAttribute, cu_device_get_attribute);
DRIVER_EXPORT(cuGetErrorName, cu_get_error_name);
DRIVER_EXPORT(cuGetErrorString, cu_get_error_string);

/* cudaDriverEntryPointQueryResult: 0 found, 1 no such symbol, 2 the
 * version asked predates it. */
static int entry(const char *symbol, void **fn, unsigned version,
                 int *status) {
  const char *mode = getenv("FAKE_GPU_ENTRY");
  int st = 1;
  if (!symbol || !fn)
    return E_VALUE;
  *fn = NULL;
  if (!mode || strcmp(mode, "none"))
    for (size_t i = 0; i < sizeof driver_calls / sizeof *driver_calls; i++)
      if (!strcmp(driver_calls[i].name, symbol)) {
        st = version < driver_calls[i].since ? 2 : 0;
        if (st == 0)
          memcpy(fn, &driver_calls[i].fn, sizeof *fn);
        break;
      }
  if (status)
    *status = st;
  return OK;
}

EXPORT int cudaGetDriverEntryPointByVersion(const char *symbol, void **fn,
                                            unsigned version,
                                            unsigned long long flags,
                                            int *status) {
  const char *mode = getenv("FAKE_GPU_ENTRY");
  (void)flags;
  if (mode && !strcmp(mode, "legacy"))
    return E_NOT_SUPPORTED;
  if (version > VERSION) /* newer than the driver: documented */
    return E_VALUE;
  return entry(symbol, fn, version, status);
}

/* CUDA 12's (CUDA 11's had no status: a caller passing one still works) */
EXPORT int cudaGetDriverEntryPoint(const char *symbol, void **fn,
                                   unsigned long long flags, int *status) {
  (void)flags;
  return entry(symbol, fn, VERSION, status);
}
#endif
