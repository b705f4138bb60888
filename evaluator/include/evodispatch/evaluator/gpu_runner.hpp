#pragma once
// The GPU runner (DESIGN.md §4): measures the project's decode kernels on one GPU.
//
// For each (shape, decision):
//  * the decode specialisation (and the combine kernel when splits > 1) is compiled by
//    NVRTC through the on-disk cubin cache and loaded once per process;
//  * plan() (kernels/plan.hpp), given the loaded kernels' registers and occupancy, sizes
//    every grid, block and shared memory of the launch (plan_launch below); a plan that
//    cannot be made is a failed row with the reason;
//  * inputs are seeded N(0, 1) values (the seed is a hash of the case, so a re-run draws
//    the same numbers), paged caches get a shuffled page table;
//  * once per (shape, decision) per process, the output (poisoned with NaN first) and
//    the LSE are checked against a GPU float32 reference kernel (evaluator/cuda/support.cuh);
//  * R back-to-back calls are captured in one CUDA graph (a replay lasts at least
//    TimingOptions::min_replay_us); with a cold L2 each call reads the next of several
//    buffer sets whose total exceeds twice the L2; the per-call time of every replay is a
//    sample, the row has their median, p10 and p90.
// Every failure is a row. A sticky CUDA error (the context is lost) also makes the
// evaluator unusable(): the worker process that holds it must be replaced.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/evaluator/gpu_probe.hpp>
#include <evodispatch/kernels/compiler.hpp>
#include <evodispatch/kernels/decode_params.hpp>
#include <evodispatch/kernels/plan.hpp>

namespace evodispatch {

// A shape with, optionally, each request's own KV length (cache_seqlens). Empty seqlens:
// every request has shape.seqlen_k keys; otherwise batch entries in [0, seqlen_k].
struct MeasureCase {
  Shape shape;
  std::vector<int> seqlens;
  // fp8 KV cache: one k and one v descale for the whole tensor (vLLM's per-tensor scale)
  // instead of one per (request, KV head) (FA3's [B, Hkv]). The kernels run the same.
  bool per_tensor_descale = false;
  // bf16 queries: each row (request, token, head) times its own power of two, 2^-20 to 2^4,
  // as real heads' norms differ; the fp8 kernels rescale every row into fp16 by its own
  // exponent (common.cuh, f16_row_exponent), which N(0, 1) rows, nearly all of one
  // exponent, hardly tell apart. (Not higher: at 2^24 the scores reach 1e7, where fp32's
  // rounding alone moves a softmax by a percent, kernel or reference.)
  bool spread_query_rows = false;
};

// Relative error bound of the numeric check, by the output's dtype (query_dtype): 1e-2 for
// bf16, 5e-3 for fp16. An fp8 cache is checked against the reference on the dequantized
// cache, which the kernels widen exactly, so the bound is the output's.
double output_tolerance(Dtype);

// What the float32 reference computed, with the inputs it read, as host data.
struct ReferenceRun {
  std::vector<float> q, k, v;    // dense layouts of DecodeParams; k/v paged when page_size > 0,
                                 // dequantized (stored value x descale) for an fp8 cache
  std::vector<int> seqlens;      // [B]
  std::vector<int> page_table;   // [B, max_pages] (paged)
  int max_pages = 0;
  std::vector<float> out;        // [B, Lq, Hq, D]
  std::vector<float> lse;        // [B, Hq, Lq]
};

// The kernels the runner launches for a decision: spec_for's decode variant, and the
// combine kernel when the call splits (combine_runs).
struct RunnerKernels {
  KernelSpec decode;
  std::optional<KernelSpec> combine;
};
// Throws InputError for a shape without a kernel.
RunnerKernels runner_kernels(const Shape&, const Decision&, const DeviceInfo&);
// The same around a given decode variant (a forced tiling): the combine kernel unless the
// call has one split or the variant merges its splits in a cluster.
RunnerKernels runner_kernels(const Shape&, const Decision&, const KernelSpec& decode);

// What the runtime reports of a loaded kernel, where the GPU knows better than the plan's
// resource model.
struct LoadedKernelReport {
  ResourceReport resources;  // ptxas: registers and spills
  int ctas_per_sm = 0;       // the occupancy at the kernel's block and shared memory
};

// One decision made ready to launch: every grid, block and shared-memory size is the
// plan's (the runner launches nothing else), the kernel's parameters come from the same
// work decomposition, and the row's plan is to_json(plan) with a "gpu" object of what
// was launched (decode_kernel, decode_grid, decode_block, decode_smem_bytes, ...).
struct RunnerLaunch {
  Decision decision;  // resolved
  RunnerKernels kernels;
  Plan plan;
  DecodeParams base{};  // without pointers (DecodeBuffers::params adds them)
  nlohmann::json row_plan;
};
// The launch of `kernels` for (case, decision) with the loaded kernels' reports (`combine`
// is read only when kernels.combine is set), into `out`. `grid_by_items`, when set, forces
// the decode grid (EVODISPATCH_DECODE_GRID): a CTA per work item, or the persistent grid.
// Returns "" or, when no plan can be made, why: the error of the runner's failed row.
std::string plan_launch(const MeasureCase&, const Decision&, const DeviceInfo&, const RunnerKernels& kernels,
                        const LoadedKernelReport& decode, const LoadedKernelReport& combine, RunnerLaunch& out,
                        std::optional<bool> grid_by_items = std::nullopt);

// Every NVRTC unit the runner may compile for `arch`: the decode family and the runner's
// own kernels. Compiling them ahead (any machine, no GPU) fills the cubin cache.
std::vector<CompileUnit> gpu_runner_compile_units(std::string_view arch);

// EVODISPATCH_ARENA_OFFSET's value: bytes, a multiple of 256 up to 64 GiB, between the
// runner's buffer arena and the buffers it places there (a study of where they lie,
// measuring.md); "" is 0. Throws InputError naming the variable.
std::size_t parse_arena_offset(std::string_view text);

class CudaEvaluator : public Evaluator {
 public:
  // Takes GPU `index` (cuda:N); throws InputError when there is no such GPU.
  explicit CudaEvaluator(int index);
  ~CudaEvaluator() override;

  const std::string& spec() const override { return spec_; }
  const DeviceInfo& device() const override { return device_; }
  // Name, SMs, compute capability, memory size and driver: the same for two identical GPUs.
  const std::string& fingerprint() const override { return fingerprint_; }
  // kernel_build_hash() + "@" + the NVRTC arch, + "+tiling:T" / "+arena-offset:N" under
  // EVODISPATCH_DECODE_TILING / EVODISPATCH_ARENA_OFFSET.
  const std::string& kernel_build() const override { return kernel_build_; }

  Measurement measure(const Shape&, const Decision&, const TimingOptions&) override;
  Measurement measure(const MeasureCase&, const Decision&, const TimingOptions&);
  // Interleaved replays of a and b (the order alternates per pair).
  Comparison compare(const Shape&, const Decision& a, const Decision& b, const TimingOptions&, int pairs = 30) override;
  Comparison compare(const MeasureCase&, const Decision& a, const Decision& b, const TimingOptions&, int pairs = 30);

  std::optional<std::string> unusable() const override;

  // The inputs of the case and the float32 reference's outputs on them (tests of the
  // reference itself). Throws std::runtime_error on a CUDA error.
  ReferenceRun run_reference(const MeasureCase&);

  const GpuInfo& gpu() const { return gpu_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  GpuInfo gpu_;
  DeviceInfo device_;
  std::string spec_, fingerprint_, kernel_build_;
};

}  // namespace evodispatch
