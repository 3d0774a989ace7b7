// make-random's families (gguf/random_families.h): the tensors and keys each writes, as
// llama.cpp's converter lays them out, the shape checks per family, norm jitter and a copied
// vocabulary. (That llama.cpp loads and agrees with these files is bench/compare_arch.sh's
// job; tests/model/arch_golden_test.cc checks its recorded outputs.)
#include "common/test_util.h"
#include "gguf/make_random.h"

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf/model_presets.h"
#include "gguf/random_families.h"

namespace tarmac::gguf {
namespace {

class MakeRandomFamiliesTest : public testing::TempDirTest {
 protected:
  File Make(const std::string& arch, const std::string& extra, MakeRandomOptions o = {}) {
    auto s = ParseShape("dim=64,layers=2,heads=4,kv_heads=2,ffn=96,vocab=300" + extra, arch);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    const std::string out = Path(arch + std::to_string(n_++) + ".gguf");
    auto sum = MakeRandomModel(*s, DType::kF16, out, o, &pool_);
    EXPECT_TRUE(sum.ok()) << sum.status().ToString();
    auto f = File::Open(out);
    EXPECT_TRUE(f.ok());
    return std::move(*f);
  }
  static std::set<std::string> BlockTensors(const File& f) {
    std::set<std::string> names;
    for (const auto& t : f.tensors()) {
      if (t.name.rfind("blk.1.", 0) == 0) names.insert(t.name.substr(6));
    }
    return names;
  }
  ThreadPool pool_{2};
  int n_ = 0;
};

TEST_F(MakeRandomFamiliesTest, BlockTensorsPerFamily) {
  const std::set<std::string> llama = {
      "attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
      "attn_output.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight",
      "ffn_down.weight"};
  EXPECT_EQ(BlockTensors(Make("llama", "")), llama);
  auto qwen2 = llama;
  qwen2.insert({"attn_q.bias", "attn_k.bias", "attn_v.bias"});
  EXPECT_EQ(BlockTensors(Make("qwen2", "")), qwen2);
  auto qwen3 = llama;
  qwen3.insert({"attn_q_norm.weight", "attn_k_norm.weight"});
  EXPECT_EQ(BlockTensors(Make("qwen3", "")), qwen3);
  auto gemma2 = llama;
  gemma2.insert({"post_attention_norm.weight", "post_ffw_norm.weight"});
  EXPECT_EQ(BlockTensors(Make("gemma2", ",tied=1")), gemma2);
  auto gemma3 = gemma2;
  gemma3.insert({"attn_q_norm.weight", "attn_k_norm.weight"});
  EXPECT_EQ(BlockTensors(Make("gemma3", "")), gemma3);
  const std::set<std::string> phi3 = {"attn_norm.weight", "attn_qkv.weight",
                                      "attn_output.weight", "ffn_norm.weight", "ffn_up.weight",
                                      "ffn_down.weight"};
  EXPECT_EQ(BlockTensors(Make("phi3", "")), phi3);
  // Mixtral-style llama and qwen3moe: a router and stacked experts in place of the FFN.
  auto moe = llama;
  for (const char* t : {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"}) moe.erase(t);
  moe.insert({"ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight",
              "ffn_down_exps.weight"});
  EXPECT_EQ(BlockTensors(Make("llama", ",experts=4,experts_used=2")), moe);
  auto qwen3moe = moe;
  qwen3moe.insert({"attn_q_norm.weight", "attn_k_norm.weight"});
  EXPECT_EQ(BlockTensors(Make("qwen3moe", ",experts=4,experts_used=2")), qwen3moe);
  // gpt-oss: biases everywhere, sinks, and its FFN norm under the name post_attention_norm.
  auto gpt_oss = moe;
  gpt_oss.erase("ffn_norm.weight");
  gpt_oss.insert({"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias",
                  "attn_sinks.weight", "post_attention_norm.weight", "ffn_gate_inp.bias",
                  "ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias"});
  EXPECT_EQ(BlockTensors(Make("gpt-oss", ",experts=4,experts_used=2")), gpt_oss);
}

TEST_F(MakeRandomFamiliesTest, ExpertTensorsAndKeys) {
  const File q = Make("qwen3moe", ",experts=8,experts_used=2,expert_ffn=32");
  EXPECT_EQ(q.FindTensor("blk.0.ffn_gate_inp.weight")->dims, (std::vector<int64_t>{64, 8}));
  EXPECT_EQ(q.FindTensor("blk.0.ffn_gate_inp.weight")->type, DType::kF32);
  EXPECT_EQ(q.FindTensor("blk.1.ffn_up_exps.weight")->dims, (std::vector<int64_t>{64, 32, 8}));
  EXPECT_EQ(q.FindTensor("blk.1.ffn_down_exps.weight")->dims, (std::vector<int64_t>{32, 64, 8}));
  EXPECT_EQ(*q.GetUint("qwen3moe.expert_count"), 8u);
  EXPECT_EQ(*q.GetUint("qwen3moe.expert_used_count"), 2u);
  EXPECT_EQ(*q.GetUint("qwen3moe.expert_feed_forward_length"), 32u);
  // Mixtral's experts are feed_forward_length wide, and its converter writes no expert width.
  const File m = Make("llama", ",experts=4,experts_used=2");
  EXPECT_EQ(m.FindTensor("blk.0.ffn_gate_exps.weight")->dims, (std::vector<int64_t>{64, 96, 4}));
  EXPECT_EQ(m.Find("llama.expert_feed_forward_length"), nullptr);
  const File g = Make("gpt-oss", ",experts=4,experts_used=2,yarn=32,orig_ctx=256,ctx=4096");
  EXPECT_EQ(g.FindTensor("blk.0.ffn_down_exps.bias")->dims, (std::vector<int64_t>{64, 4}));
  EXPECT_EQ(g.FindTensor("blk.0.attn_sinks.weight")->dims, (std::vector<int64_t>{4}));
  EXPECT_EQ(*g.GetString("gpt-oss.rope.scaling.type"), "yarn");
  EXPECT_DOUBLE_EQ(*g.GetFloat("gpt-oss.rope.scaling.factor"), 32.0);
  EXPECT_EQ(*g.GetUint("gpt-oss.rope.scaling.original_context_length"), 256u);
  // The presets: Qwen3-30B-A3B has ~30.5B parameters, ~3.3B active; gpt-oss-20b 20.9B, 3.6B
  // active as OpenAI counts them (without the 0.58B token embedding, which we count).
  auto q30 = ParseShape("qwen3-30b-a3b");
  ASSERT_TRUE(q30.ok());
  EXPECT_NEAR(q30->ParameterCount() / 1e9, 30.5, 0.2);
  EXPECT_NEAR(q30->ActiveParameterCount() / 1e9, 3.3, 0.1);
  auto oss = ParseShape("gpt-oss-20b");
  ASSERT_TRUE(oss.ok()) << oss.status().ToString();
  EXPECT_NEAR(oss->ParameterCount() / 1e9, 20.9, 0.2);
  EXPECT_NEAR(oss->ActiveParameterCount() / 1e9, 3.6 + 0.58, 0.1);
  EXPECT_EQ(ParseShape("qwen3-30b-a3b,layers=24")->layers, 24);
}

TEST_F(MakeRandomFamiliesTest, ShapesOfFamilyTensors) {
  const File g = Make("gemma3", ",head_dim=48");
  EXPECT_EQ(g.FindTensor("blk.0.attn_q.weight")->dims, (std::vector<int64_t>{64, 192}));
  EXPECT_EQ(g.FindTensor("blk.0.attn_output.weight")->dims, (std::vector<int64_t>{192, 64}));
  EXPECT_EQ(g.FindTensor("blk.0.attn_q_norm.weight")->dims, (std::vector<int64_t>{48}));
  EXPECT_EQ(*g.GetUint("gemma3.attention.key_length"), 48u);
  const File p = Make("phi3", ",ctx=1024,orig_ctx=256");
  EXPECT_EQ(p.FindTensor("blk.0.attn_qkv.weight")->dims, (std::vector<int64_t>{64, 64 + 2 * 32}));
  EXPECT_EQ(p.FindTensor("blk.0.ffn_up.weight")->dims, (std::vector<int64_t>{64, 2 * 96}));
  EXPECT_EQ(p.FindTensor("rope_factors_long.weight")->dims, (std::vector<int64_t>{8}));
  EXPECT_EQ(p.FindTensor("rope_factors_short.weight")->type, DType::kF32);
  EXPECT_EQ(*p.GetUint("phi3.rope.scaling.original_context_length"), 256u);
  EXPECT_NEAR(*p.GetFloat("phi3.rope.scaling.attn_factor"),
              std::sqrt(1 + std::log(4.0) / std::log(256.0)), 1e-6);
  EXPECT_EQ(*p.GetUint("phi3.attention.sliding_window"), 0u);  // as the converter writes it
}

TEST_F(MakeRandomFamiliesTest, FamilyKeys) {
  const File g2 = Make("gemma2", ",tied=1");
  EXPECT_EQ(*g2.GetString("general.architecture"), "gemma2");
  EXPECT_EQ(g2.FindTensor("output.weight"), nullptr);
  EXPECT_DOUBLE_EQ(*g2.GetFloat("gemma2.attn_logit_softcapping"), 50.0);
  EXPECT_DOUBLE_EQ(*g2.GetFloat("gemma2.final_logit_softcapping"), 30.0);
  EXPECT_EQ(*g2.GetUint("gemma2.attention.sliding_window"), 4096u);
  EXPECT_EQ(g2.Find("gemma2.rope.freq_base"), nullptr);  // its converter writes none
  const File g3 = Make("gemma3", ",window=32,swa_pattern=0,rope_base_swa=10000");
  EXPECT_EQ(*g3.GetUint("gemma3.attention.sliding_window"), 32u);
  EXPECT_EQ(*g3.GetUint("gemma3.attention.sliding_window_pattern"), 0u);
  EXPECT_DOUBLE_EQ(*g3.GetFloat("gemma3.rope.freq_base_swa"), 10000.0);
  EXPECT_EQ(g3.Find("gemma3.final_logit_softcapping"), nullptr);
  const File l = Make("llama", ",window=64");
  EXPECT_EQ(*l.GetUint("llama.attention.sliding_window"), 64u);
  EXPECT_EQ(Make("llama", "").Find("llama.attention.sliding_window"), nullptr);
}

TEST_F(MakeRandomFamiliesTest, ShapeChecksPerFamily) {
  auto bad = [](const std::string& spec, const std::string& arch, const std::string& what) {
    auto s = ParseShape(spec, arch);
    ASSERT_FALSE(s.ok()) << spec;
    EXPECT_NE(s.status().message().find(what), std::string::npos) << s.status().message();
  };
  const std::string base = "dim=64,layers=2,heads=4,kv_heads=2,ffn=96,vocab=300";
  bad(base, "gemma2", "always tied");
  bad(base + ",head_dim=32", "phi3", "head_dim = dim/heads");
  bad(base + ",rot=8", "qwen3", "rotates every head dim");
  bad(base + ",window=8", "qwen2", "window= is not part of a qwen2 model");
  bad(base + ",swa_pattern=2", "llama", "gemma2/gemma3 keys");
  bad(base + ",attn_softcap=5", "gemma3", "no attention soft-capping");
  bad(base + ",orig_ctx=100", "llama", "needs a phi3 model");
  bad(base, "mamba", "arch 'mamba' is not one make-random writes (llama, qwen2, qwen3, qwen3moe, "
                     "gpt-oss, gemma2, gemma3, phi3)");
  bad(base, "qwen3moe", "a qwen3moe model has experts");
  bad(base + ",experts=8,experts_used=9", "qwen3moe", "experts_used=9 must be in [1, experts=8]");
  bad(base + ",experts=8,experts_used=2", "qwen2", "a qwen2 model has no experts");
  bad(base + ",experts=8,experts_used=2,router_ties=3", "llama", "router_ties=3 must divide");
  bad(base + ",yarn=32", "llama", "yarn=32 needs a gpt-oss model");
  EXPECT_TRUE(ParseShape("gemma3-1b").ok());
  EXPECT_EQ(ParseShape("gemma3-1b")->arch, "gemma3");
  EXPECT_EQ(ParseShape("llama-3.2-1b", "qwen3")->arch, "qwen3");  // --arch over the preset's
}

TEST_F(MakeRandomFamiliesTest, NormJitter) {
  MakeRandomOptions o;
  o.norm_jitter = 0.2;
  const File f = Make("gemma3", "", o);
  const TensorInfo* t = f.FindTensor("blk.0.post_ffw_norm.weight");
  ASSERT_EQ(t->type, DType::kF32);
  const float* v = reinterpret_cast<const float*>(t->data);
  float lo = 2, hi = 0;
  for (int i = 0; i < 64; ++i) lo = std::min(lo, v[i]), hi = std::max(hi, v[i]);
  EXPECT_GE(lo, 0.8f);
  EXPECT_LE(hi, 1.2f);
  EXPECT_GT(hi - lo, 0.1f);
  o.norm_jitter = 1.5;
  auto s = ParseShape("dim=64,layers=1,heads=4,ffn=96,vocab=300");
  EXPECT_EQ(MakeRandomModel(*s, DType::kF16, Path("j.gguf"), o, &pool_).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(MakeRandomFamiliesTest, VocabularyFromAnotherFile) {
  // A source with a 3-token SentencePiece-style vocabulary and a key that is not tokenizer.*.
  Writer w;
  w.SetKV("general.architecture", Value::Str("llama"));
  w.SetKV("tokenizer.ggml.model", Value::Str("llama"));
  w.SetKV("tokenizer.ggml.tokens", Value::StrArray({"<unk>", "<s>", "</s>"}));
  w.SetKV("tokenizer.ggml.scores", Value::F32Array(std::vector<float>{0, 0, 0}));
  w.SetKV("tokenizer.ggml.bos_token_id", Value::U32(1));
  ASSERT_TRUE(w.Write(Path("vocab.gguf")).ok());
  MakeRandomOptions o;
  o.vocab_from = Path("vocab.gguf");
  auto s = ParseShape("dim=64,layers=1,heads=4,ffn=96,vocab=300,tied=1", "gemma2");
  auto sum = MakeRandomModel(*s, DType::kF16, Path("g.gguf"), o, &pool_);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  ASSERT_FALSE(sum->notes.empty());
  EXPECT_NE(sum->notes[0].find("vocab: 3 tokens"), std::string::npos);
  auto f = File::Open(Path("g.gguf"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->FindTensor("token_embd.weight")->dims, (std::vector<int64_t>{64, 3}));
  EXPECT_EQ(*f->GetString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(f->Find("tokenizer.ggml.merges"), nullptr);
  EXPECT_EQ(*f->GetString("general.architecture"), "gemma2");
  o.vocab_from = Path("absent.gguf");
  EXPECT_EQ(MakeRandomModel(*s, DType::kF16, Path("h.gguf"), o, &pool_).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tarmac::gguf
