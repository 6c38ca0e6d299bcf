/* relocation.c -- relocation need and reasons, the plan of every stream,
 * the copy queue, the report.  relocation.h states the protocol;
 * pool_relocation.h the operations on a pool it drives (ARENA pools
 * implement them in pool_arena_relocation.c, VIRTUAL pools in
 * pool_virtual.c).
 */
#include <stdlib.h>
#include <string.h>

#include "relocation.h"


/* ---- need ---------------------------------------------------------------- */

static bool shape_eq(const hippo__reloc_shape *a, const hippo__reloc_shape *b) {
  return a->current_pages == b->current_pages &&
         a->outdated_pages == b->outdated_pages &&
         a->outdated_live == b->outdated_live &&
         a->page_sizes == b->page_sizes &&
         a->guarded_pages == b->guarded_pages &&
         a->page_size == b->page_size && a->sizes_full == b->sizes_full &&
         a->sparse == b->sparse && a->idle_bytes == b->idle_bytes &&
         a->unmap == b->unmap;
}

/* On a HIPPO_DEVICE_NO_MOVE device a relocation only drains: the shape as
 * what it can serve -- outdated pages only once one is empty, never a
 * sparse pool. */
static void drain_only(const hippo_stream *s, hippo__reloc_shape *sh) {
  if (hippo__manager_moves(s))
    return;
  if (sh->outdated_pages == sh->outdated_live)
    sh->outdated_pages = 0;
  sh->sparse = 0;
}

static hippo_relocation_need pool_need(const hippo_stream *s,
                                       const hippo__pool *p) {
  const hippo_device *dev = s->device;
  hippo__reloc_shape sh, raw;
  p->ops->move->shape(p, &raw);
  sh = raw;
  drain_only(s, &sh);
  if (!sh.outdated_pages && !sh.sparse && !sh.unmap)
    return HIPPO_NEED_NOTHING;
  if (p->stalled && shape_eq(&raw, &p->stall))
    return HIPPO_NEED_NOTHING; /* moved nothing, and nothing changed */
  if (sh.sizes_full)
    return HIPPO_NEED_ARENA_FULL;
  if (sh.outdated_pages) {
    uint64_t capacity = dev->be->total_memory;
    uint64_t held = atomic_load_explicit(
        &((hippo_device *)dev)->acct.bytes_reserved, memory_order_relaxed);
    uint64_t next = sh.page_size;
    /* held + next > capacity - next, without wrapping */
    if (capacity < next || held > capacity - next ||
        held + next > capacity - next)
      return HIPPO_NEED_PRESSURE;
  }
  if (sh.sparse)
    return HIPPO_NEED_SPARSE;
  return sh.unmap ? HIPPO_NEED_UNMAP : HIPPO_NEED_NOTHING;
}

bool hippo__relocation_may_help_locked(const hippo_stream *s) {
  for (uint32_t k = 0; k < s->movable_count; k++) {
    const hippo__pool *p = s->movable[k];
    hippo__reloc_shape sh, raw;
    p->ops->move->shape(p, &raw);
    sh = raw;
    drain_only(s, &sh);
    if (sh.outdated_pages && !(p->stalled && shape_eq(&raw, &p->stall)))
      return true;
  }
  return false;
}

hippo_relocation_need hippo__relocation_need_locked(const hippo_stream *s) {
  for (uint32_t k = 0; k < s->movable_count; k++) {
    hippo_relocation_need need = pool_need(s, s->movable[k]);
    if (need != HIPPO_NEED_NOTHING)
      return need;
  }
  return HIPPO_NEED_NOTHING;
}

static hippo_relocate_reason reason_of(hippo_relocation_need need) {
  switch (need) {
  case HIPPO_NEED_ARENA_FULL:
    return HIPPO_RELOCATE_ARENA_FULL;
  case HIPPO_NEED_PRESSURE:
    return HIPPO_RELOCATE_PRESSURE;
  case HIPPO_NEED_SPARSE:
    return HIPPO_RELOCATE_SPARSE;
  case HIPPO_NEED_UNMAP:
    return HIPPO_RELOCATE_UNMAP;
  default:
    return HIPPO_RELOCATE_WANTED; /* none */
  }
}

