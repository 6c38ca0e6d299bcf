/* manager.c -- one stream's memory manager: routing, modes, usage,
 * periodic deallocation.
 *
 * Routing: a reservation goes to the persistent pool while the stream is in
 * Persistent mode (a window is open, or the call asks for it); otherwise to
 * the first pool in layout order whose max_size accepts the size.  A capped
 * pool that is full (HIPPO_POOL_CAPACITY_EXCEEDED) spills to the next
 * accepting pool.  When the backend is out of memory, the manager gives the
 * stream's empty pages back and tries once more before reporting it.
 * A zero-size reservation holds no memory: its handle resolves to (NULL, 0).
 *
 * Handles (handles.h): a reservation of a pool with the *_named operations
 * (SLICED) is named by the pool (pool index, slice, generation); any other,
 * and a zero-size one, by a slot of the stream's handle table.
 *
 * The fast path (a free slice fits) makes no backend call and takes only the
 * stream's lock.
 */
#include <stdlib.h>
#include <string.h>

#include "guard.h"
#include "manager.h"
#include "relocation.h"

hippo_status hippo__manager_init(hippo_stream *s, hippo_device *dev,
                                 void *native) {
  hippo_status st;
  memset(s, 0, sizeof *s);
  s->magic = HIPPO__STREAM_MAGIC;
  s->device = dev;
  s->native = native;
  hippo__lock_init(&s->lock);
  st = hippo__handles_init(&s->handles);
  if (st != HIPPO_SUCCESS)
    return st;
  s->acct.parent = &dev->acct;
  s->gate.ask = hippo__device_may_free;
  s->gate.ctx = dev;
  s->gate.answer = -1;
  s->gate.leaving = &s->leaving;
  s->gate.due_min = 0; /* the first reservation looks at the pools */
  s->pools = calloc(1, sizeof *s->pools);
  s->auto_relocate = (dev->flags & HIPPO_DEVICE_AUTO_RELOCATE) != 0;
  s->backend_word = dev->be->ops->capture_word
                        ? dev->be->ops->capture_word(dev->be, native)
                        : NULL;
  atomic_init(&s->own_word, 0);
  atomic_init(&s->capture_mode, s->backend_word ? HIPPO__CAPTURE_WORD
                                                : HIPPO__CAPTURE_ASK);
  s->ticking = calloc(HIPPO__MAX_POOLS + 1, sizeof *s->ticking);
  s->movable = calloc(HIPPO__MAX_POOLS + 1, sizeof *s->movable);
  if (!s->pools || !s->ticking || !s->movable) {
    free(s->pools);
    free(s->ticking);
    free(s->movable);
    hippo__handles_fini(&s->handles);
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "host memory for a stream manager");
  }
  st = hippo__pool_persistent_create(dev->be, &s->acct, &s->pools[0]);
  if (st != HIPPO_SUCCESS) {
    free(s->pools);
    free(s->ticking);
    free(s->movable);
    hippo__handles_fini(&s->handles);
    return st;
  }
  s->pools[0]->gate = &s->gate;
  s->pool_count = 1;
  return HIPPO_SUCCESS;
}

void hippo__pools_destroy(hippo__pool **pools, uint32_t from,
                          uint32_t count) {
  for (uint32_t i = from; i < count; i++)
    if (pools[i])
      pools[i]->ops->destroy(pools[i]);
}

void hippo__manager_fini(hippo_stream *s) {
  hippo__backend *be = s->device->be;
  s->magic = 0;
  for (uint32_t i = 0; i < s->use_count; i++)
    (void)be->ops->event_destroy(be, s->uses[i].event);
  for (uint32_t i = 0; i < s->wait_count; i++)
    (void)be->ops->event_destroy(be, s->waits[i].event);
  free(s->uses);
  free(s->waits);
  free(s->wait_users);
  free(s->last_failures.v);
  for (uint32_t i = 0; i < s->leaving.count; i++) /* device_close */
    if (be->ops->page_free(be, s->leaving.pages[i].addr,
                           s->leaving.pages[i].size) == HIPPO_SUCCESS)
      hippo__pool_unaccount(&s->acct, s->leaving.pages[i].size);
  free(s->leaving.pages);
  for (uint32_t k = 0; k <= HIPPO__MAX_POOLS; k++)
    free(s->parked[k].records);
  hippo__pools_destroy(s->pools, 0, s->pool_count);
  free(s->pools);
  free(s->ticking);
  free(s->movable);
  hippo__handles_fini(&s->handles);
}

