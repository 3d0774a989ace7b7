// CallArgs: binds the positional and keyword arguments of a builtin call (filter, test, method,
// global function) to declared parameter names, Python style.
//
// A view over the caller's argument vectors; lives for one call. Not thread-safe (nothing to
// share). Throws TemplateError for too many positional arguments, unknown keywords, or a
// parameter given twice.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "chat_template/value.h"

namespace tarmac::chat_template {

class CallArgs {
 public:
  CallArgs(const std::string& fname, const ValueList& args, const KwArgs& kwargs,
           std::initializer_list<const char*> names)
      : names_(names), values_(names.size()), given_(names.size(), false) {
    if (args.size() > names_.size()) {
      throw TemplateError(fname + "() takes at most " + std::to_string(names_.size()) +
                          " argument(s) (" + std::to_string(args.size()) + " given)");
    }
    for (size_t i = 0; i < args.size(); ++i) {
      values_[i] = args[i];
      given_[i] = true;
    }
    for (const auto& [k, v] : kwargs) {
      size_t i = 0;
      while (i < names_.size() && k != names_[i]) ++i;
      if (i == names_.size()) throw TemplateError(fname + "() got an unexpected keyword argument '" + k + "'");
      if (given_[i]) throw TemplateError(fname + "() got multiple values for argument '" + k + "'");
      values_[i] = v;
      given_[i] = true;
    }
  }

  bool Has(size_t i) const { return given_[i]; }
  const Value& Get(size_t i) const { return values_[i]; }
  Value GetOr(size_t i, Value fallback) const { return given_[i] ? values_[i] : std::move(fallback); }
  // Preconditions: none; throws when the parameter was not given.
  const Value& Required(size_t i, const std::string& fname) const {
    if (!given_[i]) throw TemplateError(fname + "() missing required argument '" + names_[i] + "'");
    return values_[i];
  }

 private:
  std::vector<const char*> names_;
  ValueList values_;
  std::vector<bool> given_;
};

}  // namespace tarmac::chat_template
