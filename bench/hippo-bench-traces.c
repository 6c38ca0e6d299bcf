/* hippo-bench-traces.c -- the workloads of hippo-bench that replay traces
 * (op,id,size,stream, parsed by tools/trace.c as hippo-replay parses
 * them): C (the --trace with the default preset on a 16 GiB DRY device:
 * ns per event, peak reserved / peak live, the device's peaks sampled)
 * and F (every trace with every preset and relocation policy on a 141 GiB
 * DRY device, and the VIRTUAL preset's repeated steps).
 */
#include "hippo.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "hippo-bench.h"
#include "steps.h"
#include "toolutil.h"
#include "trace.h"

/* ------------------------------------------------------------------------ */
/* Workload C: replay a trace with the default preset. */

/* The trace is parsed by tools/trace.c, the parser hippo-replay uses: same
 * format, same checks, same messages.  c_load then packs its events into
 * 16 bytes each with dense stream indices, so the timed loop reads no more
 * than it needs; each stream of the trace gets its own emulated stream. */

typedef struct c_event {
  uint64_t size;   /* bytes (of the reservation, for a release too) */
  uint32_t slot;   /* which reservation (dense index) */
  uint8_t alloc;   /* 1 reserve, 0 release */
  uint16_t stream; /* dense stream index, 0 .. nstreams-1 */
} c_event;

typedef struct c_trace {
  c_event *ev;
  size_t nev, nalloc, nfree;
  uint32_t nslots;
  uint8_t *slot_freed; /* 1: the trace frees it */
  bool *once;          /* once[i]: event i reserves a block the trace
                          never frees (trace_never_freed) */
  unsigned nstreams;
  uint64_t peak_live, final_live;
} c_trace;

static void c_load(const char *path, c_trace *t) {
  struct trace parsed;
  uint16_t dense[TRACE_MAX_STREAMS];
  uint64_t live = 0;

  if (!trace_load("hippo-bench", path, &parsed))
    bench_fatal("C: cannot use the trace '%s' (see above)", path);
  if (parsed.count == 0)
    bench_fatal("C: %s: no events", path);
  for (uint32_t i = 0; i < parsed.streams; i++)
    dense[parsed.stream_order[i]] = (uint16_t)i;
  memset(t, 0, sizeof *t);
  t->ev = bench_xmalloc(parsed.count * sizeof *t->ev);
  t->slot_freed = bench_xcalloc(parsed.slots, 1);
  t->once = trace_never_freed(&parsed);
  if (!t->once)
    bench_fatal("C: out of host memory for %s", path);
  t->nev = parsed.count;
  t->nalloc = (size_t)parsed.reserves;
  t->nfree = (size_t)parsed.releases;
  t->nslots = parsed.slots;
  t->nstreams = parsed.streams;
  for (size_t i = 0; i < parsed.count; i++) {
    const struct trace_event *e = &parsed.events[i];
    c_event *ev = &t->ev[i];
    ev->size = e->size;
    ev->slot = e->slot;
    ev->alloc = e->op == TRACE_RESERVE;
    ev->stream = dense[e->stream];
    if (ev->alloc) {
      live += e->size;
      if (live > t->peak_live)
        t->peak_live = live;
    } else {
      live -= e->size;
      t->slot_freed[e->slot] = 1;
    }
  }
  t->final_live = live;
  trace_free(&parsed);
}

/* Apply one trace event. */
static inline void c_apply(const c_event *e, hippo_stream *const *streams,
                           hippo_handle *handles, reserve_fn reserve,
                           release_fn release) {
  hippo_status st;
  if (e->alloc) {
    st = reserve(streams[e->stream], e->size, HIPPO_MODE_AUTO,
                 &handles[e->slot]);
    if (st != HIPPO_SUCCESS)
      hb_die_status(st, "C: reserve");
  } else {
    st = release(streams[e->stream], handles[e->slot]);
    if (st != HIPPO_SUCCESS)
      hb_die_status(st, "C: release");
  }
}

