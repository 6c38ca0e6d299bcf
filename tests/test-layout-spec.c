/* test-layout-spec.c -- tool_parse_layout (tools/toolutil.c): the compact
 * --layout specs of hippo-replay and hippo-info.
 *
 *  - valid specs fill exactly the hippo_layout and hippo_pool_options the
 *    grammar says (presets, every kind and key, sizes with every suffix,
 *    defaults, spaces, 32 pools), and their canonical text parses back to
 *    the same layout;
 *  - every error has its exact one-line message, naming the pool (from 1)
 *    and the key or value, and leaves the output untouched;
 *  - the plugin takes a parsed layout as it is (pool_report shows the same
 *    options) and still validates it (HIPPO_POOL_CONFIG naming the field).
 * tests/test-layout-cli.sh checks the same through the tools' command
 * lines, hippo-info's table included.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "toolutil.h"

#define KiB TU_KiB
#define MiB TU_MiB
#define GiB TU_GiB
#define TiB TU_TiB

/* Parses spec, which must succeed; the why buffer must stay empty. */
static void parse_ok(const char *spec, tool_layout *l) {
  char why[256] = "untouched";
  memset(l, 0xa5, sizeof *l);
  ck_assert_msg(tool_parse_layout(spec, l, why, sizeof why),
                "'%s' refused: %s", spec, why);
  ck_assert_str_eq(why, "");
  ck_assert_uint_eq(l->layout.struct_size, sizeof(hippo_layout));
}

/* Pool i of l is (kind, page, slice, cap, max, reclaim, period), and every
 * other byte of it as a zeroed struct would have it. */
static void ck_pool(const tool_layout *l, uint32_t i, hippo_pool_kind kind,
                    uint64_t page, uint64_t slice, uint64_t cap, uint64_t max,
                    uint64_t reclaim, uint64_t period) {
  hippo_pool_options want;
  memset(&want, 0, sizeof want);
  want.struct_size = sizeof want;
  want.kind = kind;
  want.page_size = page;
  want.max_slice_size = slice;
  want.max_pool_size = cap;
  want.max_alloc_size = max;
  want.reclaim_at = reclaim;
  want.dealloc_period = period;
  ck_assert_msg(memcmp(&l->pools[i], &want, sizeof want) == 0,
                "pool %u: kind %u page %llu slice %llu cap %llu max %llu "
                "reclaim %llu period %llu",
                i, l->pools[i].kind, (unsigned long long)l->pools[i].page_size,
                (unsigned long long)l->pools[i].max_slice_size,
                (unsigned long long)l->pools[i].max_pool_size,
                (unsigned long long)l->pools[i].max_alloc_size,
                (unsigned long long)l->pools[i].reclaim_at,
                (unsigned long long)l->pools[i].dealloc_period);
}

/* A custom layout of n pools, pointing at its own pools. */
static void ck_custom(const tool_layout *l, uint32_t n) {
  ck_assert_uint_eq(l->layout.preset, HIPPO_PRESET_CUSTOM);
  ck_assert_uint_eq(l->layout.pool_count, n);
  ck_assert_uint_eq(l->layout.pool_options_size, sizeof(hippo_pool_options));
  ck_assert_ptr_eq(l->layout.pools, l->pools);
}

/* ---- valid specs --------------------------------------------------------- */

