/* manager_reserve.c -- a stream's reservations (manager.h): routing,
 * reserve, release and resolve, the periodic deallocation a reservation
 * drives (ticks), and the release of every reservation at detach.
 *
 * Routing: a reservation goes to the persistent pool while the stream is in
 * Persistent mode (a window is open, or the call asks for it); otherwise to
 * the first pool in layout order whose max_size accepts the size.  A capped
 * pool that is full (HIPPO_POOL_CAPACITY_EXCEEDED) spills to the next
 * accepting pool.  When no pool has room, the layers above (the stream's
 * hooks: the out-of-memory ladder, ladder.c) may give pages back, relocate
 * and retry.  A zero-size reservation holds no memory: its handle resolves
 * to (NULL, 0).
 *
 * Handles (handles.h): a reservation of a pool with the *_named operations
 * (SLICED, ARENA) is named by the pool (pool index, slice, generation); any
 * other, and a zero-size one, by a slot of the stream's handle table.
 *
 * The fast path (a free slice fits) makes no backend call and takes only the
 * stream's lock; whether the stream captures is asked first (guard.h: a
 * word on HOST and DRY, the driver on HIP unless announced).
 */
#include "manager.h"

/* The first pool at or after `i` that accepts `size` (pool_count: none). */
static inline uint32_t accepting(const hippo_stream *s, uint64_t size,
                                 uint32_t i) {
  while (i < s->pool_count && size > s->pools[i]->max_size)
    i++;
  return i;
}

/* route's slow part: pool `from` answered `st` (not SUCCESS); spill past
 * full capped pools (and, while the stream captures, past pools that
 * would need a page: a later one may hold room), then say why none took
 * it.  Out of line: the reservation path stays short. */
static hippo_status __attribute__((noinline))
route_on(hippo_stream *s, uint64_t size, uint32_t *pool,
         hippo__slice_ref *ref, uint32_t from, hippo_status st) {
  hippo_status needs_page = HIPPO_SUCCESS;
  for (uint32_t i = from;;) {
    if (st == HIPPO_GRAPH_NEEDS_PAGE)
      needs_page = st;
    else if (st != HIPPO_POOL_CAPACITY_EXCEEDED)
      return st;
    i = accepting(s, size, i + 1);
    if (i >= s->pool_count)
      break;
    st = s->pools[i]->ops->reserve(s->pools[i], size, ref);
    if (st == HIPPO_SUCCESS) {
      *pool = i;
      return st;
    }
  }
  if (needs_page != HIPPO_SUCCESS)
    return hippo__error_set(needs_page,
                            "reserve: %llu B: the stream captures a graph "
                            "and no pool holds room for it; a driver "
                            "allocation inside a capture is illegal: reserve "
                            "this memory before the capture (a warm-up run)",
                            (unsigned long long)size);
  return st;
}

/* No pool of the layout accepts `size` bytes. */
static hippo_status __attribute__((noinline))
too_big(const hippo_stream *s, uint64_t size) {
  uint64_t largest = 0;
  for (uint32_t i = 1; i < s->pool_count; i++)
    if (s->pools[i]->max_size > largest)
      largest = s->pools[i]->max_size;
  return hippo__error_set(HIPPO_BUFFER_TOO_BIG,
                          "reserve: no pool accepts %llu B; the largest "
                          "size any pool of this layout accepts is %llu B",
                          (unsigned long long)size,
                          (unsigned long long)largest);
}

/* Route to the first pool that accepts the size; when it cannot serve,
 * route_on goes on. */
static inline hippo_status route(hippo_stream *s, uint64_t size,
                                 uint32_t *pool, hippo__slice_ref *ref) {
  uint32_t i = accepting(s, size, 1);
  hippo__pool *p;
  hippo_status st;
  if (HIPPO__UNLIKELY(i >= s->pool_count))
    return too_big(s, size);
  p = s->pools[i];
  st = p->ops->reserve(p, size, ref);
  if (HIPPO__LIKELY(st == HIPPO_SUCCESS)) {
    *pool = i;
    return st;
  }
  if (st == HIPPO_POOL_CAPACITY_EXCEEDED && i + 1 == s->pool_count)
    return st; /* the last pool is full: nothing to spill to */
  return route_on(s, size, pool, ref, i, st);
}

