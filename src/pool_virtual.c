/* pool_virtual.c -- VIRTUAL pools: one virtual range per stream, carved
 * into slices by the sliced core like a SLICED pool's page (sliced.c,
 * sliced_paths.h: records, the free index, the reservation and release
 * paths, inlined here with this kind's table, virtual_kind, so the common
 * case of the granule counts, vtouch, costs no call), with physical
 * memory only where live reservations touch it.
 *
 * Options {max_slice_size, range_size, granule, unmap_threshold,
 * map_budget}.  The range (range_size bytes of address space, no memory)
 * is reserved at the pool's first reservation (backend.h vm_reserve) and
 * given back when the pool goes; a reservation's pointer never changes
 * for its whole life.  The range is cut into granules of `granule` bytes,
 * mapped when a reservation first touches them, in physical allocations
 * of one granule or a run of them (vm_map), each going back whole:
 *  - a reservation places its slice (best fit to a size class,
 *    sliced_index.h find_near), then maps the granules of it that are not
 *    mapped (each run one map call, allocations of at most alloc_cap),
 *    and counts one more live slice on every granule it touches; mapping
 *    fails (the device is full, a capture on HIP: HIPPO_GRAPH_NEEDS_PAGE)
 *    -> the slice goes back, nothing changed;
 *  - a release counts one slice fewer on them and makes no driver call: a
 *    granule no live slice touches stays mapped, *idle* (the cache), and
 *    serves the next reservation that lands on it;
 *  - the map budget: a reservation that would map past peak_live plus
 *    the slack (map_budget parts per 10,000, at least 8 granules) first
 *    gives back idle allocations, those idle longest first (stamp),
 *    after one wait for the pool's own stream (over_budget);
 *  - every idle allocation goes back at the points that already
 *    synchronize: cleanup (and the out-of-memory ladder's), reclaim,
 *    every relocation (on this pool relocation moves no byte; its drain
 *    unmaps), stream_detach; relocation_need answers HIPPO_NEED_UNMAP
 *    once the idle bytes reach unmap_threshold (default never);
 *  - a released slice a graph holds (GUARDED) keeps counting on its
 *    granules until graph_retire frees it, so no granule a graph may use
 *    goes back before then; nothing is unmapped while a stream of the
 *    device captures (the callers ask, as for pages).
 * The range is the pool's one page, always held; its figures are the
 * granules': pages = granules mapped, bytes_reserved = their bytes
 * (sliced.h, hippo__vgranules, states the invariant).
 */
#include <stdlib.h>
#include <string.h>

#include "pool_virtual.h"
#include "sliced_paths.h"

/* The figures follow the idle count. */
static inline void idle_set(sliced *p, uint64_t idle) {
  p->vg.idle = idle;
  p->head.bytes_idle = idle << p->vg.shift;
}

/* The physical allocations (sliced.h): a bit per granule where one
 * starts (is_head, pool_virtual.h). */
static inline void head_put(hippo__vgranules *v, uint64_t g, bool on) {
  if (on)
    v->heads[g >> 6] |= UINT64_C(1) << (g & 63);
  else
    v->heads[g >> 6] &= ~(UINT64_C(1) << (g & 63));
}

/* The end of the allocation that starts at mapped granule g. */
static uint64_t alloc_end(const hippo__vgranules *v, uint64_t g) {
  uint64_t h = g + 1;
  while (h < v->high && (v->ref[h] & GMAPPED) && !is_head(v, h))
    h++;
  return h;
}

/* The first allocation starting at granule g or above: its start (high:
 * none) and, in *h, its end.  for (g = next_alloc(v, 0, &h); g < v->high;
 * g = next_alloc(v, h, &h)) walks them all. */
static uint64_t next_alloc(const hippo__vgranules *v, uint64_t g,
                           uint64_t *h) {
  while (g < v->high && !((v->ref[g] & GMAPPED) && is_head(v, g)))
    g++;
  *h = g < v->high ? alloc_end(v, g) : g;
  return g;
}

/* Whether no slice touches a granule of [g, h). */
static bool all_idle(const hippo__vgranules *v, uint64_t g, uint64_t h) {
  for (; g < h; g++)
    if (v->ref[g] != GMAPPED)
      return false;
  return true;
}

