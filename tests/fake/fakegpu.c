/* fakegpu.c -- a stand-in GPU runtime for tests: the calls hippo's HIP
 * backend loads (src/gpu_rt.h), over host memory.  Built twice: with
 * FAKE_HIP as libfakehip.so (hip* names, HIP's attribute numbers) and with
 * FAKE_CUDA as libfakecudart.so (cuda* names).  Pointing HIPPO_HIP_LIBRARY
 * or HIPPO_CUDA_LIBRARY at one runs the HIP backend's code -- every call,
 * every error path the environment can provoke -- on a machine without a
 * GPU.  It proves hippo drives a runtime as documented; it proves nothing
 * of a real GPU (tests/device-check.sh does, where one is lent).
 *
 * Like hippo's HOST backend, a stream's work (copies) waits until the
 * stream is synchronized, an event recorded after it is waited for, a free
 * or the stream's destruction: a missing synchronization shows as stale
 * bytes.  A capturing stream records its copies into the graph (they never
 * run) and refuses to be synchronized (StreamCaptureUnsupported), as a
 * real one does.
 *
 * Capture modes, as CUDA documents them (cudaThreadExchangeStreamCaptureMode):
 * while a capture begun in mode global (0) or thread-local (1) runs, a
 * potentially unsafe call -- Malloc, Free, EventQuery, EventSynchronize,
 * DeviceSynchronize here -- made by the thread that began it, or (global
 * captures) by any thread whose own mode is global, answers
 * StreamCaptureUnsupported (900) and invalidates that capture: its
 * EndCapture answers StreamCaptureInvalidated (901) and no graph.  A
 * thread whose mode is relaxed (2) may make them.
 *
 * Environment (read at each call that needs it):
 *   FAKE_GPU_DEVICES    devices (default 1; 0 answers NoDevice)
 *   FAKE_GPU_MEMORY     bytes per device (default 1 GiB)
 *   FAKE_GPU_ALIGNMENT  texture alignment (default 256)
 *   FAKE_GPU_FAIL       "nodevice" (GetDeviceCount answers 100), "driver"
 *                       (35), "prohibited" (compute mode prohibited),
 *                       "free" (Free answers 400 and frees nothing)
 *   FAKE_GPU_SLOW_US    Malloc and StreamCreateWithFlags first sleep
 *                       this long (default 0), and Free sleeps twice as
 *                       long after it freed, all outside the lock: a slow
 *                       driver, so that calls of several threads overlap
 *                       (tests/test-stress.c)
 * The thread's last error (GetLastError, PeekAtLastError) is what the
 * last failing Malloc, EventQuery or StreamIsCapturing answered, as a
 * runtime keeps it; the legacy default stream (NULL), asked whether it
 * captures while a blocking stream (flags 0) of the device captures,
 * answers StreamCaptureImplicit (906), as CUDA documents.
 *
 *   FAKE_GPU_REUSE      1: a freed allocation is kept and the next Malloc
 *                       that fits in it (any thread's, any smaller size)
 *                       gets its address back, as a driver reuses address
 *                       space (default 0: freed to the host)
 *
 * One mutex guards everything: it is a test double, not a fast one.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(FAKE_HIP)
#define FN(x) hip##x
#define ATTR_TEX 81
#define ATTR_MODE 6
#define ATTR_MAJOR 23
#define ATTR_MINOR 61
#define NAME "Fake HIP GPU"
#define VERSION 60000000
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

enum { OK = 0, E_VALUE = 1, E_OOM = 2, E_DRIVER = 35, E_NODEV = 100,
       E_BADDEV = 101, E_HANDLE = 400, E_NOT_READY = 600,
       E_CAPTURE_UNSUPPORTED = 900, E_CAPTURE_INVALIDATED = 901,
       E_CAPTURE_IMPLICIT = 906 };
enum { MODE_GLOBAL = 0, MODE_THREAD_LOCAL = 1, MODE_RELAXED = 2 };

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
  uint64_t target; /* done once stream's base + done reaches it */
  struct fevent *next;
} fevent;

typedef struct falloc {
  void *p;
  size_t size;
  int device;
  struct falloc *next;
} falloc;