START_TEST(test_presets) {
  static const struct {
    const char *spec;
    hippo_preset preset;
    const char *text;
  } cases[] = {{"adaptive", HIPPO_PRESET_ADAPTIVE, "adaptive"},
               {"sub_slices", HIPPO_PRESET_SUB_SLICES, "sub_slices"},
               {"exclusive_pages", HIPPO_PRESET_EXCLUSIVE_PAGES,
                "exclusive_pages"},
               {" \tadaptive\t ", HIPPO_PRESET_ADAPTIVE, "adaptive"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    tool_layout l;
    parse_ok(cases[i].spec, &l);
    ck_assert_uint_eq(l.layout.preset, cases[i].preset);
    ck_assert_uint_eq(l.layout.pool_count, 0);
    ck_assert_uint_eq(l.layout.pool_options_size, 0);
    ck_assert_ptr_null(l.layout.pools);
    ck_assert_str_eq(l.text, cases[i].text);
  }
}
END_TEST

START_TEST(test_sliced_and_exclusive) {
  tool_layout l;
  parse_ok("sliced:page=64M,slice=8M,cap=1G;exclusive:max=4G", &l);
  ck_custom(&l, 2);
  ck_pool(&l, 0, HIPPO_POOL_SLICED, 64 * MiB, 8 * MiB, GiB, 0, 0, 10000);
  ck_pool(&l, 1, HIPPO_POOL_EXCLUSIVE, 0, 0, 0, 4 * GiB, 0, 10000);
  ck_assert_str_eq(l.text, "sliced:page=64M,slice=8M,cap=1G;exclusive:max=4G");
}
END_TEST

START_TEST(test_every_kind_and_key) {
  tool_layout l;
  parse_ok("arena:page=2M,slice=4G,cap=8G,period=5;"
           "direct:reclaim=512M,period=0;direct;"
           "exclusive:period=7,max=16G;"
           "sliced:period=18446744073709551615,cap=0,slice=256,page=1T",
           &l);
  ck_custom(&l, 5);
  ck_pool(&l, 0, HIPPO_POOL_ARENA, 2 * MiB, 4 * GiB, 8 * GiB, 0, 0, 5);
  ck_pool(&l, 1, HIPPO_POOL_DIRECT, 0, 0, 0, 0, 512 * MiB, 0);
  ck_pool(&l, 2, HIPPO_POOL_DIRECT, 0, 0, 0, 0, 0, 10000);
  ck_pool(&l, 3, HIPPO_POOL_EXCLUSIVE, 0, 0, 0, 16 * GiB, 0, 7);
  ck_pool(&l, 4, HIPPO_POOL_SLICED, TiB, 256, 0, 0, 0, UINT64_MAX);
  /* Keys in a fixed order, defaults (cap 0, reclaim 0, period 10000)
   * left out. */
  ck_assert_str_eq(l.text,
                   "arena:page=2M,slice=4G,cap=8G,period=5;"
                   "direct:reclaim=512M,period=0;direct;"
                   "exclusive:max=16G,period=7;"
                   "sliced:page=1T,slice=256,period=18446744073709551615");
}
END_TEST

/* A virtual pool: every key, its field, and the canonical text (keys in
 * a fixed order, zeros left out). */
START_TEST(test_virtual_keys) {
  tool_layout l;
  hippo_pool_options want;
  parse_ok("virtual:budget=200,unmap=64M,granule=4M,range=1G,slice=256M;"
           "virtual",
           &l);
  ck_custom(&l, 2);
  memset(&want, 0, sizeof want);
  want.struct_size = sizeof want;
  want.kind = HIPPO_POOL_VIRTUAL;
  want.max_slice_size = 256 * MiB;
  want.range_size = GiB;
  want.granule = 4 * MiB;
  want.unmap_threshold = 64 * MiB;
  want.map_budget = 200;
  ck_assert(memcmp(&l.pools[0], &want, sizeof want) == 0);
  memset(&want, 0, sizeof want);
  want.struct_size = sizeof want;
  want.kind = HIPPO_POOL_VIRTUAL;
  ck_assert(memcmp(&l.pools[1], &want, sizeof want) == 0);
  ck_assert_str_eq(l.text, "virtual:slice=256M,range=1G,granule=4M,"
                           "unmap=64M,budget=200;virtual");
}
END_TEST

START_TEST(test_sizes) {
  static const struct {
    const char *value;
    uint64_t bytes;
    const char *text; /* in the canonical spec */
  } cases[] = {
      {"4194304", 4 * MiB, "4M"},   {"4096k", 4 * MiB, "4M"},
      {"4M", 4 * MiB, "4M"},        {"4m", 4 * MiB, "4M"},
      {"4MB", 4 * MiB, "4M"},       {"4MiB", 4 * MiB, "4M"},
      {"1536K", 1536 * KiB, "1536K"}, {"1000000", 1000000, "1000000"},
      {"2G", 2 * GiB, "2G"},        {"3T", 3 * TiB, "3T"},
      {"4096T", 4096 * TiB, "4096T"}, {"0", 0, "0"},
      {"16777215T", 16777215 * TiB, "16777215T"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char spec[128], text[128];
    tool_layout l;
    snprintf(spec, sizeof spec, "exclusive:max=%s", cases[i].value);
    parse_ok(spec, &l);
    ck_pool(&l, 0, HIPPO_POOL_EXCLUSIVE, 0, 0, 0, cases[i].bytes, 0, 10000);
    snprintf(text, sizeof text, "exclusive:max=%s", cases[i].text);
    ck_assert_str_eq(l.text, text);
  }
}
END_TEST

START_TEST(test_spaces) {
  tool_layout l;
  parse_ok(" sliced : page = 64M ,\tslice=8M , cap=1G ; exclusive:max = 4G ",
           &l);
  ck_custom(&l, 2);
  ck_pool(&l, 0, HIPPO_POOL_SLICED, 64 * MiB, 8 * MiB, GiB, 0, 0, 10000);
  ck_pool(&l, 1, HIPPO_POOL_EXCLUSIVE, 0, 0, 0, 4 * GiB, 0, 10000);
  ck_assert_str_eq(l.text, "sliced:page=64M,slice=8M,cap=1G;exclusive:max=4G");
}
END_TEST

START_TEST(test_32_pools) {
  char spec[2048] = "";
  tool_layout l;
  for (unsigned i = 0; i < TOOL_LAYOUT_MAX_POOLS; i++)
    snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "%sdirect",
             i ? ";" : "");
  parse_ok(spec, &l);
  ck_custom(&l, TOOL_LAYOUT_MAX_POOLS);
  for (unsigned i = 0; i < TOOL_LAYOUT_MAX_POOLS; i++)
    ck_pool(&l, i, HIPPO_POOL_DIRECT, 0, 0, 0, 0, 0, 10000);
  ck_assert_str_eq(l.text, spec);
}
END_TEST

/* The canonical text parses back to the same layout, byte for byte, and is
 * its own canonical text. */
START_TEST(test_round_trip) {
  static const char *const specs[] = {
      "adaptive",
      "sub_slices",
      "exclusive_pages",
      "sliced:page=64M,slice=8M,cap=1G;exclusive:max=4G",
      " sliced:slice=1048576 , page=4194304;  arena:page=2M,slice=4G,cap=0",
      "direct:reclaim=1536K,period=1;exclusive:max=1000000,period=10000",
      "arena:page=2097152,slice=4GiB,cap=12GB,period=0",
      "virtual:range=8G,budget=18446744073709551615;virtual:budget=1"};
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
    tool_layout a, b;
    parse_ok(specs[i], &a);
    parse_ok(a.text, &b);
    ck_assert_str_eq(b.text, a.text);
    ck_assert_uint_eq(b.layout.preset, a.layout.preset);
    ck_assert_uint_eq(b.layout.pool_count, a.layout.pool_count);
    ck_assert(memcmp(a.pools, b.pools,
                     a.layout.pool_count * sizeof *a.pools) == 0);
  }
}
END_TEST

