/* pt_conf.c: PYTORCH_CUDA_ALLOC_CONF as torch 2.11 reads it, and the two size functions that
 * depend on it (round_size, get_allocation_size).
 *
 * torch 2.11 splits the string into tokens at ',', ':', '[' and ']' (each of those is a token
 * of its own) and drops whitespace; keys are then matched exactly. Two parsers read the same
 * string: AcceleratorAllocatorConfig (device-generic keys; large_segment_size_mb is read in a
 * first pass because the floors of max_split_size_mb and max_non_split_rounding_mb, and the
 * default of the latter, come from it) and CUDAAllocatorConfig (backend, release_lock_*,
 * pinned_*, graph_capture_record_stream_reuse, per_process_memory_fraction). Here both are one
 * table. Keys that only touch the host (pinned) allocator or locking are validated and then
 * ignored: they cannot change device memory.
 *
 * Deliberate differences: numbers must be plain decimal (torch's std::stoull also accepts
 * "20abc" as 20 and "-1" as a huge value; here those are errors naming the key). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "replay/policies/pytorch/pt_conf.h"

#define MiB (1024ull * 1024ull)
#define MIN_BLOCK 512ull          /* kMinBlockSize */
#define SMALL_SIZE (1ull * MiB)   /* kSmallSize */
#define SMALL_BUFFER (2ull * MiB) /* kSmallBuffer */
#define MIN_LARGE_ALLOC (10ull * MiB) /* kMinLargeAlloc */
#define ROUND_LARGE (2ull * MiB)  /* kRoundLarge */
#define MAX_TOKENS 512
#define MAX_TOKEN 64 /* bytes of one token without its whitespace; torch's longest key is 33 */

typedef struct tok {
  const char *s;
  size_t n;
} tok_t;

typedef struct toks {
  tok_t t[MAX_TOKENS];
  size_t n;
  char buf[MAX_TOKEN + 1]; /* a copy of one token, NUL-terminated, for messages and number parsing */
} toks_t;

static int is_sep(char c) { return c == ',' || c == ':' || c == '[' || c == ']'; }
static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* ConfigTokenizer. Whitespace inside a word is dropped too ("max split" == "maxsplit"), as in
 * torch; we keep spans and compare skipping whitespace. */
static gm_status_t tokenize(const char *s, toks_t *tk, gm_err_t *err) {
  tk->n = 0;
  const char *w = NULL;
  for (const char *p = s;; p++) {
    if (*p == '\0' || is_sep(*p)) {
      if (w) {
        if (tk->n == MAX_TOKENS) goto toolong;
        size_t bytes = 0; /* a longer token would be cut in tokstr: refuse it, never cut */
        for (const char *q = w; q < p; q++) bytes += !is_ws(*q);
        if (bytes > MAX_TOKEN)
          return gm_err_set(err, GM_ERR_INVAL, "pytorch: token '%.24s...' has %zu bytes, more than %d (limit MAX_TOKEN)",
                            w, bytes, MAX_TOKEN);
        tk->t[tk->n++] = (tok_t){w, (size_t)(p - w)};
        w = NULL;
      }
      if (*p == '\0') break;
      if (tk->n == MAX_TOKENS) goto toolong;
      tk->t[tk->n++] = (tok_t){p, 1};
    } else if (!is_ws(*p) && !w) {
      w = p;
    }
  }
  return GM_OK;
toolong:
  return gm_err_set(err, GM_ERR_INVAL, "pytorch: the configuration has more than %d tokens (limit MAX_TOKENS; "
                    "each key, value and ',', ':', '[', ']' is one)", MAX_TOKENS);
}

/* The token as a C string without whitespace (truncated to fit buf). */
static const char *tokstr(toks_t *tk, size_t i) {
  size_t k = 0;
  if (i < tk->n)
    for (size_t j = 0; j < tk->t[i].n && k + 1 < sizeof tk->buf; j++)
      if (!is_ws(tk->t[i].s[j])) tk->buf[k++] = tk->t[i].s[j];
  tk->buf[k] = '\0';
  return tk->buf;
}

static int tokeq(toks_t *tk, size_t i, const char *lit) { return i < tk->n && strcmp(tokstr(tk, i), lit) == 0; }

/* ---- value parsers: each takes the index of the key token and returns the index of the last
 * token it consumed through *i. ---- */

