#include "grammar/compiled_grammar.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/check.h"
#include "base/thread_pool.h"
#include "grammar/mask_classes.h"
#include "grammar/token_walker.h"

namespace tarmac::grammar {
namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int32_t CommonPrefix(std::string_view a, std::string_view b) {
  size_t k = 0;
  while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
  return static_cast<int32_t>(std::min<size_t>(k, 65535));
}

// States classified per batch: bounds the memory of per-state results before they are packed.
constexpr int32_t kBatch = 256;

}  // namespace

struct CompiledGrammar::Classified {
  std::vector<int32_t> accepted_ids;  // in byte order of the tokens
  std::vector<int32_t> uncertain;     // sorted positions, ascending
};

Result<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::Compile(const Grammar& grammar,
                                                                       std::shared_ptr<const TokenTable> tokens,
                                                                       const CompileOptions& options) {
  TARMAC_CHECK(tokens != nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  TARMAC_ASSIGN_OR_RETURN(Automaton automaton, Automaton::Build(grammar, options.limits));
  std::shared_ptr<CompiledGrammar> g(new CompiledGrammar(std::move(automaton), std::move(tokens)));
  g->stats_.automaton_ms = MsSince(t0);
  const auto t1 = std::chrono::steady_clock::now();
  g->Precompute(std::max(1, options.num_threads));
  g->stats_.masks_ms = MsSince(t1);
  return std::shared_ptr<const CompiledGrammar>(std::move(g));
}

void CompiledGrammar::Precompute(int num_threads) {
  const Automaton& a = automaton_;
  const TokenTable& t = *tokens_;
  stats_.num_states = a.num_states();
  class_ = MaskClasses(a, t.max_token_bytes() + 1);
  int32_t num_classes = 0;
  for (int32_t c : class_) num_classes = std::max(num_classes, c + 1);
  masks_.assign(num_classes, StateMask{});
  // One representative state with byte edges per class.
  std::vector<int32_t> todo, rep(num_classes, -1);
  for (int32_t s = 0; s < a.num_states(); ++s) {
    if (!a.has_bytes(s)) continue;
    ++stats_.num_mask_states;
    if (rep[class_[s]] < 0) {
      rep[class_[s]] = s;
      todo.push_back(s);
    }
  }
  stats_.num_mask_classes = static_cast<int32_t>(todo.size());

  std::unique_ptr<ThreadPool> threads;
  if (num_threads > 1 && todo.size() > 1) threads = std::make_unique<ThreadPool>(num_threads);
  const int nt = threads ? threads->num_threads() : 1;
  std::vector<TokenWalker> walkers(nt, TokenWalker(&a));
  std::vector<std::vector<StackNode>> pools(nt);

  auto classify = [&](int32_t s, int thread) {
    Classified c;
    // The root rule completing is the end of the output: nothing after it is context.
    const bool bottom_is_end = !a.rule_called(a.state(s).rule);
    std::vector<StackNode>& pool = pools[thread];
    pool.clear();
    walkers[thread].Walk(
        &pool, StackNode{s, -1}, AllTokens{&t},
        [&](int32_t k, bool accepted, bool bottom_seen) {
          if (accepted) {
            c.accepted_ids.push_back(t.sorted_id(k));
          } else if (bottom_seen && !bottom_is_end) {
            c.uncertain.push_back(k);
          }
        },
        [&](int32_t begin, int32_t end, bool bottom_seen) {
          if (!bottom_seen || bottom_is_end) return;
          for (int32_t k = begin; k < end; ++k) c.uncertain.push_back(k);
        });
    return c;
  };

  std::vector<Classified> batch;
  for (size_t b = 0; b < todo.size(); b += kBatch) {
    const int32_t n = static_cast<int32_t>(std::min<size_t>(kBatch, todo.size() - b));
    batch.assign(n, Classified{});
    if (threads) {
      threads->ParallelFor(n, 1, [&](int64_t begin, int64_t end, int thread) {
        for (int64_t i = begin; i < end; ++i) batch[i] = classify(todo[b + i], thread);
      });
    } else {
      for (int32_t i = 0; i < n; ++i) batch[i] = classify(todo[b + i], 0);
    }
    for (int32_t i = 0; i < n; ++i) Store(class_[todo[b + i]], std::move(batch[i]));
  }
  stats_.mask_bytes = static_cast<int64_t>(ids_.size() * 4 + words_.size() * 8 + uncertain_.size() * 6);
}

// Keeps the smallest of: accepted ids, text tokens not accepted, a bitset.
void CompiledGrammar::Store(int32_t cls, Classified&& c) {
  const TokenTable& t = *tokens_;
  const size_t words = t.text_mask().size();
  StateMask& m = masks_[cls];
  const size_t accepted = c.accepted_ids.size();
  const size_t rejected = static_cast<size_t>(t.num_sorted()) - accepted;
  if (words * 8 < 4 * std::min(accepted, rejected)) {
    m.storage = Storage::kBitset;
    m.begin = static_cast<uint32_t>(words_.size());
    words_.resize(words_.size() + words, 0);
    uint64_t* bits = words_.data() + m.begin;
    for (int32_t id : c.accepted_ids) bits[id >> 6] |= 1ull << (id & 63);
    m.end = static_cast<uint32_t>(words_.size());
  } else if (accepted <= rejected) {
    m.storage = Storage::kAcceptedIds;
    std::sort(c.accepted_ids.begin(), c.accepted_ids.end());
    m.begin = static_cast<uint32_t>(ids_.size());
    ids_.insert(ids_.end(), c.accepted_ids.begin(), c.accepted_ids.end());
    m.end = static_cast<uint32_t>(ids_.size());
  } else {
    m.storage = Storage::kRejectedIds;
    std::vector<uint64_t> bits(words, 0);
    for (int32_t id : c.accepted_ids) bits[id >> 6] |= 1ull << (id & 63);
    m.begin = static_cast<uint32_t>(ids_.size());
    for (int32_t id = 0; id < t.n_vocab(); ++id)
      if (t.is_text(id) && !((bits[id >> 6] >> (id & 63)) & 1)) ids_.push_back(id);
    m.end = static_cast<uint32_t>(ids_.size());
  }
  m.unc_begin = static_cast<uint32_t>(uncertain_.size());
  for (size_t i = 0; i < c.uncertain.size(); ++i) {
    uncertain_.push_back(c.uncertain[i]);
    uncertain_lcp_.push_back(
        i == 0 ? 0 : static_cast<uint16_t>(CommonPrefix(t.sorted_bytes(c.uncertain[i - 1]), t.sorted_bytes(c.uncertain[i]))));
  }
  m.unc_end = static_cast<uint32_t>(uncertain_.size());
  stats_.num_uncertain += static_cast<int64_t>(c.uncertain.size());
}

void CompiledGrammar::WriteContextFreeMask(int32_t s, uint64_t* out) const {
  const StateMask& m = masks_[class_[s]];
  const std::vector<uint64_t>& text = tokens_->text_mask();
  switch (m.storage) {
    case Storage::kNone:
      TARMAC_CHECK(false && "state without byte edges has no mask");
      break;
    case Storage::kAcceptedIds:
      std::memset(out, 0, text.size() * 8);
      for (uint32_t i = m.begin; i < m.end; ++i) out[ids_[i] >> 6] |= 1ull << (ids_[i] & 63);
      break;
    case Storage::kRejectedIds:
      std::memcpy(out, text.data(), text.size() * 8);
      for (uint32_t i = m.begin; i < m.end; ++i) out[ids_[i] >> 6] &= ~(1ull << (ids_[i] & 63));
      break;
    case Storage::kBitset:
      std::memcpy(out, words_.data() + m.begin, text.size() * 8);
      break;
  }
}

}  // namespace tarmac::grammar
