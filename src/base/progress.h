// Progress: a progress bar with rate and ETA for long work (benchmark runs, loading weights),
// drawn in place on a terminal (at most 10 times a second) and quiet elsewhere: when the output
// is not a terminal, one line per stage when it ends ("STAGE: 64/64 requests in 3.2 s").
//
// Thread-safe: Add and Set may be called from any thread; Finish once (the destructor calls it).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace tarmac {

class Progress {
 public:
  enum class Mode { kAuto, kTerminal, kPlain, kOff };  // kAuto: kTerminal when `out` is a tty
  enum class Unit { kItems, kBytes };

  // total: units of work (0: unknown; no bar, no ETA). unit_name: "requests", "tensors", ...
  // (kItems only; kBytes prints MiB).
  Progress(std::string stage, int64_t total, Unit unit = Unit::kItems, std::string unit_name = "",
           Mode mode = Mode::kAuto, std::FILE* out = stderr);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void Add(int64_t n);
  void Set(int64_t done);
  void Finish();
  // A line of its own (a warning, a note) without breaking the bar: printed above it.
  void Note(const std::string& line);
  bool terminal() const { return mode_ == Mode::kTerminal; }

  // "[#####.....]  50%  32/64 requests  12.3/s  ETA 2.6 s" (width: the bar's characters).
  static std::string Render(const std::string& stage, int64_t done, int64_t total, double elapsed_s, Unit unit,
                            const std::string& unit_name, int width = 24);

 private:
  void Draw(bool force);

  std::string stage_, unit_name_;
  int64_t total_;
  Unit unit_;
  Mode mode_;
  std::FILE* out_;
  std::atomic<int64_t> done_{0};
  std::mutex mu_;
  double start_s_ = 0, last_draw_s_ = -1;
  bool finished_ = false;
};

}  // namespace tarmac
