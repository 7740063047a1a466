/* gmt_frameworks.c: which frameworks' requests a trace holds, from its header.
 *
 * The recorder writes `framework.<key>` = version for every framework the process had loaded
 * (recorder/rec_frameworks.c). A trace without those keys is from an older recorder or
 * another tool: a torch-mode recording and an imported PyTorch snapshot (capture mode torch)
 * are PyTorch's; anything else is unknown,
 * and the tools say so rather than guess. */
#include <stdio.h>
#include <string.h>

#include "formats/gmt.h"

static const struct {
  unsigned bit;
  const char *key, *display;
} fws[] = {
    {GMT_FW_PYTORCH, "pytorch", "PyTorch"},
    {GMT_FW_JAX, "jax", "JAX"},
    {GMT_FW_TENSORFLOW, "tensorflow", "TensorFlow"},
    {GMT_FW_CUPY, "cupy", "CuPy"},
    {GMT_FW_RMM, "rmm", "RAPIDS RMM"},
};
#define N_FWS (sizeof fws / sizeof fws[0])

const char *gmt_framework_key(unsigned fw) {
  for (size_t i = 0; i < N_FWS; i++)
    if (fws[i].bit == fw) return fws[i].key;
  return NULL;
}

const char *gmt_framework_display(unsigned fw) {
  for (size_t i = 0; i < N_FWS; i++)
    if (fws[i].bit == fw) return fws[i].display;
  return NULL;
}

const char *gmt_header_framework_version(const gmt_header_t *h, unsigned fw) {
  const char *k = gmt_framework_key(fw);
  if (!k) return NULL;
  char key[64];
  snprintf(key, sizeof key, "framework.%s", k);
  return gmt_header_kv_get(h, key);
}

unsigned gmt_header_frameworks(const gmt_header_t *h) {
  unsigned set = 0;
  for (size_t i = 0; i < N_FWS; i++)
    if (gmt_header_framework_version(h, fws[i].bit)) set |= fws[i].bit;
  if (!set && (h->capture_mode == GMT_CAPTURE_TORCH || h->capture_mode == GMT_CAPTURE_TORCH_HISTORY))
    set = GMT_FW_PYTORCH;
  return set;
}

unsigned gmt_framework_single(unsigned set) {
  return set && !(set & (set - 1)) ? set : 0;
}

const char *gmt_header_frameworks_text(const gmt_header_t *h, char *buf, size_t n) {
  unsigned set = gmt_header_frameworks(h);
  size_t used = 0;
  if (n) buf[0] = '\0';
  if (!set) {
    snprintf(buf, n, "unknown (not recorded)");
    return buf;
  }
  for (size_t i = 0; i < N_FWS && used < n; i++) {
    if (!(set & fws[i].bit)) continue;
    const char *v = gmt_header_framework_version(h, fws[i].bit);
    int w = snprintf(buf + used, n - used, "%s%s%s%s", used ? ", " : "", fws[i].display,
                     v ? " " : "", v ? v : "");
    if (w < 0) break;
    used += (size_t)w;
  }
  return buf;
}

const char *gmt_trace_holds(const gmt_header_t *h, int vmm_requests, int has_async_alloc) {
  const char *xla = gmt_header_kv_get(h, "XLA_PYTHON_CLIENT_ALLOCATOR");
  unsigned fw = gmt_header_frameworks(h);
  if (vmm_requests < 0)
    vmm_requests = xla && !strcmp(xla, "platform") && (!fw || (fw & GMT_FW_JAX)) && !has_async_alloc;
  if (vmm_requests)
    return "requests: buffers mapped one by one through the VMM API (XLA's platform allocator), "
           "each rounded up to the 2 MiB granularity";
  if (h->capture_mode == GMT_CAPTURE_TORCH) return "requests: PyTorch's own allocator history";
  if (fw == GMT_FW_RMM)
    return "requests: RAPIDS RMM's allocation log (LoggingResourceAdaptor). RMM's own pool resources "
           "(pool, arena, binning) are not modelled: `direct` is cuda_memory_resource, `async` "
           "cuda_async_memory_resource; the other policies show what their allocators would reserve for "
           "the same requests";
  if (h->capture_mode == GMT_CAPTURE_TORCH_HISTORY)
    return "requests: PyTorch's own allocator history, with its segments and the other libraries' "
           "driver allocations beside them (not replayed as requests)";
  if (has_async_alloc) return "requests: stream-ordered allocations, exact sizes";
  if (h->capture_mode == GMT_CAPTURE_NATIVE && (fw & GMT_FW_CUPY))
    return "pool blocks: CuPy's memory pool asked the driver for these, not the arrays "
           "(record in requests mode for per-array requests)";
  if (h->capture_mode == GMT_CAPTURE_NATIVE)
    return "segments: what the program's own allocator asked of the driver, replayed as if they "
           "were requests (not a prediction of other settings; record in requests mode)";
  return "requests";
}
