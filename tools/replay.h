/* replay.h -- what hippo-replay's three files share (tools/hippo-replay.c:
 * options, output files, main; tools/replay.c: the session and the
 * replay loop; tools/replay_report.c: the text summary and the JSON).
 */
#ifndef HIPPO_TOOLS_REPLAY_H
#define HIPPO_TOOLS_REPLAY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "hippo.h"
#include "steps.h"
#include "timeline.h"
#include "toolutil.h"
#include "trace.h"

/* Exit status (hippo-replay.c's top comment). */
enum exit_code {
  EXIT_OK = 0,
  EXIT_INPUT = 1,
  EXIT_USAGE = 2,
  EXIT_STRICT = 3,
  EXIT_CHECK = 4,
  EXIT_HIPPO = 5
};

enum policy { RELOCATE_WANTED, RELOCATE_NEVER, RELOCATE_EVERY };

/* ------------------------------------------------------------------------ */
/* Options. */

struct options {
  struct tool_device_options dev; /* --plugin --backend --capacity --layout */
  bool check, strict, quiet;
  bool lenient;                   /* --lenient: skip bad trace lines */
  enum policy policy;             /* --relocate */
  uint64_t every;                 /* explicit-every=N */
  const char *json;               /* --json FILE */
  const char *svg;                /* --svg FILE */
  uint32_t steps;                 /* --steps N (0: not given, one pass) */
  const char *trace;
};


/* ------------------------------------------------------------------------ */
/* The replay. */

/* Everything opened for a replay.
 * Invariants: mgr[s] is non-NULL iff trace stream s is used; on HIP every
 * used mgr[s] is the same manager (on the NULL stream), else each used s has
 * its own manager on native[s], an emulated stream.  handles[slot] is the
 * live handle of that reservation, or 0 when it failed, was released, or is
 * not reached yet. */
struct session {
  void *lib;
  const hippo_api *api;
  hippo_device *dev;
  hippo_backend backend; /* resolved */
  hippo_stream *mgr[TRACE_MAX_STREAMS];
  void *native[TRACE_MAX_STREAMS];
  bool emulated[TRACE_MAX_STREAMS]; /* native[s] came from emu_stream_create */
  hippo_stream *attached[TRACE_MAX_STREAMS]; /* distinct managers, to detach */
  uint32_t attached_count;
  hippo_handle *handles;
  struct timeline *timeline; /* --svg: the samples, else NULL */
  char backend_note[160]; /* why DRY instead of HOST; "" when it is not */
};

/* Results of the replay loop. */
struct results {
  uint64_t failed_reserves, skipped_releases, failed_releases, oom_count;
  uint64_t live_bytes, peak_live_bytes, live_at_end;
  uint32_t first_fail_line;
  hippo_status first_fail_status;
  char first_fail_error[512];
  uint32_t first_release_fail_line;
  hippo_status first_release_fail_status;
  char first_release_fail_error[512];
  double wall_s;
  struct step_figures *steps; /* --steps: one per step, else NULL */
};


/* The progress line, on stderr while it is a terminal (and not --quiet),
 * for a long phase: reading the trace, replaying it.  Redrawn after a `\r`
 * at most every PROGRESS_PERIOD seconds, erased when the phase ends, so
 * what follows starts on a clean line.
 * Invariants: width is the length of the line on the screen (0: none);
 * phase_long says the phase showed progress from its start. */
#define PROGRESS_EVENTS 1000000u /* a longer replay shows progress at once */
#define PROGRESS_AFTER 1.0       /* else, once a phase has run this long */
#define PROGRESS_PERIOD 0.25     /* seconds between redraws */

struct progress {
  bool enabled; /* stderr is a terminal, not --quiet */
  bool phase_long;
  double t0, last;
  int width;
};

/* The progress line (replay.c): a phase begins (`events`: 0, not known
 * yet) and ends; the trace reader's callbacks (tools/trace.h). */
void progress_begin(struct progress *pg, uint64_t events);
void progress_end(struct progress *pg);
void progress_reading(void *arg, size_t done, size_t total);
void progress_reading_end(void *arg);

/* The session (replay.c): opened (the plugin, the device, a manager per
 * trace stream), the trace replayed into *r, closed; each answers an
 * exit status (messages printed). */
int session_open(struct session *s, const struct options *o,
                        const struct trace *t);
int replay(struct session *s, const struct options *o,
                  const struct trace *t, struct results *r,
                  struct progress *pg);
int session_close(struct session *s, const struct trace *t);

/* The --relocate policy as the summary names it (replay_report.c). */
const char *replay_policy_name(const struct options *o);
/* The summary as `key: value` lines, and the figures as one JSON object
 * (replay_report.c). */
void print_summary(FILE *out, const struct session *s,
                          const struct options *o,
                          const struct trace *t, const struct results *r,
                          const char *plugin, bool have_usage,
                          const hippo_usage *u, bool have_counters,
                          const hippo_emu_counters *c);
void write_json(FILE *f, const struct session *s,
                       const struct options *o, const struct trace *t,
                       const struct results *r, const hippo_usage *u,
                       bool have_counters, const hippo_emu_counters *c);

#endif /* HIPPO_TOOLS_REPLAY_H */
