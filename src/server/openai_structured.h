// A request's structured-output constraint as one grammar: OpenAI's `response_format`
// ({"type": "text"}, {"type": "json_object"}, {"type": "json_schema", "json_schema": {"name",
// "description", "schema", "strict"}}) and vLLM's `structured_outputs` ({"json": schema},
// {"regex": pattern}, {"choice": [strings]}, {"grammar": GBNF}, {"json_object": true}; exactly
// one), on chat and completions. An invalid or unsupported schema, pattern or grammar is a 400
// naming the construct (e.g. "response_format.json_schema.schema.properties.age: 'multipleOf'
// is not supported"); so is giving both fields, or structured_outputs keys tarmac does not
// implement (whitespace_pattern, structural_tag, ...). `strict` is accepted either way: the
// output always follows the schema. Pure; thread-safe.
#pragma once

#include <memory>
#include <optional>

#include "grammar/grammar.h"
#include "server/api_error.h"
#include "server/json_fields.h"

namespace tarmac::server {

// Reads response_format and structured_outputs of body j; *out stays null when neither
// constrains the output.
// max_whitespace: per gap of JSON outputs (ParseDefaults).
std::optional<ApiError> ParseStructuredOutput(const Json& j, int32_t max_whitespace,
                                              std::shared_ptr<const grammar::Grammar>* out);

}  // namespace tarmac::server
