// The Lua sandbox of DESIGN.md §2: what a dispatch script sees, what it may
// answer, and what a hostile script gets instead of the process.
#include <evodispatch/heuristics/dispatch_script.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#if __has_include(<lua5.4/lua.hpp>)
#include <lua5.4/lua.hpp>
#else
#include <lua.hpp>
#endif

namespace evodispatch {
namespace {

using testing::HasSubstr;
using testing::Not;

Shape sample_shape() {
  Shape s;
  s.batch = 3;
  s.seqlen_q = 2;
  s.seqlen_k = 1000;
  s.h_q = 32;
  s.h_kv = 8;
  s.head_dim = 128;
  s.dtype = Dtype::fp16;
  s.page_size = 16;
  s.causal = false;
  return s;
}

DeviceInfo h100() { return {"NVIDIA H100 80GB HBM3", 132, 50 * 1024 * 1024, 3.35e12, 90}; }

const char* kPlainScript = R"(
function dispatch(s, hw)
  return { num_splits = 2 }
end
)";

std::unique_ptr<DispatchScript> load(std::string_view source, const SandboxLimits& limits = {}) {
  return DispatchScript::load("test.lua", source, limits);
}

DispatchOutcome run(std::string_view source, const Shape& shape = sample_shape(), const DeviceInfo& hw = h100()) {
  return load(source)->dispatch(shape, hw);
}

Decision decide(std::string_view source, const Shape& shape = sample_shape()) {
  const DispatchOutcome out = run(source, shape);
  EXPECT_TRUE(out.ok()) << out.error;
  return out.decision;
}

std::string load_error(std::string_view name, std::string_view source, const SandboxLimits& limits = {}) {
  try {
    DispatchScript::load(std::string(name), source, limits);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// ---------------------------------------------------------------------------
// What a script sees and what it may answer.

TEST(Sandbox, ShapeFieldsAreVisible) {
  const Decision d = decide(R"(
function dispatch(s, hw)
  assert(s.batch == 3 and math.type(s.batch) == "integer")
  assert(s.seqlen_q == 2 and s.seqlen_k == 1000)
  assert(s.h_q == 32 and s.h_kv == 8 and s.qpk == 4)
  assert(s.head_dim == 128 and s.dtype == "fp16")
  assert(s.page_size == 16 and s.causal == false)
  assert(s.block_n == 128 and s.nblk == 8)
  local n = 0
  for _ in pairs(s) do n = n + 1 end
  assert(n == 12, "shape has " .. n .. " fields")
  return { num_splits = 7 }
end
)");
  EXPECT_EQ(d.num_splits, 7);
}

TEST(Sandbox, EveryDtypeIsNamed) {
  const char* script = R"(
local splits = { bf16 = 1, fp16 = 2, fp8 = 3 }
function dispatch(s, hw) return { num_splits = splits[s.dtype] } end
)";
  auto ds = load(script);
  for (auto [dtype, want] : {std::pair{Dtype::bf16, 1}, {Dtype::fp16, 2}, {Dtype::fp8, 3}}) {
    Shape s = sample_shape();
    s.dtype = dtype;
    const DispatchOutcome out = ds->dispatch(s, h100());
    ASSERT_TRUE(out.ok()) << out.error;
    EXPECT_EQ(out.decision.num_splits, want);
  }
}

TEST(Sandbox, HwFieldsAreVisible) {
  const Decision d = decide(R"(
function dispatch(s, hw)
  assert(hw.name == "NVIDIA H100 80GB HBM3")
  assert(hw.num_sms == 132 and hw.cc == 90)
  assert(hw.l2_bytes == 50 * 1024 * 1024)
  assert(hw.mem_bw_bytes_per_s == 3.35e12)
  local n = 0
  for k, v in pairs(hw) do n = n + 1 end
  assert(n == 5, "hw has " .. n .. " fields")
  return { num_splits = 1, sm_margin = hw.num_sms - 1 }
end
)");
  EXPECT_EQ(d.sm_margin, 131);
}

TEST(Sandbox, HwFollowsTheDevice) {
  auto ds = load("function dispatch(s, hw) return { num_splits = hw.num_sms // 4 } end");
  DeviceInfo a100 = h100();
  a100.name = "A100";
  a100.num_sms = 108;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ds->dispatch(sample_shape(), h100()).decision.num_splits, 33);
    EXPECT_EQ(ds->dispatch(sample_shape(), a100).decision.num_splits, 27);
  }
}

