/* backend_emu_pages.c -- the page registry of the emulated devices
 * (hippo__emu.pages, sorted by address) and the ops on pages
 * (backend.h page_alloc, page_free, emu_read, emu_write).
 *
 * A page is added only under the capacity rule (bytes_held never exceeds
 * the emulated capacity); a page is freed only once no queued copy
 * touches it (the queues run first); an address a copy or emu_read/
 * emu_write is given must lie inside one live page or one mapped run of
 * a virtual range (hippo__emu_range_check).  Every op here takes the
 * backend's mutex; helpers documented "locked" expect the caller to hold
 * it, and so do the class hooks (page_map, page_unmap).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend_emu.h"

static hippo__emu *emu_of(hippo__backend *be) { return (hippo__emu *)be; }

/* ---- helpers (locked) -------------------------------------------------- */

/* The checks page_alloc makes before taking memory: size > 0, a multiple of
 * the alignment, room under the capacity.  Locked. */
static hippo_status alloc_check(hippo__emu *emu, uint64_t size) {
  uint64_t free_bytes = emu->capacity - emu->bytes_held;
  if (size == 0 || (size & (emu->base.alignment - 1)) != 0)
    return hippo__error_set(
        HIPPO_INVALID_ARGUMENT,
        "%s page_alloc: size %llu is not a positive multiple of the "
        "alignment %llu; round the page size up",
        emu->name, (unsigned long long)size,
        (unsigned long long)emu->base.alignment);
  if (size > free_bytes) { /* kept unformatted: a full device is common */
    uint64_t args[] = {size, free_bytes, emu->capacity};
    return hippo__error_lazy(
        HIPPO_OUT_OF_MEMORY,
        emu->cls->has_bytes
            ? "HOST page_alloc: %llu bytes requested, %llu of %llu bytes "
              "free (emulated capacity); release or clean up memory, or "
              "open the device with a larger capacity"
            : "DRY page_alloc: %llu bytes requested, %llu of %llu bytes "
              "free (emulated capacity); release or clean up memory, or "
              "open the device with a larger capacity",
        args, 3);
  }
  return HIPPO_SUCCESS;
}

/* Index of the last page with addr <= a, or -1.  Locked. */
static ptrdiff_t page_floor(const hippo__emu *emu, uint64_t a) {
  size_t lo = 0, hi = emu->page_count; /* answer in [lo, hi) + 1 */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (emu->pages[mid].addr <= a)
      lo = mid + 1;
    else
      hi = mid;
  }
  return (ptrdiff_t)lo - 1;
}

/* Adds a page to the registry and the counters (HIPPO_OUT_OF_MEMORY when
 * the registry cannot grow).  Locked. */
static hippo_status page_add(hippo__emu *emu, const hippo__emu_page *page) {
  size_t at;
  if (emu->page_count == emu->page_cap) {
    size_t cap = emu->page_cap ? emu->page_cap * 2 : 64;
    hippo__emu_page *grown = realloc(emu->pages, cap * sizeof *grown);
    if (!grown)
      return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                              "%s page_alloc: out of host memory for the page "
                              "registry (%zu pages)",
                              emu->name, emu->page_count);
    emu->pages = grown;
    emu->page_cap = cap;
  }
  at = (size_t)(page_floor(emu, page->addr) + 1);
  memmove(&emu->pages[at + 1], &emu->pages[at],
          (emu->page_count - at) * sizeof *emu->pages);
  emu->pages[at] = *page;
  emu->page_count++;
  emu->bytes_held += page->size;
  if (emu->bytes_held > emu->peak_bytes_held)
    emu->peak_bytes_held = emu->bytes_held;
  emu->host_bytes_mapped += page->mapped;
  if (page->addr + page->size > emu->addr_end)
    emu->addr_end = page->addr + page->size;
  return HIPPO_SUCCESS;
}

/* The page starting exactly at addr with exactly size bytes, after running
 * every queue if one touches it; HIPPO_INVALID_ARGUMENT otherwise.  The
 * caller then frees its memory and calls page_remove.  Locked. */
static hippo_status page_take(hippo__emu *emu, uint64_t addr, uint64_t size,
                              const char *call, size_t *index) {
  ptrdiff_t i = page_floor(emu, addr);
  if (i < 0 || emu->pages[i].addr != addr)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s %s: 0x%llx is not the start of a live page "
                            "(freed twice, or never allocated here)",
                            emu->name, call, (unsigned long long)addr);
  if (emu->pages[i].size != size)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s %s: page 0x%llx has %llu bytes, not the %llu "
                            "given; pass the size it was allocated with",
                            emu->name, call, (unsigned long long)addr,
                            (unsigned long long)emu->pages[i].size,
                            (unsigned long long)size);
  /* A real driver orders the free after the work using the page. */
  if (hippo__emu_queued_on(emu, addr, size))
    hippo__emu_drain(emu);
  *index = (size_t)i;
  return HIPPO_SUCCESS;
}

static void page_remove(hippo__emu *emu, size_t index) {
  const hippo__emu_page *p = &emu->pages[index];
  emu->bytes_held -= p->size;
  emu->host_bytes_mapped -= p->mapped;
  memmove(&emu->pages[index], &emu->pages[index + 1],
          (emu->page_count - index - 1) * sizeof *emu->pages);
  emu->page_count--;
}

