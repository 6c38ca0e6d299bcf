/* sliced_index.h -- the free index of a SLICED or ARENA pool: a two-level
 * segregated fit (TLSF) over the free slices of the pool's open pages,
 * inlined into the reservation and release paths (sliced_paths.h) and the
 * relocation plan (pool_arena_relocation.c).
 *
 * Free slices are found in constant time: sizes, counted in alignment
 * units u, map to a first level fl = floor(log2 u) - 3 and a second level
 * sl = the next 4 bits below the top bit (u < 16 maps to fl 0, sl u).  A
 * bitmap of non-empty first levels and one bitmap per first level find the
 * smallest class that surely fits with two count-trailing-zeros.  The
 * search rounds the request up to the next class boundary ("good fit"), so
 * any slice of the found class fits; only before taking a new page does it
 * also look at a few slices of the request's own class (bounded), so a
 * fitting slice is not missed there.  An ARENA takes the best fit of a few
 * (find_best).
 *
 * Invariant (sliced.h, struct sliced): fl_bitmap bit f set <=>
 * sl_bitmap[f] != 0; sl_bitmap[f] bit s set <=> heads[CLS(f, s)] != NIL;
 * the free slices of open pages, each in the list of its class, are all
 * the index holds.  hippo__sliced_check verifies it.
 */
#ifndef HIPPO_SLICED_INDEX_H
#define HIPPO_SLICED_INDEX_H

#include "sliced.h"

/* A class as one number, fl * SL_COUNT + sl, and back. */
#define CLS(fl, sl) ((uint32_t)(fl) << SL_BITS | (uint32_t)(sl))
#define CLS_FL(c) ((c) >> SL_BITS)
#define CLS_SL(c) ((c) & (SL_COUNT - 1))
#define EXACT_SCAN 8 /* slices of the request's own class tried at most */
#define BEST_SCAN 2  /* ARENA: slices of a class compared for the best fit
                        (every footprint of make bench's F is the same with
                        2 as with 4, random.csv's without relocation lower,
                        1.2225 -> 1.2066; 1 costs pt_cs336 1.0274 -> 1.0386
                        and somas 1.1946 -> 1.2319; each slice looked at is
                        a dependent load on the reservation path) */

/* The class of u units, fl * SL_COUNT + sl, without a branch (log-uniform
 * sizes make a branch on u < SL_COUNT unpredictable): with sh = floor(log2
 * u) - SL_BITS (0 below 2 * SL_COUNT), u >> sh is SL_COUNT + sl, and
 * u < SL_COUNT lands in first level 0 with sl = u.  *shift is sh (a
 * class holds sizes 2^sh apart). */
static inline uint32_t class_shift(uint64_t u, unsigned *shift) {
  unsigned sh = hippo__log2_floor(u | SL_COUNT) - SL_BITS;
  *shift = sh;
  return (sh << SL_BITS) + (uint32_t)(u >> sh);
}

static inline uint32_t class_of(uint64_t u) {
  unsigned sh;
  return class_shift(u, &sh);
}

/* The 32-bit field at byte `off` of record i, or (i == NIL) `other`,
 * chosen without a branch (the compiler turned the plain conditional into
 * one): whether a class list already holds a slice, or a slice ends its
 * page, is data a branch predictor cannot learn on a pool of few slices
 * per class, and a mispredicted branch costs more than computing both
 * addresses (make bench A presets 12 % faster, B at 100 live 9 %).  The
 * address of record NIL is computed as an integer, never used. */
static inline uint32_t *link_or(const sliced *p, uint32_t i, size_t off,
                                uint32_t *other) {
  uintptr_t at = (uintptr_t)p->slices + (uintptr_t)i * sizeof(slice) + off;
  uintptr_t nil = -(uintptr_t)(i == NIL);
  return (uint32_t *)((at & ~nil) | ((uintptr_t)other & nil));
}

/* Where a list link back to a slice is written: i's prev_free, or (i ==
 * NIL: no slice follows) the pool's scratch word. */
static inline uint32_t *prev_link(sliced *p, uint32_t i) {
  return link_or(p, i, offsetof(slice, prev_free), &p->scratch);
}

/* Where a neighbour link to `i` is written (its prev_phys, or scratch). */
static inline uint32_t *phys_link(sliced *p, uint32_t i) {
  return link_or(p, i, offsetof(slice, prev_phys), &p->scratch);
}

