/* pool.c -- what every pool kind shares: the common head, page accounting
 * against the device's figures, leaving pages, report heads. */
#include <stdlib.h>
#include <string.h>

#include "pool.h"

void hippo__pool_head_init(hippo__pool *pool, const hippo__pool_ops *ops,
                           hippo__backend *be, hippo__page_acct *acct,
                           hippo_pool_kind kind,
                           const hippo_pool_options *opt, uint64_t max_size) {
  memset(pool, 0, sizeof *pool);
  pool->ops = ops;
  pool->be = be;
  pool->acct = acct;
  pool->kind = kind;
  if (opt)
    pool->opt = *opt;
  pool->opt.struct_size = sizeof pool->opt;
  pool->opt.kind = kind;
  pool->max_size = max_size;
  pool->due = UINT64_MAX;
  pool->alignment = be->alignment;
  pool->align_shift = hippo__log2_floor(be->alignment);
}

static void acct_add_pages(hippo__page_acct *acct, uint64_t size,
                           uint64_t pages) {
  for (; acct; acct = acct->parent) {
    uint64_t now, peak;
    atomic_fetch_add(&acct->pages, pages);
    now = atomic_fetch_add(&acct->bytes_reserved, size) + size;
    peak = atomic_load(&acct->peak_bytes_reserved);
    while (now > peak && !atomic_compare_exchange_weak(
                             &acct->peak_bytes_reserved, &peak, now))
      ;
  }
}

static void acct_sub_pages(hippo__page_acct *acct, uint64_t size,
                           uint64_t pages) {
  for (; acct; acct = acct->parent) {
    atomic_fetch_sub(&acct->pages, pages);
    atomic_fetch_sub(&acct->bytes_reserved, size);
  }
}

static void acct_sub(hippo__page_acct *acct, uint64_t size) {
  acct_sub_pages(acct, size, 1);
}

/* The pool's head took (or gave back) `pages` pages of `size` bytes in
 * all. */
static void head_add(hippo__pool *pool, uint64_t size, uint64_t pages) {
  pool->pages += pages;
  if (pool->pages > pool->peak_pages)
    pool->peak_pages = pool->pages;
  pool->bytes_reserved += size;
  if (pool->bytes_reserved > pool->peak_bytes_reserved)
    pool->peak_bytes_reserved = pool->bytes_reserved;
  acct_add_pages(pool->acct, size, pages);
}

/* The lazy message of a page or granule a capturing stream may not take. */
static hippo_status needs_page(uint64_t size) {
  uint64_t args[] = {size};
  return hippo__error_lazy(
      HIPPO_GRAPH_NEEDS_PAGE,
      "the stream captures a graph and would need a new page of %llu B; "
      "a driver allocation inside a capture is illegal: reserve this "
      "memory before the capture (a warm-up run), or release some",
      args, 1);
}

hippo_status hippo__pool_page_alloc(hippo__pool *pool, uint64_t size,
                                    uint64_t *addr) {
  hippo_status st;
  if (HIPPO__UNLIKELY(pool->gate && pool->gate->no_pages))
    return needs_page(size);
  st = pool->be->ops->page_alloc(pool->be, size, addr);
  if (st != HIPPO_SUCCESS) {
    if (st == HIPPO_OUT_OF_MEMORY && pool->acct)
      pool->acct->refused = size;
    return st;
  }
  head_add(pool, size, 1);
  return HIPPO_SUCCESS;
}

hippo_status hippo__pool_vm_reserve(hippo__pool *pool, uint64_t size,
                                    uint64_t granule, uint64_t *addr) {
  if (HIPPO__UNLIKELY(pool->gate && pool->gate->no_pages &&
                      !pool->be->vm_captures)) {
    uint64_t args[] = {size};
    return hippo__error_lazy(
        HIPPO_GRAPH_NEEDS_PAGE,
        "the stream captures a graph and its VIRTUAL pool has no range yet "
        "(%llu B of address space, reserved by a driver call at the pool's "
        "first reservation): reserve this memory before the capture (a "
        "warm-up run)",
        args, 1);
  }
  return pool->be->ops->vm_reserve(pool->be, size, granule, addr);
}

