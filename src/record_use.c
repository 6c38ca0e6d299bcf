/* record_use.c -- uses of a stream's reservations by other streams
 * (hippo.h, record_use), and the waits for their work (manager.h: struct
 * hippo__use).
 *
 * A use keeps a hold on the slice, so its release leaves it out of use
 * (guarded bytes) until the hold goes; the event recorded on the user at
 * the release says when.  A user that captures a graph at the release
 * gets its event recorded once the capture ended (a record during it
 * would be baked into the graph).
 */
#include <stdlib.h>
#include <string.h>

#include "manager.h"

/* Room for one more entry in a uses or waits array. */
static hippo_status use_room(hippo__use **a, uint32_t count, uint32_t *cap) {
  if (count < *cap)
    return HIPPO_SUCCESS;
  {
    uint32_t n = *cap ? *cap * 2 : 8;
    hippo__use *grown = realloc(*a, n * sizeof *grown);
    if (!grown)
      return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                              "record_use: host memory for %u uses", n);
    *a = grown;
    *cap = n;
  }
  return HIPPO_SUCCESS;
}

/* A waiting slice's users are done: its hold goes (it may become free),
 * its event is ready again.  The caller takes w out of the waits. */
static void wait_finish(hippo_stream *s, const hippo__use *w) {
  hippo__pool *p = s->pools[w->pool];
  p->now = s->clock; /* stamps the page if it empties */
  p->ops->unhold(p, w->slice, true);
  hippo__events_put(s->env->events, w->event);
}

/* The entry of user `key` in the stream's wait users (wait_user_count:
 * none). */
uint32_t hippo__manager_wait_user_find(const hippo_stream *s,
                                       const hippo_stream *key) {
  uint32_t k = 0;
  while (k < s->wait_user_count && s->wait_users[k].key != key)
    k++;
  return k;
}

/* Room for n more wait users (before anything changes). */
static hippo_status wait_user_room(hippo_stream *s, uint32_t n) {
  if (s->wait_user_count + n <= s->wait_user_cap)
    return HIPPO_SUCCESS;
  {
    uint32_t cap = s->wait_user_cap ? s->wait_user_cap * 2 : 4;
    hippo__wait_user *grown;
    while (cap < s->wait_user_count + n)
      cap *= 2;
    grown = realloc(s->wait_users, cap * sizeof *grown);
    if (!grown)
      return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                              "record_use: host memory for %u users", cap);
    s->wait_users = grown;
    s->wait_user_cap = cap;
  }
  return HIPPO_SUCCESS;
}

/* One keyed wait more (room was made) or fewer for user `key`; `forget`:
 * all of them (the user detaches and the waits lose its key). */
static void wait_user_add(hippo_stream *s, const hippo_stream *key) {
  uint32_t k = hippo__manager_wait_user_find(s, key);
  if (k == s->wait_user_count)
    s->wait_users[s->wait_user_count++] = (hippo__wait_user){key, 0};
  s->wait_users[k].waits++;
}
static void wait_user_drop(hippo_stream *s, const hippo_stream *key,
                           bool forget) {
  uint32_t k = hippo__manager_wait_user_find(s, key);
  if (k == s->wait_user_count)
    return; /* forget: the user had no keyed waits here */
  if (forget || s->wait_users[k].waits == 1)
    s->wait_users[k] = s->wait_users[--s->wait_user_count];
  else
    s->wait_users[k].waits--;
}

/* The waits finished since the last call (event NULL) leave the array,
 * which keeps its order (the keyed waits' order is their records'). */
static void waits_compact(hippo_stream *s) {
  uint32_t kept = 0;
  for (uint32_t i = 0; i < s->wait_count; i++)
    if (s->waits[i].event)
      s->waits[kept++] = s->waits[i];
    else if (s->waits[i].key)
      wait_user_drop(s, s->waits[i].key, false);
  s->wait_count = kept;
}

/* Records use u's event on its user, which marks the work the user queued
 * so far; unless the user captures (*late then, nothing recorded): a
 * record during a capture would be baked into the graph and mark none of
 * the work queued before it (fake-hip fuzz seed 45). */
