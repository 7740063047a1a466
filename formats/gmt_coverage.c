/* gmt_coverage.c: whether a trace covers the whole run, and what every tool says when it does not.
 *
 * A producer that knows its trace starts late (PyTorch's history ring filled, a recording begun
 * after the run allocated) marks the header with `coverage*` kv pairs (SPEC.md §3.4); losses a
 * reader finds on its own (records the source dropped, sequence gaps, truncation, damaged
 * chunks) come from the reader's stats. gmt_coverage folds both into one verdict, and
 * gmt_coverage_text is the one line every tool prints first, so no output says "complete" or
 * "fits" for a trace that saw only the tail of the run. Older traces carry no marks: they read as
 * complete unless their stats, `torch_history.cupti_truncated` or a snapshot import's
 * `torch.snapshot.synthetic_initial_events` say otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "formats/gmt_internal.h"

static const struct {
  unsigned bit;
  const char *token;
} kWhy[] = {
    {GMT_COV_HISTORY_RING, "history_ring"}, {GMT_COV_LATE_START, "late_start"},
    {GMT_COV_DROPPED, "dropped"},           {GMT_COV_CUPTI_LOST, "cupti_lost"},
    {GMT_COV_TRUNCATED, "truncated"},       {GMT_COV_DAMAGED, "damaged"},
    {GMT_COV_KILLED, "killed"},             {GMT_COV_STOPPED, "stopped"},
};
#define NWHY (sizeof kWhy / sizeof kWhy[0])

static gm_status_t kv_u64(gmt_header_t *h, const char *k, uint64_t v, gm_err_t *err) {
  char b[32];
  snprintf(b, sizeof b, "%" PRIu64, v);
  return gmt_header_kv_set(h, k, b, err);
}

gm_status_t gmt_coverage_mark(gmt_header_t *h, const gmt_coverage_t *c, gm_err_t *err) {
  gm_status_t s = gmt_header_kv_set(h, "coverage", c->partial ? "partial" : "complete", err);
  if (s || !c->partial) return s;
  char why[128] = "";
  for (size_t i = 0; i < NWHY; i++) {
    if (!(c->why & kWhy[i].bit)) continue;
    size_t l = strlen(why);
    snprintf(why + l, sizeof why - l, "%s%s", l ? " " : "", kWhy[i].token);
  }
  if ((s = gmt_header_kv_set(h, "coverage.why", why, err))) return s;
  if (c->has_window && ((s = kv_u64(h, "coverage.from_ns", c->from_ns, err)) ||
                        (s = kv_u64(h, "coverage.from_event", c->from_event, err))))
    return s;
  if ((s = kv_u64(h, "coverage.alive_bytes", c->alive_bytes, err)) ||
      (s = kv_u64(h, "coverage.alive_count", c->alive_count, err)) ||
      (s = kv_u64(h, "coverage.reserved_bytes", c->reserved_bytes, err)))
    return s;
  if (c->history_entries && (s = kv_u64(h, "coverage.history_entries", c->history_entries, err))) return s;
  if (c->max_entries && (s = kv_u64(h, "coverage.max_entries", c->max_entries, err))) return s;
  if (c->has_end && ((s = kv_u64(h, "coverage.to_ns", c->to_ns, err)) ||
                     (s = kv_u64(h, "coverage.to_event", c->to_event, err))))
    return s;
  if (c->signal && (s = kv_u64(h, "coverage.signal", (uint64_t)c->signal, err))) return s;
  if (c->has_killed_at && (s = kv_u64(h, "coverage.killed_ns", c->killed_ns, err))) return s;
  if (c->flush_ns && (s = kv_u64(h, "coverage.flush_ns", c->flush_ns, err))) return s;
  if (c->unseen_frees && (s = kv_u64(h, "coverage.unseen_frees", c->unseen_frees, err))) return s;
  if (c->stopped[0] && (s = gmt_header_kv_set(h, "coverage.stopped", c->stopped, err))) return s;
  return GM_OK;
}

void gmt_coverage_fold(gmt_coverage_t *c, const gmt_coverage_t *add) {
  c->partial |= add->partial;
  c->why |= add->why;
  if (add->has_window) {
    c->has_window = 1;
    c->from_ns = add->from_ns;
    c->from_event = add->from_event;
  }
#define TAKE(f) if (add->f) c->f = add->f
  TAKE(alive_bytes); TAKE(alive_count); TAKE(reserved_bytes); TAKE(history_entries); TAKE(max_entries);
  TAKE(signal); TAKE(flush_ns); TAKE(unseen_frees);
#undef TAKE
  if (add->has_end) {
    c->has_end = 1;
    c->to_ns = add->to_ns;
    c->to_event = add->to_event;
  }
  if (add->has_killed_at) {
    c->has_killed_at = 1;
    c->killed_ns = add->killed_ns;
  }
  if (add->stopped[0]) snprintf(c->stopped, sizeof c->stopped, "%s", add->stopped);
}

/* A decimal kv value; 0 if absent or not a number. */
static uint64_t kv_num(const gmt_header_t *h, const char *k, int *present) {
  const char *v = gmt_header_kv_get(h, k);
  char *end = NULL;
  if (present) *present = 0;
  if (!v || !*v) return 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (*end) return 0;
  if (present) *present = 1;
  return (uint64_t)x;
}

