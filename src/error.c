/* error.c -- status names and messages, and the thread-local last_error.
 *
 * The names and messages come from HIPPO_STATUS_MAP in hippo.h, so adding a
 * status code is one line there.  last_error is per thread: a failure on one
 * thread never overwrites the message another thread is about to read.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

/* The calling thread's message: its frames (core.h, hippo__error_kept)
 * and, once read, their text.  Invariant: when formatted, text is the
 * message of the frames ("" with none). */
typedef struct error_state {
  hippo__error_kept k;
  bool formatted;
  char text[HIPPO__ERROR_MAX];
} error_state;

/* Where the calling thread's state lives.  The plugin is dlopen'ed, where
 * a _Thread_local of its own costs a __tls_get_addr call per access (the
 * general-dynamic model); the state (7 KiB) is too big for the static TLS
 * a dlopen'ed library may use.  So a thread's state is allocated at its
 * first failure and found through one pointer in initial-exec TLS (8
 * bytes: the surplus glibc keeps for dlopen'ed libraries).  A thread's
 * state is freed when it exits (a pthread key), or, for threads still
 * running when the plugin is unloaded, left behind (the key goes first).
 * Without host memory for a state, a thread shares a static one: its
 * messages may then mix with another such thread's, nothing worse. */
#if defined(__GNUC__) && !defined(HIPPO_NO_TLS_MODEL)
#define HIPPO__TLS_IE __attribute__((tls_model("initial-exec")))
#else
#define HIPPO__TLS_IE
#endif
static _Thread_local error_state *tls_state HIPPO__TLS_IE;
static error_state tls_fallback;
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static bool tls_keyed;

static void state_free(void *p) { free(p); }

static void key_make(void) { tls_keyed = pthread_key_create(&tls_key, state_free) == 0; }

__attribute__((destructor)) static void key_drop(void) {
  if (tls_keyed) {
    tls_keyed = false;
    pthread_key_delete(tls_key);
  }
}

static error_state *state_slow(void) {
  error_state *e = calloc(1, sizeof *e);
  pthread_once(&tls_once, key_make);
  if (!e || !tls_keyed || pthread_setspecific(tls_key, e) != 0) {
    free(e);
    e = &tls_fallback;
  }
  e->k.used = 1;
  e->formatted = true;
  tls_state = e;
  return e;
}

static inline error_state *state(void) {
  error_state *e = tls_state;
  return e ? e : state_slow();
}

/* One conversion of a format: where it starts and ends, what it reads. */
typedef struct conv {
  const char *start, *end; /* "%...c", end one past the conversion char */
  char c;                  /* the conversion char */
  char len;                /* 'H' hh, 'h', 'l', 'L' ll, 'z', 'j', 't', 0 */
} conv;

/* Parses the conversion at f ('%'); false for one kept eagerly ('*', a
 * float, '%n', an unknown char). */
static bool parse(const char *f, conv *cv) {
  const char *p = f + 1;
  cv->start = f;
  cv->len = 0;
  while (*p == '-' || *p == '+' || *p == ' ' || *p == '#' || *p == '0')
    p++;
  while (*p >= '0' && *p <= '9')
    p++;
  if (*p == '.') {
    p++;
    while (*p >= '0' && *p <= '9')
      p++;
  }
  if (p[0] == 'h' && p[1] == 'h')
    cv->len = 'H', p += 2;
  else if (p[0] == 'l' && p[1] == 'l')
    cv->len = 'L', p += 2;
  else if (*p == 'h' || *p == 'l' || *p == 'z' || *p == 'j' || *p == 't')
    cv->len = *p++;
  cv->c = *p;
  cv->end = *p ? p + 1 : p;
  switch (*p) {
  case 'd': case 'i': case 'u': case 'x': case 'X': case 'o': case 'c':
  case 's': case 'p': case '%':
    return true;
  default:
    return false;
  }
}

/* Copies string str (at most HIPPO__ERROR_MAX - 1 bytes of it: no message
 * holds more) into the arena: false when it does not fit. */
