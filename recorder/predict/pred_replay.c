/* pred_replay.c: the gpureplay binary as --fit's replayer.
 *
 * `gpurec predict --fit` asks, at each value its search needs, whether every setting fits:
 * the answer is a replay, and replays are gpureplay's (DESIGN.md: the recorder knows nothing
 * of policies, and Bazel's visibility keeps it from linking the replayer). So the prediction
 * is written to a trace in a private folder and gpureplay runs on it once per value with all
 * settings (`--json -q`, the stream events as recorded, one line of JSON per setting). The
 * settings come from gpureplay too (`--list-policies`): the user's in gpureplay's words, or the
 * sweep grid of the trace's framework.
 *
 * Only a few integers of each line are read (peak_reserved_bytes, ooms, ...): a small scanner that
 * skips the other values whole (nested ones, strings with escapes) does it, and gpurec, which
 * launches users' jobs, links no JSON library for it.
 *
 * gpureplay is found and run as gpuanalyze runs it (base's gm_tool_find, gm_tool_capture: stdout
 * and stderr through pipes). The folder holds at most one predicted trace (and its .partial
 * while it is written): fixed names, so that a signal handler can remove them with unlink and
 * rmdir alone. */
#include "recorder/predict/pred_replay.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_OUTPUT (64u << 20) /* gm_tool_capture's limit; gpureplay's JSON for 32 settings is a few hundred KiB */

struct pred_rp {
  char tool[PATH_MAX];
  char path[PATH_MAX + 64]; /* pred_rp_path's answer ("" if name is too long) */
};

/* ---- the private folder and the signals that must not leave it behind ------------------- */

static char g_dir[PATH_MAX];               /* "" when there is none */
static char g_files[2][PATH_MAX + 32];     /* every name the folder can hold */
static const char *const k_names[2] = {"pred.zst", "pred.zst.partial"};
static const int k_signals[3] = {SIGINT, SIGTERM, SIGHUP};
static struct sigaction g_old[3];
static volatile pid_t g_child;             /* gpureplay while it runs, else 0 */
static int g_installed[3];

static void remove_all(void) {
  for (int i = 0; i < 2; i++) unlink(g_files[i]); /* async-signal-safe */
  rmdir(g_dir);
}

/* Stop gpureplay, remove the folder, then die of the signal as we would have without the
 * handler. */
static void on_signal(int sig) {
  if (g_child > 0) kill(g_child, SIGTERM);
  remove_all();
  signal(sig, SIG_DFL);
  raise(sig);
}

