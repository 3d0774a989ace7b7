// `tarmac serve` as a model server llm-d's endpoint picker can pick (issue 22), end to end on
// loopback: readiness, the vLLM-named metrics the picker scrapes (typed, one series each, the
// usage fraction consistent with the KV gauges), render endpoints equal to the real request's
// prompt tokens, and the KV events of the real binary: a follower rebuilds the cache's blocks
// (as many as the cache holds, no orphan parent, the namespace salt folded into each tenant's
// first block), and a restarted server starts again at sequence 0 with AllBlocksCleared.
#include <atomic>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include "cache/scope.h"
#include "kvevents/block_set.h"
#include "kvevents/follower.h"
#include "prefix/block_hash.h"
#include "router/generation_spec.h"
#include "server_test_util.h"

namespace tarmac::testing {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;
const std::string kModel = "wp-11m-f16";

struct KvEndpoints {
  std::string pub, replay;
};

// "KV events on tcp://127.0.0.1:P (bound), replay on tcp://127.0.0.1:R" from the server's log.
KvEndpoints ReadKvEndpoints(const std::string& log_path) {
  static const std::regex re(R"(KV events on (tcp://[0-9.:]+) \(bound\), replay on (tcp://[0-9.:]+))");
  std::smatch m;
  const std::string log = Slurp(log_path);
  if (!std::regex_search(log, m, re)) return {};
  return {m[1], m[2]};
}

std::vector<int32_t> Render(int port, const std::string& route, const Json& body, const std::string& headers = "") {
  HttpResponse r = Post(port, route, body.dump(), headers);
  EXPECT_EQ(r.status, 200) << r.body;
  Json j = Json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("token_ids") ? j["token_ids"].get<std::vector<int32_t>>() : std::vector<int32_t>{};
}

// Prometheus text: family -> TYPE, and the samples of each family (name with labels -> value).
struct Scrape {
  std::map<std::string, std::string> types;
  std::map<std::string, std::vector<std::pair<std::string, double>>> samples;
  std::vector<std::string> untyped;  // sample families with no # TYPE before them
  double Value(const std::string& family) const {
    auto it = samples.find(family);
    return it == samples.end() || it->second.empty() ? -1 : it->second.front().second;
  }
};

Scrape Parse(const std::string& text) {
  Scrape s;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      std::string name, type;
      t >> name >> type;
      s.types[name] = type;
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    const std::string series = line.substr(0, line.rfind(' '));
    std::string family = series.substr(0, series.find('{'));
    if (!s.types.count(family)) {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string sf(suffix);
        if (family.size() > sf.size() && family.compare(family.size() - sf.size(), sf.size(), sf) == 0 &&
            s.types.count(family.substr(0, family.size() - sf.size()))) {
          family.resize(family.size() - sf.size());
          break;
        }
      }
    }
    if (!s.types.count(family)) s.untyped.push_back(family);
    s.samples[family].emplace_back(series, std::stod(line.substr(line.rfind(' ') + 1)));
  }
  return s;
}

// A streamed completion the client abandons after its first bytes (the server cancels it).
void AbandonedStream(int port, const Json& body, const std::string& headers) {
  int fd = Connect(port);
  ASSERT_GE(fd, 0);
  const std::string b = body.dump();
  SendAll(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + headers + "Content-Type: application/json\r\nContent-Length: " +
                  std::to_string(b.size()) + "\r\n\r\n" + b);
  char buf[512];
  (void)::recv(fd, buf, sizeof(buf), 0);
  ::close(fd);
}

class ScaleOutTest : public TempDirTest {};

