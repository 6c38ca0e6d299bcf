/* trace.c -- the allocation-trace formats of the hippo tools (trace.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toolutil.h"
#include "trace.h"

/* ------------------------------------------------------------------------ */
/* Key map, used while parsing: a trace id (hippo) or a pointer (RMM) -> the
 * event that reserved it while it is live, or the line that freed it once
 * it is not; and RMM's stream values -> trace stream numbers.
 * Open addressing with linear probing.  Nothing is ever removed: a freed
 * key stays, marked IDMAP_DEAD, so that a second free of it can be told
 * from a free of a key never seen (the map holds every distinct key of the
 * trace, 16 bytes each, at most half full).
 * Invariants: cap is 0 or a power of two; count <= cap / 2; an entry is
 * empty iff its value == IDMAP_EMPTY; every key appears at most once, in
 * the probe run starting at its home bucket (hash & (cap-1)) with no empty
 * entry between the home bucket and the key.  An event index is at most
 * UINT32_MAX - 2 (a line number is at most UINT32_MAX and the header takes
 * one), so it is never mistaken for either mark. */

#define IDMAP_EMPTY UINT32_MAX
#define IDMAP_DEAD (UINT32_MAX - 1)

struct idmap_entry {
  uint64_t key;
  uint32_t value; /* ids: index of the live reservation's event, or
                     IDMAP_DEAD once freed; streams: the trace stream */
  uint32_t line;  /* ids: the line that reserved (live) or freed (dead) it */
};

struct idmap {
  struct idmap_entry *entries;
  size_t cap, count;
};

