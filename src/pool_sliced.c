/* pool_sliced.c -- SLICED and ARENA pools: pages from the backend carved
 * into slices.  This file holds what both kinds share: the slice records
 * and their generations, the pages and their waiting lists, reserve and
 * release, coalescing, periodic deallocation, reports and the three
 * operation tables (SLICED, ARENA, VIRTUAL).  sliced.h holds the records' invariants,
 * sliced_index.h the free index, pool_arena.c how an ARENA grows,
 * pool_arena_relocation.c how it relocates, pool_sliced_check.c the check
 * walk.
 *
 * Options {page_size, max_slice_size, max_pool_size, dealloc_period}.
 * A reservation of `size` bytes (0 < size <= max_slice_size) takes a slice
 * of size rounded up to the alignment; the rest of the free slice it is cut
 * from stays free.  A released slice coalesces with its free neighbours
 * (at the pool's next call: see sliced.pending), so a page with no live
 * slice is one free slice again.
 *
 * The pool names its reservations itself (pool.h, handles.h): a live
 * slice's record holds the handle's generation and the request's padding,
 * so a release reads the slice record and its neighbours and no handle
 * table.  A record's generation moves on at each release; a record that has
 * handed out every generation retires: it may still describe a free slice,
 * but before that slice is reserved it moves to a fresh record, and a
 * retired record is never reused.
 *
 * Cap: max_pool_size (0 = none) allows floor(max_pool_size / page_size)
 * whole pages; a cap below the page size shrinks the page to the cap rounded
 * down to the alignment; a cap below the alignment leaves a page size of 0,
 * and every reservation fails with HIPPO_POOL_CAPACITY_EXCEEDED without
 * allocating anything.
 *
 * Periodic deallocation (pool_fifo.h, shared with EXCLUSIVE and DIRECT): a
 * page that became empty when the stream's reservation clock read t goes
 * back to the backend at the first tick with now >= t + dealloc_period.
 * Empty pages wait in FIFO order of the time they emptied, so a tick looks
 * only at the front; a page whose free fails goes to the back, stamped
 * anew, so it is tried again a period later and holds back no other page.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sliced.h"
#include "sliced_index.h"

HOT void settle_kind(sliced *p, bool arena);

/* crowded follows slice_cap: called wherever slice_cap or crowd_at
 * changes. */
static void crowd_update(sliced *p) {
  p->crowded = p->slice_cap > p->crowd_at;
}

/* reserve_nodes' slow path (sliced.h). */
hippo_status hippo__sliced_grow_nodes(sliced *p) {
  {
    uint32_t cap = p->slice_cap ? p->slice_cap * 2 : 1024;
    slice *grown;
    /* a limit of the pool's own, like a cap: the manager spills */
    if (p->slice_cap >= p->max_records)
      return hippo__error_set(HIPPO_POOL_CAPACITY_EXCEEDED,
                              "SLICED pool: all %u slice records in use, the "
                              "most a pool's handles can name; release some, "
                              "or let a later pool take it",
                              p->slice_cap);
    if (cap > p->max_records)
      cap = p->max_records;
    grown = hippo__grow_aligned(p->slices, (size_t)p->slice_cap * sizeof *grown,
                                (size_t)cap * sizeof *grown);
    if (!grown)
      return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                              "SLICED pool: host memory for %u slice records",
                              cap);
    p->slices = grown;
    p->slice_cap = cap;
    crowd_update(p);
  }
  return HIPPO_SUCCESS;
}

/* A record (room was made) that keeps its generation, or a fresh one. */
static uint32_t node_new(sliced *p) {
  uint32_t i;
  if (p->slice_unused != NIL) {
    i = p->slice_unused;
    p->slice_unused = p->slices[i].next_free;
    p->unused_count--;
  } else {
    i = p->slice_count++;
    p->slices[i].sg = SLICE_UNUSED << 24 | p->first_gen;
  }
  return i;
}

static void node_drop(sliced *p, uint32_t i) {
  slice *s = &p->slices[i];
  set_state(s, SLICE_UNUSED);
  if (HIPPO__UNLIKELY(GEN(s) == 0)) { /* retired: never again */
    s->next_free = NIL;
    p->retired++;
    return;
  }
  s->next_free = p->slice_unused;
  p->slice_unused = i;
  p->unused_count++;
}

/* Free slice i, off its free list, is about to be reserved but its record
 * has handed out every generation: the slice moves to a fresh record
 * (room was made), which it returns; i retires. */
static uint32_t rehome(sliced *p, uint32_t i) {
  uint32_t j = node_new(p);
  slice *s = &p->slices[i], *t = &p->slices[j];
  uint32_t sg = t->sg;
  *t = *s;
  t->sg = sg | SLICE_FREE << 24; /* from UNUSED (0): the slice is free */
  if (s->prev_phys != NIL)
    p->slices[s->prev_phys].next_phys = j;
  else
    p->pages[s->page].first = j;
  if (s->next_phys != NIL)
    p->slices[s->next_phys].prev_phys = j;
  node_drop(p, i);
  return j;
}

/* What pool->due should be: 0 (the next tick) while a closed page waits
 * on the drain list, else the end of the oldest empty page's period. */
