#include "apps/plots.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

namespace tarmac::apps {
namespace {

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

Result<Plotter> Plotter::Create(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) return InvalidArgument("--plot {}: cannot create the directory ({})", dir, ec.message());
  Plotter p;
  p.dir_ = dir;
  p.available_ = std::system("command -v gnuplot >/dev/null 2>&1") == 0;
  return p;
}

std::vector<std::pair<double, double>> Plotter::Cdf(std::vector<double> values, double scale) {
  std::sort(values.begin(), values.end());
  std::vector<std::pair<double, double>> out;
  for (size_t i = 0; i < values.size(); ++i)
    out.emplace_back(values[i] * scale, static_cast<double>(i + 1) / static_cast<double>(values.size()));
  return out;
}

Status Plotter::Plot(const PlotSpec& spec) const {
  const std::string base = (std::filesystem::path(dir_) / spec.name).string();
  {
    std::ofstream dat(base + ".dat");
    if (!dat) return IoError("cannot write {}.dat", base);
    for (const PlotSeries& s : spec.series) {  // one gnuplot data block per series
      dat << "# " << s.title << "\n";
      for (const auto& [x, y] : s.points) {
        const size_t i = static_cast<size_t>(x);
        if (!spec.xtics.empty() && x >= 0 && i < spec.xtics.size())
          dat << fmt::format("{:.9g} {:.9g} {}\n", x, y, Quote(spec.xtics[i]));
        else
          dat << fmt::format("{:.9g} {:.9g}\n", x, y);
      }
      if (s.points.empty()) dat << "nan nan\n";
      dat << "\n\n";
    }
  }
  std::string gp = fmt::format(
      "set terminal pngcairo size 900,540 noenhanced font 'sans,10'\nset output {}\nset title {}\nset xlabel {}\n"
      "set ylabel {}\nset grid\nset key outside right top\n",
      Quote(base + ".png"), Quote(spec.title), Quote(spec.xlabel), Quote(spec.ylabel));
  if (spec.logx) gp += "set logscale x 2\n";
  if (spec.style == "boxes") gp += "set style fill solid 0.6 border -1\nset boxwidth 0.6\nset yrange [0:*]\n";
  if (!spec.y2label.empty()) gp += fmt::format("set y2label {}\nset y2tics\nset ytics nomirror\n", Quote(spec.y2label));
  if (!spec.xtics.empty()) gp += "set xtics rotate by -30\nset xrange [-0.5:" + std::to_string(spec.xtics.size()) + "-0.5]\n";
  gp += spec.extra;
  gp += "plot ";
  for (size_t i = 0; i < spec.series.size(); ++i) {
    if (i) gp += ", \\\n     ";
    gp += fmt::format("{} index {} using 1:2{} with {} lw 2{} title {}", Quote(base + ".dat"), i,
                      spec.xtics.empty() ? "" : ":xtic(3)", spec.style, spec.series[i].y2 ? " axes x1y2" : "",
                      Quote(spec.series[i].title));
  }
  gp += "\n";
  {
    std::ofstream f(base + ".gp");
    if (!f) return IoError("cannot write {}.gp", base);
    f << gp;
  }
  if (!available_) return Status::Ok();
  const std::string log = base + ".gnuplot.log";
  const int rc = std::system(("gnuplot " + Quote(base + ".gp") + " > " + Quote(log) + " 2>&1").c_str());
  std::ifstream lf(log);
  std::string out((std::istreambuf_iterator<char>(lf)), {});
  std::filesystem::remove(log);
  if (rc != 0) return Internal("gnuplot failed on {}.gp: {}", base, out);
  return Status::Ok();
}

}  // namespace tarmac::apps
