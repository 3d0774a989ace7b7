#include "engine/engine_core.h"

#include <algorithm>

#include "base/check.h"
#include "base/clock.h"
#include <fmt/format.h>
#include "kv/kv_budget.h"
#include "spec/draft_model_proposer.h"
#include "spec/ngram_proposer.h"

namespace tarmac::engine {
namespace {
spec::SpecPolicyConfig PolicyConfig(const EngineConfig& c) {
  spec::SpecPolicyConfig p;
  p.max_k = c.spec_k;
  p.max_other_slowdown = c.spec_max_slowdown;
  return p;
}

Result<EngineConfig> Resolve(const model::ModelConfig& mc, EngineConfig c) {
  if (c.block_size < 1 || c.block_size > 1024)
    return InvalidArgument("block size must be in [1, 1024], got {}", c.block_size);
  if (c.max_batched_tokens < 1)
    return InvalidArgument("max batched tokens must be >= 1, got {}", c.max_batched_tokens);
  if (c.max_running < 1) return InvalidArgument("max running requests must be >= 1, got {}", c.max_running);
  if (c.threads < 1) return InvalidArgument("threads must be >= 1, got {}", c.threads);
  if (c.kv_blocks < 0 || c.kv_memory_bytes < 0) return InvalidArgument("KV memory must be >= 0");
  if (c.spec_k < 0 || c.spec_k > spec::kMaxDraft)
    return InvalidArgument("draft length must be in [0, {}], got {}", spec::kMaxDraft, c.spec_k);
  if (!(c.spec_max_slowdown <= 100))  // also NaN
    return InvalidArgument("speculation slowdown limit must be <= 100, got {}", c.spec_max_slowdown);
  if (c.spec == SpecMode::kDraft && c.draft_model == nullptr)
    return InvalidArgument("speculation mode 'draft' needs a draft model");
  if (c.spec == SpecMode::kAuto) c.spec_policy = true;
  if (c.max_context == 0) c.max_context = mc.n_ctx_train;
  if (c.max_context < 1 || c.max_context > mc.n_ctx_train) {
    return InvalidArgument("context {} is outside [1, {}] (the model's training context)",
                           c.max_context, mc.n_ctx_train);
  }
  return c;
}

}  // namespace

Result<std::unique_ptr<EngineCore>> EngineCore::Create(model::LlamaModel* model,
                                                       const tok::Tokenizer* tokenizer,
                                                       const EngineConfig& config) {
  TARMAC_CHECK(model != nullptr);
  const model::ModelConfig& mc = model->config();
  TARMAC_ASSIGN_OR_RETURN(EngineConfig c, Resolve(mc, config));
  model::KvShape shape{mc.n_layer, mc.n_head_kv, mc.head_dim, c.block_size, 0, c.kv_dtype};
  const int64_t bpb = shape.BytesPerBlock();
  if (c.kv_blocks > 0) {
    shape.num_blocks = c.kv_blocks;
  } else if (c.kv_memory_bytes > 0) {
    TARMAC_ASSIGN_OR_RETURN(shape.num_blocks, kv::BlocksForBytes(c.kv_memory_bytes, bpb));
  } else {
    const int64_t per_seq = (c.max_context + c.block_size - 1) / c.block_size;
    int64_t want = per_seq * c.max_running;
    auto avail = kv::AvailableMemoryBytes();
    if (avail.ok()) want = std::min<int64_t>(want, std::max<int64_t>(per_seq, *avail / 2 / bpb));
    shape.num_blocks = static_cast<int32_t>(std::min<int64_t>(want, 1 << 30));
  }
  c.kv_blocks = shape.num_blocks;
  c.kv_memory_bytes = bpb * shape.num_blocks;
  auto core = std::unique_ptr<EngineCore>(new EngineCore(model, tokenizer, c, shape));
  const bool use_draft = c.spec == SpecMode::kDraft || (c.spec == SpecMode::kAuto && c.draft_model);
  if (use_draft) {
    // The draft runs on the engine's own threads (see DraftModelProposer::Create).
    TARMAC_ASSIGN_OR_RETURN(core->proposer_, spec::DraftModelProposer::Create(
                                                 c.draft_model, mc.n_vocab, c.max_context,
                                                 c.max_running, &core->pool_threads_));
  } else if (c.spec == SpecMode::kNgram || c.spec == SpecMode::kAuto) {
    // Matches of 2+ tokens: a single-token match proposes mostly noise (quote workload on
    // the padded target: acceptance 43% -> 61% at k = 4, same or better tokens/s).
    core->proposer_ = std::make_unique<spec::NgramProposer>(2, 3);
  }
  return core;
}

EngineCore::EngineCore(model::LlamaModel* model, const tok::Tokenizer* tokenizer,
                       const EngineConfig& config, const model::KvShape& shape)
    : model_(model), tok_(tokenizer), config_(config), pool_threads_(config.threads),
      cache_(shape), policy_(PolicyConfig(config)) {
  pool_ = std::make_unique<kv::BlockPool>(shape.num_blocks);
  if (config_.prefix_cache) tree_ = std::make_unique<prefix::RadixTree>(pool_.get(), config_.block_size);
  sched::SchedulerConfig sc;
  sc.block_size = config_.block_size;
  sc.max_batched_tokens = config_.max_batched_tokens;
  sc.max_running = config_.max_running;
  sc.max_context = config_.max_context;
  sched_ = std::make_unique<sched::Scheduler>(sc, pool_.get(), tree_.get());
}

EngineCore::~EngineCore() {
  sched_.reset();  // releases request blocks before the tree and pool go
  tree_.reset();
}

int64_t EngineCore::kv_bytes() const {
  return cache_.shape().BytesPerBlock() * cache_.shape().num_blocks;
}

Status EngineCore::Validate(const EngineRequest& r) const {
  const int32_t n_vocab = model_->config().n_vocab;
  if (r.max_tokens < 1) return InvalidArgument("max_tokens must be >= 1, got {}", r.max_tokens);
  for (size_t i = 0; i < r.prompt.size(); ++i) {
    if (r.prompt[i] < 0 || r.prompt[i] >= n_vocab)
      return InvalidArgument("prompt token {} at index {} is outside the vocabulary of {}",
                             r.prompt[i], i, n_vocab);
  }
  for (int32_t t : r.stop_token_ids) {
    if (t < 0 || t >= n_vocab)
      return InvalidArgument("stop token {} is outside the vocabulary of {}", t, n_vocab);
  }
  if (!r.stop.empty() && tok_ == nullptr)
    return InvalidArgument("stop strings need a tokenizer (this engine has none)");
  TARMAC_RETURN_IF_ERROR(r.sampling.Validate(n_vocab));
  return sched::CheckAdmission(sched_->config(), pool_->num_blocks(),
                               static_cast<int64_t>(r.prompt.size()), r.max_tokens);
}

void EngineCore::Add(int64_t id, EngineRequest r, std::shared_ptr<RequestStream> stream) {
  Live live;
  live.submit_s = NowSeconds();
  live.sampler = std::make_unique<sampling::Sampler>(r.sampling, model_->config().n_vocab);
  live.sampler->AddPrompt(r.prompt);
  if (tok_ != nullptr) {
    live.detok = std::make_unique<tok::StreamDetokenizer>(tok_);
    live.stop = std::make_unique<StopMatcher>(r.stop);
  }
  live.metrics.prompt_tokens = static_cast<int32_t>(r.prompt.size());
  live.bucket = BucketOf(r);
  live.stream = std::move(stream);
  Status st = sched_->Add({id, r.ns, r.priority, r.prompt, r.max_tokens});
  TARMAC_CHECK(st.ok());  // Validate() ran first
  live.req = std::move(r);
  reqs_.emplace(id, std::move(live));
}

void EngineCore::FinishRequest(int64_t id, FinishReason reason, TokenEvent ev, const Status& error) {
  auto it = reqs_.find(id);
  TARMAC_CHECK(it != reqs_.end());
  Live& L = it->second;
  const double now = NowSeconds();
  if (sched_->Has(id)) L.metrics.cached_prompt_tokens = sched_->prefix_hit_tokens(id);
  sched_->Finish(id);
  if (proposer_) proposer_->Release(id);
  L.metrics.e2e_s = now - L.submit_s;
  L.metrics.queue_s = (L.first_sched_s > 0 ? L.first_sched_s : now) - L.submit_s;
  ev.finish = reason;
  ev.error = error;
  ev.metrics = std::move(L.metrics);
  if (reason == FinishReason::kCancelled || reason == FinishReason::kError) {
    ++stats_.requests_cancelled;
  } else {
    ++stats_.requests_finished;
  }
  stats_.prompt_tokens += ev.metrics.prompt_tokens;
  std::shared_ptr<RequestStream> stream = std::move(L.stream);
  reqs_.erase(it);
  stream->Push(std::move(ev));
}

void EngineCore::Cancel(int64_t id) {
  if (reqs_.count(id) == 0) return;
  FinishRequest(id, FinishReason::kCancelled, TokenEvent{}, Status::Ok());
}

void EngineCore::AbortAll(const Status& error) {
  std::vector<int64_t> ids;
  for (const auto& [id, l] : reqs_) ids.push_back(id);
  for (int64_t id : ids) FinishRequest(id, FinishReason::kError, TokenEvent{}, error);
}

std::string EngineCore::BucketOf(const EngineRequest& r) {
  const float t = r.sampling.temperature;
  const char* temp = t == 0.0f ? "0" : (t <= 0.5f ? "low" : "high");
  const char* out = r.max_tokens <= 64 ? "short" : (r.max_tokens <= 512 ? "medium" : "long");
  return fmt::format("{}/T{}/out-{}", r.task.empty() ? "default" : r.task, temp, out);
}

void EngineCore::Sample(int64_t id, std::span<float> logits, double now) {
  Live& L = reqs_.at(id);
  sampling::SampleResult r = L.sampler->Sample(logits);
  L.sampler->Accept(r.id);
  sched_->AppendToken(id, r.id);
  Emit(id, std::move(r), now);
}

bool EngineCore::Emit(int64_t id, sampling::SampleResult r, double now) {
  Live& L = reqs_.at(id);
  ++stats_.generation_tokens;
  RequestMetrics& m = L.metrics;
  if (m.output_tokens == 0) {
    L.first_token_s = now;
    m.ttft_s = now - L.submit_s;
  } else {
    m.itl_s.push_back(now - L.last_token_s);
  }
  L.last_token_s = now;
  ++m.output_tokens;

  TokenEvent ev;
  ev.token = r.id;
  ev.logprob = r.logprob;
  ev.top = std::move(r.top);
  FinishReason fin = FinishReason::kNone;
  const bool stop_token =
      std::find(L.req.stop_token_ids.begin(), L.req.stop_token_ids.end(), r.id) !=
          L.req.stop_token_ids.end() ||
      (!L.req.ignore_eos && tok_ != nullptr && tok_->IsEndOfGeneration(r.id));
  bool stopped_by_string = false;
  if (stop_token) {
    fin = FinishReason::kStop;  // the stop token's own text is not part of the output
  } else if (tok_ != nullptr) {
    ev.text = L.stop->Push(L.detok->Push(r.id), &stopped_by_string);
    if (stopped_by_string) fin = FinishReason::kStop;
  }
  if (fin == FinishReason::kNone && m.output_tokens >= L.req.max_tokens) fin = FinishReason::kLength;
  if (fin == FinishReason::kNone) {
    L.stream->Push(std::move(ev));
    return false;
  }
  if (tok_ != nullptr && !stopped_by_string) {
    bool stopped = false;
    ev.text += L.stop->Push(L.detok->Finish(), &stopped);
    if (!stopped) ev.text += L.stop->Flush();
  }
  FinishRequest(id, fin, std::move(ev), Status::Ok());
  return true;
}

void EngineCore::Draft() {
  drafts_.clear();
  if (!proposer_) return;
  std::vector<int64_t> ready = sched_->DecodeReady();
  std::unordered_map<std::string, int32_t> per_bucket;  // decode-ready requests per bucket
  for (int64_t id : ready) ++per_bucket[reqs_.at(id).bucket];
  // Buckets decide one after another, best acceptance first, each seeing the draft tokens
  // the ones before it put into the shared step (its verification is priced on top of them,
  // and their requests are among those it must not slow down too much). Deciding each alone
  // on a plain step, two speculating buckets each priced a step the other had made larger.
  std::unordered_map<std::string, double> accept;
  if (config_.spec_policy) {
    for (const auto& [bucket, n] : per_bucket) accept[bucket] = policy_.AcceptanceEstimate(bucket);
    std::stable_sort(ready.begin(), ready.end(), [&](int64_t a, int64_t b) {
      const std::string& ba = reqs_.at(a).bucket;
      const std::string& bb = reqs_.at(b).bucket;
      return ba != bb && (accept[ba] != accept[bb] ? accept[ba] > accept[bb] : ba < bb);
    });
  }
  std::unordered_map<std::string, int32_t> drafted;  // draft tokens chosen per bucket
  int32_t drafted_total = 0;
  std::vector<spec::ProposeRequest> reqs;
  for (int64_t id : ready) {
    Live& L = reqs_.at(id);
    if (!L.req.speculative) continue;
    int32_t k = config_.spec_policy
                    ? policy_.ChooseK(L.bucket, static_cast<int32_t>(ready.size()),
                                      per_bucket[L.bucket], drafted_total - drafted[L.bucket])
                    : config_.spec_k;
    k = std::min(k, L.req.max_tokens - L.metrics.output_tokens - 1);  // never past max_tokens
    if (k <= 0) continue;
    drafted[L.bucket] += k;
    drafted_total += k;
    reqs.push_back({id, &sched_->tokens(id), L.sampler.get(), k});
  }
  if (reqs.empty()) return;
  const double t0 = NowSeconds();
  std::vector<std::vector<sampling::DraftToken>> out;
  proposer_->Propose(reqs, &out);
  int32_t rounds = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    rounds = std::max(rounds, static_cast<int32_t>(out[i].size()));
    if (out[i].empty()) continue;
    sched_->SetLookahead(reqs[i].id, static_cast<int32_t>(out[i].size()));
    drafts_[reqs[i].id] = std::move(out[i]);
  }
  const double dt = NowSeconds() - t0;
  stats_.draft_seconds += dt;
  // Every proposer's cost is measured (n-gram lookups cost next to nothing, but the policy
  // acts only on measured costs). A draft model's prompt catch-ups are left out: one new
  // request's 64-token catch-up priced wp-1m's rounds at ~1 ms instead of ~0.05 ms, and the
  // policy kept a paying bucket off.
  int32_t steady_rounds = 0;
  double steady_s = 0;
  if (proposer_->SteadyRounds(&steady_rounds, &steady_s)) {
    if (steady_rounds > 0) {
      policy_.ObserveDraft(steady_rounds, steady_s, static_cast<int32_t>(reqs.size()));
    }
  } else {
    policy_.ObserveDraft(rounds, dt, static_cast<int32_t>(reqs.size()));
  }
}