void hb_workload_c(const options *o) {
  c_trace t;
  hippo_handle *handles;
  double *ns;
  uint64_t peak_reserved = 0, peak_in_use = 0, pages = 0;
  uint64_t sampled_reserved = 0, sampled_in_use = 0;
  reserve_fn reserve = hb_api->reserve;
  release_fn release = hb_api->release;
  unsigned reps = o->reps;
  double med, mn, ratio;
  char fig[64], what[64];

  printf("\n## C: trace replay, default preset, 16 GiB DRY device\n\n");
  if (!o->trace) {
    printf("skipped: no --trace given\n");
    return;
  }
  c_load(o->trace, &t);
  handles = bench_xcalloc(t.nslots, sizeof *handles);
  ns = bench_xcalloc(reps, sizeof *ns);
  /* reps timed replays, then one untimed replay that reads the device's
   * usage after every event: the simultaneous peak over all streams. */
  for (unsigned rep = 0; rep <= reps; rep++) {
    hippo_device_desc desc;
    hippo_device *dev;
    void *native[TRACE_MAX_STREAMS];
    hippo_stream *streams[TRACE_MAX_STREAMS];
    hippo_usage u;
    double t0, t1;

    memset(&desc, 0, sizeof desc);
    desc.struct_size = sizeof desc;
    desc.backend = HIPPO_BACKEND_DRY;
    desc.capacity = C_CAPACITY;
    desc.layout = NULL;
    CHECK(hb_api->device_open(&desc, &dev), "C: device_open (DRY)");
    for (unsigned s = 0; s < t.nstreams; s++) {
      CHECK(tool_emu(hb_api)->stream_create(dev, &native[s]),
            "C: emu_stream_create");
      CHECK(hb_api->stream_attach(dev, native[s], &streams[s]),
            "C: stream_attach");
    }

    if (rep < reps) {
      t0 = bench_now_ns();
      for (size_t i = 0; i < t.nev; i++)
        c_apply(&t.ev[i], streams, handles, reserve, release);
      t1 = bench_now_ns();
      ns[rep] = (t1 - t0) / (double)t.nev;
    } else {
      for (size_t i = 0; i < t.nev; i++) {
        c_apply(&t.ev[i], streams, handles, reserve, release);
        memset(&u, 0, sizeof u);
        u.struct_size = sizeof u;
        CHECK(hb_api->usage(dev, NULL, &u), "C: usage");
        if (u.bytes_reserved > sampled_reserved)
          sampled_reserved = u.bytes_reserved;
        if (u.bytes_in_use > sampled_in_use)
          sampled_in_use = u.bytes_in_use;
      }
    }

    memset(&u, 0, sizeof u);
    u.struct_size = sizeof u;
    CHECK(hb_api->usage(dev, NULL, &u), "C: usage");
    if (rep == 0) {
      peak_reserved = u.peak_bytes_reserved;
      peak_in_use = u.peak_bytes_in_use;
      pages = u.pages;
    } else if (u.peak_bytes_reserved != peak_reserved) {
      printf("note: peak reserved varies across replays: %llu vs %llu\n",
             (unsigned long long)u.peak_bytes_reserved,
             (unsigned long long)peak_reserved);
    }
    if (u.bytes_in_use != t.final_live)
      bench_fatal("C: usage says %llu bytes in use at the end; the trace leaves "
            "%llu live",
            (unsigned long long)u.bytes_in_use,
            (unsigned long long)t.final_live);
    if (rep == 0)
      hb_dev_check(dev, "C: check");
    /* Not timed: release what the trace leaves live (its reserve event
     * names the stream), then close. */
    for (size_t i = 0; i < t.nev; i++) {
      const c_event *e = &t.ev[i];
      if (e->alloc && !t.slot_freed[e->slot])
        CHECK(release(streams[e->stream], handles[e->slot]),
              "C: release (teardown)");
    }
    for (unsigned s = 0; s < t.nstreams; s++) {
      CHECK(hb_api->stream_detach(streams[s]), "C: stream_detach");
      CHECK(tool_emu(hb_api)->stream_destroy(dev, native[s]),
            "C: emu_stream_destroy");
    }
    CHECK(hb_api->device_close(dev), "C: device_close");
  }
  mn = bench_minimum(ns, reps);
  med = bench_median(ns, reps);
  ratio = t.peak_live ? (double)peak_reserved / (double)t.peak_live : 0.0;
  printf("trace:            %s\n", o->trace);
  printf("events:           %zu (%zu reserves, %zu releases, %u streams)\n",
         t.nev, t.nalloc, t.nfree, t.nstreams);
  printf("peak live:        %llu bytes (%.1f MiB, from the trace)\n",
         (unsigned long long)t.peak_live, (double)t.peak_live / (double)MiB);
  printf("peak reserved:    %llu bytes (%.1f MiB, usage().peak_bytes_reserved)"
         "\n",
         (unsigned long long)peak_reserved,
         (double)peak_reserved / (double)MiB);
  printf("peak in use:      %llu bytes (usage().peak_bytes_in_use)\n",
         (unsigned long long)peak_in_use);
  printf("sampled peaks:    %llu reserved (ratio %.3f), %llu in use "
         "(device usage read after every event)\n",
         (unsigned long long)sampled_reserved,
         t.peak_live ? (double)sampled_reserved / (double)t.peak_live : 0.0,
         (unsigned long long)sampled_in_use);
  if (sampled_in_use != t.peak_live)
    printf("note: the sampled peak in use differs from the trace's peak "
           "live\n");
  if (peak_in_use != sampled_in_use)
    printf("note: usage(dev, NULL).peak_bytes_in_use is not the device's "
           "simultaneous peak\n      (it looks like the sum of the "
           "streams' own peaks)\n");
  printf("pages at the end: %llu\n", (unsigned long long)pages);
  printf("reserved / live:  %.3f\n", ratio);
  printf("ns/event:         %.1f median, %.1f min (%u reps)\n", med, mn, reps);
  snprintf(what, sizeof what, "trace, %zu events", t.nev);
  snprintf(fig, sizeof fig, "reserved/live %.3f; %.1f ns/event", ratio, med);
  hb_add_row("C", what, fig, "");
  free(ns);
  free(handles);
  free(t.slot_freed);
  free(t.once);
  free(t.ev);
}

