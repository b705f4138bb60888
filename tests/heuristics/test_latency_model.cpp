// The latency model of the model-based program family (heuristics/latency_model.hpp):
// its Lua rendering and its C++ twin agree exactly, the rendering is recognised back, and
// bad models are refused with the field named.
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include <evodispatch/heuristics/dispatch_script.hpp>
#include <evodispatch/heuristics/latency_model.hpp>
#include <evodispatch/heuristics/policy.hpp>
#include "../support/devices.hpp"

using namespace evodispatch;

namespace {

DeviceInfo h100() { return test::h100_sxm(); }

Shape decode(int batch, int seqlen_k, int h_q, int h_kv, int head_dim = 128) {
  Shape s;
  s.batch = batch;
  s.seqlen_k = seqlen_k;
  s.h_q = h_q;
  s.h_kv = h_kv;
  s.head_dim = head_dim;
  return s;
}

// Random decode and speculative shapes over the whole contract, extremes included.
std::vector<Shape> random_shapes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  auto pick = [&](std::initializer_list<int> v) { return *(v.begin() + rng() % v.size()); };
  std::vector<Shape> out;
  for (std::size_t i = 0; i < n; ++i) {
    Shape s = decode(pick({1, 2, 3, 7, 16, 33, 128, 1000, 65536}), pick({1, 64, 100, 4097, 100000, 1 << 20}), 0,
                     pick({1, 2, 8, 32}), pick({64, 128, 256}));
    s.h_q = s.h_kv * pick({1, 4, 8, 71});
    s.seqlen_q = pick({1, 1, 4, 16});
    s.dtype = rng() % 3 == 0 ? Dtype::fp8 : Dtype::bf16;
    out.push_back(s);
  }
  return out;
}

LatencyModel odd_model() {
  LatencyModel m;
  m.splits = {1, 3, 5, 17, 128};
  m.pack_gqa = {false, true};
  m.sm_margins = {0, 8};
  m.ctas_per_sm = 3;
  m.cta_ps = 1234;
  m.tile_ps = 777;
  m.row_ps = 31;
  m.dram_ps_per_kib = 301;
  m.sm_ps_per_kib = 19000;
  m.combine_ps = 4100;
  m.combine_row_ps = 77;
  m.l2_ps_per_kib = 97;
  m.sm_l2_ps_per_kib = 1511;
  m.box[0] = {64, 128};    // head_dim
  m.box[1] = {1, 4};       // seqlen_q
  m.box[3] = {1, 32};      // qpk
  m.box[4] = {2, 5000};    // ctas
  m.box[5] = {64, 200000}; // seqlen_k
  m.box[6] = {1, 16};      // rows: qpk * seqlen_q
  return m;
}

const std::string& fa3() {
  static const std::string source = *builtin_policy_source("fa3");
  return source;
}

Decision decide(const LatencyModel& m, const Shape& s) { return model_decision(m, s, h100(), fa3_reference(s, h100())); }

}  // namespace

TEST(LatencyModel, TheLuaProgramDecidesExactlyAsTheCppTwin) {
  LatencyModel eager = odd_model();
  eager.min_gain_permille = 0;
  LatencyModel cautious = odd_model();
  cautious.min_gain_permille = 200;
  int baseline_kept = 0;
  for (const LatencyModel& m : {LatencyModel{}, eager, cautious}) {
    auto script = DispatchScript::load("model", render_lua(m, fa3()));
    for (const Shape& s : random_shapes(400, 7)) {
      const DispatchOutcome out = script->dispatch(s, h100());
      ASSERT_TRUE(out.ok()) << out.error << " on " << describe(s);
      EXPECT_EQ(out.decision, decide(m, s)) << describe(s);
      baseline_kept += out.decision == resolve(fa3_reference(s, h100()), s) ? 1 : 0;
    }
  }
  EXPECT_GT(baseline_kept, 0);
  EXPECT_LT(baseline_kept, 1200);
}

