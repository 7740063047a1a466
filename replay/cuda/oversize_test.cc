// oversize_test.cc: issue 12, item 1. A request larger than the device the replay assumes
// (one allocation of 90000000000 bytes on an 80 GiB device; 2^64-1, what a cudaMalloc(-1)
// records) is an OOM in the results under every registered policy and every backend: the
// simulator without a capacity (where the expandable-segments policy used to walk past the
// end of its segment and crash), the simulator with one, and the cuda backend (driven here
// through the stand-in libcuda.so.1 of cuda_fake_driver.c, an 8 GiB device). The replay
// goes on: the ordinary requests around the huge ones are served, and every policy's own
// invariant check runs after every event.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "formats/gmt_testutil.h"
#include "replay/policies/rp_policies.h"
#include "replay/cuda/rp_cuda.h"
#include "replay/engine/rp_engine.h"

using gmt_test::Ev;

namespace {

constexpr uint64_t MiB = 1024 * 1024;


// small, huge, small, 2^64-1, frees (of the OOM'd ones too: not anomalies), small again.
std::vector<gmt_event_t> Trace(uint64_t huge) {
  return {Ev(GMT_EV_ALLOC, 1, 0x1000, 3 * MiB, 7),      Ev(GMT_EV_ALLOC, 2, 0x2000, huge, 7),
          Ev(GMT_EV_ALLOC, 3, 0x3000, 5 * MiB, 7),      Ev(GMT_EV_ALLOC, 4, 0x4000, UINT64_MAX, 7),
          Ev(GMT_EV_ALLOC, 5, 0x5000, (1ull << 48) + 1, 7), Ev(GMT_EV_FREE, 6, 0x2000, huge, 7),
          Ev(GMT_EV_FREE, 7, 0x4000, UINT64_MAX, 7),    Ev(GMT_EV_FREE, 8, 0x1000, 3 * MiB, 7),
          Ev(GMT_EV_ALLOC, 9, 0x6000, 700 * MiB, 7),    Ev(GMT_EV_FREE, 10, 0x6000, 700 * MiB, 7),
          Ev(GMT_EV_FREE, 11, 0x3000, 5 * MiB, 7)};
}

// The confs that take different allocation paths; a conf another policy does not know is
// skipped for it.
const char *const kConfs[] = {"", "expandable_segments:True", "max_split_size_mb:64",
                              "roundup_power2_divisions:4",
                              "garbage_collection_threshold:0.8,per_process_memory_fraction:0.9",
                              "growth", "prealloc=0.5", "release_threshold=1GiB"};

// Replays the trace under every policy/conf the backend made by mk accepts; returns how many ran.
template <class Make>
int ReplayAll(Make mk, uint64_t huge, const char *backend) {
  int runs = 0;
  std::vector<gmt_event_t> tr = Trace(huge);
  for (const rp_policy_ops_t *const *o = rp_policy_all(); *o; o++) {
    for (const char *conf : kConfs) {
      std::string spec = std::string((*o)->name) + (*conf ? ":" : "") + conf;
      rp_backend_t *b = mk();
      if (!b) return runs;
      rp_engine_t *e = nullptr;
      rp_engine_opts_t eo{};
      eo.device = -1;
      eo.check = 1;
      gm_err_t err{};
      gm_status_t st = rp_engine_create(*o, conf, b, &eo, &e, &err);
      if (st != GM_OK) {  // a key of another policy, or async on the simulator
        EXPECT_TRUE(st == GM_ERR_INVAL || st == GM_ERR_UNSUPPORTED) << spec << ": " << err.msg;
        b->destroy(b);
        continue;
      }
      runs++;
      EXPECT_EQ(rp_engine_feed(e, tr.data(), tr.size(), &err), GM_OK) << backend << " " << spec << ": " << err.msg;
      rp_result_t *r = static_cast<rp_result_t *>(calloc(1, sizeof(rp_result_t)));
      EXPECT_EQ(rp_engine_finish(e, r, &err), GM_OK) << backend << " " << spec << ": " << err.msg;
      EXPECT_EQ(r->ooms, 3u) << backend << " " << spec;
      EXPECT_EQ(r->first_oom_event, 1) << backend << " " << spec;
      EXPECT_EQ(r->allocs, 6u) << backend << " " << spec;
      EXPECT_EQ(r->skipped.oversize, 2u) << backend << " " << spec;  // 2^64-1 and 2^48+1
      EXPECT_EQ(r->skipped.unknown_free + r->skipped.double_free, 0u) << backend << " " << spec;
      // The lower bound holds the huge request the program did make (it is below 2^48), the
      // sizes no device can have are left out.
      EXPECT_EQ(r->peak_requested_bytes, 3 * MiB + huge + 5 * MiB) << backend << " " << spec;
      EXPECT_GE(r->peak_reserved_bytes, 700 * MiB) << backend << " " << spec << ": the request after the OOMs";
      EXPECT_EQ(r->end_allocated_bytes, 0u) << backend << " " << spec;
      free(r);
      rp_engine_destroy(e);
      b->destroy(b);
    }
  }
  return runs;
}

TEST(Oversize, SimWithoutCapacityEveryPolicyOoms) {
  auto mk = [] {
    rp_backend_t *b = nullptr;
    gm_err_t err{};
    rp_sim_opts_t o{0, 0, 80ull << 30};
    EXPECT_EQ(rp_sim_backend_create(&o, &b, &err), GM_OK) << err.msg;
    return b;
  };
  EXPECT_GE(ReplayAll(mk, 90000000000ull, "sim"), 10);
}

TEST(Oversize, SimWithCapacityEveryPolicyOoms) {
  auto mk = [] {
    rp_backend_t *b = nullptr;
    gm_err_t err{};
    rp_sim_opts_t o{16ull << 30, 0, 0};
    EXPECT_EQ(rp_sim_backend_create(&o, &b, &err), GM_OK) << err.msg;
    return b;
  };
  EXPECT_GE(ReplayAll(mk, 17ull << 30, "sim:16GiB"), 10);
}

TEST(Oversize, CudaBackendEveryPolicyOoms) {
  if (rp_cuda_driver_version() == 0) GTEST_SKIP() << "no libcuda.so.1 (the fake one is on LD_LIBRARY_PATH in this test)";
  auto mk = [] {
    rp_backend_t *b = nullptr;
    gm_err_t err{};
    rp_cuda_opts_t o{0, 0, 0};
    EXPECT_EQ(rp_cuda_backend_create(0, &o, &b, &err), GM_OK) << err.msg;
    return b;
  };
  // the fake device has 8 GiB; async runs here too (the driver's pool)
  EXPECT_GE(ReplayAll(mk, 9ull << 30, "cuda(fake)"), 12);
}

}  // namespace
