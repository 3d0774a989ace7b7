#include "base/progress.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

namespace tarmac {
namespace {

std::string Contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) s.append(buf, n);
  return s;
}

TEST(ProgressTest, RendersBarPercentRateAndEta) {
  const std::string s = Progress::Render("bench", 16, 64, 2.0, Progress::Unit::kItems, "requests", 8);
  EXPECT_EQ(s, "bench: [##......]  25%  16/64 requests  8.0/s  ETA 6.0 s");
  EXPECT_EQ(Progress::Render("bench", 64, 64, 4.0, Progress::Unit::kItems, "requests", 4),
            "bench: [####] 100%  64/64 requests  16.0/s");  // done: no ETA
  EXPECT_EQ(Progress::Render("load", 1 << 20, 0, 1.0, Progress::Unit::kBytes, "MiB"), "load: 1.0 MiB  1.0 MiB/s");
  // Before 0.1 s: no rate, no ETA (one chunk over almost no time says nothing).
  EXPECT_EQ(Progress::Render("load", 1, 4, 0.001, Progress::Unit::kItems, "x", 4), "load: [#...]  25%  1/4 x");
}

TEST(ProgressTest, NotATerminalOneLinePerStage) {
  std::FILE* f = std::tmpfile();
  {
    Progress p("bench serve", 10, Progress::Unit::kItems, "requests", Progress::Mode::kAuto, f);
    EXPECT_FALSE(p.terminal());  // a file
    for (int i = 0; i < 10; ++i) p.Add(1);
  }
  const std::string s = Contents(f);
  std::fclose(f);
  EXPECT_EQ(s.find('\r'), std::string::npos) << s;
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 1) << s;
  EXPECT_EQ(s.rfind("bench serve: 10/10 requests in ", 0), 0u) << s;
}

TEST(ProgressTest, TerminalDrawsInPlaceAndEndsTheLine) {
  std::FILE* f = std::tmpfile();
  {
    Progress p("quantize", 4, Progress::Unit::kItems, "tensors", Progress::Mode::kTerminal, f);
    std::this_thread::sleep_for(std::chrono::milliseconds(150));  // past the first 0.1 s: rate and ETA
    p.Add(1);
    p.Finish();
    p.Finish();  // once
  }
  const std::string s = Contents(f);
  std::fclose(f);
  EXPECT_NE(s.find("\rquantize: ["), std::string::npos) << s;
  EXPECT_NE(s.find("ETA"), std::string::npos) << s;  // the first draw, 1 of 4
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 1) << s;
}

TEST(ProgressTest, OffWritesNothing) {
  std::FILE* f = std::tmpfile();
  {
    Progress p("x", 3, Progress::Unit::kItems, "", Progress::Mode::kOff, f);
    p.Set(3);
  }
  EXPECT_EQ(Contents(f), "");
  std::fclose(f);
}

}  // namespace
}  // namespace tarmac
