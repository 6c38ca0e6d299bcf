/* benchutil.h -- helpers both benchmarks use (hippo-bench, hippo-gpu-bench):
 * fatal errors, host memory that cannot fail quietly, the clock, medians,
 * the seeding generator and the machine's processor name.  Each program defines bench_prog, the name
 * its messages start with. */
#ifndef HIPPO_BENCHUTIL_H
#define HIPPO_BENCHUTIL_H

#include <stddef.h>
#include <stdint.h>

extern const char *const bench_prog;

/* "PROG: message" on stderr (stdout flushed first), then exit 1. */
void bench_fatal(const char *fmt, ...)
    __attribute__((noreturn, format(printf, 1, 2)));
/* malloc / calloc, or bench_fatal (a size of 0 asks for 1 byte). */
void *bench_xmalloc(size_t n);
void *bench_xcalloc(size_t n, size_t size);
/* CLOCK_MONOTONIC in nanoseconds. */
double bench_now_ns(void);
/* Median of n values, sorting them in place; 0 for none. */
double bench_median(double *v, size_t n);
/* Smallest of n values; 0 for none. */
double bench_minimum(const double *v, size_t n);
/* splitmix64: the next value of the sequence *x steps through. */
uint64_t bench_splitmix64(uint64_t *x);
/* The processor's name from /proc/cpuinfo (x86 "model name", the keys
 * other architectures use), or "unknown". */
void bench_cpu_model(char *buf, size_t n);

#endif /* HIPPO_BENCHUTIL_H */