static hippo_status use_record(hippo__backend *be, const hippo__use *u,
                               bool *late) {
  uint64_t cid = 0;
  hippo_status st = hippo__stream_capture(u->user, &cid);
  *late = st == HIPPO_SUCCESS && cid != 0;
  if (st == HIPPO_SUCCESS && !cid)
    st = be->ops->event_record(be, u->event, u->user->native);
  return st;
}

/* A late wait (hippo__use) whose user no longer captures gets its event
 * recorded now; while the user still captures, nothing happens. */
static hippo_status wait_mark(hippo__backend *be, hippo__use *w) {
  bool late;
  hippo_status st = use_record(be, w, &late);
  if (st == HIPPO_SUCCESS && !late) {
    w->late = false;
    w->user = NULL;
  }
  return st;
}

/* Whether `key` is one of the n keys in `keys`. */
static bool key_in(const hippo_stream *const *keys, unsigned n,
                   const hippo_stream *key) {
  for (unsigned k = 0; k < n; k++)
    if (keys[k] == key)
      return true;
  return false;
}

/* At a reservation: the waiting slices whose events completed become
 * reusable.  Never waits; a failed query or record is counted and tried
 * again.  Oldest first, and once a user's event is not done its later
 * waits are not asked (stream order: they are not done either; PyTorch's
 * caching allocator polls its events the same way), so a reservation asks
 * the driver about one pending event per user stream (POLL_USERS of them
 * remembered; past that, each is asked) and the done ones, not about every
 * waiting slice: 1 query instead of 64 with 64 slices waiting on one
 * user's work (test-guard). */
#define POLL_USERS 8
void hippo__manager_poll_waits_locked(hippo_stream *s) {
  hippo__backend *be = s->env->be;
  const hippo_stream *pending[POLL_USERS];
  unsigned npending = 0;
  bool finished = false;
  /* unkeyed waits not looked at yet; once none is left and every user is
   * pending, the rest are skipped without a look */
  uint32_t unkeyed = s->wait_count;
  bool stops = s->wait_user_count <= POLL_USERS;
  for (uint32_t k = 0; k < s->wait_user_count; k++)
    unkeyed -= s->wait_users[k].waits;
  for (uint32_t i = 0; i < s->wait_count; i++) {
    hippo__use *w = &s->waits[i];
    bool done = false;
    if (stops && unkeyed == 0 && npending == s->wait_user_count)
      break;
    if (!w->key)
      unkeyed--;
    else if (key_in(pending, npending, w->key))
      continue; /* an earlier event of its user is not done */
    if (w->late && wait_mark(be, w) != HIPPO_SUCCESS)
      s->event_failures++;
    else if (w->late) /* its user still captures */
      continue;
    else if (be->ops->event_query(be, w->event, &done) != HIPPO_SUCCESS)
      s->event_failures++;
    else if (done) {
      wait_finish(s, w);
      w->event = NULL;
      finished = true;
    } else if (w->key && npending < POLL_USERS)
      pending[npending++] = w->key;
  }
  if (finished)
    waits_compact(s);
}

hippo_status hippo__manager_wait_uses_locked(hippo_stream *s) {
  hippo__backend *be = s->env->be;
  hippo_status first = HIPPO_SUCCESS;
  for (uint32_t i = s->wait_count; i-- > 0;) {
    hippo__use *w = &s->waits[i];
    hippo_status st = w->late ? wait_mark(be, w) : HIPPO_SUCCESS;
    if (st == HIPPO_SUCCESS && w->late && first == HIPPO_SUCCESS)
      first = hippo__error_set(HIPPO_GRAPH_RECORDING,
                               "a stream that used a released reservation "
                               "(record_use) is capturing a graph; its "
                               "bytes wait until the capture ends: retry "
                               "then");
    if (st == HIPPO_SUCCESS && w->late)
      continue;
    if (st == HIPPO_SUCCESS)
      st = be->ops->event_wait(be, w->event);
    if (st == HIPPO_SUCCESS) {
      wait_finish(s, w);
      w->event = NULL;
    } else if (first == HIPPO_SUCCESS)
      first = st;
  }
  waits_compact(s);
  return first;
}

