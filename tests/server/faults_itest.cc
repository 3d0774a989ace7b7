// Crash-safety of `tarmac serve` (the real binary on a loopback port, --debug-fault-injection):
// a fault injected into one request's processing (its prompt's encoding on the I/O thread,
// detokenizing, its forward pass, allocating its KV, a failed check while sampling) answers that
// request 500 with the OpenAI error body and an x-request-id (named in the message and in the
// log) while a request running beside it completes unchanged and the server stays ready
// (--check-integrity aborts the process should any step leave the KV books wrong). An engine
// whose step loop dies marks its model unhealthy: /ready turns 503, the request running on it
// ends with an error instead of hanging, and its route falls back to the baseline. The fault
// header is refused without the flag, and the flag without its environment variable.
#include <gtest/gtest.h>

#include <cstdlib>
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
constexpr const char* kEnv = "TARMAC_ALLOW_DEBUG_FAULT_INJECTION";

std::string Body(const std::string& model, int max_tokens, bool stream = false) {
  return Json{{"model", model},         {"prompt", "Prince Andrew looked at"}, {"max_tokens", max_tokens},
              {"temperature", 0},       {"ignore_eos", true},                  {"stream", stream}}
      .dump();
}

HttpResponse Faulty(int port, const std::string& model, const std::string& fault, const std::string& id, bool stream = false) {
  return Post(port, "/v1/completions", Body(model, 8, stream), "x-tarmac-debug-fault: " + fault + "\r\nx-request-id: " + id + "\r\n");
}

class FaultsServerTest : public TempDirTest {
 protected:
  std::unique_ptr<ServerProcess> Start(std::vector<std::string> args, bool default_model = true) {
    ::setenv(kEnv, "1", 1);
    auto s = std::make_unique<ServerProcess>(args, Path("log.txt"), default_model);
    EXPECT_TRUE(s->WaitReady()) << Slurp(Path("log.txt"));
    return s;
  }
};