static inline hippo_status reserve_in(hippo_stream *s, uint64_t size,
                                      bool persistent, uint32_t *pool,
                                      hippo__slice_ref *ref) {
  if (HIPPO__UNLIKELY(persistent)) {
    *pool = 0;
    return s->pools[0]->ops->reserve(s->pools[0], size, ref);
  }
  return route(s, size, pool, ref);
}

hippo_status hippo__manager_route_locked(hippo_stream *s, uint64_t size,
                                         bool persistent, uint32_t *pool,
                                         hippo__slice_ref *ref) {
  return reserve_in(s, size, persistent, pool, ref);
}

/* After the reservation's ticks: when the free gate said no (a capture
 * records), the pages that are due wait, and asking again at every
 * reservation would be a driver call each time: the ticks pause for 1, 2,
 * 4, ... reservations, at most HIPPO__TICK_BACKOFF_MAX, until the gate
 * says yes again. */
static inline void tick_backoff(hippo_stream *s) {
  if (s->gate.answer < 0)
    return; /* no page was due after all: not asked */
  if (s->gate.answer > 0) {
    s->tick_backoff = 0;
    return;
  }
  s->tick_backoff = s->tick_backoff == 0 ? 1 : s->tick_backoff * 2;
  if (s->tick_backoff > HIPPO__TICK_BACKOFF_MAX)
    s->tick_backoff = HIPPO__TICK_BACKOFF_MAX;
  s->tick_quiet_until = s->clock + s->tick_backoff;
}

hippo_status hippo__manager_bad_handle(hippo_handle h, const char *call) {
  return hippo__error_set(HIPPO_INVALID_HANDLE,
                          "%s: handle %#llx is not live on this stream (0, "
                          "released, stale, forged, or of another stream)",
                          call, (unsigned long long)h);
}

/* Give a live slot's slice back to its pool and free the slot. */
static inline void drop_slot(hippo_stream *s, hippo__slot *slot) {
  if (slot->pool != HIPPO__POOL_NONE) {
    hippo__pool *p = s->pools[slot->pool];
    p->now = s->clock; /* stamps the page if it empties */
    p->ops->release(p, slot->slice, slot->size);
  } else {
    s->zero_live--;
  }
  s->in_use -= slot->size;
  hippo__handles_free(&s->handles, slot);
}

/* The pool that names the reservation of handle parts `hp` (not of the
 * table), or NULL when no pool of this stream would. */
static inline hippo__pool *naming_pool(const hippo_stream *s,
                                       hippo__handle_parts hp) {
  hippo__pool *p;
  if (HIPPO__UNLIKELY(hp.tag != s->handles.tag || hp.pool >= s->pool_count))
    return NULL;
  p = s->pools[hp.pool];
  return p->ops->release_named ? p : NULL;
}

/* The handle of a reservation a pool served (room was made in the table),
 * and the stream's figures. */
static inline void make_handle(hippo_stream *s, uint64_t size, uint32_t pool,
                               const hippo__slice_ref *ref,
                               hippo_handle *out) {
  hippo__slot *slot;
  if (ref->gen != 0) { /* the pool names it (pool.h): no table slot */
    *out = hippo__handle_make(s->handles.tag, pool, ref->gen, ref->slice);
  } else {
    (void)hippo__handles_alloc(&s->handles, out, &slot); /* room was made */
    slot->size = size;
    slot->slice = ref->slice;
    slot->pool = (uint16_t)pool;
    if (size == 0)
      s->zero_live++;
  }
  s->in_use += size;
  if (s->in_use > s->peak_in_use)
    s->peak_in_use = s->in_use;
}

/* Where live handle h's reservation lives: its pool index and slice
 * (HIPPO__POOL_NONE: zero size) and, named by the table, its slot (else
 * NULL).  false when h is not live on s.  Stream lock held. */
