#include <evodispatch/kernels/reference.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace evodispatch {

namespace {

void need(std::size_t have, std::int64_t want, const char* what) {
  if (static_cast<std::int64_t>(have) < want)
    throw InputError(std::string("reference: ") + what + " holds " + std::to_string(have) + " values, needs " +
                     std::to_string(want));
}

}  // namespace

ReferenceOutputs reference_attention(const ReferenceInputs& in) {
  const Shape& s = in.shape;
  const std::int64_t B = s.batch, Lq = s.seqlen_q, Hq = s.h_q, Hkv = s.h_kv, D = s.head_dim;
  if (B < 1 || Lq < 1 || Hq < 1 || Hkv < 1 || D < 1 || Hq % Hkv != 0)
    throw InputError("reference: bad shape " + describe(s));
  const bool paged = s.page_size > 0;
  const std::int64_t qpk = Hq / Hkv;
  const double scale = in.softmax_scale > 0 ? in.softmax_scale : 1.0 / std::sqrt(static_cast<double>(D));

  need(in.q.size(), B * Lq * Hq * D, "q");
  if (!in.cache_seqlens.empty()) need(in.cache_seqlens.size(), B, "cache_seqlens");
  std::int64_t num_pages = 0;
  if (paged) {
    need(in.page_table.size(), B * in.max_pages, "page_table");
    num_pages = static_cast<std::int64_t>(in.k.size()) / (s.page_size * Hkv * D);
  } else {
    need(in.k.size(), B * s.seqlen_k * Hkv * D, "k");
  }
  need(in.v.size(), static_cast<std::int64_t>(in.k.size()), "v");

  // Offset of row `j` of request b, KV head h, in k / v.
  auto kv_offset = [&](std::int64_t b, std::int64_t j, std::int64_t h) -> std::int64_t {
    if (!paged) return ((b * s.seqlen_k + j) * Hkv + h) * D;
    const std::int64_t slot = j / s.page_size;
    if (slot >= in.max_pages) throw InputError("reference: key " + std::to_string(j) + " is past max_pages");
    const std::int64_t page = in.page_table[b * in.max_pages + slot];
    if (page < 0 || page >= num_pages) throw InputError("reference: page id " + std::to_string(page) + " out of range");
    return ((page * s.page_size + j % s.page_size) * Hkv + h) * D;
  };

  ReferenceOutputs out;
  out.out.assign(B * Lq * Hq * D, 0.0);
  out.lse.assign(B * Hq * Lq, -std::numeric_limits<double>::infinity());
  std::vector<double> scores, acc(D);
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t len = in.cache_seqlens.empty() ? s.seqlen_k : in.cache_seqlens[b];
    if (!paged && len > s.seqlen_k) throw InputError("reference: cache_seqlens[b] exceeds seqlen_k");
    for (std::int64_t i = 0; i < Lq; ++i) {
      const std::int64_t visible = std::max<std::int64_t>(0, s.causal ? std::min(len, len - Lq + i + 1) : len);
      for (std::int64_t h = 0; h < Hq; ++h) {
        if (visible == 0) continue;  // out 0, lse -inf
        const std::int64_t kvh = h / qpk;
        const float* q = in.q.data() + ((b * Lq + i) * Hq + h) * D;
        scores.assign(visible, 0.0);
        double mx = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < visible; ++j) {
          const float* k = in.k.data() + kv_offset(b, j, kvh);
          double dot = 0;
          for (std::int64_t d = 0; d < D; ++d) dot += static_cast<double>(q[d]) * k[d];
          scores[j] = dot * scale;
          mx = std::max(mx, scores[j]);
        }
        double sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::int64_t j = 0; j < visible; ++j) {
          const double w = std::exp(scores[j] - mx);
          sum += w;
          const float* v = in.v.data() + kv_offset(b, j, kvh);
          for (std::int64_t d = 0; d < D; ++d) acc[d] += w * v[d];
        }
        double* o = out.out.data() + ((b * Lq + i) * Hq + h) * D;
        for (std::int64_t d = 0; d < D; ++d) o[d] = acc[d] / sum;
        out.lse[(b * Hq + h) * Lq + i] = mx + std::log(sum);
      }
    }
  }
  return out;
}

}  // namespace evodispatch
