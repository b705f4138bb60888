// The CPU float64 reference on cases small enough to check by hand, and the host dtype
// conversions it is fed with.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include <evodispatch/kernels/dtype.hpp>
#include <evodispatch/kernels/reference.hpp>

using namespace evodispatch;

namespace {

Shape tiny(int batch, int lq, int lk, int hq, int hkv, int d) {
  Shape s;
  s.batch = batch;
  s.seqlen_q = lq;
  s.seqlen_k = lk;
  s.h_q = hq;
  s.h_kv = hkv;
  s.head_dim = d;
  return s;
}

ReferenceOutputs run(const Shape& s, const std::vector<float>& q, const std::vector<float>& k,
                     const std::vector<float>& v, const std::vector<int>& lens = {}) {
  ReferenceInputs in;
  in.shape = s;
  in.q = q;
  in.k = k;
  in.v = v;
  in.cache_seqlens = lens;
  return reference_attention(in);
}

// v[b, j, h, d] = 100 b + 10 j + h + d / 10, so every row tells where it came from.
std::vector<float> labelled_kv(const Shape& s) {
  std::vector<float> v;
  for (int b = 0; b < s.batch; ++b)
    for (int j = 0; j < s.seqlen_k; ++j)
      for (int h = 0; h < s.h_kv; ++h)
        for (int d = 0; d < s.head_dim; ++d) v.push_back(100.f * b + 10.f * j + h + d / 10.f);
  return v;
}

double v_at(int b, int j, int h, int d) { return 100.0 * b + 10.0 * j + h + static_cast<float>(d / 10.f); }

}  // namespace

TEST(Reference, OneKeyGivesItsValue) {
  const Shape s = tiny(1, 1, 1, 1, 1, 4);
  const std::vector<float> q = {1, 2, 3, 4}, k = {0.5f, -1, 2, 0}, v = {7, -3, 0.25f, 9};
  const auto r = run(s, q, k, v);
  for (int d = 0; d < 4; ++d) EXPECT_DOUBLE_EQ(r.out[d], v[d]);
  // LSE of one score is the score: (0.5 - 2 + 6 + 0) / sqrt(4).
  EXPECT_DOUBLE_EQ(r.lse[0], 4.5 / 2.0);
}

TEST(Reference, UniformScoresAverageTheValues) {
  const Shape s = tiny(1, 1, 5, 1, 1, 2);
  const std::vector<float> q = {0, 0};  // every score 0
  std::vector<float> k(10, 1.f), v = {1, 10, 2, 20, 3, 30, 4, 40, 5, 50};
  const auto r = run(s, q, k, v);
  EXPECT_DOUBLE_EQ(r.out[0], 3.0);
  EXPECT_DOUBLE_EQ(r.out[1], 30.0);
  EXPECT_NEAR(r.lse[0], std::log(5.0), 1e-15);
}

TEST(Reference, SoftmaxWeightsFollowTheScores) {
  // Two keys with scores 0 and ln 3 (scale 1): weights 1/4 and 3/4.
  const Shape s = tiny(1, 1, 2, 1, 1, 1);
  ReferenceInputs in;
  in.shape = s;
  const std::vector<float> q = {1}, k = {0, static_cast<float>(std::log(3.0))}, v = {4, 8};
  in.q = q, in.k = k, in.v = v;
  in.softmax_scale = 1.0;
  const auto r = reference_attention(in);
  EXPECT_NEAR(r.out[0], 0.25 * 4 + 0.75 * 8, 1e-6);
  EXPECT_NEAR(r.lse[0], std::log(4.0), 1e-6);
}

TEST(Reference, CausalMaskingInsideTheNewTokens) {
  // Lq = 3 new tokens at the end of 5 keys: token i sees keys [0, 2 + i].
  const Shape s = tiny(1, 3, 5, 1, 1, 2);
  const std::vector<float> q(3 * 2, 0.f), k(5 * 2, 1.f);
  const auto v = labelled_kv(s);
  const auto r = run(s, q, k, v);
  for (int i = 0; i < 3; ++i) {
    const int seen = 3 + i;
    double mean = 0;
    for (int j = 0; j < seen; ++j) mean += v_at(0, j, 0, 0);
    EXPECT_NEAR(r.out[i * 2], mean / seen, 1e-12) << "token " << i;
    EXPECT_NEAR(r.lse[i], std::log(seen), 1e-12) << "token " << i;
  }
  Shape full = s;
  full.causal = false;
  const auto nc = run(full, q, k, v);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(nc.out[i * 2], (0 + 10 + 20 + 30 + 40) / 5.0, 1e-12);
}

