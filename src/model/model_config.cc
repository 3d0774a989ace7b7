#include "model/model_config.h"

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

}  // namespace

Result<ModelConfig> LoadModelConfig(const gguf::File& f) {
  ModelConfig c;
  TARMAC_ASSIGN_OR_RETURN(c.arch_name, f.GetString("general.architecture"));
  if (c.arch_name == "llama") {
    c.arch = Arch::kLlama;
  } else if (c.arch_name == "qwen2") {
    c.arch = Arch::kQwen2;
    c.neox_rope = true;
    c.qkv_bias = true;
  } else {
    return Unimplemented("general.architecture '{}' is not supported (llama, qwen2)", c.arch_name);
  }
  if (f.Find("general.name") != nullptr) {
    auto n = f.GetString("general.name");
    if (n.ok()) c.name = *n;
  }
  const std::string a = c.arch_name + ".";
  TARMAC_ASSIGN_OR_RETURN(c.n_ctx_train, GetI32(f, a + "context_length"));
  TARMAC_ASSIGN_OR_RETURN(c.n_embd, GetI32(f, a + "embedding_length"));
  TARMAC_ASSIGN_OR_RETURN(c.n_layer, GetI32(f, a + "block_count"));
  TARMAC_ASSIGN_OR_RETURN(c.n_ff, GetI32(f, a + "feed_forward_length"));
  TARMAC_ASSIGN_OR_RETURN(c.n_head, GetI32(f, a + "attention.head_count"));
  TARMAC_ASSIGN_OR_RETURN(c.n_head_kv, GetI32Or(f, a + "attention.head_count_kv", c.n_head));
  if (c.n_embd % c.n_head != 0 && f.Find(a + "attention.key_length") == nullptr)
    return InvalidArgument("{}embedding_length {} is not a multiple of head_count {}", a, c.n_embd, c.n_head);
  TARMAC_ASSIGN_OR_RETURN(c.head_dim, GetI32Or(f, a + "attention.key_length", c.n_embd / c.n_head));
  TARMAC_ASSIGN_OR_RETURN(int32_t v_len, GetI32Or(f, a + "attention.value_length", c.head_dim));
  if (v_len != c.head_dim)
    return Unimplemented("{}attention.value_length {} != key_length {}", a, v_len, c.head_dim);
  if (c.n_head % c.n_head_kv != 0)
    return InvalidArgument("{}attention.head_count {} is not a multiple of head_count_kv {}", a, c.n_head, c.n_head_kv);
  TARMAC_ASSIGN_OR_RETURN(c.n_rot, GetI32Or(f, a + "rope.dimension_count", c.head_dim));
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0)
    return InvalidArgument("{}rope.dimension_count {} must be even and <= head dim {}", a, c.n_rot, c.head_dim);
  TARMAC_ASSIGN_OR_RETURN(double base, f.GetFloatOr(a + "rope.freq_base", 10000.0));
  TARMAC_ASSIGN_OR_RETURN(double eps, f.GetFloatOr(a + "attention.layer_norm_rms_epsilon", 1e-5));
  if (!(base > 0)) return InvalidArgument("{}rope.freq_base must be > 0, got {}", a, base);
  if (!(eps > 0 && eps < 1)) return InvalidArgument("{}attention.layer_norm_rms_epsilon {} is out of range", a, eps);
  c.rope_freq_base = static_cast<float>(base);
  c.rms_eps = static_cast<float>(eps);
  if (f.Find(a + "rope.scaling.type") != nullptr) {
    TARMAC_ASSIGN_OR_RETURN(std::string type, f.GetString(a + "rope.scaling.type"));
    if (type == "linear") {
      TARMAC_ASSIGN_OR_RETURN(double factor, f.GetFloat(a + "rope.scaling.factor"));
      if (!(factor > 0)) return InvalidArgument("{}rope.scaling.factor must be > 0", a);
      c.rope_freq_scale = static_cast<float>(1.0 / factor);
    } else if (type != "none") {
      return Unimplemented("{}rope.scaling.type '{}' is not supported (none, linear)", a, type);
    }
  }
  const gguf::TensorInfo* emb = f.FindTensor("token_embd.weight");
  if (emb == nullptr) return InvalidArgument("tensor token_embd.weight is missing");
  if (emb->dims.size() != 2 || emb->dims[0] != c.n_embd)
    return InvalidArgument("token_embd.weight must be [{}, n_vocab]", c.n_embd);
  c.n_vocab = static_cast<int32_t>(emb->dims[1]);
  return c;
}

}  // namespace tarmac::model
