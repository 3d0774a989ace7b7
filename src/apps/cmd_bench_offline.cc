// `tarmac bench offline`: runs N synthetic requests through an in-process EngineClient with at
// most C in flight, and reports throughput, TTFT/TPOT percentiles, KV waste, prefix-cache hits
// and preemptions. Prompts are random vocabulary ids (seeded), optionally starting with a
// shared prefix, or slices of a text file (see --workload); outputs ignore end-of-generation
// so every request produces --output-len (a request under --constrain ends when its grammar
// is complete).
#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/bench_offline.h"
#include "apps/control_flags.h"
#include "apps/model_loading.h"
#include "apps/percentiles.h"
#include "apps/plots.h"
#include "apps/engine_flags.h"
#include "base/clock.h"
#include "control/slo_report.h"
#include "control/slo_table.h"
#include "control/slo_tracker.h"
#include "base/progress.h"
#include "engine/engine_client.h"
#include "grammar/structured_output.h"
#include "metrics/request_bucket.h"

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
  EngineFlags engine;  // --max-running not given: the concurrency
  ControlFlags control;  // --slo: per-tier targets of the per-bucket table
  uint64_t seed = 1;
  bool json = false;
  float temp = 0.0f;
  int logprobs = 0;  // alternatives per token each request asks for
  std::string workload = "random";  // random | text | copy | quote | mixed
  std::string prompt_file;
  std::string constrain;  // "": free; json_object | schema:FILE | regex:PATTERN
  int constrain_every = 1;  // constrain requests 0, N, 2N, ... (task "<workload>-constrained" when N > 1)
  std::string plot_dir;  // --plot: PNG figures here
};

// The grammar --constrain names, compiled for the engine's vocabulary; *ms: compile time.
Result<std::shared_ptr<const grammar::CompiledGrammar>> Constraint(const std::string& spec, engine::EngineClient& client,
                                                                   double* ms) {
  grammar::StructuredOutputSpec s;
  if (spec == "json_object") {
    s.kind = grammar::StructuredOutputKind::kJsonObject;
  } else if (spec.rfind("schema:", 0) == 0) {
    std::ifstream in(spec.substr(7), std::ios::binary);
    if (!in) return InvalidArgument("--constrain: cannot read {}", spec.substr(7));
    std::stringstream ss;
    ss << in.rdbuf();
    s.kind = grammar::StructuredOutputKind::kJsonSchema;
    s.text = ss.str();
  } else if (spec.rfind("regex:", 0) == 0) {
    s.kind = grammar::StructuredOutputKind::kRegex;
    s.text = spec.substr(6);
  } else {
    return InvalidArgument("--constrain must be json_object, schema:FILE or regex:PATTERN, got '{}'", spec);
  }
  s.json.max_whitespace = 4;  // the server's default (--json-max-whitespace)
  TARMAC_ASSIGN_OR_RETURN(grammar::Grammar g, grammar::BuildGrammar(s));
  const double t0 = NowSeconds();
  auto compiled = client.grammars()->Compile(g);
  *ms = (NowSeconds() - t0) * 1e3;
  return compiled;
}

nlohmann::json PctJson(const Percentiles& p) {
  return {{"p50", p.p50}, {"p95", p.p95}, {"p99", p.p99}, {"mean", p.mean}};
}

nlohmann::json SpecJson(const engine::SpecCounts& c) {
  return {{"drafts", c.drafts}, {"draft_tokens", c.draft_tokens}, {"accepted_tokens", c.accepted_tokens},
          {"acceptance_rate", c.acceptance_rate()}, {"mean_accepted_length", c.mean_accepted_length()},
          {"accepted_per_position", c.accepted_at}, {"decisions", c.decisions}, {"fallbacks", c.fallbacks}};
}

