// Runs, programs, evaluations and comparisons: what a search and a regression report store.
#include "support.hpp"

namespace evodispatch::results {
namespace {

TEST(Runs, CreateGetFinishAndList) {
  Database db = Database::open(":memory:");
  Runs runs(db);
  const std::int64_t workload = Workloads(db).upsert("paper-safety-160", {{"shapes", nlohmann::json::array()}});
  RunRecord r;
  r.kind = "search";
  r.status = RunStatus::finished;  // ignored: a new run is running
  r.config = {{"islands", 4}, {"baseline", "fa3"}};
  r.seed = -42;
  r.device = "sim:h100-sxm@1";
  r.workload_id = workload;
  r.state = {{"generation", 0}};
  const std::int64_t id = runs.create(r);

  auto got = runs.get(id);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->id, id);
  EXPECT_EQ(got->kind, "search");
  EXPECT_EQ(got->status, RunStatus::running);
  EXPECT_EQ(got->config, r.config);
  EXPECT_EQ(got->seed, std::optional<std::int64_t>(-42));
  EXPECT_EQ(got->device, "sim:h100-sxm@1");
  EXPECT_EQ(got->workload_id, std::optional<std::int64_t>(workload));
  EXPECT_EQ(got->state, r.state);
  EXPECT_FALSE(got->started_at.empty());
  EXPECT_FALSE(got->finished_at);

  runs.save_state(id, {{"generation", 5}, {"rng", "abc"}});
  EXPECT_EQ(runs.get(id)->state["generation"], 5);

  runs.finish(id, RunStatus::interrupted, {{"best", 3}});
  got = runs.get(id);
  EXPECT_EQ(got->status, RunStatus::interrupted);
  EXPECT_EQ(got->summary, (nlohmann::json{{"best", 3}}));
  EXPECT_TRUE(got->finished_at);

  runs.set_status(id, RunStatus::running);  // resumed
  got = runs.get(id);
  EXPECT_EQ(got->status, RunStatus::running);
  EXPECT_FALSE(got->finished_at);

  const std::int64_t bench = runs.create(test::run("bench"));
  runs.finish(bench, RunStatus::finished);
  EXPECT_EQ(runs.get(bench)->device, "");
  EXPECT_FALSE(runs.get(bench)->seed);

