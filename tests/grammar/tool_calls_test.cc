#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "grammar/tool_call_format.h"
#include "grammar/tool_call_grammar.h"
#include "grammar/tool_call_parser.h"
#include "grammar_test_util.h"

namespace tarmac::grammar {
namespace {

struct Expected {
  std::string name;
  std::string arguments;
};

void ExpectCalls(const ParsedToolCalls& got, const std::string& content, const std::vector<Expected>& calls,
                 const std::string& what) {
  EXPECT_EQ(got.content, content) << what;
  ASSERT_EQ(got.tool_calls.size(), calls.size()) << what;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(got.tool_calls[i].name, calls[i].name) << what << " call " << i;
    EXPECT_EQ(got.tool_calls[i].arguments, calls[i].arguments) << what << " call " << i;
    EXPECT_EQ(got.tool_calls[i].id, "call_" + std::to_string(i)) << what;
  }
}

// Streams text in random chunks: deltas are shaped as OpenAI streams them and add up to the
// non-streamed result.
void ExpectStreamingAgrees(const std::string& text, ToolCallFormat format, const ToolCallParserOptions& opts = {}) {
  const ParsedToolCalls whole = ParseToolCalls(text, format, opts);
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 30; ++trial) {
    ToolCallStreamParser parser(format, opts);
    ParsedToolCalls streamed;
    std::vector<bool> started;
    auto check = [&](const ToolCallEvents& ev) {
      for (const ToolCallDelta& d : ev.tool_calls) {
        if (d.index >= static_cast<int32_t>(started.size())) {
          ASSERT_EQ(d.index, static_cast<int32_t>(started.size())) << "calls start in order";
          started.push_back(true);
          EXPECT_FALSE(d.id.empty());
          EXPECT_FALSE(d.name.empty());
          EXPECT_TRUE(d.arguments.empty()) << "the first delta carries no arguments";
        } else {
          EXPECT_TRUE(d.id.empty() && d.name.empty()) << "later deltas carry arguments only";
        }
      }
      AccumulateToolCallEvents(ev, &streamed);
    };
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t n = trial == 0 ? 1 : 1 + rng() % 7;
      check(parser.Feed(std::string_view(text).substr(pos, n)));
      pos += n;
    }
    check(parser.Finish());
    EXPECT_EQ(streamed.content, whole.content) << text;
    ASSERT_EQ(streamed.tool_calls.size(), whole.tool_calls.size()) << text;
    for (size_t i = 0; i < whole.tool_calls.size(); ++i) {
      EXPECT_EQ(streamed.tool_calls[i].id, whole.tool_calls[i].id);
      EXPECT_EQ(streamed.tool_calls[i].name, whole.tool_calls[i].name);
      EXPECT_EQ(streamed.tool_calls[i].arguments, whole.tool_calls[i].arguments) << text;
    }
  }
}

TEST(GrammarToolCallsTest, Hermes) {
  const auto f = ToolCallFormat::kHermes;
  const std::string two =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": [1, 2]}}\n"
      "</tool_call>\n<tool_call>\n{\"arguments\": {\"q\": \"a}b\\\"c\"}, \"name\": \"search\"}\n</tool_call>";
  ExpectCalls(ParseToolCalls(two, f), "Let me check.\n",
              {{"get_weather", "{\"city\": \"Paris\", \"days\": [1, 2]}"}, {"search", "{\"q\": \"a}b\\\"c\"}"}}, "two");
  ExpectCalls(ParseToolCalls("<tool_call>{\"name\":\"f\",\"arguments\":\"{\\\"x\\\": 1}\"}</tool_call>", f), "",
              {{"f", "{\"x\": 1}"}}, "arguments as a JSON string are decoded");
  ExpectCalls(ParseToolCalls("<tool_call>{\"name\": \"f\"}</tool_call> done", f), "done", {{"f", "{}"}},
              "no arguments");
  ExpectCalls(ParseToolCalls("a <tool_call> not json </tool_call> b", f), "a <tool_call> not json </tool_call> b", {},
              "a block that is not a call is content");
  ExpectCalls(ParseToolCalls("<tool_call>{\"arguments\": {}}</tool_call>", f), "<tool_call>{\"arguments\": {}}</tool_call>",
              {}, "an object without a name is content");
  ExpectCalls(ParseToolCalls("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}, oops}</tool_call>after", f),
              "after", {{"f", "{\"a\": 1}"}}, "a broken rest of a started call is dropped");
  ExpectCalls(ParseToolCalls("x <tool_c", f), "x <tool_c", {}, "a partial marker at the end is content");
  ExpectCalls(ParseToolCalls("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1", f), "", {{"f", "{\"a\": [1"}},
              "cut by max_tokens: the partial arguments stay");
  for (const std::string& t : {two, std::string("a <tool_call> not json </tool_call> b"), std::string("x <tool_c"),
                               std::string("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}, oops}</tool_call>z")})
    ExpectStreamingAgrees(t, f);
}

