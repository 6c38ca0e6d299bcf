/* pool_direct.c -- DIRECT pools (and the persistent pool): one backend
 * allocation per reservation, reused by exact size.
 *
 * Options {reclaim_at, dealloc_period}.  A reservation of `size` bytes
 * (0 < size <= the device's memory T rounded down to A, the alignment;
 * anything larger could never be had: HIPPO_BUFFER_TOO_BIG, and a layout
 * routes it past the pool) gets an allocation of exactly
 * a = align_up(size, A) bytes; its padding is a - size < A, and nothing
 * else is ever wasted.  The slice id is the allocation's slot index.
 *
 * Reuse rule: a free allocation serves only a later reservation with the
 * same aligned size a (the most recently freed one first).  Free
 * allocations are indexed by size in an open-addressing hash map (linear
 * probing, load <= 1/2, backward-shift deletion) from a to a doubly linked
 * list of the free allocations of that size: reserve and release are O(1)
 * expected.  The map is grown only in reserve, before a new allocation is
 * taken, to twice the allocations held, so release never allocates.
 *
 * reclaim_at (0 = none) is a watermark, not a budget: when a reservation
 * needs a new allocation of a bytes and bytes_reserved + a > reclaim_at,
 * free allocations go back to the backend oldest first (by the time they
 * became free) until bytes_reserved + a <= reclaim_at or none is left; the
 * request is then served anyway, above the watermark if need be.  Reclaim
 * runs once the new allocation is taken, so a reserve whose page_alloc
 * fails gives nothing back (a failed call changes nothing; when the device
 * is out of memory, the manager's retry gives every free page back).
 * A free allocation whose page_free fails during reclaim is skipped and
 * kept.  While the pool's free gate (pool.h) says no -- a stream of the
 * device captures a graph -- reclaim frees nothing and the request is
 * served above the watermark.
 *
 * Periodic deallocation as in every pool: the clock is pool->now (the
 * stream's reservation clock, pool.h); an allocation free since clock t goes back at the first
 * tick with now >= t + dealloc_period (0 = never).  All free allocations
 * wait on one FIFO in the order they became free (their free times never
 * decrease along it), which serves both tick (look at the front only:
 * amortized O(1)) and reclaim (oldest first).  tick asks the free gate
 * only when an allocation is due, and frees nothing while it says no;
 * cleanup does not ask (the manager refuses it while a capture records).
 *
 * Failures.  A failed page_alloc, or no host memory for metadata, fails the
 * reserve with that status.  A free allocation whose page_free fails is
 * kept: accounted, free, reusable, at its place in the FIFO; cleanup tries
 * every other one and returns the first failure; tick puts it back at the
 * end of the FIFO, due a whole period later, and goes on.
 *
 * The allocation slots, the FIFO, tick, cleanup and the common checks are
 * the page-slot module's (pool_pages.h), shared with EXCLUSIVE pools; this
 * file keeps the size map and the reclaim watermark.
 *
 * The persistent pool (pool_persistent.c) is this pool with kind
 * HIPPO_POOL_PERSISTENT, no watermark and no periodic deallocation.
 *
 * All metadata lives in host memory; device addresses are plain numbers,
 * never dereferenced.
 */
#include <stdlib.h>

#include "pool_direct.h"
#include "pool_pages.h"

#define NIL HIPPO__SLOT_NIL
#define MAP_MIN 16u

/* One entry of the size map.
 * Invariant: size == 0 marks an unused entry; otherwise head is the first
 * of the `count` (> 0) FREE allocations of exactly `size` bytes, and the
 * entry lies on the probe run from its home position without a gap. */
typedef struct size_entry {
  uint64_t size;  /* key: aligned allocation size (0: unused) */
  uint32_t head;  /* most recently freed allocation of that size */
  uint32_t count; /* free allocations of that size */
} size_entry;

