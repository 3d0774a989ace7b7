// bench serve --sweep and --plot, bench offline --plot, against the real binary: the sweep's
// table has one row per level, each figure is a PNG rendered from data with the run's points,
// and without gnuplot the figures are skipped with a message while the numbers still come.
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "server/server_test_util.h"

namespace tarmac::testing {
namespace {

bool IsPng(const std::string& path) {
  const std::string s = Slurp(path);
  return s.size() > 1000 && s.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
}

// Data lines (not comments, not blank) in a .dat file's block `index` (blocks are separated by
// two blank lines).
int DataLines(const std::string& path, int index) {
  std::istringstream in(Slurp(path));
  std::string line;
  int block = 0, blanks = 0, n = 0;
  while (std::getline(in, line)) {
    if (line.empty()) {
      if (++blanks == 2) ++block;
      continue;
    }
    blanks = 0;
    if (line[0] != '#' && block == index) ++n;
  }
  return n;
}

bool HaveGnuplot() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

class BenchPlotTest : public TempDirTest {};

TEST_F(BenchPlotTest, ServeSweepTableAndFigures) {
  if (!HaveGnuplot()) GTEST_SKIP() << "gnuplot not installed (scripts/install-deps.sh installs gnuplot-nox)";
  ServerProcess srv({"--spec", "draft"}, Path("server.log"));  // the wp-1m draft beside wp-11m: drafts every step
  ASSERT_TRUE(srv.WaitReady()) << Slurp(Path("server.log"));
  const std::string url = "http://127.0.0.1:" + std::to_string(srv.port());
  RunResult r = RunTarmac({"bench", "serve", "--url", url, "--workload", "long-document", "--sweep", "1,3", "--requests", "6", "--max-tokens", "12",
                           "--slo-tpot-ms", "1000", "--plot", Path("plots")}, dir_.string());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Load sweep"), std::string::npos) << r.out;
  // One row per level: concurrency, failed 0, then numbers.
  EXPECT_NE(r.out.find("\n          1      0 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n          3      0 "), std::string::npos) << r.out;
  for (const char* f : {"ttft_cdf", "tpot_cdf", "kv_usage", "sweep"}) {
    EXPECT_TRUE(IsPng(Path(std::string("plots/") + f + ".png"))) << f << "\n" << r.err;
    EXPECT_TRUE(std::filesystem::exists(Path(std::string("plots/") + f + ".gp"))) << f;
  }
  // Each level's distribution has its 6 requests; the sweep curve has both levels.
  EXPECT_EQ(DataLines(Path("plots/ttft_cdf.dat"), 0), 6);
  EXPECT_EQ(DataLines(Path("plots/ttft_cdf.dat"), 1), 6);
  EXPECT_EQ(DataLines(Path("plots/sweep.dat"), 0), 2);
  EXPECT_GT(DataLines(Path("plots/kv_usage.dat"), 0), 0);
  // The draft model proposes every step: the acceptance figure is there too.
  EXPECT_TRUE(IsPng(Path("plots/spec_acceptance.png"))) << r.err;
  EXPECT_TRUE(srv.Alive());
}

TEST_F(BenchPlotTest, ServeSweepJsonAndBadFlags) {
  ServerProcess srv({}, Path("server.log"));
  ASSERT_TRUE(srv.WaitReady()) << Slurp(Path("server.log"));
  const std::string url = "http://127.0.0.1:" + std::to_string(srv.port());
  RunResult r = RunTarmac({"bench", "serve", "--url", url, "--sweep", "2,1", "--requests", "2", "--max-tokens", "4", "--json"},
                          dir_.string());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["levels"].size(), 2u);
  EXPECT_EQ(j["levels"][0]["concurrency"], 2);
  EXPECT_EQ(j["levels"][1]["concurrency"], 1);
  EXPECT_EQ(j["levels"][1]["successful_requests"], 2);
  RunResult rate = RunTarmac({"bench", "serve", "--url", url, "--sweep", "1,2", "--rate", "5"}, dir_.string());
  EXPECT_EQ(rate.exit_code, 2);
  EXPECT_NE(rate.err.find("cannot be combined with --rate"), std::string::npos) << rate.err;
  RunResult zero = RunTarmac({"bench", "serve", "--url", url, "--sweep", "1,0"}, dir_.string());
  EXPECT_NE(zero.exit_code, 0);
  EXPECT_NE((zero.out + zero.err).find("--sweep"), std::string::npos) << zero.out << zero.err;
}

TEST_F(BenchPlotTest, OfflineFiguresAndNoGnuplot) {
  const std::vector<std::string> args = {"bench", "offline", "-m", kWp11m, "--requests", "4", "--concurrency", "2",
                                         "--prompt-len", "16", "--output-len", "8", "--threads", "2"};
  if (HaveGnuplot()) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--plot", Path("plots")});
    RunResult r = RunTarmac(a, dir_.string());
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    for (const char* f : {"ttft_cdf", "tpot_cdf", "kv_usage"}) EXPECT_TRUE(IsPng(Path(std::string("plots/") + f + ".png"))) << f << r.err;
    EXPECT_EQ(DataLines(Path("plots/ttft_cdf.dat"), 0), 4);
    EXPECT_NE(r.err.find("no drafted tokens"), std::string::npos) << r.err;  // speculation off: said, not drawn
  }
  // Without gnuplot on PATH: a clear message, the scripts and data still written, the numbers printed.
  const char* old_path = std::getenv("PATH");
  const std::string saved = old_path ? old_path : "";
  ::setenv("PATH", "/nonexistent", 1);
  std::vector<std::string> a = args;
  a.insert(a.end(), {"--plot", Path("noplot")});
  RunResult r = RunTarmac(a, dir_.string());
  ::setenv("PATH", saved.c_str(), 1);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("gnuplot not found: skipping the PNG figures"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("output"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(Path("noplot/ttft_cdf.gp")));
  EXPECT_FALSE(std::filesystem::exists(Path("noplot/ttft_cdf.png")));
}

}  // namespace
}  // namespace tarmac::testing