/* Gives the allocation [g, h) back (vm_unmap, waiting for the device's
 * work when `wait`), its granules idle.  The backend's status; on a
 * failure it stays mapped. */
static hippo_status unmap_alloc(sliced *p, uint64_t g, uint64_t h,
                                bool wait) {
  hippo__vgranules *v = &p->vg;
  uint64_t done = 0, size = (h - g) << v->shift;
  hippo_status st = hippo__pool_vm_unmap(&p->head, v->range + (g << v->shift),
                                         size, size, v->size, wait, &done);
  if (done != size)
    return hippo__error_wrap(st, "VIRTUAL pool: giving back %llu granules "
                             "of %llu B at %#llx",
                             (unsigned long long)(h - g),
                             (unsigned long long)v->size,
                             (unsigned long long)(v->range + (g << v->shift)));
  for (uint64_t k = g; k < h; k++)
    v->ref[k] = 0;
  head_put(v, g, false);
  v->unmaps += h - g;
  idle_set(p, v->idle - (h - g));
  return HIPPO_SUCCESS;
}

/* The clock a release stamps with: the stream's (the pool's `now`
 * follows it at releases and ticks; without a stream, the pool's). */
static uint64_t stamp_base(const sliced *p) {
  return p->head.gate && p->head.gate->clock ? *p->head.gate->clock
                                             : p->head.now;
}

/* Before giving back what the stream's work used: its own work waited
 * for, once (stream-ordered), so the unmaps need no device-wide wait;
 * where that cannot be (no gate, a detached stream), each unmap waits for
 * the device.  Returns the `wait` the unmaps take.  A wait that succeeds
 * is noted (waited_at: the stream's clock then, or the pool's, which is
 * at most the stream's), so a later give-back of granules idle since
 * before it needs none (idle_before_wait). */
static bool unmaps_wait(sliced *p) {
  hippo__error_kept kept;
  bool waited;
  hippo__error_keep(&kept);
  waited = hippo__pool_stream_wait(&p->head);
  hippo__error_restore(&kept);
  if (waited) {
    p->vg.waited = true;
    p->vg.waited_at = stamp_base(p);
  }
  return !waited;
}

/* Whether an allocation whose granules went idle at clock `stamp` (the
 * latest of them) went idle before the pool's last stream wait: every
 * release is stream-ordered after the work that used its slice, so that
 * work was queued before the wait and is done; its unmap needs no wait.
 * Stamps are the clock's low 32 bits: a stamp counts as before only when
 * it is less than 2^31 behind waited_at, and waited_at only while it is
 * less than 2^31 behind the clock (else a wait is taken, never skipped
 * wrongly).  A release at waited_at's own clock may have come after the
 * wait: it is not before. */
static bool idle_before_wait(const sliced *p, uint32_t stamp) {
  const hippo__vgranules *v = &p->vg;
  uint32_t behind = (uint32_t)v->waited_at - stamp;
  return v->waited && stamp_base(p) - v->waited_at < (UINT64_C(1) << 31) &&
         behind != 0 && behind < (UINT32_C(1) << 31);
}

/* The budget's slack: the mapped bytes allowed above peak_live, `budget`
 * parts per 10,000 of it, at least HIPPO__VIRTUAL_BUDGET_FLOOR granules
 * (a small pool would give back and map again at every turn). */
static uint64_t slack_of(const hippo__vgranules *v) {
  uint64_t slack = v->peak_live / 10000 * v->budget;
  return slack > (HIPPO__VIRTUAL_BUDGET_FLOOR << v->shift)
             ? slack
             : HIPPO__VIRTUAL_BUDGET_FLOOR << v->shift;
}

/* The most granules one physical allocation covers: an allocation goes
 * back whole, so one a reservation uses in part pins the rest; a cap at
 * half the budget's slack bounds what pinned granules cost the footprint
 * and follows the pool's size (docs/decisions.md has the sweep). */
static uint64_t alloc_cap(const hippo__vgranules *v) {
  uint64_t cap;
  if (v->budget == UINT64_MAX)
    return UINT64_MAX; /* no budget: whole runs */
  cap = (slack_of(v) >> v->shift) / 2;
  return cap ? cap : 1;
}

