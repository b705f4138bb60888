#pragma once
// Runs a shell command for the end-to-end tests, stdout and stderr captured apart.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "scratch.hpp"

namespace evodispatch::test {

struct CommandResult {
  int code = -1;    // exit status; -1 when killed by a signal
  std::string out;  // stdout
  std::string err;  // stderr
};

inline CommandResult run_command(const std::string& cmd) {
  const std::filesystem::path err_file = scratch_path("stderr");
  CommandResult r;
  FILE* p = ::popen((cmd + " 2>" + err_file.string()).c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_file);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  return r;
}

#ifdef EVO_BINARY
// The evodispatch binary under test with `args` (shell-quoted by the caller).
inline CommandResult run_evodispatch(const std::string& args) { return run_command(std::string(EVO_BINARY) + " " + args); }
#endif

}  // namespace evodispatch::test
