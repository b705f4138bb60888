#include <evodispatch/kernels/plan.hpp>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include <evodispatch/kernels/kernel_spec.hpp>

namespace evodispatch {

KernelResources builtin_kernel_resources() { return KernelResources{}; }

KernelResources kernel_resources(const KernelSpec& decode, const KernelSpec& combine) {
  KernelResources r;
  r.threads_per_cta = decode.threads();
  r.registers_per_thread = decode.max_registers();  // what __launch_bounds__ lets ptxas use
  r.stages = decode.stages;
  r.block_m = decode.block_m;
  r.smem_bytes_per_cta = decode.smem_bytes();
  r.combine_threads_per_cta = combine.threads();
  r.combine_rows_per_cta = combine.rows_per_cta();
  r.cluster_merge = decode.cluster_merge;
  return r;
}

KernelResources kernel_resources(const Shape& shape, const Decision& decision, const DeviceInfo& hw) {
  KernelSpec decode, combine;
  try {
    decode = spec_for(shape, decision, hw);
    combine = combine_spec_for(shape);
  } catch (const InputError&) {
    return builtin_kernel_resources();
  }
  // The variants are sized for Hopper's 227 KiB per CTA; a smaller SM gets the generic kernel.
  if (decode.smem_bytes() > sm_limits(hw.cc).max_smem_bytes_per_cta) return builtin_kernel_resources();
  return kernel_resources(decode, combine);
}

int grid_ctas_per_sm(int occupancy, int sm_margin) { return sm_margin > 0 ? 1 : occupancy; }

// The persistent grid's fixed stride gives a CTA its next item however late it finishes,
// and an SM's CTAs are not served at one rate: where the items take more than one round,
// SMs whose CTAs fell behind finish last with items that a freed SM could have run. Handed
// out by the hardware, the items go to the SMs that free up first. Against the strided
// grid, interleaved, in six runs on H100s (docs/performance.md, "A grid of every item"):
//  * one or two CTAs per SM: D = 256 0.972-0.977 of the time over the fa3 policy's
//    decisions (B=17 Lk=5000 Hq=16 Hkv=16 520.8 -> 462.6 us), 0.957 at one split on 12
//    fresh shapes, 0.971-0.975 paged; D = 128 0.964-0.983, paged 0.981-0.985 (paged
//    B=153 Lk=3076 Hq=20 Hkv=4 lost 4-6% in every run). D = 64, whose items carry
//    half the bytes, 0.994-1.003, and B=150 Lk=150 Hq=28 Hkv=4 3.5-4.5% slower in two
//    runs: it keeps the strided grid;
//  * four CTAs per SM (D = 128 two-warp tiles) with a last round of at most a fifth of the
//    slots: 0.926-0.969 on 13 of 13 (B=206 Lk=150 Hq=64 Hkv=8, 1648 items on 528 slots:
//    56.6 -> 52.4 us); with a fuller last round 0.976-1.009 at one split, and up to 1.078
//    over the fa3 policy's (B=100 Lk=4096 Hq=32 Hkv=8), where an SM's own CTAs already
//    share its pace. Those keep the strided grid;
//  * fp8 caches, whose one-warp CTAs were sized to the strided rounds: 1.000-1.024, and
//    B=169 Lk=524 Hq=64 Hkv=8's thin round in tens 84.9 us against 72.9 in the rule's
//    sixes. They keep it too, as does an SM margin (it holds the CTAs to the usable SMs).
bool hardware_scheduled_grid(const Shape& shape, const Decision& decision, std::int64_t work_items,
                             std::int64_t slots, int ctas_per_sm) {
  if (shape.dtype == Dtype::fp8 || shape.head_dim == 64 || decision.sm_margin > 0 || work_items <= slots)
    return false;
  const std::int64_t last_round = work_items % slots;
  return ctas_per_sm <= 2 || (last_round > 0 && 5 * last_round <= slots);
}

std::int64_t decode_grid_ctas(const Plan& p, bool by_items) {
  return by_items ? p.work_items : std::min(p.work_items, p.slots);
}

bool combine_runs(int num_splits, bool cluster_merge) { return num_splits > 1 && !cluster_merge; }

Plan plan(const Shape& shape, const Decision& decision, const DeviceInfo& hw) {
  return plan(shape, decision, hw, kernel_resources(shape, decision, hw));
}

int modelled_ctas_per_sm(int threads, int registers_per_thread, int smem_bytes, const SmLimits& sm) {
  return std::min({sm.max_ctas_per_sm, sm.smem_bytes_per_sm / (smem_bytes + sm.smem_reserved_per_cta),
                   sm.registers_per_sm / (threads * registers_per_thread), sm.max_threads_per_sm / threads});
}

SmLimits sm_limits(int cc) {
  SmLimits l;  // Hopper (cc 90) and data-centre Blackwell (cc 100): 228 KiB per SM
  switch (cc) {
    case 80:  // A100
    case 87:
      l.smem_bytes_per_sm = 164 * 1024;
      l.max_smem_bytes_per_cta = 163 * 1024;
      break;
    case 86:  // consumer Ampere
      l.smem_bytes_per_sm = 100 * 1024;
      l.max_smem_bytes_per_cta = 99 * 1024;
      l.max_threads_per_sm = 1536;
      l.max_ctas_per_sm = 16;
      break;
    case 89:  // Ada
    case 120:  // consumer Blackwell
      l.smem_bytes_per_sm = 100 * 1024;
      l.max_smem_bytes_per_cta = 99 * 1024;
      l.max_threads_per_sm = 1536;
      l.max_ctas_per_sm = 24;
      break;
    case 70:  // V100
      l.smem_bytes_per_sm = 96 * 1024;
      l.max_smem_bytes_per_cta = 96 * 1024;
      l.smem_reserved_per_cta = 0;
      break;
    default:
      break;
  }
  return l;
}

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Products of shape fields can exceed 64 bits for absurd (but individually valid) shapes;
// such a shape is refused rather than planned with wrapped-around numbers.
std::int64_t mul(std::initializer_list<std::int64_t> factors, const char* what) {
  std::int64_t r = 1;
  for (auto f : factors)
    if (__builtin_mul_overflow(r, f, &r)) throw InputError(std::string("shape: too large (") + what + " overflows)");
  return r;
}

// fp8 stores only the KV cache in 8 bits; queries and outputs stay 16-bit.
int qo_bytes(Dtype d) { return d == Dtype::fp8 ? 2 : dtype_bytes(d); }

void check_resources(const KernelResources& r) {
  auto positive = [](int v, const char* field) {
    if (v < 1) throw InputError(std::string("kernel resources.") + field + ": must be >= 1, got " + std::to_string(v));
  };
  auto known_or_zero = [](int v, const char* field) {
    if (v < 0) throw InputError(std::string("kernel resources.") + field + ": must be >= 0 (0 = modelled), got " + std::to_string(v));
  };
  positive(r.threads_per_cta, "threads_per_cta");
  positive(r.registers_per_thread, "registers_per_thread");
  positive(r.stages, "stages");
  positive(r.block_m, "block_m");
  positive(r.combine_threads_per_cta, "combine_threads_per_cta");
  positive(r.combine_rows_per_cta, "combine_rows_per_cta");
  known_or_zero(r.ctas_per_sm, "ctas_per_sm");
  known_or_zero(r.max_ctas_per_sm, "max_ctas_per_sm");
  known_or_zero(r.combine_ctas_per_sm, "combine_ctas_per_sm");
}

// Splits are contiguous ranges of whole tiles, FlashAttention style: with more splits
// than tiles the trailing splits are empty, and the last non-empty one may be short.
void plan_splits(Plan& p) {
  p.num_splits = p.decision.num_splits;
  p.blocks_per_split = static_cast<int>(ceil_div(p.nblk, p.num_splits));
  p.non_empty_splits = static_cast<int>(ceil_div(p.nblk, p.blocks_per_split));
  p.last_split_blocks = p.nblk - (p.non_empty_splits - 1) * p.blocks_per_split;
}

// The query rows of one CTA and the work items, as the kernel decomposes the call.
void plan_rows(Plan& p, const KernelResources& res) {
  const WorkDecomposition w = decompose_work(p.shape, p.decision, res.block_m);
  p.pack_gqa = *p.decision.pack_gqa;
  p.m_tiles = w.m_tiles;
  p.rows_per_cta = std::min(w.rows_per_group, res.block_m);
  p.heads_per_cta =
      p.pack_gqa ? std::min<int>(p.qpk, static_cast<int>(ceil_div(p.rows_per_cta, p.shape.seqlen_q))) : 1;
  p.work_items = w.items;
}

// Shared memory: the variant's own, or stages of a K tile and a V tile plus one Q tile
// (the MMA works on block_m rows even when fewer are real).
std::int64_t smem_bytes(const Plan& p, const KernelResources& res) {
  if (res.smem_bytes_per_cta > 0) return res.smem_bytes_per_cta;
  const std::int64_t kv_tile = mul({p.block_n, p.shape.head_dim, dtype_bytes(p.shape.dtype)}, "tile bytes");
  return res.stages * 2 * kv_tile + std::int64_t{res.block_m} * p.shape.head_dim * qo_bytes(p.shape.dtype);
}

// The decode kernel's CTAs per SM: the runtime's count when the resources carry one (the
// GPU loaded the kernel, so it fits), else modelled from shared memory, registers and
// threads; at most the cap either way.
int decode_ctas_per_sm(const KernelResources& res, int smem, const SmLimits& sm) {
  int per_sm = res.ctas_per_sm;
  if (per_sm == 0) per_sm = modelled_ctas_per_sm(res.threads_per_cta, res.registers_per_thread, smem, sm);
  if (res.max_ctas_per_sm > 0) per_sm = std::min(per_sm, res.max_ctas_per_sm);
  if (per_sm < 1)
    throw InputError("kernel resources: " + std::to_string(res.threads_per_cta) + " threads x " +
                     std::to_string(res.registers_per_thread) + " registers do not fit one SM");
  return per_sm;
}

void plan_decode_kernel(Plan& p, const KernelResources& res, int cc) {
  const SmLimits sm = sm_limits(cc);
  const std::int64_t smem = smem_bytes(p, res);
  if (res.ctas_per_sm == 0 && smem > sm.max_smem_bytes_per_cta)
    throw InputError("shape.head_dim: " + std::to_string(p.shape.head_dim) + " needs " + std::to_string(smem) +
                     " bytes of shared memory per CTA, more than the " + std::to_string(sm.max_smem_bytes_per_cta) +
                     " a cc " + std::to_string(cc) + " SM gives one CTA");
  p.threads_per_cta = res.threads_per_cta;
  p.registers_per_thread = res.registers_per_thread;
  p.smem_bytes_per_cta = static_cast<int>(smem);
  p.ctas_per_sm = decode_ctas_per_sm(res, p.smem_bytes_per_cta, sm);
}

// The decode grid on num_sms - sm_margin SMs. Merged in clusters, the grid is whole
// clusters: one per item, which the hardware places on a GPC with room for all of its
// CTAs (a persistent grid of every slot would leave some clusters waiting, since a GPC's
// SMs are not a multiple of every cluster size).
void plan_decode_grid(Plan& p, const KernelResources& res) {
  p.cluster_merge = res.cluster_merge;
  if (p.cluster_merge && p.decision.sm_margin > 0)
    throw InputError("decision.sm_margin: the cluster merge runs without one (its clusters go wherever a GPC has room)");
  if (p.cluster_merge && p.num_splits > kMaxClusterSplits)
    throw InputError("decision.num_splits: the cluster merge merges at most " + std::to_string(kMaxClusterSplits) +
                     " splits, got " + std::to_string(p.num_splits));
  p.sms_used = p.num_sms - p.decision.sm_margin;
  p.slots = std::int64_t{p.sms_used} * grid_ctas_per_sm(p.ctas_per_sm, p.decision.sm_margin);
  if (p.cluster_merge) p.slots = std::max<std::int64_t>(p.num_splits, p.slots / p.num_splits * p.num_splits);
  p.grid_ctas = decode_grid_ctas(p, p.cluster_merge || hardware_scheduled_grid(p.shape, p.decision, p.work_items,
                                                                                   p.slots, p.ctas_per_sm));
  p.waves = ceil_div(p.work_items, p.slots);
}

// The combine kernel and its workspace, when the call splits: a persistent grid on the
// decode grid's SMs.
void plan_combine(Plan& p, const KernelResources& res, int cc, std::int64_t query_rows) {
  p.combine = combine_runs(p.num_splits, p.cluster_merge);
  if (!p.combine) return;
  // A CTA's threads serve fewer rows when each row splits its splits among lanes.
  const int lanes = combine_split_lanes(p.num_splits, p.shape.head_dim);
  const int rows_per_cta = std::max(1, res.combine_rows_per_cta / lanes);
  p.combine_ctas = ceil_div(query_rows, rows_per_cta);
  p.combine_rows_per_cta = static_cast<int>(std::min<std::int64_t>(rows_per_cta, query_rows));
  p.combine_threads_per_cta = res.combine_threads_per_cta;
  const SmLimits sm = sm_limits(cc);
  p.combine_ctas_per_sm = res.combine_ctas_per_sm > 0
                              ? res.combine_ctas_per_sm
                              : std::min(sm.max_ctas_per_sm, sm.max_threads_per_sm / res.combine_threads_per_cta);
  if (p.combine_ctas_per_sm < 1)
    throw InputError("kernel resources: " + std::to_string(res.combine_threads_per_cta) +
                     " combine threads do not fit one SM");
  p.combine_slots = std::int64_t{p.sms_used} * grid_ctas_per_sm(p.combine_ctas_per_sm, p.decision.sm_margin);
  p.combine_grid = std::min(p.combine_ctas, p.combine_slots);
  // One fp32 row of head_dim partial outputs and one fp32 LSE per split per query row.
  p.workspace_bytes = mul({p.num_splits, query_rows, p.shape.head_dim + 1, 4}, "workspace bytes");
}

// Each (request, KV head) streams seqlen_k rows of K and of V. A packed CTA shares that
// stream among its query heads, but every row tile of the group reads it again; an
// unpacked grid reads it once per query head.
void plan_memory(Plan& p, std::int64_t query_rows) {
  const Shape& s = p.shape;
  p.kv_footprint_bytes = mul({2, s.batch, s.seqlen_k, s.h_kv, s.head_dim, dtype_bytes(s.dtype)}, "KV bytes");
  p.kv_bytes_read = mul({p.kv_footprint_bytes, p.pack_gqa ? p.m_tiles : p.qpk}, "KV bytes read");
  p.q_bytes = mul({query_rows, s.head_dim, qo_bytes(s.dtype)}, "Q bytes");
  p.o_bytes = p.q_bytes;
}

}  // namespace

