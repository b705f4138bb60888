#include "cubin_cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

namespace evodispatch::detail {

// ---------------------------------------------------------------------------------------
// SHA-256 (FIPS 180-4). A cryptographic hash is overkill against accidents, but a cache
// key collision would silently run the wrong kernel, and 64-bit hashes of the kernel
// sources are not what anyone should have to reason about.
namespace {

constexpr unsigned int kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline unsigned int rotr(unsigned int x, int n) { return (x >> n) | (x << (32 - n)); }

}  // namespace

Sha256::Sha256()
    : h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

void Sha256::block(const unsigned char* p) {
  unsigned int w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = (unsigned int)p[4 * i] << 24 | (unsigned int)p[4 * i + 1] << 16 | (unsigned int)p[4 * i + 2] << 8 |
           (unsigned int)p[4 * i + 3];
  for (int i = 16; i < 64; ++i) {
    const unsigned int s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const unsigned int s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  unsigned int a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
  for (int i = 0; i < 64; ++i) {
    const unsigned int t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
    const unsigned int t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  h_[0] += a, h_[1] += b, h_[2] += c, h_[3] += d, h_[4] += e, h_[5] += f, h_[6] += g, h_[7] += h;
}

Sha256& Sha256::update(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t n = bytes.size();
  total_ += n;
  while (n > 0) {
    const std::size_t take = std::min(n, sizeof(buf_) - buf_len_);
    std::memcpy(buf_ + buf_len_, p, take);
    buf_len_ += take, p += take, n -= take;
    if (buf_len_ == sizeof(buf_)) {
      block(buf_);
      buf_len_ = 0;
    }
  }
  return *this;
}

Sha256& Sha256::field(std::string_view bytes) {
  const std::string len = std::to_string(bytes.size()) + ":";
  return update(len).update(bytes);
}

std::string Sha256::hex() {
  const unsigned long long bits = total_ * 8;
  const unsigned char one = 0x80, zero = 0;
  update(std::string_view(reinterpret_cast<const char*>(&one), 1));
  while (buf_len_ != 56) update(std::string_view(reinterpret_cast<const char*>(&zero), 1));
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
  update(std::string_view(reinterpret_cast<const char*>(len), 8));
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned int v : h_)
    for (int s = 28; s >= 0; s -= 4) out.push_back(digits[(v >> s) & 15]);
  return out;
}

std::string sha256_hex(std::string_view bytes) { return Sha256().update(bytes).hex(); }

// ---------------------------------------------------------------------------------------
// Entry format: "EVOCUBIN 1\n", one line of JSON (key, sizes, checksum, log, names,
// resources), then the cubin bytes.
namespace {

constexpr std::string_view kMagic = "EVOCUBIN 1\n";

nlohmann::json to_json(const ResourceReport& r) {
  return {{"kernel", r.kernel},
          {"registers", r.registers},
          {"stack_bytes", r.stack_bytes},
          {"spill_store_bytes", r.spill_store_bytes},
          {"spill_load_bytes", r.spill_load_bytes},
          {"static_smem_bytes", r.static_smem_bytes},
          {"barriers", r.barriers}};
}

ResourceReport report_from_json(const nlohmann::json& j) {
  ResourceReport r;
  r.kernel = j.at("kernel").get<std::string>();
  r.registers = j.at("registers").get<int>();
  r.stack_bytes = j.at("stack_bytes").get<int>();
  r.spill_store_bytes = j.at("spill_store_bytes").get<int>();
  r.spill_load_bytes = j.at("spill_load_bytes").get<int>();
  r.static_smem_bytes = j.at("static_smem_bytes").get<int>();
  r.barriers = j.at("barriers").get<int>();
  return r;
}

std::string sanitize(std::string_view name) {
  std::string out;
  for (char c : name) out.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ? c : '_');
  return out.substr(0, 80);
}

}  // namespace

std::filesystem::path cache_entry_path(const std::filesystem::path& dir, std::string_view unit_name,
                                       std::string_view key) {
  return dir / (sanitize(unit_name) + "." + std::string(key) + ".cubin");
}

std::optional<CompiledKernel> cache_read(const std::filesystem::path& path, std::string_view key) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  if (data.compare(0, kMagic.size(), kMagic) != 0) return std::nullopt;
  const std::size_t eol = data.find('\n', kMagic.size());
  if (eol == std::string::npos) return std::nullopt;
  try {
    const auto header = nlohmann::json::parse(data.substr(kMagic.size(), eol - kMagic.size()));
    if (header.at("key").get<std::string>() != key) return std::nullopt;
    const std::size_t size = header.at("cubin_bytes").get<std::size_t>();
    if (data.size() - eol - 1 != size) return std::nullopt;
    const std::string_view cubin(data.data() + eol + 1, size);
    if (sha256_hex(cubin) != header.at("cubin_sha256").get<std::string>()) return std::nullopt;
    CompiledKernel k;
    k.ok = true;
    k.cache_hit = true;
    k.cache_key = std::string(key);
    k.log = header.at("log").get<std::string>();
    k.name_expressions = header.at("name_expressions").get<std::vector<std::string>>();
    k.lowered_names = header.at("lowered_names").get<std::vector<std::string>>();
    if (k.lowered_names.size() != k.name_expressions.size()) return std::nullopt;
    k.resources = report_from_json(header.at("resources"));
    k.cubin.assign(cubin.begin(), cubin.end());
    return k;
  } catch (const std::exception&) {
    return std::nullopt;  // unparsable header: a miss
  }
}

bool cache_write(const std::filesystem::path& path, const CompiledKernel& k) {
  const nlohmann::json header = {{"key", k.cache_key},
                                 {"cubin_bytes", k.cubin.size()},
                                 {"cubin_sha256", sha256_hex(std::string_view(k.cubin.data(), k.cubin.size()))},
                                 {"log", k.log},
                                 {"name_expressions", k.name_expressions},
                                 {"lowered_names", k.lowered_names},
                                 {"resources", to_json(k.resources)}};
  // Unique per process and thread, so concurrent writers never share a temporary.
  static std::atomic<unsigned> counter{0};
  const std::filesystem::path tmp =
      path.string() + ".tmp." + std::to_string(::getpid()) + "." +
      std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 1000000) + "." +
      std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out << kMagic << header.dump() << '\n';
    out.write(k.cubin.data(), static_cast<std::streamsize>(k.cubin.size()));
    out.flush();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return false;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return false;
  }
  return true;
}

FileLock::FileLock(const std::filesystem::path& path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return;
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno != EINTR) {
      ::close(fd_);
      fd_ = -1;
      return;
    }
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

}  // namespace evodispatch::detail
