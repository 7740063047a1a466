/* ana_gpureplay.c: reading what gpureplay says to the analyzer.
 *
 * The analyzer does not link the replayer (DESIGN.md): every replay it shows is the gpureplay
 * binary's, run as a child process (base's gm_tool_capture); here is what reads its answers:
 * the setting a trace ran with, the peak of a run's line of JSON. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/ana.h"
#include "analyze/ana_gpureplay.h"

gm_status_t ana_trace_ran_with(const char *path, unsigned read_flags, char *spec, size_t n, gm_err_t *err) {
  gmt_reader_t *rd = NULL;
  if (gmt_reader_open_flags(&rd, path, read_flags, err) != GM_OK) return gm_err_wrap(err, "cannot open '%s'", path);
  const gmt_header_t *h = gmt_reader_header(rd);
  /* A PyTorch memory history records the user's own PYTORCH_CUDA_ALLOC_CONF (a requests-mode
   * trace records the one gpurec set: backend:cudaMallocAsync). */
  const char *v = h->capture_mode == GMT_CAPTURE_TORCH ? gmt_header_kv_get(h, "PYTORCH_CUDA_ALLOC_CONF") : NULL;
  int w = -1;
  if (v && *v && !strstr(v, "backend:")) w = snprintf(spec, n, "PYTORCH_CUDA_ALLOC_CONF=%s", v);
  if (w < 0 || (size_t)w >= n || w >= 1024) { /* 1024: the longest spec gpureplay takes */
    unsigned fw = gmt_framework_single(gmt_header_frameworks(h));
    snprintf(spec, n, "%s", fw == GMT_FW_JAX ? "jax" : fw == GMT_FW_TENSORFLOW ? "tf" : fw == GMT_FW_CUPY ? "cupy"
                                                                                                    : "pytorch");
  }
  gmt_reader_close(rd);
  return GM_OK;
}

gm_status_t ana_replay_peak_read(const char *json_lines, uint64_t *peak, char *policy, size_t n, gm_err_t *err) {
  json_error_t je;
  json_t *j = json_loadb(json_lines, strcspn(json_lines, "\n"), 0, &je);
  json_t *p = j ? json_object_get(j, "peak_reserved_plus_external_bytes") : NULL;
  json_t *s = j ? json_object_get(j, "policy") : NULL;
  gm_status_t st = GM_OK;
  if (!j) st = gm_err_set(err, GM_ERR_FORMAT, "gpureplay --json printed no run object: %s", je.text);
  else if (!json_is_integer(p) || json_integer_value(p) < 0 || !json_is_string(s))
    st = gm_err_set(err, GM_ERR_FORMAT, "gpureplay --json: a run object without "
                                        "peak_reserved_plus_external_bytes or policy (an older gpureplay?)");
  if (st == GM_OK) {
    *peak = (uint64_t)json_integer_value(p);
    snprintf(policy, n, "%s", json_string_value(s));
  }
  json_decref(j);
  return st;
}
