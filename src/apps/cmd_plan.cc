// `tarmac plan -m MODEL [--draft D] [--workload W.yaml] [--slo ...] [--memory GiB] [--measure]
// [--json]`: sizes a deployment before it is bought (control/capacity_plan.h has the
// formulas). From the model's shape alone: KV bytes per token and per request (f16 and int8;
// the latent form for MLA architectures, even those tarmac does not run), how many requests
// of each context fit the memory, the weight bytes and the batching curve (weight bytes per
// token at batch B). With a bandwidth (--measure or --bandwidth-gbs): the decode TPOT lower
// bound. With --measure (this machine probed in under 30 s, plan_probe.h): the step-cost
// curve, where decode turns compute-bound, and the workload's predicted throughput, TTFT and
// TPOT (queueing simulation), SLO attainment per tier, the largest sustainable rate and the
// replicas a target rate needs, and whether speculation pays per class.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/control_flags.h"
#include "apps/engine_flags.h"
#include "apps/model_loading.h"
#include "apps/percentiles.h"
#include "apps/plan_probe.h"
#include "apps/plan_workload.h"
#include "control/capacity_plan.h"
#include "gguf/gguf_file.h"
#include "kv/kv_budget.h"

namespace tarmac::apps {
namespace {

using Json = nlohmann::ordered_json;

struct PlanArgs {
  std::string model, draft, workload;
  ControlFlags control;  // --slo
  EngineFlags engine;
  double memory_gib = 0;      // KV budget; 0: half the available memory (the engine's default)
  double bandwidth_gbs = 0;   // stated instead of measured
  bool measure = false, json = false;
  int spec_k = 4;             // longest draft considered
  // The default workload (no --workload): one class.
  int concurrency = 16, requests = 64, prompt_len = 128, output_len = 128;
  double rate = 0, target_rate = 0, acceptance = -1;
};

// The attention shape from GGUF metadata, for any architecture (MLA included).
struct Shape {
  std::string arch;
  int64_t layers = 0, heads = 0, kv_heads = 0, head_dim = 0, embd = 0, context = 0;
  int64_t kv_lora_rank = 0, rope_dim = 0;  // MLA (deepseek2): > 0
  int64_t params = 0;
  double weight_bytes = 0;
  // Mixture of experts (expert_count > 0): the stacked expert tensors (*_exps) hold
  // expert_bytes / expert_params of it; a token reads expert_used of expert_count.
  int64_t experts = 0, experts_used = 0;
  double expert_bytes = 0;
  int64_t expert_params = 0;
  double lookup_bytes = 0;  // an untied token_embd: a step reads one row of it