typedef gm_status_t (*parse_fn)(toks_t *tk, size_t *i, const char *key, rp_pytorch_conf_t *c, gm_err_t *err);

static gm_status_t expect_colon(toks_t *tk, size_t *i, const char *key, gm_err_t *err) {
  if (!tokeq(tk, *i + 1, ":")) return gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: expected ':' after the key", key);
  if (*i + 2 >= tk->n) return gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: missing value", key);
  *i += 2;
  return GM_OK;
}

static gm_status_t tok_u64(toks_t *tk, size_t i, const char *key, uint64_t *out, gm_err_t *err) {
  const char *s = tokstr(tk, i);
  if (!*s || strspn(s, "0123456789") != strlen(s))
    return gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: '%s' is not a non-negative integer", key, s);
  errno = 0;
  unsigned long long v = strtoull(s, NULL, 10);
  if (errno) return gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: '%s' is out of range", key, s);
  *out = v;
  return GM_OK;
}

static gm_status_t tok_double(toks_t *tk, size_t i, const char *key, double *out, gm_err_t *err) {
  const char *s = tokstr(tk, i);
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (!*s || *end || errno || !isfinite(v))
    return gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: '%s' is not a number", key, s);
  *out = v;
  return GM_OK;
}

static gm_status_t tok_bool(toks_t *tk, size_t i, const char *key, int *out, gm_err_t *err) {
  if (tokeq(tk, i, "True")) *out = 1;
  else if (tokeq(tk, i, "False")) *out = 0;
  else return gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: expected True or False, got '%s'", key, tokstr(tk, i));
  return GM_OK;
}

static int pow2(uint64_t v) { return v && !(v & (v - 1)); }
static unsigned log2_floor(uint64_t v) { return 63u - (unsigned)__builtin_clzll(v); }

/* A size in MiB with a floor; clamped to SIZE_MAX/MiB like torch. */
static gm_status_t mib_with_floor(toks_t *tk, size_t *i, const char *key, uint64_t floor_mb, int strict,
                                  uint64_t *out, gm_err_t *err) {
  uint64_t v;
  gm_status_t s = expect_colon(tk, i, key, err);
  if (s == GM_OK) s = tok_u64(tk, *i, key, &v, err);
  if (s != GM_OK) return s;
  if (strict ? v <= floor_mb : v < floor_mb)
    return gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: %" PRIu64 " is too small, must be %s %" PRIu64, key, v,
                      strict ? ">" : ">=", floor_mb);
  if (v > UINT64_MAX / MiB) v = UINT64_MAX / MiB;
  *out = v * MiB;
  return GM_OK;
}

static gm_status_t p_large_segment(toks_t *tk, size_t *i, const char *key, rp_pytorch_conf_t *c, gm_err_t *err) {
  return mib_with_floor(tk, i, key, MIN_LARGE_ALLOC / MiB, 1, &c->large_segment_size, err);
}
static gm_status_t p_max_split(toks_t *tk, size_t *i, const char *key, rp_pytorch_conf_t *c, gm_err_t *err) {
  return mib_with_floor(tk, i, key, c->large_segment_size / MiB, 0, &c->max_split_size, err);
}
static gm_status_t p_non_split(toks_t *tk, size_t *i, const char *key, rp_pytorch_conf_t *c, gm_err_t *err) {
  return mib_with_floor(tk, i, key, c->large_segment_size / MiB, 0, &c->max_non_split_rounding, err);
}

static gm_status_t p_gc(toks_t *tk, size_t *i, const char *key, rp_pytorch_conf_t *c, gm_err_t *err) {
  double v;
  gm_status_t s = expect_colon(tk, i, key, err);
  if (s == GM_OK) s = tok_double(tk, *i, key, &v, err);
  if (s != GM_OK) return s;
  if (!(v > 0.0 && v < 1.0)) return gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: %g is invalid, set it in (0.0, 1.0)", key, v);
  c->gc_threshold = v;
  return GM_OK;
}

static gm_status_t p_fraction(toks_t *tk, size_t *i, const char *key, rp_pytorch_conf_t *c, gm_err_t *err) {
  double v;
  gm_status_t s = expect_colon(tk, i, key, err);
  if (s == GM_OK) s = tok_double(tk, *i, key, &v, err);
  if (s != GM_OK) return s;
  if (!(v >= 0.0 && v <= 1.0)) return gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: %g is invalid, set it in [0.0, 1.0]", key, v);
  c->memory_fraction = v;
  return GM_OK;
}

