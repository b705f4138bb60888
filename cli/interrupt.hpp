#pragma once
// Ctrl-C: the first SIGINT/SIGTERM sets a flag that long loops poll between units of
// work (so the unit in flight is committed first); they then throw Interrupted and
// the process exits 130.
#include <stdexcept>

namespace evodispatch::cli {

struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted") {}
};

void install_interrupt_handler();
bool interrupt_requested();

}  // namespace evodispatch::cli