/* ------------------------------------------------------------------------ */
/* Workload F: footprint of traces, every layout and relocation policy. */

#define F_CAPACITY (141 * GiB)

/* The target of a trace by name, 0: none. The default (ADAPTIVE, wanted)
 * has one per trace; the VIRTUAL preset with its default policy (its map
 * budget) holds at most 1.02 x peak live on the same three traces, with
 * no byte moved (issue 27); its repeated steps have their own targets
 * (f_print_steps). */
static double f_target(const char *path, hippo_preset preset) {
  bool virt = preset == HIPPO_PRESET_VIRTUAL;
  if (strstr(path, "pt_cs336_medium_ctx1024_train"))
    return virt ? 1.02 : 1.040; /* PyTorch's caching allocator: 1.040 */
  if (strstr(path, "somas_pangu_2p6b"))
    return virt ? 1.02 : 1.25;
  if (strstr(path, "train.csv"))
    return virt ? 1.02 : 1.05;
  return 0.0;
}

/* After an F replay: what the trace left live released, the streams
 * detached and destroyed, the device closed, `handles` freed. */
static void f_teardown(const c_trace *t, hippo_device *dev,
                       hippo_stream *const *streams, void *const *native,
                       hippo_handle *handles) {
  for (size_t i = 0; i < t->nev; i++) {
    const c_event *e = &t->ev[i];
    if (e->alloc && !t->slot_freed[e->slot])
      CHECK(hb_api->release(streams[e->stream], handles[e->slot]),
            "F: release (teardown)");
  }
  for (unsigned s = 0; s < t->nstreams; s++) {
    CHECK(hb_api->stream_detach(streams[s]), "F: stream_detach");
    CHECK(tool_emu(hb_api)->stream_destroy(dev, native[s]),
          "F: emu_stream_destroy");
  }
  CHECK(hb_api->device_close(dev), "F: device_close");
  free(handles);
}

