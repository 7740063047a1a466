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

}  // namespace
