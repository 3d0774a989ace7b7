#include "gguf/quant_mix.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <initializer_list>

#include <fmt/format.h>

#include "gguf/gguf_file.h"
#include "gguf/quantize_file.h"

namespace tarmac::gguf {
namespace {

// llama.cpp's llama_ftype values (include/llama.h) of the file types tarmac writes.
namespace ft {
constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 7, kQ5_0 = 8, kQ5_1 = 9;
constexpr uint32_t kQ2_K = 10, kQ3_K_S = 11, kQ3_K_M = 12, kQ3_K_L = 13, kQ4_K_S = 14;
constexpr uint32_t kQ4_K_M = 15, kQ5_K_S = 16, kQ5_K_M = 17, kQ6_K = 18, kIQ2_XXS = 19;
constexpr uint32_t kIQ2_XS = 20, kQ2_K_S = 21, kIQ3_XS = 22, kIQ3_XXS = 23, kIQ1_S = 24;
constexpr uint32_t kIQ4_NL = 25, kIQ3_S = 26, kIQ3_M = 27, kIQ2_S = 28, kIQ2_M = 29;
constexpr uint32_t kIQ4_XS = 30, kIQ1_M = 31, kBF16 = 32, kTQ1_0 = 36, kTQ2_0 = 37;
constexpr uint32_t kMXFP4_MOE = 38;
}  // namespace ft

// Each file type's name and default tensor type. Note the IQ mixes whose base is another
// grid than their name says: iq2_s -> iq2_xs, iq2_m -> iq2_s, iq3_xs and iq3_m -> iq3_s.
struct FileTypeName {
  std::string_view name;
  uint32_t file_type;
  DType base;
};
constexpr FileTypeName kFileTypes[] = {
    {"f32", ft::kF32, DType::kF32},           {"f16", ft::kF16, DType::kF16},
    {"bf16", ft::kBF16, DType::kBF16},        {"q4_0", ft::kQ4_0, DType::kQ4_0},
    {"q4_1", ft::kQ4_1, DType::kQ4_1},        {"q5_0", ft::kQ5_0, DType::kQ5_0},
    {"q5_1", ft::kQ5_1, DType::kQ5_1},        {"q8_0", ft::kQ8_0, DType::kQ8_0},
    {"q2_k", ft::kQ2_K, DType::kQ2_K},        {"q2_k_s", ft::kQ2_K_S, DType::kQ2_K},
    {"q3_k_s", ft::kQ3_K_S, DType::kQ3_K},    {"q3_k_m", ft::kQ3_K_M, DType::kQ3_K},
    {"q3_k_l", ft::kQ3_K_L, DType::kQ3_K},    {"q4_k_s", ft::kQ4_K_S, DType::kQ4_K},
    {"q4_k_m", ft::kQ4_K_M, DType::kQ4_K},    {"q5_k_s", ft::kQ5_K_S, DType::kQ5_K},
    {"q5_k_m", ft::kQ5_K_M, DType::kQ5_K},    {"q6_k", ft::kQ6_K, DType::kQ6_K},
    {"iq1_s", ft::kIQ1_S, DType::kIQ1_S},     {"iq1_m", ft::kIQ1_M, DType::kIQ1_M},
    {"iq2_xxs", ft::kIQ2_XXS, DType::kIQ2_XXS}, {"iq2_xs", ft::kIQ2_XS, DType::kIQ2_XS},
    {"iq2_s", ft::kIQ2_S, DType::kIQ2_XS},    {"iq2_m", ft::kIQ2_M, DType::kIQ2_S},
    {"iq3_xxs", ft::kIQ3_XXS, DType::kIQ3_XXS}, {"iq3_xs", ft::kIQ3_XS, DType::kIQ3_S},
    {"iq3_s", ft::kIQ3_S, DType::kIQ3_S},     {"iq3_m", ft::kIQ3_M, DType::kIQ3_S},
    {"iq4_nl", ft::kIQ4_NL, DType::kIQ4_NL},  {"iq4_xs", ft::kIQ4_XS, DType::kIQ4_XS},
    {"tq1_0", ft::kTQ1_0, DType::kTQ1_0},     {"tq2_0", ft::kTQ2_0, DType::kTQ2_0},
    {"mxfp4_moe", ft::kMXFP4_MOE, DType::kMXFP4},
};

bool In(uint32_t f, std::initializer_list<uint32_t> set) {
  return std::find(set.begin(), set.end(), f) != set.end();
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool IsQuantized(DType t) { return Traits(t).block_size > 1; }

// The kinds of tensor the rules tell apart, from the name alone (any architecture).
enum class Kind {
  kTokenEmbd, kOutput, kAttnQ, kAttnK, kAttnV, kAttnQkv, kAttnKvB, kAttnOutput, kFfnUp,
  kFfnGate, kFfnDown, kOther
};

bool Has(std::string_view name, std::string_view part) {
  return name.find(part) != std::string_view::npos;
}

Kind KindOf(std::string_view name) {
  if (name == "output.weight") return Kind::kOutput;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Kind::kTokenEmbd;
  if (Has(name, "attn_qkv.weight")) return Kind::kAttnQkv;
  if (Has(name, "attn_kv_b.weight")) return Kind::kAttnKvB;
  if (Has(name, "attn_v.weight")) return Kind::kAttnV;
  if (Has(name, "attn_k.weight")) return Kind::kAttnK;
  if (Has(name, "attn_q.weight")) return Kind::kAttnQ;
  if (Has(name, "attn_output.weight")) return Kind::kAttnOutput;
  if (Has(name, "ffn_up")) return Kind::kFfnUp;
  if (Has(name, "ffn_gate")) return Kind::kFfnGate;
  if (Has(name, "ffn_down")) return Kind::kFfnDown;
  return Kind::kOther;
}

// The value projections (alone or fused with q and k, or MLA's kv_b): the rules give them, and
// count them, together.
bool IsValueLike(Kind k) { return k == Kind::kAttnV || k == Kind::kAttnQkv || k == Kind::kAttnKvB; }

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kTokenEmbd: return "token_embd";
    case Kind::kOutput: return "output";
    case Kind::kAttnQ: return "attn_q";
    case Kind::kAttnK: return "attn_k";
    case Kind::kAttnV: return "attn_v";
    case Kind::kAttnQkv: return "attn_qkv";
    case Kind::kAttnKvB: return "attn_kv_b";
    case Kind::kAttnOutput: return "attn_output";
    case Kind::kFfnUp: return "ffn_up";
    case Kind::kFfnGate: return "ffn_gate";
    case Kind::kFfnDown: return "ffn_down";
    case Kind::kOther: break;
  }
  return "tensor";
}

// Block number of "blk.N.<rest>", -1 for other names.
int BlockOf(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  int n = -1;
  const char* b = name.data() + 4;
  const char* e = name.data() + name.size();
  auto [p, ec] = std::from_chars(b, e, n);
  if (ec != std::errc() || p == b || p == e || *p != '.' || n < 0) return -1;
  return n;
}

// More bits for the first and last eighth of the layers and every third one between.
bool UseMoreBits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// Names llama.cpp's quantizer leaves in their type although they are 2-D weights.
constexpr std::string_view kNeverQuantizedParts[] = {
    "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
    "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
    "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
    "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
    "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
    "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd", "sam.pos_embd",
    "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook",
    "mm.a.code_embd"};
constexpr std::string_view kNeverQuantizedNames[] = {"position_embd.weight",
                                                     "token_types.weight"};

// One integer of the model's hyper-parameters: absent -> fallback; an array (per-layer
// values) -> its first element, as llama.cpp's rules read layer 0's.
Result<int64_t> IntKey(const File& f, const std::string& key, int64_t fallback) {
  const Value* v = f.Find(key);
  if (v == nullptr) return fallback;
  if (const auto* arr = v->AsArray(); arr != nullptr) {
    if (arr->empty()) return fallback;
    v = &arr->front();
  }
  const auto u = v->AsUint64();
  if (!u || *u > (uint64_t{1} << 31)) {
    return InvalidArgument("{}: '{}' is not a non-negative integer", f.path(), key);
  }
  return static_cast<int64_t>(*u);
}

}  // namespace