uint64_t hippo__sliced_due_of(const sliced *p) {
  if (p->drain.front != NIL)
    return 0;
  return hippo__fifo_due(&p->empty, p->pages, &p->head);
}

/* Empty page pg waits at the back of the drain list or of the empty FIFO,
 * stamped with the clock `since` (when it emptied). */
static void empty_push_to(sliced *p, uint32_t pg, bool drain,
                          uint64_t since) {
  hippo__fifo *f = drain ? &p->drain : &p->empty;
  bool first = f->front == NIL;
  p->pages[pg].on = drain ? ON_DRAIN : ON_FIFO;
  hippo__fifo_push(f, p->pages, pg, since);
  if (first)
    hippo__pool_due_set(&p->head, hippo__sliced_due_of(p));
}

/* Page pg, emptied (or taken) at clock `since`, waits: on the drain list
 * when closed, else on the empty FIFO. */
static inline void empty_push(sliced *p, uint32_t pg, uint64_t since) {
  empty_push_to(p, pg, p->pages[pg].closed, since);
}

/* Page pg leaves the list it waits on. */
static void empty_remove(sliced *p, uint32_t pg) {
  page *g = &p->pages[pg];
  hippo__fifo *f = g->on == ON_DRAIN ? &p->drain : &p->empty;
  g->on = ON_NONE;
  if (hippo__fifo_unlink(f, p->pages, pg))
    hippo__pool_due_set(&p->head, hippo__sliced_due_of(p));
}

/* Page pg serves no new reservation: its free slices leave the index; empty,
 * it moves to the drain list. */
void hippo__sliced_page_close(sliced *p, uint32_t pg) {
  page *g = &p->pages[pg];
  if (g->closed)
    return;
  for (uint32_t i = g->first; i != NIL; i = p->slices[i].next_phys)
    if (STATE(&p->slices[i]) == SLICE_FREE) {
      free_remove(p, i);
      p->slices[i].prev_free = p->slices[i].next_free = NIL;
    }
  if (g->on != ON_NONE)
    empty_remove(p, pg);
  g->closed = 1;
  p->closed_pages++;
  p->closed_bytes += g->size;
  if (!page_empty(p, pg))
    p->closed_busy++;
  else
    empty_push(p, pg, p->head.now);
}

/* Page pg (closed, of the current size) serves again. */
void hippo__sliced_page_open(sliced *p, uint32_t pg) {
  page *g = &p->pages[pg];
  if (!g->closed)
    return;
  if (g->on != ON_NONE)
    empty_remove(p, pg);
  g->closed = 0;
  p->closed_pages--;
  p->closed_bytes -= g->size;
  if (!page_empty(p, pg))
    p->closed_busy--;
  for (uint32_t i = g->first; i != NIL; i = p->slices[i].next_phys)
    if (STATE(&p->slices[i]) == SLICE_FREE)
      free_insert(p, i);
  if (page_empty(p, pg))
    empty_push(p, pg, p->head.now);
}

/* The lazy message of a request no page may hold (a cap). */
static hippo_status no_page(sliced *p, uint64_t bytes, uint64_t size) {
  uint64_t args[] = {size, p->head.opt.max_pool_size, bytes, p->head.pages,
                     p->max_pages == UINT64_MAX ? 0 : p->max_pages};
  return hippo__error_lazy(
      HIPPO_POOL_CAPACITY_EXCEEDED,
      "SLICED pool (page %llu B, max_pool_size %llu B): %llu B do not "
      "fit: %llu of %llu pages held and no free slice fits; release, "
      "raise max_pool_size, or let a later pool take it",
      args, 5);
}

/* The lazy message of a page an ARENA's max_pool_size leaves no room for
 * (no_page's numbers would read "of 0 pages": an ARENA caps bytes). */
static hippo_status no_room_under_cap(sliced *p, uint64_t bytes,
                                      uint64_t size) {
  uint64_t args[] = {p->cap_bytes, bytes, p->head.bytes_reserved, size};
  return hippo__error_lazy(
      HIPPO_POOL_CAPACITY_EXCEEDED,
      "ARENA pool (max_pool_size %llu B): %llu B do not fit: its pages "
      "hold %llu B and a page of %llu B more would pass max_pool_size; "
      "release, relocate, raise max_pool_size, or let a later pool take it",
      args, 4);
}

/* Take a page of `size` bytes for page-size slot `slot` from the backend;
 * it becomes one free slice (on the empty FIFO).  Nodes were reserved by
 * the caller.  A cap or a refused page changes nothing. */
hippo_status hippo__sliced_page_room(sliced *p) {
  if (p->page_unused == NIL && p->page_count == p->page_cap) {
    uint32_t cap = p->page_cap ? p->page_cap * 2 : 16;
    page *grown = realloc(p->pages, (size_t)cap * sizeof *grown);
    if (!grown)
      return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                              "SLICED pool: host memory for %u page records",
                              cap);
    p->pages = grown;
    p->page_cap = cap;
  }
  return HIPPO_SUCCESS;
}

