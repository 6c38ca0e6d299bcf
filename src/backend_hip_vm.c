/* backend_hip_vm.c -- the HIP backend's virtual memory (backend.h vm_*):
 * the ranges, the granule table and the operations; the driver's steps for
 * one granule and the probe at open are backend_hip_vm_driver.c.
 *
 * vm_reserve/vm_release are hipMemAddressReserve/hipMemAddressFree (CUDA:
 * cuMemAddressReserve/cuMemAddressFree, the driver's calls through the
 * runtime's entry point: gpu_rt.h).  vm_map backs each granule with its
 * own physical allocation -- hipMemCreate of `granule` bytes, hipMemMap of
 * it whole at the granule's address, hipMemSetAccess read-write for the
 * device -- so granules go back one by one: vm_unmap is hipMemUnmap and
 * hipMemRelease of each (on HIP before 7 a granule larger than 256 MiB is
 * several allocations, vm_part: hippo__hip_map_one).  A table (granule
 * address -> handle) finds the handle again; each range keeps its mapped
 * runs, so copies and emu_read/emu_write inside mapped granules are
 * accepted like those inside pages.  Mapped bytes are held bytes
 * (bytes_held, the budget, mem_info).
 *
 * Every call's status is checked; a failure names the call in last_error
 * ("HIP hipMemMap failed: ...", "CUDA cuMemMap failed: ...").  vm_map is
 * all or nothing: a failure unmaps and releases what the call mapped.  A
 * granule whose unmap the runtime refuses stays mapped (and counted); a
 * handle whose release it refuses after the unmap stays held (an orphan)
 * and is released again at the next vm_map, vm_unmap or destroy.
 *
 * cuMemUnmap does not wait for the device's work, and hipMemUnmap waits
 * only for the null stream and the blocking streams (not hippo's
 * non-blocking ones), so a vm_unmap with `wait` synchronizes the device
 * first on both (DeviceSynchronize), once per call.  The VMM calls of a device run
 * one at a time (vm_lock): ROCm releases have had races between concurrent
 * map calls and spurious hipMemSetAccess failures, so nothing overlaps and
 * every answer is checked.
 *
 * Calls are counted as on HOST and DRY: vm_reserve and vm_release one
 * HIPPO_CALL_VM_RANGE each, one HIPPO_CALL_VM_MAP per allocation created
 * and mapped (a granule in parts counts once), one HIPPO_CALL_VM_ACCESS
 * per map call (access is set once over its span), one
 * HIPPO_CALL_VM_UNMAP per allocation unmapped and released; an injected
 * fault fails that
 * call with nothing changed (vm_map gives back what the call had mapped,
 * vm_unmap stops there and says how far it got). */
#include <config.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend_hip.h"

