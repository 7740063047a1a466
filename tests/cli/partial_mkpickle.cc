// partial_mkpickle.cc: two PyTorch memory snapshots for partial_test.sh, built with the
// snapshot tests' pickle writer (formats/pk_testutil.h).
//   ring.pickle: a history whose ring filled. The job's first 8 GiB (allocated, freed, its
//     segment kept cached) fell out of the ring: the final segments hold that 8 GiB segment,
//     which no entry mentions, and the history starts with the free of a 1 GiB block whose
//     allocation is gone. Then 40 small allocations and frees.
//   full.pickle: the same job recorded from its start (nothing alive before the first entry).
// Usage: partial_mkpickle DIR
#include <cstdio>
#include <string>

#include "formats/pk_testutil.h"

namespace {

const int64_t T = 1795262363399030LL, A = 139670365143040LL, B = A + (16LL << 30);
const int64_t GiB = 1LL << 30, MiB = 1LL << 20;

void Entry(Pk &p, const char *action, int64_t addr, int64_t size, int64_t t) {
  p.dict().mark().kvs("action", action).kv("addr", addr).kv("size", size).kv("stream", 0).kv("time_us", t).setitems();
}

void Segment(Pk &p, int64_t addr, int64_t total) {
  p.dict().mark().kv("device", 0).kv("address", addr).kv("total_size", total).kv("stream", 0);
  p.kvs("segment_type", "large").kv("is_expandable", 0);
  p.str("blocks").list().mark();
  p.dict().mark().kv("address", addr).kv("size", total).kv("requested_size", total).kvs("state", "inactive").setitems();
  p.appends().setitems();
}

std::string Snapshot(bool full) {
  Pk p;
  p.proto(4).dict().mark();
  p.str("segments").list().mark();
  Segment(p, A, 8 * GiB);  // cached after its 8 GiB block was freed
  Segment(p, B, 2 * GiB);
  p.appends();
  p.str("device_traces").list().mark().list().mark();
  int64_t t = T;
  if (full) {  // the start of the run: what the ring dropped in ring.pickle
    Entry(p, "segment_alloc", A, 8 * GiB, t++);
    Entry(p, "alloc", A, 8 * GiB, t++);
    Entry(p, "free_requested", A, 8 * GiB, t++);
    Entry(p, "free_completed", A, 8 * GiB, t++);
    Entry(p, "segment_alloc", B, 2 * GiB, t++);
    Entry(p, "alloc", B, GiB, t++);
  }
  t = T + 1000000;  // the ring's first entry: 1 s later
  Entry(p, "free_requested", B, GiB, t++);
  Entry(p, "free_completed", B, GiB, t++);
  for (int i = 0; i < 40; i++) {
    Entry(p, "alloc", B + (int64_t)i * 4 * MiB, 4 * MiB, t++);
    Entry(p, "free_requested", B + (int64_t)i * 4 * MiB, 4 * MiB, t++);
    Entry(p, "free_completed", B + (int64_t)i * 4 * MiB, 4 * MiB, t++);
  }
  p.appends().appends();
  p.str("allocator_settings").dict().mark().kvs("PYTORCH_CUDA_ALLOC_CONF", "").setitems();
  p.setitems().stop();
  return std::string(p.b.begin(), p.b.end());
}

int Write(const std::string &path, const std::string &b) {
  FILE *f = fopen(path.c_str(), "wb");
  if (!f || fwrite(b.data(), 1, b.size(), f) != b.size() || fclose(f) != 0) {
    fprintf(stderr, "partial_mkpickle: cannot write %s\n", path.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: partial_mkpickle DIR\n");
    return 2;
  }
  std::string dir = argv[1];
  return Write(dir + "/ring.pickle", Snapshot(false)) | Write(dir + "/full.pickle", Snapshot(true));
}