/* tool_layout_get hands out a layout pointing at the object's own pools,
 * wherever the object was copied to. */
START_TEST(test_layout_get) {
  static tool_layout a, b;
  hippo_layout got;
  parse_ok("sliced:page=4M,slice=1M;exclusive:max=1G", &a);
  memcpy(&b, &a, sizeof b);
  tool_layout_get(&b, &got);
  ck_assert_uint_eq(got.struct_size, sizeof got);
  ck_assert_uint_eq(got.preset, HIPPO_PRESET_CUSTOM);
  ck_assert_uint_eq(got.pool_count, 2);
  ck_assert_ptr_eq(got.pools, b.pools);
  parse_ok("sub_slices", &a);
  tool_layout_get(&a, &got);
  ck_assert_uint_eq(got.preset, HIPPO_PRESET_SUB_SLICES);
  ck_assert_ptr_null(got.pools);
}
END_TEST

/* ---- errors -------------------------------------------------------------- */

static const struct {
  const char *spec;
  const char *why;
} errors[] = {
    {"",
     "layout spec: empty (expected a preset, adaptive, sub_slices, "
     "exclusive_pages or virtual, or pools such as "
     "sliced:page=4M,slice=1M;exclusive:max=1G)"},
    {" \t ",
     "layout spec: empty (expected a preset, adaptive, sub_slices, "
     "exclusive_pages or virtual, or pools such as "
     "sliced:page=4M,slice=1M;exclusive:max=1G)"},
    {"round_robin",
     "layout spec: 'round_robin' is neither a preset (adaptive, sub_slices, "
     "exclusive_pages, virtual) nor a pool kind (sliced, exclusive, direct, "
     "arena, virtual)"},
    {"Adaptive",
     "layout spec: 'Adaptive' is neither a preset (adaptive, sub_slices, "
     "exclusive_pages, virtual) nor a pool kind (sliced, exclusive, direct, "
     "arena, virtual)"},
    {"sliced:page=64M,slice=8M;sliced:pages=4M",
     "layout spec: pool 2 (sliced): unknown key 'pages' (page, slice, cap, "
     "period)"},
    {"exclusive:page=4M",
     "layout spec: pool 1 (exclusive): unknown key 'page' (max, period)"},
    {"direct:max=1G",
     "layout spec: pool 1 (direct): unknown key 'max' (reclaim, period)"},
    {"arena:page=2M,slice=1G,reclaim=1G",
     "layout spec: pool 1 (arena): unknown key 'reclaim' (page, slice, cap, "
     "period)"},
    {"direct:=1G",
     "layout spec: pool 1 (direct): unknown key '' (reclaim, period)"},
    {"sliced:page=4M,slice=1M,budget=100",
     "layout spec: pool 1 (sliced): unknown key 'budget' (page, slice, cap, "
     "period)"},
    {"virtual:period=5",
     "layout spec: pool 1 (virtual): unknown key 'period' (slice, range, "
     "granule, unmap, budget)"},
    {"sliced:page=4M,slice=1M;",
     "layout spec: pool 2: empty (expected KIND[:KEY=VALUE,...]; kinds "
     "sliced, exclusive, direct, arena, virtual)"},
    {";direct",
     "layout spec: pool 1: empty (expected KIND[:KEY=VALUE,...]; kinds "
     "sliced, exclusive, direct, arena, virtual)"},
    {"direct; ;direct",
     "layout spec: pool 2: empty (expected KIND[:KEY=VALUE,...]; kinds "
     "sliced, exclusive, direct, arena, virtual)"},
    {"adaptive;direct",
     "layout spec: pool 1: 'adaptive' is a preset; a preset stands alone, "
     "without keys or other pools"},
    {"sub_slices:page=4M",
     "layout spec: pool 1: 'sub_slices' is a preset; a preset stands alone, "
     "without keys or other pools"},
    {"direct;pool:page=4M",
     "layout spec: pool 2: unknown kind 'pool' (sliced, exclusive, direct, "
     "arena, virtual)"},
    {":page=4M",
     "layout spec: pool 1: unknown kind '' (sliced, exclusive, direct, "
     "arena, virtual)"},
    {"Sliced:page=4M,slice=1M",
     "layout spec: pool 1: unknown kind 'Sliced' (sliced, exclusive, direct, "
     "arena, virtual)"},
    {"sliced:",
     "layout spec: pool 1 (sliced): option 1 is empty (expected KEY=VALUE; "
     "keys page, slice, cap, period)"},
    {"sliced:page=4M,,slice=1M",
     "layout spec: pool 1 (sliced): option 2 is empty (expected KEY=VALUE; "
     "keys page, slice, cap, period)"},
    {"exclusive:max=1G,",
     "layout spec: pool 1 (exclusive): option 2 is empty (expected "
     "KEY=VALUE; keys max, period)"},
    {"sliced:page,slice=1M",
     "layout spec: pool 1 (sliced): key 'page' has no value (expected "
     "page=SIZE)"},
    {"direct:period",
     "layout spec: pool 1 (direct): key 'period' has no value (expected "
     "period=COUNT)"},
    {"sliced:page=4M,slice=1M,page=8M",
     "layout spec: pool 1 (sliced): key 'page' given twice"},
    {"sliced:page=4Q,slice=1M",
     "layout spec: pool 1 (sliced): page '4Q' is not a size (bytes, or a "
     "whole number with K, M, G or T; below 16 EiB)"},
    {"sliced:page=,slice=1M",
     "layout spec: pool 1 (sliced): page '' is not a size (bytes, or a "
     "whole number with K, M, G or T; below 16 EiB)"},
    {"exclusive:max=-1G",
     "layout spec: pool 1 (exclusive): max '-1G' is not a size (bytes, or a "
     "whole number with K, M, G or T; below 16 EiB)"},
    {"exclusive:max=1.5G",
     "layout spec: pool 1 (exclusive): max '1.5G' is not a size (bytes, or "
     "a whole number with K, M, G or T; below 16 EiB)"},
    {"exclusive:max=16777216T",
     "layout spec: pool 1 (exclusive): max '16777216T' is not a size "
     "(bytes, or a whole number with K, M, G or T; below 16 EiB)"},
    {"exclusive:max=18446744073709551616",
     "layout spec: pool 1 (exclusive): max '18446744073709551616' is not a "
     "size (bytes, or a whole number with K, M, G or T; below 16 EiB)"},
    {"direct:reclaim=1G 2G",
     "layout spec: pool 1 (direct): reclaim '1G 2G' is not a size (bytes, "
     "or a whole number with K, M, G or T; below 16 EiB)"},
    {"direct:reclaim=12345678901234567890123456789012345678901234567890",
     "layout spec: pool 1 (direct): reclaim "
     "'1234567890123456789012345678901234567890' is not a size (bytes, or a "
     "whole number with K, M, G or T; below 16 EiB)"},
    {"direct:period=1K",
     "layout spec: pool 1 (direct): period '1K' is not a count (a whole "
     "number of reservations, 0 = never)"},
    {"direct:period=-1",
     "layout spec: pool 1 (direct): period '-1' is not a count (a whole "
     "number of reservations, 0 = never)"},
    {"direct:period=18446744073709551616",
     "layout spec: pool 1 (direct): period '18446744073709551616' is not a "
     "count (a whole number of reservations, 0 = never)"},
    {"sliced:page=4M",
     "layout spec: pool 1 (sliced): key 'slice' is missing (sliced needs "
     "page and slice)"},
    {"sliced",
     "layout spec: pool 1 (sliced): key 'page' is missing (sliced needs "
     "page and slice)"},
    {"direct;arena:slice=4G",
     "layout spec: pool 2 (arena): key 'page' is missing (arena needs page "
     "and slice)"},
    {"exclusive:period=5",
     "layout spec: pool 1 (exclusive): key 'max' is missing (exclusive "
     "needs max)"},
};

