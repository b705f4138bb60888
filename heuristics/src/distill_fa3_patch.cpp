// The FA3 patch export of distill.hpp: a unified diff against FlashAttention-3's
// hopper/flash_api.cpp (and flash_api_stable.cpp) that adds hopper/evodispatch_heuristic.h
// and makes get_num_splits / get_pack_gqa return the distilled function's decision.
//
// The functions are found by their signature and the brace that closes them, never by
// line numbers, so the same code patches other FA3 commits whose bodies differ.
#include <evodispatch/heuristics/distill.hpp>
#include <evodispatch/heuristics/unified_diff.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace evodispatch::distill {

namespace {

constexpr std::string_view kHeaderName = "evodispatch_heuristic.h";
constexpr std::string_view kHeaderPath = "hopper/evodispatch_heuristic.h";
constexpr std::string_view kNumSplits = "inline int get_num_splits(Flash_fwd_params const& params)";
constexpr std::string_view kPackGqa = "inline bool get_pack_gqa(Flash_fwd_params const& params)";

// Where a function's body sits: the offsets of its '{' and of the matching '}'.
struct Body {
  std::size_t open = 0, close = 0;
};

bool only_blanks(std::string_view s) { return s.find_first_not_of(" \t") == std::string_view::npos; }

// The offset just past the comment or literal starting at `at`, or `at` when none starts
// there: braces inside them do not count.
std::size_t skip_comment_or_literal(std::string_view t, std::size_t at) {
  if (t.compare(at, 2, "//") == 0) {
    const std::size_t nl = t.find('\n', at);
    return nl == std::string_view::npos ? t.size() : nl;
  }
  if (t.compare(at, 2, "/*") == 0) {
    const std::size_t end = t.find("*/", at + 2);
    return end == std::string_view::npos ? t.size() : end + 2;
  }
  if (t[at] == '"' || t[at] == '\'') {
    std::size_t i = at + 1;
    while (i < t.size() && t[i] != t[at] && t[i] != '\n') i += t[i] == '\\' ? 2 : 1;
    return std::min(i + 1, t.size());
  }
  return at;
}

std::size_t matching_brace(std::string_view t, std::size_t open, const std::string& where) {
  int depth = 0;
  for (std::size_t i = open; i < t.size();) {
    if (const std::size_t past = skip_comment_or_literal(t, i); past != i) {
      i = past;
      continue;
    }
    if (t[i] == '{') ++depth;
    if (t[i] == '}' && --depth == 0) return i;
    ++i;
  }
  throw InputError(where + ": the body has no closing brace");
}

// The definition of `signature`: at the start of a line, followed by '{' (a declaration,
// followed by ';', is passed over).
Body find_body(std::string_view text, std::string_view signature, const std::string& file) {
  const std::string where = file + ": `" + std::string(signature) + "`";
  for (std::size_t at = text.find(signature); at != std::string_view::npos; at = text.find(signature, at + 1)) {
    const std::size_t nl = text.rfind('\n', at);
    const std::size_t line = nl == std::string_view::npos ? 0 : nl + 1;
    if (!only_blanks(text.substr(line, at - line))) continue;
    const std::size_t open = text.find_first_not_of(" \t\r\n", at + signature.size());
    if (open == std::string_view::npos || text[open] != '{') continue;
    return {open, matching_brace(text, open, where)};
  }
  throw InputError(where + " not found (no definition of it in this FA3 source; was it renamed?)");
}

// The directive name of a preprocessor line ("include", "ifdef", ...), else "".
std::string directive(std::string_view line) {
  const std::size_t hash = line.find_first_not_of(" \t");
  if (hash == std::string_view::npos || line[hash] != '#') return "";
  const std::size_t word = line.find_first_not_of(" \t", hash + 1);
  if (word == std::string_view::npos) return "";
  std::size_t end = word;
  while (end < line.size() && std::isalpha(static_cast<unsigned char>(line[end]))) ++end;
  return std::string(line.substr(word, end - word));
}

// The offset just past the last #include line before `before` that no #if encloses (an
// include inside #ifdef would hide ours whenever the condition is false).
std::size_t after_last_include(std::string_view text, std::size_t before, const std::string& file) {
  std::size_t found = std::string_view::npos;
  int depth = 0;
  for (std::size_t at = 0; at < before;) {
    const std::size_t nl = text.find('\n', at);
    const std::size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    const std::string d = directive(text.substr(at, end - at));
    if (d == "if" || d == "ifdef" || d == "ifndef") ++depth;
    else if (d == "endif") --depth;
    else if (d == "include" && depth == 0) found = end;
    at = end;
  }
  if (found == std::string_view::npos)
    throw InputError(file + ": no #include outside #if before get_pack_gqa / get_num_splits, to put ours after");
  return found;
}

std::string num_splits_body() {
  return "{\n"
         "    // Patched by evodispatch distill (fa3.patch): the distilled heuristic of\n"
         "    // evodispatch_heuristic.h decides. On the varlen / cache_seqlens path this is the\n"
         "    // upper bound that flash_prepare_scheduler.cu's dynamic split caps per request.\n"
         "    #ifdef FLASHATTENTION_DISABLE_SPLIT\n"
         "    return 1;\n"
         "    #else\n"
         "    return evodispatch_decide(params).num_splits;\n"
         "    #endif\n"
         "}";
}

std::string pack_gqa_body() {
  return "{\n"
         "    // Patched by evodispatch distill (fa3.patch). FA3 compiles only packed kernels for Sm8x,\n"
         "    // paged KV without TMA and split KV (params.num_splits is set before this call), so\n"
         "    // there it must pack whatever the heuristic says.\n"
         "    if (params.arch < 90 || (params.page_table && !params.pagedkv_tma) || params.num_splits > 1) { return true; }\n"
         "    #ifdef FLASHATTENTION_DISABLE_PACKGQA\n"
         "    return false;\n"
         "    #else\n"
         "    return evodispatch_decide(params).pack_gqa != 0;\n"
         "    #endif\n"
         "}";
}

std::string replace_body(const std::string& text, const Body& b, const std::string& body) {
  return text.substr(0, b.open) + body + text.substr(b.close + 1);
}

// The FA3 file with both functions rewritten and our header included.
std::string patched_source(const std::string& file, const std::string& text) {
  if (text.find(kHeaderName) != std::string::npos)
    throw InputError(file + ": already includes evodispatch_heuristic.h (give an unpatched FA3 source)");
  const Body pack = find_body(text, kPackGqa, file);
  const Body splits = find_body(text, kNumSplits, file);
  const std::size_t include_at = after_last_include(text, std::min(pack.open, splits.open), file);
  // Later offsets first, so earlier ones stay valid.
  std::string out = text;
  const bool pack_later = pack.open > splits.open;
  out = replace_body(out, pack_later ? pack : splits, pack_later ? pack_gqa_body() : num_splits_body());
  out = replace_body(out, pack_later ? splits : pack, pack_later ? num_splits_body() : pack_gqa_body());
  return out.insert(include_at, "#include \"evodispatch_heuristic.h\"  // evodispatch distill (fa3.patch)\n");
}

std::string adapter() {
  return R"CPP(
// ---- the adapter FA3's get_num_splits / get_pack_gqa call ----------------------------
// FA3's forward params as the distilled function's inputs. A template, so this header
// needs nothing of FA3's; flash_api.cpp includes it after flash.h (Flash_fwd_params).
template <class Params>
inline evodispatch::distilled::Decision evodispatch_decide(Params const& params) {
    evodispatch::distilled::Shape s;
    s.batch = params.b;
    s.seqlen_q = params.seqlen_q;
    s.seqlen_k = params.seqlen_k;
    s.h_q = params.h;
    s.h_kv = params.h_k;
    s.head_dim = params.d;
    s.dtype = params.is_e4m3 ? 2 : (params.is_bf16 ? 0 : 1);
    s.page_size = params.page_table ? params.page_size : 0;  // FA3 sets page_size 1 when not paged
    s.causal = params.is_causal ? 1 : 0;
    evodispatch::distilled::DeviceInfo hw;
    hw.num_sms = params.num_sm;  // already less the sm_margin FA3's caller passed
    hw.cc = params.arch;
    return evodispatch::distilled::dispatch(s, hw);
}
)CPP";
}

