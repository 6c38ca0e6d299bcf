/* test-layout.c -- layout validation and presets through the ABI.
 *
 * Every invalid custom layout is refused by pools_install and by
 * device_open with HIPPO_POOL_CONFIG, and last_error names the pool index
 * and the field; the device keeps its layout.  Presets resolve into the
 * exact pools documented in src/layout.c. */
#include <config.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define DEFAULT_PERIOD 10000u /* HIPPO__DEFAULT_DEALLOC_PERIOD */

/* `l` is refused with POOL_CONFIG by pools_install on a 16 GiB device and
 * by device_open; last_error mentions each of `texts` (NULL-terminated). */
static void expect_config_at(const tu_layout *l, hippo_backend backend,
                             const char *const *texts, int line) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open(api, backend, 0, NULL);
  hippo_device *none = NULL;
  hippo_device_desc desc;
  hippo_device_info info;
  uint64_t live = 12345;
  hippo_status st;
  for (int round = 0; round < 2; round++) {
    if (round == 0) {
      st = api->pools_install(dev, &l->layout, &live);
    } else {
      memset(&desc, 0, sizeof desc);
      desc.struct_size = sizeof desc;
      desc.backend = backend;
      desc.layout = &l->layout;
      st = api->device_open(&desc, &none);
    }
    ck_assert_msg(st == HIPPO_POOL_CONFIG,
                  "line %d (%s): got %s, expected HIPPO_POOL_CONFIG: %s", line,
                  round ? "device_open" : "pools_install",
                  api->status_name(st), api->last_error());
    for (const char *const *t = texts; *t; t++)
      ck_assert_msg(strstr(api->last_error(), *t) != NULL,
                    "line %d (%s): last_error \"%s\" does not mention \"%s\"",
                    line, round ? "device_open" : "pools_install",
                    api->last_error(), *t);
  }
  ck_assert_ptr_null(none);
  ck_assert_uint_eq(live, 0);
  /* the old layout (the default, ADAPTIVE on 16 GiB) is kept */
  info = tu_info(api, dev);
  ck_assert_uint_eq(info.preset, HIPPO_PRESET_ADAPTIVE);
  ck_assert_uint_eq(info.pool_count, 3);
  CK_CHECK(api, dev);
  CK_OK(api, api->device_close(dev));
}
#define CK_CONFIG_REFUSED(l, ...)                                              \
  do {                                                                         \
    static const char *const texts_[] = {__VA_ARGS__, NULL};                   \
    for (int b_ = 0; b_ < TU_N_BACKENDS; b_++)                                 \
      expect_config_at((l), tu_backends[b_], texts_, __LINE__);                \
  } while (0)

/* `l` is accepted by pools_install on a 16 GiB device. */
static void expect_ok_at(const tu_layout *l, int line) {
  const hippo_api *api = tu_api();
  for (int b = 0; b < TU_N_BACKENDS; b++) {
    hippo_device *dev = tu_open(api, tu_backends[b], 0, NULL);
    hippo_status st = api->pools_install(dev, &l->layout, NULL);
    ck_assert_msg(st == HIPPO_SUCCESS, "line %d: got %s: %s", line,
                  api->status_name(st), api->last_error());
    ck_assert_uint_eq(tu_info(api, dev).pool_count, l->layout.pool_count);
    ck_assert_uint_eq(tu_info(api, dev).preset, HIPPO_PRESET_CUSTOM);
    CK_CHECK(api, dev);
    CK_OK(api, api->device_close(dev));
  }
}
#define CK_CONFIG_OK(l) expect_ok_at((l), __LINE__)

/* A valid first pool, so the bad one is at index 1. */
static hippo_pool_options *second(tu_layout *l, hippo_pool_kind kind) {
  tu_layout_init(l);
  tu_layout_add_sliced(l, TU_MiB, 256 * TU_KiB, 0);
  return tu_layout_add(l, kind);
}

