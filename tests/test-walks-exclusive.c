/* test-walks-exclusive.c -- the check walks of the EXCLUSIVE pool meet
 * broken pools: each damage below must give HIPPO_INTERNAL naming it, never
 * a crash or a hang.  The pool's private structs are reached by compiling
 * its file into this test (the core library's copy of it is then not
 * linked). */
#include <check.h>
#include <string.h>

#define TU_CORE 1
#include "../src/pool_exclusive.c"
#include "testutil.h"

static hippo__backend *be;
static hippo__pool *pool;

static void setup(void) {
  hippo_pool_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.kind = HIPPO_POOL_EXCLUSIVE;
  o.max_alloc_size = UINT64_C(1) << 30;
  CK_CORE_OK(hippo__backend_dry_create(UINT64_C(1) << 30, 256, &be));
  CK_CORE_OK(hippo__pool_exclusive_create(be, NULL, &o, &pool));
}

static void teardown(void) {
  pool->ops->destroy(pool);
  be->ops->destroy(be);
}

/* A class bit set over an empty list: found by the list walk, before the
 * report would read the list's head. */
START_TEST(bit_without_list) {
  xpool *p = (xpool *)pool;
  hippo__slice_ref r;
  CK_CORE_OK(pool->ops->reserve(pool, 1000, &r));
  CK_CORE_OK(pool->ops->check(pool));
  p->class_bits[CLASS_COUNT / 64 - 1] |= UINT64_C(1) << 63;
  CK_CORE_FAILS(pool->ops->check(pool), HIPPO_INTERNAL,
                "bitmap bit 1 but list head");
}
END_TEST

/* An exact page (the class page did not fit the free memory) whose size
 * is a class size, or one filed under a class. */
START_TEST(exact_page_damage) {
  xpool *p = (xpool *)pool;
  hippo__slice_ref r;
  uint32_t i;
  /* class(970 MiB) = 1 GiB does not fit beside 100 MiB held */
  CK_CORE_OK(pool->ops->reserve(pool, 100 << 20, &r));
  CK_CORE_OK(pool->ops->reserve(pool, 900 << 20, &r));
  i = r.slice;
  ck_assert_uint_eq(p->pages.slot[i].cls, CLASS_EXACT);
  CK_CORE_OK(pool->ops->check(pool));
  p->pages.slot[i].requested = 500 << 20; /* beyond the reuse bound */
  CK_CORE_FAILS(pool->ops->check(pool), HIPPO_INTERNAL,
                "beyond the reuse bound");
  p->pages.slot[i].requested = 900 << 20;
  pool->ops->release(pool, i, 900 << 20);
  CK_CORE_OK(pool->ops->check(pool));
  p->pages.slot[i].cls = class_index(UINT64_C(1) << 30);
  CK_CORE_FAILS(pool->ops->check(pool), HIPPO_INTERNAL, "class");
  p->pages.slot[i].cls = CLASS_EXACT;
  CK_CORE_OK(pool->ops->check(pool));
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("walks-exclusive");
  TCase *t = tcase_create("exclusive");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_add_test(t, bit_without_list);
  tcase_add_test(t, exact_page_damage);
  suite_add_tcase(s, t);
  return s;
}

int main(void) { return tu_run(suite()); }
