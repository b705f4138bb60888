#include "arguments.hpp"

#include <charconv>

#include <nlohmann/json.hpp>

#include "app.hpp"

namespace evodispatch::cli {

namespace {
std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

bool to_int(const std::string& s, int& out) {
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size() && !s.empty();
}
}  // namespace

std::vector<int> parse_int_list(const std::string& text, const std::string& option, int lo, int hi) {
  std::vector<int> out;
  const auto why_text = [&](const std::string& why) {
    return option + ": '" + text + "': " + why + " (e.g. 1..64, 1..64:2 or 1,2,4,8)";
  };
  const auto bad = [&](const std::string& why) { return UsageError(why_text(why)); };
  for (const auto& part : split(text, ',')) {
    int a = 0, b = 0, step = 1;
    const std::size_t dots = part.find("..");
    if (dots == std::string::npos) {
      if (!to_int(part, a)) throw bad("'" + part + "' is not an integer");
      b = a;
    } else {
      std::string rest = part.substr(dots + 2);
      if (const std::size_t colon = rest.find(':'); colon != std::string::npos) {
        if (!to_int(rest.substr(colon + 1), step) || step < 1) throw bad("bad step in '" + part + "'");
        rest = rest.substr(0, colon);
      }
      if (!to_int(part.substr(0, dots), a) || !to_int(rest, b) || b < a) throw bad("bad range '" + part + "'");
    }
    for (int v = a; v <= b; v += step) {
      if (v < lo || v > hi)
        throw InputError(why_text(std::to_string(v) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"));
      out.push_back(v);
    }
  }
  return out;
}

Shape parse_shape(const std::string& text, const std::string& option) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& field : split(text, ',')) {
    const std::size_t eq = field.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError(option + ": '" + field + "' is not name=value (e.g. batch=1,seqlen_k=512,h_q=64,h_kv=1)");
    const std::string name = field.substr(0, eq), value = field.substr(eq + 1);
    int number = 0;
    if (to_int(value, number)) j[name] = number;
    else if (value == "true" || value == "false") j[name] = value == "true";
    else j[name] = value;
  }
  return shape_from_json(j, option);
}

L2Mode parse_l2_option(const std::string& text, const std::string& option) {
  if (auto mode = parse_l2_mode(text)) return *mode;
  throw UsageError(option + ": must be cold or hot, got '" + text + "'");
}

std::vector<bool> parse_pack_choice(const std::string& text, const std::string& option, const Shape& shape) {
  if (text == "on") return {true};
  if (text == "off") return {false};
  if (text == "both") return features(shape).qpk > 1 ? std::vector<bool>{true, false} : std::vector<bool>{false};
  if (text == "auto") return {*resolve(Decision{}, shape).pack_gqa};
  throw UsageError(option + ": must be on, off, both or auto, got '" + text + "'");
}

}  // namespace evodispatch::cli
