/* manager_check.c -- the check walk of a stream's manager (manager.h:
 * the invariant of struct hippo_stream): its handles, every pool's own
 * walk, the figures summed over the pools, the waits of record_use and
 * the holds.  For tests and debugging; O(handles + pools' slices).
 */
#include <string.h>

#include "manager.h"

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond))                                                               \
      return hippo__error_set(HIPPO_INTERNAL, "manager check: " __VA_ARGS__);  \
  } while (0)

/* What the walk of the handles and the pools counts, compared with the
 * stream's figures at the end. */
typedef struct tally {
  uint64_t bytes[HIPPO__MAX_POOLS + 1]; /* by pool: table-named bytes */
  uint64_t count[HIPPO__MAX_POOLS + 1]; /*   and reservations */
  uint64_t zero, in_use, reserved, pages, holds;
} tally;

/* The handle table: its own walk, then every live slot names a pool that
 * does not name its reservations (or none, for size 0); no pool that
 * names its reservations has its history parked. */
static hippo_status check_table(const hippo_stream *s, tally *t) {
  hippo_status st = hippo__handles_check(&s->handles);
  if (st != HIPPO_SUCCESS)
    return st;
  for (uint32_t k = 1; k <= HIPPO__MAX_POOLS; k++)
    CHECK(!(s->parked[k].records && k < s->pool_count &&
            s->pools[k]->ops->names_give),
          "pool %u names reservations but its generation history is parked",
          k);
  for (uint32_t i = 0; i < s->handles.count; i++) {
    const hippo__slot *slot = &s->handles.slots[i];
    if (!slot->live)
      continue;
    t->in_use += slot->size;
    if (slot->pool == HIPPO__POOL_NONE) {
      t->zero++;
      CHECK(slot->size == 0, "slot %u has no pool but %llu B", i,
            (unsigned long long)slot->size);
      continue;
    }
    CHECK(slot->pool < s->pool_count &&
              !s->pools[slot->pool]->ops->release_named,
          "slot %u names pool %u of %u, or one that names its own slices",
          i, slot->pool, s->pool_count);
    t->bytes[slot->pool] += slot->size;
    t->count[slot->pool]++;
  }
  return HIPPO_SUCCESS;
}

/* Every pool's own walk (which settles it), the table's reservations
 * against each pool's figures, and what the pools hold, summed; then the
 * free gate: no release waits, and the ticking pools' dues are at or
 * above the stream's bound; ticking and movable list exactly the pools
 * with a period and those relocation acts on, in routing order. */
static hippo_status check_pools(const hippo_stream *s, tally *t) {
  uint32_t i = 0;
  while (i < s->pool_count && s->pools[i] != s->gate.unsettled)
    i++;
  CHECK(!s->gate.unsettled ||
            (i < s->pool_count && s->pools[i]->ops->settle),
        "the pool whose release waits is not one of the stream's that "
        "settle");
  for (i = 0; i < s->pool_count; i++) {
    const hippo__pool *p = s->pools[i];
    hippo_status st = p->ops->check(p); /* settles the pool first */
    if (st != HIPPO_SUCCESS)
      return hippo__error_wrap(st, "pool %u", i);
    if (p->ops->release_named) /* the pool's check covered its names */
      t->in_use += p->bytes_in_use;
    else
      CHECK(t->bytes[i] == p->bytes_in_use && t->count[i] == p->allocations,
            "pool %u: handles hold %llu reservations of %llu B, the pool "
            "counts %llu of %llu B",
            i, (unsigned long long)t->count[i],
            (unsigned long long)t->bytes[i],
            (unsigned long long)p->allocations,
            (unsigned long long)p->bytes_in_use);
    t->reserved += p->bytes_reserved;
    t->pages += p->pages;
    t->holds += p->holds;
  }
  for (i = 0; i < s->leaving.count; i++) {
    t->reserved += s->leaving.pages[i].size;
    t->pages++;
  }
  CHECK(!s->gate.unsettled,
        "a release still waits after every pool's check");
  for (i = 0; i < s->ticking_count; i++)
    CHECK(s->ticking[i]->due >= s->gate.due_min,
          "a ticking pool is due at clock %llu, below the stream's bound "
          "%llu",
          (unsigned long long)s->ticking[i]->due,
          (unsigned long long)s->gate.due_min);
  {
    uint32_t k = 0, m = 0;
    for (i = 0; i < s->pool_count; i++) {
      if (s->pools[i]->opt.dealloc_period) {
        CHECK(k < s->ticking_count && s->ticking[k] == s->pools[i],
              "pool %u has a dealloc period but is not the ticking "
              "pool %u",
              i, k);
        k++;
      }
      if (hippo__manager_relocates(s->pools[i])) {
        CHECK(m < s->movable_count && s->movable[m] == s->pools[i],
              "relocation acts on pool %u but it is not movable pool %u",
              i, m);
        m++;
      }
    }
    CHECK(k == s->ticking_count && m == s->movable_count,
          "%u ticking and %u movable pools listed, %u and %u are",
          s->ticking_count, s->movable_count, k, m);
  }
  return HIPPO_SUCCESS;
}

