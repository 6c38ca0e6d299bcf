/* hippo-info.c -- show what hippo builds for a device.
 *
 *   hippo-info [--plugin PATH] [--backend auto|host|dry|hip]
 *              [--capacity BYTES]
 *              [--layout PRESET|SPEC]
 *
 * Loads the plugin, opens a device (default AUTO: HIP when a GPU runtime
 * sees a device, else HOST; --capacity sizes a HOST or DRY device and is a
 * budget on HIP: hippo holds at most that much of the GPU), attaches one
 * stream (an emulated stream on HOST and DRY, the default NULL stream on
 * HIP) and prints, as `key: value` lines, the plugin path, the negotiated
 * ABI version, the GPU runtime in use ("none" on HOST and DRY), the backend
 * in use and why it was chosen, the device's name and architecture, total
 * and free device memory (on HIP, of the budget), the slice alignment and
 * the layout preset (for a --layout SPEC of pools, "custom", then a
 * "layout:" line with the spec's canonical text); then a table of the
 * stream's pools from pool_report (index 0 is the persistent pool, then
 * the layout's pools in routing order): kind, page_size, max size (max_slice_size of a SLICED pool,
 * max_alloc_size of an EXCLUSIVE one), max_pool_size and dealloc_period.
 * Sizes are shown in the largest binary unit that divides them exactly;
 * "-" is a field the kind does not use, "none" a zero cap, "never" a zero
 * dealloc_period.  Everything is closed again before it exits.
 *
 * The keys are stable (scripts parse them); new ones are only added.  A
 * device string the backend does not know is empty, shown as "unknown".
 *
 * Exit status: 0 printed; 1 the plugin or device could not be used (the
 * status name and the plugin's last_error on stderr: for HIP, each runtime
 * library tried and why it did not serve); 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hippo.h"
#include "toolutil.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

static const char *const prog = "hippo-info";
static const char *const usage_line =
    "usage: hippo-info [--plugin PATH] [--backend auto|host|dry|hip] "
    "[--capacity BYTES] [--layout PRESET|SPEC]";

static void print_help(void) {
  printf("%s\n\n", usage_line);
  printf("Opens a device through the hippo plugin, attaches one stream and\n"
         "prints the device (GPU runtime, backend and why it was chosen,\n"
         "name, architecture, memory, alignment) and the pools hippo built\n"
         "for the stream.\n\n");
  tool_device_options_help();
  printf("\nExit status: 0 printed, 1 plugin or device failed, 2 usage.\n");
}

/* Returns -1 to go on, else an exit status. */
static int parse_options(int argc, char **argv,
                         struct tool_device_options *o) {
  static const struct option longopts[] = {
      {"plugin", required_argument, NULL, 'd'},
      {"backend", required_argument, NULL, 'd'},
      {"capacity", required_argument, NULL, 'd'},
      {"layout", required_argument, NULL, 'd'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  int c, index = 0;
  const char *bad;

  tool_device_options_init(o);
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+:h", longopts, &index)) != -1) {
    switch (c) {
    case 'd':
      bad = tool_device_option(o, longopts[index].name, optarg);
      if (bad) {
        tool_usage_error(prog, usage_line, bad, optarg);
        return EXIT_USAGE;
      }
      break;
    case 'h':
      print_help();
      return EXIT_OK;
    default:
      tool_bad_option(prog, usage_line, c, argv);
      return EXIT_USAGE;
    }
  }
  if (optind < argc) {
    tool_usage_error(prog, usage_line, "takes no arguments, but got",
                     argv[optind]);
    return EXIT_USAGE;
  }
  return -1;
}

/* "16 GiB", "4 MiB", "256 B": the largest binary unit dividing n exactly. */
static const char *size_text(uint64_t n, char *buf, size_t cap) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB",
                                      "PiB", "EiB"};
  unsigned u = 0;

  while (n && n % 1024 == 0 && u + 1 < sizeof units / sizeof *units) {
    n /= 1024;
    u++;
  }
  snprintf(buf, cap, "%" PRIu64 " %s", n, units[u]);
  return buf;
}

/* A size field of a pool: "-" when the kind does not use it, `zero` for 0. */
static const char *field_text(bool used, uint64_t n, const char *zero,
                              char *buf, size_t cap) {
  if (!used)
    return "-";
  if (n == 0)
    return zero;
  return size_text(n, buf, cap);
}

