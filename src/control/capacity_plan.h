// The capacity planner's formulas (`tarmac plan`): KV memory per token and per request from a
// model's shape, how many requests fit a memory budget, the decode TPOT lower bound and the
// batching curve from the weight bytes and memory bandwidth, where decode turns compute-bound,
// whether speculation pays, the prefix cache's upper bound, and predictions from a workload
// through the queueing simulation (serving_sim.h) over a measured step-cost curve.
//
//   KV bytes / token, grouped-query attention: 2 (K and V) x layers x kv_heads x head_dim x b
//   KV bytes / token, multi-head latent attention (DeepSeek-V2/V3): the cache holds the
//     compressed latent c_KV (kv_lora_rank) and the decoupled RoPE key (rope_dim) per layer:
//     layers x (kv_lora_rank + rope_dim) x b
//   b: 2 for f16; int8 stores 1 byte per element plus an f32 scale per (block, head), so
//     1 + 4 / (block_size x head_dim)
//   decode TPOT at batch 1 >= weight bytes / bandwidth; at batch B each token's share of the
//     weight read is weight bytes / B
//   mixture of experts (n_used of n_expert per token): a step reads the dense part plus the
//     experts its tokens chose; B tokens choosing independently and uniformly touch
//     n_expert x (1 - (1 - n_used / n_expert)^B) experts per layer on average, so a step's
//     bytes grow with B until every expert is read (the batching curve of an MoE is not a
//     dense model's: at batch 1 it reads n_used / n_expert of the experts)
//   speculation: speedup ~ E[A] x C_decode / (C_draft + C_verify + C_overhead),
//     E[A] = (1 - a^(k+1)) / (1 - a) tokens per verification at per-position acceptance a
//   prefix caching saves at most repeated prefill / total prefill
//
// Plain functions and values; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "control/serving_sim.h"
#include "control/slo_targets.h"
#include "control/step_cost.h"

namespace tarmac::control {

// Preconditions (asserted): counts >= 1, bytes > 0.
double KvBytesPerTokenGqa(int64_t layers, int64_t kv_heads, int64_t head_dim, double bytes_per_element);
double KvBytesPerTokenMla(int64_t layers, int64_t kv_lora_rank, int64_t rope_dim, double bytes_per_element);
// Bytes per element of tarmac's int8 KV (the scales included).
double Int8KvBytesPerElement(int64_t head_dim, int32_t block_size);
// A request of `context` tokens holds whole blocks.
double KvBytesPerRequest(double bytes_per_token, int64_t context, int32_t block_size);
int64_t RequestsThatFit(double memory_bytes, double bytes_per_request);
// Seconds; bandwidth in bytes/s.
double DecodeTpotLowerBound(double weight_bytes, double bandwidth);
// Expected experts per layer that `batch` tokens touch. Preconditions: 1 <= n_used <= n_expert,
// batch >= 0.
double ExpectedExpertUnion(int64_t n_expert, int64_t n_used, int64_t batch);
// Weight bytes a step of `batch` decode tokens reads: dense_bytes (everything a token reads
// besides the experts) + the expected union's share of expert_bytes (all experts, all layers).
// n_expert 0: a dense model (dense_bytes + expert_bytes).
double StepWeightBytes(double dense_bytes, double expert_bytes, int64_t n_expert, int64_t n_used,
                       int64_t batch);
// E[A]: tokens per verification with k drafts at per-position acceptance a in [0, 1].
double ExpectedTokensPerVerify(double a, int32_t k);
double SpeculationSpeedup(double a, int32_t k, double c_decode, double c_draft, double c_verify, double c_overhead);
double PrefixCacheUpperBound(double repeated_prefill_tokens, double total_prefill_tokens);

// A workload for the predictions: a length mix of classes, arriving open loop at `rate`
// requests/s (Poisson) or closed loop with `concurrency` clients.
struct WorkloadClass {
  std::string name = "default";
  double share = 1;             // relative frequency, > 0
  int32_t prompt_tokens = 128;  // >= 1
  int32_t output_tokens = 128;  // >= 1
  std::string tier = "standard";
  double acceptance = -1;       // stated per-position draft acceptance in [0, 1]; < 0: unknown
  int32_t shared_prefix_tokens = 0;  // of the prompt, the same for every request of the class
};

struct PlanWorkload {
  double rate = 0;          // > 0: open loop
  int32_t concurrency = 16; // closed loop when rate == 0
  int32_t requests = 64;
  double target_rate = 0;   // requests/s the deployment must serve (replicas); 0: not asked
  uint64_t seed = 1;
  std::vector<WorkloadClass> classes = {WorkloadClass{}};
  // Errors name the field ("classes[1].share").
  Status Validate() const;
};

// The workload's requests: classes interleaved by share (deterministic), Poisson arrivals
// (seeded) when open loop.
std::vector<SimRequest> MakeRequests(const PlanWorkload& w, double rate);

struct TierAttainment {
  std::string tier;
  int64_t requests = 0, met = 0;
  double attainment() const { return requests ? static_cast<double>(met) / requests : 0; }
};
// Per tier with targets: requests whose TTFT and TPOT are within them.
std::vector<TierAttainment> Attainment(const SimResult& r, const PlanWorkload& w, const SloTargets& targets);

// The largest open-loop rate one engine sustains: the simulated request rate stays within 5%
// of the offered one, and (with targets) every tier's attainment is at least `goal`. Binary
// search; 0 when not even a trickle is sustained.
double MaxSustainableRate(const PlanWorkload& w, const StepCostCurve& curve, const SimConfig& cfg,
                          const SloTargets& targets, double goal = 0.99);

}  // namespace tarmac::control
