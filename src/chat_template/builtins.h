// Builtins: the global functions templates may call (range, namespace, dict, raise_exception,
// strftime_now as transformers defines them) and the methods of str, dict and list values that
// the immutable sandbox allows (str.strip/split/startswith/..., dict.get/items/keys/values,
// list.index/count). Stateless; thread-safe.
#pragma once

#include <string>

#include "chat_template/value.h"

namespace tarmac::chat_template {

// Adds the global functions to `globals` (user variables of the same name override them).
void AddBuiltinGlobals(Dict* globals);

// True if obj's type has a (safe) method `name`.
bool HasMethod(const Value& obj, const std::string& name);
// True for methods that exist but mutate (list.append, dict.update, ...): Jinja's immutable
// sandbox refuses them.
bool IsUnsafeMethod(const Value& obj, const std::string& name);
// Calls obj.name(args...). Preconditions: HasMethod(obj, name).
Value CallMethod(Interpreter& in, const Value& obj, const std::string& name, ValueList& args,
                 KwArgs& kwargs);
// obj.name as a first-class value (a callable bound to obj). Preconditions: HasMethod.
Value BoundMethod(const Value& obj, const std::string& name);

// Python str methods used by filters too.
std::string PyStrip(const std::string& s, const Value& chars, bool left, bool right);
std::string PyUpper(const std::string& s);
std::string PyLower(const std::string& s);
std::string PyTitle(const std::string& s);
std::string PyCapitalize(const std::string& s);
std::string PyReplace(const std::string& s, const std::string& old, const std::string& repl, int64_t count);

}  // namespace tarmac::chat_template