hippo_status hippo__pool_vm_map(hippo__pool *pool, uint64_t addr,
                                uint64_t size, uint64_t alloc,
                                uint64_t unit) {
  hippo_status st;
  if (HIPPO__UNLIKELY(pool->gate && pool->gate->no_pages &&
                      !pool->be->vm_captures))
    return needs_page(size);
  st = pool->be->ops->vm_map(pool->be, addr, size, alloc);
  if (st != HIPPO_SUCCESS) {
    if (st == HIPPO_OUT_OF_MEMORY && pool->acct)
      pool->acct->refused = size;
    return st;
  }
  head_add(pool, size, size / unit);
  return HIPPO_SUCCESS;
}

hippo_status hippo__pool_vm_unmap(hippo__pool *pool, uint64_t addr,
                                  uint64_t size, uint64_t alloc,
                                  uint64_t unit, bool wait, uint64_t *done) {
  uint64_t gone = 0;
  hippo_status st =
      pool->be->ops->vm_unmap(pool->be, addr, size, alloc, wait, &gone);
  if (gone > size) /* a backend that says more than it was asked */
    gone = size;
  gone -= gone % alloc;
  pool->pages -= gone / unit;
  pool->bytes_reserved -= gone;
  acct_sub_pages(pool->acct, gone, gone / unit);
  *done = gone;
  return st;
}

bool hippo__pool_stream_wait(hippo__pool *pool) {
  hippo__free_gate *g = pool->gate;
  return g && g->own_waits &&
         pool->be->ops->stream_sync(pool->be, g->native) == HIPPO_SUCCESS;
}

void hippo__pool_unaccount(hippo__page_acct *acct, uint64_t size) {
  acct_sub(acct, size);
}

/* Room for one more leaving page (host memory); false: free it now. */
static bool leaving_room(hippo__leaving *l) {
  if (l->count < l->cap)
    return true;
  {
    uint32_t cap = l->cap ? l->cap * 2 : 16;
    hippo__leaving_page *grown = realloc(l->pages, cap * sizeof *grown);
    if (!grown)
      return false;
    l->pages = grown;
    l->cap = cap;
  }
  return true;
}

hippo_status hippo__pool_page_free(hippo__pool *pool, uint64_t addr,
                                   uint64_t size) {
  hippo_status st;
  hippo__free_gate *g = pool->gate;
  if (g && g->defer && g->leaving && leaving_room(g->leaving)) {
    hippo__leaving *l = g->leaving;
    l->pages[l->count++] = (hippo__leaving_page){
        .addr = addr, .size = size, .state = HIPPO__LEAVING_PENDING};
    l->pending++;
    pool->pages--;
    pool->bytes_reserved -= size; /* the stream keeps it accounted */
    return HIPPO_SUCCESS;
  }
  st = pool->be->ops->page_free(pool->be, addr, size);
  if (st != HIPPO_SUCCESS)
    return st;
  pool->pages--;
  pool->bytes_reserved -= size;
  acct_sub(pool->acct, size);
  return HIPPO_SUCCESS;
}

void hippo__pool_report_head(const hippo__pool *pool, hippo_pool_report *out) {
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->kind = pool->kind;
  out->pages = pool->pages;
  out->peak_pages = pool->peak_pages;
  out->allocations = pool->allocations;
  out->bytes_in_use = pool->bytes_in_use;
  out->bytes_padding = pool->bytes_padding;
  out->bytes_reserved = pool->bytes_reserved;
  out->largest_allocation = pool->largest_allocation;
  out->bytes_free = hippo__pool_bytes_free(pool);
  out->bytes_guarded = pool->bytes_guarded;
  out->bytes_waiting = pool->bytes_waiting;
  out->bytes_stranded = pool->bytes_stranded;
  out->peak_bytes_reserved = pool->peak_bytes_reserved;
  out->bytes_idle = pool->bytes_idle;
  out->bytes_virtual = pool->bytes_virtual;
}