TEST(GrammarToolCallsTest, HermesHoldsBackOnlyPossibleMarkers) {
  ToolCallStreamParser p(ToolCallFormat::kHermes);
  EXPECT_EQ(p.Feed("Hello <to").content, "Hello ");
  EXPECT_EQ(p.Feed("day> is").content, "<today> is");
  const ToolCallEvents ev = p.Feed(" <tool_call>{\"name\": \"f\", \"arguments\": {\"a\"");
  EXPECT_EQ(ev.content, " ");
  ASSERT_EQ(ev.tool_calls.size(), 2u);
  EXPECT_EQ(ev.tool_calls[0].name, "f");
  EXPECT_EQ(ev.tool_calls[1].arguments, "{\"a\"");
  EXPECT_EQ(p.Feed(": 1}}</tool_call>").tool_calls[0].arguments, ": 1}");
}

TEST(GrammarToolCallsTest, Llama3Json) {
  const auto f = ToolCallFormat::kLlama3Json;
  ExpectCalls(ParseToolCalls("<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", f), "",
              {{"get_weather", "{\"city\": \"Oslo\"}"}}, "python tag");
  ExpectCalls(ParseToolCalls("  {\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"x\": null}}", f),
              "", {{"a", "{}"}, {"b", "{\"x\": null}"}}, "two calls");
  ExpectCalls(ParseToolCalls("The weather is {\"name\": \"x\"}", f), "The weather is {\"name\": \"x\"}", {}, "text first");
  ExpectCalls(ParseToolCalls("{\"answer\": 42}", f), "{\"answer\": 42}", {}, "a JSON answer without a name");
  ExpectCalls(ParseToolCalls("<|python", f), "<|python", {}, "partial tag");
  ExpectStreamingAgrees("<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", f);
  ExpectStreamingAgrees("{\"name\": \"a\", \"parameters\": {}};{\"name\": \"b\", \"parameters\": {\"x\": [null]}}", f);
  ExpectStreamingAgrees("{\"answer\": 42} and more", f);
}

TEST(GrammarToolCallsTest, Mistral) {
  const auto f = ToolCallFormat::kMistral;
  const std::string list =
      "Sure. [TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}, "
      "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}]";
  ExpectCalls(ParseToolCalls(list, f), "Sure. ", {{"get_weather", "{\"city\": \"Rome\"}"}, {"get_time", "{\"tz\": \"CET\"}"}},
              "list");
  ExpectCalls(ParseToolCalls("[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}[TOOL_CALLS]now[ARGS]{}", f), "",
              {{"get_weather", "{\"city\": \"Rome\"}"}, {"now", "{}"}}, "v11");
  ExpectCalls(ParseToolCalls("[TOOL_CALLS] oops", f), "[TOOL_CALLS] oops", {}, "not a list");
  ToolCallParserOptions forced;
  forced.forced = true;
  ExpectCalls(ParseToolCalls("[{\"name\": \"f\", \"arguments\": {\"a\": 1}}]", f, forced), "", {{"f", "{\"a\": 1}"}},
              "forced: no marker");
  ExpectStreamingAgrees(list, f);
  ExpectStreamingAgrees("[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}", f);
  ExpectStreamingAgrees("[{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"arguments\": {}}]", f, forced);
}

