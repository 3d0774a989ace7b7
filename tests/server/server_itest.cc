// `tarmac serve` end to end on a loopback port: endpoints, OpenAI response shapes, streamed ==
// non-streamed output, 100+ malformed or hostile requests (each a 4xx, the server keeps
// serving), auth, overload (429 with Retry-After), 200 concurrent streams with 30% dropped
// mid-stream (KV all free or cached afterwards, integrity checked every step), SIGTERM drain.
#include <fmt/format.h>
#include <sys/resource.h>

#include <atomic>
#include <sstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "server_test_util.h"

namespace tarmac::testing {
namespace {

using Json = nlohmann::json;
const std::string kModel = "wp-11m-f16";

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess({"--check-integrity"}, "/tmp/tarmac-server-itest-" + std::to_string(::getpid()) + ".log");
    ASSERT_TRUE(server_->WaitReady()) << "server did not become ready";
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static int port() { return server_->port(); }
  static ServerProcess* server_;
};
ServerProcess* ServerTest::server_ = nullptr;

Json Completion(int port, Json body, int* status = nullptr) {
  HttpResponse r = Post(port, "/v1/completions", body.dump());
  if (status) *status = r.status;
  return Json::parse(r.body, nullptr, false);
}

std::vector<Json> SseEvents(const std::string& body, bool* done) {
  std::vector<Json> out;
  *done = false;
  size_t p = 0;
  while ((p = body.find("data: ", p)) != std::string::npos) {
    size_t e = body.find("\n\n", p);
    std::string d = body.substr(p + 6, e - p - 6);
    if (d == "[DONE]") *done = true;
    else out.push_back(Json::parse(d, nullptr, false));
    p = e;
  }
  return out;
}

TEST_F(ServerTest, HealthModelsMetrics) {
  EXPECT_EQ(Get(port(), "/health").status, 200);
  HttpResponse m = Get(port(), "/v1/models");
  ASSERT_EQ(m.status, 200);
  Json j = Json::parse(m.body);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["id"], kModel);
  EXPECT_EQ(Get(port(), "/v1/models/" + kModel).status, 200);
  EXPECT_EQ(Get(port(), "/v1/models/nope").status, 404);
  HttpResponse met = Get(port(), "/metrics");
  ASSERT_EQ(met.status, 200);
  for (const char* name : {"tarmac:num_requests_running", "tarmac:num_requests_waiting", "tarmac:kv_cache_usage_perc",
                           "tarmac:prefix_cache_queries_total", "tarmac:prefix_cache_hits_total",
                           "tarmac:num_preemptions_total", "tarmac:prompt_tokens_total", "tarmac:generation_tokens_total",
                           "# TYPE tarmac:time_to_first_token_seconds histogram",
                           "# TYPE tarmac:inter_token_latency_seconds histogram",
                           "# TYPE tarmac:e2e_request_latency_seconds histogram",
                           "# TYPE tarmac:request_queue_time_seconds histogram"})
    EXPECT_NE(met.body.find(name), std::string::npos) << name;
}

TEST_F(ServerTest, CompletionShapeAndUsage) {
  int st = 0;
  Json j = Completion(port(), {{"model", kModel}, {"prompt", "Prince Andrew"}, {"max_tokens", 12}, {"ignore_eos", true}}, &st);
  ASSERT_EQ(st, 200) << j.dump();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"].get<int>() + 12);
  // Token-id prompt.
  j = Completion(port(), {{"model", kModel}, {"prompt", {10, 20, 30}}, {"max_tokens", 3}}, &st);
  ASSERT_EQ(st, 200) << j.dump();
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  // Metrics now show the request under its bucket.
  HttpResponse met = Get(port(), "/metrics");
  EXPECT_NE(met.body.find("tarmac:time_to_first_token_seconds_count{model_name=\"wp-11m-f16\",prompt_band=\"0-127\""),
            std::string::npos);
}

