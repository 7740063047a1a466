// Tests of the plain-data pickle reader: values, memo, and hostile input (code opcodes,
// truncation at every offset, deep nesting, lying lengths, random corruption).
#include "formats/pkr.h"

#include <gtest/gtest.h>

#include <string>

#include "formats/pk_testutil.h"

namespace {

struct Parsed {
  std::vector<uint8_t> buf;  // the document's strings point into it: it must outlive the doc
  pkr_doc_t *doc = nullptr;
  gm_err_t err{};
  gm_status_t st;
  explicit Parsed(const std::vector<uint8_t> &b) : buf(b) {
    st = pkr_parse(buf.data(), buf.size(), &doc, &err);
  }
  ~Parsed() { pkr_doc_free(doc); }
  const pkr_val_t *root() const { return pkr_doc_root(doc); }
};

std::vector<uint8_t> Sample() {
  Pk p;
  p.proto(4).frame(40).dict().memoize().mark();
  p.str("a").memoize().i(5);
  p.str("neg").i(-1);
  p.str("addr").i(139670365143040LL);
  p.str("big").i(-5000000000LL);
  p.str("l").list().memoize().mark().none().boolean(true).f64(1.5).bytes("xy").get(1).appends();
  p.str("t").i(0).i(0).tuple2();
  p.setitems().stop();
  return p.b;
}

TEST(SnapPickle, ReadsPlainData) {
  Parsed r(Sample());
  ASSERT_EQ(r.st, GM_OK) << r.err.msg;
  const pkr_val_t *root = r.root();
  ASSERT_EQ(root->type, PKR_DICT);
  int64_t v = 0;
  EXPECT_TRUE(pkr_int(pkr_dict_get(root, "a"), &v));
  EXPECT_EQ(v, 5);
  EXPECT_TRUE(pkr_int(pkr_dict_get(root, "neg"), &v));
  EXPECT_EQ(v, -1);
  EXPECT_TRUE(pkr_int(pkr_dict_get(root, "addr"), &v));
  EXPECT_EQ(v, 139670365143040LL);
  EXPECT_TRUE(pkr_int(pkr_dict_get(root, "big"), &v));
  EXPECT_EQ(v, -5000000000LL);
  const pkr_val_t *l = pkr_dict_get(root, "l");
  ASSERT_EQ(l->type, PKR_LIST);
  ASSERT_EQ(l->n, 5u);
  EXPECT_EQ(l->items[0]->type, PKR_NONE);
  EXPECT_EQ(l->items[1]->type, PKR_BOOL);
  EXPECT_EQ(l->items[1]->i, 1);
  EXPECT_DOUBLE_EQ(l->items[2]->f, 1.5);
  EXPECT_EQ(l->items[3]->type, PKR_BYTES);
  EXPECT_EQ(std::string(l->items[3]->s, l->items[3]->len), "xy");
  EXPECT_TRUE(pkr_str_eq(l->items[4], "a"));  // memo get of the key "a"
  const pkr_val_t *t = pkr_dict_get(root, "t");
  ASSERT_EQ(t->type, PKR_TUPLE);
  EXPECT_EQ(t->n, 2u);
  EXPECT_EQ(pkr_dict_get(root, "missing"), nullptr);
}

TEST(SnapPickle, LastDuplicateKeyWins) {
  Pk p;
  p.proto(2).dict().mark().kv("k", 1).kv("k", 2).setitems().stop();
  Parsed r(p.b);
  ASSERT_EQ(r.st, GM_OK) << r.err.msg;
  int64_t v = 0;
  ASSERT_TRUE(pkr_int(pkr_dict_get(r.root(), "k"), &v));
  EXPECT_EQ(v, 2);
}

TEST(SnapPickle, WideLongBecomesBigint) {
  Pk p;
  p.proto(2).raw({0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0, 1}).stop();  // 2**64
  Parsed r(p.b);
  ASSERT_EQ(r.st, GM_OK) << r.err.msg;
  EXPECT_EQ(r.root()->type, PKR_BIGINT);
  int64_t v;
  EXPECT_FALSE(pkr_int(r.root(), &v));
  Pk q;  // 9 bytes that are only sign extension: -1 fits
  q.proto(2).raw({0x8a, 9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}).stop();
  Parsed s(q.b);
  ASSERT_EQ(s.st, GM_OK);
  ASSERT_TRUE(pkr_int(s.root(), &v));
  EXPECT_EQ(v, -1);
}

TEST(SnapPickle, RefusesEveryCodeOpcodeByName) {
  struct { std::vector<uint8_t> body; const char *name; } cases[] = {
      {{'c', 'o', 's', '\n', 's', 'y', 's', 't', 'e', 'm', '\n'}, "GLOBAL"},
      {{0x8c, 2, 'o', 's', 0x8c, 6, 's', 'y', 's', 't', 'e', 'm', 0x93}, "STACK_GLOBAL"},
      {{'N', ')', 'R'}, "REDUCE"},
      {{']', '}', 'b'}, "BUILD"},
      {{'(', 'i', 'o', 's', '\n', 'x', '\n'}, "INST"},
      {{'(', 'N', 'o'}, "OBJ"},
      {{'N', ')', 0x81}, "NEWOBJ"},
      {{'N', ')', '}', 0x92}, "NEWOBJ_EX"},
      {{0x82, 1}, "EXT1"},
      {{'N', 'Q'}, "BINPERSID"},
      {{0x97}, "NEXT_BUFFER"},
  };
  for (auto &c : cases) {
    Pk p;
    p.proto(4);
    p.b.insert(p.b.end(), c.body.begin(), c.body.end());
    p.stop();
    Parsed r(p.b);
    EXPECT_EQ(r.st, GM_ERR_FORMAT) << c.name;
    EXPECT_NE(std::string(r.err.msg).find(c.name), std::string::npos) << r.err.msg;
    EXPECT_NE(std::string(r.err.msg).find("refused"), std::string::npos) << r.err.msg;
    EXPECT_EQ(r.doc, nullptr);
  }
}

TEST(SnapPickle, RejectsOtherProtocolsAndUnknownOpcodes) {
  Parsed text({'(', 'l', 'p', '0', '\n', '.'});  // protocol 0
  EXPECT_EQ(text.st, GM_ERR_FORMAT);
  Parsed p6({0x80, 6, 'N', '.'});
  EXPECT_EQ(p6.st, GM_ERR_FORMAT);
  Parsed unk({0x80, 4, 0xf0, '.'});
  EXPECT_EQ(unk.st, GM_ERR_FORMAT);
  EXPECT_NE(std::string(unk.err.msg).find("0xf0"), std::string::npos) << unk.err.msg;
  Parsed two({0x80, 4, 'N', 'N', '.'});  // STOP with two values
  EXPECT_EQ(two.st, GM_ERR_FORMAT);
}

TEST(SnapPickle, TruncatedAtEveryOffsetIsAFormatError) {
  std::vector<uint8_t> b = Sample();
  for (size_t n = 0; n < b.size(); n++) {
    std::vector<uint8_t> cut(b.begin(), b.begin() + n);
    Parsed r(cut);
    EXPECT_EQ(r.st, GM_ERR_FORMAT) << "prefix " << n;
    EXPECT_EQ(r.doc, nullptr);
  }
}

TEST(SnapPickle, DeepNestingUsesNoRecursion) {
  const size_t depth = 200000;
  Pk p;
  p.proto(4);
  p.b.insert(p.b.end(), depth, '(');
  p.b.insert(p.b.end(), depth, 'l');
  p.stop();
  Parsed r(p.b);
  ASSERT_EQ(r.st, GM_OK) << r.err.msg;
  const pkr_val_t *v = r.root();
  size_t d = 0;
  while (v->type == PKR_LIST && v->n == 1) { v = v->items[0]; d++; }
  EXPECT_EQ(d, depth - 1);
}

TEST(SnapPickle, LyingLengthsAndMemoIndexes) {
  Parsed s8({0x80, 4, 0x8d, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 'a', '.'});
  EXPECT_EQ(s8.st, GM_ERR_FORMAT);
  EXPECT_NE(std::string(s8.err.msg).find("truncated"), std::string::npos) << s8.err.msg;
  Parsed l4({0x80, 4, 0x8b, 0xff, 0xff, 0xff, 0x7f, 1, '.'});
  EXPECT_EQ(l4.st, GM_ERR_FORMAT);
  Parsed put({0x80, 4, 'N', 'r', 0xff, 0xff, 0xff, 0xff, '.'});
  EXPECT_EQ(put.st, GM_ERR_FORMAT);
  EXPECT_NE(std::string(put.err.msg).find("memo"), std::string::npos) << put.err.msg;
  Parsed get({0x80, 4, 'h', 3, '.'});
  EXPECT_EQ(get.st, GM_ERR_FORMAT);
  Parsed under({0x80, 4, 'a', '.'});
  EXPECT_EQ(under.st, GM_ERR_FORMAT);
  Parsed setitem_on_list({0x80, 4, ']', 'N', 'N', 's', '.'});
  EXPECT_EQ(setitem_on_list.st, GM_ERR_FORMAT);
  Parsed across_mark({0x80, 4, ']', '(', 'N', 'a', '.'});  // APPEND may not reach below a MARK
  EXPECT_EQ(across_mark.st, GM_ERR_FORMAT);
}

TEST(SnapPickle, SelfReferenceIsFine) {
  Parsed r({0x80, 4, ']', 0x94, 'h', 0, 'a', '.'});  // l = []; l.append(l)
  ASSERT_EQ(r.st, GM_OK) << r.err.msg;
  EXPECT_EQ(r.root()->items[0], r.root());
}

TEST(SnapPickle, RandomCorruptionNeverCrashes) {
  std::vector<uint8_t> base = Sample();
  uint64_t x = 88172645463325252ULL;
  int ok = 0;
  for (int it = 0; it < 20000; it++) {
    std::vector<uint8_t> b = base;
    int flips = 1 + (int)(x % 4);
    for (int f = 0; f < flips; f++) {
      x ^= x << 13; x ^= x >> 7; x ^= x << 17;
      b[2 + x % (b.size() - 2)] = (uint8_t)(x >> 32);
    }
    Parsed r(b);
    EXPECT_TRUE(r.st == GM_OK || r.st == GM_ERR_FORMAT) << r.st;
    if (r.st == GM_OK) ok++;
    else EXPECT_NE(r.err.msg[0], 0);
  }
  EXPECT_LT(ok, 20000);
}

}  // namespace
