/* cupti_convert.c: the one function that turns CUPTI memory records into trace events.
 *
 * CUPTI_ACTIVITY_KIND_MEMORY2 gives one record per allocation and one per release, with a
 * single timestamp (CUpti_ActivityMemory4 in CUDA 13). Its streamId is valid only for
 * stream-ordered operations (isAsync); synchronous ones get GMT_STREAM_NONE. DEVICE_STATIC
 * records (module globals loaded with a module) keep their own memory kind so consumers can
 * keep them apart from requests. MEMORY_POOL records become pool create/trim/destroy events;
 * for a trim the size is the minBytesToKeep that was asked for. */
#include "recorder/cupti_convert.h"

#include <string.h>

#include <cupti.h>

static uint8_t mem_kind(CUpti_ActivityMemoryKind k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return GMT_MEM_PAGEABLE;
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return GMT_MEM_PINNED;
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: return GMT_MEM_DEVICE;
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return GMT_MEM_ARRAY;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: return GMT_MEM_MANAGED;
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return GMT_MEM_DEVICE_STATIC;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return GMT_MEM_MANAGED; /* static managed */
    default: return GMT_MEM_UNKNOWN;
  }
}

int rec_cupti_convert(const void *record, uint64_t t0, gmt_event_t *out) {
  const CUpti_Activity *a = record;
  memset(out, 0, sizeof *out);
  out->stream = GMT_STREAM_NONE;
  out->callsite = GMT_NO_STRING;
  switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      const CUpti_ActivityMemory4 *m = record;
      if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION)
        out->kind = GMT_EV_ALLOC;
      else if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
        out->kind = GMT_EV_FREE;
      else
        return 0;
      out->ts_ns = m->timestamp > t0 ? m->timestamp - t0 : 0;
      out->addr = m->address;
      out->size = m->bytes;
      out->corr_id = m->correlationId;
      out->context = m->contextId;
      out->device = (uint16_t)m->deviceId;
      out->mem_kind = mem_kind(m->memoryKind);
      if (m->isAsync) {
        out->flags |= GMT_F_ASYNC;
        if (m->streamId != CUPTI_INVALID_STREAM_ID) out->stream = m->streamId;
        if (m->memoryPoolConfig.address) out->flags |= GMT_F_FROM_POOL;
      }
      return 1;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL: {
      /* CUpti_ActivityMemoryPool3 (CUDA 13) extends MemoryPool2; only shared fields are read */
      const CUpti_ActivityMemoryPool3 *p = record;
      switch (p->memoryPoolOperationType) {
        case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED:
          out->kind = GMT_EV_POOL_CREATE;
          out->size = p->size;
          break;
        case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED:
          out->kind = GMT_EV_POOL_DESTROY;
          out->size = p->size;
          break;
        case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED:
          out->kind = GMT_EV_POOL_TRIM;
          out->size = p->minBytesToKeep;
          break;
        default: return 0;
      }
      out->ts_ns = p->timestamp > t0 ? p->timestamp - t0 : 0;
      out->addr = p->address;
      out->corr_id = p->correlationId;
      out->device = (uint16_t)p->deviceId;
      out->mem_kind = GMT_MEM_DEVICE;
      return 1;
    }
    default: return 0;
  }
}
