/* gm_esc.c: text from untrusted input made safe for a terminal (see gm_base.h).
 *
 * Trace strings (callsites, command lines, host names, allocator settings), paths and policy
 * names from results files reach the terminal in `info`, `dump`, the text report and error
 * lines. A terminal acts on control characters: ESC starts sequences that retitle the window,
 * move the cursor, rewrite what is on screen or (on some terminals) answer back into the
 * input; a bare CR or LF makes one line look like two. So every byte a terminal could act on
 * is shown as \xHH: the C0 controls (LF and TAB too: one value, one line), DEL, the C1
 * controls U+0080..U+009F (CSI is U+009B) and any byte that is not part of valid UTF-8 (a
 * terminal not in UTF-8 mode reads a lone 0x9B as CSI). Everything else, UTF-8 text
 * included, passes unchanged: a callsite in Chinese stays readable. */
#include "base/gm_base.h"

#include <string.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if the bytes there are not one. The
 * decoded code point goes to *cp. Overlong forms and surrogates are invalid. */
static int utf8_seq(const unsigned char *s, uint32_t *cp) {
  unsigned char c = s[0];
  int n;
  uint32_t v, min;
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  if (c >= 0xC2 && c <= 0xDF) n = 2, v = c & 0x1F, min = 0x80;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, v = c & 0x0F, min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, v = c & 0x07, min = 0x10000;
  else return 0;
  for (int k = 1; k < n; k++) {
    if ((s[k] & 0xC0) != 0x80) return 0; /* also stops at the terminating NUL */
    v = (v << 6) | (s[k] & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return n;
}

/* Calls put(ctx, bytes, n) for each piece of the escaped text. */
static void escape(const char *s, void (*put)(void *, const char *, size_t), void *ctx) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    uint32_t cp = 0;
    int n = utf8_seq(p, &cp);
    int bad = n == 0 || cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F);
    if (!bad) {
      put(ctx, (const char *)p, (size_t)n);
      p += n;
      continue;
    }
    int k = n ? n : 1; /* a C1 control: every byte of it; an invalid byte: that byte */
    for (int i = 0; i < k; i++) {
      char e[4] = {'\\', 'x', hex[p[i] >> 4], hex[p[i] & 15]};
      put(ctx, e, 4);
    }
    p += k;
  }
}

typedef struct buf_sink {
  char *b;
  size_t n, o;
  int full;
} buf_sink_t;

/* Whole pieces only: an escape or a UTF-8 character is never cut in half. */
static void put_buf(void *ctx, const char *s, size_t n) {
  buf_sink_t *k = ctx;
  if (k->full || k->o + n + 1 > k->n) {
    k->full = 1;
    return;
  }
  memcpy(k->b + k->o, s, n);
  k->o += n;
}

char *gm_escape(const char *s, char *buf, size_t n) {
  if (!n) return buf;
  buf_sink_t k = {buf, n, 0, 0};
  escape(s ? s : "", put_buf, &k);
  buf[k.o] = '\0';
  return buf;
}

char *gm_escape_cut(const char *s, char *buf, size_t n) {
  buf_sink_t k = {buf, n, 0, 0};
  if (n < 4) return gm_escape(s, buf, n);
  escape(s ? s : "", put_buf, &k);
  if (k.full) { /* again, leaving room for the marker */
    k = (buf_sink_t){buf, n - 3, 0, 0};
    escape(s ? s : "", put_buf, &k);
    memcpy(buf + k.o, "...", 3);
    k.o += 3;
  }
  buf[k.o] = '\0';
  return buf;
}

static void put_file(void *ctx, const char *s, size_t n) { fwrite(s, 1, n, (FILE *)ctx); }

void gm_fputs_escaped(const char *s, FILE *f) { escape(s ? s : "", put_file, f); }
