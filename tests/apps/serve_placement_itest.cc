// Where `tarmac serve` puts its engines' compute threads (apps/cmd_serve.cc ModelCpus and
// base/cpu_affinity.h DefaultPlacement): by default each thread gets a CPU of its own when the
// models' threads add up to the CPUs the process may use, checked on the running server's
// own threads (/proc/PID/task/*/status), not only on its log line.
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "base/cpu_affinity.h"
#include "server/server_test_util.h"

namespace tarmac::testing {
namespace {

// The CPU of each of the process's threads that may run on exactly one.
std::multiset<int> SingleCpuThreads(pid_t pid) {
  std::multiset<int> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    const std::string s = Slurp(e.path().string() + "/status"), key = "Cpus_allowed_list:";
    const size_t p = s.find(key);
    if (p == std::string::npos) continue;
    std::string list = s.substr(p + key.size(), s.find('\n', p) - p - key.size());
    list.erase(0, list.find_first_not_of(" \t"));
    if (list.find_first_of(",-") == std::string::npos) out.insert(std::stoi(list));
  }
  return out;
}

class ServePlacementTest : public TempDirTest {};

TEST_F(ServePlacementTest, ThreadsThatFillTheMachineGetACpuEach) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() != 2) GTEST_SKIP() << "the server's test harness runs --threads 2; this needs exactly 2 CPUs";
  ServerProcess srv({}, Path("log.txt"));
  ASSERT_TRUE(srv.WaitReady()) << Slurp(Path("log.txt"));
  EXPECT_NE(Slurp(Path("log.txt")).find("2 thread(s) on CPUs " + std::to_string(allowed[0]) + "," +
                                         std::to_string(allowed[1]) + " (one each)"),
            std::string::npos)
      << Slurp(Path("log.txt"));
  // The step thread and the pool's worker, one on each CPU.
  EXPECT_EQ(SingleCpuThreads(srv.pid()), (std::multiset<int>{allowed[0], allowed[1]}));
}

TEST_F(ServePlacementTest, OffLeavesThemToTheOs) {
  ServerProcess srv({"--pin-threads", "off"}, Path("log.txt"));
  ASSERT_TRUE(srv.WaitReady()) << Slurp(Path("log.txt"));
  EXPECT_NE(Slurp(Path("log.txt")).find("2 thread(s), unpinned"), std::string::npos) << Slurp(Path("log.txt"));
  if (AllowedCpus().size() > 1) {
    EXPECT_TRUE(SingleCpuThreads(srv.pid()).empty());
  }
}

TEST_F(ServePlacementTest, ModelsSplitTheMachineAndConfiguredCpusWin) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() != 2) GTEST_SKIP() << "needs exactly 2 CPUs (one thread per model)";
  {
    std::ofstream(Path("two.yaml")) << "models:\n  - path: " << kWp11m << "\n    threads: 1\n"
                                    << "  - path: " TARMAC_SOURCE_DIR "/models/wp-1m-f16.gguf\n    threads: 1\n";
    ServerProcess srv({"--config", Path("two.yaml"), "--no-warmup"}, Path("log.txt"), /*with_default_model=*/false);
    ASSERT_TRUE(srv.WaitReady()) << Slurp(Path("log.txt"));
    const std::string log = Slurp(Path("log.txt"));
    EXPECT_NE(log.find("'wp-11m-f16': "), std::string::npos) << log;
    EXPECT_NE(log.find("1 thread(s) on CPUs " + std::to_string(allowed[0]) + " (one each)"), std::string::npos) << log;
    EXPECT_NE(log.find("1 thread(s) on CPUs " + std::to_string(allowed[1]) + " (one each)"), std::string::npos) << log;
    EXPECT_EQ(SingleCpuThreads(srv.pid()), (std::multiset<int>{allowed[0], allowed[1]}));
  }
  {
    // One model names its CPUs: the other is left unpinned rather than guessed around it.
    std::ofstream(Path("named.yaml")) << "models:\n  - path: " << kWp11m << "\n    threads: 1\n    cpus: [" << allowed[1]
                                      << "]\n  - path: " TARMAC_SOURCE_DIR "/models/wp-1m-f16.gguf\n    threads: 1\n";
    ServerProcess srv({"--config", Path("named.yaml"), "--no-warmup"}, Path("log2.txt"), /*with_default_model=*/false);
    ASSERT_TRUE(srv.WaitReady()) << Slurp(Path("log2.txt"));
    const std::string log = Slurp(Path("log2.txt"));
    EXPECT_NE(log.find("1 thread(s) on CPUs " + std::to_string(allowed[1]) + " (one each)"), std::string::npos) << log;
    EXPECT_NE(log.find("1 thread(s), unpinned"), std::string::npos) << log;
    EXPECT_EQ(SingleCpuThreads(srv.pid()), (std::multiset<int>{allowed[1]}));
  }
}

}  // namespace
}  // namespace tarmac::testing
