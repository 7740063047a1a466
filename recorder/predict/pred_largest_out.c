/* pred_largest_out.c: the answer of `gpurec predict --fit` printed: per setting the largest
 * value that fits (or none, or a lower bound where the prediction refused), and the curve of
 * peak reserved against the value with the recordings as points; as text, CSV or JSON
 * (--format). The search that fills it is pred_largest.c. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recorder/predict/pred_largest_internal.h"

static const point_t *find_point(const search_t *s, long k) {
  for (int i = 0; i < s->n_pts; i++)
    if (s->pts[i].k == k) return &s->pts[i];
  return NULL;
}

static void vtext(const search_t *s, long k, char *b, size_t n) { snprintf(b, n, "%.15g", value_of(s, k)); }

/* Why setting i was refused at point r: the prediction's own reason, or, where only this
 * setting was (the per-setting check), the range its uncertain sizes span. */
static const char *refusal_reason(const point_t *r, int i, char *buf, size_t n) {
  if (r->refused || !r->set_refused[i]) return r->reason;
  char b1[32], b2[32];
  snprintf(buf, n, "%s; replayed with those sizes at both ends of their plausible range, this setting's peak reserved "
                   "spans %s..%s, and the ends disagree on whether it fits", r->reason,
           gm_format_size(r->lo[i], b1, sizeof b1), gm_format_size(r->hi[i], b2, sizeof b2));
  return buf;
}