/* An idle allocation that may go back for the budget, and the clock when
 * its last granule went idle. */
typedef struct idle_alloc {
  uint64_t g, h;
  uint32_t stamp;
} idle_alloc;

/* The oldest first; of equal age, the highest first. */
static int older_first(const void *a, const void *b) {
  const idle_alloc *x = a, *y = b;
  if (x->stamp != y->stamp)
    return x->stamp < y->stamp ? -1 : 1;
  return x->g > y->g ? -1 : x->g < y->g;
}

/* Before mapping `more` bytes: past the budget (and with idle granules,
 * and while nothing captures -- the free gate, asked only then), idle
 * allocations go back, the oldest first (none of [first, last], which
 * the reservation is about to use), until the excess and the whole slack
 * went (a hysteresis: the next give-back waits for the slack to fill
 * again), after one wait for the stream's work.  No wait is taken where
 * the allocations idle since before the last wait (idle_before_wait)
 * cover the excess: then those go, and the give-back stops at the first
 * one that went idle after it (short of the slack; past a failed unmap
 * too).  A failure to give back is no failure of the reservation (it
 * maps past the budget; cleanup tries again). */
static void over_budget(sliced *p, uint64_t first, uint64_t last,
                        uint64_t more) {
  hippo__vgranules *v = &p->vg;
  uint64_t after = p->head.bytes_reserved + more, want, excess, freed = 0;
  uint64_t g, h;
  idle_alloc *c;
  size_t n = 0;
  bool wait, must_wait = false;
  if (v->budget == UINT64_MAX || after <= v->peak_live + slack_of(v) ||
      !v->idle || !hippo__pool_may_free(&p->head))
    return;
  want = after - v->peak_live;
  excess = want - slack_of(v);
  c = malloc((size_t)v->idle * sizeof *c);
  if (!c)
    return;
  for (g = next_alloc(v, 0, &h); g < v->high; g = next_alloc(v, h, &h))
    if ((h <= first || g > last) && all_idle(v, g, h)) {
      uint32_t stamp = 0;
      for (uint64_t k = g; k < h; k++)
        stamp = v->stamp[k] > stamp ? v->stamp[k] : stamp;
      c[n++] = (idle_alloc){g, h, stamp};
    }
  qsort(c, n, sizeof *c, older_first);
  /* the stream is waited for only where the excess cannot go without
   * an allocation idle since its last wait */
  for (size_t k = 0, sum = 0; k < n && sum < excess; k++) {
    sum += (c[k].h - c[k].g) << v->shift;
    if (!idle_before_wait(p, c[k].stamp)) {
      must_wait = true;
      break;
    }
  }
  wait = must_wait ? unmaps_wait(p) : false;
  for (size_t k = 0; k < n && freed < want; k++) {
    hippo__error_kept kept;
    if (!must_wait && !idle_before_wait(p, c[k].stamp))
      break; /* no wait covers it */
    hippo__error_keep(&kept);
    if (unmap_alloc(p, c[k].g, c[k].h, wait) == HIPPO_SUCCESS)
      freed += (c[k].h - c[k].g) << v->shift;
    hippo__error_restore(&kept);
  }
  free(c);
}

/* Maps the unmapped granules of [first, last] (each run of them one map
 * call: allocations of up to alloc_cap granules, access set once), all or
 * nothing; the new ones are idle until counted.
 * Mapping past the budget first gives idle allocations back
 * (over_budget).  On a failure only the allocations this call mapped
 * (tagged GFRESH meanwhile) go again: a granule that was idle before
 * stays mapped, since work queued before its slices' releases may still
 * use it (and an unmap without a wait must not reach it).  While a stream
 * of the device captures (the free gate says no; asked only when several
 * granules are to be mapped, and not for a capturing stream, whose first
 * map is refused) nothing may be unmapped -- hipMemUnmap synchronizes the
 * device -- so the granules go one a call (the backend then has no run to
 * undo part-way) and those this call mapped stay, idle, for the next
 * cleanup. */