TEST_F(ServerTest, StreamedEqualsNonStreamedForSeed) {
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    const bool chat = std::string(path).find("chat") != std::string::npos;
    Json body = {{"model", kModel}, {"max_tokens", 24}, {"seed", 7}, {"temperature", 0.9}, {"n", 2}};
    if (chat) body["messages"] = {{{"role", "user"}, {"content", "Who is Natasha?"}}};
    else body["prompt"] = "Natasha said";
    HttpResponse plain = Post(port(), path, body.dump());
    ASSERT_EQ(plain.status, 200) << plain.body;
    Json pj = Json::parse(plain.body);
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    HttpResponse streamed = Post(port(), path, body.dump());
    ASSERT_EQ(streamed.status, 200);
    EXPECT_NE(streamed.Header("Content-Type").find("text/event-stream"), std::string::npos);
    bool done = false;
    auto events = SseEvents(streamed.body, &done);
    EXPECT_TRUE(done);
    std::string text[2];
    std::string finish[2];
    Json usage;
    for (const Json& e : events) {
      ASSERT_FALSE(e.is_discarded());
      if (!e["usage"].is_null()) usage = e["usage"];
      for (const Json& c : e["choices"]) {
        int i = c["index"];
        if (chat) text[i] += c["delta"].value("content", "");
        else text[i] += c["text"].get<std::string>();
        if (!c["finish_reason"].is_null()) finish[i] = c["finish_reason"];
      }
    }
    for (int i = 0; i < 2; ++i) {
      const Json& c = pj["choices"][i];
      EXPECT_EQ(text[i], chat ? c["message"]["content"].get<std::string>() : c["text"].get<std::string>()) << path << " " << i;
      EXPECT_EQ(finish[i], c["finish_reason"]);
    }
    EXPECT_EQ(usage["completion_tokens"], pj["usage"]["completion_tokens"]);
  }
}

