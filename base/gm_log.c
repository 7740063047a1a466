/* gm_log.c: one-line diagnostics on stderr, prefixed with the tool's name. */
#include "base/gm_base.h"

static const char *g_tool = "gpumem";
static gm_log_level_t g_level = GM_LOG_WARN;

void gm_log_init(const char *tool, gm_log_level_t level) {
  g_tool = tool;
  g_level = level;
}

void gm_log_set_level(gm_log_level_t level) { g_level = level; }

gm_log_level_t gm_log_level(void) { return g_level; }

void gm_log(gm_log_level_t level, const char *fmt, ...) {
  static const char *const names[] = {"error", "warning", "info", "debug"};
  if (level > g_level) return;
  char line[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  /* messages carry paths and values from the input: one line, nothing a terminal acts on */
  fprintf(stderr, "%s: %s: ", g_tool, names[level]);
  gm_fputs_escaped(line, stderr);
  fputc('\n', stderr);
}

void gm_log_err(const gm_err_t *err) {
  gm_log(GM_LOG_ERROR, "%s", err->msg[0] ? err->msg : gm_status_str(err->status));
}