bool hippo__manager_locate_locked(hippo_stream *s, hippo_handle h,
                                  uint32_t *pool, uint32_t *slice,
                                  hippo__slot **slot) {
  hippo__handle_parts hp = hippo__handle_split(h);
  *slot = NULL;
  if (hp.pool != HIPPO__HANDLE_TABLE) {
    const hippo__pool *p = naming_pool(s, hp);
    uint64_t addr, size;
    if (!p || !p->ops->resolve_named(p, hp.index, hp.gen, &addr, &size))
      return false;
    *pool = hp.pool;
    *slice = hp.index;
    return true;
  }
  *slot = hippo__handles_get(&s->handles, h);
  if (!*slot)
    return false;
  *pool = (*slot)->pool;
  *slice = (*slot)->slice;
  return true;
}

/* reserve on a stream that captures `cid`: only from room the pools hold
 * (HIPPO_GRAPH_NEEDS_PAGE otherwise), the slice held for the graph, no
 * tick (nothing is given back while a capture records). */
static hippo_status reserve_captured(hippo_stream *s, uint64_t size,
                                     hippo_mode mode, hippo_handle *out,
                                     uint64_t cid) {
  hippo__slice_ref ref = {0, 0, 0};
  uint32_t pool = HIPPO__POOL_NONE;
  bool persistent;
  hippo_status st;
  hippo__lock_take(&s->lock);
  st = hippo__handles_make_room(&s->handles);
  if (st == HIPPO_SUCCESS && size > 0)
    st = hippo__graphs_make_room(s->env->graphs, cid);
  if (st == HIPPO_SUCCESS && size > 0) {
    persistent = mode == HIPPO_MODE_PERSISTENT || s->persistent_depth > 0;
    s->gate.no_pages = true;
    st = reserve_in(s, size, persistent, &pool, &ref);
    s->gate.no_pages = false;
  }
  if (st != HIPPO_SUCCESS) {
    hippo__lock_drop(&s->lock);
    return st;
  }
  make_handle(s, size, pool, &ref, out);
  if (pool != HIPPO__POOL_NONE)
    hippo__manager_guard_take(s, cid, pool, ref.slice);
  s->clock++;
  hippo__lock_drop(&s->lock);
  return HIPPO_SUCCESS;
}

/* Whether ticking pool p is due at the stream's clock (and the ticks are
 * not paused: tick_backoff). */
static inline bool pool_due(const hippo_stream *s, const hippo__pool *p) {
  return HIPPO__UNLIKELY(s->clock >= p->due) &&
         s->clock >= s->tick_quiet_until;
}

/* The release a pool left waiting (pool.h, settle) is finished now, so
 * the dues read after it are exact. */
static void __attribute__((noinline)) settle_unsettled(hippo_stream *s) {
  hippo__pool *p = s->gate.unsettled;
  p->ops->settle(p);
}

/* Whether a ticking pool is due at the stream's clock; the bound on
 * their dues (gate.due_min) becomes their minimum.  Only tick_due calls
 * it, once the ticks' pause is over. */
static bool __attribute__((noinline)) tick_due_any(hippo_stream *s) {
  uint64_t min = UINT64_MAX;
  for (uint32_t i = 0; i < s->ticking_count; i++)
    if (s->ticking[i]->due < min)
      min = s->ticking[i]->due;
  s->gate.due_min = min;
  return s->clock >= min;
}

/* O(1): the pools are looked at only once the clock reaches the bound on
 * their dues (a preset's five ticking pools were about 50 instructions a
 * reservation) and the ticks' pause is over (tick_backoff), and not at
 * all in a layout without periods (the anchors' single SLICED pool: one
 * load). */
static inline bool tick_due(hippo_stream *s) {
  if (s->ticking_count == 0)
    return false;
  if (HIPPO__UNLIKELY(s->gate.unsettled != NULL)) /* its page may be due */
    settle_unsettled(s);
  return HIPPO__UNLIKELY(s->clock >= s->gate.due_min) &&
         s->clock >= s->tick_quiet_until && tick_due_any(s);
}

/* After a successful reservation (the clock moved on), stream lock held:
 * the pages that are due go back, after this reservation had the chance to
 * reuse one (a failed reservation counts for nothing); the lock is
 * dropped. */
