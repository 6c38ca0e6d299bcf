/* toolutil.h -- what the hippo command-line programs share.
 *
 * Used by tools/hippo-replay, tools/hippo-info and bench/hippo-bench (built
 * into the convenience library tools/libhippo-tools.la):
 *  - where the plugin is (--plugin, $HIPPO_PLUGIN, the build tree's, the
 *    installed one) and loading it with a hint on failure;
 *  - strict number and byte-size parsing;
 *  - the names of backends, layout presets, pool kinds and statuses, both
 *    ways, so every tool spells them alike.
 * Nothing here exits or keeps state beyond what the comments say.
 */
#ifndef HIPPO_TOOLUTIL_H
#define HIPPO_TOOLUTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "hippo.h"

/* The plugin in the build tree and the installed one (the Makefile sets
 * HIPPO_BUILD_PLUGIN, HIPPO_INSTALLED_PLUGIN and HIPPO_BUILD_DIR, the
 * build tree, when it compiles toolutil.c; a stand-alone compile falls
 * back to relative defaults). */
extern const char tool_build_plugin[];
extern const char tool_installed_plugin[];

/* The plugin to load: `given` (--plugin) when not NULL, else $HIPPO_PLUGIN
 * when set and not empty, else tool_build_plugin when the program runs
 * uninstalled (its executable is the build tree's tools/ or bench/ one,
 * by /proc/self/exe), else tool_installed_plugin.  So an installed tool
 * never loads a build tree's plugin unless told to.  Never NULL. */
const char *tool_plugin_path(const char *given);

/* hippo_load(path); on failure prints "PROG: REASON" and a hint on how to
 * name the plugin to stderr.  Returns hippo_load's status. */
hippo_status tool_load(const char *prog, const char *path, void **lib,
                       const hippo_api **api);
/* The plugin's emulation table (hippo_api.emulation); never NULL for a
 * table tool_load accepted. */
const hippo_emu_api *tool_emu(const hippo_api *api);

/* The calls that take or give back device memory, as a GPU runtime
 * receives them (page allocations and frees, virtual ranges, a create and
 * a map per physical allocation mapped, a set-access per map call, an
 * unmap and a release per allocation given back) per 1,000 events: what
 * a layout costs in driver calls (hippo-replay, hippo-bench F). */
double tool_calls_per_1000(const hippo_emu_counters *c, uint64_t events);

/* Results of tool_parse_u64. */
enum tool_num {
  TOOL_NUM_OK,
  TOOL_NUM_NOT_NUMBER, /* empty, or anything but decimal digits */
  TOOL_NUM_NEGATIVE,   /* '-' followed by digits */
  TOOL_NUM_OVERFLOW    /* more than UINT64_MAX */
};

/* A plain decimal number: digits only, no sign, no spaces.  *out is set
 * only on TOOL_NUM_OK. */
enum tool_num tool_parse_u64(const char *s, uint64_t *out);

/* BYTES: digits with an optional binary suffix K, M, G or T (either case),
 * which may be followed by B or iB ("16G", "16GB", "16GiB").  false: not
 * such a size, or it overflows 64 bits. */
bool tool_parse_bytes(const char *s, uint64_t *out);

/* Strips spaces and tabs at both ends and CR/LF at the end, in place;
 * returns the first character kept. */
char *tool_trim(char *s);

/* The length (1..4) of the valid UTF-8 sequence at s (*s != 0): the
 * shortest form, no surrogate, at most U+10FFFF; 0 when none starts
 * there (a stray continuation byte, a sequence cut short, an overlong
 * form). */
size_t tool_utf8_length(const unsigned char *s);

/* Makes text a trace line contributed safe to print, in place: each
 * control character (below 0x20, and 0x7f) and each byte that starts no
 * valid UTF-8 sequence becomes ? -- a CR would return the terminal's
 * cursor over the FILE:LINE before it, an ESC would start a terminal
 * command -- so a message shows what was there without acting on it. */
