/* ana_html_esc.c: text from a trace or a results file (paths, command lines, policy names,
 * callsites) into the HTML report: HTML-escaped in the page and, inside <script> JSON, with
 * '<', '>', '&', U+2028 and U+2029 escaped so it can neither close the script element nor break
 * the JavaScript parser; bytes that are not UTF-8 become U+FFFD. Every ana_html_* file uses it. */
#include <stdio.h>

#include "analyze/ana_report_internal.h"

void ana_html_escape(FILE *out, const char *s) {
  if (!s) return;
  for (; *s; s++) {
    switch (*s) {
      case '&': fputs("&amp;", out); break;
      case '<': fputs("&lt;", out); break;
      case '>': fputs("&gt;", out); break;
      case '"': fputs("&quot;", out); break;
      case '\'': fputs("&#39;", out); break;
      default: fputc(*s, out);
    }
  }
}

/* Length of the valid UTF-8 sequence at s, 0 if invalid. */
static int utf8_len(const unsigned char *s) {
  if (s[0] < 0x80) return 1;
  int n = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
  for (int i = 1; i < n; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  return n;
}

void ana_json_string(FILE *out, const char *str) {
  const unsigned char *s = (const unsigned char *)(str ? str : "");
  fputc('"', out);
  while (*s) {
    unsigned c = *s;
    if (c == '"' || c == '\\') {
      fputc('\\', out);
      fputc((int)c, out);
      s++;
    } else if (c < 0x20 || c == '<' || c == '>' || c == '&') {
      fprintf(out, "\\u%04x", c);
      s++;
    } else if (c < 0x80) {
      fputc((int)c, out);
      s++;
    } else {
      int n = utf8_len(s);
      if (n == 0) {
        fputs("\\ufffd", out); /* not UTF-8: never pass raw bytes into the page */
        s++;
      } else if (n == 3 && s[0] == 0xe2 && s[1] == 0x80 && (s[2] == 0xa8 || s[2] == 0xa9)) {
        fprintf(out, "\\u%04x", s[2] == 0xa8 ? 0x2028 : 0x2029);
        s += 3;
      } else {
        fwrite(s, 1, (size_t)n, out);
        s += n;
      }
    }
  }
  fputc('"', out);
}
