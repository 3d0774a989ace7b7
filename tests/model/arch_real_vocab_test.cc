// make-random --vocab-from with the real vocabularies in ../shared (the Llama-2 SentencePiece
// one of llama-2-tiny-random.gguf, the Llama-3.2 BPE of llama3.2-vocab-random.gguf): each
// family's file gets the source's whole vocabulary (embedding rows = its tokens), loads as a
// model with a tokenizer that encodes text exactly as the source's does, and runs a forward
// pass to finite logits over that vocabulary. Skipped when ../shared lacks the file (it is not
// ours and never committed).
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "gguf/make_random.h"
#include "gguf/model_presets.h"
#include "model/llama_model.h"
#include "model/sequence_runner.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_gguf.h"

namespace tarmac::model {
namespace {

const std::string kShared = TARMAC_SHARED_DIR;

struct Case {
  const char* arch;
  const char* source;  // under ../shared/models
};

class ArchRealVocabTest : public ::testing::TestWithParam<Case> {};

std::unique_ptr<tok::Tokenizer> TokenizerOf(const gguf::File& f) {
  auto v = tok::LoadVocab(f);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  auto t = tok::Tokenizer::Create(std::move(v).value());
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

TEST_P(ArchRealVocabTest, FamilyFileCarriesTheSourceVocabulary) {
  const Case c = GetParam();
  const std::string source = kShared + "/models/" + c.source;
  if (!std::filesystem::exists(source)) GTEST_SKIP() << source << " is absent";
  auto src = gguf::File::Open(source);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  const auto src_tok = TokenizerOf(*src);

  auto shape = gguf::ParseShape("dim=64,layers=2,heads=4,kv_heads=2,ffn=96,vocab=300,tied=1",
                                c.arch);
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  gguf::MakeRandomOptions opts;
  opts.vocab_from = source;
  opts.seed = 26;
  const std::string path =
      ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-arch_real_vocab_" + c.arch + ".gguf";
  ThreadPool pool(2);
  auto made = gguf::MakeRandomModel(*shape, DType::kF16, path, opts, &pool);
  ASSERT_TRUE(made.ok()) << made.status().ToString();

  auto model = LlamaModel::Load(path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  LlamaModel& m = **model;
  EXPECT_EQ(m.config().arch_name, c.arch);
  EXPECT_EQ(m.config().n_vocab, src_tok->n_vocab());
  const auto tok = TokenizerOf(m.file());
  ASSERT_EQ(tok->n_vocab(), src_tok->n_vocab());
  const std::string text =
      "\"Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes.\"";
  const std::vector<int32_t> ids = tok->Encode(text);
  EXPECT_EQ(ids, src_tok->Encode(text));
  EXPECT_GT(ids.size(), 10u);
  EXPECT_EQ(tok->Decode(ids), src_tok->Decode(ids));

  SequenceRunner runner(&m, 128, &pool);
  std::vector<float> logits;
  ASSERT_TRUE(runner.Append(ids, /*all_logits=*/false, &logits).ok());
  ASSERT_EQ(logits.size(), static_cast<size_t>(src_tok->n_vocab()));
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Families, ArchRealVocabTest,
                         ::testing::Values(Case{"gemma2", "llama-2-tiny-random.gguf"},
                                           Case{"gemma3", "llama-2-tiny-random.gguf"},
                                           Case{"phi3", "llama-2-tiny-random.gguf"},
                                           Case{"qwen3", "llama3.2-vocab-random.gguf"}),
                         [](const auto& info) { return std::string(info.param.arch); });

}  // namespace
}  // namespace tarmac::model
