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

TEST(GpuRunnerHost, TheArenaOffsetIsBytesInWholeUnitsOf256) {
  EXPECT_EQ(parse_arena_offset(""), 0u);
  EXPECT_EQ(parse_arena_offset("2097152"), 2097152u);
  EXPECT_EQ(parse_arena_offset("68719476736"), std::size_t{64} << 30);
  for (const char* bad : {"100", "2MiB", "-256", " 256", "68719476992", "99999999999999999999999"}) {
    try {
      parse_arena_offset(bad);
      ADD_FAILURE() << bad << " was taken";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("EVODISPATCH_ARENA_OFFSET"), std::string::npos) << e.what();
    }
  }
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

namespace {

// The runtime's report of a loaded kernel.
LoadedKernelReport loaded(int ctas_per_sm, int registers = 128) {
  LoadedKernelReport r;
  r.ctas_per_sm = ctas_per_sm;
  r.resources.registers = registers;
  return r;
}

Shape cliff(int batch) {  // cliff-8k: Hq=64, Hkv=8 (8 packed rows), 8K keys
  Shape s;
  s.batch = batch;
  s.seqlen_k = 8192;
  s.h_q = 64;
  s.h_kv = 8;
  return s;
}

RunnerLaunch launch_of(const Shape& s, const Decision& d, const DeviceInfo& dev, const LoadedKernelReport& decode,
                       const LoadedKernelReport& combine) {
  RunnerLaunch l;
  const std::string why = plan_launch(MeasureCase{s, {}}, d, dev, runner_kernels(s, d, dev), decode, combine, l);
  EXPECT_EQ(why, "");
  return l;
}

}  // namespace

TEST(GpuRunnerHost, EveryLaunchSizeComesFromThePlan) {
  const DeviceInfo h100 = load_sim_profile("h100-sxm").device;
  // 272 work items: the three-CTA variant. The runtime's occupancy sizes the grid.
  const Shape s = cliff(34);
  const Decision d{1, true, 0};
  const RunnerLaunch l = launch_of(s, d, h100, loaded(3, 160), {});
  EXPECT_EQ(l.kernels.decode, spec_for(s, d, h100.num_sms));
  EXPECT_FALSE(l.kernels.combine.has_value());
  KernelResources res = kernel_resources(l.kernels.decode, combine_spec_for(s));
  res.registers_per_thread = 160;
  res.ctas_per_sm = 3;
  EXPECT_EQ(l.plan, plan(s, d, h100, res));
  EXPECT_EQ(l.plan.grid_ctas, 272);
  EXPECT_EQ(l.base.num_work_items, l.plan.work_items);
  const nlohmann::json& g = l.row_plan.at("gpu");
  EXPECT_EQ(g.at("decode_grid"), l.plan.grid_ctas);
  EXPECT_EQ(g.at("decode_block"), l.plan.threads_per_cta);
  EXPECT_EQ(g.at("decode_smem_bytes"), l.plan.smem_bytes_per_cta);
  EXPECT_EQ(g.at("decode_ctas_per_sm"), l.plan.ctas_per_sm);
  EXPECT_EQ(g.at("decode_kernel"), l.kernels.decode.name());
  EXPECT_EQ(g.at("work_items"), l.plan.work_items);
  EXPECT_FALSE(g.contains("combine_grid"));
  EXPECT_EQ(l.row_plan.at("grid_ctas"), g.at("decode_grid"));
  EXPECT_FALSE(l.row_plan.contains("plan_error"));
  // Two CTAs per SM: the slots follow the occupancy, not the model, and at two per SM the
  // grid holds every item (hardware_scheduled_grid).
  const RunnerLaunch two = launch_of(s, d, h100, loaded(2), {});
  EXPECT_EQ(two.plan.slots, 264);
  EXPECT_EQ(two.plan.grid_ctas, 272);

  // Splits and a margin: both grids on the SMs the margin leaves.
  const Decision split{3, true, 100};
  const RunnerLaunch m = launch_of(cliff(8), split, h100, loaded(2), loaded(6, 40));
  ASSERT_TRUE(m.kernels.combine.has_value());
  EXPECT_TRUE(m.plan.combine);
  EXPECT_EQ(m.plan.grid_ctas, 32);  // 8 x 8 x 3 items, one CTA per usable SM
  EXPECT_EQ(m.plan.combine_ctas_per_sm, 6);
  EXPECT_EQ(m.plan.combine_grid, std::min<std::int64_t>(m.plan.combine_ctas, 32));
  const nlohmann::json& mg = m.row_plan.at("gpu");
  EXPECT_EQ(mg.at("combine_grid"), m.plan.combine_grid);
  EXPECT_EQ(mg.at("combine_block"), m.plan.combine_threads_per_cta);
  EXPECT_EQ(mg.at("combine_ctas"), m.plan.combine_ctas);
  EXPECT_EQ(mg.at("combine_kernel"), m.kernels.combine->name());
  EXPECT_EQ(mg.at("combine_registers"), 40);

  // Per-request lengths are recorded beside the plan.
  RunnerLaunch mixed;
  ASSERT_EQ(plan_launch(MeasureCase{cliff(2), {5, 8192}}, d, h100, runner_kernels(cliff(2), d, h100), loaded(1), {},
                        mixed),
            "");
  EXPECT_EQ(mixed.row_plan.at("seqlens").size(), 2u);
}

