#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include "grammar/gbnf_parser.h"
#include "grammar/structured_output.h"
#include "grammar_test_util.h"

namespace tarmac::grammar {
namespace {

using testing::Matches;
using testing::ToyTable;

std::shared_ptr<const CompiledGrammar> Compile(const std::string& schema, const JsonSchemaOptions& opts = {}) {
  auto g = GrammarFromJsonSchemaText(schema, opts);
  EXPECT_TRUE(g.ok()) << schema << ": " << g.status().ToString();
  if (!g.ok()) return nullptr;
  return testing::MustCompile(*g, ToyTable());
}

// Compiling reports an error whose message contains `expected` (front end or automaton).
std::string CompileError(const std::string& schema) {
  auto g = GrammarFromJsonSchemaText(schema);
  if (!g.ok()) return g.status().message();
  auto c = CompiledGrammar::Compile(*g, ToyTable());
  return c.ok() ? "" : c.status().message();
}

struct ErrorCase {
  const char* schema;
  const char* expected;
};

TEST(GrammarJsonSchemaTest, UnsupportedAndInvalidConstructsNameTheirPath) {
  const ErrorCase cases[] = {
      {R"({"type":"object","patternProperties":{"^x":{}}})", "schema: 'patternProperties' is not supported"},
      {R"({"properties":{"age":{"type":"integer","multipleOf":2}}})", "schema.properties.age: 'multipleOf' is not supported"},
      {R"({"type":"array","items":{"not":{"type":"null"}}})", "schema.items: 'not' is not supported"},
      {R"({"if":{},"then":{}})", "schema: 'if' is not supported"},
      {R"({"type":"array","uniqueItems":true})", "schema: 'uniqueItems' is not supported"},
      {R"({"type":"object","minProperties":1})", "schema: 'minProperties' is not supported"},
      {R"({"type":"array","contains":{"type":"integer"}})", "schema: 'contains' is not supported"},
      {R"({"$ref":"https://example.com/s.json"})", "schema.$ref: only local references"},
      {R"({"$ref":"#/$defs/missing"})", "schema.$ref: '#/$defs/missing' points to nothing"},
      {R"({"type":"strin"})", "schema.type: unknown type \"strin\""},
      {R"({"type":[]})", "schema.type: must be a type name or a non-empty array"},
      {R"({"type":"string","minLength":5,"maxLength":2})", "schema: minLength 5 is more than maxLength 2"},
      {R"({"type":"string","maxLength":-1})", "schema.maxLength: must be a non-negative integer"},
      {R"({"type":"string","maxLength":100000})", "schema.maxLength: 100000 is above the largest supported bound"},
      {R"({"type":"number","minimum":0.5})", "schema: a minimum of 0.5 on a number is not supported"},
      {R"({"type":"integer","minimum":5,"maximum":4})", "schema: no integer satisfies the minimum and maximum"},
      {R"({"type":"integer","minimum":"x"})", "schema.minimum: must be a number"},
      {R"({"type":"string","format":"uri"})", "schema.format: format 'uri' is not supported"},
      {R"({"type":"string","pattern":"(a"})", "schema.pattern: regex: at offset 2: missing ')'"},
      {R"({"type":"string","pattern":"(?=a)b"})", "schema.pattern: regex: at offset 1: lookaround"},
      {R"({"type":"string","pattern":"(a)\\1"})", "schema.pattern: regex: at offset 5: backreferences"},
      {R"({"type":"string","pattern":"a","maxLength":3})", "schema: 'pattern' together with 'maxLength' is not supported"},
      {"false", "schema: the schema 'false' allows no value"},
      {R"({"properties":{"a":false},"required":["a"]})", "schema.properties.a: the property is required but its schema is 'false'"},
      {R"({"properties":{"a":{}},"required":["b"],"additionalProperties":false})",
       "schema.required: 'b' is required but neither listed"},
      {R"({"allOf":[{"properties":{"a":{"type":"integer"}}},{"properties":{"a":{"type":"string"}}}]})",
       "schema.allOf[1]: branches give property 'a' different schemas"},
      {R"({"anyOf":[{"type":"string"}],"oneOf":[{"type":"null"}]})", "schema: 'anyOf' and 'oneOf' together"},
      {R"({"enum":[]})", "schema.enum: must be a non-empty array"},
      {R"({"type":"integer","enum":["a"]})", "schema: no value satisfies 'enum', 'const' and 'type' together"},
      {R"({"enum":["a"],"maxLength":2})", "schema: 'maxLength' together with 'enum' is not supported"},
      {R"({"$ref":"#/$defs/a","type":"object","$defs":{"a":{}}})", "schema: '$ref' together with 'type' is not supported"},
      {R"({"type":"array","prefixItems":[{}],"items":false,"minItems":2})", "schema: minItems 2 is more than the 1 items"},
      {R"({"type":"object","properties":{"p":{"type":"array","items":{"type":"string","format":"hostname"}}}})",
       "schema.properties.p.items.format: format 'hostname' is not supported"},
      {R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"})", "is left-recursive"},
      {"not json", "schema: not valid JSON"},
      {"[1]", "schema: a schema must be an object or a boolean, got array"},
  };
  for (const ErrorCase& c : cases) {
    const std::string msg = CompileError(c.schema);
    EXPECT_NE(msg.find(c.expected), std::string::npos) << c.schema << "\n  got: " << (msg.empty() ? "(no error)" : msg);
  }
  const std::string long_name = "{\"properties\":{\"" + std::string(2000, 'k') + "\":{}}}";
  EXPECT_NE(CompileError(long_name).find("schema.properties: names longer than 1024 bytes"), std::string::npos);
}

TEST(GrammarJsonSchemaTest, ObjectLayout) {
  auto g = Compile(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"boolean"},"c":{"type":"null"}},
                      "required":["b"]})");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, R"({"b":true})"));
  EXPECT_TRUE(Matches(g, R"({"a":1,"b":false,"c":null})"));
  EXPECT_TRUE(Matches(g, R"({ "a" : 1 ,
  "b": true })"));
  EXPECT_FALSE(Matches(g, R"({"a":1})")) << "b is required";
  EXPECT_FALSE(Matches(g, R"({"b":true,"a":1})")) << "properties come in schema order";
  EXPECT_FALSE(Matches(g, R"({"b":true,"d":1})")) << "no additional properties by default";
  EXPECT_FALSE(Matches(g, R"({,"b":true})"));
  EXPECT_FALSE(Matches(g, R"({"b":true,})"));
  EXPECT_FALSE(Matches(g, R"( {"b":true})")) << "no whitespace around the value";
}

TEST(GrammarJsonSchemaTest, AdditionalPropertiesNeverRepeatDeclaredNames) {
  auto g = Compile(R"({"type":"object","properties":{"id":{"type":"integer"},"idx":{"type":"integer"}},
                      "additionalProperties":{"type":"string"}})");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, R"({"id":1,"name":"x"})"));
  EXPECT_TRUE(Matches(g, R"({"i":"x","idxy":"y","":"z"})"));
  EXPECT_FALSE(Matches(g, R"({"id":1,"id":"x"})"));
  EXPECT_FALSE(Matches(g, R"({"idx":"x"})"));
  EXPECT_FALSE(Matches(g, R"({"a\u0062":"x"})")) << "additional names are spelt without escapes";
}

TEST(GrammarJsonSchemaTest, SpecificationDefaultAllowsAdditionalProperties) {
  JsonSchemaOptions opts;
  opts.additional_properties_default = true;
  auto g = Compile(R"({"properties":{"a":{"type":"integer"}}})", opts);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, R"({"a":1,"z":[null,{"q":1.5e3}]})"));
  auto strict = Compile(R"({"properties":{"a":{"type":"integer"}}})");
  EXPECT_FALSE(Matches(strict, R"({"a":1,"z":1})"));
  auto any = Compile(R"({"type":"object"})");
  EXPECT_TRUE(Matches(any, R"({"z":{"y":[]}})")) << "an object schema without properties allows any object";
}

