// alloc_churn.cu: what a recorder costs per allocation event, without a framework around it.
//
// The step-time benchmark (rec_overhead.py) measures the cost in a real loop, but its ~2000
// events per step are a few ms of a ~20 ms step, so run-to-run noise of the whole process
// (seen: 17-33 ms medians on one machine) hides sub-microsecond differences. Here almost all
// of the time is spent in the allocation calls themselves: cudaMallocAsync / cudaFreeAsync of
// mixed sizes on one stream, 32 live at a time (the pattern of PyTorch's cudaMallocAsync
// backend), so a recorder's cost per event shows directly as the difference of ns per event
// with and without it, measured in one run.
// Other loops (third argument), to find where a recorder's time goes (issue 15, item 1):
//   launch: an empty kernel launched `events` times (driver calls the memory capture does not
//           subscribe to: what CUPTI costs every kernel launch);
//   query:  cudaStreamQuery on an idle stream (an unsubscribed driver call that never waits
//           for the GPU: pure host cost);
//   sync:   cudaMalloc / cudaFree pairs (synchronous: the calls whose owner the recorder unwinds).
// Build: nvcc -O2 -o alloc_churn bench/recorder/alloc_churn.cu
// Usage: alloc_churn [events_per_block (default 200000)] [blocks (default 15)] [alloc|launch|query|sync]
// Prints: RESULT {"loop": ..., "ns_per_event_min": ..., "ns_per_event_median": ..., ...}
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <string.h>

#include <algorithm>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// One block: events/2 allocations and as many frees, LIVE allocations outstanding.
static void block(cudaStream_t s, long events, unsigned *rng) {
  const int LIVE = 32;
  void *live[LIVE] = {};
  long pairs = events / 2;
  for (long i = 0; i < pairs; i++) {
    int k = (int)(i % LIVE);
    if (live[k]) CK(cudaFreeAsync(live[k], s));
    *rng = *rng * 1103515245u + 12345u;
    size_t size = (size_t)512 << ((*rng >> 16) % 12);  // 512 B .. 1 MiB
    CK(cudaMallocAsync(&live[k], size, s));
  }
  for (int k = 0; k < LIVE; k++)
    if (live[k]) CK(cudaFreeAsync(live[k], s));
  CK(cudaStreamSynchronize(s));
}

__global__ void empty_kernel() {}

// events launches; the GPU runs an empty kernel in about the time the host takes to launch
// one, so the queue stays short and the figure is the host's.
static void launches(cudaStream_t s, long events) {
  for (long i = 0; i < events; i++) empty_kernel<<<1, 1, 0, s>>>();
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(s));
}

static void queries(cudaStream_t s, long events) {
  for (long i = 0; i < events; i++) (void)cudaStreamQuery(s);
}

// events/2 cudaMalloc + cudaFree pairs of 2 MiB (each a driver allocation, no caching)
static void syncs(long events) {
  for (long i = 0; i < events / 2; i++) {
    void *p;
    CK(cudaMalloc(&p, 2u << 20));
    CK(cudaFree(p));
  }
}

int main(int argc, char **argv) {
  long events = argc > 1 ? atol(argv[1]) : 200000;
  int blocks = argc > 2 ? atoi(argv[2]) : 15;
  const char *loop = argc > 3 ? argv[3] : "alloc";
  if (strcmp(loop, "alloc") && strcmp(loop, "launch") && strcmp(loop, "query") && strcmp(loop, "sync")) {
    fprintf(stderr, "alloc_churn: unknown loop '%s' (alloc, launch, query, sync)\n", loop);
    return 2;
  }
  CK(cudaSetDevice(0));
  CK(cudaFree(0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned rng = 1;
  const int alloc = strcmp(loop, "alloc") == 0;
  const long extra = alloc ? 64 : 0;  // the block's final frees
  // warm the pool, the module and the caches
  if (alloc) block(s, 20000, &rng);
  else if (loop[0] == 'l') launches(s, 20000);
  else if (loop[0] == 'q') queries(s, 20000);
  else syncs(200);
  std::vector<double> ns;
  for (int b = 0; b < blocks; b++) {
    double t0 = now_s();
    if (alloc) block(s, events, &rng);
    else if (loop[0] == 'l') launches(s, events);
    else if (loop[0] == 'q') queries(s, events);
    else syncs(events);
    double t1 = now_s();
    ns.push_back((t1 - t0) * 1e9 / (double)(events + extra));
  }
  std::vector<double> sorted = ns;
  std::sort(sorted.begin(), sorted.end());
  printf("RESULT {\"loop\": \"%s\", \"events_per_block\": %ld, \"blocks\": %d, "
         "\"ns_per_event_min\": %.1f, \"ns_per_event_median\": %.1f, \"ns_per_event_max\": %.1f}\n",
         loop, events + extra, blocks, sorted.front(), sorted[sorted.size() / 2], sorted.back());
  CK(cudaStreamDestroy(s));
  return 0;
}