/* Whether relocation has something to look at in the stream's memory for
 * `reason`: outdated pages (or, SPARSE, a sparse pool), or idle granules
 * of a VIRTUAL pool (every reason gives them back). */
static bool has_work(const hippo_stream *s, hippo_relocate_reason reason) {
  for (uint32_t k = 0; k < s->movable_count; k++) {
    hippo__reloc_shape sh;
    s->movable[k]->ops->move->shape(s->movable[k], &sh);
    if (sh.outdated_pages || sh.idle_bytes ||
        (reason == HIPPO_RELOCATE_SPARSE && sh.sparse))
      return true;
  }
  return false;
}

/* ---- one stream's part ----------------------------------------------------- */

/* A stream's relocation: its reason, the plan of each movable pool, its
 * own report. */
typedef struct run {
  hippo_stream *s;
  hippo_relocate_reason reason; /* WANTED: nothing to do */
  hippo__reloc_plan plans[HIPPO__MAX_POOLS + 1]; /* by movable index */
  uint64_t slices, bytes;       /* planned moves */
  hippo_relocation_report rep;
  hippo__failures fails;        /* rep's failures */
} run;

static void report_init(hippo_relocation_report *r,
                        hippo_relocate_reason reason) {
  memset(r, 0, sizeof *r);
  r->struct_size = sizeof *r;
  r->reason = reason;
}

/* The message of a relocation's first failure, for last_error, and its
 * status. */
typedef struct first_error {
  hippo__error_kept text;
  hippo_status status;
  bool set;
} first_error;

/* One more failure kept in f (a failure with no host memory to keep it is
 * only counted by its report). */
static void failures_push(hippo__failures *f,
                          const hippo_relocation_failure *one) {
  if (f->count == f->cap) {
    uint32_t cap = f->cap ? f->cap * 2 : 4;
    hippo_relocation_failure *grown = realloc(f->v, cap * sizeof *grown);
    if (!grown)
      return;
    f->v = grown;
    f->cap = cap;
  }
  f->v[f->count++] = *one;
}

void hippo__failures_free(hippo__failures *f) {
  free(f->v);
  memset(f, 0, sizeof *f);
}

/* Note a failure; the first one's message is kept for last_error. */
static void fail(hippo_relocation_report *r, hippo__failures *f,
                 first_error *first, const hippo_stream *s, hippo_status st,
                 uint32_t step, uint64_t slices, uint64_t bytes) {
  hippo_relocation_failure one = {.struct_size = sizeof one,
                                  .status = st,
                                  .step = step,
                                  .stream = s->shell,
                                  .slices = slices,
                                  .bytes = bytes};
  if (!first->set) {
    hippo__error_keep(&first->text);
    first->status = st;
    first->set = true;
  }
  failures_push(f, &one);
  r->failure_count++;
}

/* Plan every movable pool of the run's stream. */
static void plan_stream(run *u, first_error *first) {
  hippo_stream *s = u->s;
  for (uint32_t k = 0; k < s->movable_count; k++) {
    hippo__pool *p = s->movable[k];
    hippo__reloc_plan *plan = &u->plans[k];
    hippo_status st;
    if (!hippo__manager_moves(s))
      continue; /* NO_MOVE: only the drain, at the end */
    st = p->ops->move->plan(p, u->reason, plan);
    /* a destination page the device has no room for is no room, not a
     * failure: the page it was for stays whole (pages_no_room); so is one
     * the pool's own max_pool_size leaves no room for (fuzz seeds 181,
     * 216: relocate_device answered HIPPO_POOL_CAPACITY_EXCEEDED) */
    if (st == HIPPO_SUCCESS && plan->page_status != HIPPO_OUT_OF_MEMORY &&
        plan->page_status != HIPPO_POOL_CAPACITY_EXCEEDED)
      st = plan->page_status;
    if (st != HIPPO_SUCCESS)
      fail(&u->rep, &u->fails, first, s, st, HIPPO_RELOCATION_STEP_PAGE, 0,
           0);
    u->slices += plan->count;
    u->bytes += plan->bytes;
    u->rep.pages_no_room += plan->pages_no_room;
    u->rep.pages_guarded += plan->pages_guarded;
    u->rep.pages_added += plan->pages_added;
  }
}

