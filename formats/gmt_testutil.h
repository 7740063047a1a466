// gmt_testutil.h: small helpers shared by the formats/ tests (temp files, whole-file reads).
#ifndef GMT_TESTUTIL_H
#define GMT_TESTUTIL_H

#include <unistd.h>

#include <cstdlib>
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

}  // namespace gmt_test
#endif
