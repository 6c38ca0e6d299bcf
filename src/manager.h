/* manager.h -- one attached stream's memory manager.
 *
 * Each attached stream has one memory manager: its own dynamic pools built
 * from the device's layout (layout.h), a persistent pool, and a handle
 * table.  Memory is never pooled across streams.  The manager's files:
 *   manager.c          init, the pools, persistent windows, cleanup and
 *                      the other work the device asks under the lock;
 *   manager_reserve.c  routing, reserve, release, resolve, periodic
 *                      deallocation;
 *   manager_usage.c    the figures: usage, pool_report;
 *   record_use.c       uses of a reservation by other streams and the
 *                      waits for their work;
 *   leaving.c          pages given up under the lock, freed after it;
 *   manager_check.c    the check walk.
 * The manager knows its device only through a hippo__stream_env (below):
 * its backend, the device's page figures, event cache and graph registry,
 * and two calls up -- the free gate's question (may pages go back?) and
 * the hooks of the layers above (the out-of-memory ladder, ladder.c).
 * The device (device.h) owns the streams; design.md states the lock
 * order.
 *
 * The functions here assume their arguments were checked by the plugin
 * layer (non-NULL, struct sizes interpreted).
 */
#ifndef HIPPO_MANAGER_H
#define HIPPO_MANAGER_H

#include "backend.h"
#include "core.h"
#include "events.h"
#include "guard.h"
#include "handles.h"
#include "layout.h"
#include "pool.h"

/* What the layers above a manager do for it, called with the stream lock
 * held (ladder.c gives the one set hippo has; NULL: none).
 *  no_room: a reservation found no room (`st`: HIPPO_OUT_OF_MEMORY,
 *    HIPPO_PAGE_SIZES_EXHAUSTED, ...); the ladder may relocate, give
 *    pages back (dropping and retaking the lock) and retry with
 *    hippo__manager_route_locked.  Returns the final status; on success
 *    *pool and *ref describe the slice served and the handle table has
 *    room.
 *  before_reserve: HIPPO_DEVICE_AUTO_RELOCATE, before an ordinary
 *    reservation (CubeCL's rule: relocate when the memory wants it). */
typedef struct hippo__stream_hooks {
  hippo_status (*no_room)(hippo_stream *s, uint64_t size, bool persistent,
                          uint32_t *pool, hippo__slice_ref *ref,
                          hippo_status st);
  void (*before_reserve)(hippo_stream *s);
} hippo__stream_hooks;

/* What a stream's manager gets from its device at attach (the device
 * keeps one, filled at open).  Invariant: every pointer but hooks is set
 * and outlives the stream. */
typedef struct hippo__stream_env {
  hippo_device *device;       /* identity only: opaque to the manager */
  hippo__backend *be;
  hippo__page_acct *acct;     /* the device's page figures (the parent) */
  hippo__events *events;      /* the device's event cache */
  hippo__graphs *graphs;      /* the device's graph registry */
  const hippo__stream_hooks *hooks;
  uint32_t flags;             /* HIPPO_DEVICE_* */
  /* The free gate's question (pool.h, hippo__free_gate.ask): may pages go
   * back now (no stream of the device captures)?  ctx: may_free_ctx. */
  hippo_status (*may_free)(void *ctx, bool *may_free);
  void *may_free_ctx;
} hippo__stream_env;

#define HIPPO__TICK_BACKOFF_MAX 1024u /* reservations between capture asks */
_Static_assert(HIPPO__MAX_POOLS + 1 < HIPPO__HANDLE_TABLE,
               "a handle names any pool of a stream apart from the table");

/* A use of one of the stream's slices by another stream (record_use): the
 * slice (pool index, slice id) holds a hold for it; `event` was made ready
 * at record_use and is recorded on `user` at the release (user NULL: it
 * was recorded when `user` detached).
 * In the waits, `late` says the user was capturing at the release: a
 * record then would be baked into its graph and mark none of the work it
 * queued before, so nothing is recorded yet; the event is recorded on
 * `user` (never NULL then) once it no longer captures, and the wait is
 * done only after that.  Outside the waits, `late` means nothing.
 * In the waits, `key` names the attached stream whose queue the event was
 * recorded on at the release (never dereferenced but by the check walk;
 * cleared when that stream detaches), or is NULL: recorded later (late),
 * or when its user detached, before the release or since; `seq` numbers
 * the records at releases.  The
 * keyed waits lie in the order of their records (seq increasing), so for
 * one key a later event completes no sooner than an earlier one (stream
 * order): poll_waits asks no further once one is not done. */
