/* guard.c -- the registry of graph guards (guard.h). */
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
