/* rec_prov.c: what a trace says about the process that made it, and what the trace is called.
 *
 * The header of every recorded trace carries its provenance (DESIGN.md "Trace files"): host,
 * pid, rank and world size of a distributed job, the command line, the allocator environment
 * in force, the driver version, the start time. Everything here comes from the process itself
 * (environment, /proc), so it works without CUDA; the GPU fields are the adapter's.
 *
 * Naming: one trace per CUDA process. A job may start several (torchrun, multiprocessing),
 * and each process names its own file from the -o template, its rank and its pid:
 * "run.zst" -> "run.rank0.pid4242.zst". The launcher renames a lone trace back to "run.zst". */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "recorder/rec_core.h"

extern char **environ;

const char *const rec_prov_env_vars[] = {
    "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "TF_GPU_ALLOCATOR", "TF_FORCE_GPU_ALLOW_GROWTH", "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_MAX_CONNECTIONS", "LOCAL_RANK", "XLA_PYTHON_CLIENT_", /* prefix */
    "XLA_CLIENT_MEM_FRACTION", "TF_ENABLE_GPU_GARBAGE_COLLECTION", "TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC",
    "CUPY_GPU_MEMORY_LIMIT", "GPUMEM_CUPY_ALLOCATOR",
    NULL};

static int env_int(const char *const *names) {
  for (; *names; names++) {
    const char *v = getenv(*names);
    if (v && *v) {
      char *end;
      long x = strtol(v, &end, 10);
      if (*end == '\0' && x >= 0 && x < 1 << 30) return (int)x;
    }
  }
  return -1;
}

void rec_prov_rank(int *rank, int *world_size, int *local_rank) {
  static const char *const r[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", NULL};
  static const char *const w[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
  static const char *const l[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                  NULL};
  if (rank) *rank = env_int(r);
  if (world_size) *world_size = env_int(w);
  if (local_rank) *local_rank = env_int(l);
}

/* /proc/self/cmdline: NUL-separated arguments, joined with spaces. */
static char *read_cmdline(void) {
  FILE *f = fopen("/proc/self/cmdline", "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (n < cap) break;
    if (cap >= (1u << 20)) break; /* a megabyte of command line is enough */
    char *nb = realloc(buf, cap * 2 + 1);
    if (!nb) break;
    buf = nb;
    cap *= 2;
  }
  fclose(f);
  if (!buf) return NULL;
  while (n > 0 && buf[n - 1] == '\0') n--;
  for (size_t i = 0; i < n; i++)
    if (buf[i] == '\0') buf[i] = ' ';
  buf[n] = '\0';
  return buf;
}

/* "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu ..." -> "580.159.04" */
static int driver_version(char *out, size_t n) {
  FILE *f = fopen("/proc/driver/nvidia/version", "r");
  if (!f) return 0;
  char line[512];
  int ok = 0;
  if (fgets(line, sizeof line, f)) {
    char *p = strstr(line, "Kernel Module");
    if (p) {
      p += strlen("Kernel Module");
      while (*p == ' ') p++;
      size_t k = 0;
      while (p[k] && (isdigit((unsigned char)p[k]) || p[k] == '.')) k++;
      if (k > 0 && k < n) {
        memcpy(out, p, k);
        out[k] = '\0';
        ok = 1;
      }
    }
  }
  fclose(f);
  return ok;
}

gm_status_t rec_prov_fill(gmt_header_t *h, unsigned mode, gm_err_t *err) {
  gm_status_t s;
  h->capture_mode = mode;
  h->pid = (uint32_t)getpid();
  rec_prov_rank(&h->rank, &h->world_size, NULL);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  h->start_time_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) == 0 && (s = gmt_header_set(&h->host, host, err)) < 0)
    return s;
  char *cmd = read_cmdline();
  if (cmd) {
    s = gmt_header_set(&h->command_line, cmd, err);
    free(cmd);
    if (s < 0) return s;
  }
  char drv[64];
  if (driver_version(drv, sizeof drv) && (s = gmt_header_set(&h->driver_version, drv, err)) < 0)
    return s;
  /* the allocator environment in force: what the replayer needs to reproduce this run */
  for (char **e = environ; e && *e; e++) {
    const char *eq = strchr(*e, '=');
    if (!eq) continue;
    size_t klen = (size_t)(eq - *e);
    for (const char *const *v = rec_prov_env_vars; *v; v++) {
      size_t vl = strlen(*v);
      int prefix = (*v)[vl - 1] == '_';
      if ((prefix && klen > vl && strncmp(*e, *v, vl) == 0) ||
          (!prefix && klen == vl && strncmp(*e, *v, vl) == 0)) {
        char key[256];
        if (klen >= sizeof key) break;
        memcpy(key, *e, klen);
        key[klen] = '\0';
        if ((s = gmt_header_kv_set(h, key, eq + 1, err)) < 0) return s;
        break;
      }
    }
  }
  return GM_OK;
}

gm_status_t rec_trace_name_tag(const char *tmpl, const char *tag, int rank, long pid, char *out,
                               size_t n, gm_err_t *err) {
  /* expand %p (pid) and %% first */
  char stem[4096];
  size_t k = 0;
  for (const char *p = tmpl; *p; p++) {
    char tmp[32];
    const char *ins = NULL;
    if (p[0] == '%' && p[1] == 'p') {
      snprintf(tmp, sizeof tmp, "%ld", pid);
      ins = tmp;
      p++;
    } else if (p[0] == '%' && p[1] == '%') {
      ins = "%";
      p++;
    }
    if (ins) {
      size_t l = strlen(ins);
      if (k + l >= sizeof stem) return gm_err_set(err, GM_ERR_INVAL, "output name too long");
      memcpy(stem + k, ins, l);
      k += l;
    } else {
      if (k + 1 >= sizeof stem) return gm_err_set(err, GM_ERR_INVAL, "output name too long");
      stem[k++] = *p;
    }
  }
  stem[k] = '\0';
  if (k >= 4 && strcmp(stem + k - 4, ".zst") == 0) stem[k - 4] = '\0';
  char rk[32] = "";
  if (rank >= 0) snprintf(rk, sizeof rk, ".rank%d", rank);
  int len = snprintf(out, n, "%s%s%s%s.pid%ld.zst", stem, tag ? "." : "", tag ? tag : "", rk, pid);
  if (len < 0 || (size_t)len >= n) return gm_err_set(err, GM_ERR_INVAL, "output name too long");
  return GM_OK;
}

gm_status_t rec_trace_name(const char *tmpl, int rank, long pid, char *out, size_t n,
                           gm_err_t *err) {
  return rec_trace_name_tag(tmpl, NULL, rank, pid, out, n, err);
}