TEST(GrammarJsonSchemaTest, WhitespaceIsBoundedAndCanBeCompact) {
  auto flexible = Compile(R"({"type":"array","items":{"type":"integer"}})");
  EXPECT_TRUE(Matches(flexible, "[1,\n  2, 3 ]"));
  EXPECT_TRUE(Matches(flexible, "[" + std::string(20, ' ') + "1]"));
  EXPECT_FALSE(Matches(flexible, "[" + std::string(21, ' ') + "1]"));
  JsonSchemaOptions compact;
  compact.max_whitespace = 0;
  auto tight = Compile(R"({"type":"array","items":{"type":"integer"}})", compact);
  EXPECT_TRUE(Matches(tight, "[1,2,3]"));
  EXPECT_FALSE(Matches(tight, "[1, 2]"));
}

TEST(GrammarJsonSchemaTest, StringsCountCharactersNotBytes) {
  auto g = Compile(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_TRUE(Matches(g, R"("日本")"));
  EXPECT_TRUE(Matches(g, R"("a\n\u00e9")"));
  EXPECT_FALSE(Matches(g, R"("a")"));
  EXPECT_FALSE(Matches(g, R"("abcd")"));
  EXPECT_FALSE(Matches(g, R"("\ud83d\ude00")")) << "surrogate escapes are not produced";
  EXPECT_FALSE(Matches(g, "\"a\tb\"")) << "raw control characters are not JSON";
}

TEST(GrammarJsonSchemaTest, PatternsSearchUnlessAnchored) {
  auto search = Compile(R"({"type":"string","pattern":"b+c"})");
  EXPECT_TRUE(Matches(search, R"("xxbbcyy")"));
  EXPECT_FALSE(Matches(search, R"("xxbyy")"));
  auto anchored = Compile(R"({"type":"string","pattern":"^b+c$"})");
  EXPECT_TRUE(Matches(anchored, R"("bbc")"));
  EXPECT_FALSE(Matches(anchored, R"("abbc")"));
  auto quoted = Compile(R"({"type":"string","pattern":"^a\"b\\\\$"})");
  EXPECT_TRUE(Matches(quoted, R"("a\"b\\")")) << "pattern characters are JSON-escaped";
}

TEST(GrammarJsonSchemaTest, FormatsRespectTheCalendar) {
  auto date = Compile(R"({"type":"string","format":"date"})");
  EXPECT_TRUE(Matches(date, R"("2024-02-29")"));
  EXPECT_TRUE(Matches(date, R"("2000-02-29")"));
  EXPECT_FALSE(Matches(date, R"("1900-02-29")"));
  EXPECT_FALSE(Matches(date, R"("2023-04-31")"));
  EXPECT_FALSE(Matches(date, R"("0000-01-01")"));
  auto dt = Compile(R"({"type":"string","format":"date-time"})");
  EXPECT_TRUE(Matches(dt, R"("2024-05-01T23:59:59.123+02:00")"));
  EXPECT_FALSE(Matches(dt, R"("2024-05-01T24:00:00Z")"));
  auto uuid = Compile(R"({"type":"string","format":"uuid"})");
  EXPECT_TRUE(Matches(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(Matches(uuid, R"("123e4567e89b12d3a456426614174000")"));
}

TEST(GrammarJsonSchemaTest, NumberBounds) {
  auto g = Compile(R"({"type":"number","exclusiveMinimum":-1,"maximum":2})");
  for (const char* ok : {"-0.5", "-0", "0", "1.999", "2", "2.000", "-0.0001"}) EXPECT_TRUE(Matches(g, ok)) << ok;
  for (const char* bad : {"-1", "-1.0", "2.001", "3", "1e0", "01"}) EXPECT_FALSE(Matches(g, bad)) << bad;
  auto i = Compile(R"({"type":"integer","minimum":-3.5,"exclusiveMaximum":7.5})");
  for (const char* ok : {"-3", "0", "7"}) EXPECT_TRUE(Matches(i, ok)) << ok;
  for (const char* bad : {"-4", "8", "7.0"}) EXPECT_FALSE(Matches(i, bad)) << bad;
}

TEST(GrammarJsonSchemaTest, RecursiveReferences) {
  auto g = Compile(R"({"$defs":{"list":{"type":"object","properties":{"head":{"type":"integer"},
                     "tail":{"anyOf":[{"$ref":"#/$defs/list"},{"type":"null"}]}},"required":["head","tail"]}},
                     "$ref":"#/$defs/list"})");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, R"({"head":1,"tail":{"head":2,"tail":{"head":3,"tail":null}}})"));
  EXPECT_FALSE(Matches(g, R"({"head":1,"tail":{"head":2}})"));
}

