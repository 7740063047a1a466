/* gpurec_env.c: the environment gpurec gives the job it records: the injection library, what
 * each --mode switches in the frameworks' allocators (the user's PyTorch keys kept, the
 * backend replaced), and the check of the user's own PYTORCH_CUDA_ALLOC_CONF by the rules
 * gpureplay's --policy uses. Warnings and errors are gpurec's lines on stderr (the launcher's
 * own: the library it calls prints nothing). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/gm_base.h"
#include "recorder/gpurec_env.h"
#include "recorder/rec_callsite.h"
#include "recorder/rec_core.h"
#include "replay/policies/pytorch/pt_conf.h"

/* "expandable_segments:True,backend:native" + backend:cudaMallocAsync -> the user's keys with
 * the backend replaced, so what else they set is still in force and recorded in the header. */
static char *merge_alloc_conf(const char *user) {
  const char *want = "backend:cudaMallocAsync";
  size_t cap = (user ? strlen(user) : 0) + strlen(want) + 2;
  char *out = malloc(cap);
  if (!out) return NULL;
  strcpy(out, want);
  if (!user) return out;
  char *copy = strdup(user);
  if (!copy) {
    free(out);
    return NULL;
  }
  for (char *save = NULL, *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
    while (*kv == ' ') kv++;
    if (!*kv || strncmp(kv, "backend", 7) == 0) continue;
    strcat(out, ",");
    strcat(out, kv);
  }
  free(copy);
  return out;
}

int gpurec_set_env(const char *k, const char *v) {
  if (setenv(k, v, 1) != 0) {
    fprintf(stderr, "gpurec: error: cannot set %s: %s\n", k, strerror(errno));
    return -1;
  }
  return 0;
}

/* PyTorch itself rejects an unknown key only when the job first allocates, after the model
 * has loaded: said here before the job starts. The backend key is gpurec's to set in requests
 * mode, so it is left out of the check. */
int gpurec_check_alloc_conf(void) {
  static const char *const vars[] = {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"};
  int warned = 0;
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (!v || !*v) continue;
    char *copy = strdup(v), *kept = calloc(1, strlen(v) + 1);
    if (!copy || !kept) {
      free(copy);
      free(kept);
      return warned;
    }
    for (char *save = NULL, *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
      const char *k = kv;
      while (*k == ' ') k++;
      if (strncmp(k, "backend", 7) == 0) continue;
      if (*kept) strcat(kept, ",");
      strcat(kept, kv);
    }
    rp_pytorch_conf_t conf;
    rp_pytorch_conf_default(&conf);
    gm_err_t err;
    gm_err_clear(&err);
    if (rp_pytorch_conf_parse(kept, &conf, &err) != GM_OK) {
      const char *why = strncmp(err.msg, "pytorch: ", 9) == 0 ? err.msg + 9 : err.msg;
      fprintf(stderr, "gpurec: warning: %s=%s: %s; PyTorch will refuse it when the job first allocates\n",
              vars[i], v, why);
      warned++;
    }
    free(copy);
    free(kept);
  }
  return warned;
}

/* JAX: XLA's cuda_async allocator asks cuMemAllocFromPoolAsync for each buffer with its
 * exact size and stream (the platform allocator maps each through the VMM API, rounded up
 * to 2 MiB); without preallocation, since cuda_async would otherwise take and return one
 * pool-sized block first. CuPy: our sitecustomize switches its pool to MemoryAsyncPool. */
static int set_other_frameworks_env(void) {
  if (gpurec_set_env("TF_GPU_ALLOCATOR", "cuda_malloc_async") < 0 ||
      gpurec_set_env("XLA_PYTHON_CLIENT_ALLOCATOR", "cuda_async") < 0 ||
      gpurec_set_env("XLA_PYTHON_CLIENT_PREALLOCATE", "false") < 0 ||
      gpurec_set_env("GPUMEM_CUPY_ALLOCATOR", "async") < 0)
    return -1;
  return 0;
}

