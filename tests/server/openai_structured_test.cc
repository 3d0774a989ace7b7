// Structured-output and tool fields of a request: the accepted forms of response_format,
// vLLM's structured_outputs, tools / tool_choice / parallel_tool_calls and tool messages in the
// history; and every inconsistent or unsupported one a 400 naming the field (and the construct
// for schemas).
#include <gtest/gtest.h>

#include "grammar/matcher.h"
#include "grammar/token_table.h"
#include "server/openai_request.h"

namespace tarmac::server {
namespace {

GenRequest Ok(const std::string& body, ApiKind kind = ApiKind::kChat) {
  GenRequest r;
  auto e = ParseGenRequest(body, kind, &r);
  EXPECT_FALSE(e.has_value()) << body << " -> " << (e ? e->param + ": " + e->message : "");
  return r;
}

ApiError Bad(const std::string& body, ApiKind kind = ApiKind::kChat) {
  GenRequest r;
  auto e = ParseGenRequest(body, kind, &r);
  EXPECT_TRUE(e.has_value()) << body;
  return e.value_or(ApiError{});
}

const std::string kMsgs = R"("model":"m","messages":[{"role":"user","content":"hi"}])";
const std::string kPrompt = R"("model":"m","prompt":"hi")";

// Whether text is a sentence of g (over a vocabulary of single bytes).
bool Accepts(const grammar::Grammar& g, const std::string& text) {
  std::vector<std::string> pieces = {""};
  for (int c = 1; c < 256; ++c) pieces.push_back(std::string(1, static_cast<char>(c)));
  auto compiled = grammar::CompiledGrammar::Compile(g, grammar::TokenTable::FromPieces(pieces, {0}));
  EXPECT_TRUE(compiled.ok());
  grammar::GrammarMatcher m(*compiled);
  return m.AcceptBytes(text) && m.CanEnd();
}

TEST(OpenAiStructured, ResponseFormats) {
  EXPECT_EQ(Ok("{" + kMsgs + R"(,"response_format":{"type":"text"}})").spec.grammar, nullptr);
  auto obj = Ok("{" + kMsgs + R"(,"response_format":{"type":"json_object"}})");
  ASSERT_NE(obj.spec.grammar, nullptr);
  EXPECT_TRUE(Accepts(*obj.spec.grammar, R"({"a": [1, true]})"));
  EXPECT_FALSE(Accepts(*obj.spec.grammar, "[1]"));
  auto schema = Ok("{" + kPrompt + R"(,"response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,
      "schema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}}}})", ApiKind::kCompletion);
  ASSERT_NE(schema.spec.grammar, nullptr);
  EXPECT_TRUE(Accepts(*schema.spec.grammar, R"({"n": 3})"));
  EXPECT_FALSE(Accepts(*schema.spec.grammar, R"({"n": "3"})"));
  EXPECT_TRUE(schema.spec.constrained());
}

TEST(OpenAiStructured, VllmStructuredOutputs) {
  auto re = Ok("{" + kPrompt + R"(,"structured_outputs":{"regex":"[0-9]{3}"}})", ApiKind::kCompletion);
  EXPECT_TRUE(Accepts(*re.spec.grammar, "123"));
  EXPECT_FALSE(Accepts(*re.spec.grammar, "12"));
  auto choice = Ok("{" + kMsgs + R"(,"structured_outputs":{"choice":["yes","no"]}})");
  EXPECT_TRUE(Accepts(*choice.spec.grammar, "no"));
  EXPECT_FALSE(Accepts(*choice.spec.grammar, "maybe"));
  auto gbnf = Ok("{" + kMsgs + R"(,"structured_outputs":{"grammar":"root ::= \"a\" [b-c]+"}})");
  EXPECT_TRUE(Accepts(*gbnf.spec.grammar, "abcb"));
  auto json = Ok("{" + kMsgs + R"(,"structured_outputs":{"json":{"type":"array","items":{"type":"boolean"}}}})");
  EXPECT_TRUE(Accepts(*json.spec.grammar, "[true, false]"));
  auto json_text = Ok("{" + kMsgs + R"(,"structured_outputs":{"json":"{\"enum\": [1, 2]}"}})");
  EXPECT_TRUE(Accepts(*json_text.spec.grammar, "2"));
  auto any = Ok("{" + kMsgs + R"(,"structured_outputs":{"json_object":true}})");
  EXPECT_TRUE(Accepts(*any.spec.grammar, "{}"));
}

