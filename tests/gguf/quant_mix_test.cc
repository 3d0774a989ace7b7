// llama.cpp's named mixes (gguf/quant_mix.h): the per-tensor types each writes for a small
// llama-shaped model, tabulated here by hand from llama.cpp's rules (src/llama-quant.cpp) for
// this model, not computed by the code under test; --pure; name parsing; general.file_type.
#include "common/test_util.h"
#include "gguf/quant_mix.h"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "gguf/make_random.h"
#include "gguf/model_presets.h"
#include "gguf/quantize_file.h"

namespace tarmac::gguf {
namespace {

// 8 layers, 8 query heads sharing 2 kv heads (n_gqa = 4), every row 256 or 512 long (so no
// block-size fallback), untied unless asked.
ModelShape Llama8(bool tied = false) {
  auto s = ParseShape(std::string("dim=256,layers=8,heads=8,kv_heads=2,ffn=512,vocab=300") +
                      (tied ? ",tied=1" : ""));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return *s;
}

constexpr DType F32 = DType::kF32, Q2K = DType::kQ2_K, Q3K = DType::kQ3_K, Q4K = DType::kQ4_K,
                Q5K = DType::kQ5_K, Q6K = DType::kQ6_K, IQ2XXS = DType::kIQ2_XXS,
                IQ4XS = DType::kIQ4_XS;

// What llama.cpp writes for Llama8(), per mix. For 8 layers use_more_bits(i, 8) holds for
// i < 1, i >= 7 and (i - 1) % 3 == 2: layers 0, 3, 6, 7.
struct Want {
  const char* mix;
  uint32_t file_type;
  DType token_embd, output, attn_q, attn_k, attn_output, ffn_gate, ffn_up;
  DType attn_v[8];
  DType ffn_down[8];
};
const Want kWant[] = {
    // q4_k_m: output q6_K; attn_v and ffn_down of the more-bits layers q6_K.
    {"q4_k_m", 15, Q4K, Q6K, Q4K, Q4K, Q4K, Q4K, Q4K,
     {Q6K, Q4K, Q4K, Q6K, Q4K, Q4K, Q6K, Q6K},
     {Q6K, Q4K, Q4K, Q6K, Q4K, Q4K, Q6K, Q6K}},
    // q5_k_m: the same layers, on a q5_K base.
    {"q5_k_m", 17, Q5K, Q6K, Q5K, Q5K, Q5K, Q5K, Q5K,
     {Q6K, Q5K, Q5K, Q6K, Q5K, Q5K, Q6K, Q6K},
     {Q6K, Q5K, Q5K, Q6K, Q5K, Q5K, Q6K, Q6K}},
    // q3_k_m: the first two attn_v q5_K, the rest q4_K; every ffn_down q4_K (none is in the
    // first 8/16 = 0 layers); attn_output q4_K.
    {"q3_k_m", 12, Q3K, Q6K, Q3K, Q3K, Q4K, Q3K, Q3K,
     {Q5K, Q5K, Q4K, Q4K, Q4K, Q4K, Q4K, Q4K},
     {Q4K, Q4K, Q4K, Q4K, Q4K, Q4K, Q4K, Q4K}},
    // q2_k: attn_v q4_K (n_gqa >= 4), ffn_down and attn_output q3_K.
    {"q2_k", 10, Q2K, Q6K, Q2K, Q2K, Q3K, Q2K, Q2K,
     {Q4K, Q4K, Q4K, Q4K, Q4K, Q4K, Q4K, Q4K},
     {Q3K, Q3K, Q3K, Q3K, Q3K, Q3K, Q3K, Q3K}},
    // iq4_xs: attn_v q5_K (n_gqa >= 4); ffn_down of the first 8/8 = 1 layer q5_K (no imatrix).
    {"iq4_xs", 30, IQ4XS, Q6K, IQ4XS, IQ4XS, IQ4XS, IQ4XS, IQ4XS,
     {Q5K, Q5K, Q5K, Q5K, Q5K, Q5K, Q5K, Q5K},
     {Q5K, IQ4XS, IQ4XS, IQ4XS, IQ4XS, IQ4XS, IQ4XS, IQ4XS}},
    // q6_k: q6_K everywhere (the output rule asks for q6_K too).
    {"q6_k", 18, Q6K, Q6K, Q6K, Q6K, Q6K, Q6K, Q6K,
     {Q6K, Q6K, Q6K, Q6K, Q6K, Q6K, Q6K, Q6K},
     {Q6K, Q6K, Q6K, Q6K, Q6K, Q6K, Q6K, Q6K}},
    // iq2_xxs: output q5_K, untied token_embd q2_K, attn_v q4_K (n_gqa >= 4), the first
    // ffn_down (8/8 = 1 of them) q2_K.
    {"iq2_xxs", 19, Q2K, Q5K, IQ2XXS, IQ2XXS, IQ2XXS, IQ2XXS, IQ2XXS,
     {Q4K, Q4K, Q4K, Q4K, Q4K, Q4K, Q4K, Q4K},
     {Q2K, IQ2XXS, IQ2XXS, IQ2XXS, IQ2XXS, IQ2XXS, IQ2XXS, IQ2XXS}},
};

std::map<std::string, DType> Table(const Want& w) {
  std::map<std::string, DType> t = {{"token_embd.weight", w.token_embd},
                                    {"output.weight", w.output},
                                    {"output_norm.weight", F32}};
  for (int l = 0; l < 8; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    t[p + "attn_norm.weight"] = F32;
    t[p + "ffn_norm.weight"] = F32;
    t[p + "attn_q.weight"] = w.attn_q;
    t[p + "attn_k.weight"] = w.attn_k;
    t[p + "attn_v.weight"] = w.attn_v[l];
    t[p + "attn_output.weight"] = w.attn_output;
    t[p + "ffn_gate.weight"] = w.ffn_gate;
    t[p + "ffn_up.weight"] = w.ffn_up;
    t[p + "ffn_down.weight"] = w.ffn_down[l];
  }
  return t;
}

std::map<std::string, DType> TypesIn(const std::string& path) {
  std::map<std::string, DType> t;
  auto f = File::Open(path);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  if (f.ok()) {
    for (const TensorInfo& ti : f->tensors()) t[ti.name] = ti.type;
  }
  return t;
}

void ExpectSameTypes(const std::map<std::string, DType>& got,
                     const std::map<std::string, DType>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [name, type] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << what << ": " << name;
    EXPECT_EQ(DTypeName(it->second), DTypeName(type)) << what << ": " << name;
  }
}

class QuantMixTest : public testing::TempDirTest {
 protected:
  ThreadPool pool_{2};
};

TEST_F(QuantMixTest, MakeRandomWritesEachMixsTypesAndFileType) {
  for (const Want& w : kWant) {
    auto target = ParseQuantTarget(w.mix);
    ASSERT_TRUE(target.ok()) << target.status().ToString();
    const std::string out = Path(std::string(w.mix) + ".gguf");
    auto sum = MakeRandomModel(Llama8(), *target, out, {}, &pool_);
    ASSERT_TRUE(sum.ok()) << w.mix << ": " << sum.status().ToString();
    EXPECT_TRUE(sum->notes.empty()) << w.mix << ": no fallback expected";
    ExpectSameTypes(TypesIn(out), Table(w), w.mix);
    auto f = File::Open(out);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(*f->GetUint("general.file_type"), w.file_type) << w.mix;
    EXPECT_EQ(*f->GetUint("general.quantization_version"), 2u) << w.mix;
  }
}

TEST_F(QuantMixTest, QuantizeFileChoosesTheSameTypesAsMakeRandom) {
  const std::string f16 = Path("f16.gguf");
  ASSERT_TRUE(MakeRandomModel(Llama8(), DType::kF16, f16, {}, &pool_).ok());
  for (const char* mix : {"q4_k_m", "q2_k", "iq4_xs"}) {
    const Want* w = nullptr;
    for (const Want& c : kWant) {
      if (std::string(c.mix) == mix) w = &c;
    }
    ASSERT_NE(w, nullptr);
    const std::string out = Path(std::string(mix) + "-q.gguf");
    auto sum = QuantizeFile(f16, out, *ParseQuantTarget(mix), {}, &pool_);
    ASSERT_TRUE(sum.ok()) << mix << ": " << sum.status().ToString();
    EXPECT_EQ(sum->fallbacks, 0) << mix;
    ExpectSameTypes(TypesIn(out), Table(*w), mix);
    // Reports: `mixed` exactly for the tensors that are not in the base type (norms aside).
    const DType base = ParseQuantTarget(mix)->base;
    int off_base = 0;
    for (const TensorReport& r : sum->tensors) {
      const bool moved = r.dims.size() > 1 && r.to != base;
      off_base += moved ? 1 : 0;
      EXPECT_EQ(r.mixed, moved) << mix << ": " << r.name;
      EXPECT_EQ(r.note.empty(), !moved) << mix << ": " << r.name << ": " << r.note;
    }
    EXPECT_EQ(sum->mixed, off_base) << mix;
    auto f = File::Open(out);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(*f->GetUint("general.file_type"), w->file_type) << mix;
  }
}

TEST_F(QuantMixTest, TiedEmbeddingsGetTheOutputsType) {
  const std::string out = Path("tied.gguf");
  ASSERT_TRUE(MakeRandomModel(Llama8(true), *ParseQuantTarget("q4_k_m"), out, {}, &pool_).ok());
  const auto types = TypesIn(out);
  EXPECT_EQ(types.count("output.weight"), 0u);
  EXPECT_EQ(types.at("token_embd.weight"), Q6K);
  EXPECT_EQ(types.at("blk.1.attn_q.weight"), Q4K);
}

TEST_F(QuantMixTest, PurePutsTheBaseTypeEverywhere) {
  auto t = ParseQuantTarget("Q4_K_M", /*pure=*/true);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->pure);
  EXPECT_FALSE(t->uses_rules());
  const std::string out = Path("pure.gguf");
  auto sum = MakeRandomModel(Llama8(), *t, out, {}, &pool_);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->mixed, 0);
  auto f = File::Open(out);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f->GetUint("general.file_type"), 15u);  // still the mix's file type, as llama.cpp
  for (const TensorInfo& ti : f->tensors()) {
    EXPECT_EQ(ti.type, ti.dims.size() == 1 ? F32 : Q4K) << ti.name;
  }
  // iq2_s's base type is iq2_xs: pure iq2_s is iq2_xs everywhere, as llama-quantize --pure.
  auto iq = ParseQuantTarget("iq2_s", true);
  ASSERT_TRUE(iq.ok());
  EXPECT_EQ(iq->base, DType::kIQ2_XS);
  const std::string desc_name = "blk.0.attn_v.weight";
  const std::vector<int64_t> dims = {256, 64};
  ModelFacts facts;
  facts.n_layer = 1;
  const std::vector<TensorDesc> one = {{desc_name, dims, DType::kF16}};
  facts.CountTensors(std::vector<std::string>{desc_name});
  auto plan = PlanTensorTypes(*iq, facts, one);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ((*plan)[0].type, DType::kIQ2_XS);
}

