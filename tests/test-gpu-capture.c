/* test-gpu-capture.c -- the HIP backend (src/backend_hip*.c) and the
 * capture guard against the real runtimes' capture rules (issue 40), on
 * the stand-ins (tests/fake, paths in $FAKE_HIP_LIB and
 * $FAKE_CUDA_LIB, set by make check), each taught what the runtime does:
 *  - a blocking copy while a stream captures invalidates the capture and
 *    answers StreamCaptureImplicit (ROCm: any capture; CUDA: a blocking
 *    stream's): emu_read and emu_write run on the backend's own stream and
 *    leave a capture of the caller's whole (item 7);
 *  - a capture invalidated (a synchronize of its stream, a query of an
 *    event recorded in it) reads status 2 with no id until it is ended: a
 *    reservation, a release and a graph retire meanwhile are refused with
 *    HIPPO_GRAPH_RECORDING and every live allocation stays whole, and
 *    hippo's own synchronize never invalidates a capture (item 8).
 *
 * Every test starts and ends with no runtime loaded and none of the
 * variables below set.
 */
#include <config.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "emutest.h"
#include "gpu_rt.h"
#include "manager.h"

/* A library that does not exist. */
#define NOLIB "/nonexistent/hippo-test/libnone.so"

static const char *const env_vars[] = {"HIPPO_GPU_RUNTIME",
                                       "HIPPO_HIP_LIBRARY",
                                       "HIPPO_CUDA_LIBRARY", NULL};

static void clean(void) {
  hippo__gpu_rt_forget();
  for (const char *const *v = env_vars; *v; v++)
    unsetenv(*v);
}

/* Only the stand-in of `flavor` loads; its table. */
static const hippo__gpu_rt *use(enum hippo__gpu_flavor flavor) {
  bool hip = flavor == HIPPO__GPU_HIP;
  const hippo__gpu_rt *rt = NULL;
  hippo__gpu_rt_forget();
  setenv("HIPPO_GPU_RUNTIME", hip ? "hip" : "cuda", 1);
  setenv("HIPPO_HIP_LIBRARY", hip ? tu_fake_lib("FAKE_HIP_LIB") : NOLIB, 1);
  setenv("HIPPO_CUDA_LIBRARY", hip ? NOLIB : tu_fake_lib("FAKE_CUDA_LIB"), 1);
  CK_CORE_OK(hippo__gpu_rt_load(flavor, &rt));
  return rt;
}

/* ---- item 7: host reads and writes while the caller captures ----------- */

/* The caller captures on a blocking stream of its own, in mode global;
 * hippo's emu_write and emu_read of a page succeed, the bytes round trip,
 * and the caller's capture ends with its graph (a blocking Memcpy would
 * have invalidated it and answered 906: clr hip_memory.cpp). */
START_TEST(test_host_copy_while_capturing) {
  unsigned char in[64], out[64];
  for (unsigned i = 0; i < sizeof in; i++)
    in[i] = (unsigned char)(i * 5 + 1);
  for (int f = 0; f < 2; f++) {
    const hippo__gpu_rt *rt = use(f ? HIPPO__GPU_CUDA : HIPPO__GPU_HIP);
    hippo__backend *be = NULL;
    void *mine = NULL, *graph = NULL;
    int cs = 0;
    uint64_t page;
    CK_CORE_OK(hippo__backend_hip_create(0, 0, 0, &be));
    page = page_new(be, 4096);
    ck_assert_int_eq(rt->stream_create(&mine, 0), 0); /* blocking */
    ck_assert_int_eq(rt->begin_capture(mine, 0), 0);  /* mode global */
    CK_CORE_OK(be->ops->emu_write(be, page + 100, in, sizeof in));
    memset(out, 0, sizeof out);
    CK_CORE_OK(be->ops->emu_read(be, page + 100, out, sizeof out));
    ck_assert_mem_eq(in, out, sizeof in);
    ck_assert_int_eq(rt->stream_is_capturing(mine, &cs), 0);
    ck_assert_int_eq(cs, 1); /* active, not invalidated */
    ck_assert_int_eq(rt->end_capture(mine, &graph), 0);
    ck_assert_ptr_nonnull(graph);
    ck_assert_int_eq(rt->graph_destroy(graph), 0);
    ck_assert_int_eq(rt->stream_destroy(mine), 0);
    CK_CORE_OK(be->ops->page_free(be, page, 4096));
    be->ops->destroy(be);
  }
}
END_TEST

/* ---- item 8: an invalidated capture ------------------------------------- */

/* A device of the stand-in, one attached emulated stream, a live
 * reservation with a pattern and room for a reservation in a capture. */
typedef struct world {
  const hippo__gpu_rt *rt;
  hippo_device *dev;
  hippo_stream *s;
  void *native;
  hippo_handle live, held;
  uint64_t live_at, cid;
} world;

static const unsigned char pattern[16] = "kept through it";

