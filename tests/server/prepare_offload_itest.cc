// Issue 28 against the real `tarmac serve`: a request whose preparation is costly (a
// structured-output regex that takes seconds to compile) runs on the server's prepare workers,
// so /health and a small completion on other connections answer at once meanwhile; the costly
// request still gets its normal answer; a client that leaves while its request prepares does
// not hurt the server; and a flood of costly requests beyond --prepare-queue is refused (503)
// instead of queueing without limit.
//
// Timing is measured in the test: the bounds are relative to the compile time it measured, and
// an assertion is skipped (saying so) when the compile turned out too fast to tell.
#include <atomic>
#include <cstdio>
#include <fstream>
#include <future>

#include <nlohmann/json.hpp>

#include "server_test_util.h"

namespace tarmac::testing {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
const std::string kModel = "wp-11m-f16";

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A completion constrained by a regex of about `width` arbitrary characters then `tail`:
// costly to compile (every distinct tail is a new grammar: the cache never helps).
std::string CostlyBody(int width, const std::string& tail) {
  return Json{{"model", kModel},
              {"prompt", "Prince Andrew"},
              {"max_tokens", 4},
              {"temperature", 0},
              {"structured_outputs", {{"regex", ".{0," + std::to_string(width) + "}" + tail}}}}
      .dump();
}

std::string SmallBody() {
  return Json{{"model", kModel}, {"prompt", "Prince Andrew looked at"}, {"max_tokens", 2}, {"temperature", 0}}.dump();
}

// The costly request's own answer: generated (200) or refused by the grammar limits (400
// naming response_format), never a 5xx.
void ExpectNormalAnswer(const HttpResponse& r) {
  ASSERT_TRUE(r.status == 200 || r.status == 400) << r.status << " " << r.body;
  const Json j = Json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.body;
  if (r.status == 200) {
    EXPECT_EQ(j["choices"].size(), 1u) << r.body;
  } else {
    EXPECT_EQ(j["error"]["param"], "response_format") << r.body;
  }
}

class PrepareOffloadTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess({"--prepare-threads", "1", "--prepare-queue", "1"},
                                "/tmp/tarmac-prepare-itest-" + std::to_string(::getpid()) + ".log");
    ASSERT_TRUE(server_->WaitReady()) << "server did not become ready";
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static int port() { return server_->port(); }
  double Preparing() { return MetricValue(Get(port(), "/metrics").body, "tarmac:server_requests_preparing"); }
  // Waits until no request is preparing (the previous test's may still compile).
  void WaitIdle() {
    auto end = Clock::now() + std::chrono::seconds(120);
    while (Preparing() != 0 && Clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(Preparing(), 0) << "a request was still preparing after 120 s";
  }
  static ServerProcess* server_;
};
ServerProcess* PrepareOffloadTest::server_ = nullptr;

TEST_F(PrepareOffloadTest, HealthAndOtherRequestsAnswerWhileAGrammarCompiles) {
  WaitIdle();
  const auto t0 = Clock::now();
  auto costly = std::async(std::launch::async, [&] { return Post(port(), "/v1/completions", CostlyBody(10000, "x")); });
  // Wait until the server has it on a prepare worker.
  while (Preparing() < 1 && costly.wait_for(std::chrono::milliseconds(5)) != std::future_status::ready) {}
  double worst_health = 0, worst_small = 0;
  int polls = 0;
  while (costly.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
    auto t = Clock::now();
    HttpResponse h = Get(port(), "/health");
    EXPECT_EQ(h.status, 200) << h.body;
    worst_health = std::max(worst_health, Since(t));
    if (polls++ % 5 == 0) {
      t = Clock::now();
      HttpResponse s = Post(port(), "/v1/completions", SmallBody());
      EXPECT_EQ(s.status, 200) << s.body;
      worst_small = std::max(worst_small, Since(t));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const HttpResponse r = costly.get();
  const double compile_s = Since(t0);
  ExpectNormalAnswer(r);
  std::printf("costly request %.2f s; worst /health %.3f s, worst small completion %.3f s over %d polls\n", compile_s,
              worst_health, worst_small, polls);
  if (compile_s < 0.8) GTEST_SKIP() << "the costly grammar compiled in " << compile_s << " s: too fast to tell a stall";
  EXPECT_LT(worst_health, std::min(1.0, compile_s / 3)) << "/health stalled behind the compile";
  EXPECT_LT(worst_small, compile_s / 2) << "a small completion stalled behind the compile";
}

TEST_F(PrepareOffloadTest, ClientGoneWhilePreparingLeavesTheServerHealthy) {
  WaitIdle();
  const double gone_before = MetricValue(Get(port(), "/metrics").body, "tarmac:requests_rejected_total{reason=\"client_gone\"}");
  int fd = Connect(port());
  ASSERT_GE(fd, 0);
  const std::string body = CostlyBody(10000, "y");
  ASSERT_TRUE(SendAll(fd, Request("POST", "/v1/completions", body)));
  auto end = Clock::now() + std::chrono::seconds(30);
  while (Preparing() < 1 && Clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ::close(fd);  // while it compiles
  // The server notices at once, answers others meanwhile, and drops the job when it is done.
  EXPECT_EQ(Get(port(), "/health").status, 200);
  EXPECT_EQ(Post(port(), "/v1/completions", SmallBody()).status, 200);
  WaitIdle();
  EXPECT_TRUE(server_->Alive());
  const double gone_after = MetricValue(Get(port(), "/metrics").body, "tarmac:requests_rejected_total{reason=\"client_gone\"}");
  EXPECT_GE(gone_after, std::max(0.0, gone_before) + 1);
  EXPECT_EQ(Get(port(), "/health").status, 200);
  EXPECT_EQ(Post(port(), "/v1/completions", SmallBody()).status, 200);
}

TEST_F(PrepareOffloadTest, AFloodOfCostlyRequestsIsRefusedBeyondThePrepareQueue) {
  WaitIdle();
  // One prepare thread and one waiting place: with two costly requests held, a third is refused.
  auto first = std::async(std::launch::async, [&] { return Post(port(), "/v1/completions", CostlyBody(10000, "z")); });
  auto end = Clock::now() + std::chrono::seconds(30);
  while (Preparing() < 1 && Clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto second = std::async(std::launch::async, [&] { return Post(port(), "/v1/completions", CostlyBody(10000, "w")); });
  while (Preparing() < 2 && Clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const HttpResponse third = Post(port(), "/v1/completions", CostlyBody(10000, "v"));
  const bool held = first.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready;
  ExpectNormalAnswer(first.get());
  ExpectNormalAnswer(second.get());
  if (!held) GTEST_SKIP() << "the first costly request finished before the third came: nothing was saturated";
  EXPECT_EQ(third.status, 503) << third.body;
  EXPECT_NE(third.body.find("busy preparing"), std::string::npos) << third.body;
  EXPECT_EQ(third.Header("Retry-After"), "1");
  EXPECT_GE(MetricValue(Get(port(), "/metrics").body, "tarmac:requests_rejected_total{reason=\"prepare_busy\"}"), 1);
  EXPECT_EQ(Post(port(), "/v1/completions", SmallBody()).status, 200);
}

// --request-timeout counts from the request's arrival: time spent preparing (here a grammar
// compile longer than the timeout) is part of it, so the request is answered 408 once its
// preparation ends instead of being admitted with a fresh timeout.
TEST(PrepareTimeoutTest, PreparationCountsAgainstTheRequestTimeout) {
  ServerProcess srv({"--prepare-threads", "1", "--request-timeout", "0.3"},
                    "/tmp/tarmac-prepare-timeout-itest-" + std::to_string(::getpid()) + ".log");
  ASSERT_TRUE(srv.WaitReady());
  const auto t0 = Clock::now();
  const HttpResponse r = Post(srv.port(), "/v1/completions", CostlyBody(10000, "t"));
  const double took = Since(t0);
  if (took < 0.6) GTEST_SKIP() << "the compile took " << took << " s: too fast to tell preparation from the run";
  if (r.status == 400) GTEST_SKIP() << "the grammar limits refused the regex: " << r.body;
  EXPECT_EQ(r.status, 408) << r.body;
  EXPECT_NE(r.body.find("--request-timeout"), std::string::npos) << r.body;
  EXPECT_GE(MetricValue(Get(srv.port(), "/metrics").body, "tarmac:requests_rejected_total{reason=\"timeout\"}"), 1);
  // Nothing was admitted for it; a cheap request on the same server is served (or, on a
  // machine too loaded to answer it within the 0.3 s timeout, times out on its own clock).
  const auto t1 = Clock::now();
  const HttpResponse small = Post(srv.port(), "/v1/completions", SmallBody());
  if (small.status == 408) {
    EXPECT_GE(Since(t1), 0.3) << small.body;
  } else {
    EXPECT_EQ(small.status, 200) << small.body;
  }
  EXPECT_EQ(MetricValue(Get(srv.port(), "/metrics").body, "tarmac:num_requests_running"), 0);
}

// With API keys, one tenant's costly requests cannot take the whole prepare capacity (threads
// + queue): here 1 + 1, so a tenant may hold 1 and another tenant's costly request still finds
// the queue's place (without the share, tenant a's second request takes it and b is refused).
TEST(PrepareShareTest, ATenantCannotFillThePrepareQueue) {
  const std::string keys = "/tmp/tarmac-prepare-share-keys-" + std::to_string(::getpid()) + ".txt";
  { std::ofstream(keys) << "key-aaaa-0001 a\nkey-bbbb-0001 b\n"; }
  ServerProcess srv({"--prepare-threads", "1", "--prepare-queue", "1", "--api-key-file", keys},
                    "/tmp/tarmac-prepare-share-itest-" + std::to_string(::getpid()) + ".log");
  ASSERT_TRUE(srv.WaitReady());
  const std::string a = "Authorization: Bearer key-aaaa-0001\r\n", b = "Authorization: Bearer key-bbbb-0001\r\n";
  auto preparing = [&] { return MetricValue(Get(srv.port(), "/metrics", a).body, "tarmac:server_requests_preparing"); };
  auto first = std::async(std::launch::async, [&] { return Post(srv.port(), "/v1/completions", CostlyBody(10000, "p"), a); });
  const auto end = Clock::now() + std::chrono::seconds(30);
  while (preparing() < 1 && Clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto second = std::async(std::launch::async, [&] { return Post(srv.port(), "/v1/completions", CostlyBody(10000, "q"), a); });
  // Refused at once (the share), or queued behind the first (no share): either way it settles.
  while (preparing() < 2 && second.wait_for(std::chrono::milliseconds(5)) != std::future_status::ready && Clock::now() < end) {
  }
  const bool held = first.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready;
  const HttpResponse b_answer = Post(srv.port(), "/v1/completions", CostlyBody(10000, "r"), b);
  ExpectNormalAnswer(first.get());
  const HttpResponse a_second = second.get();
  std::remove(keys.c_str());
  if (!held) GTEST_SKIP() << "tenant a's first costly request finished before tenant b's came: nothing was held";
  EXPECT_EQ(a_second.status, 503) << a_second.body;
  EXPECT_NE(a_second.body.find("tenant 'a' has 1 requests preparing"), std::string::npos) << a_second.body;
  ExpectNormalAnswer(b_answer);
}

}  // namespace
}  // namespace tarmac::testing
