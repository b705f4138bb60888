// CudaEvaluator: the GPU runner of DESIGN.md §4 (see gpu_runner.hpp for the procedure).
#include <evodispatch/evaluator/gpu_runner.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/numeric_check.hpp>
#include <evodispatch/kernels/kernel_spec.hpp>
#include <evodispatch/kernels/plan.hpp>

#include <evodispatch/kernels/dtype.hpp>

#include "cuda_util.hpp"
#include "decode_buffers.hpp"
#include "kernel_cache.hpp"
#include "support_kernels.hpp"

namespace evodispatch {

using gpu::check;
using gpu::CudaError;

namespace {

// A graph holds at most this many calls: enough for 200 us of 1-us calls and for
// rotating through the buffer sets of the smallest shapes, few enough to instantiate fast.
constexpr int kMaxCallsPerGraph = 4096;
constexpr int kMaxBufferSets = kMaxCallsPerGraph;
// The buffer sets may take this fraction of the free GPU memory.
constexpr double kSetMemoryFraction = 0.25;

std::string gib(double bytes) {
  std::ostringstream o;
  o.precision(3);
  o << bytes / (1024.0 * 1024 * 1024) << " GiB";
  return o.str();
}

// Why the runner has no kernel for this shape, or "".
std::string unsupported(const Shape& s, int cc) {
  if (s.head_dim != 64 && s.head_dim != 128 && s.head_dim != 256)
    return "head_dim " + std::to_string(s.head_dim) + " has no kernel (64, 128, 256)";
  if (s.dtype == Dtype::fp8 && cc < kFp8KvMinCc)
    return "an fp8 KV cache needs compute capability 8.9 or later, this GPU has " + std::to_string(cc);
  return "";
}

// The case alone: its shape and request lengths, which fix its inputs.
std::string case_key(const MeasureCase& c) {
  std::string id = to_json(c.shape).dump();
  for (int l : c.seqlens) id += "," + std::to_string(l);
  if (c.per_tensor_descale) id += ",per-tensor";
  if (c.spread_query_rows) id += ",spread-q";
  return id;
}

std::string case_id(const MeasureCase& c, const Decision& resolved) { return case_key(c) + to_json(resolved).dump(); }

// The split workspace a case's buffers are made with: room for the oracle's largest
// split count when that costs at most as much again as the inputs (long caches, where
// allocating and filling dominate), else just what the decision needs.
constexpr int kWorkspaceSplits = 64;
int workspace_splits(const Shape& shape, int num_splits) {
  if (num_splits >= kWorkspaceSplits) return num_splits;
  const std::int64_t inputs = gpu::case_layout(shape, 1).set_bytes;
  return gpu::case_layout(shape, kWorkspaceSplits).set_bytes <= 2 * inputs ? kWorkspaceSplits : num_splits;
}

// One decision made ready to launch on this GPU: the loaded kernels and their launch.
struct Prepared {
  const gpu::LoadedKernel* decode = nullptr;
  const gpu::LoadedKernel* combine = nullptr;
  RunnerLaunch launch;
  const Decision& decision() const { return launch.decision; }
};

LoadedKernelReport report(const gpu::LoadedKernel* k) {
  return k ? LoadedKernelReport{k->resources, k->ctas_per_sm} : LoadedKernelReport{};
}

struct BufferSets {
  int sets = 1;
  bool cold_met = true;
  std::string note;
};

}  // namespace

double output_tolerance(Dtype d) { return d == Dtype::fp16 ? 5e-3 : 1e-2; }

std::vector<CompileUnit> gpu_runner_compile_units(std::string_view arch) {
  std::vector<CompileUnit> units;
  int cc = 0;  // "sm_90a" -> 90
  for (char ch : arch)
    if (ch >= '0' && ch <= '9') cc = cc * 10 + (ch - '0');
  for (const auto& spec : all_kernel_specs())
    if (!spec.fp8_kv || cc >= kFp8KvMinCc) units.push_back(compile_unit(spec, arch));
  units.push_back(gpu::support_compile_unit(arch));
  return units;
}

struct CudaEvaluator::Impl {
  Impl(int index, const GpuInfo& g, std::size_t arena_offset)
      : index(index), gpu(g), cache(KernelCompiler(arch_for_cc(g.cc))), support(cache), arena(arena_offset) {}