void tool_make_printable(char *s);

/* "auto", "host", "dry", "hip" <-> HIPPO_BACKEND_*.  name: "unknown" for a
 * value it does not know; parse: false for a name it does not know. */
const char *tool_backend_name(hippo_backend b);
bool tool_parse_backend(const char *name, hippo_backend *out);

/* "adaptive", "sub_slices", "exclusive_pages", "virtual" (and "custom"
 * for names) <-> HIPPO_PRESET_*; parse accepts only the four presets. */
const char *tool_preset_name(hippo_preset p);
bool tool_parse_preset(const char *name, hippo_preset *out);

/* A layout from --layout: a preset name, or a compact spec of custom pools
 * (hippo-replay(1), "LAYOUT SPECS").  The grammar:
 *
 *   spec    = preset | pool { ";" pool }
 *   preset  = "adaptive" | "sub_slices" | "exclusive_pages" | "virtual"
 *   pool    = kind [ ":" option { "," option } ]
 *   kind    = "sliced" | "exclusive" | "direct" | "arena" | "virtual"
 *   option  = key "=" value
 *
 * Keys by kind (each at most once; field of hippo_pool_options):
 *   sliced, arena  page (page_size), slice (max_slice_size), cap
 *                  (max_pool_size), period (dealloc_period)
 *   exclusive      max (max_alloc_size), period
 *   direct         reclaim (reclaim_at), period
 *   virtual        slice (max_slice_size), range (range_size), granule,
 *                  unmap (unmap_threshold), budget (map_budget, parts
 *                  per 10,000)
 * page, slice, cap, max, reclaim, range, granule, unmap and budget are
 * sizes
 * (tool_parse_bytes: bytes, or K, M, G, T binary suffixes); period is a
 * count of reservations (plain digits; 0 = never).  sliced and arena need
 * page and slice, exclusive needs max; cap and reclaim default to 0 (none)
 * and period to 10000, as in every preset pool; a virtual pool's keys
 * default to 0, which the plugin resolves (the device's memory, the
 * driver's granularity but at least 2 MiB, the default threshold), and it
 * has no period.  Spaces and tabs around names and values are
 * ignored; names are lower case.  At most TOOL_LAYOUT_MAX_POOLS pools.
 *
 * The spec is checked for its form only: the plugin still validates the
 * values at device_open (HIPPO_POOL_CONFIG naming the pool and field; it
 * counts pools from 0, the spec from 1, and hippo-info's table shows pool
 * N of the spec as index N, after the persistent pool 0). */
#define TOOL_LAYOUT_MAX_POOLS 32u
#define TOOL_LAYOUT_TEXT_MAX 4096u /* room for the canonical text */

/* Invariants: layout.struct_size == sizeof layout; a preset has
 * pool_count 0 and pools NULL; a custom layout (HIPPO_PRESET_CUSTOM) has
 * 1..TOOL_LAYOUT_MAX_POOLS pools in pools[] and layout.pools == pools,
 * so the object points into itself: hand tool_layout_get's copy to the
 * plugin rather than copying the struct.  text is the canonical spec (the
 * preset's name, or the pools with every key that differs from its
 * default, sizes in the largest exact suffix): it parses back to the same
 * layout. */
typedef struct tool_layout {
  hippo_layout layout;
  hippo_pool_options pools[TOOL_LAYOUT_MAX_POOLS];
  char text[TOOL_LAYOUT_TEXT_MAX];
} tool_layout;

/* Parses `spec` into *out.  false: *out is untouched and why (when not
 * NULL) holds one line "layout spec: [pool N (KIND): ]WHAT (EXPECTED)",
 * naming the pool (from 1) and the key or value at fault. */
bool tool_parse_layout(const char *spec, tool_layout *out, char *why,
                       size_t len);

/* *dst = l->layout, with pools pointing at l->pools (a custom layout). */
void tool_layout_get(const tool_layout *l, hippo_layout *dst);

