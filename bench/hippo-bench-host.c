/* hippo-bench-host.c -- the workloads of hippo-bench on HOST devices,
 * where bytes are real: R (relocation throughput against a plain memcpy,
 * the bytes read back after the move) and W (a reserve+release pair while
 * released slices wait on another stream's queued copy, and the event
 * queries one reservation makes).
 */
#include "hippo.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "hippo-bench.h"
#include "toolutil.h"

/* ------------------------------------------------------------------------ */
/* Workload R: relocation throughput on HOST. */

#define R_SLICES 64
#define R_SLICE (4 * MiB)
#define R_TARGET 0.8

void hb_workload_r(const options *o) {
  unsigned reps = o->reps;
  double *rel = bench_xcalloc(reps, sizeof *rel), *cpy = bench_xcalloc(reps, sizeof *cpy);
  uint64_t bytes = (uint64_t)R_SLICES * R_SLICE;
  unsigned char *pattern = bench_xmalloc(R_SLICE);
  double rmed, cmed, ratio;
  char fig[64], target[64], v[32];

  for (size_t i = 0; i < R_SLICE; i++)
    pattern[i] = (unsigned char)(i * 131u + (i >> 12));
  printf("\n## R: relocation throughput, %u x %llu MiB slices on a HOST "
         "device (%u reps)\n\n",
         R_SLICES, (unsigned long long)(R_SLICE / MiB), reps);
  for (unsigned rep = 0; rep < reps; rep++) {
    hippo_pool_options pool;
    hippo_layout layout;
    hippo_device_desc desc;
    hippo_device *dev;
    hippo_stream *s;
    hippo_handle h[R_SLICES], big;
    hippo_relocation_report rr;
    void *native, *ptr;
    uint64_t size;
    unsigned char *src, *dst;
    double t0, t1;

    memset(&pool, 0, sizeof pool);
    pool.struct_size = sizeof pool;
    pool.kind = HIPPO_POOL_ARENA;
    pool.page_size = 2 * MiB;
    pool.max_slice_size = 512 * MiB;
    memset(&layout, 0, sizeof layout);
    layout.struct_size = sizeof layout;
    layout.preset = HIPPO_PRESET_CUSTOM;
    layout.pool_count = 1;
    layout.pool_options_size = sizeof pool;
    layout.pools = &pool;
    memset(&desc, 0, sizeof desc);
    desc.struct_size = sizeof desc;
    desc.backend = HIPPO_BACKEND_HOST;
    desc.capacity = 4 * GiB;
    desc.layout = &layout;
    CHECK(hb_api->device_open(&desc, &dev), "R: device_open (HOST)");
    CHECK(tool_emu(hb_api)->stream_create(dev, &native),
          "R: emu_stream_create");
    CHECK(hb_api->stream_attach(dev, native, &s), "R: stream_attach");
    for (int i = 0; i < R_SLICES; i++) {
      CHECK(hb_api->reserve(s, R_SLICE, HIPPO_MODE_AUTO, &h[i]), "R: reserve");
      CHECK(hb_api->resolve(s, h[i], &ptr, &size), "R: resolve");
      CHECK(tool_emu(hb_api)->write(dev, ptr, pattern, R_SLICE),
            "R: emu_write");
    }
    /* a larger request: the 5 MiB pages become outdated */
    CHECK(hb_api->reserve(s, 256 * MiB, HIPPO_MODE_AUTO, &big), "R: reserve");
    memset(&rr, 0, sizeof rr);
    rr.struct_size = sizeof rr;
    t0 = bench_now_ns();
    CHECK(hb_api->relocate_with(dev, NULL, HIPPO_RELOCATE_CAPTURE, &rr),
          "R: relocate_with");
    t1 = bench_now_ns();
    if (rr.bytes_moved != bytes)
      bench_fatal("R: moved %llu bytes, expected %llu",
            (unsigned long long)rr.bytes_moved, (unsigned long long)bytes);
    rel[rep] = (double)bytes / ((t1 - t0) * 1e-9);
    for (int i = 0; i < R_SLICES; i++) { /* untimed: the bytes moved */
      unsigned char *back = bench_xmalloc(R_SLICE);
      CHECK(hb_api->resolve(s, h[i], &ptr, &size), "R: resolve");
      CHECK(tool_emu(hb_api)->read(dev, ptr, back, R_SLICE), "R: emu_read");
      if (memcmp(back, pattern, R_SLICE) != 0)
        bench_fatal("R: slice %d lost its bytes in the move", i);
      free(back);
      CHECK(hb_api->release(s, h[i]), "R: release");
    }
    CHECK(hb_api->release(s, big), "R: release");
    CHECK(hb_api->stream_detach(s), "R: stream_detach");
    CHECK(tool_emu(hb_api)->stream_destroy(dev, native),
          "R: emu_stream_destroy");
    CHECK(hb_api->device_close(dev), "R: device_close");

    /* the same bytes, from memory written once, into fresh memory */
    src = bench_xmalloc(bytes);
    for (int i = 0; i < R_SLICES; i++)
      memcpy(src + (size_t)i * R_SLICE, pattern, R_SLICE);
    dst = bench_xmalloc(bytes);
    t0 = bench_now_ns();
    for (int i = 0; i < R_SLICES; i++)
      memcpy(dst + (size_t)i * R_SLICE, src + (size_t)i * R_SLICE, R_SLICE);
    t1 = bench_now_ns();
    cpy[rep] = (double)bytes / ((t1 - t0) * 1e-9);
    if (dst[bytes - 1] != src[bytes - 1])
      bench_fatal("R: memcpy went wrong");
    free(dst);
    free(src);
  }
  rmed = bench_median(rel, reps);
  cmed = bench_median(cpy, reps);
  ratio = cmed > 0 ? rmed / cmed : 0.0;
  hb_verdict(v, sizeof v, ratio, R_TARGET, 0, 2);
  printf("relocation: %.2f GB/s median (%.2f max); memcpy into fresh "
         "memory: %.2f GB/s median; ratio %.2f (target >= %.1f: %s)\n",
         rmed / 1e9, bench_minimum(rel, reps) > 0 ? rel[reps - 1] / 1e9 : 0.0,
         cmed / 1e9, ratio, R_TARGET, v);
  snprintf(fig, sizeof fig, "%.2f GB/s vs memcpy %.2f GB/s (%.2f x)",
           rmed / 1e9, cmed / 1e9, ratio);
  snprintf(target, sizeof target, ">= 0.8 x memcpy (%s)", v);
  hb_add_row("R", "relocation, HOST, 256 MiB", fig, target);
  free(rel);
  free(cpy);
  free(pattern);
}

