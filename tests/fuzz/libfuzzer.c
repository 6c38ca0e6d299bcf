/* libfuzzer.c -- the fuzz driver (driver.h) as a libFuzzer target.
 * Built by ./configure CC=clang --enable-fuzz; run by make fuzz.  The
 * core is linked in (plugin/entry.c gives hippo_plugin_entry), so
 * libFuzzer sees its coverage.  A disagreement with the model aborts with
 * the driver's message; libFuzzer saves the input as crash-*: replay it
 * with ./tests/fuzz/hippo-fuzz crash-... (HIPPO_FUZZ_TRACE=1 prints every
 * call). */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>

#include "driver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const hippo_api *api;
  hfz_stats stats = {0};
  char why[1024];
  if (!api) {
    uint32_t version = HIPPO_ABI_VERSION;
    if (hippo_plugin_entry(&version, &api) != HIPPO_SUCCESS) {
      fprintf(stderr, "hippo-fuzz: hippo_plugin_entry failed\n");
      abort();
    }
  }
  if (hfz_run(api, data, size, &stats, why, sizeof why) != 0) {
    fprintf(stderr, "hippo-fuzz: the model disagrees: %s\n", why);
    abort();
  }
  return 0;
}