static hippo_status __attribute__((noinline))
ticks_and_drop(hippo_stream *s) {
  bool ticked = false;
  if (s->gate.unsettled && s->ticking_count) /* its page may be due */
    settle_unsettled(s);
  for (uint32_t i = 0; i < s->ticking_count; i++)
    if (pool_due(s, s->ticking[i])) {
      s->gate.defer = true; /* the frees come after the lock */
      (void)s->ticking[i]->ops->tick(s->ticking[i], s->clock);
      s->gate.defer = false;
      ticked = true;
    }
  if (ticked) {
    tick_backoff(s);
    if (s->leaving.count > s->leaving.pending)
      hippo__leaving_retry_due_locked(s);
    if (s->leaving.pending) {
      hippo__lock_drop(&s->lock);
      (void)hippo__manager_flush(s, false); /* failures: kept, retried */
      return HIPPO_SUCCESS;
    }
  }
  hippo__lock_drop(&s->lock);
  return HIPPO_SUCCESS;
}

/* The end of a reservation, stream lock held: a pool served `ref` from
 * pool `pool` (or size is 0), or st says why none did yet (retried here).
 * The handle, the figures, the ticks; the lock is dropped. */
static hippo_status __attribute__((noinline))
reserve_finish(hippo_stream *s, uint64_t size, bool persistent,
               uint32_t pool, hippo__slice_ref *ref, hippo_status st,
               hippo_handle *out) {
  if (st != HIPPO_SUCCESS && s->env->hooks && s->env->hooks->no_room)
    st = s->env->hooks->no_room(s, size, persistent, &pool, ref, st);
  if (HIPPO__UNLIKELY(st != HIPPO_SUCCESS)) {
    hippo__lock_drop(&s->lock);
    return st;
  }
  make_handle(s, size, pool, ref, out);
  s->clock++;
  return ticks_and_drop(s);
}

/* A reservation off the common path (size 0, persistent, waiting slices,
 * AUTO_RELOCATE, a full handle table), stream lock held. */
static hippo_status __attribute__((noinline))
reserve_locked(hippo_stream *s, uint64_t size, hippo_mode mode,
               hippo_handle *out) {
  hippo__slice_ref ref = {0, 0, 0};
  uint32_t pool = HIPPO__POOL_NONE;
  hippo_status st;
  bool persistent;
  /* A handle first: once a pool has served, nothing may fail. */
  st = hippo__handles_make_room(&s->handles);
  if (HIPPO__UNLIKELY(st != HIPPO_SUCCESS)) {
    hippo__lock_drop(&s->lock);
    return st;
  }
  if (s->wait_count)
    hippo__manager_poll_waits_locked(s); /* slices other streams used may be reusable now */
  persistent = mode == HIPPO_MODE_PERSISTENT || s->persistent_depth > 0;
  if (size > 0) {
    /* CubeCL's rule, on request (HIPPO_DEVICE_AUTO_RELOCATE): relocate
     * before an ordinary reservation when the memory wants it (the hook,
     * ladder.c) */
    if (s->auto_relocate && !persistent && s->movable_count)
      s->env->hooks->before_reserve(s);
    st = reserve_in(s, size, persistent, &pool, &ref);
  }
  return reserve_finish(s, size, persistent, pool, &ref, st, out);
}

/* The common reservation (a positive size, AUTO, a free handle slot, no
 * waiting slices) is inline here; the rest is out of line, so this path
 * saves few registers. */
hippo_status hippo__reserve(hippo_stream *s, uint64_t size, hippo_mode mode,
                            hippo_handle *out) {
  hippo__slice_ref ref;
  uint32_t pool;
  hippo_status st;
  uint64_t cid;

  ref.gen = 0; /* stays 0 unless a pool that names its slices serves */

  st = hippo__stream_capture(s, &cid);
  if (HIPPO__UNLIKELY(st != HIPPO_SUCCESS || cid))
    return st != HIPPO_SUCCESS ? st : reserve_captured(s, size, mode, out, cid);
  hippo__lock_take(&s->lock);
  s->gate.answer = -1;
  if (HIPPO__UNLIKELY(size == 0 || mode != HIPPO_MODE_AUTO ||
                      (s->persistent_depth | s->wait_count) != 0 ||
                      s->auto_relocate || !hippo__handles_room(&s->handles)))
    return reserve_locked(s, size, mode, out);
  st = route(s, size, &pool, &ref);
  if (HIPPO__UNLIKELY(st != HIPPO_SUCCESS)) {
    if (st == HIPPO_POOL_CAPACITY_EXCEEDED) { /* no retry would help */
      hippo__lock_drop(&s->lock);
      return st;
    }
    return reserve_finish(s, size, false, pool, &ref, st, out);
  }
  make_handle(s, size, pool, &ref, out);
  s->clock++;
  if (HIPPO__UNLIKELY(tick_due(s)))
    return ticks_and_drop(s);
  hippo__lock_drop(&s->lock);
  return HIPPO_SUCCESS;
}

