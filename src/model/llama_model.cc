#include "model/llama_model.h"


#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <utility>
#include <vector>

#include "tensor/file_reader.h"

#include "base/check.h"
#include "kernels/attention.h"
#include "kernels/dequant.h"
#include "kernels/matmul.h"
#include "tensor/kv_layout.h"

namespace tarmac::model {
namespace {

// Query tokens per attention tile. On AMX a tile stages its KV head's K/V once per chunk, so
// 32 rather than 16 halves the staging of a 32-token prefix hit (bench/NOTES.md).
constexpr int32_t kQueryTile = 32;

// How far ahead the rope cache is built: the trained context, at least 4096 positions.
int64_t RopePositions(const ModelConfig& c) { return std::max<int64_t>(c.n_ctx_train, 4096); }

}  // namespace

Result<std::unique_ptr<LlamaModel>> LlamaModel::Load(const std::string& path, bool use_mmap, int32_t context,
                                                     const ProgressFn& progress) {
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->progress_ = progress;
  if (use_mmap) {
    TARMAC_ASSIGN_OR_RETURN(m->file_, gguf::File::Open(path));
  } else {
    std::function<void(uint64_t, uint64_t)> on_read;
    if (progress)
      on_read = [&progress](uint64_t done, uint64_t total) {
        progress("reading", static_cast<int64_t>(done), static_cast<int64_t>(total));
      };
    TARMAC_RETURN_IF_ERROR(ReadFileInto(path, &m->owned_bytes_, /*huge_pages=*/true, on_read));
    TARMAC_ASSIGN_OR_RETURN(m->file_,
                            gguf::File::Parse({m->owned_bytes_.data(), m->owned_bytes_.size()}));
  }
  TARMAC_ASSIGN_OR_RETURN(m->config_, LoadModelConfig(m->file_));
  Status init = m->Init(context);
  m->progress_ = nullptr;
  TARMAC_RETURN_IF_ERROR(init);
  return m;
}

Status LlamaModel::Init(int32_t context) {
  const ModelConfig& c = config_;
  if (context < 0) return InvalidArgument("context {} must be >= 0", context);
  TARMAC_RETURN_IF_ERROR(LoadWeights(file_, c, &w_));
  weight_bytes_ = w_.bytes;
  active_weight_bytes_ = w_.ActiveBytesPerToken(c);
  if (c.is_moe()) {
    const size_t n = static_cast<size_t>(c.n_layer) * static_cast<size_t>(c.router.n_expert);
    expert_tokens_ = std::make_unique<std::atomic<int64_t>[]>(n);
    for (size_t i = 0; i < n; ++i) expert_tokens_[i].store(0, std::memory_order_relaxed);
  }
  const kernels::RopeType type = c.desc->rope;
  // Frequency divisors: llama-3's, or LongRoPE's long factors when the served context exceeds
  // the one the short factors were trained for (llama.cpp's rule).
  const float* factors = w_.rope_freqs;
  if (w_.rope_long != nullptr) {
    factors = (context > 0 ? context : c.n_ctx_train) > c.n_ctx_orig ? w_.rope_long : w_.rope_short;
  }
  auto yarn = [&c](float base) {
    return c.yarn ? kernels::MakeRopeYarn(c.n_rot, c.yarn_orig_ctx, base, c.yarn_beta_fast,
                                          c.yarn_beta_slow)
                  : kernels::RopeYarn{};
  };
  rope_ = kernels::RopeCache(type, c.n_rot, RopePositions(c), c.rope_freq_base, c.rope_freq_scale,
                             factors, c.rope_attn_factor, yarn(c.rope_freq_base));
  if (c.separate_swa_rope()) {
    rope_swa_ = kernels::RopeCache(type, c.n_rot, RopePositions(c), c.rope_freq_base_swa,
                                   c.rope_freq_scale_swa, factors, c.rope_attn_factor,
                                   yarn(c.rope_freq_base_swa));
  }
  PrepareWeights();
  return Status::Ok();
}

void LlamaModel::PrepareWeights() {
  // A tied embedding shares its bytes with a projection: when that one's copy replaces its
  // bytes, token lookup reads its rows from the copy.
  MatrixView* tied = nullptr;
  std::vector<MatrixView*> projections = w_.Projections();
  for (MatrixView* w : projections)
    if (w->data == w_.tok_embd.data) tied = w;
  prepared_.Prepare(projections, {.release_source = owned_bytes_.size() > 0, .progress = progress_});
  if (tied != nullptr && tied->data == nullptr) {
    w_.tok_embd.data = nullptr;
    w_.tok_embd.prepared = tied->prepared;
  }
}

void LlamaModel::EnsureScratch(int32_t n) {
  if (n <= scratch_tokens_) return;
  const ModelConfig& c = config_;
  x_.resize(static_cast<size_t>(n) * c.n_embd);
  xn_.resize(static_cast<size_t>(n) * c.n_embd);
  q_.resize(static_cast<size_t>(n) * c.q_dim());
  k_.resize(static_cast<size_t>(n) * c.kv_dim());
  v_.resize(static_cast<size_t>(n) * c.kv_dim());
  attn_.resize(static_cast<size_t>(n) * c.q_dim());
  if (!c.is_moe()) {  // every layer of a mixture of experts runs ExpertBlock's buffers instead
    gate_.resize(static_cast<size_t>(n) * c.n_ff);
    up_.resize(static_cast<size_t>(n) * c.n_ff);
  }
  logits_in_.resize(static_cast<size_t>(n) * c.n_embd);
  if (c.is_moe()) {
    router_logits_.resize(static_cast<size_t>(n) * c.router.n_expert);
    expert_weights_.resize(static_cast<size_t>(n) * c.router.n_used);
    expert_ids_.resize(static_cast<size_t>(n) * c.router.n_used);
    moe_out_.resize(static_cast<size_t>(n) * c.n_embd);
  }
  scratch_tokens_ = n;
}

void LlamaModel::Project(const MatrixView& w, const float* x, int32_t n_tokens, float* y,
                         ThreadPool* pool) const {
  kernels::MatMul(w, x, n_tokens, y, pool);
}

void LlamaModel::ProjectShared(std::initializer_list<const MatrixView*> ws,
                               std::initializer_list<float*> ys, const float* x,
                               int32_t n_tokens, ThreadPool* pool) const {
  TARMAC_DCHECK(ws.size() == ys.size());
  kernels::MatMulShared(ws.begin(), ys.begin(), static_cast<int>(ws.size()), x, n_tokens, pool);
}

namespace {

// Per-token elementwise work: split over the pool for larger batches, where it would
// otherwise leave the other threads idle between matmuls. Up to 4 chunks per thread, none
// under 16 tokens: a norm of 4 rows is well under a microsecond, so 4-token chunks lose
// more to contended claims than they gain (bench/NOTES.md).
template <class Fn>
void ForTokens(int32_t n, ThreadPool* pool, Fn&& fn) {
  if (pool == nullptr || pool->num_threads() == 1 || n < 16) {
    for (int32_t t = 0; t < n; ++t) fn(t);
    return;
  }
  const int64_t threads = pool->num_threads();
  const int64_t per_thread = std::clamp<int64_t>(n / (16 * threads), 1, 4);
  pool->ParallelFor(n, (n + per_thread * threads - 1) / (per_thread * threads),
                    [&](int64_t b, int64_t e, int) {
                      for (int64_t t = b; t < e; ++t) fn(static_cast<int32_t>(t));
                    });
}

kernels::GluKind Glu(FfnActivation a) {
  switch (a) {
    case FfnActivation::kSwiGlu: return kernels::GluKind::kSwiGlu;
    case FfnActivation::kGeGlu: return kernels::GluKind::kGeGlu;
    case FfnActivation::kSwiGluOai: return kernels::GluKind::kSwiGluOai;
  }
  return kernels::GluKind::kSwiGlu;
}

// RMSNorm of each of n_heads rows of head_dim floats, in place (Q/K norms).
void NormHeads(float* x, const float* weight, int32_t n_heads, int32_t head_dim, float eps) {
  for (int32_t h = 0; h < n_heads; ++h) {
    float* row = x + static_cast<int64_t>(h) * head_dim;
    kernels::RmsNorm(row, weight, head_dim, eps, row);
  }
}

}  // namespace

void LlamaModel::Forward(const ForwardBatch& batch, KvCache* cache, ThreadPool* pool,
                         std::vector<float>* logits) {
  const ModelConfig& c = config_;
  const int32_t n = batch.n_tokens();
  TARMAC_CHECK(batch.positions.size() == static_cast<size_t>(n) &&
               batch.seq.size() == static_cast<size_t>(n) &&
               batch.slots.size() == static_cast<size_t>(n));
  TARMAC_CHECK(cache->shape().head_dim == c.head_dim && cache->shape().n_kv_heads == c.n_head_kv &&
               cache->shape().n_layers == c.n_layer);
  if (batch.has_trees()) {
    TARMAC_CHECK(batch.tree_mask.size() == static_cast<size_t>(n) &&
                 batch.rope_positions.size() == static_cast<size_t>(n) &&
                 batch.tree_begin.size() == batch.block_tables.size());
    TARMAC_CHECK(std::all_of(c.layer_window.begin(), c.layer_window.end(), [](int32_t w) { return w == 0; }));
  }
  EnsureScratch(std::max(n, 1));
  Embed(batch);
  PlanQueryTiles(batch);
  for (int32_t il = 0; il < c.n_layer; ++il) {
    AttentionBlock(il, batch, cache, pool);
    FeedForwardBlock(il, n, pool);
  }
  Output(batch, pool, logits);
}

void LlamaModel::Embed(const ForwardBatch& batch) {
  const ModelConfig& c = config_;
  const int64_t E = c.n_embd;
  // Gemma scales the embeddings by sqrt(n_embd), in f32 as llama.cpp does.
  const float scale = c.desc->scale_embedding ? std::sqrt(static_cast<float>(E)) : 1.0f;
  for (int32_t t = 0; t < batch.n_tokens(); ++t) {
    TARMAC_CHECK(batch.tokens[t] >= 0 && batch.tokens[t] < c.n_vocab);
    TARMAC_CHECK(batch.positions[t] >= 0 && batch.positions[t] < rope_.max_positions());
    TARMAC_CHECK(batch.RopePosition(t) >= 0 && batch.RopePosition(t) <= batch.positions[t]);
    kernels::DequantizeMatrixRow(w_.tok_embd, batch.tokens[t], &x_[t * E]);  // source or copy
    if (scale != 1.0f) kernels::Scale(&x_[t * E], scale, &x_[t * E], E);
  }
}

// Query tiles: runs of consecutive positions of one sequence (a prefill chunk), at most
// kQueryTile tokens, so K/V blocks are converted once per tile rather than once per token.
void LlamaModel::PlanQueryTiles(const ForwardBatch& batch) {
  const int32_t n = batch.n_tokens();
  tiles_.clear();
  for (int32_t t = 0; t < n;) {
    int32_t e = t + 1;
    while (e < n && e - t < kQueryTile && batch.seq[e] == batch.seq[t] &&
           batch.positions[e] == batch.positions[e - 1] + 1)
      ++e;
    tiles_.push_back({t, e - t});
    t = e;
  }
}

void LlamaModel::AttentionBlock(int32_t il, const ForwardBatch& batch, KvCache* cache,
                                ThreadPool* pool) {
  const ModelConfig& c = config_;
  const LayerWeights& L = w_.layers[il];
  const int32_t n = batch.n_tokens();
  const int64_t E = c.n_embd, QD = c.q_dim(), KD = c.kv_dim();
  const kernels::AttentionVariant variant{c.layer_window[il], c.attn_softcap, L.sinks};
  const kernels::RopeCache& rope =
      variant.window > 0 && c.separate_swa_rope() ? rope_swa_ : rope_;
  ForTokens(n, pool, [&](int32_t t) {
    kernels::RmsNorm(&x_[t * E], L.attn_norm, E, c.rms_eps, &xn_[t * E]);
  });
  ProjectShared({&L.wq, &L.wk, &L.wv}, {q_.data(), k_.data(), v_.data()}, xn_.data(), n, pool);
  ForTokens(n, pool, [&](int32_t t) {
    if (L.bq != nullptr) kernels::Add(&q_[t * QD], L.bq, &q_[t * QD], QD);
    if (L.bk != nullptr) kernels::Add(&k_[t * KD], L.bk, &k_[t * KD], KD);
    if (L.bv != nullptr) kernels::Add(&v_[t * KD], L.bv, &v_[t * KD], KD);
    if (L.q_norm != nullptr) NormHeads(&q_[t * QD], L.q_norm, c.n_head, c.head_dim, c.rms_eps);
    if (L.k_norm != nullptr) NormHeads(&k_[t * KD], L.k_norm, c.n_head_kv, c.head_dim, c.rms_eps);
    rope.Apply(&q_[t * QD], c.n_head, c.head_dim, batch.RopePosition(t));
    rope.Apply(&k_[t * KD], c.n_head_kv, c.head_dim, batch.RopePosition(t));
  });
  // Serial: int8 K/V rescales a block's values when a token raises its scale.
  for (int32_t t = 0; t < n; ++t) cache->WriteToken(il, batch.slots[t], &k_[t * KD], &v_[t * KD]);
  const kernels::PagedKvView view = cache->View(il);
  // Work items: (query tile, KV head); each writes a disjoint slice of attn_.
  const int32_t n_kv = c.n_head_kv;
  const int64_t n_items = static_cast<int64_t>(tiles_.size()) * n_kv;
  auto attend = [&](int64_t b, int64_t e, int) {
    for (int64_t item = b; item < e; ++item) {
      const QueryTile& qt = tiles_[item / n_kv];
      const int32_t g = static_cast<int32_t>(item % n_kv);
      const int32_t seq = batch.seq[qt.first];
      const auto& table = batch.block_tables[seq];
      // A tile reaching into its sequence's tree: the nodes' masks.
      kernels::TreeMask tree;
      const bool in_tree = batch.has_trees() && batch.tree_begin[seq] >= 0 &&
                           batch.positions[qt.first + qt.count - 1] >= batch.tree_begin[seq];
      if (in_tree) tree = {batch.tree_begin[seq], &batch.tree_mask[qt.first]};
      kernels::PagedAttentionTile(&q_[qt.first * QD], QD, qt.count, batch.positions[qt.first],
                                  c.n_head, g, view, table.data(), c.attn_scale,
                                  &attn_[qt.first * QD], QD, variant, in_tree ? &tree : nullptr);
    }
  };
  if (pool != nullptr) {
    pool->ParallelFor(n_items, 1, attend);
  } else {
    attend(0, n_items, 0);
  }
  Project(L.wo, attn_.data(), n, xn_.data(), pool);
  // The residual add, and the FFN's input norm with it (one pass over the rows).
  ForTokens(n, pool, [&](int32_t t) {
    if (L.bo != nullptr) kernels::Add(&xn_[t * E], L.bo, &xn_[t * E], E);
    if (L.post_attn_norm != nullptr)
      kernels::RmsNorm(&xn_[t * E], L.post_attn_norm, E, c.rms_eps, &xn_[t * E]);
    kernels::Add(&x_[t * E], &xn_[t * E], &x_[t * E], E);
    kernels::RmsNorm(&x_[t * E], L.ffn_norm, E, c.rms_eps, &xn_[t * E]);
  });
}

void LlamaModel::FeedForwardBlock(int32_t il, int32_t n, ThreadPool* pool) {
  const ModelConfig& c = config_;
  const LayerWeights& L = w_.layers[il];
  const int64_t E = c.n_embd;
  if (L.is_moe()) {
    ExpertBlock(il, n, pool);
    return;
  }
  // Input: the normed rows in xn_ (AttentionBlock's last step). gate_ becomes act(gate) · up.
  const kernels::GluKind glu = Glu(c.desc->activation);
  kernels::MatMulGlu(L.w_gate, L.w_up, xn_.data(), n, glu, gate_.data(), up_.data(), pool);
  Project(L.w_down, gate_.data(), n, xn_.data(), pool);
  ForTokens(n, pool, [&](int32_t t) {
    if (L.post_ffn_norm != nullptr)
      kernels::RmsNorm(&xn_[t * E], L.post_ffn_norm, E, c.rms_eps, &xn_[t * E]);
    kernels::Add(&x_[t * E], &xn_[t * E], &x_[t * E], E);
  });
}

void LlamaModel::ExpertBlock(int32_t il, int32_t n, ThreadPool* pool) {
  const ModelConfig& c = config_;
  const LayerWeights& L = w_.layers[il];
  const int64_t E = c.n_embd;
  const int32_t n_expert = c.router.n_expert, k = c.router.n_used;
  // Input: the normed rows in xn_. Route each token, then run the experts over their tokens.
  Project(L.router, xn_.data(), n, router_logits_.data(), pool);
  if (L.router_bias != nullptr) {
    for (int32_t t = 0; t < n; ++t) {
      float* l = &router_logits_[static_cast<int64_t>(t) * n_expert];
      kernels::Add(l, L.router_bias, l, n_expert);
    }
  }
  RouteExperts(c.router, router_logits_.data(), /*selection_bias=*/nullptr, n, expert_ids_.data(),
               expert_weights_.data());
  const kernels::ExpertChoices choices{expert_ids_.data(), expert_weights_.data(), k};
  const kernels::ExpertWeights experts{L.gate_exps,      L.up_exps,      L.down_exps,
                                       L.gate_exps_bias, L.up_exps_bias, L.down_exps_bias};
  kernels::MoeFfn(experts, xn_.data(), n, choices, Glu(c.desc->activation), moe_out_.data(),
                  &moe_scratch_, pool);
  std::atomic<int64_t>* counts = &expert_tokens_[static_cast<size_t>(il) * n_expert];
  for (int64_t i = 0; i < static_cast<int64_t>(n) * k; ++i) {
    counts[expert_ids_[i]].fetch_add(1, std::memory_order_relaxed);
  }
  ForTokens(n, pool, [&](int32_t t) {
    if (L.post_ffn_norm != nullptr)
      kernels::RmsNorm(&moe_out_[t * E], L.post_ffn_norm, E, c.rms_eps, &moe_out_[t * E]);
    kernels::Add(&x_[t * E], &moe_out_[t * E], &x_[t * E], E);
  });
}

std::vector<int64_t> LlamaModel::ExpertTokenCounts() const {
  const ModelConfig& c = config_;
  if (!c.is_moe()) return {};
  std::vector<int64_t> out(static_cast<size_t>(c.n_layer) * c.router.n_expert);
  for (size_t i = 0; i < out.size(); ++i) out[i] = expert_tokens_[i].load(std::memory_order_relaxed);
  return out;
}

void LlamaModel::Output(const ForwardBatch& batch, ThreadPool* pool, std::vector<float>* logits) {
  const ModelConfig& c = config_;
  const int64_t E = c.n_embd;
  const int32_t n_out = static_cast<int32_t>(batch.logits_for.size());
  for (int32_t i = 0; i < n_out; ++i) {
    const int32_t t = batch.logits_for[i];
    TARMAC_CHECK(t >= 0 && t < batch.n_tokens());
    kernels::RmsNorm(&x_[t * E], w_.output_norm, E, c.rms_eps, &logits_in_[i * E]);
  }
  logits->resize(static_cast<size_t>(n_out) * c.n_vocab);
  if (n_out == 0) return;
  Project(w_.output, logits_in_.data(), n_out, logits->data(), pool);
  if (c.final_softcap > 0.0f) {
    float* l = logits->data();
    kernels::SoftCap(l, c.final_softcap, l, static_cast<int64_t>(n_out) * c.n_vocab);
  }
}

void LlamaModel::Warmup(ThreadPool* pool, KvDtype kv_dtype) {
  const ModelConfig& c = config_;
  // 32 tokens take most of the first-use cost off the first real forward; 128 gain little
  // more at four times the start-up cost (bench/NOTES.md).
  constexpr int32_t kSizes[3] = {32, 4, 1};
  constexpr int32_t kBlocks = static_cast<int32_t>(BlocksFor(32 + 4 + 1, kDefaultBlockSize));
  KvCache cache(KvShape{c.n_layer, c.n_head_kv, c.head_dim, kDefaultBlockSize, kBlocks, kv_dtype});
  std::vector<int32_t> table(kBlocks);
  std::iota(table.begin(), table.end(), 0);
  ForwardBatch b;
  std::vector<float> logits;
  int32_t pos = 0;
  for (int32_t n : kSizes) {
    b.Clear();
    b.block_tables.push_back(table);
    for (int32_t i = 0; i < n; ++i, ++pos) {
      b.tokens.push_back(pos % c.n_vocab);
      b.positions.push_back(pos);
      b.seq.push_back(0);
      b.slots.push_back(pos);  // identity block table: slot == position
    }
    b.logits_for.push_back(n - 1);
    Forward(b, &cache, pool, &logits);
  }
}

}  // namespace tarmac::model
