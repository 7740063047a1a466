// The tf policy: TensorFlow's words in, the memory limit and allocator TF would build out.
// Expected limits follow gpu_device.cc (SingleVirtualDeviceMemoryLimit, MinSystemMemory, the
// virtual-device memory_limit_mb conversion) and gpu_bfc_allocator.cc (the env switches).
#include <gtest/gtest.h>

#include <string>

#include "replay/policies/rp_bfc_core.h"
#include "replay/policies/rp_policies.h"
#include "replay/policies/testing/fake_driver.h"

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

struct Tf {
  rp_fake_driver_t f;
  const rp_policy_ops_t *ops = nullptr;
  rp_policy_t *p = nullptr;
  gm_err_t err{};
  gm_status_t created;
  Tf(const char *spec, uint64_t total, int with_async = 0) {
    rp_fake_driver_init(&f, total, 2 * MiB, with_async);
    created = rp_policy_create(spec, &f.drv, &ops, &p, &err);
  }
  ~Tf() {
    if (p) {
      EXPECT_EQ(ops->release_all(p, &err), GM_OK) << err.msg;
      EXPECT_EQ(f.used, 0u);
      ops->destroy(p);
    }
    EXPECT_EQ(f.errors, 0u);
    rp_fake_driver_fini(&f);
  }
  gm_status_t Try(uint64_t size, uint64_t *a, uint64_t stream = 0) {
    gm_status_t st = ops->alloc(p, size, stream, a, &err);
    gm_err_t e{};
    EXPECT_EQ(ops->check(p, &e), GM_OK) << e.msg;
    return st;
  }
  uint64_t Alloc(uint64_t size) {
    uint64_t a = 0;
    EXPECT_EQ(Try(size, &a), GM_OK) << err.msg;
    return a;
  }
  void Free(uint64_t a) { EXPECT_EQ(ops->free(p, a, &err), GM_OK) << err.msg; }
  // The first region's size: with no growth it is the whole memory limit.
  uint64_t FirstSegment() {
    uint64_t a = Alloc(1);
    for (int i = 0; i < f.nblocks; i++)
      if (f.blocks[i].kind == RP_FAKE_SEGMENT) {
        Free(a);
        return f.blocks[i].size;
      }
    return 0;
  }
  rp_policy_stats_t Stats() {
    rp_policy_stats_t s{};
    ops->stats(p, &s);
    return s;
  }
};

std::string CreateError(const char *spec, uint64_t total = 80 * GiB) {
  Tf t(spec, total);
  EXPECT_NE(t.created, GM_OK) << spec;
  return t.err.msg;
}

TEST(Tf, DefaultsArePreallocationOfAllButMinSystemMemory) {
  Tf t("tf", 80 * GiB);
  ASSERT_EQ(t.created, GM_OK) << t.err.msg;
  EXPECT_STREQ(t.ops->name, "tf");
  EXPECT_STREQ(t.ops->spec(t.p), "tf");
  // allow_growth false: one region of the limit; compute capability >= 9 reserves 1800 MiB
  EXPECT_EQ(t.FirstSegment(), 80 * GiB - 1800 * MiB);
  EXPECT_EQ(t.f.calls.mem_alloc, 1u);
}

TEST(Tf, SmallDevicesKeep225MiB) {
  Tf t("tf", 2 * GiB - 2 * MiB);  // under 2 GiB: MinSystemMemory = 225 MiB
  ASSERT_EQ(t.created, GM_OK) << t.err.msg;
  EXPECT_EQ(t.FirstSegment(), 2 * GiB - 2 * MiB - 225 * MiB);
}

TEST(Tf, ForceAllowGrowthStartsAtTwoMiB) {
  Tf t("tf:TF_FORCE_GPU_ALLOW_GROWTH=true", 80 * GiB);
  ASSERT_EQ(t.created, GM_OK) << t.err.msg;
  EXPECT_EQ(t.FirstSegment(), 2 * MiB);
}

