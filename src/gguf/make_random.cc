#include "gguf/make_random.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "base/hash.h"
#include "base/utf8.h"
#include "gguf/gguf_writer.h"
#include "gguf/gguf_file.h"
#include "gguf/quantize_file.h"
#include "gguf/random_families.h"
#include "tensor/quant_grid_types.h"
#include "tensor/quant_ref.h"

namespace tarmac::gguf {
namespace {

uint64_t HashName(const std::string& s) { return Fnv1a64(s); }

// Fills row with zero-mean, stddev-0.02 values from a per-row xorshift stream. The sum of 4
// uniforms on [0, 1) has variance 4/12; centred and scaled it is close enough to normal for
// random weights, and costs one 64-bit random number per value.
void RandomRow(uint64_t stream, float* row, int64_t n) {
  uint64_t s = SplitMix64(stream) | 1;
  constexpr float kScale = 0.02f / 0.57735027f / 65536.0f;
  for (int64_t i = 0; i < n; ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    const uint64_t r = s * 0x2545f4914f6cdd1dull;
    const float sum = static_cast<float>((r & 0xffff) + ((r >> 16) & 0xffff) +
                                         ((r >> 32) & 0xffff) + (r >> 48));
    row[i] = (sum - 2.0f * 65535.0f) * kScale;
  }
}

// kBias: a 2-D tensor of per-expert bias rows, written as f32 like the 1-D ones (llama.cpp's
// quantizer keeps every .bias unquantized).
enum class Fill { kWeight, kRouter, kNorm, kShortFactors, kLongFactors, kBias };

// Router rows are drawn 10x wider than other weights: real routers are peaked, and with
// stddev-0.02 rows the experts' logits would sit within rounding of each other, so which
// experts a token runs would hang on each implementation's last bits.
constexpr float kRouterScale = 10.0f;

struct TensorSpec {
  std::string name;
  std::vector<int64_t> dims;  // GGUF order: dims[0] = row length
  Fill fill = Fill::kWeight;
};

// The tensors, in the order the converter writes a block's.
std::vector<TensorSpec> TensorSpecs(const ModelShape& s, const RandomFamily& f) {
  const int64_t qd = s.q_dim(), kd = s.kv_dim(), hd = s.head_dim();
  std::vector<TensorSpec> t;
  t.push_back({"token_embd.weight", {s.dim, s.vocab}});
  if (f.long_rope && s.orig_ctx > 0) {
    t.push_back({"rope_factors_long.weight", {s.rope_dims() / 2}, Fill::kLongFactors});
    t.push_back({"rope_factors_short.weight", {s.rope_dims() / 2}, Fill::kShortFactors});
  }
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    t.push_back({p + "attn_norm.weight", {s.dim}, Fill::kNorm});
    if (f.fused_qkv) {
      t.push_back({p + "attn_qkv.weight", {s.dim, qd + 2 * kd}});
    } else {
      t.push_back({p + "attn_q.weight", {s.dim, qd}});
      t.push_back({p + "attn_k.weight", {s.dim, kd}});
      t.push_back({p + "attn_v.weight", {s.dim, kd}});
    }
    if (f.qkv_bias) {
      t.push_back({p + "attn_q.bias", {qd}});
      t.push_back({p + "attn_k.bias", {kd}});
      t.push_back({p + "attn_v.bias", {kd}});
    }
    if (f.qk_norm) {
      t.push_back({p + "attn_q_norm.weight", {hd}, Fill::kNorm});
      t.push_back({p + "attn_k_norm.weight", {hd}, Fill::kNorm});
    }
    t.push_back({p + "attn_output.weight", {qd, s.dim}});
    if (f.o_bias) t.push_back({p + "attn_output.bias", {s.dim}});
    if (f.attn_sinks) t.push_back({p + "attn_sinks.weight", {s.heads}});
    if (f.post_norms) t.push_back({p + "post_attention_norm.weight", {s.dim}, Fill::kNorm});
    t.push_back({p + std::string(f.ffn_norm) + ".weight", {s.dim}, Fill::kNorm});
    if (s.experts > 0) {
      const int64_t eff = s.expert_width();
      t.push_back({p + "ffn_gate_inp.weight", {s.dim, s.experts}, Fill::kRouter});
      if (f.expert_biases) t.push_back({p + "ffn_gate_inp.bias", {s.experts}});
      t.push_back({p + "ffn_gate_exps.weight", {s.dim, eff, s.experts}});
      if (f.expert_biases) t.push_back({p + "ffn_gate_exps.bias", {eff, s.experts}, Fill::kBias});
      t.push_back({p + "ffn_up_exps.weight", {s.dim, eff, s.experts}});
      if (f.expert_biases) t.push_back({p + "ffn_up_exps.bias", {eff, s.experts}, Fill::kBias});
      t.push_back({p + "ffn_down_exps.weight", {eff, s.dim, s.experts}});
      if (f.expert_biases) t.push_back({p + "ffn_down_exps.bias", {s.dim, s.experts}, Fill::kBias});
      if (f.post_norms) t.push_back({p + "post_ffw_norm.weight", {s.dim}, Fill::kNorm});
      continue;
    }
    if (f.fused_gate_up) {
      t.push_back({p + "ffn_up.weight", {s.dim, 2 * s.ffn}});
    } else {
      t.push_back({p + "ffn_gate.weight", {s.dim, s.ffn}});
      t.push_back({p + "ffn_up.weight", {s.dim, s.ffn}});
    }
    t.push_back({p + "ffn_down.weight", {s.ffn, s.dim}});
    if (f.post_norms) t.push_back({p + "post_ffw_norm.weight", {s.dim}, Fill::kNorm});
  }
  t.push_back({"output_norm.weight", {s.dim}, Fill::kNorm});
  if (!s.tied) t.push_back({"output.weight", {s.dim, s.vocab}});
  return t;
}

// The <arch>.* hyper-parameter keys the family's converter writes.
void SetFamilyKeys(const ModelShape& s, const RandomFamily& f, Writer* w) {
  const std::string a = s.arch + ".";
  auto u32 = [](int64_t v) { return Value::U32(static_cast<uint32_t>(v)); };
  auto f32 = [](double v) { return Value::F32(static_cast<float>(v)); };
  w->SetKV(a + "context_length", u32(s.context));
  w->SetKV(a + "embedding_length", u32(s.dim));
  w->SetKV(a + "block_count", u32(s.layers));
  w->SetKV(a + "feed_forward_length", u32(s.ffn));
  if (f.rope_keys || s.rot > 0) w->SetKV(a + "rope.dimension_count", u32(s.rope_dims()));
  if (f.rope_keys || s.rope_base != 10000.0) w->SetKV(a + "rope.freq_base", f32(s.rope_base));
  w->SetKV(a + "attention.head_count", u32(s.heads));
  w->SetKV(a + "attention.head_count_kv", u32(s.kv_heads));
  w->SetKV(a + "attention.layer_norm_rms_epsilon", f32(s.rms_eps));
  if (f.key_length) {
    w->SetKV(a + "attention.key_length", u32(s.head_dim()));
    w->SetKV(a + "attention.value_length", u32(s.head_dim()));
  }
  if (f.softcaps) {  // Gemma 2's published values unless the shape sets them
    w->SetKV(a + "attn_logit_softcapping", f32(s.attn_softcap >= 0 ? s.attn_softcap : 50.0));
    w->SetKV(a + "final_logit_softcapping", f32(s.final_softcap >= 0 ? s.final_softcap : 30.0));
  } else if (f.final_softcap && s.final_softcap >= 0) {
    w->SetKV(a + "final_logit_softcapping", f32(s.final_softcap));
  }
  if (s.window > 0 || f.window_always) {
    w->SetKV(a + "attention.sliding_window",
             u32(s.window > 0 ? s.window : s.arch == "gemma2" ? 4096 : 0));
  }
  if (s.swa_pattern >= 0) w->SetKV(a + "attention.sliding_window_pattern", u32(s.swa_pattern));
  if (s.yarn > 0) {
    w->SetKV(a + "rope.scaling.type", Value::Str("yarn"));
    w->SetKV(a + "rope.scaling.factor", f32(s.yarn));
    w->SetKV(a + "rope.scaling.original_context_length",
             u32(s.orig_ctx > 0 ? s.orig_ctx : s.context));
  }
  if (s.rope_base_swa > 0) w->SetKV(a + "rope.freq_base_swa", f32(s.rope_base_swa));
  if (f.long_rope) {
    // The converter writes the original context always; the attention factor with the
    // factors: sqrt(1 + ln(scale) / ln(original)), scale = ctx / original.
    const int64_t orig = s.orig_ctx > 0 ? s.orig_ctx : s.context;
    w->SetKV(a + "rope.scaling.original_context_length", u32(orig));
    if (s.orig_ctx > 0) {
      const double scale = static_cast<double>(s.context) / static_cast<double>(orig);
      w->SetKV(a + "rope.scaling.attn_factor",
               f32(std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(orig)))));
    }
  }
  if (f.vocab_size_key) w->SetKV(a + "vocab_size", u32(s.vocab));
  if (s.experts > 0) {
    w->SetKV(a + "expert_count", u32(s.experts));
    w->SetKV(a + "expert_used_count", u32(s.experts_used));
    if (f.expert_ff_key) w->SetKV(a + "expert_feed_forward_length", u32(s.expert_width()));
  }
}

