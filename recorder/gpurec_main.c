/* gpurec_main.c: the launcher.  gpurec [options] -- CMD ARGS...   |   gpurec import FILE -o OUT
 *                               |   gpurec predict A.zst@8 B.zst@16 --at=32 -o OUT (pred_cli.c)
 *
 * Runs CMD with the injection library named in CUDA_INJECTION64_PATH, so every CUDA process the
 * job starts (torchrun workers, multiprocessing children) records its own trace, named by rank
 * and pid; a lone trace is renamed to the -o name. The mode decides what the frameworks send to
 * the driver (DESIGN.md "Capture modes"):
 *   auto (default)     per framework, the cheapest faithful capture that leaves PyTorch's
 *                      allocator as the user set it: PyTorch's own memory history (without
 *                      stacks unless --stacks=python; rec_torch.c), dumped at exit and merged
 *                      with the process's CUPTI trace into the one trace -o names (capture mode
 *                      torch-history, snap_merge.c); JAX, TensorFlow and CuPy switched as in
 *                      requests mode; a process with no framework: its CUPTI trace (its driver
 *                      calls are its requests);
 *   requests           PYTORCH_CUDA_ALLOC_CONF gets backend:cudaMallocAsync (the user's other
 *                      keys are kept and recorded; a backend key of theirs is replaced),
 *                      TF_GPU_ALLOCATOR=cuda_malloc_async, XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async
 *                      with XLA_PYTHON_CLIENT_PREALLOCATE=false, CuPy's pool -> MemoryAsyncPool
 *                      (sitecustomize.py, rec_torch.c);
 *   native             nothing is switched;
 *   torch              native, plus PyTorch's own memory history (rec_torch.c), converted at exit.
 * The child's exit status is ours (128+N if a signal N killed it); SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT, SIGUSR1/2 sent to gpurec are forwarded (a terminal's ^C already reaches the child).
 * Before the job starts: the command can be run, the trace's directory can be written, and
 * the user's own PYTORCH_CUDA_ALLOC_CONF passes the parser gpureplay's --policy uses (a typo is a
 * warning with a did-you-mean). At the end: a summary per trace, read back from disk, on
 * stderr, led by a failed allocation when the program ran out of memory. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "base/gm_base.h"
#include "formats/gmt.h"
#include "recorder/rec_core.h"
#include "recorder/rec_summary.h"
#include "recorder/rec_torch.h"
#include "recorder/gpurec_cover.h"
#include "recorder/gpurec_env.h"
#include "recorder/gpurec_history.h"
#include "recorder/gpurec_import.h"
#include "recorder/predict/pred_cli.h"
#include "recorder/rec_callsite.h"
#include "recorder/snapshot/snap_import.h"

#define MAX_TRACES GPUREC_MAX_TRACES

typedef struct config {
  const char *output;
  const char *mode;
  const char *capture;
  const char *stacks;
  const char *callsites;
  uint64_t max_entries;
  int quiet, help, version;
} config_t;

static const gm_opt_t k_opts[] = {
    {"output", 'o', GM_OPT_STR, "PATH",
     "trace file (default gpumem-%p.zst; %p = pid); several CUDA processes: PATH.rankR.pidP.zst",
     offsetof(config_t, output)},
    {"mode", 0, GM_OPT_STR, "MODE",
     "auto (default: PyTorch's requests streamed from its allocator as they happen, merged with "
     "the CUPTI trace, its allocator as you set it; JAX, TF, CuPy per request) | requests (every framework allocates per request from the "
     "driver) | native | torch",
     offsetof(config_t, mode)},
    {"stacks", 0, GM_OPT_STR, "HOW",
     "PyTorch history's stacks: none (auto's default: the requests streamed, no history) | "
     "python (the history with whole Python stacks, ~800 ns per entry, a ring of --max-entries; "
     "torch mode's default)",
     offsetof(config_t, stacks)},
    {"capture", 0, GM_OPT_STR, "HOW",
     "callbacks (default: driver-API callbacks, cheapest) | activity (CUPTI MEMORY2 records: "
     "also module globals and CUPTI's pool records); default from GPUMEM_CAPTURE",
     offsetof(config_t, capture)},
    {"callsites", 0, GM_OPT_STR, "WHAT",
     "CUPTI's allocation events: user (default: the innermost line of the program, "
     "file:line:function) | stack (every Python frame) | none; default from GPUMEM_CALLSITES",
     offsetof(config_t, callsites)},
    {"max-entries", 0, GM_OPT_U64, "N", "auto and torch modes: PyTorch history ring size (default 1000000)",
     offsetof(config_t, max_entries), 1, INT32_MAX /* torch takes an int */},
    {"quiet", 'q', GM_OPT_FLAG, NULL, "no mode line and no summary on stderr",
     offsetof(config_t, quiet)},
    {"version", 0, GM_OPT_FLAG, NULL, "print versions (tool, trace format, zstd, CUPTI) and exit",
     offsetof(config_t, version)},
    {"help", 'h', GM_OPT_FLAG, NULL, "show this help and exit", offsetof(config_t, help)},
    {NULL, 0, 0, NULL, NULL, 0}};