/* Drop (or, strand, keep as stranded) every plan of the run. */
static void abort_stream(run *u, bool strand) {
  for (uint32_t k = 0; k < u->s->movable_count; k++)
    if (u->plans[k].count) {
      u->s->movable[k]->ops->move->abort(u->s->movable[k], &u->plans[k],
                                         strand);
      if (strand)
        u->rep.bytes_stranded += u->plans[k].bytes;
    }
}

static void unstrand_stream(run *u) {
  for (uint32_t k = 0; k < u->s->movable_count; k++)
    if (u->s->movable[k]->bytes_stranded)
      u->s->movable[k]->ops->move->unstrand(u->s->movable[k]);
}


/* Queue the run's copies on its stream, wait for them, then commit, drop
 * or strand the plans (relocation.h, steps 5 and 6). */
static void move_stream(run *u, first_error *first) {
  hippo_stream *s = u->s;
  hippo__backend *be = s->device->be;
  hippo_status copy_st = HIPPO_SUCCESS, wait_st;
  for (uint32_t k = 0; k < s->movable_count && !copy_st; k++)
    for (uint32_t m = 0; m < u->plans[k].count && !copy_st; m++) {
      const hippo__move *mv = &u->plans[k].moves[m];
      copy_st = be->ops->copy(be, s->native, mv->dst, mv->src, mv->bytes);
    }
  if (copy_st != HIPPO_SUCCESS)
    fail(&u->rep, &u->fails, first, s, copy_st, HIPPO_RELOCATION_STEP_COPY,
         u->slices, u->bytes);
  /* always wait: a queued copy may still write its destination */
  wait_st = be->ops->stream_sync(be, s->native);
  if (wait_st != HIPPO_SUCCESS) {
    fail(&u->rep, &u->fails, first, s, wait_st, HIPPO_RELOCATION_STEP_WAIT,
         u->slices, u->bytes);
    abort_stream(u, true);
    return;
  }
  unstrand_stream(u); /* every earlier copy of the stream has landed */
  if (copy_st != HIPPO_SUCCESS) {
    abort_stream(u, false);
    return;
  }
  for (uint32_t k = 0; k < s->movable_count; k++)
    if (u->plans[k].count)
      s->movable[k]->ops->move->commit(s->movable[k], &u->plans[k]);
  for (uint32_t k = 0; k < s->movable_count; k++)
    u->rep.pages_emptied += u->plans[k].pages_planned;
  u->rep.slices_moved = u->slices;
  u->rep.bytes_moved = u->bytes;
  if (u->slices) {
    hippo_device *dev = s->device;
    s->relocations++;
    s->slices_relocated += u->slices;
    s->bytes_relocated += u->bytes;
    atomic_fetch_add(&dev->relocations, 1);
    atomic_fetch_add(&dev->slices_relocated, u->slices);
    atomic_fetch_add(&dev->bytes_relocated, u->bytes);
  }
}

/* How a relocation that planned ended, from its figures. */
static uint32_t outcome_of(const hippo_relocation_report *r) {
  if (r->slices_moved)
    return HIPPO_RELOCATION_MOVED;
  if (r->failure_count)
    return HIPPO_RELOCATION_FAILED;
  if (r->pages_no_room || r->pages_guarded)
    return HIPPO_RELOCATION_NO_ROOM;
  return HIPPO_RELOCATION_NOTHING_TO_MOVE;
}

/* Give the pages back that serve nothing, note the stall memo, free the
 * plans, settle the run's outcome. */
static void finish_stream(run *u, first_error *first) {
  hippo_stream *s = u->s;
  for (uint32_t k = 0; k < s->movable_count; k++) {
    hippo__pool *p = s->movable[k];
    hippo_status st = p->ops->move->drain(p, &u->rep.pages_freed,
                                          &u->rep.bytes_freed);
    if (st != HIPPO_SUCCESS)
      fail(&u->rep, &u->fails, first, s, st, HIPPO_RELOCATION_STEP_FREE, 0,
           0);
    /* a pool that moved nothing is not tried again until it changes --
     * unless a backend call failed: that may pass, so the need stays */
    p->stalled = u->rep.slices_moved == 0 && u->rep.failure_count == 0;
    if (p->stalled)
      p->ops->move->shape(p, &p->stall);
    free(u->plans[k].moves);
    memset(&u->plans[k], 0, sizeof u->plans[k]);
  }
  u->rep.outcome = outcome_of(&u->rep);
}

