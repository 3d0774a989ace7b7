#include "common/test_util.h"
#include "gguf/make_random.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "gguf/gguf_file.h"
#include "gguf/model_presets.h"
#include "gguf/quantize_file.h"
#include "tensor/quant_ref.h"

namespace tarmac::gguf {
namespace {

namespace fs = std::filesystem;

class MakeRandomTest : public testing::TempDirTest {
 protected:
  ThreadPool pool_{2};
};

ModelShape Small(bool tied) {
  auto s = ParseShape(std::string("dim=64,layers=2,heads=4,kv_heads=2,ffn=128,vocab=300,ctx=256") +
                      (tied ? ",tied=1" : ""));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return *s;
}

std::string ReadAll(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST_F(MakeRandomTest, KeySetTensorsAndValuesMatchALlamaModel) {
  for (bool tied : {false, true}) {
    const ModelShape shape = Small(tied);
    const std::string out = Path(tied ? "tied.gguf" : "untied.gguf");
    auto sum = MakeRandomModel(shape, DType::kF16, out, {}, &pool_);
    ASSERT_TRUE(sum.ok()) << sum.status().ToString();
    auto f = File::Open(out);
    ASSERT_TRUE(f.ok()) << f.status().ToString();

    // The key set of a llama.cpp-converted llama model with a gpt2 tokenizer (models/wp-11m).
    std::set<std::string> keys;
    for (const auto& kv : f->metadata()) keys.insert(kv.key);
    const std::set<std::string> want = {
        "general.architecture", "general.name", "general.description", "general.file_type",
        "llama.context_length", "llama.embedding_length", "llama.block_count",
        "llama.feed_forward_length", "llama.rope.dimension_count", "llama.rope.freq_base",
        "llama.attention.head_count", "llama.attention.head_count_kv",
        "llama.attention.layer_norm_rms_epsilon", "llama.vocab_size", "tokenizer.ggml.model",
        "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
        "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.add_bos_token"};
    EXPECT_EQ(keys, want);
    EXPECT_EQ(*f->GetString("general.architecture"), "llama");
    EXPECT_EQ(*f->GetUint("general.file_type"), 1u);
    EXPECT_EQ(*f->GetUint("llama.embedding_length"), 64u);
    EXPECT_EQ(*f->GetUint("llama.block_count"), 2u);
    EXPECT_EQ(*f->GetUint("llama.attention.head_count"), 4u);
    EXPECT_EQ(*f->GetUint("llama.attention.head_count_kv"), 2u);
    EXPECT_EQ(*f->GetUint("llama.feed_forward_length"), 128u);
    EXPECT_EQ(*f->GetUint("llama.rope.dimension_count"), 16u);
    EXPECT_EQ(*f->GetUint("llama.context_length"), 256u);
    EXPECT_EQ(*f->GetUint("llama.vocab_size"), 300u);
    EXPECT_DOUBLE_EQ(*f->GetFloat("llama.rope.freq_base"), 10000.0);
    EXPECT_EQ(*f->GetString("tokenizer.ggml.model"), "gpt2");
    EXPECT_EQ(*f->GetString("tokenizer.ggml.pre"), "gpt-2");

    std::vector<std::pair<std::string, std::vector<int64_t>>> want_tensors = {
        {"token_embd.weight", {64, 300}}};
    for (int l = 0; l < 2; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      want_tensors.push_back({p + "attn_norm.weight", {64}});
      want_tensors.push_back({p + "attn_q.weight", {64, 64}});
      want_tensors.push_back({p + "attn_k.weight", {64, 32}});
      want_tensors.push_back({p + "attn_v.weight", {64, 32}});
      want_tensors.push_back({p + "attn_output.weight", {64, 64}});
      want_tensors.push_back({p + "ffn_norm.weight", {64}});
      want_tensors.push_back({p + "ffn_gate.weight", {64, 128}});
      want_tensors.push_back({p + "ffn_up.weight", {64, 128}});
      want_tensors.push_back({p + "ffn_down.weight", {128, 64}});
    }
    want_tensors.push_back({"output_norm.weight", {64}});
    if (!tied) want_tensors.push_back({"output.weight", {64, 300}});
    ASSERT_EQ(f->tensors().size(), want_tensors.size());
    for (size_t i = 0; i < want_tensors.size(); ++i) {
      EXPECT_EQ(f->tensors()[i].name, want_tensors[i].first);
      EXPECT_EQ(f->tensors()[i].dims, want_tensors[i].second) << want_tensors[i].first;
      EXPECT_EQ(f->tensors()[i].type, want_tensors[i].second.size() == 1 ? DType::kF32 : DType::kF16);
    }
    EXPECT_EQ(f->parameter_count(), shape.ParameterCount());
    EXPECT_EQ(sum->parameters, shape.ParameterCount());
    EXPECT_EQ(sum->tensors, want_tensors.size());
  }
}

TEST_F(MakeRandomTest, WeightsAreSmallZeroMeanAndNormsAreOne) {
  const std::string out = Path("m.gguf");
  ASSERT_TRUE(MakeRandomModel(Small(false), DType::kF32, out, {}, &pool_).ok());
  auto f = File::Open(out);
  ASSERT_TRUE(f.ok());
  for (const auto& t : f->tensors()) {
    const float* v = reinterpret_cast<const float*>(t.data);
    const int64_t n = t.num_elements();
    if (t.dims.size() == 1) {
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[i], 1.0f) << t.name;
      continue;
    }
    double sum = 0, sum2 = 0, amax = 0;
    for (int64_t i = 0; i < n; ++i) {
      sum += v[i];
      sum2 += double(v[i]) * v[i];
      amax = std::max(amax, std::fabs(double(v[i])));
    }
    const double mean = sum / n, sd = std::sqrt(sum2 / n - mean * mean);
    EXPECT_NEAR(mean, 0.0, 0.003) << t.name;
    EXPECT_NEAR(sd, 0.02, 0.002) << t.name;
    EXPECT_LE(amax, 0.02 * 3.47) << t.name;  // the 4-uniform sum is bounded at sqrt(12) sigma
  }
}

TEST_F(MakeRandomTest, DeterministicPerSeedAndThreadCount) {
  ThreadPool one(1);
  MakeRandomOptions o;
  o.seed = 42;
  ASSERT_TRUE(MakeRandomModel(Small(true), DType::kQ4_0, Path("a.gguf"), o, &one).ok());
  ASSERT_TRUE(MakeRandomModel(Small(true), DType::kQ4_0, Path("b.gguf"), o, &pool_).ok());
  o.seed = 43;
  ASSERT_TRUE(MakeRandomModel(Small(true), DType::kQ4_0, Path("c.gguf"), o, &pool_).ok());
  EXPECT_EQ(ReadAll(Path("a.gguf")), ReadAll(Path("b.gguf")));
  EXPECT_NE(ReadAll(Path("a.gguf")), ReadAll(Path("c.gguf")));
}

TEST_F(MakeRandomTest, QuantizedTypesAndFallbacks) {
  // dim 64 is not a multiple of 256: K-quant matrices with 64-long rows fall back to q8_0.
  auto sum = MakeRandomModel(Small(false), DType::kQ6_K, Path("q6.gguf"), {}, &pool_);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->notes.size(), 2u * 7 + 2);  // every matrix: all rows are 64 or 128 long
  auto f = File::Open(Path("q6.gguf"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f->GetUint("general.file_type"), 18u);
  EXPECT_EQ(*f->GetUint("general.quantization_version"), 2u);
  EXPECT_EQ(f->FindTensor("blk.0.attn_q.weight")->type, DType::kQ8_0);

  auto big = ParseShape("dim=256,layers=1,heads=2,ffn=512,vocab=260");
  ASSERT_TRUE(big.ok());
  auto sum2 = MakeRandomModel(*big, DType::kQ4_K, Path("q4k.gguf"), {}, &pool_);
  ASSERT_TRUE(sum2.ok()) << sum2.status().ToString();
  EXPECT_TRUE(sum2->notes.empty());
  auto g = File::Open(Path("q4k.gguf"));
  ASSERT_TRUE(g.ok());
  for (const auto& t : g->tensors()) {
    EXPECT_EQ(t.type, t.dims.size() == 1 ? DType::kF32 : DType::kQ4_K) << t.name;
  }
}

TEST_F(MakeRandomTest, TokenizerIsConsistent) {
  const std::string out = Path("tok.gguf");
  ASSERT_TRUE(MakeRandomModel(Small(false), DType::kQ8_0, out, {}, &pool_).ok());
  auto f = File::Open(out);
  ASSERT_TRUE(f.ok());
  auto tokens = f->GetStringArray("tokenizer.ggml.tokens");
  auto merges = f->GetStringArray("tokenizer.ggml.merges");
  ASSERT_TRUE(tokens.ok() && merges.ok());
  ASSERT_EQ(tokens->size(), 300u);
  const auto* types = f->Find("tokenizer.ggml.token_type")->AsArray();
  ASSERT_EQ(types->size(), 300u);
  std::unordered_set<std::string> set(tokens->begin(), tokens->end());
  EXPECT_EQ(set.size(), tokens->size()) << "duplicate tokens";
  for (const auto& t : *tokens) EXPECT_EQ(t.find(' '), std::string::npos) << t;
  EXPECT_EQ(merges->size(), 300u - 257);
  for (const auto& m : *merges) {
    const size_t sp = m.find(' ');
    ASSERT_NE(sp, std::string::npos) << m;
    ASSERT_EQ(m.find(' ', sp + 1), std::string::npos) << m;
    const std::string a = m.substr(0, sp), b = m.substr(sp + 1);
    EXPECT_TRUE(set.count(a)) << m;
    EXPECT_TRUE(set.count(b)) << m;
    EXPECT_TRUE(set.count(a + b)) << m;
  }
  const uint64_t eos = *f->GetUint("tokenizer.ggml.eos_token_id");
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.bos_token_id"), eos);
  ASSERT_LT(eos, 300u);
  EXPECT_EQ((*tokens)[eos], "<|endoftext|>");
  EXPECT_EQ(*(*types)[eos].AsInt64(), 3);
  EXPECT_EQ(*(*types)[0].AsInt64(), 1);
  // GPT-2's byte-to-unicode spelling.
  EXPECT_EQ((*tokens)[' '], "\xC4\xA0");   // U+0120 'Ġ'
  EXPECT_EQ((*tokens)['\n'], "\xC4\x8A");  // U+010A 'Ċ'
  EXPECT_EQ((*tokens)[0], "\xC4\x80");     // U+0100 'Ā'
  EXPECT_EQ((*tokens)['a'], "a");
  EXPECT_EQ((*tokens)[0xAD], "\xC5\x83");  // soft hyphen, the 68th unprintable byte: U+0143
  EXPECT_EQ((*tokens)[0xFF], "\xC3\xBF");  // 'ÿ' spells itself
}

TEST(ByteLevelVocabTest, LargeVocabulariesStayUnique) {
  const ByteLevelVocab v = MakeByteLevelVocab(128256);
  ASSERT_EQ(v.tokens.size(), 128256u);
  std::unordered_set<std::string> set(v.tokens.begin(), v.tokens.end());
  EXPECT_EQ(set.size(), v.tokens.size());
  EXPECT_EQ(v.eos_id, 128255);
  EXPECT_EQ(v.merges.size(), 128256u - 257);
}

TEST(ModelShapeTest, PresetsParseAndCountParameters) {
  auto smol = ParseShape("smollm-135m");
  ASSERT_TRUE(smol.ok());
  EXPECT_EQ(smol->dim, 576);
  EXPECT_EQ(smol->kv_heads, 3);
  EXPECT_TRUE(smol->tied);
  EXPECT_EQ(smol->ParameterCount(), 134515008);  // SmolLM-135M's published count
  auto tiny = ParseShape("tinyllama-1.1b");
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->ParameterCount(), 1100048384);  // TinyLlama-1.1B
  auto l32 = ParseShape("llama-3.2-1b");
  ASSERT_TRUE(l32.ok());
  EXPECT_EQ(l32->ParameterCount(), 1235814400);  // Llama-3.2-1B
  EXPECT_DOUBLE_EQ(l32->rope_base, 500000.0);
  for (const auto& p : ModelPresets()) EXPECT_TRUE(p.Validate().ok()) << p.name;
}

TEST(ModelShapeTest, Llama31_8bPreset) {
  auto s = ParseShape("llama-3.1-8b");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->arch, "llama");
  EXPECT_EQ(s->dim, 4096);
  EXPECT_EQ(s->layers, 32);
  EXPECT_EQ(s->heads, 32);
  EXPECT_EQ(s->kv_heads, 8);
  EXPECT_EQ(s->ffn, 14336);
  EXPECT_EQ(s->vocab, 128256);
  EXPECT_EQ(s->context, 131072);
  EXPECT_DOUBLE_EQ(s->rope_base, 500000.0);
  EXPECT_FALSE(s->tied);
  EXPECT_EQ(s->ParameterCount(), 8030261248);  // Llama-3.1-8B's published count
}

