// Domain workloads: the "domain" format, the seeded sampler and the shipped model domains.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/evaluator/simulator.hpp>
#include <evodispatch/evaluator/workload.hpp>

namespace evodispatch {
namespace {

// Two models (one MQA with an odd head count), TP 1-8, wide log-uniform ranges.
const char* kDomain = R"({"domain": {
  "models": [ {"name": "gqa", "h_q": 32, "h_kv": 8, "head_dim": 128, "source": "test"},
              {"name": "mqa", "h_q": 71, "h_kv": 1, "head_dim": 64, "source": "test"} ],
  "tensor_parallel": [1, 2, 4, 8],
  "batch": {"from": 1, "to": 256},
  "seqlen_k": {"from": 64, "to": 131072},
  "page_size": [0, 16],
  "samples": 240, "seed": 7 }})";

Domain test_domain() { return *parse_workload(kDomain, "d.json", "d").domain; }

std::string error_of(const std::string& text) {
  try {
    parse_workload(text, "d.json", "d");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// kDomain with `field` replaced by `value` (a JSON text).
std::string with(const std::string& field, const std::string& value) {
  auto j = nlohmann::json::parse(kDomain);
  j["domain"][field] = nlohmann::json::parse(value);
  return j.dump();
}

std::set<std::string> keys(const std::vector<Shape>& shapes) {
  std::set<std::string> out;
  for (const auto& s : shapes) out.insert(to_json(s).dump());
  return out;
}

// The TP rule, written out independently of heads_per_gpu: some degree t of the domain
// that divides the model's h_q, with h_kv % t == 0 or t % h_kv == 0, gives these heads.
bool heads_from_some_model(const Domain& d, const Shape& s) {
  for (const auto& m : d.models)
    for (int t : d.tensor_parallel)
      if (m.h_q % t == 0 && (m.h_kv % t == 0 || t % m.h_kv == 0) && s.h_q == m.h_q / t &&
          s.h_kv == std::max(1, m.h_kv / t) && s.head_dim == m.head_dim)
        return true;
  return false;
}

TEST(DomainFormat, ParsesEveryField) {
  const Workload w = parse_workload(kDomain, "d.json", "d");
  ASSERT_TRUE(w.domain.has_value());
  const Domain& d = *w.domain;
  ASSERT_EQ(d.models.size(), 2u);
  EXPECT_EQ(d.models[1], (DomainModel{"mqa", 71, 1, 64, "test"}));
  EXPECT_EQ(d.tensor_parallel, (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(d.batch.draw, DomainAxis::Draw::log_uniform);  // the default
  EXPECT_EQ(d.seqlen_k.lo, 64);
  EXPECT_EQ(d.seqlen_k.hi, 131072);
  EXPECT_EQ(d.seqlen_q.values, std::vector<int>{1});
  EXPECT_EQ(d.dtypes, std::vector<Dtype>{Dtype::bf16});
  EXPECT_EQ(d.page_sizes, (std::vector<int>{0, 16}));
  EXPECT_EQ(d.samples, 240u);
  EXPECT_EQ(d.seed, 7u);
  EXPECT_EQ(w.shapes.size(), 240u);
  EXPECT_EQ(w.shapes, sample_domain(d, 240, 7));  // the workload's shapes are the domain's own sample
}

TEST(DomainFormat, DefaultsAreOneGpuBf16ContiguousDecode240Seed1) {
  const Workload w = parse_workload(R"({"domain": {"models": [{"name": "m", "h_q": 8, "h_kv": 8, "head_dim": 128, "source": "s"}],
                                        "batch": {"from": 1, "to": 64}, "seqlen_k": {"from": 1, "to": 100000}}})",
                                    "d.json", "d");
  const Domain& d = *w.domain;
  EXPECT_EQ(d.tensor_parallel, std::vector<int>{1});
  EXPECT_EQ(d.samples, 240u);
  EXPECT_EQ(d.seed, 1u);
  for (const auto& s : w.shapes) {
    EXPECT_EQ(s.seqlen_q, 1);
    EXPECT_EQ(s.dtype, Dtype::bf16);
    EXPECT_EQ(s.page_size, 0);
    EXPECT_EQ(s.h_q, 8);
  }
}

TEST(DomainSampler, SameSeedSameShapesOtherSeedOtherShapes) {
  const Domain d = test_domain();
  const auto a = sample_domain(d, 240, 1);
  EXPECT_EQ(a, sample_domain(d, 240, 1));
  const auto b = sample_domain(d, 240, 2);
  EXPECT_NE(a, b);
  std::size_t common = 0;
  const auto ka = keys(a);
  for (const auto& k : keys(b)) common += ka.count(k);
  EXPECT_LT(common, 24u);  // a fresh sample, not a reshuffle
  // A prefix: asking for fewer gives the first ones of the same stream.
  const auto first = sample_domain(d, 10, 1);
  EXPECT_TRUE(std::equal(first.begin(), first.end(), a.begin()));
}

TEST(DomainSampler, FixedStreamAcrossMachines) {
  // The sampler uses integer arithmetic only; these values pin its stream so a change of
  // generator (or a libm dependency) shows up here rather than as a silently new sample.
  const auto s = sample_domain(test_domain(), 3, 1);
  ASSERT_EQ(s.size(), 3u);
  std::string got;
  for (const auto& x : s) got += describe(x) + "; ";
  EXPECT_EQ(got, "B=11 Lq=1 Lk=21496 Hq=32 Hkv=8 D=128 bf16; B=81 Lq=1 Lk=6470 Hq=32 Hkv=8 D=128 bf16; "
                 "B=2 Lq=1 Lk=32068 Hq=71 Hkv=1 D=64 bf16; ");
}

TEST(DomainSampler, ShapesAreDistinctAndInsideTheDomain) {
  const Domain d = test_domain();
  const auto shapes = sample_domain(d, 1000, 3);
  EXPECT_EQ(keys(shapes).size(), 1000u);
  std::set<int> tp_heads;
  for (const auto& s : shapes) {
    EXPECT_TRUE(heads_from_some_model(d, s)) << describe(s);
    EXPECT_GE(s.batch, 1);
    EXPECT_LE(s.batch, 256);
    EXPECT_GE(s.seqlen_k, 64);
    EXPECT_LE(s.seqlen_k, 131072);
    EXPECT_EQ(s.seqlen_q, 1);
    EXPECT_TRUE(s.page_size == 0 || s.page_size == 16);
    EXPECT_TRUE(s.causal);
    EXPECT_TRUE(domain_contains(d, s));
    tp_heads.insert(s.h_q);
  }
  // gqa 32/8 at TP 1, 2, 4, 8 gives 32, 16, 8, 4 query heads; mqa 71/1 only runs at TP 1.
  EXPECT_EQ(tp_heads, (std::set<int>{4, 8, 16, 32, 71}));
}

TEST(DomainSampler, TensorParallelRule) {
  const DomainModel mqa{"falcon", 71, 1, 64, "s"};
  EXPECT_TRUE(heads_per_gpu(mqa, 1).has_value());
  EXPECT_FALSE(heads_per_gpu(mqa, 2).has_value());  // 2 does not divide 71
  const DomainModel starcoder{"starcoder", 48, 1, 128, "s"};
  const auto sc8 = heads_per_gpu(starcoder, 8);  // KV head replicated on every GPU
  ASSERT_TRUE(sc8.has_value());
  EXPECT_EQ(sc8->h_q, 6);
  EXPECT_EQ(sc8->h_kv, 1);
  const DomainModel qwen{"qwen2.5-7b", 28, 4, 128, "s"};
  EXPECT_EQ(heads_per_gpu(qwen, 4)->h_kv, 1);
  EXPECT_FALSE(heads_per_gpu(qwen, 8).has_value());  // 8 does not divide 28
  const DomainModel gemma{"gemma-2-27b", 32, 16, 128, "s"};
  EXPECT_EQ(heads_per_gpu(gemma, 8)->h_kv, 2);
  const DomainModel odd{"odd", 24, 6, 128, "s"};
  EXPECT_FALSE(heads_per_gpu(odd, 4).has_value());  // 6 % 4 != 0 and 4 % 6 != 0
  EXPECT_EQ(heads_per_gpu(odd, 2)->h_kv, 3);
}

TEST(DomainSampler, ExcludedShapesAreNeverDrawn) {
  const Domain d = test_domain();
  const auto train = sample_domain(d, 240, 1);
  const auto test = sample_domain(d, 200, 99, train);
  EXPECT_EQ(test.size(), 200u);
  const auto train_keys = keys(train);
  for (const auto& s : test) EXPECT_EQ(train_keys.count(to_json(s).dump()), 0u) << describe(s);
  EXPECT_EQ(keys(test).size(), 200u);
}

TEST(DomainSampler, LogUniformSpreadsOverDecades) {
  const auto shapes = sample_domain(test_domain(), 240, 1);
  const auto short_kv = std::count_if(shapes.begin(), shapes.end(), [](const Shape& s) { return s.seqlen_k < 1000; });
  const auto long_kv = std::count_if(shapes.begin(), shapes.end(), [](const Shape& s) { return s.seqlen_k > 30000; });
  const auto small_batch = std::count_if(shapes.begin(), shapes.end(), [](const Shape& s) { return s.batch <= 2; });
  const auto large_batch = std::count_if(shapes.begin(), shapes.end(), [](const Shape& s) { return s.batch >= 64; });
  // Expected shares: log(1000/64)/log(2048) = 36%, log(131072/30000)/log(2048) = 19%,
  // B in {1, 2}: log 3 / log 257 = 20%, B >= 64: log(257/64)/log 257 = 25%.
  EXPECT_GT(short_kv, 50);
  EXPECT_GT(long_kv, 20);
  EXPECT_GT(small_batch, 20);
  EXPECT_GT(large_batch, 25);
}

TEST(DomainSampler, UniformAndListedValues) {
  const Workload w = parse_workload(with("seqlen_q", R"({"from": 2, "to": 8, "distribution": "uniform"})"), "d.json", "d");
  std::set<int> lq;
  for (const auto& s : w.shapes) lq.insert(s.seqlen_q);
  EXPECT_EQ(lq, (std::set<int>{2, 3, 4, 5, 6, 7, 8}));
  const Workload listed = parse_workload(with("batch", "[1, 3, 200]"), "d.json", "d");
  std::set<int> batches;
  for (const auto& s : listed.shapes) batches.insert(s.batch);
  EXPECT_EQ(batches, (std::set<int>{1, 3, 200}));
}

TEST(DomainSampler, AnFp8CacheDrawsItsQueryDtype) {
  auto j = nlohmann::json::parse(kDomain);
  j["domain"]["dtype"] = nlohmann::json::parse(R"(["bf16", "fp8"])");
  j["domain"]["q_dtype"] = nlohmann::json::parse(R"(["bf16", "fp16"])");
  const Workload w = parse_workload(j.dump(), "d.json", "d");
  std::set<std::pair<Dtype, Dtype>> kinds;
  for (const auto& s : w.shapes) {
    kinds.insert({s.dtype, s.q_dtype});
    EXPECT_TRUE(domain_contains(*w.domain, s));
  }
  // A 16-bit cache keeps q_dtype unset; an fp8 one draws both query dtypes.
  EXPECT_EQ(kinds, (std::set<std::pair<Dtype, Dtype>>{
                       {Dtype::bf16, Dtype::bf16}, {Dtype::fp8, Dtype::bf16}, {Dtype::fp8, Dtype::fp16}}));
  Shape fp16_cache = w.shapes[0];
  fp16_cache.dtype = Dtype::fp16;
  EXPECT_FALSE(domain_contains(*w.domain, fp16_cache));
  EXPECT_EQ(error_of(with("q_dtype", R"("fp16")")),
            "d.json: $.domain.q_dtype: only an fp8 KV cache (dtype \"fp8\") takes a query dtype");
  j["domain"]["q_dtype"] = "fp8";
  EXPECT_EQ(error_of(j.dump()), "d.json: $.domain.q_dtype: queries are bf16 or fp16");
}

TEST(DomainSampler, AskingForMoreThanTheDomainHoldsIsAnError) {
  Domain d = test_domain();
  d.models.resize(1);
  d.tensor_parallel = {1};
  d.batch = DomainAxis{DomainAxis::Draw::values, 1, 2, {1, 2}};
  d.seqlen_k = DomainAxis{DomainAxis::Draw::uniform, 100, 104, {}};
  d.page_sizes = {0};
  EXPECT_EQ(domain_size(d), 10);
  EXPECT_EQ(keys(sample_domain(d, 10, 1)).size(), 10u);  // the whole domain
  try {
    sample_domain(d, 11, 1);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot draw 11 distinct shapes: the domain holds 10");
  }
  const auto some = sample_domain(d, 4, 1);
  try {
    sample_domain(d, 7, 2, some);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot draw 7 distinct shapes: the domain holds 10, 4 of them excluded");
  }
  // In a file the error names the field that asked for too much.
  const std::string small = error_of(R"({"domain": {
    "models": [{"name": "m", "h_q": 8, "h_kv": 8, "head_dim": 128, "source": "s"}],
    "batch": 1, "seqlen_k": {"from": 1, "to": 10}}})");
  EXPECT_EQ(small, "d.json: $.domain.samples: cannot draw 240 distinct shapes: the domain holds 10");
}