TEST(Reference, RowThatSeesNoKeyIsZeroWithMinusInfinityLse) {
  // Lq = 3 but the request has only 1 key: token 0 and 1 see nothing.
  const Shape s = tiny(1, 3, 1, 1, 1, 2);
  const std::vector<float> q(6, 1.f), k(2, 1.f), v = {5, 6};
  const auto r = run(s, q, k, v);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(r.out[i * 2], 0.0);
    EXPECT_EQ(r.lse[i], -std::numeric_limits<double>::infinity());
  }
  EXPECT_DOUBLE_EQ(r.out[4], 5.0);
}

TEST(Reference, GqaHeadMapping) {
  // Hq = 6, Hkv = 2: query heads 0-2 read KV head 0, heads 3-5 read KV head 1.
  const Shape s = tiny(1, 1, 1, 6, 2, 2);
  const std::vector<float> q(6 * 2, 0.3f), k(2 * 2, 1.f);
  const auto v = labelled_kv(s);
  const auto r = run(s, q, k, v);
  for (int h = 0; h < 6; ++h) EXPECT_DOUBLE_EQ(r.out[h * 2], v_at(0, 0, h / 3, 0)) << "head " << h;
}

TEST(Reference, PerRequestLengths) {
  const Shape s = tiny(2, 1, 4, 1, 1, 1);
  const std::vector<float> q(2, 0.f), k(8, 1.f);
  const auto v = labelled_kv(s);
  const auto r = run(s, q, k, v, {1, 3});
  EXPECT_DOUBLE_EQ(r.out[0], v_at(0, 0, 0, 0));
  EXPECT_NEAR(r.out[1], (v_at(1, 0, 0, 0) + v_at(1, 1, 0, 0) + v_at(1, 2, 0, 0)) / 3, 1e-12);
  EXPECT_NEAR(r.lse[1], std::log(3.0), 1e-12);
}

