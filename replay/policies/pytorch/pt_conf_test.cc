// pt_conf_test.cc: PYTORCH_CUDA_ALLOC_CONF parsing (torch 2.11 rules) and the size functions,
// against hand-computed values.
#include <gtest/gtest.h>

#include <string>

#include "replay/policies/pytorch/rp_pytorch.h"

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

rp_pytorch_conf_t Parse(const char *s) {
  rp_pytorch_conf_t c;
  rp_pytorch_conf_default(&c);
  gm_err_t e{};
  EXPECT_EQ(rp_pytorch_conf_parse(s, &c, &e), GM_OK) << s << ": " << e.msg;
  return c;
}

std::string ParseError(const char *s) {
  rp_pytorch_conf_t c;
  rp_pytorch_conf_default(&c);
  gm_err_t e{};
  EXPECT_EQ(rp_pytorch_conf_parse(s, &c, &e), GM_ERR_INVAL) << s;
  return e.msg;
}

TEST(PytorchConf, Defaults) {
  rp_pytorch_conf_t c = Parse("");
  EXPECT_EQ(c.max_split_size, UINT64_MAX);
  EXPECT_EQ(c.large_segment_size, 20 * MiB);
  EXPECT_EQ(c.max_non_split_rounding, 20 * MiB);
  EXPECT_EQ(c.gc_threshold, 0.0);
  EXPECT_EQ(c.memory_fraction, 1.0);
  EXPECT_EQ(c.expandable_segments, 0);
  for (uint64_t d : c.roundup_divisions) EXPECT_EQ(d, 0u);
}

TEST(PytorchConf, ParsesEveryDeviceKeyWithWhitespace) {
  rp_pytorch_conf_t c = Parse(
      " max_split_size_mb : 128 , max_non_split_rounding_mb:64,garbage_collection_threshold:0.6,"
      "expandable_segments:True,per_process_memory_fraction:0.75,large_segment_size_mb:32");
  EXPECT_EQ(c.max_split_size, 128 * MiB);
  EXPECT_EQ(c.max_non_split_rounding, 64 * MiB);
  EXPECT_DOUBLE_EQ(c.gc_threshold, 0.6);
  EXPECT_EQ(c.expandable_segments, 1);
  EXPECT_DOUBLE_EQ(c.memory_fraction, 0.75);
  EXPECT_EQ(c.large_segment_size, 32 * MiB);
}

TEST(PytorchConf, LargeSegmentSizeSetsFloorsAndDefaultWhereverItIs) {
  // read in a first pass, so it applies to keys before it in the string
  rp_pytorch_conf_t c = Parse("max_split_size_mb:40,large_segment_size_mb:40");
  EXPECT_EQ(c.max_split_size, 40 * MiB);
  EXPECT_EQ(c.max_non_split_rounding, 40 * MiB);
  EXPECT_NE(ParseError("max_split_size_mb:39,large_segment_size_mb:40").find("max_split_size_mb"), std::string::npos);
  EXPECT_NE(ParseError("max_non_split_rounding_mb:20,large_segment_size_mb:32").find("max_non_split_rounding_mb"),
            std::string::npos);
  EXPECT_NE(ParseError("large_segment_size_mb:10").find("large_segment_size_mb"), std::string::npos);
  Parse("large_segment_size_mb:11");
}

TEST(PytorchConf, MaxSplitSizeFloorIsTwentyInclusive) {
  EXPECT_EQ(Parse("max_split_size_mb:20").max_split_size, 20 * MiB);
  std::string m = ParseError("max_split_size_mb:19");
  EXPECT_NE(m.find("max_split_size_mb"), std::string::npos);
  EXPECT_NE(m.find(">= 20"), std::string::npos) << m;
}

TEST(PytorchConf, IgnoredKeysAreValidated) {
  Parse("release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:False,pinned_num_register_threads:8,"
        "pinned_use_background_threads:True,graph_capture_record_stream_reuse:False,backend:native,"
        "pinned_reserve_segment_size_mb:16,release_lock_on_hipmalloc:False");
  EXPECT_NE(ParseError("release_lock_on_cudamalloc:yes").find("release_lock_on_cudamalloc"), std::string::npos);
  EXPECT_NE(ParseError("pinned_num_register_threads:3").find("pinned_num_register_threads"), std::string::npos);
  EXPECT_NE(ParseError("pinned_num_register_threads:256").find("pinned_num_register_threads"), std::string::npos);
  EXPECT_NE(ParseError("expandable_segments:true").find("expandable_segments"), std::string::npos);
}

