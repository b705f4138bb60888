#include <evodispatch/heuristics/dispatch_script.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <optional>
#include <string>

#include "lua_sandbox.hpp"

// The main stack of each script's lua_State holds fixed slots (below), so a
// dispatch call pushes two values and allocates only the shape table.
//
// Lua raises errors with longjmp: C functions that Lua calls (call_dispatch,
// setup, finish_load) keep only trivially destructible locals, and the C++ side
// calls only API functions that cannot raise (no allocation, no metamethods)
// outside lua_pcall.

namespace evodispatch {

namespace {

constexpr int kMsgh = 1;           // Sandbox::message_handler
constexpr int kTrampoline = 2;     // call_dispatch closure
constexpr int kChunk = 3;          // the loaded chunk, owner of the shared _ENV upvalue
constexpr int kEnv = 4;            // the script's _ENV table
constexpr int kKeyNumSplits = 5;   // interned decision field names
constexpr int kKeyPackGqa = 6;
constexpr int kKeySmMargin = 7;
constexpr int kBase = 7;

// Upvalues of call_dispatch: interned keys make building the shape table a
// sequence of TValue copies instead of string lookups.
constexpr int kUpDispatch = 1;
constexpr int kUpHw = 2;
constexpr int kUpShapeKeys = 3;
constexpr const char* kShapeKeys[] = {"batch",    "seqlen_q",  "seqlen_k", "h_q",     "h_kv",    "qpk",
                                      "head_dim", "dtype",     "page_size", "causal", "block_n", "nblk"};
constexpr int kNumShapeKeys = static_cast<int>(std::size(kShapeKeys));
constexpr int kUpDtypes = kUpShapeKeys + kNumShapeKeys;  // indexed by Dtype's value
constexpr Dtype kDtypes[] = {Dtype::bf16, Dtype::fp16, Dtype::fp8};
constexpr int kNumUpvalues = kUpDtypes + static_cast<int>(std::size(kDtypes)) - 1;

constexpr std::size_t kMaxMessage = 300;  // characters of Lua's text kept in an error

struct CallContext {
  const Shape* shape;
  Features features;
  const DeviceInfo* new_hw;  // set when the cached hw view must be rebuilt
};

void set_shape_field(lua_State* L, int key, lua_Integer value) {
  lua_pushvalue(L, lua_upvalueindex(kUpShapeKeys + key));
  lua_pushinteger(L, value);
  lua_rawset(L, -3);
}

void push_shape(lua_State* L, const Shape& s, const Features& f) {
  lua_createtable(L, 0, kNumShapeKeys);
  set_shape_field(L, 0, s.batch);
  set_shape_field(L, 1, s.seqlen_q);
  set_shape_field(L, 2, s.seqlen_k);
  set_shape_field(L, 3, s.h_q);
  set_shape_field(L, 4, s.h_kv);
  set_shape_field(L, 5, f.qpk);
  set_shape_field(L, 6, s.head_dim);
  lua_pushvalue(L, lua_upvalueindex(kUpShapeKeys + 7));
  lua_pushvalue(L, lua_upvalueindex(kUpDtypes + static_cast<int>(s.dtype)));
  lua_rawset(L, -3);
  set_shape_field(L, 8, s.page_size);
  lua_pushvalue(L, lua_upvalueindex(kUpShapeKeys + 9));
  lua_pushboolean(L, s.causal);
  lua_rawset(L, -3);
  set_shape_field(L, 10, f.block_n);
  set_shape_field(L, 11, f.nblk);
}

// The hw table is the same for every call on one device, so it is built once
// and shared; read-only, so no call can leave anything in it for the next.
void push_device(lua_State* L, const DeviceInfo& hw) {
  lua_createtable(L, 0, 5);
  lua_pushlstring(L, hw.name.data(), hw.name.size());
  lua_setfield(L, -2, "name");
  lua_pushinteger(L, hw.num_sms);
  lua_setfield(L, -2, "num_sms");
  lua_pushinteger(L, hw.l2_bytes);
  lua_setfield(L, -2, "l2_bytes");
  lua_pushnumber(L, hw.mem_bw_bytes_per_s);
  lua_setfield(L, -2, "mem_bw_bytes_per_s");
  lua_pushinteger(L, hw.cc);
  lua_setfield(L, -2, "cc");
  lua::make_read_only(L, "hw");
}

// Runs under lua_pcall: builds s (and hw when the device changed), calls dispatch.
int call_dispatch(lua_State* L) {
  const auto* ctx = static_cast<const CallContext*>(lua_touserdata(L, 1));
  lua_pushvalue(L, lua_upvalueindex(kUpDispatch));
  push_shape(L, *ctx->shape, ctx->features);
  if (ctx->new_hw != nullptr) {
    push_device(L, *ctx->new_hw);
    lua_copy(L, -1, lua_upvalueindex(kUpHw));
  } else {
    lua_pushvalue(L, lua_upvalueindex(kUpHw));
  }
  lua_call(L, 2, 1);
  return 1;
}

// Runs under lua_pcall on an empty state; returns the kBase fixed slots.
int setup(lua_State* L) {
  lua_pushcfunction(L, lua::Sandbox::message_handler);
  lua_pushnil(L);  // dispatch: set once the chunk has defined it
  lua_pushnil(L);  // hw view: built by the first call
  for (const char* key : kShapeKeys) lua_pushstring(L, key);
  for (Dtype d : kDtypes) lua_pushlstring(L, to_string(d).data(), to_string(d).size());
  lua_pushcclosure(L, call_dispatch, kNumUpvalues);
  lua_pushnil(L);  // the chunk
  lua::push_environment(L);
  lua_pushliteral(L, "num_splits");
  lua_pushliteral(L, "pack_gqa");
  lua_pushliteral(L, "sm_margin");
  // Generational mode suits what a dispatch call leaves behind (two small
  // tables, dead at once): minor collections free them cheaply.
  lua_gc(L, LUA_GCGEN, 0, 0);
  return kBase;
}

// Runs under lua_pcall after the chunk: returns the raw global `dispatch` and
// freezes the environment (argument 1).
int finish_load(lua_State* L) {
  lua_pushliteral(L, "dispatch");
  lua_rawget(L, 1);
  lua::freeze_environment(L, 1);
  return 1;
}

// True when the chunk's _ENV upvalue (shared by every function the chunk
// defined) still is the sandbox's table; puts it back when it is not.
bool restore_env(lua_State* L) {
  lua_getupvalue(L, kChunk, 1);
  const bool intact = lua_rawequal(L, -1, kEnv);
  lua_pop(L, 1);
  if (!intact) {
    lua_pushvalue(L, kEnv);
    lua_setupvalue(L, kChunk, 1);
  }
  return intact;
}

// Errors are single lines: newlines and other control characters from Lua's
// text (or the script's own error() text) become spaces or '?'.
std::string one_line(std::string_view text, std::size_t cap = std::string::npos) {
  std::string out;
  out.reserve(std::min(text.size(), cap));
  for (char c : text) {
    if (out.size() >= cap) {
      out.replace(out.size() - 3, 3, "...");
      break;
    }
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\r' || c == '\t') out += ' ';
    else if (u < 0x20 || u == 0x7f) out += '?';
    else out += c;
  }
  return out;
}

std::string format_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.14g", v);
  return buf;
}

// A Lua value in an error message, without calling anything that may raise.
std::string describe_value(lua_State* L, int idx) {
  switch (lua_type(L, idx)) {
    case LUA_TNUMBER:
      return lua_isinteger(L, idx) ? std::to_string(lua_tointeger(L, idx)) : format_number(lua_tonumber(L, idx));
    case LUA_TSTRING: {
      std::size_t len = 0;
      const char* s = lua_tolstring(L, idx, &len);
      return "string \"" + one_line({s, len}, 40) + "\"";
    }
    case LUA_TBOOLEAN: return lua_toboolean(L, idx) ? "boolean true" : "boolean false";
    default: return std::string("a ") + luaL_typename(L, idx);
  }
}

std::string describe_key(lua_State* L, int idx) {
  if (lua_type(L, idx) == LUA_TSTRING) {
    std::size_t len = 0;
    const char* s = lua_tolstring(L, idx, &len);
    return "'" + one_line({s, len}, 40) + "'";
  }
  if (lua_type(L, idx) == LUA_TNUMBER || lua_type(L, idx) == LUA_TBOOLEAN) {
    std::string v = describe_value(L, idx);
    if (lua_type(L, idx) == LUA_TBOOLEAN) v = v.substr(v.find(' ') + 1);
    return "[" + v + "]";
  }
  return std::string("[") + luaL_typename(L, idx) + " key]";
}

// An integer-valued number in [lo, hi]; 3.0 counts as 3.
std::optional<std::string> read_integer(lua_State* L, int idx, const char* field, int lo, int hi, int& out) {
  bool ok = false;
  if (lua_type(L, idx) == LUA_TNUMBER) {
    if (lua_isinteger(L, idx)) {
      const lua_Integer v = lua_tointeger(L, idx);
      ok = v >= lo && v <= hi;
      if (ok) out = static_cast<int>(v);
    } else {
      const double v = lua_tonumber(L, idx);
      ok = std::isfinite(v) && v == std::floor(v) && v >= lo && v <= hi;
      if (ok) out = static_cast<int>(v);
    }
  }
  if (ok) return std::nullopt;
  return std::string(field) + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
         "], got " + describe_value(L, idx);
}

// Where Lua put "<chunkid>:<line>:" in front of a message.
struct Located {
  int line = 0;
  std::string_view text;
};

Located split_position(std::string_view msg, std::string_view chunkid) {
  Located out{0, msg};
  if (msg.size() <= chunkid.size() + 1 || msg.substr(0, chunkid.size()) != chunkid || msg[chunkid.size()] != ':')
    return out;
  std::size_t i = chunkid.size() + 1;
  int line = 0;
  const std::size_t digits_from = i;
  while (i < msg.size() && msg[i] >= '0' && msg[i] <= '9' && line < 100'000'000) line = line * 10 + (msg[i++] - '0');
  if (i == digits_from || i >= msg.size() || msg[i] != ':') return out;
  ++i;
  if (i < msg.size() && msg[i] == ' ') ++i;
  return {line, msg.substr(i)};
}

// The name Lua uses for a chunk called "=" + name (luaO_chunkid: at most
// LUA_IDSIZE - 1 characters).
std::string chunk_id(const std::string& name) {
  const std::string c_name = name.c_str();  // Lua stops at an embedded NUL
  return c_name.size() + 1 <= LUA_IDSIZE ? c_name : c_name.substr(0, LUA_IDSIZE - 1);
}

}  // namespace

