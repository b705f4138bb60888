#pragma once
// A text file compiled into the binary by cmake/Embed.cmake.
#include <span>
#include <string_view>

namespace evodispatch {

struct EmbeddedFile {
  std::string_view name;  // base name, e.g. "fa3.lua"
  std::string_view text;
};

// The file called `name` in `files`, or nullptr.
inline const EmbeddedFile* find_embedded(std::span<const EmbeddedFile> files, std::string_view name) {
  for (const auto& f : files)
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace evodispatch
