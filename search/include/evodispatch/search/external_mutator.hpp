#pragma once
// The external mutator (DESIGN.md §5): a user's command that reads a JSON request on
// stdin (the parent, inspirations, per-shape losses) and writes a Lua dispatch script on
// stdout, e.g. a wrapper around an LLM. It runs under a time limit in its own process
// group, which is killed when the limit passes; whatever goes wrong is reported in the
// result, never thrown, so a failed attempt becomes a row and the search goes on.
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace evodispatch::search {

struct ExternalResult {
  bool ok = false;          // exited 0 with non-empty output within the limits
  std::string output;       // stdout (up to the byte limit)
  std::string error;        // why not ok: "timed out after 2.0 s", "exited with status 3: ..."
  int exit_status = -1;     // the exit status, or -1 when killed or not started
  bool timed_out = false;
  double seconds = 0;
};

ExternalResult run_external_mutator(const std::vector<std::string>& argv, const std::string& input,
                                    std::chrono::milliseconds timeout, std::size_t max_output_bytes);

}  // namespace evodispatch::search
