// evodispatch distill: a program (a run's winner, a stored program, or a policy) into a
// C++ function with no Lua in it, compiled, checked against the script, exported.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/heuristics/distill.hpp>
#include <evodispatch/heuristics/policy.hpp>
#include <evodispatch/results/results.hpp>
#include <evodispatch/search/distill_adapter.hpp>
#include <evodispatch/search/program.hpp>

#include "app.hpp"

namespace evodispatch::cli {

namespace {
namespace fs = std::filesystem;

struct DistillOptions : CommonOptions {
  DistillOptions() { device.clear(); }  // empty: the run's device, else sim:h100-sxm
  std::int64_t run = 0;
  std::int64_t program = 0;
  std::string policy;
  std::string out;
  std::string grid = "dense";
  std::size_t random = 100000;
  std::uint64_t seed = 1;
  bool python_check = true;
  std::string fa3_source;  // a flash-attention checkout: also write fa3.patch against it
  std::string fa3_commit;  // its commit, when it is not a git checkout
};

// What is distilled: the Lua that runs, and the rule list when it is a rule-list program.
struct Source {
  std::string name;
  std::string lua;
  std::optional<search::Program> program;
  std::optional<DeviceInfo> device;  // the run's device, when the database knows it
  nlohmann::json provenance = nlohmann::json::object();
};

// A GPU fingerprint ends in "/driverX.Y" (CudaEvaluator::fingerprint); the devices row
// may not carry the driver separately.
std::string driver_of(const std::string& recorded, const std::string& fingerprint) {
  if (!recorded.empty()) return recorded;
  const auto at = fingerprint.rfind("/driver");
  return at == std::string::npos ? std::string() : fingerprint.substr(at + 7);
}

Source from_database(const DistillOptions& o) {
  if (!fs::exists(o.db)) throw InputError("--db: " + o.db + " does not exist");
  auto db = results::Database::open(o.db);
  std::int64_t program_id = o.program;
  Source src;
  if (o.run) {
    const auto run = results::Runs(db).get(o.run);
    if (!run) throw InputError("--run: no run " + std::to_string(o.run) + " in " + o.db);
    const auto& w = run->summary.contains("winner") ? run->summary["winner"] : nlohmann::json();
    if (!w.is_object() || !w.contains("program_id"))
      throw InputError("--run " + std::to_string(o.run) + ": the run has no winner (status " +
                       std::string(results::to_string(run->status)) + ")");
    program_id = w["program_id"].get<std::int64_t>();
    src.provenance["run"] = o.run;
    src.provenance["device_fingerprint"] = run->device;
    if (auto dev = results::Devices(db).find(run->device)) {
      src.device = dev->info;
      const std::string driver = driver_of(dev->driver, run->device);
      src.provenance["driver"] = driver.empty() ? nlohmann::json(nullptr) : nlohmann::json(driver);
    }
    // The kernels the run measured on its device (a search also stores simulator estimates).
    results::MeasurementFilter mf;
    mf.run_id = o.run;
    mf.device = run->device;
    mf.limit = 1;
    const auto rows = results::Measurements(db).list(mf);
    if (!rows.empty()) {
      src.provenance["kernel_build"] = rows.front().measurement.key.kernel_build;
    } else {
      // A run that found every measurement stored still re-measured its confirmations.
      for (const auto& c : results::Comparisons(db).list_by_run(o.run))
        if (c.device == run->device) {
          src.provenance["kernel_build"] = c.kernel_build;
          break;
        }
    }
    for (const char* k : {"workload", "baseline", "device"})
      if (run->summary.contains(k)) src.provenance[std::string("run_") + k] = run->summary[k];
    if (w.contains("train")) src.provenance["training"] = w["train"];
    if (w.contains("validation")) src.provenance["validation"] = w["validation"];
    if (run->summary.contains("finalists")) {
      for (const auto& f : run->summary["finalists"])
        if (f.is_object() && f.value("program_id", std::int64_t(0)) == program_id && f.contains("validation"))
          src.provenance["validation"] = f["validation"];
    }
  }
  const auto rec = results::Programs(db).get(program_id);
  if (!rec) throw InputError("no program " + std::to_string(program_id) + " in " + o.db);
  src.name = "program " + std::to_string(rec->id);
  src.lua = search::stored_source(rec->source, rec->base);
  src.provenance["program"] = rec->id;
  src.provenance["program_hash"] = rec->hash;
  if (!src.provenance.contains("run")) src.provenance["run"] = rec->run_id;
  if (!rec->rules.is_null()) {
    auto base = search::stored_base(rec->source, rec->base);
    if (!base) throw InputError("program " + std::to_string(rec->id) + ": rules stored but no base in its source");
    src.program = search::program_from_json(rec->rules, *base, "programs[" + std::to_string(rec->id) + "].rules");
  }
  return src;
}

Source from_policy(const DistillOptions& o) {
  Source src;
  src.name = o.policy;
  src.provenance["policy"] = o.policy;
  if (auto builtin = builtin_policy_source(o.policy)) {
    src.lua = *builtin;
    if (o.policy == "fa3") src.program = search::base_program("fa3", *builtin);
    return src;
  }
  std::ifstream f(o.policy, std::ios::binary);
  if (!f) throw InputError("--policy: cannot read '" + o.policy + "' (neither a built-in name nor a file)");
  src.lua.assign(std::istreambuf_iterator<char>(f), {});
  return src;
}

// Runs `python3 heuristic.py --check rows.json` on the compiled decisions of up to
// 5000 grid shapes; returns "" when they agree (or python3 is missing: "skipped").
std::string python_check(const fs::path& dir, const distill::CompiledHeuristic& c, const DeviceInfo& hw,
                         const std::vector<Shape>& grid) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) return "skipped (no python3)";
  nlohmann::json rows = nlohmann::json::array();
  const std::size_t step = std::max<std::size_t>(1, grid.size() / 5000);
  for (std::size_t i = 0; i < grid.size(); i += step) {
    const Shape& s = grid[i];
    const Decision d = c.decide(s, hw);
    rows.push_back({s.batch, s.seqlen_q, s.seqlen_k, s.h_q, s.h_kv, s.head_dim, static_cast<int>(s.dtype),
                    s.page_size, s.causal ? 1 : 0, hw.num_sms, hw.cc, d.num_splits, *d.pack_gqa ? 1 : 0,
                    d.sm_margin});
  }
  std::ofstream(dir / "python_check.json") << rows.dump() << "\n";
  const std::string cmd = "cd '" + dir.string() + "' && python3 heuristic.py --check python_check.json > python_check.log 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream log(dir / "python_check.log");
    return std::string(std::istreambuf_iterator<char>(log), {});
  }
  return "";
}

