// `tarmac bench model`: prefill and batch-1 decode speed of one model, measured the way
// bench/llamacpp/bench_llamacpp.mjs measures llama.cpp (same synthetic prompt ids, greedy
// decode), so bench/compare_llamacpp.sh can put the two side by side.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/bench_offline.h"
#include "apps/bench_route.h"
#include "apps/bench_serve.h"
#include "apps/engine_flags.h"
#include "apps/commands.h"
#include "apps/model_loading.h"
#include "apps/plan_probe.h"
#include "base/clock.h"
#include "kernels/cpu_features.h"
#include "kernels/dispatch.h"
#include "model/sequence_runner.h"
#include "sampling/sampler.h"

namespace tarmac::apps {
namespace {

struct BenchArgs {
  std::string model;
  int threads = 1;
  std::string pin_threads = "auto";
  int prompt_tokens = 512;
  int decode = 128;
  int reps = 3;
  bool json = false;
  bool mmap = false;
  bool read_bandwidth = false;  // also measure the read bandwidth over the bytes a step reads
  bool explain = false;         // print the kernel dispatch table first
  // --steps: token counts of one-pass steps from an empty context to time instead (a
  // speculative verify step's cost curve); empty: the prefill / decode benchmark.
  std::vector<int> steps;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Each of a.steps as one Append from an empty context, the sizes alternating within each
// repetition (so drift hits all of them alike); median milliseconds per size.
int RunStepCurve(const BenchArgs& a, model::LlamaModel& m) {
  const int32_t n_vocab = m.config().n_vocab;
  const int max_n = *std::max_element(a.steps.begin(), a.steps.end());
  std::vector<int32_t> ids;
  int64_t s = 12345;
  const int64_t span = std::max<int64_t>(1, std::min<int64_t>(n_vocab, 2000) - 256);
  for (int i = 0; i < max_n; ++i) {
    s = (s * 1103515245 + 12345) % 2147483648LL;
    ids.push_back(static_cast<int32_t>(std::min<int64_t>(n_vocab - 1, 256 + s % span)));
  }
  ThreadPool pool(a.threads);
  PinOwnPool(a.pin_threads, &pool);
  model::SequenceRunner runner(&m, max_n + 16, &pool);
  std::vector<float> logits;
  std::vector<std::vector<double>> ms(a.steps.size());
  for (int r = 0; r < a.reps + 1; ++r) {  // repetition 0 warms up
    for (size_t i = 0; i < a.steps.size(); ++i) {
      runner.Reset();
      const int64_t t0 = NowNanos();
      if (Status st = runner.Append(std::span<const int32_t>(ids.data(), a.steps[i]), true,
                                    &logits);
          !st.ok()) {
        std::fprintf(stderr, "tarmac bench: %s\n", st.message().c_str());
        return 1;
      }
      if (r > 0) ms[i].push_back((NowNanos() - t0) * 1e-6);
    }
  }
  nlohmann::json curve = nlohmann::json::object();
  for (size_t i = 0; i < a.steps.size(); ++i) {
    const double med = Median(ms[i]);
    curve[std::to_string(a.steps[i])] = med;
    if (!a.json) std::printf("step %3d tokens: %8.2f ms\n", a.steps[i], med);
  }
  if (a.json) {
    nlohmann::json j = {{"file", a.model}, {"threads", a.threads}, {"reps", a.reps},
                        {"step_ms", curve}, {"isa", kernels::IsaName(kernels::ActiveIsa())}};
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}

int RunBenchModel(const BenchArgs& a) {
  auto loaded = LoadModelAndTokenizer(a.model, /*quiet=*/a.json, a.mmap);
  if (!loaded.ok()) {
    std::fprintf(stderr, "tarmac bench: %s\n", loaded.status().message().c_str());
    return 2;
  }
  model::LlamaModel& m = *loaded->model;
  if (a.explain) std::printf("%s", kernels::DescribeDispatchTable(kernels::ActiveIsa()).c_str());
  if (!a.steps.empty()) return RunStepCurve(a, m);
  const int32_t n_vocab = m.config().n_vocab;
  const int ctx = a.prompt_tokens + a.decode + 16;
  // Same generator as the llama.cpp script: ids spread over the vocabulary, no tokenizer.
  std::vector<int32_t> prompt;
  int64_t s = 12345;
  const int64_t span = std::max<int64_t>(1, std::min<int64_t>(n_vocab, 2000) - 256);
  for (int i = 0; i < a.prompt_tokens; ++i) {
    s = (s * 1103515245 + 12345) % 2147483648LL;
    prompt.push_back(static_cast<int32_t>(std::min<int64_t>(n_vocab - 1, 256 + s % span)));
  }
  ThreadPool pool(a.threads);
  PinOwnPool(a.pin_threads, &pool);
  model::SequenceRunner runner(&m, ctx, &pool);
  // The probe reads right after each repetition's decode, so each fraction pairs a decode and a
  // read from the same minute (other tenants move both on a shared host).
  std::unique_ptr<ReadBandwidthProbe> probe;
  // What a decode step reads: a mixture of experts reads its chosen experts only, and every
  // model one row of an untied embedding (LlamaModel::active_weight_bytes).
  const int64_t step_bytes = m.active_weight_bytes();
  if (a.read_bandwidth) probe = std::make_unique<ReadBandwidthProbe>(step_bytes);
  std::vector<double> prefill, decode, reads, fractions;
  std::vector<float> logits;
  for (int r = 0; r < a.reps; ++r) {
    runner.Reset();
    int64_t t0 = NowNanos();
    if (Status st = runner.Append(prompt, false, &logits); !st.ok()) {
      std::fprintf(stderr, "tarmac bench: %s\n", st.message().c_str());
      return 1;
    }
    prefill.push_back(a.prompt_tokens / ((NowNanos() - t0) * 1e-9));
    // Decode from a one-token start, greedy, as the llama.cpp script does.
    runner.Reset();
    int32_t tok[1] = {prompt[0]};
    (void)runner.Append(tok, false, &logits);
    t0 = NowNanos();
    for (int i = 0; i < a.decode; ++i) {
      tok[0] = sampling::ArgMax(logits);
      (void)runner.Append(tok, false, &logits);
    }
    decode.push_back(a.decode / ((NowNanos() - t0) * 1e-9));
    if (probe) {
      // The roofline decode is held to: the same threads reading as many bytes as the weights.
      reads.push_back(probe->Measure(&pool));
      fractions.push_back(decode.back() * step_bytes / reads.back());
    }
  }
  const double pf = Median(prefill), dc = Median(decode);
  const double read_bps = probe ? Median(reads) : 0, fraction = probe ? Median(fractions) : 0;
  if (a.json) {
    nlohmann::json j = {{"file", a.model},          {"threads", a.threads},
                        {"prefill_tokens", a.prompt_tokens}, {"prefill_tok_s", pf},
                        {"decode_tokens", a.decode}, {"decode_tok_s", dc},
                        {"weight_bytes", m.weight_bytes()},
                        {"active_weight_bytes", step_bytes},
                        {"isa", kernels::IsaName(kernels::ActiveIsa())}};
    if (probe) {
      j["read_bytes_per_s"] = read_bps;
      j["decode_read_fraction"] = fraction;
      j["decode_tok_s_reps"] = decode;
      j["read_bytes_per_s_reps"] = reads;
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("prefill %d tokens: %.1f tok/s; decode %d tokens: %.1f tok/s (%.2f GB/s of "
                "weights read); threads %d, median of %d\n",
                a.prompt_tokens, pf, a.decode, dc, dc * step_bytes / 1e9, a.threads, a.reps);
    if (probe) {
      std::printf("read bandwidth %.2f GB/s (median of one probe per repetition): decode streams "
                  "the weights at %.0f%% of it (median of the repetitions' ratios)\n",
                  read_bps / 1e9, 100.0 * fraction);
    }
  }
  return 0;
}

}  // namespace

void RegisterBench(CLI::App& app, RunFn* run) {
  auto* bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = bench->add_subcommand("model", "prefill and batch-1 decode speed of one model");
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  cmd->add_option("-t,--threads", a->threads, "threads")->capture_default_str()->check(CLI::Range(1, 256));
  AddPinThreadsFlag(cmd, &a->pin_threads);
  cmd->add_option("--prompt-tokens", a->prompt_tokens, "prompt length")->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--decode", a->decode, "decode steps")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--reps", a->reps, "repetitions (median reported)")->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_flag("--json", a->json, "one JSON line");
  cmd->add_flag("--read-bandwidth", a->read_bandwidth,
                "also measure the read bandwidth of these threads over as many bytes as a decode step reads, "
                "after each repetition's decode");
  cmd->add_flag("--explain", a->explain,
                "print the kernel dispatch table (TARMAC_ISA level) before measuring");
  cmd->add_option("--steps", a->steps,
                  "instead: time one-pass steps of these token counts from an empty context, "
                  "all logits (e.g. --steps 1,8,16)")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  cmd->add_flag("--mmap", a->mmap, "use weights in place in the file mapping (default: copy into huge pages)");
  cmd->callback([a, run] { *run = [a] { return RunBenchModel(*a); }; });
  RegisterBenchOffline(bench, run);
  RegisterBenchServe(bench, run);
  RegisterBenchRoute(bench, run);
}

}  // namespace tarmac::apps
