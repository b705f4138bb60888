#include "svg_chart.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

namespace evodispatch::results::svg {

namespace {

constexpr std::string_view kDash = "–";
constexpr double kCharWidth = 6.4;  // an 11 px sans-serif character, on average, for layout estimates

std::string printf_double(const char* format, int precision, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, precision, v);
  return buf;
}

// "12.50" -> "12.5", "3.0" -> "3".
std::string strip_zeros(std::string s) {
  if (s.find('.') == std::string::npos) return s;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

// A coordinate rounded to 0.1 px, the precision the page needs and no more.
std::string c(double v) {
  std::string s = strip_zeros(printf_double("%.*f", 1, v));
  return s == "-0" ? "0" : s;
}

bool positive_scale(Scale s) { return s != Scale::linear; }

// Whether `v` can be placed on the axis at all (log axes need positive values).
bool placeable(const Axis& a, double v) { return std::isfinite(v) && (!positive_scale(a.scale) || v > 0); }

double transform(Scale s, double v) {
  switch (s) {
    case Scale::log2: return std::log2(v);
    case Scale::log10: return std::log10(v);
    case Scale::linear: break;
  }
  return v;
}

double inverse(Scale s, double t) {
  switch (s) {
    case Scale::log2: return std::exp2(t);
    case Scale::log10: return std::pow(10.0, t);
    case Scale::linear: break;
  }
  return t;
}

// 1, 2 or 5 times a power of ten, near span/target: the step of a readable linear axis.
double nice_step(double span, int target) {
  const double raw = span / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

std::vector<double> linear_ticks(double lo, double hi) {
  std::vector<double> ticks;
  if (!(hi > lo)) return {lo};
  const double step = nice_step(hi - lo, 6);
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

std::vector<double> power_ticks(double lo, double hi, double base, std::initializer_list<double> mantissas) {
  std::vector<double> ticks;
  for (double e = std::floor(std::log(lo) / std::log(base)); std::pow(base, e) <= hi * (1 + 1e-9); ++e)
    for (double m : mantissas) {
      const double t = m * std::pow(base, e);
      if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) ticks.push_back(t);
    }
  return ticks;
}

// Keeps every k-th label so that neighbours are at least `min_gap` pixels apart.
std::size_t label_stride(const std::vector<double>& positions, double min_gap) {
  for (std::size_t stride = 1; stride < positions.size(); ++stride) {
    bool fits = true;
    for (std::size_t i = stride; i < positions.size() && fits; i += stride)
      fits = std::abs(positions[i] - positions[i - stride]) >= min_gap;
    if (fits) return stride;
  }
  return std::max<std::size_t>(positions.size(), 1);
}

std::string hex(int r, int g, int b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
  return buf;
}

struct Rgb {
  double r, g, b;
};

Rgb mix(Rgb a, Rgb b, double t) { return {a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t}; }

// Along mid -> near -> far as t goes 0 -> 1 (a ColorBrewer RdBu side, with a grey middle
// so that a speedup of exactly 1 still shows on the white page).
std::string ramp(double t, Rgb near, Rgb far) {
  constexpr Rgb kMid{224, 224, 224};
  const Rgb rgb = t < 0.5 ? mix(kMid, near, t * 2) : mix(near, far, (t - 0.5) * 2);
  return hex(int(std::lround(rgb.r)), int(std::lround(rgb.g)), int(std::lround(rgb.b)));
}

// The path data of one marker centred at (x, y).
std::string glyph_path(const MarkerStyle& s, double x, double y) {
  const double r = s.width / 2;
  switch (s.glyph) {
    case Glyph::square:
      return "M" + c(x - r) + " " + c(y - s.height / 2) + "h" + c(s.width) + "v" + c(s.height) + "h-" + c(s.width) +
             "z";
    case Glyph::diamond:
      return "M" + c(x) + " " + c(y - r) + "l" + c(r) + " " + c(r) + "l-" + c(r) + " " + c(r) + "l-" + c(r) + " -" +
             c(r) + "z";
    case Glyph::triangle:
      return "M" + c(x) + " " + c(y - r) + "l" + c(r) + " " + c(1.7 * r) + "h-" + c(2 * r) + "z";
    case Glyph::cross:
      return "M" + c(x - r) + " " + c(y - r) + "l" + c(2 * r) + " " + c(2 * r) + "m0 -" + c(2 * r) + "l-" + c(2 * r) +
             " " + c(2 * r);
    case Glyph::circle:
      break;
  }
  // A zero-length segment with a round cap as wide as the marker draws a dot in 12 bytes.
  return "M" + c(x) + " " + c(y) + "h0";
}

// The group attributes that paint a glyph_path().
std::string glyph_attributes(const MarkerStyle& s) {
  std::string a;
  if (s.glyph == Glyph::circle)
    a = " fill=\"none\" stroke=\"" + s.fill + "\" stroke-width=\"" + c(s.width) + "\" stroke-linecap=\"round\"";
  else if (s.glyph == Glyph::cross)
    a = " fill=\"none\" stroke=\"" + s.fill + "\" stroke-width=\"" + c(std::max(1.0, s.stroke_width)) + "\"";
  else {
    a = " fill=\"" + s.fill + "\"";
    if (!s.stroke.empty()) a += " stroke=\"" + s.stroke + "\" stroke-width=\"" + c(s.stroke_width) + "\"";
  }
  if (s.opacity < 1) a += " opacity=\"" + significant(s.opacity, 2) + "\"";
  return a;
}

std::string text(double x, double y, std::string_view cls, std::string_view content, std::string_view anchor = {}) {
  std::string s = "<text x=\"" + c(x) + "\" y=\"" + c(y) + "\" class=\"" + std::string(cls) + "\"";
  if (!anchor.empty()) s += " text-anchor=\"" + std::string(anchor) + "\"";
  return s + ">" + escape(content) + "</text>";
}

}  // namespace

std::string_view stylesheet() {
  return ".chart{display:block;overflow:visible}.chart .grid{stroke:#e8e8e8;fill:none}"
         ".chart .frame{stroke:#8a8a8a;fill:none}.chart .tl{font-size:11px;fill:#444}"
         ".chart .at{font-size:12px;fill:#222;font-weight:600}"
         // A white halo keeps notes legible where they cross a line.
         ".chart .note{font-size:11px;font-weight:600;paint-order:stroke;stroke:#fff;stroke-width:3px}";
}

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string significant(double v, int digits) {
  if (!std::isfinite(v)) return std::string(kDash);
  if (v == 0) return "0";
  if (std::abs(v) >= std::pow(10.0, digits)) return printf_double("%.*f", 0, v);
  const int decimals = std::clamp(digits - 1 - int(std::floor(std::log10(std::abs(v)))), 0, 9);
  return strip_zeros(printf_double("%.*f", decimals, v));
}

std::string count(double v) {
  if (!std::isfinite(v)) return std::string(kDash);
  const double a = std::abs(v);
  if (a < 1000) return significant(v);
  // Powers-of-two sizes (seqlen 65536) read as kernel engineers say them: 64k, 1M.
  if (std::fmod(a, 1048576) == 0) return significant(v / 1048576) + "M";
  if (std::fmod(a, 1024) == 0 && a < 1048576) return significant(v / 1024) + "k";
  if (a < 1e6) return significant(v / 1e3) + "k";
  if (a < 1e9) return significant(v / 1e6) + "M";
  return significant(v / 1e9) + "G";
}

std::string bytes(double v) {
  if (!std::isfinite(v)) return std::string(kDash);
  static constexpr std::array<std::string_view, 5> kUnits = {" B", " KB", " MB", " GB", " TB"};
  std::size_t unit = 0;
  while (std::abs(v) >= 1000 && unit + 1 < kUnits.size()) {
    v /= 1000;
    ++unit;
  }
  return significant(v) + std::string(kUnits[unit]);
}

std::string micros(double v) { return std::isfinite(v) ? significant(v) + " µs" : std::string(kDash); }

std::string times(double v) { return std::isfinite(v) ? significant(v) + "×" : std::string(kDash); }

double Axis::fraction(double v) const {
  const double a = transform(scale, lo), b = transform(scale, hi);
  return b > a ? (transform(scale, v) - a) / (b - a) : 0.5;
}

std::vector<double> Axis::ticks() const {
  std::vector<double> t;
  if (scale == Scale::log2) t = power_ticks(lo, hi, 2, {1});
  if (scale == Scale::log10) {
    t = power_ticks(lo, hi, 10, {1});
    if (t.size() < 3) t = power_ticks(lo, hi, 10, {1, 2, 5});
  }
  return t.size() >= 2 ? t : linear_ticks(lo, hi);
}

std::vector<std::string> Axis::tick_labels(const std::vector<double>& ticks) const {
  std::vector<std::string> labels;
  // Unformatted ticks get the digits it takes to tell neighbours apart (1.005, 1.01, 1.015).
  for (int digits = 3; digits <= 8; ++digits) {
    labels.clear();
    for (double t : ticks) labels.push_back(format ? format(t) : significant(t, digits));
    if (format || std::adjacent_find(labels.begin(), labels.end()) == labels.end()) break;
  }
  return labels;
}

Axis fit(std::span<const double> values, const Fit& how, std::string title, Format format) {
  Axis axis;
  axis.title = std::move(title);
  axis.format = format;
  double lo = INFINITY, hi = -INFINITY, pos_lo = INFINITY;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    if (v > 0) pos_lo = std::min(pos_lo, v);
  }
  const bool any_positive = std::isfinite(pos_lo);
  if (how.log2 || (how.log_if_wide && any_positive && hi / pos_lo > 10)) {
    axis.scale = how.log2 ? Scale::log2 : Scale::log10;
    if (!any_positive) pos_lo = hi = 1;
    const double a = transform(axis.scale, pos_lo), b = transform(axis.scale, hi);
    const double pad = b > a ? (b - a) * how.pad : 0.5;
    axis.lo = inverse(axis.scale, a - pad);
    axis.hi = inverse(axis.scale, b + pad);
    return axis;
  }
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (how.include_zero) lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
  if (how.include_zero && hi == lo) hi = 1;  // all zero: a magnitude axis still starts at 0
  if (hi == lo) {
    const double half = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= half;
    hi += half;
  }
  const double pad = (hi - lo) * how.pad;
  axis.lo = how.include_zero && lo == 0 ? 0 : lo - pad;
  axis.hi = how.include_zero && hi == 0 ? 0 : hi + pad;
  return axis;
}

const std::string& category_colour(std::size_t i) {
  // Tableau 10: distinct hues of similar weight, readable on white.
  static const std::array<std::string, 10> kColours = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1",
                                                       "#76b7b2", "#edc948", "#9c755f", "#ff9da7", "#bab0ac"};
  return kColours[i % kColours.size()];
}