int distill_verb(const DistillOptions& o) {
  // Read first: a bad --fa3-source fails before the minutes the check takes.
  std::optional<distill::Fa3Source> fa3_source;
  if (!o.fa3_source.empty()) fa3_source = distill::read_fa3_source(o.fa3_source, o.fa3_commit);
  else if (!o.fa3_commit.empty()) throw UsageError("--fa3-commit: only with --fa3-source DIR");
  Source src = o.policy.empty() ? from_database(o) : from_policy(o);
  // The run's device unless --device names one; sim:h100-sxm for a bare policy.
  const std::string device_spec = !o.device.empty() ? o.device : src.device ? "run" : "sim:h100-sxm";
  const DeviceInfo hw = o.device.empty() && src.device ? *src.device : device_for_spec(device_spec);
  distill::Domain domain;
  if (o.grid == "dense") domain = distill::Domain::dense();
  else if (o.grid == "small") domain = distill::Domain::small();
  else throw UsageError("--grid: must be dense or small, got '" + o.grid + "'");
  const auto grid = distill::grid_shapes(domain);
  const auto random = distill::random_shapes(domain, o.random, o.seed);

  // The check holds the function to the script's decisions, not to the sandbox's time
  // budget: a loaded machine must not turn a slow call (fa3 at Lk = 128K) into a mismatch.
  SandboxLimits limits;
  limits.max_instructions = 50'000'000;
  auto script = DispatchScript::load(src.name, src.lua, limits);
  distill::DecisionFunction fn = src.program ? search::to_decision_function(*src.program, hw, grid)
                                             : distill::fit_tree(*script, hw, grid);
  nlohmann::json prov = src.provenance;
  prov["device"] = to_json(hw);
  prov["device_spec"] = device_spec;
  prov["domain"] = domain.to_json();
  if (!prov.contains("driver")) prov["driver"] = nullptr;              // not recorded: no run
  if (!prov.contains("kernel_build")) prov["kernel_build"] = nullptr;  // ditto
  for (const char* k : {"run", "program", "training", "validation"})
    if (!prov.contains(k)) prov[k] = nullptr;
  prov["check"] = {{"grid_shapes", grid.size()}, {"random_shapes", o.random}, {"seed", o.seed}};
  fn.provenance = prov;

  const fs::path dir = o.out;
  const distill::Fa3Body fa3 = distill::write_exports(fn, dir);
  // The script the exports are checked against, runnable as it is (decide, check, bench
  // --policy): a search program's rules and its base joined, which the database keeps apart.
  write_atomically((dir / "program.lua").string(), src.lua);
  if (fa3_source) distill::write_fa3_patch(fn, *fa3_source, dir);
  auto compiled = distill::CompiledHeuristic::build(dir);
  const auto report = distill::check(
      *script, [&](const Shape& s) { return compiled->decide(s, hw); }, hw, grid, random);
  std::string py = report.ok() ? python_check(dir, *compiled, hw, grid) : "not run";

  nlohmann::json summary = {{"out", dir.string()},
                            {"method", fn.method},
                            {"rules", fn.rules.size()},
                            {"fallback", std::string(distill::name(fn.fallback))},
                            {"grid_shapes", report.grid},
                            {"random_shapes", report.random},
                            {"mismatches", report.mismatches},
                            {"python", py.empty() ? "agrees" : py},
                            {"fa3_body", fa3.body ? "fa3_num_splits_heuristic.inc" : "refused: " + fa3.refusal}};
  if (fa3_source) summary["fa3_patch"] = {{"file", (dir / "fa3.patch").string()}, {"commit", fa3_source->commit}};
  nlohmann::json diffs = nlohmann::json::array();
  for (const auto& m : report.first)
    diffs.push_back({{"shape", to_json(m.shape)}, {"script", m.expected}, {"distilled", m.got}});
  summary["first_mismatches"] = diffs;
  if (o.json) {
    std::cout << summary.dump() << "\n";
  } else {
    std::cout << "distilled " << src.name << " into " << dir.string() << " (" << fn.method << ", " << fn.rules.size()
              << " rules, fallback " << summary["fallback"].get<std::string>() << ")\n"
              << "  compiled " << (dir / "libheuristic.so").string() << "; checked against the script on "
              << report.grid << " grid + " << report.random << " random shapes: " << report.mismatches
              << " differ\n";
    for (const auto& m : report.first)
      std::cout << "  differs: " << describe(m.shape) << ": script " << m.expected << ", distilled " << m.got << "\n";
    std::cout << "  python module: " << (py.empty() ? "agrees with the C++ on the grid" : py) << "\n"
              << "  FA3 body: "
              << (fa3.body ? (dir / "fa3_num_splits_heuristic.inc").string() : "refused: " + fa3.refusal) << "\n";
    if (fa3_source)
      std::cout << "  FA3 patch: " << (dir / "fa3.patch").string() << " (against " << fa3_source->commit
                << "; apply with git -C FLASH_ATTENTION apply)\n";
  }
  if (!report.ok()) {
    std::cerr << "distill: the compiled function differs from the script on " << report.mismatches << " shapes\n";
    return kFailure;
  }
  if (!py.empty() && py.rfind("skipped", 0) != 0) {
    std::cerr << "distill: the Python module differs from the C++:\n" << py;
    return kFailure;
  }
  return kOk;
}
}  // namespace

