/* test-hostile.c -- hostile inputs through the ABI: forged and foreign
 * handles, absurd sizes, NULL in every pointer argument, struct sizes of
 * every versioned struct, absurd layouts, stale devices and streams, bad
 * emulated streams and ranges, unknown enum values.
 *
 * Each input expects its exact status (and, where it helps, a fragment of
 * last_error).  Most tests keep a "victim": a HOST device with live
 * reservations of every kind (SLICED, ARENA, EXCLUSIVE, PERSISTENT, zero
 * size) holding byte patterns; after every refused call the victim must be
 * intact -- each handle resolves to the same address and size, the
 * patterns read back, the stream's and the device's usage are unchanged
 * field for field, and check(dev) passes ("a failed call leaves every live
 * reservation intact", include/hippo.h).
 *
 * Calls with a closed device or a detached stream are defined behaviour:
 * README ("Decisions") promises that such a pointer is refused with
 * HIPPO_INVALID_ARGUMENT ("closed already?"), since the pointers hippo
 * hands out are shells that live as long as the plugin. */
#include <config.h>

#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define KiB TU_KiB
#define MiB TU_MiB
#define GiB TU_GiB
#define CAPACITY (64 * MiB) /* the victim's device */
#define CANARY 0xA5

/* ---- the victim -------------------------------------------------------------- */

#define NV 5 /* live reservations of the victim */

typedef struct victim {
  const hippo_api *api;
  hippo_device *dev;
  void *native;
  hippo_stream *s;
  hippo_handle h[NV];
  void *ptr[NV];
  uint64_t size[NV];
  hippo_usage su, du; /* the stream's and the device's usage */
} victim;

/* The victim's reservations: on a 64 MiB device with the default ADAPTIVE
 * layout, 1000 B go to the small SLICED pool, 3 MiB to the ARENA, 20 MiB
 * (above T/4) to the EXCLUSIVE tail, 5000 B to the persistent pool, and a
 * zero-size one holds no memory.  SLICED and ARENA name their handles, the
 * others are named by the handle table. */
static const uint64_t victim_sizes[NV] = {1000, 3 * MiB, 20 * MiB, 5000, 0};
static const hippo_mode victim_modes[NV] = {
    HIPPO_MODE_AUTO, HIPPO_MODE_AUTO, HIPPO_MODE_AUTO, HIPPO_MODE_PERSISTENT,
    HIPPO_MODE_AUTO};

/* The patterned regions of reservation i: its first 4 KiB, and its last
 * 4 KiB when it is larger than 8 KiB (20 MiB of pattern would be slow under
 * valgrind). */
static uint64_t head_len(uint64_t size) { return size < 4096 ? size : 4096; }

static void victim_fill(victim *v, int i) {
  uint64_t n = v->size[i];
  if (n == 0)
    return;
  tu_fill(v->api, v->dev, v->ptr[i], head_len(n), 2 * (uint64_t)i);
  if (n > 8192)
    tu_fill(v->api, v->dev, (char *)v->ptr[i] + n - 4096, 4096,
            2 * (uint64_t)i + 1);
}

static void victim_snap(victim *v) {
  v->su = tu_usage(v->api, v->dev, v->s);
  v->du = tu_usage(v->api, v->dev, NULL);
}

/* Opens the victim's HOST device (`layout`: NULL for ADAPTIVE), attaches a
 * stream and makes its live reservations. */
static void victim_open(victim *v) {
  const hippo_api *api = tu_api();
  memset(v, 0, sizeof *v);
  v->api = api;
  v->dev = tu_open(api, HIPPO_BACKEND_HOST, CAPACITY, NULL);
  v->s = tu_attach(api, v->dev, &v->native);
  for (int i = 0; i < NV; i++) {
    uint64_t got = 0;
    CK_OK(api, api->reserve(v->s, victim_sizes[i], victim_modes[i], &v->h[i]));
    CK_OK(api, api->resolve(v->s, v->h[i], &v->ptr[i], &got));
    ck_assert_uint_eq(got, victim_sizes[i]);
    v->size[i] = got;
    victim_fill(v, i);
  }
  ck_assert_ptr_null(v->ptr[4]); /* zero size: no memory */
  CK_CHECK(api, v->dev);
  victim_snap(v);
}

/* The victim is as it was: same addresses, sizes and bytes, the same
 * figures, and the bookkeeping checks out.  Failures name the caller's
 * line. */
static void intact_at(const victim *v, int line) {
  const hippo_api *api = v->api;
  hippo_usage su, du;
  for (int i = 0; i < NV; i++) {
    void *p = (void *)&p;
    uint64_t size = 12345;
    hippo_status st = api->resolve(v->s, v->h[i], &p, &size);
    ck_assert_msg(st == HIPPO_SUCCESS,
                  "line %d: victim %d (%#llx) no longer resolves: %s: %s",
                  line, i, (unsigned long long)v->h[i], api->status_name(st),
                  api->last_error());
    ck_assert_msg(p == v->ptr[i] && size == v->size[i],
                  "line %d: victim %d moved or shrank: %p/%llu, was "
                  "%p/%llu",
                  line, i, p, (unsigned long long)size, v->ptr[i],
                  (unsigned long long)v->size[i]);
    if (size) {
      tu_verify_at(api, v->dev, p, head_len(size), 2 * (uint64_t)i, __FILE__,
                   line);
      if (size > 8192)
        tu_verify_at(api, v->dev, (const char *)p + size - 4096, 4096,
                     2 * (uint64_t)i + 1, __FILE__, line);
    }
  }
  su = tu_usage(api, v->dev, v->s);
  du = tu_usage(api, v->dev, NULL);
  tu_usage_eq_at(&su, &v->su, __FILE__, line);
  tu_usage_eq_at(&du, &v->du, __FILE__, line);
  tu_check_at(api, v->dev, __FILE__, line);
}
#define INTACT(v) intact_at((v), __LINE__)

static void victim_close(victim *v) {
  const hippo_api *api = v->api;
  for (int i = 0; i < NV; i++)
    CK_OK(api, api->release(v->s, v->h[i]));
  CK_CHECK(api, v->dev);
  tu_detach(api, v->dev, v->s, v->native);
  CK_OK(api, api->device_close(v->dev));
}

static int is_victim(const victim *v, hippo_handle h) {
  for (int i = 0; i < NV; i++)
    if (v->h[i] == h)
      return 1;
  return 0;
}

/* `call` returned `st`: it must be `want`, and last_error must mention
 * `text` (NULL: anything). */