/* Index of the range holding addr, or g->nranges.  Locked (either lock). */
static size_t range_at(const gpu_backend *g, uint64_t addr) {
  size_t lo = 0, hi = g->nranges;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (g->ranges[mid].addr + g->ranges[mid].size <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < g->nranges && g->ranges[lo].addr <= addr ? lo : g->nranges;
}

bool hippo__hip_vm_run_holding(const gpu_backend *g, uint64_t addr,
                               uint64_t run[2]) {
  size_t i = range_at(g, addr);
  return i < g->nranges && hippo__vm_runs_holding(&g->ranges[i].runs, addr,
                                                  run);
}

/* ---- the granule table (vm_lock) ---- */

static size_t gran_home(const gpu_backend *g, uint64_t addr) {
  uint64_t h = (addr >> 12) * UINT64_C(0x9E3779B97F4A7C15);
  return (size_t)(h >> 32) & (g->cap_granules - 1);
}

static vm_granule *gran_find(const gpu_backend *g, uint64_t addr) {
  if (!g->cap_granules)
    return NULL;
  for (size_t i = gran_home(g, addr);; i = (i + 1) & (g->cap_granules - 1)) {
    if (g->granules[i].addr == addr)
      return &g->granules[i];
    if (g->granules[i].addr == 0)
      return NULL;
  }
}

/* Puts e in (room made; its address not in the table). */
static void gran_put(gpu_backend *g, vm_granule e) {
  size_t i = gran_home(g, e.addr);
  while (g->granules[i].addr)
    i = (i + 1) & (g->cap_granules - 1);
  g->granules[i] = e;
  g->ngranules++;
}

/* Room for `more` entries, the table at most half full (false: no host
 * memory). */
static bool gran_room(gpu_backend *g, size_t more) {
  size_t cap = g->cap_granules ? g->cap_granules : 64;
  vm_granule *old = g->granules, *grown;
  size_t old_cap = g->cap_granules;
  if (more > SIZE_MAX / 4 - g->ngranules)
    return false;
  while (cap < 2 * (g->ngranules + more))
    cap *= 2;
  if (cap == g->cap_granules)
    return true;
  grown = calloc(cap, sizeof *grown);
  if (!grown)
    return false;
  g->granules = grown;
  g->cap_granules = cap;
  g->ngranules = 0;
  for (size_t i = 0; i < old_cap; i++)
    if (old[i].addr)
      gran_put(g, old[i]);
  free(old);
  return true;
}

/* Takes e (in the table) out: backward-shift deletion. */
static void gran_del(gpu_backend *g, vm_granule *e) {
  size_t mask = g->cap_granules - 1, i = (size_t)(e - g->granules), j = i;
  for (;;) {
    size_t k;
    j = (j + 1) & mask;
    if (g->granules[j].addr == 0)
      break;
    k = gran_home(g, g->granules[j].addr);
    /* j's entry may move to i unless its home lies cyclically in (i, j] */
    if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
      continue;
    g->granules[i] = g->granules[j];
    i = j;
  }
  g->granules[i] = (vm_granule){0, 0, 0, NULL};
  g->ngranules--;
}

/* ---- the operations ---- */

hippo_status hippo__hip_vm_granularity(hippo__backend *be,
                                       uint64_t *granule) {
  *granule = gpu_of(be)->vm_granularity;
  return HIPPO_SUCCESS;
}

static hippo_status not_granular(const gpu_backend *g, const char *call,
                                 const char *what, uint64_t value,
                                 uint64_t granule) {
  return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s %s: %s %#llx is not a positive multiple of "
                          "the granule %llu B",
                          g->rt->name, call, what, (unsigned long long)value,
                          (unsigned long long)granule);
}

