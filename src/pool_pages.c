/* pool_pages.c -- page slots shared by the EXCLUSIVE and DIRECT pools: the
 * out-of-line half (growing, giving pages back, tick, cleanup, destroy,
 * check).  See pool_pages.h for the model and its invariant.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool_pages.h"

#define NIL HIPPO__SLOT_NIL

void hippo__page_slots_init(hippo__page_slots *s, const char *name,
                            const char *one, const char *many,
                            void (*unlink)(hippo__pool *, uint32_t)) {
  memset(s, 0, sizeof *s);
  s->empty = NIL;
  hippo__fifo_init(&s->fifo, sizeof(hippo__page_slot),
                   offsetof(hippo__page_slot, fifo));
  s->name = name;
  s->one = one;
  s->many = many;
  s->unlink = unlink;
}

hippo_status hippo__page_slots_grow(hippo__page_slots *s) {
  uint32_t cap;
  hippo__page_slot *grown;
  if (s->cap >= HIPPO__SLOT_MAX)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s pool: %u %s, the most one pool can hold",
                            s->name, s->cap, s->many);
  cap = s->cap ? (s->cap > HIPPO__SLOT_MAX / 2 ? HIPPO__SLOT_MAX : s->cap * 2)
               : 16;
  grown = realloc(s->slot, (size_t)cap * sizeof *grown);
  if (!grown)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s pool: no host memory for the metadata of %u "
                            "%s",
                            s->name, cap, s->many);
  s->slot = grown;
  s->cap = cap;
  return HIPPO_SUCCESS;
}

hippo_status hippo__page_slots_drop(hippo__page_slots *s, hippo__pool *pool,
                                    uint32_t i) {
  hippo__page_slot *sl = &s->slot[i];
  hippo_status st = hippo__pool_page_free(pool, sl->addr, sl->size);
  if (st != HIPPO_SUCCESS)
    return hippo__error_wrap(st, "%s pool: giving back a free %s of %llu bytes",
                             s->name, s->one, (unsigned long long)sl->size);
  s->unlink(pool, i);
  hippo__page_slots_fifo_unlink(s, pool, i);
  s->free_count--;
  s->bytes_free -= sl->size;
  memset(sl, 0, sizeof *sl);
  sl->state = HIPPO__SLOT_EMPTY;
  sl->prev = NIL;
  sl->fifo.older = sl->fifo.newer = NIL;
  sl->next = s->empty;
  s->empty = i;
  return HIPPO_SUCCESS;
}

/* What hippo__fifo_give_back needs of page slots. */
typedef struct slots_ctx {
  hippo__page_slots *s;
  hippo__pool *pool;
} slots_ctx;

static hippo_status slots_drop(void *ctx, uint32_t i) {
  slots_ctx *c = ctx;
  return hippo__page_slots_drop(c->s, c->pool, i);
}

/* kept; it waits a whole period again, behind the others */
static void slots_failed(void *ctx, uint32_t i) {
  slots_ctx *c = ctx;
  hippo__page_slots_fifo_unlink(c->s, c->pool, i);
  hippo__page_slots_fifo_push(c->s, c->pool, i);
}

static hippo_status give_back(hippo__page_slots *s, hippo__pool *pool,
                              bool tick) {
  slots_ctx c = {s, pool};
  hippo__fifo_drop how = {slots_drop, slots_failed, s->one};
  return hippo__fifo_give_back(&s->fifo, s->slot, pool, tick, tick, &how,
                               &c);
}

hippo_status hippo__page_slots_cleanup(hippo__page_slots *s,
                                       hippo__pool *pool) {
  return give_back(s, pool, false);
}

hippo_status hippo__page_slots_tick(hippo__page_slots *s, hippo__pool *pool,
                                    uint64_t now) {
  if (now > pool->now)
    pool->now = now;
  if (pool->opt.dealloc_period == 0)
    return HIPPO_SUCCESS;
  return give_back(s, pool, true);
}

void hippo__page_slots_destroy(hippo__page_slots *s, hippo__pool *pool) {
  for (uint32_t i = 0; i < s->nslots; i++)
    if (s->slot[i].state != HIPPO__SLOT_EMPTY)
      (void)hippo__pool_page_free(pool, s->slot[i].addr, s->slot[i].size);
  free(s->slot);
  s->slot = NULL;
  s->nslots = s->cap = 0;
}

