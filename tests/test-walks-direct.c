/* test-walks-direct.c -- the check walk of the DIRECT pool meets a broken
 * size map: HIPPO_INTERNAL, never a hang.  The pool's private structs are
 * reached by compiling its file into this test (as test-walks-exclusive.c
 * does the EXCLUSIVE pool's). */
#include <check.h>
#include <string.h>

#define TU_CORE 1
#include "../src/pool_direct.c"
#include "testutil.h"

/* Every map entry taken by some other size: no empty entry is left to end
 * a lookup, which must stop after map_cap probes. */
START_TEST(full_size_map) {
  hippo__backend *be;
  hippo__pool *pool;
  hippo_pool_options o;
  hippo__slice_ref r;
  dpool *p;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.kind = HIPPO_POOL_DIRECT;
  CK_CORE_OK(hippo__backend_dry_create(UINT64_C(1) << 30, 256, &be));
  CK_CORE_OK(hippo__pool_direct_create(be, NULL, &o, &pool));
  CK_CORE_OK(pool->ops->reserve(pool, 1000, &r));
  pool->ops->release(pool, r.slice, 1000);
  CK_CORE_OK(pool->ops->check(pool));
  p = (dpool *)pool;
  for (uint32_t e = 0; e < p->map_cap; e++) {
    p->map[e].size = UINT64_C(4096) * (e + 100);
    p->map[e].head = 0;
    p->map[e].count = 1;
  }
  CK_CORE_FAILS(pool->ops->check(pool), HIPPO_INTERNAL, "DIRECT check");
  memset(p->map, 0, (size_t)p->map_cap * sizeof *p->map);
  p->map_used = 0;
  pool->ops->destroy(pool);
  be->ops->destroy(be);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("walks-direct");
  TCase *t = tcase_create("direct");
  tcase_set_timeout(t, 10);
  tcase_add_test(t, full_size_map);
  suite_add_tcase(s, t);
  return s;
}

int main(void) { return tu_run(suite()); }
