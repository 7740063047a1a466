/* pred_check.c: are the inputs recordings of one job on one device under one setting, with
 * the same structure? Two kinds of answer: an error (different jobs, settings, devices,
 * capture modes; a run that ran out of memory: no prediction could mean anything) and a
 * refusal (same job, but its structure differs between the values: different steps or
 * streams; a prediction is possible only from other recordings). */
#include <stdio.h>
#include <string.h>

#include "recorder/predict/pred_check.h"

/* Header keys that are the job's allocator settings: they must be equal in every input. */
static const char *const k_setting_prefixes[] = {"PYTORCH_", "torch.allocator_settings.", "torch.alloc_conf",
                                                 "XLA_", "TF_", "framework.", NULL};

static int is_setting(const char *key) {
  for (size_t i = 0; k_setting_prefixes[i]; i++)
    if (strncmp(key, k_setting_prefixes[i], strlen(k_setting_prefixes[i])) == 0) return 1;
  return 0;
}

static const char *kv_or_empty(const gmt_header_t *h, const char *key) {
  const char *v = gmt_header_kv_get(h, key);
  return v ? v : "";
}

gm_status_t pred_check_same_job(const pred_rec_t *r, size_t n, char *warn, size_t wn, gm_err_t *err) {
  const pred_rec_t *a = &r[0];
  char an[64], bn[64];
  for (size_t j = 1; j < n; j++) {
    const pred_rec_t *b = &r[j];
    const gmt_header_t *ha = &a->header, *hb = &b->header;
    snprintf(an, sizeof an, "%s", a->path ? a->path : "input 1");
    snprintf(bn, sizeof bn, "%s", b->path ? b->path : "input 2");
    if (ha->capture_mode != hb->capture_mode)
      return gm_err_set(err, GM_ERR_INVAL, "'%s' was recorded in mode %s and '%s' in mode %s: record every input the same way",
                        an, gmt_capture_mode_name(ha->capture_mode), bn, gmt_capture_mode_name(hb->capture_mode));
    if (ha->gpu_name && hb->gpu_name && *ha->gpu_name && *hb->gpu_name && strcmp(ha->gpu_name, hb->gpu_name) != 0)
      return gm_err_set(err, GM_ERR_INVAL, "different devices: '%s' ran on %s, '%s' on %s: record every input on one kind of GPU",
                        an, ha->gpu_name, bn, hb->gpu_name);
    if (ha->gpu_total_mem && hb->gpu_total_mem && ha->gpu_total_mem != hb->gpu_total_mem)
      return gm_err_set(err, GM_ERR_INVAL,
                        "different devices: '%s' ran on a GPU of %llu bytes, '%s' on one of %llu: record every input on one kind of GPU",
                        an, (unsigned long long)ha->gpu_total_mem, bn, (unsigned long long)hb->gpu_total_mem);
    if (ha->world_size != hb->world_size || ha->rank != hb->rank)
      return gm_err_set(err, GM_ERR_INVAL, "'%s' is rank %d of %d, '%s' rank %d of %d: predict one rank from that rank's recordings",
                        an, ha->rank, ha->world_size, bn, hb->rank, hb->world_size);
    /* settings: every key either has, compared both ways */
    for (int side = 0; side < 2; side++) {
      const gmt_header_t *x = side ? hb : ha, *y = side ? ha : hb;
      for (size_t k = 0; k < x->n_kv; k++) {
        if (!is_setting(x->kv[k].key)) continue;
        const char *vx = x->kv[k].value ? x->kv[k].value : "", *vy = kv_or_empty(y, x->kv[k].key);
        if (strcmp(vx, vy) != 0)
          return gm_err_set(err, GM_ERR_INVAL, "different settings: %s is '%s' in '%s' and '%s' in '%s': record every input under one setting "
                            "(gpureplay then tries the others)",
                            x->kv[k].key, side ? vy : vx, an, side ? vx : vy, bn);
      }
    }
    if (ha->command_line && hb->command_line && *ha->command_line && *hb->command_line) {
      gm_status_t st = pred_job_compare(an, ha->command_line, a->value, bn, hb->command_line, b->value, warn, wn, err);
      if (st < 0) return st;
    }
  }
  for (size_t j = 0; j < n; j++) {
    pred_value_text(r[j].value, an, sizeof an);
    if (r[j].failed)
      return gm_err_set(err, GM_ERR_INVAL,
                        "'%s' (at %s) ran out of memory (%llu failed request%s): what it allocated afterwards is not the "
                        "job's; record it at a value that fits",
                        r[j].path ? r[j].path : "input", an, (unsigned long long)r[j].failed, r[j].failed == 1 ? "" : "s");
    if (!r[j].n_alloc)
      return gm_err_set(err, GM_ERR_INVAL, "'%s' holds no allocation requests%s", r[j].path ? r[j].path : "input",
                        r[j].skipped ? " (only the allocator's segments: record with gpurec's default mode or "
                                       "--mode=torch)" : "");
  }
  return GM_OK;
}

/* "12 markers (10 'step', 2 'eval')" for the first marker names. */
static void describe_marks(const pred_rec_t *r, const pred_strings_t *strs, char *buf, size_t n) {
  uint32_t ids[4];
  size_t cnt[4], k = 0;
  for (size_t i = 0; i < r->n_mark; i++) {
    size_t j = 0;
    while (j < k && ids[j] != r->mark_name[i]) j++;
    if (j == k && k < 4) {
      ids[k] = r->mark_name[i];
      cnt[k++] = 0;
    }
    if (j < k) cnt[j]++;
  }
  size_t o = (size_t)snprintf(buf, n, "%zu marker%s", r->n_mark, r->n_mark == 1 ? "" : "s");
  for (size_t j = 0; j < k && o < n; j++) {
    const char *s = pred_strings_get(strs, ids[j]);
    o += (size_t)snprintf(buf + o, n - o, "%s%zu '%.40s'", j ? ", " : " (", cnt[j], s ? s : "?");
  }
  if (k && o < n) snprintf(buf + o, n - o, ")");
}

int pred_check_structure(const pred_rec_t *r, size_t n, const pred_strings_t *strs, char *reason, size_t rn) {
  char da[256], db[256], va[64], vb[64];
  for (size_t j = 1; j < n; j++) {
    const pred_rec_t *a = &r[0], *b = &r[j];
    pred_value_text(a->value, va, sizeof va);
    pred_value_text(b->value, vb, sizeof vb);
    int same = a->n_mark == b->n_mark &&
               (a->n_mark == 0 || memcmp(a->mark_name, b->mark_name, a->n_mark * sizeof *a->mark_name) == 0);
    if (!same) {
      describe_marks(a, strs, da, sizeof da);
      describe_marks(b, strs, db, sizeof db);
      snprintf(reason, rn, "the recordings have different steps: at %s the job made %s, at %s %s", va, da, vb, db);
      return 1;
    }
    if (a->n_streams != b->n_streams) {
      snprintf(reason, rn, "the recordings allocate on different numbers of streams: %zu at %s, %zu at %s", a->n_streams, va,
               b->n_streams, vb);
      return 1;
    }
  }
  return 0;
}