QuantTarget::QuantTarget(DType type)
    : name(Lower(DTypeName(type))),
      base(type),
      file_type(LlamaFileType(type).value_or(0)),
      mix(false),
      pure(false) {}

bool QuantTarget::uses_rules() const { return mix && !pure && IsQuantized(base); }

std::string QuantTarget::ToString() const { return pure ? name + " (pure)" : name; }

Result<QuantTarget> ParseQuantTarget(std::string_view name, bool pure) {
  const std::string want = Lower(name);
  for (const FileTypeName& f : kFileTypes) {
    if (f.name != want) continue;
    QuantTarget t;
    t.name = want;
    t.base = f.base;
    t.file_type = f.file_type;
    t.mix = true;
    t.pure = pure;
    return t;
  }
  const auto type = DTypeFromName(want);
  if (type && IsWeightTargetType(*type)) {
    QuantTarget t(*type);
    t.pure = pure;
    return t;
  }
  return InvalidArgument("unknown quantization type '{}' (use one of {})", name,
                         QuantTargetNames());
}

std::string QuantTargetNames() {
  std::string out;
  for (const FileTypeName& f : kFileTypes) {
    if (!out.empty()) out += ", ";
    out += f.name;
  }
  std::string plain;
  for (uint32_t id = 0; id < 64; ++id) {
    const auto tr = GetDTypeTraits(id);
    if (!tr || !IsWeightTargetType(static_cast<DType>(id))) continue;
    const std::string n = Lower(tr->name);
    const bool is_file_type = std::any_of(std::begin(kFileTypes), std::end(kFileTypes),
                                          [&](const FileTypeName& f) { return f.name == n; });
    if (!is_file_type) plain += (plain.empty() ? "" : ", ") + n;
  }
  return out + "; tensor types: " + plain;
}

