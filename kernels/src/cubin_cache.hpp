#pragma once
// Internal to evo_kernels: the hash and the on-disk cubin cache behind KernelCompiler.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <evodispatch/kernels/compiler.hpp>

namespace evodispatch::detail {

// SHA-256 of a byte stream, as 64 lower-case hex digits.
class Sha256 {
 public:
  Sha256();
  Sha256& update(std::string_view bytes);
  // Length-prefixed, so that ("ab","c") and ("a","bc") hash differently.
  Sha256& field(std::string_view bytes);
  std::string hex();

 private:
  void block(const unsigned char* p);
  unsigned int h_[8];
  unsigned char buf_[64];
  std::size_t buf_len_ = 0;
  unsigned long long total_ = 0;
};

std::string sha256_hex(std::string_view bytes);

// Where the entry of `key` lives: <dir>/<unit name>.<key>.cubin (the name is for people).
std::filesystem::path cache_entry_path(const std::filesystem::path& dir, std::string_view unit_name,
                                       std::string_view key);

// The entry at `path` if it is complete and intact (magic, header, sizes, checksum, key),
// else nullopt: a torn or corrupt file reads as a miss and is compiled again.
std::optional<CompiledKernel> cache_read(const std::filesystem::path& path, std::string_view key);

// Writes the entry to a temporary file in the same folder and renames it into place, so
// readers see the old file or the whole new one. Returns false (no throw) on I/O errors.
bool cache_write(const std::filesystem::path& path, const CompiledKernel&);

// An exclusive flock() on <path>, held for the object's life; the wait is unbounded (the
// holder is compiling the same key). Not locked if the file cannot be opened.
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool locked() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace evodispatch::detail