void add_distill(CLI::App& app, Action& action) {
  auto* verb = app.add_subcommand("distill", "turn a program into a compiled C++ function (no Lua), check it "
                                             "against the script, and write the exports");
  auto o = std::make_shared<DistillOptions>();
  verb->add_option("--run", o->run, "distill this search run's winner (from --db)");
  verb->add_option("--program", o->program, "distill this stored program (from --db)");
  verb->add_option("--policy", o->policy, "distill a built-in policy or a Lua script instead");
  verb->add_option("--out", o->out, "output directory")->required();
  verb->add_option("--grid", o->grid, "the dense grid: dense (default) or small")->capture_default_str();
  verb->add_option("--random", o->random, "random shapes checked besides the grid")->capture_default_str();
  verb->add_option("--seed", o->seed, "seed of the random shapes")->capture_default_str();
  verb->add_option("--device", o->device,
                   "the device the function is distilled for (its num_sms, cc): sim:PROFILE or cuda:N; "
                   "default: the run's device, else sim:h100-sxm");
  verb->add_option("--fa3-source", o->fa3_source,
                   "a flash-attention checkout: also write fa3.patch, which makes its hopper/flash_api.cpp "
                   "(and flash_api_stable.cpp) get_num_splits / get_pack_gqa use this function");
  verb->add_option("--fa3-commit", o->fa3_commit,
                   "the commit --fa3-source holds, when it is not a git checkout (default: its HEAD)");
  add_db_option(*verb, *o);
  add_json_option(*verb, *o);
  verb->callback([&action, o] {
    const int sources = (o->run ? 1 : 0) + (o->program ? 1 : 0) + (o->policy.empty() ? 0 : 1);
    if (sources != 1) throw CLI::ValidationError("distill", "give exactly one of --run ID, --program ID or --policy SPEC");
    action = [o] { return distill_verb(*o); };
  });
}

}  // namespace evodispatch::cli