/* Replays t with `preset` and `policy` (0 never, 1 wanted, 2 explicit
 * every 1000 events); peak reserved / peak live, bytes relocated and the
 * driver calls per 1,000 events. */
static double f_replay(const c_trace *t, hippo_preset preset, int policy,
                       uint64_t *relocated, double *calls) {
  hippo_layout layout;
  hippo_device_desc desc;
  hippo_device *dev;
  void *native[TRACE_MAX_STREAMS];
  hippo_stream *streams[TRACE_MAX_STREAMS];
  hippo_handle *handles = bench_xcalloc(t->nslots, sizeof *handles);
  hippo_usage u;
  hippo_emu_counters c;
  memset(&layout, 0, sizeof layout);
  layout.struct_size = sizeof layout;
  layout.preset = preset;
  memset(&desc, 0, sizeof desc);
  desc.struct_size = sizeof desc;
  desc.backend = HIPPO_BACKEND_DRY;
  desc.capacity = F_CAPACITY;
  desc.layout = &layout;
  CHECK(hb_api->device_open(&desc, &dev), "F: device_open (DRY)");
  for (unsigned s = 0; s < t->nstreams; s++) {
    CHECK(tool_emu(hb_api)->stream_create(dev, &native[s]),
          "F: emu_stream_create");
    CHECK(hb_api->stream_attach(dev, native[s], &streams[s]),
          "F: stream_attach");
  }
  for (size_t i = 0; i < t->nev; i++) {
    const c_event *e = &t->ev[i];
    if (e->alloc && policy == 1)
      (void)hb_api->relocate_when_wanted(streams[e->stream]);
    c_apply(e, streams, handles, hb_api->reserve, hb_api->release);
    if (policy == 2 && (i + 1) % 1000 == 0)
      (void)hb_api->relocate_with(dev, NULL, HIPPO_RELOCATE_EXPLICIT, NULL);
  }
  memset(&u, 0, sizeof u);
  u.struct_size = sizeof u;
  CHECK(hb_api->usage(dev, NULL, &u), "F: usage");
  hb_dev_check(dev, "F: check");
  *relocated = u.bytes_relocated;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  CHECK(tool_emu(hb_api)->counters(dev, &c), "F: emu_counters");
  *calls = tool_calls_per_1000(&c, t->nev);
  f_teardown(t, dev, streams, native, handles);
  return t->peak_live ? (double)u.peak_bytes_reserved / (double)t->peak_live
                      : 0.0;
}

/* F's repeated steps (issue 37): the trace replayed three times on the
 * VIRTUAL preset with its default policy, as hippo-replay --steps 3 does
 * (blocks the trace never frees made in step 1 only); each step's peak
 * reserved (mapped) over its peak live, and its driver calls and waits
 * per 1,000 of its events (tools/steps.h). */
#define F_STEPS 3
typedef struct f_step {
  double ratio, calls, waits;
} f_step;