hippo_status hippo__hip_vm_reserve(hippo__backend *be, uint64_t size,
                                   uint64_t align, uint64_t *addr) {
  gpu_backend *g = gpu_of(be);
  uint64_t gran = g->vm_granularity, over = 0, at;
  const char *call = "MemAddressReserve";
  void *p = NULL;
  dev_scope sc;
  hippo_status st;
  size_t i;
  int err;

  pthread_mutex_lock(&g->vm_lock);
  if ((st = hippo__hip_call_named(g, HIPPO_CALL_VM_RANGE, "vm_reserve")))
    goto out;
  if (!addr || size == 0 || size % gran) {
    st = not_granular(g, "vm_reserve", "size", size, gran);
    goto out;
  }
  if (!hippo__is_pow2(align) || align < gran)
    align = gran;
  pthread_mutex_lock(&g->lock);
  if (g->nranges == g->cap_ranges) {
    size_t cap = g->cap_ranges ? g->cap_ranges * 2 : 8;
    vm_range *grown = realloc(g->ranges, cap * sizeof *grown);
    if (grown) {
      g->ranges = grown;
      g->cap_ranges = cap;
    }
  }
  if (g->nranges == g->cap_ranges)
    st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                          "%s vm_reserve: out of host memory for %zu ranges",
                          g->rt->name, g->nranges + 1);
  pthread_mutex_unlock(&g->lock);
  if (st || (st = hippo__hip_vm_enter(g, "vm_reserve", &sc)))
    goto out;
  {
    relaxed_scope rs; /* a capture may run (base.vm_captures) */
    relax(g, &rs);
    err = g->rt->vm.reserve(&p, (size_t)size, (size_t)align, NULL, 0);
    /* ROCm passes the alignment to an HSA reserve that takes none (clr
     * hip_vm.cpp hipMemAddressReserve, rocdevice.cpp virtualAlloc): a
     * misaligned answer is given back and `align` more reserved, the
     * range aligned inside it by hand (issue 40 item 5) */
    if (err == HIPPO__GPU_SUCCESS && p && (uintptr_t)p % align) {
      over = align;
      err = g->rt->vm.free_range(p, (size_t)size);
      call = "MemAddressFree (of a range it answered misaligned)";
      if (err == HIPPO__GPU_SUCCESS) {
        p = NULL;
        err = g->rt->vm.reserve(&p, (size_t)(size + over), (size_t)align,
                                NULL, 0);
        call = "MemAddressReserve (again, one alignment larger)";
      }
    }
    unrelax(g, &rs);
  }
  st = err != HIPPO__GPU_SUCCESS ? hippo__hip_vm_fail(g, err, call)
       : !p ? hippo__error_set(HIPPO_BACKEND_ERROR,
                               "%s %sMemAddressReserve returned address 0",
                               g->rt->name, g->rt->vm.prefix)
            : HIPPO_SUCCESS;
  st = leave(g, &sc, st);
  if (st) {
    st = hippo__error_wrap(st, "%s vm_reserve of %llu B", g->rt->name,
                           (unsigned long long)size);
    goto out;
  }
  at = ((uint64_t)(uintptr_t)p + align - 1) & ~(align - 1);
  pthread_mutex_lock(&g->lock);
  i = 0;
  while (i < g->nranges && g->ranges[i].addr < at)
    i++;
  memmove(&g->ranges[i + 1], &g->ranges[i],
          (g->nranges - i) * sizeof *g->ranges);
  g->ranges[i] = (vm_range){.addr = at, .size = size,
                            .base = (uint64_t)(uintptr_t)p,
                            .reserved = size + over};
  g->nranges++;
  g->bytes_virtual += size;
  pthread_mutex_unlock(&g->lock);
  *addr = at;
out:
  pthread_mutex_unlock(&g->vm_lock);
  return st;
}

hippo_status hippo__hip_vm_release(hippo__backend *be, uint64_t addr,
                                   uint64_t size) {
  gpu_backend *g = gpu_of(be);
  uint64_t mapped = 0;
  dev_scope sc;
  hippo_status st;
  size_t i;
  int err;

  pthread_mutex_lock(&g->vm_lock);
  if ((st = hippo__hip_call_named(g, HIPPO_CALL_VM_RANGE, "vm_release")))
    goto out;
  pthread_mutex_lock(&g->lock);
  i = range_at(g, addr);
  if (i < g->nranges)
    mapped = g->ranges[i].mapped;
  pthread_mutex_unlock(&g->lock);
  if (i == g->nranges || g->ranges[i].addr != addr ||
      g->ranges[i].size != size) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s vm_release: [%#llx, +%llu) is not a range "
                          "vm_reserve gave (released twice?)",
                          g->rt->name, (unsigned long long)addr,
                          (unsigned long long)size);
    goto out;
  }
  if (mapped) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s vm_release: range %#llx still has %llu B "
                          "mapped; unmap them first",
                          g->rt->name, (unsigned long long)addr,
                          (unsigned long long)mapped);
    goto out;
  }
  if ((st = hippo__hip_vm_enter(g, "vm_release", &sc)))
    goto out;
  err = g->rt->vm.free_range((void *)(uintptr_t)g->ranges[i].base,
                             (size_t)g->ranges[i].reserved);
  st = leave(g, &sc,
             err != HIPPO__GPU_SUCCESS
                 ? hippo__hip_vm_fail(g, err, "MemAddressFree")
                 : HIPPO_SUCCESS);
  if (st) {
    st = hippo__error_wrap(st, "%s vm_release of range %#llx", g->rt->name,
                           (unsigned long long)addr);
    goto out;
  }
  pthread_mutex_lock(&g->lock);
  hippo__vm_runs_free(&g->ranges[i].runs);
  memmove(&g->ranges[i], &g->ranges[i + 1],
          (g->nranges - i - 1) * sizeof *g->ranges);
  g->nranges--;
  g->bytes_virtual -= size;
  pthread_mutex_unlock(&g->lock);