TEST(Tf, TheEnvironmentOverridesAllowGrowth) {
  Tf off("tf:allow_growth=True,TF_FORCE_GPU_ALLOW_GROWTH=false", 8 * GiB);
  ASSERT_EQ(off.created, GM_OK) << off.err.msg;
  EXPECT_EQ(off.FirstSegment(), 8 * GiB - 1800 * MiB);
  Tf on("tf:allow_growth=true", 8 * GiB);  // set_memory_growth(gpu, True)
  ASSERT_EQ(on.created, GM_OK) << on.err.msg;
  EXPECT_EQ(on.FirstSegment(), 2 * MiB);
}

TEST(Tf, MemoryLimitIsInMiBAndWinsOverTheFraction) {
  struct {
    const char *spec;
    uint64_t limit;
  } cases[] = {
      {"tf:memory_limit=4096", 4 * GiB},
      {"tf:memory_limit=4096.9", 4 * GiB},  // memory_limit_mb is a float; TF truncates to MiB
      {"tf:memory_limit=4GiB", 4 * GiB},
      {"tf:memory_limit=1536MiB,per_process_gpu_memory_fraction=0.9", 1536 * MiB},
      {"tf:memory_limit=100000", 100000 * MiB},  // more than the device: TF takes it as said
      {"tf:per_process_gpu_memory_fraction=0.5", 40 * GiB},
      {"tf:per_process_gpu_memory_fraction=0.3", (uint64_t)(80.0 * GiB * 0.3)},
      {"tf:per_process_gpu_memory_fraction=0", 80 * GiB - 1800 * MiB},  // 0 = unset
      {"tf:TF_DEVICE_MIN_SYS_MEMORY_IN_MB=1024", 79 * GiB},
      // the env reserve replaces the fraction's limit too (SingleVirtualDeviceMemoryLimit)
      {"tf:per_process_gpu_memory_fraction=0.5,TF_DEVICE_MIN_SYS_MEMORY_IN_MB=0", 80 * GiB},
      // a reserve above the device's memory is ignored (TF logs a warning)
      {"tf:TF_DEVICE_MIN_SYS_MEMORY_IN_MB=90000", 80 * GiB - 1800 * MiB},
      // a logical device's memory_limit skips the reserve
      {"tf:memory_limit=2048,TF_DEVICE_MIN_SYS_MEMORY_IN_MB=1024", 2 * GiB},
  };
  for (const auto &c : cases) {
    Tf t(c.spec, 80 * GiB);
    ASSERT_EQ(t.created, GM_OK) << c.spec << ": " << t.err.msg;
    EXPECT_STREQ(t.ops->spec(t.p), c.spec);
    if (c.limit > 80 * GiB) {
      // The device cannot hold the region: 104857600000 and 94371840000 B are refused,
      // BFC's backpedal (x 0.9f) gets 84934656000 B.
      EXPECT_EQ(t.FirstSegment(), 84934656000u) << c.spec;
      EXPECT_EQ(t.f.calls.nomem, 2u) << c.spec;
    } else {
      EXPECT_EQ(t.FirstSegment(), c.limit) << c.spec;
    }
  }
}

TEST(Tf, GarbageCollectionFollowsItsSwitch) {
  // 10 MiB, growth: 2 MiB region, freed; 9 MiB does not fit what is left (8 MiB) unless the
  // empty 2 MiB region goes back first (DeallocateFreeRegions).
  for (const char *gc : {"", ",TF_ENABLE_GPU_GARBAGE_COLLECTION=true", ",TF_ENABLE_GPU_GARBAGE_COLLECTION=false"}) {
    std::string spec = std::string("tf:TF_FORCE_GPU_ALLOW_GROWTH=true,memory_limit=10") + gc;
    Tf t(spec.c_str(), 64 * MiB);
    ASSERT_EQ(t.created, GM_OK) << t.err.msg;
    t.Free(t.Alloc(2 * MiB));
    uint64_t a = 0;
    bool off = std::string(gc).find("false") != std::string::npos;
    EXPECT_EQ(t.Try(9 * MiB, &a), off ? GM_ERR_NOMEM : GM_OK) << spec;
    EXPECT_EQ(t.Stats().alloc_retries, off ? 0u : 1u) << spec;
    EXPECT_EQ(t.f.calls.mem_free, off ? 0u : 1u) << spec;
  }
}

