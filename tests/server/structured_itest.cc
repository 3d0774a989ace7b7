// Structured outputs, tool calls and the conformance fixes of issue 25 against the real
// `tarmac serve`: json_schema / json_object / regex / choice / GBNF outputs that parse and
// match (or end with "length"), streamed == non-streamed, forced tool calls parsed into
// tool_calls (streamed deltas adding up to the same), the 400s, a constrained request through a
// cascade route answered by its large model; 405 with Allow, a 413 that reaches a client still
// sending, CORS preflight and headers, echo with prompt logprobs, the sampled token in
// completions top_logprobs, usage in every chunk, the seed range, special-token parsing.
#include <regex>

#include <nlohmann/json.hpp>

#include "server_test_util.h"

namespace tarmac::testing {
namespace {

using Json = nlohmann::json;
const std::string kModel = "wp-11m-f16";
const std::string kChat = "/v1/chat/completions", kComp = "/v1/completions";

class StructuredServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess({"--check-integrity", "--tool-call-parser", "hermes", "--spec", "draft", "--cors-origin",
                                 "http://app.example", "--max-body-bytes", "65536"},
                                "/tmp/tarmac-structured-itest-" + std::to_string(::getpid()) + ".log");
    ASSERT_TRUE(server_->WaitReady()) << "server did not become ready";
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static int port() { return server_->port(); }
  static ServerProcess* server_;
};
ServerProcess* StructuredServerTest::server_ = nullptr;

Json Messages(const std::string& text) { return Json::array({{{"role", "user"}, {"content", text}}}); }

Json PostJson(const std::string& path, const Json& body, int port, int want = 200) {
  HttpResponse r = Post(port, path, body.dump());
  EXPECT_EQ(r.status, want) << body.dump() << " -> " << r.body;
  return Json::parse(r.body, nullptr, false);
}

std::vector<Json> Sse(const std::string& body) {
  std::vector<Json> out;
  size_t p = 0;
  while ((p = body.find("data: ", p)) != std::string::npos) {
    const size_t e = body.find("\n\n", p);
    const std::string d = body.substr(p + 6, e - p - 6);
    if (d != "[DONE]") out.push_back(Json::parse(d));
    p = e;
  }
  return out;
}

// Chat content (or completion text) and tool calls of a streamed response, as a client adds
// the deltas up.
struct Streamed {
  std::string text;
  std::string finish;
  Json tool_calls = Json::array();
  std::vector<Json> chunks;
};
Streamed Stream(const std::string& path, Json body, int port) {
  body["stream"] = true;
  HttpResponse r = Post(port, path, body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  Streamed s;
  s.chunks = Sse(r.body);
  for (const Json& ch : s.chunks) {
    for (const Json& c : ch["choices"]) {
      if (!c["finish_reason"].is_null()) s.finish = c["finish_reason"];
      if (!c.contains("delta")) {
        s.text += c["text"].get<std::string>();
        continue;
      }
      const Json& d = c["delta"];
      if (d.contains("content") && d["content"].is_string()) s.text += d["content"].get<std::string>();
      for (const Json& tc : d.value("tool_calls", Json::array())) {
        const size_t i = tc["index"];
        if (s.tool_calls.size() <= i) s.tool_calls.push_back({{"id", ""}, {"type", "function"}, {"function", {{"name", ""}, {"arguments", ""}}}});
        Json& acc = s.tool_calls[i];
        if (tc.contains("id")) acc["id"] = tc["id"];
        if (tc["function"].contains("name")) acc["function"]["name"] = tc["function"]["name"];
        acc["function"]["arguments"] = acc["function"]["arguments"].get<std::string>() + tc["function"]["arguments"].get<std::string>();
      }
    }
  }
  return s;
}

const Json kPersonSchema = Json::parse(R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 10},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "side": {"enum": ["french", "russian"]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 2}},
  "required": ["name", "age", "side"], "additionalProperties": false})");

