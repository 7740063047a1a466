// The registry: names, "name[:conf]" specs, and errors for unknown names and keys.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "replay/policies/rp_policies.h"
#include "replay/policies/testing/fake_driver.h"

namespace {

constexpr uint64_t MiB = 1024 * 1024;

std::string KnownList() {
  std::string s;
  for (const rp_policy_ops_t *const *o = rp_policy_all(); *o; o++) s += (s.empty() ? "" : ", ") + std::string((*o)->name);
  return s;
}

TEST(Registry, ListsEveryPolicyOnce) {
  std::set<std::string> names;
  for (const rp_policy_ops_t *const *o = rp_policy_all(); *o; o++) {
    EXPECT_TRUE(names.insert((*o)->name).second) << (*o)->name;
    EXPECT_EQ(rp_policy_find((*o)->name), *o);
    EXPECT_NE((*o)->description, nullptr);
  }
  for (const char *n : {"pytorch", "bfc", "prealloc", "jax", "tf", "cupy", "direct", "async"}) EXPECT_EQ(names.count(n), 1u) << n;
  EXPECT_EQ(rp_policy_find("tcmalloc"), nullptr);
}

TEST(Registry, UnknownNameListsTheKnownOnes) {
  rp_fake_driver_t f;
  rp_fake_driver_init(&f, 64 * MiB, 2 * MiB, 0);
  const rp_policy_ops_t *ops = nullptr;
  rp_policy_t *p = nullptr;
  gm_err_t err{};
  EXPECT_EQ(rp_policy_create("x:foo", &f.drv, &ops, &p, &err), GM_ERR_INVAL);
  EXPECT_EQ(std::string(err.msg), "unknown policy 'x' (known: " + KnownList() + ")");
  EXPECT_EQ(KnownList(), "pytorch, bfc, prealloc, jax, tf, cupy, direct, async");
  rp_fake_driver_fini(&f);
}

TEST(Registry, CreatesFromSpecAndKeepsIt) {
  rp_fake_driver_t f;
  rp_fake_driver_init(&f, 64 * MiB, 2 * MiB, 0);
  struct {
    const char *spec;
    gm_status_t want;
    const char *needle;  // in the error message
  } cases[] = {
      {"bfc", GM_OK, ""},
      {"bfc:growth", GM_OK, ""},
      {"bfc:prealloc=0.9", GM_OK, ""},
      {"bfc:growth,garbage_collection=false,limit=32MiB", GM_OK, ""},
      {"prealloc", GM_OK, ""},
      {"prealloc:16MiB", GM_OK, ""},
      {"direct", GM_OK, ""},
      {"pytorch", GM_OK, ""},
      {"bfc:bogus=1", GM_ERR_INVAL, "bfc: unknown key 'bogus'"},
      {"bfc:prealloc=2", GM_ERR_INVAL, "bfc: bad value for 'prealloc'"},
      {"bfc:growth,prealloc=0.5", GM_ERR_INVAL, "exclude each other"},
      {"bfc:garbage_collection", GM_ERR_INVAL, "bfc: bad value for 'garbage_collection'"},
      {"prealloc:12XB", GM_ERR_INVAL, "prealloc: bad value for 'size'"},
      {"prealloc:lots", GM_ERR_INVAL, "prealloc: unknown key 'lots' (known: size, growth)"},
      {"prealloc:0", GM_ERR_INVAL, "prealloc: bad value for 'size'"},
      {"async:release_threshold=1GiB", GM_ERR_UNSUPPORTED, "needs a backend with a stream-ordered pool"},
      {"async:hold=1", GM_ERR_INVAL, "async: unknown key 'hold'"},
  };
  for (const auto &c : cases) {
    const rp_policy_ops_t *ops = nullptr;
    rp_policy_t *p = nullptr;
    gm_err_t err{};
    gm_status_t st = rp_policy_create(c.spec, &f.drv, &ops, &p, &err);
    EXPECT_EQ(st, c.want) << c.spec << ": " << err.msg;
    if (st == GM_OK) {
      EXPECT_STREQ(ops->spec(p), c.spec);
      ops->destroy(p);
    } else {
      EXPECT_NE(std::string(err.msg).find(c.needle), std::string::npos) << c.spec << ": " << err.msg;
    }
  }
  rp_fake_driver_fini(&f);
}

// Issue 12, item 1: a request no device can serve (larger than the device the policy runs on,
// or 2^64-1, what a cudaMalloc(-1) records) is an out-of-memory answer from every registered
// policy under every configuration that changes its allocation path, never a crash, never a
// served block, and the policy keeps serving ordinary requests afterwards.
TEST(Registry, EveryPolicyAnswersOomForRequestsNoDeviceHas) {
  const char *confs[] = {"", "expandable_segments:True", "max_split_size_mb:64",
                         "roundup_power2_divisions:4", "garbage_collection_threshold:0.8,per_process_memory_fraction:0.9",
                         "growth", "prealloc=0.5"};
  const uint64_t huge[] = {90000000000ull, 8ull << 30 /* the whole device */, (1ull << 48) + 1,
                           UINT64_MAX - 511, UINT64_MAX};
  int runs = 0;
  for (const rp_policy_ops_t *const *o = rp_policy_all(); *o; o++) {
    for (const char *conf : confs) {
      rp_fake_driver_t f;
      rp_fake_driver_init(&f, 8ull << 30, 2 * MiB, /*with_async=*/1);
      std::string spec = std::string((*o)->name) + (*conf ? ":" : "") + conf;
      rp_policy_t *p = nullptr;
      gm_err_t err{};
      if ((*o)->create(conf, &f.drv, &p, &err) != GM_OK) {  // a conf of another policy
        rp_fake_driver_fini(&f);
        continue;
      }
      runs++;
      uint64_t small = 0, a = 0;
      ASSERT_EQ((*o)->alloc(p, 3 * MiB, 0, &small, &err), GM_OK) << spec << ": " << err.msg;
      uint64_t want_ooms = 0;
      for (uint64_t size : huge) {
        gm_status_t st = (*o)->alloc(p, size, 0, &a, &err);
        EXPECT_EQ(st, GM_ERR_NOMEM) << spec << " size " << size << ": " << err.msg;
        if (st == GM_ERR_NOMEM) want_ooms++;
        if (st == GM_OK) (*o)->free(p, a, &err);
        EXPECT_EQ((*o)->check(p, &err), GM_OK) << spec << ": " << err.msg;
      }
      rp_policy_stats_t s{};
      (*o)->stats(p, &s);
      EXPECT_EQ(s.ooms, want_ooms) << spec;
      EXPECT_GE(s.allocated_bytes, 3 * MiB) << spec;  // the small block survived the OOM paths
      ASSERT_EQ((*o)->alloc(p, 5 * MiB, 1, &a, &err), GM_OK) << spec << " after the OOMs: " << err.msg;
      EXPECT_EQ((*o)->free(p, a, &err), GM_OK) << spec;
      EXPECT_EQ((*o)->free(p, small, &err), GM_OK) << spec;
      EXPECT_EQ((*o)->release_all(p, &err), GM_OK) << spec << ": " << err.msg;
      (*o)->destroy(p);
      EXPECT_EQ(f.errors, 0u) << spec << ": the policy misused the driver";
      EXPECT_EQ(f.used, 0u) << spec << ": release_all left device memory behind";
      rp_fake_driver_fini(&f);
    }
  }
  EXPECT_GE(runs, 10);  // every policy ran at least once (pytorch under its five confs)
}

}  // namespace
