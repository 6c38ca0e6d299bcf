/* test-hostile.c -- placeholder, being written (issue 9). */
#include <config.h>
#include "testutil.h"
START_TEST(test_placeholder) { ck_assert_ptr_nonnull(tu_api()); }
END_TEST
int main(void) {
  Suite *s = suite_create("hostile");
  TCase *tc = tcase_create("placeholder");
  tcase_add_test(tc, test_placeholder);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
