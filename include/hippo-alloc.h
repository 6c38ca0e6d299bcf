/* hippo-alloc.h -- hippo as the allocator of PyTorch and CuPy.
 *
 * libhippo-alloc.so is a small library beside the plugin.  It loads the
 * plugin through its ABI (hippo.h, hippo_load), opens one hippo device per
 * GPU ordinal on first use, attaches each stream the first time it sees it
 * (the null stream too), keeps a table from pointers to hippo's handles,
 * and never moves a reservation (HIPPO_DEVICE_NO_MOVE): the frameworks
 * keep raw pointers.  The functions have the signatures the frameworks
 * take, so they are found by name:
 *
 *   PyTorch (torch.cuda.memory.CUDAPluggableAllocator(path, "hippo_alloc",
 *   "hippo_free")): hippo_alloc, hippo_free; the optional hooks
 *   hippo_alloc_init, hippo_alloc_empty_cache, hippo_alloc_set_fraction,
 *   hippo_alloc_record_stream.
 *   CuPy (cupy.cuda.memory.CFunctionAllocator): hippo_cupy_malloc,
 *   hippo_cupy_free.  CuPy passes no stream: its memory is the null
 *   stream's (see hippo-alloc(3)).
 *
 * Environment, read when a device is first opened:
 *   HIPPO_PLUGIN          the plugin (default: the installed one)
 *   HIPPO_ALLOC_BACKEND   auto (default), hip, host or dry
 *   HIPPO_ALLOC_LAYOUT    a preset or a layout spec (hippo-replay(1),
 *                         LAYOUT SPECS); default "virtual"
 *   HIPPO_ALLOC_CAPACITY  host/dry: emulated memory (bytes, K/M/G/T);
 *                         hip: a budget (0 or unset: the whole device)
 *   HIPPO_ALLOC_GRAPHS    hippo (default): what a capture reserved and
 *                         freed stays out of use until graph_retire
 *                         (hippo's guard; through hippo_alloc_device);
 *                         host: the framework frees only what no graph
 *                         uses (PyTorch's MemPool route, which
 *                         hippo_alloc.torch() sets): hippo keeps nothing
 *                         for captures (HIPPO_DEVICE_HOST_GRAPHS)
 *   HIPPO_ALLOC_OOM       abort: a failed allocation stops the process
 *                         with hippo's message instead of answering NULL
 *                         (routes whose framework checks no NULL:
 *                         hippo_alloc.py sets it for them)
 *   HIPPO_ALLOC_QUIET     set: nothing is printed to stderr
 *
 * Every failure is NULL from an allocation, with the reason in
 * hippo_alloc_last_error(); nothing already handed out is touched.  Out
 * of memory is tried once more after what every stream of the device
 * holds idle went back and the streams no block is on were detached.  A free
 * of a pointer hippo did not hand out is counted (figure
 * "foreign_frees"), reported and ignored.  All functions are thread-safe.
 */
#ifndef HIPPO_ALLOC_H
#define HIPPO_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "hippo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* PyTorch's pair.  stream: a cudaStream_t / hipStream_t (NULL: the null
 * stream).  size 0 is NULL, no failure.  free: the pointer's own stream
 * and size are what hippo kept; the arguments are not trusted. */
void *hippo_alloc(size_t size, int device, void *stream);
void hippo_free(void *ptr, size_t size, int device, void *stream);

/* PyTorch's hooks (set on CUDAPluggableAllocator._allocator).
 * init: PyTorch passes the number of devices; nothing is opened (each
 *   device opens at its first allocation); a count outside 1 to 64 is
 *   reported.
 * empty_cache: hippo's cleanup of every open device: empty pages and idle
 *   granules go back to the driver (it waits for the streams' work), and
 *   every stream no live block is on is detached (attached again when
 *   next seen).
 * set_fraction: the device holds at most fraction x its memory: while it
 *   holds no live allocation it is opened again with that budget; else
 *   the live blocks' bytes are capped at it at once (an allocation past
 *   it fails as out of memory).
 * record_stream: `stream` uses the block too (hippo's record_use): its
 *   bytes are reused only once the work stream had queued at the free has
 *   finished. */
void hippo_alloc_init(int device_count);
void hippo_alloc_empty_cache(void);
void hippo_alloc_set_fraction(double fraction, int device);
void hippo_alloc_record_stream(void *ptr, void *stream);

/* CuPy's pair (param is not used). */
void *hippo_cupy_malloc(void *param, size_t size, int device);
void hippo_cupy_free(void *param, void *ptr, int device);

/* Why the calling thread's last failure failed ("" if none). */
const char *hippo_alloc_last_error(void);

/* A figure of device `device`: the adapter's own, exact over the whole
 * device: "allocations", "bytes_in_use" (bytes requested by the live
 * blocks), "peak_bytes_in_use" (their peak since the last reset),
 * "streams" (attached now), "foreign_frees", "failed_allocs",
 * "oom_retries" (allocations retried after out of memory); and hippo's:
 * "bytes_reserved" (held from the driver: mapped granules under the
 * virtual layout), "peak_bytes_reserved", "bytes_virtual".  0 for a
 * device not open; UINT64_MAX for a name it does not know. */
uint64_t hippo_alloc_figure(int device, const char *name);

/* peak_bytes_in_use starts again from bytes_in_use (PyTorch's
 * reset_peak_memory_stats). */
void hippo_alloc_reset_peak(int device);

/* hippo's usage of the whole device (hippo.h); HIPPO_INVALID_ARGUMENT for
 * a device not open. */
hippo_status hippo_alloc_usage(int device, hippo_usage *out);

/* The plugin's table and the hippo device of `device` (opening it), for a
 * runtime that calls hippo itself beside the framework, or a test. */
hippo_status hippo_alloc_device(int device, const hippo_api **api,
                                hippo_device **dev);

/* Closes every device (their streams detached, every page given back) and
 * forgets them; the next allocation opens them again.  Call it only once
 * the framework freed what it allocated: returns the reservations still
 * live, which are dropped (their pointers then dangle).  Never called at
 * exit by itself: the GPU runtime may be gone by then. */
uint64_t hippo_alloc_close(void);

#ifdef __cplusplus
}
#endif

#endif /* HIPPO_ALLOC_H */
