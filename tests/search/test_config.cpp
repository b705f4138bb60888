// The search config: documented defaults, strict parsing, errors that name the path.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <evodispatch/search/config.hpp>

using namespace evodispatch;
using namespace evodispatch::search;

namespace {
std::string error_of(const std::string& text) {
  try {
    parse_search_config_text(text, "test.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST(SearchConfig, AnEmptyObjectGivesTheDocumentedDefaults) {
  const SearchConfig c = parse_search_config_text("{}", "empty");
  EXPECT_EQ(c.workload, "paper-safety-160");
  EXPECT_EQ(c.baseline, "fa3");
  EXPECT_EQ(c.fitness.floor, 0.99);
  EXPECT_EQ(c.split.validation_fraction, 0.3);
  EXPECT_EQ(c.islands.count, 4);
  EXPECT_EQ(c.oracle.max_splits, 64);
  EXPECT_EQ(c.oracle.pack_gqa, (std::vector<bool>{true, false}));
  EXPECT_EQ(c.stop.max_evaluations, 5000);
  EXPECT_EQ(c.features, FeatureSet::search_default());
  EXPECT_FALSE(c.features.contains(Feature::kv_kib));
  EXPECT_EQ(c.cascade.estimate, "auto");
}

TEST(SearchConfig, ShippedConfigsParseAndRoundTrip) {
  const auto names = search_config_names();
  ASSERT_NE(std::find(names.begin(), names.end(), "quickstart"), names.end());
  for (const auto& n : names) {
    const SearchConfig c = load_search_config(n);
    const SearchConfig again = parse_search_config(to_json(c), "round trip");
    EXPECT_EQ(to_json(again), to_json(c)) << n;
  }
  const SearchConfig q = load_search_config("quickstart");
  EXPECT_EQ(q.name, "quickstart");
  EXPECT_FALSE(q.features.contains(Feature::head_dim));
}

TEST(SearchConfig, OracleSplitsAreARangeOrAList) {
  EXPECT_EQ(parse_search_config_text(R"({"oracle": {"min_splits": 3, "max_splits": 5}})", "t").oracle.split_values(),
            (std::vector<int>{3, 4, 5}));
  const SearchConfig c = parse_search_config_text(R"({"oracle": {"splits": [8, 1, 2, 8]}})", "t");
  EXPECT_EQ(c.oracle.split_values(), (std::vector<int>{1, 2, 8}));
  EXPECT_EQ(to_json(parse_search_config(to_json(c), "round trip")), to_json(c));
  EXPECT_EQ(load_search_config("gpu-safety-160").oracle.split_values().size(), 10u);
}

TEST(SearchConfig, ErrorsNameTheJsonPath) {
  EXPECT_EQ(error_of(R"({"islands": {"cuont": 3}})"), "test.json: $.islands.cuont: unknown field");
  EXPECT_EQ(error_of(R"({"islands": {"count": 0}})"), "test.json: $.islands.count: must be in [1, 64], got 0");
  EXPECT_EQ(error_of(R"({"stop": {"max_evaluations": "lots"}})"),
            "test.json: $.stop.max_evaluations: expected an integer, got a string");
  EXPECT_EQ(error_of(R"({"features": ["batch", "heads"]})"),
            "test.json: $.features[1]: unknown feature \"heads\" (features: batch, seqlen_q, seqlen_k, h_q, h_kv, qpk, "
            "head_dim, nblk, page_size, ctas, num_sms, waves_pct, kv_kib)");
  EXPECT_EQ(error_of(R"({"fitness": {"floor": 1.5}})"), "test.json: $.fitness.floor: must be in [0, 1], got 1.5");
  EXPECT_EQ(error_of(R"({"archive": {"regions": [{"feature": "nblk", "edges": [8, 4]}]}})"),
            "test.json: $.archive.regions[0].edges[1]: edges must be strictly ascending");
  EXPECT_EQ(error_of(R"({"stop": {"max_evaluations": 0}})"),
            "test.json: $.stop: no stop condition: set max_evaluations, minutes, target_fitness or stagnation_steps");
  EXPECT_EQ(error_of(R"({"operators": {"external": 0.5}})"),
            "test.json: $.operators.external: is above 0 but $.external.command is empty");
  EXPECT_EQ(error_of(R"({"cascade": {"estimate": "gpu"}})"),
            "test.json: $.cascade.estimate: expected \"auto\", \"none\" or \"sim:PROFILE\", got \"gpu\"");
  EXPECT_EQ(error_of(R"({"oracle": {"splits": [1, 0]}})"), "test.json: $.oracle.splits[1]: must be in [1, 256], got 0");
  EXPECT_EQ(error_of(R"({"oracle": {"splits": [2], "max_splits": 8}})"),
            "test.json: $.oracle.splits: give either splits or min_splits / max_splits, not both");
  EXPECT_EQ(error_of(R"({"decisions": {"reach_percent": 50}})"),
            "test.json: $.decisions.reach_percent: must be 0 or a factor of at least 100 (percent), got 50");
  EXPECT_EQ(error_of(R"({"l2": "warm"})"), "test.json: $.l2: expected \"cold\" or \"hot\", got \"warm\"");
  EXPECT_EQ(error_of(R"({"external": {"command": ["sh", 3]}})"), "test.json: $.external.command[1]: expected a string, got 3");
  EXPECT_EQ(error_of("{\"seed\": 1,}"), error_of("{\"seed\": 1,}"));  // syntax errors name the line
  EXPECT_NE(error_of("{\"seed\": 1,}").find("test.json: line 1"), std::string::npos) << error_of("{\"seed\": 1,}");
}

TEST(SearchConfig, UnknownNamesListTheShippedConfigs) {
  try {
    load_search_config("no-such-config");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("quickstart"), std::string::npos) << e.what();
  }
}

TEST(SearchConfig, ListsAndChoicesNameTheirPath) {
  EXPECT_EQ(error_of(R"({"oracle": {"sm_margins": []}})"), "test.json: $.oracle.sm_margins: must not be empty");
  EXPECT_EQ(error_of(R"({"oracle": {"pack_gqa": [true, 1]}})"),
            "test.json: $.oracle.pack_gqa[1]: expected true or false, got 1");
  EXPECT_EQ(error_of(R"({"archive": {"rule_buckets": 4}})"),
            "test.json: $.archive.rule_buckets: expected an array of integers, got 4");
  EXPECT_EQ(error_of(R"({"sandbox": {"max_instructions": 10}})"),
            "test.json: $.sandbox.max_instructions: must be at least 1000, got 10");
  EXPECT_EQ(error_of(R"({"oracle": {"min_splits": 9, "max_splits": 8}})"),
            "test.json: $.oracle.min_splits: must not exceed max_splits (8)");
  EXPECT_EQ(error_of(R"({"final": {"elites": "yes"}})"), "test.json: $.final.elites: expected true or false, got a string");
  EXPECT_EQ(parse_search_config_text(R"({"cascade": {"estimate": "sim:a100"}})", "t").cascade.estimate, "sim:a100");
}

namespace {
// "section.field" for every field to_json writes.
std::vector<std::string> written_paths(const nlohmann::json& j) {
  std::vector<std::string> out;
  for (const auto& [key, value] : j.items()) {
    if (!value.is_object()) {
      out.push_back(key);
      continue;
    }
    for (const auto& [field, ignored] : value.items()) out.push_back(key + "." + field);
  }
  return out;
}
}  // namespace

TEST(SearchConfig, TheReferenceHasARowForEveryFieldWithItsDefault) {
  const std::string table = search_config_reference();
  EXPECT_EQ(table.rfind("| field | default | allowed | meaning |\n| --- | --- | --- | --- |\n", 0), 0u) << table;
  SearchConfig with_split_list;
  with_split_list.oracle.splits = {1, 2};
  for (const SearchConfig& c : {SearchConfig{}, with_split_list})
    for (const auto& path : written_paths(to_json(c)))
      EXPECT_NE(table.find("\n| `" + path + "` |"), std::string::npos) << path;
  EXPECT_NE(table.find("\n| `fitness.floor` | `0.99` | number in [0, 1] |"), std::string::npos) << table;
  EXPECT_NE(table.find("\n| `islands.count` | `4` | integer in [1, 64] |"), std::string::npos) << table;
}

namespace {
std::string without_blank_edges(std::string s) {
  s.erase(0, s.find_first_not_of("\n"));
  s.erase(s.find_last_not_of(" \n") + 1);
  return s + "\n";
}
}  // namespace

// docs/configs.md holds the generated table between two marker lines; regenerate it with
//   build/evodispatch search --config-reference > /tmp/config-table.md &&
//   awk -v t=/tmp/config-table.md '/<!-- config-table:end -->/{s=0} !s{print}
//     /<!-- config-table:begin -->/{while((getline l < t)>0) print l; s=1}' docs/configs.md > new.md &&
//   mv new.md docs/configs.md
TEST(SearchConfig, TheConfigReferenceIsTheGeneratedOne) {
  std::ifstream in(std::string(EVO_SOURCE_DIR) + "/docs/configs.md");
  ASSERT_TRUE(in) << "cannot read docs/configs.md";
  std::stringstream text;
  text << in.rdbuf();
  const std::string readme = text.str();
  const std::string begin = "<!-- config-table:begin -->\n", end = "<!-- config-table:end -->";
  const auto from = readme.find(begin);
  ASSERT_NE(from, std::string::npos) << "docs/configs.md has no line " << begin;
  const auto to = readme.find(end, from);
  ASSERT_NE(to, std::string::npos) << "docs/configs.md has no line " << end << " after the begin marker";
  EXPECT_EQ(without_blank_edges(readme.substr(from + begin.size(), to - from - begin.size())),
            search_config_reference())
      << "docs/configs.md's config table is not the generated one; see this test's comment for the command";
}