/* W: reservations while released slices wait on another stream's work.
 * Stream b queues a copy that never runs during the timing; `count`
 * slices of stream a, each used by b (record_use), are released and wait
 * for it.  Timed: W_PAIRS reserve+release pairs of 64 KiB on a; counted:
 * the event queries one reservation makes. */
#define W_PAIRS 20000u
static void w_case(const options *o, uint32_t count, double *ns,
                   double *min, uint64_t *queries) {
  unsigned reps = o->reps;
  uint32_t pairs = o->quick ? W_PAIRS / 10 : W_PAIRS;
  double *t = bench_xcalloc(reps, sizeof *t);
  hippo_device_desc desc;
  hippo_device *dev;
  void *na, *nb, *src, *dst;
  hippo_stream *a, *b;
  hippo_handle bs, bd, x;
  hippo_emu_counters c0, c1;
  hippo_usage u;

  memset(&desc, 0, sizeof desc);
  desc.struct_size = sizeof desc;
  desc.backend = HIPPO_BACKEND_HOST;
  desc.capacity = GiB;
  CHECK(hb_api->device_open(&desc, &dev), "W: device_open (HOST)");
  CHECK(tool_emu(hb_api)->stream_create(dev, &na), "W: emu_stream_create");
  CHECK(tool_emu(hb_api)->stream_create(dev, &nb), "W: emu_stream_create");
  CHECK(hb_api->stream_attach(dev, na, &a), "W: stream_attach");
  CHECK(hb_api->stream_attach(dev, nb, &b), "W: stream_attach");
  CHECK(hb_api->reserve(b, 4096, HIPPO_MODE_AUTO, &bs), "W: reserve");
  CHECK(hb_api->reserve(b, 4096, HIPPO_MODE_AUTO, &bd), "W: reserve");
  CHECK(hb_api->resolve(b, bs, &src, NULL), "W: resolve");
  CHECK(hb_api->resolve(b, bd, &dst, NULL), "W: resolve");
  CHECK(tool_emu(hb_api)->copy(dev, nb, dst, src, 4096), "W: emu_copy");
  for (uint32_t i = 0; i < count; i++) {
    CHECK(hb_api->reserve(a, 64 * KiB, HIPPO_MODE_AUTO, &x), "W: reserve");
    CHECK(hb_api->record_use(a, x, b), "W: record_use");
    CHECK(hb_api->release(a, x), "W: release");
  }
  for (unsigned rep = 0; rep < reps; rep++) {
    double t0 = bench_now_ns();
    for (uint32_t i = 0; i < pairs; i++) {
      CHECK(hb_api->reserve(a, 64 * KiB, HIPPO_MODE_AUTO, &x), "W: reserve");
      CHECK(hb_api->release(a, x), "W: release");
    }
    t[rep] = (bench_now_ns() - t0) / pairs;
  }
  c0.struct_size = c1.struct_size = sizeof c0;
  CHECK(tool_emu(hb_api)->counters(dev, &c0), "W: emu_counters");
  CHECK(hb_api->reserve(a, 64 * KiB, HIPPO_MODE_AUTO, &x), "W: reserve");
  CHECK(tool_emu(hb_api)->counters(dev, &c1), "W: emu_counters");
  CHECK(hb_api->release(a, x), "W: release");
  *queries = c1.calls[HIPPO_CALL_EVENT] - c0.calls[HIPPO_CALL_EVENT];
  memset(&u, 0, sizeof u);
  u.struct_size = sizeof u;
  CHECK(hb_api->usage(dev, a, &u), "W: usage");
  if (u.slices_waiting != count)
    bench_fatal("W: %llu slices waiting, expected %u",
                (unsigned long long)u.slices_waiting, count);
  hb_dev_check(dev, "W");
  CHECK(tool_emu(hb_api)->stream_sync(dev, nb), "W: emu_stream_sync");
  CHECK(hb_api->release(b, bs), "W: release");
  CHECK(hb_api->release(b, bd), "W: release");
  CHECK(hb_api->stream_detach(a), "W: stream_detach");
  CHECK(hb_api->stream_detach(b), "W: stream_detach");
  CHECK(tool_emu(hb_api)->stream_destroy(dev, na), "W: emu_stream_destroy");
  CHECK(tool_emu(hb_api)->stream_destroy(dev, nb), "W: emu_stream_destroy");
  CHECK(hb_api->device_close(dev), "W: device_close");
  *ns = bench_median(t, reps);
  *min = bench_minimum(t, reps);
  free(t);
}

void hb_workload_w(const options *o) {
  static const uint32_t counts[] = {0, 64, 1024};
  printf("\n## W: a reserve+release pair while released slices wait on "
         "another stream's queued work (HOST, %u reps)\n\n",
         o->reps);
  printf("%-8s %12s %12s %18s\n", "waiting", "ns/pair", "min", "queries/reserve");
  for (unsigned k = 0; k < sizeof counts / sizeof *counts; k++) {
    double ns, min;
    uint64_t queries;
    char what[112], fig[64];
    w_case(o, counts[k], &ns, &min, &queries);
    printf("%-8u %12.1f %12.1f %18llu\n", counts[k], ns, min,
           (unsigned long long)queries);
    snprintf(what, sizeof what, "%u slices waiting on one user's queued work",
             counts[k]);
    snprintf(fig, sizeof fig, "%.1f ns a pair (min %.1f), queries %llu",
             ns, min, (unsigned long long)queries);
    hb_add_row("W", what, fig, "");
  }
}
