/* test-gpu-device.c -- hippo on a GPU: what only a device (or a stand-in
 * runtime, tests/fake) can show, through the ABI of the built plugin.
 *
 * Every test opens a HIP device (HIPPO_BACKEND_HIP, the default ADAPTIVE
 * layout, capacity 0: the whole device) and loads the runtime hippo uses
 * itself (tests/gpuload.h: the library device_info names, honouring
 * HIPPO_GPU_RUNTIME, HIPPO_HIP_LIBRARY and HIPPO_CUDA_LIBRARY as
 * src/gpu_rt.c does) for the calls a host runtime makes around hippo's:
 *  - a real capture: the test begins a relaxed capture on a stream from
 *    emu_stream_create, reserves through hippo from room a warm-up left,
 *    records device-to-device copies between reservations, ends the
 *    capture, instantiates and launches the graph twice and reads the
 *    copied bytes back; meanwhile the guard held (nothing moved, no
 *    released slice was reused) until graph_retire of the driver's id;
 *  - announced captures checked against the driver;
 *  - relocation of patterned slices of two streams, with work still
 *    queued on them, read back at their new addresses;
 *  - out of memory on the whole device, recovered.
 *
 * main() first opens a HIP device in a child process: without a GPU (no
 * runtime loads, or it sees no device) the program says why and exits 77
 * (skip).  The parent never touches the runtime, so Check's forked tests
 * each start it afresh (a runtime does not survive a fork once started).
 * On the stand-in runtimes: tests/suite-gpu.sh fake-hip|fake-cuda (make
 * check) runs it with HIPPO_TEST_BACKEND=hip, FAKE_GPU_MEMORY=2 GiB.  On a
 * GPU: tests/device-check.sh.
 */
#include <config.h>

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuload.h"
#include "testutil.h"

#define MiB TU_MiB
#define KiB TU_KiB

/* Pool indices of the ADAPTIVE preset: 0 persistent, 1 small SLICED,
 * 2 ARENA, 3 EXCLUSIVE. */
#define POOL_ARENA 2u

/* A runtime call must succeed (its error's name on failure). */
#define CK_RT_OK(rt, call)                                                     \
  do {                                                                         \
    int rt_err_ = (call);                                                      \
    ck_assert_msg(rt_err_ == GL_SUCCESS, "%s\n  returned %s (%d)", #call,      \
                  gl_err(&(rt), rt_err_), rt_err_);                            \
  } while (0)

/* A HIP device with the default layout; capacity 0 is the whole device. */
static hippo_device *open_gpu(const hippo_api *api, uint64_t capacity) {
  hippo_device_desc desc;
  hippo_device *dev = NULL;
  TU_SIZED(desc);
  desc.backend = HIPPO_BACKEND_HIP;
  desc.capacity = capacity;
  CK_OK(api, api->device_open(&desc, &dev));
  ck_assert_ptr_nonnull(dev);
  return dev;
}

/* The runtime the device runs on, loaded by the test. */
static void load_runtime(const hippo_api *api, hippo_device *dev,
                         gl_rt *rt) {
  hippo_device_info info = tu_info(api, dev);
  char why[1024];
  ck_assert_msg(gl_load(rt, info.runtime, why, sizeof why),
                "the runtime hippo uses (%s) does not load here: %s",
                info.runtime, why);
}

static bool overlaps(uint64_t a, uint64_t asize, uint64_t b, uint64_t bsize) {
  return a < b + bsize && b < a + asize;
}

static void *ptr_of(uint64_t addr) { return (void *)(uintptr_t)addr; }

/* ---- a real capture ------------------------------------------------------ */

#define CAP_SIZE (256 * KiB)

/* A capture the runtime records while hippo serves its reservations.
 * Before it: src (patterned) sits on a 2 MiB ARENA page that an 8 MiB
 * reservation outdated, and a warm-up left room on the current page.  In
 * it: the reservations come from that room (no driver allocation; one
 * hippo holds no room for is GRAPH_NEEDS_PAGE), device-to-device copies
 * src -> a -> b are recorded between them, a relocation is skipped
 * (RECORDING: src stays), a slice the capture releases (c) is reused by no
 * reservation.  After it, before graph_retire: a relocation leaves src's
 * page whole (guarded), c is still out of use, and the graph, launched
 * twice, copies the bytes to the addresses hippo gave in the capture (read
 * back).  graph_retire(the driver's capture id) answers SUCCESS; then c is
 * reused in place and a relocation moves src with its bytes. */