WorkDecomposition decompose_work(const Shape& shape, const Decision& decision, int block_m) {
  const Decision d = resolve(decision, shape);
  const int qpk = shape.h_kv > 0 ? shape.h_q / shape.h_kv : 1;
  WorkDecomposition w;
  w.heads_per_group = *d.pack_gqa ? qpk : 1;
  w.groups_per_kv_head = *d.pack_gqa ? 1 : qpk;
  w.rows_per_group = w.heads_per_group * shape.seqlen_q;
  w.m_tiles = static_cast<int>(ceil_div(w.rows_per_group, block_m));
  w.items = mul({shape.batch, shape.h_kv, w.groups_per_kv_head, w.m_tiles, d.num_splits}, "work items");
  return w;
}

Plan plan(const Shape& shape, const Decision& decision, const DeviceInfo& hw, const KernelResources& res) {
  validate(shape, "shape");
  if (hw.num_sms < 1) throw InputError("device.num_sms: must be >= 1, got " + std::to_string(hw.num_sms));
  if (auto why = decision_error(decision, hw)) throw InputError("decision." + *why);
  check_resources(res);

  Plan p;
  p.shape = shape;
  p.decision = resolve(decision, shape);
  p.num_sms = hw.num_sms;
  const Features f = features(shape);
  p.qpk = f.qpk;
  p.block_n = f.block_n;
  p.nblk = f.nblk;

  plan_splits(p);
  plan_rows(p, res);
  plan_decode_kernel(p, res, hw.cc);
  plan_decode_grid(p, res);
  const std::int64_t query_rows = mul({shape.batch, shape.seqlen_q, shape.h_q}, "query rows");
  plan_combine(p, res, hw.cc, query_rows);
  plan_memory(p, query_rows);
  return p;
}

