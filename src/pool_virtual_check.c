/* pool_virtual_check.c -- the VIRTUAL kind's part of the check walk
 * (pool_sliced_check.c walks the slices and pages; this walks the
 * granules): every granule's count of slices against the slices that
 * touch it, the physical allocations' boundaries, and the idle and mapped
 * figures, against the invariant written in sliced.h (hippo__vgranules).
 * For tests and debugging; O(slices + granules).
 */
#include <stdlib.h>

#include "pool_virtual.h"

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond))                                                               \
      return hippo__error_set(HIPPO_INTERNAL, "VIRTUAL check: " __VA_ARGS__);  \
  } while (0)

hippo_status hippo__virtual_check(const sliced *p) {
  const hippo__vgranules *v = &p->vg;
  const hippo__pool *pool = &p->head;
  uint32_t *want = calloc(v->high ? v->high : 1, sizeof *want);
  uint64_t mapped = 0, idle = 0;
  hippo_status st = HIPPO_SUCCESS;
  if (!want)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "VIRTUAL check: host memory for %llu granules",
                            (unsigned long long)v->high);
  for (uint32_t i = 0; i < p->slice_count; i++) {
    uint64_t first, last;
    uint32_t state = STATE(&p->slices[i]);
    if (state != SLICE_LIVE && state != SLICE_GUARDED)
      continue;
    vgranules_of(p, &p->slices[i], &first, &last);
    if (last >= v->high) {
      st = hippo__error_set(HIPPO_INTERNAL,
                            "VIRTUAL check: slice %u touches granule %llu, "
                            "above every granule ever mapped (%llu)",
                            i, (unsigned long long)last,
                            (unsigned long long)v->high);
      goto out;
    }
    for (uint64_t g = first; g <= last; g++)
      want[g]++;
  }
  for (uint64_t g = 0; g < v->high; g++) {
    uint32_t r = v->ref[g];
    if ((r & GCOUNT) != want[g] || (want[g] && !(r & GMAPPED))) {
      st = hippo__error_set(HIPPO_INTERNAL,
                            "VIRTUAL check: granule %llu counts %u slices "
                            "(mapped %d), %u touch it",
                            (unsigned long long)g, r & GCOUNT,
                            !!(r & GMAPPED), want[g]);
      goto out;
    }
    mapped += !!(r & GMAPPED);
    idle += r == GMAPPED;
  }
out:
  free(want);
  if (st != HIPPO_SUCCESS)
    return st;
  for (uint64_t g = v->high; g < v->count; g++)
    CHECK(v->ref[g] == 0 && !is_head(v, g),
          "granule %llu above the high mark %llu is used",
          (unsigned long long)g, (unsigned long long)v->high);
  for (uint64_t g = 0; g < v->high; g++) {
    bool mapped_here = (v->ref[g] & GMAPPED) != 0;
    bool starts = mapped_here && (g == 0 || !(v->ref[g - 1] & GMAPPED));
    CHECK(!is_head(v, g) || mapped_here,
          "granule %llu starts an allocation but is not mapped",
          (unsigned long long)g);
    CHECK(!starts || is_head(v, g),
          "mapped granule %llu follows an unmapped one but starts no "
          "allocation",
          (unsigned long long)g);
  }
  CHECK(idle == v->idle && pool->bytes_idle == idle << v->shift,
        "%llu idle granules, counted %llu (%llu B)", (unsigned long long)idle,
        (unsigned long long)v->idle, (unsigned long long)pool->bytes_idle);
  CHECK(mapped == pool->pages && mapped << v->shift == pool->bytes_reserved,
        "%llu granules mapped, figures say %llu pages of %llu B",
        (unsigned long long)mapped, (unsigned long long)pool->pages,
        (unsigned long long)pool->bytes_reserved);
  CHECK(p->page_count <= 1 && (p->page_count == 0 || (p->pages[0].held &&
                                                      p->pages[0].addr ==
                                                          v->range)),
        "%u pages; a VIRTUAL pool has its range as its one page",
        p->page_count);
  CHECK(pool->bytes_virtual == (v->range ? v->range_size : 0),
        "%llu B of range counted, range %#llx of %llu B",
        (unsigned long long)pool->bytes_virtual,
        (unsigned long long)v->range, (unsigned long long)v->range_size);
  return HIPPO_SUCCESS;
}