TEST(DomainFormat, ShapesAndDomainTogether) {
  auto j = nlohmann::json::parse(kDomain);
  j["shapes"] = nlohmann::json::parse(R"([{"seqlen_k": 512, "h_q": 32, "h_kv": 8}])");
  j["domain"]["samples"] = 20;
  const Workload w = parse_workload(j.dump(), "d.json", "d");
  ASSERT_EQ(w.shapes.size(), 21u);
  EXPECT_EQ(w.shapes[0], (Shape{1, 1, 512, 32, 8, 128, Dtype::bf16, 0, true}));
  EXPECT_EQ(keys(w.shapes).size(), 21u);
  EXPECT_EQ(std::vector<Shape>(w.shapes.begin() + 1, w.shapes.end()),
            sample_domain(*w.domain, 20, 7, {w.shapes[0]}));
}

TEST(DomainErrors, NameTheFileAndTheJsonPath) {
  EXPECT_EQ(error_of(with("colour", "1")), "d.json: $.domain.colour: unknown field");
  EXPECT_EQ(error_of(with("batch", R"({"from": 1, "to": 8, "distribution": "normal"})")),
            "d.json: $.domain.batch.distribution: must be \"log-uniform\" or \"uniform\", got \"normal\"");
  EXPECT_EQ(error_of(with("batch", R"({"from": 8, "to": 1})")), "d.json: $.domain.batch.to: must be >= from (8), got 1");
  EXPECT_EQ(error_of(with("batch", R"({"from": 0, "to": 1})")), "d.json: $.domain.batch.from: must be >= 1, got 0");
  EXPECT_EQ(error_of(with("batch", R"({"to": 4})")), "d.json: $.domain.batch.from: missing (an integer is required)");
  EXPECT_EQ(error_of(with("batch", R"({"from": 1, "to": 100000})")), "d.json: $.domain.batch: must be in [1, 65536], got 100000");
  EXPECT_EQ(error_of(with("seqlen_q", "[1, 17]")), "d.json: $.domain.seqlen_q: must be in [1, 16], got 17");
  EXPECT_EQ(error_of(with("seqlen_k", "[64, \"a\"]")), "d.json: $.domain.seqlen_k[1]: expected an integer, got a string");
  EXPECT_EQ(error_of(with("dtype", R"(["bf16", "fp32"])")),
            "d.json: $.domain.dtype[1]: must be \"bf16\", \"fp16\" or \"fp8\", got \"fp32\"");
  EXPECT_EQ(error_of(with("page_size", "-1")),
            "d.json: $.domain.page_size: must be 0 (contiguous) or a page size in [1, 16777216], got -1");
  EXPECT_EQ(error_of(with("tensor_parallel", "[1, 0]")), "d.json: $.domain.tensor_parallel[1]: must be in [1, 4096], got 0");
  EXPECT_EQ(error_of(with("samples", "0")), "d.json: $.domain.samples: must be in [1, 1048576], got 0");
  EXPECT_EQ(error_of(with("seed", "-3")), "d.json: $.domain.seed: must be >= 0, got -3");
  EXPECT_EQ(error_of(with("models", "[]")), "d.json: $.domain.models: an empty list gives no shapes");
  EXPECT_EQ(error_of(with("models", R"([{"name": "m", "h_q": 8, "h_kv": 3, "head_dim": 128, "source": "s"}])")).rfind(
                "d.json: $.domain.models[0].h_q: must be a multiple of h_kv", 0),
            0u);
  EXPECT_EQ(error_of(with("models", R"([{"name": "m", "h_q": 8, "h_kv": 8, "head_dim": 128}])")),
            "d.json: $.domain.models[0].source: missing (a string is required)");
  EXPECT_EQ(error_of(with("models", R"([{"name": "m", "h_q": 8, "h_kv": 8, "head_dim": 128, "source": "s", "layers": 2}])")),
            "d.json: $.domain.models[0].layers: unknown field");
  EXPECT_EQ(error_of(R"({"domain": {"models": [{"name": "m", "h_q": 8, "h_kv": 8, "head_dim": 128, "source": "s"}],
                                    "batch": 1}})"),
            "d.json: $.domain.seqlen_k: missing");
  EXPECT_EQ(error_of(with("tensor_parallel", "[3]")),
            "d.json: $.domain.models[0]: no tensor-parallel degree of [3] applies to h_q 32, h_kv 8 (a degree must "
            "divide h_q, and divide h_kv or be a multiple of it)");
}

