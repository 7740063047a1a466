/* rp_wrap.c: a policy that is another policy under a framework's own words.
 *
 * jax and tf parse their framework's settings, pick the policy that models them (prealloc,
 * bfc, direct, async) and then only forward: every operation goes to the inner policy, and
 * spec() answers the user's words so results and the report's paste line read as the
 * framework's documentation does. The forwarding lives here once (RP_WRAP_FORWARD in the
 * ops table); a new operation of rp_policy_ops_t gets its forwarder here, for all of them. */
#include <stdio.h>
#include <stdlib.h>

#include "replay/policies/rp_policies.h"

typedef struct rp_wrap {
  const rp_policy_ops_t *ops;
  rp_policy_t *inner;
  char spec[256];
} rp_wrap_t;

gm_status_t rp_wrap_new(const char *name, const char *conf, const rp_policy_ops_t *inner_ops,
                        rp_policy_t *inner, rp_policy_t **out, gm_err_t *err) {
  rp_wrap_t *w = calloc(1, sizeof *w);
  if (!w) {
    inner_ops->destroy(inner);
    return gm_err_set(err, GM_ERR_NOMEM, "%s: out of host memory", name);
  }
  w->ops = inner_ops;
  w->inner = inner;
  snprintf(w->spec, sizeof w->spec, "%s%s%s", name, conf && *conf ? ":" : "", conf ? conf : "");
  *out = (rp_policy_t *)w;
  return GM_OK;
}

void rp_wrap_destroy(rp_policy_t *p) {
  rp_wrap_t *w = (rp_wrap_t *)p;
  if (!w) return;
  w->ops->destroy(w->inner);
  free(w);
}

gm_status_t rp_wrap_alloc(rp_policy_t *p, uint64_t size, uint64_t stream, uint64_t *addr, gm_err_t *err) {
  rp_wrap_t *w = (rp_wrap_t *)p;
  return w->ops->alloc(w->inner, size, stream, addr, err);
}

gm_status_t rp_wrap_free(rp_policy_t *p, uint64_t addr, gm_err_t *err) {
  rp_wrap_t *w = (rp_wrap_t *)p;
  return w->ops->free(w->inner, addr, err);
}

/* The handle API: the inner policy's where it has one; else the address is the handle. */
gm_status_t rp_wrap_alloc_h(rp_policy_t *p, uint64_t size, uint64_t stream, uint64_t *addr, uint64_t *handle,
                            gm_err_t *err) {
  rp_wrap_t *w = (rp_wrap_t *)p;
  if (w->ops->alloc_h) return w->ops->alloc_h(w->inner, size, stream, addr, handle, err);
  gm_status_t st = w->ops->alloc(w->inner, size, stream, addr, err);
  if (st == GM_OK) *handle = *addr;
  return st;
}

gm_status_t rp_wrap_free_h(rp_policy_t *p, uint64_t handle, gm_err_t *err) {
  rp_wrap_t *w = (rp_wrap_t *)p;
  return w->ops->free_h ? w->ops->free_h(w->inner, handle, err) : w->ops->free(w->inner, handle, err);
}

uint64_t rp_wrap_handle_addr(const rp_policy_t *p, uint64_t handle) {
  const rp_wrap_t *w = (const rp_wrap_t *)p;
  return w->ops->handle_addr ? w->ops->handle_addr(w->inner, handle) : handle;
}

gm_status_t rp_wrap_empty_cache(rp_policy_t *p, gm_err_t *err) {
  rp_wrap_t *w = (rp_wrap_t *)p;
  return w->ops->empty_cache(w->inner, err);
}

gm_status_t rp_wrap_release_all(rp_policy_t *p, gm_err_t *err) {
  rp_wrap_t *w = (rp_wrap_t *)p;
  return w->ops->release_all(w->inner, err);
}

void rp_wrap_stats(const rp_policy_t *p, rp_policy_stats_t *out) {
  const rp_wrap_t *w = (const rp_wrap_t *)p;
  w->ops->stats(w->inner, out);
}

const uint64_t *rp_wrap_allocated_bytes(const rp_policy_t *p) {
  const rp_wrap_t *w = (const rp_wrap_t *)p;
  return w->ops->allocated_bytes ? w->ops->allocated_bytes(w->inner) : NULL;
}

gm_status_t rp_wrap_check(const rp_policy_t *p, gm_err_t *err) {
  const rp_wrap_t *w = (const rp_wrap_t *)p;
  return w->ops->check ? w->ops->check(w->inner, err) : GM_OK;
}

const char *rp_wrap_spec(const rp_policy_t *p) { return ((const rp_wrap_t *)p)->spec; }

/* The inner policy's account of an OOM, where it has one (bfc, prealloc: yes; direct, async: no). */
int rp_wrap_oom_report(const rp_policy_t *p, uint64_t size, uint64_t stream, rp_oom_report_t *out) {
  const rp_wrap_t *w = (const rp_wrap_t *)p;
  return w->ops->oom_report ? w->ops->oom_report(w->inner, size, stream, out) : 0;
}
