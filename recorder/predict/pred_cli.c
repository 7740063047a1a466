/* pred_cli.c: `gpurec predict A.zst@8 B.zst@16 --at=32 -o C.zst`: the trace of a run
 * nobody made (recorder/predict/pred.h); with --fit=SIZE instead, the largest value that fits
 * a device per setting (pred_largest.c). Inputs and the output's directory are checked before
 * anything is read; a refusal (the recordings cannot tell) says why and which recording to add,
 * and exits 3 so that scripts tell it from an error (1) and a usage mistake (2). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/gm_base.h"
#include "recorder/predict/pred_settings.h"
#include "recorder/predict/pred_largest.h"
#include "recorder/predict/pred_cli.h"
#include "recorder/predict/pred.h"

typedef struct predict_config {
  const char *output;
  const char *at;
  const char *min_confidence;
  const char *fit, *margin, *step, *max, *format, *name, *other, *tolerance;
  gm_strlist_t policy;
  int quiet, help, same_job;
} predict_config_t;

/* --fit's defaults (docs/predict.md says why). */
#define PRED_LARGEST_DEFAULT_OTHER (1ull << 30) /* CUDA context and libraries outside the allocator */
#define PRED_LARGEST_DEFAULT_MARGIN 0.005
#define PRED_LARGEST_DEFAULT_MAX_FACTOR 64 /* --max: this many times the largest recording */

static int predict_usage_error(const char *msg) {
  fprintf(stderr, "gpurec: error: %s\ntry 'gpurec predict --help'\n", msg);
  return 2;
}

static const char k_predict_desc[] =
    "Write the trace of a run nobody made: the job at another value of one size (batch, sequence\n"
    "length, width), from two or more recordings of it at smaller values. The trace is marked as\n"
    "predicted in its header (with its inputs) and goes to gpureplay and gpuanalyze like any other.\n"
    "\n"
    "The inputs must be recordings of the same job (the same command but for the value wherever\n"
    "it stands as a whole number: 8, --batch=8, b8, runs/bs8/; commands that differ otherwise but\n"
    "run the same script are taken as one job with a warning, silenced by --same-job), on the\n"
    "same kind of GPU, under the same allocator setting and capture mode (gpurec --mode=torch\n"
    "gives callsites, which make the alignment reliable), with the same number of steps, and\n"
    "none may have run out of memory. Give each as TRACE.zst@VALUE.\n"
    "Two recordings fit each allocation's size as affine in the value or proportional to its\n"
    "square; three also find other quadratic terms (attention scores in the sequence length).\n"
    "Record at values as near the target as fit.\n"
    "\n"
    "Sizes the recordings do not fix (less than --min-confidence of the bytes at the predicted\n"
    "peak from allocations matched in every recording with a consistent fit, or allocations of\n"
    "unknown size holding over 1% of it at some moment, live at the peak or not: they shape the\n"
    "allocator's segments) are checked per setting (--policy; default: the framework's grid, for\n"
    "PyTorch its PYTORCH_CUDA_ALLOC_CONF settings only, not other frameworks' allocators): the\n"
    "prediction is replayed through gpureplay with those sizes at both ends of their plausible\n"
    "range, and a setting is answered when its peak reserved stays within --tolerance; the\n"
    "header's predicted.settings says which were. Where two recordings alone do not make the\n"
    "same allocations (the job still changes how it allocates between them: a law bent past\n"
    "them would look straight), every size they share that is not live at the predicted peak\n"
    "is one of those sizes, from its size at the nearer recording (it may stop growing there)\n"
    "to its fitted size. It refuses (exit 3, nothing written) when every setting moves, when an\n"
    "allocation only one of two such recordings makes is live at the peak, or when the steps or\n"
    "streams differ; it says why, each refused setting's range, and which\n"
    "recording to add. Exit 0: written; 1: error; 2: usage; 3: refused.\n"
    "\n"
    "Before it predicts (--at or --fit), each recording of PyTorch's own history is replayed under\n"
    "the setting its job ran with and checked against its run's own segments: one line when they\n"
    "all match, a warning for each the replay misses (a prediction from it may be off by as much).\n"
    "\n"
    "With --fit=SIZE instead of --at and -o: the largest value that fits a device of SIZE, per\n"
    "allocator setting (--policy, repeatable, in gpureplay's or the framework's words; default:\n"
    "the framework's sweep grid, as for --at), and the peak reserved against the value, the recordings\n"
    "among the points (--format=text, csv or json). SIZE is the device's memory as the\n"
    "framework sees it (torch.cuda.get_device_properties(0).total_memory: 79.18 GiB on an\n"
    "'80 GB' H100), or 'recorded' for the recordings' own GPU. A setting fits at a value when\n"
    "the replay of the prediction completes within (SIZE - --other) / (1 + --margin): never an\n"
    "answer above what the prediction, with its margin, says fits. Values are searched from the\n"
    "largest recording up, on multiples of --step; where the prediction refuses, the setting's\n"
    "answer is a lower bound and gpurec exits 3.";

