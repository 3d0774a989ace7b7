// The architecture descriptions as LoadModelConfig and LoadWeights read them: which layers
// are windowed and with which rope, soft-cap defaults and overrides, the query scale rule,
// fused tensors, and the load errors (unsupported architecture, a missing tensor, keys that
// do not fit), on small files make-random writes (edited where a test needs a broken one).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf/make_random.h"
#include "gguf/model_presets.h"
#include "model/arch.h"
#include "model/llama_model.h"
#include "model/model_config.h"

namespace tarmac::model {
namespace {

class ArchConfigTest : public ::testing::Test {
 protected:
  // A random model of `arch` with `shape` extras ("" or ",window=8,..."), f32.
  std::string Make(const std::string& arch, const std::string& extra, int layers = 4) {
    const std::string spec = "dim=64,layers=" + std::to_string(layers) +
                             ",heads=4,kv_heads=2,ffn=96,vocab=300" + extra;
    auto shape = gguf::ParseShape(spec, arch);
    EXPECT_TRUE(shape.ok()) << shape.status().ToString();
    const std::string path =
        ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-arch_config_" + std::to_string(n_++) + ".gguf";
    auto res = gguf::MakeRandomModel(*shape, DType::kF32, path, {}, &pool_);
    EXPECT_TRUE(res.ok()) << res.status().ToString();
    return path;
  }

  // A copy of `path` without tensor `drop` and the keys `drop_keys`, with the keys of `set`
  // replaced or added.
  std::string Edit(const std::string& path, const std::string& drop,
                   std::vector<gguf::KeyValue> set = {},
                   const std::vector<std::string>& drop_keys = {}) {
    auto f = gguf::File::Open(path);
    EXPECT_TRUE(f.ok());
    gguf::Writer w;
    for (const auto& kv : f->metadata()) {
      if (std::find(drop_keys.begin(), drop_keys.end(), kv.key) == drop_keys.end())
        w.SetKV(kv.key, kv.value);
    }
    for (auto& kv : set) w.SetKV(kv.key, kv.value);
    for (const auto& t : f->tensors()) {
      if (t.name != drop) {
        EXPECT_TRUE(w.AddTensor(t.name, t.dims, t.type, t.bytes()).ok());
      }
    }
    const std::string out =
        ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-arch_config_" + std::to_string(n_++) + ".gguf";
    EXPECT_TRUE(w.Write(out).ok());
    return out;
  }

  ModelConfig Config(const std::string& path) {
    auto f = gguf::File::Open(path);
    EXPECT_TRUE(f.ok());
    auto c = LoadModelConfig(*f);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return *c;
  }

  Status LoadError(const std::string& path) {
    auto m = LlamaModel::Load(path);
    return m.ok() ? Status::Ok() : m.status();
  }

