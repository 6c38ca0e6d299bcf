/* emutest.h -- helpers shared by the tests of the emulated backends
 * and pools (test-backend-host.c, test-backend-dry.c, test-pools.c), which
 * drive a hippo__backend directly through its function table.
 *
 *  OK(expr)                 expr returns HIPPO_SUCCESS
 *  FAILS(expr, st, text)    expr fails with `st` and last_error contains
 *                           `text`
 *  emutest_new()            a backend from a constructor of backend.h,
 *                           checked to be of the expected kind
 *  page_new()               a page from page_alloc (never address 0)
 *  counters_of()            the backend's hippo_emu_counters
 *  tu_run() (testutil.h)    runs a suite; main's exit status
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
#include "testutil.h"

#define KiB UINT64_C(1024)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)
#define TiB (UINT64_C(1) << 40)

#define OK(expr) ck_assert_int_eq((expr), HIPPO_SUCCESS)
/* expr fails with `st` and last_error contains `text`. */
#define FAILS(expr, st, text)                                                  \
  do {                                                                         \
    ck_assert_int_eq((expr), (st));                                            \
    ck_assert_msg(strstr(hippo__error_get(), (text)) != NULL,                  \
                  "last_error \"%s\" does not contain \"%s\"",                 \
                  hippo__error_get(), (text));                                 \
  } while (0)

typedef hippo_status (*emutest_create_fn)(uint64_t capacity,
                                          uint64_t alignment,
                                          hippo__backend **out);

static inline hippo__backend *emutest_new(emutest_create_fn create,
                                          hippo_backend kind,
                                          uint64_t capacity,
                                          uint64_t alignment) {
  hippo__backend *be = NULL;
  OK(create(capacity, alignment, &be));
  ck_assert_ptr_nonnull(be);
  ck_assert_uint_eq(be->kind, kind);
  return be;
}

static inline uint64_t page_new(hippo__backend *be, uint64_t size) {
  uint64_t addr = 0;
  OK(be->ops->page_alloc(be, size, &addr));
  ck_assert_uint_ne(addr, 0);
  return addr;
}

static inline hippo_emu_counters counters_of(hippo__backend *be) {
  hippo_emu_counters c;
  TU_SIZED(c);
  OK(be->ops->emu_counters(be, &c));
  return c;
}

#endif /* HIPPO_EMUTEST_H */