/* "SLICED", "EXCLUSIVE", "DIRECT", "PERSISTENT", else "unknown". */
const char *tool_pool_kind_name(hippo_pool_kind k);

/* api->status_name(st), or "HIPPO_?" when the plugin has none. */
const char *tool_status_name(const hippo_api *api, hippo_status st);

/* An unexpected status from the plugin: "PROG: WHAT: NAME (N): last_error"
 * on stderr (stdout flushed first), then exit(1). */
void tool_die_status(const char *prog, const hippo_api *api, hippo_status st,
                     const char *what) __attribute__((noreturn));

/* Usage errors (the caller then exits 2).  tool_usage_error prints
 * "PROG: WHAT 'ARG'" when what is not NULL, then USAGE and "Try 'PROG
 * --help' for more." to stderr.  tool_bad_option does it for what
 * getopt_long returned as c: ':' (an option lacks its argument) or anything
 * else (an unknown option), naming the option: a long one as given
 * (argv[optind - 1]), a short one as `-X` (getopt's optopt: in a cluster
 * such as -xq, argv[optind - 1] may be the argument before it). */
void tool_usage_error(const char *prog, const char *usage, const char *what,
                      const char *arg);
void tool_bad_option(const char *prog, const char *usage, int c,
                     char *const *argv);

/* The device options hippo-replay and hippo-info share:
 *   --plugin PATH --backend auto|host|dry|hip --capacity BYTES
 *   --layout adaptive|sub_slices|exclusive_pages|SPEC
 * tool_device_options_init sets the defaults (no plugin given, AUTO, the
 * backend's capacity, ADAPTIVE).  The capacity goes to desc.capacity on
 * every backend: HOST and DRY emulate that much memory, HIP takes it as a
 * budget (hippo holds at most that many bytes of the GPU; a budget above
 * the GPU's memory is the GPU's memory).  Invariant: preset ==
 * layout.layout.preset (HIPPO_PRESET_CUSTOM for a spec of pools). */
struct tool_device_options {
  const char *plugin;  /* NULL: tool_plugin_path's defaults */
  hippo_backend backend;
  uint64_t capacity;   /* 0: the backend's default (HIP: the whole GPU) */
  bool capacity_given;
  hippo_preset preset;
  tool_layout layout;  /* --layout, parsed; layout.text names it */
  char why[256];       /* tool_device_option's message for a bad spec */
};

void tool_device_options_init(struct tool_device_options *o);

/* Prints the --help lines of those four options to stdout. */
void tool_device_options_help(void);

/* Takes the value of option `name` ("plugin", "backend", "capacity" or
 * "layout").  NULL: taken; else the start of a usage message that the
 * caller completes with the value, e.g. "--backend takes auto, host, dry or
 * hip, not" (a bad --layout spec: "--layout: layout spec: ...; in", kept
 * in o->why). */
const char *tool_device_option(struct tool_device_options *o,
                               const char *name, const char *value);

/* Opens a device as `o` says (the layout is o->layout).  On failure prints
 * "PROG: cannot open a BACKEND device: STATUS: LAST_ERROR" and a hint to
 * stderr (for a spec refused with HIPPO_POOL_CONFIG, how the plugin's pool
 * numbers map to the spec's), sets *dev to NULL and returns the status. */
hippo_status tool_device_open(const char *prog, const hippo_api *api,
                              const struct tool_device_options *o,
                              hippo_device **dev);

/* After the device opened as `o` says: when --capacity asked for more than
 * the device has (only a HIP budget can: it is capped at the GPU's memory,
 * which info->total_memory then is), prints "PROG: note: ..." saying so to
 * stderr.  Otherwise prints nothing. */
void tool_capacity_note(const char *prog,
                        const struct tool_device_options *o,
                        const hippo_device_info *info);

#endif /* HIPPO_TOOLUTIL_H */
