/* backend_hip_pages.c -- the HIP backend's pages (backend.h page_alloc,
 * page_free): Malloc and Free on the backend's device, each page in the
 * registry (gpu_backend.pages, sorted by address) that validates the
 * addresses copies and emu_read/emu_write are given (hippo__hip_inside);
 * the budget (desc.capacity) checked before the runtime is asked; and the
 * device's memory as mem_info reports it, within that budget.
 */
#include <config.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend_hip.h"

/* ---- pages ------------------------------------------------------------------ */

/* Index of the page holding addr, or of where a page at addr would go. */
static size_t page_at(const gpu_backend *g, uint64_t addr) {
  size_t lo = 0, hi = g->npages;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (g->pages[mid].addr + g->pages[mid].size <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Page [addr, addr+size) enters the registry, in address order (a
 * promised place: npages < cap_pages).  Locked. */
static void page_record(gpu_backend *g, uint64_t addr, uint64_t size) {
  size_t i = page_at(g, addr);
  memmove(&g->pages[i + 1], &g->pages[i], (g->npages - i) * sizeof *g->pages);
  g->pages[i] = (gpu_page){addr, size};
  g->npages++;
}

hippo_status hippo__hip_page_alloc(hippo__backend *be, uint64_t size,
                                   uint64_t *addr) {
  gpu_backend *g = gpu_of(be);
  dev_scope sc;
  hippo_status st;
  void *p = NULL;
  int err;

  if ((st = hippo__hip_call(g, HIPPO_CALL_ALLOC)) != HIPPO_SUCCESS)
    return st;
  if (!addr || size == 0 || (size & (be->alignment - 1)) != 0)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s page_alloc: size %llu must be a positive "
                            "multiple of %llu",
                            g->rt->name, (unsigned long long)size,
                            (unsigned long long)be->alignment);
  pthread_mutex_lock(&g->lock);
  if (size > g->budget - g->bytes_held) {
    uint64_t held = g->bytes_held;
    pthread_mutex_unlock(&g->lock);
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s page_alloc: %llu bytes requested, %llu of "
                            "the device's budget of %llu bytes held "
                            "(hippo_device_desc.capacity)",
                            g->rt->name, (unsigned long long)size,
                            (unsigned long long)held,
                            (unsigned long long)g->budget);
  }
  /* room for the record first, beyond those promised to the calls of
   * other threads in flight: a page is never taken without one */
  if (g->npages + g->pages_coming == g->cap_pages) {
    size_t cap = g->cap_pages ? g->cap_pages * 2 : 64;
    gpu_page *grown = realloc(g->pages, cap * sizeof *grown);
    if (!grown) {
      pthread_mutex_unlock(&g->lock);
      return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                              "%s page_alloc: host memory for %zu page "
                              "records",
                              g->rt->name, cap);
    }
    g->pages = grown;
    g->cap_pages = cap;
  }
  g->bytes_held += size; /* reserved while the runtime allocates */
  g->pages_coming++;
  pthread_mutex_unlock(&g->lock);
  st = hippo__hip_enter(g, "page_alloc", &sc);
  if (st == HIPPO_SUCCESS) {
    relaxed_scope rs;
    relax(g, &rs);
    err = g->rt->malloc_(&p, (size_t)size);
    unrelax(g, &rs);
    if (err == HIPPO__GPU_OUT_OF_MEMORY)
      handled(g->rt); /* the caller frees cached pages and retries */
    st = RT(g, err, "Malloc",
            err == HIPPO__GPU_OUT_OF_MEMORY
                ? "release or clean up device memory"
                : NULL);
    if (st == HIPPO_SUCCESS && !p)
      st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s Malloc of %llu bytes returned NULL",
                            g->rt->name, (unsigned long long)size);
    st = leave(g, &sc, st);
  }
  pthread_mutex_lock(&g->lock);
  g->pages_coming--;
  if (st != HIPPO_SUCCESS) {
    g->bytes_held -= size;
    pthread_mutex_unlock(&g->lock);
    return hippo__error_wrap(st, "%s page_alloc of %llu bytes", g->rt->name,
                             (unsigned long long)size);
  }
  page_record(g, (uint64_t)(uintptr_t)p, size);
  if (g->bytes_held > g->peak_bytes_held)
    g->peak_bytes_held = g->bytes_held;
  pthread_mutex_unlock(&g->lock);
  *addr = (uint64_t)(uintptr_t)p;
  return HIPPO_SUCCESS;
}