void ExpectPerson(const std::string& text) {
  const Json p = Json::parse(text, nullptr, false);
  ASSERT_FALSE(p.is_discarded()) << text;
  ASSERT_TRUE(p.is_object()) << text;
  EXPECT_TRUE(p["name"].is_string() && p["name"].get<std::string>().size() <= 10) << text;
  EXPECT_TRUE(p["age"].is_number_integer() && p["age"] >= 0 && p["age"] <= 120) << text;
  EXPECT_TRUE(p["side"] == "french" || p["side"] == "russian") << text;
  for (auto it = p.begin(); it != p.end(); ++it)
    EXPECT_TRUE(it.key() == "name" || it.key() == "age" || it.key() == "side" || it.key() == "tags") << text;
}

TEST_F(StructuredServerTest, JsonSchemaOnChatAndCompletionsParsesAndValidates) {
  const Json rf = {{"type", "json_schema"}, {"json_schema", {{"name", "person"}, {"schema", kPersonSchema}, {"strict", true}}}};
  int stopped = 0;
  for (int seed = 0; seed < 6; ++seed) {
    for (const std::string& path : {kChat, kComp}) {
      Json body = {{"model", kModel}, {"max_tokens", 300}, {"seed", seed}, {"temperature", seed % 2 ? 0.8 : 0.0}, {"response_format", rf}};
      if (path == kChat) body["messages"] = Messages("Describe Pierre as JSON.");
      else body["prompt"] = "Pierre, as JSON:";
      const Json r = PostJson(path, body, port());
      const Json& c = r["choices"][0];
      const std::string text = path == kChat ? c["message"]["content"].get<std::string>() : c["text"].get<std::string>();
      if (c["finish_reason"] == "length") continue;
      EXPECT_EQ(c["finish_reason"], "stop");
      ExpectPerson(text);
      ++stopped;
      // Streamed output is the same text.
      const Streamed s = Stream(path, body, port());
      EXPECT_EQ(s.text, text) << path << " seed " << seed;
      EXPECT_EQ(s.finish, c["finish_reason"]);
    }
  }
  EXPECT_GE(stopped, 6);
}

TEST_F(StructuredServerTest, OtherConstraintForms) {
  struct Form {
    Json field;  // merged into the body
    std::string path;
    std::regex expect;
  };
  const std::vector<Form> forms = {
      {{{"response_format", {{"type", "json_object"}}}}, kChat, std::regex(R"(^\{[\s\S]*\}$)")},
      {{{"structured_outputs", {{"regex", "[0-9]{4}-[0-9]{2}-[0-9]{2}"}}}}, kComp, std::regex(R"(^[0-9]{4}-[0-9]{2}-[0-9]{2}$)")},
      {{{"structured_outputs", {{"choice", {"Moscow", "Petersburg", "Bald Hills"}}}}}, kChat,
       std::regex(R"(^(Moscow|Petersburg|Bald Hills)$)")},
      {{{"structured_outputs", {{"grammar", "root ::= (\"yes\" | \"no\") \", \" [a-z]{2,8} \".\""}}}}, kComp,
       std::regex(R"(^(yes|no), [a-z]{2,8}\.$)")},
  };
  for (const Form& f : forms) {
    for (int seed : {1, 2}) {
      Json body = {{"model", kModel}, {"max_tokens", 200}, {"seed", seed}, {"temperature", 0.9}};
      if (f.path == kChat) body["messages"] = Messages("Answer.");
      else body["prompt"] = "Answer:";
      body.update(f.field);
      const Json r = PostJson(f.path, body, port());
      const Json& c = r["choices"][0];
      const std::string text = f.path == kChat ? c["message"]["content"].get<std::string>() : c["text"].get<std::string>();
      if (c["finish_reason"] == "length") continue;
      EXPECT_TRUE(std::regex_match(text, f.expect)) << f.field.dump() << " -> " << text;
      if (f.field.contains("response_format")) {
        EXPECT_FALSE(Json::parse(text, nullptr, false).is_discarded()) << text;
      }
    }
  }
}

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"enum": ["Moscow", "Vienna"]},
      "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "days"]}}},
  {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}])");

