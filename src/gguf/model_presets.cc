#include "gguf/model_presets.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "gguf/random_families.h"

namespace tarmac::gguf {

namespace {

ModelShape Preset(std::string name, int64_t dim, int64_t layers, int64_t heads, int64_t kv_heads,
                  int64_t ffn, int64_t vocab, int64_t context, double rope_base, bool tied,
                  std::string arch = "llama", int64_t head_dim = 0, int64_t window = 0) {
  ModelShape s;
  s.name = std::move(name);
  s.arch = std::move(arch);
  s.head_dim_override = head_dim;
  s.window = window;
  s.dim = dim, s.layers = layers, s.heads = heads, s.kv_heads = kv_heads, s.ffn = ffn;
  s.vocab = vocab, s.context = context, s.rope_base = rope_base, s.tied = tied;
  return s;
}

ModelShape Moe(ModelShape s, int64_t experts, int64_t used, int64_t expert_ffn, double eps) {
  s.experts = experts, s.experts_used = used, s.expert_ffn = expert_ffn, s.rms_eps = eps;
  return s;
}

// gpt-oss-20b: 24 layers of 32 experts (4 per token) 2880 wide; windows of 128 on even layers;
// YaRN x32 over 4096 positions.
ModelShape GptOss20b() {
  ModelShape s = Moe(Preset("gpt-oss-20b", 2880, 24, 64, 8, 2880, 201088, 131072, 150000.0,
                            false, "gpt-oss", 64, 128),
                     32, 4, 2880, 1e-5);
  s.yarn = 32;
  s.orig_ctx = 4096;
  return s;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

Result<int64_t> ParseInt(std::string_view key, std::string_view v) {
  int64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size()) {
    return InvalidArgument("shape: {}='{}' is not an integer", key, v);
  }
  return out;
}

Result<double> ParseDouble(std::string_view key, std::string_view v) {
  double out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size() || !std::isfinite(out)) {
    return InvalidArgument("shape: {}='{}' is not a finite number", key, v);
  }
  return out;
}

}  // namespace

namespace {

// Elements of the model with `experts_read` feed-forward experts per layer (dense: 1).
int64_t Parameters(const ModelShape& s, int64_t experts_read) {
  const RandomFamily* f = FindRandomFamily(s.arch);
  int64_t per_layer = 2 * s.dim                       // attn_norm, ffn_norm
                      + 2 * s.dim * s.q_dim()         // attn_q, attn_output
                      + 2 * s.dim * s.kv_dim()        // attn_k, attn_v
                      + 3 * s.dim * s.expert_width() * experts_read;  // gate, up, down
  if (s.experts > 0) per_layer += s.dim * s.experts;  // ffn_gate_inp
  if (f != nullptr && f->o_bias) per_layer += s.dim;
  if (f != nullptr && f->attn_sinks) per_layer += s.heads;
  if (f != nullptr && f->expert_biases)
    per_layer += s.experts + (2 * s.expert_width() + s.dim) * experts_read;
  if (f != nullptr && f->qkv_bias) per_layer += s.q_dim() + 2 * s.kv_dim();
  if (f != nullptr && f->qk_norm) per_layer += 2 * s.head_dim();
  if (f != nullptr && f->post_norms) per_layer += 2 * s.dim;
  return s.vocab * s.dim * (s.tied ? 1 : 2) + s.dim + s.layers * per_layer;
}

}  // namespace

int64_t ModelShape::ParameterCount() const { return Parameters(*this, experts > 0 ? experts : 1); }

int64_t ModelShape::ActiveParameterCount() const {
  return Parameters(*this, experts > 0 ? experts_used : 1);
}

