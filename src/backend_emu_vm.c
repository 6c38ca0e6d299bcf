/* backend_emu_vm.c -- virtual memory on the emulated devices (backend.h:
 * vm_granularity, vm_reserve, vm_release, vm_map, vm_unmap).
 *
 * A range is address space with no memory behind it until granules are
 * mapped; its mapped runs are kept sorted and merged (backend_emu.h,
 * hippo__emu_range), so a copy or emu_read/emu_write inside a mapped run is
 * accepted like one inside a page.  Mapped bytes count against the
 * emulated capacity with the pages' (bytes_held).  HOST backs a range
 * with a memfd (backend_host.c: each granule mapped MAP_SHARED|MAP_FIXED
 * from the file, given back by a PROT_NONE mapping over it and a hole
 * punched in the file, so its memory really returns); DRY holds no memory
 * and only counts.
 *
 * Calls are counted by kind, as a driver would receive them: a vm_reserve
 * or vm_release is one HIPPO_CALL_VM_RANGE; vm_map makes physical
 * allocations of its `granule` bytes, each one HIPPO_CALL_VM_MAP (create
 * and map), then sets access over its whole span once
 * (HIPPO_CALL_VM_ACCESS); vm_unmap gives whole allocations back, each one
 * HIPPO_CALL_VM_UNMAP (unmap and release), and refuses part of one; a
 * vm_unmap with wait counts a host-side wait (waits).  An injected fault
 * fails that call with nothing changed (vm_map gives back the
 * allocations the call had made, one HIPPO_CALL_VM_UNMAP each; vm_unmap
 * stops there, saying how far it got).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend_emu.h"

static hippo__emu *emu_of(hippo__backend *be) { return (hippo__emu *)be; }

/* The range holding addr, or NULL.  Locked. */
static hippo__emu_range *range_at(const hippo__emu *emu, uint64_t addr) {
  for (size_t i = 0; i < emu->range_count; i++)
    if (addr - emu->ranges[i].addr < emu->ranges[i].size)
      return &emu->ranges[i];
  return NULL;
}

bool hippo__emu_vm_holds(const hippo__emu *emu, uint64_t addr, uint64_t size,
                         uint64_t run[2]) {
  const hippo__emu_range *r = range_at(emu, addr);
  if (!r)
    return false;
  return hippo__vm_runs_holding(&r->runs, addr, run) &&
         size <= run[1] - (addr - run[0]);
}

hippo_status hippo__emu_vm_granularity(hippo__backend *be,
                                       uint64_t *granule) {
  hippo__emu *emu = emu_of(be);
  if (!emu->vm_granularity)
    return hippo__error_set(HIPPO_UNSUPPORTED,
                            "%s vm_granularity: no virtual memory",
                            emu->name);
  *granule = emu->vm_granularity;
  return HIPPO_SUCCESS;
}

/* A size or an address that is not a positive multiple of the
 * granularity.  Locked. */
static hippo_status not_granular(const hippo__emu *emu, const char *call,
                                 const char *what, uint64_t value,
                                 uint64_t granule) {
  return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s %s: %s %#llx is not a positive multiple of "
                          "the granule %llu B",
                          emu->name, call, what, (unsigned long long)value,
                          (unsigned long long)granule);
}

hippo_status hippo__emu_vm_reserve(hippo__backend *be, uint64_t size,
                                   uint64_t align, uint64_t *addr) {
  hippo__emu *emu = emu_of(be);
  uint64_t g = emu->vm_granularity;
  hippo__emu_range r;
  hippo_status st;

  pthread_mutex_lock(&emu->mutex);
  if ((st = hippo__emu_call(emu, HIPPO_CALL_VM_RANGE, "vm_reserve")))
    goto out;
  if (size == 0 || size % g) {
    st = not_granular(emu, "vm_reserve", "size", size, g);
    goto out;
  }
  if (!hippo__is_pow2(align) || align < g)
    align = g;
  if (emu->range_count == emu->range_cap) {
    size_t cap = emu->range_cap ? emu->range_cap * 2 : 8;
    hippo__emu_range *grown = realloc(emu->ranges, cap * sizeof *grown);
    if (!grown) {
      st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s vm_reserve: out of host memory for %zu "
                            "ranges",
                            emu->name, cap);
      goto out;
    }
    emu->ranges = grown;
    emu->range_cap = cap;
  }
  memset(&r, 0, sizeof r);
  r.size = size;
  r.fd = -1;
  if (emu->cls->range_reserve) {
    if ((st = emu->cls->range_reserve(emu, align, &r)))
      goto out;
  } else { /* synthetic, above every page and range ever held */
    uint64_t start;
    if (!hippo__align_up(emu->addr_end ? emu->addr_end : align, align,
                         &start) ||
        start > UINT64_MAX - size) {
      st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s vm_reserve: the synthetic address space is "
                            "used up; open a new device",
                            emu->name);
      goto out;
    }
    r.addr = start;
  }
  if (r.addr + size > emu->addr_end)
    emu->addr_end = r.addr + size;
  emu->ranges[emu->range_count++] = r;
  emu->bytes_virtual += size;
  *addr = r.addr;
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