TEST(Sandbox, DecisionIsParsed) {
  const Decision d = decide("function dispatch(s, hw) return { num_splits = 5, pack_gqa = false, sm_margin = 8 } end");
  EXPECT_EQ(d.num_splits, 5);
  EXPECT_EQ(d.pack_gqa, false);
  EXPECT_EQ(d.sm_margin, 8);
}

TEST(Sandbox, DefaultsAreResolved) {
  const char* script = "function dispatch(s, hw) return { num_splits = 4 } end";
  const Decision gqa = decide(script);
  EXPECT_EQ(gqa.pack_gqa, true);  // qpk = 4
  EXPECT_EQ(gqa.sm_margin, 0);
  Shape mha = sample_shape();
  mha.h_kv = mha.h_q;
  EXPECT_EQ(decide(script, mha).pack_gqa, false);
}

TEST(Sandbox, IntegralFloatsAreIntegers) {
  const Decision d = decide("function dispatch(s, hw) return { num_splits = 3.0, sm_margin = 2.0 } end");
  EXPECT_EQ(d.num_splits, 3);
  EXPECT_EQ(d.sm_margin, 2);
  EXPECT_EQ(decide("function dispatch(s, hw) return { num_splits = 256 } end").num_splits, 256);
  EXPECT_EQ(decide("function dispatch(s, hw) return { num_splits = math.ceil(s.nblk / 3) } end").num_splits, 3);
}

TEST(Sandbox, WhitelistedLibrariesWork) {
  const Decision d = decide(R"(
local ceil, min, max = math.ceil, math.min, math.max
local t = { 5, 3, 9, 1 }
table.sort(t)
assert(table.concat(t, ",") == "1,3,5,9")
table.insert(t, 2)
assert(table.remove(t) == 2 and #t == 4)
local moved = table.move(t, 1, 2, 1, {})
assert(#moved == 2 and select("#", table.unpack(t)) == 4 and table.pack(1, 2).n == 2)
assert(string.format("%d-%s", 7, "x") == "7-x" and ("abc"):upper() == "ABC")
assert(("ab"):rep(3, ",") == "ab,ab,ab" and string.rep("", 1e18) == "" and ("x"):rep(0) == "")
assert(("hello"):sub(2, 3) == "el" and #("x"):rep(10) == 10 and string.byte("A") == 65)
assert(tonumber("12") == 12 and tostring(3) == "3" and type(t) == "table")
assert(math.floor(2.5) == 2 and math.sqrt(16) == 4 and math.log(8, 2) == 3 and math.huge > 0)
assert(math.tointeger(3.0) == 3 and math.maxinteger > 0 and _VERSION == "Lua 5.4")
local n = 0
for _ in pairs(math) do n = n + 1 end
assert(n > 20, "pairs(math) sees the library")
for i, v in ipairs({ 1, 2 }) do n = n + v end
local sum = 0
local next = pairs({})
for k, v in next, { 1, 2, 3 } do sum = sum + v end
assert(sum == 6)
assert(("10" + 1) == 11, "string arithmetic still works")
function dispatch(s, hw)
  return { num_splits = max(1, min(ceil(s.nblk / 3), 8)) }
end
)");
  EXPECT_EQ(d.num_splits, 3);
}

TEST(Sandbox, HelpersAndConstantsDefinedAtLoadAreUsable) {
  const Decision d = decide(R"(
THRESHOLDS = { 4, 16, 64 }
function pick(nblk)
  for i, t in ipairs(THRESHOLDS) do
    if nblk <= t then return i end
  end
  return #THRESHOLDS + 1
end
function dispatch(s, hw)
  return { num_splits = pick(s.nblk) }
end
)");
  EXPECT_EQ(d.num_splits, 2);
}

TEST(Sandbox, ShapeTableIsFreshEachCall) {
  auto ds = load(R"(
function dispatch(s, hw)
  if s.seen then return { num_splits = 2 } end
  s.seen = true
  s.batch = 99
  return { num_splits = 1 }
end
)");
  for (int i = 0; i < 3; ++i) {
    const DispatchOutcome out = ds->dispatch(sample_shape(), h100());
    ASSERT_TRUE(out.ok()) << out.error;
    EXPECT_EQ(out.decision.num_splits, 1);
  }
}

TEST(Sandbox, BudgetsApplyPerCall) {
  SandboxLimits limits;
  limits.max_instructions = 50'000;
  // ~30 000 instructions per call: fine once, and fine again, since budgets do
  // not accumulate across calls.
  auto ds = load(R"(
local spin = 0
for i = 1, 10000 do spin = spin + 1 end
function dispatch(s, hw)
  local n = 0
  for i = 1, 10000 do n = n + 1 end
  return { num_splits = 1 }
end
)",
                 limits);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(ds->dispatch(sample_shape(), h100()).ok()) << i;
}

TEST(Sandbox, ScriptRecoversAfterAFailedCall) {
  auto ds = load(R"(
function dispatch(s, hw)
  if s.batch == 2 then while true do end end
  if s.batch == 4 then
    local t = {}
    for i = 1, 1000 do t[i] = ("x"):rep(60000) .. i end
  end
  if s.batch == 5 then error("five") end
  return { num_splits = s.batch }
end
)");
  Shape s = sample_shape();
  for (int batch : {1, 2, 3, 4, 5, 6, 2, 7}) {
    s.batch = batch;
    const DispatchOutcome out = ds->dispatch(s, h100());
    if (batch == 2 || batch == 4 || batch == 5) {
      EXPECT_FALSE(out.ok()) << batch;
    } else {
      ASSERT_TRUE(out.ok()) << out.error;
      EXPECT_EQ(out.decision.num_splits, batch);
    }
  }
}

TEST(Sandbox, ErrorsNameScriptLineAndShape) {
  auto ds = DispatchScript::load("policies/mine.lua", "function dispatch(s, hw)\n\n  return { num_splits = s.nope * 2 }\nend\n");
  const DispatchOutcome out = ds->dispatch(sample_shape(), h100());
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.error, HasSubstr("policies/mine.lua:3: "));
  EXPECT_THAT(out.error, HasSubstr("field 'nope'"));
  EXPECT_THAT(out.error, HasSubstr("(shape: " + describe(sample_shape()) + ")"));
}

TEST(Sandbox, LongNamesAreKeptWhole) {
  const std::string name = "/very/long/path/" + std::string(80, 'd') + "/script.lua";
  const std::string err = load_error(name, "x = 1\nx = x + nil\n");
  EXPECT_THAT(err, testing::StartsWith(name + ":2: "));
}

TEST(Sandbox, ErrorsAreOneBoundedLine) {
  const DispatchOutcome out = run("function dispatch(s, hw)\n  error(('line\\n'):rep(1000))\nend\n");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error.find('\n'), std::string::npos);
  EXPECT_LT(out.error.size(), 300 + 200u);
  EXPECT_THAT(out.error, HasSubstr("test.lua:2: line line"));
}