Status ModelShape::Validate() const {
  // Bounds keep every tensor dimension and the whole model far from overflow and well inside
  // what GGUF readers accept, while admitting every real model shape.
  struct Field {
    const char* name;
    int64_t value;
    int64_t max;
  };
  const Field fields[] = {{"dim", dim, 1 << 16},         {"layers", layers, 1024},
                          {"heads", heads, 1024},        {"kv_heads", kv_heads, 1024},
                          {"ffn", ffn, 1 << 18},         {"vocab", vocab, 1 << 22},
                          {"ctx", context, 1 << 24}};
  const RandomFamily* fam = FindRandomFamily(arch);
  if (fam == nullptr) {
    return InvalidArgument("arch '{}' is not one make-random writes ({})", arch,
                           RandomFamilyNames());
  }
  for (const Field& f : fields) {
    if (f.value < 1 || f.value > f.max) {
      return InvalidArgument("shape: {}={} out of range [1, {}]", f.name, f.value, f.max);
    }
  }
  if (head_dim_override < 0 || head_dim_override > 1024)
    return InvalidArgument("shape: head_dim={} out of range [1, 1024]", head_dim_override);
  if (head_dim_override == 0 && dim % heads != 0)
    return InvalidArgument("shape: heads={} does not divide dim={}", heads, dim);
  if (head_dim() % 2 != 0) {
    return InvalidArgument("shape: head_dim = {} must be even (RoPE rotates pairs)", head_dim());
  }
  if (rot < 0 || rot % 2 != 0 || rot > head_dim())
    return InvalidArgument("shape: rot={} must be even and <= head_dim {}", rot, head_dim());
  if (window < 0 || window > (1 << 24)) return InvalidArgument("shape: window={} out of range", window);
  if (window > 0 && !fam->window_key)
    return InvalidArgument("shape: window= is not part of a {} model", arch);
  if ((swa_pattern >= 0 || rope_base_swa != 0) && !fam->window_pattern)
    return InvalidArgument("shape: swa_pattern= and rope_base_swa= are gemma2/gemma3 keys, not {}",
                           arch);
  if (swa_pattern < -1 || swa_pattern > 1024)
    return InvalidArgument("shape: swa_pattern={} out of range [0, 1024]", swa_pattern);
  if (rope_base_swa < 0) return InvalidArgument("shape: rope_base_swa={} must be > 0", rope_base_swa);
  if ((attn_softcap >= 0 && !fam->softcaps) ||
      (final_softcap >= 0 && !fam->softcaps && !fam->final_softcap))
    return InvalidArgument("shape: {} has no {} soft-capping", arch,
                           attn_softcap >= 0 ? "attention" : "final-logit");
  if (yarn != 0 && (!fam->yarn || !(yarn >= 1)))
    return InvalidArgument("shape: yarn={} needs a gpt-oss model and a factor >= 1", yarn);
  if (orig_ctx != 0 && (!(fam->long_rope || yarn > 0) || orig_ctx < 1 || orig_ctx >= context))
    return InvalidArgument("shape: orig_ctx={} needs a phi3 model (or yarn=) and 1 <= orig_ctx < "
                           "ctx={}", orig_ctx, context);
  if (fam->tied_only && !tied) return InvalidArgument("shape: a {} model is always tied (tied=1)", arch);
  if (fam->full_rotary && rope_dims() != head_dim())
    return InvalidArgument("shape: {} rotates every head dim (rot={} != head_dim {})", arch, rot,
                           head_dim());
  if (fam->q_is_dim && (head_dim_override != 0 || q_dim() != dim))
    return InvalidArgument("shape: a {} model has head_dim = dim/heads (no head_dim=)", arch);
  if (experts < 0 || experts > 512)
    return InvalidArgument("shape: experts={} out of range [0, 512]", experts);
  if (experts > 0 && !fam->experts)
    return InvalidArgument("shape: a {} model has no experts (experts= is for llama, qwen3moe)",
                           arch);
  if (experts == 0 && fam->experts_required)
    return InvalidArgument("shape: a {} model has experts (give experts= and experts_used=)", arch);
  if (experts > 0 && (experts_used < 1 || experts_used > experts))
    return InvalidArgument("shape: experts_used={} must be in [1, experts={}]", experts_used,
                           experts);
  if (experts == 0 && (experts_used != 0 || expert_ffn != 0))
    return InvalidArgument("shape: experts_used= and expert_ffn= need experts=");
  if (router_ties < 0 || (router_ties > 1 && (experts == 0 || experts % router_ties != 0)))
    return InvalidArgument("shape: router_ties={} must divide experts={}", router_ties, experts);
  if (expert_ffn < 0 || expert_ffn > (1 << 18))
    return InvalidArgument("shape: expert_ffn={} out of range [1, {}]", expert_ffn, 1 << 18);
  if (heads % kv_heads != 0) {
    return InvalidArgument("shape: kv_heads={} does not divide heads={}", kv_heads, heads);
  }
  if (vocab < 257) {
    return InvalidArgument("shape: vocab={} too small: the byte-level vocabulary needs 256 byte "
                           "tokens plus <|endoftext|>", vocab);
  }
  if (!(rope_base > 0)) return InvalidArgument("shape: rope_base={} must be > 0", rope_base);
  if (!(rms_eps > 0 && rms_eps < 1)) return InvalidArgument("shape: eps={} must be in (0, 1)", rms_eps);
  return Status::Ok();
}

