/* fakegpu.h -- what the files of the stand-in GPU runtimes share (private
 * to tests/fake): the runtime a build stands in for (FAKE_HIP: hip* names,
 * HIP's attribute numbers and version; FAKE_CUDA: cuda*), the error
 * numbers, the work a stream queues, streams, graphs and events, and the
 * state and helpers the files give each other.  Those are prefixed fake_
 * and hidden: the libraries export the runtime's calls only (EXPORT).
 * What the stand-ins do is said at the head of fakegpu.c.  The files:
 *   fakegpu.c          the lock, the environment, the last error, devices
 *                      and contexts
 *   fakegpu_memory.c   Malloc, Free, the copies
 *   fakegpu_streams.c  streams, their queues, events
 *   fakegpu_capture.c  capture modes and checks, captures, graphs
 *   fakegpu_vm.c       virtual memory (hipMem*), the unload
 *   fakegpu_driver.c   CUDA's driver calls (cuMem* too), their entry
 *                      points
 * One mutex (fake_mu) guards everything but the threads' own state.
 */
#ifndef FAKEGPU_H
#define FAKEGPU_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(FAKE_HIP)
#define FN(x) hip##x
#define ATTR_TEX 81
#define ATTR_MODE 6
#define ATTR_MAJOR 23
#define ATTR_MINOR 61
#define NAME "Fake HIP GPU"
#define VERSION 60200000
#elif defined(FAKE_CUDA)
#define FN(x) cuda##x
#define ATTR_TEX 14
#define ATTR_MODE 20
#define ATTR_MAJOR 75
#define ATTR_MINOR 76
#define NAME "Fake CUDA GPU"
#define VERSION 13000
#else
#error "build with -DFAKE_HIP or -DFAKE_CUDA"
#endif

#define EXPORT __attribute__((visibility("default")))

enum { OK = 0, E_VALUE = 1, E_OOM = 2, E_DRIVER = 35, E_NEWER_DRIVER = 36,
       E_UNAVAILABLE = 46, E_NODEV = 100, E_BADDEV = 101, E_CONTEXT = 201,
       E_HANDLE = 400, E_NOT_READY = 600,
       E_NOT_SUPPORTED = 801,
       E_CAPTURE_UNSUPPORTED = 900, E_CAPTURE_INVALIDATED = 901,
       E_CAPTURE_IMPLICIT = 906, E_CAPTURED_EVENT = 907,
       E_ILLEGAL_ADDRESS = 700 };
/* A handle that is no stream: CUDA's invalid handle (400); ROCm answers
 * hipErrorContextIsDestroyed (709) for a stream it does not know. */
#if defined(FAKE_HIP)
#define E_NOSTREAM 709
#else
#define E_NOSTREAM E_HANDLE
#endif

enum { OP_COPY, OP_FREE };

typedef struct op {
  int kind;
  void *dst; /* OP_FREE: the allocation to free */
  const void *src;
  size_t size;
} op;

/* A list of ops: a stream's queue, a graph, an executable graph. */
typedef struct oplist {
  op *ops;
  size_t n, cap;
} oplist;

typedef struct fgraph {
  uint32_t magic;
  oplist list;
} fgraph;

typedef struct fstream {
  uint32_t magic;
  int device;
  op *ops;
  size_t queued, done, cap; /* ops[done..queued) wait */
  uint64_t base;            /* ops run before ops[0] (the queue restarts) */
  bool capturing;
  unsigned long long capture_id;
  fgraph *graph; /* while capturing: what the capture recorded */
  int capture_mode;         /* while capturing: the mode it began in */
  pthread_t capture_thread; /* and the thread that began it */
  bool invalidated;         /* an unsafe call broke the capture */
  unsigned flags;           /* StreamCreateWithFlags' (1: non-blocking) */
  struct fstream *next;
} fstream;

typedef struct fevent {
  uint32_t magic;
  fstream *stream; /* NULL: done */
  fstream *captured; /* recorded in this stream's capture (capture_id) */
  unsigned long long capture_id;
  uint64_t target; /* done once stream's base + done reaches it */
  struct fevent *next;
} fevent;

#define STREAM_MAGIC 0x5354524du
#define EVENT_MAGIC 0x45564e54u
#define GRAPH_MAGIC 0x47525048u
#define EXEC_MAGIC 0x47455845u

/* hipMemLocation / CUmemLocation, hipMemAccessDesc / CUmemAccessDesc */
typedef struct vloc {
  int type, id;
} vloc;
typedef struct vaccess {
  vloc location;
  int flags;
} vaccess;

/* CUDA: a driver call exported under its name, as libcuda.so.1 has it. */
#define DRIVER_EXPORT(name, fn)                                                \
  EXPORT __typeof__(fn) name __attribute__((alias(#fn)))

#pragma GCC visibility push(hidden)

/* fakegpu.c */
extern pthread_mutex_t fake_mu;
extern _Thread_local int fake_ctx_top[8];
extern _Thread_local int fake_ctx_depth;
extern bool fake_ctx_live[64];
int fake_answer(int err);
uint64_t fake_env_u64(const char *name, uint64_t dflt);
int fake_devices(void);
int fake_version(void);
bool fake_no_vmm_attr(void);
bool fake_no_vmm_calls(void);
const char *fake_fail_mode(void);
void fake_slow(void);
int fake_dev_now(void);
int fake_ctx_create(int dev);
int fake_need_ctx(void);
bool fake_peers(int dev, int peer);

/* fakegpu_memory.c */
extern size_t fake_used[64];
int fake_free_now(void *p);

/* fakegpu_streams.c */
extern fstream fake_default_stream;
extern fstream *fake_streams;
fstream *fake_stream_of(void *s);
bool fake_push(oplist *l, op o);
int fake_enqueue(fstream *s, op o);
void fake_run(fstream *s, uint64_t upto);
void fake_run_all(void);

/* fakegpu_capture.c */
int fake_unsafe_call(void);
bool fake_captured_event(fevent *e);
int fake_sync_checks(fstream *s, bool legacy);

/* fakegpu_vm.c */
bool fake_copy_faults(int dev, const void *p, size_t size);
int fake_vm_granularity(size_t *g, const void *prop, int option);
int fake_vm_create(unsigned long long *handle, size_t size, const void *prop,
                   unsigned long long flags);
int fake_vm_release(unsigned long long handle);
int fake_vm_reserve(void **ptr, size_t size, size_t align, void *addr,
                    unsigned long long flags);
int fake_vm_free_range(void *ptr, size_t size);
int fake_vm_map(void *ptr, size_t size, size_t offset,
                unsigned long long handle, unsigned long long flags);
int fake_vm_set_access(void *ptr, size_t size, const vaccess *desc,
                       size_t count);
int fake_vm_unmap(void *ptr, size_t size);

#pragma GCC visibility pop

#endif /* FAKEGPU_H */