/* release on a stream that captures `cid`: the slice is held for the
 * graph, so it stays out of use until graph_retire. */
static hippo_status release_captured(hippo_stream *s, hippo_handle h,
                                     uint64_t cid) {
  uint32_t pool, slice;
  hippo__slot *slot;
  hippo__uses_released ur = {0};
  hippo_status st = HIPPO_SUCCESS;
  hippo__lock_take(&s->lock);
  if (!hippo__manager_locate_locked(s, h, &pool, &slice, &slot)) {
    hippo__lock_drop(&s->lock);
    return hippo__manager_bad_handle(h, "release");
  }
  if (pool != HIPPO__POOL_NONE) {
    st = hippo__graphs_make_room(s->env->graphs, cid);
    if (st == HIPPO_SUCCESS && s->use_count)
      st = hippo__manager_uses_released_locked(s, pool, slice, &ur);
    if (st != HIPPO_SUCCESS) {
      hippo__lock_drop(&s->lock);
      return st;
    }
    hippo__manager_guard_take(s, cid, pool, slice);
  }
  if (slot) {
    drop_slot(s, slot);
  } else {
    hippo__handle_parts hp = hippo__handle_split(h);
    hippo__pool *p = s->pools[pool];
    uint64_t size;
    p->now = s->clock;
    (void)p->ops->release_named(p, hp.index, hp.gen, &size);
    s->in_use -= size;
  }
  hippo__manager_waits_released_locked(s, &ur);
  hippo__lock_drop(&s->lock);
  return HIPPO_SUCCESS;
}

/* A release off the common path, stream lock held: uses to record, a
 * handle the table names, or one no pool of this stream names (then it is
 * not live).  The lock is dropped. */
static hippo_status __attribute__((noinline))
release_locked(hippo_stream *s, hippo_handle h) {
  hippo__handle_parts hp = hippo__handle_split(h);
  hippo__uses_released ur = {0};
  hippo_status st;
  if (s->use_count &&
      (st = hippo__manager_release_uses_locked(s, h, &ur)) != HIPPO_SUCCESS) {
    hippo__lock_drop(&s->lock);
    return st;
  }
  if (hp.pool != HIPPO__HANDLE_TABLE) {
    hippo__pool *p = naming_pool(s, hp);
    uint64_t size;
    if (p) {
      p->now = s->clock; /* stamps the page if it empties */
      if (p->ops->release_named(p, hp.index, hp.gen, &size)) {
        s->in_use -= size;
        hippo__manager_waits_released_locked(s, &ur);
        hippo__lock_drop(&s->lock);
        return HIPPO_SUCCESS;
      }
    }
  } else {
    hippo__slot *slot = hippo__handles_get(&s->handles, h);
    if (slot) {
      drop_slot(s, slot);
      hippo__manager_waits_released_locked(s, &ur);
      hippo__lock_drop(&s->lock);
      return HIPPO_SUCCESS;
    }
  }
  hippo__lock_drop(&s->lock);
  return hippo__manager_bad_handle(h, "release");
}

/* A release on a stream that may capture (capture_none said no), or
 * whose lock was held at the first try (`contended`). */
