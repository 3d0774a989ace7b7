// One tenant floods, another sends a request now and then: with the flooder capped by its
// concurrency limit the quiet tenant's time to first token under the flood is lower than
// without limits, at p50 and p90. The quiet tenant sends two kinds of request, alternating:
// "fresh" ones (a distinct first word, so ~90 prompt tokens to prefill: TTFT ~5 ms alone) and
// "cached" ones (the same prompt each time, a prefix-cache hit: TTFT ~1 ms, about one engine
// step, so it pays most of the flooder's step in progress). Alone and flooded phases alternate
// on the same server (kRounds each), so the drift of a shared machine's load hits both; a second
// server without limits is measured the same way. TTFT here is the latency of a one-token
// completion (HTTP included). The bound (p99 under the flood within 1.2x of alone) is
// asserted for fresh requests when TARMAC_FAIRNESS_ROUNDS >= 16 (bench/fairness_bench.sh: 1280
// samples per cell: it has passed there only against an alone baseline slowed by the pool's
// worker sharing the step thread's CPU, bench/NOTES.md `## server: tenant fairness`); the
// default run's 320 samples put p99 at the 3rd-worst sample, which moves 0.8-1.5x between
// identical runs on the 2-vCPU machine, so it prints it. Slow (label): about a
// minute of timing. The figures go to stdout (bench/NOTES.md records them).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/test_util.h"
#include "server_test_util.h"

namespace tarmac::testing {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// alone / flood phases, alternating (drift on a shared machine hits both); the environment's
// TARMAC_FAIRNESS_ROUNDS raises it (bench/fairness_bench.sh: a p99 of many more samples).
const int kRounds = std::max(4, std::getenv("TARMAC_FAIRNESS_ROUNDS") ? std::atoi(std::getenv("TARMAC_FAIRNESS_ROUNDS")) : 4);
constexpr int kSamples = 80;      // quiet requests of each kind per phase (320 per cell by default)
constexpr int kFlooders = 12;     // flooding connections
constexpr int kFloodCap = 2;      // the flooder's max_concurrent with limits on

std::string Auth(const std::string& key) { return "Authorization: Bearer " + key + "\r\n"; }

// fresh: a new first word each call, so nothing of the prompt is cached.
std::string QuietBody(bool fresh) {
  static std::atomic<int> n{0};
  std::string prompt = fresh ? "Note " + std::to_string(n++) + ". " : "";
  for (int i = 0; i < 8; ++i) prompt += "Prince Andrew looked at the little princess and smiled. ";
  return Json{{"model", "wp"}, {"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}}.dump();
}

std::string FloodBody() {
  std::string prompt;
  for (int i = 0; i < 12; ++i) prompt += "Well, Prince, so Genoa and Lucca are now just family estates. ";
  return Json{{"model", "wp"}, {"prompt", prompt}, {"max_tokens", 48}, {"temperature", 0.8}, {"ignore_eos", true}}.dump();
}

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0;
};

Percentiles Of(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * static_cast<double>(ms.size())))]; };
  return {at(0.5), at(0.9), at(0.99)};
}

struct Latencies {
  std::vector<double> fresh, cached;  // ms
};

