/* backend_hip.c -- HIP: the real device, through the HIP runtime
 * (libamdhip64).
 *
 * Every HIP call's return code is checked; a failure becomes
 * HIPPO_OUT_OF_MEMORY (hipErrorOutOfMemory) or HIPPO_BACKEND_ERROR, and
 * last_error names the call with hipGetErrorName, the number and
 * hipGetErrorString.  Every device call runs on the backend's device
 * (hipSetDevice when the thread's current one differs) and gives the
 * thread its own current device back afterwards (enter/leave).  Calls are
 * counted by kind (atomics), but HIP has no emulation: those slots are NULL
 * and the core answers HIPPO_UNSUPPORTED.
 *
 * Note: hipMemcpyAsync does not promise memmove semantics; the core never
 * issues a copy whose source and destination overlap.
 *
 * Built only with HAVE_HIP (configure --with-hip); otherwise
 * hippo__backend_hip_create answers HIPPO_UNSUPPORTED.
 */
#include <config.h>

#include "backend.h"
#include "core.h"

#ifdef HAVE_HIP

#include <stdlib.h>

#include <hip/hip_runtime_api.h>

/* The HIP backend.  Invariant: ordinal is a valid device ordinal (checked at
 * create); calls[k] counts every call of kind k, failed ones included. */
typedef struct hip_backend {
  hippo__backend base;                      /* must stay first */
  int32_t ordinal;                          /* the HIP device */
  _Atomic uint64_t calls[HIPPO_CALL_KINDS]; /* backend calls by kind */
} hip_backend;

static hip_backend *hip_of(hippo__backend *be) { return (hip_backend *)be; }

static void count(hip_backend *h, hippo_call_kind kind) {
  atomic_fetch_add_explicit(&h->calls[kind], 1, memory_order_relaxed);
}

/* Reports a failed HIP call: the status it maps to, last_error naming it. */
static hippo_status hip_fail(hipError_t err, const char *call,
                             const char *hint) {
  hippo_status st = HIPPO_BACKEND_ERROR;
  if (err == hipErrorOutOfMemory || err == hipErrorMemoryAllocation)
    st = HIPPO_OUT_OF_MEMORY;
  else if (err == hipErrorNoDevice || err == hipErrorInvalidDevice ||
           err == hipErrorInsufficientDriver)
    st = HIPPO_NO_DEVICE;
  return hippo__error_set(st, "HIP %s failed: %s (%d): %s%s%s", call,
                          hipGetErrorName(err), (int)err,
                          hipGetErrorString(err), hint ? "; " : "",
                          hint ? hint : "");
}

/* The current device is per host thread, and the caller's: a call runs on
 * the backend's device and gives the thread its own back (leave), so hippo
 * never changes which device the host runtime's next call goes to. */
typedef struct dev_scope {
  int prev;     /* the thread's device before */
  bool restore; /* whether it was switched */
} dev_scope;

static hippo_status enter(hip_backend *h, const char *why, dev_scope *sc) {
  int cur = -1;
  hipError_t err;
  sc->restore = false;
  if (hipGetDevice(&cur) == hipSuccess && cur == h->ordinal)
    return HIPPO_SUCCESS;
  err = hipSetDevice(h->ordinal);
  if (err != hipSuccess) {
    hippo_status st = hip_fail(err, "hipSetDevice", NULL);
    return hippo__error_wrap(st, "%s on HIP device %d", why,
                             (int)h->ordinal);
  }
  sc->prev = cur;
  sc->restore = cur >= 0;
  return HIPPO_SUCCESS;
}

/* Gives the thread its device back; returns st. */
static hippo_status leave(const dev_scope *sc, hippo_status st) {
  if (sc->restore)
    (void)hipSetDevice(sc->prev); /* it was current a moment ago */
  return st;
}

