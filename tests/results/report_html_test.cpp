// The HTML report renderer over hand-built ReportData: every panel present, empty panels
// explained, text escaped, no network, no "nan", and a large search stays small.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>
#include <regex>

#include <evodispatch/results/report.hpp>

#include "../../results/src/svg_chart.hpp"

namespace evodispatch::results {
namespace {

const std::vector<std::string> kPanels = {"panel-provenance", "panel-progress", "panel-speedup", "panel-curves",
                                          "panel-bandwidth",  "panel-noise",    "panel-rules"};

Shape head(int batch, int seqlen_k, int h_q = 64, int h_kv = 8) {
  Shape s;
  s.batch = batch;
  s.seqlen_k = seqlen_k;
  s.h_q = h_q;
  s.h_kv = h_kv;
  return s;
}

ReportShape measured_shape(const Shape& shape, const std::string& split, double speedup) {
  ReportShape r;
  r.shape = shape;
  r.split = split;
  r.candidate_decision = "8 splits, packed";
  r.baseline_decision = "1 split, packed";
  r.oracle_decision = "16 splits, packed";
  r.baseline_us = 10.0 + shape.batch * shape.seqlen_k / 4096.0;
  r.candidate_us = *r.baseline_us / speedup;
  r.oracle_us = *r.candidate_us * 0.95;
  r.p10_us = *r.candidate_us * 0.98;
  r.p90_us = *r.candidate_us * 1.03;
  r.speedup = speedup;
  r.oracle_speedup = *r.baseline_us / *r.oracle_us;
  r.kv_bytes = 2.0 * shape.batch * shape.seqlen_k * shape.h_kv * shape.head_dim * 2;
  return r;
}

// A search over a grid of batch x seqlen_k for two head configurations, with a sweep's curves.
ReportData full_report() {
  ReportData d;
  d.provenance.run_id = 7;
  d.provenance.kind = "search";
  d.provenance.status = "finished";
  d.provenance.started_at = "2025-01-02T03:04:05Z";
  d.provenance.finished_at = "2025-01-02T04:04:05Z";
  d.provenance.duration_s = 3600;
  d.provenance.workload = "paper-safety-160";
  d.provenance.device_name = "NVIDIA H100 80GB HBM3";
  d.provenance.num_sms = 132;
  d.provenance.mem_bw = 3.35e12;
  d.provenance.candidate = "winner #412";
  d.provenance.baseline = "fa3";
  d.provenance.evodispatch_version = "0.9.1";
  d.provenance.config = {{"name", "report-test"}, {"islands", {{"count", 2}}}};
  d.provenance.headline = {{"geomean speedup", 1.0834567}, {"programs", 300}};

  SearchProgress progress;
  for (int island = 0; island < 2; ++island) {
    IslandProgress ip{island, {}};
    for (int e = 0; e <= 300; e += 50) ip.train.push_back({e, 1.0 + 0.01 * e / 50 + 0.02 * island});
    progress.islands.push_back(ip);
  }
  progress.validation = {{250, 1.05}, {300, 1.07}};
  progress.failures = {3, 17, 120};
  progress.evaluations = 300;
  progress.duplicates = 12;
  d.progress = progress;

  const std::vector<std::string> splits = {"train", "validation", "test"};
  int i = 0;
  for (int h_kv : {8, 1})
    for (int batch = 1; batch <= 256; batch *= 2)
      for (int seqlen = 64; seqlen <= 131072; seqlen *= 2, ++i)
        d.shapes.push_back(measured_shape(head(batch, seqlen, 64, h_kv), splits[i % 3], 0.8 + 0.05 * (i % 10)));

  SplitCurve curve;
  curve.shape = head(1, 512, 64, 1);
  for (int splits_n : {1, 2, 4, 8, 16, 32}) {
    const double us = 20.0 / splits_n + splits_n * 0.4;
    curve.points.push_back({splits_n, true, us, us * 0.97, us * 1.04});
  }
  curve.points.push_back({64, true, std::nullopt, std::nullopt, std::nullopt});
  curve.policy_splits = 8;
  d.split_curves.push_back(curve);

  BatchCurve batch;
  batch.family = head(1, 4096);
  batch.policy = "fa3";
  for (int b = 1; b <= 128; b *= 2)
    batch.points.push_back({b, "splits=" + std::to_string(128 / b), b == 32 ? 15.0 : 10.0 + b * 0.001, {}, {}});
  d.batch_curves.push_back(batch);

  d.rules = "if seqlen_k < 512 && batch > 4: splits = 8";
  return d;
}

// The text of <section id="id"> ... </section>.
std::string panel(const std::string& page, const std::string& id) {
  const auto start = page.find("<section id=\"" + id + "\"");
  if (start == std::string::npos) return "";
  return page.substr(start, page.find("</section>", start) - start);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

TEST(ReportHtml, EveryPanelIsPresentInOrder) {
  const std::string page = render_report_html(full_report());
  std::size_t previous = 0;
  for (const std::string& id : kPanels) {
    const auto at = page.find("<section id=\"" + id + "\">");
    ASSERT_NE(at, std::string::npos) << id;
    EXPECT_GT(at, previous) << id << " is out of order";
    previous = at;
  }
  EXPECT_NE(page.find("evodispatch report — run 7 (search)"), std::string::npos);
  EXPECT_NE(page.find("written by evodispatch 0.9.1"), std::string::npos);
}

TEST(ReportHtml, EveryPlotPanelDrawsAnSvg) {
  const std::string page = render_report_html(full_report());
  for (const std::string id : {"panel-progress", "panel-speedup", "panel-curves", "panel-bandwidth", "panel-noise"})
    EXPECT_NE(panel(page, id).find("<svg"), std::string::npos) << id;
}

TEST(ReportHtml, EmptyReportSaysWhyInsteadOfPlotting) {
  const std::string page = render_report_html(ReportData{});
  for (const std::string& id : kPanels) EXPECT_NE(page.find("<section id=\"" + id + "\">"), std::string::npos) << id;
  EXPECT_NE(panel(page, "panel-progress").find("Not a search run: no progress to show."), std::string::npos);
  EXPECT_NE(panel(page, "panel-speedup").find("No per-shape results recorded for this run."), std::string::npos);
  EXPECT_NE(panel(page, "panel-curves").find("No sweep curves in this run."), std::string::npos);
  EXPECT_NE(panel(page, "panel-bandwidth").find("class=\"empty\""), std::string::npos);
  EXPECT_NE(panel(page, "panel-noise").find("class=\"empty\""), std::string::npos);
  EXPECT_NE(panel(page, "panel-rules").find("No rules: this run has no winner or heuristic."), std::string::npos);
  EXPECT_EQ(page.find("<svg"), std::string::npos);
}

TEST(ReportHtml, ShapesWithoutSpreadLeaveOnlyTheNoisePanelEmpty) {
  ReportData d = full_report();
  for (ReportShape& s : d.shapes) s.p10_us = s.p90_us = std::nullopt;
  const std::string page = render_report_html(d);
  EXPECT_NE(panel(page, "panel-noise").find("class=\"empty\""), std::string::npos);
  EXPECT_EQ(panel(page, "panel-noise").find("<svg"), std::string::npos);
  EXPECT_NE(panel(page, "panel-bandwidth").find("<svg"), std::string::npos);
}

TEST(ReportHtml, EscapesRulesAndNames) {
  ReportData d = full_report();
  d.provenance.candidate = "<b>winner</b> & co";
  const std::string page = render_report_html(d);
  EXPECT_NE(panel(page, "panel-rules").find("if seqlen_k &lt; 512 &amp;&amp; batch &gt; 4"), std::string::npos);
  EXPECT_EQ(page.find("seqlen_k < 512"), std::string::npos);
  EXPECT_EQ(page.find("<b>winner"), std::string::npos);
  EXPECT_NE(page.find("&lt;b&gt;winner&lt;/b&gt; &amp; co"), std::string::npos);
}

TEST(ReportHtml, IsSelfContained) {
  const std::string page = lower(render_report_html(full_report()));
  EXPECT_EQ(page.find("<script src"), std::string::npos);
  EXPECT_EQ(page.find("http://"), std::string::npos);
  EXPECT_EQ(page.find("https://"), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
  EXPECT_EQ(page.find("@import"), std::string::npos);
  EXPECT_EQ(page.find("url("), std::string::npos);
}

TEST(ReportHtml, UnsetAndNanValuesDoNotPrintNan) {
  ReportData d = full_report();
  d.shapes[0].speedup = NAN;
  d.shapes[1].candidate_us = NAN;
  d.shapes[2].p90_us = std::nullopt;
  d.shapes[3].oracle_speedup = INFINITY;
  d.shapes[4].kv_bytes = NAN;
  d.provenance.mem_bw = NAN;
  d.provenance.duration_s = NAN;
  d.provenance.headline["broken"] = NAN;
  d.progress->validation.push_back({300, NAN});
  d.split_curves[0].points[0].p10_us = NAN;
  const std::string page = lower(render_report_html(d));
  // As a word: "provenance" holds the letters too.
  EXPECT_FALSE(std::regex_search(page, std::regex("(^|[^a-z])nan([^a-z]|$)")));
  EXPECT_FALSE(std::regex_search(page, std::regex("(^|[^a-z])inf([^a-z]|$)")));
  // The shape without a speedup is still drawn, as a "no speedup" cross.
  EXPECT_NE(page.find("stroke=\"#999999\""), std::string::npos);
}

TEST(ReportHtml, ProgressAndSpeedupMarkTheBaselineAtOne) {
  const std::string page = render_report_html(full_report());
  const std::string progress = panel(page, "panel-progress");
  EXPECT_NE(progress.find("baseline 1.0×"), std::string::npos);
  EXPECT_NE(progress.find("stroke-dasharray"), std::string::npos);
  EXPECT_NE(progress.find("island 0"), std::string::npos);
  EXPECT_NE(progress.find("island 1"), std::string::npos);
  EXPECT_NE(progress.find("failures (3)"), std::string::npos);
  EXPECT_NE(progress.find("12 duplicates"), std::string::npos);
  // The speedup maps' colour bar is neutral at 1×, with its ends clamped.
  const std::string speedup = panel(page, "panel-speedup");
  EXPECT_NE(speedup.find(">1×<"), std::string::npos);
  EXPECT_NE(speedup.find("≤0.8×"), std::string::npos);
  EXPECT_NE(speedup.find("≥1.25×"), std::string::npos);
}

TEST(ReportHtml, SpeedupPanelSummarisesSplitsAndTitlesEachShape) {
  const std::string speedup = panel(render_report_html(full_report()), "panel-speedup");
  for (const std::string split : {">train<", ">validation<", ">test<"}) EXPECT_NE(speedup.find(split), std::string::npos);
  EXPECT_NE(speedup.find("<title>B=1 Lq=1 Lk=64 Hq=64 Hkv=8 D=128 bf16 (train)"), std::string::npos);
  EXPECT_NE(speedup.find("candidate: 8 splits, packed — "), std::string::npos);
  EXPECT_NE(speedup.find("KV length seqlen_k (tokens)"), std::string::npos);
  EXPECT_NE(speedup.find(">128k<"), std::string::npos);  // seqlen 131072 as a kernel engineer writes it
  EXPECT_NE(speedup.find("batch (requests)"), std::string::npos);
}

TEST(ReportHtml, CapsHeadConfigurationsAndSaysHowManyAreLeftOut) {
  ReportData d = full_report();
  d.shapes.clear();
  for (int h_q = 1; h_q <= 30; ++h_q) d.shapes.push_back(measured_shape(head(1, 1024, h_q, 1), "train", 1.1));
  const std::string speedup = panel(render_report_html(d), "panel-speedup");
  EXPECT_NE(speedup.find("6 more head configurations (6 shapes) are left out"), std::string::npos);
}

TEST(ReportHtml, CurvesMarkThePolicyTheBestPointAndCliffs) {
  const std::string curves = panel(render_report_html(full_report()), "panel-curves");
  EXPECT_NE(curves.find("policy: 8 splits"), std::string::npos);
  EXPECT_NE(curves.find(">best "), std::string::npos);
  EXPECT_NE(curves.find("failed (1)"), std::string::npos);
  EXPECT_NE(curves.find("B=32: splits=4"), std::string::npos);
  EXPECT_NE(curves.find("jump &gt; 5% over the previous batch (1)"), std::string::npos);
  EXPECT_NE(curves.find("latency (µs)"), std::string::npos);
}

TEST(ReportHtml, BandwidthUsesALogByteAxisAndTheDeviceLimit) {
  const std::string bandwidth = panel(render_report_html(full_report()), "panel-bandwidth");
  EXPECT_NE(bandwidth.find("device DRAM bandwidth 3.35 TB/s"), std::string::npos);
  EXPECT_NE(bandwidth.find(">1 MB<"), std::string::npos);
  EXPECT_NE(bandwidth.find(">1 GB<"), std::string::npos);
  EXPECT_NE(bandwidth.find("achieved bandwidth (TB/s)"), std::string::npos);
}

TEST(ReportHtml, NoisePanelSummarisesTheSpread) {
  const std::string noise = panel(render_report_html(full_report()), "panel-noise");
  EXPECT_NE(noise.find("Median spread 5%, worst 5%"), std::string::npos);
}

TEST(ReportHtml, ChoosesALogAxisOnlyWhenValuesSpanMoreThanADecade) {
  const std::vector<double> wide = {64, 512, 131072}, narrow = {2, 5, 9}, with_nan = {NAN, 3, 200};
  EXPECT_EQ(svg::fit(wide, {.log_if_wide = true}, "x").scale, svg::Scale::log10);
  EXPECT_EQ(svg::fit(narrow, {.log_if_wide = true}, "x").scale, svg::Scale::linear);
  EXPECT_EQ(svg::fit(with_nan, {.log_if_wide = true}, "x").scale, svg::Scale::log10);
  const svg::Axis axis = svg::fit(wide, {.log_if_wide = true}, "x");
  EXPECT_LE(axis.lo, 64);
  EXPECT_GE(axis.hi, 131072);
  const std::vector<double> ticks = axis.ticks();
  EXPECT_EQ(ticks.front(), 100);
  EXPECT_EQ(ticks.back(), 100000);
  // A magnitude that is zero everywhere (a noiseless simulator) still starts at 0.
  const std::vector<double> zeros = {0, 0};
  EXPECT_EQ(svg::fit(zeros, {.include_zero = true}, "spread").lo, 0);
  EXPECT_GT(svg::fit(zeros, {.include_zero = true}, "spread").hi, 0);
}

TEST(ReportHtml, FormatsNumbersCompactly) {
  EXPECT_EQ(svg::count(1024), "1k");
  EXPECT_EQ(svg::count(65536), "64k");
  EXPECT_EQ(svg::count(131000), "131k");
  EXPECT_EQ(svg::count(512), "512");
  EXPECT_EQ(svg::micros(12.345), "12.3 µs");
  EXPECT_EQ(svg::micros(0.012345), "0.0123 µs");
  EXPECT_EQ(svg::bytes(64e6), "64 MB");
  EXPECT_EQ(svg::significant(NAN), "–");
  EXPECT_EQ(svg::escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
}

// A 40 000-shape search (grids and random domain shapes over many head configurations) with
// long progress lines: the page must stay small enough to open.
TEST(ReportHtml, LargeSearchStaysUnderFiveMegabytes) {
  ReportData d = full_report();
  d.shapes.clear();
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> log_batch(0, 8), log_seqlen(6, 17), heads(0, 39);
  std::uniform_real_distribution<double> speedup(0.7, 1.4), jitter(0.5, 1.0);
  const std::vector<std::string> splits = {"train", "validation", "test"};
  for (int i = 0; i < 40000; ++i) {
    const int h = heads(rng);
    Shape s = head(1 << log_batch(rng), 1 << log_seqlen(rng), 8 * (1 + h % 8), 1 + h / 8);
    if (i % 2) s.seqlen_k = int(s.seqlen_k * jitter(rng)) + 1;  // random domain shapes between grid points
    d.shapes.push_back(measured_shape(s, splits[i % 3], speedup(rng)));
  }
  SearchProgress& p = *d.progress;
  p.islands.clear();
  for (int island = 0; island < 8; ++island) {
    IslandProgress ip{island, {}};
    for (int e = 0; e < 40000; e += 10) ip.train.push_back({e, 1.0 + std::log1p(e) / 50 + island * 1e-3});
    p.islands.push_back(ip);
  }
  p.failures.clear();
  for (int e = 0; e < 40000; e += 7) p.failures.push_back(e);
  p.evaluations = 40000;

  const std::string page = render_report_html(d);
  EXPECT_LT(page.size(), 5u * 1000 * 1000);
  for (const std::string& id : kPanels) EXPECT_NE(page.find("<section id=\"" + id + "\">"), std::string::npos) << id;
  EXPECT_NE(page.find("Hover details are left out above"), std::string::npos);
}

}  // namespace
}  // namespace evodispatch::results