static hippo_status __attribute__((noinline))
release_slow(hippo_stream *s, hippo_handle h, bool contended) {
  uint64_t cid;
  hippo_status st;
  if (contended) {
    hippo__lock_slow(&s->lock);
    return release_locked(s, h);
  }
  st = hippo__stream_capture(s, &cid);
  if (st != HIPPO_SUCCESS)
    return st;
  if (cid)
    return release_captured(s, h, cid);
  hippo__lock_take(&s->lock);
  return release_locked(s, h);
}

/* The common release (a stream that does not capture, a free lock, a
 * handle a pool names, no uses to record) is inline here and keeps only
 * the stream and the handle across the pool's call: it saves 3 registers
 * instead of 6, 10 instructions a release fewer (callgrind); the rest is
 * release_slow and release_locked. */
hippo_status hippo__release(hippo_stream *s, hippo_handle h) {
  hippo__handle_parts hp;
  hippo__pool *p;
  uint64_t size;
  if (HIPPO__UNLIKELY(!hippo__capture_none(&s->capture)))
    return release_slow(s, h, false);
  if (HIPPO__UNLIKELY(!hippo__lock_first(&s->lock)))
    return release_slow(s, h, true);
  hp = hippo__handle_split(h);
  if (HIPPO__UNLIKELY(s->use_count != 0 || hp.pool == HIPPO__HANDLE_TABLE) ||
      HIPPO__UNLIKELY((p = naming_pool(s, hp)) == NULL))
    return release_locked(s, h);
  p->now = s->clock; /* stamps the page if it empties */
  if (HIPPO__UNLIKELY(!p->ops->release_named(p, hp.index, hp.gen, &size))) {
    hippo__lock_drop(&s->lock);
    return hippo__manager_bad_handle(h, "release");
  }
  s->in_use -= size;
  hippo__lock_drop(&s->lock);
  return HIPPO_SUCCESS;
}

hippo_status hippo__resolve(hippo_stream *s, hippo_handle h, void **ptr,
                            uint64_t *size) {
  hippo__handle_parts hp = hippo__handle_split(h);
  uint64_t addr = 0, bytes = 0, cid;
  bool live = false;
  hippo_status st = hippo__stream_capture(s, &cid);
  if (HIPPO__UNLIKELY(st != HIPPO_SUCCESS))
    return st;
  hippo__lock_take(&s->lock);
  if (hp.pool != HIPPO__HANDLE_TABLE) {
    const hippo__pool *p = naming_pool(s, hp);
    live = p && p->ops->resolve_named(p, hp.index, hp.gen, &addr, &bytes);
  } else {
    const hippo__slot *slot = hippo__handles_get(&s->handles, h);
    if (slot) {
      live = true;
      if (slot->pool != HIPPO__POOL_NONE)
        addr = s->pools[slot->pool]->ops->addr(s->pools[slot->pool],
                                               slot->slice);
      bytes = slot->size;
    }
  }
  if (HIPPO__UNLIKELY(!live)) {
    hippo__lock_drop(&s->lock);
    return hippo__manager_bad_handle(h, "resolve");
  }
  if (HIPPO__UNLIKELY(cid)) { /* the graph bakes the address in: hold it */
    uint32_t pool, slice;
    hippo__slot *slot;
    (void)hippo__manager_locate_locked(s, h, &pool, &slice, &slot);
    if (pool != HIPPO__POOL_NONE) {
      st = hippo__graphs_make_room(s->env->graphs, cid);
      if (st != HIPPO_SUCCESS) {
        hippo__lock_drop(&s->lock);
        return st;
      }
      hippo__manager_guard_take(s, cid, pool, slice);
    }
  }
  *ptr = (void *)(uintptr_t)addr;
  if (size)
    *size = bytes;
  hippo__lock_drop(&s->lock);
  return HIPPO_SUCCESS;
}

void hippo__manager_release_all_locked(hippo_stream *s) {
  for (uint32_t i = 0; i < s->handles.count; i++) {
    hippo__slot *slot = &s->handles.slots[i];
    if (slot->live)
      drop_slot(s, slot);
  }
  for (uint32_t i = 0; i < s->pool_count; i++) {
    hippo__pool *p = s->pools[i];
    if (p->ops->release_all) {
      s->in_use -= p->bytes_in_use;
      p->now = s->clock;
      p->ops->release_all(p);
    }
  }
}
