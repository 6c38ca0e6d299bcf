/* backend_hip_vm_driver.c -- the HIP backend's virtual memory, the
 * driver's side (backend_hip_vm.c has the operations): the device current
 * for the driver's calls, a failed call's status, one granule created and
 * mapped or unmapped and released (in parts where it is larger than one
 * allocation may be), the orphans (allocations unmapped whose release the
 * runtime refused), and the probe at open that decides whether the device
 * has virtual memory at all and what its allocations ask for.
 */
#include <config.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend_hip.h"

/* The device current for the driver's calls.  On CUDA without the
 * context calls the device is set even when current: cudaSetDevice binds
 * its primary context to the thread, which the driver's calls need
 * (cudaGetDevice answers 0 on a thread that never had one); with them,
 * hippo__hip_enter's push makes it current. */
hippo_status hippo__hip_vm_enter(gpu_backend *g, const char *why,
                                 dev_scope *sc) {
  int cur = -1;
  if (g->rt->flavor == HIPPO__GPU_HIP || g->primary)
    return hippo__hip_enter(g, why, sc);
  sc->restore = sc->pushed = false;
  if (g->rt->get_device(&cur) != HIPPO__GPU_SUCCESS)
    cur = -1;
  return hippo__hip_set_device(g, why, sc, cur);
}

/* A failed VMM call's status, last_error naming it (and, on HIP, the
 * runtime's last error reset for an out-of-memory answer: the caller gives
 * idle memory back and retries, as after a failed Malloc). */
hippo_status hippo__hip_vm_fail(gpu_backend *g, int err, const char *call) {
  bool oom = err == HIPPO__GPU_OUT_OF_MEMORY;
  if (oom && g->rt->flavor == HIPPO__GPU_HIP)
    handled(g->rt);
  return hippo__gpu_vm_fail(g->rt, err, call,
                            oom ? "release or clean up device memory" : NULL);
}

/* ---- the driver's steps ---- */

static bool orphan_keep(gpu_backend *g, unsigned long long handle,
                        uint64_t size);

/* One physical allocation of `size` bytes: created and mapped whole at
 * `at` (the caller sets access over the call's span).  On failure what
 * it took is given back; *orphaned counts the bytes of an allocation the
 * runtime would not release, kept held (an orphan). */
static hippo_status map_part(gpu_backend *g, uint64_t at, uint64_t size,
                             unsigned long long *handle, uint64_t *orphaned) {
  const hippo__gpu_vm_calls *vm = &g->rt->vm;
  unsigned long long h = 0;
  hippo_status st;
  int err = vm->create(&h, (size_t)size, &g->vm_prop, 0);
  if (err != HIPPO__GPU_SUCCESS && err != HIPPO__GPU_OUT_OF_MEMORY &&
      (g->vm_prop.requested_handle_types ||
       g->vm_prop.alloc_flags.gpu_direct_rdma_capable)) {
    /* refused for the sharing asked (ROCm 6.1 refuses any handle type:
     * clr hip_vm.cpp at rocm-6.1.0; drivers and containers without
     * POSIX handles or RDMA): asked without, from now on, as PyTorch
     * falls back on any answer but out of memory (vm_lock held) */
    hippo__gpu_mem_prop plain = g->vm_prop;
    plain.requested_handle_types = HIPPO__GPU_MEM_HANDLE_NONE;
    plain.alloc_flags.gpu_direct_rdma_capable = 0;
    if (g->rt->flavor == HIPPO__GPU_HIP)
      handled(g->rt);
    if ((err = vm->create(&h, (size_t)size, &plain, 0)) ==
        HIPPO__GPU_SUCCESS)
      g->vm_prop = plain;
  }
  if (err != HIPPO__GPU_SUCCESS)
    return hippo__hip_vm_fail(g, err, "MemCreate");
  err = vm->map((void *)(uintptr_t)at, (size_t)size, 0, h, 0);
  if (err != HIPPO__GPU_SUCCESS) {
    st = hippo__hip_vm_fail(g, err, "MemMap");
    if (vm->release(h) != HIPPO__GPU_SUCCESS) {
      pthread_mutex_lock(&g->lock);
      if (orphan_keep(g, h, size))
        *orphaned += size;
      pthread_mutex_unlock(&g->lock);
    }
    return st;
  }
  *handle = h;
  return HIPPO_SUCCESS;
}

