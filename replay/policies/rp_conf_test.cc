// The conf parser: keys, both separators, bare values, and errors that name the key.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "replay/policies/rp_conf.h"

namespace {

struct Cfg {
  int flag;
  int b;
  uint64_t size;
  double frac;
  rp_amount_t amount;
  char str[RP_CONF_STR_MAX];
};

const rp_conf_key_t kKeys[] = {
    {"flag", RP_CONF_FLAG, offsetof(Cfg, flag)},
    {"b", RP_CONF_BOOL, offsetof(Cfg, b)},
    {"size", RP_CONF_SIZE, offsetof(Cfg, size)},
    {"frac", RP_CONF_FRACTION, offsetof(Cfg, frac)},
    {"amount", RP_CONF_AMOUNT, offsetof(Cfg, amount)},
    {"str", RP_CONF_STRING, offsetof(Cfg, str)},
    {nullptr, RP_CONF_FLAG, 0},
};

TEST(Conf, ParsesEveryKindWithEitherSeparator) {
  Cfg c{};
  gm_err_t err{};
  ASSERT_EQ(rp_conf_parse("t", " flag , b=false,size:20MiB,frac=0.25,amount=2GiB,", kKeys, nullptr, &c, &err), GM_OK)
      << err.msg;
  EXPECT_EQ(c.flag, 1);
  EXPECT_EQ(c.b, 0);
  EXPECT_EQ(c.size, 20u << 20);
  EXPECT_DOUBLE_EQ(c.frac, 0.25);
  EXPECT_TRUE(c.amount.set);
  EXPECT_FALSE(c.amount.is_fraction);
  EXPECT_EQ(c.amount.bytes, 2ull << 30);
  EXPECT_EQ(rp_amount_bytes(&c.amount, 80ull << 30), 2ull << 30);
}

TEST(Conf, BareValueGoesToTheBareKey) {
  Cfg c{};
  gm_err_t err{};
  ASSERT_EQ(rp_conf_parse("t", "0.5", kKeys, "amount", &c, &err), GM_OK) << err.msg;
  EXPECT_TRUE(c.amount.is_fraction);
  EXPECT_EQ(rp_amount_bytes(&c.amount, 1000), 500u);
}

TEST(Conf, UnknownKeyListsTheKnownOnes) {
  Cfg c{};
  gm_err_t err{};
  EXPECT_EQ(rp_conf_parse("bfc", "growth,bogus=1", kKeys, nullptr, &c, &err), GM_ERR_INVAL);
  EXPECT_STREQ(err.msg, "bfc: unknown key 'growth' (known: flag, b, size, frac, amount, str)");
  EXPECT_EQ(rp_conf_parse("bfc", "0.5", kKeys, nullptr, &c, &err), GM_ERR_INVAL);  // no bare key
}

TEST(Conf, BadValuesNameTheKey) {
  Cfg c{};
  gm_err_t err{};
  const char *bad[] = {"b=maybe", "b", "size=lots", "frac=1.5", "frac=0", "amount=0", "amount=1.5", "amount=-3",
                       "size"};
  for (const char *s : bad) {
    EXPECT_EQ(rp_conf_parse("t", s, kKeys, nullptr, &c, &err), GM_ERR_INVAL) << s;
    std::string key = std::string(s).substr(0, std::string(s).find('='));
    EXPECT_NE(std::string(err.msg).find("t: bad value for '" + key + "'"), std::string::npos) << s << ": " << err.msg;
  }
}

TEST(Conf, StringKeepsTheValueVerbatim) {
  Cfg c{};
  gm_err_t err{};
  ASSERT_EQ(rp_conf_parse("t", "str= True ", kKeys, nullptr, &c, &err), GM_OK) << err.msg;
  EXPECT_STREQ(c.str, "True");  // case kept: the policy compares as its framework does
  ASSERT_EQ(rp_conf_parse("t", "str:cuda_malloc_async", kKeys, nullptr, &c, &err), GM_OK) << err.msg;
  EXPECT_STREQ(c.str, "cuda_malloc_async");
  EXPECT_EQ(rp_conf_parse("t", "str", kKeys, nullptr, &c, &err), GM_ERR_INVAL);
  EXPECT_STREQ(err.msg, "t: bad value for 'str': needs a value");
  EXPECT_EQ(rp_conf_parse("t", "str=", kKeys, nullptr, &c, &err), GM_ERR_INVAL);
  std::string long_value = "str=" + std::string(RP_CONF_STR_MAX, 'x');
  EXPECT_EQ(rp_conf_parse("t", long_value.c_str(), kKeys, nullptr, &c, &err), GM_ERR_INVAL);
  EXPECT_NE(std::string(err.msg).find("value too long"), std::string::npos) << err.msg;
}

TEST(Conf, AmountDistinguishesFractionsFromSizes) {
  rp_amount_t a;
  gm_err_t err{};
  ASSERT_EQ(rp_amount_parse("1", &a, &err), GM_OK);
  EXPECT_TRUE(a.is_fraction);
  ASSERT_EQ(rp_amount_parse("4096", &a, &err), GM_OK);
  EXPECT_FALSE(a.is_fraction);
  EXPECT_EQ(a.bytes, 4096u);
  ASSERT_EQ(rp_amount_parse("1.5GiB", &a, &err), GM_OK);
  EXPECT_EQ(a.bytes, 3ull << 29);
}

}  // namespace
