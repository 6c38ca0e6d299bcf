/* core.h -- what every internal file shares: errors, locks, small helpers.
 *
 * Naming: public names are hippo_*, HIPPO_*; internal names shared across
 * files are hippo__*; file-local ones are static.
 */
#ifndef HIPPO_CORE_H
#define HIPPO_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hippo.h"

#if defined(__GNUC__)
#define HIPPO__PRINTF(f, a) __attribute__((format(printf, f, a)))
#define HIPPO__LIKELY(x) __builtin_expect(!!(x), 1)
#define HIPPO__UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define HIPPO__PRINTF(f, a)
#define HIPPO__LIKELY(x) (x)
#define HIPPO__UNLIKELY(x) (x)
#endif

/* ---- errors (error.c) ---------------------------------------------------
 * last_error is thread-local: each thread sees the message of its own last
 * failure.  hippo__error_set keeps the message and returns `status`, so a
 * failure path reads `return hippo__error_set(HIPPO_X, "...", ...);`.
 *
 * Messages are formatted only when last_error() is read: a failure keeps
 * its format (a string literal) and its arguments (numbers, and copies of
 * the strings), and each hippo__error_wrap adds a frame on top.  A caller
 * that meets a full pool a million times pays for no printf.  Conversions
 * kept lazily: d i u x X o c s p with the hh h l ll z j t lengths, flags,
 * widths and precisions written in the format; anything else (a '*', a
 * float) is formatted at once. */
hippo_status hippo__error_set(hippo_status status, const char *fmt, ...)
    HIPPO__PRINTF(2, 3);
/* Prefix the current message with `fmt` (context added on the way up). */
hippo_status hippo__error_wrap(hippo_status status, const char *fmt, ...)
    HIPPO__PRINTF(2, 3);
/* The same with arguments already in an array: `fmt`'s only conversions
 * are %llu, up to HIPPO__LAZY_ARGS of them. */
#define HIPPO__LAZY_ARGS 8u
hippo_status hippo__error_lazy(hippo_status status, const char *fmt,
                               const uint64_t *args, unsigned n);
hippo_status hippo__error_lazy_wrap(hippo_status status, const char *fmt,
                                    const uint64_t *args, unsigned n);
void hippo__error_clear(void);
const char *hippo__error_get(void);
/* A question asked on the way (may pages be freed?) must not replace the
 * message of the failure the call reports: keep it, ask, restore it.
 * Keeping copies the unformatted frames, not a formatted text. */
#define HIPPO__ERROR_MAX 1024
#define HIPPO__ERROR_FRAMES 8
#define HIPPO__ERROR_VALS 16
#define HIPPO__ERROR_ARENA 4096 /* copied strings, each cut to ERROR_MAX */
typedef struct hippo__error_frame {
  const char *fmt;  /* NULL: the text at arena offset vals[0] */
  uint32_t nvals;
  uint64_t vals[HIPPO__ERROR_VALS]; /* by conversion; %s: arena offset */
} hippo__error_frame;
/* Invariant: frames[0] is the innermost message, frames[i] prefixes the
 * ones below it; arena[0] is '\0' and arena[1..used) holds the copied
 * strings, each NUL-terminated. */
typedef struct hippo__error_kept {
  uint32_t nframes, used;
  hippo__error_frame frames[HIPPO__ERROR_FRAMES];
  char arena[HIPPO__ERROR_ARENA];
} hippo__error_kept;
void hippo__error_keep(hippo__error_kept *kept);
void hippo__error_restore(const hippo__error_kept *kept);
const char *hippo__status_string(hippo_status status);
const char *hippo__status_name(hippo_status status);

/* ---- locks --------------------------------------------------------------
 * hippo__lock is a stream's lock, the one the reserve/release fast path
 * takes: one atomic exchange to take it uncontended, a release store and a
 * relaxed load to drop it.  A waiter spins briefly, then sleeps in the
 * kernel (a futex on Linux) until the holder drops it, so no thread burns
 * a CPU while the holder waits on the device.  A wake-up can be missed in
 * a narrow race (the holder's load of `sleepers` may pass its store); the
 * sleep is bounded (HIPPO__LOCK_NAP_NS) and the waiter then tries again.
 * hippo__mutex is a pthread mutex: the device's locks (device.h). */
typedef struct hippo__lock {
  atomic_int held;        /* 1 while taken (a futex word) */
  atomic_uint sleepers;   /* waiters asleep or about to sleep */
} hippo__lock;

#define HIPPO__LOCK_NAP_NS 200000L /* at most this long asleep at once */

