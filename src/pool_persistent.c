/* pool_persistent.c -- the persistent pool: exact-size pages for data that
 * lives forever (weights), used while a stream is in persistent mode.
 *
 * It is a DIRECT pool (pool_direct.c) with no reclaim watermark and no
 * periodic deallocation: one backend allocation of exactly
 * align_up(size, alignment) bytes per reservation, reused only by a later
 * reservation of the same aligned size, given back only by cleanup (or
 * destroy).  Its report says kind HIPPO_POOL_PERSISTENT with all options
 * zero.  It accepts every size the DIRECT pool does: up to the device's
 * memory (rounded down to the alignment); a larger request is
 * HIPPO_BUFFER_TOO_BIG, as in Auto mode.
 */
#include "pool_direct.h"

hippo_status hippo__pool_persistent_create(hippo__backend *be,
                                           hippo__page_acct *acct,
                                           hippo__pool **out) {
  return hippo__pool_direct_create_kind(be, acct, NULL, HIPPO_POOL_PERSISTENT,
                                        out);
}
