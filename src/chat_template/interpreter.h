// Interpreter: renders a parsed template (AST) against variables, with Jinja2 semantics.
//
// One Interpreter renders once: it owns the output buffer, the step counter and the scope
// chain of that render; it is not thread-safe, but any number of Interpreters may render the
// same (immutable) AST at once. Scopes follow Jinja2: the template body writes to the top
// scope, each for-loop iteration and each macro call gets a fresh child scope (so `set` inside
// a loop does not leak out, which is why templates use namespace()), `if` shares its scope, and
// macros see their defining scope at call time.
// Limits (RenderLimits) turn runaway loops, recursion and huge outputs into TemplateErrors.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat_template/ast.h"
#include "chat_template/value.h"

namespace tarmac::chat_template {

struct RenderLimits {
  int64_t max_steps = 5'000'000;          // statements + expressions + loop iterations
  size_t max_output_bytes = 64u << 20;    // output and captured ({% set %} blocks, macros)
  int max_depth = 600;                    // nested evaluation (macro recursion included)
};

// Variable scope; `vars` mutated only by the owning Interpreter.
struct Scope {
  explicit Scope(std::shared_ptr<Scope> p) : parent(std::move(p)) {}
  const Value* Lookup(const std::string& name) const;
  std::shared_ptr<Scope> parent;
  std::unordered_map<std::string, Value> vars;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  // now: the local time strftime_now() reports (nullopt: the system clock).
  Interpreter(const RenderLimits& limits, std::optional<std::tm> now);

  // Renders body with `globals` as the outermost scope (the caller's variables, on top of the
  // built-in functions). Throws TemplateError.
  std::string Render(const Body& body, const Dict& globals);

  // Used by filters and builtins.
  void Step();
  Value Call(const Value& callee, ValueList& args, KwArgs& kwargs);
  Value GetAttr(const Value& obj, const std::string& name);
  Value GetItem(const Value& obj, const Value& key);
  // Jinja's environment.getitem for dotted attribute paths ("a.b.0") as used by map/selectattr.
  Value GetPath(const Value& obj, const std::string& path);
  const std::optional<std::tm>& now() const { return now_; }
  // namespace(): the interpreter tracks every namespace so Render() can break reference cycles.
  Value NewNamespace(Dict attrs);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow Exec(const Body& body, const ScopePtr& scope, std::string* out);
  Flow ExecStmt(const Stmt& s, const ScopePtr& scope, std::string* out);
  Flow ExecFor(const Stmt& s, const ScopePtr& scope, std::string* out);
  void ExecSet(const Stmt& s, const ScopePtr& scope, Value v);
  Value MakeMacro(const Stmt& s, const ScopePtr& scope);
  Value CallMacro(const Stmt& s, const ScopePtr& defining, ValueList& args, KwArgs& kwargs,
                  const Value* caller);

  Value Eval(const Expr& e, const ScopePtr& scope);
  Value EvalInner(const Expr& e, const ScopePtr& scope);
  Value EvalCall(const Expr& e, const ScopePtr& scope);
  Value EvalCompare(const Expr& e, const ScopePtr& scope);
  void EvalArgs(const Expr& e, const ScopePtr& scope, ValueList* args, KwArgs* kwargs);
  void Append(std::string* out, const std::string& s);

  struct DepthGuard {
    explicit DepthGuard(Interpreter* in);
    ~DepthGuard() { --in_->depth_; }
    Interpreter* in_;
  };

  RenderLimits limits_;
  std::optional<std::tm> now_;
  int64_t steps_ = 0;
  int depth_ = 0;
  std::vector<std::shared_ptr<Namespace>> namespaces_;
};

}  // namespace tarmac::chat_template
