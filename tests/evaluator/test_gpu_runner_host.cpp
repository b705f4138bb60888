// The host side of the GPU runner, testable without a GPU: the numeric check rules,
// sample statistics, comparison rows, and the runner's own kernels compiling by NVRTC.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/evaluator/gpu_runner.hpp>
#include <evodispatch/evaluator/numeric_check.hpp>
#include <evodispatch/evaluator/simulator.hpp>
#include <evodispatch/kernels/compiler.hpp>
#include <evodispatch/kernels/dtype.hpp>

using namespace evodispatch;

namespace {

std::vector<std::uint16_t> as_bits(Dtype d, const std::vector<float>& v) {
  std::vector<std::uint16_t> out;
  for (float f : v) out.push_back(float_to_bits(d, f));
  return out;
}

}  // namespace

TEST(NumericCheck, PassesWithinToleranceAndReportsTheError) {
  const std::vector<float> ref = {1.f, -2.f, 0.5f, 3.f};
  const NumericCheck c = check_output(as_bits(Dtype::bf16, ref), Dtype::bf16, ref, {}, {}, 1e-2);
  EXPECT_TRUE(c.ok) << c.error;
  EXPECT_EQ(c.rel_error, 0);
  std::vector<float> off = ref;
  off[1] = -2.5f;
  const NumericCheck bad = check_output(as_bits(Dtype::bf16, off), Dtype::bf16, ref, {}, {}, 1e-2);
  EXPECT_FALSE(bad.ok);
  EXPECT_NEAR(bad.rel_error, 0.5 / std::sqrt(1 + 4 + 0.25 + 9), 1e-6);
  EXPECT_NE(bad.error.find("relative error"), std::string::npos);
  EXPECT_EQ(output_tolerance(Dtype::bf16), 1e-2);
  EXPECT_EQ(output_tolerance(Dtype::fp16), 5e-3);
}

TEST(NumericCheck, AnUnwrittenElementFailsWhateverTheNorm) {
  std::vector<float> ref(1000, 1.f);
  auto bits = as_bits(Dtype::fp16, ref);
  bits[417] = 0xffff;  // the poison, left in place
  const NumericCheck c = check_output(bits, Dtype::fp16, ref, {}, {}, 1.0);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.bad_elements, 1);
  EXPECT_EQ(c.first_bad, 417);
  EXPECT_TRUE(std::isnan(c.rel_error));
  EXPECT_NE(c.error.find("unwritten"), std::string::npos);
  bits[417] = float_to_bits(Dtype::fp16, std::numeric_limits<float>::infinity());
  EXPECT_FALSE(check_output(bits, Dtype::fp16, ref, {}, {}, 1.0).ok);
}

TEST(NumericCheck, LseMustMatchIncludingRowsThatSeeNothing) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> ref = {0.f, 0.f};
  const auto bits = as_bits(Dtype::bf16, ref);
  const std::vector<float> ref_lse = {-inf, 5.f};
  EXPECT_TRUE(check_output(bits, Dtype::bf16, ref, std::vector<float>{-inf, 5.001f}, ref_lse, 1e-2).ok);
  const NumericCheck a = check_output(bits, Dtype::bf16, ref, std::vector<float>{0.f, 5.f}, ref_lse, 1e-2);
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.lse_mismatches, 1);
  const NumericCheck b = check_output(bits, Dtype::bf16, ref, std::vector<float>{-inf, 5.1f}, ref_lse, 1e-2);
  EXPECT_FALSE(b.ok);
  EXPECT_NEAR(b.lse_max_error, 0.1 / 5, 1e-6);
  const NumericCheck c = check_output(bits, Dtype::bf16, ref, std::vector<float>{-inf, std::nanf("")}, ref_lse, 1e-2);
  EXPECT_FALSE(c.ok);
  // All-zero reference (every row sees nothing): the absolute error is used.
  EXPECT_TRUE(check_output(bits, Dtype::bf16, ref, {}, {}, 1e-2).ok);
}

TEST(SampleStats, MedianAndPercentilesInterpolate) {
  const SampleStats s = sample_stats({5, 1, 4, 2, 3});
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.p10, 1.4);
  EXPECT_DOUBLE_EQ(s.p90, 4.6);
  EXPECT_DOUBLE_EQ(sample_stats({7}).p10, 7);
  EXPECT_DOUBLE_EQ(sample_stats({}).median, 0);
}

TEST(Comparison, DefaultDividesTwoMeasurementsAndRoundTrips) {
  SimulatorEvaluator sim(load_sim_profile("h100-sxm"));
  Shape s;
  s.seqlen_k = 512;
  s.h_q = 64;
  s.h_kv = 1;
  const Comparison c = sim.compare(s, Decision{3, true, 0}, Decision{1, true, 0}, TimingOptions{});
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_DOUBLE_EQ(c.ratio, c.a.median_us / c.b.median_us);
  EXPECT_EQ(c.pairs, 0);
  const Comparison back = comparison_from_json(to_json(c));
  EXPECT_EQ(back.ratio, c.ratio);
  EXPECT_EQ(back.a.key.decision, c.a.key.decision);
  const Comparison bad = sim.compare(s, Decision{0, true, 0}, Decision{1, true, 0}, TimingOptions{});
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("a: "), std::string::npos);
  const Comparison slow = sim.compare(s, Decision{64, true, 128}, Decision{64, true, 0}, TimingOptions{});
  ASSERT_TRUE(slow.ok);
  EXPECT_GT(slow.ratio, 1.0);  // 4 SMs instead of 132 for the same 64 CTAs
  EXPECT_EQ(comparison_from_json(to_json(slow)).ratio, slow.ratio);
}

TEST(GpuRunnerHost, SupportKernelsCompileForHopper) {
  const auto units = gpu_runner_compile_units("sm_90a");
  ASSERT_FALSE(units.empty());
  const CompileUnit& support = units.back();
  EXPECT_EQ(support.name, "evo_support.cu");
  const CompiledKernel k = KernelCompiler("sm_90a", "").compile(support);
  ASSERT_TRUE(k.ok) << k.log;
  EXPECT_FALSE(k.cubin.empty());
}

TEST(GpuRunnerHost, CudaDeviceWithoutAGpuIsAnInputError) {
  if (!probe_gpus().empty()) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_THROW(make_evaluator("cuda:0"), InputError);
  EXPECT_THROW(make_local_evaluator("cuda:0"), InputError);
  EXPECT_THROW(CudaEvaluator(0), InputError);
  EXPECT_TRUE(make_evaluator("auto")->spec().starts_with("sim:"));
  EXPECT_THROW(device_for_spec("cuda:0"), InputError);
  EXPECT_EQ(device_for_spec("auto"), load_sim_profile("h100-sxm").device);
}

TEST(GpuRunnerHost, DeviceForSpecStartsNothing) {
  EXPECT_EQ(device_for_spec("sim:a100"), load_sim_profile("a100").device);
  EXPECT_THROW(device_for_spec("sim:nope"), InputError);
  EXPECT_THROW(device_for_spec("gpu0"), InputError);
}