static hippo_status hip_page_alloc(hippo__backend *be, uint64_t size,
                                   uint64_t *addr) {
  hip_backend *h = hip_of(be);
  dev_scope sc;
  hippo_status st;
  hipError_t err;
  void *p = NULL;

  count(h, HIPPO_CALL_ALLOC);
  if (!addr || size == 0 || (size & (be->alignment - 1)) != 0)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "HIP page_alloc: size %llu must be a positive "
                            "multiple of %llu and addr not NULL",
                            (unsigned long long)size,
                            (unsigned long long)be->alignment);
  if ((st = enter(h, "page_alloc", &sc)) != HIPPO_SUCCESS)
    return st;
  err = hipMalloc(&p, (size_t)size);
  if (err != hipSuccess) {
    st = hip_fail(err, "hipMalloc", "release or clean up device memory");
    return leave(&sc, hippo__error_wrap(st, "HIP page_alloc of %llu bytes",
                                        (unsigned long long)size));
  }
  if (!p)
    return leave(&sc,
                 hippo__error_set(HIPPO_OUT_OF_MEMORY,
                                  "HIP hipMalloc of %llu bytes returned NULL",
                                  (unsigned long long)size));
  *addr = (uint64_t)(uintptr_t)p;
  return leave(&sc, HIPPO_SUCCESS);
}

static hippo_status hip_page_free(hippo__backend *be, uint64_t addr,
                                  uint64_t size) {
  hip_backend *h = hip_of(be);
  dev_scope sc;
  hippo_status st;
  hipError_t err;

  (void)size;
  count(h, HIPPO_CALL_FREE);
  if (addr == 0)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "HIP page_free: address 0 is not a page");
  if ((st = enter(h, "page_free", &sc)) != HIPPO_SUCCESS)
    return st;
  err = hipFree((void *)(uintptr_t)addr);
  if (err != hipSuccess)
    return leave(&sc, hip_fail(err, "hipFree", NULL));
  return leave(&sc, HIPPO_SUCCESS);
}

static hippo_status hip_copy(hippo__backend *be, void *stream, uint64_t dst,
                             uint64_t src, uint64_t size) {
  hip_backend *h = hip_of(be);
  dev_scope sc;
  hippo_status st;
  hipError_t err;

  count(h, HIPPO_CALL_COPY);
  if (size == 0)
    return HIPPO_SUCCESS;
  if (dst == 0 || src == 0)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "HIP copy: source and destination must not be 0");
  if ((st = enter(h, "copy", &sc)) != HIPPO_SUCCESS)
    return st;
  err = hipMemcpyAsync((void *)(uintptr_t)dst, (const void *)(uintptr_t)src,
                       (size_t)size, hipMemcpyDeviceToDevice,
                       (hipStream_t)stream);
  if (err != hipSuccess)
    return leave(&sc, hip_fail(err, "hipMemcpyAsync", NULL));
  return leave(&sc, HIPPO_SUCCESS);
}

static hippo_status hip_stream_sync(hippo__backend *be, void *stream) {
  hip_backend *h = hip_of(be);
  dev_scope sc;
  hippo_status st;
  hipError_t err;

  count(h, HIPPO_CALL_SYNC);
  if ((st = enter(h, "stream_sync", &sc)) != HIPPO_SUCCESS)
    return st;
  err = hipStreamSynchronize((hipStream_t)stream);
  if (err != hipSuccess)
    return leave(&sc, hip_fail(err, "hipStreamSynchronize", NULL));
  return leave(&sc, HIPPO_SUCCESS);
}

static hippo_status hip_event_create(hippo__backend *be, void **event) {
  hip_backend *h = hip_of(be);
  dev_scope sc;
  hippo_status st;
  hipError_t err;
  hipEvent_t ev;

  count(h, HIPPO_CALL_EVENT);
  if (!event)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "HIP event_create: event must not be NULL");
  if ((st = enter(h, "event_create", &sc)) != HIPPO_SUCCESS)
    return st;
  err = hipEventCreateWithFlags(&ev, hipEventDisableTiming);
  if (err != hipSuccess)
    return leave(&sc, hip_fail(err, "hipEventCreateWithFlags", NULL));
  *event = ev;
  return leave(&sc, HIPPO_SUCCESS);
}

