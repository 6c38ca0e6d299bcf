/* hippo-gpu-bench.c -- hippo on a GPU against the runtime's own
 * allocators, driven through the ABI.
 *
 * Every device is a HIP device (HIPPO_BACKEND_HIP, the default ADAPTIVE
 * layout, capacity 0: the whole device).  The bench loads the runtime
 * hippo uses itself (tests/gpuload.h: the library device_info names,
 * honouring HIPPO_GPU_RUNTIME, HIPPO_HIP_LIBRARY and HIPPO_CUDA_LIBRARY as
 * src/gpu_rt.c does) for the baselines:
 *
 *   A  allocation: ns per allocation + free, in batches of --batch live
 *      ones (allocate the batch, free it), of 4 KiB, 64 KiB, 1 MiB,
 *      16 MiB, and a mixed set log-uniform in 4 KiB .. 16 MiB (the same
 *      sizes for each): hippo's reserve + release on an attached stream
 *      (QUERY mode: each call asks the driver whether the stream
 *      captures), the runtime's Malloc + Free, and its stream-ordered
 *      MallocAsync + FreeAsync with a StreamSynchronize per batch.  One
 *      untimed batch warms each up (hippo's pages, the runtime's pool).
 *   Q  capture queries: ns per StreamIsCapturing call, and ns per 4 KiB
 *      reserve + release pair on a stream hippo asks the driver about
 *      (capture_announce QUERY, the default) and on one announced as not
 *      capturing (capture_announce ENDED: no driver call).
 *   R  relocation: --relocate-mib MiB of live slices (32 slices) on
 *      outdated ARENA pages moved by relocate_device onto a current page
 *      that has the room (it syncs every stream, copies, waits, frees the
 *      emptied pages), in bytes per second, against MemcpyAsync
 *      device-to-device copies of the same slices + StreamSynchronize.
 *      Samples at both ends of every slice are read back after the move.
 *
 * Figures are medians over --reps repetitions (each a fresh hippo device;
 * only the loops are timed, CLOCK_MONOTONIC).  The header names the
 * device, its runtime and the library the bench loaded: on the stand-in
 * runtimes of tests/fake (device "Fake ... GPU") the figures measure host
 * code and nothing of a GPU, which the header then says.
 *
 * Usage: hippo-gpu-bench [--plugin PATH] [--device N] [--reps N]
 *          [--iters N] [--batch N] [--calls N] [--relocate-mib N]
 *          [--only A|Q|R]... [--quick] [--json]
 * --quick: small counts, a smoke test (seconds, also on the stand-ins).
 * --json: one JSON object on stdout instead of the tables.
 * Exit status: 0 done, 1 a call failed (named on stderr), 2 usage, 77 no
 * GPU (hippo cannot open a HIP device).
 *
 * On the stand-ins, from the build tree:
 *   HIPPO_GPU_RUNTIME=cuda \
 *   HIPPO_CUDA_LIBRARY=$PWD/tests/fake/.libs/libfakecudart.so \
 *   FAKE_GPU_MEMORY=8589934592 bench/hippo-gpu-bench --quick
 */
#include "hippo.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "gpuload.h"
#include "benchutil.h"
#include "toolutil.h"

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

#define MIXED_LO (4 * KiB)
#define MIXED_HI (16 * MiB)
#define R_SLICES 32
#define R_SAMPLE (4 * KiB)
#define MAX_REPS 1000

const char *const bench_prog = "hippo-gpu-bench";
static const hippo_api *api;
static gl_rt rt;
static bool json;

/* ------------------------------------------------------------------------ */
/* Small helpers. */

/* An unexpected status from the plugin: name it, say what failed, exit 1. */
static void die_status(hippo_status st, const char *what)
    __attribute__((noreturn));
static void die_status(hippo_status st, const char *what) {
  tool_die_status(bench_prog, api, st, what);
}

#define CHECK(call, what)                                                      \
  do {                                                                         \
    hippo_status check_st_ = (call);                                           \
    if (check_st_ != HIPPO_SUCCESS)                                            \
      die_status(check_st_, (what));                                           \
  } while (0)

