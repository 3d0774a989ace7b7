#include "engine/engine_core.h"

#include <algorithm>
#include <stdexcept>

#include "base/check.h"
#include "base/clock.h"
#include "kv/kv_budget.h"
#include "speculative/draft_model_proposer.h"
#include "speculative/ngram_proposer.h"

namespace tarmac::engine {
namespace {

// KV blocks from the config: given, from a byte budget, or enough for max_running full
// contexts within half the available memory.
Result<int32_t> KvBlocks(const EngineConfig& c, int64_t bytes_per_block) {
  if (c.kv.blocks > 0) return c.kv.blocks;
  if (c.kv.memory_bytes > 0) return kv::BlocksForBytes(c.kv.memory_bytes, bytes_per_block);
  const int64_t per_seq = (c.sched.max_context + c.sched.block_size - 1) / c.sched.block_size;
  int64_t want = per_seq * c.sched.max_running;
  auto avail = kv::AvailableMemoryBytes();
  if (avail.ok()) want = std::min<int64_t>(want, std::max<int64_t>(per_seq, *avail / 2 / bytes_per_block));
  return static_cast<int32_t>(std::min<int64_t>(want, 1 << 30));
}

}  // namespace

Result<std::unique_ptr<EngineCore>> EngineCore::Create(model::LlamaModel* model,
                                                       const tok::Tokenizer* tokenizer,
                                                       const EngineConfig& config) {
  TARMAC_CHECK(model != nullptr);
  const model::ModelConfig& mc = model->config();
  TARMAC_ASSIGN_OR_RETURN(EngineConfig c, ResolveEngineConfig(mc, config));
  model::KvShape shape{mc.n_layer, mc.n_head_kv, mc.head_dim, c.sched.block_size, 0, c.kv.dtype};
  const int64_t bpb = shape.BytesPerBlock();
  TARMAC_ASSIGN_OR_RETURN(shape.num_blocks, KvBlocks(c, bpb));
  c.kv.blocks = shape.num_blocks;
  c.kv.memory_bytes = bpb * shape.num_blocks;
  auto core = std::unique_ptr<EngineCore>(new EngineCore(model, tokenizer, c, shape));
  if (!c.cpus.empty()) TARMAC_RETURN_IF_ERROR(core->pool_threads_.PinWorkers(c.cpus));
  const SpeculationConfig& sp = c.spec;
  const bool use_draft = sp.mode == SpecMode::kDraft || (sp.mode == SpecMode::kAuto && sp.draft_model);
  if (use_draft) {
    // The draft runs on the engine's own threads (see DraftModelProposer::Create).
    TARMAC_ASSIGN_OR_RETURN(core->proposer_, speculative::DraftModelProposer::Create(
                                                 sp.draft_model, mc.n_vocab, c.sched.max_context,
                                                 c.sched.max_running, &core->pool_threads_));
    // Trees need tree attention, which sliding windows do not have (their masks are ranges).
    core->trees_ok_ = std::all_of(mc.layer_window.begin(), mc.layer_window.end(), [](int32_t w) { return w == 0; });
  } else if (sp.mode == SpecMode::kNgram || sp.mode == SpecMode::kAuto) {
    // Matches of 2+ tokens: a single-token match proposes mostly noise (bench/NOTES.md).
    core->proposer_ = std::make_unique<speculative::NgramProposer>(2, 3);
  }
  return core;
}

EngineCore::EngineCore(model::LlamaModel* model, const tok::Tokenizer* tokenizer,
                       const EngineConfig& config, const model::KvShape& shape)
    : model_(model), tok_(tokenizer), config_(config), pool_threads_(config.threads),
      cache_(shape), policy_(config.spec.policy_config) {
  pool_ = std::make_unique<kv::BlockPool>(shape.num_blocks);
  if (config_.kv.prefix_cache) tree_ = std::make_unique<prefix::RadixTree>(pool_.get(), config_.sched.block_size);
  sched_ = std::make_unique<sched::Scheduler>(config_.sched, pool_.get(), tree_.get());
  knobs_ = DefaultKnobs();
  if (config_.event_capacity > 0 && tree_) {
    events_ = std::make_unique<CacheEventQueue>(static_cast<size_t>(config_.event_capacity));
    tree_->EnableEvents(true);
    PublishEvents();  // the initial "cleared"
  }
  metrics_ = std::make_unique<EngineMetrics>(config_.metrics, config_.model_name);
  metrics_->Watch(sched_.get());
  if (tok_ != nullptr) grammars_ = std::make_unique<GrammarCache>(tok_);
}

EngineCore::~EngineCore() {
  metrics_->Unwatch();  // no reader may reach the scheduler from here on
  sched_.reset();       // releases request blocks before the tree and pool go
  tree_.reset();
}

int64_t EngineCore::kv_bytes() const {
  return cache_.shape().BytesPerBlock() * cache_.shape().num_blocks;
}

Result<ValidRequest> EngineCore::Validate(EngineRequest r) const {
  const int32_t n_vocab = model_->config().n_vocab;
  for (size_t i = 0; i < r.prompt.size(); ++i) {
    if (r.prompt[i] < 0 || r.prompt[i] >= n_vocab)
      return InvalidField("prompt", "prompt token {} at index {} is outside the vocabulary (0..{})", r.prompt[i], i,
                          n_vocab - 1);
  }
  TARMAC_RETURN_IF_ERROR(sched::CheckAdmission(sched_->config(), pool_->num_blocks(),
                                               static_cast<int64_t>(r.prompt.size()), r.max_tokens));
  for (int32_t t : r.stop_token_ids) {
    if (t < 0 || t >= n_vocab)
      return InvalidField("stop_token_ids", "stop token {} is outside the vocabulary (0..{})", t, n_vocab - 1);
  }
  if (!r.stop.empty() && tok_ == nullptr)
    return InvalidField("stop", "stop strings need a tokenizer (this engine has none)");
  TARMAC_RETURN_IF_ERROR(r.sampling.Validate(n_vocab));
  if (r.grammar != nullptr && (grammars_ == nullptr || &r.grammar->tokens() != grammars_->tokens().get()))
    return InvalidField("grammar", "the grammar was not compiled for this engine's vocabulary (GrammarCache)");
  if (r.prompt_logprobs < -1 || r.prompt_logprobs > 20)
    return InvalidField("prompt_logprobs", "prompt_logprobs must be in [-1, 20], got {}", r.prompt_logprobs);
  TARMAC_RETURN_IF_ERROR(prefix::CheckSession(r.session));
  if (r.fault != InjectedFault::kNone && !config_.fault_injection)
    return InvalidField("fault", "fault injection is off in this engine (a test aid: EngineConfig::fault_injection, "
                        "`tarmac serve --debug-fault-injection`)");
  if (r.bucket == metrics::kNoBucket) {
    r.bucket = config_.metrics->buckets().Of(BucketFeatures(r));
  } else if (r.bucket < 0 || r.bucket >= config_.metrics->buckets().size()) {
    return InvalidField("bucket", "request bucket {} is not in this engine's bucket table", r.bucket);
  }
  return ValidRequest(std::move(r), this);
}

void EngineCore::Add(int64_t id, ValidRequest valid, std::shared_ptr<RequestStream> stream, double submitted_s) {
  TARMAC_CHECK(valid.engine_ == this);
  EngineRequest& r = valid.r_;
  ActiveRequest a;
  const double now = NowSeconds();
  TARMAC_CHECK(submitted_s <= now);
  a.submit_s = submitted_s < 0 ? now : submitted_s;
  a.sampler = std::make_unique<sampling::Sampler>(r.sampling, model_->config().n_vocab);
  a.sampler->AddPrompt(r.prompt);
  if (r.grammar) a.grammar = std::make_unique<GrammarConstraint>(r.grammar);
  if (tok_ != nullptr) {
    a.detok = std::make_unique<tok::StreamDetokenizer>(tok_);
    a.stop = std::make_unique<StopMatcher>(r.stop);
  }
  a.metrics.prompt_tokens = static_cast<int32_t>(r.prompt.size());
  a.metrics.bucket = r.bucket;
  a.stream = std::move(stream);
  Status st = sched_->Add({.id = id, .ns = r.ns, .priority = r.priority, .prompt = r.prompt,
                             .max_tokens = r.max_tokens, .session = r.session,
                             .reuse_prefix = r.prompt_logprobs < 0,
                             .fail_kv_alloc_for_testing = r.fault == InjectedFault::kKvAlloc});
  TARMAC_CHECK(st.ok());  // Validate() ran CheckAdmission; ids are unique
  a.req = std::move(r);
  active_.emplace(id, std::move(a));
}

Status EngineCore::Add(int64_t id, EngineRequest r, std::shared_ptr<RequestStream> stream) {
  TARMAC_ASSIGN_OR_RETURN(ValidRequest v, Validate(std::move(r)));
  Add(id, std::move(v), std::move(stream));
  return Status::Ok();
}

void EngineCore::FinishRequest(int64_t id, FinishReason reason, TokenEvent ev, const Status& error) {
  auto it = active_.find(id);
  TARMAC_CHECK(it != active_.end());
  ActiveRequest& a = it->second;
  const double now = NowSeconds();
  if (sched_->Has(id)) a.metrics.cached_prompt_tokens = sched_->prefix_hit_tokens(id);
  sched_->Finish(id);
  if (proposer_) proposer_->Release(id);
  a.metrics.e2e_s = now - a.submit_s;
  a.metrics.queue_s = (a.first_sched_s > 0 ? a.first_sched_s : now) - a.submit_s;
  metrics_->RequestFinished(a.metrics, reason, now);
  if (!a.prompt_lp.empty()) ev.prompt_logprobs = std::move(a.prompt_lp);  // finished before a token
  if (config_.on_request_finished) config_.on_request_finished(a.metrics, reason, now);
  ev.finish = reason;
  ev.error = error;
  ev.metrics = std::move(a.metrics);
  std::shared_ptr<RequestStream> stream = std::move(a.stream);
  active_.erase(it);
  stream->Push(std::move(ev));
}

void EngineCore::Cancel(int64_t id) {
  if (active_.count(id) == 0) return;
  FinishRequest(id, FinishReason::kCancelled, TokenEvent{}, Status::Ok());
}

void EngineCore::AbortAll(const Status& error) {
  std::vector<int64_t> ids;
  for (const auto& [id, a] : active_) ids.push_back(id);
  for (int64_t id : ids) FinishRequest(id, FinishReason::kError, TokenEvent{}, error);
}

EngineKnobs EngineCore::DefaultKnobs() const {
  EngineKnobs k;
  k.max_batched_tokens = config_.sched.max_batched_tokens;
  k.max_running = config_.sched.max_running;
  k.speculation = true;
  k.spec_max_k = config_.spec.policy_config.max_k;
  return k;
}

Status EngineCore::CheckKnobs(const EngineKnobs& k) const {
  if (k.max_batched_tokens < 1)
    return InvalidField("max_batched_tokens", "max_batched_tokens must be >= 1, got {}", k.max_batched_tokens);
  if (k.max_running < 1) return InvalidField("max_running", "max_running must be >= 1, got {}", k.max_running);
  const int32_t max_k = config_.spec.policy_config.max_k;
  if (k.spec_max_k < 0 || k.spec_max_k > max_k)
    return InvalidField("spec_max_k", "spec_max_k must be in [0, {}] (the configured draft length), got {}", max_k,
                        k.spec_max_k);
  for (const auto& [b, cap] : k.bucket_max_k) {
    if (b < 0 || b >= config_.metrics->buckets().size())
      return InvalidField("bucket_max_k", "bucket {} is not in this engine's bucket table", b);
    if (cap < 0 || cap > max_k)
      return InvalidField("bucket_max_k", "bucket {}'s k cap must be in [0, {}], got {}", b, max_k, cap);
  }
  if (k.max_waiting < 0) return InvalidField("max_waiting", "max_waiting must be >= 0, got {}", k.max_waiting);
  if (k.max_cached_blocks < 0)
    return InvalidField("max_cached_blocks", "max_cached_blocks must be >= 0, got {}", k.max_cached_blocks);
  if (k.preempt_above_priority < k.admit_max_priority)
    return InvalidField("preempt_above_priority",
                        "preempt_above_priority ({}) must be >= admit_max_priority ({}): requests preempted "
                        "above it would be admitted again at once", k.preempt_above_priority, k.admit_max_priority);
  return Status::Ok();
}

void EngineCore::SetKnobs(const EngineKnobs& k) {
  TARMAC_CHECK(CheckKnobs(k).ok());
  knobs_ = k;
  sched_->SetLimits(k.max_batched_tokens, k.max_running);
  sched_->SetAdmitPriorityLimit(k.admit_max_priority);
}

int32_t EngineCore::KCap(metrics::BucketId b) const {
  int32_t cap = knobs_.spec_max_k;
  if (auto it = knobs_.bucket_max_k.find(b); it != knobs_.bucket_max_k.end()) cap = std::min(cap, it->second);
  return cap;
}

void EngineCore::Accept(ActiveRequest& a, int32_t token) {
  a.sampler->Accept(token);
  if (a.grammar) {
    const bool ok = a.grammar->Accept(token);
    TARMAC_CHECK(ok);  // sampled under the grammar's mask
  }
}

void EngineCore::Sample(int64_t id, std::span<float> logits, double now) {
  ActiveRequest& a = active_.at(id);
  InjectFault(a, InjectedFault::kCheck);
  const grammar::TokenBitmask* mask = nullptr;
  if (a.grammar) {
    mask = a.grammar->Mask();
    if (mask == nullptr) return FinishRequest(id, FinishReason::kStop, TokenEvent{}, Status::Ok());
  }
  sampling::SampleResult r = a.sampler->Sample(logits, mask);
  Accept(a, r.id);
  sched_->AppendToken(id, r.id);
  Emit(id, std::move(r), now);
}

void EngineCore::CapturePromptLogprobs(int64_t id, int32_t first, int32_t n, const float* rows) {
  ActiveRequest& a = active_.at(id);
  const int32_t V = model_->config().n_vocab;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t next = first + i + 1;  // the prompt token these logits predict
    sampling::SampleResult r;
    r.id = a.req.prompt[next];
    sampling::TopLogprobs(std::span<const float>(rows + static_cast<int64_t>(i) * V, static_cast<size_t>(V)),
                          a.req.prompt_logprobs, r.id, &r);
    a.prompt_lp.push_back(std::move(r));
    a.prompt_lp_next = next + 1;
  }
}

