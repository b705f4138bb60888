#pragma once
// Progress on stderr: a one-line display rewritten in place on a terminal, plain
// lines (at most one per 10%) otherwise, so logs stay readable.
#include <chrono>
#include <cstddef>
#include <string>

namespace evodispatch::cli {

class Progress {
 public:
  explicit Progress(std::string label);
  ~Progress();  // ends the line on a terminal
  void update(std::size_t done, std::size_t total);

 private:
  std::string label_;
  bool tty_;
  int last_decile_ = -1;
  std::chrono::steady_clock::time_point last_draw_{};
  bool drew_ = false;
};

}  // namespace evodispatch::cli