hippo_status hippo__hip_page_free(hippo__backend *be, uint64_t addr,
                                  uint64_t size) {
  gpu_backend *g = gpu_of(be);
  dev_scope sc;
  hippo_status st;
  size_t i;
  int err;

  if ((st = hippo__hip_call(g, HIPPO_CALL_FREE)) != HIPPO_SUCCESS)
    return st;
  pthread_mutex_lock(&g->lock);
  i = page_at(g, addr);
  if (i == g->npages || g->pages[i].addr != addr || g->pages[i].size != size) {
    pthread_mutex_unlock(&g->lock);
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s page_free: %#llx (%llu bytes) is not a page "
                            "of this device",
                            g->rt->name, (unsigned long long)addr,
                            (unsigned long long)size);
  }
  /* The record leaves before the runtime frees the page: once freed, its
   * address may come back from another thread's page_alloc, whose record
   * must not meet this one.  Its place stays promised (pages_coming), so
   * a refused free puts it back without growing the registry. */
  memmove(&g->pages[i], &g->pages[i + 1],
          (g->npages - i - 1) * sizeof *g->pages);
  g->npages--;
  g->pages_coming++;
  pthread_mutex_unlock(&g->lock);
  st = hippo__hip_enter(g, "page_free", &sc);
  if (st == HIPPO_SUCCESS)
    st = leave(g, &sc,
               RT(g, g->rt->free_((void *)(uintptr_t)addr), "Free", NULL));
  pthread_mutex_lock(&g->lock);
  g->pages_coming--;
  if (st == HIPPO_SUCCESS) {
    g->bytes_held -= size;
  } else { /* still held: back in the registry */
    page_record(g, addr, size);
  }
  pthread_mutex_unlock(&g->lock);
  return st;
}

/* [addr, addr+size) inside one page hippo holds, or one mapped run of
 * granules (`what`: the argument). */
hippo_status hippo__hip_inside(gpu_backend *g, uint64_t addr, uint64_t size,
                               const char *call, const char *what) {
  uint64_t page[2];
  bool found;
  size_t i;
  pthread_mutex_lock(&g->lock);
  i = page_at(g, addr);
  found = i < g->npages && g->pages[i].addr <= addr;
  if (found) {
    page[0] = g->pages[i].addr;
    page[1] = g->pages[i].size;
  } else {
    found = hippo__hip_vm_run_holding(g, addr, page);
  }
  pthread_mutex_unlock(&g->lock);
  return hippo__range_check(g->rt->name, call, what, addr, size,
                            found ? page : NULL);
}

hippo_status hippo__hip_mem_info(hippo__backend *be, uint64_t *free_bytes,
                                 uint64_t *total_bytes) {
  gpu_backend *g = gpu_of(be);
  dev_scope sc;
  size_t fr = 0, tot = 0;
  hippo_status st;
  int err;

  if ((st = hippo__hip_enter(g, "mem_info", &sc)) != HIPPO_SUCCESS)
    return st;
  st = leave(g, &sc, RT(g, g->rt->mem_info(&fr, &tot), "MemGetInfo", NULL));
  if (st != HIPPO_SUCCESS)
    return st;
  if (g->budget) { /* the budget, and what of it the device still has */
    uint64_t left;
    pthread_mutex_lock(&g->lock);
    left = g->budget - g->bytes_held;
    pthread_mutex_unlock(&g->lock);
    tot = g->budget < tot ? g->budget : tot;
    fr = left < fr ? left : fr;
  }
  if (free_bytes)
    *free_bytes = fr;
  if (total_bytes)
    *total_bytes = tot;
  return HIPPO_SUCCESS;
}
