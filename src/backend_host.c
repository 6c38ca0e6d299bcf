/* backend_host.c -- HOST: an emulated device whose memory is host RAM.
 *
 * The default device when no GPU is present, and the device tests run on.
 * Each page is its own anonymous mapping (MAP_NORESERVE: untouched bytes cost
 * no RAM), so a freed page goes back to the OS at once and a use after free
 * faults.  A page's device address is the host address of its mapping.
 * All the rest -- the function table, capacity (emulated: bytes held never
 * exceed it), streams, events, captures, fault injection, counters,
 * emu_read/emu_write -- comes from backend_emu.c, backend_emu_pages.c and
 * backend_emu_streams.c; copies are deferred until the stream is
 * synchronized, so a missing synchronization shows up as wrong data.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
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

/* Maps `len` bytes (a multiple of os_page) aligned to `align`, with
 * `prot`: over-maps by align - os_page and trims the ends.  NULL on
 * failure, errno set. */
static void *map_aligned(uint64_t len, uint64_t align, uint64_t os_page,
                         int prot) {
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
  m = map_aligned(len, emu->base.alignment, h->os_page,
                  PROT_READ | PROT_WRITE);
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

/* ---- virtual ranges (backend_emu_vm.c) ---------------------------------
 * A range is address space mapped PROT_NONE (MAP_NORESERVE: it costs no
 * memory), with a memfd as long as the range behind it: a granule is
 * backed by mapping its stretch of the file MAP_SHARED|MAP_FIXED over the
 * range, and given back by a PROT_NONE mapping over it and a hole punched
 * in the file, so the memory really returns to the host (the file's
 * allocated blocks follow the mapped granules).  Adjacent mapped granules
 * merge into one kernel mapping, so a range costs about twice its mapped
 * runs of vm.max_map_count (65,530 by default); past it mmap fails with
 * ENOMEM and vm_map answers HIPPO_OUT_OF_MEMORY naming the limit. */

static hippo_status host_range_reserve(hippo__emu *emu, uint64_t align,
                                       hippo__emu_range *r) {
  host_backend *h = (host_backend *)emu;
  int fd = memfd_create("hippo-range", MFD_CLOEXEC);
  void *m;
  if (fd < 0)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "HOST vm_reserve: memfd_create failed: %s",
                            strerror(errno));
  if (ftruncate(fd, (off_t)r->size) != 0) {
    int err = errno;
    close(fd);
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "HOST vm_reserve: a memfd of %llu B: %s",
                            (unsigned long long)r->size, strerror(err));
  }
  m = map_aligned(r->size, align, h->os_page, PROT_NONE);
  if (!m) {
    int err = errno;
    close(fd);
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "HOST vm_reserve: %llu B of address space: %s",
                            (unsigned long long)r->size, strerror(err));
  }
  r->addr = (uint64_t)(uintptr_t)m;
  r->fd = fd;
  return HIPPO_SUCCESS;
}

static int host_range_release(hippo__emu_range *r) {
  if (munmap((void *)(uintptr_t)r->addr, (size_t)r->size) != 0)
    return errno;
  close(r->fd);
  r->fd = -1;
  return 0;
}

static int host_range_back(hippo__emu_range *r, uint64_t addr, uint64_t len) {
  void *m = mmap((void *)(uintptr_t)addr, (size_t)len,
                 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, r->fd,
                 (off_t)(addr - r->addr));
  return m == MAP_FAILED ? errno : 0;
}

/* The PROT_NONE cover splits the granule off its mapping; past
 * vm.max_map_count the kernel refuses the split (ENOMEM: 160,000 granules
 * of 4 KiB mapped as one run, every other one given back, cross the
 * default 65,530).  Then the granule keeps its mapping and only the hole
 * is punched: its memory still returns to the host, and the emulated
 * device refuses every copy and emu access to it as unmapped all the
 * same (backend_emu_vm.c keeps the mapped runs).  So giving back never
 * fails for want of kernel mappings, and a stream can always be detached
 * (issue 38).  A later map of it that the kernel refuses answers
 * HIPPO_OUT_OF_MEMORY naming the limit. */
static int host_range_drop(hippo__emu_range *r, uint64_t addr, uint64_t len) {
  void *m = mmap((void *)(uintptr_t)addr, (size_t)len, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
                 0);
  if (m == MAP_FAILED && errno != ENOMEM)
    return errno;
  if (fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                (off_t)(addr - r->addr), (off_t)len) != 0)
    return errno;
  return 0;
}

static const hippo__emu_class host_class = {
    .kind = HIPPO_BACKEND_HOST,
    .name = "HOST",
    .has_bytes = true,
    .object_size = sizeof(host_backend),
    .page_map = host_page_map,
    .page_unmap = host_page_unmap,
    .vm_granularity = 4096,
    .range_reserve = host_range_reserve,
    .range_release = host_range_release,
    .range_back = host_range_back,
    .range_drop = host_range_drop,
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
  if (st == HIPPO_SUCCESS) {
    host_of(*out)->os_page = (uint64_t)os_page;
    if ((uint64_t)os_page > host_of(*out)->emu.vm_granularity)
      host_of(*out)->emu.vm_granularity = (uint64_t)os_page;
  }
  return st;
}
