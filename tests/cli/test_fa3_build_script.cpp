// scripts/fa3-build.sh --dry-run over a miniature flash-attention checkout: the tree it
// prepares for setup.py, above all --namespace, which lets a patched build load beside
// stock FA3 in one process (fa3_worker.py --regress). Building FA3 needs the GPU machine.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "../support/run_command.hpp"

namespace {

namespace fs = std::filesystem;

using evodispatch::test::CommandResult;
using evodispatch::test::run_command;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), {}};
}

class Fa3BuildScript : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not installed";
    dir_ = evodispatch::test::scratch_path("fa3-build");
    const fs::path hopper = dir_ / "src" / "hopper";
    fs::create_directories(hopper / "flash_attn_3");
    fs::create_directories(dir_ / "src" / "csrc" / "cutlass" / "include" / "cute");
    write("src/FA3_COMMIT", "0251105a2fb19d2957484b7f023cd8c115286ced\n");
    write("src/hopper/setup.py",
          "PACKAGE_NAME = \"flash_attn_3\"\n"
          "if True:\n"
          "    subprocess.run([\"git\", \"submodule\", \"update\", \"--init\", \"../csrc/cutlass\"])\n");
    write("src/hopper/flash_api_stable.cpp",
          "// STABLE_TORCH_LIBRARY static initializers\n"
          "STABLE_TORCH_LIBRARY(flash_attn_3, m) {}\n"
          "STABLE_TORCH_LIBRARY_IMPL(flash_attn_3, CUDA, m) {}\n");
    write("src/hopper/flash_attn_interface.py",
          "from aiter.ops import flash_attn_3 as flash_attn_3_gpu\n"
          "import flash_attn_3._C\n"
          "flash_attn_3_gpu = torch.ops.flash_attn_3\n"
          "from flash_attn_config import CONFIG\n"
          "@torch.library.custom_op(\"flash_attn_3::_flash_attn_forward\")\n");
    write("src/hopper/flash_attn_3/__init__.py", "version = \"flash_attn_3\"\n");
  }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  CommandResult build(const std::string& out, const std::string& options) {
    return run_command("FA3_BUILD_ROOT='" + (dir_ / "root").string() + "' bash '" EVO_SOURCE_DIR "/scripts/fa3-build.sh' '" +
                       (dir_ / "src").string() + "' '" + (dir_ / out).string() + "' " + options);
  }
  CommandResult dry_run(const std::string& out, const std::string& options) { return build(out, "--dry-run " + options); }
  static std::string build_id(const CommandResult& r) {
    const auto at = r.err.find("BUILD_ID   ");
    return at == std::string::npos ? "" : r.err.substr(at + 11, r.err.find('\n', at) - at - 11);
  }
  fs::path dir_;
};

TEST_F(Fa3BuildScript, ANamespaceRenamesTheTorchOpsAndThePackageSoTheBuildLoadsBesideStock) {
  const CommandResult stock = dry_run("stock", "");
  ASSERT_EQ(stock.code, 0) << stock.err;
  EXPECT_EQ(read(dir_ / "stock" / "NAMESPACE"), "flash_attn_3\n");
  EXPECT_EQ(read(dir_ / "stock/hopper/flash_api_stable.cpp"), read(dir_ / "src/hopper/flash_api_stable.cpp"));

  const CommandResult evo = dry_run("evo", "--namespace flash_attn_3_evo");
  ASSERT_EQ(evo.code, 0) << evo.err;
  EXPECT_EQ(read(dir_ / "evo" / "NAMESPACE"), "flash_attn_3_evo\n");
  const std::string api = read(dir_ / "evo/hopper/flash_api_stable.cpp");
  EXPECT_NE(api.find("STABLE_TORCH_LIBRARY(flash_attn_3_evo, m)"), std::string::npos) << api;
  EXPECT_NE(api.find("STABLE_TORCH_LIBRARY_IMPL(flash_attn_3_evo, CUDA, m)"), std::string::npos) << api;
  EXPECT_EQ(read(dir_ / "evo/hopper/flash_attn_interface.py"),
            "from aiter.ops import flash_attn_3 as flash_attn_3_gpu\n"  // ROCm's module keeps its name
            "import flash_attn_3_evo._C\n"
            "flash_attn_3_gpu = torch.ops.flash_attn_3_evo\n"
            "from flash_attn_3_evo_config import CONFIG\n"
            "@torch.library.custom_op(\"flash_attn_3_evo::_flash_attn_forward\")\n");
  EXPECT_NE(read(dir_ / "evo/hopper/setup.py").find("PACKAGE_NAME = \"flash_attn_3_evo\""), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_ / "evo/hopper/flash_attn_3_evo/__init__.py"));
  EXPECT_FALSE(fs::exists(dir_ / "evo/hopper/flash_attn_3")) << "it would shadow stock FA3's package";
  EXPECT_FALSE(build_id(stock).empty()) << stock.err;
  EXPECT_NE(build_id(evo), build_id(stock));
}

