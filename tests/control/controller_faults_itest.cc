// Fault injection against the real `tarmac serve` on a loopback port, each scenario with the
// degradation controller on and off:
//   - a flood of temperature-1.5 requests (low draft acceptance) beside greedy Q&A, speculation
//     on (n-gram drafts, a fixed k): the controller switches drafts off for the creative
//     bucket and leaves the Q&A bucket's alone;
//   - the same flood with a draft model proposing a long fixed k: the drafts lengthen every
//     shared step, the Q&A tier's p99 TPOT rises over its target, the controller caps the
//     creative drafts (and more, as the TPOT cause rises); the Q&A p99 over the control window
//     is printed before the first action and at the end of the load;
//   - a busy thread stealing one of the two cores under a flood of long lowest-tier prompts:
//     the controller sheds the lowest tier (429 + Retry-After), never the top one;
//   - KV squeezed to a few requests' worth: the controller holds back the lowest priority.
// Every run asserts the invariants: no 5xx, every top-tier request completes. With the
// controller on it asserts what the controller did (its actions and knobs in /v1/slo); off,
// that nothing did. Latency figures are printed ("[fault] ...") for the record, not asserted:
// they depend on the machine and on what else runs. bench/controller_bench.sh runs these
// scenarios longer (TARMAC_FAULT_SECONDS) and summarizes the figures.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/server_test_util.h"

namespace tarmac::testing {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
const std::string kModel = "wp-11m-f16";

// Seconds of load per run: `fallback` here, TARMAC_FAULT_SECONDS in the benchmark.
double LoadSeconds(double fallback) {
  const char* e = std::getenv("TARMAC_FAULT_SECONDS");
  return e != nullptr && std::atof(e) > 0 ? std::atof(e) : fallback;
}

// The controller flags every "on" run shares: fast ticks, a short window, few samples.
std::vector<std::string> ControllerOn() {
  return {"--controller", "on", "--controller-interval", "0.25", "--controller-window", "4",
          "--controller-min-samples", "5"};
}

struct Outcome {
  int status = 0;
  bool retry_after = false;  // a Retry-After header came with it
  double seconds = 0;
};

// When the load ends: a base duration, extended while a controller-on run waits for what it
// checks (RunUntil) on a slow or busy machine. Thread-safe.
class Deadline {
 public:
  explicit Deadline(double seconds) : start_(Clock::now()) { Set(seconds); }
  void Set(double seconds_from_start) {
    until_ms_.store(static_cast<int64_t>(seconds_from_start * 1000));
  }
  double Elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  double Seconds() const { return until_ms_.load() / 1000.0; }
  bool Passed() const { return Elapsed() >= Seconds(); }

