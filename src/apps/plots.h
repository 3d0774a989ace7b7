// Benchmark figures (`bench serve --plot DIR`, `bench offline --plot DIR`): PNG files rendered by
// gnuplot (Debian's gnuplot-nox, installed by scripts/install-deps.sh) from data files and a
// script written beside each figure (DIR/NAME.dat, DIR/NAME.gp, DIR/NAME.png), so a figure can be
// re-rendered or restyled by hand. When gnuplot is missing the figures are skipped with one
// message; the benchmark's numbers are unaffected.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tarmac::apps {

// One curve: a title and its (x, y) points.
struct PlotSeries {
  PlotSeries(std::string t = "", std::vector<std::pair<double, double>> p = {}) : title(std::move(t)), points(std::move(p)) {}
  std::string title;
  std::vector<std::pair<double, double>> points;
  bool y2 = false;  // against the right-hand axis (PlotSpec::y2label)
};

struct PlotSpec {
  PlotSpec(std::string n, std::string t, std::string x, std::string y)
      : name(std::move(n)), title(std::move(t)), xlabel(std::move(x)), ylabel(std::move(y)) {}
  std::string name;            // file stem: NAME.png
  std::string title, xlabel, ylabel;
  std::string y2label;         // set: a right-hand axis for the series with y2
  std::vector<std::string> xtics;  // set: x is an index into these names (a bar chart's categories)
  std::vector<PlotSeries> series;
  std::string style = "linespoints";  // gnuplot "with" style: lines, linespoints, steps, boxes
  bool logx = false;
  std::string extra;           // more gnuplot commands (set key ..., set y2tics ...)
};

class Plotter {
 public:
  // dir: created when missing. Errors: it cannot be created.
  static Result<Plotter> Create(const std::string& dir);
  // gnuplot is on PATH (else Plot only reports that it skipped).
  bool available() const { return available_; }
  // Writes NAME.dat and NAME.gp and renders NAME.png. Errors name the file or gnuplot's output.
  Status Plot(const PlotSpec& spec) const;
  const std::string& dir() const { return dir_; }
  // The empirical CDF of values (sorted; y = i / n), for a distribution plot.
  static std::vector<std::pair<double, double>> Cdf(std::vector<double> values, double scale = 1.0);

 private:
  std::string dir_;
  bool available_ = false;
};

}  // namespace tarmac::apps