static void install_handlers(void) {
  for (int i = 0; i < 3; i++) {
    struct sigaction sa, old;
    if (sigaction(k_signals[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL) continue; /* ignored: stays so */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(k_signals[i], &sa, &g_old[i]) == 0) g_installed[i] = 1;
  }
}

static void restore_handlers(void) {
  for (int i = 0; i < 3; i++)
    if (g_installed[i]) {
      sigaction(k_signals[i], &g_old[i], NULL);
      g_installed[i] = 0;
    }
}

/* ---- finding gpureplay ------------------------------------------------------------------- */

int pred_rp_find(char *out, size_t n, const char **from) {
  gm_tool_from_t where;
  int found = gm_tool_find(NULL, "GPUREPLAY", "gpureplay", "replay", out, n, &where);
  *from = where == GM_TOOL_ENV ? "$GPUREPLAY" : where == GM_TOOL_BESIDE ? "beside gpurec" : "PATH";
  if (where == GM_TOOL_ENV) return found && gm_tool_executable(out); /* the user's: checked here */
  return found;
}

gm_status_t pred_rp_open(const char *gpureplay, pred_rp_t **out, gm_err_t *err) {
  *out = NULL;
  if (g_dir[0]) return gm_err_set(err, GM_ERR_INVAL, "a --fit replayer is already open");
  pred_rp_t *r = calloc(1, sizeof *r);
  if (!r) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  snprintf(r->tool, sizeof r->tool, "%s", gpureplay);
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  if (snprintf(g_dir, sizeof g_dir, "%s/gpurec-fit-XXXXXX", tmp) >= (int)sizeof g_dir - 32 || !mkdtemp(g_dir)) {
    int e = errno;
    gm_status_t st = gm_err_set(err, GM_ERR_IO, "cannot make a temporary folder in '%s': %s", tmp, strerror(e));
    g_dir[0] = '\0';
    free(r);
    return st;
  }
  int cut = 0; /* never: g_dir leaves 32 bytes, more than a name */
  for (int i = 0; i < 2; i++) cut |= snprintf(g_files[i], sizeof g_files[i], "%s/%s", g_dir, k_names[i]) >= (int)sizeof g_files[i];
  if (cut) {
    rmdir(g_dir);
    g_dir[0] = '\0';
    free(r);
    return gm_err_set(err, GM_ERR_INVAL, "temporary folder name too long");
  }
  install_handlers();
  *out = r;
  return GM_OK;
}

const char *pred_rp_path(pred_rp_t *r, const char *name) {
  if (snprintf(r->path, sizeof r->path, "%s/%s", g_dir, name) >= (int)sizeof r->path) r->path[0] = '\0';
  return r->path;
}

void pred_rp_close(pred_rp_t *r) {
  if (!r) return;
  if (g_dir[0]) remove_all();
  restore_handlers();
  g_dir[0] = '\0';
  free(r);
}

/* ---- running it -------------------------------------------------------------------------- */

/* gpureplay's own error line, without its tool name and level ("" if it said nothing). */
static void child_reason(const char *said, char *buf, size_t n) {
  buf[0] = '\0';
  char *text = strdup(said ? said : "");
  if (!text) return;
  char *line = text; /* the first line that says something, not "try 'gpureplay --help'" */
  while (*line) {
    size_t l = strcspn(line, "\n");
    if (l && strncmp(line, "try '", 5) != 0) {
      line[l] = '\0';
      break;
    }
    line += l + (line[l] == '\n');
  }
  if (strncmp(line, "gpureplay: ", 11) == 0) line += 11;
  if (strncmp(line, "error: ", 7) == 0) line += 7;
  snprintf(buf, n, "%s", line);
  free(text);
}

/* Run gpureplay with args (argv[0] filled in here), stdin from /dev/null, its stdout and
 * stderr captured in *out (gm_tool_run_free after). Its exit status in *code (GM_OK: it ran
 * and exited; a signal is an error). */
static gm_status_t run(pred_rp_t *r, char **argv, int *code, gm_tool_run_t *out, gm_err_t *err) {
  argv[0] = r->tool;
  gm_tool_opts_t o = {1, &g_child};
  gm_err_t quiet;
  if (gm_tool_capture(argv, &o, out, &quiet) < 0) {
    if (!out->spawn_errno) return gm_err_set(err, quiet.status, "%s", quiet.msg);
    return gm_err_set(err, GM_ERR_IO, "cannot run gpureplay '%s': %s", r->tool, strerror(out->spawn_errno));
  }
  if (out->signal) {
    int sig = out->signal;
    gm_tool_run_free(out);
    return gm_err_set(err, GM_ERR_IO, "gpureplay '%s' died of signal %d", r->tool, sig);
  }
  if (out->out_cut) {
    gm_tool_run_free(out);
    return gm_err_set(err, GM_ERR_NOMEM, "cannot read gpureplay's output (over %u MiB)", MAX_OUTPUT >> 20);
  }
  *code = out->exit_status;
  return GM_OK;
}

static gm_status_t failed(const char *what, int code, const gm_tool_run_t *ran, gm_err_t *err) {
  char why[GM_ERR_MSG_MAX];
  child_reason(ran->err, why, sizeof why);
  return gm_err_set(err, GM_ERR_IO, "gpureplay on %s (exit status %d): %s", what, code, why[0] ? why : "no message");
}

void pred_rp_free_list(char **list, int n) {
  for (int i = 0; list && i < n; i++) free(list[i]);
  free(list);
}

gm_status_t pred_rp_list(pred_rp_t *r, const char *trace, const char *const *specs, int n, uint64_t device_memory,
                       char ***out, int *n_out, gm_err_t *err) {
  *out = NULL;
  *n_out = 0;
  char mem[64], **argv = calloc((size_t)n + 8, sizeof *argv), **pol = calloc((size_t)n + 1, sizeof *pol);
  gm_status_t st = argv && pol ? GM_OK : gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  int a = 1;
  if (st == GM_OK) {
    argv[a++] = "--list-policies";
    argv[a++] = "-q";
    if (device_memory) {
      snprintf(mem, sizeof mem, "--device-memory=%" PRIu64, device_memory);
      argv[a++] = mem;
    }
    if (!n) argv[a++] = "--sweep";
    for (int i = 0; i < n && st == GM_OK; i++)
      if (asprintf(&pol[i], "--policy=%s", specs[i]) < 0) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      else argv[a++] = pol[i];
    argv[a++] = "--";
    argv[a++] = (char *)trace;
  }
  int code = 0;
  gm_tool_run_t ran = {0};
  if (st == GM_OK) st = run(r, argv, &code, &ran, err);
  if (st == GM_OK && code == 2) { /* a setting it rejects: its reason alone, a usage mistake */
    char why[GM_ERR_MSG_MAX];
    child_reason(ran.err, why, sizeof why);
    st = gm_err_set(err, GM_ERR_INVAL, "%s", why[0] ? why : "gpureplay --list-policies: usage error");
  } else if (st == GM_OK && code) {
    st = failed(trace, code, &ran, err);
  }
  char *text = st == GM_OK ? ran.out : NULL;
  char **list = NULL;
  int k = 0;
  for (char *p = text, *nl; st == GM_OK && p && *p; p = nl + 1) {
    if (!(nl = strchr(p, '\n'))) break; /* every line ends: an unended one is cut short */
    char **grown = realloc(list, (size_t)(k + 1) * sizeof *list);
    if (!grown || !(grown[k] = strndup(p, (size_t)(nl - p)))) {
      list = grown ? grown : list;
      st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      break;
    }
    list = grown;
    k++;
  }
  if (st == GM_OK && (k == 0 || (n && k != n)))
    st = gm_err_set(err, GM_ERR_FORMAT, "gpureplay --list-policies on %s: %d setting%s for %d asked", trace, k,
                    k == 1 ? "" : "s", n);
  gm_tool_run_free(&ran);
  for (int i = 0; pol && i < n; i++) free(pol[i]);
  free(pol);
  free(argv);
  if (st < 0) {
    pred_rp_free_list(list, k);
    return st;
  }
  *out = list;
  *n_out = k;
  return GM_OK;
}

gm_status_t pred_rp_replay(pred_rp_t *r, const char *trace, const char *name, const pred_rp_opts_t *o,
                         const char *const *specs, int n, pred_rp_result_t *res, gm_err_t *err) {
  char cap[64], mem[64], jobs[32], **argv = calloc((size_t)n + 12, sizeof *argv),
                                    **pol = calloc((size_t)n + 1, sizeof *pol);
  gm_status_t st = argv && pol ? GM_OK : gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  int a = 1;
  if (st == GM_OK) {
    /* what --fit replayed in the same process before (gr_config_t of pred_largest.c then): the
     * events as recorded, decoded once for all settings, every core */
    argv[a++] = "--json";
    argv[a++] = "-q";
    argv[a++] = "--event-timing=recorded";
    argv[a++] = "--preload=yes";
    snprintf(jobs, sizeof jobs, "--jobs=%d", o->jobs < 1 ? 1 : o->jobs > 256 ? 256 : o->jobs);
    argv[a++] = jobs;
    if (o->device_memory) {
      snprintf(mem, sizeof mem, "--device-memory=%" PRIu64, o->device_memory);
      argv[a++] = mem;
    }
    if (o->capacity) {
      snprintf(cap, sizeof cap, "--capacity=%" PRIu64, o->capacity);
      argv[a++] = cap;
    }
    for (int i = 0; i < n && st == GM_OK; i++)
      if (asprintf(&pol[i], "--policy=%s", specs[i]) < 0) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      else argv[a++] = pol[i];
    argv[a++] = "--";
    argv[a++] = (char *)trace;
  }
  int code = 0;
  gm_tool_run_t ran = {0};
  if (st == GM_OK) st = run(r, argv, &code, &ran, err);
  if (st == GM_OK && code) st = failed(name, code, &ran, err);
  char *text = st == GM_OK ? ran.out : NULL;
  /* one line per setting in the order given (then the same for the trace's other devices) */
  char *line = text;
  for (int i = 0; st == GM_OK && i < n; i++) {
    char *nl = line ? strchr(line, '\n') : NULL;
    if (!nl) {
      st = gm_err_set(err, GM_ERR_FORMAT, "gpureplay on %s: %d result%s for %d settings", name, i, i == 1 ? "" : "s", n);
      break;
    }
    *nl = '\0';
    st = pred_rp_json_u64(line, "peak_reserved_bytes", &res[i].peak_reserved_bytes, err);
    if (st == GM_OK) st = pred_rp_json_u64(line, "ooms", &res[i].ooms, err);
    /* optional: what it says is only shown (a gpureplay without it: none said) */
    if (st == GM_OK) {
      gm_err_t quiet;
      gm_err_clear(&quiet);
      if (pred_rp_json_u64(line, "alloc_retries", &res[i].alloc_retries, &quiet) < 0) res[i].alloc_retries = 0;
      if (pred_rp_json_u64(line, "recorded_mapped_peak_bytes", &res[i].recorded_peak, &quiet) < 0) res[i].recorded_peak = 0;
    }
    if (st < 0) gm_err_wrap(err, "gpureplay on %s, setting %d", name, i + 1);
    line = nl + 1;
  }
  gm_tool_run_free(&ran);
  for (int i = 0; pol && i < n; i++) free(pol[i]);
  free(pol);
  free(argv);
  return st;
}

/* ---- the two integers of a line of JSON ------------------------------------------------- */

static const char *ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
  return p;
}