#define STREAM_MAGIC 0x5354524du
#define EVENT_MAGIC 0x45564e54u
#define GRAPH_MAGIC 0x47525048u
#define EXEC_MAGIC 0x47455845u

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static fstream default_stream = {.magic = STREAM_MAGIC};
static fstream *streams;
static fevent *events;
static falloc *allocs;
static falloc *reusable; /* freed, kept for FAKE_GPU_REUSE */
static size_t used[64];
static unsigned long long next_capture = 1;
static _Thread_local int current;
static _Thread_local int thread_mode; /* MODE_GLOBAL until exchanged */
static _Thread_local int last_error;  /* GetLastError's */

/* An answer of a call that keeps the thread's last error. */
static int answer(int err) {
  if (err != OK)
    last_error = err;
  return err;
}

EXPORT int FN(GetLastError)(void) {
  int err = last_error;
  last_error = OK;
  return err;
}

EXPORT int FN(PeekAtLastError)(void) { return last_error; }

static uint64_t env_u64(const char *name, uint64_t dflt) {
  const char *v = getenv(name);
  return v && *v ? strtoull(v, NULL, 0) : dflt;
}

static int devices(void) {
  return (int)env_u64("FAKE_GPU_DEVICES", 1);
}

static const char *fail_mode(void) {
  const char *v = getenv("FAKE_GPU_FAIL");
  return v ? v : "";
}

/* A slow driver call (FAKE_GPU_SLOW_US), outside the lock. */
static void slow(void) {
  uint64_t us = env_u64("FAKE_GPU_SLOW_US", 0);
  if (us) {
    struct timespec t = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    nanosleep(&t, NULL);
  }
}

static fstream *stream_of(void *s) {
  fstream *f = s ? s : &default_stream;
  return f->magic == STREAM_MAGIC ? f : NULL;
}

/* Appends o to l (false: out of host memory). */
static bool push(oplist *l, op o) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    op *grown = realloc(l->ops, cap * sizeof *grown);
    if (!grown)
      return false;
    l->ops = grown;
    l->cap = cap;
  }
  l->ops[l->n++] = o;
  return true;
}

/* Queues o on s: into its capture's graph while it captures, else into its
 * queue (the queue's fields are the stream's own). */
static int enqueue(fstream *s, op o) {
  if (s->capturing)
    return push(&s->graph->list, o) ? OK : E_OOM;
  {
    oplist q = {s->ops, s->queued, s->cap};
    bool ok = push(&q, o);
    s->ops = q.ops;
    s->queued = q.n;
    s->cap = q.cap;
    return ok ? OK : E_OOM;
  }
}

static int free_now(void *p);

/* Runs a stream's waiting work up to `upto` (absolute count). */
static void run(fstream *s, uint64_t upto) {
  while (s->done < s->queued && s->base + s->done < upto) {
    op *o = &s->ops[s->done++];
    if (o->kind == OP_FREE)
      (void)free_now(o->dst);
    else
      memmove(o->dst, o->src, o->size);
  }
  if (s->done == s->queued) {
    s->base += s->done;
    s->done = s->queued = 0;
  }
}

/* A potentially unsafe call is about to run (the lock held): OK, or
 * E_CAPTURE_UNSUPPORTED when a capture prohibits it, each such capture
 * invalidated (see the head of this file). */
static int unsafe_call(void) {
  int err = OK;
  if (thread_mode == MODE_RELAXED)
    return OK;
  for (fstream *s = streams; s; s = s->next) {
    bool own;
    if (!s->capturing)
      continue;
    own = pthread_equal(s->capture_thread, pthread_self());
    if ((own && s->capture_mode != MODE_RELAXED) ||
        (!own && thread_mode == MODE_GLOBAL &&
         s->capture_mode == MODE_GLOBAL)) {
      s->invalidated = true;
      err = E_CAPTURE_UNSUPPORTED;
    }
  }
  return err;
}

EXPORT int FN(ThreadExchangeStreamCaptureMode)(int *mode) {
  int old;
  if (!mode || *mode < MODE_GLOBAL || *mode > MODE_RELAXED)
    return E_VALUE;
  old = thread_mode;
  thread_mode = *mode;
  *mode = old;
  return OK;
}

static void run_all(void) {
  run(&default_stream, UINT64_MAX);
  for (fstream *s = streams; s; s = s->next)
    run(s, UINT64_MAX);
}