hippo_status hippo__emu_vm_release(hippo__backend *be, uint64_t addr,
                                   uint64_t size) {
  hippo__emu *emu = emu_of(be);
  hippo__emu_range *r;
  hippo_status st;
  int err;

  pthread_mutex_lock(&emu->mutex);
  if ((st = hippo__emu_call(emu, HIPPO_CALL_VM_RANGE, "vm_release")))
    goto out;
  r = range_at(emu, addr);
  if (!r || r->addr != addr || r->size != size) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s vm_release: [%#llx, +%llu) is not a range "
                          "vm_reserve gave (released twice?)",
                          emu->name, (unsigned long long)addr,
                          (unsigned long long)size);
    goto out;
  }
  if (r->mapped) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s vm_release: range %#llx still has %llu B "
                          "mapped; unmap them first",
                          emu->name, (unsigned long long)addr,
                          (unsigned long long)r->mapped);
    goto out;
  }
  if (emu->cls->range_release && (err = emu->cls->range_release(r)) != 0) {
    st = hippo__error_set(HIPPO_BACKEND_ERROR,
                          "%s vm_release: range %#llx: %s", emu->name,
                          (unsigned long long)addr, strerror(err));
    goto out;
  }
  hippo__vm_runs_free(&r->runs);
  free(r->heads);
  emu->bytes_virtual -= size;
  *r = emu->ranges[--emu->range_count];
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

/* The checks vm_map and vm_unmap share: granule (an allocation's size) a
 * positive multiple of the granularity, [addr, addr + size) a whole number
 * of them, aligned to the granularity, inside one range.
 * Locked. */
static hippo_status span_check(hippo__emu *emu, const char *call,
                               uint64_t addr, uint64_t size, uint64_t granule,
                               hippo__emu_range **out) {
  uint64_t g = emu->vm_granularity;
  hippo__emu_range *r;
  if (granule == 0 || granule % g)
    return not_granular(emu, call, "granule", granule, g);
  if (size == 0 || size % granule)
    return not_granular(emu, call, "size", size, granule);
  r = range_at(emu, addr);
  if (!r || (addr - r->addr) % g || size > r->size - (addr - r->addr))
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s %s: [%#llx, +%llu) is not granule-aligned "
                            "inside a range vm_reserve gave",
                            emu->name, call, (unsigned long long)addr,
                            (unsigned long long)size);
  *out = r;
  return HIPPO_SUCCESS;
}

/* Bytes [a, b) of r go back: the host's memory first (HOST), then the
 * runs and the figures.  0 or an errno.  Locked. */
static int unmap_now(hippo__emu *emu, hippo__emu_range *r, uint64_t a,
                     uint64_t b) {
  int err;
  if (!hippo__vm_runs_room(&r->runs, 1))
    return ENOMEM;
  err = emu->cls->range_drop ? emu->cls->range_drop(r, a, b - a) : 0;
  if (err)
    return err;
  hippo__vm_runs_remove(&r->runs, a, b);
  r->mapped -= b - a;
  emu->bytes_mapped -= b - a;
  emu->bytes_held -= b - a;
  if (emu->cls->range_drop)
    emu->host_bytes_mapped -= b - a;
  return 0;
}

/* The unit of the granularity holding addr (inside r), and its head bit
 * (r->heads, backend_emu.h).  Locked. */
