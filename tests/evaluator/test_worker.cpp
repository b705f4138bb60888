// The worker protocol (evaluator/worker.hpp) without a GPU: the serve loop on the
// simulator in this process, and a real child process (`evodispatch worker --device
// sim:h100-sxm`) that dies with a request in flight or between requests.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/evaluator/simulator.hpp>
#include <evodispatch/evaluator/worker.hpp>

using namespace evodispatch;
using nlohmann::json;

namespace {

Shape table1() {
  Shape s;
  s.seqlen_k = 512;
  s.h_q = 64;
  s.h_kv = 1;
  return s;
}

std::vector<json> serve_lines(Evaluator& ev, const std::string& input, int* rc = nullptr) {
  std::istringstream in(input);
  std::ostringstream out;
  const int code = serve_worker(ev, in, out);
  if (rc) *rc = code;
  std::vector<json> replies;
  std::istringstream lines(out.str());
  for (std::string l; std::getline(lines, l);) replies.push_back(json::parse(l));
  return replies;
}

std::string measure_line(int id, const Shape& s, const Decision& d) {
  return json{{"id", id}, {"op", "measure"}, {"shape", to_json(s)}, {"decision", to_json(d)}}.dump() + "\n";
}

// A simulator that loses its "context" on the first measurement, as a GPU runner does
// after an illegal address.
class BreakingEvaluator : public SimulatorEvaluator {
 public:
  BreakingEvaluator() : SimulatorEvaluator(load_sim_profile("h100-sxm")) {}
  Measurement measure(const Shape& s, const Decision& d, const TimingOptions& t) override {
    Measurement m;
    m.key = key(s, d, t);
    m.error = "cudaErrorIllegalAddress: an illegal memory access was encountered";
    broken_ = true;
    return m;
  }
  std::optional<std::string> unusable() const override {
    return broken_ ? std::optional<std::string>("illegal address") : std::nullopt;
  }

 private:
  bool broken_ = false;
};

// A simulator whose rows are timed by another measuring protocol, as a worker of another
// kernel library, or this one after a change to how it times, would announce.
class RetimedEvaluator : public SimulatorEvaluator {
 public:
  RetimedEvaluator() : SimulatorEvaluator(load_sim_profile("h100-sxm")) {}
  int measuring_protocol() const override { return kMeasuringProtocol + 1; }
};

std::vector<std::string> worker_command() { return {EVO_BINARY, "worker", "--device", "sim:h100-sxm"}; }

// Waits until `pid` has ended (a zombie still counts as ended).
void wait_for_death(pid_t pid) {
  for (int i = 0; i < 500; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string s;
    std::getline(stat, s);
    const auto close = s.rfind(')');
    if (s.empty() || (close != std::string::npos && close + 2 < s.size() && s[close + 2] == 'Z')) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  FAIL() << "worker " << pid << " did not die";
}

struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* v) : name(n) { ::setenv(n, v, 1); }
  ~ScopedEnv() { ::unsetenv(name.c_str()); }
};

}  // namespace

TEST(WorkerProtocol, ServesInfoMeasureAndCompareInOrder) {
  SimulatorEvaluator sim(load_sim_profile("h100-sxm"));
  const Shape s = table1();
  const std::string input =
      R"({"id": 1, "op": "info"})"
      "\n" +
      measure_line(2, s, Decision{3, std::nullopt, 0}) +
      json{{"id", "c"},
           {"op", "compare"},
           {"shape", to_json(s)},
           {"decisions", json::array({to_json(Decision{3, true, 0}), to_json(Decision{1, true, 0})})},
           {"timing", {{"l2", "hot"}}},
           {"pairs", 5}}
          .dump() +
      "\n";
  int rc = -1;
  const auto replies = serve_lines(sim, input, &rc);
  EXPECT_EQ(rc, 0);
  ASSERT_EQ(replies.size(), 3u);

  EXPECT_EQ(replies[0]["id"], 1);
  EXPECT_TRUE(replies[0]["ok"].get<bool>());
  EXPECT_EQ(replies[0]["info"]["fingerprint"], sim.fingerprint());
  EXPECT_EQ(replies[0]["info"]["kernel_build"], sim.kernel_build());
  EXPECT_EQ(device_from_json(replies[0]["info"]["device"]), sim.device());

  EXPECT_EQ(replies[1]["id"], 2);
  const Measurement m = measurement_from_json(replies[1]["measurement"]);
  const Measurement direct = sim.measure(s, Decision{3, std::nullopt, 0}, TimingOptions{});
  EXPECT_TRUE(m.ok);
  EXPECT_EQ(m.key.decision, direct.key.decision);
  EXPECT_DOUBLE_EQ(m.median_us, direct.median_us);

  EXPECT_EQ(replies[2]["id"], "c");
  const Comparison c = comparison_from_json(replies[2]["comparison"]);
  EXPECT_TRUE(c.ok) << c.error;
  EXPECT_EQ(c.a.key.l2, L2Mode::hot);
  EXPECT_NEAR(c.ratio, c.a.median_us / c.b.median_us, 1e-12);
  EXPECT_EQ(c.ratio_lo, c.ratio);
}