/* ---- the list --------------------------------------------------------------- */

START_TEST(test_empty) {
  tu_layout l;
  tu_layout_init(&l);
  CK_CONFIG_REFUSED(&l, "pool_count");
}
END_TEST

START_TEST(test_too_many_pools) {
  tu_layout l;
  tu_layout_init(&l);
  for (int i = 0; i < 33; i++)
    tu_layout_add_sliced(&l, TU_MiB, 256 * TU_KiB, 0);
  CK_CONFIG_REFUSED(&l, "33", "32");
  l.layout.pool_count = 32; /* the limit itself is fine */
  CK_CONFIG_OK(&l);
}
END_TEST

START_TEST(test_bad_preset) {
  tu_layout l;
  tu_layout_preset(&l, 5);
  CK_CONFIG_REFUSED(&l, "preset 5");
  tu_layout_preset(&l, 99);
  CK_CONFIG_REFUSED(&l, "preset 99");
}
END_TEST

START_TEST(test_preset_with_pools) {
  tu_layout l;
  tu_layout_sliced(&l, TU_MiB, 256 * TU_KiB);
  l.layout.preset = HIPPO_PRESET_EXCLUSIVE_PAGES;
  CK_CONFIG_REFUSED(&l, "preset", "pool_count");
}
END_TEST

/* ---- one pool's fields -------------------------------------------------------- */

START_TEST(test_unknown_kind) {
  tu_layout l;
  second(&l, 0);
  CK_CONFIG_REFUSED(&l, "layout pool 1", "kind", "0 is not a pool kind");
  second(&l, HIPPO_POOL_PERSISTENT); /* reports only, never in a layout */
  CK_CONFIG_REFUSED(&l, "layout pool 1", "kind", "4 is not a pool kind");
  second(&l, 99);
  CK_CONFIG_REFUSED(&l, "layout pool 1", "kind", "99 is not a pool kind");
}
END_TEST

START_TEST(test_zero_page_size) {
  tu_layout l;
  tu_layout_init(&l);
  tu_layout_add_sliced(&l, 0, 256 * TU_KiB, 0);
  CK_CONFIG_REFUSED(&l, "layout pool 0", "page_size");
}
END_TEST

/* A page that is not a multiple of the alignment is refused (rounding it
 * down would leave a pool that cannot serve its own max_slice_size). */
START_TEST(test_page_not_aligned) {
  tu_layout l;
  tu_layout_init(&l);
  tu_layout_add_sliced(&l, 1000, 1000, 0);
  CK_CONFIG_REFUSED(&l, "layout pool 0", "SLICED", "page_size", "1000",
                    "not a multiple of the alignment 256", "use 1024");
}
END_TEST

START_TEST(test_zero_max_slice_size) {
  tu_layout l;
  hippo_pool_options *o = second(&l, HIPPO_POOL_SLICED);
  o->page_size = TU_MiB;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "max_slice_size");
}
END_TEST

START_TEST(test_zero_max_alloc_size) {
  tu_layout l;
  second(&l, HIPPO_POOL_EXCLUSIVE);
  CK_CONFIG_REFUSED(&l, "layout pool 1", "EXCLUSIVE", "max_alloc_size");
}
END_TEST

START_TEST(test_slice_larger_than_page) {
  tu_layout l;
  hippo_pool_options *o = second(&l, HIPPO_POOL_SLICED);
  o->page_size = TU_MiB;
  o->max_slice_size = TU_MiB + 256;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "max_slice_size", "page_size");
  o->max_slice_size = TU_MiB; /* equal is fine */
  CK_CONFIG_OK(&l);
}
END_TEST

START_TEST(test_page_below_alignment) {
  tu_layout l;
  hippo_pool_options *o = second(&l, HIPPO_POOL_SLICED);
  o->page_size = 128;
  o->max_slice_size = 128;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "page_size", "alignment");
}
END_TEST