// The vocabulary: the tokenizer.* keys of vocab_from, or none (the synthetic byte-level BPE).
struct VocabSource {
  std::vector<KeyValue> keys;  // empty: synthetic
  int64_t tokens = 0;
};

Result<VocabSource> ReadVocabulary(const std::string& vocab_from) {
  VocabSource v;
  if (vocab_from.empty()) return v;
  auto src = File::Open(vocab_from);
  if (!src.ok()) {
    return InvalidArgument("make-random: vocabulary file {}: {}", vocab_from,
                           src.status().message());
  }
  auto tokens = src->GetStringArray("tokenizer.ggml.tokens");
  if (!tokens.ok() || tokens->empty()) {
    return InvalidArgument("make-random: vocabulary file {} has no tokenizer.ggml.tokens",
                           vocab_from);
  }
  v.tokens = static_cast<int64_t>(tokens->size());
  for (const KeyValue& kv : src->metadata()) {
    if (kv.key.rfind("tokenizer.", 0) == 0) v.keys.push_back(kv);
  }
  return v;
}

void SetVocabulary(const ModelShape& s, const VocabSource& src, Writer* w) {
  if (!src.keys.empty()) {
    for (const KeyValue& kv : src.keys) w->SetKV(kv.key, kv.value);
    return;
  }
  const ByteLevelVocab vocab = MakeByteLevelVocab(s.vocab);
  w->SetKV("tokenizer.ggml.model", Value::Str("gpt2"));
  w->SetKV("tokenizer.ggml.pre", Value::Str("gpt-2"));
  w->SetKV("tokenizer.ggml.tokens", Value::StrArray(vocab.tokens));
  w->SetKV("tokenizer.ggml.token_type", Value::I32Array(vocab.token_types));
  w->SetKV("tokenizer.ggml.merges", Value::StrArray(vocab.merges));
  w->SetKV("tokenizer.ggml.bos_token_id", Value::U32(static_cast<uint32_t>(vocab.eos_id)));
  w->SetKV("tokenizer.ggml.eos_token_id", Value::U32(static_cast<uint32_t>(vocab.eos_id)));
  w->SetKV("tokenizer.ggml.add_bos_token", Value::Bool(false));
}

