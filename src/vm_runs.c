/* vm_runs.c -- the mapped runs of a virtual range (vm_runs.h). */
#include <stdlib.h>
#include <string.h>

#include "vm_runs.h"

bool hippo__vm_runs_room(hippo__vm_runs *r, size_t more) {
  if (r->count + more > r->cap) {
    size_t cap = r->cap ? r->cap : 8;
    hippo__vm_run *grown;
    while (cap < r->count + more)
      cap *= 2;
    grown = realloc(r->v, cap * sizeof *grown);
    if (!grown)
      return false;
    r->v = grown;
    r->cap = cap;
  }
  return true;
}

/* The first run ending after a. */
static size_t first_after(const hippo__vm_runs *r, uint64_t a) {
  size_t k = 0;
  while (k < r->count && r->v[k].end <= a)
    k++;
  return k;
}

void hippo__vm_runs_add(hippo__vm_runs *r, uint64_t a, uint64_t b) {
  size_t k = first_after(r, a);
  bool left = k > 0 && r->v[k - 1].end == a;
  bool right = k < r->count && r->v[k].start == b;
  if (left && right) { /* the gap between two runs closes */
    r->v[k - 1].end = r->v[k].end;
    memmove(&r->v[k], &r->v[k + 1], (r->count - k - 1) * sizeof *r->v);
    r->count--;
  } else if (left) {
    r->v[k - 1].end = b;
  } else if (right) {
    r->v[k].start = a;
  } else {
    memmove(&r->v[k + 1], &r->v[k], (r->count - k) * sizeof *r->v);
    r->v[k] = (hippo__vm_run){a, b};
    r->count++;
  }
}

void hippo__vm_runs_remove(hippo__vm_runs *r, uint64_t a, uint64_t b) {
  size_t k = first_after(r, a);
  if (k == r->count || r->v[k].start > a)
    return; /* not recorded */
  if (r->v[k].start < a && r->v[k].end > b) { /* split in two */
    memmove(&r->v[k + 1], &r->v[k], (r->count - k) * sizeof *r->v);
    r->count++;
    r->v[k].end = a;
    r->v[k + 1].start = b;
  } else if (r->v[k].start < a) {
    r->v[k].end = a;
  } else if (r->v[k].end > b) {
    r->v[k].start = b;
  } else {
    memmove(&r->v[k], &r->v[k + 1], (r->count - k - 1) * sizeof *r->v);
    r->count--;
  }
}

bool hippo__vm_runs_holding(const hippo__vm_runs *r, uint64_t addr,
                            uint64_t run[2]) {
  size_t k = first_after(r, addr);
  if (k == r->count || r->v[k].start > addr)
    return false;
  run[0] = r->v[k].start;
  run[1] = r->v[k].end - r->v[k].start;
  return true;
}

uint64_t hippo__vm_runs_mapped_in(const hippo__vm_runs *r, uint64_t a,
                                  uint64_t b) {
  uint64_t n = 0;
  for (size_t k = first_after(r, a); k < r->count && r->v[k].start < b;
       k++) {
    uint64_t lo = r->v[k].start > a ? r->v[k].start : a;
    uint64_t hi = r->v[k].end < b ? r->v[k].end : b;
    if (lo < hi)
      n += hi - lo;
  }
  return n;
}

void hippo__vm_runs_free(hippo__vm_runs *r) {
  free(r->v);
  r->v = NULL;
  r->count = r->cap = 0;
}