START_TEST(test_cap_below_alignment) {
  tu_layout l;
  hippo_pool_options *o = second(&l, HIPPO_POOL_SLICED);
  o->page_size = TU_MiB;
  o->max_slice_size = 256 * TU_KiB;
  o->max_pool_size = 255;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "max_pool_size", "alignment");
  o->max_pool_size = 256; /* a cap of one alignment unit is allowed */
  CK_CONFIG_OK(&l);
}
END_TEST

/* ARENA: page_size is the smallest page (at least the alignment),
 * max_slice_size the largest request and page (at least page_size, a
 * multiple of the alignment, at most the 16 GiB device and 2^32 alignment
 * units), max_pool_size 0 or at least
 * one smallest page; the fields of other kinds must be 0. */
START_TEST(test_arena_fields) {
  tu_layout l;
  hippo_pool_options *o = second(&l, HIPPO_POOL_ARENA);
  o->page_size = 2 * TU_MiB;
  o->max_slice_size = TU_GiB;
  CK_CONFIG_OK(&l);
  o->page_size = 128;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "ARENA", "page_size", "128",
                    "alignment 256");
  o->page_size = 0;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "ARENA", "page_size");
  o->page_size = 2 * TU_MiB;
  o->max_slice_size = TU_MiB;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "ARENA", "max_slice_size",
                    "below page_size");
  /* the largest page: a multiple of the alignment, not rounded down
   * under a request of max_slice_size bytes */
  o->max_slice_size = 2 * TU_MiB + 1000;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "ARENA", "max_slice_size",
                    "2098152 is not a multiple of the alignment 256",
                    "use 2098176");
  o->max_slice_size = 17 * TU_GiB;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "ARENA", "max_slice_size",
                    "larger than the device");
  o->max_slice_size = UINT64_MAX;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "ARENA", "max_slice_size");
  o->max_slice_size = TU_GiB;
  o->max_pool_size = TU_MiB;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "ARENA", "max_pool_size",
                    "below page_size");
  o->max_pool_size = 4 * TU_GiB;
  CK_CONFIG_OK(&l);
  o->max_pool_size = 0;
  o->page_size = 2048; /* 16 GiB of 2 KiB pages: too many */
  CK_CONFIG_REFUSED(&l, "layout pool 1", "ARENA", "page_size", "more than");
  o->page_size = 2 * TU_MiB;
  o->max_alloc_size = TU_MiB;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "ARENA", "max_alloc_size");
  o->max_alloc_size = 0;
  o->reclaim_at = 1;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "ARENA", "reclaim_at");
  o->reclaim_at = 0;
  o->kind = 7;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "kind", "7", "_VIRTUAL");
}
END_TEST

START_TEST(test_unused_fields) {
  tu_layout l;
  hippo_pool_options *o;
  /* SLICED uses page_size, max_slice_size, max_pool_size */
  o = second(&l, HIPPO_POOL_SLICED);
  o->page_size = TU_MiB;
  o->max_slice_size = 256 * TU_KiB;
  o->reclaim_at = 1;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "SLICED", "reclaim_at");
  o->reclaim_at = 0;
  o->max_alloc_size = TU_MiB;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "SLICED", "max_alloc_size");
  /* EXCLUSIVE uses max_alloc_size */
  o = second(&l, HIPPO_POOL_EXCLUSIVE);
  o->max_alloc_size = TU_MiB;
  o->page_size = TU_MiB;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "EXCLUSIVE", "page_size");
  o->page_size = 0;
  o->max_pool_size = TU_MiB;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "EXCLUSIVE", "max_pool_size");
  o->max_pool_size = 0;
  o->reclaim_at = TU_MiB;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "EXCLUSIVE", "reclaim_at");
  /* DIRECT uses reclaim_at */
  o = second(&l, HIPPO_POOL_DIRECT);
  o->max_slice_size = TU_MiB;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "DIRECT", "max_slice_size");
  o->max_slice_size = 0;
  o->max_alloc_size = TU_MiB;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "DIRECT", "max_alloc_size");
  o->max_alloc_size = 0;
  o->reclaim_at = TU_GiB;
  o->dealloc_period = 5; /* every kind uses dealloc_period */
  CK_CONFIG_OK(&l);
}
END_TEST

