// fake_tracker_c10.cc: rec_tracker_test's stand-in for torch 2.11's libc10_cuda.so: the allocator
// object (c10::cuda::CUDACachingAllocator::allocator, exported), a NativeCachingAllocator whose
// attachAllocatorTraceTracker is a hidden (local) symbol at some vtable slot and copies the
// tracker once per device as torch does, TraceEntry with torch 2.11's fields, and a second
// backend whose vtable lacks the method (cudaMallocAsync's stand-in). C++ only because the
// thing it stands in for is C++; the recorder itself is C.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#define EXPORT __attribute__((visibility("default")))

namespace c10 {
struct GatheredContext {
  virtual ~GatheredContext() = default;
};
namespace CachingDeviceAllocator {
struct TraceEntry {
  enum Action { ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP,
                SEGMENT_UNMAP, SNAPSHOT, OOM };
  Action action_;
  int8_t device_;
  size_t addr_;
  std::shared_ptr<GatheredContext> context_;
  void *stream_{};
  size_t size_;
  std::pair<unsigned long long, unsigned long long> mempool_;
  int64_t time_{};
  std::string compile_context_;
  std::string user_metadata_;
};
}  // namespace CachingDeviceAllocator
namespace cuda {
namespace CUDACachingAllocator {
using c10::CachingDeviceAllocator::TraceEntry;
using AllocatorTraceTracker = std::function<void(const TraceEntry &)>;

class CUDAAllocator {
 public:
  virtual ~CUDAAllocator() = default;
  virtual void *raw_alloc(size_t) = 0;
  virtual void emptyCache() = 0;
  virtual void attachOutOfMemoryObserver(int) = 0;
  virtual void attachAllocatorTraceTracker(AllocatorTraceTracker tracker) = 0;
  virtual std::string name() = 0;
};

namespace Native {
class NativeCachingAllocator : public CUDAAllocator {
 public:
  std::vector<AllocatorTraceTracker> devices[2];
  void *raw_alloc(size_t) override { return nullptr; }
  void emptyCache() override {}
  void attachOutOfMemoryObserver(int) override {}
  void attachAllocatorTraceTracker(AllocatorTraceTracker tracker) override {
    for (auto &d : devices) d.push_back(tracker);  // a copy per device (the clone operation)
  }
  std::string name() override { return "native"; }
};
}  // namespace Native

namespace CudaMallocAsync {
class CudaMallocAsyncAllocator : public CUDAAllocator {
 public:
  void *raw_alloc(size_t) override { return nullptr; }
  void emptyCache() override {}
  void attachOutOfMemoryObserver(int) override {}
  void attachAllocatorTraceTracker(AllocatorTraceTracker) override { abort(); }
  std::string name() override { return "cudaMallocAsync"; }
};
}  // namespace CudaMallocAsync

EXPORT std::atomic<CUDAAllocator *> allocator;
}  // namespace CUDACachingAllocator
}  // namespace cuda
}  // namespace c10

using namespace c10::cuda::CUDACachingAllocator;

static Native::NativeCachingAllocator g_native;
static CudaMallocAsync::CudaMallocAsyncAllocator g_async;

// 0: no allocator yet, 1: the native one, 2: cudaMallocAsync's
extern "C" EXPORT void fake_c10_set_backend(int which) {
  allocator.store(which == 1 ? static_cast<CUDAAllocator *>(&g_native)
                  : which == 2 ? static_cast<CUDAAllocator *>(&g_async) : nullptr);
}

// One trace entry as record_trace makes it, to every tracker of the device.
extern "C" EXPORT int fake_c10_record(int action, int device, size_t addr, size_t size,
                                      uintptr_t stream) {
  TraceEntry te;
  te.action_ = static_cast<TraceEntry::Action>(action);
  te.device_ = static_cast<int8_t>(device);
  te.addr_ = addr;
  te.stream_ = reinterpret_cast<void *>(stream);
  te.size_ = size;
  te.mempool_ = {0, 0};
  te.compile_context_ = "N/A";
  int n = 0;
  for (const auto &cb : g_native.devices[device & 1]) {
    cb(te);
    n++;
  }
  return n;
}
