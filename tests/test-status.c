/* test-status.c -- status codes through the ABI: every code of
 * HIPPO_STATUS_MAP has a distinct value, the name "HIPPO_<NAME>" and its
 * message; unknown codes get a fixed name and message, never NULL. */
#include <config.h>

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* The expectations, generated from the same X-macro as the plugin's. */
typedef struct expected_status {
  hippo_status value;
  const char *name;
  const char *message;
} expected_status;

#define EXPECT(name, value, msg) {value, "HIPPO_" #name, msg},
static const expected_status expected[] = {HIPPO_STATUS_MAP(EXPECT)};
#undef EXPECT
#define N_STATUS (sizeof expected / sizeof expected[0])

START_TEST(test_values_distinct) {
  ck_assert_uint_eq(N_STATUS, 18);
  for (size_t i = 0; i < N_STATUS; i++)
    for (size_t j = i + 1; j < N_STATUS; j++)
      ck_assert_msg(expected[i].value != expected[j].value,
                    "%s and %s share the value %d", expected[i].name,
                    expected[j].name, (int)expected[i].value);
  /* The values the ABI promises never to change. */
  ck_assert_int_eq(HIPPO_SUCCESS, 0);
  ck_assert_int_eq(HIPPO_INVALID_ARGUMENT, 1);
  ck_assert_int_eq(HIPPO_INVALID_HANDLE, 2);
  ck_assert_int_eq(HIPPO_OUT_OF_MEMORY, 3);
  ck_assert_int_eq(HIPPO_POOL_CAPACITY_EXCEEDED, 4);
  ck_assert_int_eq(HIPPO_BUFFER_TOO_BIG, 5);
  ck_assert_int_eq(HIPPO_POOL_CONFIG, 6);
  ck_assert_int_eq(HIPPO_POOLS_IN_USE, 7);
  ck_assert_int_eq(HIPPO_UNSUPPORTED, 8);
  ck_assert_int_eq(HIPPO_GRAPH_RECORDING, 9);
  ck_assert_int_eq(HIPPO_INCOMPATIBLE_ABI, 10);
  ck_assert_int_eq(HIPPO_NO_DEVICE, 11);
  ck_assert_int_eq(HIPPO_BACKEND_ERROR, 12);
  ck_assert_int_eq(HIPPO_BUSY, 13);
  ck_assert_int_eq(HIPPO_LOAD_FAILED, 14);
  ck_assert_int_eq(HIPPO_INTERNAL, 15);
  ck_assert_int_eq(HIPPO_PAGE_SIZES_EXHAUSTED, 16);
  ck_assert_int_eq(HIPPO_GRAPH_NEEDS_PAGE, 17);
}
END_TEST

START_TEST(test_names_and_messages) {
  const hippo_api *api = tu_api();
  const expected_status *e = &expected[_i];
  const char *name = api->status_name(e->value);
  const char *msg = api->status_string(e->value);
  ck_assert_ptr_nonnull(name);
  ck_assert_ptr_nonnull(msg);
  ck_assert_str_eq(name, e->name);
  ck_assert_str_eq(msg, e->message);
  ck_assert_uint_gt(strlen(msg), 0);
  ck_assert_str_ne(msg, "unknown status code");
}
END_TEST

START_TEST(test_unknown_codes) {
  const hippo_api *api = tu_api();
  const hippo_status unknown[] = {-1, 18, 19, 100, INT32_MAX, INT32_MIN};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    const char *name = api->status_name(unknown[i]);
    const char *msg = api->status_string(unknown[i]);
    ck_assert_ptr_nonnull(name);
    ck_assert_ptr_nonnull(msg);
    ck_assert_str_eq(name, "HIPPO_UNKNOWN_STATUS");
    ck_assert_str_eq(msg, "unknown status code");
  }
}
END_TEST

/* A fresh thread has seen no failure: last_error is "", never NULL. */
START_TEST(test_last_error_never_null) {
  const hippo_api *api = tu_api();
  ck_assert_ptr_nonnull(api->last_error());
}
END_TEST

static Suite *status_suite(void) {
  Suite *s = suite_create("status");
  TCase *tc = tcase_create("codes");
  tcase_add_test(tc, test_values_distinct);
  tcase_add_loop_test(tc, test_names_and_messages, 0, (int)N_STATUS);
  tcase_add_test(tc, test_unknown_codes);
  tcase_add_test(tc, test_last_error_never_null);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(status_suite()); }