START_TEST(test_overflow) {
  tu_layout l;
  hippo_pool_options *o = second(&l, HIPPO_POOL_SLICED);
  o->page_size = UINT64_MAX;
  o->max_slice_size = TU_MiB;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "page_size", "overflow");
  o->page_size = TU_MiB;
  o->max_slice_size = UINT64_MAX;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "max_slice_size", "overflow");
  o = second(&l, HIPPO_POOL_EXCLUSIVE);
  o->max_alloc_size = UINT64_MAX;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "max_alloc_size", "overflow");
  o->max_alloc_size = UINT64_MAX - 255; /* aligned, but beyond 2^63 */
  CK_CONFIG_REFUSED(&l, "layout pool 1", "max_alloc_size", "overflow");
}
END_TEST

START_TEST(test_too_many_pages) {
  tu_layout l;
  hippo_pool_options *o = second(&l, HIPPO_POOL_SLICED);
  /* 256 B pages over 16 GiB: 2^26 pages, the limit is 2^22 */
  o->page_size = 256;
  o->max_slice_size = 256;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "page_size", "limit");
  /* a cap bounds the pages: 1 GiB / 256 B = 2^22 pages, just allowed */
  o->max_pool_size = TU_GiB;
  CK_CONFIG_OK(&l);
  o->max_pool_size = TU_GiB + 256;
  CK_CONFIG_REFUSED(&l, "layout pool 1", "page_size", "4194305");
}
END_TEST

START_TEST(test_bad_pool_at_end) {
  /* the index is that of the bad pool, not the first */
  tu_layout l;
  tu_layout_init(&l);
  for (int i = 0; i < 5; i++)
    tu_layout_add_sliced(&l, TU_MiB, 256 * TU_KiB, 0);
  l.pools[4].max_slice_size = 0;
  CK_CONFIG_REFUSED(&l, "layout pool 4", "max_slice_size");
}
END_TEST

/* ---- presets ------------------------------------------------------------------- */

/* One expected pool of a resolved preset. */
typedef struct want_pool {
  hippo_pool_kind kind;
  uint64_t page_size, max_slice_size, max_alloc_size;
} want_pool;

static void expect_pools(const hippo_api *api, hippo_device *dev,
                         hippo_preset preset, const want_pool *want,
                         uint32_t n) {
  void *native;
  hippo_stream *s = tu_attach(api, dev, &native);
  hippo_device_info info = tu_info(api, dev);
  hippo_pool_report r;
  ck_assert_uint_eq(info.preset, preset);
  ck_assert_uint_eq(info.pool_count, n);
  ck_assert_uint_eq(tu_usage(api, dev, s).pool_count, n + 1);
  r = tu_report(api, s, 0);
  ck_assert_uint_eq(r.kind, HIPPO_POOL_PERSISTENT);
  for (uint32_t i = 0; i < n; i++) {
    hippo_pool_options o = tu_options(api, s, i + 1);
    r = tu_report(api, s, i + 1);
    ck_assert_msg(r.kind == want[i].kind && o.kind == want[i].kind,
                  "pool %u: kind %u, expected %u", i, r.kind, want[i].kind);
    ck_assert_msg(o.page_size == want[i].page_size &&
                      o.max_slice_size == want[i].max_slice_size &&
                      o.max_alloc_size == want[i].max_alloc_size,
                  "pool %u: page %llu slice %llu alloc %llu, expected %llu "
                  "%llu %llu",
                  i, (unsigned long long)o.page_size,
                  (unsigned long long)o.max_slice_size,
                  (unsigned long long)o.max_alloc_size,
                  (unsigned long long)want[i].page_size,
                  (unsigned long long)want[i].max_slice_size,
                  (unsigned long long)want[i].max_alloc_size);
    ck_assert_uint_eq(o.max_pool_size, 0);
    ck_assert_uint_eq(o.reclaim_at, 0);
    ck_assert_uint_eq(o.dealloc_period, DEFAULT_PERIOD);
    ck_assert_uint_eq(r.pages, 0);
  }
  {
    hippo_pool_report bad = {.struct_size = sizeof bad};
    CK_STATUS(api, api->pool_report(s, n + 1, &bad, NULL), HIPPO_INVALID_ARGUMENT);
  }
  CK_CHECK(api, dev);
  tu_detach(api, dev, s, native);
}

