#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <evodispatch/heuristics/contract.hpp>

using namespace evodispatch;
using ::testing::HasSubstr;

namespace {
Shape paper_shape() {
  Shape s;
  s.batch = 1;
  s.seqlen_k = 512;
  s.h_q = 64;
  s.h_kv = 1;
  return s;
}

std::string error_of(const nlohmann::json& j) {
  try {
    shape_from_json(j, "$.shapes[3]");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Contract, FeaturesAreDerivedFromTheShape) {
  Shape s = paper_shape();
  EXPECT_EQ(features(s).qpk, 64);
  EXPECT_EQ(features(s).block_n, 128);
  EXPECT_EQ(features(s).nblk, 4);
  s.seqlen_k = 513;
  EXPECT_EQ(features(s).nblk, 5);
  s.head_dim = 256;
  EXPECT_EQ(features(s).block_n, 64);
  EXPECT_EQ(features(s).nblk, 9);
}

TEST(Contract, CrossGpuFeaturesScaleWithTheDeviceAndTheDtype) {
  Shape s = paper_shape();  // B=1 Hkv=1 Lk=512 D=128
  DeviceInfo hw;
  hw.num_sms = 132;
  EXPECT_EQ(waves_pct(s, hw), 0);  // 1 CTA of 132 SMs
  s.batch = 33;
  s.h_kv = 8;
  EXPECT_EQ(waves_pct(s, hw), 200);  // 264 CTAs: two waves
  hw.num_sms = 78;
  EXPECT_EQ(waves_pct(s, hw), 338);  // the same shape is 3.38 waves on 78 SMs
  EXPECT_EQ(kv_kib(s), 256);         // K and V: 2 * 512 rows * 128 * 2 bytes
  s.dtype = Dtype::fp8;
  EXPECT_EQ(kv_kib(s), 128);
  s.dtype = Dtype::bf16;
  s.head_dim = 64;
  s.seqlen_k = 1000;
  EXPECT_EQ(kv_kib(s), 250);
  s.seqlen_k = 3;
  EXPECT_EQ(kv_kib(s), 0);  // rounds down
}

TEST(Contract, ShapeRoundTripsThroughJson) {
  Shape s = paper_shape();
  s.seqlen_q = 4;
  s.dtype = Dtype::fp16;
  s.page_size = 16;
  s.causal = false;
  s.head_dim = 64;
  EXPECT_EQ(shape_from_json(to_json(s)), s);
}

TEST(Contract, AnFp8CacheCarriesItsQueryDtype) {
  Shape s = paper_shape();
  s.dtype = Dtype::fp8;
  EXPECT_EQ(query_dtype(s), Dtype::bf16);
  EXPECT_FALSE(to_json(s).contains("q_dtype"));  // the default keeps older shapes' keys
  s.q_dtype = Dtype::fp16;
  EXPECT_EQ(query_dtype(s), Dtype::fp16);
  EXPECT_EQ(to_json(s).at("q_dtype"), "fp16");
  EXPECT_EQ(shape_from_json(to_json(s)), s);
  EXPECT_THAT(describe(s), HasSubstr("fp8 q=fp16"));
  Shape half = paper_shape();
  half.dtype = Dtype::fp16;
  EXPECT_EQ(query_dtype(half), Dtype::fp16);
  half.q_dtype = Dtype::fp16;  // a 16-bit cache takes no query dtype
  EXPECT_THROW(validate(half), InputError);
  EXPECT_THAT(error_of({{"seqlen_k", 512}, {"h_q", 64}, {"q_dtype", "fp16"}}),
              HasSubstr("$.shapes[3].q_dtype: only an fp8 KV cache"));
  EXPECT_THAT(error_of({{"seqlen_k", 512}, {"h_q", 64}, {"dtype", "fp8"}, {"q_dtype", "fp8"}}),
              HasSubstr("$.shapes[3].q_dtype: must be \"bf16\" or \"fp16\""));
}

TEST(Contract, DecisionRoundTripsAndResolvesPackGqa) {
  Decision d{7, std::nullopt, 4};
  EXPECT_EQ(decision_from_json(to_json(d)), d);
  EXPECT_EQ(resolve(d, paper_shape()).pack_gqa, true);
  Shape mha = paper_shape();
  mha.h_kv = 64;
  EXPECT_EQ(resolve(d, mha).pack_gqa, false);
  Decision explicit_off{1, false, 0};
  EXPECT_EQ(resolve(explicit_off, paper_shape()).pack_gqa, false);
}

TEST(Contract, DeviceRoundTrips) {
  DeviceInfo h{"H100", 132, 50 << 20, 3.35e12, 90};
  EXPECT_EQ(device_from_json(to_json(h)), h);
}

TEST(Contract, ShapeErrorsNameTheJsonPath) {
  EXPECT_THAT(error_of({{"seqlen_k", 512}, {"h_q", 64}, {"h_kv", 1}, {"colour", 1}}),
              HasSubstr("$.shapes[3].colour: unknown field"));
  EXPECT_THAT(error_of({{"seqlen_k", 512}, {"h_q", 64}, {"h_kv", 2.5}}),
              HasSubstr("$.shapes[3].h_kv: expected an integer, got 2.5"));
  EXPECT_THAT(error_of({{"seqlen_k", 512}, {"h_q", 64}, {"h_kv", 3}}), HasSubstr("$.shapes[3].h_q: must be a multiple"));
  EXPECT_THAT(error_of({{"seqlen_k", 512}, {"h_q", 64}, {"dtype", "fp32"}}), HasSubstr("$.shapes[3].dtype"));
  EXPECT_THAT(error_of({{"h_q", 64}}), HasSubstr("$.shapes[3].seqlen_k: missing"));
  EXPECT_THAT(error_of({{"seqlen_k", 512}, {"h_q", 64}, {"seqlen_q", 17}}), HasSubstr("$.shapes[3].seqlen_q"));
  EXPECT_THAT(error_of({{"seqlen_k", 512}, {"h_q", 64}, {"nblk", 9}}), HasSubstr("$.shapes[3].nblk: is derived"));
  EXPECT_THAT(error_of(nlohmann::json::array()), HasSubstr("$.shapes[3]: expected an object"));
  EXPECT_EQ(error_of({{"seqlen_k", 512}, {"h_q", 64}, {"h_kv", 1}, {"nblk", 4}, {"qpk", 64}}), "");
}

TEST(Contract, DecisionErrorsNameTheRange) {
  const DeviceInfo h{"H100", 132, 50 << 20, 3.35e12, 90};
  EXPECT_FALSE(decision_error({1, true, 0}, h));
  EXPECT_THAT(*decision_error({0, true, 0}, h), HasSubstr("num_splits must be in [1, 256]"));
  EXPECT_THAT(*decision_error({257, true, 0}, h), HasSubstr("got 257"));
  EXPECT_THAT(*decision_error({1, true, 132}, h), HasSubstr("sm_margin must be in [0, 131]"));
  EXPECT_FALSE(decision_error({256, false, 131}, h));
}

TEST(Contract, DescribeIsCompact) {
  EXPECT_EQ(describe(paper_shape()), "B=1 Lq=1 Lk=512 Hq=64 Hkv=1 D=128 bf16");
  EXPECT_EQ(describe(Decision{3, true, 0}), "splits=3 pack=1 margin=0");
}