START_TEST(test_real_capture) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_gpu(api, 0);
  void *n, *graph = NULL, *exec = NULL;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle warm[4], src, grow, a, b, c, d, e, f, big;
  uint64_t psrc, pa, pb, pc, pd, pe, allocs;
  unsigned long long id = 0;
  hippo_relocation_report rr;
  hippo_usage u;
  int cs = 0;
  gl_rt rt;

  load_runtime(api, dev, &rt);
  src = tu_reserve_filled(api, dev, s, CAP_SIZE, 1);
  psrc = tu_addr(api, s, src);
  grow = tu_reserve(api, s, 8 * MiB); /* src's page is outdated now */
  ck_assert_uint_eq(tu_report(api, s, POOL_ARENA).outdated_pages, 1);
  CK_OK(api, api->release(s, grow));
  /* the warm-up: what the capture reserves, reserved and released */
  for (int i = 0; i < 4; i++)
    warm[i] = tu_reserve(api, s, CAP_SIZE);
  for (int i = 0; i < 4; i++)
    CK_OK(api, api->release(s, warm[i]));
  allocs = tu_counters(api, dev).calls[HIPPO_CALL_ALLOC];

  CK_RT_OK(rt, rt.begin_capture(n, GL_CAPTURE_RELAXED));
  CK_RT_OK(rt, rt.capture_info(n, &cs, &id, NULL, NULL, NULL, NULL));
  ck_assert_int_eq(cs, GL_CAPTURE_ACTIVE);
  ck_assert_uint_ne(id, 0);
  ck_assert_uint_eq(tu_addr(api, s, src), psrc); /* guarded from here */
  a = tu_reserve(api, s, CAP_SIZE);
  pa = tu_addr(api, s, a);
  CK_RT_OK(rt, rt.memcpy_async(ptr_of(pa), ptr_of(psrc), CAP_SIZE,
                               GL_MEMCPY_D2D, n));
  b = tu_reserve(api, s, CAP_SIZE);
  pb = tu_addr(api, s, b);
  CK_RT_OK(rt,
           rt.memcpy_async(ptr_of(pb), ptr_of(pa), CAP_SIZE, GL_MEMCPY_D2D, n));
  /* no page inside the capture: room held, or GRAPH_NEEDS_PAGE */
  CK_STATUS(api, api->reserve(s, 64 * MiB, HIPPO_MODE_AUTO, &big),
            HIPPO_GRAPH_NEEDS_PAGE);
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_ALLOC], allocs);
  /* a relocation now moves nothing */
  TU_SIZED(rr);
  CK_OK(api, api->relocate_with(dev, NULL, HIPPO_RELOCATE_CAPTURE, &rr));
  ck_assert_uint_eq(rr.outcome, HIPPO_RELOCATION_RECORDING);
  ck_assert_uint_eq(rr.slices_moved, 0);
  ck_assert_uint_eq(tu_addr(api, s, src), psrc);
  /* a slice the capture releases stays out of use */
  c = tu_reserve(api, s, CAP_SIZE);
  pc = tu_addr(api, s, c);
  ck_assert(!overlaps(pc, CAP_SIZE, pa, CAP_SIZE));
  ck_assert(!overlaps(pc, CAP_SIZE, pb, CAP_SIZE));
  CK_OK(api, api->release(s, c));
  d = tu_reserve(api, s, CAP_SIZE);
  pd = tu_addr(api, s, d);
  ck_assert(!overlaps(pd, CAP_SIZE, pc, CAP_SIZE));
  u = tu_usage(api, dev, NULL);
  ck_assert_uint_eq(u.bytes_guarded, CAP_SIZE);
  ck_assert_uint_eq(u.slices_guarded, 5); /* src, a, b, c, d */
  CK_CHECK(api, dev);
  CK_RT_OK(rt, rt.end_capture(n, &graph));
  ck_assert_ptr_nonnull(graph);

  /* after the capture, before retire: still guarded */
  e = tu_reserve(api, s, CAP_SIZE);
  pe = tu_addr(api, s, e);
  ck_assert(!overlaps(pe, CAP_SIZE, pc, CAP_SIZE));
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_guarded, CAP_SIZE);
  TU_SIZED(rr);
  CK_OK(api, api->relocate_with(dev, NULL, HIPPO_RELOCATE_CAPTURE, &rr));
  ck_assert_uint_eq(rr.slices_moved, 0);
  ck_assert_uint_eq(rr.pages_guarded, 1);
  ck_assert_uint_eq(tu_addr(api, s, src), psrc);

  /* the graph copies src -> a -> b at the addresses of the capture */
  CK_RT_OK(rt, gl_instantiate(&rt, &exec, graph));
  CK_RT_OK(rt, rt.graph_launch(exec, n));
  CK_RT_OK(rt, rt.stream_sync(n));
  TU_VERIFY_HANDLE(api, dev, s, a, CAP_SIZE, 1);
  TU_VERIFY_HANDLE(api, dev, s, b, CAP_SIZE, 1);
  tu_fill(api, dev, ptr_of(psrc), CAP_SIZE, 2); /* a second replay */
  CK_RT_OK(rt, rt.graph_launch(exec, n));
  CK_RT_OK(rt, rt.stream_sync(n));
  TU_VERIFY_HANDLE(api, dev, s, a, CAP_SIZE, 2);
  TU_VERIFY_HANDLE(api, dev, s, b, CAP_SIZE, 2);
  CK_RT_OK(rt, rt.graph_exec_destroy(exec));
  CK_RT_OK(rt, rt.graph_destroy(graph));

  /* retired: the guard goes, the released slice is reused in place, src
   * moves off its outdated page with its bytes */
  CK_OK(api, api->graph_retire(dev, id));
  u = tu_usage(api, dev, NULL);
  ck_assert_uint_eq(u.bytes_guarded, 0);
  ck_assert_uint_eq(u.slices_guarded, 0);
  f = tu_reserve(api, s, CAP_SIZE);
  ck_assert_uint_eq(tu_addr(api, s, f), pc);
  CK_OK(api, api->graph_retire(dev, id)); /* twice: harmless */
  TU_SIZED(rr);
  CK_OK(api, api->relocate_with(dev, NULL, HIPPO_RELOCATE_CAPTURE, &rr));
  ck_assert_uint_eq(rr.outcome, HIPPO_RELOCATION_MOVED);
  ck_assert_uint_eq(rr.slices_moved, 1);
  ck_assert_uint_eq(rr.pages_freed, 1);
  ck_assert_uint_ne(tu_addr(api, s, src), psrc);
  TU_VERIFY_HANDLE(api, dev, s, src, CAP_SIZE, 2);
  TU_VERIFY_HANDLE(api, dev, s, b, CAP_SIZE, 2);
  CK_CHECK(api, dev);
  {
    hippo_handle live[] = {src, a, b, d, e, f};
    for (size_t i = 0; i < sizeof live / sizeof *live; i++)
      CK_OK(api, api->release(s, live[i]));
  }
  tu_detach(api, dev, s, n);
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 0);
  CK_OK(api, api->device_close(dev));
  gl_close(&rt);
}
END_TEST

