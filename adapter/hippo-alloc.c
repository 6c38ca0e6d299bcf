/* hippo-alloc.c -- hippo under PyTorch and CuPy (hippo-alloc.h).
 *
 * Above the ABI: it loads the plugin with hippo_load and calls only the
 * table (never the core).  One adapter device per GPU ordinal:
 *
 *   adapter_device: its hippo device, the native streams attached so far
 *   and a pointer table (open addressing, linear probing, backward-shift
 *   deletion: no tombstones), all under the device's lock.
 *   Invariants: table_cap is 0 or a power of two >= 16; count < table_cap
 *   / 2 after every insertion (the table grows first, the only allocation
 *   on the allocation path); every live entry (ptr != 0) is reachable
 *   from its home slot without crossing an empty slot; each names a live
 *   hippo reservation of `s` whose address is ptr, of `size` bytes
 *   requested; in_use is the sum of the live entries' sizes, peak_in_use
 *   >= in_use (the device-wide peak since the last reset: exact, where
 *   hippo's device usage sums its streams' peaks); streams[0 .. nstreams)
 *   are attached, each native once; dev is NULL only after set_fraction
 *   could open neither the new device nor the old one again (no stream,
 *   no entry then; the next allocation tries to open it).
 *
 * The devices are published in `devices[]` once open (an atomic pointer,
 * read without a lock); opening, reopening (set_fraction) and closing take
 * the global lock.  hippo_alloc_close frees them: the caller makes sure no
 * other thread is inside the adapter then (hippo-alloc.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hippo-alloc.h"
#include "toolutil.h"

#define MAX_DEVICES 64
#define TABLE_MIN 16u
#define REPORTS_MAX 16u

typedef struct entry {
  uintptr_t ptr; /* 0: empty slot */
  hippo_handle h;
  hippo_stream *s;
  uint64_t size; /* requested */
} entry;

typedef struct native_stream {
  void *native;
  hippo_stream *s;
} native_stream;

typedef struct adapter_device {
  pthread_mutex_t lock;
  int ordinal;
  hippo_device *dev;
  uint64_t total;          /* the device's memory when first opened */
  native_stream *streams;
  uint32_t nstreams, streams_cap;
  entry *table;
  uint64_t table_cap, count;
  uint64_t in_use, peak_in_use;
  uint64_t limit; /* set_fraction's cap on in_use while blocks were live
                     (0: none; the device's budget does it otherwise) */
  uint64_t foreign_frees, failed_allocs;
  uint64_t oom_retries; /* out of memory retried after a device cleanup */
} adapter_device;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static void *g_lib;
static const hippo_api *g_api;
static _Atomic(adapter_device *) g_devices[MAX_DEVICES];
static atomic_uint g_reports;

static _Thread_local char t_error[1024];

/* ---- errors ----------------------------------------------------------------- */

/* The thread's last error becomes the message; it is printed (at most
 * REPORTS_MAX times a process, unless HIPPO_ALLOC_QUIET) when `report`. */
static void say(bool report, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t_error, sizeof t_error, fmt, ap);
  va_end(ap);
  if (report && !getenv("HIPPO_ALLOC_QUIET")) {
    unsigned n = atomic_fetch_add(&g_reports, 1);
    if (n < REPORTS_MAX)
      fprintf(stderr, "hippo-alloc: %s\n", t_error);
    else if (n == REPORTS_MAX)
      fprintf(stderr, "hippo-alloc: further reports are not printed "
                      "(hippo_alloc_last_error has the last one)\n");
  }
}

const char *hippo_alloc_last_error(void) { return t_error; }

/* ---- opening ---------------------------------------------------------------- */

/* The plugin, once (global lock held). */
static hippo_status load_plugin(void) {
  const char *path;
  hippo_status st;
  if (g_api)
    return HIPPO_SUCCESS;
  path = tool_plugin_path(NULL);
  st = hippo_load(path, &g_lib, &g_api);
  if (st != HIPPO_SUCCESS)
    say(true, "%s (set HIPPO_PLUGIN to the plugin's path)",
        hippo_load_error());
  return st;
}

/* The device description from the environment; layout and got are the
 * storage of the parsed layout. */