std::string DivergingScale::colour(double v) const {
  if (!std::isfinite(v) || v <= 0) return "#ffffff";
  const bool above = v >= 1;
  const double t = std::clamp(std::log(v) / std::log(above ? hi : lo), 0.0, 1.0);
  const double q = std::round(t * steps) / steps;
  return above ? ramp(q, {146, 197, 222}, {33, 102, 172}) : ramp(q, {244, 165, 130}, {178, 24, 43});
}

std::string DivergingScale::legend(std::string_view title, int width) const {
  constexpr int kLeft = 30, kBarTop = 20, kBarHeight = 12;
  const int bar = width - 2 * kLeft;
  const Axis axis{Scale::log10, lo, hi, "", nullptr};
  std::string s = "<svg class=\"chart\" viewBox=\"0 0 " + std::to_string(width) + " 52\" width=\"" +
                  std::to_string(width) + "\" height=\"52\" role=\"img\" aria-label=\"" + escape(title) + "\">";
  s += text(kLeft, 13, "at", title);
  const int segments = 2 * steps + 1;
  for (int i = 0; i < segments; ++i) {
    const double x0 = kLeft + double(bar) * i / segments, w = double(bar) / segments + 0.5;
    const double v = std::pow(10.0, std::log10(lo) + (std::log10(hi) - std::log10(lo)) * (i + 0.5) / segments);
    s += "<rect x=\"" + c(x0) + "\" y=\"" + std::to_string(kBarTop) + "\" width=\"" + c(w) + "\" height=\"" +
         std::to_string(kBarHeight) + "\" fill=\"" + colour(v) + "\"/>";
  }
  for (double v : {lo, 0.9, 1.0, 1.1, hi}) {
    if (v < lo || v > hi) continue;
    const double x = kLeft + bar * axis.fraction(v);
    std::string label = times(v);
    if (v == lo) label = "≤" + label;
    if (v == hi) label = "≥" + label;
    s += "<path class=\"frame\" d=\"M" + c(x) + " " + std::to_string(kBarTop + kBarHeight) + "v4\"/>";
    s += text(x, kBarTop + kBarHeight + 15, "tl", label, "middle");
  }
  return s + "</svg>";
}

