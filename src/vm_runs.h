/* vm_runs.h -- the mapped runs of a virtual range, as the backends keep
 * them (backend_emu_vm.c for HOST and DRY, backend_hip_vm.c for the GPU
 * runtimes): which bytes of the range have memory.
 *
 * Invariant: v[0 .. count) are sorted, disjoint and never adjacent
 * (neighbours merge), count <= cap.  The caller keeps the range's bounds,
 * its lock and its byte count (a granule may be mapped without a run where
 * host memory for one ran out: hippo__vm_runs_remove ignores it). */
#ifndef HIPPO_VM_RUNS_H
#define HIPPO_VM_RUNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes [start, end) have memory. */
typedef struct hippo__vm_run {
  uint64_t start, end;
} hippo__vm_run;

typedef struct hippo__vm_runs {
  hippo__vm_run *v;
  size_t count, cap;
} hippo__vm_runs;

/* Room for `more` runs (a map or an unmap adds one at most), so add and
 * remove cannot fail: false without host memory. */
bool hippo__vm_runs_room(hippo__vm_runs *r, size_t more);
/* [a, b) (none of it mapped) is mapped now: a run of its own, merged with
 * its neighbours (room was made). */
void hippo__vm_runs_add(hippo__vm_runs *r, uint64_t a, uint64_t b);
/* [a, b) (mapped, inside one run: runs never touch) is unmapped now (room
 * was made for a split); a range no run holds is left alone. */
void hippo__vm_runs_remove(hippo__vm_runs *r, uint64_t a, uint64_t b);
/* The run holding addr, as {start, length}: false when none does. */
bool hippo__vm_runs_holding(const hippo__vm_runs *r, uint64_t addr,
                            uint64_t run[2]);
/* How many bytes of [a, b) are mapped. */
uint64_t hippo__vm_runs_mapped_in(const hippo__vm_runs *r, uint64_t a,
                                  uint64_t b);
/* Frees the runs' memory; r is empty again. */
void hippo__vm_runs_free(hippo__vm_runs *r);

#endif
