/* entry.c -- the plugin's one exported symbol, its table (ABI 1.0) and
 * the emulation table.
 *
 * This layer checks every argument (NULL pointers, the objects' magic,
 * struct sizes of any version) before the core sees it, and turns caller
 * structs into the plugin's own with hippo__struct_in/out.  Locking lives in
 * the core (device.h states the rule): this layer takes no core lock.
 */
#include <config.h>

#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "device.h"
#include "ladder.h"
#include "manager.h"
#include "relocation.h"

#define EXPORT __attribute__((visibility("default")))

/* The smallest struct of each kind a caller may pass: the size and the
 * first field; every later field defaults to zero. */
#define MIN_STRUCT 8u

/* abi.c accepts struct sizes that are multiples of 8: every field must end
 * on one, so no accepted size cuts a field (or a pointer) in half. */
_Static_assert(sizeof(hippo_device_desc) % 8 == 0 &&
                   offsetof(hippo_device_desc, capacity) % 8 == 0 &&
                   offsetof(hippo_device_desc, layout) % 8 == 0,
               "hippo_device_desc fields end on multiples of 8");
_Static_assert(sizeof(hippo_layout) % 8 == 0 &&
                   offsetof(hippo_layout, pools) % 8 == 0,
               "hippo_layout fields end on multiples of 8");
_Static_assert(sizeof(hippo_pool_options) % 8 == 0 &&
                   sizeof(hippo_device_info) % 8 == 0 &&
                   sizeof(hippo_usage) % 8 == 0 &&
                   sizeof(hippo_pool_report) % 8 == 0 &&
                   sizeof(hippo_relocation_report) % 8 == 0 &&
                   sizeof(hippo_relocation_failure) % 8 == 0 &&
                   sizeof(hippo_emu_counters) % 8 == 0 &&
                   offsetof(hippo_emu_counters, calls) % 8 == 0 &&
                   sizeof(hippo_api) % 8 == 0 &&
                   sizeof(hippo_emu_api) % 8 == 0,
               "ABI structs are multiples of 8 bytes");
/* Every table and struct starts with its size (hippo.h). */
_Static_assert(offsetof(hippo_api, struct_size) == 0 &&
                   offsetof(hippo_emu_api, struct_size) == 0 &&
                   offsetof(hippo_relocation_failure, struct_size) == 0,
               "tables and structs start with struct_size");

#define CHECK_NOT_NULL(p, call, name)                                          \
  do {                                                                         \
    if (HIPPO__UNLIKELY(!(p)))                                                 \
      return hippo__error_set(HIPPO_INVALID_ARGUMENT,                          \
                              call ": " name " must not be NULL");             \
  } while (0)

/* What device_open and stream_attach hand out: a shell naming the device
 * or stream, never freed while the plugin is loaded, so a pointer kept
 * after device_close or stream_detach finds a dead shell
 * (HIPPO_INVALID_ARGUMENT) rather than freed memory, or another device or
 * stream that took its place.  Each open and attach keeps its shell (32
 * bytes) until the plugin is unloaded; all shells are on one list, whose
 * dead ones unloading frees. */
typedef struct shell {
  uint64_t magic;     /* shell_magic of SHELL_DEVICE, _STREAM, or _DEAD */
  void *obj;          /* the hippo_device or hippo_stream; NULL once dead */
  struct shell *next; /* the list of every shell */
} shell;
#define SHELL_DEVICE 0x4c454853u /* "SHEL" */
#define SHELL_STREAM 0x4d525453u /* "STRM" */
#define SHELL_DEAD 0x44414544u   /* "DEAD" */

static pthread_mutex_t shells_lock = PTHREAD_MUTEX_INITIALIZER;
static shell *shells; /* every shell of this copy of the plugin */

/* A kind's magic in this copy of the plugin: the kind mixed with the
 * address of this copy's shell list.  A process may load the plugin twice
 * (two paths, two builds), and each copy's code must refuse the other's
 * devices and streams, whose layout and locks it does not share (a
 * handle's tag does the same for reservations). */
static inline uint64_t shell_magic(uint32_t kind) {
  return (uint64_t)kind << 32 ^ (uint64_t)(uintptr_t)&shells;
}

/* The magics a call compares with, set when the copy loads: one load on
 * every call instead of computing them (3 instructions a call). */
