/* toolutil.c -- what the hippo command-line programs share (toolutil.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "toolutil.h"

/* The Makefile defines these; the defaults keep a stand-alone compile
 * working. */
#ifndef HIPPO_BUILD_DIR
#define HIPPO_BUILD_DIR "."
#endif
#ifndef HIPPO_BUILD_PLUGIN
#define HIPPO_BUILD_PLUGIN "plugin/.libs/hippo.so"
#endif
#ifndef HIPPO_INSTALLED_PLUGIN
#define HIPPO_INSTALLED_PLUGIN "/usr/local/lib/hippo/hippo.so"
#endif

const char tool_build_plugin[] = HIPPO_BUILD_PLUGIN;
const char tool_installed_plugin[] = HIPPO_INSTALLED_PLUGIN;

/* Whether the running program is one of the build tree's: the directory of
 * its executable (/proc/self/exe, symbolic links resolved; a trailing
 * /.libs, where a libtool wrapper keeps the real program, dropped) is the
 * build tree's tools/ or bench/.  An installed copy, or a system without
 * /proc, is not. */
static bool running_uninstalled(void) {
  static const char *const dirs[] = {"/tools", "/bench"};
  char exe[PATH_MAX], top[PATH_MAX];
  char *slash;
  size_t n, i;

  if (!realpath("/proc/self/exe", exe) || !realpath(HIPPO_BUILD_DIR, top))
    return false;
  slash = strrchr(exe, '/');
  if (!slash)
    return false;
  *slash = '\0';
  n = strlen(exe);
  if (n >= 6 && strcmp(exe + n - 6, "/.libs") == 0)
    exe[n - 6] = '\0';
  n = strlen(top);
  if (strncmp(exe, top, n) != 0)
    return false;
  for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    if (strcmp(exe + n, dirs[i]) == 0)
      return true;
  return false;
}

const char *tool_plugin_path(const char *given) {
  const char *env = getenv("HIPPO_PLUGIN");

  if (given)
    return given;
  if (env && *env)
    return env;
  if (running_uninstalled())
    return tool_build_plugin;
  return tool_installed_plugin;
}

hippo_status tool_load(const char *prog, const char *path, void **lib,
                       const hippo_api **api) {
  hippo_status st = hippo_load(path, lib, api);

  if (st != HIPPO_SUCCESS)
    fprintf(stderr,
            "%s: %s\n  (%s, or give its path with --plugin PATH or "
            "HIPPO_PLUGIN)\n",
            prog, hippo_load_error(),
            strcmp(path, tool_installed_plugin) == 0
                ? "install hippo with 'make install'"
                : "build the plugin with 'make'");
  return st;
}

enum tool_num tool_parse_u64(const char *s, uint64_t *out) {
  uint64_t v = 0;
  const char *p = s;

  if (*p == '-' && p[1] >= '0' && p[1] <= '9') {
    for (p++; *p >= '0' && *p <= '9'; p++)
      ;
    return *p ? TOOL_NUM_NOT_NUMBER : TOOL_NUM_NEGATIVE;
  }
  if (*p == '\0')
    return TOOL_NUM_NOT_NUMBER;
  for (; *p; p++) {
    unsigned d;
    if (*p < '0' || *p > '9')
      return TOOL_NUM_NOT_NUMBER;
    d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10)
      return TOOL_NUM_OVERFLOW;
    v = v * 10 + d;
  }
  *out = v;
  return TOOL_NUM_OK;
}

bool tool_parse_bytes(const char *s, uint64_t *out) {
  char digits[32];
  size_t n = strspn(s, "0123456789");
  const char *suffix = s + n;
  unsigned shift = 0;
  uint64_t v;

  if (n == 0 || n >= sizeof digits)
    return false;
  memcpy(digits, s, n);
  digits[n] = '\0';
  if (tool_parse_u64(digits, &v) != TOOL_NUM_OK)
    return false;
  switch (*suffix) {
  case '\0': shift = 0; break;
  case 'k': case 'K': shift = 10; break;
  case 'm': case 'M': shift = 20; break;
  case 'g': case 'G': shift = 30; break;
  case 't': case 'T': shift = 40; break;
  default: return false;
  }
  if (*suffix) {
    suffix++;
    if (strcmp(suffix, "") != 0 && strcmp(suffix, "B") != 0 &&
        strcmp(suffix, "iB") != 0)
      return false;
  }
  if (shift && v > (UINT64_MAX >> shift))
    return false;
  *out = v << shift;
  return true;
}

char *tool_trim(char *s) {
  char *end;

  while (*s == ' ' || *s == '\t')
    s++;
  end = s + strlen(s);
  while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r' ||
                     end[-1] == '\n'))
    *--end = '\0';
  return s;
}

/* Names of small enums, both ways. */
struct name_value {
  const char *name;
  uint32_t value;
};

static const struct name_value backends[] = {
    {"auto", HIPPO_BACKEND_AUTO},
    {"host", HIPPO_BACKEND_HOST},
    {"dry", HIPPO_BACKEND_DRY},
    {"hip", HIPPO_BACKEND_HIP},
    {NULL, 0}};

static const struct name_value presets[] = {
    {"sub_slices", HIPPO_PRESET_SUB_SLICES},
    {"exclusive_pages", HIPPO_PRESET_EXCLUSIVE_PAGES},
    {"adaptive", HIPPO_PRESET_ADAPTIVE},
    {NULL, 0}};

