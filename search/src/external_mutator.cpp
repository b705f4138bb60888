#include <evodispatch/search/external_mutator.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace evodispatch::search {

namespace {

constexpr std::size_t kStderrKept = 2000;  // characters of stderr quoted in an error

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

// One line of text for an error message.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

ExternalResult run_external_mutator(const std::vector<std::string>& argv, const std::string& input,
                                    std::chrono::milliseconds timeout, std::size_t max_output_bytes) {
  ExternalResult res;
  if (argv.empty()) {
    res.error = "no command";
    return res;
  }
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (::pipe(in_pipe) != 0) {
    res.error = std::string("pipe: ") + std::strerror(errno);
    return res;
  }
  if (::pipe(out_pipe) != 0 || ::pipe(err_pipe) != 0) {
    res.error = std::string("pipe: ") + std::strerror(errno);
    ::close(in_pipe[0]);
    ::close(in_pipe[1]);
    return res;
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    res.error = std::string("fork: ") + std::strerror(errno);
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    return res;
  }
  if (pid == 0) {
    // The child: its own process group, so a timeout kills whatever it started too.
    ::setpgid(0, 0);
    ::dup2(in_pipe[0], STDIN_FILENO);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    ::signal(SIGPIPE, SIG_DFL);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so the group exists before any kill below
  int to_child = in_pipe[1], from_out = out_pipe[0], from_err = err_pipe[0];
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  for (int fd : {to_child, from_out, from_err}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);

  // A child that exits without reading its input must not kill us with SIGPIPE.
  struct sigaction ignore{}, previous{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &previous);

  std::string err_text;
  std::size_t written = 0;
  if (input.empty()) close_fd(to_child);
  bool too_much = false;
  const auto deadline = start + timeout;
  while (from_out >= 0 || from_err >= 0) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      res.timed_out = true;
      break;
    }
    pollfd fds[3];
    int n = 0;
    int idx_in = -1, idx_out = -1, idx_err = -1;
    if (to_child >= 0) { idx_in = n; fds[n++] = {to_child, POLLOUT, 0}; }
    if (from_out >= 0) { idx_out = n; fds[n++] = {from_out, POLLIN, 0}; }
    if (from_err >= 0) { idx_err = n; fds[n++] = {from_err, POLLIN, 0}; }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    const int ready = ::poll(fds, static_cast<nfds_t>(n), static_cast<int>(std::max<long long>(left, 1)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    if (idx_in >= 0 && fds[idx_in].revents) {
      const ssize_t w = ::write(to_child, input.data() + written, input.size() - written);
      if (w > 0) written += static_cast<std::size_t>(w);
      if (w < 0 && errno != EAGAIN) close_fd(to_child);  // the child closed its stdin: fine
      if (written == input.size()) close_fd(to_child);
    }
    char buf[65536];
    if (idx_out >= 0 && fds[idx_out].revents) {
      const ssize_t r = ::read(from_out, buf, sizeof buf);
      if (r > 0) {
        res.output.append(buf, static_cast<std::size_t>(r));
        if (res.output.size() > max_output_bytes) {
          too_much = true;
          break;
        }
      } else if (r == 0 || errno != EAGAIN) {
        close_fd(from_out);
      }
    }
    if (idx_err >= 0 && fds[idx_err].revents) {
      const ssize_t r = ::read(from_err, buf, sizeof buf);
      if (r > 0) {
        if (err_text.size() < kStderrKept) err_text.append(buf, static_cast<std::size_t>(r));
      } else if (r == 0 || errno != EAGAIN) {
        close_fd(from_err);
      }
    }
  }
  close_fd(to_child);
  close_fd(from_out);
  close_fd(from_err);

  int status = 0;
  if (res.timed_out || too_much) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  } else {
    // Both pipes closed: the child is exiting; wait for it, but not past the deadline.
    for (;;) {
      const pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) break;
      if (w < 0 && errno != EINTR) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        res.timed_out = true;
        ::kill(-pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        break;
      }
      ::usleep(1000);
    }
  }
  ::sigaction(SIGPIPE, &previous, nullptr);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  if (err_text.size() > kStderrKept) err_text.resize(kStderrKept);
  const std::string err_note = err_text.empty() ? "" : ": " + one_line(err_text);
  if (res.timed_out) {
    res.error = "timed out after " + seconds_text(res.seconds) + " (killed)";
    return res;
  }
  if (too_much) {
    res.error = "wrote more than " + std::to_string(max_output_bytes) + " bytes (killed)";
    return res;
  }
  if (WIFEXITED(status)) {
    res.exit_status = WEXITSTATUS(status);
    if (res.exit_status != 0) {
      res.error = "exited with status " + std::to_string(res.exit_status) + err_note;
      return res;
    }
  } else if (WIFSIGNALED(status)) {
    res.error = "killed by signal " + std::to_string(WTERMSIG(status)) + err_note;
    return res;
  }
  if (res.output.find_first_not_of(" \t\r\n") == std::string::npos) {
    res.error = "wrote nothing on stdout" + err_note;
    return res;
  }
  res.ok = true;
  return res;
}

}  // namespace evodispatch::search