static uint64_t magic_device, magic_stream;
__attribute__((constructor)) static void shell_magics_init(void) {
  magic_device = shell_magic(SHELL_DEVICE);
  magic_stream = shell_magic(SHELL_STREAM);
}

/* A new live shell (its object is set once made), or NULL (no host
 * memory). */
static shell *shell_new(uint32_t kind) {
  shell *sh = calloc(1, sizeof *sh);
  if (sh) {
    sh->magic = shell_magic(kind);
    pthread_mutex_lock(&shells_lock);
    sh->next = shells;
    shells = sh;
    pthread_mutex_unlock(&shells_lock);
  }
  return sh;
}

/* Unloading the plugin (dlclose, or exit): the dead shells go.  Live ones
 * stay, since at exit another thread may still be calling with them (they
 * stay reachable from `shells` until the process ends). */
__attribute__((destructor)) static void shells_free(void) {
  pthread_mutex_lock(&shells_lock);
  for (shell **at = &shells; *at;) {
    shell *sh = *at;
    if (sh->magic == shell_magic(SHELL_DEAD)) {
      *at = sh->next;
      free(sh);
    } else {
      at = &sh->next;
    }
  }
  pthread_mutex_unlock(&shells_lock);
}

static void shell_kill(void *p) {
  shell *sh = p;
  sh->magic = shell_magic(SHELL_DEAD);
  sh->obj = NULL;
}

/* A shell that was never handed out (the open or attach failed) goes. */
static void shell_drop(shell *sh) {
  pthread_mutex_lock(&shells_lock);
  for (shell **at = &shells; *at; at = &(*at)->next)
    if (*at == sh) {
      *at = sh->next;
      break;
    }
  pthread_mutex_unlock(&shells_lock);
  free(sh);
}

/* The object a caller's pointer names, or NULL (NULL, dead, other kind,
 * another copy of the plugin). */
static inline void *shell_obj(const void *p, const uint64_t *magic) {
  const shell *sh = p;
  return HIPPO__LIKELY(sh && sh->magic == *magic) ? sh->obj : NULL;
}

/* The checks below replace the caller's pointer (a shell) in `d` or `s`
 * with the object it names, so the rest of a call works on the object. */
#define CHECK_DEVICE(d, call)                                                  \
  do {                                                                         \
    hippo_device *obj_ = shell_obj((d), &magic_device);                        \
    if (HIPPO__UNLIKELY(!obj_))                                                \
      return hippo__error_set(HIPPO_INVALID_ARGUMENT,                          \
                              call ": device is NULL or not an open device "   \
                                   "of this copy of the plugin (closed "       \
                                   "already?)");                               \
    (d) = obj_;                                                                \
  } while (0)

#define CHECK_STREAM(s, call)                                                  \
  do {                                                                         \
    hippo_stream *obj_ = shell_obj((s), &magic_stream);                        \
    if (HIPPO__UNLIKELY(!obj_))                                                \
      return hippo__error_set(HIPPO_INVALID_ARGUMENT,                          \
                              call ": stream is NULL or not an attached "      \
                                   "stream of this copy of the plugin "        \
                                   "(detached already?)");                     \
    (s) = obj_;                                                                \
  } while (0)


/* ---- diagnostics ------------------------------------------------------ */
static const char *api_last_error(void) { return hippo__error_get(); }

/* ---- layouts: a caller's layout and its pool array, any version --------- */
typedef struct layout_in {
  hippo_layout layout;
  hippo_pool_options pools[HIPPO__MAX_POOLS];
} layout_in;

