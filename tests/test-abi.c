/* test-abi.c -- the plugin's ABI: version negotiation, hippo_load, struct
 * sizes of every version, slots not implemented yet, bad objects, and the
 * thread-local last_error. */
#include <config.h>

#include <check.h>
#include <malloc.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* ---- negotiation ---------------------------------------------------------- */

START_TEST(test_negotiate_equal) {
  hippo_plugin_entry_fn entry = tu_entry();
  const hippo_api *api = NULL;
  uint32_t v = HIPPO_ABI_VERSION;
  ck_assert_uint_eq(HIPPO_ABI_VERSION, HIPPO_ABI_MAKE(1, 0));
  ck_assert_uint_eq(HIPPO_ABI_VERSION, 0x10000);
  ck_assert_int_eq(entry(&v, &api), HIPPO_SUCCESS);
  ck_assert_uint_eq(v, HIPPO_ABI_MAKE(1, 0));
  ck_assert_ptr_nonnull(api);
  ck_assert_uint_eq(api->abi_version, HIPPO_ABI_MAKE(1, 0));
  ck_assert_uint_eq(api->struct_size, sizeof(hippo_api));
}
END_TEST

/* A caller of a newer 1.x gets 1.0 (and finds the slots it may call by
 * size, HIPPO_API_HAS). */
START_TEST(test_negotiate_newer_loader) {
  hippo_plugin_entry_fn entry = tu_entry();
  const hippo_api *api = NULL;
  const uint32_t asks[] = {HIPPO_ABI_MAKE(1, 1), HIPPO_ABI_MAKE(1, 7),
                           HIPPO_ABI_MAKE(1, 0xffff)};
  for (size_t i = 0; i < sizeof asks / sizeof asks[0]; i++) {
    uint32_t v = asks[i];
    api = NULL;
    ck_assert_int_eq(entry(&v, &api), HIPPO_SUCCESS);
    ck_assert_uint_eq(v, HIPPO_ABI_MAKE(1, 0));
    ck_assert_ptr_nonnull(api);
    ck_assert_uint_eq(api->abi_version, HIPPO_ABI_MAKE(1, 0));
  }
}
END_TEST

/* 0, the tables before 1.0 (plain 1, 2, ...: their layout differs) and
 * another major version are refused, and the plugin says what it
 * serves. */
START_TEST(test_negotiate_zero) {
  hippo_plugin_entry_fn entry = tu_entry();
  const hippo_api *tab = tu_api();
  const uint32_t asks[] = {0, 1, 2, 0xffff, HIPPO_ABI_MAKE(2, 0),
                           HIPPO_ABI_MAKE(0, 9), UINT32_MAX};
  for (size_t i = 0; i < sizeof asks / sizeof asks[0]; i++) {
    const hippo_api *api = NULL;
    uint32_t v = asks[i];
    ck_assert_int_eq(entry(&v, &api), HIPPO_INCOMPATIBLE_ABI);
    ck_assert_ptr_null(api); /* no table for a version it does not serve */
    ck_assert_uint_eq(v, HIPPO_ABI_MAKE(1, 0)); /* what it serves */
    CK_ERROR_HAS(tab, "serves 1.0 to 1.0");
  }
  {
    const hippo_api *api = NULL;
    uint32_t v = 1;
    ck_assert_int_eq(entry(&v, &api), HIPPO_INCOMPATIBLE_ABI);
    CK_ERROR_HAS(tab, "version 0.1");
  }
}
END_TEST