/* The release of slice (pool, slice) is about to happen: each use of it
 * gets its event recorded on its user and becomes a wait.  A failure
 * changes nothing (the release must not happen). */
hippo_status hippo__manager_uses_released_locked(hippo_stream *s,
                                                 uint32_t pool,
                                                 uint32_t slice,
                                                 hippo__uses_released *out) {
  hippo__backend *be = s->env->be;
  uint32_t n = 0;
  *out = (hippo__uses_released){.pool = pool, .slice = slice, .waits = 0};
  for (uint32_t i = 0; i < s->use_count; i++) {
    hippo__use *u = &s->uses[i];
    hippo_status st;
    if (u->pool != pool || u->slice != slice)
      continue;
    n++;
    u->late = false;
    st = use_room(&s->waits, s->wait_count + n - 1, &s->wait_cap);
    if (st == HIPPO_SUCCESS)
      st = wait_user_room(s, n);
    if (st == HIPPO_SUCCESS && u->user)
      st = use_record(be, u, &u->late);
    if (st != HIPPO_SUCCESS)
      return hippo__error_wrap(st,
                               "release: marking the work of a stream that "
                               "uses the reservation (record_use); it stays "
                               "live, retry");
  }
  for (uint32_t i = s->use_count; i-- > 0;) {
    hippo__use *u = &s->uses[i];
    if (u->pool != pool || u->slice != slice)
      continue;
    u->key = NULL;
    u->seq = 0;
    if (!u->late && u->user) { /* recorded now: in order behind its
                                  user's earlier ones */
      u->key = u->user;
      u->seq = ++s->wait_seq;
      wait_user_add(s, u->key);
    }
    if (!u->late) /* recorded (now, or when its user detached) */
      u->user = NULL;
    s->waits[s->wait_count++] = *u;
    s->uses[i] = s->uses[--s->use_count];
  }
  out->waits = n;
  return HIPPO_SUCCESS;
}

/* Before release's own work: the uses of h's slice, if any. */
hippo_status hippo__manager_release_uses_locked(hippo_stream *s,
                                                hippo_handle h,
                                                hippo__uses_released *out) {
  uint32_t pool, slice;
  hippo__slot *slot;
  *out = (hippo__uses_released){0};
  if (!hippo__manager_locate_locked(s, h, &pool, &slice, &slot) ||
      pool == HIPPO__POOL_NONE)
    return HIPPO_SUCCESS; /* release reports a bad handle itself */
  return hippo__manager_uses_released_locked(s, pool, slice, out);
}

/* After the release: its bytes count as waiting, not guarded, unless a
 * graph holds the slice too (hippo_usage.bytes_waiting). */
void hippo__manager_waits_released_locked(hippo_stream *s,
                                          const hippo__uses_released *r) {
  if (r->waits) {
    hippo__pool *p = s->pools[r->pool];
    p->ops->waits(p, r->slice, r->waits);
  }
}

/* use_record where the user must not capture (a detach, refused while a
 * stream of the device captures): a capture is HIPPO_GRAPH_RECORDING. */
static hippo_status use_record_now(hippo__backend *be, const hippo__use *u) {
  bool late;
  hippo_status st = use_record(be, u, &late);
  if (st == HIPPO_SUCCESS && late)
    st = hippo__error_set(HIPPO_GRAPH_RECORDING,
                          "a stream that uses the reservations "
                          "(record_use) is capturing a graph; retry once "
                          "the capture ended");
  return st;
}

hippo_status hippo__manager_drop_uses_locked(hippo_stream *s) {
  hippo__backend *be = s->env->be;
  hippo_status st = HIPPO_SUCCESS;
  for (uint32_t i = 0; i < s->use_count && st == HIPPO_SUCCESS; i++)
    if (s->uses[i].user)
      st = use_record_now(be, &s->uses[i]);
  for (uint32_t i = 0; i < s->use_count && st == HIPPO_SUCCESS; i++)
    st = be->ops->event_wait(be, s->uses[i].event);
  /* the waits before the uses go: a failure keeps every use, so the
   * users' later work still holds the bytes at their release */
  if (st == HIPPO_SUCCESS)
    st = hippo__manager_wait_uses_locked(s);
  if (st != HIPPO_SUCCESS)
    return st;
  while (s->use_count) { /* every user is done with them */
    hippo__use u = s->uses[--s->use_count];
    s->pools[u.pool]->ops->unhold(s->pools[u.pool], u.slice, true);
    hippo__events_put(s->env->events, u.event);
  }
  return HIPPO_SUCCESS;
}

