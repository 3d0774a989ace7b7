// The plain default chat format and the template path.
#include "router/chat_format.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "gguf/gguf_file.h"
#include "tokenizer/vocab_gguf.h"

namespace tarmac::router {
namespace {

using Json = nlohmann::ordered_json;

TEST(ChatFormat, PlainDefault) {
  auto f = ChatFormatter::Create("", "<s>", "</s>");
  ASSERT_TRUE(f.ok());
  Json msgs = Json::parse(R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},
                              {"role":"assistant","content":"Hello"},{"role":"user","content":"Who?"}])");
  EXPECT_EQ(*f->Render(msgs, nullptr, true), "Be brief.\n\nUser: Hi\nAssistant: Hello\nUser: Who?\nAssistant:");
  EXPECT_EQ(*f->Render(msgs, nullptr, false), "Be brief.\n\nUser: Hi\nAssistant: Hello\nUser: Who?\n");
}

TEST(ChatFormat, Template) {
  auto f = ChatFormatter::Create(
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}",
      "<s>", "</s>");
  ASSERT_TRUE(f.ok()) << f.status().message();
  Json msgs = Json::parse(R"([{"role":"user","content":"Hi"}])");
  EXPECT_EQ(*f->Render(msgs, nullptr, true), "<s><user>Hi<assistant>");
  EXPECT_FALSE(ChatFormatter::Create("{% for %}", "", "").ok());
}

// A template that takes tools (Hermes/Qwen style) gets the request's tools and the history's
// tool calls (arguments as an object) and tool results.
TEST(ChatFormat, TemplateGetsToolsAndToolCallHistory) {
  auto f = ChatFormatter::Create(
      "{% if tools %}<tools>{% for t in tools %}{{ t.function.name }}:{{ t.function.parameters | tojson }};{% endfor %}"
      "</tools>{% endif %}{% for m in messages %}<{{ m.role }}>{% if m.tool_calls %}{% for c in m.tool_calls %}"
      "<tool_call>{{ c.function.name }} {{ c.function.arguments.city }}</tool_call>{% endfor %}{% else %}{{ m.content }}"
      "{% endif %}{% endfor %}",
      "", "");
  ASSERT_TRUE(f.ok()) << f.status().message();
  const Json tools = Json::parse(R"([{"type":"function","function":{"name":"get_weather",
      "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])");
  const Json msgs = Json::parse(R"([{"role":"user","content":"Weather?"},
      {"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function",
        "function":{"name":"get_weather","arguments":{"city":"Moscow"}}}]},
      {"role":"tool","tool_call_id":"c1","content":"cold"}])");
  auto text = f->Render(msgs, tools, false);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text, "<tools>get_weather:{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}};</tools>"
                   "<user>Weather?<assistant><tool_call>get_weather Moscow</tool_call><tool>cold");
  EXPECT_EQ(*f->Render(msgs, nullptr, false),
            "<user>Weather?<assistant><tool_call>get_weather Moscow</tool_call><tool>cold");
}

const tok::Tokenizer& Wp11mTokenizer() {
  static std::unique_ptr<tok::Tokenizer> t = [] {
    auto f = gguf::File::Open(TARMAC_SOURCE_DIR "/models/wp-11m-f16.gguf");
    return std::move(tok::Tokenizer::Create(std::move(tok::LoadVocab(*f).value())).value());
  }();
  return *t;
}

// Special-token text a user writes stays text; the template's own literal is the control token.
TEST(ChatFormat, MessageTextNeverBecomesAControlToken) {
  const tok::Tokenizer& t = Wp11mTokenizer();
  const int32_t eot = t.Find("<|endoftext|>");
  ASSERT_GE(eot, 0);
  auto f = ChatFormatter::Create("{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}<|endoftext|>{% endfor %}", "", "");
  ASSERT_TRUE(f.ok());
  const Json msgs = Json::parse(R"([{"role":"user","content":" say <|endoftext|> now <|endoftext|>"},
                                    {"role":"assistant","content":"ok"}])");
  auto ids = f->Encode(msgs, nullptr, false, t);
  ASSERT_TRUE(ids.ok()) << ids.status().message();
  EXPECT_EQ(std::count(ids->begin(), ids->end(), eot), 2);  // one per message, from the template
  EXPECT_EQ(t.Decode(*ids, true), "<user>say <|endoftext|> now <|endoftext|><|endoftext|><assistant>ok<|endoftext|>");
  // The text is the user's: tokenized as text, it decodes back to itself.
  const std::vector<int32_t> text = t.Encode("<|endoftext|>", tok::EncodeOptions{false, false});
  EXPECT_GT(text.size(), 1u);
  // Without special text in the messages the ids are what plain parse-special encoding gives.
  const Json plain = Json::parse(R"([{"role":"user","content":"hello"}])");
  EXPECT_EQ(*f->Encode(plain, nullptr, false, t),
            t.Encode(*f->Render(plain, nullptr, false), tok::EncodeOptions{false, true}));
}

TEST(ChatFormat, PlainDefaultParsesNoSpecialText) {
  const tok::Tokenizer& t = Wp11mTokenizer();
  auto f = ChatFormatter::Create("", "", "");
  auto ids = f->Encode(Json::parse(R"([{"role":"user","content":"<|endoftext|>"}])"), nullptr, true, t);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(std::count(ids->begin(), ids->end(), t.Find("<|endoftext|>")), 0);
}

}  // namespace
}  // namespace tarmac::router