/* splitmix64's finalizer: sequential keys spread over every bucket. */
static uint64_t idmap_hash(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

static struct idmap_entry *idmap_find(const struct idmap *m, uint64_t key) {
  size_t mask, i;

  if (m->cap == 0)
    return NULL;
  mask = m->cap - 1;
  for (i = (size_t)idmap_hash(key) & mask;; i = (i + 1) & mask) {
    struct idmap_entry *e = &m->entries[i];
    if (e->value == IDMAP_EMPTY)
      return NULL;
    if (e->key == key)
      return e;
  }
}

/* Places an entry known to be absent; the map has room (count < cap). */
static void idmap_place(struct idmap *m, struct idmap_entry entry) {
  size_t mask = m->cap - 1;
  size_t i = (size_t)idmap_hash(entry.key) & mask;

  while (m->entries[i].value != IDMAP_EMPTY)
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
    m->entries[i].value = IDMAP_EMPTY;
  m->cap = new_cap;
  m->count = 0;
  for (i = 0; i < old_cap; i++)
    if (old[i].value != IDMAP_EMPTY)
      idmap_place(m, old[i]);
  free(old);
  return true;
}

/* Inserts a key known to be absent.  false: out of host memory. */
static bool idmap_insert(struct idmap *m, uint64_t key, uint32_t value,
                         uint32_t line) {
  struct idmap_entry entry = {key, value, line};

  if ((m->count + 1) * 2 > m->cap && !idmap_grow(m))
    return false;
  idmap_place(m, entry);
  return true;
}

/* ------------------------------------------------------------------------ */
/* Parsing. */

/* The state of one parse.
 * Invariants: ids maps every key reserved so far (live: the index of its
 * reservation's event in t->events; freed: IDMAP_DEAD); streams (RMM)
 * maps each stream value that reserved to its trace stream, 0 ..
 * streams.count - 1; live_hi:live_lo is the sum of the sizes of the live
 * reservations as a 128-bit number, peak_hi:peak_lo its largest value so
 * far; reason holds the message of the last failure, and fatal says
 * whether that failure may be skipped (false) or stops the parse even
 * when lenient (true). */
struct parser {
  const char *path;
  bool lenient;
  struct trace *t;
  struct idmap ids, streams;
  uint32_t line;
  bool fatal;
  uint64_t live_lo, live_hi, peak_lo, peak_hi;
  char reason[320]; /* fits in first_skipped after a path of 160 bytes */
};

/* Keeps REASON for the current line; returns false, for `return bad(...)`.
 * The line may be skipped when lenient. */
static bool bad(struct parser *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static bool bad(struct parser *p, const char *fmt, ...) {
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(p->reason, sizeof p->reason, fmt, ap);
  va_end(ap);
  tool_make_printable(p->reason); /* it quotes the trace's bytes */
  return false;
}

/* As bad(), for what no skipping gets past. */
static bool fatal(struct parser *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static bool fatal(struct parser *p, const char *fmt, ...) {
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(p->reason, sizeof p->reason, fmt, ap);
  va_end(ap);
  tool_make_printable(p->reason);
  p->fatal = true;
  return false;
}

static bool out_of_memory(struct parser *p) {
  return fatal(p, "out of host memory while reading the trace");
}

/* Parses one decimal field; on failure keeps the reason. */
static bool parse_field(struct parser *p, const char *what, const char *text,
                        uint64_t *out) {
  switch (tool_parse_u64(text, out)) {
  case TOOL_NUM_OK:
    return true;
  case TOOL_NUM_NEGATIVE:
    return bad(p, "%s '%.40s' is negative; it must be 0 or more", what, text);
  case TOOL_NUM_OVERFLOW:
    return bad(p,
               "%s '%.40s' overflows 64 bits (the largest is "
               "18446744073709551615)",
               what, text);
  case TOOL_NUM_NOT_NUMBER:
  default:
    return bad(p,
               "%s '%.40s' is not a number; write it as plain decimal "
               "digits",
               what, text);
  }
}

/* Parses a hexadecimal field (RMM's pointers and streams), 0x optional. */
static bool parse_hex(struct parser *p, const char *what, const char *text,
                      uint64_t *out) {
  const char *s = text;
  uint64_t v = 0;

  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
    s += 2;
  if (*s == '\0')
    return bad(p,
               "%s '%.40s' is not a hexadecimal number; RMM writes it as "
               "0x7f3a4c000000 or 7f3a4c000000",
               what, text);
  for (; *s; s++) {
    unsigned d;
    if (*s >= '0' && *s <= '9')
      d = (unsigned)(*s - '0');
    else if (*s >= 'a' && *s <= 'f')
      d = (unsigned)(*s - 'a') + 10;
    else if (*s >= 'A' && *s <= 'F')
      d = (unsigned)(*s - 'A') + 10;
    else
      return bad(p,
                 "%s '%.40s' is not a hexadecimal number; RMM writes it as "
                 "0x7f3a4c000000 or 7f3a4c000000",
                 what, text);
    if (v >> 60)
      return bad(p, "%s '%.40s' overflows 64 bits", what, text);
    v = v << 4 | d;
  }
  *out = v;
  return true;
}

static bool parse_stream(struct parser *p, const char *text, uint16_t *out) {
  uint64_t v;

  if (!parse_field(p, "stream", text, &v))
    return false;
  if (v >= TRACE_MAX_STREAMS)
    return bad(p,
               "stream %" PRIu64 " is out of range; use stream numbers 0 "
               "to %u",
               v, TRACE_MAX_STREAMS - 1);
  *out = (uint16_t)v;
  return true;
}

/* RMM: the trace stream of stream value `value`, a new one (the next
 * number) on its first reservation. */
static bool map_stream(struct parser *p, uint64_t value, uint16_t *out) {
  struct idmap_entry *e = idmap_find(&p->streams, value);
  uint32_t n = (uint32_t)p->streams.count;

  if (e) {
    *out = (uint16_t)e->value;
    return true;
  }
  if (n >= TRACE_MAX_STREAMS)
    return bad(p,
               "stream 0x%" PRIx64 " is one stream too many: the log's "
               "first %u streams became trace streams 0 to %u, the most a "
               "trace may use",
               value, TRACE_MAX_STREAMS, TRACE_MAX_STREAMS - 1);
  if (!idmap_insert(&p->streams, value, n, p->line))
    return out_of_memory(p);
  *out = (uint16_t)n;
  return true;
}

static bool trace_push(struct trace *t, const struct trace_event *e) {
  if (t->count == t->cap) {
    size_t new_cap = t->cap ? t->cap * 2 : 4096;
    struct trace_event *n;
    if (new_cap > SIZE_MAX / sizeof *n)
      return false;
    n = realloc(t->events, new_cap * sizeof *n);
    if (!n)
      return false;
    t->events = n;
    t->cap = new_cap;
  }
  t->events[t->count++] = *e;
  /* A release's stream is its reservation's: only reservations use one. */
  if (e->op == TRACE_RESERVE && !t->stream_used[e->stream]) {
    t->stream_used[e->stream] = true;
    t->stream_order[t->streams++] = e->stream;
  }
  return true;
}

/* "id 17" or "pointer 0x7f00", as the format names its keys. */
static const char *key_name(const struct parser *p, uint64_t key,
                            char buf[40]) {
  if (p->t->format == TRACE_FORMAT_RMM)
    snprintf(buf, 40, "pointer 0x%" PRIx64, key);
  else
    snprintf(buf, 40, "id %" PRIu64, key);
  return buf;
}

/* Reserves SIZE bytes under KEY on STREAM (RMM: the stream value, mapped
 * here).  Nothing changes unless it succeeds (but for a fatal failure). */
static bool reserve(struct parser *p, uint64_t key, uint64_t size,
                    uint64_t stream) {
  struct trace *t = p->t;
  struct idmap_entry *e = idmap_find(&p->ids, key);
  bool rmm = t->format == TRACE_FORMAT_RMM;
  struct trace_event ev;
  char name[40];

  if (e && e->value != IDMAP_DEAD)
    return rmm ? bad(p,
                     "%s is already live (allocated on line %" PRIu32
                     "); the log misses its free",
                     key_name(p, key, name), e->line)
               : bad(p,
                     "%s is already live (reserved on line %" PRIu32
                     "); free it before reserving it again",
                     key_name(p, key, name), e->line);
  if (t->slots >= IDMAP_DEAD)
    return fatal(p, "too many reservations (at most %" PRIu32
                 "); split the trace", IDMAP_DEAD);
  memset(&ev, 0, sizeof ev);
  ev.op = TRACE_RESERVE;
  ev.size = size;
  ev.slot = t->slots;
  ev.line = p->line;
  if (rmm) {
    if (!map_stream(p, stream, &ev.stream))
      return false;
  } else {
    ev.stream = (uint16_t)stream; /* checked by parse_stream */
  }
  if (e) {
    e->value = (uint32_t)t->count;
    e->line = p->line;
  } else if (!idmap_insert(&p->ids, key, (uint32_t)t->count, p->line)) {
    return out_of_memory(p);
  }
  if (!trace_push(t, &ev))
    return out_of_memory(p);
  t->slots++;
  t->reserves++;
  p->live_lo += size;
  p->live_hi += p->live_lo < size;
  if (p->live_hi > p->peak_hi ||
      (p->live_hi == p->peak_hi && p->live_lo > p->peak_lo)) {
    p->peak_hi = p->live_hi;
    p->peak_lo = p->live_lo;
  }
  return true;
}

/* Releases KEY: to the stream, and with the size, of its reservation. */
static bool release(struct parser *p, uint64_t key) {
  struct trace *t = p->t;
  struct idmap_entry *e = idmap_find(&p->ids, key);
  struct trace_event ev;
  char name[40];

  if (!e)
    return bad(p, "free of %s, which is not live (never %s)",
               key_name(p, key, name),
               t->format == TRACE_FORMAT_RMM ? "allocated in this log"
                                             : "reserved");
  if (e->value == IDMAP_DEAD)
    return bad(p,
               "free of %s, which is not live (freed already on line %" PRIu32
               ": a double free)",
               key_name(p, key, name), e->line);
  ev = t->events[e->value]; /* copied: the push may move the events */
  ev.op = TRACE_RELEASE;
  ev.line = p->line;
  if (!trace_push(t, &ev))
    return out_of_memory(p);
  e->value = IDMAP_DEAD;
  e->line = p->line;
  t->releases++;
  p->live_hi -= p->live_lo < ev.size;
  p->live_lo -= ev.size;
  return true;
}

/* Cuts `s` at its commas into field[0 .. n), each trimmed.  Returns n, or
 * max + 1 when there are more than max fields. */
static size_t split(char *s, char **field, size_t max) {
  size_t n = 0;

  for (;;) {
    char *comma = strchr(s, ',');
    if (n == max)
      return max + 1;
    field[n++] = s;
    if (!comma)
      break;
    *comma = '\0';
    s = comma + 1;
  }
  for (size_t i = 0; i < n; i++)
    field[i] = tool_trim(field[i]);
  return n;
}

/* One event line of hippo's format (trimmed, not blank, not a comment). */
static bool parse_hippo(struct parser *p, char *text) {
  char *field[4];
  size_t n = split(text, field, 4);
  uint64_t id, size, ignored;
  uint16_t stream = 0;

  if (n > 4)
    return bad(p, "too many fields; an event has at most 4: " TRACE_HEADER);
  if (strcmp(field[0], "a") == 0) {
    if (n < 4 || !*field[1] || !*field[2] || !*field[3])
      return bad(p, "missing fields; a reservation needs all of " TRACE_HEADER
                 ", e.g. a,17,4096,0");
    if (!parse_field(p, "id", field[1], &id) ||
        !parse_field(p, "size", field[2], &size) ||
        !parse_stream(p, field[3], &stream))
      return false;
    return reserve(p, id, size, stream);
  }
  if (strcmp(field[0], "f") == 0) {
    if (n < 2 || !*field[1])
      return bad(p, "missing fields; a free needs at least op,id, e.g. f,17");
    if (!parse_field(p, "id", field[1], &id))
      return false;
    /* Size and stream are ignored for a free, but must be well formed. */
    if (n >= 3 && *field[2] && !parse_field(p, "size", field[2], &ignored))
      return false;
    if (n >= 4 && *field[3] && !parse_stream(p, field[3], &stream))
      return false;
    return release(p, id);
  }
  return bad(p, "unknown op '%.20s'; use 'a' (reserve) or 'f' (free)",
             field[0]);
}

/* A pointer of RMM's log: hexadecimal (parse_hex), or `(nil)`, which
 * RMM's `%p` prints for nullptr through glibc's printf (an allocation
 * failure's pointer, a 0-byte request's): 0. */
static bool parse_rmm_pointer(struct parser *p, const char *what,
                              const char *text, uint64_t *out) {
  if (strcmp(text, "(nil)") == 0) {
    *out = 0;
    return true;
  }
  return parse_hex(p, what, text, out);
}

/* One line of RMM's log (trimmed, not blank, not a comment). */
static bool parse_rmm(struct parser *p, char *text) {
  char *field[6];
  size_t n = split(text, field, 6);
  const char *action;
  uint64_t pointer, size, stream;
  bool alloc, failure;

  if (n > 6)
    return bad(p, "too many fields; an RMM log line has 6: " TRACE_RMM_HEADER);
  if (n < 6)
    return bad(p, "missing fields; an RMM log line has 6: " TRACE_RMM_HEADER);
  action = field[2];
  alloc = strcmp(action, "allocate") == 0;
  failure = strcmp(action, "allocate failure") == 0;
  if (!alloc && !failure && strcmp(action, "free") != 0 &&
      strcmp(action, "deallocate") != 0)
    return bad(p,
               "unknown action '%.20s'; RMM writes 'allocate', 'allocate "
               "failure' or 'free'",
               action);
  /* Thread and Time are not read: nothing here depends on them. */
  if (!parse_rmm_pointer(p, "pointer", field[3], &pointer) ||
      !parse_field(p, "size", field[4], &size) ||
      !parse_rmm_pointer(p, "stream", field[5], &stream))
    return false;
  if (failure) {
    p->t->alloc_failures++;
    return true;
  }
  if (pointer == 0) { /* a 0-byte request's nullptr, or its free */
    p->t->null_lines++;
    return true;
  }
  /* A free's size and stream are checked, not used: it goes to the stream
   * of the allocation, with its size. */
  return alloc ? reserve(p, pointer, size, stream) : release(p, pointer);
}

/* Does `text` look like a header line (letters, '_', '-', spaces, with a
 * comma) rather than an event? */
static bool looks_like_header(const char *text) {
  bool comma = false;

  for (; *text; text++) {
    char c = *text;
    if (c == ',')
      comma = true;
    else if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               c == '_' || c == '-' || c == ' ' || c == '\t'))
      return false;
  }
  return comma;
}

/* The format a header line (trimmed, NUL-terminated) names, with
 * optional spaces around its fields; -1: it is no header. */
static int header_format(const char *text) {
  char copy[sizeof TRACE_RMM_HEADER + 32];
  char *q = copy;
  const char *w;

  if (strlen(text) >= sizeof copy)
    return -1;
  for (w = text; *w; w++)
    if (*w != ' ' && *w != '\t')
      *q++ = *w;
  *q = '\0';
  if (strcmp(copy, TRACE_HEADER) == 0)
    return TRACE_FORMAT_HIPPO;
  if (strcmp(copy, TRACE_RMM_HEADER) == 0)
    return TRACE_FORMAT_RMM;
  return -1;
}

/* The first line that is neither blank nor a comment: which format? */
static bool parse_header(struct parser *p, const char *text) {
  int format = header_format(text);
  if (format >= 0) {
    p->t->format = (enum trace_format)format;
    return true;
  }
  if (looks_like_header(text))
    return fatal(p,
                 "unknown header '%.60s'; hippo-replay reads '" TRACE_HEADER
                 "' (hippo's format) and '" TRACE_RMM_HEADER
                 "' (RMM's logging_resource_adaptor)",
                 text);
  return fatal(p,
               "expected the header line '" TRACE_HEADER
               "' before the first event; add it as the first line (an RMM "
               "log starts with '" TRACE_RMM_HEADER "')");
}

/* Before a message of trace_parse: the caller's progress line goes. */
static void progress_end(const struct trace_options *opt) {
  if (opt && opt->progress_end)
    opt->progress_end(opt->progress_arg);
}

static void report(const struct parser *p, const struct trace_options *opt) {
  progress_end(opt);
  fprintf(stderr, "%s:%" PRIu32 ": %s\n", p->path, p->line, p->reason);
}

bool trace_parse(const char *path, char *buf, size_t len,
                 const struct trace_options *opt, struct trace *t) {
  struct parser p;
  char *q = buf, *end = buf + len;
  uint64_t line = 0;
  bool header = false;
  bool ok = true;

  memset(&p, 0, sizeof p);
  p.path = path;
  p.lenient = opt && opt->lenient;
  p.t = t;
  /* A UTF-8 byte order mark (some editors write one) is not text. */
  if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0)
    q += 3;
  while (q < end) {
    char *nl = memchr(q, '\n', (size_t)(end - q));
    char *eol = nl ? nl : end;
    char *nul = memchr(q, '\0', (size_t)(eol - q));
    size_t length = (size_t)(eol - q);
    bool good;

    line++;
    if (line > UINT32_MAX) {
      p.line = UINT32_MAX;
      progress_end(opt);
      fprintf(stderr, "%s:%" PRIu64 ": the trace has too many lines; split "
              "it\n", path, line);
      ok = false;
      break;
    }
    p.line = (uint32_t)line;
    p.fatal = false;
    if (opt && opt->progress && (line & 0xffff) == 0)
      opt->progress(opt->progress_arg, (size_t)(q - buf), len);
    if (length > 0 && q[length - 1] == '\r')
      length--;
    if (nul) { /* the rest of the line would be silently dropped */
      good = bad(&p, "byte %zu of the line is NUL; is this a text file?",
                 (size_t)(nul - q) + 1);
    } else if (length > TRACE_MAX_LINE) {
      good = bad(&p,
                 "the line is %s%zu bytes long; a trace line has at most %u "
                 "(is this a trace?)",
                 !nl && opt && opt->cut ? "at least " : "", length,
                 TRACE_MAX_LINE);
    } else {
      char *text;
      if (nl)
        *nl = '\0';
      text = tool_trim(q);
      if (*text == '\0' || *text == '#')
        good = true;
      else if (!header)
        good = header = parse_header(&p, text);
      else if (t->format == TRACE_FORMAT_RMM)
        good = parse_rmm(&p, text);
      else
        good = parse_hippo(&p, text);
    }
    q = nl ? nl + 1 : end;
    if (good)
      continue;
    if (p.fatal || !p.lenient) {
      report(&p, opt);
      ok = false;
      break;
    }
    if (t->skipped++ == 0)
      snprintf(t->first_skipped, sizeof t->first_skipped,
               "%.160s:%" PRIu32 ": %s", path, p.line, p.reason);
  }
  if (ok && !header) {
    /* PATH:LINE: like every other error: the last line (1 when empty) */
    progress_end(opt);
    fprintf(stderr,
            "%s:%" PRIu64 ": no header line '" TRACE_HEADER "' and no "
            "events; is this a trace? (an RMM log starts with '"
            TRACE_RMM_HEADER "')\n",
            path, line ? line : 1);
    ok = false;
  }
  t->peak_live = p.peak_hi ? UINT64_MAX : p.peak_lo;
  free(p.ids.entries);
  free(p.streams.entries);
  if (!ok) {
    free(t->events);
    t->events = NULL;
    t->count = t->cap = 0;
  }
  return ok;
}

