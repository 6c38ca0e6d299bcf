/* trace.h -- the allocation-trace formats read by hippo-replay and
 * hippo-bench (workload C), parsed in one place.
 *
 * A trace is a CSV file.  Its first line that is neither blank nor a `#`
 * comment is the header, which names the format:
 *
 * hippo's own, header `op,id,size,stream`, one event per line:
 *
 *   a,ID,SIZE,STREAM      reserve SIZE bytes under ID on trace stream STREAM
 *   f,ID[,SIZE[,STREAM]]  release ID (size and stream may be empty; they are
 *                         checked to be numbers but otherwise ignored: the
 *                         release goes to the stream that reserved ID)
 *
 * ID is any 64-bit unsigned decimal number, live at most once at a time.
 * STREAM is 0 .. TRACE_MAX_STREAMS-1.
 *
 * RMM's (rmm::mr::logging_resource_adaptor), header
 * `Thread,Time,Action,Pointer,Size,Stream`, one line per call:
 *
 *   THREAD,TIME,allocate,POINTER,SIZE,STREAM          a reservation
 *   THREAD,TIME,allocate failure,POINTER,SIZE,STREAM  counted, not an event
 *   THREAD,TIME,free,POINTER,SIZE,STREAM              a release
 *
 * (`deallocate`, which RMM's user guide shows, is read as `free`.)  THREAD
 * and TIME are not read.  POINTER and STREAM are hexadecimal, with or
 * without 0x (RMM wrote `{}` of fmt, 0x7f..., before its rapids-logger
 * switch, then `%llx`, 7f..., and now `%p`, 0x7f...), or `(nil)`, glibc's
 * `%p` of nullptr: 0; SIZE is decimal.  A pointer is an id
 * while live: freed and allocated again, it is a new reservation.  Each
 * distinct STREAM value of an `allocate` becomes trace stream 0, 1, ... in
 * order of first use (at most TRACE_MAX_STREAMS of them); a free goes to
 * the stream that allocated its pointer.  Pointer 0 (RMM's answer to a
 * 0-byte request, and the free of it) is no event either: counted.
 *
 * In both: blank lines and lines starting with `#` are skipped (they still
 * count for line numbers); spaces and tabs around fields and a CR before
 * the newline are ignored; a line (comments too) has at most
 * TRACE_MAX_LINE bytes.  "-" as a path reads stdin.
 *
 * The parser validates the whole trace: any error is printed to stderr as
 * `PATH:LINE: REASON` (one line, naming the field and what to write
 * instead) and parsing stops there.  Lenient parsing (trace_options)
 * skips a bad line instead, counts it and keeps the first message; what
 * cannot be skipped still stops it: no header or an unknown one, too many
 * lines or reservations, out of host memory.
 */
#ifndef HIPPO_TRACE_H
#define HIPPO_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TRACE_MAX_STREAMS 1024u /* stream numbers are 0 .. this - 1 */
#define TRACE_MAX_LINE 4096u    /* bytes on a line, without CR and LF */
#define TRACE_CUT_LINE (16u << 20) /* a first line read no further */
#define TRACE_HEADER "op,id,size,stream"
#define TRACE_RMM_HEADER "Thread,Time,Action,Pointer,Size,Stream"
#define TRACE_MESSAGE_MAX 512u  /* "PATH:LINE: REASON" as kept, with NUL */

enum trace_op { TRACE_RESERVE = 0, TRACE_RELEASE = 1 };

enum trace_format { TRACE_FORMAT_HIPPO = 0, TRACE_FORMAT_RMM = 1 };

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
 * stream_used[s] iff some TRACE_RESERVE event has stream s;
 * stream_order[0 .. streams) lists those streams once each, in order of
 * first use; peak_live is the largest sum of the sizes of the reservations
 * live at once, replaying the events in order (UINT64_MAX if it does not
 * fit); skipped == 0 unless parsed leniently, and first_skipped is "" iff
 * skipped == 0. */
struct trace {
  struct trace_event *events;
  size_t count, cap;
  uint32_t slots;
  uint64_t reserves, releases;
  bool stream_used[TRACE_MAX_STREAMS];
  uint16_t stream_order[TRACE_MAX_STREAMS];
  uint32_t streams;
  enum trace_format format;
  uint64_t peak_live;
  uint64_t alloc_failures; /* RMM: `allocate failure` lines */
  uint64_t null_lines;     /* RMM: allocate and free lines of pointer 0 */
  uint64_t skipped;        /* lenient: bad lines skipped */
  char first_skipped[TRACE_MESSAGE_MAX]; /* the first: "PATH:LINE: REASON" */
};

/* How to parse.  A NULL `const struct trace_options *` is all defaults:
 * strict, no progress. */
struct trace_options {
  bool lenient; /* skip and count bad lines (see above) */
  /* When not NULL: called with the bytes parsed so far and the total,
   * every 65536 lines. */
  void (*progress)(void *arg, size_t done, size_t total);
  /* When not NULL: called before a message goes to stderr, so the caller
   * erases the progress line it drew and the message starts a line. */
  void (*progress_end)(void *arg);
  void *progress_arg;
  /* Set by trace_load_with: buf ends where reading stopped early (what
   * was read cannot begin a trace), not at the end of the file, so the
   * last line's length is a lower bound. */
  bool cut;
};

/* Parses buf[0 .. len) (NUL-terminated; modified in place) into *t, which
 * must be zeroed.  PATH names the trace in messages; opt may be NULL.
 * false: a message was printed and t holds no events. */
bool trace_parse(const char *path, char *buf, size_t len,
                 const struct trace_options *opt, struct trace *t);

/* Reads PATH ("-": stdin) and parses it into *t (zeroed first); reading
 * stops early where what was read so far cannot begin a trace (no header
 * before the first other line; a first line of NUL bytes or longer than
 * TRACE_CUT_LINE), so such a file is refused without being read whole.
 * false: a message was printed (`PROG: cannot open trace ...` for I/O, `PATH:LINE:
 * REASON` for the format) and t holds no events.  trace_load is
 * trace_load_with(..., NULL, ...): strict. */
bool trace_load(const char *prog, const char *path, struct trace *t);
bool trace_load_with(const char *prog, const char *path,
                     const struct trace_options *opt, struct trace *t);

/* Frees the events of a loaded trace. */
void trace_free(struct trace *t);

/* The reservations of blocks the trace never frees (a training step
 * replayed again makes them once: hippo-replay --steps, hippo-bench F):
 * once[i] for event i, to free(); NULL without host memory. */
bool *trace_never_freed(const struct trace *t);

#endif /* HIPPO_TRACE_H */
