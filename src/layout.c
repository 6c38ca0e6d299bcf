/* layout.c -- presets and validation of pool layouts, and the pool of
 * each layout entry (hippo__pool_create: the factory above the pool
 * kinds).
 *
 * SUB_SLICES, for a device of T bytes and alignment A:
 *   sliced pools whose page sizes form a ladder 4 MiB (or 4 alignments if
 *   larger), 16 MiB, 64 MiB, ...
 *   (x4 each step) up to T/4 (and at most 2^32 alignment units), each
 *   accepting slices up to a quarter of its
 *   page (so a page holds at least four of its largest slices), then an
 *   EXCLUSIVE tail pool for anything larger, up to T rounded down to A
 *   (the largest reservation a device of T bytes can hold; "up to T"
 *   below means the same).  On a device smaller
 *   than 16 MiB the first page is T/4 rounded down to A (at least A).
 *   Every pool has dealloc_period HIPPO__DEFAULT_DEALLOC_PERIOD.
 * EXCLUSIVE_PAGES: exclusive pools with max_alloc_size 1 MiB, 8 MiB,
 *   64 MiB, ... (x8 each step) below T, then one accepting up to T.
 * ADAPTIVE (the default: a device opened with layout NULL), CubeCL's
 * arena with an exclusive tail:
 *   a SLICED pool of 2 MiB pages for requests up to 64 KiB ("small"),
 *   an ARENA whose pages grow with the largest request, from 2 MiB up to
 *   T/4 (ADAPTIVE_* below; pool_arena.c has the growth rule), taking
 *   requests up to T/4, and an EXCLUSIVE pool for anything larger, up to T.
 *   On a small device each size is at most T/4 rounded down to A (at least
 *   A).  Every pool has dealloc_period HIPPO__DEFAULT_DEALLOC_PERIOD.
 *
 * Validation of a custom layout (HIPPO_POOL_CONFIG, last_error naming the
 * pool index and field): no pools or more than HIPPO__MAX_POOLS; an unknown
 * kind; a zero size field (SLICED page_size or max_slice_size, EXCLUSIVE
 * max_alloc_size); a field the kind does not use set non-zero;
 * max_slice_size > page_size; a SLICED page larger than the device; a page
 * of more than 2^32 alignment units;
 * max_pool_size below the alignment; sizes that
 * overflow when aligned; a page so small that the pool could need more than
 * HIPPO__MAX_PAGES pages (page count of min(cap, device memory)).
 * A SLICED or ARENA page_size must be a multiple of the alignment (a page
 * is carved in alignment units: rounding it silently would make a pool
 * that cannot serve its own max_slice_size).
 * ARENA pools: page_size is the smallest page, at least the alignment and
 * at most max_slice_size, the largest request and page, which must not
 * exceed the device; max_pool_size, when set, at least one smallest page.
 */
#include <stdio.h>
#include <string.h>

#include "layout.h"
#include "pool.h"

#define MiB (UINT64_C(1) << 20)
#define KiB (UINT64_C(1) << 10)
#define ADAPTIVE_SMALL_PAGE (2 * MiB)  /* the small pool's pages */
#define ADAPTIVE_SMALL_MAX (64 * KiB)  /* its largest request */
#define ADAPTIVE_FLOOR (2 * MiB)       /* the arena's smallest page */

/* `size`, but at most T/4 rounded down to the alignment (at least it). */
static uint64_t at_most_quarter(uint64_t size, uint64_t total,
                                uint64_t alignment) {
  uint64_t quarter = hippo__align_down(total / 4, alignment);
  if (size > quarter)
    size = quarter;
  return size < alignment ? alignment : size;
}

const char *hippo__pool_kind_name(hippo_pool_kind kind) {
  switch (kind) {
  case HIPPO_POOL_SLICED:
    return "SLICED";
  case HIPPO_POOL_EXCLUSIVE:
    return "EXCLUSIVE";
  case HIPPO_POOL_DIRECT:
    return "DIRECT";
  case HIPPO_POOL_PERSISTENT:
    return "PERSISTENT";
  case HIPPO_POOL_ARENA:
    return "ARENA";
  case HIPPO_POOL_VIRTUAL:
    return "VIRTUAL";
  default:
    return "unknown";
  }
}