TEST(WorkerProtocol, BadRequestsAreErrorRowsAndTheLoopGoesOn) {
  SimulatorEvaluator sim(load_sim_profile("h100-sxm"));
  const std::string input =
      "not json\n"
      "\n"  // blank lines are skipped
      R"({"id": 5, "op": "explode"})"
      "\n"
      R"({"id": 6, "op": "measure", "shape": {"seqlen_k": 512, "h_q": 64}})"
      "\n"
      R"({"id": 7, "op": "measure", "shape": {"seqlen_k": 512, "h_q": 64}, "decision": {"num_splits": 2}, "extra": 1})"
      "\n"
      R"({"id": 8, "op": "measure", "shape": {"seqlen_k": 512, "h_q": 64}, "decision": {"num_splits": 2}, "seqlens": [512]})"
      "\n"
      R"({"id": 9, "op": "measure", "shape": {"seqlen_k": 512, "h_q": 64}, "decision": {"num_splits": 999}})"
      "\n"
      R"({"id": 10, "op": "info"})"
      "\n";
  int rc = -1;
  const auto r = serve_lines(sim, input, &rc);
  EXPECT_EQ(rc, 0);
  ASSERT_EQ(r.size(), 7u);
  EXPECT_TRUE(r[0]["id"].is_null());
  EXPECT_FALSE(r[0]["ok"].get<bool>());
  EXPECT_NE(r[0]["error"].get<std::string>().find("not JSON"), std::string::npos);
  EXPECT_NE(r[1]["error"].get<std::string>().find("unknown operation \"explode\""), std::string::npos);
  EXPECT_NE(r[2]["error"].get<std::string>().find("$.decision: missing"), std::string::npos) << r[2];
  EXPECT_NE(r[3]["error"].get<std::string>().find("extra"), std::string::npos) << r[3];
  EXPECT_NE(r[4]["error"].get<std::string>().find("need a cuda: device"), std::string::npos) << r[4];
  // A decision out of range does not even parse (rows only carry valid decisions).
  EXPECT_FALSE(r[5]["ok"].get<bool>());
  EXPECT_NE(r[5]["error"].get<std::string>().find("num_splits"), std::string::npos) << r[5];
  EXPECT_EQ(r[6]["id"], 10);
  EXPECT_TRUE(r[6]["ok"].get<bool>());
  for (const auto& reply : r) EXPECT_FALSE(reply.contains("unusable"));
}

TEST(WorkerProtocol, AnUnusableEvaluatorEndsTheLoopAfterItsReply) {
  BreakingEvaluator ev;
  int rc = -1;
  const auto r = serve_lines(ev, measure_line(1, table1(), Decision{}) + measure_line(2, table1(), Decision{}), &rc);
  EXPECT_EQ(rc, kWorkerExitUnusable);
  ASSERT_EQ(r.size(), 1u);  // the second request is left for the next worker
  EXPECT_EQ(r[0]["unusable"], "illegal address");
  EXPECT_FALSE(r[0]["measurement"]["ok"].get<bool>());
}

