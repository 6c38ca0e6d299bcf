/* hippo-bench-devices.c -- the devices of hippo-bench's workloads A, B and
 * E: a DRY device with one attached emulated stream (hb_dev_open,
 * hb_dev_close), the one-SLICED-pool layout of A and B, the check walk
 * (every workload that can), and the untimed end of a repetition of A or
 * B, where the plugin's figures must match what the bench counted
 * (hb_dev_finish).
 */
#include "hippo.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "benchutil.h"
#include "hippo-bench.h"
#include "toolutil.h"

void hb_dev_open(bench_dev *b, uint64_t capacity, const hippo_layout *layout) {
  hippo_device_desc desc;
  memset(&desc, 0, sizeof desc);
  desc.struct_size = sizeof desc;
  desc.backend = HIPPO_BACKEND_DRY;
  desc.capacity = capacity;
  desc.alignment = A_ALIGN;
  desc.layout = layout;
  CHECK(hb_api->device_open(&desc, &b->dev), "device_open (DRY)");
  CHECK(tool_emu(hb_api)->stream_create(b->dev, &b->native),
        "emu_stream_create");
  CHECK(hb_api->stream_attach(b->dev, b->native, &b->stream), "stream_attach");
}

void hb_dev_close(bench_dev *b) {
  CHECK(hb_api->stream_detach(b->stream), "stream_detach");
  CHECK(tool_emu(hb_api)->stream_destroy(b->dev, b->native),
        "emu_stream_destroy");
  CHECK(hb_api->device_close(b->dev), "device_close");
  memset(b, 0, sizeof *b);
}

/* A custom layout of one SLICED pool (max_pool_size 0: no cap); `layout`
 * points at `pool`. */
void hb_one_sliced_pool(hippo_pool_options *pool, hippo_layout *layout,
                        uint64_t page_size, uint64_t max_slice_size,
                        uint64_t max_pool_size) {
  memset(pool, 0, sizeof *pool);
  pool->struct_size = sizeof *pool;
  pool->kind = HIPPO_POOL_SLICED;
  pool->page_size = page_size;
  pool->max_slice_size = max_slice_size;
  pool->max_pool_size = max_pool_size;
  memset(layout, 0, sizeof *layout);
  layout->struct_size = sizeof *layout;
  layout->preset = HIPPO_PRESET_CUSTOM;
  layout->pool_count = 1;
  layout->pool_options_size = sizeof *pool;
  layout->pools = pool;
}

/* Verify the device's invariants (a plugin may not implement check yet). */
void hb_dev_check(hippo_device *dev, const char *what) {
  hippo_status st = hb_api->check(dev);
  if (st != HIPPO_SUCCESS && st != HIPPO_UNSUPPORTED)
    hb_die_status(st, what);
}

/* The figures the plugin keeps must agree with what the bench counted. */
static void expect_usage(hippo_device *dev, hippo_stream *s, uint64_t live,
                         uint64_t bytes, const char *what) {
  hippo_usage u;
  memset(&u, 0, sizeof u);
  u.struct_size = sizeof u;
  CHECK(hb_api->usage(dev, s, &u), "usage");
  if (u.allocations != live || u.bytes_in_use != bytes)
    bench_fatal("%s: usage says %llu live, %llu bytes in use; the bench counted "
          "%llu live, %llu bytes",
          what, (unsigned long long)u.allocations,
          (unsigned long long)u.bytes_in_use, (unsigned long long)live,
          (unsigned long long)bytes);
}

/* The untimed end of a repetition of A or B: the plugin's figures must match
 * the bench's (nlive reservations in live[], live_bytes bytes), the check
 * must pass (when `check`), then everything is released and the device
 * closed.  `workload` ("A", "B") prefixes the messages. */
void hb_dev_finish(bench_dev *b, const live_res *live, uint64_t nlive,
                   uint64_t live_bytes, int check, const char *workload) {
  char what[32];

  expect_usage(b->dev, b->stream, nlive, live_bytes, workload);
  if (check) {
    snprintf(what, sizeof what, "%s: check", workload);
    hb_dev_check(b->dev, what);
  }
  snprintf(what, sizeof what, "%s: release (teardown)", workload);
  for (uint64_t i = 0; i < nlive; i++)
    CHECK(hb_api->release(b->stream, live[i].h), what);
  hb_dev_close(b);
}