START_TEST(test_negotiate_null) {
  hippo_plugin_entry_fn entry = tu_entry();
  const hippo_api *tab = tu_api();
  const hippo_api *api = NULL;
  uint32_t v = 1;
  ck_assert_int_eq(entry(NULL, &api), HIPPO_INVALID_ARGUMENT);
  ck_assert_ptr_null(api);
  CK_ERROR_HAS(tab, "must not be NULL");
  ck_assert_int_eq(entry(&v, NULL), HIPPO_INVALID_ARGUMENT);
  ck_assert_int_eq(entry(NULL, NULL), HIPPO_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_table) {
  const hippo_api *api = tu_api();
  const hippo_emu_api *emu = NULL;
  ck_assert_uint_eq(api->struct_size, sizeof(hippo_api));
  ck_assert_uint_eq(api->abi_version, HIPPO_ABI_MAKE(1, 0));
  /* the size comes first, as in every struct; the 1.0 table ends with
   * emulation */
  ck_assert_uint_eq(offsetof(hippo_api, struct_size), 0);
  ck_assert(HIPPO_API_HAS(api, emulation));
  ck_assert_uint_eq(sizeof(hippo_api),
                    offsetof(hippo_api, emulation) + sizeof api->emulation);
  /* Every slot is filled, of both tables. */
  {
    const unsigned char *at = (const unsigned char *)api;
    size_t first = offsetof(hippo_api, status_string);
    for (size_t off = first; off < sizeof(hippo_api); off += sizeof(void *)) {
      void *slot;
      memcpy(&slot, at + off, sizeof slot);
      ck_assert_msg(slot != NULL, "hippo_api slot at offset %zu is NULL", off);
    }
  }
  CK_STATUS(api, api->emulation(NULL), HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "emu must not be NULL");
  CK_OK(api, api->emulation(&emu));
  ck_assert_ptr_nonnull(emu);
  ck_assert_uint_eq(emu->struct_size, sizeof(hippo_emu_api));
  {
    const unsigned char *at = (const unsigned char *)emu;
    size_t first = offsetof(hippo_emu_api, stream_create);
    for (size_t off = first; off < sizeof(hippo_emu_api);
         off += sizeof(void *)) {
      void *slot;
      memcpy(&slot, at + off, sizeof slot);
      ck_assert_msg(slot != NULL, "hippo_emu_api slot at offset %zu is NULL",
                    off);
    }
  }
}
END_TEST

/* HIPPO_HAS and HIPPO_API_HAS read a size: a field or slot past it is not
 * there. */
START_TEST(test_has_macros) {
  hippo_api small;
  hippo_usage u;
  memset(&small, 0, sizeof small);
  small.struct_size = (uint32_t)offsetof(hippo_api, relocate_with);
  ck_assert(HIPPO_API_HAS(&small, relocate_device));
  ck_assert(!HIPPO_API_HAS(&small, relocate_with));
  ck_assert(!HIPPO_API_HAS(&small, emulation));
  small.struct_size = sizeof small;
  ck_assert(HIPPO_API_HAS(&small, emulation));
  TU_SIZED(u);
  u.struct_size = (uint32_t)offsetof(hippo_usage, relocations);
  ck_assert(HIPPO_HAS(hippo_usage, &u, pages));
  ck_assert(!HIPPO_HAS(hippo_usage, &u, relocations));
  u.struct_size += 4; /* half a field is no field */
  ck_assert(!HIPPO_HAS(hippo_usage, &u, relocations));
}
END_TEST

/* ---- hippo_load -------------------------------------------------------------- */

START_TEST(test_load_missing_file) {
  const char *path = "/nonexistent/dir/no-such-hippo.so";
  void *lib = (void *)&lib;
  const hippo_api *api = tu_api();
  ck_assert_int_eq(hippo_load(path, &lib, &api), HIPPO_LOAD_FAILED);
  ck_assert_ptr_nonnull(strstr(hippo_load_error(), path));
  ck_assert_ptr_null(api); /* a failed load leaves nothing to call */
  ck_assert_ptr_null(lib);
}
END_TEST

START_TEST(test_load_no_symbol) {
  /* A real shared object without hippo_plugin_entry. */
  const char *path = "libc.so.6";
  void *lib = NULL;
  const hippo_api *api = NULL;
  ck_assert_int_eq(hippo_load(path, &lib, &api), HIPPO_LOAD_FAILED);
  ck_assert_ptr_nonnull(strstr(hippo_load_error(), "hippo_plugin_entry"));
  ck_assert_ptr_nonnull(strstr(hippo_load_error(), path));
  ck_assert_ptr_null(api);
}
END_TEST

START_TEST(test_load_null) {
  /* The outputs a caller passed are NULL after a refusal, as after any
   * failed load, even when another argument is the NULL one: stale
   * values from before the call would read as a loaded plugin. */
  void *lib = (void *)&lib;
  const hippo_api *api = (const hippo_api *)&api;
  ck_assert_int_eq(hippo_load(NULL, &lib, &api), HIPPO_INVALID_ARGUMENT);
  ck_assert_ptr_null(lib);
  ck_assert_ptr_null(api);
  api = (const hippo_api *)&api;
  ck_assert_int_eq(hippo_load(tu_plugin_path(), NULL, &api),
                   HIPPO_INVALID_ARGUMENT);
  ck_assert_ptr_null(api);
  lib = (void *)&lib;
  ck_assert_int_eq(hippo_load(tu_plugin_path(), &lib, NULL),
                   HIPPO_INVALID_ARGUMENT);
  ck_assert_ptr_null(lib);
  ck_assert_uint_gt(strlen(hippo_load_error()), 0);
}
END_TEST

START_TEST(test_load_twice) {
  /* A second load of the same plugin gives the same table. */
  void *lib = NULL;
  const hippo_api *api = NULL;
  ck_assert_int_eq(hippo_load(tu_plugin_path(), &lib, &api), HIPPO_SUCCESS);
  ck_assert_ptr_eq(api, tu_api());
  ck_assert_str_eq(hippo_load_error(), "");
  dlclose(lib);
}
END_TEST

/* Copies the plugin to a fresh file (two paths: dlopen loads two copies). */
static void copy_plugin(char *path) {
  FILE *in = fopen(tu_plugin_path(), "rb"), *out;
  int fd = mkstemp(path);
  char buf[65536];
  size_t n;
  ck_assert_ptr_nonnull(in);
  ck_assert_int_ge(fd, 0);
  out = fdopen(fd, "wb");
  ck_assert_ptr_nonnull(out);
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
  fclose(in);
  ck_assert_int_eq(fclose(out), 0);
}

/* Two copies of the plugin in one process, driven the same way, do not
 * take each other's handles (each copy's tags and generations start from
 * where it was loaded), nor each other's devices and streams (each copy's
 * shells carry its own magic: another build would lay them out
 * otherwise), and the refusal changes nothing. */
START_TEST(test_two_copies) {
  char pa[] = "/tmp/hippo-copy-a-XXXXXX", pb[] = "/tmp/hippo-copy-b-XXXXXX";
  void *la, *lb;
  const hippo_api *a, *b;
  hippo_device *da, *db;
  hippo_stream *sa, *sb;
  void *na, *nb, *ptr;
  hippo_handle ha[2], hb[2];
  uint64_t size;
  copy_plugin(pa);
  copy_plugin(pb);
  ck_assert_int_eq(hippo_load(pa, &la, &a), HIPPO_SUCCESS);
  ck_assert_int_eq(hippo_load(pb, &lb, &b), HIPPO_SUCCESS);
  ck_assert_ptr_ne(a, b);
  da = tu_open(a, HIPPO_BACKEND_DRY, TU_GiB, NULL);
  db = tu_open(b, HIPPO_BACKEND_DRY, TU_GiB, NULL);
  sa = tu_attach(a, da, &na);
  sb = tu_attach(b, db, &nb);
  ha[0] = tu_reserve(a, sa, 1 << 20); /* named by a SLICED pool */
  hb[0] = tu_reserve(b, sb, 1 << 20);
  ha[1] = tu_reserve(a, sa, 0); /* named by the handle table */
  hb[1] = tu_reserve(b, sb, 0);
  {
    hippo_handle h = 0;
    hippo_usage u;
    hippo_stream *other = NULL;
    void *native = NULL;
    memset(&u, 0, sizeof u);
    u.struct_size = sizeof u;
    CK_STATUS(a, a->reserve(sb, 4096, HIPPO_MODE_AUTO, &h),
              HIPPO_INVALID_ARGUMENT);
    ck_assert(strstr(a->last_error(), "this copy of the plugin") != NULL);
    ck_assert_uint_eq(h, 0);
    CK_STATUS(a, a->release(sb, hb[0]), HIPPO_INVALID_ARGUMENT);
    CK_STATUS(a, a->resolve(sb, hb[0], &ptr, &size), HIPPO_INVALID_ARGUMENT);
    CK_STATUS(a, a->usage(db, NULL, &u), HIPPO_INVALID_ARGUMENT);
    CK_STATUS(a, a->check(db), HIPPO_INVALID_ARGUMENT);
    CK_STATUS(a, a->stream_attach(db, native, &other),
              HIPPO_INVALID_ARGUMENT);
    CK_STATUS(a, a->stream_detach(sb), HIPPO_INVALID_ARGUMENT);
    CK_STATUS(a, a->device_close(db), HIPPO_INVALID_ARGUMENT);
    CK_STATUS(b, b->reserve(sa, 4096, HIPPO_MODE_AUTO, &h),
              HIPPO_INVALID_ARGUMENT);
    /* b's device, stream and reservations are as they were */
    CK_OK(b, b->check(db));
    CK_OK(b, b->usage(db, NULL, &u));
    ck_assert_uint_eq(u.bytes_in_use, 1 << 20);
    CK_OK(b, b->resolve(sb, hb[0], &ptr, &size));
    ck_assert_uint_eq(size, 1 << 20);
  }
  for (int i = 0; i < 2; i++) {
    ck_assert_uint_ne(ha[i], hb[i]);
    CK_STATUS(b, b->resolve(sb, ha[i], &ptr, &size), HIPPO_INVALID_HANDLE);
    CK_STATUS(b, b->release(sb, ha[i]), HIPPO_INVALID_HANDLE);
    CK_STATUS(a, a->release(sa, hb[i]), HIPPO_INVALID_HANDLE);
    CK_OK(a, a->release(sa, ha[i]));
    CK_OK(b, b->release(sb, hb[i]));
  }
  CK_OK(a, a->stream_detach(sa));
  CK_OK(b, b->stream_detach(sb));
  CK_OK(a, tu_emu(a)->stream_destroy(da, na));
  CK_OK(b, tu_emu(b)->stream_destroy(db, nb));
  CK_OK(a, a->device_close(da));
  CK_OK(b, b->device_close(db));
  dlclose(la);
  dlclose(lb);
  unlink(pa);
  unlink(pb);
}
END_TEST

/* Failed opens and attaches keep nothing (their device or stream was never
 * handed out): the heap does not grow with them. */
START_TEST(test_failures_keep_nothing) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open(api, HIPPO_BACKEND_DRY, TU_GiB, NULL);
  hippo_device_desc d;
  hippo_stream *s = NULL;
  void *native = NULL;
  size_t before, after;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.backend = HIPPO_BACKEND_DRY;
  d.alignment = 3; /* not a power of two */
  s = tu_attach(api, dev, &native);
  before = mallinfo2().uordblks;
  for (int i = 0; i < 10000; i++) {
    hippo_device *no = NULL;
    hippo_stream *again = NULL;
    (void)api->device_open(&d, &no);
    (void)api->stream_attach(dev, native, &again); /* attached already */
  }
  after = mallinfo2().uordblks; /* 0 under valgrind or ASan: no check */
  ck_assert_msg(after < before + 64 * 1024,
                "the heap grew by %zu B over 20000 failed calls",
                after - before);
  CK_STATUS(api, api->device_open(&d, &(hippo_device *){NULL}),
            HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->stream_attach(dev, native, &(hippo_stream *){NULL}),
            HIPPO_BUSY);
  CK_OK(api, api->stream_detach(s));
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* ---- input structs ------------------------------------------------------------ */

static hippo_device_desc dry_desc(void) {
  hippo_device_desc d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.backend = HIPPO_BACKEND_DRY;
  d.capacity = TU_GiB;
  return d;
}

START_TEST(test_desc_older_caller) {
  /* An 8-byte desc: struct_size and backend; the rest take zero defaults
   * (capacity 0 = 16 GiB, default layout). */
  const hippo_api *api = tu_api();
  hippo_device_desc d = dry_desc();
  hippo_device *dev = NULL;
  hippo_device_info info;
  d.struct_size = 8;
  d.capacity = 12345 * TU_MiB;         /* beyond struct_size: ignored */
  d.flags = HIPPO_DEVICE_FIXED_LAYOUT; /* ignored too */
  CK_OK(api, api->device_open(&d, &dev));
  info = tu_info(api, dev);
  ck_assert_uint_eq(info.backend, HIPPO_BACKEND_DRY);
  ck_assert_uint_eq(info.total_memory, 16 * TU_GiB);
  ck_assert_uint_eq(info.alignment, 256);
  ck_assert_uint_eq(info.preset, HIPPO_PRESET_ADAPTIVE); /* layout NULL */
  {
    tu_layout l;
    CK_OK(api, api->pools_install(
                   dev, tu_layout_preset(&l, HIPPO_PRESET_EXCLUSIVE_PAGES),
                   NULL));
  }
  CK_OK(api, api->device_close(dev));
}
END_TEST

START_TEST(test_desc_too_small) {
  const hippo_api *api = tu_api();
  hippo_device_desc d = dry_desc();
  hippo_device *dev = NULL;
  /* too small, cut inside a field, or garbage far above any struct (the
   * plugin must not read that much of the caller's memory) */
  const uint32_t sizes[] = {0, 4, 7, 65544, UINT32_MAX - 7};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    d.struct_size = sizes[i];
    CK_STATUS(api, api->device_open(&d, &dev), HIPPO_INVALID_ARGUMENT);
    CK_ERROR_HAS(api, "struct_size");
    CK_ERROR_HAS(api, "at most 65536");
    ck_assert_ptr_null(dev);
  }
}
END_TEST