typedef struct hippo__use {
  uint32_t pool, slice;
  hippo_stream *user;
  void *event;
  const hippo_stream *key;
  uint64_t seq;
  bool late;
} hippo__use;

/* A user stream that keyed waits name, and how many (so a poll knows when
 * every user it could still ask about is pending). */
typedef struct hippo__wait_user {
  const hippo_stream *key;
  uint32_t waits;
} hippo__wait_user;

/* One stream's memory manager.
 * Invariant: pools[0] is the persistent pool, pools[1 .. pool_count) the
 * dynamic pools of the device's current layout; every live handle slot
 * names a pool index < pool_count (or HIPPO__POOL_NONE for size 0) and a
 * live slice of it; in_use == sum over pools of bytes_in_use;
 * peak_in_use >= in_use; acct.bytes_reserved == sum of pool bytes_reserved;
 * ticking and movable list exactly the pools with a dealloc_period and
 * those relocation acts on (hippo__manager_relocates), in routing order;
 * the pools' holds sum to
 * holds + use_count + wait_count; acct counts the pools' pages and the
 * leaving ones.
 */
#define HIPPO__STREAM_MAGIC 0x5354524du /* live hippo_stream ("STRM") */

struct hippo_stream {
  uint32_t magic;           /* HIPPO__STREAM_MAGIC while attached */
  hippo_device *device;     /* its device (env->device) */
  void *native;             /* hipStream_t, or the emulated stream */
  /* Whether the stream captures (guard.h), read without the lock. */
  hippo__capture capture;
  const hippo__stream_env *env;
  hippo__lock lock;         /* guards everything below */
  hippo__handles handles;
  hippo__pool **pools;      /* [0] persistent, then the layout's pools */
  uint32_t pool_count;
  uint32_t persistent_depth; /* open persistent windows */
  bool auto_relocate;       /* HIPPO_DEVICE_AUTO_RELOCATE */
  hippo__pool **ticking;    /* pools with a dealloc_period */
  uint32_t ticking_count;
  uint64_t clock;           /* reservations made on this stream */
  uint64_t tick_quiet_until; /* no ticks before this clock (gate said no) */
  uint64_t tick_backoff;     /* the last pause, 0 after a yes */
  uint64_t in_use;          /* requested bytes live */
  uint64_t peak_in_use;
  uint64_t zero_live;       /* live zero-size reservations */
  hippo__page_acct acct;    /* page figures; parent = the device's */
  hippo__leaving leaving;   /* pages given up, freed after the lock */
  hippo__free_gate gate;    /* asks the device whether pages may go back */
  /* Generation histories of pool indices whose pool no longer names its
   * reservations (pools_install put another kind there, or fewer pools):
   * parked[k].records != NULL only where k >= pool_count or pools[k] has
   * no names_give; the next pool at k that names adopts it. */
  hippo__names parked[HIPPO__MAX_POOLS + 1];
  /* Relocation (relocation.c): the pools that can move their slices
   * (ops->move != NULL), the figures, and the last report. */
  hippo__pool **movable;     /* subset of pools, routing order */
  uint32_t movable_count;
  uint64_t relocations, slices_relocated, bytes_relocated;
  hippo_relocation_report last_report;
  hippo__failures last_failures; /* last_report's */
  void *shell;               /* what the caller knows this stream as (the
                                plugin's pointer), named in reports */
  uint64_t holds;            /* graph holds on this stream's slices (the
                                registry's guards naming it) */
  /* record_use: uses of live slices, and released slices waiting for the
   * events recorded at their release; each entry keeps one hold. */
  hippo__use *uses, *waits;
  uint32_t use_count, use_cap, wait_count, wait_cap;
  uint64_t wait_seq;         /* the last seq given to a wait */
  /* the distinct keys of the keyed waits, each with its count (> 0) */
  hippo__wait_user *wait_users;
  uint32_t wait_user_count, wait_user_cap;
  uint64_t event_failures;   /* failed event queries */
};

/* ---- manager.c, manager_reserve.c, manager_usage.c -------------------------
 * The _locked variants expect the stream lock held by the caller. */
hippo_status hippo__manager_init(hippo_stream *s, const hippo__stream_env *env,
                                 void *native);
void hippo__manager_fini(hippo_stream *s);
/* Build the dynamic pools of `layout` (pools[0] is kept). */
hippo_status hippo__manager_build(hippo_stream *s, const hippo__layout *layout,
                                  hippo__pool ***pools, uint32_t *count);