/* Past a string that starts at p ('"'); NULL if it does not end. */
static const char *skip_string(const char *p) {
  for (p++; *p; p++) {
    if (*p == '\\') {
      if (!*++p) return NULL;
    } else if (*p == '"') {
      return p + 1;
    }
  }
  return NULL;
}

/* Past the value at p (any kind, nested ones whole); NULL if it does not end. */
static const char *skip_value(const char *p) {
  p = ws(p);
  if (*p == '"') return skip_string(p);
  if (*p != '{' && *p != '[') {
    const char *s = p;
    while (*p && !strchr(",}] \t\r\n", *p)) p++;
    return p > s ? p : NULL;
  }
  int depth = 0;
  while (*p) {
    if (*p == '"') {
      if (!(p = skip_string(p))) return NULL;
      continue;
    }
    if (*p == '{' || *p == '[') depth++;
    else if ((*p == '}' || *p == ']') && --depth == 0) return p + 1;
    p++;
  }
  return NULL;
}

gm_status_t pred_rp_json_u64(const char *text, const char *key, uint64_t *out, gm_err_t *err) {
  const char *p = ws(text);
  size_t kl = strlen(key);
  if (*p++ != '{') return gm_err_set(err, GM_ERR_FORMAT, "not a JSON object");
  for (;;) {
    p = ws(p);
    if (*p != '"') break;
    const char *k = p + 1, *end = skip_string(p);
    if (!end) break;
    int match = (size_t)(end - 1 - k) == kl && memcmp(k, key, kl) == 0; /* our keys need no escapes */
    p = ws(end);
    if (*p++ != ':') break;
    p = ws(p);
    if (match) {
      uint64_t v = 0;
      const char *d = p;
      while (*d >= '0' && *d <= '9') {
        if (v > (UINT64_MAX - (uint64_t)(*d - '0')) / 10) return gm_err_set(err, GM_ERR_FORMAT, "'%s' is out of range", key);
        v = v * 10 + (uint64_t)(*d++ - '0');
      }
      if (d == p || !strchr(",} \t\r\n", *d) || !*d)
        return gm_err_set(err, GM_ERR_FORMAT, "'%s' is not an unsigned integer", key);
      *out = v;
      return GM_OK;
    }
    if (!(p = skip_value(p))) break;
    p = ws(p);
    if (*p == ',') p++;
    else break;
  }
  return gm_err_set(err, GM_ERR_FORMAT, "no '%s' in gpureplay's JSON", key);
}
