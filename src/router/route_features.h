// RouteFeatures: what a routing decision looks at, computed once per request (after the route's
// reference model has encoded the prompt): lengths, task, SLA tier, risk, tenant, temperature,
// the last user message (for pattern rules), and the request bucket they make.
//
// TaskRule: a configured rule that sets a request's task or risk from its last user message
// (a PCRE2 pattern), applied when the request does not say.
//
// Plain values; Pattern is immutable after Compile and thread-safe to match.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "metrics/request_bucket.h"

namespace tarmac::router {

struct RouteFeatures {
  int64_t prompt_tokens = 0;
  int64_t max_tokens = 0;          // requested, or the API's default for this prompt
  std::string task;                // request, else task rules, else the router's default ("chat")
  std::string sla;                 // request, else the tenant's default, else "standard"
  metrics::Risk risk = metrics::Risk::kLow;  // request, else tenant default, else rules
  std::string tenant;
  float temperature = 1.0f;
  std::string last_user_message;   // chat: the last user message's text; completions: the prompt
  metrics::BucketId bucket = metrics::kNoBucket;
};

// A compiled regular expression (PCRE2, UTF-8, JIT when available). Search semantics: matches
// anywhere in the text unless anchored.
class Pattern {
 public:
  // Errors name the pattern and PCRE2's reason.
  static Result<Pattern> Compile(std::string_view pattern);
  bool Search(std::string_view text) const;
  const std::string& source() const { return source_; }

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
  std::string source_;
};

// "when the last user message matches P, the task is T (and/or the risk is R)".
struct TaskRule {
  Pattern pattern;
  std::optional<std::string> task;
  std::optional<metrics::Risk> risk;
};

}  // namespace tarmac::router