bool in_kernel_family(const Shape& s) { return s.head_dim == 64 || s.head_dim == 128 || s.head_dim == 256; }

TEST(ShippedDomains, LoadAndEveryShapeIsValidAndMeasurable) {
  SimulatorEvaluator sim(load_sim_profile("h100-sxm"));
  for (const char* name : {"models-decode", "models-paged", "models-spec"}) {
    SCOPED_TRACE(name);
    const Workload w = load_workload(name);
    ASSERT_TRUE(w.domain.has_value());
    EXPECT_EQ(w.shapes.size(), 240u);
    EXPECT_EQ(w.domain->seed, 1u);
    EXPECT_EQ(keys(w.shapes).size(), 240u);
    EXPECT_NE(w.description.find("config.json"), std::string::npos);
    EXPECT_EQ(w.domain->tensor_parallel, (std::vector<int>{1, 2, 4, 8}));
    for (const auto& m : w.domain->models) {
      EXPECT_NE(m.source.find("config.json"), std::string::npos) << m.name;
      EXPECT_TRUE(in_kernel_family(Shape{1, 1, 1, m.h_q, m.h_kv, m.head_dim})) << m.name;
    }
    for (const auto& s : w.shapes) {
      EXPECT_NO_THROW(validate(s)) << describe(s);
      EXPECT_TRUE(heads_from_some_model(*w.domain, s)) << describe(s);
      EXPECT_TRUE(in_kernel_family(s)) << describe(s);
      EXPECT_EQ(s.dtype, Dtype::bf16);
      EXPECT_GE(s.batch, 1);
      EXPECT_LE(s.batch, 256);
      EXPECT_GE(s.seqlen_k, 64);
      EXPECT_LE(s.seqlen_k, 131072);
      const Measurement m = sim.measure(s, Decision{}, TimingOptions{});
      EXPECT_TRUE(m.ok) << describe(s) << ": " << m.error;
    }
  }
}