/* ---- devices ----------------------------------------------------------------- */

EXPORT int FN(GetDeviceCount)(int *count) {
  if (!strcmp(fail_mode(), "nodevice"))
    return E_NODEV;
  if (!strcmp(fail_mode(), "driver"))
    return E_DRIVER;
  *count = devices();
  return *count ? OK : E_NODEV;
}

EXPORT int FN(GetDevice)(int *dev) {
  *dev = current;
  return OK;
}

EXPORT int FN(SetDevice)(int dev) {
  if (dev < 0 || dev >= devices())
    return E_BADDEV;
  current = dev;
  return OK;
}

EXPORT int FN(DeviceGetAttribute)(int *value, int attr, int dev) {
  if (dev < 0 || dev >= devices())
    return E_BADDEV;
  if (attr == ATTR_TEX)
    *value = (int)env_u64("FAKE_GPU_ALIGNMENT", 256);
  else if (attr == ATTR_MODE)
    *value = !strcmp(fail_mode(), "prohibited") ? 2 : 0;
  else if (attr == ATTR_MAJOR)
    *value = 9;
  else if (attr == ATTR_MINOR)
    *value = 4;
  else
    return E_VALUE;
  return OK;
}

EXPORT int FN(MemGetInfo)(size_t *free_bytes, size_t *total) {
  uint64_t mem = env_u64("FAKE_GPU_MEMORY", UINT64_C(1) << 30);
  pthread_mutex_lock(&mu);
  *total = mem;
  *free_bytes = mem - used[current];
  pthread_mutex_unlock(&mu);
  return OK;
}

EXPORT int FN(RuntimeGetVersion)(int *v) {
  *v = VERSION;
  return OK;
}

#if defined(FAKE_HIP)
EXPORT int hipDeviceGetName(char *name, int len, int dev) {
  if (dev < 0 || dev >= devices())
    return E_BADDEV;
  snprintf(name, (size_t)len, "%s %d", NAME, dev);
  return OK;
}
#else
EXPORT int cudaGetDeviceProperties(void *props, int dev) {
  if (dev < 0 || dev >= devices())
    return E_BADDEV;
  snprintf(props, 256, "%s %d", NAME, dev);
  return OK;
}
#endif

EXPORT const char *FN(GetErrorName)(int err) {
  switch (err) {
  case OK:
    return "fakeSuccess";
  case E_OOM:
    return "fakeErrorOutOfMemory";
  case E_NODEV:
    return "fakeErrorNoDevice";
  case E_DRIVER:
    return "fakeErrorInsufficientDriver";
  case E_CAPTURE_UNSUPPORTED:
    return "fakeErrorStreamCaptureUnsupported";
  case E_CAPTURE_INVALIDATED:
    return "fakeErrorStreamCaptureInvalidated";
  default:
    return "fakeError";
  }
}

EXPORT const char *FN(GetErrorString)(int err) {
  return err == E_NODEV ? "no fake device" : "a fake runtime's error";
}

/* ---- memory -------------------------------------------------------------------- */

/* A freed allocation kept for FAKE_GPU_REUSE that holds `size` bytes,
 * off the list and now of that size, or NULL (the lock held). */
static falloc *reuse(size_t size) {
  for (falloc **link = &reusable; *link; link = &(*link)->next)
    if ((*link)->size >= size) {
      falloc *a = *link;
      *link = a->next;
      a->size = size;
      return a;
    }
  return NULL;
}

/* A new allocation of `size` bytes (the lock held), or NULL. */
static falloc *fresh(size_t size) {
  size_t align = (size_t)env_u64("FAKE_GPU_ALIGNMENT", 256);
  falloc *a = malloc(sizeof *a);
  if (align < 4096)
    align = 4096;
  if (a)
    a->p = aligned_alloc(align, (size + align - 1) / align * align);
  if (!a || !a->p) {
    free(a);
    return NULL;
  }
  a->size = size;
  return a;
}

static int malloc_answer(void **p, size_t size);

EXPORT int FN(Malloc)(void **p, size_t size) {
  return answer(malloc_answer(p, size));
}

