// The simulator: profiles, the wave model's effects, and the rows it returns.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>

#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/evaluator/gpu_probe.hpp>
#include <evodispatch/evaluator/simulator.hpp>
#include <evodispatch/evaluator/workload.hpp>

namespace evodispatch {
namespace {

double latency(const SimProfile& prof, const Shape& s, const Decision& d, L2Mode l2 = L2Mode::cold) {
  return predict_us(prof, sim_plan(prof, s, d), l2);
}

Shape shape(int batch, int seqlen_k, int h_q, int h_kv) {
  return Shape{batch, 1, seqlen_k, h_q, h_kv, 128, Dtype::bf16, 0, true};
}

Decision dec(int splits, std::optional<bool> pack = std::nullopt, int margin = 0) {
  return Decision{splits, pack, margin};
}

std::string error_of(const std::string& text) {
  try {
    parse_sim_profile(text, "p.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SimProfiles, ShippedProfilesLoad) {
  EXPECT_EQ(sim_profile_names(), (std::vector<std::string>{"a100", "h100-pcie", "h100-sxm", "h200"}));
  struct Want {
    const char* name;
    int sms;
    int cc;
  };
  for (const Want& w : {Want{"h100-sxm", 132, 90}, Want{"h100-pcie", 114, 90}, Want{"a100", 108, 80}, Want{"h200", 132, 90}}) {
    const SimProfile p = load_sim_profile(w.name);
    EXPECT_EQ(p.name, w.name);
    EXPECT_EQ(p.device.num_sms, w.sms) << w.name;
    EXPECT_EQ(p.device.cc, w.cc) << w.name;
    EXPECT_GT(p.device.l2_bytes, 0) << w.name;
    EXPECT_GT(p.device.mem_bw_bytes_per_s, 1e12) << w.name;
  }
  EXPECT_DOUBLE_EQ(load_sim_profile("h200").device.mem_bw_bytes_per_s, 4.8e12);
  const SimProfile h100 = load_sim_profile("h100-sxm");
  // Calibrated on an H100: it says on what, and how well.
  ASSERT_TRUE(h100.calibration.is_object());
  EXPECT_TRUE(h100.calibration.contains("device_fingerprint"));
  EXPECT_TRUE(load_sim_profile("a100").calibration.is_null());  // hand-set
}

TEST(SimProfiles, JsonRoundTrip) {
  SimProfile p = load_sim_profile("a100");
  p.calibration = {{"fitted_on", "test"}, {"median_abs_error", 0.1}};
  const SimProfile q = sim_profile_from_json(to_json(p));
  EXPECT_EQ(q.name, p.name);
  EXPECT_EQ(q.description, p.description);
  EXPECT_EQ(q.device, p.device);
  EXPECT_EQ(q.model, p.model);
  EXPECT_EQ(q.calibration, p.calibration);
  EXPECT_EQ(profile_hash(q), profile_hash(p));
}

TEST(SimProfiles, ErrorsNameTheFileAndField) {
  nlohmann::json j = to_json(load_sim_profile("h100-sxm"));
  j["model"]["tile_cost"] = 1;
  EXPECT_EQ(error_of(j.dump()), "p.json: $.model.tile_cost: unknown field");
  j = to_json(load_sim_profile("h100-sxm"));
  j["model"].erase("tile_us");
  EXPECT_EQ(error_of(j.dump()), "p.json: $.model.tile_us: missing (a number is required)");
  j = to_json(load_sim_profile("h100-sxm"));
  j["model"]["dram_efficiency"] = 1.5;
  EXPECT_EQ(error_of(j.dump()), "p.json: $.model.dram_efficiency: must be in [0.01, 1], got 1.5");
  j = to_json(load_sim_profile("h100-sxm"));
  j["device"]["num_sms"] = "132";
  EXPECT_EQ(error_of(j.dump()), "p.json: $.device.num_sms: expected an integer, got a string");
  j = to_json(load_sim_profile("h100-sxm"));
  j["device"].erase("mem_bw_bytes_per_s");
  EXPECT_EQ(error_of(j.dump()), "p.json: $.device.mem_bw_bytes_per_s: required, a bandwidth > 0 in bytes/s");
  EXPECT_EQ(error_of("{\"name\": \"x\",\n \"device\": }").rfind("p.json: line 2, column 12: invalid JSON", 0), 0u);
  try {
    load_sim_profile("b200");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("a100, h100-pcie, h100-sxm, h200"), std::string::npos) << e.what();
  }
}

TEST(SimEvaluator, IdentifiesItself) {
  const auto ev = make_evaluator("sim:h100-sxm");
  EXPECT_EQ(ev->spec(), "sim:h100-sxm");
  EXPECT_EQ(ev->device().num_sms, 132);
  EXPECT_TRUE(std::regex_match(ev->fingerprint(), std::regex("sim:h100-sxm#[0-9a-f]{16}"))) << ev->fingerprint();
  EXPECT_EQ(ev->kernel_build(), "wave-model-v1");
  // Another parameter is another device: its measurements must not be shared.
  SimProfile changed = load_sim_profile("h100-sxm");
  changed.model.tile_us *= 1.01;
  EXPECT_NE(SimulatorEvaluator(changed).fingerprint(), ev->fingerprint());
  // The description is not part of the prediction.
  SimProfile described = load_sim_profile("h100-sxm");
  described.description = "another text";
  EXPECT_EQ(SimulatorEvaluator(described).fingerprint(), ev->fingerprint());
  EXPECT_EQ(make_evaluator("sim:a100")->device().num_sms, 108);
}

TEST(SimEvaluator, DeviceSpecs) {
  const auto a = make_evaluator("auto");
  EXPECT_TRUE(a->spec().starts_with("sim:")) << a->spec();  // until the GPU runner exists
  EXPECT_THROW(make_evaluator("cuda:0"), InputError);
  EXPECT_THROW(make_evaluator("sim:nope"), InputError);
  EXPECT_THROW(make_evaluator("sim:"), InputError);
  try {
    make_evaluator("gpu0");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("expected auto, cuda:N, fa3:cuda:N or sim:PROFILE"), std::string::npos) << e.what();
  }
}

TEST(SimEvaluator, RowsAreDeterministicPredictions) {
  SimulatorEvaluator ev(load_sim_profile("h100-sxm"));
  const Shape s = shape(1, 512, 64, 1);
  const Decision d{3, std::nullopt, 0};
  const Measurement a = ev.measure(s, d, TimingOptions{});
  const Measurement b = ev.measure(s, d, TimingOptions{});
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_EQ(to_json(a), to_json(b));
  EXPECT_EQ(a.samples, 1);
  EXPECT_EQ(a.median_us, a.p10_us);
  EXPECT_EQ(a.median_us, a.p90_us);
  EXPECT_FALSE(a.rel_error.has_value());
  EXPECT_DOUBLE_EQ(a.median_us, latency(ev.profile(), s, d));
  EXPECT_EQ(a.plan, to_json(sim_plan(ev.profile(), s, d)));
  EXPECT_EQ(a.key.device, ev.fingerprint());
  EXPECT_EQ(a.key.kernel_build, "wave-model-v1");
  ASSERT_TRUE(a.key.decision.pack_gqa.has_value());  // the key holds the resolved decision
  EXPECT_TRUE(*a.key.decision.pack_gqa);
  EXPECT_EQ(a.key.l2, L2Mode::cold);
}

TEST(SimEvaluator, InvalidDecisionsAreFailedRows) {
  SimulatorEvaluator ev(load_sim_profile("h100-sxm"));
  const Measurement zero = ev.measure(shape(1, 512, 64, 1), dec(0, std::nullopt, 0), TimingOptions{});
  EXPECT_FALSE(zero.ok);
  EXPECT_NE(zero.error.find("num_splits"), std::string::npos) << zero.error;
  const Measurement margin = ev.measure(shape(1, 512, 64, 1), dec(1, std::nullopt, 132), TimingOptions{});
  EXPECT_FALSE(margin.ok);
  EXPECT_NE(margin.error.find("sm_margin"), std::string::npos) << margin.error;
  // A shape the kernel cannot configure fails as a row too.
  Shape huge = shape(1, 512, 8, 8);
  huge.head_dim = 512;
  const Measurement big = ev.measure(huge, Decision{}, TimingOptions{});
  EXPECT_FALSE(big.ok);
  EXPECT_NE(big.error.find("head_dim"), std::string::npos) << big.error;
}

// DESIGN.md issue 2: with one CTA slot per SM and fixed work per CTA, latency steps when
// the CTA count crosses a multiple of the SM count (A100: 108 SMs, 4 CTAs per request).
TEST(WaveModel, QuantizationStepAtTheSmCount) {
  SimProfile a100 = load_sim_profile("a100");
  a100.model.max_ctas_per_sm = 1;
  struct Case {
    const char* what;
    Shape s;
    Decision d;
  };
  // Four packed KV heads with one split, or one KV head cut into four splits (16 rows: one
  // row tile whatever the grid).
  for (const Case& c : {Case{"h_kv=4 packed", shape(1, 4096, 64, 4), dec(1, true, 0)},
                        Case{"h_kv=1 4 splits", shape(1, 4096, 16, 1), dec(4, true, 0)}}) {
    auto at = [&](int batch) {
      Shape s = c.s;
      s.batch = batch;
      return sim_plan(a100, s, c.d);
    };
    EXPECT_EQ(at(27).ctas_per_sm, 1);
    EXPECT_EQ(at(27).work_items, 108) << c.what;
    EXPECT_EQ(at(27).waves, 1) << c.what;
    EXPECT_EQ(at(28).waves, 2) << c.what;
    const double t26 = predict_us(a100, at(26)), t27 = predict_us(a100, at(27)), t28 = predict_us(a100, at(28));
    const double step = t27 - t26, jump = t28 - t27;
    EXPECT_GE(step, 0) << c.what;
    EXPECT_GT(jump, 5 * step) << c.what << ": " << t26 << " " << t27 << " " << t28;
    EXPECT_GT(jump / t27, 0.2) << c.what;
  }
}

TEST(WaveModel, MoreSplitsHelpSmallBatchesUntilOverheadDominates) {
  const SimProfile h100 = load_sim_profile("h100-sxm");
  // One request, 8 KV heads, 8K keys: 8 packed CTAs on 132 SMs. Splitting fills the SMs
  // until the combine and the per-CTA start cost dominate (an H100 measured its minimum at
  // 8 splits: 19.9 us against 1 split's 59 us; with the combine's split lanes, B=1 Lk=20000
  // Hkv=8 was flat from 6 to 32 splits and 35% slower at 256).
  const Shape s = shape(1, 8192, 64, 8);
  const std::vector<int> splits = {1, 2, 3, 4, 8, 16, 64, 256};
  std::vector<double> t;
  for (int n : splits) t.push_back(latency(h100, s, dec(n, true, 0)));
  const auto best = std::min_element(t.begin(), t.end()) - t.begin();
  EXPECT_GT(splits[best], 2);
  EXPECT_LT(splits[best], 64);
  EXPECT_GT(t.front(), 2 * t[best]);
  EXPECT_GT(t.back(), 1.1 * t[best]);  // the right arm of the U
  // A long MQA context gains too.
  const Shape long_ctx = shape(1, 4096, 64, 1);
  EXPECT_LT(latency(h100, long_ctx, dec(8)), 0.8 * latency(h100, long_ctx, dec(1)));
  // A batch that fills the GPU gains nothing: the combine is pure overhead.
  const Shape full = shape(64, 8192, 64, 8);
  EXPECT_GT(latency(h100, full, dec(2)), latency(h100, full, dec(1)));
}

TEST(WaveModel, SmMarginLeavesSmsIdle) {
  const SimProfile h100 = load_sim_profile("h100-sxm");
  const Shape s = shape(32, 8192, 64, 8);  // 256 CTAs
  const Plan free = sim_plan(h100, s, dec(1, std::nullopt, 0));
  const Plan margin = sim_plan(h100, s, dec(1, std::nullopt, 100));
  EXPECT_EQ(margin.sms_used, 32);
  EXPECT_EQ(margin.grid_ctas, 32);  // one CTA per usable SM (kernels/plan.hpp)
  EXPECT_EQ(margin.waves, (256 + margin.grid_ctas - 1) / margin.grid_ctas);
  EXPECT_EQ(free.waves, 1);
  // 32 SMs cannot pull the DRAM bandwidth that 132 do.
  EXPECT_GT(predict_us(h100, margin), 1.2 * predict_us(h100, free));

  // A small call that needs few SMs does not care.
  const Shape small = shape(1, 512, 64, 1);
  EXPECT_DOUBLE_EQ(latency(h100, small, dec(1, std::nullopt, 66)), latency(h100, small, dec(1)));
}

TEST(WaveModel, HotL2HelpsOnlyWhatFits) {
  const SimProfile h100 = load_sim_profile("h100-sxm");
  const Shape small = shape(1, 512, 64, 1);  // 256 KiB of KV
  EXPECT_LT(latency(h100, small, dec(1), L2Mode::hot), 0.9 * latency(h100, small, dec(1), L2Mode::cold));
  const Shape large = shape(64, 8192, 64, 8);  // 2 GiB of KV
  EXPECT_DOUBLE_EQ(latency(h100, large, dec(1), L2Mode::hot), latency(h100, large, dec(1), L2Mode::cold));
  SimulatorEvaluator ev(h100);
  TimingOptions hot;
  hot.l2 = L2Mode::hot;
  const Measurement m = ev.measure(small, dec(1), hot);
  EXPECT_EQ(m.key.l2, L2Mode::hot);
  EXPECT_DOUBLE_EQ(m.median_us, latency(h100, small, dec(1), L2Mode::hot));
}

TEST(WaveModel, SaturatedKvStreamsNearTheAchievableBandwidth) {
  const SimProfile h100 = load_sim_profile("h100-sxm");
  const Shape s = shape(32, 8192, 32, 8);  // 1.07 GB of KV (issue 3's large shape)
  const Plan p = sim_plan(h100, s, dec(1));
  const double seconds = predict_us(h100, p) * 1e-6;
  const double tb_per_s = static_cast<double>(p.kv_bytes_read) / seconds / 1e12;
  EXPECT_GT(tb_per_s, 2.6);
  EXPECT_LT(tb_per_s, h100.model.dram_efficiency * 3.35);
}

TEST(WaveModel, AnFp8CacheHalvesTheBytesAndStreamsThemAtItsFraction) {
  SimProfile h100 = load_sim_profile("h100-sxm");
  Shape big = shape(32, 8192, 64, 8);  // 1.07 GB of bf16 KV: bandwidth-bound
  Shape big8 = big;
  big8.dtype = Dtype::fp8;
  const double bf16 = latency(h100, big, dec(1));
  for (double fraction : {1.0, 0.68, 0.5}) {
    h100.model.fp8_stream_fraction = fraction;
    // Half the bytes at `fraction` of the bandwidth; the launch is the same either way.
    EXPECT_NEAR(latency(h100, big8, dec(1)) / bf16, 0.5 / fraction, 0.02) << fraction;
  }
  EXPECT_DOUBLE_EQ(latency(h100, big, dec(1)), bf16);  // a 16-bit cache does not see it
}

TEST(WaveModel, UnpackedGqaPaysForMoreCtas) {
  const SimProfile h100 = load_sim_profile("h100-sxm");
  const Shape s = shape(8, 4096, 64, 8);
  EXPECT_GT(latency(h100, s, dec(1, false, 0)), latency(h100, s, dec(1, true, 0)));
}

TEST(Measurements, JsonRoundTrip) {
  SimulatorEvaluator ev(load_sim_profile("h200"));
  for (const Measurement& m : {ev.measure(shape(2, 1000, 32, 4), dec(5, false, 2), TimingOptions{}),
                               ev.measure(Shape{2, 1, 1000, 8, 8, 512, Dtype::bf16, 0, true}, dec(1), TimingOptions{})}) {
    const Measurement back = measurement_from_json(to_json(m));
    EXPECT_EQ(to_json(back), to_json(m));
    EXPECT_EQ(back.key.shape, m.key.shape);
    EXPECT_EQ(back.key.decision, m.key.decision);
    EXPECT_EQ(back.ok, m.ok);
    EXPECT_EQ(back.error, m.error);
  }
  Measurement checked;
  checked.key = ev.key(shape(1, 64, 8, 8), Decision{}, TimingOptions{});
  checked.ok = true;
  checked.median_us = 5;
  checked.samples = 30;
  checked.rel_error = 2e-3;
  EXPECT_EQ(measurement_from_json(to_json(checked)).rel_error, 2e-3);
}

TEST(Measurements, ParseErrorsGiveThePath) {
  SimulatorEvaluator ev(load_sim_profile("h100-sxm"));
  nlohmann::json j = to_json(ev.measure(shape(1, 512, 64, 1), Decision{}, TimingOptions{}));
  auto error_of = [](const nlohmann::json& row) -> std::string {
    try {
      measurement_from_json(row);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  };
  nlohmann::json bad = j;
  bad["key"]["l2"] = "warm";
  EXPECT_EQ(error_of(bad), "$.key.l2: must be \"cold\" or \"hot\", got \"warm\"");
  bad = j;
  bad["key"]["shape"]["h_kv"] = 3;
  EXPECT_EQ(error_of(bad).rfind("$.key.shape.h_q: must be a multiple of h_kv", 0), 0u);
  bad = j;
  bad["median"] = 1;
  EXPECT_EQ(error_of(bad), "$.median: unknown field");
  bad = j;
  bad["ok"] = false;
  EXPECT_EQ(error_of(bad), "$.error: a failed row must say why");
  EXPECT_EQ(to_string(L2Mode::hot), "hot");
  EXPECT_EQ(parse_l2_mode("cold"), L2Mode::cold);
  EXPECT_FALSE(parse_l2_mode("lukewarm").has_value());
}

TEST(GpuProbe, NeverCrashesAndExplainsAnEmptyList) {
  std::string why;
  const auto gpus = probe_gpus(&why);
  if (gpus.empty()) {
    EXPECT_FALSE(why.empty());
  }
  for (const auto& g : gpus) EXPECT_GT(g.num_sms, 0);
}

TEST(GpuProbe, NominalBandwidthFromClockAndBus) {
  GpuInfo g;
  g.name = "NVIDIA H100 80GB HBM3";
  g.num_sms = 132;
  g.cc = 90;
  g.l2_bytes = 52428800;
  g.memory_clock_khz = 2619000;
  g.memory_bus_bits = 5120;
  const DeviceInfo d = device_info(g);
  EXPECT_EQ(d.name, g.name);
  EXPECT_EQ(d.num_sms, 132);
  EXPECT_EQ(d.l2_bytes, 52428800);
  EXPECT_EQ(d.cc, 90);
  EXPECT_NEAR(d.mem_bw_bytes_per_s, 3.352e12, 1e9);
}

}  // namespace
}  // namespace evodispatch