/* A runtime call must succeed. */
#define RT(call, what)                                                         \
  do {                                                                         \
    int rt_err_ = (call);                                                      \
    if (rt_err_ != GL_SUCCESS)                                                 \
      bench_fatal("%s: %s%s failed: %s (%d)", (what), rt.cuda ? "cuda" : "hip",    \
            #call, gl_err(&rt, rt_err_), rt_err_);                           \
  } while (0)

/* Log-uniform in [lo, hi], rounded up to 256 bytes. */
static uint64_t size_log2(uint64_t *seed, uint64_t lo, uint64_t hi) {
  double u = (double)(bench_splitmix64(seed) >> 11) * (1.0 / 9007199254740992.0);
  double e0 = log2((double)lo), e1 = log2((double)hi);
  uint64_t s = (uint64_t)ceil(exp2(e0 + u * (e1 - e0)));
  s = (s + 255) / 256 * 256;
  return s < lo ? lo : s > hi ? hi : s;
}

static void *ptr_of(uint64_t addr) { return (void *)(uintptr_t)addr; }

/* ------------------------------------------------------------------------ */
/* Options. */

typedef struct options {
  const char *plugin;
  int32_t device;
  unsigned reps;
  uint64_t iters, batch, calls, relocate_mib;
  bool run_a, run_q, run_r, quick;
  bool reps_set, iters_set, batch_set, calls_set, relocate_set;
} options;

static void usage_exit(int code) {
  FILE *f = code ? stderr : stdout;
  fprintf(f,
          "usage: hippo-gpu-bench [--plugin PATH] [--device N] [--reps N] "
          "[--iters N]\n"
          "         [--batch N] [--calls N] [--relocate-mib N] "
          "[--only A|Q|R]... [--quick] [--json]\n"
          "  --plugin PATH      the plugin (default: $HIPPO_PLUGIN, else\n"
          "                     %s when run from the build tree, else\n"
          "                     %s)\n"
          "  --device N         HIP device ordinal (default 0)\n"
          "  --reps N           repetitions per figure (default 5)\n"
          "  --iters N          allocations per repetition in A (default "
          "2048)\n"
          "  --batch N          allocations live at once in A (default 32)\n"
          "  --calls N          calls per repetition in Q (default 100000)\n"
          "  --relocate-mib N   MiB relocated in R (default 256)\n"
          "  --only A|Q|R       run one section (may repeat)\n"
          "  --quick            small counts, a smoke test\n"
          "  --json             one JSON object instead of the tables\n"
          "The runtime: HIPPO_GPU_RUNTIME (hip|cuda), HIPPO_HIP_LIBRARY,\n"
          "HIPPO_CUDA_LIBRARY, as for hippo.\n",
          tool_build_plugin, tool_installed_plugin);
  exit(code);
}

static uint64_t parse_count(const char *opt, const char *s, uint64_t max) {
  uint64_t v;
  if (tool_parse_u64(s, &v) != TOOL_NUM_OK || v == 0 || v > max) {
    fprintf(stderr,
            "hippo-gpu-bench: %s wants an integer in 1..%" PRIu64
            ", not '%s'\n",
            opt, max, s);
    usage_exit(2);
  }
  return v;
}

static void parse_options(int argc, char **argv, options *o) {
  bool only = false;
  memset(o, 0, sizeof *o);
  o->reps = 5;
  o->iters = 2048;
  o->batch = 32;
  o->calls = 100000;
  o->relocate_mib = 256;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val;
    if (!strcmp(a, "-h") || !strcmp(a, "--help"))
      usage_exit(0);
    if (!strcmp(a, "--quick")) {
      o->quick = true;
      continue;
    }
    if (!strcmp(a, "--json")) {
      json = true;
      continue;
    }
    if (strcmp(a, "--plugin") && strcmp(a, "--device") &&
        strcmp(a, "--reps") && strcmp(a, "--iters") && strcmp(a, "--batch") &&
        strcmp(a, "--calls") && strcmp(a, "--relocate-mib") &&
        strcmp(a, "--only")) {
      fprintf(stderr, "hippo-gpu-bench: unknown option '%s'\n", a);
      usage_exit(2);
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "hippo-gpu-bench: %s needs a value\n", a);
      usage_exit(2);
    }
    val = argv[++i];
    if (!strcmp(a, "--plugin"))
      o->plugin = val;
    else if (!strcmp(a, "--device")) {
      uint64_t d;
      if (tool_parse_u64(val, &d) != TOOL_NUM_OK || d > 1024) {
        fprintf(stderr, "hippo-gpu-bench: --device wants an ordinal, not "
                        "'%s'\n", val);
        usage_exit(2);
      }
      o->device = (int32_t)d;
    } else if (!strcmp(a, "--reps")) {
      o->reps = (unsigned)parse_count(a, val, MAX_REPS);
      o->reps_set = true;
    } else if (!strcmp(a, "--iters")) {
      o->iters = parse_count(a, val, (uint64_t)1 << 30);
      o->iters_set = true;
    } else if (!strcmp(a, "--batch")) {
      o->batch = parse_count(a, val, 65536);
      o->batch_set = true;
    } else if (!strcmp(a, "--calls")) {
      o->calls = parse_count(a, val, (uint64_t)1 << 32);
      o->calls_set = true;
    } else if (!strcmp(a, "--relocate-mib")) {
      o->relocate_mib = parse_count(a, val, (uint64_t)1 << 20);
      o->relocate_set = true;
    } else {
      only = true;
      if (!strcmp(val, "A") || !strcmp(val, "a"))
        o->run_a = true;
      else if (!strcmp(val, "Q") || !strcmp(val, "q"))
        o->run_q = true;
      else if (!strcmp(val, "R") || !strcmp(val, "r"))
        o->run_r = true;
      else {
        fprintf(stderr, "hippo-gpu-bench: --only takes A, Q or R, not '%s'\n",
                val);
        usage_exit(2);
      }
    }
  }
  if (!only)
    o->run_a = o->run_q = o->run_r = true;
  if (o->quick) {
    if (!o->reps_set)
      o->reps = 3;
    if (!o->iters_set)
      o->iters = 64;
    if (!o->batch_set)
      o->batch = 16;
    if (!o->calls_set)
      o->calls = 2000;
    if (!o->relocate_set)
      o->relocate_mib = 16;
  }
  if (o->iters < o->batch)
    o->iters = o->batch;
  o->iters = o->iters / o->batch * o->batch; /* whole batches */
  o->plugin = tool_plugin_path(o->plugin);
}