  int index;
  GpuInfo gpu;
  std::string tiling;  // EVODISPATCH_DECODE_TILING: every decode launch with this tiling
  std::optional<bool> grid_by_items;  // EVODISPATCH_DECODE_GRID: every decode grid by items or strided
  gpu::KernelCache cache;
  gpu::SupportKernels support;
  std::unique_ptr<gpu::Stream> stream;
  std::optional<std::string> broken;
  // Where every case's buffer sets lie: one allocation for the process, sized at first
  // use to the memory the sets may take (kSetMemoryFraction), so a measurement does not
  // depend on the cases measured before it.
  gpu::DeviceArena arena;
  // Cases that passed the numeric check in this process, with their error and the SMs
  // their decode grid ran on: a row of a case checked before reports that check's.
  struct Checked {
    double rel_error = 0;
    int decode_sms = 0;
  };
  std::map<std::string, Checked> checked;

  // The last case's buffers and reference output, kept for the next measurement of the
  // same case: the oracle measures every decision of a shape in a row, and allocating,
  // filling and referencing a cache of many GiB once per decision costs more than timing
  // it. Set 0's inputs depend only on the case, so the reference holds for any buffers.
  struct LastCase {
    std::string key;
    std::unique_ptr<gpu::DecodeBuffers> buffers;
    int max_splits = 0;
    bool timed = false;
    L2Mode l2 = L2Mode::cold;
    BufferSets sets;
    std::optional<std::pair<std::vector<float>, std::vector<float>>> reference;  // out, lse
  };
  LastCase last;

  // Buffers for `c` with a workspace of at least max_splits, made or kept; `sets` says
  // how many input sets they rotate through (timed: enough for a cold L2).
  const gpu::DecodeBuffers& buffers_for(const MeasureCase& c, int max_splits, bool timed, L2Mode l2, BufferSets& sets) {
    const std::string key = case_key(c);
    if (last.key != key) last = LastCase{key};
    const bool fits = last.buffers && last.max_splits >= max_splits && (!timed || (last.timed && last.l2 == l2));
    if (!fits) {
      last.buffers.reset();  // freed before the next is sized against the free memory
      const int workspace = std::max(workspace_splits(c.shape, max_splits), last.max_splits);
      const double usable = usable_memory();
      last.sets = timed ? buffer_sets(gpu::case_layout(c.shape, workspace), l2, usable) : BufferSets{};
      last.buffers = std::make_unique<gpu::DecodeBuffers>(c, workspace, last.sets.sets, support, *stream, arena,
                                                          static_cast<std::size_t>(kSetMemoryFraction * usable));
      last.max_splits = workspace;
      last.timed = timed;
      last.l2 = l2;
    }
    sets = last.sets;
    return *last.buffers;
  }

  cudaStream_t s() const { return stream->get(); }

  void select_device() const { check(cudaSetDevice(index), "cudaSetDevice"); }

  // After a CudaError: is the context still usable? A sticky error fails every later
  // call, so a synchronize tells.
  void after_error(const CudaError& e) {
    cudaGetLastError();
    const cudaError_t sync = cudaDeviceSynchronize();
    if (gpu::is_sticky(e.code()) || sync != cudaSuccess) {
      broken = e.what();
      if (sync != cudaSuccess && sync != e.code()) *broken += "; then " + std::string(cudaGetErrorName(sync));
    }
  }

  // The kernels and the launch of a decision; "" or why it cannot run.
  std::string prepare(const MeasureCase& c, const Decision& d, const DeviceInfo& dev, Prepared& p) {
    RunnerKernels kernels = runner_kernels(c.shape, d, dev);
    if (!tiling.empty()) {
      try {
        kernels = runner_kernels(c.shape, d, with_tiling(kernels.decode, tiling));
      } catch (const InputError& e) {
        return e.what();
      }
    }
    std::string error;
    p.decode = cache.get(kernels.decode, &error);
    if (!p.decode) return error;
    if (kernels.combine) {
      p.combine = cache.get(*kernels.combine, &error);
      if (!p.combine) return error;
    }
    return plan_launch(c, d, dev, kernels, report(p.decode), report(p.combine), p.launch, grid_by_items);
  }