static hippo_status __attribute__((noinline))
map_missing(sliced *p, uint64_t first, uint64_t last) {
  hippo__vgranules *v = &p->vg;
  hippo_status st = HIPPO_SUCCESS;
  uint64_t g = first, mapped = 0, missing = 0, cap;
  bool refused = p->head.gate && p->head.gate->no_pages &&
                 !p->head.be->vm_captures;
  bool keep;
  for (uint64_t k = first; k <= last; k++)
    missing += !(v->ref[k] & GMAPPED);
  /* several granules to map: a failure part-way has some to give back */
  keep = !refused && missing > 1 && !hippo__pool_may_free(&p->head);
  if (!refused && !keep)
    over_budget(p, first, last, missing << v->shift);
  cap = alloc_cap(v);
  while (g <= last && st == HIPPO_SUCCESS) {
    uint64_t h = g, a;
    if (v->ref[g] & GMAPPED) {
      g++;
      continue;
    }
    while (h <= last && !(v->ref[h] & GMAPPED) && !(keep && h > g))
      h++;
    /* one call for the run when it fits the cap (one allocation); else
     * one for its whole caps (allocations of `cap` granules, access set
     * once) and one for the rest */
    a = h - g <= cap ? h - g : cap;
    if (h - g > cap)
      h = g + (h - g) / cap * cap;
    st = hippo__pool_vm_map(&p->head, v->range + (g << v->shift),
                            (h - g) << v->shift, a << v->shift, v->size);
    if (st == HIPPO_SUCCESS) {
      for (uint64_t k = g; k < h; k++) {
        v->ref[k] = GMAPPED | GFRESH;
        v->stamp[k] = (uint32_t)p->head.now;
        head_put(v, k, (k - g) % a == 0);
      }
      mapped += h - g;
      v->maps += h - g;
      idle_set(p, v->idle + (h - g));
      if (h > v->high)
        v->high = h;
    }
    g = h;
  }
  if (st != HIPPO_SUCCESS && mapped && !keep) {
    /* what this call mapped goes again, unused: no wait needed */
    hippo__error_kept kept;
    hippo__error_keep(&kept);
    for (uint64_t k = first; k <= last; k++) {
      uint64_t h;
      if (v->ref[k] != (GMAPPED | GFRESH) || !is_head(v, k))
        continue;
      h = alloc_end(v, k);
      (void)unmap_alloc(p, k, h, false);
      k = h - 1;
    }
    hippo__error_restore(&kept);
  }
  if (mapped)
    for (uint64_t k = first; k <= last; k++)
      v->ref[k] &= ~GFRESH;
  return st;
}

/* ref[g] = value for g in [from, to), four at a time (gcc's -O2 does not
 * vectorize a loop of unknown length). */
static inline void fill_refs(uint32_t *ref, uint64_t from, uint64_t to,
                             uint32_t value) {
  uint64_t g = from;
  for (; g + 4 <= to; g += 4)
    ref[g] = ref[g + 1] = ref[g + 2] = ref[g + 3] = value;
  for (; g < to; g++)
    ref[g] = value;
}

/* The AND of ref[g] for g in [from, to), and `all`, four at a time. */
static inline uint32_t and_refs(const uint32_t *ref, uint64_t from,
                                uint64_t to, uint32_t all) {
  uint32_t a = all, b = all;
  uint64_t g = from;
  for (; g + 4 <= to; g += 4) {
    a &= ref[g] & ref[g + 1];
    b &= ref[g + 2] & ref[g + 3];
  }
  for (; g < to; g++)
    a &= ref[g];
  return a & b;
}

/* Slice i's granules [first, last] count it, those not mapped mapped
 * first: vtouch's general case (more than one granule, or one not
 * counted yet).  The granules strictly inside the slice are its own (no
 * other slice's bytes reach them), so each is idle (GMAPPED) or unmapped
 * (0) and becomes GMAPPED + 1: a test and a fill, four granules at a
 * time, not a count per granule (a pair of 256 B..64 MiB slices, 100
 * live: callgrind 1,141 -> 907 instructions, the SLICED pool's 667). */
