/* model.h -- a reference model of what a host runtime can observe of hippo
 * through its ABI, for the fuzz driver (driver.c).
 *
 * The model knows nothing of pools, pages or slices.  It keeps what the
 * ABI promises:
 *  - the attached streams, whether each captures (and under which graph),
 *    its persistent-window depth and how it learns of captures;
 *  - every live reservation: its handle, stream, requested size, the seed
 *    of the pattern its bytes hold, whether it is persistent, the last
 *    address seen, the graphs that guard it and the streams that use it
 *    (record_use);
 *  - the released slices graphs still guard (no reservation may get their
 *    bytes until the graph is retired);
 *  - the graphs: whether hippo guarded something under each (so whether
 *    graph_retire must succeed);
 *  - the layout(s) that may be in force, as the figures a status depends
 *    on: the largest request a reservation may make, whether a pool is
 *    capped, an ARENA or VIRTUAL, the largest page a pool may take.
 *
 * and, from that, which statuses each call may answer (a bit set,
 * HFZ_ST(status)).  Where hippo's answer depends on what the model does
 * not keep (fragmentation, which page a slice went to), the set holds every
 * status the ABI documents for it; where it does not (a bad handle, a
 * capture, a window not open, a layout in use) the set has one member.
 *
 * Invariants (hfz_model_check):
 *  - every live handle names an attached stream, is non-zero and unique;
 *  - a graph bit set in a mask names a graph slot in use;
 *  - a stream captures under at most one graph, and that graph's slot
 *    names the stream;
 *  - persistent depth is what begin/end calls left.
 */
#ifndef HIPPO_FUZZ_MODEL_H
#define HIPPO_FUZZ_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "hippo.h"

#define HFZ_MAX_STREAMS 6
#define HFZ_MAX_HANDLES 40
#define HFZ_MAX_GRAPHS 64
#define HFZ_MAX_RANGES 2048
#define HFZ_MAX_STALE 64

#define HFZ_ST(s) (UINT32_C(1) << (s))
typedef uint32_t hfz_statuses; /* a set of hippo statuses */

/* How hippo learns whether a stream captures (capture_announce). */
enum hfz_capture_mode { HFZ_WORD, HFZ_ASK, HFZ_ANNOUNCED };

typedef struct hfz_stream {
  bool attached;
  void *native;          /* NULL: the default stream */
  hippo_stream *s;
  int graph;             /* graph slot it captures under, or -1 */
  uint32_t depth;        /* persistent windows open */
  enum hfz_capture_mode mode;
  uint64_t peak;         /* highest bytes_in_use since attach */
} hfz_stream;

typedef struct hfz_handle {
  hippo_handle h;        /* 0: the slot is free */
  int stream;
  uint64_t size;
  uint64_t seed;         /* byte i holds tu_pattern(seed, i) */
  bool persistent;
  uint64_t addr;         /* last address resolve gave */
  uint64_t guards;       /* graph slots guarding it (bit per slot) */
  uint32_t users;        /* streams that record_use'd it (bit per slot) */
} hfz_handle;

/* Released bytes some graph still guards. */
typedef struct hfz_range {
  uint64_t addr, size;
  uint64_t guards;
} hfz_range;

enum hfz_known { HFZ_UNKNOWN, HFZ_MAYBE, HFZ_KNOWN };

typedef struct hfz_graph {
  bool used;
  uint64_t id;           /* the capture id */
  int stream;            /* capturing stream, or -1 once ended */
  enum hfz_known known;  /* did hippo guard something under it? */
} hfz_graph;

/* What a status of reserve depends on in a layout. */
typedef struct hfz_layout_facts {
  uint64_t largest;      /* largest dynamic request a pool accepts */
  uint64_t page_max;     /* largest page a pool may take */
  bool capped;           /* a pool has max_pool_size */
  bool arena;            /* an ARENA pool */
  bool virt;             /* a VIRTUAL pool: its range may be too scattered
                            (or too small) for a request the device's
                            memory would hold */
} hfz_layout_facts;

typedef struct hfz_model {
  uint64_t capacity, alignment;
  bool fixed_layout;
  hfz_layout_facts lay[2]; /* lay[1] only while which one is unknown */
  int nlay;
  hfz_stream streams[HFZ_MAX_STREAMS];
  hfz_handle handles[HFZ_MAX_HANDLES];
  hfz_range ranges[HFZ_MAX_RANGES];
  int nranges;
  hfz_graph graphs[HFZ_MAX_GRAPHS];
  hippo_handle stale[HFZ_MAX_STALE]; /* released handles (ring) */
  unsigned nstale;
  bool holds_maybe;     /* record_use'd slices released (may wait) */
  bool ranges_lost;     /* a guarded range found no room in ranges */
} hfz_model;

void hfz_model_init(hfz_model *m, uint64_t capacity, uint64_t alignment,
                    bool fixed_layout, const hfz_layout_facts *lay);

/* Streams. */
int hfz_stream_free_slot(const hfz_model *m);
bool hfz_any_capturing(const hfz_model *m);
uint64_t hfz_stream_bytes(const hfz_model *m, int stream);
uint64_t hfz_stream_count(const hfz_model *m, int stream);
/* Detach: every reservation of the stream is dropped, and so are its uses
 * of the others' (its queue ran when its native stream went). */
void hfz_stream_drop(hfz_model *m, int stream);
/* A detach that failed after releasing them: the stream's reservations
 * are dropped, but it stays attached, so what it uses of the others'
 * stays in use: its queued work may still read or write those bytes. */
void hfz_stream_release_all(hfz_model *m, int stream);

/* Reservations. */
hfz_handle *hfz_handle_find(hfz_model *m, hippo_handle h);
hfz_handle *hfz_handle_add(hfz_model *m);
/* The stream's capture (if any) guards a reservation it touches. */
void hfz_touch(hfz_model *m, hfz_handle *x);
void hfz_release(hfz_model *m, hfz_handle *x);
uint64_t hfz_dynamic_bytes(const hfz_model *m);
bool hfz_dynamic_guards(const hfz_model *m);
uint64_t hfz_guard_holds(const hfz_model *m);
/* The released range a graph still guards that [addr, addr+size)
 * overlaps, or NULL. */
const hfz_range *hfz_guarded_overlap(const hfz_model *m, uint64_t addr,
                                     uint64_t size);

/* Graphs. */
int hfz_graph_begin(hfz_model *m, int stream, uint64_t id);
void hfz_graph_end(hfz_model *m, int stream);
void hfz_graph_retired(hfz_model *m, int g);
int hfz_graph_by_id(const hfz_model *m, uint64_t id);

/* Expectations. */
hfz_statuses hfz_expect_reserve(const hfz_model *m, int stream, uint64_t size,
                                hippo_mode mode, uint64_t bytes_held);

/* The invariants above; 0, or -1 with `why`. */
int hfz_model_check(const hfz_model *m, char *why, unsigned len);

#endif /* HIPPO_FUZZ_MODEL_H */
