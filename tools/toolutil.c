/* toolutil.c -- what the hippo command-line programs share (toolutil.h). */
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
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

double tool_calls_per_1000(const hippo_emu_counters *c, uint64_t events) {
  /* as a driver receives them: a VM_MAP is a create and a map, a
   * VM_UNMAP an unmap and a release (steps.h) */
  uint64_t n = c->calls[HIPPO_CALL_ALLOC] + c->calls[HIPPO_CALL_FREE] +
               2 * c->calls[HIPPO_CALL_VM_MAP] +
               2 * c->calls[HIPPO_CALL_VM_UNMAP] +
               c->calls[HIPPO_CALL_VM_ACCESS] + c->calls[HIPPO_CALL_VM_RANGE];
  return events ? (double)n * 1000.0 / (double)events : 0.0;
}

const hippo_emu_api *tool_emu(const hippo_api *api) {
  const hippo_emu_api *emu = NULL;
  if (api->emulation(&emu) != HIPPO_SUCCESS || !emu) {
    fprintf(stderr, "the plugin hands out no emulation table: %s\n",
            api->last_error());
    exit(1);
  }
  return emu;
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

size_t tool_utf8_length(const unsigned char *s) {
  unsigned c = s[0], n, i;
  uint32_t cp;
  if (c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf)
    n = 2, cp = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef)
    n = 3, cp = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4)
    n = 4, cp = c & 0x07;
  else
    return 0;
  for (i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) /* a NUL ends it too */
      return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
      (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return n;
}

void tool_make_printable(char *s) {
  unsigned char *p = (unsigned char *)s;
  while (*p) {
    size_t n = tool_utf8_length(p);
    if (n == 0 || *p < 0x20 || *p == 0x7f) {
      *p++ = '?';
      continue;
    }
    p += n;
  }
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
    {"virtual", HIPPO_PRESET_VIRTUAL},
    {NULL, 0}};