hippo_status hippo__manager_build(hippo_stream *s, const hippo__layout *layout,
                                  hippo__pool ***out, uint32_t *count) {
  uint32_t n = layout->count + 1;
  hippo__pool **pools = calloc(n, sizeof *pools);
  if (!pools)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "host memory for %u pools", n);
  pools[0] = s->pools[0];
  for (uint32_t i = 1; i < n; i++) {
    hippo_status st = hippo__pool_create(s->device->be, &s->acct,
                                         &layout->pools[i - 1], &pools[i]);
    if (st != HIPPO_SUCCESS) {
      hippo__pools_destroy(pools, 1, i);
      free(pools);
      return hippo__error_wrap(st, "building pool %u", i - 1);
    }
    pools[i]->gate = &s->gate;
  }
  *out = pools;
  *count = n;
  return HIPPO_SUCCESS;
}

/* The generation history at pool index k moves from the old pool there
 * (or the parked one) to the new pool there, or is parked. */
static void names_pass(hippo_stream *s, hippo__pool **old, uint32_t old_count,
                       hippo__pool **pools, uint32_t count, uint32_t k) {
  hippo__names names;
  if (k < old_count && old[k]->ops->names_take) {
    old[k]->ops->names_take(old[k], &names);
  } else {
    names = s->parked[k];
    memset(&s->parked[k], 0, sizeof s->parked[k]);
  }
  if (!names.records)
    return;
  if (k < count && pools[k]->ops->names_give)
    pools[k]->ops->names_give(pools[k], &names);
  else
    s->parked[k] = names;
}

/* Install built pools (fresh: none has served yet); the old dynamic pools
 * (which must hold no page) are destroyed after handing their generation
 * histories on.  Cannot fail: the ticking and movable lists were allocated
 * at init for HIPPO__MAX_POOLS + 1 entries. */
void hippo__manager_swap(hippo_stream *s, hippo__pool **pools,
                         uint32_t count) {
  hippo__pool **old = s->pools;
  uint32_t old_count = s->pool_count;
  for (uint32_t k = 1; k <= HIPPO__MAX_POOLS; k++)
    names_pass(s, old, old_count, pools, count, k);
  s->pools = pools;
  s->pool_count = count;
  s->gate.due_min = 0; /* new pools: looked at by the next reservation */
  s->ticking_count = 0;
  s->movable_count = 0;
  for (uint32_t i = 0; i < count; i++) {
    if (pools[i]->opt.dealloc_period)
      s->ticking[s->ticking_count++] = pools[i];
    if (pools[i]->ops->move)
      s->movable[s->movable_count++] = pools[i];
  }
  hippo__pools_destroy(old, 1, old_count);
  free(old);
}

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

/* ---- leaving pages (pool.h, hippo__leaving) --------------------------------- */

#define RETRY_PERIOD HIPPO__DEFAULT_DEALLOC_PERIOD /* reservations */

/* The entry of leaving page `addr` in state `state` (stream lock held). */
static uint32_t leaving_find(const hippo__leaving *l, uint64_t addr,
                             uint32_t state) {
  for (uint32_t i = 0; i < l->count; i++)
    if (l->pages[i].addr == addr && l->pages[i].state == state)
      return i;
  return UINT32_MAX;
}

/* The outcome of one leaving page's free (stream lock held). */
static void leaving_done(hippo_stream *s, uint32_t i, hippo_status st) {
  hippo__leaving *l = &s->leaving;
  if (st == HIPPO_SUCCESS) {
    hippo__pool_unaccount(&s->acct, l->pages[i].size);
    l->pages[i] = l->pages[--l->count];
  } else {
    l->pages[i].state = HIPPO__LEAVING_FAILED;
    l->pages[i].retry_at = s->clock + RETRY_PERIOD;
  }
}

