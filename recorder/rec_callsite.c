/* rec_callsite.c: the callsite of an allocation, interned, on the allocating thread.
 *
 * Model: every allocation event on a thread that runs Python code asks for one callsite id.
 * The frame walk goes outwards from the innermost frame and stops at the first frame of the
 * program itself (a file outside site-packages, dist-packages, the standard library and the
 * frozen modules); with no such frame the innermost frame is taken. A PyTorch training step
 * makes ~1000 allocations from a few dozen lines, so the same (code object, instruction) pairs
 * come back all the time: a per-thread direct-mapped cache maps them to ids without a lock, and
 * so does a per-thread cache of which code objects are library code. Only a miss takes the
 * table's mutex, formats "file:line:name" and interns it.
 * Bounds: at most max_strings distinct strings and 64 MiB of them (then "[other]"), a key
 * table of at most twice as many entries (past it, misses are formatted again), frames
 * walked at most MAX_DEPTH deep, strings at most STACK_TEXT bytes. Nothing here calls Python:
 * the frame source reads frames as plain memory (see rec_pyframe.c for why that is safe).
 * Code objects freed and reallocated at the same address: keys carry the code object's
 * identity (its filename and name objects and first line, rec_pyframes_t.ident), so a new code
 * object at an old address misses instead of taking the old one's string. Whether a code object
 * is library code is cached by a cheaper stamp (rec_pyframes_t.stamp: words of its first 64
 * bytes, which the walk reads anyway), so a library frame costs its frame's line and its code
 * object's first line: in a training step the recorder's lines are cold at each allocation. */
#include "recorder/rec_callsite.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

/* Hot and cold: an allocation's walk in the steady state is cache hits only, so the hit paths
 * stay small and together (.text.hot, with the streamed entry's code) and the misses, which
 * format text and take the mutex, are out of line. */
#define HOT __attribute__((hot))
#define COLD __attribute__((cold, noinline))

static uint64_t mix(uint64_t x);

#define MAX_DEPTH 256    /* frames walked at most */
#define STACK_FRAMES 64  /* frames written in a stack-mode string */
#define STACK_TEXT 8192  /* bytes of a stack-mode string at most */
#define TLS_IDS 512      /* per-thread cache of (key) -> id, direct mapped */
#define TLS_CLASS 256    /* per-thread cache of code object -> library or program */
#define TLS_DEPTH 32     /* per-thread cache of the last walk's classes by depth */
#define MAX_BYTES (64u << 20) /* bytes of all strings at most (stack mode's are long) */
#define FILE_MAX 512
#define NAME_MAX_ 256

typedef struct key {
  uint64_t a, b; /* user: code address, its identity; stack: two hashes of the whole stack */
  int64_t c;     /* user: instruction offset; stack: -1 - depth */
} key_t_;

typedef struct kentry {
  key_t_ k;
  uint32_t id;
  UT_hash_handle hh;
} kentry_t;

typedef struct sentry {
  char *s;
  uint32_t id;
  UT_hash_handle hh;
} sentry_t;

struct rec_callsites {
  rec_cs_mode_t mode;
  int has_lay;        /* src.layout was given: lay is its copy */
  rec_pylayout_t lay; /* beside the mode and the serial: what a walk reads of the table */
  rec_pyframes_t src;
  int has_src;
  uint64_t serial; /* tells this table's entries in the per-thread caches from another's */
  uint64_t serial_mix; /* mix(serial): what class slots mix their keys with */
  unsigned max_strings;
  unsigned max_keys;
  pthread_mutex_t mu;
  sentry_t *by_text;          /* mu */
  kentry_t *by_key;           /* mu */
  unsigned nkeys;             /* mu */
  char **strs;                /* [1 .. max_strings + 1]; published before the id is handed out */
  _Atomic uint32_t nstrs;
  uint32_t other_id;          /* "[other]", 0 until needed; mu */
  size_t bytes;               /* mu: of all strings */
  _Atomic uint64_t misses;
  _Atomic uint32_t other;
  char text[STACK_TEXT];      /* mu: the string being made */
};

static _Atomic uint64_t g_serial = 1;

typedef struct id_slot {
  key_t_ k;
  uint64_t serial;
  uint32_t id;
} id_slot_t;

