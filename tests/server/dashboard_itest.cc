// GET /dashboard against the real binary: the page and its embedded files are public, the data
// behind them is not (HTTP checks here), and the page works in a real browser: Debian's chromium,
// headless, driven by puppeteer-core (pinned in tests/server/dashboard/package-lock.json) through
// dashboard_test.mjs, which checks the key prompt, a wrong key's message, the charts, the bucket
// table against /metrics and the console. Its screenshot is kept at
// build/test-artifacts/dashboard.png.
#include <cstdlib>
#include <filesystem>

#include "server_test_util.h"

namespace tarmac::testing {
namespace {

const std::string kBrowserDir = TARMAC_SOURCE_DIR "/tests/server/dashboard";
constexpr const char* kKey = "sk-dashboard-test";

class DashboardTest : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    std::ofstream(Path("keys.txt")) << kKey << " tenant-a\n";
  }
  std::string Auth() const { return std::string("Authorization: Bearer ") + kKey + "\r\n"; }
};

TEST_F(DashboardTest, PageAndFilesArePublicTheDataIsNot) {
  ServerProcess srv({"--api-key-file", Path("keys.txt")}, Path("server.log"));
  ASSERT_TRUE(srv.WaitReady()) << Slurp(Path("server.log"));
  for (const char* path : {"/dashboard", "/dashboard/"}) {
    HttpResponse page = Get(srv.port(), path);
    ASSERT_EQ(page.status, 200) << path << ": " << page.body;
    EXPECT_NE(page.Header("content-type").find("text/html"), std::string::npos);
    EXPECT_NE(page.body.find("<script src=\"/dashboard/uPlot.iife.min.js\">"), std::string::npos);
    EXPECT_NE(page.Header("content-security-policy").find("default-src 'self'"), std::string::npos);
  }
  HttpResponse js = Get(srv.port(), "/dashboard/uPlot.iife.min.js");
  ASSERT_EQ(js.status, 200);
  EXPECT_NE(js.Header("content-type").find("text/javascript"), std::string::npos);
  EXPECT_NE(js.body.find("uPlot"), std::string::npos);
  EXPECT_GT(js.body.size(), 20000u);
  EXPECT_EQ(Get(srv.port(), "/dashboard/dashboard.css").status, 200);
  // What the page reads needs the key.
  EXPECT_EQ(Get(srv.port(), "/metrics").status, 401);
  EXPECT_EQ(Get(srv.port(), "/metrics", Auth()).status, 200);
  // Only the embedded files; only GET.
  HttpResponse none = Get(srv.port(), "/dashboard/../metrics");
  EXPECT_EQ(none.status, 404);
  EXPECT_NE(none.body.find("no dashboard file"), std::string::npos) << none.body;
  EXPECT_EQ(Get(srv.port(), "/dashboardx").status, 404);
  HttpResponse post = Post(srv.port(), "/dashboard", "{}");
  EXPECT_EQ(post.status, 405);
  EXPECT_NE(post.body.find("use GET"), std::string::npos) << post.body;
  // Counted under its own route.
  EXPECT_NE(Get(srv.port(), "/metrics", Auth()).body.find("tarmac:http_requests_total{route=\"/dashboard\",code=\"200\"}"),
            std::string::npos);
  EXPECT_TRUE(srv.Alive());
}

TEST_F(DashboardTest, WorksInHeadlessChromium) {
  const char* env = std::getenv("CHROMIUM");
  const std::string chromium = env ? env : "/usr/bin/chromium";
  if (::access(chromium.c_str(), X_OK) != 0)
    GTEST_SKIP() << chromium << " not installed (scripts/install-deps.sh installs Debian's chromium)";
  if (const std::string why = NpmCiOnce(kBrowserDir, Path("npm.log")); !why.empty())
    GTEST_SKIP() << "skipping the browser test: " << why;
  ServerProcess srv({"--api-key-file", Path("keys.txt")}, Path("server.log"));
  ASSERT_TRUE(srv.WaitReady()) << Slurp(Path("server.log"));
  const std::string artifacts = TARMAC_BINARY_DIR "/test-artifacts";
  std::filesystem::create_directories(artifacts);
  const std::string shot = artifacts + "/dashboard.png";
  std::filesystem::remove(shot);
  const std::string cmd = "CHROMIUM=" + chromium + " HOME=" + Path("") + " node " + kBrowserDir + "/dashboard_test.mjs http://127.0.0.1:" +
                          std::to_string(srv.port()) + " wp-11m-f16 " + kKey + " " + shot + " > " + Path("node.log") + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::fprintf(stderr, "%s", Slurp(Path("node.log")).c_str());
  EXPECT_EQ(rc, 0) << Slurp(Path("node.log")) << "\n--- server log ---\n" << Slurp(Path("server.log"));
  EXPECT_TRUE(std::filesystem::exists(shot)) << "no screenshot at " << shot;
  EXPECT_TRUE(srv.Alive());
}

}  // namespace
}  // namespace tarmac::testing