hippo_status hippo__manager_flush(hippo_stream *s, bool failed_too) {
  enum { BATCH = 16 };
  hippo__backend *be = s->device->be;
  hippo__leaving *l = &s->leaving;
  hippo__leaving_page todo[BATCH];
  hippo_status res[BATCH], first = HIPPO_SUCCESS;
  uint32_t n;
  hippo__lock_take(&s->lock);
  if (failed_too)
    for (uint32_t i = 0; i < l->count; i++)
      if (l->pages[i].state == HIPPO__LEAVING_FAILED) {
        l->pages[i].state = HIPPO__LEAVING_PENDING;
        l->pending++;
      }
  do {
    n = 0;
    for (uint32_t i = 0; i < l->count && n < BATCH; i++)
      if (l->pages[i].state == HIPPO__LEAVING_PENDING) {
        l->pages[i].state = HIPPO__LEAVING_FREEING;
        l->pending--;
        todo[n++] = l->pages[i];
      }
    hippo__lock_drop(&s->lock);
    for (uint32_t k = 0; k < n; k++) /* no lock held: hipFree may wait */
      res[k] = be->ops->page_free(be, todo[k].addr, todo[k].size);
    hippo__lock_take(&s->lock);
    for (uint32_t k = 0; k < n; k++) {
      leaving_done(s, leaving_find(l, todo[k].addr, HIPPO__LEAVING_FREEING),
                   res[k]);
      if (res[k] != HIPPO_SUCCESS && first == HIPPO_SUCCESS)
        first = hippo__error_wrap(res[k],
                                  "freeing a page of %llu B (it stays held "
                                  "and is tried again)",
                                  (unsigned long long)todo[k].size);
    }
  } while (n == BATCH);
  hippo__lock_drop(&s->lock);
  return first;
}

/* Leaving pages freed now, under the lock (detach, cleanup without
 * deferral): the first failure; those pages stay. */
static hippo_status leaving_free_now(hippo_stream *s) {
  hippo__backend *be = s->device->be;
  hippo__leaving *l = &s->leaving;
  hippo_status first = HIPPO_SUCCESS;
  for (uint32_t i = l->count; i-- > 0;) {
    hippo__leaving_page *p = &l->pages[i];
    hippo_status st;
    if (p->state == HIPPO__LEAVING_FREEING)
      continue; /* another thread's flush has it */
    if (p->state == HIPPO__LEAVING_PENDING)
      l->pending--;
    p->state = HIPPO__LEAVING_FREEING;
    st = be->ops->page_free(be, p->addr, p->size);
    leaving_done(s, i, st);
    if (st != HIPPO_SUCCESS && first == HIPPO_SUCCESS)
      first = st;
  }
  return first;
}

/* After a tick: failed leaving pages whose retry is due are pending again
 * (stream lock held). */
static void leaving_retry_due(hippo_stream *s) {
  hippo__leaving *l = &s->leaving;
  for (uint32_t i = 0; i < l->count; i++)
    if (l->pages[i].state == HIPPO__LEAVING_FAILED &&
        s->clock >= l->pages[i].retry_at) {
      l->pages[i].state = HIPPO__LEAVING_PENDING;
      l->pending++;
    }
}

/* The device's bytes in use, summed over the streams whose lock is free
 * now (and `s`, whose lock the caller holds); *missed counts the others. */
static uint64_t device_in_use(const hippo_stream *s, uint32_t *missed) {
  hippo_device *dev = s->device;
  uint64_t bytes = s->in_use;
  *missed = 0;
  hippo__mutex_take(&dev->natives_lock);
  for (uint32_t i = 0; i < dev->stream_count; i++) {
    hippo_stream *o = dev->streams[i];
    if (o == s)
      continue;
    if (hippo__lock_try(&o->lock)) {
      bytes += o->in_use;
      hippo__lock_drop(&o->lock);
    } else {
      ++*missed;
    }
  }
  hippo__mutex_drop(&dev->natives_lock);
  return bytes;
}

/* Out of memory after every retry: say what the device holds and how
 * fragmented the stream's pools are (formatted only when last_error is
 * read: a full device may see many failures). */