static int malloc_answer(void **p, size_t size) {
  uint64_t mem = env_u64("FAKE_GPU_MEMORY", UINT64_C(1) << 30);
  falloc *a;
  if (!p)
    return E_VALUE;
  slow();
  pthread_mutex_lock(&mu);
  if (unsafe_call() != OK) {
    pthread_mutex_unlock(&mu);
    return E_CAPTURE_UNSUPPORTED;
  }
  if (size > mem - used[current]) {
    pthread_mutex_unlock(&mu);
    return E_OOM;
  }
  a = reuse(size); /* a freed address comes back first */
  if (!a && !(a = fresh(size))) {
    pthread_mutex_unlock(&mu);
    return E_OOM;
  }
  a->device = current;
  a->next = allocs;
  allocs = a;
  used[current] += size;
  *p = a->p;
  pthread_mutex_unlock(&mu);
  return OK;
}

/* Frees allocation p (the lock held); E_VALUE when it is none. */
static int free_now(void *p) {
  for (falloc **link = &allocs; *link; link = &(*link)->next)
    if ((*link)->p == p) {
      falloc *a = *link;
      *link = a->next;
      used[a->device] -= a->size;
      if (env_u64("FAKE_GPU_REUSE", 0)) {
        a->next = reusable;
        reusable = a;
        return OK;
      }
      free(a->p);
      free(a);
      return OK;
    }
  return E_VALUE;
}

EXPORT int FN(Free)(void *p) {
  int err;
  if (!p)
    return OK;
  if (!strcmp(fail_mode(), "free"))
    return E_HANDLE;
  pthread_mutex_lock(&mu);
  if (unsafe_call() != OK) {
    pthread_mutex_unlock(&mu);
    return E_CAPTURE_UNSUPPORTED;
  }
  run_all(); /* a free waits for the device, as the real one does */
  err = free_now(p);
  pthread_mutex_unlock(&mu);
  slow(); /* freed: the address may be handed out meanwhile */
  slow();
  return err;
}

EXPORT int FN(Memcpy)(void *dst, const void *src, size_t size, int kind) {
  (void)kind;
  memmove(dst, src, size);
  return OK;
}

EXPORT int FN(MemcpyAsync)(void *dst, const void *src, size_t size, int kind,
                           void *stream) {
  fstream *s;
  int err;
  (void)kind;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  err = s ? enqueue(s, (op){OP_COPY, dst, src, size}) : E_HANDLE;
  pthread_mutex_unlock(&mu);
  return err;
}

/* The stream-ordered allocator: memory at once, given back when the
 * stream's work reaches the free. */
EXPORT int FN(MallocAsync)(void **p, size_t size, void *stream) {
  fstream *s;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  if (!s || s->capturing) {
    pthread_mutex_unlock(&mu);
    return s ? E_CAPTURE_UNSUPPORTED : E_HANDLE;
  }
  pthread_mutex_unlock(&mu);
  return FN(Malloc)(p, size);
}

EXPORT int FN(FreeAsync)(void *p, void *stream) {
  fstream *s;
  int err;
  if (!p)
    return OK;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  if (!s || s->capturing)
    err = s ? E_CAPTURE_UNSUPPORTED : E_HANDLE;
  else
    err = enqueue(s, (op){OP_FREE, p, NULL, 0});
  pthread_mutex_unlock(&mu);
  return err;
}

EXPORT int FN(DeviceSynchronize)(void) {
  int err;
  pthread_mutex_lock(&mu);
  err = unsafe_call();
  if (err == OK)
    run_all();
  pthread_mutex_unlock(&mu);
  return err;
}

/* ---- streams ---------------------------------------------------------------- */

EXPORT int FN(StreamCreateWithFlags)(void **out, unsigned flags) {
  fstream *s;
  slow();
  s = calloc(1, sizeof *s);
  if (!s)
    return E_OOM;
  s->flags = flags;
  s->magic = STREAM_MAGIC;
  s->device = current;
  pthread_mutex_lock(&mu);
  s->next = streams;
  streams = s;
  pthread_mutex_unlock(&mu);
  *out = s;
  return OK;
}