static hippo_status describe(int ordinal, uint64_t capacity,
                             hippo_device_desc *desc, tool_layout *layout,
                             hippo_layout *got) {
  const char *backend = getenv("HIPPO_ALLOC_BACKEND");
  const char *spec = getenv("HIPPO_ALLOC_LAYOUT");
  const char *cap = getenv("HIPPO_ALLOC_CAPACITY");
  const char *graphs = getenv("HIPPO_ALLOC_GRAPHS");
  char why[256];
  memset(desc, 0, sizeof *desc);
  desc->struct_size = sizeof *desc;
  desc->hip_device = ordinal;
  /* no AUTO_RELOCATE: a VIRTUAL pool's map budget gives idle granules
   * back on the allocation path, with one wait for the stream, only when
   * the footprint asks (issue 37); a relocation per allocation would
   * cost a need check each, and on the ADAPTIVE fallback a driver free
   * at an allocation */
  desc->flags = HIPPO_DEVICE_NO_MOVE;
  /* host: the framework frees a block only once no graph uses it
   * (PyTorch's MemPool route: a graph's pool lives as long as the graph),
   * so hippo keeps nothing for captures it cannot be told are gone */
  if (graphs && !strcmp(graphs, "host"))
    desc->flags |= HIPPO_DEVICE_HOST_GRAPHS;
  else if (graphs && *graphs && strcmp(graphs, "hippo")) {
    say(true, "HIPPO_ALLOC_GRAPHS=%s: host or hippo", graphs);
    return HIPPO_INVALID_ARGUMENT;
  }
  if (backend && *backend && !tool_parse_backend(backend, &desc->backend)) {
    say(true, "HIPPO_ALLOC_BACKEND=%s: not a backend (auto, hip, host or "
              "dry)", backend);
    return HIPPO_INVALID_ARGUMENT;
  }
  if (!tool_parse_layout(spec && *spec ? spec : "virtual", layout, why,
                         sizeof why)) {
    say(true, "HIPPO_ALLOC_LAYOUT: %s", why);
    return HIPPO_INVALID_ARGUMENT;
  }
  tool_layout_get(layout, got);
  desc->layout = got;
  if (capacity)
    desc->capacity = capacity;
  else if (cap && *cap && !tool_parse_bytes(cap, &desc->capacity)) {
    say(true, "HIPPO_ALLOC_CAPACITY=%s: not a size in bytes (K, M, G, T "
              "suffixes)", cap);
    return HIPPO_INVALID_ARGUMENT;
  }
  return HIPPO_SUCCESS;
}

/* Opens hippo's device for `d` (global lock held). */
static hippo_status open_hippo(adapter_device *d, uint64_t capacity) {
  hippo_device_desc desc;
  tool_layout layout;
  hippo_layout got;
  hippo_device_info info;
  hippo_status st = describe(d->ordinal, capacity, &desc, &layout, &got);
  if (st != HIPPO_SUCCESS)
    return st;
  st = g_api->device_open(&desc, &d->dev);
  if (st != HIPPO_SUCCESS) {
    say(true, "device %d: %s", d->ordinal, g_api->last_error());
    return st;
  }
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (!d->total && g_api->device_info(d->dev, &info) == HIPPO_SUCCESS)
    d->total = info.total_memory;
  return HIPPO_SUCCESS;
}

/* Detaches every stream and closes hippo's device (its lock held). */
static void close_hippo(adapter_device *d) {
  for (uint32_t i = 0; i < d->nstreams; i++)
    (void)g_api->stream_detach(d->streams[i].s);
  d->nstreams = 0;
  if (d->dev)
    (void)g_api->device_close(d->dev);
  d->dev = NULL;
  if (d->table)
    memset(d->table, 0, d->table_cap * sizeof *d->table);
  d->count = 0;
  d->in_use = 0;
}

/* Whether a live block is on hippo stream s (device lock held): a look
 * at the whole table, for the paths that detach (empty_cache, out of
 * memory), so the allocation path keeps no count per stream. */
static bool holds_blocks(const adapter_device *d, const hippo_stream *s) {
  for (uint64_t i = 0; i < d->table_cap; i++)
    if (d->table[i].ptr && d->table[i].s == s)
      return true;
  return false;
}

/* Every stream but `keep` that holds no live block is detached (its
 * range and pools go back; it is attached again when next seen): a
 * stream PyTorch or CuPy used once and left keeps nothing (device lock
 * held).  A detach that fails keeps the stream. */
