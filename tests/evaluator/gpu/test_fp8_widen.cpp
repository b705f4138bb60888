// The fp8 kernels' widening (kernels/cuda/common.cuh, widen_e4m3x4) on every e4m3 byte, on
// the GPU: exact in bf16 and fp16, subnormals included. The decode sweep cannot see a
// flushed subnormal (below 2^-6, about 1% of N(0, 1) draws, too small to move the output
// past the check's bound), so this looks at the conversion itself.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <evodispatch/kernels/dtype.hpp>

#include "../../../evaluator/src/cuda_util.hpp"
#include "../../../evaluator/src/kernel_cache.hpp"
#include "gpu_support.hpp"

namespace evodispatch::gputest {
namespace {

// out[w * 4 + i] for the word w = bytes 4w..4w+3: element i of the two widened pairs.
constexpr const char* kSource = R"(#include "common.cuh"
template <int DT>
__device__ void widen_all(unsigned* out) {
  const unsigned w = threadIdx.x;
  const unsigned word = (4 * w) | (4 * w + 1) << 8 | (4 * w + 2) << 16 | (4 * w + 3) << 24;
  unsigned lo, hi;
  evodispatch::dev::widen_e4m3x4<DT>(word, lo, hi);
  out[2 * w] = lo;
  out[2 * w + 1] = hi;
}
extern "C" __global__ void evo_widen_bf16(unsigned* out) { widen_all<evodispatch::kDtypeBf16>(out); }
extern "C" __global__ void evo_widen_fp16(unsigned* out) { widen_all<evodispatch::kDtypeFp16>(out); }
// Row t: 8 words of bf16 pairs rescaled into fp16 as the fp8 kernels do with bf16 queries.
extern "C" __global__ void evo_rescale_rows(const unsigned* in, unsigned* out, int* exponent) {
  const unsigned* row = in + 8 * threadIdx.x;
  float max_abs = 0.f;
  for (int w = 0; w < 8; ++w) max_abs = fmaxf(max_abs, evodispatch::dev::bf16x2_max_abs(row[w]));
  const int e = evodispatch::dev::f16_row_exponent(max_abs);
  for (int w = 0; w < 8; ++w) out[8 * threadIdx.x + w] = evodispatch::dev::bf16x2_to_f16x2(row[w], evodispatch::dev::pow2(e));
  exponent[threadIdx.x] = e;
}
)";

const gpu::LoadedKernel* test_kernel(gpu::KernelCache& cache, const char* symbol) {
  KernelSpec any;
  CompileUnit unit = compile_unit(any, arch_for_cc(gpu()->gpu().cc));
  unit.name = "evo_widen_test.cu";
  unit.source = kSource;
  unit.name_expressions.clear();
  std::string error;
  const gpu::LoadedKernel* k = cache.get(unit, symbol, 64, &error);
  EXPECT_NE(k, nullptr) << error;
  return k;
}

std::vector<std::uint16_t> widened(const char* symbol) {
  gpu::KernelCache cache(KernelCompiler(arch_for_cc(gpu()->gpu().cc)));
  const gpu::LoadedKernel* k = test_kernel(cache, symbol);
  if (!k) return {};
  gpu::DeviceBuffer out(128 * sizeof(unsigned));
  void* ptr = out.get();
  void* args[] = {&ptr};
  gpu::check(cudaLaunchKernel(k->func(), dim3(1), dim3(64), args, 0, nullptr), "launch");
  std::vector<std::uint16_t> halves(256);
  gpu::check(cudaMemcpy(halves.data(), out.get(), 512, cudaMemcpyDeviceToHost), "copy");
  return halves;
}

TEST(GpuFp8, WideningIsExactForEveryE4m3Value) {
  EVO_REQUIRE_GPU();
  if (gpu()->gpu().cc < 89) GTEST_SKIP() << "the fp8 kernels need sm_89";
  for (Dtype dt : {Dtype::bf16, Dtype::fp16}) {
    const auto halves = widened(dt == Dtype::bf16 ? "evo_widen_bf16" : "evo_widen_fp16");
    ASSERT_EQ(halves.size(), 256u);
    int subnormals = 0;
    for (int b = 0; b < 256; ++b) {
      if ((b & 0x7f) == 0x7f) continue;  // NaN: a quantized cache holds none
      const float want = e4m3_bits_to_float(static_cast<std::uint8_t>(b));
      EXPECT_EQ(bits_to_float(dt, halves[b]), want) << to_string(dt) << " byte 0x" << std::hex << b;
      subnormals += (b & 0x78) == 0 && (b & 7) != 0;
    }
    EXPECT_EQ(subnormals, 14);  // 7 magnitudes, both signs: all compared above
  }
}

// bf16 queries over an fp8 cache go into fp16 times 2^e per row (common.cuh): whatever the
// row's magnitude, fp16 holds every element down to 2^-29 of the row's largest exactly,
// the rest within 2^-39 of it, and nothing overflows (fp16 ends at 65504; bf16 at 3e38).
TEST(GpuFp8, Bf16QueriesGoIntoFp16ExactlyWhateverTheirMagnitude) {
  EVO_REQUIRE_GPU();
  if (gpu()->gpu().cc < 89) GTEST_SKIP() << "the fp8 kernels need sm_89";
  const float row_max[] = {0.f, 1e-38f, 3e-20f, 1e-3f, 1.f, 448.f, 65504.f, 3e5f, 1e20f, 3e38f};
  constexpr int kRows = sizeof(row_max) / sizeof(row_max[0]);
  std::vector<std::uint16_t> in(kRows * 16);
  for (int r = 0; r < kRows; ++r)
    for (int i = 0; i < 16; ++i) {
      // The maximum, then 2^-1 .. 2^-39 of it with both signs, and a zero.
      constexpr int kBelow[14] = {1, 2, 4, 7, 11, 13, 16, 20, 24, 28, 29, 30, 34, 39};
      const float x = i == 0 ? row_max[r] : i == 15 ? 0.f : std::ldexp(i % 2 ? -row_max[r] : row_max[r], -kBelow[i - 1]);
      in[r * 16 + i] = float_to_bf16_bits(x);
    }
  gpu::KernelCache cache(KernelCompiler(arch_for_cc(gpu()->gpu().cc)));
  const gpu::LoadedKernel* k = test_kernel(cache, "evo_rescale_rows");
  ASSERT_NE(k, nullptr);
  gpu::DeviceBuffer d_in(in.size() * 2), d_out(in.size() * 2), d_exp(kRows * sizeof(int));
  gpu::check(cudaMemcpy(d_in.get(), in.data(), in.size() * 2, cudaMemcpyHostToDevice), "copy in");
  void* ptrs[] = {d_in.get(), d_out.get(), d_exp.get()};
  void* args[] = {&ptrs[0], &ptrs[1], &ptrs[2]};
  gpu::check(cudaLaunchKernel(k->func(), dim3(1), dim3(kRows), args, 0, nullptr), "launch");
  std::vector<std::uint16_t> out(in.size());
  std::vector<int> exponent(kRows);
  gpu::check(cudaMemcpy(out.data(), d_out.get(), out.size() * 2, cudaMemcpyDeviceToHost), "copy out");
  gpu::check(cudaMemcpy(exponent.data(), d_exp.get(), kRows * sizeof(int), cudaMemcpyDeviceToHost), "copy e");
  for (int r = 0; r < kRows; ++r) {
    const double max = bf16_bits_to_float(in[r * 16]);
    if (max > 0 && max >= 0x1p-126) {  // a normal maximum lands in [2^14, 2^15)
      EXPECT_GE(std::ldexp(max, exponent[r]), 0x1p14) << "row max " << max;
      EXPECT_LT(std::ldexp(max, exponent[r]), 0x1p15) << "row max " << max;
    }
    for (int i = 0; i < 16; ++i) {
      const double want = bf16_bits_to_float(in[r * 16 + i]);
      const double got = std::ldexp(static_cast<double>(fp16_bits_to_float(out[r * 16 + i])), -exponent[r]);
      ASSERT_TRUE(std::isfinite(got)) << "row max " << max << " element " << i;
      if (std::abs(want) >= std::ldexp(max, -29)) EXPECT_EQ(got, want) << "row max " << max << " element " << i;
      else EXPECT_LE(std::abs(got - want), std::ldexp(max, -39)) << "row max " << max << " element " << i;
    }
  }
  EXPECT_EQ(exponent[0], 0);  // an all-zero row is left as it is
}

}  // namespace
}  // namespace evodispatch::gputest