#define S(page) {HIPPO_POOL_SLICED, (page), (page) / 4, 0}
#define E(max) {HIPPO_POOL_EXCLUSIVE, 0, 0, (max)}

static const want_pool sub_slices_16g[] = {
    S(4 * TU_MiB),   S(16 * TU_MiB), S(64 * TU_MiB), S(256 * TU_MiB),
    S(1 * TU_GiB),   S(4 * TU_GiB),  E(16 * TU_GiB)};
static const want_pool exclusive_16g[] = {
    E(1 * TU_MiB),   E(8 * TU_MiB), E(64 * TU_MiB), E(512 * TU_MiB),
    E(4 * TU_GiB),   E(16 * TU_GiB)};
static const want_pool sub_slices_1g[] = {S(4 * TU_MiB), S(16 * TU_MiB),
                                          S(64 * TU_MiB), S(256 * TU_MiB),
                                          E(1 * TU_GiB)};
static const want_pool sub_slices_8m[] = {S(2 * TU_MiB), E(8 * TU_MiB)};
/* 4 PiB: the ladder stops at 256 GiB pages (1 TiB would be 2^32 units of
 * 256 B, one more than a slice record counts) */
static const want_pool sub_slices_4p[] = {
    S(4 * TU_MiB),        S(16 * TU_MiB),        S(64 * TU_MiB),
    S(256 * TU_MiB),      S(1 * TU_GiB),         S(4 * TU_GiB),
    S(16 * TU_GiB),       S(64 * TU_GiB),        S(256 * TU_GiB),
    E(4096 * 1024 * TU_GiB)};
#define N(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))

/* ADAPTIVE: 2 MiB pages for up to 64 KiB, an ARENA of 2 MiB .. T/4 pages
 * (at most 2^32 alignment units), the tail up to T. */
#define SMALL {HIPPO_POOL_SLICED, 2 * TU_MiB, 64 * TU_KiB, 0}
#define ARENA(floor, max) {HIPPO_POOL_ARENA, (floor), (max), 0}
static const want_pool adaptive_16g[] = {SMALL, ARENA(2 * TU_MiB, 4 * TU_GiB),
                                         E(16 * TU_GiB)};
static const want_pool adaptive_8m[] = {SMALL, ARENA(2 * TU_MiB, 2 * TU_MiB),
                                        E(8 * TU_MiB)};
static const want_pool adaptive_4p[] = {
    SMALL, ARENA(2 * TU_MiB, UINT64_C(0xffffffff) * 256),
    E(4096 * 1024 * TU_GiB)};
static const want_pool adaptive_align8m[] = {
    {HIPPO_POOL_SLICED, 8 * TU_MiB, 64 * TU_KiB, 0},
    ARENA(8 * TU_MiB, 4 * TU_GiB), E(16 * TU_GiB)};

/* A device of `backend` with `capacity` and the SUB_SLICES preset. */
static hippo_device *open_sub_slices(const hippo_api *api,
                                     hippo_backend backend,
                                     uint64_t capacity) {
  tu_layout l;
  return tu_open(api, backend, capacity,
                 tu_layout_preset(&l, HIPPO_PRESET_SUB_SLICES));
}