 private:
  const Clock::time_point start_;
  std::atomic<int64_t> until_ms_{0};
};

// Calls `seen` every 200 ms until the deadline passes. The first time it holds, the load goes
// on for at least `after_s` more (the measures' effect); while it has not, the deadline moves
// out, up to `max_s` in all. Returns whether it was seen.
bool RunUntil(Deadline& d, const std::function<bool()>& seen, double after_s = 4, double max_s = 45) {
  bool was = false;
  while (!d.Passed()) {
    if (seen() && !was) {
      was = true;
      d.Set(std::max(d.Seconds(), d.Elapsed() + after_s));
    }
    if (!was && d.Seconds() - d.Elapsed() < 1 && d.Seconds() < max_s) d.Set(std::min(max_s, d.Seconds() + 1));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return was;
}

// Closed-loop clients, each posting bodies until the deadline (and finishing what is in
// flight). A 429 is retried after its Retry-After, as a well-behaved client does.
class Load {
 public:
  Load(int port, int clients, std::function<Json(int)> body, const Deadline& d) {
    for (int c = 0; c < clients; ++c) {
      threads_.emplace_back([this, port, body, &d, c] {
        for (int i = c; !d.Passed(); i += 1000) {
          const auto t0 = Clock::now();
          HttpResponse r = Post(port, "/v1/completions", body(i).dump());
          Outcome o{r.status, !r.Header("Retry-After").empty(),
                    std::chrono::duration<double>(Clock::now() - t0).count()};
          {
            std::lock_guard<std::mutex> lock(mu_);
            out_.push_back(o);
          }
          if (r.status == 429) {
            const std::string ra = r.Header("Retry-After");
            std::this_thread::sleep_for(std::chrono::seconds(ra.empty() ? 1 : std::stoi(ra)));
          }
        }
      });
    }
  }
  std::vector<Outcome> Join() {
    for (auto& t : threads_) t.join();
    threads_.clear();
    return out_;
  }
  ~Load() { Join(); }

 private:
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::vector<Outcome> out_;
};

int Count(const std::vector<Outcome>& v, const std::function<bool(const Outcome&)>& f) {
  int n = 0;
  for (const Outcome& o : v) n += f(o);
  return n;
}

Json Slo(int port) {
  HttpResponse r = Get(port, "/v1/slo");
  EXPECT_EQ(r.status, 200) << r.body;
  Json j = Json::parse(r.body, nullptr, false);
  EXPECT_FALSE(j.is_discarded());
  return j;
}

const Json& Model(const Json& slo) { return slo["models"][0]; }

// A bucket of the report whose labels match every given (label, value).
const Json* Bucket(const Json& slo, const std::map<std::string, std::string>& labels) {
  for (const Json& b : Model(slo)["buckets"]) {
    bool all = true;
    for (const auto& [k, v] : labels) all = all && b["labels"][k] == v;
    if (all) return &b;
  }
  return nullptr;
}

int64_t ActionCount(const Json& slo, const std::string& action, const std::string& reason = "") {
  const Json& c = Model(slo)["controller"];
  if (!c.is_object()) return 0;
  int64_t n = 0;
  for (const Json& a : c["actions_total"])
    if (a["action"] == action && (reason.empty() || a["reason"] == reason)) n += a["count"].get<int64_t>();
  return n;
}

double Num(const Json& j) { return j.is_number() ? j.get<double>() : -1; }

void CheckInvariants(const std::vector<Outcome>& top, const std::vector<Outcome>& rest, const char* what) {
  EXPECT_GT(top.size(), 0u) << what;
  EXPECT_EQ(Count(top, [](const Outcome& o) { return o.status == 200; }), static_cast<int>(top.size()))
      << what << ": every top-tier request completes";
  EXPECT_EQ(Count(top, [](const Outcome& o) { return o.status >= 500 || o.status == 0; }), 0) << what;
  EXPECT_EQ(Count(rest, [](const Outcome& o) { return o.status >= 500 || o.status == 0; }), 0) << what << ": no 5xx";
  EXPECT_EQ(Count(rest, [](const Outcome& o) { return o.status != 200 && o.status != 429; }), 0) << what;
  EXPECT_EQ(Count(rest, [](const Outcome& o) { return o.status == 429 && !o.retry_after; }), 0)
      << what << ": a 429 carries Retry-After";
}

class ControllerFaultsTest : public TempDirTest {
 public:
  // Prompts whose greedy continuation the model copies from the prompt (the passage P, its own
  // continuation C, P again: n-gram drafts are accepted; bench offline's quote workload).
  std::vector<std::string> QuotePrompts(int port, int n) {
    const char* seeds[] = {"Prince Andrew looked at Pierre and", "Natasha ran into the drawing room",
                           "The old count said to his wife", "Napoleon rode along the line of"};
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) {
      const std::string p = std::string(seeds[i % 4]) + Greedy(port, seeds[i % 4], 40);
      out.push_back(p + Greedy(port, p, 48) + "\n\n" + p);
    }
    return out;
  }
  std::string Greedy(int port, const std::string& prompt, int n) {
    HttpResponse r = Post(port, "/v1/completions",
                          Json{{"model", kModel}, {"prompt", prompt}, {"max_tokens", n}, {"temperature", 0},
                               {"ignore_eos", true}, {"sla", "setup"}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return Json::parse(r.body)["choices"][0]["text"].get<std::string>();
  }
};

// The floods' request bodies: Q&A greedy over the prompts (premium), creative at temperature
// 1.5 over the same prompts (standard). `prompts` must outlive the function.
std::function<Json(int)> FloodBody(const std::vector<std::string>& prompts, bool creative) {
  return [&prompts, creative](int i) {
    return Json{{"model", kModel}, {"prompt", prompts[i % prompts.size()]}, {"max_tokens", creative ? 64 : 40},
                {"temperature", creative ? 1.5 : 0.0}, {"seed", i}, {"ignore_eos", true},
                {"task", creative ? "creative" : "qa"}, {"sla", creative ? "standard" : "premium"}};
  };
}

// --- 1. low-acceptance flood beside greedy Q&A, speculation on --------------------------

struct RunResult2 {
  std::vector<Outcome> top, rest;
  Json slo;
};

// Q&A: greedy, answers found in the prompt (high n-gram acceptance), the top tier. Creative:
// temperature 1.5 over the same prompts (drafts mostly rejected), the lowest tier, 3x the
// clients. Targets loose enough that only the acceptance guard acts.
RunResult2 SpecFlood(ControllerFaultsTest* t, const std::string& log, bool on) {
  std::vector<std::string> args = {"--spec", "ngram", "--spec-k", "4", "--slo", "premium=5000:500",
                                   "--slo", "standard=20000:1000", "--spec-reprobe", "600"};
  if (on)
    for (const std::string& a : ControllerOn()) args.push_back(a);
  ServerProcess srv(args, log);
  RunResult2 r;
  if (!srv.WaitReady()) {
    ADD_FAILURE() << "server did not start: " << Slurp(log);
    return r;
  }
  const std::vector<std::string> prompts = t->QuotePrompts(srv.port(), 4);
  auto body = [&prompts](bool creative) { return FloodBody(prompts, creative); };
  Deadline d(LoadSeconds(14));
  Load creative(srv.port(), 6, body(true), d), qa(srv.port(), 2, body(false), d);
  if (on) {
    // Until the creative bucket's drafts are capped.
    RunUntil(d, [&] {
      const Json s = Slo(srv.port());
      const Json* cb = Bucket(s, {{"task", "creative"}});
      return cb != nullptr && Model(s)["controller"].is_object() &&
             Model(s)["controller"]["knobs"]["bucket_max_k"].contains((*cb)["key"].get<std::string>());
    });
  }
  r.rest = creative.Join();
  r.top = qa.Join();
  r.slo = Slo(srv.port());
  return r;
}

void PrintSpec(const RunResult2& r, const char* mode) {
  const Json* cb = Bucket(r.slo, {{"task", "creative"}});
  const Json* qb = Bucket(r.slo, {{"task", "qa"}});
  ASSERT_TRUE(cb && qb);
  std::printf("[fault] spec-flood controller=%s qa_requests=%zu creative_requests=%zu qa_acceptance=%.3f "
              "creative_acceptance=%.3f creative_draft_tokens=%.0f qa_draft_tokens=%.0f qa_tpot_p50_ms=%.2f "
              "qa_tpot_p99_ms=%.2f creative_tpot_p99_ms=%.2f\n",
              mode, r.top.size(), r.rest.size(), Num((*qb)["speculation"]["acceptance_rate"]),
              Num((*cb)["speculation"]["acceptance_rate"]), Num((*cb)["speculation"]["draft_tokens"]),
              Num((*qb)["speculation"]["draft_tokens"]), Num((*qb)["total"]["tpot_ms"]["p50"]),
              Num((*qb)["total"]["tpot_ms"]["p99"]), Num((*cb)["total"]["tpot_ms"]["p99"]));
}

TEST_F(ControllerFaultsTest, LowAcceptanceFloodControllerOnSwitchesTheCreativeBucketOff) {
  const RunResult2 r = SpecFlood(this, Path("log.txt"), true);
  CheckInvariants(r.top, r.rest, "controller on");
  const Json* cb = Bucket(r.slo, {{"task", "creative"}});
  const Json* qb = Bucket(r.slo, {{"task", "qa"}});
  ASSERT_TRUE(cb && qb);
  EXPECT_GE(ActionCount(r.slo, "spec_bucket_k", "low_acceptance"), 1) << Model(r.slo)["controller"].dump();
  const Json& caps = Model(r.slo)["controller"]["knobs"]["bucket_max_k"];
  const std::string ck = (*cb)["key"].get<std::string>(), qk = (*qb)["key"].get<std::string>();
  ASSERT_TRUE(caps.contains(ck)) << caps.dump();
  EXPECT_EQ(caps[ck], 0);
  EXPECT_FALSE(caps.contains(qk)) << caps.dump();
  EXPECT_TRUE(Model(r.slo)["controller"]["knobs"]["speculation"].get<bool>());  // Q&A keeps drafting
  EXPECT_GT(Num((*qb)["speculation"]["acceptance_rate"]), Num((*cb)["speculation"]["acceptance_rate"]));
  PrintSpec(r, "on");
}

TEST_F(ControllerFaultsTest, LowAcceptanceFloodControllerOff) {
  const RunResult2 r = SpecFlood(this, Path("log.txt"), false);
  CheckInvariants(r.top, r.rest, "controller off");
  EXPECT_EQ(Count(r.rest, [](const Outcome& o) { return o.status == 429; }), 0);
  EXPECT_FALSE(r.slo["controller"]["enabled"].get<bool>());
  EXPECT_TRUE(Model(r.slo)["controller"].is_null());
  PrintSpec(r, "off");
}

// --- 1b. drafts that lengthen the shared steps: a draft model, a long fixed k ------------

// The top tier's p99 TPOT over the control window, as /v1/slo shows it, polled during the load.
struct TpotSample {
  double t_s = 0, p99_ms = -1;
  std::string state;  // the controller's ("" when off)
};

struct DraftFloodResult {
  std::vector<Outcome> top, rest;
  std::vector<TpotSample> timeline;
  Json slo;
};

const double kDraftFloodTpotMs = 6;  // the premium TPOT target of this scenario

// Q&A (greedy, premium) beside 4x as many creative clients (temperature 1.5, standard), the
// wp-1m draft proposing k = 8 for every request: on this model pair the drafts are accepted
// at about 0.2-0.3 per token in both buckets, so the verify tokens and draft rounds lengthen
// every shared step and the Q&A p99 TPOT rises above the 6 ms target that the same load
// meets without speculation (about 4 ms on this project's 2-core machines).
DraftFloodResult DraftFlood(ControllerFaultsTest* t, const std::string& log, bool on) {
  std::vector<std::string> args = {"--spec", "draft", "--draft-model", TARMAC_SOURCE_DIR "/models/wp-1m-f16.gguf",
                                   "--spec-k", "8", "--slo", fmt::format("premium=5000:{}", kDraftFloodTpotMs),
                                   "--slo", "standard=20000:1000", "--spec-reprobe", "600"};
  // The same control window either way (ControllerOn's): the report's tier p99s cover it.
  if (on)
    for (const std::string& a : ControllerOn()) args.push_back(a);
  else
    args.insert(args.end(), {"--controller-window", "4"});
  ServerProcess srv(args, log);
  DraftFloodResult r;
  if (!srv.WaitReady()) {
    ADD_FAILURE() << "server did not start: " << Slurp(log);
    return r;
  }
  const std::vector<std::string> prompts = t->QuotePrompts(srv.port(), 4);
  auto body = [&prompts](bool creative) { return FloodBody(prompts, creative); };
  Deadline d(LoadSeconds(16));
  Load creative(srv.port(), 8, body(true), d), qa(srv.port(), 2, body(false), d);
  // Samples the timeline; with the controller on, until the creative drafts are capped (and a
  // control window after).
  RunUntil(d, [&] {
    const Json s = Slo(srv.port());
    TpotSample x;
    x.t_s = d.Elapsed();
    for (const Json& tier : Model(s)["control_window_tiers"])
      if (tier["tier"] == "premium") x.p99_ms = Num(tier["p99_tpot_ms"]);
    const Json& c = Model(s)["controller"];
    if (c.is_object()) x.state = c["state"].get<std::string>();
    r.timeline.push_back(x);
    const Json* cb = Bucket(s, {{"task", "creative"}});
    return !on || (cb != nullptr && c.is_object() &&
                   (!c["knobs"]["speculation"].get<bool>() ||
                    c["knobs"]["bucket_max_k"].contains((*cb)["key"].get<std::string>())));
  }, /*after_s=*/4);
  r.rest = creative.Join();
  r.top = qa.Join();
  r.slo = Slo(srv.port());
  return r;
}

// The premium p99 TPOT before the controller first acted (the highest while normal; off: over
// the first half of the load) and over the last control window of the load.
void PrintDraftFlood(const DraftFloodResult& r, const char* mode) {
  double before = -1, end = -1;
  const double half = r.timeline.empty() ? 0 : r.timeline.back().t_s / 2;
  for (const TpotSample& x : r.timeline) {
    const bool early = x.state.empty() ? x.t_s <= half : x.state == "normal";
    if (early && (before < 0 || x.p99_ms > before)) before = x.p99_ms;
    if (!x.state.empty() && x.state != "normal") break;
  }
  if (!r.timeline.empty()) end = r.timeline.back().p99_ms;
  const Json* cb = Bucket(r.slo, {{"task", "creative"}});
  const Json* qb = Bucket(r.slo, {{"task", "qa"}});
  ASSERT_TRUE(cb && qb);
  std::printf("[fault] draft-flood controller=%s qa_requests=%zu creative_requests=%zu creative_429=%d "
              "qa_acceptance=%.3f creative_acceptance=%.3f qa_tpot_target_ms=%.1f qa_tpot_p99_before_ms=%.2f "
              "qa_tpot_p99_end_ms=%.2f over_before=%d under_at_end=%d\n",
              mode, r.top.size(), r.rest.size(), Count(r.rest, [](const Outcome& o) { return o.status == 429; }),
              Num((*qb)["speculation"]["acceptance_rate"]), Num((*cb)["speculation"]["acceptance_rate"]),
              kDraftFloodTpotMs, before, end, before > kDraftFloodTpotMs, end >= 0 && end <= kDraftFloodTpotMs);
  if (Model(r.slo)["controller"].is_object()) {
    std::string actions;
    for (const Json& a : Model(r.slo)["controller"]["actions_total"])
      actions += fmt::format(" {}({})x{}", a["action"].get<std::string>(), a["reason"].get<std::string>(), a["count"].get<int64_t>());
    std::printf("[fault-actions] draft-flood:%s\n", actions.c_str());
  }
}

TEST_F(ControllerFaultsTest, DraftFloodControllerOnCapsTheCreativeDrafts) {
  const DraftFloodResult r = DraftFlood(this, Path("log.txt"), true);
  CheckInvariants(r.top, r.rest, "controller on");
  const Json* cb = Bucket(r.slo, {{"task", "creative"}});
  ASSERT_NE(cb, nullptr);
  // The creative bucket's acceptance (< 0.5) caps its k at half or less, or its drafts stop
  // with speculation switched off for the TPOT target.
  EXPECT_GE(ActionCount(r.slo, "spec_bucket_k"), 1) << Model(r.slo)["controller"].dump();
  const Json& knobs = Model(r.slo)["controller"]["knobs"];
  const std::string ck = (*cb)["key"].get<std::string>();
  EXPECT_TRUE(!knobs["speculation"].get<bool>() || (knobs["bucket_max_k"].contains(ck) && knobs["bucket_max_k"][ck] <= 4))
      << knobs.dump();
  EXPECT_FALSE(r.timeline.empty());
  PrintDraftFlood(r, "on");
}

TEST_F(ControllerFaultsTest, DraftFloodControllerOff) {
  const DraftFloodResult r = DraftFlood(this, Path("log.txt"), false);
  CheckInvariants(r.top, r.rest, "controller off");
  EXPECT_EQ(Count(r.rest, [](const Outcome& o) { return o.status == 429; }), 0);
  // The report shows the tier's control-window p99 without a controller too.
  EXPECT_FALSE(r.timeline.empty());
  EXPECT_GT(r.timeline.back().p99_ms, 0);
  PrintDraftFlood(r, "off");
}

// --- 2. a busy thread steals one core ----------------------------------------------------

// Spins on one core while it lives.
class BusyThread {
 public:
  BusyThread() : t_([this] {
    volatile uint64_t x = 0;
    while (!stop_.load(std::memory_order_relaxed)) x = x + 1;
  }) {}
  ~BusyThread() {
    stop_ = true;
    t_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread t_;
};

struct CoreResult {
  std::vector<Outcome> premium, batch;
  Json slo;
  // A lowest-tier request sent the first time /v1/slo (polled during the load) showed the
  // lowest tiers shed; status 0: never seen shedding.
  Outcome probe;
  double premium_p99_ttft_end_ms = -1;  // over the control window at the end of the load
};

CoreResult StolenCore(ControllerFaultsTest* t, const std::string& log, bool on) {
  std::vector<std::string> args = {"--slo", "premium=60:30", "--slo", "batch=10000:500"};
  if (on)
    for (const std::string& a : ControllerOn()) args.push_back(a);
  ServerProcess srv(args, log);
  CoreResult r;
  if (!srv.WaitReady()) {
    ADD_FAILURE() << "server did not start: " << Slurp(log);
    return r;
  }
  std::string doc;
  for (int i = 0; i < 24; ++i) doc += "The regiment marched along the road towards the village in the snow. ";
  BusyThread busy;
  Deadline d(LoadSeconds(14));
  Load batch(srv.port(), 8, [&](int i) {
    return Json{{"model", kModel}, {"prompt", std::to_string(i) + " " + doc}, {"max_tokens", 32}, {"temperature", 0.8},
                {"seed", i}, {"ignore_eos", true}, {"task", "summarize"}, {"sla", "batch"}};
  }, d);
  Load premium(srv.port(), 2, [&](int i) {
    return Json{{"model", kModel}, {"prompt", "Prince Andrew said " + std::to_string(i)}, {"max_tokens", 16},
                {"temperature", 0}, {"ignore_eos", true}, {"task", "qa"}, {"sla", "premium"}};
  }, d);
  // The closed-loop batch clients may all be inside long requests while the tier is shed (under
  // a heavy load few of them end), so shedding is also checked with a probe request, sent the
  // first time /v1/slo shows the tier shed. The top tier's p99 TTFT over the control window is
  // read until the end of the load.
  RunUntil(d, [&] {
    const Json s = Slo(srv.port());
    for (const Json& tier : Model(s)["control_window_tiers"])
      if (tier["tier"] == "premium") r.premium_p99_ttft_end_ms = Num(tier["p99_ttft_ms"]);
    if (!on || r.probe.status != 0) return true;
    if (!(Model(s)["controller"].is_object() && Model(s)["controller"]["lowest_tiers"]["shed"] == true)) return false;
    HttpResponse p = Post(srv.port(), "/v1/completions",
                          Json{{"model", kModel}, {"prompt", "probe"}, {"max_tokens", 4}, {"sla", "batch"}}.dump());
    r.probe = {p.status, !p.Header("Retry-After").empty(), 0};
    return true;
  }, /*after_s=*/4);
  r.batch = batch.Join();
  r.premium = premium.Join();
  r.slo = Slo(srv.port());
  return r;
}

void PrintCore(const CoreResult& r, const char* mode) {
  const Json* p = nullptr;
  for (const Json& b : Model(r.slo)["buckets"])
    if (b["labels"]["sla"] == "premium") p = &b;
  ASSERT_NE(p, nullptr);
  std::printf("[fault] stolen-core controller=%s premium_requests=%zu batch_requests=%zu batch_429=%d "
              "premium_ttft_p50_ms=%.1f premium_ttft_p99_ms=%.1f premium_attainment=%.3f premium_ttft_p99_end_ms=%.1f\n",
              mode, r.premium.size(), r.batch.size(), Count(r.batch, [](const Outcome& o) { return o.status == 429; }),
              Num((*p)["total"]["ttft_ms"]["p50"]), Num((*p)["total"]["ttft_ms"]["p99"]),
              Num((*p)["total"]["slo_attainment"]), r.premium_p99_ttft_end_ms);
}

TEST_F(ControllerFaultsTest, StolenCoreControllerOnShedsTheLowestTier) {
  const CoreResult r = StolenCore(this, Path("log.txt"), true);
  CheckInvariants(r.premium, r.batch, "controller on");
  PrintCore(r, "on");
  // The controller sheds when the top tier's p99 TTFT is over its 60 ms target. On a quiet host
  // the stolen core may leave it within target without shedding (seen: p50 31 ms, p99 57 ms, no
  // shed): then there is nothing to shed, and that is what is checked.
  if (ActionCount(r.slo, "shed_lowest_tier") == 0) {
    EXPECT_GT(r.premium_p99_ttft_end_ms, 0) << "no premium TTFT over the last control window";
    EXPECT_LE(r.premium_p99_ttft_end_ms, 60) << "over its SLO and never shed: " << Model(r.slo)["controller"].dump();
    return;
  }
  // While shed, a lowest-tier request gets 429 with Retry-After.
  EXPECT_EQ(r.probe.status, 429);
  EXPECT_TRUE(r.probe.retry_after);
}

TEST_F(ControllerFaultsTest, StolenCoreControllerOff) {
  const CoreResult r = StolenCore(this, Path("log.txt"), false);
  CheckInvariants(r.premium, r.batch, "controller off");
  EXPECT_EQ(Count(r.batch, [](const Outcome& o) { return o.status == 429; }), 0);
  PrintCore(r, "off");
}

// --- 3. KV squeezed to a few requests' worth ---------------------------------------------

CoreResult SqueezedKv(ControllerFaultsTest* t, const std::string& log, bool on) {
  // 40 blocks of 16 tokens: two batch requests (10 blocks each) and a few premium ones.
  std::vector<std::string> args = {"--kv-blocks", "40", "--slo", "premium=2000:200", "--slo", "batch=20000:1000",
                                   "--request-timeout", "120"};
  if (on)
    for (const std::string& a : ControllerOn()) args.push_back(a);
  ServerProcess srv(args, log);
  CoreResult r;
  if (!srv.WaitReady()) {
    ADD_FAILURE() << "server did not start: " << Slurp(log);
    return r;
  }
  std::string doc;
  for (int i = 0; i < 14; ++i) doc += "The regiment marched along the road towards the village. ";
  Deadline d(LoadSeconds(12));
  Load batch(srv.port(), 6, [&](int i) {
    return Json{{"model", kModel}, {"prompt", std::to_string(i) + " " + doc}, {"max_tokens", 48}, {"temperature", 0.8},
                {"seed", i}, {"ignore_eos", true}, {"task", "summarize"}, {"sla", "batch"}, {"priority", 1}};
  }, d);
  Load premium(srv.port(), 4, [&](int i) {
    return Json{{"model", kModel}, {"prompt", "Natasha asked " + std::to_string(i) + " " + doc.substr(0, 200)},
                {"max_tokens", 48}, {"temperature", 0}, {"ignore_eos", true}, {"task", "qa"}, {"sla", "premium"}};
  }, d);
  r.batch = batch.Join();
  r.premium = premium.Join();
  r.slo = Slo(srv.port());
  return r;
}

void PrintKv(const CoreResult& r, const char* mode) {
  const Json* p = nullptr;
  const Json* b = nullptr;
  for (const Json& x : Model(r.slo)["buckets"]) {
    if (x["labels"]["sla"] == "premium") p = &x;
    if (x["labels"]["sla"] == "batch") b = &x;
  }
  ASSERT_TRUE(p && b);
  std::printf("[fault] squeezed-kv controller=%s premium_requests=%zu batch_requests=%zu batch_429=%d preemptions=%.0f "
              "premium_ttft_p99_ms=%.1f premium_e2e_p99_ms=%.1f batch_e2e_p99_ms=%.1f\n",
              mode, r.premium.size(), r.batch.size(), Count(r.batch, [](const Outcome& o) { return o.status == 429; }),
              Num(Model(r.slo)["preemptions"]), Num((*p)["total"]["ttft_ms"]["p99"]), Num((*p)["total"]["e2e_ms"]["p99"]),
              Num((*b)["total"]["e2e_ms"]["p99"]));
}

TEST_F(ControllerFaultsTest, SqueezedKvControllerOnHoldsTheLowestPriority) {
  const CoreResult r = SqueezedKv(this, Path("log.txt"), true);
  CheckInvariants(r.premium, r.batch, "controller on");
  EXPECT_GE(ActionCount(r.slo, "hold_low_priority", "kv_high"), 1) << Model(r.slo)["controller"].dump();
  PrintKv(r, "on");
}

TEST_F(ControllerFaultsTest, SqueezedKvControllerOff) {
  const CoreResult r = SqueezedKv(this, Path("log.txt"), false);
  CheckInvariants(r.premium, r.batch, "controller off");
  EXPECT_EQ(Count(r.batch, [](const Outcome& o) { return o.status == 429; }), 0);
  PrintKv(r, "off");
}

}  // namespace
}  // namespace tarmac::testing