static const struct name_value pool_kinds[] = {
    {"SLICED", HIPPO_POOL_SLICED},
    {"EXCLUSIVE", HIPPO_POOL_EXCLUSIVE},
    {"DIRECT", HIPPO_POOL_DIRECT},
    {"PERSISTENT", HIPPO_POOL_PERSISTENT},
    {"ARENA", HIPPO_POOL_ARENA},
    {"VIRTUAL", HIPPO_POOL_VIRTUAL},
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

/* ---- Layout specs (toolutil.h has the grammar) --------------------------- */

/* A pool kind of the spec grammar and the keys it takes. */
enum spec_key { KEY_PAGE, KEY_SLICE, KEY_CAP, KEY_MAX, KEY_RECLAIM,
                KEY_PERIOD, KEY_RANGE, KEY_GRANULE, KEY_UNMAP, KEY_BUDGET,
                KEY_COUNT };

static const char *const key_names[KEY_COUNT] = {
    "page", "slice", "cap", "max", "reclaim", "period", "range", "granule",
    "unmap", "budget"};

struct spec_kind {
  const char *name;
  hippo_pool_kind kind;
  unsigned keys;     /* bit k: takes key k */
  unsigned needs;    /* bit k: key k must be given */
  const char *list;  /* the keys it takes, for messages */
};

#define BIT(k) (1u << (k))
static const struct spec_kind spec_kinds[] = {
    {"sliced", HIPPO_POOL_SLICED,
     BIT(KEY_PAGE) | BIT(KEY_SLICE) | BIT(KEY_CAP) | BIT(KEY_PERIOD),
     BIT(KEY_PAGE) | BIT(KEY_SLICE), "page, slice, cap, period"},
    {"exclusive", HIPPO_POOL_EXCLUSIVE, BIT(KEY_MAX) | BIT(KEY_PERIOD),
     BIT(KEY_MAX), "max, period"},
    {"direct", HIPPO_POOL_DIRECT, BIT(KEY_RECLAIM) | BIT(KEY_PERIOD), 0,
     "reclaim, period"},
    {"arena", HIPPO_POOL_ARENA,
     BIT(KEY_PAGE) | BIT(KEY_SLICE) | BIT(KEY_CAP) | BIT(KEY_PERIOD),
     BIT(KEY_PAGE) | BIT(KEY_SLICE), "page, slice, cap, period"},
    {"virtual", HIPPO_POOL_VIRTUAL,
     BIT(KEY_SLICE) | BIT(KEY_RANGE) | BIT(KEY_GRANULE) | BIT(KEY_UNMAP) |
         BIT(KEY_BUDGET),
     0, "slice, range, granule, unmap, budget"},
    {NULL, 0, 0, 0, NULL}};

#define SPEC_DEFAULT_PERIOD 10000u /* every preset pool's dealloc_period */
#define SPEC_EXCERPT 40            /* characters of a name shown in a message */

/* A piece of the spec: [p, p + n), spaces and tabs at both ends dropped. */
struct piece {
  const char *p;
  size_t n;
};

static struct piece piece_trim(const char *p, size_t n) {
  struct piece r;
  while (n && (*p == ' ' || *p == '\t'))
    p++, n--;
  while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
    n--;
  r.p = p;
  r.n = n;
  return r;
}

static bool piece_is(struct piece x, const char *word) {
  return strlen(word) == x.n && strncmp(x.p, word, x.n) == 0;
}

/* The piece as a C string, cut to `cap` - 1 bytes (for values and
 * messages). */
static const char *piece_str(struct piece x, char *buf, size_t cap) {
  size_t n = x.n < cap - 1 ? x.n : cap - 1;
  memcpy(buf, x.p, n);
  buf[n] = '\0';
  return buf;
}

/* Writes "layout spec: " and the formatted message to why; returns false. */
static bool spec_error(char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool spec_error(char *why, size_t len, const char *fmt, ...) {
  va_list ap;
  int n;
  if (!why || len == 0)
    return false;
  n = snprintf(why, len, "layout spec: ");
  if (n < 0 || (size_t)n >= len)
    return false;
  va_start(ap, fmt);
  vsnprintf(why + n, len - (size_t)n, fmt, ap);
  va_end(ap);
  return false;
}

/* Parses one pool (its text without the ';'), number `index` from 1. */
static bool parse_pool(struct piece text, unsigned index,
                       hippo_pool_options *o, char *why, size_t len) {
  const char *colon = memchr(text.p, ':', text.n);
  struct piece kname = piece_trim(text.p, colon ? (size_t)(colon - text.p)
                                                : text.n);
  const struct spec_kind *k;
  char name[SPEC_EXCERPT + 1], value[SPEC_EXCERPT + 1];
  unsigned given = 0, option = 0;
  uint64_t v[KEY_COUNT] = {0};
  hippo_preset preset;

  if (text.n == 0)
    return spec_error(why, len,
                      "pool %u: empty (expected KIND[:KEY=VALUE,...]; kinds "
                      "sliced, exclusive, direct, arena, virtual)",
                      index);
  for (k = spec_kinds; k->name && !piece_is(kname, k->name); k++)
    ;
  if (!k->name) {
    piece_str(kname, name, sizeof name);
    if (tool_parse_preset(name, &preset) && kname.n == strlen(name))
      return spec_error(why, len,
                        "pool %u: '%s' is a preset; a preset stands alone, "
                        "without keys or other pools",
                        index, name);
    return spec_error(why, len,
                      "pool %u: unknown kind '%s' (sliced, exclusive, "
                      "direct, arena, virtual)",
                      index, name);
  }
  /* a VIRTUAL pool never deallocates at a tick: no period */
  v[KEY_PERIOD] = k->kind == HIPPO_POOL_VIRTUAL ? 0 : SPEC_DEFAULT_PERIOD;

  /* The options: KEY=VALUE separated by ',' after the ':'. */
  if (colon) {
    const char *p = colon + 1, *end = text.p + text.n;
    for (;;) {
      const char *comma = memchr(p, ',', (size_t)(end - p));
      struct piece opt = piece_trim(p, (comma ? comma : end) - p);
      const char *eq = memchr(opt.p, '=', opt.n);
      struct piece key, val;
      unsigned kk;

      option++;
      if (opt.n == 0)
        return spec_error(why, len,
                          "pool %u (%s): option %u is empty (expected "
                          "KEY=VALUE; keys %s)",
                          index, k->name, option, k->list);
      key = piece_trim(opt.p, eq ? (size_t)(eq - opt.p) : opt.n);
      for (kk = 0; kk < KEY_COUNT && !piece_is(key, key_names[kk]); kk++)
        ;
      if (kk == KEY_COUNT || !(k->keys & BIT(kk)))
        return spec_error(why, len, "pool %u (%s): unknown key '%s' (%s)",
                          index, k->name, piece_str(key, name, sizeof name),
                          k->list);
      if (!eq)
        return spec_error(why, len,
                          "pool %u (%s): key '%s' has no value (expected "
                          "%s=%s)",
                          index, k->name, key_names[kk], key_names[kk],
                          kk == KEY_PERIOD ? "COUNT" : "SIZE");
      if (given & BIT(kk))
        return spec_error(why, len, "pool %u (%s): key '%s' given twice",
                          index, k->name, key_names[kk]);
      val = piece_trim(eq + 1, (size_t)(opt.p + opt.n - (eq + 1)));
      piece_str(val, value, sizeof value);
      if (kk == KEY_PERIOD) {
        if (val.n >= sizeof value ||
            tool_parse_u64(value, &v[kk]) != TOOL_NUM_OK)
          return spec_error(why, len,
                            "pool %u (%s): period '%s' is not a count (a "
                            "whole number of reservations, 0 = never)",
                            index, k->name, value);
      } else if (val.n >= sizeof value || !tool_parse_bytes(value, &v[kk])) {
        return spec_error(why, len,
                          "pool %u (%s): %s '%s' is not a size (bytes, or a "
                          "whole number with K, M, G or T; below 16 EiB)",
                          index, k->name, key_names[kk], value);
      }
      given |= BIT(kk);
      if (!comma)
        break;
      p = comma + 1;
    }
  }
  for (unsigned kk = 0; kk < KEY_COUNT; kk++)
    if ((k->needs & BIT(kk)) && !(given & BIT(kk)))
      return spec_error(why, len,
                        "pool %u (%s): key '%s' is missing (%s needs %s)",
                        index, k->name, key_names[kk], k->name,
                        k->kind == HIPPO_POOL_EXCLUSIVE ? "max"
                                                        : "page and slice");

  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->kind = k->kind;
  o->page_size = v[KEY_PAGE];
  o->max_slice_size = v[KEY_SLICE];
  o->max_pool_size = v[KEY_CAP];
  o->max_alloc_size = v[KEY_MAX];
  o->reclaim_at = v[KEY_RECLAIM];
  o->dealloc_period = v[KEY_PERIOD];
  o->range_size = v[KEY_RANGE];
  o->granule = v[KEY_GRANULE];
  o->unmap_threshold = v[KEY_UNMAP];
  o->map_budget = v[KEY_BUDGET];
  return true;
}

/* Text appended into a buffer of `cap` bytes, cut (never overrun) when it
 * does not fit: at < cap always, buf NUL-terminated. */
struct text {
  char *buf;
  size_t cap, at;
};

static void text_add(struct text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void text_add(struct text *t, const char *fmt, ...) {
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(t->buf + t->at, t->cap - t->at, fmt, ap);
  va_end(ap);
  if (n > 0)
    t->at = t->at + (size_t)n < t->cap ? t->at + (size_t)n : t->cap - 1;
}

/* Appends SEP KEY=N, N in the largest binary suffix dividing it exactly
 * (4194304 -> 4M), else in bytes. */
static void text_size(struct text *t, char *sep, const char *key,
                      uint64_t n) {
  static const char suffix[] = "KMGT";
  int u = -1;
  while (n && n % 1024 == 0 && u < 3) {
    n /= 1024;
    u++;
  }
  text_add(t, "%c%s=%llu%.*s", *sep, key, (unsigned long long)n,
           u >= 0 ? 1 : 0, &suffix[u >= 0 ? u : 0]);
  *sep = ',';
}

/* The canonical text of a custom layout (toolutil.h, tool_layout.text):
 * every pool's kind, its required keys, and its other keys where they
 * differ from their defaults. */
static void format_layout(const tool_layout *l, char *buf, size_t cap) {
  struct text t = {buf, cap, 0};
  buf[0] = '\0';
  for (uint32_t i = 0; i < l->layout.pool_count; i++) {
    const hippo_pool_options *o = &l->pools[i];
    const struct spec_kind *k;
    char sep = ':';
    for (k = spec_kinds; k->name && k->kind != o->kind; k++)
      ;
    if (!k->name)
      continue; /* not from the parser: nothing to name it by */
    text_add(&t, "%s%s", i ? ";" : "", k->name);
    if (k->keys & BIT(KEY_PAGE))
      text_size(&t, &sep, "page", o->page_size);
    if ((k->keys & BIT(KEY_SLICE)) &&
        (k->needs & BIT(KEY_SLICE) || o->max_slice_size))
      text_size(&t, &sep, "slice", o->max_slice_size);
    if (o->max_pool_size)
      text_size(&t, &sep, "cap", o->max_pool_size);
    if (k->keys & BIT(KEY_MAX))
      text_size(&t, &sep, "max", o->max_alloc_size);
    if (o->reclaim_at)
      text_size(&t, &sep, "reclaim", o->reclaim_at);
    if (o->range_size)
      text_size(&t, &sep, "range", o->range_size);
    if (o->granule)
      text_size(&t, &sep, "granule", o->granule);
    if (o->unmap_threshold)
      text_size(&t, &sep, "unmap", o->unmap_threshold);
    if (o->map_budget)
      text_size(&t, &sep, "budget", o->map_budget);
    if (o->kind != HIPPO_POOL_VIRTUAL &&
        o->dealloc_period != SPEC_DEFAULT_PERIOD) {
      text_add(&t, "%cperiod=%llu", sep,
               (unsigned long long)o->dealloc_period);
      sep = ',';
    }
  }
}

bool tool_parse_layout(const char *spec, tool_layout *out, char *why,
                       size_t len) {
  tool_layout l;
  struct piece all;
  const char *p, *end;
  unsigned index = 0;
  char word[SPEC_EXCERPT + 1];

  if (why && len)
    why[0] = '\0';
  all = piece_trim(spec ? spec : "", spec ? strlen(spec) : 0);
  if (all.n == 0)
    return spec_error(why, len,
                      "empty (expected a preset, adaptive, sub_slices, "
                      "exclusive_pages or virtual, or pools such as "
                      "sliced:page=4M,slice=1M;exclusive:max=1G)");
  memset(&l, 0, sizeof l);
  l.layout.struct_size = sizeof l.layout;

  /* A preset name alone. */
  if (!memchr(all.p, ';', all.n) && !memchr(all.p, ':', all.n)) {
    hippo_preset preset;
    piece_str(all, word, sizeof word);
    if (all.n < sizeof word && tool_parse_preset(word, &preset)) {
      l.layout.preset = preset;
      snprintf(l.text, sizeof l.text, "%s", tool_preset_name(preset));
      goto done;
    }
    for (const struct spec_kind *k = spec_kinds; k->name; k++)
      if (piece_is(all, k->name))
        goto pools;
    return spec_error(why, len,
                      "'%s' is neither a preset (adaptive, sub_slices, "
                      "exclusive_pages, virtual) nor a pool kind (sliced, "
                      "exclusive, direct, arena, virtual)",
                      word);
  }

pools:
  l.layout.preset = HIPPO_PRESET_CUSTOM;
  l.layout.pool_options_size = sizeof(hippo_pool_options);
  p = all.p;
  end = all.p + all.n;
  for (;;) {
    const char *semi = memchr(p, ';', (size_t)(end - p));
    struct piece text = piece_trim(p, (semi ? semi : end) - p);
    if (++index > TOOL_LAYOUT_MAX_POOLS)
      return spec_error(why, len,
                        "pool %u: more than %u pools (the plugin's limit)",
                        index, TOOL_LAYOUT_MAX_POOLS);
    if (!parse_pool(text, index, &l.pools[index - 1], why, len))
      return false;
    if (!semi)
      break;
    p = semi + 1;
  }
  l.layout.pool_count = index;
  format_layout(&l, l.text, sizeof l.text);

done:
  memcpy(out, &l, sizeof l);
  out->layout.pools =
      out->layout.preset == HIPPO_PRESET_CUSTOM ? out->pools : NULL;
  return true;
}

void tool_layout_get(const tool_layout *l, hippo_layout *dst) {
  *dst = l->layout;
  dst->struct_size = sizeof *dst;
  dst->pools = l->layout.preset == HIPPO_PRESET_CUSTOM ? l->pools : NULL;
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
  if (what && arg)
    fprintf(stderr, "%s: %s '%s'\n", prog, what, arg);
  else if (what)
    fprintf(stderr, "%s: %s\n", prog, what);
  fprintf(stderr, "%s\n", usage);
  fprintf(stderr, "Try '%s --help' for more.\n", prog);
}

void tool_bad_option(const char *prog, const char *usage, int c,
                     char *const *argv) {
  const char *last = argv[optind - 1];
  char dash[3] = {'-', (char)optopt, '\0'};
  /* a long option is the argument getopt last read; a short one is its
   * letter, wherever in a cluster it stood */
  bool letter = strncmp(last, "--", 2) != 0 && optopt > 0 && optopt < 128;
  tool_usage_error(prog, usage,
                   c == ':' ? "option needs an argument:" : "unknown option",
                   letter ? dash : last);
}

void tool_device_options_init(struct tool_device_options *o) {
  memset(o, 0, sizeof *o);
  o->backend = HIPPO_BACKEND_AUTO;
  o->preset = HIPPO_PRESET_ADAPTIVE;
  (void)tool_parse_layout("adaptive", &o->layout, NULL, 0);
}

void tool_device_options_help(void) {
  printf("  --plugin PATH     the plugin to load (default: $HIPPO_PLUGIN, else\n"
         "                    %s when run from the build tree,\n"
         "                    else %s)\n"
         "  --backend NAME    auto (default), host, dry or hip\n"
         "  --capacity BYTES  host/dry: the emulated device memory (default\n"
         "                    16 GiB); hip: a budget, hippo holds at most this\n"
         "                    much of the GPU (default: all of it); suffixes\n"
         "                    K, M, G, T; 0 is the default, and another value\n"
         "                    must be at least the alignment\n"
         "  --layout LAYOUT   adaptive (default), sub_slices,\n"
         "                    exclusive_pages, virtual, or pools such as\n"
         "                    'sliced:page=4M,slice=1M;exclusive:max=1G'\n"
         "                    (kinds sliced, arena: page, slice, cap, period;\n"
         "                    exclusive: max, period; direct: reclaim,\n"
         "                    period; virtual: slice, range, granule,\n"
         "                    unmap, budget)\n",
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
    char why[200];
    if (!tool_parse_layout(value, &o->layout, why, sizeof why)) {
      snprintf(o->why, sizeof o->why, "--layout: %s; in", why);
      return o->why;
    }
    o->preset = o->layout.layout.preset;
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

  tool_layout_get(&o->layout, &layout);
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
    /* The plugin counts a custom layout's pools from 0, the spec from 1. */
    if (st == HIPPO_POOL_CONFIG && layout.preset == HIPPO_PRESET_CUSTOM)
      fprintf(stderr,
              "  (the plugin's layout pool N is pool N+1 of --layout %s)\n",
              o->layout.text);
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
