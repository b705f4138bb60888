// The unified-diff writer of unified_diff.hpp: Myers' shortest edit script over lines,
// grouped into hunks with context, in the text form `git apply` reads.
#include <evodispatch/heuristics/unified_diff.hpp>

#include <algorithm>
#include <span>
#include <vector>

namespace evodispatch::distill {

namespace {

using Lines = std::vector<std::string_view>;

// Each line keeps its '\n', so a last line without one differs from the same text with
// one, and the diff says which it is.
Lines split_lines(std::string_view text) {
  Lines out;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t nl = text.find('\n', at);
    const std::size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    out.push_back(text.substr(at, end - at));
    at = end;
  }
  return out;
}

enum class Op : char { keep = ' ', remove = '-', add = '+' };
struct Edit {
  Op op;
  std::string_view line;
};

// Myers' greedy algorithm (O((N+M)·D) time, O(D²) memory for D differing lines), with the
// diagonals -d-1..d+1 of every step d kept for the walk back.
std::vector<Edit> myers(std::span<const std::string_view> a, std::span<const std::string_view> b) {
  const int n = static_cast<int>(a.size()), m = static_cast<int>(b.size()), max = n + m, off = max + 1;
  std::vector<int> v(2 * static_cast<std::size_t>(max) + 3, 0);
  std::vector<std::vector<int>> trace;  // trace[d][j]: v[k = j - d - 1] before step d
  auto down = [&](const std::vector<int>& w, int k, int d) { return k == -d || (k != d && w[off + k - 1] < w[off + k + 1]); };
  int steps = 0;
  for (int d = 0; d <= max; ++d) {
    trace.emplace_back(v.begin() + (off - d - 1), v.begin() + (off + d + 2));
    bool reached = false;
    for (int k = -d; k <= d && !reached; k += 2) {
      int x = down(v, k, d) ? v[off + k + 1] : v[off + k - 1] + 1;
      int y = x - k;
      while (x < n && y < m && a[x] == b[y]) ++x, ++y;
      v[off + k] = x;
      reached = x >= n && y >= m;
    }
    if (reached) {
      steps = d;
      break;
    }
  }
  std::vector<Edit> rev;
  int x = n, y = m;
  for (int d = steps; d > 0; --d) {
    const std::vector<int>& t = trace[d];
    auto at = [&](int k) { return t[k + d + 1]; };
    const int k = x - y;
    const int pk = (k == -d || (k != d && at(k - 1) < at(k + 1))) ? k + 1 : k - 1;
    const int px = at(pk), py = px - pk;
    for (; x > px && y > py; --x, --y) rev.push_back({Op::keep, a[x - 1]});
    if (x == px) rev.push_back({Op::add, b[--y]});
    else rev.push_back({Op::remove, a[--x]});
    x = px;
    y = py;
  }
  for (; x > 0 && y > 0; --x, --y) rev.push_back({Op::keep, a[x - 1]});
  return {rev.rbegin(), rev.rend()};
}

// Within each run of changes, removals first (as git prints them; git apply takes either).
void removals_first(std::vector<Edit>& edits) {
  for (auto it = edits.begin(); it != edits.end();) {
    if (it->op == Op::keep) {
      ++it;
      continue;
    }
    auto end = std::find_if(it, edits.end(), [](const Edit& e) { return e.op == Op::keep; });
    std::stable_partition(it, end, [](const Edit& e) { return e.op == Op::remove; });
    it = end;
  }
}

// The common prefix and suffix are kept as they are, so Myers only sees the changed middle.
std::vector<Edit> edit_script(const Lines& a, const Lines& b) {
  std::size_t pre = 0, suf = 0;
  while (pre < a.size() && pre < b.size() && a[pre] == b[pre]) ++pre;
  while (suf < a.size() - pre && suf < b.size() - pre && a[a.size() - 1 - suf] == b[b.size() - 1 - suf]) ++suf;
  std::vector<Edit> out;
  for (std::size_t i = 0; i < pre; ++i) out.push_back({Op::keep, a[i]});
  const std::span<const std::string_view> sa(a), sb(b);
  for (const Edit& e : myers(sa.subspan(pre, a.size() - pre - suf), sb.subspan(pre, b.size() - pre - suf)))
    out.push_back(e);
  for (std::size_t i = a.size() - suf; i < a.size(); ++i) out.push_back({Op::keep, a[i]});
  removals_first(out);
  return out;
}

// "-a,b" as GNU diff writes it: ",1" left out; an empty range names the line before it.
std::string range(char sign, std::size_t before, std::size_t count) {
  const std::size_t start = count == 0 ? before : before + 1;
  return std::string(1, sign) + std::to_string(start) + (count == 1 ? "" : "," + std::to_string(count));
}

void append_line(std::string& out, Op op, std::string_view line) {
  out += static_cast<char>(op);
  out += line;
  if (line.empty() || line.back() != '\n') out += "\n\\ No newline at end of file\n";
}

// One hunk: edits [begin, end), with `old_before` / `new_before` lines ahead of it.
void append_hunk(std::string& out, const std::vector<Edit>& edits, std::size_t begin, std::size_t end,
                 std::size_t old_before, std::size_t new_before) {
  std::size_t old_count = 0, new_count = 0;
  for (std::size_t i = begin; i < end; ++i) {
    old_count += edits[i].op != Op::add;
    new_count += edits[i].op != Op::remove;
  }
  out += "@@ " + range('-', old_before, old_count) + " " + range('+', new_before, new_count) + " @@\n";
  for (std::size_t i = begin; i < end; ++i) append_line(out, edits[i].op, edits[i].line);
}

std::string hunks(const std::vector<Edit>& edits, std::size_t context) {
  // Lines of each side ahead of every edit, for the hunk headers.
  std::vector<std::size_t> old_at(edits.size() + 1, 0), new_at(edits.size() + 1, 0);
  for (std::size_t i = 0; i < edits.size(); ++i) {
    old_at[i + 1] = old_at[i] + (edits[i].op != Op::add);
    new_at[i + 1] = new_at[i] + (edits[i].op != Op::remove);
  }
  auto is_change = [&](std::size_t i) { return edits[i].op != Op::keep; };
  std::string out;
  for (std::size_t i = 0; i < edits.size();) {
    if (!is_change(i)) {
      ++i;
      continue;
    }
    const std::size_t begin = i >= context ? i - context : 0;
    std::size_t last = i;  // the hunk's last change; runs of at most 2 * context kept lines join
    for (std::size_t j = i + 1; j < edits.size();) {
      if (is_change(j)) {
        last = j++;
        continue;
      }
      std::size_t run = 0;
      while (j + run < edits.size() && !is_change(j + run)) ++run;
      if (j + run == edits.size() || run > 2 * context) break;
      j += run;
    }
    const std::size_t end = std::min(edits.size(), last + 1 + context);
    append_hunk(out, edits, begin, end, old_at[begin], new_at[begin]);
    i = end;
  }
  return out;
}

}  // namespace

std::string unified_diff(std::string_view old_text, std::string_view new_text, const std::string& path, int context) {
  if (old_text == new_text) return "";
  const std::string body = hunks(edit_script(split_lines(old_text), split_lines(new_text)),
                                 static_cast<std::size_t>(std::max(0, context)));
  return "diff --git a/" + path + " b/" + path + "\n--- a/" + path + "\n+++ b/" + path + "\n" + body;
}

std::string new_file_diff(std::string_view text, const std::string& path) {
  std::string out = "diff --git a/" + path + " b/" + path + "\nnew file mode 100644\n--- /dev/null\n+++ b/" + path + "\n";
  const Lines lines = split_lines(text);
  if (lines.empty()) return out;  // an empty new file has no hunk
  out += "@@ -0,0 " + range('+', 0, lines.size()) + " @@\n";
  for (std::string_view line : lines) append_line(out, Op::add, line);
  return out;
}

}  // namespace evodispatch::distill
