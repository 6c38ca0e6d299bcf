/* replay_report.c -- what hippo-replay prints: the summary as `key: value`
 * lines and the figures as one JSON object (keys: README), with each
 * step's figures under --steps.
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

const char *replay_policy_name(const struct options *o) {
  static char buf[48];
  switch (o->policy) {
  case RELOCATE_NEVER:
    return "never";
  case RELOCATE_EVERY:
    snprintf(buf, sizeof buf, "explicit-every=%" PRIu64, o->every);
    return buf;
  default:
    return "wanted";
  }
}


void print_summary(FILE *out, const struct session *s,
                          const struct options *o,
                          const struct trace *t, const struct results *r,
                          const char *plugin, bool have_usage,
                          const hippo_usage *u, bool have_counters,
                          const hippo_emu_counters *c) {
  const hippo_api *api = s->api;

  fprintf(out, "trace: %s\n", o->trace);
  if (t->format == TRACE_FORMAT_RMM) {
    fprintf(out, "format: rmm (" TRACE_RMM_HEADER ")\n");
    fprintf(out, "allocate failures: %" PRIu64 " (not replayed)\n",
            t->alloc_failures);
    fprintf(out, "null pointer lines: %" PRIu64 " (not replayed)\n",
            t->null_lines);
  } else {
    fprintf(out, "format: hippo (" TRACE_HEADER ")\n");
  }
  if (o->lenient)
    fprintf(out, "skipped: %" PRIu64 " line%s%s%s%s\n", t->skipped,
            t->skipped == 1 ? "" : "s", t->skipped ? " (first: " : "",
            t->first_skipped, t->skipped ? ")" : "");
  fprintf(out, "plugin: %s\n", plugin);
  if (s->backend_note[0])
    fprintf(out, "backend: %s (%s)\n", tool_backend_name(s->backend),
            s->backend_note);
  else
    fprintf(out, "backend: %s\n", tool_backend_name(s->backend));
  fprintf(out, "layout: %s\n", o->dev.layout.text);
  if (s->backend == HIPPO_BACKEND_HIP)
    fprintf(out, "streams: %" PRIu32 " (1 manager: on HIP every trace stream "
            "maps to the default stream)\n",
            t->streams);
  else
    fprintf(out, "streams: %" PRIu32 " (one manager each)\n", t->streams);
  fprintf(out, "events: %zu\n", t->count);
  fprintf(out, "reservations: %" PRIu64 "\n", t->reserves);
  fprintf(out, "releases: %" PRIu64 "\n", t->releases);
  fprintf(out, "failed reservations: %" PRIu64 "\n", r->failed_reserves);
  if (r->failed_reserves) {
    fprintf(out, "first failed reservation: %s:%" PRIu32 ": %s: %s\n", o->trace,
            r->first_fail_line, tool_status_name(api, r->first_fail_status),
            r->first_fail_error);
    fprintf(out, "releases skipped: %" PRIu64 "\n", r->skipped_releases);
  }
  fprintf(out, "failed releases: %" PRIu64 "\n", r->failed_releases);
  if (r->failed_releases)
    fprintf(out, "first failed release: %s:%" PRIu32 ": %s: %s\n", o->trace,
            r->first_release_fail_line,
            tool_status_name(api, r->first_release_fail_status),
            r->first_release_fail_error);
  fprintf(out, "live at end: %" PRIu64 "\n", r->live_at_end);
  fprintf(out, "peak live bytes: %" PRIu64 "\n", r->peak_live_bytes);
  if (have_usage) {
    fprintf(out, "peak reserved bytes: %" PRIu64 "\n", u->peak_bytes_reserved);
    if (r->peak_live_bytes)
      fprintf(out, "reserved/live ratio: %.3f\n",
              (double)u->peak_bytes_reserved / (double)r->peak_live_bytes);
    else
      fprintf(out, "reserved/live ratio: n/a\n");
  } else {
    fprintf(out, "peak reserved bytes: n/a\nreserved/live ratio: n/a\n");
  }
  if (have_counters) {
    fprintf(out, "driver allocations: %" PRIu64 "\n",
            c->calls[HIPPO_CALL_ALLOC]);
    fprintf(out, "driver frees: %" PRIu64 "\n", c->calls[HIPPO_CALL_FREE]);
    fprintf(out, "allocations mapped: %" PRIu64 "\n",
            c->calls[HIPPO_CALL_VM_MAP]);
    fprintf(out, "allocations unmapped: %" PRIu64 "\n",
            c->calls[HIPPO_CALL_VM_UNMAP]);
    fprintf(out, "peak mapped bytes: %" PRIu64 "\n", c->peak_bytes_mapped);
    fprintf(out, "driver calls per 1000 events: %.1f\n",
            tool_calls_per_1000(c, t->count));
  } else {
    fprintf(out, "driver allocations: n/a\ndriver frees: n/a\n"
                 "allocations mapped: n/a\nallocations unmapped: n/a\n"
                 "peak mapped bytes: n/a\n"
                 "driver calls per 1000 events: n/a\n");
  }
  fprintf(out, "relocation policy: %s\n", replay_policy_name(o));
  if (have_usage) {
    fprintf(out, "relocations: %" PRIu64 "\n", u->relocations);
    fprintf(out, "relocated slices: %" PRIu64 "\n", u->slices_relocated);
    fprintf(out, "relocated bytes: %" PRIu64 "\n", u->bytes_relocated);
  }
  fprintf(out, "out-of-memory reservations: %" PRIu64 "\n", r->oom_count);
  for (uint32_t k = 0; r->steps && k < o->steps; k++)
    step_print_text(out, &r->steps[k]);
  fprintf(out, "wall time: %.6f s%s%s\n", r->wall_s,
          o->check ? " (includes --check after every event)" : "",
          o->svg ? " (includes the --svg samples)" : "");
  fprintf(out, "ns per event: %.1f\n",
          t->count ? r->wall_s * 1e9 / (double)t->count : 0.0);
}

/* Writes `text` as a JSON string, quotes included: valid UTF-8 whatever
 * the bytes (a trace's name or an excerpt of a bad line may hold any, or
 * a character cut at the excerpt's end); each byte that starts no valid
 * UTF-8 sequence becomes U+FFFD. */
