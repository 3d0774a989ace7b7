// Filters (`x | name(args)`) and tests (`x is name(args)`) with Jinja2 3.1 semantics, tojson as
// transformers overrides it (json.dumps, no ASCII escaping, optional indent/separators/
// sort_keys). Stateless; thread-safe (the Interpreter passed in is the caller's).
#pragma once

#include <string>

#include "chat_template/value.h"

namespace tarmac::chat_template {

// Throws TemplateError for unknown filters/tests or bad arguments.
Value ApplyFilter(Interpreter& in, const std::string& name, const Value& v, ValueList& args,
                  KwArgs& kwargs);
bool ApplyTest(Interpreter& in, const std::string& name, const Value& v, ValueList& args,
               KwArgs& kwargs);

}  // namespace tarmac::chat_template