/* Allocations live in page slots (pool_pages.h; `cls` unused): a FREE one
 * of `size` bytes (a multiple of the alignment) is on the free list of its
 * size (prev/next, head in the size map); a LIVE one has
 * size == align_up(requested).
 * Invariant: map_cap is a power of two >= MAP_MIN with
 * 2 * map_used <= map_cap, and map_used is the number of distinct sizes
 * among FREE allocations; the page-slot invariant holds. */
typedef struct dpool {
  hippo__pool head;
  hippo__page_slots pages; /* the allocation slots and FIFO; pages.name is
                              "DIRECT" or "PERSISTENT", for messages */
  uint32_t map_cap;        /* entries in map, a power of two */
  uint32_t map_used;       /* entries with a size */
  size_entry *map;         /* the size map */
} dpool;

/* ---- the size map --------------------------------------------------------*/

static uint32_t map_home(const dpool *p, uint64_t size, uint32_t cap) {
  uint64_t h = (size >> p->head.align_shift) * UINT64_C(0x9E3779B97F4A7C15);
  return (uint32_t)(h >> 32) & (cap - 1);
}

/* The entry holding `size`, or NIL.  At most map_cap probes, so even a
 * map broken to have no empty entry (the check walk meets one) ends. */
static uint32_t map_find(const dpool *p, uint64_t size) {
  uint32_t mask = p->map_cap - 1, e = map_home(p, size, p->map_cap);
  for (uint32_t n = 0; n < p->map_cap; n++, e = (e + 1) & mask) {
    if (p->map[e].size == size)
      return e;
    if (p->map[e].size == 0)
      return NIL;
  }
  return NIL;
}

/* Insert `size` (absent; the map has room). */
static uint32_t map_insert(dpool *p, uint64_t size) {
  uint32_t mask = p->map_cap - 1;
  uint32_t e = map_home(p, size, p->map_cap);
  while (p->map[e].size != 0)
    e = (e + 1) & mask;
  p->map[e].size = size;
  p->map[e].head = NIL;
  p->map[e].count = 0;
  p->map_used++;
  return e;
}

/* Remove entry e, shifting later entries of its probe run back. */
static void map_delete(dpool *p, uint32_t e) {
  uint32_t mask = p->map_cap - 1;
  uint32_t hole = e, j = e;
  for (;;) {
    uint32_t home;
    j = (j + 1) & mask;
    if (p->map[j].size == 0)
      break;
    home = map_home(p, p->map[j].size, p->map_cap);
    /* The entry at j may move into the hole unless its home lies
     * cyclically in (hole, j]. */
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      p->map[hole] = p->map[j];
      hole = j;
    }
  }
  p->map[hole].size = 0;
  p->map[hole].head = NIL;
  p->map[hole].count = 0;
  p->map_used--;
}

/* Make room for `sizes` distinct sizes at load <= 1/2. */
static hippo_status map_reserve(dpool *p, uint64_t sizes) {
  uint32_t cap = p->map_cap, old_cap = p->map_cap;
  size_entry *old = p->map, *grown;
  if (2 * sizes <= cap)
    return HIPPO_SUCCESS;
  while (2 * sizes > cap) {
    if (cap >= (UINT32_C(1) << 31))
      return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                              "%s pool: the size map cannot grow past %u "
                              "entries",
                              p->pages.name, cap);
    cap *= 2;
  }
  grown = calloc(cap, sizeof *grown);
  if (!grown)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s pool: no host memory for a size map of %u "
                            "entries",
                            p->pages.name, cap);
  for (uint32_t e = 0; e < cap; e++)
    grown[e].head = NIL;
  p->map = grown;
  p->map_cap = cap;
  p->map_used = 0;
  for (uint32_t e = 0; e < old_cap; e++) {
    if (old[e].size != 0) {
      uint32_t n = map_insert(p, old[e].size);
      p->map[n].head = old[e].head;
      p->map[n].count = old[e].count;
    }
  }
  free(old);
  return HIPPO_SUCCESS;
}

/* ---- size lists ----------------------------------------------------------*/

