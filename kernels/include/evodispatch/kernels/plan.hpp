#pragma once
// The launch plan of the built-in split-KV decode kernel (DESIGN.md §3): plain host data
// derived from (shape, decision, device). The same plan drives the GPU launch, the
// simulator, and is stored with every measurement, so everything here is arithmetic
// that a test can check by hand.
#include <cstdint>

#include <nlohmann/json_fwd.hpp>

#include <evodispatch/heuristics/contract.hpp>
#include <evodispatch/kernels/kernel_spec.hpp>

namespace evodispatch {

// What the decode and combine kernels ask of an SM: the ONLY kernel-specific numbers of
// the plan. kernel_resources() takes them from the kernel variants the GPU runner launches
// for the (shape, decision) (kernel_spec.hpp), so the simulator plans the kernels that run.
// Where the GPU knows better than the plan's model (the occupancy of a loaded kernel), the
// runner passes what the runtime reports.
struct KernelResources {
  int threads_per_cta = 128;        // 4 warps
  int registers_per_thread = 128;
  int stages = 2;                   // K/V tiles in flight
  int block_m = 64;                 // query rows per CTA when a packed GQA group is tiled
  int smem_bytes_per_cta = 0;       // the variant's dynamic shared memory; 0: estimate from the tiles
  // The decode kernel's CTAs per SM as the runtime reports them for the loaded kernel; 0:
  // modelled from the fields above and the SM's limits.
  int ctas_per_sm = 0;
  int max_ctas_per_sm = 0;          // extra occupancy cap (0 = none); the simulator's profile sets it
  int combine_threads_per_cta = 128;
  int combine_rows_per_cta = 8;     // query rows merged by one combine CTA
  // The combine kernel's CTAs per SM: the runtime's count on a GPU, the profile's in the
  // simulator; 0: modelled from its threads.
  int combine_ctas_per_sm = 0;
  // The decode kernel merges an item's splits in their cluster (KernelSpec::cluster_merge):
  // no combine kernel, and the grid is whole clusters of num_splits CTAs.
  bool cluster_merge = false;
};
// A generic kernel, for shapes the built-in kernels do not cover (fp8, other head dims).
KernelResources builtin_kernel_resources();
// The resources a decode variant and its combine kernel state; registers at the launch
// bound's worst case (the runner replaces them, and the occupancies, with the GPU's).
KernelResources kernel_resources(const KernelSpec& decode, const KernelSpec& combine);
// The resources of the variant spec_for(shape, decision, hw) and its combine kernel.
// Falls back to the generic kernel for shapes without a variant.
KernelResources kernel_resources(const Shape&, const Decision&, const DeviceInfo&);

// What one SM offers, by compute capability (the SM's shared memory, registers, ...).
struct SmLimits {
  int smem_bytes_per_sm = 228 * 1024;
  int max_smem_bytes_per_cta = 227 * 1024;
  int smem_reserved_per_cta = 1024;  // the driver keeps 1 KiB per resident CTA
  int registers_per_sm = 64 * 1024;
  int max_threads_per_sm = 2048;
  int max_ctas_per_sm = 32;
};
// Unknown capabilities get Hopper's limits (the GPU this project targets).
SmLimits sm_limits(int cc);
// The CTAs of `threads` threads, each of `registers_per_thread`, with `smem_bytes` of shared
// memory, that one SM holds by its limits (the model where the runtime has not said).
int modelled_ctas_per_sm(int threads, int registers_per_thread, int smem_bytes, const SmLimits&);

struct Plan {
  // Inputs, with the decision resolved (pack_gqa set).
  Shape shape;
  Decision decision;
  int num_sms = 0;

  // Features of the built-in kernel.
  int qpk = 0;
  int block_n = 0;
  int nblk = 0;

  // KV split: each split covers blocks_per_split KV tiles; splits past non_empty_splits
  // get no tile (they only write an empty partial), the last non-empty one may be short.
  int num_splits = 1;
  int blocks_per_split = 0;
  int non_empty_splits = 0;
  int last_split_blocks = 0;  // tiles of the last non-empty split

  // Query rows: packed, one CTA holds qpk * seqlen_q rows of one KV head (in m_tiles
  // tiles of at most block_m rows); unpacked, one CTA holds the seqlen_q rows of one query head.
  bool pack_gqa = false;
  int rows_per_cta = 0;
  int m_tiles = 1;
  int heads_per_cta = 1;  // query heads whose rows one CTA holds (at most)

  // Work items: the CTAs a non-persistent grid would launch.
  std::int64_t work_items = 0;