static hippo_status read_layout(const hippo_layout *in, layout_in *out,
                                const char *call) {
  hippo_status st = hippo__struct_in(in, &out->layout, sizeof out->layout,
                                     MIN_STRUCT, "layout");
  if (st != HIPPO_SUCCESS)
    return hippo__error_wrap(st, "%s", call);
  if (out->layout.preset != HIPPO_PRESET_CUSTOM ||
      out->layout.pool_count > HIPPO__MAX_POOLS || out->layout.pool_count == 0)
    return HIPPO_SUCCESS; /* hippo__layout_resolve names what is wrong */
  /* the stride is the size of the caller's pool struct: like a
   * struct_size, a multiple of 8 (else every other pool would start
   * inside a field) */
  if (!out->layout.pools || out->layout.pool_options_size < MIN_STRUCT ||
      out->layout.pool_options_size > HIPPO__STRUCT_MAX ||
      out->layout.pool_options_size % 8 != 0)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "%s: layout.pools is NULL or "
                            "layout.pool_options_size (%u) is not a multiple "
                            "of 8 in %u..%u; set it to "
                            "sizeof(hippo_pool_options)",
                            call, out->layout.pool_options_size, MIN_STRUCT,
                            HIPPO__STRUCT_MAX);
  for (uint32_t i = 0; i < out->layout.pool_count; i++) {
    const unsigned char *at = (const unsigned char *)out->layout.pools +
                              (size_t)i * out->layout.pool_options_size;
    uint32_t size;
    memcpy(&size, at, sizeof size);
    if (size > out->layout.pool_options_size)
      return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                              "%s: layout pool %u has struct_size %u, larger "
                              "than the stride pool_options_size %u",
                              call, i, size, out->layout.pool_options_size);
    st = hippo__struct_in(at, &out->pools[i], sizeof out->pools[i],
                          MIN_STRUCT, "hippo_pool_options");
    if (st != HIPPO_SUCCESS)
      return hippo__error_wrap(st, "%s: layout pool %u", call, i);
  }
  return HIPPO_SUCCESS;
}

/* ---- devices and streams ------------------------------------------------ */
static hippo_status api_device_open(const hippo_device_desc *desc,
                                    hippo_device **device) {
  hippo_device_desc d;
  layout_in layout;
  hippo_device *dev = NULL;
  shell *sh;
  hippo_status st;
  CHECK_NOT_NULL(device, "device_open", "device");
  st = hippo__struct_in(desc, &d, sizeof d, MIN_STRUCT, "hippo_device_desc");
  if (st != HIPPO_SUCCESS)
    return hippo__error_wrap(st, "device_open");
  if (d.layout) {
    st = read_layout(d.layout, &layout, "device_open");
    if (st != HIPPO_SUCCESS)
      return st;
  }
  sh = shell_new(SHELL_DEVICE); /* first: nothing to undo after */
  if (!sh)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "device_open: host memory for the device");
  st = hippo__device_open(&d, d.layout ? &layout.layout : NULL, layout.pools,
                          &hippo__ladder_hooks, &dev);
  if (st != HIPPO_SUCCESS) {
    shell_drop(sh); /* never handed out */
    return st;
  }
  sh->obj = dev;
  *device = (hippo_device *)(void *)sh;
  return HIPPO_SUCCESS;
}

static hippo_status api_device_close(hippo_device *device) {
  void *given = device;
  hippo_status st;
  CHECK_DEVICE(device, "device_close");
  st = hippo__device_close(device);
  if (st == HIPPO_SUCCESS)
    shell_kill(given);
  return st;
}

static hippo_status api_device_info(hippo_device *device,
                                    hippo_device_info *info) {
  hippo_device_info mine;
  hippo_status st;
  CHECK_DEVICE(device, "device_info");
  CHECK_NOT_NULL(info, "device_info", "info");
  st = hippo__device_info(device, &mine);
  if (st != HIPPO_SUCCESS)
    return st;
  return hippo__struct_out(info, &mine, sizeof mine, MIN_STRUCT,
                           "hippo_device_info");
}

static hippo_status api_stream_attach(hippo_device *device, void *native,
                                      hippo_stream **stream) {
  hippo_stream *s = NULL;
  shell *sh;
  hippo_status st;
  CHECK_DEVICE(device, "stream_attach");
  CHECK_NOT_NULL(stream, "stream_attach", "stream");
  sh = shell_new(SHELL_STREAM); /* first: nothing to undo after */
  if (!sh)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "stream_attach: host memory for the stream");
  st = hippo__stream_attach(device, native, &s);
  if (st != HIPPO_SUCCESS) {
    shell_drop(sh); /* never handed out */
    return st;
  }
  sh->obj = s;
  s->shell = sh; /* reports name the stream as the caller knows it */
  *stream = (hippo_stream *)(void *)sh;
  return HIPPO_SUCCESS;
}

static hippo_status api_stream_detach(hippo_stream *stream) {
  void *given = stream;
  hippo_status st;
  CHECK_STREAM(stream, "stream_detach");
  st = hippo__stream_detach(stream);
  if (st == HIPPO_SUCCESS)
    shell_kill(given);
  return st;
}

