// Request parsing and validation: accepted shapes, and errors naming the parameter.
#include "server/openai_request.h"

#include <gtest/gtest.h>

namespace tarmac::server {
namespace {

std::optional<ApiError> Parse(const std::string& body, ApiKind kind = ApiKind::kCompletion, GenRequest* out = nullptr) {
  GenRequest r;
  return ParseGenRequest(body, kind, out ? out : &r);
}

TEST(OpenAiRequest, CompletionFields) {
  GenRequest r;
  ASSERT_FALSE(Parse(R"({"model":"m","prompt":"hi","max_tokens":5,"temperature":0.5,"top_p":0.9,"top_k":-1,
      "n":2,"stop":"x","seed":7,"stream":true,"stream_options":{"include_usage":true},"logprobs":3,
      "presence_penalty":0.5,"logit_bias":{"12":-100},"user":"u","priority":-1})", ApiKind::kCompletion, &r));
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.spec.prompts.size(), 1u);
  EXPECT_EQ(r.spec.prompts[0].text, "hi");
  EXPECT_EQ(*r.spec.max_tokens, 5);
  EXPECT_EQ(r.spec.n, 2);
  EXPECT_EQ(r.spec.sampling.top_k, 0);
  EXPECT_EQ(*r.spec.sampling.seed, 7u);
  EXPECT_TRUE(r.stream && r.include_usage && r.logprobs);
  EXPECT_EQ(r.spec.sampling.top_logprobs, 3);
  ASSERT_EQ(r.spec.sampling.logit_bias.size(), 1u);
  EXPECT_EQ(r.spec.sampling.logit_bias[0].first, 12);
  EXPECT_EQ(r.spec.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.spec.priority, -1);
}

TEST(OpenAiRequest, PromptForms) {
  GenRequest r;
  ASSERT_FALSE(Parse(R"({"model":"m","prompt":[1,2,3]})", ApiKind::kCompletion, &r));
  EXPECT_TRUE(r.spec.prompts[0].is_ids);
  GenRequest b;
  ASSERT_FALSE(Parse(R"({"model":"m","prompt":["a",[4,5]]})", ApiKind::kCompletion, &b));
  EXPECT_EQ(b.spec.prompts.size(), 2u);
  EXPECT_TRUE(b.spec.prompts[1].is_ids);
}

TEST(OpenAiRequest, ChatFlattensContentParts) {
  GenRequest r;
  ASSERT_FALSE(Parse(R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
      {"role":"assistant","content":null}],"max_completion_tokens":9,"logprobs":true,"top_logprobs":2})", ApiKind::kChat, &r));
  EXPECT_EQ(r.spec.messages[0]["content"], "ab");
  EXPECT_EQ(r.spec.messages[1]["content"], "");
  EXPECT_EQ(*r.spec.max_tokens, 9);
  EXPECT_EQ(r.spec.sampling.top_logprobs, 2);
}

struct Bad {
  const char* body;
  ApiKind kind;
  const char* param;
};

TEST(OpenAiRequest, ErrorsNameTheParameter) {
  const Bad cases[] = {
      {R"({"prompt":"x"})", ApiKind::kCompletion, "model"},
      {R"({"model":"m"})", ApiKind::kCompletion, "prompt"},
      {R"({"model":"m","prompt":"x","max_tokens":0})", ApiKind::kCompletion, "max_tokens"},
      {R"({"model":"m","prompt":"x","max_tokens":"5"})", ApiKind::kCompletion, "max_tokens"},
      {R"({"model":"m","prompt":"x","temperature":3})", ApiKind::kCompletion, "temperature"},
      {R"({"model":"m","prompt":"x","top_p":0})", ApiKind::kCompletion, "top_p"},
      {R"({"model":"m","prompt":"x","n":0})", ApiKind::kCompletion, "n"},
      {R"({"model":"m","prompt":"x","stop":[1]})", ApiKind::kCompletion, "stop"},
      {R"({"model":"m","prompt":"x","logit_bias":{"a":1}})", ApiKind::kCompletion, "logit_bias"},
      {R"({"model":"m","prompt":"x","logit_bias":{"1":101}})", ApiKind::kCompletion, "logit_bias"},
      {R"({"model":"m","prompt":"x","bogus":1})", ApiKind::kCompletion, "bogus"},
      {R"({"model":"m","prompt":"x","stream_options":{"include_usage":true}})", ApiKind::kCompletion, "stream_options"},
      {R"({"model":"m","prompt":[1,"a"]})", ApiKind::kCompletion, "prompt"},
      {R"({"model":"m","messages":[]})", ApiKind::kChat, "messages"},
      {R"({"model":"m","messages":[{"role":"bot","content":"x"}]})", ApiKind::kChat, "messages[0].role"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"top_logprobs":2})", ApiKind::kChat, "top_logprobs"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"prompt":"x"})", ApiKind::kChat, "prompt"},
  };
  for (const Bad& b : cases) {
    auto e = Parse(b.body, b.kind);
    ASSERT_TRUE(e.has_value()) << b.body;
    EXPECT_EQ(e->status, 400);
    EXPECT_EQ(e->param, b.param) << b.body << " -> " << e->message;
  }
}

TEST(OpenAiRequest, InvalidJsonAndUtf8) {
  auto e = Parse("{");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "invalid_json");
  EXPECT_TRUE(Parse("{\"model\":\"m\",\"prompt\":\"\xff\"}"));
  EXPECT_TRUE(Parse("[]"));
}

TEST(OpenAiRequest, ErrorJsonShape) {
  ApiError e = BadRequest("max_tokens", "bad");
  EXPECT_EQ(e.ToJson(), R"({"error":{"message":"bad","type":"invalid_request_error","param":"max_tokens","code":null}})");
}

}  // namespace
}  // namespace tarmac::server
