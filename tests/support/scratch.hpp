#pragma once
// A directory private to this test process under the system temp dir, removed with all it
// holds when the process exits (CTest runs every test in a process of its own), so tests
// that write files leave nothing behind and never see another run's files.
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

#include <unistd.h>

namespace evodispatch::test {

inline const std::filesystem::path& scratch_dir() {
  struct Dir {
    std::filesystem::path path;
    pid_t owner = ::getpid();  // a forked child that exits normally must not remove it
    Dir() {
      std::string tmpl = (std::filesystem::temp_directory_path() / "evodispatch-test-XXXXXX").string();
      if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp " + tmpl + " failed");
      path = tmpl;
    }
    ~Dir() {
      if (::getpid() != owner) return;
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

// A path `name` in the scratch directory with nothing there yet (nor SQLite's -wal/-shm).
inline std::filesystem::path scratch_path(const std::string& name) {
  const std::filesystem::path p = scratch_dir() / name;
  std::filesystem::remove_all(p);
  for (const char* suffix : {"-wal", "-shm"}) std::filesystem::remove(p.string() + suffix);
  return p;
}

// A fresh directory inside scratch_dir(), removed with what it holds when it goes out of
// scope: one per test that needs files of its own.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = scratch_path("dir-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Writes `text` to file(name) and returns that path.
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(file(name)) << text;
    return file(name);
  }

 private:
  std::filesystem::path path_;
};

}  // namespace evodispatch::test