static void size_push(dpool *p, uint32_t i) {
  hippo__page_slot *a = &p->pages.slot[i];
  uint32_t e = map_find(p, a->size);
  if (e == NIL)
    e = map_insert(p, a->size);
  a->prev = NIL;
  a->next = p->map[e].head;
  if (a->next != NIL)
    p->pages.slot[a->next].prev = i;
  p->map[e].head = i;
  p->map[e].count++;
}

static void size_unlink(dpool *p, uint32_t i) {
  hippo__page_slot *a = &p->pages.slot[i];
  uint32_t e = map_find(p, a->size);
  if (a->prev != NIL)
    p->pages.slot[a->prev].next = a->next;
  else
    p->map[e].head = a->next;
  if (a->next != NIL)
    p->pages.slot[a->next].prev = a->prev;
  a->prev = a->next = NIL;
  if (--p->map[e].count == 0)
    map_delete(p, e);
}

/* The page slots' `unlink`: a FREE allocation goes back to the backend. */
static void size_unlink_alloc(hippo__pool *pool, uint32_t i) {
  size_unlink((dpool *)pool, i);
}

/* Free allocations go back, oldest first, until bytes_reserved is under
 * the watermark or none is left.  Failures are skipped.  Nothing goes back
 * while the free gate says no (a capture records). */
static void reclaim(dpool *p) {
  uint64_t mark = p->head.opt.reclaim_at;
  uint32_t i = p->pages.fifo.front;
  if (i == NIL || p->head.bytes_reserved <= mark ||
      !hippo__pool_may_free(&p->head))
    return;
  while (i != NIL && p->head.bytes_reserved > mark) {
    uint32_t newer = p->pages.slot[i].fifo.newer;
    (void)hippo__page_slots_drop(&p->pages, &p->head, i);
    i = newer;
  }
}

/* ---- operations ----------------------------------------------------------*/

static hippo_status direct_reserve(hippo__pool *pool, uint64_t size,
                                   hippo__slice_ref *out) {
  dpool *p = (dpool *)pool;
  uint64_t a, addr;
  uint32_t e, i;
  hippo_status st;

  if (size == 0 || size > pool->max_size)
    return hippo__error_set(size ? HIPPO_BUFFER_TOO_BIG
                                 : HIPPO_INVALID_ARGUMENT,
                            "%s pool: a reservation of %llu bytes is outside "
                            "the 1..%llu it accepts",
                            p->pages.name, (unsigned long long)size,
                            (unsigned long long)pool->max_size);
  a = (size + pool->alignment - 1) & ~(pool->alignment - 1);
  e = map_find(p, a);
  if (e != NIL) {
    i = p->map[e].head;
    size_unlink(p, i);
    hippo__page_slots_reuse(&p->pages, pool, i);
  } else {
    st = hippo__page_slots_make_room(&p->pages);
    if (st == HIPPO_SUCCESS)
      st = map_reserve(p, pool->pages + 1);
    if (st != HIPPO_SUCCESS)
      return st;
    st = hippo__pool_page_alloc(pool, a, &addr);
    if (st != HIPPO_SUCCESS)
      return hippo__error_wrap(st,
                               "%s pool: an allocation of %llu bytes for a "
                               "reservation of %llu",
                               p->pages.name, (unsigned long long)a,
                               (unsigned long long)size);
    i = hippo__page_slots_take(&p->pages, addr, a);
    if (pool->opt.reclaim_at != 0)
      reclaim(p); /* the new one is not free: it stays */
  }
  hippo__page_slots_serve(&p->pages, pool, i, size, out);
  return HIPPO_SUCCESS;
}

static void direct_release(hippo__pool *pool, uint32_t slice, uint64_t size) {
  dpool *p = (dpool *)pool;
  if (hippo__page_slots_release(&p->pages, pool, slice, size))
    size_push(p, slice);
}

static void direct_hold(hippo__pool *pool, uint32_t slice) {
  hippo__page_slots_hold(&((dpool *)pool)->pages, pool, slice);
}

