// `tarmac bench route`: the cascade (a small model answers first, low confidence on its first k
// tokens escalates to the large one) evaluated as RouteLLM evaluates routers, on prompts from
// the held-out end of a text file (the last 50,000 bytes), plus the online argmin (online
// part: cmd_bench_route_online.cc).
//
// Each prompt gets both models' greedy answers (the small one with the logprobs the cascade's
// confidence needs); the large model judges both: an answer's quality is its mean per-token
// log-likelihood under the large model, given the prompt. Costs count the small model's
// discarded attempt when a request escalates, in FLOPs (2 x parameters x tokens) and in
// measured CPU-seconds (engine time x threads). The threshold sweep reports PGR per threshold,
// APGR against random routing at the same share (bootstrap intervals), CPT(50%) and CPT(80%),
// the cheapest point within one standard error of always-large, token agreement, and the TTFT
// of escalated requests through the real cascade against going straight to the large model.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "apps/bench_route.h"
#include "apps/model_loading.h"
#include "apps/percentiles.h"
#include "base/clock.h"
#include "model/sequence_runner.h"
#include "router/cascade_target.h"
#include "router/pool_model.h"
#include "router/route_eval.h"

namespace tarmac::apps {
namespace {

using Json = nlohmann::json;

// One model's answer to one prompt.
struct Answer {
  std::vector<int32_t> tokens;
  std::vector<float> logprob;     // of each chosen token (the model's own)
  std::vector<float> margin;      // top-1 minus top-2 logprob
  engine::RequestMetrics metrics;
};

Result<std::string> HeldOutText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("--text {}: cannot read the file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  constexpr size_t kHeldOut = 50000;  // the corpus's last 50,000 bytes were never trained on
  if (s.size() < kHeldOut) return InvalidArgument("--text {}: {} bytes, fewer than the 50,000 held out", path, s.size());
  size_t start = s.size() - kHeldOut;
  while (start < s.size() && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) ++start;  // a UTF-8 boundary
  return s.substr(start);
}

int64_t Params(const model::LlamaModel& m) {
  int64_t n = 0;
  for (const gguf::TensorInfo& t : m.file().tensors()) {
    int64_t e = 1;
    for (uint64_t d : t.dims) e *= static_cast<int64_t>(d);
    n += e;
  }
  return n;
}

// Greedy answers of `pm` to every prompt, one request at a time (so its timings are its own).
Result<std::vector<Answer>> Answers(router::PoolModel& pm, const std::vector<std::vector<int32_t>>& prompts,
                                    int32_t output_len, int32_t top_logprobs) {
  std::vector<Answer> out;
  for (const auto& p : prompts) {
    engine::EngineRequest r;
    r.prompt = p;
    r.max_tokens = output_len;
    r.sampling.temperature = 0.0f;
    r.sampling.top_logprobs = top_logprobs;
    r.ignore_eos = true;
    r.ns = 0xbe7c4;  // one namespace; prompts differ, so nothing useful is cached between them
    TARMAC_ASSIGN_OR_RETURN(std::shared_ptr<engine::RequestStream> s, pm.engine->Submit(std::move(r)));
    Answer a;
    engine::TokenEvent ev;
    while (s->Next(&ev)) {
      if (ev.token >= 0) {
        a.tokens.push_back(ev.token);
        a.logprob.push_back(ev.logprob);
        a.margin.push_back(ev.top.size() >= 2 ? ev.top[0].logprob - ev.top[1].logprob : 0.0f);
      }
      if (ev.last()) break;
    }
    if (ev.finish == engine::FinishReason::kError) return ev.error;
    a.metrics = ev.metrics;
    out.push_back(std::move(a));
  }
  return out;
}

// Mean log-likelihood of `answer` after `prompt` under the judge.
Result<double> Judge(model::SequenceRunner& runner, int32_t n_vocab, const std::vector<int32_t>& prompt,
                     const std::vector<int32_t>& answer) {
  runner.Reset();
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), answer.begin(), answer.end());
  std::vector<float> logits;
  TARMAC_RETURN_IF_ERROR(runner.Append(seq, /*all_logits=*/true, &logits));
  double sum = 0;
  for (size_t i = 0; i < answer.size(); ++i) {
    const float* row = logits.data() + (prompt.size() - 1 + i) * static_cast<size_t>(n_vocab);
    float mx = row[0];
    for (int32_t v = 1; v < n_vocab; ++v) mx = std::max(mx, row[v]);
    double z = 0;
    for (int32_t v = 0; v < n_vocab; ++v) z += std::exp(static_cast<double>(row[v] - mx));
    sum += row[answer[i]] - mx - std::log(z);
  }
  return answer.empty() ? 0.0 : sum / static_cast<double>(answer.size());
}