std::string ModelShape::ToString() const {
  std::string s =
      fmt::format("dim={},layers={},heads={},kv_heads={},ffn={},vocab={},ctx={},rope_base={:g},"
                  "eps={:g},tied={}",
                  dim, layers, heads, kv_heads, ffn, vocab, context, rope_base, rms_eps,
                  tied ? 1 : 0);
  if (head_dim_override > 0) s += fmt::format(",head_dim={}", head_dim_override);
  if (rot > 0) s += fmt::format(",rot={}", rot);
  if (window > 0) s += fmt::format(",window={}", window);
  if (swa_pattern >= 0) s += fmt::format(",swa_pattern={}", swa_pattern);
  if (rope_base_swa > 0) s += fmt::format(",rope_base_swa={:g}", rope_base_swa);
  if (attn_softcap >= 0) s += fmt::format(",attn_softcap={:g}", attn_softcap);
  if (final_softcap >= 0) s += fmt::format(",final_softcap={:g}", final_softcap);
  if (orig_ctx > 0) s += fmt::format(",orig_ctx={}", orig_ctx);
  if (yarn > 0) s += fmt::format(",yarn={:g}", yarn);
  if (experts > 0) s += fmt::format(",experts={},experts_used={}", experts, experts_used);
  if (expert_ffn > 0) s += fmt::format(",expert_ffn={}", expert_ffn);
  if (router_ties > 1) s += fmt::format(",router_ties={}", router_ties);
  return s;
}

const std::vector<ModelShape>& ModelPresets() {
  // name, dim, layers, heads, kv_heads, ffn, vocab, ctx, rope_base, tied[, arch, head_dim,
  // window]
  static const std::vector<ModelShape> kPresets = {
      Preset("smollm-135m", 576, 30, 9, 3, 1536, 49152, 2048, 10000.0, true),
      Preset("llama-160m", 768, 12, 12, 12, 3072, 32000, 2048, 10000.0, false),
      Preset("tinyllama-1.1b", 2048, 22, 32, 4, 5632, 32000, 2048, 10000.0, false),
      Preset("llama-3.2-1b", 2048, 16, 32, 8, 8192, 128256, 131072, 500000.0, true),
      Preset("qwen3-0.6b", 1024, 28, 16, 8, 3072, 151936, 40960, 1000000.0, true, "qwen3", 128),
      Preset("gemma2-2b", 2304, 26, 8, 4, 9216, 256000, 8192, 10000.0, true, "gemma2", 256,
             4096),
      Preset("gemma3-1b", 1152, 26, 4, 1, 6912, 262144, 32768, 1000000.0, true, "gemma3", 256,
             512),
      Preset("phi3-mini", 3072, 32, 32, 32, 8192, 32064, 4096, 10000.0, false, "phi3"),
      Preset("mistral-7b", 4096, 32, 32, 8, 14336, 32000, 32768, 10000.0, false, "llama", 0,
             4096),
      // Llama 3.1's llama3 RoPE scaling (factor 8 over an original 8192 context) is a
      // rope_freqs tensor in llama.cpp's files, which make-random does not write (nor for
      // llama-3.2-1b): the shape is right, positions past 8192 are not scaled.
      Preset("llama-3.1-8b", 4096, 32, 32, 8, 14336, 128256, 131072, 500000.0, false),
      Moe(Preset("qwen3-30b-a3b", 2048, 48, 32, 4, 6144, 151936, 40960, 1000000.0, false,
                 "qwen3moe", 128),
          128, 8, 768, 1e-6),
      GptOss20b(),
      Moe(Preset("mixtral-8x7b", 4096, 32, 32, 8, 14336, 32000, 32768, 1000000.0, false), 8, 2,
          0, 1e-5),
  };
  return kPresets;
}

