/* hippo-replay.c -- replay an allocation trace through the hippo plugin.
 *
 *   hippo-replay [--plugin PATH] [--backend auto|host|dry|hip]
 *                [--capacity BYTES]
 *                [--layout PRESET|SPEC]
 *                [--relocate never|wanted|explicit-every=N] [--json FILE]
 *                [--svg FILE] [--steps N] [--check] [--strict] [--lenient]
 *                [--quiet] TRACE.csv
 *
 * The trace is a CSV file; its header line names the format (tools/trace.h
 * has both): hippo's own, `op,id,size,stream`, one event per line:
 *
 *   a,ID,SIZE,STREAM   reserve SIZE bytes under ID on trace stream STREAM
 *   f,ID[,SIZE[,STREAM]]  release ID (size and stream may be empty; they are
 *                      checked to be numbers but otherwise ignored: the
 *                      release goes to the stream that reserved ID)
 *
 * or the log of RMM's logging_resource_adaptor,
 * `Thread,Time,Action,Pointer,Size,Stream` (allocate, allocate failure,
 * free; pointers are ids while live, each stream value a trace stream).
 * ID is any 64-bit unsigned decimal number, live at most once at a time.
 * STREAM is 0..1023.  Blank lines and lines starting with `#` are skipped
 * (they still count for line numbers).  "-" reads the trace from stdin.
 * A PyTorch memory snapshot becomes hippo's format with
 * tools/torch-snapshot-to-csv.py.  --lenient skips bad event lines
 * (counted, the first named in the summary) instead of refusing the trace.
 * tools/trace.c parses it (hippo-bench's workload C uses the same parser);
 * tools/toolutil.c finds the plugin and parses --backend, --capacity and
 * --layout, as for hippo-info (on HIP, --capacity is a budget: hippo holds
 * at most that much of the GPU).
 *
 * The whole trace is parsed and validated first; only then is a device
 * opened and the events replayed, so the timed loop measures hippo, not the
 * parser.  The parse gives the trace's peak live bytes: when the backend is
 * left to AUTO, AUTO picks HOST and no --capacity is given, a trace whose
 * peak live exceeds the HOST device's capacity replays on DRY instead
 * (README), with a note.  While stderr is a terminal and the trace is long
 * (over 1,000,000 events, or a phase running over a second), a progress
 * line is redrawn there (`\r`) at most 4 times a second; --quiet silences
 * it, the notes and the summary.  Each trace stream gets its own stream
 * manager (an emulated stream
 * on HOST and DRY).  A HIP device has no stream to offer but the default one,
 * and hippo keeps one manager per native stream, so on HIP every trace
 * stream is mapped to a single manager on the default (NULL) stream; the
 * summary says so.
 *
 * --steps N replays the trace N times as the steps of a training loop
 * (tools/steps.h: blocks the trace never frees are made in step 1 only,
 * every other block again in each step) and reports each step: events,
 * peak live and peak mapped (reserved) bytes, the driver calls a real
 * runtime would receive, the host-side waits, and the calls priced with
 * a latency table (steps.c, docs/benchmarks.md); the device's figures
 * are then read after every reservation, so wall time includes that.
 *
 * Relocation policy (--relocate): `wanted` (the default) calls
 * relocate_when_wanted on the stream before every reservation, as a host
 * runtime following README would; `never` relocates nothing; an
 * `explicit-every=N` relocates every stream of the device (reason
 * EXPLICIT) after every N events.
 *
 * The summary goes to stdout as `key: value` lines (to stderr when --json
 * or --svg writes to stdout, `-`; both may not); --json FILE writes the
 * figures as one JSON object as well (keys: README); --svg FILE draws live
 * and reserved bytes (stacked by pool) along the replay, with its
 * relocations and failed reservations (tools/timeline.h).  Both files are
 * opened once the trace has parsed, before the replay, so a path that
 * cannot be written fails at once (exit 1); a replay that fails leaves no
 * file behind.  "layout:" (and
 * the JSON's "layout") is the preset's name, or the canonical text of a
 * --layout spec of pools.  Exit status:
 *   0  replayed (some reservations may have failed; see the summary)
 *   1  the trace is malformed or missing, the plugin or device could not
 *      be used, or a --json / --svg file cannot be written (a message on
 *      stderr; for the trace: TRACE:LINE: REASON)
 *   2  bad usage
 *   3  --strict and at least one reservation failed
 *   4  --check and hippo's bookkeeping check failed after an event
 *   5  a release or a teardown call failed (a hippo bug; please report it)
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hippo.h"
#include "steps.h"
#include "timeline.h"
#include "toolutil.h"
#include "trace.h"

enum exit_code {
  EXIT_OK = 0,
  EXIT_INPUT = 1,
  EXIT_USAGE = 2,
  EXIT_STRICT = 3,
  EXIT_CHECK = 4,
  EXIT_HIPPO = 5
};

static const char *const usage_line =
    "usage: hippo-replay [--plugin PATH] [--backend auto|host|dry|hip] "
    "[--capacity BYTES] [--layout PRESET|SPEC] "
    "[--relocate never|wanted|explicit-every=N] [--json FILE] [--svg FILE] "
    "[--steps N] [--check] [--strict] [--lenient] [--quiet] TRACE.csv";

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

static const char *policy_name(const struct options *o) {
  static char buf[48];
  switch (o->policy) {
  case RELOCATE_NEVER:
    return "never";
  case RELOCATE_EVERY:
    snprintf(buf, sizeof buf, "explicit-every=%" PRIu64, o->every);
    return buf;
  default:
    return "wanted";
  }
}

/* --relocate's argument; false when it is none of the forms. */
static bool parse_policy(const char *arg, struct options *o) {
  const char *prefix = "explicit-every=";
  if (strcmp(arg, "never") == 0) {
    o->policy = RELOCATE_NEVER;
  } else if (strcmp(arg, "wanted") == 0) {
    o->policy = RELOCATE_WANTED;
  } else if (strncmp(arg, prefix, strlen(prefix)) == 0) {
    char *end;
    const char *n = arg + strlen(prefix);
    unsigned long long v;
    if (*n < '0' || *n > '9')
      return false;
    v = strtoull(n, &end, 10);
    if (*end || v == 0 || v == ULLONG_MAX)
      return false;
    o->policy = RELOCATE_EVERY;
    o->every = v;
  } else {
    return false;
  }
  return true;
}

