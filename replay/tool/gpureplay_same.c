/* gpureplay_same.c: a setting whose replay is another's, copied instead of replayed.
 *
 * A sweep replays one trace under a dozen settings of one policy; on most traces several of
 * them never reach the case their key is about (PyTorch's max_split_size_mb above every
 * segment, a memory fraction far above the peak: pt_same.c), and their replays are the same
 * calls as another's. Such a job has a lead: a job of the same policy, kind and events that
 * it may equal, with a setting no longer than its own (grj_same_leads). When the pool takes
 * it, it waits for its lead and asks the policy (rp_policy_ops_t.same_run) whether the lead's
 * run, as its facts show, proves the two alike; then the job's result is the lead's under its
 * own spec (gpureplay_run.c copies it), else it replays as before. The followers (placement
 * spread, timing range) lead each other the same way, on the facts of the lead's follower of
 * the same kind. A lead is never itself a copy, and the pool takes every lead before the jobs
 * it leads (gpureplay_run.c's cost order), so a one-thread pool never reads an unfinished one.
 *
 * Not on the cuda backend (each setting's latencies are its own) nor with --check (each
 * setting's invariants are walked in its own replay). A copy's replay_seconds are its lead's:
 * the time its figures took. */
#include <stdlib.h>
#include <string.h>

#include "replay/tool/gpureplay_jobs.h"

static const rp_policy_ops_t *ops_of(const char *spec) {
  size_t n = strcspn(spec, ":");
  char name[64];
  if (n >= sizeof name) return NULL;
  memcpy(name, spec, n);
  name[n] = '\0';
  return rp_policy_find(name);
}

static const char *conf_of(const char *spec) {
  size_t n = strcspn(spec, ":");
  return spec[n] == ':' ? spec + n + 1 : "";
}

/* The facts most favourable to a copy: a lead is worth waiting for when these prove it. */
static const rp_run_facts_t any_run = {1ull << 62, 0, 0, 0, 0, 1};

/* Leads are taken shortest setting first (the policy's defaults lead: a key left out cannot
 * differ), each job led by the first lead before it in that order that may equal it. */
void grj_same_leads(const gr_config_t *cfg, pool_t *p, int n, const int *of) {
  for (int i = 0; i < p->n; i++) p->jobs[i].lead = 0;
  if (cfg->cuda_ordinal >= 0 || cfg->check || n < 2) return;
  int *by = malloc((size_t)n * sizeof *by);
  if (!by) return; /* no copies: every job replays */
  for (int i = 0; i < n; i++) { /* insertion sort by conf length, stable: n is a grid's size */
    size_t li = strlen(conf_of(p->jobs[i].spec));
    int k = i;
    while (k > 0 && strlen(conf_of(p->jobs[by[k - 1]].spec)) > li) {
      by[k] = by[k - 1];
      k--;
    }
    by[k] = i;
  }
  for (int a = 1; a < n; a++) {
    job_t *j = &p->jobs[by[a]];
    const rp_policy_ops_t *ops = ops_of(j->spec);
    if (!ops || !ops->same_run || !j->evs) continue;
    for (int b = 0; b < a; b++) {
      const job_t *l = &p->jobs[by[b]];
      if (l->lead || ops_of(l->spec) != ops || l->evs != j->evs) continue;
      if (ops->same_run(conf_of(l->spec), conf_of(j->spec), &any_run)) {
        j->lead = by[b] + 1;
        break;
      }
    }
  }
  free(by);
  /* a follower of a job with a lead: led by its lead's follower of the same kind */
  for (int f = n; f < p->n; f++) {
    job_t *j = &p->jobs[f];
    int lp = p->jobs[of[f - n]].lead - 1;
    for (int g = n; lp >= 0 && g < p->n; g++)
      if (of[g - n] == lp && p->jobs[g].role == j->role && p->jobs[g].range_v == j->range_v) j->lead = g + 1;
  }
}

int grj_same_proven(const pool_t *p, const job_t *j) {
  const job_t *l = &p->jobs[j->lead - 1];
  const rp_policy_ops_t *ops = ops_of(j->spec);
  /* the same options (a follower is configured from its own point's result) */
  if (l->event_timing != j->event_timing || l->pool_model != j->pool_model || l->bump != j->bump) return 0;
  return l->st == GM_OK && !l->skipped && ops && ops->same_run &&
         ops->same_run(conf_of(l->spec), conf_of(j->spec), &l->res->facts);
}
