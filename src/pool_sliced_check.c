/* pool_sliced_check.c -- the check walk of SLICED and ARENA pools
 * (pool.h: check): every page, slice, free list, waiting list and figure
 * against the invariants written in sliced.h and sliced_index.h.  For
 * tests and debugging; O(pages + slices).
 */
#include <string.h>

#include "sliced.h"
#include "sliced_index.h"

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond))                                                               \
      return hippo__error_set(HIPPO_INTERNAL, "SLICED check: " __VA_ARGS__);   \
  } while (0)

/* Whether page pg belongs on the empty FIFO, or on the drain list. */
static bool on_fifo(const void *ctx, uint32_t pg) {
  const page *g = &((const sliced *)ctx)->pages[pg];
  return g->held && page_empty(ctx, pg) && g->on == ON_FIFO;
}

static bool on_drain(const void *ctx, uint32_t pg) {
  const page *g = &((const sliced *)ctx)->pages[pg];
  return g->held && page_empty(ctx, pg) && g->on == ON_DRAIN && g->closed;
}

/* What the walk of the pages counts, compared by the later steps with
 * the pool's own figures and lists. */
typedef struct tally {
  uint64_t pages, reserved;                 /* held pages, their bytes (a
                                               VIRTUAL range not counted) */
  uint64_t held;                            /* held pages, the range too */
  uint64_t live_slices, live_bytes, padding;
  uint64_t free_slices, indexed;            /* indexed: on open pages */
  uint64_t held_slices, stranded;
  uint64_t guarded_slices, guarded, waiting, holds;
  uint64_t closed, closed_bytes, closed_busy, empty;
  uint64_t size_pages[HIPPO__ARENA_SIZES];
} tally;

/* The release that waits (see sliced.pending): a FREE slice of a held
 * page, released at or before the clock, named by the stream's gate. */
static hippo_status check_pending(const sliced *p) {
  const hippo__pool *pool = &p->head;
  if (p->pending != NIL) {
    const slice *w = &p->slices[p->pending];
    CHECK(p->pending < p->slice_count && STATE(w) == SLICE_FREE &&
              w->page < p->page_count &&
              p->pages[w->page].held && p->pending_now <= pool->now,
          "the waiting release %u is not a free slice of a held page, "
          "released at or before the clock",
          p->pending);
  }
  CHECK(!pool->gate || (pool->gate->unsettled == pool) == (p->pending != NIL),
        "the stream's gate %s this pool, which %s a waiting release",
        pool->gate && pool->gate->unsettled == pool ? "names" : "does not name",
        p->pending != NIL ? "has" : "has no");
  return HIPPO_SUCCESS;
}

/* One slice of page pg, in use (LIVE, HELD or GUARDED): counted. */
static hippo_status check_used(const sliced *p, uint32_t i, tally *t) {
  const hippo__pool *pool = &p->head;
  const slice *s = &p->slices[i];
  uint64_t bytes = (uint64_t)s->size << pool->align_shift;
  CHECK(GEN(s) != 0, "slice %u in use has a retired record", i);
  CHECK(STATE(s) == SLICE_GUARDED || s->prev_free < pool->alignment,
        "slice %u: %u B of padding, alignment %llu B", i, s->prev_free,
        (unsigned long long)pool->alignment);
  if (STATE(s) == SLICE_HELD) {
    t->held_slices++;
    t->stranded += bytes;
  } else if (STATE(s) == SLICE_GUARDED) {
    CHECK(s->next_free > 0 && s->prev_free <= s->next_free,
          "guarded slice %u has %u holds, %u of them record_use waits", i,
          s->next_free, s->prev_free);
    t->guarded_slices++;
    if (s->next_free > s->prev_free)
      t->guarded += bytes;
    else
      t->waiting += bytes;
    t->holds += s->next_free;
  } else {
    t->live_slices++;
    t->live_bytes += bytes;
    t->padding += s->prev_free;
    t->holds += s->next_free;
  }
  return HIPPO_SUCCESS;
}

/* Held page pg: its size slot, whether it serves, its list, and its
 * slices, which tile it from offset 0 to its end with no two free
 * neighbours. */
