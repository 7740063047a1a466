// gmt_testutil.h: small helpers shared by the tests that write or read traces (temp files,
// whole-file reads, the one event builder).
#ifndef GMT_TESTUTIL_H
#define GMT_TESTUTIL_H

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "formats/gmt_internal.h"

namespace gmt_test {

// A fresh path under the test's temporary directory.
inline std::string TempPath(const std::string &name) {
  static int counter = 0;
  const char *dir = getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" +
         name;
}

inline std::string ReadAll(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Bytes of the header frame at the start of a trace.
inline size_t HeaderLen(const std::string &t) {
  return GMT_FRAME_HDR + gmt_get32(reinterpret_cast<const uint8_t *>(t.data()) + 4);
}

// One event: every byte zero but the arguments, device memory. The rest is set by chaining,
//   Ev(GMT_EV_ALLOC, ts, addr, size, stream).Cs(1).Dev(2)
// and the result is a gmt_event_t wherever one is wanted (vectors, function arguments).
struct Ev : gmt_event_t {
  Ev(unsigned kind, uint64_t ts, uint64_t addr, uint64_t size, uint64_t stream = GMT_STREAM_NONE) {
    gmt_event_t *e = this;
    memset(e, 0, sizeof *e);
    e->kind = (uint8_t)kind;
    e->ts_ns = ts;
    e->addr = addr;
    e->size = size;
    e->stream = stream;
    e->mem_kind = GMT_MEM_DEVICE;
  }
  Ev &Mem(unsigned m) { mem_kind = (uint8_t)m; return *this; }
  Ev &Dev(unsigned d) { device = (uint16_t)d; return *this; }
  Ev &Cs(uint32_t c) { callsite = c; return *this; }
  Ev &Flags(uint32_t f) { flags = f; return *this; }
};

}  // namespace gmt_test
#endif
