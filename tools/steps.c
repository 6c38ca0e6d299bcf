/* steps.c -- the figures of hippo-replay's repeated steps (steps.h). */
#include <config.h>

#include <inttypes.h>

#include <string.h>

#include "steps.h"
#include "toolutil.h"

/* Microseconds a call costs on a GPU, low and high ends, per kind.  The
 * sources (docs/benchmarks.md keeps the table with them):
 *  - cuMemAddressReserve 9-19, cuMemCreate 7.6-193, cuMemMap 1.0-1.5,
 *    cuMemSetAccess 21-36, cuMemUnmap 11-26: kvcached's bench_vmm on two
 *    NVIDIA GPUs (an A100 and a smaller card), 2 MiB pages, one thread;
 *  - cuMemRelease: unpublished; taken as cuMemUnmap;
 *  - cudaMalloc 50-193: about 50 us from 4 KiB to 512 KiB measured on a
 *    Tesla-era card (University of Virginia, memory management overhead),
 *    more above; no newer published figure, so the high end is a 2 MiB
 *    cuMemCreate's, which a page allocation also makes;
 *  - cudaFree: unpublished apart from its implicit synchronization; taken
 *    as cuMemUnmap (the wait is counted in waits, not priced). */
static const struct {
  double low, high;
} step_latency[] = {
    {9.0, 19.0},   /* reserve */
    {7.6, 193.0},  /* create */
    {1.0, 1.5},    /* map */
    {21.0, 36.0},  /* set access */
    {11.0, 26.0},  /* unmap */
    {11.0, 26.0},  /* release */
    {50.0, 193.0}, /* driver alloc */
    {11.0, 26.0},  /* driver free */
};

void step_count(struct step_figures *f, const hippo_emu_counters *before,
                const hippo_emu_counters *after) {
#define D(k) (after->calls[k] - before->calls[k])
  uint64_t n[8];
  f->counted = true;
  f->vm_reserve = D(HIPPO_CALL_VM_RANGE);
  f->vm_create = f->vm_map = D(HIPPO_CALL_VM_MAP);
  f->vm_set_access = D(HIPPO_CALL_VM_ACCESS);
  f->vm_unmap = f->vm_release = D(HIPPO_CALL_VM_UNMAP);
  f->driver_allocs = D(HIPPO_CALL_ALLOC);
  f->driver_frees = D(HIPPO_CALL_FREE);
#undef D
  f->waits = after->waits - before->waits;
  n[0] = f->vm_reserve;
  n[1] = f->vm_create;
  n[2] = f->vm_map;
  n[3] = f->vm_set_access;
  n[4] = f->vm_unmap;
  n[5] = f->vm_release;
  n[6] = f->driver_allocs;
  n[7] = f->driver_frees;
  f->driver_us_low = f->driver_us_high = 0;
  for (int k = 0; k < 8; k++) {
    f->driver_us_low += (double)n[k] * step_latency[k].low;
    f->driver_us_high += (double)n[k] * step_latency[k].high;
  }
}

void step_begin(struct step_figures *f, const hippo_api *api,
                hippo_device *dev, bool counted, uint32_t step, uint64_t live,
                hippo_emu_counters *c0) {
  memset(f, 0, sizeof *f);
  f->step = step;
  f->peak_live_bytes = live;
  memset(c0, 0, sizeof *c0);
  c0->struct_size = sizeof *c0;
  f->counted =
      counted && tool_emu(api)->counters(dev, c0) == HIPPO_SUCCESS;
}

void step_sample(struct step_figures *f, const hippo_api *api,
                 hippo_device *dev, uint64_t live) {
  hippo_usage u;
  if (live > f->peak_live_bytes)
    f->peak_live_bytes = live;
  memset(&u, 0, sizeof u);
  u.struct_size = sizeof u;
  if (api->usage(dev, NULL, &u) == HIPPO_SUCCESS &&
      u.bytes_reserved > f->peak_mapped_bytes)
    f->peak_mapped_bytes = u.bytes_reserved;
}

