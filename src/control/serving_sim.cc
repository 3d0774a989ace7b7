#include "control/serving_sim.h"

#include <algorithm>
#include <deque>

#include "base/check.h"

namespace tarmac::control {
namespace {

struct Live {
  size_t index;
  int32_t computed = 0;  // prompt tokens computed
  int32_t produced = 0;  // output tokens
  double first_sched = -1, first_token = -1;
};

}  // namespace

SimResult SimulateServing(const std::vector<SimRequest>& requests, const StepCostCurve& curve, const SimConfig& config) {
  TARMAC_CHECK(!curve.empty() && config.max_batched_tokens >= 1 && config.max_running >= 1 && config.concurrency >= 0);
  SimResult res;
  res.requests.resize(requests.size());
  const bool closed = config.concurrency > 0;
  // Arrival order (open loop: by time; closed: the first `concurrency` at 0, the rest as
  // earlier ones finish).
  std::vector<size_t> order(requests.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (!closed)
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return requests[a].arrival_s < requests[b].arrival_s; });
  std::vector<double> arrival(requests.size(), 0.0);
  size_t next = 0;          // next in `order` not yet arrived
  std::deque<size_t> waiting;
  std::vector<Live> running;
  double now = 0;
  auto arrive_until = [&](double t) {
    while (next < order.size() && !closed && requests[order[next]].arrival_s <= t) {
      arrival[order[next]] = requests[order[next]].arrival_s;
      waiting.push_back(order[next++]);
    }
  };
  if (closed) {
    for (; next < order.size() && next < static_cast<size_t>(config.concurrency); ++next) waiting.push_back(order[next]);
  } else if (!order.empty()) {
    now = requests[order[0]].arrival_s;
  }
  const double start = now;
  size_t done = 0;
  while (done < requests.size()) {
    arrive_until(now);
    // Build one step: decodes, running prefills, then admissions.
    int32_t budget = config.max_batched_tokens, tokens = 0;
    std::vector<std::pair<size_t, int32_t>> work;  // (running index, prompt tokens this step; 0: a decode)
    for (size_t i = 0; i < running.size() && budget > 0; ++i) {
      if (running[i].computed == requests[running[i].index].prompt_tokens) {
        work.emplace_back(i, 0);
        --budget;
        ++tokens;
      }
    }
    for (size_t i = 0; i < running.size() && budget > 0; ++i) {
      const int32_t left = requests[running[i].index].prompt_tokens - running[i].computed;
      if (left <= 0) continue;
      const int32_t n = std::min(left, budget);
      work.emplace_back(i, n);
      budget -= n;
      tokens += n;
    }
    while (budget > 0 && !waiting.empty() && static_cast<int32_t>(running.size()) < config.max_running) {
      running.push_back({waiting.front()});
      waiting.pop_front();
      const int32_t n = std::min(requests[running.back().index].prompt_tokens, budget);
      work.emplace_back(running.size() - 1, n);
      budget -= n;
      tokens += n;
    }
    if (work.empty()) {  // idle until the next arrival
      TARMAC_CHECK(!closed && next < order.size());
      now = requests[order[next]].arrival_s;
      continue;
    }
    const double step_start = now;
    now += curve.Seconds(tokens);
    ++res.steps;
    std::vector<size_t> finished;
    for (const auto& [i, n] : work) {
      Live& l = running[i];
      const SimRequest& r = requests[l.index];
      if (l.first_sched < 0) l.first_sched = step_start;
      if (n > 0) {
        l.computed += n;
        if (l.computed < r.prompt_tokens) continue;
      }
      ++l.produced;  // the prompt's last chunk samples the first token; a decode one more
      ++res.output_tokens;
      if (l.produced == 1) l.first_token = now;
      if (l.produced == r.output_tokens) finished.push_back(i);
    }
    std::sort(finished.rbegin(), finished.rend());
    for (size_t i : finished) {
      const Live& l = running[i];
      SimOutcome& o = res.requests[l.index];
      o.arrival_s = arrival[l.index];
      o.queue_s = l.first_sched - arrival[l.index];
      o.ttft_s = l.first_token - arrival[l.index];
      o.e2e_s = now - arrival[l.index];
      o.output_tokens = l.produced;
      o.tpot_s = l.produced > 1 ? (now - l.first_token) / (l.produced - 1) : 0;
      o.cls = requests[l.index].cls;
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      ++done;
      if (closed && next < order.size()) {
        arrival[order[next]] = now;
        waiting.push_back(order[next++]);
      }
    }
  }
  res.makespan_s = now - start;
  return res;
}

}  // namespace tarmac::control