  EXPECT_EQ(runs.list().size(), 2u);
  EXPECT_EQ(runs.list()[0].id, bench);  // newest first
  using F = RunFilter;
  EXPECT_EQ(runs.list(test::with<F>([](F& f) { f.kind = "search"; })).size(), 1u);
  EXPECT_EQ(runs.list(test::with<F>([](F& f) { f.status = RunStatus::finished; }))[0].id, bench);
  EXPECT_EQ(runs.list(test::with<F>([](F& f) { f.limit = 1; })).size(), 1u);
  EXPECT_FALSE(runs.get(9999));
}

TEST(Runs, UnknownIdAndEmptyKindAreRefused) {
  Database db = Database::open(":memory:");
  EXPECT_THROW(Runs(db).finish(77, RunStatus::finished), DbError);
  EXPECT_THROW(Runs(db).save_state(77, {}), DbError);
  EXPECT_THROW(Runs(db).set_status(77, RunStatus::failed), DbError);
  EXPECT_THROW(Runs(db).create({}), std::invalid_argument);
}

TEST(RunStatus, NamesRoundTrip) {
  for (RunStatus s : {RunStatus::running, RunStatus::finished, RunStatus::failed, RunStatus::interrupted}) {
    EXPECT_EQ(parse_run_status(to_string(s)), s);
  }
  EXPECT_FALSE(parse_run_status("done"));
  EXPECT_EQ(parse_split(to_string(Split::validation)), Split::validation);
  EXPECT_FALSE(parse_split("test"));
}

ProgramRecord program(std::int64_t run, const std::string& hash) {
  ProgramRecord p;
  p.run_id = run;
  p.hash = hash;
  p.source = "function dispatch(s, hw)\n  return { num_splits = 3 }\nend\n";
  return p;
}

TEST(Programs, ABaseSharedByManyProgramsIsStoredOnce) {
  test::TempDir dir;
  const std::string base(7000, 'x');
  auto file_bytes = [&](bool share) {
    const std::string path = dir.file(share ? "shared.db" : "inline.db");
    {
      Database db = Database::open(path);
      const std::int64_t run = Runs(db).create(test::run("search"));
      Programs programs(db);
      for (int i = 0; i < 50; ++i) {
        ProgramRecord p = program(run, "h" + std::to_string(i));
        if (share) p.base = base;
        else p.source += base;
        programs.insert(p);
      }
      if (share) {
        ProgramRecord other = program(run, "other");
        other.base = "another base";
        programs.insert(other);
        programs.insert(program(run, "whole"));
        EXPECT_EQ(programs.find_by_hash(run, "h7")->base, base);
        EXPECT_EQ(programs.find_by_hash(run, "other")->base, "another base");
        EXPECT_FALSE(programs.find_by_hash(run, "whole")->base.has_value());
        const auto all = programs.list_by_run(run);
        EXPECT_EQ(all.size(), 52u);
        EXPECT_EQ(all[49].base, base);
        EXPECT_EQ(programs.get(all[10].id)->source, program(run, "x").source);
      }
    }
    return std::filesystem::file_size(path);
  };
  // What the programs take: the file less an empty database (the schema's own pages).
  const std::string empty_path = dir.file("empty.db");
  Database::open(empty_path);
  const auto empty = std::filesystem::file_size(empty_path);
  const auto inline_bytes = file_bytes(false) - empty, shared_bytes = file_bytes(true) - empty;
  EXPECT_GT(inline_bytes, 50u * 7000u);
  EXPECT_LT(shared_bytes, inline_bytes / 4) << shared_bytes << " vs " << inline_bytes;
}

TEST(Programs, InsertDeduplicatesWithinARunOnly) {
  Database db = Database::open(":memory:");
  const std::int64_t run = Runs(db).create(test::run("search"));
  const std::int64_t other_run = Runs(db).create(test::run("search"));
  Programs programs(db);

  ProgramRecord seed = program(run, "h-seed");
  seed.origin = "seed";
  const InsertResult s = programs.insert(seed);
  EXPECT_TRUE(s.inserted);

  ProgramRecord child = program(run, "h-child");
  child.rules = {{{"if", "nblk <= 4"}, {"then", {{"num_splits", 3}}}}};
  child.parents = {s.id, s.id + 0};
  child.origin = "crossover";
  child.island = 2;
  child.generation = 7;
  const InsertResult c = programs.insert(child);
  EXPECT_TRUE(c.inserted);

  ProgramRecord again = child;
  again.source = "-- different text, same normalized hash";
  const InsertResult dup = programs.insert(again);
  EXPECT_FALSE(dup.inserted);
  EXPECT_EQ(dup.id, c.id);
  EXPECT_TRUE(programs.insert(program(other_run, "h-child")).inserted);

  const auto got = programs.find_by_hash(run, "h-child");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->id, c.id);
  EXPECT_EQ(got->run_id, run);
  EXPECT_EQ(got->source, child.source);
  EXPECT_EQ(got->rules, child.rules);
  EXPECT_EQ(got->parents, child.parents);
  EXPECT_EQ(got->origin, "crossover");
  EXPECT_EQ(got->island, 2);
  EXPECT_EQ(got->generation, 7);
  EXPECT_FALSE(got->created_at.empty());
  EXPECT_TRUE(programs.get(s.id)->rules.is_null());
  EXPECT_TRUE(programs.get(s.id)->parents.empty());
  EXPECT_FALSE(programs.find_by_hash(run, "nope"));

  const auto listed = programs.list_by_run(run);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].id, s.id);
  EXPECT_EQ(listed[1].id, c.id);
}

TEST(Programs, UnknownRunIsRefused) {
  Database db = Database::open(":memory:");
  EXPECT_THROW(Programs(db).insert(program(5, "h")), DbError);
}

TEST(Evaluations, InsertFindAndList) {
  Database db = Database::open(":memory:");
  const std::int64_t run = Runs(db).create(test::run("search"));
  const std::int64_t p1 = Programs(db).insert(program(run, "a")).id;
  const std::int64_t p2 = Programs(db).insert(program(run, "b")).id;
  Evaluations evals(db);

  EvaluationRecord e;
  e.program_id = p1;
  e.run_id = 999;  // ignored: always the program's run
  e.split = Split::train;
  e.ok = true;
  e.fitness = 1.0571;
  e.worst_speedup = 0.995;
  e.oracle_fraction = 0.96;
  e.shapes = 128;
  e.details = {{"ratios", {1.0, 1.2, 0.995}}};
  const InsertResult first = evals.insert(e);
  EXPECT_TRUE(first.inserted);

  EvaluationRecord again = e;
  again.fitness = 2.0;
  const InsertResult dup = evals.insert(again);
  EXPECT_FALSE(dup.inserted);
  EXPECT_EQ(dup.id, first.id);

  EvaluationRecord validation;
  validation.program_id = p1;
  validation.split = Split::validation;
  validation.ok = true;
  validation.fitness = 1.04;
  evals.insert(validation);

  EvaluationRecord failed;
  failed.program_id = p2;
  failed.stage = "sandbox";
  failed.ok = false;
  failed.error = "script:3: num_splits must be an integer";
  evals.insert(failed);

  const auto got = evals.find(p1, Split::train);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->id, first.id);
  EXPECT_EQ(got->run_id, run);
  EXPECT_EQ(got->stage, "measured");
  EXPECT_TRUE(got->ok);
  EXPECT_EQ(got->fitness, std::optional<double>(1.0571));
  EXPECT_EQ(got->worst_speedup, std::optional<double>(0.995));
  EXPECT_EQ(got->oracle_fraction, std::optional<double>(0.96));
  EXPECT_EQ(got->shapes, 128);
  EXPECT_EQ(got->details, e.details);

  const auto f = evals.find(p2, Split::train, "sandbox");
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->ok);
  EXPECT_EQ(f->error, failed.error);
  EXPECT_FALSE(f->fitness);
  EXPECT_FALSE(f->worst_speedup);
  EXPECT_FALSE(f->oracle_fraction);
  EXPECT_FALSE(evals.find(p2, Split::train));

  EXPECT_EQ(evals.list_by_run(run).size(), 3u);
  EXPECT_EQ(evals.list_by_run(run, Split::validation).size(), 1u);
  EXPECT_EQ(evals.list_by_run(run, Split::train).size(), 2u);
  EXPECT_EQ(evals.list_by_program(p1).size(), 2u);
  EXPECT_THROW(evals.insert(test::with<EvaluationRecord>([](auto& x) { x.program_id = 12345; })), DbError);
}