  ThreadPool pool_{2};
  int n_ = 0;
};

TEST_F(ArchConfigTest, EveryFamilyIsDescribed) {
  for (const char* name : {"llama", "qwen2", "qwen3", "qwen3moe", "gpt-oss", "gemma2", "gemma3", "phi3"}) {
    const ArchDescription* d = FindArch(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_EQ(d->name, name);
  }
  EXPECT_EQ(FindArch("mamba"), nullptr);
  EXPECT_EQ(SupportedArchNames(), "llama, qwen2, qwen3, qwen3moe, gpt-oss, gemma2, gemma3, phi3");
}

TEST_F(ArchConfigTest, UnsupportedArchitectureNamesTheSupportedOnes) {
  const std::string p =
      Edit(Make("llama", ""), "", {{"general.architecture", gguf::Value::Str("mamba")}});
  const Status st = LoadError(p);
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find(
                "'mamba' is not supported (llama, qwen2, qwen3, qwen3moe, gpt-oss, gemma2, gemma3, phi3)"),
            std::string::npos) << st.message();
}

TEST_F(ArchConfigTest, MissingTensorIsNamed) {
  struct Case { std::string arch, extra, tensor; };
  for (const Case& c : {Case{"gemma2", ",tied=1", "blk.2.post_ffw_norm.weight"},
                        Case{"gemma3", "", "blk.0.attn_k_norm.weight"},
                        Case{"qwen3", "", "blk.3.attn_q_norm.weight"},
                        Case{"qwen2", "", "blk.1.attn_v.bias"},
                        Case{"phi3", "", "blk.0.attn_qkv.weight"},
                        Case{"llama", "", "blk.1.ffn_gate.weight"}}) {
    const Status st = LoadError(Edit(Make(c.arch, c.extra), c.tensor));
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.tensor;
    // phi3 without attn_qkv looks for the separate projections, and names the first.
    const std::string want = c.arch == "phi3" ? "blk.0.attn_q.weight" : c.tensor;
    EXPECT_NE(st.message().find("tensor " + want + " is missing (a " + c.arch + " model needs it)"),
              std::string::npos) << st.message();
  }
}

TEST_F(ArchConfigTest, Gemma2AlternatesWindowsWithDefaults) {
  const std::string keyed = Make("gemma2", ",tied=1,head_dim=32,window=16,attn_softcap=10,"
                                 "final_softcap=5");
  const ModelConfig c = Config(keyed);
  EXPECT_EQ(c.layer_window, (std::vector<int32_t>{16, 0, 16, 0}));  // period 2: odd ones global
  EXPECT_FLOAT_EQ(c.attn_softcap, 10.0f);
  EXPECT_FLOAT_EQ(c.final_softcap, 5.0f);
  EXPECT_FLOAT_EQ(c.rope_freq_base_swa, c.rope_freq_base);
  EXPECT_FALSE(c.separate_swa_rope());
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / std::sqrt(32.0f));
  // Gemma 2's windowed layers share the global rope, linear scaling included.
  const ModelConfig scaled = Config(Edit(keyed, "", {{"gemma2.rope.scaling.type", gguf::Value::Str("linear")},
                                                     {"gemma2.rope.scaling.factor", gguf::Value::F32(2.0f)}}));
  EXPECT_FLOAT_EQ(scaled.rope_freq_scale_swa, 0.5f);
  EXPECT_FALSE(scaled.separate_swa_rope());
  EXPECT_EQ(c.KvRetentionWindow(), 0);  // global layers keep everything
  // Keys absent: llama.cpp's defaults (window 4096, caps 50 / 30).
  const ModelConfig d = Config(Edit(keyed, "", {},
                                    {"gemma2.attention.sliding_window",
                                     "gemma2.attn_logit_softcapping",
                                     "gemma2.final_logit_softcapping"}));
  EXPECT_EQ(d.layer_window, (std::vector<int32_t>{4096, 0, 4096, 0}));
  EXPECT_FLOAT_EQ(d.attn_softcap, 50.0f);
  EXPECT_FLOAT_EQ(d.final_softcap, 30.0f);
}

TEST_F(ArchConfigTest, Gemma3WindowsOnlyWhenNamedAndItsLocalRope) {
  const ModelConfig none = Config(Make("gemma3", ""));
  EXPECT_FALSE(none.any_window());
  EXPECT_FLOAT_EQ(none.final_softcap, 0.0f);
  EXPECT_FLOAT_EQ(none.attn_softcap, 0.0f);
  const ModelConfig c = Config(Make("gemma3", ",window=8,rope_base=1000000", 7));
  EXPECT_EQ(c.layer_window, (std::vector<int32_t>{8, 8, 8, 8, 8, 0, 8}));  // period 6
  EXPECT_FLOAT_EQ(c.rope_freq_base, 1e6f);
  EXPECT_FLOAT_EQ(c.rope_freq_base_swa, 10000.0f);
  EXPECT_TRUE(c.separate_swa_rope());
  // Gemma 3's linear rope scaling is the global layers' only.
  const ModelConfig scaled = Config(Edit(Make("gemma3", ",window=8"), "",
                                         {{"gemma3.rope.scaling.type", gguf::Value::Str("linear")},
                                          {"gemma3.rope.scaling.factor", gguf::Value::F32(8.0f)}}));
  EXPECT_FLOAT_EQ(scaled.rope_freq_scale, 0.125f);
  EXPECT_FLOAT_EQ(scaled.rope_freq_scale_swa, 1.0f);
  const ModelConfig all = Config(Make("gemma3", ",window=8,swa_pattern=0,rope_base_swa=500"));
  EXPECT_EQ(all.layer_window, (std::vector<int32_t>{8, 8, 8, 8}));
  EXPECT_EQ(all.KvRetentionWindow(), 8);
  EXPECT_FLOAT_EQ(all.rope_freq_base_swa, 500.0f);
  const ModelConfig three = Config(Make("gemma3", ",window=8,swa_pattern=3"));
  EXPECT_EQ(three.layer_window, (std::vector<int32_t>{8, 8, 0, 8}));
}

TEST_F(ArchConfigTest, LlamaWindowCoversEveryLayerPhi3IgnoresIt) {
  const ModelConfig c = Config(Make("llama", ",window=12"));
  EXPECT_EQ(c.layer_window, (std::vector<int32_t>{12, 12, 12, 12}));
  EXPECT_EQ(c.KvRetentionWindow(), 12);
  EXPECT_EQ(Config(Make("llama", "")).KvRetentionWindow(), 0);
  const std::string phi = Edit(Make("phi3", ""), "",
                               {{"phi3.attention.sliding_window", gguf::Value::U32(16)}});
  EXPECT_FALSE(Config(phi).any_window());
}

TEST_F(ArchConfigTest, GemmaQueryScaleFollowsLlamaCppShapeRule) {
  // 46 blocks is Gemma 2 27B's shape: queries scaled by 1/sqrt(n_embd / n_head) = 1/4 here.
  const std::string p = Edit(Make("gemma2", ",tied=1,head_dim=32"), "",
                             {{"gemma2.block_count", gguf::Value::U32(46)}});
  auto f = gguf::File::Open(p);
  auto c = LoadModelConfig(*f);
  ASSERT_TRUE(c.ok());
  EXPECT_FLOAT_EQ(c->attn_scale, 0.25f);
}

TEST_F(ArchConfigTest, Phi3LongRopeKeysAndFactors) {
  const std::string p = Make("phi3", ",ctx=1024,orig_ctx=128");
  const ModelConfig c = Config(p);
  EXPECT_EQ(c.n_ctx_orig, 128);
  EXPECT_NEAR(c.rope_attn_factor, std::sqrt(1.0 + std::log(8.0) / std::log(128.0)), 1e-6);
  auto m = LlamaModel::Load(p);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  // One factor tensor without the other is an error naming both.
  const Status st = LoadError(Edit(p, "rope_factors_short.weight"));
  EXPECT_NE(st.message().find("rope_factors_long.weight and rope_factors_short.weight"),
            std::string::npos) << st.message();
}

TEST_F(ArchConfigTest, BadKeysAreNamed) {
  const Status q3 = LoadError(Edit(Make("qwen3", ""), "",
                                   {{"qwen3.rope.dimension_count", gguf::Value::U32(8)}}));
  EXPECT_NE(q3.message().find("qwen3.rope.dimension_count 8 must equal the head dim 16"),
            std::string::npos) << q3.message();
  const Status pat = LoadError(Edit(
      Make("gemma3", ",window=8"), "",
      {{"gemma3.attention.sliding_window_pattern",
        gguf::Value::Array(gguf::ValueType::kBool, {gguf::Value::Bool(true)})}}));
  EXPECT_EQ(pat.code(), StatusCode::kUnimplemented);
  EXPECT_NE(pat.message().find("gemma3.attention.sliding_window_pattern"), std::string::npos);
  const Status cap = LoadError(Edit(Make("gemma2", ",tied=1"), "",
                                    {{"gemma2.attn_logit_softcapping", gguf::Value::F32(-1)}}));
  EXPECT_NE(cap.message().find("gemma2.attn_logit_softcapping = -1 must be >= 0"),
            std::string::npos) << cap.message();
}

// ---- mixture of experts

constexpr const char* kMoe = ",head_dim=16,experts=8,experts_used=2,expert_ffn=32";

TEST_F(ArchConfigTest, ExpertsAreReadAsLlamaCppReadsThem) {
  const ModelConfig q = Config(Make("qwen3moe", kMoe));
  EXPECT_TRUE(q.is_moe());
  EXPECT_EQ(q.router.n_expert, 8);
  EXPECT_EQ(q.router.n_used, 2);
  EXPECT_EQ(q.n_ff_exp, 32);
  EXPECT_EQ(q.router.gating, ExpertGating::kSoftmax);
  EXPECT_TRUE(q.router.normalize);
  EXPECT_EQ(q.router.scale, 1.0f);
  // Without expert_feed_forward_length: feed_forward_length / expert_used_count (96 / 2).
  const ModelConfig q2 = Config(Edit(Make("qwen3moe", kMoe), "", {},
                                     {"qwen3moe.expert_feed_forward_length"}));
  EXPECT_EQ(q2.n_ff_exp, 48);
  // Mixtral: a llama file with experts, each feed_forward_length wide; a plain llama has none.
  const ModelConfig m = Config(Make("llama", ",experts=4,experts_used=2"));
  EXPECT_EQ(m.router.n_expert, 4);
  EXPECT_EQ(m.n_ff_exp, 96);
  EXPECT_FALSE(Config(Make("llama", "")).is_moe());
  auto model = LlamaModel::Load(Make("qwen3moe", kMoe));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  // A token reads 2 of 8 experts, and one row of the (untied) token embedding: the active
  // bytes leave out 3/4 of the experts' and the embedding's.
  const int64_t experts = 4LL * 3 * 8 * 32 * 64 * 4;  // layers, matrices, experts, f32 bytes
  const int64_t embedding = 300LL * 64 * 4;
  EXPECT_EQ((*model)->weight_bytes() - (*model)->active_weight_bytes(),
            experts * 3 / 4 + embedding);
}

TEST_F(ArchConfigTest, BadExpertFilesAreRefusedNamingTheKeyOrTensor) {
  const std::string good = Make("qwen3moe", kMoe);
  auto expect = [&](const std::string& path, StatusCode code, const std::string& text) {
    const Status st = LoadError(path);
    EXPECT_EQ(st.code(), code) << st.ToString();
    EXPECT_NE(st.message().find(text), std::string::npos) << st.message();
  };
  // The tensors hold 8 experts; the key says 4.
  expect(Edit(good, "", {{"qwen3moe.expert_count", gguf::Value::U32(4)}}),
         StatusCode::kInvalidArgument,
         "tensor blk.0.ffn_gate_inp.weight routes to 8 experts, but qwen3moe.expert_count is 4");
  expect(Edit(good, "", {{"qwen3moe.expert_used_count", gguf::Value::U32(9)}}),
         StatusCode::kInvalidArgument, "qwen3moe.expert_used_count = 9 must be in [1, expert_count = 8]");
  expect(Edit(good, "", {}, {"qwen3moe.expert_count"}), StatusCode::kInvalidArgument,
         "qwen3moe.expert_count is missing or 0");
  expect(Edit(good, "", {{"qwen3moe.expert_count", gguf::Value::U32(1000)}}),
         StatusCode::kInvalidArgument, "over the 512 experts");
  expect(Edit(good, "", {{"qwen3moe.expert_gating_func", gguf::Value::U32(7)}}),
         StatusCode::kInvalidArgument, "qwen3moe.expert_gating_func = 7 is not a known value");
  expect(Edit(good, "", {{"qwen3moe.expert_gating_func", gguf::Value::U32(2)}}),
         StatusCode::kUnimplemented,
         "qwen3moe.expert_gating_func = 2 (sigmoid): llama.cpp runs qwen3moe models with softmax");
  expect(Edit(good, "", {{"qwen3moe.expert_weights_norm", gguf::Value::Bool(false)}}),
         StatusCode::kUnimplemented, "qwen3moe.expert_weights_norm = 0 (not renormalised)");
  expect(Edit(good, "blk.2.ffn_down_exps.weight"), StatusCode::kInvalidArgument,
         "tensor blk.2.ffn_down_exps.weight is missing (a qwen3moe model needs it)");
  // A dense family does not take experts.
  expect(Edit(Make("qwen3", ",head_dim=16"), "", {{"qwen3.expert_count", gguf::Value::U32(8)}}),
         StatusCode::kUnimplemented, "qwen3.expert_count = 8: tarmac reads no experts for qwen3");
}

TEST_F(ArchConfigTest, GptOssReadsItsWindowsYarnAndBiases) {
  const std::string spec = ",head_dim=16,experts=4,experts_used=2,window=8,yarn=32,orig_ctx=64,ctx=2048";
  const std::string path = Make("gpt-oss", spec);
  const ModelConfig c = Config(path);
  EXPECT_EQ(c.layer_window, (std::vector<int32_t>{8, 0, 8, 0}));  // even layers windowed
  EXPECT_TRUE(c.yarn);
  EXPECT_EQ(c.yarn_orig_ctx, 64);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 1.0f / 32);
  EXPECT_EQ(c.router.gating, ExpertGating::kSoftmaxWeight);
  EXPECT_FALSE(c.router.normalize);
  auto expect = [&](const std::string& p, StatusCode code, const std::string& text) {
    const Status st = LoadError(p);
    EXPECT_EQ(st.code(), code) << st.ToString();
    EXPECT_NE(st.message().find(text), std::string::npos) << st.message();
  };
  expect(Edit(path, "blk.1.attn_sinks.weight"), StatusCode::kInvalidArgument,
         "tensor blk.1.attn_sinks.weight is missing (a gpt-oss model needs it)");
  expect(Edit(path, "blk.0.ffn_up_exps.bias"), StatusCode::kInvalidArgument,
         "tensor blk.0.ffn_up_exps.bias is missing");
  expect(Edit(path, "blk.0.post_attention_norm.weight"), StatusCode::kInvalidArgument,
         "tensor blk.0.post_attention_norm.weight is missing");
  expect(Edit(path, "", {{"gpt-oss.rope.scaling.type", gguf::Value::Str("longrope")}}),
         StatusCode::kUnimplemented, "'longrope' is not supported (none, linear, yarn)");
  expect(Edit(path, "", {{"gpt-oss.expert_gating_func", gguf::Value::U32(1)}}),
         StatusCode::kUnimplemented, "llama.cpp runs gpt-oss models with softmax_weight");
}