TEST(WorkerProtocol, InfoAndRowsCarryTheMeasuringProtocol) {
  SimulatorEvaluator sim(load_sim_profile("h100-sxm"));
  EXPECT_EQ(sim.measuring_protocol(), kMeasuringProtocol);
  RetimedEvaluator retimed;
  for (Evaluator* ev : {static_cast<Evaluator*>(&sim), static_cast<Evaluator*>(&retimed)}) {
    const auto r = serve_lines(*ev, R"({"id": 1, "op": "info"})"
                                    "\n" +
                                        measure_line(2, table1(), Decision{2, std::nullopt, 0}));
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0]["info"]["measuring_protocol"], ev->measuring_protocol());
    EXPECT_EQ(r[1]["measurement"]["key"]["measuring_protocol"], ev->measuring_protocol());
    EXPECT_EQ(measurement_from_json(r[1]["measurement"]).key.measuring_protocol, ev->measuring_protocol());
    EXPECT_EQ(ev->key(table1(), Decision{}, TimingOptions{}).measuring_protocol, ev->measuring_protocol());
  }
  EXPECT_NE(retimed.measuring_protocol(), sim.measuring_protocol());
}

TEST(WorkerProtocol, ARowMustSayHowItWasMeasured) {
  SimulatorEvaluator sim(load_sim_profile("h100-sxm"));
  const json row = to_json(sim.measure(table1(), Decision{}, TimingOptions{}));
  auto error_of = [](const json& bad) -> std::string {
    try {
      measurement_from_json(bad);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  };
  json bad = row;
  bad["key"].erase("measuring_protocol");
  EXPECT_EQ(error_of(bad), "$.key.measuring_protocol: missing (an integer >= 1 is required)");
  bad["key"]["measuring_protocol"] = 0;
  EXPECT_EQ(error_of(bad), "$.key.measuring_protocol: must be an integer >= 1");
  bad["key"]["measuring_protocol"] = "1";
  EXPECT_NE(error_of(bad).find("$.key.measuring_protocol"), std::string::npos);
}

TEST(WorkerProtocol, TimingOptionsRoundTrip) {
  TimingOptions t;
  t.l2 = L2Mode::hot;
  t.min_replay_us = 500;
  t.replays = 7;
  t.warmup = 2;
  t.check = false;
  const TimingOptions u = timing_from_json(to_json(t));
  EXPECT_EQ(u.l2, t.l2);
  EXPECT_EQ(u.min_replay_us, t.min_replay_us);
  EXPECT_EQ(u.replays, t.replays);
  EXPECT_EQ(u.warmup, t.warmup);
  EXPECT_EQ(u.check, t.check);
  EXPECT_EQ(timing_from_json(json::object()).replays, TimingOptions{}.replays);
  EXPECT_THROW(timing_from_json(json{{"l2", "warm"}}), InputError);
  EXPECT_THROW(timing_from_json(json{{"replays", -1}}), InputError);
  EXPECT_THROW(timing_from_json(json{{"bogus", 1}}), InputError);
}

TEST(RemoteEvaluator, ChildWorkerAnswersLikeTheSimulatorInProcess) {
  RemoteEvaluator remote("sim:h100-sxm", worker_command());
  SimulatorEvaluator sim(load_sim_profile("h100-sxm"));
  EXPECT_EQ(remote.spec(), "sim:h100-sxm");
  EXPECT_EQ(remote.fingerprint(), sim.fingerprint());
  EXPECT_EQ(remote.kernel_build(), sim.kernel_build());
  EXPECT_EQ(remote.device(), sim.device());
  EXPECT_EQ(remote.measuring_protocol(), sim.measuring_protocol());
  EXPECT_GT(remote.worker_pid(), 0);
  const Shape s = table1();
  for (int splits : {1, 3, 64}) {
    const Measurement a = remote.measure(s, Decision{splits, std::nullopt, 0}, TimingOptions{});
    const Measurement b = sim.measure(s, Decision{splits, std::nullopt, 0}, TimingOptions{});
    EXPECT_TRUE(a.ok) << a.error;
    EXPECT_DOUBLE_EQ(a.median_us, b.median_us);
    EXPECT_EQ(a.key.device, b.key.device);
    EXPECT_EQ(a.key.measuring_protocol, b.key.measuring_protocol);
    EXPECT_EQ(a.plan, b.plan);
  }
  // One request over 8 KV heads and 8K keys: 8 splits fill the SMs that 1 split leaves idle.
  const Shape long_ctx{1, 1, 8192, 64, 8, 128, Dtype::bf16, 0, true};
  const Comparison c = remote.compare(long_ctx, Decision{8, true, 0}, Decision{1, true, 0}, TimingOptions{}, 4);
  EXPECT_TRUE(c.ok) << c.error;
  EXPECT_LT(c.ratio, 1.0);
  // A decision out of range is refused here, as the simulator refuses it, as a row.
  const Measurement bad = remote.measure(s, Decision{0, std::nullopt, 0}, TimingOptions{});
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.error, sim.measure(s, Decision{0, std::nullopt, 0}, TimingOptions{}).error);
  EXPECT_EQ(remote.restarts(), 0);
}

