/* emutest.h -- helpers shared by the tests of the emulated backends
 * and pools (test-backend-host.c, test-backend-dry.c, test-pools.c), which
 * drive a hippo__backend directly through its function table.
 *
 *  emutest_new()            a backend from a constructor of backend.h,
 *                           checked to be of the expected kind
 *  page_new()               a page from page_alloc (never address 0)
 *  counters_of()            the backend's hippo_emu_counters
 *  tu_run() (testutil.h)    runs a suite; main's exit status
 *
 * It defines TU_CORE before including testutil.h: the core's status
 * assertions (CK_CORE_OK, CK_CORE_FAILS, ...) are testutil.h's.
 *
 * Everything is `static inline`: a test pays only for what it uses.
 */
#ifndef HIPPO_EMUTEST_H
#define HIPPO_EMUTEST_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "core.h"
#ifndef TU_CORE
#define TU_CORE 1
#endif
#include "testutil.h"

#define KiB TU_KiB
#define MiB TU_MiB
#define GiB TU_GiB
#define TiB TU_TiB

typedef hippo_status (*emutest_create_fn)(uint64_t capacity,
                                          uint64_t alignment,
                                          hippo__backend **out);

static inline hippo__backend *emutest_new(emutest_create_fn create,
                                          hippo_backend kind,
                                          uint64_t capacity,
                                          uint64_t alignment) {
  hippo__backend *be = NULL;
  CK_CORE_OK(create(capacity, alignment, &be));
  ck_assert_ptr_nonnull(be);
  ck_assert_uint_eq(be->kind, kind);
  return be;
}

static inline uint64_t page_new(hippo__backend *be, uint64_t size) {
  uint64_t addr = 0;
  CK_CORE_OK(be->ops->page_alloc(be, size, &addr));
  ck_assert_uint_ne(addr, 0);
  return addr;
}

static inline hippo_emu_counters counters_of(hippo__backend *be) {
  hippo_emu_counters c;
  TU_SIZED(c);
  CK_CORE_OK(be->ops->emu_counters(be, &c));
  return c;
}

#endif /* HIPPO_EMUTEST_H */
