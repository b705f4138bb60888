// The fp8 kernels' widening (kernels/cuda/common.cuh, widen_e4m3x4) on every e4m3 byte, on
// the GPU: exact in bf16 and fp16, subnormals included. The decode sweep cannot see a
// flushed subnormal (below 2^-6, about 1% of N(0, 1) draws, too small to move the output
// past the check's bound), so this looks at the conversion itself.
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
)";

std::vector<std::uint16_t> widened(const char* symbol) {
  KernelSpec any;
  CompileUnit unit = compile_unit(any, arch_for_cc(gpu()->gpu().cc));
  unit.name = "evo_widen_test.cu";
  unit.source = kSource;
  unit.name_expressions.clear();
  gpu::KernelCache cache(KernelCompiler(arch_for_cc(gpu()->gpu().cc)));
  std::string error;
  const gpu::LoadedKernel* k = cache.get(unit, symbol, 64, &error);
  EXPECT_NE(k, nullptr) << error;
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

}  // namespace
}  // namespace evodispatch::gputest
