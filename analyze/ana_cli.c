/* ana_cli.c: the helpers gpuanalyze's subcommands share: usage errors that point to the
 * command's --help, what the user is told as work happens (say), errors with their cause
 * chain, the database's wait, running a tool with its stdout kept off ours. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "analyze/ana_cli.h"

extern char **environ;

/* Usage errors point to the --help that explains them: the command's own when there is one. */
const char *ana_cli_cmd_name;

int ana_cli_usage_error(const char *msg) {
  fputs("gpuanalyze: ", stderr);
  gm_fputs_escaped(msg, stderr); /* it quotes the command line */
  if (ana_cli_cmd_name) fprintf(stderr, "\ntry 'gpuanalyze %s --help'\n", ana_cli_cmd_name);
  else fputs("\ntry 'gpuanalyze --help'\n", stderr);
  return 2;
}

/* What the user is told as work happens: every file written, what was reused. -q silences it. */
void ana_cli_say(const char *fmt, ...) {
  if (gm_log_level() < GM_LOG_INFO) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("gpuanalyze: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* A file of a kind this command does not take: what it is and the command that takes it. */
int ana_cli_wrong_kind(const char *path, unsigned wanted) {
  char advice[GM_ERR_MSG_MAX];
  if (!gm_file_advice(path, gm_file_kind(path), wanted, advice, sizeof advice)) return 0;
  gm_log(GM_LOG_ERROR, "%s", advice);
  return 1;
}

int ana_cli_fail(gm_err_t *err) {
  gm_log_err(err);
  return 1;
}

unsigned ana_cli_read_flags(const config_t *c) { return c->strict ? GMT_READ_STRICT : GMT_READ_SALVAGE; }

int ana_cli_wait_ms(const config_t *c) {
  if (c->wait == UINT64_MAX) return ANA_DEFAULT_WAIT_MS;
  return c->wait > 86400 ? 86400 * 1000 : (int)c->wait * 1000;
}

/* report, recommend: the database must exist (a typo would otherwise make an empty one). */
int ana_cli_need_db(const char *path) {
  if (access(path, F_OK) == 0) return 0;
  gm_log(GM_LOG_ERROR, "cannot open database '%s': no such file (`gpuanalyze report TRACE.zst` makes one, "
         "or `gpuanalyze load --db %s TRACE.zst R.json`)", path, path);
  return 1;
}

/* Start argv[0] with argv; its stdout goes to our stderr on a terminal (progress for a person),
 * else nowhere: our stdout carries only the recommendation. Its stderr passes through. */
int ana_cli_start_tool(char *const *argv, pid_t *pid, gm_err_t *err) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (isatty(STDERR_FILENO)) posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
  else posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  int rc = posix_spawn(pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return gm_err_set(err, GM_ERR_IO, "cannot run '%s': %s", argv[0], strerror(rc));
  return GM_OK;
}

/* Wait for the tool started as pid (argv0: its path, for the message). */
int ana_cli_wait_tool(const char *argv0, pid_t pid, gm_err_t *err) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return gm_err_set(err, GM_ERR_IO, "waitpid: %s", strerror(errno));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    /* Its own error line is already on stderr: say only which step failed. */
    const char *base = strrchr(argv0, '/');
    return gm_err_set(err, GM_ERR_IO, "%s failed (%s %d)", base ? base + 1 : argv0,
                      WIFEXITED(status) ? "exit status" : "signal",
                      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  }
  return GM_OK;
}

int ana_cli_run_tool(char *const *argv, gm_err_t *err) {
  pid_t pid;
  int rc = ana_cli_start_tool(argv, &pid, err);
  return rc < 0 ? rc : ana_cli_wait_tool(argv[0], pid, err);
}

uint64_t ana_cli_default_jobs(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 16 ? 16 : (uint64_t)n;
}
