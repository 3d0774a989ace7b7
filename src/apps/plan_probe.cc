#include "apps/plan_probe.h"

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <thread>

#include "base/check.h"
#include "base/clock.h"
#include "engine/engine_client.h"
#include "kernels/ops.h"
#include "tensor/aligned_buffer.h"

namespace tarmac::apps {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// Prompt ids spread over the vocabulary (no tokenizer needed), distinct per seed.
std::vector<int32_t> Prompt(int32_t n, int32_t n_vocab, uint64_t seed) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  uint64_t s = seed * 2862933555777941757ull + 3037000493ull;
  const int32_t lo = std::min(256, n_vocab - 1), span = std::max(1, n_vocab - lo);
  for (auto& t : p) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    t = lo + static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(span));
  }
  return p;
}

// Runs the requests at once and returns their metrics (in order). Errors end the probe.
Result<std::vector<engine::RequestMetrics>> RunAll(engine::EngineClient& client, std::vector<engine::EngineRequest> reqs) {
  std::vector<std::shared_ptr<engine::RequestStream>> streams;
  for (auto& r : reqs) {
    TARMAC_ASSIGN_OR_RETURN(auto s, client.Submit(std::move(r)));
    streams.push_back(std::move(s));
  }
  std::vector<engine::RequestMetrics> out;
  for (auto& s : streams) {
    engine::TokenEvent ev;
    while (s->Next(&ev) && !ev.last()) {
    }
    if (ev.finish == engine::FinishReason::kError) return ev.error;
    out.push_back(ev.metrics);
  }
  return out;
}

engine::EngineRequest Request(std::vector<int32_t> prompt, int32_t max_tokens, uint64_t ns) {
  engine::EngineRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  r.speculative = false;
  r.ns = ns;
  r.task = "plan-probe";
  return r;
}

}  // namespace

ReadBandwidthProbe::ReadBandwidthProbe(int64_t bytes)
    : n_(std::max<int64_t>(bytes, 1 << 20) / 64 * 16) {
  // Read the way the decode kernels do: from huge pages (the prepared weights' arenas), with
  // software prefetch, on the pool's own threads (and so on the CPUs they are pinned to), one
  // contiguous part each.
  buf_.Resize(static_cast<size_t>(n_) * sizeof(float), /*huge_pages=*/true, /*zero=*/false);
  float* data = buf_.as<float>();
  std::fill(data, data + n_, 1.0f);  // fault every page in first
}

double ReadBandwidthProbe::Measure(ThreadPool* pool, int passes) {
  TARMAC_CHECK(passes >= 1);
  const float* data = buf_.as<float>();
  const int threads = pool->num_threads();
  const int64_t per = n_ / threads / 16 * 16;
  std::vector<float> sums(static_cast<size_t>(threads));
  double best = 0;
  for (int pass = 0; pass < passes; ++pass) {
    const double t0 = NowSeconds();
    pool->ParallelFor(threads, 1, [&](int64_t t, int64_t, int) {  // chunk t runs on thread t
      const int64_t len = t == threads - 1 ? n_ - t * per : per;
      sums[static_cast<size_t>(t)] = kernels::StreamSumF32(data + t * per, len);
    });
    best = std::max(best, static_cast<double>(n_) * 4 / (NowSeconds() - t0));
  }
  return best;
}

double MeasureReadBandwidth(int64_t bytes, ThreadPool* pool) {
  return ReadBandwidthProbe(bytes).Measure(pool);
}

Result<StepProbeResult> MeasureStepCosts(model::LlamaModel* model, const tok::Tokenizer* tokenizer,
                                         engine::EngineConfig config, const StepProbe& probe) {
  StepProbeResult res;
  const double t0 = NowSeconds();
  const int32_t trained = model->config().n_ctx_train;
  const int32_t max_b = *std::max_element(probe.batches.begin(), probe.batches.end());
  // Sizes within the model's context (a prompt leaves room for one token).
  const int32_t decode_tokens = std::min(probe.decode_tokens, trained / 2);
  const int32_t context = std::clamp(probe.context, 1, trained - decode_tokens - 1);
  std::vector<int32_t> prefills;
  for (int32_t n : probe.prefills) prefills.push_back(std::clamp(n, 1, trained - 1));
  const int32_t max_p = prefills.empty() ? 1 : *std::max_element(prefills.begin(), prefills.end());
  const int32_t bs = config.sched.block_size;
  const int32_t ctx = context + decode_tokens + 1;
  config.sched.max_running = std::max(max_b, 1);
  config.sched.max_context = std::min(trained, std::max(ctx, max_p + 1));
  config.spec.mode = engine::SpecMode::kOff;
  config.spec.policy = false;
  // Blocks: the shared prompt once, each request's own tail, one long prefill, some slack.
  config.kv.blocks = (ctx / bs + 2) * (max_b + 2) + max_p / bs + 4;
  config.kv.memory_bytes = 0;
  config.kv.prefix_cache = true;
  TARMAC_ASSIGN_OR_RETURN(auto client, engine::EngineClient::Create(model, tokenizer, config));
  const int32_t V = model->config().n_vocab;
  const std::vector<int32_t> shared = Prompt(context, V, 1);
  TARMAC_RETURN_IF_ERROR(RunAll(*client, {Request(shared, 2, 7)}).status());  // caches the prompt
  std::map<int32_t, std::vector<double>> decode, prefill;  // samples by size
  uint64_t seed = 100;
  const double rounds_t0 = NowSeconds();
  for (int32_t round = 0; round < std::max(1, probe.rounds); ++round) {
    // Another round only when one more (as long as those so far) still fits the budget.
    const double per_round = round > 0 ? (NowSeconds() - rounds_t0) / round : 0;
    if (round > 0 && NowSeconds() + per_round - t0 > probe.budget_s) {
      res.truncated = true;
      break;
    }
    for (int32_t b : probe.batches) {
      std::vector<engine::EngineRequest> reqs;
      for (int32_t i = 0; i < b; ++i) reqs.push_back(Request(shared, decode_tokens + 1, 7));
      TARMAC_ASSIGN_OR_RETURN(auto ms, RunAll(*client, std::move(reqs)));
      // The B-token step: the median gap between tokens once every request decodes (the first
      // gap of each may still share a step with another request's last prompt token).
      std::vector<double> gaps;
      for (const auto& m : ms) {
        for (size_t i = 1; i < m.itl_s.size(); ++i) gaps.push_back(m.itl_s[i]);
      }
      if (!gaps.empty()) decode[b].push_back(Median(gaps));
    }
    for (int32_t n : prefills) {
      // Its own namespace and prompt: nothing cached; one step when n <= max_batched_tokens.
      ++seed;
      TARMAC_ASSIGN_OR_RETURN(auto ms, RunAll(*client, {Request(Prompt(n, V, seed), 1, seed)}));
      const double steps = std::ceil(static_cast<double>(n) / config.sched.max_batched_tokens);
      prefill[n].push_back(ms[0].ttft_s / steps);
    }
    res.rounds = round + 1;
  }
  for (const auto& [b, v] : decode) {
    res.decode.emplace_back(b, Median(v));
    res.curve.Add(b, Median(v));
  }
  for (const auto& [n, v] : prefill) {
    res.prefill.emplace_back(n, Median(v) * std::ceil(static_cast<double>(n) / config.sched.max_batched_tokens));
    res.curve.Add(std::min<int64_t>(n, config.sched.max_batched_tokens), Median(v));
  }
  res.seconds = NowSeconds() - t0;
  return res;
}

}  // namespace tarmac::apps
