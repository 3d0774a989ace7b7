// `tarmac report --url` against a running server prints the SLO table (the model, its
// controller state, the request's bucket); a bad URL exits 2, no server 1.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/server_test_util.h"

namespace tarmac::testing {
namespace {

class ReportTest : public TempDirTest {};

TEST_F(ReportTest, PrintsTheServersTable) {
  std::string url;
  {
    ServerProcess srv({"--slo", "premium=5000:1000", "--controller", "on"}, Path("log.txt"));
    ASSERT_TRUE(srv.WaitReady());
    HttpResponse c = Post(srv.port(), "/v1/completions",
                          nlohmann::json{{"model", "wp-11m-f16"}, {"prompt", "Pierre"}, {"max_tokens", 8},
                                         {"sla", "premium"}, {"task", "qa"}}.dump());
    ASSERT_EQ(c.status, 200);
    url = "http://127.0.0.1:" + std::to_string(srv.port());
    RunResult r = RunTarmac({"report", "--url", url}, dir_.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* s : {"SLO targets (p99 TTFT:TPOT): premium=5000:1000 ms", "model wp-11m-f16", "controller: normal",
                          "qa", "premium", "100.0%", "since start"})
      EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
    r = RunTarmac({"report", "--url", url, "--json"}, dir_.string());
    ASSERT_EQ(r.exit_code, 0);
    EXPECT_EQ(nlohmann::json::parse(r.out)["object"], "slo_report");
    EXPECT_EQ(RunTarmac({"report", "--url", "https://x"}, dir_.string()).exit_code, 2);
  }
  // The server is gone: nothing answers.
  EXPECT_EQ(RunTarmac({"report", "--url", url, "--timeout", "2"}, dir_.string()).exit_code, 1);
}

}  // namespace
}  // namespace tarmac::testing
