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

#include "replay.h"

static const char *const usage_line =
    "usage: hippo-replay [--plugin PATH] [--backend auto|host|dry|hip] "
    "[--capacity BYTES] [--layout PRESET|SPEC] "
    "[--relocate never|wanted|explicit-every=N] [--json FILE] [--svg FILE] "
    "[--steps N] [--check] [--strict] [--lenient] [--quiet] TRACE.csv";

/* ------------------------------------------------------------------------ */
/* Options. */


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
          replay_policy_name(&o), t.streams, r.peak_live_bytes,
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

