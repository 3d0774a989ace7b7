// `tarmac serve --config` with routes: a cascade forced to escalate answers as wp-11m would and
// says so (model, tarmac object, x-tarmac-route), forced to keep answers as wp-1m would;
// streamed and non-streamed answers are identical; feedback (404 for an unknown id, 400 for a
// bad score); a model whose queue is full sends traffic to the baseline with no 5xx; tenant
// defaults reach the request bucket; a bad config fails at start naming the entry.
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <map>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "server_test_util.h"

namespace tarmac::testing {
namespace {

using Json = nlohmann::json;
const std::string kWp1mPath = TARMAC_SOURCE_DIR "/models/wp-1m-f16.gguf";

class RouteServerTest : public TempDirTest {
 protected:
  // Writes a config with wp-1m ("small") and wp-11m ("large") and the given routes section.
  std::string Config(const std::string& routes, const std::string& small_extra = "", const std::string& more = "") {
    const std::string path = Path("tarmac.yaml");
    std::ofstream(path) << "models:\n"
                        << "  - {path: " << kWp1mPath << ", name: small, tier: small" << small_extra << "}\n"
                        << "  - {path: " << kWp11m << ", name: large, tier: large}\n"
                        << more << "routes:\n"
                        << routes;
    return path;
  }
  std::unique_ptr<ServerProcess> Start(const std::string& config, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--config", config, "--no-warmup"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto s = std::make_unique<ServerProcess>(args, Path("log.txt"), /*with_default_model=*/false);
    EXPECT_TRUE(s->WaitReady()) << Slurp(Path("log.txt"));
    return s;
  }
};

Json Completion(const std::string& model, bool stream = false) {
  return {{"model", model}, {"prompt", "Prince Andrew looked at"}, {"max_tokens", 16}, {"temperature", 0},
          {"stream", stream}};
}

std::string StreamedText(const std::string& body, Json* last_chunk) {
  std::string text;
  size_t p = 0;
  while ((p = body.find("data: ", p)) != std::string::npos) {
    const size_t e = body.find("\n\n", p);
    const std::string d = body.substr(p + 6, e - p - 6);
    p = e;
    if (d == "[DONE]") break;
    Json j = Json::parse(d);
    if (j.contains("choices") && !j["choices"].empty()) text += j["choices"][0].value("text", "");
    *last_chunk = j;
  }
  return text;
}

TEST_F(RouteServerTest, CascadeForcedToEscalateOrKeepAnswersAsTheLargeOrTheSmallModel) {
  auto srv = Start(Config(
      "  - {name: up, baseline: large, policy: {cascade: {small: small, large: large, k: 8, min_mean_logprob: 1000}}}\n"
      "  - {name: down, baseline: large, policy: {cascade: {small: small, large: large, k: 8, min_mean_logprob: -1000}}}\n"));
  const int port = srv->port();
  auto text = [&](const Json& body, HttpResponse* r) {
    *r = Post(port, "/v1/completions", body.dump());
    EXPECT_EQ(r->status, 200) << r->body;
    return Json::parse(r->body)["choices"][0]["text"].get<std::string>();
  };
  HttpResponse r;
  const std::string large = text(Completion("large"), &r), small = text(Completion("small"), &r);
  EXPECT_TRUE(r.Header("x-tarmac-route").empty());  // a model by name is not routed
  ASSERT_NE(large, small);
  EXPECT_EQ(text(Completion("up"), &r), large);
  Json body = Json::parse(r.body);
  EXPECT_EQ(body["model"], "large");
  EXPECT_EQ(body["tarmac"]["escalated"], true);
  EXPECT_EQ(body["tarmac"]["route"], "up");
  EXPECT_NE(r.Header("x-tarmac-route").find("escalated=yes"), std::string::npos) << r.headers;
  EXPECT_EQ(text(Completion("down"), &r), small);
  body = Json::parse(r.body);
  EXPECT_EQ(body["model"], "small");
  EXPECT_EQ(body["tarmac"]["escalated"], false);
  // Streamed: the same text, the same route, said in the headers and the last chunk.
  for (const char* route : {"up", "down"}) {
    HttpResponse s = Post(port, "/v1/completions", Completion(route, true).dump());
    ASSERT_EQ(s.status, 200);
    Json last;
    EXPECT_EQ(StreamedText(s.body, &last), std::string(route) == "up" ? large : small) << route;
    EXPECT_EQ(last["model"], std::string(route) == "up" ? "large" : "small");
    EXPECT_EQ(last["tarmac"]["route"], route);
    EXPECT_NE(s.Header("x-tarmac-route").find(std::string("route=") + route), std::string::npos);
  }
  // Routes are listed as models.
  const std::string models = Get(port, "/v1/models").body;
  EXPECT_NE(models.find("\"id\":\"up\""), std::string::npos) << models;
  const std::string met = Get(port, "/metrics").body;
  EXPECT_NE(met.find("tarmac:route_requests_total{route=\"up\",model_name=\"large\",outcome=\"escalated\""), std::string::npos)
      << met.substr(0, 4000);
  EXPECT_NE(met.find("tarmac:route_requests_total{route=\"down\",model_name=\"small\",outcome=\"served\""), std::string::npos);
}

TEST_F(RouteServerTest, FeedbackIsAcceptedForARoutedResponseOnly) {
  auto srv = Start(Config(
      "  - name: auto\n    baseline: large\n    policy: {argmin: {models: [small, large], explore: 0}}\n"));
  const int port = srv->port();
  HttpResponse r = Post(port, "/v1/completions", Completion("auto").dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string id = Json::parse(r.body)["id"];
  EXPECT_EQ(Post(port, "/v1/feedback", Json{{"id", id}, {"score", 0.8}}.dump()).status, 200);
  HttpResponse unknown = Post(port, "/v1/feedback", Json{{"id", "cmpl-nope"}, {"score", 0.8}}.dump());
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.body.find("\"param\":\"id\""), std::string::npos) << unknown.body;
  for (const Json& bad : {Json{{"id", id}, {"score", 1.5}}, Json{{"id", id}, {"score", -0.1}}, Json{{"id", id}},
                          Json{{"id", id}, {"score", "high"}}, Json{{"id", id}, {"score", 0.5}, {"extra", 1}}}) {
    HttpResponse b = Post(port, "/v1/feedback", bad.dump());
    EXPECT_EQ(b.status, 400) << bad.dump() << " -> " << b.body;
  }
  const std::string met = Get(port, "/metrics").body;
  EXPECT_EQ(MetricValue(met, "tarmac:route_feedback_total{route=\"auto\""), 1.0) << met.substr(0, 3000);
}

TEST_F(RouteServerTest, AFullQueueSendsTrafficToTheBaselineWithoutErrors) {
  auto srv = Start(Config("  - {name: auto, baseline: large, policy: small}\n", ", max_concurrent: 1, max_queue: 0"));
  const int port = srv->port();
  std::vector<std::future<HttpResponse>> rs;
  for (int i = 0; i < 12; ++i) {
    rs.push_back(std::async(std::launch::async, [port, i] {
      Json b = Completion("auto", i % 2 == 0);
      b["max_tokens"] = 48;
      return Post(port, "/v1/completions", b.dump());
    }));
  }
  int ok = 0;
  for (auto& f : rs) {
    HttpResponse r = f.get();
    EXPECT_EQ(r.status, 200) << r.body;
    ok += r.status == 200;
  }
  EXPECT_EQ(ok, 12);
  const std::string met = Get(port, "/metrics").body;
  double fallback = 0;
  for (size_t p = 0; (p = met.find("tarmac:route_requests_total{route=\"auto\",model_name=\"large\",outcome=\"fallback\"", p)) != std::string::npos; ++p)
    fallback += std::stod(met.substr(met.find(' ', met.find('}', p)) + 1));
  EXPECT_GT(fallback, 0) << met.substr(0, 4000);
  EXPECT_EQ(met.find("route=\"/v1/completions\",code=\"5"), std::string::npos);  // (/health says 503 while loading)
}

TEST_F(RouteServerTest, TenantDefaultsReachTheBucketAndRiskRulesHold) {
  std::ofstream(Path("keys.txt")) << "key-acme-123 acme\nkey-beta-456 beta\n";
  auto srv = Start(Config("  - name: auto\n    baseline: large\n    policy:\n      rules:\n"
                          "        - {when: {risk: high}, use: large}\n      otherwise: small\n",
                          ", allowed_risk: [low]",
                          "api_key_file: " + Path("keys.txt") + "\ntenants:\n  - {name: acme, sla: gold, risk: high}\n"));
  const int port = srv->port();
  HttpResponse a = Post(port, "/v1/completions", Completion("auto").dump(), "Authorization: Bearer key-acme-123\r\n");
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(Json::parse(a.body)["model"], "large");  // acme's requests are high risk: never the small model
  HttpResponse b = Post(port, "/v1/completions", Completion("auto").dump(), "Authorization: Bearer key-beta-456\r\n");
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(Json::parse(b.body)["model"], "small");
  Json forced = Completion("auto");
  forced["risk"] = "high";
  HttpResponse c = Post(port, "/v1/completions", forced.dump(), "Authorization: Bearer key-beta-456\r\n");
  EXPECT_EQ(Json::parse(c.body)["model"], "large");
  const std::string met = Get(port, "/metrics", "Authorization: Bearer key-acme-123\r\n").body;
  EXPECT_NE(met.find("sla=\"gold\",temperature_band=\"0\",risk=\"high\""), std::string::npos) << met.substr(0, 3000);
}

// The config's slos are the report's and the controller's tiers (in the file's order); routed
// requests show in /v1/slo's routes (escalation and fallback rates, answering models, per
// bucket). slos in the file and --slo together exit 2.
TEST_F(RouteServerTest, ConfigSlosAreTheTiersAndTheReportShowsTheRoutes) {
  const std::string cfg =
      Config("  - {name: up, baseline: large, policy: {cascade: {small: small, large: large, k: 8, min_mean_logprob: 1000}}}\n"
             "  - {name: plain, baseline: large, policy: small}\n",
             "", "slos:\n  gold: {ttft_ms: 60000, tpot_ms: 10000}\n  bronze: {ttft_ms: 90000, tpot_ms: 20000}\n");
  auto srv = Start(cfg, {"--controller", "on"});
  const int port = srv->port();
  for (const char* route : {"up", "up", "plain", "plain", "plain"}) {
    Json body = Completion(route);
    body["sla"] = "gold";
    HttpResponse r = Post(port, "/v1/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
  }
  const Json j = Json::parse(Get(port, "/v1/slo").body);
  ASSERT_EQ(j["tiers"].size(), 2u) << j.dump();
  EXPECT_EQ(j["tiers"][0]["name"], "gold");
  EXPECT_FALSE(j["tiers"][0]["lowest"].get<bool>());
  EXPECT_EQ(j["tiers"][1]["name"], "bronze");
  EXPECT_TRUE(j["tiers"][1]["lowest"].get<bool>());
  EXPECT_TRUE(j["controller"]["enabled"].get<bool>());
  std::map<std::string, Json> routes;
  for (const Json& r : j["routes"]) routes[r["route"].get<std::string>()] = r;
  ASSERT_EQ(routes.size(), 2u) << j["routes"].dump();
  EXPECT_EQ(routes["up"]["requests"], 2);
  EXPECT_DOUBLE_EQ(routes["up"]["escalation_rate"].get<double>(), 1.0);  // forced to escalate
  EXPECT_DOUBLE_EQ(routes["up"]["model_share"]["large"].get<double>(), 1.0);
  EXPECT_EQ(routes["plain"]["requests"], 3);
  EXPECT_DOUBLE_EQ(routes["plain"]["escalation_rate"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(routes["plain"]["model_share"]["small"].get<double>(), 1.0);
  ASSERT_EQ(routes["plain"]["buckets"].size(), 1u);
  EXPECT_NE(routes["plain"]["buckets"][0]["key"].get<std::string>().find("gold"), std::string::npos);
  for (const Json& m : j["models"]) {
    if (m["model"] == "small") {
      EXPECT_EQ(m["route"]["served"], 3) << m["route"].dump();
    }
    if (m["model"] == "large") {
      EXPECT_EQ(m["route"]["escalated"], 2) << m["route"].dump();
    }
  }
  // The tiers from the file and from --slo: one source only.
  ServerProcess both({"--config", cfg, "--slo", "gold=1:1"}, Path("log2.txt"), false);
  EXPECT_EQ(both.WaitExit(60), 2);
  EXPECT_NE(Slurp(Path("log2.txt")).find("not both"), std::string::npos) << Slurp(Path("log2.txt"));
}

TEST_F(RouteServerTest, BadConfigFailsAtStartNamingTheEntry) {
  const std::string cfg = Config("  - {name: auto, baseline: large, policy: {cascade: {small: small, large: nope, k: 8, "
                                 "min_margin: 0.5}}}\n");
  ServerProcess s({"--config", cfg}, Path("log.txt"), false);
  EXPECT_EQ(s.WaitExit(60), 2);
  const std::string log = Slurp(Path("log.txt"));
  EXPECT_NE(log.find("routes[0].policy"), std::string::npos) << log;
  EXPECT_NE(log.find("nope"), std::string::npos) << log;
  ServerProcess both({"--config", cfg, "-m", kWp11m}, Path("log2.txt"), false);
  EXPECT_EQ(both.WaitExit(60), 2);
}

}  // namespace
}  // namespace tarmac::testing
