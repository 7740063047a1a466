/* rp_pytorch.c: the `pytorch[:CONF]` policy object: torch 2.11's CUDACachingAllocator for one
 * device (DeviceCachingAllocator), driven through rp_driver_t.
 *
 * What is modelled: see pt_alloc.c (malloc/free, GC, OOM path), pt_expand.c (expandable
 * segments) and pt_conf.c (PYTORCH_CUDA_ALLOC_CONF). What is not: CUDA graph private pools and
 * torch.cuda.MemPool (and use_on_oom / no_split pools, try_mempool_fallback), IPC sharing,
 * stream_uses/cudaEvents inside the allocator (the engine feeds `free` when the trace says the
 * free completed), free-memory callbacks, throw_on_cudamalloc_oom, multiple devices and peer
 * access, and the allocator's own statistics beyond rp_policy_stats_t. */
#include <stdio.h>
#include <stdlib.h>

#include "replay/policies/pytorch/pt_internal.h"

static void canonical_spec(const char *conf, char *out, size_t n) {
  size_t k = (size_t)snprintf(out, n, "pytorch");
  if (conf && *conf && k + 1 < n) {
    out[k++] = ':';
    for (const char *c = conf; *c && k + 1 < n; c++)
      if (*c != ' ' && *c != '\t' && *c != '\n' && *c != '\r') out[k++] = *c;
    out[k] = '\0';
  }
}

static gm_status_t pt_create(const char *conf, const rp_driver_t *drv, rp_policy_t **out, gm_err_t *err) {
  *out = NULL;
  rp_policy_t *p = calloc(1, sizeof *p);
  if (!p) return gm_err_set(err, GM_ERR_NOMEM, "pytorch: out of memory");
  rp_pytorch_conf_default(&p->conf);
  gm_status_t s = rp_pytorch_conf_parse(conf, &p->conf, err);
  if (s != GM_OK) {
    free(p);
    return s;
  }
  p->drv = *drv;
  if (p->conf.expandable_segments && (!drv->va_reserve || !drv->va_release || !drv->map || !drv->unmap)) {
    free(p);
    return gm_err_set(err, GM_ERR_UNSUPPORTED, "pytorch: expandable_segments:True needs a backend with VMM (map/unmap)");
  }
  if ((p->conf.expandable_segments || p->conf.memory_fraction < 1.0) && drv->total_memory == 0) {
    const char *what = p->conf.expandable_segments ? "expandable_segments" : "per_process_memory_fraction";
    free(p);
    return gm_err_set(err, GM_ERR_INVAL, "pytorch: the backend reports no total memory (needed for %s)", what);
  }
  /* setMemoryFraction: a limit only below 1.0; GC needs that limit */
  p->has_limit = p->conf.memory_fraction < 1.0;
  p->allowed_max = rp_pytorch_allowed_max(&p->conf, drv->total_memory);
  p->gc_active = p->has_limit && p->conf.gc_threshold > 0.0;
  p->round_plain = 1;
  for (int i = 0; i < RP_PYTORCH_ROUNDUP_INTERVALS; i++) p->round_plain &= p->conf.roundup_divisions[i] <= 1;
  p->pools[0].is_small = 1;
  p->pools[1].is_small = 0;
  pt_bins_init(&p->pools[0].free);
  pt_bins_init(&p->pools[1].free);
  RB_INIT(&p->pools[0].unmapped);
  RB_INIT(&p->pools[1].unmapped);
  canonical_spec(conf, p->spec, sizeof p->spec);
  *out = p;
  return GM_OK;
}

static void drop_all(rp_policy_t *p) {
  pt_addr_t *a, *tmp;
  HASH_ITER(hh, p->live, a, tmp) {
    HASH_DELETE(hh, p->live, a);
    free(a);
  }
  while (p->segs) pt_seg_put(p, p->segs);
  while (p->slabs) {
    pt_slab_t *n = p->slabs->next;
    free(p->slabs);
    p->slabs = n;
  }
  p->spare = NULL;
  p->n_blocks = 0;
  for (int i = 0; i < 2; i++) {
    pt_bins_clear(&p->pools[i].free);
    RB_INIT(&p->pools[i].unmapped);
  }
  p->total_allocated_memory = 0;
  p->allocated_bytes = 0;
}

static void pt_destroy(rp_policy_t *p) {
  if (!p) return;
  drop_all(p);
  free(p);
}

static gm_status_t pt_alloc_op(rp_policy_t *p, uint64_t size, uint64_t stream, uint64_t *addr, gm_err_t *err) {
  pt_addr_t *n = malloc(sizeof *n);
  if (!n) return gm_err_set(err, GM_ERR_NOMEM, "pytorch: out of host memory");
  pt_block_t *b = NULL;
  gm_status_t s = pt_malloc(p, size, stream, &b, err);
  if (s != GM_OK) {
    free(n);
    return s;
  }
  n->addr = b->addr;
  n->b = b;
  n->hash_oom = 0;
  HASH_ADD(hh, p->live, addr, sizeof(uint64_t), n);
  if (n->hash_oom) {
    free(n);
    return gm_err_set(err, GM_ERR_NOMEM, "pytorch: out of host memory");
  }
  b->in_hash = 1;
  *addr = b->addr;
  return GM_OK;
}

