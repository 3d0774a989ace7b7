// The fleet benchmark's stand-in for llm-d's endpoint picker (bench/fleet/picker.h) against two
// real `tarmac serve` replicas on loopback, so the benchmark's policy is checked, not assumed:
// its prefix index follows the replicas' real KV events (a prompt served by one replica scores
// there only and the picker sends its continuations there; once evicted it scores nowhere), ties
// are broken at random, and its load scorers, fed by the replicas' scraped vllm: metrics, send
// new prompts away from a replica with a queue.
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include "fleet/picker.h"
#include "server/server_test_util.h"

namespace tarmac::testing {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;
const std::string kModel = "wp-11m-f16";

bench::ReplicaAddress Address(const ServerProcess& srv, const std::string& log_path) {
  static const std::regex re(R"(KV events on (tcp://[0-9.:]+) \(bound\), replay on (tcp://[0-9.:]+))");
  std::smatch m;
  const std::string log = Slurp(log_path);
  bench::ReplicaAddress a;
  a.http_port = srv.port();
  if (std::regex_search(log, m, re)) a.events = m[1], a.replay = m[2];
  return a;
}

std::vector<int32_t> RandomIds(std::mt19937& rng, int n) {
  std::uniform_int_distribution<int32_t> id(10, 2000);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(id(rng));
  return out;
}

HttpResponse Complete(int port, const std::vector<int32_t>& ids, int max_tokens) {
  return Post(port, "/v1/completions",
              Json{{"model", kModel}, {"prompt", ids}, {"max_tokens", max_tokens}, {"ignore_eos", true}}.dump());
}

double Gauge(int port, const std::string& family) {
  const std::string text = Get(port, "/metrics").body;
  const size_t p = text.find("\n" + family);
  if (p == std::string::npos) return -1;
  const size_t e = text.find('\n', p + 1);
  const std::string line = text.substr(p + 1, e - p - 1);
  return std::stod(line.substr(line.rfind(' ') + 1));
}

// Polls until pred() or the deadline; returns pred()'s last value.
template <typename F>
bool Eventually(F pred, std::chrono::milliseconds within = 10s) {
  const auto end = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return pred();
}

std::set<int> Picks(bench::StandInPicker& picker, const std::vector<int32_t>& prompt, int n) {
  std::set<int> out;
  for (int i = 0; i < n; ++i) out.insert(picker.Pick(prompt));
  return out;
}

class FleetPickerTest : public TempDirTest {};

TEST_F(FleetPickerTest, FollowsTheReplicasEventsAndLoad) {
  const std::vector<std::string> common = {"--kv-events", "tcp://127.0.0.1:*", "--kv-events-replay", "tcp://127.0.0.1:*",
                                           "--metrics-names", "vllm", "--block-size", "16"};
  std::vector<std::string> a_flags = common, b_flags = common;
  a_flags.insert(a_flags.end(), {"--max-running", "1"});  // a queue forms behind one request
  b_flags.insert(b_flags.end(), {"--kv-blocks", "24"});   // small: evicts
  ServerProcess a(a_flags, Path("a.log")), b(b_flags, Path("b.log"));
  ASSERT_TRUE(a.WaitReady());
  ASSERT_TRUE(b.WaitReady());
  const std::vector<bench::ReplicaAddress> replicas = {Address(a, Path("a.log")), Address(b, Path("b.log"))};
  for (const auto& r : replicas) ASSERT_FALSE(r.events.empty()) << Slurp(Path("a.log")) << Slurp(Path("b.log"));
  bench::StandInPicker picker(replicas, bench::PickerWeights{}, 16, /*seed=*/3);
  const Status started = picker.Start();
  ASSERT_TRUE(started.ok()) << started.message();

  std::mt19937 rng(11);
  const std::vector<int32_t> prompt = RandomIds(rng, 81);  // 5 full blocks and one token
  std::vector<int32_t> continued = prompt;
  for (int32_t t : RandomIds(rng, 40)) continued.push_back(t);
  const std::vector<int32_t> unrelated = RandomIds(rng, 90);
  EXPECT_EQ(picker.PrefixBlocks(prompt), (std::vector<int>{0, 0}));
  // Nothing cached, equal load: a tie, broken at random (both replicas come up).
  EXPECT_EQ(Picks(picker, prompt, 64), (std::set<int>{0, 1}));

  // Served by b: its 5 full blocks are indexed on b only, and continuations go to b.
  ASSERT_EQ(Complete(b.port(), prompt, 1).status, 200);
  EXPECT_TRUE(Eventually([&] { return picker.PrefixBlocks(prompt) == std::vector<int>{0, 5}; }))
      << "index has " << picker.PrefixBlocks(prompt)[1] << " blocks on b";
  EXPECT_EQ(picker.PrefixBlocks(continued), (std::vector<int>{0, 5}));
  EXPECT_EQ(Picks(picker, continued, 32), (std::set<int>{1}));
  EXPECT_EQ(picker.PrefixBlocks(unrelated), (std::vector<int>{0, 0}));

  // A queue on a (one running, two waiting): new prompts go to b.
  std::vector<std::thread> load;
  for (int i = 0; i < 3; ++i) load.emplace_back([&a, ids = RandomIds(rng, 20 + i)] { Complete(a.port(), ids, 400); });
  ASSERT_TRUE(Eventually([&] { return Gauge(a.port(), "vllm:num_requests_waiting") >= 1; }));
  std::this_thread::sleep_for(200ms);  // the picker scrapes every 50 ms
  const std::set<int> under_load = Picks(picker, unrelated, 32);
  const double still_waiting = Gauge(a.port(), "vllm:num_requests_waiting");
  for (auto& t : load) t.join();
  ASSERT_GE(still_waiting, 1) << "the queue drained before the picks: inconclusive";
  EXPECT_EQ(under_load, (std::set<int>{1}));

  // Evicted from b by other prompts: the removals reach the index, and the prompt scores nowhere.
  for (int i = 0; i < 4; ++i) ASSERT_EQ(Complete(b.port(), RandomIds(rng, 128), 4).status, 200);
  EXPECT_GT(Gauge(b.port(), "tarmac:prefix_cache_evicted_blocks_total"), 0);
  EXPECT_TRUE(Eventually([&] { return picker.PrefixBlocks(prompt) == std::vector<int>{0, 0}; }))
      << "index still has " << picker.PrefixBlocks(prompt)[1] << " blocks on b";
  EXPECT_TRUE(Eventually([&] { return Gauge(a.port(), "vllm:num_requests_waiting") == 0; }));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(Picks(picker, prompt, 64), (std::set<int>{0, 1}));
  const bench::StandInPicker::Stats s = picker.stats();
  EXPECT_GT(s.messages, 0);
  EXPECT_EQ(s.lost, 0);
  EXPECT_EQ(s.restarts, 0);
}

}  // namespace
}  // namespace tarmac::testing
