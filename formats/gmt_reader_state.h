/* gmt_reader_state.h: the reader's state, shared by gmt_reader.c (the walk) and gmt_salvage.c
 * (the walk's way past damage). Formats' own: not for its users, not for gmt_internal.h's. */
#ifndef GMT_READER_STATE_H
#define GMT_READER_STATE_H

#include <uthash.h>
#include <zstd.h>

#include "formats/gmt_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rstr {
  uint32_t id;
  char *s;
  UT_hash_handle hh;
} rstr_t;

typedef struct ridx {
  uint64_t off, seq, first_ts;
  uint32_t events;
} ridx_t;

struct gmt_reader {
  const uint8_t *buf;
  size_t len;
  void *map;   /* mmap'ed file, or NULL */
  void *owned; /* read() into malloc, or NULL */
  gmt_header_t hdr;
  size_t data_start, pos, limit;
  ridx_t *idx;
  uint64_t n_idx;
  rstr_t *strs;
  gmt_event_t *evs;
  size_t cap, n, i;
  uint8_t *raw;
  size_t raw_cap;
  ZSTD_DCtx *dctx;
  gmt_addr_model_t *addr_model;
  uint64_t chunk_no, expect_seq;
  gmt_reader_stats_t st;
  gm_err_t sticky; /* status GM_OK while none */
  int done;
  size_t dropped_to;     /* GMT_READ_DROP_BEHIND: the mapped pages before this were given back */
  unsigned flags;        /* GMT_READ_* */
  int footer_ok;         /* the footer passed its CRC (the writer finished), even if the index did not */
  size_t footer_index;   /* where that footer says the index starts */
  gm_err_t damage;       /* the first damage skipped (salvage); status GM_OK while none */
};

/* gmt_salvage.c: the frame at r->pos failed with status s (message in e). Count the damage and
 * move r->pos to the next good chunk; GM_END when none is left. */
gm_status_t gmt_salvage_skip(gmt_reader_t *r, gm_status_t s, const gm_err_t *e);

#ifdef __cplusplus
}
#endif

#endif