void pred_largest_print_text(const search_t *s, const answer_t *ans, uint64_t device, uint64_t largest_rec_k) {
  const pred_largest_cfg_t *c = s->cfg;
  char b1[32], b2[32], b3[32], v[64];
  printf("fit on a device of %s: %s kept for memory outside the framework (--other), %.2f %% margin for the "
         "prediction's error (--margin): a setting fits at a %s when its replay completes within %s (short of "
         "memory, an allocator frees its cache and retries: its unconstrained peak may be above that)\n",
         gm_format_size(device, b1, sizeof b1), gm_format_size(c->other, b2, sizeof b2), 100 * c->margin, c->name,
         gm_format_size(s->capacity, b3, sizeof b3));
  printf("\nlargest %s that fits, per setting:\n", c->name);
  printf("%3s  %10s  %13s  %-44s  %s\n", "#", "largest", "peak there", "the next", "setting");
  for (int i = 0; i < s->n_specs; i++) {
    const answer_t *a = &ans[i];
    char largest[64] = "none", peak[32] = "-", next[GM_ERR_MSG_MAX + 128] = "";
    const point_t *lo = a->lo ? find_point(s, a->lo) : NULL, *hi = a->hi ? find_point(s, a->hi) : NULL;
    if (lo) {
      vtext(s, a->lo, largest, sizeof largest);
      gm_format_size(lo->capped[i], peak, sizeof peak); /* what it holds on the device */
    }
    if (a->state == ANS_AT_LEAST) {
      snprintf(next, sizeof next, "not tried (--max)");
    } else if (a->state == ANS_REFUSED) {
      const point_t *r = &s->pts[a->refused_at];
      vtext(s, r->k, v, sizeof v);
      snprintf(next, sizeof next, "%s: the prediction refused", v);
      if (lo) {
        memmove(largest + 3, largest, strlen(largest) + 1);
        memcpy(largest, ">= ", 3);
      } else snprintf(largest, sizeof largest, "refused");
    } else if (hi) {
      vtext(s, a->hi, v, sizeof v);
      snprintf(next, sizeof next, "%s does not fit (%s unconstrained)", v, gm_format_size(hi->peak[i], b1, sizeof b1));
    }
    printf("%3d  %10s  %13s  %-44s  %s\n", i + 1, largest, peak, next, s->specs[i]);
  }
  /* A setting that fits only by freeing its cache: its unconstrained peak is above the
   * capacity, and within it the allocator empties its cache and retries (PyTorch does the
   * same under a cap, each time a device-wide synchronisation): it fits, slower. */
  for (int i = 0; i < s->n_specs; i++) {
    const point_t *lo = ans[i].lo ? find_point(s, ans[i].lo) : NULL;
    if (lo && lo->peak[i] > s->capacity) {
      char flushes[96] = "";
      vtext(s, ans[i].lo, v, sizeof v);
      if (lo->retries[i])
        snprintf(flushes, sizeof flushes, ", emptying it whole %llu time%s", (unsigned long long)lo->retries[i],
                 lo->retries[i] == 1 ? "" : "s");
      printf("#%d fits at %s only by freeing cached blocks%s: unconstrained it would hold %s, above the %s it may use; "
             "within that it holds %s (the real allocator does the same under a cap, each time a device "
             "synchronisation)\n",
             i + 1, v, flushes, gm_format_size(lo->peak[i], b1, sizeof b1), gm_format_size(s->capacity, b2, sizeof b2),
             gm_format_size(lo->capped[i], b3, sizeof b3));
    }
  }
  for (int i = 0; i < s->n_specs; i++)
    if (ans[i].state == ANS_REFUSED) {
      char why[2 * GM_ERR_MSG_MAX];
      printf("refused at %.15g for #%d: %s\nto answer: %s\n", value_of(s, s->pts[ans[i].refused_at].k), i + 1,
             refusal_reason(&s->pts[ans[i].refused_at], i, why, sizeof why), s->pts[ans[i].refused_at].advice);
    }
  long best = 0;
  for (int i = 0; i < s->n_specs; i++)
    if (ans[i].lo > best && ans[i].state != ANS_REFUSED) best = ans[i].lo;
  if (best && largest_rec_k)
    printf("(the largest answer is %.1fx the largest recording: the nearer the recordings, the surer the answer)\n",
           (double)best / (double)largest_rec_k);
  printf("\npeak reserved by %s, per setting # (unconstrained; recorded: the recording replayed; *: does not fit; ~: fits "
         "by freeing its cache; ?: the uncertain sizes' ends disagree):\n", c->name);
  printf("%10s  %-10s  %10s", c->name, "source", "confidence");
  for (int i = 0; i < s->n_specs; i++) printf("  %11d", i + 1);
  printf("\n");
  for (int j = 0; j < s->n_pts; j++) {
    const point_t *p = &s->pts[j];
    vtext(s, p->k, v, sizeof v);
    printf("%10s  %-10s  %9.1f%%", v, p->recorded ? "recorded" : p->refused ? "refused" : "predicted", 100 * p->confidence);
    for (int i = 0; i < s->n_specs; i++) {
      char cell[48];
      if (p->refused) snprintf(cell, sizeof cell, "-");
      else snprintf(cell, sizeof cell, "%s%s%s", p->set_refused[i] ? "?" : p->fits[i] ? "" : "*",
                    p->peak[i] > s->capacity && p->fits[i] ? "~" : "", gm_format_size(p->peak[i], b1, sizeof b1));
      printf("  %11s", cell);
    }
    printf("\n");
  }
}

void pred_largest_print_csv(const search_t *s, const answer_t *ans) {
  printf("setting,value,source,confidence,peak_reserved_bytes,fits,answer\n");
  for (int i = 0; i < s->n_specs; i++)
    for (int j = 0; j < s->n_pts; j++) {
      const point_t *p = &s->pts[j];
      const char *answer = ans[i].lo == p->k && ans[i].state != ANS_REFUSED ? (ans[i].state == ANS_AT_LEAST ? "at_least" : "largest")
                           : ans[i].state == ANS_REFUSED && ans[i].refused_at == j ? "refused"
                                                                                  : "";
      /* a spec holds commas (pytorch:a:1,b:2): quoted */
      printf("\"%s\",%.15g,%s,%.4f,", s->specs[i], value_of(s, p->k),
             p->recorded ? "recorded" : p->refused ? "refused" : "predicted", p->confidence);
      if (p->refused) printf(",,%s\n", answer);
      else printf("%llu,%d,%s\n", (unsigned long long)p->peak[i], p->fits[i], answer);
    }
}

static const char *state_name(ans_state_t st) {
  static const char *const names[] = {"fits", "none", "refused", "at_least"};
  return names[st];
}

