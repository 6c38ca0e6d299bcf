/* pool_direct.c -- DIRECT pools (and the persistent pool): one backend
 * allocation per reservation, reused by exact size.
 *
 * Options {reclaim_at, dealloc_period}.  A reservation of `size` bytes
 * (0 < size <= 2^64 - A, A the alignment) gets an allocation of exactly
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
 * runs before the new allocation is taken, so a reserve whose page_alloc
 * fails may have given free allocations back (no live slice and no figure
 * of live data changes; bytes_reserved and pages drop by what went back).
 * A free allocation whose page_free fails during reclaim is skipped and
 * kept.  While the pool's free gate (pool.h) says no -- a stream of the
 * device captures a graph -- reclaim frees nothing and the request is
 * served above the watermark.
 *
 * Periodic deallocation as in every pool: the clock is the largest `now`
 * given to tick; an allocation free since clock t goes back at the first
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
 * every other one and returns the first failure, tick stops at it.
 *
 * The persistent pool (pool_persistent.c) is this pool with kind
 * HIPPO_POOL_PERSISTENT, no watermark and no periodic deallocation.
 *
 * All metadata lives in host memory; device addresses are plain numbers,
 * never dereferenced.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool_direct.h"

#define NIL UINT32_MAX
#define SLOT_MAX (UINT32_MAX - 1u) /* slot ids stay below NIL */
#define MAP_MIN 16u

enum { SLOT_EMPTY = 0, ALLOC_FREE = 1, ALLOC_LIVE = 2 };

/* One slot of the allocation array.
 * Invariant by state:
 *  EMPTY: holds no allocation (addr == size == requested == 0); on the
 *         empty-slot list through `next`.
 *  FREE:  holds an allocation of `size` bytes (a multiple of the
 *         alignment), requested == 0; on exactly the free list of its size
 *         (prev/next, head in the size map) and on the FIFO (older/newer)
 *         at its free time `freed_at`.
 *  LIVE:  holds an allocation of size == align_up(requested) bytes serving
 *         one reservation of `requested` bytes; on no list. */
typedef struct dalloc {
  uint64_t addr;      /* device address (0: none) */
  uint64_t size;      /* bytes, a multiple of the alignment */
  uint64_t requested; /* LIVE: the reservation's size */
  uint64_t freed_at;  /* FREE: pool clock when it became free */
  uint32_t state;     /* SLOT_EMPTY, ALLOC_FREE or ALLOC_LIVE */
  uint32_t prev;      /* FREE: same-size free list links; */
  uint32_t next;      /*  EMPTY: next empty slot */
  uint32_t older;     /* FREE: FIFO neighbour freed earlier (NIL: front) */
  uint32_t newer;     /* FREE: FIFO neighbour freed later (NIL: back) */
  uint32_t pad;
} dalloc;

/* One entry of the size map.
 * Invariant: size == 0 marks an unused entry; otherwise head is the first
 * of the `count` (> 0) FREE allocations of exactly `size` bytes, and the
 * entry lies on the probe run from its home position without a gap. */
typedef struct size_entry {
  uint64_t size;  /* key: aligned allocation size (0: unused) */
  uint32_t head;  /* most recently freed allocation of that size */
  uint32_t count; /* free allocations of that size */
} size_entry;

/* Invariant: slot[0..nslots) are the slots ever used, cap >= nslots;
 * map_cap is a power of two >= MAP_MIN with 2 * map_used <= map_cap, and
 * map_used is the number of distinct sizes among FREE allocations;
 * free_count and bytes_free count and sum the FREE allocations;
 * fifo_front..fifo_back chain every FREE allocation with non-decreasing
 * freed_at <= clock; the head figures (pool.h) count FREE and LIVE
 * allocations as pages. */
