/* fakegpu_vm.c -- the stand-in runtimes' virtual memory, over host memory
 * as hippo's HOST backend does it: reserved ranges (PROT_NONE mappings),
 * physical allocations (memfds counted in the device's memory), their
 * mappings and each mapping's access per device, with the checks a driver
 * makes and the failures FAKE_GPU_FAIL injects; HIP's calls (hipMem*),
 * exported; CUDA's are the driver's (fakegpu_driver.c).  A handle is
 * freed once released and unmapped; a copy touching a mapping its device
 * has no access to faults (fake_copy_faults).  The records are under the
 * lock (fake_mu); the semantics are at the head of fakegpu.c.  The unload
 * frees them.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fakegpu.h"

/* hipMemAllocationProp from HIP 5.3 on, CUmemAllocationProp */
typedef struct vprop {
  int type, handle_types;
  vloc location;
  void *win32;
  unsigned char compression, rdma;
  unsigned short usage;
  unsigned char reserved[4];
} vprop;
/* hipMemAllocationProp of HIP 5.2 */
typedef struct vprop52 {
  unsigned char compression;
  vloc location;
  int handle_type, type;
  unsigned short usage;
  void *win32;
} vprop52;

#define VHANDLE_MAGIC 0x564d4841u

typedef struct vres { /* a reserved range */
  char *base;
  size_t size;
  struct vres *next;
} vres;

typedef struct vhandle { /* a physical allocation */
  uint32_t magic;
  int fd, device;
  size_t size;
  int maps;      /* mappings of it */
  bool released; /* freed once maps is 0 */
  struct vhandle *next;
} vhandle;

typedef struct vmapping {
  char *addr;
  size_t size;
  vhandle *h;
  uint64_t access; /* bit d: device d may read and write it (SetAccess) */
  struct vmapping *next;
} vmapping;

static vres *vreses;
static vhandle *vhandles;
static vmapping *vmappings;
static char fail_spec[128]; /* FAKE_GPU_FAIL as last seen by a VMM call */
static unsigned long fail_counts[8]; /* calls of each of its modes since */

static size_t granularity(void) {
  return (size_t)fake_env_u64("FAKE_GPU_VM_GRANULARITY", UINT64_C(2) << 20);
}

/* Whether this VMM call (`mode`: "vmmap", ...) fails now (the lock held):
 * FAKE_GPU_FAIL names the mode -- a comma-separated list of "mode" or
 * "mode:N", N counting this mode's calls since the variable changed: the
 * Nth and every later one fail. */
static bool vm_fails(const char *mode) {
  const char *spec = fake_fail_mode(), *at = spec;
  size_t n = strlen(mode);
  if (strncmp(spec, fail_spec, sizeof fail_spec)) {
    snprintf(fail_spec, sizeof fail_spec, "%s", spec);
    memset(fail_counts, 0, sizeof fail_counts);
  }
  for (unsigned i = 0; *at && i < 8; i++) {
    const char *end = strchr(at, ',');
    if (!end)
      end = at + strlen(at);
    if (!strncmp(at, mode, n) && (at + n == end || at[n] == ':'))
      return ++fail_counts[i] >=
             (at[n] == ':' ? strtoul(at + n + 1, NULL, 0) : 1);
    at = *end ? end + 1 : end;
  }
  return false;
}

/* The device an allocation's properties name, or -1 (a field a driver
 * would refuse): the layout of the runtime's version. */
static int last_handles = -1, last_rdma = -1; /* the last create's */
static int seen_handles, seen_rdma; /* prop_device's last properties */

/* What the last create was asked for, -1 before any (tests read it). */
EXPORT void fakeGpuLastCreate(int *handle_types, int *rdma) {
  pthread_mutex_lock(&fake_mu);
  *handle_types = last_handles;
  *rdma = last_rdma;
  pthread_mutex_unlock(&fake_mu);
}

/* Whether a create asking for sharing is refused: FAKE_GPU_VM_SHARE
 * "refuse", or HIP before 6.2 asked any handle type (clr hip_vm.cpp at
 * rocm-6.1.0 answers hipErrorNotSupported; VMM IPC came with 6.2). */
static bool share_refused(int handles, int rdma) {
  const char *v = getenv("FAKE_GPU_VM_SHARE");
  if (v && !strcmp(v, "refuse"))
    return handles || rdma;
#if defined(FAKE_HIP)
  return handles && fake_version() < 60200000;
#else
  return false;
#endif
}