// Values of a 1-D tensor that is not a weight matrix row.
std::vector<float> FixedValues(Fill fill, uint64_t stream, double jitter, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  switch (fill) {
    case Fill::kNorm: {
      RandomRow(stream, v.data(), n);  // stddev 0.02: scaled to uniform-ish [-1, 1)
      for (float& x : v) x = static_cast<float>(1.0 + jitter * std::clamp(x / 0.035, -1.0, 1.0));
      break;
    }
    case Fill::kShortFactors:  // LongRoPE: near 1 for the trained context
      for (int64_t i = 0; i < n; ++i) v[i] = 1.0f + 0.05f * static_cast<float>(i) / n;
      break;
    case Fill::kLongFactors:  // growing towards the low frequencies, as published ones do
      for (int64_t i = 0; i < n; ++i) {
        const float r = static_cast<float>(i) / n;
        v[i] = 1.0f + 30.0f * r * r;
      }
      break;
    case Fill::kWeight:
    case Fill::kRouter:
    case Fill::kBias:
      RandomRow(stream, v.data(), n);
      break;
  }
  return v;
}

}  // namespace

ByteLevelVocab MakeByteLevelVocab(int64_t size) {
  TARMAC_CHECK(size >= 257 && size <= (int64_t{1} << 22));
  ByteLevelVocab v;
  v.tokens.reserve(size);
  for (int b = 0; b < 256; ++b) v.tokens.push_back(ByteToUnicode(static_cast<uint8_t>(b)));
  const int64_t merged = size - 257;
  // Breadth-first over words: level 2 is {Ġ, a..z} x {a..z}; level k+1 extends each level-k
  // token by one letter. 27*26^(k-1) tokens per level is plenty for any vocabulary size.
  const std::string space = ByteToUnicode(' ');
  std::vector<std::string> level;
  std::vector<std::string> firsts = {space};
  for (char c = 'a'; c <= 'z'; ++c) firsts.emplace_back(1, c);
  level = firsts;
  while (static_cast<int64_t>(v.merges.size()) < merged) {
    std::vector<std::string> next;
    for (const std::string& prefix : level) {
      for (char c = 'a'; c <= 'z' && static_cast<int64_t>(v.merges.size()) < merged; ++c) {
        v.tokens.push_back(prefix + c);
        v.merges.push_back(prefix + " " + c);
        next.push_back(prefix + c);
      }
    }
    level = std::move(next);
  }
  v.token_types.assign(v.tokens.size(), 1);
  v.eos_id = static_cast<int32_t>(v.tokens.size());
  v.tokens.push_back("<|endoftext|>");
  v.token_types.push_back(3);
  return v;
}