START_TEST(test_errors) {
  char why[512];
  tool_layout l, before;
  memset(&before, 0x5a, sizeof before);
  memcpy(&l, &before, sizeof l);
  memset(why, 'x', sizeof why);
  ck_assert_msg(!tool_parse_layout(errors[_i].spec, &l, why, sizeof why),
                "'%s' accepted", errors[_i].spec);
  ck_assert_str_eq(why, errors[_i].why);
  ck_assert_msg(memcmp(&l, &before, sizeof l) == 0,
                "'%s': the output was written", errors[_i].spec);
}
END_TEST

START_TEST(test_too_many_pools) {
  char spec[2048] = "", why[256];
  tool_layout l;
  for (unsigned i = 0; i <= TOOL_LAYOUT_MAX_POOLS; i++)
    snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "%sdirect",
             i ? ";" : "");
  ck_assert(!tool_parse_layout(spec, &l, why, sizeof why));
  ck_assert_str_eq(why, "layout spec: pool 33: more than 32 pools (the "
                        "plugin's limit)");
}
END_TEST

/* NULL spec, NULL or tiny why buffers: no crash, still one NUL-terminated
 * line. */
START_TEST(test_null_and_short) {
  char why[16];
  tool_layout l;
  ck_assert(!tool_parse_layout(NULL, &l, why, sizeof why));
  ck_assert_str_eq(why, "layout spec: em");
  ck_assert(!tool_parse_layout("sliced:pages=1", &l, NULL, 0));
  ck_assert(!tool_parse_layout("sliced:pages=1", &l, why, 1));
  ck_assert_str_eq(why, "");
  ck_assert(!tool_parse_layout("sliced:pages=1", &l, why, 14));
  ck_assert_str_eq(why, "layout spec: ");
}
END_TEST

