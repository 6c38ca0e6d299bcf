/* pool_arena.c -- ARENA pools: how one grows (page sizes, outdated pages,
 * sparseness), its table of hooks for the sliced core (sliced.h), its
 * reservation and release paths (the core's, sliced_paths.h, inlined with
 * that table) and its operation table.  It relocates in
 * pool_arena_relocation.c.
 *
 * ARENA pools (kind HIPPO_POOL_ARENA) are SLICED pools whose page size
 * grows with the largest request served.  Options: page_size is the
 * smallest page (the floor), max_slice_size the largest request and the
 * largest page, max_pool_size a cap on the bytes of all pages (0: none).
 * The rules and their numbers:
 *  - A request fits the current page size when its aligned size does.
 *    A larger one grows the pool: the new page size is the aligned request
 *    + 1 MiB, rounded up to a whole MiB and to the alignment, clamped
 *    between the floor and max_slice_size (HIPPO__ARENA_SLACK,
 *    HIPPO__ARENA_ROUND).  The page size never shrinks.
 *  - Each page size lives in one of HIPPO__ARENA_SIZES (64) slots.  The
 *    slot of the newest size is current; the pages of every other slot are
 *    *outdated*.  A growth takes a slot that holds no page (or the current
 *    one, when it holds none); none free: HIPPO_PAGE_SIZES_EXHAUSTED, and
 *    the manager relocates (reason ARENA_FULL) and retries.  A growth
 *    takes effect only when the backend grants its first page; a refused
 *    page changes nothing (the page size stays).
 *  - An outdated page is *closed*: its free slices are out of the free
 *    index, so it serves no new reservation, and its live slices stay
 *    where they are.  Once empty it goes back to the backend at the next
 *    tick or cleanup (the drain list), without waiting for dealloc_period;
 *    its slot is free again when its last page went back.
 *  - Best fit: an ARENA looks at up to BEST_SCAN slices of the request's
 *    own class, then of the next non-empty class, and takes the smallest
 *    that fits, the lowest page among equals (so later pages stay emptier
 *    and can go back); a SLICED pool takes the first slice of the class
 *    above the request's, its fast path.
 *  - Sparse: when an ARENA takes a page (of the current size) although its
 *    free bytes could hold the request and its pages hold more than
 *    HIPPO__SPARSE_NUM / HIPPO__SPARSE_DEN (11/10) of the bytes its slices
 *    use (with the request), it notes that it is sparse: relocation_need
 *    then answers SPARSE, and a relocation for it moves the slices of the
 *    sparsest current pages (at most half full) into room other current
 *    pages hold, so those pages can go back.
 */
#include "pool_arena.h"
#include "sliced_paths.h"

#define HIPPO__ARENA_SLACK MiB         /* added to a request at a growth */
#define HIPPO__ARENA_ROUND MiB         /* a grown page is a multiple of it */
#define HIPPO__SPARSE_NUM 11u          /* sparse: pages > 11/10 of the */
#define HIPPO__SPARSE_DEN 10u          /*   bytes slices use, with the
                                          request */

/* ARENA: the page size a growth for `bytes` picks (see the top). */
static uint64_t grown_size(const sliced *p, uint64_t bytes) {
  uint64_t max = p->head.max_size, size;
  size = bytes + HIPPO__ARENA_SLACK;
  size = (size + HIPPO__ARENA_ROUND - 1) / HIPPO__ARENA_ROUND *
         HIPPO__ARENA_ROUND;
  size = (size + p->head.alignment - 1) & ~(p->head.alignment - 1);
  if (size > max)
    size = hippo__align_down(max, p->head.alignment);
  if (size < p->floor)
    size = p->floor;
  return size;
}

/* ARENA: a request of `bytes` above the current page size grows the pool
 * (see the top); *slice_out is the new page's free slice. */
