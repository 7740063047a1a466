/* engine_ids.c: the trace's addresses numbered densely, once per trace (rp_addr_ids_build), so
 * that each replay of it (a sweep's 28) indexes an array by number (rp_dense.h) where it would
 * probe a hash map by address per event.
 *
 * Numbers follow the order of first appearance, and are given to the events whose address the
 * engine's block map may be asked about: allocations, frees, free_requested and the VMM events
 * (a VMM buffer's request has its event's address: engine_vmm.c). Other events get RP_NO_ID.
 * One hash probe per such event, here only (its own table, 16 bytes a slot). One loop (number)
 * serves the events held in memory as they arrive (rp_addr_ids_begin/_add/_end) and a trace
 * too large to hold, numbered batch by batch as it is read (rp_addr_numbering_next).
 *
 * The engines' tables for these numbers (rp_dense_t, 32 bytes a number) are kept with the
 * numbering between replays (a few spares, taken and given back without a lock by the threads
 * that replay): a table of fresh pages cost each replay more in page faults than its probes. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "replay/engine/engine_internal.h"
#include "replay/engine/rp_bigmem.h"

#define SPARES 8
struct rp_ids_spares {
  _Atomic(rp_dense_t *) t[SPARES];
};

static int names_block(unsigned kind) {
  switch (kind) {
    case GMT_EV_ALLOC:
    case GMT_EV_FREE:
    case GMT_EV_FREE_REQUESTED:
    case GMT_EV_VMM_RESERVE:
    case GMT_EV_VMM_MAP:
    case GMT_EV_VMM_UNMAP:
    case GMT_EV_VMM_RELEASE:
      return 1;
    default:
      return 0;
  }
}

/* The numbering's own hash table, probed linearly, doubled at load 1/2: it follows the
 * distinct addresses (a training trace reuses a few thousand; sizing it for the allocations made
 * a 10 M-event trace fault in 256 MiB for 2,000 addresses); the slot of the event PREFETCH ahead
 * is fetched while this one is probed (the probes of a table larger than the caches miss: their
 * latencies overlap so). A zero slot is empty (fresh pages: no fill). */
typedef struct slot {
  uint64_t key;
  uint32_t id1; /* the number + 1; 0: empty */
  uint32_t pad;
} slot_t;
#define PREFETCH 16
typedef struct table {
  slot_t *s;
  size_t cap;
  unsigned shift;
} table_t;

static inline size_t home(uint64_t key, unsigned shift) { return (size_t)((key * 0x9E3779B97F4A7C15ull) >> shift); }

static slot_t *find(const table_t *t, uint64_t key) {
  size_t j = home(key, t->shift), mask = t->cap - 1;
  while (t->s[j].id1 && t->s[j].key != key) j = (j + 1) & mask;
  return &t->s[j];
}

static int table_init(table_t *t, size_t want) {
  t->cap = 1024;
  t->shift = 64 - 10;
  while (t->cap < 2 * want) {
    t->cap *= 2;
    t->shift--;
  }
  t->s = rp_bigmem_alloc(t->cap * sizeof *t->s);
  return t->s ? 0 : -1;
}

/* Room for want numbers (at load 1/2), the ones there moved over. */
static int table_resize(table_t *t, size_t want) {
  table_t n;
  if (table_init(&n, want) != 0) return -1;
  for (size_t j = 0; j < t->cap; j++)
    if (t->s[j].id1) *find(&n, t->s[j].key) = t->s[j];
  rp_bigmem_free(t->s, t->cap * sizeof *t->s);
  *t = n;
  return 0;
}

/* The numbering under way, of the events given so far in order (batch by batch, or all held
 * in memory: the same numbers in the same order). */
struct rp_addr_numbering {
  table_t t;
  uint32_t count, max;
};

static int numbering_init(rp_addr_numbering_t *nb, uint32_t max) {
  memset(nb, 0, sizeof *nb);
  nb->max = max < RP_NO_ID ? max : RP_NO_ID - 1;
  return table_init(&nb->t, 0);
}

static void numbering_free(rp_addr_numbering_t *nb) {
  if (nb->t.s) rp_bigmem_free(nb->t.s, nb->t.cap * sizeof *nb->t.s);
  nb->t.s = NULL;
}

enum { NUMBERED = 0, OUT_OF_MEMORY = -1, TOO_MANY = -2 };