static const char k_usage[] =
    "gpurec [options] -- CMD ARGS...\n       gpurec import SNAPSHOT.pickle|TRACE.csv -o TRACE.zst\n"
    "       gpurec predict TRACE.zst@VALUE TRACE.zst@VALUE... --at=VALUE -o PREDICTED.zst";
static const char k_desc[] =
    "Record every GPU memory allocation of CMD (and of the CUDA processes it starts) through\n"
    "CUPTI into a gpumem trace. The program runs unmodified; gpurec exits with its status.\n"
    "'gpurec import' converts a PyTorch memory snapshot (.pickle) or a trace in CSV text form\n"
    "('gpurec import --help'). 'gpurec predict' writes the trace of the job at a value it never ran\n"
    "at, from recordings at two or more others, or with --fit=SIZE finds the largest value that\n"
    "fits a device, per allocator setting ('gpurec predict --help').\n"
    "The trace goes on to gpureplay and gpuanalyze.";

static volatile sig_atomic_t g_child = 0;

static int usage_error(const char *msg) {
  fputs("gpurec: error: ", stderr);
  gm_fputs_escaped(msg, stderr); /* it quotes the command line */
  fputs("\ntry 'gpurec --help'\n", stderr);
  return 2;
}

/* ---- signals -------------------------------------------------------------------------------- */

static void forward(int sig, siginfo_t *si, void *uc) {
  /* a terminal's ^C / ^\ went to the whole foreground group, the child included: do not
   * deliver it twice */
  if (si && si->si_code == SI_KERNEL) return;
  if (g_child > 0) kill((pid_t)g_child, sig);
}

static void install_forwarding(void) {
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = forward;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, NULL);
}

/* ---- after the run -------------------------------------------------------------------------- */

typedef gpurec_run_t run_t; /* the traces a run wrote (gpurec_history.h) */

static void read_manifest(const char *path, run_t *r) {
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[4200];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    if (!line[0]) continue;
    if (line[0] == '#') {
      size_t l = strlen(r->notes);
      if (l < sizeof r->notes - 1 &&
          snprintf(r->notes + l, sizeof r->notes - l, "%s%s", l ? "; " : "", line + 1) < 0)
        break;
    } else if (r->ntraces < MAX_TRACES) {
      r->traces[r->ntraces++] = strdup(line);
    }
  }
  fclose(f);
}

/* A lone trace of a process without a rank takes the name the user asked for. */
static void rename_single(char **path, const char *want) {
  if (!*path || strstr(*path, ".rank")) return;
  if (rename(*path, want) == 0) {
    free(*path);
    *path = strdup(want);
  }
}