void ModelFacts::CountTensors(std::span<const std::string> names) {
  has_output = false;
  n_attention_wv = 0;
  for (const std::string& n : names) {
    const Kind k = KindOf(n);
    if (k == Kind::kOutput) has_output = true;
    if (IsValueLike(k)) ++n_attention_wv;
  }
}

Result<ModelFacts> ReadModelFacts(const File& file) {
  ModelFacts m;
  if (const Value* a = file.Find("general.architecture"); a != nullptr && a->AsString()) {
    m.arch = *a->AsString();
  }
  std::vector<std::string> names;
  names.reserve(file.tensors().size());
  int top_block = -1;
  for (const TensorInfo& t : file.tensors()) {
    names.push_back(t.name);
    top_block = std::max(top_block, BlockOf(t.name));
  }
  const std::string a = m.arch + ".";
  TARMAC_ASSIGN_OR_RETURN(m.n_layer, IntKey(file, a + "block_count", top_block + 1));
  TARMAC_ASSIGN_OR_RETURN(m.n_head, IntKey(file, a + "attention.head_count", 0));
  TARMAC_ASSIGN_OR_RETURN(m.n_head_kv, IntKey(file, a + "attention.head_count_kv", m.n_head));
  TARMAC_ASSIGN_OR_RETURN(m.n_expert, IntKey(file, a + "expert_count", 0));
  m.CountTensors(names);
  return m;
}

bool AllowsQuantization(std::string_view name, int num_dims) {
  if (num_dims < 2 || !name.ends_with("weight")) return false;
  for (std::string_view part : kNeverQuantizedParts) {
    if (Has(name, part)) return false;
  }
  for (std::string_view n : kNeverQuantizedNames) {
    if (name == n) return false;
  }
  return true;
}

std::string TensorPlan::Note() const {
  if (rule.empty()) return fallback;
  if (fallback.empty()) return rule;
  return rule + "; " + fallback;
}

MixPlanner::MixPlanner(QuantTarget target, ModelFacts facts)
    : target_(std::move(target)), facts_(std::move(facts)) {}

