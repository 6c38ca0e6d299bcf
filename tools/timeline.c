/* timeline.c -- hippo-replay's --svg (timeline.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timeline.h"
#include "toolutil.h"

#define MAX_POOLS 64u /* pool indexes drawn (the plugin's limit is 33) */

/* One interval of the replay.
 * Invariants (once filled): live_max and total_max are the largest live and
 * reserved bytes after any event of the interval; the pools' shares at the
 * moment of total_max are in timeline.shares[b * pools ...]; end is the
 * number of events replayed at the interval's end; first_reloc and
 * first_fail the event (1-based: events replayed) of its first relocation
 * and first failed reservation, when relocs and fails are not 0. */
struct bucket {
  uint64_t live_max, total_max, end;
  uint64_t first_reloc, first_fail;
  uint32_t relocs, fails;
};

/* Invariants: sum[p] is the sum of cur[k * pools + p] over the attached
 * streams k, total the sum of sum[]; rel[k] the relocations stream k had
 * at its last reading; buckets[0 .. filled) are complete but the last,
 * which is being filled when events go on. */
struct timeline {
  const hippo_api *api;
  hippo_device *dev;
  hippo_stream **attached;
  uint32_t attached_count, pools;
  uint16_t index[TRACE_MAX_STREAMS]; /* trace stream -> attached index */
  size_t events, nb, filled;
  uint64_t *cur, *rel, *shares;
  uint64_t sum[MAX_POOLS], start[MAX_POOLS], total;
  hippo_pool_report first[MAX_POOLS]; /* stream 0's pools: kinds */
  hippo_pool_options first_opt[MAX_POOLS]; /* and options */
  uint64_t relocs, fails;             /* over the whole replay */
  struct bucket *buckets;
};

/* Reads stream k's relocations and pools; returns the new relocations. */
static uint64_t refresh(struct timeline *tl, uint32_t k) {
  const hippo_api *api = tl->api;
  hippo_stream *m = tl->attached[k];
  hippo_usage u;
  uint64_t moved = 0;

  memset(&u, 0, sizeof u);
  u.struct_size = sizeof u;
  if (api->usage(tl->dev, m, &u) == HIPPO_SUCCESS &&
      u.relocations > tl->rel[k]) {
    moved = u.relocations - tl->rel[k];
    tl->rel[k] = u.relocations;
  }
  for (uint32_t p = 0; p < tl->pools; p++) {
    hippo_pool_report r;
    uint64_t *c = &tl->cur[(size_t)k * tl->pools + p];
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    if (api->pool_report(m, p, &r, NULL) != HIPPO_SUCCESS)
      continue; /* a pool this stream lacks (or an error): keep the last */
    tl->sum[p] += r.bytes_reserved - *c; /* wraps back exactly */
    tl->total += r.bytes_reserved - *c;
    *c = r.bytes_reserved;
  }
  return moved;
}