/* Per code object: library or program, and for program code the last instruction seen and its
 * id, so a frame that allocates from the same line as last time costs one lookup. Keyed by the
 * code object's address and its stamp (rec_pyframes_t.stamp: fields of its first cache line), so
 * a library frame of the walk reads that line only; the program's frame, whose id is taken, is
 * checked against its full identity too. 32 bytes: a slot never straddles two lines. */
typedef struct class_slot {
  const void *code;
  uint64_t stamp; /* the source's stamp, mixed with the table's serial */
  uint64_t ident; /* program code: its identity when id was cached, mixed with the serial */
  int32_t lasti;  /* program code: the instruction id is for (-2: none yet) */
  uint32_t id_lib; /* id << 1 | library */
} class_slot_t;
_Static_assert(sizeof(class_slot_t) == 32, "a class slot is half a cache line");

/* The last walk's code object at each depth and its class: the next walk, through the same
 * library functions (module.__call__, forward, ...), finds them on a few consecutive lines
 * instead of one hashed class slot per frame. key: the class slot's key, its low bit the class. */
typedef struct depth_slot {
  const void *code;
  uint64_t key;
} depth_slot_t;

/* The per-thread caches live on the heap. A thread finds its own without the loader where it can
 * (x86-64): in a library the driver dlopen()s, a thread-local access is a call of
 * __tls_get_addr, whose code and data a training step evicts between allocations. So a
 * direct-mapped table keyed by the thread pointer (%fs:0: the thread's own control block, unique
 * among live threads) points at caches, each holding its owner's thread pointer: a slot whose
 * cache is another thread's is a miss, then the thread-local pointer (one __tls_get_addr, as
 * everywhere else) finds this thread's cache and the slot is retaken if its owner has ended or
 * belongs elsewhere. Caches of ended threads are recycled, never freed, so a slot never points
 * at freed memory; their entries stay valid for any thread (keyed by table serial and code).
 * Not initial-exec TLS: that would mark the whole library STATIC_TLS, and a dlopen() fails once
 * the loader's small static TLS reserve is used up by other libraries. */
typedef struct tcache {
  _Atomic uintptr_t owner; /* the thread pointer of the thread using it; 0: its thread ended */
  depth_slot_t depth[TLS_DEPTH];
  id_slot_t ids[TLS_IDS];
  class_slot_t cls[TLS_CLASS];
  struct tcache *next_free;
} tcache_t;

static _Thread_local tcache_t *t_cache;
static pthread_key_t g_tkey;
static pthread_once_t g_tkey_once = PTHREAD_ONCE_INIT;
static int g_tkey_ok;
static pthread_mutex_t g_free_mu = PTHREAD_MUTEX_INITIALIZER;
static tcache_t *g_free; /* caches of ended threads */

#if defined(__x86_64__)
#define BY_TP 256
static _Atomic(tcache_t *) g_by_tp[BY_TP];
static inline uintptr_t thread_pointer(void) {
  uintptr_t tp;
  __asm__("mov %%fs:0, %0" : "=r"(tp));
  return tp;
}
static inline unsigned tp_slot(uintptr_t tp) { return (unsigned)((tp * 0x9E3779B97F4A7C15ull) >> 56) % BY_TP; }
#endif

static void tcache_free(void *p) {
  tcache_t *t = p;
  atomic_store_explicit(&t->owner, 0, memory_order_release);
  pthread_mutex_lock(&g_free_mu);
  t->next_free = g_free;
  g_free = t;
  pthread_mutex_unlock(&g_free_mu);
  t_cache = NULL;
}

static void tkey_make(void) { g_tkey_ok = pthread_key_create(&g_tkey, tcache_free) == 0; }

static COLD tcache_t *tcache_slow(void) {
  tcache_t *t = t_cache;
  if (!t) {
    pthread_once(&g_tkey_once, tkey_make);
    pthread_mutex_lock(&g_free_mu);
    if ((t = g_free)) g_free = t->next_free;
    pthread_mutex_unlock(&g_free_mu);
    if (!t && !(t = calloc(1, sizeof *t))) return NULL;
    if (g_tkey_ok) pthread_setspecific(g_tkey, t);
    t_cache = t;
  }
#if defined(__x86_64__)
  uintptr_t tp = thread_pointer();
  atomic_store_explicit(&t->owner, tp, memory_order_relaxed);
  unsigned h = tp_slot(tp);
  tcache_t *cur = atomic_load_explicit(&g_by_tp[h], memory_order_acquire);
  uintptr_t other = cur ? atomic_load_explicit(&cur->owner, memory_order_relaxed) : 0;
  if (!cur || cur == t || !other || tp_slot(other) != h) /* else a live thread's: it keeps it */
    atomic_store_explicit(&g_by_tp[h], t, memory_order_release);
#endif
  return t;
}

