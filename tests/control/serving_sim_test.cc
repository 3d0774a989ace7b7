// The queueing simulation against hand-computed schedules on a constant or linear step cost,
// the step-cost curve's interpolation, and the sustainable-rate search.
#include "control/serving_sim.h"

#include <gtest/gtest.h>

#include <cmath>

#include "control/capacity_plan.h"

namespace tarmac::control {
namespace {

StepCostCurve Flat(double s) {
  StepCostCurve c;
  c.Add(1, s);
  c.Add(1000, s);
  return c;
}

TEST(StepCostCurveTest, InterpolatesExtrapolatesAndAverages) {
  StepCostCurve c;
  c.Add(1, 0.010);
  c.Add(16, 0.016);
  c.Add(16, 0.018);  // averaged: 0.017
  c.Add(64, 0.041);
  EXPECT_DOUBLE_EQ(c.Seconds(0.5), 0.010);  // never below the smallest
  EXPECT_NEAR(c.Seconds(16), 0.017, 1e-12);
  EXPECT_NEAR(c.Seconds(40), 0.029, 1e-12);
  EXPECT_NEAR(c.Seconds(128), 0.041 + 64 * 0.0005, 1e-12);  // the last slope
  // t(B) ~ 0.010 + (B - 1) x 0.031/63: compute equals the batch-1 cost at B = 0.010 / that.
  EXPECT_NEAR(c.ComputeBoundBatch(), 0.010 / (0.031 / 63), 1e-9);
  EXPECT_TRUE(std::isinf(Flat(0.01).ComputeBoundBatch()));
}

TEST(ServingSimTest, OneRequestOnAConstantStep) {
  const SimResult r = SimulateServing({{0, 100, 10}}, Flat(0.01), {});
  ASSERT_EQ(r.requests.size(), 1u);
  EXPECT_NEAR(r.requests[0].ttft_s, 0.01, 1e-12);   // the prompt in one step samples the first token
  EXPECT_NEAR(r.requests[0].e2e_s, 0.10, 1e-12);    // then nine decode steps
  EXPECT_NEAR(r.requests[0].tpot_s, 0.01, 1e-12);
  EXPECT_EQ(r.steps, 10);
  EXPECT_EQ(r.output_tokens, 10);
}

TEST(ServingSimTest, LongPromptsAreChunkedByTheBudget) {
  SimConfig c;
  c.max_batched_tokens = 64;
  const SimResult r = SimulateServing({{0, 200, 2}}, Flat(0.01), c);
  EXPECT_NEAR(r.requests[0].ttft_s, 0.04, 1e-12);  // 64 + 64 + 64 + 8
  EXPECT_NEAR(r.requests[0].e2e_s, 0.05, 1e-12);
}

TEST(ServingSimTest, ClosedLoopKeepsConcurrencyAndBatchesDecodes) {
  // Step cost grows with tokens: 1 ms + 0.1 ms per token.
  StepCostCurve curve;
  curve.Add(1, 0.0011);
  curve.Add(1001, 0.1011);
  SimConfig c;
  c.concurrency = 2;
  std::vector<SimRequest> reqs(4, SimRequest{0, 10, 5});
  const SimResult r = SimulateServing(reqs, curve, c);
  // Two at a time: a 20-token prefill step then four 2-token decode steps, twice.
  const double prefill = 0.001 + 0.0001 * 20, decode = 0.001 + 0.0001 * 2;
  EXPECT_EQ(r.steps, 10);
  EXPECT_NEAR(r.makespan_s, 2 * (prefill + 4 * decode), 1e-12);
  EXPECT_NEAR(r.requests[2].arrival_s, prefill + 4 * decode, 1e-12);  // sent when one ended
  EXPECT_NEAR(r.requests[3].ttft_s, prefill, 1e-12);
}

TEST(ServingSimTest, OpenLoopWaitsForArrivalsAndTheRunningCap) {
  SimConfig c;
  c.max_running = 1;
  const SimResult r = SimulateServing({{0, 10, 3}, {0, 10, 3}, {5, 10, 1}}, Flat(0.01), c);
  EXPECT_NEAR(r.requests[1].queue_s, 0.03, 1e-12);  // behind the first
  EXPECT_NEAR(r.requests[1].ttft_s, 0.04, 1e-12);
  EXPECT_NEAR(r.requests[2].ttft_s, 0.01, 1e-12);   // alone at t = 5
  EXPECT_NEAR(r.makespan_s, 5.01, 1e-12);
}

TEST(ServingSimTest, SustainableRateIsBelowSaturation) {
  PlanWorkload w;
  w.classes = {{"a", 1, 32, 16}};
  StepCostCurve curve;
  curve.Add(1, 0.001);
  curve.Add(64, 0.004);
  curve.Add(512, 0.05);
  SimConfig c;
  c.max_running = 16;
  const double rate = MaxSustainableRate(w, curve, c, SloTargets{});
  EXPECT_GT(rate, 0);
  // At that rate the simulation keeps up; at twice it does not.
  PlanWorkload open = w;
  open.requests = 400;
  EXPECT_GE(SimulateServing(MakeRequests(open, rate), curve, c).requests_per_s(), 0.95 * rate);
  EXPECT_LT(SimulateServing(MakeRequests(open, 2 * rate), curve, c).requests_per_s(), 0.95 * 2 * rate);
  // A tight TTFT target lowers it.
  SloTargets tight = SloTargets::FromFlags({"standard=5:100"}).value();
  EXPECT_LT(MaxSustainableRate(w, curve, c, tight), rate);
}

}  // namespace
}  // namespace tarmac::control