TEST_F(ScaleOutTest, ReadinessFollowsLoadingAndDraining) {
  ServerProcess srv({"--drain-timeout", "5"}, Path("server.log"));
  ASSERT_TRUE(srv.WaitReady());
  HttpResponse r = Get(srv.port(), "/ready");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json::parse(r.body)["models"][kModel], "ready");
  // A long streamed request keeps the server draining after SIGTERM: readiness goes at once.
  // SIGTERM only once its first bytes arrived (a fixed sleep let a fast machine finish it).
  const int fd = Connect(srv.port());
  ASSERT_GE(fd, 0);
  const std::string b = Json{{"model", kModel}, {"prompt", "War"}, {"max_tokens", 400},
                             {"ignore_eos", true}, {"stream", true}}.dump();
  ASSERT_TRUE(SendAll(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                              std::to_string(b.size()) + "\r\n\r\n" + b));
  char buf[4096];
  ASSERT_GT(::recv(fd, buf, sizeof(buf), 0), 0);
  ::kill(srv.pid(), SIGTERM);
  int ready = 0;
  for (int i = 0; i < 100 && ready != 503; ++i, std::this_thread::sleep_for(5ms)) ready = Get(srv.port(), "/ready").status;
  EXPECT_EQ(ready, 503);
  std::string rest;  // the drained request still completes
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) rest.append(buf, static_cast<size_t>(n));
  ::close(fd);
  EXPECT_NE(rest.find("[DONE]"), std::string::npos) << rest.substr(0, 400);
  EXPECT_EQ(srv.WaitExit(30), 0);
}

TEST_F(ScaleOutTest, VllmMetricNamesAreTypedOneSeriesEachAndConsistent) {
  ServerProcess srv({"--metrics-names", "vllm", "--kv-blocks", "256", "--block-size", "16"}, Path("server.log"));
  ASSERT_TRUE(srv.WaitReady());
  std::atomic<bool> stop{false};
  std::vector<std::thread> load;
  for (int i = 0; i < 4; ++i) {
    load.emplace_back([&, i] {
      while (!stop) {
        Post(srv.port(), "/v1/completions",
             Json{{"model", kModel}, {"prompt", "Natasha " + std::to_string(i)}, {"max_tokens", 64}, {"ignore_eos", true}}.dump());
      }
    });
  }
  bool saw_usage = false;
  for (int i = 0; i < 30; ++i) {
    HttpResponse m = Get(srv.port(), "/metrics");
    ASSERT_EQ(m.status, 200);
    Scrape s = Parse(m.body);
    EXPECT_TRUE(s.untyped.empty()) << "no # TYPE for " << s.untyped.front();
    for (const char* name : {"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
                             "vllm:cache_config_info"}) {
      EXPECT_EQ(s.types[name], "gauge") << name;
      ASSERT_EQ(s.samples[name].size(), 1u) << name;
    }
    const double usage = s.Value("vllm:kv_cache_usage_perc");
    EXPECT_GE(usage, 0.0);
    EXPECT_LE(usage, 1.0);
    saw_usage = saw_usage || usage > 0;
    // Read a moment apart from the tarmac: gauges while requests run: close, not equal.
    const double total = s.Value("tarmac:kv_cache_blocks_total");
    EXPECT_NEAR(usage, s.Value("tarmac:kv_cache_request_blocks") / total, 0.1);
    EXPECT_EQ(s.samples["vllm:cache_config_info"].front().first,
              "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"256\"}");
    EXPECT_EQ(total, 256);
    EXPECT_EQ(s.samples["vllm:num_requests_running"].front().first,
              "vllm:num_requests_running{model_name=\"" + kModel + "\"}");
    std::this_thread::sleep_for(30ms);
  }
  stop = true;
  for (auto& t : load) t.join();
  EXPECT_TRUE(saw_usage);
  // Idle: the usage fraction is exactly the KV gauges'.
  Scrape s = Parse(Get(srv.port(), "/metrics").body);
  EXPECT_EQ(s.Value("vllm:kv_cache_usage_perc"), s.Value("tarmac:kv_cache_request_blocks") / 256.0);
  EXPECT_EQ(s.Value("vllm:num_requests_running"), 0);
  EXPECT_EQ(s.Value("vllm:num_requests_waiting"), 0);
}

