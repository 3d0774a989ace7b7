#include "base/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "base/clock.h"

namespace tarmac {
namespace {

std::string Amount(int64_t n, Progress::Unit unit) {
  if (unit == Progress::Unit::kBytes) return fmt::format("{:.1f}", static_cast<double>(n) / (1024.0 * 1024.0));
  return std::to_string(n);
}

std::string Seconds(double s) {
  if (s < 60) return fmt::format("{:.1f} s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return fmt::format("{}h{:02}m", static_cast<int>(s) / 3600, (static_cast<int>(s) / 60) % 60);
}

}  // namespace

Progress::Progress(std::string stage, int64_t total, Unit unit, std::string unit_name, Mode mode, std::FILE* out)
    : stage_(std::move(stage)), unit_name_(unit == Unit::kBytes ? "MiB" : std::move(unit_name)), total_(total),
      unit_(unit), mode_(mode), out_(out) {
  if (mode_ == Mode::kAuto) mode_ = (out_ && isatty(fileno(out_))) ? Mode::kTerminal : Mode::kPlain;
  start_s_ = NowSeconds();
}

Progress::~Progress() { Finish(); }

void Progress::Add(int64_t n) {
  done_.fetch_add(n, std::memory_order_relaxed);
  if (mode_ == Mode::kTerminal) Draw(false);
}

void Progress::Set(int64_t done) {
  done_.store(done, std::memory_order_relaxed);
  if (mode_ == Mode::kTerminal) Draw(false);
}

std::string Progress::Render(const std::string& stage, int64_t done, int64_t total, double elapsed_s, Unit unit,
                             const std::string& unit_name, int width) {
  std::string s = stage + ": ";
  const std::string units = unit_name.empty() ? "" : " " + unit_name;
  const double rate = elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0;
  // No rate (nor ETA) before 0.1 s: one chunk over almost no time says nothing.
  const bool timed = elapsed_s >= 0.1;
  const std::string rate_s = !timed ? "" : unit == Unit::kBytes ? fmt::format("  {:.1f} MiB/s", rate / (1024.0 * 1024.0))
                                                                : fmt::format("  {:.1f}/s", rate);
  if (total > 0) {
    const double f = std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0);
    const int fill = static_cast<int>(std::lround(f * width));
    // Appended piece by piece: GCC 12 misreads "[" + a temporary string as an overlapping copy
    // (-Wrestrict, a false positive in its own headers).
    s += '[';
    s.append(static_cast<size_t>(fill), '#');
    s.append(static_cast<size_t>(width - fill), '.');
    s += "] ";
    s += fmt::format("{:3.0f}%  {}/{}{}{}", 100 * f, Amount(done, unit), Amount(total, unit), units, rate_s);
    if (timed && done > 0 && done < total) s += "  ETA " + Seconds(elapsed_s * static_cast<double>(total - done) / static_cast<double>(done));
  } else {
    s += fmt::format("{}{}{}", Amount(done, unit), units, rate_s);
  }
  return s;
}

void Progress::Draw(bool force) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  const double now = NowSeconds();
  if (!force && last_draw_s_ >= 0 && now - last_draw_s_ < 0.1) return;
  last_draw_s_ = now;
  const std::string line = Render(stage_, done_.load(), total_, now - start_s_, unit_, unit_name_);
  std::fprintf(out_, "\r%s\033[K", line.c_str());
  std::fflush(out_);
}

void Progress::Note(const std::string& line) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (mode_ == Mode::kOff) return;
    std::fprintf(out_, "%s%s\n", mode_ == Mode::kTerminal ? "\r\033[K" : "", line.c_str());
    last_draw_s_ = -1;
  }
  if (mode_ == Mode::kTerminal) Draw(true);
}

void Progress::Finish() {
  if (mode_ == Mode::kOff) return;
  if (mode_ == Mode::kTerminal) Draw(true);
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  const double elapsed = NowSeconds() - start_s_;
  const int64_t done = done_.load();
  if (mode_ == Mode::kTerminal) {
    std::fprintf(out_, "\n");
  } else {
    const std::string units = unit_name_.empty() ? "" : " " + unit_name_;
    if (total_ > 0)
      std::fprintf(out_, "%s: %s/%s%s in %s\n", stage_.c_str(), Amount(done, unit_).c_str(), Amount(total_, unit_).c_str(),
                   units.c_str(), Seconds(elapsed).c_str());
    else
      std::fprintf(out_, "%s: %s%s in %s\n", stage_.c_str(), Amount(done, unit_).c_str(), units.c_str(), Seconds(elapsed).c_str());
  }
  std::fflush(out_);
}

}  // namespace tarmac