hippo_status hippo__sliced_page_add(sliced *p, uint64_t bytes, uint64_t size,
                             uint32_t slot, uint32_t *slice_out) {
  uint64_t addr;
  hippo_status st;
  if (p->head.bytes_reserved + size > p->cap_bytes)
    return no_room_under_cap(p, bytes, size);
  if (bytes > size || (uint64_t)p->head.pages >= p->max_pages)
    return no_page(p, bytes, size);
  if ((st = hippo__sliced_page_room(p)) != HIPPO_SUCCESS)
    return st;
  st = hippo__pool_page_alloc(&p->head, size, &addr);
  if (st != HIPPO_SUCCESS) {
    uint64_t args[] = {size};
    return hippo__error_lazy_wrap(st,
                                  p->arena ? "ARENA pool (page %llu B)"
                                           : "SLICED pool (page %llu B)",
                                  args, 1);
  }
  *slice_out = hippo__sliced_page_install(p, addr, size, slot);
  return HIPPO_SUCCESS;
}

uint32_t hippo__sliced_page_install(sliced *p, uint64_t addr, uint64_t size,
                                    uint32_t slot) {
  uint32_t pg, si;
  if (p->page_unused != NIL) {
    pg = p->page_unused;
    p->page_unused = p->pages[pg].wait.newer;
  } else {
    pg = p->page_count++;
  }
  si = node_new(p);
  p->slices[si].sg |= SLICE_FREE << 24; /* from UNUSED (0) */
  p->slices[si].off = 0;
  p->slices[si].size = (uint32_t)(size >> p->head.align_shift);
  p->slices[si].prev_phys = p->slices[si].next_phys = NIL;
  p->slices[si].page = pg;
  p->pages[pg] = (page){.addr = addr,
                        .size = size,
                        .first = si,
                        .held = 1,
                        .szslot = slot};
  if (p->sizes[slot].pages++ == 0 && slot != p->cur)
    p->sizes_alive++;
  free_insert(p, si);
  empty_push(p, pg, p->head.now);
  return si;
}

/* Free slice i (found in the index, in class (fl, sl)) now serves `size`
 * bytes in `u` units: off the index, on a fresh record if its own is
 * retired, split, live.  Returns the record (i, or where it moved). */
HOT uint32_t
take_free(sliced *p, found f, uint64_t u, uint32_t padding) {
  uint32_t i = f.i;
  slice *s;
  free_unlink(p, i, f.cls, true);
  if (HIPPO__UNLIKELY(whole_page(p, i))) /* its page is empty no more */
    empty_remove(p, p->slices[i].page);
  if (HIPPO__UNLIKELY(GEN(&p->slices[i]) == 0))
    i = rehome(p, i);
  s = &p->slices[i];
  if (s->size > u) { /* split: the rest stays free */
    uint32_t r = node_new(p);
    slice *rest;
    s = &p->slices[i];
    rest = &p->slices[r];
    rest->off = s->off + (uint32_t)u;
    rest->size = s->size - (uint32_t)u;
    rest->prev_phys = i;
    rest->next_phys = s->next_phys;
    rest->page = s->page;
    rest->sg |= SLICE_FREE << 24; /* from UNUSED (0) */
    *phys_link(p, s->next_phys) = r;
    s->next_phys = r;
    s->size = (uint32_t)u;
    free_insert(p, r);
  }
  s->sg ^= (SLICE_FREE ^ SLICE_LIVE) << 24; /* FREE to LIVE */
  s->prev_free = padding;
  s->next_free = 0; /* no graph holds it yet */
  return i;
}

uint32_t hippo__sliced_take(sliced *p, found f, uint64_t u,
                            uint32_t padding) {
  return take_free(p, f, u, padding);
}

/* A free slice for u units (bytes) when the index has none: a page of the
 * current size, or (ARENA, pool_arena.c) a page or a growth. */
static hippo_status new_room(sliced *p, uint64_t bytes, uint32_t *i) {
  if (p->virt)
    return hippo__virtual_new_room(p, bytes, i);
  if (!p->arena)
    return hippo__sliced_page_add(p, bytes, p->page_size, p->cur, i);
  return hippo__arena_new_room(p, bytes, i);
}

/* Slice i serves a reservation of `size` (`bytes` aligned): the figures
 * (VIRTUAL, `virt` constant in each caller: the running peak of bytes in
 * use its budget follows) and the caller's reference. */
static inline void served(sliced *p, uint32_t i, uint64_t size,
                          uint64_t bytes, hippo__slice_ref *out, bool virt) {
  const slice *s = &p->slices[i];
  hippo__pool_note_reserve(&p->head, size, bytes);
  if (virt && p->head.bytes_in_use > p->vg.peak_live)
    p->vg.peak_live = p->head.bytes_in_use;
  out->addr = p->pages[s->page].addr + ((uint64_t)s->off << p->head.align_shift);
  out->slice = i;
  out->gen = GEN(s);
}

/* VIRTUAL: slice i could not map its granules (`st`): it goes back as if
 * never served, no figure moved.  Refused for a capture (which maps
 * nothing), a free slice on mapped granules serves instead where one fits.
 * Out of line: the reservation's path keeps only the test. */
