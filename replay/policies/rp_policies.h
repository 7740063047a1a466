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

#ifdef __cplusplus
}
#endif
#endif /* RP_POLICIES_H */