hippo_status hippo__manager_user_leaves_locked(hippo_stream *s,
                                               hippo_stream *user,
                                               bool mark) {
  hippo__backend *be = s->env->be;
  if (mark) { /* recorded: waited for at the release, or polled */
    for (uint32_t i = 0; i < s->use_count; i++)
      if (s->uses[i].user == user)
        s->uses[i].user = NULL;
    for (uint32_t i = 0; i < s->wait_count; i++) {
      if (s->waits[i].late && s->waits[i].user == user) {
        s->waits[i].late = false;
        s->waits[i].user = NULL;
      }
      if (s->waits[i].key == user) /* its name may come back */
        s->waits[i].key = NULL;
    }
    wait_user_drop(s, user, true);
    return HIPPO_SUCCESS;
  }
  /* its uses, and the late waits (released while it captured) */
  for (uint32_t k = 0; k < s->use_count + s->wait_count; k++) {
    hippo__use *u = k < s->use_count ? &s->uses[k]
                                     : &s->waits[k - s->use_count];
    hippo_status st;
    if (u->user != user || (k >= s->use_count && !u->late))
      continue;
    st = use_record_now(be, u);
    if (st != HIPPO_SUCCESS)
      return hippo__error_wrap(st,
                               "stream_detach: marking the work of the "
                               "stream on reservations it uses; nothing "
                               "was released, retry");
  }
  return HIPPO_SUCCESS;
}

hippo_status hippo__record_use(hippo_stream *s, hippo_handle h,
                               hippo_stream *user) {
  uint32_t pool, slice;
  hippo__slot *slot;
  void *event = NULL;
  uint64_t cid = 0;
  hippo_status st = HIPPO_SUCCESS;
  if (user != s) {
    st = hippo__stream_capture(user, &cid);
    if (st == HIPPO_SUCCESS && !cid)
      st = hippo__events_get(s->env->events, &event);
    if (st != HIPPO_SUCCESS)
      return hippo__error_wrap(st, "record_use");
  }
  hippo__lock_take(&s->lock);
  if (!hippo__manager_locate_locked(s, h, &pool, &slice, &slot)) {
    st = hippo__manager_bad_handle(h, "record_use");
    goto out;
  }
  if (user == s || pool == HIPPO__POOL_NONE)
    goto out; /* stream order covers it; no bytes to keep */
  if (cid) { /* the user's graph uses it: guarded for that graph */
    st = hippo__graphs_make_room(s->env->graphs, cid);
    if (st == HIPPO_SUCCESS)
      hippo__manager_guard_take(s, cid, pool, slice);
    goto out;
  }
  for (uint32_t i = 0; i < s->use_count; i++)
    if (s->uses[i].pool == pool && s->uses[i].slice == slice &&
        s->uses[i].user == user)
      goto out; /* once per (reservation, user) */
  st = use_room(&s->uses, s->use_count, &s->use_cap);
  if (st != HIPPO_SUCCESS)
    goto out;
  s->uses[s->use_count++] =
      (hippo__use){.pool = pool, .slice = slice, .user = user, .event = event};
  event = NULL;
  s->pools[pool]->ops->hold(s->pools[pool], slice);
out:
  hippo__lock_drop(&s->lock);
  if (event)
    hippo__events_put(s->env->events, event);
  return st;
}

void hippo__manager_uses_fini(hippo_stream *s) {
  hippo__backend *be = s->env->be;
  for (uint32_t i = 0; i < s->use_count; i++)
    (void)be->ops->event_destroy(be, s->uses[i].event);
  for (uint32_t i = 0; i < s->wait_count; i++)
    (void)be->ops->event_destroy(be, s->waits[i].event);
  free(s->uses);
  free(s->waits);
  free(s->wait_users);
  s->uses = s->waits = NULL;
  s->wait_users = NULL;
  s->use_count = s->wait_count = s->wait_user_count = 0;
}