void hippo__lock_slow(hippo__lock *lock);
void hippo__lock_wake(hippo__lock *lock);

static inline void hippo__lock_init(hippo__lock *lock) {
  atomic_init(&lock->held, 0);
  atomic_init(&lock->sleepers, 0);
}
/* The first try of hippo__lock_take: true when the lock was free and is
 * held now; false: the caller goes on with hippo__lock_slow. */
static inline bool hippo__lock_first(hippo__lock *lock) {
  return !atomic_exchange_explicit(&lock->held, 1, memory_order_acquire);
}
static inline void hippo__lock_take(hippo__lock *lock) {
  if (HIPPO__LIKELY(hippo__lock_first(lock)))
    return;
  hippo__lock_slow(lock);
}
/* Take the lock only if it is free now; true when taken. */
static inline bool hippo__lock_try(hippo__lock *lock) {
  return !atomic_load_explicit(&lock->held, memory_order_relaxed) &&
         !atomic_exchange_explicit(&lock->held, 1, memory_order_acquire);
}
static inline void hippo__lock_drop(hippo__lock *lock) {
  atomic_store_explicit(&lock->held, 0, memory_order_release);
  if (HIPPO__UNLIKELY(atomic_load_explicit(&lock->sleepers,
                                           memory_order_relaxed)))
    hippo__lock_wake(lock);
}

typedef struct hippo__mutex {
  pthread_mutex_t m;
} hippo__mutex;
static inline void hippo__mutex_init(hippo__mutex *mu) {
  pthread_mutex_init(&mu->m, NULL);
}
static inline void hippo__mutex_fini(hippo__mutex *mu) {
  pthread_mutex_destroy(&mu->m);
}
static inline void hippo__mutex_take(hippo__mutex *mu) {
  pthread_mutex_lock(&mu->m);
}
static inline void hippo__mutex_drop(hippo__mutex *mu) {
  pthread_mutex_unlock(&mu->m);
}

/* ---- arithmetic ---------------------------------------------------------*/
static inline bool hippo__is_pow2(uint64_t x) {
  return x != 0 && (x & (x - 1)) == 0;
}
/* Round up to a power-of-two alignment; false on overflow. */
static inline bool hippo__align_up(uint64_t x, uint64_t align, uint64_t *out) {
  if (x > UINT64_MAX - (align - 1))
    return false;
  *out = (x + align - 1) & ~(align - 1);
  return true;
}
static inline uint64_t hippo__align_down(uint64_t x, uint64_t align) {
  return x & ~(align - 1);
}
static inline unsigned hippo__log2_floor(uint64_t x) { /* x != 0 */
  return 63u - (unsigned)__builtin_clzll(x);
}

/* ---- host arrays ------------------------------------------------------
 * Grow an array of records to new_bytes, 64-byte aligned so that records
 * of 32 or 64 bytes never straddle a cache line; the first old_bytes are
 * kept.  NULL on failure, the old array untouched. */
static inline void *hippo__grow_aligned(void *old, size_t old_bytes,
                                        size_t new_bytes) {
  void *grown = aligned_alloc(64, (new_bytes + 63) & ~(size_t)63);
  if (!grown)
    return NULL;
  if (old_bytes)
    memcpy(grown, old, old_bytes);
  free(old);
  return grown;
}

/* ---- ABI structs --------------------------------------------------------
 * Copy a caller's struct (whose first field is its uint32_t size) into a
 * zeroed local of the plugin's size.  Smaller callers get zero defaults;
 * larger callers must have zeros beyond what the plugin knows.  Returns
 * HIPPO_INVALID_ARGUMENT (with last_error naming `what`) otherwise. */
#define HIPPO__STRUCT_MAX 65536u /* the largest struct_size accepted */
hippo_status hippo__struct_in(const void *src, void *dst, size_t dst_size,
                              size_t min_size, const char *what);
/* Check an output struct's size field (at least min_size) and fill it from
 * `src` (of src_size bytes) up to the smaller size; a larger caller's
 * bytes past src_size are zeroed and its size field becomes src_size (so
 * HIPPO_HAS tells what the plugin filled), a smaller one's is kept. */
hippo_status hippo__struct_out(void *dst, const void *src, size_t src_size,
                               size_t min_size, const char *what);
/* Whether hippo__struct_out would accept `dst` (before work that a bad
 * output struct should not let happen). */
hippo_status hippo__struct_out_ok(const void *dst, size_t min_size,
                                  const char *what);

#endif /* HIPPO_CORE_H */
