// evodispatch results: browse the results database, read-only (a running search is never
// blocked: WAL). runs, run N, programs, measurements, compare, export, report; and
// migrate, the one subcommand that writes (it brings an older file to this schema).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include <evodispatch/heuristics/policy.hpp>
#include <evodispatch/results/browse.hpp>
#include <evodispatch/results/devices.hpp>
#include <evodispatch/results/programs.hpp>
#include <evodispatch/results/report.hpp>
#include <evodispatch/results/run_shapes.hpp>
#include <evodispatch/results/runs.hpp>
#include <evodispatch/search/program.hpp>

#include "app.hpp"
#include "results_compare.hpp"
#include "table_print.hpp"

namespace evodispatch::cli {

namespace {
namespace fs = std::filesystem;

struct ResultsOptions : CommonOptions {
  std::int64_t run = 0;
  std::string kind, status, order, format = "csv", out, view;
  std::vector<std::string> where;
  std::int64_t limit = 50;
  int top = 10;
  bool all = false;
  std::string a, b, workload, kernel_build;
};

results::Database open_read_only(const std::string& path) {
  results::OpenOptions o;
  o.read_only = true;
  return results::Database::open(path, o);
}

// --where batch=1,seqlen_k=512 (repeatable): column = value, the value read as a number
// when it is one.
std::vector<std::pair<std::string, nlohmann::json>> parse_where(const std::vector<std::string>& items) {
  std::vector<std::pair<std::string, nlohmann::json>> out;
  for (const auto& item : items) {
    std::stringstream parts(item);
    std::string part;
    while (std::getline(parts, part, ',')) {
      const auto eq = part.find('=');
      if (eq == std::string::npos || eq == 0)
        throw UsageError("--where: expected COLUMN=VALUE, got '" + part + "'");
      const std::string value = part.substr(eq + 1);
      nlohmann::json v = value;
      try {
        std::size_t used = 0;
        const double d = std::stod(value, &used);
        if (used == value.size()) v = value.find_first_of(".eE") == std::string::npos ? nlohmann::json(std::stoll(value)) : nlohmann::json(d);
      } catch (const std::exception&) {
      }
      out.emplace_back(part.substr(0, eq), v);
    }
  }
  return out;
}

void set_order(results::ViewQuery& q, const std::string& order) {
  if (order.empty()) return;
  const auto colon = order.find(':');
  q.order_by = order.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string dir = order.substr(colon + 1);
    if (dir != "desc" && dir != "asc") throw UsageError("--order: COLUMN, COLUMN:asc or COLUMN:desc, got '" + order + "'");
    q.descending = dir == "desc";
  }
}

void emit(const results::Table& t, bool json) {
  if (json) std::cout << results::to_json(t).dump() << "\n";
  else print_table(t, std::cout);
}


int runs_verb(const ResultsOptions& o) {
  auto db = open_read_only(o.db);
  results::ViewQuery q;
  if (!o.kind.empty()) q.equals.emplace_back("kind", o.kind);
  if (!o.status.empty()) q.equals.emplace_back("status", o.status);
  q.columns = {"id", "kind", "status", "workload", "device", "kernel_build", "started_at", "duration_s", "candidate",
               "baseline", "shapes", "geomean_speedup", "worst_speedup", "test_geomean"};
  q.order_by = "id";
  q.descending = true;
  q.limit = o.limit;
  const results::Table t = read_view(db, results::View::runs, q);
  if (t.rows.empty())
    throw InputError(o.db + " has no runs" + (q.equals.empty() ? std::string() : " matching the filters"));
  emit(t, o.json);
  return kOk;
}

// The winner's rules (a search run's), as text; empty when there is none.
std::string winner_rules(results::Database& db, const results::RunRecord& run) {
  const auto id = run.summary.find("winner");
  if (id == run.summary.end() || !id->is_object() || !id->contains("program_id")) return "";
  const auto program = results::Programs(db).get(id->at("program_id").get<std::int64_t>());
  if (!program) return "";
  return search::describe_stored_program(program->rules, program->source, program->base,
                                        "program " + std::to_string(program->id) + " rules");
}

results::Table shapes_table(const results::ReportData& d) {
  results::Table t;
  t.columns = {"split",     "shape",        "baseline", "candidate", "oracle", "baseline_us",
               "candidate_us", "speedup", "oracle_us", "oracle_speedup"};
  const auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  for (const auto& s : d.shapes)
    t.rows.push_back({s.split, describe(s.shape), s.baseline_decision, s.candidate_decision, s.oracle_decision,
                      opt(s.baseline_us), opt(s.candidate_us), opt(s.speedup), opt(s.oracle_us),
                      opt(s.oracle_speedup)});
  return t;
}

// FA3's own split marked on each U-curve: what a sweep is usually read against.
void mark_fa3_splits(results::Database& db, results::ReportData& d) {
  const auto device = results::Devices(db).find(d.provenance.device_fingerprint);
  if (!device || d.split_curves.empty()) return;
  const auto fa3 = make_policy("fa3");
  for (auto& curve : d.split_curves) {
    const DispatchOutcome out = fa3->decide(curve.shape, device->info);
    if (!out.ok()) continue;
    curve.policy = "fa3";
    curve.policy_splits = out.decision.num_splits;
  }
}

results::ReportData report_data(results::Database& db, std::int64_t run_id, bool with_progress) {
  results::ReportData d = results::load_report(db, run_id, kVersion, with_progress);
  d.rules = winner_rules(db, *results::Runs(db).get(run_id));
  mark_fa3_splits(db, d);
  return d;
}

int run_verb(const ResultsOptions& o) {
  auto db = open_read_only(o.db);
  const results::ReportData d = report_data(db, o.run, false);
  const auto& p = d.provenance;
  const results::Table shapes = shapes_table(d);
  if (o.json) {
    const auto run = results::Runs(db).get(o.run);
    std::cout << nlohmann::json{{"id", p.run_id},           {"kind", p.kind},
                                {"status", p.status},       {"workload", p.workload},
                                {"device", p.device_fingerprint}, {"kernel_build", p.kernel_build},
                                {"started_at", p.started_at}, {"finished_at", p.finished_at},
                                {"headline", p.headline},   {"config", run->config},
                                {"summary", run->summary},  {"rules", d.rules},
                                {"shapes", results::to_json(shapes)}}
                     .dump()
              << "\n";
    return kOk;
  }
  std::cout << "run " << p.run_id << ": " << p.kind << " (" << p.status << ")";
  if (!p.workload.empty()) std::cout << " on " << p.workload;
  std::cout << "\n  device " << p.device_name << " (" << p.device_fingerprint << "), kernel build "
            << (p.kernel_build.empty() ? "-" : p.kernel_build) << "\n  started " << p.started_at;
  if (p.duration_s) std::cout << ", took " << std::fixed << std::setprecision(1) << *p.duration_s << " s";
  std::cout << std::defaultfloat << "\n";
  if (!p.candidate.empty()) std::cout << "  candidate " << p.candidate << (p.baseline.empty() ? "" : ", baseline " + p.baseline) << "\n";
  for (const auto& [k, v] : p.headline.items()) std::cout << "  " << k << ": " << format_cell(v) << "\n";
  nlohmann::json config = p.config;  // the policies' embedded sources are for machines (--json)
  for (const auto& key : {"baseline_source", "seed_source"}) config.erase(key);
  std::cout << "  config: " << config.dump().substr(0, 600) << "\n";
  if (!d.rules.empty()) std::cout << "\nwinner's rules:\n" << d.rules << "\n";
  if (!shapes.rows.empty()) {
    std::cout << "\n" << shapes.rows.size() << " shapes:\n";
    print_table(shapes, std::cout, 60);
  }
  if (!d.split_curves.empty()) std::cout << "\n" << d.split_curves.size() << " split curves (results report draws them)\n";
  return kOk;
}

int programs_verb(const ResultsOptions& o) {
  auto db = open_read_only(o.db);
  results::ViewQuery q;
  q.equals.emplace_back("run_id", o.run);
  if (!o.all) q.equals.emplace_back("train_ok", 1);
  q.columns = {"id", "origin", "island", "step", "generation", "rules", "train_fitness", "train_worst",
               "validation_fitness", "error"};
  q.order_by = o.order.empty() ? "train_fitness" : o.order;
  q.descending = true;
  q.limit = o.top;
  results::Table t = read_view(db, results::View::programs, q);
  if (t.rows.empty())
    throw InputError(o.db + ": run " + std::to_string(o.run) + " has no " + (o.all ? "" : "feasible ") +
                     "programs (not a search run?)");
  t.columns.push_back("rules_text");
  for (auto& row : t.rows) {
    const auto program = results::Programs(db).get(row.front().get<std::int64_t>());
    row.push_back(program ? search::describe_stored_program(program->rules, program->source, program->base,
                                                            "program " + std::to_string(program->id) + " rules")
                          : "");
  }
  if (o.json) {
    emit(t, true);
    return kOk;
  }
  results::Table summary = t;
  summary.columns.pop_back();
  for (auto& row : summary.rows) row.pop_back();
  print_table(summary, std::cout);
  for (const auto& row : t.rows) std::cout << "\nprogram " << row.front() << ":\n" << row.back().get<std::string>();
  return kOk;
}

int measurements_verb(const ResultsOptions& o) {
  auto db = open_read_only(o.db);
  results::ViewQuery q;
  if (o.run) q.equals.emplace_back("run_id", o.run);
  for (auto& w : parse_where(o.where)) q.equals.push_back(std::move(w));
  set_order(q, o.order);
  q.limit = o.limit;
  if (!o.json)
    q.columns = {"id",       "run_id",   "device",     "kernel_build", "batch",     "seqlen_q", "seqlen_k",
                 "h_q",      "h_kv",     "head_dim",   "dtype",        "page_size", "num_splits", "pack_gqa",
                 "sm_margin", "l2_mode", "ok",         "median_us",    "p10_us",    "p90_us",   "tb_per_s"};
  emit(read_view(db, results::View::measurements, q), o.json);
  return kOk;
}

int export_verb(const ResultsOptions& o) {
  if (o.format != "csv" && o.format != "json") throw UsageError("--format: csv or json, got '" + o.format + "'");
  std::vector<results::View> views;
  if (o.view.empty() || o.view == "all") {
    views = results::all_views();
  } else if (auto v = results::parse_view(o.view)) {
    views = {*v};
  } else {
    throw UsageError("--view: all, runs, measurements, oracle, progress, programs or shapes, got '" + o.view + "'");
  }
  if (views.size() > 1 && o.out.empty()) throw UsageError("--out DIR is needed to export more than one view");
  auto db = open_read_only(o.db);
  if (views.size() > 1) fs::create_directories(o.out);
  for (const results::View v : views) {
    results::ViewQuery q;
    const auto columns = results::view_columns(db, v);
    if (o.run) {
      const std::string key = v == results::View::runs ? "id" : "run_id";
      if (std::find(columns.begin(), columns.end(), key) == columns.end()) {
        // The oracle spans runs: left out of an export of all views, refused alone.
        if (views.size() == 1) throw UsageError("--run: the " + o.view + " view is not per run");
        continue;
      }
      q.equals.emplace_back(key, o.run);
    }
    for (auto& w : parse_where(o.where)) q.equals.push_back(std::move(w));
    const results::Table t = read_view(db, v, q);
    std::ostringstream text;
    if (o.format == "csv") results::write_csv(t, text);
    else text << results::to_json(t).dump(1) << "\n";
    if (o.out.empty()) {
      std::cout << text.str();
      continue;
    }
    const std::string path = views.size() > 1 ? (fs::path(o.out) / (std::string(results::to_string(v)) + "." + o.format)).string() : o.out;
    write_atomically(path, text.str());
    std::cerr << "wrote " << path << " (" << t.rows.size() << " rows)\n";
  }
  return kOk;
}

int report_verb(const ResultsOptions& o) {
  auto db = open_read_only(o.db);
  const std::string html = results::render_report_html(report_data(db, o.run, true));
  write_atomically(o.out, html);
  std::cout << "wrote " << o.out << " (" << html.size() / 1024 << " KiB)\n";
  return kOk;
}

int compare_verb(const ResultsOptions& o) {
  auto db = open_read_only(o.db);
  CompareRequest request{o.a, o.b, o.workload, o.device == "auto" ? "" : o.device, o.kernel_build};
  const CompareReport report = compare_sources(db, request);
  const results::Table t = compare_table(report);
  if (o.json) {
    nlohmann::json j = {{"a", report.a}, {"b", report.b}, {"device", report.device},
                        {"kernel_build", report.kernel_build}, {"rows", results::to_json(t)},
                        {"a_faster", report.a_faster}, {"b_faster", report.b_faster}, {"equal", report.equal},
                        {"missing", report.missing}};
    j["geomean_ratio"] = report.geomean_ratio ? nlohmann::json(*report.geomean_ratio) : nlohmann::json(nullptr);
    std::cout << j.dump() << "\n";
    return kOk;
  }
  print_table(t, std::cout, 60);
  std::cout << compare_summary(report) << "\n";
  return kOk;
}

int migrate_verb(const ResultsOptions& o) {
  if (!fs::exists(o.db)) throw InputError(o.db + " does not exist");
  auto db = results::Database::open(o.db);
  std::cout << o.db << " is at schema version " << db.schema_version() << "\n";
  return kOk;
}

CLI::App* sub(CLI::App& parent, const char* name, const char* help, const std::shared_ptr<ResultsOptions>& o,
              Action& action, int (*body)(const ResultsOptions&)) {
  auto* s = parent.add_subcommand(name, help);
  add_db_option(*s, *o);
  add_json_option(*s, *o);
  s->callback([&action, o, body] { action = [o, body] { return body(*o); }; });
  return s;
}
}  // namespace