static void detach_idle(adapter_device *d, const hippo_stream *keep) {
  uint32_t kept = 0;
  for (uint32_t i = 0; i < d->nstreams; i++) {
    native_stream *n = &d->streams[i];
    if (n->s != keep && !holds_blocks(d, n->s) &&
        g_api->stream_detach(n->s) == HIPPO_SUCCESS)
      continue;
    d->streams[kept++] = *n;
  }
  d->nstreams = kept;
}

/* The adapter device of `ordinal`, opened on first use; NULL with the
 * thread's error on failure. */
static adapter_device *device_get(int ordinal) {
  adapter_device *d;
  if (ordinal < 0 || ordinal >= MAX_DEVICES) {
    say(true, "device %d: ordinals are 0 .. %d", ordinal, MAX_DEVICES - 1);
    return NULL;
  }
  d = atomic_load_explicit(&g_devices[ordinal], memory_order_acquire);
  if (d)
    return d;
  pthread_mutex_lock(&g_lock);
  d = atomic_load_explicit(&g_devices[ordinal], memory_order_relaxed);
  if (!d && load_plugin() == HIPPO_SUCCESS) {
    d = calloc(1, sizeof *d);
    if (!d) {
      say(true, "device %d: no host memory for the adapter", ordinal);
    } else {
      pthread_mutex_init(&d->lock, NULL);
      d->ordinal = ordinal;
      if (open_hippo(d, 0) != HIPPO_SUCCESS) {
        pthread_mutex_destroy(&d->lock);
        free(d);
        d = NULL;
      } else {
        atomic_store_explicit(&g_devices[ordinal], d, memory_order_release);
      }
    }
  }
  pthread_mutex_unlock(&g_lock);
  return d;
}

/* The open adapter device of `ordinal`, or NULL (no error set). */
static adapter_device *device_open_only(int ordinal) {
  if (ordinal < 0 || ordinal >= MAX_DEVICES)
    return NULL;
  return atomic_load_explicit(&g_devices[ordinal], memory_order_acquire);
}

/* hippo's stream of `native`, attached the first time (device lock held);
 * NULL with the thread's error. */
static hippo_stream *stream_get(adapter_device *d, void *native) {
  hippo_stream *s;
  hippo_status st;
  for (uint32_t i = 0; i < d->nstreams; i++)
    if (d->streams[i].native == native)
      return d->streams[i].s;
  if (d->nstreams == d->streams_cap) {
    uint32_t cap = d->streams_cap ? d->streams_cap * 2 : 8;
    native_stream *grown = realloc(d->streams, cap * sizeof *grown);
    if (!grown) {
      say(false, "device %d: no host memory for %u streams", d->ordinal, cap);
      return NULL;
    }
    d->streams = grown;
    d->streams_cap = cap;
  }
  st = g_api->stream_attach(d->dev, native, &s);
  if (st != HIPPO_SUCCESS) {
    say(false, "device %d: attaching stream %p: %s", d->ordinal, native,
        g_api->last_error());
    return NULL;
  }
  d->streams[d->nstreams++] = (native_stream){native, s};
  return s;
}

/* ---- the pointer table ------------------------------------------------------ */

static uint64_t home(const adapter_device *d, uintptr_t ptr) {
  /* pointers are 256-byte aligned at least: mix the bits above */
  return ((uint64_t)(ptr >> 8) * UINT64_C(0x9E3779B97F4A7C15)) >> 17 &
         (d->table_cap - 1);
}

static entry *table_find(adapter_device *d, uintptr_t ptr) {
  if (!d->table_cap)
    return NULL;
  for (uint64_t i = home(d, ptr);; i = (i + 1) & (d->table_cap - 1)) {
    entry *e = &d->table[i];
    if (e->ptr == ptr)
      return e;
    if (!e->ptr)
      return NULL;
  }
}

static void table_put(adapter_device *d, entry e) {
  uint64_t i = home(d, e.ptr);
  while (d->table[i].ptr)
    i = (i + 1) & (d->table_cap - 1);
  d->table[i] = e;
  d->count++;
}

/* Room for one more entry: false (the thread's error set) when the table
 * had to grow and host memory ran out. */