/* The one numbering loop: evs[0, n), the next events of the trace, numbered into id[0, n) (id
 * NULL: only counted). On locals (the fields through a pointer would be reloaded after each
 * store to id[]: a fifth of the numbering's speed), written back at the end or a failure. */
static int number(rp_addr_numbering_t *nb, const gmt_event_t *evs, size_t n, uint32_t *id) {
  table_t t = nb->t;
  uint32_t count = nb->count, max = nb->max;
  int r = NUMBERED;
  for (size_t i = 0; i < n; i++) {
    if (i + PREFETCH < n) __builtin_prefetch(&t.s[home(evs[i + PREFETCH].addr, t.shift)], 1);
    if (!names_block(evs[i].kind)) {
      if (id) id[i] = RP_NO_ID;
      continue;
    }
    slot_t *x = find(&t, evs[i].addr);
    if (!x->id1) {
      if (count >= max) {
        r = TOO_MANY;
        break;
      }
      if (2 * ((size_t)count + 1) > t.cap) {
        if (table_resize(&t, t.cap) != 0) {
          r = OUT_OF_MEMORY;
          break;
        }
        x = find(&t, evs[i].addr);
      }
      x->key = evs[i].addr;
      x->id1 = ++count;
    }
    if (id) id[i] = x->id1 - 1;
  }
  nb->t = t;
  nb->count = count;
  return r;
}

/* ---- numbering events held in memory as they arrive ----------------------------------------- */

/* The numbering of evs[0, done), room for cap numbers in id; hint: the trace's expected length
 * (sizing only); ok: no failure so far. */
struct rp_ids_builder {
  rp_addr_numbering_t nb;
  uint32_t *id;
  size_t cap, done, hint;
  int ok, too_many;
};

rp_ids_builder_t *rp_addr_ids_begin(size_t n_hint) {
  rp_ids_builder_t *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  b->hint = n_hint;
  b->cap = n_hint ? n_hint : 1;
  b->id = rp_bigmem_alloc(b->cap * sizeof *b->id);
  b->ok = b->id && numbering_init(&b->nb, RP_NO_ID) == 0;
  return b;
}

/* Room for at least want numbers in b->id (a trace longer than its hint). */
static int id_room(rp_ids_builder_t *b, size_t want) {
  if (want <= b->cap) return 0;
  size_t cap = b->cap;
  while (cap < want) cap *= 2;
  uint32_t *id = rp_bigmem_alloc(cap * sizeof *id);
  if (!id) return -1;
  memcpy(id, b->id, b->done * sizeof *id);
  rp_bigmem_free(b->id, b->cap * sizeof *b->id);
  b->id = id;
  b->cap = cap;
  return 0;
}

/* The table doubles as the distinct addresses come (a few thousand in a training trace). A
 * trace whose first SAMPLE events were mostly fresh addresses (a quarter or more of those that
 * name a block: a fresh address per allocation) gets room at once for as many over its whole
 * length: one move instead of a doubling chain, each a fresh table (half the numbering's time
 * on a million such events). Sizing only: the numbers are the same. A trace that stops taking
 * fresh addresses after its start wastes at most 16 bytes an event (the table's 2 slots per
 * number, a number at most every other event), transient, beside the 56 of the events held. */
#define SAMPLE ((size_t)1 << 16)

/* At event SAMPLE, events [0, SAMPLE) numbered: the events that named a block are those with a
 * number (a pass over the numbers here, once, keeps a counter out of the loop). */
static int project(rp_ids_builder_t *b) {
  if (b->hint < 4 * SAMPLE) return 0;
  size_t named = 0, count = b->nb.count;
  for (size_t i = 0; i < SAMPLE; i++) named += b->id[i] != RP_NO_ID;
  if (4 * count <= named) return 0;
  /* mostly fresh addresses so far: room at once for as many over the whole trace */
  size_t projected = count * (b->hint / SAMPLE);
  return 2 * projected > b->nb.t.cap ? table_resize(&b->nb.t, projected) : 0;
}

void rp_addr_ids_add(rp_ids_builder_t *b, const gmt_event_t *evs, size_t to) {
  size_t done = b->done;
  if (!b->ok || to <= done) return;
  if (id_room(b, to) != 0) {
    b->ok = 0;
    return;
  }
  int r = NUMBERED;
  if (done <= SAMPLE && SAMPLE < to) { /* the projection, before event SAMPLE */
    r = number(&b->nb, evs + done, SAMPLE - done, b->id + done);
    done = SAMPLE;
    if (r == NUMBERED && project(b) != 0) r = OUT_OF_MEMORY;
  }
  if (r == NUMBERED) r = number(&b->nb, evs + done, to - done, b->id + done);
  b->done = to;
  b->ok = r == NUMBERED;
  b->too_many = r == TOO_MANY;
}