static void json_string(FILE *f, const char *text) {
  const unsigned char *p = (const unsigned char *)text;
  fputc('"', f);
  while (*p) {
    size_t n = tool_utf8_length(p);
    if (n == 0) {
      fputs("\\ufffd", f);
      p++;
    } else if (*p == '"' || *p == '\\') {
      fprintf(f, "\\%c", *p++);
    } else if (*p < 0x20 || *p == 0x7f) {
      fprintf(f, "\\u%04x", (unsigned)*p++);
    } else {
      fwrite(p, 1, n, f);
      p += n;
    }
  }
  fputc('"', f);
}

/* Writes the figures as one JSON object to o->json.  EXIT_OK or
 * EXIT_INPUT (message printed). */
void write_json(FILE *f, const struct session *s,
                       const struct options *o, const struct trace *t,
                       const struct results *r, const hippo_usage *u,
                       bool have_counters, const hippo_emu_counters *c) {
  const hippo_api *api = s->api;
  bool first = true;
  fprintf(f, "{\n  \"trace\": ");
  json_string(f, o->trace);
  fprintf(f, ",\n  \"format\": \"%s\",\n",
          t->format == TRACE_FORMAT_RMM ? "rmm" : "hippo");
  fprintf(f, "  \"allocate_failures\": %" PRIu64 ",\n", t->alloc_failures);
  fprintf(f, "  \"null_pointer_lines\": %" PRIu64 ",\n", t->null_lines);
  fprintf(f, "  \"skipped_lines\": %" PRIu64 ",\n", t->skipped);
  fprintf(f, "  \"first_skipped\": ");
  if (t->skipped)
    json_string(f, t->first_skipped);
  else
    fprintf(f, "null");
  fprintf(f, ",\n  \"backend\": \"%s\",\n", tool_backend_name(s->backend));
  fprintf(f, "  \"backend_note\": ");
  if (s->backend_note[0])
    json_string(f, s->backend_note);
  else
    fprintf(f, "null");
  fprintf(f, ",\n");
  /* The canonical text has only [a-z0-9_:;,=KMGT]: nothing to escape. */
  fprintf(f, "  \"layout\": \"%s\",\n", o->dev.layout.text);
  fprintf(f, "  \"relocate\": \"%s\",\n", replay_policy_name(o));
  fprintf(f, "  \"events\": %zu,\n", t->count);
  fprintf(f, "  \"streams\": %" PRIu32 ",\n", t->streams);
  fprintf(f, "  \"failed_reservations\": %" PRIu64 ",\n", r->failed_reserves);
  fprintf(f, "  \"peak_live_bytes\": %" PRIu64 ",\n", r->peak_live_bytes);
  fprintf(f, "  \"peak_reserved_bytes\": %" PRIu64 ",\n",
          u->peak_bytes_reserved);
  if (r->peak_live_bytes) /* no live byte: undefined, as the summary's n/a */
    fprintf(f, "  \"reserved_to_live\": %.6f,\n",
            (double)u->peak_bytes_reserved / (double)r->peak_live_bytes);
  else
    fprintf(f, "  \"reserved_to_live\": null,\n");
  if (have_counters) {
    fprintf(f, "  \"driver_allocs\": %" PRIu64 ",\n",
            c->calls[HIPPO_CALL_ALLOC]);
    fprintf(f, "  \"driver_frees\": %" PRIu64 ",\n",
            c->calls[HIPPO_CALL_FREE]);
    fprintf(f, "  \"driver_maps\": %" PRIu64 ",\n",
            c->calls[HIPPO_CALL_VM_MAP]);
    fprintf(f, "  \"driver_unmaps\": %" PRIu64 ",\n",
            c->calls[HIPPO_CALL_VM_UNMAP]);
    fprintf(f, "  \"peak_mapped_bytes\": %" PRIu64 ",\n",
            c->peak_bytes_mapped);
    fprintf(f, "  \"driver_calls_per_1000_events\": %.1f,\n",
            tool_calls_per_1000(c, t->count));
  } else {
    fprintf(f, "  \"driver_allocs\": null,\n  \"driver_frees\": null,\n"
               "  \"driver_maps\": null,\n  \"driver_unmaps\": null,\n"
               "  \"peak_mapped_bytes\": null,\n"
               "  \"driver_calls_per_1000_events\": null,\n");
  }
  fprintf(f, "  \"relocated_bytes\": %" PRIu64 ",\n", u->bytes_relocated);
  fprintf(f, "  \"relocated_slices\": %" PRIu64 ",\n", u->slices_relocated);
  fprintf(f, "  \"relocations\": %" PRIu64 ",\n", u->relocations);
  fprintf(f, "  \"oom_count\": %" PRIu64 ",\n", r->oom_count);
  fprintf(f, "  \"wall_seconds\": %.6f,\n", r->wall_s);
  fprintf(f, "  \"ns_per_event\": %.1f,\n",
          t->count ? r->wall_s * 1e9 / (double)t->count : 0.0);
  if (r->steps) {
    fprintf(f, "  \"steps\": [\n");
    for (uint32_t k = 0; k < o->steps; k++)
      step_print_json(f, &r->steps[k], 4, k + 1 == o->steps);
    fprintf(f, "  ],\n");
  }
  fprintf(f, "  \"pools\": [");
  for (uint32_t k = 0; k < s->attached_count; k++) {
    hippo_usage su;
    memset(&su, 0, sizeof su);
    su.struct_size = sizeof su;
    if (api->usage(s->dev, s->attached[k], &su) != HIPPO_SUCCESS)
      continue;
    for (uint32_t i = 0; i < su.pool_count; i++) {
      hippo_pool_report pr;
      memset(&pr, 0, sizeof pr);
      pr.struct_size = sizeof pr;
      if (api->pool_report(s->attached[k], i, &pr, NULL) != HIPPO_SUCCESS)
        continue;
      /* the trace's stream number (attached[k] serves stream_order[k]);
       * on HIP one manager serves every trace stream: the first's */
      fprintf(f,
              "%s\n    {\"stream\": %u, \"index\": %" PRIu32
              ", \"kind\": \"%s\", \"peak_reserved_bytes\": %" PRIu64
              ", \"peak_pages\": %" PRIu64 "}",
              first ? "" : ",", (unsigned)t->stream_order[k], i,
              tool_pool_kind_name(pr.kind), pr.peak_bytes_reserved,
              pr.peak_pages);
      first = false;
    }
  }
  fprintf(f, "%s]\n}\n", first ? "" : "\n  ");
}