/* ------------------------------------------------------------------------ */
/* Results: rows for the tables and the JSON. */

#define MAX_ROWS 64
typedef struct row {
  char section[4];
  char what[96];
  double value;
  char unit[16];
} row;
static row rows[MAX_ROWS];
static int nrows;

static void add_row(const char *section, const char *what, double value,
                    const char *unit) {
  if (nrows == MAX_ROWS)
    return;
  snprintf(rows[nrows].section, sizeof rows[nrows].section, "%s", section);
  snprintf(rows[nrows].what, sizeof rows[nrows].what, "%s", what);
  rows[nrows].value = value;
  snprintf(rows[nrows].unit, sizeof rows[nrows].unit, "%s", unit);
  nrows++;
}

/* A JSON string (the names here hold no control characters). */
static void json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      putchar('\\');
    putchar((unsigned char)*s < 0x20 ? ' ' : *s);
  }
  putchar('"');
}

/* ------------------------------------------------------------------------ */
/* Devices. */

typedef struct bench_dev {
  hippo_device *dev;
  void *native;
  hippo_stream *stream;
} bench_dev;

static hippo_status dev_try_open(int32_t ordinal, hippo_device **dev) {
  hippo_device_desc desc;
  memset(&desc, 0, sizeof desc);
  desc.struct_size = sizeof desc;
  desc.backend = HIPPO_BACKEND_HIP;
  desc.hip_device = ordinal;
  return api->device_open(&desc, dev);
}

