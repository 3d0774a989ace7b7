#include "router/route_eval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "base/check.h"

namespace tarmac::router {
namespace {

// Prompts by confidence, least confident first (escalated first).
std::vector<size_t> ByConfidence(const std::vector<PromptOutcome>& p) {
  std::vector<size_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a].confidence < p[b].confidence; });
  return order;
}

double Mean(const std::vector<PromptOutcome>& p, double PromptOutcome::*f) {
  double s = 0;
  for (const PromptOutcome& x : p) s += x.*f;
  return s / static_cast<double>(p.size());
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t i = static_cast<size_t>(pos);
  const double f = pos - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v.back();
}

}  // namespace

double Apgr(const std::vector<PromptOutcome>& p, const std::vector<size_t>& order) {
  const double n = static_cast<double>(p.size());
  const double qs = Mean(p, &PromptOutcome::q_small), ql = Mean(p, &PromptOutcome::q_large);
  const double gap = ql - qs;
  if (std::fabs(gap) < 1e-12) return 0;
  double q = qs, prev = 0, area = 0;
  for (size_t m = 0; m < order.size(); ++m) {
    q += (p[order[m]].q_large - p[order[m]].q_small) / n;
    const double pgr = (q - qs) / gap;
    area += 0.5 * (prev + pgr) / n;  // trapezoid over share steps of 1/n
    prev = pgr;
  }
  return area;
}

CascadeEval EvaluateCascade(const std::vector<PromptOutcome>& p) {
  TARMAC_CHECK(!p.empty());
  CascadeEval e;
  const double n = static_cast<double>(p.size());
  e.q_small = Mean(p, &PromptOutcome::q_small);
  e.q_large = Mean(p, &PromptOutcome::q_large);
  double var = 0;
  for (const PromptOutcome& x : p) var += (x.q_large - e.q_large) * (x.q_large - e.q_large);
  e.se_large = p.size() > 1 ? std::sqrt(var / (n - 1)) / std::sqrt(n) : 0;
  for (const PromptOutcome& x : p) {
    e.cost_small += x.small_full;
    e.cost_large += x.large;
  }
  const std::vector<size_t> order = ByConfidence(p);
  const double gap = e.q_large - e.q_small;
  CurvePoint pt;
  pt.quality = e.q_small;
  pt.cost = e.cost_small;
  pt.threshold = p[order[0]].confidence;  // nothing below it: nothing escalates
  e.curve.push_back(pt);
  for (size_t m = 0; m < order.size(); ++m) {
    const PromptOutcome& x = p[order[m]];
    pt.quality += (x.q_large - x.q_small) / n;
    pt.cost += x.small_attempt + x.large - x.small_full;
    pt.share_large = static_cast<double>(m + 1) / n;
    pt.threshold = m + 1 < order.size() ? p[order[m + 1]].confidence : std::numeric_limits<double>::infinity();
    pt.pgr = std::fabs(gap) < 1e-12 ? 0 : (pt.quality - e.q_small) / gap;
    e.curve.push_back(pt);
  }
  e.apgr = Apgr(p, order);
  e.apgr_random = 0.5;
  bool found50 = false, found80 = false;
  for (const CurvePoint& c : e.curve) {  // in increasing share
    if (c.pgr >= 0.5 && !found50) e.cpt50 = c.share_large, found50 = true;
    if (c.pgr >= 0.8 && !found80) e.cpt80 = c.share_large, found80 = true;
  }
  e.at_large_quality = e.curve.back();
  for (const CurvePoint& c : e.curve) {
    if (c.quality >= e.q_large - e.se_large && c.cost < e.at_large_quality.cost) e.at_large_quality = c;
  }
  return e;
}

void BootstrapApgr(const std::vector<PromptOutcome>& p, int resamples, uint64_t seed, Interval* cascade, Interval* random) {
  std::mt19937_64 rng(seed);
  std::vector<double> c, r;
  std::vector<PromptOutcome> s(p.size());
  for (int b = 0; b < resamples; ++b) {
    for (PromptOutcome& x : s) x = p[rng() % p.size()];
    c.push_back(Apgr(s, ByConfidence(s)));
    std::vector<size_t> shuffled(s.size());
    std::iota(shuffled.begin(), shuffled.end(), 0);
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    r.push_back(Apgr(s, shuffled));
  }
  *cascade = {Percentile(c, 0.025), Percentile(c, 0.975)};
  *random = {Percentile(r, 0.025), Percentile(r, 0.975)};
}

}  // namespace tarmac::router
