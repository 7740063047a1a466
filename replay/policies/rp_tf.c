/* rp_tf.c: the `tf` policy: TensorFlow's GPU allocator, configured in TensorFlow's own words.
 *
 * tf[:KEY=VALUE,...], the keys spelled as TensorFlow spells them:
 *   TF_FORCE_GPU_ALLOW_GROWTH=true|false   env; overrides allow_growth (GPUBFCAllocator,
 *                                          GetAllowGrowthValue: exact "true"/"false" only)
 *   allow_growth=true|false                GPUOptions.allow_growth, what
 *                                          tf.config.experimental.set_memory_growth sets
 *   memory_limit=MiB|SIZE                  a logical device's memory_limit (MiB, as
 *                                          tf.config.LogicalDeviceConfiguration takes it)
 *   per_process_gpu_memory_fraction=F      GPUOptions field; 0 means unset, as in TF
 *   TF_DEVICE_MIN_SYS_MEMORY_IN_MB=N       env; the memory TF leaves to the system
 *   TF_ENABLE_GPU_GARBAGE_COLLECTION=true|false  env (GetGarbageCollectionValue: exact words)
 *   TF_GPU_ALLOCATOR=cuda_malloc_async|cuda_malloc  env (gpu_process_state.cc)
 * Settings are separated by commas or spaces, so an exported line goes in as it is (gpureplay
 * also takes "TF_...", "memory_limit=..." and "per_process_gpu_memory_fraction=..." without
 * the "tf:"). A value TensorFlow would not act on is an error here that names the key
 * and the accepted values: TF itself logs and carries on with its default, which is rarely
 * what was meant.
 *
 * What each becomes (TF >= 2.16 source; 2.5-2.15 the same rules):
 *  - Memory limit (gpu_device.cc): a logical device's memory_limit_mb wins (converted as
 *    static_cast<int64_t>(float MiB) << 20, fractions of a MiB truncated). Else
 *    SingleVirtualDeviceMemoryLimit: per_process_gpu_memory_fraction F > 0 gives
 *    total * F; F = 0 gives available - MinSystemMemory(available, cc) (1800 MiB for compute
 *    capability >= 9, 225 MiB under 2 GiB; rp_bfc_tf_default_limit), and
 *    TF_DEVICE_MIN_SYS_MEMORY_IN_MB=N then replaces either with available - N MiB when
 *    N MiB <= available. TF's `available` is the memory free when the device is created;
 *    the model has the device's total (the driver's total_memory): the difference is what
 *    the CUDA context and other processes hold at start-up.
 *  - Allocator (GPUProcessState::GetGPUAllocator): GPUBFCAllocator over DeviceMemAllocator
 *    (cuMemAlloc regions, never coalesced), allow_growth as above, garbage_collection from
 *    TF_ENABLE_GPU_GARBAGE_COLLECTION (default true), fragmentation_fraction 0 (128 MiB): the
 *    BFC core (rp_bfc_core.c) with those options. cuda_malloc_async replaces it with
 *    GpuCudaMallocAsyncAllocator(device, limit): the driver's pool with its release
 *    threshold at the limit = the `async` policy with release_threshold=limit (measured on
 *    a GPU; on the simulator the pool model's range, replay/engine/sim_pool.c). cuda_malloc: GPUcudaMallocAllocator, cuMemAlloc/cuMemFree per request = the
 *    `direct` policy. The BFC's 10 s retry wait (AllocateRawInternalWithRetry) waits for
 *    other threads' frees; a replay has none, so it cannot change an outcome and is not run.
 * The policy is a thin shell: it builds the inner policy and forwards every call to it. */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/policies/rp_conf.h"
#include "replay/policies/rp_policies.h"

typedef struct tf_conf {
  char force_growth[RP_CONF_STR_MAX];
  char allow_growth[RP_CONF_STR_MAX];
  char memory_limit[RP_CONF_STR_MAX];
  char fraction[RP_CONF_STR_MAX];
  char min_sys[RP_CONF_STR_MAX];
  char gc[RP_CONF_STR_MAX];
  char allocator[RP_CONF_STR_MAX];
} tf_conf_t;

