/* gpureplay_tune_out.c: what gpureplay --tune prints: the search's summary, the Pareto front
 * of peak reserved against estimated driver time, the default / grid / tuned / chosen points
 * with the line to paste in the framework's own words, and the capacity answers ("needs X
 * with the default and fits a 24 GiB GPU with headroom Y under Z"). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "replay/tool/tune/gpureplay_tune.h"

/* Common GPUs' memory, nominal (an "80 GB" H100 has 79.2 GiB, and the CUDA context takes
 * about 0.5 GiB of what there is). */
static const unsigned kGpuGiB[] = {16, 24, 40, 48, 80, 94, 141};
#define N_GPUS (sizeof kGpuGiB / sizeof kGpuGiB[0])

/* The setting as the framework's users write it: PYTORCH_CUDA_ALLOC_CONF=..., XLA_...=... */
static void paste_line(const char *spec, char *out, size_t n) {
  const char *colon = strchr(spec, ':');
  if (strncmp(spec, "pytorch", 7) == 0) {
    snprintf(out, n, colon ? "PYTORCH_CUDA_ALLOC_CONF=%s" : "(the default: PYTORCH_CUDA_ALLOC_CONF unset)",
             colon ? colon + 1 : "");
  } else if ((strncmp(spec, "jax", 3) == 0 || strncmp(spec, "tf", 2) == 0 || strncmp(spec, "cupy", 4) == 0) && colon) {
    size_t k = 0;
    for (const char *p = colon + 1; *p && k + 1 < n; p++) out[k++] = *p == ',' ? ' ' : *p;
    out[k] = '\0';
  } else if (strcmp(spec, "jax") == 0 || strcmp(spec, "tf") == 0 || strcmp(spec, "cupy") == 0) {
    snprintf(out, n, "(the default)");
  } else {
    snprintf(out, n, "gpureplay policy %s", spec);
  }
}

static void print_ms(FILE *f, double s) {
  if (s >= 1.0) fprintf(f, "%.2f s", s);
  else fprintf(f, "%.2f ms", s * 1e3);
}

static void print_point(FILE *f, const gr_tune_t *t, int i) {
  char b1[32], b2[32];
  const gr_tune_point_t *p = &t->pts[i];
  const gr_tune_point_t *d = t->dflt >= 0 ? &t->pts[t->dflt] : NULL;
  fprintf(f, "  %10s", gm_format_size(p->peak_reserved, b1, sizeof b1));
  if (d && d->ok && d->peak_reserved)
    fprintf(f, " %+6.1f%%", 100.0 * ((double)p->peak_reserved - (double)d->peak_reserved) / (double)d->peak_reserved);
  else fprintf(f, " %7s", "-");
  /* what the choice ranked it by, where the replay cannot tell (issue 25) */
  if (p->spread && p->worst_oom) fprintf(f, "  (worst: out of memory)");
  else if (p->spread && (p->worst_bytes != p->peak_reserved || p->best_bytes != p->peak_reserved))
    fprintf(f, "  (%s..%s)", gm_format_size(p->best_bytes, b1, sizeof b1), gm_format_size(p->worst_bytes, b2, sizeof b2));
  fprintf(f, "  ");
  print_ms(f, p->time_mid_s);
  fprintf(f, " (..");
  print_ms(f, p->time_hi_s);
  fprintf(f, ") %6" PRIu64 " calls", p->alloc_calls + p->free_calls);
  if (p->needs_none) fprintf(f, "  needs nothing");
  else if (p->needs_bytes) fprintf(f, "  needs %s%s", p->needs_above ? "> " : "", gm_format_size(p->needs_bytes, b2, sizeof b2));
  fprintf(f, "  %s%s\n", p->spec, p->from_grid ? " (grid)" : "");
}

/* The smallest common GPU the point fits in, and its headroom. */
static int smallest_gpu(const gr_tune_point_t *p) {
  if (p->needs_none) return 0;
  if (!p->needs_bytes || p->needs_above) return -1;
  for (size_t g = 0; g < N_GPUS; g++)
    if (p->needs_bytes <= ((uint64_t)kGpuGiB[g] << 30)) return (int)g;
  return -1;
}

unsigned gr_tune_smallest_gpu(const gr_tune_point_t *p) {
  int g = smallest_gpu(p);
  return g < 0 ? 0 : kGpuGiB[g];
}

