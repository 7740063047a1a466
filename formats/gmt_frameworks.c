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
  if (!set && h->capture_mode == GMT_CAPTURE_TORCH) set = GMT_FW_PYTORCH;
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
