#include "model/model_weights.h"

#include <string>

#include "kernels/dequant.h"
#include "kernels/matvec.h"

namespace tarmac::model {
namespace {

// Looks tensors up in one file, accounting their bytes; errors name the family.
class TensorFinder {
 public:
  TensorFinder(const gguf::File& file, const ModelConfig& c, ModelWeights* w)
      : file_(file), c_(c), w_(w) {}

  bool Has(const std::string& name) const { return file_.FindTensor(name) != nullptr; }
  const gguf::TensorInfo* Find(const std::string& name) const { return file_.FindTensor(name); }

  // A [rows x cols] matrix (GGUF [cols, rows]).
  Status Matrix(const std::string& name, int64_t rows, int64_t cols, MatrixView* out) {
    const gguf::TensorInfo* t = file_.FindTensor(name);
    if (t == nullptr) return Missing(name);
    if (t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows)
      return InvalidArgument("tensor {} must be [{}, {}] (ne0, ne1)", name, cols, rows);
    if (!kernels::IsMatVecType(t->type))
      return Unimplemented("tensor {} has dtype {}, which tarmac cannot compute with", name,
                           DTypeName(t->type));
    *out = MatrixView::Dense(t->type, t->data, rows, cols);
    w_->bytes += static_cast<int64_t>(t->nbytes);
    return Status::Ok();
  }

  // A stacked [n x rows x cols] tensor (GGUF [cols, rows, n]) as n per-expert [rows x cols]
  // views of its bytes.
  Status Experts(const std::string& name, int64_t n, int64_t rows, int64_t cols,
                 std::vector<MatrixView>* out) {
    const gguf::TensorInfo* t = file_.FindTensor(name);
    if (t == nullptr) return Missing(name);
    if (t->dims.size() != 3 || t->dims[0] != cols || t->dims[1] != rows || t->dims[2] != n)
      return InvalidArgument("tensor {} must be [{}, {}, {}] (ne0, ne1, expert_count)", name, cols,
                             rows, n);
    if (!kernels::IsMatVecType(t->type))
      return Unimplemented("tensor {} has dtype {}, which tarmac cannot compute with", name,
                           DTypeName(t->type));
    const int64_t per_expert = RowBytes(t->type, cols) * rows;
    TARMAC_CHECK(per_expert * n == static_cast<int64_t>(t->nbytes));
    out->clear();
    for (int64_t e = 0; e < n; ++e) {
      out->push_back(MatrixView::Dense(t->type, static_cast<const uint8_t*>(t->data) + e * per_expert,
                                       rows, cols));
    }
    w_->bytes += static_cast<int64_t>(t->nbytes);
    w_->expert_bytes += static_cast<int64_t>(t->nbytes);
    return Status::Ok();
  }

  // A [n] vector as f32 (converted when stored otherwise); nullptr when absent and optional.
  // rows > 1: a [rows][n] matrix of them (GGUF [n, rows]), e.g. per-expert biases.
  Status Vector(const std::string& name, int64_t n, bool required, const float** out,
                int64_t rows = 1) {
    const gguf::TensorInfo* t = file_.FindTensor(name);
    *out = nullptr;
    if (t == nullptr) return required ? Missing(name) : Status::Ok();
    if (rows == 1 && (t->dims.size() != 1 || t->dims[0] != n))
      return InvalidArgument("tensor {} must be [{}]", name, n);
    if (rows > 1 && (t->dims.size() != 2 || t->dims[0] != n || t->dims[1] != rows))
      return InvalidArgument("tensor {} must be [{}, {}]", name, n, rows);
    n *= rows;
    w_->bytes += static_cast<int64_t>(t->nbytes);
    if (t->type == DType::kF32 && reinterpret_cast<uintptr_t>(t->data) % alignof(float) == 0) {
      *out = reinterpret_cast<const float*>(t->data);
      return Status::Ok();
    }
    if (t->type != DType::kF32 && t->type != DType::kF16 && t->type != DType::kBF16)
      return Unimplemented("tensor {} has dtype {} (f32, f16, bf16 expected)", name,
                           DTypeName(t->type));
    auto& buf = w_->owned_f32.emplace_back(n);
    kernels::DequantizeRow(t->type, t->data, buf.data(), n);
    *out = buf.data();
    return Status::Ok();
  }

  Status Missing(const std::string& name) const {
    return InvalidArgument("tensor {} is missing (a {} model needs it)", name, c_.arch_name);
  }

