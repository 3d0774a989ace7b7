// GenerationJob: one /v1/completions or /v1/chat/completions request from parse to response:
// its parsed request, the target it runs on (a model's engine, a route, a cached answer), the
// target's prepared engine requests, and the OpenAI renderer its events go through. A
// GenerationFlow drives it: Prepare (encode + every check; errors are 400s naming the
// parameter), admission, Start, Poll as events arrive, then the epilogue or body.
//
// Not thread-safe: owned by one flow on the server's I/O thread. The notifier given to Start
// runs on engine threads. Preparation runs off the I/O thread: the flow hands the whole job to
// a prepare worker and back, and while the worker has it
// nothing else touches it; Prepare is safe there (router/target.h), Decide is not
// (it runs on the I/O thread between them).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "router/target.h"
#include "server/api_error.h"
#include "server/openai_render.h"
#include "server/openai_request.h"

namespace tarmac::server {

class GenerationJob {
 public:
  GenerationJob(GenRequest req, std::unique_ptr<router::Target> target);

  // A routed job chooses its model first, on the I/O thread: Decide on the request prepared
  // for the route's baseline (the flow's RequestPlan is that probe).
  bool needs_decision() const { return target_->needs_decision(); }
  std::optional<ApiError> Decide(const router::PreparedRequests& probe);
  // Encodes, compiles the output's grammar and checks every choice for the target (deciding
  // first when the job needs_decision(), on the caller's thread); on the thread the job is
  // handed to. May throw (an injected tokenize fault).
  std::optional<ApiError> Prepare();
  // What Prepare would do with requests prepared elsewhere for this job's (decided) target:
  // a plain model's request as its plan prepared it.
  void Adopt(router::PreparedRequests prepared);
  // prompt + max_tokens over all choices (for the admission queue).
  int64_t admission_tokens() const { return prepared_.admission_tokens; }
  int32_t priority() const { return req_.spec.priority; }
  const std::string& tenant() const { return req_.spec.tenant; }
  // Prompt tokens over all choices (what the tenant's token rate is charged at admission).
  int64_t prompt_tokens() const { return prompt_tokens_; }
  bool streaming() const { return req_.stream; }
  bool constrained() const { return req_.spec.constrained(); }
  // The model whose admission queue the job waits in (a cascade's changes when it escalates).
  const std::string& model_name() const { return target_->model().name; }
  // Routed requests: the route, and moving to the route's next model (its baseline) when the
  // current one refused the request; Prepare again after it (off the I/O thread). Errors: none
  // is left (a 503 naming the models tried).
  bool routed() const { return target_->route_info().has_value(); }
  std::optional<router::RouteInfo> route_info() const { return target_->route_info(); }
  std::optional<ApiError> Fallback(const std::string& reason);
  // The response's headers must wait for the first released event (a held-back decision).
  bool holds_back() const { return target_->holds_back(); }
  bool released() const { return released_; }

  // Submits every choice. On error nothing stays submitted.
  std::optional<ApiError> Start(const std::function<void()>& notify);
  // Drains available events. When streaming, appends SSE frames to *sse. Returns true once
  // every choice has finished.
  bool Poll(std::string* sse);
  void CancelAll();
  // Every choice finished (or the job gave up): tells the target, once.
  void Finished(bool error);

  const OpenAiRenderer& render() const { return render_; }

 private:
  GenRequest req_;
  std::unique_ptr<router::Target> target_;
  router::PreparedRequests prepared_;
  OpenAiRenderer render_;
  int64_t prompt_tokens_ = 0;
  bool started_ = false;
  bool released_ = false;  // some event went to the renderer
  bool finished_ = false;
};

}  // namespace tarmac::server
