// One tenant floods, another sends a request now and then: with the flooder capped by its
// concurrency limit the quiet tenant's p99 time to first token stays within 20% of what it is
// alone (measured first, in the same test, on the same server); without limits (a second
// server) the same flood is measured too, for the record. TTFT here is the latency of a
// one-token completion (HTTP included). Slow (label): about a minute, timing on a shared
// machine. The figures go to stdout (bench/NOTES.md and the notes record them).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/test_util.h"
#include "server_test_util.h"

namespace tarmac::testing {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kSamples = 150;     // quiet requests per phase
constexpr int kFlooders = 12;     // flooding connections
constexpr int kFloodCap = 2;      // the flooder's max_concurrent with limits on

std::string Auth(const std::string& key) { return "Authorization: Bearer " + key + "\r\n"; }

std::string QuietBody() {
  return Json{{"model", "wp"}, {"prompt", "Prince Andrew looked at"}, {"max_tokens", 1}, {"temperature", 0}}.dump();
}

std::string FloodBody() {
  std::string prompt;
  for (int i = 0; i < 12; ++i) prompt += "Well, Prince, so Genoa and Lucca are now just family estates. ";
  return Json{{"model", "wp"}, {"prompt", prompt}, {"max_tokens", 48}, {"temperature", 0.8}, {"ignore_eos", true}}.dump();
}

struct Percentiles {
  double p50 = 0, p99 = 0;
};

Percentiles Measure(int port) {
  std::vector<double> ms;
  for (int i = 0; i < kSamples; ++i) {
    const auto t0 = Clock::now();
    const HttpResponse r = Post(port, "/v1/completions", QuietBody(), Auth("quiet-key-0001"));
    const double dt = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    EXPECT_EQ(r.status, 200) << r.body;
    ms.push_back(dt);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * static_cast<double>(ms.size())))]; };
  return {at(0.5), at(0.99)};
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
    std::this_thread::sleep_for(std::chrono::seconds(2));  // the flood is on
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

TEST_F(TenantFairnessTest, QuietTenantsP99TtftHoldsWhileAnotherFloods) {
  Percentiles alone_on, flood_on, alone_off, flood_off;
  int64_t on_ok = 0, on_refused = 0, off_ok = 0, off_refused = 0;
  {
    auto srv = Start(true, "limits-on");
    Measure(srv->port());  // warm
    alone_on = Measure(srv->port());
    {
      Flood f(srv->port());
      flood_on = Measure(srv->port());
      on_ok = f.ok();
      on_refused = f.refused();
    }
  }
  {
    auto srv = Start(false, "limits-off");
    Measure(srv->port());
    alone_off = Measure(srv->port());
    {
      Flood f(srv->port());
      flood_off = Measure(srv->port());
      off_ok = f.ok();
      off_refused = f.refused();
    }
  }
  std::printf("quiet tenant TTFT (1-token completion, ms, %d samples each) p50/p99:\n", kSamples);
  std::printf("  limits on  (flood max_concurrent %d): alone %.1f/%.1f, during flood %.1f/%.1f (p99 ratio %.2f); flood %lld ok, %lld refused\n",
              kFloodCap, alone_on.p50, alone_on.p99, flood_on.p50, flood_on.p99, flood_on.p99 / alone_on.p99,
              static_cast<long long>(on_ok), static_cast<long long>(on_refused));
  std::printf("  limits off: alone %.1f/%.1f, during flood %.1f/%.1f (p99 ratio %.2f); flood %lld ok, %lld refused\n",
              alone_off.p50, alone_off.p99, flood_off.p50, flood_off.p99, flood_off.p99 / alone_off.p99,
              static_cast<long long>(off_ok), static_cast<long long>(off_refused));
  EXPECT_GT(on_refused, 0) << "the flooder was never capped";
  EXPECT_EQ(off_refused, 0);
  EXPECT_LE(flood_on.p99, 1.2 * alone_on.p99) << "the quiet tenant's p99 TTFT rose more than 20% under the flood";
}

}  // namespace
}  // namespace tarmac::testing