void step_end(struct step_figures *f, const hippo_api *api,
              hippo_device *dev, const hippo_emu_counters *c0) {
  hippo_emu_counters c1;
  memset(&c1, 0, sizeof c1);
  c1.struct_size = sizeof c1;
  if (f->counted && tool_emu(api)->counters(dev, &c1) == HIPPO_SUCCESS)
    step_count(f, c0, &c1);
  else
    f->counted = false;
}

uint64_t step_calls(const struct step_figures *f) {
  return f->vm_reserve + f->vm_create + f->vm_map + f->vm_set_access +
         f->vm_unmap + f->vm_release + f->driver_allocs + f->driver_frees;
}

double step_per_1000(uint64_t n, const struct step_figures *f) {
  return f->events ? (double)n * 1000.0 / (double)f->events : 0.0;
}

static double ratio(uint64_t a, uint64_t b) {
  return b ? (double)a / (double)b : 0.0;
}

void step_print_text(FILE *out, const struct step_figures *f) {
  fprintf(out,
          "step %" PRIu32 ": %" PRIu64 " events, peak live %" PRIu64
          " B, peak mapped %" PRIu64 " B (%.4f x live)\n",
          f->step, f->events, f->peak_live_bytes, f->peak_mapped_bytes,
          ratio(f->peak_mapped_bytes, f->peak_live_bytes));
  if (!f->counted) {
    fprintf(out, "step %" PRIu32 " calls: n/a (a GPU backend has no "
                 "counters)\n",
            f->step);
    return;
  }
  fprintf(out,
          "step %" PRIu32 " calls: %" PRIu64 " (%.1f per 1000 events): vm "
          "reserve %" PRIu64 ", create %" PRIu64 ", map %" PRIu64
          ", set_access %" PRIu64 ", unmap %" PRIu64 ", release %" PRIu64
          "; driver allocs %" PRIu64 ", frees %" PRIu64 "\n",
          f->step, step_calls(f), step_per_1000(step_calls(f), f),
          f->vm_reserve, f->vm_create, f->vm_map, f->vm_set_access,
          f->vm_unmap, f->vm_release, f->driver_allocs, f->driver_frees);
  fprintf(out,
          "step %" PRIu32 " waits: %" PRIu64 " (%.2f per 1000 events); "
          "driver time %.1f-%.1f ms\n",
          f->step, f->waits, step_per_1000(f->waits, f),
          f->driver_us_low / 1000.0, f->driver_us_high / 1000.0);
}

void step_print_json(FILE *out, const struct step_figures *f, int indent,
                     bool last) {
  fprintf(out,
          "%*s{\"step\": %" PRIu32 ", \"events\": %" PRIu64
          ", \"peak_live_bytes\": %" PRIu64 ", \"peak_mapped_bytes\": %" PRIu64,
          indent, "", f->step, f->events, f->peak_live_bytes,
          f->peak_mapped_bytes);
  if (f->counted)
    fprintf(out,
            ", \"vm_calls\": {\"reserve\": %" PRIu64 ", \"create\": %" PRIu64
            ", \"map\": %" PRIu64 ", \"set_access\": %" PRIu64
            ", \"unmap\": %" PRIu64 ", \"release\": %" PRIu64
            "}, \"driver_allocs\": %" PRIu64 ", \"driver_frees\": %" PRIu64
            ", \"waits\": %" PRIu64
            ", \"driver_us_low\": %.1f, \"driver_us_high\": %.1f}",
            f->vm_reserve, f->vm_create, f->vm_map, f->vm_set_access,
            f->vm_unmap, f->vm_release, f->driver_allocs, f->driver_frees,
            f->waits, f->driver_us_low, f->driver_us_high);
  else
    fprintf(out, ", \"vm_calls\": null, \"driver_allocs\": null, "
                 "\"driver_frees\": null, \"waits\": null, "
                 "\"driver_us_low\": null, \"driver_us_high\": null}");
  fprintf(out, "%s\n", last ? "" : ",");
}
