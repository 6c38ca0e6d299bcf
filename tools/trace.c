/* trace.c -- the allocation-trace format of the hippo tools (trace.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toolutil.h"
#include "trace.h"

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

/* Parses one numeric field; on failure prints TRACE:LINE: REASON. */
static bool parse_field(const char *path, uint64_t line, const char *what,
                        const char *text, uint64_t *out) {
  switch (tool_parse_u64(text, out)) {
  case TOOL_NUM_OK:
    return true;
  case TOOL_NUM_NEGATIVE:
    trace_error(path, line, "%s '%.40s' is negative; it must be 0 or more",
                what, text);
    return false;
  case TOOL_NUM_OVERFLOW:
    trace_error(path, line,
                "%s '%.40s' overflows 64 bits (the largest is "
                "18446744073709551615)",
                what, text);
    return false;
  case TOOL_NUM_NOT_NUMBER:
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
  if (v >= TRACE_MAX_STREAMS) {
    trace_error(path, line,
                "stream %" PRIu64 " is out of range; use stream numbers 0 "
                "to %u",
                v, TRACE_MAX_STREAMS - 1);
    return false;
  }
  *out = (uint16_t)v;
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
  struct trace_event e;
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
    field[i] = tool_trim(field[i]);

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
    e.op = TRACE_RESERVE;
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
    e.op = TRACE_RELEASE;
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
    struct trace_event *e = &t->events[i];
    if (e->op == TRACE_RESERVE) {
      reserve_of[e->slot] = i;
    } else {
      const struct trace_event *r = &t->events[reserve_of[e->slot]];
      e->stream = r->stream;
      e->size = r->size;
    }
  }
  free(reserve_of);
  return true;
}

bool trace_parse(const char *path, char *buf, size_t len, struct trace *t) {
  struct idmap ids = {NULL, 0, 0};
  char *p = buf, *end = buf + len;
  uint64_t line = 0;
  bool header = false;
  bool ok = true;

  /* A UTF-8 byte order mark (some editors write one) is not text. */
  if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0)
    p += 3;
  while (p < end) {
    char *nl = memchr(p, '\n', (size_t)(end - p));
    char *eol = nl ? nl : end;
    char *nul = memchr(p, '\0', (size_t)(eol - p));
    char *text;

    line++;
    if (nul) { /* the rest of the line would be silently dropped */
      trace_error(path, line,
                  "byte %zu of the line is NUL; is this a text file?",
                  (size_t)(nul - p) + 1);
      ok = false;
      break;
    }
    if (nl)
      *nl = '\0';
    text = tool_trim(p);
    p = nl ? nl + 1 : end;
    if (line > UINT32_MAX) {
      trace_error(path, line, "the trace has too many lines; split it");
      ok = false;
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
      ok = false;
      break;
    }
    if (!parse_event(path, line, text, t, &ids)) {
      ok = false;
      break;
    }
  }
  if (ok && !header) {
    /* PATH:LINE: like every other error: the last line (1 when empty) */
    trace_error(path, line ? line : 1,
                "no header line '" TRACE_HEADER "' and no events; is this "
                "a trace?");
    ok = false;
  }
  if (ok && !link_releases(t)) {
    fprintf(stderr, "%s: out of host memory while reading the trace\n", path);
    ok = false;
  }
  free(ids.entries);
  if (!ok) {
    free(t->events);
    t->events = NULL;
  }
  return ok;
}

/* Reads a whole file (or stdin for "-") into a NUL-terminated buffer. */
static char *read_file(const char *prog, const char *path, size_t *len) {
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

bool trace_load(const char *prog, const char *path, struct trace *t) {
  size_t len = 0;
  char *buf;
  bool ok;

  memset(t, 0, sizeof *t);
  buf = read_file(prog, path, &len);
  if (!buf)
    return false;
  ok = trace_parse(path, buf, len, t);
  free(buf);
  return ok;
}

void trace_free(struct trace *t) {
  free(t->events);
  t->events = NULL;
  t->count = t->cap = 0;
}
