// The OpenAI renderer on synthetic engine events: completions logprobs (the sampled token is
// always in top_logprobs, exactly it with logprobs 0; partial UTF-8 byte tokens get distinct
// "bytes:\xNN" keys), echo (prompt text and prompt-token logprobs, the first null), usage in
// every chunk with continuous_usage_stats, and tool calls parsed out of chat text: streamed
// deltas as OpenAI sends them add up to the non-streamed message, finish_reason tool_calls.
#include "server/openai_render.h"

#include <gtest/gtest.h>

#include "common/test_util.h"
#include "gguf/gguf_file.h"
#include "tokenizer/vocab_gguf.h"

namespace tarmac::server {
namespace {

using Json = nlohmann::ordered_json;

const tok::Tokenizer& Tok() {
  static std::unique_ptr<tok::Tokenizer> t = [] {
    auto f = gguf::File::Open(testing::kWp11m);
    return std::move(tok::Tokenizer::Create(std::move(tok::LoadVocab(*f).value())).value());
  }();
  return *t;
}

router::PoolModel Model(grammar::ToolCallFormat format = grammar::ToolCallFormat::kNone) {
  router::PoolModel m;
  m.name = "wp";
  m.tokenizer = &Tok();
  m.tool_format = format;
  return m;
}

GenRequest Request(const std::string& body, ApiKind kind) {
  GenRequest r;
  auto e = ParseGenRequest(body, kind, &r);
  EXPECT_FALSE(e.has_value()) << e->message;
  return r;
}

// Ids of two different single-byte tokens that are not valid UTF-8 on their own.
std::pair<int32_t, int32_t> PartialByteTokens() {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < Tok().n_vocab() && ids.size() < 2; ++id) {
    const std::string p = Tok().TokenToPiece(id);
    if (p.size() == 1 && static_cast<unsigned char>(p[0]) >= 0xC2) ids.push_back(id);
  }
  EXPECT_EQ(ids.size(), 2u);
  return {ids[0], ids[1]};
}

engine::TokenEvent Token(int32_t id, float lp, std::vector<sampling::TokenLogprob> top, bool last = false) {
  engine::TokenEvent ev;
  ev.token = id;
  ev.text = Tok().TokenToPiece(id);
  ev.logprob = lp;
  ev.top = std::move(top);
  if (last) {
    ev.finish = engine::FinishReason::kLength;
    ev.metrics.output_tokens = 0;
  }
  return ev;
}

std::vector<Json> Chunks(const std::string& sse) {
  std::vector<Json> out;
  size_t p = 0;
  while ((p = sse.find("data: ", p)) != std::string::npos) {
    const size_t e = sse.find("\n\n", p);
    const std::string d = sse.substr(p + 6, e - p - 6);
    if (d != "[DONE]") out.push_back(Json::parse(d));
    p = e;
  }
  return out;
}

TEST(OpenAiRender, CompletionTopLogprobsHoldTheSampledToken) {
  const int32_t a = Tok().Encode("the")[0], b = Tok().Encode(" and")[0], c = Tok().Encode(" of")[0];
  OpenAiRenderer r(Request(R"({"model":"m","prompt":"x","logprobs":1})", ApiKind::kCompletion));
  router::PoolModel m = Model();
  r.SetModel(m);
  r.SetChoices({0}, {{a}});
  r.OnEvent(0, Token(c, -2.5f, {{b, -0.5f}}), nullptr);  // sampled c is not the top alternative
  engine::TokenEvent last = Token(a, -0.1f, {{a, -0.1f}}, true);
  last.metrics.output_tokens = 2;
  r.OnEvent(0, last, nullptr);
  const Json body = Json::parse(r.ResponseBody());
  const Json& top = body["choices"][0]["logprobs"]["top_logprobs"];
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].size(), 2u);
  EXPECT_FLOAT_EQ(top[0][Tok().TokenToPiece(c)].get<float>(), -2.5f);
  EXPECT_FLOAT_EQ(top[0][Tok().TokenToPiece(b)].get<float>(), -0.5f);
  EXPECT_EQ(top[1].size(), 1u);  // the sampled token was the alternative
}

TEST(OpenAiRender, CompletionLogprobsZeroHoldsExactlyTheSampledToken) {
  const int32_t a = Tok().Encode("the")[0];
  OpenAiRenderer r(Request(R"({"model":"m","prompt":"x","logprobs":0})", ApiKind::kCompletion));
  router::PoolModel m = Model();
  r.SetModel(m);
  r.SetChoices({0}, {{a}});
  r.OnEvent(0, Token(a, -1.25f, {}, true), nullptr);
  const Json body = Json::parse(r.ResponseBody());
  const Json& top = body["choices"][0]["logprobs"]["top_logprobs"][0];
  ASSERT_EQ(top.size(), 1u);
  EXPECT_FLOAT_EQ(top[Tok().TokenToPiece(a)].get<float>(), -1.25f);
}

