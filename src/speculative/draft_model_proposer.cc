#include "speculative/draft_model_proposer.h"

#include <algorithm>

#include "base/check.h"
#include "base/clock.h"
#include "base/hash.h"
#include "tensor/kv_layout.h"

namespace tarmac::speculative {

Result<std::unique_ptr<DraftModelProposer>> DraftModelProposer::Create(
    model::LlamaModel* draft, int32_t target_vocab, int32_t context, int32_t max_seqs,
    ThreadPool* pool) {
  TARMAC_CHECK(pool != nullptr);
  const model::ModelConfig& c = draft->config();
  if (c.n_vocab != target_vocab) {
    return InvalidArgument("draft model has {} tokens in its vocabulary but the target has {}",
                           c.n_vocab, target_vocab);
  }
  context = std::min(context, c.n_ctx_train);
  const int32_t per_seq = static_cast<int32_t>(BlocksFor(context, kDefaultBlockSize));
  model::KvShape shape{c.n_layer, c.n_head_kv, c.head_dim, kDefaultBlockSize,
                       per_seq * std::max(max_seqs, 1)};
  return std::unique_ptr<DraftModelProposer>(
      new DraftModelProposer(draft, context, shape, pool));
}

DraftModelProposer::DraftModelProposer(model::LlamaModel* draft, int32_t context,
                                       const model::KvShape& shape, ThreadPool* pool)
    : model_(draft), context_(context), threads_(pool), cache_(shape), pool_(shape.num_blocks) {}

bool DraftModelProposer::Ensure(Seq* s, int32_t tokens) {
  const size_t need = static_cast<size_t>(BlocksFor(tokens, kDefaultBlockSize));
  while (s->blocks.size() < need) {
    auto b = pool_.Allocate();
    if (!b) return false;
    s->blocks.push_back(*b);
  }
  return true;
}

void DraftModelProposer::Trim(Seq* s) {
  const size_t keep = static_cast<size_t>(BlocksFor(s->computed, kDefaultBlockSize));
  while (s->blocks.size() > keep) {
    pool_.Release(s->blocks.back());
    s->blocks.pop_back();
  }
}

void DraftModelProposer::AddToken(int32_t seq_index, const Seq& s, int32_t token, int32_t pos) {
  batch_.tokens.push_back(token);
  batch_.positions.push_back(pos);
  batch_.seq.push_back(seq_index);
  batch_.slots.push_back(SlotOf(s.blocks, pos, kDefaultBlockSize));
}

namespace {
// Tokens × weight bytes up to which a draft round runs without the pool (wp-1m: up to 4
// tokens of its f16 weights, up to 8 as Q8_0, the default --draft-type).
constexpr int64_t kSerialDraftBytes = int64_t{9} << 20;
}  // namespace

void DraftModelProposer::Propose(std::span<const ProposeRequest> requests,
                                 std::vector<std::vector<sampling::DraftToken>>* drafts) {
  drafts->assign(requests.size(), {});
  steady_rounds_ = 0;
  steady_seconds_ = 0;
  const int32_t V = model_->config().n_vocab;
  struct Active {
    size_t index;      // into requests
    Seq* seq;
    int32_t len;       // known tokens
    int32_t k;
    sampling::Sampler sampler;
  };
  std::vector<Active> active;
  // Catch up: feed every known token the draft has not seen; the last one's logits give d1.
  batch_.Clear();
  for (size_t i = 0; i < requests.size(); ++i) {
    const ProposeRequest& r = requests[i];
    const int32_t len = static_cast<int32_t>(r.tokens->size());
    const int32_t k = std::min(r.k, context_ - len);
    if (k < 1) continue;
    Seq& s = seqs_[r.id];
    s.computed = std::min(s.computed, len - 1);
    if (!Ensure(&s, len + k - 1)) {  // out of draft KV: this request goes without drafts
      Trim(&s);
      continue;
    }
    active.push_back({i, &s, len, k, *r.sampler});
    // The draft's randomness must be independent of the target's (whose RNG the copy
    // carries) and of other requests': a stream per (request, draft round).
    // A seeded request's streams come from its seed, not its engine id, so the same seeded
    // request drafts (and so samples) the same whichever id it gets: streamed == not.
    const std::optional<uint64_t>& seed = r.sampler->params().seed;
    const uint64_t stream = seed ? SplitMix64(*seed ^ 0x9e3779b97f4a7c15ull) : static_cast<uint64_t>(r.id);
    active.back().sampler.rng().Seed(SplitMix64(SplitMix64(stream ^ 0x5bd1e995ull) + ++s.rounds));
    const int32_t seq_index = static_cast<int32_t>(batch_.block_tables.size());
    batch_.block_tables.push_back(s.blocks);
    for (int32_t p = s.computed; p < len; ++p) AddToken(seq_index, s, (*r.tokens)[p], p);
    batch_.logits_for.push_back(batch_.n_tokens() - 1);
  }
  if (active.empty()) return;
  // Each round: one forward (one logits row per active request, in order), one draft each;
  // requests that want more feed their newest draft at the next position.
  // The first round is steady unless some request catches up more than two tokens (a new
  // request's prompt, or one back from preemption); later rounds feed one token each.
  bool steady = batch_.n_tokens() <= 2 * static_cast<int32_t>(active.size());
  for (int32_t step = 0;; ++step) {
    const double t_round = NowSeconds();
    // A small draft round runs on this thread alone: handing each of its ~25 small matmuls
    // to the pool costs more than the work; at larger rounds the pool wins (bench/NOTES.md).
    const bool serial = static_cast<int64_t>(batch_.n_tokens()) * model_->weight_bytes() <=
                        kSerialDraftBytes;
    model_->Forward(batch_, &cache_, serial ? nullptr : threads_, &logits_);
    std::vector<Active> next;
    for (size_t a = 0; a < active.size(); ++a) {
      Active& act = active[a];
      act.seq->computed = act.len + step;  // tokens fed so far
      std::span<float> l(logits_.data() + a * V, static_cast<size_t>(V));
      sampling::DraftToken d = sampling::SampleDraft(act.sampler, l);
      if (requests[act.index].alts > 0) sampling::DrawAlternatives(act.sampler, l, requests[act.index].alts, &d);
      act.sampler.Accept(d.id);
      (*drafts)[act.index].push_back(std::move(d));
      if (step + 1 < act.k) next.push_back(std::move(act));
    }
    if (steady) {
      ++steady_rounds_;
      steady_seconds_ += NowSeconds() - t_round;
    }
    steady = true;
    if (next.empty()) break;
    batch_.Clear();
    for (Active& act : next) {
      const int32_t seq_index = static_cast<int32_t>(batch_.block_tables.size());
      batch_.block_tables.push_back(act.seq->blocks);
      AddToken(seq_index, *act.seq, (*drafts)[act.index].back().id, act.len + step);
      batch_.logits_for.push_back(batch_.n_tokens() - 1);
    }
    active = std::move(next);
  }
}

void DraftModelProposer::Rollback(int64_t id, int32_t valid_len) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  it->second.computed = std::min(it->second.computed, valid_len);
  Trim(&it->second);
}

void DraftModelProposer::Release(int64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  for (int32_t b : it->second.blocks) pool_.Release(b);
  seqs_.erase(it);
}

Status DraftModelProposer::CheckIntegrity() const {
  TARMAC_RETURN_IF_ERROR(pool_.CheckIntegrity());
  std::vector<int32_t> holders(static_cast<size_t>(pool_.num_blocks()), 0);
  for (const auto& [id, s] : seqs_) {
    if (static_cast<int64_t>(s.blocks.size()) < BlocksFor(s.computed, kDefaultBlockSize))
      return Internal("draft sequence {}: {} blocks for {} computed tokens", id, s.blocks.size(),
                      s.computed);
    for (int32_t b : s.blocks) ++holders[b];
  }
  for (int32_t b = 0; b < pool_.num_blocks(); ++b) {
    if (pool_.refcount(b) != holders[b])
      return Internal("draft block {} has refcount {} but {} holders", b, pool_.refcount(b),
                      holders[b]);
  }
  return Status::Ok();
}

}  // namespace tarmac::speculative