/* The largest struct_size accepted: a zero tail up to 64 KiB. */
START_TEST(test_desc_largest) {
  const hippo_api *api = tu_api();
  hippo_device_desc d = dry_desc();
  hippo_device *dev = NULL;
  unsigned char *big = calloc(1, 65536);
  ck_assert_ptr_nonnull(big);
  memcpy(big, &d, sizeof d);
  memcpy(big, &(uint32_t){65536}, sizeof(uint32_t));
  CK_OK(api, api->device_open((const hippo_device_desc *)(void *)big, &dev));
  CK_OK(api, api->device_close(dev));
  free(big);
}
END_TEST

/* A newer caller's struct: ours followed by fields we do not know. */
typedef struct newer_desc {
  hippo_device_desc d;
  unsigned char tail[16];
} newer_desc;

START_TEST(test_desc_newer_zero_tail) {
  const hippo_api *api = tu_api();
  newer_desc n;
  hippo_device *dev = NULL;
  memset(&n, 0, sizeof n);
  n.d = dry_desc();
  n.d.struct_size = sizeof(hippo_device_desc) + 16;
  CK_OK(api, api->device_open(&n.d, &dev));
  ck_assert_uint_eq(tu_info(api, dev).total_memory, TU_GiB);
  CK_OK(api, api->device_close(dev));
}
END_TEST