TEST(ModelShapeTest, PresetsTakeKeyValueOverrides) {
  auto s = ParseShape("llama-3.2-1b,layers=8");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->layers, 8);
  EXPECT_EQ(s->name, "llama-3.2-1b+layers=8");
  // Everything else is the preset's.
  auto p = ParseShape("llama-3.2-1b");
  ASSERT_TRUE(p.ok());
  ModelShape want = *p;
  want.layers = 8;
  want.name = s->name;
  EXPECT_EQ(s->ToString(), want.ToString());
  EXPECT_EQ(s->arch, "llama");
  EXPECT_TRUE(s->tied);

  auto t = ParseShape(" llama-3.1-8b , layers=2, vocab=1000,ctx=4096,kv_heads=4,tied=1");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->layers, 2);
  EXPECT_EQ(t->vocab, 1000);
  EXPECT_EQ(t->context, 4096);
  EXPECT_EQ(t->kv_heads, 4);
  EXPECT_TRUE(t->tied);
  EXPECT_EQ(t->dim, 4096);
  EXPECT_EQ(t->ffn, 14336);
  EXPECT_DOUBLE_EQ(t->rope_base, 500000.0);
  // Changing heads keeps the preset's kv_heads (no custom-spec default).
  auto h = ParseShape("llama-3.1-8b,heads=16");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->kv_heads, 8);
  // The family flag applies with overrides too.
  auto q = ParseShape("llama-3.2-1b,layers=2", "qwen2");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->arch, "qwen2");

  struct Bad {
    const char* spec;
    const char* says;
  };
  const Bad bad[] = {
      {"llama-3.2-1b,color=red", "unknown key 'color'"},
      {"llama-3.2-1b,color=red", "overriding preset 'llama-3.2-1b'"},
      {"llama-3.2-1b,layers", "'layers' is not key=value"},
      {"llama-3.2-1b,layers=x", "layers='x' is not an integer"},
      {"llama-3.2-1b,layers=0", "layers=0 out of range"},
      {"llama-3.2-1b,heads=7", "heads=7 does not divide dim=2048"},
      {"llama-3.2-1b,tiny-llama", "not key=value"},
      {"gpt-9,layers=2", "unknown preset 'gpt-9'"},
  };
  for (const Bad& b : bad) {
    auto r = ParseShape(b.spec);
    ASSERT_FALSE(r.ok()) << b.spec;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(b.says), std::string::npos)
        << b.spec << " -> " << r.status().message();
  }
}