void hippo__manager_swap(hippo_stream *s, hippo__pool **pools, uint32_t count);
void hippo__pools_destroy(hippo__pool **pools, uint32_t from, uint32_t count);
hippo_status hippo__reserve(hippo_stream *s, uint64_t size, hippo_mode mode,
                            hippo_handle *out);
hippo_status hippo__release(hippo_stream *s, hippo_handle h);
hippo_status hippo__resolve(hippo_stream *s, hippo_handle h, void **ptr,
                            uint64_t *size);
/* Route a reservation of `size` to the persistent pool or the first pool
 * that accepts it, spilling past full capped pools (the ladder's retry).
 * Nothing changes on failure. */
hippo_status hippo__manager_route_locked(hippo_stream *s, uint64_t size,
                                         bool persistent, uint32_t *pool,
                                         hippo__slice_ref *ref);
/* Where live handle h's reservation lives: its pool index and slice
 * (HIPPO__POOL_NONE: zero size) and, named by the table, its slot (else
 * NULL).  false when h is not live on s. */
bool hippo__manager_locate_locked(hippo_stream *s, hippo_handle h,
                                  uint32_t *pool, uint32_t *slice,
                                  hippo__slot **slot);
/* HIPPO_INVALID_HANDLE, naming the call. */
hippo_status hippo__manager_bad_handle(hippo_handle h, const char *call);
/* Whether the stream captures (*cid != 0: under that id); guard.h. */
static inline hippo_status hippo__stream_capture(const hippo_stream *s,
                                                 uint64_t *cid) {
  return hippo__capture_of(&s->capture, s->env->be, s->native, cid);
}
hippo_status hippo__stream_announce(hippo_stream *s,
                                    hippo_capture_announcement what);
/* A hold of capture `cid` on slice `slice` of pool `pool` (guard.h,
 * hippo__guard_take), counted by the stream; none where the host runtime
 * keeps its graphs' memory itself (HIPPO_DEVICE_HOST_GRAPHS). */
static inline void hippo__manager_guard_take(hippo_stream *s, uint64_t cid,
                                             uint32_t pool, uint32_t slice) {
  if (s->env->flags & HIPPO_DEVICE_HOST_GRAPHS)
    return;
  if (hippo__guard_take(s->env->graphs, cid, s, pool, s->pools[pool], slice))
    s->holds++;
}
/* graph_retire dropped the hold of a graph on slice `slice` of pool
 * `pool`: a released slice whose last hold went becomes free. */
void hippo__manager_unhold_locked(hippo_stream *s, uint32_t pool,
                                  uint32_t slice);
hippo_status hippo__persistent_begin(hippo_stream *s);
hippo_status hippo__persistent_end(hippo_stream *s);
/* While set, the pages the stream's pools give back join its leaving
 * pages, freed after the lock (hippo__manager_flush). */
static inline void hippo__manager_defer_frees(hippo_stream *s, bool on) {
  s->gate.defer = on;
}
/* Stranded destinations (a failed wait for a relocation's copies) go free
 * once a wait on the stream succeeds: cleanup asks for that wait (the
 * stream does not capture).  Nothing stranded: no call.  On failure they
 * stay stranded. */
hippo_status hippo__manager_unstrand_locked(hippo_stream *s);
/* Waits for the uses' work and the stranded copies, frees the leaving
 * pages (unless deferred) and gives every empty page back: the first
 * failure. */
hippo_status hippo__manager_cleanup_locked(hippo_stream *s);
/* pools_install: the first dynamic pool that holds slices graphs or other
 * streams' work may use, or stranded bytes (NULL: none; *index its
 * layout index). */
const hippo__pool *hippo__manager_held_pool_locked(const hippo_stream *s,
                                                   uint32_t *index);
/* pools_install: every dynamic pool gives its empty pages back (to the
 * leaving list: freed after the lock); the first failure, and the pages
 * the dynamic pools still hold in *held. */
hippo_status hippo__manager_empty_dynamic_locked(hippo_stream *s,
                                                 uint64_t *held);
/* Release every live reservation of the stream (stream_detach). */
void hippo__manager_release_all_locked(hippo_stream *s);
uint64_t hippo__manager_dynamic_bytes_locked(const hippo_stream *s);
/* Bytes kept out of use by failed relocation waits, over the pools. */
uint64_t hippo__manager_stranded_locked(const hippo_stream *s);
void hippo__manager_usage_locked(const hippo_stream *s, hippo_usage *out);
hippo_status hippo__stream_usage(hippo_stream *s, hippo_usage *out);
/* The report and the options in force of pool `index`. */
hippo_status hippo__pool_report_get(hippo_stream *s, uint32_t index,
                                    hippo_pool_report *out,
                                    hippo_pool_options *options);

