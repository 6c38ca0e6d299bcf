/* sliced.c -- the sliced core: what the SLICED, ARENA and VIRTUAL pools
 * share (sliced.h states its records' invariants and the contract a kind
 * supplies, hippo__sliced_kind).  This file holds the slice records and
 * their generations, the pages and their waiting lists, periodic
 * deallocation, the shared operations of the pool table (release, holds,
 * cleanup, tick, reports, names) and the pool's construction; its hot
 * paths (taking, splitting, merging, the reservation and release-by-name
 * paths) are sliced_paths.h, inlined into each kind's file, and the free
 * index is sliced_index.h.  The kinds (pool_sliced.c, pool_arena.c with
 * pool_arena_relocation.c, pool_virtual.c) call down into the core; it
 * calls a kind only through its table's cold hooks (new_room, check).
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

#include "sliced_paths.h"



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
void hippo__sliced_empty_push(sliced *p, uint32_t pg, uint64_t since) {
  empty_push_to(p, pg, p->pages[pg].closed, since);
}

/* Page pg leaves the list it waits on. */
void hippo__sliced_empty_remove(sliced *p, uint32_t pg) {
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
    hippo__sliced_empty_remove(p, pg);
  g->closed = 1;
  p->closed_pages++;
  p->closed_bytes += g->size;
  if (!page_empty(p, pg))
    p->closed_busy++;
  else
    hippo__sliced_empty_push(p, pg, p->head.now);
}

/* Page pg (closed, of the current size) serves again. */
void hippo__sliced_page_open(sliced *p, uint32_t pg) {
  page *g = &p->pages[pg];
  if (!g->closed)
    return;
  if (g->on != ON_NONE)
    hippo__sliced_empty_remove(p, pg);
  g->closed = 0;
  p->closed_pages--;
  p->closed_bytes -= g->size;
  if (!page_empty(p, pg))
    p->closed_busy--;
  for (uint32_t i = g->first; i != NIL; i = p->slices[i].next_phys)
    if (STATE(&p->slices[i]) == SLICE_FREE)
      free_insert(p, i);
  if (page_empty(p, pg))
    hippo__sliced_empty_push(p, pg, p->head.now);
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
  hippo__sliced_empty_push(p, pg, p->head.now);
  return si;
}

uint32_t hippo__sliced_take(sliced *p, found f, uint64_t u,
                            uint32_t padding) {
  return take_free(p, f, u, padding);
}

void hippo__sliced_free_slice(sliced *p, uint32_t i) {
  free_slice_kind(p, i, p->arena);
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
void hippo__sliced_settle_op(hippo__pool *pool) {
  hippo__sliced_settle((const sliced *)pool);
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

void hippo__sliced_hold(hippo__pool *pool, uint32_t i) {
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

bool hippo__sliced_resolve_named(const hippo__pool *pool, uint32_t i,
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
  hippo__sliced_empty_remove(p, pg);
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
  hippo__sliced_empty_remove(p, pg);
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

hippo_status hippo__sliced_cleanup(hippo__pool *pool) {
  sliced *p = (sliced *)pool;
  hippo_status st, st2;
  hippo__sliced_settle(p);
  st = hippo__fifo_give_back(&p->drain, p->pages, pool, false, false,
                             &hippo__sliced_page_dropper, p);
  st2 = hippo__fifo_give_back(&p->empty, p->pages, pool, false, false,
                              &hippo__sliced_page_dropper, p);
  return st != HIPPO_SUCCESS ? st : st2;
}

bool hippo__sliced_gives_back(const hippo__pool *pool) {
  const sliced *p = (const sliced *)pool;
  hippo__sliced_settle(p);
  return p->drain.front != HIPPO__FIFO_NIL ||
         p->empty.front != HIPPO__FIFO_NIL;
}

hippo_status hippo__sliced_tick(hippo__pool *pool, uint64_t now) {
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

void hippo__sliced_destroy(hippo__pool *pool) {
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
void hippo__sliced_names_give(hippo__pool *pool, const hippo__names *in) {
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

sliced *hippo__sliced_new(hippo__backend *be, hippo__page_acct *acct,
                          const hippo__pool_ops *ops,
                          const hippo__sliced_kind *k, hippo_pool_kind kind,
                          const hippo_pool_options *opt, uint64_t page_size) {
  sliced *p = calloc(1, sizeof *p);
  if (!p) {
    hippo__error_set(HIPPO_OUT_OF_MEMORY, "host memory for a %s pool",
                     k->name);
    return NULL;
  }
  hippo__pool_head_init(&p->head, ops, be, acct, kind, opt,
                        opt->max_slice_size);
  p->kind = k;
  p->arena = k->arena;
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