static const rp_conf_key_t tf_keys[] = {
    {"TF_FORCE_GPU_ALLOW_GROWTH", RP_CONF_STRING, offsetof(tf_conf_t, force_growth)},
    {"allow_growth", RP_CONF_STRING, offsetof(tf_conf_t, allow_growth)},
    {"memory_limit", RP_CONF_STRING, offsetof(tf_conf_t, memory_limit)},
    {"per_process_gpu_memory_fraction", RP_CONF_STRING, offsetof(tf_conf_t, fraction)},
    {"TF_DEVICE_MIN_SYS_MEMORY_IN_MB", RP_CONF_STRING, offsetof(tf_conf_t, min_sys)},
    {"TF_ENABLE_GPU_GARBAGE_COLLECTION", RP_CONF_STRING, offsetof(tf_conf_t, gc)},
    {"TF_GPU_ALLOCATOR", RP_CONF_STRING, offsetof(tf_conf_t, allocator)},
    {NULL, RP_CONF_FLAG, 0},
};

#define BAD(key, ...) gm_err_set(err, GM_ERR_INVAL, "tf: bad value for '" key "': " __VA_ARGS__)

/* TF's env switches compare with strcmp against "true" and "false" and nothing else. */
static int env_bool(const char *v) { return strcmp(v, "true") == 0 ? 1 : strcmp(v, "false") == 0 ? 0 : -1; }

/* memory_limit: a bare number is MiB, a float as in the proto (memory_limit_mb is a float;
 * gpu_device.cc truncates it to whole MiB); a size with a unit must be whole MiB. */
static gm_status_t parse_memory_limit(const char *v, uint64_t *bytes, gm_err_t *err) {
  const char *hint = "(MiB as tf.config.LogicalDeviceConfiguration takes it, e.g. 4096, or a size such as 4GiB)";
  int bare = *v != '\0';
  for (const char *p = v; *p; p++)
    if (!isdigit((unsigned char)*p) && *p != '.') bare = 0;
  if (bare) {
    char *end = NULL;
    double d = strtod(v, &end);
    float mb = (float)d;
    if (*end || !isfinite(mb) || mb < 1.0f || mb >= 8796093022208.0f /* 2^43 MiB: << 20 fits */) return BAD("memory_limit", "'%s' %s", v, hint);
    *bytes = (uint64_t)(int64_t)mb << 20;
    return GM_OK;
  }
  uint64_t b = 0;
  gm_err_t e = {0};
  if (gm_parse_size(v, &b, &e) < 0 || b < (1ull << 20)) return BAD("memory_limit", "'%s' %s", v, hint);
  if (b % (1ull << 20))
    return BAD("memory_limit", "'%s' is not a whole number of MiB (TensorFlow's memory_limit counts MiB)", v);
  *bytes = b;
  return GM_OK;
}

/* per_process_gpu_memory_fraction: a double; 0 is TF's "unset"; above 1 TF allocates unified
 * memory (oversubscription), which the model does not have. */
static gm_status_t parse_fraction(const char *v, double *f, gm_err_t *err) {
  char *end = NULL;
  double d = strtod(v, &end);
  if (*end || !(d >= 0.0) || !isfinite(d) || !(isdigit((unsigned char)*v) || *v == '.'))
    return BAD("per_process_gpu_memory_fraction", "'%s' (a fraction in [0, 1]; 0 means unset)", v);
  if (d > 1.0)
    return BAD("per_process_gpu_memory_fraction",
               "'%s': above 1 TensorFlow allocates unified memory (oversubscription), which is not modelled", v);
  *f = d;
  return GM_OK;
}