TEST(Tf, CudaMallocAsyncIsTheDriversPoolWithTheLimitAsThreshold) {
  Tf t("tf:TF_GPU_ALLOCATOR=cuda_malloc_async,memory_limit=64", 1 * GiB, /*with_async=*/1);
  ASSERT_EQ(t.created, GM_OK) << t.err.msg;
  EXPECT_STREQ(t.ops->spec(t.p), "tf:TF_GPU_ALLOCATOR=cuda_malloc_async,memory_limit=64");
  uint64_t a = t.Alloc(3 * MiB);
  EXPECT_EQ(t.f.calls.alloc_async, 1u);
  EXPECT_EQ(t.f.calls.mem_alloc, 0u);
  t.Free(a);
  EXPECT_EQ(t.f.calls.free_async, 1u);
  EXPECT_EQ(t.f.calls.pool_trim, 1u);  // down to the release threshold = the 64 MiB limit
  EXPECT_EQ(t.f.used, 3 * MiB);  // the block stays cached: the pool keeps up to 64 MiB
}

TEST(Tf, CudaMallocAsyncNeedsAPool) {  // the fake driver has none (the simulator has its model)
  EXPECT_EQ(CreateError("tf:TF_GPU_ALLOCATOR=cuda_malloc_async"),
            "tf: TF_GPU_ALLOCATOR=cuda_malloc_async (the async policy): async policy needs a backend "
            "with a stream-ordered pool");
}

TEST(Tf, CudaMallocIsDirect) {
  Tf t("tf:TF_GPU_ALLOCATOR=cuda_malloc", 1 * GiB);
  ASSERT_EQ(t.created, GM_OK) << t.err.msg;
  uint64_t a = t.Alloc(1000), b = t.Alloc(3 * MiB);
  EXPECT_EQ(t.f.calls.mem_alloc, 2u);  // one cuMemAlloc per request, exact size
  t.Free(a);
  t.Free(b);
  EXPECT_EQ(t.f.calls.mem_free, 2u);
}

TEST(Tf, BadValuesNameTheKeyAndWhatTensorFlowAccepts) {
  EXPECT_EQ(CreateError("tf:TF_FORCE_GPU_ALLOW_GROWTH=True"),
            "tf: bad value for 'TF_FORCE_GPU_ALLOW_GROWTH': 'True' (TensorFlow accepts exactly true or false; it "
            "ignores anything else and keeps allow_growth)");
  EXPECT_EQ(CreateError("tf:TF_ENABLE_GPU_GARBAGE_COLLECTION=0"),
            "tf: bad value for 'TF_ENABLE_GPU_GARBAGE_COLLECTION': '0' (TensorFlow accepts exactly true or false; "
            "it ignores anything else and keeps collecting)");
  EXPECT_EQ(CreateError("tf:allow_growth=yes"), "tf: bad value for 'allow_growth': 'yes' (true or false)");
  EXPECT_EQ(CreateError("tf:TF_GPU_ALLOCATOR=bfc"),
            "tf: bad value for 'TF_GPU_ALLOCATOR': 'bfc' (cuda_malloc_async or cuda_malloc; TensorFlow ignores "
            "other values and keeps its BFC)");
  EXPECT_EQ(CreateError("tf:TF_GPU_ALLOCATOR=memory_guard"),
            "tf: bad value for 'TF_GPU_ALLOCATOR': 'memory_guard' (GPUDebugAllocator's guard bytes) is not modelled");
  EXPECT_EQ(CreateError("tf:memory_limit=lots"),
            "tf: bad value for 'memory_limit': 'lots' (MiB as tf.config.LogicalDeviceConfiguration takes it, e.g. "
            "4096, or a size such as 4GiB)");
  EXPECT_EQ(CreateError("tf:memory_limit=0.5"),
            "tf: bad value for 'memory_limit': '0.5' (MiB as tf.config.LogicalDeviceConfiguration takes it, e.g. "
            "4096, or a size such as 4GiB)");
  EXPECT_EQ(CreateError("tf:memory_limit=1000000000B"),
            "tf: bad value for 'memory_limit': '1000000000B' is not a whole number of MiB (TensorFlow's "
            "memory_limit counts MiB)");
  EXPECT_EQ(CreateError("tf:per_process_gpu_memory_fraction=1.5"),
            "tf: bad value for 'per_process_gpu_memory_fraction': '1.5': above 1 TensorFlow allocates unified "
            "memory (oversubscription), which is not modelled");
  EXPECT_EQ(CreateError("tf:per_process_gpu_memory_fraction=-0.5"),
            "tf: bad value for 'per_process_gpu_memory_fraction': '-0.5' (a fraction in [0, 1]; 0 means unset)");
  EXPECT_EQ(CreateError("tf:memory_limit=512,per_process_gpu_memory_fraction=half"),
            "tf: bad value for 'per_process_gpu_memory_fraction': 'half' (a fraction in [0, 1]; 0 means unset)");
  EXPECT_EQ(CreateError("tf:TF_DEVICE_MIN_SYS_MEMORY_IN_MB=-1"),
            "tf: bad value for 'TF_DEVICE_MIN_SYS_MEMORY_IN_MB': '-1' (a whole number of MiB, >= 0)");
  EXPECT_EQ(CreateError("tf:TF_FORCE_GPU_ALLOW_GROWTH"), "tf: bad value for 'TF_FORCE_GPU_ALLOW_GROWTH': needs a value");
  EXPECT_EQ(CreateError("tf:tf_force_gpu_allow_growth=true"),
            "tf: unknown key 'tf_force_gpu_allow_growth' (known: TF_FORCE_GPU_ALLOW_GROWTH, allow_growth, "
            "memory_limit, per_process_gpu_memory_fraction, TF_DEVICE_MIN_SYS_MEMORY_IN_MB, "
            "TF_ENABLE_GPU_GARBAGE_COLLECTION, TF_GPU_ALLOCATOR)");
}