/* Whether reading may stop: the `n` bytes read so far (from *scanned on,
 * which moves past the lines looked at) cannot begin a trace, so the
 * parser will refuse what is there whatever follows.  That is so when
 * the first line that is neither blank nor a comment is complete and no
 * header or (unless `lenient`, which skips such lines) holds a NUL or is
 * longer than TRACE_MAX_LINE, or is still not complete after
 * TRACE_CUT_LINE bytes.  Once the header is met it says false for good
 * (*scanned = SIZE_MAX): a trace is read whole.  So a file that is no
 * trace (/dev/zero, a binary, an endless pipe of events without a
 * header) is refused at once instead of filling host memory first. */
static bool cannot_begin(const char *buf, size_t n, size_t *scanned,
                         bool lenient) {
  size_t q = *scanned;
  if (q == SIZE_MAX)
    return false;
  if (q == 0 && n >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0)
    q = 3;
  for (;;) {
    const char *nl = memchr(buf + q, '\n', n - q);
    size_t length = (size_t)((nl ? nl : buf + n) - (buf + q));
    char text[TRACE_MAX_LINE + 2];
    char *t;
    if (!nl) {
      *scanned = q;
      return !lenient && length > TRACE_CUT_LINE;
    }
    if (!lenient &&
        (memchr(buf + q, '\0', length) || length > TRACE_MAX_LINE + 1))
      return true;
    if (length > TRACE_MAX_LINE + 1) { /* lenient: skipped */
      q += length + 1;
      continue;
    }
    memcpy(text, buf + q, length);
    text[length] = '\0';
    t = tool_trim(text);
    q += length + 1;
    if (*t == '\0' || *t == '#')
      continue;
    if (header_format(t) < 0)
      return true;
    *scanned = SIZE_MAX;
    return false;
  }
}