static void print_summary(const char *path) {
  rec_summary_t s;
  gm_err_t err;
  gm_err_clear(&err);
  if (rec_summary_read(path, &s, &err) < 0) {
    fprintf(stderr, "gpurec: %s: cannot read back: %s\n", path, err.msg);
    return;
  }
  char peak[32], bytes[32], mapped[256] = "";
  if (s.mapped_other) { /* name the difference: other owners' memory is not the framework's */
    char b1[32], b2[32];
    snprintf(mapped, sizeof mapped, " (mapped %s at most on device %u, %s of it NCCL's and other libraries': "
             "`gpuanalyze info`)", gm_format_size(s.peak_mapped, b1, sizeof b1), s.mapped_device,
             gm_format_size(s.mapped_other, b2, sizeof b2));
  }
  if (s.context) { /* the driver's count beyond the maps (DEVICE_USAGE) */
    char b1[32];
    size_t l = strlen(mapped);
    snprintf(mapped + l, sizeof mapped - l, ", CUDA context and module code %s on device %u",
             gm_format_size(s.context, b1, sizeof b1), s.context_device);
  }
  double secs = s.events ? (double)(s.last_ts - s.first_ts) / 1e9 : 0.0;
  if (s.coverage.partial) { /* first: the figures below are of part of the run */
    char cov[1024];
    fprintf(stderr, "gpurec: %s: %s\n", path, gmt_coverage_text(&s.coverage, cov, sizeof cov));
  }
  fprintf(stderr,
          "gpurec: %s: %llu events in %.2f s, %s (%.2f bytes/event), peak live %s%s, %llu dropped%s%s%s, "
          "framework %s\n",
          path, (unsigned long long)s.events, secs, gm_format_size(s.file_bytes, bytes, sizeof bytes),
          s.events ? (double)s.file_bytes / (double)s.events : 0.0,
          gm_format_size(s.peak_live, peak, sizeof peak), mapped, (unsigned long long)s.dropped,
          s.truncated ? (s.coverage.why & (GMT_COV_KILLED | GMT_COV_STOPPED) ? ", TRUNCATED (see above)"
                                                                         : ", TRUNCATED (process killed?)") : s.coverage.partial ? ", PARTIAL (see above)" : ", complete", s.gpu[0] ? ", GPU " : "",
          s.gpu, s.frameworks);
  uint64_t failed = s.by_kind[GMT_EV_ALLOC_FAILED];
  if (failed) {
    fprintf(stderr, "gpurec: %s: the program ran out of memory: %llu failed request%s, the first %s", path,
            (unsigned long long)failed, failed == 1 ? "" : "s", gm_format_size(s.failed_size, peak, sizeof peak));
    if (s.failed_stream != GMT_STREAM_NONE) fprintf(stderr, " on stream %llu", (unsigned long long)s.failed_stream);
    fprintf(stderr, " at t=%.3f s%s%s%s; `gpuanalyze report %s` says which setting would have served it\n",
            (double)s.failed_ts / 1e9, s.failed_callsite[0] ? " (" : "", s.failed_callsite,
            s.failed_callsite[0] ? ")" : "", path);
  }
}

static void remove_tree(const char *dir) {
  char cmd[4200];
  /* our own mkdtemp directory with a handful of files: unlink them one by one */
  static const char *const names[] = {"manifest", "sitecustomize.py", NULL};
  for (const char *const *n = names; *n; n++) {
    snprintf(cmd, sizeof cmd, "%s/%s", dir, *n);
    unlink(cmd);
  }
  rec_torch_snap_t snaps[64];
  int k = rec_torch_list(dir, snaps, 64);
  for (int i = 0; i < k; i++) unlink(snaps[i].path);
  snprintf(cmd, sizeof cmd, "%s/__pycache__", dir);
  rmdir(cmd); /* left if not empty: harmless in /tmp */
  rmdir(dir);
}

/* Can cmd be started? A name without '/' is looked up in PATH as execvp does. 0, or an errno. */
static int command_startable(const char *cmd) {
  if (strchr(cmd, '/')) return access(cmd, X_OK) == 0 ? 0 : errno;
  const char *path = getenv("PATH");
  if (!path || !*path) path = "/usr/local/bin:/bin:/usr/bin";
  char buf[PATH_MAX];
  int found_noexec = 0;
  for (const char *p = path;;) {
    const char *end = strchr(p, ':');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if ((size_t)snprintf(buf, sizeof buf, "%.*s%s%s", (int)len, p, len ? "/" : "", cmd) < sizeof buf) {
      struct stat sb;
      if (stat(buf, &sb) == 0 && S_ISREG(sb.st_mode)) {
        if (access(buf, X_OK) == 0) return 0;
        found_noexec = 1;
      }
    }
    if (!end) break;
    p = end + 1;
  }
  return found_noexec ? EACCES : ENOENT;
}

/* ---- verbs ---------------------------------------------------------------------------------- */

