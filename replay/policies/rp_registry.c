/* rp_registry.c: the table of policies gpureplay knows, and "name[:conf]" -> policy.
 * The table's order is the order shown to users (--help, error messages). */
#include <stdio.h>
#include <string.h>

#include "replay/policies/pytorch/rp_pytorch.h"
#include "replay/policies/rp_policies.h"

static const rp_policy_ops_t *const all_policies[] = {
    &rp_pytorch_ops,
    &rp_bfc_ops,
    &rp_prealloc_ops,
    &rp_jax_ops,
    &rp_direct_ops,
    &rp_async_ops,
    NULL,
};

const rp_policy_ops_t *const *rp_policy_all(void) { return all_policies; }

const rp_policy_ops_t *rp_policy_find(const char *name) {
  for (const rp_policy_ops_t *const *o = all_policies; *o; o++)
    if (strcmp((*o)->name, name) == 0) return *o;
  return NULL;
}

/* A framework's own words, as users paste them: "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
 * is pytorch:expandable_segments:True; "XLA_PYTHON_CLIENT_PREALLOCATE=false ..." is jax:...;
 * TensorFlow's variables and GPUOptions fields are tf:... Returns the policy name and sets *conf,
 * or NULL when spec is not such a line. */
static const char *framework_words(const char *spec, const char **conf) {
  static const struct {
    const char *prefix, *policy;
    int strip; /* the variable is the policy's whole conf: drop "NAME=" */
  } words[] = {
      {"PYTORCH_CUDA_ALLOC_CONF=", "pytorch", 1},
      {"PYTORCH_ALLOC_CONF=", "pytorch", 1},
      {"XLA_PYTHON_CLIENT_", "jax", 0},
      {"XLA_CLIENT_MEM_FRACTION=", "jax", 0},
      {"TF_", "tf", 0},
      {"per_process_gpu_memory_fraction=", "tf", 0},
      {"memory_limit=", "tf", 0},
  };
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
    size_t l = strlen(words[i].prefix);
    if (strncmp(spec, words[i].prefix, l) != 0) continue;
    *conf = words[i].strip ? spec + l : spec;
    return words[i].policy;
  }
  return NULL;
}

gm_status_t rp_policy_create(const char *spec, const rp_driver_t *drv, const rp_policy_ops_t **ops,
                             rp_policy_t **out, gm_err_t *err) {
  const char *wconf;
  const char *wname = framework_words(spec, &wconf);
  if (wname) {
    const rp_policy_ops_t *o = rp_policy_find(wname);
    if (!o) return gm_err_set(err, GM_ERR_INVAL, "'%.60s': no '%s' policy in this build", spec, wname);
    gm_status_t st = o->create(wconf, drv, out, err);
    if (st < 0) return st;
    if (ops) *ops = o;
    return GM_OK;
  }
  size_t n = strcspn(spec, ":");
  char name[64];
  if (n >= sizeof name) return gm_err_set(err, GM_ERR_INVAL, "unknown policy '%.40s...'", spec);
  memcpy(name, spec, n);
  name[n] = '\0';
  const char *conf = spec[n] == ':' ? spec + n + 1 : "";
  const rp_policy_ops_t *o = rp_policy_find(name);
  if (!o) {
    char known[256];
    size_t used = 0;
    known[0] = '\0';
    for (const rp_policy_ops_t *const *k = all_policies; *k && used < sizeof known; k++) {
      int w = snprintf(known + used, sizeof known - used, "%s%s", used ? ", " : "", (*k)->name);
      if (w < 0) break;
      used += (size_t)w;
    }
    const char *names[16];
    size_t nn = 0;
    for (const rp_policy_ops_t *const *k = all_policies; *k && nn < 16; k++) names[nn++] = (*k)->name;
    const char *near = gm_closest(name, names, nn);
    if (near)
      return gm_err_set(err, GM_ERR_INVAL, "unknown policy '%s' (did you mean '%s'? known: %s)", name, near, known);
    return gm_err_set(err, GM_ERR_INVAL, "unknown policy '%s' (known: %s)", name, known);
  }
  gm_status_t st = o->create(conf, drv, out, err);
  if (st < 0) return st;
  if (ops) *ops = o;
  return GM_OK;
}