struct timeline *timeline_new(const hippo_api *api, hippo_device *dev,
                              hippo_stream *const mgr[TRACE_MAX_STREAMS],
                              hippo_stream *const *attached,
                              uint32_t attached_count, size_t events) {
  struct timeline *tl = calloc(1, sizeof *tl);
  uint32_t k, s;

  if (!tl)
    goto oom;
  tl->api = api;
  tl->dev = dev;
  tl->attached_count = attached_count;
  tl->events = events;
  tl->nb = events < TIMELINE_MAX_SAMPLES ? events : TIMELINE_MAX_SAMPLES;
  for (k = 0; k < attached_count; k++) {
    hippo_usage u;
    memset(&u, 0, sizeof u);
    u.struct_size = sizeof u;
    if (api->usage(dev, attached[k], &u) == HIPPO_SUCCESS &&
        u.pool_count > tl->pools)
      tl->pools = u.pool_count < MAX_POOLS ? u.pool_count : MAX_POOLS;
  }
  for (s = 0; s < TRACE_MAX_STREAMS; s++)
    for (k = 0; mgr[s] && k < attached_count; k++)
      if (attached[k] == mgr[s]) {
        tl->index[s] = (uint16_t)k;
        break;
      }
  tl->attached = calloc(attached_count ? attached_count : 1,
                        sizeof *tl->attached);
  tl->cur = calloc((size_t)(attached_count ? attached_count : 1) *
                       (tl->pools ? tl->pools : 1),
                   sizeof *tl->cur);
  tl->rel = calloc(attached_count ? attached_count : 1, sizeof *tl->rel);
  tl->buckets = calloc(tl->nb ? tl->nb : 1, sizeof *tl->buckets);
  tl->shares = calloc((tl->nb ? tl->nb : 1) * (tl->pools ? tl->pools : 1),
                      sizeof *tl->shares);
  if (!tl->attached || !tl->cur || !tl->rel || !tl->buckets || !tl->shares)
    goto oom;
  if (attached_count)
    memcpy(tl->attached, attached, attached_count * sizeof *attached);
  for (uint32_t p = 0; attached_count && p < tl->pools; p++) {
    tl->first[p].struct_size = sizeof tl->first[p];
    tl->first_opt[p].struct_size = sizeof tl->first_opt[p];
    if (api->pool_report(attached[0], p, &tl->first[p], &tl->first_opt[p]) !=
        HIPPO_SUCCESS) {
      memset(&tl->first[p], 0, sizeof tl->first[p]);
      memset(&tl->first_opt[p], 0, sizeof tl->first_opt[p]);
    }
  }
  for (k = 0; k < attached_count; k++)
    (void)refresh(tl, k); /* relocations before the replay do not count */
  memcpy(tl->start, tl->sum, sizeof tl->start);
  return tl;

oom:
  fprintf(stderr, "hippo-replay: out of host memory for the --svg samples\n");
  timeline_free(tl);
  return NULL;
}

void timeline_event(struct timeline *tl, size_t i, uint16_t stream,
                    bool reserve, bool failed, uint64_t live_bytes,
                    bool all_streams) {
  uint64_t moved = 0;
  size_t b;
  struct bucket *bk;

  if (i >= tl->events || tl->attached_count == 0)
    return;
  /* Pages change at reservations (and relocations); a release never calls
   * the driver (README), so the pools are read only then. */
  if (all_streams)
    for (uint32_t k = 0; k < tl->attached_count; k++)
      moved += refresh(tl, k);
  else if (reserve)
    moved = refresh(tl, tl->index[stream]);
  tl->relocs += moved;
  tl->fails += failed;

  /* Interval b holds events [b * events / nb, (b + 1) * events / nb). */
  b = (size_t)((uint64_t)i * tl->nb / tl->events);
  bk = &tl->buckets[b];
  if (b >= tl->filled) { /* the interval's first event */
    tl->filled = b + 1;
    bk->live_max = live_bytes;
    bk->total_max = tl->total;
    memcpy(&tl->shares[b * tl->pools], tl->sum, tl->pools * sizeof *tl->sum);
  } else {
    if (live_bytes > bk->live_max)
      bk->live_max = live_bytes;
    if (tl->total > bk->total_max) {
      bk->total_max = tl->total;
      memcpy(&tl->shares[b * tl->pools], tl->sum,
             tl->pools * sizeof *tl->sum);
    }
  }
  bk->end = i + 1;
  if (moved && bk->relocs++ == 0)
    bk->first_reloc = i + 1;
  if (failed && bk->fails++ == 0)
    bk->first_fail = i + 1;
}

void timeline_free(struct timeline *tl) {
  if (!tl)
    return;
  free(tl->attached);
  free(tl->cur);
  free(tl->rel);
  free(tl->buckets);
  free(tl->shares);
  free(tl);
}

/* ---- Writing the SVG ----------------------------------------------------- */

/* The drawing's geometry, in pixels. */
#define W 960
#define PLOT_X0 116 /* room for "failed reservations" */
#define PLOT_X1 (W - 24)
/* Below the header (title, layout, figures), which adds 16 px a line. */
#define LANE_RELOC 46 /* top of the relocations lane, 10 px high */
#define LANE_FAIL 62  /* top of the failed-reservations lane */
#define PLOT_Y0 84
#define PLOT_Y1 414
#define LEGEND_Y (PLOT_Y1 + 58)
#define LEGEND_ROW 18
#define LEGEND_COLUMNS 2

