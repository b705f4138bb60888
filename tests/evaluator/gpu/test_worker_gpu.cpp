// cuda:N through a worker process: make_evaluator's default on a GPU machine.
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>

#include <evodispatch/evaluator/worker.hpp>

#include "gpu_support.hpp"

namespace evodispatch::gputest {
namespace {

// The evodispatch binary beside this test's build folder (build/tests/.. -> build/), unless
// EVODISPATCH_WORKER_BINARY names one: the build tree may have moved to the GPU machine.
std::string worker_binary() {
  if (const char* b = std::getenv("EVODISPATCH_WORKER_BINARY"); b && *b) return b;
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() / "evodispatch").string();
}

TEST(GpuWorker, MeasuresInAChildProcessLikeInProcess) {
  EVO_REQUIRE_GPU();
  RemoteEvaluator remote("cuda:0", {worker_binary(), "worker", "--device", "cuda:0"});
  EXPECT_EQ(remote.fingerprint(), gpu()->fingerprint());
  EXPECT_EQ(remote.kernel_build(), gpu()->kernel_build());
  EXPECT_EQ(remote.device(), gpu()->device());
  const Measurement m = remote.measure(S().lk(1000), Decision{3, std::nullopt, 0}, TimingOptions{});
  EXPECT_TRUE(m.ok) << m.error;
  EXPECT_TRUE(m.rel_error.has_value());
  EXPECT_GT(m.samples, 0);
  const Comparison c = remote.compare(S().lk(1000), Decision{3, std::nullopt, 0}, Decision{1, std::nullopt, 0},
                                      TimingOptions{}, 10);
  EXPECT_TRUE(c.ok) << c.error;
  EXPECT_EQ(remote.restarts(), 0);
}

}  // namespace
}  // namespace evodispatch::gputest
