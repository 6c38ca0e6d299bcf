/* test-stress.c -- threads through the ABI at once: four threads reserve,
 * write, resolve, read back and release on their own streams while a fifth
 * runs the device-wide calls (cleanup, usage, pool reports, check, install
 * attempts, attach and detach of extra streams).  Every pattern reads back
 * intact and every call answers a documented status.  Bounded: a fixed
 * number of operations per thread (HIPPO_STRESS_OPS overrides it).  Run it
 * under ThreadSanitizer with ./configure --enable-sanitizers=thread. */
#include <config.h>

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define MiB TU_MiB
#define KiB TU_KiB
#define WORKERS 4
#define LIVE 32

typedef struct worker {
  const hippo_api *api;
  hippo_device *dev;
  hippo_stream *s;
  void *native;
  unsigned seed;
  long ops;
  char failure[256];
} worker;

static atomic_int workers_done;

static uint64_t next_rand(uint64_t *x) {
  *x = *x * 6364136223846793005ull + 1442695040888963407ull;
  return *x >> 33;
}

static bool fail_at(worker *w, const char *what, hippo_status st) {
  snprintf(w->failure, sizeof w->failure, "%s: %s: %s", what,
           w->api->status_name(st), w->api->last_error());
  return false;
}

/* A slice's bytes: a pattern of (seed, offset), written once, read back. */
static bool check_bytes(worker *w, hippo_handle h, uint64_t size,
                        uint64_t seed, unsigned char *buf) {
  void *p;
  uint64_t got;
  hippo_status st = w->api->resolve(w->s, h, &p, &got);
  if (st != HIPPO_SUCCESS)
    return fail_at(w, "resolve", st);
  if (got != size)
    return fail_at(w, "resolve: size", HIPPO_INTERNAL);
  st = w->api->emu_read(w->dev, p, buf, size);
  if (st != HIPPO_SUCCESS)
    return fail_at(w, "emu_read", st);
  for (uint64_t i = 0; i < size; i++)
    if (buf[i] != tu_pattern(seed, i))
      return fail_at(w, "a pattern changed", HIPPO_INTERNAL);
  return true;
}

static void *work(void *arg) {
  worker *w = arg;
  const hippo_api *api = w->api;
  hippo_handle h[LIVE] = {0};
  uint64_t size[LIVE] = {0}, seed[LIVE] = {0}, x = w->seed;
  unsigned char *buf = malloc(256 * KiB);
  bool ok = buf != NULL;
  for (long op = 0; ok && op < w->ops; op++) {
    int i = (int)(next_rand(&x) % LIVE);
    hippo_status st;
    if (h[i]) {
      ok = check_bytes(w, h[i], size[i], seed[i], buf);
      if (ok && (st = api->release(w->s, h[i])) != HIPPO_SUCCESS)
        ok = fail_at(w, "release", st);
      h[i] = 0;
      continue;
    }
    size[i] = 1 + next_rand(&x) % (256 * KiB);
    seed[i] = (uint64_t)w->seed * 1000003u + (uint64_t)op;
    st = api->reserve(w->s, size[i], HIPPO_MODE_AUTO, &h[i]);
    if (st != HIPPO_SUCCESS) {
      h[i] = 0;
      ok = fail_at(w, "reserve", st);
      break;
    }
    {
      void *p;
      if ((st = api->resolve(w->s, h[i], &p, NULL)) != HIPPO_SUCCESS) {
        ok = fail_at(w, "resolve", st);
        break;
      }
      for (uint64_t k = 0; k < size[i]; k++)
        buf[k] = tu_pattern(seed[i], k);
      if ((st = api->emu_write(w->dev, p, buf, size[i])) != HIPPO_SUCCESS)
        ok = fail_at(w, "emu_write", st);
    }
  }
  for (int i = 0; i < LIVE; i++)
    if (h[i]) {
      if (ok)
        ok = check_bytes(w, h[i], size[i], seed[i], buf);
      (void)api->release(w->s, h[i]);
    }
  free(buf);
  atomic_fetch_add(&workers_done, 1);
  return NULL;
}

/* The maintenance thread: device-wide calls until the workers are done. */
typedef struct maint {
  const hippo_api *api;
  hippo_device *dev;
  hippo_stream *streams[WORKERS];
  long rounds;
  char failure[256];
} maint;