Chart::Chart(Frame frame, Axis x, Axis y) : frame_(frame), x_(std::move(x)), y_(std::move(y)) {}

double Chart::px(double x) const {
  return std::clamp(frame_.left + x_.fraction(x) * (plot_right() - frame_.left), double(frame_.left), plot_right());
}

double Chart::py(double y) const {
  return std::clamp(plot_bottom() - y_.fraction(y) * (plot_bottom() - frame_.top), double(frame_.top), plot_bottom());
}

void Chart::line(std::span<const Point> points, const std::string& colour, std::string_view legend, bool step,
                 bool dashed) {
  std::string d;
  std::string last_x, last_y;
  bool pen_down = false;
  for (const Point& p : points) {
    if (!placeable(x_, p.x) || !placeable(y_, p.y)) {
      pen_down = false;  // a gap in the data is a gap in the line
      continue;
    }
    const std::string x = c(px(p.x)), y = c(py(p.y));
    if (!pen_down)
      d += "M" + x + " " + y;
    else if (step) {
      if (x != last_x) d += "H" + x;
      if (y != last_y) d += "V" + y;
    } else if (x != last_x || y != last_y)
      d += "L" + x + " " + y;
    last_x = x, last_y = y;
    pen_down = true;
  }
  if (!d.empty())
    body_ += "<path fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"1.8\"" +
             (dashed ? " stroke-dasharray=\"5 3\"" : "") + " d=\"" + d + "\"/>";
  if (!legend.empty()) legend_.push_back({std::string(legend), MarkerStyle{.fill = colour}, true, dashed});
}