nlohmann::json to_json(const Plan& p) {
  return {
      {"shape", to_json(p.shape)},
      {"decision", to_json(p.decision)},
      {"num_sms", p.num_sms},
      {"qpk", p.qpk},
      {"block_n", p.block_n},
      {"nblk", p.nblk},
      {"num_splits", p.num_splits},
      {"blocks_per_split", p.blocks_per_split},
      {"non_empty_splits", p.non_empty_splits},
      {"last_split_blocks", p.last_split_blocks},
      {"pack_gqa", p.pack_gqa},
      {"rows_per_cta", p.rows_per_cta},
      {"m_tiles", p.m_tiles},
      {"heads_per_cta", p.heads_per_cta},
      {"work_items", p.work_items},
      {"threads_per_cta", p.threads_per_cta},
      {"registers_per_thread", p.registers_per_thread},
      {"smem_bytes_per_cta", p.smem_bytes_per_cta},
      {"ctas_per_sm", p.ctas_per_sm},
      {"sms_used", p.sms_used},
      {"slots", p.slots},
      {"grid_ctas", p.grid_ctas},
      {"waves", p.waves},
      {"cluster_merge", p.cluster_merge},
      {"combine", p.combine},
      {"combine_ctas", p.combine_ctas},
      {"combine_rows_per_cta", p.combine_rows_per_cta},
      {"combine_threads_per_cta", p.combine_threads_per_cta},
      {"combine_ctas_per_sm", p.combine_ctas_per_sm},
      {"combine_slots", p.combine_slots},
      {"combine_grid", p.combine_grid},
      {"workspace_bytes", p.workspace_bytes},
      {"kv_footprint_bytes", p.kv_footprint_bytes},
      {"kv_bytes_read", p.kv_bytes_read},
      {"q_bytes", p.q_bytes},
      {"o_bytes", p.o_bytes},
  };
}

}  // namespace evodispatch