/* A positive number option; 0 when absent. -1 when bad. */
static int positive(const char *s, double *out) {
  if (!s) return 0;
  char *end = NULL;
  double v = strtod(s, &end);
  if (!*s || *end || !(v > 0) || v > 1e15) return -1;
  *out = v;
  return 0;
}

/* --fit and its options into fc; a usage error's exit code (2) or 0. */
static int parse_fit(const predict_config_t *cfg, const pred_input_t *in, int n, pred_largest_cfg_t *fc, gm_err_t *err) {
  if (strcmp(cfg->fit, "recorded") == 0) fc->device = 0;
  else if (gm_parse_size(cfg->fit, &fc->device, err) < 0 || fc->device == 0)
    return predict_usage_error("--fit: give the device's memory, e.g. --fit=79GiB, or --fit=recorded");
  fc->other = PRED_LARGEST_DEFAULT_OTHER;
  if (cfg->other && gm_parse_size(cfg->other, &fc->other, err) < 0)
    return predict_usage_error("--other: give a size, e.g. 1GiB or 0");
  fc->margin = PRED_LARGEST_DEFAULT_MARGIN;
  if (cfg->margin && gm_parse_fraction(cfg->margin, &fc->margin, err) < 0)
    return predict_usage_error("--margin: give a fraction in [0, 1], e.g. 0.01");
  fc->step = 1;
  if (positive(cfg->step, &fc->step) < 0) return predict_usage_error("--step: the value must be a positive number");
  double vmax = 0;
  for (int i = 0; i < n; i++) vmax = in[i].value > vmax ? in[i].value : vmax;
  fc->max = PRED_LARGEST_DEFAULT_MAX_FACTOR * vmax;
  if (positive(cfg->max, &fc->max) < 0) return predict_usage_error("--max: the value must be a positive number");
  if (fc->max / fc->step > 1e9) return predict_usage_error("--max: more than 10^9 steps of --step to search");
  fc->format = cfg->format ? cfg->format : "text";
  if (strcmp(fc->format, "text") && strcmp(fc->format, "csv") && strcmp(fc->format, "json"))
    return predict_usage_error("--format: text, csv or json");
  fc->name = cfg->name ? cfg->name : "value";
  fc->quiet = cfg->quiet;
  fc->same_job = cfg->same_job;
  /* as given: gpureplay puts them in its words and checks them (pred_largest.c); none: the grid */
  if (cfg->policy.n > PRED_LARGEST_MAX_POLICIES) return predict_usage_error("--policy: at most 32 settings");
  fc->n_policies = cfg->policy.n;
  fc->policies = cfg->policy.v;
  return 0;
}