TEST(QuantTargetTest, NamesParseAsLlamaCppsFileTypesFirst) {
  struct Case {
    const char* name;
    bool mix;
    DType base;
    uint32_t file_type;
  };
  const Case cases[] = {
      {"q4_k_m", true, Q4K, 15},          {"Q4_K_S", true, Q4K, 14},
      {"q4_k", false, Q4K, 14},           {"q5_k", false, Q5K, 16},
      {"q3_k", false, Q3K, 11},           {"q3_k_l", true, Q3K, 13},
      {"q2_k", true, Q2K, 10},            {"q2_k_s", true, Q2K, 21},
      {"q6_k", true, Q6K, 18},            {"iq2_xxs", true, IQ2XXS, 19},
      {"iq2_s", true, DType::kIQ2_XS, 28}, {"iq2_m", true, DType::kIQ2_S, 29},
      {"iq3_xs", true, DType::kIQ3_S, 22}, {"iq3_m", true, DType::kIQ3_S, 27},
      {"iq4_nl", true, DType::kIQ4_NL, 25}, {"tq1_0", true, DType::kTQ1_0, 36},
      {"mxfp4_moe", true, DType::kMXFP4, 38}, {"mxfp4", false, DType::kMXFP4, 38},
      {"q8_0", true, DType::kQ8_0, 7},    {"f16", true, DType::kF16, 1},
      {"BF16", true, DType::kBF16, 32},   {"f32", true, F32, 0},
  };
  for (const Case& c : cases) {
    auto t = ParseQuantTarget(c.name);
    ASSERT_TRUE(t.ok()) << c.name << ": " << t.status().ToString();
    EXPECT_EQ(t->mix, c.mix) << c.name;
    EXPECT_EQ(t->base, c.base) << c.name;
    EXPECT_EQ(t->file_type, c.file_type) << c.name;
    EXPECT_FALSE(t->pure) << c.name;
  }
  EXPECT_FALSE(ParseQuantTarget("f16")->uses_rules());  // nothing quantized, nothing to choose
  EXPECT_TRUE(ParseQuantTarget("q8_0")->uses_rules());

  for (const char* bad : {"q4_k_x", "q8_k", "int3", ""}) {
    auto t = ParseQuantTarget(bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find("q4_k_m"), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find("tensor types: q3_k, q4_k, q5_k, mxfp4"),
              std::string::npos)
        << t.status().message();
  }
  // A DType is a plain target: today's single-type meaning.
  const QuantTarget plain(DType::kQ4_0);
  EXPECT_FALSE(plain.mix);
  EXPECT_EQ(plain.file_type, 2u);
  EXPECT_EQ(plain.name, "q4_0");
}