static void capacity_sentence(FILE *f, const gr_tune_t *t, int partial) {
  char b1[32], b2[32], line[600];
  const gr_tune_point_t *d = t->dflt >= 0 ? &t->pts[t->dflt] : NULL;
  /* what the job is advised to run with: the default where it is kept (t->keep_default) */
  int zi = t->keep_default ? t->dflt : t->chosen;
  const gr_tune_point_t *z = zi >= 0 ? &t->pts[zi] : NULL;
  if (!z || (!z->needs_bytes && !z->needs_none)) return;
  if (z->needs_none && (!d || d->needs_none)) {
    fprintf(f, "capacity: the job allocates no device memory: it needs nothing and fits any GPU\n");
    return;
  }
  int g = smallest_gpu(z);
  paste_line(z->spec, line, sizeof line);
  /* a partial trace (SPEC.md §3.4): a peak before its window cannot be seen */
  fprintf(f, "capacity: the job needs %s", partial ? "at least " : "");
  if (d && d->needs_bytes)
    fprintf(f, "%s%s with the default", d->needs_above ? "more than " : "", gm_format_size(d->needs_bytes, b1, sizeof b1));
  else if (d) fprintf(f, "more than the device with the default (it runs out of memory)");
  if (g >= 0 && partial) /* the GPU it fits is unknown: only that no smaller one will do */
    fprintf(f, "; under %s no GPU smaller than %u GiB will do (the trace is partial: the real need may be more)\n",
            line, kGpuGiB[g]);
  else if (g >= 0)
    fprintf(f, " and fits a %u GiB GPU with headroom %s under %s\n", kGpuGiB[g],
            gm_format_size(((uint64_t)kGpuGiB[g] << 30) - z->needs_bytes, b2, sizeof b2), line);
  else
    fprintf(f, "; under %s it needs %s, more than any common GPU\n", line, gm_format_size(z->needs_bytes, b2, sizeof b2));
  fprintf(f, "fits (");
  for (size_t k = 0; k < N_GPUS; k++) fprintf(f, "%s%u", k ? "/" : "", kGpuGiB[k]);
  fprintf(f, " GiB):");
  const int show[] = {t->dflt, t->best_grid, t->chosen};
  const char *name[] = {"default", "best grid", "chosen"};
  for (int i = 0; i < 3; i++) {
    if (show[i] < 0 || (i > 0 && show[i] == show[i - 1]) || (i == 2 && show[2] == show[0])) continue;
    const gr_tune_point_t *p = &t->pts[show[i]];
    fprintf(f, "%s %s ", i ? ";" : "", name[i]);
    for (size_t k = 0; k < N_GPUS; k++)
      fprintf(f, "%s", p->needs_none || (p->needs_bytes && !p->needs_above && p->needs_bytes <= ((uint64_t)kGpuGiB[k] << 30)) ? "y" : "n");
  }
  if (partial) fprintf(f, "\n  (y: the part of the run the trace covers fits; the whole run may need more)");
  if (t->context_bytes) /* recorded: inside every capacity tried */
    fprintf(f, "\n  (the smallest memory each fits in, by bisection over --capacity, 2 MiB steps, the recorded\n"
               "  CUDA context and module code (%s) counted; shares of the device are of the recorded GPU's %s)\n",
            gm_format_size(t->context_bytes, b2, sizeof b2), gm_format_size(t->device_memory, b1, sizeof b1));
  else
    fprintf(f, "\n  (the smallest memory each fits in, by bisection over --capacity, 2 MiB steps; shares of\n"
               "  the device are of the recorded GPU's %s; nominal sizes: the CUDA context takes ~0.5 GiB)\n",
            gm_format_size(t->device_memory, b1, sizeof b1));
}

/* Why the shown points differ: at each one's reserved peak, what was in blocks handed out
 * (requests with their rounding) and what sat free in the cache. */
static void evidence(FILE *f, const gr_tune_t *t) {
  char b1[32], b2[32], b3[32];
  const int show[] = {t->dflt, t->best_grid, t->best, t->chosen};
  const char *name[] = {"default", "grid", "tuned", "chosen"};
  fprintf(f, "at each peak (reserved = in blocks handed out + free in the cache; live requests need at "
             "least %s):\n", gm_format_size(t->lower_bound, b1, sizeof b1));
  for (int i = 0; i < 4; i++) {
    int dup = show[i] < 0;
    for (int k = 0; k < i && !dup; k++) dup = show[k] == show[i];
    if (dup || !t->pts[show[i]].ok) continue;
    const gr_tune_point_t *p = &t->pts[show[i]];
    uint64_t in_blocks = (uint64_t)((1.0 - p->frag_at_peak) * (double)p->peak_reserved + 0.5);
    fprintf(f, "  %-8s %10s = %10s in blocks + %10s free in the cache (%.1f%%)\n", name[i],
            gm_format_size(p->peak_reserved, b1, sizeof b1), gm_format_size(in_blocks, b2, sizeof b2),
            gm_format_size(p->peak_reserved - in_blocks, b3, sizeof b3), 100.0 * p->frag_at_peak);
  }
}