typedef struct dpool {
  hippo__pool head;
  const char *name;     /* "DIRECT" or "PERSISTENT", for messages */
  dalloc *slot;         /* the allocation slots */
  uint32_t nslots;      /* slots in use (any state) */
  uint32_t cap;         /* slots allocated */
  uint32_t empty;       /* first EMPTY slot (NIL: none) */
  uint32_t fifo_front;  /* FREE allocation freed first */
  uint32_t fifo_back;   /* FREE allocation freed last */
  uint32_t map_cap;     /* entries in map, a power of two */
  uint32_t map_used;    /* entries with a size */
  uint32_t pad;
  size_entry *map;      /* the size map */
  uint64_t free_count;  /* FREE allocations */
  uint64_t bytes_free;  /* their bytes */
  uint64_t clock;       /* largest `now` seen by tick */
  uint64_t bad_releases; /* releases of a slice that was not live, or with
                            a size other than the reserved one */
} dpool;

/* ---- the size map --------------------------------------------------------*/

static uint32_t map_home(const dpool *p, uint64_t size, uint32_t cap) {
  uint64_t h = (size >> p->head.align_shift) * UINT64_C(0x9E3779B97F4A7C15);
  return (uint32_t)(h >> 32) & (cap - 1);
}

/* The entry holding `size`, or NIL. */
static uint32_t map_find(const dpool *p, uint64_t size) {
  uint32_t mask = p->map_cap - 1;
  for (uint32_t e = map_home(p, size, p->map_cap);; e = (e + 1) & mask) {
    if (p->map[e].size == size)
      return e;
    if (p->map[e].size == 0)
      return NIL;
  }
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
                              p->name, cap);
    cap *= 2;
  }
  grown = calloc(cap, sizeof *grown);
  if (!grown)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s pool: no host memory for a size map of %u "
                            "entries",
                            p->name, cap);
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

/* ---- lists ---------------------------------------------------------------*/

static void size_push(dpool *p, uint32_t i) {
  dalloc *a = &p->slot[i];
  uint32_t e = map_find(p, a->size);
  if (e == NIL)
    e = map_insert(p, a->size);
  a->prev = NIL;
  a->next = p->map[e].head;
  if (a->next != NIL)
    p->slot[a->next].prev = i;
  p->map[e].head = i;
  p->map[e].count++;
}

static void size_unlink(dpool *p, uint32_t i) {
  dalloc *a = &p->slot[i];
  uint32_t e = map_find(p, a->size);
  if (a->prev != NIL)
    p->slot[a->prev].next = a->next;
  else
    p->map[e].head = a->next;
  if (a->next != NIL)
    p->slot[a->next].prev = a->prev;
  a->prev = a->next = NIL;
  if (--p->map[e].count == 0)
    map_delete(p, e);
}

static void fifo_push(dpool *p, uint32_t i) {
  dalloc *a = &p->slot[i];
  a->newer = NIL;
  a->older = p->fifo_back;
  if (p->fifo_back != NIL)
    p->slot[p->fifo_back].newer = i;
  else
    p->fifo_front = i;
  p->fifo_back = i;
}

static void fifo_unlink(dpool *p, uint32_t i) {
  dalloc *a = &p->slot[i];
  if (a->older != NIL)
    p->slot[a->older].newer = a->newer;
  else
    p->fifo_front = a->newer;
  if (a->newer != NIL)
    p->slot[a->newer].older = a->older;
  else
    p->fifo_back = a->older;
  a->older = a->newer = NIL;
}

/* Make sure a slot can be taken without allocating. */
static hippo_status slot_reserve(dpool *p) {
  uint32_t cap;
  dalloc *grown;
  if (p->empty != NIL || p->nslots < p->cap)
    return HIPPO_SUCCESS;
  if (p->cap >= SLOT_MAX)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s pool: %u allocations, the most one pool can "
                            "hold",
                            p->name, p->cap);
  cap = p->cap ? (p->cap > SLOT_MAX / 2 ? SLOT_MAX : p->cap * 2) : 16;
  grown = realloc(p->slot, (size_t)cap * sizeof *grown);
  if (!grown)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s pool: no host memory for the metadata of %u "
                            "allocations",
                            p->name, cap);
  p->slot = grown;
  p->cap = cap;
  return HIPPO_SUCCESS;
}

