/* gpureplay_grid.c: the settings gpureplay speaks: each framework's --sweep grid (the
 * settings people try, in the policies' own words), and the line users paste
 * (PYTORCH_CUDA_ALLOC_CONF=..., XLA_PYTHON_CLIENT_MEM_FRACTION=..., TF_...) turned into a
 * policy spec. Shared by the command line, the tuner, --explain-oom and the benchmarks. */
#include <stdio.h>
#include <string.h>

#include "replay/tool/gpureplay.h"

/* The --sweep grid: every user-settable PyTorch key at values people try, a few
 * combinations, and the other frameworks' allocators. */
const char *const gr_sweep_grid[] = {
    "pytorch",
    "pytorch:expandable_segments:True",
    "pytorch:max_split_size_mb:64",
    "pytorch:max_split_size_mb:128",
    "pytorch:max_split_size_mb:256",
    "pytorch:max_split_size_mb:512",
    "pytorch:roundup_power2_divisions:4",
    "pytorch:roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
    "pytorch:garbage_collection_threshold:0.8,per_process_memory_fraction:0.9",
    "pytorch:expandable_segments:True,roundup_power2_divisions:4",
    "pytorch:max_split_size_mb:128,roundup_power2_divisions:[256:1,512:2,1024:4,>:8],"
    "garbage_collection_threshold:0.8,per_process_memory_fraction:0.9",
    "bfc",
    "bfc:growth",
    "prealloc",
    "direct",
    NULL,
};

/* JAX's settings (jax policy, JAX's words): the default preallocation, growth, smaller
 * preallocations, the platform allocator; cuda_async where there is a GPU. */
static const char *const jax_grid[] = {
    "jax",
    "jax:XLA_PYTHON_CLIENT_PREALLOCATE=false",
    "jax:XLA_PYTHON_CLIENT_MEM_FRACTION=.5",
    "jax:XLA_PYTHON_CLIENT_MEM_FRACTION=.25",
    "jax:XLA_PYTHON_CLIENT_MEM_FRACTION=.1",
    "jax:XLA_PYTHON_CLIENT_ALLOCATOR=platform",
    "jax:XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async,XLA_PYTHON_CLIENT_PREALLOCATE=false",
    NULL,
};

/* TensorFlow's (tf policy, TF's words). */
static const char *const tf_grid[] = {
    "tf",
    "tf:TF_FORCE_GPU_ALLOW_GROWTH=true",
    "tf:per_process_gpu_memory_fraction=0.5",
    "tf:per_process_gpu_memory_fraction=0.25",
    "tf:TF_GPU_ALLOCATOR=cuda_malloc_async",
    NULL,
};

/* CuPy's default pool, and what the arrays need (set_allocator(None)). */
static const char *const cupy_grid[] = {"cupy", "direct", NULL};

/* RAPIDS RMM (an imported log): its pool resources are not modelled; the driver's allocator
 * (cuda_memory_resource) and pool (cuda_async_memory_resource) are, and the caching allocators
 * say what they would reserve for the same requests. */
static const char *const rmm_grid[] = {"direct", "async", "pytorch", "pytorch:expandable_segments:True", "bfc:growth", NULL};

const char *const *gr_sweep_grid_for(unsigned framework) {
  switch (framework) {
    case GMT_FW_JAX: return jax_grid;
    case GMT_FW_TENSORFLOW: return tf_grid;
    case GMT_FW_CUPY: return cupy_grid;
    case GMT_FW_RMM: return rmm_grid;
    default: return gr_sweep_grid;
  }
}

int gr_policy_from_env(const char *spec, char *out, size_t n) {
  static const char *const vars[] = {"PYTORCH_CUDA_ALLOC_CONF=", "PYTORCH_ALLOC_CONF="};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    size_t l = strlen(vars[i]);
    if (strncmp(spec, vars[i], l) != 0) continue;
    const char *conf = spec + l;
    /* A value pasted with its shell quotes. */
    size_t cl = strlen(conf);
    if (cl >= 2 && (conf[0] == '\'' || conf[0] == '"') && conf[cl - 1] == conf[0]) {
      conf++;
      cl -= 2;
    }
    int w;
    if (strstr(conf, "backend:cudaMallocAsync")) w = snprintf(out, n, "async");
    else if (cl == 0) w = snprintf(out, n, "pytorch");
    else w = snprintf(out, n, "pytorch:%.*s", (int)cl, conf);
    return w >= 0 && (size_t)w < n ? 0 : -1;
  }
  /* JAX's and TensorFlow's variables (and TF's GPUOptions fields) are their policies' own
   * words: the whole line is the conf, "A=1 B=2" as a shell exports it. */
  static const struct {
    const char *prefix, *policy;
  } words[] = {
      {"XLA_PYTHON_CLIENT_", "jax"},  {"XLA_CLIENT_MEM_FRACTION=", "jax"},
      {"TF_", "tf"},                  {"per_process_gpu_memory_fraction=", "tf"},
      {"memory_limit=", "tf"},
  };
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    if (strncmp(spec, words[i].prefix, strlen(words[i].prefix)) == 0) {
      int w = snprintf(out, n, "%s:%s", words[i].policy, spec);
      return w >= 0 && (size_t)w < n ? 0 : -1;
    }
  int w = snprintf(out, n, "%s", spec);
  return w >= 0 && (size_t)w < n ? 0 : -1; /* never a spec cut short: a cut token reads as another */
}