TEST(LatencyModel, TheBaselineStandsUnlessTheGainIsLargeEnough) {
  LatencyModel m = odd_model();
  int kept_eager = 0, kept_cautious = 0;
  for (const Shape& s : random_shapes(300, 11)) {
    const Decision b = resolve(fa3_reference(s, h100()), s);
    m.min_gain_permille = 0;
    kept_eager += decide(m, s) == b;
    m.min_gain_permille = 500;
    const Decision d = decide(m, s);
    kept_cautious += d == b;
    if (d != b)  // only a predicted gain of more than half overrides the baseline
      EXPECT_LT(predict_ps(m, s, h100(), d.num_splits, *d.pack_gqa, d.sm_margin) * 2,
                predict_ps(m, s, h100(), b.num_splits, *b.pack_gqa, b.sm_margin));
  }
  EXPECT_GT(kept_cautious, kept_eager);
}

TEST(LatencyModel, ItIsTheArgminOfItsPredictions) {
  LatencyModel m = odd_model();
  m.min_gain_permille = 0;
  for (const Shape& s : random_shapes(100, 3)) {
    const Decision d = decide(m, s);
    if (d == resolve(fa3_reference(s, h100()), s)) continue;
    const std::int64_t chosen = predict_ps(m, s, h100(), d.num_splits, *d.pack_gqa, d.sm_margin);
    for (int g : m.sm_margins)
      for (bool p : m.pack_gqa)
        for (int k : m.splits) EXPECT_LE(chosen, predict_ps(m, s, h100(), k, p, g)) << describe(s);
  }
}

namespace {
// A model whose every cost is zero but the ones a test names.
LatencyModel costs_only(std::int64_t LatencyModel::*a, std::int64_t va, std::int64_t LatencyModel::*b = nullptr,
                        std::int64_t vb = 0) {
  LatencyModel m;
  for (const auto& p : latency_parameters())
    if (p.field != &LatencyModel::ctas_per_sm) m.*p.field = 0;
  m.*a = va;
  if (b) m.*b = vb;
  return m;
}
}  // namespace

TEST(LatencyModel, AnUnpackedGroupReadsItsKvFromDramOnceAndFromL2ForTheOtherHeads) {
  // B=1 Lk=1024 Hq=8 Hkv=1 D=128: 8 blocks, 512 KiB of K and V.
  const Shape s = decode(1, 1024, 8, 1);
  LatencyModel m = costs_only(&LatencyModel::dram_ps_per_kib, 300, &LatencyModel::l2_ps_per_kib, 100);
  EXPECT_EQ(predict_ps(m, s, h100(), 1, true, 0), 512 * 300);
  // Eight CTAs, one per query head: one DRAM read and seven L2 reads of each KiB, shared.
  EXPECT_EQ(predict_ps(m, s, h100(), 1, false, 0), 512 * 8 * (300 + 7 * 100) / 8);
  // Into one SM likewise: the SM term is the larger here.
  m = costs_only(&LatencyModel::sm_ps_per_kib, 3000, &LatencyModel::sm_l2_ps_per_kib, 1000);
  EXPECT_EQ(predict_ps(m, s, h100(), 1, false, 0), 512 * (3000 + 7 * 1000) / 8);
}

TEST(LatencyModel, SplitsPastTheLastBlockReadNothing) {
  // 8 blocks over 64 splits: 8 CTAs of 64 read one block each, as one split read them all.
  const Shape s = decode(1, 1024, 8, 1);
  const LatencyModel m = costs_only(&LatencyModel::dram_ps_per_kib, 300);
  EXPECT_EQ(predict_ps(m, s, h100(), 64, true, 0), predict_ps(m, s, h100(), 1, true, 0));
  EXPECT_EQ(predict_ps(m, s, h100(), 8, true, 0), predict_ps(m, s, h100(), 1, true, 0));
}