// Every name, on a model with odd rows: each chosen type's block divides its rows.
TEST(QuantTargetTest, EveryNamePlansStorableTypes) {
  const std::vector<std::string> names = {"token_embd.weight", "blk.0.attn_v.weight",
                                          "blk.0.ffn_down.weight", "blk.0.attn_norm.weight",
                                          "output.weight"};
  const std::vector<int64_t> d0 = {96, 300}, d1 = {96, 32}, d2 = {160, 96}, d3 = {96},
                             d4 = {96, 300};
  const std::vector<TensorDesc> descs = {{names[0], d0, DType::kF16},
                                         {names[1], d1, DType::kF16},
                                         {names[2], d2, DType::kF16},
                                         {names[3], d3, F32},
                                         {names[4], d4, DType::kF16}};
  ModelFacts facts;
  facts.arch = "llama";
  facts.n_layer = 1;
  facts.n_head = facts.n_head_kv = 2;
  facts.CountTensors(names);
  std::string list = QuantTargetNames();
  for (const char* n : {"q2_k", "q2_k_s", "q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s", "q4_k_m",
                        "q5_k_s", "q5_k_m", "q6_k", "iq2_xxs", "iq2_xs", "iq2_s", "iq2_m",
                        "iq3_xxs", "iq3_xs", "iq3_s", "iq3_m", "iq1_s", "iq1_m", "iq4_nl",
                        "iq4_xs", "tq1_0", "tq2_0", "mxfp4_moe", "q4_0", "q4_1", "q5_0", "q5_1",
                        "q8_0", "f16", "bf16", "f32", "q4_k", "mxfp4"}) {
    EXPECT_NE(list.find(n), std::string::npos) << n;
    auto t = ParseQuantTarget(n);
    ASSERT_TRUE(t.ok()) << n;
    auto plans = PlanTensorTypes(*t, facts, descs);
    ASSERT_TRUE(plans.ok()) << n << ": " << plans.status().ToString();
    for (size_t i = 0; i < descs.size(); ++i) {
      const DType to = (*plans)[i].type;
      EXPECT_TRUE(IsWeightTargetType(to)) << n << " " << names[i];
      EXPECT_EQ(descs[i].dims[0] % Traits(to).block_size, 0) << n << " " << names[i];
    }
    EXPECT_EQ((*plans)[3].type, F32) << n;
  }
}

