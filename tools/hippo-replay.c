/* hippo-replay.c -- replay an allocation trace through the hippo plugin.
 *
 *   hippo-replay [--plugin PATH] [--backend auto|host|dry|hip]
 *                [--capacity BYTES] [--layout sub_slices|exclusive_pages]
 *                [--check] [--strict] [--quiet] TRACE.csv
 *
 * The trace is a CSV file with the header line `op,id,size,stream` and one
 * event per line:
 *
 *   a,ID,SIZE,STREAM   reserve SIZE bytes under ID on trace stream STREAM
 *   f,ID[,SIZE[,STREAM]]  release ID (size and stream may be empty; they are
 *                      checked to be numbers but otherwise ignored: the
 *                      release goes to the stream that reserved ID)
 *
 * ID is any 64-bit unsigned decimal number, live at most once at a time.
 * STREAM is 0..1023.  Blank lines and lines starting with `#` are skipped
 * (they still count for line numbers).  "-" reads the trace from stdin.
 *
 * The whole trace is parsed and validated first; only then is a device
 * opened and the events replayed, so the timed loop measures hippo, not the
 * parser.  Each trace stream gets its own stream manager (an emulated stream
 * on HOST and DRY).  A HIP device has no stream to offer but the default one,
 * and hippo keeps one manager per native stream, so on HIP every trace
 * stream is mapped to a single manager on the default (NULL) stream; the
 * summary says so.
 *
 * The summary goes to stdout as `key: value` lines.  Exit status:
 *   0  replayed (some reservations may have failed; see the summary)
 *   1  the trace is malformed or missing, or the plugin or device could not
 *      be used (a message on stderr; for the trace: TRACE:LINE: REASON)
 *   2  bad usage
 *   3  --strict and at least one reservation failed
 *   4  --check and hippo's bookkeeping check failed after an event
 *   5  a release or a teardown call failed (a hippo bug; please report it)
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hippo.h"

/* The Makefile defines both; these keep a stand-alone compile working. */
#ifndef HIPPO_BUILD_PLUGIN
#define HIPPO_BUILD_PLUGIN "plugin/.libs/hippo.so"
#endif
#ifndef HIPPO_INSTALLED_PLUGIN
#define HIPPO_INSTALLED_PLUGIN "/usr/local/lib/hippo/hippo.so"
#endif

enum exit_code {
  EXIT_OK = 0,
  EXIT_INPUT = 1,
  EXIT_USAGE = 2,
  EXIT_STRICT = 3,
  EXIT_CHECK = 4,
  EXIT_HIPPO = 5
};

#define MAX_STREAMS 1024u /* trace stream numbers are 0 .. MAX_STREAMS-1 */
#define TRACE_HEADER "op,id,size,stream"

static const char *const usage_line =
    "usage: hippo-replay [--plugin PATH] [--backend auto|host|dry|hip] "
    "[--capacity BYTES] [--layout sub_slices|exclusive_pages] [--check] "
    "[--strict] [--quiet] TRACE.csv";

/* ------------------------------------------------------------------------ */
/* The parsed trace. */

enum { OP_RESERVE = 0, OP_RELEASE = 1 };

/* One replayable event.
 * Invariants: op is OP_RESERVE or OP_RELEASE; stream < MAX_STREAMS.
 * OP_RESERVE: slot is the number of OP_RESERVE events before this one (slots
 * are dense, 0 .. trace.slots-1).  OP_RELEASE: slot, stream and size are
 * those of the earlier OP_RESERVE event it frees, and that reservation is
 * live at this point of the trace (not already freed). */
struct event {
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
  struct event *events;
  size_t count, cap;
  uint32_t slots;
  uint64_t reserves, releases;
  bool stream_used[MAX_STREAMS];
  uint16_t stream_order[MAX_STREAMS];
  uint32_t streams;
};

/* ------------------------------------------------------------------------ */
/* Id map: trace id -> slot of the live reservation, used while parsing.
 * Open addressing with linear probing and backward-shift deletion (no
 * tombstones).
 * Invariants: cap is 0 or a power of two; count <= cap / 2; an entry is
 * free iff its slot == IDMAP_FREE; every key appears at most once, in the
 * probe run starting at its home bucket (hash & (cap-1)) with no free entry
 * between the home bucket and the key. */

#define IDMAP_FREE UINT32_MAX

struct idmap_entry {
  uint64_t id;
  uint32_t slot;
  uint32_t line; /* line that reserved it, for the duplicate message */
};

struct idmap {
  struct idmap_entry *entries;
  size_t cap, count;
};

