/* ladder.h -- the out-of-memory ladder and AUTO_RELOCATE (ladder.c): the
 * hooks a device hands its streams' managers (manager.h). */
#ifndef HIPPO_LADDER_H
#define HIPPO_LADDER_H

#include "device.h"
#include "manager.h"

extern const hippo__stream_hooks hippo__ladder_hooks;

#endif /* HIPPO_LADDER_H */
