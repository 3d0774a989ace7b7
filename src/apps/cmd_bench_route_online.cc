// `tarmac bench route --online N`: the argmin policy learning online while the large model's
// speed changes. The small model runs on CPU 0 and the large one on CPU 1; during the middle
// third of the N requests two busy threads share CPU 1 with the large model (about 3x slower),
// then they stop. Every request runs on the policy's choice and, as a shadow that does not
// teach the policy, on the other model, so both outcomes are known: an outcome's objective is
// lambda_latency * seconds - lambda_quality * score, score = the judge's (the large model's)
// geometric-mean token probability of the answer. The policy learns quality from the scores
// (feedback) and latency from the engines' measured step costs, with 5% exploration.
//
// Reports the regret against the best fixed policy in hindsight (always small or always
// large), and per load change how many requests the policy took to converge to the better
// model of the new phase (90% of a sliding window of 100 choices).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "apps/bench_route.h"
#include "apps/model_loading.h"
#include "base/clock.h"
#include "base/cpu_affinity.h"
#include "model/sequence_runner.h"
#include "router/policy_argmin.h"
#include "router/router.h"

namespace tarmac::apps {
namespace {

using Json = nlohmann::json;

// Threads that keep one CPU busy while `on`.
class Spinners {
 public:
  Spinners(int cpu, int n) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this, cpu] {
        (void)PinCurrentThread({cpu});
        volatile uint64_t x = 0;
        while (!stop_.load(std::memory_order_relaxed)) {
          if (on_.load(std::memory_order_relaxed)) {
            for (int j = 0; j < 100000; ++j) x = x + 1;
          } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        }
      });
    }
  }
  ~Spinners() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }
  void Set(bool on) { on_ = on; }

 private:
  std::atomic<bool> on_{false}, stop_{false};
  std::vector<std::thread> threads_;
};

struct Outcome {
  double seconds = 0;
  double score = 0;  // geometric-mean token probability under the judge
};

}  // namespace