TEST(LatencyModel, TheCombineMergesManySplitsInLanesAndRunsInWaves) {
  const LatencyModel m = costs_only(&LatencyModel::combine_ps, 1000, &LatencyModel::combine_row_ps, 10);
  // One long request, 4 query rows at D = 128: up to 8 splits one lane of 8 rows per CTA
  // (all 4 rows in one CTA); 64 splits take 8 lanes, so one row per CTA, 4 CTAs at once.
  const Shape one = decode(1, 65536, 4, 1);
  EXPECT_EQ(predict_ps(m, one, h100(), 1, true, 0), 0);
  EXPECT_EQ(predict_ps(m, one, h100(), 8, true, 0), 1000 + 8 * 4 * 10);
  EXPECT_EQ(predict_ps(m, one, h100(), 64, true, 0), 1000 + 64 * 1 * 10);
  // 32 000 rows at 8 per CTA: 4 000 CTAs over 132 SMs x 8 are four waves.
  EXPECT_EQ(predict_ps(m, decode(1000, 65536, 32, 8), h100(), 8, true, 0), 4 * (1000 + 8 * 8 * 10));
  // Rows per CTA follow the head dim: 16 at D = 64, 4 at D = 256.
  EXPECT_EQ(model_combine_rows_per_cta(8, 64), 16);
  EXPECT_EQ(model_combine_rows_per_cta(8, 256), 4);
  EXPECT_EQ(model_combine_rows_per_cta(64, 64), 2);
}

TEST(LatencyModel, CtaSlotsPerSmFollowTheHeadDim) {
  // 2 slots per SM at D = 128: 4 at D = 64, 1 at D = 256. 528 one-block CTAs of the cost
  // cta_ps each are one wave at D = 64 and two at D = 128.
  const LatencyModel m = costs_only(&LatencyModel::cta_ps, 1000);
  EXPECT_EQ(predict_ps(m, decode(528, 64, 1, 1, 64), h100(), 1, true, 0), 1000);
  EXPECT_EQ(predict_ps(m, decode(528, 64, 1, 1, 128), h100(), 1, true, 0), 2000);
  EXPECT_EQ(predict_ps(m, decode(528, 64, 1, 1, 256), h100(), 1, true, 0), 4000);
}

TEST(LatencyModel, FewCtasOnALongCacheSplitAndAFullGpuDoesNot) {
  const LatencyModel m;
  EXPECT_GE(decide(m, decode(1, 100000, 64, 1)).num_splits, 16);
  EXPECT_EQ(decide(m, decode(128, 4096, 64, 8)).num_splits, 1);
}

TEST(LatencyModel, ARenderingIsRecognisedAndAnEditedOneIsNot) {
  const std::string lua = render_lua(odd_model(), fa3());
  ASSERT_TRUE(latency_model_of(lua).has_value());
  EXPECT_EQ(latency_model_of(lua)->model, odd_model());
  EXPECT_EQ(latency_model_of(lua)->baseline_source, fa3());
  std::string edited = lua;
  edited.replace(edited.rfind("(a + b - 1)"), 11, "(a + b + 1)");  // in the model, not the baseline
  EXPECT_FALSE(latency_model_of(edited).has_value());
  std::string param = lua;
  param.replace(param.find("cta_ps = 1234"), 13, "cta_ps = 1235");
  ASSERT_TRUE(latency_model_of(param).has_value());  // a perturbed parameter is still a model
  EXPECT_EQ(latency_model_of(param)->model.cta_ps, 1235);
  EXPECT_FALSE(latency_model_of("function dispatch(s, hw) return {num_splits = 1} end\n").has_value());
  EXPECT_FALSE(latency_model_of("").has_value());
}

TEST(LatencyModel, JsonRoundTripsAndRefusesWhatItDoesNotKnow) {
  const LatencyModel m = odd_model();
  EXPECT_EQ(latency_model_from_json(to_json(m)), m);
  nlohmann::json extra = to_json(m);
  extra["parameters"]["tile_us"] = 1;
  EXPECT_THROW(
      {
        try {
          latency_model_from_json(extra, "$.model");
        } catch (const InputError& e) {
          EXPECT_NE(std::string(e.what()).find("$.model.parameters"), std::string::npos) << e.what();
          throw;
        }
      },
      InputError);
  nlohmann::json bad = to_json(m);
  bad["splits"] = {0, 2};
  EXPECT_THROW(latency_model_from_json(bad), InputError);
  bad = to_json(m);
  bad["parameters"]["ctas_per_sm"] = 0;
  EXPECT_THROW(latency_model_from_json(bad), InputError);
}