static void direct_unhold(hippo__pool *pool, uint32_t slice, bool wait) {
  dpool *p = (dpool *)pool;
  if (hippo__page_slots_unhold(&p->pages, pool, slice, wait))
    size_push(p, slice);
}

static void direct_waits(hippo__pool *pool, uint32_t slice, uint32_t n) {
  hippo__page_slots_waits(&((dpool *)pool)->pages, pool, slice, n);
}

static uint64_t direct_addr(const hippo__pool *pool, uint32_t slice) {
  return ((const dpool *)pool)->pages.slot[slice].addr;
}

static hippo_status direct_cleanup(hippo__pool *pool) {
  return hippo__page_slots_cleanup(&((dpool *)pool)->pages, pool);
}

static bool direct_gives_back(const hippo__pool *pool) {
  return ((const dpool *)pool)->pages.free_count != 0;
}

static hippo_status direct_tick(hippo__pool *pool, uint64_t now) {
  return hippo__page_slots_tick(&((dpool *)pool)->pages, pool, now);
}

/* O(size map): largest_free is the largest size in the map. */
static void direct_report(const hippo__pool *pool, hippo_pool_report *out) {
  const dpool *p = (const dpool *)pool;
  hippo__pool_report_head(pool, out);
  out->bytes_free = p->pages.bytes_free;
  out->largest_free = 0;
  for (uint32_t e = 0; e < p->map_cap; e++)
    if (p->map[e].size > out->largest_free)
      out->largest_free = p->map[e].size;
}

#define CHECK(cond, fmt, ...)                                                  \
  do {                                                                         \
    if (!(cond))                                                               \
      return hippo__error_set(HIPPO_INTERNAL, "%s check: " fmt,               \
                              p->pages.name, __VA_ARGS__);                     \
  } while (0)

/* What check() asks of each held allocation beyond the page-slot
 * invariant. */
static hippo_status direct_alloc_ok(const hippo__pool *pool, uint32_t i) {
  const dpool *p = (const dpool *)pool;
  const hippo__page_slot *d = &p->pages.slot[i];
  uint64_t align = pool->alignment;
  CHECK(d->size != 0 && (d->size & (align - 1)) == 0,
        "allocation %u has %llu bytes, not a multiple of %llu", i,
        (unsigned long long)d->size, (unsigned long long)align);
  if (d->state == HIPPO__SLOT_LIVE)
    CHECK(d->requested != 0 && d->requested <= d->size &&
              d->size - d->requested < align,
          "live allocation %u of %llu bytes serves %llu bytes: not its "
          "aligned size",
          i, (unsigned long long)d->size, (unsigned long long)d->requested);
  else if (d->state == HIPPO__SLOT_FREE)
    CHECK(map_find(p, d->size) != NIL,
          "free allocation %u of %llu bytes: no map entry", i,
          (unsigned long long)d->size);
  return HIPPO_SUCCESS;
}