static hippo_status __attribute__((noinline))
virtual_refused(sliced *p, uint32_t i, uint64_t size, uint64_t bytes,
                hippo_status st, hippo__slice_ref *out) {
  uint64_t u = bytes >> p->head.align_shift;
  found f;
  hippo__sliced_free_slice(p, i);
  if (st != HIPPO_GRAPH_NEEDS_PAGE)
    return st;
  settle_kind(p, false);
  f = hippo__virtual_find_mapped(p, u);
  if (f.i == NIL)
    return st;
  i = take_free(p, f, u, (uint32_t)(bytes - size));
  (void)hippo__vtouch(p, i); /* its granules are mapped: it cannot fail */
  served(p, i, size, bytes, out, true);
  return HIPPO_SUCCESS;
}

/* A reservation, written once for the three kinds; `arena` and `virt`
 * are constants in each caller (p->arena, p->virt), so the SLICED path
 * carries no ARENA or VIRTUAL branch.  ARENA takes the best fit of a few
 * (find_best); VIRTUAL the best fit to a class (find_near), then counts
 * the slice on its granules, and reads no page record (its one page, the
 * range, never closes). */
HOT hippo_status reserve_kind(hippo__pool *pool, uint64_t size,
                              hippo__slice_ref *out, bool arena, bool virt) {
  sliced *p = (sliced *)pool;
  uint64_t bytes, u;
  uint32_t i;
  found f;
  hippo_status st;

  settle_kind(p, arena);
  /* size <= max_size, validated not to overflow when aligned */
  bytes = (size + pool->alignment - 1) & ~(pool->alignment - 1);
  u = bytes >> pool->align_shift;
  /* at most two: a new page's slice or a retired record's move, and a
   * split */
  st = reserve_nodes(p, 2);
  if (st != HIPPO_SUCCESS)
    return st;
  f = virt ? find_near(p, u) : arena ? find_best(p, u) : find_free(p, u);
  if (HIPPO__UNLIKELY(f.i == NIL)) {
    if (!arena && !virt && p->head.pages >= p->max_pages) /* hippo__sliced_page_add's answer */
      return no_page(p, bytes, p->page_size);
    st = new_room(p, bytes, &f.i);
    if (st != HIPPO_SUCCESS)
      return st;
    f.cls = class_of(p->slices[f.i].size);
  }
  i = take_free(p, f, u, (uint32_t)(bytes - size));
  if (virt && HIPPO__UNLIKELY((st = hippo__vtouch(p, i)) != HIPPO_SUCCESS))
    return virtual_refused(p, i, size, bytes, st, out);
  served(p, i, size, bytes, out, virt);
  return HIPPO_SUCCESS;
}

static hippo_status sliced_reserve(hippo__pool *pool, uint64_t size,
                                   hippo__slice_ref *out) {
  return reserve_kind(pool, size, out, false, false);
}

static hippo_status arena_reserve(hippo__pool *pool, uint64_t size,
                                  hippo__slice_ref *out) {
  return reserve_kind(pool, size, out, true, false);
}

static hippo_status virtual_reserve(hippo__pool *pool, uint64_t size,
                                    hippo__slice_ref *out) {
  return reserve_kind(pool, size, out, false, true);
}

/* Merge slice b (above) into a (below); b's node is dropped. */
HOT void merge(sliced *p, uint32_t a, uint32_t b) {
  slice *sa = &p->slices[a], *sb = &p->slices[b];
  sa->size += sb->size;
  sa->next_phys = sb->next_phys;
  *phys_link(p, sb->next_phys) = a;
  node_drop(p, b);
}

/* Live or held slice i becomes free: its generation moves on, it merges
 * with its free neighbours, and its page waits once empty.  The page is
 * read once (an ARENA's closed flag) for the slice and its neighbours;
 * `arena` is p->arena, a constant where the caller knows the kind.
 * (Measured and dropped: two bits in each live record noting which
 * neighbour is free, so a release reads a neighbour only to merge it; the
 * writes that keep the notes, into neighbour records that miss the cache
 * as the reads did, cost more: B at 100,000 live 75 -> 80 ns a pair.) */
HOT void coalesce_kind(sliced *p, uint32_t i, bool arena, uint64_t now) {
  slice *s = &p->slices[i];
  bool open = serves_kind(p, i, arena);
  uint32_t n;
  n = s->prev_phys;
  if (n != NIL && STATE(&p->slices[n]) == SLICE_FREE) {
    free_take(p, n, open);
    merge(p, n, i);
    i = n;
  }
  n = p->slices[i].next_phys;
  if (n != NIL && STATE(&p->slices[n]) == SLICE_FREE) {
    free_take(p, n, open);
    merge(p, i, n);
  }
  free_put(p, i, open);
  if (HIPPO__UNLIKELY(whole_page(p, i))) { /* its page is empty now */
    uint32_t pg = p->slices[i].page;
    if (p->pages[pg].closed)
      p->closed_busy--;
    empty_push(p, pg, now); /* stamped with the clock of the release */
  }
}

HOT void free_slice_kind(sliced *p, uint32_t i, bool arena) {
  slice *s = &p->slices[i];
  s->sg = SLICE_FREE << 24 | hippo__gen_next(GEN(s), p->first_gen);
  coalesce_kind(p, i, arena, p->head.now);
}

void hippo__sliced_free_slice(sliced *p, uint32_t i) {
  free_slice_kind(p, i, p->arena);
}

