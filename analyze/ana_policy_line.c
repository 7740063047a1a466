/* ana_policy_line.c: a replayed setting in the words its user types. ana_policy_env_line: a
 * policy spec (pytorch:..., jax:..., tf:..., bfc:..., prealloc:...) as the line a user pastes
 * (environment exports, and TensorFlow's GPUOptions as the Python a user writes);
 * ana_conf_warnings: the settings in a trace's own PYTORCH_CUDA_ALLOC_CONF that do not do what
 * their author meant. Used by recommend, report and ranks. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/ana_db_internal.h"

/* Native-allocator keys of PYTORCH_CUDA_ALLOC_CONF that cudaMallocAsync ignores. */
static const char *const native_keys[] = {
    "max_split_size_mb", "roundup_power2_divisions", "garbage_collection_threshold",
    "expandable_segments", "max_non_split_rounding_mb", "large_segment_size_mb",
    "release_lock_on_cudamalloc", "pinned_use_cuda_host_register", NULL};

static int has_key(const char *conf, const char *key) {
  size_t n = strlen(key);
  for (const char *p = conf; (p = strstr(p, key)); p += n)
    if ((p == conf || p[-1] == ',' || p[-1] == ' ') && (p[n] == ':' || p[n] == '=')) return 1;
  return 0;
}

int ana_conf_warnings(const char *conf, char msgs[][256], int cap) {
  int n = 0;
  if (!conf) return 0;
  if (strstr(conf, "backend:cudaMallocAsync")) {
    for (const char *const *k = native_keys; *k; k++)
      if (has_key(conf, *k)) {
        if (n < cap)
          snprintf(msgs[n], 256, "'%s' is a native-allocator key: backend:cudaMallocAsync ignores it", *k);
        n++;
      }
  }
  if (has_key(conf, "garbage_collection_threshold") && !has_key(conf, "per_process_memory_fraction")) {
    if (n < cap)
      snprintf(msgs[n], 256,
               "garbage_collection_threshold is a fraction of the per-process memory limit: without "
               "per_process_memory_fraction (or torch.cuda.set_per_process_memory_fraction) it never triggers");
    n++;
  }
  return n;
}

static int shell_safe(const char *s) {
  for (; *s; s++)
    if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:.,=-/+", *s)) return 0;
  return 1;
}

/* TensorFlow's words: its environment variables as exports, its GPUOptions fields as the Python
 * a user writes before the first op. */
static void tf_line(const char *arg, char *buf, size_t n) {
  if (!*arg) {
    snprintf(buf, n, "unset TF_FORCE_GPU_ALLOW_GROWTH TF_GPU_ALLOCATOR   # TensorFlow's default: "
                     "one region of the GPU's memory less 1800 MiB");
    return;
  }
  char env[256] = "", py[512] = "";
  size_t ue = 0, up = 0;
  for (const char *p = arg; *p;) {
    while (*p == ',' || *p == ' ') p++;
    size_t l = strcspn(p, ", ");
    if (!l) break;
    const char *eq = memchr(p, '=', l);
    int kl = eq ? (int)(eq - p) : (int)l;
    const char *v = eq ? eq + 1 : "";
    int vl = eq ? (int)(l - (size_t)kl - 1) : 0;
    int w = 0;
    if (kl >= 3 && strncmp(p, "TF_", 3) == 0)
      w = snprintf(env + ue, sizeof env - ue, "%s%.*s", ue ? " " : "export ", (int)l, p), ue += w > 0 ? (size_t)w : 0;
    else if (kl == 12 && strncmp(p, "memory_limit", 12) == 0)
      w = snprintf(py + up, sizeof py - up, "%stf.config.set_logical_device_configuration(gpu, "
                   "[tf.config.LogicalDeviceConfiguration(memory_limit=%.*s)])", up ? "; " : "", vl, v),
      up += w > 0 ? (size_t)w : 0;
    else if (kl == 31 && strncmp(p, "per_process_gpu_memory_fraction", 31) == 0)
      w = snprintf(py + up, sizeof py - up, "%scfg = tf.compat.v1.ConfigProto(); "
                   "cfg.gpu_options.per_process_gpu_memory_fraction = %.*s  (the Session's config)",
                   up ? "; " : "", vl, v),
      up += w > 0 ? (size_t)w : 0;
    else if (kl == 12 && strncmp(p, "allow_growth", 12) == 0)
      w = snprintf(py + up, sizeof py - up, "%stf.config.experimental.set_memory_growth(gpu, %s)",
                   up ? "; " : "", vl == 4 && !strncmp(v, "true", 4) ? "True" : "False"),
      up += w > 0 ? (size_t)w : 0;
    else
      w = snprintf(py + up, sizeof py - up, "%s%.*s", up ? "; " : "# ", (int)l, p), up += w > 0 ? (size_t)w : 0;
    p += l;
    if (ue >= sizeof env) ue = sizeof env - 1;
    if (up >= sizeof py) up = sizeof py - 1;
  }
  snprintf(buf, n, "%s%s%s", env, *env && *py ? "   # and in Python: " : "", py);
}