/* ---- the plugin takes what was parsed ------------------------------------ */

/* Opens a 16 GiB DRY device with the parsed spec; every pool report shows
 * the pool as parsed (index i + 1: index 0 is the persistent pool). */
START_TEST(test_plugin_takes_it) {
  static const char *const specs[] = {
      "sliced:page=4M,slice=1M;exclusive:max=1G",
      "sliced:page=64M,slice=8M,cap=1G;exclusive:max=4G",
      "arena:page=2M,slice=4G,cap=8G,period=5;direct:reclaim=512M,period=0;"
      "exclusive:max=16G,period=7"};
  const hippo_api *api = tu_api();
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
    tool_layout l;
    hippo_layout layout;
    hippo_device_desc desc;
    hippo_device *dev;
    hippo_stream *s;
    void *native;
    hippo_usage u;
    parse_ok(specs[i], &l);
    tool_layout_get(&l, &layout);
    TU_SIZED(desc);
    desc.backend = HIPPO_BACKEND_DRY;
    desc.capacity = 16 * GiB;
    desc.layout = &layout;
    CK_OK(api, api->device_open(&desc, &dev));
    CK_OK(api, tu_emu(api)->stream_create(dev, &native));
    CK_OK(api, api->stream_attach(dev, native, &s));
    TU_SIZED(u);
    CK_OK(api, api->usage(dev, s, &u));
    ck_assert_uint_eq(u.pool_count, l.layout.pool_count + 1);
    for (uint32_t p = 0; p < l.layout.pool_count; p++) {
      hippo_pool_report r;
      hippo_pool_options o;
      TU_SIZED(r);
      TU_SIZED(o);
      CK_OK(api, api->pool_report(s, p + 1, &r, &o));
      ck_assert_uint_eq(r.kind, l.pools[p].kind);
      ck_assert_msg(memcmp(&o, &l.pools[p], sizeof o) == 0,
                    "'%s': pool %u differs in the plugin", specs[i], p + 1);
    }
    CK_OK(api, api->stream_detach(s));
    CK_OK(api, tu_emu(api)->stream_destroy(dev, native));
    CK_OK(api, api->device_close(dev));
  }
}
END_TEST