void add_results(CLI::App& app, Action& action) {
  auto* verb = app.add_subcommand("results", "browse the results database (read-only): runs, programs, measurements, "
                                             "comparisons, exports and an HTML report");
  verb->require_subcommand(1);
  auto o = std::make_shared<ResultsOptions>();

  auto* runs = sub(*verb, "runs", "one line per run, newest first", o, action, runs_verb);
  runs->add_option("--kind", o->kind, "only runs of this kind (search, bench, sweep-splits, sweep-batch, regress)");
  runs->add_option("--status", o->status, "only runs in this status (running, finished, failed, interrupted)");
  runs->add_option("--limit", o->limit, "at most this many")->capture_default_str();

  auto* run = sub(*verb, "run", "a run's provenance, headline figures, winner's rules and per-shape table", o, action,
                  run_verb);
  run->add_option("N", o->run, "the run id")->required();

  auto* programs = sub(*verb, "programs", "a search's best programs with their rules as text", o, action, programs_verb);
  programs->add_option("--run", o->run, "the search run")->required();
  programs->add_option("--top", o->top, "how many")->capture_default_str();
  programs->add_option("--order", o->order, "a column of v_programs to rank by, highest first (default train_fitness)");
  programs->add_flag("--all", o->all, "also programs that failed or fell under the floor on the training shapes");

  auto* meas = sub(*verb, "measurements", "measurements, filtered by any column of v_measurements", o, action,
                   measurements_verb);
  meas->add_option("--run", o->run, "only those this run took");
  meas->add_option("--where", o->where, "COLUMN=VALUE[,COLUMN=VALUE...]: batch, seqlen_k, h_kv, num_splits, device, "
                                        "kernel_build, ok, ... (repeatable)");
  meas->add_option("--order", o->order, "COLUMN[:asc|:desc]");
  meas->add_option("--limit", o->limit, "at most this many rows")->capture_default_str();

  auto* cmp = sub(*verb, "compare", "two runs, policies or distilled heuristics, shape by shape, from stored measurements",
                  o, action, compare_verb);
  cmp->add_option("A", o->a, "a run id, a policy (fa3, seq-aware, FILE.lua, ...) or DIR/heuristic.json")->required();
  cmp->add_option("B", o->b, "the same kinds; the ratio is A's time over B's")->required();
  cmp->add_option("--workload", o->workload, "the shapes, when neither side is a run");
  cmp->add_option("--device", o->device, "device fingerprint or name to read, when neither side is a run");
  cmp->add_option("--kernel-build", o->kernel_build, "kernel build hash, when neither side is a run");

  auto* exp = sub(*verb, "export", "views as CSV or JSON files", o, action, export_verb);
  exp->add_option("--format", o->format, "csv or json")->capture_default_str();
  exp->add_option("--view", o->view, "all, runs, measurements, oracle, progress, programs or shapes (default all)");
  exp->add_option("--run", o->run, "only this run's rows");
  exp->add_option("--where", o->where, "COLUMN=VALUE[,...] (repeatable)");
  exp->add_option("--out", o->out, "the file (one view) or directory (all); default: stdout for one view");

  auto* rep = sub(*verb, "report", "one self-contained HTML page with the run's plots", o, action, report_verb);
  rep->add_option("--run", o->run, "the run")->required();
  rep->add_option("--out", o->out, "the HTML file to write")->required();

  sub(*verb, "migrate", "bring an older database to this schema version (the one subcommand that writes)", o, action,
      migrate_verb);
}

}  // namespace evodispatch::cli