static unsigned why_bits(const char *v) {
  unsigned bits = 0;
  while (v && *v) {
    while (*v == ' ' || *v == ',') v++;
    size_t l = strcspn(v, " ,");
    for (size_t i = 0; i < NWHY; i++)
      if (l && strlen(kWhy[i].token) == l && strncmp(v, kWhy[i].token, l) == 0) bits |= kWhy[i].bit;
    v += l;
  }
  return bits;
}

void gmt_coverage(const gmt_header_t *h, const gmt_reader_stats_t *st, gmt_coverage_t *out) {
  memset(out, 0, sizeof *out);
  const char *mark = h ? gmt_header_kv_get(h, "coverage") : NULL;
  if (mark && strcmp(mark, "partial") == 0) {
    out->partial = 1;
    out->why = why_bits(gmt_header_kv_get(h, "coverage.why"));
    int a = 0, b = 0;
    out->from_ns = kv_num(h, "coverage.from_ns", &a);
    out->from_event = kv_num(h, "coverage.from_event", &b);
    out->has_window = a && b;
    out->alive_bytes = kv_num(h, "coverage.alive_bytes", NULL);
    out->alive_count = kv_num(h, "coverage.alive_count", NULL);
    out->reserved_bytes = kv_num(h, "coverage.reserved_bytes", NULL);
    out->history_entries = kv_num(h, "coverage.history_entries", NULL);
    out->max_entries = kv_num(h, "coverage.max_entries", NULL);
    int c = 0, d = 0, k = 0;
    out->to_ns = kv_num(h, "coverage.to_ns", &c);
    out->to_event = kv_num(h, "coverage.to_event", &d);
    out->has_end = c && d;
    out->signal = (int)kv_num(h, "coverage.signal", NULL);
    out->killed_ns = kv_num(h, "coverage.killed_ns", &k);
    out->has_killed_at = k;
    out->flush_ns = kv_num(h, "coverage.flush_ns", NULL);
    out->unseen_frees = kv_num(h, "coverage.unseen_frees", NULL);
    const char *why = gmt_header_kv_get(h, "coverage.stopped");
    if (why) snprintf(out->stopped, sizeof out->stopped, "%s", why);
  } else if (h && !mark) { /* an older trace: what its producer left in other words */
    uint64_t synth = kv_num(h, "torch.snapshot.synthetic_initial_events", NULL);
    if (synth) out->why |= GMT_COV_LATE_START;
  }
  if (h) { /* a merge of a trace its process did not finish, whatever the merge marked */
    const char *ct = gmt_header_kv_get(h, "torch_history.cupti_truncated");
    if (ct && strcmp(ct, "1") == 0) out->why |= GMT_COV_CUPTI_LOST;
  }
  if (st) {
    out->dropped = st->dropped;
    out->seq_gaps = st->seq_gaps;
    out->damaged_chunks = st->damaged_chunks;
    if (st->dropped || st->seq_gaps) out->why |= GMT_COV_DROPPED;
    if (st->truncated) out->why |= GMT_COV_TRUNCATED;
    if (st->damaged_chunks) out->why |= GMT_COV_DAMAGED;
  }
  if (out->why) out->partial = 1;
}

