// Dispatch calls per second through the Lua sandbox (issue 2 target: >= 300 000
// calls/s on one core for a realistic script). items_per_second is calls/s.
#include <evodispatch/heuristics/dispatch_script.hpp>
#include <evodispatch/heuristics/policy.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

namespace evodispatch {
namespace {

// What the search produces: a few guarded rules over the shape features in front
// of a base rule, with inline math.* calls (not cached in locals) as a mutated
// program would have them.
constexpr const char* kRealisticScript = R"(
function dispatch(s, hw)
  local pack = s.qpk > 1
  local ctas = s.batch * s.h_kv * math.ceil(s.seqlen_q * s.qpk / 64)
  if not pack then ctas = s.batch * s.h_q * s.seqlen_q end
  if s.nblk <= 4 then
    if s.nblk == 4 and ctas * 3 <= hw.num_sms then return { num_splits = 3, pack_gqa = pack } end
    return { num_splits = 1, pack_gqa = pack }
  end
  if ctas >= 0.8 * hw.num_sms then return { num_splits = 1, pack_gqa = pack } end
  local splits = math.min(math.max(1, hw.num_sms // ctas), math.ceil(s.nblk / 2), 128)
  if s.dtype == "fp8" and splits > 64 then splits = 64 end
  if s.page_size > 0 and s.page_size < 16 then splits = math.max(1, splits // 2) end
  return { num_splits = splits, pack_gqa = pack, sm_margin = 0 }
end
)";

DeviceInfo h100() { return {"NVIDIA H100 80GB HBM3", 132, 50 * 1024 * 1024, 3.35e12, 90}; }

// A deterministic spread over the decode space: batch 1..64, Lk 128..32K, GQA
// ratios 1..64, head dims 64/128/256, all dtypes, contiguous and paged.
std::vector<Shape> varied_shapes() {
  std::vector<Shape> shapes;
  std::uint32_t x = 12345;
  auto next = [&x](std::uint32_t n) {
    x = x * 1664525u + 1013904223u;
    return (x >> 8) % n;
  };
  const int batches[] = {1, 2, 3, 4, 8, 16, 17, 33, 34, 64};
  const int kv_heads[] = {1, 2, 4, 8, 32};
  const int dims[] = {64, 128, 256};
  const int pages[] = {0, 0, 1, 16, 256};
  for (int i = 0; i < 1024; ++i) {
    Shape s;
    s.batch = batches[next(std::size(batches))];
    s.seqlen_q = 1 + static_cast<int>(next(4)) * static_cast<int>(next(2));
    s.seqlen_k = 128 << next(9);
    s.h_kv = kv_heads[next(std::size(kv_heads))];
    s.h_q = s.h_kv * (1 << next(7));
    s.head_dim = dims[next(std::size(dims))];
    s.dtype = static_cast<Dtype>(next(3));
    s.page_size = pages[next(std::size(pages))];
    s.causal = next(2) == 0;
    shapes.push_back(s);
  }
  return shapes;
}

void run_calls(benchmark::State& state, DispatchScript& script) {
  const std::vector<Shape> shapes = varied_shapes();
  const DeviceInfo hw = h100();
  std::size_t i = 0;
  for (auto _ : state) {
    DispatchOutcome out = script.dispatch(shapes[i], hw);
    if (!out.ok()) {
      state.SkipWithError(out.error.c_str());
      break;
    }
    benchmark::DoNotOptimize(out);
    i = (i + 1) % shapes.size();
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_DispatchRealistic(benchmark::State& state) {
  auto script = DispatchScript::load("realistic.lua", kRealisticScript);
  run_calls(state, *script);
}
BENCHMARK(BM_DispatchRealistic);

// The shipped FlashAttention-3 policy: a heavier script (its efficiency loop
// runs up to 128 iterations), for scale.
void BM_DispatchFa3Policy(benchmark::State& state) {
  const auto source = builtin_policy_source("fa3");
  if (!source) {
    state.SkipWithError("no built-in fa3 policy");
    return;
  }
  SandboxLimits limits;
  auto script = DispatchScript::load("fa3.lua", *source, limits);
  run_calls(state, *script);
}
BENCHMARK(BM_DispatchFa3Policy);

// The cost of a fresh sandbox: new state, whitelist, compile and run the chunk.
void BM_LoadScript(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(DispatchScript::load("realistic.lua", kRealisticScript));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LoadScript);

}  // namespace
}  // namespace evodispatch

BENCHMARK_MAIN();
