#include "decode_buffers.hpp"

#include <cmath>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include <evodispatch/kernels/dtype.hpp>
#include <evodispatch/kernels/kernel_spec.hpp>
#include <evodispatch/kernels/plan.hpp>

namespace evodispatch::gpu {

namespace {

std::int64_t align256(std::int64_t bytes) { return (bytes + 255) / 256 * 256; }

std::uint64_t fnv1a(std::uint64_t h, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace

CaseLayout case_layout(const Shape& s, int max_splits) {
  CaseLayout l;
  const std::int64_t D = s.head_dim, elem = 2, kv_elem = dtype_bytes(s.dtype);
  l.q_elems = std::int64_t{s.batch} * s.seqlen_q * s.h_q * D;
  std::int64_t kv_rows;
  if (s.page_size > 0) {
    l.max_pages = (s.seqlen_k + s.page_size - 1) / s.page_size;
    l.num_pages = s.batch * l.max_pages;
    kv_rows = std::int64_t{l.num_pages} * s.page_size;
  } else {
    kv_rows = std::int64_t{s.batch} * s.seqlen_k;
  }
  l.kv_elems = kv_rows * s.h_kv * D;
  std::int64_t at = 0;
  auto region = [&](std::int64_t bytes) {
    const std::int64_t off = at;
    at += align256(bytes);
    return off;
  };
  // q, k, v first: their bytes, hence their drawn values, do not depend on max_splits.
  l.q = region(l.q_elems * elem);
  l.k = region(l.kv_elems * kv_elem);
  l.v = region(l.kv_elems * kv_elem);
  l.out = region(l.q_elems * elem);
  const bool workspace = combine_runs(max_splits, false);  // whichever decision comes
  l.o_partial = region(workspace ? o_partial_floats(s, max_splits) * 4 : 0);
  l.lse_partial = region(workspace ? lse_partial_floats(s, max_splits) * 4 : 0);
  l.set_bytes = at;
  return l;
}

std::uint64_t case_seed(const MeasureCase& c) {
  const std::string shape = to_json(c.shape).dump();
  std::uint64_t h = fnv1a(0xcbf29ce484222325ull, shape.data(), shape.size());
  if (!c.seqlens.empty()) h = fnv1a(h, c.seqlens.data(), c.seqlens.size() * sizeof(int));
  return h;
}

std::vector<int> request_lengths(const MeasureCase& c) {
  const Shape& s = c.shape;
  if (c.seqlens.empty()) return std::vector<int>(s.batch, s.seqlen_k);
  if (static_cast<int>(c.seqlens.size()) != s.batch)
    throw InputError("seqlens: " + std::to_string(c.seqlens.size()) + " lengths for a batch of " +
                     std::to_string(s.batch));
  for (std::size_t b = 0; b < c.seqlens.size(); ++b)
    if (c.seqlens[b] < 0 || c.seqlens[b] > s.seqlen_k)
      throw InputError("seqlens[" + std::to_string(b) + "]: must be in [0, seqlen_k = " + std::to_string(s.seqlen_k) +
                       "], got " + std::to_string(c.seqlens[b]));
  return c.seqlens;
}

std::vector<int> shuffled_page_table(int batch, int max_pages, std::uint64_t seed) {
  std::vector<int> t(static_cast<std::size_t>(batch) * max_pages);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int>(i);
  // Fisher-Yates written out: std::shuffle's sequence is the library's choice.
  std::mt19937_64 rng(seed);
  for (std::size_t i = t.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(rng() % i);
    std::swap(t[i - 1], t[j]);
  }
  return t;
}

void DecodeBuffers::spread_query_rows(const Stream& stream) {
  if (query_dtype(shape_) != Dtype::bf16)
    throw InputError("spread_query_rows: bf16 queries only (fp16 ends at 65504), got " +
                     std::string(to_string(query_dtype(shape_))));
  std::vector<std::uint16_t> q(static_cast<std::size_t>(layout_.q_elems));
  const std::size_t bytes = q.size() * sizeof(std::uint16_t);
  for (int set = 0; set < sets_; ++set) {
    check(cudaMemcpyAsync(q.data(), this->q(set), bytes, cudaMemcpyDeviceToHost, stream.get()), "copy q out");
    check(cudaStreamSynchronize(stream.get()), "copy q out");
    for (std::size_t i = 0; i < q.size(); ++i) {
      const auto row = static_cast<int>(i / static_cast<std::size_t>(shape_.head_dim));
      const int e = row * 7 % 25 - 20;  // neighbouring rows (a head group's) far apart
      q[i] = float_to_bf16_bits(std::ldexp(bf16_bits_to_float(q[i]), e));  // exact: bf16 spans 2^-133 .. 2^127
    }
    check(cudaMemcpyAsync(this->q(set), q.data(), bytes, cudaMemcpyHostToDevice, stream.get()), "copy q in");
    check(cudaStreamSynchronize(stream.get()), "copy q in");
  }
}

void DecodeBuffers::poison_past_lengths(const Stream& stream) {
  const std::int64_t row_bytes = std::int64_t{shape_.h_kv} * shape_.head_dim * dtype_bytes(shape_.dtype);
  for (int b = 0; b < shape_.batch; ++b) {
    const int len = seqlens_[static_cast<std::size_t>(b)];
    if (len == shape_.seqlen_k) continue;
    const std::int64_t at = (std::int64_t{b} * shape_.seqlen_k + len) * row_bytes;
    const auto bytes = static_cast<std::size_t>((shape_.seqlen_k - len) * row_bytes);
    for (void* t : {k(0), v(0)})
      check(cudaMemsetAsync(static_cast<char*>(t) + at, 0xff, bytes, stream.get()), "poison the rows past the lengths");
  }
}

std::vector<float> case_descales(const MeasureCase& c, std::uint64_t seed) {
  const std::size_t n = c.per_tensor_descale ? 1 : static_cast<std::size_t>(c.shape.batch) * c.shape.h_kv;
  std::vector<float> d(2 * n);
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  for (float& x : d) x = static_cast<float>(std::exp2(static_cast<double>(rng() >> 11) * 0x1.0p-53 * 2.0 - 1.0));
  return d;
}

DecodeBuffers::DecodeBuffers(const MeasureCase& c, int max_splits, int sets, SupportKernels& support,
                             const Stream& stream, DeviceArena& arena, std::size_t arena_at_least)
    : shape_(c.shape),
      layout_(case_layout(c.shape, max_splits)),
      sets_(sets),
      per_tensor_descale_(c.per_tensor_descale),
      seqlens_(request_lengths(c)) {
  const std::uint64_t seed = case_seed(c);
  const auto bytes = static_cast<std::size_t>(layout_.set_bytes) * sets_;
  sets_base_ = arena.take(bytes, arena_at_least);
  support.fill_normal(sets_base_, static_cast<std::int64_t>(bytes / 2), seed, query_dtype(shape_), stream.get());
  if (c.spread_query_rows) spread_query_rows(stream);
  if (shape_.dtype == Dtype::fp8) {
    // The 16-bit draws above would hold e4m3 NaN bytes: K and V are drawn again as fp8.
    for (int set = 0; set < sets_; ++set) {
      support.fill_normal_e4m3(k(set), layout_.kv_elems, seed + 2 * set + 1, stream.get());
      support.fill_normal_e4m3(v(set), layout_.kv_elems, seed + 2 * set + 2, stream.get());
    }
    descales_ = case_descales(c, seed);
    descales_d_ = DeviceBuffer(descales_.size() * sizeof(float));
    check(cudaMemcpyAsync(descales_d_.get(), descales_.data(), descales_d_.size(), cudaMemcpyHostToDevice,
                          stream.get()),
          "copy descales");
  }
  if (shape_.page_size == 0) poison_past_lengths(stream);
  seqlens_d_ = DeviceBuffer(seqlens_.size() * sizeof(int));
  check(cudaMemcpyAsync(seqlens_d_.get(), seqlens_.data(), seqlens_d_.size(), cudaMemcpyHostToDevice, stream.get()),
        "copy cache_seqlens");
  if (shape_.page_size > 0) {
    page_table_ = shuffled_page_table(shape_.batch, layout_.max_pages, seed ^ 0x5bd1e995u);
    page_owner_.resize(page_table_.size());
    for (std::size_t i = 0; i < page_table_.size(); ++i)
      page_owner_[static_cast<std::size_t>(page_table_[i])] = static_cast<int>(i / layout_.max_pages);
    page_table_d_ = DeviceBuffer(page_table_.size() * sizeof(int));
    check(cudaMemcpyAsync(page_table_d_.get(), page_table_.data(), page_table_d_.size(), cudaMemcpyHostToDevice,
                          stream.get()),
          "copy page table");
  }
  lse_ = DeviceBuffer(static_cast<std::size_t>(shape_.batch) * shape_.h_q * shape_.seqlen_q * sizeof(float));
  // The host vectors must outlive the asynchronous copies.
  stream.sync();
}

DecodeParams DecodeBuffers::params(const DecodeParams& base_params, int set, bool with_lse) const {
  DecodeParams p = base_params;
  char* b = base(set);
  p.q = b + layout_.q;
  p.k = b + layout_.k;
  p.v = b + layout_.v;
  p.out = b + layout_.out;
  p.cache_seqlens = static_cast<const int*>(seqlens_d_.get());
  p.page_table = static_cast<const int*>(page_table_d_.get());
  p.lse = with_lse ? lse() : nullptr;
  p.o_partial = p.num_splits > 1 ? reinterpret_cast<float*>(b + layout_.o_partial) : nullptr;
  p.lse_partial = p.num_splits > 1 ? reinterpret_cast<float*>(b + layout_.lse_partial) : nullptr;
  if (shape_.dtype == Dtype::fp8) {
    p.k_descale = static_cast<const float*>(descales_d_.get());
    p.v_descale = p.k_descale + descales_.size() / 2;
    if (per_tensor_descale_) p.descale_batch_stride = p.descale_head_stride = 0;
  }
  return p;
}

std::vector<float> DecodeBuffers::k_descales() const {
  return {descales_.begin(), descales_.begin() + static_cast<std::ptrdiff_t>(descales_.size() / 2)};
}

std::vector<float> DecodeBuffers::v_descales() const {
  return {descales_.begin() + static_cast<std::ptrdiff_t>(descales_.size() / 2), descales_.end()};
}

int DecodeBuffers::descale_index(int batch, int kv_head) const {
  return per_tensor_descale_ ? 0 : batch * shape_.h_kv + kv_head;
}

ReferenceParams DecodeBuffers::reference_params(float* out, float* lse) const {
  ReferenceParams r{};
  r.q = q(0);
  r.k = k(0);
  r.v = v(0);
  r.seqlens = static_cast<const int*>(seqlens_d_.get());
  r.page_table = static_cast<const int*>(page_table_d_.get());
  r.out = out;
  r.lse = lse;
  r.batch = shape_.batch;
  r.seqlen_q = shape_.seqlen_q;
  r.h_q = shape_.h_q;
  r.h_kv = shape_.h_kv;
  r.head_dim = shape_.head_dim;
  r.page_size = shape_.page_size;
  r.max_pages = layout_.max_pages;
  r.seqlen_k_max = shape_.seqlen_k;
  r.causal = shape_.causal ? 1 : 0;
  r.dtype = query_dtype(shape_) == Dtype::fp16 ? kDtypeFp16 : kDtypeBf16;
  if (shape_.dtype == Dtype::fp8) {
    r.kv_fp8 = 1;
    r.k_descale = static_cast<const float*>(descales_d_.get());
    r.v_descale = r.k_descale + descales_.size() / 2;
    r.descale_batch_stride = per_tensor_descale_ ? 0 : shape_.h_kv;
    r.descale_head_stride = per_tensor_descale_ ? 0 : 1;
  }
  r.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape_.head_dim)));
  return r;
}

}  // namespace evodispatch::gpu