namespace {

constexpr const char* kKnownKeys =
    "dim, layers, heads, kv_heads, ffn, vocab, ctx, rope_base, eps, tied, head_dim, rot, "
    "window, swa_pattern, rope_base_swa, attn_softcap, final_softcap, orig_ctx, experts, "
    "experts_used, expert_ffn, router_ties, yarn";

// Sets the field `key` names from `val`. *required_index: 0..5 for dim, layers, heads, ffn,
// vocab, kv_heads (the keys a custom spec must give), -1 for the others.
Status SetField(ModelShape* s, std::string_view key, std::string_view val, int* required_index) {
  *required_index = -1;
  int64_t* int_field = nullptr;
  if (key == "dim") int_field = &s->dim, *required_index = 0;
  else if (key == "layers") int_field = &s->layers, *required_index = 1;
  else if (key == "heads") int_field = &s->heads, *required_index = 2;
  else if (key == "ffn") int_field = &s->ffn, *required_index = 3;
  else if (key == "vocab") int_field = &s->vocab, *required_index = 4;
  else if (key == "kv_heads") int_field = &s->kv_heads, *required_index = 5;
  else if (key == "ctx") int_field = &s->context;
  else if (key == "head_dim") int_field = &s->head_dim_override;
  else if (key == "rot") int_field = &s->rot;
  else if (key == "window") int_field = &s->window;
  else if (key == "swa_pattern") int_field = &s->swa_pattern;
  else if (key == "orig_ctx") int_field = &s->orig_ctx;
  else if (key == "experts") int_field = &s->experts;
  else if (key == "experts_used") int_field = &s->experts_used;
  else if (key == "expert_ffn") int_field = &s->expert_ffn;
  else if (key == "router_ties") int_field = &s->router_ties;
  if (int_field != nullptr) {
    TARMAC_ASSIGN_OR_RETURN(*int_field, ParseInt(key, val));
  } else if (key == "rope_base") {
    TARMAC_ASSIGN_OR_RETURN(s->rope_base, ParseDouble(key, val));
  } else if (key == "eps") {
    TARMAC_ASSIGN_OR_RETURN(s->rms_eps, ParseDouble(key, val));
  } else if (key == "yarn") {
    TARMAC_ASSIGN_OR_RETURN(s->yarn, ParseDouble(key, val));
  } else if (key == "rope_base_swa") {
    TARMAC_ASSIGN_OR_RETURN(s->rope_base_swa, ParseDouble(key, val));
  } else if (key == "attn_softcap") {
    TARMAC_ASSIGN_OR_RETURN(s->attn_softcap, ParseDouble(key, val));
  } else if (key == "final_softcap") {
    TARMAC_ASSIGN_OR_RETURN(s->final_softcap, ParseDouble(key, val));
  } else if (key == "tied") {
    if (val != "0" && val != "1") return InvalidArgument("shape: tied='{}' must be 0 or 1", val);
    s->tied = val == "1";
  } else {
    return InvalidArgument("shape: unknown key '{}' (known: {})", key, kKnownKeys);
  }
  return Status::Ok();
}

// Splits "a, b,c" at commas into trimmed, non-empty items.
std::vector<std::string_view> Items(std::string_view spec) {
  std::vector<std::string_view> items;
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = Trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

}  // namespace

Result<ModelShape> ParseShape(std::string_view spec, std::string_view arch) {
  spec = Trim(spec);
  if (spec.empty()) return InvalidArgument("shape: empty (give a preset name or dim=..,layers=..)");
  const std::vector<std::string_view> items = Items(spec);
  ModelShape s;
  s.name = "custom";
  size_t first = 0;  // the first key=value item
  const bool preset = !items.empty() && items[0].find('=') == std::string_view::npos;
  if (preset) {
    const ModelShape* p = nullptr;
    for (const ModelShape& c : ModelPresets()) {
      if (c.name == items[0]) p = &c;
    }
    if (p == nullptr) {
      std::string names;
      for (const ModelShape& c : ModelPresets()) names += (names.empty() ? "" : ", ") + c.name;
      return InvalidArgument("shape: unknown preset '{}' (known: {}; or give dim=..,layers=..,"
                             "heads=..,kv_heads=..,ffn=..,vocab=..)", items[0], names);
    }
    s = *p;
    first = 1;
  }
  if (!arch.empty()) s.arch = std::string(arch);
  bool seen[6] = {};
  const char* required[6] = {"dim", "layers", "heads", "ffn", "vocab", "kv_heads"};
  std::string overrides;
  for (size_t i = first; i < items.size(); ++i) {
    const std::string_view item = items[i];
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument("shape: '{}' is not key=value{}", item,
                             preset ? " (a preset name comes first, then key=value overrides)"
                                    : "");
    }
    const std::string_view key = Trim(item.substr(0, eq)), val = Trim(item.substr(eq + 1));
    int idx = -1;
    Status st = SetField(&s, key, val, &idx);
    if (!st.ok() && preset) {
      return InvalidArgument("{} (overriding preset '{}')", st.message(), items[0]);
    }
    TARMAC_RETURN_IF_ERROR(st);
    if (idx >= 0) seen[idx] = true;
    overrides += fmt::format("{}{}={}", overrides.empty() ? "" : ",", key, val);
  }
  if (preset) {
    // The preset's name with what was changed: "llama-3.2-1b+layers=8".
    if (!overrides.empty()) s.name += "+" + overrides;
  } else {
    if (!seen[5]) s.kv_heads = s.heads, seen[5] = true;
    for (int i = 0; i < 6; ++i) {
      if (!seen[i]) return InvalidArgument("shape: missing {}=", required[i]);
    }
  }
  TARMAC_RETURN_IF_ERROR(s.Validate());
  return s;
}

}  // namespace tarmac::gguf
