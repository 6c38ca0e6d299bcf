/* abi.c -- moving caller structs across the ABI, whatever their size.
 *
 * Every struct that crosses the ABI starts with uint32_t struct_size.  An
 * older caller passes a smaller struct: the fields it does not know take
 * their zero defaults.  A newer caller passes a larger one: the fields this
 * plugin does not know must be zero, since a non-zero one asks for something
 * this plugin cannot do.  A size below the v1 prefix, one that is not a
 * multiple of 8 (it would end inside a field), or one above
 * HIPPO__STRUCT_MAX (garbage) cannot be interpreted.
 */
#include <string.h>

#include "core.h"

/* Every field of every ABI struct ends on a multiple of 8 bytes from its
 * start (4-byte fields come in pairs), so a size that is not one would cut
 * a field, maybe a pointer, in half. */
static hippo_status bad_size(const char *what, uint32_t size,
                             size_t min_size) {
  return hippo__error_set(HIPPO_INVALID_ARGUMENT,
                          "%s.struct_size is %u: it must be a multiple of 8, "
                          "at least %zu and at most %u; set it to sizeof the "
                          "struct",
                          what, size, min_size, HIPPO__STRUCT_MAX);
}

/* No ABI struct will grow anywhere near this: a larger size is garbage,
 * and reading (or zeroing) that much of the caller's memory would crash. */
static bool size_ok(uint32_t size, size_t min_size) {
  return size >= min_size && size % 8 == 0 && size <= HIPPO__STRUCT_MAX;
}

hippo_status hippo__struct_in(const void *src, void *dst, size_t dst_size,
                              size_t min_size, const char *what) {
  uint32_t size;
  if (!src)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT, "%s must not be NULL",
                            what);
  memcpy(&size, src, sizeof size);
  if (!size_ok(size, min_size))
    return bad_size(what, size, min_size);
  memset(dst, 0, dst_size);
  if (size <= dst_size) {
    memcpy(dst, src, size);
  } else {
    const unsigned char *extra = (const unsigned char *)src + dst_size;
    for (size_t i = 0; i < size - dst_size; i++)
      if (extra[i] != 0)
        return hippo__error_set(
            HIPPO_INVALID_ARGUMENT,
            "%s.struct_size is %u and byte %zu is set, but this plugin knows "
            "only %zu bytes of it; leave newer fields zero or update the "
            "plugin",
            what, size, dst_size + i, dst_size);
    memcpy(dst, src, dst_size);
  }
  memcpy(dst, &(uint32_t){(uint32_t)dst_size}, sizeof(uint32_t));
  return HIPPO_SUCCESS;
}

hippo_status hippo__struct_out_ok(const void *dst, size_t min_size,
                                  const char *what) {
  uint32_t size;
  if (!dst)
    return hippo__error_set(HIPPO_INVALID_ARGUMENT, "%s must not be NULL",
                            what);
  memcpy(&size, dst, sizeof size);
  return size_ok(size, min_size) ? HIPPO_SUCCESS
                                 : bad_size(what, size, min_size);
}

hippo_status hippo__struct_out(void *dst, const void *src, size_t src_size,
                               size_t min_size, const char *what) {
  uint32_t size;
  hippo_status st = hippo__struct_out_ok(dst, min_size, what);
  if (st != HIPPO_SUCCESS)
    return st;
  memcpy(&size, dst, sizeof size);
  if (size > src_size) {
    /* a newer caller: what this plugin does not know reads as zero, and
     * struct_size says where the plugin's struct ends (HIPPO_HAS) */
    memset((unsigned char *)dst + src_size, 0, size - src_size);
    memcpy(dst, &(uint32_t){(uint32_t)src_size}, sizeof(uint32_t));
  }
  memcpy((unsigned char *)dst + sizeof size,
         (const unsigned char *)src + sizeof size,
         (size < src_size ? size : src_size) - sizeof size);
  return HIPPO_SUCCESS;
}