static gm_status_t p_expandable(toks_t *tk, size_t *i, const char *key, rp_pytorch_conf_t *c, gm_err_t *err) {
  gm_status_t s = expect_colon(tk, i, key, err);
  return s == GM_OK ? tok_bool(tk, *i, key, &c->expandable_segments, err) : s;
}

/* roundup_power2_divisions: N (a power of 2, applied to every interval) or a list
 * [B:n,...,>:n]. A boundary B (MiB, a power of 2) sets index log2(B), i.e. the sizes in
 * [B MiB, 2B MiB); the first entry also fills every lower index; '>' fills from the index after
 * the last explicit entry to the end (torch >= 2.6; older torch started at the last entry). */
static gm_status_t p_roundup(toks_t *tk, size_t *i, const char *key, rp_pytorch_conf_t *c, gm_err_t *err) {
  gm_status_t s = expect_colon(tk, i, key, err);
  if (s != GM_OK) return s;
  uint64_t *d = c->roundup_divisions;
  if (!tokeq(tk, *i, "[")) {
    uint64_t v;
    if ((s = tok_u64(tk, *i, key, &v, err)) != GM_OK) return s;
    if (!pow2(v)) return gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: %" PRIu64 " is not a power of 2", key, v);
    for (int k = 0; k < RP_PYTORCH_ROUNDUP_INTERVALS; k++) d[k] = v;
    return GM_OK;
  }
  size_t last = 0;
  int first = 1;
  while (++*i < tk->n && !tokeq(tk, *i, "]")) {
    size_t bi = *i;
    uint64_t v;
    if (!tokeq(tk, bi + 1, ":") || bi + 2 >= tk->n)
      return gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: expected BOUNDARY:DIVISIONS in the list", key);
    *i = bi + 2;
    if ((s = tok_u64(tk, *i, key, &v, err)) != GM_OK) return s;
    if (v != 0 && !pow2(v))
      return gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: divisions %" PRIu64 " must be a power of 2 or 0", key, v);
    if (tokeq(tk, bi, ">")) {
      for (size_t k = last + 1; k < RP_PYTORCH_ROUNDUP_INTERVALS; k++) d[k] = v;
    } else {
      uint64_t b;
      if ((s = tok_u64(tk, bi, key, &b, err)) != GM_OK) return s;
      if (!pow2(b)) return gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: interval %" PRIu64 " must be a power of 2", key, b);
      size_t idx = log2_floor(b);
      if (idx > RP_PYTORCH_ROUNDUP_INTERVALS - 1) idx = RP_PYTORCH_ROUNDUP_INTERVALS - 1;
      if (first) {
        for (size_t k = 0; k < idx; k++) d[k] = v;
        first = 0;
      }
      d[idx] = v;
      last = idx;
    }
    if (*i + 1 < tk->n && !tokeq(tk, *i + 1, "]")) {
      if (!tokeq(tk, *i + 1, ",")) return gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: expected ',' in the list", key);
      ++*i;
    }
  }
  if (*i >= tk->n) return gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: missing ']'", key);
  return GM_OK;
}

static gm_status_t p_backend(toks_t *tk, size_t *i, const char *key, rp_pytorch_conf_t *c, gm_err_t *err) {
  gm_status_t s = expect_colon(tk, i, key, err);
  if (s != GM_OK) return s;
  if (tokeq(tk, *i, "native")) return GM_OK;
  if (tokeq(tk, *i, "cudaMallocAsync"))
    return gm_err_set(err, GM_ERR_INVAL,
                      "pytorch: backend:cudaMallocAsync is not the caching allocator; use the `async` policy");
  return gm_err_set(err, GM_ERR_INVAL, "pytorch: backend: unknown allocator backend '%s', options are native and cudaMallocAsync",
                    tokstr(tk, *i));
}