/* Parts of granule e: how many, and part i's handle and size. */
static size_t parts(const gpu_backend *g, uint64_t size) {
  return g->vm_part && size > g->vm_part
             ? (size_t)((size + g->vm_part - 1) / g->vm_part)
             : 1;
}
static unsigned long long *part_handle(vm_granule *e, size_t i) {
  return i ? &e->more[i - 1] : &e->handle;
}
static uint64_t part_size(const gpu_backend *g, const vm_granule *e,
                          size_t i) {
  uint64_t left = e->size - i * g->vm_part;
  return parts(g, e->size) == 1 ? e->size
         : left < g->vm_part    ? left
                                : g->vm_part;
}

/* Granule e (addr, size set) created and mapped, in parts where it is
 * larger than one allocation may be (HIP before 7: vm_part), all or
 * nothing, as map_part. */
hippo_status hippo__hip_map_one(gpu_backend *g, vm_granule *e,
                                uint64_t *orphaned) {
  size_t n = parts(g, e->size), i;
  hippo_status st = HIPPO_SUCCESS;
  e->more = n > 1 ? calloc(n - 1, sizeof *e->more) : NULL;
  if (n > 1 && !e->more)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY, "%s vm_map: out of host "
                            "memory for %zu parts", g->rt->name, n);
  for (i = 0; i < n && st == HIPPO_SUCCESS; i++)
    st = map_part(g, e->addr + i * g->vm_part, part_size(g, e, i),
                  part_handle(e, i), orphaned);
  for (i--; st != HIPPO_SUCCESS && i-- > 0;) { /* the parts mapped go */
    uint64_t at = e->addr + i * g->vm_part, size = part_size(g, e, i);
    (void)g->rt->vm.unmap((void *)(uintptr_t)at, (size_t)size);
    if (g->rt->vm.release(*part_handle(e, i)) != HIPPO__GPU_SUCCESS) {
      pthread_mutex_lock(&g->lock);
      if (orphan_keep(g, *part_handle(e, i), size))
        *orphaned += size;
      pthread_mutex_unlock(&g->lock);
    }
  }
  if (st != HIPPO_SUCCESS) {
    free(e->more);
    e->more = NULL;
  }
  return st;
}

/* Granule e given back: its parts unmapped, then released.  *res:
 * UNMAPPED, UNMAP_REFUSED (still mapped: parts unmapped before the
 * refusal are mapped again, with access) or RELEASE_REFUSED (unmapped;
 * *kept bytes of parts still held, orphans), the status saying why. */
hippo_status hippo__hip_unmap_one(gpu_backend *g, vm_granule *e, int *res,
                                  uint64_t *kept) {
  const hippo__gpu_vm_calls *vm = &g->rt->vm;
  hippo_status st = HIPPO_SUCCESS;
  size_t n = parts(g, e->size), i;
  int err = HIPPO__GPU_SUCCESS;
  *res = UNMAP_REFUSED;
  *kept = 0;
  for (i = 0; i < n && err == HIPPO__GPU_SUCCESS; i++)
    err = vm->unmap((void *)(uintptr_t)(e->addr + i * g->vm_part),
                    (size_t)part_size(g, e, i));
  if (err != HIPPO__GPU_SUCCESS) {
    st = hippo__hip_vm_fail(g, err, "MemUnmap");
    for (i--; i-- > 0;) {
      uint64_t at = e->addr + i * g->vm_part, size = part_size(g, e, i);
      if (vm->map((void *)(uintptr_t)at, (size_t)size, 0,
                  *part_handle(e, i), 0) == HIPPO__GPU_SUCCESS)
        (void)vm->set_access((void *)(uintptr_t)at, (size_t)size,
                             g->vm_access, g->vm_naccess);
    }
    return st;
  }
  *res = UNMAPPED;
  for (i = 0; i < n; i++) {
    uint64_t size = part_size(g, e, i);
    if ((err = vm->release(*part_handle(e, i))) == HIPPO__GPU_SUCCESS)
      continue;
    st = hippo__hip_vm_fail(g, err, "MemRelease");
    *res = RELEASE_REFUSED;
    pthread_mutex_lock(&g->lock);
    if (orphan_keep(g, *part_handle(e, i), size))
      *kept += size;
    pthread_mutex_unlock(&g->lock);
  }
  free(e->more);
  e->more = NULL;
  return st;
}

/* A handle unmapped but not released is kept (its bytes stay held).
 * Locked.  False without host memory: it is then lost to hippo. */
static bool orphan_keep(gpu_backend *g, unsigned long long handle,
                        uint64_t size) {
  if (g->norphans == g->cap_orphans) {
    size_t cap = g->cap_orphans ? g->cap_orphans * 2 : 8;
    vm_orphan *grown = realloc(g->orphans, cap * sizeof *grown);
    if (!grown)
      return false;
    g->orphans = grown;
    g->cap_orphans = cap;
  }
  g->orphans[g->norphans++] = (vm_orphan){handle, size};
  return true;
}

