/* handles.c -- the generation-tagged handle table (see handles.h). */
#include <stdlib.h>

#include "handles.h"

#define GEN_MASK HIPPO__HANDLE_GEN_MASK
#define TAG_MASK ((UINT32_C(1) << HIPPO__HANDLE_TAG_BITS) - 1)
#define NO_SLOT UINT32_MAX

/* Tags in use by live tables, one bit each, process-wide: two live tables
 * never share a tag, so a handle of another stream or device always fails
 * the tag check.  Tag 0 is never given out.  A rotating start spreads
 * reuse of a freed tag. */
#define TAG_WORDS ((1u << HIPPO__HANDLE_TAG_BITS) / 64u)
static _Atomic uint64_t tags_in_use[TAG_WORDS];
static atomic_uint tag_cursor;
/* Tables and pools made so far: spreads the generations fresh records
 * start at. */
static atomic_uint gens_made;
#define RETIRED (NO_SLOT - 1)

/* Two copies of the plugin loaded in one process (two paths, two
 * dlopens) have their own counters, at different addresses: starting them
 * apart by their address makes a handle of one copy meet a live record of
 * the other only by chance (tag and generation both matching). */
static unsigned copy_seed(void) {
  uint64_t a = (uint64_t)(uintptr_t)&tag_cursor;
  return (unsigned)(a ^ (a >> 16) ^ (a >> 32)) * 2654435761u;
}

uint32_t hippo__gen_first(void) {
  unsigned made = atomic_fetch_add(&gens_made, 1) + copy_seed();
  /* a multiplicative hash spreads consecutive ones over 1 .. 2^20-1 */
  return (uint32_t)((made * 2654435761u) % GEN_MASK) + 1;
}

hippo_status hippo__handles_init(hippo__handles *h) {
  unsigned start = atomic_fetch_add(&tag_cursor, 1) + copy_seed();
  h->slots = NULL;
  h->retired = 0;
  h->first_gen = hippo__gen_first();
  h->count = 0;
  h->cap = 0;
  h->free_head = NO_SLOT;
  h->live = 0;
  for (unsigned n = 0; n < (1u << HIPPO__HANDLE_TAG_BITS); n++) {
    unsigned tag = (start + n) & TAG_MASK;
    uint64_t bit = UINT64_C(1) << (tag % 64);
    if (tag == 0) /* never: small forged numbers would look like handles */
      continue;
    if (!(atomic_fetch_or(&tags_in_use[tag / 64], bit) & bit)) {
      h->tag = tag;
      return HIPPO_SUCCESS;
    }
  }
  return hippo__error_set(HIPPO_BUSY,
                          "stream_attach: %u streams are attached in this "
                          "process, the most "
                          "hippo tells apart; detach some",
                          (1u << HIPPO__HANDLE_TAG_BITS) - 1);
}

void hippo__handles_fini(hippo__handles *h) {
  atomic_fetch_and(&tags_in_use[h->tag / 64], ~(UINT64_C(1) << (h->tag % 64)));
  free(h->slots);
  h->slots = NULL;
  h->count = h->cap = 0;
  h->free_head = NO_SLOT;
  h->live = 0;
}

hippo_status hippo__handles_grow(hippo__handles *h) {
  uint32_t cap;
  hippo__slot *grown;
  if (h->cap >= HIPPO__HANDLE_MAX_SLOTS)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "handle table full: %u slots on this stream; "
                            "release some reservations",
                            h->cap);
  cap = h->cap ? h->cap * 2 : 256;
  if (cap > HIPPO__HANDLE_MAX_SLOTS)
    cap = HIPPO__HANDLE_MAX_SLOTS;
  grown = hippo__grow_aligned(h->slots, (size_t)h->cap * sizeof *grown,
                              (size_t)cap * sizeof *grown);
  if (!grown)
    return hippo__error_set(HIPPO_OUT_OF_MEMORY,
                            "host memory: cannot grow the handle table to %u "
                            "slots",
                            cap);
  h->slots = grown;
  h->cap = cap;
  return HIPPO_SUCCESS;
}

hippo_status hippo__handles_alloc(hippo__handles *h, hippo_handle *handle,
                                  hippo__slot **slot) {
  uint32_t index;
  hippo__slot *s;
  hippo_status st = hippo__handles_make_room(h);
  if (st != HIPPO_SUCCESS)
    return st;
  if (h->free_head != NO_SLOT) {
    index = h->free_head;
    s = &h->slots[index];
    h->free_head = s->next_free;
  } else {
    index = h->count++;
    s = &h->slots[index];
    s->gen = h->first_gen;
  }
  s->live = 1;
  s->flags = 0;
  s->next_free = NO_SLOT;
  h->live++;
  *handle = hippo__handle_make(h->tag, HIPPO__HANDLE_TABLE, s->gen, index);
  *slot = s;
  return HIPPO_SUCCESS;
}

void hippo__handles_free(hippo__handles *h, hippo__slot *s) {
  uint32_t index = (uint32_t)(s - h->slots);
  s->live = 0;
  h->live--;
  s->gen = hippo__gen_next(s->gen, h->first_gen);
  if (s->gen == 0) {
    /* every generation of this slot was handed out: retire it, so no
     * handle it gave ever names a live reservation again */
    s->next_free = RETIRED;
    h->retired++;
    return;
  }
  s->next_free = h->free_head;
  h->free_head = index;
}

hippo_status hippo__handles_check(const hippo__handles *h) {
  uint64_t live = 0, free_count = 0, retired = 0;
  for (uint32_t i = 0; i < h->count; i++) {
    const hippo__slot *s = &h->slots[i];
    if ((s->gen == 0) != (!s->live && s->next_free == RETIRED) ||
        s->gen > GEN_MASK)
      return hippo__error_set(HIPPO_INTERNAL,
                              "handles: slot %u has generation %u", i, s->gen);
    live += s->live;
    retired += !s->live && s->next_free == RETIRED;
  }
  for (uint32_t i = h->free_head; i != NO_SLOT; i = h->slots[i].next_free) {
    if (i >= h->count || h->slots[i].live || ++free_count > h->count)
      return hippo__error_set(HIPPO_INTERNAL,
                              "handles: free list broken at slot %u", i);
  }
  if (live != h->live || retired != h->retired ||
      live + free_count + retired != h->count)
    return hippo__error_set(HIPPO_INTERNAL,
                            "handles: %llu live + %llu free + %llu retired != "
                            "%u slots (counters: %llu live, %llu retired)",
                            (unsigned long long)live,
                            (unsigned long long)free_count,
                            (unsigned long long)retired, h->count,
                            (unsigned long long)h->live,
                            (unsigned long long)h->retired);
  return HIPPO_SUCCESS;
}
