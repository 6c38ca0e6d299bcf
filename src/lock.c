/* lock.c -- the slow path of hippo__lock (core.h): a short spin, then sleep.
 *
 * Taken only when the lock was held at the first try.  Spinning on a plain
 * load keeps the cache line shared until the holder drops it (most critical
 * sections are a few hundred instructions); after a bounded spin the waiter
 * sleeps on the lock word (futex on Linux; elsewhere it yields), woken by
 * the holder's drop or after HIPPO__LOCK_NAP_NS, whichever comes first.
 */
#include <sched.h>
#include <time.h>

#include "core.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HIPPO__CPU_RELAX() _mm_pause()
#else
#define HIPPO__CPU_RELAX() ((void)0)
#endif

#define SPINS 64

static bool try_take(hippo__lock *lock) {
  return !atomic_load_explicit(&lock->held, memory_order_relaxed) &&
         !atomic_exchange_explicit(&lock->held, 1, memory_order_acquire);
}

/* Sleep while the lock word still reads 1, at most a nap. */
static void nap(hippo__lock *lock) {
#if defined(__linux__)
  struct timespec t = {0, HIPPO__LOCK_NAP_NS};
  (void)syscall(SYS_futex, (int *)&lock->held, FUTEX_WAIT_PRIVATE, 1, &t,
                NULL, 0);
#else
  (void)lock;
  sched_yield();
#endif
}

void hippo__lock_slow(hippo__lock *lock) {
  for (unsigned spins = 0; spins < SPINS; spins++) {
    if (try_take(lock))
      return;
    HIPPO__CPU_RELAX();
  }
  for (;;) {
    atomic_fetch_add_explicit(&lock->sleepers, 1, memory_order_seq_cst);
    if (!atomic_exchange_explicit(&lock->held, 1, memory_order_acquire)) {
      atomic_fetch_sub_explicit(&lock->sleepers, 1, memory_order_relaxed);
      return;
    }
    nap(lock);
    atomic_fetch_sub_explicit(&lock->sleepers, 1, memory_order_relaxed);
    if (try_take(lock))
      return;
  }
}

void hippo__lock_wake(hippo__lock *lock) {
#if defined(__linux__)
  (void)syscall(SYS_futex, (int *)&lock->held, FUTEX_WAKE_PRIVATE, 1, NULL,
                NULL, 0);
#else
  (void)lock;
#endif
}
