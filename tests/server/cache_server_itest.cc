// The scoped caches through the real server: a cached response is a hit for the same scope and
// a miss for another tenant, policy version or locale; a hit touches no engine and streams the
// chunks a miss would; non-deterministic requests are never cached; TTL expiry, DELETE of a
// scope, the byte budget under churn; retrieval and tool values under the caller's scope;
// sessions keep their history's KV and belong to their tenant; two servers share one Redis,
// and a Redis that goes away mid-run fails no request.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/redis_server.h"
#include "common/test_util.h"
#include "server_test_util.h"

namespace tarmac::testing {
namespace {

using Json = nlohmann::json;

const std::string kAcme = "Authorization: Bearer key-acme\r\n";
const std::string kBeta = "Authorization: Bearer key-beta\r\n";

// Sum of every series of a family (over buckets).
double MetricSum(const std::string& text, const std::string& prefix) {
  double sum = 0;
  size_t p = 0;
  while ((p = text.find(prefix, p)) != std::string::npos) {
    if (p == 0 || text[p - 1] == '\n') {
      const size_t e = text.find('\n', p);
      const std::string line = text.substr(p, e - p);
      sum += std::stod(line.substr(line.rfind(' ') + 1));
    }
    p += prefix.size();
  }
  return sum;
}

Json Completion(const std::string& prompt = "Prince Andrew looked at", int max_tokens = 12) {
  return {{"model", "wp-11m"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

std::string Text(const HttpResponse& r) { return Json::parse(r.body)["choices"][0]["text"].get<std::string>(); }

class CacheServerTest : public TempDirTest {
 protected:
  // wp-11m ("wp-11m", responses cached by default), tenants acme (scopes) and beta; `more` is
  // appended (a cache: section).
  std::string Config(const std::string& more = "", const std::string& model_extra = ", cache_responses: true") {
    std::ofstream(Path("keys.txt")) << "key-acme acme\nkey-beta beta\n";
    const std::string path = Path("tarmac.yaml");
    std::ofstream(path) << "models:\n  - {path: " << kWp11m << ", name: wp-11m" << model_extra << "}\n"
                        << "api_key_file: " << Path("keys.txt") << "\n"
                        << "tenants:\n  - {name: acme, scopes: [accounts.read], policy_version: v1}\n  - {name: beta}\n"
                        << more;
    return path;
  }
  std::unique_ptr<ServerProcess> Start(const std::string& config, std::vector<std::string> extra = {},
                                       const std::string& log = "log.txt") {
    std::vector<std::string> args = {"--config", config, "--no-warmup"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto s = std::make_unique<ServerProcess>(args, Path(log), /*with_default_model=*/false);
    EXPECT_TRUE(s->WaitReady()) << Slurp(Path(log));
    return s;
  }
  std::string Metrics(int port) { return Get(port, "/metrics", kAcme).body; }
};

TEST_F(CacheServerTest, HitsOnlyWithinTheScopeAndTouchNoEngine) {
  auto srv = Start(Config());
  const int port = srv->port();
  const std::string body = Completion().dump();
  HttpResponse first = Post(port, "/v1/completions", body, kAcme);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.Header("x-tarmac-cache"), "miss");
  const double tokens_before = MetricSum(Metrics(port), "tarmac:generation_tokens_total");
  HttpResponse again = Post(port, "/v1/completions", body, kAcme);
  EXPECT_EQ(again.Header("x-tarmac-cache"), "hit");
  EXPECT_EQ(Text(again), Text(first));
  Json usage = Json::parse(again.body)["usage"];
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], usage["prompt_tokens"]);
  EXPECT_EQ(MetricSum(Metrics(port), "tarmac:generation_tokens_total"), tokens_before);  // no engine ran
  // A streamed hit streams the chunks a streamed miss does (ids and times aside).
  Json stream = Completion();
  stream["stream"] = true;
  HttpResponse streamed_hit = Post(port, "/v1/completions", stream.dump(), kAcme);
  EXPECT_EQ(streamed_hit.Header("x-tarmac-cache"), "hit");
  HttpResponse streamed_miss = Post(port, "/v1/completions", stream.dump(), kAcme + "Cache-Control: no-cache\r\n");
  EXPECT_EQ(streamed_miss.Header("x-tarmac-cache"), "miss");
  auto chunks = [](const std::string& sse) {
    std::vector<std::string> out;
    size_t p = 0;
    while ((p = sse.find("data: ", p)) != std::string::npos) {
      const size_t e = sse.find("\n\n", p);
      const std::string d = sse.substr(p + 6, e - p - 6);
      p = e;
      if (d == "[DONE]") break;
      Json j = Json::parse(d);
      j.erase("id");
      j.erase("created");
      out.push_back(j.dump());
    }
    return out;
  };
  EXPECT_EQ(chunks(streamed_hit.body), chunks(streamed_miss.body));
  EXPECT_GT(chunks(streamed_hit.body).size(), 3u);
  // Another scope misses: another tenant, another policy version, another locale.
  EXPECT_EQ(Post(port, "/v1/completions", body, kBeta).Header("x-tarmac-cache"), "miss");
  EXPECT_EQ(Post(port, "/v1/completions", body, kAcme + "x-tarmac-policy-version: v2\r\n").Header("x-tarmac-cache"), "miss");
  EXPECT_EQ(Post(port, "/v1/completions", body, kAcme + "Accept-Language: fr-FR\r\n").Header("x-tarmac-cache"), "miss");
  Json other = Completion();
  other["max_tokens"] = 13;
  EXPECT_EQ(Post(port, "/v1/completions", other.dump(), kAcme).Header("x-tarmac-cache"), "miss");
  // ... and each of those is a hit the second time, within its own scope.
  EXPECT_EQ(Post(port, "/v1/completions", body, kBeta).Header("x-tarmac-cache"), "hit");
  EXPECT_EQ(Post(port, "/v1/completions", body, kAcme + "x-tarmac-policy-version: v2\r\n").Header("x-tarmac-cache"), "hit");
  // Cache-Control: no-store skips the cache both ways.
  EXPECT_EQ(Post(port, "/v1/completions", body, kAcme + "Cache-Control: no-store\r\n").Header("x-tarmac-cache"), "");
  const std::string met = Metrics(port);
  EXPECT_EQ(MetricSum(met, "tarmac:cache_hits_total{cache=\"response\""), 4);
  EXPECT_GT(MetricSum(met, "tarmac:cache_decode_tokens_saved_total{cache=\"response\""), 0);
  EXPECT_GT(MetricSum(met, "tarmac:cache_seconds_saved_total{cache=\"response\""), 0);
}

TEST_F(CacheServerTest, NonDeterministicRequestsAreNeverCached) {
  auto srv = Start(Config());
  const int port = srv->port();
  Json sampled = Completion();
  sampled["temperature"] = 0.9;
  for (int i = 0; i < 3; ++i) {
    HttpResponse r = Post(port, "/v1/completions", sampled.dump(), kAcme);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.Header("x-tarmac-cache"), "");
  }
  sampled["cache"] = true;  // asking for it is an error: it could never hit
  HttpResponse r = Post(port, "/v1/completions", sampled.dump(), kAcme);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Json::parse(r.body)["error"]["param"], "cache");
  sampled["seed"] = 11;  // seeded: deterministic, cached
  EXPECT_EQ(Post(port, "/v1/completions", sampled.dump(), kAcme).Header("x-tarmac-cache"), "miss");
  EXPECT_EQ(Post(port, "/v1/completions", sampled.dump(), kAcme).Header("x-tarmac-cache"), "hit");
  EXPECT_EQ(MetricSum(Metrics(port), "tarmac:cache_lookups_total{cache=\"response\""), 2);
}

TEST_F(CacheServerTest, TtlPolicyVersionAndDeleteInvalidate) {
  auto srv = Start(Config());
  const int port = srv->port();
  Json shortlived = Completion("Natasha said");
  shortlived["cache"] = {{"ttl_s", 1}};
  EXPECT_EQ(Post(port, "/v1/completions", shortlived.dump(), kAcme).Header("x-tarmac-cache"), "miss");
  EXPECT_EQ(Post(port, "/v1/completions", shortlived.dump(), kAcme).Header("x-tarmac-cache"), "hit");
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  EXPECT_EQ(Post(port, "/v1/completions", shortlived.dump(), kAcme).Header("x-tarmac-cache"), "miss");
  // A bumped policy version misses; the old one still hits until deleted.
  const std::string body = Completion("Pierre went").dump();
  EXPECT_EQ(Post(port, "/v1/completions", body, kAcme).Header("x-tarmac-cache"), "miss");
  EXPECT_EQ(Post(port, "/v1/completions", body, kAcme + "x-tarmac-policy-version: v9\r\n").Header("x-tarmac-cache"), "miss");
  EXPECT_EQ(Post(port, "/v1/completions", body, kAcme).Header("x-tarmac-cache"), "hit");
  EXPECT_EQ(Post(port, "/v1/completions", body, kBeta).Header("x-tarmac-cache"), "miss");
  // DELETE of acme's scope for wp-11m, then of all its responses: beta's entry stays.
  HttpResponse d = RawExchange(port, Request("DELETE", "/v1/cache/responses?model=wp-11m", "", kAcme));
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_GE(Json::parse(d.body)["deleted"].get<int>(), 1);
  EXPECT_EQ(Post(port, "/v1/completions", body, kAcme).Header("x-tarmac-cache"), "miss");
  EXPECT_EQ(Post(port, "/v1/completions", body, kAcme + "x-tarmac-policy-version: v9\r\n").Header("x-tarmac-cache"), "hit");
  d = RawExchange(port, Request("DELETE", "/v1/cache/responses", "", kAcme));
  ASSERT_EQ(d.status, 200);
  EXPECT_EQ(Post(port, "/v1/completions", body, kAcme + "x-tarmac-policy-version: v9\r\n").Header("x-tarmac-cache"), "miss");
  EXPECT_EQ(Post(port, "/v1/completions", body, kBeta).Header("x-tarmac-cache"), "hit");
  EXPECT_EQ(RawExchange(port, Request("PUT", "/v1/cache/responses", "", kAcme)).status, 405);
}

TEST_F(CacheServerTest, TheByteBudgetHoldsUnderChurn) {
  const int64_t budget = 40000;
  auto srv = Start(Config("cache:\n  response: {max_bytes: " + std::to_string(budget) + "}\n"));
  const int port = srv->port();
  for (int i = 0; i < 60; ++i) {
    HttpResponse r = Post(port, "/v1/completions", Completion("Chapter " + std::to_string(i), 24).dump(), kAcme);
    ASSERT_EQ(r.status, 200) << r.body;
  }
  const std::string met = Metrics(port);
  EXPECT_LE(MetricValue(met, "tarmac:cache_bytes{cache=\"response\"}"), budget);
  EXPECT_GT(MetricValue(met, "tarmac:cache_bytes{cache=\"response\"}"), budget / 2);
  EXPECT_GT(MetricValue(met, "tarmac:cache_evictions_total{cache=\"response\"}"), 0);
  // The most recent entries are still there.
  EXPECT_EQ(Post(port, "/v1/completions", Completion("Chapter 59", 24).dump(), kAcme).Header("x-tarmac-cache"), "hit");
}

TEST_F(CacheServerTest, RetrievalAndToolValuesLiveInTheCallersScope) {
  auto srv = Start(Config("cache:\n  tool: {max_entry_bytes: 2000, ttl_s: 50, max_ttl_s: 100}\n"));
  const int port = srv->port();
  auto req = [&](const std::string& m, const std::string& path, const std::string& body, const std::string& h) {
    return RawExchange(port, Request(m, path, body, h + (body.empty() ? "" : "Content-Type: application/json\r\n")));
  };
  const Json value = {{"docs", {"a.pdf", "b.pdf"}}, {"score", 0.9}};
  HttpResponse put = req("PUT", "/v1/cache/retrieval/q%3Dinterest%20rates", Json{{"value", value}, {"cost_s", 0.25}}.dump(), kAcme);
  ASSERT_EQ(put.status, 200) << put.body;
  HttpResponse got = req("GET", "/v1/cache/retrieval/q%3Dinterest%20rates", "", kAcme);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(Json::parse(got.body)["value"], value);
  EXPECT_EQ(Json::parse(got.body)["key"], "q=interest rates");
  // Another tenant, another policy version, another locale, another cache: misses.
  EXPECT_EQ(req("GET", "/v1/cache/retrieval/q%3Dinterest%20rates", "", kBeta).status, 404);
  EXPECT_EQ(req("GET", "/v1/cache/retrieval/q%3Dinterest%20rates", "", kAcme + "x-tarmac-policy-version: v2\r\n").status, 404);
  EXPECT_EQ(req("GET", "/v1/cache/retrieval/q%3Dinterest%20rates", "", kAcme + "Accept-Language: de\r\n").status, 404);
  EXPECT_EQ(req("GET", "/v1/cache/tool/q%3Dinterest%20rates", "", kAcme).status, 404);
  // Bad input gets a clear 4xx and stores nothing.
  EXPECT_EQ(req("PUT", "/v1/cache/tool/k", Json{{"value", std::string(3000, 'x')}}.dump(), kAcme).status, 413);
  EXPECT_EQ(req("PUT", "/v1/cache/tool/k", Json{{"value", 1}, {"ttl_s", 1000}}.dump(), kAcme).status, 400);
  EXPECT_EQ(req("PUT", "/v1/cache/tool/k", Json{{"valu", 1}}.dump(), kAcme).status, 400);
  EXPECT_EQ(req("PUT", "/v1/cache/tool/k", "not json", kAcme).status, 400);
  EXPECT_EQ(req("PUT", "/v1/cache/tool/k", Json{{"ttl_s", 5}}.dump(), kAcme).status, 400);
  EXPECT_EQ(req("GET", "/v1/cache/tool/k", "", kAcme).status, 404);
  EXPECT_EQ(req("GET", "/v1/cache/other/k", "", kAcme).status, 404);
  EXPECT_EQ(req("POST", "/v1/cache/tool/k", "{}", kAcme).status, 405);
  EXPECT_EQ(req("GET", "/v1/cache/tool/k", "", "").status, 401);
  // Delete one, then all of a tenant's.
  ASSERT_EQ(req("PUT", "/v1/cache/tool/t1", Json{{"value", 1}}.dump(), kAcme).status, 200);
  ASSERT_EQ(req("PUT", "/v1/cache/tool/t2", Json{{"value", 2}}.dump(), kAcme).status, 200);
  ASSERT_EQ(req("PUT", "/v1/cache/tool/t1", Json{{"value", 3}}.dump(), kBeta).status, 200);
  EXPECT_EQ(Json::parse(req("DELETE", "/v1/cache/tool/t1", "", kAcme).body)["deleted"], true);
  EXPECT_EQ(req("GET", "/v1/cache/tool/t1", "", kAcme).status, 404);
  EXPECT_EQ(Json::parse(req("DELETE", "/v1/cache/tool", "", kAcme).body)["deleted"], 1);
  EXPECT_EQ(req("GET", "/v1/cache/tool/t2", "", kAcme).status, 404);
  EXPECT_EQ(Json::parse(req("GET", "/v1/cache/tool/t1", "", kBeta).body)["value"], 3);
  const std::string met = Metrics(port);
  EXPECT_EQ(MetricSum(met, "tarmac:cache_hits_total{cache=\"retrieval\""), 1);
  EXPECT_DOUBLE_EQ(MetricSum(met, "tarmac:cache_seconds_saved_total{cache=\"retrieval\""), 0.25);
}

TEST_F(CacheServerTest, ASessionKeepsItsHistoryCachedAndBelongsToItsTenant) {
  // A small KV pool, so other traffic evicts whatever is not pinned.
  auto srv = Start(Config("", ""), {"--kv-blocks", "48"});
  const int port = srv->port();
  std::string history;
  for (int i = 0; i < 6; ++i)
    history += "Prince Andrew looked at the sky above Austerlitz and thought of how small everything seemed, the "
               "battle and the Emperor and his own fame, beside that lofty infinite sky. ";
  auto turn_two = [&](const std::string& session, const std::string& key) {
    Json first = {{"model", "wp-11m"}, {"messages", {{{"role", "user"}, {"content", history}}}}, {"max_tokens", 8},
                  {"temperature", 0}};
    if (!session.empty()) first["session_id"] = session;
    HttpResponse a = Post(port, "/v1/chat/completions", first.dump(), key);
    EXPECT_EQ(a.status, 200) << a.body;
    const int prompt1 = Json::parse(a.body)["usage"]["prompt_tokens"];
    const std::string reply = Json::parse(a.body)["choices"][0]["message"]["content"];
    for (int i = 0; i < 8; ++i) {  // other traffic fills the cache (48 blocks of 16 tokens)
      Json filler = Completion(std::to_string(i) + " " + history, 2);
      EXPECT_EQ(Post(port, "/v1/completions", filler.dump(), kBeta).status, 200);
    }
    Json second = first;
    second["messages"].push_back({{"role", "assistant"}, {"content", reply}});
    second["messages"].push_back({{"role", "user"}, {"content", "And then?"}});
    HttpResponse b = Post(port, "/v1/chat/completions", second.dump(), key);
    EXPECT_EQ(b.status, 200) << b.body;
    const int cached = Json::parse(b.body)["usage"]["prompt_tokens_details"]["cached_tokens"];
    return std::pair<int, int>(prompt1, cached);
  };
  auto [p_plain, c_plain] = turn_two("", kAcme);
  auto [p_session, c_session] = turn_two("conv-1", kAcme);
  EXPECT_LT(c_plain, p_plain - 32) << "without a session the history was evicted";
  EXPECT_GE(c_session, p_session - 32) << "a session's history stays cached";
  EXPECT_GE(MetricSum(Metrics(port), "tarmac:cache_hits_total{cache=\"session\""), 1);
  EXPECT_GT(MetricSum(Metrics(port), "tarmac:cache_prefill_tokens_saved_total{cache=\"session\""), 0);

  // The session's state belongs to acme.
  auto req = [&](const std::string& m, const std::string& path, const std::string& body, const std::string& h) {
    return RawExchange(port, Request(m, path, body, h + (body.empty() ? "" : "Content-Type: application/json\r\n")));
  };
  const Json state = {{"goal", "open an account"}, {"step", 2}};
  ASSERT_EQ(req("PUT", "/v1/sessions/conv-1/state", state.dump(), kAcme).status, 200);
  EXPECT_EQ(Json::parse(req("GET", "/v1/sessions/conv-1/state", "", kAcme).body)["state"], state);
  EXPECT_EQ(req("GET", "/v1/sessions/conv-1/state", "", kBeta).status, 404);
  EXPECT_EQ(req("PUT", "/v1/sessions/conv-1/state", state.dump(), kBeta).status, 404);
  EXPECT_EQ(req("DELETE", "/v1/sessions/conv-1", "", kBeta).status, 404);
  Json chat = {{"model", "wp-11m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2},
               {"session_id", "conv-1"}};
  EXPECT_EQ(Post(port, "/v1/chat/completions", chat.dump(), kBeta).status, 404);
  EXPECT_EQ(req("PUT", "/v1/sessions/conv-1/state", "[1]", kAcme).status, 400);
  EXPECT_EQ(req("GET", "/v1/sessions/bad%20id/state", "", kAcme).status, 400);
  EXPECT_EQ(Json::parse(req("DELETE", "/v1/sessions/conv-1", "", kAcme).body)["deleted"], true);
  EXPECT_EQ(req("GET", "/v1/sessions/conv-1/state", "", kAcme).status, 404);
}

TEST_F(CacheServerTest, TwoServersShareARedisAndSurviveItsOutage) {
  if (!HaveRedis()) GTEST_SKIP() << "redis-server is not installed";
  RedisServer redis;
  ASSERT_TRUE(redis.running());
  const std::string cfg = Config("cache:\n  backend: redis\n  url: " + redis.url() + "\n");
  auto a = Start(cfg, {}, "a.log");
  auto b = Start(cfg, {}, "b.log");
  const std::string body = Completion("Rostov rode").dump();
  EXPECT_EQ(Post(a->port(), "/v1/completions", body, kAcme).Header("x-tarmac-cache"), "miss");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a stores after it answers
  HttpResponse on_b = Post(b->port(), "/v1/completions", body, kAcme);
  EXPECT_EQ(on_b.Header("x-tarmac-cache"), "hit");  // stored by a
  EXPECT_EQ(Post(b->port(), "/v1/completions", body, kBeta).Header("x-tarmac-cache"), "miss");  // another scope
  ASSERT_EQ(RawExchange(a->port(), Request("PUT", "/v1/cache/tool/weather", Json{{"value", "sunny"}}.dump(), kAcme)).status, 200);
  EXPECT_EQ(RawExchange(b->port(), Request("GET", "/v1/cache/tool/weather", "", kAcme)).status, 200);

  // Redis goes away while traffic runs: every request is still served.
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::thread load([&] {
    for (int i = 0; !stop; ++i) {
      HttpResponse r = Post(a->port(), "/v1/completions", Completion("Count " + std::to_string(i % 5), 4).dump(), kAcme);
      (r.status == 200 ? ok : failed)++;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  redis.Stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const std::string during = Metrics(a->port());
  redis.Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  stop = true;
  load.join();
  EXPECT_EQ(failed, 0);
  EXPECT_GT(ok, 10);
  EXPECT_GT(MetricSum(during, "tarmac:cache_errors_total"), 0);
  EXPECT_GT(MetricSum(during, "tarmac:cache_backend_errors_total"), 0);
  // Back: a fresh redis is empty, so a miss, then the cache works again.
  EXPECT_EQ(Post(a->port(), "/v1/completions", body, kAcme).Header("x-tarmac-cache"), "miss");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(Post(b->port(), "/v1/completions", body, kAcme).Header("x-tarmac-cache"), "hit");
}

TEST_F(CacheServerTest, BadCacheConfigFailsAtStartNamingTheEntry) {
  for (const auto& [section, words] : std::vector<std::pair<std::string, std::string>>{
           {"cache:\n  backend: memcached\n", "cache.backend"},
           {"cache:\n  backend: redis\n", "needs a url"},
           {"cache:\n  backend: redis\n  url: http://x\n", "cache.url"},
           {"cache:\n  response: {ttl_s: 10, max_ttl_s: 5}\n", "cache.response"},
           {"cache:\n  session: {max_blocks: 0}\n", "cache.session.max_blocks"},
           {"cache:\n  colour: red\n", "cache.colour"},
           {"cache:\n  secret_file: /nonexistent/secret\n", "secret_file"}}) {
    RunResult r = RunTarmac({"serve", "--config", Config(section), "--port", "0", "--no-warmup"}, dir_.string());
    EXPECT_EQ(r.exit_code, 2) << section << r.err;
    EXPECT_NE(r.err.find(words), std::string::npos) << section << r.err;
  }
}

}  // namespace
}  // namespace tarmac::testing