/* splitmix64's finalizer: sequential ids spread over every bucket. */
static uint64_t idmap_hash(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

static struct idmap_entry *idmap_find(const struct idmap *m, uint64_t id) {
  size_t mask, i;

  if (m->cap == 0)
    return NULL;
  mask = m->cap - 1;
  for (i = (size_t)idmap_hash(id) & mask;; i = (i + 1) & mask) {
    struct idmap_entry *e = &m->entries[i];
    if (e->slot == IDMAP_FREE)
      return NULL;
    if (e->id == id)
      return e;
  }
}

/* Places an entry known to be absent; the map has room (count < cap). */
static void idmap_place(struct idmap *m, struct idmap_entry entry) {
  size_t mask = m->cap - 1;
  size_t i = (size_t)idmap_hash(entry.id) & mask;

  while (m->entries[i].slot != IDMAP_FREE)
    i = (i + 1) & mask;
  m->entries[i] = entry;
  m->count++;
}

static bool idmap_grow(struct idmap *m) {
  size_t new_cap = m->cap ? m->cap * 2 : 1024;
  struct idmap_entry *old = m->entries;
  size_t old_cap = m->cap, i;

  if (new_cap < m->cap || new_cap > SIZE_MAX / sizeof *old)
    return false;
  m->entries = malloc(new_cap * sizeof *old);
  if (!m->entries) {
    m->entries = old;
    return false;
  }
  for (i = 0; i < new_cap; i++)
    m->entries[i].slot = IDMAP_FREE;
  m->cap = new_cap;
  m->count = 0;
  for (i = 0; i < old_cap; i++)
    if (old[i].slot != IDMAP_FREE)
      idmap_place(m, old[i]);
  free(old);
  return true;
}

/* Inserts an id known to be absent.  false: out of host memory. */
static bool idmap_insert(struct idmap *m, uint64_t id, uint32_t slot,
                         uint32_t line) {
  struct idmap_entry entry = {id, slot, line};

  if ((m->count + 1) * 2 > m->cap && !idmap_grow(m))
    return false;
  idmap_place(m, entry);
  return true;
}

/* Removes the entry `e` points at (from idmap_find), shifting later members
 * of its probe run back so lookups never stop early. */
static void idmap_remove(struct idmap *m, struct idmap_entry *e) {
  size_t mask = m->cap - 1;
  size_t hole = (size_t)(e - m->entries), j = hole;

  for (;;) {
    size_t home;
    j = (j + 1) & mask;
    if (m->entries[j].slot == IDMAP_FREE)
      break;
    home = (size_t)idmap_hash(m->entries[j].id) & mask;
    /* The entry at j may move into the hole unless its home bucket lies
     * cyclically in (hole, j]. */
    if (hole <= j ? (home > hole && home <= j) : (home > hole || home <= j))
      continue;
    m->entries[hole] = m->entries[j];
    hole = j;
  }
  m->entries[hole].slot = IDMAP_FREE;
  m->count--;
}

/* ------------------------------------------------------------------------ */
/* Parsing. */

static void trace_error(const char *path, uint64_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void trace_error(const char *path, uint64_t line, const char *fmt,
                        ...) {
  va_list ap;

  fprintf(stderr, "%s:%" PRIu64 ": ", path, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

enum num_result { NUM_OK, NUM_NOT_NUMBER, NUM_NEGATIVE, NUM_OVERFLOW };

/* A plain decimal number: digits only, no sign, no spaces. */
static enum num_result parse_u64(const char *s, uint64_t *out) {
  uint64_t v = 0;
  const char *p = s;

  if (*p == '-' && p[1] >= '0' && p[1] <= '9') {
    for (p++; *p >= '0' && *p <= '9'; p++)
      ;
    return *p ? NUM_NOT_NUMBER : NUM_NEGATIVE;
  }
  if (*p == '\0')
    return NUM_NOT_NUMBER;
  for (; *p; p++) {
    unsigned d;
    if (*p < '0' || *p > '9')
      return NUM_NOT_NUMBER;
    d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10)
      return NUM_OVERFLOW;
    v = v * 10 + d;
  }
  *out = v;
  return NUM_OK;
}

/* Parses one numeric field; on failure prints TRACE:LINE: REASON. */
static bool parse_field(const char *path, uint64_t line, const char *what,
                        const char *text, uint64_t *out) {
  switch (parse_u64(text, out)) {
  case NUM_OK:
    return true;
  case NUM_NEGATIVE:
    trace_error(path, line, "%s '%.40s' is negative; it must be 0 or more",
                what, text);
    return false;
  case NUM_OVERFLOW:
    trace_error(path, line,
                "%s '%.40s' overflows 64 bits (the largest is "
                "18446744073709551615)",
                what, text);
    return false;
  case NUM_NOT_NUMBER:
  default:
    trace_error(path, line,
                "%s '%.40s' is not a number; write it as plain decimal "
                "digits",
                what, text);
    return false;
  }
}

static bool parse_stream(const char *path, uint64_t line, const char *text,
                         uint16_t *out) {
  uint64_t v;

  if (!parse_field(path, line, "stream", text, &v))
    return false;
  if (v >= MAX_STREAMS) {
    trace_error(path, line,
                "stream %" PRIu64 " is out of range; use stream numbers 0 "
                "to %u",
                v, MAX_STREAMS - 1);
    return false;
  }
  *out = (uint16_t)v;
  return true;
}

static char *trim(char *s) {
  char *end;

  while (*s == ' ' || *s == '\t')
    s++;
  end = s + strlen(s);
  while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
    *--end = '\0';
  return s;
}

static bool trace_push(struct trace *t, const struct event *e) {
  if (t->count == t->cap) {
    size_t new_cap = t->cap ? t->cap * 2 : 4096;
    struct event *n;
    if (new_cap > SIZE_MAX / sizeof *n)
      return false;
    n = realloc(t->events, new_cap * sizeof *n);
    if (!n)
      return false;
    t->events = n;
    t->cap = new_cap;
  }
  t->events[t->count++] = *e;
  if (!t->stream_used[e->stream]) {
    t->stream_used[e->stream] = true;
    t->stream_order[t->streams++] = e->stream;
  }
  return true;
}

/* Parses one event line (already trimmed, not blank, not a comment).
 * false: an error was printed. */
static bool parse_event(const char *path, uint64_t line, char *text,
                        struct trace *t, struct idmap *ids) {
  char *field[4];
  size_t n = 0;
  char *s = text;
  struct event e;
  uint64_t id, ignored;
  uint16_t ignored_stream;
  struct idmap_entry *live;

  for (;;) {
    char *comma = strchr(s, ',');
    if (n == 4) {
      trace_error(path, line,
                  "too many fields; an event has at most 4: " TRACE_HEADER);
      return false;
    }
    field[n++] = s;
    if (!comma)
      break;
    *comma = '\0';
    s = comma + 1;
  }
  for (size_t i = 0; i < n; i++)
    field[i] = trim(field[i]);

  memset(&e, 0, sizeof e);
  e.line = (uint32_t)line;
  if (strcmp(field[0], "a") == 0) {
    if (n < 4 || !*field[1] || !*field[2] || !*field[3]) {
      trace_error(path, line,
                  "missing fields; a reservation needs all of " TRACE_HEADER
                  ", e.g. a,17,4096,0");
      return false;
    }
    if (!parse_field(path, line, "id", field[1], &id) ||
        !parse_field(path, line, "size", field[2], &e.size) ||
        !parse_stream(path, line, field[3], &e.stream))
      return false;
    live = idmap_find(ids, id);
    if (live) {
      trace_error(path, line,
                  "id %" PRIu64 " is already live (reserved on line %" PRIu32
                  "); free it before reserving it again",
                  id, live->line);
      return false;
    }
    if (t->slots == UINT32_MAX) {
      trace_error(path, line, "too many reservations (at most %" PRIu32
                  "); split the trace", UINT32_MAX);
      return false;
    }
    e.op = OP_RESERVE;
    e.slot = t->slots;
    if (!idmap_insert(ids, id, e.slot, e.line) || !trace_push(t, &e)) {
      trace_error(path, line, "out of host memory while reading the trace");
      return false;
    }
    t->slots++;
    t->reserves++;
    return true;
  }
  if (strcmp(field[0], "f") == 0) {
    if (n < 2 || !*field[1]) {
      trace_error(path, line,
                  "missing fields; a free needs at least op,id, e.g. f,17");
      return false;
    }
    if (!parse_field(path, line, "id", field[1], &id))
      return false;
    /* Size and stream are ignored for a free, but must be well formed. */
    if (n >= 3 && *field[2] &&
        !parse_field(path, line, "size", field[2], &ignored))
      return false;
    if (n >= 4 && *field[3] &&
        !parse_stream(path, line, field[3], &ignored_stream))
      return false;
    live = idmap_find(ids, id);
    if (!live) {
      trace_error(path, line,
                  "free of id %" PRIu64 ", which is not live (never "
                  "reserved, or already freed)",
                  id);
      return false;
    }
    e.slot = live->slot; /* stream and size: link_releases() */
    idmap_remove(ids, live);
    e.op = OP_RELEASE;
    if (!trace_push(t, &e)) {
      trace_error(path, line, "out of host memory while reading the trace");
      return false;
    }
    t->releases++;
    return true;
  }
  trace_error(path, line, "unknown op '%.20s'; use 'a' (reserve) or 'f' (free)",
              field[0]);
  return false;
}

/* Fills in stream and size of every release from its reservation.
 * Needs a slot -> event index table; false: out of memory. */
static bool link_releases(struct trace *t) {
  size_t *reserve_of = malloc((t->slots ? t->slots : 1) * sizeof *reserve_of);
  size_t i;

  if (!reserve_of)
    return false;
  for (i = 0; i < t->count; i++) {
    struct event *e = &t->events[i];
    if (e->op == OP_RESERVE) {
      reserve_of[e->slot] = i;
    } else {
      const struct event *r = &t->events[reserve_of[e->slot]];
      e->stream = r->stream;
      e->size = r->size;
    }
  }
  free(reserve_of);
  return true;
}

/* Parses the whole buffer (NUL-terminated, modified in place).
 * Returns EXIT_OK or EXIT_INPUT (message printed). */
static int parse_trace(const char *path, char *buf, size_t len,
                       struct trace *t) {
  struct idmap ids = {NULL, 0, 0};
  char *p = buf, *end = buf + len;
  uint64_t line = 0;
  bool header = false;
  int rc = EXIT_OK;

  while (p < end) {
    char *nl = memchr(p, '\n', (size_t)(end - p));
    char *text;

    if (nl)
      *nl = '\0';
    line++;
    text = trim(p);
    p = nl ? nl + 1 : end;
    if (line > UINT32_MAX) {
      trace_error(path, line, "the trace has too many lines; split it");
      rc = EXIT_INPUT;
      break;
    }
    if (*text == '\0' || *text == '#')
      continue;
    if (!header) {
      char copy[sizeof TRACE_HEADER + 32];
      char *q = copy, *w;
      /* The header, with optional spaces around its fields. */
      if (strlen(text) < sizeof copy) {
        for (w = text; *w; w++)
          if (*w != ' ' && *w != '\t')
            *q++ = *w;
        *q = '\0';
        if (strcmp(copy, TRACE_HEADER) == 0) {
          header = true;
          continue;
        }
      }
      trace_error(path, line,
                  "expected the header line '" TRACE_HEADER
                  "' before the first event; add it as the first line");
      rc = EXIT_INPUT;
      break;
    }
    if (!parse_event(path, line, text, t, &ids)) {
      rc = EXIT_INPUT;
      break;
    }
  }
  if (rc == EXIT_OK && !header) {
    fprintf(stderr,
            "%s: no header line '" TRACE_HEADER "' and no events; is this "
            "a trace?\n",
            path);
    rc = EXIT_INPUT;
  }
  if (rc == EXIT_OK && !link_releases(t)) {
    fprintf(stderr, "%s: out of host memory while reading the trace\n", path);
    rc = EXIT_INPUT;
  }
  free(ids.entries);
  return rc;
}

/* Reads a whole file (or stdin for "-") into a NUL-terminated buffer. */
static char *read_file(const char *path, size_t *len) {
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  char *buf = NULL;
  size_t cap = 0, n = 0;

  if (!f) {
    fprintf(stderr, "hippo-replay: cannot open trace '%s': %s\n", path,
            strerror(errno));
    return NULL;
  }
  for (;;) {
    size_t got;
    if (cap - n < 2) {
      size_t new_cap = cap ? cap * 2 : 1 << 20;
      char *nb = new_cap > cap ? realloc(buf, new_cap) : NULL;
      if (!nb) {
        fprintf(stderr, "hippo-replay: out of host memory reading '%s'\n",
                path);
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap = new_cap;
    }
    got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) {
        fprintf(stderr, "hippo-replay: cannot read trace '%s': %s\n", path,
                strerror(errno));
        free(buf);
        buf = NULL;
      }
      break;
    }
  }
  if (f != stdin)
    fclose(f);
  if (buf) {
    buf[n] = '\0';
    *len = n;
  }
  return buf;
}

/* ------------------------------------------------------------------------ */
/* Options. */

struct options {
  const char *plugin;   /* NULL: HIPPO_PLUGIN, else the defaults */
  hippo_backend backend;
  uint64_t capacity;    /* 0: the backend's default */
  bool capacity_given;
  hippo_preset preset;
  bool check, strict, quiet;
  const char *trace;
};

/* BYTES with an optional binary suffix K, M, G or T (KiB, MiB, ... too). */
static bool parse_bytes(const char *s, uint64_t *out) {
  char digits[32];
  size_t n = strspn(s, "0123456789");
  const char *suffix = s + n;
  unsigned shift = 0;
  uint64_t v;

  if (n == 0 || n >= sizeof digits)
    return false;
  memcpy(digits, s, n);
  digits[n] = '\0';
  if (parse_u64(digits, &v) != NUM_OK)
    return false;
  switch (*suffix) {
  case '\0': shift = 0; break;
  case 'k': case 'K': shift = 10; break;
  case 'm': case 'M': shift = 20; break;
  case 'g': case 'G': shift = 30; break;
  case 't': case 'T': shift = 40; break;
  default: return false;
  }
  if (*suffix) {
    suffix++;
    if (strcmp(suffix, "") != 0 && strcmp(suffix, "B") != 0 &&
        strcmp(suffix, "iB") != 0)
      return false;
  }
  if (shift && v > (UINT64_MAX >> shift))
    return false;
  *out = v << shift;
  return true;
}

static void usage_error(const char *what, const char *arg) {
  if (what)
    fprintf(stderr, "hippo-replay: %s '%s'\n", what, arg ? arg : "");
  fprintf(stderr, "%s\n", usage_line);
  fprintf(stderr, "Try 'hippo-replay --help' for more.\n");
}

static void print_help(void) {
  printf("%s\n\n", usage_line);
  printf(
      "Replays an allocation trace (CSV: " TRACE_HEADER ") through the hippo\n"
      "plugin and prints a summary of `key: value` lines.\n\n"
      "  --plugin PATH     the plugin to load (default: $HIPPO_PLUGIN, else\n"
      "                    %s if it exists,\n"
      "                    else %s)\n"
      "  --backend NAME    auto (default), host, dry or hip\n"
      "  --capacity BYTES  emulated device memory for host/dry (suffixes\n"
      "                    K, M, G, T; default: the backend's 16 GiB)\n"
      "  --layout NAME     sub_slices (default) or exclusive_pages\n"
      "  --check           verify hippo's bookkeeping after every event\n"
      "                    (exit 4 on the first failure)\n"
      "  --strict          exit 3 when any reservation failed\n"
      "  --quiet           print no summary; errors still go to stderr\n\n"
      "Exit status: 0 replayed, 1 bad trace / plugin / device, 2 usage,\n"
      "3 failed reservations with --strict, 4 --check failed, 5 a release or\n"
      "teardown call failed.\n",
      HIPPO_BUILD_PLUGIN, HIPPO_INSTALLED_PLUGIN);
}

/* Returns -1 to go on, else an exit status. */
static int parse_options(int argc, char **argv, struct options *o) {
  enum { OPT_PLUGIN = 256, OPT_BACKEND, OPT_CAPACITY, OPT_LAYOUT, OPT_CHECK,
         OPT_STRICT, OPT_QUIET, OPT_HELP };
  static const struct option longopts[] = {
      {"plugin", required_argument, NULL, OPT_PLUGIN},
      {"backend", required_argument, NULL, OPT_BACKEND},
      {"capacity", required_argument, NULL, OPT_CAPACITY},
      {"layout", required_argument, NULL, OPT_LAYOUT},
      {"check", no_argument, NULL, OPT_CHECK},
      {"strict", no_argument, NULL, OPT_STRICT},
      {"quiet", no_argument, NULL, OPT_QUIET},
      {"help", no_argument, NULL, OPT_HELP},
      {NULL, 0, NULL, 0}};
  int c;

  memset(o, 0, sizeof *o);
  o->backend = HIPPO_BACKEND_AUTO;
  o->preset = HIPPO_PRESET_SUB_SLICES;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
    switch (c) {
    case OPT_PLUGIN:
      o->plugin = optarg;
      break;
    case OPT_BACKEND:
      if (strcmp(optarg, "auto") == 0)
        o->backend = HIPPO_BACKEND_AUTO;
      else if (strcmp(optarg, "host") == 0)
        o->backend = HIPPO_BACKEND_HOST;
      else if (strcmp(optarg, "dry") == 0)
        o->backend = HIPPO_BACKEND_DRY;
      else if (strcmp(optarg, "hip") == 0)
        o->backend = HIPPO_BACKEND_HIP;
      else {
        usage_error("--backend takes auto, host, dry or hip, not", optarg);
        return EXIT_USAGE;
      }
      break;
    case OPT_CAPACITY:
      if (!parse_bytes(optarg, &o->capacity)) {
        usage_error("--capacity takes a byte count such as 1073741824 or 1G, "
                    "not",
                    optarg);
        return EXIT_USAGE;
      }
      o->capacity_given = true;
      break;
    case OPT_LAYOUT:
      if (strcmp(optarg, "sub_slices") == 0)
        o->preset = HIPPO_PRESET_SUB_SLICES;
      else if (strcmp(optarg, "exclusive_pages") == 0)
        o->preset = HIPPO_PRESET_EXCLUSIVE_PAGES;
      else {
        usage_error("--layout takes sub_slices or exclusive_pages, not",
                    optarg);
        return EXIT_USAGE;
      }
      break;
    case OPT_CHECK:
      o->check = true;
      break;
    case OPT_STRICT:
      o->strict = true;
      break;
    case OPT_QUIET:
      o->quiet = true;
      break;
    case 'h':
    case OPT_HELP:
      print_help();
      return EXIT_OK;
    case ':':
      usage_error("option needs an argument:", argv[optind - 1]);
      return EXIT_USAGE;
    default:
      usage_error("unknown option", argv[optind - 1]);
      return EXIT_USAGE;
    }
  }
  if (argc - optind != 1) {
    usage_error(argc - optind == 0 ? "no trace given" : "more than one trace:",
                argc - optind == 0 ? NULL : argv[optind + 1]);
    return EXIT_USAGE;
  }
  o->trace = argv[optind];
  return -1;
}

static const char *plugin_path(const struct options *o) {
  const char *env = getenv("HIPPO_PLUGIN");

  if (o->plugin)
    return o->plugin;
  if (env && *env)
    return env;
  if (access(HIPPO_BUILD_PLUGIN, F_OK) == 0)
    return HIPPO_BUILD_PLUGIN;
  return HIPPO_INSTALLED_PLUGIN;
}

static const char *backend_name(hippo_backend b) {
  switch (b) {
  case HIPPO_BACKEND_HIP: return "hip";
  case HIPPO_BACKEND_HOST: return "host";
  case HIPPO_BACKEND_DRY: return "dry";
  case HIPPO_BACKEND_AUTO: return "auto";
  default: return "unknown";
  }
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
  hippo_stream *mgr[MAX_STREAMS];
  void *native[MAX_STREAMS];
  bool emulated[MAX_STREAMS]; /* native[s] came from emu_stream_create */
  hippo_stream *attached[MAX_STREAMS]; /* distinct managers, to detach */
  uint32_t attached_count;
  hippo_handle *handles;
};

/* Results of the replay loop. */
struct results {
  uint64_t failed_reserves, skipped_releases, failed_releases;
  uint64_t live_bytes, peak_live_bytes, live_at_end;
  uint32_t first_fail_line;
  hippo_status first_fail_status;
  char first_fail_error[512];
  uint32_t first_release_fail_line;
  hippo_status first_release_fail_status;
  char first_release_fail_error[512];
  double wall_s;
};

static void copy_error(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src && *src ? src : "(no detail)");
}