std::string heuristic_header(const DecisionFunction& fn, const std::string& commit) {
  return "// " + std::string(kHeaderPath) + ": added by fa3.patch (evodispatch distill), made against\n" +
         "// FlashAttention-3 commit " + commit + ". The distilled heuristic (the same as heuristic.hpp)\n" +
         "// and evodispatch_decide(params), which flash_api.cpp's get_num_splits / get_pack_gqa call.\n" +
         emit_cpp_header(fn) + adapter();
}

// The rules (and the latency model) whose sm_margin the patch cannot apply.
std::string margin_setters(const DecisionFunction& fn) {
  std::string out;
  for (std::size_t i = 0; i < fn.rules.size(); ++i)
    if (fn.rules[i].sm_margin != 0)
      out += (out.empty() ? "" : ", ") + ("rule " + std::to_string(i + 1) + " (sm_margin " +
                                         std::to_string(fn.rules[i].sm_margin) + ")");
  if (fn.model)
    for (int m : fn.model->sm_margins)
      if (m != 0) {
        out += (out.empty() ? "" : ", ") + std::string("the latency model (it may choose a margin)");
        break;
      }
  return out.empty() ? "none" : out;
}

std::string scalar(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// The provenance in one line: what was distilled, from where, for which device.
std::string provenance_line(const DecisionFunction& fn) {
  std::string out = fn.method + ", fallback " + std::string(name(fn.fallback)) + ", " +
                    std::to_string(fn.rules.size()) + " rules";
  const auto& p = fn.provenance;
  for (const char* key : {"policy", "run", "program", "program_hash", "device_spec", "driver", "kernel_build"})
    if (p.is_object() && p.contains(key) && !p[key].is_null() && !p[key].is_structured())
      out += std::string("; ") + key + " " + scalar(p[key]);
  if (p.is_object() && p.contains("device") && p["device"].is_object()) {
    const auto& d = p["device"];
    out += "; device " + scalar(d.value("name", nlohmann::json("?"))) + " (" +
           scalar(d.value("num_sms", nlohmann::json("?"))) + " SMs, cc " + scalar(d.value("cc", nlohmann::json("?"))) + ")";
  }
  return out;
}

// The lines before the first "diff --git", which git apply ignores. Indented, so none can
// be read as a diff header.
std::string preamble(const DecisionFunction& fn, const std::string& commit, const std::vector<std::string>& files) {
  std::string list;
  for (const auto& f : files) list += (list.empty() ? "" : ", ") + f;
  std::ostringstream o;
  o << "evodispatch: distilled dispatch heuristic for FlashAttention-3 (fa3.patch)\n\n"
    << "  Generated by `evodispatch distill` (heuristic.json schema " << kSchemaVersion
    << "). Do not edit: distill again.\n"
    << "  Made against FlashAttention-3 commit " << commit << "\n    (" << list << ").\n"
    << "  Heuristic: " << provenance_line(fn) << "\n"
    << "  Apply: git -C flash-attention apply fa3.patch (git apply --check first), then rebuild hopper/.\n\n"
    << "  What it changes:\n"
    << "  * adds " << kHeaderPath << ": the distilled function (heuristic.hpp) and\n"
    << "    evodispatch_decide(params), which reads b, seqlen_q, seqlen_k, h, h_k, d, is_e4m3/is_bf16,\n"
    << "    page_table/page_size, is_causal, num_sm and arch from Flash_fwd_params;\n"
    << "  * get_num_splits returns the distilled num_splits (1 under FLASHATTENTION_DISABLE_SPLIT);\n"
    << "  * get_pack_gqa returns the distilled pack_gqa, except where FA3 must pack (arch < 90, paged KV\n"
    << "    without TMA, num_splits > 1: the only kernels compiled there are packed);\n"
    << "  * a num_splits > 0 or pack_gqa passed by the caller still wins: FA3 asks these functions only\n"
    << "    when they are not given.\n\n"
    << "  vLLM's path (get_scheduler_metadata, flash_attn_with_kvcache with cache_seqlens): there\n"
    << "  get_num_splits's result is only the upper bound that hopper/flash_prepare_scheduler.cu's\n"
    << "  dynamic split caps per request. Stock FA3 computes that bound pretending batch = 1\n"
    << "  (num_splits_dynamic_ptr is set); the patch sees the real batch (params.b).\n\n"
    << "  sm_margin: FA3 takes it from its caller (params.num_sm is already num SMs - sm_margin, and\n"
    << "  the distilled function sees that count); a rule's own sm_margin is not applied by the patch.\n"
    << "  Setting one: " << margin_setters(fn) << ".\n\n";
  return o.str();
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool is_commit_id(const std::string& s) {
  return s.size() >= 7 && s.size() <= 40 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// DIR's HEAD when DIR is the top of a git checkout (not a folder inside another repository).
std::optional<std::string> git_head(const std::filesystem::path& dir) {
  const std::string cmd = "git -C " + quote(dir.string()) + " rev-parse --show-toplevel HEAD 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return std::nullopt;
  std::string out;
  char buf[512];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  if (::pclose(p) != 0) return std::nullopt;
  std::istringstream lines(out);
  std::string top, head;
  std::getline(lines, top);
  std::getline(lines, head);
  std::error_code ec;
  if (!std::filesystem::equivalent(top, dir, ec) || ec || !is_commit_id(head)) return std::nullopt;
  return head;
}

std::optional<std::string> read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return std::nullopt;
  std::ostringstream o;
  o << f.rdbuf();
  if (f.bad()) throw InputError(p.string() + ": read failed");
  return o.str();
}

}  // namespace

std::string emit_fa3_patch(const DecisionFunction& fn, const std::map<std::string, std::string>& fa3_files,
                           const std::string& fa3_commit) {
  if (fa3_files.empty()) throw InputError("fa3 patch: no FA3 source file given (hopper/flash_api.cpp)");
  if (fa3_commit.empty()) throw InputError("fa3 patch: the FA3 commit it is made against is empty");
  std::vector<std::string> names;
  std::string diffs = new_file_diff(heuristic_header(fn, fa3_commit), std::string(kHeaderPath));
  for (const auto& [path, text] : fa3_files) {
    names.push_back(path);
    diffs += unified_diff(text, patched_source(path, text), path);
  }
  return preamble(fn, fa3_commit, names) + diffs;
}

Fa3Source read_fa3_source(const std::filesystem::path& dir, const std::string& commit_option) {
  Fa3Source src;
  for (const char* rel : {"hopper/flash_api.cpp", "hopper/flash_api_stable.cpp"}) {
    const std::filesystem::path p = dir / rel;
    if (auto text = read_text(p)) src.files[rel] = std::move(*text);
    else if (std::string(rel) == "hopper/flash_api.cpp")  // the stable-ABI twin is optional
      throw InputError("--fa3-source: cannot read " + p.string() + " (is " + dir.string() +
                       " a flash-attention checkout?)");
  }
  const std::optional<std::string> head = git_head(dir);
  if (!commit_option.empty() && !is_commit_id(commit_option))
    throw InputError("--fa3-commit: '" + commit_option + "' is not a commit id (7 to 40 lower-case hex digits)");
  if (head && !commit_option.empty() && head->rfind(commit_option, 0) != 0)
    throw InputError("--fa3-commit " + commit_option + " differs from " + dir.string() + "'s HEAD " + *head);
  if (!head && commit_option.empty())
    throw InputError("--fa3-source: " + dir.string() +
                     " is not a git checkout, so the FA3 commit it holds is unknown: give --fa3-commit SHA");
  src.commit = head ? *head : commit_option;
  return src;
}

void write_fa3_patch(const DecisionFunction& fn, const Fa3Source& src, const std::filesystem::path& dir) {
  const std::string patch = emit_fa3_patch(fn, src.files, src.commit);  // throws before writing anything
  std::filesystem::create_directories(dir);
  const std::filesystem::path final_path = dir / "fa3.patch", tmp = dir / "fa3.patch.tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << patch;
    if (!f.flush()) throw InputError("cannot write " + tmp.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, final_path, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(tmp, ec);
    throw InputError("cannot rename " + tmp.string() + " to " + final_path.string() + ": " + why);
  }
}

}  // namespace evodispatch::distill
