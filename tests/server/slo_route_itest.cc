// GET /v1/slo end to end: the report's shape after a few requests (their buckets, tiers,
// attainment), the same auth as every route, and the controller's "exactly today's behaviour"
// before it has estimates: with it on, greedy completions, knobs and admission are what they
// are with it off, and it has taken no action. Bad --slo / --controller flags exit 2 naming
// the value.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "server_test_util.h"

namespace tarmac::testing {
namespace {

using Json = nlohmann::json;
const std::string kModel = "wp-11m-f16";

class SloRouteTest : public TempDirTest {};

std::vector<std::string> Completions(int port) {
  std::vector<std::string> out;
  for (const char* p : {"Prince Andrew looked at", "Natasha said", "The count"}) {
    HttpResponse r = Post(port, "/v1/completions",
                          Json{{"model", kModel}, {"prompt", p}, {"max_tokens", 24}, {"temperature", 0},
                               {"sla", "premium"}, {"task", "qa"}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    out.push_back(Json::parse(r.body)["choices"][0]["text"].get<std::string>());
  }
  return out;
}

TEST_F(SloRouteTest, ReportsBucketsTiersAndTheControllerOffState) {
  ServerProcess srv({"--slo", "premium=5000:1000", "--slo", "standard=9000:2000"}, Path("log.txt"));
  ASSERT_TRUE(srv.WaitReady());
  Completions(srv.port());
  HttpResponse r = Get(srv.port(), "/v1/slo");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.headers.find("application/json"), std::string::npos);
  const Json j = Json::parse(r.body);
  EXPECT_EQ(j["object"], "slo_report");
  ASSERT_EQ(j["tiers"].size(), 2u);
  EXPECT_EQ(j["tiers"][0]["name"], "premium");
  EXPECT_TRUE(j["tiers"][1]["lowest"].get<bool>());
  EXPECT_FALSE(j["controller"]["enabled"].get<bool>());
  const Json& m = j["models"][0];
  EXPECT_EQ(m["model"], kModel);
  EXPECT_TRUE(m["controller"].is_null());
  ASSERT_EQ(m["buckets"].size(), 1u);
  const Json& b = m["buckets"][0];
  EXPECT_EQ(b["labels"]["task"], "qa");
  EXPECT_EQ(b["slo"]["tier"], "premium");
  EXPECT_EQ(b["window"]["requests"], 3);
  EXPECT_EQ(b["total"]["requests"], 3);
  EXPECT_EQ(b["window"]["ttft_ms"]["count"], 3);
  EXPECT_DOUBLE_EQ(b["window"]["slo_attainment"].get<double>(), 1.0);
  EXPECT_EQ(b["window"]["output_tokens"], 72);
  for (const char* k : {"ttft_ms", "tpot_ms", "e2e_ms", "queue_ms"})
    for (const char* q : {"p50", "p95", "p99"}) EXPECT_TRUE(b["total"][k][q].is_number()) << k << q;
  // Wrong method.
  EXPECT_EQ(RawExchange(srv.port(), Request("POST", "/v1/slo", "{}")).status, 405);
}

TEST_F(SloRouteTest, NeedsTheKeyLikeEveryRoute) {
  const std::string keys = Path("keys.txt");
  std::ofstream(keys) << "sk-test-123456 tenant-a\n";
  ServerProcess srv({"--api-key-file", keys}, Path("log.txt"));
  ASSERT_TRUE(srv.WaitReady());
  EXPECT_EQ(Get(srv.port(), "/v1/slo").status, 401);
  EXPECT_EQ(Get(srv.port(), "/v1/slo", "Authorization: Bearer sk-test-123456\r\n").status, 200);
}

TEST_F(SloRouteTest, ControllerOnWithoutEstimatesChangesNothing) {
  std::vector<std::string> off, on;
  Json knobs_on;
  {
    ServerProcess srv({"--slo", "premium=1:1"}, Path("off.txt"));
    ASSERT_TRUE(srv.WaitReady());
    off = Completions(srv.port());
  }
  {
    // Targets every request misses, but 3 requests are below --controller-min-samples: no
    // estimate, so no action.
    ServerProcess srv({"--slo", "premium=1:1", "--controller", "on", "--controller-interval", "0.05",
                       "--controller-min-samples", "8"}, Path("on.txt"));
    ASSERT_TRUE(srv.WaitReady());
    on = Completions(srv.port());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a few ticks
    const Json j = Json::parse(Get(srv.port(), "/v1/slo").body);
    ASSERT_TRUE(j["controller"]["enabled"].get<bool>());
    const Json& c = j["models"][0]["controller"];
    EXPECT_EQ(c["state"], "normal");
    EXPECT_TRUE(c["actions_total"].empty()) << c.dump();
    EXPECT_TRUE(c["measures"].empty());
    // What the controller judges: the one tier with targets over the control window, with too
    // few samples to act on.
    const Json& tiers = j["models"][0]["control_window_tiers"];
    ASSERT_EQ(tiers.size(), 1u) << j.dump();
    EXPECT_EQ(tiers[0]["tier"], "premium");
    EXPECT_EQ(tiers[0]["ttft_target_ms"], 1);
    EXPECT_EQ(tiers[0]["samples"].get<int>(), 3);
    EXPECT_GT(tiers[0]["p99_ttft_ms"].get<double>(), 0);
    knobs_on = c["knobs"];
    EXPECT_FALSE(c["lowest_tiers"]["shed"].get<bool>());
    EXPECT_TRUE(c["lowest_tiers"]["max_tokens_cap"].is_null());
    EXPECT_NE(Slurp(Path("on.txt")).find("degradation controller on"), std::string::npos);
  }
  EXPECT_EQ(on, off);
  // The engine's knobs are its configured ones.
  EXPECT_EQ(knobs_on["max_batched_tokens"], 512);
  EXPECT_TRUE(knobs_on["speculation"].get<bool>());
  EXPECT_TRUE(knobs_on["bucket_max_k"].empty());
  EXPECT_TRUE(knobs_on["admit_max_priority"].is_null());
}

TEST_F(SloRouteTest, BenchServeClassifiesRequestsAsTheServerDoes) {
  ServerProcess srv({"--slo", "premium=100000:100000"}, Path("log.txt"));
  ASSERT_TRUE(srv.WaitReady());
  const std::string url = "http://127.0.0.1:" + std::to_string(srv.port());
  RunResult r = RunTarmac({"bench", "serve", "--url", url, "--workload", "long-document", "--concurrency", "2",
                           "--requests", "4", "--max-tokens", "8", "--task", "summarize", "--sla", "premium",
                           "--priority", "1", "--temperature", "0", "--slo", "premium=100000:100000", "--json"},
                          dir_.string());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const Json client = Json::parse(r.out)["slo_report"]["models"][0]["buckets"];
  const Json server = Json::parse(Get(srv.port(), "/v1/slo").body)["models"][0]["buckets"];
  ASSERT_EQ(client.size(), 1u) << client.dump();
  ASSERT_EQ(server.size(), 1u) << server.dump();
  EXPECT_EQ(client[0]["key"], server[0]["key"]);
  EXPECT_EQ(client[0]["labels"]["priority_class"], "low");
  EXPECT_EQ(client[0]["total"]["requests"], 4);
  EXPECT_DOUBLE_EQ(client[0]["total"]["slo_attainment"].get<double>(), 1.0);
  // The text form prints the same table.
  r = RunTarmac({"bench", "serve", "--url", url, "--workload", "long-document", "--concurrency", "1", "--requests", "1",
                 "--max-tokens", "4", "--task", "summarize"}, dir_.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("since start"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("summarize"), std::string::npos) << r.out;
}

TEST_F(SloRouteTest, BadFlagsExitTwoNamingTheValue) {
  struct Case {
    std::vector<std::string> args;
    const char* needle;
  };
  for (const Case& c : {Case{{"--slo", "premium"}, "premium"}, Case{{"--slo", "premium=10:x"}, "'x'"},
                        Case{{"--slo", "a=1:1", "--slo", "a=2:2"}, "listed twice"},
                        Case{{"--controller", "maybe"}, "maybe"},
                        Case{{"--kv-high-watermark", "0.5", "--kv-low-watermark", "0.6"}, "--kv-low-watermark"},
                        Case{{"--controller-interval", "2", "--controller-window", "1"}, "--controller-window"}}) {
    std::vector<std::string> args = {"serve", "-m", kWp11m, "--port", "0"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    RunResult r = RunTarmac(args, dir_.string());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace tarmac::testing