static hippo_status virtual_touch(sliced *p, uint32_t i, uint64_t first,
                                  uint64_t last) {
  uint32_t *ref = p->vg.ref;
  uint32_t all = and_refs(ref, first + 1, last, ref[first] & ref[last]);
  uint64_t idle;
  hippo_status st;
  if (!(all & GMAPPED)) {
    /* the budget counts this reservation's bytes among the live ones */
    uint64_t live = p->head.bytes_in_use +
                    ((uint64_t)p->slices[i].size << p->head.align_shift);
    if (live > p->vg.peak_live)
      p->vg.peak_live = live;
    if ((st = map_missing(p, first, last)) != HIPPO_SUCCESS)
      return st;
  }
  idle = p->vg.idle - ((ref[first]++ & GCOUNT) == 0);
  if (last != first) {
    idle -= (ref[last]++ & GCOUNT) == 0;
    fill_refs(ref, first + 1, last, GMAPPED + 1);
    idle -= last - first - 1;
  }
  idle_set(p, idle);
  return HIPPO_SUCCESS;
}

/* A capturing stream maps nothing: a free slice of at least u units whose
 * first u units lie on mapped granules only, the first such in the lists
 * of the request's class and up (NIL: none).  The path of a reservation
 * whose best fit would have mapped, during a capture only: every free
 * slice may be looked at.  Only a slice's start is tried, where a
 * reservation is placed. */
static found virtual_find_mapped(const sliced *p, uint64_t u) {
  const hippo__vgranules *v = &p->vg;
  for (uint32_t c = class_of(u); c < CLS(FL_COUNT, 0); c++)
    for (uint32_t i = p->heads[c]; i != NIL; i = p->slices[i].next_free) {
      const slice *s = &p->slices[i];
      uint64_t first = s->off >> v->ushift;
      uint64_t last = ((uint64_t)s->off + u - 1) >> v->ushift;
      if (s->size >= u &&
          (and_refs(v->ref, first, last + 1, GMAPPED) & GMAPPED))
        return (found){i, c};
    }
  return (found){NIL, 0};
}

/* vuntouch's general case: the granules may go idle (those inside
 * the slice do). */
static void virtual_untouch(sliced *p, uint64_t first, uint64_t last) {
  uint32_t *ref = p->vg.ref, now = (uint32_t)p->head.now;
  uint64_t idle = p->vg.idle;
  if ((--ref[first] & GCOUNT) == 0) {
    idle++;
    p->vg.stamp[first] = now;
  }
  if (last != first) {
    if ((--ref[last] & GCOUNT) == 0) {
      idle++;
      p->vg.stamp[last] = now;
    }
    fill_refs(ref, first + 1, last, GMAPPED);
    fill_refs(p->vg.stamp, first + 1, last, now);
    idle += last - first - 1;
  }
  idle_set(p, idle);
}

/* Slice i counts on every granule it touches.  Inline, the common case:
 * one granule, mapped and touched already (ref > GMAPPED), changes no
 * idle count; the reservation path of a VIRTUAL pool (sliced_paths.h
 * with virtual_kind) carries only this test and an increment. */
HOT hippo_status vtouch(sliced *p, uint32_t i) {
  uint64_t first, last;
  vgranules_of(p, &p->slices[i], &first, &last);
  if (HIPPO__LIKELY(first == last && p->vg.ref[first] > GMAPPED)) {
    p->vg.ref[first]++;
    return HIPPO_SUCCESS;
  }
  return virtual_touch(p, i, first, last);
}

/* Slice i counts no more on its granules (they stay mapped); the common
 * case, one granule that another slice still touches, inline. */
HOT void vuntouch(sliced *p, uint32_t i) {
  uint64_t first, last;
  vgranules_of(p, &p->slices[i], &first, &last);
  if (HIPPO__LIKELY(first == last && p->vg.ref[first] > GMAPPED + 1)) {
    p->vg.ref[first]--;
    return;
  }
  virtual_untouch(p, first, last);
}

/* Every idle allocation goes back, after one wait for the stream's work;
 * the first failure after trying every one (one that stays is tried
 * again at the next call; pool_virtual.h). */