static hippo_status hip_event_record(hippo__backend *be, void *event,
                                     void *stream) {
  hip_backend *h = hip_of(be);
  dev_scope sc;
  hippo_status st;
  hipError_t err;

  count(h, HIPPO_CALL_EVENT);
  if (!event)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "HIP event_record: event must not be NULL");
  if ((st = enter(h, "event_record", &sc)) != HIPPO_SUCCESS)
    return st;
  err = hipEventRecord((hipEvent_t)event, (hipStream_t)stream);
  if (err != hipSuccess)
    return leave(&sc, hip_fail(err, "hipEventRecord", NULL));
  return leave(&sc, HIPPO_SUCCESS);
}

static hippo_status hip_event_wait(hippo__backend *be, void *event) {
  hip_backend *h = hip_of(be);
  hipError_t err;

  count(h, HIPPO_CALL_EVENT);
  if (!event)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "HIP event_wait: event must not be NULL");
  err = hipEventSynchronize((hipEvent_t)event);
  if (err != hipSuccess)
    return hip_fail(err, "hipEventSynchronize", NULL);
  return HIPPO_SUCCESS;
}

static hippo_status hip_event_query(hippo__backend *be, void *event,
                                    bool *done) {
  hip_backend *h = hip_of(be);
  hipError_t err;

  count(h, HIPPO_CALL_EVENT);
  if (!event || !done)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "HIP event_query: event and done must not be "
                            "NULL");
  err = hipEventQuery((hipEvent_t)event);
  if (err == hipSuccess) {
    *done = true;
    return HIPPO_SUCCESS;
  }
  if (err == hipErrorNotReady) {
    *done = false;
    return HIPPO_SUCCESS;
  }
  return hip_fail(err, "hipEventQuery", NULL);
}

static hippo_status hip_event_destroy(hippo__backend *be, void *event) {
  hipError_t err;

  (void)be;
  if (!event)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "HIP event_destroy: event must not be NULL");
  err = hipEventDestroy((hipEvent_t)event);
  if (err != hipSuccess)
    return hip_fail(err, "hipEventDestroy", NULL);
  return HIPPO_SUCCESS;
}

static hippo_status hip_capture_status(hippo__backend *be, void *stream,
                                       bool *capturing, uint64_t *capture_id) {
  hip_backend *h = hip_of(be);
  dev_scope sc;
  hipStreamCaptureStatus cs = hipStreamCaptureStatusNone;
  unsigned long long id = 0;
  hippo_status st;
  hipError_t err;

  count(h, HIPPO_CALL_CAPTURE_QUERY);
  if (!capturing)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "HIP capture_status: capturing must not be NULL");
  if ((st = enter(h, "capture_status", &sc)) != HIPPO_SUCCESS)
    return st;
  err = hipStreamIsCapturing((hipStream_t)stream, &cs);
  if (err == hipErrorStreamCaptureImplicit) {
    /* The legacy default stream cannot even be asked while another stream
     * of the device captures in global mode: a capture is in progress, so
     * answer "capturing" (nothing may move).  Its id belongs to the other
     * stream, which answers it; here it is unknown (0). */
    *capturing = true;
    if (capture_id)
      *capture_id = 0;
    return leave(&sc, HIPPO_SUCCESS);
  }
  if (err != hipSuccess)
    return leave(&sc, hip_fail(err, "hipStreamIsCapturing", NULL));
  /* An invalidated capture has not ended yet: still capturing. */
  *capturing = cs != hipStreamCaptureStatusNone;
  if (*capturing && capture_id) {
    err = hipStreamGetCaptureInfo((hipStream_t)stream, &cs, &id);
    if (err != hipSuccess)
      return leave(&sc, hip_fail(err, "hipStreamGetCaptureInfo", NULL));
  }
  if (capture_id)
    *capture_id = *capturing ? (uint64_t)id : 0;
  return leave(&sc, HIPPO_SUCCESS);
}

