/* test-fuzz.c -- the fuzz driver (tests/fuzz/driver.h) fed by a seeded
 * PRNG: at least 1,000,000 operations over several seeds, every one
 * checked against the reference model (tests/fuzz/model.h).
 *
 * Each seed makes inputs of 1 to 16 KiB of random bytes (one device's life
 * each) until its share of operations ran.  A failure names the seed, the
 * input and the operation, so it replays: HIPPO_FUZZ_SEED=N runs only that
 * seed.  HIPPO_FUZZ_OPS overrides the total (HIPPO_VALGRIND=1 makes it
 * 20,000: memcheck is ~50x slower).  The same driver is a libFuzzer target
 * (./configure --enable-fuzz; make fuzz). */
#include <config.h>

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz/driver.h"
#include "testutil.h"

#define SEEDS 8

static uint64_t total_ops(void) {
  const char *e = getenv("HIPPO_FUZZ_OPS");
  if (e && *e)
    return strtoull(e, NULL, 10);
  e = getenv("HIPPO_VALGRIND");
  return e && *e == '1' ? 20000 : 1000000;
}

static uint64_t splitmix(uint64_t *x) {
  uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ z >> 30) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ z >> 27) * UINT64_C(0x94D049BB133111EB);
  return z ^ z >> 31;
}

/* A seed's next input (1 to 16 KiB) into buf; its size. */
static size_t next_input(uint64_t *x, uint8_t *buf) {
  size_t n = 1 + splitmix(x) % (16 * 1024);
  for (size_t i = 0; i < n; i++)
    buf[i] = (uint8_t)(splitmix(x) >> 56);
  return n;
}

/* One seed's share: inputs until `ops` operations ran. */
static void run_seed(uint64_t seed, uint64_t ops, hfz_stats *stats) {
  const hippo_api *api = tu_api();
  uint64_t x = seed, start = stats->ops;
  uint8_t *buf = malloc(16 * 1024);
  char why[1024];
  ck_assert_ptr_nonnull(buf);
  for (uint64_t input = 0; stats->ops - start < ops; input++) {
    size_t n = next_input(&x, buf);
    if (hfz_run(api, buf, n, stats, why, sizeof why) != 0) {
      free(buf);
      ck_abort_msg("seed %" PRIu64 ", input %" PRIu64 " (%zu bytes): %s",
                   seed, input, n, why);
    }
  }
  free(buf);
}

static void report(const char *what, const hfz_stats *s) {
  printf("test-fuzz: %s: %" PRIu64 " operations in %" PRIu64
         " device lives, %" PRIu64 " ABI calls (%" PRIu64 " answered a "
         "failure), %" PRIu64 " faults armed, %" PRIu64 " fired, %" PRIu64
         " captures, %" PRIu64 " MiB of patterns read back, %" PRIu64
         " granules mapped\n  by operation:",
         what, s->ops, s->inputs, s->calls, s->failed_calls, s->faults_armed,
         s->faults_fired, s->captures, s->bytes_checked >> 20,
         s->granules_mapped);
  for (int op = 0; op < HFZ_OPS; op++)
    printf(" %s %" PRIu64, hfz_op_name(op), s->by_op[op]);
  printf("\n");
  fflush(stdout);
}

/* Every seed's share of the operations agrees with the model. */
START_TEST(test_fuzz_seeds) {
  hfz_stats stats = {0};
  const char *one = getenv("HIPPO_FUZZ_SEED");
  uint64_t total = total_ops();
  char what[64];
  if (one && *one) {
    run_seed(strtoull(one, NULL, 10), total, &stats);
    snprintf(what, sizeof what, "seed %s", one);
  } else {
    for (uint64_t seed = 1; seed <= SEEDS; seed++)
      run_seed(seed, total / SEEDS, &stats);
    snprintf(what, sizeof what, "seeds 1..%d", SEEDS);
  }
  report(what, &stats);
  ck_assert_uint_ge(stats.ops, total - total / SEEDS);
  ck_assert_uint_gt(stats.faults_fired, 0);
  ck_assert_uint_gt(stats.captures, 0);
  ck_assert_uint_gt(stats.granules_mapped, 0); /* VIRTUAL pools served */
}
END_TEST

/* Inputs beyond CI's seeds that once failed, replayed alone (seed, input
 * index): a retained page whose free failed in graph_retire was not tried
 * again at stream_detach (32/194; the teardown's cleanup would now give it
 * back anyway, so test-faults' test_retained_free_retried_by_detach is
 * that fix's test); a retained stream whose cleanup answered a failure yet
 * gave every page back stayed retained holding nothing (38/74, 41/105,
 * 67/12; seeds 56, 73, 98 and 110 alike): these three fail on that build;
 * relocate_device answered HIPPO_POOL_CAPACITY_EXCEEDED when an ARENA's
 * max_pool_size refused a destination page, which is no room, not a
 * failure (181/101, 216/45: fail on that build); the driver's model took
 * a stream whose detach failed after releasing its reservations for gone,
 * forgot its queued copies and rewrote bytes they still wrote (161/160);
 * a reservation released while a stream that used it (record_use)
 * captured a graph was given out again before that stream's queued copy
 * ran, its event recorded into the graph instead (45/59: fails on
 * fake-hip and fake-cuda on that build, where HOST's emulator recorded
 * the event as if no capture ran).
 */
static const struct {
  uint64_t seed, input;
} regressions[] = {{32, 194},  {38, 74},  {41, 105}, {67, 12},
                   {181, 101}, {216, 45}, {161, 160}, {45, 59}};

START_TEST(test_fuzz_regressions) {
  uint64_t x = regressions[_i].seed;
  uint8_t *buf = malloc(16 * 1024);
  hfz_stats stats = {0};
  char why[1024];
  size_t n = 0;
  ck_assert_ptr_nonnull(buf);
  for (uint64_t input = 0; input <= regressions[_i].input; input++)
    n = next_input(&x, buf);
  if (hfz_run(tu_api(), buf, n, &stats, why, sizeof why) != 0) {
    free(buf);
    ck_abort_msg("seed %" PRIu64 ", input %" PRIu64 " (%zu bytes): %s",
                 regressions[_i].seed, regressions[_i].input, n, why);
  }
  free(buf);
  ck_assert_uint_gt(stats.faults_fired, 0);
}
END_TEST

/* The empty input and a header alone: a device opened and closed. */
START_TEST(test_fuzz_short_inputs) {
  hfz_stats stats = {0};
  char why[1024];
  static const uint8_t header[] = {0, 0, 0, 0};
  ck_assert_msg(hfz_run(tu_api(), header, 0, &stats, why, sizeof why) == 0,
                "%s", why);
  ck_assert_msg(hfz_run(tu_api(), header, sizeof header, &stats, why,
                        sizeof why) == 0,
                "%s", why);
  ck_assert_uint_eq(stats.inputs, 2);
  ck_assert_uint_eq(stats.ops, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("fuzz");
  TCase *tc = tcase_create("seeded");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_fuzz_short_inputs);
  tcase_add_test(tc, test_fuzz_seeds);
  suite_add_tcase(s, tc);
  tc = tcase_create("regressions");
  tcase_add_loop_test(tc, test_fuzz_regressions, 0,
                      (int)(sizeof regressions / sizeof regressions[0]));
  suite_add_tcase(s, tc);
  return tu_run(s);
}