TEST_F(FaultsServerTest, EachFaultFailsOnlyItsRequest) {
  auto srv = Start({"--no-warmup", "--debug-fault-injection", "--check-integrity"});
  const int port = srv->port();
  const HttpResponse ref = Post(port, "/v1/completions", Body("wp-11m-f16", 48));
  ASSERT_EQ(ref.status, 200) << ref.body;
  const std::string ref_text = Json::parse(ref.body)["choices"][0]["text"];
  EXPECT_FALSE(ref.Header("x-request-id").empty());  // every response has one
  const std::map<std::string, std::string> says = {{"tokenize", "injected fault 'tokenize'"},
                                                   {"detokenize", "injected fault 'detokenize'"},
                                                   {"kernel", "the forward pass failed: injected fault 'kernel'"},
                                                   {"kv_alloc", "out of memory allocating its KV blocks"},
                                                   {"check", "check failed: "}};
  for (const auto& [fault, what] : says) {
    SCOPED_TRACE(fault);
    // A healthy request beside the faulty one: running when the fault hits.
    auto healthy = std::async(std::launch::async, [&] { return Post(port, "/v1/completions", Body("wp-11m-f16", 48)); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const std::string id = "test-" + fault;
    const HttpResponse bad = Faulty(port, "wp-11m-f16", fault, id);
    EXPECT_EQ(bad.status, 500) << bad.body;
    EXPECT_EQ(bad.Header("x-request-id"), id);
    const Json err = Json::parse(bad.body, nullptr, false);
    ASSERT_TRUE(err.contains("error")) << bad.body;
    EXPECT_EQ(err["error"]["type"], "server_error");
    const std::string msg = err["error"]["message"];
    EXPECT_NE(msg.find("(request id " + id + ")"), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
    const HttpResponse ok = healthy.get();
    EXPECT_EQ(ok.status, 200) << ok.body;
    if (ok.status == 200) {
      EXPECT_EQ(Json::parse(ok.body)["choices"][0]["text"], ref_text);
    }
    EXPECT_NE(Slurp(Path("log.txt")).find("request " + id), std::string::npos) << "the failure is logged with its id";
  }
  // Streamed: the headers went out, so the error arrives as the stream's error event.
  const HttpResponse streamed = Faulty(port, "wp-11m-f16", "detokenize", "test-stream", /*stream=*/true);
  EXPECT_EQ(streamed.status, 200);
  EXPECT_EQ(streamed.Header("x-request-id"), "test-stream");
  EXPECT_NE(streamed.body.find("\"server_error\""), std::string::npos) << streamed.body;
  EXPECT_NE(streamed.body.find("[DONE]"), std::string::npos) << streamed.body;
  // Still ready, still serving, still the same answers.
  EXPECT_EQ(Get(port, "/ready").status, 200);
  const HttpResponse after = Post(port, "/v1/completions", Body("wp-11m-f16", 48));
  ASSERT_EQ(after.status, 200);
  EXPECT_EQ(Json::parse(after.body)["choices"][0]["text"], ref_text);
  EXPECT_TRUE(srv->Alive());
}

TEST_F(FaultsServerTest, EngineDeathMarksTheModelUnhealthyAndTheRouteFallsBack) {
  const std::string config = Path("tarmac.yaml");
  std::ofstream(config) << "models:\n"
                        << "  - {path: " << kWp1mPath << ", name: small}\n"
                        << "  - {path: " << kWp11m << ", name: large}\n"
                        << "routes:\n  - {name: auto, baseline: large, policy: small}\n";
  auto srv = Start({"--config", config, "--no-warmup", "--debug-fault-injection"}, /*default_model=*/false);
  const int port = srv->port();
  ASSERT_EQ(Get(port, "/ready").status, 200);
  // A long streamed request decoding on small when its engine dies.
  auto victim = std::async(std::launch::async, [&] { return Post(port, "/v1/completions", Body("small", 500, true)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const HttpResponse fatal = Faulty(port, "small", "engine", "test-engine");
  EXPECT_EQ(fatal.status, 500) << fatal.body;
  EXPECT_EQ(fatal.Header("x-request-id"), "test-engine");
  ASSERT_EQ(victim.wait_for(std::chrono::seconds(30)), std::future_status::ready) << "a waiting client hung";
  const HttpResponse v = victim.get();
  EXPECT_NE(v.body.find("the engine failed"), std::string::npos) << v.body.substr(v.body.size() > 2000 ? v.body.size() - 2000 : 0);
  // Not ready; the model says why; the route answers from its baseline; the other model serves.
  const HttpResponse ready = Get(port, "/ready");
  EXPECT_EQ(ready.status, 503);
  EXPECT_NE(ready.body.find("small"), std::string::npos) << ready.body;
  const HttpResponse direct = Post(port, "/v1/completions", Body("small", 8));
  EXPECT_EQ(direct.status, 503) << direct.body;
  EXPECT_NE(direct.body.find("unhealthy"), std::string::npos) << direct.body;
  const HttpResponse routed = Post(port, "/v1/completions", Body("auto", 8));
  EXPECT_EQ(routed.status, 200) << routed.body;
  EXPECT_NE(routed.Header("x-tarmac-route").find("large"), std::string::npos) << routed.headers;
  EXPECT_EQ(Post(port, "/v1/completions", Body("large", 8)).status, 200);
  EXPECT_TRUE(srv->Alive());
  EXPECT_NE(Slurp(Path("log.txt")).find("the model is unhealthy"), std::string::npos);
}

TEST_F(FaultsServerTest, TheHeaderIsRefusedWithoutTheFlag) {
  auto srv = Start({"--no-warmup"});
  const HttpResponse r = Faulty(srv->port(), "wp-11m-f16", "kernel", "test-off");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("--debug-fault-injection"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("x-tarmac-debug-fault"), std::string::npos) << r.body;
  // An unknown fault with the flag: 400 naming the known ones (other server below).
}

TEST_F(FaultsServerTest, UnknownFaultIsABadRequest) {
  auto srv = Start({"--no-warmup", "--debug-fault-injection"});
  const HttpResponse r = Faulty(srv->port(), "wp-11m-f16", "segfault", "test-unknown");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("kv_alloc"), std::string::npos) << r.body;
}

TEST_F(FaultsServerTest, TheFlagIsRefusedWithoutItsEnvironmentVariable) {
  ::unsetenv(kEnv);
  RunResult r = RunTarmac({"serve", "-m", kWp11m, "--port", "0", "--debug-fault-injection"}, dir_.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(kEnv), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tarmac::testing
