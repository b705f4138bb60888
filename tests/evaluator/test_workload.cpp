// Workload files: the shipped workloads of DESIGN.md §7, the format, and its errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>

#include <unistd.h>

#include <evodispatch/evaluator/workload.hpp>

namespace evodispatch {
namespace {

std::string error_of(const std::string& text, const std::string& source = "x.json") {
  try {
    parse_workload(text, source, "x");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// A file under the temp directory, removed when the test ends.
class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    static std::atomic<int> n{0};
    path_ = std::filesystem::temp_directory_path() /
            ("evo_workload_" + std::to_string(::getpid()) + "_" + std::to_string(n++) + ".json");
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

bool is_paper_default(const Shape& s) {
  return s.seqlen_q == 1 && s.head_dim == 128 && s.dtype == Dtype::bf16 && s.page_size == 0 &&
         s.h_q == std::max(s.h_kv, 64);
}

TEST(ShippedWorkloads, AreListed) {
  const auto names = workload_names();
  for (const char* want : {"cliff-8k", "paper-safety-160", "paper-table1", "paper-ucurve"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST(ShippedWorkloads, PaperTable1) {
  const Workload w = load_workload("paper-table1");
  EXPECT_EQ(w.name, "paper-table1");
  EXPECT_EQ(w.source, "workloads/paper-table1.json");
  EXPECT_FALSE(w.description.empty());
  ASSERT_EQ(w.shapes.size(), 18u);
  std::set<std::pair<int, int>> seen;
  for (const auto& s : w.shapes) {
    EXPECT_EQ(s.batch, 1);
    EXPECT_TRUE(is_paper_default(s)) << describe(s);
    seen.insert({s.h_kv, s.seqlen_k});
  }
  for (int h_kv : {1, 2, 8})
    for (int lk : {128, 256, 384, 512, 2048, 4096}) EXPECT_TRUE(seen.count({h_kv, lk})) << h_kv << " " << lk;
  // h_kv varies slower than seqlen_k.
  EXPECT_EQ(w.shapes[0], (Shape{1, 1, 128, 64, 1, 128, Dtype::bf16, 0, true}));
  EXPECT_EQ(w.shapes[3], (Shape{1, 1, 512, 64, 1, 128, Dtype::bf16, 0, true}));
  EXPECT_EQ(w.shapes[6].h_kv, 2);
  EXPECT_TRUE(w.split_sweep.empty());
}

TEST(ShippedWorkloads, PaperSafety160) {
  const Workload w = load_workload("paper-safety-160");
  ASSERT_EQ(w.shapes.size(), 160u);
  std::set<std::tuple<int, int, int>> seen;
  for (const auto& s : w.shapes) {
    EXPECT_TRUE(is_paper_default(s)) << describe(s);
    seen.insert({s.batch, s.h_kv, s.seqlen_k});
  }
  EXPECT_EQ(seen.size(), 160u);
  for (int b : {1, 2, 4, 8})
    for (int h_kv : {1, 2, 4, 8, 32})
      for (int lk : {128, 256, 384, 512, 1024, 2048, 4096, 8192}) EXPECT_TRUE(seen.count({b, h_kv, lk}));
  // Hq = max(Hkv, 64): 64 everywhere, the Hkv = 32 rows included (qpk 2).
  for (const auto& s : w.shapes) EXPECT_EQ(s.h_q, 64);
}

TEST(ShippedWorkloads, PaperUcurve) {
  const Workload w = load_workload("paper-ucurve");
  ASSERT_EQ(w.shapes.size(), 1u);
  EXPECT_EQ(w.shapes[0], (Shape{1, 1, 512, 64, 1, 128, Dtype::bf16, 0, true}));
  ASSERT_EQ(w.split_sweep.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(w.split_sweep[i], i + 1);
}

TEST(ShippedWorkloads, Cliff8k) {
  const Workload w = load_workload("cliff-8k");
  ASSERT_EQ(w.shapes.size(), 64u);
  for (int i = 0; i < 64; ++i) {
    const Shape& s = w.shapes[i];
    EXPECT_EQ(s, (Shape{i + 1, 1, 8192, 64, 8, 128, Dtype::bf16, 0, true}));
  }
}

TEST(WorkloadFormat, ProductsExpandInTheDocumentedOrder) {
  const Workload w = parse_workload(R"({
    "products": [ {"batch": [1, 2], "h_kv": [1, 4], "h_q": {"qpk": 8}, "seqlen_k": {"from": 128, "to": 512, "times": 2},
                   "dtype": ["bf16", "fp16"], "head_dim": 64} ]
  })", "t.json", "fallback");
  EXPECT_EQ(w.name, "fallback");
  ASSERT_EQ(w.shapes.size(), 2u * 2 * 3 * 2);
  // dtype varies fastest, batch slowest.
  EXPECT_EQ(w.shapes[0], (Shape{1, 1, 128, 8, 1, 64, Dtype::bf16, 0, true}));
  EXPECT_EQ(w.shapes[1], (Shape{1, 1, 128, 8, 1, 64, Dtype::fp16, 0, true}));
  EXPECT_EQ(w.shapes[2], (Shape{1, 1, 256, 8, 1, 64, Dtype::bf16, 0, true}));
  EXPECT_EQ(w.shapes[6], (Shape{1, 1, 128, 32, 4, 64, Dtype::bf16, 0, true}));
  EXPECT_EQ(w.shapes[12].batch, 2);
  EXPECT_EQ(w.shapes.back(), (Shape{2, 1, 512, 32, 4, 64, Dtype::fp16, 0, true}));
}

TEST(WorkloadFormat, RangesAndRules) {
  const Workload w = parse_workload(R"({
    "name": "ranges",
    "products": [ {"batch": {"from": 1, "to": 7, "step": 3}, "h_kv": {"from": 1, "to": 2},
                   "h_q": {"max_with_h_kv": 2}, "seqlen_k": 100, "seqlen_q": [1, 4], "causal": [true, false],
                   "page_size": 16} ]
  })", "t.json", "x");
  EXPECT_EQ(w.name, "ranges");
  ASSERT_EQ(w.shapes.size(), 3u * 2 * 2 * 2);  // batch 1, 4, 7
  std::set<int> batches;
  for (const auto& s : w.shapes) {
    batches.insert(s.batch);
    EXPECT_EQ(s.h_q, 2);
    EXPECT_EQ(s.page_size, 16);
  }
  EXPECT_EQ(batches, (std::set<int>{1, 4, 7}));
  EXPECT_FALSE(w.shapes[1].causal);
}

TEST(WorkloadFormat, ShapesFirstThenProductsWithoutDuplicates) {
  const Workload w = parse_workload(R"({
    "shapes": [ {"seqlen_k": 512, "h_q": 64, "h_kv": 1}, {"seqlen_k": 256, "h_q": 64, "h_kv": 1},
                {"seqlen_k": 512, "h_q": 64, "h_kv": 1, "batch": 1} ],
    "products": [ {"seqlen_k": [128, 256, 512], "h_q": 64, "h_kv": 1} ]
  })", "t.json", "x");
  ASSERT_EQ(w.shapes.size(), 3u);
  EXPECT_EQ(w.shapes[0].seqlen_k, 512);
  EXPECT_EQ(w.shapes[1].seqlen_k, 256);
  EXPECT_EQ(w.shapes[2].seqlen_k, 128);
}

TEST(WorkloadFormat, SweepRemovesDuplicatesInOrder) {
  const Workload w = parse_workload(R"({"shapes": [{"seqlen_k": 512, "h_q": 8}], "sweep": {"num_splits": [4, 1, 4, 2]}})",
                                    "t.json", "x");
  EXPECT_EQ(w.split_sweep, (std::vector<int>{4, 1, 2}));
}

TEST(WorkloadFormat, AFileOfShapesWorks) {
  TempFile f(R"({"shapes": [
    {"batch": 1, "seqlen_k": 512, "h_q": 64, "h_kv": 1, "head_dim": 128},
    {"batch": 2, "seqlen_k": 4096, "h_q": 32, "h_kv": 8, "head_dim": 64, "dtype": "fp16", "page_size": 256}
  ]})");
  const Workload w = load_workload(f.path());
  EXPECT_EQ(w.source, f.path());
  EXPECT_EQ(w.name, std::filesystem::path(f.path()).stem().string());
  ASSERT_EQ(w.shapes.size(), 2u);
  EXPECT_EQ(w.shapes[0], (Shape{1, 1, 512, 64, 1, 128, Dtype::bf16, 0, true}));
  EXPECT_EQ(w.shapes[1], (Shape{2, 1, 4096, 32, 8, 64, Dtype::fp16, 256, true}));
}

TEST(WorkloadErrors, NameTheFileAndTheJsonPath) {
  EXPECT_EQ(error_of(R"({"products": [{"batch": 1, "h_kv": [1, 2, "a"], "h_q": 64, "seqlen_k": 128}]})",
                     "workloads/x.json"),
            "workloads/x.json: $.products[0].h_kv[2]: expected an integer, got a string");
  EXPECT_EQ(error_of(R"({"shapes": [{"seqlen_k": 128, "h_q": 64}], "colour": "red"})"), "x.json: $.colour: unknown field");
  EXPECT_EQ(error_of(R"({"shapes": [{"seqlen_k": 128, "h_q": 64, "heads": 3}]})"), "x.json: $.shapes[0].heads: unknown field");
  EXPECT_EQ(error_of(R"({"products": [{"seqlen_k": 128, "h_q": 64, "batches": [1]}]})"),
            "x.json: $.products[0].batches: unknown field");
  EXPECT_EQ(error_of(R"({"shapes": [{"seqlen_k": 2.5, "h_q": 64}]})"),
            "x.json: $.shapes[0].seqlen_k: expected an integer, got 2.5");
  EXPECT_EQ(error_of(R"({"shapes": {"seqlen_k": 128}})"), "x.json: $.shapes: expected an array, got an object");
  EXPECT_EQ(error_of(R"([1, 2])"), "x.json: $: expected an object, got an array");
}

TEST(WorkloadErrors, BadDtype) {
  EXPECT_EQ(error_of(R"({"shapes": [{"seqlen_k": 128, "h_q": 64, "dtype": "fp32"}]})"),
            "x.json: $.shapes[0].dtype: must be \"bf16\", \"fp16\" or \"fp8\", got \"fp32\"");
  EXPECT_EQ(error_of(R"({"products": [{"seqlen_k": 128, "h_q": 64, "dtype": ["bf16", "int8"]}]})"),
            "x.json: $.products[0].dtype[1]: must be \"bf16\", \"fp16\" or \"fp8\", got \"int8\"");
}

TEST(WorkloadErrors, HqMustBeAMultipleOfHkv) {
  const std::string e = error_of(R"({"shapes": [{"seqlen_k": 128, "h_q": 64, "h_kv": 3}]})");
  EXPECT_EQ(e.rfind("x.json: $.shapes[0].h_q: must be a multiple of h_kv", 0), 0u) << e;
  // In a product the message also shows the offending combination.
  const std::string p = error_of(R"({"products": [{"seqlen_k": 128, "h_q": 64, "h_kv": [1, 3]}]})");
  EXPECT_EQ(p.rfind("x.json: $.products[0].h_q: must be a multiple of h_kv", 0), 0u) << p;
  EXPECT_NE(p.find("\"h_kv\":3"), std::string::npos) << p;
}

TEST(WorkloadErrors, SyntaxErrorsGiveLineAndColumn) {
  const std::string e = error_of("{\n  \"shapes\": [\n    {\"seqlen_k\": 128,, \"h_q\": 64}\n  ]\n}");
  EXPECT_EQ(e.rfind("x.json: line 3, column 22: invalid JSON", 0), 0u) << e;
  TempFile f("{\"shapes\": [}");
  try {
    load_workload(f.path());
    FAIL() << "no error";
  } catch (const InputError& err) {
    EXPECT_EQ(std::string(err.what()).rfind(f.path() + ": line 1, column 13: invalid JSON", 0), 0u) << err.what();
  }
}

TEST(WorkloadErrors, RangesListsAndRules) {
  EXPECT_EQ(error_of(R"({"products": [{"seqlen_k": {"from": 512, "to": 128}, "h_q": 8}]})"),
            "x.json: $.products[0].seqlen_k.to: must be >= from (512), got 128");
  EXPECT_EQ(error_of(R"({"products": [{"seqlen_k": {"from": 1, "to": 8, "step": 0}, "h_q": 8}]})"),
            "x.json: $.products[0].seqlen_k.step: must be >= 1, got 0");
  EXPECT_EQ(error_of(R"({"products": [{"seqlen_k": {"from": 1, "to": 8, "by": 2}, "h_q": 8}]})"),
            "x.json: $.products[0].seqlen_k.by: unknown field");
  EXPECT_EQ(error_of(R"({"products": [{"seqlen_k": [], "h_q": 8}]})"),
            "x.json: $.products[0].seqlen_k: an empty list gives no shapes");
  EXPECT_EQ(error_of(R"({"products": [{"seqlen_k": 128, "h_q": {"max_with_h_kv": 64}}]})"),
            "x.json: $.products[0].h_q: a rule in terms of h_kv needs h_kv in the same product");
  EXPECT_EQ(error_of(R"({"products": [{"seqlen_k": 128, "h_kv": 2, "h_q": {"max_with": 64}}]})"),
            "x.json: $.products[0].h_q.max_with: unknown field");
  EXPECT_EQ(error_of(R"({"products": [{"seqlen_k": {"from": 1, "to": 100000000}, "h_q": 8}]})"),
            "x.json: $.products[0].seqlen_k: more than 1048576 values");
  EXPECT_EQ(error_of(R"({"shapes": [{"seqlen_k": 1, "h_q": 8}], "sweep": {"num_splits": [1, 300]}})"),
            "x.json: $.sweep.num_splits[1]: must be in [1, 256], got 300");
  EXPECT_EQ(error_of(R"({"name": "empty"})"), "x.json: $: no shapes (give \"shapes\" or \"products\")");
  EXPECT_EQ(error_of(R"({"shapes": [{"h_q": 8}]})"), "x.json: $.shapes[0].seqlen_k: missing (an integer is required)");
}

TEST(WorkloadErrors, UnknownNameListsTheShippedOnes) {
  try {
    load_workload("paper-table2");
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown workload \"paper-table2\""), std::string::npos) << m;
    EXPECT_NE(m.find("cliff-8k, paper-safety-160, paper-table1, paper-ucurve"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace evodispatch