out:
  pthread_mutex_unlock(&g->vm_lock);
  return st;
}

/* The checks vm_map and vm_unmap share: granule a positive multiple of the
 * granularity, [addr, addr + size) granule-aligned inside one range (its
 * index in *ri).  Locked. */
static hippo_status span_check(const gpu_backend *g, const char *call,
                               uint64_t addr, uint64_t size, uint64_t granule,
                               size_t *ri) {
  uint64_t gran = g->vm_granularity;
  const vm_range *r;
  size_t i;
  if (granule == 0 || granule % gran)
    return not_granular(g, call, "granule", granule, gran);
  if (size == 0 || size % granule)
    return not_granular(g, call, "size", size, granule);
  i = range_at(g, addr);
  r = i < g->nranges ? &g->ranges[i] : NULL;
  if (!r || (addr - r->addr) % gran || size > r->size - (addr - r->addr))
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s %s: [%#llx, +%llu) is not granule-aligned "
                            "inside a range vm_reserve gave",
                            g->rt->name, call, (unsigned long long)addr,
                            (unsigned long long)size);
  *ri = i;
  return HIPPO_SUCCESS;
}

hippo_status hippo__hip_vm_map(hippo__backend *be, uint64_t addr,
                               uint64_t size, uint64_t granule) {
  gpu_backend *g = gpu_of(be);
  vm_granule *hs = NULL; /* the call's granules */
  uint64_t n = 0, k = 0, kept = 0;
  size_t ri = 0;
  bool entered = false;
  relaxed_scope rs;
  dev_scope sc;
  hippo_status st;

  pthread_mutex_lock(&g->vm_lock);
  pthread_mutex_lock(&g->lock);
  st = span_check(g, "vm_map", addr, size, granule, &ri);
  if (st == HIPPO_SUCCESS &&
      hippo__vm_runs_mapped_in(&g->ranges[ri].runs, addr, addr + size) != 0)
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s vm_map: [%#llx, +%llu) is mapped already (in "
                          "part)",
                          g->rt->name, (unsigned long long)addr,
                          (unsigned long long)size);
  if (st == HIPPO_SUCCESS && size > g->budget - g->bytes_held)
    st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                          "%s vm_map: %llu bytes requested, %llu of the "
                          "device's budget of %llu bytes held "
                          "(hippo_device_desc.capacity)",
                          g->rt->name, (unsigned long long)size,
                          (unsigned long long)g->bytes_held,
                          (unsigned long long)g->budget);
  if (st == HIPPO_SUCCESS) {
    /* host memory first, so the records cannot fail once mapped: the
     * granules' handles, one run (the call's granules merge), the table */
    n = size / granule;
    hs = n <= SIZE_MAX / sizeof *hs ? malloc((size_t)n * sizeof *hs) : NULL;
    if (!hs || !hippo__vm_runs_room(&g->ranges[ri].runs, 1) || !gran_room(g, (size_t)n))
      st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s vm_map: out of host memory for the records "
                            "of %llu granules",
                            g->rt->name, (unsigned long long)n);
  }
  if (st == HIPPO_SUCCESS)
    g->bytes_held += size; /* reserved while the driver maps */
  pthread_mutex_unlock(&g->lock);
  if (st)
    goto out;
  st = hippo__hip_vm_enter(g, "vm_map", &sc);
  entered = st == HIPPO_SUCCESS;
  if (entered && g->norphans)
    hippo__hip_orphans_retry(g);
  /* a capture may run (base.vm_captures): the creates, maps and the
   * access in relaxed mode, as NCCL's cuMem allocations are */
  relax(g, &rs);
  for (; st == HIPPO_SUCCESS && k < n; k++) {
    if ((st = hippo__hip_call_named(g, HIPPO_CALL_VM_MAP, "vm_map")))
      break;
    hs[k] = (vm_granule){addr + k * granule, granule, 0, NULL};
    st = hippo__hip_map_one(g, &hs[k], &kept);
    if (st) {
      st = hippo__error_wrap(st, "%s vm_map: allocation %#llx of %llu B",
                             g->rt->name,
                             (unsigned long long)(addr + k * granule),
                             (unsigned long long)granule);
      break;
    }
  }
  /* access once for the whole span, as PyTorch's expandable segments set
   * it once per growth (cuMemSetAccess covers mappings back to back) */
  if (st == HIPPO_SUCCESS && entered &&
      (st = hippo__hip_call_named(g, HIPPO_CALL_VM_ACCESS,
                                  "vm_map (set access)")) == HIPPO_SUCCESS) {
    int err = g->rt->vm.set_access((void *)(uintptr_t)addr, (size_t)size,
                                   g->vm_access, g->vm_naccess);
    if (err != HIPPO__GPU_SUCCESS)
      st = hippo__error_wrap(hippo__hip_vm_fail(g, err, "MemSetAccess"),
                             "%s vm_map: [%#llx, +%llu)", g->rt->name,
                             (unsigned long long)addr,
                             (unsigned long long)size);
  }
  unrelax(g, &rs);
  if (st) { /* all or nothing: what this call mapped goes back */
    hippo__error_kept why;
    uint64_t stuck = 0;
    hippo__error_keep(&why);
    while (k-- > 0) {
      uint64_t at = addr + k * granule, held = 0;
      int res;
      /* counted as the unmap it is (no fault injected into an undo) */
      atomic_fetch_add_explicit(&g->calls[HIPPO_CALL_VM_UNMAP], 1,
                                memory_order_relaxed);
      (void)hippo__hip_unmap_one(g, &hs[k], &res, &held);
      pthread_mutex_lock(&g->lock);
      if (res == UNMAP_REFUSED) { /* still mapped: recorded as such */
        vm_range *r = &g->ranges[ri];
        if (hippo__vm_runs_room(&r->runs, 1))
          hippo__vm_runs_add(&r->runs, at, at + granule);
        r->mapped += granule;
        gran_put(g, hs[k]);
        g->bytes_mapped += granule;
        g->granules_mapped++;
        kept += granule;
        stuck++;
      } else {
        kept += held;
      }
      pthread_mutex_unlock(&g->lock);
    }
    hippo__error_restore(&why);
    if (stuck)
      st = hippo__error_wrap(st, "%s vm_map (%llu granules of this call "
                             "could not be unmapped and stay mapped)",
                             g->rt->name, (unsigned long long)stuck);
  }
  if (entered)
    st = leave(g, &sc, st);
  pthread_mutex_lock(&g->lock);
  if (st == HIPPO_SUCCESS) {
    hippo__vm_runs_add(&g->ranges[ri].runs, addr, addr + size);
    g->ranges[ri].mapped += size;
    for (k = 0; k < n; k++)
      gran_put(g, hs[k]);
    g->bytes_mapped += size;
    g->granules_mapped += n;
  } else {
    g->bytes_held -= size - kept;
  }
  if (g->bytes_mapped > g->peak_bytes_mapped)
    g->peak_bytes_mapped = g->bytes_mapped;
  if (g->bytes_held > g->peak_bytes_held)
    g->peak_bytes_held = g->bytes_held;
  pthread_mutex_unlock(&g->lock);
