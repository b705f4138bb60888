#include "lua_sandbox.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <span>

// Lua reports errors with longjmp (liblua5.4 is C), so every function below that
// Lua calls, or that calls Lua API functions able to raise, keeps only trivially
// destructible locals: a longjmp over a std::string would leak or worse.

namespace evodispatch::lua {

namespace {

// The count hook runs every kHookPeriod VM instructions. Besides counting, it
// looks at the clock, for instructions whose C work neither counts nor
// allocates (comparing two long strings): small enough that 128 of the slowest
// such operations pass in well under a millisecond (see kStringShare).
constexpr int kHookPeriod = 128;

// Allocation is charged against the instruction budget: a loop that builds and
// drops a large string per iteration does C work the VM count does not see.
// Copying 64 bytes costs about what one VM instruction does.
constexpr std::uint64_t kBytesPerInstruction = 64;

// Allocations at least this large check the clock on the spot: they are where one
// instruction can stand for milliseconds of C work.
constexpr std::size_t kBigAllocation = 64 * 1024;

// No string may take more than this share of the memory budget (64 KiB of the
// default 8 MiB). A dispatch rule needs a few short strings; capping them bounds
// what a single comparison or conversion of strings costs, so 128 of them pass
// in well under a millisecond between two looks at the clock.
constexpr std::size_t kStringShare = 128;
constexpr std::size_t kMinStringLimit = 4096;
constexpr std::size_t kStringHeader = 64;  // room for Lua's TString header

// The CPU-time backstop for work that neither counts as instructions nor
// allocates: comparing or scanning long strings (each == of two equal strings
// is a memcmp). An honest script runs its whole instruction budget in a
// fraction of it (about 10 ns per instruction with the count hook on).
constexpr std::chrono::nanoseconds kTimePerInstruction{60};
constexpr std::chrono::nanoseconds kMinTimeLimit = std::chrono::milliseconds(20);
constexpr std::chrono::nanoseconds kMaxTimeLimit = std::chrono::hours(1);

// What a script may read. Everything not named here is absent, so a new Lua
// release adding a function cannot widen the sandbox by accident. `next` is not
// listed, though `local next = pairs({})` reaches Lua's: it only walks tables the
// script already holds, and read-only views have an iterator of their own.
//
// Each allowed C function was checked for work the count hook cannot see:
//  * select, type, tostring, tonumber, assert, error and ipairs/pairs steps are
//    O(1) or linear in one string, and strings are capped (kStringShare);
//  * string.format caps widths and precisions at two digits, so its output is
//    linear in its arguments; byte, char, len, lower, upper, reverse, sub are
//    linear in a capped string or in an argument list;
//  * table.unpack checks its count against the stack (which the memory budget
//    bounds) before it loops; table.pack is linear in its arguments;
//  * string.rep, table.concat, insert, move, remove and sort loop on a count
//    the script chooses: they are replaced or guarded below.
constexpr const char* kBaseNames[] = {"assert",   "error",    "ipairs", "pairs",   "select",
                                      "tonumber", "tostring", "type",   "_VERSION"};
// math.random and math.randomseed are left out: dispatch must be deterministic.
constexpr const char* kMathNames[] = {"abs",   "acos",       "asin", "atan",       "ceil", "cos",  "deg",
                                      "exp",   "floor",      "fmod", "huge",       "log",  "max",  "maxinteger",
                                      "min",   "mininteger", "modf", "pi",         "rad",  "sin",  "sqrt",
                                      "tan",   "tointeger",  "type", "ult"};
// Left out of string:
//  * dump: it turns functions into bytecode, which is exactly what mode "t" refuses;
//  * find, match, gmatch, gsub: the pattern matcher backtracks in C
//    ("(.-)(.-)(.-)x" over a long subject is exponential-ish) and a count hook only
//    sees VM instructions, so one call could run for minutes;
//  * pack, packsize, unpack: binary serialisation has no use in a dispatch rule and
//    its size options drive byte-at-a-time C loops the hook cannot see.
constexpr const char* kStringNames[] = {"byte", "char", "format", "len", "lower", "reverse", "sub", "upper"};
constexpr const char* kTableNames[] = {"pack", "unpack"};

Sandbox& sandbox(lua_State* L) { return Sandbox::of(L); }

// The C function a guard wraps, kept as the guard's first upvalue.
int call_original(lua_State* L) { return lua_tocfunction(L, lua_upvalueindex(1))(L); }

// string.rep(s, n [, sep]), reimplemented rather than wrapped. Lua's own loops n
// times even when s and sep are empty (string.rep("", 1e18) never returns) and
// copies one piece per iteration (a million calls to memcpy for a 1 MB result of
// "x"), all of it C time the hook does not see. Here an empty result costs O(1),
// a result over the string limit (a small share of the memory budget) is
// refused before any byte is copied, and the copy doubles a block, so it runs
// at memcpy speed.
int guarded_rep(lua_State* L) {
  std::size_t len = 0, sep_len = 0;
  const char* s = luaL_checklstring(L, 1, &len);
  const lua_Integer n = luaL_checkinteger(L, 2);
  const char* sep = luaL_optlstring(L, 3, "", &sep_len);
  if (n <= 0 || (len == 0 && sep_len == 0)) {
    lua_pushliteral(L, "");
    return 1;
  }
  const auto count = static_cast<std::uint64_t>(n);
  const std::uint64_t room = sandbox(L).max_string_bytes();
  const bool too_large = (len > 0 && count > room / len) || (sep_len > 0 && count - 1 > room / sep_len) ||
                         count * len + (count - 1) * sep_len > room;
  if (too_large)
    return luaL_error(L, "string.rep result too large: %I copies of %d bytes exceed the string limit of %d bytes", n,
                      static_cast<int>(std::min<std::size_t>(len + sep_len, std::numeric_limits<int>::max())),
                      static_cast<int>(std::min<std::uint64_t>(room, std::numeric_limits<int>::max())));
  const std::size_t total = count * len + (count - 1) * sep_len;
  luaL_Buffer b;
  char* out = luaL_buffinitsize(L, &b, total);
  std::memcpy(out, s, len);
  // The rest is (sep .. s) repeated n - 1 times: write one unit, then double.
  char* rest = out + len;
  const std::size_t rest_len = total - len;
  if (rest_len > 0) {
    std::memcpy(rest, sep, sep_len);
    std::memcpy(rest + sep_len, s, len);
    for (std::size_t done = sep_len + len; done < rest_len;) {
      const std::size_t chunk = std::min(done, rest_len - done);
      std::memcpy(rest + done, rest, chunk);
      done += chunk;
    }
  }
  luaL_pushresultsize(&b, total);
  return 1;
}

void check_range(lua_State* L, const char* what, lua_Integer first, lua_Integer last) {
  if (last < first) return;
  const lua_Unsigned span_minus_one = static_cast<lua_Unsigned>(last) - static_cast<lua_Unsigned>(first);
  if (span_minus_one >= static_cast<lua_Unsigned>(sandbox(L).max_sequence_length()))
    luaL_error(L, "%s range %I..%I is longer than any table the memory budget can hold", what, first, last);
}

// table.move(a, f, e, t): copies e - f + 1 slots, nil or not, entirely in C, so
// table.move({}, 1, 1e18, 1) spins without allocating anything.
int guarded_move(lua_State* L) {
  check_range(L, "table.move", luaL_checkinteger(L, 2), luaL_checkinteger(L, 3));
  return call_original(L);
}

// table.concat(t, sep, i, j) loops from i to j in C.
int guarded_concat(lua_State* L) {
  if (lua_type(L, 1) == LUA_TTABLE) {
    const lua_Integer first = luaL_optinteger(L, 3, 1);
    const lua_Integer last = lua_isnoneornil(L, 4) ? luaL_len(L, 1) : luaL_checkinteger(L, 4);
    check_range(L, "table.concat", first, last);
  }
  return call_original(L);
}

// table.insert, table.remove and table.sort loop over #t in C. A sparse table
// ({[1]=1, [2]=1, [4]=1, ..., [2^40]=1}) has a border near 2^40 with 41 entries,
// so #t alone does not bound the work; the memory budget does for real sequences.
int guarded_by_length(lua_State* L) {
  if (lua_type(L, 1) == LUA_TTABLE) {
    const lua_Integer n = luaL_len(L, 1);
    if (n > sandbox(L).max_sequence_length())
      return luaL_error(L, "table length %I is longer than any sequence the memory budget can hold", n);
  }
  return call_original(L);
}

struct Guard {
  const char* name;
  lua_CFunction wrapper;
};
constexpr Guard kStringReplacements[] = {{"rep", guarded_rep}};
constexpr Guard kTableGuards[] = {{"concat", guarded_concat},
                                  {"insert", guarded_by_length},
                                  {"move", guarded_move},
                                  {"remove", guarded_by_length},
                                  {"sort", guarded_by_length}};

void copy_fields(lua_State* L, int from, int to, std::span<const char* const> names) {
  for (const char* name : names) {
    lua_getfield(L, from, name);
    lua_setfield(L, to, name);
  }
}

// Opens a standard library into a scratch table, copies the allowed functions and
// the guarded ones into a fresh table, and stores its read-only view in the
// whitelist under `name`. The full library table is dropped.
void add_library(lua_State* L, int whitelist, const char* name, lua_CFunction open,
                 std::span<const char* const> names, std::span<const Guard> guards) {
  lua_pushcfunction(L, open);
  lua_call(L, 0, 1);
  const int full = lua_gettop(L);
  lua_createtable(L, 0, static_cast<int>(names.size() + guards.size()));
  const int allowed = lua_gettop(L);
  copy_fields(L, full, allowed, names);
  for (const Guard& g : guards) {
    lua_getfield(L, full, g.name);
    lua_pushcclosure(L, g.wrapper, 1);
    lua_setfield(L, allowed, g.name);
  }
  make_read_only(L, name);
  lua_setfield(L, whitelist, name);
  lua_pop(L, 1);
}

// Every Lua value a string indexes (("x"):rep(3), ("").dump) is looked up through
// the string metatable, which luaopen_string pointed at the full library.
void sanitize_string_metatable(lua_State* L, int whitelist) {
  lua_pushliteral(L, "");
  lua_getmetatable(L, -1);
  lua_getfield(L, whitelist, "string");
  lua_setfield(L, -2, "__index");
  lua_pop(L, 2);
}

// luaopen_base fills the state's global table. No chunk ever sees that table
// (each gets its own _ENV), but emptying it leaves nothing to find even so.
void clear_table(lua_State* L, int table) {
  lua_pushnil(L);
  while (lua_next(L, table)) {
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_pushnil(L);
    lua_rawset(L, table);
  }
}

int refuse_write(lua_State* L) {
  const char* what = lua_tostring(L, lua_upvalueindex(1));
  if (lua_type(L, 2) == LUA_TSTRING)
    return luaL_error(L, "attempt to modify read-only table '%s' (field '%s')", what, lua_tostring(L, 2));
  return luaL_error(L, "attempt to modify read-only table '%s'", what);
}

int refuse_global(lua_State* L) {
  if (lua_type(L, 2) == LUA_TSTRING)
    return luaL_error(L, "dispatch must be pure: it assigned global '%s'", lua_tostring(L, 2));
  return luaL_error(L, "dispatch must be pure: it assigned a %s key of _ENV", luaL_typename(L, 2));
}

// The iterator pairs() returns for a read-only view. The real table stays an
// upvalue: handing it out as pairs' second result would make it writable.
int read_only_next(lua_State* L) {
  lua_settop(L, 2);
  if (lua_next(L, lua_upvalueindex(1))) return 2;
  lua_pushnil(L);
  return 1;
}

int read_only_pairs(lua_State* L) {
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}

}  // namespace

Sandbox::Sandbox(const SandboxLimits& limits) : limits_(limits) {
  using std::chrono::nanoseconds;
  const double ns = static_cast<double>(limits.max_instructions) * static_cast<double>(kTimePerInstruction.count());
  time_limit_ = ns >= static_cast<double>(kMaxTimeLimit.count())
                    ? kMaxTimeLimit
                    : std::max(kMinTimeLimit, nanoseconds(static_cast<nanoseconds::rep>(ns)));
}

std::unique_ptr<Sandbox> Sandbox::create(const SandboxLimits& limits) {
  std::unique_ptr<Sandbox> sb(new Sandbox(limits));
  sb->L_ = lua_newstate(&Sandbox::allocate, sb.get());
  if (sb->L_ == nullptr) return nullptr;
  *static_cast<Sandbox**>(lua_getextraspace(sb->L_)) = sb.get();
  // The fixed slots DispatchScript keeps on the main stack, plus room to work.
  if (!lua_checkstack(sb->L_, 32)) return nullptr;
  return sb;
}

Sandbox::~Sandbox() {
  if (L_ != nullptr) lua_close(L_);
}

std::size_t Sandbox::max_string_bytes() const {
  return std::max(kMinStringLimit, limits_.max_memory_bytes / kStringShare);
}

std::int64_t Sandbox::max_sequence_length() const {
  constexpr std::size_t kValueBytes = 16;  // one TValue, what each sequence slot costs at least
  return static_cast<std::int64_t>(limits_.max_memory_bytes / kValueBytes);
}

// Lua's allocator contract: free on nsize == 0, never fail a shrink. Growth the
// sandbox refuses returns nullptr, which Lua turns into a memory error after one
// emergency collection and a second request.
void* Sandbox::allocate(void* ud, void* ptr, std::size_t osize, std::size_t nsize) {
  auto* sb = static_cast<Sandbox*>(ud);
  const std::size_t old = ptr != nullptr ? osize : 0;  // for new objects osize is a type tag
  if (nsize == 0) {
    std::free(ptr);
    sb->used_ -= old;
    return nullptr;
  }
  const bool new_string = ptr == nullptr && osize == LUA_TSTRING;
  if (nsize > old && !sb->admit(ptr, nsize - old, nsize, new_string)) return nullptr;
  void* block = std::realloc(ptr, nsize);
  if (block == nullptr) {
    sb->memory_refused_ = true;
    return nullptr;
  }
  sb->used_ = sb->used_ - old + nsize;
  return block;
}

bool Sandbox::admit(const void* ptr, std::size_t growth, std::size_t nsize, bool new_string) {
  const bool retry = ptr == retry_ptr_ && nsize == retry_size_;
  retry_ptr_ = nullptr;
  retry_size_ = 0;
  if (!retry) {
    // The hook only looks every kHookPeriod instructions, and a few instructions
    // can allocate megabytes each: allocation is charged and checked here, and
    // the hook raises the error at the very next instruction, where the message
    // handler can still tell the line.
    allocated_ += nsize;
    if (stop_ == Stop::none && L_ != nullptr) {
      if (static_cast<std::int64_t>(allocated_ / kBytesPerInstruction) >= remaining_) stop_ = Stop::instructions;
      else if (nsize >= kBigAllocation && past_deadline()) stop_ = Stop::time;
      if (stop_ != Stop::none) arm_hook(1);
    }
  }
  if (new_string && nsize > max_string_bytes() + kStringHeader) {
    string_refused_ = true;
  } else {
    // After an emergency collection the live data must leave a quarter of the
    // budget free. Otherwise a script whose live data creeps up to the limit
    // would get a full collection on nearly every allocation (each one
    // "succeeds" by freeing a few bytes of garbage) and crawl instead of failing.
    const std::size_t max = limits_.max_memory_bytes;
    const std::size_t limit = retry ? max - max / 4 : max;
    if (growth <= limit - std::min(used_, limit)) return true;
  }
  memory_refused_ = true;
  retry_ptr_ = ptr;
  retry_size_ = nsize;
  return false;
}

void Sandbox::arm_hook(int count) {
  hook_period_ = count;
  lua_sethook(L_, &Sandbox::count_hook, LUA_MASKCOUNT, count);
}

// The backstop reads this thread's CPU time, not the wall clock: a process that is
// descheduled on a loaded machine (CI runs tests in parallel on two cores) must not
// fail an honest script, or a search would score the same program differently.
// Reading that clock costs ~0.4 us, so the hook reads it once every kHooksPerClock
// calls (2048 instructions); even then, capped strings keep the C work between two
// reads to a few milliseconds.
constexpr int kHooksPerClock = 16;

std::chrono::nanoseconds thread_cpu_time() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// The clock starts at the first look rather than in begin_run: most dispatch
// calls end before the hook first runs and so never read it. What runs before
// that first look is under kHookPeriod instructions.
bool Sandbox::past_deadline() {
  const auto now = thread_cpu_time();
  if (deadline_ == kClockNotStarted) {
    deadline_ = now + time_limit_;
    return false;
  }
  return now > deadline_;
}

void Sandbox::begin_run() {
  remaining_ = static_cast<std::int64_t>(
      std::min<std::uint64_t>(limits_.max_instructions, std::numeric_limits<std::int64_t>::max()));
  allocated_ = 0;
  stop_ = Stop::none;
  error_line_ = 0;
  memory_refused_ = false;
  string_refused_ = false;
  retry_ptr_ = nullptr;
  retry_size_ = 0;
  deadline_ = kClockNotStarted;
  hooks_since_clock_ = kHooksPerClock - 1;  // the first hook starts the clock
  arm_hook(static_cast<int>(std::clamp<std::int64_t>(remaining_, 1, kHookPeriod)));
}

void Sandbox::count_hook(lua_State* L, lua_Debug*) {
  Sandbox& sb = of(L);
  sb.remaining_ -= sb.hook_period_ + static_cast<std::int64_t>(sb.allocated_ / kBytesPerInstruction);
  sb.allocated_ = 0;
  if (sb.remaining_ <= 0) sb.stop_ = Stop::instructions;
  else if (++sb.hooks_since_clock_ >= kHooksPerClock) {
    sb.hooks_since_clock_ = 0;
    if (sb.past_deadline()) sb.stop_ = Stop::time;
  }
  if (sb.stop_ != Stop::none) {
    // There is no pcall in the sandbox, but should anything ever resume after
    // this error, the very next instruction raises it again.
    sb.arm_hook(1);
    lua_pushnil(L);  // allocates nothing; DispatchScript words the error from stop()
    lua_error(L);
  }
  const int next = static_cast<int>(std::min<std::int64_t>(sb.remaining_, kHookPeriod));
  if (next != sb.hook_period_) sb.arm_hook(next);
}

int Sandbox::message_handler(lua_State* L) {
  Sandbox& sb = of(L);
  lua_Debug ar;
  for (int level = 1; lua_getstack(L, level, &ar); ++level) {
    if (lua_getinfo(L, "l", &ar) && ar.currentline > 0) {
      sb.error_line_ = ar.currentline;
      break;
    }
  }
  if (sb.stop_ != Stop::none) return 1;  // DispatchScript words these from stop()
  switch (lua_type(L, 1)) {
    case LUA_TSTRING: break;
    case LUA_TNUMBER: lua_tostring(L, 1); break;  // converted here, where raising is still safe
    default: lua_pushfstring(L, "error object is a %s value", luaL_typename(L, 1)); return 1;
  }
  lua_settop(L, 1);
  return 1;
}

void make_read_only(lua_State* L, const char* what) {
  const int real = lua_gettop(L);
  lua_createtable(L, 0, 0);
  lua_createtable(L, 0, 4);
  lua_pushvalue(L, real);
  lua_setfield(L, -2, "__index");
  lua_pushstring(L, what);
  lua_pushcclosure(L, refuse_write, 1);
  lua_setfield(L, -2, "__newindex");
  lua_pushvalue(L, real);
  lua_pushcclosure(L, read_only_next, 1);
  lua_pushcclosure(L, read_only_pairs, 1);
  lua_setfield(L, -2, "__pairs");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
  lua_replace(L, real);
}

void push_environment(lua_State* L) {
  lua_pushcfunction(L, luaopen_base);
  lua_call(L, 0, 1);
  const int globals = lua_gettop(L);
  lua_createtable(L, 0, 16);
  const int whitelist = lua_gettop(L);
  copy_fields(L, globals, whitelist, kBaseNames);
  add_library(L, whitelist, "math", luaopen_math, kMathNames, {});
  add_library(L, whitelist, "string", luaopen_string, kStringNames, kStringReplacements);
  add_library(L, whitelist, "table", luaopen_table, kTableNames, kTableGuards);
  sanitize_string_metatable(L, whitelist);
  clear_table(L, globals);

  lua_createtable(L, 0, 0);  // the chunk's _ENV: its own globals land here
  lua_createtable(L, 0, 2);
  lua_pushvalue(L, whitelist);
  lua_setfield(L, -2, "__index");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
  lua_replace(L, globals);
  lua_settop(L, globals);
}

void freeze_environment(lua_State* L, int env_index) {
  const int env = lua_absindex(L, env_index);
  const int top = lua_gettop(L);
  lua_getmetatable(L, env);
  lua_pushliteral(L, "__index");
  lua_rawget(L, -2);
  const int whitelist = lua_gettop(L);
  lua_createtable(L, 0, 32);
  const int frozen = lua_gettop(L);
  // One table behind __index holding the whitelist and, over it, the script's own
  // globals: a global read costs one miss and one hit.
  lua_pushnil(L);
  while (lua_next(L, whitelist)) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, frozen);
  }
  lua_pushnil(L);
  while (lua_next(L, env)) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, frozen);
    lua_pushvalue(L, -1);
    lua_pushnil(L);
    lua_rawset(L, env);  // clearing the current key is allowed during lua_next
  }
  lua_createtable(L, 0, 3);
  lua_pushvalue(L, frozen);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, refuse_global);
  lua_setfield(L, -2, "__newindex");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, env);
  lua_settop(L, top);
}

}  // namespace evodispatch::lua
