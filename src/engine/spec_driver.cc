#include "engine/spec_driver.h"

#include <algorithm>

#include "base/check.h"
#include "base/clock.h"
#include "tensor/kv_layout.h"
#include "speculative/draft_model_proposer.h"
#include "speculative/ngram_proposer.h"

namespace tarmac::engine {

Result<std::unique_ptr<SpecDriver>> SpecDriver::Create(const SpeculationConfig& config,
                                                       const model::ModelConfig& target,
                                                       const sched::SchedulerConfig& sched_config,
                                                       ThreadPool* threads, SpecHost* host,
                                                       sched::Scheduler* sched, model::KvCache* cache,
                                                       EngineMetrics* metrics) {
  auto d = std::unique_ptr<SpecDriver>(new SpecDriver(config, target.n_vocab, host, sched, cache, metrics));
  const bool use_draft = config.mode == SpecMode::kDraft || (config.mode == SpecMode::kAuto && config.draft_model);
  if (use_draft) {
    // The draft runs on the engine's own threads (see DraftModelProposer::Create).
    TARMAC_ASSIGN_OR_RETURN(d->proposer_, speculative::DraftModelProposer::Create(
                                              config.draft_model, target.n_vocab, sched_config.max_context,
                                              sched_config.max_running, threads));
    // Trees need tree attention, which sliding windows do not have (their masks are ranges).
    d->trees_ok_ = std::all_of(target.layer_window.begin(), target.layer_window.end(), [](int32_t w) { return w == 0; });
  } else if (config.mode == SpecMode::kNgram || config.mode == SpecMode::kAuto) {
    // Matches of 2+ tokens: a single-token match proposes mostly noise (bench/NOTES.md).
    d->proposer_ = std::make_unique<speculative::NgramProposer>(2, 3);
  }
  return d;
}

SpecDriver::SpecDriver(const SpeculationConfig& config, int32_t n_vocab, SpecHost* host,
                       sched::Scheduler* sched, model::KvCache* cache, EngineMetrics* metrics)
    : config_(config), n_vocab_(n_vocab), host_(host), sched_(sched), cache_(cache), metrics_(metrics),
      policy_(config.policy_config) {}

int32_t SpecDriver::KCap(const EngineKnobs& knobs, metrics::BucketId b) {
  int32_t cap = knobs.spec_max_k;
  if (auto it = knobs.bucket_max_k.find(b); it != knobs.bucket_max_k.end()) cap = std::min(cap, it->second);
  return cap;
}

void SpecDriver::Draft(const EngineKnobs& knobs) {
  drafts_.clear();
  trees_.clear();
  if (!proposer_ || !knobs.speculation) return;
  std::vector<int64_t> ready = sched_->DecodeReady();
  const bool policy = config_.policy;
  std::unordered_map<metrics::BucketId, int32_t> per_bucket;  // decode-ready requests per bucket
  for (int64_t id : ready) ++per_bucket[host_->SpecRequest(id).bucket];
  // Buckets decide one after another, best acceptance first, each seeing the draft tokens
  // the ones before it put into the shared step (its verification is priced on top of them,
  // and their requests are among those it must not slow down too much): deciding each alone
  // on a plain step, two speculating buckets would each price a step the other made larger.
  if (policy) {
    std::unordered_map<metrics::BucketId, double> accept;
    for (const auto& [bucket, n] : per_bucket) accept[bucket] = policy_.AcceptanceEstimate(bucket);
    std::stable_sort(ready.begin(), ready.end(), [&](int64_t x, int64_t y) {
      const metrics::BucketId bx = host_->SpecRequest(x).bucket, by = host_->SpecRequest(y).bucket;
      return bx != by && (accept[bx] != accept[by] ? accept[bx] > accept[by] : bx < by);
    });
  }
  std::unordered_map<metrics::BucketId, int32_t> drafted;  // draft (tree) tokens chosen per bucket
  int32_t drafted_total = 0;
  const speculative::SpecPolicyConfig& pc = config_.policy_config;
  const bool trees = trees_ok_ && pc.max_width > 0 && pc.max_branch > 0;
  std::vector<speculative::ProposeRequest> reqs;
  std::vector<speculative::TreeShape> shapes;
  for (int64_t id : ready) {
    const SpecHost::Request a = host_->SpecRequest(id);
    if (!a.speculative) continue;
    const metrics::BucketId b = a.bucket;
    const int32_t cap = KCap(knobs, b);
    speculative::TreeShape shape{cap, 0, 0};
    if (policy) {
      shape = policy_.ChooseShape(b, static_cast<int32_t>(ready.size()), per_bucket[b], drafted_total - drafted[b],
                                  cap, trees);
      metrics_->SpecDecision(b, shape.depth);
    } else if (trees) {
      shape = {cap, pc.max_width, pc.max_branch};
    }
    shape.depth = std::min(shape.depth, a.tokens_left - 1);  // never past max_tokens
    if (shape.depth <= 0) continue;
    drafted[b] += shape.Nodes();
    drafted_total += shape.Nodes();
    // With trees on, siblings are drawn for every request: the policy measures how often
    // they would have hit, chains included.
    reqs.push_back({id, &sched_->tokens(id), a.sampler, shape.depth, trees ? pc.max_width : 0});
    shapes.push_back(shape);
  }
  if (reqs.empty()) return;
  const double t0 = NowSeconds();
  std::vector<std::vector<sampling::DraftToken>> out;
  proposer_->Propose(reqs, &out);
  CheckDraftsAgainstGrammars(reqs, &out);
  int32_t rounds = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    rounds = std::max(rounds, static_cast<int32_t>(out[i].size()));
    if (out[i].empty()) continue;
    const speculative::TreeShape& shape = shapes[i];
    Planned plan{shape, speculative::TokenTree::Build(out[i], shape, std::max(pc.max_tree_tokens, shape.depth))};
    sched_->SetLookahead(reqs[i].id, plan.tree.size());
    drafts_[reqs[i].id] = std::move(out[i]);
    trees_[reqs[i].id] = std::move(plan);
  }
  const double dt = NowSeconds() - t0;
  metrics_->DraftSeconds(dt);
  // Every proposer's cost is measured (the policy acts only on measured costs). A draft
  // model's prompt catch-ups are left out: one new request's catch-up priced its rounds far
  // above their steady cost and kept a paying bucket off (bench/NOTES.md).
  int32_t steady_rounds = 0;
  double steady_s = 0;
  if (proposer_->SteadyRounds(&steady_rounds, &steady_s)) {
    if (steady_rounds > 0) policy_.ObserveDraft(steady_rounds, steady_s, static_cast<int32_t>(reqs.size()));
  } else {
    policy_.ObserveDraft(rounds, dt, static_cast<int32_t>(reqs.size()));
  }
}