/* The pending slice, if any, is merged now (see sliced.pending). */
HOT void settle_kind(sliced *p, bool arena) {
  uint32_t i = p->pending;
  if (i == NIL)
    return;
  p->pending = NIL;
  if (p->head.gate)
    p->head.gate->unsettled = NULL;
  coalesce_kind(p, i, arena, p->pending_now);
}

/* settle_kind for the entries off the reservation path.  A const entry
 * (a report, the check walk) settles too: merging is the release's own
 * work finished late, and changes no figure a caller can see. */
void __attribute__((noinline)) hippo__sliced_settle(const sliced *cp) {
  sliced *p = (sliced *)(uintptr_t)cp; /* pools are never const objects */
  settle_kind(p, p->arena);
}

/* The table's settle: another pool of the stream releases, or the
 * manager ticks (pool.h). */
static void sliced_settle(hippo__pool *pool) {
  hippo__sliced_settle((const sliced *)pool);
}

/* Release live slice i; returns the size it was reserved with.  A slice
 * with holds is kept out of use (GUARDED, counted guarded until waits()
 * says which of its holds are record_use ones) instead of becoming free.
 * `arena` as for free_slice_kind. */
HOT uint64_t release_kind(sliced *p, uint32_t i, bool arena, bool defer) {
  slice *s = &p->slices[i];
  uint64_t bytes = (uint64_t)s->size << p->head.align_shift;
  uint64_t size = bytes - s->prev_free;
  hippo__pool_note_release(&p->head, size, bytes);
  if (HIPPO__UNLIKELY(s->next_free)) {
    s->sg = SLICE_GUARDED << 24 | hippo__gen_next(GEN(s), p->first_gen);
    s->prev_free = 0; /* its record_use holds (waits) */
    p->head.bytes_guarded += bytes;
    return size;
  }
  if (defer) { /* see sliced.pending */
    s->sg = SLICE_FREE << 24 | hippo__gen_next(GEN(s), p->first_gen);
    p->pending = i;
    p->pending_now = p->head.now;
    if (p->head.gate) { /* at most one pool of the stream waits */
      hippo__pool *other = p->head.gate->unsettled;
      if (HIPPO__UNLIKELY(other != NULL && other != &p->head))
        other->ops->settle(other);
      p->head.gate->unsettled = &p->head;
    }
    return size;
  }
  free_slice_kind(p, i, arena);
  return size;
}

uint64_t hippo__sliced_release_slice(sliced *p, uint32_t i) {
  return release_kind(p, i, p->arena, false);
}

/* A GUARDED slice's holds (next_free) change by dh, its record_use ones
 * (prev_free) by dw (pool.h). */
static void guarded_change(hippo__pool *pool, slice *s, int dh, int dw) {
  hippo__pool_holds_change(pool, (uint64_t)s->size << pool->align_shift,
                           &s->next_free, &s->prev_free, dh, dw);
}

static void sliced_hold(hippo__pool *pool, uint32_t i) {
  slice *s = &((sliced *)pool)->slices[i];
  hippo__sliced_settle((const sliced *)pool);
  pool->holds++;
  if (STATE(s) == SLICE_GUARDED)
    guarded_change(pool, s, 1, 0);
  else
    s->next_free++;
}

void hippo__sliced_unhold(hippo__pool *pool, uint32_t i, bool wait) {
  sliced *p = (sliced *)pool;
  slice *s = &p->slices[i];
  hippo__sliced_settle(p);
  pool->holds--;
  if (STATE(s) != SLICE_GUARDED) {
    s->next_free--; /* live: its padding stays in prev_free */
    return;
  }
  guarded_change(pool, s, -1, wait && s->prev_free ? -1 : 0);
  if (s->next_free == 0)
    hippo__sliced_free_slice(p, i);
}

void hippo__sliced_waits(hippo__pool *pool, uint32_t i, uint32_t n) {
  slice *s = &((sliced *)pool)->slices[i];
  hippo__sliced_settle((const sliced *)pool);
  if (STATE(s) == SLICE_GUARDED)
    guarded_change(pool, s, 0, (int)n - (int)s->prev_free);
}

void hippo__sliced_release(hippo__pool *pool, uint32_t i, uint64_t size) {
  hippo__sliced_settle((const sliced *)pool);
  (void)size; /* the record keeps it */
  (void)hippo__sliced_release_slice((sliced *)pool, i);
}

static inline bool is_live(const sliced *p, uint32_t i, uint32_t gen) {
  return i < p->slice_count && p->slices[i].sg == (SLICE_LIVE << 24 | gen);
}

/* release_named, written once for the three kinds (`arena` and `virt`
 * constants in each caller, as for reserve_kind: the SLICED release reads
 * no page).  A VIRTUAL slice no graph holds counts off its granules; a
 * held one keeps counting until its last hold goes (unhold). */
HOT bool release_named_kind(hippo__pool *pool, uint32_t i, uint32_t gen,
                            uint64_t *size, bool arena, bool virt) {
  sliced *p = (sliced *)pool;
  settle_kind(p, arena);
  if (HIPPO__UNLIKELY(!is_live(p, i, gen)))
    return false;
  if (virt && HIPPO__LIKELY(p->slices[i].next_free == 0))
    hippo__vuntouch(p, i);
  *size = release_kind(p, i, arena, true);
  return true;
}

