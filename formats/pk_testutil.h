// pk_testutil.h: a tiny pickle writer for the pickle and snapshot tests (C++, tests only). It emits the
// same opcodes CPython's pickler uses for plain data, so tests can hand-build snapshots,
// hostile pickles and truncations byte by byte.
#ifndef PK_TESTUTIL_H
#define PK_TESTUTIL_H

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

struct Pk {
  std::vector<uint8_t> b;
  Pk &raw(std::initializer_list<uint8_t> v) { b.insert(b.end(), v); return *this; }
  Pk &proto(int p = 4) { return raw({0x80, (uint8_t)p}); }
  Pk &frame(uint64_t n) { b.push_back(0x95); le(n, 8); return *this; }
  Pk &stop() { b.push_back('.'); return *this; }
  Pk &mark() { b.push_back('('); return *this; }
  Pk &dict() { b.push_back('}'); return *this; }
  Pk &list() { b.push_back(']'); return *this; }
  Pk &tuple0() { b.push_back(')'); return *this; }
  Pk &none() { b.push_back('N'); return *this; }
  Pk &boolean(bool v) { b.push_back(v ? 0x88 : 0x89); return *this; }
  Pk &memoize() { b.push_back(0x94); return *this; }
  Pk &get(uint32_t i) { if (i < 256) return raw({'h', (uint8_t)i}); b.push_back('j'); le(i, 4); return *this; }
  Pk &setitems() { b.push_back('u'); return *this; }
  Pk &setitem() { b.push_back('s'); return *this; }
  Pk &appends() { b.push_back('e'); return *this; }
  Pk &append() { b.push_back('a'); return *this; }
  Pk &tuple2() { b.push_back(0x86); return *this; }
  Pk &str(const std::string &s) {
    if (s.size() < 256) { b.push_back(0x8c); b.push_back((uint8_t)s.size()); }
    else { b.push_back('X'); le(s.size(), 4); }
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Pk &bytes(const std::string &s) { b.push_back('C'); b.push_back((uint8_t)s.size()); b.insert(b.end(), s.begin(), s.end()); return *this; }
  Pk &f64(double d) {
    uint64_t u; std::memcpy(&u, &d, 8); b.push_back('G');
    for (int k = 7; k >= 0; k--) b.push_back((uint8_t)(u >> (8 * k)));
    return *this;
  }
  Pk &i(int64_t v) {
    if (v >= 0 && v < 256) return raw({'K', (uint8_t)v});
    if (v >= 0 && v < 65536) { b.push_back('M'); le((uint64_t)v, 2); return *this; }
    if (v >= INT32_MIN && v <= INT32_MAX) { b.push_back('J'); le((uint64_t)(uint32_t)(int32_t)v, 4); return *this; }
    b.push_back(0x8a); b.push_back(8); le((uint64_t)v, 8);  // LONG1, 8 bytes two's complement
    return *this;
  }
  // key/value helpers inside a MARK ... SETITEMS run
  Pk &kv(const std::string &k, int64_t v) { return str(k).i(v); }
  Pk &kvs(const std::string &k, const std::string &v) { return str(k).str(v); }
  void le(uint64_t v, int n) { for (int k = 0; k < n; k++) b.push_back((uint8_t)(v >> (8 * k))); }
};

#endif  // PK_TESTUTIL_H
