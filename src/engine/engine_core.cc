#include "engine/engine_core.h"

#include <algorithm>
#include <stdexcept>

#include "base/check.h"
#include "base/clock.h"
#include "kv/kv_budget.h"
#include "tensor/kv_layout.h"

namespace tarmac::engine {
namespace {

// KV blocks from the config: given, from a byte budget, or enough for max_running full
// contexts within half the available memory.
Result<int32_t> KvBlocks(const EngineConfig& c, int64_t bytes_per_block) {
  if (c.kv.blocks > 0) return c.kv.blocks;
  if (c.kv.memory_bytes > 0) return kv::BlocksForBytes(c.kv.memory_bytes, bytes_per_block);
  const int64_t per_seq = BlocksFor(c.sched.max_context, c.sched.block_size);
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
  TARMAC_ASSIGN_OR_RETURN(core->spec_, SpecDriver::Create(c.spec, mc, c.sched, &core->pool_threads_, core.get(),
                                                          core->sched_.get(), &core->cache_, core->metrics_.get()));
  return core;
}

EngineCore::EngineCore(model::LlamaModel* model, const tok::Tokenizer* tokenizer,
                       const EngineConfig& config, const model::KvShape& shape)
    : model_(model), tok_(tokenizer), config_(config), pool_threads_(config.threads),
      cache_(shape) {
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
  if (model_->config().is_moe()) {
    const model::LlamaModel* m = model_;
    metrics_->WatchExperts(m->config().n_layer, m->config().router.n_expert,
                           [m] { return m->ExpertTokenCounts(); });
  }
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
  spec_->Release(id);
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

void EngineCore::Accept(ActiveRequest& a, int32_t token) {
  a.sampler->Accept(token);
  if (a.grammar) {
    const bool ok = a.grammar->Accept(token);
    TARMAC_CHECK(ok);  // sampled under the grammar's mask
  }
}

SpecHost::Request EngineCore::SpecRequest(int64_t id) {
  ActiveRequest& a = active_.at(id);
  return {.bucket = a.req.bucket,
          .speculative = a.req.speculative,
          .tokens_left = a.req.max_tokens - a.metrics.output_tokens,
          .sampler = a.sampler.get(),
          .grammar = a.grammar.get()};
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
    spec_->Release(id);
  }
}

bool EngineCore::Step() {
  // A failed check while processing one request throws (CheckFailure) instead of aborting:
  // that request fails and the step goes on with the others. Anything thrown outside one
  // request's processing leaves Step (EngineClient marks the engine unhealthy).
  CheckFailuresThrow checks_throw;
  step_faults_ = 0;
  const double t0 = NowSeconds();
  // Schedule: KV relief first, then drafts (the scheduler reserves their lookahead).
  ApplyKvRelief();
  spec_->Draft(knobs_);
  const sched::SchedulerOutput out = ScheduleStep();
  if (out.empty()) {
    PublishEvents();  // evictions while trying to schedule
    CheckAfterFaults();
    return !out.failed.empty();
  }
  InjectStepFault(out);
  // Build the batch and run it; the sequences whose pass worked are committed.
  const int32_t prefill_tokens = BuildBatch(out, t0);
  double forward_s = 0;
  const std::vector<std::string> failed = RunForward(out, prefill_tokens, &forward_s);
  CommitAndFail(out, failed);
  ReleaseOutsideWindow(out, failed);
  // Sample or verify, then postprocess: metrics, prefix-cache events, the integrity check.
  if (SampleAndVerify(out, failed)) metrics_->VerifySeconds(forward_s);
  metrics_->StepDone();
  PublishEvents();
  CheckAfterFaults();
  return true;
}

sched::SchedulerOutput EngineCore::ScheduleStep() {
  sched::SchedulerOutput out = sched_->Schedule();
  for (int64_t id : out.preempted) {
    ++active_.at(id).metrics.preemptions;
    spec_->Release(id);
  }
  for (int64_t id : out.failed) FailRequest(id, "out of memory allocating its KV blocks (std::bad_alloc)");
  max_concurrent_.store(std::max(max_concurrent_.load(std::memory_order_relaxed), sched_->num_running()),
                        std::memory_order_relaxed);
  return out;
}

int32_t EngineCore::BuildBatch(const sched::SchedulerOutput& out, double t0) {
  spec_->FitTrees(out.seqs);
  batch_seqs_.resize(out.seqs.size());
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const sched::ScheduledSeq& s = out.seqs[i];
    ActiveRequest& a = active_.at(s.id);
    if (a.first_sched_s == 0) a.first_sched_s = t0;
    batch_seqs_[i] = {.tree = s.num_draft > 0 ? spec_->Tree(s.id) : nullptr,
                      .prompt_len = a.metrics.prompt_tokens,
                      .prompt_logprobs = a.req.prompt_logprobs,
                      .prompt_lp_next = a.prompt_lp_next};
  }
  return BuildForwardBatch(out.seqs, batch_seqs_, config_.sched.block_size, &batch_, &rows_);
}

std::vector<std::string> EngineCore::RunForward(const sched::SchedulerOutput& out, int32_t prefill_tokens,
                                                double* forward_s) {
  const double tf = NowSeconds();
  std::vector<std::string> failed = Forward(out);
  *forward_s = NowSeconds() - tf;
  // The policy's step costs are those of decode steps (plain decodes and verifications): a
  // step that also carries a prefill chunk costs what its prompt tokens cost.
  if (prefill_tokens == 0) {
    spec_->policy().ObserveStep(batch_.n_tokens(), *forward_s);
  } else {
    prefill_costs_.Observe(batch_.n_tokens(), *forward_s);
  }
  return failed;
}

void EngineCore::ReleaseOutsideWindow(const sched::SchedulerOutput& out, const std::vector<std::string>& failed) {
  const int32_t window = model_->config().KvRetentionWindow();
  if (window <= 0) return;
  for (size_t i = 0; i < out.seqs.size(); ++i)
    if (failed[i].empty()) sched_->ReleaseOutsideWindow(out.seqs[i].id, window);
}

bool EngineCore::SampleAndVerify(const sched::SchedulerOutput& out, const std::vector<std::string>& failed) {
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
        spec_->Verify(s.id, rows, *s.block_table, now);
        verified = true;
      } else {
        Sample(s.id, std::span<float>(rows, static_cast<size_t>(V)), now);
      }
    } catch (const std::exception& e) {
      FailRequest(s.id, e.what());
    }
  }
  return verified;
}

Status EngineCore::CheckIntegrity() const {
  TARMAC_RETURN_IF_ERROR(sched_->CheckIntegrity());
  TARMAC_RETURN_IF_ERROR(spec_->CheckIntegrity());
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