int RunBenchOffline(const OfflineArgs& a) {
  auto loaded = LoadModelAndTokenizer(a.model, /*quiet=*/a.json);
  if (!loaded.ok()) {
    std::fprintf(stderr, "tarmac bench offline: %s\n", loaded.status().message().c_str());
    return 2;
  }
  model::LlamaModel& m = *loaded->model;
  const tok::Tokenizer& tk = *loaded->tokenizer;
  auto spec = LoadSpec(a.engine.spec, a.model);
  if (!spec.ok()) {
    std::fprintf(stderr, "tarmac bench offline: %s\n", spec.status().message().c_str());
    return 2;
  }
  engine::EngineConfig cfg = ToEngineConfig(a.engine, *spec);
  if (a.engine.max_running_option == nullptr || a.engine.max_running_option->count() == 0)
    cfg.sched.max_running = a.concurrency;
  auto targets = SloTargetsFrom(a.control);
  if (!targets.ok()) {
    std::fprintf(stderr, "tarmac bench offline: %s\n", targets.status().message().c_str());
    return 2;
  }
  // The per-bucket SLO table counts the measured requests only: the tracker is created when
  // they start, and the engine's hook feeds it from then on.
  cfg.metrics = std::make_shared<metrics::Registry>();
  cfg.model_name = std::filesystem::path(a.model).stem().string();
  std::shared_ptr<control::SloTracker> tracker;
  std::mutex tracker_mu;
  cfg.on_request_finished = [&](const engine::RequestMetrics& m, engine::FinishReason r, double now) {
    std::lock_guard<std::mutex> lock(tracker_mu);
    if (tracker) tracker->Observe(cfg.model_name, m, r, now);
  };
  auto client_r = engine::EngineClient::Create(&m, &tk, cfg);
  if (!client_r.ok()) {
    std::fprintf(stderr, "tarmac bench offline: %s\n", client_r.status().message().c_str());
    return 2;
  }
  engine::EngineClient& client = **client_r;
  std::shared_ptr<const grammar::CompiledGrammar> constraint;
  double compile_ms = 0;
  if (!a.constrain.empty()) {
    client.grammars()->tokens();  // the vocabulary's table is built once per model, not per grammar
    auto c = Constraint(a.constrain, client, &compile_ms);
    if (!c.ok()) {
      std::fprintf(stderr, "tarmac bench offline: %s\n", c.status().message().c_str());
      return 2;
    }
    constraint = *c;
  }

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
  // Text workloads draw prompts from slices of a file (the model's own domain, so a draft
  // model and n-gram lookup see realistic text).
  std::vector<int32_t> corpus;
  if (a.workload != "random") {
    if (a.prompt_file.empty()) {
      std::fprintf(stderr, "tarmac bench offline: --workload %s needs --prompt-file FILE\n",
                   a.workload.c_str());
      return 2;
    }
    std::ifstream in(a.prompt_file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    tok::EncodeOptions eo;
    eo.add_special = false;
    corpus = tk.Encode(ss.str(), eo);
    if (static_cast<int64_t>(corpus.size()) < 4ll * a.prompt_len) {
      std::fprintf(stderr, "tarmac bench offline: --prompt-file %s has %zu tokens, too few for "
                   "prompts of %d\n", a.prompt_file.c_str(), corpus.size(), a.prompt_len);
      return 2;
    }
  }
  auto text_tokens = [&](int n) {
    const size_t start = rng() % (corpus.size() - static_cast<size_t>(n));
    return std::vector<int32_t>(corpus.begin() + start, corpus.begin() + start + n);
  };
  const std::vector<int32_t> prefix =
      a.workload == "random" ? rand_tokens(a.shared_prefix) : text_tokens(a.shared_prefix);
  std::vector<engine::EngineRequest> reqs;
  for (int i = 0; i < a.requests; ++i) {
    engine::EngineRequest r;
    r.prompt = prefix;
    const int len = spread(a.prompt_len);
    std::vector<int32_t> own;
    if (a.workload == "random") {
      own = rand_tokens(len);
    } else if (a.workload == "copy") {
      // A passage, then its first half again: the continuation quotes the prompt.
      own = text_tokens(len);
      own.insert(own.end(), own.begin(), own.begin() + len / 2);
    } else {  // text, mixed; quote: the passage P, completed to P + C + P below
      own = text_tokens(len);
    }
    r.prompt.insert(r.prompt.end(), own.begin(), own.end());
    r.max_tokens = spread(a.output_len);
    r.sampling.temperature = a.temp;
    r.sampling.top_logprobs = a.logprobs;
    r.sampling.seed = a.seed * 1000003 + static_cast<uint64_t>(i);
    r.ignore_eos = true;
    r.task = a.workload;
    if (a.workload == "mixed") {  // half extraction-like greedy, half creative sampling
      r.task = i % 2 == 0 ? "qa" : "creative";
      r.sampling.temperature = i % 2 == 0 ? 0.0f : 1.5f;
    }
    if (i % a.constrain_every == 0) {
      r.grammar = constraint;
      // Constrained and free requests of one run, told apart in the per-bucket figures.
      if (constraint && a.constrain_every > 1) r.task += "-constrained";
    }
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
  if (a.workload == "quote") {
    // Quote: the answer is in the prompt, as in RAG where it is in the retrieved text. The
    // small models cannot follow an instruction to quote, and hardly copy text they see
    // (`copy` gets little n-gram acceptance: they just continue), so the prompt holds the
    // model's own greedy continuation C of the passage P: P + C + P, a document with the
    // answer, then the question again. The model, mostly attending to recent tokens, answers
    // with (mostly) C again, which n-gram lookup finds in the prompt. C is generated twice:
    // from P, then from P + C + P, so that the quote is what the model says in (nearly) the
    // measured context (higher acceptance than from P alone; bench/NOTES.md). This happens
    // before the measured phase, without speculation and in another cache namespace: not
    // timed, not counted, and nothing of it is prefix-cached for the measured requests.
    const int ctx = client.config().sched.max_context;
    for (size_t i = 0; i < reqs.size(); ++i) {
      const int64_t need = 2 * static_cast<int64_t>(reqs[i].prompt.size()) - a.shared_prefix +
                           2 * static_cast<int64_t>(reqs[i].max_tokens);
      if (need > ctx) {
        std::fprintf(stderr, "tarmac bench offline: --workload quote: request %zu needs %lld "
                     "tokens (--shared-prefix + 2 x --prompt-len + 2 x --output-len, with "
                     "--length-spread), beyond the model's context of %d\n", i,
                     static_cast<long long>(need), ctx);
        return 2;
      }
    }
    const std::vector<engine::EngineRequest> question = reqs;  // shared prefix + P
    for (int round = 0; round < 2; ++round) {
      std::vector<std::shared_ptr<engine::RequestStream>> streams;
      for (const auto& r : reqs) {
        engine::EngineRequest g;
        g.prompt = r.prompt;
        g.max_tokens = r.max_tokens;
        g.sampling.temperature = 0.0f;
        g.ignore_eos = true;
        g.speculative = false;
        g.ns = 0xffff;
        g.task = "quote-source";
        auto s = client.Submit(g);
        if (!s.ok()) {
          std::fprintf(stderr, "tarmac bench offline: %s\n", s.status().message().c_str());
          return 2;
        }
        streams.push_back(*s);
      }
      for (size_t i = 0; i < reqs.size(); ++i) {
        const std::vector<int32_t>& q = question[i].prompt;
        std::vector<int32_t> p = q;
        engine::TokenEvent ev;
        while (streams[i]->Next(&ev)) {
          if (ev.token >= 0) p.push_back(ev.token);  // + C
          if (ev.last()) break;
        }
        if (ev.finish == engine::FinishReason::kError) {
          std::fprintf(stderr, "tarmac bench offline: %s\n", ev.error.message().c_str());
          return 1;
        }
        p.insert(p.end(), q.begin() + a.shared_prefix, q.end());  // + P
        reqs[i].prompt = std::move(p);
      }
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
  std::vector<std::array<double, 3>> kv_over_time;  // --plot: (seconds, KV usage 0..1, running)
  const double t0 = NowSeconds();
  {
    std::lock_guard<std::mutex> lock(tracker_mu);
    tracker = std::make_shared<control::SloTracker>(cfg.metrics, *targets, 60.0, 10.0, t0);
  }
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
  Progress progress("bench offline", a.requests, Progress::Unit::kItems, "requests");
  while (next < reqs.size() && static_cast<int>(inflight.size()) < a.concurrency)
    if (!submit_next()) return 2;
  while (!inflight.empty()) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::milliseconds(20), [&] { return pending_events > 0; });
      pending_events = 0;
    }
    const engine::EngineStats st = client.Stats();
    if (!a.plot_dir.empty() && (kv_over_time.empty() || NowSeconds() - t0 - kv_over_time.back()[0] >= 0.05) &&
        st.kv.total_blocks > 0)
      kv_over_time.push_back({NowSeconds() - t0, static_cast<double>(st.kv.request_blocks) / st.kv.total_blocks,
                              static_cast<double>(st.num_running)});
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
          progress.Add(1);
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
  progress.Finish();
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
  const Percentiles p_ttft = Summarize(ttft), p_tpot = Summarize(tpot), p_itl = Summarize(itl),
                    p_e2e = Summarize(e2e), p_queue = Summarize(queue);
  nlohmann::json j = {
      {"model", a.model},
      {"threads", a.engine.threads},
      {"requests", a.requests},
      {"concurrency", a.concurrency},
      {"prompt_len", a.prompt_len},
      {"output_len", a.output_len},
      {"shared_prefix", a.shared_prefix},
      {"kv_dtype", a.engine.kv_dtype},
      {"prefix_cache", !a.engine.no_prefix_cache},
      {"kv_blocks", client.config().kv.blocks},
      {"kv_bytes", client.kv_bytes()},
      {"block_size", a.engine.block_size},
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
      {"constrain", a.constrain},
      {"grammar_compile_ms", compile_ms},
  };
  // Per request bucket (the one definition: metrics::BucketTable), latencies and speculation.
  const metrics::BucketTable& table = client.config().metrics->buckets();
  std::map<metrics::BucketId, std::vector<size_t>> by_bucket;
  for (size_t i = 0; i < done.size(); ++i) by_bucket[done[i].bucket].push_back(i);
  const std::map<metrics::BucketId, engine::SpecCounts> spec_by_bucket = client.metrics().SpecByBucket();
  nlohmann::json buckets = nlohmann::json::object();
  for (const auto& [b, idx] : by_bucket) {
    std::vector<double> tt, tp;
    int64_t out = 0;
    for (size_t i : idx) {
      const auto& d = done[i];
      out += d.output_tokens;
      tt.push_back(d.ttft_s * 1e3);
      if (d.output_tokens > 1) tp.push_back((d.e2e_s - d.ttft_s) * 1e3 / (d.output_tokens - 1));
    }
    nlohmann::json labels = nlohmann::json::object();
    for (size_t l = 0; l < metrics::BucketTable::LabelNames().size(); ++l)
      labels[metrics::BucketTable::LabelNames()[l]] = table.LabelValues(b)[l];
    nlohmann::json e = {{"labels", labels}, {"requests", idx.size()}, {"output_tokens", out},
                        {"ttft_ms", PctJson(Summarize(tt))}, {"tpot_ms", PctJson(Summarize(tp))}};
    if (auto it = spec_by_bucket.find(b); it != spec_by_bucket.end()) e["spec"] = SpecJson(it->second);
    buckets[table.Key(b)] = std::move(e);
  }
  j["buckets"] = buckets;
  const engine::SpecCounts spec_total = client.metrics().SpecTotal();
  j["spec"] = a.engine.spec.mode;
  j["spec_max_slowdown"] = a.engine.spec.max_slowdown;
  j["spec_tree"] = std::to_string(spec->tree_width) + "x" + std::to_string(spec->tree_branch);
  if (spec->draft != nullptr) {
    j["draft_model"] = spec->draft_path;
    j["draft_quantized_q8_0"] = spec->draft_quantized;
  }
  j["acceptance_rate"] = spec_total.acceptance_rate();
  j["mean_accepted_length"] = spec_total.mean_accepted_length();
  j["spec_fallback_rate"] = spec_total.decisions ? static_cast<double>(spec_total.fallbacks) / spec_total.decisions : 0.0;
  j["draft_seconds"] = after.draft_seconds - before.draft_seconds;
  j["verify_seconds"] = after.verify_seconds - before.verify_seconds;
  nlohmann::ordered_json slo;
  {
    std::lock_guard<std::mutex> lock(tracker_mu);
    slo = control::ToJson(control::BuildSloReport(*cfg.metrics, tracker.get(), nullptr, NowSeconds(), /*tracked_only=*/true));
  }
  if (a.json) j["slo_report"] = nlohmann::json::parse(slo.dump());
  int rc = 0;
  if (!a.plot_dir.empty()) {
    // Figures (plots.h): TTFT and TPOT distributions per bucket, KV usage over time, draft
    // acceptance per bucket.
    auto plotter = Plotter::Create(a.plot_dir);
    if (!plotter.ok()) {
      std::fprintf(stderr, "tarmac bench offline: %s\n", plotter.status().message().c_str());
      return 2;
    }
    const Plotter& p = plotter.value();
    if (!p.available())
      std::fprintf(stderr, "tarmac bench offline: gnuplot not found: skipping the PNG figures (the .dat and .gp files are "
                           "in %s; scripts/install-deps.sh installs gnuplot-nox)\n", a.plot_dir.c_str());
    const std::string what = fmt::format("{} requests at concurrency {}, {}", a.requests, a.concurrency, a.model);
    PlotSpec ttft_f{"ttft_cdf", "TTFT distribution per bucket: " + what, "time to first token (ms)", "fraction of requests"};
    PlotSpec tpot_f{"tpot_cdf", "TPOT distribution per bucket: " + what, "time per output token (ms)", "fraction of requests"};
    ttft_f.style = tpot_f.style = "steps";
    for (const auto& [b, idx] : by_bucket) {
      std::vector<double> tt, tp;
      for (size_t i : idx) {
        tt.push_back(done[i].ttft_s);
        if (done[i].output_tokens > 1) tp.push_back((done[i].e2e_s - done[i].ttft_s) / (done[i].output_tokens - 1));
      }
      ttft_f.series.push_back({table.Key(b), Plotter::Cdf(tt, 1e3)});
      tpot_f.series.push_back({table.Key(b), Plotter::Cdf(tp, 1e3)});
    }
    PlotSpec kv_f{"kv_usage", "KV cache usage over time: " + what, "seconds", "KV blocks held by requests (%)"};
    kv_f.style = "lines";
    kv_f.y2label = "requests running";
    PlotSeries use{"KV usage"}, running{"running"};
    running.y2 = true;
    for (const auto& s : kv_over_time) {
      use.points.emplace_back(s[0], 100 * s[1]);
      running.points.emplace_back(s[0], s[2]);
    }
    kv_f.series = {use, running};
    std::vector<PlotSpec> specs = {ttft_f, tpot_f, kv_f};
    PlotSpec acc{"spec_acceptance", "Draft acceptance per request bucket: " + what, "bucket", "accepted / drafted tokens"};
    acc.style = "boxes";
    PlotSeries rate{"acceptance rate"};
    for (const auto& [b, c] : spec_by_bucket) {
      if (c.draft_tokens <= 0) continue;
      rate.points.emplace_back(static_cast<double>(acc.xtics.size()), c.acceptance_rate());
      acc.xtics.push_back(table.Key(b));
    }
    if (rate.points.empty()) {
      std::fprintf(stderr, "tarmac bench offline: no drafted tokens (--spec %s): no spec_acceptance figure\n",
                   a.engine.spec.mode.c_str());
    } else {
      acc.series.push_back(rate);
      specs.push_back(acc);
    }
    for (const PlotSpec& s : specs) {
      if (Status st = p.Plot(s); !st.ok()) {
        std::fprintf(stderr, "tarmac bench offline: %s\n", st.message().c_str());
        rc = 1;
      } else if (p.available()) {
        std::fprintf(stderr, "tarmac bench offline: wrote %s/%s.png\n", a.plot_dir.c_str(), s.name.c_str());
      }
    }
  }
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
        a.output_len, a.engine.threads, a.engine.kv_dtype.c_str(), client.config().kv.blocks,
        out_tokens / wall, (out_tokens + prompt_tokens) / wall, done.size() / wall, wall,
        p_ttft.p50, p_ttft.p95, p_ttft.p99, p_tpot.p50, p_tpot.p95, p_tpot.p99,
        100.0 * j["kv_waste"].get<double>(), 100.0 * frag_max, static_cast<long long>(hits),
        static_cast<long long>(queried),
        static_cast<long long>(j["preemptions"].get<int64_t>()), after.max_concurrent_running);
    std::printf("%s", control::RenderSloTable(nlohmann::json::parse(slo.dump()), control::SloSpans::kSinceStart).c_str());
  }
  return rc;
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
  AddEngineFlags(cmd, &a->engine);
  a->engine.max_running_option->description("requests batched (holding KV) at most (default: --concurrency)");
  AddSloFlag(cmd, &a->control);
  cmd->add_option("--seed", a->seed, "seed of the synthetic prompts")->capture_default_str();
  cmd->add_flag("--json", a->json, "one JSON object");
  cmd->add_option("--temp", a->temp, "sampling temperature (0: greedy)")->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--logprobs", a->logprobs, "top alternatives per token each request asks for (what they cost)")
      ->capture_default_str()->check(CLI::Range(0, 20));
  cmd->add_option("--workload", a->workload,
                  "random: random ids; text: slices of --prompt-file; copy: a slice then its first "
                  "half again (but the small models continue rather than copy); quote: a slice "
                  "P, the model's own greedy continuation C (generated first, unmeasured), P "
                  "again - the answer is in the prompt, as in RAG (needs 2 x (prompt-len + "
                  "output-len) within the context); mixed: text, half greedy 'qa', half "
                  "temperature-1.5 'creative'")
      ->capture_default_str()
      ->check(CLI::IsMember({"random", "text", "copy", "quote", "mixed"}));
  cmd->add_option("--constrain", a->constrain,
                  "constrain every output: json_object, schema:FILE (a JSON Schema) or regex:PATTERN (the engine "
                  "masks logits with the grammar; reports grammar_compile_ms)");
  cmd->add_option("--constrain-every", a->constrain_every,
                  "constrain only requests 0, N, 2N, ...; with N > 1 their task is '<workload>-constrained', so the "
                  "per-bucket figures compare constrained and free requests of the same run")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--prompt-file", a->prompt_file,
                  "text file for text/copy/quote/mixed workloads")
      ->check(CLI::ExistingFile);
  cmd->add_option("--plot", a->plot_dir,
                  "write PNG figures (gnuplot) to this directory: TTFT and TPOT distributions per bucket, KV usage "
                  "over time, draft acceptance per bucket");
  cmd->callback([a, run] { *run = [a] { return RunBenchOffline(*a); }; });
}

}  // namespace tarmac::apps