static hippo_status out_of_memory(hippo_stream *s, uint64_t size) {
  hippo__backend *be = s->device->be;
  uint64_t free_dev = 0, total = 0, free_pools = 0;
  uint32_t missed;
  uint64_t in_use = device_in_use(s, &missed);
  (void)be->ops->mem_info(be, &free_dev, &total);
  /* the pools' head figures (pool.h invariant): O(1) a pool; where the
   * room is and how cut up, pool_report tells */
  for (uint32_t i = 0; i < s->pool_count; i++) {
    const hippo__pool *p = s->pools[i];
    free_pools += p->bytes_reserved - p->bytes_in_use - p->bytes_padding -
                  p->bytes_stranded - p->bytes_guarded;
  }
  {
    uint64_t args[] = {size,
                       atomic_load(&s->device->acct.bytes_reserved),
                       in_use,
                       missed,
                       free_dev,
                       total,
                       free_pools};
    return hippo__error_lazy_wrap(
        HIPPO_OUT_OF_MEMORY,
        "reserve(%llu B): out of memory after giving back what this stream "
        "held empty or outdated; the device holds %llu B reserved and %llu "
        "B in use (%llu streams busy meanwhile not counted), %llu B of %llu "
        "B are free; this stream's pools have %llu B free but no room for "
        "it (pool_report says where: largest_free); release or reclaim, "
        "then retry",
        args, 7);
  }
}

/* A reservation that found no room (st): with every page size of an
 * ARENA taken, relocate (ARENA_FULL) and retry; out of memory, relocate
 * what outdated pages hold into room held, give empty pages back, and
 * retry once -- neither while a capture records (relocation skips itself,
 * the free gate says no), and no relocation where the last one moved
 * nothing from the same pages (hippo__relocation_may_help_locked). */
/* Whether a retry could help a reservation the device refused: an empty
 * page waits, pages are leaving, a relocation could empty an outdated
 * page -- or the device's memory may have changed.  An emulated device
 * (HOST, DRY) has only hippo's pages: when the page it refused is larger
 * than what it has free, and this stream has nothing to give back, the
 * retry would fail the same way.  A GPU's runtime is always asked again
 * (other code may free memory).  No driver call. */
static bool retry_may_help(hippo_stream *s) {
  hippo__backend *be = s->device->be;
  uint64_t refused = s->acct.refused, free_dev = 0, total = 0;
  s->acct.refused = 0;
  if (s->leaving.count || be->kind == HIPPO_BACKEND_HIP || !refused)
    return true;
  /* an emulated device has only this device's pages (counted, leaving
   * ones too, until their free succeeds) */
  total = be->total_memory;
  free_dev = total - atomic_load_explicit(&s->device->acct.bytes_reserved,
                                          memory_order_relaxed);
  if (free_dev >= refused) /* refused for another reason (an injected
                              fault): worth asking again */
    return true;
  for (uint32_t i = 0; i < s->pool_count; i++)
    if (s->pools[i]->ops->gives_back(s->pools[i]))
      return true;
  return hippo__relocation_may_help_locked(s);
}

static hippo_status reserve_retry(hippo_stream *s, uint64_t size,
                                  bool persistent, uint32_t *pool,
                                  hippo__slice_ref *ref, hippo_status st) {
  if (st == HIPPO_PAGE_SIZES_EXHAUSTED) {
    hippo__error_kept kept;
    if (!hippo__relocation_may_help_locked(s))
      return st;
    hippo__error_keep(&kept);
    if (hippo__relocate_locked(s, HIPPO_RELOCATE_ARENA_FULL, NULL) !=
            HIPPO_SUCCESS ||
        s->last_report.slices_moved + s->last_report.pages_freed == 0) {
      hippo__error_restore(&kept);
      return st;
    }
    st = reserve_in(s, size, persistent, pool, ref);
  }
  if (st == HIPPO_OUT_OF_MEMORY && !retry_may_help(s))
    return out_of_memory(s, size); /* nothing to give back: a retry fails */
  if (st == HIPPO_OUT_OF_MEMORY && hippo__gate_allows(&s->gate)) {
    /* Room held by outdated pages and empty pages of this stream may be
     * what the device lacks; not while a capture records (the gate), since
     * its graph may hold them. */
    s->gate.defer = true; /* the frees come after the lock */
    if (hippo__relocation_may_help_locked(s))
      (void)hippo__relocate_locked(s, HIPPO_RELOCATE_EXPLICIT, NULL);
    (void)hippo__manager_cleanup_locked(s);
    s->gate.defer = false;
    if (s->leaving.count) {
      hippo__lock_drop(&s->lock);
      (void)hippo__manager_flush(s, true);
      hippo__lock_take(&s->lock);
      /* another thread of the stream may have taken the table's room
       * meanwhile: make it again before a pool serves (nothing to undo) */
      st = hippo__handles_make_room(&s->handles);
      if (st != HIPPO_SUCCESS)
        return hippo__error_wrap(st, "reserve(%llu B)",
                                 (unsigned long long)size);
    }
    st = reserve_in(s, size, persistent, pool, ref);
    if (st == HIPPO_OUT_OF_MEMORY)
      return out_of_memory(s, size);
  }
  return st;
}