hippo_status hippo__virtual_give_back(sliced *p) {
  hippo__vgranules *v = &p->vg;
  hippo_status first = HIPPO_SUCCESS;
  bool waited = false, wait = true;
  uint64_t g, h;
  for (g = next_alloc(v, 0, &h); g < v->high && v->idle;
       g = next_alloc(v, h, &h))
    if (all_idle(v, g, h)) {
      hippo_status st;
      if (!waited) {
        wait = unmaps_wait(p);
        waited = true;
      }
      st = unmap_alloc(p, g, h, wait);
      if (st != HIPPO_SUCCESS && first == HIPPO_SUCCESS)
        first = st;
    }
  return first;
}

static hippo_status virtual_new_room(sliced *p, uint64_t bytes, uint32_t *i) {
  hippo__vgranules *v = &p->vg;
  hippo_status st;
  uint64_t addr;
  if (v->range) {
    uint64_t args[] = {bytes, v->range_size};
    return hippo__error_lazy(
        HIPPO_POOL_CAPACITY_EXCEEDED,
        "VIRTUAL pool: %llu B do not fit: its range of %llu B holds no "
        "free slice that large; release, or let a later pool take it",
        args, 2);
  }
  if ((st = hippo__sliced_page_room(p)) != HIPPO_SUCCESS)
    return st;
  st = hippo__pool_vm_reserve(&p->head, v->range_size, v->size, &addr);
  if (st != HIPPO_SUCCESS)
    return hippo__error_wrap(st, "VIRTUAL pool: reserving its range of "
                             "%llu B",
                             (unsigned long long)v->range_size);
  v->range = addr;
  p->head.bytes_virtual = v->range_size;
  *i = hippo__sliced_page_install(p, addr, v->range_size, 0);
  return HIPPO_SUCCESS;
}

static void virtual_release(hippo__pool *pool, uint32_t i, uint64_t size) {
  sliced *p = (sliced *)pool;
  if (p->slices[i].next_free == 0)
    vuntouch(p, i);
  hippo__sliced_release(pool, i, size);
}

static void virtual_unhold(hippo__pool *pool, uint32_t i, bool wait) {
  sliced *p = (sliced *)pool;
  const slice *s = &p->slices[i];
  hippo__sliced_settle(p);
  if (STATE(s) == SLICE_GUARDED && s->next_free == 1) /* its last hold:
                                                         it goes free */
    vuntouch(p, i);
  hippo__sliced_unhold(pool, i, wait);
}

static void virtual_release_all(hippo__pool *pool) {
  sliced *p = (sliced *)pool;
  hippo__sliced_settle(p);
  for (uint32_t i = 0; i < p->slice_count; i++)
    if (STATE(&p->slices[i]) == SLICE_LIVE && p->slices[i].next_free == 0)
      vuntouch(p, i);
  hippo__sliced_release_all(pool);
}

static hippo_status virtual_cleanup(hippo__pool *pool) {
  sliced *p = (sliced *)pool;
  hippo__sliced_settle(p);
  return hippo__virtual_give_back(p);
}

static bool virtual_gives_back(const hippo__pool *pool) {
  return ((const sliced *)pool)->vg.idle != 0;
}

/* Granules go back in batches, never at a reservation's tick. */
static hippo_status virtual_tick(hippo__pool *pool, uint64_t now) {
  if (now > pool->now)
    pool->now = now;
  return HIPPO_SUCCESS;
}

/* The longest run of free bytes on mapped granules inside one free slice:
 * the largest reservation the pool can serve with no driver call.  A walk
 * of the range's slices and of the granules under the free ones (a report,
 * off every hot path). */
static uint64_t largest_free_mapped(const sliced *p) {
  const hippo__vgranules *v = &p->vg;
  uint64_t best = 0;
  if (p->page_count == 0 || !p->pages[0].held)
    return 0;
  for (uint32_t i = p->pages[0].first; i != NIL; i = p->slices[i].next_phys) {
    const slice *s = &p->slices[i];
    uint64_t from = s->off, end = (uint64_t)s->off + s->size, run = 0;
    if (STATE(s) != SLICE_FREE)
      continue;
    while (from < end) {
      uint64_t g = from >> v->ushift;
      uint64_t to = (g + 1) << v->ushift;
      if (to > end)
        to = end;
      run = (v->ref[g] & GMAPPED) ? run + (to - from) : 0;
      if (run > best)
        best = run;
      from = to;
    }
  }
  return best << p->head.align_shift;
}

