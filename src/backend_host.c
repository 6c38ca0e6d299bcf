/* backend_host.c -- HOST: an emulated device whose memory is host RAM.
 *
 * The default device when no GPU is present, and the device tests run on.
 * Each page is its own anonymous mapping (MAP_NORESERVE: untouched bytes cost
 * no RAM), so a freed page goes back to the OS at once and a use after free
 * faults.  A page's device address is the host address of its mapping.
 * All the rest -- the function table, capacity (emulated: bytes held never
 * exceed it), streams, events, captures, fault injection, counters,
 * emu_read/emu_write -- comes from backend_emu.c; copies are deferred until
 * the stream is synchronized, so a missing synchronization shows up as wrong
 * data.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend_emu.h"

/* The HOST backend.  Invariant: every registry page is a live mapping of
 * `mapped` bytes at `map` == addr, with mapped == size rounded up to
 * os_page. */
typedef struct host_backend {
  hippo__emu emu;   /* must stay first */
  uint64_t os_page; /* the OS page size, a power of two */
} host_backend;

static host_backend *host_of(hippo__backend *be) { return (host_backend *)be; }

/* Maps `len` bytes (a multiple of os_page) aligned to `align`: over-maps by
 * align - os_page and trims the ends.  NULL on failure, errno set. */
static void *map_aligned(uint64_t len, uint64_t align, uint64_t os_page) {
  const int prot = PROT_READ | PROT_WRITE;
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  uint64_t extra = align > os_page ? align - os_page : 0;
  uintptr_t base, start;
  void *m;

  if (len > SIZE_MAX - extra) {
    errno = ENOMEM;
    return NULL;
  }
  m = mmap(NULL, (size_t)(len + extra), prot, flags, -1, 0);
  if (m == MAP_FAILED)
    return NULL;
  if (extra == 0)
    return m;
  base = (uintptr_t)m;
  start = (base + (uintptr_t)(align - 1)) & ~(uintptr_t)(align - 1);
  if (start > base)
    munmap(m, start - base);
  if (base + extra > start)
    munmap((void *)(start + (uintptr_t)len), base + extra - start);
  return (void *)start;
}

/* page_map: its own mapping, len = size rounded up to os_page. */
static hippo_status host_page_map(hippo__emu *emu, uint64_t size,
                                  hippo__emu_page *page) {
  host_backend *h = (host_backend *)emu;
  uint64_t len;
  void *m;

  if (!hippo__align_up(size, h->os_page, &len))
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "HOST page_alloc: %llu bytes cannot be mapped",
                            (unsigned long long)size);
  m = map_aligned(len, emu->base.alignment, h->os_page);
  if (!m) {
    int err = errno;
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "HOST page_alloc: mmap of %llu bytes failed: %s; "
                            "the host is out of address space or memory",
                            (unsigned long long)len, strerror(err));
  }
  page->addr = (uint64_t)(uintptr_t)m;
  page->size = size;
  page->mapped = len;
  page->map = m;
  return HIPPO_SUCCESS;
}

static int host_page_unmap(const hippo__emu_page *page) {
  return munmap(page->map, (size_t)page->mapped) != 0 ? errno : 0;
}

static const hippo__emu_class host_class = {
    .kind = HIPPO_BACKEND_HOST,
    .name = "HOST",
    .has_bytes = true,
    .object_size = sizeof(host_backend),
    .page_map = host_page_map,
    .page_unmap = host_page_unmap,
};

hippo_status hippo__backend_host_create(uint64_t capacity, uint64_t alignment,
                                        hippo__backend **out) {
  long os_page = sysconf(_SC_PAGESIZE);
  hippo_status st;

  if (out && (os_page <= 0 || !hippo__is_pow2((uint64_t)os_page)))
    return hippo__error_set(HIPPO_BACKEND_ERROR,
                            "HOST device: sysconf(_SC_PAGESIZE) gave %ld",
                            os_page);
  st = hippo__emu_create(&host_class, capacity, alignment, out);
  if (st == HIPPO_SUCCESS)
    host_of(*out)->os_page = (uint64_t)os_page;
  return st;
}