static void print_help(void) {
  printf("%s\n\n", usage_line);
  printf("Replays an allocation trace through the hippo plugin and prints a\n"
         "summary of `key: value` lines.  The trace's header names its "
         "format:\n"
         "  " TRACE_HEADER "                       hippo's own\n"
         "  " TRACE_RMM_HEADER "  RMM's logging_resource_adaptor\n"
         "(a PyTorch memory snapshot: tools/torch-snapshot-to-csv.py).\n\n");
  tool_device_options_help();
  printf(
      "  --relocate POLICY wanted (default: relocate_when_wanted before\n"
      "                    every reservation), never, or explicit-every=N\n"
      "                    (relocate every stream after every N events)\n"
      "  --json FILE       also write the figures as a JSON object to FILE\n"
      "  --svg FILE        also draw live and reserved bytes (stacked by\n"
      "                    pool), relocations and failed reservations along\n"
      "                    the replay as an SVG timeline in FILE\n"
      "                    (FILE - is stdout, for one of the two; the\n"
      "                    summary then goes to stderr)\n"
      "  --steps N         replay the trace N times as training steps\n"
      "                    (blocks it never frees made once) and report\n"
      "                    each step's peaks, driver calls, waits and\n"
      "                    their cost (1 <= N <= 1000)\n"
      "  --check           verify hippo's bookkeeping after every event\n"
      "                    (exit 4 on the first failure)\n"
      "  --strict          exit 3 when any reservation failed\n"
      "  --lenient         skip bad trace lines (counted; the first named in\n"
      "                    the summary) instead of refusing the trace\n"
      "  --quiet           print no summary, no progress, no notes; errors\n"
      "                    still go to stderr\n\n"
      "Exit status: 0 replayed, 1 bad trace / plugin / device / output\n"
      "file, 2 usage,\n"
      "3 failed reservations with --strict, 4 --check failed, 5 a release or\n"
      "teardown call failed.\n");
}

/* Returns -1 to go on, else an exit status. */
static int parse_options(int argc, char **argv, struct options *o) {
  enum {
    OPT_DEVICE = 256,
    OPT_CHECK,
    OPT_STRICT,
    OPT_QUIET,
    OPT_HELP,
    OPT_RELOCATE,
    OPT_JSON,
    OPT_SVG,
    OPT_LENIENT,
    OPT_STEPS
  };
  static const struct option longopts[] = {
      {"plugin", required_argument, NULL, OPT_DEVICE},
      {"backend", required_argument, NULL, OPT_DEVICE},
      {"capacity", required_argument, NULL, OPT_DEVICE},
      {"layout", required_argument, NULL, OPT_DEVICE},
      {"relocate", required_argument, NULL, OPT_RELOCATE},
      {"json", required_argument, NULL, OPT_JSON},
      {"svg", required_argument, NULL, OPT_SVG},
      {"steps", required_argument, NULL, OPT_STEPS},
      {"check", no_argument, NULL, OPT_CHECK},
      {"strict", no_argument, NULL, OPT_STRICT},
      {"quiet", no_argument, NULL, OPT_QUIET},
      {"lenient", no_argument, NULL, OPT_LENIENT},
      {"help", no_argument, NULL, OPT_HELP},
      {NULL, 0, NULL, 0}};
  int c, index = 0;
  const char *bad;

  memset(o, 0, sizeof *o);
  tool_device_options_init(&o->dev);
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+:h", longopts, &index)) != -1) {
    switch (c) {
    case OPT_DEVICE:
      bad = tool_device_option(&o->dev, longopts[index].name, optarg);
      if (bad) {
        tool_usage_error("hippo-replay", usage_line, bad, optarg);
        return EXIT_USAGE;
      }
      break;
    case OPT_RELOCATE:
      if (!parse_policy(optarg, o)) {
        tool_usage_error("hippo-replay", usage_line,
                         "--relocate takes never, wanted or "
                         "explicit-every=N (N >= 1), not",
                         optarg);
        return EXIT_USAGE;
      }
      break;
    case OPT_JSON:
    case OPT_SVG:
      if (!*optarg) {
        tool_usage_error("hippo-replay", usage_line,
                         c == OPT_JSON ? "--json needs a file name (- for "
                                         "stdout)"
                                       : "--svg needs a file name (- for "
                                         "stdout)",
                         NULL);
        return EXIT_USAGE;
      }
      *(c == OPT_JSON ? &o->json : &o->svg) = optarg;
      break;
    case OPT_STEPS: {
      char *end;
      unsigned long v = strtoul(optarg, &end, 10);
      if (*optarg < '0' || *optarg > '9' || *end || v < 1 || v > 1000) {
        tool_usage_error("hippo-replay", usage_line,
                         "--steps takes a number of steps, 1 to 1000, not",
                         optarg);
        return EXIT_USAGE;
      }
      o->steps = (uint32_t)v;
      break;
    }
    case OPT_CHECK:
      o->check = true;
      break;
    case OPT_STRICT:
      o->strict = true;
      break;
    case OPT_QUIET:
      o->quiet = true;
      break;
    case OPT_LENIENT:
      o->lenient = true;
      break;
    case 'h':
    case OPT_HELP:
      print_help();
      return EXIT_OK;
    default:
      tool_bad_option("hippo-replay", usage_line, c, argv);
      return EXIT_USAGE;
    }
  }
  if (argc - optind != 1) {
    const char *extra = argc - optind == 0 ? NULL : argv[optind + 1];
    tool_usage_error("hippo-replay", usage_line,
                     !extra ? "no trace given"
                     : extra[0] == '-' && extra[1]
                         ? "options come before the trace, not after it:"
                         : "more than one trace:",
                     extra);
    return EXIT_USAGE;
  }
  if (o->json && o->svg && strcmp(o->json, "-") == 0 &&
      strcmp(o->svg, "-") == 0) {
    tool_usage_error("hippo-replay", usage_line,
                     "--json - and --svg - would both write to stdout; give "
                     "one of them a file",
                     NULL);
    return EXIT_USAGE;
  }
  if (o->steps && o->svg) {
    tool_usage_error("hippo-replay", usage_line,
                     "--svg draws one pass of the trace; leave out --steps "
                     "or --svg",
                     NULL);
    return EXIT_USAGE;
  }
  o->trace = argv[optind];
  return -1;
}

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