static uint32_t slot_take(dpool *p) {
  uint32_t i = p->empty;
  if (i != NIL) {
    p->empty = p->slot[i].next;
    return i;
  }
  return p->nslots++;
}

/* Give FREE allocation i back to the backend; on failure it stays. */
static hippo_status alloc_drop(dpool *p, uint32_t i) {
  dalloc *a = &p->slot[i];
  hippo_status st = hippo__pool_page_free(&p->head, a->addr, a->size);
  if (st != HIPPO_SUCCESS)
    return hippo__error_wrap(st,
                             "%s pool: giving back a free allocation of %llu "
                             "bytes",
                             p->name, (unsigned long long)a->size);
  size_unlink(p, i);
  fifo_unlink(p, i);
  p->free_count--;
  p->bytes_free -= a->size;
  memset(a, 0, sizeof *a);
  a->state = SLOT_EMPTY;
  a->prev = a->older = a->newer = NIL;
  a->next = p->empty;
  p->empty = i;
  return HIPPO_SUCCESS;
}

/* Free allocations go back, oldest first, until `need` more bytes fit
 * under the watermark or none is left.  Failures are skipped.  Nothing goes
 * back while the free gate says no (a capture records). */
static void reclaim(dpool *p, uint64_t need) {
  uint64_t mark = p->head.opt.reclaim_at;
  uint32_t i = p->fifo_front;
  if (i == NIL || (need <= mark && p->head.bytes_reserved <= mark - need) ||
      !hippo__pool_may_free(&p->head))
    return;
  while (i != NIL &&
         (need > mark || p->head.bytes_reserved > mark - need)) {
    uint32_t newer = p->slot[i].newer;
    (void)alloc_drop(p, i);
    i = newer;
  }
}

/* ---- operations ----------------------------------------------------------*/

static hippo_status direct_reserve(hippo__pool *pool, uint64_t size,
                                   hippo__slice_ref *out) {
  dpool *p = (dpool *)pool;
  uint64_t a, addr;
  uint32_t e, i;
  dalloc *d;
  hippo_status st;

  if (size == 0 || size > pool->max_size)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s pool: a reservation of %llu bytes is outside "
                            "1..%llu",
                            p->name, (unsigned long long)size,
                            (unsigned long long)pool->max_size);
  a = (size + pool->alignment - 1) & ~(pool->alignment - 1);
  e = map_find(p, a);
  if (e != NIL) {
    i = p->map[e].head;
    d = &p->slot[i];
    size_unlink(p, i);
    fifo_unlink(p, i);
    p->free_count--;
    p->bytes_free -= a;
  } else {
    st = slot_reserve(p);
    if (st == HIPPO_SUCCESS)
      st = map_reserve(p, pool->pages + 1);
    if (st != HIPPO_SUCCESS)
      return st;
    if (pool->opt.reclaim_at != 0)
      reclaim(p, a);
    st = hippo__pool_page_alloc(pool, a, &addr);
    if (st != HIPPO_SUCCESS)
      return hippo__error_wrap(st,
                               "%s pool: an allocation of %llu bytes for a "
                               "reservation of %llu",
                               p->name, (unsigned long long)a,
                               (unsigned long long)size);
    i = slot_take(p);
    d = &p->slot[i];
    d->addr = addr;
    d->size = a;
    d->prev = d->next = d->older = d->newer = NIL;
  }
  d->state = ALLOC_LIVE;
  d->requested = size;
  d->freed_at = 0;
  hippo__pool_note_reserve(pool, size, a);
  out->addr = d->addr;
  out->slice = i;
  return HIPPO_SUCCESS;
}

