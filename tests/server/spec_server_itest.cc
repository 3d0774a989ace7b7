// `tarmac serve --spec draft`: greedy completions are the same with speculation on and with
// the per-request override `speculative: false`; speculation metrics are exported per bucket.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server_test_util.h"

namespace tarmac::testing {
namespace {

using Json = nlohmann::json;
const std::string kModel = "wp-11m-f16";

class SpecServerTest : public TempDirTest {};

TEST_F(SpecServerTest, SpeculationKeepsGreedyOutputAndExportsMetrics) {
  ServerProcess srv({"--spec", "draft", "--spec-k", "3"}, Path("log.txt"));
  ASSERT_TRUE(srv.WaitReady());
  auto complete = [&](bool speculative) {
    Json body = {{"model", kModel},       {"prompt", "Prince Andrew looked at Pierre and"},
                 {"max_tokens", 32},      {"temperature", 0},
                 {"speculative", speculative}, {"task", "qa"}};
    HttpResponse r = Post(srv.port(), "/v1/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return Json::parse(r.body)["choices"][0]["text"].get<std::string>();
  };
  const std::string on = complete(true), off = complete(false);
  EXPECT_EQ(on, off);
  EXPECT_FALSE(on.empty());
  const std::string met = Get(srv.port(), "/metrics").body;
  // The request's bucket carries the same labels in the speculation series and in the request
  // histograms (one definition, computed once at admission).
  const std::string labels =
      "{model_name=\"wp-11m-f16\",prompt_band=\"0-127\",output_band=\"1-63\",task=\"qa\",sla=\"standard\","
      "temperature_band=\"0\",risk=\"low\",priority_class=\"normal\"}";
  EXPECT_NE(met.find("tarmac:spec_decode_num_draft_tokens_total" + labels), std::string::npos) << met.substr(0, 3000);
  EXPECT_NE(met.find("tarmac:time_to_first_token_seconds_count" + labels + " 2"), std::string::npos);
  EXPECT_NE(met.find("tarmac:window_time_per_output_token_seconds_count" + labels + " 2"), std::string::npos);
  EXPECT_NE(met.find("tarmac:spec_decode_num_accepted_tokens_per_pos_total"), std::string::npos);
  // A bad override is a 400 naming the parameter.
  HttpResponse bad = Post(srv.port(), "/v1/completions",
                          Json{{"model", kModel}, {"prompt", "a"}, {"speculative", "yes"}}.dump());
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("speculative"), std::string::npos);
}

TEST_F(SpecServerTest, BadSpecFlagsExitTwo) {
  for (std::vector<std::string> args :
       {std::vector<std::string>{"serve", "-m", kWp11m, "--spec", "draft", "--draft-model", "/nonexistent.gguf"},
        std::vector<std::string>{"serve", "-m", kWp11m, "--spec", "fast"}}) {
    auto r = RunTarmac(args, dir_.string());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_FALSE(r.err.empty());
  }
}

}  // namespace
}  // namespace tarmac::testing