/* ---- record_use.c ------------------------------------------------------------ */
hippo_status hippo__record_use(hippo_stream *s, hippo_handle h,
                               hippo_stream *user);
/* At a reservation: the waiting slices whose events completed become
 * reusable (never waits). */
void hippo__manager_poll_waits_locked(hippo_stream *s);
/* The release of h (live or not) is about to happen: each use of its
 * slice gets its event recorded on its user and becomes a wait; *out
 * names the slice and counts them (0: none, or h is not live).  A
 * failure changes nothing (the release must not happen).  Once the pool
 * released the slice, hippo__manager_waits_released_locked(s, out) tells
 * it how many of its holds those waits are (pool.h: waits). */
typedef struct hippo__uses_released {
  uint32_t pool, slice, waits;
} hippo__uses_released;
hippo_status hippo__manager_release_uses_locked(hippo_stream *s,
                                                hippo_handle h,
                                                hippo__uses_released *out);
/* The same for slice (pool, slice), known live. */
hippo_status hippo__manager_uses_released_locked(hippo_stream *s,
                                                 uint32_t pool,
                                                 uint32_t slice,
                                                 hippo__uses_released *out);
void hippo__manager_waits_released_locked(hippo_stream *s,
                                          const hippo__uses_released *r);
/* Waits for every waiting slice's event and drops its hold (cleanup and
 * detach need the bytes); the first failure, after trying all. */
hippo_status hippo__manager_wait_uses_locked(hippo_stream *s);
/* s is detaching: every use of its live slices by another stream is
 * marked and waited for, then every waiting slice; then the uses' holds
 * go.  The first failure: every use kept (finished waits are done). */
hippo_status hippo__manager_drop_uses_locked(hippo_stream *s);
/* `user` is detaching: every use of s's slices by it gets its event
 * recorded now (mark false; a failure changes nothing, and recording again
 * is harmless), then, once every step of the detach that can fail is
 * done, is marked so (mark true: no backend call, never fails).  s's lock
 * held. */
hippo_status hippo__manager_user_leaves_locked(hippo_stream *s,
                                               hippo_stream *user,
                                               bool mark);
/* The entry of user `key` in the stream's wait users (wait_user_count:
 * none); the check walk's. */
uint32_t hippo__manager_wait_user_find(const hippo_stream *s,
                                       const hippo_stream *key);
/* Destroys the events of the uses and waits (hippo__manager_fini). */
void hippo__manager_uses_fini(hippo_stream *s);

/* ---- leaving.c ---------------------------------------------------------------- */
/* Frees the stream's leaving pages (pool.h, hippo__leaving) -- called
 * WITHOUT the stream lock, which it takes only briefly around the backend
 * calls; `failed_too` retries the ones whose free failed before.  The
 * first failure (the page stays, tried again later). */
hippo_status hippo__manager_flush(hippo_stream *s, bool failed_too);
/* Leaving pages freed now, under the lock (detach, cleanup without
 * deferral): the first failure; those pages stay. */
hippo_status hippo__leaving_free_now_locked(hippo_stream *s);
/* After a tick: failed leaving pages whose retry is due are pending
 * again. */
void hippo__leaving_retry_due_locked(hippo_stream *s);
/* Frees the leaving pages at device_close (failures: the page is lost to
 * hippo; nothing else can be done), and the list. */
void hippo__leaving_fini(hippo_stream *s);

/* Whether relocation acts on pool p of stream s (s->movable): every kind
 * with relocation operations.  On a HIPPO_DEVICE_NO_MOVE device it still
 * acts on them -- an ARENA's empty outdated pages and a VIRTUAL pool's
 * idle granules go back at its drain -- but plans no move (below). */
static inline bool hippo__manager_relocates(const hippo__pool *p) {
  return p->ops->move != NULL;
}

/* Whether a relocation of stream s may move slices: never on a
 * HIPPO_DEVICE_NO_MOVE device (a VIRTUAL pool plans no move anyway). */
static inline bool hippo__manager_moves(const hippo_stream *s) {
  return !(s->env->flags & HIPPO_DEVICE_NO_MOVE);
}

/* ---- manager_check.c --------------------------------------------------------- */
hippo_status hippo__manager_check_locked(const hippo_stream *s);

#endif /* HIPPO_MANAGER_H */