int pred_cli_main(int argc, char **argv) {
  static const gm_opt_t opts[] = {
      {"at", 0, GM_OPT_STR, "VALUE", "the value to predict the job at (e.g. 32)", offsetof(predict_config_t, at)},
      {"output", 'o', GM_OPT_STR, "TRACE.zst", "predicted trace to write", offsetof(predict_config_t, output)},
      {"min-confidence", 0, GM_OPT_STR, "FRACTION",
       "check per setting below this share of certain bytes at the predicted peak (default 0.95; 0: never)",
       offsetof(predict_config_t, min_confidence)},
      {"fit", 0, GM_OPT_STR, "SIZE|recorded", "instead of --at: the largest value that fits a device of SIZE, per setting",
       offsetof(predict_config_t, fit)},
      {"policy", 'p', GM_OPT_LIST, "SPEC", "a setting to answer for (default: the framework's grid)",
       offsetof(predict_config_t, policy)},
      {"tolerance", 0, GM_OPT_STR, "FRACTION",
       "how far uncertain sizes may move a setting's peak reserved and it still be answered (default 0.01)",
       offsetof(predict_config_t, tolerance)},
      {"other", 0, GM_OPT_STR, "SIZE", "--fit: memory on the device outside the framework (default 1GiB)",
       offsetof(predict_config_t, other)},
      {"margin", 0, GM_OPT_STR, "FRACTION", "--fit: margin for the prediction's error (default 0.005)",
       offsetof(predict_config_t, margin)},
      {"step", 0, GM_OPT_STR, "VALUE", "--fit: search multiples of this (default 1; e.g. 32 for image sizes)",
       offsetof(predict_config_t, step)},
      {"max", 0, GM_OPT_STR, "VALUE", "--fit: largest value to try (default 64 x the largest recording)",
       offsetof(predict_config_t, max)},
      {"format", 0, GM_OPT_STR, "FORMAT", "--fit: text (default), csv (the curve) or json (everything)",
       offsetof(predict_config_t, format)},
      {"name", 0, GM_OPT_STR, "WORD", "--fit: what the value is (default 'value'; e.g. batch)", offsetof(predict_config_t, name)},
      {"same-job", 0, GM_OPT_FLAG, NULL, "the inputs are one job even where their commands differ beyond the value",
       offsetof(predict_config_t, same_job)},
      {"quiet", 'q', GM_OPT_FLAG, NULL, "only errors and refusals on stderr", offsetof(predict_config_t, quiet)},
      {"help", 'h', GM_OPT_FLAG, NULL, "show this help and exit", offsetof(predict_config_t, help)},
      {NULL, 0, 0, NULL, NULL, 0}};
  predict_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  char **pos = calloc((size_t)argc + 1, sizeof *pos);
  int npos = 0;
  gm_err_t err;
  gm_err_clear(&err);
  if (!pos) return 1;
  if (gm_opts_parse(opts, argc, argv, &cfg, pos, &npos, 0, &err) < 0) {
    free(pos);
    return predict_usage_error(err.msg);
  }
  if (cfg.help) {
    free(pos);
    gm_opts_help(stdout,
                 "gpurec predict TRACE.zst@VALUE TRACE.zst@VALUE... --at=VALUE -o PREDICTED.zst [--policy=SPEC...]\n"
                 "       gpurec predict TRACE.zst@VALUE TRACE.zst@VALUE... --fit=SIZE [--policy=SPEC...]",
                 k_predict_desc, opts);
    return 0;
  }
  int rc = 0;
  char paths[PRED_MAX_INPUTS][4096];
  pred_input_t in[PRED_MAX_INPUTS];
  pred_opts_t po = {0, -1, NULL};
  if (npos < 2) rc = predict_usage_error("predict needs at least two recordings, each as TRACE.zst@VALUE");
  else if (npos > PRED_MAX_INPUTS) rc = predict_usage_error("predict takes at most 8 recordings");
  else if (cfg.fit && (cfg.at || cfg.output)) rc = predict_usage_error("--fit searches the value itself: give it without --at and -o");
  else if (cfg.fit && cfg.tolerance) rc = predict_usage_error("--tolerance goes with --at (--fit asks whether each value fits)");
  else if (!cfg.fit && (cfg.margin || cfg.step || cfg.max || cfg.format || cfg.name || cfg.other))
    rc = predict_usage_error("--other, --margin, --step, --max, --format and --name go with --fit");
  else if (!cfg.fit && !cfg.at) rc = predict_usage_error("predict needs --at=VALUE, the value to predict the job at (or --fit=SIZE)");
  else if (!cfg.fit && !cfg.output) rc = predict_usage_error("predict needs -o PREDICTED.zst");
  for (int i = 0; !rc && i < npos; i++)
    if (pred_parse_input(pos[i], paths[i], sizeof paths[i], &in[i], &err) < 0) rc = predict_usage_error(err.msg);
  pred_largest_cfg_t fc;
  memset(&fc, 0, sizeof fc);
  if (!rc && cfg.fit) rc = parse_fit(&cfg, in, npos, &fc, &err);
  if (!rc && !cfg.fit) {
    char *end = NULL;
    po.target = strtod(cfg.at, &end);
    if (!*cfg.at || *end || !(po.target > 0)) rc = predict_usage_error("--at: the value must be a positive number");
  }
  double tolerance = PRED_DEFAULT_TOLERANCE;
  if (!rc && cfg.tolerance && gm_parse_fraction(cfg.tolerance, &tolerance, &err) < 0)
    rc = predict_usage_error("--tolerance: give a fraction in [0, 1], e.g. 0.01");
  if (!rc && cfg.min_confidence) {
    double f = 0;
    if (gm_parse_fraction(cfg.min_confidence, &f, &err) < 0)
      rc = predict_usage_error("--min-confidence: give a fraction in [0, 1], e.g. 0.9");
    else po.min_confidence = f;
  }
  free(pos);
  if (rc) return rc;
  /* every input a trace, the output writable: before anything is read */
  for (int i = 0; i < npos; i++) {
    gm_file_kind_t kind = gm_file_kind(in[i].path);
    char advice[GM_ERR_MSG_MAX];
    if (kind == GM_FILE_MISSING) {
      fprintf(stderr, "gpurec: error: cannot open '%s': no such file\n", in[i].path);
      return 1;
    }
    if (gm_file_advice(in[i].path, kind, GM_WANT(GM_FILE_TRACE), advice, sizeof advice)) {
      fprintf(stderr, "gpurec: error: %s; predict takes gpumem traces\n", advice);
      return 1;
    }
  }
  if (cfg.fit) {
    fc.min_confidence = po.min_confidence;
    return pred_largest(&fc, in, (size_t)npos);
  }
  if (gm_output_check(cfg.output, &err) < 0) {
    fprintf(stderr, "gpurec: error: %s\n", err.msg);
    return 1;
  }
  char cmd[8192];
  size_t o = (size_t)snprintf(cmd, sizeof cmd, "gpurec");
  for (int i = 0; i < argc && o < sizeof cmd; i++) o += (size_t)snprintf(cmd + o, sizeof cmd - o, " %s", argv[i]);
  po.command = cmd;
  pred_result_t res;
  pred_model_t *m = NULL;
  gm_status_t st = pred_model_open(in, (size_t)npos, &m, &res, &err);
  if (st == GM_OK && res.warning[0] && !cfg.same_job && !cfg.quiet) fprintf(stderr, "gpurec: warning: %s\n", res.warning);
  char runs_note[1024];
  runs_note[0] = '\0';
  if (st == GM_OK && !res.refused) pred_runs_check(NULL, m, in, (size_t)npos, cfg.quiet, runs_note, sizeof runs_note);
  po.runs_note = runs_note;
  if (st == GM_OK && !res.refused) st = pred_model_at(m, &po, &res, &err);
  if (st < 0) {
    pred_model_close(m);
    fprintf(stderr, "gpurec: error: cannot predict: %s\n", err.msg);
    return 1;
  }
  if (res.refused && res.checkable) { /* uncertain sizes: do they matter to each setting? */
    rc = pred_settings_write(m, in, &po, &res, (const char *const *)cfg.policy.v, cfg.policy.n, tolerance,
                         cfg.output, cfg.quiet);
    pred_model_close(m);
    return rc;
  }
  if (res.refused) {
    pred_model_close(m);
    fprintf(stderr, "gpurec: cannot predict at %s: %s\ngpurec: %s\n", cfg.at, res.reason, res.advice);
    return 3;
  }
  st = pred_model_write(m, &po, cfg.output, &res, &err);
  pred_model_close(m);
  if (st < 0) {
    fprintf(stderr, "gpurec: error: cannot predict: %s\n", err.msg);
    return 1;
  }
  if (!cfg.quiet) {
    char b1[32], b2[32];
    fprintf(stderr,
            "gpurec: predicted %s at %s from %d recordings (following the one at %.15g): %llu events, confidence %.1f%%; "
            "%llu allocations, %llu matched in every recording, %llu of them with a consistent %s fit, %llu carried from "
            "some recordings only; peak of live requested bytes %s (%s at %.15g); next: gpureplay %s\n",
            cfg.output, cfg.at, npos, in[res.reference].value, (unsigned long long)res.events, 100 * res.confidence,
            (unsigned long long)res.allocs, (unsigned long long)res.matched_all, (unsigned long long)res.consistent,
            res.quadratic ? "affine or quadratic" : "affine", (unsigned long long)res.carried,
            gm_format_size(res.peak_live, b1, sizeof b1), gm_format_size(res.ref_peak_live, b2, sizeof b2),
            in[res.reference].value, cfg.output);
    if (res.near_law)
      fprintf(stderr, "gpurec: %llu of them follow a law only through the recordings nearest %s (the farthest leaves "
                      "it: the job sized %s otherwise there) and are sized by that law\n",
              (unsigned long long)res.near_law, cfg.at, res.near_law == 1 ? "it" : "them");
    if (res.dropped_other)
      fprintf(stderr, "gpurec: %llu allocation%s of the other recordings %s no partner at %.15g and %s left out "
                      "(the job makes %s only at their values)\n",
              (unsigned long long)res.dropped_other, res.dropped_other == 1 ? "" : "s",
              res.dropped_other == 1 ? "has" : "have", in[res.reference].value,
              res.dropped_other == 1 ? "is" : "are", res.dropped_other == 1 ? "it" : "them");
  }
  return 0;
}
