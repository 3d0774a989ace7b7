// Python operator semantics for the interpreter: arithmetic, concatenation, `in`, sequence
// indexing and slicing, iteration. Pure functions over Values; throw TemplateError where Python
// raises (TypeError, ZeroDivisionError, UndefinedError). Thread-safe.
#pragma once

#include <optional>
#include <string>

#include "chat_template/value.h"

namespace tarmac::chat_template {

// op is one of + - * / // % **.
Value BinaryOp(const std::string& op, const Value& a, const Value& b);
Value Negate(const Value& v, bool negate);  // -v (negate) or +v
// Python `needle in haystack`.
bool Contains(const Value& haystack, const Value& needle);
// Python seq[index] for str, list, tuple (negative indices allowed); dict[key]. Returns an
// undefined (with a hint) when absent, like Jinja's getitem.
Value Subscript(const Value& obj, const Value& key);
// Python seq[start:stop:step] for str, list, tuple; missing bounds are undefined/none Values.
Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// The items a for loop visits: list/tuple items, dict keys, str characters, nothing for undefined.
ValueList Iterate(const Value& v);
// Throws the UndefinedError Jinja raises when an undefined value is used in an operation.
[[noreturn]] void FailUndefined(const Value& v);
// Message for an undefined value ("'x' is undefined").
std::string UndefinedMessage(const Value& v);

}  // namespace tarmac::chat_template