/* Colours of the pools by index (colour-blind-safe, Tableau 10), the
 * lines and the markers. */
static const char *const pool_colours[] = {
    "#bab0ac", "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1",
    "#edc948", "#76b7b2", "#ff9da7", "#9c755f", "#e15759"};
#define LIVE_COLOUR "#111111"
#define TOTAL_COLOUR "#555555"
#define RELOC_COLOUR "#7b3294"
#define FAIL_COLOUR "#d7191c"

/* Writes s as XML character data or an attribute value: & < > " ' as
 * entities; a control character or a byte that is not part of valid UTF-8
 * as '?' (XML 1.0 allows neither). */
static void put_escaped(FILE *f, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    unsigned n = 0;
    if (*p == '&')
      fputs("&amp;", f);
    else if (*p == '<')
      fputs("&lt;", f);
    else if (*p == '>')
      fputs("&gt;", f);
    else if (*p == '"')
      fputs("&quot;", f);
    else if (*p == '\'')
      fputs("&apos;", f);
    else if (*p < 0x20 || *p == 0x7f)
      fputc('?', f);
    else if (*p < 0x80)
      fputc(*p, f);
    else {
      /* A UTF-8 sequence: its length from the lead byte, then that many
       * continuation bytes (overlong forms and surrogates are let through:
       * xmllint takes them as characters; what matters is no broken
       * sequence). */
      n = *p >= 0xc2 && *p <= 0xdf ? 1 : *p >= 0xe0 && *p <= 0xef ? 2
          : *p >= 0xf0 && *p <= 0xf4 ? 3 : 0;
      for (unsigned j = 1; j <= n; j++)
        if ((p[j] & 0xc0) != 0x80)
          n = 0;
      if (n)
        fwrite(p, 1, n + 1, f);
      else
        fputc('?', f);
      p += n;
    }
    p++;
  }
}

/* put_escaped for the first n bytes of s. */
static void put_escaped_n(FILE *f, const char *s, size_t n) {
  char buf[TOOL_LAYOUT_TEXT_MAX];
  if (n >= sizeof buf)
    n = sizeof buf - 1;
  memcpy(buf, s, n);
  buf[n] = '\0';
  put_escaped(f, buf);
}

/* Where the layout's text breaks into lines of the header: after a ';'
 * once a line would pass LAYOUT_LINE characters (a longer pool stays
 * whole).  Fills ends[] (each line's end) and returns the line count, at
 * most `cap` (the last line then takes the rest). */
#define LAYOUT_LINE 100
static unsigned layout_lines(const char *text, size_t *ends, unsigned cap) {
  size_t len = strlen(text), start = 0;
  unsigned n = 0;
  while (n + 1 < cap && len - start > LAYOUT_LINE) {
    size_t cut = 0;
    for (size_t i = start; i < len && (i - start <= LAYOUT_LINE || !cut); i++)
      if (text[i] == ';')
        cut = i + 1;
    if (!cut)
      break;
    ends[n++] = cut;
    start = cut;
  }
  ends[n++] = len;
  return n;
}

/* "1.63 GiB", "512 MiB", "100 B": three significant digits in the largest
 * binary unit not above n. */
static const char *bytes_text(uint64_t n, char *buf, size_t cap) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB",
                                      "PiB", "EiB"};
  double v = (double)n;
  unsigned u = 0;
  while (v >= 1024.0 && u + 1 < sizeof units / sizeof *units) {
    v /= 1024.0;
    u++;
  }
  snprintf(buf, cap, "%.3g %s", v, units[u]);
  return buf;
}

/* An event count for an axis label: "250", "10k", "1.5M". */
static const char *count_text(uint64_t n, char *buf, size_t cap) {
  if (n >= 1000000 && n % 100000 == 0)
    snprintf(buf, cap, "%.10gM", (double)n / 1e6);
  else if (n >= 1000 && n % 100 == 0)
    snprintf(buf, cap, "%.10gk", (double)n / 1e3);
  else
    snprintf(buf, cap, "%" PRIu64, n);
  return buf;
}

