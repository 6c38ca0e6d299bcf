/* sliced_paths.h -- the sliced core's hot paths, written once and
 * inlined into every kind's file (private to sliced.c and the kinds:
 * pool_sliced.c, pool_arena.c, pool_virtual.c): taking and splitting a
 * free slice, releasing and merging one, and the reservation and
 * release-by-name paths, each parameterized by the kind's constant table
 * (sliced.h, hippo__sliced_kind).  A kind calls these down into the
 * core; the core calls no kind but through the table's cold hooks.
 * (Inlined, a constant table costs no indirect call: the compiler reads
 * the hooks at compile time.)
 */
#ifndef HIPPO_SLICED_PATHS_H
#define HIPPO_SLICED_PATHS_H

#include "sliced.h"
#include "sliced_index.h"


/* A record (room was made) that keeps its generation, or a fresh one. */
static inline uint32_t node_new(sliced *p) {
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

static inline void node_drop(sliced *p, uint32_t i) {
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
static inline uint32_t rehome(sliced *p, uint32_t i) {
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

/* Free slice i (found in the index, in class (fl, sl)) now serves `size`
 * bytes in `u` units: off the index, on a fresh record if its own is
 * retired, split, live.  Returns the record (i, or where it moved). */
HOT uint32_t
take_free(sliced *p, found f, uint64_t u, uint32_t padding) {
  uint32_t i = f.i;
  slice *s;
  free_unlink(p, i, f.cls, true);
  if (HIPPO__UNLIKELY(whole_page(p, i))) /* its page is empty no more */
    hippo__sliced_empty_remove(p, p->slices[i].page);
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

/* Slice i serves a reservation of `size` (`bytes` aligned): the figures
 * and the caller's reference. */
static inline void hippo__sliced_served(sliced *p, uint32_t i, uint64_t size,
                                        uint64_t bytes,
                                        hippo__slice_ref *out) {
  const slice *s = &p->slices[i];
  hippo__pool_note_reserve(&p->head, size, bytes);
  out->addr = p->pages[s->page].addr + ((uint64_t)s->off << p->head.align_shift);
  out->slice = i;
  out->gen = GEN(s);
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
    hippo__sliced_empty_push(p, pg, now); /* stamped with the clock of the release */
  }
}

HOT void free_slice_kind(sliced *p, uint32_t i, bool arena) {
  slice *s = &p->slices[i];
  s->sg = SLICE_FREE << 24 | hippo__gen_next(GEN(s), p->first_gen);
  coalesce_kind(p, i, arena, p->head.now);
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

static inline bool is_live(const sliced *p, uint32_t i, uint32_t gen) {
  return i < p->slice_count && p->slices[i].sg == (SLICE_LIVE << 24 | gen);
}

/* A reservation, written once for every kind: `k` is the kind's own
 * constant table, so each kind's path carries only its own branches (the
 * SLICED path none of ARENA's or VIRTUAL's).  The fit is the kind's
 * (find_free, find_best, find_near); a kind with `touch` then has the
 * slice counted (VIRTUAL: on its granules; a refusal goes to `refused`),
 * and one that never closes a page reads no page record. */
HOT hippo_status hippo__sliced_reserve_kind(hippo__pool *pool, uint64_t size,
                                            hippo__slice_ref *out,
                                            const hippo__sliced_kind *k) {
  sliced *p = (sliced *)pool;
  uint64_t bytes, u;
  uint32_t i;
  found f;
  hippo_status st;

  settle_kind(p, k->arena);
  /* size <= max_size, validated not to overflow when aligned */
  bytes = (size + pool->alignment - 1) & ~(pool->alignment - 1);
  u = bytes >> pool->align_shift;
  /* at most two: a new page's slice or a retired record's move, and a
   * split */
  st = reserve_nodes(p, 2);
  if (st != HIPPO_SUCCESS)
    return st;
  f = k->fit == HIPPO__FIT_NEAR   ? find_near(p, u)
      : k->fit == HIPPO__FIT_BEST ? find_best(p, u)
                                  : find_free(p, u);
  if (HIPPO__UNLIKELY(f.i == NIL)) {
    st = k->new_room(p, bytes, &f.i);
    if (st != HIPPO_SUCCESS)
      return st;
    f.cls = class_of(p->slices[f.i].size);
  }
  i = take_free(p, f, u, (uint32_t)(bytes - size));
  if (k->touch && HIPPO__UNLIKELY((st = k->touch(p, i)) != HIPPO_SUCCESS))
    return k->refused(p, i, size, bytes, st, out);
  hippo__sliced_served(p, i, size, bytes, out);
  return HIPPO_SUCCESS;
}

/* release_named, written once for every kind (`k` constant in each
 * caller, as for reserve_kind: the SLICED release reads no page).  A
 * slice no graph holds is counted off (`untouch`: VIRTUAL, its granules);
 * a held one stays counted until its last hold goes (the kind's unhold). */
HOT bool hippo__sliced_release_named_kind(hippo__pool *pool, uint32_t i,
                                          uint32_t gen, uint64_t *size,
                                          const hippo__sliced_kind *k) {
  sliced *p = (sliced *)pool;
  settle_kind(p, k->arena);
  if (HIPPO__UNLIKELY(!is_live(p, i, gen)))
    return false;
  if (k->untouch && HIPPO__LIKELY(p->slices[i].next_free == 0))
    k->untouch(p, i);
  *size = release_kind(p, i, k->arena, true);
  return true;
}

#endif /* HIPPO_SLICED_PATHS_H */