TEST_F(StructuredServerTest, ForcedToolCallsStreamedAndNot) {
  int single = 0;
  for (const Json& choice : {Json("required"), Json{{"type", "function"}, {"function", {{"name", "get_weather"}}}}}) {
    for (bool parallel : {true, false}) {
      Json body = {{"model", kModel}, {"messages", Messages("Weather in Moscow?")}, {"tools", kTools}, {"tool_choice", choice},
                   {"parallel_tool_calls", parallel}, {"max_tokens", 200}, {"seed", 3}, {"temperature", 0.7}};
      const Json r = PostJson(kChat, body, port());
      const Json& c = r["choices"][0];
      const Json& calls = c["message"]["tool_calls"];
      if (c["finish_reason"] == "length") {  // a weak model allowed several calls may go on calling
        EXPECT_TRUE(parallel) << r.dump();
        continue;
      }
      single += parallel ? 0 : 1;
      ASSERT_TRUE(calls.is_array() && !calls.empty()) << r.dump();
      EXPECT_EQ(c["finish_reason"], choice.is_string() ? "tool_calls" : "stop");
      if (!parallel) {
        EXPECT_EQ(calls.size(), 1u);
      }
      for (const Json& call : calls) {
        EXPECT_EQ(call["type"], "function");
        EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
        const std::string name = call["function"]["name"];
        if (choice.is_object()) {
          EXPECT_EQ(name, "get_weather");
        }
        const Json args = Json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
        ASSERT_TRUE(args.is_object()) << call.dump();
        if (name == "get_weather") {
          EXPECT_TRUE(args["city"] == "Moscow" || args["city"] == "Vienna") << args.dump();
          EXPECT_TRUE(args["days"].is_number_integer() && args["days"] >= 1 && args["days"] <= 7) << args.dump();
        }
      }
      const Streamed s = Stream(kChat, body, port());
      EXPECT_EQ(s.finish, c["finish_reason"]);
      ASSERT_EQ(s.tool_calls.size(), calls.size());
      for (size_t i = 0; i < calls.size(); ++i) {  // ids are per response
        EXPECT_EQ(s.tool_calls[i]["function"], calls[i]["function"]) << i;
        EXPECT_EQ(s.tool_calls[i]["id"].get<std::string>().rfind("call_", 0), 0u);
      }
    }
  }
  EXPECT_EQ(single, 2);  // without parallel_tool_calls one call ends the output
}

TEST_F(StructuredServerTest, ToolHistoryIsAccepted) {
  const Json msgs = Json::parse(R"([{"role": "user", "content": "Weather in Moscow?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Moscow\", \"days\": 1}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "-5 C"}])");
  const Json r = PostJson(kChat, {{"model", kModel}, {"messages", msgs}, {"tools", kTools}, {"max_tokens", 8}}, port());
  EXPECT_TRUE(r["choices"][0]["message"]["content"].is_string()) << r.dump();
}

TEST_F(StructuredServerTest, BadRequestsName400) {
  const std::vector<std::pair<Json, std::string>> cases = {
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", {{"type", "object"},
           {"properties", {{"a", {{"type", "number"}, {"multipleOf", 2}}}}}}}}}}}}, "response_format.json_schema.schema"},
      {{{"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}}, "tool_choice"},
      {{{"tools", kTools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "missing"}}}}}}, "tool_choice.function.name"},
      {{{"tools", kTools}, {"tool_choice", Json::object()}}, "tool_choice"},
      {{{"structured_outputs", {{"structural_tag", "x"}}}}, "structured_outputs.structural_tag"},
  };
  for (const auto& [fields, param] : cases) {
    Json body = {{"model", kModel}, {"messages", Messages("hi")}, {"max_tokens", 4}};
    body.update(fields);
    const Json e = PostJson(kChat, body, port(), 400);
    EXPECT_EQ(e["error"]["param"], param) << body.dump() << " -> " << e.dump();
  }
}