TEST_F(ScaleOutTest, VllmMetricNamesNeedOneModelNamed) {
  const std::string wp1m = TARMAC_SOURCE_DIR "/models/wp-1m-f16.gguf";
  RunResult r = RunTarmac({"serve", "-m", kWp11m, "-m", wp1m, "--port", "0", "--metrics-names", "vllm"}, dir_.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--metrics-model"), std::string::npos) << r.err;
  r = RunTarmac({"serve", "-m", kWp11m, "--port", "0", "--metrics-names", "vllm", "--metrics-model", "nope"}, dir_.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--metrics-model 'nope'"), std::string::npos) << r.err;
  r = RunTarmac({"serve", "-m", kWp11m, "--port", "0", "--kv-events", "localhost:1"}, dir_.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--kv-events 'localhost:1'"), std::string::npos) << r.err;
  r = RunTarmac({"serve", "-m", kWp11m, "--port", "0", "--kv-events", "tcp://127.0.0.1:*", "--kv-events-topic", "kv@{pod}"}, dir_.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown placeholder {pod}"), std::string::npos) << r.err;

  ServerProcess srv({"-m", wp1m, "--metrics-names", "vllm", "--metrics-model", "wp-1m-f16"}, Path("server.log"));
  ASSERT_TRUE(srv.WaitReady());
  Scrape s = Parse(Get(srv.port(), "/metrics").body);
  ASSERT_EQ(s.samples["vllm:num_requests_waiting"].size(), 1u);
  EXPECT_EQ(s.samples["vllm:num_requests_waiting"].front().first, "vllm:num_requests_waiting{model_name=\"wp-1m-f16\"}");
}

// --block-size reaches everything the picker reads: cache_config_info, the events' block_size
// and token ids per hash, and the prefix reuse of a repeated prompt (whole 32-token blocks).
TEST_F(ScaleOutTest, BlockSizeIsThePickersEverywhere) {
  ServerProcess srv({"--block-size", "32", "--kv-blocks", "128", "--metrics-names", "vllm", "--kv-events",
                     "tcp://127.0.0.1:*", "--kv-events-replay", "tcp://127.0.0.1:*"},
                    Path("server.log"));
  ASSERT_TRUE(srv.WaitReady());
  Scrape s = Parse(Get(srv.port(), "/metrics").body);
  ASSERT_EQ(s.samples["vllm:cache_config_info"].size(), 1u);
  EXPECT_EQ(s.samples["vllm:cache_config_info"].front().first,
            "vllm:cache_config_info{block_size=\"32\",num_gpu_blocks=\"128\"}");
  std::vector<int32_t> ids;
  for (int i = 0; i < 100; ++i) ids.push_back(40 + (i * 37) % 1900);  // 3 full blocks of 32 and 4 tokens
  const Json body = {{"model", kModel}, {"prompt", ids}, {"max_tokens", 2}};
  ASSERT_EQ(Post(srv.port(), "/v1/completions", body.dump()).status, 200);
  Json again = Json::parse(Post(srv.port(), "/v1/completions", body.dump()).body);
  EXPECT_EQ(again["usage"]["prompt_tokens_details"]["cached_tokens"], 96);
  const KvEndpoints ep = ReadKvEndpoints(Path("server.log"));
  auto sub = kvevents::Subscriber::Connect(ep.pub, ep.replay);
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  // Replayed from 0 until the request's blocks are in (the publisher sends after the response).
  std::set<std::vector<int32_t>> stored;  // the token ids of every stored block
  auto has_prompt = [&] {
    for (size_t b = 0; b < 3; ++b)
      if (!stored.count(std::vector<int32_t>(ids.begin() + 32 * b, ids.begin() + 32 * (b + 1)))) return false;
    return true;
  };
  for (int attempt = 0; attempt < 50 && !has_prompt(); ++attempt, std::this_thread::sleep_for(100ms)) {
    auto all = (*sub)->Replay(0, 5s);
    ASSERT_TRUE(all.ok()) << all.status().message();
    for (const kvevents::Message& m : *all) {
      for (const kvevents::WireEvent& e : m.batch.events) {
        if (e.kind != kvevents::WireEvent::Kind::kStored) continue;
        EXPECT_EQ(e.block_size, 32);
        ASSERT_EQ(e.tokens.size(), 32 * e.hashes.size());
        for (size_t b = 0; b < e.hashes.size(); ++b) stored.emplace(e.tokens.begin() + 32 * b, e.tokens.begin() + 32 * (b + 1));
      }
    }
  }
  EXPECT_TRUE(has_prompt()) << stored.size() << " blocks stored, not the prompt's three";
}

// The render endpoints give exactly the prompt the real request prefills: as many tokens as its
// usage says, and a repeat of it hits the prefix cache for every full block but the last token's.
TEST_F(ScaleOutTest, RenderEqualsTheRealRequestsPromptTokens) {
  ServerProcess srv({"--block-size", "16"}, Path("server.log"));
  ASSERT_TRUE(srv.WaitReady());
  const Json chat = {{"model", kModel},
                     {"messages", Json::array({{{"role", "system"}, {"content", "You are Pierre, at the ball."}},
                                               {{"role", "user"}, {"content", "Who is the young Countess Rostova, and why does everyone watch her dance?"}}})},
                     {"max_tokens", 4}};
  const Json completion = {{"model", kModel},
                           {"prompt", "Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes."},
                           {"max_tokens", 4}};
  for (const auto& [route, body] : {std::pair{std::string("/v1/chat/completions"), chat},
                                    std::pair{std::string("/v1/completions"), completion}}) {
    const std::vector<int32_t> ids = Render(srv.port(), route + "/render", body);
    ASSERT_GT(ids.size(), 16u) << route;
    Json first = Json::parse(Post(srv.port(), route, body.dump()).body);
    Json again = Json::parse(Post(srv.port(), route, body.dump()).body);
    EXPECT_EQ(first["usage"]["prompt_tokens"], ids.size()) << route;
    EXPECT_EQ(again["usage"]["prompt_tokens_details"]["cached_tokens"], (ids.size() - 1) / 16 * 16) << route;
  }
  // The chat render is /tokenize's rendering of the same messages; token-id prompts come back as given.
  Json tok = Json::parse(Post(srv.port(), "/tokenize", Json{{"model", kModel}, {"messages", chat["messages"]}}.dump()).body);
  EXPECT_EQ(Render(srv.port(), "/v1/chat/completions/render", chat), tok["tokens"].get<std::vector<int32_t>>());
  EXPECT_EQ(Render(srv.port(), "/v1/completions/render", Json{{"model", kModel}, {"prompt", {5, 6, 7}}}),
            (std::vector<int32_t>{5, 6, 7}));
  // Errors name the field, as the real request's would.
  HttpResponse bad = Post(srv.port(), "/v1/completions/render", Json{{"model", kModel}, {"prompt", {"a", "b"}}}.dump());
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(Json::parse(bad.body)["error"]["param"], "prompt");
  bad = Post(srv.port(), "/v1/chat/completions/render", Json{{"model", kModel}, {"messages", 3}}.dump());
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(Json::parse(bad.body)["error"]["param"], "messages");
  EXPECT_EQ(Post(srv.port(), "/v1/completions/render", Json{{"model", "nope"}, {"prompt", "x"}}.dump()).status, 404);
  EXPECT_EQ(Get(srv.port(), "/v1/completions/render").status, 405);
}

// The real binary's events: after a randomized workload (two tenants, shared prefixes, a small
// KV pool that evicts, abandoned streams) a follower holds as many blocks as the cache does,
// with no orphan parent; a tenant's first block folds its namespace salt in.
TEST_F(ScaleOutTest, AFollowerOfTheRealServerRebuildsItsCache) {
  std::ofstream(Path("keys.txt")) << "key-aaaa-1 tenant-a\nkey-bbbb-2 tenant-b\n";
  // A known namespace secret, so the test can derive each tenant's salt as the server does.
  const std::string secret = "0123456789abcdef-scale-out-test";
  std::ofstream(Path("ns.key")) << secret << "\n";
  std::ofstream(Path("tarmac.yaml")) << "models:\n  - {path: " << kWp11m << ", name: " << kModel << "}\n"
                                     << "cache: {secret_file: " << Path("ns.key") << "}\n";
  ServerProcess srv({"--config", Path("tarmac.yaml"), "--kv-events", "tcp://127.0.0.1:*", "--kv-events-replay",
                     "tcp://127.0.0.1:*", "--kv-blocks", "64", "--block-size", "16", "--api-key-file", Path("keys.txt"),
                     "--check-integrity"},
                    Path("server.log"), false);
  ASSERT_TRUE(srv.WaitReady());
  const KvEndpoints ep = ReadKvEndpoints(Path("server.log"));
  ASSERT_FALSE(ep.pub.empty()) << Slurp(Path("server.log"));
  auto f = kvevents::Follower::Connect(ep.pub, ep.replay, "kv@");
  ASSERT_TRUE(f.ok()) << f.status().message();
  kvevents::BlockSet set;
  std::set<std::string> topics;
  auto apply = [&](const kvevents::Message& m) {
    if (!m.topic.empty()) topics.insert(m.topic);
    set.Apply(m.batch);
  };
  const std::vector<std::string> stems = {
      "The Rostovs' house in Moscow was full of guests on the name day of the mother and the youngest daughter, ",
      "Prince Andrew looked at the sky above Austerlitz, high and endless, with grey clouds creeping over it, ",
      "Pierre could not decide whether he should go to the front, or stay in Moscow and wait for Napoleon, "};
  std::mt19937 rng(5);
  for (int i = 0; i < 60; ++i) {
    const std::string key = rng() % 2 ? "key-aaaa-1" : "key-bbbb-2";
    const Json body = {{"model", kModel},
                       {"prompt", stems[rng() % stems.size()] + std::to_string(rng() % 1000) + " and then"},
                       {"max_tokens", 8 + static_cast<int>(rng() % 24)},
                       {"ignore_eos", true},
                       {"stream", i % 5 == 4}};
    const std::string auth = "Authorization: Bearer " + key + "\r\n";
    if (i % 5 == 4) {
      AbandonedStream(srv.port(), body, auth);  // cancelled when the server sees the client gone
    } else {
      EXPECT_EQ(Post(srv.port(), "/v1/completions", body.dump(), auth).status, 200);
    }
    ASSERT_TRUE((*f)->Pump(0ms, apply).ok());
  }
  // The same prompt under both tenants, last (so it is still cached).
  const Json probe = {{"model", kModel}, {"prompt", stems[0] + "at last"}, {"max_tokens", 1}};
  const std::vector<int32_t> ids = Render(srv.port(), "/v1/completions/render", probe, "Authorization: Bearer key-aaaa-1\r\n");
  for (const char* key : {"key-aaaa-1", "key-bbbb-2"})
    EXPECT_EQ(Post(srv.port(), "/v1/completions", probe.dump(), std::string("Authorization: Bearer ") + key + "\r\n").status, 200);

  // Idle: the follower catches up with every message the server says it sent.
  Scrape s;
  for (int i = 0; i < 100; ++i, std::this_thread::sleep_for(20ms)) {
    s = Parse(Get(srv.port(), "/metrics", "Authorization: Bearer key-aaaa-1\r\n").body);
    if (s.Value("tarmac:num_requests_running") == 0) break;
  }
  const double sent = s.Value("tarmac:kv_events_messages_total");
  ASSERT_GT(sent, 0);
  auto caught = (*f)->WaitFor(static_cast<uint64_t>(sent) - 1, 10s, apply);
  ASSERT_TRUE(caught.ok() && *caught) << "follower at " << (*f)->last_seq().value_or(0) << " of " << sent;
  EXPECT_EQ(s.Value("tarmac:kv_cache_request_blocks"), 0);
  EXPECT_EQ(static_cast<double>(set.size()), s.Value("tarmac:kv_cache_cached_blocks"));
  EXPECT_GT(s.Value("tarmac:prefix_cache_evicted_blocks_total"), 0);
  EXPECT_EQ(set.orphans(), 0);
  EXPECT_EQ(set.unknown_removals(), 0);
  EXPECT_TRUE(set.CheckIntegrity().ok());
  EXPECT_EQ(topics, (std::set<std::string>{"kv@127.0.0.1:" + std::to_string(srv.port()) + "@" + kModel}));
  // Each tenant's chain of the probe's full blocks, from its own salt.
  for (const char* tenant : {"tenant-a", "tenant-b"}) {
    cache::RequestScope scope;
    scope.tenant = tenant;
    scope.target = kModel;
    uint64_t h = prefix::NamespaceSalt(router::PrefixNamespace(cache::NamespaceKey(secret, scope), kModel));
    for (size_t b = 0; b + 1 < ids.size() / 16; ++b) {
      h = prefix::ChainedBlockHash(h, std::span<const int32_t>(ids).subspan(b * 16, 16));
      ASSERT_TRUE(set.contains(h)) << tenant << " block " << b;
      EXPECT_EQ(set.blocks().at(h).parent.has_value(), b > 0);
    }
  }
}

// An independent subscriber (tests/server/kv_events_subscriber.py: Debian's python3-zmq and
// python3-msgpack, vLLM's framing, no tarmac code) of the real binary's stream and replay socket.
TEST_F(ScaleOutTest, AnIndependentPythonSubscriberReadsTheRealStream) {
  ServerProcess srv({"--kv-events", "tcp://127.0.0.1:*", "--kv-events-replay", "tcp://127.0.0.1:*", "--kv-blocks", "32",
                     "--block-size", "16"},
                    Path("server.log"));
  ASSERT_TRUE(srv.WaitReady());
  const KvEndpoints ep = ReadKvEndpoints(Path("server.log"));
  ASSERT_FALSE(ep.pub.empty()) << Slurp(Path("server.log"));
  // Debian's interpreter, where python3-zmq and python3-msgpack install (scripts/install-deps.sh).
  const std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const std::string cmd = python + " '" TARMAC_SOURCE_DIR "/tests/server/kv_events_subscriber.py' " + ep.pub + " " +
                          ep.replay + " 'kv@127.0.0.1:" + std::to_string(srv.port()) + "@" + kModel + "' " +
                          std::to_string(srv.port()) + " " + kModel + " >" + Path("sub.out") + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << Slurp(Path("sub.out"));
  EXPECT_NE(Slurp(Path("sub.out")).find(", ok"), std::string::npos) << Slurp(Path("sub.out"));
}

// Stopped and started again on the same endpoints, the server's stream starts over at 0 with
// AllBlocksCleared, and a follower that stayed connected starts over with it.
TEST_F(ScaleOutTest, ARestartedServerStartsAgainAtSequenceZero) {
  auto start = [&](const std::string& pub, const std::string& replay, const std::string& log) {
    return std::make_unique<ServerProcess>(
        std::vector<std::string>{"--kv-events", pub, "--kv-events-replay", replay, "--kv-events-format", "map"}, Path(log));
  };
  auto srv = start("tcp://127.0.0.1:*", "tcp://127.0.0.1:*", "one.log");
  ASSERT_TRUE(srv->WaitReady());
  const KvEndpoints ep = ReadKvEndpoints(Path("one.log"));
  ASSERT_FALSE(ep.pub.empty());
  auto f = kvevents::Follower::Connect(ep.pub, ep.replay);
  ASSERT_TRUE(f.ok());
  kvevents::BlockSet set;
  auto apply = [&](const kvevents::Message& m) { set.Apply(m.batch); };
  for (int i = 0; i < 12; ++i) {
    Post(srv->port(), "/v1/completions",
         Json{{"model", kModel}, {"prompt", "Chapter " + std::to_string(i) + " of the first volume begins in Petersburg"},
              {"max_tokens", 20}, {"ignore_eos", true}}.dump());
    ASSERT_TRUE((*f)->Pump(10ms, apply).ok());
  }
  ASSERT_TRUE((*f)->Pump(300ms, apply).ok());
  ASSERT_GT(set.size(), 0u);
  ::kill(srv->pid(), SIGTERM);
  ASSERT_EQ(srv->WaitExit(30), 0);

  srv = start(ep.pub, ep.replay, "two.log");
  ASSERT_TRUE(srv->WaitReady());
  Post(srv->port(), "/v1/completions", Json{{"model", kModel}, {"prompt", "Again"}, {"max_tokens", 2}}.dump());
  auto sub = kvevents::Subscriber::Connect(ep.pub, ep.replay);
  ASSERT_TRUE(sub.ok());
  auto all = (*sub)->Replay(0, 5s);
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_FALSE(all->empty());
  EXPECT_EQ(all->front().seq, 0u);
  ASSERT_FALSE(all->front().batch.events.empty());
  EXPECT_EQ(all->front().batch.events.front().kind, kvevents::WireEvent::Kind::kCleared);
  // The follower that stayed connected: it sees numbers it had with other contents.
  for (int i = 0; i < 50 && (*f)->restarts() == 0; ++i) {
    Post(srv->port(), "/v1/completions",
         Json{{"model", kModel}, {"prompt", "Volume two, part " + std::to_string(i)}, {"max_tokens", 17}}.dump());
    ASSERT_TRUE((*f)->Pump(50ms, apply).ok());
  }
  EXPECT_EQ((*f)->restarts(), 1);
  EXPECT_EQ(set.cleared(), 2);
  EXPECT_TRUE(set.CheckIntegrity().ok());
}

}  // namespace
}  // namespace tarmac::testing
