/* fakegpu_memory.c -- the stand-in runtimes' device memory: Malloc, Free,
 * the stream-ordered MallocAsync and FreeAsync, the copies (Memcpy,
 * MemcpyAsync) and DeviceSynchronize.  An allocation is host memory,
 * counted in its device's FAKE_GPU_MEMORY (fake_used); a freed one goes
 * back to the host, or is kept for the next Malloc that fits under
 * FAKE_GPU_REUSE.  A free waits for the device's queued work, as a real
 * one does.  Every list here is under the lock (fake_mu); what each call
 * answers is said at the head of fakegpu.c.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fakegpu.h"

typedef struct falloc {
  void *p;
  size_t size;
  int device;
  struct falloc *next;
} falloc;

static falloc *allocs;
static falloc *reusable; /* freed, kept for FAKE_GPU_REUSE */
size_t fake_used[64];

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
  size_t align = (size_t)fake_env_u64("FAKE_GPU_ALIGNMENT", 256);
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
  return fake_answer(malloc_answer(p, size));
}

static int malloc_answer(void **p, size_t size) {
  uint64_t mem = fake_env_u64("FAKE_GPU_MEMORY", UINT64_C(1) << 30);
  falloc *a;
  if (!p)
    return E_VALUE;
  fake_slow();
  pthread_mutex_lock(&fake_mu);
  if (fake_unsafe_call() != OK) {
    pthread_mutex_unlock(&fake_mu);
    return E_CAPTURE_UNSUPPORTED;
  }
  if (fake_need_ctx() != OK) {
    pthread_mutex_unlock(&fake_mu);
    return E_UNAVAILABLE;
  }
  if (size > mem - fake_used[fake_dev_now()]) {
    pthread_mutex_unlock(&fake_mu);
    return E_OOM;
  }
  a = reuse(size); /* a freed address comes back first */
  if (!a && !(a = fresh(size))) {
    pthread_mutex_unlock(&fake_mu);
    return E_OOM;
  }
  a->device = fake_dev_now();
  a->next = allocs;
  allocs = a;
  fake_used[a->device] += size;
  *p = a->p;
  pthread_mutex_unlock(&fake_mu);
  return OK;
}

/* Frees allocation p (the lock held); E_VALUE when it is none. */
int fake_free_now(void *p) {
  for (falloc **link = &allocs; *link; link = &(*link)->next)
    if ((*link)->p == p) {
      falloc *a = *link;
      *link = a->next;
      fake_used[a->device] -= a->size;
      if (fake_env_u64("FAKE_GPU_REUSE", 0)) {
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
  if (!strcmp(fake_fail_mode(), "free"))
    return E_HANDLE;
  pthread_mutex_lock(&fake_mu);
  if (fake_unsafe_call() != OK) {
    pthread_mutex_unlock(&fake_mu);
    return E_CAPTURE_UNSUPPORTED;
  }
  fake_run_all(); /* a free waits for the device, as the real one does */
  err = fake_free_now(p);
  pthread_mutex_unlock(&fake_mu);
  fake_slow(); /* freed: the address may be handed out meanwhile */
  fake_slow();
  return err;
}

EXPORT int FN(Memcpy)(void *dst, const void *src, size_t size, int kind) {
  int err;
  (void)kind;
  pthread_mutex_lock(&fake_mu);
  err = fake_sync_checks(NULL, true);
  if (err == OK && (fake_copy_faults(fake_dev_now(), dst, size) ||
                    fake_copy_faults(fake_dev_now(), src, size)))
    err = E_ILLEGAL_ADDRESS;
  pthread_mutex_unlock(&fake_mu);
  if (err == OK)
    memmove(dst, src, size);
  return err;
}

EXPORT int FN(MemcpyAsync)(void *dst, const void *src, size_t size, int kind,
                           void *stream) {
  fstream *s;
  int err;
  (void)kind;
  pthread_mutex_lock(&fake_mu);
  s = fake_stream_of(stream);
  if (s &&
      (fake_copy_faults(s == &fake_default_stream ? fake_dev_now() : s->device,
                        dst, size) ||
       fake_copy_faults(s == &fake_default_stream ? fake_dev_now() : s->device,
                        src, size)))
    err = E_ILLEGAL_ADDRESS;
  else
    err = s ? fake_enqueue(s, (op){OP_COPY, dst, src, size}) : E_NOSTREAM;
  pthread_mutex_unlock(&fake_mu);
  return err;
}

/* The stream-ordered allocator: memory at once, given back when the
 * stream's work reaches the free. */
EXPORT int FN(MallocAsync)(void **p, size_t size, void *stream) {
  fstream *s;
  pthread_mutex_lock(&fake_mu);
  s = fake_stream_of(stream);
  if (!s || s->capturing) {
    pthread_mutex_unlock(&fake_mu);
    return s ? E_CAPTURE_UNSUPPORTED : E_NOSTREAM;
  }
  pthread_mutex_unlock(&fake_mu);
  return FN(Malloc)(p, size);
}

EXPORT int FN(FreeAsync)(void *p, void *stream) {
  fstream *s;
  int err;
  if (!p)
    return OK;
  pthread_mutex_lock(&fake_mu);
  s = fake_stream_of(stream);
  if (!s || s->capturing)
    err = s ? E_CAPTURE_UNSUPPORTED : E_NOSTREAM;
  else
    err = fake_enqueue(s, (op){OP_FREE, p, NULL, 0});
  pthread_mutex_unlock(&fake_mu);
  return err;
}

EXPORT int FN(DeviceSynchronize)(void) {
  int err;
  pthread_mutex_lock(&fake_mu);
  err = fake_unsafe_call();
  if (err == OK)
    fake_run_all();
  pthread_mutex_unlock(&fake_mu);
  return err;
}
