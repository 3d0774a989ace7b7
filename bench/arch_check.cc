// tarmac's side of the llama.cpp comparison of model families (bench/compare_arch.sh): runs
// token ids through one GGUF model and prints what the comparison needs, as one JSON object.
//
// Usage: arch_check MODEL.gguf --input CASES.json [--threads T] [--ctx C] [--top K]
// CASES.json: {"cases": [{"prompt": [ids], "forced": [ids]}...], "ppl": [ids]}
//   prompt: run as one prefill; the top-K log-probabilities at every prompt position.
//   forced: llama.cpp's greedy continuation, fed back one token at a time (teacher forcing):
//           per step our argmax, our top-2 margin and how far below our top logit llama.cpp's
//           token is (0 when it is our argmax), so a disagreement can be told from a near-tie.
//   free:   our own greedy continuation of the same length (for the report).
//   ppl:    one sequence; perplexity of each next token (natural log).
// --ctx: the context size (LongRoPE picks its factors by it, as llama.cpp by its context).
// Logits are compared as log-probabilities: llama.cpp reports probabilities only.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/thread_pool.h"
#include "model/llama_model.h"
#include "model/sequence_runner.h"

namespace {

using tarmac::model::LlamaModel;
using tarmac::model::SequenceRunner;
using nlohmann::json;

// log-softmax of one row of logits, in double.
std::vector<double> LogSoftmax(const float* l, int32_t n) {
  double mx = l[0];
  for (int32_t i = 1; i < n; ++i) mx = std::max(mx, double{l[i]});
  double z = 0;
  for (int32_t i = 0; i < n; ++i) z += std::exp(l[i] - mx);
  const double lz = mx + std::log(z);
  std::vector<double> out(n);
  for (int32_t i = 0; i < n; ++i) out[i] = l[i] - lz;
  return out;
}

json TopK(const std::vector<double>& lp, int k) {
  std::vector<int32_t> ids(lp.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  k = std::min<int>(k, static_cast<int>(ids.size()));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int32_t a, int32_t b) { return lp[a] > lp[b] || (lp[a] == lp[b] && a < b); });
  json out = json::array();
  for (int i = 0; i < k; ++i) out.push_back({ids[i], lp[ids[i]]});
  return out;
}

// argmax (first on ties) and the gap to the runner-up.
std::pair<int32_t, double> ArgMaxMargin(const float* l, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i)
    if (l[i] > l[best]) best = i;
  double second = -INFINITY;
  for (int32_t i = 0; i < n; ++i)
    if (i != best) second = std::max(second, double{l[i]});
  return {best, l[best] - second};
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "arch_check: %s\n", msg.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, input_path;
  int threads = 2, top = 8, ctx = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--input") input_path = next();
    else if (a == "--threads") threads = std::atoi(next().c_str());
    else if (a == "--top") top = std::atoi(next().c_str());
    else if (a == "--ctx") ctx = std::atoi(next().c_str());
    else if (!a.empty() && a[0] != '-') model_path = a;
    else return Fail("unknown flag " + a);
  }
  if (model_path.empty() || input_path.empty() || threads < 1 || top < 1 || ctx < 0)
    return Fail("usage: arch_check MODEL.gguf --input CASES.json [--threads T] [--ctx C] [--top K]");
  std::ifstream in(input_path);
  if (!in) return Fail("cannot read " + input_path);
  json input;
  try {
    input = json::parse(in);
  } catch (const std::exception& e) {
    return Fail(input_path + ": " + e.what());
  }
  auto loaded = LlamaModel::Load(model_path, /*use_mmap=*/true, ctx);
  if (!loaded.ok()) return Fail(loaded.status().message());
  LlamaModel& m = **loaded;
  const int32_t V = m.config().n_vocab;
  size_t longest = input.value("ppl", std::vector<int32_t>{}).size();
  for (const auto& c : input["cases"]) {
    longest = std::max(longest, c["prompt"].size() + c["forced"].size() + 1);
  }
  const int32_t context = std::max<int32_t>(static_cast<int32_t>(longest), ctx);
  tarmac::ThreadPool pool(threads);
  SequenceRunner runner(&m, context, &pool);
  json out;
  out["model"] = model_path;
  out["arch"] = m.config().arch_name;
  out["cases"] = json::array();
  std::vector<float> logits;
  for (const auto& c : input["cases"]) {
    const auto prompt = c["prompt"].get<std::vector<int32_t>>();
    const auto forced = c["forced"].get<std::vector<int32_t>>();
    json rc;
    runner.Reset();
    if (auto st = runner.Append(prompt, /*all_logits=*/true, &logits); !st.ok())
      return Fail(st.message());
    rc["top_logprobs"] = json::array();
    for (size_t p = 0; p < prompt.size(); ++p)
      rc["top_logprobs"].push_back(TopK(LogSoftmax(&logits[p * V], V), top));
    std::vector<float> last(logits.end() - V, logits.end());
    json steps = json::array();
    for (int32_t tok : forced) {
      const auto [ours, margin] = ArgMaxMargin(last.data(), V);
      steps.push_back({{"ours", ours}, {"margin", margin},
                       {"gap", double{last[ours]} - double{last[tok]}}});
      const int32_t one[1] = {tok};
      if (auto st = runner.Append(one, false, &last); !st.ok()) return Fail(st.message());
    }
    rc["forced"] = steps;
    // Our own greedy continuation.
    runner.Reset();
    if (auto st = runner.Append(prompt, false, &last); !st.ok()) return Fail(st.message());
    std::vector<int32_t> free;
    for (size_t i = 0; i < forced.size(); ++i) {
      const int32_t next = ArgMaxMargin(last.data(), V).first;
      free.push_back(next);
      const int32_t one[1] = {next};
      if (auto st = runner.Append(one, false, &last); !st.ok()) return Fail(st.message());
    }
    rc["free"] = free;
    out["cases"].push_back(rc);
  }
  const auto ppl = input.value("ppl", std::vector<int32_t>{});
  if (ppl.size() >= 2) {
    runner.Reset();
    if (auto st = runner.Append(ppl, /*all_logits=*/true, &logits); !st.ok()) return Fail(st.message());
    double nll = 0;
    for (size_t i = 0; i + 1 < ppl.size(); ++i)
      nll -= LogSoftmax(&logits[i * V], V)[ppl[i + 1]];
    out["ppl"] = std::exp(nll / static_cast<double>(ppl.size() - 1));
    out["ppl_tokens"] = ppl.size() - 1;
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