/* Free slice i (state FREE already) enters the list of its class.
 * Crowded (see sliced.crowded), the lists are long: a branch on whether
 * the class was empty is learnt, and the bitmaps are written only when it
 * was.  Otherwise the writes are unconditional, without a branch. */
HOT void free_insert(sliced *p, uint32_t i) {
  slice *s = &p->slices[i];
  uint32_t c = class_of(s->size);
  uint32_t next = p->heads[c];
  s->prev_free = NIL;
  s->next_free = next;
  p->heads[c] = i;
  if (p->crowded) {
    if (HIPPO__LIKELY(next != NIL)) {
      p->slices[next].prev_free = i;
      return;
    }
  } else {
    *prev_link(p, next) = i;
  }
  p->sl_bitmap[CLS_FL(c)] |= 1u << CLS_SL(c);
  p->fl_bitmap |= UINT64_C(1) << CLS_FL(c);
}

/* Free slice i, of class c, leaves its list.  A reservation (`taking`)
 * takes a class's head, so prev is NIL, a branch the predictor learns;
 * there the conditionals stay branches, measured: on long lists (100,000
 * live) a select made each store wait for the record's links to load (B
 * at 100,000 live 52 -> 57 ns a pair).  A release's neighbour sits
 * anywhere in its list, and there both links are chosen without a branch
 * (B at 100 live 45.0 -> 43.3), unless the pool is crowded (long lists:
 * the branches are learnt, as for a reservation). */
HOT void free_unlink(sliced *p, uint32_t i, uint32_t c, bool taking) {
  slice *s = &p->slices[i];
  uint32_t next = s->next_free, prev = s->prev_free, slmap;
  unsigned fl = CLS_FL(c), sl = CLS_SL(c);
  if (taking || p->crowded) {
    *(prev != NIL ? &p->slices[prev].next_free : &p->heads[c]) = next;
    *(next != NIL ? &p->slices[next].prev_free : &p->scratch) = prev;
  } else {
    *link_or(p, prev, offsetof(slice, next_free), &p->heads[c]) = next;
    *prev_link(p, next) = prev;
  }
  /* the list is empty now when i was its only slice (the values in hand,
   * not a reload of what was just stored); crowded, as for free_insert */
  if (p->crowded) {
    if (HIPPO__LIKELY((prev & next) != NIL))
      return;
    slmap = p->sl_bitmap[fl] & ~(1u << sl);
    p->sl_bitmap[fl] = slmap;
    if (!slmap)
      p->fl_bitmap &= ~(UINT64_C(1) << fl);
    return;
  }
  slmap = p->sl_bitmap[fl] & ~((uint32_t)((prev & next) == NIL) << sl);
  p->sl_bitmap[fl] = slmap;
  p->fl_bitmap &= ~((uint64_t)(slmap == 0) << fl);
}

/* Free slice i leaves its list (not a reservation's take). */
HOT void free_remove(sliced *p, uint32_t i) {
  free_unlink(p, i, class_of(p->slices[i].size), false);
}


/* Slice i, now FREE, goes into the free index when its page serves
 * (`open`: serves_kind, asked once by a caller that frees several slices
 * of one page), else (closed page) in no list. */
HOT void free_put(sliced *p, uint32_t i, bool open) {
  slice *s = &p->slices[i];
  if (HIPPO__LIKELY(open)) {
    free_insert(p, i);
    return;
  }
  s->prev_free = s->next_free = NIL;
}

/* Free slice i leaves the free index (if its page serves: `open`, as
 * for free_put). */
HOT void free_take(sliced *p, uint32_t i, bool open) {
  if (HIPPO__LIKELY(open))
    free_remove(p, i);
}


/* The head of the smallest non-empty class at or above class c.  (A
 * select instead of the branch between c's first level and the next was
 * measured slower.) */
static inline found find_class(const sliced *p, uint32_t c) {
  unsigned fl = CLS_FL(c);
  uint32_t slmap = p->sl_bitmap[fl] & (~0u << CLS_SL(c));
  if (!slmap) {
    uint64_t flmap =
        fl + 1 < FL_COUNT ? p->fl_bitmap & (~UINT64_C(0) << (fl + 1)) : 0;
    if (!flmap)
      return (found){NIL, 0};
    fl = (unsigned)__builtin_ctzll(flmap);
    slmap = p->sl_bitmap[fl];
  }
  c = CLS(fl, __builtin_ctz(slmap));
  return (found){p->heads[c], c};
}