START_TEST(test_desc_newer_nonzero_tail) {
  const hippo_api *api = tu_api();
  hippo_device *dev = NULL;
  for (int at = 0; at < 16; at += 15) {
    newer_desc n;
    memset(&n, 0, sizeof n);
    n.d = dry_desc();
    n.d.struct_size = sizeof(hippo_device_desc) + 16;
    n.tail[at] = 1;
    CK_STATUS(api, api->device_open(&n.d, &dev), HIPPO_INVALID_ARGUMENT);
    CK_ERROR_HAS(api, "struct_size");
    CK_ERROR_HAS(api, "byte");
    ck_assert_ptr_null(dev);
  }
}
END_TEST

START_TEST(test_desc_null) {
  const hippo_api *api = tu_api();
  hippo_device_desc d = dry_desc();
  hippo_device *dev = NULL;
  CK_STATUS(api, api->device_open(NULL, &dev), HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->device_open(&d, NULL), HIPPO_INVALID_ARGUMENT);
  d.backend = 4;
  CK_STATUS(api, api->device_open(&d, &dev), HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "backend");
  d = dry_desc();
  d.flags = 16; /* FIXED_LAYOUT (1), AUTO_RELOCATE (2), NO_MOVE (4),
                   HOST_GRAPHS (8) are known */
  CK_STATUS(api, api->device_open(&d, &dev), HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "flags 0x10");
  d = dry_desc();
  d.alignment = 384;
  CK_STATUS(api, api->device_open(&d, &dev), HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "alignment");
  ck_assert_ptr_null(dev);
}
END_TEST

