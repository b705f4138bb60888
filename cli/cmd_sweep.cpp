// evodispatch sweep splits|batch: the split U-curve of one shape, or the batch-size
// cliff curve of a shape family under a policy.
#include <iomanip>
#include <iostream>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/heuristics/policy.hpp>
#include <evodispatch/search/run_shapes.hpp>
#include <evodispatch/search/sweep.hpp>

#include "app.hpp"
#include "arguments.hpp"
#include "interrupt.hpp"
#include "progress.hpp"
#include "session.hpp"

namespace evodispatch::cli {

namespace {
struct SweepOptions : CommonOptions {
  std::string shape;     // one shape (splits) or the family (batch)
  std::string workload;  // alternative: a workload's shapes
  std::string splits = "1..64";
  std::string pack = "auto";
  int sm_margin = 0;
  std::string batch = "1..64";
  std::string policy = "fa3";
  std::string l2 = "cold";
  bool remeasure = false;
};

TimingOptions timing_of(const SweepOptions& o) {
  TimingOptions t;
  t.l2 = parse_l2_option(o.l2, "--l2");
  return t;
}

// The shapes a sweep covers: --shape, or every shape of --workload.
std::vector<Shape> sweep_shapes(const SweepOptions& o) {
  if (o.shape.empty() == o.workload.empty()) throw UsageError("give exactly one of --shape and --workload");
  if (!o.shape.empty()) return {parse_shape(o.shape, "--shape")};
  return load_workload(o.workload).shapes;
}

void print_split_curve(const SplitCurve& c) {
  std::cout << describe(c.shape) << "  (nblk " << features(c.shape).nblk << ")\n";
  const double best = c.best >= 0 ? c.points[c.best].measurement.median_us : 0;
  std::cout << std::right << std::setw(8) << "splits" << std::setw(6) << "pack" << std::setw(11) << "us"
            << std::setw(10) << "p10" << std::setw(10) << "p90" << std::setw(9) << "vs best" << "\n"
            << std::fixed;
  for (int i = 0; i < static_cast<int>(c.points.size()); ++i) {
    const auto& p = c.points[i];
    std::cout << std::setw(8) << p.decision.num_splits << std::setw(6) << (*p.decision.pack_gqa ? "yes" : "no");
    if (!p.measurement.ok) {
      std::cout << "  error: " << p.measurement.error << "\n";
      continue;
    }
    std::cout << std::setprecision(2) << std::setw(11) << p.measurement.median_us << std::setw(10)
              << p.measurement.p10_us << std::setw(10) << p.measurement.p90_us << std::setprecision(3)
              << std::setw(9) << p.measurement.median_us / best << (i == c.best ? "  <- best" : "") << "\n";
  }
}

void print_batch_curve(const BatchCurve& c, const std::string& policy) {
  std::cout << std::left << std::setw(44) << "shape" << std::right << std::setw(8) << "splits" << std::setw(11) << "us"
            << std::setw(9) << "step" << std::setw(9) << "excess" << "\n"
            << std::fixed;
  for (const auto& p : c.points) {
    std::cout << std::left << std::setw(44) << describe(p.shape) << std::right;
    if (!p.decision.ok()) {
      std::cout << "  error: " << p.decision.error << "\n";
      continue;
    }
    std::cout << std::setw(8) << p.decision.decision.num_splits;
    if (!p.measurement || !p.measurement->ok) {
      std::cout << "  error: " << (p.measurement ? p.measurement->error : "") << "\n";
      continue;
    }
    std::cout << std::setprecision(2) << std::setw(11) << p.measurement->median_us;
    if (p.step) std::cout << std::setprecision(3) << std::setw(9) << *p.step << std::setw(8) << *p.excess * 100 << "%";
    std::cout << "\n";
  }
  if (c.worst >= 0)
    std::cout << "\nlargest step beyond the batch's own growth under " << policy << ": " << std::setprecision(1)
              << *c.points[c.worst].excess * 100 << "% at " << describe(c.points[c.worst].shape) << "\n";
}

int sweep_splits_verb(const SweepOptions& o) {
  const auto shapes = sweep_shapes(o);
  const auto splits = parse_int_list(o.splits, "--splits", 1, kMaxSplits);
  // Options are read before the run is opened, so that a bad one leaves no run behind.
  const TimingOptions timing = timing_of(o);
  std::vector<std::vector<bool>> packs;
  for (const auto& shape : shapes) packs.push_back(parse_pack_choice(o.pack, "--pack", shape));
  RunSession session = open_run_session("sweep-splits", o.device, o.db,
                                        {{"shapes", shapes.size()}, {"splits", o.splits}, {"pack", o.pack},
                                         {"sm_margin", o.sm_margin}, {"l2", o.l2}});
  StoredEvaluator stored(session.db, *session.evaluator, timing, o.remeasure, session.run_id);
  nlohmann::json all = nlohmann::json::array();
  int failures = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Shape& shape = shapes[i];
    Progress progress("sweep " + describe(shape));
    SplitCurve curve;
    try {
      curve = sweep_splits(stored, shape, splits, packs[i], o.sm_margin,
                           [&](std::size_t d, std::size_t t) { progress.update(d, t); }, interrupt_requested);
    } catch (const StoredEvaluator::Stopped&) {
      session.interrupted();
      throw Interrupted();
    }
    failures += curve.best < 0;
    all.push_back(to_json(curve));
    if (!o.json) print_split_curve(curve);
  }
  session.finish({{"curves", all}});
  if (o.json) std::cout << nlohmann::json{{"run_id", session.run_id}, {"curves", all}}.dump() << "\n";
  return failures ? kFailure : kOk;
}

int sweep_batch_verb(const SweepOptions& o) {
  std::vector<Shape> shapes;
  if (!o.workload.empty() && o.shape.empty()) {
    shapes = load_workload(o.workload).shapes;
  } else {
    const Shape family = sweep_shapes(o).front();
    for (int b : parse_int_list(o.batch, "--batch", 1, 65536)) {
      Shape s = family;
      s.batch = b;
      shapes.push_back(s);
    }
  }
  auto policy = make_policy(o.policy);
  const TimingOptions timing = timing_of(o);
  RunSession session = open_run_session("sweep-batch", o.device, o.db,
                                        {{"shapes", shapes.size()}, {"policy", o.policy}, {"l2", o.l2}});
  StoredEvaluator stored(session.db, *session.evaluator, timing, o.remeasure, session.run_id);
  Progress progress("sweep batch");
  BatchCurve curve;
  try {
    curve = sweep_batch(stored, *policy, shapes, [&](std::size_t d, std::size_t t) { progress.update(d, t); },
                        interrupt_requested);
  } catch (const StoredEvaluator::Stopped&) {
    session.interrupted();
    throw Interrupted();
  }
  nlohmann::json j = to_json(curve);
  session.finish({{"worst_excess", j.value("worst_excess", 0.0)}}, run_shapes(curve));
  j["run_id"] = session.run_id;
  if (o.json) std::cout << j.dump() << "\n";
  else print_batch_curve(curve, o.policy);
  bool failed = false;
  for (const auto& p : curve.points) failed |= !p.measurement || !p.measurement->ok;
  return failed ? kFailure : kOk;
}

void add_common(CLI::App& verb, SweepOptions& o) {
  verb.add_option("--shape", o.shape, "batch=1,seqlen_k=512,h_q=64,h_kv=1,... (contract field names)");
  verb.add_option("--workload", o.workload, "sweep every shape of a workload instead");
  verb.add_option("--l2", o.l2, "cold | hot")->capture_default_str();
  verb.add_flag("--remeasure", o.remeasure, "measure again even when the database has the measurement");
  add_device_option(verb, o);
  add_db_option(verb, o);
  add_json_option(verb, o);
}
}  // namespace

void add_sweep(CLI::App& app, Action& action) {
  auto* verb = app.add_subcommand("sweep", "split-count U-curve or batch-size cliff curve for one shape family");
  verb->require_subcommand(1);
  auto o = std::make_shared<SweepOptions>();

  auto* splits = verb->add_subcommand("splits", "latency against num_splits for one shape (the U-curve)");
  add_common(*splits, *o);
  splits->add_option("--splits", o->splits, "num_splits values")->capture_default_str();
  splits->add_option("--pack", o->pack, "pack_gqa: on | off | both | auto (the contract's default)")
      ->capture_default_str();
  splits->add_option("--sm-margin", o->sm_margin, "sm_margin for every point")->capture_default_str();
  splits->callback([&action, o] { action = [o] { return sweep_splits_verb(*o); }; });

  auto* batch = verb->add_subcommand("batch", "latency against batch size under a policy (wave cliffs)");
  add_common(*batch, *o);
  batch->add_option("--batch", o->batch, "batch sizes for --shape")->capture_default_str();
  batch->add_option("--policy", o->policy, "the policy deciding each batch size")->capture_default_str();
  batch->callback([&action, o] { action = [o] { return sweep_batch_verb(*o); }; });
}

}  // namespace evodispatch::cli
