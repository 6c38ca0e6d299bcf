/* guard.c -- the capture guard (guard.h): whether a stream captures, the
 * holds a capture takes, and their registry. */
#include <stdlib.h>
#include <string.h>

#include "guard.h"

void hippo__graphs_init(hippo__graphs *gs) {
  memset(gs, 0, sizeof *gs);
  hippo__mutex_init(&gs->lock);
}

void hippo__graphs_fini(hippo__graphs *gs) {
  for (uint32_t i = 0; i < gs->count; i++) {
    free(gs->graphs[i].guards);
    free(gs->graphs[i].index);
  }
  free(gs->graphs);
  hippo__mutex_fini(&gs->lock);
}

/* The graph of `id`, or NULL.  Locked. */
static hippo__graph *find(hippo__graphs *gs, uint64_t id) {
  if (gs->last < gs->count && gs->graphs[gs->last].id == id)
    return &gs->graphs[gs->last];
  for (uint32_t i = gs->count; i-- > 0;)
    if (gs->graphs[i].id == id) {
      gs->last = i;
      return &gs->graphs[i];
    }
  return NULL;
}

static bool same(const hippo__guard *a, const hippo__guard *b) {
  return a->s == b->s && a->pool == b->pool && a->slice == b->slice;
}

/* g's index entry for `guard`: the one naming it, or the empty one where
 * it would go (linear probing; the index is at most half full). */
static uint32_t *slot_of(hippo__graph *g, const hippo__guard *guard) {
  uint64_t h = (uint64_t)(uintptr_t)guard->s * UINT64_C(0x9E3779B97F4A7C15) ^
               ((uint64_t)guard->pool << 32 | guard->slice) *
                   UINT64_C(0xC2B2AE3D27D4EB4F);
  uint32_t mask = g->index_cap - 1, i = (uint32_t)(h >> 32) & mask;
  while (g->index[i] && !same(&g->guards[g->index[i] - 1], guard))
    i = (i + 1) & mask;
  return &g->index[i];
}

hippo_status hippo__graphs_make_room(hippo__graphs *gs, uint64_t id) {
  hippo__graph *g;
  hippo_status st = HIPPO_SUCCESS;
  hippo__mutex_take(&gs->lock);
  g = find(gs, id);
  if (!g) {
    if (gs->count == gs->cap) {
      uint32_t cap = gs->cap ? gs->cap * 2 : 8;
      hippo__graph *grown = realloc(gs->graphs, cap * sizeof *grown);
      if (!grown) {
        st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                              "graph guards: host memory for %u graphs", cap);
        goto out;
      }
      gs->graphs = grown;
      gs->cap = cap;
    }
    g = &gs->graphs[gs->count];
    memset(g, 0, sizeof *g);
    g->id = id;
    gs->last = gs->count++;
  }
  if (g->count == g->cap) {
    uint32_t cap = g->cap ? g->cap * 2 : 16;
    hippo__guard *grown = realloc(g->guards, cap * sizeof *grown);
    if (!grown) {
      st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "graph guards: host memory for %u guards of "
                            "capture %llu",
                            cap, (unsigned long long)id);
      goto out;
    }
    g->guards = grown;
    g->cap = cap;
  }
  if (g->index_cap < 2 * (g->count + 1)) {
    uint32_t cap = g->index_cap ? g->index_cap * 2 : 32;
    uint32_t *index = calloc(cap, sizeof *index);
    if (!index) {
      st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "graph guards: host memory for the index of "
                            "capture %llu",
                            (unsigned long long)id);
      goto out;
    }
    free(g->index);
    g->index = index;
    g->index_cap = cap;
    for (uint32_t i = 0; i < g->count; i++)
      *slot_of(g, &g->guards[i]) = i + 1;
  }
out:
  hippo__mutex_drop(&gs->lock);
  return st;
}

bool hippo__graphs_note(hippo__graphs *gs, uint64_t id, hippo__guard guard) {
  hippo__graph *g;
  uint32_t *slot;
  bool fresh;
  hippo__mutex_take(&gs->lock);
  g = find(gs, id); /* made by make_room, with room */
  g->retired = false;
  slot = slot_of(g, &guard);
  fresh = *slot == 0;
  if (fresh) {
    g->guards[g->count++] = guard;
    *slot = g->count;
  }
  hippo__mutex_drop(&gs->lock);
  return fresh;
}

/* A graph graph_retire would take (room made for a hold that a failed
 * call never took is not a guard). */