static uint64_t unit_of(const hippo__emu *emu, const hippo__emu_range *r,
                        uint64_t addr) {
  return (addr - r->addr) / emu->vm_granularity;
}
static bool head_at(const hippo__emu_range *r, uint64_t u) {
  return r->heads && (r->heads[u >> 6] >> (u & 63) & 1);
}
static void head_put(hippo__emu_range *r, uint64_t u, bool on) {
  if (on)
    r->heads[u >> 6] |= UINT64_C(1) << (u & 63);
  else
    r->heads[u >> 6] &= ~(UINT64_C(1) << (u & 63));
}

/* Whether [at, at + alloc) is exactly one allocation vm_map made: it
 * starts at a head, holds no other, and what follows is another's head or
 * unmapped.  Locked. */
static bool whole_allocation(const hippo__emu *emu, const hippo__emu_range *r,
                             uint64_t at, uint64_t alloc) {
  uint64_t u = unit_of(emu, r, at), n = alloc / emu->vm_granularity;
  if (!head_at(r, u))
    return false;
  for (uint64_t k = 1; k < n; k++)
    if (head_at(r, u + k))
      return false;
  return at + alloc - r->addr >= r->size || head_at(r, u + n) ||
         !hippo__vm_runs_mapped_in(&r->runs, at + alloc,
                                   at + alloc + emu->vm_granularity);
}

/* Allocation [at, at + alloc) of r goes back: unmapped, released, no
 * longer a head.  0 or an errno.  Locked. */
static int drop_allocation(hippo__emu *emu, hippo__emu_range *r, uint64_t at,
                           uint64_t alloc) {
  int err = unmap_now(emu, r, at, at + alloc);
  if (err == 0) {
    head_put(r, unit_of(emu, r, at), false);
    emu->granules_mapped--;
  }
  return err;
}

hippo_status hippo__emu_vm_map(hippo__backend *be, uint64_t addr,
                               uint64_t size, uint64_t granule) {
  hippo__emu *emu = emu_of(be);
  hippo__emu_range *r = NULL;
  hippo_status st;
  uint64_t at = addr;

  pthread_mutex_lock(&emu->mutex);
  if ((st = span_check(emu, "vm_map", addr, size, granule, &r)))
    goto out;
  if (hippo__vm_runs_mapped_in(&r->runs, addr, addr + size)) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s vm_map: [%#llx, +%llu) is mapped already "
                          "(in part)",
                          emu->name, (unsigned long long)addr,
                          (unsigned long long)size);
    goto out;
  }
  if (size > emu->capacity - emu->bytes_held) {
    uint64_t args[] = {size, emu->capacity - emu->bytes_held,
                       emu->capacity};
    st = hippo__error_lazy(
        HIPPO_OUT_OF_MEMORY,
        emu->cls->has_bytes
            ? "HOST vm_map: %llu bytes requested, %llu of %llu bytes free "
              "(emulated capacity); release or clean up memory, or open "
              "the device with a larger capacity"
            : "DRY vm_map: %llu bytes requested, %llu of %llu bytes free "
              "(emulated capacity); release or clean up memory, or open "
              "the device with a larger capacity",
        args, 3);
    goto out;
  }
  if (!r->heads) {
    uint64_t units = r->size / emu->vm_granularity;
    r->heads = calloc((size_t)((units + 63) / 64), sizeof *r->heads);
    if (!r->heads) {
      st = hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "%s vm_map: out of host memory for the records "
                            "of a range of %llu B",
                            emu->name, (unsigned long long)r->size);
      goto out;
    }
  }
  /* each allocation: created and mapped (one VM_MAP); then access for
   * the whole span (one VM_ACCESS), as cuMemSetAccess over a run */
  for (; at < addr + size; at += granule) {
    int err;
    if ((st = hippo__emu_call(emu, HIPPO_CALL_VM_MAP, "vm_map")))
      break;
    err = !hippo__vm_runs_room(&r->runs, 1) ? ENOMEM
          : emu->cls->range_back ? emu->cls->range_back(r, at, granule)
                                 : 0;
    if (err) {
      st = hippo__error_set(
          HIPPO_OUT_OF_MEMORY,
          "%s vm_map: allocation %#llx of %llu B: %s%s", emu->name,
          (unsigned long long)at, (unsigned long long)granule, strerror(err),
          err == ENOMEM && emu->cls->range_back
              ? " (the host is out of memory, or out of mappings: see "
                "vm.max_map_count)"
              : "");
      break;
    }
    hippo__vm_runs_add(&r->runs, at, at + granule);
    head_put(r, unit_of(emu, r, at), true);
    r->mapped += granule;
    emu->bytes_mapped += granule;
    emu->bytes_held += granule;
    if (emu->cls->range_back)
      emu->host_bytes_mapped += granule;
    emu->granules_mapped++;
  }
  if (st == HIPPO_SUCCESS)
    st = hippo__emu_call(emu, HIPPO_CALL_VM_ACCESS, "vm_map (set access)");
  if (st != HIPPO_SUCCESS) { /* all or nothing: what this call mapped goes */
    hippo__error_kept kept;
    hippo__error_keep(&kept);
    for (uint64_t back = addr; back < at; back += granule) {
      emu->calls[HIPPO_CALL_VM_UNMAP]++; /* an unmap, counted (never
                                            failed by an injected fault) */
      (void)drop_allocation(emu, r, back, granule);
    }
    hippo__error_restore(&kept);
    goto out;
  }
  if (emu->bytes_mapped > emu->peak_bytes_mapped)
    emu->peak_bytes_mapped = emu->bytes_mapped;
  if (emu->bytes_held > emu->peak_bytes_held)
    emu->peak_bytes_held = emu->bytes_held;
