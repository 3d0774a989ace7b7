#include "gguf/make_random.h"

#include <cmath>

#include "base/check.h"
#include "base/hash.h"
#include "base/utf8.h"
#include "gguf/gguf_writer.h"
#include "gguf/quantize_file.h"
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

struct TensorSpec {
  std::string name;
  std::vector<int64_t> dims;  // GGUF order: dims[0] = row length
  bool is_norm;
};

std::vector<TensorSpec> TensorSpecs(const ModelShape& s) {
  std::vector<TensorSpec> t;
  t.push_back({"token_embd.weight", {s.dim, s.vocab}, false});
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    t.push_back({p + "attn_norm.weight", {s.dim}, true});
    t.push_back({p + "attn_q.weight", {s.dim, s.dim}, false});
    t.push_back({p + "attn_k.weight", {s.dim, s.kv_dim()}, false});
    t.push_back({p + "attn_v.weight", {s.dim, s.kv_dim()}, false});
    t.push_back({p + "attn_output.weight", {s.dim, s.dim}, false});
    t.push_back({p + "ffn_norm.weight", {s.dim}, true});
    t.push_back({p + "ffn_gate.weight", {s.dim, s.ffn}, false});
    t.push_back({p + "ffn_up.weight", {s.dim, s.ffn}, false});
    t.push_back({p + "ffn_down.weight", {s.ffn, s.dim}, false});
  }
  t.push_back({"output_norm.weight", {s.dim}, true});
  if (!s.tied) t.push_back({"output.weight", {s.dim, s.vocab}, false});
  return t;
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

Result<MakeRandomSummary> MakeRandomModel(const ModelShape& shape, DType type,
                                          const std::string& out, const MakeRandomOptions& options,
                                          ThreadPool* pool) {
  TARMAC_RETURN_IF_ERROR(shape.Validate());
  if (!IsWeightTargetType(type)) {
    return InvalidArgument("make-random: cannot write weights as {} (use f32, f16, bf16, q8_0, "
                           "q4_0, q4_K or q6_K)", DTypeName(type));
  }
  Writer w;
  w.SetKV("general.architecture", Value::Str("llama"));
  w.SetKV("general.name", Value::Str(fmt::format("tarmac random {}", shape.name)));
  w.SetKV("general.description",
          Value::Str(fmt::format("random weights (seed {}), shape {}; made by tarmac gguf "
                                 "make-random", options.seed, shape.ToString())));
  w.SetKV("general.file_type", Value::U32(*LlamaFileType(type)));
  if (Traits(type).block_size > 1) w.SetKV("general.quantization_version", Value::U32(2));
  auto u32 = [](int64_t v) { return Value::U32(static_cast<uint32_t>(v)); };
  w.SetKV("llama.context_length", u32(shape.context));
  w.SetKV("llama.embedding_length", u32(shape.dim));
  w.SetKV("llama.block_count", u32(shape.layers));
  w.SetKV("llama.feed_forward_length", u32(shape.ffn));
  w.SetKV("llama.rope.dimension_count", u32(shape.head_dim()));
  w.SetKV("llama.rope.freq_base", Value::F32(static_cast<float>(shape.rope_base)));
  w.SetKV("llama.attention.head_count", u32(shape.heads));
  w.SetKV("llama.attention.head_count_kv", u32(shape.kv_heads));
  w.SetKV("llama.attention.layer_norm_rms_epsilon", Value::F32(static_cast<float>(shape.rms_eps)));
  w.SetKV("llama.vocab_size", u32(shape.vocab));

  const ByteLevelVocab vocab = MakeByteLevelVocab(shape.vocab);
  w.SetKV("tokenizer.ggml.model", Value::Str("gpt2"));
  w.SetKV("tokenizer.ggml.pre", Value::Str("gpt-2"));
  w.SetKV("tokenizer.ggml.tokens", Value::StrArray(vocab.tokens));
  w.SetKV("tokenizer.ggml.token_type", Value::I32Array(vocab.token_types));
  w.SetKV("tokenizer.ggml.merges", Value::StrArray(vocab.merges));
  w.SetKV("tokenizer.ggml.bos_token_id", u32(vocab.eos_id));
  w.SetKV("tokenizer.ggml.eos_token_id", u32(vocab.eos_id));
  w.SetKV("tokenizer.ggml.add_bos_token", Value::Bool(false));

  MakeRandomSummary summary;
  const std::vector<TensorSpec> specs = TensorSpecs(shape);
  const size_t count = specs.size();
  for (size_t i = 0; i < count; ++i) {
    const TensorSpec& t = specs[i];
    std::string note;
    const DType to = PlanTensorType(type, static_cast<int>(t.dims.size()), t.dims[0], &note);
    if (!note.empty()) summary.notes.push_back(t.name + ": " + note);
    const int64_t rows = t.dims.size() > 1 ? t.dims[1] : 1;
    summary.parameters += t.dims[0] * rows;
    summary.tensor_bytes += static_cast<uint64_t>(RowBytes(to, t.dims[0]) * rows);
    const uint64_t stream_base = SplitMix64(options.seed) ^ HashName(t.name);
    auto fill = [&t, to, rows, stream_base, pool, i, count, &options](std::span<uint8_t> dst) {
      const int64_t n = t.dims[0];
      Status st;
      if (t.is_norm) {
        std::vector<float> ones(n, 1.0f);
        st = QuantizeRowRef(to, ones.data(), dst.data(), n);
      } else {
        st = ConvertRows(
            to, rows, n,
            [stream_base, n](int64_t r, float* buf) {
              RandomRow(stream_base + SplitMix64(static_cast<uint64_t>(r)), buf, n);
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