/* A free slice of at least u units: good fit first, then a bounded look at
 * the request's own class. */
static inline found find_free(const sliced *p, uint64_t u) {
  /* u's own class, and the class of the next class boundary at or above
   * u (one log2 for both: this is the reservation's critical path), the
   * smallest class all of whose slices fit. */
  unsigned sh;
  uint32_t own = class_shift(u, &sh);
  uint32_t up = (uint32_t)((sh << SL_BITS) +
                           ((u + (UINT64_C(1) << sh) - 1) >> sh));
  found f = find_class(p, up);
  uint32_t i;
  if (f.i != NIL || up == own) /* up == own: every slice of it fits */
    return f;
  i = p->heads[own];
  for (int n = 0; i != NIL && n < EXACT_SCAN; n++, i = p->slices[i].next_free)
    if (p->slices[i].size >= u)
      return (found){i, own};
  return (found){NIL, 0};
}

/* Record i, or (i == NIL) a record of size 0 that ends its list: fits
 * nothing, leads nowhere.  Chosen without a branch (link_or). */
static const slice nil_record = {.next_free = NIL};
static inline const slice *record_or_nil(const sliced *p, uint32_t i) {
  return (const slice *)link_or(p, i, 0, (uint32_t *)&nil_record);
}

/* The smallest of the first BEST_SCAN (2) slices of list i that holds u
 * units, the lowest page among equals (NIL: none does).  Both are looked
 * at without a branch: whether a list holds zero, one or two slices, and
 * which fits, is data a predictor cannot learn (a loop over them
 * mispredicted about once per reservation, callgrind's branch model). */
_Static_assert(BEST_SCAN == 2, "smallest_of compares two slices");
static inline uint32_t smallest_of(const sliced *p, uint32_t i, uint64_t u) {
  const slice *a = record_or_nil(p, i);
  uint32_t j = a->next_free;
  const slice *b = record_or_nil(p, j);
  uint64_t key_a = (uint64_t)a->size << 32 | a->page; /* size, then page */
  uint64_t key_b = (uint64_t)b->size << 32 | b->page;
  bool fits_a = a->size >= u, fits_b = b->size >= u;
  uint32_t best = fits_a ? i : NIL;
  uint64_t best_key = fits_a ? key_a : UINT64_MAX;
  return fits_b & (key_b < best_key) ? j : best;
}

/* ARENA: a free slice of at least u units, best fit: the smallest of a
 * few of the request's own class, else of the next non-empty class (every
 * slice of which fits). */
HOT found find_best(const sliced *p, uint64_t u) {
  found f;
  f.cls = class_of(u);
  f.i = smallest_of(p, p->heads[f.cls], u);
  if (f.i != NIL || f.cls + 1 == CLS(FL_COUNT, 0))
    return f;
  f = find_class(p, f.cls + 1);
  if (f.i != NIL)
    f.i = smallest_of(p, f.i, u);
  return f;
}

/* VIRTUAL: best fit to a class's resolution: the head of the request's
 * own class when it fits (within a sixteenth of the request), else the
 * head of the next non-empty class (every slice of which fits).  One
 * page, so no page to prefer; measured against find_best on make bench
 * F's traces (DRY, 2026-12-06): the same peaks (pt_cs336 1.0008, train
 * 1.0049, somas 1.0095 mapped/live), and a pair 8 % cheaper (callgrind,
 * 100 to 100,000 live) with one mispredicted branch fewer; comparing two
 * slices by address among equals made the peaks higher (train 1.0061,
 * somas 1.0110).  With no larger class to turn to, the rest of the own
 * class is looked at, every slice of it: the range cannot grow, so a
 * fitting slice missed here would fail the reservation (the path of a
 * nearly full range only). */
HOT found find_near(const sliced *p, uint64_t u) {
  found f;
  uint32_t i;
  f.cls = class_of(u);
  f.i = p->heads[f.cls];
  if (HIPPO__LIKELY(f.i != NIL && p->slices[f.i].size >= u))
    return f;
  if (f.cls + 1 < CLS(FL_COUNT, 0)) {
    found up = find_class(p, f.cls + 1);
    if (HIPPO__LIKELY(up.i != NIL))
      return up;
  }
  for (i = f.i; i != NIL; i = p->slices[i].next_free)
    if (p->slices[i].size >= u)
      return (found){i, f.cls};
  return (found){NIL, 0};
}

#endif /* HIPPO_SLICED_INDEX_H */