Result<int> MixPlanner::LayerOf(std::string_view name, int counter) const {
  if (facts_.n_expert <= 1) return counter;
  // Experts may be stored out of layer order: the name says which layer this is.
  const int layer = BlockOf(name);
  if (layer < 0) return InvalidArgument("quantize: cannot tell the layer of tensor '{}'", name);
  if (layer >= facts_.n_layer) {
    return InvalidArgument("quantize: tensor '{}' is in layer {}, the model has {}", name, layer,
                           facts_.n_layer);
  }
  return layer;
}

Result<DType> MixPlanner::Choose(const TensorDesc& t, std::string* why) {
  const uint32_t f = target_.file_type;
  const DType base = target_.base;
  const Kind kind = KindOf(t.name);
  const bool falcon = facts_.arch == "falcon";  // tarmac does not run falcon; it quantizes it
  const int64_t gqa = facts_.n_gqa();
  const int64_t experts = facts_.n_expert;
  const int n_layer = static_cast<int>(facts_.n_layer);
  // The ~2-bit IQ mixes share one set of rules; iq2_s and iq2_m lean on iq3_s where the
  // others use q2_K.
  const bool two_bit_iq = In(f, {ft::kIQ2_XXS, ft::kIQ2_XS, ft::kIQ1_S, ft::kIQ2_S, ft::kIQ2_M,
                                 ft::kIQ1_M});
  const DType two_bit_iq_up = In(f, {ft::kIQ2_S, ft::kIQ2_M}) ? DType::kIQ3_S : DType::kQ2_K;
  DType type = base;
  std::string where = KindName(kind);

  if (kind == Kind::kOutput || (kind == Kind::kTokenEmbd && !facts_.has_output)) {
    // The output projection (or the embedding that doubles as it) is the most sensitive.
    if (kind == Kind::kTokenEmbd) where = "token_embd (tied to the output)";
    if (f == ft::kMXFP4_MOE || falcon || t.dims[0] % Traits(base).block_size != 0) {
      type = DType::kQ8_0;
    } else if (In(f, {ft::kIQ2_XXS, ft::kIQ2_XS, ft::kIQ3_XXS, ft::kIQ1_S, ft::kIQ2_S,
                      ft::kIQ2_M, ft::kIQ1_M})) {
      type = DType::kQ5_K;
    } else if (type != DType::kQ8_0) {
      type = DType::kQ6_K;
    }
  } else if (f == ft::kMXFP4_MOE) {
    // Stacked expert matrices (3-D) in mxfp4, everything else in q8_0.
    bool stacked = t.dims.size() > 2 && t.dims[2] > 1;
    if (facts_.arch == "bailingmoe3") {
      stacked = stacked &&
                (kind == Kind::kFfnUp || kind == Kind::kFfnGate || kind == Kind::kFfnDown);
    }
    type = stacked ? DType::kMXFP4 : DType::kQ8_0;
  } else if (kind == Kind::kTokenEmbd) {
    if (In(f, {ft::kIQ2_XXS, ft::kIQ2_XS, ft::kIQ1_S, ft::kIQ1_M})) {
      type = DType::kQ2_K;
    } else if (In(f, {ft::kIQ2_S, ft::kIQ2_M, ft::kIQ3_XXS})) {
      type = DType::kIQ3_S;
    } else if (In(f, {ft::kTQ1_0, ft::kTQ2_0})) {
      type = DType::kQ4_K;
    }
  } else if (two_bit_iq) {
    if (IsValueLike(kind)) {
      type = (gqa >= 4 || experts >= 4) ? DType::kQ4_K : two_bit_iq_up;
      where += fmt::format(" #{}", i_attention_wv_);
      ++i_attention_wv_;
    } else if (kind == Kind::kAttnK && experts == 8) {
      type = DType::kQ4_K;
    } else if (kind == Kind::kFfnDown) {
      if (i_ffn_down_ < n_layer / 8) type = two_bit_iq_up;
      where += fmt::format(" #{}", i_ffn_down_);
      ++i_ffn_down_;
    } else if (kind == Kind::kAttnOutput) {
      if (experts == 8) {
        type = DType::kQ5_K;
      } else if (In(f, {ft::kIQ1_S, ft::kIQ1_M})) {
        type = DType::kIQ2_XXS;
      } else if (In(f, {ft::kIQ2_S, ft::kIQ2_M})) {
        type = DType::kIQ3_S;
      }
    }
  } else if (IsValueLike(kind)) {
    const int i = i_attention_wv_, n = facts_.n_attention_wv;
    if (f == ft::kQ2_K) {
      type = gqa >= 4 ? DType::kQ4_K : DType::kQ3_K;
    } else if (f == ft::kQ2_K_S && gqa >= 4) {
      type = DType::kQ4_K;
    } else if (f == ft::kIQ3_XXS) {
      type = gqa >= 4 ? DType::kQ4_K : facts_.has_imatrix ? DType::kIQ3_XXS : DType::kIQ3_S;
    } else if (In(f, {ft::kIQ3_XS, ft::kIQ3_S}) && gqa >= 4) {
      type = DType::kQ4_K;
    } else if (f == ft::kIQ3_M) {
      type = DType::kQ4_K;
    } else if (f == ft::kQ3_K_M) {
      type = i < 2 ? DType::kQ5_K : DType::kQ4_K;
    } else if (f == ft::kQ3_K_L) {
      type = DType::kQ5_K;
    } else if (In(f, {ft::kIQ4_NL, ft::kIQ4_XS}) && gqa >= 4) {
      type = DType::kQ5_K;
    } else if (In(f, {ft::kQ4_K_M, ft::kQ5_K_M}) && UseMoreBits(i, n)) {
      type = DType::kQ6_K;
    } else if (f == ft::kQ4_K_S && i < 4) {
      type = DType::kQ5_K;
    }
    // A 70B llama shares each v head among 8 query heads: its attn_v is small, give it more.
    if (facts_.is_llama_70b() && (type == DType::kQ3_K || type == DType::kQ4_K)) {
      type = DType::kQ5_K;
    }
    if (experts == 8) type = DType::kQ8_0;
    where += fmt::format(" #{} of {}", i, n);
    ++i_attention_wv_;
  } else if (kind == Kind::kAttnK) {
    if (experts == 8) {
      type = DType::kQ8_0;
    } else if (f == ft::kIQ3_XS) {
      type = DType::kIQ3_XXS;
    } else if (f == ft::kIQ3_XXS) {
      type = DType::kIQ2_S;
    }
  } else if (kind == Kind::kAttnQ) {
    if (f == ft::kIQ3_XS) {
      type = DType::kIQ3_XXS;
    } else if (f == ft::kIQ3_XXS) {
      type = DType::kIQ2_S;
    }
  } else if (kind == Kind::kFfnDown) {
    TARMAC_ASSIGN_OR_RETURN(const int i, LayerOf(t.name, i_ffn_down_));
    const int n = n_layer;
    const bool imatrix = facts_.has_imatrix;
    if (f == ft::kQ2_K) {
      type = DType::kQ3_K;
    } else if (f == ft::kQ2_K_S) {
      if (i < n / 8) type = DType::kQ4_K;
    } else if (f == ft::kIQ3_XXS && !imatrix) {
      type = i < n / 8 ? DType::kQ4_K : DType::kQ3_K;
    } else if (f == ft::kQ3_K_M) {
      type = i < n / 16                       ? DType::kQ5_K
             : (!falcon || UseMoreBits(i, n)) ? DType::kQ4_K
                                              : DType::kQ3_K;
    } else if (f == ft::kIQ3_M && (i < n / 8 || (experts == 8 && UseMoreBits(i, n)))) {
      type = DType::kQ4_K;
    } else if (f == ft::kQ3_K_L) {
      type = falcon ? DType::kQ4_K : DType::kQ5_K;
    } else if (f == ft::kQ4_K_M) {
      if (falcon) {
        type = i < n / 16 ? DType::kQ6_K : UseMoreBits(i, n) ? DType::kQ5_K : DType::kQ4_K;
      } else if (UseMoreBits(i, n)) {
        type = DType::kQ6_K;
      }
    } else if (i < n / 8 && In(f, {ft::kIQ4_NL, ft::kIQ4_XS}) && !imatrix) {
      type = DType::kQ5_K;
    } else if (f == ft::kQ5_K_M && UseMoreBits(i, n)) {
      type = DType::kQ6_K;
    } else if (f == ft::kQ4_K_S && !falcon && i < n / 8) {
      type = DType::kQ5_K;
    } else if (In(f, {ft::kQ4_0, ft::kQ5_0}) && imatrix && i < n / 8) {
      // With an imatrix the first ffn_down layers of q4_0/q5_0 get the _1 variant.
      type = f == ft::kQ4_0 ? DType::kQ4_1 : DType::kQ5_1;
    }
    where += fmt::format(", layer {} of {}", i, n);
    ++i_ffn_down_;
  } else if (kind == Kind::kAttnOutput) {
    if (falcon) {
      if (f == ft::kQ3_K_L) type = DType::kQ4_K;
    } else if (experts == 8) {
      if (In(f, {ft::kQ2_K, ft::kIQ3_XS, ft::kIQ3_XXS, ft::kQ3_K_S, ft::kQ3_K_M, ft::kIQ4_NL,
                 ft::kQ4_K_S, ft::kQ4_K_M, ft::kIQ3_S, ft::kIQ3_M, ft::kIQ4_XS})) {
        type = DType::kQ5_K;
      }
    } else if (f == ft::kQ2_K) {
      type = DType::kQ3_K;
    } else if (f == ft::kIQ3_XXS) {
      type = DType::kIQ3_S;
    } else if (f == ft::kQ3_K_M || f == ft::kIQ3_M) {
      type = DType::kQ4_K;
    } else if (f == ft::kQ3_K_L) {
      type = DType::kQ5_K;
    }
  } else if (kind == Kind::kFfnGate || kind == Kind::kFfnUp) {
    // iq3_xs: the middle three quarters of the layers' gate and up in iq3_xxs.
    int& counter = kind == Kind::kFfnGate ? i_ffn_gate_ : i_ffn_up_;
    TARMAC_ASSIGN_OR_RETURN(const int i, LayerOf(t.name, counter));
    const int n = n_layer;
    if (f == ft::kIQ3_XS && i >= n / 8 && i < 7 * n / 8) type = DType::kIQ3_XXS;
    where += fmt::format(", layer {} of {}", i, n);
    ++counter;
  }
  if (type != base && why != nullptr) {
    *why = fmt::format("{} rule for {}: {}", target_.name, where, DTypeName(type));
  }
  return type;
}