gm_status_t rp_addr_ids_end(rp_ids_builder_t *b, const gmt_event_t *evs, size_t n, rp_addr_ids_t *out,
                            gm_err_t *err) {
  memset(out, 0, sizeof *out);
  if (!b) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory for the address numbers");
  rp_addr_ids_add(b, evs, n);
  struct rp_ids_spares *sp = b->ok ? calloc(1, sizeof *sp) : NULL;
  numbering_free(&b->nb);
  int too_many = b->too_many;
  if (!sp) {
    if (b->id) rp_bigmem_free(b->id, b->cap * sizeof *b->id);
    free(b);
    return gm_err_set(err, GM_ERR_NOMEM, too_many ? "too many addresses to number"
                                                  : "out of host memory for the address numbers");
  }
  out->evs = evs;
  out->n = n;
  out->id = b->id;
  out->id_cap = b->cap;
  out->count = b->nb.count;
  out->spares = sp;
  free(b);
  return GM_OK;
}

gm_status_t rp_addr_ids_build(const gmt_event_t *evs, size_t n, rp_addr_ids_t *out, gm_err_t *err) {
  return rp_addr_ids_end(rp_addr_ids_begin(n), evs, n, out, err);
}

void rp_addr_ids_free(rp_addr_ids_t *ids) {
  for (int i = 0; ids->spares && i < SPARES; i++) {
    rp_dense_t *t = atomic_exchange(&ids->spares->t[i], NULL);
    if (t) rp_dense_free(t);
    free(t);
  }
  free(ids->spares);
  if (ids->id) rp_bigmem_free(ids->id, ids->id_cap * sizeof *ids->id);
  memset(ids, 0, sizeof *ids);
}

rp_dense_t *rp_addr_ids_table(const rp_addr_ids_t *ids) {
  for (int i = 0; ids->spares && i < SPARES; i++) {
    rp_dense_t *t = atomic_exchange(&ids->spares->t[i], NULL);
    if (t) return t; /* reset when given back */
  }
  rp_dense_t *t = malloc(sizeof *t);
  if (t && rp_dense_init(t, ids->count) != 0) {
    free(t);
    t = NULL;
  }
  return t;
}

void rp_addr_ids_table_back(const rp_addr_ids_t *ids, rp_dense_t *t) {
  rp_dense_reset(t);
  for (int i = 0; ids->spares && i < SPARES; i++) {
    rp_dense_t *none = NULL;
    if (atomic_compare_exchange_strong(&ids->spares->t[i], &none, t)) return;
  }
  rp_dense_free(t);
  free(t);
}

/* ---- numbering a streamed trace batch by batch ---------------------------------------------- */

gm_status_t rp_addr_numbering_new(uint32_t max, rp_addr_numbering_t **out, gm_err_t *err) {
  rp_addr_numbering_t *nb = malloc(sizeof *nb);
  if (!nb || numbering_init(nb, max) != 0) {
    free(nb);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory for the address numbers");
  }
  *out = nb;
  return GM_OK;
}

gm_status_t rp_addr_numbering_next(rp_addr_numbering_t *nb, const gmt_event_t *evs, size_t n, uint32_t *id,
                                   gm_err_t *err) {
  switch (number(nb, evs, n, id)) {
    case NUMBERED:
      return GM_OK;
    case TOO_MANY:
      return gm_err_set(err, GM_ERR_INVAL, "more than %u addresses to number", nb->max);
    default:
      return gm_err_set(err, GM_ERR_NOMEM, "out of host memory for the address numbers");
  }
}

uint32_t rp_addr_numbering_count(const rp_addr_numbering_t *nb) { return nb->count; }

void rp_addr_numbering_free(rp_addr_numbering_t *nb) {
  if (!nb) return;
  numbering_free(nb);
  free(nb);
}

gm_status_t rp_addr_ids_streamed(uint32_t count, rp_addr_ids_t *out, gm_err_t *err) {
  memset(out, 0, sizeof *out);
  if (!(out->spares = calloc(1, sizeof *out->spares))) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  out->count = count;
  return GM_OK;
}