static void f_steps(const c_trace *t, f_step out[F_STEPS]) {
  hippo_layout layout = {.struct_size = sizeof layout,
                         .preset = HIPPO_PRESET_VIRTUAL};
  hippo_device_desc desc = {.struct_size = sizeof desc,
                            .backend = HIPPO_BACKEND_DRY,
                            .capacity = F_CAPACITY,
                            .layout = &layout};
  hippo_device *dev;
  void *native[TRACE_MAX_STREAMS];
  hippo_stream *streams[TRACE_MAX_STREAMS];
  hippo_handle *handles = bench_xcalloc(t->nslots, sizeof *handles);
  uint64_t live = 0;
  CHECK(hb_api->device_open(&desc, &dev), "F: device_open (DRY)");
  for (unsigned s = 0; s < t->nstreams; s++) {
    CHECK(tool_emu(hb_api)->stream_create(dev, &native[s]),
          "F: emu_stream_create");
    CHECK(hb_api->stream_attach(dev, native[s], &streams[s]),
          "F: stream_attach");
  }
  for (int k = 0; k < F_STEPS; k++) {
    struct step_figures f;
    hippo_emu_counters c0;
    step_begin(&f, hb_api, dev, true, (uint32_t)k + 1, live, &c0);
    for (size_t i = 0; i < t->nev; i++) {
      const c_event *e = &t->ev[i];
      if (k && t->once[i])
        continue;
      f.events++;
      if (e->alloc)
        (void)hb_api->relocate_when_wanted(streams[e->stream]);
      c_apply(e, streams, handles, hb_api->reserve, hb_api->release);
      live = e->alloc ? live + e->size : live - e->size;
      if (e->alloc)
        step_sample(&f, hb_api, dev, live);
    }
    step_end(&f, hb_api, dev, &c0);
    out[k].ratio = f.peak_live_bytes ? (double)f.peak_mapped_bytes /
                                           (double)f.peak_live_bytes
                                     : 0.0;
    out[k].calls = step_per_1000(step_calls(&f), &f);
    out[k].waits = step_per_1000(f.waits, &f);
  }
  hb_dev_check(dev, "F: check");
  f_teardown(t, dev, streams, native, handles);
}

/* The steps' targets (issue 37): step 3 at most 50 calls and 1 wait per
 * 1,000 events, step 1 at most 500 calls; every step's ratio at most
 * 1.02 on the repository's training and inference traces, and no worse
 * than the landed code's (issue 27's policy) on random.csv and
 * two-streams.csv. */
static double f_step_ratio_target(const char *path) {
  if (strstr(path, "random.csv"))
    return 1.033;
  if (strstr(path, "two-streams.csv"))
    return 1.101;
  return 1.02;
}

static void f_print_steps(const char *base, const char *path,
                          const c_trace *t) {
  f_step st[F_STEPS];
  double rt = f_step_ratio_target(path), worst = 0;
  char v1[32], v3[32], vw[32], vr[32], fig[96], what[112], tgt[112];
  f_steps(t, st);
  for (int k = 0; k < F_STEPS; k++)
    worst = st[k].ratio > worst ? st[k].ratio : worst;
  printf("%-40s virtual, %d steps: step 1 %.4f, %.1f calls/1k, %.2f "
         "waits/1k; step 3 %.4f, %.1f calls/1k, %.2f waits/1k\n",
         base, F_STEPS, st[0].ratio, st[0].calls, st[0].waits,
         st[F_STEPS - 1].ratio, st[F_STEPS - 1].calls, st[F_STEPS - 1].waits);
  hb_verdict(v1, sizeof v1, st[0].calls, 500, 1, 1);
  hb_verdict(v3, sizeof v3, st[F_STEPS - 1].calls, 50, 1, 1);
  hb_verdict(vw, sizeof vw, st[F_STEPS - 1].waits, 1, 1, 2);
  hb_verdict(vr, sizeof vr, worst, rt, 1, 4);
  printf("%-40s target step 1 <= 500 calls/1k: %s; step 3 <= 50 "
         "calls/1k: %s, <= 1 wait/1k: %s; every step <= %.3f: %s\n",
         "", v1, v3, vw, rt, vr);
  snprintf(what, sizeof what, "%.72s virtual, steps 1 and 3", base);
  snprintf(fig, sizeof fig,
           "%.4f / %.4f, %.1f / %.1f calls/1k, %.2f / %.2f waits/1k",
           st[0].ratio, st[F_STEPS - 1].ratio, st[0].calls,
           st[F_STEPS - 1].calls, st[0].waits, st[F_STEPS - 1].waits);
  snprintf(tgt, sizeof tgt,
           "calls <= 500 / 50: %s / %s; waits <= 1: %s; ratio <= %.3f: %s",
           strncmp(v1, "met", 3) ? "MISSED" : "met",
           strncmp(v3, "met", 3) ? "MISSED" : "met",
           strncmp(vw, "met", 3) ? "MISSED" : "met", rt,
           strncmp(vr, "met", 3) ? "MISSED" : "met");
  hb_add_row("F", what, fig, tgt);
}

