/* guard.h -- the capture guard (guard.c): whether a stream captures, the
 * holds a capture takes, and the registry of them: what a capture may have
 * baked into a graph stays where it is, and in use, until the host runtime
 * retires the graph.  The device's questions over all its streams (does
 * any capture? retire a graph) walk its streams in device.c.
 *
 * hippo asks the backend, at each reserve, release and resolve (and
 * record_use for the user stream), whether the call's stream captures and
 * under which capture id (hipStreamIsCapturing / hipStreamGetCaptureInfo;
 * on HOST and DRY a word of the emulated stream read without a lock).  A
 * slice that call reserves, releases or resolves while its stream captures
 * C is *guarded* under C, per slice (CubeCL guards whole pages; hippo guards
 * only the slices, so a page's other room stays usable):
 *  - its pool counts a hold on the slice (pool.h: hold/unhold), and this
 *    registry notes (stream, pool index, slice) under C;
 *  - a held slice never moves: relocation leaves its page whole
 *    (pages_guarded in the report);
 *  - released, it is not reused by any reservation: it stays out of the
 *    free index ("guarded" bytes in usage and pool_report) and its page is
 *    never given back (not by cleanup, periodic deallocation, reclaim,
 *    relocation, install or stream_detach);
 *  - graph_retire(C) drops the holds C took; a released slice whose last
 *    hold goes becomes free.  Retiring C again is harmless (HIPPO_SUCCESS);
 *    an id hippo never guarded anything under is HIPPO_INVALID_ARGUMENT.
 *    A graph never retired keeps its slices until device_close.
 * A stream detached while a graph holds slices of it keeps those pages (and
 * nothing else) as a *retained* manager of the device, gone once its last
 * hold is retired or at device_close.
 *
 * While a stream captures, its reservations are served only from room its
 * pools already hold: a new page would be a driver allocation inside the
 * capture, illegal in HIP, so the reservation answers
 * HIPPO_GRAPH_NEEDS_PAGE (other streams go on taking pages).  Periodic
 * deallocation, cleanup and relocation wait while any stream of the device
 * captures (device.c, the free gate).
 *
 * Locking: the registry has its own mutex, a leaf: taken under a stream lock
 * (reserve, release, resolve on a capturing stream), never while waiting
 * for another lock, and never held across a backend call.
 */
#ifndef HIPPO_GUARD_H
#define HIPPO_GUARD_H

#include "backend.h"
#include "core.h"
#include "pool.h"

/* ---- whether a stream captures ---------------------------------------------
 * Where hippo learns whether a stream captures, at each reserve, release
 * and resolve and in the device's capture questions: `mode` says where --
 * the backend's word (HOST, DRY: backend.h capture_word), read without a
 * lock; the driver's answer (capture_status: HIP, or any stream after
 * capture_announce(QUERY)); or `own`, set by the host runtime's
 * announcements (capture_announce). */
enum { HIPPO__CAPTURE_WORD = 0, HIPPO__CAPTURE_ASK = 1,
       HIPPO__CAPTURE_ANNOUNCED = 2 };
/* Invariant: mode == HIPPO__CAPTURE_WORD only where word != NULL; own is
 * 0 or the capture id of the announced capture. */
typedef struct hippo__capture {
  const _Atomic uint64_t *word; /* the backend's (NULL: it has none) */
  _Atomic uint64_t own;         /* the host runtime's announcements */
  atomic_uint mode;             /* HIPPO__CAPTURE_* */
} hippo__capture;

/* The backend's word for native stream `native` where it has one, else the
 * driver's answers. */
void hippo__capture_init(hippo__capture *c, hippo__backend *be,
                         void *native);
/* The driver's answer for `native`: *cid = its capture id, 0 when it does
 * not capture. */
hippo_status hippo__capture_query(hippo__backend *be, void *native,
                                  uint64_t *cid);
/* Whether the stream captures (*cid != 0: under that id).  O(1) but where
 * the driver is asked (mode ASK). */