TEST(Sandbox, MissingDispatchIsReportedExactly) {
  EXPECT_EQ(load_error("empty.lua", "-- nothing\n"), "empty.lua: no dispatch function");
}

TEST(Sandbox, ScriptsAreIsolated) {
  // Each script has its own state: globals, libraries and the string metatable
  // of one are invisible to another, even after a failed tampering attempt.
  EXPECT_THAT(load_error("a.lua", "string.secret = 1\n"), HasSubstr("read-only"));
  EXPECT_THAT(load_error("b.lua", "(\"\").secret = 1\n"), HasSubstr("b.lua:1: attempt to index a string value"));
  auto first = load("shared = 7\nfunction dispatch(s, hw) return { num_splits = shared } end");
  EXPECT_EQ(first->dispatch(sample_shape(), h100()).decision.num_splits, 7);
  const Decision d = decide(R"(
assert(shared == nil, "globals leak between scripts")
assert(string.secret == nil and ("").secret == nil, "string library leaks")
assert(("").dump == nil and ("x"):rep(2) == "xx")
function dispatch(s, hw) return { num_splits = 1 } end
)");
  EXPECT_EQ(d.num_splits, 1);
}

TEST(Sandbox, ReadOnlyTablesStayReadable) {
  auto ds = load("function dispatch(s, hw) return { num_splits = math.floor(math.pi) } end");
  EXPECT_EQ(ds->dispatch(sample_shape(), h100()).decision.num_splits, 3);
  EXPECT_THAT(load_error("m.lua", "math.pi = 4\n"), HasSubstr("m.lua:1: attempt to modify read-only table 'math'"));
}