/* Prints "KEY: VALUE" for one of device_info's strings: at most its field's
 * bytes (the plugin NUL-terminates it; this does not rely on that), or
 * "unknown" when empty (the backend does not know it). */
static void print_text(const char *key, const char *field, size_t cap) {
  size_t n = strnlen(field, cap);

  if (n)
    printf("%s: %.*s\n", key, (int)n, field);
  else
    printf("%s: unknown\n", key);
}

/* The reason AUTO fell back to HOST, whole.  info.note holds it cut to
 * 191 characters, and the reason lists every GPU runtime library tried,
 * which rarely fits; opening a HIP device again fails the same way and
 * its last_error has all of it.  Copies "AUTO chose HOST: REASON" into buf
 * and returns true; false (buf untouched) when the second open does not
 * fail with HIPPO_NO_DEVICE (a device appeared meanwhile: it is closed at
 * once and the note stands). */
static bool auto_reason(const hippo_api *api,
                        const struct tool_device_options *o, char *buf,
                        size_t cap) {
  hippo_layout layout;
  hippo_device_desc desc;
  hippo_device *probe = NULL;
  hippo_status st;

  tool_layout_get(&o->layout, &layout);
  memset(&desc, 0, sizeof desc);
  desc.struct_size = sizeof desc;
  desc.backend = HIPPO_BACKEND_HIP;
  desc.capacity = o->capacity;
  desc.layout = &layout;
  st = api->device_open(&desc, &probe);
  if (st == HIPPO_SUCCESS) {
    (void)api->device_close(probe);
    return false;
  }
  if (st != HIPPO_NO_DEVICE)
    return false;
  snprintf(buf, cap, "AUTO chose HOST: %s", api->last_error());
  return true;
}

/* The "chosen because:" line: the plugin's note (AUTO says which backend
 * it chose and why), "asked for" when --backend named one, else
 * "unknown" (AUTO on a plugin that writes no note). */
static void print_choice(const hippo_api *api,
                         const struct tool_device_options *o,
                         const hippo_device_info *info) {
  char whole[1024];
  size_t n = strnlen(info->note, sizeof info->note);

  if (n == sizeof info->note - 1 && o->backend == HIPPO_BACKEND_AUTO &&
      info->backend == HIPPO_BACKEND_HOST &&
      auto_reason(api, o, whole, sizeof whole))
    printf("chosen because: %s\n", whole);
  else if (n)
    printf("chosen because: %.*s\n", (int)n, info->note);
  else if (o->backend != HIPPO_BACKEND_AUTO)
    printf("chosen because: asked for (--backend %s)\n",
           tool_backend_name(o->backend));
  else
    printf("chosen because: unknown\n");
}

static bool failed(const hippo_api *api, hippo_status st, const char *what) {
  if (st == HIPPO_SUCCESS)
    return false;
  fprintf(stderr, "%s: %s failed: %s: %s\n", prog, what,
          tool_status_name(api, st), api->last_error());
  return true;
}

/* A size field the plugin set otherwise than the --layout spec asked (a
 * cap below the page shrinks the page, a size above the device is the
 * device's): one line naming the first such field into note.  false:
 * every field is as asked. */
static bool changed(const hippo_pool_options *want,
                    const hippo_pool_options *got, uint32_t index,
                    char *note, size_t cap) {
  static const struct {
    const char *name;
    size_t at;
  } fields[] = {
      {"page_size", offsetof(hippo_pool_options, page_size)},
      {"max_size", offsetof(hippo_pool_options, max_slice_size)},
      {"max_size", offsetof(hippo_pool_options, max_alloc_size)},
      {"max_pool_size", offsetof(hippo_pool_options, max_pool_size)},
  };
  for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++) {
    uint64_t a, b;
    char ta[32], tb[32];
    memcpy(&a, (const char *)want + fields[k].at, sizeof a);
    memcpy(&b, (const char *)got + fields[k].at, sizeof b);
    if (a == b || (a == 0 && want->kind == HIPPO_POOL_VIRTUAL))
      continue; /* a VIRTUAL pool's 0 asks for the default */
    snprintf(note, cap,
             "note: pool %" PRIu32 ": %s %s asked, %s in force (the pool's "
             "rules fit it to the device and the cap: hippo(3))",
             index, fields[k].name, size_text(a, ta, sizeof ta),
             size_text(b, tb, sizeof tb));
    return true;
  }
  return false;
}