bool EngineCore::Emit(int64_t id, sampling::SampleResult r, double now) {
  ActiveRequest& a = active_.at(id);
  metrics_->TokenSampled();
  RequestMetrics& m = a.metrics;
  if (m.output_tokens == 0) {
    a.first_token_s = now;
    m.ttft_s = now - a.submit_s;
  } else {
    m.itl_s.push_back(now - a.last_token_s);
  }
  a.last_token_s = now;
  ++m.output_tokens;

  TokenEvent ev;
  ev.token = r.id;
  ev.logprob = r.logprob;
  ev.top = std::move(r.top);
  ev.prompt_logprobs = std::move(a.prompt_lp);
  a.prompt_lp.clear();
  FinishReason fin = FinishReason::kNone;
  // A complete grammar ends the request; so does an end-of-generation token it accepted,
  // whatever ignore_eos says (the constrained output is over).
  const bool grammar_done = a.grammar && a.grammar->Complete();
  const bool eog = tok_ != nullptr && tok_->IsEndOfGeneration(r.id);
  const bool stop_token =
      std::find(a.req.stop_token_ids.begin(), a.req.stop_token_ids.end(), r.id) != a.req.stop_token_ids.end() ||
      (eog && (!a.req.ignore_eos || grammar_done));
  bool stopped_by_string = false;
  if (stop_token) {
    fin = FinishReason::kStop;  // the stop token's own text is not part of the output
  } else if (tok_ != nullptr) {
    InjectFault(a, InjectedFault::kDetokenize);
    ev.text = a.stop->Push(a.detok->Push(r.id), &stopped_by_string);
    if (stopped_by_string || grammar_done) fin = FinishReason::kStop;
  } else if (grammar_done) {
    fin = FinishReason::kStop;
  }
  if (fin == FinishReason::kNone && m.output_tokens >= a.req.max_tokens) fin = FinishReason::kLength;
  if (fin == FinishReason::kNone) {
    a.stream->Push(std::move(ev));
    return false;
  }
  if (tok_ != nullptr && !stopped_by_string) {
    bool stopped = false;
    ev.text += a.stop->Push(a.detok->Finish(), &stopped);
    if (!stopped) ev.text += a.stop->Flush();
  }
  FinishRequest(id, fin, std::move(ev), Status::Ok());
  return true;
}

