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
    &rp_tf_ops,
    &rp_cupy_ops,
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

gm_status_t rp_policy_create(const char *spec, const rp_driver_t *drv, const rp_policy_ops_t **ops,
                             rp_policy_t **out, gm_err_t *err) {
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