static hippo_status bad_handle(hippo_handle h, const char *call) {
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

/* ---- graph guards (guard.h) ------------------------------------------------
 * Whether the call's stream captures is asked before its lock is taken:
 * on HOST and DRY a load of the emulated stream's word, on HIP the
 * driver's answer (capture_status). */

static hippo_status capture_query(const hippo_stream *s, uint64_t *cid) {
  hippo__backend *be = s->device->be;
  bool capturing = false;
  hippo_status st = be->ops->capture_status(be, s->native, &capturing, cid);
  if (st != HIPPO_SUCCESS)
    return hippo__error_wrap(st, "asking whether native stream %p captures",
                             s->native);
  if (!capturing)
    *cid = 0;
  return HIPPO_SUCCESS;
}

static inline hippo_status capture_of(const hippo_stream *s, uint64_t *cid) {
  unsigned mode = atomic_load_explicit(&s->capture_mode, memory_order_relaxed);
  if (HIPPO__LIKELY(mode == HIPPO__CAPTURE_WORD)) {
    *cid = atomic_load_explicit(s->backend_word, memory_order_acquire);
    return HIPPO_SUCCESS;
  }
  if (mode == HIPPO__CAPTURE_ANNOUNCED) {
    *cid = atomic_load_explicit(&s->own_word, memory_order_acquire);
    return HIPPO_SUCCESS;
  }
  return capture_query(s, cid);
}

/* capture_of's common answer without its call: the stream's word says it
 * does not capture (false: ask capture_of). */
static inline bool capture_none(const hippo_stream *s) {
  return HIPPO__LIKELY(atomic_load_explicit(&s->capture_mode,
                                            memory_order_relaxed) ==
                       HIPPO__CAPTURE_WORD) &&
         atomic_load_explicit(s->backend_word, memory_order_acquire) == 0;
}

hippo_status hippo__stream_capture(const hippo_stream *s, uint64_t *cid) {
  return capture_of(s, cid);
}

hippo_status hippo__capture_announce(hippo_stream *s,
                                     hippo_capture_announcement what) {
  uint64_t cid = 0;
  hippo_status st;
  if (what == HIPPO_CAPTURE_QUERY) {
    atomic_store(&s->capture_mode, HIPPO__CAPTURE_ASK);
    return HIPPO_SUCCESS;
  }
  if (what != HIPPO_CAPTURE_BEGINS && what != HIPPO_CAPTURE_ENDED)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "capture_announce: %u is not "
                            "HIPPO_CAPTURE_QUERY, _BEGINS or _ENDED",
                            what);
  st = capture_query(s, &cid); /* the driver's answer is authoritative */
  if (st != HIPPO_SUCCESS)
    return hippo__error_wrap(st, "capture_announce");
  if (what == HIPPO_CAPTURE_BEGINS && !cid)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "capture_announce: BEGINS, but the driver says "
                            "native stream %p does not capture; announce "
                            "right after the capture began",
                            s->native);
  if (what == HIPPO_CAPTURE_ENDED && cid)
    return hippo__error_set(HIPPO_GRAPH_RECORDING,
                            "capture_announce: ENDED, but the driver says "
                            "native stream %p still captures graph %llu; "
                            "announce right after the capture ended",
                            s->native, (unsigned long long)cid);
  atomic_store_explicit(&s->own_word, cid, memory_order_release);
  atomic_store(&s->capture_mode, HIPPO__CAPTURE_ANNOUNCED);
  return HIPPO_SUCCESS;
}