static bool takes(const hippo__graph *g) {
  return g && (g->count != 0 || g->retired);
}

bool hippo__graphs_known(hippo__graphs *gs, uint64_t id) {
  bool known;
  hippo__mutex_take(&gs->lock);
  known = takes(find(gs, id));
  hippo__mutex_drop(&gs->lock);
  return known;
}

hippo_status hippo__graphs_take(hippo__graphs *gs, uint64_t id,
                                hippo__guard **out, uint32_t *count) {
  hippo__graph *g;
  hippo__mutex_take(&gs->lock);
  g = find(gs, id);
  if (!takes(g)) {
    hippo__mutex_drop(&gs->lock);
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "graph_retire: hippo guarded nothing under "
                            "capture %llu (no reserve, release or resolve "
                            "on a stream that captured it)",
                            (unsigned long long)id);
  }
  *out = g->guards;
  *count = g->count;
  g->guards = NULL;
  g->count = g->cap = 0;
  free(g->index);
  g->index = NULL;
  g->index_cap = 0;
  g->retired = true;
  hippo__mutex_drop(&gs->lock);
  return HIPPO_SUCCESS;
}

uint64_t hippo__graphs_holds(hippo__graphs *gs) {
  uint64_t n = 0;
  hippo__mutex_take(&gs->lock);
  for (uint32_t i = 0; i < gs->count; i++)
    n += gs->graphs[i].count;
  hippo__mutex_drop(&gs->lock);
  return n;
}

/* ---- whether a stream captures --------------------------------------------- */

void hippo__capture_init(hippo__capture *c, hippo__backend *be,
                         void *native) {
  c->word = be->ops->capture_word ? be->ops->capture_word(be, native) : NULL;
  atomic_init(&c->own, 0);
  atomic_init(&c->mode, c->word ? HIPPO__CAPTURE_WORD : HIPPO__CAPTURE_ASK);
}

hippo_status hippo__capture_query(hippo__backend *be, void *native,
                                  uint64_t *cid) {
  bool capturing = false;
  hippo_status st = be->ops->capture_status(be, native, &capturing, cid);
  if (st != HIPPO_SUCCESS)
    return hippo__error_wrap(st, "asking whether native stream %p captures",
                             native);
  if (!capturing)
    *cid = 0;
  return HIPPO_SUCCESS;
}

hippo_status hippo__capture_announce(hippo__capture *c, hippo__backend *be,
                                     void *native,
                                     hippo_capture_announcement what) {
  uint64_t cid = 0;
  hippo_status st;
  if (what == HIPPO_CAPTURE_QUERY) {
    atomic_store(&c->mode, HIPPO__CAPTURE_ASK);
    return HIPPO_SUCCESS;
  }
  if (what != HIPPO_CAPTURE_BEGINS && what != HIPPO_CAPTURE_ENDED)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "capture_announce: %u is not "
                            "HIPPO_CAPTURE_QUERY, _BEGINS or _ENDED",
                            what);
  /* the driver's answer is authoritative */
  st = hippo__capture_query(be, native, &cid);
  if (st != HIPPO_SUCCESS)
    return hippo__error_wrap(st, "capture_announce");
  if (what == HIPPO_CAPTURE_BEGINS && !cid)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "capture_announce: BEGINS, but the driver says "
                            "native stream %p does not capture; announce "
                            "right after the capture began",
                            native);
  if (what == HIPPO_CAPTURE_ENDED && cid)
    return hippo__error_set(HIPPO_GRAPH_RECORDING,
                            "capture_announce: ENDED, but the driver says "
                            "native stream %p still captures graph %llu; "
                            "announce right after the capture ended",
                            native, (unsigned long long)cid);
  atomic_store_explicit(&c->own, cid, memory_order_release);
  atomic_store(&c->mode, HIPPO__CAPTURE_ANNOUNCED);
  return HIPPO_SUCCESS;
}

void hippo__capture_forget(hippo__capture *c) {
  atomic_store(&c->own, 0);
  atomic_store(&c->mode, HIPPO__CAPTURE_ANNOUNCED);
}

/* ---- holds ------------------------------------------------------------------ */

bool hippo__guard_take(hippo__graphs *gs, uint64_t cid, hippo_stream *s,
                       uint32_t index, hippo__pool *pool, uint32_t slice) {
  if (!hippo__graphs_note(gs, cid,
                          (hippo__guard){.s = s, .pool = index,
                                         .slice = slice}))
    return false; /* held by this graph already */
  pool->ops->hold(pool, slice);
  return true;
}
