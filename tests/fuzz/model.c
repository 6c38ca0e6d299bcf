/* model.c -- the reference model of hippo's observable behaviour (model.h).
 * Plain arrays and loops: it has to be obviously right, not fast. */
#include <config.h>

#include <stdio.h>
#include <string.h>

#include "model.h"

void hfz_model_init(hfz_model *m, uint64_t capacity, uint64_t alignment,
                    bool fixed_layout, const hfz_layout_facts *lay) {
  memset(m, 0, sizeof *m);
  m->capacity = capacity;
  m->alignment = alignment;
  m->fixed_layout = fixed_layout;
  m->lay[0] = *lay;
  m->nlay = 1;
  for (int i = 0; i < HFZ_MAX_STREAMS; i++)
    m->streams[i].graph = -1;
}

int hfz_stream_free_slot(const hfz_model *m) {
  for (int i = 0; i < HFZ_MAX_STREAMS; i++)
    if (!m->streams[i].attached)
      return i;
  return -1;
}

bool hfz_any_capturing(const hfz_model *m) {
  for (int i = 0; i < HFZ_MAX_STREAMS; i++)
    if (m->streams[i].attached && m->streams[i].graph >= 0)
      return true;
  return false;
}

uint64_t hfz_stream_bytes(const hfz_model *m, int stream) {
  uint64_t b = 0;
  for (int i = 0; i < HFZ_MAX_HANDLES; i++)
    if (m->handles[i].h && m->handles[i].stream == stream)
      b += m->handles[i].size;
  return b;
}

uint64_t hfz_stream_count(const hfz_model *m, int stream) {
  uint64_t n = 0;
  for (int i = 0; i < HFZ_MAX_HANDLES; i++)
    n += m->handles[i].h && m->handles[i].stream == stream;
  return n;
}

hfz_handle *hfz_handle_find(hfz_model *m, hippo_handle h) {
  if (h == 0)
    return NULL;
  for (int i = 0; i < HFZ_MAX_HANDLES; i++)
    if (m->handles[i].h == h)
      return &m->handles[i];
  return NULL;
}

hfz_handle *hfz_handle_add(hfz_model *m) {
  for (int i = 0; i < HFZ_MAX_HANDLES; i++)
    if (!m->handles[i].h) {
      memset(&m->handles[i], 0, sizeof m->handles[i]);
      return &m->handles[i];
    }
  return NULL;
}

void hfz_touch(hfz_model *m, hfz_handle *x) {
  int g = m->streams[x->stream].graph;
  if (g >= 0 && x->size) {
    x->guards |= UINT64_C(1) << g;
    m->graphs[g].known = HFZ_KNOWN;
  }
}

/* The released bytes stay guarded while a graph holds them. */
static void keep_guarded(hfz_model *m, const hfz_handle *x) {
  if (x->guards && x->size && m->nranges < HFZ_MAX_RANGES) {
    hfz_range *r = &m->ranges[m->nranges++];
    r->addr = x->addr;
    r->size = x->size;
    r->guards = x->guards;
  } else if (x->guards && x->size) {
    m->ranges_lost = true;
  }
}

void hfz_release(hfz_model *m, hfz_handle *x) {
  hfz_touch(m, x);
  keep_guarded(m, x);
  if (x->users)
    m->holds_maybe = true;
  m->stale[m->nstale++ % HFZ_MAX_STALE] = x->h;
  memset(x, 0, sizeof *x);
}

void hfz_stream_release_all(hfz_model *m, int stream) {
  for (int i = 0; i < HFZ_MAX_HANDLES; i++)
    if (m->handles[i].h && m->handles[i].stream == stream) {
      keep_guarded(m, &m->handles[i]);
      m->stale[m->nstale++ % HFZ_MAX_STALE] = m->handles[i].h;
      memset(&m->handles[i], 0, sizeof m->handles[i]);
    }
}

void hfz_stream_drop(hfz_model *m, int stream) {
  hfz_stream_release_all(m, stream);
  /* it used others' reservations no more; their release waits for the
   * work it queued before its detach all the same */
  for (int i = 0; i < HFZ_MAX_HANDLES; i++) {
    if (m->handles[i].users >> stream & 1)
      m->holds_maybe = true;
    m->handles[i].users &= ~(UINT32_C(1) << stream);
  }
}

uint64_t hfz_dynamic_bytes(const hfz_model *m) {
  uint64_t b = 0;
  for (int i = 0; i < HFZ_MAX_HANDLES; i++)
    if (m->handles[i].h && !m->handles[i].persistent)
      b += m->handles[i].size;
  return b;
}

/* Could a dynamic pool hold a graph's hold?  (Released ranges may be in a
 * persistent pool or a detached stream's: the model does not know, so it
 * counts them.) */
bool hfz_dynamic_guards(const hfz_model *m) {
  for (int i = 0; i < HFZ_MAX_HANDLES; i++)
    if (m->handles[i].h && !m->handles[i].persistent && m->handles[i].guards)
      return true;
  for (int i = 0; i < m->nranges; i++)
    if (m->ranges[i].guards)
      return true;
  return false;
}

static unsigned popcount64(uint64_t x) {
  unsigned n = 0;
  for (; x; x &= x - 1)
    n++;
  return n;
}

uint64_t hfz_guard_holds(const hfz_model *m) {
  uint64_t n = 0;
  for (int i = 0; i < HFZ_MAX_HANDLES; i++)
    if (m->handles[i].h)
      n += popcount64(m->handles[i].guards);
  for (int i = 0; i < m->nranges; i++)
    n += popcount64(m->ranges[i].guards);
  return n;
}

