/* test-handles.c -- the generation-tagged handle table: 0 is never valid,
 * released and stale handles fail, forged and foreign ones fail, slots are
 * reused with a new generation, and the table grows without losing any. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "handles.h"

#define INDEX_MASK (HIPPO__HANDLE_MAX_SLOTS - 1)
#define GEN_SHIFT HIPPO__HANDLE_GEN_SHIFT
#define POOL_SHIFT HIPPO__HANDLE_POOL_SHIFT
#define TAG_SHIFT HIPPO__HANDLE_TAG_SHIFT

static hippo_handle alloc(hippo__handles *h, uint64_t size) {
  hippo__slot *s;
  hippo_handle handle;
  ck_assert_int_eq(hippo__handles_alloc(h, &handle, &s), HIPPO_SUCCESS);
  s->size = size;
  s->pool = 1;
  ck_assert_uint_ne(handle, 0);
  ck_assert_int_eq(hippo__handles_check(h), HIPPO_SUCCESS);
  return handle;
}

START_TEST(zero_is_never_valid) {
  hippo__handles h;
  ck_assert_int_eq(hippo__handles_init(&h), HIPPO_SUCCESS);
  ck_assert_ptr_null(hippo__handles_get(&h, 0));
  alloc(&h, 1);
  ck_assert_ptr_null(hippo__handles_get(&h, 0));
  hippo__handles_fini(&h);
}
END_TEST

START_TEST(released_and_stale) {
  hippo__handles h;
  hippo_handle a, b;
  ck_assert_int_eq(hippo__handles_init(&h), HIPPO_SUCCESS);
  a = alloc(&h, 100);
  ck_assert_uint_eq(hippo__handles_get(&h, a)->size, 100);
  hippo__handles_free(&h, hippo__handles_get(&h, a));
  ck_assert_ptr_null(hippo__handles_get(&h, a)); /* released */
  b = alloc(&h, 200);                            /* reuses the slot */
  ck_assert_uint_eq(b & INDEX_MASK, a & INDEX_MASK);
  ck_assert_uint_ne(b, a);
  ck_assert_ptr_null(hippo__handles_get(&h, a)); /* stale */
  ck_assert_uint_eq(hippo__handles_get(&h, b)->size, 200);
  ck_assert_uint_eq(h.live, 1);
  hippo__handles_fini(&h);
}
END_TEST

/* A slot hands out each of its 2^20 - 1 generations once, never 0, then
 * retires: no stale handle ever names a live reservation again. */
START_TEST(generation_wraps_but_never_zero) {
  hippo__handles h;
  hippo_handle first, cur = 0;
  const uint32_t gens = (UINT32_C(1) << HIPPO__HANDLE_GEN_BITS) - 1;
  ck_assert_int_eq(hippo__handles_init(&h), HIPPO_SUCCESS);
  first = alloc(&h, 1);
  hippo__handles_free(&h, hippo__handles_get(&h, first));
  /* Assertions after the loop: Check marks every assertion it passes,
   * which would cost a system call per iteration in fork mode. */
  uint32_t failed = 0, zero_gen = 0, first_again = 0, on_slot0 = 0;
  for (uint32_t i = 0; i < gens + 1; i++) {
    hippo__slot *s;
    failed += hippo__handles_alloc(&h, &cur, &s) != HIPPO_SUCCESS;
    zero_gen +=
        ((cur >> GEN_SHIFT) & ((1u << HIPPO__HANDLE_GEN_BITS) - 1)) == 0;
    first_again += cur == first || hippo__handles_get(&h, first) != NULL;
    on_slot0 += (cur & INDEX_MASK) == (first & INDEX_MASK);
    hippo__handles_free(&h, s);
  }
  ck_assert_uint_eq(failed, 0);
  ck_assert_uint_eq(zero_gen, 0);
  ck_assert_uint_eq(first_again, 0);
  /* slot 0 served `first` and gens - 1 more, then retired */
  ck_assert_uint_eq(on_slot0, gens - 1);
  ck_assert_uint_eq(h.retired, 1);
  ck_assert_uint_eq(cur & INDEX_MASK, (first & INDEX_MASK) + 1);
  ck_assert_int_eq(hippo__handles_check(&h), HIPPO_SUCCESS);
  hippo__handles_fini(&h);
}
END_TEST