static hippo_status hip_mem_info(hippo__backend *be, uint64_t *free_bytes,
                                 uint64_t *total_bytes) {
  hip_backend *h = hip_of(be);
  dev_scope sc;
  size_t fr = 0, tot = 0;
  hippo_status st;
  hipError_t err;

  if ((st = enter(h, "mem_info", &sc)) != HIPPO_SUCCESS)
    return st;
  err = hipMemGetInfo(&fr, &tot);
  if (err != hipSuccess)
    return leave(&sc, hip_fail(err, "hipMemGetInfo", NULL));
  if (free_bytes)
    *free_bytes = fr;
  if (total_bytes)
    *total_bytes = tot;
  return leave(&sc, HIPPO_SUCCESS);
}

static void hip_destroy(hippo__backend *be) { free(hip_of(be)); }

static const hippo__backend_ops hip_ops = {
    .page_alloc = hip_page_alloc,
    .page_free = hip_page_free,
    .copy = hip_copy,
    .stream_sync = hip_stream_sync,
    .event_create = hip_event_create,
    .event_record = hip_event_record,
    .event_wait = hip_event_wait,
    .event_query = hip_event_query,
    .event_destroy = hip_event_destroy,
    .capture_status = hip_capture_status,
    .mem_info = hip_mem_info,
    .destroy = hip_destroy,
    /* No emulation on a real device. */
};

hippo_status hippo__backend_hip_create(int32_t ordinal, hippo__backend **out) {
  hip_backend *h;
  hipError_t err;
  hippo_status st;
  int devices = 0, mode = 0;
  uint64_t tot = 0;

  if (!out)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                            "HIP device: out must not be NULL");
  err = hipGetDeviceCount(&devices);
  if (err == hipErrorNoDevice || (err == hipSuccess && devices == 0))
    return hippo__error_set(
        HIPPO_NO_DEVICE,
        "HIP hipGetDeviceCount failed: %s (%d): no ROCm device is visible; "
        "use backend HOST or DRY, or check /dev/kfd permissions",
        hipGetErrorName(hipErrorNoDevice), (int)hipErrorNoDevice);
  if (err != hipSuccess)
    return hip_fail(err, "hipGetDeviceCount",
                    "check the ROCm driver installation and /dev/kfd");
  if (ordinal < 0 || ordinal >= devices)
    return hippo__error_set(HIPPO_NO_DEVICE,
                            "HIP device ordinal %d is out of range: %d "
                            "device(s) visible (ordinals 0..%d)",
                            (int)ordinal, devices, devices - 1);
  err = hipDeviceGetAttribute(&mode, hipDeviceAttributeComputeMode, ordinal);
  if (err != hipSuccess)
    return hip_fail(err, "hipDeviceGetAttribute(hipDeviceAttributeComputeMode)",
                    NULL);
  if (mode == hipComputeModeProhibited)
    return hippo__error_set(HIPPO_NO_DEVICE,
                            "HIP device %d is in prohibited compute mode; no "
                            "host thread may use it (see rocm-smi)",
                            (int)ordinal);
  h = calloc(1, sizeof *h);
  if (!h)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "HIP device: out of host memory");
  h->base.ops = &hip_ops;
  h->base.kind = HIPPO_BACKEND_HIP;
  h->base.alignment = HIPPO__DEFAULT_ALIGNMENT;
  h->ordinal = ordinal;
  for (unsigned k = 0; k < HIPPO_CALL_KINDS; k++)
    atomic_init(&h->calls[k], 0);
  /* on the device, and the thread's current device back after */
  st = hip_mem_info(&h->base, NULL, &tot);
  if (st != HIPPO_SUCCESS) {
    free(h);
    return st;
  }
  h->base.total_memory = tot;
  *out = &h->base;
  return HIPPO_SUCCESS;
}

#else /* !HAVE_HIP */

hippo_status hippo__backend_hip_create(int32_t ordinal, hippo__backend **out) {
  (void)ordinal;
  (void)out;
  return hippo__error_set(HIPPO_UNSUPPORTED,
                          "this plugin was built without HIP (configure "
                          "--with-hip)");
}

#endif /* HAVE_HIP */