static inline tcache_t *tcache(void) {
#if defined(__x86_64__)
  uintptr_t tp = thread_pointer();
  tcache_t *t = atomic_load_explicit(&g_by_tp[tp_slot(tp)], memory_order_acquire);
  if (__builtin_expect(t && atomic_load_explicit(&t->owner, memory_order_relaxed) == tp, 1)) return t;
  return tcache_slow();
#else
  tcache_t *t = t_cache;
  return __builtin_expect(t != NULL, 1) ? t : tcache_slow();
#endif
}

/* ---- modes ------------------------------------------------------------------------------- */

static const char *const mode_names[] = {"none", "user", "stack"};

int rec_cs_mode_parse(const char *s) {
  if (!s || !*s) return REC_CS_USER;
  for (int i = 0; i < 3; i++)
    if (strcmp(s, mode_names[i]) == 0) return i;
  return -1;
}

const char *rec_cs_mode_name(int mode) {
  return mode >= 0 && mode < 3 ? mode_names[mode] : "?";
}

/* ---- library or program ------------------------------------------------------------------- */

/* "/lib/python3.12/" or "/lib64/python3.13t/": the standard library of some Python */
static int in_stdlib(const char *f) {
  for (const char *p = strstr(f, "/python3."); p; p = strstr(p + 1, "/python3.")) {
    if (!((p - f >= 4 && memcmp(p - 4, "/lib", 4) == 0) ||
          (p - f >= 6 && memcmp(p - 6, "/lib64", 6) == 0)))
      continue;
    const char *q = p + 9;
    if (*q < '0' || *q > '9') continue;
    while (*q >= '0' && *q <= '9') q++;
    if (*q == 't') q++;
    if (*q == '/') return 1;
  }
  return 0;
}

int rec_cs_is_library(const char *file) {
  if (!file || !*file) return 1;
  if (strncmp(file, "<frozen ", 8) == 0) return 1;
  if (strstr(file, "/site-packages/") || strstr(file, "/dist-packages/")) return 1;
  return in_stdlib(file);
}

/* Library paths read the same on any machine: cut after site-packages/ or dist-packages/. */
static const char *short_path(const char *file) {
  const char *p = strstr(file, "/site-packages/");
  if (p) return p + 15;
  p = strstr(file, "/dist-packages/");
  return p ? p + 15 : file;
}

/* ---- the table ---------------------------------------------------------------------------- */

gm_status_t rec_callsites_create(rec_callsites_t **out, rec_cs_mode_t mode,
                                 const rec_pyframes_t *src, unsigned max_strings, gm_err_t *err) {
  rec_callsites_t *c = calloc(1, sizeof *c);
  if (!c) return gm_err_set(err, GM_ERR_NOMEM, "callsites: out of memory");
  c->mode = mode;
  if (src) {
    c->src = *src;
    c->has_src = 1;
    if (src->layout) {
      c->lay = *src->layout;
      c->has_lay = 1;
    }
  }
  c->max_strings = max_strings ? max_strings : REC_CS_MAX_STRINGS;
  c->max_keys = c->max_strings * 2;
  c->serial = atomic_fetch_add(&g_serial, 1);
  c->serial_mix = mix(c->serial);
  /* ids 1..max_strings, plus one for "[other]" */
  c->strs = calloc((size_t)c->max_strings + 2, sizeof *c->strs);
  if (!c->strs) {
    free(c);
    return gm_err_set(err, GM_ERR_NOMEM, "callsites: out of memory");
  }
  pthread_mutex_init(&c->mu, NULL);
  *out = c;
  return GM_OK;
}

