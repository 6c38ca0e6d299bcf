/* timeline.h -- hippo-replay's --svg: live and reserved bytes sampled
 * along a replay, drawn as a timeline in plain SVG 1.1.
 *
 * The replay calls timeline_event after every event.  The events are cut
 * into at most TIMELINE_MAX_SAMPLES intervals of equal length; each
 * interval keeps its largest live bytes, its largest reserved bytes with
 * the pools' shares at that moment (pool_report of every stream, summed
 * per pool index), the relocations that moved slices in it and its failed
 * reservations.  Taking the largest value of each interval keeps every
 * peak on the chart however long the trace; reserved bytes (pages) always
 * cover live bytes at the same moment, so the reserved curve never dips
 * below the live one.
 *
 * Cost: a usage and one pool_report per pool of the stream after every
 * reservation (pages change only at reservations and relocations: a
 * release never calls the driver), of every stream after a device-wide
 * relocation: about 0.2 us a reservation with 4 pools; the replay's wall
 * time includes it.
 *
 * The drawing (README, "--svg"): a title naming the trace and the layout;
 * two lanes of vertical ticks above the plot, relocations (id
 * "relocations") and failed reservations (id "oom"); the plot: reserved
 * bytes as areas stacked by pool index (group "reserved", one path
 * "reserved-pool-N" per pool that held any page, lowest index at the
 * bottom), their total as a line ("reserved-total"), live bytes as a line
 * ("live"); the axes ("x-axis": events replayed, "y-axis": bytes in binary
 * units, "grid") and a legend ("legend").  No script, no external
 * reference, no library: text escaped for XML, UTF-8.
 */
#ifndef HIPPO_TIMELINE_H
#define HIPPO_TIMELINE_H

#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

#include "hippo.h"
#include "trace.h"

#define TIMELINE_MAX_SAMPLES 2000u /* intervals along the replay, at most */

struct timeline;

/* For a replay of `events` events on `dev`: mgr[s] is the manager of trace
 * stream s (NULL: unused), attached[0 .. attached_count) the distinct
 * managers.  Reads every stream's pools once (the starting point).  NULL:
 * out of host memory (a message was printed). */
struct timeline *timeline_new(const hippo_api *api, hippo_device *dev,
                              hippo_stream *const mgr[TRACE_MAX_STREAMS],
                              hippo_stream *const *attached,
                              uint32_t attached_count, size_t events);

/* After event i (0-based, in order) on trace stream `stream`: `reserve`:
 * it was a reservation, `failed`: one that failed; live_bytes: the bytes
 * live after it; all_streams: a relocation of every stream ran after it. */
void timeline_event(struct timeline *tl, size_t i, uint16_t stream,
                    bool reserve, bool failed, uint64_t live_bytes,
                    bool all_streams);

/* What the title and the legend name. */
struct timeline_labels {
  const char *trace;    /* the trace's path as given */
  const char *layout;   /* a preset's name or the canonical spec */
  const char *backend;  /* "host", "dry", "hip" */
  const char *relocate; /* the relocation policy */
  uint32_t streams;     /* trace streams */
  uint64_t peak_live;   /* the replay's exact peaks */
  uint64_t peak_reserved;
};

/* Writes the SVG to f (the caller opened it and checks ferror when it
 * closes it). */
void timeline_write_svg(const struct timeline *tl, FILE *f,
                        const struct timeline_labels *labels);

void timeline_free(struct timeline *tl);

#endif /* HIPPO_TIMELINE_H */
