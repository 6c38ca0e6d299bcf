/* test-error.c -- last_error's messages (src/error.c): kept unformatted at
 * the failure and formatted when read, they must read exactly as printf
 * would have written them at once: every conversion hippo uses, wraps,
 * strings that change after the failure, frames past the limit, keep and
 * restore, and one thread's message never another's. */
#include <config.h>

#include <check.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core.h"
#include "testutil.h"

#pragma GCC diagnostic ignored "-Wformat-nonliteral"

/* What printf writes for fmt and its arguments. */
static const char *printf_of(const char *fmt, ...) {
  static char buf[HIPPO__ERROR_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

#define SAME(fmt, ...)                                                         \
  do {                                                                         \
    ck_assert_int_eq(hippo__error_set(HIPPO_BUSY, fmt, __VA_ARGS__),          \
                     HIPPO_BUSY);                                              \
    ck_assert_str_eq(hippo__error_get(), printf_of(fmt, __VA_ARGS__));         \
  } while (0)

/* Every conversion, length, flag, width and precision hippo's messages
 * use read back as printf writes them. */
START_TEST(test_conversions) {
  char s[] = "stream";
  SAME("%d %d %u %u", -7, 2147483647, 4294967295u, 0u);
  SAME("%llu %llx %#llx %lld", 18446744073709551615ull, 0xdeadbeefull,
       0x10ull, -5ll);
  SAME("%zu %ld %lu %#x %x %X %o", (size_t)12345, -9l, 9ul, 255u, 255u, 255u,
       8u);
  SAME("%p and %p", (void *)s, (void *)NULL);
  SAME("%s|%.3s|%-8s|%8s|%.100s", s, s, s, s, "tail");
  SAME("%c%c 100%% done", 'o', 'k');
  SAME("%hhu %hu %jd %td", (unsigned char)200, (unsigned short)60000,
       (intmax_t)-3, (ptrdiff_t)-4);
  SAME("%s", (const char *)"");
}
END_TEST

/* A string the caller changes after the failure: the message keeps what
 * it said then. */
START_TEST(test_strings_copied) {
  char name[32];
  strcpy(name, "before");
  hippo__error_set(HIPPO_BUSY, "pool %s is full", name);
  strcpy(name, "after!");
  ck_assert_str_eq(hippo__error_get(), "pool before is full");
}
END_TEST

/* Wraps prefix what they wrap, outermost first; past the frame limit the
 * older frames become one formatted frame and nothing is lost. */
START_TEST(test_wraps) {
  char want[HIPPO__ERROR_MAX] = "inner 1";
  hippo__error_set(HIPPO_OUT_OF_MEMORY, "inner %d", 1);
  hippo__error_wrap(HIPPO_OUT_OF_MEMORY, "middle %s", "two");
  ck_assert_str_eq(hippo__error_get(), "middle two: inner 1");
  hippo__error_wrap(HIPPO_OUT_OF_MEMORY, "outer %llu", 3ull);
  ck_assert_str_eq(hippo__error_get(), "outer 3: middle two: inner 1");
  hippo__error_set(HIPPO_BUSY, "inner %d", 1);
  for (int i = 0; i < 3 * HIPPO__ERROR_FRAMES; i++) {
    char next[HIPPO__ERROR_MAX];
    hippo__error_wrap(HIPPO_BUSY, "w%d", i);
    snprintf(next, sizeof next, "w%d: %s", i, want);
    strcpy(want, next);
    if (i % 5 == 0) /* reading between wraps changes nothing */
      ck_assert_str_eq(hippo__error_get(), want);
  }
  ck_assert_str_eq(hippo__error_get(), want);
  /* a wrap with nothing below is a message of its own */
  hippo__error_clear();
  ck_assert_str_eq(hippo__error_get(), "");
  hippo__error_wrap(HIPPO_BUSY, "alone %d", 5);
  ck_assert_str_eq(hippo__error_get(), "alone 5");
}
END_TEST

/* What cannot be kept lazily ('*', floats, more arguments than a frame
 * holds) is formatted at once, exactly. */
START_TEST(test_eager_fallback) {
  SAME("[%*d] %.2f", 6, 42, 3.14159);
  SAME("%d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d", 1, 2, 3, 4,
       5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18);
  hippo__error_set(HIPPO_BUSY, "%.1f MiB", 1.5);
  hippo__error_wrap(HIPPO_BUSY, "reserve(%llu B)", 7ull);
  ck_assert_str_eq(hippo__error_get(), "reserve(7 B): 1.5 MiB");
}
END_TEST

/* Strings longer than the message: cut, never overrun. */
START_TEST(test_long_strings) {
  char big[3 * HIPPO__ERROR_MAX];
  const char *got;
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  hippo__error_set(HIPPO_BUSY, "a %s b %s", big, big);
  hippo__error_wrap(HIPPO_BUSY, "wrap %s", big);
  got = hippo__error_get();
  ck_assert_uint_eq(strlen(got), HIPPO__ERROR_MAX - 1);
  ck_assert(strncmp(got, "wrap xxx", 8) == 0);
}
END_TEST

/* The lazy forms with arguments in an array, and keep/restore around a
 * question that fails on the way. */
START_TEST(test_lazy_keep_restore) {
  uint64_t args[2] = {10, 20};
  hippo__error_kept kept;
  hippo__error_lazy(HIPPO_POOL_CAPACITY_EXCEEDED, "page %llu B, cap %llu B",
                    args, 2);
  hippo__error_lazy_wrap(HIPPO_POOL_CAPACITY_EXCEEDED, "pool %llu", args, 1);
  hippo__error_keep(&kept);
  hippo__error_set(HIPPO_BACKEND_ERROR, "a question failed: %s", "why");
  ck_assert_str_eq(hippo__error_get(), "a question failed: why");
  hippo__error_restore(&kept);
  ck_assert_str_eq(hippo__error_get(), "pool 10: page 10 B, cap 20 B");
  hippo__error_clear();
  hippo__error_keep(&kept);
  hippo__error_set(HIPPO_BUSY, "x");
  hippo__error_restore(&kept);
  ck_assert_str_eq(hippo__error_get(), "");
}
END_TEST

static void *other_thread(void *arg) {
  hippo__error_set(HIPPO_BUSY, "thread %d", 2);
  ck_assert_str_eq(hippo__error_get(), "thread 2");
  return arg;
}

/* Each thread reads its own failure. */
START_TEST(test_per_thread) {
  pthread_t t;
  hippo__error_set(HIPPO_BUSY, "thread %d", 1);
  ck_assert_int_eq(pthread_create(&t, NULL, other_thread, NULL), 0);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  ck_assert_str_eq(hippo__error_get(), "thread 1");
}
END_TEST

int main(void) {
  Suite *s = suite_create("error");
  TCase *tc = tcase_create("messages");
  tcase_add_test(tc, test_conversions);
  tcase_add_test(tc, test_strings_copied);
  tcase_add_test(tc, test_wraps);
  tcase_add_test(tc, test_eager_fallback);
  tcase_add_test(tc, test_long_strings);
  tcase_add_test(tc, test_lazy_keep_restore);
  tcase_add_test(tc, test_per_thread);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