TEST(LatencyModel, HugeShapesSaturateInsteadOfOverflowing) {
  LatencyModel m;
  for (const auto& p : latency_parameters()) m.*p.field = p.hi;
  Shape s = decode(65536, 1 << 20, 4096, 1, 256);
  EXPECT_GT(predict_ps(m, s, h100(), 1, true, 131), 0);
  auto script = DispatchScript::load("model", render_lua(m, fa3()));
  EXPECT_EQ(script->dispatch(s, h100()).decision, decide(m, s));
}

TEST(LatencyModel, OutsideItsBoxTheBaselineDecides) {
  LatencyModel m = odd_model();
  m.min_gain_permille = 0;
  // A shape inside the box where the model departs from FA3.
  Shape inside;
  bool found = false;
  for (const Shape& s : random_shapes(400, 3))
    if (s.head_dim == 128 && s.seqlen_k >= 64 && s.seqlen_k <= 100000 && s.seqlen_q == 1 && s.h_q / s.h_kv <= 16 &&
        std::int64_t{s.batch} * s.h_kv >= 2 && std::int64_t{s.batch} * s.h_kv <= 2500 &&
        decide(m, s) != resolve(fa3_reference(s, h100()), s)) {
      inside = s;
      found = true;
      break;
    }
  ASSERT_TRUE(found);
  Shape wider = inside;
  wider.head_dim = 256;  // a head dim the model was not fitted on
  EXPECT_EQ(decide(m, wider), resolve(fa3_reference(wider, h100()), wider));
  Shape longer = inside;
  longer.seqlen_k = 300000;  // beyond its longest cache
  EXPECT_EQ(decide(m, longer), resolve(fa3_reference(longer, h100()), longer));
  // Packed rows past the box's: a qpk and a seqlen_q each inside their range, not together.
  LatencyModel rows_unbounded = m;
  rows_unbounded.box[6] = ModelRange{};
  int taller = 0;
  for (Shape s : random_shapes(400, 4)) {
    s.seqlen_q = 4;
    if (s.head_dim > 128 || s.seqlen_k < 64 || s.seqlen_k > 200000 || s.h_q / s.h_kv != 8 ||
        std::int64_t{s.batch} * s.h_kv < 2 || std::int64_t{s.batch} * s.h_kv > 5000 ||
        decide(rows_unbounded, s) == resolve(fa3_reference(s, h100()), s))
      continue;
    ++taller;
    EXPECT_EQ(decide(m, s), resolve(fa3_reference(s, h100()), s)) << describe(s);
  }
  EXPECT_GT(taller, 0);
  const ModelBox hull = model_box_of({decode(2, 100000, 8, 1), decode(4, 64, 32, 8, 64)});
  EXPECT_EQ(hull[0], (ModelRange{64, 128}));
  EXPECT_EQ(hull[3], (ModelRange{4, 8}));
  EXPECT_EQ(hull[4], (ModelRange{2, 32}));
  EXPECT_EQ(hull[5], (ModelRange{64, 100000}));
  EXPECT_EQ(hull[6], (ModelRange{4, 8}));
  nlohmann::json written_before_boxes = to_json(m);
  written_before_boxes.erase("box");
  EXPECT_EQ(latency_model_from_json(written_before_boxes).box, ModelBox{});
  nlohmann::json older = to_json(m);
  older["parameters"].erase("l2_ps_per_kib");
  try {
    latency_model_from_json(older);
    ADD_FAILURE() << "a model without l2_ps_per_kib was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("$.parameters.l2_ps_per_kib: missing"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("distill the program again"), std::string::npos) << e.what();
  }
  nlohmann::json bad = to_json(m);
  bad["box"]["qpk"] = {9, 3};
  EXPECT_THROW(latency_model_from_json(bad), InputError);
}