static hippo_status check_page(const sliced *p, uint32_t pg, tally *t) {
  const hippo__pool *pool = &p->head;
  const page *g = &p->pages[pg];
  uint64_t at = 0, live = 0; /* at: in alignment units */
  uint32_t prev = NIL;
  hippo_status st;
  t->held++;
  if (!p->virt) { /* a VIRTUAL range holds no memory: its granules do */
    t->pages++;
    t->reserved += g->size;
  }
  CHECK(g->szslot < HIPPO__ARENA_SIZES && g->size == p->sizes[g->szslot].size,
        "page %u of %llu B in size slot %u of %llu B", pg,
        (unsigned long long)g->size, g->szslot,
        g->szslot < HIPPO__ARENA_SIZES
            ? (unsigned long long)p->sizes[g->szslot].size
            : 0ULL);
  t->size_pages[g->szslot]++;
  CHECK(g->closed || g->szslot == p->cur,
        "page %u of an outdated size serves reservations", pg);
  CHECK(p->arena || !g->closed, "page %u of a SLICED pool is closed", pg);
  if (g->closed) {
    t->closed++;
    t->closed_bytes += g->size;
    t->closed_busy += !page_empty(p, pg);
  }
  CHECK(page_empty(p, pg) == (g->on != ON_NONE),
        "page %u: empty %d, on list %u", pg, page_empty(p, pg), g->on);
  t->empty += page_empty(p, pg);
  for (uint32_t i = g->first; i != NIL; i = p->slices[i].next_phys) {
    const slice *s = &p->slices[i];
    CHECK(i < p->slice_count, "page %u: slice index %u out of range", pg, i);
    CHECK(s->page == pg, "slice %u claims page %u, found in page %u", i,
          s->page, pg);
    CHECK(s->off == at, "page %u: slice %u starts at unit %u, expected %llu",
          pg, i, s->off, (unsigned long long)at);
    CHECK(s->size > 0, "slice %u has size 0", i);
    CHECK(s->prev_phys == prev, "slice %u: prev_phys %u, expected %u", i,
          s->prev_phys, prev);
    CHECK(STATE(s) != SLICE_UNUSED, "slice %u in page %u is unused", i, pg);
    CHECK(GEN(s) <= HIPPO__HANDLE_GEN_MASK, "slice %u: generation %u", i,
          GEN(s));
    if (STATE(s) == SLICE_FREE) {
      CHECK(prev == NIL || STATE(&p->slices[prev]) != SLICE_FREE,
            "slices %u and %u are free neighbours (not coalesced)", prev, i);
      CHECK(!g->closed || (s->prev_free == NIL && s->next_free == NIL),
            "free slice %u of closed page %u is linked", i, pg);
      t->free_slices++;
      t->indexed += !g->closed;
    } else {
      live++;
      if ((st = check_used(p, i, t)) != HIPPO_SUCCESS)
        return st;
    }
    at += s->size;
    prev = i;
  }
  CHECK(at << pool->align_shift == g->size,
        "page %u: slices end at byte %llu of %llu (bytes missing)", pg,
        (unsigned long long)(at << pool->align_shift),
        (unsigned long long)g->size);
  CHECK((live == 0) == page_empty(p, pg),
        "page %u: %llu slices in use, but empty %d", pg,
        (unsigned long long)live, page_empty(p, pg));
  return HIPPO_SUCCESS;
}

/* The free index (sliced_index.h): the bitmaps agree with the lists, and
 * the lists hold exactly the free slices of open pages, each in the list
 * of its class. */
static hippo_status check_index(const sliced *p, const tally *t) {
  uint64_t listed = 0;
  CHECK(p->crowded == (p->slice_cap > p->crowd_at),
        "crowded %d with %u records (crowded above %u)", p->crowded,
        p->slice_cap, p->crowd_at);
  for (unsigned fl = 0; fl < FL_COUNT; fl++) {
    CHECK(!!(p->fl_bitmap & (UINT64_C(1) << fl)) == !!p->sl_bitmap[fl],
          "first-level bitmap bit %u disagrees", fl);
    for (unsigned sl = 0; sl < SL_COUNT; sl++) {
      uint32_t prev = NIL;
      CHECK(!!(p->sl_bitmap[fl] & (1u << sl)) ==
                (p->heads[CLS(fl, sl)] != NIL),
            "second-level bitmap bit %u/%u disagrees", fl, sl);
      for (uint32_t i = p->heads[CLS(fl, sl)]; i != NIL;
           i = p->slices[i].next_free) {
        CHECK(i < p->slice_count && STATE(&p->slices[i]) == SLICE_FREE &&
                  p->slices[i].page < p->page_count,
              "slice %u in free list %u/%u is not free", i, fl, sl);
        CHECK(!p->pages[p->slices[i].page].closed,
              "slice %u in free list %u/%u is on a closed page", i, fl, sl);
        CHECK(p->slices[i].prev_free == prev, "free list %u/%u broken at %u",
              fl, sl, i);
        CHECK(class_of(p->slices[i].size) == CLS(fl, sl),
              "slice %u of %u units is in class %u/%u", i,
              p->slices[i].size, fl, sl);
        CHECK(++listed <= t->indexed, "free lists hold more than %llu slices",
              (unsigned long long)t->indexed);
        prev = i;
      }
    }
  }
  CHECK(listed == t->indexed,
        "%llu free slices on open pages, %llu in free lists",
        (unsigned long long)t->indexed, (unsigned long long)listed);
  return HIPPO_SUCCESS;
}