TEST(PytorchConf, KeysNewerThanTorch211AreUnknown) {
  // torch 2.11.0+cu130 answers "Unrecognized key" for these (tools/torch_keys.py)
  for (const char *s : {"throw_on_cudamalloc_oom:False", "pinned_free_catch_all:False", "expandable_segments_reserve:0.5"})
    EXPECT_NE(ParseError(s).find("unknown key"), std::string::npos) << s;
}

TEST(PytorchConf, BackendAsyncPointsToAsyncPolicy) {
  std::string m = ParseError("backend:cudaMallocAsync");
  EXPECT_NE(m.find("async"), std::string::npos) << m;
  EXPECT_NE(m.find("backend"), std::string::npos) << m;
  EXPECT_NE(ParseError("backend:foo").find("backend"), std::string::npos);
}

TEST(PytorchConf, ErrorsNameTheKey) {
  EXPECT_NE(ParseError("max_split_size:128").find("'max_split_size'"), std::string::npos);
  EXPECT_NE(ParseError("max_split_size_mb:abc").find("max_split_size_mb"), std::string::npos);
  EXPECT_NE(ParseError("max_split_size_mb:-1").find("max_split_size_mb"), std::string::npos);
  EXPECT_NE(ParseError("max_split_size_mb").find("max_split_size_mb"), std::string::npos);
  EXPECT_NE(ParseError("garbage_collection_threshold:1.0").find("garbage_collection_threshold"), std::string::npos);
  EXPECT_NE(ParseError("garbage_collection_threshold:0").find("garbage_collection_threshold"), std::string::npos);
  EXPECT_NE(ParseError("per_process_memory_fraction:1.5").find("per_process_memory_fraction"), std::string::npos);
  EXPECT_NE(ParseError("roundup_power2_divisions:3").find("roundup_power2_divisions"), std::string::npos);
  EXPECT_NE(ParseError("roundup_power2_divisions:0").find("roundup_power2_divisions"), std::string::npos);
  EXPECT_NE(ParseError("roundup_power2_divisions:[100:2]").find("roundup_power2_divisions"), std::string::npos);
  EXPECT_NE(ParseError("roundup_power2_divisions:[256:3]").find("roundup_power2_divisions"), std::string::npos);
  EXPECT_NE(ParseError("roundup_power2_divisions:[256:2").find("roundup_power2_divisions"), std::string::npos);
  EXPECT_NE(ParseError("expandable_segments:True max_split_size_mb:30").find("expandable_segments"), std::string::npos);
}

// Issue 12 item 7: a token is never cut (a 70-digit number used to be read from its first 63
// digits), and more than 512 tokens says so.
TEST(PytorchConf, LongTokensAndTooManyTokensAreRefusedByName) {
  std::string v64 = std::string(61, '0') + "128", v65 = "0" + v64;
  EXPECT_EQ(Parse(("max_split_size_mb:" + v64).c_str()).max_split_size, 128 * MiB);
  EXPECT_EQ(ParseError(("max_split_size_mb:" + v65).c_str()),
            "pytorch: token '000000000000000000000000...' has 65 bytes, more than 64 (limit MAX_TOKEN)");
  // whitespace does not count (torch drops it)
  EXPECT_EQ(Parse(("max_split_size_mb: " + v64 + " ").c_str()).max_split_size, 128 * MiB);
  std::string many = "expandable_segments:True";  // 3 tokens, then 4 per repetition
  for (int k = 0; k < 127; k++) many += ",expandable_segments:True";
  EXPECT_TRUE(Parse(many.c_str()).expandable_segments);  // 511 tokens
  many += ",expandable_segments:True";
  EXPECT_EQ(ParseError(many.c_str()),
            "pytorch: the configuration has more than 512 tokens (limit MAX_TOKENS; each key, value and "
            "',', ':', '[', ']' is one)");
}

TEST(PytorchConf, RoundupSingleValueFillsEveryInterval) {
  rp_pytorch_conf_t c = Parse("roundup_power2_divisions:4");
  for (uint64_t d : c.roundup_divisions) EXPECT_EQ(d, 4u);
}

