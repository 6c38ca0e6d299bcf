/* hippo.h -- the whole public ABI of the hippo device-memory manager.
 *
 * hippo is a dlopen-able plugin.  It exports exactly one symbol,
 * hippo_plugin_entry(), which negotiates an ABI version and hands back a
 * table of function pointers (hippo_api).  Everything a host runtime uses is
 * declared in this file; nothing else is public.
 *
 * ABI 1.0.  From 1.0 on the ABI only grows at its ends: slots are added at
 * the end of the tables, fields at the end of the structs, values to the
 * lists; nothing is removed, moved or given another meaning.
 *
 * Rules of the ABI:
 *  - Every struct that crosses the ABI starts with `uint32_t struct_size`,
 *    the tables (hippo_api, hippo_emu_api) included.  A caller learns
 *    whether the plugin has a slot or a field with HIPPO_API_HAS and
 *    HIPPO_HAS (below): a table or an output struct smaller than the
 *    caller's header ends before what the plugin does not know.  No
 *    struct is nested in another (a list of structs is an array beside
 *    its stride, as hippo_layout.pools), so every struct can grow.
 *  - The plugin accepts a caller's struct that is smaller (an older caller:
 *    the missing fields take their zero defaults) or larger (a newer caller:
 *    the extra bytes must be zero) and rejects a size it cannot interpret
 *    (below 8, above 65536, not a multiple of 8 -- every field ends on a
 *    multiple of 8 -- or with non-zero bytes it does not know) with
 *    HIPPO_INVALID_ARGUMENT.  Output structs are filled up to the smaller
 *    of the two sizes: a larger caller's bytes past the plugin's struct are
 *    zeroed (the fields it does not know read as zero) and its struct_size
 *    becomes the plugin's (so HIPPO_HAS says which fields were filled), a
 *    smaller caller's struct gets nothing past its struct_size (which is
 *    kept), and a refused size gets nothing written.
 *  - No struct is passed by value; every enum travels as a fixed-width
 *    integer.
 *  - Every call returns a hippo_status (the three diagnostics slots return
 *    text).  On failure, last_error() returns a message for the calling
 *    thread naming what failed (the argument, the pool and field, the
 *    backend call and its error code) and what to do.  A failed call
 *    leaves every live reservation intact.
 *  - Lifetimes: the table from hippo_plugin_entry, the emulation table and
 *    the strings of status_string and status_name stay valid until the
 *    plugin is unloaded (dlclose).  last_error's string belongs to the
 *    calling thread and stays valid until that thread's next call into the
 *    plugin; copy it to keep it.
 *  - A device or stream pointer is checked: NULL, one closed or detached
 *    (its memory stays valid while the plugin is loaded), and one of
 *    another copy of the plugin are HIPPO_INVALID_ARGUMENT.  A pointer
 *    hippo never handed out is read as one (undefined, as for free() of a
 *    pointer malloc never returned): telling it apart would cost a lookup
 *    on every call.
 *  - Threads: every entry point may be called from any thread, at the
 *    same time as any other, with two orderings left to the caller:
 *    . no call may overlap the stream_detach or device_close of a stream
 *      or device it names (record_use's `user` included), as free() of a
 *      pointer may not overlap its use: detach once the threads using
 *      the stream are done with it;
 *    . a capture must not begin on an attached stream while a relocation,
 *      reclaim or cleanup of its device runs: those ask once, at their
 *      start, whether a stream captures, and one that begins later meets
 *      their waits for the streams' work (HOST: HIPPO_BACKEND_ERROR; on a
 *      GPU the runtime invalidates the capture).  Announce it
 *      (capture_announce) and begin it once those calls returned.
 *  - What a call may cost is written beside each slot of hippo_api, in
 *    brackets:
 *      [no wait]  takes at most the stream's own lock (held by other
 *                 calls on the same stream only for as long as they
 *                 need it) and calls no driver;
 *      [capture?] on HIP, asks the driver whether the stream captures
 *                 (hipStreamIsCapturing), once per call, unless the
 *                 host runtime announces the stream's captures
 *                 (capture_announce: then no call); HOST and DRY read a
 *                 word instead;
 *      [driver]   may call the driver (allocate or free a page, record
 *                 or query an event); hipFree and hipMalloc may
 *                 themselves wait for the device;
 *      [device]   takes the device's lock and may wait for other calls
 *                 of the device (one at a time: install, cleanup,
 *                 relocation of every stream, detach, check);
 *      [sync]     may wait for queued GPU work: of every stream of the
 *                 device (relocation's copies), or of the streams that
 *                 used a reservation (record_use's events).
 *    reserve and release on a free slice are [no wait] plus [capture?]
 *    (the fast path); a reservation that needs a page is [driver], and
 *    its out-of-memory retry may be [sync] (docs/design.md).
 *
 * Quick start (see also hippo_load() at the end of this file):
 *
 *     const hippo_api *api;
 *     void *lib;
 *     if (hippo_load("hippo.so", &lib, &api) != HIPPO_SUCCESS) ...
 *     hippo_device_desc desc = { sizeof desc, HIPPO_BACKEND_AUTO };
 *     hippo_device *dev;
 *     api->device_open(&desc, &dev);
 *     hippo_stream *s;
 *     api->stream_attach(dev, my_hip_stream, &s);
 *     hippo_handle h;
 *     api->reserve(s, 1 << 20, HIPPO_MODE_AUTO, &h);
 *     void *ptr; uint64_t size;
 *     api->resolve(s, h, &ptr, &size);     // valid until the next relocation
 *     ...
 *     api->release(s, h);
 *     api->stream_detach(s);
 *     api->device_close(dev);
 */
#ifndef HIPPO_H
#define HIPPO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ABI versions: major << 16 | minor.  A plugin serves every caller of its
 * major version; within it, what a minor version added is found by size
 * (HIPPO_API_HAS, HIPPO_HAS).  The tables of versions before 1.0 (plain
 * 1) are refused. */
