#pragma once
// Private to heuristics/: the lua_State behind one DispatchScript (DESIGN.md §2).
//
// A Sandbox owns the state, its byte budget (enforced by the allocator), its
// instruction budget (enforced by a count hook) and the whitelisted environment.
// Everything here that can raise a Lua error must run inside lua_pcall: the
// functions taking a lua_State are lua_CFunction-style helpers for that purpose.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>

#include <lua.hpp>

#include <evodispatch/heuristics/dispatch_script.hpp>

namespace evodispatch::lua {

// Why the current run was stopped by the sandbox rather than by the script.
enum class Stop { none, instructions, time };

class Sandbox {
 public:
  // nullptr when not even a bare state fits in the memory budget.
  static std::unique_ptr<Sandbox> create(const SandboxLimits& limits);
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  static Sandbox& of(lua_State* L) { return **static_cast<Sandbox**>(lua_getextraspace(L)); }

  lua_State* state() const { return L_; }
  const SandboxLimits& limits() const { return limits_; }

  // Gives the next piece of Lua code (the chunk, or one dispatch call) a fresh
  // instruction budget and time backstop.
  void begin_run();

  Stop stop() const { return stop_; }
  bool memory_refused() const { return memory_refused_; }
  // Whether a refusal in this run was a string over max_string_bytes().
  bool string_refused() const { return string_refused_; }
  // The innermost Lua line when the last error was raised (0: unknown).
  int error_line() const { return error_line_; }
  std::chrono::milliseconds time_limit() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(time_limit_);
  }

  // The longest string a script may create (a share of the memory budget).
  std::size_t max_string_bytes() const;
  // No genuine sequence can be longer than the budget holds Lua values; longer
  // lengths only come from sparse tables whose border is far away.
  std::int64_t max_sequence_length() const;

  // lua_CFunction for lua_pcall's message handler: records error_line() and turns
  // non-string error objects into text. Allocates nothing for string errors.
  static int message_handler(lua_State* L);

 private:
  explicit Sandbox(const SandboxLimits& limits);
  static void* allocate(void* ud, void* ptr, std::size_t osize, std::size_t nsize);
  bool admit(const void* ptr, std::size_t growth, std::size_t nsize, bool new_string);
  static void count_hook(lua_State* L, lua_Debug* ar);
  void arm_hook(int count);
  bool past_deadline();
  static constexpr auto kClockNotStarted = std::chrono::nanoseconds::max();

  SandboxLimits limits_;
  lua_State* L_ = nullptr;
  std::size_t used_ = 0;
  bool memory_refused_ = false;
  bool string_refused_ = false;
  // Until the first begin_run (state creation, setting up the environment) only
  // the memory budget applies.
  std::int64_t remaining_ = std::numeric_limits<std::int64_t>::max();  // instructions left in this run
  std::uint64_t allocated_ = 0;         // bytes allocated since the hook last ran
  int hook_period_ = 0;                 // instructions between two hook calls
  std::chrono::nanoseconds time_limit_{};
  std::chrono::nanoseconds deadline_ = kClockNotStarted;  // on this thread's CPU clock
  int hooks_since_clock_ = 0;
  Stop stop_ = Stop::none;
  int error_line_ = 0;
  // The request refused last: Lua collects garbage and asks again right away.
  const void* retry_ptr_ = nullptr;
  std::size_t retry_size_ = 0;
};

// Pushes a fresh environment table for a chunk: empty, with reads falling
// through to the whitelist. Also points the string metatable at the sanitized
// string library. Raises on memory exhaustion (call under lua_pcall).
void push_environment(lua_State* L);

// Freezes the environment at `env_index` after the chunk ran: its contents move
// behind __index and every later write raises "dispatch must be pure: ...".
// Identity is kept, so closures that captured the table see the frozen one.
void freeze_environment(lua_State* L, int env_index);

// Replaces the table on top of the stack by a read-only view of it: reads and
// pairs() see the contents, writes raise an error naming `what`.
void make_read_only(lua_State* L, const char* what);

}  // namespace evodispatch::lua