START_TEST(test_preset_default) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open(api, tu_backends[_i], 0, NULL); /* 16 GiB */
  ck_assert_uint_eq(tu_info(api, dev).total_memory, 16 * TU_GiB);
  expect_pools(api, dev, HIPPO_PRESET_ADAPTIVE, adaptive_16g,
               N(adaptive_16g));
  CK_OK(api, api->device_close(dev));
  dev = open_sub_slices(api, tu_backends[_i], 0);
  expect_pools(api, dev, HIPPO_PRESET_SUB_SLICES, sub_slices_16g,
               N(sub_slices_16g));
  CK_OK(api, api->device_close(dev));
}
END_TEST

START_TEST(test_preset_exclusive) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev =
      tu_open(api, tu_backends[_i], 0,
              tu_layout_preset(&l, HIPPO_PRESET_EXCLUSIVE_PAGES));
  expect_pools(api, dev, HIPPO_PRESET_EXCLUSIVE_PAGES, exclusive_16g,
               N(exclusive_16g));
  CK_OK(api, api->device_close(dev));
}
END_TEST

START_TEST(test_preset_install) {
  /* presets installed over each other and over a custom layout */
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev = tu_open(api, tu_backends[_i], 0, NULL);
  CK_OK(api, api->pools_install(
                 dev, tu_layout_preset(&l, HIPPO_PRESET_EXCLUSIVE_PAGES),
                 NULL));
  expect_pools(api, dev, HIPPO_PRESET_EXCLUSIVE_PAGES, exclusive_16g,
               N(exclusive_16g));
  CK_OK(api, api->pools_install(dev, tu_layout_sliced(&l, TU_MiB, TU_MiB),
                                NULL));
  ck_assert_uint_eq(tu_info(api, dev).preset, HIPPO_PRESET_CUSTOM);
  ck_assert_uint_eq(tu_info(api, dev).pool_count, 1);
  CK_OK(api, api->pools_install(
                 dev, tu_layout_preset(&l, HIPPO_PRESET_SUB_SLICES), NULL));
  expect_pools(api, dev, HIPPO_PRESET_SUB_SLICES, sub_slices_16g,
               N(sub_slices_16g));
  CK_OK(api, api->device_close(dev));
}
END_TEST

START_TEST(test_preset_small_devices) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_sub_slices(api, tu_backends[_i], TU_GiB);
  expect_pools(api, dev, HIPPO_PRESET_SUB_SLICES, sub_slices_1g,
               N(sub_slices_1g));
  CK_OK(api, api->device_close(dev));
  /* below 16 MiB the first page is a quarter of the device */
  dev = open_sub_slices(api, tu_backends[_i], 8 * TU_MiB);
  expect_pools(api, dev, HIPPO_PRESET_SUB_SLICES, sub_slices_8m,
               N(sub_slices_8m));
  CK_OK(api, api->device_close(dev));
  /* ADAPTIVE: no page above a quarter of the device */
  dev = tu_open(api, tu_backends[_i], 8 * TU_MiB, NULL);
  expect_pools(api, dev, HIPPO_PRESET_ADAPTIVE, adaptive_8m,
               N(adaptive_8m));
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* With an alignment above 1 MiB the ladder starts at four alignments, so
 * no preset pool has a page too small for one slice. */
static const want_pool sub_slices_16g_align8m[] = {
    S(32 * TU_MiB), S(128 * TU_MiB), S(512 * TU_MiB), S(2 * TU_GiB),
    E(16 * TU_GiB)};