/* "SIGKILL", or "signal N" (POSIX numbers are not fixed, so the table is this system's). */
static const char *sig_name(int sig, char *b, size_t n) {
  static const struct {
    int sig;
    const char *name;
  } k[] = {{SIGKILL, "SIGKILL"}, {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"},   {SIGABRT, "SIGABRT"},
           {SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"},   {SIGHUP, "SIGHUP"},   {SIGQUIT, "SIGQUIT"},
           {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGILL, "SIGILL"},   {SIGFPE, "SIGFPE"},
           {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGUSR1, "SIGUSR1"}, {SIGUSR2, "SIGUSR2"}};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
    if (k[i].sig == sig) return k[i].name;
  snprintf(b, n, "signal %d", sig);
  return b;
}

static void add(char *buf, size_t n, const char *fmt, const char *a, const char *b) {
  size_t l = strlen(buf);
  if (l + 1 >= n) return;
  snprintf(buf + l, n - l, "%s", l ? "; " : "");
  l = strlen(buf);
  if (l + 1 < n) snprintf(buf + l, n - l, fmt, a, b);
}

char *gmt_coverage_why_text(const gmt_coverage_t *c, char *buf, size_t n) {
  char x[64], y[64];
  if (!n) return buf;
  buf[0] = '\0';
  if (c->why & GMT_COV_HISTORY_RING) {
    snprintf(x, sizeof x, "%" PRIu64, c->history_entries);
    snprintf(y, sizeof y, "%" PRIu64, c->max_entries);
    if (c->history_entries && c->max_entries)
      add(buf, n, "PyTorch's history ring filled (%s entries of max_entries %s): it keeps only the newest", x, y);
    else
      add(buf, n, "PyTorch's history ring filled (max_entries): it keeps only the newest entries%s%s", "", "");
  } else if ((c->why & GMT_COV_LATE_START) && c->unseen_frees && !c->history_entries) {
    snprintf(x, sizeof x, "%" PRIu64, c->unseen_frees);
    add(buf, n, "the recording began after the process had allocated: %s free%s of addresses it never saw "
                "allocated", x, c->unseen_frees == 1 ? "" : "s");
  } else if (c->why & GMT_COV_LATE_START) {
    add(buf, n, "PyTorch's history starts after the run did: memory was alive before its first entry, "
                "so its ring of max_entries filled or recording began late%s%s", "", "");
  }
  if (c->why & GMT_COV_DROPPED) {
    snprintf(x, sizeof x, "%" PRIu64, c->dropped);
    snprintf(y, sizeof y, "%" PRIu64, c->seq_gaps);
    if (c->seq_gaps && c->dropped) add(buf, n, "the source dropped %s records and %s chunks are missing", x, y);
    else if (c->seq_gaps) add(buf, n, "%s%s chunks are missing (sequence gaps)", "", y);
    else add(buf, n, "the source dropped %s records%s", x, "");
  }
  if ((c->why & GMT_COV_CUPTI_LOST) && !(c->why & (GMT_COV_KILLED | GMT_COV_STOPPED))) /* they say why */
    add(buf, n, "CUPTI's records were lost (its trace ended early or buffers were dropped)%s%s", "", "");
  if ((c->why & GMT_COV_TRUNCATED) && !(c->why & (GMT_COV_KILLED | GMT_COV_STOPPED))) /* they say why */
    add(buf, n, "the file ends before its index (the recording was cut: what came after is missing)%s%s", "", "");
  if (c->why & GMT_COV_KILLED) {
    char t[320], at[48] = "", lost[48] = "its last flush interval (0.5 s by default)";
    if (c->has_killed_at) snprintf(at, sizeof at, " at t=%.3f s", (double)c->killed_ns / 1e9);
    if (c->flush_ns) snprintf(lost, sizeof lost, "its last <= %.1f s", (double)c->flush_ns / 1e9);
    if (c->signal)
      snprintf(t, sizeof t, "the process was killed by %s%s before it finished its trace: requests it made in "
                            "%s before it died may be missing", sig_name(c->signal, x, sizeof x), at, lost);
    else
      snprintf(t, sizeof t, "the process ended without finishing its trace (killed by a signal it cannot handle, "
                            "such as SIGKILL, or left through _exit)%s: requests it made in %s before it ended may be missing", at, lost);
    add(buf, n, "%s%s", t, "");
  }
  if (c->why & GMT_COV_STOPPED)
    add(buf, n, "the recorder stopped before the run ended (%s): what the run did after that is missing%s",
        c->stopped[0] ? c->stopped : "reason not recorded", "");
  if (c->why & GMT_COV_DAMAGED) {
    snprintf(x, sizeof x, "%" PRIu64, c->damaged_chunks);
    add(buf, n, "%s damaged chunks skipped%s", x, "");
  }
  return buf;
}

char *gmt_coverage_text(const gmt_coverage_t *c, char *buf, size_t n) {
  if (!n) return buf;
  buf[0] = '\0';
  if (!c->partial) return buf;
  char why[512], a[32], r[32];
  gmt_coverage_why_text(c, why, sizeof why);
  size_t l = 0;
  if ((c->why & GMT_COV_LATE_START) && !(c->why & GMT_COV_HISTORY_RING) && c->unseen_frees && !c->has_window) {
    /* a recorder's late start: what was alive before it is not known, only that some was */
    l = (size_t)snprintf(buf, n, "PARTIAL trace: the recording began after the run had allocated; what was alive "
                                 "then and a peak before it cannot be seen, so every figure is a lower bound");
  } else if (c->why & (GMT_COV_HISTORY_RING | GMT_COV_LATE_START)) {
    if (c->has_window)
      l = (size_t)snprintf(buf, n, "PARTIAL trace: it covers the run from t=%.3f s (event %" PRIu64 ") on; ",
                           (double)c->from_ns / 1e9, c->from_event);
    else
      l = (size_t)snprintf(buf, n, "PARTIAL trace: it covers only the end of the run; ");
    if (l < n && !c->alive_count && !c->reserved_bytes)
      l += (size_t)snprintf(buf + l, n - l, "nothing it shows was alive at its start; a peak before it cannot be "
                                            "seen, so every figure is a lower bound");
    else if (l < n)
      l += (size_t)snprintf(buf + l, n - l, "alive at its start: %s in %" PRIu64 " request%s (reserved %s); "
                            "a peak before it cannot be seen, so every figure is a lower bound",
                            gm_format_size(c->alive_bytes, a, sizeof a), c->alive_count, c->alive_count == 1 ? "" : "s",
                            gm_format_size(c->reserved_bytes, r, sizeof r));
  } else if ((c->why & (GMT_COV_KILLED | GMT_COV_STOPPED)) && c->has_end) {
    l = (size_t)snprintf(buf, n, "PARTIAL trace: it stops at t=%.3f s, after %" PRIu64 " event%s; what came after "
                                 "is missing, so a peak after it cannot be seen and every figure is a lower bound",
                         (double)c->to_ns / 1e9, c->to_event, c->to_event == 1 ? "" : "s");
  } else {
    l = (size_t)snprintf(buf, n, "PARTIAL trace: events of the run are missing; a peak among them cannot be seen, "
                                 "so every figure is a lower bound");
  }
  if (l < n) snprintf(buf + l, n - l, " (why: %s)", why);
  return buf;
}

int gmt_trace_unmerged(const char *path) {
  gmt_reader_t *r = NULL;
  if (gmt_reader_open_flags(&r, path, GMT_READ_SALVAGE, NULL) != GM_OK) return 0;
  const gmt_header_t *h = gmt_reader_header(r);
  int found = 0;
  if (h->capture_mode != GMT_CAPTURE_TORCH_HISTORY && gmt_header_kv_get(h, "gpurec_mode")) {
    gmt_event_t buf[512];
    size_t n = 0;
    while (!found && gmt_reader_next_batch(r, buf, sizeof buf / sizeof buf[0], &n, NULL) == GM_OK)
      for (size_t i = 0; i < n && !found; i++) found = (buf[i].flags & GMT_F_TORCH_STREAM) != 0;
  }
  gmt_reader_close(r);
  return found;
}

/* ---- marks on a written trace: the header rewritten in place (gmt_header_edit.c) ------------- */

static gm_status_t mark_edit(gmt_header_t *h, void *ctx, gm_err_t *err) {
  gmt_coverage_t c;
  gmt_coverage(h, NULL, &c);
  gmt_coverage_fold(&c, ctx);
  return gmt_coverage_mark(h, &c, err);
}

gm_status_t gmt_trace_mark(const char *path, const gmt_coverage_t *add, gm_err_t *err) {
  return gmt_trace_edit_header(path, mark_edit, (void *)add, "the coverage marks", err);
}
