/* cs_probe.c: the callsite table over the real CPython of the process, for cs_probe_test.py.
 * Python loads this with ctypes: through ctypes.CDLL the call runs without the GIL (as a PyTorch
 * operator's allocation does), through ctypes.PyDLL with it. */
#include <stdio.h>
#include <time.h>
#include <string.h>

#include "recorder/rec_callsite.h"

int cs_probe_init(int mode, char *why, int nwhy);
int cs_probe(char *buf, int n);
int cs_probe_owner(char *buf, int n);
unsigned long cs_probe_misses(void);
double cs_probe_bench(int n);

static rec_callsites_t *g_cs;

int cs_probe_init(int mode, char *why, int nwhy) {
  rec_pyframes_t src;
  why[0] = '\0';
  int ok = rec_pyframes_cpython(&src, why, (size_t)nwhy);
  gm_err_t err;
  gm_err_clear(&err);
  if (g_cs) rec_callsites_destroy(g_cs);
  g_cs = NULL;
  if (rec_callsites_create(&g_cs, (rec_cs_mode_t)mode, ok ? &src : NULL, 0, &err) < 0) return -1;
  return ok;
}

int cs_probe(char *buf, int n) {
  uint32_t id = rec_callsites_capture(g_cs);
  const char *s = rec_callsites_string(g_cs, id);
  snprintf(buf, (size_t)n, "%s", s ? s : "");
  return (int)id;
}

int cs_probe_owner(char *buf, int n) {
  uint32_t id = rec_callsites_owner(g_cs, rec_callsites_capture(g_cs), (const void *)cs_probe_owner);
  const char *s = rec_callsites_string(g_cs, id);
  snprintf(buf, (size_t)n, "%s", s ? s : "");
  return (int)id;
}

unsigned long cs_probe_misses(void) {
  rec_callsites_stats_t st;
  rec_callsites_stats(g_cs, &st);
  return (unsigned long)st.misses;
}

/* ns per capture, n captures from the caller's stack (the steady state: all cached) */
double cs_probe_bench(int n) {
  struct timespec t0, t1;
  rec_callsites_capture(g_cs);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < n; i++) rec_callsites_capture(g_cs);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / n;
}