  // What a step of `batch` decode tokens reads (capacity_plan.h's StepWeightBytes).
  double StepBytes(int64_t batch) const {
    return control::StepWeightBytes(weight_bytes - expert_bytes - lookup_bytes, expert_bytes,
                                    experts, experts_used, batch);
  }
  int64_t ActiveParams() const {
    return experts == 0 ? params : params - expert_params + expert_params * experts_used / experts;
  }
};

Result<Shape> ReadShape(const gguf::File& f) {
  Shape s;
  TARMAC_ASSIGN_OR_RETURN(s.arch, f.GetString("general.architecture"));
  const std::string a = s.arch + ".";
  TARMAC_ASSIGN_OR_RETURN(uint64_t layers, f.GetUint(a + "block_count"));
  TARMAC_ASSIGN_OR_RETURN(uint64_t heads, f.GetUint(a + "attention.head_count"));
  TARMAC_ASSIGN_OR_RETURN(uint64_t embd, f.GetUint(a + "embedding_length"));
  TARMAC_ASSIGN_OR_RETURN(uint64_t kv_heads, f.GetUintOr(a + "attention.head_count_kv", heads));
  TARMAC_ASSIGN_OR_RETURN(uint64_t key_len, f.GetUintOr(a + "attention.key_length", heads ? embd / heads : 0));
  TARMAC_ASSIGN_OR_RETURN(uint64_t ctx, f.GetUintOr(a + "context_length", 0));
  TARMAC_ASSIGN_OR_RETURN(uint64_t lora, f.GetUintOr(a + "attention.kv_lora_rank", 0));
  TARMAC_ASSIGN_OR_RETURN(uint64_t rope, f.GetUintOr(a + "rope.dimension_count", 0));
  if (layers == 0 || heads == 0 || kv_heads == 0 || key_len == 0)
    return InvalidField("--model", "{}: block_count, head counts and key length must be > 0", f.path());
  s.layers = static_cast<int64_t>(layers);
  s.heads = static_cast<int64_t>(heads);
  s.kv_heads = static_cast<int64_t>(kv_heads);
  s.head_dim = static_cast<int64_t>(key_len);
  s.embd = static_cast<int64_t>(embd);
  s.context = static_cast<int64_t>(ctx);
  s.kv_lora_rank = static_cast<int64_t>(lora);
  s.rope_dim = lora > 0 ? static_cast<int64_t>(rope) : 0;
  s.params = f.parameter_count();
  s.weight_bytes = static_cast<double>(f.tensor_bytes());
  TARMAC_ASSIGN_OR_RETURN(uint64_t experts, f.GetUintOr(a + "expert_count", 0));
  TARMAC_ASSIGN_OR_RETURN(uint64_t used, f.GetUintOr(a + "expert_used_count", 0));
  if (experts > 0 && (used == 0 || used > experts))
    return InvalidField("--model", "{}: {}expert_used_count {} must be in [1, expert_count {}]",
                        f.path(), a, used, experts);
  s.experts = static_cast<int64_t>(experts);
  s.experts_used = static_cast<int64_t>(used);
  const bool tied = f.FindTensor("output.weight") == nullptr;
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (experts > 0 && t.name.find("_exps.") != std::string::npos) {
      s.expert_bytes += static_cast<double>(t.nbytes);
      s.expert_params += t.num_elements();
    }
    if (!tied && t.name == "token_embd.weight") s.lookup_bytes = static_cast<double>(t.nbytes);
  }
  return s;
}

Json KvJson(const Shape& s, int32_t block, double memory, const control::PlanWorkload& w) {
  const bool mla = s.kv_lora_rank > 0;
  const int64_t elem_dim = mla ? s.kv_lora_rank + s.rope_dim : s.head_dim;
  const double f16 = mla ? control::KvBytesPerTokenMla(s.layers, s.kv_lora_rank, s.rope_dim, 2.0)
                         : control::KvBytesPerTokenGqa(s.layers, s.kv_heads, s.head_dim, 2.0);
  const double i8b = control::Int8KvBytesPerElement(elem_dim, block);
  const double int8 = mla ? control::KvBytesPerTokenMla(s.layers, s.kv_lora_rank, s.rope_dim, i8b)
                          : control::KvBytesPerTokenGqa(s.layers, s.kv_heads, s.head_dim, i8b);
  std::vector<int64_t> contexts = {512, 2048, 8192, 32768};
  for (const control::WorkloadClass& c : w.classes) contexts.push_back(c.prompt_tokens + c.output_tokens);
  if (s.context > 0) contexts.push_back(s.context);
  std::sort(contexts.begin(), contexts.end());
  contexts.erase(std::unique(contexts.begin(), contexts.end()), contexts.end());
  Json fits = Json::array();
  for (int64_t c : contexts) {
    if (s.context > 0 && c > s.context) continue;
    const double rf = control::KvBytesPerRequest(f16, c, block), ri = control::KvBytesPerRequest(int8, c, block);
    fits.push_back({{"context", c}, {"f16_bytes_per_request", rf}, {"int8_bytes_per_request", ri},
                    {"f16_requests_fit", control::RequestsThatFit(memory, rf)},
                    {"int8_requests_fit", control::RequestsThatFit(memory, ri)}});
  }
  return {{"form", mla ? "mla_latent" : "gqa"},
          {"formula", mla ? "layers x (kv_lora_rank + rope_dim) x bytes" : "2 x layers x kv_heads x head_dim x bytes"},
          {"f16_bytes_per_token", f16}, {"int8_bytes_per_token", int8}, {"memory_bytes", memory}, {"by_context", fits}};
}

Json DecodeJson(const Shape& s, double bandwidth, const control::StepCostCurve* curve) {
  Json j = {{"weight_bytes", s.weight_bytes}, {"step_weight_bytes", s.StepBytes(1)},
            {"bandwidth_bytes_per_s", bandwidth > 0 ? Json(bandwidth) : Json(nullptr)}};
  j["tpot_lower_bound_ms"] = bandwidth > 0 ? Json(control::DecodeTpotLowerBound(s.StepBytes(1), bandwidth) * 1e3) : Json(nullptr);
  Json batching = Json::array();
  for (int b : {1, 2, 4, 8, 16, 32, 64}) {
    Json e = {{"batch", b}, {"weight_bytes_per_token", s.StepBytes(b) / b}};
    if (s.experts > 0) e["experts_read_per_layer"] = control::ExpectedExpertUnion(s.experts, s.experts_used, b);
    if (curve) {
      const double t = curve->Seconds(b);
      e["step_ms"] = t * 1e3;
      e["tokens_per_s"] = b / t;
    }
    batching.push_back(e);
  }
  j["batching"] = batching;
  if (curve) {
    const double bstar = curve->ComputeBoundBatch();
    j["compute_bound_from_batch"] = std::isfinite(bstar) ? Json(bstar) : Json(nullptr);
    Json pts = Json::array();
    for (const auto& [n, t] : curve->points()) pts.push_back({{"tokens", n}, {"step_ms", t * 1e3}});
    j["step_cost_curve"] = pts;
  }
  return j;
}

Json LatencyJson(std::vector<double> v) {
  const Percentiles p = Summarize(std::move(v));
  return {{"p50", p.p50 * 1e3}, {"p95", p.p95 * 1e3}, {"p99", p.p99 * 1e3}, {"mean", p.mean * 1e3}};
}

Json PredictJson(const control::PlanWorkload& w, const control::StepCostCurve& curve, const control::SimConfig& cfg,
                 const control::SloTargets& targets) {
  control::SimConfig c = cfg;
  c.concurrency = w.rate > 0 ? 0 : w.concurrency;
  const control::SimResult r = control::SimulateServing(control::MakeRequests(w, w.rate), curve, c);
  std::vector<double> ttft, tpot, e2e;
  for (const control::SimOutcome& o : r.requests) {
    ttft.push_back(o.ttft_s);
    e2e.push_back(o.e2e_s);
    if (o.output_tokens > 1) tpot.push_back(o.tpot_s);
  }
  Json tiers = Json::array();
  for (const control::TierAttainment& a : control::Attainment(r, w, targets))
    tiers.push_back({{"tier", a.tier}, {"requests", a.requests}, {"attainment", a.attainment()}});
  const double max_rate = control::MaxSustainableRate(w, curve, cfg, targets);
  Json j = {{"load", w.rate > 0 ? Json{{"rate", w.rate}} : Json{{"concurrency", w.concurrency}}},
            {"requests", w.requests},
            {"batch1_decode_tpot_ms", curve.Seconds(1) * 1e3},
            {"output_tokens_per_s", r.output_tokens_per_s()},
            {"requests_per_s", r.requests_per_s()},
            {"ttft_ms", LatencyJson(ttft)},
            {"tpot_ms", LatencyJson(tpot)},
            {"e2e_ms", LatencyJson(e2e)},
            {"slo_attainment", tiers},
            {"max_sustainable_rate", max_rate}};
  if (w.target_rate > 0)
    j["replicas_for_target_rate"] = max_rate > 0 ? Json(static_cast<int64_t>(std::ceil(w.target_rate / max_rate))) : Json(nullptr);
  return j;
}

// Whether speculation pays per class, at the batch the workload runs (its concurrency, or
// the running cap open loop): the best k in 1..max_k and its predicted speedup.
Json SpeculationJson(const control::PlanWorkload& w, const control::StepCostCurve& target,
                     const control::StepCostCurve* draft, int max_k, double batch) {
  Json out = Json::array();
  for (const control::WorkloadClass& c : w.classes) {
    Json e = {{"class", c.name}, {"acceptance", c.acceptance >= 0 ? Json(c.acceptance) : Json(nullptr)}};
    if (c.acceptance < 0 || draft == nullptr) {
      e["pays"] = nullptr;
      e["why"] = draft == nullptr ? "no draft model measured (--draft with --measure)" : "no stated acceptance (workload acceptance:)";
      out.push_back(e);
      continue;
    }
    const double c_decode = target.Seconds(batch);
    int best_k = 0;
    double best = 1.0;
    for (int k = 1; k <= max_k; ++k) {
      // Overhead (sampling, verification bookkeeping) is not measured apart: 0, so this is an
      // upper bound of the speedup.
      const double s = control::SpeculationSpeedup(c.acceptance, k, c_decode, k * draft->Seconds(batch),
                                                   target.Seconds(batch * (1 + k)), 0.0);
      if (s > best) {
        best = s;
        best_k = k;
      }
    }
    e["best_k"] = best_k;
    e["speedup"] = best;
    e["pays"] = best_k > 0;
    out.push_back(e);
  }
  return out;
}

Json PrefixJson(const control::PlanWorkload& w) {
  double repeated = 0, total = 0;
  for (const control::WorkloadClass& c : w.classes) {
    repeated += c.share * c.shared_prefix_tokens;
    total += c.share * c.prompt_tokens;
  }
  return {{"upper_bound_saved_fraction", control::PrefixCacheUpperBound(repeated, total)}};
}

int32_t MeanContext(const control::PlanWorkload& w) {
  double ctx = 0, total = 0;
  for (const control::WorkloadClass& c : w.classes) {
    ctx += c.share * (c.prompt_tokens + c.output_tokens / 2.0);
    total += c.share;
  }
  return std::max<int32_t>(16, static_cast<int32_t>(std::lround(ctx / total)));
}

std::string Fmt(const Json& j, const char* spec = "{:.2f}") {
  return j.is_number() ? fmt::format(fmt::runtime(spec), j.get<double>()) : "-";
}

void PrintText(const Json& j) {
  const Json& m = j["model"];
  std::printf("model %s (%s): %s layers, %s heads (%s KV) x %s, %.0fM parameters, %.1f MiB of weights\n",
              m["file"].get<std::string>().c_str(), m["arch"].get<std::string>().c_str(), Fmt(m["layers"], "{:.0f}").c_str(),
              Fmt(m["heads"], "{:.0f}").c_str(), Fmt(m["kv_heads"], "{:.0f}").c_str(), Fmt(m["head_dim"], "{:.0f}").c_str(),
              m["params"].get<double>() / 1e6, m["weight_bytes"].get<double>() / 1048576.0);
  if (m.contains("moe")) {
    const Json& e = m["moe"];
    std::printf("mixture of experts: %s of %s experts per token, %.0fM active parameters, %.1f MiB of "
                "the weights in experts\n",
                Fmt(e["experts_used"], "{:.0f}").c_str(), Fmt(e["experts"], "{:.0f}").c_str(),
                e["active_params"].get<double>() / 1e6, e["expert_bytes"].get<double>() / 1048576.0);
  }
  const Json& kv = j["kv"];
  std::printf("KV (%s: %s): %.1f KiB/token f16, %.1f KiB/token int8; memory budget %.2f GiB\n",
              kv["form"].get<std::string>().c_str(), kv["formula"].get<std::string>().c_str(),
              kv["f16_bytes_per_token"].get<double>() / 1024, kv["int8_bytes_per_token"].get<double>() / 1024,
              kv["memory_bytes"].get<double>() / (1 << 30));
  std::printf("  %-9s %14s %14s %12s %12s\n", "context", "f16 MiB/req", "int8 MiB/req", "f16 fit", "int8 fit");
  for (const Json& c : kv["by_context"])
    std::printf("  %-9s %14.2f %14.2f %12s %12s\n", Fmt(c["context"], "{:.0f}").c_str(),
                c["f16_bytes_per_request"].get<double>() / 1048576.0, c["int8_bytes_per_request"].get<double>() / 1048576.0,
                Fmt(c["f16_requests_fit"], "{:.0f}").c_str(), Fmt(c["int8_requests_fit"], "{:.0f}").c_str());
  const Json& d = j["decode"];
  std::printf("decode: bandwidth %s GB/s, TPOT >= %s ms at batch 1 (weights a step reads / bandwidth); compute-bound from batch %s\n",
              d["bandwidth_bytes_per_s"].is_number() ? Fmt(d["bandwidth_bytes_per_s"].get<double>() / 1e9).c_str() : "-",
              Fmt(d["tpot_lower_bound_ms"], "{:.3f}").c_str(), Fmt(d.value("compute_bound_from_batch", Json()), "{:.1f}").c_str());
  std::printf("  %-6s %18s %12s %12s %14s\n", "batch", "weight MiB/token", "step ms", "tokens/s", "experts/layer");
  for (const Json& b : d["batching"])
    std::printf("  %-6s %18.3f %12s %12s %14s\n", Fmt(b["batch"], "{:.0f}").c_str(), b["weight_bytes_per_token"].get<double>() / 1048576.0,
                Fmt(b.value("step_ms", Json()), "{:.3f}").c_str(), Fmt(b.value("tokens_per_s", Json()), "{:.1f}").c_str(),
                Fmt(b.value("experts_read_per_layer", Json()), "{:.1f}").c_str());
  if (j.contains("predicted")) {
    const Json& p = j["predicted"];
    std::printf("predicted (%s, %s requests): batch-1 TPOT %s ms; %s output tok/s, %s req/s; TTFT p50/p99 %s/%s ms; "
                "TPOT p50/p99 %s/%s ms; sustains up to %s req/s\n",
                p["load"].dump().c_str(), Fmt(p["requests"], "{:.0f}").c_str(), Fmt(p["batch1_decode_tpot_ms"], "{:.3f}").c_str(),
                Fmt(p["output_tokens_per_s"], "{:.1f}").c_str(), Fmt(p["requests_per_s"]).c_str(),
                Fmt(p["ttft_ms"]["p50"], "{:.1f}").c_str(), Fmt(p["ttft_ms"]["p99"], "{:.1f}").c_str(),
                Fmt(p["tpot_ms"]["p50"], "{:.2f}").c_str(), Fmt(p["tpot_ms"]["p99"], "{:.2f}").c_str(),
                Fmt(p["max_sustainable_rate"]).c_str());
    for (const Json& t : p["slo_attainment"])
      std::printf("  tier %s: %.1f%% of %s requests within its SLO\n", t["tier"].get<std::string>().c_str(),
                  100 * t["attainment"].get<double>(), Fmt(t["requests"], "{:.0f}").c_str());
    if (p.contains("replicas_for_target_rate"))
      std::printf("  replicas for %s req/s: %s\n", Fmt(j["workload"]["target_rate"]).c_str(), Fmt(p["replicas_for_target_rate"], "{:.0f}").c_str());
  } else {
    std::printf("predictions: run with --measure (they need this machine's step costs)\n");
  }
  for (const Json& s : j["speculation"])
    std::printf("speculation, class %s: %s\n", s["class"].get<std::string>().c_str(),
                s["pays"].is_null() ? s["why"].get<std::string>().c_str()
                                    : fmt::format("acceptance {:.2f}: best k {} predicts {:.2f}x ({})", s["acceptance"].get<double>(),
                                                  s["best_k"].get<int>(), s["speedup"].get<double>(),
                                                  s["pays"].get<bool>() ? "pays" : "does not pay").c_str());
  std::printf("prefix caching saves at most %.1f%% of prefill\n", 100 * j["prefix_cache"]["upper_bound_saved_fraction"].get<double>());
  if (j.contains("probe"))
    std::printf("(probed in %.1f s%s)\n", j["probe"]["seconds"].get<double>(), j["probe"]["truncated"].get<bool>() ? ", truncated" : "");
}

Result<control::PlanWorkload> Workload(const PlanArgs& a) {
  if (!a.workload.empty()) return LoadPlanWorkload(a.workload);
  control::PlanWorkload w;
  w.rate = a.rate;
  w.concurrency = a.concurrency;
  w.requests = a.requests;
  w.target_rate = a.target_rate;
  w.classes[0].prompt_tokens = a.prompt_len;
  w.classes[0].output_tokens = a.output_len;
  w.classes[0].acceptance = a.acceptance;
  TARMAC_RETURN_IF_ERROR(w.Validate());
  return w;
}

int RunPlan(const PlanArgs& a) {
  auto fail = [](const Status& st, int code) {
    std::fprintf(stderr, "tarmac plan: %s\n", st.message().c_str());
    return code;
  };
  auto w = Workload(a);
  if (!w.ok()) return fail(w.status(), 2);
  auto targets = SloTargetsFrom(a.control);
  if (!targets.ok()) return fail(targets.status(), 2);
  auto file = gguf::File::Open(a.model);
  if (!file.ok()) return fail(file.status(), 2);
  auto shape = ReadShape(*file);
  if (!shape.ok()) return fail(shape.status(), 2);
  double memory = a.memory_gib * (1ll << 30);
  if (memory <= 0) {
    auto avail = kv::AvailableMemoryBytes();
    memory = avail.ok() ? *avail / 2.0 : 0;
  }
  Json j;
  j["model"] = {{"file", a.model}, {"arch", shape->arch}, {"layers", shape->layers}, {"heads", shape->heads},
                {"kv_heads", shape->kv_heads}, {"head_dim", shape->head_dim}, {"context", shape->context},
                {"params", static_cast<double>(shape->params)}, {"weight_bytes", shape->weight_bytes}};
  if (shape->experts > 0) {
    j["model"]["moe"] = {{"experts", shape->experts}, {"experts_used", shape->experts_used},
                         {"expert_bytes", shape->expert_bytes},
                         {"active_params", static_cast<double>(shape->ActiveParams())}};
  }
  j["workload"] = {{"rate", w->rate}, {"concurrency", w->concurrency}, {"requests", w->requests},
                   {"target_rate", w->target_rate}, {"classes", w->classes.size()}};
  j["kv"] = KvJson(*shape, a.engine.block_size, memory, *w);
  double bandwidth = a.bandwidth_gbs * 1e9;
  std::unique_ptr<control::StepCostCurve> curve, draft_curve;
  if (a.measure) {
    auto loaded = LoadModelAndTokenizer(a.model, /*quiet=*/true);
    if (!loaded.ok()) return fail(loaded.status(), 2);
    if (bandwidth <= 0) {
      ThreadPool readers(a.engine.threads);
      bandwidth = MeasureReadBandwidth(static_cast<int64_t>(shape->StepBytes(1)), &readers);
    }
    engine::EngineConfig cfg = ToEngineConfig(a.engine, SpecSetup{});
    StepProbe probe;
    probe.context = MeanContext(*w);
    const int32_t batch = w->rate > 0 ? a.engine.max_running : w->concurrency;
    probe.batches.clear();
    for (int32_t b = 1; b <= std::max(batch, 1); b *= 2) probe.batches.push_back(b);
    if (probe.batches.back() != batch && batch > 1) probe.batches.push_back(batch);
    probe.prefills = {std::min(128, cfg.sched.max_batched_tokens), cfg.sched.max_batched_tokens};
    probe.budget_s = a.draft.empty() ? 25 : 20;
    auto res = MeasureStepCosts(loaded->model.get(), loaded->tokenizer.get(), cfg, probe);
    if (!res.ok()) return fail(res.status(), 1);
    curve = std::make_unique<control::StepCostCurve>(res->curve);
    j["probe"] = {{"seconds", res->seconds}, {"truncated", res->truncated}, {"rounds", res->rounds},
                  {"context", probe.context}};
    if (!a.draft.empty()) {
      auto dl = LoadModelAndTokenizer(a.draft, /*quiet=*/true);
      if (!dl.ok()) return fail(dl.status(), 2);
      StepProbe dp = probe;
      dp.prefills = {};
      dp.budget_s = 4;
      auto dres = MeasureStepCosts(dl->model.get(), dl->tokenizer.get(), cfg, dp);
      if (!dres.ok()) return fail(dres.status(), 1);
      draft_curve = std::make_unique<control::StepCostCurve>(dres->curve);
    }
  }
  j["decode"] = DecodeJson(*shape, bandwidth, curve.get());
  if (curve) {
    control::SimConfig sc;
    sc.max_batched_tokens = a.engine.max_batched_tokens;
    sc.max_running = w->rate > 0 || (a.engine.max_running_option && a.engine.max_running_option->count() > 0)
                         ? a.engine.max_running : w->concurrency;
    j["predicted"] = PredictJson(*w, *curve, sc, *targets);
    const double batch = w->rate > 0 ? sc.max_running : w->concurrency;
    j["speculation"] = SpeculationJson(*w, *curve, draft_curve.get(), a.spec_k, std::max(1.0, batch));
  } else {
    j["speculation"] = Json::array();
  }
  j["prefix_cache"] = PrefixJson(*w);
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    PrintText(j);
  }
  return 0;
}

}  // namespace