TEST_F(ArchConfigTest, ExpertTensorsOfTheWrongShapeOrLayoutAreRefused) {
  const std::string good = Make("qwen3moe", kMoe);
  auto f = gguf::File::Open(good);
  ASSERT_TRUE(f.ok());
  // up_exps written with 7 experts; and the old layout: one 2-D tensor per expert.
  auto rewrite = [&](bool per_expert) {
    gguf::Writer w;
    for (const auto& kv : f->metadata()) w.SetKV(kv.key, kv.value);
    for (const auto& t : f->tensors()) {
      if (t.name == "blk.0.ffn_up_exps.weight" && !per_expert) {
        const std::vector<int64_t> dims = {t.dims[0], t.dims[1], 7};
        EXPECT_TRUE(w.AddTensor(t.name, dims, t.type, t.bytes().subspan(0, t.nbytes / 8 * 7)).ok());
      } else if (t.name == "blk.0.ffn_gate_exps.weight" && per_expert) {
        const uint64_t each = t.nbytes / 8;
        for (int e = 0; e < 8; ++e) {
          EXPECT_TRUE(w.AddTensor("blk.0.ffn_gate." + std::to_string(e) + ".weight",
                                  {t.dims[0], t.dims[1]}, t.type, t.bytes().subspan(e * each, each))
                          .ok());
        }
      } else {
        EXPECT_TRUE(w.AddTensor(t.name, t.dims, t.type, t.bytes()).ok());
      }
    }
    const std::string out = ::testing::TempDir() + "/" + std::to_string(::getpid()) +
                            "-arch_config_" + std::to_string(n_++) + ".gguf";
    EXPECT_TRUE(w.Write(out).ok());
    return out;
  };
  const Status shape = LoadError(rewrite(false));
  EXPECT_EQ(shape.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(shape.message().find("tensor blk.0.ffn_up_exps.weight must be [64, 32, 8]"),
            std::string::npos) << shape.message();
  const Status split = LoadError(rewrite(true));
  EXPECT_EQ(split.code(), StatusCode::kUnimplemented);
  EXPECT_NE(split.message().find("tensor blk.0.ffn_gate.0.weight: one 2-D tensor per expert"),
            std::string::npos) << split.message();
}

// Logits of positions 0..n-1 of one sequence, in one prefill.
std::vector<float> Prefill(const std::string& path, int32_t n, ThreadPool* pool) {
  auto m = LlamaModel::Load(path);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  const ModelConfig& c = (*m)->config();
  KvCache cache(KvShape{c.n_layer, c.n_head_kv, c.head_dim, 16, (n + 15) / 16});
  ForwardBatch batch;
  batch.block_tables.push_back({});
  for (int32_t b = 0; b < (n + 15) / 16; ++b) batch.block_tables[0].push_back(b);
  for (int32_t i = 0; i < n; ++i) {
    batch.tokens.push_back((i * 37 + 5) % c.n_vocab);
    batch.positions.push_back(i);
    batch.seq.push_back(0);
    batch.slots.push_back(i);
    batch.logits_for.push_back(i);
  }
  std::vector<float> logits;
  (*m)->Forward(batch, &cache, pool, &logits);
  return logits;
}

// Mistral-style llama: with a window of 12 the first 12 positions are those of the same
// weights without a window (bit for bit: the windowed layers keep the global rope, its
// linear scaling included), the later ones are not.
TEST_F(ArchConfigTest, LlamaWindowMasksOnlyPastTheWindow) {
  const std::string plain =
      Edit(Make("llama", ""), "", {{"llama.rope.scaling.type", gguf::Value::Str("linear")},
                                   {"llama.rope.scaling.factor", gguf::Value::F32(4.0f)}});
  const std::string windowed =
      Edit(plain, "", {{"llama.attention.sliding_window", gguf::Value::U32(12)}});
  EXPECT_FALSE(Config(windowed).separate_swa_rope());
  const std::vector<float> a = Prefill(plain, 40, &pool_), b = Prefill(windowed, 40, &pool_);
  const size_t V = 300;
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + 12 * V, b.begin()));
  for (int32_t p = 12; p < 40; ++p) {
    EXPECT_FALSE(std::equal(a.begin() + p * V, a.begin() + (p + 1) * V, b.begin() + p * V))
        << "position " << p;
  }
}

