/* fuzz_cli_numbers.c: libFuzzer target over the numbers users type on command lines and in
 * policy specs (gm_parse_size, gm_parse_u64, gm_parse_fraction, the option parser with value
 * ranges) and over gm_escape, which every tool uses to print text from its input.
 * Input: NUL-separated arguments for an option table like gpureplay's (the first piece picks
 * nothing: all pieces are tried with every parser too). Oracles (abort = a finding): an
 * accepted size or integer prints back to the same value; an accepted fraction is in [0, 1];
 * an option accepted by the table is within its range; a refusal says why, and printed as the
 * tools print it, it is one line with nothing a terminal acts on;
 * gm_escape's output is valid UTF-8 with no control character, within its buffer.
 * Built and run by run_fuzz.sh (clang -fsanitize=fuzzer,address,undefined). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/gm_base.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct cfg {
  uint64_t capacity, granularity, jobs, limit;
  double fraction;
  const char *name;
  int flag;
} cfg_t;

static const gm_opt_t kOpts[] = {
    {"capacity", 'c', GM_OPT_SIZE, "SIZE", "c", offsetof(cfg_t, capacity), 1, 1ull << 48},
    {"granularity", 0, GM_OPT_SIZE, "SIZE", "g", offsetof(cfg_t, granularity), 512, 2ull << 20},
    {"jobs", 'j', GM_OPT_U64, "N", "j", offsetof(cfg_t, jobs), 1, 256},
    {"limit", 'n', GM_OPT_U64, "N", "n", offsetof(cfg_t, limit)},
    {"fraction", 0, GM_OPT_FRACTION, "F", "f", offsetof(cfg_t, fraction)},
    {"name", 'o', GM_OPT_STR, "S", "s", offsetof(cfg_t, name)},
    {"flag", 'f', GM_OPT_FLAG, NULL, "x", offsetof(cfg_t, flag)},
    {NULL, 0, 0, NULL, NULL, 0},
};

static void terminal_safe(const char *s);

/* A refusal says why; the message may quote the input (a newline, an escape), so what the
 * tools print of it (gm_log and the usage errors escape it) must be one safe line. */
static void one_line(const gm_err_t *e) {
  if (!e->msg[0]) abort();
  char esc[4 * GM_ERR_MSG_MAX];
  gm_escape(e->msg, esc, sizeof esc);
  terminal_safe(esc);
}

/* Valid UTF-8 with nothing a terminal acts on. */
static void terminal_safe(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    if (*p < 0x20 || *p == 0x7f) abort();
    int n = *p < 0x80 ? 1 : *p >= 0xC2 && *p <= 0xDF ? 2 : *p >= 0xE0 && *p <= 0xEF ? 3 : *p >= 0xF0 && *p <= 0xF4 ? 4 : 0;
    if (!n) abort();
    uint32_t cp = n == 1 ? *p : (uint32_t)(*p & (0x7F >> n));
    for (int k = 1; k < n; k++) {
      if ((p[k] & 0xC0) != 0x80) abort();
      cp = cp << 6 | (p[k] & 0x3F);
    }
    if (cp >= 0x80 && cp <= 0x9F) abort();
    p += n;
  }
}

static void numbers(const char *s) {
  gm_err_t e;
  char buf[64];
  uint64_t v = 0, w = 0;
  if (gm_parse_size(s, &v, &e) == GM_OK) {
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    if (gm_parse_size(buf, &w, &e) != GM_OK || w != v) abort();
  } else {
    one_line(&e);
  }
  if (gm_parse_u64(s, &v, &e) == GM_OK) {
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    if (gm_parse_u64(buf, &w, &e) != GM_OK || w != v) abort();
  } else {
    one_line(&e);
  }
  double f = -1;
  if (gm_parse_fraction(s, &f, &e) == GM_OK) {
    if (!(f >= 0.0 && f <= 1.0)) abort();
  } else {
    one_line(&e);
  }
  char esc[96];
  gm_escape(s, esc, sizeof esc);
  if (strlen(esc) >= sizeof esc) abort();
  terminal_safe(esc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0;
  char *copy = malloc(size + 1);
  if (!copy) return 0;
  memcpy(copy, data, size);
  copy[size] = '\0';
  char *argv[66] = {"tool"};
  int argc = 1;
  for (char *p = copy; argc < 65 && p <= copy + size; p += strlen(p) + 1) {
    argv[argc++] = p;
    numbers(p);
  }
  cfg_t c;
  memset(&c, 0, sizeof c);
  char *pos[66];
  int npos = 0;
  gm_err_t e;
  if (gm_opts_parse(kOpts, argc, argv, &c, pos, &npos, 0, &e) == GM_OK) {
    if (c.capacity && (c.capacity < 1 || c.capacity > (1ull << 48))) abort();
    if (c.granularity && (c.granularity < 512 || c.granularity > (2ull << 20))) abort();
    if (c.jobs && c.jobs > 256) abort();
    if (c.fraction < 0.0 || c.fraction > 1.0) abort();
    if (npos > argc) abort();
  } else {
    one_line(&e);
  }
  free(copy);
  return 0;
}