/* Releases the orphans again (vm_lock held, the device current). */
void hippo__hip_orphans_retry(gpu_backend *g) {
  for (size_t i = 0; i < g->norphans;) {
    if (g->rt->vm.release(g->orphans[i].handle) != HIPPO__GPU_SUCCESS) {
      i++;
      continue;
    }
    pthread_mutex_lock(&g->lock);
    g->bytes_held -= g->orphans[i].size;
    g->orphans[i] = g->orphans[--g->norphans];
    pthread_mutex_unlock(&g->lock);
  }
}

#define HIP6_PART_MAX (UINT64_C(256) << 20)

/* Every other device that can access this one's memory gets read-write
 * access to each mapping too, as to this device's Malloc'd pages once
 * peer access is enabled: without a descriptor of its own a peer's copies
 * and kernels fault on VIRTUAL memory (cuMemSetAccess, hipMemSetAccess
 * grant per device).  NCCL's ncclMemAlloc (src/allocator.cc) grants every
 * device cudaDeviceCanAccessPeer allows; PyTorch's ExpandableSegment
 * grants its peers_ (CUDACachingAllocator.cpp) -- issue 40 item 3.  A
 * failed question leaves that device out.  The device current. */
static void vm_peers(gpu_backend *g) {
  const hippo__gpu_rt *rt = g->rt;
  int count = 0;
  if (!rt->device_can_access_peer ||
      rt->get_device_count(&count) != HIPPO__GPU_SUCCESS)
    return;
  for (int i = 0; i < count && g->vm_naccess < HIPPO__GPU_MAX_PEERS; i++) {
    int ok = 0, loc = i;
    if (i == g->ordinal ||
        rt->device_can_access_peer(&ok, i, g->ordinal) != HIPPO__GPU_SUCCESS ||
        !ok ||
        (rt->flavor == HIPPO__GPU_CUDA &&
         rt->vm.device_get(&loc, i) != HIPPO__GPU_SUCCESS))
      continue;
    g->vm_access[g->vm_naccess++] = (hippo__gpu_mem_access){
        {HIPPO__GPU_MEM_LOCATION_DEVICE, loc}, HIPPO__GPU_MEM_ACCESS_RW};
  }
  handled(rt); /* a refused question is no error of the caller's */
}

/* Whether the device has virtual memory, decided once at open: every call
 * loaded, HIP 6.1 or later, the device says so (the attribute), and
 * the granularity is asked and usable.  Sets g->vm and what the calls
 * take, or g->base.vm_why. */
