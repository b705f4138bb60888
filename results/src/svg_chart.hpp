#pragma once
// A small SVG plotting toolkit for the HTML report (report_html.cpp): axes (linear, log2,
// log10) with ticks, labels and titles, line and marker series, error bars, reference
// lines, legends and a diverging colour scale. Output is compact (one line, coordinates
// rounded to 0.1 px, markers of one style merged into one path) because a search report
// may draw tens of thousands of points; all text is escaped.
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace evodispatch::results::svg {

// The CSS for the classes the charts use (grid, frame, tick labels, axis titles, notes);
// the page inlines it once.
std::string_view stylesheet();

// Text for XML and HTML: & < > " ' escaped.
std::string escape(std::string_view text);

// Number formats; a non-finite value prints as "–".
std::string significant(double v, int digits = 3);  // 3 significant digits; integers from 10^digits up
std::string count(double v);                         // 512, 1k (1024), 64k, 131k, 2.5M
std::string bytes(double v);                         // 512 B, 64 KB, 1.5 GB (decimal units)
std::string micros(double v);                        // "12.3 µs"
std::string times(double v);                         // "1.05×"

using Format = std::string (*)(double);

enum class Scale { linear, log2, log10 };

struct Axis {
  Scale scale = Scale::linear;
  double lo = 0, hi = 1;  // the domain, in data units
  std::string title;      // names the quantity and its unit, e.g. "latency (µs)"
  Format format = nullptr;  // tick labels; nullptr: significant()

  double fraction(double v) const;  // 0 at lo, 1 at hi, in the scale's space
  std::vector<double> ticks() const;
  std::vector<std::string> tick_labels(const std::vector<double>& ticks) const;  // distinct where unformatted
};

// How fit() chooses an axis for a set of values.
struct Fit {
  bool log_if_wide = false;  // log10 when the positive values span more than a decade
  bool log2 = false;         // always log2 (powers of two: batch, seqlen_k, splits)
  bool include_zero = false; // linear axes start at 0 (magnitudes: bandwidth, spread)
  double pad = 0.05;         // margin on each side, as a fraction of the span
};
// An axis covering the finite values (and, for log axes, only the positive ones).
Axis fit(std::span<const double> values, const Fit&, std::string title, Format format = nullptr);

// Two or more colours for categories (islands, splits), distinct on white.
const std::string& category_colour(std::size_t i);

// Speedups: red below 1, a neutral grey at 1, blue above; log-symmetric, clamped to
// [lo, hi] and quantised into `steps` colours per side so equal colours share one path.
struct DivergingScale {
  double lo = 0.8, hi = 1.25;
  int steps = 8;
  std::string colour(double v) const;
  std::string legend(std::string_view title, int width = 360) const;  // a standalone SVG bar
};

enum class Glyph { square, diamond, circle, cross, triangle };

struct MarkerStyle {
  Glyph glyph = Glyph::circle;
  double width = 6, height = 6;  // pixels; circles, diamonds and crosses use width
  std::string fill = "#444";
  std::string stroke = "";       // empty: none
  double stroke_width = 1;
  double opacity = 1;
};

struct Point {
  double x = 0, y = 0;
};
struct Marker {
  double x = 0, y = 0;
  std::string title;  // hover text; empty: none (untitled markers share one path)
};
struct ErrorBar {
  double x = 0, lo = 0, hi = 0;
};

struct Frame {
  int width = 560, height = 300;
  int left = 64, right = 18, top = 14, bottom = 44;
};

// One plot. Draw calls in paint order, then svg(). Values outside the axes' domain are
// clipped to the plot area; non-finite values are skipped.
class Chart {
 public:
  Chart(Frame, Axis x, Axis y);

  double px(double x) const;
  double py(double y) const;

  void line(std::span<const Point>, const std::string& colour, std::string_view legend = {}, bool step = false,
            bool dashed = false);
  void markers(std::span<const Marker>, const MarkerStyle&, std::string_view legend = {});
  void error_bars(std::span<const ErrorBar>, const std::string& colour);
  void hline(double y, const std::string& colour, std::string_view label, bool dashed = true);
  void vline(double x, const std::string& colour, std::string_view label, bool dashed = true);
  void rug(std::span<const double> xs, const std::string& colour, std::string_view legend);  // ticks at the bottom
  void note(double x, double y, std::string_view text, const std::string& colour);  // a label at a data point
  void legend_entry(std::string_view label, const MarkerStyle&);

  std::string svg(std::string_view description) const;

 private:
  struct LegendEntry {
    std::string label;
    MarkerStyle style;
    bool is_line = false;
    bool dashed = false;
  };
  std::string axes() const;
  std::string legend_rows(int& height) const;
  double plot_right() const { return frame_.width - frame_.right; }
  double plot_bottom() const { return frame_.height - frame_.bottom; }

  Frame frame_;
  Axis x_, y_;
  std::string body_;
  std::vector<LegendEntry> legend_;
};

}  // namespace evodispatch::results::svg