START_TEST(test_layout_struct_sizes) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open(api, HIPPO_BACKEND_DRY, TU_GiB, NULL);
  tu_layout l;
  /* An 8-byte layout: struct_size and preset (EXCLUSIVE_PAGES). */
  tu_layout_preset(&l, HIPPO_PRESET_EXCLUSIVE_PAGES);
  l.layout.struct_size = 8;
  l.layout.pool_count = 5; /* beyond struct_size: ignored */
  CK_OK(api, api->pools_install(dev, &l.layout, NULL));
  ck_assert_uint_eq(tu_info(api, dev).preset, HIPPO_PRESET_EXCLUSIVE_PAGES);
  l.layout.struct_size = 4;
  CK_STATUS(api, api->pools_install(dev, &l.layout, NULL),
            HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "struct_size");
  /* Pool options of an older caller: 8 bytes (kind only) is a valid
   * prefix, and a SLICED pool with zero sizes is then a config error. */
  tu_layout_sliced(&l, TU_MiB, 256 * TU_KiB);
  l.pools[0].struct_size = 4;
  CK_STATUS(api, api->pools_install(dev, &l.layout, NULL),
            HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "struct_size");
  /* A pool struct larger than the stride is refused. */
  tu_layout_sliced(&l, TU_MiB, 256 * TU_KiB);
  l.pools[0].struct_size = sizeof(hippo_pool_options) + 8;
  CK_STATUS(api, api->pools_install(dev, &l.layout, NULL),
            HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "struct_size");
  /* A stride below the v1 prefix is refused, and one far beyond any
   * struct (garbage: it would walk far past the caller's array). */
  tu_layout_sliced(&l, TU_MiB, 256 * TU_KiB);
  l.layout.pool_options_size = 4;
  CK_STATUS(api, api->pools_install(dev, &l.layout, NULL),
            HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "pool_options_size");
  tu_layout_sliced(&l, TU_MiB, 256 * TU_KiB);
  tu_layout_add_sliced(&l, 2 * TU_MiB, TU_MiB, 0);
  l.layout.pool_options_size = 1u << 20;
  CK_STATUS(api, api->pools_install(dev, &l.layout, NULL),
            HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "pool_options_size");
  /* Sizes that end inside a field (here inside the pools pointer, or
   * inside a size) are refused, never half read. */
  for (uint32_t size = 9; size < sizeof(hippo_layout); size++) {
    if (size % 8 == 0)
      continue;
    tu_layout_sliced(&l, TU_MiB, 256 * TU_KiB);
    l.layout.struct_size = size;
    CK_STATUS(api, api->pools_install(dev, &l.layout, NULL),
              HIPPO_INVALID_ARGUMENT);
    CK_ERROR_HAS(api, "multiple of 8");
  }
  tu_layout_sliced(&l, TU_MiB, 256 * TU_KiB);
  l.pools[0].struct_size = 12;
  CK_STATUS(api, api->pools_install(dev, &l.layout, NULL),
            HIPPO_INVALID_ARGUMENT);
  {
    hippo_device_desc d;
    hippo_device *other = NULL;
    TU_SIZED(d);
    d.backend = HIPPO_BACKEND_DRY;
    d.layout = tu_layout_sliced(&l, TU_MiB, 256 * TU_KiB);
    for (uint32_t size = 33; size < 40; size++) {
      d.struct_size = size; /* ends inside the layout pointer */
      CK_STATUS(api, api->device_open(&d, &other), HIPPO_INVALID_ARGUMENT);
      ck_assert_ptr_null(other);
    }
  }
  ck_assert_uint_eq(tu_info(api, dev).preset, HIPPO_PRESET_EXCLUSIVE_PAGES);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* Pool options of a newer caller, with a larger stride. */
typedef struct newer_pool {
  hippo_pool_options o;
  uint64_t future;
} newer_pool;

START_TEST(test_pool_options_newer) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open(api, HIPPO_BACKEND_DRY, TU_GiB, NULL);
  newer_pool pools[2];
  hippo_layout l;
  hippo_stream *s;
  void *native;
  memset(pools, 0, sizeof pools);
  for (int i = 0; i < 2; i++) {
    pools[i].o.struct_size = sizeof(newer_pool);
    pools[i].o.kind = HIPPO_POOL_SLICED;
    pools[i].o.page_size = (uint64_t)(i + 1) * TU_MiB;
    pools[i].o.max_slice_size = (uint64_t)(i + 1) * 256 * TU_KiB;
  }
  memset(&l, 0, sizeof l);
  l.struct_size = sizeof l;
  l.preset = HIPPO_PRESET_CUSTOM;
  l.pool_count = 2;
  l.pool_options_size = sizeof(newer_pool);
  l.pools = &pools[0].o;
  CK_OK(api, api->pools_install(dev, &l, NULL));
  s = tu_attach(api, dev, &native);
  /* The stride was honoured: pool 2 has the second pool's options. */
  ck_assert_uint_eq(tu_options(api, s, 2).page_size, 2 * TU_MiB);
  ck_assert_uint_eq(tu_options(api, s, 2).max_slice_size,
                    512 * TU_KiB);
  tu_detach(api, dev, s, native);
  pools[1].future = 1; /* a field this plugin does not know */
  CK_STATUS(api, api->pools_install(dev, &l, NULL), HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "pool 1");
  CK_ERROR_HAS(api, "byte");
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* ---- output structs --------------------------------------------------------- */

#define CANARY 0xA5

static void assert_canary(const void *p, size_t from, size_t to,
                          const char *what) {
  const unsigned char *b = p;
  for (size_t i = from; i < to; i++)
    ck_assert_msg(b[i] == CANARY, "%s: byte %zu beyond struct_size written",
                  what, i);
}

