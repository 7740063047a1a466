/* rp_policies.h: the policies this package implements, for the registry and for tests.
 * Engines should go through rp_policy_find()/rp_policy_create() (rp_policy.h) instead. */
#ifndef RP_POLICIES_H
#define RP_POLICIES_H

#include "replay/policies/rp_bfc_core.h"
#include "replay/policies/rp_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const rp_policy_ops_t rp_bfc_ops;      /* rp_bfc.c: TensorFlow's BFC */
extern const rp_policy_ops_t rp_prealloc_ops; /* rp_bfc.c: JAX/XLA, BFC in one arena */
extern const rp_policy_ops_t rp_tf_ops;       /* rp_tf.c: TensorFlow, in TF's own words */
extern const rp_policy_ops_t rp_direct_ops;   /* rp_direct.c: every request to the driver */
extern const rp_policy_ops_t rp_async_ops;    /* rp_async.c: the driver's stream-ordered pool */
extern const rp_policy_ops_t rp_jax_ops;      /* rp_jax.c: JAX's settings in its own words */
extern const rp_policy_ops_t rp_cupy_ops;     /* rp_cupy.c: CuPy's default memory pool */

/* TensorFlow's default memory limit on a device of `total` bytes when no fraction is set:
 * total minus MinSystemMemory (225 MiB under 2 GiB, else 1800 MiB: TF's value for compute
 * capability >= 9, i.e. H100/H200). TF subtracts it from the memory free at start-up; the
 * model has only the total. A device no larger than the reserve gets its whole total. */
uint64_t rp_bfc_tf_default_limit(uint64_t total);

/* A policy driven by rp_bfc_ops (alloc, free, stats, ... of the bfc policy) with the given
 * options, whose spec() is "name[:conf]": for policies that speak another framework's words
 * and run the BFC core underneath (tf). */
gm_status_t rp_bfc_policy_new(const char *name, const char *conf, const rp_driver_t *drv, const rp_bfc_opts_t *opts,
                              rp_policy_t **out, gm_err_t *err);

/* A policy that forwards every operation to `inner` (created with inner_ops) and whose spec()
 * is "name[:conf]" (rp_wrap.c): jax and tf, which speak their framework's words over another
 * policy. Takes inner: on failure it is destroyed. Their ops tables use RP_WRAP_FORWARD. */
gm_status_t rp_wrap_new(const char *name, const char *conf, const rp_policy_ops_t *inner_ops,
                        rp_policy_t *inner, rp_policy_t **out, gm_err_t *err);
void rp_wrap_destroy(rp_policy_t *p);
gm_status_t rp_wrap_alloc(rp_policy_t *p, uint64_t size, uint64_t stream, uint64_t *addr, gm_err_t *err);
gm_status_t rp_wrap_free(rp_policy_t *p, uint64_t addr, gm_err_t *err);
gm_status_t rp_wrap_empty_cache(rp_policy_t *p, gm_err_t *err);
gm_status_t rp_wrap_release_all(rp_policy_t *p, gm_err_t *err);
void rp_wrap_stats(const rp_policy_t *p, rp_policy_stats_t *out);
const uint64_t *rp_wrap_allocated_bytes(const rp_policy_t *p);
gm_status_t rp_wrap_check(const rp_policy_t *p, gm_err_t *err);
const char *rp_wrap_spec(const rp_policy_t *p);
int rp_wrap_oom_report(const rp_policy_t *p, uint64_t size, uint64_t stream, rp_oom_report_t *out);
gm_status_t rp_wrap_alloc_h(rp_policy_t *p, uint64_t size, uint64_t stream, uint64_t *addr, uint64_t *handle,
                            gm_err_t *err);
gm_status_t rp_wrap_free_h(rp_policy_t *p, uint64_t handle, gm_err_t *err);
uint64_t rp_wrap_handle_addr(const rp_policy_t *p, uint64_t handle);
#define RP_WRAP_FORWARD                                                                         \
  .destroy = rp_wrap_destroy, .alloc = rp_wrap_alloc, .free = rp_wrap_free,                    \
  .empty_cache = rp_wrap_empty_cache, .release_all = rp_wrap_release_all, .stats = rp_wrap_stats, \
  .check = rp_wrap_check, .spec = rp_wrap_spec, .oom_report = rp_wrap_oom_report,         \
  .alloc_h = rp_wrap_alloc_h, .free_h = rp_wrap_free_h, .handle_addr = rp_wrap_handle_addr, \
  .allocated_bytes = rp_wrap_allocated_bytes

#ifdef __cplusplus
}
#endif
#endif /* RP_POLICIES_H */