static hippo_status direct_check(const hippo__pool *pool) {
  const dpool *p = (const dpool *)pool;
  const hippo__page_slots *s = &p->pages;
  uint64_t nfree = s->free_count, n = 0;
  uint32_t i, prev, used = 0;
  hippo_status st = hippo__page_slots_check(s, pool, direct_alloc_ok);
  if (st != HIPPO_SUCCESS)
    return st;

  /* The size map and its lists. */
  CHECK(hippo__is_pow2(p->map_cap) && p->map_cap >= MAP_MIN &&
            2 * (uint64_t)p->map_used <= p->map_cap,
        "size map has %u of %u entries in use", p->map_used, p->map_cap);
  for (uint32_t e = 0; e < p->map_cap; e++) {
    const size_entry *m = &p->map[e];
    uint32_t count = 0;
    if (m->size == 0)
      continue;
    used++;
    CHECK(map_find(p, m->size) == e,
          "size map entry %u (%llu bytes) is not found by probing", e,
          (unsigned long long)m->size);
    CHECK(m->count > 0 && m->head != NIL, "size map entry %u (%llu bytes) "
          "has an empty list", e, (unsigned long long)m->size);
    prev = NIL;
    for (i = m->head; i != NIL; i = s->slot[i].next) {
      CHECK(i < s->nslots, "list of %llu bytes reaches slot %u of %u",
            (unsigned long long)m->size, i, s->nslots);
      CHECK(s->slot[i].state == HIPPO__SLOT_FREE,
            "list of %llu bytes holds slot %u in state %u",
            (unsigned long long)m->size, i, s->slot[i].state);
      CHECK(s->slot[i].size == m->size,
            "list of %llu bytes holds allocation %u of %llu bytes",
            (unsigned long long)m->size, i,
            (unsigned long long)s->slot[i].size);
      CHECK(s->slot[i].prev == prev,
            "list of %llu bytes: allocation %u links back to %u, not %u",
            (unsigned long long)m->size, i, s->slot[i].prev, prev);
      CHECK(++n <= nfree, "size lists are longer than the %llu free "
            "allocations", (unsigned long long)nfree);
      count++;
      prev = i;
    }
    CHECK(count == m->count, "list of %llu bytes has %u allocations, its "
          "entry counts %u", (unsigned long long)m->size, count, m->count);
  }
  CHECK(used == p->map_used, "size map has %u entries, counted %u", used,
        p->map_used);
  CHECK(n == nfree, "size lists hold %llu of %llu free allocations",
        (unsigned long long)n, (unsigned long long)nfree);
  return HIPPO_SUCCESS;
}

static void direct_destroy(hippo__pool *pool) {
  dpool *p = (dpool *)pool;
  if (!p)
    return;
  hippo__page_slots_destroy(&p->pages, pool);
  free(p->map);
  free(p);
}

static const hippo__pool_ops direct_ops = {
    .reserve = direct_reserve,
    .release = direct_release,
    .addr = direct_addr,
    .hold = direct_hold,
    .unhold = direct_unhold,
    .waits = direct_waits,
    .cleanup = direct_cleanup,
    .gives_back = direct_gives_back,
    .tick = direct_tick,
    .report = direct_report,
    .check = direct_check,
    .destroy = direct_destroy,
};

hippo_status hippo__pool_direct_create_kind(hippo__backend *be,
                                            hippo__page_acct *acct,
                                            const hippo_pool_options *opt,
                                            hippo_pool_kind kind,
                                            hippo__pool **out) {
  dpool *p = calloc(1, sizeof *p);
  const char *name = kind == HIPPO_POOL_PERSISTENT ? "PERSISTENT" : "DIRECT";
  if (!p)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s pool: no host memory for the pool", name);
  p->map = calloc(MAP_MIN, sizeof *p->map);
  if (!p->map) {
    free(p);
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s pool: no host memory for the size map", name);
  }
  /* nothing larger than the device: such a request could never be
   * served (HIPPO_BUFFER_TOO_BIG, not an out-of-memory retry) */
  hippo__pool_head_init(&p->head, &direct_ops, be, acct, kind, opt,
                        hippo__align_down(be->total_memory, be->alignment));
  if (kind == HIPPO_POOL_PERSISTENT) {
    p->head.opt.reclaim_at = 0;
    p->head.opt.dealloc_period = 0;
  }
  hippo__page_slots_init(&p->pages, name, "allocation", "allocations",
                         size_unlink_alloc);
  p->map_cap = MAP_MIN;
  for (uint32_t e = 0; e < MAP_MIN; e++)
    p->map[e].head = NIL;
  *out = &p->head;
  return HIPPO_SUCCESS;
}

hippo_status hippo__pool_direct_create(hippo__backend *be,
                                       hippo__page_acct *acct,
                                       const hippo_pool_options *opt,
                                       hippo__pool **out) {
  return hippo__pool_direct_create_kind(be, acct, opt, HIPPO_POOL_DIRECT,
                                        out);
}