TEST(OpenAiRender, PartialUtf8TokensGetDistinctByteKeys) {
  const auto [x, y] = PartialByteTokens();
  OpenAiRenderer r(Request(R"({"model":"m","prompt":"x","logprobs":2})", ApiKind::kCompletion));
  router::PoolModel m = Model();
  r.SetModel(m);
  r.SetChoices({0}, {{x}});
  r.OnEvent(0, Token(x, -0.7f, {{x, -0.7f}, {y, -0.9f}}, true), nullptr);
  const Json lp = Json::parse(r.ResponseBody())["choices"][0]["logprobs"];
  const Json& top = lp["top_logprobs"][0];
  ASSERT_EQ(top.size(), 2u) << top.dump();
  const std::string kx = LogprobTokenString(Tok().TokenToPiece(x)), ky = LogprobTokenString(Tok().TokenToPiece(y));
  EXPECT_EQ(kx.rfind("bytes:\\x", 0), 0u) << kx;
  EXPECT_EQ(kx.size(), std::string("bytes:\\xNN").size());
  EXPECT_NE(kx, ky);
  EXPECT_FLOAT_EQ(top[kx].get<float>(), -0.7f);
  EXPECT_FLOAT_EQ(top[ky].get<float>(), -0.9f);
  EXPECT_EQ(lp["tokens"][0], kx);
  EXPECT_EQ(LogprobTokenString("abc"), "abc");
}

TEST(OpenAiRender, EchoPutsThePromptAndItsLogprobsFirst) {
  const std::vector<int32_t> prompt = Tok().Encode("Prince Andrew");
  ASSERT_GE(prompt.size(), 2u);
  const int32_t t = Tok().Encode(" said")[0];
  for (bool stream : {false, true}) {
    OpenAiRenderer r(Request(std::string(R"({"model":"m","prompt":"Prince Andrew","echo":true,"logprobs":1,"stream":)") +
                                 (stream ? "true" : "false") + "}",
                             ApiKind::kCompletion));
    router::PoolModel m = Model();
    r.SetModel(m);
    r.SetChoices({0}, {prompt});
    engine::TokenEvent ev = Token(t, -1.0f, {{t, -1.0f}}, true);
    for (size_t i = 1; i < prompt.size(); ++i) {
      sampling::SampleResult p;
      p.id = prompt[i];
      p.logprob = -3.0f;
      p.top = {{prompt[i], -3.0f}};
      ev.prompt_logprobs.push_back(p);
    }
    std::string sse;
    r.OnEvent(0, ev, &sse);
    const Json lp = Json::parse(r.ResponseBody())["choices"][0]["logprobs"];
    EXPECT_EQ(Json::parse(r.ResponseBody())["choices"][0]["text"], "Prince Andrew" + Tok().TokenToPiece(t));
    ASSERT_EQ(lp["tokens"].size(), prompt.size() + 1);
    EXPECT_TRUE(lp["token_logprobs"][0].is_null());
    EXPECT_TRUE(lp["top_logprobs"][0].is_null());
    EXPECT_FLOAT_EQ(lp["token_logprobs"][1].get<float>(), -3.0f);
    EXPECT_EQ(lp["text_offset"][0], 0);
    EXPECT_EQ(lp["text_offset"][prompt.size()], std::string("Prince Andrew").size());
    if (stream) {
      const std::vector<Json> chunks = Chunks(sse);
      ASSERT_EQ(chunks.size(), 1u);
      EXPECT_EQ(chunks[0]["choices"][0]["text"], "Prince Andrew" + Tok().TokenToPiece(t));
      EXPECT_EQ(chunks[0]["choices"][0]["logprobs"], lp);
    }
  }
}