/* Steps of `step` needed to reach `top` (both > 0), allowing for the
 * rounding of 0.1-like steps. */
static unsigned steps_to(double top, double step) {
  unsigned n = 0;
  while (n * step < top * (1 - 1e-9))
    n++;
  return n;
}

/* The y axis: ticks of `step` units of `unit` bytes up to top bytes. */
struct yaxis {
  double unit, step, top;
  const char *unit_name;
  unsigned ticks;
};

/* Round ticks for values up to ymax: the largest binary unit not above
 * ymax, a step of 1, 2, 2.5 or 5 times a power of ten of it, at most 8
 * steps. */
static void y_axis(uint64_t ymax, struct yaxis *a) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB",
                                      "PiB", "EiB"};
  static const double steps[] = {0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5,
                                 10, 20, 25, 50, 100, 200, 250, 500};
  double top;
  unsigned u = 0;
  if (ymax < 1024)
    ymax = 1024; /* nothing held: a 1 KiB scale */
  a->unit = 1;
  while ((double)ymax / a->unit >= 1024.0 && u + 1 < 7) {
    a->unit *= 1024.0;
    u++;
  }
  a->unit_name = units[u];
  top = (double)ymax / a->unit;
  a->step = steps[sizeof steps / sizeof *steps - 1];
  for (size_t i = 0; i < sizeof steps / sizeof *steps; i++)
    if (steps_to(top, steps[i]) <= 8) {
      a->step = steps[i];
      break;
    }
  a->ticks = steps_to(top, a->step);
  if (a->ticks == 0)
    a->ticks = 1;
  a->top = a->ticks * a->step * a->unit;
}

/* Pixel coordinates in tenths (v >= 0), so equal points compare equal. */
static long tenths(double v) { return (long)(v * 10.0 + 0.5); }

static long px_x(const struct timeline *tl, uint64_t events) {
  double n = tl->events ? (double)tl->events : 1.0;
  return tenths(PLOT_X0 + (PLOT_X1 - PLOT_X0) * (double)events / n);
}

static long px_y(const struct yaxis *a, double bytes) {
  return tenths(PLOT_Y1 - (PLOT_Y1 - PLOT_Y0) * bytes / a->top);
}

/* The x axis's step: 1, 2 or 5 times a power of ten, at most 10 steps. */
static uint64_t x_step(uint64_t n) {
  for (uint64_t p = 1;; p *= 10) {
    if (n <= 10 * p)
      return p;
    if (n <= 20 * p)
      return 2 * p;
    if (n <= 50 * p)
      return 5 * p;
  }
}

/* A sequence of points written as "x,y x,y ...", leaving out a point
 * whose neighbours on both sides have its y (a flat run needs only its
 * ends), which keeps step-shaped series small. */
struct points {
  FILE *f;
  long px, py;     /* the point held back */
  bool held, flat; /* flat: the held point continues a flat run */
  long fx, fy;     /* the first point of the flat run, written */
};

static void pt_write(FILE *f, long x, long y) {
  fprintf(f, "%ld.%ld,%ld.%ld ", x / 10, x % 10, y / 10, y % 10);
}

static void pt_add(struct points *pts, long x, long y) {
  if (pts->held && y == pts->py) {
    if (!pts->flat) {
      pt_write(pts->f, pts->px, pts->py); /* the run's first point */
      pts->flat = true;
    }
  } else if (pts->held) {
    pt_write(pts->f, pts->px, pts->py); /* the last point of its run */
    pts->flat = false;
  }
  pts->px = x;
  pts->py = y;
  pts->held = true;
}

static void pt_end(struct points *pts) {
  if (pts->held)
    pt_write(pts->f, pts->px, pts->py);
  pts->held = pts->flat = false;
}

/* The value of a series at point j: j == 0 is the start of the replay,
 * j >= 1 the interval j - 1. */
enum series { LIVE, TOTAL, STACK };