struct DispatchScript::State {
  std::string name;
  std::string chunkid;
  std::unique_ptr<lua::Sandbox> sandbox;
  int dispatch_line = 0;  // where `function dispatch` starts, for errors Lua gives no line for
  const char* key_num_splits = nullptr;
  const char* key_pack_gqa = nullptr;
  const char* key_sm_margin = nullptr;
  DeviceInfo hw;  // the device the cached hw view describes
  bool hw_cached = false;

  struct Failure {
    int line = 0;
    std::string text;
  };

  // What went wrong in a lua_pcall that returned `status` (error object on top).
  Failure failure(int status) const {
    lua_State* L = sandbox->state();
    const std::string budget = std::to_string(sandbox->limits().max_instructions);
    switch (sandbox->stop()) {
      case lua::Stop::instructions:
        return {sandbox->error_line(), "instruction budget of " + budget + " exceeded"};
      case lua::Stop::time:
        return {sandbox->error_line(), "CPU time budget of " + std::to_string(sandbox->time_limit().count()) +
                                           " ms exceeded (instruction budget " + budget + ")"};
      case lua::Stop::none: break;
    }
    if (status == LUA_ERRMEM || (status == LUA_ERRERR && sandbox->memory_refused())) {
      if (sandbox->string_refused())
        return {0, "string longer than " + std::to_string(sandbox->max_string_bytes()) +
                       " bytes refused (the sandbox's string limit)"};
      return {0, "memory budget of " + std::to_string(sandbox->limits().max_memory_bytes) + " bytes exceeded"};
    }
    std::string_view msg = "error object is not a string";
    if (lua_type(L, -1) == LUA_TSTRING) {
      std::size_t len = 0;
      const char* s = lua_tolstring(L, -1, &len);
      msg = {s, len};
    }
    const Located at = split_position(msg, chunkid);
    return {at.line > 0 ? at.line : sandbox->error_line(), one_line(at.text, kMaxMessage)};
  }