void SpecDriver::CheckDraftsAgainstGrammars(std::span<const speculative::ProposeRequest> reqs,
                                            std::vector<std::vector<sampling::DraftToken>>* drafts) {
  for (size_t i = 0; i < reqs.size(); ++i) {
    GrammarConstraint* grammar = host_->SpecRequest(reqs[i].id).grammar;
    std::vector<sampling::DraftToken>& d = (*drafts)[i];
    if (grammar == nullptr || d.empty()) continue;
    const int32_t allowed = grammar->CheckDraft(d);
    if (allowed == static_cast<int32_t>(d.size())) continue;
    d.resize(static_cast<size_t>(allowed));
    // Without drafts no verification rolls the proposer back: its guesses past the known
    // tokens must not be taken for computed ones next step.
    if (d.empty()) proposer_->Rollback(reqs[i].id, static_cast<int32_t>(reqs[i].tokens->size()));
  }
}

void SpecDriver::FitTrees(std::span<const sched::ScheduledSeq> seqs) {
  for (const sched::ScheduledSeq& s : seqs) {
    if (s.num_draft == 0) continue;
    Planned& p = trees_.at(s.id);
    if (s.num_draft < p.tree.size()) p.tree = speculative::TokenTree::Build(drafts_.at(s.id), p.shape, s.num_draft);
  }
}

