#pragma once
// Strict reading of JSON objects: every field is typed, every error names its JSON
// path (e.g. "$.shapes[3].h_kv: expected an integer, got 2.5"), and fields nobody
// asked for are refused by finish(). Shared by shapes, workloads, profiles and configs.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace evodispatch {

class JsonReader {
 public:
  // Throws InputError unless `j` is an object. `path` is where it sits, e.g. "$.shapes[2]".
  JsonReader(const nlohmann::json& j, std::string path);

  const std::string& path() const { return path_; }
  std::string path_of(const std::string& field) const { return path_ + "." + field; }

  bool has(const std::string& field) const;
  // The raw member (marked as read), or nullptr.
  const nlohmann::json* member(const std::string& field);

  std::optional<std::int64_t> integer(const std::string& field);
  std::optional<double> number(const std::string& field);
  std::optional<bool> boolean(const std::string& field);
  std::optional<std::string> string(const std::string& field);

  std::int64_t required_integer(const std::string& field);
  std::string required_string(const std::string& field);

  // Refuses every member that was not read.
  void finish() const;

  // Refuses, up front, every member not named here: a misspelt field is reported as
  // unknown rather than as the required field it was meant to be.
  void allow_only(std::initializer_list<const char*> fields) const;

 private:
  const nlohmann::json& j_;
  std::string path_;
  std::set<std::string> read_;
};

// Type checks for values outside an object (array elements); throw InputError at `path`.
std::int64_t json_integer(const nlohmann::json& v, const std::string& path);
std::string json_kind(const nlohmann::json& v);  // "a string", "2.5", ...

}  // namespace evodispatch