static void virtual_report(const hippo__pool *pool, hippo_pool_report *out) {
  const sliced *p = (const sliced *)pool;
  hippo__sliced_report(pool, out);
  /* largest_free stays within bytes_free (the mapped room); the range's
   * largest free slice, unmapped granules included, has its own field */
  out->largest_free_range = out->largest_free;
  out->largest_free = largest_free_mapped(p);
  out->current_page_size = 0;
  out->page_sizes = 0;
  out->granule_size = p->vg.size;
  out->maps = p->vg.maps;
  out->unmaps = p->vg.unmaps;
}

static void virtual_destroy(hippo__pool *pool) {
  sliced *p = (sliced *)pool;
  hippo__vgranules *v = &p->vg;
  uint64_t g, h;
  hippo__sliced_settle(p);
  /* every allocation goes (the stream is going away), then the range */
  for (g = 0; g < v->high; g++)
    if ((v->ref[g] & GCOUNT) != 0) {
      v->ref[g] = GMAPPED; /* the live slices go with the pool */
      idle_set(p, v->idle + 1);
    }
  for (g = next_alloc(v, 0, &h); g < v->high; g = next_alloc(v, h, &h))
    /* once more where a free failed (an injected fault fails one call):
     * what still fails stays with the backend until it is destroyed */
    if (unmap_alloc(p, g, h, true) != HIPPO_SUCCESS)
      (void)unmap_alloc(p, g, h, true);
  if (v->range && pool->pages == 0 &&
      pool->be->ops->vm_release(pool->be, v->range, v->range_size) !=
          HIPPO_SUCCESS)
    (void)pool->be->ops->vm_release(pool->be, v->range, v->range_size);
  free(v->ref);
  free(v->heads);
  free(v->stamp);
  hippo__sliced_free(p);
}

/* pools_install hands the records to the pool that takes this index
 * (pool.h names_take).  With no granule mapped no slice is live, held or
 * guarded: the range goes first, so every record is unused.  With
 * granules mapped (never, by pools_install's rule), or if the range
 * cannot go back, nothing is handed over. */
static void virtual_names_take(hippo__pool *pool, hippo__names *out) {
  sliced *p = (sliced *)pool;
  hippo__vgranules *v = &p->vg;
  hippo__sliced_settle(p);
  memset(out, 0, sizeof *out);
  if (pool->pages != 0)
    return;
  if (v->range) {
    hippo__error_kept kept;
    uint32_t pg = 0;
    hippo__error_keep(&kept);
    if (pool->be->ops->vm_release(pool->be, v->range, v->range_size) !=
        HIPPO_SUCCESS) {
      hippo__error_restore(&kept); /* destroy tries again */
      return;
    }
    while (!p->pages[pg].held)
      pg++;
    hippo__sliced_page_forget(p, pg);
    v->range = 0;
    v->high = 0;
    pool->bytes_virtual = 0;
  }
  hippo__sliced_names_take(pool, out);
}

/* ---- the kind: its hooks, paths and operations ------------------------------ */


/* Slice i could not map its granules (`st`): it goes back as if
 * never served, no figure moved.  Refused for a capture (which maps
 * nothing), a free slice on mapped granules serves instead where one fits.
 * Out of line: the reservation's path keeps only the test. */
static hippo_status __attribute__((noinline))
virtual_refused(sliced *p, uint32_t i, uint64_t size, uint64_t bytes,
                hippo_status st, hippo__slice_ref *out) {
  uint64_t u = bytes >> p->head.align_shift;
  found f;
  hippo__sliced_free_slice(p, i);
  if (st != HIPPO_GRAPH_NEEDS_PAGE)
    return st;
  settle_kind(p, false);
  f = virtual_find_mapped(p, u);
  if (f.i == NIL)
    return st;
  i = take_free(p, f, u, (uint32_t)(bytes - size));
  (void)vtouch(p, i); /* its granules are mapped: it cannot fail */
  hippo__sliced_served(p, i, size, bytes, out);
  return HIPPO_SUCCESS;
}

/* The best fit to a class (find_near); every slice counts on its
 * granules.  The range is its one page, never closed. */