void Chart::markers(std::span<const Marker> markers, const MarkerStyle& style, std::string_view legend) {
  std::string merged, titled;
  for (const Marker& m : markers) {
    if (!placeable(x_, m.x) || !placeable(y_, m.y)) continue;
    const std::string d = glyph_path(style, px(m.x), py(m.y));
    if (m.title.empty())
      merged += d;
    else
      titled += "<path d=\"" + d + "\"><title>" + escape(m.title) + "</title></path>";
  }
  if (!merged.empty() || !titled.empty()) {
    body_ += "<g" + glyph_attributes(style) + ">";
    if (!merged.empty()) body_ += "<path d=\"" + merged + "\"/>";
    body_ += titled + "</g>";
  }
  if (!legend.empty()) legend_.push_back({std::string(legend), style});
}

void Chart::error_bars(std::span<const ErrorBar> bars, const std::string& colour) {
  std::string d;
  for (const ErrorBar& b : bars) {
    if (!placeable(x_, b.x) || !placeable(y_, b.lo) || !placeable(y_, b.hi)) continue;
    const std::string x = c(px(b.x)), lo = c(py(b.lo)), hi = c(py(b.hi)), cap = c(px(b.x) - 3);
    d += "M" + x + " " + lo + "V" + hi + "M" + cap + " " + lo + "h6M" + cap + " " + hi + "h6";
  }
  if (!d.empty()) body_ += "<path fill=\"none\" stroke=\"" + colour + "\" d=\"" + d + "\"/>";
}

