/* gmsynth.c: writes a synthetic PyTorch-like training-loop trace (see synth.h for the models).
 *   gmsynth -o x.zst --events 1000000 --seed 1 [--model dynamic] */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "bench/synth/synth.h"

typedef struct cfg {
  const char *out, *model;
  uint64_t events, seed, layers, hidden, streams, chunk_events, batch, rank, world_size;
  int help, version, callsites, streamed;
} cfg_t;

static const gm_opt_t opts[] = {
    {"output", 'o', GM_OPT_STR, "PATH", "trace to write (required)", offsetof(cfg_t, out)},
    {"events", 'n', GM_OPT_U64, "N", "number of events (default 1000000)", offsetof(cfg_t, events)},
    {"seed", 's', GM_OPT_U64, "N", "random seed (default 1)", offsetof(cfg_t, seed)},
    {"model", 0, GM_OPT_STR, "NAME",
     "transformer (default) or dynamic (random sizes scaled per step, a fresh address per allocation, "
     "cudaMalloc-like events)",
     offsetof(cfg_t, model)},
    {"layers", 0, GM_OPT_U64, "N", "transformer blocks (default 24); dynamic: layers per step (default 64)",
     offsetof(cfg_t, layers)},
    {"hidden", 0, GM_OPT_U64, "N", "hidden size (default 2048; transformer only)", offsetof(cfg_t, hidden)},
    {"streams", 0, GM_OPT_U64, "N", "1 or 2 streams (default 2; transformer only)", offsetof(cfg_t, streams)},
    {"batch", 0, GM_OPT_U64, "N", "sequences per step (default 8; transformer only): activations scale with it",
     offsetof(cfg_t, batch)},
    {"callsites", 0, GM_OPT_FLAG, NULL, "every allocation names its role as a callsite (transformer only)",
     offsetof(cfg_t, callsites)},
    {"streamed", 0, GM_OPT_FLAG, NULL, "a process's recording as gpurec's default mode leaves it before its merge "
     "(PyTorch's caching-allocator requests streamed, its segments with the driver's calls; transformer only): "
     "`gpurec import` merges it", offsetof(cfg_t, streamed)},
    {"rank", 0, GM_OPT_U64, "N", "this trace is rank N of a job (with --world-size)", offsetof(cfg_t, rank)},
    {"world-size", 0, GM_OPT_U64, "N", "ranks in the job: the header says rank and world size, and every rank "
     "has the same command line", offsetof(cfg_t, world_size)},
    {"chunk-events", 0, GM_OPT_U64, "N", "events per chunk (default: the library's)", offsetof(cfg_t, chunk_events)},
    {"help", 'h', GM_OPT_FLAG, NULL, "show this help", offsetof(cfg_t, help)},
    {"version", 0, GM_OPT_FLAG, NULL, "show the version", offsetof(cfg_t, version)},
    {NULL, 0, 0, NULL, NULL, 0}};

int main(int argc, char **argv) {
  gm_log_init("gmsynth", GM_LOG_INFO);
  cfg_t c = {NULL, NULL, 1000000, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  char *pos[argc > 0 ? argc : 1];
  int npos = 0;
  gm_err_t err;
  if (gm_opts_parse(opts, argc, argv, &c, pos, &npos, 0, &err) != GM_OK) {
    fprintf(stderr, "gmsynth: %s\ntry 'gmsynth --help'\n", err.msg);
    return 2;
  }
  if (c.help) {
    gm_opts_help(stdout, "gmsynth -o TRACE.zst [--events N] [--seed N] [--model transformer|dynamic]",
                 "Write a synthetic PyTorch-like training-loop trace.", opts);
    return 0;
  }
  if (c.version) {
    printf("gmsynth 0.1.0 (trace format %d)\n", GMT_FORMAT_VERSION);
    return 0;
  }
  int model = c.model ? synth_model_from_name(c.model) : SYNTH_TRANSFORMER;
  if (!c.out || npos || model < 0 || c.events == 0 || c.streams > 2 || c.layers > 1000 || c.hidden > 65536 ||
      c.chunk_events > 1000000 || c.batch > 4096 || c.world_size > 1000000 ||
      (c.world_size && c.rank >= c.world_size) || (!c.world_size && c.rank) || (c.streamed && model != SYNTH_TRANSFORMER)) {
    fprintf(stderr, "gmsynth: %s\ntry 'gmsynth --help'\n",
            !c.out ? "missing -o PATH" : npos ? "unexpected argument" : model < 0 ? "unknown --model" : "value out of range");
    return 2;
  }
  synth_opts_t o = {c.events,          c.seed,         (uint32_t)c.layers,   (uint32_t)c.hidden,
                    (uint32_t)c.streams, (uint32_t)model, (uint32_t)c.batch, (uint32_t)c.callsites,
                    (uint32_t)c.world_size, (uint32_t)c.rank, (uint32_t)c.streamed};
  gmt_writer_opts_t wo;
  memset(&wo, 0, sizeof wo);
  wo.chunk_events = (uint32_t)c.chunk_events;
  if (synth_write(&o, c.out, &wo, &err) != GM_OK) {
    gm_err_wrap(&err, "cannot write '%s'", c.out);
    gm_log_err(&err);
    return 1;
  }
  return 0;
}