/* The records: the unused list, the retired ones, and every record
 * accounted for by its state. */
static hippo_status check_records(const sliced *p, const tally *t) {
  uint64_t unused = 0, retired = 0;
  for (uint32_t i = p->slice_unused; i != NIL; i = p->slices[i].next_free) {
    CHECK(i < p->slice_count && STATE(&p->slices[i]) == SLICE_UNUSED &&
              GEN(&p->slices[i]) != 0,
          "unused list broken at record %u", i);
    CHECK(++unused <= p->slice_count, "unused list longer than %u records",
          p->slice_count);
  }
  CHECK(unused == p->unused_count,
        "unused list holds %llu records, %u counted",
        (unsigned long long)unused, p->unused_count);
  for (uint32_t i = 0; i < p->slice_count; i++)
    retired += STATE(&p->slices[i]) == SLICE_UNUSED && GEN(&p->slices[i]) == 0;
  CHECK(retired == p->retired &&
            t->live_slices + t->held_slices + t->guarded_slices +
                    t->free_slices + unused + retired ==
                p->slice_count,
        "%llu live + %llu held + %llu guarded + %llu free + %llu unused + "
        "%llu retired records of %u (%u retired counted)",
        (unsigned long long)t->live_slices,
        (unsigned long long)t->held_slices,
        (unsigned long long)t->guarded_slices,
        (unsigned long long)t->free_slices, (unsigned long long)unused,
        (unsigned long long)retired, p->slice_count, p->retired);
  return HIPPO_SUCCESS;
}

/* The empty pages: each on the empty FIFO or (closed) the drain list,
 * and the pool's due follows their fronts. */
static hippo_status check_waiting(const sliced *p, const tally *t) {
  const hippo__pool *pool = &p->head;
  uint64_t fifo = 0, drain = 0;
  hippo_status st;
  if ((st = hippo__fifo_check(&p->empty, p->pages, p->page_count, t->held,
                              on_fifo, p, "SLICED check: the empty FIFO",
                              &fifo)) != HIPPO_SUCCESS ||
      (st = hippo__fifo_check(&p->drain, p->pages, p->page_count, t->held,
                              on_drain, p, "SLICED check: the drain list",
                              &drain)) != HIPPO_SUCCESS)
    return st;
  CHECK(fifo + drain == t->empty, "%llu empty pages, %llu on the lists",
        (unsigned long long)t->empty, (unsigned long long)(fifo + drain));
  CHECK(hippo__sliced_due_of(p) == pool->due,
        "due at clock %llu, the empty lists say %llu",
        (unsigned long long)pool->due,
        (unsigned long long)hippo__sliced_due_of(p));
  return HIPPO_SUCCESS;
}

/* The page-size slots and the closed pages (ARENA; a SLICED pool has one
 * size and no closed page). */
