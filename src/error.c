/* error.c -- status names and messages, and the thread-local last_error.
 *
 * The names and messages come from HIPPO_STATUS_MAP in hippo.h, so adding a
 * status code is one line there.  last_error is per thread: a failure on one
 * thread never overwrites the message another thread is about to read.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

/* Invariant: always NUL-terminated; "" when the thread has seen no failure
 * since its last hippo__error_clear().  When lazy_fmt is set, the message
 * of the last failure is lazy_fmt with lazy_args, not yet formatted. */
static _Thread_local char last_error_buf[HIPPO__ERROR_MAX];
static _Thread_local const char *lazy_fmt;
static _Thread_local uint64_t lazy_args[HIPPO__LAZY_ARGS];
/* A pending prefix (hippo__error_lazy_wrap) of the message below it. */
static _Thread_local const char *prefix_fmt;
static _Thread_local uint64_t prefix_args[HIPPO__LAZY_ARGS];

/* Format `f` with `args` (its only conversions are %llu) into buf. */
static size_t format_lazy(char *buf, size_t cap, const char *f,
                          const uint64_t *args) {
  size_t at = 0;
  unsigned arg = 0;
  while (*f && at + 1 < cap) {
    if (f[0] == '%' && f[1] == 'l' && f[2] == 'l' && f[3] == 'u' &&
        arg < HIPPO__LAZY_ARGS) {
      int n = snprintf(buf + at, cap - at, "%llu",
                       (unsigned long long)args[arg++]);
      at += n > 0 ? (size_t)n : 0;
      f += 4;
    } else {
      buf[at++] = *f++;
    }
  }
  at = at < cap ? at : cap - 1;
  buf[at] = '\0';
  return at;
}

/* Format a pending lazy message (and its pending prefix) into
 * last_error_buf. */
static void materialize(void) {
  if (lazy_fmt) {
    const char *f = lazy_fmt;
    lazy_fmt = NULL;
    (void)format_lazy(last_error_buf, sizeof last_error_buf, f, lazy_args);
  }
  if (prefix_fmt) {
    char inner[HIPPO__ERROR_MAX];
    const char *f = prefix_fmt;
    size_t at;
    prefix_fmt = NULL;
    memcpy(inner, last_error_buf, sizeof inner);
    at = format_lazy(last_error_buf, sizeof last_error_buf, f, prefix_args);
    if (at + 2 < sizeof last_error_buf) {
      memcpy(last_error_buf + at, ": ", 2);
      at += 2;
      strncpy(last_error_buf + at, inner, sizeof last_error_buf - at - 1);
      last_error_buf[sizeof last_error_buf - 1] = '\0';
    }
  }
}

hippo_status hippo__error_lazy(hippo_status status, const char *fmt,
                               const uint64_t *args, unsigned n) {
  prefix_fmt = NULL;
  lazy_fmt = fmt;
  for (unsigned i = 0; i < n && i < HIPPO__LAZY_ARGS; i++)
    lazy_args[i] = args[i];
  return status;
}

hippo_status hippo__error_lazy_wrap(hippo_status status, const char *fmt,
                                    const uint64_t *args, unsigned n) {
  materialize(); /* an older pending prefix goes into the message */
  prefix_fmt = fmt;
  for (unsigned i = 0; i < n && i < HIPPO__LAZY_ARGS; i++)
    prefix_args[i] = args[i];
  return status;
}

hippo_status hippo__error_set(hippo_status status, const char *fmt, ...) {
  va_list ap;
  lazy_fmt = NULL;
  prefix_fmt = NULL;
  va_start(ap, fmt);
  vsnprintf(last_error_buf, sizeof last_error_buf, fmt, ap);
  va_end(ap);
  return status;
}

hippo_status hippo__error_wrap(hippo_status status, const char *fmt, ...) {
  char inner[HIPPO__ERROR_MAX];
  size_t len;
  va_list ap;
  materialize();
  memcpy(inner, last_error_buf, sizeof inner);
  va_start(ap, fmt);
  vsnprintf(last_error_buf, sizeof last_error_buf, fmt, ap);
  va_end(ap);
  len = strlen(last_error_buf);
  if (len + 2 < sizeof last_error_buf) {
    memcpy(last_error_buf + len, ": ", 2);
    len += 2;
    /* keep as much of the inner message as fits */
    strncpy(last_error_buf + len, inner, sizeof last_error_buf - len - 1);
    last_error_buf[sizeof last_error_buf - 1] = '\0';
  }
  return status;
}

void hippo__error_clear(void) {
  lazy_fmt = NULL;
  prefix_fmt = NULL;
  last_error_buf[0] = '\0';
}

const char *hippo__error_get(void) {
  materialize();
  return last_error_buf;
}

void hippo__error_keep(hippo__error_kept *kept) {
  materialize();
  memcpy(kept->text, last_error_buf, sizeof kept->text);
}

void hippo__error_restore(const hippo__error_kept *kept) {
  lazy_fmt = NULL;
  prefix_fmt = NULL;
  memcpy(last_error_buf, kept->text, sizeof last_error_buf);
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
