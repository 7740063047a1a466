/* fid_addresses.c: the address policy's score on a real segment sequence (fid_addresses.h). */
#include "tests/fidelity/fid_addresses.h"

#include <stdlib.h>

#include "formats/gmt.h"

typedef struct live {
  uint64_t real, model, size;
} live_t;

gm_status_t fid_address_check(const char *trace_path, rp_va_policy_t p, fid_addr_stats_t *st,
                              gm_err_t *err) {
  gmt_reader_t *r = NULL;
  gm_status_t s = gmt_reader_open(&r, trace_path, err);
  if (s) return s;
  rp_va_opts_t o = {p, 0, 0, 0, 0, 0};
  rp_va_t *va = rp_va_new(&o);
  live_t *lv = NULL;
  size_t n = 0, cap = 0;
  int first = 1;
  uint64_t real0 = 0, model0 = 0, realp = 0, modelp = 0;
  if (!va) s = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  gmt_event_t ev;
  while (s == GM_OK && (s = gmt_reader_next(r, &ev, err)) == GM_OK) {
    if (ev.device != 0 || (ev.flags & GMT_F_SYNTHETIC)) continue;
    if (ev.kind == GMT_EV_SEGMENT_ALLOC) {
      uint64_t a;
      if (rp_va_alloc(va, ev.size, &a) != GM_OK) {
        s = gm_err_set(err, GM_ERR_NOMEM, "address model: no room for %llu B",
                       (unsigned long long)ev.size);
        break;
      }
      if (first) {
        real0 = ev.addr;
        model0 = a;
        first = 0;
      } else {
        st->segments++;
        st->exact += ev.addr - real0 == a - model0;
        st->step += ev.addr - realp == a - modelp;
      }
      realp = ev.addr;
      modelp = a;
      for (size_t k = 0; k < n; k++)
        if (lv[k].size == ev.size) {
          st->pairs++;
          st->pairs_same += (ev.addr < lv[k].real) == (a < lv[k].model);
        }
      if (n == cap) {
        size_t nc = cap ? cap * 2 : 64;
        live_t *nl = realloc(lv, nc * sizeof *nl);
        if (!nl) {
          s = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
          break;
        }
        lv = nl;
        cap = nc;
      }
      lv[n++] = (live_t){ev.addr, a, ev.size};
    } else if (ev.kind == GMT_EV_SEGMENT_FREE) {
      size_t k = 0;
      while (k < n && lv[k].real != ev.addr) k++;
      if (k == n) {
        s = gm_err_set(err, GM_ERR_CORRUPT, "segment_free of 0x%llx, not a live segment",
                       (unsigned long long)ev.addr);
        break;
      }
      rp_va_release(va, lv[k].model);
      lv[k] = lv[--n];
    }
  }
  if (s == GM_END) s = GM_OK;
  free(lv);
  rp_va_free_all(va);
  gmt_reader_close(r);
  return s;
}
