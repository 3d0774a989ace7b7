// `tarmac bench offline`: runs N synthetic requests through an in-process EngineClient with at
// most C in flight, and reports throughput, TTFT/TPOT percentiles, KV waste, prefix-cache hits
// and preemptions. Prompts are random vocabulary ids (seeded), optionally starting with a
// shared prefix; outputs ignore end-of-generation so every request produces --output-len.
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/bench_offline.h"
#include "apps/model_loading.h"
#include "base/clock.h"
#include "engine/engine_client.h"

namespace tarmac::apps {
namespace {

struct OfflineArgs {
  std::string model;
  int requests = 64;
  int concurrency = 64;
  int prompt_len = 128;
  int output_len = 128;
  double length_spread = 0.0;  // prompt and output lengths uniform in [L(1-s), L(1+s)]
  int shared_prefix = 0;
  std::string kv_dtype = "f16";
  double kv_memory_gib = 0.0;
  bool no_prefix_cache = false;
  int max_batched_tokens = 512;
  int max_running = 0;  // 0: concurrency
  int block_size = 16;
  int threads = ThreadPool::DefaultThreads();
  uint64_t seed = 1;
  bool json = false;
};

struct Pct {
  double p50 = 0, p95 = 0, p99 = 0, mean = 0;
};

Pct Percentiles(std::vector<double> v) {
  Pct p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    const double idx = q * (v.size() - 1);
    const size_t lo = static_cast<size_t>(idx);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (idx - lo);
  };
  p.p50 = at(0.50);
  p.p95 = at(0.95);
  p.p99 = at(0.99);
  double s = 0;
  for (double x : v) s += x;
  p.mean = s / v.size();
  return p;
}

nlohmann::json PctJson(const Pct& p) {
  return {{"p50", p.p50}, {"p95", p.p95}, {"p99", p.p99}, {"mean", p.mean}};
}

int RunBenchOffline(const OfflineArgs& a) {
  auto loaded = LoadModelAndTokenizer(a.model, /*quiet=*/a.json);
  if (!loaded.ok()) {
    std::fprintf(stderr, "tarmac bench offline: %s\n", loaded.status().message().c_str());
    return 2;
  }
  model::LlamaModel& m = *loaded->model;
  const tok::Tokenizer& tk = *loaded->tokenizer;
  engine::EngineConfig cfg;
  cfg.block_size = a.block_size;
  cfg.kv_dtype = a.kv_dtype == "int8" ? model::KvDtype::kInt8 : model::KvDtype::kF16;
  cfg.kv_memory_bytes = static_cast<int64_t>(a.kv_memory_gib * (1ll << 30));
  cfg.max_batched_tokens = a.max_batched_tokens;
  cfg.max_running = a.max_running > 0 ? a.max_running : a.concurrency;
  cfg.prefix_cache = !a.no_prefix_cache;
  cfg.threads = a.threads;
  auto client_r = engine::EngineClient::Create(&m, &tk, cfg);
  if (!client_r.ok()) {
    std::fprintf(stderr, "tarmac bench offline: %s\n", client_r.status().message().c_str());
    return 2;
  }
  engine::EngineClient& client = **client_r;

  // Synthetic requests: ids drawn from the non-control vocabulary.
  std::mt19937_64 rng(a.seed);
  std::vector<int32_t> pool_ids;
  for (int32_t id = 0; id < tk.n_vocab(); ++id)
    if (!tk.IsControl(id) && !tk.IsEndOfGeneration(id)) pool_ids.push_back(id);
  auto rand_tokens = [&](int n) {
    std::vector<int32_t> v(static_cast<size_t>(std::max(n, 0)));
    for (auto& t : v) t = pool_ids[rng() % pool_ids.size()];
    return v;
  };
  auto spread = [&](int base) {
    if (a.length_spread <= 0) return base;
    std::uniform_real_distribution<double> u(1.0 - a.length_spread, 1.0 + a.length_spread);
    return std::max(1, static_cast<int>(std::lround(base * u(rng))));
  };
  const std::vector<int32_t> prefix = rand_tokens(a.shared_prefix);
  std::vector<engine::EngineRequest> reqs;
  for (int i = 0; i < a.requests; ++i) {
    engine::EngineRequest r;
    r.prompt = prefix;
    const auto own = rand_tokens(spread(a.prompt_len));
    r.prompt.insert(r.prompt.end(), own.begin(), own.end());
    r.max_tokens = spread(a.output_len);
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    reqs.push_back(std::move(r));
  }
  {  // warm-up request (not measured): faults pages, sizes scratch buffers
    engine::EngineRequest w;
    w.prompt = rand_tokens(8);
    w.max_tokens = 2;
    w.sampling.temperature = 0.0f;
    w.ignore_eos = true;
    w.ns = 0xffff;  // keeps the warm-up out of the measured namespace's cache
    auto s = client.Submit(w);
    if (!s.ok()) {
      std::fprintf(stderr, "tarmac bench offline: %s\n", s.status().message().c_str());
      return 2;
    }
    engine::TokenEvent ev;
    while ((*s)->Next(&ev) && !ev.last()) {
    }
  }
  const engine::EngineStats before = client.Stats();

  std::mutex mu;
  std::condition_variable cv;
  int pending_events = 0;
  std::vector<std::shared_ptr<engine::RequestStream>> inflight;
  std::vector<engine::RequestMetrics> done;
  double frag_sum = 0, frag_max = 0;
  int64_t frag_samples = 0;
  size_t next = 0;
  const double t0 = NowSeconds();
  auto submit_next = [&]() -> bool {
    auto s = client.Submit(reqs[next]);
    if (!s.ok()) {
      std::fprintf(stderr, "tarmac bench offline: request %zu: %s\n", next,
                   s.status().message().c_str());
      return false;
    }
    (*s)->SetNotifier([&] {
      std::lock_guard<std::mutex> lock(mu);
      ++pending_events;
      cv.notify_one();
    });
    inflight.push_back(*s);
    ++next;
    return true;
  };
  while (next < reqs.size() && static_cast<int>(inflight.size()) < a.concurrency)
    if (!submit_next()) return 2;
  while (!inflight.empty()) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::milliseconds(20), [&] { return pending_events > 0; });
      pending_events = 0;
    }
    const engine::EngineStats st = client.Stats();
    if (st.num_running > 0) {
      frag_sum += st.kv.fragmentation();
      frag_max = std::max(frag_max, st.kv.fragmentation());
      ++frag_samples;
    }
    for (size_t i = 0; i < inflight.size();) {
      engine::TokenEvent ev;
      bool finished = false;
      while (inflight[i]->TryNext(&ev)) {
        if (ev.last()) {
          if (ev.finish == engine::FinishReason::kError) {
            std::fprintf(stderr, "tarmac bench offline: %s\n", ev.error.message().c_str());
            return 1;
          }
          done.push_back(std::move(ev.metrics));
          finished = true;
        }
      }
      if (finished) {
        inflight.erase(inflight.begin() + static_cast<std::ptrdiff_t>(i));
        if (next < reqs.size() && !submit_next()) return 2;
      } else {
        ++i;
      }
    }
  }
  const double wall = NowSeconds() - t0;
  const engine::EngineStats after = client.Stats();

  int64_t out_tokens = 0, prompt_tokens = 0;
  std::vector<double> ttft, tpot, itl, e2e, queue;
  for (const auto& d : done) {
    out_tokens += d.output_tokens;
    prompt_tokens += d.prompt_tokens;
    ttft.push_back(d.ttft_s * 1e3);
    e2e.push_back(d.e2e_s * 1e3);
    queue.push_back(d.queue_s * 1e3);
    if (d.output_tokens > 1) tpot.push_back((d.e2e_s - d.ttft_s) * 1e3 / (d.output_tokens - 1));
    for (double x : d.itl_s) itl.push_back(x * 1e3);
  }
  const int64_t hits = after.sched.prefix_hit_tokens - before.sched.prefix_hit_tokens;
  const int64_t queried = after.sched.prefix_queried_tokens - before.sched.prefix_queried_tokens;
  const Pct p_ttft = Percentiles(ttft), p_tpot = Percentiles(tpot), p_itl = Percentiles(itl),
            p_e2e = Percentiles(e2e), p_queue = Percentiles(queue);
  nlohmann::json j = {
      {"model", a.model},
      {"threads", a.threads},
      {"requests", a.requests},
      {"concurrency", a.concurrency},
      {"prompt_len", a.prompt_len},
      {"output_len", a.output_len},
      {"shared_prefix", a.shared_prefix},
      {"kv_dtype", a.kv_dtype},
      {"prefix_cache", !a.no_prefix_cache},
      {"kv_blocks", client.config().kv_blocks},
      {"kv_bytes", client.kv_bytes()},
      {"block_size", a.block_size},
      {"wall_s", wall},
      {"prompt_tokens", prompt_tokens},
      {"output_tokens", out_tokens},
      {"output_tokens_per_s", out_tokens / wall},
      {"total_tokens_per_s", (out_tokens + prompt_tokens) / wall},
      {"requests_per_s", done.size() / wall},
      {"ttft_ms", PctJson(p_ttft)},
      {"tpot_ms", PctJson(p_tpot)},
      {"itl_ms", PctJson(p_itl)},
      {"e2e_ms", PctJson(p_e2e)},
      {"queue_ms", PctJson(p_queue)},
      {"kv_waste", frag_samples ? frag_sum / frag_samples : 0.0},
      {"kv_waste_max", frag_max},
      {"prefix_queried_tokens", queried},
      {"prefix_hit_tokens", hits},
      {"prefill_tokens_saved", hits},
      {"preemptions", after.sched.preemptions - before.sched.preemptions},
      {"evicted_blocks", after.sched.evicted_blocks - before.sched.evicted_blocks},
      {"max_concurrent_running", after.max_concurrent_running},
      {"steps", after.steps - before.steps},
  };
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf(
        "%d requests (concurrency %d, prompt %d%s, output %d), %d threads, KV %s %d blocks\n"
        "  output %.1f tok/s, total %.1f tok/s, %.2f req/s, wall %.2f s\n"
        "  TTFT ms p50 %.1f p95 %.1f p99 %.1f | TPOT ms p50 %.2f p95 %.2f p99 %.2f\n"
        "  KV waste %.2f%% (max %.2f%%), prefix hits %lld of %lld tokens, preemptions %lld, "
        "max running %d\n",
        a.requests, a.concurrency, a.prompt_len,
        a.shared_prefix ? (" + shared " + std::to_string(a.shared_prefix)).c_str() : "",
        a.output_len, a.threads, a.kv_dtype.c_str(), client.config().kv_blocks,
        out_tokens / wall, (out_tokens + prompt_tokens) / wall, done.size() / wall, wall,
        p_ttft.p50, p_ttft.p95, p_ttft.p99, p_tpot.p50, p_tpot.p95, p_tpot.p99,
        100.0 * j["kv_waste"].get<double>(), 100.0 * frag_max, static_cast<long long>(hits),
        static_cast<long long>(queried),
        static_cast<long long>(j["preemptions"].get<int64_t>()), after.max_concurrent_running);
  }
  return 0;
}

}  // namespace