/* The capture question's cost on HIP (issue 26): by default hippo asks
 * the driver (hipStreamIsCapturing) once at every reserve and release;
 * after capture_announce(ENDED), checked with one question, a stream that
 * never captures costs no question at all; QUERY goes back to asking.
 * Exact counts (the backend's CAPTURE_QUERY counter). */
START_TEST(test_capture_question_count) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_gpu(api, 0);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle h;
  uint64_t q0, q1;
  h = tu_reserve(api, s, 4 * KiB); /* the warm-up takes the page */
  CK_OK(api, api->release(s, h));
  q0 = tu_counters(api, dev).calls[HIPPO_CALL_CAPTURE_QUERY];
  for (int i = 0; i < 100; i++) {
    h = tu_reserve(api, s, 4 * KiB);
    CK_OK(api, api->release(s, h));
  }
  q1 = tu_counters(api, dev).calls[HIPPO_CALL_CAPTURE_QUERY];
  ck_assert_uint_eq(q1 - q0, 200); /* one a reserve, one a release */
  CK_OK(api, api->capture_announce(s, HIPPO_CAPTURE_ENDED));
  q0 = tu_counters(api, dev).calls[HIPPO_CALL_CAPTURE_QUERY];
  ck_assert_uint_eq(q0 - q1, 1); /* ENDED is checked once */
  for (int i = 0; i < 100; i++) {
    h = tu_reserve(api, s, 4 * KiB);
    CK_OK(api, api->release(s, h));
  }
  q1 = tu_counters(api, dev).calls[HIPPO_CALL_CAPTURE_QUERY];
  ck_assert_uint_eq(q1 - q0, 0);
  CK_OK(api, api->capture_announce(s, HIPPO_CAPTURE_QUERY));
  h = tu_reserve(api, s, 4 * KiB);
  CK_OK(api, api->release(s, h));
  ck_assert_uint_eq(tu_counters(api, dev).calls[HIPPO_CALL_CAPTURE_QUERY] -
                        q1,
                    2);
  CK_CHECK(api, dev);
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* Announcements are checked with the driver on a real capture: BEGINS
 * while it captures, ENDED refused (GRAPH_RECORDING) until it ended, then
 * taken; BEGINS on a stream that does not capture is INVALID_ARGUMENT.
 * Between BEGINS and ENDED hippo guards the slices the capture touches
 * under the driver's id (graph_retire answers SUCCESS). */