static double value_at(const struct timeline *tl, size_t j, enum series s,
                       uint32_t upto) {
  double v = 0;
  const uint64_t *shares = j ? &tl->shares[(j - 1) * tl->pools] : tl->start;
  if (s == LIVE)
    return j ? (double)tl->buckets[j - 1].live_max : 0.0;
  if (s == TOTAL && j)
    return (double)tl->buckets[j - 1].total_max;
  for (uint32_t p = 0; p < (s == TOTAL ? tl->pools : upto); p++)
    v += (double)shares[p];
  return v;
}

static uint64_t end_at(const struct timeline *tl, size_t j) {
  return j ? tl->buckets[j - 1].end : 0;
}

/* The points of a series, start to end (reverse: end to start). */
static void put_series(FILE *f, const struct timeline *tl,
                       const struct yaxis *a, enum series s, uint32_t upto,
                       bool reverse) {
  struct points pts = {f, 0, 0, false, false, 0, 0};
  size_t n = tl->filled + 1;
  for (size_t k = 0; k < n; k++) {
    size_t j = reverse ? n - 1 - k : k;
    pt_add(&pts, px_x(tl, end_at(tl, j)), px_y(a, value_at(tl, j, s, upto)));
  }
  pt_end(&pts);
}

/* "pool 2 ARENA 2 MiB..4 GiB pages": the pool's kind and options. */
static void pool_label(const struct timeline *tl, uint32_t p, char *buf,
                       size_t cap) {
  const hippo_pool_report *r = &tl->first[p];
  const hippo_pool_options *o = &tl->first_opt[p];
  char a[24], b[24];
  switch (r->kind) {
  case HIPPO_POOL_SLICED:
    snprintf(buf, cap, "pool %" PRIu32 " SLICED %s pages, up to %s", p,
             bytes_text(o->page_size, a, sizeof a),
             bytes_text(o->max_slice_size, b, sizeof b));
    break;
  case HIPPO_POOL_ARENA:
    snprintf(buf, cap, "pool %" PRIu32 " ARENA %s..%s pages", p,
             bytes_text(o->page_size, a, sizeof a),
             bytes_text(o->max_slice_size, b, sizeof b));
    break;
  case HIPPO_POOL_EXCLUSIVE:
    snprintf(buf, cap, "pool %" PRIu32 " EXCLUSIVE up to %s", p,
             bytes_text(o->max_alloc_size, a, sizeof a));
    break;
  case HIPPO_POOL_VIRTUAL: /* what it holds is its mapped granules */
    snprintf(buf, cap, "pool %" PRIu32 " VIRTUAL, mapped granules of %s", p,
             bytes_text(o->granule, a, sizeof a));
    break;
  default:
    snprintf(buf, cap, "pool %" PRIu32 " %s", p, tool_pool_kind_name(r->kind));
  }
}

/* One legend entry at slot `slot`: a swatch (a filled box, or a line when
 * line is true) and the text. */
static void legend_entry(FILE *f, unsigned slot, const char *cls,
                         const char *colour, bool line, const char *text) {
  int col = (int)(slot % LEGEND_COLUMNS), row = (int)(slot / LEGEND_COLUMNS);
  int x = PLOT_X0 + col * (PLOT_X1 - PLOT_X0) / LEGEND_COLUMNS;
  int y = LEGEND_Y + row * LEGEND_ROW;
  fprintf(f, "<g class=\"legend-entry %s\">", cls);
  if (line)
    fprintf(f,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
            "stroke-width=\"2\"/>",
            x, y - 4, x + 16, y - 4, colour);
  else
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"16\" height=\"10\" fill=\"%s\"/>",
            x, y - 9, colour);
  fprintf(f, "<text x=\"%d\" y=\"%d\">", x + 22, y);
  put_escaped(f, text);
  fputs("</text></g>\n", f);
}

