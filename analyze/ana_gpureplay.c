/* ana_gpureplay.c: running gpureplay (or gpurec) from the analyzer and reading what it says.
 *
 * The analyzer does not link the replayer (DESIGN.md): every replay it shows is the gpureplay
 * binary's, run as a child process. Its stdout (JSON) and stderr (its error line, warnings)
 * are both captured through pipes read with poll(), so neither can fill and stall the child;
 * main() decides what of its stderr the user sees, and with which exit code. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "analyze/ana.h"
#include "analyze/ana_gpureplay.h"

extern char **environ;

#define CAPTURE_MAX (64u << 20) /* per stream: gpureplay's JSON is KBs; anything past this is not */

static int executable(const char *p) { return access(p, X_OK) == 0; }

int ana_tool_find(const char *given, const char *env_name, const char *name, const char *subdir, char *out,
                  size_t n) {
  if (given) return snprintf(out, n, "%s", given), 1;
  const char *env = getenv(env_name);
  if (env && *env) return snprintf(out, n, "%s", env), 1;
  char self[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len > 0) {
    self[len] = '\0';
    char *dir = dirname(self);
    snprintf(out, n, "%s/%s", dir, name);
    if (executable(out)) return 1;
    snprintf(out, n, "%s/../%s/%s", dir, subdir, name);
    if (executable(out)) return 1;
  }
  const char *path = getenv("PATH");
  if (path) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
      snprintf(out, n, "%s/%s", d, name);
      if (executable(out)) return 1;
    }
  }
  return 0;
}

typedef struct sink {
  char *buf;
  size_t len, cap;
  int nomem;
} sink_t;

/* Append what fd has now; 0 at its end. Past CAPTURE_MAX, or without memory, it is read and
 * dropped: the child must never block on a full pipe. */
static int drain(int fd, sink_t *s) {
  char chunk[65536];
  ssize_t k = read(fd, chunk, sizeof chunk);
  if (k < 0) return errno == EINTR || errno == EAGAIN ? 1 : 0;
  if (k == 0) return 0;
  if (s->nomem || s->len + (size_t)k > CAPTURE_MAX) return 1;
  if (s->len + (size_t)k + 1 > s->cap) {
    size_t nc = s->cap ? s->cap : 65536;
    while (nc < s->len + (size_t)k + 1) nc *= 2;
    char *g = realloc(s->buf, nc);
    if (!g) {
      s->nomem = 1;
      return 1;
    }
    s->buf = g;
    s->cap = nc;
  }
  memcpy(s->buf + s->len, chunk, (size_t)k);
  s->len += (size_t)k;
  return 1;
}

static char *finish(sink_t *s, size_t *len) {
  if (!s->buf) s->buf = calloc(1, 1);
  else s->buf[s->len] = '\0';
  *len = s->buf ? s->len : 0;
  return s->buf;
}

gm_status_t ana_tool_capture(char *const *argv, ana_run_t *r, gm_err_t *err) {
  memset(r, 0, sizeof *r);
  int po[2] = {-1, -1}, pe[2] = {-1, -1};
  if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0) {
    int e = errno;
    for (int i = 0; i < 2; i++) {
      if (po[i] >= 0) close(po[i]);
      if (pe[i] >= 0) close(pe[i]);
    }
    return gm_err_set(err, GM_ERR_IO, "cannot run '%s': pipe: %s", argv[0], strerror(e));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, po[1], STDOUT_FILENO); /* dup2 clears close-on-exec */
  posix_spawn_file_actions_adddup2(&fa, pe[1], STDERR_FILENO);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(po[1]);
  close(pe[1]);
  if (rc != 0) {
    close(po[0]);
    close(pe[0]);
    return gm_err_set(err, GM_ERR_IO, "cannot run '%s': %s", argv[0], strerror(rc));
  }
  sink_t so = {0}, se = {0};
  struct pollfd pf[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds) {
    if (poll(pf, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break; /* cannot happen with valid fds; the wait below still reaps the child */
    }
    for (int i = 0; i < 2; i++) {
      if (pf[i].fd < 0 || !pf[i].revents) continue;
      if (!drain(pf[i].fd, i ? &se : &so)) {
        close(pf[i].fd);
        pf[i].fd = -1;
        open_fds--;
      }
    }
  }
  for (int i = 0; i < 2; i++)
    if (pf[i].fd >= 0) close(pf[i].fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      free(so.buf);
      free(se.buf);
      return gm_err_set(err, GM_ERR_IO, "waitpid: %s", strerror(errno));
    }
  r->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  r->out = finish(&so, &r->out_len);
  r->err = finish(&se, &r->err_len);
  if (!r->out || !r->err || so.nomem || se.nomem) {
    ana_run_free(r);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory reading what '%s' printed", argv[0]);
  }
  return GM_OK;
}