EXPORT int FN(StreamDestroy)(void *stream) {
  fstream **link;
  pthread_mutex_lock(&mu);
  for (link = &streams; *link; link = &(*link)->next)
    if (*link == stream) {
      fstream *s = *link;
      run(s, UINT64_MAX);
      for (fevent *e = events; e; e = e->next)
        if (e->stream == s)
          e->stream = NULL;
      *link = s->next;
      s->magic = 0;
      if (s->graph) { /* destroyed while capturing: the capture is lost */
        free(s->graph->list.ops);
        free(s->graph);
      }
      free(s->ops);
      free(s);
      pthread_mutex_unlock(&mu);
      return OK;
    }
  pthread_mutex_unlock(&mu);
  return E_HANDLE;
}

EXPORT int FN(StreamSynchronize)(void *stream) {
  fstream *s;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  if (!s || s->capturing) {
    pthread_mutex_unlock(&mu);
    return s ? E_CAPTURE_UNSUPPORTED : E_HANDLE;
  }
  run(s, UINT64_MAX);
  pthread_mutex_unlock(&mu);
  return OK;
}

#if defined(FAKE_HIP)
EXPORT int hipStreamGetDevice(void *stream, int *dev) {
#else
EXPORT int cudaStreamGetDevice(void *stream, int *dev) {
#endif
  fstream *s;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  if (s)
    *dev = stream ? s->device : current;
  pthread_mutex_unlock(&mu);
  return s ? OK : E_HANDLE;
}

EXPORT int FN(StreamIsCapturing)(void *stream, int *status) {
  fstream *s;
  int err;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  err = s ? OK : E_HANDLE;
  if (s)
    *status = s->capturing ? 1 : 0;
  if (s && !stream) /* the legacy stream: a blocking stream capturing? */
    for (fstream *o = streams; o; o = o->next)
      if (o->capturing && !(o->flags & 1) && o->device == current)
        err = E_CAPTURE_IMPLICIT;
  pthread_mutex_unlock(&mu);
  return answer(err);
}

EXPORT int FN(StreamGetCaptureInfo)(void *stream, int *status,
                                    unsigned long long *id, void *graph,
                                    void *deps, void *edges, void *count) {
  fstream *s;
  (void)graph, (void)deps, (void)edges, (void)count;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  if (s) {
    *status = s->capturing ? 1 : 0;
    if (id)
      *id = s->capturing ? s->capture_id : 0;
  }
  pthread_mutex_unlock(&mu);
  return s ? OK : E_HANDLE;
}

EXPORT int FN(StreamBeginCapture)(void *stream, int mode) {
  fstream *s;
  int err = OK;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  if (!s)
    err = E_HANDLE;
  else if (mode < MODE_GLOBAL || mode > MODE_RELAXED)
    err = E_VALUE;
  else if (!stream || s->capturing)
    err = E_CAPTURE_UNSUPPORTED;
  else if (!(s->graph = calloc(1, sizeof *s->graph)))
    err = E_OOM;
  else {
    s->graph->magic = GRAPH_MAGIC;
    s->capturing = true;
    s->capture_id = next_capture++;
    s->capture_mode = mode;
    s->capture_thread = pthread_self();
    s->invalidated = false;
  }
  pthread_mutex_unlock(&mu);
  return err;
}

EXPORT int FN(StreamEndCapture)(void *stream, void **graph) {
  fstream *s;
  int err = OK;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  if (!s)
    err = E_HANDLE;
  else if (!s->capturing)
    err = E_VALUE;
  else if (s->invalidated) { /* an unsafe call broke it: no graph */
    s->capturing = false;
    free(s->graph->list.ops);
    free(s->graph);
    s->graph = NULL;
    *graph = NULL;
    err = E_CAPTURE_INVALIDATED;
  } else {
    s->capturing = false;
    *graph = s->graph;
    s->graph = NULL;
  }
  pthread_mutex_unlock(&mu);
  return err;
}

EXPORT int FN(GraphDestroy)(void *graph) {
  fgraph *g = graph;
  if (!g || g->magic != GRAPH_MAGIC)
    return E_VALUE;
  g->magic = 0;
  free(g->list.ops);
  free(g);
  return OK;
}

/* An executable graph: a copy of the graph's ops. */
static int instantiate(void **exec, void *graph) {
  fgraph *g = graph, *x;
  if (!exec || !g || g->magic != GRAPH_MAGIC)
    return E_VALUE;
  x = calloc(1, sizeof *x);
  if (!x)
    return E_OOM;
  x->magic = EXEC_MAGIC;
  for (size_t i = 0; i < g->list.n; i++)
    if (!push(&x->list, g->list.ops[i])) {
      free(x->list.ops);
      free(x);
      return E_OOM;
    }
  *exec = x;
  return OK;
}

#if defined(FAKE_HIP)
/* HIP's: (exec, graph, error node, log buffer, its size) */
EXPORT int hipGraphInstantiate(void **exec, void *graph, void *error_node,
                               char *log, size_t log_size) {
  (void)error_node;
  if (log && log_size)
    log[0] = '\0';
  return instantiate(exec, graph);
}
#else
/* CUDA 12 and later: (exec, graph, flags) */
EXPORT int cudaGraphInstantiate(void **exec, void *graph,
                                unsigned long long flags) {
  (void)flags;
  return instantiate(exec, graph);
}
#endif

EXPORT int FN(GraphInstantiateWithFlags)(void **exec, void *graph,
                                         unsigned long long flags) {
  (void)flags;
  return instantiate(exec, graph);
}

/* Queues the graph's ops on the stream, as if issued there now. */
EXPORT int FN(GraphLaunch)(void *exec, void *stream) {
  fgraph *x = exec;
  fstream *s;
  int err = OK;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  if (!x || x->magic != EXEC_MAGIC)
    err = E_VALUE;
  else if (!s)
    err = E_HANDLE;
  for (size_t i = 0; err == OK && i < x->list.n; i++)
    err = enqueue(s, x->list.ops[i]);
  pthread_mutex_unlock(&mu);
  return err;
}

EXPORT int FN(GraphExecDestroy)(void *exec) {
  fgraph *x = exec;
  if (!x || x->magic != EXEC_MAGIC)
    return E_VALUE;
  x->magic = 0;
  free(x->list.ops);
  free(x);
  return OK;
}

/* ---- events --------------------------------------------------------------------- */

EXPORT int FN(EventCreateWithFlags)(void **out, unsigned flags) {
  fevent *e = calloc(1, sizeof *e);
  (void)flags;
  if (!e)
    return E_OOM;
  e->magic = EVENT_MAGIC;
  pthread_mutex_lock(&mu);
  e->next = events;
  events = e;
  pthread_mutex_unlock(&mu);
  *out = e;
  return OK;
}

EXPORT int FN(EventRecord)(void *event, void *stream) {
  fevent *e = event;
  fstream *s;
  pthread_mutex_lock(&mu);
  s = stream_of(stream);
  if (!e || e->magic != EVENT_MAGIC || !s) {
    pthread_mutex_unlock(&mu);
    return E_HANDLE;
  }
  if (!s->capturing) {
    e->stream = s;
    e->target = s->base + s->queued;
  }
  pthread_mutex_unlock(&mu);
  return OK;
}

EXPORT int FN(EventQuery)(void *event) {
  fevent *e = event;
  int err;
  pthread_mutex_lock(&mu);
  if (!e || e->magic != EVENT_MAGIC)
    err = E_HANDLE;
  else if ((err = unsafe_call()) != OK)
    ;
  else
    err = !e->stream || e->stream->base + e->stream->done >= e->target
              ? OK
              : E_NOT_READY;
  pthread_mutex_unlock(&mu);
  return answer(err);
}

EXPORT int FN(EventSynchronize)(void *event) {
  fevent *e = event;
  pthread_mutex_lock(&mu);
  if (!e || e->magic != EVENT_MAGIC) {
    pthread_mutex_unlock(&mu);
    return E_HANDLE;
  }
  if (unsafe_call() != OK) {
    pthread_mutex_unlock(&mu);
    return E_CAPTURE_UNSUPPORTED;
  }
  if (e->stream)
    run(e->stream, e->target);
  pthread_mutex_unlock(&mu);
  return OK;
}

EXPORT int FN(EventDestroy)(void *event) {
  fevent **link;
  pthread_mutex_lock(&mu);
  for (link = &events; *link; link = &(*link)->next)
    if (*link == event) {
      fevent *e = *link;
      *link = e->next;
      e->magic = 0;
      free(e);
      pthread_mutex_unlock(&mu);
      return OK;
    }
  pthread_mutex_unlock(&mu);
  return E_HANDLE;
}
