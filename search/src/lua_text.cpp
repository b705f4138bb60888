#include <evodispatch/search/lua_text.hpp>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace evodispatch::search {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_alnum(char c) { return is_alpha(c) || is_digit(c); }

// At s[i] == '[': the level of a long bracket "[==[" (the number of '='), or -1.
int long_bracket_level(std::string_view s, std::size_t i) {
  std::size_t j = i + 1;
  while (j < s.size() && s[j] == '=') ++j;
  if (j < s.size() && s[j] == '[') return static_cast<int>(j - i - 1);
  return -1;
}

// One past the "]==]" closing a long bracket of `level` opened before `from`, or the end.
std::size_t long_bracket_end(std::string_view s, std::size_t from, int level) {
  const std::string close = "]" + std::string(static_cast<std::size_t>(level), '=') + "]";
  const std::size_t at = s.find(close, from);
  return at == std::string_view::npos ? s.size() : at + close.size();
}

std::size_t numeral_end(std::string_view s, std::size_t i) {
  const bool hex = s[i] == '0' && i + 1 < s.size() && (s[i + 1] == 'x' || s[i + 1] == 'X');
  const char e1 = hex ? 'p' : 'e';
  const char e2 = hex ? 'P' : 'E';
  if (hex) i += 2;
  while (i < s.size()) {
    const char c = s[i];
    if ((c == e1 || c == e2) && i + 1 < s.size() && (s[i + 1] == '+' || s[i + 1] == '-')) {
      i += 2;
    } else if (std::isxdigit(static_cast<unsigned char>(c)) || c == '.' || is_alnum(c)) {
      ++i;  // Lua reads the trailing alphanumerics too (and then rejects them)
    } else {
      break;
    }
  }
  return i;
}

}  // namespace

std::vector<LuaToken> lex_lua(std::string_view s) {
  std::vector<LuaToken> out;
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t begin = i;
    const char c = s[i];
    LuaToken::Kind kind = LuaToken::symbol;
    if (is_space(c)) {
      while (i < s.size() && is_space(s[i])) ++i;
      kind = LuaToken::space;
    } else if (c == '-' && i + 1 < s.size() && s[i + 1] == '-') {
      kind = LuaToken::comment;
      const int level = i + 2 < s.size() && s[i + 2] == '[' ? long_bracket_level(s, i + 2) : -1;
      if (level >= 0) {
        i = long_bracket_end(s, i + 2 + static_cast<std::size_t>(level) + 2, level);
      } else {
        while (i < s.size() && s[i] != '\n') ++i;
      }
    } else if (c == '[' && long_bracket_level(s, i) >= 0) {
      const int level = long_bracket_level(s, i);
      kind = LuaToken::string;
      i = long_bracket_end(s, i + static_cast<std::size_t>(level) + 2, level);
    } else if (c == '"' || c == '\'') {
      kind = LuaToken::string;
      ++i;
      while (i < s.size() && s[i] != c && s[i] != '\n') i += s[i] == '\\' ? 2 : 1;
      i = std::min(i + 1, s.size());
    } else if (is_digit(c) || (c == '.' && i + 1 < s.size() && is_digit(s[i + 1]))) {
      kind = LuaToken::number;
      i = numeral_end(s, i);
    } else if (is_alpha(c)) {
      kind = LuaToken::name;
      while (i < s.size() && is_alnum(s[i])) ++i;
    } else if (c == '.') {
      // "..", "..." are single symbols, so ".5" after them is not mistaken for a numeral.
      while (i < s.size() && s[i] == '.' && i - begin < 3) ++i;
    } else {
      ++i;
    }
    out.push_back({kind, begin, i});
  }
  return out;
}

std::string canonical_lua(std::string_view s) {
  const auto tokens = lex_lua(s);
  std::string out;
  out.reserve(s.size());
  // A run of spaces and comments between two tokens: its newline (if any) and the
  // indentation after the last one are all that is kept.
  bool in_gap = false, gap_newline = false;
  std::string gap_tail;  // spaces after the gap's last newline (or the whole gap)
  auto flush_gap = [&] {
    if (!in_gap) return;
    if (gap_newline) {
      if (!out.empty()) out += '\n';
      out += gap_tail;
    } else if (!out.empty()) {
      out += gap_tail.empty() ? std::string(" ") : gap_tail;
    }
    in_gap = gap_newline = false;
    gap_tail.clear();
  };
  for (const auto& t : tokens) {
    const std::string_view text = s.substr(t.begin, t.end - t.begin);
    if (t.kind == LuaToken::space || t.kind == LuaToken::comment) {
      in_gap = true;
      if (t.kind == LuaToken::comment) {
        // A comment separates tokens like a space; its own newlines do not start lines.
        if (!gap_newline) gap_tail = " ";
        continue;
      }
      const std::size_t nl = text.find_last_of('\n');
      if (nl != std::string_view::npos) {
        gap_newline = true;
        gap_tail.clear();
        for (char ch : text.substr(nl + 1))
          if (ch == ' ' || ch == '\t') gap_tail += ch;
      } else {
        gap_tail += text;
      }
      continue;
    }
    flush_gap();
    out += text;
  }
  out += '\n';
  return out;
}

std::vector<LuaToken> numeric_literals(std::string_view source) {
  std::vector<LuaToken> out;
  for (const auto& t : lex_lua(source)) {
    if (t.kind != LuaToken::number) continue;
    const std::string_view text = source.substr(t.begin, t.end - t.begin);
    if (text.size() > 1 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) continue;
    out.push_back(t);
  }
  return out;
}

std::optional<std::string> perturb_numeral(std::string_view literal, Rng& rng) {
  if (literal.empty() || literal.size() > 24) return std::nullopt;
  bool integer = true;
  for (char c : literal) {
    if (is_digit(c)) continue;
    if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') integer = false;
    else return std::nullopt;
  }
  const std::string text(literal);
  if (integer) {
    if (literal.size() > 15) return std::nullopt;
    const long long v = std::atoll(text.c_str());
    long long next = v;
    switch (rng.below(6)) {
      case 0: next = v - 2; break;
      case 1: next = v - 1; break;
      case 2: next = v + 1; break;
      case 3: next = v + 2; break;
      case 4: next = v * 2; break;
      default: next = v / 2; break;
    }
    if (next < 0) next = 0;
    if (next == v) next = v + 1;
    return std::to_string(next);
  }
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v)) return std::nullopt;
  // A factor close to 1 can round back to the same text; draw again (a few times).
  for (int attempt = 0; attempt < 8; ++attempt) {
    const double scaled = v * (0.8 + 0.45 * rng.real());
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", scaled);
    std::string out = buf;
    // Keep it a float literal: "2" would turn a float into an integer in Lua 5.4.
    if (out.find_first_of(".eEn") == std::string::npos) out += ".0";
    if (out != text) return out;
  }
  return std::nullopt;
}

std::optional<std::string> perturb_one_literal(std::string_view source, Rng& rng) {
  const auto literals = numeric_literals(source);
  if (literals.empty()) return std::nullopt;
  const LuaToken& t = literals[rng.below(literals.size())];
  auto replacement = perturb_numeral(source.substr(t.begin, t.end - t.begin), rng);
  if (!replacement) return std::nullopt;
  std::string out(source.substr(0, t.begin));
  out += *replacement;
  out += source.substr(t.end);
  return out;
}

}  // namespace evodispatch::search