#define EXPECT(m, call, ...)                                                   \
  do {                                                                         \
    hippo_status got_ = (call);                                                \
    const hippo_status ok_[] = {__VA_ARGS__};                                  \
    bool fine_ = false;                                                        \
    for (size_t k_ = 0; k_ < sizeof ok_ / sizeof ok_[0]; k_++)                 \
      fine_ |= got_ == ok_[k_];                                                \
    if (!fine_) {                                                              \
      snprintf((m)->failure, sizeof (m)->failure, "%s: %s: %s", #call,         \
               (m)->api->status_name(got_), (m)->api->last_error());           \
      return NULL;                                                             \
    }                                                                          \
  } while (0)

static void *maintain(void *arg) {
  maint *m = arg;
  const hippo_api *api = m->api;
  tu_layout a, b;
  tu_layout_sliced(&a, 4 * MiB, 256 * KiB);
  tu_layout_sliced(&b, 2 * MiB, 256 * KiB);
  while (atomic_load(&workers_done) < WORKERS) {
    hippo_usage u;
    hippo_pool_report r;
    void *n;
    hippo_stream *e;
    hippo_handle h;
    memset(&u, 0, sizeof u);
    u.struct_size = sizeof u;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    EXPECT(m, api->cleanup(m->dev, NULL), HIPPO_SUCCESS);
    EXPECT(m, api->usage(m->dev, NULL, &u), HIPPO_SUCCESS);
    EXPECT(m, api->pool_report(m->streams[m->rounds % WORKERS], 1, &r),
           HIPPO_SUCCESS);
    EXPECT(m, api->check(m->dev), HIPPO_SUCCESS);
    EXPECT(m, api->pools_install(m->dev, m->rounds & 1 ? &a.layout : &b.layout,
                                 NULL),
           HIPPO_SUCCESS, HIPPO_POOLS_IN_USE);
    EXPECT(m, api->emu_stream_create(m->dev, &n), HIPPO_SUCCESS);
    EXPECT(m, api->stream_attach(m->dev, n, &e), HIPPO_SUCCESS);
    EXPECT(m, api->reserve(e, 4096, HIPPO_MODE_AUTO, &h), HIPPO_SUCCESS);
    EXPECT(m, api->release(e, h), HIPPO_SUCCESS);
    EXPECT(m, api->stream_detach(e), HIPPO_SUCCESS);
    EXPECT(m, api->emu_stream_destroy(m->dev, n), HIPPO_SUCCESS);
    m->rounds++;
  }
  return NULL;
}

START_TEST(test_threads) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev =
      tu_open(api, HIPPO_BACKEND_HOST, TU_GiB,
              tu_layout_sliced(&l, 4 * MiB, 256 * KiB));
  worker w[WORKERS];
  maint m;
  pthread_t t[WORKERS + 1];
  const char *env = getenv("HIPPO_STRESS_OPS");
  long ops = env ? atol(env) : 20000;
  memset(&m, 0, sizeof m);
  m.api = api;
  m.dev = dev;
  atomic_store(&workers_done, 0);
  for (int i = 0; i < WORKERS; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].api = api;
    w[i].dev = dev;
    w[i].s = tu_attach(api, dev, &w[i].native);
    w[i].seed = 7u + (unsigned)i;
    w[i].ops = ops;
    m.streams[i] = w[i].s;
  }
  for (int i = 0; i < WORKERS; i++)
    ck_assert_int_eq(pthread_create(&t[i], NULL, work, &w[i]), 0);
  ck_assert_int_eq(pthread_create(&t[WORKERS], NULL, maintain, &m), 0);
  for (int i = 0; i <= WORKERS; i++)
    pthread_join(t[i], NULL);
  for (int i = 0; i < WORKERS; i++)
    ck_assert_msg(w[i].failure[0] == 0, "worker %d: %s", i, w[i].failure);
  ck_assert_msg(m.failure[0] == 0, "maintenance: %s", m.failure);
  ck_assert_msg(m.rounds > 0, "the maintenance thread never ran a round");
  fprintf(stderr, "test-stress: %d threads x %ld operations, %ld "
          "maintenance rounds\n", WORKERS, ops, m.rounds);
  CK_CHECK(api, dev);
  ck_assert_uint_eq(tu_usage(api, dev, NULL).allocations, 0);
  for (int i = 0; i < WORKERS; i++)
    tu_detach(api, dev, w[i].s, w[i].native);
  CK_OK(api, api->device_close(dev));
}
END_TEST

static Suite *stress_suite(void) {
  Suite *s = suite_create("stress");
  TCase *tc = tcase_create("threads");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_threads);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(stress_suite()); }