static hippo_status check_sizes(const sliced *p, const tally *t) {
  uint32_t alive = 0;
  for (uint32_t k = 0; k < HIPPO__ARENA_SIZES; k++) {
    CHECK(t->size_pages[k] == p->sizes[k].pages,
          "size slot %u holds %llu pages, counted %llu", k,
          (unsigned long long)t->size_pages[k],
          (unsigned long long)p->sizes[k].pages);
    alive += k == p->cur || t->size_pages[k] > 0;
  }
  CHECK(alive == p->sizes_alive && p->page_size == p->sizes[p->cur].size,
        "%u page sizes alive, counted %u; page size %llu B, current slot "
        "%llu B",
        alive, p->sizes_alive, (unsigned long long)p->page_size,
        (unsigned long long)p->sizes[p->cur].size);
  CHECK(p->arena || alive == 1, "a SLICED pool with %u page sizes", alive);
  CHECK(t->closed == p->closed_pages && t->closed_bytes == p->closed_bytes &&
            t->closed_busy == p->closed_busy,
        "%llu closed pages of %llu B (%llu busy), counted %llu of %llu B "
        "(%llu)",
        (unsigned long long)t->closed, (unsigned long long)t->closed_bytes,
        (unsigned long long)t->closed_busy,
        (unsigned long long)p->closed_pages,
        (unsigned long long)p->closed_bytes,
        (unsigned long long)p->closed_busy);
  return HIPPO_SUCCESS;
}

/* The head's figures (pool.h) against what the walk counted, and the
 * caps. */
static hippo_status check_figures(const sliced *p, const tally *t) {
  const hippo__pool *pool = &p->head;
  CHECK(t->guarded == pool->bytes_guarded &&
            t->waiting == pool->bytes_waiting && t->holds == pool->holds,
        "released slices a graph holds have %llu B, those only record_use "
        "holds %llu B, and slices have %llu holds; figures say %llu B, "
        "%llu B and %llu",
        (unsigned long long)t->guarded, (unsigned long long)t->waiting,
        (unsigned long long)t->holds,
        (unsigned long long)pool->bytes_guarded,
        (unsigned long long)pool->bytes_waiting,
        (unsigned long long)pool->holds);
  CHECK(p->virt ||
            (t->pages == pool->pages && t->reserved == pool->bytes_reserved),
        "%llu pages of %llu B held, figures say %llu pages of %llu B",
        (unsigned long long)t->pages, (unsigned long long)t->reserved,
        (unsigned long long)pool->pages,
        (unsigned long long)pool->bytes_reserved);
  CHECK(t->live_slices == pool->allocations,
        "%llu live slices, figures say %llu",
        (unsigned long long)t->live_slices,
        (unsigned long long)pool->allocations);
  CHECK(t->live_bytes == pool->bytes_in_use + pool->bytes_padding &&
            t->padding == pool->bytes_padding,
        "live slices hold %llu B with %llu B of padding, figures say in use "
        "%llu B + padding %llu B",
        (unsigned long long)t->live_bytes, (unsigned long long)t->padding,
        (unsigned long long)pool->bytes_in_use,
        (unsigned long long)pool->bytes_padding);
  CHECK(t->stranded == pool->bytes_stranded,
        "held slices hold %llu B, stranded figure %llu B",
        (unsigned long long)t->stranded,
        (unsigned long long)pool->bytes_stranded);
  CHECK(pool->pages <= pool->peak_pages, "pages above peak");
  CHECK(p->max_pages == UINT64_MAX || pool->pages <= p->max_pages,
        "%llu pages held, cap is %llu", (unsigned long long)pool->pages,
        (unsigned long long)p->max_pages);
  CHECK(p->cap_bytes == UINT64_MAX || pool->bytes_reserved <= p->cap_bytes,
        "%llu B of pages held, cap is %llu B",
        (unsigned long long)pool->bytes_reserved,
        (unsigned long long)p->cap_bytes);
  return HIPPO_SUCCESS;
}

hippo_status hippo__sliced_check(const hippo__pool *pool) {
  const sliced *p = (const sliced *)pool;
  tally t;
  hippo_status st;
  memset(&t, 0, sizeof t);
  /* the waiting release, then it is finished, and the walk sees the pool
   * as every other call does */
  if ((st = check_pending(p)) != HIPPO_SUCCESS)
    return st;
  hippo__sliced_settle(p);
  for (uint32_t pg = 0; pg < p->page_count; pg++)
    if (p->pages[pg].held && (st = check_page(p, pg, &t)) != HIPPO_SUCCESS)
      return st;
  if ((st = check_index(p, &t)) != HIPPO_SUCCESS ||
      (st = check_records(p, &t)) != HIPPO_SUCCESS ||
      (st = check_waiting(p, &t)) != HIPPO_SUCCESS ||
      (st = check_sizes(p, &t)) != HIPPO_SUCCESS ||
      (st = check_figures(p, &t)) != HIPPO_SUCCESS)
    return st;
  return p->kind->check ? p->kind->check(p) : HIPPO_SUCCESS;
}
