// GenerationFlow without sockets or timers: real engines (wp-1m as "small", wp-11m as "big") in a
// real pool, a fake ResponseSink that records what it got, and fake services whose executor runs
// off-I/O-thread work inline and whose clock and timers the test moves. A cache hit skips
// admission; a refused admission falls back to the route's baseline, and with none left answers
// 503 naming the models; time spent preparing answers 408; a client gone while queued gives its
// slot back; a cascade's held-back tokens reach the sink only after its decision; a routed,
// cached request is encoded once per model.
#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <mutex>

#include "base/thread_role.h"
#include "common/test_util.h"
#include "engine/engine_test_util.h"
#include "router/policy.h"
#include "server/flow_registry.h"
#include "server/generation_flow.h"

namespace tarmac::server {
namespace {

struct FakeSink final : ResponseSink {
  std::optional<ResponseHead> stream_head;  // StartStream's
  std::string streamed;                     // every Chunk
  std::optional<std::string> body;          // Respond's
  std::optional<ResponseHead> head;
  std::optional<ApiError> error;            // Fail's
  std::optional<int> dropped;               // Drop's status
  int end_status = 0;
  int watches = 0;
  bool ended = false;

  void StartStream(const ResponseHead& h) override { stream_head = h; }
  void Chunk(const std::string& data) override { streamed += data; }
  void EndStream(const std::string& tail, int status) override {
    streamed += tail;
    end_status = status;
    ended = true;
  }
  void Respond(const std::string& b, const ResponseHead& h) override {
    body = b;
    head = h;
    ended = true;
  }
  void Fail(const ApiError& e) override {
    error = e;
    ended = true;
  }
  void Drop(int status) override {
    dropped = status;
    ended = true;
  }
  void WatchClient() override { ++watches; }
};

std::unique_ptr<router::PoolModel> Make(const std::string& name, const std::string& path,
                                        std::shared_ptr<metrics::Registry> reg) {
  testing::LoadedModel& m = testing::CachedModel(path);
  engine::EngineConfig cfg;
  cfg.kv.blocks = 128;
  cfg.warmup = false;
  cfg.metrics = std::move(reg);
  return std::move(router::PoolModel::Create(name, m.model.get(), m.tok.get(), cfg).value());
}

ServerConfig Config() {
  ServerConfig c;
  c.metrics = std::make_shared<metrics::Registry>();
  return c;
}

class FakeServices final : public FlowServices {
 public:
  explicit FakeServices(ServerConfig c = Config())
      : config_(std::move(c)), pool_({256, 1024, 1 << 22}, config_.metrics), limiter_(0, 1),
        tenant_limiter_(config_.tenant_limit, config_.tenant_limits), metrics_(config_.metrics),
        caches_(cache::CacheService::Create(config_.cache, config_.metrics).value()),
        flows_(&pool_.admission(), &tenant_limiter_, [this](std::function<void()> fn) { Post(std::move(fn)); }) {
    pool_.Add(Make("small", testing::kWp1m, config_.metrics));
    pool_.Add(Make("big", testing::kWp11m, config_.metrics));
  }
  ~FakeServices() override { pool_.Shutdown(); }

  void SetRoutes(router::RouterConfig rc) {
    router_ = std::make_unique<router::Router>(std::move(rc), &pool_, config_.metrics);
    ASSERT_TRUE(router_->Validate().ok());
  }

  const ServerConfig& config() const override { return config_; }
  ServerConfig& mutable_config() { return config_; }
  router::ModelPool& pool() override { return pool_; }
  router::Router* router() override { return router_.get(); }
  const std::shared_ptr<cache::CacheService>& caches() override { return caches_; }
  RateLimiter& limiter() override { return limiter_; }
  TenantLimiter& tenant_limiter() override { return tenant_limiter_; }
  ServerMetrics& metrics() override { return metrics_; }

  double Now() const override { return now_; }
  // Inline: the work runs now (before it, `before_work` may move the clock), its continuation
  // is posted to the I/O queue.
  std::optional<ApiError> OffIoThread(const std::string& tenant, std::function<Continuation()> work) override {
    (void)tenant;
    ++off_io_works;
    if (before_work) before_work();
    Post(work());
    return std::nullopt;
  }
  void Post(std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(fn));
    cv_.notify_one();
  }
  std::function<void()> ArmTimer(double at_s, std::function<void()> fire) override {
    auto cancelled = std::make_shared<bool>(false);
    timers_.push_back({at_s, std::move(fire), cancelled});
    return [cancelled] { *cancelled = true; };
  }
  int64_t NextGenerationId() override { return flows_.NextId(); }
  void Track(int64_t id, std::shared_ptr<GenerationFlow> flow) override { flows_.Track(id, std::move(flow)); }
  void Release(int64_t id, bool was_running, int64_t generated) override { flows_.Release(id, was_running, generated, now_); }
  void Transfer(int64_t id, const std::string& model) override { flows_.Transfer(id, model); }