TEST(OpenAiRender, ContinuousUsageInEveryChunk) {
  const int32_t t = Tok().Encode("the")[0];
  OpenAiRenderer r(Request(R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,
      "stream_options":{"include_usage":true,"continuous_usage_stats":true}})", ApiKind::kChat));
  router::PoolModel m = Model();
  r.SetModel(m);
  r.SetChoices({0}, {{t, t, t}});
  std::string sse = r.StreamPrelude();
  r.OnEvent(0, Token(t, -1, {}), &sse);
  engine::TokenEvent last = Token(t, -1, {}, true);
  last.metrics.output_tokens = 2;
  r.OnEvent(0, last, &sse);
  sse += r.StreamEpilogue();
  const std::vector<Json> chunks = Chunks(sse);
  ASSERT_EQ(chunks.size(), 4u);
  for (size_t i = 0; i < chunks.size(); ++i) {
    ASSERT_TRUE(chunks[i]["usage"].is_object()) << chunks[i].dump();
    EXPECT_EQ(chunks[i]["usage"]["prompt_tokens"], 3);
    EXPECT_EQ(chunks[i]["usage"]["completion_tokens"], std::min<size_t>(i, 2));
    EXPECT_EQ(chunks[i]["usage"]["total_tokens"], 3 + std::min<size_t>(i, 2));
  }
}

// Events carrying the given texts (the last one ends the choice with stop).
void Feed(OpenAiRenderer* r, const std::vector<std::string>& texts, std::string* sse) {
  for (size_t i = 0; i < texts.size(); ++i) {
    engine::TokenEvent ev;
    ev.token = 1;
    ev.text = texts[i];
    if (i + 1 == texts.size()) {
      ev.finish = engine::FinishReason::kStop;
      ev.metrics.output_tokens = static_cast<int32_t>(texts.size());
    }
    r->OnEvent(0, ev, sse);
  }
}

TEST(OpenAiRender, ToolCallsStreamedAddUpToTheMessage) {
  const std::string body = R"({"model":"m","messages":[{"role":"user","content":"x"}],"STREAM
      "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
        "properties":{"city":{"type":"string"}}}}}]})";
  const std::vector<std::string> texts = {"Let me check.", " <tool", "_call>\n{\"name\": \"get_", "weather\", \"argu",
                                          "ments\": {\"city\": \"Mos", "cow\"}}\n</tool_call>"};
  router::PoolModel m = Model(grammar::ToolCallFormat::kHermes);
  auto make = [&](bool stream) {
    std::string b = body;
    b.replace(b.find("STREAM"), 6, stream ? "stream\":true," : "n\":1,");
    auto r = std::make_unique<OpenAiRenderer>(Request(b, ApiKind::kChat));
    r->SetModel(m);
    r->SetChoices({0}, {{1}});
    return r;
  };
  auto plain = make(false);
  Feed(plain.get(), texts, nullptr);
  const Json msg = Json::parse(plain->ResponseBody())["choices"][0];
  EXPECT_EQ(msg["finish_reason"], "tool_calls");
  EXPECT_EQ(msg["message"]["content"], "Let me check. ");
  ASSERT_EQ(msg["message"]["tool_calls"].size(), 1u);
  const Json& call = msg["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(call["function"]["arguments"].get<std::string>()), Json::parse(R"({"city":"Moscow"})"));
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);

  auto streamed = make(true);
  std::string sse;
  Feed(streamed.get(), texts, &sse);
  std::string content, args, name, id;
  std::string finish;
  for (const Json& ch : Chunks(sse)) {
    const Json& c = ch["choices"][0];
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
    const Json& d = c["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (!d.contains("tool_calls")) continue;
    ASSERT_EQ(d["tool_calls"].size(), 1u);
    const Json& tc = d["tool_calls"][0];
    EXPECT_EQ(tc["index"], 0);
    if (tc.contains("id")) {
      EXPECT_TRUE(id.empty()) << "one opening delta per call";
      id = tc["id"];
      name = tc["function"]["name"];
      EXPECT_EQ(tc["type"], "function");
    }
    args += tc["function"]["arguments"].get<std::string>();
  }
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(content, msg["message"]["content"]);
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(args, call["function"]["arguments"]);
  EXPECT_EQ(id.substr(0, 5), "call_");
}

TEST(OpenAiRender, NamedToolChoiceFinishesWithStopAndKeepsOneCallWithoutParallel) {
  const std::string body = R"({"model":"m","messages":[{"role":"user","content":"x"}],"parallel_tool_calls":false,
      "tool_choice":{"type":"function","function":{"name":"f"}},
      "tools":[{"type":"function","function":{"name":"f"}}]})";
  router::PoolModel m = Model(grammar::ToolCallFormat::kHermes);
  OpenAiRenderer r(Request(body, ApiKind::kChat));
  r.SetModel(m);
  r.SetChoices({0}, {{1}});
  Feed(&r, {"<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"},
       nullptr);
  const Json c = Json::parse(r.ResponseBody())["choices"][0];
  EXPECT_EQ(c["finish_reason"], "stop");
  EXPECT_TRUE(c["message"]["content"].is_null());
  EXPECT_EQ(c["message"]["tool_calls"].size(), 1u);
}

}  // namespace
}  // namespace tarmac::server