TEST(RemoteEvaluator, AWorkerThatDiesMidRequestFailsThatRowAndIsReplaced) {
  // The worker kills itself on its 3rd request (1: info, 2: a measurement, 3: the next).
  ScopedEnv crash("EVODISPATCH_WORKER_CRASH_ON", "3");
  RemoteEvaluator remote("sim:h100-sxm", worker_command());
  const Shape s = table1();
  const pid_t first = remote.worker_pid();
  EXPECT_TRUE(remote.measure(s, Decision{1, std::nullopt, 0}, TimingOptions{}).ok);
  const Measurement lost = remote.measure(s, Decision{2, std::nullopt, 0}, TimingOptions{});
  EXPECT_FALSE(lost.ok);
  EXPECT_NE(lost.error.find("in flight"), std::string::npos) << lost.error;
  EXPECT_NE(lost.error.find("signal 9"), std::string::npos) << lost.error;
  EXPECT_EQ(lost.key.decision.num_splits, 2);  // the row says which measurement failed
  EXPECT_EQ(lost.key.device, remote.fingerprint());
  // The next request goes to a new worker (whose own 3rd request would crash again).
  const Measurement next = remote.measure(s, Decision{2, std::nullopt, 0}, TimingOptions{});
  EXPECT_TRUE(next.ok) << next.error;
  EXPECT_EQ(remote.restarts(), 1);
  EXPECT_NE(remote.worker_pid(), first);
}

TEST(RemoteEvaluator, AWorkerKilledBetweenRequestsIsReplacedBeforeTheNext) {
  RemoteEvaluator remote("sim:h100-sxm", worker_command());
  const pid_t first = remote.worker_pid();
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  wait_for_death(first);
  const Measurement m = remote.measure(table1(), Decision{4, std::nullopt, 0}, TimingOptions{});
  EXPECT_TRUE(m.ok) << m.error;
  EXPECT_EQ(remote.restarts(), 1);
  EXPECT_NE(remote.worker_pid(), first);
}

TEST(RemoteEvaluator, AWorkerThatCannotStartIsAnInputError) {
  EXPECT_THROW(RemoteEvaluator("sim:h100-sxm", {"/nonexistent/evodispatch", "worker"}), InputError);
  // A worker that refuses its device says so.
  try {
    RemoteEvaluator("sim:nope", {EVO_BINARY, "worker", "--device", "sim:nope"});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("did not start"), std::string::npos) << e.what();
  }
}

// A worker stands for the rows it returns: the parent takes its measuring protocol from
// what the worker announces, and one that announces none is not used.
TEST(RemoteEvaluator, TheWorkersMeasuringProtocolIsTheOneItAnnounces) {
  SimulatorEvaluator sim(load_sim_profile("h100-sxm"));
  json info = {{"spec", "sim:h100-sxm"},
               {"device", to_json(sim.device())},
               {"fingerprint", sim.fingerprint()},
               {"kernel_build", sim.kernel_build()},
               {"measuring_protocol", 5}};
  auto answering = [](const json& info) -> std::vector<std::string> {
    const json reply = {{"id", 1}, {"ok", true}, {"info", info}};
    return {"/bin/sh", "-c", "read request; echo '" + reply.dump() + "'; cat >/dev/null"};
  };
  RemoteEvaluator remote("sim:h100-sxm", answering(info));
  EXPECT_EQ(remote.measuring_protocol(), 5);
  EXPECT_EQ(remote.key(table1(), Decision{}, TimingOptions{}).measuring_protocol, 5);

  info.erase("measuring_protocol");
  try {
    RemoteEvaluator silent("sim:h100-sxm", answering(info));
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("$.info.measuring_protocol: missing"), std::string::npos) << e.what();
  }
}

TEST(RemoteEvaluator, RawRequestsGetTheirIdsAndErrors) {
  RemoteEvaluator remote("sim:h100-sxm", worker_command());
  const json r = remote.request({{"op", "nope"}});
  EXPECT_FALSE(r["ok"].get<bool>());
  EXPECT_TRUE(r["id"].is_number_integer());
  EXPECT_FALSE(r.contains("worker_died"));
  EXPECT_EQ(remote.restarts(), 0);
}