// Seconds the engine spent on the first k tokens of a request (queue and prefill included).
double SecondsToToken(const engine::RequestMetrics& m, int32_t k) {
  double s = m.ttft_s;
  for (int32_t i = 0; i + 1 < k && i < static_cast<int32_t>(m.itl_s.size()); ++i) s += m.itl_s[i];
  return s;
}

// Time from Start to the first released event of a target.
Result<double> TimeToFirstRelease(router::Target& t, const router::GenerationSpec& spec) {
  TARMAC_ASSIGN_OR_RETURN(router::PreparedRequests p, t.Prepare(spec));
  const double t0 = NowSeconds();
  TARMAC_RETURN_IF_ERROR(t.Start(std::move(p), [] {}));
  engine::TokenEvent ev;
  double first = -1;
  bool last = false;
  while (!last) {
    bool any = false;
    while (t.Next(0, &ev)) {
      if (first < 0 && ev.token >= 0) first = NowSeconds() - t0;
      last = ev.last();
      any = true;
    }
    if (!any) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return first;
}

Json CurveJson(const router::CurvePoint& c) {
  return {{"threshold", std::isfinite(c.threshold) ? Json(c.threshold) : Json("inf")}, {"share_large", c.share_large},
          {"quality", c.quality}, {"pgr", c.pgr}, {"cost", c.cost}};
}

}  // namespace