START_TEST(test_announced_capture) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_gpu(api, 0);
  void *n, *graph = NULL;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle h, big;
  unsigned long long id = 0;
  int cs = 0;
  gl_rt rt;

  load_runtime(api, dev, &rt);
  h = tu_reserve(api, s, 4 * KiB); /* the warm-up */
  CK_OK(api, api->release(s, h));
  CK_STATUS(api, api->capture_announce(s, HIPPO_CAPTURE_BEGINS),
            HIPPO_INVALID_ARGUMENT);
  CK_ERROR_HAS(api, "does not capture");
  CK_RT_OK(rt, rt.begin_capture(n, GL_CAPTURE_RELAXED));
  CK_RT_OK(rt, rt.capture_info(n, &cs, &id, NULL, NULL, NULL, NULL));
  CK_OK(api, api->capture_announce(s, HIPPO_CAPTURE_BEGINS));
  h = tu_reserve(api, s, 4 * KiB);
  CK_STATUS(api, api->reserve(s, 64 * MiB, HIPPO_MODE_AUTO, &big),
            HIPPO_GRAPH_NEEDS_PAGE);
  CK_STATUS(api, api->capture_announce(s, HIPPO_CAPTURE_ENDED),
            HIPPO_GRAPH_RECORDING);
  CK_ERROR_HAS(api, "still captures");
  CK_RT_OK(rt, rt.end_capture(n, &graph));
  CK_RT_OK(rt, rt.graph_destroy(graph));
  CK_OK(api, api->capture_announce(s, HIPPO_CAPTURE_ENDED));
  CK_OK(api, api->release(s, h));
  ck_assert_uint_eq(tu_usage(api, dev, s).bytes_guarded, 4 * KiB);
  CK_OK(api, api->graph_retire(dev, id));
  ck_assert_uint_eq(tu_usage(api, dev, s).bytes_guarded, 0);
  CK_OK(api, api->capture_announce(s, HIPPO_CAPTURE_QUERY));
  big = tu_reserve(api, s, 64 * MiB); /* not capturing: a page again */
  CK_OK(api, api->release(s, big));
  CK_CHECK(api, dev);
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
  gl_close(&rt);
}
END_TEST

/* A capture in mode global (hipStreamBeginCapture's usual mode), begun
 * by this thread on stream b, runs while stream a reserves through hippo:
 * the first reservation polls a slice another stream used (hipEventQuery)
 * and takes a page (hipMalloc).  The runtimes prohibit such calls while a
 * global capture runs, and one made anyway invalidates that capture;
 * hippo makes them in relaxed mode, so the reservations succeed, the
 * slice's event is read, and b's capture ends with its graph.  (Failing
 * either call alone fails the test: checked by taking its relax out.) */
