#pragma once
// Lexer-level work on Lua source: enough of Lua 5.4's lexical grammar (comments, short
// and long strings, numerals) to strip comments without touching string contents and to
// find the numeric literals that the literal-perturbation operator changes.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <evodispatch/search/rng.hpp>

namespace evodispatch::search {

struct LuaToken {
  enum Kind { comment, string, number, name, symbol, space };
  Kind kind;
  std::size_t begin;
  std::size_t end;  // one past the last character
};

// Splits source into tokens that cover it entirely. An unterminated string or comment
// becomes one token up to the end (the sandbox reports the syntax error later).
std::vector<LuaToken> lex_lua(std::string_view source);

// The canonical text of a script: comments removed, trailing spaces and blank lines
// dropped, the indentation and everything else kept; ends with one newline. Programs
// that differ only in comments or spacing get the same canonical text (and hash).
std::string canonical_lua(std::string_view source);

// The decimal numeric literals of a source (hexadecimal ones are left alone: they are
// bit patterns more often than tuning knobs).
std::vector<LuaToken> numeric_literals(std::string_view source);

// A new value for one literal: integers move by a small step or double / halve (never
// below 0), reals scale by 0.8 to 1.25 and keep a decimal point. nullopt when the text
// is not a decimal numeral.
std::optional<std::string> perturb_numeral(std::string_view literal, Rng& rng);

// Perturbs one literal chosen at random; nullopt when the source has none.
std::optional<std::string> perturb_one_literal(std::string_view source, Rng& rng);

}  // namespace evodispatch::search
