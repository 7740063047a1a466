/* gmt_salvage.c: a salvaging reader's way past damage (GMT_READ_SALVAGE, SPEC.md "Salvage"),
 * and the damage counted in words. A frame that fails a check is skipped: with a valid index
 * the walk goes on at the next chunk the index lists, and the index says how many events were
 * lost; without one (truncated file, damaged index) it scans forward for the next chunk
 * descriptor whose CRC holds, and the sequence numbers say how many chunks were lost. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gmt_reader_state.h"

/* Does a chunk that passes its CRC start at q? The descriptor and the frame must lie before the
 * limit. A CRC-32C over the whole chunk makes a false match (the magic inside compressed
 * bytes) a 2^-32 event, and the chunk is then checked like any other. */
static int chunk_at(const gmt_reader_t *r, size_t q) {
  size_t remain = r->limit - q;
  if (remain < GMT_FRAME_HDR + GMT_CHUNK_DESC_SIZE) return 0;
  const uint8_t *f = r->buf + q, *d = f + GMT_FRAME_HDR;
  uint32_t size = gmt_get32(f + 4);
  if (gmt_get32(f) != GMT_MAGIC_CHUNK || size < GMT_CHUNK_DESC_SIZE || size > remain - GMT_FRAME_HDR ||
      memcmp(d, "GMTC", 4))
    return 0;
  uint32_t cs = gmt_get32(d + 40);
  if (cs > remain - GMT_FRAME_HDR - size) return 0;
  return gmt_crc32c(gmt_crc32c(0, d + 8, size - 8), d + size, cs) == gmt_get32(d + 4);
}

/* The next offset in [from, limit) where a frame with this magic starts (and, for the chunk
 * magic, a chunk that passes its CRC), or SIZE_MAX. */
static size_t find_frame(const gmt_reader_t *r, size_t from, uint32_t magic) {
  uint8_t m[4];
  gmt_put32(m, magic);
  while (from < r->limit) {
    const uint8_t *p = memmem(r->buf + from, r->limit - from, m, 4);
    if (!p) break;
    size_t q = (size_t)(p - r->buf);
    if (magic == GMT_MAGIC_CHUNK ? chunk_at(r, q)
                                 : r->limit - q >= GMT_FRAME_HDR + 4 && memcmp(p + GMT_FRAME_HDR, "GMTI", 4) == 0)
      return q;
    from = q + 1;
  }
  return SIZE_MAX;
}

static void note_damage(gmt_reader_t *r, const gm_err_t *e) {
  if (r->damage.status != GM_OK) return;
  r->damage = *e;
  gm_err_wrap(&r->damage, "chunk %llu at offset %zu", (unsigned long long)r->chunk_no, r->pos);
}

/* The frame at r->pos failed with status s (message in e). Count the damage and move r->pos to
 * the next good chunk; GM_END when none is left. */
gm_status_t gmt_salvage_skip(gmt_reader_t *r, gm_status_t s, const gm_err_t *e) {
  size_t at = r->pos;
  r->n = r->i = 0;
  if (r->st.has_index) {
    /* The index lists every chunk: skip to the next one it lists after the damage. */
    uint64_t k = r->chunk_no;
    if (k < r->n_idx && r->idx[k].off == at) {
      note_damage(r, e);
      r->st.damaged_chunks++;
      r->st.lost_events += r->idx[k].events;
      r->expect_seq = r->idx[k].seq + 1;
      k++;
    } else {
      note_damage(r, e);
    }
    while (k < r->n_idx && r->idx[k].off <= at) k++; /* the damage sits past where the index expects */
    size_t next = k < r->n_idx ? (size_t)r->idx[k].off : r->limit;
    r->st.damaged_bytes += next - at;
    r->chunk_no = k;
    r->pos = next;
    return GM_OK;
  }
  size_t q = find_frame(r, at + 1, GMT_MAGIC_CHUNK);
  if (q == SIZE_MAX) {
    /* Nothing good after the damage. The chunks end where the index starts, if there is one. */
    size_t end = r->footer_ok ? r->limit : find_frame(r, at, GMT_MAGIC_INDEX);
    if (end == SIZE_MAX) {
      if (s == GM_ERR_TRUNCATED) { /* the last chunk of a killed writer: truncation, not damage */
        r->st.truncated = 1;
        r->done = 1;
        return GM_END;
      }
      end = r->limit;
    } else if (!r->footer_ok) {
      r->st.truncated = 0; /* the writer got as far as the index */
      r->st.index_damaged = 1;
    }
    if (end > at) {
      note_damage(r, e);
      r->st.damaged_chunks++;
      r->st.uncounted_chunks++;
      r->st.damaged_bytes += end - at;
    } else if (r->damage.status == GM_OK) {
      r->damage = *e; /* the footer after the index */
    }
    r->done = 1;
    return GM_END;
  }
  /* The sequence numbers say how many chunks the damaged bytes held. */
  note_damage(r, e);
  uint64_t seq = gmt_get64(r->buf + q + GMT_FRAME_HDR + 8);
  if (seq > r->expect_seq) {
    r->st.damaged_chunks += seq - r->expect_seq;
    r->st.uncounted_chunks += seq - r->expect_seq;
    r->expect_seq = seq;
  }
  r->st.damaged_bytes += q - at;
  r->pos = q;
  return GM_OK;
}

char *gmt_stats_damage_text(const gmt_reader_stats_t *s, char *buf, size_t n) {
  size_t k = 0;
#define ADD(...) (k += (size_t)snprintf(buf + (k < n ? k : n), k < n ? n - k : 0, __VA_ARGS__))
  if (n) buf[0] = '\0';
  if (s->damaged_chunks) {
    unsigned long long d = (unsigned long long)s->damaged_chunks, u = (unsigned long long)s->uncounted_chunks,
                       lost = (unsigned long long)s->lost_events;
    ADD("%llu damaged chunk%s skipped", d, d == 1 ? "" : "s");
    if (!u) ADD(", %llu events lost", lost);
    else if (u == d) ADD(", %s events uncounted (no usable index)", d == 1 ? "its" : "their");
    else ADD(", at least %llu events lost (%llu chunk%s uncounted: no usable index)", lost, u, u == 1 ? "" : "s");
  }
  if (s->index_damaged) ADD("%sthe index is damaged (chunks found by scanning)", k ? "; " : "");
  if (!k && s->damaged_bytes) ADD("unreadable bytes between chunks skipped, no chunk lost");
  if (!k) ADD("no damage");
#undef ADD
  return buf;
}