void EngineCore::Draft() {
  drafts_.clear();
  trees_.clear();
  if (!proposer_ || !knobs_.speculation) return;
  std::vector<int64_t> ready = sched_->DecodeReady();
  const bool policy = config_.spec.policy;
  std::unordered_map<metrics::BucketId, int32_t> per_bucket;  // decode-ready requests per bucket
  for (int64_t id : ready) ++per_bucket[active_.at(id).req.bucket];
  // Buckets decide one after another, best acceptance first, each seeing the draft tokens
  // the ones before it put into the shared step (its verification is priced on top of them,
  // and their requests are among those it must not slow down too much): deciding each alone
  // on a plain step, two speculating buckets would each price a step the other made larger.
  if (policy) {
    std::unordered_map<metrics::BucketId, double> accept;
    for (const auto& [bucket, n] : per_bucket) accept[bucket] = policy_.AcceptanceEstimate(bucket);
    std::stable_sort(ready.begin(), ready.end(), [&](int64_t x, int64_t y) {
      const metrics::BucketId bx = active_.at(x).req.bucket, by = active_.at(y).req.bucket;
      return bx != by && (accept[bx] != accept[by] ? accept[bx] > accept[by] : bx < by);
    });
  }
  std::unordered_map<metrics::BucketId, int32_t> drafted;  // draft (tree) tokens chosen per bucket
  int32_t drafted_total = 0;
  const speculative::SpecPolicyConfig& pc = config_.spec.policy_config;
  const bool trees = trees_ok_ && pc.max_width > 0 && pc.max_branch > 0;
  std::vector<speculative::ProposeRequest> reqs;
  std::vector<speculative::TreeShape> shapes;
  for (int64_t id : ready) {
    ActiveRequest& a = active_.at(id);
    if (!a.req.speculative) continue;
    const metrics::BucketId b = a.req.bucket;
    const int32_t cap = KCap(b);
    speculative::TreeShape shape{cap, 0, 0};
    if (policy) {
      shape = policy_.ChooseShape(b, static_cast<int32_t>(ready.size()), per_bucket[b], drafted_total - drafted[b],
                                  cap, trees);
      metrics_->SpecDecision(b, shape.depth);
    } else if (trees) {
      shape = {cap, pc.max_width, pc.max_branch};
    }
    shape.depth = std::min(shape.depth, a.req.max_tokens - a.metrics.output_tokens - 1);  // never past max_tokens
    if (shape.depth <= 0) continue;
    drafted[b] += shape.Nodes();
    drafted_total += shape.Nodes();
    // With trees on, siblings are drawn for every request: the policy measures how often
    // they would have hit, chains included.
    reqs.push_back({id, &sched_->tokens(id), a.sampler.get(), shape.depth, trees ? pc.max_width : 0});
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

void EngineCore::CheckDraftsAgainstGrammars(std::span<const speculative::ProposeRequest> reqs,
                                            std::vector<std::vector<sampling::DraftToken>>* drafts) {
  for (size_t i = 0; i < reqs.size(); ++i) {
    ActiveRequest& a = active_.at(reqs[i].id);
    std::vector<sampling::DraftToken>& d = (*drafts)[i];
    if (!a.grammar || d.empty()) continue;
    const int32_t allowed = a.grammar->CheckDraft(d);
    if (allowed == static_cast<int32_t>(d.size())) continue;
    d.resize(static_cast<size_t>(allowed));
    // Without drafts no verification rolls the proposer back: its guesses past the known
    // tokens must not be taken for computed ones next step.
    if (d.empty()) proposer_->Rollback(reqs[i].id, static_cast<int32_t>(reqs[i].tokens->size()));
  }
}

void EngineCore::Verify(int64_t id, float* logits, const std::vector<int32_t>& block_table, double now) {
  const std::vector<sampling::DraftToken>& drafts = drafts_.at(id);
  const speculative::TokenTree& tree = trees_.at(id).tree;
  const int32_t V = model_->config().n_vocab;
  const int32_t bs = config_.sched.block_size;
  const int32_t len_before = static_cast<int32_t>(sched_->tokens(id).size());
  const metrics::BucketId bucket = active_.at(id).req.bucket;
  auto slot = [&](int32_t pos) { return static_cast<int64_t>(block_table[pos / bs]) * bs + pos % bs; };
  int32_t accepted = 0;        // tokens accepted from the tree
  int32_t spine_accepted = 0;  // of which on the spine (what the proposer's KV agrees with)
  int32_t row = 0;             // logits row of the node whose children are verified next
  bool finished = false, leaf = false;
  for (int32_t d = 0; !finished; ++d) {
    std::span<float> r(logits + static_cast<int64_t>(row) * V, static_cast<size_t>(V));
    ActiveRequest& a = active_.at(id);  // a finished request is gone: look it up each time
    // The grammar's mask at this position: the tokens accepted so far are this row's prefix.
    const grammar::TokenBitmask* mask = nullptr;
    if (a.grammar) {
      mask = a.grammar->Mask();
      if (mask == nullptr) {
        FinishRequest(id, FinishReason::kStop, TokenEvent{}, Status::Ok());
        finished = true;
        break;
      }
    }
    if (d == tree.spine || leaf) {  // the path passed its last node: the bonus token
      sampling::SampleResult b = a.sampler->Sample(r, mask);
      Accept(a, b.id);
      sched_->AppendToken(id, b.id);
      finished = Emit(id, std::move(b), now);
      break;
    }
    const std::vector<int32_t> cand = tree.Candidates(drafts, d);
    sampling::CandidatesOutcome v = sampling::VerifyCandidates(*a.sampler, r, cand, drafts[d].q, mask);
    Accept(a, v.token.id);
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
        cache_.CopyToken(slot(len_before + node), slot(len_before + d));
        leaf = true;
      }
      sched_->AcceptDraftToken(id, v.token.id);
      row = 1 + node;
    } else {
      sched_->AppendToken(id, v.token.id);
    }
    finished = Emit(id, std::move(v.token), now);
    if (node < 0) break;
  }
  policy_.ObserveVerify(bucket, tree.spine, spine_accepted);
  metrics_->SpecVerified(bucket, tree.size(), accepted);
  if (!finished) {
    proposer_->Rollback(id, len_before + spine_accepted);
    sched_->TrimToComputed(id);
  }
}

