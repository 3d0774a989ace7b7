#include "model/model_config.h"

#include <algorithm>
#include <cmath>

namespace tarmac::model {
namespace {

Result<int32_t> GetI32(const gguf::File& f, const std::string& key) {
  TARMAC_ASSIGN_OR_RETURN(uint64_t v, f.GetUint(key));
  if (v == 0 || v > (1u << 30)) return InvalidArgument("{} = {} is out of range", key, v);
  return static_cast<int32_t>(v);
}

Result<int32_t> GetI32Or(const gguf::File& f, const std::string& key, int32_t fallback) {
  if (f.Find(key) == nullptr) return fallback;
  return GetI32(f, key);
}

// Like GetI32Or, but 0 is a valid value.
Result<int32_t> GetCountOr(const gguf::File& f, const std::string& key, int32_t fallback) {
  if (f.Find(key) == nullptr) return fallback;
  TARMAC_ASSIGN_OR_RETURN(uint64_t v, f.GetUint(key));
  if (v > (1u << 30)) return InvalidArgument("{} = {} is out of range", key, v);
  return static_cast<int32_t>(v);
}

Result<float> GetPositiveFloatOr(const gguf::File& f, const std::string& key, double fallback) {
  TARMAC_ASSIGN_OR_RETURN(double v, f.GetFloatOr(key, fallback));
  if (!(v > 0) || !std::isfinite(v)) return InvalidArgument("{} = {} must be > 0", key, v);
  return static_cast<float>(v);
}

// The shape: sizes, heads, rope dimensions and eps, the same keys for every family.
Status LoadShape(const gguf::File& f, const std::string& a, ModelConfig* c) {
  TARMAC_ASSIGN_OR_RETURN(c->n_ctx_train, GetI32(f, a + "context_length"));
  TARMAC_ASSIGN_OR_RETURN(c->n_embd, GetI32(f, a + "embedding_length"));
  TARMAC_ASSIGN_OR_RETURN(c->n_layer, GetI32(f, a + "block_count"));
  TARMAC_ASSIGN_OR_RETURN(c->n_ff, GetI32(f, a + "feed_forward_length"));
  TARMAC_ASSIGN_OR_RETURN(c->n_head, GetI32(f, a + "attention.head_count"));
  TARMAC_ASSIGN_OR_RETURN(c->n_head_kv, GetI32Or(f, a + "attention.head_count_kv", c->n_head));
  if (c->n_embd % c->n_head != 0 && f.Find(a + "attention.key_length") == nullptr)
    return InvalidArgument("{}embedding_length {} is not a multiple of head_count {}", a,
                           c->n_embd, c->n_head);
  TARMAC_ASSIGN_OR_RETURN(c->head_dim,
                          GetI32Or(f, a + "attention.key_length", c->n_embd / c->n_head));
  TARMAC_ASSIGN_OR_RETURN(int32_t v_len, GetI32Or(f, a + "attention.value_length", c->head_dim));
  if (v_len != c->head_dim)
    return Unimplemented("{}attention.value_length {} != key_length {}", a, v_len, c->head_dim);
  if (c->n_head % c->n_head_kv != 0)
    return InvalidArgument("{}attention.head_count {} is not a multiple of head_count_kv {}", a,
                           c->n_head, c->n_head_kv);
  TARMAC_ASSIGN_OR_RETURN(c->n_rot, GetI32Or(f, a + "rope.dimension_count", c->head_dim));
  if (c->n_rot > c->head_dim || c->n_rot % 2 != 0)
    return InvalidArgument("{}rope.dimension_count {} must be even and <= head dim {}", a,
                           c->n_rot, c->head_dim);
  if (c->desc->full_rotary && c->n_rot != c->head_dim)
    return InvalidArgument("{}rope.dimension_count {} must equal the head dim {} for {}", a,
                           c->n_rot, c->head_dim, c->arch_name);
  TARMAC_ASSIGN_OR_RETURN(double eps, f.GetFloatOr(a + "attention.layer_norm_rms_epsilon", 1e-5));
  if (!(eps > 0 && eps < 1))
    return InvalidArgument("{}attention.layer_norm_rms_epsilon {} is out of range", a, eps);
  c->rms_eps = static_cast<float>(eps);
  return Status::Ok();
}

// Rope base and scaling of the global layers, LongRoPE's context and factor.
Status LoadRope(const gguf::File& f, const std::string& a, ModelConfig* c) {
  TARMAC_ASSIGN_OR_RETURN(c->rope_freq_base, GetPositiveFloatOr(f, a + "rope.freq_base", 10000.0));
  if (f.Find(a + "rope.scaling.type") != nullptr) {
    TARMAC_ASSIGN_OR_RETURN(std::string type, f.GetString(a + "rope.scaling.type"));
    if (type == "linear" || type == "yarn") {
      TARMAC_ASSIGN_OR_RETURN(double factor, f.GetFloat(a + "rope.scaling.factor"));
      if (!(factor > 0)) return InvalidArgument("{}rope.scaling.factor must be > 0", a);
      c->rope_freq_scale = static_cast<float>(1.0 / factor);
    } else if (type != "none") {
      return Unimplemented("{}rope.scaling.type '{}' is not supported (none, linear, yarn)", a,
                           type);
    }
    if (type == "yarn") {
      c->yarn = true;
      TARMAC_ASSIGN_OR_RETURN(
          c->yarn_orig_ctx, GetI32Or(f, a + "rope.scaling.original_context_length", c->n_ctx_train));
      TARMAC_ASSIGN_OR_RETURN(c->yarn_beta_fast,
                              GetPositiveFloatOr(f, a + "rope.scaling.yarn_beta_fast", 32.0));
      TARMAC_ASSIGN_OR_RETURN(c->yarn_beta_slow,
                              GetPositiveFloatOr(f, a + "rope.scaling.yarn_beta_slow", 1.0));
      TARMAC_ASSIGN_OR_RETURN(c->rope_attn_factor,
                              GetPositiveFloatOr(f, a + "rope.scaling.attn_factor", 1.0));
    }
  }
  if (c->desc->long_rope) {
    TARMAC_ASSIGN_OR_RETURN(c->n_ctx_orig,
                            GetI32Or(f, a + "rope.scaling.original_context_length", c->n_ctx_train));
    TARMAC_ASSIGN_OR_RETURN(c->rope_attn_factor,
                            GetPositiveFloatOr(f, a + "rope.scaling.attn_factor", 1.0));
  }
  return Status::Ok();
}

// Query scale and soft-capping.
Status LoadAttentionScales(const gguf::File& f, const std::string& a, ModelConfig* c) {
  const ArchDescription& d = *c->desc;
  const bool embd_head = d.embd_head_scale_blocks > 0 && c->n_layer == d.embd_head_scale_blocks;
  c->attn_scale = 1.0f / std::sqrt(static_cast<float>(embd_head ? c->n_embd / c->n_head
                                                                  : c->head_dim));
  if (d.attn_softcap) {
    TARMAC_ASSIGN_OR_RETURN(double cap, f.GetFloatOr(a + "attn_logit_softcapping",
                                                     d.attn_softcap_default));
    if (!(cap >= 0) || !std::isfinite(cap))
      return InvalidArgument("{}attn_logit_softcapping = {} must be >= 0", a, cap);
    c->attn_softcap = static_cast<float>(cap);
  }
  if (d.final_softcap) {
    TARMAC_ASSIGN_OR_RETURN(double cap, f.GetFloatOr(a + "final_logit_softcapping",
                                                     d.final_softcap_default));
    if (!(cap >= 0) || !std::isfinite(cap))
      return InvalidArgument("{}final_logit_softcapping = {} must be >= 0", a, cap);
    c->final_softcap = static_cast<float>(cap);
  }
  return Status::Ok();
}

// Which layers are windowed, their window and rope base.
Status LoadWindows(const gguf::File& f, const std::string& a, ModelConfig* c) {
  const ArchDescription& d = *c->desc;
  c->layer_window.assign(static_cast<size_t>(c->n_layer), 0);
  c->rope_freq_base_swa = c->rope_freq_base;
  c->rope_freq_scale_swa = c->rope_freq_scale;
  if (d.window_rule == WindowRule::kNone) return Status::Ok();
  const std::string window_key = a + "attention.sliding_window";
  TARMAC_ASSIGN_OR_RETURN(int32_t window, GetCountOr(f, window_key, d.window_default));
  if (window == 0) return Status::Ok();
  int32_t pattern = 0;  // 0: every layer windowed
  if (d.window_rule == WindowRule::kPattern) {
    const std::string key = a + "attention.sliding_window_pattern";
    const gguf::Value* v = f.Find(key);
    if (v != nullptr && v->is_array())
      return Unimplemented("{} as a per-layer array is not supported for {} (an integer period "
                           "is)", key, c->arch_name);
    TARMAC_ASSIGN_OR_RETURN(pattern, GetCountOr(f, key, d.pattern_default));
  }
  for (int32_t il = 0; il < c->n_layer; ++il) {
    if (pattern == 0 || il % pattern < pattern - 1) c->layer_window[il] = window;
  }
  if (d.window_rule != WindowRule::kPattern) return Status::Ok();
  if (d.swa_rope_unscaled) c->rope_freq_scale_swa = 1.0f;
  const double base_default =
      d.swa_rope_base_default > 0 ? d.swa_rope_base_default : c->rope_freq_base;
  TARMAC_ASSIGN_OR_RETURN(c->rope_freq_base_swa,
                          GetPositiveFloatOr(f, a + "rope.freq_base_swa", base_default));
  return Status::Ok();
}

// Whether a file's key agrees with what llama.cpp hard-codes for the family (absent: it does).
Status CheckFamilyValue(const gguf::File& f, const std::string& key, const ModelConfig& c,
                        int64_t family_value, std::string_view family_name,
                        std::string_view (*name)(int64_t)) {
  if (f.Find(key) == nullptr) return Status::Ok();
  int64_t v = 0;
  if (f.Find(key)->type() == gguf::ValueType::kBool) {
    TARMAC_ASSIGN_OR_RETURN(bool b, f.GetBool(key));
    v = b ? 1 : 0;
  } else {
    TARMAC_ASSIGN_OR_RETURN(uint64_t u, f.GetUint(key));
    v = static_cast<int64_t>(u);
  }
  if (name(v).empty()) return InvalidArgument("{} = {} is not a known value", key, v);
  if (v != family_value)
    return Unimplemented("{} = {} ({}): llama.cpp runs {} models with {}, and so does tarmac", key,
                         v, name(v), c.arch_name, family_name);
  return Status::Ok();
}

std::string_view GatingValueName(int64_t v) {
  return v >= 1 && v <= 3 ? ExpertGatingName(static_cast<ExpertGating>(v)) : std::string_view();
}
std::string_view NormValueName(int64_t v) {
  return v == 0 ? "not renormalised" : v == 1 ? "renormalised" : std::string_view();
}

// Expert count, experts per token, their width and how tokens are routed.
Status LoadExperts(const gguf::File& f, const std::string& a, ModelConfig* c) {
  const ArchDescription& d = *c->desc;
  TARMAC_ASSIGN_OR_RETURN(int32_t n_expert, GetCountOr(f, a + "expert_count", 0));
  if (d.experts == Presence::kNever) {
    if (n_expert > 0)
      return Unimplemented("{}expert_count = {}: tarmac reads no experts for {} (it does for "
                           "llama and qwen3moe)", a, n_expert, c->arch_name);
    return Status::Ok();
  }
  if (n_expert == 0) {
    if (d.experts == Presence::kRequired)
      return InvalidArgument("{}expert_count is missing or 0 (a {} model has experts)", a,
                             c->arch_name);
    return Status::Ok();
  }
  if (n_expert > kMaxExperts)
    return InvalidArgument("{}expert_count = {} is over the {} experts llama.cpp allows", a,
                           n_expert, kMaxExperts);
  TARMAC_ASSIGN_OR_RETURN(int32_t n_used, GetCountOr(f, a + "expert_used_count", 0));
  if (n_used < 1 || n_used > n_expert)
    return InvalidArgument("{}expert_used_count = {} must be in [1, expert_count = {}]", a, n_used,
                           n_expert);
  RouterConfig& r = c->router;
  r.n_expert = n_expert;
  r.n_used = n_used;
  r.gating = d.gating;
  r.normalize = d.expert_norm;
  TARMAC_RETURN_IF_ERROR(CheckFamilyValue(f, a + "expert_gating_func", *c,
                                          static_cast<int64_t>(d.gating),
                                          ExpertGatingName(d.gating), GatingValueName));
  TARMAC_RETURN_IF_ERROR(CheckFamilyValue(f, a + "expert_weights_norm", *c, d.expert_norm ? 1 : 0,
                                          NormValueName(d.expert_norm ? 1 : 0), NormValueName));
  // llama.cpp scales the chosen weights by expert_weights_scale where the file has one (0: none).
  TARMAC_ASSIGN_OR_RETURN(double scale, f.GetFloatOr(a + "expert_weights_scale", 0.0));
  if (!(scale >= 0) || !std::isfinite(scale))
    return InvalidArgument("{}expert_weights_scale = {} must be >= 0", a, scale);
  r.scale = scale == 0 ? 1.0f : static_cast<float>(scale);
  c->n_ff_exp = c->n_ff;
  if (d.expert_ff_key) {
    TARMAC_ASSIGN_OR_RETURN(c->n_ff_exp, GetI32Or(f, a + "expert_feed_forward_length",
                                                  std::max(1, c->n_ff / n_used)));
  }
  return Status::Ok();
}

}  // namespace

bool ModelConfig::any_window() const {
  return std::any_of(layer_window.begin(), layer_window.end(), [](int32_t w) { return w > 0; });
}

int32_t ModelConfig::KvRetentionWindow() const {
  if (layer_window.empty()) return 0;
  if (std::any_of(layer_window.begin(), layer_window.end(), [](int32_t w) { return w == 0; }))
    return 0;
  return *std::max_element(layer_window.begin(), layer_window.end());
}

Result<ModelConfig> LoadModelConfig(const gguf::File& f) {
  ModelConfig c;
  TARMAC_ASSIGN_OR_RETURN(c.arch_name, f.GetString("general.architecture"));
  c.desc = FindArch(c.arch_name);
  if (c.desc == nullptr) {
    return Unimplemented("general.architecture '{}' is not supported ({})", c.arch_name,
                         SupportedArchNames());
  }
  if (f.Find("general.name") != nullptr) {
    auto n = f.GetString("general.name");
    if (n.ok()) c.name = *n;
  }
  const std::string a = c.arch_name + ".";
  TARMAC_RETURN_IF_ERROR(LoadShape(f, a, &c));
  TARMAC_RETURN_IF_ERROR(LoadRope(f, a, &c));
  TARMAC_RETURN_IF_ERROR(LoadAttentionScales(f, a, &c));
  TARMAC_RETURN_IF_ERROR(LoadWindows(f, a, &c));
  TARMAC_RETURN_IF_ERROR(LoadExperts(f, a, &c));
  const gguf::TensorInfo* emb = f.FindTensor("token_embd.weight");
  if (emb == nullptr) return InvalidArgument("tensor token_embd.weight is missing");
  if (emb->dims.size() != 2 || emb->dims[0] != c.n_embd)
    return InvalidArgument("token_embd.weight must be [{}, n_vocab]", c.n_embd);
  c.n_vocab = static_cast<int32_t>(emb->dims[1]);
  return c;
}

}  // namespace tarmac::model
