// cuda_driver_abi_test.cc: replay/cuda/cuda_driver.h against the real <cuda.h>.
//
// cuda_driver.h declares the driver entry points the cuda:N backend dlopen()s, so replay/
// builds without the toolkit; this test is where the toolkit's (or NVIDIA's header wheels')
// <cuda.h> checks that copy. Ours is included inside namespace `ours` beside the real one:
// every entry point's signature (with our types mapped to theirs), exported symbol name
// (what <cuda.h>'s version macros pick), enum value, scalar type and struct layout must match.
// Most checks are static_asserts: a drifted declaration does not compile.
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <string>
#include <type_traits>

namespace ours {
#define CUD_NO_PROTOTYPES
#include "replay/cuda/cuda_driver.h"
}  // namespace ours

namespace {

// ours:: type -> the <cuda.h> type it stands for (identity for shared scalars).
template <class T> struct Theirs { using type = T; };
template <class T> using theirs_t = typename Theirs<T>::type;
template <class T> struct Theirs<T *> { using type = theirs_t<T> *; };
template <class T> struct Theirs<const T> { using type = const theirs_t<T>; };
template <class R, class... A> struct Theirs<R(A...)> { using type = theirs_t<R>(theirs_t<A>...); };
#define SAME_TYPE(t) \
  template <> struct Theirs<ours::t> { using type = ::t; };
SAME_TYPE(CUresult)
SAME_TYPE(CUmemAllocationHandleType)
SAME_TYPE(CUmemAccess_flags)
SAME_TYPE(CUmemLocationType)
SAME_TYPE(CUmemAllocationType)
SAME_TYPE(CUmemAllocationGranularity_flags)
SAME_TYPE(CUmemPool_attribute)
SAME_TYPE(CUmemLocation)
SAME_TYPE(CUmemAllocationProp)
SAME_TYPE(CUmemAccessDesc)
SAME_TYPE(CUmemPoolProps)
#undef SAME_TYPE

// Scalars are the same C types, not just the same size. (The handle types' struct tags are
// found by name lookup in the global namespace, so they are <cuda.h>'s own.)
static_assert(std::is_same<ours::CUdeviceptr, ::CUdeviceptr>::value, "CUdeviceptr");
static_assert(std::is_same<ours::CUdevice, ::CUdevice>::value, "CUdevice");
static_assert(std::is_same<ours::cuuint64_t, ::cuuint64_t>::value, "cuuint64_t");
static_assert(std::is_same<ours::CUmemGenericAllocationHandle, ::CUmemGenericAllocationHandle>::value,
              "CUmemGenericAllocationHandle");
static_assert(std::is_same<theirs_t<ours::CUcontext>, ::CUcontext>::value, "CUcontext");
static_assert(std::is_same<theirs_t<ours::CUstream>, ::CUstream>::value, "CUstream");
static_assert(std::is_same<theirs_t<ours::CUmemoryPool>, ::CUmemoryPool>::value, "CUmemoryPool");

// Every entry point: our signature, mapped, is <cuda.h>'s (`name` expands through its
// version macros to the declared function, e.g. cuMemAlloc -> cuMemAlloc_v2).
#define SIGNATURE(name, sym, params)                                                        \
  static_assert(std::is_same<theirs_t<ours::name##_fn>, decltype(::name)>::value, #name);
CUD_FUNCS(SIGNATURE)
#undef SIGNATURE

// Enum values.
#define VALUE(v) static_assert(static_cast<long>(ours::v) == static_cast<long>(::v), #v);
VALUE(CUDA_SUCCESS)
VALUE(CUDA_ERROR_INVALID_VALUE)
VALUE(CUDA_ERROR_OUT_OF_MEMORY)
VALUE(CUDA_ERROR_INVALID_DEVICE)
VALUE(CU_STREAM_NON_BLOCKING)
VALUE(CU_MEM_HANDLE_TYPE_NONE)
VALUE(CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
VALUE(CU_MEM_LOCATION_TYPE_DEVICE)
VALUE(CU_MEM_ALLOCATION_TYPE_PINNED)
VALUE(CU_MEM_ALLOC_GRANULARITY_MINIMUM)
VALUE(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
VALUE(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
#undef VALUE

// Struct layouts: size, alignment, and every field's offset.
#define LAYOUT(t)                                                                      \
  static_assert(sizeof(ours::t) == sizeof(::t), #t " size");                          \
  static_assert(alignof(ours::t) == alignof(::t), #t " alignment");
#define FIELD(t, f) static_assert(offsetof(ours::t, f) == offsetof(::t, f), #t "." #f);
LAYOUT(CUmemLocation)
FIELD(CUmemLocation, type)
FIELD(CUmemLocation, id)
LAYOUT(CUmemAllocationProp)
FIELD(CUmemAllocationProp, type)
FIELD(CUmemAllocationProp, requestedHandleTypes)
FIELD(CUmemAllocationProp, location)
FIELD(CUmemAllocationProp, win32HandleMetaData)
FIELD(CUmemAllocationProp, allocFlags)
FIELD(CUmemAllocationProp, allocFlags.usage)
FIELD(CUmemAllocationProp, allocFlags.reserved)
LAYOUT(CUmemAccessDesc)
FIELD(CUmemAccessDesc, location)
FIELD(CUmemAccessDesc, flags)
LAYOUT(CUmemPoolProps)
FIELD(CUmemPoolProps, allocType)
FIELD(CUmemPoolProps, handleTypes)
FIELD(CUmemPoolProps, location)
FIELD(CUmemPoolProps, win32SecurityAttributes)
FIELD(CUmemPoolProps, maxSize)
FIELD(CUmemPoolProps, usage)
FIELD(CUmemPoolProps, reserved)
#undef FIELD
#undef LAYOUT

#define STR_(x) #x
#define XSTR(x) STR_(x)

// The symbol the backend dlsym()s is the one <cuda.h> binds a call to.
TEST(CudaDriverAbi, SymbolNamesAreThoseCudaHSelects) {
  int n = 0;
#define SYMBOL(name, sym, params)                          \
  EXPECT_EQ(std::string(#sym), std::string(XSTR(name))) << #name; \
  n++;
  CUD_FUNCS(SYMBOL)
#undef SYMBOL
  EXPECT_EQ(n, 30);
}

// Against the header actually used: a reminder in the log of which CUDA it was.
TEST(CudaDriverAbi, ComparedAgainstCuda11OrNewer) {
  std::printf("compared against <cuda.h> CUDA_VERSION %d\n", CUDA_VERSION);
  EXPECT_GE(CUDA_VERSION, 11020);  // stream-ordered pools: the oldest API we declare
}

}  // namespace