START_TEST(test_output_smaller) {
  const hippo_api *api = tu_api();
  tu_layout l;
  hippo_device *dev =
      tu_open(api, HIPPO_BACKEND_DRY, TU_GiB, tu_layout_sliced(&l, TU_MiB,
                                                               256 * TU_KiB));
  void *native;
  hippo_stream *s = tu_attach(api, dev, &native);
  hippo_handle h = tu_reserve(api, s, 1000);
  /* usage: up to allocations */
  {
    hippo_usage u;
    uint32_t size = (uint32_t)offsetof(hippo_usage, bytes_in_use);
    memset(&u, CANARY, sizeof u);
    u.struct_size = size;
    CK_OK(api, api->usage(dev, s, &u));
    ck_assert_uint_eq(u.struct_size, size);
    ck_assert_uint_eq(u.pool_count, 2);
    ck_assert_uint_eq(u.allocations, 1);
    assert_canary(&u, size, sizeof u, "usage");
    memset(&u, CANARY, sizeof u);
    u.struct_size = size;
    CK_OK(api, api->usage(dev, NULL, &u));
    ck_assert_uint_eq(u.struct_size, size);
    ck_assert_uint_eq(u.allocations, 1);
    assert_canary(&u, size, sizeof u, "device usage");
  }
  /* device_info: up to streams */
  {
    hippo_device_info i;
    uint32_t size = (uint32_t)offsetof(hippo_device_info, total_memory);
    memset(&i, CANARY, sizeof i);
    i.struct_size = size;
    CK_OK(api, api->device_info(dev, &i));
    ck_assert_uint_eq(i.struct_size, size);
    ck_assert_uint_eq(i.backend, HIPPO_BACKEND_DRY);
    ck_assert_int_eq(i.hip_device, 0);
    ck_assert_uint_eq(i.streams, 1);
    assert_canary(&i, size, sizeof i, "device_info");
  }
  /* pool_report: up to kind, then up to pages; its options up to
   * page_size */
  {
    hippo_pool_report r;
    hippo_pool_options o;
    uint32_t size = (uint32_t)offsetof(hippo_pool_report, pages);
    memset(&r, CANARY, sizeof r);
    r.struct_size = size;
    CK_OK(api, api->pool_report(s, 1, &r, NULL));
    ck_assert_uint_eq(r.struct_size, size);
    ck_assert_uint_eq(r.kind, HIPPO_POOL_SLICED);
    assert_canary(&r, size, sizeof r, "pool_report");
    size = (uint32_t)offsetof(hippo_pool_report, peak_pages);
    memset(&r, CANARY, sizeof r);
    r.struct_size = size;
    memset(&o, CANARY, sizeof o);
    o.struct_size = (uint32_t)offsetof(hippo_pool_options, max_slice_size);
    CK_OK(api, api->pool_report(s, 1, &r, &o));
    ck_assert_uint_eq(r.struct_size, size);
    ck_assert_uint_eq(r.pages, 1);
    assert_canary(&r, size, sizeof r, "pool_report");
    ck_assert_uint_eq(o.struct_size,
                      offsetof(hippo_pool_options, max_slice_size));
    ck_assert_uint_eq(o.kind, HIPPO_POOL_SLICED);
    ck_assert_uint_eq(o.page_size, TU_MiB);
    assert_canary(&o, o.struct_size, sizeof o, "pool_report's options");
  }
  /* too small to hold even the prefix */
  {
    hippo_usage u;
    memset(&u, CANARY, sizeof u);
    u.struct_size = 4;
    CK_STATUS(api, api->usage(dev, s, &u), HIPPO_INVALID_ARGUMENT);
    CK_ERROR_HAS(api, "struct_size");
    assert_canary(&u, 4, sizeof u, "usage (refused)");
  }
  CK_OK(api, api->release(s, h));
  tu_detach(api, dev, s, native);
  CK_OK(api, api->device_close(dev));
}
END_TEST

typedef struct newer_usage {
  hippo_usage u;
  unsigned char tail[24];
} newer_usage;

START_TEST(test_output_larger) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open(api, HIPPO_BACKEND_DRY, TU_GiB, NULL);
  void *native;
  hippo_stream *s = tu_attach(api, dev, &native);
  hippo_handle h = tu_reserve(api, s, 1000);
  newer_usage n;
  memset(&n, CANARY, sizeof n);
  n.u.struct_size = sizeof n;
  CK_OK(api, api->usage(dev, s, &n.u));
  /* the plugin's size: the fields past it were not filled */
  ck_assert_uint_eq(n.u.struct_size, sizeof n.u);
  ck_assert(HIPPO_HAS(hippo_usage, &n.u, event_failures));
  ck_assert_uint_eq(n.u.allocations, 1);
  ck_assert_uint_eq(n.u.bytes_in_use, 1000);
  /* Fields this plugin does not know read as zero. */
  for (size_t i = 0; i < sizeof n.tail; i++)
    ck_assert_uint_eq(n.tail[i], 0);
  CK_OK(api, api->release(s, h));
  tu_detach(api, dev, s, native);
  CK_OK(api, api->device_close(dev));
}
END_TEST


/* ---- bad objects ------------------------------------------------------------------ */

/* Zeroed memory posing as an object: a "garbage" pointer that is safe to
 * read. */
static union {
  unsigned char bytes[4096];
  uint64_t align;
} fake_object;

START_TEST(test_bad_device) {
  const hippo_api *api = tu_api();
  hippo_device *bad[2] = {NULL, (hippo_device *)(void *)&fake_object};
  for (int i = 0; i < 2; i++) {
    hippo_device *d = bad[i];
    hippo_device_info info = {.struct_size = sizeof info};
    hippo_usage u = {.struct_size = sizeof u};
    hippo_emu_counters c = {.struct_size = sizeof c};
    hippo_stream *s = NULL;
    void *native = NULL;
    uint64_t id = 0, live = 0;
    char buf[8] = {0};
    tu_layout l;
    CK_STATUS(api, api->device_close(d), HIPPO_INVALID_ARGUMENT);
    CK_ERROR_HAS(api, "device");
    CK_STATUS(api, api->device_info(d, &info), HIPPO_INVALID_ARGUMENT);
    CK_STATUS(api, api->stream_attach(d, NULL, &s), HIPPO_INVALID_ARGUMENT);
    ck_assert_ptr_null(s);
    CK_STATUS(api,
              api->pools_install(
                  d, tu_layout_preset(&l, HIPPO_PRESET_SUB_SLICES), &live),
              HIPPO_INVALID_ARGUMENT);
    CK_STATUS(api, api->cleanup(d, NULL), HIPPO_INVALID_ARGUMENT);
    CK_STATUS(api, api->usage(d, NULL, &u), HIPPO_INVALID_ARGUMENT);
    CK_STATUS(api, api->check(d), HIPPO_INVALID_ARGUMENT);
    CK_STATUS(api, tu_emu(api)->stream_create(d, &native),
              HIPPO_INVALID_ARGUMENT);
    ck_assert_ptr_null(native);
    CK_STATUS(api, tu_emu(api)->stream_destroy(d, NULL), HIPPO_INVALID_ARGUMENT);
    CK_STATUS(api, tu_emu(api)->capture_begin(d, NULL, &id),
              HIPPO_INVALID_ARGUMENT);
    CK_STATUS(api, tu_emu(api)->capture_end(d, NULL), HIPPO_INVALID_ARGUMENT);
    CK_STATUS(api,
              tu_emu(api)->inject_fault(d, HIPPO_CALL_ALLOC, 1,
                                    HIPPO_OUT_OF_MEMORY),
              HIPPO_INVALID_ARGUMENT);
    CK_STATUS(api, tu_emu(api)->read(d, buf, buf, 1), HIPPO_INVALID_ARGUMENT);
    CK_STATUS(api, tu_emu(api)->write(d, buf, buf, 1), HIPPO_INVALID_ARGUMENT);
    CK_STATUS(api, tu_emu(api)->counters(d, &c), HIPPO_INVALID_ARGUMENT);
  }
}
END_TEST