void hb_workload_f(const options *o) {
  static const struct {
    const char *name;
    hippo_preset preset;
  } layouts[] = {{"sub_slices", HIPPO_PRESET_SUB_SLICES},
                 {"exclusive_pages", HIPPO_PRESET_EXCLUSIVE_PAGES},
                 {"adaptive", HIPPO_PRESET_ADAPTIVE},
                 {"virtual", HIPPO_PRESET_VIRTUAL}};
  static const char *const policies[] = {"never", "wanted",
                                         "explicit-every=1000"};
  const char *paths[17];
  int n = 0;
  if (o->trace)
    paths[n++] = o->trace;
  for (int i = 0; i < o->nfootprint; i++)
    paths[n++] = o->footprint[i];
  printf("\n## F: peak reserved / peak live, 141 GiB DRY device, every "
         "layout x relocation policy\n\n");
  if (!n) {
    printf("skipped: no trace given (--trace, --footprint)\n");
    return;
  }
  printf("%-40s %-16s %-20s %8s %12s %10s\n", "trace", "layout", "policy",
         "ratio", "relocated", "calls/1k");
  for (int k = 0; k < n; k++) {
    const char *base = strrchr(paths[k], '/') ? strrchr(paths[k], '/') + 1
                                              : paths[k];
    c_trace t;
    c_load(paths[k], &t);
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++)
      for (int p = 0; p < 3; p++) {
        uint64_t moved = 0;
        double calls = 0;
        double ratio = f_replay(&t, layouts[l].preset, p, &moved, &calls);
        bool deflt = layouts[l].preset == HIPPO_PRESET_ADAPTIVE && p == 1;
        bool virt = layouts[l].preset == HIPPO_PRESET_VIRTUAL && p == 1;
        double target = deflt || virt ? f_target(paths[k], layouts[l].preset)
                                      : 0.0;
        char fig[64], what[112], tgt[96], v[32];
        printf("%-40s %-16s %-20s %8.4f %9.0f MB %10.1f%s\n", base,
               layouts[l].name, policies[p], ratio, (double)moved / 1e6,
               calls, deflt ? "  (default)" : "");
        if (target > 0) {
          /* The virtual target also asks for zero bytes relocated. */
          const char *still = virt && moved ? ", yet bytes MOVED" : "";
          printf("%-40s target <= %.3f%s: %s%s\n", "", target,
                 virt ? ", nothing moved" : "",
                 hb_verdict(v, sizeof v, ratio, target, 1, 4), still);
          snprintf(tgt, sizeof tgt, "<= %.3f%s (%s%s)", target,
                   virt ? ", 0 moved" : "",
                   hb_verdict(v, sizeof v, ratio, target, 1, 3), still);
        } else {
          tgt[0] = '\0';
        }
        snprintf(what, sizeof what, "%.72s %s %s", base, layouts[l].name,
                 policies[p]);
        snprintf(fig, sizeof fig, "reserved/live %.4f, %.1f calls/1k",
                 ratio, calls);
        hb_add_row("F", what, fig, tgt);
      }
    f_print_steps(base, paths[k], &t);
    free(t.ev);
    free(t.slot_freed);
    free(t.once);
  }
}
