// The unified-diff writer (heuristics/unified_diff.hpp): exact output on small texts, and
// `git apply` of its diffs turning the old text into the new one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>

#include <evodispatch/heuristics/unified_diff.hpp>

#include "../support/run_command.hpp"
#include "../support/scratch.hpp"

using evodispatch::distill::new_file_diff;
using evodispatch::distill::unified_diff;

namespace {

std::string numbered(int from, int to) {
  std::string s;
  for (int i = from; i <= to; ++i) s += "line " + std::to_string(i) + "\n";
  return s;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

bool have_git() { return std::system("git --version >/dev/null 2>&1") == 0; }

// A fresh git repository with nothing committed (git apply patches its work tree).
std::filesystem::path git_repo(const evodispatch::test::ScratchDir& dir) {
  const auto r = evodispatch::test::run_command("git -C '" + dir.path().string() + "' init -q");
  EXPECT_EQ(r.code, 0) << r.err;
  return dir.path();
}

evodispatch::test::CommandResult git_apply(const std::filesystem::path& repo, const std::string& patch) {
  write(repo / "change.patch", patch);
  return evodispatch::test::run_command("git -C '" + repo.string() + "' apply change.patch");
}

}  // namespace

TEST(UnifiedDiff, EqualTextsGiveNothing) {
  EXPECT_EQ(unified_diff("a\nb\n", "a\nb\n", "f.txt"), "");
  EXPECT_EQ(unified_diff("", "", "f.txt"), "");
}

TEST(UnifiedDiff, OneChangedLineWithThreeLinesOfContext) {
  std::string changed = numbered(1, 10);
  changed.replace(changed.find("line 5\n"), 7, "five\n");
  EXPECT_EQ(unified_diff(numbered(1, 10), changed, "dir/f.txt"),
            "diff --git a/dir/f.txt b/dir/f.txt\n--- a/dir/f.txt\n+++ b/dir/f.txt\n"
            "@@ -2,7 +2,7 @@\n line 2\n line 3\n line 4\n-line 5\n+five\n line 6\n line 7\n line 8\n");
}

TEST(UnifiedDiff, HunksMergeWhenTheirContextsTouchAndSplitOtherwise) {
  // Changes at lines 2 and 8: 5 kept lines between, fewer than 2 * 3, one hunk.
  std::string near = numbered(1, 20);
  near.replace(near.find("line 2\n"), 7, "two\n");
  near.replace(near.find("line 8\n"), 7, "eight\n");
  const std::string one = unified_diff(numbered(1, 20), near, "f");
  EXPECT_NE(one.find("@@ -1,11 +1,11 @@\n"), std::string::npos) << one;
  // Changes at lines 2 and 18: two hunks; an inserted and a removed line shift the counts.
  std::string far = numbered(1, 20);
  far.insert(far.find("line 3\n"), "inserted\n");
  far.erase(far.find("line 18\n"), 8);
  const std::string two = unified_diff(numbered(1, 20), far, "f");
  EXPECT_NE(two.find("@@ -1,5 +1,6 @@\n line 1\n line 2\n+inserted\n line 3\n line 4\n line 5\n"), std::string::npos)
      << two;
  EXPECT_NE(two.find("@@ -15,6 +16,5 @@\n line 15\n line 16\n line 17\n-line 18\n line 19\n line 20\n"),
            std::string::npos)
      << two;
}

TEST(UnifiedDiff, MissingNewlineAtEndIsMarked) {
  EXPECT_EQ(unified_diff("a\nb", "a\nc", "f"),
            "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n"
            "\\ No newline at end of file\n");
  // Adding the newline is a change of the last line.
  EXPECT_EQ(unified_diff("a\nb", "a\nb\n", "f"),
            "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n");
}

TEST(UnifiedDiff, EmptyRangesNameTheLineBefore) {
  EXPECT_EQ(unified_diff("", "x\ny\n", "f"), "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -0,0 +1,2 @@\n+x\n+y\n");
  EXPECT_EQ(unified_diff("x\n", "", "f"), "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +0,0 @@\n-x\n");
  EXPECT_EQ(new_file_diff("only\n", "d/new.h"),
            "diff --git a/d/new.h b/d/new.h\nnew file mode 100644\n--- /dev/null\n+++ b/d/new.h\n@@ -0,0 +1 @@\n+only\n");
}

TEST(UnifiedDiff, GitApplyTurnsTheOldTextIntoTheNewOne) {
  if (!have_git()) GTEST_SKIP() << "git not installed";
  evodispatch::test::ScratchDir dir;
  const auto repo = git_repo(dir);
  // Seeded random edits (replace, insert, delete, runs of them, at the ends too) of a text
  // with repeated lines, which gives the line matcher ambiguous choices.
  std::mt19937 rng(7);
  for (int round = 0; round < 40; ++round) {
    std::vector<std::string> lines;
    const int n = static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) lines.push_back("l" + std::to_string(rng() % 12) + "\n");
    std::vector<std::string> changed = lines;
    for (int e = 0, edits = 1 + static_cast<int>(rng() % 6); e < edits; ++e) {
      const std::size_t at = changed.empty() ? 0 : rng() % (changed.size() + 1);
      const int kind = static_cast<int>(rng() % 3);
      if (kind == 0 || changed.empty()) changed.insert(changed.begin() + static_cast<long>(at), "new" + std::to_string(e) + "\n");
      else if (kind == 1 && at < changed.size()) changed.erase(changed.begin() + static_cast<long>(at));
      else if (at < changed.size()) changed[at] = "mod" + std::to_string(e) + "\n";
    }
    std::string old_text, new_text;
    for (const auto& l : lines) old_text += l;
    for (const auto& l : changed) new_text += l;
    if (round % 5 == 1 && !old_text.empty()) old_text.pop_back();  // no newline at the end
    if (round % 7 == 2 && !new_text.empty()) new_text.pop_back();
    const std::string patch = unified_diff(old_text, new_text, "sub/file.txt");
    if (old_text == new_text) {
      EXPECT_EQ(patch, "");
      continue;
    }
    write(repo / "sub/file.txt", old_text);
    const auto r = git_apply(repo, patch);
    ASSERT_EQ(r.code, 0) << "round " << round << ": " << r.err << "\n" << patch;
    ASSERT_EQ(slurp(repo / "sub/file.txt"), new_text) << "round " << round << "\n" << patch;
  }
  // A new file.
  const auto r = git_apply(repo, new_file_diff("a\nb", "made/here.txt"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(repo / "made/here.txt"), "a\nb");
}