int RunBenchRoute(const RouteArgs& a) {
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "tarmac bench route: %s\n", st.message().c_str());
    return st.code() == StatusCode::kInvalidArgument ? 2 : 1;
  };
  auto text = HeldOutText(a.text);
  if (!text.ok()) return fail(text.status());
  auto small_m = LoadModelAndTokenizer(a.small, /*quiet=*/a.json);
  if (!small_m.ok()) return fail(small_m.status());
  auto large_m = LoadModelAndTokenizer(a.large, /*quiet=*/a.json);
  if (!large_m.ok()) return fail(large_m.status());
  if (small_m->tokenizer->vocab().tokens != large_m->tokenizer->vocab().tokens)
    return fail(InvalidArgument("--small and --large have different vocabularies: the large model cannot judge the small one's answers"));
  // Prompts: random windows of the held-out text.
  tok::EncodeOptions eo;
  eo.add_special = false;
  const std::vector<int32_t> ids = large_m->tokenizer->Encode(*text, eo);
  const int64_t window = a.prompt_len;
  if (static_cast<int64_t>(ids.size()) < window + 1)
    return fail(InvalidArgument("--text: the held-out text has {} tokens, fewer than --prompt-len {}", ids.size(), window));
  std::mt19937_64 rng(a.seed);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < a.prompts; ++i) {
    const size_t start = rng() % (ids.size() - static_cast<size_t>(window));
    prompts.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(start), ids.begin() + static_cast<std::ptrdiff_t>(start + window));
  }
  auto registry = std::make_shared<metrics::Registry>();
  auto make = [&](const char* name, LoadedModel& lm, int cpu) -> Result<std::unique_ptr<router::PoolModel>> {
    engine::EngineConfig c;
    c.threads = a.threads;
    c.metrics = registry;
    c.sched.max_running = 4;
    c.kv.blocks = 4 * ((a.prompt_len + a.output_len) / c.sched.block_size + 2);
    if (a.pin) c.cpus = {cpu};
    return router::PoolModel::Create(name, lm.model.get(), lm.tokenizer.get(), c);
  };
  auto small = make("small", *small_m, 0);
  if (!small.ok()) return fail(small.status());
  auto large = make("large", *large_m, 1);
  if (!large.ok()) return fail(large.status());

  const double t_answers = NowSeconds();
  auto sa = Answers(**small, prompts, a.output_len, /*top_logprobs=*/2);
  if (!sa.ok()) return fail(sa.status());
  auto la = Answers(**large, prompts, a.output_len, 0);
  if (!la.ok()) return fail(la.status());
  const double answers_s = NowSeconds() - t_answers;

  ThreadPool pool(a.threads);
  model::SequenceRunner judge(large_m->model.get(), a.prompt_len + a.output_len + 1, &pool);
  const int32_t V = large_m->model->config().n_vocab;
  const double p_small = static_cast<double>(Params(*small_m->model)), p_large = static_cast<double>(Params(*large_m->model));
  std::vector<router::PromptOutcome> flops, cpu, margin;
  int64_t agree = 0, total = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Answer& s = (*sa)[i];
    const Answer& l = (*la)[i];
    auto qs = Judge(judge, V, prompts[i], s.tokens);
    auto ql = Judge(judge, V, prompts[i], l.tokens);
    if (!qs.ok()) return fail(qs.status());
    if (!ql.ok()) return fail(ql.status());
    const int32_t k = std::min<int32_t>(a.k, static_cast<int32_t>(s.tokens.size()));
    double mean = 0, min_margin = 1e30;
    for (int32_t t = 0; t < k; ++t) {
      mean += s.logprob[static_cast<size_t>(t)];
      min_margin = std::min(min_margin, static_cast<double>(s.margin[static_cast<size_t>(t)]));
    }
    mean /= std::max(k, 1);
    router::PromptOutcome o;
    o.q_small = *qs;
    o.q_large = *ql;
    o.confidence = mean;
    const double plen = static_cast<double>(prompts[i].size());
    o.small_full = 2 * p_small * (plen + static_cast<double>(s.tokens.size()));
    o.small_attempt = 2 * p_small * (plen + k);
    o.large = 2 * p_large * (plen + static_cast<double>(l.tokens.size()));
    flops.push_back(o);
    router::PromptOutcome c = o;
    c.small_full = s.metrics.e2e_s * a.threads;
    c.small_attempt = SecondsToToken(s.metrics, k) * a.threads;
    c.large = l.metrics.e2e_s * a.threads;
    cpu.push_back(c);
    router::PromptOutcome g = o;
    g.confidence = min_margin;
    margin.push_back(g);
    for (size_t t = 0; t < std::min(s.tokens.size(), l.tokens.size()); ++t) agree += s.tokens[t] == l.tokens[t];
    total += static_cast<int64_t>(l.tokens.size());
  }
  const router::CascadeEval ef = router::EvaluateCascade(flops), ec = router::EvaluateCascade(cpu),
                            em = router::EvaluateCascade(margin);
  router::Interval ci, ci_random, ci_margin, ci_margin_random;
  router::BootstrapApgr(flops, a.bootstrap, a.seed, &ci, &ci_random);
  router::BootstrapApgr(margin, a.bootstrap, a.seed, &ci_margin, &ci_margin_random);

  // Escalated requests through the real cascade (forced to escalate) against the large model
  // alone, alternating, on the first prompts: time to the first token the client sees.
  std::vector<double> t_cascade, t_direct;
  router::CascadeParams forced{"small", "large", a.k, 1e9, -1e9, false};
  for (int i = 0; i < a.ttft_samples && i < static_cast<int>(prompts.size()); ++i) {
    router::GenerationSpec spec;
    spec.prompts.push_back({true, "", prompts[static_cast<size_t>(i)]});
    spec.max_tokens = a.output_len;
    spec.sampling.temperature = 0.0f;
    spec.ignore_eos = true;
    spec.tenant = "ttft-" + std::to_string(i);  // fresh namespaces: no prefix is cached
    router::CascadeTarget cascade(small->get(), large->get(), forced);
    router::EngineTarget direct(large->get());
    spec.tenant += "a";
    auto tc = TimeToFirstRelease(cascade, spec);
    spec.tenant += "b";
    auto td = TimeToFirstRelease(direct, spec);
    if (!tc.ok()) return fail(tc.status());
    if (!td.ok()) return fail(td.status());
    t_cascade.push_back(*tc);
    t_direct.push_back(*td);
  }
  const Percentiles pc = Summarize(t_cascade), pd = Summarize(t_direct);

  Json j;
  j["small"] = a.small;
  j["large"] = a.large;
  j["prompts"] = a.prompts;
  j["prompt_len"] = a.prompt_len;
  j["output_len"] = a.output_len;
  j["k"] = a.k;
  j["threads"] = a.threads;
  j["signal"] = "mean logprob of the small answer's first k tokens";
  j["quality_small"] = ef.q_small;
  j["quality_large"] = ef.q_large;
  j["se_large"] = ef.se_large;
  j["token_agreement"] = total ? static_cast<double>(agree) / total : 0.0;
  j["apgr"] = ef.apgr;
  j["apgr_ci"] = {ci.lo, ci.hi};
  j["apgr_random"] = ef.apgr_random;
  j["apgr_random_ci"] = {ci_random.lo, ci_random.hi};
  j["cpt_50"] = ef.cpt50;
  j["cpt_80"] = ef.cpt80;
  {
    // The best any signal could do: escalating the largest quality gaps first.
    std::vector<size_t> oracle(flops.size());
    for (size_t i = 0; i < oracle.size(); ++i) oracle[i] = i;
    std::sort(oracle.begin(), oracle.end(), [&](size_t x, size_t y) {
      return flops[x].q_large - flops[x].q_small > flops[y].q_large - flops[y].q_small;
    });
    j["apgr_oracle"] = router::Apgr(flops, oracle);
    // And the fewest large calls that reach within one standard error of always-large.
    std::vector<router::PromptOutcome> ranked = flops;
    for (size_t r = 0; r < oracle.size(); ++r) ranked[oracle[r]].confidence = static_cast<double>(r);
    j["oracle_share_large_at_large_quality"] = router::EvaluateCascade(ranked).at_large_quality.share_large;
  }
  j["apgr_margin"] = em.apgr;
  j["apgr_margin_ci"] = {ci_margin.lo, ci_margin.hi};
  Json pgr = Json::array();
  const size_t step = std::max<size_t>(1, ef.curve.size() / 20);
  for (size_t i = 0; i < ef.curve.size(); i += step) pgr.push_back(CurveJson(ef.curve[i]));
  pgr.push_back(CurveJson(ef.curve.back()));
  j["pgr"] = pgr;
  const router::CurvePoint& at = ef.at_large_quality;
  // The same escalation set priced in CPU-seconds (the curves share their order).
  const router::CurvePoint& at_cpu = ec.curve[static_cast<size_t>(std::lround(at.share_large * static_cast<double>(prompts.size())))];
  j["at_large_quality"] = {{"share_large", at.share_large},
                           {"large_calls_saved", 1.0 - at.share_large},
                           {"quality", at.quality},
                           {"flops_saved", 1.0 - at.cost / ef.cost_large},
                           {"cpu_seconds_saved", 1.0 - at_cpu.cost / ec.cost_large}};
  j["flops_always_large"] = ef.cost_large;
  j["cpu_seconds_always_large"] = ec.cost_large;
  j["escalated_ttft_ms"] = {{"cascade_median", pc.p50 * 1e3}, {"direct_median", pd.p50 * 1e3},
                            {"ratio", pd.p50 > 0 ? pc.p50 / pd.p50 : 0.0}, {"samples", t_cascade.size()}};
  j["answers_seconds"] = answers_s;
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("cascade %s -> %s, %d held-out prompts of %d tokens, %d greedy tokens, k = %d, %d thread(s)\n",
              a.small.c_str(), a.large.c_str(), a.prompts, a.prompt_len, a.output_len, a.k, a.threads);
  std::printf("  quality (mean log-likelihood under the large model): small %.4f, large %.4f (SE %.4f); token agreement %.1f%%\n",
              ef.q_small, ef.q_large, ef.se_large, 100.0 * j["token_agreement"].get<double>());
  std::printf("  APGR %.3f [%.3f, %.3f] (random %.3f [%.3f, %.3f], oracle %.3f); by min margin %.3f; CPT(50%%) %.2f, CPT(80%%) %.2f\n",
              ef.apgr, ci.lo, ci.hi, ef.apgr_random, ci_random.lo, ci_random.hi, j["apgr_oracle"].get<double>(), em.apgr,
              ef.cpt50, ef.cpt80);
  std::printf("  within one SE of always-large: %.1f%% of calls to the large model (an oracle: %.1f%%), %.1f%% fewer FLOPs, "
              "%.1f%% fewer CPU-seconds\n",
              100 * at.share_large, 100 * j["oracle_share_large_at_large_quality"].get<double>(),
              100 * j["at_large_quality"]["flops_saved"].get<double>(),
              100 * j["at_large_quality"]["cpu_seconds_saved"].get<double>());
  std::printf("  escalated TTFT (k = %d): cascade %.2f ms vs large alone %.2f ms (median of %zu): %.2fx\n", a.k, pc.p50 * 1e3,
              pd.p50 * 1e3, t_cascade.size(), j["escalated_ttft_ms"]["ratio"].get<double>());
  std::printf("  share_large  PGR    quality\n");
  for (const Json& p : pgr)
    std::printf("  %10.2f  %5.3f  %8.4f\n", p["share_large"].get<double>(), p["pgr"].get<double>(), p["quality"].get<double>());
  return 0;
}

}  // namespace tarmac::apps