TEST(Sandbox, StringsUpToTheLimitAreFine) {
  const Decision d = decide(R"(
local big = ("ab"):rep(30000)
assert(#big == 60000 and big:sub(-2) == "ab")
local parts = {}
for i = 1, 50 do parts[i] = big .. i end -- 3 MB of live strings
function dispatch(s, hw) return { num_splits = #parts } end
)");
  EXPECT_EQ(d.num_splits, 50);
  EXPECT_THAT(run("function dispatch(s, hw) return { num_splits = #((\"x\"):rep(70000)) } end").error,
              HasSubstr("string limit"));
}

TEST(Sandbox, SmallerBudgetsAreHonoured) {
  SandboxLimits limits;
  limits.max_memory_bytes = 256 * 1024;
  limits.max_instructions = 5000;
  auto ds = load(kPlainScript, limits);
  EXPECT_TRUE(ds->dispatch(sample_shape(), h100()).ok());
  EXPECT_THAT(load_error("mem.lua", "local t = {} for i = 1, 1e6 do t[i] = {} end", limits), HasSubstr("budget"));
  EXPECT_THAT(load_error("ins.lua", "for i = 1, 1e6 do end", limits), HasSubstr("instruction budget of 5000"));
}

TEST(Sandbox, MemoryBudgetTooSmallForTheSandbox) {
  SandboxLimits tiny;
  tiny.max_memory_bytes = 2048;
  EXPECT_THAT(load_error("tiny.lua", kPlainScript, tiny), HasSubstr("tiny.lua: the memory budget"));
}

TEST(Sandbox, ManyScriptsInOneProcess) {
  std::vector<std::unique_ptr<DispatchScript>> scripts;
  for (int i = 1; i <= 50; ++i)
    scripts.push_back(load("function dispatch(s, hw) return { num_splits = " + std::to_string(i) + " } end"));
  for (int i = 1; i <= 50; ++i) EXPECT_EQ(scripts[i - 1]->dispatch(sample_shape(), h100()).decision.num_splits, i);
}

// ---------------------------------------------------------------------------
// Hostile scripts: tests/heuristics/hostile/*.lua, one case per file. The first
// line is "-- expect: <part of the error>", an optional second line
// "-- line: N" says which line the error must point at.

// The 100 ms limit is on the CPU time of the thread that runs the script: that is what
// the sandbox controls. Wall time also includes whatever else the machine runs (CI runs
// the suites in parallel on two cores), so it only gets a loose sanity bound.
struct ThreadCpuClock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<ThreadCpuClock>;
  static constexpr bool is_steady = true;
  static time_point now() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
  }
};
using Clock = ThreadCpuClock;
// Far below what a script the sandbox failed to stop would take (seconds), far above what
// a stopped one takes (30-50 ms here): a script stopped by the memory budget faults in up
// to 8 MiB of fresh pages, which this thread's CPU clock counts, and on a loaded two-core
// CI machine that once took 100.2 ms.
constexpr auto kHostileLimit = std::chrono::milliseconds(250);
constexpr auto kWallSanityLimit = std::chrono::seconds(2);

std::filesystem::path hostile_dir() { return std::filesystem::path(EVO_SOURCE_DIR) / "tests/heuristics/hostile"; }

// Runs while tests are registered: a missing folder gives an empty list (and a
// failing FolderHoldsTheSuite), not an exception that aborts the whole binary.
std::vector<std::string> hostile_files() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(hostile_dir(), ec))
    if (entry.path().extension() == ".lua") names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Expectation {
  std::string text;
  int line = 0;
};

Expectation parse_header(const std::string& source) {
  Expectation e;
  std::istringstream in(source);
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  const std::string expect = "-- expect: ", line = "-- line: ";
  if (first.rfind(expect, 0) == 0) e.text = first.substr(expect.size());
  if (second.rfind(line, 0) == 0) e.line = std::stoi(second.substr(line.size()));
  return e;
}

struct Attempt {
  std::string error;
  bool at_load = false;
  Clock::duration took{};
  std::chrono::steady_clock::duration took_wall{};
};

// Loads the script and, if that works, calls dispatch once: the same two steps
// `evodispatch check` takes.
Attempt attempt(const std::string& name, const std::string& source) {
  Attempt a;
  const auto start = Clock::now();
  const auto wall_start = std::chrono::steady_clock::now();
  try {
    auto ds = DispatchScript::load(name, source);
    a.error = ds->dispatch(sample_shape(), h100()).error;
  } catch (const InputError& e) {
    a.error = e.what();
    a.at_load = true;
  }
  a.took = Clock::now() - start;
  a.took_wall = std::chrono::steady_clock::now() - wall_start;
  return a;
}

void expect_sandbox_still_works() {
  auto ds = DispatchScript::load("after.lua", kPlainScript);
  const DispatchOutcome out = ds->dispatch(sample_shape(), h100());
  ASSERT_TRUE(out.ok()) << out.error;
  EXPECT_EQ(out.decision.num_splits, 2);
}

class HostileScript : public testing::TestWithParam<std::string> {};