#define CHECK(cond, fmt, ...)                                                  \
  do {                                                                         \
    if (!(cond))                                                               \
      return hippo__error_set(HIPPO_INTERNAL, "%s check: " fmt, s->name,      \
                              __VA_ARGS__);                                    \
  } while (0)

/* Every slot by state; the figures they determine. */
static hippo_status check_slots(
    const hippo__page_slots *s, const hippo__pool *pool,
    hippo_status (*held_ok)(const hippo__pool *pool, uint32_t i),
    uint64_t *nempty_out, uint64_t *largest_free_out) {
  uint64_t pages = 0, reserved = 0, allocs = 0, in_use = 0, padding = 0;
  uint64_t nfree = 0, free_bytes = 0, nempty = 0, largest_free = 0;
  uint64_t guarded = 0, waiting = 0, holds = 0;
  const char *one = s->one, *many = s->many;
  hippo_status st;

  for (uint32_t i = 0; i < s->nslots; i++) {
    const hippo__page_slot *sl = &s->slot[i];
    if (sl->state == HIPPO__SLOT_EMPTY) {
      CHECK(sl->addr == 0 && sl->size == 0 && sl->requested == 0,
            "empty slot %u still has an address, a size or a request", i);
      nempty++;
      continue;
    }
    CHECK(sl->state == HIPPO__SLOT_FREE || sl->state == HIPPO__SLOT_LIVE ||
              sl->state == HIPPO__SLOT_GUARDED,
          "slot %u has state %u", i, sl->state);
    CHECK(sl->addr != 0 && (sl->addr & (pool->alignment - 1)) == 0,
          "%s %u at 0x%llx is not aligned to %llu", one, i,
          (unsigned long long)sl->addr, (unsigned long long)pool->alignment);
    st = held_ok(pool, i);
    if (st != HIPPO_SUCCESS)
      return st;
    pages++;
    reserved += sl->size;
    if (sl->state == HIPPO__SLOT_LIVE) {
      CHECK(sl->requested <= pool->largest_allocation,
            "live %s %u serves %llu bytes, above largest_allocation %llu",
            one, i, (unsigned long long)sl->requested,
            (unsigned long long)pool->largest_allocation);
      allocs++;
      in_use += sl->requested;
      padding += sl->size - sl->requested;
      holds += sl->holds;
      CHECK(sl->waits == 0, "live %s %u counts %u record_use waits", one, i,
            sl->waits);
    } else if (sl->state == HIPPO__SLOT_GUARDED) {
      CHECK(sl->holds > 0 && sl->waits <= sl->holds && sl->requested == 0,
            "guarded %s %u has %u holds (%u record_use waits) and a "
            "request of %llu",
            one, i, sl->holds, sl->waits,
            (unsigned long long)sl->requested);
      if (sl->holds > sl->waits)
        guarded += sl->size;
      else
        waiting += sl->size;
      holds += sl->holds;
    } else {
      CHECK(sl->requested == 0, "free %s %u still has a request", one, i);
      CHECK(sl->fifo.since <= pool->now,
            "free %s %u freed at %llu, after the clock %llu", one, i,
            (unsigned long long)sl->fifo.since,
            (unsigned long long)pool->now);
      nfree++;
      free_bytes += sl->size;
      if (sl->size > largest_free)
        largest_free = sl->size;
    }
  }
  CHECK(pages == pool->pages, "%llu %s held, the pool counts %llu",
        (unsigned long long)pages, many, (unsigned long long)pool->pages);
  CHECK(pool->pages <= pool->peak_pages, "pages %llu above peak_pages %llu",
        (unsigned long long)pool->pages,
        (unsigned long long)pool->peak_pages);
  CHECK(reserved == pool->bytes_reserved,
        "%s hold %llu bytes, bytes_reserved is %llu", many,
        (unsigned long long)reserved,
        (unsigned long long)pool->bytes_reserved);
  CHECK(allocs == pool->allocations, "%llu live %s, allocations is %llu",
        (unsigned long long)allocs, many,
        (unsigned long long)pool->allocations);
  CHECK(in_use == pool->bytes_in_use,
        "live %s serve %llu bytes, bytes_in_use is %llu", many,
        (unsigned long long)in_use, (unsigned long long)pool->bytes_in_use);
  CHECK(padding == pool->bytes_padding,
        "live %s pad %llu bytes, bytes_padding is %llu", many,
        (unsigned long long)padding,
        (unsigned long long)pool->bytes_padding);
  CHECK(nfree == s->free_count && free_bytes == s->bytes_free,
        "%llu free %s of %llu bytes, counted %llu of %llu",
        (unsigned long long)nfree, many, (unsigned long long)free_bytes,
        (unsigned long long)s->free_count,
        (unsigned long long)s->bytes_free);
  CHECK(guarded == pool->bytes_guarded && waiting == pool->bytes_waiting &&
            holds == pool->holds,
        "released %s a graph holds have %llu bytes, those only record_use "
        "holds %llu, with %llu holds in all; figures say %llu, %llu and "
        "%llu",
        many, (unsigned long long)guarded, (unsigned long long)waiting,
        (unsigned long long)holds, (unsigned long long)pool->bytes_guarded,
        (unsigned long long)pool->bytes_waiting,
        (unsigned long long)pool->holds);
  *nempty_out = nempty;
  *largest_free_out = largest_free;
  return HIPPO_SUCCESS;
}