static void dev_open(bench_dev *b, const options *o) {
  CHECK(dev_try_open(o->device, &b->dev), "device_open (HIP)");
  CHECK(tool_emu(api)->stream_create(b->dev, &b->native), "emu_stream_create");
  CHECK(api->stream_attach(b->dev, b->native, &b->stream), "stream_attach");
}

static void dev_close(bench_dev *b) {
  CHECK(api->stream_detach(b->stream), "stream_detach");
  CHECK(tool_emu(api)->stream_destroy(b->dev, b->native), "emu_stream_destroy");
  CHECK(api->device_close(b->dev), "device_close");
  memset(b, 0, sizeof *b);
}

/* ------------------------------------------------------------------------ */
/* A: allocation. */

enum { IMPL_HIPPO, IMPL_MALLOC, IMPL_ASYNC, IMPLS };

/* One repetition of `impl` over sizes[0..iters) in batches; ns per
 * allocation + free. */
static double a_rep(const options *o, int impl, const uint64_t *sizes,
                    void *stream) {
  uint64_t batch = o->batch, iters = o->iters;
  hippo_handle *h = bench_xmalloc(batch * sizeof *h);
  void **p = bench_xmalloc(batch * sizeof *p);
  bench_dev b;
  double t0 = 0, t1;

  if (impl == IMPL_HIPPO)
    dev_open(&b, o);
  /* round -1 is the untimed warm-up */
  for (int64_t round = -1; round < (int64_t)(iters / batch); round++) {
    const uint64_t *sz = sizes + (round < 0 ? 0 : (uint64_t)round * batch);
    if (round == 0)
      t0 = bench_now_ns();
    switch (impl) {
    case IMPL_HIPPO:
      for (uint64_t i = 0; i < batch; i++)
        CHECK(api->reserve(b.stream, sz[i], HIPPO_MODE_AUTO, &h[i]),
              "A: reserve");
      for (uint64_t i = 0; i < batch; i++)
        CHECK(api->release(b.stream, h[i]), "A: release");
      break;
    case IMPL_MALLOC:
      for (uint64_t i = 0; i < batch; i++)
        RT(rt.malloc_(&p[i], (size_t)sz[i]), "A");
      for (uint64_t i = 0; i < batch; i++)
        RT(rt.free_(p[i]), "A");
      break;
    default:
      for (uint64_t i = 0; i < batch; i++)
        RT(rt.malloc_async(&p[i], (size_t)sz[i], stream), "A");
      for (uint64_t i = 0; i < batch; i++)
        RT(rt.free_async(p[i], stream), "A");
      RT(rt.stream_sync(stream), "A");
      break;
    }
  }
  t1 = bench_now_ns();
  if (impl == IMPL_HIPPO) {
    hippo_usage u;
    memset(&u, 0, sizeof u);
    u.struct_size = sizeof u;
    CHECK(api->usage(b.dev, b.stream, &u), "A: usage");
    if (u.allocations != 0)
      bench_fatal("A: %" PRIu64 " reservations live after the loop", u.allocations);
    dev_close(&b);
  }
  free(h);
  free(p);
  return (t1 - t0) / (double)iters;
}