#define HIPPO_ABI_MAKE(major, minor) ((uint32_t)(major) << 16 | (minor))
#define HIPPO_ABI_VERSION HIPPO_ABI_MAKE(1, 0)     /* this header's */
#define HIPPO_ABI_VERSION_MIN HIPPO_ABI_MAKE(1, 0) /* oldest served */

/* Whether the struct at `p` (of type `type`, as the caller's header knows
 * it) holds `field`: a table, or an output struct the plugin filled (its
 * struct_size then says how far: a plugin built with an older header
 * fills a smaller struct). */
#define HIPPO_HAS(type, p, field)                                              \
  ((p)->struct_size >=                                                         \
   offsetof(type, field) + sizeof(((const type *)0)->field))
/* Whether the plugin's table has `slot` (hippo_api) -- check before
 * calling a slot added after the version a caller must work with. */
#define HIPPO_API_HAS(api, slot) HIPPO_HAS(hippo_api, api, slot)

/* ------------------------------------------------------------------------ */
/* Status codes: one list, from which the enum, the names and the messages
 * are generated.  X(NAME, value, message).  Values never change. */
#define HIPPO_STATUS_MAP(X)                                                    \
  X(SUCCESS, 0, "success")                                                     \
  X(INVALID_ARGUMENT, 1,                                                       \
    "an argument is NULL, out of range, or a struct of a size the plugin "     \
    "cannot interpret")                                                        \
  X(INVALID_HANDLE, 2,                                                         \
    "the handle is 0, released, stale, forged or belongs to another stream")   \
  X(OUT_OF_MEMORY, 3,                                                          \
    "the device has no memory left for a new page; release or clean up")       \
  X(POOL_CAPACITY_EXCEEDED, 4,                                                 \
    "the pool reached its max_pool_size and no free slice fits")               \
  X(BUFFER_TOO_BIG, 5, "no pool of the layout accepts a reservation this big") \
  X(POOL_CONFIG, 6, "the pool layout is invalid; last_error names the field")  \
  X(POOLS_IN_USE, 7,                                                           \
    "the dynamic pools still hold live reservations; the old layout was "      \
    "kept")                                                                    \
  X(UNSUPPORTED, 8, "this device, backend or plugin does not support that")    \
  X(GRAPH_RECORDING, 9,                                                        \
    "a stream of the device is capturing a graph; nothing may move or be "     \
    "freed until it ends")                                                     \
  X(INCOMPATIBLE_ABI, 10, "no ABI version is supported by both sides")         \
  X(NO_DEVICE, 11, "no HIP device is present or the ordinal is out of range")  \
  X(BACKEND_ERROR, 12, "a driver (backend) call failed; last_error names it")  \
  X(BUSY, 13,                                                                  \
    "the object is still in use (streams attached, reservations live)")        \
  X(LOAD_FAILED, 14,                                                           \
    "the plugin file could not be loaded or has no hippo_plugin_entry")        \
  X(INTERNAL, 15, "an internal consistency check failed; please report it") \
  X(PAGE_SIZES_EXHAUSTED, 16,                                                  \
    "an ARENA pool holds live slices in all the page sizes it keeps at "       \
    "once; relocate (or reclaim) to free one")                                 \
  X(GRAPH_NEEDS_PAGE, 17,                                                      \
    "the stream captures a graph and its pools hold no room for this; a "      \
    "driver allocation inside a capture is illegal: reserve it before the "    \
    "capture (a warm-up run)")

#define HIPPO__STATUS_ENUM(name, value, msg) HIPPO_##name = value,
enum hippo_status_code { HIPPO_STATUS_MAP(HIPPO__STATUS_ENUM) };
#undef HIPPO__STATUS_ENUM
typedef int32_t hippo_status;

/* ------------------------------------------------------------------------ */
/* Fixed-width enums. */

/* Backends (hippo_device_desc.backend). */
#define HIPPO_BACKEND_AUTO 0u /* HIP when a device is present, else HOST */
#define HIPPO_BACKEND_HIP 1u  /* a GPU: AMD's HIP runtime or NVIDIA's CUDA
                                 runtime, loaded at run time */
#define HIPPO_BACKEND_HOST 2u /* emulated device memory in host RAM */
#define HIPPO_BACKEND_DRY 3u  /* no memory: synthetic addresses, counted */
typedef uint32_t hippo_backend;

/* Device flags (hippo_device_desc.flags). */
#define HIPPO_DEVICE_FIXED_LAYOUT 1u /* pools_install answers UNSUPPORTED */
#define HIPPO_DEVICE_AUTO_RELOCATE 2u /* reserve calls relocate_when_wanted
                                         first (it may then synchronize
                                         every stream: off by default) */