TEST(OpenAiStructured, BadConstraintsName400) {
  struct Case {
    std::string body;
    std::string param;
    std::string says;  // part of the message
  };
  const std::vector<Case> cases = {
      {R"("response_format":{"type":"xml"})", "response_format.type", "xml"},
      {R"("response_format":"json")", "response_format", "object"},
      {R"("response_format":{"type":"json_schema"})", "response_format.json_schema", "required"},
      {R"("response_format":{"type":"json_schema","json_schema":{"schema":{}}})", "response_format.json_schema.name", "name"},
      {R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object",
          "properties":{"age":{"type":"integer","multipleOf":3}}}}})",
       "response_format.json_schema.schema", "response_format.json_schema.schema.properties.age: 'multipleOf' is not supported"},
      {R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"$ref":"http://x/y"}}})",
       "response_format.json_schema.schema", "$ref"},
      {R"("response_format":{"type":"json_schema","json_schema":{"name":"x","bogus":1}})",
       "response_format.json_schema.bogus", "bogus"},
      {R"("response_format":{"type":"json_object","schema":{}})", "response_format.schema", "schema"},
      {R"("structured_outputs":{"regex":"(a"})", "structured_outputs.regex", ""},
      {R"("structured_outputs":{"choice":[]})", "structured_outputs.choice", ""},
      {R"("structured_outputs":{"grammar":"root ::= undefined-rule"})", "structured_outputs.grammar", "undefined-rule"},
      {R"("structured_outputs":{"regex":"a","choice":["a"]})", "structured_outputs", "one of"},
      {R"("structured_outputs":{"whitespace_pattern":" "})", "structured_outputs.whitespace_pattern", ""},
      {R"("structured_outputs":{"json":{"not":{}}})", "structured_outputs.json", "'not' is not supported"},
      {R"("response_format":{"type":"json_object"},"structured_outputs":{"regex":"a"})", "structured_outputs", "not both"},
  };
  for (const Case& c : cases) {
    const ApiError e = Bad("{" + kMsgs + "," + c.body + "}");
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.message;
    EXPECT_NE(e.message.find(c.says), std::string::npos) << c.body << " -> " << e.message;
  }
}

const std::string kTools = R"("tools":[{"type":"function","function":{"name":"get_weather","description":"d",
    "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
    {"type":"function","function":{"name":"now"}}])";

