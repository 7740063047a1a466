// gmt_owners_test.cc: attribution of mapped bytes to owners (issue 17, item 3), on event
// sequences written by hand whose answers are worked out in the comments.
#include <gtest/gtest.h>

#include <string.h>

#include "formats/gmt_testutil.h"
#include "formats/gmt.h"

using gmt_test::Ev;

namespace {

const uint64_t MiB = 1ull << 20;


// Callsite 1 names NCCL, 2 a Python frame, 3 cuBLAS.
const char *Strings(void *, uint32_t id) {
  switch (id) {
    case 1: return "[libnccl.so.2]";
    case 2: return "train.py:12 forward";
    case 3: return "[libcublas.so.13]";
    default: return nullptr;
  }
}

struct Owners {
  gmt_owners_t *o = nullptr;
  explicit Owners(unsigned mode, const char *xla = nullptr) {
    gmt_header_t h;
    gmt_header_init(&h);
    h.capture_mode = mode;
    if (xla) gmt_header_kv_set(&h, "XLA_PYTHON_CLIENT_ALLOCATOR", xla, nullptr);
    EXPECT_EQ(gmt_owners_new(&o, &h, nullptr), GM_OK);
    gmt_header_free(&h);
  }
  ~Owners() { gmt_owners_free(o); }
  void Feed(const gmt_event_t &e) { ASSERT_EQ(gmt_owners_event(o, &e, Strings, nullptr, nullptr), GM_OK); }
  const gmt_owners_result_t *R() { return gmt_owners_result(o); }
  int Owner(const char *name) {
    for (int k = 0; k < R()->n_owners; k++)
      if (!strcmp(R()->names[k], name)) return k;
    return -1;
  }
};

TEST(Owners, LibraryNameConvention) {
  char n[64];
  EXPECT_EQ(gmt_owners_library_name("[libnccl.so.2]", n, sizeof n), 1);
  EXPECT_STREQ(n, "libnccl.so.2");
  EXPECT_EQ(gmt_owners_library_name("train.py:12 [x]", n, sizeof n), 0);
  EXPECT_EQ(gmt_owners_library_name("[]", n, sizeof n), 0);
  EXPECT_EQ(gmt_owners_library_name("[a] b", n, sizeof n), 0);
  EXPECT_EQ(gmt_owners_library_name(nullptr, n, sizeof n), 0);
}

// Requests mode: async requests are the framework's; NCCL's VMM maps (named) and a map with
// no callsite (unknown) are other owners; a sync cudaMalloc after the first async one is a
// library's (cuBLAS by its callsite). The device's peak is at the last add:
// 300 (requests) + 64 (nccl) + 2 (unknown) + 8 (cublas) = 374 MiB.
TEST(Owners, RequestsModeSplitsFrameworkAndLibraries) {
  Owners w(GMT_CAPTURE_REQUESTS);
  w.Feed(Ev(GMT_EV_ALLOC, 0, 0x1000, 100 * MiB).Flags(GMT_F_ASYNC));
  w.Feed(Ev(GMT_EV_ALLOC, 0, 0x2000, 200 * MiB).Cs(2).Flags(GMT_F_ASYNC));
  w.Feed(Ev(GMT_EV_VMM_MAP, 0, 0x9000, 64 * MiB).Cs(1));
  w.Feed(Ev(GMT_EV_VMM_MAP, 0, 0xa000, 2 * MiB));
  w.Feed(Ev(GMT_EV_ALLOC, 0, 0xb000, 8 * MiB).Cs(3));
  w.Feed(Ev(GMT_EV_FREE, 0, 0x2000, 0).Flags(GMT_F_ASYNC)); // 174 MiB now
  w.Feed(Ev(GMT_EV_VMM_UNMAP, 0, 0x9000, 64 * MiB));
  const gmt_owners_result_t *r = w.R();
  ASSERT_EQ(r->n_devices, 1);
  const gmt_owner_dev_t *d = &r->dev[0];
  EXPECT_EQ(d->peak_mapped, 374 * MiB);
  EXPECT_EQ(d->at_peak[GMT_OWNER_REQUESTS], 300 * MiB);
  EXPECT_EQ(d->at_peak[GMT_OWNER_UNKNOWN], 2 * MiB);
  ASSERT_GE(w.Owner("libnccl.so.2"), GMT_OWNER_FIRST_LIB);
  EXPECT_EQ(d->at_peak[w.Owner("libnccl.so.2")], 64 * MiB);
  EXPECT_EQ(d->at_peak[w.Owner("libcublas.so.13")], 8 * MiB);
  EXPECT_EQ(gmt_owners_framework_bytes(d), 300 * MiB);
  EXPECT_EQ(gmt_owners_other_bytes(d), 74 * MiB);
  EXPECT_EQ(r->peak_live, 308 * MiB); // every ALLOC (cuBLAS's too), no map: `info`'s peak live
}

// A sync alloc before any async one is the framework's (the pool comes first in real runs).
TEST(Owners, SyncBeforeAsyncIsFramework) {
  Owners w(GMT_CAPTURE_REQUESTS);
  w.Feed(Ev(GMT_EV_ALLOC, 0, 0x1000, 10 * MiB));
  w.Feed(Ev(GMT_EV_ALLOC, 0, 0x2000, 5 * MiB).Flags(GMT_F_ASYNC));
  w.Feed(Ev(GMT_EV_ALLOC, 0, 0x3000, 1 * MiB));
  const gmt_owner_dev_t *d = &w.R()->dev[0];
  EXPECT_EQ(d->at_peak[GMT_OWNER_REQUESTS], 15 * MiB);
  EXPECT_EQ(d->at_peak[GMT_OWNER_UNKNOWN], 1 * MiB);
}

// Torch mode: segments (and expandable maps) are the framework's reservation; the requests
// live inside them, so the framework holds max(requests, reserved), never their sum.
TEST(Owners, TorchModeFrameworkIsTheLargerOfRequestsAndReserved) {
  Owners w(GMT_CAPTURE_TORCH);
  w.Feed(Ev(GMT_EV_SEGMENT_ALLOC, 0, 0x10000, 20 * MiB));
  w.Feed(Ev(GMT_EV_ALLOC, 0, 0x10000, 12 * MiB).Cs(2));
  w.Feed(Ev(GMT_EV_VMM_MAP, 0, 0x90000, 4 * MiB));      // expandable segment page: reserved
  w.Feed(Ev(GMT_EV_VMM_MAP, 0, 0xa0000, 6 * MiB).Cs(1)); // named: NCCL's even here
  const gmt_owner_dev_t *d = &w.R()->dev[0];
  EXPECT_EQ(d->peak_mapped, 30 * MiB); // max(12, 24) + 6
  EXPECT_EQ(d->at_peak[GMT_OWNER_RESERVED], 24 * MiB);
  EXPECT_EQ(gmt_owners_framework_bytes(d), 24 * MiB);
  EXPECT_EQ(gmt_owners_other_bytes(d), 6 * MiB);
}

// torch-history (gpurec's default): PyTorch's history plus the CUPTI side flagged external.
// The history's segment and requests are the framework's; the flagged alloc (a workspace, no
// callsite) is unknown, the flagged map named by NCCL's callsite is NCCL's.
TEST(Owners, TorchHistoryExternalFlagIsAnotherOwner) {
  Owners w(GMT_CAPTURE_TORCH_HISTORY);
  w.Feed(Ev(GMT_EV_SEGMENT_ALLOC, 0, 0x10000, 20 * MiB));
  w.Feed(Ev(GMT_EV_ALLOC, 0, 0x10000, 12 * MiB).Cs(2));
  w.Feed(Ev(GMT_EV_ALLOC, 0, 0x50000, 8 * MiB).Flags(GMT_F_EXTERNAL));
  w.Feed(Ev(GMT_EV_VMM_MAP, 0, 0xa0000, 6 * MiB).Cs(1).Flags(GMT_F_EXTERNAL));
  w.Feed(Ev(GMT_EV_VMM_UNMAP, 0, 0xa0000, 6 * MiB).Cs(1).Flags(GMT_F_EXTERNAL));
  const gmt_owner_dev_t *d = &w.R()->dev[0];
  EXPECT_EQ(d->peak_mapped, 34 * MiB); // max(12, 20) + 8 + 6
  EXPECT_EQ(d->at_peak[GMT_OWNER_RESERVED], 20 * MiB);
  EXPECT_EQ(d->at_peak[GMT_OWNER_UNKNOWN], 8 * MiB);
  EXPECT_EQ(d->at_peak[w.Owner("libnccl.so.2")], 6 * MiB);
  EXPECT_EQ(w.R()->peak_live, 20 * MiB); // every live ALLOC of device memory, the workspace's too
}

// XLA's platform allocator: whole-buffer maps are its requests; its cuMemAllocs are not.
TEST(Owners, PlatformAllocatorMapsAreRequests) {
  Owners w(GMT_CAPTURE_REQUESTS, "platform");
  w.Feed(Ev(GMT_EV_VMM_MAP, 0, 0x1000, 4 * MiB));
  const gmt_owner_dev_t *d = &w.R()->dev[0];
  EXPECT_EQ(d->at_peak[GMT_OWNER_REQUESTS], 4 * MiB);
}

// Devices are kept apart; host memory is nobody's device memory.
TEST(Owners, PerDeviceAndHostMemoryIgnored) {
  Owners w(GMT_CAPTURE_REQUESTS);
  w.Feed(Ev(GMT_EV_ALLOC, 0, 0x1000, 3 * MiB).Flags(GMT_F_ASYNC));
  w.Feed(Ev(GMT_EV_ALLOC, 0, 0x1000, 7 * MiB).Dev(1).Flags(GMT_F_ASYNC)); // same address, other device
  gmt_event_t pinned = Ev(GMT_EV_ALLOC, 0, 0x5000, 50 * MiB);
  pinned.mem_kind = GMT_MEM_PINNED;
  w.Feed(pinned);
  w.Feed(Ev(GMT_EV_FREE, 0, 0x1000, 0).Flags(GMT_F_ASYNC));
  const gmt_owners_result_t *r = w.R();
  ASSERT_EQ(r->n_devices, 2);
  EXPECT_EQ(r->dev[0].peak_mapped, 3 * MiB);
  EXPECT_EQ(r->dev[1].peak_mapped, 7 * MiB);
  EXPECT_EQ(r->peak_live, 10 * MiB);
}

TEST(Owners, ContextNotRecorded) {
  Owners w(GMT_CAPTURE_REQUESTS);
  w.Feed(Ev(GMT_EV_ALLOC, 0, 0x1000, 2 * MiB).Flags(GMT_F_ASYNC));
  uint64_t b = 1;
  EXPECT_EQ(gmt_owners_context_bytes(&w.R()->dev[0], &b), 0);
  EXPECT_EQ(b, 0u);
  EXPECT_EQ(w.R()->dev[0].context_method, 0u);
  EXPECT_EQ(gmt_owners_context_bytes(nullptr, &b), 0);
}

// DEVICE_USAGE samples: first, last and largest per device; NVML's per-process samples win
// over the whole device's once the device has one; they add nothing to the mapped figures.
TEST(Owners, ContextFromDeviceUsageSamples) {
  Owners w(GMT_CAPTURE_REQUESTS);
  w.Feed(Ev(GMT_EV_DEVICE_USAGE, 0, GMT_USAGE_DEVICE, 600 * MiB));   // dev 0, whole device
  w.Feed(Ev(GMT_EV_DEVICE_USAGE, 0, GMT_USAGE_PROCESS, 500 * MiB));  // dev 0, NVML: wins
  w.Feed(Ev(GMT_EV_ALLOC, 0, 0x1000, 8 * MiB).Flags(GMT_F_ASYNC));
  w.Feed(Ev(GMT_EV_DEVICE_USAGE, 0, GMT_USAGE_DEVICE, 900 * MiB));   // ignored: dev 0 has NVML
  w.Feed(Ev(GMT_EV_DEVICE_USAGE, 0, GMT_USAGE_PROCESS, 640 * MiB));  // end: modules loaded
  w.Feed(Ev(GMT_EV_DEVICE_USAGE, 0, GMT_USAGE_DEVICE, 300 * MiB).Dev(1));  // dev 1: no NVML
  w.Feed(Ev(GMT_EV_DEVICE_USAGE, 0, GMT_USAGE_DEVICE, 350 * MiB).Dev(1));
  w.Feed(Ev(GMT_EV_DEVICE_USAGE, 0, 9, 5000 * MiB).Dev(1));  // a method this reader does not know
  const gmt_owners_result_t *r = w.R();
  ASSERT_EQ(r->n_devices, 2);
  const gmt_owner_dev_t *d0 = &r->dev[0], *d1 = &r->dev[1];
  EXPECT_EQ(d0->device, 0);
  EXPECT_EQ(d0->context_method, GMT_USAGE_PROCESS);
  EXPECT_EQ(d0->context_samples, 2u);
  EXPECT_EQ(d0->context_first, 500 * MiB);
  EXPECT_EQ(d0->context_last, 640 * MiB);
  uint64_t b = 0;
  EXPECT_EQ(gmt_owners_context_bytes(d0, &b), 1);
  EXPECT_EQ(b, 640 * MiB);
  EXPECT_EQ(d0->peak_mapped, 8 * MiB);  // the context is beside the maps, not in them
  EXPECT_EQ(d1->device, 1);
  EXPECT_EQ(d1->context_method, GMT_USAGE_DEVICE);
  EXPECT_EQ(gmt_owners_context_bytes(d1, &b), 1);
  EXPECT_EQ(b, 350 * MiB);
  EXPECT_EQ(d1->context_first, 300 * MiB);
  EXPECT_EQ(d1->peak_mapped, 0u);
  EXPECT_STREQ(gmt_usage_method_text(GMT_USAGE_PROCESS), "NVML, this process");
}

}  // namespace