static void section_a(const options *o) {
  static const uint64_t fixed[] = {4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB};
  const char *impl_name[IMPLS];
  char names[IMPLS][48];
  uint64_t *sizes = bench_xmalloc(o->iters * sizeof *sizes);
  double *t = bench_xmalloc(o->reps * sizeof *t);
  void *stream = NULL;
  bool have_async = rt.malloc_async && rt.free_async;

  snprintf(names[IMPL_HIPPO], sizeof names[0], "hippo reserve+release");
  snprintf(names[IMPL_MALLOC], sizeof names[0], "%sMalloc+%sFree",
           rt.cuda ? "cuda" : "hip", rt.cuda ? "cuda" : "hip");
  snprintf(names[IMPL_ASYNC], sizeof names[0], "%sMallocAsync+FreeAsync",
           rt.cuda ? "cuda" : "hip");
  for (int i = 0; i < IMPLS; i++)
    impl_name[i] = names[i];
  RT(rt.stream_create(&stream, GL_STREAM_NON_BLOCKING), "A");
  if (!json) {
    printf("\n## A: allocation, ns per allocation + free (median of %u; "
           "batches of %" PRIu64 " live, %" PRIu64 " per repetition)\n\n",
           o->reps, o->batch, o->iters);
    printf("hippo: ADAPTIVE, QUERY mode (a driver capture query per call); "
           "%s: a stream sync per batch\n\n",
           impl_name[IMPL_ASYNC]);
    printf("| size | %s | %s | %s |\n|---|---:|---:|---:|\n",
           impl_name[IMPL_HIPPO], impl_name[IMPL_MALLOC],
           impl_name[IMPL_ASYNC]);
  }
  for (int c = 0; c < 5; c++) {
    char label[32], what[96];
    double med[IMPLS];
    uint64_t seed = 42;
    if (c < 4) {
      for (uint64_t i = 0; i < o->iters; i++)
        sizes[i] = fixed[c];
      if (fixed[c] >= MiB)
        snprintf(label, sizeof label, "%" PRIu64 " MiB", fixed[c] / MiB);
      else
        snprintf(label, sizeof label, "%" PRIu64 " KiB", fixed[c] / KiB);
    } else {
      for (uint64_t i = 0; i < o->iters; i++)
        sizes[i] = size_log2(&seed, MIXED_LO, MIXED_HI);
      snprintf(label, sizeof label, "mixed 4 KiB..16 MiB");
    }
    for (int impl = 0; impl < IMPLS; impl++) {
      if (impl == IMPL_ASYNC && !have_async) {
        med[impl] = -1;
        continue;
      }
      for (unsigned r = 0; r < o->reps; r++)
        t[r] = a_rep(o, impl, sizes, stream);
      med[impl] = bench_median(t, o->reps);
      snprintf(what, sizeof what, "%s, %s", label, impl_name[impl]);
      add_row("A", what, med[impl], "ns/op");
    }
    if (!json) {
      printf("| %s | %.0f | %.0f | ", label, med[0], med[1]);
      if (med[2] < 0)
        printf("n/a |\n");
      else
        printf("%.0f |\n", med[2]);
    }
  }
  RT(rt.stream_destroy(stream), "A");
  free(sizes);
  free(t);
}

/* ------------------------------------------------------------------------ */
/* Q: capture queries. */

/* ns per reserve + release of 4 KiB on b's stream (one untimed pair
 * first). */
static double q_pairs(const options *o, bench_dev *b) {
  double t0, t1;
  hippo_handle h;
  CHECK(api->reserve(b->stream, 4 * KiB, HIPPO_MODE_AUTO, &h), "Q: reserve");
  CHECK(api->release(b->stream, h), "Q: release");
  t0 = bench_now_ns();
  for (uint64_t i = 0; i < o->calls; i++) {
    CHECK(api->reserve(b->stream, 4 * KiB, HIPPO_MODE_AUTO, &h),
          "Q: reserve");
    CHECK(api->release(b->stream, h), "Q: release");
  }
  t1 = bench_now_ns();
  return (t1 - t0) / (double)o->calls;
}