START_TEST(test_preset_large_alignment) {
  const hippo_api *api = tu_api();
  hippo_device_desc d;
  hippo_device *dev = NULL;
  tu_layout l;
  TU_SIZED(d);
  d.backend = HIPPO_BACKEND_DRY;
  d.alignment = 8 * TU_MiB;
  d.layout = tu_layout_preset(&l, HIPPO_PRESET_SUB_SLICES);
  CK_OK(api, api->device_open(&d, &dev));
  expect_pools(api, dev, HIPPO_PRESET_SUB_SLICES, sub_slices_16g_align8m,
               N(sub_slices_16g_align8m));
  CK_OK(api, api->device_close(dev));
  d.layout = NULL; /* ADAPTIVE: no page below the alignment */
  CK_OK(api, api->device_open(&d, &dev));
  expect_pools(api, dev, HIPPO_PRESET_ADAPTIVE, adaptive_align8m,
               N(adaptive_align8m));
  CK_OK(api, api->device_close(dev));
}
END_TEST

START_TEST(test_preset_huge_device) {
  /* a stream attaches on any device size: no preset page is more than
   * 2^32 alignment units */
  const hippo_api *api = tu_api();
  hippo_device *dev =
      open_sub_slices(api, HIPPO_BACKEND_DRY, 4096 * 1024 * TU_GiB);
  expect_pools(api, dev, HIPPO_PRESET_SUB_SLICES, sub_slices_4p,
               N(sub_slices_4p));
  CK_OK(api, api->device_close(dev));
  dev = tu_open(api, HIPPO_BACKEND_DRY, 4096 * 1024 * TU_GiB, NULL);
  expect_pools(api, dev, HIPPO_PRESET_ADAPTIVE, adaptive_4p, N(adaptive_4p));
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* The tail of every preset takes reservations up to the capacity rounded
 * down to the alignment, the largest a device can hold: above it is
 * BUFFER_TOO_BIG naming that size, not OUT_OF_MEMORY on an empty device
 * (a tail up to the raw capacity wanted a page larger than the device). */
START_TEST(test_preset_odd_capacity) {
  static const hippo_preset presets[] = {HIPPO_PRESET_ADAPTIVE,
                                         HIPPO_PRESET_SUB_SLICES,
                                         HIPPO_PRESET_EXCLUSIVE_PAGES};
  const hippo_api *api = tu_api();
  for (unsigned k = 0; k < 3; k++) {
    tu_layout l;
    hippo_device *dev = tu_open(api, tu_backends[_i], 1000,
                                tu_layout_preset(&l, presets[k]));
    void *native;
    hippo_stream *s = tu_attach(api, dev, &native);
    hippo_device_info info = tu_info(api, dev);
    hippo_pool_report tail = tu_report(api, s, info.pool_count);
    hippo_handle h = 0;
    ck_assert_uint_eq(tail.kind, HIPPO_POOL_EXCLUSIVE);
    ck_assert_uint_eq(tu_options(api, s, info.pool_count).max_alloc_size,
                      768);
    CK_OK(api, api->reserve(s, 768, HIPPO_MODE_AUTO, &h));
    CK_OK(api, api->release(s, h));
    h = 0;
    CK_STATUS(api, api->reserve(s, 769, HIPPO_MODE_AUTO, &h),
              HIPPO_BUFFER_TOO_BIG);
    CK_ERROR_HAS(api, "largest size any pool of this layout accepts is "
                      "768 B");
    ck_assert_uint_eq(h, 0);
    CK_CHECK(api, dev);
    tu_detach(api, dev, s, native);
    CK_OK(api, api->device_close(dev));
  }
}
END_TEST

/* EXCLUSIVE_PAGES on a device of 2^63 B or more: the ladder (x8 from
 * 1 MiB) ends at 2^62, where one more step would wrap to 0 (it used to
 * fill the 32 pools with max_alloc_size 0). */
START_TEST(test_preset_exclusive_wrap) {
  static const uint64_t caps[] = {UINT64_C(1) << 63, UINT64_MAX};
  const hippo_api *api = tu_api();
  for (unsigned k = 0; k < 2; k++) {
    tu_layout l;
    hippo_device *dev =
        tu_open(api, HIPPO_BACKEND_DRY, caps[k],
                tu_layout_preset(&l, HIPPO_PRESET_EXCLUSIVE_PAGES));
    want_pool want[16];
    for (unsigned i = 0; i < 15; i++)
      want[i] = (want_pool)E(TU_MiB << (3 * i));
    /* the tail: the device, and an EXCLUSIVE pool takes at most 2^63 */
    want[15] = (want_pool)E(UINT64_C(1) << 63);
    expect_pools(api, dev, HIPPO_PRESET_EXCLUSIVE_PAGES, want, 16);
    CK_OK(api, api->device_close(dev));
  }
}
END_TEST

START_TEST(test_custom_reported) {
  /* a custom pool reports its options as given; a cap below the page
   * shrinks the page to the cap */
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev;
  void *native;
  hippo_stream *s;
  hippo_pool_report r;
  hippo_pool_options o;
  tu_layout_init(&l);
  tu_layout_add_sliced(&l, 4 * TU_MiB, TU_MiB, 0)->dealloc_period = 7;
  tu_layout_add_sliced(&l, 4 * TU_MiB, TU_MiB, 2 * TU_MiB + 100);
  dev = tu_open(api, tu_backends[_i], 0, &l.layout);
  s = tu_attach(api, dev, &native);
  r = tu_report(api, s, 1);
  ck_assert_uint_eq(r.kind, HIPPO_POOL_SLICED);
  o = tu_options(api, s, 1);
  ck_assert_uint_eq(o.page_size, 4 * TU_MiB);
  ck_assert_uint_eq(o.max_slice_size, TU_MiB);
  ck_assert_uint_eq(o.dealloc_period, 7);
  o = tu_options(api, s, 2);
  ck_assert_uint_eq(o.page_size, 2 * TU_MiB);
  ck_assert_uint_eq(o.max_pool_size, 2 * TU_MiB + 100);
  CK_CHECK(api, dev);
  tu_detach(api, dev, s, native);
  CK_OK(api, api->device_close(dev));
}
END_TEST

static Suite *layout_suite(void) {
  Suite *s = suite_create("layout");
  TCase *tc = tcase_create("validation");
  tcase_add_test(tc, test_empty);
  tcase_add_test(tc, test_too_many_pools);
  tcase_add_test(tc, test_bad_preset);
  tcase_add_test(tc, test_preset_with_pools);
  tcase_add_test(tc, test_unknown_kind);
  tcase_add_test(tc, test_zero_page_size);
  tcase_add_test(tc, test_zero_max_slice_size);
  tcase_add_test(tc, test_page_not_aligned);
  tcase_add_test(tc, test_zero_max_alloc_size);
  tcase_add_test(tc, test_slice_larger_than_page);
  tcase_add_test(tc, test_page_below_alignment);
  tcase_add_test(tc, test_cap_below_alignment);
  tcase_add_test(tc, test_unused_fields);
  tcase_add_test(tc, test_arena_fields);
  tcase_add_test(tc, test_overflow);
  tcase_add_test(tc, test_too_many_pages);
  tcase_add_test(tc, test_bad_pool_at_end);
  suite_add_tcase(s, tc);
  tc = tcase_create("presets");
  tcase_add_loop_test(tc, test_preset_default, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_preset_exclusive, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_preset_install, 0, TU_N_BACKENDS);
  tcase_add_test(tc, test_preset_huge_device);
  tcase_add_test(tc, test_preset_large_alignment);
  tcase_add_loop_test(tc, test_preset_small_devices, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_custom_reported, 0, TU_N_BACKENDS);
  tcase_add_loop_test(tc, test_preset_odd_capacity, 0, TU_N_BACKENDS);
  tcase_add_test(tc, test_preset_exclusive_wrap);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(layout_suite()); }
