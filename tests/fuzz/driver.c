/* driver.c -- the fuzz driver (driver.h): bytes -> ABI calls on a HOST
 * device, each checked against the reference model (model.h). */
#include <config.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "model.h"

/* The emulation table of `api` (the plugin's one, never NULL for a table
 * hippo_load accepted). */
static const hippo_emu_api *drv_emu(const hippo_api *api) {
  const hippo_emu_api *emu = NULL;
  if (api->emulation(&emu) != HIPPO_SUCCESS || !emu)
    abort();
  return emu;
}

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)
#define WINDOW 32u         /* bytes per pattern window */
#define FULL_EVERY 128u    /* every byte of every slice, each N operations */
/* Every other operation goes unverified (unless it may have moved bytes
 * or a fault fired in it): the checks call into the pools, which finish
 * what a call left for the next one (a SLICED pool's release merges at
 * its pool's next call, pool.h settle), so without a gap that state would
 * only ever meet the check walk, never the next operation.  Whatever is
 * wrong is still seen one operation later. */
#define VERIFY_EVERY 2u
#define MAX_DEAD 16

/* What an operation leaves the checks to do (bits). */
#define PARKED 1 /* it parked the faults already */
#define FULL 2   /* it may have moved slices: every byte */

static const char *const op_names[HFZ_OPS] = {
    "reserve",    "release", "resolve", "attach",     "detach",  "record_use",
    "sync",       "persistent", "install", "relocate", "capture", "retire",
    "fault",      "announce", "figures", "dead"};

const char *hfz_op_name(enum hfz_op op) {
  return op < HFZ_OPS ? op_names[op] : "?";
}

/* ---- the input ------------------------------------------------------------ */

typedef struct rd {
  const uint8_t *p;
  size_t n, i;
} rd;

static uint8_t u8(rd *r) { return r->i < r->n ? r->p[r->i++] : 0; }
static uint64_t u16(rd *r) { return (uint64_t)u8(r) | (uint64_t)u8(r) << 8; }
static uint64_t u64(rd *r) {
  uint64_t x = 0;
  for (int i = 0; i < 8; i++)
    x = x << 8 | u8(r);
  return x;
}

/* ---- the driver's state ----------------------------------------------------- */

typedef struct fz {
  const hippo_api *api;
  hippo_device *dev;
  hfz_model m;
  hfz_stats *stats;
  char *why;
  size_t len;
  enum hfz_op op;
  uint64_t next_seed;
  /* faults: armed ones fire at the backend's call number target[k] */
  bool armed[HIPPO_CALL_KINDS];
  uint64_t target[HIPPO_CALL_KINDS], parked[HIPPO_CALL_KINDS];
  hippo_status fstatus[HIPPO_CALL_KINDS];
  uint32_t fired_kinds; /* the kinds whose armed fault fired in the last
                           call (faults_poll) */
  hfz_statuses fired_now; /* statuses a fault of the last call allows */
  bool fired_in_op;
  hippo_stream *dead[MAX_DEAD]; /* detached streams' pointers */
  unsigned ndead;
  hippo_device *closed;         /* a device closed at the start */
  bool trace;                   /* $HIPPO_FUZZ_TRACE: every call on stderr */
  hippo_backend backend;        /* HOST, or HIP (HIPPO_TEST_BACKEND) */
  unsigned char *buf;
  uint64_t bufcap;
} fz;

static int fail(fz *f, const char *fmt, ...) {
  va_list ap;
  int n = snprintf(f->why, f->len, "op %" PRIu64 " (%s): ", f->stats->ops,
                   hfz_op_name(f->op));
  va_start(ap, fmt);
  if (n >= 0 && (size_t)n < f->len)
    vsnprintf(f->why + n, f->len - n, fmt, ap);
  va_end(ap);
  return -1;
}

static void set_names(fz *f, hfz_statuses ok, char *out, size_t len) {
  size_t at = 0;
  out[0] = '\0';
  for (int s = 0; s < 32 && at < len; s++)
    if (ok >> s & 1)
      at += snprintf(out + at, len - at, "%s%s", at ? "|" : "",
                     f->api->status_name(s));
}

/* A call answered `got`; the model allows `ok` (and what a fault fired
 * in the call allows). */
static int expect(fz *f, const char *call, hippo_status got,
                  hfz_statuses ok) {
  f->stats->calls++;
  ok |= f->fired_now;
  if (f->trace)
    fprintf(stderr, "hfz %" PRIu64 " %s: %s -> %s%s\n", f->stats->ops,
            hfz_op_name(f->op), call, f->api->status_name(got),
            f->fired_now ? " (a fault fired)" : "");
  if (got != HIPPO_SUCCESS)
    f->stats->failed_calls++;
  if (got < 0 || got >= 32 || !(ok >> got & 1)) {
    char names[256];
    set_names(f, ok, names, sizeof names);
    return fail(f, "%s answered %s (%s), the model allows %s", call,
                f->api->status_name(got), f->api->last_error(), names);
  }
  return 0;
}

static hippo_emu_counters counters(fz *f) {
  hippo_emu_counters c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  (void)drv_emu(f->api)->counters(f->dev, &c);
  return c;
}

/* After call `what`, made with the counters at `before`: while a stream of
 * the device captures, hippo gave no memory back (no free, no unmap).
 * -1 (reported) if it did. */
static int kept_while_capturing(fz *f, const char *what,
                                const hippo_emu_counters *before) {
  hippo_emu_counters after;
  if (!hfz_any_capturing(&f->m))
    return 0;
  after = counters(f);
  if (after.calls[HIPPO_CALL_FREE] == before->calls[HIPPO_CALL_FREE] &&
      after.calls[HIPPO_CALL_VM_UNMAP] == before->calls[HIPPO_CALL_VM_UNMAP])
    return 0;
  /* the one exception (docs/decisions.md): a map whose set-access failed
   * gives its allocations back at once, mapped without access */
  if ((f->fired_kinds >> HIPPO_CALL_VM_ACCESS & 1) &&
      after.calls[HIPPO_CALL_FREE] == before->calls[HIPPO_CALL_FREE])
    return 0;
  return fail(f, "%s gave memory back (%" PRIu64 " frees, %" PRIu64
              " unmaps) while a stream captures",
              what, after.calls[HIPPO_CALL_FREE] - before->calls[HIPPO_CALL_FREE],
              after.calls[HIPPO_CALL_VM_UNMAP] -
                  before->calls[HIPPO_CALL_VM_UNMAP]);
}

/* After a call: which armed faults fired in it. */
static void faults_poll(fz *f) {
  hippo_emu_counters c;
  bool any = false;
  f->fired_now = 0;
  f->fired_kinds = 0;
  for (int k = 0; k < (int)HIPPO_CALL_KINDS; k++)
    any |= f->armed[k];
  if (!any)
    return;
  c = counters(f);
  for (int k = 0; k < (int)HIPPO_CALL_KINDS; k++)
    if (f->armed[k] && c.calls[k] >= f->target[k]) {
      f->armed[k] = false;
      f->fired_kinds |= UINT32_C(1) << k;
      f->fired_now |= HFZ_ST(f->fstatus[k]) | HFZ_ST(HIPPO_SUCCESS);
      f->fired_in_op = true;
      f->stats->faults_fired++;
    }
}

/* The checks make backend calls of their own: armed faults wait. */
static void faults_park(fz *f) {
  hippo_emu_counters c = counters(f);
  for (int k = 0; k < (int)HIPPO_CALL_KINDS; k++)
    if (f->armed[k]) {
      f->parked[k] = f->target[k] - c.calls[k];
      (void)drv_emu(f->api)->inject_fault(f->dev, k, 0, HIPPO_SUCCESS);
    }
}

static int faults_unpark(fz *f) {
  hippo_emu_counters c = counters(f);
  for (int k = 0; k < (int)HIPPO_CALL_KINDS; k++)
    if (f->armed[k]) {
      hippo_status st =
          drv_emu(f->api)->inject_fault(f->dev, k, f->parked[k], f->fstatus[k]);
      if (st != HIPPO_SUCCESS)
        return fail(f, "re-arming a fault: %s", f->api->last_error());
      f->target[k] = c.calls[k] + f->parked[k];
    }
  return 0;
}

/* ---- patterns -----------------------------------------------------------------
 * Byte i of a reservation with seed k is tab[(off(k) + i) mod P], P prime:
 * distinct seeds (below P) start at distinct offsets, so a byte that
 * landed in the wrong reservation shows.  A reservation up to DENSE bytes
 * holds its pattern in every byte; a larger one in stripes (STRIPE_BYTES
 * at the start of every STRIDE, and its last STRIPE_BYTES), so big slices
 * cost little to write and read while a misplaced or cut copy still shows. */