/* Keys without effect on device memory: validate the value, keep nothing. */
static gm_status_t p_ignored_bool(toks_t *tk, size_t *i, const char *key, rp_pytorch_conf_t *c, gm_err_t *err) {
  int b;
  gm_status_t s = expect_colon(tk, i, key, err);
  return s == GM_OK ? tok_bool(tk, *i, key, &b, err) : s;
}
static gm_status_t p_register_threads(toks_t *tk, size_t *i, const char *key, rp_pytorch_conf_t *c, gm_err_t *err) {
  uint64_t v;
  gm_status_t s = expect_colon(tk, i, key, err);
  if (s == GM_OK) s = tok_u64(tk, *i, key, &v, err);
  if (s != GM_OK) return s;
  if (!pow2(v)) return gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: %" PRIu64 " is not a power of 2", key, v);
  if (v > 128) return gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: %" PRIu64 " is more than 128", key, v);
  return GM_OK;
}
static gm_status_t p_positive(toks_t *tk, size_t *i, const char *key, rp_pytorch_conf_t *c, gm_err_t *err) {
  uint64_t v;
  gm_status_t s = expect_colon(tk, i, key, err);
  if (s == GM_OK) s = tok_u64(tk, *i, key, &v, err);
  if (s == GM_OK && v == 0) s = gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: must be greater than 0", key);
  return s;
}

/* Every key torch 2.11 accepts in PYTORCH_CUDA_ALLOC_CONF on CUDA (checked against torch
 * 2.11.0+cu130 with tools/torch_keys.py: throw_on_cudamalloc_oom, pinned_free_catch_all and
 * expandable_segments_reserve* came later and are rejected there too). `first` keys are read in the
 * first pass (large_segment_size_mb) and skipped in the second. */
static const struct key {
  const char *name;
  parse_fn parse;
  int first;
} KEYS[] = {
    {"large_segment_size_mb", p_large_segment, 1},
    {"max_split_size_mb", p_max_split, 0},
    {"max_non_split_rounding_mb", p_non_split, 0},
    {"garbage_collection_threshold", p_gc, 0},
    {"roundup_power2_divisions", p_roundup, 0},
    {"expandable_segments", p_expandable, 0},
    {"per_process_memory_fraction", p_fraction, 0},
    {"backend", p_backend, 0},
    {"release_lock_on_cudamalloc", p_ignored_bool, 0},
    {"release_lock_on_hipmalloc", p_ignored_bool, 0},
    {"pinned_use_cuda_host_register", p_ignored_bool, 0},
    {"pinned_use_hip_host_register", p_ignored_bool, 0},
    {"pinned_use_background_threads", p_ignored_bool, 0},
    {"graph_capture_record_stream_reuse", p_ignored_bool, 0},
    {"pinned_num_register_threads", p_register_threads, 0},
    {"pinned_reserve_segment_size_mb", p_positive, 0},
    {NULL, NULL, 0},
};

static const struct key *find_key(toks_t *tk, size_t i) {
  const char *k = tokstr(tk, i);
  for (const struct key *e = KEYS; e->name; e++)
    if (strcmp(e->name, k) == 0) return e;
  return NULL;
}

/* Skip a value we already parsed in the other pass: ':' then one token or a [...] list. */
static size_t skip_value(toks_t *tk, size_t i) {
  i += 2;
  if (tokeq(tk, i, "["))
    while (i < tk->n && !tokeq(tk, i, "]")) i++;
  return i;
}

static gm_status_t run_pass(toks_t *tk, int first_pass, rp_pytorch_conf_t *c, gm_err_t *err) {
  for (size_t i = 0; i < tk->n; i++) {
    const struct key *k = find_key(tk, i);
    if (!k) {
      const char *name = tokstr(tk, i);
      if (is_sep(name[0]) && !name[1]) return gm_err_set(err, GM_ERR_INVAL, "pytorch: unexpected '%s' where a key was expected", name);
      const char *names[sizeof KEYS / sizeof KEYS[0]];
      size_t nn = 0;
      for (const struct key *e = KEYS; e->name; e++) names[nn++] = e->name;
      const char *near = gm_closest(name, names, nn);
      if (near)
        return gm_err_set(err, GM_ERR_INVAL, "pytorch: unknown key '%s' (did you mean '%s'?)", name, near);
      return gm_err_set(err, GM_ERR_INVAL, "pytorch: unknown key '%s' (not a torch " RP_PYTORCH_VERSION " PYTORCH_CUDA_ALLOC_CONF key)", name);
    }
    if (k->first == first_pass) {
      gm_status_t s = k->parse(tk, &i, k->name, c, err);
      if (s != GM_OK) return s;
    } else {
      if (!tokeq(tk, i + 1, ":") || i + 2 >= tk->n) return gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: missing value", k->name);
      i = skip_value(tk, i);
    }
    if (i + 1 < tk->n) {
      if (!tokeq(tk, i + 1, ","))
        return gm_err_set(err, GM_ERR_INVAL, "pytorch: %s: expected ',' after the value, got '%s'", k->name, tokstr(tk, i + 1));
      i++;
    }
  }
  return GM_OK;
}

