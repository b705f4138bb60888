// The parent side of the worker protocol (worker.hpp): one child process, restarted
// after it dies; the measurement in flight when it dies is a failed row.
#include <evodispatch/evaluator/worker.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

namespace evodispatch {

namespace {

using nlohmann::json;

std::string self_exe() {
  if (const char* b = std::getenv("EVODISPATCH_WORKER_BINARY"); b && *b) return b;
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw InputError("cannot find this executable (/proc/self/exe: " + ec.message() + ") to start a worker");
  return p.string();
}

double timeout_from_env() {
  // A measurement takes seconds; a worker silent for this long is hung (a GPU hang).
  if (const char* t = std::getenv("EVODISPATCH_WORKER_TIMEOUT_S"); t && *t) {
    const double v = std::atof(t);
    if (v > 0) return v;
  }
  return 900;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    if (code == kWorkerExitUnusable) return "exited after a sticky CUDA error";
    return "exited with status " + std::to_string(code);
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "ended (status " + std::to_string(status) + ")";
}

}  // namespace

RemoteEvaluator::RemoteEvaluator(std::string spec, std::vector<std::string> command)
    : spec_(std::move(spec)), command_(std::move(command)), timeout_s_(timeout_from_env()) {
  if (command_.empty()) command_ = {self_exe(), "worker", "--device", spec_};
  start();
  const json reply = request({{"op", "info"}});
  if (!reply.value("ok", false) || !reply.contains("info")) {
    const std::string why = reply.value("error", std::string("no info"));
    reap(true);
    throw InputError(spec_ + ": the worker process did not start: " + why);
  }
  try {
    const json& info = reply["info"];
    device_ = device_from_json(info.at("device"), "$.info.device");
    fingerprint_ = info.at("fingerprint").get<std::string>();
    kernel_build_ = info.at("kernel_build").get<std::string>();
    const auto protocol = info.find("measuring_protocol");
    measuring_protocol_ =
        measuring_protocol_from_json(protocol == info.end() ? nullptr : &*protocol, "$.info.measuring_protocol");
  } catch (const std::exception& e) {
    reap(true);  // a worker whose keys cannot be known must not be left running
    throw InputError(spec_ + ": the worker's info is unusable: " + e.what());
  }
}

RemoteEvaluator::~RemoteEvaluator() {
  if (pid_ > 0) {
    // End of input tells the worker to finish; give it a moment before the signal.
    ::shutdown(fd_, SHUT_WR);
    for (int i = 0; i < 100 && worker_alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (pid_ > 0) reap(true);
  }
  if (fd_ >= 0) ::close(fd_);
}

void RemoteEvaluator::start() {
  int sv[2];
  // A socket, not pipes: writes to a dead worker fail with EPIPE (MSG_NOSIGNAL) instead
  // of raising SIGPIPE in the parent.
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw InputError(spec_ + ": socketpair: " + std::strerror(errno));
  std::vector<char*> argv;
  for (auto& a : command_) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(sv[0]);
    ::close(sv[1]);
    throw InputError(spec_ + ": fork: " + std::strerror(errno));
  }
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    ::dup2(sv[1], 0);
    ::dup2(sv[1], 1);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(sv[1]);
  if (fd_ >= 0) ::close(fd_);
  fd_ = sv[0];
  pid_ = pid;
  buffer_.clear();
  if (starts_++ > 0) ++restarts_;
}

bool RemoteEvaluator::worker_alive() {
  if (pid_ <= 0) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == 0) return true;
  last_exit_ = r == pid_ ? describe_status(status) : "vanished";
  pid_ = -1;
  return false;
}

void RemoteEvaluator::reap(bool kill_first) {
  if (pid_ <= 0) return;
  if (kill_first) ::kill(pid_, SIGKILL);
  int status = 0;
  if (::waitpid(pid_, &status, 0) == pid_) last_exit_ = describe_status(status);
  pid_ = -1;
}

