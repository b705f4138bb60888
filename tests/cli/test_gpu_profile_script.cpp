// scripts/gpu-profile.sh --summarize: the table it makes from Nsight Compute's CSV rows
// (the profiling itself needs a GPU and ncu; reading the rows does not).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "../support/run_command.hpp"

namespace {

namespace fs = std::filesystem;

using evodispatch::test::CommandResult;
using evodispatch::test::run_command;

// One ncu row of the decode kernel of B=9, 11 splits as Nsight Compute 2025 writes it.
std::string row(const std::string& id, const std::string& kernel, const std::string& metric, const std::string& unit,
                const std::string& value) {
  return "\"" + id + "\",\"526\",\"evodispatch\",\"127.0.0.1\",\"void " + kernel +
         "(DecodeParams)\",\"1\",\"13\",\"(128, 1, 1)\",\"(264, 1, 1)\",\"0\",\"9.0\",\"Command line profiler "
         "metrics\",\"" + metric + "\",\"" + unit + "\",\"" + value + "\"\n";
}

class GpuProfileScript : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not installed";
    dir_ = evodispatch::test::scratch_path("ncu-rows");
    fs::create_directories(dir_);
  }
  std::string summarize() {
    const CommandResult r = run_command("bash '" + std::string(EVO_SOURCE_DIR) + "/scripts/gpu-profile.sh' --summarize '" +
                                        dir_.string() + "'");
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    return r.out + r.err;
  }
  fs::path dir_;
};

TEST_F(GpuProfileScript, SummarizesEachKernelOfACall) {
  const std::string decode = "decode_kernel<128, 0, 0, 1, 16, 64, 1, 4, 3, 1>";
  const std::string combine = "combine_kernel<128, 0>";
  std::ofstream f(dir_ / "9x8192_h64-8_s11.csv");
  // What ncu's CSV file holds: its notes and the profiled program's output around the rows.
  f << "==PROF== Connected to process 526 (/x/evodispatch)\n"
    << "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block "
       "Size\",\"Grid Size\",\"Device\",\"CC\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
    << row("0", decode, "dram__bytes_read.sum", "byte", "302,578,176")
    << row("0", decode, "gpu__time_duration.sum", "ns", "109,952")
    << "B=9 Lq=1 Lk=8192 Hq=64 Hkv=8 D=128 bf16          11p     180.74\n"
    << row("0", decode, "launch__grid_size", "", "264")
    << row("0", decode, "launch__registers_per_thread", "register/thread", "175")
    << row("0", decode, "sm__cycles_active.min", "cycle", "144,184")
    << row("0", decode, "sm__cycles_active.avg", "cycle", "182,065.36")
    << row("0", decode, "sm__cycles_elapsed.max", "cycle", "199,705")
    << row("1", combine, "dram__bytes_read.sum", "Mbyte", "3.29")
    << row("1", combine, "gpu__time_duration.sum", "us", "10.37")
    << row("1", combine, "launch__registers_per_thread", "register/thread", "n/a")
    << "==PROF== Disconnected from process 526\n";
  f.close();
  const std::string out = summarize();
  // Units converted (bytes, ns), thousands separators dropped, TB/s = MB / us, SM activity
  // as a share of the elapsed cycles, the template arguments kept as the variant's name.
  EXPECT_NE(out.find("| 9x8192_h64-8_s11 | decode_kernel<128,0,0,1,16,64,1,4,3,1> |"), std::string::npos) << out;
  EXPECT_NE(out.find("| 264 | 302.578 | 2.752 | 175 | 91.2 | 72.2 | 109.952 |"), std::string::npos) << out;
  // A metric ncu could not collect is shown as it came, and spoils nothing else.
  EXPECT_NE(out.find("| 9x8192_h64-8_s11 | combine_kernel<128,0> |  | 3.29 | 0.317 | n/a |"), std::string::npos) << out;
}

TEST_F(GpuProfileScript, RefusesACaseThatIsNotFiveNumbersBeforeTouchingTheGpu) {
  for (const std::string bad : {"9:8192:64:8", "9:8192:x:8:1", "9:8192:64:8:1,", "0:8192:64:8:1"}) {
    const CommandResult r = run_command("bash '" + std::string(EVO_SOURCE_DIR) + "/scripts/gpu-profile.sh' '" + bad + "'");
    EXPECT_EQ(r.code, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("'" + bad + "' is not B:LK:HQ:HKV:SPLITS"), std::string::npos) << r.err;
  }
}

TEST_F(GpuProfileScript, RefusesAFolderThatIsNotThere) {
  const CommandResult r = run_command("bash '" + std::string(EVO_SOURCE_DIR) + "/scripts/gpu-profile.sh' --summarize '" +
                                      (dir_ / "missing").string() + "'");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--summarize needs a folder"), std::string::npos) << r.err;
}

}  // namespace