out:
  free(hs);
  pthread_mutex_unlock(&g->vm_lock);
  return st;
}

hippo_status hippo__hip_vm_unmap(hippo__backend *be, uint64_t addr,
                                 uint64_t size, uint64_t granule, bool wait,
                                 uint64_t *done) {
  gpu_backend *g = gpu_of(be);
  uint64_t at = addr;
  size_t ri = 0;
  dev_scope sc;
  hippo_status st;

  pthread_mutex_lock(&g->vm_lock);
  pthread_mutex_lock(&g->lock);
  st = span_check(g, "vm_unmap", addr, size, granule, &ri);
  for (uint64_t a = addr; st == HIPPO_SUCCESS && a < addr + size;
       a += granule) {
    const vm_granule *e = gran_find(g, a);
    if (!e || e->size != granule)
      st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s vm_unmap: [%#llx, +%llu) is not mapped whole "
                            "in granules of %llu B (at %#llx)",
                            g->rt->name, (unsigned long long)addr,
                            (unsigned long long)size,
                            (unsigned long long)granule,
                            (unsigned long long)a);
  }
  if (st == HIPPO_SUCCESS && !hippo__vm_runs_room(&g->ranges[ri].runs, 1))
    st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                          "%s vm_unmap: out of host memory for a run",
                          g->rt->name);
  pthread_mutex_unlock(&g->lock);
  if (st || (st = hippo__hip_vm_enter(g, "vm_unmap", &sc)))
    goto out;
  if (g->norphans)
    hippo__hip_orphans_retry(g);
  /* cuMemUnmap does not wait for the device's work, and hipMemUnmap
   * waits only for the null stream and the blocking streams (clr
   * hip_vm.cpp, hip_device.cpp WaitActiveStreams), not hippo's
   * non-blocking ones: the device is synchronized first on both, as
   * PyTorch does before it unmaps (issue 40 item 1); one wait a call */
  if (wait) {
    int err;
    atomic_fetch_add_explicit(&g->waits, 1, memory_order_relaxed);
    err = g->rt->device_sync();
    if (err != HIPPO__GPU_SUCCESS)
      st = hippo__error_wrap(hippo__gpu_fail(g->rt, err, "DeviceSynchronize",
                                             NULL),
                             "%s vm_unmap: waiting for the device's work",
                             g->rt->name);
  }
  while (st == HIPPO_SUCCESS && at < addr + size) {
    uint64_t held = 0;
    vm_granule *e;
    int res;
    if ((st = hippo__hip_call_named(g, HIPPO_CALL_VM_UNMAP, "vm_unmap")))
      break;
    e = gran_find(g, at);
    st = hippo__hip_unmap_one(g, e, &res, &held);
    if (st)
      st = hippo__error_wrap(st, "%s vm_unmap: granule %#llx of %llu B%s",
                             g->rt->name, (unsigned long long)at,
                             (unsigned long long)granule,
                             res == RELEASE_REFUSED
                                 ? " (unmapped; its memory stays held and "
                                   "is released again later)"
                                 : "");
    if (res == UNMAP_REFUSED)
      break;
    pthread_mutex_lock(&g->lock);
    hippo__vm_runs_remove(&g->ranges[ri].runs, at, at + granule);
    g->ranges[ri].mapped -= granule;
    g->bytes_mapped -= granule;
    g->granules_mapped--;
    g->bytes_held -= granule - held;
    gran_del(g, e);
    pthread_mutex_unlock(&g->lock);
    at += granule;
  }
  st = leave(g, &sc, st);
