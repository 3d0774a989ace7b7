// `tarmac generate`, `tarmac tokenize`, `tarmac perplexity`: single-sequence tools that run a
// model directly (no engine): text in, text or numbers out.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/model_loading.h"
#include "apps/engine_flags.h"
#include "engine/engine_core.h"
#include "base/clock.h"
#include "tensor/kv_layout.h"
#include "model/sequence_runner.h"
#include "sampling/sampler.h"
#include "tokenizer/detokenizer.h"
#include "base/utf8.h"

namespace tarmac::apps {
namespace {

struct GenerateArgs {
  std::string model;
  std::string prompt;
  int n_predict = 128;
  float temp = 0.8f;
  float top_p = 0.95f;
  int top_k = 40;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int64_t seed = -1;
  EngineFlags engine;  // threads and the speculation flags
  int ctx = 0;
  bool ignore_eos = false;
  bool no_bos = false;
  bool mmap = false;
};

// With speculation: one request through an in-process engine (draft, verify, rollback), the
// same sampling; prints acceptance next to the speeds.
int RunGenerateSpeculative(const GenerateArgs& a, model::LlamaModel& m,
                           const tok::Tokenizer& tokenizer, const std::vector<int32_t>& prompt,
                           const sampling::SamplingParams& sp, int ctx) {
  auto setup = LoadSpec(a.engine.spec, a.model);
  if (!setup.ok()) {
    std::fprintf(stderr, "tarmac generate: %s\n", setup.status().message().c_str());
    return 2;
  }
  engine::EngineConfig cfg = ToEngineConfig(a.engine, *setup);
  cfg.sched.max_context = ctx;
  cfg.kv.blocks = static_cast<int32_t>(BlocksFor(ctx, cfg.sched.block_size));
  cfg.sched.max_running = 1;
  cfg.kv.prefix_cache = false;
  cfg.warmup = false;  // one request: a warm-up would only move its first-use costs earlier
  auto core = engine::EngineCore::Create(&m, &tokenizer, cfg);
  if (!core.ok()) {
    std::fprintf(stderr, "tarmac generate: %s\n", core.status().message().c_str());
    return 2;
  }
  engine::EngineRequest r;
  r.prompt = prompt;
  r.sampling = sp;
  r.max_tokens = a.n_predict;
  r.ignore_eos = a.ignore_eos;
  auto stream = std::make_shared<engine::RequestStream>(1);
  if (Status st = (*core)->Add(1, r, stream); !st.ok()) {
    std::fprintf(stderr, "tarmac generate: %s\n", st.message().c_str());
    return 2;
  }
  engine::TokenEvent ev;
  engine::RequestMetrics metrics;
  while (!(*core)->idle()) {
    (*core)->Step();
    while (stream->TryNext(&ev)) {
      std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
      std::fflush(stdout);
      if (ev.last()) metrics = ev.metrics;
    }
  }
  std::fputc('\n', stdout);
  const engine::SpecCounts spec = (*core)->metrics().SpecTotal();
  const int64_t drafted = spec.draft_tokens, accepted = spec.accepted_tokens, verifies = spec.drafts;
  const double decode_s = metrics.e2e_s - metrics.ttft_s;
  const int decode_steps = std::max(metrics.output_tokens - 1, 0);
  std::fprintf(stderr,
               "prefill: %zu tokens in %.1f ms; decode: %d tokens in %.1f ms (%.1f tok/s); "
               "spec %s k %d: acceptance %.1f%%, mean accepted length %.2f; threads %d\n",
               prompt.size(), metrics.ttft_s * 1e3, decode_steps, decode_s * 1e3,
               decode_steps > 0 ? decode_steps / decode_s : 0.0, a.engine.spec.mode.c_str(), a.engine.spec.k,
               drafted ? 100.0 * accepted / drafted : 0.0,
               verifies ? static_cast<double>(accepted) / verifies : 0.0, a.engine.threads);
  return 0;
}

int RunGenerate(const GenerateArgs& a) {
  auto loaded = LoadModelAndTokenizer(a.model, /*quiet=*/false, a.mmap, a.ctx);
  if (!loaded.ok()) {
    std::fprintf(stderr, "tarmac generate: %s\n", loaded.status().message().c_str());
    return 2;
  }
  model::LlamaModel& m = *loaded->model;
  const tok::Tokenizer& tokenizer = *loaded->tokenizer;
  sampling::SamplingParams sp;
  sp.temperature = a.temp;
  sp.top_p = a.top_p;
  sp.top_k = a.top_k;
  sp.min_p = a.min_p;
  sp.repetition_penalty = a.repeat_penalty;
  if (a.seed >= 0) sp.seed = static_cast<uint64_t>(a.seed);
  if (Status st = sp.Validate(m.config().n_vocab); !st.ok()) {
    std::fprintf(stderr, "tarmac generate: %s\n", st.message().c_str());
    return 2;
  }
  tok::EncodeOptions eo;
  eo.add_special = !a.no_bos;
  std::vector<int32_t> prompt = tokenizer.Encode(a.prompt, eo);
  if (prompt.empty()) {
    std::fprintf(stderr, "tarmac generate: the prompt encodes to no tokens; give a non-empty -p\n");
    return 2;
  }
  // Default context: the model's, capped at 4096 so a 128k-context model does not reserve
  // gigabytes of KV for a short generation.
  const int ctx = a.ctx > 0 ? a.ctx : std::min(m.config().n_ctx_train, 4096);
  if (static_cast<int>(prompt.size()) + a.n_predict > ctx) {
    std::fprintf(stderr, "tarmac generate: prompt (%zu tokens) + -n %d exceeds the context of %d\n",
                 prompt.size(), a.n_predict, ctx);
    return 2;
  }
  if (a.engine.spec.mode != "off") return RunGenerateSpeculative(a, m, tokenizer, prompt, sp, ctx);
  ThreadPool pool(a.engine.threads);
  PinOwnPool(a.engine.pin_threads, &pool);
  model::SequenceRunner runner(&m, ctx, &pool);
  std::fprintf(stderr, "context %d tokens, KV cache f16 %.1f MiB, %d threads\n", ctx,
               runner.kv_bytes() / (1024.0 * 1024.0), a.engine.threads);
  sampling::Sampler sampler(sp, m.config().n_vocab);
  sampler.AddPrompt(prompt);
  tok::StreamDetokenizer detok(&tokenizer);

  std::vector<float> logits;
  const int64_t t0 = NowNanos();
  if (Status st = runner.Append(prompt, false, &logits); !st.ok()) {
    std::fprintf(stderr, "tarmac generate: %s\n", st.message().c_str());
    return 1;
  }
  const int64_t t1 = NowNanos();
  int generated = 0;
  for (; generated < a.n_predict; ++generated) {
    const int32_t id = sampler.Sample(logits).id;
    sampler.Accept(id);
    if (!a.ignore_eos && tokenizer.IsEndOfGeneration(id)) break;
    const std::string text = detok.Push(id);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    if (generated + 1 == a.n_predict) {
      ++generated;
      break;
    }
    const int32_t one[1] = {id};
    if (Status st = runner.Append(one, false, &logits); !st.ok()) {
      std::fprintf(stderr, "\ntarmac generate: %s\n", st.message().c_str());
      return 1;
    }
  }
  const std::string rest = detok.Finish();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  const int64_t t2 = NowNanos();
  const double prefill_s = (t1 - t0) * 1e-9, decode_s = (t2 - t1) * 1e-9;
  // Decode steps = tokens generated after the first (the first comes from the prefill).
  const int decode_steps = generated > 0 ? generated - 1 : 0;
  std::fprintf(stderr,
               "prefill: %zu tokens in %.1f ms (%.1f tok/s); decode: %d tokens in %.1f ms "
               "(%.1f tok/s); threads %d\n",
               prompt.size(), prefill_s * 1e3, prompt.size() / prefill_s, decode_steps,
               decode_s * 1e3, decode_steps > 0 ? decode_steps / decode_s : 0.0, a.engine.threads);
  return 0;
}

struct TokenizeArgs {
  std::string model;
  std::string prompt;
  bool json = false;
  bool no_bos = false;
  bool parse_special = false;
};

int RunTokenize(const TokenizeArgs& a) {
  auto loaded = LoadModelAndTokenizer(a.model, /*quiet=*/true);
  if (!loaded.ok()) {
    std::fprintf(stderr, "tarmac tokenize: %s\n", loaded.status().message().c_str());
    return 2;
  }
  tok::EncodeOptions eo;
  eo.add_special = !a.no_bos;
  eo.parse_special = a.parse_special;
  const auto ids = loaded->tokenizer->Encode(a.prompt, eo);
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (int32_t id : ids) {
      const std::string piece = loaded->tokenizer->TokenToPiece(id, true);
      out.push_back({{"id", id}, {"piece", SanitizeUtf8(piece)}});
    }
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::string line;
    for (int32_t id : ids) line += (line.empty() ? "" : " ") + std::to_string(id);
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

struct PerplexityArgs {
  std::string model;
  std::string file;
  int ctx = 0;
  int chunks = -1;
  int threads = ThreadPool::DefaultThreads();
  bool mmap = false;
  std::string kv_dtype = "f16";
};

// Perplexity over consecutive windows of ctx tokens; in each window the first half is
// context and only the second half is scored (each scored token sees at least ctx/2 tokens).
int RunPerplexity(const PerplexityArgs& a) {
  auto loaded = LoadModelAndTokenizer(a.model, /*quiet=*/false, a.mmap, a.ctx);
  if (!loaded.ok()) {
    std::fprintf(stderr, "tarmac perplexity: %s\n", loaded.status().message().c_str());
    return 2;
  }
  std::ifstream in(a.file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "tarmac perplexity: cannot read '%s'\n", a.file.c_str());
    return 2;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  model::LlamaModel& m = *loaded->model;
  const int ctx = a.ctx > 0 ? a.ctx : m.config().n_ctx_train;
  if (ctx < 4) {
    std::fprintf(stderr, "tarmac perplexity: --ctx must be at least 4\n");
    return 2;
  }
  tok::EncodeOptions eo;
  eo.add_special = false;
  const auto ids = loaded->tokenizer->Encode(ss.str(), eo);
  int n_chunks = static_cast<int>(ids.size() / ctx);
  if (a.chunks >= 0) n_chunks = std::min(n_chunks, a.chunks);
  if (n_chunks == 0) {
    std::fprintf(stderr, "tarmac perplexity: '%s' has %zu tokens, fewer than one window of %d\n",
                 a.file.c_str(), ids.size(), ctx);
    return 2;
  }
  ThreadPool pool(a.threads);
  model::SequenceRunner runner(&m, ctx, &pool, /*max_chunk=*/512,
                              a.kv_dtype == "int8" ? model::KvDtype::kInt8 : model::KvDtype::kF16);
  const int32_t V = m.config().n_vocab;
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  std::vector<float> logits;
  const int64_t t0 = NowNanos();
  for (int c = 0; c < n_chunks; ++c) {
    runner.Reset();
    std::span<const int32_t> window(ids.data() + static_cast<size_t>(c) * ctx, ctx);
    if (Status st = runner.Append(window, true, &logits); !st.ok()) {
      std::fprintf(stderr, "tarmac perplexity: %s\n", st.message().c_str());
      return 1;
    }
    for (int i = ctx / 2; i + 1 < ctx; ++i) {
      const float* l = &logits[static_cast<size_t>(i) * V];
      float mx = l[0];
      for (int32_t v = 1; v < V; ++v) mx = std::max(mx, l[v]);
      double z = 0;
      for (int32_t v = 0; v < V; ++v) z += std::exp(static_cast<double>(l[v] - mx));
      const double lp = l[window[i + 1]] - mx - std::log(z);
      nll -= lp;
      nll2 += lp * lp;
      ++count;
    }
    std::fprintf(stderr, "[%d/%d] ppl %.4f\n", c + 1, n_chunks, std::exp(nll / count));
  }
  const double mean = nll / count;
  const double var = nll2 / count - mean * mean;
  const double ppl = std::exp(mean);
  const double err = ppl * std::sqrt(std::max(var, 0.0) / std::max<int64_t>(count - 1, 1));
  std::printf("perplexity: %.4f +/- %.4f over %lld tokens (%d windows of %d, %.1f s)\n", ppl,
              err, static_cast<long long>(count), n_chunks, ctx, (NowNanos() - t0) * 1e-9);
  return 0;
}

}  // namespace

void RegisterGenerate(CLI::App& app, RunFn* run) {
  {
    auto a = std::make_shared<GenerateArgs>();
    auto* cmd = app.add_subcommand("generate", "generate text from a prompt (one sequence)");
    cmd->add_option("-m,--model", a->model, "GGUF model file")->required()->check(CLI::ExistingFile);
    cmd->add_option("-p,--prompt", a->prompt, "prompt text")->required();
    cmd->add_option("-n,--n-predict", a->n_predict, "tokens to generate")->capture_default_str()
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--temp", a->temp, "temperature (0: greedy)")->capture_default_str();
    cmd->add_option("--top-p", a->top_p, "nucleus sampling mass")->capture_default_str();
    cmd->add_option("--top-k", a->top_k, "top-k (0: off)")->capture_default_str();
    cmd->add_option("--min-p", a->min_p, "min-p (0: off)")->capture_default_str();
    cmd->add_option("--repeat-penalty", a->repeat_penalty, "repetition penalty (1: off)")->capture_default_str();
    cmd->add_option("--seed", a->seed, "RNG seed (-1: random)")->capture_default_str();
    cmd->add_option("-c,--ctx", a->ctx, "context length (0: the model's, at most 4096)")->capture_default_str()
        ->check(CLI::Range(0, 1 << 20));
    cmd->add_flag("--ignore-eos", a->ignore_eos, "keep generating past end-of-sequence");
    cmd->add_flag("--no-bos", a->no_bos, "do not add BOS even if the model asks for it");
    cmd->add_flag("--mmap", a->mmap, "use weights in place in the file mapping (default: copy into huge pages)");
    AddEngineFlags(cmd, &a->engine, kSpecFlags);
    cmd->callback([a, run] { *run = [a] { return RunGenerate(*a); }; });
  }
  {
    auto a = std::make_shared<TokenizeArgs>();
    auto* cmd = app.add_subcommand("tokenize", "print the token ids of a text");
    cmd->add_option("-m,--model", a->model, "GGUF model file")->required()->check(CLI::ExistingFile);
    cmd->add_option("-p,--prompt", a->prompt, "text")->required();
    cmd->add_flag("--json", a->json, "JSON array of {id, piece}");
    cmd->add_flag("--no-bos", a->no_bos, "do not add BOS/EOS");
    cmd->add_flag("--parse-special", a->parse_special, "recognise special-token text");
    cmd->callback([a, run] { *run = [a] { return RunTokenize(*a); }; });
  }
  {
    auto a = std::make_shared<PerplexityArgs>();
    auto* cmd = app.add_subcommand("perplexity", "perplexity of a model on a text file");
    cmd->add_option("-m,--model", a->model, "GGUF model file")->required()->check(CLI::ExistingFile);
    cmd->add_option("-f,--file", a->file, "text file")->required()->check(CLI::ExistingFile);
    cmd->add_option("-c,--ctx", a->ctx, "window length (0: the model's context)")->capture_default_str()
        ->check(CLI::Range(0, 1 << 20));
    cmd->add_option("--chunks", a->chunks, "at most this many windows (-1: all)")->capture_default_str();
    cmd->add_option("--kv-dtype", a->kv_dtype, "KV cache element type")->capture_default_str()
        ->check(CLI::IsMember({"f16", "int8"}));
    cmd->add_flag("--mmap", a->mmap, "use weights in place in the file mapping (default: copy into huge pages)");
    cmd->add_option("-t,--threads", a->threads, "threads")->capture_default_str()->check(CLI::Range(1, 256));
    cmd->callback([a, run] { *run = [a] { return RunPerplexity(*a); }; });
  }
}

}  // namespace tarmac::apps