static bool slot_free(const void *ctx, uint32_t i) {
  return ((const hippo__page_slots *)ctx)->slot[i].state == HIPPO__SLOT_FREE;
}

hippo_status hippo__page_slots_check(
    const hippo__page_slots *s, const hippo__pool *pool,
    hippo_status (*held_ok)(const hippo__pool *pool, uint32_t i)) {
  uint64_t nempty = 0, largest_free = 0, nfree, n;
  uint32_t i;
  hippo_pool_report r;
  hippo_status st;

  CHECK(s->bad_releases == 0,
        "%llu releases named a slice that was not live or gave another size",
        (unsigned long long)s->bad_releases);
  CHECK(s->nslots <= s->cap, "%u slots used of %u allocated", s->nslots,
        s->cap);
  st = check_slots(s, pool, held_ok, &nempty, &largest_free);
  if (st != HIPPO_SUCCESS)
    return st;
  nfree = s->free_count;

  /* The empty-slot list. */
  n = 0;
  for (i = s->empty; i != NIL; i = s->slot[i].next) {
    CHECK(i < s->nslots, "empty-slot list reaches slot %u of %u", i,
          s->nslots);
    CHECK(s->slot[i].state == HIPPO__SLOT_EMPTY,
          "empty-slot list holds slot %u in state %u", i, s->slot[i].state);
    CHECK(++n <= nempty,
          "empty-slot list is longer than the %llu empty slots (a cycle?)",
          (unsigned long long)nempty);
  }
  CHECK(n == nempty, "empty-slot list has %llu of %llu empty slots",
        (unsigned long long)n, (unsigned long long)nempty);

  /* The FIFO. */
  {
    char name[48];
    snprintf(name, sizeof name, "%s check: the FIFO", s->name);
    st = hippo__fifo_check(&s->fifo, s->slot, s->nslots, nfree, slot_free, s,
                           name, &n);
    if (st != HIPPO_SUCCESS)
      return st;
  }
  CHECK(n == nfree, "FIFO holds %llu of %llu free %s", (unsigned long long)n,
        (unsigned long long)nfree, s->many);
  CHECK(hippo__fifo_due(&s->fifo, s->slot, pool) == pool->due,
        "due at clock %llu, the FIFO's front says %llu",
        (unsigned long long)pool->due,
        (unsigned long long)hippo__fifo_due(&s->fifo, s->slot, pool));

  /* The report. */
  pool->ops->report(pool, &r);
  CHECK(r.largest_free == largest_free,
        "largest_free reported %llu, the largest free %s has %llu",
        (unsigned long long)r.largest_free, s->one,
        (unsigned long long)largest_free);
  CHECK(r.bytes_free == s->bytes_free,
        "bytes_free %llu reported, the free %s have %llu",
        (unsigned long long)r.bytes_free, s->many,
        (unsigned long long)s->bytes_free);
  return HIPPO_SUCCESS;
}