int gpurec_set_mode_env(const char *mode, const char *stacks, const char *callsites, int quiet) {
  if (strcmp(mode, "auto") == 0) {
    /* each request's callsite from gpurec's hook (rec_sites.c), unless callsites are off */
    const char *cs = callsites ? callsites : getenv(REC_ENV_CALLSITES), *ts = getenv("GPUMEM_TORCH_SITES");
    int sites = rec_cs_mode_parse(cs) > 0 && !(ts && strcmp(ts, "0") == 0);
    /* PyTorch untouched: its history gives the requests of the allocator the user runs. */
    if (set_other_frameworks_env() < 0) return -1;
    if (!quiet)
      fprintf(stderr,
              "gpurec: mode auto: PyTorch's allocator left as it is (PYTORCH_CUDA_ALLOC_CONF%s%s), its "
              "requests %s; set TF_GPU_ALLOCATOR=cuda_malloc_async, "
              "XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async, XLA_PYTHON_CLIENT_PREALLOCATE=false, CuPy's "
              "allocator to MemoryAsyncPool (--mode=native leaves them)\n",
              getenv("PYTORCH_CUDA_ALLOC_CONF") ? "=" : " unset",
              getenv("PYTORCH_CUDA_ALLOC_CONF") ? getenv("PYTORCH_CUDA_ALLOC_CONF") : "",
              strcmp(stacks, "python") == 0 ? "from its memory history with Python stacks (a ring of the "
                                              "newest entries, dumped at exit)"
              : sites ? "streamed from its allocator trace as they happen, each one's callsite read by gpurec"
                      : "streamed from its allocator trace as they happen");
    return 0;
  }
  if (strcmp(mode, "requests") != 0) {
    if (!quiet)
      fprintf(stderr, "gpurec: mode %s: allocator settings left as they are%s\n", mode,
              strcmp(mode, "torch") == 0 ? "; PyTorch memory history on" : "");
    return 0;
  }
  const char *vars[] = {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"};
  char said[2048] = "";
  for (int i = 0; i < 2; i++) {
    const char *user = getenv(vars[i]);
    if (i == 1 && !user) continue; /* the newer name only where the user uses it */
    char *v = merge_alloc_conf(user);
    if (!v || gpurec_set_env(vars[i], v) < 0) {
      free(v);
      return -1;
    }
    size_t l = strlen(said);
    snprintf(said + l, sizeof said - l, "%s=%s, ", vars[i], v);
    free(v);
  }
  if (set_other_frameworks_env() < 0) return -1;
  if (!quiet)
    fprintf(stderr,
            "gpurec: mode requests: set %sTF_GPU_ALLOCATOR=cuda_malloc_async, "
            "XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async, XLA_PYTHON_CLIENT_PREALLOCATE=false, "
            "CuPy's allocator to MemoryAsyncPool (use --mode=native to leave them)\n",
            said);
  return 0;
}

/* $GPUMEM_INJECT, else next to this binary (the bazel-bin layout), else in ../lib/gpumem/ (what
 * tools/install lays out: PREFIX/bin/gpurec, PREFIX/lib/gpumem/). */
int gpurec_find_inject(char *out, size_t n) {
  const char *env = getenv("GPUMEM_INJECT");
  if (env && *env) {
    snprintf(out, n, "%s", env);
    return access(out, R_OK) == 0;
  }
  char self[PATH_MAX];
  ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
  if (l <= 0) return 0;
  self[l] = '\0';
  char *slash = strrchr(self, '/');
  if (slash) *slash = '\0';
  static const char *const kPlaces[] = {"/libgpumem_inject.so", "/../lib/gpumem/libgpumem_inject.so"};
  for (size_t i = 0; i < sizeof kPlaces / sizeof kPlaces[0]; i++) {
    if ((size_t)snprintf(out, n, "%s%s", self, kPlaces[i]) >= n) continue;
    if (access(out, R_OK) == 0) return 1;
  }
  if ((size_t)snprintf(out, n, "%s%s", self, kPlaces[0]) >= n) out[0] = '\0'; /* for the warning */
  return 0;
}

char *gpurec_absolute(const char *p) {
  if (p[0] == '/') return strdup(p);
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return strdup(p);
  size_t n = strlen(cwd) + strlen(p) + 2;
  char *o = malloc(n);
  if (o) snprintf(o, n, "%s/%s", cwd, p);
  return o;
}