/* Tables start their slots at different generations: the first handle of
 * a new table is not the first handle of the previous one. */
START_TEST(tables_start_at_different_generations) {
  hippo__handles a, b;
  ck_assert_int_eq(hippo__handles_init(&a), HIPPO_SUCCESS);
  ck_assert_int_eq(hippo__handles_init(&b), HIPPO_SUCCESS);
  ck_assert_uint_ne(a.first_gen, b.first_gen);
  ck_assert_uint_ne(alloc(&a, 1) >> GEN_SHIFT & 0xFFFFFF,
                    alloc(&b, 1) >> GEN_SHIFT & 0xFFFFFF);
  hippo__handles_fini(&a);
  hippo__handles_fini(&b);
}
END_TEST

/* The four fields of a handle go in and come out unchanged, each in its
 * own bits; the generation after the last comes back to the first only as
 * 0 (retire), and 0 is skipped. */
START_TEST(parts_and_generations) {
  const uint32_t idx = HIPPO__HANDLE_MAX_SLOTS - 1, gen = HIPPO__HANDLE_GEN_MASK;
  const uint32_t pool = HIPPO__HANDLE_TABLE, tag = 4095;
  hippo__handle_parts p = hippo__handle_split(
      hippo__handle_make(tag, pool, gen, idx));
  ck_assert_uint_eq(p.index, idx);
  ck_assert_uint_eq(p.gen, gen);
  ck_assert_uint_eq(p.pool, pool);
  ck_assert_uint_eq(p.tag, tag);
  ck_assert_uint_eq(hippo__handle_make(tag, pool, gen, idx), UINT64_MAX);
  p = hippo__handle_split(hippo__handle_make(1, 2, 3, 4));
  ck_assert_uint_eq(p.tag, 1);
  ck_assert_uint_eq(p.pool, 2);
  ck_assert_uint_eq(p.gen, 3);
  ck_assert_uint_eq(p.index, 4);
  ck_assert_uint_eq(hippo__handle_make(1, 0, 0, 0), UINT64_C(1) << 52);
  ck_assert_uint_eq(hippo__handle_make(0, 1, 0, 0), UINT64_C(1) << 46);
  ck_assert_uint_eq(hippo__handle_make(0, 0, 1, 0), UINT64_C(1) << 26);
  /* generations */
  ck_assert_uint_eq(hippo__gen_next(5, 9), 6);
  ck_assert_uint_eq(hippo__gen_next(gen, 9), 1);   /* 0 is skipped */
  ck_assert_uint_eq(hippo__gen_next(gen, 1), 0);   /* back at the first */
  ck_assert_uint_eq(hippo__gen_next(8, 9), 0);
  for (int i = 0; i < 1000; i++) {
    uint32_t g = hippo__gen_first();
    ck_assert(g >= 1 && g <= gen);
  }
}
END_TEST

/* At most 4095 tables (streams) live at once: the next one is refused
 * with a message that says what to do, and a freed tag serves again. */
START_TEST(tag_limit) {
  enum { LIVE = (1 << HIPPO__HANDLE_TAG_BITS) - 1 };
  static hippo__handles t[LIVE + 1];
  uint32_t failed = 0;
  for (int i = 0; i < LIVE; i++)
    failed += hippo__handles_init(&t[i]) != HIPPO_SUCCESS;
  ck_assert_uint_eq(failed, 0);
  ck_assert_int_eq(hippo__handles_init(&t[LIVE]), HIPPO_BUSY);
  ck_assert_ptr_nonnull(strstr(hippo__error_get(), "stream_attach: 4095"));
  ck_assert_ptr_nonnull(strstr(hippo__error_get(), "detach some"));
  {
    uint32_t freed = t[7].tag;
    hippo__handles_fini(&t[7]);
    ck_assert_int_eq(hippo__handles_init(&t[LIVE]), HIPPO_SUCCESS);
    ck_assert_uint_eq(t[LIVE].tag, freed); /* the only one free */
  }
  for (int i = 0; i <= LIVE; i++)
    if (i != 7)
      hippo__handles_fini(&t[i]);
}
END_TEST