static void direct_release(hippo__pool *pool, uint32_t slice, uint64_t size) {
  dpool *p = (dpool *)pool;
  dalloc *d;
  if (slice >= p->nslots || p->slot[slice].state != ALLOC_LIVE) {
    p->bad_releases++; /* reported by check() */
    return;
  }
  d = &p->slot[slice];
  if (size != d->requested)
    p->bad_releases++;
  hippo__pool_note_release(pool, d->requested, d->size);
  d->state = ALLOC_FREE;
  d->requested = 0;
  d->freed_at = p->clock;
  size_push(p, slice);
  fifo_push(p, slice);
  p->free_count++;
  p->bytes_free += d->size;
}

static hippo_status direct_cleanup(hippo__pool *pool) {
  dpool *p = (dpool *)pool;
  hippo_status first = HIPPO_SUCCESS;
  char msg[512];
  unsigned failed = 0;
  uint32_t i = p->fifo_front;
  while (i != NIL) {
    uint32_t newer = p->slot[i].newer;
    hippo_status st = alloc_drop(p, i);
    if (st != HIPPO_SUCCESS && failed++ == 0) {
      first = st;
      snprintf(msg, sizeof msg, "%s", hippo__error_get());
    }
    i = newer;
  }
  if (failed > 1)
    hippo__error_set(first, "%s (and %u more frees failed)", msg, failed - 1);
  else if (failed == 1)
    hippo__error_set(first, "%s", msg);
  return first;
}

static hippo_status direct_tick(hippo__pool *pool, uint64_t now) {
  dpool *p = (dpool *)pool;
  uint64_t period = pool->opt.dealloc_period;
  if (now > p->clock)
    p->clock = now;
  if (period == 0)
    return HIPPO_SUCCESS;
  while (p->fifo_front != NIL &&
         p->clock - p->slot[p->fifo_front].freed_at >= period) {
    hippo_status st;
    if (!hippo__pool_may_free(pool))
      return HIPPO_SUCCESS; /* a capture records: wait */
    st = alloc_drop(p, p->fifo_front);
    if (st != HIPPO_SUCCESS)
      return st;
  }
  return HIPPO_SUCCESS;
}

/* O(size map): largest_free is the largest size in the map. */
static void direct_report(const hippo__pool *pool, hippo_pool_report *out) {
  const dpool *p = (const dpool *)pool;
  hippo__pool_report_head(pool, out);
  out->bytes_free = p->bytes_free;
  out->largest_free = 0;
  for (uint32_t e = 0; e < p->map_cap; e++)
    if (p->map[e].size > out->largest_free)
      out->largest_free = p->map[e].size;
}

#define CHECK(cond, fmt, ...)                                                  \
  do {                                                                         \
    if (!(cond))                                                               \
      return hippo__error_set(HIPPO_INTERNAL, "%s check: " fmt, p->name,      \
                              __VA_ARGS__);                                    \
  } while (0)

