/* gm_tool.c: running a sibling binary and reading what it printed.
 *
 * The tools do not link each other (DESIGN.md): gpuanalyze runs gpureplay and gpurec, and
 * `gpurec predict --fit` runs gpureplay, as child processes. Both find the sibling the same way
 * (the user's path, an environment variable, beside this binary, the bazel-bin layout, PATH)
 * and capture its stdout and stderr through pipes read with poll(), so neither can fill and
 * stall the child. Nothing here prints; the caller decides what of the child's stderr the
 * user sees. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/gm_base.h"

extern char **environ;

#define CAPTURE_MAX (64u << 20) /* per stream: the tools' JSON is KBs; anything past this is not */

int gm_tool_executable(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISREG(sb.st_mode) && access(p, X_OK) == 0;
}

int gm_tool_find(const char *given, const char *env_name, const char *name, const char *subdir, char *out,
                 size_t n, gm_tool_from_t *from) {
  gm_tool_from_t where_;
  if (!from) from = &where_;
  *from = GM_TOOL_GIVEN;
  if (given) return snprintf(out, n, "%s", given), 1;
  const char *env = getenv(env_name);
  *from = GM_TOOL_ENV;
  if (env && *env) return snprintf(out, n, "%s", env), 1;
  char self[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len > 0) {
    self[len] = '\0';
    char *dir = dirname(self);
    *from = GM_TOOL_BESIDE;
    if (snprintf(out, n, "%s/%s", dir, name) < (int)n && gm_tool_executable(out)) return 1;
    if (snprintf(out, n, "%s/../%s/%s", dir, subdir, name) < (int)n && gm_tool_executable(out)) return 1;
  }
  const char *path = getenv("PATH");
  *from = GM_TOOL_PATH;
  while (path && *path) {
    const char *end = strchr(path, ':');
    size_t l = end ? (size_t)(end - path) : strlen(path);
    if (l && snprintf(out, n, "%.*s/%s", (int)l, path, name) < (int)n && gm_tool_executable(out)) return 1;
    path = end ? end + 1 : NULL;
  }
  if (n) out[0] = '\0';
  return 0;
}

typedef struct sink {
  char *buf;
  size_t len, cap;
  int nomem, cut;
} sink_t;

/* Append what fd has now; 0 at its end. Past CAPTURE_MAX, or without memory, it is read and
 * dropped: the child must never block on a full pipe. */
static int drain(int fd, sink_t *s) {
  char chunk[65536];
  ssize_t k = read(fd, chunk, sizeof chunk);
  if (k < 0) return errno == EINTR || errno == EAGAIN ? 1 : 0;
  if (k == 0) return 0;
  if (s->nomem || s->len + (size_t)k > CAPTURE_MAX) return s->cut = 1;
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

gm_status_t gm_tool_capture(char *const *argv, const gm_tool_opts_t *o, gm_tool_run_t *r, gm_err_t *err) {
  memset(r, 0, sizeof *r);
  int po[2] = {-1, -1}, pe[2] = {-1, -1};
  if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0) {
    int e = errno;
    for (int i = 0; i < 2; i++) {
      if (po[i] >= 0) close(po[i]);
      if (pe[i] >= 0) close(pe[i]);
    }
    r->spawn_errno = e;
    return gm_err_set(err, GM_ERR_IO, "cannot run '%s': pipe: %s", argv[0], strerror(e));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (o && o->stdin_null) posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
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
    r->spawn_errno = rc;
    return gm_err_set(err, GM_ERR_IO, "cannot run '%s': %s", argv[0], strerror(rc));
  }
  if (o && o->child) *o->child = pid;
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
      if (o && o->child) *o->child = 0;
      free(so.buf);
      free(se.buf);
      return gm_err_set(err, GM_ERR_IO, "waitpid: %s", strerror(errno));
    }
  if (o && o->child) *o->child = 0;
  r->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  r->out_cut = so.cut;
  r->out = finish(&so, &r->out_len);
  r->err = finish(&se, &r->err_len);
  if (!r->out || !r->err || so.nomem || se.nomem) {
    gm_tool_run_free(r);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory reading what '%s' printed", argv[0]);
  }
  return GM_OK;
}

void gm_tool_run_free(gm_tool_run_t *r) {
  free(r->out);
  free(r->err);
  r->out = r->err = NULL;
}

int gm_tool_message(const gm_tool_run_t *r, const char *name, char *msg, size_t n, char **rest) {
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