namespace tarmac::apps {

void RegisterBenchRoute(CLI::App* bench, RunFn* run) {
  auto a = std::make_shared<RouteArgs>();
  auto* cmd = bench->add_subcommand("route", "a cascade's RouteLLM metrics on held-out text, or the online argmin (--online N)");
  cmd->add_option("--small", a->small, "the small model (GGUF)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--large", a->large, "the large model, also the judge (GGUF, same vocabulary)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--text", a->text, "text file; prompts come from its last 50,000 bytes")->required()->check(CLI::ExistingFile);
  cmd->add_option("--prompts", a->prompts, "prompts (requests with --online)")->capture_default_str()->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--prompt-len", a->prompt_len, "tokens per prompt")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--output-len", a->output_len, "greedy tokens per answer")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--k", a->k, "tokens the cascade decides on")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  cmd->add_option("-t,--threads", a->threads, "threads per model")->capture_default_str()->check(CLI::Range(1, 256));
  cmd->add_option("--seed", a->seed, "prompt and bootstrap seed")->capture_default_str();
  cmd->add_option("--bootstrap", a->bootstrap, "bootstrap resamples")->capture_default_str()->check(CLI::Range(10, 1 << 20));
  cmd->add_option("--ttft-samples", a->ttft_samples, "escalated requests timed through the real cascade")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--pin", a->pin, "run the small model on CPU 0 and the large one on CPU 1");
  cmd->add_option("--online", a->online, "run the online argmin over this many requests (a load change halfway)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 24));
  cmd->add_flag("--json", a->json, "one JSON object");
  cmd->callback([a, run] { *run = [a] { return a->online > 0 ? RunBenchRouteOnline(*a) : RunBenchRoute(*a); }; });
}

}  // namespace tarmac::apps
