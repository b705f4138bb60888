// Durability with the real binary: a search SIGKILLed at random instants and resumed
// each time ends with the same winner as one that ran straight through, and with no
// program, evaluation or measurement lost or stored twice.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include <evodispatch/results/results.hpp>

#include "search_fixtures.hpp"

using namespace evodispatch;
using namespace evodispatch::search::testing;

namespace {

// Starts the binary with its output in `log`; returns the child's pid.
pid_t launch(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  static const std::string binary = EVO_BINARY;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// The exit status, or -SIGNAL.
int wait_for(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? -WTERMSIG(status) : -1000;
}

// Runs the binary to its end; the exit status.
int run_to_end(const std::vector<std::string>& args, const std::string& log) { return wait_for(launch(args, log)); }

struct Stored {
  std::string winner_hash, winner_source;
  double train = 0, validation = 0;
  std::size_t programs = 0, evaluations = 0, comparisons = 0;
  std::int64_t measurements = 0;
};

Stored read_back(const std::string& path) {
  auto db = results::Database::open(path);
  results::RunFilter f;
  f.kind = "search";
  const auto runs = results::Runs(db).list(f);
  EXPECT_EQ(runs.size(), 1u) << "one run, however often it was resumed";
  Stored s;
  if (runs.empty()) return s;
  const auto& run = runs.front();
  EXPECT_EQ(run.status, results::RunStatus::finished);
  const auto& w = run.summary["winner"];
  if (!w.is_null()) {
    s.winner_hash = w["hash"];
    s.winner_source = w["source"];
    s.train = w["train"]["geomean"];
    s.validation = w["validation"]["geomean"];
  }
  s.programs = results::Programs(db).list_by_run(run.id).size();
  s.evaluations = results::Evaluations(db).list_by_run(run.id).size();
  s.comparisons = results::Comparisons(db).list_by_run(run.id).size();
  s.measurements = results::Measurements(db).count();
  return s;
}

}  // namespace

TEST(KillAndResume, TheWinnerDoesNotDependOnWhereTheSearchWasKilled) {
  ScratchDir dir;
  const std::string workload = dir.write("mini.json", mini_workload_json());
  const std::string config = dir.write("mini-search.json", mini_config_json(workload, 600).dump(2));
  const std::string log = dir.file("log.txt");
  const std::vector<std::string> common = {"--device", "sim:h100-sxm", "--json"};

  // The reference: straight through, on two workers for good measure.
  const std::string ref_db = dir.file("reference.db");
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(run_to_end({"search", "--config", config, "--seed", "11", "--db", ref_db, "--device",
                        "sim:h100-sxm,sim:h100-sxm", "--json"},
                       log),
            0);
  const int run_ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count());
  const Stored reference = read_back(ref_db);
  ASSERT_FALSE(reference.winner_hash.empty());

  // The same search killed at random instants, resumed each time until it finishes.
  const std::string db = dir.file("killed.db");
  std::mt19937 rng(std::random_device{}());
  // Kills spread over the run: setup, the steps, validation and confirmation.
  std::uniform_int_distribution<int> delay_ms(run_ms / 50 + 10, run_ms / 3 + 20);
  std::vector<int> delays;
  int kills = 0, launches = 0, status = -1;
  bool started = false;
  while (launches < 40) {
    std::vector<std::string> args = {"search", "--db", db};
    if (started) {
      args.push_back("--resume");
    } else {
      args.insert(args.end(), {"--config", config, "--seed", "11"});
    }
    args.insert(args.end(), common.begin(), common.end());
    const pid_t pid = launch(args, log);
    ++launches;
    if (kills < 5) {
      const int d = delay_ms(rng);
      delays.push_back(d);
      std::this_thread::sleep_for(std::chrono::milliseconds(d));
      ::kill(pid, SIGKILL);
      status = wait_for(pid);
      if (status == -SIGKILL) ++kills;
    } else {
      status = wait_for(pid);
    }
    // Until a run row exists there is nothing to resume: start again from scratch.
    auto probe = results::Database::open(db);
    results::RunFilter f;
    f.kind = "search";
    const auto runs = results::Runs(probe).list(f);
    started = !runs.empty();
    if (status == 0) break;  // finished (possibly before a kill landed)
    // Killed after the final commit, before the process exited: the run is finished and
    // there is nothing left to resume (a --resume would rightly refuse it).
    if (status == -SIGKILL && started && runs.front().status == results::RunStatus::finished) {
      status = 0;
      break;
    }
    ASSERT_EQ(status, -SIGKILL) << "exit status " << status << "; see " << log;
  }
  std::string trace = "kill delays (ms):";
  for (int d : delays) trace += " " + std::to_string(d);
  SCOPED_TRACE(trace);
  ASSERT_EQ(status, 0) << "the last resume did not finish; see " << log;
  EXPECT_GE(kills, 1);

  const Stored killed = read_back(db);
  EXPECT_EQ(killed.winner_hash, reference.winner_hash);
  EXPECT_EQ(killed.winner_source, reference.winner_source);
  EXPECT_EQ(killed.train, reference.train);
  EXPECT_EQ(killed.validation, reference.validation);
  EXPECT_EQ(killed.programs, reference.programs);
  EXPECT_EQ(killed.evaluations, reference.evaluations);
  EXPECT_EQ(killed.comparisons, reference.comparisons);
  EXPECT_EQ(killed.measurements, reference.measurements);
}
