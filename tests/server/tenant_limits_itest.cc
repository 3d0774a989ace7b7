// Per-tenant limits in `tarmac serve` (the real binary, API keys for three tenants, limits from
// the config's tenants): a tenant at its concurrency limit gets 429 + Retry-After naming the
// limit while another tenant is served; a tenant in token debt gets 429 until the refill pays
// it back; a bad limit in the config fails the start naming the tenant.
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "server_test_util.h"

namespace tarmac::testing {
namespace {

using Json = nlohmann::json;

std::string Auth(const std::string& key) { return "Authorization: Bearer " + key + "\r\n"; }

std::string Body(int max_tokens) {
  return Json{{"model", "wp"}, {"prompt", "Prince Andrew looked at"}, {"max_tokens", max_tokens}, {"temperature", 0},
              {"ignore_eos", true}}
      .dump();
}

class TenantLimitsTest : public TempDirTest {
 protected:
  std::string Config(const std::string& tenants) {
    std::ofstream(Path("keys.txt")) << "flood-key-0001 flood\nquiet-key-0001 quiet\nmeter-key-0001 meter\n";
    std::ofstream(Path("tarmac.yaml")) << "models:\n  - {path: " << kWp11m << ", name: wp}\n"
                                       << "api_key_file: " << Path("keys.txt") << "\n"
                                       << "tenants:\n"
                                       << tenants;
    return Path("tarmac.yaml");
  }
};

// The server's admitted-requests gauge.
double Admitted(int port) {
  return MetricValue(Get(port, "/metrics", Auth("quiet-key-0001")).body, "tarmac:server_requests_admitted");
}

TEST_F(TenantLimitsTest, ConcurrencyLimitRefusesTheFlooderOnly) {
  ServerProcess srv({"--config", Config("  - {name: flood, max_concurrent: 2}\n  - {name: quiet}\n  - {name: meter}\n"),
                     "--no-warmup"},
                    Path("log.txt"), false);
  ASSERT_TRUE(srv.WaitReady()) << Slurp(Path("log.txt"));
  const int port = srv.port();
  // Two long requests hold the flooder's two slots.
  std::vector<std::future<HttpResponse>> longs;
  for (int i = 0; i < 2; ++i)
    longs.push_back(std::async(std::launch::async, [&] { return Post(port, "/v1/completions", Body(450), Auth("flood-key-0001")); }));
  for (int i = 0; i < 500 && Admitted(port) < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(Admitted(port), 2);
  int refused = 0;
  for (int i = 0; i < 5; ++i) {
    const HttpResponse r = Post(port, "/v1/completions", Body(4), Auth("flood-key-0001"));
    EXPECT_EQ(r.status, 429) << r.body;
    if (r.status != 429) continue;
    ++refused;
    EXPECT_EQ(r.Header("Retry-After"), "1");
    const Json e = Json::parse(r.body)["error"];
    EXPECT_EQ(e["code"], "tenant_concurrency_exceeded");
    EXPECT_EQ(e["type"], "rate_limit_error");
    const std::string msg = e["message"];
    EXPECT_NE(msg.find("tenant 'flood'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("max_concurrent 2"), std::string::npos) << msg;
  }
  EXPECT_EQ(refused, 5);
  // The quiet tenant is served meanwhile.
  const HttpResponse q = Post(port, "/v1/completions", Body(4), Auth("quiet-key-0001"));
  EXPECT_EQ(q.status, 200) << q.body;
  for (auto& f : longs) EXPECT_EQ(f.get().status, 200);
  // The slots came back.
  EXPECT_EQ(Post(port, "/v1/completions", Body(4), Auth("flood-key-0001")).status, 200);
  EXPECT_GE(MetricValue(Get(port, "/metrics", Auth("quiet-key-0001")).body, "tarmac:requests_rejected_total{reason=\"tenant_limited\"}"), 5);
}

TEST_F(TenantLimitsTest, TokenRateLimitRefusesWhileInDebt) {
  // 20 tokens/s, bucket 40: a request of ~6 prompt + 60 generated tokens leaves the tenant ~26 in debt.
  ServerProcess srv({"--config", Config("  - {name: flood}\n  - {name: quiet}\n  - {name: meter, tokens_per_s: 20, token_burst: 40}\n"),
                     "--no-warmup"},
                    Path("log.txt"), false);
  ASSERT_TRUE(srv.WaitReady()) << Slurp(Path("log.txt"));
  const int port = srv.port();
  ASSERT_EQ(Post(port, "/v1/completions", Body(60), Auth("meter-key-0001")).status, 200);
  const HttpResponse r = Post(port, "/v1/completions", Body(4), Auth("meter-key-0001"));
  ASSERT_EQ(r.status, 429) << r.body;
  const Json e = Json::parse(r.body)["error"];
  EXPECT_EQ(e["code"], "tenant_tokens_exceeded");
  const std::string msg = e["message"];
  EXPECT_NE(msg.find("tenant 'meter'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("20 prompt + generated tokens per second"), std::string::npos) << msg;
  const int retry = std::atoi(r.Header("Retry-After").c_str());
  EXPECT_GE(retry, 1);
  EXPECT_LE(retry, 4);
  EXPECT_EQ(Post(port, "/v1/completions", Body(4), Auth("quiet-key-0001")).status, 200);  // not its debt
  std::this_thread::sleep_for(std::chrono::seconds(retry) + std::chrono::milliseconds(100));
  EXPECT_EQ(Post(port, "/v1/completions", Body(4), Auth("meter-key-0001")).status, 200);
}

TEST_F(TenantLimitsTest, BadLimitFailsTheStartNamingTheTenant) {
  RunResult r = RunTarmac({"serve", "--config", Config("  - {name: flood, token_burst: 100}\n"), "--port", "0"}, dir_.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("token_burst needs tokens_per_s"), std::string::npos) << r.err;
  r = RunTarmac({"serve", "--config", Config("  - {name: flood, max_concurrent: -1}\n"), "--port", "0"}, dir_.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("tenants[0].max_concurrent"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tarmac::testing