static void copy_error(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src && *src ? src : "(no detail)");
}

/* When AUTO chose HOST (no GPU), nothing asked for a backend or a capacity,
 * and the trace's peak live bytes exceed the HOST device's capacity, HOST
 * would fail reservations for want of emulated memory (and copy real bytes
 * when relocating): the trace replays on DRY instead, whose capacity is the
 * HOST capacity doubled until it holds twice the peak live, room for what
 * hippo holds beyond the live bytes.  *info is updated.  EXIT_OK (a note
 * says so unless --quiet) or EXIT_INPUT (message printed). */
static int dry_fallback(struct session *s, const struct options *o,
                        const struct trace *t, hippo_device_info *info) {
  const hippo_api *api = s->api;
  struct tool_device_options dry = o->dev;
  uint64_t host = info->total_memory, capacity = host;
  hippo_status st;

  while (capacity / 2 < t->peak_live && capacity <= UINT64_MAX / 2)
    capacity *= 2;
  st = api->device_close(s->dev);
  s->dev = NULL;
  if (st != HIPPO_SUCCESS) {
    fprintf(stderr, "hippo-replay: device_close failed: %s: %s\n",
            tool_status_name(api, st), api->last_error());
    return EXIT_INPUT;
  }
  dry.backend = HIPPO_BACKEND_DRY;
  dry.capacity = capacity;
  dry.capacity_given = true;
  if (tool_device_open("hippo-replay", api, &dry, &s->dev) != HIPPO_SUCCESS)
    return EXIT_INPUT;
  memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
  st = api->device_info(s->dev, info);
  if (st != HIPPO_SUCCESS) {
    fprintf(stderr, "hippo-replay: device_info failed: %s: %s\n",
            tool_status_name(api, st), api->last_error());
    return EXIT_INPUT;
  }
  s->backend = info->backend;
  snprintf(s->backend_note, sizeof s->backend_note,
           "the trace's peak live %s%" PRIu64 " B exceeds the HOST "
           "capacity %" PRIu64 " B",
           /* trace.h: a peak past 64 bits is kept as UINT64_MAX */
           t->peak_live == UINT64_MAX ? "at least " : "", t->peak_live, host);
  if (!o->quiet)
    fprintf(stderr,
            "hippo-replay: note: %s: replaying on DRY, capacity %" PRIu64
            " B (--backend host or --capacity keep HOST)\n",
            s->backend_note, capacity);
  return EXIT_OK;
}