void RegisterBenchOffline(CLI::App* bench, RunFn* run) {
  auto a = std::make_shared<OfflineArgs>();
  auto* cmd = bench->add_subcommand("offline", "requests through the in-process engine");
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--requests", a->requests, "number of requests")->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--concurrency", a->concurrency, "requests in flight at most")
      ->capture_default_str()->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--prompt-len", a->prompt_len, "unique prompt tokens per request")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--output-len", a->output_len, "output tokens per request")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--length-spread", a->length_spread,
                  "mixed lengths: prompt and output uniform in L*(1 +- s)")
      ->capture_default_str()->check(CLI::Range(0.0, 0.95));
  cmd->add_option("--shared-prefix", a->shared_prefix, "tokens shared by every prompt's start")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--kv-dtype", a->kv_dtype, "KV element type")->capture_default_str()
      ->check(CLI::IsMember({"f16", "int8"}));
  cmd->add_option("--kv-memory", a->kv_memory_gib, "KV memory in GiB (0: sized for the load)")
      ->capture_default_str()->check(CLI::Range(0.0, 4096.0));
  cmd->add_flag("--no-prefix-cache", a->no_prefix_cache, "disable the radix prefix cache");
  cmd->add_option("--max-batched-tokens", a->max_batched_tokens, "token budget per step")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-running", a->max_running, "running requests at most (0: concurrency)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 16));
  cmd->add_option("--block-size", a->block_size, "tokens per KV block")->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("-t,--threads", a->threads, "threads")->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--seed", a->seed, "seed of the synthetic prompts")->capture_default_str();
  cmd->add_flag("--json", a->json, "one JSON object");
  cmd->callback([a, run] { *run = [a] { return RunBenchOffline(*a); }; });
}

}  // namespace tarmac::apps