static bool keep_string(hippo__error_kept *k, const char *str,
                        uint64_t *at) {
  size_t n;
  if (!str)
    str = "(null)";
  n = strnlen(str, HIPPO__ERROR_MAX - 1);
  if (n + 1 > sizeof k->arena - k->used)
    return false;
  *at = k->used;
  memcpy(k->arena + k->used, str, n);
  k->arena[k->used + n] = '\0';
  k->used += (uint32_t)(n + 1);
  return true;
}

/* Captures fmt's arguments into fr; false when one must be formatted now
 * (ap is then partly read: the caller formats from a copy). */
static bool capture(hippo__error_kept *k, hippo__error_frame *fr,
                    const char *fmt, va_list ap) {
  fr->fmt = fmt;
  fr->nvals = 0;
  for (const char *f = strchr(fmt, '%'); f; f = strchr(f + 1, '%')) {
    conv cv;
    uint64_t v = 0;
    if (!parse(f, &cv))
      return false;
    f = cv.end - 1;
    if (cv.c == '%')
      continue;
    if (fr->nvals == HIPPO__ERROR_VALS)
      return false;
    switch (cv.c) {
    case 's':
      if (!keep_string(k, va_arg(ap, const char *), &v))
        return false;
      break;
    case 'p':
      v = (uint64_t)(uintptr_t)va_arg(ap, void *);
      break;
    case 'd': case 'i':
      v = cv.len == 'L'   ? (uint64_t)va_arg(ap, long long)
          : cv.len == 'l' ? (uint64_t)va_arg(ap, long)
          : cv.len == 'z' || cv.len == 't' ? (uint64_t)va_arg(ap, ptrdiff_t)
          : cv.len == 'j' ? (uint64_t)va_arg(ap, intmax_t)
                          : (uint64_t)(int64_t)va_arg(ap, int);
      break;
    default: /* u x X o c */
      v = cv.len == 'L'   ? (uint64_t)va_arg(ap, unsigned long long)
          : cv.len == 'l' ? (uint64_t)va_arg(ap, unsigned long)
          : cv.len == 'z' ? (uint64_t)va_arg(ap, size_t)
          : cv.len == 'j' ? (uint64_t)va_arg(ap, uintmax_t)
          : cv.len == 't' ? (uint64_t)va_arg(ap, ptrdiff_t)
                          : (uint64_t)va_arg(ap, unsigned);
      break;
    }
    fr->vals[fr->nvals++] = v;
  }
  return true;
}

/* Formats frame fr into buf (cap bytes); returns the length.  Each spec
 * handed to snprintf is one conversion parse() accepted, with the argument
 * type its length and char say: not a literal, but checked. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static size_t format_frame(const hippo__error_kept *k,
                           const hippo__error_frame *fr, char *buf,
                           size_t cap) {
  size_t at = 0;
  uint32_t arg = 0;
  const char *f = fr->fmt;
  if (!f) /* formatted when it happened */
    f = "%s";
  while (*f && at + 1 < cap) {
    conv cv;
    char spec[32];
    size_t n;
    int w = 0;
    uint64_t v;
    if (*f != '%' || !parse(f, &cv) || cv.c == '%') {
      buf[at++] = *f == '%' && f[1] == '%' ? (f++, '%') : *f;
      f++;
      continue;
    }
    n = (size_t)(cv.end - cv.start);
    if (n >= sizeof spec || arg >= fr->nvals) {
      f = cv.end;
      continue;
    }
    memcpy(spec, cv.start, n);
    spec[n] = '\0';
    v = fr->vals[arg++];
    switch (cv.c) {
    case 's':
      w = snprintf(buf + at, cap - at, spec,
                   k->arena + (v < sizeof k->arena ? v : 0));
      break;
    case 'p':
      w = snprintf(buf + at, cap - at, spec, (void *)(uintptr_t)v);
      break;
    case 'd': case 'i':
      w = cv.len == 'L'   ? snprintf(buf + at, cap - at, spec, (long long)v)
          : cv.len == 'l' ? snprintf(buf + at, cap - at, spec, (long)v)
          : cv.len == 'z' || cv.len == 't'
              ? snprintf(buf + at, cap - at, spec, (ptrdiff_t)v)
          : cv.len == 'j' ? snprintf(buf + at, cap - at, spec, (intmax_t)v)
                          : snprintf(buf + at, cap - at, spec, (int)v);
      break;
    default:
      w = cv.len == 'L'
              ? snprintf(buf + at, cap - at, spec, (unsigned long long)v)
          : cv.len == 'l' ? snprintf(buf + at, cap - at, spec,
                                     (unsigned long)v)
          : cv.len == 'z' ? snprintf(buf + at, cap - at, spec, (size_t)v)
          : cv.len == 'j' ? snprintf(buf + at, cap - at, spec, (uintmax_t)v)
          : cv.len == 't' ? snprintf(buf + at, cap - at, spec, (ptrdiff_t)v)
                          : snprintf(buf + at, cap - at, spec, (unsigned)v);
      break;
    }
    at += w > 0 ? (size_t)w : 0;
    at = at < cap ? at : cap - 1;
    f = cv.end;
  }
  buf[at] = '\0';
  return at;
}
#pragma GCC diagnostic pop