TEST(ShippedDomains, TheirRanges) {
  const Workload decode = load_workload("models-decode");
  const Workload paged = load_workload("models-paged");
  const Workload spec = load_workload("models-spec");
  std::set<int> pages, lq;
  for (const auto& s : decode.shapes) {
    EXPECT_EQ(s.seqlen_q, 1);
    EXPECT_EQ(s.page_size, 0);
  }
  for (const auto& s : paged.shapes) pages.insert(s.page_size);
  for (const auto& s : spec.shapes) lq.insert(s.seqlen_q);
  EXPECT_EQ(pages, (std::set<int>{1, 16, 64}));
  EXPECT_EQ(lq, (std::set<int>{2, 3, 4, 5, 6, 7, 8}));
  // The families the issue names are all there, MQA (Hkv = 1) and D = 64/256 included.
  std::set<int> dims, kv;
  for (const auto& s : decode.shapes) dims.insert(s.head_dim), kv.insert(s.h_kv);
  EXPECT_EQ(dims, (std::set<int>{64, 128, 256}));
  EXPECT_TRUE(kv.count(1));
  std::set<std::string> names;
  for (const auto& m : decode.domain->models) names.insert(m.name);
  for (const char* want : {"Llama-3.1-8B", "Llama-3.1-70B", "Llama-3.1-405B", "Qwen3-30B-A3B (MoE)", "Mixtral-8x7B (MoE)",
                           "Gemma-2-9B", "Falcon-7B (MQA)", "StarCoder (MQA)"})
    EXPECT_TRUE(names.count(want)) << want;
}

TEST(ShippedDomains, AreListedAndNamedApartInTheUnknownNameError) {
  const auto names = workload_names();
  for (const char* want : {"models-decode", "models-paged", "models-spec"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  try {
    load_workload("models-prefill");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("; domains: models-decode, models-paged, models-spec"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace evodispatch