Result<TensorPlan> MixPlanner::Next(const TensorDesc& t) {
  TensorPlan p;
  const int nd = static_cast<int>(t.dims.size());
  if (nd <= 1) {
    p.type = PlanTensorType(target_.base, nd, t.dims.empty() ? 1 : t.dims[0], nullptr);
    return p;
  }
  if (!AllowsQuantization(t.name, nd)) {
    p.type = t.type;
    return p;
  }
  DType chosen = target_.base;
  if (target_.uses_rules()) {
    TARMAC_ASSIGN_OR_RETURN(chosen, Choose(t, &p.rule));
  }
  p.type = PlanTensorType(chosen, nd, t.dims[0], &p.fallback);
  return p;
}

std::vector<size_t> LlamaVisitOrder(std::span<const std::string> names) {
  std::vector<size_t> order(names.size());
  std::vector<int> block(names.size());
  for (size_t i = 0; i < names.size(); ++i) order[i] = i, block[i] = BlockOf(names[i]);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (block[a] != block[b]) return block[a] < block[b];
    return names[a] < names[b];
  });
  return order;
}

Result<std::vector<TensorPlan>> PlanTensorTypes(const QuantTarget& target, const ModelFacts& facts,
                                                std::span<const TensorDesc> tensors) {
  std::vector<std::string> names;
  names.reserve(tensors.size());
  for (const TensorDesc& t : tensors) names.emplace_back(t.name);
  MixPlanner planner(target, facts);
  std::vector<TensorPlan> plans(tensors.size());
  for (size_t i : LlamaVisitOrder(names)) {
    TARMAC_ASSIGN_OR_RETURN(plans[i], planner.Next(tensors[i]));
  }
  return plans;
}

}  // namespace tarmac::gguf