TEST(Reference, PagedEqualsContiguous) {
  // Random data; the paged cache holds the same rows in shuffled pages of 3.
  Shape s = tiny(2, 2, 10, 4, 2, 8);
  std::mt19937 rng(7);
  std::normal_distribution<float> n01;
  auto draw = [&](std::size_t n) {
    std::vector<float> x(n);
    for (auto& e : x) e = round_to(Dtype::bf16, n01(rng));
    return x;
  };
  const auto q = draw(2 * 2 * 4 * 8), k = draw(2 * 10 * 2 * 8), v = draw(2 * 10 * 2 * 8);
  const std::vector<int> lens = {10, 7};
  const auto contiguous = run(s, q, k, v, lens);

  const int page = 3, max_pages = 4, num_pages = 2 * max_pages + 1;
  std::vector<int> order(num_pages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int> table(2 * max_pages);
  std::vector<float> pk(num_pages * page * 2 * 8, NAN), pv(pk.size(), NAN);  // unused slots stay NaN
  for (int b = 0; b < 2; ++b)
    for (int slot = 0; slot < max_pages; ++slot) {
      const int id = order[b * max_pages + slot];
      table[b * max_pages + slot] = id;
      for (int r = 0; r < page; ++r) {
        const int j = slot * page + r;
        if (j >= lens[b]) continue;
        for (int e = 0; e < 2 * 8; ++e) {
          pk[(id * page + r) * 16 + e] = k[(b * 10 + j) * 16 + e];
          pv[(id * page + r) * 16 + e] = v[(b * 10 + j) * 16 + e];
        }
      }
    }
  s.page_size = page;
  ReferenceInputs in;
  in.shape = s;
  in.q = q, in.k = pk, in.v = pv;
  in.cache_seqlens = lens;
  in.page_table = table;
  in.max_pages = max_pages;
  const auto paged = reference_attention(in);
  ASSERT_EQ(paged.out.size(), contiguous.out.size());
  for (std::size_t i = 0; i < paged.out.size(); ++i) EXPECT_DOUBLE_EQ(paged.out[i], contiguous.out[i]) << i;
  for (std::size_t i = 0; i < paged.lse.size(); ++i) EXPECT_DOUBLE_EQ(paged.lse[i], contiguous.lse[i]) << i;
}

TEST(Reference, RefusesInconsistentInputs) {
  const Shape s = tiny(1, 1, 4, 2, 1, 4);
  const std::vector<float> q(8), k(4 * 4), v(4 * 4);
  EXPECT_THROW(run(s, std::vector<float>(7), k, v), InputError);
  EXPECT_THROW(run(s, q, k, v, {5}), InputError);  // longer than seqlen_k
}

TEST(Dtype, E4m3DecodesEveryClassOfValue) {
  EXPECT_EQ(e4m3_bits_to_float(0x38), 1.0f);          // exponent 7 = bias
  EXPECT_EQ(e4m3_bits_to_float(0x3c), 1.5f);          // mantissa 4/8
  EXPECT_EQ(e4m3_bits_to_float(0x7e), 448.0f);        // the largest finite value
  EXPECT_EQ(e4m3_bits_to_float(0x08), 0x1.0p-6f);     // the smallest normal
  EXPECT_EQ(e4m3_bits_to_float(0x01), 0x1.0p-9f);     // the smallest subnormal
  EXPECT_EQ(e4m3_bits_to_float(0x07), 7 * 0x1.0p-9f);
  EXPECT_EQ(e4m3_bits_to_float(0xb8), -1.0f);
  EXPECT_TRUE(std::isnan(e4m3_bits_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_bits_to_float(0xff)));
  EXPECT_TRUE(std::signbit(e4m3_bits_to_float(0x80)));
  // Every finite e4m3 value is exact in bf16 and fp16 (what the fp8 kernels rely on).
  for (int b = 0; b < 256; ++b) {
    const float f = e4m3_bits_to_float(static_cast<std::uint8_t>(b));
    if (std::isnan(f)) continue;
    EXPECT_EQ(round_to(Dtype::bf16, f), f) << b;
    EXPECT_EQ(round_to(Dtype::fp16, f), f) << b;
  }
}

TEST(Dtype, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(-2.0f), 0xc000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(float_to_bf16_bits(1.0f + 1.0f / 256), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even (1 + 2^-6).
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 1.5f / 256), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(NAN))));
  EXPECT_EQ(bf16_bits_to_float(float_to_bf16_bits(INFINITY)), INFINITY);
  EXPECT_EQ(round_to(Dtype::bf16, 3.14159265f), 3.140625f);
}

TEST(Dtype, Fp16RoundsToNearestEven) {
  EXPECT_EQ(float_to_fp16_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_fp16_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_fp16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16_bits(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16_bits(65520.0f), 0x7c00);  // halfway to 2^16 rounds to infinity
  EXPECT_EQ(float_to_fp16_bits(1.0f + 1.0f / 2048), 0x3c00);  // tie -> even
  EXPECT_EQ(float_to_fp16_bits(1.0f + 3.0f / 2048), 0x3c02);  // tie -> even
  EXPECT_EQ(float_to_fp16_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_fp16_bits(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (0)
  EXPECT_EQ(float_to_fp16_bits(std::ldexp(3.0f, -25)), 0x0002);  // tie -> even (2)
  EXPECT_EQ(float_to_fp16_bits(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(float_to_fp16_bits(std::ldexp(1023.5f, -24)), 0x0400);  // rounds up into the normals
  EXPECT_TRUE(std::isnan(fp16_bits_to_float(float_to_fp16_bits(NAN))));
  for (std::uint32_t b = 0; b < 0x7c00; ++b)  // every finite half survives a round trip
    ASSERT_EQ(float_to_fp16_bits(fp16_bits_to_float(static_cast<std::uint16_t>(b))), b) << b;
}