void SpecDriver::Verify(int64_t id, float* logits, const std::vector<int32_t>& block_table, double now) {
  const std::vector<sampling::DraftToken>& drafts = drafts_.at(id);
  const speculative::TokenTree& tree = trees_.at(id).tree;
  const int32_t V = n_vocab_;
  const int32_t bs = cache_->shape().block_size;
  const int32_t len_before = static_cast<int32_t>(sched_->tokens(id).size());
  const metrics::BucketId bucket = host_->SpecRequest(id).bucket;
  int32_t accepted = 0;        // tokens accepted from the tree
  int32_t spine_accepted = 0;  // of which on the spine (what the proposer's KV agrees with)
  int32_t row = 0;             // logits row of the node whose children are verified next
  bool finished = false, leaf = false;
  for (int32_t d = 0; !finished; ++d) {
    std::span<float> r(logits + static_cast<int64_t>(row) * V, static_cast<size_t>(V));
    const SpecHost::Request a = host_->SpecRequest(id);  // a finished request is gone: look it up each time
    // The grammar's mask at this position: the tokens accepted so far are this row's prefix.
    const grammar::TokenBitmask* mask = nullptr;
    if (a.grammar) {
      mask = a.grammar->Mask();
      if (mask == nullptr) {
        host_->FinishByGrammar(id);
        finished = true;
        break;
      }
    }
    if (d == tree.spine || leaf) {  // the path passed its last node: the bonus token
      sampling::SampleResult b = a.sampler->Sample(r, mask);
      host_->AcceptToken(id, b.id);
      sched_->AppendToken(id, b.id);
      finished = host_->Emit(id, std::move(b), now);
      break;
    }
    const std::vector<int32_t> cand = tree.Candidates(drafts, d);
    sampling::CandidatesOutcome v = sampling::VerifyCandidates(*a.sampler, r, cand, drafts[d].q, mask);
    host_->AcceptToken(id, v.token.id);
    const int32_t node = v.accepted >= 0 ? tree.Child(d, cand[v.accepted]) : -1;
    if (node != d && !drafts[d].alts.empty()) {
      // The spine was rejected here: where the target's token ranks among the draft's
      // siblings (all drawn, in the tree or not) is what the policy prices trees by.
      const auto& alts = drafts[d].alts;
      const auto it = std::find(alts.begin(), alts.end(), v.token.id);
      policy_.ObserveSibling(bucket, it == alts.end() ? -1 : static_cast<int32_t>(it - alts.begin()),
                             static_cast<int32_t>(alts.size()));
    }
    if (node >= 0) {
      ++accepted;
      if (node == d) {
        ++spine_accepted;
      } else {
        // A sibling: its K/V moves onto position len_before + d, where the path needs it.
        cache_->CopyToken(SlotOf(block_table, len_before + node, bs),
                          SlotOf(block_table, len_before + d, bs));
        leaf = true;
      }
      sched_->AcceptDraftToken(id, v.token.id);
      row = 1 + node;
    } else {
      sched_->AppendToken(id, v.token.id);
    }
    finished = host_->Emit(id, std::move(v.token), now);
    if (node < 0) break;
  }
  policy_.ObserveVerify(bucket, tree.spine, spine_accepted);
  metrics_->SpecVerified(bucket, tree.size(), accepted);
  if (!finished) {
    proposer_->Rollback(id, len_before + spine_accepted);
    sched_->TrimToComputed(id);
  }
}

}  // namespace tarmac::engine