/* Adds a stream's report (and its failures) into the device's. */
static void report_add(hippo_relocation_report *to, hippo__failures *tof,
                       const hippo_relocation_report *from,
                       const hippo__failures *fromf) {
  for (uint32_t i = 0; i < fromf->count; i++)
    failures_push(tof, &fromf->v[i]);
  to->failure_count += from->failure_count;
  to->slices_moved += from->slices_moved;
  to->bytes_moved += from->bytes_moved;
  to->pages_emptied += from->pages_emptied;
  to->pages_freed += from->pages_freed;
  to->bytes_freed += from->bytes_freed;
  to->pages_added += from->pages_added;
  to->pages_no_room += from->pages_no_room;
  to->pages_guarded += from->pages_guarded;
  to->bytes_stranded += from->bytes_stranded;
  if (to->need == HIPPO_NEED_NOTHING)
    to->need = from->need;
}

/* ---- the protocol ------------------------------------------------------------ */

/* Relocate runs[0 .. n) (their streams' locks held) for `reason`; the
 * device's report in *rep.  relocation.h, steps 1-6. */
static hippo_status relocate_runs(hippo_device *dev, run *runs, uint32_t n,
                                  hippo_relocate_reason reason,
                                  hippo_relocation_report *rep,
                                  hippo__failures *fails, const char *call) {
  first_error first = {.set = false};
  hippo__error_kept kept;
  uint64_t slices = 0;
  hippo_status st;
  bool wanted = false;

  report_init(rep, reason);
  rep->streams = n;
  for (uint32_t i = 0; i < n; i++) {
    report_init(&runs[i].rep, reason);
    runs[i].rep.streams = 1;
    runs[i].reason = reason;
    if (reason == HIPPO_RELOCATE_WANTED) {
      runs[i].rep.need = hippo__relocation_need_locked(runs[i].s);
      runs[i].reason = reason_of(runs[i].rep.need);
      runs[i].rep.reason = runs[i].reason;
    } else if (!has_work(runs[i].s, reason)) {
      runs[i].reason = HIPPO_RELOCATE_WANTED; /* nothing outdated */
    }
    wanted |= runs[i].reason != HIPPO_RELOCATE_WANTED;
  }
  if (!wanted) {
    rep->outcome = reason == HIPPO_RELOCATE_WANTED
                       ? HIPPO_RELOCATION_NOT_WANTED
                       : HIPPO_RELOCATION_NOTHING_TO_MOVE;
    for (uint32_t i = 0; i < n; i++)
      runs[i].rep.outcome = rep->outcome;
    return HIPPO_SUCCESS;
  }
  /* 1. nothing moves while a graph records: a success that says so in
   * the report, so last_error keeps the thread's last failure */
  hippo__error_keep(&kept);
  st = hippo__device_refuse_while_recording(dev, call);
  if (st == HIPPO_GRAPH_RECORDING) {
    hippo__error_restore(&kept);
    rep->outcome = HIPPO_RELOCATION_RECORDING;
    for (uint32_t i = 0; i < n; i++)
      runs[i].rep.outcome = rep->outcome;
    return HIPPO_SUCCESS;
  }
  if (st != HIPPO_SUCCESS) {
    fail(rep, fails, &first, runs[0].s, st, HIPPO_RELOCATION_STEP_FINISH, 0,
         0);
    rep->outcome = HIPPO_RELOCATION_FAILED;
    return st;
  }
  /* 2. plans */
  for (uint32_t i = 0; i < n; i++)
    if (runs[i].reason != HIPPO_RELOCATE_WANTED) {
      plan_stream(&runs[i], &first);
      slices += runs[i].slices;
    }
  /* 3-5: with something to move, every stream's work first */
  if (slices) {
    st = hippo__device_finish(dev);
    if (st != HIPPO_SUCCESS) {
      for (uint32_t i = 0; i < n; i++)
        if (runs[i].slices) {
          fail(&runs[i].rep, &runs[i].fails, &first, runs[i].s, st,
               HIPPO_RELOCATION_STEP_FINISH, runs[i].slices, runs[i].bytes);
          abort_stream(&runs[i], false);
        }
    } else {
      for (uint32_t i = 0; i < n; i++)
        if (runs[i].slices)
          move_stream(&runs[i], &first);
    }
  }
  /* 6. */
  for (uint32_t i = 0; i < n; i++) {
    if (runs[i].reason == HIPPO_RELOCATE_WANTED) {
      runs[i].rep.outcome = reason == HIPPO_RELOCATE_WANTED
                                ? HIPPO_RELOCATION_NOT_WANTED
                                : HIPPO_RELOCATION_NOTHING_TO_MOVE;
      continue;
    }
    finish_stream(&runs[i], &first);
    report_add(rep, fails, &runs[i].rep, &runs[i].fails);
  }
  rep->outcome = outcome_of(rep);
  if (rep->failure_count) {
    hippo__error_restore(&first.text);
    return hippo__error_wrap(first.status,
                             "%s: %u relocation failures (slices that could "
                             "not move stayed where they were, their bytes "
                             "intact; relocation_report names each); the "
                             "first",
                             call, rep->failure_count);
  }
  return HIPPO_SUCCESS;
}

