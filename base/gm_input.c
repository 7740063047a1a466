/* gm_input.c: what a user hands a tool and where the tool may write, checked before any work.
 *
 * A new user's first command is often the right command with the wrong kind of file: a PyTorch
 * snapshot given to the replayer, a trace given to the importer, a database given as a trace.
 * Each of the five kinds of file gpumem reads has a signature in its first bytes, so a tool
 * that cannot read a file says what the file is and the one command that takes it, instead of
 * "not a gpumem trace". The sentences live here, once, for all three tools.
 *
 * Outputs: a missing or read-only directory is found before a job runs or a replay starts,
 * not after, and the message names the directory. */
#include "base/gm_base.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- kinds of file -------------------------------------------------------------------------- */

static int has_prefix(const unsigned char *b, size_t n, const char *lit, size_t len) {
  return n >= len && memcmp(b, lit, len) == 0;
}

gm_file_kind_t gm_file_kind_of(const void *buf, size_t n) {
  const unsigned char *b = buf;
  if (n == 0) return GM_FILE_EMPTY;
  /* A gpumem trace opens with its header, a zstd skippable frame (magic 0x184D2A50, LE) whose
   * payload starts "GMTH" (formats/SPEC.md). */
  if (n >= 12 && b[0] == 0x50 && b[1] == 0x2A && b[2] == 0x4D && b[3] == 0x18 && memcmp(b + 8, "GMTH", 4) == 0)
    return GM_FILE_TRACE;
  if (n >= 4 && (b[0] & 0xF0) == 0x50 && b[1] == 0x2A && b[2] == 0x4D && b[3] == 0x18) return GM_FILE_ZSTD;
  if (n >= 4 && b[0] == 0x28 && b[1] == 0xB5 && b[2] == 0x2F && b[3] == 0xFD) return GM_FILE_ZSTD;
  if (n >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5) return GM_FILE_PICKLE;
  if (has_prefix(b, n, "SQLite format 3", 16)) return GM_FILE_DATABASE;
  if (has_prefix(b, n, "# gpumem trace, text form", 25)) return GM_FILE_CSV;
  if (has_prefix(b, n, "Thread,Time,Action,Pointer,Size,Stream", 38) ||
      has_prefix(b, n, "\xEF\xBB\xBFThread,Time,Action,Pointer,Size,Stream", 41))
    return GM_FILE_RMM_LOG;
  size_t i = 0;
  while (i < n && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n')) i++;
  if (i < n && b[i] == '{' && memmem(b, n, "\"gpumem-results\"", 16)) return GM_FILE_RESULTS;
  /* `gpureplay --json` writes one run object per line: loaded as a results file too. */
  if (i < n && b[i] == '{' && memmem(b, n, "\"policy\":", 9) && memmem(b, n, "\"peak_reserved_bytes\":", 22))
    return GM_FILE_RESULTS;
  /* A CSV trace without its comment line still has the column line. */
  if (memmem(b, n < 4096 ? n : 4096, "ts_ns,kind,", 11)) return GM_FILE_CSV;
  return GM_FILE_UNKNOWN;
}

gm_file_kind_t gm_file_kind(const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0) return GM_FILE_MISSING;
  if (S_ISDIR(sb.st_mode)) return GM_FILE_DIR;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return GM_FILE_UNREADABLE;
  unsigned char buf[4096];
  ssize_t got = read(fd, buf, sizeof buf);
  close(fd);
  if (got < 0) return GM_FILE_UNREADABLE;
  return gm_file_kind_of(buf, (size_t)got);
}

const char *gm_file_kind_name(gm_file_kind_t k) {
  switch (k) {
    case GM_FILE_TRACE: return "a gpumem trace";
    case GM_FILE_PICKLE: return "a PyTorch memory snapshot (pickle)";
    case GM_FILE_CSV: return "a gpumem trace in CSV text form";
    case GM_FILE_RMM_LOG: return "a RAPIDS RMM allocation log (CSV)";
    case GM_FILE_RESULTS: return "a gpureplay results file";
    case GM_FILE_DATABASE: return "a gpuanalyze database (SQLite)";
    case GM_FILE_ZSTD: return "a zstd-compressed file that is not a gpumem trace";
    case GM_FILE_EMPTY: return "an empty file";
    case GM_FILE_DIR: return "a directory";
    case GM_FILE_MISSING: return "missing";
    case GM_FILE_UNREADABLE: return "unreadable";
    case GM_FILE_UNKNOWN: break;
  }
  return "not a file gpumem reads";
}