out:
  if (done)
    *done = at - addr;
  pthread_mutex_unlock(&g->vm_lock);
  return st;
}

/* Gives every granule, orphan and range back (destroy: no call runs). */
void hippo__hip_vm_fini(gpu_backend *g) {
  const hippo__gpu_vm_calls *vm = &g->rt->vm;
  dev_scope sc;
  if ((g->ngranules || g->norphans || g->nranges) &&
      hippo__hip_vm_enter(g, "destroy", &sc) == HIPPO_SUCCESS) {
    if (g->ngranules)
      (void)g->rt->device_sync(); /* neither unmap waits for all streams */
    for (size_t i = 0; i < g->cap_granules; i++) {
      uint64_t held;
      int res;
      if (g->granules[i].addr)
        (void)hippo__hip_unmap_one(g, &g->granules[i], &res, &held);
    }
    for (size_t i = 0; i < g->norphans; i++) /* those just made too */
      (void)vm->release(g->orphans[i].handle);
    for (size_t i = 0; i < g->nranges; i++)
      (void)vm->free_range((void *)(uintptr_t)g->ranges[i].base,
                           (size_t)g->ranges[i].reserved);
    (void)leave(g, &sc, HIPPO_SUCCESS);
  }
  for (size_t i = 0; i < g->nranges; i++)
    hippo__vm_runs_free(&g->ranges[i].runs);
  for (size_t i = 0; i < g->cap_granules; i++)
    free(g->granules[i].more); /* a granule left mapped */
  free(g->ranges);
  free(g->granules);
  free(g->orphans);
}