// A GPU session builds stock and patched FA3 into fixed folders; a folder built from another
// patch or other head dims must be rebuilt, not measured as if it were this build.
TEST_F(Fa3BuildScript, AFinishedBuildIsKeptOnlyForTheSameInputs) {
  const std::string id = build_id(dry_run("probe", "--hdims '64 128'"));
  ASSERT_FALSE(id.empty());
  fs::create_directories(dir_ / "built/hopper/flash_attn_3");
  write("built/hopper/flash_attn_3/_C.abi3.so", "");
  write("built/.fa3-build-tree", (dir_ / "root").string() + "\n");
  write("built/BUILD_ID", id + "\n");

  const CommandResult same = build("built", "--hdims '128 64'");
  EXPECT_EQ(same.code, 0) << same.err;
  EXPECT_NE(same.err.find("already holds build " + id + ": kept"), std::string::npos) << same.err;
  EXPECT_NE(same.out.find("fa3-build: BUILD_ID " + id), std::string::npos) << same.out;

  for (const std::string other : {"--hdims 128", "--hdims '64 128' --namespace flash_attn_3_evo", "--hdims '64 128' --fp8"}) {
    const CommandResult r = build("built", other);
    EXPECT_EQ(r.err.find(": kept"), std::string::npos) << other << "\n" << r.err;
    EXPECT_EQ(r.out.find(id), std::string::npos) << other << "\n" << r.out;
  }
}

// The FA3 worker runs an fp8 cache on FA3's e4m3 kernels: --fp8 keeps them in the build.
TEST_F(Fa3BuildScript, Fp8KeepsTheE4m3Kernels) {
  const CommandResult stock = dry_run("stock", "");
  ASSERT_EQ(stock.code, 0) << stock.err;
  EXPECT_NE(stock.err.find("FLASH_ATTENTION_DISABLE_FP8=TRUE"), std::string::npos) << stock.err;
  const CommandResult fp8 = dry_run("fp8", "--fp8");
  ASSERT_EQ(fp8.code, 0) << fp8.err;
  EXPECT_EQ(fp8.err.find("FLASH_ATTENTION_DISABLE_FP8"), std::string::npos) << fp8.err;
  EXPECT_NE(fp8.err.find("FLASH_ATTENTION_DISABLE_FP16=TRUE"), std::string::npos) << fp8.err;
}

TEST_F(Fa3BuildScript, ANamespaceItCannotApplyIsAnError) {
  const CommandResult bad_name = dry_run("bad", "--namespace 'flash-attn'");
  EXPECT_NE(bad_name.code, 0);
  EXPECT_NE(bad_name.err.find("--namespace flash-attn: a lowercase Python identifier is required"), std::string::npos)
      << bad_name.err;
  write("src/hopper/flash_api_stable.cpp", "// no registration here\n");
  const CommandResult none = dry_run("none", "--namespace flash_attn_3_evo");
  EXPECT_NE(none.code, 0);
  EXPECT_NE(none.err.find("no TORCH_LIBRARY(flash_attn_3, ...) in hopper/flash_api*.cpp"), std::string::npos) << none.err;
  EXPECT_FALSE(fs::exists(dir_ / "none" / "NAMESPACE"));
}

}  // namespace