const hfz_range *hfz_guarded_overlap(const hfz_model *m, uint64_t addr,
                                     uint64_t size) {
  for (int i = 0; i < m->nranges; i++) {
    const hfz_range *r = &m->ranges[i];
    if (r->guards && addr < r->addr + r->size && r->addr < addr + size)
      return r;
  }
  return NULL;
}

int hfz_graph_begin(hfz_model *m, int stream, uint64_t id) {
  int g = -1;
  for (int i = 0; i < HFZ_MAX_GRAPHS && g < 0; i++)
    if (!m->graphs[i].used)
      g = i;
  if (g < 0)
    return -1;
  m->graphs[g].used = true;
  m->graphs[g].id = id;
  m->graphs[g].stream = stream;
  m->graphs[g].known = HFZ_UNKNOWN;
  m->streams[stream].graph = g;
  return g;
}

void hfz_graph_end(hfz_model *m, int stream) {
  int g = m->streams[stream].graph;
  if (g >= 0)
    m->graphs[g].stream = -1;
  m->streams[stream].graph = -1;
}

void hfz_graph_retired(hfz_model *m, int g) {
  uint64_t bit = UINT64_C(1) << g;
  int kept = 0;
  for (int i = 0; i < HFZ_MAX_HANDLES; i++)
    m->handles[i].guards &= ~bit;
  for (int i = 0; i < m->nranges; i++) {
    m->ranges[i].guards &= ~bit;
    if (m->ranges[i].guards)
      m->ranges[kept++] = m->ranges[i];
  }
  m->nranges = kept;
  /* an ended graph, retired, holds nothing: its slot may serve again
   * (hippo still knows the id; the model just stops asking about it) */
  if (m->graphs[g].stream < 0)
    m->graphs[g].used = false;
}

int hfz_graph_by_id(const hfz_model *m, uint64_t id) {
  for (int i = 0; i < HFZ_MAX_GRAPHS; i++)
    if (m->graphs[i].used && m->graphs[i].id == id)
      return i;
  return -1;
}

static uint64_t align_up(uint64_t x, uint64_t a) {
  return x > UINT64_MAX - (a - 1) ? UINT64_MAX : (x + a - 1) & ~(a - 1);
}

hfz_statuses hfz_expect_reserve(const hfz_model *m, int stream, uint64_t size,
                                hippo_mode mode, uint64_t bytes_held) {
  const hfz_stream *st = &m->streams[stream];
  bool persistent = mode == HIPPO_MODE_PERSISTENT || st->depth > 0;
  uint64_t lo = UINT64_MAX, hi = 0, page = 0, need;
  hfz_statuses ok = HFZ_ST(HIPPO_SUCCESS);
  if (mode > HIPPO_MODE_PERSISTENT)
    return HFZ_ST(HIPPO_INVALID_ARGUMENT);
  if (size == 0)
    return ok;
  for (int i = 0; i < m->nlay; i++) {
    uint64_t largest =
        persistent ? m->capacity & ~(m->alignment - 1) : m->lay[i].largest;
    lo = largest < lo ? largest : lo;
    hi = largest > hi ? largest : hi;
    if (!persistent) {
      page = m->lay[i].page_max > page ? m->lay[i].page_max : page;
      if (m->lay[i].capped)
        ok |= HFZ_ST(HIPPO_POOL_CAPACITY_EXCEEDED);
      if (m->lay[i].arena)
        ok |= HFZ_ST(HIPPO_PAGE_SIZES_EXHAUSTED);
      if (m->lay[i].virt) /* its range full, or no memory to map */
        ok |= HFZ_ST(HIPPO_POOL_CAPACITY_EXCEEDED) |
              HFZ_ST(HIPPO_OUT_OF_MEMORY);
    }
  }
  if (size > hi)
    return HFZ_ST(HIPPO_BUFFER_TOO_BIG);
  if (size > lo)
    ok |= HFZ_ST(HIPPO_BUFFER_TOO_BIG);
  if (st->graph >= 0)
    ok |= HFZ_ST(HIPPO_GRAPH_NEEDS_PAGE);
  /* out of memory only where the page it may need does not fit */
  need = align_up(size, m->alignment);
  need = page > need ? page : need;
  if (bytes_held > m->capacity || need > m->capacity - bytes_held)
    ok |= HFZ_ST(HIPPO_OUT_OF_MEMORY);
  return ok;
}

int hfz_model_check(const hfz_model *m, char *why, unsigned len) {
  for (int i = 0; i < HFZ_MAX_HANDLES; i++) {
    const hfz_handle *x = &m->handles[i];
    if (!x->h)
      continue;
    if (x->stream < 0 || x->stream >= HFZ_MAX_STREAMS ||
        !m->streams[x->stream].attached) {
      snprintf(why, len, "model: handle %#llx names no attached stream",
               (unsigned long long)x->h);
      return -1;
    }
    for (int j = i + 1; j < HFZ_MAX_HANDLES; j++)
      if (m->handles[j].h == x->h) {
        snprintf(why, len, "model: handle %#llx twice",
                 (unsigned long long)x->h);
        return -1;
      }
    for (int g = 0; g < HFZ_MAX_GRAPHS; g++)
      if ((x->guards >> g & 1) && !m->graphs[g].used) {
        snprintf(why, len, "model: handle guarded by a free graph slot");
        return -1;
      }
  }
  for (int i = 0; i < HFZ_MAX_STREAMS; i++) {
    int g = m->streams[i].graph;
    if (g >= 0 && (!m->streams[i].attached || !m->graphs[g].used ||
                   m->graphs[g].stream != i)) {
      snprintf(why, len, "model: stream %d captures under a bad graph", i);
      return -1;
    }
  }
  return 0;
}