/* The memory limit TF computes for the device (see the header). */
static gm_status_t tf_limit(const tf_conf_t *c, uint64_t total, uint64_t *limit, gm_err_t *err) {
  double f = 0;
  uint64_t mb = 0;
  gm_status_t st;
  if (c->fraction[0] && (st = parse_fraction(c->fraction, &f, err)) < 0) return st;
  if (c->min_sys[0]) {
    gm_err_t e = {0};
    if (gm_parse_u64(c->min_sys, &mb, &e) < 0 || mb > (UINT64_MAX >> 20))
      return BAD("TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "'%s' (a whole number of MiB, >= 0)", c->min_sys);
  }
  /* A logical device's memory_limit skips SingleVirtualDeviceMemoryLimit altogether. */
  if (c->memory_limit[0]) return parse_memory_limit(c->memory_limit, limit, err);
  *limit = f > 0 ? (uint64_t)(int64_t)((double)total * f) : rp_bfc_tf_default_limit(total);
  if (c->min_sys[0] && (mb << 20) <= total) *limit = total - (mb << 20); /* else TF ignores it */
  return GM_OK;
}

static gm_status_t tf_create(const char *conf, const rp_driver_t *drv, rp_policy_t **out, gm_err_t *err) {
  tf_conf_t c;
  memset(&c, 0, sizeof c);
  char words[512]; /* spaces separate settings as commas do */
  if (!conf) conf = "";
  if (strlen(conf) >= sizeof words) return gm_err_set(err, GM_ERR_INVAL, "tf: settings longer than %zu bytes", sizeof words - 1);
  for (size_t i = 0;; i++) {
    words[i] = isspace((unsigned char)conf[i]) ? ',' : conf[i];
    if (!conf[i]) break;
  }
  gm_status_t st = rp_conf_parse("tf", words, tf_keys, NULL, &c, err);
  if (st < 0) return st;
  rp_bfc_opts_t o = {0};
  o.garbage_collection = 1;
  if (c.allow_growth[0]) {
    const char *v = c.allow_growth;
    if (strcmp(v, "true") == 0 || strcmp(v, "True") == 0) o.allow_growth = 1;
    else if (strcmp(v, "false") != 0 && strcmp(v, "False") != 0)
      return BAD("allow_growth", "'%s' (true or false)", v);
  }
  if (c.force_growth[0]) {
    int b = env_bool(c.force_growth);
    if (b < 0)
      return BAD("TF_FORCE_GPU_ALLOW_GROWTH",
                 "'%s' (TensorFlow accepts exactly true or false; it ignores anything else and keeps allow_growth)",
                 c.force_growth);
    o.allow_growth = b;
  }
  if (c.gc[0]) {
    int b = env_bool(c.gc);
    if (b < 0)
      return BAD("TF_ENABLE_GPU_GARBAGE_COLLECTION",
                 "'%s' (TensorFlow accepts exactly true or false; it ignores anything else and keeps collecting)", c.gc);
    o.garbage_collection = b;
  }
  enum { BFC, ASYNC, DIRECT } kind = BFC;
  if (strcmp(c.allocator, "cuda_malloc_async") == 0) kind = ASYNC;
  else if (strcmp(c.allocator, "cuda_malloc") == 0) kind = DIRECT;
  else if (strcmp(c.allocator, "memory_guard") == 0)
    return BAD("TF_GPU_ALLOCATOR", "'memory_guard' (GPUDebugAllocator's guard bytes) is not modelled");
  else if (c.allocator[0])
    return BAD("TF_GPU_ALLOCATOR",
               "'%s' (cuda_malloc_async or cuda_malloc; TensorFlow ignores other values and keeps its BFC)", c.allocator);
  st = tf_limit(&c, drv->total_memory, &o.memory_limit, err);
  if (st < 0) return st;

  const rp_policy_ops_t *ops; /* the inner policy's: bfc, async or direct */
  rp_policy_t *in = NULL;
  if (kind == BFC) {
    ops = &rp_bfc_ops;
    st = rp_bfc_policy_new("tf", conf, drv, &o, &in, err);
  } else if (kind == ASYNC) {
    char inner[64];
    snprintf(inner, sizeof inner, "release_threshold=%" PRIu64, o.memory_limit);
    ops = &rp_async_ops;
    st = rp_async_ops.create(inner, drv, &in, err);
    if (st < 0) gm_err_wrap(err, "tf: TF_GPU_ALLOCATOR=cuda_malloc_async (the async policy)");
  } else {
    ops = &rp_direct_ops;
    st = rp_direct_ops.create("", drv, &in, err);
    if (st < 0) gm_err_wrap(err, "tf: TF_GPU_ALLOCATOR=cuda_malloc (the direct policy)");
  }
  if (st < 0) return st;
  return rp_wrap_new("tf", conf, ops, in, out, err);
}

const rp_policy_ops_t rp_tf_ops = {
    .name = "tf",
    .description = "TensorFlow in its own words (tf[:TF_FORCE_GPU_ALLOW_GROWTH=true,memory_limit=MiB,"
                   "per_process_gpu_memory_fraction=F,TF_GPU_ALLOCATOR=cuda_malloc_async,...])",
    .create = tf_create,
    RP_WRAP_FORWARD,
};