TEST(GrammarToolCallsTest, NoFormatIsAllContent) {
  const std::string text = "<tool_call>{\"name\": \"f\"}</tool_call>";
  ExpectCalls(ParseToolCalls(text, ToolCallFormat::kNone), text, {}, "none");
}

TEST(GrammarToolCallsTest, FormatNamesAndCustomIds) {
  for (auto f : {ToolCallFormat::kNone, ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json, ToolCallFormat::kMistral})
    EXPECT_EQ(*ParseToolCallFormat(ToolCallFormatName(f)), f);
  EXPECT_NE(ParseToolCallFormat("pythonic").status().message().find("'pythonic' is unknown"), std::string::npos);
  ToolCallParserOptions opts;
  opts.make_id = [](int32_t i) { return "chatcmpl-tool-" + std::to_string(100 + i); };
  auto got = ParseToolCalls("<tool_call>{\"name\": \"f\"}</tool_call>", ToolCallFormat::kHermes, opts);
  ASSERT_EQ(got.tool_calls.size(), 1u);
  EXPECT_EQ(got.tool_calls[0].id, "chatcmpl-tool-100");
}

TEST(GrammarToolCallsTest, FormatFromChatTemplates) {
  EXPECT_EQ(DetectToolCallFormat("{%- for t in tools %}<tool_call>\n{\"name\": <function-name>, \"arguments\": "
                                 "<args-json-object>}\n</tool_call>{% endfor %}"),
            ToolCallFormat::kHermes);
  EXPECT_EQ(DetectToolCallFormat("{{ '[AVAILABLE_TOOLS]' }}{{ '[TOOL_CALLS]' + tool_calls|tojson }}"),
            ToolCallFormat::kMistral);
  EXPECT_EQ(DetectToolCallFormat("{{ '<|im_start|>' + message['role'] }}"), ToolCallFormat::kNone);
  const std::filesystem::path dir = TARMAC_SHARED_DIR "/data/chat-templates";
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << dir << " absent";
  auto read = [&](const char* name) {
    std::ifstream in(dir / name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  EXPECT_EQ(DetectToolCallFormat(read("llama3-instruct-2.jinja")), ToolCallFormat::kLlama3Json);
  // Qwen3-Coder's and GLM's <tool_call> blocks hold XML, not JSON: not a supported format.
  EXPECT_EQ(DetectToolCallFormat(read("qwen38.jinja")), ToolCallFormat::kNone);
  EXPECT_EQ(DetectToolCallFormat(read("laguna_v2.jinja")), ToolCallFormat::kNone);
  EXPECT_EQ(DetectToolCallFormat(read("chatml-1.jinja")), ToolCallFormat::kNone);
  EXPECT_EQ(DetectToolCallFormat(read("mistral-instruct-1.jinja")), ToolCallFormat::kNone);
}

const std::vector<ToolSpec>& Tools() {
  static const std::vector<ToolSpec> tools = {
      {"get_weather", nlohmann::ordered_json::parse(R"({"type":"object","properties":{"city":{"type":"string","maxLength":8},
        "unit":{"enum":["c","f"]}},"required":["city"],"additionalProperties":false})")},
      {"add", nlohmann::ordered_json::parse(R"({"type":"object","properties":{"a":{"type":"integer","minimum":0,"maximum":99},
        "b":{"type":"integer","minimum":0,"maximum":99}},"required":["a","b"]})")},
      {"ping", nullptr}};
  return tools;
}

TEST(GrammarToolCallsTest, ForcedGrammarErrors) {
  EXPECT_NE(ForcedToolCallGrammar(ToolCallFormat::kNone, Tools()).status().message().find("needs a tool-call format"),
            std::string::npos);
  EXPECT_NE(ForcedToolCallGrammar(ToolCallFormat::kHermes, {}).status().message().find("needs 'tools'"), std::string::npos);
  ForcedToolCallOptions named;
  named.function = "nope";
  EXPECT_NE(ForcedToolCallGrammar(ToolCallFormat::kHermes, Tools(), named).status().message().find("'nope' is not in"),
            std::string::npos);
  std::vector<ToolSpec> bad = {{"f", nlohmann::ordered_json::parse(R"({"properties":{"x":{"not":{}}}})")}};
  EXPECT_NE(ForcedToolCallGrammar(ToolCallFormat::kHermes, bad).status().message().find(
                "tools[0].function.parameters.properties.x: 'not' is not supported"),
            std::string::npos);
}