TEST(PytorchConf, RoundupListUsesTheCodesIndexSemantics) {
  // 256 -> index 8 = sizes in [256 MiB, 512 MiB); the first entry fills 0..7; '>' fills 11..15
  rp_pytorch_conf_t c = Parse("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
  for (int i = 0; i <= 8; i++) EXPECT_EQ(c.roundup_divisions[i], 1u) << i;
  EXPECT_EQ(c.roundup_divisions[9], 2u);
  EXPECT_EQ(c.roundup_divisions[10], 4u);
  for (int i = 11; i < 16; i++) EXPECT_EQ(c.roundup_divisions[i], 8u) << i;
  // so a 300 MiB request gets 1 division (512 B rounding), not the docs' 2
  EXPECT_EQ(rp_pytorch_round_size(&c, 300 * MiB + 1), 300 * MiB + 512);
  EXPECT_EQ(rp_pytorch_round_size(&c, 600 * MiB + 1), 768 * MiB);         // 2 divisions of [512M,1G)
  EXPECT_EQ(rp_pytorch_round_size(&c, 1536 * MiB + 1), 1792 * MiB);       // 4 divisions of [1G,2G)
  EXPECT_EQ(rp_pytorch_round_size(&c, 3 * GiB + 1), 3 * GiB + 256 * MiB); // 8 divisions of [2G,4G)
}

TEST(PytorchConf, RoundupGreaterAloneLeavesIndexZero) {
  rp_pytorch_conf_t c = Parse("roundup_power2_divisions:[>:8]");
  EXPECT_EQ(c.roundup_divisions[0], 0u);
  for (int i = 1; i < 16; i++) EXPECT_EQ(c.roundup_divisions[i], 8u);
  // the boundary is clamped to the last interval
  rp_pytorch_conf_t d = Parse("roundup_power2_divisions:[1:2,1048576:4]");
  EXPECT_EQ(d.roundup_divisions[0], 2u);
  EXPECT_EQ(d.roundup_divisions[14], 0u);
  EXPECT_EQ(d.roundup_divisions[15], 4u);
}

TEST(PytorchRoundSize, Defaults) {
  rp_pytorch_conf_t c = Parse("");
  EXPECT_EQ(rp_pytorch_round_size(&c, 0), 512u);
  EXPECT_EQ(rp_pytorch_round_size(&c, 1), 512u);
  EXPECT_EQ(rp_pytorch_round_size(&c, 512), 512u);
  EXPECT_EQ(rp_pytorch_round_size(&c, 513), 1024u);
  EXPECT_EQ(rp_pytorch_round_size(&c, 1200), 1536u);
  EXPECT_EQ(rp_pytorch_round_size(&c, 3 * MiB + 1), 3 * MiB + 512);
}

TEST(PytorchRoundSize, PowerTwoDivisions) {
  rp_pytorch_conf_t c = Parse("roundup_power2_divisions:4");
  EXPECT_EQ(rp_pytorch_round_size(&c, 1200), 1536u);  // 1200 <= 512*4: plain 512 rounding (docs say 1280)
  EXPECT_EQ(rp_pytorch_round_size(&c, 2049), 2560u);  // floor 2048, step 512
  EXPECT_EQ(rp_pytorch_round_size(&c, 3 * MiB / 2 + 1), 7 * MiB / 4);
  EXPECT_EQ(rp_pytorch_round_size(&c, 4 * MiB), 4 * MiB);  // powers of two unchanged
  EXPECT_EQ(rp_pytorch_round_size(&c, 5 * MiB), 5 * MiB); // already on a division
  rp_pytorch_conf_t big = Parse("roundup_power2_divisions:2048");
  EXPECT_EQ(rp_pytorch_round_size(&big, 1536 * KiB + 1), 1536 * KiB + 512);  // 512 B steps of [1M,2M)
}

TEST(PytorchAllocationSize, SegmentSizes) {
  rp_pytorch_conf_t c = Parse("");
  EXPECT_EQ(rp_pytorch_allocation_size(&c, 512), 2 * MiB);
  EXPECT_EQ(rp_pytorch_allocation_size(&c, MiB), 2 * MiB);
  EXPECT_EQ(rp_pytorch_allocation_size(&c, MiB + 512), 20 * MiB);
  EXPECT_EQ(rp_pytorch_allocation_size(&c, 3 * MiB), 20 * MiB);
  EXPECT_EQ(rp_pytorch_allocation_size(&c, 10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(rp_pytorch_allocation_size(&c, 10 * MiB), 10 * MiB);
  EXPECT_EQ(rp_pytorch_allocation_size(&c, 21 * MiB / 2), 12 * MiB);
  rp_pytorch_conf_t l = Parse("large_segment_size_mb:64");
  EXPECT_EQ(rp_pytorch_allocation_size(&l, 3 * MiB), 64 * MiB);
}

}  // namespace
