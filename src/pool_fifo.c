/* pool_fifo.c -- giving empty pages back from a FIFO, and its check walk
 * (pool_fifo.h). */
#include <stdio.h>
#include <string.h>

#include "pool_fifo.h"

#define NIL HIPPO__FIFO_NIL

hippo_status hippo__fifo_give_back(hippo__fifo *f, void *base,
                                   hippo__pool *pool, bool due_only, bool ask,
                                   const hippo__fifo_drop *how, void *ctx) {
  uint64_t period = pool->opt.dealloc_period;
  hippo_status first = HIPPO_SUCCESS;
  unsigned failed = 0;
  char msg[HIPPO__ERROR_MAX];
  uint32_t i = f->front, stop = NIL;
  while (i != NIL && i != stop) {
    const hippo__fifo_link *l = hippo__fifo_link_of(f, base, i);
    uint32_t next = l->newer;
    hippo_status st;
    if (due_only && pool->now - l->since < period)
      break;
    if (ask && !hippo__pool_may_free(pool))
      break; /* a capture records: wait */
    st = how->drop(ctx, i);
    if (st != HIPPO_SUCCESS) {
      if (failed++ == 0) {
        first = st;
        snprintf(msg, sizeof msg, "%s", hippo__error_get());
      }
      how->failed(ctx, i);
      if (stop == NIL && f->back == i)
        stop = i; /* it went to the back: every other one gets its try */
    }
    i = next;
  }
  if (failed > 1)
    hippo__error_set(first, "%s (and %u more %s frees failed)", msg,
                     failed - 1, how->what);
  else if (failed == 1)
    hippo__error_set(first, "%s", msg);
  return first;
}

#define CHECK(cond, fmt, ...)                                                  \
  do {                                                                         \
    if (!(cond))                                                               \
      return hippo__error_set(HIPPO_INTERNAL, "%s: " fmt, name, __VA_ARGS__);  \
  } while (0)

hippo_status hippo__fifo_check(const hippo__fifo *f, const void *base,
                               uint32_t count, uint64_t limit,
                               bool (*on)(const void *ctx, uint32_t i),
                               const void *ctx, const char *name,
                               uint64_t *n) {
  uint32_t prev = NIL;
  uint64_t last = 0;
  *n = 0;
  for (uint32_t i = f->front; i != NIL;
       prev = i, i = hippo__fifo_link_of(f, base, i)->newer) {
    const hippo__fifo_link *l;
    CHECK(i < count, "record %u of %u", i, count);
    l = hippo__fifo_link_of(f, base, i);
    CHECK(on(ctx, i), "holds record %u, which does not belong there", i);
    CHECK(l->older == prev, "record %u links back to %u, not %u", i, l->older,
          prev);
    CHECK(l->since >= last, "record %u joined at %llu, after one at %llu", i,
          (unsigned long long)l->since, (unsigned long long)last);
    CHECK(++*n <= limit, "longer than %llu records (a cycle?)",
          (unsigned long long)limit);
    last = l->since;
  }
  CHECK(prev == f->back, "ends at %u, its back is %u", prev, f->back);
  return HIPPO_SUCCESS;
}