static bool table_room(adapter_device *d) {
  entry *old = d->table;
  uint64_t old_cap = d->table_cap, cap;
  if ((d->count + 1) * 2 <= d->table_cap)
    return true;
  cap = old_cap ? old_cap * 2 : TABLE_MIN;
  d->table = calloc(cap, sizeof *d->table);
  if (!d->table) {
    d->table = old;
    say(false, "device %d: no host memory for a table of %llu pointers",
        d->ordinal, (unsigned long long)cap);
    return false;
  }
  d->table_cap = cap;
  d->count = 0;
  for (uint64_t i = 0; i < old_cap; i++)
    if (old[i].ptr)
      table_put(d, old[i]);
  free(old);
  return true;
}

/* Backward-shift deletion: the entries after e that probed past it move
 * back, so no empty slot breaks a probe. */
static void table_remove(adapter_device *d, entry *e) {
  uint64_t mask = d->table_cap - 1, hole = (uint64_t)(e - d->table);
  for (uint64_t i = (hole + 1) & mask; d->table[i].ptr; i = (i + 1) & mask) {
    uint64_t h = home(d, d->table[i].ptr);
    /* it may fill the hole when its home is not within (hole, i] */
    if (((i - h) & mask) >= ((i - hole) & mask)) {
      d->table[hole] = d->table[i];
      hole = i;
    }
  }
  d->table[hole].ptr = 0;
  d->count--;
}

/* ---- the frameworks' calls -------------------------------------------------- */

/* HIPPO_ALLOC_OOM=abort: a route whose framework checks no NULL (PyTorch's
 * change_current_allocator, pytorch#133280; CuPy's CFunctionAllocator)
 * would hand a block at address 0 to a kernel, whose fault kills the
 * context later and elsewhere: the process stops here instead, with
 * hippo's message (the thread's error). */
static void stop_if_asked(size_t size, int device) {
  const char *oom = getenv("HIPPO_ALLOC_OOM");
  if (!oom || strcmp(oom, "abort") != 0)
    return;
  fprintf(stderr,
          "hippo-alloc: alloc(%zu B, device %d) failed: %s\n"
          "hippo-alloc: stopping (HIPPO_ALLOC_OOM=abort): this framework "
          "route would use a NULL block\n",
          size, device, t_error);
  abort();
}

void *hippo_alloc(size_t size, int device, void *stream) {
  adapter_device *d;
  hippo_stream *s;
  hippo_handle h = 0;
  hippo_status st;
  void *ptr = NULL;
  if (size == 0)
    return NULL;
  d = device_get(device);
  if (!d) {
    stop_if_asked(size, device);
    return NULL;
  }
  pthread_mutex_lock(&d->lock);
  if (!d->dev && open_hippo(d, 0) != HIPPO_SUCCESS) /* set_fraction's */
    goto failed;
  if (d->limit && d->in_use + size > d->limit) {
    say(false, "alloc(%zu B, device %d): out of memory: %llu B are in use "
               "and the memory fraction allows %llu B "
               "(set_per_process_memory_fraction)",
        size, device, (unsigned long long)d->in_use,
        (unsigned long long)d->limit);
    goto failed;
  }
  s = stream_get(d, stream);
  if (!s || !table_room(d))
    goto failed;
  st = g_api->reserve(s, size, HIPPO_MODE_AUTO, &h);
  if (st == HIPPO_OUT_OF_MEMORY) {
    /* hippo's ladder gave back what this stream held empty; what the
     * device's other streams keep idle (their granules, their empty
     * pages, the streams no block holds) goes too, and the reservation
     * is tried once more, as PyTorch frees its cached blocks before it
     * raises (the cleanup waits for the streams' work) */
    d->oom_retries++;
    (void)g_api->cleanup(d->dev, NULL);
    detach_idle(d, s);
    st = g_api->reserve(s, size, HIPPO_MODE_AUTO, &h);
  }
  if (st == HIPPO_SUCCESS)
    st = g_api->resolve(s, h, &ptr, NULL);
  if (st != HIPPO_SUCCESS) {
    say(false, "alloc(%zu B, device %d): %s", size, device,
        g_api->last_error());
    if (h)
      (void)g_api->release(s, h);
    goto failed;
  }
  table_put(d, (entry){(uintptr_t)ptr, h, s, size});
  d->in_use += size;
  if (d->in_use > d->peak_in_use)
    d->peak_in_use = d->in_use;
  pthread_mutex_unlock(&d->lock);
  return ptr;
failed:
  d->failed_allocs++;
  pthread_mutex_unlock(&d->lock);
  stop_if_asked(size, device);
  return NULL;
}

