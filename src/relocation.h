/* relocation.h -- moving live slices off outdated pages (relocation.c).
 *
 * A growth leaves an ARENA pool's older pages *outdated*: they serve no new
 * reservation and drain as their slices are released.  Relocation empties
 * them now: it moves each of their live slices onto current pages with a
 * device-to-device copy, so the same handle resolves to the new address,
 * then gives the emptied pages back.  It is also hippo's answer to sparse
 * current pages (reason SPARSE).
 *
 * Need (relocation_need, O(1) per movable pool, no driver call), in order:
 *   1. nothing outdated and not sparse, or the pool's shape equals its
 *      stall memo (a relocation moved nothing and nothing changed since)
 *      -> NOTHING;
 *   2. every page-size slot taken -> ARENA_FULL;
 *   3. outdated pages, and the bytes every stream holds (the device's
 *      reserved bytes) plus the next page P exceed the device's memory
 *      minus P: the next page would leave less than another page of room,
 *      the last moment a relocation still has somewhere to copy to ->
 *      PRESSURE (24 MiB device, 4 MiB pages: 10 MiB held wants nothing,
 *      17 MiB wants a relocation);
 *   4. the pool noted that it took a page while sparse -> SPARSE;
 *   5. else NOTHING.
 * Reasons and where moved slices may go: EXPLICIT, PRESSURE and SPARSE
 * only into room current pages already hold; ARENA_FULL and CAPTURE may add
 * pages of the current size.  EXPLICIT, PRESSURE, ARENA_FULL and CAPTURE
 * empty outdated pages; SPARSE also the sparsest current pages.
 *
 * The protocol, for one stream or every stream of the device (the caller
 * holds their locks):
 *   1. skip while any stream of the device captures (nothing may move: a
 *      graph may have baked the addresses in), and where nothing is
 *      outdated (or, for WANTED, nothing is needed);
 *   2. plan every movable pool: pages cheapest first, all or nothing per
 *      page, destinations reserved (pool.h);
 *   3. an empty plan ends here, with no device wait, and records the stall
 *      memo;
 *   4. every attached stream's queued work finishes (the backend's
 *      stream_sync on each native): any stream may use the memory that
 *      moves;
 *   5. the copies are queued on the relocating stream, in plan order,
 *      stopping at the first refusal, and always waited for (so no
 *      destination is freed while a copy may still write it);
 *   6. a plan whose copies all landed is committed (handles resolve to the
 *      destinations, sources are freed), and the emptied pages go back;
 *      a refused copy drops the plan (destinations freed, sources intact);
 *      a failed wait keeps both (the destinations stranded until a later
 *      wait on the stream succeeds: their completion is unknown).
 * Failures are collected, never raised at the first one: the call returns
 * the first failure's status once everything else was done, and the
 * report names each (stream, step, status, slices, bytes).
 */
#ifndef HIPPO_RELOCATION_H
#define HIPPO_RELOCATION_H

#include "device.h"
#include "manager.h"

/* What the stream's memory wants (its lock held; reads the device's
 * reserved bytes, an atomic). */
hippo_relocation_need hippo__relocation_need_locked(const hippo_stream *s);

/* Whether a relocation could change anything for a reservation that
 * found no room: outdated pages, and not the shape a relocation last moved
 * nothing from (the stall memo), so a full device does not plan the same
 * pages at every failed reservation (O(1) per movable pool). */
bool hippo__relocation_may_help_locked(const hippo_stream *s);

/* Relocate the memory of stream `s` (its lock held) for `reason`
 * (HIPPO_RELOCATE_WANTED: only on a need).  report may be NULL. */
hippo_status hippo__relocate_locked(hippo_stream *s,
                                    hippo_relocate_reason reason,
                                    hippo_relocation_report *report);


/* The ABI's calls: `s` NULL means every stream of the device.  They take
 * the locks (device.h states the order).  `call` names the ABI call in
 * messages. */
hippo_status hippo__relocate(hippo_device *dev, hippo_stream *s,
                             hippo_relocate_reason reason,
                             hippo_relocation_report *report,
                             const char *call);
hippo_status hippo__reclaim(hippo_device *dev, hippo_stream *s);
hippo_status hippo__relocation_report(hippo_device *dev, hippo_stream *s,
                                      hippo_relocation_report *out);
hippo_status hippo__relocation_need(hippo_stream *s,
                                    hippo_relocation_need *need);
/* Failure `index` of the last report of `s` (NULL: the device's). */
hippo_status hippo__relocation_failure(hippo_device *dev, hippo_stream *s,
                                       uint32_t index,
                                       hippo_relocation_failure *out);
/* Frees a failure list. */
void hippo__failures_free(hippo__failures *f);

#endif /* HIPPO_RELOCATION_H */
