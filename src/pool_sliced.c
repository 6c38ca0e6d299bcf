/* pool_sliced.c -- SLICED pools (kind HIPPO_POOL_SLICED): pages of one
 * size from the backend, carved into slices by the sliced core (sliced.c,
 * sliced_paths.h).  This file is the kind: its table of hooks (a page of
 * the page size when the index has no room; the good fit, find_free), its
 * reservation and release paths (the core's, inlined with that table) and
 * its operation table; everything else is the core's.
 *
 * Cap: max_pool_size (0 = none) allows floor(max_pool_size / page_size)
 * whole pages; a cap below the page size shrinks the page to the cap rounded
 * down to the alignment; a cap below the alignment leaves a page size of 0,
 * and every reservation fails with HIPPO_POOL_CAPACITY_EXCEEDED without
 * allocating anything.
 */
#include "sliced_paths.h"

/* A free slice for `bytes` when the index has none: a page of the page
 * size (a cap, or a refused page: nothing changes). */
static hippo_status sliced_new_room(sliced *p, uint64_t bytes, uint32_t *i) {
  return hippo__sliced_page_add(p, bytes, p->page_size, p->cur, i);
}

static const hippo__sliced_kind sliced_kind = {
    .name = "SLICED",
    .fit = HIPPO__FIT_GOOD,
    .new_room = sliced_new_room,
};

static hippo_status sliced_reserve(hippo__pool *pool, uint64_t size,
                                   hippo__slice_ref *out) {
  return hippo__sliced_reserve_kind(pool, size, out, &sliced_kind);
}

static bool sliced_release_named(hippo__pool *pool, uint32_t i, uint32_t gen,
                                 uint64_t *size) {
  return hippo__sliced_release_named_kind(pool, i, gen, size, &sliced_kind);
}

static const hippo__pool_ops sliced_ops = {
    HIPPO__SLICED_OPS, .reserve = sliced_reserve,
    .release_named = sliced_release_named};


hippo_status hippo__pool_sliced_create(hippo__backend *be,
                                       hippo__page_acct *acct,
                                       const hippo_pool_options *opt,
                                       hippo__pool **out) {
  sliced *p;
  uint64_t page_size = hippo__align_down(opt->page_size, be->alignment);
  uint64_t max_pages = UINT64_MAX;
  if ((page_size >> hippo__log2_floor(be->alignment)) > UINT32_MAX)
    return hippo__error_set(HIPPO_POOL_CONFIG,
                            "SLICED pool: page_size %llu is more than 2^32 "
                            "alignment units of %llu B",
                            (unsigned long long)page_size,
                            (unsigned long long)be->alignment);
  if (opt->max_pool_size) {
    if (opt->max_pool_size < page_size)
      page_size = hippo__align_down(opt->max_pool_size, be->alignment);
    max_pages = page_size ? opt->max_pool_size / page_size : 0;
  }
  /* It accepts up to max_slice_size even where the page shrank below it:
   * such a request fails with HIPPO_POOL_CAPACITY_EXCEEDED and spills. */
  p = hippo__sliced_new(be, acct, &sliced_ops, &sliced_kind, HIPPO_POOL_SLICED,
                        opt, page_size);
  if (!p)
    return HIPPO_OUT_OF_MEMORY;
  p->max_pages = max_pages;
  p->head.opt.page_size = page_size; /* in force: shrunk to a cap */
  *out = &p->head;
  return HIPPO_SUCCESS;
}