static hippo_status api_pools_install(hippo_device *device,
                                      const hippo_layout *layout,
                                      uint64_t *bytes_in_use) {
  layout_in in;
  hippo_status st;
  CHECK_DEVICE(device, "pools_install");
  CHECK_NOT_NULL(layout, "pools_install", "layout");
  st = read_layout(layout, &in, "pools_install");
  if (st != HIPPO_SUCCESS)
    return st;
  return hippo__pools_install(device, &in.layout, in.pools, bytes_in_use);
}

/* ---- reservations -------------------------------------------------------- */
static hippo_status api_reserve(hippo_stream *stream, uint64_t size,
                                hippo_mode mode, hippo_handle *handle) {
  CHECK_STREAM(stream, "reserve");
  CHECK_NOT_NULL(handle, "reserve", "handle");
  if (HIPPO__UNLIKELY(mode > HIPPO_MODE_PERSISTENT))
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "reserve: mode %u is not HIPPO_MODE_AUTO or "
                            "HIPPO_MODE_PERSISTENT",
                            mode);
  return hippo__reserve(stream, size, mode, handle);
}

static hippo_status api_release(hippo_stream *stream, hippo_handle handle) {
  CHECK_STREAM(stream, "release");
  return hippo__release(stream, handle);
}

static hippo_status api_resolve(hippo_stream *stream, hippo_handle handle,
                                void **device_ptr, uint64_t *size) {
  CHECK_STREAM(stream, "resolve");
  CHECK_NOT_NULL(device_ptr, "resolve", "device_ptr");
  return hippo__resolve(stream, handle, device_ptr, size);
}

static hippo_status api_record_use(hippo_stream *stream, hippo_handle handle,
                                   hippo_stream *user) {
  CHECK_STREAM(stream, "record_use");
  CHECK_STREAM(user, "record_use");
  if (user->device != stream->device)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "record_use: the user stream belongs to another "
                            "device");
  return hippo__record_use(stream, handle, user);
}

static hippo_status api_persistent_begin(hippo_stream *stream) {
  CHECK_STREAM(stream, "persistent_begin");
  return hippo__persistent_begin(stream);
}

static hippo_status api_persistent_end(hippo_stream *stream) {
  CHECK_STREAM(stream, "persistent_end");
  return hippo__persistent_end(stream);
}

/* ---- relocation and cleanup ---------------------------------------------- */
static hippo_status api_relocate(hippo_stream *stream) {
  CHECK_STREAM(stream, "relocate");
  return hippo__relocate(stream->device, stream, HIPPO_RELOCATE_EXPLICIT,
                         NULL, "relocate");
}

static hippo_status api_relocate_when_wanted(hippo_stream *stream) {
  CHECK_STREAM(stream, "relocate_when_wanted");
  return hippo__relocate(stream->device, stream, HIPPO_RELOCATE_WANTED,
                         NULL, "relocate_when_wanted");
}

static hippo_status api_relocate_device(hippo_device *device) {
  CHECK_DEVICE(device, "relocate_device");
  return hippo__relocate(device, NULL, HIPPO_RELOCATE_CAPTURE, NULL,
                         "relocate_device");
}

/* A stream argument that may be NULL (every stream of the device): checked
 * and replaced by its object like CHECK_STREAM, and it must belong to
 * `device`. */
#define CHECK_OPTIONAL_STREAM(device, s, call)                                 \
  do {                                                                         \
    if (s) {                                                                   \
      CHECK_STREAM(s, call);                                                   \
      if ((s)->device != (device))                                             \
        return hippo__error_set(HIPPO_INVALID_ARGUMENT,                        \
                                call ": the stream belongs to another "        \
                                     "device");                                \
    }                                                                          \
  } while (0)