/* A hold of capture `cid` on slice `slice` of pool `pool` (one per slice and
 * graph, however often the capture touches the slice), noted in the
 * registry (hippo__graphs_make_room succeeded). */
static void guard_take(hippo_stream *s, uint64_t cid, uint32_t pool,
                       uint32_t slice) {
  hippo__pool *p = s->pools[pool];
  if (!hippo__graphs_note(&s->device->graphs, cid,
                          (hippo__guard){.s = s, .pool = pool, .slice = slice}))
    return; /* held by this graph already */
  p->ops->hold(p, slice);
  s->holds++;
}

/* Where live handle h's reservation lives: its pool index and slice
 * (HIPPO__POOL_NONE: zero size) and, named by the table, its slot (else
 * NULL).  false when h is not live on s.  Stream lock held. */
static bool locate(hippo_stream *s, hippo_handle h, uint32_t *pool,
                   uint32_t *slice, hippo__slot **slot) {
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

/* ---- record_use (manager.h: uses and waits) --------------------------------
 * A use keeps a hold on the slice, so its release leaves it out of use
 * (guarded bytes) until the hold goes; the event recorded on the user at
 * the release says when. */

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
  p->ops->unhold(p, w->slice);
  hippo__device_event_put(s->device, w->event);
}

/* The entry of user `key` in the stream's wait users (wait_user_count:
 * none). */