void hippo__hip_vm_probe(gpu_backend *g) {
  char *why = g->base.vm_why;
  const size_t wn = sizeof g->base.vm_why;
  const hippo__gpu_rt *rt = g->rt;
  const hippo__gpu_vm_calls *vm = &rt->vm;
  bool hip = rt->flavor == HIPPO__GPU_HIP;
  const void *prop = &g->vm_prop;
  hippo__error_kept kept;
  size_t gran = 0;
  dev_scope sc;
  int err, yes = 1, dev = g->ordinal;
  const char *asked = NULL;

  g->vm = false;
  if (vm->missing[0]) {
    snprintf(why, wn, "%.120s has no %.100s", rt->path,
             vm->missing);
    return;
  }
  if (!rt->device_sync) {
    snprintf(why, wn, "%.120s has no %sDeviceSynchronize",
             rt->path, rt->prefix);
    return;
  }
  /* Before ROCm 6.1 the calls exist but do nothing on Linux: the ROCm
   * device's virtualAlloc answers NULL, which hipMemAddressReserve returns
   * as success; hipMemSetAccess checks its arguments and returns;
   * hipMemMap does not look at its command's status (clr at rocm-6.0.2:
   * hip_vm.cpp, rocdevice.cpp Device::virtualAlloc; the ROCm path came
   * with "Initial VMM changes for ROCm path", first in rocm-6.1.0).  Debian
   * 12's ROCm is 5.2.  So the version decides, not a round trip at every
   * open (issue 40 item 4). */
  if (hip && rt->version < HIPPO__HIP_VMM_V61) {
    char v[48] = "unknown";
    if (rt->version > 0)
      snprintf(v, sizeof v, "%d.%d (%d)", rt->version / 10000000,
               rt->version / 100000 % 100, rt->version);
    snprintf(why, wn,
             "HIP runtime version %s: ROCm before 6.1 answers success to "
             "hipMemAddressReserve, hipMemMap and hipMemSetAccess without "
             "doing them; 6.1 or later is needed",
             v);
    return;
  }
  hippo__error_keep(&kept);
  if (hippo__hip_vm_enter(g, "virtual memory", &sc) != HIPPO_SUCCESS) {
    snprintf(why, wn, "%s", hippo__error_get());
    hippo__error_restore(&kept);
    return;
  }
  err = HIPPO__GPU_SUCCESS;
  if (!hip) {
    err = vm->device_get(&dev, g->ordinal);
    asked = "cuDeviceGet";
  }
  if (err == HIPPO__GPU_SUCCESS && !hip) {
    err = vm->device_attribute(&yes, HIPPO__CU_ATTR_VMM_SUPPORTED, dev);
    asked = "cuDeviceGetAttribute(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)";
  } else if (hip) {
    err = rt->device_attribute(&yes, HIPPO__HIP_ATTR_VMM_SUPPORTED, dev);
    asked = "hipDeviceGetAttribute(VirtualMemoryManagementSupported)";
  }
  g->vm_device = dev;
  g->vm_prop = (hippo__gpu_mem_prop){
      .type = HIPPO__GPU_MEM_ALLOCATION_PINNED,
      .requested_handle_types = HIPPO__GPU_MEM_HANDLE_NONE,
      .location = {HIPPO__GPU_MEM_LOCATION_DEVICE, dev}};
  g->vm_access[0] = (hippo__gpu_mem_access){
      {HIPPO__GPU_MEM_LOCATION_DEVICE, dev}, HIPPO__GPU_MEM_ACCESS_RW};
  g->vm_naccess = 1;
  if (err == HIPPO__GPU_SUCCESS && yes) {
    err = vm->granularity(&gran, prop, HIPPO__GPU_MEM_GRANULARITY_MIN);
    asked = hip ? "hipMemGetAllocationGranularity"
                : "cuMemGetAllocationGranularity";
  }
  (void)leave(g, &sc, HIPPO_SUCCESS);
  if (err != HIPPO__GPU_SUCCESS) {
    if (hip)
      handled(rt); /* answered, and handled: no virtual memory */
    snprintf(why, wn, "%s answered %s (%d)", asked,
             hip ? hippo__gpu_err_name(rt->flavor, rt, err)
                 : hippo__cu_err_name(err),
             err);
  } else if (!yes) {
    snprintf(why, wn, "%s says the device has none",
             asked);
  } else if (gran == 0 || !hippo__is_pow2(gran)) {
    snprintf(why, wn,
             "%s answered a granularity of %zu B, not a power of two", asked,
             gran);
  } else {
    g->vm = true;
    g->vm_granularity = gran;
    /* Shareable: a POSIX file descriptor handle, and on CUDA the RDMA
     * flag, where the device says so (cuDeviceGetAttribute 103 and 110;
     * HIP has no attribute: clr accepts the handle type from 6.2), as
     * PyTorch's ExpandableSegment::map and NCCL's ncclCuMemAlloc ask;
     * without them cuMemExportToShareableHandle, torch.multiprocessing's
     * CUDA tensors, NCCL registration and GPUDirect RDMA fail on VIRTUAL
     * memory.  map_part asks without where the create refuses (issue 40
     * item 6). */
    if (hip)
      g->vm_prop.requested_handle_types = HIPPO__GPU_MEM_HANDLE_POSIX_FD;
    if (hippo__hip_vm_enter(g, "virtual memory", &sc) == HIPPO_SUCCESS) {
      int fd = 0, rdma = 0;
      if (!hip && vm->device_attribute(&fd, HIPPO__CU_ATTR_POSIX_FD_SUPPORTED,
                                       dev) == HIPPO__GPU_SUCCESS && fd)
        g->vm_prop.requested_handle_types = HIPPO__GPU_MEM_HANDLE_POSIX_FD;
      if (!hip && vm->device_attribute(&rdma, HIPPO__CU_ATTR_RDMA_VMM_SUPPORTED,
                                       dev) == HIPPO__GPU_SUCCESS && rdma)
        g->vm_prop.alloc_flags.gpu_direct_rdma_capable = 1;
      vm_peers(g);
      (void)leave(g, &sc, HIPPO_SUCCESS);
    }
    /* ROCm before 7: one hipMemCreate of at most HIP6_PART_MAX (vLLM's
     * cumem_allocator.cpp creates in 256 MiB chunks on ROCm; clr
     * hip_vm.cpp answers hipErrorOutOfMemory above its own maximum):
     * larger granules are mapped in parts (issue 40 item 13) */
    if (hip && rt->version < HIPPO__HIP_V7)
      g->vm_part = HIP6_PART_MAX < gran ? gran : HIP6_PART_MAX / gran * gran;
    why[0] = '\0';
  }
  hippo__error_restore(&kept);
}