void hippo__layout_preset(hippo_preset preset, uint64_t total,
                          uint64_t alignment, hippo__layout *out) {
  /* the largest reservation the device can hold: its capacity rounded
   * down to the alignment (device_open keeps it at least the alignment) */
  uint64_t top = hippo__align_down(total, alignment);
  memset(out, 0, sizeof *out);
  out->preset = preset;
  if (preset == HIPPO_PRESET_VIRTUAL) {
    /* one VIRTUAL pool for everything (its range, granule and threshold
     * resolved by hippo__layout_resolve), and no exclusive tail */
    hippo_pool_options *o = &out->pools[out->count++];
    o->struct_size = sizeof *o;
    o->kind = HIPPO_POOL_VIRTUAL;
    o->max_slice_size = top;
    return;
  }
  if (preset == HIPPO_PRESET_ADAPTIVE) {
    hippo_pool_options *o = &out->pools[out->count++];
    uint64_t max;
    o->struct_size = sizeof *o;
    o->kind = HIPPO_POOL_SLICED;
    o->page_size = at_most_quarter(ADAPTIVE_SMALL_PAGE, total, alignment);
    o->max_slice_size = ADAPTIVE_SMALL_MAX < o->page_size ? ADAPTIVE_SMALL_MAX
                                                          : o->page_size;
    o->dealloc_period = HIPPO__DEFAULT_DEALLOC_PERIOD;
    o = &out->pools[out->count++];
    o->struct_size = sizeof *o;
    o->kind = HIPPO_POOL_ARENA;
    o->page_size = at_most_quarter(ADAPTIVE_FLOOR, total, alignment);
    /* the largest page: T/4, and at most 2^32 alignment units */
    max = at_most_quarter(total, total, alignment);
    if (max / alignment > UINT32_MAX)
      max = UINT32_MAX * alignment;
    o->max_slice_size = max;
    o->dealloc_period = HIPPO__DEFAULT_DEALLOC_PERIOD;
  } else if (preset == HIPPO_PRESET_EXCLUSIVE_PAGES) {
    /* the step stops before max * 8 would wrap (a device of 2^63 B or
     * more ends its ladder at 2^62) */
    for (uint64_t max = MiB; max < top && out->count < HIPPO__MAX_POOLS - 1;
         max *= 8) {
      hippo_pool_options *o = &out->pools[out->count++];
      o->struct_size = sizeof *o;
      o->kind = HIPPO_POOL_EXCLUSIVE;
      o->max_alloc_size = max;
      o->dealloc_period = HIPPO__DEFAULT_DEALLOC_PERIOD;
      if (max > UINT64_MAX / 8)
        break;
    }
  } else {
    uint64_t quarter = total / 4;
    /* 4 MiB, or four alignments where those are larger */
    uint64_t page = 4 * alignment > 4 * MiB ? 4 * alignment : 4 * MiB;
    if (page > quarter) {
      page = hippo__align_down(quarter, alignment);
      if (page < alignment)
        page = alignment;
    }
    for (; out->count < HIPPO__MAX_POOLS - 1; page *= 4) {
      hippo_pool_options *o = &out->pools[out->count++];
      o->struct_size = sizeof *o;
      o->kind = HIPPO_POOL_SLICED;
      o->page_size = page;
      o->max_slice_size = page / 4 >= alignment ? page / 4 : page;
      o->dealloc_period = HIPPO__DEFAULT_DEALLOC_PERIOD;
      /* up to a quarter of the device, and at most 2^32 alignment units
       * a page (a slice record counts in 32-bit units) */
      if (page * 4 > quarter || (page * 4) / alignment > UINT32_MAX)
        break;
    }
  }
  {
    hippo_pool_options *o = &out->pools[out->count++];
    o->struct_size = sizeof *o;
    o->kind = HIPPO_POOL_EXCLUSIVE;
    o->max_alloc_size = top;
    o->dealloc_period = HIPPO__DEFAULT_DEALLOC_PERIOD;
  }
}

