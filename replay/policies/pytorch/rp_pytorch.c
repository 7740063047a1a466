/* rp_pytorch.c: skeleton of the pytorch policy (torch 2.11 CUDACachingAllocator model).
 * Every operation reports GM_ERR_UNSUPPORTED until the model lands. */
#include "replay/policies/pytorch/rp_pytorch.h"

#include <string.h>

static gm_status_t pt_create(const char *conf, const rp_driver_t *drv, rp_policy_t **out,
                             gm_err_t *err) {
  (void)conf, (void)drv;
  *out = NULL;
  return gm_err_set(err, GM_ERR_UNSUPPORTED, "pytorch: policy not implemented yet");
}
static void pt_destroy(rp_policy_t *p) { (void)p; }
static gm_status_t pt_alloc(rp_policy_t *p, uint64_t size, uint64_t stream, uint64_t *addr,
                            gm_err_t *err) {
  return gm_err_set(err, GM_ERR_UNSUPPORTED, "pytorch: not implemented");
}
static gm_status_t pt_free(rp_policy_t *p, uint64_t addr, gm_err_t *err) {
  return gm_err_set(err, GM_ERR_UNSUPPORTED, "pytorch: not implemented");
}
static gm_status_t pt_empty(rp_policy_t *p, gm_err_t *err) {
  return gm_err_set(err, GM_ERR_UNSUPPORTED, "pytorch: not implemented");
}
static void pt_stats(const rp_policy_t *p, rp_policy_stats_t *out) { memset(out, 0, sizeof *out); }
static gm_status_t pt_check(const rp_policy_t *p, gm_err_t *err) { return GM_OK; }
static const char *pt_spec(const rp_policy_t *p) { return "pytorch"; }

const rp_policy_ops_t rp_pytorch_ops = {
    .name = "pytorch",
    .description = "PyTorch 2.11 CUDACachingAllocator (CONF: PYTORCH_CUDA_ALLOC_CONF)",
    .create = pt_create,
    .destroy = pt_destroy,
    .alloc = pt_alloc,
    .free = pt_free,
    .empty_cache = pt_empty,
    .release_all = pt_empty,
    .stats = pt_stats,
    .check = pt_check,
    .spec = pt_spec,
};
