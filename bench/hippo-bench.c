/* hippo-bench.c -- benchmarks of hippo's bookkeeping, driven through the ABI.
 *
 * The plugin is loaded with hippo_load() and every device is a DRY device
 * (HIPPO_BACKEND_DRY): no memory is touched and no driver is called, so the
 * figures measure hippo's own work per reservation and release.
 *
 *   A  allocator speed: 1,000,000 operations on a 4 GiB sliced pool (one
 *      4 GiB page, slices up to 64 MiB).  Each operation allocates when
 *      nothing is live, else allocates with probability p, else releases a
 *      uniformly chosen live reservation.  Sizes 256 B .. 64 MiB in steps of
 *      256 B, uniform in bytes or in log2.  Four cases: {uniform, log2} x
 *      {p = 0.5, p = 0.6}.  A failed reservation (POOL_CAPACITY_EXCEEDED or
 *      OUT_OF_MEMORY) counts as an operation; the live fraction of the
 *      4 GiB space is recorded at each failure.
 *   B  scaling: ns per {reserve, release a random live one} pair with 100,
 *      1,000, 10,000 and 100,000 live slices (log-uniform 256 B .. 64 KiB),
 *      on a custom sliced pool with a 4 GiB page and on the default preset.
 *   C  trace replay: the bundled trace (op,id,size,stream) with the default
 *      preset on a 16 GiB DRY device: peak reserved / peak live, ns/event.
 *      Peak live comes from the trace; peak reserved from the device's
 *      usage(); one extra, untimed replay reads usage() after every event
 *      to cross-check the device-wide peaks.
 *
 *   R  relocation throughput on a HOST device: 64 patterned 4 MiB slices
 *      on outdated pages moved by relocate_device (reason CAPTURE, onto
 *      fresh pages), bytes per second against a plain memcpy of the same
 *      bytes into fresh memory in the same run (target >= 0.8 x); the bytes
 *      are read back after the move.
 *   F  footprint: peak reserved / peak live of every trace (the bundled
 *      one and each --footprint trace) with each preset (VIRTUAL too) and
 *      relocation policy on a 141 GiB DRY device, as hippo-replay replays
 *      it (policy wanted: relocate_when_wanted before every reservation;
 *      explicit-every=1000: relocate every stream after every 1000 events),
 *      with the driver calls per 1,000 events each costs and the targets
 *      of the default (ADAPTIVE, wanted).
 *   W  waits: a reserve+release pair on a HOST device while 0, 64 or 1,024
 *      released slices wait on another stream's queued copy (record_use),
 *      and the event queries each reservation makes (the backend's
 *      counters): one per user stream, not one per waiting slice.
 *
 * Every random stream (operations, sizes, release indices) is generated
 * before the clock starts, from a fixed seed (splitmix64 seeding
 * xoshiro256**), so every repetition and every plugin sees the same work.
 * Each repetition opens a fresh device; only the loop itself is timed
 * (CLOCK_MONOTONIC around the whole loop).  Figures are the median (and
 * minimum) over --reps repetitions.
 *
 * Usage: hippo-bench [--plugin PATH] [--trace PATH] [--footprint PATH]...
 *                    [--reps N] [--ops N] [--only A|B|C|E|R|F|V|W]
 *                    [--quick] [--versus PATH]
 *
 * The plugin is --plugin, else $HIPPO_PLUGIN, else the build tree's plugin
 * when run from the build tree, else the installed one (tool_plugin_path()
 * of tools/toolutil.h, shared with hippo-replay).  The trace of C is read by
 * tools/trace.c, hippo-replay's parser.  --ops sets the operations of A and the timed
 * pairs of B.  --quick shrinks everything for a smoke test (< 5 s).
 * --versus PATH loads a second plugin (another build) and runs workload
 * V: A's four cases through both, the repetitions interleaved (rep r runs
 * one plugin then the other, the first alternating with r), so a noisy
 * spell of a shared machine falls on both; it prints each one's median
 * and minimum and their ratio.  With --versus and no --only, V alone runs.
 * Any unexpected status prints its name and last_error() and exits 1.
 *
 * This file holds the plugin's table and the fatal status, the options,
 * the summary table (the verdicts, the rows) and main; hippo-bench.h lists
 * the files of the workloads and declares what the files share.
 */
#include "hippo.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "hippo-bench.h"
#include "steps.h"
#include "toolutil.h"
#include "trace.h"

const char *const bench_prog = "hippo-bench";
const hippo_api *hb_api;