static const char *status_name(const hippo_api *api, hippo_status st) {
  const char *n = api->status_name ? api->status_name(st) : NULL;
  return n ? n : "HIPPO_?";
}

/* Opens the device and attaches the managers.  EXIT_OK or EXIT_INPUT. */
static int session_open(struct session *s, const struct options *o,
                        const struct trace *t) {
  const hippo_api *api = s->api;
  hippo_layout layout;
  hippo_device_desc desc;
  hippo_device_info info;
  hippo_status st;
  uint32_t i;

  memset(&layout, 0, sizeof layout);
  layout.struct_size = sizeof layout;
  layout.preset = o->preset;
  memset(&desc, 0, sizeof desc);
  desc.struct_size = sizeof desc;
  desc.backend = o->backend;
  desc.capacity = o->capacity;
  desc.layout = &layout;
  st = api->device_open(&desc, &s->dev);
  if (st != HIPPO_SUCCESS) {
    fprintf(stderr,
            "hippo-replay: cannot open a %s device: %s: %s\n"
            "  (try --backend host, or check --capacity and --layout)\n",
            backend_name(o->backend), status_name(api, st), api->last_error());
    s->dev = NULL;
    return EXIT_INPUT;
  }
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  st = api->device_info(s->dev, &info);
  if (st != HIPPO_SUCCESS) {
    fprintf(stderr, "hippo-replay: device_info failed: %s: %s\n",
            status_name(api, st), api->last_error());
    return EXIT_INPUT;
  }
  s->backend = info.backend;
  if (s->backend == HIPPO_BACKEND_HIP && o->capacity_given)
    fprintf(stderr, "hippo-replay: note: --capacity is ignored on a HIP "
                    "device (it has its own memory size)\n");

  for (i = 0; i < t->streams; i++) {
    uint16_t ts = t->stream_order[i];
    hippo_stream *m;
    void *native = NULL;

    if (s->backend == HIPPO_BACKEND_HIP && s->attached_count > 0) {
      s->mgr[ts] = s->attached[0];
      continue;
    }
    if (s->backend != HIPPO_BACKEND_HIP) {
      st = api->emu_stream_create(s->dev, &native);
      if (st != HIPPO_SUCCESS) {
        fprintf(stderr,
                "hippo-replay: cannot create an emulated stream for trace "
                "stream %u: %s: %s\n",
                (unsigned)ts, status_name(api, st), api->last_error());
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
              (unsigned)ts, status_name(api, st), api->last_error());
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

/* The timed loop.  EXIT_OK, or EXIT_CHECK (message printed). */
static int replay(struct session *s, const struct options *o,
                  const struct trace *t, struct results *r) {
  const hippo_api *api = s->api;
  const struct event *ev = t->events;
  hippo_handle *handles = s->handles;
  size_t i, n = t->count;
  double t0;
  int rc = EXIT_OK;

  t0 = now_s();
  for (i = 0; i < n; i++) {
    const struct event *e = &ev[i];
    hippo_stream *m = s->mgr[e->stream];
    hippo_status st;

    if (e->op == OP_RESERVE) {
      hippo_handle h = 0;
      st = api->reserve(m, e->size, HIPPO_MODE_AUTO, &h);
      if (st == HIPPO_SUCCESS) {
        handles[e->slot] = h;
        r->live_bytes += e->size;
        if (r->live_bytes > r->peak_live_bytes)
          r->peak_live_bytes = r->live_bytes;
      } else {
        handles[e->slot] = 0;
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
                     sizeof r->first_release_fail_error, api->last_error());
        }
      }
    }
    if (o->check) {
      st = api->check(s->dev);
      if (st != HIPPO_SUCCESS) {
        fprintf(stderr,
                "%s:%" PRIu32 ": hippo's bookkeeping check failed after "
                "this event: %s: %s\n  (a hippo bug: please report it with "
                "the trace)\n",
                o->trace, e->line, status_name(api, st), api->last_error());
        rc = EXIT_CHECK;
        break;
      }
    }
  }
  r->wall_s = now_s() - t0;
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
      const struct event *e = &t->events[i];
      hippo_handle h;
      if (e->op != OP_RESERVE || (h = s->handles[e->slot]) == 0)
        continue;
      s->handles[e->slot] = 0;
      st = api->release(s->mgr[e->stream], h);
      if (st != HIPPO_SUCCESS && rc == EXIT_OK) {
        fprintf(stderr,
                "hippo-replay: releasing the reservation of line %" PRIu32
                " at the end failed: %s: %s\n",
                e->line, status_name(api, st), api->last_error());
        rc = EXIT_HIPPO;
      }
    }
  }
  for (i = 0; i < s->attached_count; i++) {
    st = api->stream_detach(s->attached[i]);
    if (st != HIPPO_SUCCESS) {
      fprintf(stderr, "hippo-replay: stream_detach failed: %s: %s\n",
              status_name(api, st), api->last_error());
      rc = EXIT_HIPPO;
    }
  }
  s->attached_count = 0;
  for (i = 0; i < MAX_STREAMS; i++) {
    if (!s->emulated[i])
      continue;
    s->emulated[i] = false;
    st = api->emu_stream_destroy(s->dev, s->native[i]);
    if (st != HIPPO_SUCCESS) {
      fprintf(stderr, "hippo-replay: emu_stream_destroy failed: %s: %s\n",
              status_name(api, st), api->last_error());
      rc = EXIT_HIPPO;
    }
  }
  if (s->dev) {
    st = api->device_close(s->dev);
    if (st != HIPPO_SUCCESS) {
      fprintf(stderr, "hippo-replay: device_close failed: %s: %s\n",
              status_name(api, st), api->last_error());
      rc = EXIT_HIPPO;
    }
    s->dev = NULL;
  }
  if (s->lib)
    dlclose(s->lib);
  s->lib = NULL;
  return rc;
}