/* The frames' message into e->text (innermost first, each prefix then
 * ": " then what it wraps). */
static void materialize(error_state *e) {
  char inner[HIPPO__ERROR_MAX];
  if (e->formatted)
    return;
  e->formatted = true;
  e->text[0] = '\0';
  for (uint32_t i = 0; i < e->k.nframes; i++) {
    size_t at;
    memcpy(inner, e->text, sizeof inner);
    at = format_frame(&e->k, &e->k.frames[i], e->text, sizeof e->text);
    if (i > 0 && at + 2 < sizeof e->text) {
      memcpy(e->text + at, ": ", 2);
      at += 2;
      strncpy(e->text + at, inner, sizeof e->text - at - 1);
      e->text[sizeof e->text - 1] = '\0';
    }
  }
}

static void reset(error_state *e) {
  e->k.nframes = 0;
  e->k.used = 1;
  e->k.arena[0] = '\0';
  e->formatted = false;
}

/* What the frames say becomes one formatted frame: room for more frames
 * and strings. */
static void collapse(error_state *e) {
  uint64_t at = 0;
  materialize(e);
  reset(e);
  (void)keep_string(&e->k, e->text, &at); /* fits: the arena is empty */
  e->k.frames[0].fmt = NULL;
  e->k.frames[0].nvals = 1;
  e->k.frames[0].vals[0] = at;
  e->k.nframes = 1;
}

/* A frame for the next message on top. */
static hippo__error_frame *push(error_state *e) {
  if (e->k.nframes == HIPPO__ERROR_FRAMES)
    collapse(e);
  e->formatted = false;
  return &e->k.frames[e->k.nframes++];
}

/* Fills a new top frame from fmt and ap.  When the arguments cannot be
 * kept (the arena is full, a conversion is not kept lazily), the frames
 * below collapse into one and it tries again; failing that, the message
 * is formatted now. */
static void fill(error_state *e, const char *fmt, va_list ap) {
  for (int attempt = 0; attempt < 2; attempt++) {
    hippo__error_frame *fr = push(e);
    uint32_t used = e->k.used;
    bool kept;
    va_list copy;
    va_copy(copy, ap);
    kept = capture(&e->k, fr, fmt, copy);
    va_end(copy);
    if (kept)
      return;
    e->k.used = used; /* the strings it copied go, and the frame */
    e->k.nframes--;
    if (attempt == 0 && e->k.nframes > 0)
      collapse(e);
    else
      break;
  }
  {
    char now[HIPPO__ERROR_MAX];
    hippo__error_frame *fr = push(e);
    uint64_t at = 0;
    vsnprintf(now, sizeof now, fmt, ap);
    if (!keep_string(&e->k, now, &at)) {
      collapse(e);
      fr = push(e);
      (void)keep_string(&e->k, now, &at);
    }
    fr->fmt = NULL;
    fr->nvals = 1;
    fr->vals[0] = at;
  }
}

static inline void fill_lazy(hippo__error_frame *fr, const char *fmt,
                             const uint64_t *args, unsigned n) {
  if (n > HIPPO__LAZY_ARGS)
    n = HIPPO__LAZY_ARGS;
  fr->fmt = fmt;
  fr->nvals = n;
  for (unsigned i = 0; i < n; i++)
    fr->vals[i] = args[i];
}

