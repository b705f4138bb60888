#pragma once
// A small unified-diff writer (the format `git apply` and `patch -p1` take), used by the
// FA3 patch export of `distill`. Line based: a line is its text with its '\n' (the last
// line may lack one, which the diff marks with "\ No newline at end of file").
#include <string>
#include <string_view>

namespace evodispatch::distill {

// The diff of `path` from `old_text` to `new_text`: "diff --git a/P b/P", "--- a/P",
// "+++ b/P", then hunks "@@ -a,b +c,d @@" with `context` unchanged lines around each
// change (hunks closer than 2 * context lines merge). "" when the texts are equal.
std::string unified_diff(std::string_view old_text, std::string_view new_text, const std::string& path,
                         int context = 3);

// The diff that creates `path` holding `text` ("new file mode 100644", "--- /dev/null").
std::string new_file_diff(std::string_view text, const std::string& path);

}  // namespace evodispatch::distill