void rec_callsites_destroy(rec_callsites_t *c) {
  if (!c) return;
  kentry_t *k, *kt;
  HASH_ITER(hh, c->by_key, k, kt) {
    HASH_DEL(c->by_key, k);
    free(k);
  }
  sentry_t *s, *st;
  HASH_ITER(hh, c->by_text, s, st) {
    HASH_DEL(c->by_text, s);
    free(s); /* s->s is owned by strs */
  }
  for (uint32_t i = 1; i <= atomic_load(&c->nstrs); i++) free(c->strs[i]);
  free(c->strs);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* Under mu. The id of s, a new one if there is room; "[other]" beyond max_strings. */
static uint32_t intern_locked(rec_callsites_t *c, const char *s, int may_fold) {
  sentry_t *e;
  HASH_FIND_STR(c->by_text, s, e);
  if (e) return e->id;
  uint32_t n = atomic_load_explicit(&c->nstrs, memory_order_relaxed);
  size_t len = strlen(s);
  if ((n >= c->max_strings || c->bytes + len > MAX_BYTES) && may_fold) {
    atomic_fetch_add(&c->other, 1);
    if (!c->other_id) c->other_id = intern_locked(c, "[other]", 0);
    return c->other_id;
  }
  if (n >= c->max_strings + 1) return c->other_id; /* only "[other]" itself may use the spare */
  e = malloc(sizeof *e);
  char *copy = strdup(s);
  if (!e || !copy) {
    free(e);
    free(copy);
    return 0;
  }
  e->s = copy;
  e->id = n + 1;
  c->bytes += len + 1;
  c->strs[e->id] = copy;
  HASH_ADD_KEYPTR(hh, c->by_text, e->s, strlen(e->s), e);
  atomic_store_explicit(&c->nstrs, e->id, memory_order_release);
  return e->id;
}

uint32_t rec_callsites_intern(rec_callsites_t *c, const char *s) {
  pthread_mutex_lock(&c->mu);
  uint32_t id = intern_locked(c, s, 1);
  pthread_mutex_unlock(&c->mu);
  return id;
}

const char *rec_callsites_string(const rec_callsites_t *c, uint32_t id) {
  if (!c || id == 0 || id > atomic_load_explicit(&((rec_callsites_t *)c)->nstrs,
                                                  memory_order_acquire))
    return NULL;
  return c->strs[id];
}

void rec_callsites_stats(const rec_callsites_t *c, rec_callsites_stats_t *st) {
  rec_callsites_t *m = (rec_callsites_t *)c;
  st->captures = 0;
  st->misses = atomic_load(&m->misses);
  st->strings = atomic_load(&m->nstrs);
  st->other = atomic_load(&m->other);
}

/* ---- per-thread caches ---------------------------------------------------------------------- */

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

static id_slot_t *id_slot(tcache_t *t, const key_t_ *k) {
  return &t->ids[mix(k->a ^ (k->b * 31) ^ (uint64_t)k->c * 0x9E3779B97F4A7C15ull) % TLS_IDS];
}

static int same_key(const key_t_ *x, const key_t_ *y) {
  return x->a == y->a && x->b == y->b && x->c == y->c;
}

static COLD class_slot_t *classify_miss(rec_callsites_t *c, class_slot_t *s, const void *code, uint64_t key);

/* The code object's slot, classified: library code or the program's. Cached per thread by
 * (address, stamp). */
static inline class_slot_t *classify(rec_callsites_t *c, tcache_t *t, const void *code, uint64_t stamp) {
  class_slot_t *s = &t->cls[((uint64_t)(uintptr_t)code >> 4) % TLS_CLASS];
  uint64_t key = stamp ^ c->serial_mix;
  if (__builtin_expect(s->code == code && s->stamp == key, 1)) return s;
  return classify_miss(c, s, code, key);
}

static class_slot_t *classify_miss(rec_callsites_t *c, class_slot_t *s, const void *code, uint64_t key) {
  char file[FILE_MAX], name[NAME_MAX_];
  int lib = 1; /* unreadable: not the program's frame */
  if (c->src.text(c->src.ctx, code, file, sizeof file, name, sizeof name))
    lib = rec_cs_is_library(file);
  *s = (class_slot_t){.code = code, .stamp = key, .ident = 0, .lasti = -2, .id_lib = (uint32_t)lib};
  return s;
}

/* "file:line:name" of one frame into buf (library paths shortened); its length, 0 if none. */
static size_t frame_text(rec_callsites_t *c, const void *code, int lasti, char *buf, size_t n) {
  char file[FILE_MAX], name[NAME_MAX_];
  if (!c->src.text(c->src.ctx, code, file, sizeof file, name, sizeof name)) {
    snprintf(file, sizeof file, "?");
    snprintf(name, sizeof name, "?");
  }
  int line = c->src.line(c->src.ctx, code, lasti);
  const char *f = rec_cs_is_library(file) ? short_path(file) : file;
  int w = snprintf(buf, n, "%s:%d:%s", f, line, name);
  return w < 0 ? 0 : (size_t)w >= n ? n - 1 : (size_t)w;
}

/* Under mu: the id of key k, made by text_of() on a miss. */
typedef size_t (*text_fn)(rec_callsites_t *c, const void *arg, char *buf, size_t n);

static COLD uint32_t lookup_miss(rec_callsites_t *c, id_slot_t *s, const key_t_ *k, text_fn make,
                                 const void *arg);

static inline uint32_t lookup_or_make(rec_callsites_t *c, tcache_t *t, const key_t_ *k, text_fn make,
                                      const void *arg) {
  id_slot_t *s = id_slot(t, k);
  if (__builtin_expect(s->serial == c->serial && same_key(&s->k, k), 1)) return s->id;
  return lookup_miss(c, s, k, make, arg);
}

static uint32_t lookup_miss(rec_callsites_t *c, id_slot_t *s, const key_t_ *k, text_fn make,
                            const void *arg) {
  atomic_fetch_add_explicit(&c->misses, 1, memory_order_relaxed);
  pthread_mutex_lock(&c->mu);
  kentry_t *e;
  HASH_FIND(hh, c->by_key, k, sizeof *k, e);
  uint32_t id;
  if (e) {
    id = e->id;
  } else {
    id = make(c, arg, c->text, sizeof c->text) ? intern_locked(c, c->text, 1) : 0;
    if (id && c->nkeys < c->max_keys && (e = malloc(sizeof *e))) {
      e->k = *k;
      e->id = id;
      HASH_ADD(hh, c->by_key, k, sizeof e->k, e);
      c->nkeys++;
    }
  }
  pthread_mutex_unlock(&c->mu);
  if (id) *s = (id_slot_t){.k = *k, .serial = c->serial, .id = id};
  return id;
}

/* ---- user mode ------------------------------------------------------------------------------ */

typedef struct one_frame {
  const void *code;
  int lasti;
} one_frame_t;

static size_t make_one(rec_callsites_t *c, const void *arg, char *buf, size_t n) {
  const one_frame_t *f = arg;
  return frame_text(c, f->code, f->lasti, buf, n);
}

/* A frame's fields, read through the table's copy of the source's layout (lay: the frames as
 * plain memory, no call) or its functions; lay is a constant in each of capture_user's two
 * copies, so the layout's copy has no call per frame. */
#define AT(p, off, type) (*(type const *)((const char *)(p) + (off)))

static inline const void *fr_back(const rec_callsites_t *c, int lay, const void *f) {
  return lay ? AT(f, c->lay.fr_back, const void *) : c->src.back(c->src.ctx, f);
}

static inline const void *fr_code(const rec_callsites_t *c, int lay, const void *f) {
  if (!lay) return c->src.code(c->src.ctx, f);
  if (c->lay.fr_owner >= 0 && AT(f, (size_t)c->lay.fr_owner, char) == c->lay.owner_shim) return NULL;
  const void *co = AT(f, c->lay.fr_code, const void *);
  return co && AT(co, 8, const void *) == c->lay.code_type ? co : NULL;
}

static inline uint64_t code_stamp(const rec_callsites_t *c, int lay, const void *code) {
  if (lay) return rec_pystamp(AT(code, c->lay.st_a, uint64_t), AT(code, c->lay.st_b, uint64_t),
                              AT(code, c->lay.st_c, uint64_t));
  return c->src.stamp ? c->src.stamp(c->src.ctx, code) : c->src.ident(c->src.ctx, code);
}

static inline __attribute__((always_inline)) uint32_t capture_user_with(rec_callsites_t *c, tcache_t *t, const void *top,
                                                                      int lay) {
  const rec_pyframes_t *s = &c->src;
  const void *first = NULL, *first_frame = NULL;
  int depth = 0;
  for (const void *f = top; f && depth < MAX_DEPTH; f = fr_back(c, lay, f), depth++) {
    const void *code = fr_code(c, lay, f);
    if (!code) continue;
    if (!first) {
      first = code;
      first_frame = f;
    }
    uint64_t stamp = code_stamp(c, lay, code);
    uint64_t key = (stamp ^ c->serial_mix) | 1;
    depth_slot_t *ds = depth < TLS_DEPTH ? &t->depth[depth] : NULL;
    if (ds && ds->code == code && (ds->key | 1) == key && (ds->key & 1)) continue; /* library */
    class_slot_t *cl = classify(c, t, code, stamp);
    if (ds) *ds = (depth_slot_t){code, (key & ~1ull) | (cl->id_lib & 1)};
    if (cl->id_lib & 1) continue;
    uint64_t ident = s->ident(s->ctx, code);
    one_frame_t one = {code, s->lasti(s->ctx, f, code)};
    if (cl->lasti == one.lasti && cl->ident == (ident ^ c->serial_mix) && (cl->id_lib >> 1)) return cl->id_lib >> 1;
    key_t_ k = {(uint64_t)(uintptr_t)code, ident, one.lasti};
    uint32_t id = lookup_or_make(c, t, &k, make_one, &one);
    cl->lasti = one.lasti;
    cl->ident = ident ^ c->serial_mix;
    cl->id_lib = id << 1;
    return id;
  }
  if (!first) return 0;
  /* no frame of the program: the innermost one (a library's own work, e.g. an optimizer) */
  one_frame_t one = {first, s->lasti(s->ctx, first_frame, first)};
  key_t_ k = {(uint64_t)(uintptr_t)first, s->ident(s->ctx, first), one.lasti};
  return lookup_or_make(c, t, &k, make_one, &one);
}

static HOT uint32_t capture_user(rec_callsites_t *c, tcache_t *t, const void *top) {
  return c->has_lay ? capture_user_with(c, t, top, 1) : capture_user_with(c, t, top, 0);
}

/* ---- stack mode ----------------------------------------------------------------------------- */

typedef struct stack {
  int n;
  one_frame_t f[STACK_FRAMES];
  int more;
} stack_t_;

static size_t make_stack(rec_callsites_t *c, const void *arg, char *buf, size_t n) {
  const stack_t_ *st = arg;
  size_t off = 0;
  for (int i = 0; i < st->n && off + 8 < n; i++) {
    if (i) off += (size_t)snprintf(buf + off, n - off, " < ");
    if (off >= n - 1) break;
    off += frame_text(c, st->f[i].code, st->f[i].lasti, buf + off, n - off);
  }
  if (st->more && off + 8 < n) off += (size_t)snprintf(buf + off, n - off, " < ...");
  return off;
}

static uint32_t capture_stack(rec_callsites_t *c, tcache_t *t, const void *top) {
  const rec_pyframes_t *s = &c->src;
  stack_t_ st;
  st.n = 0;
  st.more = 0;
  uint64_t h1 = 0x243F6A8885A308D3ull, h2 = 0x13198A2E03707344ull;
  int depth = 0;
  for (const void *f = top; f && depth < MAX_DEPTH; f = s->back(s->ctx, f), depth++) {
    const void *code = s->code(s->ctx, f);
    if (!code) continue;
    if (st.n == STACK_FRAMES) {
      st.more = 1;
      break;
    }
    int lasti = s->lasti(s->ctx, f, code);
    uint64_t ident = s->ident(s->ctx, code);
    st.f[st.n++] = (one_frame_t){code, lasti};
    uint64_t x = (uint64_t)(uintptr_t)code ^ ((uint64_t)(uint32_t)lasti << 40);
    h1 = mix(h1 ^ x) + ident;
    h2 = mix(h2 + x * 0x9E3779B97F4A7C15ull) ^ mix(ident);
  }
  if (!st.n) return 0;
  key_t_ k = {h1, h2, -1 - st.n};
  return lookup_or_make(c, t, &k, make_stack, &st);
}

HOT uint32_t rec_callsites_capture(rec_callsites_t *c) {
  if (!c || !c->has_src || c->mode == REC_CS_NONE) return 0;
  /* a thread without Python frames (autograd's, in a backward pass) needs no cache */
  const void *top = c->src.top(c->src.ctx);
  if (!top) return 0;
  tcache_t *t = tcache();
  if (!t) return 0;
  return c->mode == REC_CS_STACK ? capture_stack(c, t, top) : capture_user(c, t, top);
}

uint32_t rec_callsites_owner(rec_callsites_t *c, uint32_t py, const void *self) {
  if (!c || c->mode == REC_CS_NONE) return py;
  char buf[STACK_TEXT];
  size_t n = rec_owner_name(NULL, self, buf, 256);
  if (!n) return py;
  const char *pys = py ? rec_callsites_string(c, py) : NULL;
  if (pys) snprintf(buf + n, sizeof buf - n, " < %s", pys);
  return rec_callsites_intern(c, buf);
}
