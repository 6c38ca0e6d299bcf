/* backend_dry.c -- DRY: a device with no memory at all.
 *
 * For measuring a workload's footprint without the bytes: pages get
 * synthetic addresses that are never dereferenced, copies are counted but
 * not performed, emu_read/emu_write are refused, and capacity, streams,
 * events, captures, fault injection, counters and virtual ranges (with
 * no memory behind their granules) behave as on HOST (all of it
 * backend_emu.c, backend_emu_pages.c, backend_emu_streams.c and
 * backend_emu_vm.c).  Addresses come from a bump pointer starting at 1 TiB
 * and are never reused within a device, so a stale address can never name a
 * newer page.
 */
#include <config.h>

#include "backend_emu.h"

/* Where a DRY device's synthetic addresses start. */
#define DRY_BASE_ADDRESS (UINT64_C(1) << 40)
/* Synthetic pages are aligned at least like an OS page. */
#define DRY_MIN_PAGE_ALIGN UINT64_C(4096)

/* page_map: the next synthetic address, aligned to max(alignment, 4096),
 * above every page this device ever held (emu->addr_end), so addresses are
 * handed out in increasing order and never reused. */
static hippo_status dry_page_map(hippo__emu *emu, uint64_t size,
                                 hippo__emu_page *page) {
  uint64_t align = emu->base.alignment > DRY_MIN_PAGE_ALIGN
                       ? emu->base.alignment
                       : DRY_MIN_PAGE_ALIGN;
  uint64_t next =
      emu->addr_end > DRY_BASE_ADDRESS ? emu->addr_end : DRY_BASE_ADDRESS;
  uint64_t start;

  if (!hippo__align_up(next, align, &start) || start > UINT64_MAX - size)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "DRY page_alloc: the synthetic address space is "
                            "used up (addresses are never reused); open a new "
                            "device");
  page->addr = start;
  page->size = size;
  page->mapped = 0;
  page->map = NULL;
  return HIPPO_SUCCESS;
}

static const hippo__emu_class dry_class = {
    .kind = HIPPO_BACKEND_DRY,
    .name = "DRY",
    .has_bytes = false,
    .object_size = sizeof(hippo__emu),
    .page_map = dry_page_map,
    .page_unmap = NULL, /* a DRY page holds no memory */
    /* virtual ranges: synthetic addresses, no memory (backend_emu_vm.c) */
    .vm_granularity = DRY_MIN_PAGE_ALIGN,
};

hippo_status hippo__backend_dry_create(uint64_t capacity, uint64_t alignment,
                                       hippo__backend **out) {
  return hippo__emu_create(&dry_class, capacity, alignment, out);
}