/* BAD(index, "field", "why", kind name, why's arguments...) */
#define BAD(i, field, fmt, kind, ...)                                          \
  hippo__error_set(HIPPO_POOL_CONFIG,                                          \
                   "layout pool %u (%s) field " field ": " fmt, i, kind,       \
                   ##__VA_ARGS__)

static hippo_status unused_zero(uint32_t i, const hippo_pool_options *o) {
  const char *kind = hippo__pool_kind_name(o->kind);
  bool sliced = o->kind == HIPPO_POOL_SLICED || o->kind == HIPPO_POOL_ARENA;
  bool virt = o->kind == HIPPO_POOL_VIRTUAL;
  if (!sliced && o->page_size)
    return BAD(i, "page_size",
               "only SLICED and ARENA pools use it; set it to 0", kind);
  if (!sliced && !virt && o->max_slice_size)
    return BAD(i, "max_slice_size",
               "only SLICED, ARENA and VIRTUAL pools use it; set it to 0",
               kind);
  if (!virt && o->range_size)
    return BAD(i, "range_size", "only VIRTUAL pools use it; set it to 0",
               kind);
  if (!virt && o->granule)
    return BAD(i, "granule", "only VIRTUAL pools use it; set it to 0", kind);
  if (!virt && o->unmap_threshold)
    return BAD(i, "unmap_threshold",
               "only VIRTUAL pools use it; set it to 0", kind);
  if (!virt && o->map_budget)
    return BAD(i, "map_budget", "only VIRTUAL pools use it; set it to 0",
               kind);
  if (virt && o->dealloc_period)
    return BAD(i, "dealloc_period",
               "a VIRTUAL pool gives granules back in batches (cleanup, "
               "reclaim, relocation, unmap_threshold), never at a "
               "reservation's tick; set it to 0",
               kind);
  if (!sliced && o->max_pool_size)
    return BAD(i, "max_pool_size",
               "only SLICED and ARENA pools use it; set it to 0", kind);
  if (o->kind != HIPPO_POOL_EXCLUSIVE && o->max_alloc_size)
    return BAD(i, "max_alloc_size", "only EXCLUSIVE pools use it; set it to 0",
               kind);
  if (o->kind != HIPPO_POOL_DIRECT && o->reclaim_at)
    return BAD(i, "reclaim_at", "only DIRECT pools use it; set it to 0", kind);
  return HIPPO_SUCCESS;
}

/* A VIRTUAL pool's options, resolved in place: granule 0 is the driver's
 * granularity but at least HIPPO__VIRTUAL_MIN_GRANULE; range_size 0 the
 * device's memory (or budget) rounded up to the granule, and no more;
 * max_slice_size 0 the range, at most the device's memory; unmap_threshold
 * 0 the default, HIPPO__VIRTUAL_DEFAULT_THRESHOLD (never), map_budget 0
 * HIPPO__VIRTUAL_DEFAULT_BUDGET. */
static hippo_status resolve_virtual(uint32_t i, hippo_pool_options *o,
                                    const hippo__backend *be) {
  uint64_t a = be->alignment, g, gran = 0, room, whole;
  const char *kind = "VIRTUAL";
  hippo_status st;
  if (!be->ops->vm_granularity)
    return hippo__error_set(HIPPO_UNSUPPORTED,
                            "layout pool %u (VIRTUAL): this device has no "
                            "virtual memory (%s%s%s); use the VIRTUAL "
                            "preset, which falls back to ADAPTIVE, or "
                            "another pool kind",
                            i, be->runtime, be->vm_why[0] ? ": " : "",
                            be->vm_why);
  st = be->ops->vm_granularity((hippo__backend *)(uintptr_t)be, &gran);
  if (st != HIPPO_SUCCESS)
    return hippo__error_wrap(st, "layout pool %u (VIRTUAL): asking the "
                             "driver's granularity",
                             i);
  g = o->granule;
  if (g == 0) {
    g = gran > HIPPO__VIRTUAL_MIN_GRANULE ? gran : HIPPO__VIRTUAL_MIN_GRANULE;
    if (g < a)
      g = a;
  }
  if (!hippo__is_pow2(g) || g % gran || g % a)
    return BAD(i, "granule",
               "%llu is not a power of two and a multiple of the driver's "
               "granularity %llu B and of the alignment %llu B",
               kind, (unsigned long long)g, (unsigned long long)gran,
               (unsigned long long)a);
  if (g > be->total_memory)
    return BAD(i, "granule",
               "%llu is larger than the device (%llu B), so no granule could "
               "ever be mapped",
               kind, (unsigned long long)g,
               (unsigned long long)be->total_memory);
  if (!hippo__align_up(be->total_memory, g, &room))
    return BAD(i, "range_size", "the device's %llu B overflow in granules",
               kind, (unsigned long long)be->total_memory);
  if (o->range_size == 0)
    o->range_size = room;
  if (o->range_size > room)
    return BAD(i, "range_size",
               "%llu is larger than the device (%llu B, %llu in granules of "
               "%llu B): no more could ever be mapped; use 0 for the device",
               kind, (unsigned long long)o->range_size,
               (unsigned long long)be->total_memory,
               (unsigned long long)room, (unsigned long long)g);
  if (o->range_size % g)
    return BAD(i, "range_size", "%llu is not a multiple of the granule %llu",
               kind, (unsigned long long)o->range_size,
               (unsigned long long)g);
  if (o->range_size / g > HIPPO__VIRTUAL_MAX_GRANULES)
    return BAD(i, "range_size",
               "%llu B are more than %llu granules of %llu B; use a larger "
               "granule or a smaller range",
               kind, (unsigned long long)o->range_size,
               (unsigned long long)HIPPO__VIRTUAL_MAX_GRANULES,
               (unsigned long long)g);
  if (o->range_size / a > UINT32_MAX)
    return BAD(i, "range_size",
               "%llu is more than 2^32 alignment units of %llu B", kind,
               (unsigned long long)o->range_size, (unsigned long long)a);
  /* nothing larger than the device: HIPPO_BUFFER_TOO_BIG, as with every
   * other kind (no pool accepts it), not an out-of-memory answer */
  whole = hippo__align_down(be->total_memory, a);
  if (o->max_slice_size == 0)
    o->max_slice_size = o->range_size < whole ? o->range_size : whole;
  if (o->max_slice_size > o->range_size)
    return BAD(i, "max_slice_size", "%llu is larger than the range %llu",
               kind, (unsigned long long)o->max_slice_size,
               (unsigned long long)o->range_size);
  if (o->max_slice_size > be->total_memory)
    return BAD(i, "max_slice_size", "%llu is larger than the device (%llu B)",
               kind, (unsigned long long)o->max_slice_size,
               (unsigned long long)be->total_memory);
  if (o->unmap_threshold == 0) /* the options in force say what it is */
    o->unmap_threshold = HIPPO__VIRTUAL_DEFAULT_THRESHOLD;
  if (o->map_budget == 0)
    o->map_budget = HIPPO__VIRTUAL_DEFAULT_BUDGET;
  o->granule = g;
  return HIPPO_SUCCESS;
}

static hippo_status validate_pool(uint32_t i, hippo_pool_options *o,
                                  const hippo__backend *be) {
  uint64_t a = be->alignment, aligned;
  const char *kind = hippo__pool_kind_name(o->kind);
  hippo_status st;
  if (o->kind != HIPPO_POOL_SLICED && o->kind != HIPPO_POOL_EXCLUSIVE &&
      o->kind != HIPPO_POOL_DIRECT && o->kind != HIPPO_POOL_ARENA &&
      o->kind != HIPPO_POOL_VIRTUAL)
    return BAD(i, "kind",
               "%u is not a pool kind (HIPPO_POOL_SLICED, _EXCLUSIVE, "
               "_DIRECT, _ARENA or _VIRTUAL)",
               kind, o->kind);
  st = unused_zero(i, o);
  if (st != HIPPO_SUCCESS)
    return st;
  if (o->kind == HIPPO_POOL_VIRTUAL)
    return resolve_virtual(i, o, be);
  if (o->kind == HIPPO_POOL_SLICED) {
    uint64_t span, pages;
    if (o->page_size == 0)
      return BAD(i, "page_size", "must not be 0", kind);
    if (o->max_slice_size == 0)
      return BAD(i, "max_slice_size", "must not be 0", kind);
    if (!hippo__align_up(o->page_size, a, &aligned))
      return BAD(i, "page_size", "%llu overflows when aligned to %llu", kind,
                 (unsigned long long)o->page_size, (unsigned long long)a);
    if (!hippo__align_up(o->max_slice_size, a, &aligned))
      return BAD(i, "max_slice_size", "%llu overflows when aligned to %llu",
                 kind, (unsigned long long)o->max_slice_size,
                 (unsigned long long)a);
    if (o->max_slice_size > o->page_size)
      return BAD(i, "max_slice_size",
                 "%llu is larger than page_size %llu; a slice must fit in a "
                 "page",
                 kind, (unsigned long long)o->max_slice_size,
                 (unsigned long long)o->page_size);
    if (o->page_size < a)
      return BAD(i, "page_size", "%llu is below the alignment %llu", kind,
                 (unsigned long long)o->page_size, (unsigned long long)a);
    if (o->page_size % a)
      return BAD(i, "page_size",
                 "%llu is not a multiple of the alignment %llu; use %llu",
                 kind, (unsigned long long)o->page_size,
                 (unsigned long long)a,
                 (unsigned long long)(o->page_size / a + 1) * a);
    if (o->page_size > be->total_memory)
      return BAD(i, "page_size",
                 "%llu is larger than the device (%llu B), so no page could "
                 "ever be had",
                 kind, (unsigned long long)o->page_size,
                 (unsigned long long)be->total_memory);
    if (o->page_size / a > UINT32_MAX)
      return BAD(i, "page_size",
                 "%llu is more than 2^32 alignment units of %llu B; use "
                 "smaller pages",
                 kind, (unsigned long long)o->page_size,
                 (unsigned long long)a);
    if (o->max_pool_size && o->max_pool_size < a)
      return BAD(i, "max_pool_size",
                 "%llu is below the alignment %llu, so nothing could ever be "
                 "allocated; use 0 for no cap",
                 kind, (unsigned long long)o->max_pool_size,
                 (unsigned long long)a);
    span = o->max_pool_size && o->max_pool_size < be->total_memory
               ? o->max_pool_size
               : be->total_memory;
    pages = span / hippo__align_down(o->page_size, a);
    if (pages > HIPPO__MAX_PAGES)
      return BAD(i, "page_size",
                 "%llu B pages over %llu B could need %llu pages, more than "
                 "the limit of %llu; use larger pages or a cap",
                 kind, (unsigned long long)o->page_size,
                 (unsigned long long)span, (unsigned long long)pages,
                 (unsigned long long)HIPPO__MAX_PAGES);
  } else if (o->kind == HIPPO_POOL_ARENA) {
    if (o->page_size < a || o->page_size % a)
      return BAD(i, "page_size",
                 "%llu is not a positive multiple of the alignment %llu (it "
                 "is the smallest page)",
                 kind, (unsigned long long)o->page_size,
                 (unsigned long long)a);
    if (o->max_slice_size < o->page_size)
      return BAD(i, "max_slice_size",
                 "%llu is below page_size %llu (it is the largest request "
                 "and the largest page)",
                 kind, (unsigned long long)o->max_slice_size,
                 (unsigned long long)o->page_size);
    if (o->max_slice_size % a)
      return BAD(i, "max_slice_size",
                 "%llu is not a multiple of the alignment %llu (it is the "
                 "largest page); use %llu",
                 kind, (unsigned long long)o->max_slice_size,
                 (unsigned long long)a,
                 (unsigned long long)(o->max_slice_size / a + 1) * a);
    if (o->max_slice_size > be->total_memory)
      return BAD(i, "max_slice_size",
                 "%llu is larger than the device (%llu B)", kind,
                 (unsigned long long)o->max_slice_size,
                 (unsigned long long)be->total_memory);
    if (o->max_slice_size / a > UINT32_MAX)
      return BAD(i, "max_slice_size",
                 "%llu is more than 2^32 alignment units of %llu B", kind,
                 (unsigned long long)o->max_slice_size,
                 (unsigned long long)a);
    if (o->max_pool_size && o->max_pool_size < o->page_size)
      return BAD(i, "max_pool_size",
                 "%llu is below page_size %llu, so no page could be taken; "
                 "use 0 for no cap",
                 kind, (unsigned long long)o->max_pool_size,
                 (unsigned long long)o->page_size);
    if ((o->max_pool_size && o->max_pool_size < be->total_memory
             ? o->max_pool_size
             : be->total_memory) /
            hippo__align_down(o->page_size, a) >
        HIPPO__MAX_PAGES)
      return BAD(i, "page_size",
                 "%llu B pages could need more than %llu pages; use a "
                 "larger smallest page or a cap",
                 kind, (unsigned long long)o->page_size,
                 (unsigned long long)HIPPO__MAX_PAGES);
  } else if (o->kind == HIPPO_POOL_EXCLUSIVE) {
    if (o->max_alloc_size == 0)
      return BAD(i, "max_alloc_size", "must not be 0", kind);
    if (!hippo__align_up(o->max_alloc_size, a, &aligned) ||
        aligned > UINT64_MAX / 2)
      return BAD(i, "max_alloc_size", "%llu overflows when aligned to %llu",
                 kind, (unsigned long long)o->max_alloc_size,
                 (unsigned long long)a);
  }
  return HIPPO_SUCCESS;
}

hippo_status hippo__layout_resolve(const hippo_layout *in,
                                   const hippo_pool_options *pools_in,
                                   const hippo__backend *be,
                                   hippo__layout *out) {
  if (!in || in->preset == HIPPO_PRESET_SUB_SLICES ||
      in->preset == HIPPO_PRESET_EXCLUSIVE_PAGES ||
      in->preset == HIPPO_PRESET_ADAPTIVE ||
      in->preset == HIPPO_PRESET_VIRTUAL) {
    hippo_preset preset = in ? in->preset : HIPPO_PRESET_ADAPTIVE;
    if (in && (in->pool_count || in->pools))
      return hippo__error_set(HIPPO_POOL_CONFIG,
                              "layout: a preset takes no pools; set "
                              "pool_count 0 and pools NULL, or use "
                              "HIPPO_PRESET_CUSTOM");
    if (preset == HIPPO_PRESET_VIRTUAL && !be->ops->vm_granularity) {
      /* the device has no virtual memory: ADAPTIVE serves instead, and
       * device_info's note says so */
      hippo__layout_preset(HIPPO_PRESET_ADAPTIVE, be->total_memory,
                           be->alignment, out);
      out->note = "the VIRTUAL preset needs virtual memory, which this "
                  "device's runtime does not offer: ADAPTIVE serves "
                  "instead";
      return HIPPO_SUCCESS;
    }
    hippo__layout_preset(preset, be->total_memory, be->alignment, out);
    for (uint32_t i = 0; i < out->count; i++)
      if (out->pools[i].kind == HIPPO_POOL_VIRTUAL) {
        hippo_status st = resolve_virtual(i, &out->pools[i], be);
        if (st != HIPPO_SUCCESS)
          return st;
      }
    return HIPPO_SUCCESS;
  }
  if (in->preset != HIPPO_PRESET_CUSTOM)
    return hippo__error_set(HIPPO_POOL_CONFIG,
                            "layout: preset %u is not a preset "
                            "(HIPPO_PRESET_ADAPTIVE, _SUB_SLICES, "
                            "_EXCLUSIVE_PAGES, _VIRTUAL or _CUSTOM)",
                            in->preset);
  if (in->pool_count == 0)
    return hippo__error_set(HIPPO_POOL_CONFIG,
                            "layout: a custom layout needs at least one pool "
                            "(pool_count is 0)");
  if (in->pool_count > HIPPO__MAX_POOLS)
    return hippo__error_set(HIPPO_POOL_CONFIG,
                            "layout: pool_count is %u, more than the limit "
                            "of %u pools",
                            in->pool_count, HIPPO__MAX_POOLS);
  memset(out, 0, sizeof *out);
  out->preset = HIPPO_PRESET_CUSTOM;
  out->count = in->pool_count;
  for (uint32_t i = 0; i < in->pool_count; i++) {
    hippo_status st;
    out->pools[i] = pools_in[i];
    st = validate_pool(i, &out->pools[i], be);
    if (st != HIPPO_SUCCESS)
      return st;
  }
  return HIPPO_SUCCESS;
}

hippo_status hippo__pool_create(hippo__backend *be, hippo__page_acct *acct,
                                const hippo_pool_options *opt,
                                hippo__pool **out) {
  switch (opt->kind) {
  case HIPPO_POOL_SLICED:
    return hippo__pool_sliced_create(be, acct, opt, out);
  case HIPPO_POOL_ARENA:
    return hippo__pool_arena_create(be, acct, opt, out);
  case HIPPO_POOL_EXCLUSIVE:
    return hippo__pool_exclusive_create(be, acct, opt, out);
  case HIPPO_POOL_DIRECT:
    return hippo__pool_direct_create(be, acct, opt, out);
  case HIPPO_POOL_VIRTUAL:
    return hippo__pool_virtual_create(be, acct, opt, out);
  default:
    return hippo__error_set(HIPPO_POOL_CONFIG, "unknown pool kind %u",
                            opt->kind);
  }
}