TEST(OpenAiTools, ToolsAndChoices) {
  auto a = Ok("{" + kMsgs + "," + kTools + "}");
  ASSERT_EQ(a.spec.tool_use.tools.size(), 2u);
  EXPECT_EQ(a.spec.tool_use.choice, router::ToolChoice::kAuto);
  EXPECT_EQ(a.spec.tool_use.tools[0].name, "get_weather");
  EXPECT_TRUE(a.spec.tools.is_array());
  EXPECT_FALSE(a.spec.constrained());
  auto req = Ok("{" + kMsgs + "," + kTools + R"(,"tool_choice":"required","parallel_tool_calls":false})");
  EXPECT_EQ(req.spec.tool_use.choice, router::ToolChoice::kRequired);
  EXPECT_FALSE(req.spec.tool_use.parallel);
  EXPECT_TRUE(req.spec.constrained());
  auto named = Ok("{" + kMsgs + "," + kTools + R"(,"tool_choice":{"type":"function","function":{"name":"now"}}})");
  EXPECT_EQ(named.spec.tool_use.choice, router::ToolChoice::kFunction);
  EXPECT_EQ(named.spec.tool_use.function, "now");
  auto none = Ok("{" + kMsgs + "," + kTools + R"(,"tool_choice":"none"})");
  EXPECT_EQ(none.spec.tool_use.choice, router::ToolChoice::kNone);
  EXPECT_TRUE(none.spec.tools.is_array());  // still passed to the template
  Ok("{" + kMsgs + R"(,"tool_choice":"none"})");
  // strict tools pass where the grammar enforces their arguments, and where no call is made
  const std::string strict = R"("tools":[{"type":"function","function":{"name":"a","strict":true,
      "parameters":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}}}])";
  EXPECT_TRUE(Ok("{" + kMsgs + "," + strict + R"(,"tool_choice":"required"})").spec.constrained());
  EXPECT_TRUE(Ok("{" + kMsgs + "," + strict + R"(,"tool_choice":{"type":"function","function":{"name":"a"}}})").spec.constrained());
  Ok("{" + kMsgs + "," + strict + R"(,"tool_choice":"none"})");
  Ok("{" + kMsgs + R"(,"tools":[{"type":"function","function":{"name":"a","strict":false}}]})");
}

TEST(OpenAiTools, InconsistentRequestsGet400) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("tool_choice":{"type":"function","function":{"name":"now"}})", "tool_choice"},
      {R"("tool_choice":"required")", "tool_choice"},
      {R"("parallel_tool_calls":true)", "parallel_tool_calls"},
      {kTools + R"(,"tool_choice":{"type":"function","function":{"name":"other"}})", "tool_choice.function.name"},
      {kTools + R"(,"tool_choice":{})", "tool_choice"},
      {kTools + R"(,"tool_choice":"sometimes")", "tool_choice"},
      {kTools + R"(,"tool_choice":{"type":"function"})", "tool_choice.function.name"},
      {R"("tools":[])", "tools"},
      {R"("tools":[{"type":"code_interpreter"}])", "tools[0].type"},
      {R"("tools":[{"type":"function","function":{"name":"a b"}}])", "tools[0].function.name"},
      {R"("tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"a"}}])", "tools"},
      {R"("tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object","properties":{"x":{"not":{}}}}}}])",
       "tools"},
      {R"("tools":[{"type":"function","function":{"name":"a","bogus":1}}])", "tools[0].function.bogus"},
      {kTools + R"(,"tool_choice":"required","response_format":{"type":"json_object"})", "response_format"},
      // strict arguments are enforced only when calls are forced: under auto it would be ignored
      {R"("tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b","strict":true}}])",
       "tools[1].function.strict"},
      {R"("tools":[{"type":"function","function":{"name":"a","strict":true}}],"tool_choice":"auto")", "tools[0].function.strict"},
      {R"("tools":[{"type":"function","function":{"name":"a","strict":1}}],"tool_choice":"required")", "tools[0].function.strict"},
  };
  for (const auto& [fields, param] : cases) {
    const ApiError e = Bad("{" + kMsgs + "," + fields + "}");
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, param) << fields << " -> " << e.message;
  }
  const ApiError schema = Bad("{" + kMsgs + R"(,"tools":[{"type":"function","function":{"name":"a","parameters":
      {"type":"object","properties":{"x":{"not":{}}}}}}]})");
  EXPECT_NE(schema.message.find("tools[0].function.parameters"), std::string::npos) << schema.message;
}

