/* cuda_driver.h: the slice of the CUDA driver API that the `cuda:N` backend uses, declared
 * here so that replay/ builds without the CUDA toolkit.
 *
 * The backend never links libcuda: it dlopen()s libcuda.so.1 and looks up the entry points
 * below by their exported symbol names (the `_v2` names are what <cuda.h>'s version macros
 * select; the driver keeps the older symbols for old binaries, with older semantics). Types,
 * enum values and struct layouts are <cuda.h>'s for 64-bit Linux; the driver ABI is stable,
 * so these hold for every driver since CUDA 11.2 (stream-ordered pools). Only the names and
 * values used are declared; structs are declared whole (the driver reads all of them).
 *
 * //replay/cuda:cuda_driver_abi_test compares every type, value, layout, signature and symbol name
 * here against the real <cuda.h> (toolkit or NVIDIA's header wheels), so this copy cannot
 * drift. Include this instead of <cuda.h>, never both in one C file.
 * Users: cuda_backend.c (loads the table), cuda_fake_driver.c (defines it, for tests). */
#ifndef RP_CUDA_DRIVER_H
#define RP_CUDA_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUDAAPI

typedef enum cudaError_enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_INVALID_DEVICE = 101
} CUresult;

typedef uint64_t cuuint64_t;
typedef unsigned long long CUdeviceptr;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef unsigned long long CUmemGenericAllocationHandle;

typedef enum CUstream_flags_enum { CU_STREAM_NON_BLOCKING = 0x1 } CUstream_flags;

typedef enum CUmemAllocationHandleType_enum { CU_MEM_HANDLE_TYPE_NONE = 0x0 } CUmemAllocationHandleType;
typedef enum CUmemAccess_flags_enum { CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3 } CUmemAccess_flags;
typedef enum CUmemLocationType_enum { CU_MEM_LOCATION_TYPE_DEVICE = 0x1 } CUmemLocationType;
typedef enum CUmemAllocationType_enum { CU_MEM_ALLOCATION_TYPE_PINNED = 0x1 } CUmemAllocationType;
typedef enum CUmemAllocationGranularity_flags_enum {
  CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0
} CUmemAllocationGranularity_flags;
typedef enum CUmemPool_attribute_enum {
  CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
  CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5
} CUmemPool_attribute;

typedef struct CUmemLocation_st {
  CUmemLocationType type;
  int id;
} CUmemLocation;

typedef struct CUmemAllocationProp_st {
  CUmemAllocationType type;
  CUmemAllocationHandleType requestedHandleTypes;
  CUmemLocation location;
  void *win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
} CUmemAllocationProp;

typedef struct CUmemAccessDesc_st {
  CUmemLocation location;
  CUmemAccess_flags flags;
} CUmemAccessDesc;

typedef struct CUmemPoolProps_st {
  CUmemAllocationType allocType;
  CUmemAllocationHandleType handleTypes;
  CUmemLocation location;
  void *win32SecurityAttributes;
  size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
} CUmemPoolProps;

/* The entry points: X(name, exported symbol, parameters). The backend resolves each symbol
 * into a pointer of type name##_fn. */
#define CUD_FUNCS(X)                                                                            \
  X(cuInit, cuInit, (unsigned int flags))                                                       \
  X(cuDriverGetVersion, cuDriverGetVersion, (int *version))                                     \
  X(cuDeviceGet, cuDeviceGet, (CUdevice *device, int ordinal))                                  \
  X(cuDeviceGetCount, cuDeviceGetCount, (int *count))                                           \
  X(cuDeviceTotalMem, cuDeviceTotalMem_v2, (size_t *bytes, CUdevice dev))                       \
  X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, (CUcontext *pctx, CUdevice dev))        \
  X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, (CUdevice dev))                    \
  X(cuCtxSetCurrent, cuCtxSetCurrent, (CUcontext ctx))                                          \
  X(cuCtxSynchronize, cuCtxSynchronize, (void))                                                 \
  X(cuMemAlloc, cuMemAlloc_v2, (CUdeviceptr *dptr, size_t bytesize))                            \
  X(cuMemFree, cuMemFree_v2, (CUdeviceptr dptr))                                                \
  X(cuMemGetInfo, cuMemGetInfo_v2, (size_t *free_bytes, size_t *total))                        \
  X(cuMemAddressReserve, cuMemAddressReserve,                                                   \
    (CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,                         \
     unsigned long long flags))                                                                 \
  X(cuMemAddressFree, cuMemAddressFree, (CUdeviceptr ptr, size_t size))                         \
  X(cuMemCreate, cuMemCreate,                                                                   \
    (CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,        \
     unsigned long long flags))                                                                 \
  X(cuMemRelease, cuMemRelease, (CUmemGenericAllocationHandle handle))                          \
  X(cuMemMap, cuMemMap,                                                                         \
    (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,          \
     unsigned long long flags))                                                                 \
  X(cuMemUnmap, cuMemUnmap, (CUdeviceptr ptr, size_t size))                                     \
  X(cuMemSetAccess, cuMemSetAccess,                                                             \
    (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count))                  \
  X(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity,                               \
    (size_t *granularity, const CUmemAllocationProp *prop,                                      \
     CUmemAllocationGranularity_flags option))                                                  \
  X(cuStreamCreate, cuStreamCreate, (CUstream *stream, unsigned int flags))                     \
  X(cuStreamDestroy, cuStreamDestroy_v2, (CUstream stream))                                     \
  X(cuMemPoolCreate, cuMemPoolCreate, (CUmemoryPool *pool, const CUmemPoolProps *props))        \
  X(cuMemPoolDestroy, cuMemPoolDestroy, (CUmemoryPool pool))                                    \
  X(cuMemPoolSetAttribute, cuMemPoolSetAttribute,                                               \
    (CUmemoryPool pool, CUmemPool_attribute attr, void *value))                                 \
  X(cuMemPoolGetAttribute, cuMemPoolGetAttribute,                                               \
    (CUmemoryPool pool, CUmemPool_attribute attr, void *value))                                 \
  X(cuMemPoolTrimTo, cuMemPoolTrimTo, (CUmemoryPool pool, size_t keep))                         \
  X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync,                                           \
    (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream))                   \
  X(cuMemFreeAsync, cuMemFreeAsync, (CUdeviceptr dptr, CUstream stream))                        \
  X(cuGetErrorName, cuGetErrorName, (CUresult error, const char **name))

#define CUD_TYPEDEF(name, sym, params) typedef CUresult CUDAAPI name##_fn params;
CUD_FUNCS(CUD_TYPEDEF)
#undef CUD_TYPEDEF

/* Prototypes under the exported names, for the one file that defines them (the test
 * driver); the ABI test leaves them out (CUD_NO_PROTOTYPES) to set ours beside <cuda.h>'s. */
#ifndef CUD_NO_PROTOTYPES
#define CUD_PROTO(name, sym, params) name##_fn sym;
CUD_FUNCS(CUD_PROTO)
#undef CUD_PROTO
#endif

#ifdef __cplusplus
}
#endif
#endif /* RP_CUDA_DRIVER_H */