static hippo_status direct_check(const hippo__pool *pool) {
  const dpool *p = (const dpool *)pool;
  uint64_t align = pool->alignment;
  uint64_t pages = 0, reserved = 0, allocs = 0, in_use = 0, padding = 0;
  uint64_t nfree = 0, free_bytes = 0, nempty = 0, n, largest_free = 0;
  uint32_t i, prev, used = 0;

  CHECK(p->bad_releases == 0,
        "%llu releases named a slice that was not live or gave another size",
        (unsigned long long)p->bad_releases);
  CHECK(p->nslots <= p->cap, "%u slots used of %u allocated", p->nslots,
        p->cap);
  for (i = 0; i < p->nslots; i++) {
    const dalloc *d = &p->slot[i];
    if (d->state == SLOT_EMPTY) {
      CHECK(d->addr == 0 && d->size == 0 && d->requested == 0,
            "empty slot %u holds an allocation", i);
      nempty++;
      continue;
    }
    CHECK(d->state == ALLOC_FREE || d->state == ALLOC_LIVE,
          "slot %u has state %u", i, d->state);
    CHECK(d->addr != 0 && (d->addr & (align - 1)) == 0,
          "allocation %u at 0x%llx is not aligned to %llu", i,
          (unsigned long long)d->addr, (unsigned long long)align);
    CHECK(d->size != 0 && (d->size & (align - 1)) == 0,
          "allocation %u has %llu bytes, not a multiple of %llu", i,
          (unsigned long long)d->size, (unsigned long long)align);
    pages++;
    reserved += d->size;
    if (d->state == ALLOC_LIVE) {
      CHECK(d->requested != 0 && d->requested <= d->size &&
                d->size - d->requested < align,
            "live allocation %u of %llu bytes serves %llu bytes: not its "
            "aligned size",
            i, (unsigned long long)d->size,
            (unsigned long long)d->requested);
      CHECK(d->requested <= pool->largest_allocation,
            "live allocation %u serves %llu bytes, above largest_allocation "
            "%llu",
            i, (unsigned long long)d->requested,
            (unsigned long long)pool->largest_allocation);
      allocs++;
      in_use += d->requested;
      padding += d->size - d->requested;
    } else {
      uint32_t e = map_find(p, d->size);
      CHECK(d->requested == 0, "free allocation %u still has a request", i);
      CHECK(d->freed_at <= p->clock,
            "free allocation %u freed at %llu, after the clock %llu", i,
            (unsigned long long)d->freed_at, (unsigned long long)p->clock);
      CHECK(e != NIL, "free allocation %u of %llu bytes: no map entry", i,
            (unsigned long long)d->size);
      nfree++;
      free_bytes += d->size;
      if (d->size > largest_free)
        largest_free = d->size;
    }
  }
  CHECK(pages == pool->pages, "%llu allocations held, the pool counts %llu",
        (unsigned long long)pages, (unsigned long long)pool->pages);
  CHECK(pool->pages <= pool->peak_pages, "pages %llu above peak_pages %llu",
        (unsigned long long)pool->pages,
        (unsigned long long)pool->peak_pages);
  CHECK(reserved == pool->bytes_reserved,
        "allocations hold %llu bytes, bytes_reserved is %llu",
        (unsigned long long)reserved,
        (unsigned long long)pool->bytes_reserved);
  CHECK(allocs == pool->allocations, "%llu live allocations, allocations is "
        "%llu", (unsigned long long)allocs,
        (unsigned long long)pool->allocations);
  CHECK(in_use == pool->bytes_in_use,
        "live allocations serve %llu bytes, bytes_in_use is %llu",
        (unsigned long long)in_use, (unsigned long long)pool->bytes_in_use);
  CHECK(padding == pool->bytes_padding,
        "live allocations pad %llu bytes, bytes_padding is %llu",
        (unsigned long long)padding,
        (unsigned long long)pool->bytes_padding);
  CHECK(nfree == p->free_count && free_bytes == p->bytes_free,
        "%llu free allocations of %llu bytes, counted %llu of %llu",
        (unsigned long long)nfree, (unsigned long long)free_bytes,
        (unsigned long long)p->free_count,
        (unsigned long long)p->bytes_free);

  /* The empty-slot list. */
  n = 0;
  for (i = p->empty; i != NIL; i = p->slot[i].next) {
    CHECK(i < p->nslots, "empty-slot list reaches slot %u of %u", i,
          p->nslots);
    CHECK(p->slot[i].state == SLOT_EMPTY,
          "empty-slot list holds slot %u in state %u", i, p->slot[i].state);
    CHECK(++n <= nempty,
          "empty-slot list is longer than the %llu empty slots (a cycle?)",
          (unsigned long long)nempty);
  }
  CHECK(n == nempty, "empty-slot list has %llu of %llu empty slots",
        (unsigned long long)n, (unsigned long long)nempty);

  /* The size map and its lists. */
  CHECK(hippo__is_pow2(p->map_cap) && p->map_cap >= MAP_MIN &&
            2 * (uint64_t)p->map_used <= p->map_cap,
        "size map has %u of %u entries in use", p->map_used, p->map_cap);
  n = 0;
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
    for (i = m->head; i != NIL; i = p->slot[i].next) {
      CHECK(i < p->nslots, "list of %llu bytes reaches slot %u of %u",
            (unsigned long long)m->size, i, p->nslots);
      CHECK(p->slot[i].state == ALLOC_FREE,
            "list of %llu bytes holds slot %u in state %u",
            (unsigned long long)m->size, i, p->slot[i].state);
      CHECK(p->slot[i].size == m->size,
            "list of %llu bytes holds allocation %u of %llu bytes",
            (unsigned long long)m->size, i,
            (unsigned long long)p->slot[i].size);
      CHECK(p->slot[i].prev == prev,
            "list of %llu bytes: allocation %u links back to %u, not %u",
            (unsigned long long)m->size, i, p->slot[i].prev, prev);
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

  /* The FIFO. */
  {
    hippo_pool_report r;
    uint64_t last = 0;
    n = 0;
    prev = NIL;
    for (i = p->fifo_front; i != NIL; i = p->slot[i].newer) {
      CHECK(i < p->nslots, "FIFO reaches slot %u of %u", i, p->nslots);
      CHECK(p->slot[i].state == ALLOC_FREE,
            "FIFO holds slot %u in state %u", i, p->slot[i].state);
      CHECK(p->slot[i].older == prev,
            "FIFO: allocation %u links back to %u, not %u", i,
            p->slot[i].older, prev);
      CHECK(p->slot[i].freed_at >= last,
            "FIFO: allocation %u freed at %llu after one freed at %llu", i,
            (unsigned long long)p->slot[i].freed_at,
            (unsigned long long)last);
      CHECK(++n <= nfree, "FIFO is longer than the %llu free allocations",
            (unsigned long long)nfree);
      last = p->slot[i].freed_at;
      prev = i;
    }
    CHECK(prev == p->fifo_back, "FIFO ends at %u, its back is %u", prev,
          p->fifo_back);
    CHECK(n == nfree, "FIFO holds %llu of %llu free allocations",
          (unsigned long long)n, (unsigned long long)nfree);
    direct_report(pool, &r);
    CHECK(r.largest_free == largest_free,
          "largest_free reported %llu, the largest free allocation has %llu",
          (unsigned long long)r.largest_free,
          (unsigned long long)largest_free);
    CHECK(r.bytes_free ==
              pool->bytes_reserved - pool->bytes_in_use - pool->bytes_padding,
          "bytes_free %llu does not match reserved - in use - padding",
          (unsigned long long)r.bytes_free);
  }
  return HIPPO_SUCCESS;
}

static void direct_destroy(hippo__pool *pool) {
  dpool *p = (dpool *)pool;
  if (!p)
    return;
  for (uint32_t i = 0; i < p->nslots; i++)
    if (p->slot[i].state != SLOT_EMPTY)
      (void)hippo__pool_page_free(pool, p->slot[i].addr, p->slot[i].size);
  free(p->slot);
  free(p->map);
  free(p);
}

static const hippo__pool_ops direct_ops = {
    .reserve = direct_reserve,
    .release = direct_release,
    .cleanup = direct_cleanup,
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
  hippo__pool_head_init(&p->head, &direct_ops, be, acct, kind, opt,
                        UINT64_MAX & ~(be->alignment - 1));
  if (kind == HIPPO_POOL_PERSISTENT) {
    p->head.opt.reclaim_at = 0;
    p->head.opt.dealloc_period = 0;
  }
  p->name = name;
  p->map_cap = MAP_MIN;
  for (uint32_t e = 0; e < MAP_MIN; e++)
    p->map[e].head = NIL;
  p->empty = p->fifo_front = p->fifo_back = NIL;
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