void EngineCore::Verify(int64_t id, float* logits, int32_t num_draft, double now) {
  Live& L = reqs_.at(id);
  const std::vector<sampling::DraftToken>& drafts = drafts_.at(id);
  const int32_t V = model_->config().n_vocab;
  const int32_t len_before = static_cast<int32_t>(sched_->tokens(id).size());
  const std::string bucket = L.bucket;
  int32_t accepted = 0;
  bool finished = false;
  for (int32_t i = 0; i <= num_draft && !finished; ++i) {
    std::span<float> row(logits + static_cast<int64_t>(i) * V, static_cast<size_t>(V));
    Live& live = reqs_.at(id);
    if (i == num_draft) {  // every draft passed: the bonus token
      sampling::SampleResult r = live.sampler->Sample(row);
      live.sampler->Accept(r.id);
      sched_->AppendToken(id, r.id);
      finished = Emit(id, std::move(r), now);
      break;
    }
    sampling::VerifyOutcome v = sampling::VerifyDraft(*live.sampler, row, drafts[i]);
    live.sampler->Accept(v.token.id);
    if (v.accepted) {
      ++accepted;
      sched_->AcceptDraftToken(id, v.token.id);
    } else {
      sched_->AppendToken(id, v.token.id);
    }
    finished = Emit(id, std::move(v.token), now);
    if (!v.accepted) break;
  }
  policy_.ObserveVerify(bucket, num_draft, accepted);  // the policy's input and the metrics
  if (!finished) {
    proposer_->Rollback(id, len_before + accepted);
    sched_->TrimToComputed(id);
  }
}

