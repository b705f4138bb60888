// The FlashAttention-3 backend: the command that starts its Python worker.
#include <evodispatch/evaluator/worker.hpp>

#include <cstdlib>
#include <span>

#include <evodispatch/heuristics/embedded.hpp>

namespace evodispatch {

namespace embedded {
std::span<const EmbeddedFile> fa3_worker_files();  // evaluator/fa3/fa3_worker.py (CMake)
}

std::vector<std::string> fa3_worker_command(const std::string& spec, int index, const DeviceInfo& device,
                                            const std::string& fingerprint) {
  const EmbeddedFile* src = find_embedded(embedded::fa3_worker_files(), "fa3_worker.py");
  if (!src) throw InputError("this binary was built without the FA3 worker (evaluator/fa3/fa3_worker.py)");
  const char* python = std::getenv("EVODISPATCH_PYTHON");
  // env finds python3 on PATH; execv, which starts workers, does not search it.
  return {"/usr/bin/env",  (python && *python) ? python : "python3",
          "-c",            std::string(src->text),
          "--spec",        spec,
          "--index",       std::to_string(index),
          "--device-json", to_json(device).dump(),
          "--fingerprint", fingerprint};
}

}  // namespace evodispatch