static int prop_device(const void *prop) {
  int type, handles, rdma = 0, dev;
  vloc loc;
  void *win32;
  if (!prop)
    return -1;
#if defined(FAKE_HIP)
  if (fake_version() < 50300000) {
    const vprop52 *p = prop;
    type = p->type;
    handles = p->handle_type;
    loc = p->location;
    win32 = p->win32;
  } else
#endif
  {
    const vprop *p = prop;
    type = p->type;
    handles = p->handle_types;
    loc = p->location;
    win32 = p->win32;
    rdma = p->rdma;
  }
  dev = loc.id;
  /* handle types: none or a POSIX file descriptor (1) */
  if (type != 1 || (handles & ~1) || rdma > 1 || loc.type != 1 || win32 ||
      dev < 0 || dev >= fake_devices())
    return -1;
  seen_handles = handles;
  seen_rdma = rdma;
  return dev;
}

/* ROCm before 6.1: the VMM calls answer success and do nothing. */
static bool vmm_hollow(void) {
#if defined(FAKE_HIP)
  return fake_version() < 60100000;
#else
  return false;
#endif
}

/* The largest hipMemCreate: FAKE_GPU_VM_CREATE_MAX on HIP before 7. */
static uint64_t create_max(void) {
#if defined(FAKE_HIP)
  if (fake_version() < 70000000)
    return fake_env_u64("FAKE_GPU_VM_CREATE_MAX", UINT64_C(256) << 20);
#endif
  return UINT64_MAX;
}

int fake_vm_granularity(size_t *g, const void *prop, int option) {
  int err = OK;
  pthread_mutex_lock(&fake_mu);
  if (fake_no_vmm_calls() || vm_fails("vmgranularity"))
    err = E_NOT_SUPPORTED;
  else if (!g || prop_device(prop) < 0 || option < 0 || option > 1)
    err = E_VALUE;
  else
    *g = granularity();
  pthread_mutex_unlock(&fake_mu);
  return err;
}

