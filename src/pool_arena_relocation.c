/* pool_arena_relocation.c -- an ARENA pool's part in relocation
 * (pool_relocation.h states the operations, relocation.h the protocol that
 * drives them): which pages to empty, where each live slice goes, and how
 * the moves commit or are undone.
 *
 * The rules:
 *  - Candidates: for EXPLICIT, PRESSURE, ARENA_FULL and CAPTURE the
 *    outdated pages holding live slices; for SPARSE also the open pages of
 *    the current size at most half full.  A page holding a slice a graph
 *    guards, or a stranded destination, is left whole (pages_guarded).
 *  - Outdated pages first, then cheapest first (fewest live bytes), each
 *    all or nothing: every live slice of the page gets a destination, found
 *    as a reservation would be (best fit) on pages that serve, or the page
 *    is left whole (pages_no_room) and its destinations freed.
 *  - ARENA_FULL and CAPTURE may add pages of the current size for the
 *    destinations; the others move only into room held.
 *  - Committing makes the moved slice's record describe its destination
 *    (the two records trade places), so its handle (which names the
 *    record) resolves there, and frees the source.  Destinations of a
 *    failed wait are kept as stranded slices (out of use, not free) until
 *    a later wait succeeds.
 */
#include <stdlib.h>
#include <string.h>

#include "pool_arena.h"
#include "sliced_index.h"

static void arena_shape(const hippo__pool *pool,
                              hippo__reloc_shape *out) {
  const sliced *p = (const sliced *)pool;
  hippo__sliced_settle(p);
  memset(out, 0, sizeof *out);
  out->current_pages = p->sizes[p->cur].pages;
  out->outdated_pages = p->closed_pages;
  out->outdated_live = p->closed_busy;
  out->guarded_pages = pool->holds; /* guards added or dropped: a change */
  out->page_sizes = p->sizes_alive;
  out->page_size = p->page_size;
  /* a growth reuses the current slot while it holds no page */
  out->sizes_full = p->sizes_alive >= HIPPO__ARENA_SIZES &&
                    p->sizes[p->cur].pages > 0;
  out->sparse = p->sparse;
}

/* A page to empty, and the live bytes that would move. */
typedef struct candidate {
  uint64_t live_bytes;
  uint32_t page;
  uint32_t sparse; /* an open page of the current size (SPARSE) */
} candidate;

static int candidate_cmp(const void *a, const void *b) {
  const candidate *x = a, *y = b;
  if (x->sparse != y->sparse) /* outdated pages first */
    return x->sparse < y->sparse ? -1 : 1;
  if (x->live_bytes != y->live_bytes)
    return x->live_bytes < y->live_bytes ? -1 : 1;
  return x->page < y->page ? -1 : x->page > y->page;
}

/* Whether page pg can be emptied, and the live bytes that would move. */
enum { MOVABLE, STRANDED, GUARDED };
static int page_movable(const sliced *p, uint32_t pg, uint64_t *bytes) {
  *bytes = 0;
  for (uint32_t i = p->pages[pg].first; i != NIL; i = p->slices[i].next_phys) {
    const slice *s = &p->slices[i];
    if (STATE(s) == SLICE_GUARDED || (STATE(s) == SLICE_LIVE && s->next_free))
      return GUARDED; /* a graph may use it: nothing on the page moves */
    if (STATE(s) == SLICE_HELD)
      return STRANDED;
    if (STATE(s) == SLICE_LIVE)
      *bytes += (uint64_t)s->size << p->head.align_shift;
  }
  return MOVABLE;
}

static hippo_status plan_room(hippo__reloc_plan *plan) {
  if (plan->count < plan->cap)
    return HIPPO_SUCCESS;
  {
    uint32_t cap = plan->cap ? plan->cap * 2 : 64;
    hippo__move *grown = realloc(plan->moves, (size_t)cap * sizeof *grown);
    if (!grown)
      return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                              "relocation: host memory for %u moves", cap);
    plan->moves = grown;
    plan->cap = cap;
  }
  return HIPPO_SUCCESS;
}

/* Reserve a destination for every live slice of page pg (closed), all or
 * nothing; false leaves the pool as it was (but pages added, which wait
 * empty on the FIFO). */
