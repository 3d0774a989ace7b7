// Parser: tokens -> AST, following Jinja2's grammar and operator precedence.
//
// Supported statements: if/elif/else, for (with `if` filter, else, loop.*), set (plain, tuple
// unpacking, namespace attribute, block form with filters), macro (defaults, keyword args),
// call blocks, break/continue, and transformers' {% generation %}. Anything else (extends,
// include, import, filter blocks, recursive loops, ...) fails with a TemplateError naming the
// line and column. Stateless function, thread-safe.
#pragma once

#include <vector>

#include "chat_template/ast.h"
#include "chat_template/lexer.h"

namespace tarmac::chat_template {

// Maximum nesting of expressions or statements; deeper input fails cleanly instead of
// overflowing the stack.
inline constexpr int kMaxParseDepth = 200;

// Preconditions: tokens come from Lex() (ends with kEof). Throws TemplateError.
Body Parse(const std::vector<Token>& tokens);

}  // namespace tarmac::chat_template