/* A well-formed spec the plugin refuses: its own validation names the
 * field (pools counted from 0 there). */
START_TEST(test_plugin_validates) {
  const hippo_api *api = tu_api();
  tool_layout l;
  hippo_layout layout;
  hippo_device_desc desc;
  hippo_device *dev = NULL;
  parse_ok("direct;sliced:page=1M,slice=2M", &l);
  tool_layout_get(&l, &layout);
  TU_SIZED(desc);
  desc.backend = HIPPO_BACKEND_DRY;
  desc.capacity = 16 * GiB;
  desc.layout = &layout;
  CK_STATUS(api, api->device_open(&desc, &dev), HIPPO_POOL_CONFIG);
  CK_ERROR_HAS(api, "layout pool 1 (SLICED) field max_slice_size");
  parse_ok("sliced:page=32G,slice=1G", &l);
  tool_layout_get(&l, &layout);
  CK_STATUS(api, api->device_open(&desc, &dev), HIPPO_POOL_CONFIG);
  CK_ERROR_HAS(api, "layout pool 0 (SLICED) field page_size");
}
END_TEST

static Suite *spec_suite(void) {
  Suite *s = suite_create("layout-spec");
  TCase *tc = tcase_create("valid");
  tcase_add_test(tc, test_presets);
  tcase_add_test(tc, test_sliced_and_exclusive);
  tcase_add_test(tc, test_every_kind_and_key);
  tcase_add_test(tc, test_virtual_keys);
  tcase_add_test(tc, test_sizes);
  tcase_add_test(tc, test_spaces);
  tcase_add_test(tc, test_32_pools);
  tcase_add_test(tc, test_round_trip);
  tcase_add_test(tc, test_layout_get);
  suite_add_tcase(s, tc);
  tc = tcase_create("errors");
  tcase_add_loop_test(tc, test_errors, 0, sizeof errors / sizeof *errors);
  tcase_add_test(tc, test_too_many_pools);
  tcase_add_test(tc, test_null_and_short);
  suite_add_tcase(s, tc);
  tc = tcase_create("plugin");
  tcase_add_test(tc, test_plugin_takes_it);
  tcase_add_test(tc, test_plugin_validates);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(spec_suite()); }