START_TEST(test_global_capture_elsewhere) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_gpu(api, 0);
  void *na, *nb, *nc, *graph = NULL;
  hippo_stream *a = tu_attach(api, dev, &na), *b = tu_attach(api, dev, &nb),
               *c = tu_attach(api, dev, &nc);
  hippo_handle x, keep, big, y;
  uint64_t allocs;
  hippo_usage u;
  gl_rt rt;

  load_runtime(api, dev, &rt);
  x = tu_reserve(api, a, 4 * KiB);
  keep = tu_reserve(api, a, 4 * KiB);
  CK_OK(api, api->record_use(a, x, c));
  CK_OK(api, api->release(a, x)); /* waits for c's work (none) */
  ck_assert_uint_eq(tu_usage(api, dev, a).slices_waiting, 1);
  allocs = tu_counters(api, dev).calls[HIPPO_CALL_ALLOC];
  CK_RT_OK(rt, rt.begin_capture(nb, GL_CAPTURE_GLOBAL));
  big = tu_reserve(api, a, 64 * MiB);
  ck_assert_uint_gt(tu_counters(api, dev).calls[HIPPO_CALL_ALLOC], allocs);
  y = tu_reserve(api, a, 4 * KiB);
  u = tu_usage(api, dev, a);
  ck_assert_uint_eq(u.slices_waiting, 0);
  ck_assert_uint_eq(u.event_failures, 0);
  CK_RT_OK(rt, rt.end_capture(nb, &graph));
  ck_assert_ptr_nonnull(graph);
  CK_RT_OK(rt, rt.graph_destroy(graph));
  CK_CHECK(api, dev);
  CK_OK(api, api->release(a, big));
  CK_OK(api, api->release(a, y));
  CK_OK(api, api->release(a, keep));
  (void)b;
  tu_detach(api, dev, c, nc);
  tu_detach(api, dev, b, nb);
  tu_detach(api, dev, a, na);
  CK_OK(api, api->device_close(dev));
  gl_close(&rt);
}
END_TEST

/* ---- the runtime's last error ---------------------------------------------- */

/* The runtime's last error after a hippo call is what the caller left
 * there: the answers hippo handles itself -- an event not ready while a
 * released slice waits, out of memory (a reservation larger than the
 * device), the legacy stream asked while a blocking stream captures --
 * are reset, or the caller's check after its next launch
 * (cudaGetLastError) would report them against it.  And that legacy
 * stream, unusable while the capture runs, refuses hippo's calls with
 * HIPPO_GRAPH_RECORDING (it took pages as if idle) until the capture
 * ended. */
#define CK_RT_CLEAN(rt, what)                                                  \
  do {                                                                         \
    if ((rt).peek_last_error) {                                                \
      int peek_ = (rt).peek_last_error();                                      \
      ck_assert_msg(peek_ == GL_SUCCESS, "%s: the runtime's last error is "    \
                    "%s (%d)", what, gl_err(&(rt), peek_), peek_);             \
    }                                                                          \
  } while (0)

START_TEST(test_last_error_untouched) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_gpu(api, 0);
  void *na, *nb, *blocking = NULL, *graph = NULL;
  hippo_stream *a = tu_attach(api, dev, &na), *b = tu_attach(api, dev, &nb);
  hippo_stream *legacy = NULL;
  hippo_handle x, y, z = 0;
  void *src, *dst;
  gl_rt rt;

  load_runtime(api, dev, &rt);
  ck_assert_ptr_nonnull(rt.peek_last_error);
  /* a copy queued on b that a released slice of a waits for */
  x = tu_reserve(api, a, 4 * KiB);
  y = tu_reserve(api, b, MiB);
  src = ptr_of(tu_addr(api, b, y));
  dst = ptr_of(tu_addr(api, a, x));
  CK_RT_OK(rt, rt.memcpy_async(dst, src, 4 * KiB, GL_MEMCPY_D2D, nb));
  CK_OK(api, api->record_use(a, x, b));
  CK_OK(api, api->release(a, x));
  x = tu_reserve(api, a, 4 * KiB); /* asks the event: not ready (fake) */
  CK_RT_CLEAN(rt, "a reservation that asked a waiting event");
  /* out of memory: a reservation larger than the device */
  CK_STATUS(api, api->reserve(a, tu_info(api, dev).total_memory - MiB,
                              HIPPO_MODE_AUTO, &z),
            HIPPO_OUT_OF_MEMORY);
  CK_RT_CLEAN(rt, "a reservation the device had no memory for");
  CK_RT_OK(rt, rt.stream_sync(nb));
  /* the legacy stream while a blocking stream captures */
  CK_OK(api, api->stream_attach(dev, NULL, &legacy));
  CK_RT_OK(rt, rt.stream_create(&blocking, 0));
  CK_RT_OK(rt, rt.begin_capture(blocking, GL_CAPTURE_GLOBAL));
  z = 0;
  CK_STATUS(api, api->reserve(legacy, 4 * KiB, HIPPO_MODE_AUTO, &z),
            HIPPO_GRAPH_RECORDING);
  CK_ERROR_HAS(api, "legacy default stream is unusable");
  ck_assert_uint_eq(z, 0);
  CK_RT_CLEAN(rt, "a reservation on the legacy stream during the capture");
  CK_RT_OK(rt, rt.end_capture(blocking, &graph));
  if (graph)
    CK_RT_OK(rt, rt.graph_destroy(graph));
  z = tu_reserve(api, legacy, 4 * KiB); /* usable again */
  CK_OK(api, api->release(legacy, z));
  CK_CHECK(api, dev);
  CK_OK(api, api->stream_detach(legacy));
  CK_RT_OK(rt, rt.stream_destroy(blocking));
  CK_OK(api, api->release(a, x));
  CK_OK(api, api->release(b, y));
  tu_detach(api, dev, b, nb);
  tu_detach(api, dev, a, na);
  CK_OK(api, api->device_close(dev));
  gl_close(&rt);
}
END_TEST

