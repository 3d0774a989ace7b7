// Prefill and batch-1 decode of a reference model and other models in turns in one process
// (bench/arch_speed.sh): on a shared host whose load drifts within seconds, a ratio of two
// measurements taken back to back says more than two medians taken minutes apart. Measures
// as `tarmac bench model` does (the same pseudo-random prompt ids, prefill in one pass,
// greedy decode from a one-token start), weights copied into huge pages.
//
// Usage: arch_pair --base BASE.gguf MODEL.gguf... [--threads T] [--prompt-tokens P]
//                  [--decode N] [--rounds R]
// Prints one JSON line per model: per round the base's and the model's tok/s (prefill and
// decode, measured right after each other, the order alternating by round) and the medians
// of the per-round ratios model / base.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/thread_pool.h"
#include "kernels/ops.h"
#include "model/llama_model.h"
#include "model/sequence_runner.h"

namespace {

using tarmac::model::LlamaModel;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Speed {
  double prefill = 0, decode = 0;  // tok/s
};

Speed Measure(LlamaModel& m, int prompt_tokens, int decode, tarmac::ThreadPool* pool) {
  const int32_t n_vocab = m.config().n_vocab;
  std::vector<int32_t> prompt;  // the generator of `tarmac bench model` and bench_llamacpp.mjs
  int64_t s = 12345;
  const int64_t span = std::max<int64_t>(1, std::min<int64_t>(n_vocab, 2000) - 256);
  for (int i = 0; i < prompt_tokens; ++i) {
    s = (s * 1103515245 + 12345) % 2147483648LL;
    prompt.push_back(static_cast<int32_t>(std::min<int64_t>(n_vocab - 1, 256 + s % span)));
  }
  tarmac::model::SequenceRunner runner(&m, prompt_tokens + decode + 16, pool);
  std::vector<float> logits;
  Speed sp;
  double t0 = Now();
  (void)runner.Append(prompt, false, &logits);
  sp.prefill = prompt_tokens / (Now() - t0);
  runner.Reset();
  int32_t tok[1] = {prompt[0]};
  (void)runner.Append(tok, false, &logits);
  t0 = Now();
  for (int i = 0; i < decode; ++i) {
    tok[0] = static_cast<int32_t>(tarmac::kernels::ArgMax(logits.data(), n_vocab));
    (void)runner.Append(tok, false, &logits);
  }
  sp.decode = decode / (Now() - t0);
  return sp;
}

}  // namespace

int main(int argc, char** argv) {
  std::string base_path;
  std::vector<std::string> models;
  int threads = 2, prompt_tokens = 512, decode = 64, rounds = 7;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--base") base_path = next();
    else if (a == "--threads") threads = std::atoi(next().c_str());
    else if (a == "--prompt-tokens") prompt_tokens = std::atoi(next().c_str());
    else if (a == "--decode") decode = std::atoi(next().c_str());
    else if (a == "--rounds") rounds = std::atoi(next().c_str());
    else if (!a.empty() && a[0] != '-') models.push_back(a);
    else { std::fprintf(stderr, "arch_pair: unknown flag %s\n", a.c_str()); return 2; }
  }
  if (base_path.empty() || models.empty() || threads < 1 || prompt_tokens < 1 || decode < 1 ||
      rounds < 1) {
    std::fprintf(stderr, "usage: arch_pair --base BASE.gguf MODEL.gguf... [--threads T] "
                         "[--prompt-tokens P] [--decode N] [--rounds R]\n");
    return 2;
  }
  auto base = LlamaModel::Load(base_path, /*use_mmap=*/false);
  if (!base.ok()) { std::fprintf(stderr, "arch_pair: %s\n", base.status().message().c_str()); return 2; }
  tarmac::ThreadPool pool(threads);
  (void)Measure(**base, 32, 4, &pool);  // first use: scratch growth, page faults
  for (const std::string& path : models) {
    auto m = LlamaModel::Load(path, /*use_mmap=*/false);
    if (!m.ok()) { std::fprintf(stderr, "arch_pair: %s\n", m.status().message().c_str()); return 2; }
    (void)Measure(**m, 32, 4, &pool);
    nlohmann::json rows = nlohmann::json::array();
    std::vector<double> rp, rd;
    for (int r = 0; r < rounds; ++r) {
      Speed a, b;
      if (r % 2 == 0) {
        a = Measure(**base, prompt_tokens, decode, &pool);
        b = Measure(**m, prompt_tokens, decode, &pool);
      } else {
        b = Measure(**m, prompt_tokens, decode, &pool);
        a = Measure(**base, prompt_tokens, decode, &pool);
      }
      rows.push_back({{"base_prefill", a.prefill}, {"prefill", b.prefill},
                      {"base_decode", a.decode}, {"decode", b.decode}});
      rp.push_back(b.prefill / a.prefill);
      rd.push_back(b.decode / a.decode);
    }
    std::vector<double> bp, md, bd, mp;
    for (const auto& row : rows) {
      bp.push_back(row["base_prefill"]);
      mp.push_back(row["prefill"]);
      bd.push_back(row["base_decode"]);
      md.push_back(row["decode"]);
    }
    nlohmann::json out = {{"base", base_path}, {"model", path}, {"arch", (*m)->config().arch_name},
                          {"threads", threads}, {"prompt_tokens", prompt_tokens},
                          {"decode_tokens", decode}, {"rounds", rows},
                          {"base_prefill_tok_s", Median(bp)}, {"prefill_tok_s", Median(mp)},
                          {"base_decode_tok_s", Median(bd)}, {"decode_tok_s", Median(md)},
                          {"prefill_ratio", Median(rp)}, {"decode_ratio", Median(rd)}};
    std::printf("%s\n", out.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}
