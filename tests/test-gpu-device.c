/* test-gpu-device.c -- placeholder, being written (issue 10). */
#include <config.h>
#include "testutil.h"
START_TEST(test_placeholder) { ck_assert_int_eq(1, 1); }
END_TEST
int main(void) {
  Suite *s = suite_create("gpu-device");
  TCase *tc = tcase_create("placeholder");
  tcase_add_test(tc, test_placeholder);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