  // Runs the I/O queue (engine wake-ups arrive from the engines' threads) until `done`.
  template <typename Pred>
  void RunUntil(Pred done) {
    while (!done()) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ASSERT_TRUE(cv_.wait_for(lock, std::chrono::seconds(60), [&] { return !queue_.empty(); }))
            << "nothing more happened";
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }

  // Starts a flow for `body` into a new sink.
  std::pair<std::shared_ptr<GenerationFlow>, std::shared_ptr<FakeSink>> Start(const std::string& body,
                                                                                ApiKind kind = ApiKind::kCompletion) {
    auto sink = std::make_shared<FakeSink>();
    auto flow = std::make_shared<GenerationFlow>(this, sink);
    FlowInput in;
    in.kind = kind;
    in.body = body;
    in.arrived_s = now_;
    flow->Start(std::move(in));
    return {flow, sink};
  }
  // Start, then run until the sink got its end.
  std::shared_ptr<FakeSink> Answer(const std::string& body) {
    auto [flow, sink] = Start(body);
    RunUntil([&] { return sink->ended; });
    return sink;
  }

  double now_ = 1000;
  std::function<void()> before_work;
  int off_io_works = 0;

 private:
  struct Timer {
    double at;
    std::function<void()> fire;
    std::shared_ptr<bool> cancelled;
  };
  ServerConfig config_;
  router::ModelPool pool_;
  std::unique_ptr<router::Router> router_;
  RateLimiter limiter_;
  TenantLimiter tenant_limiter_;
  ServerMetrics metrics_;
  std::shared_ptr<cache::CacheService> caches_;
  FlowRegistry flows_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<Timer> timers_;
};

// big: a body over the cheap size (JSON whitespace), so that its preparation goes through the
// executor instead of running inline.
std::string Completion(const std::string& model, int max_tokens, const std::string& extra = "", bool big = false) {
  return "{\"model\":\"" + model + "\",\"prompt\":\"Prince Andrew\",\"max_tokens\":" + std::to_string(max_tokens) +
         ",\"temperature\":0,\"ignore_eos\":true" + extra + std::string(big ? 20 << 10 : 0, ' ') + "}";
}

router::RouterConfig Route(const std::string& name, std::unique_ptr<router::Policy> policy, const std::string& baseline) {
  router::RouterConfig rc;
  router::RouteConfig r;
  r.name = name;
  r.policy = std::move(policy);
  r.baseline = baseline;
  rc.routes.push_back(std::move(r));
  return rc;
}

TEST(GenerationFlow, AnswersAPlainRequest) {
  FakeServices s;
  auto sink = s.Answer(Completion("small", 4));
  ASSERT_TRUE(sink->body.has_value()) << (sink->error ? sink->error->message : "");
  EXPECT_NE(sink->body->find("\"model\":\"small\""), std::string::npos);
  EXPECT_EQ(sink->head->cache_status, "");
  EXPECT_EQ(s.pool().admission().running(), 0);
}

TEST(GenerationFlow, ACacheHitSkipsAdmission) {
  FakeServices s;
  const std::string body = Completion("small", 4, ",\"cache\":true");
  auto first = s.Answer(body);
  ASSERT_TRUE(first->body.has_value()) << (first->error ? first->error->message : "");
  EXPECT_EQ(first->head->cache_status, "miss");
  // No slot is left on the model: a miss is refused, the stored answer is not.
  s.pool().admission().SetModelLimits("small", {0, 0, 0});
  auto refused = s.Answer(Completion("small", 5, ",\"cache\":true"));
  ASSERT_TRUE(refused->error.has_value());
  EXPECT_EQ(refused->error->status, 429);
  auto hit = s.Answer(body);
  ASSERT_TRUE(hit->body.has_value()) << (hit->error ? hit->error->message : "");
  EXPECT_EQ(hit->head->cache_status, "hit");
  EXPECT_EQ(nlohmann::json::parse(*hit->body)["choices"], nlohmann::json::parse(*first->body)["choices"]);
}

TEST(GenerationFlow, RefusedAdmissionFallsBackToTheBaseline) {
  FakeServices s;
  s.SetRoutes(Route("r", std::make_unique<router::ModelPolicy>("big"), "small"));
  s.pool().admission().SetModelLimits("big", {0, 0, 0});
  auto sink = s.Answer(Completion("r", 4, "", /*big=*/true));
  ASSERT_TRUE(sink->body.has_value()) << (sink->error ? sink->error->message : "");
  ASSERT_TRUE(sink->head->route.has_value());
  EXPECT_EQ(sink->head->route->model, "small");
  EXPECT_TRUE(sink->head->route->fallback);
  EXPECT_NE(sink->body->find("\"model\":\"small\""), std::string::npos);
}

TEST(GenerationFlow, NoModelLeftAnswers503NamingThem) {
  FakeServices s;
  s.SetRoutes(Route("r", std::make_unique<router::ModelPolicy>("big"), "small"));
  s.pool().admission().SetModelLimits("big", {0, 0, 0});
  s.pool().admission().SetModelLimits("small", {0, 0, 0});
  auto sink = s.Answer(Completion("r", 4));
  ASSERT_TRUE(sink->error.has_value());
  EXPECT_EQ(sink->error->status, 503);
  EXPECT_NE(sink->error->message.find("big"), std::string::npos) << sink->error->message;
  EXPECT_NE(sink->error->message.find("small"), std::string::npos) << sink->error->message;
}

TEST(GenerationFlow, TimeSpentPreparingAnswers408) {
  ServerConfig c = Config();
  c.request_timeout_s = 5;
  FakeServices s(std::move(c));
  s.before_work = [&s] { s.now_ += 10; };  // the prepare queue took 10 s
  auto sink = s.Answer(Completion("small", 4, "", /*big=*/true));
  EXPECT_GE(s.off_io_works, 1);
  ASSERT_TRUE(sink->error.has_value());
  EXPECT_EQ(sink->error->status, 408);
  EXPECT_EQ(s.pool().admission().running(), 0);
  EXPECT_EQ(s.pool().admission().queued(), 0);
}

TEST(GenerationFlow, AClientGoneWhileQueuedGivesItsSlotBack) {
  FakeServices s;
  s.pool().admission().SetModelLimits("small", {1, 8, 1 << 20});
  auto [running, running_sink] = s.Start(Completion("small", 200));
  s.RunUntil([&] { return running->state() == FlowState::kRunning; });
  auto [queued, queued_sink] = s.Start(Completion("small", 4));
  s.RunUntil([&] { return queued->state() == FlowState::kQueued; });
  EXPECT_EQ(s.pool().admission().queued(), 1);
  EXPECT_GE(queued_sink->watches, 1);
  queued->ClientGone();
  EXPECT_TRUE(queued->ended());
  EXPECT_EQ(queued_sink->dropped, std::optional<int>(0));
  EXPECT_EQ(s.pool().admission().queued(), 0);
  s.RunUntil([&] { return running_sink->ended; });
  EXPECT_TRUE(running_sink->body.has_value());
  EXPECT_EQ(s.pool().admission().running(), 0);
  EXPECT_FALSE(queued_sink->body.has_value());
}

TEST(GenerationFlow, ACascadesHeldBackTokensWaitForItsDecision) {
  FakeServices s;
  router::CascadeParams p;
  p.small = "small";
  p.large = "big";
  p.k = 6;
  p.min_mean_logprob = 1.0;  // above any mean logprob: always escalates
  s.SetRoutes(Route("c", std::make_unique<router::CascadePolicy>(p), "big"));
  auto [flow, sink] = s.Start(Completion("c", 12, ",\"stream\":true"));
  s.RunUntil([&] { return sink->ended; });
  ASSERT_TRUE(sink->stream_head.has_value()) << (sink->error ? sink->error->message : "");
  // The head went out once the decision was made: it already names the large model.
  ASSERT_TRUE(sink->stream_head->route.has_value());
  EXPECT_TRUE(sink->stream_head->route->escalated);
  EXPECT_EQ(sink->stream_head->route->model, "big");
  EXPECT_EQ(sink->streamed.find("\"model\":\"small\""), std::string::npos);
  EXPECT_NE(sink->streamed.find("\"model\":\"big\""), std::string::npos);
  EXPECT_EQ(sink->end_status, 200);
}

TEST(GenerationFlow, ARoutedCachedRequestIsEncodedOncePerModel) {
  FakeServices s;
  s.SetRoutes(Route("r", std::make_unique<router::ModelPolicy>("big"), "small"));
  const tok::Tokenizer& small = *s.pool().Find("small")->tokenizer;
  const tok::Tokenizer& big = *s.pool().Find("big")->tokenizer;
  const int64_t small0 = small.encode_calls(), big0 = big.encode_calls();
  auto sink = s.Answer(Completion("r", 4, ",\"cache\":true", /*big=*/true));
  ASSERT_TRUE(sink->body.has_value()) << (sink->error ? sink->error->message : "");
  EXPECT_GE(s.off_io_works, 1);
  EXPECT_EQ(sink->head->cache_status, "miss");
  EXPECT_EQ(small.encode_calls() - small0, 1);  // the key and the route's probe: the baseline's
  EXPECT_EQ(big.encode_calls() - big0, 1);      // the chosen model's
}

}  // namespace
}  // namespace tarmac::server