static void print_summary(const struct session *s, const struct options *o,
                          const struct trace *t, const struct results *r,
                          const char *plugin, bool have_usage,
                          const hippo_usage *u, bool have_counters,
                          const hippo_emu_counters *c) {
  const hippo_api *api = s->api;

  printf("trace: %s\n", o->trace);
  printf("plugin: %s\n", plugin);
  printf("backend: %s\n", backend_name(s->backend));
  printf("layout: %s\n", o->preset == HIPPO_PRESET_EXCLUSIVE_PAGES
                             ? "exclusive_pages"
                             : "sub_slices");
  if (s->backend == HIPPO_BACKEND_HIP)
    printf("streams: %" PRIu32 " (1 manager: on HIP every trace stream "
           "maps to the default stream)\n",
           t->streams);
  else
    printf("streams: %" PRIu32 " (one manager each)\n", t->streams);
  printf("events: %zu\n", t->count);
  printf("reservations: %" PRIu64 "\n", t->reserves);
  printf("releases: %" PRIu64 "\n", t->releases);
  printf("failed reservations: %" PRIu64 "\n", r->failed_reserves);
  if (r->failed_reserves) {
    printf("first failed reservation: %s:%" PRIu32 ": %s: %s\n", o->trace,
           r->first_fail_line, status_name(api, r->first_fail_status),
           r->first_fail_error);
    printf("releases skipped: %" PRIu64 "\n", r->skipped_releases);
  }
  printf("failed releases: %" PRIu64 "\n", r->failed_releases);
  if (r->failed_releases)
    printf("first failed release: %s:%" PRIu32 ": %s: %s\n", o->trace,
           r->first_release_fail_line,
           status_name(api, r->first_release_fail_status),
           r->first_release_fail_error);
  printf("live at end: %" PRIu64 "\n", r->live_at_end);
  printf("peak live bytes: %" PRIu64 "\n", r->peak_live_bytes);
  if (have_usage) {
    printf("peak reserved bytes: %" PRIu64 "\n", u->peak_bytes_reserved);
    if (r->peak_live_bytes)
      printf("reserved/live ratio: %.3f\n",
             (double)u->peak_bytes_reserved / (double)r->peak_live_bytes);
    else
      printf("reserved/live ratio: n/a\n");
  } else {
    printf("peak reserved bytes: n/a\nreserved/live ratio: n/a\n");
  }
  if (have_counters) {
    printf("driver allocations: %" PRIu64 "\n", c->calls[HIPPO_CALL_ALLOC]);
    printf("driver frees: %" PRIu64 "\n", c->calls[HIPPO_CALL_FREE]);
  } else {
    printf("driver allocations: n/a\ndriver frees: n/a\n");
  }
  printf("wall time: %.6f s%s\n", r->wall_s,
         o->check ? " (includes --check after every event)" : "");
  printf("ns per event: %.1f\n",
         t->count ? r->wall_s * 1e9 / (double)t->count : 0.0);
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
  char *buf;
  size_t len = 0;
  int rc, close_rc;
  hippo_status st;

  rc = parse_options(argc, argv, &o);
  if (rc >= 0)
    return rc;

  /* 1. Parse and validate the whole trace before touching hippo. */
  buf = read_file(o.trace, &len);
  if (!buf)
    return EXIT_INPUT;
  memset(&t, 0, sizeof t);
  rc = parse_trace(o.trace, buf, len, &t);
  free(buf);
  if (rc != EXIT_OK) {
    free(t.events);
    return rc;
  }

  /* 2. Load the plugin, open the device, attach the managers. */
  memset(&s, 0, sizeof s);
  memset(&r, 0, sizeof r);
  plugin = plugin_path(&o);
  st = hippo_load(plugin, &s.lib, &s.api);
  if (st != HIPPO_SUCCESS) {
    fprintf(stderr,
            "hippo-replay: %s\n  (build the plugin with 'make', or give its "
            "path with --plugin PATH or HIPPO_PLUGIN)\n",
            hippo_load_error());
    free(t.events);
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

  /* 3. Replay, timed. */
  if (rc == EXIT_OK)
    rc = replay(&s, &o, &t, &r);

  /* 4. Figures, before teardown changes them. */
  if (rc == EXIT_OK) {
    memset(&u, 0, sizeof u);
    u.struct_size = sizeof u;
    st = s.api->usage(s.dev, NULL, &u);
    have_usage = st == HIPPO_SUCCESS;
    if (!have_usage) {
      fprintf(stderr, "hippo-replay: usage failed: %s: %s\n",
              status_name(s.api, st), s.api->last_error());
      rc = EXIT_HIPPO;
    }
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    have_counters = s.backend != HIPPO_BACKEND_HIP &&
                    s.api->emu_counters(s.dev, &c) == HIPPO_SUCCESS;
    for (size_t i = 0; i < t.count; i++)
      if (t.events[i].op == OP_RESERVE && s.handles[t.events[i].slot])
        r.live_at_end++;
    if (!o.quiet) {
      print_summary(&s, &o, &t, &r, plugin, have_usage, &u, have_counters,
                    &c);
      fflush(stdout);
    }
    if (r.failed_releases) {
      fprintf(stderr,
              "hippo-replay: %" PRIu64 " release(s) failed; first: %s:%" PRIu32
              ": %s: %s\n  (a hippo bug: please report it with the trace)\n",
              r.failed_releases, o.trace, r.first_release_fail_line,
              status_name(s.api, r.first_release_fail_status),
              r.first_release_fail_error);
      rc = EXIT_HIPPO;
    } else if (rc == EXIT_OK && o.strict && r.failed_reserves) {
      fprintf(stderr,
              "hippo-replay: %" PRIu64 " reservation(s) failed (--strict); "
              "first: %s:%" PRIu32 ": %s: %s\n",
              r.failed_reserves, o.trace, r.first_fail_line,
              status_name(s.api, r.first_fail_status), r.first_fail_error);
      rc = EXIT_STRICT;
    }
  }

  /* 5. Teardown. */
  close_rc = session_close(&s, &t);
  if (rc == EXIT_OK)
    rc = close_rc;
  free(s.handles);
  free(t.events);
  return rc;
}
