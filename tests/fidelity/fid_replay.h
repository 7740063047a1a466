/* fid_replay.h: the fidelity harness's replay of an imported PyTorch snapshot.
 *
 * The replay engine (replay/engine, the API gpureplay drives) feeds the trace's tensor requests
 * (ALLOC, and FREE = torch's free_completed, the moment a block becomes reusable), in order, to
 * the policy, over a backend of the harness's own; the engine's observer reports every driver
 * call the policy makes; the trace's own segment events are never replayed: they are the oracle.
 * The oracle is the snapshot's segment_alloc / segment_free / segment_map / segment_unmap
 * sequence, each tagged with the index of the tensor request it happened in (torch records a
 * segment event inside the malloc or free that caused it, just before that request's entry).
 * The replay's driver calls get the same tag; the two sequences must be equal, size for size.
 * Multi-device traces are replayed with one engine (one policy) per device.
 *
 * Limit: a history that starts late (its trace begins with synthetic initial-state events) is
 * replayed by allocating the synthetic blocks first; the policy cannot be put into the real
 * layout of memory that existed before the first entry, so such traces are not compared
 * segment for segment (synthetic segments are left out of the oracle; res->synthetic > 0 says
 * so). Every corpus snapshot is recorded from the first allocation. */
#ifndef FID_REPLAY_H
#define FID_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "base/gm_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fid_op { FID_SEG_ALLOC = 1, FID_SEG_FREE, FID_MAP, FID_UNMAP } fid_op_t;

typedef struct fid_seg {
  uint8_t op;        /* fid_op_t */
  uint16_t device;
  uint64_t size;
  uint64_t req;      /* index of the tensor request (ALLOC/FREE, all devices) it happened in */
  uint64_t addr;     /* segment / mapping address (the real one in the expected sequence) */
} fid_seg_t;

typedef struct fid_seq {
  fid_seg_t *v;
  size_t n, cap;
} fid_seq_t;

typedef struct fid_result {
  fid_seq_t expected, actual;
  uint64_t requests;        /* ALLOC + FREE events replayed */
  uint64_t synthetic;       /* synthetic initial-state events in the trace */
  uint64_t expected_peak;   /* peak of the snapshot's own segment/map sums */
  uint64_t actual_peak;     /* peak reserved of the replay (mem_alloc + map - frees) */
  uint64_t ooms;            /* requests the policy failed */
  int64_t diverge;          /* index of the first differing segment event, -1 if equal */
  char conf[1024];          /* the pytorch conf that was replayed */
  char detail[2048];        /* the first divergence in words, with the request that caused it */
  /* Finer and earlier than segment events: the first alloc whose block lands at a different
   * (segment number, offset) than in the real run (cudaMalloc segments only; -1 if none). */
  int64_t place_diverge;    /* request index */
  char place_detail[512];
} fid_result_t;

/* Where the replay's driver puts segments. torch's best fit breaks ties between equal-size free
 * blocks by address, so the address choice, made by the CUDA driver outside the allocator, can
 * change the allocator's decisions.
 *   FID_ADDR_BUMP    ascending from a bump pointer, never reused (the older prediction);
 *   FID_ADDR_ORACLE  the real run's address for a cudaMalloc whose place and size in the sequence
 *                    match the snapshot's (bump otherwise): exact equality needs it;
 *   FID_ADDR_DRIVER  the driver's placement model (replay/engine/va_model.h), as a prediction has. */
typedef enum fid_addr { FID_ADDR_BUMP = 0, FID_ADDR_ORACLE = 1, FID_ADDR_DRIVER = 2 } fid_addr_t;

/* Replay trace_path with policy spec "pytorch:<conf>", segment addresses as addr_mode says. conf NULL: the trace's own settings
 * (header "torch.alloc_conf", else "PYTORCH_CUDA_ALLOC_CONF"), with `extra_conf` (e.g.
 * "per_process_memory_fraction:0.01", may be NULL) appended. total_memory: what the driver
 * reports as the device's memory (the fraction is of it). */
gm_status_t fid_replay(const char *trace_path, const char *conf, const char *extra_conf,
                       uint64_t total_memory, fid_addr_t addr_mode, fid_result_t *res, gm_err_t *err);
void fid_result_free(fid_result_t *res);
const char *fid_op_name(unsigned op);

#ifdef __cplusplus
}
#endif
#endif /* FID_REPLAY_H */
