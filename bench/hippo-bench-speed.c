/* hippo-bench-speed.c -- the workloads of hippo-bench that time the
 * reservation path on DRY devices: A (random reserve/release on a 4 GiB
 * sliced pool; A's operations with each preset), V (A's cases through
 * this plugin and another build, interleaved), B (reserve/release pairs
 * with N live slices) and E (a reservation that fails on a full device),
 * with the seeded generator their operations come from.  Every random
 * stream is generated before the clock starts; only the loop is timed.
 */
#include "hippo.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "hippo-bench.h"

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* ------------------------------------------------------------------------ */
/* PRNG: splitmix64 seeds xoshiro256**. */

typedef struct rng {
  uint64_t s[4];
} rng;

static void rng_seed(rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++)
    r->s[i] = bench_splitmix64(&seed);
}

static uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl64(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl64(s[3], 45);
  return result;
}

/* Uniform in [0, 1). */
static double rng_unit(rng *r) {
  return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Index in [0, n) from a 32-bit random value: multiply-shift, no division. */
static inline uint32_t pick(uint32_t r32, uint32_t n) {
  return (uint32_t)(((uint64_t)r32 * n) >> 32);
}

/* Log-uniform size in [lo, hi] bytes (lo, hi powers of two). */
static uint64_t size_log2(rng *r, uint64_t lo, uint64_t hi) {
  double e0 = log2((double)lo), e1 = log2((double)hi);
  uint64_t s = (uint64_t)ceil(exp2(e0 + rng_unit(r) * (e1 - e0)));
  if (s < lo)
    s = lo;
  if (s > hi)
    s = hi;
  return s;
}

static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Timed loops: releases live[k] and moves live[last] into its place (the
 * caller drops last from its count).  Returns the bytes live[k] held. */
static inline uint64_t release_at(release_fn release, hippo_stream *s,
                                  live_res *live, uint32_t k, uint64_t last,
                                  const char *what) {
  uint64_t size = live[k].size;
  hippo_status st = release(s, live[k].h);
  if (st != HIPPO_SUCCESS)
    hb_die_status(st, what);
  live[k] = live[last];
  return size;
}

/* ------------------------------------------------------------------------ */
/* Workload A: random reserve/release on a 4 GiB sliced pool. */

typedef struct a_op {
  uint64_t size;  /* bytes, a multiple of 256 */
  uint32_t r;     /* random 32 bits: which live one a release picks */
  uint32_t alloc; /* 1: allocate (when something is live) */
} a_op;

static void a_generate(a_op *ops, uint64_t n, int log2_sizes, double p,
                       uint64_t seed) {
  rng r;
  rng_seed(&r, seed);
  for (uint64_t i = 0; i < n; i++) {
    uint64_t size;
    if (log2_sizes) {
      size = round_up(size_log2(&r, 256, A_MAX_SIZE), 256);
    } else {
      /* 256 * k, k uniform in [1, 64 MiB / 256]. */
      size = 256 * (1 + rng_next(&r) % (A_MAX_SIZE / 256));
    }
    ops[i].size = size;
    ops[i].alloc = rng_unit(&r) < p;
    ops[i].r = (uint32_t)(rng_next(&r) >> 32);
  }
}

typedef struct a_result {
  double ns_median, ns_min;
  uint64_t failures, failures_min, failures_max;
  double live_min, live_median, live_max; /* live / 4 GiB at failures */
  uint64_t final_live;
} a_result;

/* A's four cases (V runs them too; the preset comparison the two with
 * p = 0.5): sizes uniform in bytes or in log2, allocation probability p. */
typedef struct a_spec {
  int log2_sizes;
  double p;
} a_spec;
static const a_spec a_cases[4] = {{0, 0.5}, {0, 0.6}, {1, 0.5}, {1, 0.6}};

static void a_name(char *buf, size_t n, const a_spec *c) {
  snprintf(buf, n, "%s p=%.1f", c->log2_sizes ? "log2" : "uniform", c->p);
}

/* One case of A; `preset` NULL: the 4 GiB sliced pool, else that preset
 * layout on the A_CAPACITY device. */
static void a_case(const options *o, int log2_sizes, double p,
                   const hippo_layout *preset, a_result *res) {
  hippo_pool_options pool;
  hippo_layout layout;
  uint64_t n = o->ops;
  a_op *ops = bench_xmalloc(n * sizeof *ops);
  live_res *live = bench_xmalloc((n + 1) * sizeof *live);
  uint64_t *fail_live = bench_xmalloc((n + 1) * sizeof *fail_live);
  double *ns = bench_xcalloc(o->reps, sizeof *ns);
  reserve_fn reserve = hb_api->reserve;
  release_fn release = hb_api->release;

  hb_one_sliced_pool(&pool, &layout, A_SPACE, A_MAX_SIZE, A_SPACE);
  if (preset)
    layout = *preset;

  memset(res, 0, sizeof *res);
  res->failures_min = UINT64_MAX;
  for (unsigned rep = 0; rep < o->reps; rep++) {
    bench_dev b;
    uint64_t nlive = 0, live_bytes = 0, nfail = 0;
    double t0, t1;

    /* Not timed: a fresh device and the same operation stream. */
    a_generate(ops, n, log2_sizes, p,
               0x41u + (uint64_t)log2_sizes * 2 + (p > 0.55));
    hb_dev_open(&b, A_CAPACITY, &layout);

    t0 = bench_now_ns();
    for (uint64_t i = 0; i < n; i++) {
      const a_op *op = &ops[i];
      hippo_status st;
      if (nlive == 0 || op->alloc) {
        hippo_handle h;
        st = reserve(b.stream, op->size, HIPPO_MODE_AUTO, &h);
        if (st == HIPPO_SUCCESS) {
          live[nlive].h = h;
          live[nlive].size = op->size;
          nlive++;
          live_bytes += op->size;
        } else if (st == HIPPO_POOL_CAPACITY_EXCEEDED ||
                   st == HIPPO_OUT_OF_MEMORY) {
          fail_live[nfail++] = live_bytes;
        } else {
          hb_die_status(st, "A: reserve");
        }
      } else {
        uint32_t k = pick(op->r, (uint32_t)nlive);
        live_bytes -= release_at(release, b.stream, live, k, --nlive,
                                 "A: release");
      }
    }
    t1 = bench_now_ns();
    ns[rep] = (t1 - t0) / (double)n;

    /* Not timed: the failure figures, then dev_finish. */
    if (rep == 0) {
      qsort(fail_live, nfail, sizeof *fail_live, cmp_u64);
      res->failures = nfail;
      res->final_live = nlive;
      if (nfail) {
        res->live_min = (double)fail_live[0] / (double)A_SPACE;
        res->live_max = (double)fail_live[nfail - 1] / (double)A_SPACE;
        res->live_median =
            nfail % 2 ? (double)fail_live[nfail / 2] / (double)A_SPACE
                      : 0.5 * ((double)fail_live[nfail / 2 - 1] +
                               (double)fail_live[nfail / 2]) /
                            (double)A_SPACE;
      }
    }
    if (nfail < res->failures_min)
      res->failures_min = nfail;
    if (nfail > res->failures_max)
      res->failures_max = nfail;
    hb_dev_finish(&b, live, nlive, live_bytes, rep == 0, "A");
  }
  res->ns_min = bench_minimum(ns, o->reps);
  res->ns_median = bench_median(ns, o->reps);
  free(ns);
  free(fail_live);
  free(live);
  free(ops);
}

void hb_workload_a(const options *o) {
  printf("\n## A: %llu random operations on a 4 GiB sliced pool "
         "(DRY, %u reps)\n\n",
         (unsigned long long)o->ops, o->reps);
  printf("%-18s %10s %10s %9s %24s\n", "case", "ns/op med", "ns/op min",
         "failures", "live/4GiB at failure");
  for (int c = 0; c < 4; c++) {
    a_result r;
    char name[40], fig[64], lives[64], target[48], v[32], row_target[48];
    a_name(name, sizeof name, &a_cases[c]);
    a_case(o, a_cases[c].log2_sizes, a_cases[c].p, NULL, &r);
    if (r.failures)
      snprintf(lives, sizeof lives, "%.3f/%.3f/%.3f", r.live_min,
               r.live_median, r.live_max);
    else
      snprintf(lives, sizeof lives, "-");
    target[0] = '\0';
    if (c == 0)
      snprintf(target, sizeof target, "<= %.0f ns/op: %s", A_TARGET_NS,
               hb_verdict(v, sizeof v, r.ns_median, A_TARGET_NS, 1, 1));
    printf("%-18s %10.1f %10.1f %9llu %24s  %s\n", name, r.ns_median,
           r.ns_min, (unsigned long long)r.failures, lives, target);
    if (r.failures_min != r.failures_max)
      printf("  note: failures varied across repetitions: %llu .. %llu\n",
             (unsigned long long)r.failures_min,
             (unsigned long long)r.failures_max);
    snprintf(fig, sizeof fig, "%.1f ns/op (min %.1f); %llu failures",
             r.ns_median, r.ns_min, (unsigned long long)r.failures);
    if (r.failures) {
      size_t len = strlen(fig);
      snprintf(fig + len, sizeof fig - len, " at %.2f..%.2f live",
               r.live_min, r.live_max);
    }
    row_target[0] = '\0';
    if (c == 0)
      snprintf(row_target, sizeof row_target, "<= %.0f ns/op (%s)",
               A_TARGET_NS, v);
    hb_add_row("A", name, fig, row_target);
  }
  printf("(live/4GiB at failure: min/median/max over the failures of one "
         "repetition)\n");
}

/* Workload V: A's four cases through this plugin and another build
 * (--versus), the repetitions interleaved, so both see the same spells of
 * a shared machine; ratio < 1: this plugin is faster. */
void hb_workload_v(const options *o, const hippo_api *other) {
  const hippo_api *apis[2] = {hb_api, other};
  const hippo_api *mine = hb_api;
  options one = *o;
  double *ns[2];
  one.reps = 1;
  ns[0] = bench_xcalloc(o->reps, sizeof *ns[0]);
  ns[1] = bench_xcalloc(o->reps, sizeof *ns[1]);
  printf("\n## V: A's %llu operations, this plugin against %s (DRY, %u "
         "reps, interleaved)\n\n",
         (unsigned long long)o->ops, o->versus, o->reps);
  printf("%-18s %12s %12s %12s %12s %9s\n", "case", "this med", "this min",
         "versus med", "versus min", "ratio");
  for (int c = 0; c < 4; c++) {
    char name[40], fig[64];
    double med[2], min[2];
    uint64_t fails[2] = {0, 0};
    a_name(name, sizeof name, &a_cases[c]);
    for (unsigned rep = 0; rep < o->reps; rep++)
      for (int k = 0; k < 2; k++) {
        int which = (k + (int)rep) % 2;
        a_result r;
        hb_api = apis[which];
        a_case(&one, a_cases[c].log2_sizes, a_cases[c].p, NULL, &r);
        ns[which][rep] = r.ns_median;
        fails[which] = r.failures;
      }
    hb_api = mine;
    for (int k = 0; k < 2; k++) {
      med[k] = bench_median(ns[k], o->reps);
      min[k] = bench_minimum(ns[k], o->reps);
    }
    printf("%-18s %12.1f %12.1f %12.1f %12.1f %9.3f\n", name, med[0],
           min[0], med[1], min[1], med[0] / med[1]);
    if (fails[0] != fails[1])
      printf("  note: failures differ: %llu here, %llu there (the builds "
             "place differently)\n",
             (unsigned long long)fails[0], (unsigned long long)fails[1]);
    snprintf(fig, sizeof fig, "%.1f vs %.1f ns/op (min %.1f vs %.1f)",
             med[0], med[1], min[0], min[1]);
    hb_add_row("V", name, fig, "");
  }
  free(ns[0]);
  free(ns[1]);
}

/* A's operations through the two preset layouts on the same 8 GiB device,
 * in turn: the reservation path of ADAPTIVE (small pool, ARENA) against
 * SUB_SLICES' (sliced ladder, exclusive tail), failures included. */
#define A_PRESET_TARGET 1.10
void hb_workload_a_presets(const options *o) {
  static const a_spec *const cases[2] = {&a_cases[0], &a_cases[2]};
  hippo_layout sub, ada;
  memset(&sub, 0, sizeof sub);
  sub.struct_size = sizeof sub;
  sub.preset = HIPPO_PRESET_SUB_SLICES;
  ada = sub;
  ada.preset = HIPPO_PRESET_ADAPTIVE;
  printf("\n## A (presets): the same operations on an 8 GiB DRY device "
         "with each preset\n\n");
  printf("%-18s %14s %14s %9s %9s %7s\n", "case", "SUB_SLICES ns", "ADAPTIVE ns",
         "fail SUB", "fail ADA", "ratio");
  for (int c = 0; c < 2; c++) {
    a_result rs, ra;
    char name[40], fig[64], target[64], v[32];
    double ratio;
    a_name(name, sizeof name, cases[c]);
    a_case(o, cases[c]->log2_sizes, cases[c]->p, &sub, &rs);
    a_case(o, cases[c]->log2_sizes, cases[c]->p, &ada, &ra);
    ratio = rs.ns_median > 0 ? ra.ns_median / rs.ns_median : 0.0;
    hb_verdict(v, sizeof v, ratio, A_PRESET_TARGET, 1, 2);
    printf("%-18s %14.1f %14.1f %9llu %9llu %7.2f  (target <= %.2f: %s)\n",
           name, rs.ns_median, ra.ns_median, (unsigned long long)rs.failures,
           (unsigned long long)ra.failures, ratio, A_PRESET_TARGET, v);
    snprintf(fig, sizeof fig, "%.1f vs %.1f ns/op, ratio %.2f", ra.ns_median,
             rs.ns_median, ratio);
    snprintf(target, sizeof target, "ADAPTIVE / SUB_SLICES <= 1.10 (%s)", v);
    snprintf(name + strlen(name), sizeof name - strlen(name),
             ", ADAPTIVE vs SUB_SLICES");
    hb_add_row("A", name, fig, target);
  }
}

/* ------------------------------------------------------------------------ */
/* Workload B: reserve/release pairs with N live slices.
 *
 * The timed pairs cycle through a table of B_STREAM pre-generated
 * {size, pick} entries (512 KiB) rather than streaming m of them (12 MiB for
 * a million): a big stream would push the plugin's metadata out of the
 * last-level cache and charge the bench's own traffic to the N = 100,000
 * figure.  The picks index the live array, whose order keeps changing, so
 * the cycle does not repeat the same reservations.  For the same reason
 * the live array holds only the handles (8 bytes each, what any caller
 * keeps): after the timed loop the same steps are replayed on an array of
 * sizes, without the plugin, and every live handle must resolve to the
 * size the replay puts at its place. */

#define B_STREAM 65536u /* a power of two */

typedef struct b_step {
  uint32_t size; /* bytes to reserve, 256 .. 64 KiB */
  uint32_t pick; /* random 32 bits: which live one to release */
} b_step;

/* Not timed: replays m steps on `sizes` (the n fill sizes) as the timed
 * loop did on the handles, checks that each live handle resolves to the
 * size at its place, and pairs them up for dev_finish. */
static live_res *b_expected(hippo_stream *s, const hippo_handle *live,
                            uint64_t *sizes, uint32_t n, const b_step *steps,
                            uint64_t m, uint64_t *bytes) {
  live_res *res = bench_xmalloc(((size_t)n + 1) * sizeof *res);
  uint32_t nlive = n;
  for (uint64_t i = 0; i < m; i++) {
    const b_step *step = &steps[i & (B_STREAM - 1)];
    uint32_t k;
    sizes[nlive++] = step->size;
    k = pick(step->pick, nlive);
    sizes[k] = sizes[--nlive];
  }
  *bytes = 0;
  for (uint32_t i = 0; i < n; i++) {
    void *ptr;
    uint64_t size;
    CHECK(hb_api->resolve(s, live[i], &ptr, &size), "B: resolve");
    if (size != sizes[i])
      bench_fatal("B: live handle %u resolves to %llu B, the replay says %llu B", i,
            (unsigned long long)size, (unsigned long long)sizes[i]);
    res[i].h = live[i];
    res[i].size = size;
    *bytes += size;
  }
  return res;
}

/* One repetition: a fresh device filled to n live slices, then m timed
 * pairs; ns per pair.  `check` runs the check walk at the end. */
static double b_run(const hippo_layout *layout, uint32_t n, uint64_t m,
                    bool check) {
  hippo_handle *live = bench_xmalloc(((size_t)n + 1) * sizeof *live);
  uint64_t *sizes = bench_xmalloc(((size_t)n + 1) * sizeof *sizes);
  b_step *steps = bench_xmalloc(B_STREAM * sizeof *steps);
  reserve_fn reserve = hb_api->reserve;
  release_fn release = hb_api->release;
  bench_dev b;
  uint64_t live_bytes;
  uint32_t nlive = 0;
  live_res *sized;
  rng r;
  double t0, t1;

  /* Not timed: the streams, a fresh device filled to n live slices. */
  rng_seed(&r, 0x42u + n);
  for (uint32_t i = 0; i < B_STREAM; i++) {
    steps[i].size = (uint32_t)size_log2(&r, 256, B_MAX_SIZE);
    steps[i].pick = (uint32_t)(rng_next(&r) >> 32);
  }
  hb_dev_open(&b, B_CAPACITY, layout);
  for (uint32_t i = 0; i < n; i++) {
    sizes[i] = size_log2(&r, 256, B_MAX_SIZE);
    CHECK(reserve(b.stream, sizes[i], HIPPO_MODE_AUTO, &live[nlive++]),
          "B: reserve (fill)");
  }

  t0 = bench_now_ns();
  for (uint64_t i = 0; i < m; i++) {
    const b_step *step = &steps[i & (B_STREAM - 1)];
    hippo_status st;
    uint32_t k;
    st = reserve(b.stream, step->size, HIPPO_MODE_AUTO, &live[nlive++]);
    if (st != HIPPO_SUCCESS)
      hb_die_status(st, "B: reserve");
    k = pick(step->pick, nlive);
    st = release(b.stream, live[k]);
    if (st != HIPPO_SUCCESS)
      hb_die_status(st, "B: release");
    live[k] = live[--nlive];
  }
  t1 = bench_now_ns();

  sized = b_expected(b.stream, live, sizes, n, steps, m, &live_bytes);
  hb_dev_finish(&b, sized, nlive, live_bytes, check, "B");
  free(sized);
  free(steps);
  free(sizes);
  free(live);
  return (t1 - t0) / (double)m;
}

/* One layout's sum of B's four medians against another's, printed and
 * summed up against A_PRESET_TARGET. */
static void b_compare(const char *ratio_name, const char *what, double num,
                      double den) {
  double r = den > 0 ? num / den : 0.0;
  char fig[64], target[64], v[32];
  hb_verdict(v, sizeof v, r, A_PRESET_TARGET, 1, 2);
  printf("%s, sum of the four medians: %.2f (target <= %.2f: %s)\n",
         ratio_name, r, A_PRESET_TARGET, v);
  snprintf(fig, sizeof fig, "sum of medians ratio %.2f", r);
  snprintf(target, sizeof target, "%s <= %.2f (%s)", ratio_name,
           A_PRESET_TARGET, v);
  hb_add_row("B", what, fig, target);
}

void hb_workload_b(const options *o) {
  enum { NCOUNTS = 4 };
  static const uint32_t counts[NCOUNTS] = {100, 1000, 10000, 100000};
  enum { NLAYOUTS = 4 };
  hippo_pool_options pool, vpool;
  hippo_layout custom, sub, ada, virt;
  const struct {
    const char *name;
    const hippo_layout *layout;
  } layouts[NLAYOUTS] = {{"sliced 4 GiB page", &custom},
                         {"SUB_SLICES preset", &sub},
                         {"ADAPTIVE preset", &ada},
                         {"virtual pool", &virt}};
  double *ns = bench_xcalloc((size_t)NLAYOUTS * NCOUNTS * o->reps, sizeof *ns);
  double med100k[NLAYOUTS] = {0};
  char v[32];

  hb_one_sliced_pool(&pool, &custom, B_PAGE, B_MAX_SIZE, 0);
  memset(&sub, 0, sizeof sub);
  sub.struct_size = sizeof sub;
  sub.preset = HIPPO_PRESET_SUB_SLICES;
  ada = sub;
  ada.preset = HIPPO_PRESET_ADAPTIVE;
  /* one VIRTUAL pool over the device's memory: once the live set has
   * touched its granules, a pair maps nothing (nothing unmaps them here),
   * so it measures the pool's own cost beside the sliced page's */
  hb_one_sliced_pool(&vpool, &virt, 0, B_MAX_SIZE, 0);
  vpool.kind = HIPPO_POOL_VIRTUAL;
  vpool.dealloc_period = 0;

  printf("\n## B: ns per reserve+release pair with N live slices "
         "(256 B..64 KiB log-uniform, %llu pairs, DRY, %u reps)\n\n",
         (unsigned long long)o->ops, o->reps);
  printf("(each repetition runs every layout at every N in turn, so a noisy "
         "spell of the machine is shared by all of them rather than falling "
         "on one, and the ratios below compare runs made side by side)\n");
  printf("%-20s %8s %10s %10s\n", "layout", "N live", "ns/pair med",
         "ns/pair min");
  for (unsigned rep = 0; rep < o->reps; rep++)
    for (int l = 0; l < NLAYOUTS; l++)
      for (int c = 0; c < NCOUNTS; c++)
        ns[((size_t)l * NCOUNTS + c) * o->reps + rep] =
            b_run(layouts[l].layout, counts[c], o->ops, rep == 0);
  for (int l = 0; l < NLAYOUTS; l++) {
    double med[NCOUNTS], mins[NCOUNTS], ratio;
    char what[64], fig[64], target[64];
    for (int c = 0; c < NCOUNTS; c++) {
      double *at = &ns[((size_t)l * NCOUNTS + c) * o->reps];
      mins[c] = bench_minimum(at, o->reps);
      med[c] = bench_median(at, o->reps);
      printf("%-20s %8u %10.1f %10.1f\n", layouts[l].name, counts[c], med[c],
             mins[c]);
    }
    ratio = med[0] > 0 ? med[3] / med[0] : 0.0;
    hb_verdict(v, sizeof v, ratio, B_TARGET_RATIO, 1, 2);
    printf("%-20s ratio N=100000 / N=100: %.2f  (target <= %.1f: %s; "
           "ratio of the minima %.2f)\n",
           layouts[l].name, ratio, B_TARGET_RATIO, v,
           mins[0] > 0 ? mins[3] / mins[0] : 0.0);
    snprintf(what, sizeof what, "%s, N=100 / 100k", layouts[l].name);
    snprintf(fig, sizeof fig, "%.1f / %.1f ns/pair, ratio %.2f", med[0],
             med[3], ratio);
    snprintf(target, sizeof target, "ratio <= 1.3 (%s)", v);
    hb_add_row("B", what, fig, target);
    med100k[l] = med[0] + med[1] + med[2] + med[3];
  }
  b_compare("ADAPTIVE / SUB_SLICES", "ADAPTIVE vs SUB_SLICES presets",
            med100k[2], med100k[1]);
  b_compare("virtual / sliced", "virtual pool (mapping nothing) vs sliced",
            med100k[3], med100k[0]);
  free(ns);
}

/* E: the failure path.  A DRY device of 16 GiB with the default layout
 * (ADAPTIVE) is filled with sizes from 256 B to 64 MiB until a
 * reservation fails; then, per repetition, E_CALLS reservations that
 * cannot fit (64 MiB) are timed, and E_CALLS successful ones (256 B, each
 * kept until the batch is released, untimed).  Target: a failure costs at
 * most 3 x a success. */
#define E_CALLS 20000u
void hb_workload_e(const options *o) {
  unsigned reps = o->reps;
  double *fail = bench_xcalloc(reps, sizeof *fail), *ok = bench_xcalloc(reps, sizeof *ok);
  hippo_handle *kept = bench_xcalloc(E_CALLS, sizeof *kept);
  bench_dev b;
  rng r;
  uint64_t filled = 0;
  double fmed, omed;
  char fig[96], target[64], v[32];

  printf("\n## E: a reservation that fails on a full device (DRY, ADAPTIVE, "
         "16 GiB, %u reps of %u calls)\n\n",
         reps, E_CALLS);
  hb_dev_open(&b, 16 * GiB, NULL);
  rng_seed(&r, 0x45);
  for (;;) {
    hippo_handle h;
    uint64_t size = round_up(size_log2(&r, 256, 64 * MiB), A_ALIGN);
    if (hb_api->reserve(b.stream, size, HIPPO_MODE_AUTO, &h) != HIPPO_SUCCESS)
      break;
    filled++;
  }
  for (unsigned rep = 0; rep < reps; rep++) {
    double t0, t1;
    uint64_t fails = 0;
    t0 = bench_now_ns();
    for (unsigned i = 0; i < E_CALLS; i++) {
      hippo_handle h;
      fails += hb_api->reserve(b.stream, 64 * MiB, HIPPO_MODE_AUTO, &h) !=
               HIPPO_SUCCESS;
    }
    t1 = bench_now_ns();
    if (fails != E_CALLS)
      bench_fatal("E: %llu of %u reservations of 64 MiB succeeded on a full "
            "device",
            (unsigned long long)(E_CALLS - fails), E_CALLS);
    fail[rep] = (t1 - t0) / E_CALLS;
    t0 = bench_now_ns();
    for (unsigned i = 0; i < E_CALLS; i++)
      CHECK(hb_api->reserve(b.stream, 256, HIPPO_MODE_AUTO, &kept[i]),
            "E: reserve 256 B");
    t1 = bench_now_ns();
    ok[rep] = (t1 - t0) / E_CALLS;
    for (unsigned i = 0; i < E_CALLS; i++)
      CHECK(hb_api->release(b.stream, kept[i]), "E: release");
  }
  hb_dev_check(b.dev, "E");
  hb_dev_close(&b);
  fmed = bench_median(fail, reps);
  omed = bench_median(ok, reps);
  printf("filled with %llu reservations; a failing reservation %.1f ns "
         "(min %.1f), a successful one %.1f ns (min %.1f): %.2f x\n",
         (unsigned long long)filled, fmed, bench_minimum(fail, reps), omed,
         bench_minimum(ok, reps), fmed / omed);
  snprintf(fig, sizeof fig, "%.1f ns failing vs %.1f ns succeeding, %.2f x",
           fmed, omed, fmed / omed);
  snprintf(target, sizeof target, "<= 3 x a success (%s)",
           hb_verdict(v, sizeof v, fmed / omed, 3.0, 1, 2));
  hb_add_row("E", "failure path, full 16 GiB ADAPTIVE", fig, target);
  free(fail);
  free(ok);
  free(kept);
}
