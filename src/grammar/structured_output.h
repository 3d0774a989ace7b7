// One entry point from a request's structured-output constraint to a Grammar: OpenAI's
// response_format json_object / json_schema and vLLM's structured_outputs regex, choice and
// grammar (GBNF). The server validates the request fields, fills a StructuredOutputSpec and
// compiles the result once per (grammar, vocabulary) with CompiledGrammar::Compile.
// Pure functions, thread-safe.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace tarmac::grammar {

enum class StructuredOutputKind {
  kJsonObject,  // any JSON object
  kJsonSchema,  // text: the schema (JSON)
  kRegex,       // text: the pattern, matched in full
  kChoice,      // choices: one of the strings, exactly
  kGbnf,        // text: a GBNF grammar
};

struct StructuredOutputSpec {
  StructuredOutputKind kind = StructuredOutputKind::kJsonObject;
  std::string text;
  std::vector<std::string> choices;
  JsonSchemaOptions json;  // kJsonObject, kJsonSchema
};

// Errors name the construct (and for schemas its path), as the front ends report them.
Result<Grammar> BuildGrammar(const StructuredOutputSpec& spec);

// Exactly one of the strings. Errors: an empty list, an empty string.
Result<Grammar> GrammarFromChoices(const std::vector<std::string>& choices);

}  // namespace tarmac::grammar