static void refused_at(const hippo_api *api, hippo_status st,
                       hippo_status want, const char *text, const char *call,
                       int line) {
  ck_assert_msg(st == want, "line %d: %s returned %s (%d), expected %s: %s",
                line, call, api->status_name(st), (int)st,
                api->status_name(want), api->last_error());
  if (text)
    ck_assert_msg(strstr(api->last_error(), text) != NULL,
                  "line %d: %s: last_error \"%s\" does not mention \"%s\"",
                  line, call, api->last_error(), text);
}
#define CK_REFUSED(api, call, want, text)                                      \
  refused_at((api), (call), (want), (text), #call, __LINE__)

/* splitmix64: a fixed, reproducible sequence. */
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

/* ---- handles ------------------------------------------------------------------ */

/* 10,000 random 64-bit values (a fixed seed) are never live handles of the
 * victim's stream: resolve, release and record_use refuse each with
 * HIPPO_INVALID_HANDLE, and nothing of the victim changes. */
START_TEST(test_random_handles) {
  victim v;
  void *n2;
  hippo_stream *user;
  uint64_t state = 20240609;
  int tried = 0;
  victim_open(&v);
  user = tu_attach(v.api, v.dev, &n2);
  victim_snap(&v);
  for (int i = 0; i < 10000; i++) {
    hippo_handle h = next_random(&state);
    if (is_victim(&v, h))
      continue; /* 1 in ~2^60: not hostile, a real handle */
    CK_NOT_LIVE(v.api, v.s, user, h);
    tried++;
  }
  ck_assert_int_eq(tried, 10000);
  CK_ERROR_HAS(v.api, "not live on this stream");
  INTACT(&v);
  tu_detach(v.api, v.dev, user, n2);
  victim_close(&v);
}
END_TEST

/* Near misses of every live handle (SLICED, ARENA, table, persistent, zero
 * size): h+1, h-1, the next and previous generation, every single bit
 * flipped (tag, pool, generation, index), the generation field inverted,
 * and 0 and ~0.  None names a live reservation unless it equals one. */
START_TEST(test_near_handles) {
  victim v;
  int tried = 0;
  victim_open(&v);
  for (int i = 0; i < NV; i++) {
    hippo_handle h = v.h[i], cand[64 + 7];
    int n = 0;
    cand[n++] = h + 1;
    cand[n++] = h - 1;
    cand[n++] = h + (UINT64_C(1) << 26); /* generation + 1 */
    cand[n++] = h - (UINT64_C(1) << 26); /* generation - 1 */
    cand[n++] = h ^ (UINT64_C(0xFFFFF) << 26); /* every generation bit */
    cand[n++] = 0;
    cand[n++] = UINT64_MAX;
    for (int b = 0; b < 64; b++)
      cand[n++] = h ^ (UINT64_C(1) << b);
    for (int k = 0; k < n; k++) {
      if (is_victim(&v, cand[k]))
        continue;
      CK_NOT_LIVE(v.api, v.s, v.s, cand[k]);
      tried++;
    }
  }
  ck_assert_int_ge(tried, NV * 64);
  INTACT(&v);
  victim_close(&v);
}
END_TEST

/* Handles of other streams: another device's, a live stream's of the same
 * device used on the victim's stream (and the victim's on it), and a
 * detached stream's, used on the victim's stream (still attached) and on a
 * stream attached after the detach.  Each is HIPPO_INVALID_HANDLE and stays
 * live where it belongs. */
START_TEST(test_foreign_handles) {
  victim v;
  const hippo_api *api;
  hippo_device *other;
  void *no, *n2, *n3, *n4;
  hippo_stream *os, *s2, *s3, *s4;
  hippo_handle ho, h2, h3[3];
  void *p;
  victim_open(&v);
  api = v.api;
  other = tu_open(api, HIPPO_BACKEND_HOST, CAPACITY, NULL);
  os = tu_attach(api, other, &no);
  ho = tu_reserve(api, os, 1000);
  s2 = tu_attach(api, v.dev, &n2);
  h2 = tu_reserve(api, s2, 1000);
  /* a stream that will detach with live reservations of three kinds */
  s3 = tu_attach(api, v.dev, &n3);
  h3[0] = tu_reserve(api, s3, 1000);
  h3[1] = tu_reserve(api, s3, 20 * MiB);
  CK_OK(api, api->reserve(s3, 5000, HIPPO_MODE_PERSISTENT, &h3[2]));
  victim_snap(&v);

  CK_NOT_LIVE(api, v.s, v.s, ho); /* another device's */
  CK_NOT_LIVE(api, v.s, s2, h2);  /* another live stream's, same device */
  for (int i = 0; i < NV; i++)
    CK_NOT_LIVE(api, s2, v.s, v.h[i]); /* the victim's, on another stream */
  CK_OK(api, api->resolve(os, ho, &p, NULL));
  CK_OK(api, api->resolve(s2, h2, &p, NULL));
  CK_OK(api, api->stream_detach(s3));
  CK_OK(api, tu_emu(api)->stream_destroy(v.dev, n3));
  victim_snap(&v);
  s4 = tu_attach(api, v.dev, &n4);
  for (int i = 0; i < 3; i++) {
    CK_NOT_LIVE(api, v.s, s2, h3[i]); /* a detached stream's */
    CK_NOT_LIVE(api, s2, v.s, h3[i]);
    CK_NOT_LIVE(api, s4, v.s, h3[i]); /* attached after the detach */
  }
  INTACT(&v);
  CK_OK(api, api->release(s2, h2));
  CK_OK(api, api->release(os, ho));
  tu_detach(api, v.dev, s2, n2);
  tu_detach(api, v.dev, s4, n4);
  tu_detach(api, other, os, no);
  CK_OK(api, api->device_close(other));
  victim_close(&v);
}
END_TEST

/* Double release, for every kind of reservation: the second release is
 * HIPPO_INVALID_HANDLE.  Released, then the same size reserved again (it
 * may take the freed slice or slot): the old handle still does not work,
 * and does not release the new reservation. */
START_TEST(test_double_release) {
  victim v;
  const hippo_api *api;
  victim_open(&v);
  api = v.api;
  for (int i = 0; i < NV; i++) {
    hippo_handle h, again;
    void *p;
    uint64_t size;
    CK_OK(api, api->reserve(v.s, victim_sizes[i], victim_modes[i], &h));
    CK_OK(api, api->release(v.s, h));
    CK_REFUSED(api, api->release(v.s, h), HIPPO_INVALID_HANDLE, "release");
    CK_OK(api, api->reserve(v.s, victim_sizes[i], victim_modes[i], &again));
    ck_assert_uint_ne(again, h);
    CK_NOT_LIVE(api, v.s, v.s, h);
    CK_OK(api, api->resolve(v.s, again, &p, &size));
    ck_assert_uint_eq(size, victim_sizes[i]);
    CK_OK(api, api->release(v.s, again));
    CK_REFUSED(api, api->release(v.s, again), HIPPO_INVALID_HANDLE, "release");
  }
  /* the victim's reservations are untouched (the figures moved: peaks) */
  CK_OK(api, api->cleanup(v.dev, NULL));
  ck_assert_uint_eq(tu_usage(api, v.dev, v.s).allocations, v.su.allocations);
  ck_assert_uint_eq(tu_usage(api, v.dev, v.s).bytes_in_use,
                    v.su.bytes_in_use);
  victim_snap(&v);
  INTACT(&v);
  victim_close(&v);
}
END_TEST

/* record_use with hostile arguments: the user NULL, a stream of another
 * device, a detached stream, a device posing as a stream, and the owner
 * NULL are HIPPO_INVALID_ARGUMENT; a forged handle with a good user is
 * HIPPO_INVALID_HANDLE; user == stream has nothing to do (success), and a
 * second record of the same (reservation, user) is harmless. */
START_TEST(test_record_use_hostile) {
  victim v;
  const hippo_api *api;
  hippo_device *other;
  void *no, *n2, *n3;
  hippo_stream *os, *s2, *dead;
  hippo_handle h;
  victim_open(&v);
  api = v.api;
  other = tu_open(api, HIPPO_BACKEND_DRY, CAPACITY, NULL);
  os = tu_attach(api, other, &no);
  s2 = tu_attach(api, v.dev, &n2);
  dead = tu_attach(api, v.dev, &n3);
  tu_detach(api, v.dev, dead, n3);
  victim_snap(&v);
  CK_REFUSED(api, api->record_use(v.s, v.h[0], NULL), HIPPO_INVALID_ARGUMENT,
             "record_use: stream is NULL");
  CK_REFUSED(api, api->record_use(v.s, v.h[0], os), HIPPO_INVALID_ARGUMENT,
             "another device");
  CK_REFUSED(api, api->record_use(v.s, v.h[0], dead), HIPPO_INVALID_ARGUMENT,
             "detached already");
  CK_REFUSED(api, api->record_use(v.s, v.h[0], (hippo_stream *)(void *)v.dev),
             HIPPO_INVALID_ARGUMENT, "record_use");
  CK_REFUSED(api, api->record_use(NULL, v.h[0], s2), HIPPO_INVALID_ARGUMENT,
             "record_use");
  CK_REFUSED(api, api->record_use(dead, v.h[0], s2), HIPPO_INVALID_ARGUMENT,
             "detached already");
  CK_REFUSED(api, api->record_use(v.s, v.h[0] ^ 1, s2), HIPPO_INVALID_HANDLE,
             "record_use");
  /* the victim's handle on s2 */
  CK_REFUSED(api, api->record_use(s2, v.h[0], v.s), HIPPO_INVALID_HANDLE,
             "record_use");
  CK_OK(api, api->record_use(v.s, v.h[0], v.s)); /* its own stream */
  INTACT(&v);
  /* a real use, recorded twice, on a fresh reservation */
  h = tu_reserve(api, v.s, 2000);
  CK_OK(api, api->record_use(v.s, h, s2));
  CK_OK(api, api->record_use(v.s, h, s2));
  CK_OK(api, api->release(v.s, h));
  CK_REFUSED(api, api->release(v.s, h), HIPPO_INVALID_HANDLE, "release");
  CK_REFUSED(api, api->record_use(v.s, h, s2), HIPPO_INVALID_HANDLE,
             "record_use");
  CK_OK(api, tu_emu(api)->stream_sync(v.dev, n2));
  tu_detach(api, v.dev, s2, n2);
  tu_detach(api, other, os, no);
  CK_OK(api, api->device_close(other));
  victim_snap(&v); /* the used slice may now be free room */
  INTACT(&v);
  victim_close(&v);
}
END_TEST

/* ---- sizes -------------------------------------------------------------------- */

/* Reservation sizes, in both modes.  0 succeeds with a handle that
 * resolves to (NULL, 0); 1 succeeds; sizes no pool of the layout takes --
 * UINT64_MAX, and those that overflow when aligned (UINT64_MAX - 1,
 * UINT64_MAX - 255), 2^63 + 1 and the device's capacity + 1 -- are
 * HIPPO_BUFFER_TOO_BIG in either mode (the persistent pool takes nothing
 * larger than the device either), leave *handle alone and change nothing
 * (no page given back, nothing relocated).  An invalid mode is
 * HIPPO_INVALID_ARGUMENT. */
START_TEST(test_reserve_sizes) {
  static const uint64_t too_big[] = {
      UINT64_MAX,        UINT64_MAX - 1, UINT64_MAX - 255,
      UINT64_MAX - 256,  (UINT64_C(1) << 63) + 1, UINT64_C(1) << 63,
      CAPACITY + 1,      CAPACITY + 256, 2 * CAPACITY};
  static const hippo_mode modes[] = {HIPPO_MODE_AUTO, HIPPO_MODE_PERSISTENT};
  victim v;
  const hippo_api *api;
  victim_open(&v);
  api = v.api;
  for (int m = 0; m < 2; m++) {
    hippo_handle h = 0;
    void *p = (void *)&p;
    uint64_t size = 99;
    /* 0 */
    CK_OK(api, api->reserve(v.s, 0, modes[m], &h));
    ck_assert_uint_ne(h, 0);
    CK_OK(api, api->resolve(v.s, h, &p, &size));
    ck_assert_ptr_null(p);
    ck_assert_uint_eq(size, 0);
    CK_OK(api, api->release(v.s, h));
    /* 1 */
    CK_OK(api, api->reserve(v.s, 1, modes[m], &h));
    CK_OK(api, api->resolve(v.s, h, &p, &size));
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(size, 1);
    CK_OK(api, api->release(v.s, h));
    CK_OK(api, api->cleanup(v.dev, NULL)); /* the page of 1 B goes back */
    victim_snap(&v);                       /* (the peaks moved) */
    INTACT(&v);
    for (size_t i = 0; i < sizeof too_big / sizeof too_big[0]; i++) {
      h = 0xfeed;
      CK_REFUSED(api, api->reserve(v.s, too_big[i], modes[m], &h),
                 HIPPO_BUFFER_TOO_BIG, "accepts");
      ck_assert_uint_eq(h, 0xfeed);
    }
    INTACT(&v);
  }
  /* the whole device cannot be had while the victim holds some of it */
  {
    hippo_handle h = 0xfeed;
    CK_REFUSED(api, api->reserve(v.s, CAPACITY, HIPPO_MODE_AUTO, &h),
               HIPPO_OUT_OF_MEMORY, "out of memory");
    CK_REFUSED(api, api->reserve(v.s, CAPACITY, HIPPO_MODE_PERSISTENT, &h),
               HIPPO_OUT_OF_MEMORY, "out of memory");
    ck_assert_uint_eq(h, 0xfeed);
    INTACT(&v);
  }
  {
    const hippo_mode bad[] = {2, 3, 0x80000000u, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      hippo_handle h = 0xfeed;
      CK_REFUSED(api, api->reserve(v.s, 1000, bad[i], &h),
                 HIPPO_INVALID_ARGUMENT, "mode");
      CK_REFUSED(api, api->reserve(v.s, 0, bad[i], &h), HIPPO_INVALID_ARGUMENT,
                 "mode");
      ck_assert_uint_eq(h, 0xfeed);
    }
  }
  INTACT(&v);
  victim_close(&v);
}
END_TEST

/* A custom layout whose pools take "anything" (a DIRECT pool, an EXCLUSIVE
 * pool taking up to 1 TiB) on a 64 MiB device: a request larger than the
 * device is HIPPO_BUFFER_TOO_BIG, naming the largest size the layout takes
 * (the device), not an out-of-memory after cleaning up. */
START_TEST(test_reserve_beyond_device_custom) {
  const hippo_api *api = tu_api();
  for (int k = 0; k < 2; k++) {
    tu_layout l;
    hippo_device *dev;
    hippo_stream *s;
    void *n;
    hippo_handle h = 0xfeed;
    hippo_emu_counters before, after;
    tu_layout_init(&l);
    tu_layout_add_sliced(&l, MiB, 64 * KiB, 0);
    if (k == 0)
      (void)tu_layout_add(&l, HIPPO_POOL_DIRECT);
    else
      tu_layout_add(&l, HIPPO_POOL_EXCLUSIVE)->max_alloc_size = TU_TiB;
    dev = tu_open(api, HIPPO_BACKEND_DRY, CAPACITY, &l.layout);
    s = tu_attach(api, dev, &n);
    before = tu_counters(api, dev);
    CK_REFUSED(api, api->reserve(s, CAPACITY + 1, HIPPO_MODE_AUTO, &h),
               HIPPO_BUFFER_TOO_BIG, "67108864 B");
    CK_REFUSED(api, api->reserve(s, TU_TiB, HIPPO_MODE_AUTO, &h),
               HIPPO_BUFFER_TOO_BIG, "no pool accepts");
    CK_REFUSED(api, api->reserve(s, UINT64_MAX - 255, HIPPO_MODE_AUTO, &h),
               HIPPO_BUFFER_TOO_BIG, "no pool accepts");
    ck_assert_uint_eq(h, 0xfeed);
    after = tu_counters(api, dev);
    /* no driver allocation was even tried */
    ck_assert_uint_eq(after.calls[HIPPO_CALL_ALLOC],
                      before.calls[HIPPO_CALL_ALLOC]);
    h = tu_reserve(api, s, CAPACITY); /* the device itself still fits */
    CK_OK(api, api->release(s, h));
    CK_CHECK(api, dev);
    tu_detach(api, dev, s, n);
    CK_OK(api, api->device_close(dev));
  }
}
END_TEST

/* ---- NULL pointers ------------------------------------------------------------- */

/* Every slot taking a device refuses `bad` (NULL, a closed device, a stream
 * posing as a device) with HIPPO_INVALID_ARGUMENT, last_error naming the
 * call and `text`; nothing is written to an output. */
static void device_slots_refused_at(const hippo_api *api, hippo_device *bad,
                                    const char *text, int line) {
  hippo_device_info info;
  hippo_usage u;
  hippo_emu_counters c;
  hippo_relocation_report rep;
  tu_layout l;
  hippo_stream *s = (hippo_stream *)(void *)&s;
  void *native = (void *)&native;
  uint64_t id = 55, live = 66;
  char buf[16] = {0};
  hippo_status st;
  TU_SIZED(info);
  TU_SIZED(u);
  TU_SIZED(c);
  TU_SIZED(rep);
#define DEV_SLOT(call, name)                                                   \
  do {                                                                         \
    st = (call);                                                               \
    refused_at(api, st, HIPPO_INVALID_ARGUMENT, text, #call, line);            \
    refused_at(api, st, HIPPO_INVALID_ARGUMENT, name ":", #call, line);        \
  } while (0)
  DEV_SLOT(api->device_close(bad), "device_close");
  DEV_SLOT(api->device_info(bad, &info), "device_info");
  DEV_SLOT(api->stream_attach(bad, NULL, &s), "stream_attach");
  DEV_SLOT(api->pools_install(bad, tu_layout_preset(&l, HIPPO_PRESET_ADAPTIVE),
                              &live),
           "pools_install");
  DEV_SLOT(api->relocate_device(bad), "relocate_device");
  DEV_SLOT(api->cleanup(bad, NULL), "cleanup");
  DEV_SLOT(api->reclaim(bad, NULL), "reclaim");
  DEV_SLOT(api->graph_retire(bad, 1), "graph_retire");
  DEV_SLOT(api->usage(bad, NULL, &u), "usage");
  DEV_SLOT(api->check(bad), "check");
  DEV_SLOT(tu_emu(api)->stream_create(bad, &native), "emu_stream_create");
  DEV_SLOT(tu_emu(api)->stream_destroy(bad, NULL), "emu_stream_destroy");
  DEV_SLOT(tu_emu(api)->capture_begin(bad, NULL, &id), "emu_capture_begin");
  DEV_SLOT(tu_emu(api)->capture_end(bad, NULL), "emu_capture_end");
  DEV_SLOT(tu_emu(api)->inject_fault(bad, HIPPO_CALL_ALLOC, 1,
                                 HIPPO_OUT_OF_MEMORY),
           "emu_inject_fault");
  DEV_SLOT(tu_emu(api)->read(bad, buf, buf, 1), "emu_read");
  DEV_SLOT(tu_emu(api)->write(bad, buf, buf, 1), "emu_write");
  DEV_SLOT(tu_emu(api)->counters(bad, &c), "emu_counters");
  DEV_SLOT(api->relocate_with(bad, NULL, HIPPO_RELOCATE_EXPLICIT, &rep),
           "relocate_with");
  DEV_SLOT(api->relocation_report(bad, NULL, &rep), "relocation_report");
  DEV_SLOT(tu_emu(api)->copy(bad, NULL, buf, buf + 8, 8), "emu_copy");
  DEV_SLOT(tu_emu(api)->stream_sync(bad, NULL), "emu_stream_sync");
#undef DEV_SLOT
  ck_assert_ptr_eq(s, (hippo_stream *)(void *)&s);
  ck_assert_ptr_eq(native, (void *)&native);
  ck_assert_uint_eq(id, 55);
  ck_assert_uint_eq(live, 66);
  ck_assert_uint_eq(info.backend, 0);
  ck_assert_uint_eq(u.allocations, 0);
  ck_assert_uint_eq(c.calls[0], 0);
  ck_assert_uint_eq(rep.outcome, 0);
}
#define CK_DEVICE_SLOTS_REFUSED(api, bad, text)                                \
  device_slots_refused_at((api), (bad), (text), __LINE__)

/* Every slot taking a stream refuses `bad` (NULL only where the header does
 * not allow it, a detached stream, a device posing as a stream) with
 * HIPPO_INVALID_ARGUMENT naming the call and `text`.  `dev` is an open
 * device, `good` an attached stream of it, `h` a live handle of `good`. */
static void stream_slots_refused_at(const hippo_api *api, hippo_device *dev,
                                    hippo_stream *good, hippo_handle h,
                                    hippo_stream *bad, const char *text,
                                    int line) {
  hippo_pool_report r;
  hippo_relocation_report rep;
  hippo_usage u;
  hippo_handle out = 0xfeed;
  hippo_relocation_need need = 77;
  void *p = (void *)&p;
  uint64_t size = 88;
  hippo_status st;
  TU_SIZED(r);
  TU_SIZED(rep);
  TU_SIZED(u);
#define STREAM_SLOT(call, name)                                                \
  do {                                                                         \
    st = (call);                                                               \
    refused_at(api, st, HIPPO_INVALID_ARGUMENT, text, #call, line);            \
    refused_at(api, st, HIPPO_INVALID_ARGUMENT, name ":", #call, line);        \
  } while (0)
  STREAM_SLOT(api->stream_detach(bad), "stream_detach");
  STREAM_SLOT(api->reserve(bad, 16, HIPPO_MODE_AUTO, &out), "reserve");
  STREAM_SLOT(api->release(bad, h), "release");
  STREAM_SLOT(api->resolve(bad, h, &p, &size), "resolve");
  STREAM_SLOT(api->record_use(bad, h, good), "record_use");
  STREAM_SLOT(api->record_use(good, h, bad), "record_use");
  STREAM_SLOT(api->persistent_begin(bad), "persistent_begin");
  STREAM_SLOT(api->persistent_end(bad), "persistent_end");
  STREAM_SLOT(api->relocate(bad), "relocate");
  STREAM_SLOT(api->relocate_when_wanted(bad), "relocate_when_wanted");
  STREAM_SLOT(api->pool_report(bad, 0, &r, NULL), "pool_report");
  STREAM_SLOT(api->relocation_need(bad, &need), "relocation_need");
  STREAM_SLOT(api->capture_announce(bad, HIPPO_CAPTURE_QUERY),
              "capture_announce");
  if (bad) { /* NULL means "every stream" for these */
    STREAM_SLOT(api->cleanup(dev, bad), "cleanup");
    STREAM_SLOT(api->reclaim(dev, bad), "reclaim");
    STREAM_SLOT(api->usage(dev, bad, &u), "usage");
    STREAM_SLOT(api->relocate_with(dev, bad, HIPPO_RELOCATE_EXPLICIT, &rep),
                "relocate_with");
    STREAM_SLOT(api->relocation_report(dev, bad, &rep), "relocation_report");
  }
#undef STREAM_SLOT
  ck_assert_uint_eq(out, 0xfeed);
  ck_assert_uint_eq(need, 77);
  ck_assert_ptr_eq(p, (void *)&p);
  ck_assert_uint_eq(size, 88);
  ck_assert_uint_eq(r.kind, 0);
  ck_assert_uint_eq(u.allocations, 0);
  ck_assert_uint_eq(rep.outcome, 0);
}
#define CK_STREAM_SLOTS_REFUSED(api, dev, good, h, bad, text)                  \
  stream_slots_refused_at((api), (dev), (good), (h), (bad), (text), __LINE__)

/* NULL for the device or the stream, in every slot that takes one and does
 * not allow NULL: HIPPO_INVALID_ARGUMENT naming the call. */
START_TEST(test_null_objects) {
  victim v;
  victim_open(&v);
  CK_DEVICE_SLOTS_REFUSED(v.api, NULL, "device is NULL");
  CK_STREAM_SLOTS_REFUSED(v.api, v.dev, v.s, v.h[0], NULL, "stream is NULL");
  INTACT(&v);
  victim_close(&v);
}
END_TEST

/* NULL for every output and input pointer the header does not allow to be
 * NULL: HIPPO_INVALID_ARGUMENT, last_error naming the call and the
 * argument; nothing is reserved, attached, opened or created. */
START_TEST(test_null_arguments) {
  victim v;
  const hippo_api *api;
  hippo_device_desc d;
  hippo_device *dev = (hippo_device *)(void *)&dev;
  uint32_t version = HIPPO_ABI_VERSION;
  const hippo_api *table = NULL;
  char buf[8];
  victim_open(&v);
  api = v.api;
  TU_SIZED(d);
  d.backend = HIPPO_BACKEND_DRY;
  CK_REFUSED(api, api->device_open(NULL, &dev), HIPPO_INVALID_ARGUMENT,
             "hippo_device_desc must not be NULL");
  CK_REFUSED(api, api->device_open(&d, NULL), HIPPO_INVALID_ARGUMENT,
             "device_open: device must not be NULL");
  ck_assert_ptr_eq(dev, (hippo_device *)(void *)&dev);
  CK_REFUSED(api, api->device_info(v.dev, NULL), HIPPO_INVALID_ARGUMENT,
             "device_info: info must not be NULL");
  CK_REFUSED(api, api->stream_attach(v.dev, NULL, NULL), HIPPO_INVALID_ARGUMENT,
             "stream_attach: stream must not be NULL");
  CK_REFUSED(api, api->pools_install(v.dev, NULL, NULL), HIPPO_INVALID_ARGUMENT,
             "pools_install: layout must not be NULL");
  CK_REFUSED(api, api->reserve(v.s, 1000, HIPPO_MODE_AUTO, NULL),
             HIPPO_INVALID_ARGUMENT, "reserve: handle must not be NULL");
  CK_REFUSED(api, api->reserve(v.s, 0, HIPPO_MODE_PERSISTENT, NULL),
             HIPPO_INVALID_ARGUMENT, "reserve: handle must not be NULL");
  CK_REFUSED(api, api->resolve(v.s, v.h[0], NULL, NULL), HIPPO_INVALID_ARGUMENT,
             "resolve: device_ptr must not be NULL");
  CK_REFUSED(api, api->resolve(v.s, v.h[0], NULL, &(uint64_t){0}),
             HIPPO_INVALID_ARGUMENT, "device_ptr");
  CK_REFUSED(api, api->usage(v.dev, v.s, NULL), HIPPO_INVALID_ARGUMENT,
             "usage: usage must not be NULL");
  CK_REFUSED(api, api->usage(v.dev, NULL, NULL), HIPPO_INVALID_ARGUMENT,
             "usage: usage must not be NULL");
  CK_REFUSED(api, api->pool_report(v.s, 0, NULL, NULL), HIPPO_INVALID_ARGUMENT,
             "pool_report: report must not be NULL");
  CK_REFUSED(api, tu_emu(api)->stream_create(v.dev, NULL),
             HIPPO_INVALID_ARGUMENT,
             "emu_stream_create: native_stream must not be NULL");
  CK_REFUSED(api, tu_emu(api)->capture_begin(v.dev, v.native, NULL),
             HIPPO_INVALID_ARGUMENT,
             "emu_capture_begin: capture_id must not be NULL");
  CK_REFUSED(api, tu_emu(api)->read(v.dev, v.ptr[0], NULL, 8),
             HIPPO_INVALID_ARGUMENT, "emu_read: host must not be NULL");
  CK_REFUSED(api, tu_emu(api)->write(v.dev, v.ptr[0], NULL, 8),
             HIPPO_INVALID_ARGUMENT, "emu_write: host must not be NULL");
  /* device_ptr NULL: no such page */
  CK_REFUSED(api, tu_emu(api)->read(v.dev, NULL, buf, 8),
             HIPPO_INVALID_ARGUMENT, "not inside a live page");
  CK_REFUSED(api, tu_emu(api)->write(v.dev, NULL, buf, 8),
             HIPPO_INVALID_ARGUMENT, "not inside a live page");
  CK_REFUSED(api, tu_emu(api)->copy(v.dev, v.native, NULL, v.ptr[0], 8),
             HIPPO_INVALID_ARGUMENT, "destination");
  CK_REFUSED(api, tu_emu(api)->copy(v.dev, v.native, v.ptr[0], NULL, 8),
             HIPPO_INVALID_ARGUMENT, "source");
  CK_REFUSED(api, tu_emu(api)->counters(v.dev, NULL), HIPPO_INVALID_ARGUMENT,
             "emu_counters: counters must not be NULL");
  CK_REFUSED(api, api->relocation_need(v.s, NULL), HIPPO_INVALID_ARGUMENT,
             "relocation_need: need must not be NULL");
  CK_REFUSED(api, api->relocation_report(v.dev, v.s, NULL),
             HIPPO_INVALID_ARGUMENT,
             "relocation_report: report must not be NULL");
  CK_REFUSED(api, api->relocation_report(v.dev, NULL, NULL),
             HIPPO_INVALID_ARGUMENT,
             "relocation_report: report must not be NULL");
  /* the emulated default stream (NULL) exists, but is no capture's and
   * cannot be destroyed */
  CK_REFUSED(api, tu_emu(api)->stream_destroy(v.dev, NULL),
             HIPPO_INVALID_ARGUMENT, "default stream");
  CK_REFUSED(api, tu_emu(api)->capture_begin(v.dev, NULL, &(uint64_t){0}),
             HIPPO_INVALID_ARGUMENT, "default stream");
  CK_REFUSED(api, tu_emu(api)->capture_end(v.dev, NULL), HIPPO_INVALID_ARGUMENT,
             "not capturing");
  /* the entry point */
  CK_REFUSED(api, tu_entry()(NULL, &table), HIPPO_INVALID_ARGUMENT,
             "hippo_plugin_entry");
  CK_REFUSED(api, tu_entry()(&version, NULL), HIPPO_INVALID_ARGUMENT,
             "hippo_plugin_entry");
  ck_assert_ptr_null(table);
  /* the diagnostics never answer NULL, whatever the status */
  {
    const hippo_status odd[] = {-1, 18, 100, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
      ck_assert_ptr_nonnull(api->status_string(odd[i]));
      ck_assert_ptr_nonnull(api->status_name(odd[i]));
    }
  }
  ck_assert_ptr_nonnull(api->last_error());
  INTACT(&v);
  victim_close(&v);
}
END_TEST

/* The NULLs the header allows, and that they work: stream_attach's native
 * stream (the default stream), resolve's size, pools_install's
 * bytes_in_use (when it installs and when it refuses), cleanup's,
 * reclaim's, usage's, relocate_with's and relocation_report's stream
 * (every stream), relocate_with's report; emu_copy and emu_stream_sync on
 * the emulated default stream (NULL). */
START_TEST(test_null_allowed) {
  victim v;
  const hippo_api *api;
  hippo_stream *dflt = NULL;
  hippo_device *empty;
  hippo_usage u;
  hippo_relocation_report rep;
  tu_layout l;
  void *p = NULL;
  hippo_handle h;
  victim_open(&v);
  api = v.api;
  CK_OK(api, api->stream_attach(v.dev, NULL, &dflt));
  ck_assert_ptr_nonnull(dflt);
  h = tu_reserve(api, dflt, 3000);
  CK_OK(api, api->resolve(dflt, h, &p, NULL));
  ck_assert_ptr_nonnull(p);
  /* a copy queued on the default stream runs at its sync */
  CK_OK(api, tu_emu(api)->copy(v.dev, NULL, p, v.ptr[0], 1000));
  CK_OK(api, tu_emu(api)->stream_sync(v.dev, NULL));
  TU_VERIFY(api, v.dev, p, 1000, 0);
  CK_OK(api, api->release(dflt, h));
  CK_OK(api, api->stream_detach(dflt));
  CK_OK(api, api->resolve(v.s, v.h[1], &p, NULL));
  ck_assert_ptr_eq(p, v.ptr[1]);
  /* refused install with bytes_in_use NULL: nothing changes */
  CK_REFUSED(api,
             api->pools_install(
                 v.dev, tu_layout_preset(&l, HIPPO_PRESET_SUB_SLICES), NULL),
             HIPPO_POOLS_IN_USE, "live");
  {
    uint64_t live = 0;
    CK_REFUSED(api,
               api->pools_install(
                   v.dev, tu_layout_preset(&l, HIPPO_PRESET_SUB_SLICES), &live),
               HIPPO_POOLS_IN_USE, "live");
    ck_assert_uint_eq(live, 1000 + 3 * MiB + 20 * MiB);
  }
  CK_OK(api, api->cleanup(v.dev, NULL));
  CK_OK(api, api->reclaim(v.dev, NULL));
  CK_OK(api, api->relocate_with(v.dev, NULL, HIPPO_RELOCATE_EXPLICIT, NULL));
  CK_OK(api, api->relocate_with(v.dev, v.s, HIPPO_RELOCATE_EXPLICIT, NULL));
  TU_SIZED(rep);
  CK_OK(api, api->relocation_report(v.dev, NULL, &rep));
  ck_assert_uint_eq(rep.outcome, HIPPO_RELOCATION_NOTHING_TO_MOVE);
  TU_SIZED(u);
  CK_OK(api, api->usage(v.dev, NULL, &u));
  ck_assert_uint_eq(u.allocations, NV);
  victim_snap(&v); /* cleanup gave the default stream's page back */
  INTACT(&v);
  /* a successful install with bytes_in_use NULL, on an empty device */
  empty = tu_open(api, HIPPO_BACKEND_DRY, CAPACITY, NULL);
  CK_OK(api, api->pools_install(
                 empty, tu_layout_preset(&l, HIPPO_PRESET_SUB_SLICES), NULL));
  ck_assert_uint_eq(tu_info(api, empty).preset, HIPPO_PRESET_SUB_SLICES);
  CK_OK(api, api->device_close(empty));
  victim_close(&v);
}
END_TEST

/* ---- stale and wrong objects ------------------------------------------------------ */

/* A closed device and a detached stream are refused by every slot
 * (README: the pointers are shells that outlive the objects), as are a
 * stream posing as a device and a device posing as a stream; detaching or
 * closing twice is refused the same way.  Closing a device with streams
 * attached is HIPPO_BUSY; destroying an attached native stream too. */
START_TEST(test_stale_objects) {
  victim v;
  const hippo_api *api;
  hippo_device *closed;
  hippo_stream *gone, *s2;
  void *n, *n2;
  hippo_handle h;
  victim_open(&v);
  api = v.api;
  closed = tu_open(api, HIPPO_BACKEND_DRY, CAPACITY, NULL);
  gone = tu_attach(api, closed, &n);
  (void)tu_reserve(api, gone, 4096); /* live at detach: dropped */
  tu_detach(api, closed, gone, n);
  CK_OK(api, api->device_close(closed));
  CK_DEVICE_SLOTS_REFUSED(api, closed, "closed already");
  CK_DEVICE_SLOTS_REFUSED(api, (hippo_device *)(void *)v.s,
                          "not an open device");
  s2 = tu_attach(api, v.dev, &n2);
  h = tu_reserve(api, s2, 4096);
  CK_OK(api, api->stream_detach(s2));
  victim_snap(&v);
  CK_STREAM_SLOTS_REFUSED(api, v.dev, v.s, v.h[0], s2, "detached already");
  CK_STREAM_SLOTS_REFUSED(api, v.dev, v.s, v.h[0], gone, "detached already");
  CK_STREAM_SLOTS_REFUSED(api, v.dev, v.s, v.h[0],
                          (hippo_stream *)(void *)v.dev, "not an attached");
  (void)h;
  CK_REFUSED(api, api->device_close(v.dev), HIPPO_BUSY, "attached");
  CK_REFUSED(api, tu_emu(api)->stream_destroy(v.dev, v.native), HIPPO_BUSY,
             "still attached");
  INTACT(&v);
  CK_OK(api, tu_emu(api)->stream_destroy(v.dev, n2));
  victim_close(&v);
  CK_DEVICE_SLOTS_REFUSED(api, v.dev, "closed already");
}
END_TEST

/* Streams of another device where a slot takes a device and a stream of
 * it (cleanup, reclaim, usage, relocate_with, relocation_report):
 * HIPPO_INVALID_ARGUMENT naming the other device; and an attach of a
 * native stream of another device. */
START_TEST(test_stream_of_other_device) {
  victim v;
  const hippo_api *api;
  hippo_device *other;
  hippo_stream *os, *none = NULL;
  void *no;
  hippo_usage u;
  hippo_relocation_report rep;
  victim_open(&v);
  api = v.api;
  other = tu_open(api, HIPPO_BACKEND_HOST, CAPACITY, NULL);
  os = tu_attach(api, other, &no);
  TU_SIZED(u);
  TU_SIZED(rep);
  CK_REFUSED(api, api->cleanup(v.dev, os), HIPPO_INVALID_ARGUMENT,
             "another device");
  CK_REFUSED(api, api->reclaim(v.dev, os), HIPPO_INVALID_ARGUMENT,
             "another device");
  CK_REFUSED(api, api->usage(v.dev, os, &u), HIPPO_INVALID_ARGUMENT,
             "another device");
  CK_REFUSED(api, api->relocate_with(v.dev, os, HIPPO_RELOCATE_EXPLICIT, &rep),
             HIPPO_INVALID_ARGUMENT, "another device");
  CK_REFUSED(api, api->relocation_report(v.dev, os, &rep),
             HIPPO_INVALID_ARGUMENT, "another device");
  ck_assert_uint_eq(u.allocations, 0);
  ck_assert_uint_eq(rep.outcome, 0);
  if (tu_backend() == HIPPO_BACKEND_HOST) /* on a GPU both are device 0 */
    CK_REFUSED(api, api->stream_attach(v.dev, no, &none),
               HIPPO_INVALID_ARGUMENT, "does not take it");
  ck_assert_ptr_null(none);
  INTACT(&v);
  tu_detach(api, other, os, no);
  CK_OK(api, api->device_close(other));
  victim_close(&v);
}
END_TEST

/* ---- struct sizes: inputs ------------------------------------------------------- */

/* A struct of `size` bytes (at most 256) starting with a copy of `base`
 * (`base_size` bytes, the rest zero), struct_size set to `size`. */
typedef struct sized_buf {
  union {
    unsigned char b[256];
    uint64_t align;
  } u;
} sized_buf;

static void *sized(sized_buf *buf, const void *base, size_t base_size,
                   uint32_t size) {
  memset(buf, 0, sizeof *buf);
  memcpy(buf->u.b, base, base_size);
  memcpy(buf->u.b, &size, sizeof size);
  return buf->u.b;
}

/* Input struct sizes of hippo_device_desc.  Refused with
 * HIPPO_INVALID_ARGUMENT: 0, 4, 7, sizes not a multiple of 8 (12, 36),
 * above 64 KiB, and a larger struct with a non-zero byte past v1 (at any
 * of its positions).  Accepted: 8, 16, 24, 32 (an older caller: the
 * missing fields take their defaults) and a larger struct with a zero
 * tail. */
START_TEST(test_desc_sizes) {
  const hippo_api *api = tu_api();
  hippo_device_desc base;
  sized_buf buf;
  hippo_device *dev = NULL;
  const uint32_t refused[] = {0, 4, 7, 12, 20, 36, 39, 65544, UINT32_MAX};
  TU_SIZED(base);
  base.backend = HIPPO_BACKEND_DRY;
  base.capacity = CAPACITY;
  base.alignment = 4096;
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    CK_REFUSED(
        api,
        api->device_open(sized(&buf, &base, sizeof base, refused[i]), &dev),
        HIPPO_INVALID_ARGUMENT, "struct_size");
    ck_assert_ptr_null(dev);
  }
  for (uint32_t size = 8; size <= sizeof base + 16; size += 8) {
    hippo_device_info info;
    CK_OK(api, api->device_open(sized(&buf, &base, sizeof base, size), &dev));
    info = tu_info(api, dev);
    ck_assert_uint_eq(info.backend, HIPPO_BACKEND_DRY);
    /* capacity ends at 24, alignment at 32: the defaults below that */
    ck_assert_uint_eq(info.total_memory, size >= 24 ? CAPACITY : 16 * GiB);
    ck_assert_uint_eq(info.alignment, size >= 32 ? 4096 : 256);
    CK_OK(api, api->device_close(dev));
    dev = NULL;
  }
  for (uint32_t at = sizeof base; at < sizeof base + 16; at++) {
    sized(&buf, &base, sizeof base, sizeof base + 16);
    buf.u.b[at] = 0x80;
    CK_REFUSED(api,
               api->device_open((hippo_device_desc *)(void *)buf.u.b, &dev),
               HIPPO_INVALID_ARGUMENT, "byte");
    ck_assert_ptr_null(dev);
  }
}
END_TEST

/* Input struct sizes of hippo_layout (through pools_install, on the
 * victim's device: a refused layout changes nothing) and of
 * hippo_pool_options (through layout.pool_options_size, the stride, and
 * each pool's struct_size).  Accepted sizes are installed on an empty
 * device. */
START_TEST(test_layout_sizes) {
  victim v;
  const hippo_api *api;
  hippo_device *empty;
  hippo_layout base;
  sized_buf buf;
  const uint32_t refused[] = {0, 4, 7, 12, 20, 65544, UINT32_MAX};
  hippo_pool_options pools[2];
  victim_open(&v);
  api = v.api;
  empty = tu_open(api, HIPPO_BACKEND_DRY, CAPACITY, NULL);
  /* a custom layout of two DIRECT pools */
  memset(pools, 0, sizeof pools);
  for (int i = 0; i < 2; i++) {
    pools[i].struct_size = sizeof pools[i];
    pools[i].kind = HIPPO_POOL_DIRECT;
  }
  memset(&base, 0, sizeof base);
  base.struct_size = sizeof base;
  base.preset = HIPPO_PRESET_CUSTOM;
  base.pool_count = 2;
  base.pool_options_size = sizeof pools[0];
  base.pools = pools;
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    CK_REFUSED(api,
               api->pools_install(
                   v.dev, sized(&buf, &base, sizeof base, refused[i]), NULL),
               HIPPO_INVALID_ARGUMENT, "struct_size");
  for (uint32_t at = sizeof base; at < sizeof base + 16; at++) {
    sized(&buf, &base, sizeof base, sizeof base + 16);
    buf.u.b[at] = 1;
    CK_REFUSED(api,
               api->pools_install(v.dev, (hippo_layout *)(void *)buf.u.b, NULL),
               HIPPO_INVALID_ARGUMENT, "byte");
  }
  /* older: 8 (the preset only: a custom one then has no pools), 16 (no
   * pools pointer) */
  CK_REFUSED(
      api, api->pools_install(v.dev, sized(&buf, &base, sizeof base, 8), NULL),
      HIPPO_POOL_CONFIG, "pool_count is 0");
  CK_REFUSED(
      api, api->pools_install(v.dev, sized(&buf, &base, sizeof base, 16), NULL),
      HIPPO_INVALID_ARGUMENT, "layout.pools is NULL");
  base.preset = HIPPO_PRESET_EXCLUSIVE_PAGES;
  base.pool_count = 0;
  CK_OK(api, api->pools_install(empty, sized(&buf, &base, sizeof base, 8),
                                NULL));
  ck_assert_uint_eq(tu_info(api, empty).preset, HIPPO_PRESET_EXCLUSIVE_PAGES);
  base.preset = HIPPO_PRESET_CUSTOM;
  base.pool_count = 2;
  /* newer, zero tail */
  CK_OK(api, api->pools_install(
                 empty, sized(&buf, &base, sizeof base, sizeof base + 16),
                 NULL));
  ck_assert_uint_eq(tu_info(api, empty).pool_count, 2);

  /* the stride: below 8, not a multiple of 8, above 64 KiB */
  {
    const uint32_t strides[] = {0, 4, 7, 12, 60, 65544};
    for (size_t i = 0; i < sizeof strides / sizeof strides[0]; i++) {
      hippo_layout l = base;
      l.pool_options_size = strides[i];
      CK_REFUSED(api, api->pools_install(v.dev, &l, NULL),
                 HIPPO_INVALID_ARGUMENT, "pool_options_size");
    }
  }
  /* each pool's struct_size, with the v1 stride */
  {
    const uint32_t sizes[] = {0, 4, 7, 12, 52, sizeof pools[0] + 8};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      pools[1].struct_size = sizes[i];
      CK_REFUSED(api, api->pools_install(v.dev, &base, NULL),
                 HIPPO_INVALID_ARGUMENT, "layout pool 1");
    }
    /* older: 8 bytes, a DIRECT pool needs nothing more */
    pools[1].struct_size = 8;
    CK_OK(api, api->pools_install(empty, &base, NULL));
    /* 16 bytes of a SLICED pool: page_size only, so max_slice_size is 0 */
    pools[1].struct_size = 16;
    pools[1].kind = HIPPO_POOL_SLICED;
    pools[1].page_size = MiB;
    pools[1].max_slice_size = 64 * KiB; /* beyond its struct_size */
    CK_REFUSED(api, api->pools_install(v.dev, &base, NULL), HIPPO_POOL_CONFIG,
               "max_slice_size");
    pools[1].struct_size = 24;
    CK_OK(api, api->pools_install(empty, &base, NULL));
  }
  /* a newer caller's pools: a larger stride, zero or not past v1 */
  {
    struct newer {
      hippo_pool_options o;
      uint64_t future[2];
    } np[2];
    hippo_layout l = base;
    memset(np, 0, sizeof np);
    for (int i = 0; i < 2; i++) {
      np[i].o.struct_size = sizeof np[i];
      np[i].o.kind = HIPPO_POOL_DIRECT;
    }
    l.pools = &np[0].o;
    l.pool_options_size = sizeof np[0];
    CK_OK(api, api->pools_install(empty, &l, NULL));
    for (size_t at = 0; at < sizeof np[1].future; at++) {
      memset(np[1].future, 0, sizeof np[1].future);
      ((unsigned char *)np[1].future)[at] = 0x40;
      CK_REFUSED(api, api->pools_install(v.dev, &l, NULL),
                 HIPPO_INVALID_ARGUMENT, "byte");
    }
  }
  CK_CHECK(api, empty);
  CK_OK(api, api->device_close(empty));
  INTACT(&v);
  victim_close(&v);
}
END_TEST

/* ---- struct sizes: outputs ------------------------------------------------------ */

typedef hippo_status (*fill_fn)(const victim *v, void *out);

static hippo_status fill_info(const victim *v, void *out) {
  return v->api->device_info(v->dev, out);
}
static hippo_status fill_usage(const victim *v, void *out) {
  return v->api->usage(v->dev, v->s, out);
}
static hippo_status fill_device_usage(const victim *v, void *out) {
  return v->api->usage(v->dev, NULL, out);
}
static hippo_status fill_pool_report(const victim *v, void *out) {
  return v->api->pool_report(v->s, 1, out, NULL);
}
static hippo_status fill_relocation_report(const victim *v, void *out) {
  return v->api->relocation_report(v->dev, v->s, out);
}
static hippo_status fill_relocate_with(const victim *v, void *out) {
  return v->api->relocate_with(v->dev, v->s, HIPPO_RELOCATE_EXPLICIT, out);
}
static hippo_status fill_counters(const victim *v, void *out) {
  return tu_emu(v->api)->counters(v->dev, out);
}

/* Output struct sizes for one slot (`full` bytes in this header).  Refused
 * with HIPPO_INVALID_ARGUMENT, nothing written: 0, 4, 7, sizes not a
 * multiple of 8, above 64 KiB.  Every multiple of 8 below `full` (an older
 * caller): filled up to it, the same bytes as a full-size call, nothing
 * written beyond.  Larger (a newer caller), its tail full of non-zero
 * bytes: accepted, filled, and the tail -- fields this plugin does not
 * know -- zeroed; struct_size becomes the plugin's (`full`), so HIPPO_HAS
 * says what was filled. */
static void output_sizes_at(const victim *v, fill_fn fill, size_t full,
                            const char *what, int line) {
  const hippo_api *api = v->api;
  unsigned char want[1024], got[1024];
  const uint32_t refused[] = {0,        4,          7, 12, (uint32_t)full - 4,
                              (uint32_t)full + 4, 65544, UINT32_MAX};
  hippo_status st;
  ck_assert_uint_le(full + 24, sizeof got);
  memset(want, 0, sizeof want);
  memcpy(want, &(uint32_t){(uint32_t)full}, 4);
  st = fill(v, want);
  ck_assert_msg(st == HIPPO_SUCCESS, "line %d: %s: %s: %s", line, what,
                api->status_name(st), api->last_error());
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    memset(got, CANARY, sizeof got);
    memcpy(got, &refused[i], 4);
    st = fill(v, got);
    ck_assert_msg(st == HIPPO_INVALID_ARGUMENT,
                  "line %d: %s with struct_size %u: %s", line, what,
                  refused[i], api->status_name(st));
    ck_assert_msg(strstr(api->last_error(), "struct_size") != NULL,
                  "line %d: %s: last_error \"%s\" does not name struct_size",
                  line, what, api->last_error());
    for (size_t b = 4; b < sizeof got; b++)
      ck_assert_msg(got[b] == CANARY,
                    "line %d: %s with struct_size %u: byte %zu written",
                    line, what, refused[i], b);
  }
  for (uint32_t size = 8; size < full; size += 8) {
    memset(got, CANARY, sizeof got);
    memcpy(got, &size, 4);
    st = fill(v, got);
    ck_assert_msg(st == HIPPO_SUCCESS, "line %d: %s with struct_size %u: %s",
                  line, what, size, api->status_name(st));
    ck_assert_msg(memcmp(got, &size, 4) == 0,
                  "line %d: %s: struct_size %u changed", line, what, size);
    ck_assert_msg(memcmp(got + 4, want + 4, size - 4) == 0,
                  "line %d: %s with struct_size %u: the prefix differs from "
                  "a full-size answer",
                  line, what, size);
    for (size_t b = size; b < sizeof got; b++)
      ck_assert_msg(got[b] == CANARY,
                    "line %d: %s with struct_size %u: byte %zu written", line,
                    what, size, b);
  }
  {
    uint32_t size = (uint32_t)full + 24;
    memset(got, CANARY, sizeof got);
    memcpy(got, &size, 4);
    st = fill(v, got);
    ck_assert_msg(st == HIPPO_SUCCESS, "line %d: %s with struct_size %u: %s",
                  line, what, size, api->status_name(st));
    ck_assert_msg(memcmp(got, &(uint32_t){(uint32_t)full}, 4) == 0 &&
                      memcmp(got + 4, want + 4, full - 4) == 0,
                  "line %d: %s with struct_size %u: not filled as at %zu "
                  "(struct_size %zu)",
                  line, what, size, full, full);
    for (size_t b = full; b < size; b++)
      ck_assert_msg(got[b] == 0,
                    "line %d: %s with struct_size %u: unknown byte %zu is "
                    "%#x, not zeroed",
                    line, what, size, b, got[b]);
    for (size_t b = size; b < sizeof got; b++)
      ck_assert_msg(got[b] == CANARY, "line %d: %s: byte %zu past %u written",
                    line, what, b, size);
  }
}
#define OUTPUT_SIZES(v, fill, type)                                            \
  output_sizes_at((v), (fill), sizeof(type), #fill, __LINE__)

/* Every output struct: hippo_device_info, hippo_usage (a stream's and the
 * device's), hippo_pool_report, hippo_relocation_report (relocation_report
 * and relocate_with), hippo_emu_counters. */
START_TEST(test_output_sizes) {
  victim v;
  victim_open(&v);
  OUTPUT_SIZES(&v, fill_info, hippo_device_info);
  OUTPUT_SIZES(&v, fill_usage, hippo_usage);
  OUTPUT_SIZES(&v, fill_device_usage, hippo_usage);
  OUTPUT_SIZES(&v, fill_pool_report, hippo_pool_report);
  OUTPUT_SIZES(&v, fill_relocation_report, hippo_relocation_report);
  OUTPUT_SIZES(&v, fill_relocate_with, hippo_relocation_report);
  OUTPUT_SIZES(&v, fill_counters, hippo_emu_counters);
  INTACT(&v);
  victim_close(&v);
}
END_TEST

/* ---- absurd layouts ------------------------------------------------------------- */

/* `l` is refused with `want` by pools_install on the victim's device
 * (which keeps its layout and reservations) and by device_open; last_error
 * mentions `text`. */
static void layout_refused_at(victim *v, const hippo_layout *l,
                              hippo_status want, const char *text, int line) {
  const hippo_api *api = v->api;
  hippo_device_desc d;
  hippo_device *dev = NULL;
  uint64_t live = 42;
  refused_at(api, api->pools_install(v->dev, l, &live), want, text,
             "pools_install", line);
  ck_assert_msg(live == 0 || want == HIPPO_INVALID_ARGUMENT,
                "line %d: bytes_in_use %llu after a refused layout", line,
                (unsigned long long)live);
  TU_SIZED(d);
  d.backend = HIPPO_BACKEND_HOST;
  d.capacity = CAPACITY;
  d.layout = l;
  refused_at(api, api->device_open(&d, &dev), want, text, "device_open",
             line);
  ck_assert_ptr_null(dev);
  ck_assert_uint_eq(tu_info(api, v->dev).preset, HIPPO_PRESET_ADAPTIVE);
  intact_at(v, line);
}
#define CK_LAYOUT_REFUSED(v, l, want, text)                                    \
  layout_refused_at((v), (l), (want), (text), __LINE__)

/* Layouts no device can use: a zero page, a page larger than the device,
 * slices larger than their page, 1,000 pools (the limit is 32, named with
 * the field pool_count), UINT32_MAX pools with a one-entry array (never
 * read past), no pools, pools NULL with a count, unknown kinds and
 * presets.  Each is HIPPO_POOL_CONFIG (a valid struct describing invalid
 * pools) or HIPPO_INVALID_ARGUMENT (a pointer or stride that cannot be
 * read), refused by pools_install and device_open alike, and the victim
 * keeps its layout and reservations. */
START_TEST(test_absurd_layouts) {
  victim v;
  tu_layout l;
  hippo_pool_options *o, *many;
  victim_open(&v);
  tu_layout_sliced(&l, 0, 0);
  CK_LAYOUT_REFUSED(&v, &l.layout, HIPPO_POOL_CONFIG, "page_size");
  tu_layout_sliced(&l, 0, 64 * KiB);
  CK_LAYOUT_REFUSED(&v, &l.layout, HIPPO_POOL_CONFIG,
                    "layout pool 0 (SLICED) field page_size: must not be 0");
  /* a page above the device: no page could ever be had */
  tu_layout_sliced(&l, CAPACITY + 1024 * 1024, 64 * KiB);
  CK_LAYOUT_REFUSED(&v, &l.layout, HIPPO_POOL_CONFIG,
                    "layout pool 0 (SLICED) field page_size");
  CK_LAYOUT_REFUSED(&v, &l.layout, HIPPO_POOL_CONFIG, "larger than the device");
  tu_layout_sliced(&l, 2 * CAPACITY, 64 * KiB);
  CK_LAYOUT_REFUSED(&v, &l.layout, HIPPO_POOL_CONFIG, "page_size");
  tu_layout_sliced(&l, CAPACITY, 64 * KiB); /* the device itself is fine */
  {
    hippo_device_desc d;
    hippo_device *dev = NULL;
    TU_SIZED(d);
    d.backend = HIPPO_BACKEND_DRY;
    d.capacity = CAPACITY;
    d.layout = &l.layout;
    CK_OK(v.api, v.api->device_open(&d, &dev));
    CK_OK(v.api, v.api->device_close(dev));
  }
  tu_layout_init(&l);
  o = tu_layout_add(&l, HIPPO_POOL_ARENA);
  o->page_size = 2 * MiB;
  o->max_slice_size = CAPACITY + 2 * MiB;
  CK_LAYOUT_REFUSED(&v, &l.layout, HIPPO_POOL_CONFIG, "max_slice_size");
  tu_layout_sliced(&l, MiB, MiB + 256);
  CK_LAYOUT_REFUSED(&v, &l.layout, HIPPO_POOL_CONFIG,
                    "max_slice_size: 1048832 is larger than page_size");
  /* 1,000 pools, every one valid on its own */
  many = calloc(1000, sizeof *many);
  ck_assert_ptr_nonnull(many);
  for (int i = 0; i < 1000; i++) {
    many[i].struct_size = sizeof many[i];
    many[i].kind = HIPPO_POOL_DIRECT;
  }
  tu_layout_init(&l);
  l.layout.pools = many;
  l.layout.pool_count = 1000;
  CK_LAYOUT_REFUSED(&v, &l.layout, HIPPO_POOL_CONFIG, "pool_count");
  CK_LAYOUT_REFUSED(&v, &l.layout, HIPPO_POOL_CONFIG, "1000");
  CK_LAYOUT_REFUSED(&v, &l.layout, HIPPO_POOL_CONFIG, "32");
  l.layout.pool_count = 33;
  CK_LAYOUT_REFUSED(&v, &l.layout, HIPPO_POOL_CONFIG, "pool_count");
  l.layout.pool_count = 32; /* the limit itself */
  {
    hippo_device *empty = tu_open(v.api, HIPPO_BACKEND_DRY, 0, NULL);
    CK_OK(v.api, v.api->pools_install(empty, &l.layout, NULL));
    ck_assert_uint_eq(tu_info(v.api, empty).pool_count, 32);
    CK_OK(v.api, v.api->device_close(empty));
  }
  free(many);
  /* a count far beyond a one-entry array: never read */
  tu_layout_sliced(&l, MiB, 64 * KiB);
  l.layout.pool_count = UINT32_MAX;
  CK_LAYOUT_REFUSED(&v, &l.layout, HIPPO_POOL_CONFIG, "pool_count");
  tu_layout_init(&l);
  CK_LAYOUT_REFUSED(&v, &l.layout, HIPPO_POOL_CONFIG, "pool_count is 0");
  tu_layout_init(&l);
  l.layout.pools = NULL;
  l.layout.pool_count = 1;
  CK_LAYOUT_REFUSED(&v, &l.layout, HIPPO_INVALID_ARGUMENT,
                    "layout.pools is NULL");
  {
    const hippo_pool_kind kinds[] = {0, HIPPO_POOL_PERSISTENT, 7, 99,
                                     UINT32_MAX};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
      tu_layout_init(&l);
      tu_layout_add(&l, kinds[i]);
      CK_LAYOUT_REFUSED(&v, &l.layout, HIPPO_POOL_CONFIG, "is not a pool kind");
    }
  }
  {
    const hippo_preset presets[] = {5, 99, UINT32_MAX};
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
      tu_layout_preset(&l, presets[i]);
      CK_LAYOUT_REFUSED(&v, &l.layout, HIPPO_POOL_CONFIG, "is not a preset");
    }
  }
  INTACT(&v);
  victim_close(&v);
}
END_TEST

/* Device descriptions no device can have: an alignment that is not a power
 * of two (3, 384, UINT64_MAX) or above 1 GiB is HIPPO_INVALID_ARGUMENT
 * naming alignment; unknown backends and flags too.  capacity 0 means the
 * default, 16 GiB, and alignment 0 the default 256. */
START_TEST(test_absurd_descs) {
  const hippo_api *api = tu_api();
  hippo_device_desc d;
  hippo_device *dev = NULL;
  const uint64_t alignments[] = {3, 384, (UINT64_C(1) << 30) + 1,
                                 UINT64_C(1) << 31, UINT64_C(1) << 63,
                                 UINT64_MAX};
  for (int b = 0; b < 3; b++) {
    const hippo_backend backend =
        b == 0 ? HIPPO_BACKEND_HOST : b == 1 ? HIPPO_BACKEND_DRY
                                             : HIPPO_BACKEND_AUTO;
    for (size_t i = 0; i < sizeof alignments / sizeof alignments[0]; i++) {
      TU_SIZED(d);
      d.backend = backend;
      d.alignment = alignments[i];
      CK_REFUSED(api, api->device_open(&d, &dev), HIPPO_INVALID_ARGUMENT,
                 "alignment");
      ck_assert_ptr_null(dev);
    }
  }
  TU_SIZED(d);
  d.backend = 4;
  CK_REFUSED(api, api->device_open(&d, &dev), HIPPO_INVALID_ARGUMENT,
             "backend 4");
  d.backend = UINT32_MAX;
  CK_REFUSED(api, api->device_open(&d, &dev), HIPPO_INVALID_ARGUMENT,
             "backend");
  d.backend = HIPPO_BACKEND_DRY;
  d.flags = 0x80000000u;
  CK_REFUSED(api, api->device_open(&d, &dev), HIPPO_INVALID_ARGUMENT, "flags");
  ck_assert_ptr_null(dev);
  /* an emulated device below one alignment could serve nothing */
  for (int b = 0; b < 3; b++) {
    TU_SIZED(d);
    d.backend = b == 0   ? HIPPO_BACKEND_HOST
                : b == 1 ? HIPPO_BACKEND_DRY
                         : HIPPO_BACKEND_AUTO; /* HOST here, HIP on a GPU */
    d.capacity = 1;
    CK_REFUSED(api, api->device_open(&d, &dev), HIPPO_INVALID_ARGUMENT,
               "capacity 1 B is below the alignment");
    ck_assert_ptr_null(dev);
    d.capacity = 4096;
    d.alignment = 8192;
    CK_REFUSED(api, api->device_open(&d, &dev), HIPPO_INVALID_ARGUMENT,
               "capacity 4096 B is below the alignment 8192 B");
    d.capacity = 8192; /* one alignment: the least */
    if (b < 2) {
      CK_OK(api, api->device_open(&d, &dev));
      ck_assert_uint_eq(tu_info(api, dev).total_memory, 8192);
      CK_OK(api, api->device_close(dev));
      dev = NULL;
    }
  }
  TU_SIZED(d);
  d.backend = HIPPO_BACKEND_DRY; /* capacity 0, alignment 0: the defaults */
  CK_OK(api, api->device_open(&d, &dev));
  ck_assert_uint_eq(tu_info(api, dev).total_memory, 16 * GiB);
  ck_assert_uint_eq(tu_info(api, dev).alignment, 256);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* ---- emulation ------------------------------------------------------------------- */

/* Fake memory posing as a native stream. */
static union {
  unsigned char b[256];
  uint64_t align;
} fake_native;

/* Emulated streams the device did not create (another device's, a
 * destroyed one, made-up memory) are refused by every emu_* slot that
 * takes one, with HIPPO_INVALID_ARGUMENT; the other device's stream still
 * works there. */
START_TEST(test_emu_foreign_natives) {
  victim v;
  const hippo_api *api;
  hippo_device *other;
  void *theirs, *destroyed;
  void *natives[3];
  uint64_t id = 5;
  victim_open(&v);
  api = v.api;
  other = tu_open(api, HIPPO_BACKEND_HOST, CAPACITY, NULL);
  CK_OK(api, tu_emu(api)->stream_create(other, &theirs));
  CK_OK(api, tu_emu(api)->stream_create(v.dev, &destroyed));
  CK_OK(api, tu_emu(api)->stream_destroy(v.dev, destroyed));
  natives[0] = theirs;
  natives[1] = destroyed;
  natives[2] = &fake_native;
  for (int i = 0; i < 3; i++) {
    void *n = natives[i];
    CK_REFUSED(api, tu_emu(api)->stream_destroy(v.dev, n),
               HIPPO_INVALID_ARGUMENT, "not an emulated stream of this device");
    CK_REFUSED(api, tu_emu(api)->capture_begin(v.dev, n, &id),
               HIPPO_INVALID_ARGUMENT, "not an emulated stream of this device");
    CK_REFUSED(api, tu_emu(api)->capture_end(v.dev, n), HIPPO_INVALID_ARGUMENT,
               "not an emulated stream of this device");
    CK_REFUSED(api, tu_emu(api)->copy(v.dev, n, v.ptr[3], v.ptr[0], 8),
               HIPPO_INVALID_ARGUMENT, "not an emulated stream of this device");
    CK_REFUSED(api, tu_emu(api)->stream_sync(v.dev, n), HIPPO_INVALID_ARGUMENT,
               "not an emulated stream of this device");
  }
  ck_assert_uint_eq(id, 5);
  /* double destroy */
  CK_REFUSED(api, tu_emu(api)->stream_destroy(v.dev, destroyed),
             HIPPO_INVALID_ARGUMENT, "destroyed twice?");
  CK_OK(api, tu_emu(api)->stream_sync(other, theirs));
  CK_OK(api, tu_emu(api)->stream_destroy(other, theirs));
  CK_OK(api, api->device_close(other));
  INTACT(&v);
  victim_close(&v);
}
END_TEST

/* emu_read and emu_write outside live memory: before a page, spanning past
 * its end, wrapping around the address space, at a made-up address, a
 * freed page's, a copy whose source or destination does; all
 * HIPPO_INVALID_ARGUMENT with the victim's bytes untouched.  A DRY device
 * has no bytes (HIPPO_UNSUPPORTED). Size 0 touches nothing and succeeds. */
START_TEST(test_emu_ranges) {
  victim v;
  const hippo_api *api;
  hippo_device *dry;
  hippo_stream *ds;
  void *dn, *dp;
  hippo_handle dh;
  unsigned char buf[64];
  char *p0;
  victim_open(&v);
  api = v.api;
  p0 = v.ptr[0];
  memset(buf, 0x3c, sizeof buf);
  {
    /* the small pool's 2 MiB page holds the 1000 B victim at its start */
    const struct {
      char *at;
      uint64_t size;
      const char *text;
    } bad[] = {
        {p0 - 1, 8, NULL}, /* another page's end, or none */
        {p0 + 2 * MiB - 8, 16, "past the end of its page"},
        {p0, UINT64_MAX, "wraps around"},
        {(char *)(uintptr_t)(UINT64_MAX - 8), 64, "wraps around"},
        {(char *)(uintptr_t)0x1000, 8, "not inside a live page"},
        {(char *)(uintptr_t)UINT64_C(0x7ffffffff000), 8, "not inside"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      uint64_t n = bad[i].size; /* past buf's size: refused before a copy */
      CK_REFUSED(api, tu_emu(api)->read(v.dev, bad[i].at, buf, n),
                 HIPPO_INVALID_ARGUMENT, bad[i].text);
      CK_REFUSED(api, tu_emu(api)->write(v.dev, bad[i].at, buf, n),
                 HIPPO_INVALID_ARGUMENT, bad[i].text);
      CK_REFUSED(api,
                 tu_emu(api)->copy(v.dev, v.native, bad[i].at, v.ptr[3], n),
                 HIPPO_INVALID_ARGUMENT, "copy");
      CK_REFUSED(api,
                 tu_emu(api)->copy(v.dev, v.native, v.ptr[3], bad[i].at, n),
                 HIPPO_INVALID_ARGUMENT, "source");
    }
  }
  for (size_t i = 0; i < sizeof buf; i++)
    ck_assert_uint_eq(buf[i], 0x3c);
  /* a page given back */
  {
    hippo_handle h = tu_reserve(api, v.s, 5 * MiB); /* a new ARENA page */
    void *gone;
    CK_OK(api, api->resolve(v.s, h, &gone, NULL));
    CK_OK(api, api->release(v.s, h));
    CK_OK(api, api->cleanup(v.dev, NULL));
    victim_snap(&v);
    CK_REFUSED(api, tu_emu(api)->read(v.dev, gone, buf, 8),
               HIPPO_INVALID_ARGUMENT, "not inside a live page");
    CK_REFUSED(api, tu_emu(api)->write(v.dev, gone, buf, 8),
               HIPPO_INVALID_ARGUMENT, "not inside a live page");
  }
  /* size 0: nothing to check, nothing touched */
  CK_OK(api, tu_emu(api)->read(v.dev, NULL, buf, 0));
  CK_OK(api, tu_emu(api)->write(v.dev, (void *)(uintptr_t)0x1000, buf, 0));
  CK_OK(api, tu_emu(api)->copy(v.dev, v.native, NULL, NULL, 0));
  INTACT(&v);
  /* DRY: no bytes at all */
  dry = tu_open(api, HIPPO_BACKEND_DRY, CAPACITY, NULL);
  ds = tu_attach(api, dry, &dn);
  dh = tu_reserve(api, ds, 4096);
  CK_OK(api, api->resolve(ds, dh, &dp, NULL));
  CK_REFUSED(api, tu_emu(api)->read(dry, dp, buf, 8), HIPPO_UNSUPPORTED, "DRY");
  CK_REFUSED(api, tu_emu(api)->write(dry, dp, buf, 8), HIPPO_UNSUPPORTED,
             "DRY");
  CK_REFUSED(api, tu_emu(api)->read(dry, dp, NULL, 8), HIPPO_INVALID_ARGUMENT,
             "host must not be NULL");
  CK_OK(api, api->release(ds, dh));
  tu_detach(api, dry, ds, dn);
  CK_OK(api, api->device_close(dry));
  victim_close(&v);
}
END_TEST

/* emu_inject_fault with hostile values: a kind >= HIPPO_CALL_KINDS, a
 * status that is not a failure (SUCCESS, negative, unknown) and an nth too
 * far to count are HIPPO_INVALID_ARGUMENT and arm nothing; nth 0 clears
 * whatever the status.  Captures begun twice or ended without a begin are
 * HIPPO_INVALID_ARGUMENT. */
START_TEST(test_emu_fault_values) {
  victim v;
  const hippo_api *api;
  hippo_handle h;
  uint64_t id = 0, id2 = 99;
  void *n2;
  victim_open(&v);
  api = v.api;
  CK_REFUSED(api,
             tu_emu(api)->inject_fault(v.dev, HIPPO_CALL_KINDS, 1,
                                       HIPPO_OUT_OF_MEMORY),
             HIPPO_INVALID_ARGUMENT, "call kind 10");
  CK_REFUSED(
      api, tu_emu(api)->inject_fault(v.dev, UINT32_MAX, 1, HIPPO_OUT_OF_MEMORY),
      HIPPO_INVALID_ARGUMENT, "call kind");
  {
    const hippo_status bad[] = {HIPPO_SUCCESS, -1, HIPPO_INTERNAL + 1,
                                HIPPO_GRAPH_NEEDS_PAGE, INT32_MAX, INT32_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
      CK_REFUSED(api,
                 tu_emu(api)->inject_fault(v.dev, HIPPO_CALL_ALLOC, 1, bad[i]),
                 HIPPO_INVALID_ARGUMENT, "not a failure status");
  }
  /* the allocation counter is past 0, so UINT64_MAX calls away overflows */
  CK_REFUSED(api,
             tu_emu(api)->inject_fault(v.dev, HIPPO_CALL_ALLOC, UINT64_MAX,
                                       HIPPO_OUT_OF_MEMORY),
             HIPPO_INVALID_ARGUMENT, "too far");
  /* nothing was armed: the next allocation succeeds */
  h = tu_reserve(api, v.s, 7 * MiB);
  CK_OK(api, api->release(v.s, h));
  CK_OK(api, api->cleanup(v.dev, NULL));
  /* nth 0 clears, whatever the status says */
  CK_OK(api, tu_emu(api)->inject_fault(v.dev, HIPPO_CALL_ALLOC, 1,
                                   HIPPO_OUT_OF_MEMORY));
  CK_OK(api, tu_emu(api)->inject_fault(v.dev, HIPPO_CALL_ALLOC, 0, -7));
  CK_OK(api, tu_emu(api)->inject_fault(v.dev, HIPPO_CALL_FREE, 0, HIPPO_SUCCESS));
  h = tu_reserve(api, v.s, 7 * MiB);
  CK_OK(api, api->release(v.s, h));
  CK_OK(api, api->cleanup(v.dev, NULL));
  victim_snap(&v); /* the peaks moved */
  INTACT(&v);
  /* captures */
  CK_OK(api, tu_emu(api)->stream_create(v.dev, &n2));
  CK_REFUSED(api, tu_emu(api)->capture_end(v.dev, n2), HIPPO_INVALID_ARGUMENT,
             "not capturing");
  CK_OK(api, tu_emu(api)->capture_begin(v.dev, n2, &id));
  ck_assert_uint_ne(id, 0);
  CK_REFUSED(api, tu_emu(api)->capture_begin(v.dev, n2, &id2),
             HIPPO_INVALID_ARGUMENT, "already capturing");
  ck_assert_uint_eq(id2, 99);
  CK_REFUSED(api, tu_emu(api)->stream_destroy(v.dev, n2), HIPPO_BUSY,
             "capturing");
  CK_OK(api, tu_emu(api)->capture_end(v.dev, n2));
  CK_REFUSED(api, tu_emu(api)->capture_end(v.dev, n2), HIPPO_INVALID_ARGUMENT,
             "not capturing");
  /* hippo guarded nothing under that capture: nothing to retire */
  CK_REFUSED(api, api->graph_retire(v.dev, id), HIPPO_INVALID_ARGUMENT,
             "guarded nothing");
  CK_OK(api, tu_emu(api)->stream_destroy(v.dev, n2));
  INTACT(&v);
  victim_close(&v);
}
END_TEST

/* ---- unknown values ---------------------------------------------------------------- */

/* Values outside their enums or ranges: capture_announce of an unknown
 * announcement, BEGINS on a stream that does not capture; relocate_with of
 * an unknown reason (its report left untouched: nothing ran); pool_report
 * of a pool the stream lacks (report untouched); graph_retire of 0 or of
 * an id hippo never guarded anything under; persistent_end without a
 * begin (and one end too many).  All HIPPO_INVALID_ARGUMENT; the stream is
 * not left in a persistent window by a refused end. */
START_TEST(test_unknown_values) {
  victim v;
  const hippo_api *api;
  hippo_relocation_report rep;
  hippo_pool_report r;
  hippo_handle h;
  uint32_t pools;
  victim_open(&v);
  api = v.api;
  CK_REFUSED(api, api->capture_announce(v.s, 3), HIPPO_INVALID_ARGUMENT,
             "3 is not");
  CK_REFUSED(api, api->capture_announce(v.s, UINT32_MAX),
             HIPPO_INVALID_ARGUMENT, "HIPPO_CAPTURE_QUERY");
  CK_REFUSED(api, api->capture_announce(v.s, HIPPO_CAPTURE_BEGINS),
             HIPPO_INVALID_ARGUMENT, "does not capture");
  CK_OK(api, api->capture_announce(v.s, HIPPO_CAPTURE_ENDED)); /* true */
  CK_OK(api, api->capture_announce(v.s, HIPPO_CAPTURE_QUERY));
  {
    const hippo_relocate_reason bad[] = {HIPPO_RELOCATE_UNMAP + 1, 100,
                                         UINT32_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      memset(&rep, CANARY, sizeof rep);
      rep.struct_size = sizeof rep;
      CK_REFUSED(api, api->relocate_with(v.dev, v.s, bad[i], &rep),
                 HIPPO_INVALID_ARGUMENT, "reason");
      CK_REFUSED(api, api->relocate_with(v.dev, NULL, bad[i], &rep),
                 HIPPO_INVALID_ARGUMENT, "reason");
      CK_REFUSED(api, api->relocate_with(v.dev, v.s, bad[i], NULL),
                 HIPPO_INVALID_ARGUMENT, "reason");
      for (size_t b = 4; b < sizeof rep; b++)
        ck_assert_msg(((unsigned char *)&rep)[b] == CANARY,
                      "relocate_with(reason %u): report byte %zu written",
                      bad[i], b);
    }
  }
  pools = tu_usage(api, v.dev, v.s).pool_count;
  {
    const uint32_t bad[] = {pools, pools + 1, 64, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      memset(&r, CANARY, sizeof r);
      r.struct_size = sizeof r;
      CK_REFUSED(api, api->pool_report(v.s, bad[i], &r, NULL),
                 HIPPO_INVALID_ARGUMENT, "pool index");
      ck_assert_uint_eq(r.kind, 0xA5A5A5A5u);
    }
  }
  CK_REFUSED(api, api->graph_retire(v.dev, 0), HIPPO_INVALID_ARGUMENT,
             "capture 0");
  CK_REFUSED(api, api->graph_retire(v.dev, 12345), HIPPO_INVALID_ARGUMENT,
             "guarded nothing");
  CK_REFUSED(api, api->graph_retire(v.dev, UINT64_MAX), HIPPO_INVALID_ARGUMENT,
             "guarded nothing");
  CK_REFUSED(api, api->persistent_end(v.s), HIPPO_INVALID_ARGUMENT,
             "no persistent window");
  CK_OK(api, api->persistent_begin(v.s));
  CK_OK(api, api->persistent_end(v.s));
  CK_REFUSED(api, api->persistent_end(v.s), HIPPO_INVALID_ARGUMENT,
             "no persistent window");
  /* not persistent: an AUTO reservation goes to a dynamic pool */
  h = tu_reserve(api, v.s, 1000);
  ck_assert_uint_eq(tu_report(api, v.s, 0).allocations, 1); /* the victim */
  CK_OK(api, api->release(v.s, h));
  victim_snap(&v); /* the peak moved */
  INTACT(&v);
  victim_close(&v);
}
END_TEST

static Suite *hostile_suite(void) {
  Suite *s = suite_create("hostile");
  TCase *tc = tcase_create("handles");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_random_handles);
  tcase_add_test(tc, test_near_handles);
  tcase_add_test(tc, test_foreign_handles);
  tcase_add_test(tc, test_double_release);
  tcase_add_test(tc, test_record_use_hostile);
  suite_add_tcase(s, tc);
  tc = tcase_create("sizes");
  tcase_add_test(tc, test_reserve_sizes);
  tcase_add_test(tc, test_reserve_beyond_device_custom);
  suite_add_tcase(s, tc);
  tc = tcase_create("pointers");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_null_objects);
  tcase_add_test(tc, test_null_arguments);
  tcase_add_test(tc, test_null_allowed);
  tcase_add_test(tc, test_stale_objects);
  tcase_add_test(tc, test_stream_of_other_device);
  suite_add_tcase(s, tc);
  tc = tcase_create("structs");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_desc_sizes);
  tcase_add_test(tc, test_layout_sizes);
  tcase_add_test(tc, test_output_sizes);
  suite_add_tcase(s, tc);
  tc = tcase_create("layouts");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_absurd_layouts);
  tcase_add_test(tc, test_absurd_descs);
  suite_add_tcase(s, tc);
  tc = tcase_create("emulation");
  tcase_add_test(tc, test_emu_foreign_natives);
  tcase_add_test(tc, test_emu_ranges);
  tcase_add_test(tc, test_emu_fault_values);
  suite_add_tcase(s, tc);
  tc = tcase_create("values");
  tcase_add_test(tc, test_unknown_values);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(hostile_suite()); }