static bool sliced_release_named(hippo__pool *pool, uint32_t i, uint32_t gen,
                                 uint64_t *size) {
  return release_named_kind(pool, i, gen, size, false, false);
}

static bool arena_release_named(hippo__pool *pool, uint32_t i, uint32_t gen,
                                uint64_t *size) {
  return release_named_kind(pool, i, gen, size, true, false);
}

static bool virtual_release_named(hippo__pool *pool, uint32_t i, uint32_t gen,
                                  uint64_t *size) {
  return release_named_kind(pool, i, gen, size, false, true);
}

static bool sliced_resolve_named(const hippo__pool *pool, uint32_t i,
                                 uint32_t gen, uint64_t *addr,
                                 uint64_t *size) {
  const sliced *p = (const sliced *)pool;
  const slice *s;
  uint64_t bytes;
  if (HIPPO__UNLIKELY(!is_live(p, i, gen)))
    return false;
  s = &p->slices[i];
  bytes = (uint64_t)s->size << pool->align_shift;
  *addr = p->pages[s->page].addr + ((uint64_t)s->off << pool->align_shift);
  *size = bytes - s->prev_free;
  return true;
}

void hippo__sliced_release_all(hippo__pool *pool) {
  sliced *p = (sliced *)pool;
  hippo__sliced_settle(p);
  /* a release drops only free records, so every live one is still met;
   * held slices go too (stream_detach: the stream is going away); slices a
   * graph holds stay, guarded, until graph_retire or destroy */
  for (uint32_t i = 0; i < p->slice_count; i++)
    if (STATE(&p->slices[i]) == SLICE_LIVE) {
      (void)hippo__sliced_release_slice(p, i);
    } else if (STATE(&p->slices[i]) == SLICE_HELD) {
      pool->bytes_stranded -= (uint64_t)p->slices[i].size << pool->align_shift;
      hippo__sliced_free_slice(p, i);
    }
}

/* Give an empty page back; on failure it stays, still one free slice. */
hippo_status hippo__sliced_page_drop(sliced *p, uint32_t pg) {
  page *g = &p->pages[pg];
  hippo_status st = hippo__pool_page_free(&p->head, g->addr, g->size);
  if (st != HIPPO_SUCCESS)
    return hippo__error_wrap(st, "%s pool: freeing a page of %llu B",
                             p->arena ? "ARENA" : "SLICED",
                             (unsigned long long)g->size);
  hippo__sliced_page_forget(p, pg);
  return HIPPO_SUCCESS;
}

/* Empty page pg's records go: its one free slice to the unused records,
 * its slot to the unused slots; its memory is the caller's. */
void hippo__sliced_page_forget(sliced *p, uint32_t pg) {
  page *g = &p->pages[pg];
  empty_remove(p, pg);
  free_take(p, g->first, !g->closed);
  node_drop(p, g->first);
  if (g->closed) {
    p->closed_pages--;
    p->closed_bytes -= g->size;
  }
  if (--p->sizes[g->szslot].pages == 0 && g->szslot != p->cur)
    p->sizes_alive--;
  g->held = 0;
  g->closed = 0;
  g->wait.newer = p->page_unused;
  p->page_unused = pg;
}

/* A page whose free failed is kept and waits a whole period behind the
 * others (so a free that keeps failing costs a call per period, not per
 * reservation); a closed page of the current size serves again meanwhile,
 * so a page that cannot go back is at least used. */
static void drop_failed(sliced *p, uint32_t pg) {
  page *g = &p->pages[pg];
  empty_remove(p, pg);
  if (g->closed && g->szslot == p->cur) {
    hippo__sliced_page_open(p, pg); /* back on the FIFO */
    return;
  }
  /* outdated ones wait there too, closed */
  empty_push_to(p, pg, false, p->head.now);
}

static hippo_status fifo_drop(void *ctx, uint32_t pg) {
  return hippo__sliced_page_drop(ctx, pg);
}

static void fifo_failed(void *ctx, uint32_t pg) { drop_failed(ctx, pg); }

const hippo__fifo_drop hippo__sliced_page_dropper = {fifo_drop, fifo_failed,
                                                   "page"};

static hippo_status sliced_cleanup(hippo__pool *pool) {
  sliced *p = (sliced *)pool;
  hippo_status st, st2;
  hippo__sliced_settle(p);
  st = hippo__fifo_give_back(&p->drain, p->pages, pool, false, false,
                             &hippo__sliced_page_dropper, p);
  st2 = hippo__fifo_give_back(&p->empty, p->pages, pool, false, false,
                              &hippo__sliced_page_dropper, p);
  return st != HIPPO_SUCCESS ? st : st2;
}

static bool sliced_gives_back(const hippo__pool *pool) {
  const sliced *p = (const sliced *)pool;
  hippo__sliced_settle(p);
  return p->drain.front != HIPPO__FIFO_NIL ||
         p->empty.front != HIPPO__FIFO_NIL;
}

static hippo_status sliced_tick(hippo__pool *pool, uint64_t now) {
  sliced *p = (sliced *)pool;
  hippo_status st, st2;
  hippo__sliced_settle(p);
  if (now > pool->now)
    pool->now = now;
  if (pool->opt.dealloc_period == 0)
    return HIPPO_SUCCESS;
  st = hippo__fifo_give_back(&p->drain, p->pages, pool, false, true,
                             &hippo__sliced_page_dropper, p);
  st2 = hippo__fifo_give_back(&p->empty, p->pages, pool, true, true,
                              &hippo__sliced_page_dropper, p);
  return st != HIPPO_SUCCESS ? st : st2;
}