/* An unexpected status from the plugin: name it, say what failed, exit 1. */
void hb_die_status(hippo_status st, const char *what) {
  tool_die_status(bench_prog, hb_api, st, what);
}

/* How a figure stands against its target, for the tables: "met by M" or
 * "MISSED by M", M the distance to the target with `digits` decimals
 * (at_most: the figure must be <= the target, else >=). */
const char *hb_verdict(char *buf, size_t n, double value, double target,
                       int at_most, int digits) {
  int met = at_most ? value <= target : value >= target;
  double by = at_most ? target - value : value - target;
  snprintf(buf, n, "%s by %.*f", met ? "met" : "MISSED", digits,
           by < 0 ? -by : by);
  return buf;
}

/* ------------------------------------------------------------------------ */
/* Options. */
static void usage_exit(int code) {
  FILE *f = code ? stderr : stdout;
  fprintf(f,
          "usage: hippo-bench [--plugin PATH] [--trace PATH] "
          "[--footprint PATH]... [--reps N]\n"
          "                   [--ops N] [--only A|B|C|E|R|F|V|W] [--quick]\n"
          "                   [--versus PATH]\n"
          "  --plugin PATH  the plugin (default: $HIPPO_PLUGIN, else\n"
          "                 %s when run from the build tree, else\n"
          "                 %s)\n"
          "  --trace PATH   trace for workloads C and F (op,id,size,stream)\n"
          "  --footprint PATH  another trace for F (may repeat, 16 at most)\n"
          "  --reps N       repetitions per figure (default 5)\n"
          "  --ops N        operations of A, timed pairs of B (default "
          "1000000)\n"
          "  --only A|B|C|E|R|F|V|W  run one workload (may repeat)\n"
          "  --quick        small sizes, a smoke test\n"
          "  --versus PATH  workload V: A's cases through this plugin and\n"
          "                 PATH (another build), repetitions interleaved\n",
          tool_build_plugin, tool_installed_plugin);
  exit(code);
}

static uint64_t parse_count(const char *opt, const char *s) {
  uint64_t v;
  if (tool_parse_u64(s, &v) != TOOL_NUM_OK || v == 0)
    bench_fatal("%s wants a positive integer, not '%s'", opt, s);
  return v;
}

static void parse_options(int argc, char **argv, options *o) {
  int only = 0;
  memset(o, 0, sizeof *o);
  o->reps = 5;
  o->ops = 1000000;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help"))
      usage_exit(0);
    if (!strcmp(a, "--quick")) {
      o->quick = 1;
      continue;
    }
    if (!strcmp(a, "--plugin") || !strcmp(a, "--trace") ||
        !strcmp(a, "--reps") || !strcmp(a, "--ops") || !strcmp(a, "--only") ||
        !strcmp(a, "--footprint") || !strcmp(a, "--versus")) {
      if (i + 1 >= argc)
        bench_fatal("%s needs a value", a);
      val = argv[++i];
    } else {
      fprintf(stderr, "hippo-bench: unknown option '%s'\n", a);
      usage_exit(2);
    }
    if (!strcmp(a, "--plugin")) {
      o->plugin = val;
    } else if (!strcmp(a, "--versus")) {
      o->versus = val;
    } else if (!strcmp(a, "--trace")) {
      o->trace = val;
    } else if (!strcmp(a, "--footprint")) {
      if (o->nfootprint == 16)
        bench_fatal("--footprint: at most 16 traces");
      o->footprint[o->nfootprint++] = val;
    } else if (!strcmp(a, "--reps")) {
      uint64_t r = parse_count(a, val);
      if (r > 1000)
        bench_fatal("--reps %s: at most 1000", val);
      o->reps = (unsigned)r;
      o->reps_set = 1;
    } else if (!strcmp(a, "--ops")) {
      o->ops = parse_count(a, val);
      if (o->ops > ((uint64_t)1 << 31))
        bench_fatal("--ops %s: at most 2^31", val);
      o->ops_set = 1;
    } else {
      only = 1;
      if (!strcmp(val, "A") || !strcmp(val, "a"))
        o->run_a = 1;
      else if (!strcmp(val, "B") || !strcmp(val, "b"))
        o->run_b = 1;
      else if (!strcmp(val, "C") || !strcmp(val, "c"))
        o->run_c = 1;
      else if (!strcmp(val, "R") || !strcmp(val, "r"))
        o->run_r = 1;
      else if (!strcmp(val, "F") || !strcmp(val, "f"))
        o->run_f = 1;
      else if (!strcmp(val, "E") || !strcmp(val, "e"))
        o->run_e = 1;
      else if (!strcmp(val, "V") || !strcmp(val, "v"))
        o->run_v = 1;
      else if (!strcmp(val, "W") || !strcmp(val, "w"))
        o->run_w = 1;
      else
        bench_fatal("--only wants A, B, C, E, R, F, V or W, not '%s'", val);
    }
  }
  if (o->run_v && !o->versus)
    bench_fatal("workload V compares two plugins: give the other with --versus");
  if (!only && o->versus)
    o->run_v = 1;
  else if (!only)
    o->run_a = o->run_b = o->run_c = o->run_r = o->run_f = o->run_e =
        o->run_w = 1;
  if (o->quick) {
    if (!o->ops_set)
      o->ops = 20000;
    if (!o->reps_set)
      o->reps = 3;
  }
  o->plugin = tool_plugin_path(o->plugin);
}