void RegisterPlan(CLI::App& app, RunFn* run) {
  auto a = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand("plan", "size a deployment: KV per request, TPOT bounds, predicted throughput and SLOs");
  cmd->add_option("-m,--model", a->model, "GGUF model file (any architecture for the formulas)")->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--draft", a->draft, "draft GGUF (speculation: its measured step cost)")->check(CLI::ExistingFile);
  cmd->add_option("--workload", a->workload, "workload YAML (rate or concurrency, classes with lengths, tiers, acceptance)")
      ->check(CLI::ExistingFile);
  AddSloFlag(cmd, &a->control);
  AddEngineFlags(cmd, &a->engine, kSchedulerFlags);
  cmd->add_option("--memory", a->memory_gib, "KV memory budget in GiB (0: half the available memory)")
      ->capture_default_str()->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--bandwidth-gbs", a->bandwidth_gbs, "memory bandwidth in GB/s (instead of measuring it)")
      ->check(CLI::Range(0.001, 1e6));
  cmd->add_flag("--measure", a->measure, "probe this machine (bandwidth, step costs) in under 30 s; enables the predictions");
  cmd->add_flag("--json", a->json, "one JSON object");
  cmd->add_option("--spec-k", a->spec_k, "longest draft considered")->capture_default_str()->check(CLI::Range(1, 16));
  auto* no_wl = cmd->add_option("--concurrency", a->concurrency, "default workload: clients (closed loop)")
                    ->capture_default_str()->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--requests", a->requests, "default workload: requests simulated")->capture_default_str()
      ->check(CLI::Range(1, 1000000))->excludes("--workload");
  cmd->add_option("--prompt-len", a->prompt_len, "default workload: prompt tokens")->capture_default_str()
      ->check(CLI::Range(1, 1 << 20))->excludes("--workload");
  cmd->add_option("--output-len", a->output_len, "default workload: output tokens")->capture_default_str()
      ->check(CLI::Range(1, 1 << 20))->excludes("--workload");
  cmd->add_option("--rate", a->rate, "default workload: Poisson arrivals per second (open loop)")
      ->check(CLI::Range(0.0, 1e9))->excludes("--workload");
  cmd->add_option("--target-rate", a->target_rate, "default workload: requests/s to size replicas for")
      ->check(CLI::Range(0.0, 1e9))->excludes("--workload");
  cmd->add_option("--acceptance", a->acceptance, "default workload: stated draft acceptance per position")
      ->check(CLI::Range(0.0, 1.0))->excludes("--workload");
  no_wl->excludes("--workload");
  cmd->callback([a, run] { *run = [a] { return RunPlan(*a); }; });
}

}  // namespace tarmac::apps