out:
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

hippo_status hippo__emu_vm_unmap(hippo__backend *be, uint64_t addr,
                                 uint64_t size, uint64_t granule, bool wait,
                                 uint64_t *done) {
  hippo__emu *emu = emu_of(be);
  hippo__emu_range *r = NULL;
  hippo_status st;
  uint64_t at = addr;

  pthread_mutex_lock(&emu->mutex);
  if ((st = span_check(emu, "vm_unmap", addr, size, granule, &r)))
    goto out;
  if (hippo__vm_runs_mapped_in(&r->runs, addr, addr + size) != size) {
    st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s vm_unmap: [%#llx, +%llu) is not mapped whole",
                          emu->name, (unsigned long long)addr,
                          (unsigned long long)size);
    goto out;
  }
  for (uint64_t a = addr; a < addr + size; a += granule)
    if (!whole_allocation(emu, r, a, granule)) {
      st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s vm_unmap: [%#llx, +%llu) is not one whole "
                            "allocation vm_map made (a driver unmaps whole "
                            "mappings only)",
                            emu->name, (unsigned long long)a,
                            (unsigned long long)granule);
      goto out;
    }
  /* As a driver that orders the unmap after the device's work: a wait
   * (counted: on a GPU it synchronizes the device), or (just mapped, no
   * wait) no queued work may touch the allocations */
  if (wait)
    emu->waits++;
  if (hippo__emu_queued_on(emu, addr, size)) {
    if (!wait) {
      st = hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s vm_unmap: queued work touches [%#llx, "
                            "+%llu); unmap with wait",
                            emu->name, (unsigned long long)addr,
                            (unsigned long long)size);
      goto out;
    }
    hippo__emu_drain(emu);
  }
  for (; at < addr + size; at += granule) {
    int err;
    if ((st = hippo__emu_call(emu, HIPPO_CALL_VM_UNMAP, "vm_unmap")))
      break;
    if ((err = drop_allocation(emu, r, at, granule)) != 0) {
      st = hippo__error_set(HIPPO_BACKEND_ERROR,
                            "%s vm_unmap: allocation %#llx of %llu B: %s%s",
                            emu->name, (unsigned long long)at,
                            (unsigned long long)granule, strerror(err),
                            err == ENOMEM
                                ? " (out of host memory or kernel mappings: "
                                  "see vm.max_map_count, or use larger "
                                  "granules)"
                                : "");
      break;
    }
  }
out:
  if (done)
    *done = at - addr;
  pthread_mutex_unlock(&emu->mutex);
  return st;
}

void hippo__emu_vm_fini(hippo__emu *emu) {
  for (size_t i = 0; i < emu->range_count; i++) {
    hippo__emu_range *r = &emu->ranges[i];
    for (size_t k = 0; k < r->runs.count && emu->cls->range_drop; k++)
      (void)emu->cls->range_drop(r, r->runs.v[k].start,
                                 r->runs.v[k].end - r->runs.v[k].start);
    hippo__vm_runs_free(&r->runs);
    free(r->heads);
    r->heads = NULL;
    r->mapped = 0;
    if (emu->cls->range_release)
      (void)emu->cls->range_release(r);
  }
  free(emu->ranges);
  emu->ranges = NULL;
  emu->range_count = emu->range_cap = 0;
}