void gr_tune_print(FILE *f, const gr_loaded_t *lt, const gr_tune_t *t) {
  char b1[32], b2[32], line[600];
  if (lt->info.coverage.partial) { /* first: every figure below is of part of the run */
    char cov[1024];
    fprintf(f, "%s\n", gmt_coverage_text(&lt->info.coverage, cov, sizeof cov));
  }
  fprintf(f, "tune: %s", lt->info.path);
  if (lt->info.frameworks_text[0]) fprintf(f, " (%s)", lt->info.frameworks_text);
  fprintf(f, ": %d settings in %" PRIu64 " replays, %.2f s; %s%s\n", t->n, t->replays, t->seconds,
          t->method ? t->method : "grid", t->no_limits ? "; no hard limits searched (--no-limits)" : "");
  if (t->searched[0]) fprintf(f, "%s\n", t->searched);
  fprintf(f, "lower bound (peak live requested): %s; recorded duration ", gm_format_size(t->lower_bound, b1, sizeof b1));
  print_ms(f, (double)t->duration_ns * 1e-9);
  fprintf(f, "; time budget ");
  print_ms(f, t->budget_s);
  fprintf(f, "\n");
  if (t->best < 0) {
    fprintf(f, "every %s setting tried ran out of memory within %s; the job needs at least %s\n", t->policy_name,
            gm_format_size(t->capacity ? t->capacity : t->device_memory, b1, sizeof b1),
            gm_format_size(t->lower_bound, b2, sizeof b2));
    return;
  }
  fprintf(f, "\nfront (peak reserved, vs default, (best..worst case) where it is a range, est. driver time p50 "
             "(..p99), driver calls):\n");
  for (int i = 0; i < t->n_front; i++) print_point(f, t, t->front[i]);
  fprintf(f, "\n");
  if (t->dflt >= 0) {
    fprintf(f, "default:");
    print_point(f, t, t->dflt);
  }
  if (t->best_grid >= 0) {
    fprintf(f, "grid:   ");
    print_point(f, t, t->best_grid);
  }
  fprintf(f, "tuned:  ");
  print_point(f, t, t->best);
  if (t->best_grid >= 0) {
    /* on the worst case, as they were chosen */
    const gr_tune_point_t *b = &t->pts[t->best], *g = &t->pts[t->best_grid];
    uint64_t wb = gr_tune_worst(b), wg = gr_tune_worst(g);
    int spread = wb != b->peak_reserved || wg != g->peak_reserved;
    if (wb < wg && wg != UINT64_MAX)
      fprintf(f, "  the search beats the best grid point by %s (%.1f%%)%s\n", gm_format_size(wg - wb, b1, sizeof b1),
              100.0 * (double)(wg - wb) / (double)wg, spread ? " in the worst case" : "");
    else if (wb < wg)
      fprintf(f, "  the search beats the best grid point, which runs out of memory under another timing or placement\n");
    else
      fprintf(f, "  the grid's best is already the smallest the search found\n");
  }
  if (t->chosen >= 0) {
    const gr_tune_point_t *z = &t->pts[t->chosen];
    paste_line(z->spec, line, sizeof line);
    fprintf(f, "chosen: ");
    print_point(f, t, t->chosen);
    fprintf(f, "  the smallest worst case whose estimated driver time is within the budget");
    if (t->chosen != t->best) {
      const gr_tune_point_t *b = &t->pts[t->best];
      uint64_t wz = gr_tune_worst(z), wb = gr_tune_worst(b);
      fprintf(f, ";\n  it gives up %s%s against the tuned point to save ",
              wz == UINT64_MAX ? "its worst case (out of memory)" : gm_format_size(wz - wb, b2, sizeof b2),
              wz != z->peak_reserved || wb != b->peak_reserved ? " in the worst case" : "");
      print_ms(f, b->time_mid_s - z->time_mid_s);
      fprintf(f, " of driver time");
    }
    fprintf(f, "\n");
    evidence(f, t);
    /* the default's line as gpuanalyze recommend writes it */
    if (t->keep_default) {
      const gr_tune_point_t *d = &t->pts[t->dflt];
      fprintf(f, "keep the default (%s): no setting is reliably smaller (the chosen point's worst case ", d->spec);
      if (z->worst_oom) fprintf(f, "runs out of memory");
      else fprintf(f, "%s", gm_format_size(z->worst_bytes, b1, sizeof b1));
      fprintf(f, " is not below the default's best case %s by more than %s, the larger of 64 MiB and 1 %%)\n",
              gm_format_size(d->best_bytes, b2, sizeof b2), gm_format_size(gm_advice_floor(d->peak_reserved), line, sizeof line));
      fprintf(f, "paste: nothing (the default)\n");
    } else if (strcmp(z->spec, "pytorch") == 0) fprintf(f, "paste: unset PYTORCH_CUDA_ALLOC_CONF   # PyTorch's default caching allocator\n");
    else fprintf(f, "paste: %s\n", line);
    const char *fr = t->keep_default ? NULL : strstr(z->spec, "per_process_memory_fraction:");
    const char *xf = t->keep_default ? NULL : strstr(z->spec, "MEM_FRACTION=");
    double share = fr ? atof(fr + 28) : xf ? atof(xf + 13) : 0.0;
    if (share > 0.0)
      fprintf(f, "  (the fraction is a share of this GPU's %s: %s; scale it for another GPU. It is a hard\n"
                 "  limit found at the edge for this recording: a run that needs more fails; leave headroom)\n",
              gm_format_size(t->device_memory, b1, sizeof b1),
              gm_format_size((uint64_t)(share * (double)t->device_memory), b2, sizeof b2));
  }
  capacity_sentence(f, t, lt->info.coverage.partial);
}