void ana_run_free(ana_run_t *r) {
  free(r->out);
  free(r->err);
  r->out = r->err = NULL;
}

int ana_tool_message(const ana_run_t *r, const char *name, char *msg, size_t n, char **rest) {
  char err_prefix[64], prefix[64], try_line[96];
  snprintf(err_prefix, sizeof err_prefix, "%s: error: ", name);
  snprintf(prefix, sizeof prefix, "%s: ", name);
  snprintf(try_line, sizeof try_line, "try '%s --help'", name);
  size_t ep = strlen(err_prefix), pp = strlen(prefix);
  *rest = malloc(r->err_len + 1);
  if (*rest) (*rest)[0] = '\0';
  size_t k = 0;
  int found = 0;
  msg[0] = '\0';
  for (const char *p = r->err; p && *p;) {
    size_t l = strcspn(p, "\n");
    int take = 0;
    if (!found && l >= ep && strncmp(p, err_prefix, ep) == 0) {
      snprintf(msg, n, "%.*s", (int)(l - ep), p + ep);
      take = found = 1;
    } else if (!found && r->exit_status == 2 && l >= pp && strncmp(p, prefix, pp) == 0 &&
               strncmp(p + pp, "warning: ", 9) != 0) {
      snprintf(msg, n, "%.*s", (int)(l - pp), p + pp); /* a usage error has no "error: " */
      take = found = 1;
    } else if (l == strlen(try_line) && strncmp(p, try_line, l) == 0) {
      take = 1;
    }
    if (!take && *rest) {
      memcpy(*rest + k, p, l);
      k += l;
      (*rest)[k++] = '\n';
      (*rest)[k] = '\0';
    }
    p += l;
    if (*p == '\n') p++;
  }
  if (!found) {
    if (r->signal) snprintf(msg, n, "%s was killed by signal %d", name, r->signal);
    else snprintf(msg, n, "%s failed (exit status %d)", name, r->exit_status);
  }
  return found;
}

gm_status_t ana_trace_ran_with(const char *path, unsigned read_flags, char *spec, size_t n, gm_err_t *err) {
  gmt_reader_t *rd = NULL;
  if (gmt_reader_open_flags(&rd, path, read_flags, err) != GM_OK) return gm_err_wrap(err, "cannot open '%s'", path);
  const gmt_header_t *h = gmt_reader_header(rd);
  /* A PyTorch memory history records the user's own PYTORCH_CUDA_ALLOC_CONF (a requests-mode
   * trace records the one gpurec set: backend:cudaMallocAsync). */
  const char *v = h->capture_mode == GMT_CAPTURE_TORCH ? gmt_header_kv_get(h, "PYTORCH_CUDA_ALLOC_CONF") : NULL;
  int w = -1;
  if (v && *v && !strstr(v, "backend:")) w = snprintf(spec, n, "PYTORCH_CUDA_ALLOC_CONF=%s", v);
  if (w < 0 || (size_t)w >= n || w >= 1024) { /* 1024: the longest spec gpureplay takes */
    unsigned fw = gmt_framework_single(gmt_header_frameworks(h));
    snprintf(spec, n, "%s", fw == GMT_FW_JAX ? "jax" : fw == GMT_FW_TENSORFLOW ? "tf" : fw == GMT_FW_CUPY ? "cupy"
                                                                                                    : "pytorch");
  }
  gmt_reader_close(rd);
  return GM_OK;
}

gm_status_t ana_replay_peak_read(const char *json_lines, uint64_t *peak, char *policy, size_t n, gm_err_t *err) {
  json_error_t je;
  json_t *j = json_loadb(json_lines, strcspn(json_lines, "\n"), 0, &je);
  json_t *p = j ? json_object_get(j, "peak_reserved_plus_external_bytes") : NULL;
  json_t *s = j ? json_object_get(j, "policy") : NULL;
  gm_status_t st = GM_OK;
  if (!j) st = gm_err_set(err, GM_ERR_FORMAT, "gpureplay --json printed no run object: %s", je.text);
  else if (!json_is_integer(p) || json_integer_value(p) < 0 || !json_is_string(s))
    st = gm_err_set(err, GM_ERR_FORMAT, "gpureplay --json: a run object without "
                                        "peak_reserved_plus_external_bytes or policy (an older gpureplay?)");
  if (st == GM_OK) {
    *peak = (uint64_t)json_integer_value(p);
    snprintf(policy, n, "%s", json_string_value(s));
  }
  json_decref(j);
  return st;
}