static int cmd_version(void) {
  printf("gpurec %s (%s)\n", GPUREC_VERSION, GM_DIST_NAME);
  printf("trace format %d (writes traces for readers >= %d)\n", GMT_FORMAT_VERSION, GMT_FORMAT_MIN_READER);
  printf("zstd %s\n", ZSTD_versionString());
  char path[1200];
  void *lib = rec_cupti_open(path, sizeof path);
  uint32_t v = 0;
  if (lib && rec_cupti_version(lib, &v))
    printf("CUPTI API %u (%s)\n", v, path);
  else if (lib)
    printf("CUPTI %s (version unknown)\n", path);
  else
    printf("CUPTI not found (set %s)\n", REC_ENV_CUPTI);
  return 0;
}

static int cmd_record(config_t *cfg, char **cmd) {
  if (!cfg->mode) cfg->mode = "auto";
  if (strcmp(cfg->mode, "auto") && strcmp(cfg->mode, "requests") && strcmp(cfg->mode, "native") &&
      strcmp(cfg->mode, "torch")) {
    char m[256];
    snprintf(m, sizeof m, "unknown --mode '%.100s' (auto, requests, native or torch)", cfg->mode);
    return usage_error(m);
  }
  int history = strcmp(cfg->mode, "auto") == 0 || strcmp(cfg->mode, "torch") == 0;
  if (cfg->stacks && strcmp(cfg->stacks, "none") && strcmp(cfg->stacks, "python")) {
    char m[256];
    snprintf(m, sizeof m, "unknown --stacks '%.100s' (none or python)", cfg->stacks);
    return usage_error(m);
  }
  if (cfg->stacks && !history) {
    char m[256];
    snprintf(m, sizeof m, "--stacks is for --mode=auto and --mode=torch (PyTorch's history), not %.100s",
             cfg->mode);
    return usage_error(m);
  }
  if (!cfg->stacks) cfg->stacks = strcmp(cfg->mode, "torch") == 0 ? "python" : "none";
  if (cfg->capture && strcmp(cfg->capture, "callbacks") && strcmp(cfg->capture, "activity")) {
    char m[256];
    snprintf(m, sizeof m, "unknown --capture '%.100s' (callbacks or activity)", cfg->capture);
    return usage_error(m);
  }
  if (cfg->callsites && rec_cs_mode_parse(cfg->callsites) < 0) {
    char m[256];
    snprintf(m, sizeof m, "unknown --callsites '%.100s' (user, stack or none)", cfg->callsites);
    return usage_error(m);
  }
  int bad_cmd = command_startable(cmd[0]);
  if (bad_cmd) {
    fprintf(stderr, "gpurec: error: cannot run '%s': %s%s; nothing was started\n", cmd[0], strerror(bad_cmd),
            bad_cmd == ENOENT && !strchr(cmd[0], '/') ? " (not found in PATH)" : "");
    return bad_cmd == ENOENT ? 127 : 126;
  }
  char *tmpl = gpurec_absolute(cfg->output ? cfg->output : "gpumem-%p.zst");
  /* Found before the job starts: on a GPU it would otherwise run for hours unrecorded. */
  gm_err_t oerr;
  gm_err_clear(&oerr);
  struct stat ost;
  if (tmpl && stat(tmpl, &ost) == 0 && !S_ISREG(ost.st_mode)) {
    /* the output path is the file written: never a device, a pipe or a folder, and no suffix
     * added to one (-o /dev/full once wrote /dev/full.zst) */
    fprintf(stderr, "gpurec: error: -o '%s' is %s, not a trace file; the program was not started\n", tmpl,
            S_ISDIR(ost.st_mode) ? "a folder" : S_ISCHR(ost.st_mode) || S_ISBLK(ost.st_mode) ? "a device"
                                                                                            : "not a regular file");
    free(tmpl);
    return 1;
  }
  if (tmpl && gm_output_check(tmpl, &oerr) < 0) {
    fprintf(stderr, "gpurec: error: %s; the program was not started\n", oerr.msg);
    free(tmpl);
    return 1;
  }
  if (!cfg->quiet) gpurec_check_alloc_conf();
  char dir[] = "/tmp/gpurec.XXXXXX";
  char inject[PATH_MAX], manifest[PATH_MAX];
  int recording = gpurec_find_inject(inject, sizeof inject);
  if (!recording)
    fprintf(stderr, "gpurec: warning: injection library not found at '%s' (set GPUMEM_INJECT); "
                    "running the program unrecorded\n", inject);
  if (!tmpl || !mkdtemp(dir)) {
    fprintf(stderr, "gpurec: error: cannot create a temporary directory: %s\n", strerror(errno));
    return 1;
  }
  snprintf(manifest, sizeof manifest, "%s/manifest", dir);
  if (recording) {
    if (gpurec_set_env("CUDA_INJECTION64_PATH", inject) < 0 || gpurec_set_env(REC_ENV_MANIFEST, manifest) < 0 ||
        gpurec_set_env(REC_ENV_MODE, cfg->mode) < 0 ||
        gpurec_set_mode_env(cfg->mode, cfg->stacks, cfg->callsites, cfg->quiet) < 0 ||
        (cfg->capture && gpurec_set_env(REC_ENV_CAPTURE, cfg->capture) < 0) ||
        (cfg->callsites && gpurec_set_env(REC_ENV_CALLSITES, cfg->callsites) < 0))
      return 1;
  }
  if (recording && strcmp(cfg->mode, "native") != 0) {
    gm_err_t err;
    gm_err_clear(&err);
    if (rec_torch_write_site(dir, &err) < 0) {
      fprintf(stderr, "gpurec: error: %s\n", err.msg);
      return 1;
    }
    const char *pp = getenv("PYTHONPATH");
    size_t n = strlen(dir) + (pp ? strlen(pp) : 0) + 2;
    char *v = malloc(n);
    char entries[32];
    snprintf(entries, sizeof entries, "%llu",
             (unsigned long long)(cfg->max_entries ? cfg->max_entries : 1000000));
    if (!v) return 1;
    snprintf(v, n, "%s%s%s", dir, pp && *pp ? ":" : "", pp && *pp ? pp : "");
    if (gpurec_set_env("PYTHONPATH", v) < 0 ||
        (history && (gpurec_set_env("GPUMEM_TORCH_DIR", dir) < 0 ||
                     gpurec_set_env("GPUMEM_TORCH_MAX_ENTRIES", entries) < 0 ||
                     gpurec_set_env("GPUMEM_TORCH_STACKS", cfg->stacks) < 0)))
      return 1;
    free(v);
  }
  install_forwarding();
  /* gpurec's own writes past a file size limit (its messages, the merge, the marks) fail with
   * EFBIG instead of killing it before it passes the job's status on; the job keeps the
   * disposition it was given */
  struct sigaction xfsz_ign, xfsz_job;
  memset(&xfsz_ign, 0, sizeof xfsz_ign);
  xfsz_ign.sa_handler = SIG_IGN;
  sigaction(SIGXFSZ, &xfsz_ign, &xfsz_job);
  fflush(NULL);
  /* A command that cannot be started is told apart from a program that ran: exec failing in
   * the child writes its errno down this close-on-exec pipe; a started program closes it. */
  int ep[2];
  if (pipe2(ep, O_CLOEXEC) != 0) ep[0] = ep[1] = -1;
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "gpurec: error: fork: %s\n", strerror(errno));
    return 1;
  }
  if (pid == 0) {
    if (ep[0] >= 0) close(ep[0]);
    char out[4200];
    gm_err_t err;
    gm_err_clear(&err);
    /* %p is the pid of the process gpurec starts */
    if (rec_trace_name(tmpl, -1, (long)getpid(), out, sizeof out, &err) == 0) {
      char *dot = strstr(out, ".pid");
      char *end = dot ? strrchr(out, '.') : NULL;
      if (dot && end && dot < end) memmove(dot, end, strlen(end) + 1); /* drop ".pidN" */
    } else {
      snprintf(out, sizeof out, "%s", tmpl);
    }
    setenv(REC_ENV_OUT, out, 1);
    sigaction(SIGXFSZ, &xfsz_job, NULL);
    execvp(cmd[0], cmd);
    int e = errno;
    if (ep[1] >= 0 && write(ep[1], &e, sizeof e) != (ssize_t)sizeof e) {
      /* nothing more to do: the exit status still says it */
    }
    _exit(e == ENOENT ? 127 : 126);
  }
  g_child = pid;
  int exec_errno = 0;
  if (ep[1] >= 0) close(ep[1]);
  if (ep[0] >= 0) {
    ssize_t got;
    while ((got = read(ep[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
    }
    if (got != (ssize_t)sizeof exec_errno) exec_errno = 0;
    close(ep[0]);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      fprintf(stderr, "gpurec: error: waitpid: %s\n", strerror(errno));
      return 1;
    }
  }
  g_child = 0;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  struct timespec died;
  clock_gettime(CLOCK_REALTIME, &died);
  gpurec_end_t ended = {pid, WIFSIGNALED(status) ? WTERMSIG(status) : 0,
                      (uint64_t)died.tv_sec * 1000000000ull + (uint64_t)died.tv_nsec};

  char want[4200];
  gm_err_t err;
  gm_err_clear(&err);
  if (rec_trace_name(tmpl, -1, (long)pid, want, sizeof want, &err) == 0) {
    char *dot = strstr(want, ".pid");
    char *end = dot ? strrchr(want, '.') : NULL;
    if (dot && end && dot < end) memmove(dot, end, strlen(end) + 1);
  }
  run_t r;
  memset(&r, 0, sizeof r);
  if (recording) {
    read_manifest(manifest, &r);
    if (r.ntraces == 1) rename_single(&r.traces[0], want);
    if (strcmp(cfg->mode, "torch") == 0) gpurec_convert_torch(dir, want, &r, cfg->quiet);
    else if (strcmp(cfg->mode, "auto") == 0) gpurec_merge_torch(dir, want, cfg->stacks, &r, cfg->quiet);
    /* a path the user named is the file written, without a ".zst" added to it */
    for (int i = 0; cfg->output && !strstr(cfg->output, "%p") && strcmp(want, tmpl) != 0 && i < r.ntraces; i++)
      if (strcmp(r.traces[i], want) == 0) rename_single(&r.traces[i], tmpl);
    /* a trace its process did not finish (killed) says so in its header: every tool then
     * prints PARTIAL first (SPEC.md §3.4) */
    for (int i = 0; i < r.ntraces; i++) gpurec_mark_cut(r.traces[i], &ended, cfg->quiet);
  }
  if (exec_errno) {
    fprintf(stderr, "gpurec: error: cannot run '%s': %s%s\n", cmd[0], strerror(exec_errno),
            exec_errno == ENOENT && !strchr(cmd[0], '/') ? " (not found in PATH)" : "");
  } else if (!cfg->quiet && recording) {
    if (r.ntraces == 0)
      fprintf(stderr, "gpurec: no trace written%s\n",
              r.notes[0] ? " (see the [gpurec] line above)"
                         : ": the program never initialised CUDA (no GPU, no driver, or no CUDA use)");
    for (int i = 0; i < r.ntraces; i++) print_summary(r.traces[i]);
    if (WIFSIGNALED(status))
      fprintf(stderr, "gpurec: the program was killed by signal %d; exit status %d\n",
              WTERMSIG(status), code);
  }
  for (int i = 0; i < r.ntraces; i++) free(r.traces[i]);
  remove_tree(dir);
  free(tmpl);
  return code;
}

/* gpurec's own stdout (help, version) reached its destination; a failure is exit 1 unless the
 * command already failed (the recorded job's status passes through untouched otherwise). */
static int close_stdout(int code) {
  gm_err_t err;
  gm_err_clear(&err);
  if (gm_stdout_close(&err) != GM_OK) {
    fprintf(stderr, "gpurec: error: %s\n", err.msg);
    if (code == 0) code = 1;
  }
  return code;
}

int main(int argc, char **argv) {
  gm_log_init("gpurec", GM_LOG_WARN);
  if (argc >= 2 && strcmp(argv[1], "import") == 0) return gpurec_import(argc - 1, argv + 1);
  if (argc >= 2 && strcmp(argv[1], "predict") == 0) return pred_cli_main(argc - 1, argv + 1);
  config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  char **pos = calloc((size_t)argc + 1, sizeof *pos);
  int npos = 0;
  gm_err_t err;
  gm_err_clear(&err);
  if (!pos) return 1;
  int code;
  if (gm_opts_parse(k_opts, argc, argv, &cfg, pos, &npos, 1, &err) < 0) {
    code = usage_error(err.msg);
  } else if (cfg.help) {
    gm_opts_help(stdout, k_usage, k_desc, k_opts);
    code = close_stdout(0);
  } else if (cfg.version) {
    code = close_stdout(cmd_version());
  } else if (npos == 0) {
    code = usage_error("no command to run (gpurec [options] -- CMD ARGS...)");
  } else {
    pos[npos] = NULL;
    code = cmd_record(&cfg, pos);
  }
  free(pos);
  return code;
}
