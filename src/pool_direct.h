/* pool_direct.h -- what pool_direct.c shares with pool_persistent.c: the
 * one constructor behind both kinds (a persistent pool is a DIRECT pool
 * without reclaim or periodic deallocation that reports its own kind). */
#ifndef HIPPO_POOL_DIRECT_H
#define HIPPO_POOL_DIRECT_H

#include "pool.h"

/* kind: HIPPO_POOL_DIRECT or HIPPO_POOL_PERSISTENT.  opt may be NULL (all
 * options zero: no watermark, never deallocate periodically). */
hippo_status hippo__pool_direct_create_kind(hippo__backend *be,
                                            hippo__page_acct *acct,
                                            const hippo_pool_options *opt,
                                            hippo_pool_kind kind,
                                            hippo__pool **out);

#endif /* HIPPO_POOL_DIRECT_H */