static const struct name_value pool_kinds[] = {
    {"SLICED", HIPPO_POOL_SLICED},
    {"EXCLUSIVE", HIPPO_POOL_EXCLUSIVE},
    {"DIRECT", HIPPO_POOL_DIRECT},
    {"PERSISTENT", HIPPO_POOL_PERSISTENT},
    {"ARENA", HIPPO_POOL_ARENA},
    {NULL, 0}};

static const char *name_of(const struct name_value *table, uint32_t value) {
  for (; table->name; table++)
    if (table->value == value)
      return table->name;
  return "unknown";
}

static bool value_of(const struct name_value *table, const char *name,
                     uint32_t *out) {
  for (; table->name; table++)
    if (strcmp(table->name, name) == 0) {
      *out = table->value;
      return true;
    }
  return false;
}

const char *tool_backend_name(hippo_backend b) { return name_of(backends, b); }

bool tool_parse_backend(const char *name, hippo_backend *out) {
  return value_of(backends, name, out);
}

const char *tool_preset_name(hippo_preset p) {
  return p == HIPPO_PRESET_CUSTOM ? "custom" : name_of(presets, p);
}

bool tool_parse_preset(const char *name, hippo_preset *out) {
  return value_of(presets, name, out);
}

const char *tool_pool_kind_name(hippo_pool_kind k) {
  return name_of(pool_kinds, k);
}

const char *tool_status_name(const hippo_api *api, hippo_status st) {
  const char *n = api->status_name ? api->status_name(st) : NULL;
  return n ? n : "HIPPO_?";
}

void tool_usage_error(const char *prog, const char *usage, const char *what,
                      const char *arg) {
  if (what)
    fprintf(stderr, "%s: %s '%s'\n", prog, what, arg ? arg : "");
  fprintf(stderr, "%s\n", usage);
  fprintf(stderr, "Try '%s --help' for more.\n", prog);
}

void tool_bad_option(const char *prog, const char *usage, int c,
                     const char *arg) {
  tool_usage_error(prog, usage,
                   c == ':' ? "option needs an argument:" : "unknown option",
                   arg);
}

void tool_device_options_init(struct tool_device_options *o) {
  memset(o, 0, sizeof *o);
  o->backend = HIPPO_BACKEND_AUTO;
  o->preset = HIPPO_PRESET_ADAPTIVE;
}

void tool_device_options_help(void) {
  printf("  --plugin PATH     the plugin to load (default: $HIPPO_PLUGIN, else\n"
         "                    %s when run from the build tree,\n"
         "                    else %s)\n"
         "  --backend NAME    auto (default), host, dry or hip\n"
         "  --capacity BYTES  host/dry: the emulated device memory (default\n"
         "                    16 GiB); hip: a budget, hippo holds at most this\n"
         "                    much of the GPU (default: all of it); suffixes\n"
         "                    K, M, G, T\n"
         "  --layout NAME     adaptive (default), sub_slices or "
         "exclusive_pages\n",
         tool_build_plugin, tool_installed_plugin);
}

const char *tool_device_option(struct tool_device_options *o,
                               const char *name, const char *value) {
  if (strcmp(name, "plugin") == 0) {
    o->plugin = value;
  } else if (strcmp(name, "backend") == 0) {
    if (!tool_parse_backend(value, &o->backend))
      return "--backend takes auto, host, dry or hip, not";
  } else if (strcmp(name, "capacity") == 0) {
    if (!tool_parse_bytes(value, &o->capacity))
      return "--capacity takes a byte count such as 1073741824 or 1G, not";
    o->capacity_given = true;
  } else if (strcmp(name, "layout") == 0) {
    if (!tool_parse_preset(value, &o->preset))
      return "--layout takes adaptive, sub_slices or exclusive_pages, not";
  } else {
    return "unknown option";
  }
  return NULL;
}

hippo_status tool_device_open(const char *prog, const hippo_api *api,
                              const struct tool_device_options *o,
                              hippo_device **dev) {
  hippo_layout layout;
  hippo_device_desc desc;
  hippo_status st;

  memset(&layout, 0, sizeof layout);
  layout.struct_size = sizeof layout;
  layout.preset = o->preset;
  memset(&desc, 0, sizeof desc);
  desc.struct_size = sizeof desc;
  desc.backend = o->backend;
  desc.capacity = o->capacity;
  desc.layout = &layout;
  st = api->device_open(&desc, dev);
  if (st != HIPPO_SUCCESS) {
    fprintf(stderr,
            "%s: cannot open a %s device: %s: %s\n"
            "  (try --backend host, or check --capacity and --layout)\n",
            prog, tool_backend_name(o->backend), tool_status_name(api, st),
            api->last_error());
    *dev = NULL;
  }
  return st;
}

void tool_capacity_note(const char *prog,
                        const struct tool_device_options *o,
                        const hippo_device_info *info) {
  if (o->capacity_given && o->capacity > info->total_memory)
    fprintf(stderr,
            "%s: note: --capacity %llu is more than the %s device has; "
            "the budget is all of its %llu bytes\n",
            prog, (unsigned long long)o->capacity,
            tool_backend_name(info->backend),
            (unsigned long long)info->total_memory);
}

void tool_die_status(const char *prog, const hippo_api *api, hippo_status st,
                     const char *what) {
  const char *detail = api->last_error();
  fflush(stdout);
  fprintf(stderr, "%s: %s: %s (%d): %s\n", prog, what, api->status_name(st),
          (int)st, detail && detail[0] ? detail : api->status_string(st));
  exit(1);
}
