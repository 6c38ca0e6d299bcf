/* test-hip.c -- the HIP backend through the ABI of the built plugin.
 *
 * Loads the plugin named by $HIPPO_PLUGIN with hippo_load().  Always runs:
 * opening a HIP device without a GPU fails with HIPPO_NO_DEVICE naming the
 * runtimes tried (hipGetDeviceCount / cudaGetDeviceCount and their error
 * names) and what to do, and an AUTO device falls back to HOST with
 * device_info's note saying why.  With a GPU (a real one, or a stand-in
 * runtime in the behaviour suite, tests/suite-gpu.sh) it also reserves,
 * resolves and releases device memory and checks the figures, the
 * device's description and its emulation slots; without one it then
 * exits 77 (skip).
 *
 * Runs without fork (CK_NOFORK): a GPU runtime does not survive a fork
 * after it has been initialized.
 */
#include <config.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hippo.h"
#include "testutil.h"

#define MiB TU_MiB

static const hippo_api *api;
/* What opening HIP device 0 answered, probed once in main. */
static hippo_status hip_open_status;

/* The plugin's emulation table. */
static const hippo_emu_api *emu(void) {
  const hippo_emu_api *e = NULL;
  ck_assert_int_eq(api->emulation(&e), HIPPO_SUCCESS);
  return e;
}
static char hip_open_error[512];

static hippo_device *open_device(hippo_backend backend, int32_t ordinal,
                                 hippo_status *st) {
  hippo_device_desc desc;
  hippo_device *dev = NULL;
  memset(&desc, 0, sizeof desc);
  desc.struct_size = sizeof desc;
  desc.backend = backend;
  desc.hip_device = ordinal;
  *st = api->device_open(&desc, &dev);
  return *st == HIPPO_SUCCESS ? dev : NULL;
}

static hippo_device_info info_of(hippo_device *dev) {
  hippo_device_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CK_OK(api, api->device_info(dev, &info));
  return info;
}

static hippo_usage usage_of(hippo_device *dev, hippo_stream *s) {
  hippo_usage u;
  memset(&u, 0, sizeof u);
  u.struct_size = sizeof u;
  CK_OK(api, api->usage(dev, s, &u));
  return u;
}

/* ---- without a GPU too ------------------------------------------------- */

START_TEST(hip_open_says_why) {
  switch (hip_open_status) {
  case HIPPO_SUCCESS:
    break;
  case HIPPO_NO_DEVICE:
    /* both runtimes are named, with why each did not serve */
    ck_assert_msg(strstr(hip_open_error, "no GPU: HIP ") != NULL,
                  "last_error \"%s\" does not name the HIP runtime",
                  hip_open_error);
    ck_assert_msg(strstr(hip_open_error, "; CUDA ") != NULL,
                  "last_error \"%s\" does not name the CUDA runtime",
                  hip_open_error);
    ck_assert_msg(strstr(hip_open_error, "hipGetDeviceCount") != NULL ||
                      strstr(hip_open_error, "libamdhip64") != NULL,
                  "last_error \"%s\" names no HIP call or library",
                  hip_open_error);
    ck_assert_msg(strstr(hip_open_error, "HOST or DRY") != NULL ||
                      strstr(hip_open_error, "HIPPO_HIP_LIBRARY") != NULL,
                  "last_error \"%s\" does not say what to do",
                  hip_open_error);
    break;
  default:
    ck_abort_msg("opening a HIP device gave %s: %s",
                 api->status_name(hip_open_status), hip_open_error);
  }
}
END_TEST

START_TEST(hip_bad_ordinal) {
  hippo_status st;
  hippo_device *dev = open_device(HIPPO_BACKEND_HIP, 1000, &st);
  ck_assert_ptr_null(dev);
  ck_assert_int_eq(st, HIPPO_NO_DEVICE);
  dev = open_device(HIPPO_BACKEND_HIP, -1, &st);
  ck_assert_ptr_null(dev);
  ck_assert_int_ne(st, HIPPO_SUCCESS);
}
END_TEST