static void world_open(world *w, enum hippo__gpu_flavor flavor) {
  hippo_device_desc d;
  hippo_handle room = 0;
  void *ptr = NULL;
  uint64_t size = 0;
  memset(w, 0, sizeof *w);
  w->rt = use(flavor);
  TU_SIZED(d);
  d.backend = HIPPO_BACKEND_HIP;
  CK_CORE_OK(hippo__device_open(&d, NULL, NULL, NULL, &w->dev));
  CK_CORE_OK(w->dev->be->ops->emu_stream_create(w->dev->be, &w->native));
  CK_CORE_OK(hippo__stream_attach(w->dev, w->native, &w->s));
  CK_CORE_OK(hippo__reserve(w->s, MiB, HIPPO_MODE_AUTO, &w->live));
  CK_CORE_OK(hippo__resolve(w->s, w->live, &ptr, &size));
  w->live_at = (uint64_t)(uintptr_t)ptr;
  CK_CORE_OK(w->dev->be->ops->emu_write(w->dev->be, w->live_at, pattern,
                                        sizeof pattern));
  CK_CORE_OK(hippo__reserve(w->s, MiB, HIPPO_MODE_AUTO, &room));
  CK_CORE_OK(hippo__release(w->s, room));
  CK_CORE_OK(w->dev->be->ops->emu_capture_begin(w->dev->be, w->native,
                                                &w->cid));
  CK_CORE_OK(hippo__reserve(w->s, MiB, HIPPO_MODE_AUTO, &w->held));
}

/* The live reservation's bytes, read back. */
static void world_intact(world *w) {
  unsigned char out[sizeof pattern];
  CK_CORE_OK(w->dev->be->ops->emu_read(w->dev->be, w->live_at, out,
                                       sizeof out));
  ck_assert_mem_eq(out, pattern, sizeof out);
}

/* The capture was invalidated: every call that must know the capture is
 * refused, clearly, and changes nothing; once ended, all goes on. */
static void world_check(world *w) {
  void *ptr = NULL;
  uint64_t size = 0;
  hippo_handle h = 0;
  int cs = 0;
  ck_assert_int_eq(w->rt->stream_is_capturing(w->native, &cs), 0);
  ck_assert_int_eq(cs, HIPPO__GPU_CAPTURE_STATUS_INVALIDATED);
  CK_CORE_FAILS(hippo__reserve(w->s, MiB, HIPPO_MODE_AUTO, &h),
                HIPPO_GRAPH_RECORDING, "invalidated the capture of stream");
  ck_assert_uint_eq(h, 0);
  CK_CORE_FAILS(hippo__release(w->s, w->live), HIPPO_GRAPH_RECORDING,
                "end it");
  CK_CORE_FAILS(hippo__graph_retire(w->dev, w->cid), HIPPO_GRAPH_RECORDING,
                "invalidated the capture");
  world_intact(w);
  /* hippo's synchronize is refused, not passed on */
  CK_CORE_FAILS(w->dev->be->ops->stream_sync(w->dev->be, w->native),
                HIPPO_BACKEND_ERROR, "would invalidate the capture");
  CK_CORE_FAILS(w->dev->be->ops->emu_capture_end(w->dev->be, w->native),
                HIPPO_BACKEND_ERROR, "StreamCaptureInvalidated (901)");
  /* ended: both reservations live and whole, and they go */
  CK_CORE_OK(hippo__resolve(w->s, w->live, &ptr, &size));
  ck_assert_uint_eq((uint64_t)(uintptr_t)ptr, w->live_at);
  CK_CORE_OK(hippo__resolve(w->s, w->held, &ptr, &size));
  world_intact(w);
  CK_CORE_OK(hippo__release(w->s, w->live));
  CK_CORE_OK(hippo__release(w->s, w->held));
  CK_CORE_OK(hippo__graph_retire(w->dev, w->cid));
  CK_CORE_OK(hippo__stream_detach(w->s));
  CK_CORE_OK(hippo__emu_stream_destroy(w->dev, w->native));
  CK_CORE_OK(hippo__device_close(w->dev));
}

/* The caller synchronizes its capturing stream (900) or queries an event
 * it recorded in the capture (907): the runtime invalidates the capture
 * (clr hip_stream.cpp StreamCaptureOngoing, hip_event.cpp ihipEventQuery)
 * and hippo refuses what it cannot do under no capture id. */
START_TEST(test_invalidated_capture) {
  for (int f = 0; f < 2; f++) {
    enum hippo__gpu_flavor flavor = f ? HIPPO__GPU_CUDA : HIPPO__GPU_HIP;
    void *ev = NULL;
    world w;
    world_open(&w, flavor);
    ck_assert_int_eq(w.rt->stream_sync(w.native),
                     HIPPO__GPU_CAPTURE_UNSUPPORTED);
    world_check(&w);

    world_open(&w, flavor);
    ck_assert_int_eq(w.rt->event_create(&ev, 0), 0);
    ck_assert_int_eq(w.rt->event_record(ev, w.native), 0);
    ck_assert_int_eq(w.rt->event_query(ev), 907); /* CapturedEvent */
    if (w.rt->get_last_error)
      (void)w.rt->get_last_error();
    world_check(&w);
    ck_assert_int_eq(w.rt->event_destroy(ev), 0);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("gpu-capture");
  TCase *tc = tcase_create("issue 40");
  tcase_add_checked_fixture(tc, clean, clean);
  tcase_add_test(tc, test_host_copy_while_capturing);
  tcase_add_test(tc, test_invalidated_capture);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