/* ------------------------------------------------------------------------ */
/* The summary table, filled as the workloads run. */

#define MAX_ROWS 160
typedef struct row {
  char workload[8];
  char what[112];
  char figure[96];
  char target[112];
} row;
static row rows[MAX_ROWS];
static int nrows;

void hb_add_row(const char *workload, const char *what, const char *figure,
                const char *target) {
  if (nrows == MAX_ROWS)
    return;
  snprintf(rows[nrows].workload, sizeof rows[nrows].workload, "%s", workload);
  snprintf(rows[nrows].what, sizeof rows[nrows].what, "%s", what);
  snprintf(rows[nrows].figure, sizeof rows[nrows].figure, "%s", figure);
  snprintf(rows[nrows].target, sizeof rows[nrows].target, "%s", target);
  nrows++;
}

/* ------------------------------------------------------------------------ */
/* The machine and the summary. */

static void print_summary(const options *o) {
  struct utsname un;
  char cpu[256];
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (uname(&un) != 0)
    snprintf(un.machine, sizeof un.machine, "unknown");
  bench_cpu_model(cpu, sizeof cpu);
  printf("\n## Summary\n\n");
  printf("Machine: %s, %s, %ld cores. DRY device (bookkeeping only), "
         "%u reps%s.\n\n",
         un.machine, cpu, cores, o->reps, o->quick ? ", --quick" : "");
  printf("| workload | case | figure | target |\n");
  printf("|---|---|---|---|\n");
  for (int i = 0; i < nrows; i++)
    printf("| %s | %s | %s | %s |\n", rows[i].workload, rows[i].what,
           rows[i].figure, rows[i].target);
}

int main(int argc, char **argv) {
  options o;
  void *lib, *other_lib = NULL;
  const hippo_api *other = NULL;

  setvbuf(stdout, NULL, _IOLBF, 0);
  parse_options(argc, argv, &o);
  if (tool_load("hippo-bench", o.plugin, &lib, &hb_api) != HIPPO_SUCCESS)
    exit(1);
  if (!HIPPO_API_HAS(hb_api, relocate_with))
    bench_fatal("plugin '%s' has a table of %u bytes; the bench needs one with "
                "relocate_with",
                o.plugin, hb_api->struct_size);
  printf("hippo-bench: plugin %s (ABI %u.%u)\n", o.plugin,
         hb_api->abi_version >> 16, hb_api->abi_version & 0xffffu);
  if (o.versus) {
    const hippo_api *this_api = hb_api;
    if (tool_load("hippo-bench", o.versus, &other_lib, &other) !=
        HIPPO_SUCCESS)
      exit(1);
    hb_api = this_api;
    printf("hippo-bench: versus %s (ABI %u.%u)\n", o.versus,
           other->abi_version >> 16, other->abi_version & 0xffffu);
  }

  if (o.run_a) {
    hb_workload_a(&o);
    hb_workload_a_presets(&o);
  }
  if (o.run_b)
    hb_workload_b(&o);
  if (o.run_c)
    hb_workload_c(&o);
  if (o.run_r)
    hb_workload_r(&o);
  if (o.run_e)
    hb_workload_e(&o);
  if (o.run_w)
    hb_workload_w(&o);
  if (o.run_f)
    hb_workload_f(&o);
  if (o.run_v)
    hb_workload_v(&o, other);
  print_summary(&o);
  if (other_lib)
    dlclose(other_lib);
  dlclose(lib);
  return 0;
}
