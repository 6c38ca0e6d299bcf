/* test-trace-parse.c -- trace_parse (tools/trace.c) as the tools call it:
 *
 *  - the progress_end hook runs before any message goes to stderr (so a
 *    progress line drawn with `\r` is erased first and the message starts
 *    a line), once, and not at all when the trace parses;
 *  - RMM's null pointer as its `%p` prints it through glibc, `(nil)`, is
 *    pointer 0: an allocation failure's and a 0-byte request's lines are
 *    counted, not events.
 * tests/test-replay-formats.sh checks the same through hippo-replay.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "trace.h"

/* What the hooks saw: calls, and how many bytes stderr held at the first
 * progress_end. */
struct seen {
  int progress, ends;
  long stderr_at_end;
};

static void on_progress(void *arg, size_t done, size_t total) {
  struct seen *s = arg;
  ck_assert_uint_le(done, total);
  s->progress++;
}

static void on_end(void *arg) {
  struct seen *s = arg;
  fflush(stderr);
  if (s->ends++ == 0)
    s->stderr_at_end = lseek(STDERR_FILENO, 0, SEEK_CUR);
}

/* Parses text with the hooks, stderr going to a fresh file; *message
 * receives what stderr got.  The parse's answer. */
static bool parse_hooked(const char *text, struct seen *s, struct trace *t,
                         char *message, size_t size) {
  struct trace_options opt;
  FILE *err = tmpfile();
  int saved = dup(STDERR_FILENO);
  char *buf = strdup(text);
  bool ok;
  size_t n;
  ck_assert_ptr_nonnull(err);
  ck_assert_ptr_nonnull(buf);
  ck_assert_int_ge(saved, 0);
  memset(&opt, 0, sizeof opt);
  memset(s, 0, sizeof *s);
  memset(t, 0, sizeof *t);
  opt.progress = on_progress;
  opt.progress_end = on_end;
  opt.progress_arg = s;
  s->stderr_at_end = -1;
  fflush(stderr);
  ck_assert_int_ge(dup2(fileno(err), STDERR_FILENO), 0);
  ok = trace_parse("t.csv", buf, strlen(buf), &opt, t);
  fflush(stderr);
  ck_assert_int_ge(dup2(saved, STDERR_FILENO), 0);
  close(saved);
  rewind(err);
  n = fread(message, 1, size - 1, err);
  message[n] = '\0';
  fclose(err);
  free(buf);
  return ok;
}

/* A double free on line 4: progress_end once, before the message. */
START_TEST(progress_ends_before_an_error) {
  struct seen s;
  struct trace t;
  char message[512];
  ck_assert(!parse_hooked("op,id,size,stream\na,1,256,0\nf,1\nf,1\n", &s, &t,
                          message, sizeof message));
  ck_assert_int_eq(s.ends, 1);
  ck_assert_int_eq(s.stderr_at_end, 0); /* nothing written yet */
  ck_assert_str_eq(message, "t.csv:4: free of id 1, which is not live (freed "
                            "already on line 3: a double free)\n");
  trace_free(&t);
}
END_TEST

/* No header: the message after the last line, progress_end first too. */
START_TEST(progress_ends_before_no_header) {
  struct seen s;
  struct trace t;
  char message[512];
  ck_assert(!parse_hooked("# only a comment\n", &s, &t, message,
                          sizeof message));
  ck_assert_int_eq(s.ends, 1);
  ck_assert_int_eq(s.stderr_at_end, 0);
  ck_assert(strncmp(message, "t.csv:1: no header line", 23) == 0);
  trace_free(&t);
}
END_TEST

/* 70,000 lines that parse: progress every 65,536 lines, no end call (the
 * caller ends its line itself), nothing on stderr. */
START_TEST(progress_without_end_when_it_parses) {
  struct seen s;
  struct trace t;
  char message[64];
  size_t cap = 64 + 70000 * 24, len;
  char *text = malloc(cap);
  ck_assert_ptr_nonnull(text);
  len = (size_t)snprintf(text, cap, "op,id,size,stream\n");
  for (int i = 0; i < 35000; i++)
    len += (size_t)snprintf(text + len, cap - len, "a,%d,256,0\nf,%d\n", i, i);
  ck_assert(parse_hooked(text, &s, &t, message, sizeof message));
  ck_assert_int_eq(s.progress, 1);
  ck_assert_int_eq(s.ends, 0);
  ck_assert_str_eq(message, "");
  ck_assert_uint_eq(t.count, 70000);
  trace_free(&t);
  free(text);
}
END_TEST

/* RMM's `%p`: 0x7f... pointers, (nil) for nullptr. */
START_TEST(rmm_nil_is_pointer_zero) {
  struct seen s;
  struct trace t;
  char message[256];
  ck_assert_msg(
      parse_hooked("Thread,Time,Action,Pointer,Size,Stream\n"
                   "1,10:00:00.1,allocate,0x7f8a50000000,1024,0\n"
                   "1,10:00:00.2,allocate failure,(nil),1099511627776,0\n"
                   "1,10:00:00.3,allocate,(nil),0,0x55d0c2a1b2c0\n"
                   "1,10:00:00.4,free,(nil),0,0x55d0c2a1b2c0\n"
                   "1,10:00:00.5,free,0x7f8a50000000,1024,0\n",
                   &s, &t, message, sizeof message),
      "refused: %s", message);
  ck_assert_str_eq(message, "");
  ck_assert_int_eq(t.format, TRACE_FORMAT_RMM);
  ck_assert_uint_eq(t.count, 2);
  ck_assert_uint_eq(t.alloc_failures, 1);
  ck_assert_uint_eq(t.null_lines, 2);
  ck_assert_uint_eq(t.peak_live, 1024);
  trace_free(&t);
}
END_TEST

/* "(nil)" only as a whole field: "(nil" or "nil" is no pointer. */
START_TEST(rmm_nil_spelled_otherwise_is_refused) {
  struct seen s;
  struct trace t;
  char message[256];
  ck_assert(!parse_hooked("Thread,Time,Action,Pointer,Size,Stream\n"
                          "1,10:00:00.1,allocate,nil,1024,0\n",
                          &s, &t, message, sizeof message));
  ck_assert(strncmp(message,
                    "t.csv:2: pointer 'nil' is not a hexadecimal number",
                    49) == 0);
  trace_free(&t);
}
END_TEST

static Suite *trace_suite(void) {
  Suite *s = suite_create("trace-parse");
  TCase *tc = tcase_create("parse");
  tcase_add_test(tc, progress_ends_before_an_error);
  tcase_add_test(tc, progress_ends_before_no_header);
  tcase_add_test(tc, progress_without_end_when_it_parses);
  tcase_add_test(tc, rmm_nil_is_pointer_zero);
  tcase_add_test(tc, rmm_nil_spelled_otherwise_is_refused);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(trace_suite()); }