void EngineCore::Warmup() { model_->Warmup(&pool_threads_, cache_.shape().dtype); }

void EngineCore::PublishEvents() {
  if (!events_) return;
  tree_->TakeEvents(&step_events_);
  if (resync_) {
    // A follower missed events: what was recorded since is superseded by a fresh snapshot, sent
    // whole or not at all (a partial one would leave the follower wrong again).
    step_events_.clear();
    if (events_->room() < static_cast<size_t>(tree_->num_nodes()) + 1) return;
    tree_->EnableEvents(false);
    tree_->EnableEvents(true);
    tree_->TakeEvents(&step_events_);
    resync_ = false;
  }
  if (step_events_.empty()) return;
  if (const int64_t dropped = events_->Push(&step_events_); dropped > 0) {
    metrics_->EventsDropped(dropped);
    resync_ = true;
  }
  if (config_.on_events) config_.on_events();
}

void EngineCore::ApplyKvRelief() {
  if (knobs_.max_cached_blocks != INT32_MAX) sched_->EvictCachedBeyond(knobs_.max_cached_blocks);
  if (knobs_.preempt_above_priority == INT32_MAX) return;
  for (int64_t id : sched_->PreemptAbove(knobs_.preempt_above_priority)) {
    ++active_.at(id).metrics.preemptions;
    if (proposer_) proposer_->Release(id);
  }
}

