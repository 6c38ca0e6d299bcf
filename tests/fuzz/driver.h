/* driver.h -- the fuzz driver: decodes a byte string into ABI calls on a
 * HOST device and checks, after every call, that hippo and the reference
 * model (model.h) agree.
 *
 * One input is one device's life.  Its first bytes choose the device
 * (capacity, alignment, layout, flags); then each operation takes an
 * opcode byte and its arguments.  An input that ends mid-operation ends
 * there (missing bytes read as 0).  After the last operation the driver
 * ends every capture, retires every graph, detaches every stream, checks
 * that every page went back to the backend (after a cleanup of every
 * stream where a page a graph had retained failed to go earlier, with no
 * stream left to detach) and closes the device.
 *
 * After every operation:
 *  - the call's status is one the model allows (model.h), widened only by
 *    the status of a fault the emulated backend really injected during it
 *    (its call counters say so);
 *  - api->check() passes;
 *  - every stream's allocations and bytes_in_use equal the model's, its
 *    peak_bytes_in_use the model's peak, the device's sum the total; the
 *    pools' reports add up to the stream's bytes;
 *  - every live reservation resolves to its size; a guarded one (a graph,
 *    or another stream's use) has not moved; no two live ranges overlap;
 *    no new reservation overlaps released bytes a graph still guards;
 *  - its bytes hold its pattern: three 32-byte windows (start, middle,
 *    end) after every operation, every byte when it moved, after an
 *    operation that injected a fault or relocated, and every 256th
 *    operation;
 *  - the graph holds (usage.slices_guarded) equal the model's.
 * Faults armed but not yet fired are set aside while the driver checks, so
 * they fire only inside the operations.
 *
 * Cross-stream work: a reservation can be born the "twin" of another (same
 * pattern seed), and a stream that record_use'd two twins gets a queued
 * emulated copy between them.  The copy changes no byte while both live;
 * if hippo reused either before the stream's work ran, the copy writes a
 * pattern where another reservation lives, and the checks see it.
 */
#ifndef HIPPO_FUZZ_DRIVER_H
#define HIPPO_FUZZ_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "hippo.h"

enum hfz_op {
  HFZ_OP_RESERVE,
  HFZ_OP_RELEASE,
  HFZ_OP_RESOLVE,
  HFZ_OP_ATTACH,
  HFZ_OP_DETACH,
  HFZ_OP_RECORD_USE,
  HFZ_OP_SYNC,
  HFZ_OP_PERSISTENT,
  HFZ_OP_INSTALL,
  HFZ_OP_RELOCATE,
  HFZ_OP_CAPTURE,
  HFZ_OP_RETIRE,
  HFZ_OP_FAULT,
  HFZ_OP_ANNOUNCE,
  HFZ_OP_FIGURES,
  HFZ_OP_DEAD,
  HFZ_OPS
};

typedef struct hfz_stats {
  uint64_t inputs;        /* device lives */
  uint64_t ops;           /* operations decoded and run */
  uint64_t calls;         /* ABI calls made (operations and checks) */
  uint64_t by_op[HFZ_OPS];
  uint64_t failed_calls;  /* operation calls that answered a failure */
  uint64_t faults_armed, faults_fired;
  uint64_t bytes_checked; /* pattern bytes read back */
  uint64_t slices_moved;  /* by relocations (usage) */
  uint64_t captures;
  uint64_t granules_mapped; /* VIRTUAL pools' vm_map calls (teardowns) */
} hfz_stats;

/* Runs one input; 0, or -1 with a message in `why` (the operation, the
 * call, what was expected and what came back). */
int hfz_run(const hippo_api *api, const uint8_t *data, size_t size,
            hfz_stats *stats, char *why, size_t len);

const char *hfz_op_name(enum hfz_op op);

#endif /* HIPPO_FUZZ_DRIVER_H */