#define HIPPO_DEVICE_NO_MOVE 4u /* no reservation ever moves: relocation
                                   (explicit, or the out-of-memory
                                   retry's) moves no slice; VIRTUAL pools
                                   still give back idle granules, ARENA's
                                   outdated pages go once empty.  For
                                   runtimes that keep raw pointers */
#define HIPPO_DEVICE_HOST_GRAPHS 8u /* the host runtime releases a block
                                       only once no graph may use it (as
                                       PyTorch's caching allocator keeps a
                                       graph's pool until the graph goes):
                                       captures take no holds, so what a
                                       capture released is reused at once
                                       and graph_retire has nothing to
                                       retire.  Pages still stay while a
                                       stream captures */

/* Pool kinds (hippo_pool_options.kind, hippo_pool_report.kind). */
#define HIPPO_POOL_SLICED 1u     /* pages carved into slices */
#define HIPPO_POOL_EXCLUSIVE 2u  /* one allocation per page */
#define HIPPO_POOL_DIRECT 3u     /* one driver allocation per request */
#define HIPPO_POOL_PERSISTENT 4u /* exact-size pages (reports only) */
#define HIPPO_POOL_ARENA 5u      /* sliced pages whose size grows with the
                                    largest request; older sizes drain */
#define HIPPO_POOL_VIRTUAL 6u    /* one virtual range per stream, carved
                                    into slices; physical granules mapped
                                    where live reservations touch it */
typedef uint32_t hippo_pool_kind;

/* Layout presets (hippo_layout.preset). */
#define HIPPO_PRESET_ADAPTIVE 0u        /* small sliced pool + ARENA + tail;
                                           the default (layout NULL) */
#define HIPPO_PRESET_SUB_SLICES 1u      /* sliced ladder + exclusive tail */
#define HIPPO_PRESET_EXCLUSIVE_PAGES 2u /* log-spaced exclusive buckets */
#define HIPPO_PRESET_CUSTOM 3u          /* hippo_layout.pools */
#define HIPPO_PRESET_VIRTUAL 4u         /* one VIRTUAL pool; ADAPTIVE where
                                           the device has no virtual
                                           memory (device_info.note) */
typedef uint32_t hippo_preset;

/* Allocation modes (reserve's mode argument). */
#define HIPPO_MODE_AUTO 0u /* follow the stream (persistent inside a window) */
#define HIPPO_MODE_PERSISTENT 1u /* the persistent pool, always */
typedef uint32_t hippo_mode;

/* Backend call kinds, for fault injection and counters. */
#define HIPPO_CALL_ALLOC 0u
#define HIPPO_CALL_FREE 1u
#define HIPPO_CALL_COPY 2u
#define HIPPO_CALL_SYNC 3u
#define HIPPO_CALL_EVENT 4u
#define HIPPO_CALL_CAPTURE_QUERY 5u
#define HIPPO_CALL_VM_RANGE 6u  /* reserve or free a virtual range */
#define HIPPO_CALL_VM_MAP 7u    /* one physical allocation created and
                                   mapped (cuMemCreate + cuMemMap) */
#define HIPPO_CALL_VM_UNMAP 8u  /* one physical allocation unmapped and
                                   released (cuMemUnmap + cuMemRelease) */
#define HIPPO_CALL_VM_ACCESS 9u /* access set on a mapped run, once for
                                   all of a map call's allocations
                                   (cuMemSetAccess); appended */
#define HIPPO_CALL_KINDS 10u /* kinds this header knows (grows with the
                                ABI, up to HIPPO_CALL_KINDS_MAX) */
#define HIPPO_CALL_KINDS_MAX 16u /* room for kinds in the counters */
typedef uint32_t hippo_call_kind;

/* Why a relocation runs (relocate_with's reason, reports).  Each says where
 * the moved slices may go. */
#define HIPPO_RELOCATE_WANTED 0u     /* only on a need (relocate_when_wanted):
                                        the need picks one of the below */
#define HIPPO_RELOCATE_EXPLICIT 1u   /* outdated pages; only room held */
#define HIPPO_RELOCATE_PRESSURE 2u   /* outdated pages; only room held */
#define HIPPO_RELOCATE_ARENA_FULL 3u /* outdated pages; may add pages of the
                                        current size */
#define HIPPO_RELOCATE_CAPTURE 4u    /* outdated pages; may add pages (before
                                        a capture's warm-up) */
#define HIPPO_RELOCATE_SPARSE 5u     /* the sparsest current pages, into room
                                        other current pages hold */
#define HIPPO_RELOCATE_UNMAP 6u      /* VIRTUAL: no slice moves; the granules
                                        no live reservation touches go back
                                        (every relocation does that too) */
typedef uint32_t hippo_relocate_reason;

/* What a stream's memory wants (relocation_need). */
#define HIPPO_NEED_NOTHING 0u   /* nothing outdated or sparse, or the pools
                                   look as when a relocation last moved
                                   nothing */
#define HIPPO_NEED_ARENA_FULL 1u /* an ARENA pool uses every page size slot */
#define HIPPO_NEED_PRESSURE 2u  /* outdated pages, and another page would
                                   leave less than a page of device room */
#define HIPPO_NEED_SPARSE 3u    /* an ARENA pool took a page while its pages
                                   held far more room than its slices use */
#define HIPPO_NEED_UNMAP 4u     /* a VIRTUAL pool holds mapped granules no
                                   live reservation touches, at least its
                                   unmap_threshold */
typedef uint32_t hippo_relocation_need;

/* How a relocation ended (hippo_relocation_report.outcome). */
#define HIPPO_RELOCATION_NONE 0u      /* none has run yet */
#define HIPPO_RELOCATION_MOVED 1u     /* slices moved (maybe not all) */
#define HIPPO_RELOCATION_NOTHING_TO_MOVE 2u /* no outdated (or sparse) page
                                               holds a live slice */
#define HIPPO_RELOCATION_NOT_WANTED 3u /* relocate_when_wanted: no need */
#define HIPPO_RELOCATION_RECORDING 4u /* skipped: a stream captures */
#define HIPPO_RELOCATION_NO_ROOM 5u   /* pages to empty, but none could be
                                         (no room for all their slices) */
#define HIPPO_RELOCATION_FAILED 6u    /* a backend call failed; nothing moved
                                         (see failures) */

/* What a host runtime announces about a stream's captures
 * (capture_announce). */
#define HIPPO_CAPTURE_QUERY 0u  /* ask the driver at every call (default) */
#define HIPPO_CAPTURE_BEGINS 1u /* the stream captures now, until ENDED */
#define HIPPO_CAPTURE_ENDED 2u  /* the capture ended */
typedef uint32_t hippo_capture_announcement;

/* Where a relocation failed (hippo_relocation_failure.step). */
#define HIPPO_RELOCATION_STEP_PAGE 1u   /* a destination page was refused */
#define HIPPO_RELOCATION_STEP_FINISH 2u /* waiting for the streams' work */
#define HIPPO_RELOCATION_STEP_COPY 3u   /* a copy was refused */
#define HIPPO_RELOCATION_STEP_WAIT 4u   /* waiting for the copies */
#define HIPPO_RELOCATION_STEP_FREE 5u   /* giving an emptied page back */

/* ------------------------------------------------------------------------ */
/* Opaque objects and handles. */
typedef struct hippo_device hippo_device; /* one per opened device */
typedef struct hippo_stream hippo_stream; /* one per attached stream */
typedef uint64_t hippo_handle;            /* 0 is never a valid handle */

/* ------------------------------------------------------------------------ */
/* Structs crossing the ABI.  Each starts with its size. */

/* One pool of a custom layout.  Fields a kind does not use must be zero. */
typedef struct hippo_pool_options {
  uint32_t struct_size;    /* sizeof(hippo_pool_options) */
  hippo_pool_kind kind;    /* HIPPO_POOL_SLICED, _EXCLUSIVE, _DIRECT,
                              _ARENA or _VIRTUAL */
  uint64_t page_size;      /* SLICED: bytes per page from the driver;
                              ARENA: the smallest page */
  uint64_t max_slice_size; /* SLICED, ARENA, VIRTUAL: largest reservation
                              it accepts (ARENA: also the largest
                              page) */
  uint64_t max_pool_size;  /* SLICED, ARENA: cap on page bytes (0 =
                              none) */
  uint64_t max_alloc_size; /* EXCLUSIVE: largest reservation it accepts */
  uint64_t reclaim_at;     /* DIRECT: watermark in bytes (0 = none) */
  uint64_t dealloc_period; /* reservations after which a page unused for
                              that long goes back (0 = never; VIRTUAL:
                              must be 0, granules go back in batches) */
  uint64_t range_size;     /* VIRTUAL: bytes of the stream's virtual
                              range (0 = the device's memory, or its
                              budget; never more) */
  uint64_t granule;        /* VIRTUAL: bytes of one physical granule, a
                              multiple of the driver's granularity (0 =
                              its granularity, at least 2 MiB; never
                              above the device) */
  uint64_t unmap_threshold; /* VIRTUAL: idle mapped bytes (no live
                               reservation touches them) at which
                               relocation_need answers HIPPO_NEED_UNMAP
                               (0 = the default: never, UINT64_MAX =
                               never) */
  uint64_t map_budget;     /* VIRTUAL: mapped bytes allowed above the
                              running peak of the pool's live bytes, in
                              parts per 10,000 of that peak (at least 8
                              granules); a reservation that would map
                              past it first gives back the idle granules
                              no recent work used (0 = the default, 150:
                              1.5 %; UINT64_MAX = no budget: idle granules
                              stay until cleanup); appended */
} hippo_pool_options;

/* A pool layout: a preset, or a custom list of pools in routing order. */
typedef struct hippo_layout {
  uint32_t struct_size;             /* sizeof(hippo_layout) */
  hippo_preset preset;              /* HIPPO_PRESET_* */
  uint32_t pool_count;              /* CUSTOM: entries in pools, 1..32 */
  uint32_t pool_options_size;       /* CUSTOM: stride of pools in bytes
                                       (sizeof(hippo_pool_options); a
                                       multiple of 8, like a struct_size) */
  const hippo_pool_options *pools;  /* CUSTOM: the pools, routing order */
} hippo_layout;

/* How to open a device. */
typedef struct hippo_device_desc {
  uint32_t struct_size;   /* sizeof(hippo_device_desc) */
  hippo_backend backend;  /* HIPPO_BACKEND_* */
  int32_t hip_device;     /* HIP device ordinal (HIP and AUTO) */
  uint32_t flags;         /* HIPPO_DEVICE_* */
  uint64_t capacity;      /* HOST/DRY: emulated device memory in bytes;
                             0 = 16 GiB, else at least the alignment
                             (HIPPO_INVALID_ARGUMENT).  A HOST page is
                             mapped lazily, so
                             only touched bytes cost host RAM.  HIP: 0 =
                             the device's memory, else a budget (at least
                             the alignment): hippo holds at most that much
                             of the device. */
  uint64_t alignment;     /* slice alignment, a power of two.  HOST/DRY:
                             0 = 256.  HIP: 0 = the device's (its texture
                             alignment, at least 256); another must be at
                             least that (HIPPO_INVALID_ARGUMENT). */
  const hippo_layout *layout; /* NULL = the ADAPTIVE preset */
} hippo_device_desc;

/* What a device is. */
typedef struct hippo_device_info {
  uint32_t struct_size;
  hippo_backend backend;  /* the backend in use (AUTO resolved) */
  int32_t hip_device;
  uint32_t streams;       /* attached streams */
  uint64_t total_memory;  /* bytes of device memory */
  uint64_t free_memory;   /* bytes the driver still has free */
  uint64_t alignment;     /* slice alignment in bytes */
  hippo_preset preset;    /* the preset of the installed layout */
  uint32_t pool_count;    /* dynamic pools per stream */
  /* NUL-terminated strings; empty when unknown. */
  char name[64];          /* the device: "NVIDIA H200", ...; HOST/DRY:
                             "HOST (emulated in host memory)",
                             "DRY (no memory)" */
  char arch[32];          /* "sm 9.0" (CUDA), "cc 9.4" (HIP), "host" */
  char runtime[128];      /* the GPU runtime in use, its version and
                             library; "none" on HOST and DRY */
  char note[512];         /* AUTO: which backend it chose and why; a
                             VIRTUAL preset in ADAPTIVE's place: why */
  uint64_t vm_granularity; /* the driver's virtual-memory granularity
                              (bytes); 0: no virtual memory */
  uint32_t capture_maps;  /* 1: a VIRTUAL pool maps granules for a
                             reservation on a capturing stream (CUDA);
                             0: such a reservation takes mapped room
                             only, else answers HIPPO_GRAPH_NEEDS_PAGE
                             (HIP, whose map waits on the null stream;
                             HOST and DRY, which follow it); appended */
  uint32_t reserved1;
} hippo_device_info;

/* Usage of one stream, or the sum over a device's streams. */
typedef struct hippo_usage {
  uint32_t struct_size;
  uint32_t pool_count;           /* stream: dynamic pools + persistent */
  uint64_t allocations;          /* live reservations */
  uint64_t bytes_in_use;         /* bytes requested by live reservations */
  uint64_t bytes_padding;        /* bytes of live slices beyond the request */
  uint64_t bytes_reserved;       /* bytes held from the driver (pages) */
  uint64_t peak_bytes_in_use;    /* highest bytes_in_use seen */
  uint64_t peak_bytes_reserved;  /* highest bytes_reserved seen */
  uint64_t pages;                /* pages held from the driver */
  uint64_t relocations;          /* relocations that moved slices */
  uint64_t slices_relocated;     /* slices moved, ever */
  uint64_t bytes_relocated;      /* bytes copied by relocations, ever */
  uint64_t bytes_stranded;       /* destination bytes kept after a failed
                                    wait for copies (their completion is
                                    unknown); freed after a later wait */
  uint64_t bytes_guarded;        /* released slices a graph not yet retired
                                    may use: kept out of use until
                                    graph_retire (a slice also waiting
                                    for record_use users counts here) */
  uint64_t slices_guarded;       /* holds graphs keep on slices, live or
                                    released (a slice two graphs hold
                                    counts twice) */
  uint64_t slices_waiting;       /* released slices waiting for the work of
                                    the streams that used them (record_use) */
  uint64_t event_failures;       /* event queries that failed (the slice
                                    waits on; cleanup waits for it) */
  uint64_t bytes_idle;           /* VIRTUAL: mapped bytes no live
                                    reservation touches (in
                                    bytes_reserved; they go back at the
                                    next cleanup, reclaim or relocation) */
  uint64_t bytes_virtual;        /* VIRTUAL: address space reserved (no
                                    memory) */
  uint64_t bytes_waiting;        /* released slices (slices_waiting) that
                                    no graph holds, kept out of use until
                                    their record_use users' work finished.
                                    bytes_reserved = bytes_in_use +
                                    bytes_padding + bytes_guarded +
                                    bytes_waiting + bytes_stranded + free
                                    bytes */
} hippo_usage;

/* One pool of a stream (pool_report; its options in force, such as a page
 * shrunk to a cap, come in a hippo_pool_options beside it). */
typedef struct hippo_pool_report {
  uint32_t struct_size;
  hippo_pool_kind kind;
  uint64_t pages;               /* pages held now */
  uint64_t peak_pages;          /* most pages held at once */
  uint64_t allocations;         /* live reservations */
  uint64_t bytes_in_use;        /* requested bytes of live reservations */
  uint64_t bytes_padding;       /* alignment/fit padding of live ones */
  uint64_t bytes_reserved;      /* page bytes held */
  uint64_t largest_allocation;  /* largest request served, ever */
  uint64_t bytes_free;          /* reserved bytes not in a live slice */
  uint64_t largest_free;        /* largest free slice (fragmentation =
                                   1 - largest_free / bytes_free) */
  uint64_t current_page_size;   /* SLICED, ARENA: size of the next page */
  uint64_t outdated_pages;      /* ARENA: pages that serve nothing new */
  uint64_t outdated_bytes;      /* ARENA: their bytes */
  uint64_t page_sizes;          /* ARENA: page sizes alive (at most 64) */
  uint64_t bytes_stranded;      /* see hippo_usage */
  uint64_t peak_bytes_reserved; /* most page bytes held at once */
  uint64_t bytes_guarded;       /* see hippo_usage */
  uint64_t granule_size;        /* VIRTUAL: bytes of a granule (its
                                   pages: granules mapped) */
  uint64_t bytes_idle;          /* VIRTUAL: see hippo_usage */
  uint64_t bytes_virtual;       /* VIRTUAL: see hippo_usage */
  uint64_t maps;                /* VIRTUAL: granules mapped, ever */
  uint64_t unmaps;              /* VIRTUAL: granules unmapped, ever */
  uint64_t bytes_waiting;       /* see hippo_usage */
  uint64_t largest_free_range;  /* VIRTUAL: the range's largest free
                                   slice, unmapped granules included (the
                                   largest reservation it can still place;
                                   largest_free counts mapped bytes only,
                                   so largest_free <= bytes_free holds on
                                   every kind); other kinds: largest_free */
} hippo_pool_report;

/* What a relocation did (relocate_with, relocation_report). */
typedef struct hippo_relocation_report {
  uint32_t struct_size;
  hippo_relocate_reason reason;  /* the reason it ran for */
  hippo_relocation_need need;    /* the need seen (HIPPO_RELOCATE_WANTED) */
  uint32_t outcome;              /* HIPPO_RELOCATION_* */
  uint32_t streams;              /* streams whose memory was looked at */
  uint32_t failure_count;        /* failures: relocation_failure reads
                                    each, 0 .. failure_count - 1 */
  uint64_t slices_moved;
  uint64_t bytes_moved;
  uint64_t pages_emptied;        /* pages the moves emptied */
  uint64_t pages_freed;          /* empty pages given back afterwards */
  uint64_t bytes_freed;
  uint64_t pages_added;          /* destination pages taken */
  uint64_t pages_no_room;        /* pages left whole: no room for a slice */
  uint64_t pages_guarded;        /* pages left whole: guarded by a capture */
  uint64_t bytes_stranded;       /* destinations kept: a wait failed */
} hippo_relocation_report;

/* One failure of a relocation (relocation_failure). */
typedef struct hippo_relocation_failure {
  uint32_t struct_size;
  hippo_status status;    /* the backend's status */
  uint32_t step;          /* HIPPO_RELOCATION_STEP_* */
  uint32_t reserved0;
  hippo_stream *stream;   /* the stream whose memory was moving */
  uint64_t slices;        /* slices that stayed where they were */
  uint64_t bytes;         /* their bytes */
} hippo_relocation_failure;

/* Backend counters (emulation's counters). */
typedef struct hippo_emu_counters {
  uint32_t struct_size;
  uint32_t reserved0;
  uint64_t pages_held;               /* pages allocated and not freed */
  uint64_t bytes_held;               /* their bytes */
  uint64_t peak_bytes_held;
  uint64_t host_bytes_mapped;        /* host RAM mapped for pages (DRY: 0) */
  uint64_t bytes_copied;             /* device-to-device bytes copied
                                        (HOST: once a copy ran; HIP: once
                                        it was queued) */
  /* Backend calls by kind (HIPPO_CALL_*), since open; kinds the plugin
   * does not know read 0. */
  uint64_t calls[HIPPO_CALL_KINDS_MAX];
  uint64_t ranges_held;              /* virtual ranges reserved */
  uint64_t bytes_virtual;            /* their bytes */
  uint64_t granules_mapped;          /* physical allocations mapped (a
                                        VIRTUAL pool's are one granule or
                                        a run of them) */
  uint64_t bytes_mapped;             /* their bytes (in bytes_held) */
  uint64_t peak_bytes_mapped;
  uint64_t waits;                    /* host-side waits on the device's
                                        work: stream syncs, event waits,
                                        and the device-wide synchronize a
                                        vm_unmap with wait makes; appended */
} hippo_emu_counters;

/* ------------------------------------------------------------------------ */
/* The emulation table (hippo_api.emulation): test-only calls, apart from
 * the production table, so one behaviour suite runs on every backend.
 * HOST and DRY emulate a device; on HIP they drive the real runtime:
 * stream_create makes a non-blocking stream, capture_begin/_end a
 * relaxed-mode capture whose graph is destroyed at the end, read / write
 * copy synchronously between the host and bytes inside a page hippo
 * holds, copy queues a device-to-device copy on the stream; fault
 * injection and counters work on every backend.  Every slot may call the
 * driver and wait. */
typedef struct hippo_emu_api {
  uint32_t struct_size; /* sizeof(hippo_emu_api) of the plugin */
  uint32_t reserved0;
  hippo_status (*stream_create)(hippo_device *device, void **native_stream);
  /* Refused (HIPPO_BUSY) while the stream is attached. */
  hippo_status (*stream_destroy)(hippo_device *device, void *native_stream);
  hippo_status (*capture_begin)(hippo_device *device, void *native_stream,
                                uint64_t *capture_id);
  hippo_status (*capture_end)(hippo_device *device, void *native_stream);
  /* Fail the nth (1 = next) backend call of `kind` with `status`, a
   * status a backend call can fail with (HIPPO_INVALID_ARGUMENT ..
   * HIPPO_INTERNAL); nth == 0 clears the injection of that kind (status
   * then ignored).  A kind >= HIPPO_CALL_KINDS, another status, or an nth
   * too far to count is HIPPO_INVALID_ARGUMENT. */
  hippo_status (*inject_fault)(hippo_device *device, hippo_call_kind kind,
                               uint64_t nth, hippo_status status);
  /* Synchronous host access to device bytes inside a page hippo holds
   * (HOST, HIP; DRY has no bytes and answers HIPPO_UNSUPPORTED). */
  hippo_status (*read)(hippo_device *device, const void *device_ptr,
                       void *host, uint64_t size);
  hippo_status (*write)(hippo_device *device, void *device_ptr,
                        const void *host, uint64_t size);
  hippo_status (*counters)(hippo_device *device,
                           hippo_emu_counters *counters);
  /* Queue a device-to-device copy on an emulated stream (or the default
   * stream); on HOST and DRY it runs when the stream's work is waited
   * for, as a kernel would; on HIP it is a MemcpyAsync.  Both ranges must
   * lie inside pages hippo holds. */
  hippo_status (*copy)(hippo_device *device, void *native_stream, void *dst,
                       const void *src, uint64_t size);
  /* Run an emulated stream's queued work now, as a device finishing it
   * would (HOST, DRY; HIP: StreamSynchronize). */
  hippo_status (*stream_sync)(hippo_device *device, void *native_stream);
} hippo_emu_api;

/* The entry table.  What each call may cost: see "What a call may cost"
 * at the top ([no wait], [capture?], [driver], [device], [sync]). */
typedef struct hippo_api {
  uint32_t struct_size; /* sizeof(hippo_api) of the plugin */
  uint32_t abi_version; /* the plugin's own, HIPPO_ABI_MAKE(major, minor) */

  /* Diagnostics.  [no wait] */
  const char *(*status_string)(hippo_status status); /* message, never NULL */
  const char *(*status_name)(hippo_status status);   /* "HIPPO_..." */
  const char *(*last_error)(void); /* calling thread's last failure, or "" */

  /* Devices and streams. */
  /* [driver] loads the GPU runtime (HIP, AUTO) and asks it about the
   * device. */
  hippo_status (*device_open)(const hippo_device_desc *desc,
                              hippo_device **device);
  /* [driver][device] frees what graphs kept; HIPPO_BUSY while streams
   * are attached. */
  hippo_status (*device_close)(hippo_device *device);
  /* [driver] (free memory) */
  hippo_status (*device_info)(hippo_device *device, hippo_device_info *info);
  /* [driver][device] native_stream: a hipStream_t (HIP), or a stream
   * from emulation's stream_create (HOST, DRY); NULL is the default
   * stream (HIP's NULL stream, the emulated default stream).  One manager
   * per native stream: attaching the same stream twice gives HIPPO_BUSY.
   * HIP's NULL stream is unusable while a blocking stream of the device
   * captures (the runtime refuses it): calls on its manager then answer
   * HIPPO_GRAPH_RECORDING until that capture ended.  hippo leaves the
   * runtime's last error (hipGetLastError) as the caller left it after
   * the answers it handles itself (out of memory, an event not ready,
   * that refusal). */
  hippo_status (*stream_attach)(hippo_device *device, void *native_stream,
                                hippo_stream **stream);
  /* [driver][device][sync] Frees every page of the stream; live
   * reservations are dropped.  What other streams use (record_use) is
   * waited for first; pages holding slices a graph not yet retired may
   * use stay, with the device, until graph_retire or device_close.  Such
   * a page whose free failed once the graph was retired is tried again
   * at the next stream_detach, graph_retire or cleanup(device, NULL). */
  hippo_status (*stream_detach)(hippo_stream *stream);

  /* Layouts. */
  /* [driver][device] Refused (nothing changed) with HIPPO_POOLS_IN_USE
   * while the dynamic pools hold live reservations; *bytes_in_use (may
   * be NULL) then gets their bytes. */
  hippo_status (*pools_install)(hippo_device *device,
                                const hippo_layout *layout,
                                uint64_t *bytes_in_use);

  /* Reservations.  reserve and release: [no wait][capture?] on the fast
   * path (a free slice fits, nothing waits); [driver] when a page is
   * taken or given back (periodic deallocation: after the stream's lock
   * is dropped), or an event of record_use is polled; reserve's
   * out-of-memory retry may also [sync] (it relocates outdated pages
   * before it fails, unless a stream captures). */
  hippo_status (*reserve)(hippo_stream *stream, uint64_t size,
                          hippo_mode mode, hippo_handle *handle);
  hippo_status (*release)(hippo_stream *stream, hippo_handle handle);
  /* [no wait][capture?] *device_ptr: the address now (valid until the
   * next relocation or cleanup on the device); size may be NULL. */
  hippo_status (*resolve)(hippo_stream *stream, hippo_handle handle,
                          void **device_ptr, uint64_t *size);
  /* [driver] Another attached stream of the device (`user`) uses the
   * reservation: at its release hippo records an event on `user`, and
   * the bytes are reused only once the work `user` had queued by then
   * has finished (polled at the owner's later reservations, waited for
   * by cleanup and detach).  While `user` captures a graph, the
   * reservation is guarded for that graph instead (graph_retire).
   * Released while `user` captures, the event is recorded once that
   * capture ended (a record during it would be baked into the graph and
   * mark nothing): the bytes wait until then, and cleanup answers
   * HIPPO_GRAPH_RECORDING meanwhile.  The reservation does not move until
   * then.  Once per (reservation, user); user == stream: nothing to do. */
  hippo_status (*record_use)(hippo_stream *stream, hippo_handle handle,
                             hippo_stream *user);
  /* [no wait] Persistent windows: nested; the stream is persistent while
   * any is open. */
  hippo_status (*persistent_begin)(hippo_stream *stream);
  hippo_status (*persistent_end)(hippo_stream *stream);

  /* Relocation: [driver][sync], and [device] for every stream's.  Move
   * the live slices of outdated ARENA pages onto current pages
   * (device-to-device copies on the relocating stream, after every
   * stream of the device finished its queued work), so the same handles
   * resolve to the new addresses, then give the emptied pages back.  A
   * pointer from resolve is valid until the next relocation or cleanup on
   * the device.  Skipped (HIPPO_SUCCESS, nothing moves, no wait) while
   * any stream of the device captures or when nothing is outdated.  A
   * slice that cannot move (no room, a failed call) stays where it is
   * with its bytes; the failures are collected, and the first one's
   * status is returned after everything else was done
   * (relocation_failure reads them all).
   * relocate: the stream's memory (reason EXPLICIT: only room already
   * held).  relocate_when_wanted: only when relocation_need says so.
   * relocate_device: every stream's (reason CAPTURE, may add pages: call
   * it before a capture's warm-up). */
  hippo_status (*relocate)(hippo_stream *stream);
  hippo_status (*relocate_when_wanted)(hippo_stream *stream);
  hippo_status (*relocate_device)(hippo_device *device);
  /* Relocate for `reason`: the memory of `stream`, or (stream NULL) of
   * every stream of the device.  report may be NULL.  An unknown reason
   * is HIPPO_INVALID_ARGUMENT: nothing runs, *report is not written. */
  hippo_status (*relocate_with)(hippo_device *device, hippo_stream *stream,
                                hippo_relocate_reason reason,
                                hippo_relocation_report *report);
  /* [no wait] What the stream's memory wants now. */
  hippo_status (*relocation_need)(hippo_stream *stream,
                                  hippo_relocation_need *need);
  /* [no wait] The last relocation of `stream`, or (NULL) the device's
   * last. */
  hippo_status (*relocation_report)(hippo_device *device,
                                    hippo_stream *stream,
                                    hippo_relocation_report *report);
  /* [no wait] Failure `index` (0 .. failure_count - 1) of that report,
   * in the order they happened; another index is
   * HIPPO_INVALID_ARGUMENT. */
  hippo_status (*relocation_failure)(hippo_device *device,
                                     hippo_stream *stream, uint32_t index,
                                     hippo_relocation_failure *failure);
  /* [driver][device][sync] Frees every empty page of every stream
   * (stream == NULL: also those a detached stream left for a graph since
   * retired) or of one.  Waits for the work of the streams that used
   * released reservations (record_use), and for the copies that left
   * destinations stranded (a failed relocation wait), and frees them. */
  hippo_status (*cleanup)(hippo_device *device, hippo_stream *stream);
  /* [driver][device][sync] Refused with HIPPO_GRAPH_RECORDING (naming the
   * stream) while a stream captures; else relocate (EXPLICIT) then
   * cleanup, of one stream or (NULL) every stream. */
  hippo_status (*reclaim)(hippo_device *device, hippo_stream *stream);

  /* Graph captures. */
  /* [capture?][device] (may free pages: [driver]) The host runtime
   * destroyed the graph of capture_id: what hippo kept for it (the
   * slices reserved, resolved or released on a stream while it captured)
   * may move and be reused again.  An id hippo guarded nothing under is
   * HIPPO_INVALID_ARGUMENT; retiring twice is harmless; while a stream
   * still captures the id, HIPPO_GRAPH_RECORDING.  Asking the streams may
   * fail (the driver's error); nothing changes on any failure: retire
   * again.  While another stream of the device captures, the holds go
   * but nothing is freed: pages a detached stream left for the graph stay
   * with the device (reserved, free) until the next graph_retire,
   * cleanup(device, NULL) or stream_detach after that capture.  A graph
   * never retired keeps its slices until device_close. */
  hippo_status (*graph_retire)(hippo_device *device, uint64_t capture_id);
  /* [driver] (one question) A host runtime that announces its captures
   * saves hippo the driver question (hipStreamIsCapturing) at every
   * reserve, release and resolve on a HIP stream: after BEGINS (checked
   * with the driver, which gives the capture id) and until ENDED
   * (checked too), hippo takes the stream as capturing, and between an
   * ENDED and the next BEGINS as not -- so an ENDED right after
   * stream_attach makes a stream that never captures cost no driver call
   * at all; QUERY goes back to asking the driver.  A BEGINS while the
   * driver says the stream does not capture is HIPPO_INVALID_ARGUMENT, an
   * ENDED while it still captures HIPPO_GRAPH_RECORDING.  HOST and DRY
   * devices read their emulated streams' state at no cost and only check
   * announcements.  hippo frees no page while a stream of the device
   * captures, as far as it knows: capture only on attached streams (a
   * driver free would break the capture). */
  hippo_status (*capture_announce)(hippo_stream *stream,
                                   hippo_capture_announcement what);

  /* Figures. */
  /* [no wait], stream == NULL: [device] (the device's sum, one moment:
   * every stream's lock held together). */
  hippo_status (*usage)(hippo_device *device, hippo_stream *stream,
                        hippo_usage *usage);
  /* [no wait] Pool pool_index of the stream (0: its persistent pool);
   * options (may be NULL) gets the pool's options in force. */
  hippo_status (*pool_report)(hippo_stream *stream, uint32_t pool_index,
                              hippo_pool_report *report,
                              hippo_pool_options *options);
  /* [device] Verifies every invariant of the device's bookkeeping
   * (tests, debug): O(slices). */
  hippo_status (*check)(hippo_device *device);

  /* [no wait] The emulation table (hippo_emu_api): every backend has
   * one; calls a backend cannot emulate answer HIPPO_UNSUPPORTED. */
  hippo_status (*emulation)(const hippo_emu_api **emu);
} hippo_api;

/* The one exported symbol.  *abi_version: in, the version the caller's
 * header knows (HIPPO_ABI_VERSION); out, the newest both support.  A
 * caller of another major version gets HIPPO_INCOMPATIBLE_ABI (and, in
 * *abi_version, the plugin's). */
typedef hippo_status (*hippo_plugin_entry_fn)(uint32_t *abi_version,
                                              const hippo_api **api);
hippo_status hippo_plugin_entry(uint32_t *abi_version, const hippo_api **api);

/* ------------------------------------------------------------------------ */
/* Loader helper, header-only.  Define HIPPO_NO_LOADER to leave it out. */
#ifndef HIPPO_NO_LOADER
#include <dlfcn.h>
#include <stdio.h>

#ifdef __cplusplus
#define HIPPO__THREAD_LOCAL thread_local
#else
#define HIPPO__THREAD_LOCAL _Thread_local
#endif

/* Where hippo_load() writes why it failed (a loader has no plugin to ask). */
static inline char *hippo_load_error_buffer(void) {
  static HIPPO__THREAD_LOCAL char buf[512];
  return buf;
}

/* The reason of the last failed hippo_load() on this thread.  The loader
 * is header-only, so each source file has its own copy of the text: read
 * it in the file that called hippo_load(). */
static inline const char *hippo_load_error(void) {
  return hippo_load_error_buffer();
}

/* dlopen `path`, negotiate this header's ABI version and hand back the
 * table.  *handle receives the dlopen handle (dlclose it after the last
 * call).  Errors: HIPPO_INVALID_ARGUMENT (NULL), HIPPO_LOAD_FAILED (missing
 * file or symbol), HIPPO_INCOMPATIBLE_ABI (the plugin serves no version this
 * header knows); hippo_load_error() says which, and *handle and *api are
 * NULL (those of them that are not NULL pointers themselves; the plugin,
 * if it was opened, is closed again). */
static inline hippo_status hippo_load(const char *path, void **handle,
                                      const hippo_api **api) {
  char *err = hippo_load_error_buffer();
  void *lib;
  union {
    void *obj;
    hippo_plugin_entry_fn fn;
  } entry; /* dlsym gives an object pointer; read it as a function's */
  uint32_t version = HIPPO_ABI_VERSION;
  const hippo_api *table = NULL;
  hippo_status st;

  err[0] = '\0';
  if (handle)
    *handle = NULL;
  if (api)
    *api = NULL;
  if (!path || !handle || !api) {
    snprintf(err, 512, "hippo_load: path, handle and api must not be NULL");
    return HIPPO_INVALID_ARGUMENT;
  }
  lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(err, 512, "hippo_load: cannot load '%s': %s", path, dlerror());
    return HIPPO_LOAD_FAILED;
  }
  entry.obj = dlsym(lib, "hippo_plugin_entry");
  if (!entry.obj) {
    snprintf(err, 512, "hippo_load: '%s' has no hippo_plugin_entry symbol",
             path);
    dlclose(lib);
    return HIPPO_LOAD_FAILED;
  }
  st = entry.fn(&version, &table);
  if (st != HIPPO_SUCCESS || !table || version < HIPPO_ABI_VERSION_MIN ||
      version > HIPPO_ABI_VERSION) {
    snprintf(err, 512,
             "hippo_load: '%s' serves no ABI version in [%u.%u, %u.%u] "
             "(it answered %u.%u, status %d)",
             path, HIPPO_ABI_VERSION_MIN >> 16, HIPPO_ABI_VERSION_MIN & 0xffff,
             HIPPO_ABI_VERSION >> 16, HIPPO_ABI_VERSION & 0xffff,
             version >> 16, version & 0xffff, (int)st);
    dlclose(lib);
    return st != HIPPO_SUCCESS ? st : HIPPO_INCOMPATIBLE_ABI;
  }
  /* every slot of 1.0 is there (the last one, emulation, is) */
  if (!HIPPO_API_HAS(table, emulation)) {
    snprintf(err, 512,
             "hippo_load: '%s' hands out a table of %u bytes, smaller than "
             "ABI 1.0's",
             path, table->struct_size);
    dlclose(lib);
    return HIPPO_INCOMPATIBLE_ABI;
  }
  *handle = lib;
  *api = table;
  return HIPPO_SUCCESS;
}
#endif /* HIPPO_NO_LOADER */

#ifdef __cplusplus
}
#endif
#endif /* HIPPO_H */
