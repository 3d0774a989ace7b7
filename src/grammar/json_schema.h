// JSON Schema (draft 2020-12 and the earlier drafts' spellings) compiled into a grammar whose
// sentences are exactly JSON texts that validate against the schema (a subset of them where
// noted below), for structured outputs.
//
// Supported: boolean schemas; type (one name or a list); enum; const; properties, required,
// additionalProperties (false, true, a schema); items (a schema, or a list as in draft 4-2019
// with additionalItems), prefixItems, minItems, maxItems, uniqueItems: false; minLength,
// maxLength, pattern (regex_parser.h's subset; unanchored patterns match anywhere, as the
// specification says), format (date, time, date-time, uuid, email, ipv4); minimum, maximum,
// exclusiveMinimum, exclusiveMaximum (draft 4's boolean form too; on "number" only with
// integer bounds); anyOf; oneOf (compiled as anyOf: a value matching several branches is not
// excluded); allOf whose branches merge without conflict (properties and required are
// unions); local $ref ("#", "#/$defs/...", "#/definitions/...", any "#/..." pointer),
// recursion included. Keywords without meaning for a type (minLength on a number) are
// ignored, as validators do; so are annotations and keywords JSON Schema does not define.
//
// Choices that make the output a subset of what the schema allows: properties appear in the
// order `properties` lists them (then additional ones); an object schema with `properties`
// but no `additionalProperties` gets no others (as OpenAI's strict mode, llama.cpp and
// xgrammar do; JsonSchemaOptions::additional_properties_default restores the
// specification's default), while one without either allows any object; after prefixItems
// without items no further items; enum and const values are spelt as compact JSON; additional
// property names contain no escapes; strings spell each character one way (\uXXXX only for
// control characters, never surrogate escapes); dates respect month lengths and leap years.
// Whitespace: up to max_whitespace characters of [ \t\n\r] wherever JSON allows whitespace
// inside the value, none before or after it (0: compact output).
//
// Unsupported keywords are errors naming the keyword and its path, e.g.
// "schema.properties.age: 'multipleOf' is not supported": not, if/then/else,
// patternProperties, propertyNames, min/maxProperties, dependentRequired, dependentSchemas,
// dependencies, unevaluated*, contains, min/maxContains, multipleOf, uniqueItems: true,
// $dynamicRef, $recursiveRef, remote $ref; also pattern, format and length bounds together.
//
// Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "grammar/grammar.h"

namespace tarmac::grammar {

struct JsonSchemaOptions {
  int32_t max_whitespace = 20;               // per gap; 0: compact; Expr::kUnbounded: no limit
  bool additional_properties_default = false;  // see above
  std::string path = "schema";               // how error messages name the schema's root
};

// The schema as JSON text (errors for text that is not JSON).
Result<Grammar> GrammarFromJsonSchemaText(std::string_view schema_json, const JsonSchemaOptions& options = {});
Result<Grammar> GrammarFromJsonSchema(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options = {});

// Adds the rules of schema to g (names prefixed by rule_prefix) and returns the expression of
// one value; for grammars that embed schemas (tool calls). `$ref`s resolve against schema.
Result<Expr> AddJsonSchema(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options,
                           std::string_view rule_prefix, Grammar* g);

// Any JSON object ({"type": "json_object"} response formats).
Grammar JsonObjectGrammar(const JsonSchemaOptions& options = {});

}  // namespace tarmac::grammar
