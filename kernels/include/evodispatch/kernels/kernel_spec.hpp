#pragma once
// One specialisation of the decode or combine kernel (kernels/cuda/*.cuh): the template
// arguments NVRTC instantiates, the resources a launch needs, and the list of every
// specialisation the runner may ask for (all of them compile in CI, without a GPU).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <evodispatch/heuristics/contract.hpp>
#include <evodispatch/kernels/decode_params.hpp>

namespace evodispatch {

enum class KernelKind { decode, combine };

// The fp8-KV variants widen e4m3 with cvt.rn.f16x2.e4m3x2, which sm_89 introduced.
inline constexpr int kFp8KvMinCc = 89;
// Thread-block clusters and distributed shared memory (KernelSpec::cluster_merge): sm_90.
inline constexpr int kClusterMinCc = 90;

struct KernelSpec {
  KernelKind kind = KernelKind::decode;
  int head_dim = 128;      // 64, 128 or 256
  Dtype dtype = Dtype::bf16;  // of q and out (and of k and v unless fp8_kv): bf16 or fp16
  bool fp8_kv = false;       // decode only: k and v are fp8 e4m3, with k/v descales
  // Decode only (a combine spec leaves them at these defaults). Packing the GQA group is
  // no template argument: the kernel takes its head groups from DecodeParams, so one
  // variant serves both pack_gqa values.
  bool paged = false;
  int block_m = 16;        // query rows per CTA = 16 * warps_m
  int block_n = 64;        // KV rows per pipeline tile; divides the split block, builtin_block_n(head_dim)
  int warps_m = 1;         // warps along the query rows (16 rows each)
  int warps_n = 4;         // warps along the keys of a tile (each its own online softmax)
  int stages = 3;          // K/V tiles in flight (cp.async pipeline depth)
  int min_ctas_per_sm = 1; // __launch_bounds__ minimum: registers are capped so this many fit an SM
  // K and V of each tile in copy groups of their own, waited for one after the other: Q K^T
  // and the softmax run while V lands, for a second barrier per tile (spec_for's rule).
  bool kv_apart = false;
  // The splits of an item run as one thread-block cluster (num_splits CTAs, at most
  // kMaxClusterSplits) and merge in distributed shared memory: no combine kernel (sm_90+).
  bool cluster_merge = false;

  int warps() const;
  int threads() const;
  // Dynamic shared memory per CTA (decode_smem_layout), 0 for the combine kernel.
  int smem_bytes() const;
  // Query rows one CTA holds: block_m for decode; rows merged per combine CTA (a grid
  // loop may give a CTA several such groups).
  int rows_per_cta() const;
  // The registers per thread ptxas may use: 255, or less where min_ctas_per_sm asks.
  int max_registers() const;

  // e.g. "decode_d128_bf16_contig_m16n128_w1x4_s3", "decode_d128_bf16_contig_m16n64_w1x4_s2_o3_kva_cm",
  // "decode_d128_bf16_fp8kv_paged_...", "combine_d128_bf16".
  std::string name() const;
  // The template instantiation, as NVRTC's name expression (and lowered-name lookup) wants it.
  std::string kernel_expression() const;
  // The NVRTC translation unit: it includes the embedded kernel header.
  std::string source() const;
  // Options for nvrtcCompileProgram; `arch` is an exact target such as "sm_90a".
  std::vector<std::string> nvrtc_options(std::string_view arch) const;

