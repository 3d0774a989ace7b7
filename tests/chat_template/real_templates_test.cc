// Every chat template in ../shared/data/chat-templates, rendered over the conversations in
// conversations.json (with add_generation_prompt off and on), must match Python's Jinja2 byte
// for byte; where Jinja2 raises, tarmac must fail too. Expected renderings are produced at test
// time by render_expected.py (python3 + python3-jinja2, installed by scripts/install-deps.sh)
// into the build directory. Skips when the templates or jinja2 are absent.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chat_template/chat_template.h"

namespace tarmac::chat_template {
namespace {

namespace fs = std::filesystem;

const fs::path kTemplates = fs::path(TARMAC_SHARED_DIR) / "data" / "chat-templates";
const fs::path kHere = fs::path(TARMAC_SOURCE_DIR) / "tests" / "chat_template";

std::string ReadAll(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The fixed moment render_expected.py gives strftime_now: 2024-07-26 09:30:15.
std::tm FixedNow() {
  std::tm tm{};
  tm.tm_year = 124;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 9;
  tm.tm_min = 30;
  tm.tm_sec = 15;
  return tm;
}

TEST(RealTemplates, MatchJinja2ByteForByte) {
  if (!fs::is_directory(kTemplates)) GTEST_SKIP() << kTemplates << " absent";
  // Debian's interpreter first (scripts/install-deps.sh installs python3-jinja2 for it); a
  // python3 earlier on PATH (pyenv, venv) may lack the package.
  std::string python;
  for (const char* candidate : {"/usr/bin/python3", "python3"}) {
    const std::string probe = std::string(candidate) + " -c 'import jinja2' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) {
      python = candidate;
      break;
    }
  }
  if (python.empty()) GTEST_SKIP() << "python3 with jinja2 not available (apt-get install python3-jinja2)";
  const fs::path out = fs::path(TARMAC_BINARY_DIR) / "chat_template_expected.json";
  const std::string cmd = python + " '" + (kHere / "render_expected.py").string() + "' '" + kTemplates.string() +
                          "' '" + (kHere / "conversations.json").string() + "' '" + out.string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto expected = nlohmann::json::parse(ReadAll(out));
  auto convs = nlohmann::ordered_json::parse(ReadAll(kHere / "conversations.json"))["conversations"];

  RenderOptions opts;
  opts.now = FixedNow();
  std::map<std::string, Result<ChatTemplate>> parsed;
  int matched = 0, both_failed = 0, total = 0;
  std::map<std::string, int> mismatches;
  for (const auto& e : expected) {
    const std::string name = e["template"];
    auto it = parsed.find(name);
    if (it == parsed.end()) it = parsed.emplace(name, ChatTemplate::Parse(ReadAll(kTemplates / name))).first;
    nlohmann::ordered_json vars = convs[e["conversation"].get<std::string>()];
    vars["add_generation_prompt"] = e["add_generation_prompt"].get<bool>();
    ++total;
    const std::string what = name + " x " + e["conversation"].get<std::string>() +
                             (e["add_generation_prompt"].get<bool>() ? " (generation prompt)" : "");
    Result<std::string> got = it->second.ok() ? it->second->Render(vars, opts) : Result<std::string>(it->second.status());
    if (e["ok"].get<bool>()) {
      if (!got.ok()) {
        ADD_FAILURE() << what << ": Jinja2 renders but tarmac fails: " << got.status().message();
        ++mismatches[name];
      } else if (*got != e["output"].get<std::string>()) {
        ADD_FAILURE() << what << ": output differs\n--- jinja2:\n" << e["output"].get<std::string>()
                      << "\n--- tarmac:\n" << *got;
        ++mismatches[name];
      } else {
        ++matched;
      }
    } else {
      if (got.ok()) {
        ADD_FAILURE() << what << ": Jinja2 fails (" << e["error"].get<std::string>() << ") but tarmac renders:\n" << *got;
        ++mismatches[name];
      } else {
        ++both_failed;
      }
    }
  }
  std::printf("chat templates: %zu templates x %zu conversations x 2 = %d cases: %d identical, %d fail in both, %zu templates with mismatches\n",
              parsed.size(), convs.size(), total, matched, both_failed, mismatches.size());
  EXPECT_GT(matched, 0);
}

}  // namespace
}  // namespace tarmac::chat_template