// kSamples one-token completions of each kind from the quiet tenant, alternating, one after
// another: their latencies.
void Measure(int port, Latencies* ms) {
  for (int i = 0; i < 2 * kSamples; ++i) {
    const bool fresh = i % 2 == 0;
    const auto t0 = Clock::now();
    const HttpResponse r = Post(port, "/v1/completions", QuietBody(fresh), Auth("quiet-key-0001"));
    (fresh ? ms->fresh : ms->cached).push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    EXPECT_EQ(r.status, 200) << r.body;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// Floods from kFlooders connections until stopped; a 429 is retried after 20 ms.
class Flood {
 public:
  explicit Flood(int port) {
    for (int i = 0; i < kFlooders; ++i)
      threads_.emplace_back([this, port] {
        while (!stop_) {
          const HttpResponse r = Post(port, "/v1/completions", FloodBody(), Auth("flood-key-0001"));
          (r.status == 200 ? ok_ : refused_)++;
          if (r.status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      });
    std::this_thread::sleep_for(std::chrono::seconds(1));  // the flood is on
  }
  ~Flood() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }
  int64_t ok() const { return ok_; }
  int64_t refused() const { return refused_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> ok_{0}, refused_{0};
  std::vector<std::thread> threads_;
};

class TenantFairnessTest : public TempDirTest {
 protected:
  std::unique_ptr<ServerProcess> Start(bool limits, const std::string& name) {
    std::ofstream(Path("keys.txt")) << "flood-key-0001 flood\nquiet-key-0001 quiet\n";
    const std::string cfg = Path(name + ".yaml");
    std::ofstream(cfg) << "models:\n  - {path: " << kWp11m << ", name: wp}\n"
                       << "api_key_file: " << Path("keys.txt") << "\n"
                       << "tenants:\n  - {name: flood" << (limits ? ", max_concurrent: " + std::to_string(kFloodCap) : "")
                       << "}\n  - {name: quiet}\n";
    auto s = std::make_unique<ServerProcess>(std::vector<std::string>{"--config", cfg}, Path(name + ".log"), false);
    EXPECT_TRUE(s->WaitReady()) << Slurp(Path(name + ".log"));
    return s;
  }
};

struct PhaseResults {
  Percentiles alone, flood;                // fresh requests
  Percentiles alone_cached, flood_cached;  // cached requests
  int64_t ok = 0, refused = 0;
};

// Rounds of (quiet alone, quiet while the flood runs) on one server.
PhaseResults Alternate(int port) {
  Latencies alone, flood, warm;
  Measure(port, &warm);
  PhaseResults r;
  for (int round = 0; round < kRounds; ++round) {
    Measure(port, &alone);
    Flood f(port);
    Measure(port, &flood);
    r.ok += f.ok();
    r.refused += f.refused();
  }
  r.alone = Of(alone.fresh);
  r.flood = Of(flood.fresh);
  r.alone_cached = Of(alone.cached);
  r.flood_cached = Of(flood.cached);
  return r;
}

TEST_F(TenantFairnessTest, QuietTenantsP99TtftHoldsWhileAnotherFloods) {
  PhaseResults on, off;
  {
    auto srv = Start(true, "limits-on");
    on = Alternate(srv->port());
  }
  {
    auto srv = Start(false, "limits-off");
    off = Alternate(srv->port());
  }
  const int n = kRounds * kSamples;
  std::printf("quiet tenant TTFT (1-token completions, ms, %d samples per cell, %d alternating rounds) p50/p99:\n", n, kRounds);
  auto line = [](const char* what, const PhaseResults& r) {
    std::printf("  %s: fresh alone %.1f/%.1f, during flood %.1f/%.1f (p99 ratio %.2f); cached alone %.1f/%.1f, during flood %.1f/%.1f (p99 ratio %.2f); flood %lld ok, %lld refused\n",
                what, r.alone.p50, r.alone.p99, r.flood.p50, r.flood.p99, r.flood.p99 / r.alone.p99, r.alone_cached.p50,
                r.alone_cached.p99, r.flood_cached.p50, r.flood_cached.p99, r.flood_cached.p99 / r.alone_cached.p99,
                static_cast<long long>(r.ok), static_cast<long long>(r.refused));
  };
  line("limits on ", on);
  line("limits off", off);
  EXPECT_GT(on.refused, 0) << "the flooder was never capped";
  EXPECT_EQ(off.refused, 0);
  // The limits protect the quiet tenant: under the flood its p50 and p90 are lower with them.
  EXPECT_LT(on.flood.p50, off.flood.p50);
  EXPECT_LT(on.flood.p90, off.flood.p90);
  EXPECT_LT(on.flood_cached.p50, off.flood_cached.p50);
  EXPECT_LT(on.flood_cached.p90, off.flood_cached.p90);
  if (kRounds >= 16) {
    EXPECT_LE(on.flood.p99, 1.2 * on.alone.p99) << "the issue's bound, fresh requests";
  }
}

}  // namespace
}  // namespace tarmac::testing
