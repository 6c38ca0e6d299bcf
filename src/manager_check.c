/* manager_check.c -- the check walk of a stream's manager (manager.h:
 * the invariant of struct hippo_stream): its handles, every pool's own
 * walk, the figures summed over the pools, the waits of record_use and
 * the holds.  For tests and debugging; O(handles + pools' slices).
 */
#include "manager.h"

hippo_status hippo__manager_check_locked(const hippo_stream *s) {
  uint64_t bytes[HIPPO__MAX_POOLS + 1] = {0};
  uint64_t count[HIPPO__MAX_POOLS + 1] = {0};
  uint64_t zero = 0, in_use = 0, reserved = 0, pages = 0, holds = 0;
  hippo_status st = hippo__handles_check(&s->handles);
  if (st != HIPPO_SUCCESS)
    return st;
  for (uint32_t k = 1; k <= HIPPO__MAX_POOLS; k++)
    if (s->parked[k].records && k < s->pool_count &&
        s->pools[k]->ops->names_give)
      return hippo__error_set(HIPPO_INTERNAL,
                              "manager check: pool %u names reservations "
                              "but its generation history is parked",
                              k);
  for (uint32_t i = 0; i < s->handles.count; i++) {
    const hippo__slot *slot = &s->handles.slots[i];
    if (!slot->live)
      continue;
    in_use += slot->size;
    if (slot->pool == HIPPO__POOL_NONE) {
      zero++;
      if (slot->size != 0)
        return hippo__error_set(HIPPO_INTERNAL,
                                "manager check: slot %u has no pool but "
                                "%llu B",
                                i, (unsigned long long)slot->size);
      continue;
    }
    if (slot->pool >= s->pool_count ||
        s->pools[slot->pool]->ops->release_named)
      return hippo__error_set(HIPPO_INTERNAL,
                              "manager check: slot %u names pool %u of %u, "
                              "or one that names its own slices",
                              i, slot->pool, s->pool_count);
    bytes[slot->pool] += slot->size;
    count[slot->pool]++;
  }
  {
    uint32_t i = 0;
    while (i < s->pool_count && s->pools[i] != s->gate.unsettled)
      i++;
    if (s->gate.unsettled && (i == s->pool_count || !s->pools[i]->ops->settle))
      return hippo__error_set(HIPPO_INTERNAL,
                              "manager check: the pool whose release waits "
                              "is not one of the stream's that settle");
  }
  for (uint32_t i = 0; i < s->pool_count; i++) {
    const hippo__pool *p = s->pools[i];
    st = p->ops->check(p); /* settles the pool first */
    if (st != HIPPO_SUCCESS)
      return hippo__error_wrap(st, "pool %u", i);
    if (p->ops->release_named) { /* the pool's check covered its names */
      in_use += p->bytes_in_use;
    } else if (bytes[i] != p->bytes_in_use || count[i] != p->allocations) {
      return hippo__error_set(HIPPO_INTERNAL,
                              "manager check: pool %u: handles hold %llu "
                              "reservations of %llu B, the pool counts %llu "
                              "of %llu B",
                              i, (unsigned long long)count[i],
                              (unsigned long long)bytes[i],
                              (unsigned long long)p->allocations,
                              (unsigned long long)p->bytes_in_use);
    }
    reserved += p->bytes_reserved;
    pages += p->pages;
    holds += p->holds;
  }
  for (uint32_t i = 0; i < s->leaving.count; i++) {
    reserved += s->leaving.pages[i].size;
    pages++;
  }
  if (s->gate.unsettled)
    return hippo__error_set(HIPPO_INTERNAL,
                            "manager check: a release still waits after "
                            "every pool's check");
  for (uint32_t i = 0; i < s->ticking_count; i++)
    if (s->ticking[i]->due < s->gate.due_min)
      return hippo__error_set(HIPPO_INTERNAL,
                              "manager check: a ticking pool is due at "
                              "clock %llu, below the stream's bound %llu",
                              (unsigned long long)s->ticking[i]->due,
                              (unsigned long long)s->gate.due_min);
  uint64_t seq = 0, keyed = 0; /* the last keyed wait's seq; their count */
  for (uint32_t i = 0; i < s->wait_count; i++) {
    const hippo__use *w = &s->waits[i];
    if (w->late ? !w->user || w->user->magic != HIPPO__STREAM_MAGIC
                : w->user != NULL)
      return hippo__error_set(HIPPO_INTERNAL,
                              "manager check: wait %u (slice %u of pool %u) "
                              "is %s but names %s user",
                              i, w->slice, w->pool,
                              w->late ? "late" : "recorded",
                              w->user ? "a" : "no");
    if (w->key && (w->late || w->key->magic != HIPPO__STREAM_MAGIC ||
                   w->seq <= seq || w->seq > s->wait_seq))
      return hippo__error_set(HIPPO_INTERNAL,
                              "manager check: wait %u (slice %u of pool %u) "
                              "is ordered behind its user's waits but is "
                              "late, names a detached stream, or is out of "
                              "their order (seq %llu after %llu)",
                              i, w->slice, w->pool, (unsigned long long)w->seq,
                              (unsigned long long)seq);
    if (w->key) {
      uint32_t k = hippo__manager_wait_user_find(s, w->key);
      seq = w->seq;
      keyed++;
      if (k == s->wait_user_count || s->wait_users[k].waits == 0)
        return hippo__error_set(HIPPO_INTERNAL,
                                "manager check: wait %u names a user the "
                                "stream does not count",
                                i);
    }
  }
  {
    uint64_t counted = 0;
    for (uint32_t k = 0; k < s->wait_user_count; k++) {
      uint32_t n = 0;
      for (uint32_t i = 0; i < s->wait_count; i++)
        n += s->waits[i].key == s->wait_users[k].key;
      if (n != s->wait_users[k].waits ||
          hippo__manager_wait_user_find(s, s->wait_users[k].key) != k)
        return hippo__error_set(HIPPO_INTERNAL,
                                "manager check: user %u of the waits counts "
                                "%u waits, %u name it (or it is listed "
                                "twice)",
                                k, s->wait_users[k].waits, n);
      counted += n;
    }
    if (counted != keyed)
      return hippo__error_set(HIPPO_INTERNAL,
                              "manager check: %llu keyed waits, the users "
                              "count %llu",
                              (unsigned long long)keyed,
                              (unsigned long long)counted);
  }
  if (holds != s->holds + s->use_count + s->wait_count)
    return hippo__error_set(HIPPO_INTERNAL,
                            "manager check: pools count %llu holds, the "
                            "stream %llu of graphs, %u uses and %u waits",
                            (unsigned long long)holds,
                            (unsigned long long)s->holds, s->use_count,
                            s->wait_count);
  if (zero != s->zero_live || in_use != s->in_use ||
      s->in_use > s->peak_in_use)
    return hippo__error_set(HIPPO_INTERNAL,
                            "manager check: %llu zero-size and %llu B live, "
                            "counters say %llu and %llu B (peak %llu B)",
                            (unsigned long long)zero,
                            (unsigned long long)in_use,
                            (unsigned long long)s->zero_live,
                            (unsigned long long)s->in_use,
                            (unsigned long long)s->peak_in_use);
  if (reserved != atomic_load(&s->acct.bytes_reserved) ||
      pages != atomic_load(&s->acct.pages) ||
      reserved > atomic_load(&s->acct.peak_bytes_reserved))
    return hippo__error_set(HIPPO_INTERNAL,
                            "manager check: pools hold %llu pages of %llu B, "
                            "the stream's figures say %llu of %llu B (peak "
                            "%llu B)",
                            (unsigned long long)pages,
                            (unsigned long long)reserved,
                            (unsigned long long)atomic_load(&s->acct.pages),
                            (unsigned long long)atomic_load(
                                &s->acct.bytes_reserved),
                            (unsigned long long)atomic_load(
                                &s->acct.peak_bytes_reserved));
  return HIPPO_SUCCESS;
}