hippo_status hippo__range_check(const char *backend, const char *call,
                                const char *what, uint64_t addr,
                                uint64_t size, const uint64_t *page) {
  if (addr > UINT64_MAX - size)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s %s: %s 0x%llx + %llu bytes wraps around the "
                            "address space",
                            backend, call, what, (unsigned long long)addr,
                            (unsigned long long)size);
  if (!page || addr < page[0] || addr - page[0] >= page[1])
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s %s: %s 0x%llx is not inside a live page of "
                            "this device (freed, or never allocated here)",
                            backend, call, what, (unsigned long long)addr);
  if (addr + size > page[0] + page[1])
    return hippo__error_set(
        HIPPO_INVALID_ARGUMENT,
        "%s %s: %s [0x%llx, +%llu) runs %llu bytes past the end of its page "
        "[0x%llx, +%llu); a range must lie inside one page",
        backend, call, what, (unsigned long long)addr,
        (unsigned long long)size,
        (unsigned long long)(addr + size - (page[0] + page[1])),
        (unsigned long long)page[0], (unsigned long long)page[1]);
  return HIPPO_SUCCESS;
}

/* HIPPO_INVALID_ARGUMENT unless [addr, addr+size) lies inside one live
 * page.  `what` names the argument in last_error.  Locked. */
hippo_status hippo__emu_range_check(const hippo__emu *emu, uint64_t addr,
                                    uint64_t size, const char *call,
                                    const char *what) {
  ptrdiff_t i = page_floor(emu, addr);
  uint64_t page[2];
  if (i >= 0 && addr - emu->pages[i].addr < emu->pages[i].size) {
    page[0] = emu->pages[i].addr;
    page[1] = emu->pages[i].size;
  } else if (hippo__emu_vm_holds(emu, addr, size, page)) {
    i = 0; /* a mapped run of a virtual range holds it */
  } else if (i >= 0) {
    page[0] = emu->pages[i].addr;
    page[1] = emu->pages[i].size;
  }
  return hippo__range_check(emu->name, call, what, addr, size,
                            i >= 0 ? page : NULL);
}

/* ---- pages ------------------------------------------------------------- */

hippo_status hippo__emu_page_alloc(hippo__backend *be, uint64_t size,
                                   uint64_t *addr) {
  hippo__emu *emu = emu_of(be);
  hippo__emu_page page;
  hippo_status st;

  pthread_mutex_lock(&emu->mutex);
  if ((st = hippo__emu_call(emu, HIPPO_CALL_ALLOC, "page_alloc")))
    goto out;
  if (!addr) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s page_alloc: addr must not be NULL", emu->name);
    goto out;
  }
  if ((st = alloc_check(emu, size)) ||
      (st = emu->cls->page_map(emu, size, &page)))
    goto out;
  if ((st = page_add(emu, &page))) {
    if (emu->cls->page_unmap)
      (void)emu->cls->page_unmap(&page);
    goto out;
  }
  *addr = page.addr;
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

hippo_status hippo__emu_page_free(hippo__backend *be, uint64_t addr,
                                  uint64_t size) {
  hippo__emu *emu = emu_of(be);
  hippo_status st;
  size_t i = 0;
  int err;

  pthread_mutex_lock(&emu->mutex);
  if ((st = hippo__emu_call(emu, HIPPO_CALL_FREE, "page_free")) ||
      (st = page_take(emu, addr, size, "page_free", &i)))
    goto out;
  if (emu->cls->page_unmap &&
      (err = emu->cls->page_unmap(&emu->pages[i])) != 0) {
    st = hippo__error_set(HIPPO_BACKEND_ERROR,
                          "%s page_free: munmap of page 0x%llx failed: %s",
                          emu->name, (unsigned long long)addr, strerror(err));
    goto out;
  }
  page_remove(emu, i);
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

/* emu_read (into != NULL) and emu_write (from != NULL) peek at device bytes
 * the way a debugger would: at once, NOT ordered with any stream's queue.  A
 * copy still queued has not happened yet; synchronize the stream first to
 * see its result.  A device without bytes (DRY) refuses. */
static hippo_status emu_peek(hippo__backend *be, const char *call,
                             uint64_t addr, void *into, const void *from,
                             uint64_t size) {
  hippo__emu *emu = emu_of(be);
  hippo_status st = HIPPO_SUCCESS;

  if (!emu->cls->has_bytes)
    return hippo__error_set(HIPPO_UNSUPPORTED,
                            "%s %s of %llu bytes at 0x%llx: a %s device has "
                            "no bytes; use a HOST device to see data",
                            emu->name, call, (unsigned long long)size,
                            (unsigned long long)addr, emu->name);
  if (!into && !from && size > 0)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s %s: host buffer must not be NULL", emu->name,
                            call);
  pthread_mutex_lock(&emu->mutex);
  if (size > 0 &&
      !(st = hippo__emu_range_check(emu, addr, size, call, "address"))) {
    if (into)
      memcpy(into, (const void *)(uintptr_t)addr, (size_t)size);
    else
      memcpy((void *)(uintptr_t)addr, from, (size_t)size);
  }
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

hippo_status hippo__emu_emu_read(hippo__backend *be, uint64_t addr, void *host,
                                 uint64_t size) {
  return emu_peek(be, "emu_read", addr, host, NULL, size);
}

hippo_status hippo__emu_emu_write(hippo__backend *be, uint64_t addr,
                                  const void *host, uint64_t size) {
  return emu_peek(be, "emu_write", addr, NULL, host, size);
}