  // Kernel configuration.
  int threads_per_cta = 0;
  int registers_per_thread = 0;
  int smem_bytes_per_cta = 0;
  int ctas_per_sm = 0;

  // The decode grid on num_sms - sm_margin SMs: persistent, or one CTA per work item where
  // hardware_scheduled_grid says so.
  int sms_used = 0;
  std::int64_t slots = 0;      // sms_used * grid_ctas_per_sm(ctas_per_sm, sm_margin) CTAs
  std::int64_t grid_ctas = 0;  // work_items if hardware_scheduled_grid or cluster_merge, else min(work_items, slots)
  std::int64_t waves = 0;      // ceil(work_items / slots)

  // The splits of an item are one cluster and merge there (KernelResources::cluster_merge):
  // the grid is one cluster per item, placed by the hardware.
  bool cluster_merge = false;

  // Combine kernel: runs iff combine_runs(num_splits, cluster_merge); its persistent grid
  // on the same SMs.
  bool combine = false;
  std::int64_t combine_ctas = 0;
  int combine_rows_per_cta = 0;  // query rows one combine CTA merges (the last may have fewer)
  int combine_threads_per_cta = 0;
  int combine_ctas_per_sm = 0;
  std::int64_t combine_slots = 0;  // sms_used * grid_ctas_per_sm(combine_ctas_per_sm, sm_margin)
  std::int64_t combine_grid = 0;   // min(combine_ctas, combine_slots)

  // Memory.
  std::int64_t workspace_bytes = 0;  // fp32 O partials + fp32 LSE per split per query row
  std::int64_t kv_footprint_bytes = 0;  // distinct K and V bytes the call touches
  std::int64_t kv_bytes_read = 0;    // K and V bytes the CTAs load (re-reads included)
  std::int64_t q_bytes = 0;
  std::int64_t o_bytes = 0;

  bool operator==(const Plan&) const = default;
};

// CTAs per usable SM that a persistent grid may hold. Without a margin, every CTA the SM
// can keep resident (`occupancy`). With one, a single CTA per usable SM: the hardware
// spreads a grid over every free SM before it stacks CTAs on one, so a grid of
// (SMs - margin) x occupancy CTAs would run on more SMs than the margin leaves free.
// A grid of at most SMs - margin CTAs runs on at most SMs - margin SMs.
int grid_ctas_per_sm(int occupancy, int sm_margin);

// Whether the decode grid launches one CTA per work item, which the hardware hands to SMs
// as their CTAs finish, instead of a persistent grid of `slots` CTAs that stride the items
// in a fixed order: a 16-bit cache at D = 128 or 256 with more items than slots and no SM
// margin, whose variant holds at most two CTAs per SM (`ctas_per_sm`) or whose last round
// of items fills at most a fifth of the slots.
bool hardware_scheduled_grid(const Shape&, const Decision&, std::int64_t work_items, std::int64_t slots,
                             int ctas_per_sm);

// The decode grid's CTAs: one per work item `by_items`, else the persistent grid's
// min(work_items, slots).
std::int64_t decode_grid_ctas(const Plan&, bool by_items);

// Whether a call of `num_splits` splits runs the combine kernel after the decode kernel:
// with more than one split, unless they merge in their cluster.
bool combine_runs(int num_splits, bool cluster_merge);

// How the decode kernel's work items cover a call (DecodeParams' work decomposition): a
// head group is the query heads one CTA serves (all qpk of a KV head when packed, one
// otherwise), its rows are tiled by block_m. Device-independent; the decision's pack_gqa
// default applies.
struct WorkDecomposition {
  int heads_per_group = 1;
  int groups_per_kv_head = 1;
  int rows_per_group = 1;
  int m_tiles = 1;
  std::int64_t items = 0;  // batch * h_kv * groups_per_kv_head * m_tiles * num_splits
};
// Throws InputError when the item count overflows.
WorkDecomposition decompose_work(const Shape&, const Decision&, int block_m);

// Everything a launch needs, from one place: the GPU runner launches exactly these grids,
// blocks and shared memory, the simulator predicts from the same plan. Occupancies the
// resources carry (the runtime's) are taken as they are; otherwise they are modelled.
// Throws InputError naming the field when the shape, the decision or the device is not
// valid, or when the modelled kernel cannot be configured (a tile too large for shared
// memory).
Plan plan(const Shape&, const Decision&, const DeviceInfo&, const KernelResources& resources);
// The plan of the built-in kernel variant: plan(s, d, hw, kernel_resources(s, d, hw)).
Plan plan(const Shape&, const Decision&, const DeviceInfo&);

nlohmann::json to_json(const Plan&);

}  // namespace evodispatch