void rp_pytorch_conf_default(rp_pytorch_conf_t *c) {
  memset(c, 0, sizeof *c);
  c->max_split_size = UINT64_MAX;
  c->large_segment_size = 20 * MiB;
  c->max_non_split_rounding = c->large_segment_size;
  c->gc_threshold = 0.0;
  c->memory_fraction = 1.0;
}

gm_status_t rp_pytorch_conf_parse(const char *s, rp_pytorch_conf_t *c, gm_err_t *err) {
  toks_t *tk = malloc(sizeof *tk);
  if (!tk) return gm_err_set(err, GM_ERR_NOMEM, "pytorch: out of memory");
  gm_status_t st = tokenize(s ? s : "", tk, err);
  if (st == GM_OK) st = run_pass(tk, 1, c, err);
  /* max_non_split_rounding's default follows large_segment_size (torch resets it after the
   * first pass, before the second can set it). */
  if (st == GM_OK) c->max_non_split_rounding = c->large_segment_size;
  if (st == GM_OK) st = run_pass(tk, 0, c, err);
  free(tk);
  return st;
}

/* ---- sizes ---- */

/* The roundup interval of a size whose log2 (floor) is log_size. */
static unsigned interval_of(unsigned log_size) {
  unsigned idx = log_size > 20 ? log_size - 20 : 0; /* 20 = log2(kRoundUpPowerOfTwoStart) */
  return idx > RP_PYTORCH_ROUNDUP_INTERVALS - 1 ? RP_PYTORCH_ROUNDUP_INTERVALS - 1 : idx;
}

static uint64_t divisions_for(const rp_pytorch_conf_t *c, uint64_t size) {
  return c->roundup_divisions[interval_of(log2_floor(size))];
}

static uint64_t next_division(uint64_t size, uint64_t divisions) {
  if (pow2(size)) return size;
  uint64_t floor2 = 1ull << log2_floor(size);
  uint64_t step = floor2 >> log2_floor(divisions);
  if (step == 0) return floor2 << 1;
  uint64_t down = size & ~(step - 1);
  return down == size ? size : down + step;
}

uint64_t rp_pytorch_round_size(const rp_pytorch_conf_t *c, uint64_t size) {
  if (size < MIN_BLOCK) return MIN_BLOCK;
  uint64_t d = divisions_for(c, size);
  if (d > 1 && size > MIN_BLOCK * d) return next_division(size, d);
  return MIN_BLOCK * ((size + MIN_BLOCK - 1) / MIN_BLOCK);
}

/* round_size reads divisions d only as d > 1 (0 and 1 both mean: no power-of-2 rounding). */
int rp_pytorch_same_rounding(const rp_pytorch_conf_t *a, const rp_pytorch_conf_t *b, uint64_t log2_mask) {
  for (unsigned k = 0; k < 64; k++) {
    if (!(log2_mask >> k & 1)) continue;
    unsigned i = interval_of(k);
    uint64_t da = a->roundup_divisions[i], db = b->roundup_divisions[i];
    if ((da > 1 ? da : 1) != (db > 1 ? db : 1)) return 0;
  }
  return 1;
}

uint64_t rp_pytorch_allowed_max(const rp_pytorch_conf_t *c, uint64_t total_memory) {
  return c->memory_fraction < 1.0 ? (uint64_t)(c->memory_fraction * (double)total_memory) : 0;
}

uint64_t rp_pytorch_gc_threshold(const rp_pytorch_conf_t *c, uint64_t allowed_max) {
  return (uint64_t)(c->gc_threshold * (double)allowed_max);
}

uint64_t rp_pytorch_allocation_size(const rp_pytorch_conf_t *c, uint64_t rounded) {
  if (rounded <= SMALL_SIZE) return SMALL_BUFFER;
  if (rounded < MIN_LARGE_ALLOC) return c->large_segment_size;
  return ROUND_LARGE * ((rounded + ROUND_LARGE - 1) / ROUND_LARGE);
}