/* The markers of one lane: a tick per interval holding any. */
static void put_lane(FILE *f, const struct timeline *tl, const char *id,
                     const char *cls, const char *colour, int top,
                     bool relocs, const char *label) {
  fprintf(f,
          "<g id=\"%s\" class=\"markers\">\n"
          "<text class=\"lane-label\" x=\"%d\" y=\"%d\" "
          "text-anchor=\"end\" font-size=\"10\">%s</text>\n"
          "<line class=\"lane\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
          "stroke=\"#dddddd\"/>\n"
          "<g stroke=\"%s\" stroke-width=\"1.2\">\n",
          id, PLOT_X0 - 6, top + 9, label, PLOT_X0, top + 10, PLOT_X1,
          top + 10, colour);
  for (size_t b = 0; b < tl->filled; b++) {
    const struct bucket *bk = &tl->buckets[b];
    uint64_t at = relocs ? bk->first_reloc : bk->first_fail;
    long x;
    if (relocs ? !bk->relocs : !bk->fails)
      continue;
    x = px_x(tl, at);
    fprintf(f,
            "<line class=\"%s\" x1=\"%ld.%ld\" y1=\"%d\" x2=\"%ld.%ld\" "
            "y2=\"%d\"/>\n",
            cls, x / 10, x % 10, top, x / 10, x % 10, top + 10);
  }
  fputs("</g>\n</g>\n", f);
}

