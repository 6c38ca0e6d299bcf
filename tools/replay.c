/* replay.c -- hippo-replay's session and replay loop: the plugin, the
 * device and a manager per trace stream opened (with the DRY fallback
 * for a trace HOST cannot hold), the events replayed (and repeated as
 * training steps, tools/steps.h) under the --relocate policy, the
 * progress line, and everything released and closed at the end.
 * tools/hippo-replay.c's top comment says what the tool does.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "replay.h"


static void copy_error(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src && *src ? src : "(no detail)");
}

/* When AUTO chose HOST (no GPU), nothing asked for a backend or a capacity,
 * and the trace's peak live bytes exceed the HOST device's capacity, HOST
 * would fail reservations for want of emulated memory (and copy real bytes
 * when relocating): the trace replays on DRY instead, whose capacity is the
 * HOST capacity doubled until it holds twice the peak live, room for what
 * hippo holds beyond the live bytes.  *info is updated.  EXIT_OK (a note
 * says so unless --quiet) or EXIT_INPUT (message printed). */
static int dry_fallback(struct session *s, const struct options *o,
                        const struct trace *t, hippo_device_info *info) {
  const hippo_api *api = s->api;
  struct tool_device_options dry = o->dev;
  uint64_t host = info->total_memory, capacity = host;
  hippo_status st;

  while (capacity / 2 < t->peak_live && capacity <= UINT64_MAX / 2)
    capacity *= 2;
  st = api->device_close(s->dev);
  s->dev = NULL;
  if (st != HIPPO_SUCCESS) {
    fprintf(stderr, "hippo-replay: device_close failed: %s: %s\n",
            tool_status_name(api, st), api->last_error());
    return EXIT_INPUT;
  }
  dry.backend = HIPPO_BACKEND_DRY;
  dry.capacity = capacity;
  dry.capacity_given = true;
  if (tool_device_open("hippo-replay", api, &dry, &s->dev) != HIPPO_SUCCESS)
    return EXIT_INPUT;
  memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
  st = api->device_info(s->dev, info);
  if (st != HIPPO_SUCCESS) {
    fprintf(stderr, "hippo-replay: device_info failed: %s: %s\n",
            tool_status_name(api, st), api->last_error());
    return EXIT_INPUT;
  }
  s->backend = info->backend;
  snprintf(s->backend_note, sizeof s->backend_note,
           "the trace's peak live %s%" PRIu64 " B exceeds the HOST "
           "capacity %" PRIu64 " B",
           /* trace.h: a peak past 64 bits is kept as UINT64_MAX */
           t->peak_live == UINT64_MAX ? "at least " : "", t->peak_live, host);
  if (!o->quiet)
    fprintf(stderr,
            "hippo-replay: note: %s: replaying on DRY, capacity %" PRIu64
            " B (--backend host or --capacity keep HOST)\n",
            s->backend_note, capacity);
  return EXIT_OK;
}

