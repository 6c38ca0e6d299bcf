/* hippo-bench.h -- what the files of hippo-bench share (private to it):
 * the sizes and targets of the workloads, the plugin's table (hb_api,
 * another build's while workload V runs it), CHECK, the bench's own
 * records of live reservations and devices, the options, and the
 * functions the files give each other, prefixed hb_.  The files:
 *   hippo-bench.c          the workloads described, the options, the
 *                          summary table, main
 *   hippo-bench-devices.c  the DRY devices of A, B and E, the check walk
 *   hippo-bench-speed.c    A, V, A's presets, B, E; the generator
 *   hippo-bench-traces.c   C and F
 *   hippo-bench-host.c     R and W
 */
#ifndef HIPPO_BENCH_H
#define HIPPO_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "hippo.h"

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

#define A_SPACE (4 * GiB)
#define A_CAPACITY (8 * GiB)
#define A_ALIGN 256u
#define A_MAX_SIZE (64 * MiB)
#define A_TARGET_NS 35.0

#define B_PAGE (4 * GiB)
#define B_CAPACITY (16 * GiB)
#define B_MAX_SIZE (64 * KiB)
#define B_TARGET_RATIO 1.3

#define C_CAPACITY (16 * GiB)

#define CHECK(call, what)                                                      \
  do {                                                                         \
    hippo_status check_st_ = (call);                                           \
    if (check_st_ != HIPPO_SUCCESS)                                            \
      hb_die_status(check_st_, (what));                                        \
  } while (0)

/* A live reservation as the bench tracks it: handle and size side by side,
 * so a random pick costs one cache line of the bench's own. */
typedef struct live_res {
  hippo_handle h;
  uint64_t size;
} live_res;

/* The plugin's reserve and release, read from the table once per loop. */
typedef hippo_status (*reserve_fn)(hippo_stream *, uint64_t, hippo_mode,
                                   hippo_handle *);
typedef hippo_status (*release_fn)(hippo_stream *, hippo_handle);

typedef struct bench_dev {
  hippo_device *dev;
  void *native;
  hippo_stream *stream;
} bench_dev;

typedef struct options {
  const char *plugin;
  const char *trace;
  unsigned reps;
  uint64_t ops;
  int run_a, run_b, run_c, run_r, run_f, run_e, run_v, run_w;
  const char *versus;
  const char *footprint[16];
  int nfootprint;
  int quick;
  int reps_set, ops_set;
} options;

/* hippo-bench.c */
extern const hippo_api *hb_api;
void hb_die_status(hippo_status st, const char *what) __attribute__((noreturn));
const char *hb_verdict(char *buf, size_t n, double value, double target,
                       int at_most, int digits);
void hb_add_row(const char *workload, const char *what, const char *figure,
                const char *target);

/* hippo-bench-devices.c */
void hb_dev_open(bench_dev *b, uint64_t capacity, const hippo_layout *layout);
void hb_dev_close(bench_dev *b);
void hb_one_sliced_pool(hippo_pool_options *pool, hippo_layout *layout,
                        uint64_t page_size, uint64_t max_slice_size,
                        uint64_t max_pool_size);
void hb_dev_check(hippo_device *dev, const char *what);
void hb_dev_finish(bench_dev *b, const live_res *live, uint64_t nlive,
                   uint64_t live_bytes, int check, const char *workload);

/* the workloads: hippo-bench-speed.c */
void hb_workload_a(const options *o);
void hb_workload_a_presets(const options *o);
void hb_workload_v(const options *o, const hippo_api *other);
void hb_workload_b(const options *o);
void hb_workload_e(const options *o);
/* hippo-bench-traces.c */
void hb_workload_c(const options *o);
void hb_workload_f(const options *o);
/* hippo-bench-host.c */
void hb_workload_r(const options *o);
void hb_workload_w(const options *o);

#endif /* HIPPO_BENCH_H */