static void section_q(const options *o) {
  double *t = bench_xmalloc(o->reps * sizeof *t), calls, ask, told;
  char what[96];
  bench_dev b;

  dev_open(&b, o);
  for (unsigned r = 0; r < o->reps; r++) {
    int cs = 0;
    double t0 = bench_now_ns();
    for (uint64_t i = 0; i < o->calls; i++)
      RT(rt.is_capturing(b.native, &cs), "Q");
    t[r] = (bench_now_ns() - t0) / (double)o->calls;
    if (cs != 0)
      bench_fatal("Q: the stream captures");
  }
  calls = bench_median(t, o->reps);
  for (unsigned r = 0; r < o->reps; r++)
    t[r] = q_pairs(o, &b);
  ask = bench_median(t, o->reps);
  CHECK(api->capture_announce(b.stream, HIPPO_CAPTURE_ENDED),
        "Q: capture_announce(ENDED)");
  for (unsigned r = 0; r < o->reps; r++)
    t[r] = q_pairs(o, &b);
  told = bench_median(t, o->reps);
  CHECK(api->capture_announce(b.stream, HIPPO_CAPTURE_QUERY),
        "Q: capture_announce(QUERY)");
  dev_close(&b);

  snprintf(what, sizeof what, "%sStreamIsCapturing", rt.cuda ? "cuda" : "hip");
  add_row("Q", what, calls, "ns/call");
  add_row("Q", "hippo reserve+release 4 KiB, QUERY (asks the driver)", ask,
          "ns/pair");
  add_row("Q", "hippo reserve+release 4 KiB, announced ENDED", told,
          "ns/pair");
  if (!json) {
    printf("\n## Q: capture queries (median of %u, %" PRIu64
           " calls or pairs each)\n\n",
           o->reps, o->calls);
    printf("| what | ns |\n|---|---:|\n");
    printf("| %s, per call | %.1f |\n", what, calls);
    printf("| hippo reserve+release 4 KiB, QUERY mode, per pair | %.1f |\n",
           ask);
    printf("| hippo reserve+release 4 KiB, announced ENDED, per pair | %.1f "
           "|\n",
           told);
    printf("| saved per pair by announcing | %.1f |\n", ask - told);
  }
  free(t);
}

/* ------------------------------------------------------------------------ */
/* R: relocation. */

static void r_samples(bench_dev *b, const hippo_handle *h, uint64_t slice,
                      bool verify) {
  unsigned char *buf = bench_xmalloc(R_SAMPLE), *want = bench_xmalloc(R_SAMPLE);
  for (int k = 0; k < R_SLICES; k++) {
    void *p;
    uint64_t size;
    CHECK(api->resolve(b->stream, h[k], &p, &size), "R: resolve");
    for (int end = 0; end < 2; end++) {
      uint64_t at = (uint64_t)(uintptr_t)p + (end ? slice - R_SAMPLE : 0);
      for (uint64_t i = 0; i < R_SAMPLE; i++)
        want[i] = (unsigned char)(k * 7 + end * 3 + i * 131u + (i >> 9));
      if (!verify) {
        CHECK(tool_emu(api)->write(b->dev, ptr_of(at), want, R_SAMPLE),
              "R: emu_write");
        continue;
      }
      CHECK(tool_emu(api)->read(b->dev, ptr_of(at), buf, R_SAMPLE), "R: emu_read");
      if (memcmp(buf, want, R_SAMPLE) != 0)
        bench_fatal("R: slice %d lost its bytes in the move (%s end)", k,
              end ? "last" : "first");
    }
  }
  free(buf);
  free(want);
}

