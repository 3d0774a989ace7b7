// The official `openai` npm package (pinned in tests/server/openai_client/package-lock.json,
// installed here with `npm ci`) as a client of `tarmac serve`: runs client_test.mjs against a
// started server. Skips with a message when node/npm are missing or the install fails.
#include <cstdlib>

#include "server_test_util.h"

namespace tarmac::testing {
namespace {

const std::string kClientDir = TARMAC_SOURCE_DIR "/tests/server/openai_client";

class OpenAiClientTest : public TempDirTest {
 protected:
  // Installs the client (or skips) and writes the API key file.
  void SetUp() override {
    TempDirTest::SetUp();
    if (const std::string why = NpmCiOnce(kClientDir, Path("npm.log")); !why.empty())
      GTEST_SKIP() << "skipping the openai npm client test: " << why;
    std::ofstream f(Path("keys.txt"));
    f << "sk-test-openai-client tenant-a\n";
  }
};

TEST_F(OpenAiClientTest, OfficialClientWorksUnchanged) {
  ServerProcess srv({"--api-key-file", Path("keys.txt")}, Path("server.log"));
  ASSERT_TRUE(srv.WaitReady()) << Slurp(Path("server.log"));
  const std::string cmd = "node " + kClientDir + "/client_test.mjs http://127.0.0.1:" + std::to_string(srv.port()) +
                          "/v1 wp-11m-f16 sk-test-openai-client > " + Path("node.log") + " 2>&1";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << Slurp(Path("node.log")) << "\n--- server log ---\n" << Slurp(Path("server.log"));
  std::fprintf(stderr, "%s", Slurp(Path("node.log")).c_str());
  EXPECT_TRUE(srv.Alive());
}

// The same client against a route: `model: "auto"`, a cascade that escalates some requests.
TEST_F(OpenAiClientTest, OfficialClientWorksAgainstARoute) {
  std::ofstream(Path("tarmac.yaml")) << "models:\n  - {path: " TARMAC_SOURCE_DIR "/models/wp-1m-f16.gguf, name: small}\n"
                                     << "  - {path: " << kWp11m << ", name: large}\n"
                                     << "routes:\n  - {name: auto, baseline: large, policy: {cascade: "
                                        "{small: small, large: large, k: 4, min_mean_logprob: -2.0}}}\n";
  ServerProcess srv({"--config", Path("tarmac.yaml"), "--api-key-file", Path("keys.txt")}, Path("server.log"), false);
  ASSERT_TRUE(srv.WaitReady()) << Slurp(Path("server.log"));
  const std::string cmd = "node " + kClientDir + "/client_test.mjs http://127.0.0.1:" + std::to_string(srv.port()) +
                          "/v1 auto sk-test-openai-client > " + Path("node.log") + " 2>&1";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << Slurp(Path("node.log")) << "\n--- server log ---\n" << Slurp(Path("server.log"));
  std::fprintf(stderr, "%s", Slurp(Path("node.log")).c_str());
  const std::string met = Get(srv.port(), "/metrics", "Authorization: Bearer sk-test-openai-client\r\n").body;
  EXPECT_NE(met.find("tarmac:route_requests_total{route=\"auto\""), std::string::npos);
  EXPECT_TRUE(srv.Alive());
}

}  // namespace
}  // namespace tarmac::testing