void EngineCore::Warmup() { model_->Warmup(&pool_threads_, cache_.shape().dtype); }

bool EngineCore::Step() {
  const double t0 = NowSeconds();
  Draft();
  sched::SchedulerOutput out = sched_->Schedule();
  for (int64_t id : out.preempted) {
    ++reqs_.at(id).metrics.preemptions;
    if (proposer_) proposer_->Release(id);
  }
  stats_.max_concurrent_running = std::max(stats_.max_concurrent_running, sched_->num_running());
  if (out.empty()) return false;
  const int32_t bs = config_.block_size;
  batch_.Clear();
  batch_.block_tables.resize(out.seqs.size());
  StepStats step;
  step.batch_size = static_cast<int32_t>(out.seqs.size());
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const sched::ScheduledSeq& s = out.seqs[i];
    Live& L = reqs_.at(s.id);
    if (L.first_sched_s == 0) L.first_sched_s = t0;
    batch_.block_tables[i] = *s.block_table;
    const std::vector<int32_t>& table = batch_.block_tables[i];
    const int32_t known = s.num_tokens - s.num_draft;
    for (int32_t t = 0; t < s.num_tokens; ++t) {
      const int32_t pos = s.start + t;
      batch_.tokens.push_back(t < known ? (*s.tokens)[pos] : drafts_.at(s.id)[t - known].id);
      batch_.positions.push_back(pos);
      batch_.seq.push_back(static_cast<int32_t>(i));
      batch_.slots.push_back(static_cast<int64_t>(table[pos / bs]) * bs + pos % bs);
      // Logits of the last known token, and of every draft when verifying.
      if (s.sample && t >= known - 1) batch_.logits_for.push_back(batch_.n_tokens() - 1);
    }
    if (s.num_draft > 0) {
      step.decode_tokens += 1 + s.num_draft;
    } else if (s.num_tokens == 1 && s.sample && s.start >= L.metrics.prompt_tokens) {
      ++step.decode_tokens;
    } else {
      step.prefill_tokens += s.num_tokens;
    }
  }
  const double tf = NowSeconds();
  model_->Forward(batch_, &cache_, &pool_threads_, &logits_);
  const double forward_s = NowSeconds() - tf;
  // The policy's step costs are those of decode steps (plain decodes and verifications):
  // a step that also carries a prefill chunk costs what its prompt tokens cost, and would
  // teach the policy, say, that 17 decodes take longer than 34 verified tokens.
  if (step.prefill_tokens == 0) policy_.ObserveStep(batch_.n_tokens(), forward_s);
  sched_->Commit(out);
  // Sliding-window models: KV blocks that no layer reads again go back to the pool.
  if (const int32_t window = model_->config().KvRetentionWindow(); window > 0) {
    for (const sched::ScheduledSeq& s : out.seqs) sched_->ReleaseOutsideWindow(s.id, window);
  }
  const int32_t V = model_->config().n_vocab;
  const double now = NowSeconds();
  size_t k = 0;
  bool verified = false;
  for (const sched::ScheduledSeq& s : out.seqs) {
    if (!s.sample) continue;
    if (s.num_draft > 0) {
      Verify(s.id, logits_.data() + k * V, s.num_draft, now);
      verified = true;
    } else {
      Sample(s.id, std::span<float>(logits_.data() + k * V, static_cast<size_t>(V)), now);
    }
    k += 1 + s.num_draft;
  }
  if (verified) stats_.verify_seconds += forward_s;
  step.seconds = NowSeconds() - t0;
  ++stats_.steps;
  stats_.last_step = step;
  return true;
}

Status EngineCore::CheckIntegrity() const {
  TARMAC_RETURN_IF_ERROR(sched_->CheckIntegrity());
  if (proposer_) TARMAC_RETURN_IF_ERROR(proposer_->CheckIntegrity());
  return Status::Ok();
}

EngineStats EngineCore::Stats() const {
  EngineStats s = stats_;
  s.num_running = sched_->num_running();
  s.num_waiting = sched_->num_waiting();
  s.kv = sched_->Usage();
  s.sched = sched_->counters();
  s.spec_buckets = policy_.stats();
  return s;
}

}  // namespace tarmac::engine