  std::string located(int line, const std::string& text) const {
    std::string out = one_line(name);
    if (line > 0) out += ":" + std::to_string(line);
    return out + ": " + text;
  }

  [[noreturn]] void fail_load(int status) const {
    const Failure f = failure(status);
    throw InputError(located(f.line, f.text));
  }

  std::string dispatch_error(int line, const std::string& text, const Shape& shape) const {
    return located(line > 0 ? line : dispatch_line, one_line(text, kMaxMessage)) + " (shape: " + describe(shape) +
           ")";
  }

  std::optional<std::string> read_decision(lua_State* L, const Shape& shape, const DeviceInfo& hw,
                                           Decision& out) const;
};

// Reads the table dispatch returned (on top of the stack). One pass with
// lua_next; problems are reported in a fixed order (unknown field, num_splits,
// pack_gqa, sm_margin) so the message does not depend on hash order.
std::optional<std::string> DispatchScript::State::read_decision(lua_State* L, const Shape& shape,
                                                                const DeviceInfo& hw, Decision& out) const {
  const int t = lua_gettop(L);
  if (lua_type(L, t) != LUA_TTABLE)
    return std::string("dispatch must return a table {num_splits=, pack_gqa=, sm_margin=}, got ") +
           luaL_typename(L, t);
  const int max_margin = hw.num_sms > 0 ? hw.num_sms - 1 : std::numeric_limits<int>::max();
  Decision d;
  bool have_splits = false;
  std::optional<std::string> unknown, bad_splits, bad_pack, bad_margin;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    const char* key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : nullptr;
    if (key == key_num_splits) {
      have_splits = true;
      bad_splits = read_integer(L, -1, "num_splits", 1, kMaxSplits, d.num_splits);
    } else if (key == key_pack_gqa) {
      if (lua_type(L, -1) == LUA_TBOOLEAN) d.pack_gqa = lua_toboolean(L, -1) != 0;
      else bad_pack = "pack_gqa must be a boolean, got " + describe_value(L, -1);
    } else if (key == key_sm_margin) {
      bad_margin = read_integer(L, -1, "sm_margin", 0, max_margin, d.sm_margin);
    } else {
      std::string k = describe_key(L, -2);
      if (!unknown || k < *unknown) unknown = std::move(k);
    }
    lua_pop(L, 1);
  }
  if (unknown)
    return "dispatch returned unknown field " + *unknown + " (allowed: num_splits, pack_gqa, sm_margin)";
  if (!have_splits) return std::string("dispatch returned no num_splits");
  for (auto* bad : {&bad_splits, &bad_pack, &bad_margin})
    if (*bad) return *bad;
  if (auto why = decision_error(d, hw)) return why;
  out = resolve(d, shape);
  return std::nullopt;
}