static hippo_status api_relocate_with(hippo_device *device,
                                      hippo_stream *stream,
                                      hippo_relocate_reason reason,
                                      hippo_relocation_report *report) {
  hippo_relocation_report mine;
  hippo_status st;
  CHECK_DEVICE(device, "relocate_with");
  CHECK_OPTIONAL_STREAM(device, stream, "relocate_with");
  if (reason > HIPPO_RELOCATE_UNMAP) /* nothing runs: no report */
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "relocate_with: reason %u is not a "
                            "HIPPO_RELOCATE_* value (0 .. %u)",
                            reason, HIPPO_RELOCATE_UNMAP);
  if (report && (st = hippo__struct_out_ok(report, MIN_STRUCT,
                                           "hippo_relocation_report")) !=
                    HIPPO_SUCCESS)
    return st; /* the size is checked before anything moves */
  /* a relocation that fails before it plans (no host memory) reports
   * nothing run: outcome NONE, not stack bytes */
  memset(&mine, 0, sizeof mine);
  mine.struct_size = sizeof mine;
  mine.reason = reason;
  st = hippo__relocate(device, stream, reason, &mine, "relocate_with");
  if (report) {
    hippo__error_kept kept;
    hippo__error_keep(&kept);
    (void)hippo__struct_out(report, &mine, sizeof mine, MIN_STRUCT,
                            "hippo_relocation_report");
    hippo__error_restore(&kept);
  }
  return st;
}

static hippo_status api_relocation_report(hippo_device *device,
                                          hippo_stream *stream,
                                          hippo_relocation_report *report) {
  hippo_relocation_report mine;
  CHECK_DEVICE(device, "relocation_report");
  CHECK_NOT_NULL(report, "relocation_report", "report");
  CHECK_OPTIONAL_STREAM(device, stream, "relocation_report");
  (void)hippo__relocation_report(device, stream, &mine);
  return hippo__struct_out(report, &mine, sizeof mine, MIN_STRUCT,
                           "hippo_relocation_report");
}

static hippo_status api_relocation_failure(hippo_device *device,
                                           hippo_stream *stream,
                                           uint32_t index,
                                           hippo_relocation_failure *failure) {
  hippo_relocation_failure mine;
  hippo_status st;
  CHECK_DEVICE(device, "relocation_failure");
  CHECK_NOT_NULL(failure, "relocation_failure", "failure");
  CHECK_OPTIONAL_STREAM(device, stream, "relocation_failure");
  if ((st = hippo__struct_out_ok(failure, MIN_STRUCT,
                                 "hippo_relocation_failure")) != HIPPO_SUCCESS)
    return hippo__error_wrap(st, "relocation_failure");
  st = hippo__relocation_failure(device, stream, index, &mine);
  if (st != HIPPO_SUCCESS)
    return st;
  return hippo__struct_out(failure, &mine, sizeof mine, MIN_STRUCT,
                           "hippo_relocation_failure");
}

static hippo_status api_relocation_need(hippo_stream *stream,
                                        hippo_relocation_need *need) {
  CHECK_STREAM(stream, "relocation_need");
  CHECK_NOT_NULL(need, "relocation_need", "need");
  return hippo__relocation_need(stream, need);
}

static hippo_status api_cleanup(hippo_device *device, hippo_stream *stream) {
  CHECK_DEVICE(device, "cleanup");
  CHECK_OPTIONAL_STREAM(device, stream, "cleanup");
  return hippo__cleanup(device, stream);
}

static hippo_status api_reclaim(hippo_device *device, hippo_stream *stream) {
  CHECK_DEVICE(device, "reclaim");
  CHECK_OPTIONAL_STREAM(device, stream, "reclaim");
  return hippo__reclaim(device, stream);
}

static hippo_status api_graph_retire(hippo_device *device,
                                     uint64_t capture_id) {
  CHECK_DEVICE(device, "graph_retire");
  return hippo__graph_retire(device, capture_id);
}

/* ---- figures --------------------------------------------------------------- */
static hippo_status api_usage(hippo_device *device, hippo_stream *stream,
                              hippo_usage *usage) {
  hippo_usage mine;
  hippo_status st;
  CHECK_DEVICE(device, "usage");
  CHECK_NOT_NULL(usage, "usage", "usage");
  CHECK_OPTIONAL_STREAM(device, stream, "usage");
  if (stream) {
    st = hippo__stream_usage(stream, &mine);
  } else {
    st = hippo__device_usage(device, &mine);
  }
  if (st != HIPPO_SUCCESS)
    return st;
  return hippo__struct_out(usage, &mine, sizeof mine, MIN_STRUCT,
                           "hippo_usage");
}

