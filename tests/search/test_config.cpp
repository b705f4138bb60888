// The search config: documented defaults, strict parsing, errors that name the path.
#include <gtest/gtest.h>

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
  EXPECT_EQ(c.features, FeatureSet());
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
            "head_dim, nblk, page_size, ctas, num_sms)");
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