/* A pointer kept after device_close or stream_detach is refused, however
 * many devices and streams were made since (their memory is never the old
 * pointer's), and a stream's pointer is not a device's. */
START_TEST(test_stale_objects) {
  const hippo_api *api = tu_api();
  hippo_device *old_dev = tu_open(api, HIPPO_BACKEND_DRY, TU_GiB, NULL);
  hippo_device *devs[16], *dev;
  hippo_stream *old_s, *streams[16];
  void *native, *n2, *ptr;
  hippo_handle h;
  hippo_device_info info = {.struct_size = sizeof info};
  uint64_t size;
  CK_OK(api, api->device_close(old_dev));
  for (int i = 0; i < 16; i++) {
    devs[i] = tu_open(api, HIPPO_BACKEND_DRY, TU_GiB, NULL);
    ck_assert_ptr_ne(devs[i], old_dev);
  }
  CK_STATUS(api, api->device_close(old_dev), HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "closed already");
  CK_STATUS(api, api->device_info(old_dev, &info), HIPPO_INVALID_ARGUMENT);
  dev = devs[15];
  old_s = tu_attach(api, dev, &native);
  CK_OK(api, api->stream_detach(old_s));
  for (int i = 0; i < 16; i++) {
    streams[i] = tu_attach(api, devs[i], &n2);
    ck_assert_ptr_ne(streams[i], old_s);
  }
  h = tu_reserve(api, streams[15], 4096);
  CK_STATUS(api, api->stream_detach(old_s), HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "detached already");
  CK_STATUS(api, api->reserve(old_s, 16, HIPPO_MODE_AUTO, &h),
            HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->release(old_s, h), HIPPO_INVALID_ARGUMENT);
  /* a stream is not a device, a device is not a stream */
  CK_STATUS(api, api->device_info((hippo_device *)(void *)streams[0], &info),
            HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->stream_detach((hippo_stream *)(void *)devs[0]),
            HIPPO_INVALID_ARGUMENT);
  /* everything made since is intact */
  CK_OK(api, api->resolve(streams[15], h, &ptr, &size));
  ck_assert_uint_eq(size, 4096);
  CK_OK(api, api->release(streams[15], h));
  for (int i = 0; i < 16; i++) {
    ck_assert_uint_eq(tu_usage(api, devs[i], NULL).allocations, 0);
    CK_OK(api, api->stream_detach(streams[i]));
    CK_OK(api, api->device_close(devs[i]));
  }
}
END_TEST

START_TEST(test_bad_stream) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open(api, HIPPO_BACKEND_DRY, TU_GiB, NULL);
  hippo_stream *bad[2] = {NULL, (hippo_stream *)(void *)&fake_object};
  for (int i = 0; i < 2; i++) {
    hippo_stream *s = bad[i];
    hippo_handle h = 0;
    hippo_usage u = {.struct_size = sizeof u};
    hippo_pool_report r = {.struct_size = sizeof r};
    void *ptr = NULL;
    uint64_t size = 0;
    CK_STATUS(api, api->reserve(s, 16, HIPPO_MODE_AUTO, &h),
              HIPPO_INVALID_ARGUMENT);
    CK_ERROR_HAS(api, "stream");
    ck_assert_uint_eq(h, 0);
    CK_STATUS(api, api->release(s, 1), HIPPO_INVALID_ARGUMENT);
    CK_STATUS(api, api->resolve(s, 1, &ptr, &size), HIPPO_INVALID_ARGUMENT);
    CK_STATUS(api, api->persistent_begin(s), HIPPO_INVALID_ARGUMENT);
    CK_STATUS(api, api->persistent_end(s), HIPPO_INVALID_ARGUMENT);
    CK_STATUS(api, api->stream_detach(s), HIPPO_INVALID_ARGUMENT);
    CK_STATUS(api, api->pool_report(s, 0, &r, NULL), HIPPO_INVALID_ARGUMENT);
    if (s) { /* NULL means "the device" for usage and cleanup */
      CK_STATUS(api, api->usage(dev, s, &u), HIPPO_INVALID_ARGUMENT);
      CK_STATUS(api, api->cleanup(dev, s), HIPPO_INVALID_ARGUMENT);
    }
  }
  CK_CHECK(api, dev);
  CK_OK(api, api->device_close(dev));
}
END_TEST