// Random walks under the forcing grammar, parsed back: every output is one or more calls of
// the allowed tools whose arguments validate (python3-jsonschema) against the tool's schema.
TEST(GrammarToolCallsTest, ForcedGrammarOutputsParseToValidCalls) {
  const testing::LoadedVocab* vocab = testing::Vocab(testing::kWp11m);
  if (vocab == nullptr) GTEST_SKIP() << testing::kWp11m << " absent";
  const std::string python = testing::PythonWithJsonschema();
  nlohmann::json oracle_in = nlohmann::json::array();
  std::vector<std::string> labels;
  std::mt19937_64 rng(99);
  for (auto format : {ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json, ToolCallFormat::kMistral}) {
    for (int variant = 0; variant < 3; ++variant) {
      ForcedToolCallOptions opts;
      opts.parallel = variant != 1;
      if (variant == 2) opts.function = "add";
      auto g = ForcedToolCallGrammar(format, Tools(), opts);
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      auto compiled = testing::MustCompile(*g, vocab->table);
      ASSERT_NE(compiled, nullptr);
      ToolCallParserOptions popts;
      popts.forced = true;
      for (int w = 0; w < 12; ++w) {
        GrammarMatcher m(compiled);
        testing::WalkOptions wo;
        wo.max_tokens = 1500;
        wo.check_brute_force = w == 0;
        auto out = testing::RandomWalk(&m, &rng, wo);
        ASSERT_TRUE(out.has_value()) << ToolCallFormatName(format);
        const ParsedToolCalls parsed = ParseToolCalls(*out, format, popts);
        EXPECT_TRUE(parsed.content.empty()) << *out;
        ASSERT_FALSE(parsed.tool_calls.empty()) << *out;
        if (!opts.parallel) {
          EXPECT_EQ(parsed.tool_calls.size(), 1u) << *out;
        }
        for (const ToolCall& call : parsed.tool_calls) {
          auto tool = std::find_if(Tools().begin(), Tools().end(), [&](const ToolSpec& t) { return t.name == call.name; });
          ASSERT_NE(tool, Tools().end()) << call.name;
          if (opts.function) {
            EXPECT_EQ(call.name, *opts.function);
          }
          std::string hex;
          for (unsigned char c : call.arguments) hex += fmt::format("{:02x}", c);
          nlohmann::json schema = tool->parameters.is_null() ? nlohmann::json{{"type", "object"}}
                                                             : nlohmann::json::parse(tool->parameters.dump());
          oracle_in.push_back({{"schema", schema}, {"instances", {hex}}});
          labels.push_back(std::string(ToolCallFormatName(format)) + ": " + *out);
        }
      }
    }
  }
  if (python.empty()) GTEST_SKIP() << "python3 with jsonschema not available: arguments not validated";
  const std::string in_path = std::string(TARMAC_BINARY_DIR) + "/grammar_tool_oracle_in.json";
  const std::string out_path = std::string(TARMAC_BINARY_DIR) + "/grammar_tool_oracle_out.json";
  std::ofstream(in_path) << oracle_in.dump();
  const std::string cmd =
      python + " '" TARMAC_SOURCE_DIR "/tests/grammar/validate_json.py' '" + in_path + "' '" + out_path + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(out_path);
  const auto verdicts = nlohmann::json::parse(f);
  ASSERT_EQ(verdicts.size(), labels.size());
  for (size_t i = 0; i < labels.size(); ++i)
    EXPECT_TRUE(verdicts[i][0]["valid"].get<bool>()) << labels[i] << ": " << verdicts[i][0]["error"];
}

}  // namespace
}  // namespace tarmac::grammar