  bool operator==(const KernelSpec&) const = default;
};

// Why the spec cannot be built (unsupported head_dim, dtype, tiling, shared memory over
// 227 KiB), or an empty string.
std::string spec_error(const KernelSpec&);

// The decode specialisation for a shape and a pack_gqa choice, throughput tiling: block_m
// 16 when the CTA's rows (qpk * Lq packed, Lq unpacked) fit one mma tile, else 64 (4 x 2
// warps, rows tiled over m). An fp8 shape gets the fp8-KV variant of its query dtype.
// Throws InputError for an unsupported head_dim.
KernelSpec spec_for(const Shape&, bool pack_gqa);

// The specialisation the runner launches for a decision on a device of `num_sms` SMs
// (the plan's KernelResources should come from it). Beyond spec_for it weighs the grid:
// packed rows are tiled by 16 (more CTAs, each re-reading the group's KV through L2)
// while the 16-row work items fit in one wave of num_sms - sm_margin SMs; beyond, by 32 or
// 64 after the padded rows, the waves and the keys per split (long_group_spec in
// kernel_spec.cpp); and at D = 128 it sizes the bytes in flight to the grid: 128-row tiles (one
// CTA per SM, half the per-tile latency) while the items fill at most half the SMs,
// 64-row tiles in three stages (two CTAs per SM) up to one item per SM, two stages
// (three CTAs per SM, contiguous KV) up to three per SM. On Hopper and later, two to four
// splits of at most two blocks over few 16-row items merge in a cluster (cluster_merge;
// 16-bit cache, D = 128, no SM margin). Deterministic in (shape, decision, num_sms).
KernelSpec spec_for(const Shape&, const Decision&, int num_sms);
// The same on the device `hw` describes: its SMs, and its DRAM bandwidth where a rule sizes
// the bytes in flight by it, and its compute capability (spec_for(shape, decision, num_sms)
// is an H100's bandwidth and capability). What the plan and the runner use.
KernelSpec spec_for(const Shape&, const Decision&, const DeviceInfo& hw);
// The bandwidth from which a device counts as fast for those rules: between an H100 SXM's
// 3.35 TB/s and an H200's 4.8 TB/s as the driver reports them (memory clock x bus width).
inline constexpr double kFastDramBytesPerS = 4.0e12;
KernelSpec combine_spec_for(const Shape&);

// `decode` with the tiling of `tiling`, "m<block_m>n<block_n>w<warps_m>x<warps_n>s<stages>"
// with an optional "o<min_ctas_per_sm>" (as in the variant names), an optional "a" for K
// and V apart (kv_apart) and an optional final "c" for the cluster merge (cluster_merge):
// how a kernel developer measures a tiling spec_for would not choose
// (EVODISPATCH_DECODE_TILING, measuring.md).
// Throws InputError naming the part that does not parse or spec_error's reason.
KernelSpec with_tiling(KernelSpec decode, std::string_view tiling);

// Every specialisation the runner may need, each once: decode for each head_dim x dtype x
// KV type (16-bit, fp8) x layout x (m16, m64), plus the 128-row-tile m16 variants and the
// contiguous three-CTA one (16-bit KV) at D = 128, the long-group tilings at D = 64 and 128
// (m32 with 64- and 128-row K/V tiles, m64 over 4 x 1 warps), the tilings by items per SM
// and a fast DRAM's, the 64-row tiles with K and V apart, the four-warp 16-row tiles that
// merge their splits in a cluster (kernel_spec.cpp), and combine for each head_dim x dtype.
std::vector<KernelSpec> all_kernel_specs();

// The launch-independent part of the parameters for a dense call: dimensions, the work
// decomposition and the strides of dense q/out [B, Lq, Hq, D], k/v [B, Lk_max, Hkv, D]
// (contiguous, lk_max = shape.seqlen_k) or [num_pages, page_size, Hkv, D] (paged), page
// table [B, max_pages] and lse [B, Hq, Lq]. Pointers are left null for the caller.
// `decision` is resolved first (pack_gqa default); the work decomposition is
// decompose_work(shape, decision, spec.block_m) (plan.hpp).
DecodeParams decode_params_for(const Shape&, const Decision&, const KernelSpec&, int max_pages = 0);

// Workspace of a split call: fp32 partial O and LSE, dense, per DecodeParams' comments.
std::int64_t o_partial_floats(const Shape&, int num_splits);
std::int64_t lse_partial_floats(const Shape&, int num_splits);

}  // namespace evodispatch