/* ---- relocation ---------------------------------------------------------- */

#define R_STREAMS 2
#define R_SLICES 6

/* The ADAPTIVE arena's first pages (2 MiB) hold each stream's patterned
 * slices and a staging slice; an 8 MiB reservation grows the arena (9 MiB
 * pages), which outdates them; a copy staging -> slice 0 is still queued
 * on each stream.  relocate_device waits for that work, moves every slice
 * of the outdated pages onto current ones (new addresses, same handles),
 * gives the outdated pages back, and emu_read finds every pattern (slice 0
 * with the staging one) at the new addresses. */
START_TEST(test_relocation_readback) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_gpu(api, 0);
  void *n[R_STREAMS];
  hippo_stream *s[R_STREAMS];
  hippo_handle h[R_STREAMS][R_SLICES], staging[R_STREAMS], big[R_STREAMS];
  uint64_t size[R_SLICES], old[R_STREAMS][R_SLICES], moved = 0;
  hippo_relocation_report rep;
  hippo_emu_counters before, after;

  for (int k = 0; k < R_SLICES; k++)
    size[k] = 96 * KiB + 64 * KiB * (uint64_t)k + 512 * (uint64_t)k;
  for (int i = 0; i < R_STREAMS; i++) {
    s[i] = tu_attach(api, dev, &n[i]);
    for (int k = 0; k < R_SLICES; k++) {
      h[i][k] =
          tu_reserve_filled(api, dev, s[i], size[k], (uint64_t)(i * 100 + k));
      moved += size[k];
    }
    staging[i] =
        tu_reserve_filled(api, dev, s[i], size[0], (uint64_t)(i * 100 + 50));
    moved += size[0];
    ck_assert_uint_eq(tu_report(api, s[i], POOL_ARENA).current_page_size,
                      2 * MiB);
    big[i] =
        tu_reserve_filled(api, dev, s[i], 8 * MiB, (uint64_t)(i * 100 + 99));
    ck_assert_uint_eq(tu_report(api, s[i], POOL_ARENA).current_page_size,
                      9 * MiB);
    ck_assert_uint_eq(tu_report(api, s[i], POOL_ARENA).outdated_pages, 1);
    CK_OK(api, tu_emu(api)->copy(dev, n[i], ptr_of(tu_addr(api, s[i], h[i][0])),
                             ptr_of(tu_addr(api, s[i], staging[i])),
                             size[0]));
    for (int k = 0; k < R_SLICES; k++)
      old[i][k] = tu_addr(api, s[i], h[i][k]);
  }
  CK_CHECK(api, dev);
  before = tu_counters(api, dev);
  CK_OK(api, api->relocate_device(dev));
  after = tu_counters(api, dev);
  TU_SIZED(rep);
  CK_OK(api, api->relocation_report(dev, NULL, &rep));
  ck_assert_uint_eq(rep.reason, HIPPO_RELOCATE_CAPTURE);
  ck_assert_uint_eq(rep.outcome, HIPPO_RELOCATION_MOVED);
  ck_assert_uint_eq(rep.streams, R_STREAMS);
  ck_assert_uint_eq(rep.slices_moved, R_STREAMS * (R_SLICES + 1));
  ck_assert_uint_eq(rep.bytes_moved, moved);
  ck_assert_uint_eq(rep.pages_emptied, R_STREAMS);
  ck_assert_uint_eq(rep.pages_freed, R_STREAMS);
  ck_assert_uint_eq(rep.bytes_freed, R_STREAMS * 2 * MiB);
  ck_assert_uint_eq(rep.failure_count, 0);
  ck_assert_uint_eq(after.calls[HIPPO_CALL_COPY],
                    before.calls[HIPPO_CALL_COPY] +
                        R_STREAMS * (R_SLICES + 1));
  ck_assert_uint_eq(after.bytes_copied, before.bytes_copied + moved);
  ck_assert_uint_eq(after.calls[HIPPO_CALL_FREE],
                    before.calls[HIPPO_CALL_FREE] + R_STREAMS);
  for (int i = 0; i < R_STREAMS; i++) {
    ck_assert_uint_eq(tu_report(api, s[i], POOL_ARENA).outdated_pages, 0);
    for (int k = 0; k < R_SLICES; k++) {
      ck_assert_uint_ne(tu_addr(api, s[i], h[i][k]), old[i][k]);
      TU_VERIFY_HANDLE(api, dev, s[i], h[i][k], size[k],
                       (uint64_t)(i * 100 + (k == 0 ? 50 : k)));
    }
    TU_VERIFY_HANDLE(api, dev, s[i], staging[i], size[0],
                     (uint64_t)(i * 100 + 50));
    TU_VERIFY_HANDLE(api, dev, s[i], big[i], 8 * MiB, (uint64_t)(i * 100 + 99));
  }
  ck_assert_uint_eq(tu_usage(api, dev, NULL).bytes_relocated, moved);
  CK_CHECK(api, dev);
  for (int i = 0; i < R_STREAMS; i++) {
    for (int k = 0; k < R_SLICES; k++)
      CK_OK(api, api->release(s[i], h[i][k]));
    CK_OK(api, api->release(s[i], staging[i]));
    CK_OK(api, api->release(s[i], big[i]));
    tu_detach(api, dev, s[i], n[i]);
  }
  ck_assert_uint_eq(tu_counters(api, dev).pages_held, 0);
  ck_assert_uint_eq(tu_counters(api, dev).bytes_held, 0);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* ---- out of memory ------------------------------------------------------- */