static hippo_status api_pool_report(hippo_stream *stream, uint32_t index,
                                    hippo_pool_report *report,
                                    hippo_pool_options *options) {
  hippo_pool_report mine;
  hippo_pool_options opt;
  hippo_status st;
  CHECK_STREAM(stream, "pool_report");
  CHECK_NOT_NULL(report, "pool_report", "report");
  if ((st = hippo__struct_out_ok(report, MIN_STRUCT, "hippo_pool_report")) !=
          HIPPO_SUCCESS ||
      (options && (st = hippo__struct_out_ok(options, MIN_STRUCT,
                                             "hippo_pool_options")) !=
                      HIPPO_SUCCESS))
    return hippo__error_wrap(st, "pool_report"); /* nothing written */
  st = hippo__pool_report_get(stream, index, &mine, &opt);
  if (st != HIPPO_SUCCESS)
    return st;
  if (options)
    (void)hippo__struct_out(options, &opt, sizeof opt, MIN_STRUCT,
                            "hippo_pool_options");
  return hippo__struct_out(report, &mine, sizeof mine, MIN_STRUCT,
                           "hippo_pool_report");
}

static hippo_status api_check(hippo_device *device) {
  CHECK_DEVICE(device, "check");
  return hippo__device_check(device);
}

/* ---- emulation --------------------------------------------------------------- */
#define EMU_OP(d, op, call)                                                    \
  do {                                                                         \
    CHECK_DEVICE(d, call);                                                     \
    if (!(d)->be->ops->op)                                                     \
      return hippo__error_set(HIPPO_UNSUPPORTED,                               \
                              call ": this device's backend does not "         \
                                   "emulate");                                 \
  } while (0)

static hippo_status api_emu_stream_create(hippo_device *device,
                                          void **native) {
  EMU_OP(device, emu_stream_create, "emu_stream_create");
  CHECK_NOT_NULL(native, "emu_stream_create", "native_stream");
  return device->be->ops->emu_stream_create(device->be, native);
}

static hippo_status api_emu_stream_destroy(hippo_device *device,
                                           void *native) {
  EMU_OP(device, emu_stream_destroy, "emu_stream_destroy");
  return hippo__emu_stream_destroy(device, native);
}

static hippo_status api_emu_capture_begin(hippo_device *device, void *native,
                                          uint64_t *capture_id) {
  EMU_OP(device, emu_capture_begin, "emu_capture_begin");
  CHECK_NOT_NULL(capture_id, "emu_capture_begin", "capture_id");
  return device->be->ops->emu_capture_begin(device->be, native, capture_id);
}

static hippo_status api_emu_capture_end(hippo_device *device, void *native) {
  EMU_OP(device, emu_capture_end, "emu_capture_end");
  return device->be->ops->emu_capture_end(device->be, native);
}

static hippo_status api_emu_inject_fault(hippo_device *device,
                                         hippo_call_kind kind, uint64_t nth,
                                         hippo_status status) {
  EMU_OP(device, emu_inject_fault, "emu_inject_fault");
  return device->be->ops->emu_inject_fault(device->be, kind, nth, status);
}

static hippo_status api_emu_read(hippo_device *device, const void *device_ptr,
                                 void *host, uint64_t size) {
  EMU_OP(device, emu_read, "emu_read");
  CHECK_NOT_NULL(host, "emu_read", "host");
  return device->be->ops->emu_read(device->be, (uint64_t)(uintptr_t)device_ptr,
                                   host, size);
}

static hippo_status api_emu_write(hippo_device *device, void *device_ptr,
                                  const void *host, uint64_t size) {
  EMU_OP(device, emu_write, "emu_write");
  CHECK_NOT_NULL(host, "emu_write", "host");
  return device->be->ops->emu_write(device->be, (uint64_t)(uintptr_t)device_ptr,
                                    host, size);
}

static hippo_status api_emu_copy(hippo_device *device, void *native,
                                 void *dst, const void *src, uint64_t size) {
  EMU_OP(device, emu_stream_create, "emu_copy");
  if (device->be->ops->emu_stream_check) {
    hippo_status st =
        device->be->ops->emu_stream_check(device->be, native, "emu_copy");
    if (st != HIPPO_SUCCESS)
      return st;
  }
  return device->be->ops->copy(device->be, native,
                               (uint64_t)(uintptr_t)dst,
                               (uint64_t)(uintptr_t)src, size);
}

