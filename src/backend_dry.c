/* backend_dry.c -- DRY: a device with no memory at all.
 *
 * For measuring a workload's footprint without the bytes: pages get
 * synthetic addresses that are never dereferenced, copies are counted but
 * not performed, and capacity, streams, events, captures, fault injection
 * and counters behave as on HOST (backend_emu.c).  Addresses come from a
 * bump pointer starting at 1 TiB and are never reused within a device, so a
 * stale address can never name a newer page.
 */
#include <config.h>

#include <stdlib.h>

#include "backend_emu.h"

/* Where a DRY device's synthetic addresses start. */
#define DRY_BASE_ADDRESS (UINT64_C(1) << 40)
/* Synthetic pages are aligned at least like an OS page. */
#define DRY_MIN_PAGE_ALIGN UINT64_C(4096)

/* The DRY backend.  Invariant: every registry page lies below `next`
 * (addresses are handed out in increasing order and never reused); page
 * addresses are aligned to page_align = max(alignment, 4096). */
typedef struct dry_backend {
  hippo__emu emu;      /* must stay first */
  uint64_t next;       /* the lowest address never handed out */
  uint64_t page_align; /* alignment of page addresses */
} dry_backend;

static dry_backend *dry_of(hippo__backend *be) { return (dry_backend *)be; }

static hippo_status dry_page_alloc(hippo__backend *be, uint64_t size,
                                   uint64_t *addr) {
  dry_backend *d = dry_of(be);
  hippo__emu *emu = &d->emu;
  hippo__emu_page page;
  hippo_status st;
  uint64_t start;

  pthread_mutex_lock(&emu->mutex);
  if ((st = hippo__emu_call(emu, HIPPO_CALL_ALLOC, "page_alloc")))
    goto out;
  if (!addr) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "DRY page_alloc: addr must not be NULL");
    goto out;
  }
  if ((st = hippo__emu_alloc_check(emu, size)))
    goto out;
  if (!hippo__align_up(d->next, d->page_align, &start) ||
      start > UINT64_MAX - size) {
    st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                          "DRY page_alloc: the synthetic address space is "
                          "used up (addresses are never reused); open a new "
                          "device");
    goto out;
  }
  page.addr = start;
  page.size = size;
  page.mapped = 0;
  page.map = NULL;
  if ((st = hippo__emu_page_add(emu, &page)))
    goto out;
  d->next = start + size;
  *addr = start;
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

static hippo_status dry_page_free(hippo__backend *be, uint64_t addr,
                                  uint64_t size) {
  hippo__emu *emu = &dry_of(be)->emu;
  hippo_status st;
  size_t i = 0;

  pthread_mutex_lock(&emu->mutex);
  if (!(st = hippo__emu_call(emu, HIPPO_CALL_FREE, "page_free")) &&
      !(st = hippo__emu_page_take(emu, addr, size, "page_free", &i)))
    hippo__emu_page_remove(emu, i);
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

static hippo_status dry_emu_read(hippo__backend *be, uint64_t addr,
                                 void *host, uint64_t size) {
  (void)be;
  (void)host;
  return hippo__error_set(HIPPO_UNSUPPORTED,
                          "DRY emu_read of %llu bytes at 0x%llx: a DRY device "
                          "has no bytes; use a HOST device to see data",
                          (unsigned long long)size, (unsigned long long)addr);
}

static hippo_status dry_emu_write(hippo__backend *be, uint64_t addr,
                                  const void *host, uint64_t size) {
  (void)be;
  (void)host;
  return hippo__error_set(HIPPO_UNSUPPORTED,
                          "DRY emu_write of %llu bytes at 0x%llx: a DRY "
                          "device has no bytes; use a HOST device to see data",
                          (unsigned long long)size, (unsigned long long)addr);
}

static void dry_destroy(hippo__backend *be) {
  dry_backend *d = dry_of(be);
  hippo__emu_fini(&d->emu);
  free(d);
}

static const hippo__backend_ops dry_ops = {
    .page_alloc = dry_page_alloc,
    .page_free = dry_page_free,
    .copy = hippo__emu_copy,
    .stream_sync = hippo__emu_stream_sync,
    .event_record = hippo__emu_event_record,
    .event_query = hippo__emu_event_query,
    .event_destroy = hippo__emu_event_destroy,
    .capture_status = hippo__emu_capture_status,
    .mem_info = hippo__emu_mem_info,
    .destroy = dry_destroy,
    .emu_stream_create = hippo__emu_stream_create,
    .emu_stream_destroy = hippo__emu_stream_destroy,
    .emu_capture_begin = hippo__emu_capture_begin,
    .emu_capture_end = hippo__emu_capture_end,
    .emu_inject_fault = hippo__emu_inject_fault,
    .emu_read = dry_emu_read,
    .emu_write = dry_emu_write,
    .emu_counters = hippo__emu_counters,
};

hippo_status hippo__backend_dry_create(uint64_t capacity, uint64_t alignment,
                                       hippo__backend **out) {
  dry_backend *d;
  hippo_status st;

  if (!out)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "DRY device: out must not be NULL");
  d = calloc(1, sizeof *d);
  if (!d)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "DRY device: out of host memory");
  st = hippo__emu_init(&d->emu, &dry_ops, HIPPO_BACKEND_DRY, "DRY", false,
                       capacity, alignment);
  if (st != HIPPO_SUCCESS) {
    free(d);
    return st;
  }
  d->next = DRY_BASE_ADDRESS;
  d->page_align = d->emu.base.alignment > DRY_MIN_PAGE_ALIGN
                      ? d->emu.base.alignment
                      : DRY_MIN_PAGE_ALIGN;
  *out = &d->emu.base;
  return HIPPO_SUCCESS;
}