static bool plan_page(sliced *p, uint32_t pg, bool may_add,
                      hippo__reloc_plan *plan) {
  uint32_t first = plan->count;
  for (uint32_t i = p->pages[pg].first; i != NIL; i = p->slices[i].next_phys) {
    slice *s = &p->slices[i];
    uint64_t u = s->size, bytes = u << p->head.align_shift;
    found f;
    uint32_t j;
    if (STATE(s) != SLICE_LIVE)
      continue;
    if (reserve_nodes(p, 2) != HIPPO_SUCCESS ||
        plan_room(plan) != HIPPO_SUCCESS)
      goto undo;
    f = find_best(p, u);
    if (f.i == NIL && may_add && plan->page_status == HIPPO_SUCCESS) {
      hippo_status st =
          hippo__sliced_page_add(p, bytes, p->page_size, p->cur, &f.i);
      if (st != HIPPO_SUCCESS) {
        plan->page_status = st;
        f.i = NIL;
      } else {
        plan->pages_added++;
        f.cls = class_of(p->slices[f.i].size);
      }
    }
    j = f.i;
    if (j == NIL)
      goto undo;
    s = &p->slices[i]; /* reserve_nodes may have moved the array */
    j = hippo__sliced_take(p, f, u, s->prev_free);
    hippo__pool_note_reserve(&p->head, bytes - s->prev_free, bytes);
    p->pages[p->slices[j].page].mark = 1;
    plan->moves[plan->count++] = (hippo__move){
        .src = hippo__sliced_addr(&p->head, i),
        .dst = hippo__sliced_addr(&p->head, j),
        .bytes = bytes,
        .slice = i,
        .target = j};
    plan->bytes += bytes;
  }
  plan->pages_planned++;
  return true;
undo:
  while (plan->count > first) {
    hippo__move *m = &plan->moves[--plan->count];
    plan->bytes -= m->bytes;
    (void)hippo__sliced_release_slice(p, m->target);
  }
  plan->pages_no_room++;
  return false;
}

static hippo_status arena_plan(hippo__pool *pool,
                                     hippo_relocate_reason reason,
                                     hippo__reloc_plan *plan) {
  sliced *p = (sliced *)pool;
  bool may_add = reason == HIPPO_RELOCATE_ARENA_FULL ||
                 reason == HIPPO_RELOCATE_CAPTURE;
  bool sparse = reason == HIPPO_RELOCATE_SPARSE;
  candidate *c;
  uint32_t n = 0;
  hippo__sliced_settle(p);
  if (p->page_count == 0)
    return HIPPO_SUCCESS;
  c = malloc((size_t)p->page_count * sizeof *c);
  if (!c)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "relocation: host memory to plan %u pages",
                            p->page_count);
  for (uint32_t pg = 0; pg < p->page_count; pg++) {
    const page *g = &p->pages[pg];
    uint64_t bytes;
    bool open_sparse = sparse && !g->closed && g->szslot == p->cur;
    int movable;
    if (!g->held || page_empty(p, pg) || !(g->closed || open_sparse))
      continue;
    movable = page_movable(p, pg, &bytes);
    if (movable == GUARDED)
      plan->pages_guarded++;
    if (movable != MOVABLE)
      continue;
    /* a page at least half full is not worth emptying */
    if (open_sparse && bytes * 2 > g->size)
      continue;
    c[n++] = (candidate){bytes, pg, open_sparse};
  }
  qsort(c, n, sizeof *c, candidate_cmp);
  for (uint32_t k = 0; k < n; k++) {
    uint32_t pg = c[k].page;
    if (c[k].sparse) {
      if (p->pages[pg].mark)
        continue; /* it took destinations of this plan */
      hippo__sliced_page_close(p, pg);
    }
    if (!plan_page(p, pg, may_add && !c[k].sparse, plan) && c[k].sparse)
      hippo__sliced_page_open(p, pg);
  }
  for (uint32_t pg = 0; pg < p->page_count; pg++)
    p->pages[pg].mark = 0;
  free(c);
  return HIPPO_SUCCESS;
}

