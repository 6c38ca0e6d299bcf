/* steps.h -- hippo-replay's repeated training steps (--steps N): the
 * figures of each step, priced with a per-call latency table.
 *
 * A step replays the whole trace once; blocks the trace never frees are
 * made in step 1 only (they live on, as a model's weights do), every
 * other block again, with a fresh handle, in each step.  A step's
 * figures are the differences of the backend's counters across it (the
 * calls a real runtime would receive: hippo_emu_counters, one
 * HIPPO_CALL_VM_MAP being a create and a map, one HIPPO_CALL_VM_UNMAP an
 * unmap and a release) and the peaks seen in it.
 *
 * Invariant of a filled step_figures: counted says whether the counters
 * were read (HOST, DRY: yes; a GPU: no, the call fields are 0); the
 * driver_us figures are the calls priced with step_latency (low and high
 * ends), waits not priced. */
#ifndef HIPPO_STEPS_H
#define HIPPO_STEPS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "hippo.h"

struct step_figures {
  uint32_t step;          /* from 1 */
  uint64_t events;        /* events replayed in it */
  uint64_t peak_live_bytes;
  uint64_t peak_mapped_bytes; /* peak bytes reserved (mapped granules on a
                                 VIRTUAL pool) */
  bool counted;
  uint64_t vm_reserve, vm_create, vm_map, vm_set_access, vm_unmap,
      vm_release;
  uint64_t driver_allocs, driver_frees;
  uint64_t waits;
  double driver_us_low, driver_us_high;
};

/* A step of a replay on `dev`: begun (f zeroed for step `step`, `live`
 * bytes live, the counters read into *c0 where `counted`: an emulated
 * device's), sampled after each reservation (the peaks: the device's
 * bytes reserved now), ended (its call figures). */
void step_begin(struct step_figures *f, const hippo_api *api,
                hippo_device *dev, bool counted, uint32_t step, uint64_t live,
                hippo_emu_counters *c0);
void step_sample(struct step_figures *f, const hippo_api *api,
                 hippo_device *dev, uint64_t live);
void step_end(struct step_figures *f, const hippo_api *api,
              hippo_device *dev, const hippo_emu_counters *c0);
/* The call figures of a step from the counters before and after it. */
void step_count(struct step_figures *f, const hippo_emu_counters *before,
                const hippo_emu_counters *after);
/* Every driver call of the step: VM calls, allocations and frees. */
uint64_t step_calls(const struct step_figures *f);
/* Per 1,000 of the step's events (0 without events). */
double step_per_1000(uint64_t n, const struct step_figures *f);
/* The summary's lines for one step ("step N: ..."), and its JSON object
 * (`indent` spaces before it; a comma after unless last). */
void step_print_text(FILE *out, const struct step_figures *f);
void step_print_json(FILE *out, const struct step_figures *f, int indent,
                     bool last);

#endif /* HIPPO_STEPS_H */