static inline hippo_status hippo__capture_of(const hippo__capture *c,
                                             hippo__backend *be, void *native,
                                             uint64_t *cid) {
  unsigned mode = atomic_load_explicit(&c->mode, memory_order_relaxed);
  if (HIPPO__LIKELY(mode == HIPPO__CAPTURE_WORD)) {
    *cid = atomic_load_explicit(c->word, memory_order_acquire);
    return HIPPO_SUCCESS;
  }
  if (mode == HIPPO__CAPTURE_ANNOUNCED) {
    *cid = atomic_load_explicit(&c->own, memory_order_acquire);
    return HIPPO_SUCCESS;
  }
  return hippo__capture_query(be, native, cid);
}
/* hippo__capture_of's common answer without its call: the backend's word
 * says the stream does not capture (false: ask hippo__capture_of). */
static inline bool hippo__capture_none(const hippo__capture *c) {
  return HIPPO__LIKELY(atomic_load_explicit(&c->mode, memory_order_relaxed) ==
                       HIPPO__CAPTURE_WORD) &&
         atomic_load_explicit(c->word, memory_order_acquire) == 0;
}
/* capture_announce (hippo.h): QUERY, BEGINS or ENDED, checked with the
 * driver. */
hippo_status hippo__capture_announce(hippo__capture *c, hippo__backend *be,
                                     void *native,
                                     hippo_capture_announcement what);
/* The native stream goes (a detached stream a graph retains): never asked
 * again, taken as not capturing. */
void hippo__capture_forget(hippo__capture *c);

/* One hold a graph took: slice `slice` of pool `pool` of stream `s`. */
typedef struct hippo__guard {
  hippo_stream *s;
  uint32_t pool;
  uint32_t slice;
} hippo__guard;

/* One capture id and its holds.
 * Invariant: retired == (count == 0 and the holds were dropped); every
 * guard names a slice with a hold in its pool, and no two guards name the
 * same slice (a slice a capture touches again takes no second hold);
 * index is an open-addressing set of guards[] positions + 1 (0 = empty)
 * with index_cap a power of two at least twice count, or NULL while
 * count is 0. */
typedef struct hippo__graph {
  uint64_t id;
  hippo__guard *guards;
  uint32_t count, cap;
  uint32_t *index;
  uint32_t index_cap;
  bool retired;
} hippo__graph;

/* Every capture id a device guarded anything under (its registry). */
typedef struct hippo__graphs {
  hippo__mutex lock;
  hippo__graph *graphs;
  uint32_t count, cap;
  uint32_t last; /* index of the graph noted last (a capture notes many) */
} hippo__graphs;

void hippo__graphs_init(hippo__graphs *gs);
void hippo__graphs_fini(hippo__graphs *gs);
/* Make sure the next hippo__graphs_note under `id` cannot fail (host
 * memory); HIPPO_OUT_OF_MEMORY with last_error otherwise, nothing
 * changed. */
hippo_status hippo__graphs_make_room(hippo__graphs *gs, uint64_t id);
/* Note a hold under `id` (after make_room): true when the slice was not
 * held by `id` yet (the caller then takes the pool's hold), false when it
 * is already (nothing to do: one hold per slice and graph). */
bool hippo__graphs_note(hippo__graphs *gs, uint64_t id, hippo__guard g);
/* Whether hippo__graphs_take would find `id` (it guarded something under
 * it, or retired it already). */
bool hippo__graphs_known(hippo__graphs *gs, uint64_t id);
/* Take the holds of `id` for retiring: HIPPO_INVALID_ARGUMENT when the id
 * is unknown; *out NULL (count 0) when it was retired already.  The caller
 * drops each hold and frees *out. */
hippo_status hippo__graphs_take(hippo__graphs *gs, uint64_t id,
                                hippo__guard **out, uint32_t *count);
/* Holds not yet retired, over every graph (figures, check walks). */
uint64_t hippo__graphs_holds(hippo__graphs *gs);

/* ---- holds -------------------------------------------------------------------
 * A hold of capture `cid` on slice `slice` of `pool`, pool index `index` of
 * stream `s` (one per slice and graph, however often the capture touches
 * the slice): noted in the registry (hippo__graphs_make_room succeeded)
 * and taken in the pool.  false: this graph held the slice already
 * (nothing changed). */
bool hippo__guard_take(hippo__graphs *gs, uint64_t cid, hippo_stream *s,
                       uint32_t index, hippo__pool *pool, uint32_t slice);

#endif /* HIPPO_GUARD_H */