void hippo__sliced_report(const hippo__pool *pool,
                          hippo_pool_report *out) {
  const sliced *p = (const sliced *)pool;
  hippo__sliced_settle(p);
  hippo__pool_report_head(pool, out);
  out->current_page_size = p->page_size;
  out->outdated_pages = p->closed_pages;
  out->outdated_bytes = p->closed_bytes;
  out->page_sizes = p->sizes_alive;
  if (p->fl_bitmap) {
    unsigned fl = hippo__log2_floor(p->fl_bitmap);
    unsigned sl = hippo__log2_floor(p->sl_bitmap[fl]);
    for (uint32_t i = p->heads[CLS(fl, sl)]; i != NIL;
         i = p->slices[i].next_free)
      if (((uint64_t)p->slices[i].size << pool->align_shift) >
          out->largest_free)
        out->largest_free = (uint64_t)p->slices[i].size << pool->align_shift;
  }
}

static void sliced_destroy(hippo__pool *pool) {
  sliced *p = (sliced *)pool;
  hippo__sliced_settle(p);
  for (uint32_t pg = 0; pg < p->page_count; pg++)
    if (p->pages[pg].held)
      (void)hippo__pool_page_free(pool, p->pages[pg].addr, p->pages[pg].size);
  hippo__sliced_free(p);
}

void hippo__sliced_free(sliced *p) {
  free(p->slices);
  free(p->pages);
  free(p);
}

/* Hand the records over (pools_install replaces the pool, which holds no
 * page, so every record is unused or retired); the pool keeps none.  With
 * a page still held (never, by pools_install's rule) nothing is handed. */
void hippo__sliced_names_take(hippo__pool *pool, hippo__names *out) {
  sliced *p = (sliced *)pool;
  hippo__sliced_settle(p);
  memset(out, 0, sizeof *out);
  if (pool->pages != 0 || !p->slices)
    return;
  *out = (hippo__names){.records = p->slices,
                        .count = p->slice_count,
                        .cap = p->slice_cap,
                        .unused = p->slice_unused,
                        .retired = p->retired,
                        .first_gen = p->first_gen};
  p->slices = NULL;
  p->slice_count = p->slice_cap = p->retired = p->unused_count = 0;
  p->slice_unused = NIL;
  crowd_update(p);
}

/* A fresh pool (no record yet) adopts handed-over records. */
static void sliced_names_give(hippo__pool *pool, const hippo__names *in) {
  sliced *p = (sliced *)pool;
  hippo__sliced_settle(p);
  free(p->slices);
  p->slices = in->records;
  p->slice_count = in->count;
  p->slice_cap = in->cap;
  crowd_update(p);
  p->slice_unused = in->unused;
  p->unused_count = in->count - in->retired; /* every record unused or
                                                retired */
  p->retired = in->retired;
  p->first_gen = in->first_gen;
}

uint64_t hippo__sliced_addr(const hippo__pool *pool, uint32_t i) {
  const sliced *p = (const sliced *)pool;
  return p->pages[p->slices[i].page].addr +
         ((uint64_t)p->slices[i].off << pool->align_shift);
}

void hippo__pool_sliced_limit_records(hippo__pool *pool, uint32_t n) {
  sliced *p = (sliced *)pool;
  p->max_records = n < HIPPO__HANDLE_MAX_SLOTS ? n : HIPPO__HANDLE_MAX_SLOTS;
}

bool hippo__pool_sliced_crowd_at(hippo__pool *pool, uint32_t n) {
  sliced *p = (sliced *)pool;
  p->crowd_at = n;
  crowd_update(p);
  return p->crowded;
}


/* The operations both kinds share; an ARENA adds relocation's. */
#define SLICED_OPS                                                             \
  .release = hippo__sliced_release, .addr = hippo__sliced_addr,               \
  .hold = sliced_hold, .unhold = hippo__sliced_unhold,                         \
  .waits = hippo__sliced_waits,                                                \
  .cleanup = sliced_cleanup, .gives_back = sliced_gives_back,                  \
  .tick = sliced_tick, .report = hippo__sliced_report,                         \
  .check = hippo__sliced_check, .destroy = sliced_destroy,                     \
  .resolve_named = sliced_resolve_named,                                       \
  .release_all = hippo__sliced_release_all, .settle = sliced_settle,           \
  .names_take = hippo__sliced_names_take, .names_give = sliced_names_give

static const hippo__pool_ops sliced_ops = {
    SLICED_OPS, .reserve = sliced_reserve,
    .release_named = sliced_release_named};

static const hippo__pool_ops arena_ops = {
    SLICED_OPS,
    .reserve = arena_reserve,
    .release_named = arena_release_named,
    .move = &hippo__arena_move_ops,
};

/* VIRTUAL: the shared operations, with the granules' (pool_virtual.c)
 * where a reservation, release or hold changes what touches them, and its
 * own cleanup, tick, report and destroy. */