int RunBenchRouteOnline(const RouteArgs& a) {
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "tarmac bench route --online: %s\n", st.message().c_str());
    return st.code() == StatusCode::kInvalidArgument ? 2 : 1;
  };
  if (Status st = CheckCpus({0, 1}); !st.ok())
    return fail(InvalidArgument("needs CPUs 0 and 1 (the small and the large model each get one): {}", st.message()));
  std::ifstream in(a.text, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  if (all.size() < 50000) return fail(InvalidArgument("--text {}: fewer than 50,000 bytes", a.text));
  const std::string held_out = all.substr(all.size() - 50000);
  auto small_m = LoadModelAndTokenizer(a.small, /*quiet=*/a.json);
  if (!small_m.ok()) return fail(small_m.status());
  auto large_m = LoadModelAndTokenizer(a.large, /*quiet=*/a.json);
  if (!large_m.ok()) return fail(large_m.status());
  if (small_m->tokenizer->vocab().tokens != large_m->tokenizer->vocab().tokens)
    return fail(InvalidArgument("--small and --large have different vocabularies"));
  tok::EncodeOptions eo;
  eo.add_special = false;
  const std::vector<int32_t> ids = large_m->tokenizer->Encode(held_out, eo);
  std::mt19937_64 rng(a.seed);
  // Mixed requests: two prompt lengths and two output lengths (four request buckets).
  struct Req {
    std::vector<int32_t> prompt;
    int32_t max_tokens;
  };
  std::vector<Req> reqs;
  for (int i = 0; i < 256; ++i) {
    const int32_t len = i % 2 ? a.prompt_len : std::max(8, a.prompt_len / 4);
    const size_t start = rng() % (ids.size() - static_cast<size_t>(len));
    reqs.push_back({std::vector<int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(start),
                                         ids.begin() + static_cast<std::ptrdiff_t>(start + static_cast<size_t>(len))),
                    i % 4 < 2 ? a.output_len : std::max(4, a.output_len / 4)});
  }
  auto registry = std::make_shared<metrics::Registry>();
  router::ModelPool pool({8, 8, 1 << 20}, registry);
  for (auto [name, lm, cpu] : {std::tuple{"small", &*small_m, 0}, std::tuple{"large", &*large_m, 1}}) {
    engine::EngineConfig c;
    c.threads = 1;
    c.cpus = {cpu};
    c.metrics = registry;
    c.sched.max_running = 2;
    c.kv.blocks = 2 * ((a.prompt_len + a.output_len) / c.sched.block_size + 2);
    auto pm = router::PoolModel::Create(name, lm->model.get(), lm->tokenizer.get(), c);
    if (!pm.ok()) return fail(pm.status());
    pool.Add(std::move(pm).value());
  }
  router::RouterConfig rc;
  rc.models = {router::ModelInfo{"small", "small", 0.0, {metrics::Risk::kLow, metrics::Risk::kHigh}, {}},
               router::ModelInfo{"large", "large", 0.0, {metrics::Risk::kLow, metrics::Risk::kHigh}, {}}};
  router::Router view(std::move(rc), &pool, registry);
  ThreadPool judge_pool(1);
  model::SequenceRunner judge(large_m->model.get(), a.prompt_len + a.output_len + 1, &judge_pool);
  const int32_t V = large_m->model->config().n_vocab;

  auto run = [&](const std::string& model, const Req& r, uint64_t ns) -> Result<Outcome> {
    engine::EngineRequest e;
    e.prompt = r.prompt;
    e.max_tokens = r.max_tokens;
    e.sampling.temperature = 0.0f;
    e.ignore_eos = true;
    e.ns = ns;
    TARMAC_ASSIGN_OR_RETURN(auto stream, pool.Find(model)->engine->Submit(std::move(e)));
    std::vector<int32_t> answer;
    engine::TokenEvent ev;
    while (stream->Next(&ev)) {
      if (ev.token >= 0) answer.push_back(ev.token);
      if (ev.last()) break;
    }
    Outcome o;
    o.seconds = ev.metrics.e2e_s;
    judge.Reset();
    std::vector<int32_t> seq = r.prompt;
    seq.insert(seq.end(), answer.begin(), answer.end());
    std::vector<float> logits;
    TARMAC_RETURN_IF_ERROR(judge.Append(seq, true, &logits));
    double sum = 0;
    for (size_t i = 0; i < answer.size(); ++i) {
      const float* row = logits.data() + (r.prompt.size() - 1 + i) * static_cast<size_t>(V);
      const float mx = *std::max_element(row, row + V);
      double z = 0;
      for (int32_t v = 0; v < V; ++v) z += std::exp(static_cast<double>(row[v] - mx));
      sum += row[answer[i]] - mx - std::log(z);
    }
    o.score = std::exp(sum / std::max<size_t>(1, answer.size()));
    return o;
  };

  // Calibration (not counted; after a warm-up): the latency weight that makes the large model
  // worth it at its normal speed and not at 3x: the geometric middle, lambda_latency * latency
  // gap = score gap / sqrt(3).
  double dq = 0, dl = 0;
  for (int i = 0; i < 64; ++i) {
    auto s = run("small", reqs[static_cast<size_t>(i)], 1000 + static_cast<uint64_t>(i));
    auto l = run("large", reqs[static_cast<size_t>(i)], 2000 + static_cast<uint64_t>(i));
    if (!s.ok()) return fail(s.status());
    if (!l.ok()) return fail(l.status());
    if (i < 16) continue;  // warm-up
    dq += l->score - s->score;
    dl += l->seconds - s->seconds;
  }
  if (dq <= 0 || dl <= 0)
    return fail(Internal("calibration found no quality ({}) or latency ({}) gap between the models", dq, dl));
  router::ArgminParams ap;
  ap.models = {"small", "large"};
  ap.lambda_cost = 0;
  ap.lambda_quality = 1.0;
  ap.lambda_latency = dq / (std::sqrt(3.0) * dl);
  ap.explore = 0.05;
  ap.seed = a.seed;
  router::ArgminPolicy policy(ap);

  Spinners spin(/*cpu=*/1, /*n=*/2);
  const int n = a.online;
  const int slow_from = n / 3, slow_to = 2 * n / 3;
  std::vector<int> chosen_large(static_cast<size_t>(n));
  std::vector<metrics::BucketId> bucket(static_cast<size_t>(n));
  std::vector<double> j_small(static_cast<size_t>(n)), j_large(static_cast<size_t>(n)), j_policy(static_cast<size_t>(n));
  std::vector<double> s_small(static_cast<size_t>(n)), s_large(static_cast<size_t>(n));  // seconds of each
  auto objective = [&](const Outcome& o) { return ap.lambda_latency * o.seconds - ap.lambda_quality * o.score; };
  const double t0 = NowSeconds();
  for (int i = 0; i < n; ++i) {
    spin.Set(i >= slow_from && i < slow_to);
    const Req& r = reqs[static_cast<size_t>(i) % reqs.size()];
    router::RouteFeatures f;
    f.prompt_tokens = static_cast<int64_t>(r.prompt.size());
    f.max_tokens = r.max_tokens;
    f.temperature = 0;
    f.task = "chat";
    metrics::RequestFeatures bf;
    bf.prompt_tokens = f.prompt_tokens;
    bf.max_tokens = f.max_tokens;
    bf.temperature = 0;
    bf.task = f.task;
    f.bucket = registry->buckets().Of(bf);
    const router::Decision d = policy.Decide(f, view);
    const std::string other = d.model == "small" ? "large" : "small";
    // Fresh namespaces: a repeated prompt must not get cheaper from the prefix cache.
    auto mine = run(d.model, r, 10000 + 2 * static_cast<uint64_t>(i));
    auto shadow = run(other, r, 10001 + 2 * static_cast<uint64_t>(i));
    if (!mine.ok()) return fail(mine.status());
    if (!shadow.ok()) return fail(shadow.status());
    policy.Observe(f.bucket, d.model, mine->score);
    const bool large = d.model == "large";
    chosen_large[static_cast<size_t>(i)] = large;
    bucket[static_cast<size_t>(i)] = f.bucket;
    j_policy[static_cast<size_t>(i)] = objective(*mine);
    j_large[static_cast<size_t>(i)] = objective(large ? *mine : *shadow);
    j_small[static_cast<size_t>(i)] = objective(large ? *shadow : *mine);
    s_large[static_cast<size_t>(i)] = (large ? *mine : *shadow).seconds;
    s_small[static_cast<size_t>(i)] = (large ? *shadow : *mine).seconds;
  }
  spin.Set(false);
  const double wall = NowSeconds() - t0;

  auto sum = [](const std::vector<double>& v, int from, int to) {
    double s = 0;
    for (int i = from; i < to; ++i) s += v[static_cast<size_t>(i)];
    return s;
  };
  const double total_policy = sum(j_policy, 0, n), total_small = sum(j_small, 0, n), total_large = sum(j_large, 0, n);
  const double best_fixed = std::min(total_small, total_large);
  // Phases: the better model of each phase and request bucket (by its summed objective), and
  // when the policy settled on it.
  struct Phase {
    int from, to;
    bool large_better;          // over the whole phase
    int converged_after = -1;   // requests after the phase began until 90% of 100 choices are right
    double right = 0;           // share of the phase's choices that were the bucket's better model
  };
  std::vector<Phase> phases = {{0, slow_from, false}, {slow_from, slow_to, false}, {slow_to, n, false}};
  for (Phase& p : phases) {
    p.large_better = sum(j_large, p.from, p.to) < sum(j_small, p.from, p.to);
    std::map<metrics::BucketId, double> gain;  // summed objective of small minus large, per bucket
    for (int i = p.from; i < p.to; ++i)
      gain[bucket[static_cast<size_t>(i)]] += j_small[static_cast<size_t>(i)] - j_large[static_cast<size_t>(i)];
    std::vector<int> right(static_cast<size_t>(p.to - p.from));
    for (int i = p.from; i < p.to; ++i)
      right[static_cast<size_t>(i - p.from)] = chosen_large[static_cast<size_t>(i)] == (gain[bucket[static_cast<size_t>(i)]] > 0);
    for (int r : right) p.right += r;
    p.right /= std::max<size_t>(1, right.size());
    const int w = 100;
    for (int i = 0; i + w <= static_cast<int>(right.size()); ++i) {
      int agree = 0;
      for (int k = i; k < i + w; ++k) agree += right[static_cast<size_t>(k)];
      if (agree >= 90) {
        p.converged_after = i;
        break;
      }
    }
  }
  Json j;
  j["requests"] = n;
  j["slow_phase"] = {slow_from, slow_to};
  j["lambda_latency"] = ap.lambda_latency;
  j["lambda_quality"] = ap.lambda_quality;
  j["explore"] = ap.explore;
  j["objective_policy"] = total_policy;
  j["objective_always_small"] = total_small;
  j["objective_always_large"] = total_large;
  j["regret"] = total_policy - best_fixed;
  j["regret_relative"] = std::fabs(best_fixed) > 0 ? (total_policy - best_fixed) / std::fabs(best_fixed) : 0.0;
  Json ph = Json::array();
  for (const Phase& p : phases) {
    int large = 0;
    for (int i = p.from; i < p.to; ++i) large += chosen_large[static_cast<size_t>(i)];
    const double span = std::max(1, p.to - p.from);
    ph.push_back({{"from", p.from}, {"to", p.to}, {"better", p.large_better ? "large" : "small"},
                  {"large_seconds_mean", sum(s_large, p.from, p.to) / span},
                  {"small_seconds_mean", sum(s_small, p.from, p.to) / span},
                  {"share_large", static_cast<double>(large) / std::max(1, p.to - p.from)},
                  {"share_right", p.right},
                  {"converged_after", p.converged_after}});
  }
  j["phases"] = ph;
  j["wall_s"] = wall;
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("online argmin over %d requests (large model 3x slower in [%d, %d)), lambda_latency %.4g per s, lambda_quality 1\n",
              n, slow_from, slow_to, ap.lambda_latency);
  std::printf("  objective: policy %.3f, always small %.3f, always large %.3f: regret %.3f (%.1f%% of the best fixed)\n",
              total_policy, total_small, total_large, total_policy - best_fixed, 100 * j["regret_relative"].get<double>());
  for (const Json& p : ph)
    std::printf("  requests [%d, %d): large %.1f ms, small %.1f ms a request; better overall %s; policy chose large %.0f%%, "
                "the bucket's better model %.0f%%; converged after %d requests\n",
                p["from"].get<int>(), p["to"].get<int>(), 1e3 * p["large_seconds_mean"].get<double>(),
                1e3 * p["small_seconds_mean"].get<double>(), p["better"].get<std::string>().c_str(),
                100 * p["share_large"].get<double>(), 100 * p["share_right"].get<double>(), p["converged_after"].get<int>());
  return 0;
}

}  // namespace tarmac::apps