void hippo_free(void *ptr, size_t size, int device, void *stream) {
  adapter_device *d;
  entry *e;
  (void)size;
  (void)stream;
  if (!ptr)
    return;
  d = device_open_only(device);
  if (!d) {
    say(true, "free(%p, device %d): no such device is open; ignored", ptr,
        device);
    return;
  }
  pthread_mutex_lock(&d->lock);
  e = table_find(d, (uintptr_t)ptr);
  if (!e) {
    d->foreign_frees++;
    say(true, "free(%p, device %d): hippo did not hand out this pointer "
              "(or it was freed already); ignored", ptr, device);
  } else if (g_api->release(e->s, e->h) != HIPPO_SUCCESS) {
    say(true, "free(%p, device %d): %s; the block stays allocated", ptr,
        device, g_api->last_error());
  } else {
    d->in_use -= e->size;
    table_remove(d, e);
  }
  pthread_mutex_unlock(&d->lock);
}

void *hippo_cupy_malloc(void *param, size_t size, int device) {
  (void)param;
  return hippo_alloc(size, device, NULL);
}

void hippo_cupy_free(void *param, void *ptr, int device) {
  (void)param;
  hippo_free(ptr, 0, device, NULL);
}

/* PyTorch's CUDAPluggableAllocator::init passes the number of devices
 * (torch/csrc/cuda/CUDAPluggableAllocator.cpp: init_fn_(device_count)),
 * not an ordinal: nothing is opened here (each device opens at its first
 * allocation, on the thread and device that allocate); a count hippo
 * cannot serve is reported. */
void hippo_alloc_init(int device_count) {
  if (device_count < 1 || device_count > MAX_DEVICES)
    say(true, "init: %d devices; hippo-alloc serves 1 to %d", device_count,
        MAX_DEVICES);
}

void hippo_alloc_empty_cache(void) {
  for (int i = 0; i < MAX_DEVICES; i++) {
    adapter_device *d = device_open_only(i);
    if (!d)
      continue;
    pthread_mutex_lock(&d->lock);
    if (d->dev && g_api->cleanup(d->dev, NULL) != HIPPO_SUCCESS)
      say(true, "empty_cache (device %d): %s", i, g_api->last_error());
    if (d->dev)
      detach_idle(d, NULL);
    pthread_mutex_unlock(&d->lock);
  }
}

void hippo_alloc_set_fraction(double fraction, int device) {
  adapter_device *d;
  uint64_t budget;
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    say(true, "set_fraction(%g, device %d): the fraction must be in (0, 1]",
        fraction, device);
    return;
  }
  d = device_get(device);
  if (!d)
    return;
  pthread_mutex_lock(&g_lock);
  pthread_mutex_lock(&d->lock);
  budget = (uint64_t)(fraction * (double)d->total);
  if (d->count) {
    /* blocks are live, so the device cannot open again with the budget:
     * the cap holds the bytes in use instead (allocations past it fail as
     * out of memory) until a fraction is set while none is live */
    d->limit = budget;
  } else if (budget < 1u << 20) {
    say(true, "set_fraction(%g, device %d): %llu B is below 1 MiB", fraction,
        device, (unsigned long long)budget);
  } else {
    d->limit = 0;
    close_hippo(d);
    /* not even the old device again: d stays, without a device, and the
     * next allocation tries to open it afresh (other threads may hold d) */
    if (open_hippo(d, budget) != HIPPO_SUCCESS)
      (void)open_hippo(d, 0);
  }
  pthread_mutex_unlock(&d->lock);
  pthread_mutex_unlock(&g_lock);
}

void hippo_alloc_record_stream(void *ptr, void *stream) {
  for (int i = 0; i < MAX_DEVICES; i++) {
    adapter_device *d = device_open_only(i);
    entry *e;
    if (!d)
      continue;
    pthread_mutex_lock(&d->lock);
    e = table_find(d, (uintptr_t)ptr);
    if (e) {
      hippo_stream *user = stream_get(d, stream);
      if (!user) {
        char why[sizeof t_error];
        snprintf(why, sizeof why, "%s", t_error);
        say(true, "record_stream(%p): %s", ptr, why);
      }
      else if (g_api->record_use(e->s, e->h, user) != HIPPO_SUCCESS)
        say(true, "record_stream(%p, stream %p): %s", ptr, stream,
            g_api->last_error());
      pthread_mutex_unlock(&d->lock);
      return;
    }
    pthread_mutex_unlock(&d->lock);
  }
  say(true, "record_stream(%p): hippo did not hand out this pointer; "
            "ignored", ptr);
}