TEST(ModelShapeTest, CustomSpecsAndErrors) {
  auto s = ParseShape(" dim=128, layers=3,heads=4,ffn=256,vocab=1000,rope_base=5e5,tied=1");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->kv_heads, 4);  // defaults to heads
  EXPECT_EQ(s->head_dim(), 32);
  EXPECT_DOUBLE_EQ(s->rope_base, 5e5);
  EXPECT_TRUE(s->tied);

  struct Bad {
    const char* spec;
    const char* says;
  };
  const Bad bad[] = {
      {"", "empty"},
      {"gpt-9", "unknown preset 'gpt-9'"},
      {"dim=64,layers=2,heads=4,ffn=128", "missing vocab"},
      {"dim=64,layers=2,heads=4,ffn=128,vocab=x", "vocab='x'"},
      {"dim=64,layers=2,heads=5,ffn=128,vocab=300", "heads=5 does not divide dim=64"},
      {"dim=64,layers=2,heads=4,kv_heads=3,ffn=128,vocab=300", "kv_heads=3"},
      {"dim=64,layers=2,heads=4,ffn=128,vocab=100", "vocab=100 too small"},
      {"dim=64,layers=0,heads=4,ffn=128,vocab=300", "layers=0 out of range"},
      {"dim=64,layers=2,heads=4,ffn=128,vocab=300,color=red", "unknown key 'color'"},
      {"dim=64,layers=2,heads=4,ffn=128,vocab=300,tied=yes", "tied='yes'"},
      {"dim=64,layers", "'layers' is not key=value"},
      {"dim=60,layers=1,heads=4,ffn=128,vocab=300", "must be even"},
  };
  for (const Bad& b : bad) {
    auto r = ParseShape(b.spec);
    ASSERT_FALSE(r.ok()) << b.spec;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(b.says), std::string::npos)
        << b.spec << " -> " << r.status().message();
  }
}

TEST_F(MakeRandomTest, BadArgumentsAreErrorsAndWriteNothing) {
  ModelShape s = Small(false);
  s.heads = 3;
  EXPECT_EQ(MakeRandomModel(s, DType::kF16, Path("x.gguf"), {}, &pool_).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeRandomModel(Small(false), DType::kQ8_K, Path("x.gguf"), {}, &pool_).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(MakeRandomModel(Small(false), DType::kF16, Path("no/such/dir/x.gguf"), {}, &pool_).ok());
  EXPECT_TRUE(fs::is_empty(dir_));
}

}  // namespace
}  // namespace tarmac::gguf