bool EngineCore::Step() {
  // A failed check while processing one request throws (CheckFailure) instead of aborting:
  // that request fails and the step goes on with the others. Anything thrown outside one
  // request's processing leaves Step (EngineClient marks the engine unhealthy).
  CheckFailuresThrow checks_throw;
  step_faults_ = 0;
  const double t0 = NowSeconds();
  ApplyKvRelief();
  Draft();
  sched::SchedulerOutput out = sched_->Schedule();
  for (int64_t id : out.preempted) {
    ++active_.at(id).metrics.preemptions;
    if (proposer_) proposer_->Release(id);
  }
  for (int64_t id : out.failed) FailRequest(id, "out of memory allocating its KV blocks (std::bad_alloc)");
  max_concurrent_.store(std::max(max_concurrent_.load(std::memory_order_relaxed), sched_->num_running()),
                        std::memory_order_relaxed);
  if (out.empty()) {
    PublishEvents();  // evictions while trying to schedule
    CheckAfterFaults();
    return !out.failed.empty();
  }
  for (const sched::ScheduledSeq& s : out.seqs)
    if (active_.at(s.id).req.fault == InjectedFault::kEngine)
      throw std::runtime_error("injected fault 'engine': the step failed outside any request's processing");
  const int32_t bs = config_.sched.block_size;
  batch_.Clear();
  batch_.block_tables.resize(out.seqs.size());
  rows_.assign(out.seqs.size(), SeqRows{});
  // Trees within the slots each request got (the budget may have cut its lookahead), and
  // whether the batch has any (then tree positions and masks go with it).
  bool any_tree = false;
  for (const sched::ScheduledSeq& s : out.seqs) {
    if (s.num_draft == 0) continue;
    Planned& p = trees_.at(s.id);
    if (s.num_draft < p.tree.size()) {
      p.tree = speculative::TokenTree::Build(drafts_.at(s.id), p.shape, s.num_draft);
    }
    any_tree = any_tree || p.tree.size() > p.tree.spine;
  }
  if (any_tree) batch_.tree_begin.assign(out.seqs.size(), -1);
  int32_t prefill_tokens = 0;
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const sched::ScheduledSeq& s = out.seqs[i];
    ActiveRequest& a = active_.at(s.id);
    if (a.first_sched_s == 0) a.first_sched_s = t0;
    batch_.block_tables[i] = *s.block_table;
    const std::vector<int32_t>& table = batch_.block_tables[i];
    const int32_t known = s.num_tokens - s.num_draft;
    const int32_t prompt_len = a.metrics.prompt_tokens;
    const speculative::TokenTree* tree = s.num_draft > 0 ? &trees_.at(s.id).tree : nullptr;
    const bool is_tree = tree != nullptr && tree->size() > tree->spine;
    if (is_tree) batch_.tree_begin[i] = s.start + known;
    const int32_t feed = known + (tree != nullptr ? tree->size() : 0);
    rows_[i].begin = static_cast<int32_t>(batch_.logits_for.size());
    rows_[i].first_token = batch_.n_tokens();
    for (int32_t t = 0; t < feed; ++t) {
      const int32_t pos = s.start + t;
      batch_.tokens.push_back(t < known ? (*s.tokens)[pos] : tree->token[t - known]);
      batch_.positions.push_back(pos);
      batch_.seq.push_back(static_cast<int32_t>(i));
      batch_.slots.push_back(static_cast<int64_t>(table[pos / bs]) * bs + pos % bs);
      if (any_tree) {
        // A node's RoPE position is the root's plus its depth; its mask, its ancestors.
        const bool node = is_tree && t >= known;
        batch_.rope_positions.push_back(node ? s.start + known - 1 + tree->depth[t - known] : pos);
        batch_.tree_mask.push_back(node ? tree->mask[t - known] : 0);
      }
      // Logits of prompt positions whose logprobs are wanted and not captured yet (a request
      // back from preemption recomputes them, but has them), of the last known token, and of
      // every draft when verifying.
      if (a.req.prompt_logprobs >= 0 && pos + 1 < prompt_len && pos + 1 >= a.prompt_lp_next) {
        batch_.logits_for.push_back(batch_.n_tokens() - 1);
        ++rows_[i].prompt;
      } else if (s.sample && t >= known - 1) {
        batch_.logits_for.push_back(batch_.n_tokens() - 1);
      }
    }
    rows_[i].count = static_cast<int32_t>(batch_.logits_for.size()) - rows_[i].begin;
    const bool decode = s.num_draft > 0 || (s.num_tokens == 1 && s.sample && s.start >= a.metrics.prompt_tokens);
    if (!decode) prefill_tokens += s.num_tokens;
  }
  const double tf = NowSeconds();
  std::vector<std::string> failed = Forward(out);  // per sequence: "" or why its forward failed
  const double forward_s = NowSeconds() - tf;
  // The policy's step costs are those of decode steps (plain decodes and verifications): a
  // step that also carries a prefill chunk costs what its prompt tokens cost.
  if (prefill_tokens == 0) {
    policy_.ObserveStep(batch_.n_tokens(), forward_s);
  } else {
    prefill_costs_.Observe(batch_.n_tokens(), forward_s);
  }
  CommitAndFail(out, failed);
  // Sliding-window models: KV blocks that no layer reads again go back to the pool.
  if (const int32_t window = model_->config().KvRetentionWindow(); window > 0) {
    for (size_t i = 0; i < out.seqs.size(); ++i)
      if (failed[i].empty()) sched_->ReleaseOutsideWindow(out.seqs[i].id, window);
  }
  const int32_t V = model_->config().n_vocab;
  const double now = NowSeconds();
  bool verified = false;
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const sched::ScheduledSeq& s = out.seqs[i];
    if (!failed[i].empty()) continue;
    // One request's processing: whatever it throws fails that request only.
    try {
      float* rows = logits_.data() + static_cast<int64_t>(rows_[i].begin) * V;
      if (rows_[i].prompt > 0) {
        const int32_t first = std::max(s.start, active_.at(s.id).prompt_lp_next - 1);
        CapturePromptLogprobs(s.id, first, rows_[i].prompt, rows);
        rows += static_cast<int64_t>(rows_[i].prompt) * V;
      }
      if (!s.sample) continue;
      if (s.num_draft > 0) {
        Verify(s.id, rows, *s.block_table, now);
        verified = true;
      } else {
        Sample(s.id, std::span<float>(rows, static_cast<size_t>(V)), now);
      }
    } catch (const std::exception& e) {
      FailRequest(s.id, e.what());
    }
  }
  if (verified) metrics_->VerifySeconds(forward_s);
  metrics_->StepDone();
  PublishEvents();
  CheckAfterFaults();
  return true;
}