/* Records i (live, at the source) and j (live, at the destination, as
 * large) trade places: i now describes the destination, j the source. */
static void swap_places(sliced *p, uint32_t i, uint32_t j) {
  slice *a = &p->slices[i], *b = &p->slices[j];
  slice ta = *a;
  uint32_t k, r;
  a->off = b->off;
  a->page = b->page;
  a->prev_phys = b->prev_phys;
  a->next_phys = b->next_phys;
  b->off = ta.off;
  b->page = ta.page;
  b->prev_phys = ta.prev_phys;
  b->next_phys = ta.next_phys;
  for (k = 0, r = i; k < 2; k++, r = j) { /* the neighbours of each place */
    slice *x = &p->slices[r];
    if (x->prev_phys != NIL)
      p->slices[x->prev_phys].next_phys = r;
    else
      p->pages[x->page].first = r;
    if (x->next_phys != NIL)
      p->slices[x->next_phys].prev_phys = r;
  }
}

static void arena_commit(hippo__pool *pool, hippo__reloc_plan *plan) {
  sliced *p = (sliced *)pool;
  hippo__sliced_settle(p);
  for (uint32_t k = 0; k < plan->count; k++) {
    swap_places(p, plan->moves[k].slice, plan->moves[k].target);
    (void)hippo__sliced_release_slice(p, plan->moves[k].target);
  }
  if (plan->count)
    p->sparse = false;
}

static void arena_abort(hippo__pool *pool, hippo__reloc_plan *plan,
                              bool strand) {
  sliced *p = (sliced *)pool;
  hippo__sliced_settle(p);
  for (uint32_t k = 0; k < plan->count; k++) {
    uint32_t j = plan->moves[k].target;
    if (strand) { /* a copy may still write it: out of use, not free */
      slice *t = &p->slices[j];
      uint64_t bytes = (uint64_t)t->size << pool->align_shift;
      hippo__pool_note_release(pool, bytes - t->prev_free, bytes);
      set_state(t, SLICE_HELD);
      pool->bytes_stranded += bytes;
    } else {
      (void)hippo__sliced_release_slice(p, j);
    }
  }
  /* pages of the current size closed to be emptied serve again */
  for (uint32_t pg = 0; pg < p->page_count; pg++)
    if (p->pages[pg].held && p->pages[pg].closed &&
        p->pages[pg].szslot == p->cur)
      hippo__sliced_page_open(p, pg);
}

static void arena_unstrand(hippo__pool *pool) {
  sliced *p = (sliced *)pool;
  hippo__sliced_settle(p);
  for (uint32_t i = 0; i < p->slice_count && pool->bytes_stranded; i++)
    if (STATE(&p->slices[i]) == SLICE_HELD) {
      pool->bytes_stranded -= (uint64_t)p->slices[i].size << pool->align_shift;
      hippo__sliced_free_slice(p, i);
    }
}

static hippo_status arena_drain(hippo__pool *pool, uint64_t *pages,
                                      uint64_t *bytes) {
  sliced *p = (sliced *)pool;
  uint64_t n = pool->pages, b = pool->bytes_reserved;
  hippo_status st;
  hippo__sliced_settle(p);
  st = hippo__fifo_give_back(&p->drain, p->pages, pool, false, false,
                             &hippo__sliced_page_dropper, p);
  /* and the outdated ones whose free failed before (waiting on the FIFO) */
  for (uint32_t pg = p->empty.front, next; pg != NIL; pg = next) {
    next = p->pages[pg].wait.newer;
    if (p->pages[pg].closed) {
      hippo_status fst = hippo__sliced_page_drop(p, pg);
      if (fst != HIPPO_SUCCESS && st == HIPPO_SUCCESS)
        st = fst; /* it stays where it is */
    }
  }
  *pages += n - pool->pages;
  *bytes += b - pool->bytes_reserved;
  return st;
}

const hippo__pool_move_ops hippo__arena_move_ops = {
    .shape = arena_shape,
    .plan = arena_plan,
    .commit = arena_commit,
    .abort = arena_abort,
    .unstrand = arena_unstrand,
    .drain = arena_drain,
};