/* ---- figures and the rest --------------------------------------------------- */

hippo_status hippo_alloc_usage(int device, hippo_usage *out) {
  adapter_device *d = device_open_only(device);
  hippo_status st;
  if (!d) {
    say(false, "usage: device %d is not open", device);
    return HIPPO_INVALID_ARGUMENT;
  }
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  pthread_mutex_lock(&d->lock);
  st = d->dev ? g_api->usage(d->dev, NULL, out) : HIPPO_INVALID_ARGUMENT;
  if (st != HIPPO_SUCCESS && !d->dev)
    say(false, "usage: device %d could not be opened again", device);
  else if (st != HIPPO_SUCCESS)
    say(false, "usage (device %d): %s", device, g_api->last_error());
  pthread_mutex_unlock(&d->lock);
  return st;
}

/* The figures: the adapter's own (exact, device-wide: the live blocks'
 * bytes and their peak, the streams, the counts) first, then hippo's
 * device usage (what it holds from the driver). */
uint64_t hippo_alloc_figure(int device, const char *name) {
  static const char *const names[] = {
      "allocations",   "bytes_in_use",  "peak_bytes_in_use", "streams",
      "foreign_frees", "failed_allocs", "oom_retries",       "bytes_reserved",
      "peak_bytes_reserved", "bytes_virtual"};
  enum { OWN = 7 }; /* names[0 .. OWN) are the adapter's */
  adapter_device *d = device_open_only(device);
  hippo_usage u;
  size_t k = 0;
  while (k < sizeof names / sizeof *names &&
         (!name || strcmp(name, names[k]) != 0))
    k++;
  if (k == sizeof names / sizeof *names)
    return UINT64_MAX;
  if (!d)
    return 0;
  if (k < OWN) {
    uint64_t v[OWN];
    pthread_mutex_lock(&d->lock);
    v[0] = d->count;
    v[1] = d->in_use;
    v[2] = d->peak_in_use;
    v[3] = d->nstreams;
    v[4] = d->foreign_frees;
    v[5] = d->failed_allocs;
    v[6] = d->oom_retries;
    pthread_mutex_unlock(&d->lock);
    return v[k];
  }
  if (hippo_alloc_usage(device, &u) != HIPPO_SUCCESS)
    return 0;
  return k == OWN       ? u.bytes_reserved
         : k == OWN + 1 ? u.peak_bytes_reserved
                        : u.bytes_virtual;
}

void hippo_alloc_reset_peak(int device) {
  adapter_device *d = device_open_only(device);
  if (!d)
    return;
  pthread_mutex_lock(&d->lock);
  d->peak_in_use = d->in_use;
  pthread_mutex_unlock(&d->lock);
}

hippo_status hippo_alloc_device(int device, const hippo_api **api,
                                hippo_device **dev) {
  adapter_device *d = device_get(device);
  hippo_status st = HIPPO_INVALID_ARGUMENT;
  if (!d)
    return st;
  pthread_mutex_lock(&d->lock);
  if (d->dev || open_hippo(d, 0) == HIPPO_SUCCESS) {
    *api = g_api;
    *dev = d->dev;
    st = HIPPO_SUCCESS;
  }
  pthread_mutex_unlock(&d->lock);
  return st;
}

uint64_t hippo_alloc_close(void) {
  uint64_t live = 0;
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < MAX_DEVICES; i++) {
    adapter_device *d = atomic_load(&g_devices[i]);
    if (!d)
      continue;
    atomic_store(&g_devices[i], NULL);
    pthread_mutex_lock(&d->lock);
    live += d->count;
    close_hippo(d);
    pthread_mutex_unlock(&d->lock);
    pthread_mutex_destroy(&d->lock);
    free(d->streams);
    free(d->table);
    free(d);
  }
  pthread_mutex_unlock(&g_lock);
  return live;
}