#define P 65521u
#define DENSE (256 * KiB)
#define STRIDE (64 * KiB)
#define STRIPE_BYTES 512u

static unsigned char tab[2 * P];

static void tab_init(void) {
  uint64_t x = 0x243F6A8885A308D3u;
  if (tab[0] || tab[1])
    return;
  for (unsigned i = 0; i < P; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    tab[i] = tab[i + P] = (unsigned char)(x >> 24);
  }
}

static uint64_t off_of(uint64_t seed) { return seed * 7919u % P; }

/* Segment k of a reservation of `size` bytes: false past the last. */
static bool segment(uint64_t size, uint64_t k, uint64_t *from, uint64_t *n) {
  uint64_t stripes = (size + STRIDE - 1) / STRIDE;
  if (size <= DENSE) {
    *from = 0;
    *n = size;
    return k == 0 && size;
  }
  if (k < stripes) {
    *from = k * STRIDE;
    *n = size - *from < STRIPE_BYTES ? size - *from : STRIPE_BYTES;
    return true;
  }
  *from = size - STRIPE_BYTES;
  *n = STRIPE_BYTES;
  return k == stripes;
}

static unsigned char *buffer(fz *f, uint64_t size) {
  if (size > f->bufcap) {
    unsigned char *b = realloc(f->buf, size);
    if (!b)
      return NULL;
    f->buf = b;
    f->bufcap = size;
  }
  return f->buf;
}

/* The pattern of `seed` for bytes [from, from+n) into b. */
static void pattern_fill(uint64_t seed, uint64_t from, unsigned char *b,
                         uint64_t n) {
  uint64_t o = (off_of(seed) + from) % P;
  while (n) {
    uint64_t chunk = n < P ? n : P;
    memcpy(b, tab + o, chunk);
    b += chunk;
    n -= chunk;
  }
}

static int write_pattern(fz *f, hfz_handle *x) {
  uint64_t from, n;
  for (uint64_t k = 0; segment(x->size, k, &from, &n); k++) {
    unsigned char *b = buffer(f, n);
    hippo_status st;
    if (!b)
      return fail(f, "no host memory for %" PRIu64 " B", n);
    pattern_fill(x->seed, from, b, n);
    st = drv_emu(f->api)->write(f->dev, (void *)(uintptr_t)(x->addr + from), b, n);
    if (st)
      return fail(f, "emu_write: %s", f->api->last_error());
  }
  return 0;
}

/* Bytes [from, from+n) of x hold its pattern. */
static int check_bytes(fz *f, const hfz_handle *x, uint64_t from,
                       uint64_t n) {
  unsigned char *b = buffer(f, 2 * n);
  hippo_status st;
  if (!b)
    return fail(f, "no host memory for %" PRIu64 " B", 2 * n);
  st = drv_emu(f->api)->read(f->dev, (const void *)(uintptr_t)(x->addr + from), b,
                        n);
  if (st)
    return fail(f, "emu_read: %s", f->api->last_error());
  f->stats->bytes_checked += n;
  pattern_fill(x->seed, from, b + n, n);
  if (memcmp(b, b + n, n) == 0)
    return 0;
  for (uint64_t i = 0;; i++)
    if (b[i] != b[n + i])
      return fail(f,
                  "byte %" PRIu64 " of reservation %#" PRIx64 " (%" PRIu64
                  " B at %#" PRIx64 ", stream %d) is %#x, its pattern says "
                  "%#x",
                  from + i, x->h, x->size, x->addr, x->stream, b[i],
                  b[n + i]);
}

/* Every patterned byte (full), or three windows: the start of the first
 * segment, of the middle one and the end of the last. */
static int check_slice(fz *f, const hfz_handle *x, bool full) {
  uint64_t from, n, last = 0;
  if (!x->size)
    return 0;
  if (full) {
    for (uint64_t k = 0; segment(x->size, k, &from, &n); k++)
      if (check_bytes(f, x, from, n))
        return -1;
    return 0;
  }
  if (x->size <= DENSE) {
    n = x->size < WINDOW ? x->size : WINDOW;
    return check_bytes(f, x, 0, n) ||
                   check_bytes(f, x, (x->size - n) / 2, n) ||
                   check_bytes(f, x, x->size - n, n)
               ? -1
               : 0;
  }
  while (segment(x->size, last + 1, &from, &n))
    last++;
  if (check_bytes(f, x, 0, WINDOW))
    return -1;
  segment(x->size, last / 2, &from, &n);
  if (check_bytes(f, x, from, n < WINDOW ? n : WINDOW))
    return -1;
  return check_bytes(f, x, x->size - WINDOW, WINDOW);
}

/* ---- the checks after every operation -------------------------------------- */

typedef struct span {
  uint64_t addr, size;
  hippo_handle h;
} span;

