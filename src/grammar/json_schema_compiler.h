// SchemaCompiler: the recursive walk behind json_schema.h, internal to the grammar module.
// json_schema.cc holds the dispatch (references, combinators, enum/const, types),
// json_schema_types.cc one compiler per JSON type.
//
// Owns nothing but its reference table; adds rules to the caller's grammar. One per schema,
// one thread.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/json_values.h"

namespace tarmac::grammar {

using Json = nlohmann::ordered_json;

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonSchemaOptions& options, std::string rule_prefix, Grammar* g)
      : root_(root), opts_(options), prefix_(std::move(rule_prefix)), g_(g),
        values_(g, RuleName("json"), options.max_whitespace) {}

  // The expression of values valid under schema; path names it in errors.
  Result<Expr> Compile(const Json& schema, const std::string& path);

 private:
  // json_schema.cc
  Result<Expr> CompileRef(const Json& schema, const std::string& path);
  Result<Expr> CompileAllOf(const Json& schema, const std::string& path);
  Result<Expr> CompileAnyOf(const Json& schema, const std::string& path);
  Result<Expr> CompileEnum(const Json& schema, const std::string& path);
  Result<std::vector<std::string>> TypesOf(const Json& schema, const std::string& path) const;
  Result<Expr> CompileType(const Json& schema, const std::string& type, const std::string& path);
  // A schema that is only a $ref (plus annotations), followed to its target.
  Result<Json> Resolve(const Json& schema, const std::string& path) const;
  Status MergeInto(Json* dst, const Json& src, const std::string& path) const;

  // json_schema_types.cc
  Result<Expr> CompileObject(const Json& schema, const std::string& path);
  Result<Expr> CompileArray(const Json& schema, const std::string& path);
  Result<Expr> CompileString(const Json& schema, const std::string& path);
  Result<Expr> CompileNumber(const Json& schema, const std::string& path, bool integer);
  struct Member {
    Expr kv;  // "key" ws ":" ws value
    bool required;
  };
  Expr ObjectOf(std::vector<Member> members, std::optional<Expr> extra, const std::string& path);
  Expr Ws() const { return JsonWhitespace(opts_.max_whitespace); }
  Expr Sep() const { return Sequence({Ws(), Literal(","), Ws()}); }

  std::string RuleName(const std::string& what) const { return prefix_.empty() ? what : prefix_ + "-" + what; }

  const Json& root_;
  const JsonSchemaOptions& opts_;
  std::string prefix_;
  Grammar* g_;
  JsonValueRules values_;
  std::map<std::string, int32_t> refs_;  // "$ref" text -> rule
  int depth_ = 0;
};

// Helpers shared by both files.
bool IsAnnotation(const std::string& keyword);
// Keywords this compiler implements (the rest is ignored unless listed as unsupported).
bool IsConstraint(const std::string& keyword);
// "schema.properties.age" style child paths.
std::string ChildPath(const std::string& path, const std::string& key);
std::string IndexPath(const std::string& path, const std::string& key, size_t index);

}  // namespace tarmac::grammar