void Chart::hline(double y, const std::string& colour, std::string_view label, bool dashed) {
  if (!placeable(y_, y) || y < std::min(y_.lo, y_.hi) || y > std::max(y_.lo, y_.hi)) return;
  const std::string py_text = c(py(y));
  body_ += "<path stroke=\"" + colour + "\" stroke-width=\"1.5\"" + (dashed ? " stroke-dasharray=\"6 4\"" : "") +
           " d=\"M" + c(frame_.left) + " " + py_text + "H" + c(plot_right()) + "\"/>";
  // Above the line unless that would leave the plot.
  const double label_y = py(y) - 4 < frame_.top + 10 ? py(y) + 13 : py(y) - 4;
  body_ += "<text x=\"" + c(plot_right() - 4) + "\" y=\"" + c(label_y) + "\" class=\"note\" fill=\"" + colour +
           "\" text-anchor=\"end\">" + escape(label) + "</text>";
}

void Chart::vline(double x, const std::string& colour, std::string_view label, bool dashed) {
  if (!placeable(x_, x) || x < std::min(x_.lo, x_.hi) || x > std::max(x_.lo, x_.hi)) return;
  const double at = px(x);
  body_ += "<path stroke=\"" + colour + "\" stroke-width=\"1.5\"" + (dashed ? " stroke-dasharray=\"6 4\"" : "") +
           " d=\"M" + c(at) + " " + c(frame_.top) + "V" + c(plot_bottom()) + "\"/>";
  // Right of the line, or left of it near the right edge.
  const bool left = at > plot_right() - kCharWidth * double(label.size()) - 8;
  body_ += "<text x=\"" + c(left ? at - 4 : at + 4) + "\" y=\"" + c(frame_.top + 11) + "\" class=\"note\" fill=\"" +
           colour + "\"" + (left ? " text-anchor=\"end\"" : "") + ">" + escape(label) + "</text>";
}

void Chart::rug(std::span<const double> xs, const std::string& colour, std::string_view legend) {
  std::string d, last;
  for (double x : xs) {
    if (!placeable(x_, x)) continue;
    const std::string at = c(px(x));
    if (at == last) continue;  // many failures land on one pixel; one tick says it
    d += "M" + at + " " + c(plot_bottom()) + "v-7";
    last = at;
  }
  if (!d.empty()) body_ += "<path stroke=\"" + colour + "\" stroke-width=\"1.2\" d=\"" + d + "\"/>";
  if (!legend.empty())
    legend_.push_back({std::string(legend), MarkerStyle{.glyph = Glyph::cross, .fill = colour}, false, false});
}

void Chart::note(double x, double y, std::string_view content, const std::string& colour) {
  if (!placeable(x_, x) || !placeable(y_, y)) return;
  const double at = px(x);
  const bool left = at > plot_right() - kCharWidth * double(content.size()) - 8;
  // Below the point when there is room: notes mark minima, and lines run above them.
  const double y_text = py(y) + 18 <= plot_bottom() - 4 ? py(y) + 18 : std::max(py(y) - 8, frame_.top + 10.0);
  body_ += "<text x=\"" + c(left ? at - 6 : at + 6) + "\" y=\"" + c(y_text) +
           "\" class=\"note\" fill=\"" + colour + "\"" + (left ? " text-anchor=\"end\"" : "") + ">" + escape(content) +
           "</text>";
}