START_TEST(test_bad_arguments) {
  const hippo_api *api = tu_api();
  hippo_device *dev = tu_open(api, HIPPO_BACKEND_DRY, TU_GiB, NULL);
  hippo_device *other = tu_open(api, HIPPO_BACKEND_DRY, TU_GiB, NULL);
  void *native, *onative;
  hippo_stream *s = tu_attach(api, dev, &native);
  hippo_stream *os = tu_attach(api, other, &onative);
  hippo_handle h = 0;
  void *ptr = NULL;
  hippo_usage u = {.struct_size = sizeof u};
  CK_STATUS(api, api->reserve(s, 16, 2, &h), HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "mode");
  CK_STATUS(api, api->reserve(s, 16, HIPPO_MODE_AUTO, NULL),
            HIPPO_INVALID_ARGUMENT);
  h = tu_reserve(api, s, 16);
  CK_STATUS(api, api->resolve(s, h, NULL, NULL), HIPPO_INVALID_ARGUMENT);
  CK_OK(api, api->resolve(s, h, &ptr, NULL)); /* size is optional */
  ck_assert_ptr_nonnull(ptr);
  CK_STATUS(api, api->stream_attach(dev, NULL, NULL), HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->usage(dev, s, NULL), HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->device_info(dev, NULL), HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->pool_report(s, 0, NULL, NULL), HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, api->pools_install(dev, NULL, NULL), HIPPO_INVALID_ARGUMENT);
  CK_STATUS(api, tu_emu(api)->counters(dev, NULL), HIPPO_INVALID_ARGUMENT);
  {
    hippo_pool_report r = {.struct_size = sizeof r};
    /* the default preset (ADAPTIVE): small, arena, tail, persistent */
    uint32_t n = tu_usage(api, dev, s).pool_count;
    ck_assert_uint_eq(n, 4);
    CK_OK(api, api->pool_report(s, n - 1, &r, NULL));
    CK_STATUS(api, api->pool_report(s, n, &r, NULL), HIPPO_INVALID_ARGUMENT);
    CK_ERROR_HAS(api, "pool index 4");
    CK_STATUS(api, api->pool_report(s, UINT32_MAX, &r, NULL),
              HIPPO_INVALID_ARGUMENT);
  }
  /* a stream of another device */
  CK_STATUS(api, api->usage(dev, os, &u), HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "another device");
  CK_STATUS(api, api->cleanup(dev, os), HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "another device");
  CK_CHECK(api, dev);
  CK_CHECK(api, other);
  CK_OK(api, api->release(s, h));
  tu_detach(api, dev, s, native);
  tu_detach(api, other, os, onative);
  CK_OK(api, api->device_close(dev));
  CK_OK(api, api->device_close(other));
}
END_TEST

/* ---- last_error is per thread -------------------------------------------------- */

typedef struct thread_result {
  hippo_status status;
  char message[512];
  char before[512];
} thread_result;

static void *fail_on_thread(void *arg) {
  thread_result *r = arg;
  const hippo_api *api = tu_api();
  hippo_device_desc d;
  hippo_device *dev = NULL;
  snprintf(r->before, sizeof r->before, "%s", api->last_error());
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.backend = 77; /* a different failure than the main thread's */
  r->status = api->device_open(&d, &dev);
  snprintf(r->message, sizeof r->message, "%s", api->last_error());
  return NULL;
}

START_TEST(test_last_error_thread_local) {
  const hippo_api *api = tu_api();
  thread_result r;
  pthread_t t;
  char mine[512];
  CK_STATUS(api, api->release(NULL, 1), HIPPO_INVALID_ARGUMENT);
  snprintf(mine, sizeof mine, "%s", api->last_error());
  ck_assert_ptr_nonnull(strstr(mine, "release"));
  memset(&r, 0, sizeof r);
  ck_assert_int_eq(pthread_create(&t, NULL, fail_on_thread, &r), 0);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  ck_assert_int_eq(r.status, HIPPO_INVALID_ARGUMENT);
  ck_assert_str_eq(r.before, ""); /* a new thread starts clean */
  ck_assert_ptr_nonnull(strstr(r.message, "backend 77"));
  ck_assert_str_eq(api->last_error(), mine); /* ours is untouched */
}
END_TEST

static Suite *abi_suite(void) {
  Suite *s = suite_create("abi");
  TCase *tc = tcase_create("negotiation");
  tcase_add_test(tc, test_negotiate_equal);
  tcase_add_test(tc, test_negotiate_newer_loader);
  tcase_add_test(tc, test_negotiate_zero);
  tcase_add_test(tc, test_negotiate_null);
  tcase_add_test(tc, test_table);
  tcase_add_test(tc, test_has_macros);
  suite_add_tcase(s, tc);
  tc = tcase_create("load");
  tcase_add_test(tc, test_load_missing_file);
  tcase_add_test(tc, test_load_no_symbol);
  tcase_add_test(tc, test_load_null);
  tcase_add_test(tc, test_load_twice);
  tcase_add_test(tc, test_two_copies);
  tcase_add_test(tc, test_failures_keep_nothing);
  suite_add_tcase(s, tc);
  tc = tcase_create("structs");
  tcase_add_test(tc, test_desc_older_caller);
  tcase_add_test(tc, test_desc_too_small);
  tcase_add_test(tc, test_desc_largest);
  tcase_add_test(tc, test_desc_newer_zero_tail);
  tcase_add_test(tc, test_desc_newer_nonzero_tail);
  tcase_add_test(tc, test_desc_null);
  tcase_add_test(tc, test_layout_struct_sizes);
  tcase_add_test(tc, test_pool_options_newer);
  tcase_add_test(tc, test_output_smaller);
  tcase_add_test(tc, test_output_larger);
  suite_add_tcase(s, tc);
  tc = tcase_create("slots");
  tcase_add_test(tc, test_bad_device);
  tcase_add_test(tc, test_bad_stream);
  tcase_add_test(tc, test_stale_objects);
  tcase_add_test(tc, test_bad_arguments);
  tcase_add_test(tc, test_last_error_thread_local);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(abi_suite()); }