static gm_status_t pt_free_op(rp_policy_t *p, uint64_t addr, gm_err_t *err) {
  pt_addr_t *n = NULL;
  HASH_FIND(hh, p->live, &addr, sizeof(uint64_t), n);
  if (!n) return gm_err_set(err, GM_ERR_INVAL, "pytorch: free of unknown address 0x%" PRIx64, addr);
  pt_block_t *b = n->b;
  HASH_DELETE(hh, p->live, n);
  free(n);
  return pt_free(p, b, err);
}

/* The handle is the block itself: the engine's map holds it, so a free costs no lookup. */
static uint64_t pt_handle_addr(const rp_policy_t *p, uint64_t handle) {
  (void)p;
  return ((const pt_block_t *)(uintptr_t)handle)->addr;
}

static gm_status_t pt_empty_cache(rp_policy_t *p, gm_err_t *err) { return pt_release_cached(p, err); }

/* Every segment back to the driver, whatever is still allocated in it, then an empty state. */
static gm_status_t pt_release_all(rp_policy_t *p, gm_err_t *err) {
  gm_status_t first = GM_OK;
  /* unmap the mapped runs of expandable segments: walk each segment from its head block */
  pt_block_t *heads = NULL, *b;
  /* the live heads in the order pushing them newest malloc first gave (torch's live blocks
   * were a list, newest first): oldest first; insertion by seq, a few expandable segments */
  for (pt_slab_t *sl = p->slabs; sl; sl = sl->next)
    for (int i = 0; i < 256; i++) {
      b = &sl->blocks[i];
      if (b->where != PT_IN_LIVE || b->prev || !b->seg->expandable) continue;
      pt_block_t **at = &heads;
      while (*at && (*at)->seq < b->seq) at = &(*at)->link;
      b->link = *at;
      *at = b;
    }
  for (int i = 0; i < 2; i++) {
    for (b = pt_bins_first(&p->pools[i].free); b; b = pt_bins_next(&p->pools[i].free, b))
      if (!b->prev && b->seg->expandable) b->link = heads, heads = b;
    RB_FOREACH(b, pt_unmapped_tree, &p->pools[i].unmapped) if (!b->prev) b->link = heads, heads = b;
  }
  for (b = heads; b; b = b->link) {
    for (pt_block_t *r = b; r;) {
      if (!r->mapped) {
        r = r->next;
        continue;
      }
      uint64_t start = r->addr, size = 0;
      while (r && r->mapped) size += r->size, r = r->next;
      gm_status_t s = p->drv.unmap(p->drv.ctx, start, size);
      if (s != GM_OK && first == GM_OK) first = gm_err_set(err, s, "pytorch: release_all: unmapping %" PRIu64 " bytes: %s", size, gm_status_str(s));
    }
  }
  for (pt_seg_t *s = p->segs; s; s = s->lnext) {
    gm_status_t r = s->expandable ? p->drv.va_release(p->drv.ctx, s->base, s->size)
                                  : p->drv.mem_free(p->drv.ctx, s->base, s->size);
    if (r != GM_OK && first == GM_OK) first = gm_err_set(err, r, "pytorch: release_all: freeing a segment of %" PRIu64 " bytes: %s", s->size, gm_status_str(r));
  }
  drop_all(p);
  return first;
}

static void pt_stats(const rp_policy_t *p, rp_policy_stats_t *out) {
  *out = p->st;
  out->allocated_bytes = p->allocated_bytes;
  out->cached_bytes = p->total_allocated_memory - p->allocated_bytes;
}

static const uint64_t *pt_allocated_bytes(const rp_policy_t *p) { return &p->allocated_bytes; }

static gm_status_t pt_check_op(const rp_policy_t *p, gm_err_t *err) { return pt_check(p, err); }

static const char *pt_spec(const rp_policy_t *p) { return p->spec; }

const rp_policy_ops_t rp_pytorch_ops = {
    .name = "pytorch",
    .description = "PyTorch " RP_PYTORCH_VERSION " CUDACachingAllocator (CONF: a PYTORCH_CUDA_ALLOC_CONF string)",
    .create = pt_create,
    .destroy = pt_destroy,
    .alloc = pt_alloc_op,
    .free = pt_free_op,
    .empty_cache = pt_empty_cache,
    .release_all = pt_release_all,
    .stats = pt_stats,
    .allocated_bytes = pt_allocated_bytes,
    .check = pt_check_op,
    .spec = pt_spec,
    .oom_report = pt_oom_report,
    .alloc_h = pt_malloc_h,
    .free_h = pt_free_h,
    .handle_addr = pt_handle_addr,
    .same_run = pt_same_run,
};