TEST_F(StructuredServerTest, MethodNotAllowedSaysAllow) {
  HttpResponse r = Get(port(), kComp);
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.Header("Allow"), "POST, OPTIONS");
  HttpResponse m = RawExchange(port(), Request("DELETE", "/v1/models", ""));
  EXPECT_EQ(m.status, 405);
  EXPECT_EQ(m.Header("Allow"), "GET, HEAD, OPTIONS");
  // The caches' endpoints (issue 20) say theirs too.
  HttpResponse c = RawExchange(port(), Request("POST", "/v1/cache/tool/k", "{}"));
  EXPECT_EQ(c.status, 405);
  EXPECT_EQ(c.Header("Allow"), "GET, HEAD, PUT, DELETE, OPTIONS");
  HttpResponse s = RawExchange(port(), Request("DELETE", "/v1/sessions/s-1/state", ""));
  EXPECT_EQ(s.status, 405);
  EXPECT_EQ(s.Header("Allow"), "GET, HEAD, PUT, OPTIONS");
}

// A client that sends a whole too-large body before reading gets the 413, not a reset.
TEST_F(StructuredServerTest, TooLargeReachesAClientStillSending) {
  const std::string body(4 << 20, 'x');
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n";
  int fd = Connect(port());
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(SendAll(fd, req + body)) << "the server reset the connection while the body was being sent";
  std::string raw;
  char buf[65536];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) raw.append(buf, static_cast<size_t>(n));
  ::close(fd);
  EXPECT_EQ(ParseResponse(raw).status, 413) << raw.substr(0, 200);
  EXPECT_TRUE(server_->Alive());
}

