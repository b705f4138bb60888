#pragma once
// The dispatch contract (DESIGN.md §2): what a heuristic sees and what it answers.
// Plain data with JSON round-trip; every derived feature is computed here and only here.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace evodispatch {

// Bad input from a user (script, config, workload, decision, database). The message
// names the file, field or line; callers print it as it is.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Dtype { bf16, fp16, fp8 };
std::string_view to_string(Dtype);
std::optional<Dtype> parse_dtype(std::string_view);
int dtype_bytes(Dtype);

// One decode-attention call.
struct Shape {
  int batch = 1;
  int seqlen_q = 1;    // new tokens per request (1 = plain decode, up to 16 for speculative)
  int seqlen_k = 0;    // KV length (the longest request's when lengths differ)
  int h_q = 0;
  int h_kv = 0;
  int head_dim = 128;
  Dtype dtype = Dtype::bf16;  // of q, k, v and out; fp8: an e4m3 KV cache, q and out q_dtype
  int page_size = 0;   // 0 = contiguous KV cache
  bool causal = true;  // causal masking among the seqlen_q new tokens
  Dtype q_dtype = Dtype::bf16;  // fp8 only (bf16 or fp16); left bf16 for the 16-bit dtypes
  bool operator==(const Shape&) const = default;
};

// The element type of q and out: dtype, or q_dtype for an fp8 KV cache.
Dtype query_dtype(const Shape&);

// Features every policy and the built-in kernel derive from a shape.
struct Features {
  int qpk;      // h_q / h_kv
  int block_n;  // KV rows per tile of the built-in kernel
  int nblk;     // ceil(seqlen_k / block_n)
};
int builtin_block_n(int head_dim);
Features features(const Shape&);

// Throws InputError naming the first field out of range; `where` prefixes the message.
void validate(const Shape&, std::string_view where = "shape");

// A short human description, e.g. "B=1 Lq=1 Lk=512 Hq=64 Hkv=1 D=128 bf16".
std::string describe(const Shape&);

struct DeviceInfo {
  std::string name;
  int num_sms = 0;
  std::int64_t l2_bytes = 0;
  double mem_bw_bytes_per_s = 0;
  int cc = 0;  // compute capability as major*10+minor, e.g. 90
  bool operator==(const DeviceInfo&) const = default;
};

// Two features that carry across GPUs and head dims, where batch, h_kv and seqlen_k do
// not; rules and exports compute them with exactly these integer divisions.
// One split's CTAs (batch * h_kv) as a percentage of the device's SMs, rounded down.
std::int64_t waves_pct(const Shape&, const DeviceInfo&);
// KiB of K and V one (request, KV head) reads: 2 * seqlen_k * head_dim * bytes / 1024, rounded down.
std::int64_t kv_kib(const Shape&);
// Bytes of K and V the whole batch reads: 2 * batch * seqlen_k * h_kv * head_dim * bytes
// (the results views compute the same in SQL).
std::int64_t kv_bytes(const Shape&);

// exp(mean(log(v))): the one geometric mean of speedups and ratios (0 for none).
double geomean(std::span<const double> values);

inline constexpr int kMaxSplits = 256;

struct Decision {
  int num_splits = 1;
  std::optional<bool> pack_gqa;  // unset: true when qpk > 1
  int sm_margin = 0;
  bool operator==(const Decision&) const = default;
};

// The decision with every default filled in (pack_gqa set).
Decision resolve(const Decision&, const Shape&);

// A resolved decision as one integer (num_splits, pack_gqa, sm_margin): the key of the
// search's latency tables. Distinct decisions have distinct codes.
std::uint64_t decision_code(const Decision& resolved);

// Why `d` is not a legal answer for this shape on this device, or nullopt.
std::optional<std::string> decision_error(const Decision& d, const DeviceInfo& hw);

// e.g. "splits=3 pack=1 margin=0"
std::string describe(const Decision&);

// JSON round-trip. The readers refuse unknown fields and wrong types with an
// InputError that names the JSON path (`path` is where this object sits).
nlohmann::json to_json(const Shape&);
nlohmann::json to_json(const Decision&);
nlohmann::json to_json(const DeviceInfo&);
Shape shape_from_json(const nlohmann::json&, const std::string& path = "$");
Decision decision_from_json(const nlohmann::json&, const std::string& path = "$");
DeviceInfo device_from_json(const nlohmann::json&, const std::string& path = "$");

}  // namespace evodispatch