#define POOL_COLUMNS 6
#define POOL_CELL 32 /* bytes of a cell, its NUL included */
#define POOL_ROWS 64 /* a layout has at most 32 pools, and the persistent */

/* One row of the pool table, as text. */
struct pool_row {
  char cell[POOL_COLUMNS][POOL_CELL]; /* index, kind, page_size, max_size,
                                         max_pool_size, dealloc_period */
};

static void cell_set(char *cell, const char *text) {
  snprintf(cell, POOL_CELL, "%s", text);
}

/* Prints the table of the stream's pools, each column as wide as its
 * widest cell (a size that is no whole unit, "12345678901 B", is wider
 * than the usual "4 MiB").  false: a message was printed. */
static bool print_pools(const hippo_api *api, hippo_device *dev,
                        hippo_stream *stream, const tool_layout *asked) {
  static const char *const head[POOL_COLUMNS] = {
      "index", "kind", "page_size", "max_size", "max_pool_size",
      "dealloc_period"};
  /* the widths the usual sizes take ("PERSISTENT", "256 MiB") */
  static const int least[POOL_COLUMNS] = {5, 10, 9, 9, 13, 0};
  struct pool_row rows[POOL_ROWS];
  char notes[POOL_ROWS][200];
  int width[POOL_COLUMNS];
  hippo_usage u;
  uint32_t i, n, arenas = 0, noted = 0;

  memset(&u, 0, sizeof u);
  u.struct_size = sizeof u;
  if (failed(api, api->usage(dev, stream, &u), "usage"))
    return false;
  n = u.pool_count < POOL_ROWS ? u.pool_count : POOL_ROWS;
  for (i = 0; i < n; i++) {
    hippo_pool_report r;
    hippo_pool_options opt;
    const hippo_pool_options *po = &opt;
    char (*c)[POOL_CELL] = rows[i].cell, text[POOL_CELL];
    bool sliced, exclusive;

    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    memset(&opt, 0, sizeof opt);
    opt.struct_size = sizeof opt;
    if (failed(api, api->pool_report(stream, i, &r, &opt), "pool_report"))
      return false;
    sliced = r.kind == HIPPO_POOL_SLICED || r.kind == HIPPO_POOL_ARENA;
    exclusive = r.kind == HIPPO_POOL_EXCLUSIVE;
    if (r.kind == HIPPO_POOL_VIRTUAL && noted < POOL_ROWS) {
      char range[32], granule[32], thr[32], budget[48];
      if (po->map_budget == UINT64_MAX)
        snprintf(budget, sizeof budget, "no map budget");
      else
        snprintf(budget, sizeof budget,
                 "mapped bytes at most %.2f %% above peak live",
                 (double)po->map_budget / 100.0);
      snprintf(notes[noted++], sizeof notes[0],
               "(VIRTUAL pool %" PRIu32 ": a range of %s per stream, "
               "granules of %s, %s, %s%s)",
               i, size_text(po->range_size, range, sizeof range),
               size_text(po->granule, granule, sizeof granule), budget,
               po->unmap_threshold == UINT64_MAX ? "no unmap threshold"
                                                 : "an unmap threshold of ",
               po->unmap_threshold == UINT64_MAX
                   ? ""
                   : size_text(po->unmap_threshold, thr, sizeof thr));
    }
    arenas += r.kind == HIPPO_POOL_ARENA;
    snprintf(c[0], sizeof c[0], "%" PRIu32, i);
    snprintf(c[1], sizeof c[1], "%s", tool_pool_kind_name(r.kind));
    cell_set(c[2], field_text(sliced, po->page_size, "0", text, sizeof text));
    cell_set(c[3], sliced || r.kind == HIPPO_POOL_VIRTUAL
                        ? field_text(true, po->max_slice_size, "0", text,
                                     sizeof text)
                          : field_text(exclusive, po->max_alloc_size, "0",
                                       text, sizeof text));
    cell_set(c[4],
             field_text(sliced, po->max_pool_size, "none", text, sizeof text));
    if (po->dealloc_period)
      snprintf(c[5], sizeof c[5], "%" PRIu64, po->dealloc_period);
    else
      snprintf(c[5], sizeof c[5], "never");
    if (asked && i >= 1 && i - 1 < asked->layout.pool_count &&
        changed(&asked->pools[i - 1], po, i, notes[noted],
                sizeof notes[noted]))
      noted++;
  }
  for (int k = 0; k < POOL_COLUMNS; k++) {
    width[k] = least[k];
    if ((int)strlen(head[k]) > width[k])
      width[k] = (int)strlen(head[k]);
    for (i = 0; i < n; i++)
      if ((int)strlen(rows[i].cell[k]) > width[k])
        width[k] = (int)strlen(rows[i].cell[k]);
  }
  printf("pools: %" PRIu32 " (index 0 is the persistent pool)\n\n",
         u.pool_count);
  for (i = 0; i <= n; i++) { /* the head, then the rows */
    for (int k = 0; k < POOL_COLUMNS; k++) {
      const char *text = i == 0 ? head[k] : rows[i - 1].cell[k];
      if (k + 1 < POOL_COLUMNS)
        printf("%-*s  ", width[k], text);
      else
        printf("%s\n", text);
    }
  }
  if (arenas)
    printf("\n(ARENA: page_size is the smallest page; the pages grow with "
           "the largest request\n served, up to max_size)\n");
  if (noted)
    printf("\n");
  for (i = 0; i < noted; i++)
    printf("%s\n", notes[i]);
  return true;
}