/* Reads a whole file (or stdin for "-") into a NUL-terminated buffer; it
 * stops early where what was read cannot begin a trace (cannot_begin). */
static char *read_file(const char *prog, const char *path, bool lenient,
                       size_t *len, bool *cut) {
  size_t scanned = 0;
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  char *buf = NULL;
  size_t cap = 0, n = 0;

  if (!f) {
    fprintf(stderr, "%s: cannot open trace '%s': %s\n", prog, path,
            strerror(errno));
    return NULL;
  }
  for (;;) {
    size_t got;
    if (cap - n < 2) {
      size_t new_cap = cap ? cap * 2 : 1 << 20;
      char *nb = new_cap > cap ? realloc(buf, new_cap) : NULL;
      if (!nb) {
        fprintf(stderr, "%s: out of host memory reading '%s'\n", prog,
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
    if (got != 0 && cannot_begin(buf, n, &scanned, lenient)) {
      *cut = true;
      break;
    }
    if (got == 0) {
      if (ferror(f)) {
        fprintf(stderr, "%s: cannot read trace '%s': %s\n", prog, path,
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

bool trace_load_with(const char *prog, const char *path,
                     const struct trace_options *opt, struct trace *t) {
  size_t len = 0;
  char *buf;
  bool ok;
  struct trace_options o = {0};

  memset(t, 0, sizeof *t);
  if (opt)
    o = *opt;
  o.cut = false;
  buf = read_file(prog, path, o.lenient, &len, &o.cut);
  if (!buf)
    return false;
  ok = trace_parse(path, buf, len, &o, t);
  free(buf);
  return ok;
}

bool trace_load(const char *prog, const char *path, struct trace *t) {
  return trace_load_with(prog, path, NULL, t);
}

void trace_free(struct trace *t) {
  free(t->events);
  t->events = NULL;
  t->count = t->cap = 0;
}

bool *trace_never_freed(const struct trace *t) {
  bool *once = calloc(t->count ? t->count : 1, sizeof *once);
  bool *freed_later = calloc(t->slots ? t->slots : 1, sizeof *freed_later);
  if (!once || !freed_later) {
    free(once);
    free(freed_later);
    return NULL;
  }
  for (size_t i = t->count; i-- > 0;) { /* a release makes the reservation
                                           of its slot before it freed */
    const struct trace_event *e = &t->events[i];
    if (e->op == TRACE_RELEASE) {
      freed_later[e->slot] = true;
    } else {
      once[i] = !freed_later[e->slot];
      freed_later[e->slot] = false;
    }
  }
  free(freed_later);
  return once;
}