// EVODISPATCH_DECODE_GRID's forced grid: the plan and the row's record both say what runs.
TEST(GpuRunnerHost, AForcedGridSizesTheLaunchAndItsRecord) {
  const DeviceInfo h100 = load_sim_profile("h100-sxm").device;
  Shape wide = cliff(34);  // D = 256: one CTA per SM, 272 items, a CTA each by the rule
  wide.head_dim = 256;
  wide.h_q = 16;
  const Decision d{1, true, 0};
  const RunnerKernels k = runner_kernels(wide, d, h100);
  RunnerLaunch rule, strided, items;
  ASSERT_EQ(plan_launch(MeasureCase{wide, {}}, d, h100, k, loaded(1), {}, rule), "");
  ASSERT_EQ(rule.plan.grid_ctas, 272);
  ASSERT_EQ(plan_launch(MeasureCase{wide, {}}, d, h100, k, loaded(1), {}, strided, false), "");
  EXPECT_EQ(strided.plan.grid_ctas, 132);
  EXPECT_EQ(strided.row_plan.at("grid_ctas"), 132);
  EXPECT_EQ(strided.row_plan.at("gpu").at("decode_grid"), 132);
  ASSERT_EQ(plan_launch(MeasureCase{wide, {}}, d, h100, k, loaded(1), {}, items, true), "");
  EXPECT_EQ(items.row_plan.at("gpu").at("decode_grid"), 272);

  // A margin holds the CTAs to the usable SMs only in the persistent grid.
  const Decision margin{1, true, 32};
  const RunnerKernels km = runner_kernels(wide, margin, h100);
  RunnerLaunch l;
  EXPECT_NE(plan_launch(MeasureCase{wide, {}}, margin, h100, km, loaded(1), {}, l, true).find("SM margin"),
            std::string::npos);
  EXPECT_EQ(plan_launch(MeasureCase{wide, {}}, margin, h100, km, loaded(1), {}, l, false), "");
  EXPECT_EQ(l.plan.grid_ctas, 100);
}

TEST(GpuRunnerHost, TheSimulatorPredictsFromTheSamePlan) {
  // Given the occupancies the simulator assumes, the runner's plan is the simulator's.
  const SimProfile prof = load_sim_profile("h100-sxm");
  for (const Shape& s : {cliff(17), cliff(1)})
    for (const Decision& d : {Decision{1, true, 0}, Decision{5, false, 0}, Decision{3, true, 64}}) {
      const Plan sim = sim_plan(prof, s, d);
      const RunnerLaunch l =
          launch_of(s, d, prof.device, loaded(sim.ctas_per_sm, -1), loaded(prof.model.combine_ctas_per_sm));
      EXPECT_EQ(l.plan, sim) << describe(s) << " " << describe(d);
    }
}

TEST(GpuRunnerHost, APlanThatCannotBeMadeIsTheRowsError) {
  // The GPU loaded the kernel: the plan's model of this SM does not get to refuse it.
  DeviceInfo consumer = load_sim_profile("h100-sxm").device;
  consumer.cc = 86;  // the model gives one CTA 99 KiB; the 128-row-tile variant takes more
  const Shape s = cliff(1);
  const Decision d{1, true, 0};
  const RunnerKernels k = runner_kernels(s, d, consumer);
  ASSERT_GT(k.decode.smem_bytes(), 99 * 1024);
  RunnerLaunch l;
  EXPECT_EQ(plan_launch(MeasureCase{s, {}}, d, consumer, k, loaded(1), {}, l), "");
  EXPECT_EQ(l.plan.smem_bytes_per_cta, k.decode.smem_bytes());

  // Without the runtime's occupancy the model decides, and refuses: the row says why.
  const std::string why = plan_launch(MeasureCase{s, {}}, d, consumer, k, loaded(0), {}, l);
  EXPECT_NE(why.find("no launch plan (" + k.decode.name()), std::string::npos) << why;
  EXPECT_NE(why.find("shared memory"), std::string::npos) << why;

  // More work items than one launch counts.
  Shape huge;
  huge.batch = 65536;
  huge.seqlen_k = 1;
  huge.h_q = 4096;
  huge.h_kv = 1024;
  const Decision many{256, false, 0};
  const std::string too_many = plan_launch(MeasureCase{huge, {}}, many, consumer,
                                           runner_kernels(huge, many, consumer), loaded(1), loaded(1), l);
  EXPECT_NE(too_many.find("too many work items"), std::string::npos) << too_many;
}