static void section_r(const options *o) {
  uint64_t bytes = o->relocate_mib * MiB;
  uint64_t slice = bytes / R_SLICES / 4096 * 4096;
  double *rel = bench_xmalloc(o->reps * sizeof *rel);
  double *cpy = bench_xmalloc(o->reps * sizeof *cpy);
  uint64_t pages_added = 0, pages_freed = 0;
  double rmed, cmed;
  char what[96];

  if (slice < 2 * R_SAMPLE)
    bench_fatal("R: --relocate-mib %" PRIu64 " is too small", o->relocate_mib);
  bytes = slice * R_SLICES;
  for (unsigned r = 0; r < o->reps; r++) {
    bench_dev b;
    hippo_handle h[R_SLICES], grow;
    hippo_relocation_report rr;
    void *src = NULL, *dst = NULL, *stream = NULL;
    double t0, t1;

    dev_open(&b, o);
    for (int k = 0; k < R_SLICES; k++)
      CHECK(api->reserve(b.stream, slice, HIPPO_MODE_AUTO, &h[k]),
            "R: reserve");
    r_samples(&b, h, slice, false);
    /* a larger page size outdates the slices' pages; the released
     * reservation leaves a current page with room for them all */
    CHECK(api->reserve(b.stream, bytes + MiB, HIPPO_MODE_AUTO, &grow),
          "R: reserve (growth)");
    CHECK(api->release(b.stream, grow), "R: release (growth)");
    t0 = bench_now_ns();
    CHECK(api->relocate_device(b.dev), "R: relocate_device");
    t1 = bench_now_ns();
    memset(&rr, 0, sizeof rr);
    rr.struct_size = sizeof rr;
    CHECK(api->relocation_report(b.dev, NULL, &rr), "R: relocation_report");
    if (rr.bytes_moved != bytes || rr.outcome != HIPPO_RELOCATION_MOVED)
      bench_fatal("R: moved %" PRIu64 " bytes (outcome %u), expected %" PRIu64,
            rr.bytes_moved, rr.outcome, bytes);
    rel[r] = (double)bytes / ((t1 - t0) * 1e-9);
    pages_added = rr.pages_added;
    pages_freed = rr.pages_freed;
    r_samples(&b, h, slice, true);
    for (int k = 0; k < R_SLICES; k++)
      CHECK(api->release(b.stream, h[k]), "R: release");
    dev_close(&b);

    /* the same slices, copied by the runtime on a stream of the bench */
    RT(rt.malloc_(&src, (size_t)bytes), "R");
    RT(rt.malloc_(&dst, (size_t)bytes), "R");
    RT(rt.stream_create(&stream, GL_STREAM_NON_BLOCKING), "R");
    RT(rt.memcpy_async(dst, src, (size_t)bytes, GL_MEMCPY_D2D, stream),
       "R (warm-up)");
    RT(rt.stream_sync(stream), "R");
    t0 = bench_now_ns();
    for (int k = 0; k < R_SLICES; k++)
      RT(rt.memcpy_async((char *)dst + (size_t)k * slice,
                         (const char *)src + (size_t)k * slice, (size_t)slice,
                         GL_MEMCPY_D2D, stream),
         "R");
    RT(rt.stream_sync(stream), "R");
    t1 = bench_now_ns();
    cpy[r] = (double)bytes / ((t1 - t0) * 1e-9);
    RT(rt.stream_destroy(stream), "R");
    RT(rt.free_(src), "R");
    RT(rt.free_(dst), "R");
  }
  rmed = bench_median(rel, o->reps);
  cmed = bench_median(cpy, o->reps);
  snprintf(what, sizeof what, "relocate_device, %" PRIu64 " MiB in %d slices",
           bytes / MiB, R_SLICES);
  add_row("R", what, rmed / 1e9, "GB/s");
  snprintf(what, sizeof what, "%sMemcpyAsync D2D + sync, the same slices",
           rt.cuda ? "cuda" : "hip");
  add_row("R", what, cmed / 1e9, "GB/s");
  add_row("R", "relocation / copy", cmed > 0 ? rmed / cmed : 0, "x");
  if (!json) {
    printf("\n## R: relocation, %" PRIu64 " MiB in %d slices of %" PRIu64
           " KiB (median of %u)\n\n",
           bytes / MiB, R_SLICES, slice / KiB, o->reps);
    printf("relocate_device: syncs every stream, copies onto a current page "
           "that has the room (pages added: %" PRIu64 "), waits, frees the "
           "%" PRIu64 " emptied pages; bytes read back after\n\n",
           pages_added, pages_freed);
    printf("| what | GB/s |\n|---|---:|\n");
    printf("| relocate_device | %.2f |\n", rmed / 1e9);
    printf("| %sMemcpyAsync D2D x %d + StreamSynchronize | %.2f |\n",
           rt.cuda ? "cuda" : "hip", R_SLICES, cmed / 1e9);
    printf("| relocation / copy | %.2f x |\n", cmed > 0 ? rmed / cmed : 0);
  }
  free(rel);
  free(cpy);
}

/* ------------------------------------------------------------------------ */
/* The machine, the header, the summary. */