std::unique_ptr<DispatchScript> DispatchScript::load(std::string name, std::string_view source,
                                                     const SandboxLimits& limits) {
  auto st = std::make_unique<State>();
  st->name = std::move(name);
  st->chunkid = chunk_id(st->name);
  const std::string no_room = st->located(0, "the memory budget of " + std::to_string(limits.max_memory_bytes) +
                                                 " bytes cannot hold the sandbox itself");
  st->sandbox = lua::Sandbox::create(limits);
  if (!st->sandbox) throw InputError(no_room);
  lua_State* L = st->sandbox->state();
  lua_pushcfunction(L, setup);
  if (lua_pcall(L, 0, kBase, 0) != LUA_OK) throw InputError(no_room);
  st->key_num_splits = lua_tostring(L, kKeyNumSplits);
  st->key_pack_gqa = lua_tostring(L, kKeyPackGqa);
  st->key_sm_margin = lua_tostring(L, kKeySmMargin);

  // Mode "t" already refuses bytecode; saying so in our words is clearer.
  if (!source.empty() && source.front() == LUA_SIGNATURE[0])
    throw InputError(st->located(0, "binary (precompiled) chunk refused: only Lua source text is accepted"));
  st->sandbox->begin_run();
  const std::string chunkname = "=" + st->name;
  int status = luaL_loadbufferx(L, source.data(), source.size(), chunkname.c_str(), "t");
  if (status != LUA_OK) st->fail_load(status);
  lua_replace(L, kChunk);
  lua_pushvalue(L, kEnv);
  lua_setupvalue(L, kChunk, 1);

  st->sandbox->begin_run();
  lua_pushvalue(L, kChunk);
  status = lua_pcall(L, 0, 0, kMsgh);
  if (status != LUA_OK) st->fail_load(status);
  if (!restore_env(L))
    throw InputError(st->located(0, "the chunk assigned _ENV; a dispatch script must keep its environment"));

  lua_pushcfunction(L, finish_load);
  lua_pushvalue(L, kEnv);
  status = lua_pcall(L, 1, 1, kMsgh);
  if (status != LUA_OK) st->fail_load(status);
  if (lua_type(L, -1) != LUA_TFUNCTION) {
    std::string what = "no dispatch function";
    if (!lua_isnil(L, -1)) what += std::string(" (global 'dispatch' is a ") + luaL_typename(L, -1) + ")";
    throw InputError(st->located(0, what));
  }
  lua_Debug ar;
  lua_pushvalue(L, -1);
  lua_getinfo(L, ">S", &ar);
  st->dispatch_line = ar.linedefined;
  lua_setupvalue(L, kTrampoline, kUpDispatch);
  lua_settop(L, kBase);
  return std::unique_ptr<DispatchScript>(new DispatchScript(std::move(st)));
}