static hippo_status grow(sliced *p, uint64_t bytes, uint32_t *slice_out) {
  uint64_t size = grown_size(p, bytes);
  uint32_t slot = p->cur, old = p->cur;
  hippo_status st;
  if (p->sizes[slot].pages) { /* the current size holds pages: a new slot */
    for (slot = 0; slot < HIPPO__ARENA_SIZES; slot++)
      if (slot != p->cur && p->sizes[slot].pages == 0)
        break;
    if (slot == HIPPO__ARENA_SIZES) {
      uint64_t args[] = {bytes, HIPPO__ARENA_SIZES, p->page_size};
      return hippo__error_lazy(
          HIPPO_PAGE_SIZES_EXHAUSTED,
          "ARENA pool: %llu B need a larger page, but all %llu page sizes "
          "hold live slices (current page %llu B); relocate or reclaim to "
          "empty outdated pages",
          args, 3);
    }
  }
  st = hippo__sliced_page_add(p, bytes, size, slot, slice_out);
  if (st != HIPPO_SUCCESS)
    return st; /* the page size stays */
  if (slot != old) {
    p->cur = slot;
    for (uint32_t pg = 0; pg < p->page_count; pg++)
      if (p->pages[pg].held && p->pages[pg].szslot == old)
        hippo__sliced_page_close(p, pg);
    if (p->sizes[old].pages == 0)
      p->sizes_alive--;
  }
  p->sizes[slot].size = size;
  p->page_size = size;
  return HIPPO_SUCCESS;
}

/* A free slice for `bytes` when the index has none: a page of the current
 * size (noting when the pool is sparse) or a growth. */
static hippo_status arena_new_room(sliced *p, uint64_t bytes, uint32_t *i) {
  uint64_t used = p->head.bytes_in_use + p->head.bytes_padding +
                  p->head.bytes_stranded;
  uint64_t reserved = p->head.bytes_reserved;
  hippo_status st;
  if (bytes > p->page_size)
    return grow(p, bytes, i);
  st = hippo__sliced_page_add(p, bytes, p->page_size, p->cur, i);
  if (st == HIPPO_SUCCESS && reserved - used >= bytes &&
      reserved / HIPPO__SPARSE_NUM > (used + bytes) / HIPPO__SPARSE_DEN)
    p->sparse = true;
  return st;
}

/* Best fit of a few (find_best); pages close (outdated, relocated). */
static const hippo__sliced_kind arena_kind = {
    .name = "ARENA",
    .arena = true,
    .fit = HIPPO__FIT_BEST,
    .new_room = arena_new_room,
};

static hippo_status arena_reserve(hippo__pool *pool, uint64_t size,
                                  hippo__slice_ref *out) {
  return hippo__sliced_reserve_kind(pool, size, out, &arena_kind);
}

static bool arena_release_named(hippo__pool *pool, uint32_t i, uint32_t gen,
                                uint64_t *size) {
  return hippo__sliced_release_named_kind(pool, i, gen, size, &arena_kind);
}

/* The core's operations, with relocation's. */
static const hippo__pool_ops arena_ops = {
    HIPPO__SLICED_OPS,
    .reserve = arena_reserve,
    .release_named = arena_release_named,
    .move = &hippo__arena_move_ops,
};

hippo_status hippo__pool_arena_create(hippo__backend *be,
                                      hippo__page_acct *acct,
                                      const hippo_pool_options *opt,
                                      hippo__pool **out) {
  uint64_t floor = hippo__align_down(opt->page_size, be->alignment);
  uint64_t max = hippo__align_down(opt->max_slice_size, be->alignment);
  sliced *p;
  if (floor == 0 || max < floor ||
      (max >> hippo__log2_floor(be->alignment)) > UINT32_MAX)
    return hippo__error_set(HIPPO_POOL_CONFIG,
                            "ARENA pool: pages of %llu .. %llu B do not fit "
                            "alignment %llu B and 2^32 alignment units",
                            (unsigned long long)floor,
                            (unsigned long long)max,
                            (unsigned long long)be->alignment);
  p = hippo__sliced_new(be, acct, &arena_ops, &arena_kind, HIPPO_POOL_ARENA, opt,
                        floor);
  if (!p)
    return HIPPO_OUT_OF_MEMORY;
  p->floor = floor;
  p->head.max_size = max;
  if (opt->max_pool_size)
    p->cap_bytes = opt->max_pool_size;
  *out = &p->head;
  return HIPPO_SUCCESS;
}
