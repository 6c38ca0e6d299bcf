/* backend_host.c -- HOST: an emulated device whose memory is host RAM.
 *
 * The default device when no GPU is present, and the device tests run on.
 * Each page is its own anonymous mapping (MAP_NORESERVE: untouched bytes cost
 * no RAM), so a freed page goes back to the OS at once and a use after free
 * faults.  A page's device address is the host address of its mapping.
 * Capacity is emulated: bytes held never exceed it.  Streams, events,
 * captures, fault injection and counters come from backend_emu.c; copies
 * are deferred until the stream is synchronized, so a missing
 * synchronization shows up as wrong data.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
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

static hippo_status host_page_alloc(hippo__backend *be, uint64_t size,
                                    uint64_t *addr) {
  host_backend *h = host_of(be);
  hippo__emu *emu = &h->emu;
  hippo__emu_page page;
  hippo_status st;
  uint64_t len;
  void *m;

  pthread_mutex_lock(&emu->mutex);
  if ((st = hippo__emu_call(emu, HIPPO_CALL_ALLOC, "page_alloc")))
    goto out;
  if (!addr) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "HOST page_alloc: addr must not be NULL");
    goto out;
  }
  if ((st = hippo__emu_alloc_check(emu, size)))
    goto out;
  if (!hippo__align_up(size, h->os_page, &len)) {
    st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                          "HOST page_alloc: %llu bytes cannot be mapped",
                          (unsigned long long)size);
    goto out;
  }
  m = map_aligned(len, be->alignment, h->os_page);
  if (!m) {
    int err = errno;
    st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                          "HOST page_alloc: mmap of %llu bytes failed: %s; "
                          "the host is out of address space or memory",
                          (unsigned long long)len, strerror(err));
    goto out;
  }
  page.addr = (uint64_t)(uintptr_t)m;
  page.size = size;
  page.mapped = len;
  page.map = m;
  if ((st = hippo__emu_page_add(emu, &page))) {
    munmap(m, (size_t)len);
    goto out;
  }
  *addr = page.addr;
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

static hippo_status host_page_free(hippo__backend *be, uint64_t addr,
                                   uint64_t size) {
  hippo__emu *emu = &host_of(be)->emu;
  hippo_status st;
  size_t i = 0;

  pthread_mutex_lock(&emu->mutex);
  if ((st = hippo__emu_call(emu, HIPPO_CALL_FREE, "page_free")) ||
      (st = hippo__emu_page_take(emu, addr, size, "page_free", &i)))
    goto out;
  if (munmap(emu->pages[i].map, (size_t)emu->pages[i].mapped) != 0) {
    int err = errno;
    st = hippo__error_set(HIPPO_BACKEND_ERROR,
                          "HOST page_free: munmap of page 0x%llx failed: %s",
                          (unsigned long long)addr, strerror(err));
    goto out;
  }
  hippo__emu_page_remove(emu, i);
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

/* emu_read/emu_write peek at device bytes the way a debugger would: at once,
 * NOT ordered with any stream's queue.  A copy still queued has not happened
 * yet; synchronize the stream first to see its result. */
static hippo_status host_emu_read(hippo__backend *be, uint64_t addr,
                                  void *host, uint64_t size) {
  hippo__emu *emu = &host_of(be)->emu;
  hippo_status st = HIPPO_SUCCESS;

  if (!host && size > 0)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "HOST emu_read: host buffer must not be NULL");
  pthread_mutex_lock(&emu->mutex);
  if (size > 0 &&
      !(st = hippo__emu_range_check(emu, addr, size, "emu_read", "address")))
    memcpy(host, (const void *)(uintptr_t)addr, (size_t)size);
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

static hippo_status host_emu_write(hippo__backend *be, uint64_t addr,
                                   const void *host, uint64_t size) {
  hippo__emu *emu = &host_of(be)->emu;
  hippo_status st = HIPPO_SUCCESS;

  if (!host && size > 0)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "HOST emu_write: host buffer must not be NULL");
  pthread_mutex_lock(&emu->mutex);
  if (size > 0 &&
      !(st = hippo__emu_range_check(emu, addr, size, "emu_write", "address")))
    memcpy((void *)(uintptr_t)addr, host, (size_t)size);
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

static void host_destroy(hippo__backend *be) {
  host_backend *h = host_of(be);
  hippo__emu *emu = &h->emu;

  pthread_mutex_lock(&emu->mutex);
  hippo__emu_drain(emu);
  for (size_t i = 0; i < emu->page_count; i++)
    munmap(emu->pages[i].map, (size_t)emu->pages[i].mapped);
  emu->page_count = 0;
  pthread_mutex_unlock(&emu->mutex);
  hippo__emu_fini(emu);
  free(h);
}

static const hippo__backend_ops host_ops = {
    .page_alloc = host_page_alloc,
    .page_free = host_page_free,
    .copy = hippo__emu_copy,
    .stream_sync = hippo__emu_stream_sync,
    .event_record = hippo__emu_event_record,
    .event_query = hippo__emu_event_query,
    .event_destroy = hippo__emu_event_destroy,
    .capture_status = hippo__emu_capture_status,
    .mem_info = hippo__emu_mem_info,
    .destroy = host_destroy,
    .emu_stream_create = hippo__emu_stream_create,
    .emu_stream_destroy = hippo__emu_stream_destroy,
    .emu_capture_begin = hippo__emu_capture_begin,
    .emu_capture_end = hippo__emu_capture_end,
    .emu_inject_fault = hippo__emu_inject_fault,
    .emu_read = host_emu_read,
    .emu_write = host_emu_write,
    .emu_counters = hippo__emu_counters,
};

hippo_status hippo__backend_host_create(uint64_t capacity, uint64_t alignment,
                                        hippo__backend **out) {
  host_backend *h;
  long os_page = sysconf(_SC_PAGESIZE);
  hippo_status st;

  if (!out)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "HOST device: out must not be NULL");
  if (os_page <= 0 || !hippo__is_pow2((uint64_t)os_page))
    return hippo__error_set(HIPPO_BACKEND_ERROR,
                            "HOST device: sysconf(_SC_PAGESIZE) gave %ld",
                            os_page);
  h = calloc(1, sizeof *h);
  if (!h)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "HOST device: out of host memory");
  st = hippo__emu_init(&h->emu, &host_ops, HIPPO_BACKEND_HOST, "HOST", true,
                       capacity, alignment);
  if (st != HIPPO_SUCCESS) {
    free(h);
    return st;
  }
  h->os_page = (uint64_t)os_page;
  *out = &h->emu.base;
  return HIPPO_SUCCESS;
}
