#include "control/capacity_plan.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "base/check.h"
#include "tensor/kv_layout.h"

namespace tarmac::control {

double KvBytesPerTokenGqa(int64_t layers, int64_t kv_heads, int64_t head_dim, double b) {
  TARMAC_CHECK(layers >= 1 && kv_heads >= 1 && head_dim >= 1 && b > 0);
  return 2.0 * static_cast<double>(layers) * static_cast<double>(kv_heads) * static_cast<double>(head_dim) * b;
}

double KvBytesPerTokenMla(int64_t layers, int64_t kv_lora_rank, int64_t rope_dim, double b) {
  TARMAC_CHECK(layers >= 1 && kv_lora_rank >= 1 && rope_dim >= 0 && b > 0);
  return static_cast<double>(layers) * static_cast<double>(kv_lora_rank + rope_dim) * b;
}

double Int8KvBytesPerElement(int64_t head_dim, int32_t block_size) {
  TARMAC_CHECK(head_dim >= 1 && block_size >= 1);
  return 1.0 + 4.0 / (static_cast<double>(head_dim) * block_size);
}

double KvBytesPerRequest(double bytes_per_token, int64_t context, int32_t block_size) {
  TARMAC_CHECK(context >= 1 && block_size >= 1);
  const int64_t blocks = BlocksFor(context, block_size);
  return bytes_per_token * static_cast<double>(blocks * block_size);
}

int64_t RequestsThatFit(double memory_bytes, double bytes_per_request) {
  TARMAC_CHECK(bytes_per_request > 0);
  return memory_bytes <= 0 ? 0 : static_cast<int64_t>(std::floor(memory_bytes / bytes_per_request));
}

double DecodeTpotLowerBound(double weight_bytes, double bandwidth) {
  TARMAC_CHECK(bandwidth > 0);
  return weight_bytes / bandwidth;
}

double ExpectedTokensPerVerify(double a, int32_t k) {
  TARMAC_CHECK(a >= 0 && a <= 1 && k >= 0);
  if (a >= 1) return k + 1.0;
  return (1.0 - std::pow(a, k + 1)) / (1.0 - a);
}

double SpeculationSpeedup(double a, int32_t k, double c_decode, double c_draft, double c_verify, double c_overhead) {
  const double cost = c_draft + c_verify + c_overhead;
  TARMAC_CHECK(cost > 0);
  return ExpectedTokensPerVerify(a, k) * c_decode / cost;
}

double ExpectedExpertUnion(int64_t n_expert, int64_t n_used, int64_t batch) {
  TARMAC_CHECK(n_used >= 1 && n_used <= n_expert && batch >= 0);
  const double miss = 1.0 - static_cast<double>(n_used) / static_cast<double>(n_expert);
  return static_cast<double>(n_expert) * (1.0 - std::pow(miss, static_cast<double>(batch)));
}

double StepWeightBytes(double dense_bytes, double expert_bytes, int64_t n_expert, int64_t n_used,
                       int64_t batch) {
  if (n_expert == 0) return dense_bytes + expert_bytes;
  return dense_bytes + expert_bytes * ExpectedExpertUnion(n_expert, n_used, batch) / n_expert;
}

double PrefixCacheUpperBound(double repeated, double total) { return total > 0 ? std::clamp(repeated / total, 0.0, 1.0) : 0.0; }

Status PlanWorkload::Validate() const {
  if (!(rate >= 0) || !std::isfinite(rate)) return InvalidField("rate", "rate must be >= 0 requests/s, got {}", rate);
  if (rate == 0 && concurrency < 1)
    return InvalidField("concurrency", "concurrency must be >= 1 (or give a rate), got {}", concurrency);
  if (requests < 1 || requests > 1000000) return InvalidField("requests", "requests must be in [1, 1000000], got {}", requests);
  if (!(target_rate >= 0) || !std::isfinite(target_rate))
    return InvalidField("target_rate", "target_rate must be >= 0 requests/s, got {}", target_rate);
  if (classes.empty()) return InvalidField("classes", "the workload needs at least one class");
  for (size_t i = 0; i < classes.size(); ++i) {
    const WorkloadClass& c = classes[i];
    const std::string f = "classes[" + std::to_string(i) + "]";
    if (!(c.share > 0) || !std::isfinite(c.share)) return InvalidField(f + ".share", "{}.share must be > 0, got {}", f, c.share);
    if (c.prompt_tokens < 1) return InvalidField(f + ".prompt_tokens", "{}.prompt_tokens must be >= 1, got {}", f, c.prompt_tokens);
    if (c.output_tokens < 1) return InvalidField(f + ".output_tokens", "{}.output_tokens must be >= 1, got {}", f, c.output_tokens);
    if (c.acceptance > 1) return InvalidField(f + ".acceptance", "{}.acceptance must be in [0, 1], got {}", f, c.acceptance);
    if (c.shared_prefix_tokens < 0 || c.shared_prefix_tokens > c.prompt_tokens)
      return InvalidField(f + ".shared_prefix_tokens", "{}.shared_prefix_tokens must be in [0, prompt_tokens = {}], got {}", f,
                          c.prompt_tokens, c.shared_prefix_tokens);
  }
  return Status::Ok();
}

std::vector<SimRequest> MakeRequests(const PlanWorkload& w, double rate) {
  double total = 0;
  for (const WorkloadClass& c : w.classes) total += c.share;
  std::vector<SimRequest> out;
  std::vector<double> credit(w.classes.size(), 0.0);
  std::mt19937_64 rng(w.seed);
  std::exponential_distribution<double> gap(rate > 0 ? rate : 1.0);
  double t = 0;
  for (int32_t i = 0; i < w.requests; ++i) {
    // Smooth weighted round robin: the class furthest behind its share goes next.
    size_t best = 0;
    for (size_t c = 0; c < w.classes.size(); ++c) {
      credit[c] += w.classes[c].share / total;
      if (credit[c] > credit[best]) best = c;
    }
    credit[best] -= 1.0;
    SimRequest r;
    r.cls = static_cast<int32_t>(best);
    r.prompt_tokens = w.classes[best].prompt_tokens;
    r.output_tokens = w.classes[best].output_tokens;
    if (rate > 0) t += gap(rng);
    r.arrival_s = t;
    out.push_back(r);
  }
  return out;
}

std::vector<TierAttainment> Attainment(const SimResult& r, const PlanWorkload& w, const SloTargets& targets) {
  std::vector<TierAttainment> out;
  for (const TierSlo& t : targets.tiers()) {
    TierAttainment a;
    a.tier = t.name;
    for (const SimOutcome& o : r.requests) {
      if (w.classes[static_cast<size_t>(o.cls)].tier != t.name) continue;
      ++a.requests;
      if (o.ttft_s * 1e3 <= t.ttft_ms && (o.output_tokens < 2 || o.tpot_s * 1e3 <= t.tpot_ms)) ++a.met;
    }
    if (a.requests > 0) out.push_back(a);
  }
  return out;
}

double MaxSustainableRate(const PlanWorkload& w, const StepCostCurve& curve, const SimConfig& cfg,
                          const SloTargets& targets, double goal) {
  PlanWorkload open = w;
  open.requests = std::max(w.requests, 400);
  SimConfig c = cfg;
  c.concurrency = 0;
  auto sustained = [&](double rate) {
    const SimResult r = SimulateServing(MakeRequests(open, rate), curve, c);
    if (r.requests_per_s() < 0.95 * rate) return false;
    for (const TierAttainment& a : Attainment(r, open, targets))
      if (a.attainment() < goal) return false;
    return true;
  };
  // Bracket: the closed-loop saturation throughput bounds the rate from above.
  double mean_out = 0, total = 0;
  for (const WorkloadClass& k : w.classes) {
    mean_out += k.share * k.output_tokens;
    total += k.share;
  }
  mean_out /= total;
  SimConfig sat = cfg;
  sat.concurrency = cfg.max_running;
  const double hi0 = SimulateServing(MakeRequests(open, 0), curve, sat).output_tokens_per_s() / mean_out * 1.2;
  double lo = 0, hi = std::max(hi0, 1e-6);
  for (int i = 0; i < 24; ++i) {
    const double mid = (lo + hi) / 2;
    (sustained(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace tarmac::control