static int by_addr(const void *a, const void *b) {
  const span *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static hippo_usage usage_of(fz *f, hippo_stream *s, hippo_status *st) {
  hippo_usage u;
  memset(&u, 0, sizeof u);
  u.struct_size = sizeof u;
  *st = f->api->usage(f->dev, s, &u);
  f->stats->calls++;
  return u;
}

static int check_stream_figures(fz *f, int i, uint64_t *allocs,
                                uint64_t *bytes) {
  const hfz_stream *ms = &f->m.streams[i];
  hippo_status st;
  hippo_usage u = usage_of(f, ms->s, &st);
  uint64_t pool_bytes = 0;
  if (st)
    return fail(f, "usage(stream %d): %s", i, f->api->last_error());
  if (u.allocations != hfz_stream_count(&f->m, i) ||
      u.bytes_in_use != hfz_stream_bytes(&f->m, i))
    return fail(f,
                "stream %d: usage says %" PRIu64 " reservations, %" PRIu64
                " B; the model %" PRIu64 ", %" PRIu64 " B",
                i, u.allocations, u.bytes_in_use, hfz_stream_count(&f->m, i),
                hfz_stream_bytes(&f->m, i));
  if (u.peak_bytes_in_use != ms->peak)
    return fail(f, "stream %d: peak_bytes_in_use %" PRIu64 ", the model %" PRIu64,
                i, u.peak_bytes_in_use, ms->peak);
  for (uint32_t p = 0; p < u.pool_count; p++) {
    hippo_pool_report r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    st = f->api->pool_report(ms->s, p, &r, NULL);
    f->stats->calls++;
    if (st)
      return fail(f, "pool_report(%u): %s", p, f->api->last_error());
    /* fragmentation = 1 - largest_free / bytes_free stays in [0, 1]; a
     * VIRTUAL range's free room, unmapped granules included, is more */
    if (r.largest_free > r.bytes_free ||
        r.largest_free_range < r.largest_free)
      return fail(f,
                  "pool_report(%u): largest_free %" PRIu64 " B, bytes_free %"
                  PRIu64 " B, largest_free_range %" PRIu64 " B",
                  p, r.largest_free, r.bytes_free, r.largest_free_range);
    pool_bytes += r.bytes_in_use;
  }
  if (pool_bytes != u.bytes_in_use)
    return fail(f, "stream %d: its pools hold %" PRIu64 " B in use, usage %" PRIu64,
                i, pool_bytes, u.bytes_in_use);
  *allocs += u.allocations;
  *bytes += u.bytes_in_use;
  return 0;
}

static int verify(fz *f, bool full) {
  const hippo_api *api = f->api;
  span spans[HFZ_MAX_HANDLES];
  int n = 0;
  uint64_t allocs = 0, bytes = 0;
  hippo_status st = api->check(f->dev);
  hippo_usage du;
  char why[200];
  f->stats->calls++;
  if (st)
    return fail(f, "check: %s", api->last_error());
  if (hfz_model_check(&f->m, why, sizeof why))
    return fail(f, "%s", why);
  for (int i = 0; i < HFZ_MAX_STREAMS; i++)
    if (f->m.streams[i].attached && check_stream_figures(f, i, &allocs, &bytes))
      return -1;
  du = usage_of(f, NULL, &st);
  if (st)
    return fail(f, "usage(device): %s", api->last_error());
  if (du.allocations != allocs || du.bytes_in_use != bytes)
    return fail(f, "device usage %" PRIu64 " reservations, %" PRIu64
                " B; its streams %" PRIu64 ", %" PRIu64 " B",
                du.allocations, du.bytes_in_use, allocs, bytes);
  if (du.slices_guarded != hfz_guard_holds(&f->m))
    return fail(f, "slices_guarded %" PRIu64 ", the model's holds %" PRIu64,
                du.slices_guarded, hfz_guard_holds(&f->m));
  /* bytes_guarded counts released slices a graph holds, nothing else;
   * bytes_waiting those only record_use users hold (issue 30) */
  if (!f->m.ranges_lost && (du.bytes_guarded == 0) != (f->m.nranges == 0))
    return fail(f, "bytes_guarded %" PRIu64 " with %d released ranges "
                "graphs guard in the model",
                du.bytes_guarded, f->m.nranges);
  if (du.bytes_waiting && (!du.slices_waiting || !f->m.holds_maybe))
    return fail(f, "bytes_waiting %" PRIu64 " with %" PRIu64 " waiting "
                "slices (record_use'd slices released: %d)",
                du.bytes_waiting, du.slices_waiting, f->m.holds_maybe);
  f->stats->slices_moved = du.slices_relocated;
  for (int i = 0; i < HFZ_MAX_HANDLES; i++) {
    hfz_handle *x = &f->m.handles[i];
    const hfz_stream *ms;
    uint64_t addr = x->addr, size = x->size;
    bool moved;
    if (!x->h)
      continue;
    ms = &f->m.streams[x->stream];
    /* a capturing stream's resolve would guard the slice: nothing moves
     * during a capture, so its last address holds */
    if (ms->graph < 0) {
      void *p = NULL;
      st = api->resolve(ms->s, x->h, &p, &size);
      f->stats->calls++;
      if (st)
        return fail(f, "resolve(%#" PRIx64 ") of a live reservation: %s: %s",
                    x->h, api->status_name(st), api->last_error());
      addr = (uint64_t)(uintptr_t)p;
    }
    if (size != x->size)
      return fail(f, "reservation %#" PRIx64 " resolves to %" PRIu64
                  " B, reserved %" PRIu64,
                  x->h, size, x->size);
    if (x->size == 0 && addr != 0)
      return fail(f, "a zero-size reservation resolves to %#" PRIx64, addr);
    moved = addr != x->addr;
    if (moved && (x->guards || x->users))
      return fail(f,
                  "reservation %#" PRIx64 " moved from %#" PRIx64 " to %#" PRIx64
                  " while %s",
                  x->h, x->addr, addr,
                  x->guards ? "a graph guards it" : "another stream uses it");
    x->addr = addr;
    if (check_slice(f, x, full || moved))
      return -1;
    if (x->size)
      spans[n++] = (span){x->addr, x->size, x->h};
  }
  qsort(spans, n, sizeof *spans, by_addr);
  for (int i = 1; i < n; i++)
    if (spans[i - 1].addr + spans[i - 1].size > spans[i].addr)
      return fail(f,
                  "reservations %#" PRIx64 " [%#" PRIx64 ", +%" PRIu64
                  ") and %#" PRIx64 " [%#" PRIx64 ", +%" PRIu64 ") overlap",
                  spans[i - 1].h, spans[i - 1].addr, spans[i - 1].size,
                  spans[i].h, spans[i].addr, spans[i].size);
  return 0;
}

/* ---- picking -------------------------------------------------------------- */

static int pick_stream(fz *f, rd *r) {
  int want = u8(r) % HFZ_MAX_STREAMS;
  for (int k = 0; k < HFZ_MAX_STREAMS; k++) {
    int i = (want + k) % HFZ_MAX_STREAMS;
    if (f->m.streams[i].attached)
      return i;
  }
  return -1;
}

static hfz_handle *pick_handle(fz *f, rd *r) {
  int want = u8(r) % HFZ_MAX_HANDLES;
  for (int k = 0; k < HFZ_MAX_HANDLES; k++) {
    hfz_handle *x = &f->m.handles[(want + k) % HFZ_MAX_HANDLES];
    if (x->h)
      return x;
  }
  return NULL;
}

/* A (stream, handle) pair for release, resolve and record_use: mostly a
 * live reservation on its stream; sometimes a hostile one, with the
 * status it must get. */
typedef struct target {
  hippo_stream *s;
  hippo_handle h;
  hfz_handle *x;      /* the live reservation, when it is one */
  hippo_status want;  /* otherwise */
} target;

static bool pick_target(fz *f, rd *r, target *t) {
  uint8_t v = u8(r);
  hfz_handle *x = pick_handle(f, r);
  int other = pick_stream(f, r);
  memset(t, 0, sizeof *t);
  t->want = HIPPO_INVALID_HANDLE;
  if (v < 208) {
    if (!x)
      return false;
    t->x = x;
    t->s = f->m.streams[x->stream].s;
    t->h = x->h;
    t->want = HIPPO_SUCCESS;
    return true;
  }
  if (other < 0)
    return false;
  t->s = f->m.streams[other].s;
  if (v < 220) { /* another stream's reservation */
    if (!x || x->stream == other)
      return false;
    t->h = x->h;
  } else if (v < 236) { /* released */
    if (!f->m.nstale)
      return false;
    t->h = f->m.stale[u8(r) % (f->m.nstale < HFZ_MAX_STALE ? f->m.nstale
                                                           : HFZ_MAX_STALE)];
  } else if (v < 244) { /* forged */
    t->h = u64(r);
    if (x && t->h == x->h + 1)
      t->h = 0;
    if (hfz_handle_find(&f->m, t->h))
      return false;
  } else if (v < 248) {
    t->h = 0;
  } else if (v < 252) { /* a detached stream */
    if (!f->ndead || !x)
      return false;
    t->s = f->dead[u8(r) % f->ndead];
    t->h = x->h;
    t->want = HIPPO_INVALID_ARGUMENT;
  } else {
    if (!x)
      return false;
    t->s = NULL;
    t->h = x->h;
    t->want = HIPPO_INVALID_ARGUMENT;
  }
  return true;
}

/* ---- layouts -------------------------------------------------------------- */

typedef struct layout_buf {
  hippo_layout l;
  hippo_pool_options pools[4];
  hippo_status want; /* HIPPO_POOL_CONFIG for a layout made wrong */
} layout_buf;

static uint64_t pow2_at_least(uint64_t x) {
  uint64_t p = 1;
  while (p < x)
    p <<= 1;
  return p;
}

/* A layout from the input: a preset, a valid custom layout of up to four
 * pools, or (rarely) one with a field made wrong. */
static const hippo_layout *decode_layout(fz *f, rd *r, bool install,
                                         layout_buf *lb,
                                         hfz_layout_facts *facts) {
  uint64_t cap = f->m.capacity, a = f->m.alignment;
  uint64_t floor_page = pow2_at_least(cap >> 22);
  uint8_t v = u8(r);
  memset(lb, 0, sizeof *lb);
  memset(facts, 0, sizeof *facts);
  lb->l.struct_size = sizeof lb->l;
  lb->want = HIPPO_SUCCESS;
  facts->largest = cap & ~(a - 1);
  facts->page_max = cap / 4;
  if (v % 8 < 4) {
    facts->arena = v % 8 == 0 || v % 8 == 3;
    if (v % 8 == 0 && !install)
      return NULL; /* the default, ADAPTIVE (device_open only) */
    lb->l.preset = v % 8 == 1   ? HIPPO_PRESET_SUB_SLICES
                   : v % 8 == 2 ? HIPPO_PRESET_EXCLUSIVE_PAGES
                                : HIPPO_PRESET_ADAPTIVE;
    if (v % 8 == 2 && (v >> 3) % 2) { /* one VIRTUAL pool for all */
      lb->l.preset = HIPPO_PRESET_VIRTUAL;
      facts->virt = true;
    }
    return &lb->l;
  }
  lb->l.preset = HIPPO_PRESET_CUSTOM;
  lb->l.pool_count = 1 + u8(r) % 4;
  lb->l.pool_options_size = sizeof(hippo_pool_options);
  lb->l.pools = lb->pools;
  facts->largest = 0;
  facts->page_max = 0;
  for (uint32_t i = 0; i < lb->l.pool_count; i++) {
    hippo_pool_options *o = &lb->pools[i];
    uint64_t page;
    uint8_t k = u8(r);
    o->struct_size = sizeof *o;
    switch (k % 4 == 3 && (k >> 2) % 4 == 0 ? 4 : k % 4) {
    case 0:
      o->kind = HIPPO_POOL_SLICED;
      page = a << (4 + u8(r) % 10);
      page = page < floor_page ? floor_page : page;
      page = page > cap / 2 ? cap / 2 : page;
      page = page < a ? a : page;
      o->page_size = page;
      o->max_slice_size = page >> (u8(r) % 4);
      o->max_slice_size = o->max_slice_size < a ? a : o->max_slice_size;
      if (u8(r) % 3 == 0) {
        o->max_pool_size = page * (1 + u8(r) % 8);
        facts->capped = true;
      }
      facts->largest = o->max_slice_size > facts->largest ? o->max_slice_size
                                                          : facts->largest;
      facts->page_max = page > facts->page_max ? page : facts->page_max;
      break;
    case 1:
      o->kind = HIPPO_POOL_EXCLUSIVE;
      o->max_alloc_size = a << (u8(r) % 16);
      o->max_alloc_size = o->max_alloc_size > cap ? cap : o->max_alloc_size;
      facts->largest = o->max_alloc_size > facts->largest ? o->max_alloc_size
                                                          : facts->largest;
      break;
    case 2:
      o->kind = HIPPO_POOL_DIRECT;
      o->reclaim_at = u8(r) % 2 ? 0 : (u8(r) % 8) * MiB;
      facts->largest = cap & ~(a - 1);
      break;
    case 4: /* granules of 2 MiB (the default) over a range of the device's
             * size or of 1 to 8 granules; slices up to the range or less */
      o->kind = HIPPO_POOL_VIRTUAL;
      o->range_size = u8(r) % 2 ? 0 : (1 + u8(r) % 8) * 2 * MiB;
      o->max_slice_size = u8(r) % 2 ? 0 : a << (u8(r) % 16);
      if (u8(r) % 2)
        o->unmap_threshold = (u8(r) % 4) * 2 * MiB;
      if (u8(r) % 3 == 0) /* a map budget: none, or 0.01 % to 4 % */
        o->map_budget = u8(r) % 2 ? UINT64_MAX : 1 + u8(r) % 400;
      {
        uint64_t range = o->range_size ? o->range_size : cap;
        uint64_t top;
        if (o->max_slice_size > range)
          o->max_slice_size = range & ~(a - 1);
        top = o->max_slice_size ? o->max_slice_size : range;
        facts->largest = top > facts->largest ? top : facts->largest;
      }
      facts->virt = true;
      break;
    default:
      o->kind = HIPPO_POOL_ARENA;
      page = a << (4 + u8(r) % 8);
      page = page < floor_page ? floor_page : page;
      page = page > cap / 4 ? cap / 4 : page;
      page = page < a ? a : page;
      o->page_size = page;
      o->max_slice_size = page << (u8(r) % 6);
      o->max_slice_size = o->max_slice_size > cap / 2
                              ? (cap / 2) & ~(a - 1) /* the largest page */
                              : o->max_slice_size;
      o->max_slice_size =
          o->max_slice_size < page ? page : o->max_slice_size;
      if (u8(r) % 3 == 0) {
        o->max_pool_size = page * (2 + u8(r) % 8);
        facts->capped = true;
      }
      facts->arena = true;
      facts->largest = o->max_slice_size > facts->largest ? o->max_slice_size
                                                          : facts->largest;
      facts->page_max = o->max_slice_size > facts->page_max
                            ? o->max_slice_size
                            : facts->page_max;
      break;
    }
    if (u8(r) % 4 == 0 && o->kind != HIPPO_POOL_VIRTUAL)
      o->dealloc_period = 1 + u8(r) % 64;
  }
  if (u8(r) % 16 == 0) { /* one field made wrong */
    hippo_pool_options *o = &lb->pools[u8(r) % lb->l.pool_count];
    bool sliced = o->kind == HIPPO_POOL_SLICED || o->kind == HIPPO_POOL_ARENA;
    switch (u8(r) % 4) {
    case 0: /* no such kind */
      o->kind = 77;
      break;
    case 1: /* a size field 0, or a field the kind does not use */
      if (sliced)
        o->page_size = 0;
      else if (o->kind == HIPPO_POOL_EXCLUSIVE)
        o->max_alloc_size = 0;
      else
        o->page_size = a;
      break;
    case 2: /* a slice above its page, an arena above the device */
      if (o->kind == HIPPO_POOL_SLICED)
        o->max_slice_size = o->page_size + a;
      else if (o->kind == HIPPO_POOL_ARENA)
        o->max_slice_size = cap * 2;
      else if (o->kind == HIPPO_POOL_VIRTUAL) /* a range, a granule or a
                                                 slice above the device */
        *(u8(r) % 3 == 0   ? &o->range_size
          : u8(r) % 2 == 0 ? &o->granule
                           : &o->max_slice_size) =
            pow2_at_least(cap) * 2;
      else if (o->kind == HIPPO_POOL_EXCLUSIVE)
        o->reclaim_at = 1;
      else
        o->max_alloc_size = 1;
      break;
    default:
      lb->l.pool_count = 0;
      break;
    }
    lb->want = HIPPO_POOL_CONFIG;
  }
  return &lb->l;
}

/* ---- operations ------------------------------------------------------------ */

/* Sizes: mostly small, some large, a few absurd. */
static uint64_t decode_size(fz *f, rd *r) {
  uint8_t v = u8(r);
  uint64_t cap = f->m.capacity, a = f->m.alignment;
  if (v < 140)
    return 1 + u16(r) % (4 * KiB);
  if (v < 200)
    return 1 + u16(r) * 16 % (64 * KiB);
  if (v < 230)
    return 1 + (u16(r) << 4) % MiB;
  if (v < 242)
    return 1 + ((u16(r) << 7) | u8(r)) % (8 * MiB);
  if (v < 248)
    return 0;
  switch (v) {
  case 248: /* the whole device (a small one) */
    return cap <= 256 * MiB ? cap : 1 + u16(r);
  case 249:
    return cap + 1;
  case 250:
    return UINT64_MAX;
  case 251:
    return UINT64_MAX - a + 2; /* overflows when aligned */
  case 252:
    return (UINT64_C(1) << 63) + 1;
  default:
    return 1 + ((u16(r) << 9) | u8(r)) % (32 * MiB);
  }
}

static int op_reserve(fz *f, rd *r) {
  int i = pick_stream(f, r);
  uint64_t size = decode_size(f, r);
  uint8_t mv = u8(r), twin = u8(r);
  hippo_mode mode = mv < 208   ? HIPPO_MODE_AUTO
                    : mv < 252 ? HIPPO_MODE_PERSISTENT
                               : 2u + mv;
  hippo_handle h = 0;
  hfz_statuses ok;
  hippo_status st;
  hfz_handle *x;
  hippo_emu_counters before;
  if (i < 0 || !(x = hfz_handle_add(&f->m)))
    return 0;
  before = counters(f);
  ok = hfz_expect_reserve(&f->m, i, size, mode, before.bytes_held);
  st = f->api->reserve(f->m.streams[i].s, size, mode, &h);
  faults_poll(f);
  if (expect(f, "reserve", st, ok))
    return -1;
  /* not even to undo a map that failed part-way (issue 27) */
  if (kept_while_capturing(f, "reserve", &before))
    return -1;
  if (st != HIPPO_SUCCESS)
    return 0;
  if (h == 0 || hfz_handle_find(&f->m, h))
    return fail(f, "reserve gave handle %#" PRIx64 ", %s", h,
                h ? "already live" : "0");
  x->h = h;
  x->stream = i;
  x->size = size;
  x->persistent = mode == HIPPO_MODE_PERSISTENT || f->m.streams[i].depth;
  x->seed = f->next_seed++;
  if (twin % 4 == 0) { /* the same pattern as another reservation */
    hfz_handle *y = pick_handle(f, r);
    if (y && y != x)
      x->seed = y->seed;
  }
  hfz_touch(&f->m, x);
  if (hfz_stream_bytes(&f->m, i) > f->m.streams[i].peak)
    f->m.streams[i].peak = hfz_stream_bytes(&f->m, i);
  faults_park(f);
  if (size) {
    void *p = NULL;
    uint64_t got = 0;
    const hfz_range *g;
    st = f->api->resolve(f->m.streams[i].s, h, &p, &got);
    if (st || got != size)
      return fail(f, "resolve of a new reservation: %s, %" PRIu64 " B",
                  f->api->last_error(), got);
    x->addr = (uint64_t)(uintptr_t)p;
    if ((g = hfz_guarded_overlap(&f->m, x->addr, size)))
      return fail(f,
                  "new reservation [%#" PRIx64 ", +%" PRIu64
                  ") overlaps released bytes [%#" PRIx64 ", +%" PRIu64
                  ") a graph still guards",
                  x->addr, size, g->addr, g->size);
    if (write_pattern(f, x))
      return -1;
  }
  return PARKED;
}

static int op_release(fz *f, rd *r) {
  target t;
  hippo_status st;
  if (!pick_target(f, r, &t))
    return 0;
  st = f->api->release(t.s, t.h);
  faults_poll(f);
  if (expect(f, "release", st, HFZ_ST(t.want)))
    return -1;
  if (st == HIPPO_SUCCESS)
    hfz_release(&f->m, t.x);
  return 0;
}

static int op_resolve(fz *f, rd *r) {
  target t;
  void *p = NULL;
  uint64_t size = 0;
  bool rewrite = u8(r) % 2;
  hippo_status st;
  if (!pick_target(f, r, &t))
    return 0;
  st = f->api->resolve(t.s, t.h, &p, u8(r) % 4 ? &size : NULL);
  faults_poll(f);
  if (expect(f, "resolve", st, HFZ_ST(t.want)))
    return -1;
  if (st != HIPPO_SUCCESS)
    return 0;
  hfz_touch(&f->m, t.x);
  /* a new pattern, unless another stream's queued copies use the bytes */
  if (rewrite && !t.x->users && t.x->size) {
    t.x->seed = f->next_seed++;
    t.x->addr = (uint64_t)(uintptr_t)p;
    faults_park(f);
    if (write_pattern(f, t.x))
      return -1;
    return PARKED;
  }
  return 0;
}

static int op_attach(fz *f, rd *r) {
  uint8_t v = u8(r);
  int i = hfz_stream_free_slot(&f->m);
  void *native = NULL;
  hippo_stream *s = NULL;
  hippo_status st;
  bool dflt = v < 24;
  bool taken = false;
  if (i < 0)
    return 0;
  for (int k = 0; k < HFZ_MAX_STREAMS; k++)
    if (f->m.streams[k].attached && !f->m.streams[k].native)
      taken = true;
  if (v >= 24 && v < 32) { /* a native stream attached already */
    int j = pick_stream(f, r);
    if (j < 0)
      return 0;
    st = f->api->stream_attach(f->dev, f->m.streams[j].native, &s);
    faults_poll(f);
    return expect(f, "stream_attach (attached already)", st,
                  HFZ_ST(HIPPO_BUSY));
  }
  if (!dflt) {
    st = drv_emu(f->api)->stream_create(f->dev, &native);
    if (expect(f, "emu_stream_create", st, HFZ_ST(HIPPO_SUCCESS)))
      return -1;
  }
  st = f->api->stream_attach(f->dev, native, &s);
  faults_poll(f);
  if (expect(f, "stream_attach", st,
             HFZ_ST(dflt && taken ? HIPPO_BUSY : HIPPO_SUCCESS)))
    return -1;
  if (st != HIPPO_SUCCESS) {
    if (native && drv_emu(f->api)->stream_destroy(f->dev, native))
      return fail(f, "emu_stream_destroy: %s", f->api->last_error());
    return 0;
  }
  memset(&f->m.streams[i], 0, sizeof f->m.streams[i]);
  f->m.streams[i].attached = true;
  f->m.streams[i].native = native;
  f->m.streams[i].s = s;
  f->m.streams[i].graph = -1;
  return 0;
}

static int op_detach(fz *f, rd *r) {
  int i = pick_stream(f, r);
  hfz_stream *ms;
  hippo_status st;
  if (i < 0)
    return 0;
  ms = &f->m.streams[i];
  st = f->api->stream_detach(ms->s);
  faults_poll(f);
  if (expect(f, "stream_detach", st,
             HFZ_ST(hfz_any_capturing(&f->m) ? HIPPO_GRAPH_RECORDING
                                             : HIPPO_SUCCESS)))
    return -1;
  if (st == HIPPO_GRAPH_RECORDING)
    return 0;
  if (st != HIPPO_SUCCESS) { /* a fault: released all, or nothing */
    hippo_usage u = usage_of(f, ms->s, &st);
    if (st)
      return fail(f, "usage after a failed detach: %s", f->api->last_error());
    if (u.allocations == 0) /* still attached: its uses stay (seed 161) */
      hfz_stream_release_all(&f->m, i);
    else if (u.allocations != hfz_stream_count(&f->m, i))
      return fail(f, "a failed detach left %" PRIu64 " of %" PRIu64
                  " reservations",
                  u.allocations, hfz_stream_count(&f->m, i));
    return 0;
  }
  hfz_stream_drop(&f->m, i);
  if (f->ndead < MAX_DEAD)
    f->dead[f->ndead++] = ms->s;
  else
    f->dead[f->stats->ops % MAX_DEAD] = ms->s;
  if (ms->native) {
    st = drv_emu(f->api)->stream_destroy(f->dev, ms->native);
    if (expect(f, "emu_stream_destroy", st, HFZ_ST(HIPPO_SUCCESS)))
      return -1;
  }
  memset(ms, 0, sizeof *ms);
  ms->graph = -1;
  return 0;
}

/* record_use, and sometimes a queued copy between two twins the user
 * stream uses. */
static int op_record_use(fz *f, rd *r) {
  target t;
  uint8_t v = u8(r);
  int u = pick_stream(f, r);
  hippo_stream *user;
  hippo_status want, st;
  if (!pick_target(f, r, &t) || u < 0)
    return 0;
  user = f->m.streams[u].s;
  want = t.want;
  if (want == HIPPO_SUCCESS && v >= 240) {
    user = v < 248 && f->ndead ? f->dead[v % f->ndead] : NULL;
    want = HIPPO_INVALID_ARGUMENT;
  }
  st = f->api->record_use(t.s, t.h, user);
  faults_poll(f);
  if (expect(f, "record_use", st, HFZ_ST(want)))
    return -1;
  if (st != HIPPO_SUCCESS || t.x->stream == u || !t.x->size)
    return 0;
  if (f->m.streams[u].graph >= 0) { /* the user's graph guards it */
    t.x->guards |= UINT64_C(1) << f->m.streams[u].graph;
    f->m.graphs[f->m.streams[u].graph].known = HFZ_KNOWN;
    return 0;
  }
  t.x->users |= UINT32_C(1) << u;
  if (v % 2 == 0 && f->m.streams[u].native) {
    hfz_handle *y = NULL;
    for (int k = 0; k < HFZ_MAX_HANDLES && !y; k++) {
      hfz_handle *c = &f->m.handles[k];
      /* the same pattern, patterned in the same bytes */
      if (c->h && c != t.x && c->seed == t.x->seed && c->size &&
          (c->size == t.x->size || (c->size <= DENSE && t.x->size <= DENSE)) &&
          (c->users >> u & 1))
        y = c;
    }
    if (y) {
      uint64_t n = y->size < t.x->size ? y->size : t.x->size;
      st = drv_emu(f->api)->copy(f->dev, f->m.streams[u].native,
                            (void *)(uintptr_t)t.x->addr,
                            (const void *)(uintptr_t)y->addr, n);
      faults_poll(f);
      if (expect(f, "emu_copy", st, HFZ_ST(HIPPO_SUCCESS)))
        return -1;
    }
  }
  return 0;
}

static int op_sync(fz *f, rd *r) {
  int i = pick_stream(f, r);
  hippo_status st;
  if (i < 0)
    return 0;
  st = drv_emu(f->api)->stream_sync(f->dev, f->m.streams[i].native);
  faults_poll(f);
  return expect(f, "emu_stream_sync", st,
                HFZ_ST(f->m.streams[i].graph >= 0 ? HIPPO_BACKEND_ERROR
                                                  : HIPPO_SUCCESS));
}

static int op_persistent(fz *f, rd *r) {
  int i = pick_stream(f, r);
  hfz_stream *ms;
  hippo_status st;
  if (i < 0)
    return 0;
  ms = &f->m.streams[i];
  if (u8(r) % 2) {
    st = f->api->persistent_begin(ms->s);
    if (expect(f, "persistent_begin", st, HFZ_ST(HIPPO_SUCCESS)))
      return -1;
    ms->depth++;
    return 0;
  }
  st = f->api->persistent_end(ms->s);
  if (expect(f, "persistent_end", st,
             HFZ_ST(ms->depth ? HIPPO_SUCCESS : HIPPO_INVALID_ARGUMENT)))
    return -1;
  if (st == HIPPO_SUCCESS)
    ms->depth--;
  return 0;
}

static int op_install(fz *f, rd *r) {
  layout_buf lb;
  hfz_layout_facts facts;
  const hippo_layout *l = decode_layout(f, r, true, &lb, &facts);
  uint64_t live = hfz_dynamic_bytes(&f->m), told = 7;
  hippo_usage du;
  hfz_statuses ok;
  hippo_status st;
  du = usage_of(f, NULL, &st);
  if (st)
    return fail(f, "usage: %s", f->api->last_error());
  if (f->m.fixed_layout)
    ok = HFZ_ST(HIPPO_UNSUPPORTED);
  else if (lb.want != HIPPO_SUCCESS)
    ok = HFZ_ST(lb.want);
  else if (hfz_any_capturing(&f->m))
    ok = HFZ_ST(HIPPO_GRAPH_RECORDING);
  else if (live)
    ok = HFZ_ST(HIPPO_POOLS_IN_USE);
  else if (hfz_dynamic_guards(&f->m) || du.slices_waiting ||
           du.bytes_stranded)
    ok = HFZ_ST(HIPPO_SUCCESS) | HFZ_ST(HIPPO_POOLS_IN_USE);
  else
    ok = HFZ_ST(HIPPO_SUCCESS);
  st = f->api->pools_install(f->dev, l, &told);
  faults_poll(f);
  if (expect(f, "pools_install", st, ok))
    return -1;
  if (st == HIPPO_POOLS_IN_USE && told != live)
    return fail(f, "pools_install says %" PRIu64 " B in use, the model %" PRIu64,
                told, live);
  if (st == HIPPO_SUCCESS) {
    f->m.lay[0] = facts;
    f->m.nlay = 1;
  } else if (f->fired_now && !(st == HIPPO_POOLS_IN_USE ||
                               st == HIPPO_GRAPH_RECORDING ||
                               st == HIPPO_POOL_CONFIG ||
                               st == HIPPO_UNSUPPORTED)) {
    /* a fault: the old layout or the new one (figures settle it later) */
    f->m.lay[1] = facts;
    f->m.nlay = 2;
  }
  return 0;
}

static int op_relocate(fz *f, rd *r) {
  uint8_t v = u8(r), reason = u8(r) % 8;
  int i = pick_stream(f, r);
  hippo_stream *s = i >= 0 ? f->m.streams[i].s : NULL;
  bool all = u8(r) % 3 == 0 || !s;
  bool capturing = hfz_any_capturing(&f->m);
  hippo_relocation_report rep;
  hippo_status st;
  memset(&rep, 0, sizeof rep);
  rep.struct_size = sizeof rep;
  switch (v % 6) {
  case 0:
    if (!s)
      return 0;
    st = f->api->relocate(s);
    faults_poll(f);
    return expect(f, "relocate", st, HFZ_ST(HIPPO_SUCCESS)) ? -1 : FULL;
  case 1:
    if (!s)
      return 0;
    st = f->api->relocate_when_wanted(s);
    faults_poll(f);
    return expect(f, "relocate_when_wanted", st, HFZ_ST(HIPPO_SUCCESS))
               ? -1
               : FULL;
  case 2:
    st = f->api->relocate_device(f->dev);
    faults_poll(f);
    return expect(f, "relocate_device", st, HFZ_ST(HIPPO_SUCCESS)) ? -1
                                                                    : FULL;
  case 3:
    st = f->api->relocate_with(f->dev, all ? NULL : s, reason,
                               u8(r) % 2 ? &rep : NULL);
    faults_poll(f);
    if (expect(f, "relocate_with", st,
               HFZ_ST(reason > HIPPO_RELOCATE_UNMAP ? HIPPO_INVALID_ARGUMENT
                                                     : HIPPO_SUCCESS)))
      return -1;
    if (st == HIPPO_SUCCESS && rep.outcome > HIPPO_RELOCATION_FAILED)
      return fail(f, "relocate_with: outcome %u", rep.outcome);
    if (st == HIPPO_SUCCESS && capturing && rep.struct_size &&
        rep.outcome != HIPPO_RELOCATION_RECORDING &&
        rep.outcome != HIPPO_RELOCATION_NONE && rep.slices_moved)
      return fail(f, "relocate_with moved %" PRIu64 " slices during a capture",
                  rep.slices_moved);
    return FULL;
  case 4:
    st = f->api->reclaim(f->dev, all ? NULL : s);
    faults_poll(f);
    return expect(f, "reclaim", st,
                  HFZ_ST(capturing ? HIPPO_GRAPH_RECORDING : HIPPO_SUCCESS))
               ? -1
               : FULL;
  default:
    st = f->api->cleanup(f->dev, all ? NULL : s);
    faults_poll(f);
    return expect(f, "cleanup", st,
                  HFZ_ST(capturing ? HIPPO_GRAPH_RECORDING : HIPPO_SUCCESS))
               ? -1
               : FULL;
  }
}

/* An announcement the protocol makes; a fault in it is retried once. */
static int announce(fz *f, hfz_stream *ms, hippo_capture_announcement what) {
  hippo_status st = f->api->capture_announce(ms->s, what);
  faults_poll(f);
  if (st != HIPPO_SUCCESS && f->fired_now) {
    st = f->api->capture_announce(ms->s, what);
    faults_poll(f);
  }
  return expect(f, "capture_announce", st, HFZ_ST(HIPPO_SUCCESS));
}

static int op_capture(fz *f, rd *r) {
  int i = pick_stream(f, r);
  hfz_stream *ms;
  hippo_status st;
  uint64_t id = 0;
  if (i < 0)
    return 0;
  ms = &f->m.streams[i];
  if (ms->graph >= 0) {
    st = drv_emu(f->api)->capture_end(f->dev, ms->native);
    if (expect(f, "emu_capture_end", st, HFZ_ST(HIPPO_SUCCESS)))
      return -1;
    hfz_graph_end(&f->m, i);
    return ms->mode == HFZ_ANNOUNCED ? announce(f, ms, HIPPO_CAPTURE_ENDED)
                                     : 0;
  }
  if (u8(r) % 8 == 0) { /* ending a capture that is not */
    st = drv_emu(f->api)->capture_end(f->dev, ms->native);
    return expect(f, "emu_capture_end (none)", st,
                  HFZ_ST(HIPPO_INVALID_ARGUMENT));
  }
  if (!ms->native) { /* the default stream cannot capture */
    st = drv_emu(f->api)->capture_begin(f->dev, NULL, &id);
    return expect(f, "emu_capture_begin (default)", st,
                  HFZ_ST(HIPPO_INVALID_ARGUMENT));
  }
  for (int g = 0; g < HFZ_MAX_GRAPHS; g++)
    if (!f->m.graphs[g].used)
      goto room;
  return 0;
room:
  st = drv_emu(f->api)->capture_begin(f->dev, ms->native, &id);
  if (expect(f, "emu_capture_begin", st, HFZ_ST(HIPPO_SUCCESS)))
    return -1;
  hfz_graph_begin(&f->m, i, id);
  if (f->trace)
    fprintf(stderr, "hfz capture stream %d id %" PRIu64 "\n", i, id);
  f->stats->captures++;
  return ms->mode == HFZ_ANNOUNCED ? announce(f, ms, HIPPO_CAPTURE_BEGINS) : 0;
}

static int retire(fz *f, int g) {
  hfz_graph *gr = &f->m.graphs[g];
  hippo_emu_counters before = counters(f);
  hippo_status st = f->api->graph_retire(f->dev, gr->id);
  hfz_statuses ok = gr->known == HFZ_KNOWN ? HFZ_ST(HIPPO_SUCCESS)
                    : gr->known == HFZ_UNKNOWN
                        ? HFZ_ST(HIPPO_INVALID_ARGUMENT)
                        : HFZ_ST(HIPPO_SUCCESS) | HFZ_ST(HIPPO_INVALID_ARGUMENT);
  faults_poll(f);
  if (f->trace)
    fprintf(stderr, "hfz retire slot %d id %" PRIu64 " known %d stream %d\n",
            g, gr->id, gr->known, gr->stream);
  if (gr->stream >= 0) { /* its capture still records: nothing goes */
    hfz_statuses rec =
        gr->known == HFZ_KNOWN     ? HFZ_ST(HIPPO_GRAPH_RECORDING)
        : gr->known == HFZ_UNKNOWN ? HFZ_ST(HIPPO_INVALID_ARGUMENT)
                                   : HFZ_ST(HIPPO_GRAPH_RECORDING) |
                                         HFZ_ST(HIPPO_INVALID_ARGUMENT);
    if (expect(f, "graph_retire (recording)", st, rec))
      return -1;
    if (st == HIPPO_GRAPH_RECORDING) /* hippo guards something under it */
      gr->known = HFZ_KNOWN;
    return 0;
  }
  if (expect(f, "graph_retire", st, ok))
    return -1;
  /* hippo frees nothing while a stream of the device captures: a
   * retained page waits for a later retire, cleanup or detach (issue 30) */
  if (kept_while_capturing(f, "graph_retire", &before))
    return -1;
  if (st == HIPPO_SUCCESS)
    gr->known = HFZ_KNOWN;
  else if (st != HIPPO_INVALID_ARGUMENT)
    return 0; /* a fault failed the capture question: nothing changed */
  hfz_graph_retired(&f->m, g);
  return 0;
}

static int op_retire(fz *f, rd *r) {
  uint8_t v = u8(r);
  if (v >= 240) { /* an id hippo never saw */
    hippo_status st = f->api->graph_retire(f->dev, v == 240 ? 0 : u64(r) | 1ull << 62);
    return expect(f, "graph_retire (unknown id)", st,
                  HFZ_ST(HIPPO_INVALID_ARGUMENT));
  }
  for (int k = 0; k < HFZ_MAX_GRAPHS; k++) {
    int g = (v + k) % HFZ_MAX_GRAPHS;
    if (f->m.graphs[g].used)
      return retire(f, g);
  }
  return 0;
}

static int op_fault(fz *f, rd *r) {
  uint8_t v = u8(r);
  hippo_call_kind kind = v % HIPPO_CALL_KINDS;
  uint64_t nth = 1 + u8(r) % 12;
  hippo_status status = u8(r) % 2 ? HIPPO_BACKEND_ERROR : HIPPO_OUT_OF_MEMORY;
  hippo_status st;
  if (v >= 250) { /* refused, changing nothing: an unknown kind, or a
                   * success to inject */
    st = v % 2 ? drv_emu(f->api)->inject_fault(f->dev, HIPPO_CALL_KINDS + v % 7, 1,
                                          status)
               : drv_emu(f->api)->inject_fault(f->dev, kind, 1, HIPPO_SUCCESS);
    return expect(f, "emu_inject_fault (bad)", st,
                  HFZ_ST(HIPPO_INVALID_ARGUMENT));
  }
  if (f->armed[kind]) {
    if (v % 2)
      return 0;
    st = drv_emu(f->api)->inject_fault(f->dev, kind, 0, HIPPO_SUCCESS);
    if (expect(f, "emu_inject_fault (clear)", st, HFZ_ST(HIPPO_SUCCESS)))
      return -1;
    f->armed[kind] = false;
    return 0;
  }
  st = drv_emu(f->api)->inject_fault(f->dev, kind, nth, status);
  if (expect(f, "emu_inject_fault", st, HFZ_ST(HIPPO_SUCCESS)))
    return -1;
  f->armed[kind] = true;
  f->fstatus[kind] = status;
  f->target[kind] = counters(f).calls[kind] + nth;
  f->stats->faults_armed++;
  return 0;
}

static int op_announce(fz *f, rd *r) {
  int i = pick_stream(f, r);
  uint8_t v = u8(r);
  hfz_stream *ms;
  hippo_status st;
  bool capturing;
  if (i < 0)
    return 0;
  ms = &f->m.streams[i];
  capturing = ms->graph >= 0;
  if (v % 4 == 3) {
    st = f->api->capture_announce(ms->s, 3 + v);
    return expect(f, "capture_announce(bad)", st,
                  HFZ_ST(HIPPO_INVALID_ARGUMENT));
  }
  {
    /* QUERY: ask the driver; BEGINS only while capturing; ENDED only
     * while not */
    static const struct {
      hippo_capture_announcement what;
      const char *name;
      hippo_status idle, capturing;
      enum hfz_capture_mode mode;
    } row[3] = {
        {HIPPO_CAPTURE_QUERY, "capture_announce(QUERY)", HIPPO_SUCCESS,
         HIPPO_SUCCESS, HFZ_ASK},
        {HIPPO_CAPTURE_BEGINS, "capture_announce(BEGINS)",
         HIPPO_INVALID_ARGUMENT, HIPPO_SUCCESS, HFZ_ANNOUNCED},
        {HIPPO_CAPTURE_ENDED, "capture_announce(ENDED)", HIPPO_SUCCESS,
         HIPPO_GRAPH_RECORDING, HFZ_ANNOUNCED},
    };
    unsigned k = v % 4;
    st = f->api->capture_announce(ms->s, row[k].what);
    faults_poll(f);
    if (expect(f, row[k].name, st,
               HFZ_ST(capturing ? row[k].capturing : row[k].idle)))
      return -1;
    if (st == HIPPO_SUCCESS)
      ms->mode = row[k].mode;
    return 0;
  }
}

static int op_figures(fz *f, rd *r) {
  int i = pick_stream(f, r);
  uint8_t v = u8(r);
  hippo_status st;
  if (v % 4 == 0) {
    hippo_device_info info;
    uint32_t n = 0;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    st = f->api->device_info(f->dev, &info);
    if (expect(f, "device_info", st, HFZ_ST(HIPPO_SUCCESS)))
      return -1;
    for (int k = 0; k < HFZ_MAX_STREAMS; k++)
      n += f->m.streams[k].attached;
    if (info.streams != n || info.backend != f->backend ||
        info.alignment != f->m.alignment || info.total_memory != f->m.capacity)
      return fail(f, "device_info: %u streams, alignment %" PRIu64
                  ", memory %" PRIu64,
                  info.streams, info.alignment, info.total_memory);
    return 0;
  }
  if (i < 0)
    return 0;
  if (v % 4 == 1) {
    hippo_relocation_need need = 99;
    st = f->api->relocation_need(f->m.streams[i].s, &need);
    if (expect(f, "relocation_need", st, HFZ_ST(HIPPO_SUCCESS)))
      return -1;
    return need > HIPPO_NEED_UNMAP ? fail(f, "relocation_need %u", need) : 0;
  }
  if (v % 4 == 2) {
    hippo_relocation_report rep;
    memset(&rep, 0, sizeof rep);
    rep.struct_size = sizeof rep;
    st = f->api->relocation_report(f->dev, v & 4 ? NULL : f->m.streams[i].s,
                                   &rep);
    if (expect(f, "relocation_report", st, HFZ_ST(HIPPO_SUCCESS)))
      return -1;
    return rep.outcome > HIPPO_RELOCATION_FAILED
               ? fail(f, "relocation_report: outcome %u", rep.outcome)
               : 0;
  }
  {
    hippo_pool_report rep;
    hippo_usage u = usage_of(f, f->m.streams[i].s, &st);
    uint32_t index = u8(r) % (u.pool_count + 2);
    memset(&rep, 0, sizeof rep);
    rep.struct_size = sizeof rep;
    st = f->api->pool_report(f->m.streams[i].s, index, &rep, NULL);
    return expect(f, "pool_report", st,
                  HFZ_ST(index < u.pool_count ? HIPPO_SUCCESS
                                              : HIPPO_INVALID_ARGUMENT));
  }
}

/* Calls with a detached stream or a closed device: refused, nothing
 * reached. */
static int op_dead(fz *f, rd *r) {
  uint8_t v = u8(r);
  hippo_stream *s = f->ndead ? f->dead[v % f->ndead] : NULL;
  hippo_handle h = 0;
  hippo_usage u;
  hippo_status st;
  memset(&u, 0, sizeof u);
  u.struct_size = sizeof u;
  if (v % 2 && f->closed) {
    st = f->api->usage(f->closed, NULL, &u);
    if (expect(f, "usage (closed device)", st, HFZ_ST(HIPPO_INVALID_ARGUMENT)))
      return -1;
    st = f->api->cleanup(f->closed, NULL);
    return expect(f, "cleanup (closed device)", st,
                  HFZ_ST(HIPPO_INVALID_ARGUMENT));
  }
  if (!s)
    return 0;
  switch (v % 8) {
  case 0:
    st = f->api->reserve(s, 64, HIPPO_MODE_AUTO, &h);
    return expect(f, "reserve (detached)", st, HFZ_ST(HIPPO_INVALID_ARGUMENT));
  case 2:
    st = f->api->stream_detach(s);
    return expect(f, "stream_detach (detached)", st,
                  HFZ_ST(HIPPO_INVALID_ARGUMENT));
  case 4:
    st = f->api->usage(f->dev, s, &u);
    return expect(f, "usage (detached)", st, HFZ_ST(HIPPO_INVALID_ARGUMENT));
  default:
    st = f->api->persistent_begin(s);
    return expect(f, "persistent_begin (detached)", st,
                  HFZ_ST(HIPPO_INVALID_ARGUMENT));
  }
}

typedef int (*op_fn)(fz *, rd *);
static const op_fn ops[HFZ_OPS] = {
    op_reserve,  op_release, op_resolve,    op_attach,  op_detach,
    op_record_use, op_sync,  op_persistent, op_install, op_relocate,
    op_capture,  op_retire,  op_fault,      op_announce, op_figures,
    op_dead};

/* The opcode byte: reservations and releases most, the rest less. */
static enum hfz_op decode_op(uint8_t v) {
  static const struct {
    uint8_t below;
    enum hfz_op op;
  } table[] = {
      {70, HFZ_OP_RESERVE},     {130, HFZ_OP_RELEASE},
      {146, HFZ_OP_RESOLVE},    {154, HFZ_OP_ATTACH},
      {159, HFZ_OP_DETACH},     {171, HFZ_OP_RECORD_USE},
      {176, HFZ_OP_SYNC},       {182, HFZ_OP_PERSISTENT},
      {188, HFZ_OP_INSTALL},    {202, HFZ_OP_RELOCATE},
      {212, HFZ_OP_CAPTURE},    {218, HFZ_OP_RETIRE},
      {226, HFZ_OP_FAULT},      {232, HFZ_OP_ANNOUNCE},
      {244, HFZ_OP_FIGURES},    {255, HFZ_OP_DEAD},
  };
  for (unsigned i = 0; i < sizeof table / sizeof *table; i++)
    if (v < table[i].below)
      return table[i].op;
  return HFZ_OP_RESERVE;
}

/* ---- one input: a device's life ------------------------------------------- */

/* The backend: HOST, or on $HIPPO_TEST_BACKEND=hip a GPU (a real one or a
 * stand-in runtime), whose alignment is asked once: the inputs' choices
 * are multiples of it there. */
static hippo_backend backend_of(const hippo_api *api, uint64_t *align) {
  static uint64_t gpu_align;
  const char *b = getenv("HIPPO_TEST_BACKEND");
  *align = 256;
  if (!b || strcmp(b, "hip"))
    return HIPPO_BACKEND_HOST;
  if (!gpu_align) {
    hippo_device_desc d;
    hippo_device_info info;
    hippo_device *dev;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.backend = HIPPO_BACKEND_HIP;
    d.capacity = 16 * MiB;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    gpu_align = 256;
    if (api->device_open(&d, &dev) == HIPPO_SUCCESS) {
      if (api->device_info(dev, &info) == HIPPO_SUCCESS)
        gpu_align = info.alignment;
      (void)api->device_close(dev);
    }
  }
  *align = gpu_align;
  return HIPPO_BACKEND_HIP;
}

static int open_device(fz *f, rd *r) {
  static const uint64_t caps[4] = {64 * MiB, 256 * MiB, GiB, 0};
  uint8_t c = u8(r), a = u8(r), fl = u8(r);
  hippo_device_desc d;
  layout_buf lb;
  hfz_layout_facts facts;
  const hippo_layout *l;
  hippo_device *closed = NULL;
  hippo_status st;
  uint64_t base;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.backend = backend_of(f->api, &base);
  f->backend = d.backend;
  d.capacity = caps[c % 4];
  if (d.backend == HIPPO_BACKEND_HIP && !d.capacity)
    d.capacity = GiB; /* a budget any GPU holds */
  {
    /* HOST: 0 (256), 64, 512, 4096; a GPU: 0 (its own) and multiples */
    const uint64_t aligns[4] = {
        0, d.backend == HIPPO_BACKEND_HOST ? 64 : base, 2 * base,
                                16 * base};
    d.alignment = aligns[a % 4];
  }
  d.flags = (fl & 1 ? HIPPO_DEVICE_AUTO_RELOCATE : 0) |
            ((fl & 6) == 6 ? HIPPO_DEVICE_FIXED_LAYOUT : 0);
  /* the model needs capacity and alignment to decode a layout */
  f->m.capacity = d.capacity ? d.capacity : 16 * GiB;
  f->m.alignment = d.alignment ? d.alignment : base;
  l = decode_layout(f, r, false, &lb, &facts);
  d.layout = l;
  st = f->api->device_open(&d, &f->dev);
  if (expect(f, "device_open", st, HFZ_ST(lb.want)))
    return -1;
  if (st != HIPPO_SUCCESS) { /* a layout made wrong: the default instead */
    d.layout = l = decode_layout(f, &(rd){(const uint8_t *)"", 0, 0}, false,
                                 &lb, &facts);
    st = f->api->device_open(&d, &f->dev);
    if (expect(f, "device_open (default layout)", st, HFZ_ST(HIPPO_SUCCESS)))
      return -1;
  }
  hfz_model_init(&f->m, d.capacity ? d.capacity : 16 * GiB,
                 d.alignment ? d.alignment : base,
                 (d.flags & HIPPO_DEVICE_FIXED_LAYOUT) != 0, &facts);
  /* a device opened and closed: its pointer must be refused from now on */
  d.layout = NULL;
  d.capacity = 16 * MiB;
  if (f->api->device_open(&d, &closed) == HIPPO_SUCCESS &&
      f->api->device_close(closed) == HIPPO_SUCCESS)
    f->closed = closed;
  return 0;
}

/* Ends every capture, retires every graph, detaches every stream: every
 * page must be back with the backend; then the device closes. */
static int teardown(fz *f) {
  hippo_emu_counters c;
  hippo_status st;
  f->op = HFZ_OPS;
  for (int k = 0; k < (int)HIPPO_CALL_KINDS; k++)
    if (f->armed[k]) {
      (void)drv_emu(f->api)->inject_fault(f->dev, k, 0, HIPPO_SUCCESS);
      f->armed[k] = false;
    }
  f->fired_now = 0;
  for (int i = 0; i < HFZ_MAX_STREAMS; i++) {
    hfz_stream *ms = &f->m.streams[i];
    if (ms->attached && ms->graph >= 0) {
      st = drv_emu(f->api)->capture_end(f->dev, ms->native);
      if (expect(f, "emu_capture_end", st, HFZ_ST(HIPPO_SUCCESS)))
        return -1;
      hfz_graph_end(&f->m, i);
      if (ms->mode == HFZ_ANNOUNCED && announce(f, ms, HIPPO_CAPTURE_ENDED))
        return -1;
    }
  }
  for (int g = 0; g < HFZ_MAX_GRAPHS; g++)
    if (f->m.graphs[g].used && retire(f, g))
      return -1;
  if (verify(f, true))
    return -1;
  for (int i = 0; i < HFZ_MAX_STREAMS; i++) {
    hfz_stream *ms = &f->m.streams[i];
    if (!ms->attached)
      continue;
    st = f->api->stream_detach(ms->s);
    if (expect(f, "stream_detach", st, HFZ_ST(HIPPO_SUCCESS)))
      return -1;
    hfz_stream_drop(&f->m, i);
    if (ms->native && (st = drv_emu(f->api)->stream_destroy(f->dev, ms->native)) &&
        expect(f, "emu_stream_destroy", st, HFZ_ST(HIPPO_SUCCESS)))
      return -1;
    ms->attached = false;
  }
  c = counters(f);
  if (c.pages_held || c.bytes_held) {
    /* a retained stream's page whose free failed (an injected fault) when
     * no stream was left to detach: cleanup of every stream is the retry
     * the ABI names (hippo.h, stream_detach) */
    st = f->api->cleanup(f->dev, NULL);
    if (expect(f, "cleanup", st, HFZ_ST(HIPPO_SUCCESS)))
      return -1;
    c = counters(f);
  }
  if (c.pages_held || c.bytes_held || c.ranges_held || c.granules_mapped)
    return fail(f, "every stream detached and every graph retired, the "
                "backend still holds %" PRIu64 " pages, %" PRIu64 " B, %"
                PRIu64 " virtual ranges, %" PRIu64 " granules mapped",
                c.pages_held, c.bytes_held, c.ranges_held,
                c.granules_mapped);
  f->stats->granules_mapped += c.calls[HIPPO_CALL_VM_MAP];
  st = f->api->device_close(f->dev);
  f->dev = NULL;
  return expect(f, "device_close", st, HFZ_ST(HIPPO_SUCCESS));
}

int hfz_run(const hippo_api *api, const uint8_t *data, size_t size,
            hfz_stats *stats, char *why, size_t len) {
  fz *f = calloc(1, sizeof *f);
  rd r = {data, size, 0};
  int rc = 0;
  if (!f) {
    snprintf(why, len, "no host memory for the driver");
    return -1;
  }
  f->api = api;
  f->stats = stats;
  f->why = why;
  f->len = len;
  f->op = HFZ_OPS;
  f->next_seed = 1;
  f->trace = getenv("HIPPO_FUZZ_TRACE") != NULL;
  tab_init();
  stats->inputs++;
  if (open_device(f, &r)) {
    free(f);
    return -1;
  }
  while (rc == 0 && r.i < r.n) {
    int checks;
    f->op = decode_op(u8(&r));
    f->fired_in_op = false;
    f->fired_now = 0;
    stats->ops++;
    stats->by_op[f->op]++;
    checks = ops[f->op](f, &r);
    if (checks < 0) {
      rc = -1;
      break;
    }
    if (!(checks & PARKED))
      faults_park(f);
    /* every byte now and then, and after what may have moved them */
    if ((checks & FULL) || f->fired_in_op || stats->ops % VERIFY_EVERY == 0)
      rc = verify(f, (checks & FULL) || f->fired_in_op ||
                         stats->ops % FULL_EVERY == 0);
    if (rc == 0)
      rc = faults_unpark(f);
  }
  if (rc == 0)
    rc = teardown(f);
  if (f->dev) { /* a failure: leave nothing behind */
    for (int k = 0; k < (int)HIPPO_CALL_KINDS; k++)
      (void)drv_emu(api)->inject_fault(f->dev, k, 0, HIPPO_SUCCESS);
    for (int i = 0; i < HFZ_MAX_STREAMS; i++)
      if (f->m.streams[i].attached) {
        if (f->m.streams[i].graph >= 0)
          (void)drv_emu(api)->capture_end(f->dev, f->m.streams[i].native);
        (void)api->stream_detach(f->m.streams[i].s);
        if (f->m.streams[i].native)
          (void)drv_emu(api)->stream_destroy(f->dev, f->m.streams[i].native);
      }
    (void)api->device_close(f->dev);
  }
  free(f->buf);
  free(f);
  return rc;
}