/* "dir/snap.pickle" -> "dir/snap.zst" (the extension, if any, replaced). */
static void zst_name(const char *path, char *out, size_t n) {
  const char *slash = strrchr(path, '/');
  const char *dot = strrchr(path, '.');
  size_t stem = dot && (!slash || dot > slash + 1) ? (size_t)(dot - path) : strlen(path);
  if (dot && strcmp(dot, ".zst") == 0) {
    snprintf(out, n, "%.*s.trace.zst", (int)stem, path);
    return;
  }
  snprintf(out, n, "%.*s.zst", (int)stem, path);
}

int gm_file_advice(const char *path, gm_file_kind_t k, unsigned wanted, char *buf, size_t n) {
  if (k == GM_FILE_MISSING || k == GM_FILE_UNREADABLE || k == GM_FILE_UNKNOWN) return 0;
  if (k < 32 && (wanted & (1u << k))) return 0;
  char zst[PATH_MAX];
  zst_name(path, zst, sizeof zst);
  const char *what = gm_file_kind_name(k);
  switch (k) {
    case GM_FILE_PICKLE:
      snprintf(buf, n, "'%s' is %s, not a gpumem trace: convert it with `gpurec import %s -o %s` "
               "(or run `gpuanalyze report %s`, which does that for you)", path, what, path, zst, path);
      return 1;
    case GM_FILE_CSV:
    case GM_FILE_RMM_LOG:
      snprintf(buf, n, "'%s' is %s: convert it with `gpurec import %s -o %s`", path, what, path, zst);
      return 1;
    case GM_FILE_TRACE:
      snprintf(buf, n, "'%s' is already %s: nothing to import (`gpuanalyze info %s`, `gpuanalyze report %s`)",
               path, what, path, path);
      return 1;
    case GM_FILE_RESULTS:
      snprintf(buf, n, "'%s' is %s, not a trace: load it with its trace, `gpuanalyze load TRACE.zst %s`, "
               "then `gpuanalyze report`", path, what, path);
      return 1;
    case GM_FILE_DATABASE:
      snprintf(buf, n, "'%s' is %s, not a trace: `gpuanalyze report --db %s`", path, what, path);
      return 1;
    case GM_FILE_ZSTD:
      snprintf(buf, n, "'%s' is %s (a compressed snapshot? `zstd -d %s` first)", path, what, path);
      return 1;
    case GM_FILE_EMPTY:
      snprintf(buf, n, "'%s' is an empty file", path);
      return 1;
    case GM_FILE_DIR:
      snprintf(buf, n, "'%s' is a directory, not a file", path);
      return 1;
    default: return 0;
  }
}

/* ---- where output goes ---------------------------------------------------------------------- */

gm_status_t gm_output_check(const char *path, gm_err_t *err) {
  if (!path || !*path) return gm_err_set(err, GM_ERR_INVAL, "empty output path");
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
    return gm_err_set(err, GM_ERR_IO, "cannot write '%s': it is a directory", path);
  char dir[PATH_MAX];
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == path) snprintf(dir, sizeof dir, "/");
  else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  if (stat(dir, &sb) != 0)
    return gm_err_set(err, GM_ERR_IO, "cannot write '%s': directory '%s' does not exist", path, dir);
  if (!S_ISDIR(sb.st_mode))
    return gm_err_set(err, GM_ERR_IO, "cannot write '%s': '%s' is not a directory", path, dir);
  if (access(dir, W_OK) != 0)
    return gm_err_set(err, GM_ERR_IO, "cannot write '%s': directory '%s': %s", path, dir, strerror(errno));
  if (access(path, F_OK) == 0 && access(path, W_OK) != 0)
    return gm_err_set(err, GM_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
  return GM_OK;
}

/* ---- did you mean ---------------------------------------------------------------------------- */

/* Optimal string alignment distance (edits: insert, delete, substitute, swap two neighbours),
 * capped: words longer than 63 bytes are not compared. */
static int distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 63 || lb > 63) return 1000;
  int d[64][64];
  for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
  for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
  for (size_t i = 1; i <= la; i++)
    for (size_t j = 1; j <= lb; j++) {
      int cost = a[i - 1] != b[j - 1];
      int v = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
      if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
        v = d[i - 2][j - 2] + 1;
      d[i][j] = v;
    }
  return d[la][lb];
}

const char *gm_closest(const char *word, const char *const *cands, size_t n) {
  if (!word || !*word) return NULL;
  const char *best = NULL;
  int bd = 1000;
  size_t wl = strlen(word);
  for (size_t i = 0; i < n; i++) {
    if (!cands[i]) continue;
    int dd = distance(word, cands[i]);
    /* A prefix typed in full ("expandable_segment") is one dropped letter; "--sweep" for
     * "--sweeep" one extra: up to a third of the word may be wrong, at least one letter. */
    if (dd < bd) {
      bd = dd;
      best = cands[i];
    }
  }
  int allow = (int)(wl / 3);
  if (allow < 1) allow = 1;
  if (allow > 3) allow = 3;
  return best && bd > 0 && bd <= allow ? best : NULL;
}