DispatchScript::DispatchScript(std::unique_ptr<State> state) : state_(std::move(state)) {}
DispatchScript::~DispatchScript() = default;

const std::string& DispatchScript::name() const { return state_->name; }

DispatchOutcome DispatchScript::dispatch(const Shape& shape, const DeviceInfo& hw) {
  State& st = *state_;
  lua_State* L = st.sandbox->state();
  const bool new_hw = !st.hw_cached || st.hw != hw;
  if (new_hw) st.hw_cached = false;
  CallContext ctx{&shape, features(shape), new_hw ? &hw : nullptr};

  lua_settop(L, kBase);
  lua_pushvalue(L, kTrampoline);
  lua_pushlightuserdata(L, &ctx);
  st.sandbox->begin_run();
  const int status = lua_pcall(L, 1, 1, kMsgh);
  const bool env_intact = restore_env(L);

  DispatchOutcome out;
  if (status != LUA_OK) {
    const State::Failure f = st.failure(status);
    out.error = st.dispatch_error(f.line, f.text, shape);
  } else if (!env_intact) {
    out.error = st.dispatch_error(0, "dispatch must be pure: it assigned _ENV", shape);
  } else if (auto why = st.read_decision(L, shape, hw, out.decision)) {
    out.error = st.dispatch_error(0, *why, shape);
  } else if (new_hw) {
    st.hw = hw;
    st.hw_cached = true;
  }
  lua_settop(L, kBase);
  return out;
}

}  // namespace evodispatch