/* A JSON string (RFC 8259 escapes; bytes >= 0x80 pass as they are: the inputs are UTF-8). */
static void jstr(const char *s) {
  putchar('"');
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\') printf("\\%c", *c);
    else if (*c == '\n') fputs("\\n", stdout);
    else if (*c < 0x20) printf("\\u%04x", *c);
    else putchar(*c);
  }
  putchar('"');
}

/* One object: the inputs, the answer per setting, the curve (every point, every setting). */
void pred_largest_print_json(const search_t *s, const answer_t *ans, uint64_t device) {
  const pred_largest_cfg_t *c = s->cfg;
  printf("{\"name\": ");
  jstr(c->name);
  printf(", \"device_bytes\": %llu, \"other_bytes\": %llu, \"margin\": %.6g, \"capacity_bytes\": %llu, \"step\": %.15g,\n",
         (unsigned long long)device, (unsigned long long)c->other, c->margin, (unsigned long long)s->capacity, c->step);
  printf(" \"inputs\": [");
  for (size_t j = 0; j < s->n_in; j++) {
    printf("%s{\"path\": ", j ? ", " : "");
    jstr(s->in[j].path);
    printf(", \"value\": %.15g}", s->in[j].value);
  }
  printf("],\n \"settings\": [\n");
  for (int i = 0; i < s->n_specs; i++) {
    const answer_t *a = &ans[i];
    const point_t *lo = a->lo ? find_point(s, a->lo) : NULL;
    printf("  {\"policy\": ");
    jstr(s->specs[i]);
    printf(", \"state\": \"%s\", \"largest\": ", state_name(a->state));
    if (lo)
      printf("%.15g, \"peak_reserved_at_largest\": %llu, \"peak_reserved_within_capacity_at_largest\": %llu, "
             "\"cache_flushes_at_largest\": %llu", value_of(s, a->lo), (unsigned long long)lo->peak[i],
             (unsigned long long)lo->capped[i], (unsigned long long)lo->retries[i]);
    else printf("null, \"peak_reserved_at_largest\": null");
    if (a->hi) printf(", \"first_not_fitting\": %.15g", value_of(s, a->hi));
    else printf(", \"first_not_fitting\": null");
    if (a->state == ANS_REFUSED) {
      const point_t *r = &s->pts[a->refused_at];
      char why[2 * GM_ERR_MSG_MAX];
      printf(", \"refused_at\": %.15g, \"reason\": ", value_of(s, r->k));
      jstr(refusal_reason(r, i, why, sizeof why));
      printf(", \"advice\": ");
      jstr(r->advice);
    }
    printf("}%s\n", i + 1 < s->n_specs ? "," : "");
  }
  printf(" ],\n \"points\": [\n");
  for (int j = 0; j < s->n_pts; j++) {
    const point_t *p = &s->pts[j];
    printf("  {\"value\": %.15g, \"source\": \"%s\", \"confidence\": %.4f", value_of(s, p->k),
           p->recorded ? "recorded" : p->refused ? "refused" : "predicted", p->confidence);
    if (!p->refused) {
      printf(", \"peak_reserved_bytes\": {");
      for (int i = 0; i < s->n_specs; i++) {
        printf("%s", i ? ", " : "");
        jstr(s->specs[i]);
        printf(": %llu", (unsigned long long)p->peak[i]);
      }
      printf("}, \"fits\": {");
      for (int i = 0; i < s->n_specs; i++) {
        printf("%s", i ? ", " : "");
        jstr(s->specs[i]);
        printf(": %s", p->fits[i] ? "true" : "false");
      }
      printf("}");
      if (p->checked) { /* the uncertain sizes' range, per setting; refused where its ends disagree */
        printf(", \"checked\": {");
        for (int i = 0; i < s->n_specs; i++) {
          printf("%s", i ? ", " : "");
          jstr(s->specs[i]);
          printf(": {\"low\": %llu, \"high\": %llu, \"refused\": %s}", (unsigned long long)p->lo[i],
                 (unsigned long long)p->hi[i], p->set_refused[i] ? "true" : "false");
        }
        printf("}");
      }
    }
    printf("}%s\n", j + 1 < s->n_pts ? "," : "");
  }
  printf(" ]}\n");
}