int main(int argc, char **argv) {
  struct tool_device_options o;
  const char *plugin;
  const hippo_api *api;
  hippo_device *dev = NULL;
  hippo_stream *stream = NULL;
  hippo_device_info info;
  void *lib, *native = NULL;
  bool emulated = false, ok = false;
  char total[32], free_mem[32];
  int rc;

  rc = parse_options(argc, argv, &o);
  if (rc >= 0)
    return rc;
  plugin = tool_plugin_path(o.plugin);
  if (tool_load(prog, plugin, &lib, &api) != HIPPO_SUCCESS)
    return EXIT_FAIL;

  if (tool_device_open(prog, api, &o, &dev) != HIPPO_SUCCESS)
    goto out;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (failed(api, api->device_info(dev, &info), "device_info"))
    goto out;
  tool_capacity_note(prog, &o, &info);
  if (info.backend != HIPPO_BACKEND_HIP) {
    if (failed(api, tool_emu(api)->stream_create(dev, &native), "emu_stream_create"))
      goto out;
    emulated = true;
  }
  if (failed(api, api->stream_attach(dev, native, &stream), "stream_attach"))
    goto out;

  printf("plugin: %s\n", plugin);
  printf("abi version: %" PRIu32 ".%" PRIu32 "\n", api->abi_version >> 16,
         api->abi_version & 0xffffu);
  print_text("runtime", info.runtime, sizeof info.runtime);
  printf("backend: %s\n", tool_backend_name(info.backend));
  print_choice(api, &o, &info);
  print_text("device", info.name, sizeof info.name);
  print_text("architecture", info.arch, sizeof info.arch);
  printf("total memory: %" PRIu64 " (%s)\n", info.total_memory,
         size_text(info.total_memory, total, sizeof total));
  printf("free memory: %" PRIu64 " (%s)\n", info.free_memory,
         size_text(info.free_memory, free_mem, sizeof free_mem));
  printf("alignment: %" PRIu64 "\n", info.alignment);
  if (info.vm_granularity)
    printf("virtual memory: yes, granularity %" PRIu64 "%s\n",
           info.vm_granularity,
           HIPPO_HAS(hippo_device_info, &info, capture_maps) &&
                   info.capture_maps
               ? ", mapped during captures"
               : "");
  else
    printf("virtual memory: no (VIRTUAL pools unavailable)\n");
  printf("preset: %s\n", tool_preset_name(info.preset));
  if (info.preset == HIPPO_PRESET_CUSTOM)
    printf("layout: %s\n", o.layout.text);
  ok = print_pools(api, dev, stream,
                   info.preset == HIPPO_PRESET_CUSTOM ? &o.layout : NULL);
  if (fflush(stdout) != 0 || ferror(stdout)) { /* a full disk, a closed pipe */
    fprintf(stderr, "%s: cannot write to stdout: %s\n", prog,
            strerror(errno));
    ok = false;
  }

out:
  /* Teardown in reverse; a failure here is reported and fails the run. */
  if (stream && failed(api, api->stream_detach(stream), "stream_detach"))
    ok = false;
  if (emulated &&
      failed(api, tool_emu(api)->stream_destroy(dev, native), "emu_stream_destroy"))
    ok = false;
  if (dev && failed(api, api->device_close(dev), "device_close"))
    ok = false;
  dlclose(lib);
  return ok ? EXIT_OK : EXIT_FAIL;
}
