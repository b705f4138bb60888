#pragma once
// Worker processes (DESIGN.md §4): one process per GPU measures; the parent survives a
// worker that crashes or loses its CUDA context, records the measurement in flight as
// failed, and starts another worker.
//
// Protocol: JSON Lines. The parent writes one request per line to the worker's stdin;
// the worker answers each, in order, with one line on its stdout (logs go to stderr).
//
//   request                                                   reply
//   {"id": 1, "op": "info"}                                   {"id": 1, "ok": true, "info": {"spec": "cuda:0",
//                                                               "device": DEVICE, "fingerprint": "...",
//                                                               "kernel_build": "...",
//                                                               "measuring_protocol": 1}}
//   {"id": 2, "op": "measure", "shape": SHAPE,                {"id": 2, "ok": true, "measurement": ROW}
//    "decision": DECISION, "timing": TIMING,
//    "seqlens": [..]}
//   {"id": 3, "op": "compare", "shape": SHAPE,                {"id": 3, "ok": true, "comparison": COMPARISON}
//    "decisions": [A, B], "timing": TIMING, "pairs": 30,
//    "seqlens": [..]}
//   anything the worker cannot serve                          {"id": N or null, "ok": false, "error": "why"}
//
// SHAPE, DECISION, DEVICE: the JSON of heuristics/contract.hpp. ROW: a measurement row
// (measurement.hpp), which may itself be failed ("ok": false inside, with its error): a
// failed row is an answer, not a protocol error. Its "key" names device, kernel_build,
// shape, decision, l2 and measuring_protocol, as the info announced them.
// "measuring_protocol" (an integer >= 1, required) is the version of the procedure that
// times and checks a measurement (kMeasuringProtocol for the built-in worker); a worker of
// another library numbers its own and bumps it when its timing changes, so rows stored
// under the old number are not reused. COMPARISON: evaluator.hpp's Comparison.
// TIMING: {"l2": "cold"|"hot", "min_replay_us", "replays", "warmup", "check"}, every
// field optional (TimingOptions' defaults). "seqlens" (optional): each request's KV
// length (cache_seqlens), for the GPU runner only. "pairs" defaults to 30.
//
// A reply may carry "unusable": "why" (a sticky CUDA error): the worker exits with
// status 3 right after writing it. At end of input the worker exits with status 0.
// Another kernel library can be measured by the same parent through a worker of its own
// that speaks this protocol (FlashAttention-3 through Python, say).
#include <sys/types.h>

#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/evaluator.hpp>

namespace evodispatch {

inline constexpr int kWorkerExitUnusable = 3;

struct WorkerOptions {
  // Test hook: abort() on receiving request number N (1-based; 0 = never), as a worker
  // taken down by a kernel would die. `evodispatch worker` reads $EVODISPATCH_WORKER_CRASH_ON.
  int crash_on_request = 0;
};

// The command of the FlashAttention-3 worker (evaluator/fa3/fa3_worker.py, compiled into
// the binary): `/usr/bin/env $EVODISPATCH_PYTHON (python3) -c SOURCE` with the GPU's index,
// DeviceInfo and fingerprint, which the parent probes so that FA3's rows key on the same
// device as the built-in kernels'. The worker finds FA3 through $EVODISPATCH_FA3_PATH or
// an installed flash_attn_interface; $EVODISPATCH_FA3_BACKEND replaces it (tests).
std::vector<std::string> fa3_worker_command(const std::string& spec, int index, const DeviceInfo&,
                                            const std::string& fingerprint);

// Serves requests from `in` until end of input (returns 0) or until the evaluator turns
// unusable (returns kWorkerExitUnusable after the reply).
int serve_worker(Evaluator&, std::istream& in, std::ostream& out, const WorkerOptions& = {});

// One request line answered (the worker loop's body); exposed for tests.
nlohmann::json serve_request(Evaluator&, const std::string& line);

// An Evaluator whose measurements are taken by a worker process. The worker is started
// in the constructor (its "info" fills spec/device/fingerprint/kernel_build) and again,
// lazily, before the next request after it died.
class RemoteEvaluator : public Evaluator {
 public:
  // `command` defaults to {BINARY, "worker", "--device", spec} with BINARY
  // $EVODISPATCH_WORKER_BINARY, else this executable (/proc/self/exe).
  // Throws InputError when the worker does not start or does not answer "info".
  explicit RemoteEvaluator(std::string spec, std::vector<std::string> command = {});
  ~RemoteEvaluator() override;
  RemoteEvaluator(const RemoteEvaluator&) = delete;
  RemoteEvaluator& operator=(const RemoteEvaluator&) = delete;

  const std::string& spec() const override { return spec_; }
  const DeviceInfo& device() const override { return device_; }
  const std::string& fingerprint() const override { return fingerprint_; }
  const std::string& kernel_build() const override { return kernel_build_; }
  int measuring_protocol() const override { return measuring_protocol_; }  // as the worker announced it

  Measurement measure(const Shape&, const Decision&, const TimingOptions&) override;
  Comparison compare(const Shape&, const Decision& a, const Decision& b, const TimingOptions&, int pairs = 30) override;

  // Sends one request (its "id" is set here) and returns the reply, or an error reply
  // {"ok": false, "error": ..., "worker_died": true} when the worker died or timed out.
  nlohmann::json request(nlohmann::json req);

  pid_t worker_pid() const { return pid_; }
  int restarts() const { return restarts_; }  // workers started after the first

 private:
  void start();
  void reap(bool kill_first);  // waits for the worker; returns its fate in last_exit_
  bool worker_alive();
  bool send_line(const std::string& line);
  bool read_line(std::string* line, std::string* why);

  std::string spec_;
  std::vector<std::string> command_;
  DeviceInfo device_;
  std::string fingerprint_, kernel_build_;
  int measuring_protocol_ = kMeasuringProtocol;
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string buffer_;  // bytes read past the last line
  std::string last_exit_;
  long next_id_ = 1;
  int restarts_ = 0;
  int starts_ = 0;
  double timeout_s_;
};

}  // namespace evodispatch