static const hippo__sliced_kind virtual_kind = {
    .name = "VIRTUAL",
    .fit = HIPPO__FIT_NEAR,
    .new_room = virtual_new_room,
    .touch = vtouch,
    .untouch = vuntouch,
    .refused = virtual_refused,
    .check = hippo__virtual_check,
};

/* The core's reservation, and the running peak of bytes in use the
 * budget follows. */
static hippo_status virtual_reserve(hippo__pool *pool, uint64_t size,
                                    hippo__slice_ref *out) {
  sliced *p = (sliced *)pool;
  hippo_status st = hippo__sliced_reserve_kind(pool, size, out, &virtual_kind);
  if (HIPPO__LIKELY(st == HIPPO_SUCCESS) &&
      p->head.bytes_in_use > p->vg.peak_live)
    p->vg.peak_live = p->head.bytes_in_use;
  return st;
}

static bool virtual_release_named(hippo__pool *pool, uint32_t i, uint32_t gen,
                                  uint64_t *size) {
  return hippo__sliced_release_named_kind(pool, i, gen, size, &virtual_kind);
}

/* The core's operations, with the granules' a reservation, release or hold changes what touches them, and its
 * own cleanup, tick, report and destroy. */
static const hippo__pool_ops virtual_ops = {
    .reserve = virtual_reserve,
    .release = virtual_release,
    .addr = hippo__sliced_addr,
    .cleanup = virtual_cleanup,
    .gives_back = virtual_gives_back,
    .tick = virtual_tick,
    .report = virtual_report,
    .check = hippo__sliced_check,
    .destroy = virtual_destroy,
    .hold = hippo__sliced_hold,
    .unhold = virtual_unhold,
    .waits = hippo__sliced_waits,
    .release_named = virtual_release_named,
    .resolve_named = hippo__sliced_resolve_named,
    .release_all = virtual_release_all,
    .settle = hippo__sliced_settle_op,
    .names_take = virtual_names_take,
    .names_give = hippo__sliced_names_give,
    .move = &hippo__virtual_move_ops,
};


hippo_status hippo__pool_virtual_create(hippo__backend *be,
                                        hippo__page_acct *acct,
                                        const hippo_pool_options *opt,
                                        hippo__pool **out) {
  uint64_t range = opt->range_size, granule = opt->granule;
  sliced *p;
  if (!be->ops->vm_map || !hippo__is_pow2(granule) || range % granule ||
      granule % be->alignment || range / granule > HIPPO__VIRTUAL_MAX_GRANULES ||
      (range >> hippo__log2_floor(be->alignment)) > UINT32_MAX)
    return hippo__error_set(HIPPO_POOL_CONFIG,
                            "VIRTUAL pool: a range of %llu B in granules of "
                            "%llu B does not fit the device (alignment %llu "
                            "B, virtual memory %s)",
                            (unsigned long long)range,
                            (unsigned long long)granule,
                            (unsigned long long)be->alignment,
                            be->ops->vm_map ? "yes" : "none");
  p = hippo__sliced_new(be, acct, &virtual_ops, &virtual_kind,
                        HIPPO_POOL_VIRTUAL, opt, range);
  if (!p)
    return HIPPO_OUT_OF_MEMORY;
  p->vg.ref = calloc(range / granule, sizeof *p->vg.ref);
  p->vg.heads = calloc((range / granule + 63) / 64, sizeof *p->vg.heads);
  p->vg.stamp = calloc(range / granule, sizeof *p->vg.stamp);
  if (!p->vg.ref || !p->vg.heads || !p->vg.stamp) {
    free(p->vg.ref);
    free(p->vg.heads);
    free(p->vg.stamp);
    hippo__sliced_free(p);
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "host memory for a VIRTUAL pool of %llu granules",
                            (unsigned long long)(range / granule));
  }
  p->virt = true;
  p->vg.count = range / granule;
  p->vg.size = granule;
  p->vg.shift = hippo__log2_floor(granule);
  p->vg.ushift = p->vg.shift - p->head.align_shift;
  p->vg.range_size = range;
  p->vg.threshold = opt->unmap_threshold;
  p->vg.budget = opt->map_budget;
  p->head.max_size = opt->max_slice_size;
  *out = &p->head;
  return HIPPO_SUCCESS;
}