int fake_vm_reserve(void **ptr, size_t size, size_t align, void *addr,
                    unsigned long long flags) {
  size_t gran = granularity(), ignored;
  uintptr_t base, start;
  vres *r;
  char *m;
  (void)addr; /* a hint */
  pthread_mutex_lock(&fake_mu);
  if (fake_no_vmm_calls()) {
    pthread_mutex_unlock(&fake_mu);
    return E_NOT_SUPPORTED;
  }
  if (vm_fails("vmreserve")) {
    pthread_mutex_unlock(&fake_mu);
    return E_OOM;
  }
  pthread_mutex_unlock(&fake_mu);
  if (!ptr || flags)
    return E_VALUE;
  if (vmm_hollow()) { /* rocm-6.0.2 hip_vm.cpp: virtualAlloc's NULL */
    *ptr = NULL;
    return OK;
  }
  if (size == 0 || size % gran || (align & (align - 1)) != 0)
#if defined(FAKE_HIP)
    return E_OOM;
#else
    return E_VALUE;
#endif
  if (align < gran)
    align = gran;
  if ((ignored = (size_t)fake_env_u64("FAKE_GPU_VM_ALIGN", 0)) != 0)
    align = 2 * ignored; /* start below: a multiple of N, not of 2N */
  m = mmap(NULL, size + align, PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  r = malloc(sizeof *r);
  if (m == MAP_FAILED || !r) {
    if (m != MAP_FAILED)
      munmap(m, size + align);
    free(r);
    return E_OOM;
  }
  base = (uintptr_t)m;
  start = (base + align - 1) & ~(uintptr_t)(align - 1);
  if (ignored) {
    size_t room = align; /* the mapping is size + 2N: shift within it */
    start = start + ignored <= base + room ? start + ignored
                                           : start - ignored;
  }
  if (start > base)
    munmap(m, start - base);
  if (base + align > start)
    munmap((char *)start + size, base + align - start);
  r->base = (char *)start;
  r->size = size;
  pthread_mutex_lock(&fake_mu);
  r->next = vreses;
  vreses = r;
  pthread_mutex_unlock(&fake_mu);
  *ptr = r->base;
  return OK;
}

int fake_vm_free_range(void *ptr, size_t size) {
  int err = E_VALUE;
  pthread_mutex_lock(&fake_mu);
  if (fake_no_vmm_calls())
    err = E_NOT_SUPPORTED;
  else if (vm_fails("vmfree"))
    err = E_VALUE;
  else
    for (vres **link = &vreses; *link; link = &(*link)->next) {
      vres *r = *link;
      if (r->base != ptr || r->size != size)
        continue;
      for (vmapping *m = vmappings; m; m = m->next)
        if (m->addr >= r->base && m->addr < r->base + r->size)
          goto out; /* still mapped */
      *link = r->next;
      munmap(r->base, r->size);
      free(r);
      err = OK;
      break;
    }
out:
  pthread_mutex_unlock(&fake_mu);
  return err;
}

int fake_vm_create(unsigned long long *handle, size_t size, const void *prop,
                   unsigned long long flags) {
  uint64_t mem = fake_env_u64("FAKE_GPU_MEMORY", UINT64_C(1) << 30);
  vhandle *h;
  int dev, fd;
  fake_slow();
  pthread_mutex_lock(&fake_mu);
  if (fake_no_vmm_calls()) {
    pthread_mutex_unlock(&fake_mu);
    return E_NOT_SUPPORTED;
  }
  dev = prop_device(prop);
  if (!handle || dev < 0 || size == 0 || size % granularity() || flags) {
    pthread_mutex_unlock(&fake_mu);
    return E_VALUE;
  }
  last_handles = seen_handles;
  last_rdma = seen_rdma;
  if (share_refused(last_handles, last_rdma)) {
    pthread_mutex_unlock(&fake_mu);
    return E_NOT_SUPPORTED;
  }
  if (vm_fails("vmcreate") || size > mem - fake_used[dev] ||
      size > create_max()) {
    pthread_mutex_unlock(&fake_mu);
    return E_OOM;
  }
  fd = memfd_create("fakegpu-vm", MFD_CLOEXEC);
  h = calloc(1, sizeof *h);
  if (fd < 0 || !h || ftruncate(fd, (off_t)size) != 0) {
    if (fd >= 0)
      close(fd);
    free(h);
    pthread_mutex_unlock(&fake_mu);
    return E_OOM;
  }
  h->magic = VHANDLE_MAGIC;
  h->fd = fd;
  h->device = dev;
  h->size = size;
  h->next = vhandles;
  vhandles = h;
  fake_used[dev] += size;
  pthread_mutex_unlock(&fake_mu);
  *handle = (unsigned long long)(uintptr_t)h;
  return OK;
}

/* The live allocation `handle` names, or NULL (the lock held). */
static vhandle *handle_of(unsigned long long handle) {
  for (vhandle *h = vhandles; h; h = h->next)
    if ((unsigned long long)(uintptr_t)h == handle && !h->released)
      return h;
  return NULL;
}

/* Frees h once released and unmapped (the lock held). */
static void handle_drop(vhandle *h) {
  if (!h->released || h->maps)
    return;
  for (vhandle **link = &vhandles; *link; link = &(*link)->next)
    if (*link == h) {
      *link = h->next;
      break;
    }
  fake_used[h->device] -= h->size;
  close(h->fd);
  h->magic = 0;
  free(h);
}

int fake_vm_release(unsigned long long handle) {
  vhandle *h;
  int err = OK;
  pthread_mutex_lock(&fake_mu);
  if (fake_no_vmm_calls())
    err = E_NOT_SUPPORTED;
  else if (!(h = handle_of(handle)) || vm_fails("vmrelease"))
    err = E_VALUE;
  else {
    h->released = true;
    handle_drop(h);
  }
  pthread_mutex_unlock(&fake_mu);
  return err;
}

/* The reservation holding [p, p + size) whole, or NULL (the lock held). */
static vres *res_of(const char *p, size_t size) {
  for (vres *r = vreses; r; r = r->next)
    if (p >= r->base && size <= r->size &&
        (size_t)(p - r->base) <= r->size - size)
      return r;
  return NULL;
}

int fake_vm_map(void *ptr, size_t size, size_t offset,
                unsigned long long handle, unsigned long long flags) {
  size_t gran = granularity();
  char *p = ptr;
  vmapping *m;
  vhandle *h;
  int err = OK;
  pthread_mutex_lock(&fake_mu);
  if (fake_no_vmm_calls()) {
    err = E_NOT_SUPPORTED;
    goto out;
  }
#if defined(FAKE_HIP)
  /* ROCm's hipMemMap queues on the null stream and waits for it (clr
   * hip_vm.cpp): not while a capture runs; CUDA's cuMemMap has no capture
   * check (PyTorch maps expandable segments in captures) */
  if ((err = fake_unsafe_call()) != OK)
    goto out;
#endif
  if (vmm_hollow()) { /* the command's status is never looked at */
    err = p && handle && size && !offset && !flags ? OK : E_VALUE;
    goto out;
  }
  h = handle_of(handle);
  if (!h || !p || size == 0 || size % gran || offset || flags ||
      size > h->size || !res_of(p, size) ||
      (uintptr_t)p % gran || vm_fails("vmmap")) {
    err = E_VALUE;
    goto out;
  }
  for (m = vmappings; m; m = m->next)
    if (p < m->addr + m->size && m->addr < p + size) {
      err = E_VALUE; /* mapped already */
      goto out;
    }
  m = malloc(sizeof *m);
  if (!m || mmap(p, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd, 0) ==
                MAP_FAILED) {
    free(m);
    err = E_OOM;
    goto out;
  }
  m->addr = p;
  m->size = size;
  m->h = h;
  m->access = 0; /* none until SetAccess */
  m->next = vmappings;
  vmappings = m;
  h->maps++;
out:
  pthread_mutex_unlock(&fake_mu);
  return err;
}

/* The mapping starting at p, or NULL (the lock held). */
static vmapping *mapping_at(const char *p) {
  for (vmapping *m = vmappings; m; m = m->next)
    if (m->addr == p)
      return m;
  return NULL;
}

/* A copy by device `dev` touching [p, p + size) faults: part of it is
 * mapped, and that mapping gives dev no access (the lock held). */
bool fake_copy_faults(int dev, const void *p, size_t size) {
  const char *c = p;
  for (vmapping *m = vmappings; m; m = m->next)
    if (c < m->addr + m->size && m->addr < c + size &&
        !(m->access & (UINT64_C(1) << (dev & 63))))
      return true;
  return false;
}

int fake_vm_set_access(void *ptr, size_t size, const vaccess *desc,
                       size_t count) {
  char *p = ptr, *at;
  int err = OK;
  pthread_mutex_lock(&fake_mu);
  if (fake_no_vmm_calls()) {
    err = E_NOT_SUPPORTED;
    goto out;
  }
  if (!p || size == 0 || !desc || count == 0 || vm_fails("vmaccess")) {
    err = E_VALUE;
    goto out;
  }
  if (vmm_hollow()) /* rocm-6.0.2: the arguments checked, nothing done */
    goto out;
  for (size_t i = 0; i < count; i++)
    if (desc[i].location.type != 1 || desc[i].location.id < 0 ||
        desc[i].location.id >= fake_devices() ||
        (desc[i].flags != 0 && desc[i].flags != 1 && desc[i].flags != 3)) {
      err = E_VALUE;
      goto out;
    }
  /* whole mappings, back to back, each given its device's access */
  for (at = p; at < p + size;) {
    vmapping *m = mapping_at(at);
    const vaccess *mine = NULL;
    if (!m || m->size > (size_t)(p + size - at)) {
      err = E_VALUE;
      goto out;
    }
    for (size_t i = 0; i < count; i++)
      if (desc[i].location.id == m->h->device)
        mine = &desc[i];
      else if (!fake_peers(desc[i].location.id, m->h->device)) {
        err = E_BADDEV; /* no peer access between the two */
        goto out;
      }
    if (!mine) {
      err = E_VALUE;
      goto out;
    }
    at += m->size;
  }
  for (at = p; at < p + size;) {
    vmapping *m = mapping_at(at);
    int f = 0, prot;
    for (size_t i = 0; i < count; i++) {
      uint64_t bit = UINT64_C(1) << (desc[i].location.id & 63);
      if (desc[i].location.id == m->h->device)
        f = desc[i].flags;
      m->access = desc[i].flags ? m->access | bit : m->access & ~bit;
    }
    prot = f == 3 ? PROT_READ | PROT_WRITE : f == 1 ? PROT_READ : PROT_NONE;
    if (mprotect(m->addr, m->size, prot) != 0) {
      err = E_VALUE;
      goto out;
    }
    at += m->size;
  }
out:
  pthread_mutex_unlock(&fake_mu);
  return err;
}

int fake_vm_unmap(void *ptr, size_t size) {
  char *p = ptr, *at;
  int err = OK;
  pthread_mutex_lock(&fake_mu);
  if (fake_no_vmm_calls()) {
    err = E_NOT_SUPPORTED;
    goto out;
  }
  if (!p || size == 0 || vm_fails("vmunmap")) {
    err = E_VALUE;
    goto out;
  }
  for (at = p; at < p + size;) { /* whole mappings, back to back */
    vmapping *m = mapping_at(at);
    if (!m || m->size > (size_t)(p + size - at)) {
      err = E_VALUE;
      goto out;
    }
    at += m->size;
  }
  /* an unmap synchronizes (ROCm waits for every stream; CUDA documents
   * cuMemUnmap as synchronous, and PyTorch never unmaps in a capture):
   * a potentially unsafe call while a capture runs */
  if ((err = fake_unsafe_call()) != OK)
    goto out;
#if defined(FAKE_HIP)
  /* hipMemUnmap waits for the null stream and the blocking streams only
   * (clr hip_vm.cpp queues it on the null stream; hip_device.cpp
   * WaitActiveStreams skips non-blocking ones): a copy still queued on a
   * non-blocking stream runs after the unmap, and faults */
  fake_run(&fake_default_stream, UINT64_MAX);
  for (fstream *o = fake_streams; o; o = o->next)
    if (!(o->flags & 1))
      fake_run(o, UINT64_MAX);
#endif
  for (at = p; at < p + size;) {
    vmapping *m = mapping_at(at);
    for (vmapping **link = &vmappings; *link; link = &(*link)->next)
      if (*link == m) {
        *link = m->next;
        break;
      }
    (void)mmap(m->addr, m->size, PROT_NONE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    at += m->size;
    m->h->maps--;
    handle_drop(m->h);
    free(m);
  }
out:
  pthread_mutex_unlock(&fake_mu);
  return err;
}

#if defined(FAKE_HIP)
EXPORT int hipMemGetAllocationGranularity(size_t *g, const void *prop,
                                          int option) {
  return fake_vm_granularity(g, prop, option);
}
EXPORT int hipMemAddressReserve(void **ptr, size_t size, size_t align,
                                void *addr, unsigned long long flags) {
  return fake_vm_reserve(ptr, size, align, addr, flags);
}
EXPORT int hipMemAddressFree(void *ptr, size_t size) {
  return fake_vm_free_range(ptr, size);
}
EXPORT int hipMemCreate(void **handle, size_t size, const void *prop,
                        unsigned long long flags) {
  unsigned long long h = 0;
  int err = fake_vm_create(&h, size, prop, flags);
  if (err == OK)
    *handle = (void *)(uintptr_t)h;
  return err;
}
EXPORT int hipMemRelease(void *handle) {
  return fake_vm_release((unsigned long long)(uintptr_t)handle);
}
EXPORT int hipMemMap(void *ptr, size_t size, size_t offset, void *handle,
                     unsigned long long flags) {
  return fake_vm_map(ptr, size, offset, (unsigned long long)(uintptr_t)handle,
                     flags);
}
EXPORT int hipMemSetAccess(void *ptr, size_t size, const void *desc,
                           size_t count) {
  return fake_vm_set_access(ptr, size, desc, count);
}
EXPORT int hipMemUnmap(void *ptr, size_t size) {
  return fake_vm_unmap(ptr, size);
}
#else
/* CUDA's cuMemCreate, cuMemRelease and cuMemGetAllocationGranularity are
 * the functions above under the driver's names: an alias is defined in its
 * target's file (fakegpu_driver.c exports the other driver calls). */
DRIVER_EXPORT(cuMemCreate, fake_vm_create);
DRIVER_EXPORT(cuMemRelease, fake_vm_release);
DRIVER_EXPORT(cuMemGetAllocationGranularity, fake_vm_granularity);
#endif

/* Unloaded (hippo__gpu_rt_forget dlcloses it): the default stream's queue
 * and the VMM records go with it, so a leak checker sees none of ours. */
__attribute__((destructor)) static void fake_unload(void) {
  free(fake_default_stream.ops);
  fake_default_stream.ops = NULL;
  fake_default_stream.cap = fake_default_stream.queued =
      fake_default_stream.done = 0;
  while (vmappings) {
    vmapping *m = vmappings;
    vmappings = m->next;
    free(m);
  }
  while (vhandles) {
    vhandle *h = vhandles;
    vhandles = h->next;
    close(h->fd);
    free(h);
  }
  while (vreses) {
    vres *r = vreses;
    vreses = r->next;
    free(r);
  }
}