// The rules count attn_v / ffn_down in llama.cpp's order (by block number), not file order.
TEST(MixPlannerTest, CountsInLlamaCppsOrderWhateverTheFileOrder) {
  std::vector<std::string> names;
  for (int l = 7; l >= 0; --l) names.push_back("blk." + std::to_string(l) + ".attn_v.weight");
  const std::vector<size_t> order = LlamaVisitOrder(names);
  ASSERT_EQ(order.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(order[i], 7 - i);
  // blk.10 after blk.9 (numbers, not strings), tensors outside blocks first.
  const std::vector<std::string> mixed = {"blk.10.a.weight", "output.weight", "blk.9.b.weight",
                                          "blk.9.a.weight", "token_embd.weight"};
  EXPECT_EQ(LlamaVisitOrder(mixed), (std::vector<size_t>{1, 4, 3, 2, 0}));

  const std::vector<int64_t> dims = {256, 64};
  std::vector<TensorDesc> descs;
  for (const std::string& n : names) descs.push_back({n, dims, DType::kF16});
  ModelFacts facts;
  facts.arch = "llama";
  facts.n_layer = 8;
  facts.n_head = facts.n_head_kv = 8;
  facts.CountTensors(names);
  EXPECT_EQ(facts.n_attention_wv, 8);
  EXPECT_FALSE(facts.has_output);
  auto plans = PlanTensorTypes(*ParseQuantTarget("q3_k_m"), facts, descs);
  ASSERT_TRUE(plans.ok());
  // q3_k_m: the first two attn_v visited (layers 0 and 1) get q5_K, the rest q4_K.
  for (size_t i = 0; i < 8; ++i) {
    const int layer = 7 - static_cast<int>(i);
    EXPECT_EQ((*plans)[i].type, layer < 2 ? Q5K : Q4K) << names[i];
  }
}

std::vector<TensorPlan> PlanAttnV(const ModelFacts& base_facts, const char* mix, int layers) {
  std::vector<std::string> names;
  for (int l = 0; l < layers; ++l) names.push_back("blk." + std::to_string(l) + ".attn_v.weight");
  const std::vector<int64_t> dims = {256, 256};
  std::vector<TensorDesc> descs;
  for (const std::string& n : names) descs.push_back({n, dims, DType::kF16});
  ModelFacts facts = base_facts;
  facts.CountTensors(names);
  auto plans = PlanTensorTypes(*ParseQuantTarget(mix), facts, descs);
  EXPECT_TRUE(plans.ok());
  return plans.ok() ? *plans : std::vector<TensorPlan>{};
}

TEST(MixPlannerTest, Llama70bGetsMoreBitsInAttnV) {
  ModelFacts facts;
  facts.arch = "llama";
  facts.n_layer = 80;
  facts.n_head = 64;
  facts.n_head_kv = 8;
  ASSERT_TRUE(facts.is_llama_70b());
  // q4_k_m over 80 layers: more bits for i < 10, i >= 70, (i - 10) % 3 == 2.
  auto p = PlanAttnV(facts, "q4_k_m", 80);
  ASSERT_EQ(p.size(), 80u);
  EXPECT_EQ(p[11].type, Q5K);  // q4_K, raised for the 70B
  EXPECT_EQ(p[12].type, Q6K);
  EXPECT_EQ(p[0].type, Q6K);
  facts.n_head_kv = 64;  // 80 layers without GQA: llama.cpp's 65B, no raise
  EXPECT_FALSE(facts.is_llama_70b());
  p = PlanAttnV(facts, "q4_k_m", 80);
  ASSERT_EQ(p.size(), 80u);
  EXPECT_EQ(p[11].type, Q4K);
  EXPECT_TRUE(p[11].rule.empty());
  EXPECT_NE(p[12].rule.find("q4_k_m rule for attn_v #12 of 80: q6_K"), std::string::npos)
      << p[12].rule;
}

TEST(MixPlannerTest, MixtureOfExpertsRules) {
  ModelFacts facts;
  facts.arch = "mixtral";
  facts.n_layer = 8;
  facts.n_head = 32;
  facts.n_head_kv = 8;
  facts.n_expert = 8;
  const std::vector<std::string> names = {"blk.3.ffn_down_exps.weight", "blk.3.attn_v.weight",
                                          "blk.3.attn_k.weight", "blk.3.attn_output.weight",
                                          "blk.3.ffn_gate_inp.weight", "output.weight",
                                          "blk.3.ffn_up_exps.weight"};
  const std::vector<int64_t> exps = {256, 512, 8}, sq = {256, 256}, router = {256, 8};
  const std::vector<TensorDesc> descs = {{names[0], exps, DType::kF16},
                                         {names[1], sq, DType::kF16},
                                         {names[2], sq, DType::kF16},
                                         {names[3], sq, DType::kF16},
                                         {names[4], router, F32},
                                         {names[5], sq, DType::kF16},
                                         {names[6], exps, DType::kF16}};
  facts.CountTensors(names);
  auto p = PlanTensorTypes(*ParseQuantTarget("q4_k_m"), facts, descs);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ((*p)[0].type, Q6K);           // layer 3 (from the name) is a more-bits layer
  EXPECT_EQ((*p)[1].type, DType::kQ8_0);  // 8 experts: attn_v and attn_k in q8_0
  EXPECT_EQ((*p)[2].type, DType::kQ8_0);
  EXPECT_EQ((*p)[3].type, Q5K);
  EXPECT_EQ((*p)[4].type, F32);           // the router is never quantized
  EXPECT_EQ((*p)[5].type, Q6K);
  EXPECT_EQ((*p)[6].type, Q4K);

  auto m = PlanTensorTypes(*ParseQuantTarget("mxfp4_moe"), facts, descs);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)[0].type, DType::kMXFP4);  // stacked experts
  EXPECT_EQ((*m)[1].type, DType::kQ8_0);   // everything else
  EXPECT_EQ((*m)[5].type, DType::kQ8_0);
  EXPECT_EQ((*m)[6].type, DType::kMXFP4);

  // An expert tensor whose layer cannot be read from its name.
  const std::vector<TensorDesc> bad = {{"ffn_down_exps.weight", exps, DType::kF16}};
  auto e = PlanTensorTypes(*ParseQuantTarget("q4_k_m"), facts, bad);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("ffn_down_exps.weight"), std::string::npos);
}

}  // namespace
}  // namespace tarmac::gguf