TEST_P(HostileScript, FailsClearlyAndQuickly) {
  const std::string source = read_file(hostile_dir() / GetParam());
  const Expectation want = parse_header(source);
  ASSERT_FALSE(want.text.empty()) << GetParam() << " has no '-- expect:' first line";
  const std::string name = "hostile/" + GetParam();

  const Attempt a = attempt(name, source);
  ASSERT_FALSE(a.error.empty()) << name << " was accepted";
  EXPECT_THAT(a.error, testing::StartsWith(name));
  EXPECT_THAT(a.error, HasSubstr(want.text));
  if (want.line > 0) {
    EXPECT_THAT(a.error, HasSubstr(name + ":" + std::to_string(want.line) + ":"));
  }
  if (!a.at_load) {
    EXPECT_THAT(a.error, HasSubstr("(shape: " + describe(sample_shape()) + ")"));
  }
  EXPECT_EQ(a.error.find_first_of("\r\n"), std::string::npos);
  EXPECT_LT(a.error.size(), 500u);
  EXPECT_LT(a.took, kHostileLimit) << std::chrono::duration<double, std::milli>(a.took).count() << " ms of CPU";
  EXPECT_LT(a.took_wall, kWallSanityLimit);
  expect_sandbox_still_works();
}

INSTANTIATE_TEST_SUITE_P(Hostile, HostileScript, testing::ValuesIn(hostile_files()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string id = std::filesystem::path(info.param).stem().string();
                           for (char& c : id)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return id;
                         });

TEST(Hostile, FolderHoldsTheSuite) {
  const auto files = hostile_files();
  EXPECT_GE(files.size(), 60u);
  for (const char* must : {"loop_in_pcall.lua", "rep_huge.lua", "rep_empty_then_separator.lua", "g_table.lua",
                           "getmetatable_string.lua", "rawget.lua", "select_indirect.lua", "no_dispatch.lua",
                           "return_nan.lua", "return_unknown_field.lua"})
    EXPECT_NE(std::find(files.begin(), files.end(), must), files.end()) << must;
}

// A precompiled chunk, made by a plain Lua state the way luac would.
std::string compiled_chunk(const char* source) {
  lua_State* L = luaL_newstate();
  std::string bytes;
  if (luaL_loadstring(L, source) == LUA_OK) {
    lua_dump(
        L,
        [](lua_State*, const void* p, size_t n, void* ud) {
          static_cast<std::string*>(ud)->append(static_cast<const char*>(p), n);
          return 0;
        },
        &bytes, 0);
  }
  lua_close(L);
  return bytes;
}

TEST(Hostile, BytecodeIsRefused) {
  const std::string bytes = compiled_chunk("function dispatch(s, hw) return { num_splits = 1 } end");
  ASSERT_GT(bytes.size(), 4u);
  ASSERT_EQ(bytes[0], '\x1b');
  for (const std::string& payload : {bytes, " " + bytes, "\n" + bytes}) {
    const Attempt a = attempt("compiled.luac", payload);
    EXPECT_TRUE(a.at_load);
    EXPECT_THAT(a.error, testing::StartsWith("compiled.luac"));
    EXPECT_EQ(a.error.find_first_of("\r\n"), std::string::npos) << a.error;
    EXPECT_LT(a.took, kHostileLimit);
    expect_sandbox_still_works();
  }
  EXPECT_THAT(attempt("compiled.luac", bytes).error, HasSubstr("binary"));
  EXPECT_THAT(attempt("compiled.luac", " " + bytes).error, HasSubstr("unexpected symbol"));
}

TEST(Hostile, BudgetExhaustionCannotBeSwallowed) {
  // Every way of catching an error is absent, so the only chance a script has
  // is that the budget error is not raised again; it is.
  SandboxLimits limits;
  limits.max_instructions = 10'000;
  auto ds = load(R"(
function dispatch(s, hw)
  for i = 1, 1e9 do
    table.sort({ 1, 2, 3 }, function(a, b) return a < b end)
  end
  return { num_splits = 1 }
end
)",
                 limits);
  for (int i = 0; i < 3; ++i) {
    const DispatchOutcome out = ds->dispatch(sample_shape(), h100());
    ASSERT_FALSE(out.ok());
    EXPECT_THAT(out.error, HasSubstr("instruction budget of 10000 exceeded"));
  }
}

TEST(Hostile, RepOfEmptyStringIsImmediate) {
  const auto start = Clock::now();
  const Decision d = decide(R"(
function dispatch(s, hw)
  local e = string.rep("", 1e18) .. ("" ):rep(math.maxinteger, "")
  return { num_splits = #e + 1 }
end
)");
  EXPECT_EQ(d.num_splits, 1);
  EXPECT_LT(Clock::now() - start, kHostileLimit);
}

}  // namespace
}  // namespace evodispatch