static hippo_status api_emu_stream_sync(hippo_device *device, void *native) {
  EMU_OP(device, emu_stream_create, "emu_stream_sync");
  if (device->be->ops->emu_stream_check) {
    hippo_status st = device->be->ops->emu_stream_check(device->be, native,
                                                        "emu_stream_sync");
    if (st != HIPPO_SUCCESS)
      return st;
  }
  return device->be->ops->stream_sync(device->be, native);
}

static hippo_status api_capture_announce(hippo_stream *stream,
                                         hippo_capture_announcement what) {
  CHECK_STREAM(stream, "capture_announce");
  return hippo__stream_announce(stream, what);
}

static hippo_status api_emu_counters(hippo_device *device,
                                     hippo_emu_counters *counters) {
  EMU_OP(device, emu_counters, "emu_counters");
  CHECK_NOT_NULL(counters, "emu_counters", "counters");
  return device->be->ops->emu_counters(device->be, counters);
}

/* ---- the tables and the entry --------------------------------------------------- */
static const hippo_emu_api emu_api = {
    .struct_size = sizeof(hippo_emu_api),
    .stream_create = api_emu_stream_create,
    .stream_destroy = api_emu_stream_destroy,
    .capture_begin = api_emu_capture_begin,
    .capture_end = api_emu_capture_end,
    .inject_fault = api_emu_inject_fault,
    .read = api_emu_read,
    .write = api_emu_write,
    .counters = api_emu_counters,
    .copy = api_emu_copy,
    .stream_sync = api_emu_stream_sync,
};

static hippo_status api_emulation(const hippo_emu_api **emu) {
  CHECK_NOT_NULL(emu, "emulation", "emu");
  *emu = &emu_api;
  return HIPPO_SUCCESS;
}

static const hippo_api api_table = {
    .struct_size = sizeof(hippo_api),
    .abi_version = HIPPO_ABI_VERSION,
    .status_string = hippo__status_string,
    .status_name = hippo__status_name,
    .last_error = api_last_error,
    .device_open = api_device_open,
    .device_close = api_device_close,
    .device_info = api_device_info,
    .stream_attach = api_stream_attach,
    .stream_detach = api_stream_detach,
    .pools_install = api_pools_install,
    .reserve = api_reserve,
    .release = api_release,
    .resolve = api_resolve,
    .record_use = api_record_use,
    .persistent_begin = api_persistent_begin,
    .persistent_end = api_persistent_end,
    .relocate = api_relocate,
    .relocate_when_wanted = api_relocate_when_wanted,
    .relocate_device = api_relocate_device,
    .relocate_with = api_relocate_with,
    .relocation_need = api_relocation_need,
    .relocation_report = api_relocation_report,
    .relocation_failure = api_relocation_failure,
    .cleanup = api_cleanup,
    .reclaim = api_reclaim,
    .graph_retire = api_graph_retire,
    .capture_announce = api_capture_announce,
    .usage = api_usage,
    .pool_report = api_pool_report,
    .check = api_check,
    .emulation = api_emulation,
};

EXPORT hippo_status hippo_plugin_entry(uint32_t *abi_version,
                                       const hippo_api **api) {
  if (!abi_version || !api)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "hippo_plugin_entry: abi_version and api must "
                            "not be NULL");
  /* a caller of another major version (or of a table before 1.0) */
  if (*abi_version >> 16 != HIPPO_ABI_VERSION >> 16 ||
      *abi_version < HIPPO_ABI_VERSION_MIN) {
    uint32_t asked = *abi_version;
    *abi_version = HIPPO_ABI_VERSION;
    return hippo__error_set(HIPPO_INCOMPATIBLE_ABI,
                            "hippo_plugin_entry: the loader asked for ABI "
                            "version %u.%u; this plugin serves %u.%u to "
                            "%u.%u",
                            asked >> 16, asked & 0xffffu,
                            HIPPO_ABI_VERSION_MIN >> 16,
                            HIPPO_ABI_VERSION_MIN & 0xffffu,
                            HIPPO_ABI_VERSION >> 16,
                            HIPPO_ABI_VERSION & 0xffffu);
  }
  if (*abi_version > HIPPO_ABI_VERSION)
    *abi_version = HIPPO_ABI_VERSION;
  *api = &api_table;
  return HIPPO_SUCCESS;
}
