// The HTML report page (report.hpp): page assembly, one function per panel. Plotting is
// svg_chart's; this file decides what each panel shows and says why a panel is empty.
#include <evodispatch/results/report.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "svg_chart.hpp"

namespace evodispatch::results {

namespace {

using svg::escape;

// Tooltips cost ~300 bytes a marker; past this many shapes the page drops them to stay small.
constexpr std::size_t kMaxTitledShapes = 2500;
constexpr std::size_t kMaxHeadConfigs = 24;
constexpr std::size_t kMaxCurves = 12;
constexpr double kCliff = 1.05;  // a batch curve's latency jump worth marking
constexpr int kFullWidth = 1160, kHalfWidth = 575;  // two halves and the gap fill a section at 1280 px
const std::string kBaselineColour = "#555555";

// Unset, NaN and infinite all mean "not measured" on the page.
double value(const std::optional<double>& v) { return v && std::isfinite(*v) ? *v : NAN; }

// The geometric mean of the measured values (NaN when there are none).
double measured_geomean(std::vector<double> values) {
  std::erase_if(values, [](double v) { return !std::isfinite(v) || v <= 0; });
  return values.empty() ? NAN : geomean(values);
}

std::string section(std::string_view id, std::string_view title, const std::string& body) {
  return "<section id=\"" + std::string(id) + "\"><h2>" + escape(title) + "</h2>" + body + "</section>";
}

std::string empty_note(std::string_view message) { return "<p class=\"empty\">" + escape(message) + "</p>"; }

std::string caption(std::string_view text) { return "<p class=\"caption\">" + escape(text) + "</p>"; }

// Cells are plain text; `numeric` right-aligns a column's figures.
std::string html_table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows,
                       const std::vector<bool>& numeric) {
  auto cell = [&](std::string_view tag, std::size_t col, const std::string& text) {
    const bool num = col < numeric.size() && numeric[col];
    return "<" + std::string(tag) + (num ? " class=\"num\">" : ">") + escape(text) + "</" + std::string(tag) + ">";
  };
  std::string s = "<table><thead><tr>";
  for (std::size_t i = 0; i < head.size(); ++i) s += cell("th", i, head[i]);
  s += "</tr></thead><tbody>";
  for (const auto& row : rows) {
    s += "<tr>";
    for (std::size_t i = 0; i < row.size(); ++i) s += cell("td", i, row[i]);
    s += "</tr>";
  }
  return s + "</tbody></table>";
}

std::string figure(std::string_view title, const std::string& content, std::string_view cls = "fig") {
  return "<figure class=\"" + std::string(cls) + "\"><figcaption>" + escape(title) + "</figcaption>" + content +
         "</figure>";
}

// ---- provenance ------------------------------------------------------------------------

std::string duration(double s) {
  if (!std::isfinite(s)) return "–";
  if (s < 60) return svg::significant(s) + " s";
  const auto total = std::int64_t(std::llround(s));
  if (total < 3600) return std::to_string(total / 60) + " min " + std::to_string(total % 60) + " s";
  return std::to_string(total / 3600) + " h " + std::to_string(total % 3600 / 60) + " min";
}

std::string headline_value(const nlohmann::json& v) {
  if (v.is_number_float()) return svg::significant(v.get<double>(), 4);
  if (v.is_number()) return v.dump();
  if (v.is_string()) return v.get<std::string>();
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string facts(const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::string s = "<dl class=\"facts\">";
  for (const auto& [name, text] : pairs)
    if (!text.empty()) s += "<dt>" + escape(name) + "</dt><dd>" + escape(text) + "</dd>";
  return s + "</dl>";
}

std::string provenance_panel(const ReportProvenance& p) {
  const std::string bandwidth =
      std::isfinite(p.mem_bw) && p.mem_bw > 0 ? svg::significant(p.mem_bw / 1e12) + " TB/s" : "unknown";
  const std::string build = p.kernel_build + (p.kernel_build_description.empty() ? "" : " — " + p.kernel_build_description);
  std::string body = facts({
      {"run", std::to_string(p.run_id)},
      {"kind", p.kind},
      {"status", p.status},
      {"workload", p.workload.empty() ? "none" : p.workload},
      {"started", p.started_at},
      {"finished", p.finished_at.empty() ? "not yet" : p.finished_at},
      {"duration", p.duration_s ? duration(*p.duration_s) : ""},
      {"device", p.device_name},
      {"SMs", p.num_sms > 0 ? std::to_string(p.num_sms) : ""},
      {"DRAM bandwidth", bandwidth},
      {"driver", p.driver},
      {"device fingerprint", p.device_fingerprint},
      {"kernel build", build},
      {"candidate", p.candidate},
      {"baseline", p.baseline.empty() ? "none" : p.baseline},
      {"evodispatch", p.evodispatch_version},
  });
  if (p.headline.is_object() && !p.headline.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& [name, v] : p.headline.items()) rows.push_back({name, headline_value(v)});
    body += "<h3>Headline</h3>" + html_table({"figure", "value"}, rows, {false, true});
  }
  body += "<details><summary>config</summary><pre>" +
          escape(p.config.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) + "</pre></details>";
  return section("panel-provenance", "Provenance", body);
}

// ---- progress --------------------------------------------------------------------------

std::string progress_chart(const SearchProgress& progress) {
  std::vector<double> xs, ys{1.0};
  for (const IslandProgress& island : progress.islands)
    for (const ProgressPoint& p : island.train) xs.push_back(double(p.evaluations)), ys.push_back(p.best);
  for (const ProgressPoint& p : progress.validation) xs.push_back(double(p.evaluations)), ys.push_back(p.best);
  for (std::int64_t f : progress.failures) xs.push_back(double(f));
  xs.push_back(double(progress.evaluations));

  svg::Chart chart({.width = kFullWidth, .height = 380},
                   svg::fit(xs, {.include_zero = true, .pad = 0.02}, "evaluations (programs)", svg::count),
                   svg::fit(ys, {.pad = 0.08}, "best fitness (geomean speedup, ×)"));
  chart.hline(1.0, kBaselineColour, "baseline 1.0×");
  for (std::size_t i = 0; i < progress.islands.size(); ++i) {
    const IslandProgress& island = progress.islands[i];
    std::vector<svg::Point> points;
    for (const ProgressPoint& p : island.train) points.push_back({double(p.evaluations), p.best});
    chart.line(points, svg::category_colour(i), "island " + std::to_string(island.island), true);
  }
  std::vector<svg::Marker> finalists;
  for (const ProgressPoint& p : progress.validation)
    finalists.push_back({double(p.evaluations), p.best,
                         "finalist at evaluation " + std::to_string(p.evaluations) + ": validation fitness " +
                             svg::times(p.best)});
  if (!finalists.empty())
    chart.markers(finalists, {.glyph = svg::Glyph::diamond, .width = 11, .fill = "#111111", .stroke = "#ffffff"},
                  "finalist validation (" + std::to_string(finalists.size()) + ")");
  std::vector<double> failures(progress.failures.begin(), progress.failures.end());
  if (!failures.empty()) chart.rug(failures, "#c0392b", "failures (" + std::to_string(failures.size()) + ")");
  return chart.svg("best fitness against evaluations, one line per island");
}

std::string progress_panel(const std::optional<SearchProgress>& progress) {
  constexpr std::string_view kTitle = "Search progress";
  if (!progress) return section("panel-progress", kTitle, empty_note("Not a search run: no progress to show."));
  const bool any = std::any_of(progress->islands.begin(), progress->islands.end(),
                               [](const IslandProgress& i) { return !i.train.empty(); }) ||
                   !progress->validation.empty();
  if (!any) return section("panel-progress", kTitle, empty_note("The search recorded no progress yet."));
  const std::string text = svg::count(double(progress->evaluations)) + " evaluations (" +
                           std::to_string(progress->evaluations) + "), " + std::to_string(progress->duplicates) +
                           " duplicates, " + std::to_string(progress->failures.size()) +
                           " failures. Fitness is the geomean speedup over the baseline on the training shapes; "
                           "diamonds are the finalists' fitness on the validation shapes.";
  return section("panel-progress", kTitle, progress_chart(*progress) + caption(text));
}

// ---- speedup maps ----------------------------------------------------------------------

const std::vector<std::string>& split_order() {
  static const std::vector<std::string> kOrder = {"train", "validation", "test", "workload"};
  return kOrder;
}

std::size_t split_rank(const std::string& split) {
  const auto& order = split_order();
  return std::size_t(std::find(order.begin(), order.end(), split) - order.begin());
}

// Blue, orange, green, purple: no red, which the page keeps for failures and limits.
const std::string& split_colour(const std::string& split) {
  static const std::vector<std::string> kColours = {svg::category_colour(0), svg::category_colour(1),
                                                    svg::category_colour(2), svg::category_colour(4),
                                                    svg::category_colour(7)};
  return kColours[std::min(split_rank(split), kColours.size() - 1)];
}

std::string shapes_text(std::size_t n) { return std::to_string(n) + (n == 1 ? " shape" : " shapes"); }

// The shape without batch and seqlen_k: what one small-multiple map holds fixed.
std::string head_label(const Shape& s) {
  std::string label = "Hq=" + std::to_string(s.h_q) + " Hkv=" + std::to_string(s.h_kv) +
                      " D=" + std::to_string(s.head_dim) + " " + std::string(to_string(s.dtype)) +
                      (s.dtype == Dtype::fp8 ? " q=" + std::string(to_string(s.q_dtype)) : "") +
                      " Lq=" + std::to_string(s.seqlen_q);
  label += s.page_size > 0 ? " paged " + std::to_string(s.page_size) : " contiguous";
  if (s.seqlen_q > 1 && !s.causal) label += " noncausal";
  return label;
}

using HeadKey = std::tuple<int, int, int, int, int, int, int, bool>;
HeadKey head_key(const Shape& s) {
  return {s.h_q, s.h_kv, s.head_dim, int(s.dtype), int(s.q_dtype), s.page_size, s.seqlen_q, s.causal};
}

std::string split_table(const std::vector<ReportShape>& shapes) {
  std::map<std::pair<std::size_t, std::string>, std::vector<const ReportShape*>> by_split;
  for (const ReportShape& s : shapes) by_split[{split_rank(s.split), s.split}].push_back(&s);
  std::vector<std::vector<std::string>> rows;
  for (const auto& [key, members] : by_split) {
    std::vector<double> speedups, oracle;
    const ReportShape* worst = nullptr;
    for (const ReportShape* s : members) {
      speedups.push_back(value(s->speedup));
      oracle.push_back(value(s->oracle_speedup));
      if (std::isfinite(value(s->speedup)) && (!worst || value(s->speedup) < value(worst->speedup))) worst = s;
    }
    rows.push_back({key.second.empty() ? "(none)" : key.second, std::to_string(members.size()),
                    svg::times(measured_geomean(speedups)), worst ? svg::times(value(worst->speedup)) : "–",
                    worst ? describe(worst->shape) : "–", svg::times(measured_geomean(oracle))});
  }
  return html_table({"split", "shapes", "geomean speedup", "worst speedup", "worst shape", "geomean oracle speedup"},
                    rows, {false, true, true, true, false, true});
}

std::string shape_tooltip(const ReportShape& s) {
  auto side = [](std::string_view name, const std::string& decision, const std::optional<double>& us) {
    return "\n" + std::string(name) + ": " + (decision.empty() ? "–" : decision) + " — " + svg::micros(value(us));
  };
  std::string t = describe(s.shape) + " (" + s.split + ")" + side("candidate", s.candidate_decision, s.candidate_us);
  if (std::isfinite(value(s.p10_us)) && std::isfinite(value(s.p90_us)))
    t += " (p10–p90 " + svg::significant(value(s.p10_us)) + "–" + svg::micros(value(s.p90_us)) + ")";
  t += side("baseline", s.baseline_decision, s.baseline_us) + side("oracle", s.oracle_decision, s.oracle_us);
  return t + "\nspeedup " + svg::times(value(s.speedup)) + ", oracle " + svg::times(value(s.oracle_speedup));
}

// Marker size and padded log2 domain along one heat-map axis: a grid's values get one cell
// each; scattered values get a size from the area each shape can have.
struct HeatAxis {
  double lo, hi, cell;
};
HeatAxis heat_axis(const std::vector<double>& values, double length, double scattered_cell) {
  std::vector<double> logs;
  for (double v : values) logs.push_back(std::log2(v));
  std::sort(logs.begin(), logs.end());
  logs.erase(std::unique(logs.begin(), logs.end()), logs.end());
  const double span = logs.back() - logs.front();
  const double cell = std::clamp(std::max(length / double(logs.size()), scattered_cell), 4.0, 40.0);
  if (span <= 0) return {std::exp2(logs.front() - 1), std::exp2(logs.front() + 1), cell};
  const double pad = cell / 2 / ((length - cell) / span);  // half a cell, in octaves
  return {std::exp2(logs.front() - pad), std::exp2(logs.back() + pad), cell};
}

svg::MarkerStyle heat_style(const std::string& split, const std::string& fill, double w, double h) {
  if (split == "validation")
    return {.glyph = svg::Glyph::square, .width = w - 2, .height = h - 2, .fill = fill, .stroke = "#111111",
            .stroke_width = 1.6};
  if (split == "test")
    return {.glyph = svg::Glyph::diamond, .width = std::min(w, h), .fill = fill, .stroke = "#ffffff"};
  return {.glyph = svg::Glyph::square, .width = w, .height = h, .fill = fill, .stroke = "#ffffff"};
}

std::string heat_map(const std::vector<const ReportShape*>& shapes, bool oracle, const svg::DivergingScale& scale,
                     bool titles) {
  std::vector<double> seqlens, batches;
  for (const ReportShape* s : shapes) seqlens.push_back(s->shape.seqlen_k), batches.push_back(s->shape.batch);
  // As tall as its batch rows need, so that a map of a few shapes stays small.
  std::vector<double> rows = batches;
  std::sort(rows.begin(), rows.end());
  const int rows_height = int(std::clamp(26.0 * double(std::unique(rows.begin(), rows.end()) - rows.begin()), 80.0, 246.0));
  const svg::Frame frame{.width = kHalfWidth, .height = rows_height + 54, .left = 60, .right = 14, .top = 10, .bottom = 44};
  const double plot_w = frame.width - frame.left - frame.right, plot_h = frame.height - frame.top - frame.bottom;
  const double scattered = 0.6 * std::sqrt(plot_w * plot_h / double(shapes.size()));
  const HeatAxis hx = heat_axis(seqlens, plot_w, scattered), hy = heat_axis(batches, plot_h, scattered);
  svg::Chart chart(frame, {svg::Scale::log2, hx.lo, hx.hi, "KV length seqlen_k (tokens)", svg::count},
                   {svg::Scale::log2, hy.lo, hy.hi, "batch (requests)", svg::count});

  std::map<std::tuple<std::size_t, std::string, std::string>, std::vector<svg::Marker>> groups;
  for (const ReportShape* s : shapes) {
    const double v = value(oracle ? s->oracle_speedup : s->speedup);
    const std::string fill = std::isfinite(v) ? scale.colour(v) : "";
    groups[{split_rank(s->split), s->split, fill}].push_back(
        {double(s->shape.seqlen_k), double(s->shape.batch), titles ? shape_tooltip(*s) : ""});
  }
  std::map<std::string, bool> splits;
  for (const auto& [key, markers] : groups) {
    const auto& [rank, split, fill] = key;
    splits[split] = true;
    if (fill.empty())
      chart.markers(markers, {.glyph = svg::Glyph::cross, .width = std::min(hx.cell, hy.cell) * 0.5, .fill = "#999999"});
    else
      chart.markers(markers, heat_style(split, fill, hx.cell, hy.cell));
  }
  for (const auto& [split, present] : splits)
    chart.legend_entry(split, heat_style(split, "#cccccc", 11, 11));
  return chart.svg(oracle ? "oracle speedup per shape" : "candidate speedup per shape");
}

std::string speedup_maps(const std::vector<ReportShape>& shapes, std::string_view candidate) {
  std::map<HeadKey, std::vector<const ReportShape*>> by_head;
  for (const ReportShape& s : shapes)
    if (s.shape.batch > 0 && s.shape.seqlen_k > 0) by_head[head_key(s.shape)].push_back(&s);
  std::vector<const std::vector<const ReportShape*>*> heads;
  for (const auto& [key, members] : by_head) heads.push_back(&members);
  std::stable_sort(heads.begin(), heads.end(), [](auto* a, auto* b) { return a->size() > b->size(); });

  const svg::DivergingScale scale;
  const bool titles = shapes.size() <= kMaxTitledShapes;
  std::string s = scale.legend("speedup over baseline (clamped)", 420);
  s += "<p class=\"caption\">Left: the candidate (" + escape(candidate) +
       "). Right: the oracle, the best measured decision. Squares: train and workload shapes; "
       "black-bordered squares: validation; diamonds: test; grey crosses: no speedup measured.";
  if (!titles) s += " Hover details are left out above " + std::to_string(kMaxTitledShapes) + " shapes.";
  s += "</p>";
  for (std::size_t i = 0; i < std::min(heads.size(), kMaxHeadConfigs); ++i) {
    const auto& members = *heads[i];
    s += figure(head_label(members.front()->shape) + " — " + shapes_text(members.size()),
                "<div class=\"pair\">" + figure("candidate", heat_map(members, false, scale, titles), "map") +
                    figure("oracle", heat_map(members, true, scale, titles), "map") + "</div>");
  }
  if (heads.size() > kMaxHeadConfigs) {
    std::size_t left_shapes = 0;
    for (std::size_t i = kMaxHeadConfigs; i < heads.size(); ++i) left_shapes += heads[i]->size();
    s += caption(std::to_string(heads.size() - kMaxHeadConfigs) + " more head configurations (" +
                 shapes_text(left_shapes) + ") are left out; the tables above include them.");
  }
  return s;
}

std::string speedup_panel(const ReportData& data) {
  constexpr std::string_view kTitle = "Speedup over the baseline per shape";
  if (data.shapes.empty())
    return section("panel-speedup", kTitle, empty_note("No per-shape results recorded for this run."));
  return section("panel-speedup", kTitle,
                 split_table(data.shapes) + speedup_maps(data.shapes, data.provenance.candidate));
}

// ---- sweep curves ----------------------------------------------------------------------

svg::Axis latency_axis(const std::vector<double>& values) {
  return svg::fit(values, {.log_if_wide = true, .include_zero = false, .pad = 0.08}, "latency (µs)");
}

std::string spread_text(const std::optional<double>& p10, const std::optional<double>& p90) {
  if (!std::isfinite(value(p10)) || !std::isfinite(value(p90))) return "";
  return " (p10–p90 " + svg::significant(value(p10)) + "–" + svg::micros(value(p90)) + ")";
}

std::string split_curve_chart(const SplitCurve& curve) {
  std::vector<double> xs, ys;
  for (const CurvePoint& p : curve.points)
    xs.push_back(p.num_splits), ys.insert(ys.end(), {value(p.us), value(p.p10_us), value(p.p90_us)});
  if (curve.policy_splits) xs.push_back(*curve.policy_splits);
  svg::Chart chart({.width = kHalfWidth, .height = 290}, svg::fit(xs, {.log2 = true}, "KV splits (num_splits)", svg::count),
                   latency_axis(ys));

  const CurvePoint* best = nullptr;
  std::vector<double> failed;
  for (bool packed : {true, false}) {
    std::vector<svg::Point> line;
    std::vector<svg::Marker> markers;
    std::vector<svg::ErrorBar> bars;
    for (const CurvePoint& p : curve.points) {
      if (p.pack_gqa != packed) continue;
      if (!std::isfinite(value(p.us))) {
        failed.push_back(p.num_splits);
        continue;
      }
      if (!best || value(p.us) < value(best->us)) best = &p;
      line.push_back({double(p.num_splits), value(p.us)});
      markers.push_back({double(p.num_splits), value(p.us),
                         std::to_string(p.num_splits) + " splits, " + (packed ? "packed" : "unpacked") + ": " +
                             svg::micros(value(p.us)) + spread_text(p.p10_us, p.p90_us)});
      bars.push_back({double(p.num_splits), value(p.p10_us), value(p.p90_us)});
    }
    if (markers.empty()) continue;
    const std::string& colour = svg::category_colour(packed ? 0 : 1);
    chart.error_bars(bars, colour);
    chart.line(line, colour, packed ? "pack_gqa on" : "pack_gqa off");
    chart.markers(markers, {.glyph = svg::Glyph::circle, .width = 6, .fill = colour});
  }
  if (curve.policy_splits)
    chart.vline(*curve.policy_splits, kBaselineColour, (curve.policy.empty() ? "policy" : curve.policy) + ": " + std::to_string(*curve.policy_splits) +
                   (*curve.policy_splits == 1 ? " split" : " splits"));
  if (best) {
    chart.markers(std::vector<svg::Marker>{{double(best->num_splits), value(best->us), ""}},
                  {.glyph = svg::Glyph::circle, .width = 14, .fill = "#2e7d32", .opacity = 0.35}, "best");
    chart.note(best->num_splits, value(best->us), "best " + svg::micros(value(best->us)), "#2e7d32");
  }
  if (!failed.empty()) chart.rug(failed, "#c0392b", "failed (" + std::to_string(failed.size()) + ")");
  return chart.svg("split-count U-curve");
}

std::string batch_curve_chart(const BatchCurve& curve) {
  std::vector<double> xs, ys;
  for (const BatchPoint& p : curve.points)
    xs.push_back(p.batch), ys.insert(ys.end(), {value(p.us), value(p.p10_us), value(p.p90_us)});
  svg::Chart chart({.width = kHalfWidth, .height = 290}, svg::fit(xs, {.log2 = true}, "batch (requests)", svg::count),
                   latency_axis(ys));
  std::vector<svg::Point> line;
  std::vector<svg::Marker> markers, jumps;
  std::vector<svg::ErrorBar> bars;
  double previous = NAN;
  for (const BatchPoint& p : curve.points) {
    const double us = value(p.us);
    line.push_back({double(p.batch), us});
    if (!std::isfinite(us)) continue;
    const std::string title = "B=" + std::to_string(p.batch) + ": " + (p.decision.empty() ? "–" : p.decision) +
                              " — " + svg::micros(us) + spread_text(p.p10_us, p.p90_us);
    markers.push_back({double(p.batch), us, title});
    bars.push_back({double(p.batch), value(p.p10_us), value(p.p90_us)});
    if (std::isfinite(previous) && us > previous * kCliff)
      jumps.push_back({double(p.batch), us, "+" + svg::significant((us / previous - 1) * 100) + "% — " + title});
    previous = us;
  }
  const std::string& colour = svg::category_colour(0);
  chart.error_bars(bars, colour);
  chart.line(line, colour, "latency");
  chart.markers(markers, {.glyph = svg::Glyph::circle, .width = 6, .fill = colour});
  chart.markers(jumps, {.glyph = svg::Glyph::triangle, .width = 12, .fill = "#c0392b", .stroke = "#ffffff"},
                "jump > 5% over the previous batch (" + std::to_string(jumps.size()) + ")");
  return chart.svg("latency against batch");
}

std::string family_label(const Shape& s) { return "Lk=" + svg::count(s.seqlen_k) + " " + head_label(s); }

std::string curves_panel(const ReportData& data) {
  constexpr std::string_view kTitle = "Sweep curves";
  const std::size_t total = data.split_curves.size() + data.batch_curves.size();
  if (total == 0) return section("panel-curves", kTitle, empty_note("No sweep curves in this run."));
  std::string figures;
  std::size_t room = kMaxCurves;
  for (auto c = data.split_curves.begin(); c != data.split_curves.end() && room > 0; ++c, --room)
    figures += figure("split U-curve — " + describe(c->shape), split_curve_chart(*c));
  for (auto c = data.batch_curves.begin(); c != data.batch_curves.end() && room > 0; ++c, --room)
    figures += figure("batch cliffs — " + c->policy + " — " + family_label(c->family), batch_curve_chart(*c));
  std::string body = "<div class=\"pair\">" + figures + "</div>";
  if (total > kMaxCurves) body += caption(std::to_string(total - kMaxCurves) + " more curves are left out.");
  return section("panel-curves", kTitle,
                 caption("Median latency with p10–p90 bars; hover a point for its decision.") + body);
}

// ---- bandwidth -------------------------------------------------------------------------

double achieved_tb_s(const ReportShape& s) {
  const double us = value(s.candidate_us);
  return us > 0 && std::isfinite(s.kv_bytes) && s.kv_bytes > 0 ? s.kv_bytes / (us * 1e-6) / 1e12 : NAN;
}

// One marker series per split, coloured by split, for the per-shape scatter panels.
void split_scatter(svg::Chart& chart, const std::vector<ReportShape>& shapes, double (*x)(const ReportShape&),
                   double (*y)(const ReportShape&), std::string (*title)(const ReportShape&)) {
  const bool titles = shapes.size() <= kMaxTitledShapes;
  std::map<std::pair<std::size_t, std::string>, std::vector<svg::Marker>> by_split;
  for (const ReportShape& s : shapes)
    if (std::isfinite(x(s)) && std::isfinite(y(s)))
      by_split[{split_rank(s.split), s.split}].push_back({x(s), y(s), titles ? title(s) : ""});
  for (const auto& [key, markers] : by_split)
    chart.markers(markers, {.glyph = svg::Glyph::circle, .width = 6, .fill = split_colour(key.second), .opacity = 0.75},
                  key.second + " (" + std::to_string(markers.size()) + ")");
}

std::string bandwidth_panel(const ReportData& data) {
  constexpr std::string_view kTitle = "Achieved KV bandwidth";
  const double device_tb_s = std::isfinite(data.provenance.mem_bw) ? data.provenance.mem_bw / 1e12 : 0;
  std::vector<double> xs, ys{device_tb_s};
  for (const ReportShape& s : data.shapes)
    if (std::isfinite(achieved_tb_s(s))) xs.push_back(s.kv_bytes), ys.push_back(achieved_tb_s(s));
  if (xs.empty()) return section("panel-bandwidth", kTitle, empty_note("No candidate times recorded: no bandwidth to show."));

  svg::Chart chart({.width = kFullWidth, .height = 360},
                   svg::fit(xs, {.log_if_wide = true}, "K and V bytes read per call", svg::bytes),
                   svg::fit(ys, {.include_zero = true, .pad = 0.06}, "achieved bandwidth (TB/s)"));
  if (device_tb_s > 0)
    chart.hline(device_tb_s, "#c0392b", "device DRAM bandwidth " + svg::significant(device_tb_s) + " TB/s");
  split_scatter(
      chart, data.shapes, [](const ReportShape& s) { return s.kv_bytes; }, achieved_tb_s,
      [](const ReportShape& s) {
        return describe(s.shape) + "\n" + svg::significant(achieved_tb_s(s)) + " TB/s, " + svg::bytes(s.kv_bytes) +
               " in " + svg::micros(value(s.candidate_us));
      });
  const double best = *std::max_element(ys.begin() + 1, ys.end());
  std::string text = "Achieved = K and V bytes / the candidate's median time. Best: " + svg::significant(best) + " TB/s";
  if (device_tb_s > 0) text += " (" + svg::significant(best / device_tb_s * 100) + "% of DRAM bandwidth)";
  return section("panel-bandwidth", kTitle, chart.svg("achieved bandwidth against KV bytes") + caption(text + "."));
}

// ---- noise -----------------------------------------------------------------------------

double spread_pct(const ReportShape& s) {
  const double median = value(s.candidate_us);
  return median > 0 ? (value(s.p90_us) - value(s.p10_us)) / median * 100 : NAN;
}

std::string noise_panel(const std::vector<ReportShape>& shapes) {
  constexpr std::string_view kTitle = "Measurement noise";
  std::vector<double> xs, ys;
  const ReportShape* worst = nullptr;
  for (const ReportShape& s : shapes) {
    if (!std::isfinite(spread_pct(s))) continue;
    xs.push_back(value(s.candidate_us));
    ys.push_back(spread_pct(s));
    if (!worst || spread_pct(s) > spread_pct(*worst)) worst = &s;
  }
  if (!worst) return section("panel-noise", kTitle, empty_note("No p10/p90 spread recorded: no noise to show."));

  svg::Chart chart({.width = kFullWidth, .height = 320},
                   svg::fit(xs, {.log_if_wide = true}, "candidate median latency (µs)"),
                   svg::fit(ys, {.include_zero = true, .pad = 0.08}, "p10–p90 spread (% of median)"));
  split_scatter(
      chart, shapes, [](const ReportShape& s) { return value(s.candidate_us); }, spread_pct,
      [](const ReportShape& s) {
        return describe(s.shape) + "\nspread " + svg::significant(spread_pct(s)) + "% of " +
               svg::micros(value(s.candidate_us));
      });
  std::vector<double> sorted = ys;
  std::nth_element(sorted.begin(), sorted.begin() + std::ptrdiff_t(sorted.size() / 2), sorted.end());
  const std::string text = "Median spread " + svg::significant(sorted[sorted.size() / 2]) + "%, worst " +
                           svg::significant(spread_pct(*worst)) + "% (" + describe(worst->shape) + ").";
  return section("panel-noise", kTitle, caption(text) + chart.svg("measurement spread against latency"));
}

// ---- rules and page --------------------------------------------------------------------

std::string rules_panel(const std::string& rules) {
  constexpr std::string_view kTitle = "Rules";
  if (rules.empty()) return section("panel-rules", kTitle, empty_note("No rules: this run has no winner or heuristic."));
  return section("panel-rules", kTitle, "<pre class=\"rules\">" + escape(rules) + "</pre>");
}

std::string stylesheet() {
  return std::string(
             ":root{--fg:#1f2328;--muted:#5f6670;--line:#e2e5e9;--head:#1f2d3d}"
             "*{box-sizing:border-box}"
             "body{margin:0;background:#f4f6f8;color:var(--fg);"
             "font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif}"
             "header{background:var(--head);color:#fff;padding:18px 28px}"
             "header h1{margin:0;font-size:22px;font-weight:600}"
             "header p{margin:4px 0 0;color:#c5cfda}"
             "nav{background:#fff;border-bottom:1px solid var(--line);padding:8px 28px;font-size:13px}"
             "nav a{color:#2f5d8a;text-decoration:none;margin-right:18px}"
             "main{max-width:1240px;margin:0 auto;padding:18px 16px}"
             "section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:16px 20px;margin:0 0 18px}"
             "h2{font-size:17px;margin:0 0 10px}h3{font-size:14px;margin:14px 0 6px}"
             "table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:4px 0 12px}"
             "th,td{padding:4px 12px;border-bottom:1px solid var(--line);text-align:left}"
             "th{font-weight:600;color:var(--muted);font-size:13px}.num{text-align:right}"
             ".facts{display:grid;grid-template-columns:max-content 1fr max-content 1fr;gap:3px 18px;margin:0}"
             ".facts dt{color:var(--muted)}.facts dd{margin:0;overflow-wrap:anywhere}"
             "pre{background:#f6f8fa;border:1px solid var(--line);border-radius:6px;padding:10px 12px;overflow:auto;"
             "font:12px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;max-height:600px}"
             "details{margin-top:10px}summary{cursor:pointer;color:#2f5d8a}"
             ".empty{color:var(--muted);font-style:italic}.caption{color:var(--muted);font-size:13px}"
             ".pair{display:flex;flex-wrap:wrap;gap:8px 10px}figure{margin:10px 0 0}"
             "figcaption{font-weight:600;font-size:13px;margin:0 0 2px}"
             ".map{margin:4px 0 0}.map figcaption{font-weight:500;color:var(--muted);margin-left:60px}"
             "footer{max-width:1240px;margin:0 auto;padding:4px 16px 24px;color:var(--muted);font-size:12px}") +
         std::string(svg::stylesheet());
}

std::string navigation() {
  static const std::vector<std::pair<std::string, std::string>> kPanels = {
      {"panel-provenance", "provenance"}, {"panel-progress", "progress"}, {"panel-speedup", "speedup"},
      {"panel-curves", "curves"},         {"panel-bandwidth", "bandwidth"}, {"panel-noise", "noise"},
      {"panel-rules", "rules"}};
  std::string s = "<nav>";
  for (const auto& [id, name] : kPanels) s += "<a href=\"#" + id + "\">" + name + "</a>";
  return s + "</nav>";
}

std::string page_header(const ReportProvenance& p, const std::string& title) {
  std::string sub = p.device_name.empty() ? "no device" : p.device_name;
  if (!p.workload.empty()) sub += " · workload " + p.workload;
  if (!p.started_at.empty()) sub += " · started " + p.started_at;
  return "<header><h1>" + escape(title) + "</h1><p>" + escape(sub) + "</p></header>";
}

}  // namespace

std::string render_report_html(const ReportData& data) {
  const ReportProvenance& p = data.provenance;
  const std::string title = "evodispatch report — run " + std::to_string(p.run_id) + " (" + p.kind + ")";
  std::string page = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                     "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>" +
                     escape(title) + "</title><style>" + stylesheet() + "</style></head><body>";
  page += page_header(p, title) + navigation() + "<main>";
  page += provenance_panel(p);
  page += progress_panel(data.progress);
  page += speedup_panel(data);
  page += curves_panel(data);
  page += bandwidth_panel(data);
  page += noise_panel(data.shapes);
  page += rules_panel(data.rules);
  page += "</main><footer>written by evodispatch " + escape(p.evodispatch_version) + "</footer></body></html>\n";
  return page;
}

}  // namespace evodispatch::results