Result<MakeRandomSummary> MakeRandomModel(const ModelShape& shape_in, const QuantTarget& target,
                                          const std::string& out, const MakeRandomOptions& options,
                                          ThreadPool* pool) {
  TARMAC_RETURN_IF_ERROR(shape_in.Validate());
  if (!IsWeightTargetType(target.base)) {
    return InvalidArgument("make-random: cannot write weights as {} (use one of {})",
                           DTypeName(target.base), QuantTargetNames());
  }
  if (!(options.norm_jitter >= 0.0 && options.norm_jitter < 1.0)) {
    return InvalidArgument("make-random: norm jitter {} must be in [0, 1)", options.norm_jitter);
  }
  ModelShape shape = shape_in;
  const RandomFamily& family = *FindRandomFamily(shape.arch);
  Writer w;
  MakeRandomSummary summary;
  TARMAC_ASSIGN_OR_RETURN(const VocabSource vocab, ReadVocabulary(options.vocab_from));
  if (!vocab.keys.empty() && vocab.tokens != shape.vocab) {
    summary.notes.push_back(fmt::format("vocab: {} tokens from {} (the shape said {})",
                                        vocab.tokens, options.vocab_from, shape.vocab));
    shape.vocab = vocab.tokens;
  }
  w.SetKV("general.architecture", Value::Str(shape.arch));
  w.SetKV("general.name", Value::Str(fmt::format("tarmac random {}", shape.name)));
  w.SetKV("general.description",
          Value::Str(fmt::format("random weights (seed {}), shape {}; made by tarmac gguf "
                                 "make-random", options.seed, shape.ToString())));
  w.SetKV("general.file_type", Value::U32(target.file_type));
  if (Traits(target.base).block_size > 1) {
    w.SetKV("general.quantization_version", Value::U32(2));
  }
  SetFamilyKeys(shape, family, &w);
  SetVocabulary(shape, vocab, &w);

  const std::vector<TensorSpec> specs = TensorSpecs(shape, family);
  const size_t count = specs.size();
  // Each tensor's type, as llama.cpp's quantizer would choose it for this model.
  ModelFacts facts;
  facts.arch = shape.arch;
  facts.n_layer = shape.layers;
  facts.n_head = shape.heads;
  facts.n_head_kv = shape.kv_heads;
  facts.n_expert = shape.experts;
  std::vector<std::string> names;
  std::vector<TensorDesc> descs;
  for (const TensorSpec& t : specs) names.push_back(t.name);
  for (const TensorSpec& t : specs) descs.push_back({t.name, t.dims, DType::kF32});
  facts.CountTensors(names);
  TARMAC_ASSIGN_OR_RETURN(const std::vector<TensorPlan> plans,
                          PlanTensorTypes(target, facts, descs));
  for (size_t i = 0; i < count; ++i) {
    const TensorSpec& t = specs[i];
    const DType to = plans[i].type;
    if (!plans[i].fallback.empty()) summary.notes.push_back(t.name + ": " + plans[i].fallback);
    if (!plans[i].rule.empty()) ++summary.mixed;
    int64_t rows = 1;  // every row of the tensor (of every expert, for a stacked one)
    for (size_t d = 1; d < t.dims.size(); ++d) rows *= t.dims[d];
    summary.parameters += t.dims[0] * rows;
    summary.tensor_bytes += static_cast<uint64_t>(RowBytes(to, t.dims[0]) * rows);
    const uint64_t stream_base = SplitMix64(options.seed) ^ HashName(t.name);
    const double jitter = options.norm_jitter;
    auto fill = [&t, to, rows, stream_base, jitter, pool, i, count, &options,
                 &shape](std::span<uint8_t> dst) {
      const int64_t n = t.dims[0];
      Status st;
      if (t.fill == Fill::kNorm && jitter == 0.0) {
        std::vector<float> ones(n, 1.0f);
        st = QuantizeRowRef(to, ones.data(), dst.data(), n);
      } else if (t.dims.size() == 1 || t.fill == Fill::kBias) {
        const std::vector<float> v = FixedValues(t.fill, stream_base, jitter, n * rows);
        st = QuantizeRowRef(to, v.data(), dst.data(), n * rows);
      } else if (quant_grid::IsGridType(to)) {
        // Random codes drawn directly (RandomGridBlocks), scaled to RandomRow's 0.02 RMS.
        const int64_t row_bytes = RowBytes(to, n), nb = n / Traits(to).block_size;
        for (int64_t r = 0; r < rows; ++r) {
          quant_grid::RandomGridBlocks(to, stream_base + SplitMix64(static_cast<uint64_t>(r)),
                                       0.02f, dst.data() + r * row_bytes, nb);
        }
      } else {
        st = ConvertRows(
            to, rows, n,
            [stream_base, n, router = t.fill == Fill::kRouter,
             ties = std::max<int64_t>(1, shape.router_ties)](int64_t r, float* buf) {
              const int64_t row = router ? r / ties * ties : r;  // tied experts share a row
              RandomRow(stream_base + SplitMix64(static_cast<uint64_t>(row)), buf, n);
              if (router) {
                for (int64_t i = 0; i < n; ++i) buf[i] *= kRouterScale;
              }
              return Status::Ok();
            },
            dst.data(), pool);
      }
      if (st.ok() && options.on_tensor) options.on_tensor(t.name, to, i, count);
      return st;
    };
    TARMAC_RETURN_IF_ERROR(w.AddTensor(t.name, t.dims, to, fill));
  }
  summary.tensors = count;
  TARMAC_RETURN_IF_ERROR(w.Write(out));
  return summary;
}

}  // namespace tarmac::gguf