TEST(GrammarJsonSchemaTest, ManyOptionalPropertiesChainRules) {
  // 80 optional properties: the inline layout would be quadratic, so the rest is a rule chain.
  std::string props;
  for (int i = 0; i < 80; ++i) props += fmt::format("{}\"p{}\":{{\"type\":\"integer\"}}", i ? "," : "", i);
  auto g = Compile("{\"type\":\"object\",\"properties\":{" + props + "}}");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, "{}"));
  EXPECT_TRUE(Matches(g, R"({"p3":1,"p40":2,"p79":3})"));
  EXPECT_FALSE(Matches(g, R"({"p40":2,"p3":1})"));
}

TEST(GrammarJsonSchemaTest, GbnfOutputParsesBackToTheSameLanguage) {
  auto g = GrammarFromJsonSchemaText(
      R"({"type":"object","properties":{"s":{"type":"string","pattern":"^[a-z]\"?$"},"n":{"type":"number","maximum":9}},
          "required":["s"]})");
  ASSERT_TRUE(g.ok());
  auto back = ParseGbnf(g->ToGbnf());
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << g->ToGbnf();
  auto a = testing::MustCompile(*g, ToyTable());
  auto b = testing::MustCompile(*back, ToyTable());
  for (const char* text : {R"({"s":"a"})", R"({"s":"b\"","n":-3.5})", R"({"s":"ab"})", R"({"n":1})", R"({"s":"c","n":10})"})
    EXPECT_EQ(Matches(a, text), Matches(b, text)) << text;
}

