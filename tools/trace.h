/* trace.h -- the allocation-trace format read by hippo-replay and
 * hippo-bench (workload C), parsed in one place.
 *
 * A trace is a CSV file with the header line `op,id,size,stream` and one
 * event per line:
 *
 *   a,ID,SIZE,STREAM      reserve SIZE bytes under ID on trace stream STREAM
 *   f,ID[,SIZE[,STREAM]]  release ID (size and stream may be empty; they are
 *                         checked to be numbers but otherwise ignored: the
 *                         release goes to the stream that reserved ID)
 *
 * ID is any 64-bit unsigned decimal number, live at most once at a time.
 * STREAM is 0 .. TRACE_MAX_STREAMS-1.  Blank lines and lines starting with
 * `#` are skipped (they still count for line numbers); spaces and tabs
 * around fields and a CR before the newline are ignored.  "-" as a path
 * reads stdin.
 *
 * The parser validates the whole trace: any error is printed to stderr as
 * `PATH:LINE: REASON` (one line, naming the field and what to write
 * instead) and parsing stops there.
 */
#ifndef HIPPO_TRACE_H
#define HIPPO_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TRACE_MAX_STREAMS 1024u /* stream numbers are 0 .. this - 1 */
#define TRACE_HEADER "op,id,size,stream"

enum trace_op { TRACE_RESERVE = 0, TRACE_RELEASE = 1 };

/* One replayable event.
 * Invariants: op is TRACE_RESERVE or TRACE_RELEASE;
 * stream < TRACE_MAX_STREAMS.  TRACE_RESERVE: slot is the number of
 * TRACE_RESERVE events before this one (slots are dense,
 * 0 .. trace.slots-1).  TRACE_RELEASE: slot, stream and size are those of
 * the earlier TRACE_RESERVE event it frees, and that reservation is live at
 * this point of the trace (not already freed). */
struct trace_event {
  uint64_t size;
  uint32_t slot;
  uint32_t line; /* line number in the trace file, for messages */
  uint16_t stream;
  uint8_t op;
};

/* Invariants: events[0 .. count) are valid, count <= cap;
 * reserves + releases == count; slots == reserves;
 * stream_used[s] iff some event has stream s; stream_order[0 .. streams)
 * lists those streams once each, in order of first use. */
struct trace {
  struct trace_event *events;
  size_t count, cap;
  uint32_t slots;
  uint64_t reserves, releases;
  bool stream_used[TRACE_MAX_STREAMS];
  uint16_t stream_order[TRACE_MAX_STREAMS];
  uint32_t streams;
};

/* Parses buf[0 .. len) (NUL-terminated; modified in place) into *t, which
 * must be zeroed.  PATH names the trace in messages.  false: a message was
 * printed and t holds no events. */
bool trace_parse(const char *path, char *buf, size_t len, struct trace *t);

/* Reads PATH ("-": stdin) and parses it into *t (zeroed first).  false: a
 * message was printed (`PROG: cannot open trace ...` for I/O, `PATH:LINE:
 * REASON` for the format) and t holds no events. */
bool trace_load(const char *prog, const char *path, struct trace *t);

/* Frees the events of a loaded trace. */
void trace_free(struct trace *t);

#endif /* HIPPO_TRACE_H */