/* Keep the reports and their failures: each stream's, and the device's
 * last (the runs' and *fails are emptied). */
static void keep_reports(hippo_device *dev, run *runs, uint32_t n,
                         const hippo_relocation_report *rep,
                         hippo__failures *fails) {
  hippo__failures old;
  for (uint32_t i = 0; i < n; i++) {
    hippo_stream *s = runs[i].s;
    s->last_report = runs[i].rep;
    hippo__failures_free(&s->last_failures);
    s->last_failures = runs[i].fails;
    memset(&runs[i].fails, 0, sizeof runs[i].fails);
  }
  hippo__mutex_take(&dev->natives_lock);
  dev->last_report = *rep;
  old = dev->last_failures;
  dev->last_failures = *fails;
  hippo__mutex_drop(&dev->natives_lock);
  memset(fails, 0, sizeof *fails);
  hippo__failures_free(&old);
}

/* The stream's last report says `outcome` (nothing planned, no
 * failure). */
static void report_nothing(hippo_stream *s, hippo_relocate_reason reason,
                           uint32_t outcome) {
  report_init(&s->last_report, reason);
  s->last_report.streams = 1;
  s->last_report.outcome = outcome;
  s->last_failures.count = 0;
}

hippo_status hippo__relocate_locked(hippo_stream *s,
                                    hippo_relocate_reason reason,
                                    hippo_relocation_report *report) {
  run *u;
  hippo_relocation_report rep;
  hippo__failures fails = {NULL, 0, 0};
  hippo_status st;
  if (reason == HIPPO_RELOCATE_WANTED &&
      hippo__relocation_need_locked(s) == HIPPO_NEED_NOTHING) {
    /* the common answer, in O(1): the stream's report says so, the
     * device's keeps the last relocation that looked at pages */
    if (s->last_report.outcome != HIPPO_RELOCATION_NOT_WANTED)
      report_nothing(s, reason, HIPPO_RELOCATION_NOT_WANTED);
    if (report)
      *report = s->last_report;
    return HIPPO_SUCCESS;
  }
  if (reason != HIPPO_RELOCATE_WANTED && !has_work(s, reason)) {
    /* nothing outdated: no plan to make (the out-of-memory path asks) */
    report_nothing(s, reason, HIPPO_RELOCATION_NOTHING_TO_MOVE);
    if (report)
      *report = s->last_report;
    return HIPPO_SUCCESS;
  }
  u = calloc(1, sizeof *u);
  if (!u)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "relocate: host memory for a plan");
  u->s = s;
  st = relocate_runs(s->device, u, 1, reason, &rep, &fails, "relocate");
  keep_reports(s->device, u, 1, &rep, &fails);
  if (report)
    *report = rep;
  free(u);
  return st;
}

/* Every stream of the device (device lock and every stream lock held). */
static hippo_status relocate_all_locked(hippo_device *dev,
                                        hippo_relocate_reason reason,
                                        hippo_relocation_report *report,
                                        const char *call) {
  uint32_t n = dev->stream_count;
  run *runs = calloc(n ? n : 1, sizeof *runs);
  hippo_relocation_report rep;
  hippo__failures fails = {NULL, 0, 0};
  hippo_status st;
  if (!runs)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s: host memory for the plans of %u streams",
                            call, n);
  for (uint32_t i = 0; i < n; i++)
    runs[i].s = dev->streams[i];
  st = relocate_runs(dev, runs, n, reason, &rep, &fails, call);
  keep_reports(dev, runs, n, &rep, &fails);
  if (report)
    *report = rep;
  free(runs);
  return st;
}