  // Every size from the plan. cta_sms: null, or where each decode CTA writes the SM it ran
  // on (the checked run).
  void launch(const Prepared& p, const gpu::DecodeBuffers& buf, int set, bool with_lse, int* cta_sms = nullptr) const {
    const Plan& plan = p.launch.plan;
    DecodeParams params = buf.params(p.launch.base, set, with_lse);
    params.cta_sms = cta_sms;
    void* args[] = {&params};
    cudaLaunchConfig_t decode = {};
    decode.gridDim = dim3(static_cast<unsigned>(plan.grid_ctas));
    decode.blockDim = dim3(static_cast<unsigned>(plan.threads_per_cta));
    decode.dynamicSmemBytes = static_cast<std::size_t>(plan.smem_bytes_per_cta);
    decode.stream = s();
    // Merged in their clusters, the splits of an item are one cluster (kernels/cuda/decode.cuh).
    cudaLaunchAttribute cluster[1] = {};
    cluster[0].id = cudaLaunchAttributeClusterDimension;
    cluster[0].val.clusterDim = {static_cast<unsigned>(plan.num_splits), 1, 1};
    if (plan.cluster_merge) {
      decode.attrs = cluster;
      decode.numAttrs = 1;
    }
    check(cudaLaunchKernelExC(&decode, p.decode->func(), args), "launch decode kernel");
    if (!plan.combine) return;
    // Programmatic dependent launch on Hopper and later: the combine kernel is scheduled
    // while the decode kernel runs and waits for it on the device (kernels/cuda/common.cuh).
    // Not with an SM margin: its waiting CTAs would sit on the SMs the margin leaves free.
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(static_cast<unsigned>(plan.combine_grid));
    cfg.blockDim = dim3(static_cast<unsigned>(plan.combine_threads_per_cta));
    cfg.stream = s();
    cudaLaunchAttribute pdl[1] = {};
    pdl[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    pdl[0].val.programmaticStreamSerializationAllowed = 1;
    if (gpu.cc >= 90 && plan.decision.sm_margin == 0) {
      cfg.attrs = pdl;
      cfg.numAttrs = 1;
    }
    check(cudaLaunchKernelExC(&cfg, p.combine->func(), args), "launch combine kernel");
  }

  // Free GPU memory and the arena's, which the next case may use.
  double usable_memory() const {
    std::size_t free = 0, total = 0;
    check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    return static_cast<double>(free) + static_cast<double>(arena.capacity());
  }

  // `free`: usable_memory() at the time.
  BufferSets buffer_sets(const gpu::CaseLayout& layout, L2Mode l2, double free) const {
    BufferSets b;
    const double set_bytes = static_cast<double>(layout.set_bytes);
    if (set_bytes > 0.9 * free)
      throw CudaError(cudaErrorMemoryAllocation, "one set of inputs and outputs needs " + gib(set_bytes) + ", " +
                                                     gib(free) + " of GPU memory is free");
    if (l2 == L2Mode::hot) return b;
    const double target = 2.0 * static_cast<double>(gpu.l2_bytes);
    const auto needed = static_cast<std::int64_t>(std::floor(target / set_bytes)) + 1;
    const auto budget = std::max<std::int64_t>(1, static_cast<std::int64_t>(kSetMemoryFraction * free / set_bytes));
    b.sets = static_cast<int>(std::min<std::int64_t>({needed, budget, kMaxBufferSets}));
    b.cold_met = b.sets * set_bytes > target;
    if (!b.cold_met)
      b.note = "cold L2 not reached: " + std::to_string(b.sets) + " buffer sets of " + gib(set_bytes) + " total " +
               gib(b.sets * set_bytes) + ", less than twice the L2 (" + gib(target) + ")" +
               (b.sets == kMaxBufferSets ? " (set cap)" : " (memory cap: 25% of free GPU memory)");
    return b;
  }

  // Poisons, runs once, compares with the reference; `decode_sms`: how many distinct SMs
  // the decode grid ran on in that run (what sm_margin promises, seen rather than assumed).
  NumericCheck numeric_check(const Prepared& p, const gpu::DecodeBuffers& buf, const Shape& shape, int& decode_sms) {
    const gpu::CaseLayout& l = buf.layout();
    const std::size_t lse_n = static_cast<std::size_t>(shape.batch) * shape.h_q * shape.seqlen_q;
    // 0xFFFF is a NaN in bf16 and fp16, 0xFFFFFFFF in fp32: unwritten elements stay NaN.
    check(cudaMemsetAsync(buf.out(0), 0xff, static_cast<std::size_t>(l.q_elems) * 2, s()), "poison out");
    check(cudaMemsetAsync(buf.lse(), 0xff, lse_n * sizeof(float), s()), "poison lse");
    gpu::DeviceBuffer cta_sms(static_cast<std::size_t>(p.launch.plan.grid_ctas) * sizeof(int));
    launch(p, buf, 0, true, static_cast<int*>(cta_sms.get()));
    std::vector<int> sm_of(static_cast<std::size_t>(p.launch.plan.grid_ctas));
    check(cudaMemcpyAsync(sm_of.data(), cta_sms.get(), sm_of.size() * sizeof(int), cudaMemcpyDeviceToHost, s()),
          "copy the CTAs' SMs");
    std::vector<std::uint16_t> out(static_cast<std::size_t>(l.q_elems));
    std::vector<float> lse(lse_n);
    check(cudaMemcpyAsync(out.data(), buf.out(0), out.size() * 2, cudaMemcpyDeviceToHost, s()), "copy out");
    check(cudaMemcpyAsync(lse.data(), buf.lse(), lse_n * 4, cudaMemcpyDeviceToHost, s()), "copy lse");
    const auto& [ref, rlse] = reference_of(buf, l.q_elems, lse_n);
    stream->sync();
    std::sort(sm_of.begin(), sm_of.end());
    decode_sms = static_cast<int>(std::unique(sm_of.begin(), sm_of.end()) - sm_of.begin());
    return check_output(out, query_dtype(shape), ref, lse, rlse, output_tolerance(query_dtype(shape)));
  }

  // The reference's output and LSE on set 0 of the last case's buffers, computed once.
  const std::pair<std::vector<float>, std::vector<float>>& reference_of(const gpu::DecodeBuffers& buf, std::int64_t q_elems,
                                                                       std::size_t lse_n) {
    if (last.reference) return *last.reference;
    gpu::DeviceBuffer ref_out(static_cast<std::size_t>(q_elems) * sizeof(float));
    gpu::DeviceBuffer ref_lse(lse_n * sizeof(float));
    support.reference(buf.reference_params(static_cast<float*>(ref_out.get()), static_cast<float*>(ref_lse.get())), s());
    std::vector<float> ref(static_cast<std::size_t>(q_elems)), rlse(lse_n);
    check(cudaMemcpyAsync(ref.data(), ref_out.get(), ref.size() * 4, cudaMemcpyDeviceToHost, s()), "copy reference");
    check(cudaMemcpyAsync(rlse.data(), ref_lse.get(), lse_n * 4, cudaMemcpyDeviceToHost, s()), "copy reference lse");
    stream->sync();
    last.reference.emplace(std::move(ref), std::move(rlse));
    return *last.reference;
  }

  // Checks `p` unless this case already passed; "" or why it failed (rel_error set).
  std::string ensure_checked(const MeasureCase& c, const Prepared& p, const gpu::DecodeBuffers& buf,
                             const TimingOptions& t, Measurement& m) {
    if (!t.check) return "";
    const std::string id = case_id(c, p.decision());
    if (const auto it = checked.find(id); it != checked.end()) {
      m.rel_error = it->second.rel_error;
      m.plan["gpu"]["decode_sms"] = it->second.decode_sms;
      return "";
    }
    int decode_sms = 0;
    const NumericCheck nc = numeric_check(p, buf, c.shape, decode_sms);
    m.rel_error = nc.rel_error;
    if (!nc.ok)
      return "numeric check failed (" + p.launch.kernels.decode.name() + ", " + describe(p.decision()) + "): " + nc.error;
    m.plan["gpu"]["decode_sms"] = decode_sms;
    checked.emplace(id, Checked{nc.rel_error, decode_sms});
    return "";
  }

  gpu::GraphExec capture_calls(const Prepared& p, const gpu::DecodeBuffers& buf, int calls) {
    return gpu::capture(*stream, [&] {
      for (int i = 0; i < calls; ++i) launch(p, buf, i % buf.sets(), false);
    });
  }

  // Microseconds of one replay of each graph, `n` times, back to back.
  std::vector<double> replay_times(const gpu::GraphExec& g, int n) {
    std::vector<gpu::Event> start(n), stop(n);
    for (int i = 0; i < n; ++i) {
      check(cudaEventRecord(start[i].get(), s()), "cudaEventRecord");
      g.launch(s());
      check(cudaEventRecord(stop[i].get(), s()), "cudaEventRecord");
    }
    stream->sync();
    std::vector<double> us(n);
    for (int i = 0; i < n; ++i) us[i] = 1000.0 * gpu::elapsed_ms(start[i], stop[i]);
    return us;
  }

  // Calls per graph: a replay lasts >= min_replay_us and, cold, visits every set.
  int calls_per_graph(const Prepared& p, const gpu::DecodeBuffers& buf, const TimingOptions& t) {
    constexpr int kProbe = 8;
    const gpu::GraphExec probe = capture_calls(p, buf, kProbe);
    replay_times(probe, 2);  // first replays upload the graph and warm the instruction cache
    const auto times = replay_times(probe, 3);
    const double one = std::max(0.05, sample_stats(times).median / kProbe);
    auto calls = static_cast<std::int64_t>(std::ceil(t.min_replay_us / one));
    if (t.l2 == L2Mode::cold) calls = std::max<std::int64_t>(calls, buf.sets());
    return static_cast<int>(std::clamp<std::int64_t>(calls, 1, kMaxCallsPerGraph));
  }

  void time_into(Measurement& m, const std::vector<double>& per_call_us) {
    const SampleStats st = sample_stats(per_call_us);
    m.median_us = st.median;
    m.p10_us = st.p10;
    m.p90_us = st.p90;
    m.samples = static_cast<int>(per_call_us.size());
  }
};

std::size_t parse_arena_offset(std::string_view text) {
  constexpr std::uint64_t kMax = std::uint64_t{64} << 30;
  const std::string shown(text);
  std::uint64_t bytes = 0;
  for (const char ch : text) {
    if (ch < '0' || ch > '9' || bytes > kMax)
      throw InputError("EVODISPATCH_ARENA_OFFSET: \"" + shown + "\" is not a byte count up to 64 GiB");
    bytes = bytes * 10 + static_cast<std::uint64_t>(ch - '0');
  }
  if (bytes > kMax || bytes % 256 != 0)
    throw InputError("EVODISPATCH_ARENA_OFFSET: " + shown + " is not a multiple of 256 up to 64 GiB");
  return static_cast<std::size_t>(bytes);
}

CudaEvaluator::CudaEvaluator(int index) {
  std::string why;
  const auto gpus = probe_gpus(&why);
  if (index < 0 || index >= static_cast<int>(gpus.size()))
    throw InputError("cuda:" + std::to_string(index) + ": no such GPU" + (gpus.empty() ? " (" + why + ")" : ""));
  gpu_ = gpus[index];
  device_ = device_info(gpu_);
  spec_ = "cuda:" + std::to_string(index);
  fingerprint_ = gpu_fingerprint(gpu_);
  kernel_build_ = kernel_build_hash() + "@" + arch_for_cc(gpu_.cc);
  const char* offset_text = std::getenv("EVODISPATCH_ARENA_OFFSET");
  const std::size_t arena_offset = offset_text ? parse_arena_offset(offset_text) : 0;
  impl_ = std::make_unique<Impl>(index, gpu_, arena_offset);
  // A forced tiling is another kernel build: its rows never mix with spec_for's.
  if (const char* t = std::getenv("EVODISPATCH_DECODE_TILING"); t && *t) {
    impl_->tiling = t;
    kernel_build_ += "+tiling:" + impl_->tiling;
  }
  // So is a forced grid.
  if (const char* g = std::getenv("EVODISPATCH_DECODE_GRID"); g && *g) {
    const std::string grid = g;
    if (grid != "items" && grid != "strided")
      throw InputError("EVODISPATCH_DECODE_GRID: \"" + grid + "\" is neither items nor strided");
    impl_->grid_by_items = grid == "items";
    kernel_build_ += "+grid:" + grid;
  }
  // So is a moved arena (a study of where the buffers lie, measuring.md).
  if (arena_offset > 0) kernel_build_ += "+arena-offset:" + std::to_string(arena_offset);
  try {
    impl_->select_device();
    check(cudaFree(nullptr), "create the CUDA context");
    impl_->stream = std::make_unique<gpu::Stream>();
  } catch (const CudaError& e) {
    throw InputError(spec_ + ": " + e.what());
  }
}

CudaEvaluator::~CudaEvaluator() = default;

std::optional<std::string> CudaEvaluator::unusable() const { return impl_->broken; }

Measurement CudaEvaluator::measure(const Shape& shape, const Decision& d, const TimingOptions& t) {
  return measure(MeasureCase{shape, {}}, d, t);
}

Measurement CudaEvaluator::measure(const MeasureCase& c, const Decision& d, const TimingOptions& t) {
  Measurement m;
  m.key = key(c.shape, d, t);
  if (impl_->broken) {
    m.error = spec_ + " is unusable after an earlier CUDA error: " + *impl_->broken;
    return m;
  }
  if (auto why = decision_error(d, device_)) {
    m.error = "invalid decision (" + describe(d) + "): " + *why;
    return m;
  }
  try {
    validate(c.shape, "shape");
    if (const std::string why = unsupported(c.shape, gpu_.cc); !why.empty()) {
      m.error = "unsupported shape (" + describe(c.shape) + "): " + why;
      return m;
    }
    impl_->select_device();
    Prepared p;
    if (std::string why = impl_->prepare(c, d, device_, p); !why.empty()) {
      m.error = why;
      return m;
    }
    m.plan = p.launch.row_plan;
    BufferSets sets;
    const gpu::DecodeBuffers& buf = impl_->buffers_for(c, p.decision().num_splits, t.replays > 0, t.l2, sets);
    const gpu::CaseLayout& layout = buf.layout();
    const bool timed = t.replays > 0;
    if (std::string why = impl_->ensure_checked(c, p, buf, t, m); !why.empty()) {
      m.error = why;
      return m;
    }
    if (timed) {
      const int calls = impl_->calls_per_graph(p, buf, t);
      const gpu::GraphExec g = impl_->capture_calls(p, buf, calls);
      impl_->replay_times(g, std::max(1, t.warmup));
      std::vector<double> per_call = impl_->replay_times(g, t.replays);
      for (double& x : per_call) x /= calls;
      impl_->time_into(m, per_call);
      m.plan["gpu"]["calls_per_replay"] = calls;
      m.plan["gpu"]["buffer_sets"] = sets.sets;
      m.plan["gpu"]["arena_bytes"] = impl_->arena.capacity();
      m.plan["gpu"]["set_bytes"] = layout.set_bytes;
      m.plan["gpu"]["l2"] = std::string(to_string(t.l2));
      m.plan["gpu"]["cold_l2_met"] = sets.cold_met;
      if (!sets.note.empty()) m.plan["gpu"]["note"] = sets.note;
    }
    m.ok = true;
  } catch (const CudaError& e) {
    impl_->after_error(e);
    m.ok = false;
    m.error = e.what();
    if (impl_->broken) m.error += " (sticky: " + spec_ + " must be restarted)";
  } catch (const std::exception& e) {
    m.ok = false;
    m.error = e.what();
  }
  return m;
}

Comparison CudaEvaluator::compare(const Shape& shape, const Decision& a, const Decision& b, const TimingOptions& t,
                                  int pairs) {
  return compare(MeasureCase{shape, {}}, a, b, t, pairs);
}

Comparison CudaEvaluator::compare(const MeasureCase& c, const Decision& a, const Decision& b, const TimingOptions& t,
                                  int pairs) {
  Comparison cmp;
  cmp.a.key = key(c.shape, a, t);
  cmp.b.key = key(c.shape, b, t);
  auto fail = [&](const std::string& why) {
    cmp.error = why;
    cmp.a.error = cmp.b.error = why;
    return cmp;
  };
  if (impl_->broken) return fail(spec_ + " is unusable after an earlier CUDA error: " + *impl_->broken);
  for (const Decision* d : {&a, &b})
    if (auto why = decision_error(*d, device_)) return fail("invalid decision (" + describe(*d) + "): " + *why);
  pairs = std::max(1, pairs);
  try {
    validate(c.shape, "shape");
    if (const std::string why = unsupported(c.shape, gpu_.cc); !why.empty())
      return fail("unsupported shape (" + describe(c.shape) + "): " + why);
    impl_->select_device();
    Prepared pa, pb;
    if (std::string why = impl_->prepare(c, a, device_, pa); !why.empty()) return fail("a: " + why);
    if (std::string why = impl_->prepare(c, b, device_, pb); !why.empty()) return fail("b: " + why);
    cmp.a.plan = pa.launch.row_plan;
    cmp.b.plan = pb.launch.row_plan;
    // One set of buffers serves both: room for the larger workspace.
    const int max_splits = std::max(pa.decision().num_splits, pb.decision().num_splits);
    BufferSets sets;
    const gpu::DecodeBuffers& buf = impl_->buffers_for(c, max_splits, true, t.l2, sets);
    if (std::string why = impl_->ensure_checked(c, pa, buf, t, cmp.a); !why.empty()) return fail("a: " + why);
    if (std::string why = impl_->ensure_checked(c, pb, buf, t, cmp.b); !why.empty()) return fail("b: " + why);

    TimingOptions tt = t;
    const int calls_a = impl_->calls_per_graph(pa, buf, tt);
    const int calls_b = impl_->calls_per_graph(pb, buf, tt);
    const gpu::GraphExec ga = impl_->capture_calls(pa, buf, calls_a);
    const gpu::GraphExec gb = impl_->capture_calls(pb, buf, calls_b);
    impl_->replay_times(ga, std::max(1, t.warmup));
    impl_->replay_times(gb, std::max(1, t.warmup));
    // A then B on even pairs, B then A on odd ones, so neither always runs second.
    std::vector<double> ta, tb, ratios;
    for (int i = 0; i < pairs; ++i) {
      double x, y;
      if (i % 2 == 0) {
        x = impl_->replay_times(ga, 1)[0] / calls_a;
        y = impl_->replay_times(gb, 1)[0] / calls_b;
      } else {
        y = impl_->replay_times(gb, 1)[0] / calls_b;
        x = impl_->replay_times(ga, 1)[0] / calls_a;
      }
      ta.push_back(x);
      tb.push_back(y);
      ratios.push_back(x / y);
    }
    impl_->time_into(cmp.a, ta);
    impl_->time_into(cmp.b, tb);
    for (auto* side : {&cmp.a, &cmp.b}) {
      side->plan["gpu"]["buffer_sets"] = sets.sets;
      side->plan["gpu"]["arena_bytes"] = impl_->arena.capacity();
      side->plan["gpu"]["l2"] = std::string(to_string(t.l2));
      side->plan["gpu"]["cold_l2_met"] = sets.cold_met;
      if (!sets.note.empty()) side->plan["gpu"]["note"] = sets.note;
      side->ok = true;
    }
    cmp.a.plan["gpu"]["calls_per_replay"] = calls_a;
    cmp.b.plan["gpu"]["calls_per_replay"] = calls_b;
    const SampleStats r = sample_stats(ratios);
    cmp.ratio = r.median;
    cmp.ratio_lo = r.p10;
    cmp.ratio_hi = r.p90;
    cmp.pairs = pairs;
    cmp.ok = true;
  } catch (const CudaError& e) {
    impl_->after_error(e);
    std::string why = e.what();
    if (impl_->broken) why += " (sticky: " + spec_ + " must be restarted)";
    cmp.a.ok = cmp.b.ok = false;
    return fail(why);
  } catch (const std::exception& e) {
    cmp.a.ok = cmp.b.ok = false;
    return fail(e.what());
  }
  return cmp;
}

ReferenceRun CudaEvaluator::run_reference(const MeasureCase& c) {
  validate(c.shape, "shape");
  if (const std::string why = unsupported(c.shape, gpu_.cc); !why.empty()) throw InputError(why);
  impl_->select_device();
  impl_->last = {};  // the memory a kept case holds
  const gpu::DecodeBuffers buf(c, 1, 1, impl_->support, *impl_->stream, impl_->arena, 0);
  const gpu::CaseLayout& l = buf.layout();
  const std::size_t lse_n = static_cast<std::size_t>(c.shape.batch) * c.shape.h_q * c.shape.seqlen_q;
  gpu::DeviceBuffer out(static_cast<std::size_t>(l.q_elems) * 4), lse(lse_n * 4);
  impl_->support.reference(buf.reference_params(static_cast<float*>(out.get()), static_cast<float*>(lse.get())),
                           impl_->s());
  ReferenceRun r;
  r.seqlens = buf.seqlens();
  r.page_table = buf.page_table();
  r.max_pages = l.max_pages;
  r.out.resize(static_cast<std::size_t>(l.q_elems));
  r.lse.resize(lse_n);
  const int kv_bytes = dtype_bytes(c.shape.dtype);
  std::vector<std::uint16_t> q(static_cast<std::size_t>(l.q_elems));
  std::vector<std::uint8_t> k(static_cast<std::size_t>(l.kv_elems * kv_bytes)), v(k.size());
  auto copy = [&](void* dst, const void* src, std::size_t bytes) {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, impl_->s()), "copy reference inputs");
  };
  copy(r.out.data(), out.get(), r.out.size() * 4);
  copy(r.lse.data(), lse.get(), lse_n * 4);
  copy(q.data(), buf.q(0), q.size() * 2);
  copy(k.data(), buf.k(0), k.size());
  copy(v.data(), buf.v(0), v.size());
  impl_->stream->sync();
  const Dtype qt = query_dtype(c.shape);
  r.q.resize(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) r.q[i] = bits_to_float(qt, q[i]);
  // Element e of the cache: row e / (Hkv D) of a request (contiguous) or a page slot.
  const std::int64_t row_elems = std::int64_t{c.shape.h_kv} * c.shape.head_dim;
  const std::int64_t rows_per_batch = c.shape.page_size > 0 ? std::int64_t{l.max_pages} * c.shape.page_size : c.shape.seqlen_k;
  auto widen = [&](const std::vector<std::uint8_t>& bytes, const std::vector<float>& descale) {
    std::vector<float> f(static_cast<std::size_t>(l.kv_elems));
    for (std::size_t e = 0; e < f.size(); ++e) {
      if (kv_bytes == 2) {
        f[e] = bits_to_float(qt, static_cast<std::uint16_t>(bytes[2 * e] | bytes[2 * e + 1] << 8));
        continue;
      }
      // A page belongs to the request whose table row holds it.
      const std::int64_t row = static_cast<std::int64_t>(e) / row_elems;
      const int head = static_cast<int>(static_cast<std::int64_t>(e) % row_elems / c.shape.head_dim);
      int batch = static_cast<int>(row / rows_per_batch);
      if (c.shape.page_size > 0) batch = buf.page_owner(static_cast<int>(row / c.shape.page_size));
      f[e] = e4m3_bits_to_float(bytes[e]) * descale[buf.descale_index(batch, head)];
    }
    return f;
  };
  r.k = widen(k, buf.k_descales());
  r.v = widen(v, buf.v_descales());
  return r;
}

}  // namespace evodispatch