TEST(Comparisons, InsertAndListARegressionReport) {
  Database db = Database::open(":memory:");
  const std::int64_t run = Runs(db).create(test::run("regress"));
  const std::int64_t prog = Programs(db).insert(program(run, "winner")).id;
  Comparisons comparisons(db);

  ComparisonRecord r;
  r.run_id = run;
  r.shape = test::sample_shape(33, 8192);
  r.device = "h100-sxm-80gb/132sm/driver-580";
  r.kernel_build = "build-abc123";
  r.l2 = L2Mode::cold;
  r.candidate = Decision{3, std::nullopt, 0};  // resolved on the way in
  r.baseline = Decision{1, true, 0};
  r.ok = true;
  r.candidate_us = 350.5;
  r.baseline_us = 437.0;
  r.speedup = 1.2468;
  r.speedup_lo = 1.24;
  r.speedup_hi = 1.25;
  r.pairs = 30;
  r.details = {{"ratios_p10", 1.23}};
  const std::int64_t id = comparisons.insert(r);

  ComparisonRecord confirm = r;
  confirm.attempt = 2;
  comparisons.insert(confirm);
  ComparisonRecord of_program = r;
  of_program.program_id = prog;
  comparisons.insert(of_program);

  EXPECT_THROW(comparisons.insert(r), DbError);  // same (run, no program, shape, attempt)
  EXPECT_THROW(comparisons.insert(of_program), DbError);

  const auto rows = comparisons.list_by_run(run);
  ASSERT_EQ(rows.size(), 3u);
  const ComparisonRecord& got = rows[0];
  EXPECT_EQ(got.id, id);
  EXPECT_EQ(got.run_id, run);
  EXPECT_FALSE(got.program_id);
  EXPECT_EQ(got.shape, r.shape);
  EXPECT_EQ(got.device, r.device);
  EXPECT_EQ(got.kernel_build, r.kernel_build);
  EXPECT_EQ(got.l2, L2Mode::cold);
  EXPECT_EQ(got.candidate, (Decision{3, true, 0}));
  EXPECT_EQ(got.baseline, r.baseline);
  EXPECT_EQ(got.attempt, 1);
  EXPECT_TRUE(got.ok);
  EXPECT_EQ(got.candidate_us, 350.5);
  EXPECT_EQ(got.baseline_us, 437.0);
  EXPECT_EQ(got.speedup, 1.2468);
  EXPECT_EQ(got.speedup_lo, 1.24);
  EXPECT_EQ(got.speedup_hi, 1.25);
  EXPECT_EQ(got.pairs, 30);
  EXPECT_EQ(got.details, r.details);
  EXPECT_EQ(rows[1].attempt, 2);

  const auto mine = comparisons.list_by_run(run, prog);
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0].program_id, std::optional<std::int64_t>(prog));
}

// A search step is one transaction: program, evaluation and run state together.
TEST(SearchStep, ProgramEvaluationAndStateCommitTogether) {
  Database db = Database::open(":memory:");
  const std::int64_t run = Runs(db).create(test::run("search"));
  auto step = [&](const std::string& hash, bool crash) {
    db.in_transaction([&] {
      const auto p = Programs(db).insert(program(run, hash));
      EvaluationRecord e;
      e.program_id = p.id;
      e.ok = true;
      e.fitness = 1.01;
      Evaluations(db).insert(e);
      Runs(db).save_state(run, {{"last", hash}});
      if (crash) throw std::runtime_error("SIGKILL stand-in");
    });
  };
  step("one", false);
  EXPECT_THROW(step("two", true), std::runtime_error);
  EXPECT_EQ(Programs(db).list_by_run(run).size(), 1u);
  EXPECT_EQ(Evaluations(db).list_by_run(run).size(), 1u);
  EXPECT_EQ(Runs(db).get(run)->state["last"], "one");
}

}  // namespace
}  // namespace evodispatch::results