void ana_policy_env_line(const char *policy, uint64_t gpu_total_mem, char *buf, size_t n) {
  const char *colon = strchr(policy, ':');
  size_t fam = colon ? (size_t)(colon - policy) : strlen(policy);
  const char *arg = colon ? colon + 1 : "";
  if (fam == 7 && strncmp(policy, "pytorch", 7) == 0) {
    if (!*arg) snprintf(buf, n, "unset PYTORCH_CUDA_ALLOC_CONF   # PyTorch's default caching allocator");
    else if (shell_safe(arg)) snprintf(buf, n, "PYTORCH_CUDA_ALLOC_CONF=%s", arg);
    else snprintf(buf, n, "PYTORCH_CUDA_ALLOC_CONF='%s'", arg);
  } else if (fam == 5 && strncmp(policy, "async", 5) == 0) {
    snprintf(buf, n, "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync");
  } else if (fam == 3 && strncmp(policy, "jax", 3) == 0) {
    /* The jax policy's conf is JAX's own words: the line is the words, as exports. */
    if (!*arg) {
      snprintf(buf, n, "unset XLA_PYTHON_CLIENT_PREALLOCATE XLA_PYTHON_CLIENT_MEM_FRACTION "
                       "XLA_PYTHON_CLIENT_ALLOCATOR   # JAX's default: preallocate 75%% of the GPU");
    } else {
      size_t used = (size_t)snprintf(buf, n, "export");
      for (const char *p = arg; *p && used < n;) {
        while (*p == ',' || *p == ' ') p++;
        size_t l = strcspn(p, ", ");
        if (!l) break;
        int w = snprintf(buf + used, n - used, " %.*s", (int)l, p);
        if (w < 0) break;
        used += (size_t)w;
        p += l;
      }
    }
  } else if (fam == 2 && strncmp(policy, "tf", 2) == 0) {
    tf_line(arg, buf, n);
  } else if (fam == 4 && strncmp(policy, "cupy", 4) == 0) {
    if (!*arg) snprintf(buf, n, "unset CUPY_GPU_MEMORY_LIMIT   # CuPy's default memory pool");
    else snprintf(buf, n, "export %s", arg);
  } else if (fam == 3 && strncmp(policy, "bfc", 3) == 0) {
    if (strcmp(arg, "growth") == 0)
      snprintf(buf, n, "TF_FORCE_GPU_ALLOW_GROWTH=true   # JAX: XLA_PYTHON_CLIENT_PREALLOCATE=false");
    else if (strncmp(arg, "prealloc=", 9) == 0)
      snprintf(buf, n, "TF_FORCE_GPU_ALLOW_GROWTH=false   # with per_process_gpu_memory_fraction=%s in tf GPUOptions", arg + 9);
    else snprintf(buf, n, "TF_FORCE_GPU_ALLOW_GROWTH=false   # TensorFlow's default BFC preallocation");
  } else if (fam == 8 && strncmp(policy, "prealloc", 8) == 0) {
    double frac = -1;
    uint64_t size = 0;
    if (!*arg) frac = 0.75;
    else if (strchr(arg, '.') && !strpbrk(arg, "BbKkMmGgTt")) frac = atof(arg);
    else if (gm_parse_size(arg, &size, NULL) == GM_OK && gpu_total_mem)
      frac = (double)size / (double)gpu_total_mem;
    if (frac > 0) {
      /* Round up to the hundredth so the arena is never smaller than what was replayed. */
      double up = (double)(int64_t)(frac * 100.0 + 0.999999) / 100.0;
      snprintf(buf, n, "XLA_PYTHON_CLIENT_MEM_FRACTION=%.2f   # JAX; TensorFlow: per_process_gpu_memory_fraction=%.2f", up, up);
    } else {
      snprintf(buf, n, "XLA_PYTHON_CLIENT_MEM_FRACTION=<%s / GPU memory>   # the GPU's memory is not in the trace", arg);
    }
  } else if (fam == 6 && strncmp(policy, "direct", 6) == 0) {
    snprintf(buf, n, "PYTORCH_NO_CUDA_MEMORY_CACHING=1   # slow: a driver call per tensor");
  } else {
    snprintf(buf, n, "# no environment setting known for policy '%s'", policy);
  }
}
