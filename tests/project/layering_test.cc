// The module layering of ../shared/docs/DESIGN.md, enforced at the include level: a file of
// module M may include headers of M and of the modules below M only. The link-time check
// (each module's CMake library links only those below it) misses includes of header-only
// pieces; this one reads every #include in src/.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Bottom to top, as DESIGN.md's module table lists them ("spec" there is src/speculative;
// grammar sits between chat_template and metrics; kvevents, the KV-event publisher DESIGN.md
// lists under server, is its own module just above engine).
const std::vector<std::string> kOrder = {"base",    "tensor", "kernels", "gguf",        "tokenizer", "chat_template",
                                         "grammar", "metrics", "model",  "kv",          "prefix",    "sampling",
                                         "speculative", "sched", "engine", "kvevents", "router",     "cache",     "control", "config",
                                         "server",  "apps"};

int Rank(const std::string& m) {
  auto it = std::find(kOrder.begin(), kOrder.end(), m);
  return it == kOrder.end() ? -1 : static_cast<int>(it - kOrder.begin());
}

const fs::path kSrc = fs::path(TARMAC_SOURCE_DIR) / "src";

// Project includes ("module/file.h") of one file.
std::vector<std::string> Includes(const fs::path& file) {
  static const std::regex re(R"re(^\s*#\s*include\s+"([^"]+)")re");
  std::vector<std::string> out;
  std::ifstream in(file);
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, re)) out.push_back(m[1]);
  return out;
}

std::vector<fs::path> SourceFiles() {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(kSrc)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".h" || ext == ".cc")) files.push_back(e.path());
  }
  return files;
}

std::string ModuleOf(const fs::path& file) { return fs::relative(file, kSrc).begin()->string(); }

TEST(Layering, EveryModuleHasARank) {
  for (const auto& e : fs::directory_iterator(kSrc)) {
    if (e.is_directory()) {
      EXPECT_GE(Rank(e.path().filename().string()), 0) << e.path() << ": add it to kOrder (and DESIGN.md)";
    }
  }
}

TEST(Layering, ModulesIncludeOnlyModulesBelowThem) {
  int checked = 0;
  for (const fs::path& f : SourceFiles()) {
    const std::string from = ModuleOf(f);
    for (const std::string& inc : Includes(f)) {
      const size_t slash = inc.find('/');
      ASSERT_NE(slash, std::string::npos) << f << " includes \"" << inc << "\" without its module directory";
      const std::string to = inc.substr(0, slash);
      if (!fs::is_directory(kSrc / to)) continue;  // a library's header (hwy/...)
      EXPECT_LE(Rank(to), Rank(from)) << fs::relative(f, kSrc) << " (" << from << ") includes \"" << inc
                                      << "\" of " << to << ", which is not below it";
      ++checked;
    }
  }
  EXPECT_GT(checked, 300);
}

// The order agrees with DESIGN.md's module table (where the shared docs are present).
TEST(Layering, OrderMatchesTheDesign) {
  std::ifstream in(fs::path(TARMAC_SHARED_DIR) / "docs" / "DESIGN.md");
  if (!in) GTEST_SKIP() << "DESIGN.md absent";
  std::vector<std::string> design;
  static const std::regex row(R"re(^\|\s*([a-z_]+)\s*\|)re");
  std::string line;
  std::smatch m;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.rfind("## Modules", 0) == 0) in_table = true;
    else if (in_table && line.rfind("## ", 0) == 0) break;
    if (in_table && std::regex_search(line, m, row) && m[1] != "module") design.push_back(m[1] == "spec" ? "speculative" : std::string(m[1]));
  }
  ASSERT_GT(design.size(), 10u);
  // DESIGN.md's table now lists grammar and kvevents near its end, with the modules their
  // features serve; in the code they sit where kOrder's comment says (sampling and the engine
  // include grammar's masks, kvevents publishes the engine's events). The rest keep its order.
  static const std::set<std::string> kPlacedByTheCode = {"grammar", "kvevents"};
  int last = -1;
  for (const std::string& d : design) {
    if (kPlacedByTheCode.count(d) > 0) continue;
    const int r = Rank(d);
    ASSERT_GE(r, 0) << d << " (DESIGN.md) is missing from kOrder";
    EXPECT_GT(r, last) << d << " is out of DESIGN.md's order";
    last = r;
  }
}

// The server's headers do not reach the kernels or the model through their includes: the
// engine's client-facing headers declare what they need.
TEST(Layering, ServerHeadersDoNotPullInKernelsOrModel) {
  std::map<std::string, std::vector<std::string>> incs;
  for (const fs::path& f : SourceFiles()) incs[fs::relative(f, kSrc).string()] = Includes(f);
  for (const auto& [file, direct] : incs) {
    if (file.rfind("server/", 0) != 0 || file.substr(file.size() - 2) != ".h") continue;
    std::set<std::string> seen;
    std::vector<std::string> todo = direct;
    while (!todo.empty()) {
      const std::string h = todo.back();
      todo.pop_back();
      if (!seen.insert(h).second) continue;
      EXPECT_NE(h.rfind("kernels/", 0), 0u) << file << " reaches " << h;
      EXPECT_NE(h.rfind("model/llama_model", 0), 0u) << file << " reaches " << h;
      if (auto it = incs.find(h); it != incs.end()) todo.insert(todo.end(), it->second.begin(), it->second.end());
    }
  }
}

}  // namespace