TEST(OpenAiTools, ToolMessagesInTheHistory) {
  auto r = Ok(R"({"model":"m","messages":[{"role":"user","content":"weather?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
        "function":{"name":"get_weather","arguments":"{\"city\": \"Moscow\"}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"cold"}],)" + kTools + "}");
  const auto& m = r.spec.messages;
  EXPECT_EQ(m[1]["content"], "");
  // Templates get the arguments as an object (tool_call.function.arguments | tojson).
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["arguments"]["city"], "Moscow");
  EXPECT_EQ(m[2]["tool_call_id"], "call_1");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{oops"}}]})",
       "messages[0].tool_calls[0].function.arguments"},
      {R"({"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f"}}]})", "messages[0].tool_calls[0].id"},
      {R"({"role":"assistant","tool_calls":{}})", "messages[0].tool_calls"},
      {R"({"role":"user","content":"x","tool_calls":[]})", "messages[0].tool_calls"},
      {R"({"role":"tool","tool_call_id":3,"content":"x"})", "messages[0].tool_call_id"},
      {R"({"role":"tool","tool_call_id":"c"})", "messages[0].content"},
  };
  for (const auto& [msg, param] : bad) {
    const ApiError e = Bad(R"({"model":"m","messages":[)" + msg + "]}");
    EXPECT_EQ(e.param, param) << msg << " -> " << e.message;
  }
}

TEST(OpenAiConformance, SeedMustBeSigned64Bit) {
  EXPECT_EQ(*Ok("{" + kPrompt + R"(,"seed":-5})", ApiKind::kCompletion).spec.sampling.seed, static_cast<uint64_t>(-5));
  Ok("{" + kPrompt + R"(,"seed":9223372036854775807})", ApiKind::kCompletion);
  Ok("{" + kPrompt + R"(,"seed":-9223372036854775808})", ApiKind::kCompletion);
  for (const char* seed : {"9223372036854775808", "18446744073709551615", "1e30", "-1e30"}) {
    const ApiError e = Bad("{" + kPrompt + R"(,"seed":)" + seed + "}", ApiKind::kCompletion);
    EXPECT_EQ(e.param, "seed") << seed;
  }
}

TEST(OpenAiConformance, ContinuousUsageStats) {
  auto r = Ok("{" + kPrompt + R"(,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}})",
              ApiKind::kCompletion);
  EXPECT_TRUE(r.continuous_usage);
  EXPECT_EQ(Bad("{" + kPrompt + R"(,"stream":true,"stream_options":{"continuous_usage_stats":true}})", ApiKind::kCompletion).param,
            "stream_options.continuous_usage_stats");
  EXPECT_EQ(Bad("{" + kPrompt + R"(,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":1}})",
                ApiKind::kCompletion).param, "stream_options.continuous_usage_stats");
}

TEST(OpenAiConformance, EchoAndParseSpecial) {
  auto r = Ok("{" + kPrompt + R"(,"echo":true,"logprobs":2,"parse_special":false})", ApiKind::kCompletion);
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(r.spec.prompt_logprobs, 2);
  EXPECT_FALSE(r.spec.parse_special);
  EXPECT_TRUE(r.parse_special_given);
  auto plain = Ok("{" + kPrompt + R"(,"echo":true})", ApiKind::kCompletion);
  EXPECT_EQ(plain.spec.prompt_logprobs, -1);
  EXPECT_FALSE(plain.parse_special_given);
  EXPECT_EQ(Bad("{" + kPrompt + R"(,"echo":1})", ApiKind::kCompletion).param, "echo");
  EXPECT_EQ(Bad("{" + kMsgs + R"(,"echo":true})").param, "echo");  // chat has no echo
}

// Fields whose values tarmac cannot honour are 400s, not accepted and ignored.
TEST(OpenAiConformance, InertFieldsTakeOnlyValuesThatChangeNothing) {
  Ok("{" + kMsgs + R"(,"store":false,"metadata":{"a":"b"},"service_tier":"auto","modalities":["text"],"user":"u"})");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"("store":true)", "store"},
      {R"("metadata":{"a":1})", "metadata"},
      {R"("service_tier":"flex")", "service_tier"},
      {R"("reasoning_effort":"low")", "reasoning_effort"},
      {R"("modalities":["text","audio"])", "modalities"},
  };
  for (const auto& [field, param] : bad) EXPECT_EQ(Bad("{" + kMsgs + "," + field + "}").param, param) << field;
}

}  // namespace
}  // namespace tarmac::server