static const hippo__pool_ops virtual_ops = {
    .reserve = virtual_reserve,
    .release = hippo__virtual_release,
    .addr = hippo__sliced_addr,
    .cleanup = hippo__virtual_cleanup,
    .gives_back = hippo__virtual_gives_back,
    .tick = hippo__virtual_tick,
    .report = hippo__virtual_report,
    .check = hippo__sliced_check,
    .destroy = hippo__virtual_destroy,
    .hold = sliced_hold,
    .unhold = hippo__virtual_unhold,
    .waits = hippo__sliced_waits,
    .release_named = virtual_release_named,
    .resolve_named = sliced_resolve_named,
    .release_all = hippo__virtual_release_all,
    .settle = sliced_settle,
    .names_take = hippo__virtual_names_take,
    .names_give = sliced_names_give,
    .move = &hippo__virtual_move_ops,
};

/* What both kinds set up alike; NULL (last_error set) without host
 * memory. */
static sliced *sliced_new(hippo__backend *be, hippo__page_acct *acct,
                          const hippo__pool_ops *ops, hippo_pool_kind kind,
                          const hippo_pool_options *opt, uint64_t page_size) {
  sliced *p = calloc(1, sizeof *p);
  if (!p) {
    hippo__error_set(HIPPO_OUT_OF_MEMORY, "host memory for a %s pool",
                     kind == HIPPO_POOL_ARENA ? "ARENA" : "SLICED");
    return NULL;
  }
  hippo__pool_head_init(&p->head, ops, be, acct, kind, opt,
                        opt->max_slice_size);
  p->page_size = page_size;
  p->sizes[0].size = page_size;
  p->sizes_alive = 1;
  p->max_pages = UINT64_MAX;
  p->cap_bytes = UINT64_MAX;
  p->slice_unused = NIL;
  p->pending = NIL;
  p->first_gen = hippo__gen_first();
  p->max_records = HIPPO__HANDLE_MAX_SLOTS;
  p->crowd_at = CROWDED_RECORDS;
  p->page_unused = NIL;
  hippo__fifo_init(&p->empty, sizeof(page), offsetof(page, wait));
  hippo__fifo_init(&p->drain, sizeof(page), offsetof(page, wait));
  memset(p->heads, 0xff, sizeof p->heads);
  return p;
}

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
  p = sliced_new(be, acct, &sliced_ops, HIPPO_POOL_SLICED, opt, page_size);
  if (!p)
    return HIPPO_OUT_OF_MEMORY;
  p->max_pages = max_pages;
  p->head.opt.page_size = page_size; /* in force: shrunk to a cap */
  *out = &p->head;
  return HIPPO_SUCCESS;
}

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
  p = sliced_new(be, acct, &arena_ops, HIPPO_POOL_ARENA, opt, floor);
  if (!p)
    return HIPPO_OUT_OF_MEMORY;
  p->arena = true;
  p->floor = floor;
  p->head.max_size = max;
  if (opt->max_pool_size)
    p->cap_bytes = opt->max_pool_size;
  *out = &p->head;
  return HIPPO_SUCCESS;
}

hippo_status hippo__pool_virtual_create(hippo__backend *be,
                                        hippo__page_acct *acct,
                                        const hippo_pool_options *opt,
                                        hippo__pool **out) {
  uint64_t range = opt->range_size, granule = opt->granule;
  sliced *p;
  if (!be->ops->vm_map || !hippo__is_pow2(granule) || range % granule ||
      granule % be->alignment || range / granule > HIPPO__VIRTUAL_MAX_GRANULES ||
      (range >> hippo__log2_floor(be->alignment)) > UINT32_MAX)
    return hippo__error_set(HIPPO_POOL_CONFIG,
                            "VIRTUAL pool: a range of %llu B in granules of "
                            "%llu B does not fit the device (alignment %llu "
                            "B, virtual memory %s)",
                            (unsigned long long)range,
                            (unsigned long long)granule,
                            (unsigned long long)be->alignment,
                            be->ops->vm_map ? "yes" : "none");
  p = sliced_new(be, acct, &virtual_ops, HIPPO_POOL_VIRTUAL, opt, range);
  if (!p)
    return HIPPO_OUT_OF_MEMORY;
  p->vg.ref = calloc(range / granule, sizeof *p->vg.ref);
  p->vg.heads = calloc((range / granule + 63) / 64, sizeof *p->vg.heads);
  p->vg.stamp = calloc(range / granule, sizeof *p->vg.stamp);
  if (!p->vg.ref || !p->vg.heads || !p->vg.stamp) {
    free(p->vg.ref);
    free(p->vg.heads);
    free(p->vg.stamp);
    hippo__sliced_free(p);
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "host memory for a VIRTUAL pool of %llu granules",
                            (unsigned long long)(range / granule));
  }
  p->virt = true;
  p->vg.count = range / granule;
  p->vg.size = granule;
  p->vg.shift = hippo__log2_floor(granule);
  p->vg.ushift = p->vg.shift - p->head.align_shift;
  p->vg.range_size = range;
  p->vg.threshold = opt->unmap_threshold;
  p->vg.budget = opt->map_budget;
  p->head.max_size = opt->max_slice_size;
  *out = &p->head;
  return HIPPO_SUCCESS;
}