#define OOM_MAX_CHUNKS 64
#define OOM_SAMPLE (4 * KiB)

/* Writes (or, verify, checks) the pattern of `seed` in the first and the
 * last OOM_SAMPLE bytes of a chunk. */
static void chunk_samples(const hippo_api *api, hippo_device *dev,
                          hippo_stream *s, hippo_handle h, uint64_t size,
                          uint64_t seed, bool verify) {
  uint64_t at = tu_addr(api, s, h);
  if (verify) {
    TU_VERIFY(api, dev, ptr_of(at), OOM_SAMPLE, seed);
    TU_VERIFY(api, dev, ptr_of(at + size - OOM_SAMPLE), OOM_SAMPLE,
              seed + 1000);
  } else {
    tu_fill(api, dev, ptr_of(at), OOM_SAMPLE, seed);
    tu_fill(api, dev, ptr_of(at + size - OOM_SAMPLE), OOM_SAMPLE,
            seed + 1000);
  }
}

/* The whole device (capacity 0), reserved in chunks of about 1/24 of its
 * memory (each takes a page of its own) until hippo answers
 * HIPPO_OUT_OF_MEMORY: the runtime's refusal or hippo's budget, the
 * device's memory, whichever comes first; bounded by OOM_MAX_CHUNKS.  The
 * failure leaves every live chunk intact; releasing one and cleaning up
 * gives its page back, and the same reservation then succeeds.  Samples
 * at both ends of every chunk are read back at the end. */