static uint32_t wait_user_find(const hippo_stream *s, const hippo_stream *key) {
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
  uint32_t k = wait_user_find(s, key);
  if (k == s->wait_user_count)
    s->wait_users[s->wait_user_count++] = (hippo__wait_user){key, 0};
  s->wait_users[k].waits++;
}
static void wait_user_drop(hippo_stream *s, const hippo_stream *key,
                           bool forget) {
  uint32_t k = wait_user_find(s, key);
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
  hippo_status st = capture_of(u->user, &cid);
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
static void poll_waits(hippo_stream *s) {
  hippo__backend *be = s->device->be;
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
  hippo__backend *be = s->device->be;
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
static hippo_status uses_released(hippo_stream *s, uint32_t pool,
                                  uint32_t slice) {
  hippo__backend *be = s->device->be;
  uint32_t n = 0;
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
  return HIPPO_SUCCESS;
}

/* Before release's own work: the uses of h's slice, if any. */
static hippo_status release_uses(hippo_stream *s, hippo_handle h) {
  uint32_t pool, slice;
  hippo__slot *slot;
  if (!locate(s, h, &pool, &slice, &slot) || pool == HIPPO__POOL_NONE)
    return HIPPO_SUCCESS; /* release reports a bad handle itself */
  return uses_released(s, pool, slice);
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
  hippo__backend *be = s->device->be;
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
    s->pools[u.pool]->ops->unhold(s->pools[u.pool], u.slice);
    hippo__device_event_put(s->device, u.event);
  }
  return HIPPO_SUCCESS;
}

hippo_status hippo__manager_user_leaves_locked(hippo_stream *s,
                                               hippo_stream *user,
                                               bool mark) {
  hippo__backend *be = s->device->be;
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
    st = capture_of(user, &cid);
    if (st == HIPPO_SUCCESS && !cid)
      st = hippo__device_event_get(s->device, &event);
    if (st != HIPPO_SUCCESS)
      return hippo__error_wrap(st, "record_use");
  }
  hippo__lock_take(&s->lock);
  if (!locate(s, h, &pool, &slice, &slot)) {
    st = bad_handle(h, "record_use");
    goto out;
  }
  if (user == s || pool == HIPPO__POOL_NONE)
    goto out; /* stream order covers it; no bytes to keep */
  if (cid) { /* the user's graph uses it: guarded for that graph */
    st = hippo__graphs_make_room(&s->device->graphs, cid);
    if (st == HIPPO_SUCCESS)
      guard_take(s, cid, pool, slice);
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
    hippo__device_event_put(s->device, event);
  return st;
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
    st = hippo__graphs_make_room(&s->device->graphs, cid);
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
    guard_take(s, cid, pool, ref.slice);
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
      leaving_retry_due(s);
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
  if (st != HIPPO_SUCCESS)
    st = reserve_retry(s, size, persistent, &pool, ref, st);
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
    poll_waits(s); /* slices other streams used may be reusable now */
  persistent = mode == HIPPO_MODE_PERSISTENT || s->persistent_depth > 0;
  if (size > 0) {
    /* CubeCL's rule, on request (HIPPO_DEVICE_AUTO_RELOCATE): relocate
     * before an ordinary reservation when the memory wants it */
    if (s->auto_relocate && !persistent && s->movable_count &&
        hippo__relocation_need_locked(s) != HIPPO_NEED_NOTHING)
      (void)hippo__relocate_locked(s, HIPPO_RELOCATE_WANTED, NULL);
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

  st = capture_of(s, &cid);
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
  hippo_status st = HIPPO_SUCCESS;
  hippo__lock_take(&s->lock);
  if (!locate(s, h, &pool, &slice, &slot)) {
    hippo__lock_drop(&s->lock);
    return bad_handle(h, "release");
  }
  if (pool != HIPPO__POOL_NONE) {
    st = hippo__graphs_make_room(&s->device->graphs, cid);
    if (st == HIPPO_SUCCESS && s->use_count)
      st = uses_released(s, pool, slice);
    if (st != HIPPO_SUCCESS) {
      hippo__lock_drop(&s->lock);
      return st;
    }
    guard_take(s, cid, pool, slice);
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
  hippo__lock_drop(&s->lock);
  return HIPPO_SUCCESS;
}

/* A release off the common path, stream lock held: uses to record, a
 * handle the table names, or one no pool of this stream names (then it is
 * not live).  The lock is dropped. */
static hippo_status __attribute__((noinline))
release_locked(hippo_stream *s, hippo_handle h) {
  hippo__handle_parts hp = hippo__handle_split(h);
  hippo_status st;
  if (s->use_count && (st = release_uses(s, h)) != HIPPO_SUCCESS) {
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
        hippo__lock_drop(&s->lock);
        return HIPPO_SUCCESS;
      }
    }
  } else {
    hippo__slot *slot = hippo__handles_get(&s->handles, h);
    if (slot) {
      drop_slot(s, slot);
      hippo__lock_drop(&s->lock);
      return HIPPO_SUCCESS;
    }
  }
  hippo__lock_drop(&s->lock);
  return bad_handle(h, "release");
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
  st = capture_of(s, &cid);
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
  if (HIPPO__UNLIKELY(!capture_none(s)))
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
    return bad_handle(h, "release");
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
  hippo_status st = capture_of(s, &cid);
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
    return bad_handle(h, "resolve");
  }
  if (HIPPO__UNLIKELY(cid)) { /* the graph bakes the address in: hold it */
    uint32_t pool, slice;
    hippo__slot *slot;
    (void)locate(s, h, &pool, &slice, &slot);
    if (pool != HIPPO__POOL_NONE) {
      st = hippo__graphs_make_room(&s->device->graphs, cid);
      if (st != HIPPO_SUCCESS) {
        hippo__lock_drop(&s->lock);
        return st;
      }
      guard_take(s, cid, pool, slice);
    }
  }
  *ptr = (void *)(uintptr_t)addr;
  if (size)
    *size = bytes;
  hippo__lock_drop(&s->lock);
  return HIPPO_SUCCESS;
}

hippo_status hippo__persistent_begin(hippo_stream *s) {
  hippo_status st = HIPPO_SUCCESS;
  hippo__lock_take(&s->lock);
  if (s->persistent_depth == UINT32_MAX)
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "persistent_begin: %u windows are open on this "
                          "stream, the most it counts; end some",
                          UINT32_MAX);
  else
    s->persistent_depth++;
  hippo__lock_drop(&s->lock);
  return st;
}

