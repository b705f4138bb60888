#include "progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace evodispatch::cli {

Progress::Progress(std::string label) : label_(std::move(label)), tty_(isatty(STDERR_FILENO) != 0) {}

Progress::~Progress() {
  if (tty_ && drew_) std::fputc('\n', stderr);
}

void Progress::update(std::size_t done, std::size_t total) {
  if (total == 0) return;
  if (tty_) {
    const auto now = std::chrono::steady_clock::now();
    if (done != total && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    std::fprintf(stderr, "\r%s %zu/%zu (%3.0f%%)", label_.c_str(), done, total, 100.0 * done / total);
    std::fflush(stderr);
    drew_ = true;
    return;
  }
  const int decile = static_cast<int>(10 * done / total);
  if (decile == last_decile_) return;
  last_decile_ = decile;
  std::fprintf(stderr, "%s %zu/%zu\n", label_.c_str(), done, total);
}

}  // namespace evodispatch::cli