 private:
  const gguf::File& file_;
  const ModelConfig& c_;
  ModelWeights* w_;
};

// Rows [first, first + rows) of a matrix view, sharing its bytes.
MatrixView RowSlice(const MatrixView& m, int64_t first, int64_t rows) {
  return MatrixView::Dense(m.type, m.row(first), rows, m.cols);
}

// Q, K, V projections (separate or fused) and their biases.
Status LoadQkv(TensorFinder& t, const ModelConfig& c, const std::string& p, LayerWeights* L) {
  const ArchDescription& d = *c.desc;
  const int64_t E = c.n_embd, QD = c.q_dim(), KD = c.kv_dim();
  const bool fused = d.fused_qkv != Presence::kNever && t.Has(p + "attn_qkv.weight");
  const bool bias_required = d.qkv_bias == Presence::kRequired;
  if (fused) {
    MatrixView qkv;
    TARMAC_RETURN_IF_ERROR(t.Matrix(p + "attn_qkv.weight", QD + 2 * KD, E, &qkv));
    L->wq = RowSlice(qkv, 0, QD);
    L->wk = RowSlice(qkv, QD, KD);
    L->wv = RowSlice(qkv, QD + KD, KD);
    if (d.qkv_bias != Presence::kNever) {
      const float* b = nullptr;
      TARMAC_RETURN_IF_ERROR(t.Vector(p + "attn_qkv.bias", QD + 2 * KD, bias_required, &b));
      if (b != nullptr) L->bq = b, L->bk = b + QD, L->bv = b + QD + KD;
    }
    return Status::Ok();
  }
  TARMAC_RETURN_IF_ERROR(t.Matrix(p + "attn_q.weight", QD, E, &L->wq));
  TARMAC_RETURN_IF_ERROR(t.Matrix(p + "attn_k.weight", KD, E, &L->wk));
  TARMAC_RETURN_IF_ERROR(t.Matrix(p + "attn_v.weight", KD, E, &L->wv));
  if (d.qkv_bias != Presence::kNever) {
    TARMAC_RETURN_IF_ERROR(t.Vector(p + "attn_q.bias", QD, bias_required, &L->bq));
    TARMAC_RETURN_IF_ERROR(t.Vector(p + "attn_k.bias", KD, bias_required, &L->bk));
    TARMAC_RETURN_IF_ERROR(t.Vector(p + "attn_v.bias", KD, bias_required, &L->bv));
  }
  return Status::Ok();
}

// The router and the stacked experts.
Status LoadExperts(TensorFinder& t, const ModelConfig& c, const std::string& p, LayerWeights* L) {
  const int64_t E = c.n_embd, FF = c.n_ff_exp, N = c.router.n_expert;
  if (!t.Has(p + "ffn_gate_exps.weight") && t.Has(p + "ffn_gate.0.weight"))
    return Unimplemented("tensor {}ffn_gate.0.weight: one 2-D tensor per expert is the layout of "
                         "early Mixtral conversions, which llama.cpp no longer reads either; "
                         "convert the model again (3-D {}ffn_gate_exps.weight)", p, p);
  const gguf::TensorInfo* r = t.Find(p + "ffn_gate_inp.weight");
  if (r != nullptr && r->dims.size() == 2 && r->dims[0] == E && r->dims[1] != N)
    return InvalidArgument("tensor {}ffn_gate_inp.weight routes to {} experts, but "
                           "{}.expert_count is {}", p, r->dims[1], c.arch_name, N);
  TARMAC_RETURN_IF_ERROR(t.Matrix(p + "ffn_gate_inp.weight", N, E, &L->router));
  TARMAC_RETURN_IF_ERROR(t.Experts(p + "ffn_gate_exps.weight", N, FF, E, &L->gate_exps));
  TARMAC_RETURN_IF_ERROR(t.Experts(p + "ffn_up_exps.weight", N, FF, E, &L->up_exps));
  TARMAC_RETURN_IF_ERROR(t.Experts(p + "ffn_down_exps.weight", N, E, FF, &L->down_exps));
  if (c.desc->expert_biases) {
    TARMAC_RETURN_IF_ERROR(t.Vector(p + "ffn_gate_inp.bias", N, true, &L->router_bias));
    TARMAC_RETURN_IF_ERROR(t.Vector(p + "ffn_gate_exps.bias", FF, true, &L->gate_exps_bias, N));
    TARMAC_RETURN_IF_ERROR(t.Vector(p + "ffn_up_exps.bias", FF, true, &L->up_exps_bias, N));
    TARMAC_RETURN_IF_ERROR(t.Vector(p + "ffn_down_exps.bias", E, true, &L->down_exps_bias, N));
  }
  return Status::Ok();
}

Status LoadLayer(TensorFinder& t, const ModelConfig& c, int32_t il, LayerWeights* L) {
  const ArchDescription& d = *c.desc;
  const int64_t E = c.n_embd, FF = c.n_ff;
  const std::string p = "blk." + std::to_string(il) + ".";
  TARMAC_RETURN_IF_ERROR(t.Vector(p + "attn_norm.weight", E, true, &L->attn_norm));
  TARMAC_RETURN_IF_ERROR(LoadQkv(t, c, p, L));
  if (d.qk_norm) {
    TARMAC_RETURN_IF_ERROR(t.Vector(p + "attn_q_norm.weight", c.head_dim, true, &L->q_norm));
    TARMAC_RETURN_IF_ERROR(t.Vector(p + "attn_k_norm.weight", c.head_dim, true, &L->k_norm));
  }
  TARMAC_RETURN_IF_ERROR(t.Matrix(p + "attn_output.weight", E, c.q_dim(), &L->wo));
  if (d.o_bias) TARMAC_RETURN_IF_ERROR(t.Vector(p + "attn_output.bias", E, true, &L->bo));
  if (d.attn_sinks) {
    TARMAC_RETURN_IF_ERROR(t.Vector(p + "attn_sinks.weight", c.n_head, true, &L->sinks));
  }
  if (d.post_attn_norm) {
    TARMAC_RETURN_IF_ERROR(
        t.Vector(p + "post_attention_norm.weight", E, true, &L->post_attn_norm));
  }
  TARMAC_RETURN_IF_ERROR(
      t.Vector(p + std::string(d.ffn_norm_name) + ".weight", E, true, &L->ffn_norm));
  if (c.is_moe()) {
    TARMAC_RETURN_IF_ERROR(LoadExperts(t, c, p, L));
  } else if (d.fused_gate_up) {
    MatrixView gate_up;
    TARMAC_RETURN_IF_ERROR(t.Matrix(p + "ffn_up.weight", 2 * FF, E, &gate_up));
    L->w_gate = RowSlice(gate_up, 0, FF);  // gate first, as the converter stacks them
    L->w_up = RowSlice(gate_up, FF, FF);
  } else {
    TARMAC_RETURN_IF_ERROR(t.Matrix(p + "ffn_gate.weight", FF, E, &L->w_gate));
    TARMAC_RETURN_IF_ERROR(t.Matrix(p + "ffn_up.weight", FF, E, &L->w_up));
  }
  if (!c.is_moe()) TARMAC_RETURN_IF_ERROR(t.Matrix(p + "ffn_down.weight", E, FF, &L->w_down));
  if (d.post_ffn_norm) {
    TARMAC_RETURN_IF_ERROR(t.Vector(p + "post_ffw_norm.weight", E, true, &L->post_ffn_norm));
  }
  return Status::Ok();
}

}  // namespace

std::vector<MatrixView*> ModelWeights::Projections() {
  std::vector<MatrixView*> v;
  for (LayerWeights& L : layers) {
    for (MatrixView* w : {&L.wq, &L.wk, &L.wv, &L.wo}) v.push_back(w);
    if (!L.is_moe()) {
      for (MatrixView* w : {&L.w_gate, &L.w_up, &L.w_down}) v.push_back(w);
      continue;
    }
    v.push_back(&L.router);
    for (size_t e = 0; e < L.gate_exps.size(); ++e) {
      for (MatrixView* w : {&L.gate_exps[e], &L.up_exps[e], &L.down_exps[e]}) v.push_back(w);
    }
  }
  v.push_back(&output);
  return v;
}

int64_t ModelWeights::ActiveBytesPerToken(const ModelConfig& c) const {
  const int64_t rest = bytes - lookup_only_bytes - expert_bytes;
  if (!c.is_moe()) return rest + expert_bytes;
  return rest + expert_bytes * c.router.n_used / c.router.n_expert;
}

Status LoadWeights(const gguf::File& file, const ModelConfig& c, ModelWeights* w) {
  const ArchDescription& d = *c.desc;
  TensorFinder t(file, c, w);
  TARMAC_RETURN_IF_ERROR(t.Matrix("token_embd.weight", c.n_vocab, c.n_embd, &w->tok_embd));
  if (d.output != Presence::kNever && t.Has("output.weight")) {
    w->lookup_only_bytes = w->bytes;  // token_embd's, found just above
    TARMAC_RETURN_IF_ERROR(t.Matrix("output.weight", c.n_vocab, c.n_embd, &w->output));
  } else if (d.output == Presence::kRequired) {
    return t.Missing("output.weight");
  } else {
    w->output = w->tok_embd;  // tied embeddings
  }
  TARMAC_RETURN_IF_ERROR(t.Vector("output_norm.weight", c.n_embd, true, &w->output_norm));
  w->layers.resize(c.n_layer);
  for (int32_t il = 0; il < c.n_layer; ++il) {
    TARMAC_RETURN_IF_ERROR(LoadLayer(t, c, il, &w->layers[il]));
  }
  // Llama-3 style rope scaling stores per-pair frequency divisors.
  TARMAC_RETURN_IF_ERROR(t.Vector("rope_freqs.weight", c.n_rot / 2, false, &w->rope_freqs));
  if (d.long_rope) {
    TARMAC_RETURN_IF_ERROR(t.Vector("rope_factors_long.weight", c.n_rot / 2, false, &w->rope_long));
    TARMAC_RETURN_IF_ERROR(
        t.Vector("rope_factors_short.weight", c.n_rot / 2, false, &w->rope_short));
    if ((w->rope_long == nullptr) != (w->rope_short == nullptr))
      return InvalidArgument("tensors rope_factors_long.weight and rope_factors_short.weight "
                             "come together: the file has only one of them");
  }
  return Status::Ok();
}

}  // namespace tarmac::model
