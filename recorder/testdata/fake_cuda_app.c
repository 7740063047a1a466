/* fake_cuda_app.c: stands in for a CUDA program in the launcher tests (no GPU, no CUDA).
 *
 * Does what the CUDA driver does at cuInit: dlopen($CUDA_INJECTION64_PATH) and call its
 * InitializeInjection. With GPUMEM_SELFTEST=N the library then records N synthetic events.
 * Usage: fake_cuda_app [--procs N] [--sleep-ms MS] [--exit CODE] [--signal SIG] [--no-cuda]
 *   --procs N   fork N "ranks" (RANK, WORLD_SIZE set), each initialising its own injection
 *   --signal S  after recording, kill itself with signal S
 *   --no-cuda   never load the injection (a program that does not use the GPU) */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void fake_cuinit(void) {
  const char *p = getenv("CUDA_INJECTION64_PATH");
  if (!p) return;
  void *h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "fake_cuda_app: %s\n", dlerror());
    exit(99);
  }
  int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
  if (!init || init() != 1) exit(98);
}

static void after(long sleep_ms, int sig, int code) {
  if (sleep_ms > 0) {
    struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0) {
    }
  }
  if (sig) raise(sig);
  exit(code);
}

int main(int argc, char **argv) {
  int procs = 0, code = 0, sig = 0, no_cuda = 0;
  long sleep_ms = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--procs") && i + 1 < argc) procs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--sleep-ms") && i + 1 < argc) sleep_ms = atol(argv[++i]);
    else if (!strcmp(argv[i], "--exit") && i + 1 < argc) code = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--signal") && i + 1 < argc) sig = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--no-cuda")) no_cuda = 1;
    else {
      fprintf(stderr, "fake_cuda_app: bad argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (procs > 0) {
    char ws[16];
    snprintf(ws, sizeof ws, "%d", procs);
    for (int r = 0; r < procs; r++) {
      pid_t p = fork();
      if (p == 0) {
        char rk[16];
        snprintf(rk, sizeof rk, "%d", r);
        setenv("RANK", rk, 1);
        setenv("LOCAL_RANK", rk, 1);
        setenv("WORLD_SIZE", ws, 1);
        if (!no_cuda) fake_cuinit();
        after(sleep_ms, 0, 0);
      }
    }
    int st, bad = 0;
    while (wait(&st) > 0) bad |= !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    after(0, sig, bad ? 1 : code);
  }
  if (!no_cuda) fake_cuinit();
  after(sleep_ms, sig, code);
  return 0;
}