/* Opens the device and attaches the managers.  EXIT_OK or EXIT_INPUT. */
static int session_open(struct session *s, const struct options *o,
                        const struct trace *t) {
  const hippo_api *api = s->api;
  hippo_device_info info;
  hippo_status st;
  uint32_t i;

  if (tool_device_open("hippo-replay", api, &o->dev, &s->dev) !=
      HIPPO_SUCCESS)
    return EXIT_INPUT;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  st = api->device_info(s->dev, &info);
  if (st != HIPPO_SUCCESS) {
    fprintf(stderr, "hippo-replay: device_info failed: %s: %s\n",
            tool_status_name(api, st), api->last_error());
    return EXIT_INPUT;
  }
  s->backend = info.backend;
  if (o->dev.backend == HIPPO_BACKEND_AUTO && !o->dev.capacity_given &&
      info.backend == HIPPO_BACKEND_HOST && t->peak_live > info.total_memory) {
    int rc = dry_fallback(s, o, t, &info);
    if (rc != EXIT_OK)
      return rc;
  }
  if (o->policy == RELOCATE_EVERY && !HIPPO_API_HAS(api, relocate_with)) {
    fprintf(stderr, "hippo-replay: --relocate explicit-every needs a plugin "
                    "with relocate_with (this one is older)\n");
    return EXIT_INPUT;
  }
  if (!o->quiet)
    tool_capacity_note("hippo-replay", &o->dev, &info);

  for (i = 0; i < t->streams; i++) {
    uint16_t ts = t->stream_order[i];
    hippo_stream *m;
    void *native = NULL;

    if (s->backend == HIPPO_BACKEND_HIP && s->attached_count > 0) {
      s->mgr[ts] = s->attached[0];
      continue;
    }
    if (s->backend != HIPPO_BACKEND_HIP) {
      st = tool_emu(api)->stream_create(s->dev, &native);
      if (st != HIPPO_SUCCESS) {
        fprintf(stderr,
                "hippo-replay: cannot create an emulated stream for trace "
                "stream %u: %s: %s\n",
                (unsigned)ts, tool_status_name(api, st), api->last_error());
        return EXIT_INPUT;
      }
      s->native[ts] = native;
      s->emulated[ts] = true;
    }
    st = api->stream_attach(s->dev, native, &m);
    if (st != HIPPO_SUCCESS) {
      fprintf(stderr,
              "hippo-replay: cannot attach a manager for trace stream %u: "
              "%s: %s\n",
              (unsigned)ts, tool_status_name(api, st), api->last_error());
      return EXIT_INPUT;
    }
    s->mgr[ts] = m;
    s->attached[s->attached_count++] = m;
  }
  return EXIT_OK;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------ */
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

/* Whether a phase of `events` events (0: not known yet) that has run for
 * `elapsed` seconds shows progress. */
static bool progress_wanted(uint64_t events, double elapsed) {
  return events > PROGRESS_EVENTS || elapsed > PROGRESS_AFTER;
}

static void progress_begin(struct progress *pg, uint64_t events) {
  pg->t0 = now_s();
  pg->last = 0;
  pg->phase_long = progress_wanted(events, 0.0);
}

/* Redraws the line as `hippo-replay: WHAT: P% (DONE of TOTAL UNIT)` when
 * due; TOTAL 0 is 100 %. */
static void progress_tick(struct progress *pg, const char *what,
                          uint64_t done, uint64_t total, const char *unit) {
  double now = now_s();
  char line[160];
  int n;

  if (!pg->enabled ||
      (!pg->phase_long && !progress_wanted(0, now - pg->t0)) ||
      now - pg->last < PROGRESS_PERIOD)
    return;
  pg->last = now;
  n = snprintf(line, sizeof line,
               "hippo-replay: %s: %3.0f%% (%" PRIu64 " of %" PRIu64 " %s)",
               what, total ? 100.0 * (double)done / (double)total : 100.0,
               done, total, unit);
  if (n < 0)
    return;
  /* Spaces cover what a longer line left. */
  fprintf(stderr, "\r%s%*s", line, pg->width > n ? pg->width - n : 0, "");
  fflush(stderr);
  if (n > pg->width)
    pg->width = n;
}

static void progress_end(struct progress *pg) {
  if (pg->width > 0) {
    fprintf(stderr, "\r%*s\r", pg->width, "");
    fflush(stderr);
  }
  pg->width = 0;
}

/* trace_options.progress: bytes of the trace parsed. */
static void progress_reading(void *arg, size_t done, size_t total) {
  progress_tick(arg, "reading the trace", done, total, "bytes");
}

/* The trace names a bad line: the reading's line goes first. */
static void progress_reading_end(void *arg) { progress_end(arg); }

/* The timed loop: the trace once, or --steps times.  EXIT_OK, or
 * EXIT_CHECK / EXIT_INPUT (message printed). */
static int replay(struct session *s, const struct options *o,
                  const struct trace *t, struct results *r,
                  struct progress *pg) {
  const hippo_api *api = s->api;
  const struct trace_event *ev = t->events;
  hippo_handle *handles = s->handles;
  size_t i, n = t->count;
  uint32_t steps = o->steps ? o->steps : 1;
  bool *once = NULL;
  double t0;
  int rc = EXIT_OK;

  if (o->steps) {
    r->steps = calloc(steps, sizeof *r->steps);
    once = steps > 1 ? trace_never_freed(t) : NULL;
    if (!r->steps || (steps > 1 && !once)) {
      fprintf(stderr, "hippo-replay: out of host memory for --steps\n");
      free(once);
      return EXIT_INPUT;
    }
  }
  progress_begin(pg, n * steps);
  t0 = now_s();
  for (uint32_t step = 0; step < steps && rc == EXIT_OK; step++) {
    struct step_figures *sf = r->steps ? &r->steps[step] : NULL;
    hippo_emu_counters c0;
    if (sf)
      step_begin(sf, api, s->dev, s->backend != HIPPO_BACKEND_HIP, step + 1,
                 r->live_bytes, &c0);
    for (i = 0; i < n; i++) {
      const struct trace_event *e = &ev[i];
      hippo_stream *m = s->mgr[e->stream];
      hippo_status st;

      if (pg->enabled && (i & 4095) == 0) /* a clock read per 4096 events */
        progress_tick(pg, "replaying", step * n + i, n * steps, "events");
      if (step && once && once[i])
        continue; /* made in step 1, still live */
      if (sf)
        sf->events++;

      if (e->op == TRACE_RESERVE) {
        hippo_handle h = 0;
        if (o->policy == RELOCATE_WANTED)
          (void)api->relocate_when_wanted(m); /* failures: in the report */
        st = api->reserve(m, e->size, HIPPO_MODE_AUTO, &h);
        if (st == HIPPO_SUCCESS) {
          handles[e->slot] = h;
          r->live_bytes += e->size;
          if (r->live_bytes > r->peak_live_bytes)
            r->peak_live_bytes = r->live_bytes;
          if (sf)
            step_sample(sf, api, s->dev, r->live_bytes);
        } else {
          handles[e->slot] = 0;
          r->oom_count += st == HIPPO_OUT_OF_MEMORY;
          if (r->failed_reserves++ == 0) {
            r->first_fail_line = e->line;
            r->first_fail_status = st;
            copy_error(r->first_fail_error, sizeof r->first_fail_error,
                       api->last_error());
          }
        }
      } else {
        hippo_handle h = handles[e->slot];
        if (h == 0) {
          r->skipped_releases++;
        } else {
          handles[e->slot] = 0;
          r->live_bytes -= e->size;
          st = api->release(m, h);
          if (st != HIPPO_SUCCESS && r->failed_releases++ == 0) {
            r->first_release_fail_line = e->line;
            r->first_release_fail_status = st;
            copy_error(r->first_release_fail_error,
                       sizeof r->first_release_fail_error,
                       api->last_error());
          }
        }
      }
      if (o->policy == RELOCATE_EVERY && (i + 1) % o->every == 0)
        (void)api->relocate_with(s->dev, NULL, HIPPO_RELOCATE_EXPLICIT,
                                 NULL);
      if (s->timeline)
        timeline_event(s->timeline, i, e->stream, e->op == TRACE_RESERVE,
                       e->op == TRACE_RESERVE && handles[e->slot] == 0,
                       r->live_bytes,
                       o->policy == RELOCATE_EVERY &&
                           (i + 1) % o->every == 0);
      if (o->check) {
        st = api->check(s->dev);
        if (st != HIPPO_SUCCESS) {
          progress_end(pg);
          fprintf(stderr,
                  "%s:%" PRIu32 ": hippo's bookkeeping check failed after "
                  "this event: %s: %s\n  (a hippo bug: please report it "
                  "with the trace)\n",
                  o->trace, e->line, tool_status_name(api, st),
                  api->last_error());
          rc = EXIT_CHECK;
          break;
        }
      }
    }
    if (sf)
      step_end(sf, api, s->dev, &c0);
  }
  r->wall_s = now_s() - t0;
  progress_end(pg);
  free(once);
  return rc;
}

/* Releases what is still live, detaches, closes, unloads.
 * EXIT_OK or EXIT_HIPPO (messages printed). */
static int session_close(struct session *s, const struct trace *t) {
  const hippo_api *api = s->api;
  int rc = EXIT_OK;
  hippo_status st;
  size_t i;

  if (s->dev && s->handles) {
    for (i = 0; i < t->count; i++) {
      const struct trace_event *e = &t->events[i];
      hippo_handle h;
      if (e->op != TRACE_RESERVE || (h = s->handles[e->slot]) == 0)
        continue;
      s->handles[e->slot] = 0;
      st = api->release(s->mgr[e->stream], h);
      if (st != HIPPO_SUCCESS && rc == EXIT_OK) {
        fprintf(stderr,
                "hippo-replay: releasing the reservation of line %" PRIu32
                " at the end failed: %s: %s\n",
                e->line, tool_status_name(api, st), api->last_error());
        rc = EXIT_HIPPO;
      }
    }
  }
  for (i = 0; i < s->attached_count; i++) {
    st = api->stream_detach(s->attached[i]);
    if (st != HIPPO_SUCCESS) {
      fprintf(stderr, "hippo-replay: stream_detach failed: %s: %s\n",
              tool_status_name(api, st), api->last_error());
      rc = EXIT_HIPPO;
    }
  }
  s->attached_count = 0;
  for (i = 0; i < TRACE_MAX_STREAMS; i++) {
    if (!s->emulated[i])
      continue;
    s->emulated[i] = false;
    st = tool_emu(api)->stream_destroy(s->dev, s->native[i]);
    if (st != HIPPO_SUCCESS) {
      fprintf(stderr, "hippo-replay: emu_stream_destroy failed: %s: %s\n",
              tool_status_name(api, st), api->last_error());
      rc = EXIT_HIPPO;
    }
  }
  if (s->dev) {
    st = api->device_close(s->dev);
    if (st != HIPPO_SUCCESS) {
      fprintf(stderr, "hippo-replay: device_close failed: %s: %s\n",
              tool_status_name(api, st), api->last_error());
      rc = EXIT_HIPPO;
    }
    s->dev = NULL;
  }
  if (s->lib)
    dlclose(s->lib);
  s->lib = NULL;
  return rc;
}

static void print_summary(FILE *out, const struct session *s,
                          const struct options *o,
                          const struct trace *t, const struct results *r,
                          const char *plugin, bool have_usage,
                          const hippo_usage *u, bool have_counters,
                          const hippo_emu_counters *c) {
  const hippo_api *api = s->api;

  fprintf(out, "trace: %s\n", o->trace);
  if (t->format == TRACE_FORMAT_RMM) {
    fprintf(out, "format: rmm (" TRACE_RMM_HEADER ")\n");
    fprintf(out, "allocate failures: %" PRIu64 " (not replayed)\n",
            t->alloc_failures);
    fprintf(out, "null pointer lines: %" PRIu64 " (not replayed)\n",
            t->null_lines);
  } else {
    fprintf(out, "format: hippo (" TRACE_HEADER ")\n");
  }
  if (o->lenient)
    fprintf(out, "skipped: %" PRIu64 " line%s%s%s%s\n", t->skipped,
            t->skipped == 1 ? "" : "s", t->skipped ? " (first: " : "",
            t->first_skipped, t->skipped ? ")" : "");
  fprintf(out, "plugin: %s\n", plugin);
  if (s->backend_note[0])
    fprintf(out, "backend: %s (%s)\n", tool_backend_name(s->backend),
            s->backend_note);
  else
    fprintf(out, "backend: %s\n", tool_backend_name(s->backend));
  fprintf(out, "layout: %s\n", o->dev.layout.text);
  if (s->backend == HIPPO_BACKEND_HIP)
    fprintf(out, "streams: %" PRIu32 " (1 manager: on HIP every trace stream "
            "maps to the default stream)\n",
            t->streams);
  else
    fprintf(out, "streams: %" PRIu32 " (one manager each)\n", t->streams);
  fprintf(out, "events: %zu\n", t->count);
  fprintf(out, "reservations: %" PRIu64 "\n", t->reserves);
  fprintf(out, "releases: %" PRIu64 "\n", t->releases);
  fprintf(out, "failed reservations: %" PRIu64 "\n", r->failed_reserves);
  if (r->failed_reserves) {
    fprintf(out, "first failed reservation: %s:%" PRIu32 ": %s: %s\n", o->trace,
            r->first_fail_line, tool_status_name(api, r->first_fail_status),
            r->first_fail_error);
    fprintf(out, "releases skipped: %" PRIu64 "\n", r->skipped_releases);
  }
  fprintf(out, "failed releases: %" PRIu64 "\n", r->failed_releases);
  if (r->failed_releases)
    fprintf(out, "first failed release: %s:%" PRIu32 ": %s: %s\n", o->trace,
            r->first_release_fail_line,
            tool_status_name(api, r->first_release_fail_status),
            r->first_release_fail_error);
  fprintf(out, "live at end: %" PRIu64 "\n", r->live_at_end);
  fprintf(out, "peak live bytes: %" PRIu64 "\n", r->peak_live_bytes);
  if (have_usage) {
    fprintf(out, "peak reserved bytes: %" PRIu64 "\n", u->peak_bytes_reserved);
    if (r->peak_live_bytes)
      fprintf(out, "reserved/live ratio: %.3f\n",
              (double)u->peak_bytes_reserved / (double)r->peak_live_bytes);
    else
      fprintf(out, "reserved/live ratio: n/a\n");
  } else {
    fprintf(out, "peak reserved bytes: n/a\nreserved/live ratio: n/a\n");
  }
  if (have_counters) {
    fprintf(out, "driver allocations: %" PRIu64 "\n",
            c->calls[HIPPO_CALL_ALLOC]);
    fprintf(out, "driver frees: %" PRIu64 "\n", c->calls[HIPPO_CALL_FREE]);
    fprintf(out, "allocations mapped: %" PRIu64 "\n",
            c->calls[HIPPO_CALL_VM_MAP]);
    fprintf(out, "allocations unmapped: %" PRIu64 "\n",
            c->calls[HIPPO_CALL_VM_UNMAP]);
    fprintf(out, "peak mapped bytes: %" PRIu64 "\n", c->peak_bytes_mapped);
    fprintf(out, "driver calls per 1000 events: %.1f\n",
            tool_calls_per_1000(c, t->count));
  } else {
    fprintf(out, "driver allocations: n/a\ndriver frees: n/a\n"
                 "allocations mapped: n/a\nallocations unmapped: n/a\n"
                 "peak mapped bytes: n/a\n"
                 "driver calls per 1000 events: n/a\n");
  }
  fprintf(out, "relocation policy: %s\n", policy_name(o));
  if (have_usage) {
    fprintf(out, "relocations: %" PRIu64 "\n", u->relocations);
    fprintf(out, "relocated slices: %" PRIu64 "\n", u->slices_relocated);
    fprintf(out, "relocated bytes: %" PRIu64 "\n", u->bytes_relocated);
  }
  fprintf(out, "out-of-memory reservations: %" PRIu64 "\n", r->oom_count);
  for (uint32_t k = 0; r->steps && k < o->steps; k++)
    step_print_text(out, &r->steps[k]);
  fprintf(out, "wall time: %.6f s%s%s\n", r->wall_s,
          o->check ? " (includes --check after every event)" : "",
          o->svg ? " (includes the --svg samples)" : "");
  fprintf(out, "ns per event: %.1f\n",
          t->count ? r->wall_s * 1e9 / (double)t->count : 0.0);
}

/* Writes `text` as a JSON string, quotes included: valid UTF-8 whatever
 * the bytes (a trace's name or an excerpt of a bad line may hold any, or
 * a character cut at the excerpt's end); each byte that starts no valid
 * UTF-8 sequence becomes U+FFFD. */
static void json_string(FILE *f, const char *text) {
  const unsigned char *p = (const unsigned char *)text;
  fputc('"', f);
  while (*p) {
    size_t n = tool_utf8_length(p);
    if (n == 0) {
      fputs("\\ufffd", f);
      p++;
    } else if (*p == '"' || *p == '\\') {
      fprintf(f, "\\%c", *p++);
    } else if (*p < 0x20 || *p == 0x7f) {
      fprintf(f, "\\u%04x", (unsigned)*p++);
    } else {
      fwrite(p, 1, n, f);
      p += n;
    }
  }
  fputc('"', f);
}

/* Writes the figures as one JSON object to o->json.  EXIT_OK or
 * EXIT_INPUT (message printed). */
static void write_json(FILE *f, const struct session *s,
                       const struct options *o, const struct trace *t,
                       const struct results *r, const hippo_usage *u,
                       bool have_counters, const hippo_emu_counters *c) {
  const hippo_api *api = s->api;
  bool first = true;
  fprintf(f, "{\n  \"trace\": ");
  json_string(f, o->trace);
  fprintf(f, ",\n  \"format\": \"%s\",\n",
          t->format == TRACE_FORMAT_RMM ? "rmm" : "hippo");
  fprintf(f, "  \"allocate_failures\": %" PRIu64 ",\n", t->alloc_failures);
  fprintf(f, "  \"null_pointer_lines\": %" PRIu64 ",\n", t->null_lines);
  fprintf(f, "  \"skipped_lines\": %" PRIu64 ",\n", t->skipped);
  fprintf(f, "  \"first_skipped\": ");
  if (t->skipped)
    json_string(f, t->first_skipped);
  else
    fprintf(f, "null");
  fprintf(f, ",\n  \"backend\": \"%s\",\n", tool_backend_name(s->backend));
  fprintf(f, "  \"backend_note\": ");
  if (s->backend_note[0])
    json_string(f, s->backend_note);
  else
    fprintf(f, "null");
  fprintf(f, ",\n");
  /* The canonical text has only [a-z0-9_:;,=KMGT]: nothing to escape. */
  fprintf(f, "  \"layout\": \"%s\",\n", o->dev.layout.text);
  fprintf(f, "  \"relocate\": \"%s\",\n", policy_name(o));
  fprintf(f, "  \"events\": %zu,\n", t->count);
  fprintf(f, "  \"streams\": %" PRIu32 ",\n", t->streams);
  fprintf(f, "  \"failed_reservations\": %" PRIu64 ",\n", r->failed_reserves);
  fprintf(f, "  \"peak_live_bytes\": %" PRIu64 ",\n", r->peak_live_bytes);
  fprintf(f, "  \"peak_reserved_bytes\": %" PRIu64 ",\n",
          u->peak_bytes_reserved);
  if (r->peak_live_bytes) /* no live byte: undefined, as the summary's n/a */
    fprintf(f, "  \"reserved_to_live\": %.6f,\n",
            (double)u->peak_bytes_reserved / (double)r->peak_live_bytes);
  else
    fprintf(f, "  \"reserved_to_live\": null,\n");
  if (have_counters) {
    fprintf(f, "  \"driver_allocs\": %" PRIu64 ",\n",
            c->calls[HIPPO_CALL_ALLOC]);
    fprintf(f, "  \"driver_frees\": %" PRIu64 ",\n",
            c->calls[HIPPO_CALL_FREE]);
    fprintf(f, "  \"driver_maps\": %" PRIu64 ",\n",
            c->calls[HIPPO_CALL_VM_MAP]);
    fprintf(f, "  \"driver_unmaps\": %" PRIu64 ",\n",
            c->calls[HIPPO_CALL_VM_UNMAP]);
    fprintf(f, "  \"peak_mapped_bytes\": %" PRIu64 ",\n",
            c->peak_bytes_mapped);
    fprintf(f, "  \"driver_calls_per_1000_events\": %.1f,\n",
            tool_calls_per_1000(c, t->count));
  } else {
    fprintf(f, "  \"driver_allocs\": null,\n  \"driver_frees\": null,\n"
               "  \"driver_maps\": null,\n  \"driver_unmaps\": null,\n"
               "  \"peak_mapped_bytes\": null,\n"
               "  \"driver_calls_per_1000_events\": null,\n");
  }
  fprintf(f, "  \"relocated_bytes\": %" PRIu64 ",\n", u->bytes_relocated);
  fprintf(f, "  \"relocated_slices\": %" PRIu64 ",\n", u->slices_relocated);
  fprintf(f, "  \"relocations\": %" PRIu64 ",\n", u->relocations);
  fprintf(f, "  \"oom_count\": %" PRIu64 ",\n", r->oom_count);
  fprintf(f, "  \"wall_seconds\": %.6f,\n", r->wall_s);
  fprintf(f, "  \"ns_per_event\": %.1f,\n",
          t->count ? r->wall_s * 1e9 / (double)t->count : 0.0);
  if (r->steps) {
    fprintf(f, "  \"steps\": [\n");
    for (uint32_t k = 0; k < o->steps; k++)
      step_print_json(f, &r->steps[k], 4, k + 1 == o->steps);
    fprintf(f, "  ],\n");
  }
  fprintf(f, "  \"pools\": [");
  for (uint32_t k = 0; k < s->attached_count; k++) {
    hippo_usage su;
    memset(&su, 0, sizeof su);
    su.struct_size = sizeof su;
    if (api->usage(s->dev, s->attached[k], &su) != HIPPO_SUCCESS)
      continue;
    for (uint32_t i = 0; i < su.pool_count; i++) {
      hippo_pool_report pr;
      memset(&pr, 0, sizeof pr);
      pr.struct_size = sizeof pr;
      if (api->pool_report(s->attached[k], i, &pr, NULL) != HIPPO_SUCCESS)
        continue;
      /* the trace's stream number (attached[k] serves stream_order[k]);
       * on HIP one manager serves every trace stream: the first's */
      fprintf(f,
              "%s\n    {\"stream\": %u, \"index\": %" PRIu32
              ", \"kind\": \"%s\", \"peak_reserved_bytes\": %" PRIu64
              ", \"peak_pages\": %" PRIu64 "}",
              first ? "" : ",", (unsigned)t->stream_order[k], i,
              tool_pool_kind_name(pr.kind), pr.peak_bytes_reserved,
              pr.peak_pages);
      first = false;
    }
  }
  fprintf(f, "%s]\n}\n", first ? "" : "\n  ");
}

/* ---- --json and --svg files -----------------------------------------------
 * Opened before the replay, so a path that cannot be written fails at
 * once.  "-" is stdout.  A regular file (or a path that does not exist
 * yet) is written to a temporary file beside it and renamed over it only
 * once the replay wrote it whole, so a failed run leaves what was there
 * before; anything else (a device such as /dev/null, a FIFO) is written in
 * place and never removed. */
struct output {
  const char *path; /* as given */
  FILE *f;          /* NULL: not open */
  char *tmp;        /* the temporary file renamed to `to`; NULL: in place */
  char *to;         /* path, or the file a symbolic link there names (the
                       link stays a link) */
};

/* The file a path names (`-`: stdout's), as device and inode; false when
 * it names none (yet). */
static bool file_id(const char *path, struct stat *st) {
  if (strcmp(path, "-") == 0)
    return fstat(STDOUT_FILENO, st) == 0;
  return stat(path, st) == 0;
}

static bool same_file(const struct stat *a, const struct stat *b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Refuses outputs that would overwrite the trace, or write into one file
 * twice (--json and --svg naming the same file, also as `-` against
 * /dev/stdout); a character device such as /dev/null may take both.
 * EXIT_USAGE (message printed) or -1. */
static int outputs_check(const struct options *o) {
  const char *name[2] = {"--json", "--svg"}, *path[2] = {o->json, o->svg};
  struct stat trace, id[2];
  bool have_trace = strcmp(o->trace, "-") != 0 && stat(o->trace, &trace) == 0;
  bool have[2];
  char why[160];
  for (int k = 0; k < 2; k++) {
    have[k] = path[k] && file_id(path[k], &id[k]);
    if (have[k] && have_trace && same_file(&id[k], &trace)) {
      snprintf(why, sizeof why,
               "%s %s is the trace itself; it would be overwritten",
               name[k], path[k]);
      tool_usage_error("hippo-replay", usage_line, why, NULL);
      return EXIT_USAGE;
    }
  }
  if (path[0] && path[1] &&
      (strcmp(path[0], path[1]) == 0 ||
       (have[0] && have[1] && same_file(&id[0], &id[1]))) &&
      !(have[0] && S_ISCHR(id[0].st_mode))) {
    snprintf(why, sizeof why,
             "--json %s and --svg %s name the same file; give each its own",
             path[0], path[1]);
    tool_usage_error("hippo-replay", usage_line, why, NULL);
    return EXIT_USAGE;
  }
  return -1;
}

/* The name an output is known by in messages. */
static const char *output_name(const struct output *out) {
  return strcmp(out->path, "-") == 0 ? "stdout" : out->path;
}

/* false: a message was printed. */
static bool output_open(struct output *out, const char *path) {
  struct stat st;
  int fd;
  mode_t mask;
  out->path = path;
  out->tmp = out->to = NULL;
  if (strcmp(path, "-") == 0) {
    out->f = stdout;
    return true;
  }
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    out->f = fopen(path, "w");
    if (out->f)
      return true;
    goto fail;
  }
  /* a file that exists but may not be written is refused, as fopen
   * would; the rename would otherwise replace it */
  if (access(path, F_OK) == 0 && access(path, W_OK) != 0)
    goto fail;
  /* a link to a file: the file is replaced, beside itself */
  out->to = lstat(path, &st) == 0 && S_ISLNK(st.st_mode) ? realpath(path, NULL)
                                                         : strdup(path);
  if (!out->to)
    goto fail;
  out->tmp = malloc(strlen(out->to) + sizeof ".XXXXXX");
  if (!out->tmp) {
    errno = ENOMEM;
    goto fail;
  }
  strcpy(out->tmp, out->to);
  strcat(out->tmp, ".XXXXXX");
  fd = mkstemp(out->tmp);
  if (fd < 0)
    goto fail;
  mask = umask(0);
  umask(mask);
  (void)fchmod(fd, 0666 & ~mask); /* as fopen would have created it */
  out->f = fdopen(fd, "w");
  if (out->f)
    return true;
  (void)close(fd);
  (void)unlink(out->tmp);
fail:
  fprintf(stderr, "hippo-replay: cannot write %s: %s; nothing was "
          "replayed\n", path, strerror(errno));
  free(out->tmp);
  free(out->to);
  out->tmp = out->to = NULL;
  out->f = NULL;
  return false;
}

/* Closes (stdout: flushes) an output.  `wrote` false (the replay failed
 * before writing it): a temporary file is removed, the path keeps what it
 * held.  false: a message naming the output was printed. */
static bool output_close(struct output *out, bool wrote) {
  bool ok;
  if (!out->f)
    return true;
  ok = !ferror(out->f);
  if (out->f == stdout)
    ok = fflush(out->f) == 0 && ok;
  else if (fclose(out->f) != 0)
    ok = false;
  out->f = NULL;
  if (ok && wrote && out->tmp && rename(out->tmp, out->to) != 0)
    ok = false;
  if (!ok && wrote)
    fprintf(stderr, "hippo-replay: cannot write %s: %s\n", output_name(out),
            strerror(errno));
  if (out->tmp && (!ok || !wrote))
    (void)unlink(out->tmp);
  free(out->tmp);
  free(out->to);
  out->tmp = out->to = NULL;
  return ok || !wrote;
}

int main(int argc, char **argv) {
  struct options o;
  struct trace t;
  struct session s;
  struct results r;
  hippo_usage u;
  hippo_emu_counters c;
  bool have_usage = false, have_counters = false;
  const char *plugin;
  int rc, close_rc;
  hippo_status st;
  struct progress pg;
  struct trace_options topt;
  struct output json_out = {NULL, NULL, NULL, NULL},
                svg_out = {NULL, NULL, NULL, NULL};
  FILE *summary;
  bool json_written = false, svg_written = false;

  rc = parse_options(argc, argv, &o);
  if (rc < 0)
    rc = outputs_check(&o);
  if (rc >= 0)
    return rc;

  /* 1. Parse and validate the whole trace before touching hippo. */
  memset(&pg, 0, sizeof pg);
  pg.enabled = !o.quiet && isatty(STDERR_FILENO);
  memset(&topt, 0, sizeof topt);
  topt.lenient = o.lenient;
  if (pg.enabled) {
    topt.progress = progress_reading;
    topt.progress_end = progress_reading_end;
    topt.progress_arg = &pg;
  }
  progress_begin(&pg, 0);
  if (!trace_load_with("hippo-replay", o.trace, &topt, &t)) {
    progress_end(&pg);
    return EXIT_INPUT;
  }
  progress_end(&pg);
  /* The summary keeps stdout to itself unless a file goes there. */
  summary = (o.json && strcmp(o.json, "-") == 0) ||
                    (o.svg && strcmp(o.svg, "-") == 0)
                ? stderr
                : stdout;
  if ((o.json && !output_open(&json_out, o.json)) ||
      (o.svg && !output_open(&svg_out, o.svg))) {
    (void)output_close(&json_out, false);
    trace_free(&t);
    return EXIT_INPUT;
  }

  /* 2. Load the plugin, open the device, attach the managers. */
  memset(&s, 0, sizeof s);
  memset(&r, 0, sizeof r);
  plugin = tool_plugin_path(o.dev.plugin);
  if (tool_load("hippo-replay", plugin, &s.lib, &s.api) != HIPPO_SUCCESS) {
    (void)output_close(&json_out, false);
    (void)output_close(&svg_out, false);
    trace_free(&t);
    return EXIT_INPUT;
  }
  s.handles = calloc(t.slots ? t.slots : 1, sizeof *s.handles);
  if (!s.handles) {
    fprintf(stderr, "hippo-replay: out of host memory for %" PRIu32
            " handles\n", t.slots);
    rc = EXIT_INPUT;
  } else {
    rc = session_open(&s, &o, &t);
  }

  /* --svg: the sampler reads every stream's pools before the first event. */
  if (rc == EXIT_OK && o.svg) {
    s.timeline = timeline_new(s.api, s.dev, s.mgr, s.attached,
                              s.attached_count, t.count);
    if (!s.timeline)
      rc = EXIT_INPUT;
  }

  /* 3. Replay, timed. */
  if (rc == EXIT_OK)
    rc = replay(&s, &o, &t, &r, &pg);

  /* 4. Figures, before teardown changes them. */
  if (rc == EXIT_OK) {
    memset(&u, 0, sizeof u);
    u.struct_size = sizeof u;
    st = s.api->usage(s.dev, NULL, &u);
    have_usage = st == HIPPO_SUCCESS;
    if (!have_usage) {
      fprintf(stderr, "hippo-replay: usage failed: %s: %s\n",
              tool_status_name(s.api, st), s.api->last_error());
      rc = EXIT_HIPPO;
    }
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    have_counters = s.backend != HIPPO_BACKEND_HIP &&
                    tool_emu(s.api)->counters(s.dev, &c) == HIPPO_SUCCESS;
    for (size_t i = 0; i < t.count; i++)
      if (t.events[i].op == TRACE_RESERVE && s.handles[t.events[i].slot])
        r.live_at_end++;
    if (!o.quiet) {
      print_summary(summary, &s, &o, &t, &r, plugin, have_usage, &u,
                    have_counters, &c);
      if ((fflush(summary) != 0 || ferror(summary)) && rc == EXIT_OK) {
        fprintf(stderr, "hippo-replay: cannot write the summary to %s: %s\n",
                summary == stdout ? "stdout" : "stderr", strerror(errno));
        rc = EXIT_INPUT;
      }
    }
    if (json_out.f && have_usage) {
      write_json(json_out.f, &s, &o, &t, &r, &u, have_counters, &c);
      json_written = true;
    }
    if (svg_out.f && have_usage) {
      struct timeline_labels lab = {
          o.trace, o.dev.layout.text, tool_backend_name(s.backend),
          policy_name(&o), t.streams, r.peak_live_bytes,
          u.peak_bytes_reserved};
      timeline_write_svg(s.timeline, svg_out.f, &lab);
      svg_written = true;
    }
    if (r.failed_releases) {
      fprintf(stderr,
              "hippo-replay: %" PRIu64 " release(s) failed; first: %s:%" PRIu32
              ": %s: %s\n  (a hippo bug: please report it with the trace)\n",
              r.failed_releases, o.trace, r.first_release_fail_line,
              tool_status_name(s.api, r.first_release_fail_status),
              r.first_release_fail_error);
      rc = EXIT_HIPPO;
    } else if (rc == EXIT_OK && o.strict && r.failed_reserves) {
      fprintf(stderr,
              "hippo-replay: %" PRIu64 " reservation(s) failed (--strict); "
              "first: %s:%" PRIu32 ": %s: %s\n",
              r.failed_reserves, o.trace, r.first_fail_line,
              tool_status_name(s.api, r.first_fail_status), r.first_fail_error);
      rc = EXIT_STRICT;
    }
  }

  /* The files: in place, or (nothing written: the replay failed) their
   * temporary files removed. */
  if (!output_close(&json_out, json_written) && rc == EXIT_OK)
    rc = EXIT_INPUT;
  if (!output_close(&svg_out, svg_written) && rc == EXIT_OK)
    rc = EXIT_INPUT;

  /* 5. Teardown. */
  close_rc = session_close(&s, &t);
  if (rc == EXIT_OK)
    rc = close_rc;
  timeline_free(s.timeline);
  free(s.handles);
  free(r.steps);
  trace_free(&t);
  return rc;
}