hippo_status hippo__error_set(hippo_status status, const char *fmt, ...) {
  error_state *e = state();
  va_list ap;
  reset(e);
  va_start(ap, fmt);
  fill(e, fmt, ap);
  va_end(ap);
  return status;
}

hippo_status hippo__error_wrap(hippo_status status, const char *fmt, ...) {
  error_state *e = state();
  va_list ap;
  if (e->k.nframes == 0) /* nothing to wrap: a message of its own */
    reset(e);
  va_start(ap, fmt);
  fill(e, fmt, ap);
  va_end(ap);
  return status;
}

/* hippo__error_lazy's body once the thread has its state. */
static inline hippo_status lazy_into(error_state *e, hippo_status status,
                                     const char *fmt, const uint64_t *args,
                                     unsigned n) {
  reset(e);
  e->k.nframes = 1;
  fill_lazy(&e->k.frames[0], fmt, args, n);
  return status;
}

/* A thread's first failure: its state is allocated first. */
static hippo_status __attribute__((noinline))
lazy_first(hippo_status status, const char *fmt, const uint64_t *args,
           unsigned n) {
  return lazy_into(state_slow(), status, fmt, args, n);
}

/* A failure path's message (a full pool may see one per reservation):
 * after reset, the one frame is the first (push's checks would be idle).
 * A leaf once the thread has its state (the allocation is a tail call):
 * no registers saved, 58 -> 45 instructions for a full pool's five
 * numbers (callgrind). */
hippo_status hippo__error_lazy(hippo_status status, const char *fmt,
                               const uint64_t *args, unsigned n) {
  error_state *e = tls_state;
  if (HIPPO__UNLIKELY(!e))
    return lazy_first(status, fmt, args, n);
  return lazy_into(e, status, fmt, args, n);
}

hippo_status hippo__error_lazy_wrap(hippo_status status, const char *fmt,
                                    const uint64_t *args, unsigned n) {
  error_state *e = state();
  if (e->k.nframes == 0)
    reset(e);
  fill_lazy(push(e), fmt, args, n);
  return status;
}

void hippo__error_clear(void) {
  error_state *e = state();
  reset(e);
  e->formatted = true;
  e->text[0] = '\0';
}

const char *hippo__error_get(void) {
  error_state *e = state();
  if (e->k.nframes == 0 && !e->formatted) { /* never failed on this thread */
    e->formatted = true;
    e->text[0] = '\0';
  }
  materialize(e);
  return e->text;
}

void hippo__error_keep(hippo__error_kept *kept) {
  const error_state *e = state();
  kept->nframes = e->k.nframes;
  kept->used = e->k.nframes ? e->k.used : 1;
  memcpy(kept->frames, e->k.frames, kept->nframes * sizeof *kept->frames);
  memcpy(kept->arena, e->k.arena, kept->used);
}

void hippo__error_restore(const hippo__error_kept *kept) {
  error_state *e = state();
  e->k.nframes = kept->nframes;
  e->k.used = kept->used;
  memcpy(e->k.frames, kept->frames, kept->nframes * sizeof *kept->frames);
  memcpy(e->k.arena, kept->arena, kept->used);
  e->formatted = false;
}

const char *hippo__status_string(hippo_status status) {
  switch (status) {
#define HIPPO__STATUS_MSG(name, value, msg)                                    \
  case HIPPO_##name:                                                           \
    return msg;
    HIPPO_STATUS_MAP(HIPPO__STATUS_MSG)
#undef HIPPO__STATUS_MSG
  default:
    return "unknown status code";
  }
}

const char *hippo__status_name(hippo_status status) {
  switch (status) {
#define HIPPO__STATUS_NAME(name, value, msg)                                   \
  case HIPPO_##name:                                                           \
    return "HIPPO_" #name;
    HIPPO_STATUS_MAP(HIPPO__STATUS_NAME)
#undef HIPPO__STATUS_NAME
  default:
    return "HIPPO_UNKNOWN_STATUS";
  }
}