hippo_status hippo__persistent_end(hippo_stream *s) {
  hippo_status st = HIPPO_SUCCESS;
  hippo__lock_take(&s->lock);
  if (s->persistent_depth == 0)
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "persistent_end: no persistent window is open on "
                          "this stream (each end needs a begin)");
  else
    s->persistent_depth--;
  hippo__lock_drop(&s->lock);
  return st;
}

hippo_status hippo__manager_cleanup_locked(hippo_stream *s) {
  /* the bytes other streams used are waited for: they may go back now */
  hippo_status first = hippo__manager_wait_uses_locked(s);
  /* and the copies of a relocation whose wait failed: their stranded
   * destinations go free, and their pages may empty */
  hippo_status ust = hippo__relocation_unstrand_locked(s);
  if (first == HIPPO_SUCCESS)
    first = ust;
  if (!s->gate.defer && s->leaving.count) {
    hippo_status st = leaving_free_now(s);
    if (first == HIPPO_SUCCESS)
      first = st;
  }
  for (uint32_t i = 0; i < s->pool_count; i++) {
    hippo_status st = s->pools[i]->ops->cleanup(s->pools[i]);
    if (st != HIPPO_SUCCESS && first == HIPPO_SUCCESS)
      first = st;
  }
  return first;
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

/* Live reservations: the table's and those the pools name. */
static uint64_t live_reservations(const hippo_stream *s) {
  uint64_t n = s->handles.live;
  for (uint32_t i = 0; i < s->pool_count; i++)
    if (s->pools[i]->ops->release_named)
      n += s->pools[i]->allocations;
  return n;
}

uint64_t hippo__manager_stranded_locked(const hippo_stream *s) {
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < s->pool_count; i++)
    bytes += s->pools[i]->bytes_stranded;
  return bytes;
}

uint64_t hippo__manager_dynamic_bytes_locked(const hippo_stream *s) {
  uint64_t bytes = 0;
  for (uint32_t i = 1; i < s->pool_count; i++)
    bytes += s->pools[i]->bytes_in_use;
  return bytes;
}

void hippo__manager_usage_locked(const hippo_stream *s, hippo_usage *out) {
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->pool_count = s->pool_count;
  out->allocations = live_reservations(s);
  out->bytes_in_use = s->in_use;
  out->peak_bytes_in_use = s->peak_in_use;
  for (uint32_t i = 0; i < s->pool_count; i++)
    out->bytes_padding += s->pools[i]->bytes_padding;
  out->bytes_reserved = atomic_load(&s->acct.bytes_reserved);
  out->peak_bytes_reserved = atomic_load(&s->acct.peak_bytes_reserved);
  out->pages = atomic_load(&s->acct.pages);
  out->relocations = s->relocations;
  out->slices_relocated = s->slices_relocated;
  out->bytes_relocated = s->bytes_relocated;
  out->bytes_stranded = hippo__manager_stranded_locked(s);
  for (uint32_t i = 0; i < s->pool_count; i++)
    out->bytes_guarded += s->pools[i]->bytes_guarded;
  out->slices_guarded = s->holds;
  out->slices_waiting = s->wait_count;
  out->event_failures = s->event_failures;
}

hippo_status hippo__stream_usage(hippo_stream *s, hippo_usage *out) {
  hippo__lock_take(&s->lock);
  hippo__manager_usage_locked(s, out);
  hippo__lock_drop(&s->lock);
  return HIPPO_SUCCESS;
}

hippo_status hippo__pool_report_get(hippo_stream *s, uint32_t index,
                                    hippo_pool_report *out,
                                    hippo_pool_options *options) {
  hippo_status st = HIPPO_SUCCESS;
  hippo__lock_take(&s->lock);
  if (index >= s->pool_count)
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "pool_report: pool index %u, but the stream has %u "
                          "pools (0 is the persistent pool)",
                          index, s->pool_count);
  else {
    s->pools[index]->ops->report(s->pools[index], out);
    *options = s->pools[index]->opt;
  }
  hippo__lock_drop(&s->lock);
  return st;
}

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
      uint32_t k = wait_user_find(s, w->key);
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
          wait_user_find(s, s->wait_users[k].key) != k)
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