TEST(GrammarJsonSchemaTest, JsonObjectFormatAcceptsAnyObjectOnly) {
  auto g = testing::MustCompile(JsonObjectGrammar(), ToyTable());
  EXPECT_TRUE(Matches(g, R"({"a":[1,{"b":null}],"c":"\u00e9"})"));
  EXPECT_TRUE(Matches(g, "{}"));
  EXPECT_FALSE(Matches(g, "[]"));
  EXPECT_FALSE(Matches(g, "1"));
}

TEST(GrammarStructuredOutputTest, EachKindBuildsItsGrammar) {
  StructuredOutputSpec choice{StructuredOutputKind::kChoice, "", {"yes", "no", "maybe so"}, {}};
  auto c = BuildGrammar(choice);
  ASSERT_TRUE(c.ok());
  auto cg = testing::MustCompile(*c, ToyTable());
  EXPECT_TRUE(Matches(cg, "maybe so"));
  EXPECT_FALSE(Matches(cg, "maybe"));
  EXPECT_FALSE(BuildGrammar({StructuredOutputKind::kChoice, "", {}, {}}).ok());
  EXPECT_NE(BuildGrammar({StructuredOutputKind::kChoice, "", {"a", ""}, {}}).status().message().find("choice[1]"),
            std::string::npos);

  auto re = BuildGrammar({StructuredOutputKind::kRegex, "[0-9]{3}-[a-z]+", {}, {}});
  ASSERT_TRUE(re.ok());
  EXPECT_TRUE(Matches(testing::MustCompile(*re, ToyTable()), "123-abc"));
  auto gbnf = BuildGrammar({StructuredOutputKind::kGbnf, "root ::= \"x\"+", {}, {}});
  ASSERT_TRUE(gbnf.ok());
  EXPECT_TRUE(Matches(testing::MustCompile(*gbnf, ToyTable()), "xxx"));
  auto schema = BuildGrammar({StructuredOutputKind::kJsonSchema, R"({"type":"boolean"})", {}, {}});
  ASSERT_TRUE(schema.ok());
  EXPECT_TRUE(Matches(testing::MustCompile(*schema, ToyTable()), "false"));
}

}  // namespace
}  // namespace tarmac::grammar