TEST(Tf, TakesAnExportedLineAsItIs) {
  // Spaces separate settings like commas (gpureplay hands "TF_..." lines over as tf:LINE).
  Tf t("tf:TF_FORCE_GPU_ALLOW_GROWTH=true TF_ENABLE_GPU_GARBAGE_COLLECTION=false", 64 * MiB);
  ASSERT_EQ(t.created, GM_OK) << t.err.msg;
  EXPECT_STREQ(t.ops->spec(t.p), "tf:TF_FORCE_GPU_ALLOW_GROWTH=true TF_ENABLE_GPU_GARBAGE_COLLECTION=false");
  EXPECT_EQ(t.FirstSegment(), 2 * MiB);
  t.Free(t.Alloc(2 * MiB));
  uint64_t a = 0;
  EXPECT_EQ(t.Try(63 * MiB, &a), GM_ERR_NOMEM);  // garbage collection off: the 2 MiB region stays
  EXPECT_EQ(t.f.calls.mem_free, 0u);
  EXPECT_EQ(CreateError("tf:TF_FORCE_GPU_ALLOW_GROWTH=1 memory_limit=64"),
            "tf: bad value for 'TF_FORCE_GPU_ALLOW_GROWTH': '1' (TensorFlow accepts exactly true or false; it "
            "ignores anything else and keeps allow_growth)");
}

TEST(Tf, IsTheBfcPolicyWithTheseOptions) {
  // Same requests, tf in TF's words and bfc in model words: same addresses and figures.
  Tf t("tf:TF_FORCE_GPU_ALLOW_GROWTH=true,memory_limit=48", 64 * MiB);
  Tf b("bfc:growth,limit=48MiB", 64 * MiB);
  ASSERT_EQ(t.created, GM_OK) << t.err.msg;
  ASSERT_EQ(b.created, GM_OK) << b.err.msg;
  uint64_t sizes[] = {1000, 3 * MiB, 17 * MiB, 256, 5 * MiB + 1, 20 * MiB};
  for (uint64_t s : sizes) {
    uint64_t x = 0, y = 0;
    gm_status_t sx = t.Try(s, &x), sy = b.Try(s, &y);
    EXPECT_EQ(sx, sy) << s;
    EXPECT_EQ(x, y) << s;  // both fakes hand out the same addresses
  }
  EXPECT_EQ(t.Stats().allocated_bytes, b.Stats().allocated_bytes);
  EXPECT_EQ(t.Stats().ooms, b.Stats().ooms);
  EXPECT_EQ(t.f.calls.mem_alloc, b.f.calls.mem_alloc);
}

}  // namespace
