// The per-family goldens of tests/data/arch (llama.cpp's output on random-weight models that
// `gguf make-random` rebuilds from the golden's own spec), shared by the tests that check a
// family against them (tests/model/arch_golden_test.cc, tests/router/pool_families_test.cc).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/thread_pool.h"
#include "gguf/make_random.h"
#include "gguf/model_presets.h"
#include "model/llama_model.h"
#include "model/sequence_runner.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_gguf.h"

namespace tarmac::testing {

// Every golden in tests/data/arch, by file stem.
inline const std::vector<std::string> kArchGoldens = {
    "llama", "qwen2",       "qwen3", "gemma2",   "gemma2-caps", "gemma3",
    "gemma3-swa", "phi3", "phi3-partial", "qwen3moe", "mixtral", "qwen3moe-ties", "gpt-oss"};

// A gtest parameter name for a golden ("gemma2-caps" -> "gemma2_caps").
inline std::string ArchGoldenParamName(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& ch : n)
    if (ch == '-') ch = '_';
  return n;
}

inline nlohmann::json ReadArchGolden(const std::string& name) {
  std::ifstream in(TARMAC_SOURCE_DIR "/tests/data/arch/" + name + ".golden.json");
  EXPECT_TRUE(in.good()) << "golden file for " << name << " missing";
  return nlohmann::json::parse(in);
}

// The golden's model (its "make_random" spec), written again as f32 into the test's temporary
// directory under a name of this process (`tag` tells the tests apart).
inline std::string RegenerateArchGolden(const nlohmann::json& spec, const std::string& name, const std::string& tag) {
  auto shape = gguf::ParseShape(spec["shape"].get<std::string>(), spec["arch"].get<std::string>());
  EXPECT_TRUE(shape.ok()) << shape.status().ToString();
  gguf::MakeRandomOptions opts;
  opts.seed = spec["seed"].get<uint64_t>();
  opts.norm_jitter = spec["norm_jitter"].get<double>();
  const std::string path = ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-" + tag + "_" + name + ".gguf";
  ThreadPool pool(2);
  auto res = gguf::MakeRandomModel(*shape, DType::kF32, path, opts, &pool);
  EXPECT_TRUE(res.ok()) << res.status().ToString();
  return path;
}

// A golden, its model written again and loaded, and that model's tokenizer.
struct LoadedGolden {
  nlohmann::json golden;
  std::unique_ptr<model::LlamaModel> model;
  std::unique_ptr<tok::Tokenizer> tok;
};

inline LoadedGolden LoadArchGoldenModel(const std::string& name, const std::string& tag) {
  LoadedGolden g;
  g.golden = ReadArchGolden(name);
  const std::string path = RegenerateArchGolden(g.golden["make_random"], name, tag);
  g.model = std::move(model::LlamaModel::Load(path).value());
  g.tok = std::move(tok::Tokenizer::Create(tok::LoadVocab(g.model->file()).value()).value());
  return g;
}

// Greedy continuation (n tokens) of `prompt` on the plain single-sequence path: the prompt in
// one pass, then one token at a time, every KV block kept.
inline std::vector<int32_t> PlainGreedy(model::LlamaModel& m, const std::vector<int32_t>& prompt,
                                        int n, int32_t context = 256) {
  ThreadPool pool(2);
  model::SequenceRunner runner(&m, context, &pool);
  std::vector<float> logits;
  EXPECT_TRUE(runner.Append(prompt, false, &logits).ok());
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const int32_t next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(next);
    const int32_t one[1] = {next};
    EXPECT_TRUE(runner.Append(one, false, &logits).ok());
  }
  return out;
}

}  // namespace tarmac::testing