void Chart::legend_entry(std::string_view label, const MarkerStyle& style) {
  legend_.push_back({std::string(label), style});
}

std::string Chart::axes() const {
  std::string grid, labels;
  const double left = frame_.left, right = plot_right(), top = frame_.top, bottom = plot_bottom();

  const std::vector<double> xt = x_.ticks();
  const std::vector<std::string> xl = x_.tick_labels(xt);
  std::vector<double> xpos;
  std::size_t widest = 0;
  for (std::size_t i = 0; i < xt.size(); ++i) {
    xpos.push_back(px(xt[i]));
    widest = std::max(widest, xl[i].size());
  }
  const std::size_t xstride = label_stride(xpos, kCharWidth * double(widest) * 0.85 + 10);
  for (std::size_t i = 0; i < xt.size(); ++i) {
    grid += "M" + c(xpos[i]) + " " + c(top) + "V" + c(bottom);
    if (i % xstride == 0) labels += text(xpos[i], bottom + 15, "tl", xl[i], "middle");
  }

  const std::vector<double> yt = y_.ticks();
  const std::vector<std::string> yl = y_.tick_labels(yt);
  std::vector<double> ypos;
  for (double t : yt) ypos.push_back(py(t));
  const std::size_t ystride = label_stride(ypos, 15);
  for (std::size_t i = 0; i < yt.size(); ++i) {
    grid += "M" + c(left) + " " + c(ypos[i]) + "H" + c(right);
    if (i % ystride == 0) labels += text(left - 6, ypos[i] + 4, "tl", yl[i], "end");
  }

  std::string s = "<path class=\"grid\" d=\"" + grid + "\"/>";
  s += "<path class=\"frame\" d=\"M" + c(left) + " " + c(top) + "V" + c(bottom) + "H" + c(right) + "\"/>";
  s += labels;
  s += text((left + right) / 2, frame_.height - 8, "at", x_.title, "middle");
  s += "<text class=\"at\" text-anchor=\"middle\" transform=\"translate(14 " + c((top + bottom) / 2) +
       ") rotate(-90)\">" + escape(y_.title) + "</text>";
  return s;
}

std::string Chart::legend_rows(int& height) const {
  constexpr int kRow = 17;
  std::string s;
  double x = frame_.left;
  int row = 0;
  for (const LegendEntry& e : legend_) {
    const double w = 26 + kCharWidth * double(e.label.size()) + 14;
    if (x + w > frame_.width && x > frame_.left) {
      x = frame_.left;
      ++row;
    }
    const double y = 12 + row * kRow;
    if (e.is_line)
      s += "<path stroke=\"" + e.style.fill + "\" stroke-width=\"2\"" +
           (e.dashed ? " stroke-dasharray=\"5 3\"" : "") + " d=\"M" + c(x) + " " + c(y - 4) + "h18\"/>";
    else
      s += "<g" + glyph_attributes(e.style) + "><path d=\"" + glyph_path(e.style, x + 9, y - 4) + "\"/></g>";
    s += text(x + 24, y, "tl", e.label);
    x += w;
  }
  height = legend_.empty() ? 0 : (row + 1) * kRow + 2;
  return s;
}

std::string Chart::svg(std::string_view description) const {
  int legend_height = 0;
  const std::string legend = legend_rows(legend_height);
  const std::string w = std::to_string(frame_.width), h = std::to_string(frame_.height + legend_height);
  return "<svg class=\"chart\" viewBox=\"0 0 " + w + " " + h + "\" width=\"" + w +
         "\" height=\"" + h + "\" role=\"img\" aria-label=\"" + escape(description) + "\">" + legend +
         "<g transform=\"translate(0 " + std::to_string(legend_height) + ")\">" + axes() + body_ + "</g></svg>";
}

}  // namespace evodispatch::results::svg