hippo_status hippo__relocate(hippo_device *dev, hippo_stream *s,
                             hippo_relocate_reason reason,
                             hippo_relocation_report *report,
                             const char *call) {
  hippo_status st;
  if (reason > HIPPO_RELOCATE_UNMAP)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s: reason %u is not a "
                            "HIPPO_RELOCATE_* value (0 .. %u)",
                            call, reason, HIPPO_RELOCATE_UNMAP);
  if (s) {
    hippo__lock_take(&s->lock);
    st = hippo__relocate_locked(s, reason, report);
    hippo__lock_drop(&s->lock);
    return st;
  }
  hippo__mutex_take(&dev->lock);
  hippo__device_lock_streams(dev);
  st = relocate_all_locked(dev, reason, report, call);
  hippo__device_unlock_streams(dev);
  hippo__mutex_drop(&dev->lock);
  return st;
}

hippo_status hippo__reclaim(hippo_device *dev, hippo_stream *only) {
  hippo_status st, first = HIPPO_SUCCESS;
  hippo__mutex_take(&dev->lock);
  st = hippo__device_refuse_while_recording(dev, "reclaim");
  if (st != HIPPO_SUCCESS) {
    hippo__mutex_drop(&dev->lock);
    return st;
  }
  if (only) {
    hippo__lock_take(&only->lock);
    first = hippo__relocate_locked(only, HIPPO_RELOCATE_EXPLICIT, NULL);
    st = hippo__manager_cleanup_locked(only);
    hippo__lock_drop(&only->lock);
  } else {
    hippo__device_lock_streams(dev);
    first = relocate_all_locked(dev, HIPPO_RELOCATE_EXPLICIT, NULL,
                                "reclaim");
    st = HIPPO_SUCCESS;
    for (uint32_t i = 0; i < dev->stream_count; i++) {
      hippo_status cst = hippo__manager_cleanup_locked(dev->streams[i]);
      if (cst != HIPPO_SUCCESS && st == HIPPO_SUCCESS)
        st = cst;
    }
    hippo__device_unlock_streams(dev);
  }
  hippo__mutex_drop(&dev->lock);
  return first != HIPPO_SUCCESS ? first : st;
}

hippo_status hippo__relocation_report(hippo_device *dev, hippo_stream *s,
                                      hippo_relocation_report *out) {
  if (s) {
    hippo__lock_take(&s->lock);
    *out = s->last_report;
    hippo__lock_drop(&s->lock);
  } else {
    hippo__mutex_take(&dev->natives_lock);
    *out = dev->last_report;
    hippo__mutex_drop(&dev->natives_lock);
  }
  out->struct_size = sizeof *out;
  return HIPPO_SUCCESS;
}

hippo_status hippo__relocation_failure(hippo_device *dev, hippo_stream *s,
                                       uint32_t index,
                                       hippo_relocation_failure *out) {
  hippo_status st = HIPPO_SUCCESS;
  const hippo_relocation_report *rep;
  const hippo__failures *f;
  if (s) {
    hippo__lock_take(&s->lock);
    rep = &s->last_report;
    f = &s->last_failures;
  } else {
    hippo__mutex_take(&dev->natives_lock);
    rep = &dev->last_report;
    f = &dev->last_failures;
  }
  if (index >= rep->failure_count)
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "relocation_failure: index %u, but the last "
                          "relocation %s had %u failures",
                          index, s ? "of the stream" : "of the device",
                          rep->failure_count);
  else if (index >= f->count)
    st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                          "relocation_failure: failure %u of %u found no "
                          "host memory to be kept",
                          index, rep->failure_count);
  else
    *out = f->v[index];
  if (s)
    hippo__lock_drop(&s->lock);
  else
    hippo__mutex_drop(&dev->natives_lock);
  return st;
}

hippo_status hippo__relocation_need(hippo_stream *s,
                                    hippo_relocation_need *need) {
  hippo__lock_take(&s->lock);
  *need = hippo__relocation_need_locked(s);
  hippo__lock_drop(&s->lock);
  return HIPPO_SUCCESS;
}