TEST_F(ServerTest, StopAndLogprobs) {
  int st = 0;
  Json j = Completion(port(), {{"model", kModel}, {"prompt", "Prince Andrew"}, {"max_tokens", 40}, {"temperature", 0},
                               {"logprobs", 3}}, &st);
  ASSERT_EQ(st, 200) << j.dump();
  const Json& lp = j["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), lp["token_logprobs"].size());
  EXPECT_EQ(lp["top_logprobs"][0].size(), 3u);
  std::string text = j["choices"][0]["text"];
  ASSERT_GT(text.size(), 4u);
  const std::string stop = text.substr(2, 2);
  Json k = Completion(port(), {{"model", kModel}, {"prompt", "Prince Andrew"}, {"max_tokens", 40}, {"temperature", 0},
                               {"stop", {stop}}}, &st);
  ASSERT_EQ(st, 200);
  EXPECT_EQ(k["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(k["choices"][0]["text"], text.substr(0, text.find(stop)));
  // Chat logprobs.
  HttpResponse r = Post(port(), "/v1/chat/completions",
                        Json{{"model", kModel}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 5},
                             {"logprobs", true}, {"top_logprobs", 2}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  Json c = Json::parse(r.body);
  EXPECT_EQ(c["choices"][0]["logprobs"]["content"][0]["top_logprobs"].size(), 2u);
}

TEST_F(ServerTest, TokenizeDetokenize) {
  HttpResponse r = Post(port(), "/tokenize", Json{{"model", kModel}, {"prompt", "Prince Andrew"}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  Json t = Json::parse(r.body);
  HttpResponse d = Post(port(), "/detokenize", Json{{"model", kModel}, {"tokens", t["tokens"]}}.dump());
  ASSERT_EQ(d.status, 200);
  EXPECT_EQ(Json::parse(d.body)["prompt"], "Prince Andrew");
}

// Every hostile request gets a 4xx in OpenAI's error JSON; the server keeps serving.
TEST_F(ServerTest, HostileRequestsGet4xx) {
  std::vector<std::pair<std::string, std::string>> cases;  // (path, body) sent as POST
  const std::string C = "/v1/completions", H = "/v1/chat/completions";
  auto base = [&] { return Json{{"model", kModel}, {"prompt", "hi"}, {"max_tokens", 2}}; };
  auto chat = [&] { return Json{{"model", kModel}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}}; };
  for (const char* raw : {"", "{", "}", "[]", "null", "123", "\"s\"", "{\"model\":}", "{\"model\":\"x\",}", "{'model':1}",
                          "{\"prompt\":\"hi\"} trailing", "{\"a\":1e999}", "\xff\xfe", "{\"prompt\":\"\xc3\x28\"}"})
    cases.push_back({C, raw});
  cases.push_back({C, std::string(200000, '[')});
  {
    const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
    cases.push_back({C, "{\"model\":\"" + kModel + "\",\"prompt\":\"hi\",\"metadata\":" + deep + "}"});
    cases.push_back({H, "{\"model\":\"" + kModel + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"x\":" + deep + "}]}"});
    cases.push_back({"/tokenize", "{\"model\":\"" + kModel + "\",\"prompt\":\"hi\",\"x\":" + deep + "}"});
  }
  cases.push_back({C, "{\"model\":\"" + kModel + "\",\"prompt\":\"bad \xed\xa0\x80 utf8\"}"});
  cases.push_back({H, "{\"model\":\"" + kModel + "\",\"messages\":[{\"role\":\"user\",\"content\":\"\xf8\x88\x80\x80\x80\"}]}"});
  const std::vector<Json> wrong_values = {"str", Json::object(), Json::array({1}), true, 1.5};
  for (const char* field : {"model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "min_p", "n", "stop", "seed",
                            "stream", "stream_options", "presence_penalty", "frequency_penalty", "logit_bias", "user",
                            "priority", "logprobs"}) {
    for (const Json& v : wrong_values) {
      Json b = base();
      b[field] = v;
      // Skip values that are valid for this field.
      const std::string f = field;
      if ((f == "prompt" || f == "user" || f == "model") && v.is_string()) continue;
      if ((f == "temperature" || f == "top_p" || f == "min_p" || f == "presence_penalty" || f == "frequency_penalty") && v.is_number()) continue;
      if (f == "stream" && v.is_boolean()) continue;
      if (f == "stop" && (v.is_string())) continue;
      if (f == "logit_bias" && v.is_object()) continue;
      if (f == "prompt" && v.is_array()) continue;
      if (f == "stream_options" && v.is_object()) continue;  // invalid anyway: stream is false (covered below)
      cases.push_back({C, b.dump()});
    }
  }
  auto with = [&](Json b, const char* k, Json v) {
    b[k] = std::move(v);
    return b.dump();
  };
  for (Json v : {Json(0), Json(-1), Json(-100000), Json(1000000000), Json(9223372036854775807LL), Json(513), Json(1e30)})
    cases.push_back({C, with(base(), "max_tokens", v)});
  for (Json v : {Json(-0.1), Json(2.5), Json(1e9)}) cases.push_back({C, with(base(), "temperature", v)});
  for (Json v : {Json(0), Json(1.5), Json(-1)}) cases.push_back({C, with(base(), "top_p", v)});
  for (Json v : {Json(0), Json(17), Json(100000), Json(-1)}) cases.push_back({C, with(base(), "n", v)});
  for (Json v : {Json(-2.5), Json(3)}) cases.push_back({C, with(base(), "presence_penalty", v)});
  cases.push_back({C, with(base(), "frequency_penalty", 9)});
  cases.push_back({C, with(base(), "min_p", 2)});
  cases.push_back({C, with(base(), "logprobs", 21)});
  cases.push_back({C, with(base(), "logprobs", -1)});
  cases.push_back({C, with(base(), "top_k", -5)});
  // Token ids out of the vocabulary / not ids.
  for (Json v : {Json::array({99999}), Json::array({-1}), Json::array({2048}), Json::array({1, 2, 4294967296LL}),
                 Json::array({1.5}), Json::array({"a", 1}), Json::array({Json::array()}), Json::array(), Json(""),
                 Json::array({Json::object()}), Json::array({1, "a"})})
    cases.push_back({C, with(base(), "prompt", v)});
  // Bad logit_bias.
  for (Json v : {Json{{"abc", 1}}, Json{{"5", 1000}}, Json{{"99999", 1}}, Json{{"-1", 1}}, Json{{"5", "x"}},
                 Json{{"5", nullptr}}, Json{{"1.5", 1}}, Json{{"", 1}}, Json::array({1, 2})})
    cases.push_back({C, with(base(), "logit_bias", v)});
  {
    Json big = Json::object();
    for (int i = 0; i < 1100; ++i) {
      big[std::to_string(i % 2048)] = 1;
      big[fmt::format("x{}", i)] = 1;  // not "x" + std::string: GCC 12's -Wrestrict false positive
    }
    cases.push_back({C, with(base(), "logit_bias", big)});
  }
  // Stop lists.
  cases.push_back({C, with(base(), "stop", Json(std::vector<std::string>(17, "a")))});
  cases.push_back({C, with(base(), "stop", Json(std::vector<std::string>(1000, "ab")))});
  cases.push_back({C, with(base(), "stop", "")});
  cases.push_back({C, with(base(), "stop", Json::array({1}))});
  cases.push_back({C, with(base(), "stop", std::string(5000, 'x'))});
  // Unknown fields and unsupported options.
  cases.push_back({C, with(base(), "unknown_field", 1)});
  cases.push_back({C, with(base(), "__proto__", Json::object())});
  cases.push_back({C, with(base(), "echo", 1)});
  cases.push_back({H, with(chat(), "echo", true)});  // completions only
  cases.push_back({C, with(base(), "suffix", "x")});
  cases.push_back({C, with(base(), "best_of", 3)});
  cases.push_back({C, with(base(), "stream_options", Json{{"include_usage", true}})});
  {
    Json b = base();
    b["stream"] = true;
    b["stream_options"] = {{"bogus", 1}};
    cases.push_back({C, b.dump()});
  }
  cases.push_back({C, with(base(), "messages", Json::array())});  // chat field on completions
  // Missing / unknown model; prompt longer than the context.
  {
    Json b = base();
    b.erase("model");
    cases.push_back({C, b.dump()});
    cases.push_back({C, with(base(), "model", "no-such-model")});
    cases.push_back({C, with(base(), "model", "")});
    Json p = base();
    p.erase("prompt");
    cases.push_back({C, p.dump()});
    std::string long_prompt;
    for (int i = 0; i < 700; ++i) long_prompt += "Prince Andrew ";
    cases.push_back({C, with(base(), "prompt", long_prompt)});
    std::vector<int> ids(600, 5);
    cases.push_back({C, with(base(), "prompt", ids)});
  }
  // Chat-specific.
  for (Json m : {Json::array(), Json("hi"), Json::array({Json{{"role", "x"}, {"content", "y"}}}),
                 Json::array({Json{{"content", "y"}}}), Json::array({Json{{"role", "user"}}}),
                 Json::array({Json{{"role", "user"}, {"content", 5}}}),
                 Json::array({Json{{"role", "user"}, {"content", Json::array({Json{{"type", "image_url"}}})}}}),
                 Json::array({Json{{"role", "user"}, {"content", Json::array({5})}}}), Json::array({"hi"}),
                 Json::array({Json{{"role", 1}, {"content", "y"}}}), Json::object()})
    cases.push_back({H, with(chat(), "messages", m)});
  cases.push_back({H, with(chat(), "top_logprobs", 3)});  // without logprobs
  cases.push_back({H, with(chat(), "top_logprobs", 30)});
  cases.push_back({H, with(chat(), "logprobs", 3)});
  cases.push_back({H, with(chat(), "max_completion_tokens", 0)});
  cases.push_back({H, with(chat(), "response_format", Json{{"type", "json_schema"}})});
  cases.push_back({H, with(chat(), "prompt", "x")});
  cases.push_back({H, with(chat(), "tools", "x")});
  // Tokenizer routes.
  cases.push_back({"/tokenize", "{}"});
  cases.push_back({"/tokenize", Json{{"model", kModel}}.dump()});
  cases.push_back({"/tokenize", Json{{"model", kModel}, {"prompt", 5}}.dump()});
  cases.push_back({"/detokenize", Json{{"model", kModel}, {"tokens", {99999}}}.dump()});
  cases.push_back({"/detokenize", Json{{"model", kModel}, {"tokens", "abc"}}.dump()});
  cases.push_back({"/detokenize", Json{{"model", "nope"}, {"tokens", {1}}}.dump()});
  // Unknown routes.
  cases.push_back({"/v1/nope", "{}"});
  cases.push_back({"/v1/completions/extra", "{}"});

  int n = 0;
  for (const auto& [path, body] : cases) {
    HttpResponse r = Post(port(), path, body);
    EXPECT_GE(r.status, 400) << path << " " << body.substr(0, 200);
    EXPECT_LT(r.status, 500) << path << " " << body.substr(0, 200) << " -> " << r.body;
    Json e = Json::parse(r.body, nullptr, false);
    EXPECT_TRUE(!e.is_discarded() && e.contains("error") && e["error"].contains("message") && e["error"].contains("type") &&
                e["error"].contains("param") && e["error"].contains("code"))
        << path << " " << body.substr(0, 200) << " -> " << r.body;
    ++n;
  }
  // Raw protocol abuse.
  std::vector<std::string> raws = {
      "GARBAGE\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
      "DELETE /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
      "GET /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 99999999999\r\n\r\n{}",
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: abc\r\n\r\n{}",
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: " + std::string(100000, 'a') + "\r\n\r\n",
      Request("POST", "/v1/completions", "{\"model\":\"" + kModel + "\",\"prompt\":\"" + std::string(10 << 20, 'a') + "\"}"),
  };
  for (const std::string& raw : raws) {
    HttpResponse r = RawExchange(port(), raw);
    EXPECT_GE(r.status, 400) << raw.substr(0, 80);
    EXPECT_LT(r.status, 500) << raw.substr(0, 80);
    ++n;
  }
  std::fprintf(stderr, "sent %d hostile requests\n", n);
  EXPECT_GE(n, 100);
  ASSERT_TRUE(server_->Alive());
  EXPECT_EQ(Get(port(), "/health").status, 200);
  int st = 0;
  Completion(port(), {{"model", kModel}, {"prompt", "Prince"}, {"max_tokens", 4}}, &st);
  EXPECT_EQ(st, 200);
  HttpResponse met = Get(port(), "/metrics");
  // /health answered 503 while the model loaded; nothing else may have been a 5xx.
  std::istringstream lines(met.body);
  for (std::string line; std::getline(lines, line);)
    if (line.find("code=\"5") != std::string::npos) {
      EXPECT_NE(line.find("route=\"/health\""), std::string::npos) << line;
    }
}

// 200 concurrent streams, 30% of the clients drop mid-stream. Afterwards nothing runs, every
// KV block is free or cached, and the integrity check (every step, --check-integrity) held.
TEST_F(ServerTest, ConcurrentStreamsWithDrops) {
  constexpr int kClients = 200;
  std::atomic<int> completed{0}, dropped{0}, bad{0};
  std::vector<std::thread> th;
  for (int i = 0; i < kClients; ++i) {
    th.emplace_back([&, i] {
      const bool drop = i % 10 < 3;
      Json b = {{"model", kModel}, {"prompt", "Pierre " + std::to_string(i)}, {"max_tokens", 48}, {"ignore_eos", true},
                {"stream", true}, {"seed", i}};
      int fd = Connect(port());
      if (fd < 0 || !SendAll(fd, Request("POST", "/v1/completions", b.dump()))) {
        bad++;
        if (fd >= 0) ::close(fd);
        return;
      }
      std::string raw;
      char buf[4096];
      ssize_t n;
      while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) {
        raw.append(buf, static_cast<size_t>(n));
        if (drop && raw.find("\"text\"") != std::string::npos) break;  // got a token: hang up
      }
      ::close(fd);
      if (drop) {
        dropped++;
      } else if (raw.find("data: [DONE]") != std::string::npos && raw.find("\"finish_reason\":\"length\"") != std::string::npos) {
        completed++;
      } else {
        bad++;
      }
    });
  }
  for (auto& t : th) t.join();
  EXPECT_EQ(completed.load(), kClients - kClients * 3 / 10);
  EXPECT_EQ(dropped.load(), kClients * 3 / 10);
  EXPECT_EQ(bad.load(), 0);
  // Cancellations land within a step; poll until the engine is idle.
  std::string met;
  for (int i = 0; i < 200; ++i) {
    met = Get(port(), "/metrics").body;
    if (MetricValue(met, "tarmac:num_requests_running{") == 0 && MetricValue(met, "tarmac:num_requests_waiting{") == 0 &&
        MetricValue(met, "tarmac:kv_cache_request_blocks{") == 0)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(MetricValue(met, "tarmac:num_requests_running{"), 0);
  EXPECT_EQ(MetricValue(met, "tarmac:kv_cache_request_blocks{"), 0) << "blocks still held by requests";
  EXPECT_EQ(MetricValue(met, "tarmac:kv_cache_free_blocks{") + MetricValue(met, "tarmac:kv_cache_cached_blocks{"),
            MetricValue(met, "tarmac:kv_cache_blocks_total{"));
  EXPECT_EQ(MetricValue(met, "tarmac:server_requests_admitted"), 0);
  EXPECT_GT(MetricValue(met, "tarmac:request_success_total{"), -1);
  EXPECT_NE(met.find("finished_reason=\"abort\""), std::string::npos);
  ASSERT_TRUE(server_->Alive()) << "integrity check failed (server aborted)";
  EXPECT_EQ(Get(port(), "/health").status, 200);
}

class ServerProcessTest : public TempDirTest {};

TEST_F(ServerProcessTest, AuthWithKeyFile) {
  {
    std::ofstream f(Path("keys.txt"));
    f << "# key tenant\nsk-alpha-123456 alpha\nsk-beta-1234567 beta\n";
  }
  ServerProcess srv({"--api-key-file", Path("keys.txt")}, Path("log.txt"));
  ASSERT_TRUE(srv.WaitReady());
  const std::string body = Json{{"model", kModel}, {"prompt", "hi"}, {"max_tokens", 2}}.dump();
  EXPECT_EQ(Post(srv.port(), "/v1/completions", body).status, 401);
  EXPECT_EQ(Post(srv.port(), "/v1/completions", body, "Authorization: Bearer sk-alpha-123457\r\n").status, 401);
  EXPECT_EQ(Post(srv.port(), "/v1/completions", body, "Authorization: Bearer sk-alpha-12345\r\n").status, 401);
  EXPECT_EQ(Post(srv.port(), "/v1/completions", body, "Authorization: Basic sk-alpha-123456\r\n").status, 401);
  EXPECT_EQ(Get(srv.port(), "/v1/models").status, 401);
  EXPECT_EQ(Get(srv.port(), "/metrics").status, 401);
  EXPECT_EQ(Get(srv.port(), "/health").status, 200);
  EXPECT_EQ(Post(srv.port(), "/v1/completions", body, "Authorization: Bearer sk-alpha-123456\r\n").status, 200);
  EXPECT_EQ(Post(srv.port(), "/v1/completions", body, "Authorization: Bearer sk-beta-1234567\r\n").status, 200);
  EXPECT_EQ(Get(srv.port(), "/v1/models", "Authorization: Bearer sk-beta-1234567\r\n").status, 200);
  // The prefix cache is scoped by tenant: alpha's repeat hits its own cache, beta starts cold.
  std::string prompt;
  for (int i = 0; i < 40; ++i) prompt += "Prince Andrew looked at Natasha. ";
  const std::string p = Json{{"model", kModel}, {"prompt", prompt}, {"max_tokens", 2}}.dump();
  auto cached = [&](const char* key) {
    HttpResponse r = Post(srv.port(), "/v1/completions", p, std::string("Authorization: Bearer ") + key + "\r\n");
    EXPECT_EQ(r.status, 200) << r.body;
    return Json::parse(r.body)["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  };
  EXPECT_EQ(cached("sk-alpha-123456"), 0);
  EXPECT_GT(cached("sk-alpha-123456"), 0);
  EXPECT_EQ(cached("sk-beta-1234567"), 0);
}

// Each model's warm-up (before "ready") shows nowhere in the metrics.
TEST_F(ServerProcessTest, WarmupIsNotCounted) {
  ServerProcess srv({}, Path("log.txt"));
  ASSERT_TRUE(srv.WaitReady());
  const std::string met = Get(srv.port(), "/metrics").body;
  for (const char* name : {"tarmac:prompt_tokens_total", "tarmac:generation_tokens_total",
                           "tarmac:prefix_cache_queries_total"}) {
    const std::string line = std::string(name) + "{model_name=\"wp-11m-f16\"} 0\n";
    EXPECT_NE(met.find(line), std::string::npos) << line << " in\n" << met;
  }
}

TEST_F(ServerProcessTest, SeveralModelsChosenByModelField) {
  // --no-warmup: a flag both models take; their first requests below still complete.
  ServerProcess srv({"-m", TARMAC_SOURCE_DIR "/models/wp-1m-f16.gguf", "--no-warmup"},
                    Path("log.txt"));
  ASSERT_TRUE(srv.WaitReady());
  Json models = Json::parse(Get(srv.port(), "/v1/models").body);
  ASSERT_EQ(models["data"].size(), 2u);
  for (const char* m : {"wp-11m-f16", "wp-1m-f16"}) {
    HttpResponse r = Post(srv.port(), "/v1/completions", Json{{"model", m}, {"prompt", "Pierre"}, {"max_tokens", 3}}.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Json::parse(r.body)["model"], m);
  }
  const std::string met = Get(srv.port(), "/metrics").body;
  EXPECT_NE(met.find("tarmac:num_requests_running{model_name=\"wp-1m-f16\"}"), std::string::npos);
}

TEST_F(ServerProcessTest, BenchServeRunsEveryWorkload) {
  ServerProcess srv({}, Path("log.txt"));
  ASSERT_TRUE(srv.WaitReady());
  const std::string url = "http://127.0.0.1:" + std::to_string(srv.port());
  for (const char* w : {"short-chat", "long-document", "shared-system-prompt", "multi-turn"}) {
    RunResult r = RunTarmac({"bench", "serve", "--url", url, "--workload", w, "--concurrency", "4", "--requests", "8",
                             "--max-tokens", "8", "--slo-ttft-ms", "100000", "--json"}, dir_.string());
    ASSERT_EQ(r.exit_code, 0) << w << ": " << r.out << r.err;
    Json j = Json::parse(r.out);
    EXPECT_EQ(j["successful_requests"], 8) << w;
    EXPECT_EQ(j["total_output_tokens"], 64) << w;
    EXPECT_GT(j["ttft_ms"]["p99"].get<double>(), 0) << w;
    EXPECT_GT(j["request_goodput"].get<double>(), 0) << w;
  }
  RunResult r = RunTarmac({"bench", "serve", "--url", url, "--rate", "50", "--requests", "6", "--max-tokens", "4"}, dir_.string());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Serving Benchmark Result"), std::string::npos);
}

// A thousand idle connections cost sockets, not threads; the server keeps answering.
TEST_F(ServerProcessTest, ThousandIdleConnectionsNoThreadPerConnection) {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  const int n = static_cast<int>(std::min<rlim_t>(1000, rl.rlim_cur > 64 ? rl.rlim_cur - 64 : 0));
  ServerProcess srv({}, Path("log.txt"));
  ASSERT_TRUE(srv.WaitReady());
  auto threads = [&] {
    std::string s = Slurp("/proc/" + std::to_string(srv.pid()) + "/status");
    return std::stoi(s.substr(s.find("Threads:") + 8));
  };
  const int before = threads();
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    int fd = Connect(srv.port());
    if (fd >= 0) fds.push_back(fd);
  }
  EXPECT_EQ(static_cast<int>(fds.size()), n);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string met = Get(srv.port(), "/metrics").body;
  EXPECT_GE(MetricValue(met, "tarmac:http_open_connections"), n);
  EXPECT_EQ(Post(srv.port(), "/v1/completions", Json{{"model", kModel}, {"prompt", "a"}, {"max_tokens", 2}}.dump()).status, 200);
  EXPECT_EQ(threads(), before) << n << " connections changed the thread count";
  for (int fd : fds) ::close(fd);
  std::fprintf(stderr, "%d idle connections, %d server threads\n", n, before);
}

TEST_F(ServerProcessTest, RequestTimeout) {
  ServerProcess srv({"--request-timeout", "0.2", "--max-concurrent", "1"}, Path("log.txt"));
  ASSERT_TRUE(srv.WaitReady());
  // Long enough to outlive the timeout on any machine: 500 tokens, decoded one at a time.
  const Json body = {{"model", kModel}, {"prompt", "War"}, {"max_tokens", 500}, {"ignore_eos", true}};
  std::thread streaming([&] {
    Json b = body;
    b["stream"] = true;
    HttpResponse r = Post(srv.port(), "/v1/completions", b.dump());
    EXPECT_EQ(r.status, 200);
    EXPECT_NE(r.body.find("\"code\":\"timeout\""), std::string::npos) << r.body.substr(0, 300);
    EXPECT_NE(r.body.find("data: [DONE]"), std::string::npos);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  HttpResponse r = Post(srv.port(), "/v1/completions", body.dump());  // queued behind it, then times out
  EXPECT_EQ(r.status, 408) << r.body;
  streaming.join();
  // The server is idle again and serves (a loaded machine may take longer than 0.2 s for even
  // this request: a few tries, each a 200 or a 408, never anything else).
  int status = 0;
  for (int i = 0; i < 5 && status != 200; ++i) {
    status = Post(srv.port(), "/v1/completions", Json{{"model", kModel}, {"prompt", "a"}, {"max_tokens", 2}}.dump()).status;
    EXPECT_TRUE(status == 200 || status == 408) << status;
  }
  EXPECT_EQ(status, 200);
}

TEST_F(ServerProcessTest, OverloadGets429QuicklyAndMemoryStaysFlat) {
  ServerProcess srv({"--max-concurrent", "2", "--max-queue", "2", "--rate-limit", "0"}, Path("log.txt"));
  ASSERT_TRUE(srv.WaitReady());
  const std::string body = Json{{"model", kModel}, {"prompt", "Count"}, {"max_tokens", 64}, {"ignore_eos", true}}.dump();
  long rss0 = 0;
  int ok = 0, rejected = 0;
  for (int round = 0; round < 5; ++round) {
    std::atomic<int> r_ok{0}, r_429{0}, other{0};
    std::atomic<double> worst_429_s{0};
    std::vector<std::thread> th;
    for (int i = 0; i < 24; ++i) {
      th.emplace_back([&] {
        auto t0 = std::chrono::steady_clock::now();
        HttpResponse r = Post(srv.port(), "/v1/completions", body);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r.status == 200) r_ok++;
        else if (r.status == 429 && !r.Header("Retry-After").empty()) {
          r_429++;
          double w = worst_429_s.load();
          while (s > w && !worst_429_s.compare_exchange_weak(w, s)) {}
        } else other++;
      });
    }
    for (auto& t : th) t.join();
    EXPECT_GE(r_ok.load(), 4);
    EXPECT_GT(r_429.load(), 0);
    EXPECT_EQ(other.load(), 0);
    EXPECT_LT(worst_429_s.load(), 1.0) << "429 must come back without waiting for a slot";
    ok += r_ok;
    rejected += r_429;
    if (round == 0) rss0 = srv.RssKib();
  }
  const long rss1 = srv.RssKib();
  std::fprintf(stderr, "overload: %d ok, %d rejected with 429; RSS %ld -> %ld KiB\n", ok, rejected, rss0, rss1);
  EXPECT_LT(rss1 - rss0, 32 * 1024) << "memory grew under overload";
}

TEST_F(ServerProcessTest, RateLimitPerTenant) {
  ServerProcess srv({"--rate-limit", "1", "--rate-limit-burst", "2"}, Path("log.txt"));
  ASSERT_TRUE(srv.WaitReady());
  const std::string body = Json{{"model", kModel}, {"prompt", "a"}, {"max_tokens", 1}}.dump();
  int ok = 0, limited = 0;
  for (int i = 0; i < 5; ++i) {
    HttpResponse r = Post(srv.port(), "/v1/completions", body);
    if (r.status == 200) ok++;
    if (r.status == 429 && !r.Header("Retry-After").empty()) limited++;
  }
  EXPECT_GE(ok, 2);
  EXPECT_GE(limited, 2);
}

TEST_F(ServerProcessTest, SigtermDrainsInFlightThenExits) {
  ServerProcess srv({"--drain-timeout", "60"}, Path("log.txt"));
  ASSERT_TRUE(srv.WaitReady());
  const std::string body = Json{{"model", kModel}, {"prompt", "War"}, {"max_tokens", 300}, {"ignore_eos", true},
                                {"stream", true}}.dump();
  int fd = Connect(srv.port());
  ASSERT_TRUE(SendAll(fd, Request("POST", "/v1/completions", body)));
  std::string raw;
  char buf[4096];
  ssize_t n;
  while (raw.find("\"text\"") == std::string::npos && (n = ::recv(fd, buf, sizeof(buf), 0)) > 0) raw.append(buf, n);
  ::kill(srv.pid(), SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(Get(srv.port(), "/health").status, 503);
  EXPECT_EQ(Post(srv.port(), "/v1/completions", Json{{"model", kModel}, {"prompt", "a"}}.dump()).status, 503);
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) raw.append(buf, n);
  ::close(fd);
  EXPECT_NE(raw.find("\"finish_reason\":\"length\""), std::string::npos) << "in-flight request was not finished";
  EXPECT_NE(raw.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(srv.WaitExit(30), 0);
}

TEST_F(ServerProcessTest, SigtermDrainTimeoutCancels) {
  ServerProcess srv({"--drain-timeout", "0.3"}, Path("log.txt"));
  ASSERT_TRUE(srv.WaitReady());
  const std::string body = Json{{"model", kModel}, {"prompt", "War"}, {"max_tokens", 500}, {"ignore_eos", true},
                                {"stream", true}}.dump();
  int fd = Connect(srv.port());
  ASSERT_TRUE(SendAll(fd, Request("POST", "/v1/completions", body)));
  std::string raw;
  char buf[4096];
  ssize_t n;
  while (raw.find("\"text\"") == std::string::npos && (n = ::recv(fd, buf, sizeof(buf), 0)) > 0) raw.append(buf, n);
  auto t0 = std::chrono::steady_clock::now();
  ::kill(srv.pid(), SIGTERM);
  EXPECT_EQ(srv.WaitExit(10), 0);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) raw.append(buf, n);
  ::close(fd);
}

}  // namespace
}  // namespace tarmac::testing