TEST_F(StructuredServerTest, CorsPreflightAndHeaders) {
  HttpResponse pre = RawExchange(port(), Request("OPTIONS", kChat, "", "Origin: http://app.example\r\n"
                                                 "Access-Control-Request-Method: POST\r\n"
                                                 "Access-Control-Request-Headers: authorization, content-type, x-stainless-os\r\n"));
  EXPECT_EQ(pre.status, 204);
  EXPECT_EQ(pre.Header("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_EQ(pre.Header("Access-Control-Allow-Headers"), "authorization, content-type, x-stainless-os");
  EXPECT_NE(pre.Header("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  HttpResponse r = Post(port(), kComp, Json{{"model", kModel}, {"prompt", "hi"}, {"max_tokens", 2}}.dump(), "Origin: http://app.example\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_EQ(r.Header("Vary"), "Origin");
  EXPECT_EQ(r.Header("Access-Control-Expose-Headers"), "x-tarmac-route, x-tarmac-cache, Retry-After");
  HttpResponse s = Post(port(), kComp, Json{{"model", kModel}, {"prompt", "hi"}, {"max_tokens", 2}, {"stream", true}}.dump(),
                        "Origin: http://app.example\r\n");
  EXPECT_EQ(s.Header("Access-Control-Allow-Origin"), "http://app.example");
  HttpResponse other = Post(port(), kComp, Json{{"model", kModel}, {"prompt", "hi"}, {"max_tokens", 2}}.dump(), "Origin: http://evil.example\r\n");
  EXPECT_EQ(other.Header("Access-Control-Allow-Origin"), "");
  // The caches' endpoints are preflighted with their own methods; a path that is none is not.
  HttpResponse cache_pre = RawExchange(port(), Request("OPTIONS", "/v1/cache/retrieval/q%3D1", "", "Origin: http://app.example\r\n"
                                                       "Access-Control-Request-Method: PUT\r\n"));
  EXPECT_EQ(cache_pre.status, 204);
  EXPECT_EQ(cache_pre.Header("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_EQ(cache_pre.Header("Access-Control-Allow-Methods"), "GET, HEAD, PUT, DELETE, OPTIONS");
  HttpResponse session_pre = RawExchange(port(), Request("OPTIONS", "/v1/sessions/s-1", "", "Origin: http://app.example\r\n"
                                                         "Access-Control-Request-Method: DELETE\r\n"));
  EXPECT_EQ(session_pre.status, 204);
  EXPECT_EQ(session_pre.Header("Access-Control-Allow-Methods"), "DELETE, OPTIONS");
  EXPECT_NE(RawExchange(port(), Request("OPTIONS", "/v1/cache/other", "", "Origin: http://app.example\r\n")).status, 204);
}

TEST_F(StructuredServerTest, EchoWithPromptLogprobs) {
  const std::string prompt = "Prince Andrew looked at";
  Json body = {{"model", kModel}, {"prompt", prompt}, {"max_tokens", 6}, {"temperature", 0}, {"echo", true}, {"logprobs", 2}};
  const Json r = PostJson(kComp, body, port());
  const Json& c = r["choices"][0];
  const std::string text = c["text"];
  EXPECT_EQ(text.rfind(prompt, 0), 0u) << text;
  const Json& lp = c["logprobs"];
  const int prompt_tokens = r["usage"]["prompt_tokens"];
  ASSERT_EQ(lp["tokens"].size(), static_cast<size_t>(prompt_tokens + r["usage"]["completion_tokens"].get<int>()));
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  for (int i = 1; i < static_cast<int>(lp["tokens"].size()); ++i) {
    EXPECT_TRUE(lp["token_logprobs"][i].is_number()) << i;
    EXPECT_TRUE(lp["top_logprobs"][i].contains(lp["tokens"][i].get<std::string>())) << i;
  }
  const Streamed s = Stream(kComp, body, port());
  EXPECT_EQ(s.text, text);
  // Without logprobs: the text only.
  body.erase("logprobs");
  EXPECT_EQ(PostJson(kComp, body, port())["choices"][0]["text"], text);
}

TEST_F(StructuredServerTest, CompletionTopLogprobsHoldTheSampledToken) {
  for (int n : {0, 1}) {
    const Json r = PostJson(kComp, {{"model", kModel}, {"prompt", "Natasha"}, {"max_tokens", 24}, {"temperature", 1.5},
                                    {"seed", 9}, {"logprobs", n}}, port());
    const Json& lp = r["choices"][0]["logprobs"];
    for (size_t i = 0; i < lp["tokens"].size(); ++i) {
      const Json& top = lp["top_logprobs"][i];
      EXPECT_TRUE(top.contains(lp["tokens"][i].get<std::string>())) << i << " " << top.dump();
      if (n == 0) {
        EXPECT_EQ(top.size(), 1u);
      }
      EXPECT_LE(top.size(), static_cast<size_t>(n + 1));
    }
  }
}

TEST_F(StructuredServerTest, ContinuousUsageStats) {
  const Streamed s = Stream(kChat, {{"model", kModel}, {"messages", Messages("hi")}, {"max_tokens", 6},
                                    {"stream_options", {{"include_usage", true}, {"continuous_usage_stats", true}}}}, port());
  ASSERT_GE(s.chunks.size(), 3u);
  int last = -1;
  for (const Json& ch : s.chunks) {
    ASSERT_TRUE(ch["usage"].is_object()) << ch.dump();
    const int done = ch["usage"]["completion_tokens"];
    EXPECT_GE(done, last);
    last = done;
    EXPECT_EQ(ch["usage"]["total_tokens"], ch["usage"]["prompt_tokens"].get<int>() + done);
  }
}

TEST_F(StructuredServerTest, SeedOutsideInt64Is400) {
  HttpResponse r = Post(port(), kComp, R"({"model":")" + kModel + R"(","prompt":"hi","seed":9223372036854775808})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("\"param\":\"seed\""), std::string::npos) << r.body;
}

TEST_F(StructuredServerTest, CompletionPromptsParseSpecialTokens) {
  const std::string text = "Pierre<|endoftext|>Natasha";
  const Json special = PostJson("/tokenize", {{"model", kModel}, {"prompt", text}}, port());
  const Json plain = PostJson("/tokenize", {{"model", kModel}, {"prompt", text}, {"parse_special", false}}, port());
  auto has = [](const Json& t) { return std::find(t["tokens"].begin(), t["tokens"].end(), Json(2047)) != t["tokens"].end(); };
  EXPECT_TRUE(has(special));
  EXPECT_FALSE(has(plain));
  const Json a = PostJson(kComp, {{"model", kModel}, {"prompt", text}, {"max_tokens", 1}}, port());
  const Json b = PostJson(kComp, {{"model", kModel}, {"prompt", text}, {"max_tokens", 1}, {"parse_special", false}}, port());
  EXPECT_EQ(a["usage"]["prompt_tokens"], special["count"]);
  EXPECT_EQ(b["usage"]["prompt_tokens"], plain["count"]);
}

// A server without a tool-call format for its model refuses tool calls it cannot parse, and
// with --no-parse-special keeps special text in prompts as text; without --cors-origin,
// OPTIONS is a 405 and no CORS header is sent.
TEST(StructuredServerDefaults, NoToolFormatNoCorsNoParseSpecial) {
  const std::string log = "/tmp/tarmac-structured-defaults-" + std::to_string(::getpid()) + ".log";
  ServerProcess srv({"--no-parse-special"}, log);
  ASSERT_TRUE(srv.WaitReady()) << Slurp(log);
  const Json e = PostJson(kChat, {{"model", kModel}, {"messages", Messages("hi")}, {"tools", kTools}}, srv.port(), 400);
  EXPECT_EQ(e["error"]["param"], "tool_choice") << e.dump();
  PostJson(kChat, {{"model", kModel}, {"messages", Messages("hi")}, {"tools", kTools}, {"tool_choice", "none"}, {"max_tokens", 2}},
           srv.port());
  const Json t = PostJson("/tokenize", {{"model", kModel}, {"prompt", "a<|endoftext|>"}}, srv.port());
  EXPECT_EQ(std::find(t["tokens"].begin(), t["tokens"].end(), Json(2047)), t["tokens"].end());
  HttpResponse pre = RawExchange(srv.port(), Request("OPTIONS", kChat, "", "Origin: http://app.example\r\n"));
  EXPECT_EQ(pre.status, 405);
  EXPECT_EQ(pre.Header("Allow"), "POST");
  EXPECT_EQ(pre.Header("Access-Control-Allow-Origin"), "");
}

// A constrained request to a cascade route is answered by the cascade's large model.
TEST(StructuredServerRoute, ConstrainedRequestsAreNotCascaded) {
  const std::string dir = "/tmp/tarmac-structured-route-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/tarmac.yaml") << "models:\n  - {path: " TARMAC_SOURCE_DIR "/models/wp-1m-f16.gguf, name: small}\n"
                                      << "  - {path: " << kWp11m << ", name: large}\n"
                                      << "routes:\n  - {name: auto, baseline: large, policy: {cascade: "
                                         "{small: small, large: large, k: 4, min_mean_logprob: -0.01}}}\n";
  ServerProcess srv({"--config", dir + "/tarmac.yaml"}, dir + "/server.log", false);
  ASSERT_TRUE(srv.WaitReady()) << Slurp(dir + "/server.log");
  const Json rf = {{"type", "json_schema"}, {"json_schema", {{"name", "person"}, {"schema", kPersonSchema}}}};
  for (bool stream : {false, true}) {
    Json body = {{"model", "auto"}, {"messages", Messages("Pierre as JSON")}, {"max_tokens", 300}, {"temperature", 0},
                 {"response_format", rf}};
    std::string text, model;
    Json tarmac;
    if (stream) {
      const Streamed s = Stream(kChat, body, srv.port());
      text = s.text;
      model = s.chunks.back()["model"];
      for (const Json& ch : s.chunks) if (ch.contains("tarmac")) tarmac = ch["tarmac"];
    } else {
      const Json r = PostJson(kChat, body, srv.port());
      text = r["choices"][0]["message"]["content"];
      model = r["model"];
      tarmac = r["tarmac"];
    }
    EXPECT_EQ(model, "large");
    EXPECT_EQ(tarmac["escalated"], false) << tarmac.dump();
    EXPECT_NE(tarmac["reason"].get<std::string>().find("constrained"), std::string::npos) << tarmac.dump();
    ExpectPerson(text);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tarmac::testing