START_TEST(forged_and_foreign) {
  hippo__handles h, other;
  hippo_handle a;
  ck_assert_int_eq(hippo__handles_init(&h), HIPPO_SUCCESS);
  ck_assert_int_eq(hippo__handles_init(&other), HIPPO_SUCCESS);
  ck_assert_uint_ne(h.tag, other.tag);
  a = alloc(&h, 1);
  alloc(&other, 1);
  ck_assert_ptr_null(hippo__handles_get(&h, a ^ 1));         /* index */
  ck_assert_ptr_null(hippo__handles_get(&h, a + (1ull << GEN_SHIFT))); /* gen */
  ck_assert_ptr_null(hippo__handles_get(&h, a ^ (1ull << TAG_SHIFT))); /* tag */
  ck_assert_ptr_null(hippo__handles_get(&h, a ^ (1ull << POOL_SHIFT))); /* pool */
  ck_assert_ptr_null(hippo__handles_get(&h, a | INDEX_MASK)); /* out of range */
  ck_assert_ptr_null(hippo__handles_get(&other, a)); /* another table */
  ck_assert_ptr_null(hippo__handles_get(&h, ~a));
  ck_assert_ptr_nonnull(hippo__handles_get(&h, a));
  hippo__handles_fini(&h);
  hippo__handles_fini(&other);
}
END_TEST

START_TEST(grows_and_keeps_every_slot) {
  enum { N = 5000 };
  hippo__handles h;
  hippo_handle *hs = malloc(N * sizeof *hs);
  ck_assert_int_eq(hippo__handles_init(&h), HIPPO_SUCCESS);
  for (uint64_t i = 0; i < N; i++) {
    hippo__slot *s;
    ck_assert_int_eq(hippo__handles_alloc(&h, &hs[i], &s), HIPPO_SUCCESS);
    s->size = i;
  }
  ck_assert_int_eq(hippo__handles_check(&h), HIPPO_SUCCESS);
  for (uint64_t i = 0; i < N; i++)
    ck_assert_uint_eq(hippo__handles_get(&h, hs[i])->size, i);
  for (uint64_t i = 0; i < N; i += 2)
    hippo__handles_free(&h, hippo__handles_get(&h, hs[i]));
  ck_assert_uint_eq(h.live, N / 2);
  ck_assert_int_eq(hippo__handles_check(&h), HIPPO_SUCCESS);
  for (uint64_t i = 0; i < N; i++)
    ck_assert(!hippo__handles_get(&h, hs[i]) == !(i % 2));
  hippo__handles_fini(&h);
  free(hs);
}
END_TEST

START_TEST(check_finds_broken_counter) {
  hippo__handles h;
  ck_assert_int_eq(hippo__handles_init(&h), HIPPO_SUCCESS);
  alloc(&h, 1);
  h.live++;
  ck_assert_int_eq(hippo__handles_check(&h), HIPPO_INTERNAL);
  h.live--;
  ck_assert_int_eq(hippo__handles_check(&h), HIPPO_SUCCESS);
  hippo__handles_fini(&h);
}
END_TEST

int main(void) {
  Suite *s = suite_create("handles");
  TCase *t = tcase_create("table");
  SRunner *sr;
  int failed;
  tcase_set_timeout(t, 60);
  tcase_add_test(t, zero_is_never_valid);
  tcase_add_test(t, released_and_stale);
  tcase_add_test(t, generation_wraps_but_never_zero);
  tcase_add_test(t, tables_start_at_different_generations);
  tcase_add_test(t, parts_and_generations);
  tcase_add_test(t, forged_and_foreign);
  tcase_add_test(t, tag_limit);
  tcase_add_test(t, grows_and_keeps_every_slot);
  tcase_add_test(t, check_finds_broken_counter);
  suite_add_tcase(s, t);
  sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