START_TEST(auto_picks_hip_or_host) {
  hippo_status st;
  hippo_device *dev = open_device(HIPPO_BACKEND_AUTO, 0, &st);
  hippo_device_info info;

  ck_assert_msg(st == HIPPO_SUCCESS, "AUTO device_open: %s",
                api->last_error());
  info = info_of(dev);
  if (hip_open_status == HIPPO_SUCCESS) {
    ck_assert_uint_eq(info.backend, HIPPO_BACKEND_HIP);
    ck_assert_msg(strncmp(info.note, "AUTO chose HIP", 14) == 0, "note %s",
                  info.note);
  } else {
    ck_assert_uint_eq(info.backend, HIPPO_BACKEND_HOST);
    /* why: what the GPU probe answered */
    ck_assert_msg(strncmp(info.note, "AUTO chose HOST: no GPU", 23) == 0,
                  "note %s", info.note);
    ck_assert_str_eq(info.runtime, "none");
  }
  ck_assert_uint_gt(info.total_memory, 0);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* ---- with a GPU -------------------------------------------------------- */

/* The device as the runtime describes it: the alignment is the device's
 * texture alignment, a power of two of at least 256 (512 on NVIDIA GPUs);
 * name, architecture and runtime are filled. */
START_TEST(hip_device_info) {
  hippo_status st;
  hippo_device *dev = open_device(HIPPO_BACKEND_HIP, 0, &st);
  hippo_device_info info;

  ck_assert_msg(st == HIPPO_SUCCESS, "%s", api->last_error());
  info = info_of(dev);
  ck_assert_uint_eq(info.backend, HIPPO_BACKEND_HIP);
  ck_assert_int_eq(info.hip_device, 0);
  ck_assert_uint_ge(info.alignment, 256); /* the device's */
  ck_assert_uint_eq(info.alignment & (info.alignment - 1), 0);
  ck_assert_msg(info.name[0] != '\0', "no device name");
  ck_assert_msg(strncmp(info.arch, "sm ", 3) == 0 ||
                    strncmp(info.arch, "cc ", 3) == 0,
                "arch '%s'", info.arch);
  ck_assert_msg(strncmp(info.runtime, "HIP ", 4) == 0 ||
                    strncmp(info.runtime, "CUDA ", 5) == 0,
                "runtime '%s'", info.runtime);
  ck_assert_uint_gt(info.total_memory, 0);
  ck_assert_uint_le(info.free_memory, info.total_memory);
  ck_assert_uint_gt(strlen(info.name), 0);
  ck_assert_uint_gt(strlen(info.arch), 0);
  ck_assert_msg(!strncmp(info.runtime, "HIP ", 4) ||
                    !strncmp(info.runtime, "CUDA ", 5),
                "runtime \"%s\" names neither HIP nor CUDA", info.runtime);
  CK_OK(api, api->device_close(dev));
}
END_TEST

START_TEST(hip_reserve_resolve_release) {
  hippo_status st;
  hippo_device *dev = open_device(HIPPO_BACKEND_HIP, 0, &st);
  hippo_stream *s;
  hippo_handle h1, h2;
  void *p1 = NULL, *p2 = NULL;
  uint64_t size = 0;
  hippo_usage u;

  ck_assert_msg(st == HIPPO_SUCCESS, "%s", api->last_error());
  CK_OK(api, api->stream_attach(dev, NULL, &s));
  CK_OK(api, api->reserve(s, 1 * MiB, HIPPO_MODE_AUTO, &h1));
  CK_OK(api, api->reserve(s, 3000, HIPPO_MODE_AUTO, &h2));
  ck_assert_uint_ne(h1, 0);
  ck_assert_uint_ne(h2, h1);
  CK_OK(api, api->resolve(s, h1, &p1, &size));
  ck_assert_ptr_nonnull(p1);
  ck_assert_uint_eq(size, 1 * MiB);
  ck_assert_uint_eq((uintptr_t)p1 % info_of(dev).alignment, 0);
  CK_OK(api, api->resolve(s, h2, &p2, &size));
  ck_assert_ptr_nonnull(p2);
  ck_assert_uint_eq(size, 3000);
  ck_assert_uint_eq((uintptr_t)p2 % info_of(dev).alignment, 0);
  ck_assert_ptr_ne(p1, p2);

  u = usage_of(dev, s);
  ck_assert_uint_eq(u.allocations, 2);
  ck_assert_uint_eq(u.bytes_in_use, 1 * MiB + 3000);
  ck_assert_uint_ge(u.bytes_reserved, 1 * MiB + 3000);
  ck_assert_uint_ge(u.pages, 1);

  CK_OK(api, api->release(s, h1));
  ck_assert_int_eq(api->resolve(s, h1, &p1, &size), HIPPO_INVALID_HANDLE);
  CK_OK(api, api->release(s, h2));
  u = usage_of(dev, s);
  ck_assert_uint_eq(u.allocations, 0);
  ck_assert_uint_eq(u.bytes_in_use, 0);
  ck_assert_uint_eq(u.peak_bytes_in_use, 1 * MiB + 3000);
  CK_OK(api, api->cleanup(dev, NULL));
  u = usage_of(dev, s);
  ck_assert_uint_eq(u.bytes_reserved, 0);
  ck_assert_uint_eq(u.pages, 0);
  CK_OK(api, api->stream_detach(s));
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* The emulation slots drive the runtime: a stream, a capture, bytes
 * written and read back through a copy, faults injected and counted. */
START_TEST(hip_emulation) {
  hippo_status st;
  hippo_device *dev = open_device(HIPPO_BACKEND_HIP, 0, &st);
  void *native = NULL, *pa = NULL, *pb = NULL;
  hippo_stream *s;
  hippo_handle a, b;
  hippo_emu_counters c;
  uint64_t id = 0;
  unsigned char in[4096], out[4096];

  ck_assert_msg(st == HIPPO_SUCCESS, "%s", api->last_error());
  CK_OK(api, emu()->stream_create(dev, &native));
  CK_OK(api, api->stream_attach(dev, native, &s));
  CK_OK(api, api->reserve(s, sizeof in, HIPPO_MODE_AUTO, &a));
  CK_OK(api, api->reserve(s, sizeof in, HIPPO_MODE_AUTO, &b));
  CK_OK(api, api->resolve(s, a, &pa, NULL));
  CK_OK(api, api->resolve(s, b, &pb, NULL));
  for (size_t i = 0; i < sizeof in; i++)
    in[i] = (unsigned char)(i * 7 + 1);
  CK_OK(api, emu()->write(dev, pa, in, sizeof in));
  CK_OK(api, emu()->copy(dev, native, pb, pa, sizeof in));
  CK_OK(api, emu()->stream_sync(dev, native));
  CK_OK(api, emu()->read(dev, pb, out, sizeof out));
  ck_assert_int_eq(memcmp(in, out, sizeof in), 0);
  CK_OK(api, emu()->capture_begin(dev, native, &id));
  ck_assert_uint_ne(id, 0);
  CK_OK(api, emu()->capture_end(dev, native));
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  CK_OK(api, emu()->counters(dev, &c));
  ck_assert_uint_ge(c.pages_held, 1);
  ck_assert_uint_ge(c.bytes_copied, sizeof in);
  CK_OK(api,
        emu()->inject_fault(dev, HIPPO_CALL_ALLOC, 1, HIPPO_OUT_OF_MEMORY));
  CK_OK(api, emu()->inject_fault(dev, HIPPO_CALL_ALLOC, 0, HIPPO_SUCCESS));
  CK_OK(api, api->release(s, a));
  CK_OK(api, api->release(s, b));
  CK_OK(api, api->stream_detach(s));
  CK_OK(api, emu()->stream_destroy(dev, native));
  CK_OK(api, api->device_close(dev));
}
END_TEST

static int run(Suite *suite) {
  SRunner *sr = srunner_create(suite);
  int failed;
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed;
}

int main(void) {
  const char *path = getenv("HIPPO_PLUGIN");
  void *lib = NULL;
  hippo_device *dev;
  Suite *s;
  TCase *tc;

  if (!path || !*path) {
    fprintf(stderr, "test-hip: set HIPPO_PLUGIN to the built plugin "
                    "(make check does); skipping\n");
    return 77;
  }
  if (hippo_load(path, &lib, &api) != HIPPO_SUCCESS) {
    fprintf(stderr, "test-hip: %s\n", hippo_load_error());
    return 99;
  }

  /* Probe once: is there a HIP device? */
  dev = open_device(HIPPO_BACKEND_HIP, 0, &hip_open_status);
  snprintf(hip_open_error, sizeof hip_open_error, "%s", api->last_error());
  if (dev && api->device_close(dev) != HIPPO_SUCCESS) {
    fprintf(stderr, "test-hip: device_close: %s\n", api->last_error());
    return 99;
  }

  s = suite_create("hip-without-gpu");
  tc = tcase_create("probe");
  tcase_add_test(tc, hip_open_says_why);
  tcase_add_test(tc, hip_bad_ordinal);
  tcase_add_test(tc, auto_picks_hip_or_host);
  suite_add_tcase(s, tc);
  if (run(s) != 0)
    return EXIT_FAILURE;

  if (hip_open_status != HIPPO_SUCCESS) {
    printf("test-hip: no HIP device (%s: %s); skipping the device tests\n",
           api->status_name(hip_open_status), hip_open_error);
    dlclose(lib);
    return 77;
  }

  s = suite_create("hip-device");
  tc = tcase_create("device");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, hip_device_info);
  tcase_add_test(tc, hip_reserve_resolve_release);
  tcase_add_test(tc, hip_emulation);
  suite_add_tcase(s, tc);
  if (run(s) != 0)
    return EXIT_FAILURE;
  dlclose(lib);
  return EXIT_SUCCESS;
}