START_TEST(test_oom_recovers) {
  const hippo_api *api = tu_api();
  hippo_device *dev = open_gpu(api, 0);
  void *n;
  hippo_stream *s = tu_attach(api, dev, &n);
  hippo_handle h[OOM_MAX_CHUNKS], extra = 0;
  hippo_device_info info = tu_info(api, dev);
  uint64_t chunk = (info.total_memory / 24 + MiB - 1) / MiB * MiB;
  hippo_status st = HIPPO_SUCCESS;
  int count = 0, victim;

  ck_assert_uint_gt(info.total_memory, 64 * MiB);
  while (count < OOM_MAX_CHUNKS) {
    st = api->reserve(s, chunk, HIPPO_MODE_AUTO, &h[count]);
    if (st != HIPPO_SUCCESS)
      break;
    chunk_samples(api, dev, s, h[count], chunk, (uint64_t)count, false);
    count++;
  }
  ck_assert_msg(st == HIPPO_OUT_OF_MEMORY,
                "after %d chunks of %" PRIu64 " MiB (%" PRIu64 " MiB of %"
                PRIu64 " MiB): %s: %s",
                count, chunk / MiB, count * chunk / MiB,
                info.total_memory / MiB, api->status_name(st),
                api->last_error());
  ck_assert_msg(count >= 8, "out of memory after only %d chunks of %" PRIu64
                " MiB: %s", count, chunk / MiB, api->last_error());
  printf("test-gpu-device: out of memory after %d chunks of %" PRIu64
         " MiB (pages of %" PRIu64 " MiB each; %" PRIu64 " MiB on the "
         "device): %.200s...\n",
         count, chunk / MiB, chunk / MiB + 1, info.total_memory / MiB,
         api->last_error());
  CK_CHECK(api, dev);
  CK_STATUS(api, api->reserve(s, chunk, HIPPO_MODE_AUTO, &extra),
            HIPPO_OUT_OF_MEMORY); /* still */
  victim = count / 2;
  CK_OK(api, api->release(s, h[victim]));
  CK_OK(api, api->cleanup(dev, NULL));
  h[victim] = tu_reserve(api, s, chunk); /* recovered */
  chunk_samples(api, dev, s, h[victim], chunk, 500, false);
  for (int i = 0; i < count; i++)
    chunk_samples(api, dev, s, h[i], chunk, i == victim ? 500 : (uint64_t)i,
                  true);
  ck_assert_uint_eq(tu_usage(api, dev, s).allocations, (uint64_t)count);
  CK_CHECK(api, dev);
  for (int i = 0; i < count; i++)
    CK_OK(api, api->release(s, h[i]));
  CK_OK(api, api->cleanup(dev, NULL));
  ck_assert_uint_eq(tu_counters(api, dev).bytes_held, 0);
  tu_detach(api, dev, s, n);
  CK_OK(api, api->device_close(dev));
}
END_TEST

/* ---- main ---------------------------------------------------------------- */

/* Opens HIP device 0 in a child process: 0 when it opens (the device is
 * described on stdout), 77 when it does not (why), 99 when the plugin
 * does not load. */
static int probe(void) {
  pid_t pid;
  int status = 0;
  fflush(stdout);
  pid = fork();
  if (pid < 0) {
    perror("test-gpu-device: fork");
    return 99;
  }
  if (pid == 0) {
    const char *path = getenv("HIPPO_PLUGIN");
    const hippo_api *api;
    hippo_device_desc desc;
    hippo_device *dev = NULL;
    hippo_device_info info;
    hippo_status st;
    void *lib;
    if (!path || !*path) {
      printf("test-gpu-device: HIPPO_PLUGIN is not set (make check sets "
             "it): skipped\n");
      exit(77);
    }
    if (hippo_load(path, &lib, &api) != HIPPO_SUCCESS) {
      printf("test-gpu-device: %s\n", hippo_load_error());
      exit(99);
    }
    TU_SIZED(desc);
    desc.backend = HIPPO_BACKEND_HIP;
    st = api->device_open(&desc, &dev);
    if (st != HIPPO_SUCCESS) {
      printf("test-gpu-device: no GPU (%s: %s): skipped\n",
             api->status_name(st), api->last_error());
      exit(77);
    }
    TU_SIZED(info);
    if (api->device_info(dev, &info) != HIPPO_SUCCESS) {
      printf("test-gpu-device: device_info: %s\n", api->last_error());
      exit(99);
    }
    printf("test-gpu-device: HIP device %d: %s (%s), %" PRIu64
           " MiB, %" PRIu64 " MiB free, alignment %" PRIu64 "; %s\n",
           (int)info.hip_device, info.name, info.arch,
           info.total_memory / MiB, info.free_memory / MiB, info.alignment,
           info.runtime);
    exit(api->device_close(dev) == HIPPO_SUCCESS ? 0 : 99);
  }
  if (waitpid(pid, &status, 0) != pid) {
    perror("test-gpu-device: waitpid");
    return 99;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

int main(void) {
  Suite *s;
  TCase *tc;
  int st;

  setvbuf(stdout, NULL, _IOLBF, 0);
  if ((st = probe()) != 0)
    return st;
  s = suite_create("gpu-device");
  tc = tcase_create("capture");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_real_capture);
  tcase_add_test(tc, test_announced_capture);
  tcase_add_test(tc, test_capture_question_count);
  tcase_add_test(tc, test_global_capture_elsewhere);
  tcase_add_test(tc, test_last_error_untouched);
  suite_add_tcase(s, tc);
  tc = tcase_create("memory");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_relocation_readback);
  tcase_add_test(tc, test_oom_recovers);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