/* Opens the device and attaches the managers.  EXIT_OK or EXIT_INPUT. */
int session_open(struct session *s, const struct options *o,
                        const struct trace *t) {
  const hippo_api *api = s->api;
  hippo_device_info info;
  hippo_status st;
  uint32_t i;

  if (tool_device_open("hippo-replay", api, &o->dev, &s->dev) !=
      HIPPO_SUCCESS)
    return EXIT_INPUT;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  st = api->device_info(s->dev, &info);
  if (st != HIPPO_SUCCESS) {
    fprintf(stderr, "hippo-replay: device_info failed: %s: %s\n",
            tool_status_name(api, st), api->last_error());
    return EXIT_INPUT;
  }
  s->backend = info.backend;
  if (o->dev.backend == HIPPO_BACKEND_AUTO && !o->dev.capacity_given &&
      info.backend == HIPPO_BACKEND_HOST && t->peak_live > info.total_memory) {
    int rc = dry_fallback(s, o, t, &info);
    if (rc != EXIT_OK)
      return rc;
  }
  if (o->policy == RELOCATE_EVERY && !HIPPO_API_HAS(api, relocate_with)) {
    fprintf(stderr, "hippo-replay: --relocate explicit-every needs a plugin "
                    "with relocate_with (this one is older)\n");
    return EXIT_INPUT;
  }
  if (!o->quiet)
    tool_capacity_note("hippo-replay", &o->dev, &info);

  for (i = 0; i < t->streams; i++) {
    uint16_t ts = t->stream_order[i];
    hippo_stream *m;
    void *native = NULL;

    if (s->backend == HIPPO_BACKEND_HIP && s->attached_count > 0) {
      s->mgr[ts] = s->attached[0];
      continue;
    }
    if (s->backend != HIPPO_BACKEND_HIP) {
      st = tool_emu(api)->stream_create(s->dev, &native);
      if (st != HIPPO_SUCCESS) {
        fprintf(stderr,
                "hippo-replay: cannot create an emulated stream for trace "
                "stream %u: %s: %s\n",
                (unsigned)ts, tool_status_name(api, st), api->last_error());
        return EXIT_INPUT;
      }
      s->native[ts] = native;
      s->emulated[ts] = true;
    }
    st = api->stream_attach(s->dev, native, &m);
    if (st != HIPPO_SUCCESS) {
      fprintf(stderr,
              "hippo-replay: cannot attach a manager for trace stream %u: "
              "%s: %s\n",
              (unsigned)ts, tool_status_name(api, st), api->last_error());
      return EXIT_INPUT;
    }
    s->mgr[ts] = m;
    s->attached[s->attached_count++] = m;
  }
  return EXIT_OK;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------ */

/* Whether a phase of `events` events (0: not known yet) that has run for
 * `elapsed` seconds shows progress. */
static bool progress_wanted(uint64_t events, double elapsed) {
  return events > PROGRESS_EVENTS || elapsed > PROGRESS_AFTER;
}

void progress_begin(struct progress *pg, uint64_t events) {
  pg->t0 = now_s();
  pg->last = 0;
  pg->phase_long = progress_wanted(events, 0.0);
}

/* Redraws the line as `hippo-replay: WHAT: P% (DONE of TOTAL UNIT)` when
 * due; TOTAL 0 is 100 %. */
static void progress_tick(struct progress *pg, const char *what,
                          uint64_t done, uint64_t total, const char *unit) {
  double now = now_s();
  char line[160];
  int n;

  if (!pg->enabled ||
      (!pg->phase_long && !progress_wanted(0, now - pg->t0)) ||
      now - pg->last < PROGRESS_PERIOD)
    return;
  pg->last = now;
  n = snprintf(line, sizeof line,
               "hippo-replay: %s: %3.0f%% (%" PRIu64 " of %" PRIu64 " %s)",
               what, total ? 100.0 * (double)done / (double)total : 100.0,
               done, total, unit);
  if (n < 0)
    return;
  /* Spaces cover what a longer line left. */
  fprintf(stderr, "\r%s%*s", line, pg->width > n ? pg->width - n : 0, "");
  fflush(stderr);
  if (n > pg->width)
    pg->width = n;
}

void progress_end(struct progress *pg) {
  if (pg->width > 0) {
    fprintf(stderr, "\r%*s\r", pg->width, "");
    fflush(stderr);
  }
  pg->width = 0;
}

/* trace_options.progress: bytes of the trace parsed. */
void progress_reading(void *arg, size_t done, size_t total) {
  progress_tick(arg, "reading the trace", done, total, "bytes");
}

/* The trace names a bad line: the reading's line goes first. */
void progress_reading_end(void *arg) { progress_end(arg); }

/* The timed loop: the trace once, or --steps times.  EXIT_OK, or
 * EXIT_CHECK / EXIT_INPUT (message printed). */
int replay(struct session *s, const struct options *o,
                  const struct trace *t, struct results *r,
                  struct progress *pg) {
  const hippo_api *api = s->api;
  const struct trace_event *ev = t->events;
  hippo_handle *handles = s->handles;
  size_t i, n = t->count;
  uint32_t steps = o->steps ? o->steps : 1;
  bool *once = NULL;
  double t0;
  int rc = EXIT_OK;

  if (o->steps) {
    r->steps = calloc(steps, sizeof *r->steps);
    once = steps > 1 ? trace_never_freed(t) : NULL;
    if (!r->steps || (steps > 1 && !once)) {
      fprintf(stderr, "hippo-replay: out of host memory for --steps\n");
      free(once);
      return EXIT_INPUT;
    }
  }
  progress_begin(pg, n * steps);
  t0 = now_s();
  for (uint32_t step = 0; step < steps && rc == EXIT_OK; step++) {
    struct step_figures *sf = r->steps ? &r->steps[step] : NULL;
    hippo_emu_counters c0;
    if (sf)
      step_begin(sf, api, s->dev, s->backend != HIPPO_BACKEND_HIP, step + 1,
                 r->live_bytes, &c0);
    for (i = 0; i < n; i++) {
      const struct trace_event *e = &ev[i];
      hippo_stream *m = s->mgr[e->stream];
      hippo_status st;

      if (pg->enabled && (i & 4095) == 0) /* a clock read per 4096 events */
        progress_tick(pg, "replaying", step * n + i, n * steps, "events");
      if (step && once && once[i])
        continue; /* made in step 1, still live */
      if (sf)
        sf->events++;

      if (e->op == TRACE_RESERVE) {
        hippo_handle h = 0;
        if (o->policy == RELOCATE_WANTED)
          (void)api->relocate_when_wanted(m); /* failures: in the report */
        st = api->reserve(m, e->size, HIPPO_MODE_AUTO, &h);
        if (st == HIPPO_SUCCESS) {
          handles[e->slot] = h;
          r->live_bytes += e->size;
          if (r->live_bytes > r->peak_live_bytes)
            r->peak_live_bytes = r->live_bytes;
          if (sf)
            step_sample(sf, api, s->dev, r->live_bytes);
        } else {
          handles[e->slot] = 0;
          r->oom_count += st == HIPPO_OUT_OF_MEMORY;
          if (r->failed_reserves++ == 0) {
            r->first_fail_line = e->line;
            r->first_fail_status = st;
            copy_error(r->first_fail_error, sizeof r->first_fail_error,
                       api->last_error());
          }
        }
      } else {
        hippo_handle h = handles[e->slot];
        if (h == 0) {
          r->skipped_releases++;
        } else {
          handles[e->slot] = 0;
          r->live_bytes -= e->size;
          st = api->release(m, h);
          if (st != HIPPO_SUCCESS && r->failed_releases++ == 0) {
            r->first_release_fail_line = e->line;
            r->first_release_fail_status = st;
            copy_error(r->first_release_fail_error,
                       sizeof r->first_release_fail_error,
                       api->last_error());
          }
        }
      }
      if (o->policy == RELOCATE_EVERY && (i + 1) % o->every == 0)
        (void)api->relocate_with(s->dev, NULL, HIPPO_RELOCATE_EXPLICIT,
                                 NULL);
      if (s->timeline)
        timeline_event(s->timeline, i, e->stream, e->op == TRACE_RESERVE,
                       e->op == TRACE_RESERVE && handles[e->slot] == 0,
                       r->live_bytes,
                       o->policy == RELOCATE_EVERY &&
                           (i + 1) % o->every == 0);
      if (o->check) {
        st = api->check(s->dev);
        if (st != HIPPO_SUCCESS) {
          progress_end(pg);
          fprintf(stderr,
                  "%s:%" PRIu32 ": hippo's bookkeeping check failed after "
                  "this event: %s: %s\n  (a hippo bug: please report it "
                  "with the trace)\n",
                  o->trace, e->line, tool_status_name(api, st),
                  api->last_error());
          rc = EXIT_CHECK;
          break;
        }
      }
    }
    if (sf)
      step_end(sf, api, s->dev, &c0);
  }
  r->wall_s = now_s() - t0;
  progress_end(pg);
  free(once);
  return rc;
}

/* Releases what is still live, detaches, closes, unloads.
 * EXIT_OK or EXIT_HIPPO (messages printed). */
int session_close(struct session *s, const struct trace *t) {
  const hippo_api *api = s->api;
  int rc = EXIT_OK;
  hippo_status st;
  size_t i;

  if (s->dev && s->handles) {
    for (i = 0; i < t->count; i++) {
      const struct trace_event *e = &t->events[i];
      hippo_handle h;
      if (e->op != TRACE_RESERVE || (h = s->handles[e->slot]) == 0)
        continue;
      s->handles[e->slot] = 0;
      st = api->release(s->mgr[e->stream], h);
      if (st != HIPPO_SUCCESS && rc == EXIT_OK) {
        fprintf(stderr,
                "hippo-replay: releasing the reservation of line %" PRIu32
                " at the end failed: %s: %s\n",
                e->line, tool_status_name(api, st), api->last_error());
        rc = EXIT_HIPPO;
      }
    }
  }
  for (i = 0; i < s->attached_count; i++) {
    st = api->stream_detach(s->attached[i]);
    if (st != HIPPO_SUCCESS) {
      fprintf(stderr, "hippo-replay: stream_detach failed: %s: %s\n",
              tool_status_name(api, st), api->last_error());
      rc = EXIT_HIPPO;
    }
  }
  s->attached_count = 0;
  for (i = 0; i < TRACE_MAX_STREAMS; i++) {
    if (!s->emulated[i])
      continue;
    s->emulated[i] = false;
    st = tool_emu(api)->stream_destroy(s->dev, s->native[i]);
    if (st != HIPPO_SUCCESS) {
      fprintf(stderr, "hippo-replay: emu_stream_destroy failed: %s: %s\n",
              tool_status_name(api, st), api->last_error());
      rc = EXIT_HIPPO;
    }
  }
  if (s->dev) {
    st = api->device_close(s->dev);
    if (st != HIPPO_SUCCESS) {
      fprintf(stderr, "hippo-replay: device_close failed: %s: %s\n",
              tool_status_name(api, st), api->last_error());
      rc = EXIT_HIPPO;
    }
    s->dev = NULL;
  }
  if (s->lib)
    dlclose(s->lib);
  s->lib = NULL;
  return rc;
}
