// The wave model (described in simulator.hpp).
#include <evodispatch/evaluator/simulator.hpp>

#include <algorithm>
#include <numeric>

namespace evodispatch {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

struct Bandwidth {
  double global;  // all CTAs together
  double per_sm;  // the CTAs of one SM together
};

Bandwidth kv_bandwidth(const SimProfile& prof, const Plan& p, L2Mode l2) {
  const SimModel& m = prof.model;
  const bool fits = static_cast<double>(p.kv_footprint_bytes) <= m.l2_fit_fraction * static_cast<double>(prof.device.l2_bytes);
  if (l2 == L2Mode::hot && fits) return {m.l2_bw_bytes_per_s, m.sm_l2_bw_bytes_per_s};
  // Cold: each KV byte comes from DRAM once; the re-reads of an unpacked GQA group (or of
  // a packed group tiled in several row tiles) run at the same time and hit in L2.
  const double from_dram = static_cast<double>(p.kv_footprint_bytes) / static_cast<double>(p.kv_bytes_read);
  auto mix = [from_dram](double dram, double l2) { return 1.0 / (from_dram / dram + (1.0 - from_dram) / l2); };
  // An fp8 cache is widened in registers before the tensor cores read it: its bytes stream
  // a little slower than 16-bit ones.
  const double f = p.shape.dtype == Dtype::fp8 ? m.fp8_stream_fraction : 1.0;
  return {f * mix(m.dram_efficiency * prof.device.mem_bw_bytes_per_s, m.l2_bw_bytes_per_s),
          f * mix(m.sm_dram_bw_bytes_per_s, m.sm_l2_bw_bytes_per_s)};
}

// Work item i is split i % num_splits of its (request, head, row tile): consecutive items
// walk the splits of one group first. Splits [0, non_empty - 1) hold blocks_per_split
// tiles, split non_empty - 1 holds last_split_blocks, the rest are empty.
class MainKernel {
 public:
  MainKernel(const SimProfile& prof, const Plan& p, L2Mode l2)
      : m_(prof.model), p_(p), bw_(kv_bandwidth(prof, p, l2)),
        row_bytes_(2.0 * p.shape.head_dim * dtype_bytes(p.shape.dtype)) {}

  double time_us() const {
    const std::int64_t slots = p_.slots, items = p_.work_items, splits = p_.num_splits;
    const std::int64_t full = items / slots, rem = items % slots;
    // A full wave's mix of splits depends only on where it starts modulo num_splits,
    // which repeats with this period: add each distinct wave once, times its count.
    const std::int64_t period = splits / std::gcd(slots, splits);
    double total = 0;
    for (std::int64_t k = 0; k < std::min(period, full); ++k) {
      const std::int64_t start = (k % splits) * (slots % splits) % splits;
      total += static_cast<double>((full - 1 - k) / period + 1) * wave_us(start, slots);
    }
    if (rem > 0) total += wave_us((full % splits) * (slots % splits) % splits, rem);
    return total;
  }

 private:
  // Items in [start, start + len) (start taken modulo num_splits) whose split is < k.
  std::int64_t count_below(std::int64_t start, std::int64_t len, std::int64_t k) const {
    const std::int64_t ns = p_.num_splits;
    auto upto = [&](std::int64_t n) { return (n / ns) * k + std::min(n % ns, k); };
    return upto(start + len) - upto(start);
  }

  // A wave lasts as long as its slowest CTA; the CTAs with KV to read share the bandwidth.
  double wave_us(std::int64_t start, std::int64_t len) const {
    const std::int64_t full_splits = count_below(start, len, p_.non_empty_splits - 1);
    const std::int64_t active = count_below(start, len, p_.non_empty_splits);
    if (active == 0) return m_.cta_start_us;  // only empty splits: write an empty partial
    const int tiles = full_splits > 0 ? p_.blocks_per_split : p_.last_split_blocks;
    const std::int64_t rows =
        full_splits > 0 ? std::int64_t{p_.blocks_per_split} * p_.block_n
                        : p_.shape.seqlen_k - std::int64_t{p_.non_empty_splits - 1} * p_.blocks_per_split * p_.block_n;
    const double per_sm_active = static_cast<double>(ceil_div(active, p_.sms_used));
    const double cta_bw = std::min(bw_.per_sm / per_sm_active, bw_.global / static_cast<double>(active));
    const double load_us = static_cast<double>(rows) * row_bytes_ / cta_bw * 1e6;
    return m_.cta_start_us + std::max(tiles * m_.tile_us, load_us);
  }

  const SimModel& m_;
  const Plan& p_;
  Bandwidth bw_;
  double row_bytes_;  // one KV row: K and V of one head
};

double combine_us(const SimProfile& prof, const Plan& p) {
  const SimModel& m = prof.model;
  // Merged in their clusters, each wave of items ends with one combine CTA's work: no
  // launch, no workspace.
  if (p.cluster_merge) return static_cast<double>(p.waves) * m.combine_cta_us;
  if (!p.combine) return 0;
  const double waves = static_cast<double>(ceil_div(p.combine_ctas, p.combine_slots));
  const double cta = m.combine_cta_us + static_cast<double>(p.num_splits) * p.combine_rows_per_cta * m.combine_split_row_us;
  // The workspace was just written by the main kernel: it is read from L2 when it fits.
  const bool fits = static_cast<double>(p.workspace_bytes) <= m.l2_fit_fraction * static_cast<double>(prof.device.l2_bytes);
  const double bw = fits ? m.l2_bw_bytes_per_s : m.dram_efficiency * prof.device.mem_bw_bytes_per_s;
  const double bytes_us = static_cast<double>(p.workspace_bytes + p.o_bytes) / bw * 1e6;
  return std::max(waves * cta, bytes_us);
}

}  // namespace

KernelResources sim_kernel_resources(const SimProfile& prof, const Shape& s, const Decision& d) {
  KernelResources r = kernel_resources(s, d, prof.device);
  if (prof.model.max_ctas_per_sm > 0)
    r.max_ctas_per_sm = r.max_ctas_per_sm > 0 ? std::min(r.max_ctas_per_sm, prof.model.max_ctas_per_sm)
                                              : prof.model.max_ctas_per_sm;
  r.combine_ctas_per_sm = prof.model.combine_ctas_per_sm;
  return r;
}

Plan sim_plan(const SimProfile& prof, const Shape& s, const Decision& d) {
  return plan(s, d, prof.device, sim_kernel_resources(prof, s, d));
}

Prediction predict(const SimProfile& prof, const Plan& p, L2Mode l2) {
  Prediction r;
  r.kv_bw_bytes_per_s = kv_bandwidth(prof, p, l2).global;
  r.main_us = MainKernel(prof, p, l2).time_us();
  r.launch_us = prof.model.launch_first_us + (p.combine ? prof.model.launch_extra_us : 0);
  r.combine_us = combine_us(prof, p);
  r.latency_us = r.launch_us + r.main_us + r.combine_us;
  return r;
}

double predict_us(const SimProfile& prof, const Plan& p, L2Mode l2) { return predict(prof, p, l2).latency_us; }

}  // namespace evodispatch