Status EngineCore::CheckIntegrity() const {
  TARMAC_RETURN_IF_ERROR(sched_->CheckIntegrity());
  if (proposer_) TARMAC_RETURN_IF_ERROR(proposer_->CheckIntegrity());
  return Status::Ok();
}

std::vector<uint64_t> EngineCore::CachedBlockHashes() const {
  return tree_ ? tree_->CachedBlockHashes() : std::vector<uint64_t>{};
}

std::vector<prefix::BlockEvent> EngineCore::DrainEvents(size_t max) {
  return events_ ? events_->Drain(max) : std::vector<prefix::BlockEvent>{};
}

EngineStats EngineCore::Stats() const {
  EngineStats s;
  s.steps = static_cast<int64_t>(metrics_->steps());
  s.requests_finished = metrics_->requests_finished();
  s.requests_cancelled = metrics_->requests_cancelled();
  s.prompt_tokens = static_cast<int64_t>(metrics_->prompt_tokens());
  s.generation_tokens = static_cast<int64_t>(metrics_->generation_tokens());
  s.num_running = sched_->num_running();
  s.num_waiting = sched_->num_waiting();
  s.max_concurrent_running = max_concurrent_.load(std::memory_order_relaxed);
  s.kv = sched_->Usage();
  s.sched = sched_->counters();
  s.draft_seconds = metrics_->draft_seconds();
  s.verify_seconds = metrics_->verify_seconds();
  s.events_dropped = static_cast<int64_t>(metrics_->events_dropped());
  return s;
}

}  // namespace tarmac::engine