int main(int argc, char **argv) {
  options o;
  void *lib;
  hippo_device *dev = NULL;
  hippo_device_info info;
  hippo_status st;
  struct utsname un;
  char cpu[256], why[2048];
  bool fake;
  double t0 = bench_now_ns();

  setvbuf(stdout, NULL, _IOLBF, 0);
  parse_options(argc, argv, &o);
  if (tool_load("hippo-gpu-bench", o.plugin, &lib, &api) != HIPPO_SUCCESS)
    exit(1);
  if (!HIPPO_API_HAS(api, capture_announce))
    bench_fatal("plugin '%s' has a table of %u bytes; the bench needs one with "
          "capture_announce",
          o.plugin, api->struct_size);
  st = dev_try_open(o.device, &dev);
  if (st != HIPPO_SUCCESS) {
    fprintf(stderr, "hippo-gpu-bench: no GPU: HIP device %d: %s: %s\n",
            (int)o.device, api->status_name(st), api->last_error());
    exit(77);
  }
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK(api->device_info(dev, &info), "device_info");
  CHECK(api->device_close(dev), "device_close");
  if (!gl_load(&rt, info.runtime, why, sizeof why))
    bench_fatal("the runtime hippo uses (%s) does not load here: %s", info.runtime,
          why);
  fake = !strncmp(info.name, "Fake ", 5);
  if (uname(&un) != 0)
    snprintf(un.machine, sizeof un.machine, "unknown");
  bench_cpu_model(cpu, sizeof cpu);
  if (!json) {
    printf("# hippo-gpu-bench\n\n");
    printf("device:   HIP device %d: %s (%s), %" PRIu64 " MiB, alignment %"
           PRIu64 "\n",
           (int)info.hip_device, info.name, info.arch,
           info.total_memory / MiB, info.alignment);
    printf("runtime:  %s (hippo's); the bench's calls: %s %d (%s)\n",
           info.runtime, rt.name, rt.version, rt.path);
    printf("plugin:   %s (ABI %u.%u)\n", o.plugin, api->abi_version >> 16,
           api->abi_version & 0xffffu);
    printf("machine:  %s, %s, %ld cores\n", un.machine, cpu,
           sysconf(_SC_NPROCESSORS_ONLN));
    printf("counts:   %u reps, %" PRIu64 " allocations (batches of %" PRIu64
           "), %" PRIu64 " calls, %" PRIu64 " MiB relocated%s\n",
           o.reps, o.iters, o.batch, o.calls, o.relocate_mib,
           o.quick ? " (--quick)" : "");
    if (fake)
      printf("\nNOTE: '%s' is a stand-in runtime (tests/fake): these "
             "figures time host code, NOTHING of a GPU.\n",
             info.name);
  }
  if (o.run_a)
    section_a(&o);
  if (o.run_q)
    section_q(&o);
  if (o.run_r)
    section_r(&o);

  if (json) {
    printf("{\"bench\": \"hippo-gpu-bench\", \"device\": ");
    json_string(info.name);
    printf(", \"arch\": ");
    json_string(info.arch);
    printf(", \"runtime\": ");
    json_string(info.runtime);
    printf(", \"bench_runtime\": ");
    json_string(rt.path);
    printf(", \"stand_in\": %s, \"total_memory\": %" PRIu64
           ", \"reps\": %u, \"iters\": %" PRIu64 ", \"batch\": %" PRIu64
           ", \"calls\": %" PRIu64 ", \"relocate_mib\": %" PRIu64
           ", \"rows\": [",
           fake ? "true" : "false", info.total_memory, o.reps, o.iters,
           o.batch, o.calls, o.relocate_mib);
    for (int i = 0; i < nrows; i++) {
      printf("%s{\"section\": ", i ? ", " : "");
      json_string(rows[i].section);
      printf(", \"what\": ");
      json_string(rows[i].what);
      printf(", \"value\": %.6g, \"unit\": ", rows[i].value);
      json_string(rows[i].unit);
      printf("}");
    }
    printf("]}\n");
  } else {
    printf("\n%s: %.1f s in all%s\n", "hippo-gpu-bench",
           (bench_now_ns() - t0) * 1e-9,
           fake ? " (a stand-in runtime: not a GPU's figures)" : "");
  }
  gl_close(&rt);
  dlclose(lib);
  return 0;
}