bool RemoteEvaluator::send_line(const std::string& line) {
  std::size_t sent = 0;
  while (sent < line.size()) {
    const ssize_t n = ::send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

bool RemoteEvaluator::read_line(std::string* line, std::string* why) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  for (;;) {
    if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
      *line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      *why = "no answer within " + std::to_string(static_cast<int>(timeout_s_)) + " s (EVODISPATCH_WORKER_TIMEOUT_S)";
      return false;
    }
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (r < 0 && errno != EINTR) {
      *why = std::string("poll: ") + std::strerror(errno);
      return false;
    }
    if (r <= 0) continue;
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *why = "closed its output";
      return false;
    }
    buffer_.append(buf, static_cast<std::size_t>(n));
  }
}

json RemoteEvaluator::request(json req) {
  // A worker that died between requests is replaced before this one goes out, so only
  // a death with the request in flight fails it.
  if (!worker_alive()) start();
  const long id = next_id_++;
  req["id"] = id;
  std::string line;
  std::string why;
  if (send_line(req.dump(-1, ' ', false, json::error_handler_t::replace) + "\n") && read_line(&line, &why)) {
    try {
      json reply = json::parse(line);
      if (reply.is_object() && reply.value("id", json()) == json(id)) {
        // The worker exits after a sticky error; wait for it so the next request restarts it.
        if (reply.contains("unusable")) reap(false);
        return reply;
      }
      why = "answered out of turn: " + line.substr(0, 200);
    } catch (const json::parse_error&) {
      why = "wrote a line that is not JSON: " + line.substr(0, 200);
    }
  } else if (why.empty()) {
    why = "did not take the request";
  }
  // Whatever went wrong, this worker is done: a late answer must not be read as the next one's.
  reap(true);
  std::string fate = last_exit_.empty() ? "" : " (" + last_exit_ + ")";
  return {{"id", id},
          {"ok", false},
          {"worker_died", true},
          {"error", "the worker for " + spec_ + " failed with the request in flight: " + why + fate}};
}

Measurement RemoteEvaluator::measure(const Shape& shape, const Decision& d, const TimingOptions& t) {
  // A decision out of range cannot travel (its JSON is refused): a failed row, as in process.
  if (auto why = decision_error(d, device_)) {
    Measurement m;
    m.key = key(shape, d, t);
    m.error = "invalid decision (" + describe(d) + "): " + *why;
    return m;
  }
  const json reply =
      request({{"op", "measure"}, {"shape", to_json(shape)}, {"decision", to_json(d)}, {"timing", to_json(t)}});
  if (reply.value("ok", false) && reply.contains("measurement")) {
    try {
      return measurement_from_json(reply["measurement"], "$.measurement");
    } catch (const InputError& e) {
      Measurement m;
      m.key = key(shape, d, t);
      m.error = std::string("the worker's row is malformed: ") + e.what();
      return m;
    }
  }
  Measurement m;
  m.key = key(shape, d, t);
  m.error = reply.value("error", std::string("the worker gave no measurement"));
  return m;
}

Comparison RemoteEvaluator::compare(const Shape& shape, const Decision& a, const Decision& b, const TimingOptions& t,
                                    int pairs) {
  for (const Decision* d : {&a, &b})
    if (auto why = decision_error(*d, device_)) {
      Comparison c;
      c.a.key = key(shape, a, t);
      c.b.key = key(shape, b, t);
      c.error = std::string(d == &a ? "a: " : "b: ") + "invalid decision (" + describe(*d) + "): " + *why;
      return c;
    }
  const json reply = request({{"op", "compare"},
                              {"shape", to_json(shape)},
                              {"decisions", json::array({to_json(a), to_json(b)})},
                              {"timing", to_json(t)},
                              {"pairs", pairs}});
  if (reply.value("ok", false) && reply.contains("comparison")) {
    try {
      return comparison_from_json(reply["comparison"], "$.comparison");
    } catch (const InputError& e) {
      Comparison c;
      c.error = std::string("the worker's comparison is malformed: ") + e.what();
      return c;
    }
  }
  Comparison c;
  c.a.key = key(shape, a, t);
  c.b.key = key(shape, b, t);
  c.error = reply.value("error", std::string("the worker gave no comparison"));
  c.a.error = c.b.error = c.error;
  return c;
}

}  // namespace evodispatch
