// libFuzzer target for the OpenAI request parsers: the input is a request body, parsed as a
// /v1/completions body and as a /v1/chat/completions body (every field: sampling, stop,
// logit_bias, stream_options, messages with nested content parts and tool calls, tools and
// tool_choice, response_format and structured_outputs with their grammars), and as the
// /tokenize, /detokenize and /v1/feedback bodies. Any input must parse or fail with a 400 that
// names the parameter; nothing may crash, hang, leak or throw, and an accepted request's cache
// key parameters must serialise. Run: scripts/fuzz.sh openai_request SECONDS.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>

#include "server/openai_request.h"

namespace {

using namespace tarmac::server;

void CheckError(const std::optional<ApiError>& e, const char* what) {
  if (!e) return;
  if (e->status != 400 || e->message.empty()) {
    std::fprintf(stderr, "request fuzz: %s: error status %d message '%s'\n", what, e->status, e->message.c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  try {
    for (ApiKind kind : {ApiKind::kCompletion, ApiKind::kChat}) {
      GenRequest req;
      auto e = ParseGenRequest(body, kind, &req);
      CheckError(e, kind == ApiKind::kChat ? "chat" : "completion");
      if (!e) {
        (void)req.key_params.dump();  // the response cache's key
        (void)req.spec.messages.dump();
        (void)req.spec.tools.dump();
      }
    }
    TokenizeRequest t;
    CheckError(ParseTokenizeRequest(body, &t), "tokenize");
    DetokenizeRequest d;
    CheckError(ParseDetokenizeRequest(body, &d), "detokenize");
    FeedbackRequest f;
    CheckError(ParseFeedbackRequest(body, &f), "feedback");
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "request fuzz: exception escaped a parser: %s\n", ex.what());
    std::abort();
  }
  return 0;
}