/* The waits of record_use (manager.h, hippo__use): a late wait names the
 * capturing user, a recorded one none; the keyed waits lie in the order
 * of their records and name attached streams; the wait users count them
 * exactly. */
static hippo_status check_waits(const hippo_stream *s) {
  uint64_t seq = 0, keyed = 0, counted = 0; /* the last keyed wait's seq */
  for (uint32_t i = 0; i < s->wait_count; i++) {
    const hippo__use *w = &s->waits[i];
    CHECK(w->late ? w->user && w->user->magic == HIPPO__STREAM_MAGIC
                  : w->user == NULL,
          "wait %u (slice %u of pool %u) is %s but names %s user", i,
          w->slice, w->pool, w->late ? "late" : "recorded",
          w->user ? "a" : "no");
    if (!w->key)
      continue;
    CHECK(!w->late && w->key->magic == HIPPO__STREAM_MAGIC &&
              w->seq > seq && w->seq <= s->wait_seq,
          "wait %u (slice %u of pool %u) is ordered behind its user's waits "
          "but is late, names a detached stream, or is out of their order "
          "(seq %llu after %llu)",
          i, w->slice, w->pool, (unsigned long long)w->seq,
          (unsigned long long)seq);
    {
      uint32_t k = hippo__manager_wait_user_find(s, w->key);
      CHECK(k < s->wait_user_count && s->wait_users[k].waits != 0,
            "wait %u names a user the stream does not count", i);
    }
    seq = w->seq;
    keyed++;
  }
  for (uint32_t k = 0; k < s->wait_user_count; k++) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->wait_count; i++)
      n += s->waits[i].key == s->wait_users[k].key;
    CHECK(n == s->wait_users[k].waits &&
              hippo__manager_wait_user_find(s, s->wait_users[k].key) == k,
          "user %u of the waits counts %u waits, %u name it (or it is listed "
          "twice)",
          k, s->wait_users[k].waits, n);
    counted += n;
  }
  CHECK(counted == keyed, "%llu keyed waits, the users count %llu",
        (unsigned long long)keyed, (unsigned long long)counted);
  return HIPPO_SUCCESS;
}

/* The stream's figures against what the walk counted. */
static hippo_status check_figures(const hippo_stream *s, const tally *t) {
  CHECK(t->holds == s->holds + s->use_count + s->wait_count,
        "pools count %llu holds, the stream %llu of graphs, %u uses and %u "
        "waits",
        (unsigned long long)t->holds, (unsigned long long)s->holds,
        s->use_count, s->wait_count);
  CHECK(t->zero == s->zero_live && t->in_use == s->in_use &&
            s->in_use <= s->peak_in_use,
        "%llu zero-size and %llu B live, counters say %llu and %llu B (peak "
        "%llu B)",
        (unsigned long long)t->zero, (unsigned long long)t->in_use,
        (unsigned long long)s->zero_live, (unsigned long long)s->in_use,
        (unsigned long long)s->peak_in_use);
  CHECK(t->reserved == atomic_load(&s->acct.bytes_reserved) &&
            t->pages == atomic_load(&s->acct.pages) &&
            t->reserved <= atomic_load(&s->acct.peak_bytes_reserved),
        "pools hold %llu pages of %llu B, the stream's figures say %llu of "
        "%llu B (peak %llu B)",
        (unsigned long long)t->pages, (unsigned long long)t->reserved,
        (unsigned long long)atomic_load(&s->acct.pages),
        (unsigned long long)atomic_load(&s->acct.bytes_reserved),
        (unsigned long long)atomic_load(&s->acct.peak_bytes_reserved));
  return HIPPO_SUCCESS;
}

hippo_status hippo__manager_check_locked(const hippo_stream *s) {
  tally t;
  hippo_status st;
  memset(&t, 0, sizeof t);
  if ((st = check_table(s, &t)) != HIPPO_SUCCESS ||
      (st = check_pools(s, &t)) != HIPPO_SUCCESS ||
      (st = check_waits(s)) != HIPPO_SUCCESS)
    return st;
  return check_figures(s, &t);
}
