/* lock.c -- the slow path of hippo__lock (core.h): a short spin, then yield.
 *
 * Taken only when the lock was held at the first try.  Spinning on a plain
 * load keeps the cache line shared until the holder drops it; after a bounded
 * spin the waiter yields, so a holder preempted mid-section gets the CPU.
 */
#include <sched.h>

#include "core.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HIPPO__CPU_RELAX() _mm_pause()
#else
#define HIPPO__CPU_RELAX() ((void)0)
#endif

void hippo__lock_slow(hippo__lock *lock) {
  for (unsigned spins = 0;; spins++) {
    if (!atomic_load_explicit(&lock->held, memory_order_relaxed) &&
        !atomic_exchange_explicit(&lock->held, true, memory_order_acquire))
      return;
    if (spins < 64)
      HIPPO__CPU_RELAX();
    else
      sched_yield();
  }
}