// A fused attn_qkv gives the same logits as the separate projections it stacks.
TEST_F(ArchConfigTest, FusedQkvEqualsSeparate) {
  const std::string sep = Make("qwen3", "");
  auto f = gguf::File::Open(sep);
  ASSERT_TRUE(f.ok());
  gguf::Writer w;
  for (const auto& kv : f->metadata()) w.SetKV(kv.key, kv.value);
  std::vector<std::vector<uint8_t>> fused;
  for (const auto& t : f->tensors()) {
    const std::string& n = t.name;
    if (n.find("attn_k.weight") != std::string::npos || n.find("attn_v.weight") != std::string::npos)
      continue;
    if (n.find("attn_q.weight") != std::string::npos) {
      const std::string p = n.substr(0, n.size() - std::string("attn_q.weight").size());
      std::vector<uint8_t> bytes(t.bytes().begin(), t.bytes().end());
      int64_t rows = t.dims[1];
      for (const char* part : {"attn_k.weight", "attn_v.weight"}) {
        const gguf::TensorInfo* o = f->FindTensor(p + part);
        bytes.insert(bytes.end(), o->bytes().begin(), o->bytes().end());
        rows += o->dims[1];
      }
      fused.push_back(std::move(bytes));
      ASSERT_TRUE(w.AddTensor(p + "attn_qkv.weight", {t.dims[0], rows}, t.type, fused.back()).ok());
      continue;
    }
    ASSERT_TRUE(w.AddTensor(n, t.dims, t.type, t.bytes()).ok());
  }
  const std::string fp =
      ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-arch_config_fused.gguf";
  ASSERT_TRUE(w.Write(fp).ok());
  std::vector<float> a, b;
  for (const std::string& p : {sep, fp}) {
    auto m = LlamaModel::Load(p);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const ModelConfig& c = (*m)->config();
    KvCache cache(KvShape{c.n_layer, c.n_head_kv, c.head_dim, 16, 2});
    ForwardBatch batch;
    batch.block_tables = {{0, 1}};
    for (int32_t i = 0; i < 20; ++i) {
      batch.tokens.push_back((i * 37) % c.n_vocab);
      batch.positions.push_back(i);
      batch.seq.push_back(0);
      batch.slots.push_back(i);
      batch.logits_for.push_back(i);
    }
    (*m)->Forward(batch, &cache, &pool_, p == sep ? &a : &b);
  }
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace tarmac::model