void timeline_write_svg(const struct timeline *tl, FILE *f,
                        const struct timeline_labels *lab) {
  struct yaxis ya;
  uint64_t ymax = 0, xstep = 1, pool_peak[MAX_POOLS] = {0};
  bool shown[MAX_POOLS] = {false};
  unsigned entries = 0, rows, height, nlines, dy;
  size_t ends[8];
  char t1[32], t2[32], text[256];

  /* Scales, and the pools that held any page at a sampled moment. */
  for (size_t b = 0; b < tl->filled; b++) {
    const struct bucket *bk = &tl->buckets[b];
    if (bk->total_max > ymax)
      ymax = bk->total_max;
    if (bk->live_max > ymax)
      ymax = bk->live_max;
    for (uint32_t p = 0; p < tl->pools; p++)
      if (tl->shares[b * tl->pools + p] > pool_peak[p])
        pool_peak[p] = tl->shares[b * tl->pools + p];
  }
  for (uint32_t p = 0; p < tl->pools; p++) {
    if (tl->start[p] > pool_peak[p])
      pool_peak[p] = tl->start[p];
    shown[p] = pool_peak[p] > 0;
    entries += shown[p];
  }
  y_axis(ymax, &ya);
  xstep = x_step(tl->events);
  entries += 4; /* live, reserved total, relocations, failed */
  rows = (entries + LEGEND_COLUMNS - 1) / LEGEND_COLUMNS;
  nlines = layout_lines(lab->layout, ends, sizeof ends / sizeof *ends);
  dy = 16 * nlines;
  height = dy + LEGEND_Y + rows * LEGEND_ROW;

  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
          "width=\"%d\" height=\"%u\" viewBox=\"0 0 %d %u\" "
          "font-family=\"DejaVu Sans, Verdana, sans-serif\" "
          "font-size=\"12\">\n",
          W, height, W, height);
  fputs("<title>hippo-replay: ", f);
  put_escaped(f, lab->trace);
  fputs(" (layout ", f);
  put_escaped(f, lab->layout);
  fputs(")</title>\n<desc>Live bytes and bytes reserved from the device, "
        "stacked by pool, over the events of the trace as hippo-replay "
        "replayed them; each point is the largest value of an interval of ",
        f);
  fprintf(f, "%s events.</desc>\n",
          tl->nb ? count_text((tl->events + tl->nb - 1) / tl->nb, t1,
                              sizeof t1)
                 : "0");
  fprintf(f, "<rect id=\"background\" width=\"%d\" height=\"%u\" "
             "fill=\"#ffffff\"/>\n",
          W, height);

  /* Title, the layout (over several lines when long) and the figures;
   * everything below moves down with the layout's extra lines. */
  fprintf(f, "<text id=\"title\" x=\"%d\" y=\"24\" font-size=\"16\" "
             "font-weight=\"bold\">hippo-replay: ",
          PLOT_X0);
  put_escaped(f, lab->trace);
  fputs("</text>\n<g id=\"subtitle\">\n", f);
  for (unsigned i = 0; i < nlines; i++) {
    size_t from = i ? ends[i - 1] : 0;
    fprintf(f, "<text x=\"%d\" y=\"%u\">%s", PLOT_X0, 44 + 16 * i,
            i ? "  " : "layout ");
    put_escaped_n(f, lab->layout + from, ends[i] - from);
    fputs("</text>\n", f);
  }
  fprintf(f, "<text x=\"%d\" y=\"%u\">backend %s, relocate %s, %" PRIu32
             " stream%s, %zu events: peak live %s, peak reserved %s",
          PLOT_X0, 44 + 16 * nlines, lab->backend, lab->relocate,
          lab->streams, lab->streams == 1 ? "" : "s", tl->events,
          bytes_text(lab->peak_live, t1, sizeof t1),
          bytes_text(lab->peak_reserved, t2, sizeof t2));
  if (lab->peak_live)
    fprintf(f, " (%.3f x)",
            (double)lab->peak_reserved / (double)lab->peak_live);
  fprintf(f, "</text>\n</g>\n<g id=\"chart\" transform=\"translate(0 %u)\">\n",
          dy);

  /* Grid and axes. */
  fputs("<g id=\"grid\" stroke=\"#e6e6e6\" stroke-width=\"1\">\n", f);
  for (unsigned i = 1; i <= ya.ticks; i++) {
    long y = px_y(&ya, i * ya.step * ya.unit);
    fprintf(f, "<line x1=\"%d\" y1=\"%ld.%ld\" x2=\"%d\" y2=\"%ld.%ld\"/>\n",
            PLOT_X0, y / 10, y % 10, PLOT_X1, y / 10, y % 10);
  }
  fputs("</g>\n", f);
  fprintf(f, "<g id=\"y-axis\" class=\"axis\">\n"
             "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
             "stroke=\"#333333\"/>\n",
          PLOT_X0, PLOT_Y0, PLOT_X0, PLOT_Y1);
  for (unsigned i = 0; i <= ya.ticks; i++) {
    long y = px_y(&ya, i * ya.step * ya.unit);
    fprintf(f,
            "<line x1=\"%d\" y1=\"%ld.%ld\" x2=\"%d\" y2=\"%ld.%ld\" "
            "stroke=\"#333333\"/>",
            PLOT_X0 - 4, y / 10, y % 10, PLOT_X0, y / 10, y % 10);
    if (i == 0)
      fprintf(f, "<text x=\"%d\" y=\"%ld.%ld\" text-anchor=\"end\">0</text>\n",
              PLOT_X0 - 7, (y + 40) / 10, (y + 40) % 10);
    else
      fprintf(f,
              "<text x=\"%d\" y=\"%ld.%ld\" text-anchor=\"end\">%g %s</text>\n",
              PLOT_X0 - 7, (y + 40) / 10, (y + 40) % 10, i * ya.step,
              ya.unit_name);
  }
  fprintf(f,
          "<text x=\"16\" y=\"%d\" text-anchor=\"middle\" "
          "transform=\"rotate(-90 16 %d)\">bytes</text>\n</g>\n",
          (PLOT_Y0 + PLOT_Y1) / 2, (PLOT_Y0 + PLOT_Y1) / 2);
  fprintf(f, "<g id=\"x-axis\" class=\"axis\">\n"
             "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
             "stroke=\"#333333\"/>\n",
          PLOT_X0, PLOT_Y1, PLOT_X1, PLOT_Y1);
  for (uint64_t e = 0; e <= tl->events; e += xstep) {
    long x = px_x(tl, e);
    fprintf(f,
            "<line x1=\"%ld.%ld\" y1=\"%d\" x2=\"%ld.%ld\" y2=\"%d\" "
            "stroke=\"#333333\"/><text x=\"%ld.%ld\" y=\"%d\" "
            "text-anchor=\"middle\">%s</text>\n",
            x / 10, x % 10, PLOT_Y1, x / 10, x % 10, PLOT_Y1 + 4, x / 10,
            x % 10, PLOT_Y1 + 17, count_text(e, t1, sizeof t1));
    if (tl->events == 0)
      break;
  }
  fprintf(f,
          "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">events "
          "replayed</text>\n</g>\n",
          (PLOT_X0 + PLOT_X1) / 2, PLOT_Y1 + 34);

  /* Reserved bytes, stacked by pool: each area runs along the top of its
   * pool's share and back along the top of the pools below it. */
  fputs("<g id=\"reserved\" class=\"series reserved\" stroke=\"none\" "
        "fill-opacity=\"0.8\">\n",
        f);
  for (uint32_t p = 0; p < tl->pools; p++) {
    if (!shown[p])
      continue;
    pool_label(tl, p, text, sizeof text);
    fprintf(f,
            "<path id=\"reserved-pool-%" PRIu32 "\" class=\"pool kind-%s\" "
            "fill=\"%s\" d=\"M ",
            p, tool_pool_kind_name(tl->first[p].kind),
            pool_colours[p % (sizeof pool_colours / sizeof *pool_colours)]);
    put_series(f, tl, &ya, STACK, p + 1, false);
    fputs("L ", f);
    put_series(f, tl, &ya, STACK, p, true);
    fputs("Z\"><title>", f);
    put_escaped(f, text);
    fprintf(f, ": peak %s</title></path>\n",
            bytes_text(pool_peak[p], t1, sizeof t1));
  }
  fputs("</g>\n", f);
  fprintf(f, "<polyline id=\"reserved-total\" class=\"series reserved-total\" "
             "fill=\"none\" stroke=\"%s\" stroke-width=\"0.8\" points=\"",
          TOTAL_COLOUR);
  put_series(f, tl, &ya, TOTAL, 0, false);
  fputs("\"/>\n", f);
  fprintf(f, "<polyline id=\"live\" class=\"series live\" fill=\"none\" "
             "stroke=\"%s\" stroke-width=\"1.4\" points=\"",
          LIVE_COLOUR);
  put_series(f, tl, &ya, LIVE, 0, false);
  fputs("\"/>\n", f);
  if (tl->events == 0)
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" "
               "fill=\"#777777\">no events</text>\n",
            (PLOT_X0 + PLOT_X1) / 2, (PLOT_Y0 + PLOT_Y1) / 2);

  /* The marker lanes. */
  put_lane(f, tl, "relocations", "relocation", RELOC_COLOUR, LANE_RELOC, true,
           "relocations");
  put_lane(f, tl, "oom", "oom", FAIL_COLOUR, LANE_FAIL, false,
           "failed reservations");

  /* The legend. */
  fputs("<g id=\"legend\">\n", f);
  entries = 0;
  snprintf(text, sizeof text, "live bytes (peak %s)",
           bytes_text(lab->peak_live, t1, sizeof t1));
  legend_entry(f, entries++, "live", LIVE_COLOUR, true, text);
  {
    bool virt = false;
    for (uint32_t p = 0; p < tl->pools; p++)
      virt = virt || tl->first[p].kind == HIPPO_POOL_VIRTUAL;
    snprintf(text, sizeof text, "reserved bytes%s, all pools (peak %s)",
             virt ? " (VIRTUAL: mapped)" : "",
             bytes_text(lab->peak_reserved, t1, sizeof t1));
  }
  legend_entry(f, entries++, "reserved-total", TOTAL_COLOUR, true, text);
  for (uint32_t p = 0; p < tl->pools; p++) {
    char label[160];
    if (!shown[p])
      continue;
    pool_label(tl, p, label, sizeof label);
    snprintf(text, sizeof text, "%s (peak %s)", label,
             bytes_text(pool_peak[p], t1, sizeof t1));
    legend_entry(f, entries++, "pool",
                 pool_colours[p % (sizeof pool_colours /
                                   sizeof *pool_colours)],
                 false, text);
  }
  snprintf(text, sizeof text, "relocations that moved slices: %" PRIu64,
           tl->relocs);
  legend_entry(f, entries++, "relocation", RELOC_COLOUR, true, text);
  snprintf(text, sizeof text, "failed reservations: %" PRIu64, tl->fails);
  legend_entry(f, entries++, "oom", FAIL_COLOUR, true, text);
  fputs("</g>\n</g>\n</svg>\n", f);
}
