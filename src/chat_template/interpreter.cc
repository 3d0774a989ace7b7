// Interpreter: statement execution, expression evaluation, scopes, loops and macros.
#include "chat_template/interpreter.h"

#include "chat_template/builtins.h"
#include "chat_template/filters.h"
#include "chat_template/ops.h"

namespace tarmac::chat_template {

const Value* Scope::Lookup(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  return nullptr;
}

Interpreter::DepthGuard::DepthGuard(Interpreter* in) : in_(in) {
  if (++in_->depth_ > in_->limits_.max_depth) {
    --in_->depth_;
    throw TemplateError("maximum nesting depth exceeded (" + std::to_string(in_->limits_.max_depth) +
                        "): runaway recursion?");
  }
}

Interpreter::Interpreter(const RenderLimits& limits, std::optional<std::tm> now)
    : limits_(limits), now_(now) {}

void Interpreter::Step() {
  if (++steps_ > limits_.max_steps) {
    throw TemplateError("step limit exceeded (" + std::to_string(limits_.max_steps) +
                        " steps): runaway loop or recursion?");
  }
}

void Interpreter::Append(std::string* out, const std::string& s) {
  if (out->size() + s.size() > limits_.max_output_bytes) {
    throw TemplateError("output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
  }
  *out += s;
}

std::string Interpreter::Render(const Body& body, const Dict& globals) {
  auto builtins = std::make_shared<Scope>(nullptr);
  Dict b;
  AddBuiltinGlobals(&b);
  for (auto& [k, v] : b.items) builtins->vars[k] = v;
  auto vars = std::make_shared<Scope>(builtins);
  for (const auto& [k, v] : globals.items) vars->vars[k] = v;
  auto top = std::make_shared<Scope>(vars);
  std::string out;
  struct Cleanup {
    // Namespaces may reference themselves (set ns.x = ns); clearing them breaks such cycles.
    ~Cleanup() {
      for (const auto& ns : in->namespaces_) ns->attrs.items.clear();
      in->namespaces_.clear();
    }
    Interpreter* in;
  } cleanup{this};
  Exec(body, top, &out);
  return out;
}

Interpreter::Flow Interpreter::Exec(const Body& body, const ScopePtr& scope, std::string* out) {
  for (const StmtPtr& s : body) {
    Flow f = ExecStmt(*s, scope, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::ExecStmt(const Stmt& s, const ScopePtr& scope, std::string* out) {
  Step();
  DepthGuard g(this);
  try {
    switch (s.kind) {
      case StmtKind::kText: Append(out, s.text); return Flow::kNormal;
      case StmtKind::kOutput: Append(out, Eval(*s.expr, scope).Str()); return Flow::kNormal;
      case StmtKind::kIf:
        for (size_t i = 0; i < s.conds.size(); ++i) {
          if (Eval(*s.conds[i], scope).Truthy()) return Exec(s.bodies[i], scope, out);
        }
        return Exec(s.else_body, scope, out);
      case StmtKind::kFor: return ExecFor(s, scope, out);
      case StmtKind::kSet: ExecSet(s, scope, Eval(*s.expr, scope)); return Flow::kNormal;
      case StmtKind::kSetBlock: {
        std::string captured;
        Exec(s.body, std::make_shared<Scope>(scope), &captured);
        Value v = Value::String(std::move(captured));
        for (const ExprPtr& f : s.filter_chain) {
          ValueList args;
          KwArgs kwargs;
          EvalArgs(*f, scope, &args, &kwargs);
          v = ApplyFilter(*this, f->name, v, args, kwargs);
        }
        ExecSet(s, scope, std::move(v));
        return Flow::kNormal;
      }
      case StmtKind::kMacro: scope->vars[s.text] = MakeMacro(s, scope); return Flow::kNormal;
      case StmtKind::kCallBlock: {
        const Expr& call = *s.expr;
        Value callee = Eval(*call.operand, scope);
        ValueList args;
        KwArgs kwargs;
        EvalArgs(call, scope, &args, &kwargs);
        auto c = std::make_shared<Callable>();
        c->name = "caller";
        std::weak_ptr<Scope> weak = scope;
        const Stmt* stmt = &s;
        c->fn = [stmt, weak](Interpreter& in, ValueList& a, KwArgs& k) {
          ScopePtr def = weak.lock();
          if (!def) throw TemplateError("caller() used after its block ended");
          return in.CallMacro(*stmt, def, a, k, nullptr);
        };
        kwargs.emplace_back("caller", Value::MakeCallable(std::move(c)));
        Append(out, Call(callee, args, kwargs).Str());
        return Flow::kNormal;
      }
      case StmtKind::kBreak: return Flow::kBreak;
      case StmtKind::kContinue: return Flow::kContinue;
      case StmtKind::kScope: return Exec(s.body, std::make_shared<Scope>(scope), out);
    }
  } catch (const TemplateError& e) {
    if (!e.has_location()) throw TemplateError(e.what(), s.line, s.column);
    throw;
  }
  return Flow::kNormal;
}

static void BindTargets(const std::vector<std::string>& targets, const Value& v, Scope* scope) {
  if (targets.size() == 1) {
    scope->vars[targets[0]] = v;
    return;
  }
  ValueList items = Iterate(v);
  if (items.size() < targets.size()) {
    throw TemplateError("not enough values to unpack (expected " + std::to_string(targets.size()) +
                        ", got " + std::to_string(items.size()) + ")");
  }
  if (items.size() > targets.size()) {
    throw TemplateError("too many values to unpack (expected " + std::to_string(targets.size()) + ")");
  }
  for (size_t i = 0; i < targets.size(); ++i) scope->vars[targets[i]] = items[i];
}

Interpreter::Flow Interpreter::ExecFor(const Stmt& s, const ScopePtr& scope, std::string* out) {
  Value iterable = Eval(*s.expr, scope);
  ValueList all = Iterate(iterable);
  ValueList items;
  if (s.cond) {
    for (Value& v : all) {
      Step();
      auto fs = std::make_shared<Scope>(scope);
      BindTargets(s.targets, v, fs.get());
      if (Eval(*s.cond, fs).Truthy()) items.push_back(std::move(v));
    }
  } else {
    items = std::move(all);
  }
  if (items.empty()) return Exec(s.else_body, std::make_shared<Scope>(scope), out);
  const int64_t n = static_cast<int64_t>(items.size());
  auto index = std::make_shared<int64_t>(0);
  auto cycle = std::make_shared<Callable>();
  cycle->name = "loop.cycle";
  cycle->fn = [index](Interpreter&, ValueList& a, KwArgs&) {
    if (a.empty()) throw TemplateError("no items for cycling given");
    return a[static_cast<size_t>(*index % static_cast<int64_t>(a.size()))];
  };
  Value cycle_v = Value::MakeCallable(cycle);
  for (int64_t i = 0; i < n; ++i) {
    Step();
    *index = i;
    auto it = std::make_shared<Scope>(scope);
    auto loop = std::make_shared<Dict>();
    loop->items.reserve(14);
    loop->items.emplace_back("index", Value::Int(i + 1));
    loop->items.emplace_back("index0", Value::Int(i));
    loop->items.emplace_back("revindex", Value::Int(n - i));
    loop->items.emplace_back("revindex0", Value::Int(n - i - 1));
    loop->items.emplace_back("first", Value::Bool(i == 0));
    loop->items.emplace_back("last", Value::Bool(i == n - 1));
    loop->items.emplace_back("length", Value::Int(n));
    loop->items.emplace_back("depth", Value::Int(1));
    loop->items.emplace_back("depth0", Value::Int(0));
    loop->items.emplace_back("previtem", i > 0 ? items[i - 1] : Value::Undefined("there is no previous item"));
    loop->items.emplace_back("nextitem", i + 1 < n ? items[i + 1] : Value::Undefined("there is no next item"));
    loop->items.emplace_back("cycle", cycle_v);
    it->vars["loop"] = Value::MakeDict(std::move(loop));
    BindTargets(s.targets, items[static_cast<size_t>(i)], it.get());
    if (Exec(s.body, it, out) == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Interpreter::ExecSet(const Stmt& s, const ScopePtr& scope, Value v) {
  if (!s.attr.empty()) {
    const Value* ns = scope->Lookup(s.targets[0]);
    if (!ns || !ns->is_namespace()) throw TemplateError("cannot assign attribute on non-namespace object");
    ns->AsNamespace().attrs.Set(s.attr, std::move(v));
    return;
  }
  BindTargets(s.targets, v, scope.get());
}

Value Interpreter::MakeMacro(const Stmt& s, const ScopePtr& scope) {
  auto c = std::make_shared<Callable>();
  c->name = s.text;
  std::weak_ptr<Scope> weak = scope;  // weak: the scope holds this macro (no cycle)
  const Stmt* stmt = &s;
  c->fn = [stmt, weak](Interpreter& in, ValueList& args, KwArgs& kwargs) {
    ScopePtr def = weak.lock();
    if (!def) throw TemplateError("macro '" + stmt->text + "' called after its defining scope ended");
    Value caller;
    KwArgs rest;
    for (auto& kv : kwargs) {
      if (kv.first == "caller") caller = kv.second;
      else rest.push_back(kv);
    }
    return in.CallMacro(*stmt, def, args, rest, caller.is_undefined() ? nullptr : &caller);
  };
  return Value::MakeCallable(std::move(c));
}

Value Interpreter::CallMacro(const Stmt& s, const ScopePtr& defining, ValueList& args, KwArgs& kwargs,
                             const Value* caller) {
  const std::string name = s.kind == StmtKind::kMacro ? s.text : "caller";
  if (args.size() > s.params.size()) {
    throw TemplateError("macro '" + name + "' takes not more than " + std::to_string(s.params.size()) +
                        " argument(s)");
  }
  auto sc = std::make_shared<Scope>(defining);
  std::vector<bool> given(s.params.size(), false);
  for (size_t i = 0; i < args.size(); ++i) {
    sc->vars[s.params[i].name] = args[i];
    given[i] = true;
  }
  for (auto& [k, v] : kwargs) {
    size_t i = 0;
    while (i < s.params.size() && s.params[i].name != k) ++i;
    if (i == s.params.size()) throw TemplateError("macro '" + name + "' takes no keyword argument '" + k + "'");
    if (given[i]) throw TemplateError("macro '" + name + "' got multiple values for argument '" + k + "'");
    sc->vars[k] = v;
    given[i] = true;
  }
  for (size_t i = 0; i < s.params.size(); ++i) {
    if (given[i]) continue;
    sc->vars[s.params[i].name] = s.params[i].default_value
                                     ? Eval(*s.params[i].default_value, sc)
                                     : Value::Undefined("parameter '" + s.params[i].name + "' was not provided");
  }
  if (caller) sc->vars["caller"] = *caller;
  std::string out;
  Exec(s.body, sc, &out);
  return Value::String(std::move(out));
}

Value Interpreter::Eval(const Expr& e, const ScopePtr& scope) {
  try {
    return EvalInner(e, scope);
  } catch (const TemplateError& err) {
    if (!err.has_location()) throw TemplateError(err.what(), e.line, e.column);
    throw;
  }
}

void Interpreter::EvalArgs(const Expr& e, const ScopePtr& scope, ValueList* args, KwArgs* kwargs) {
  for (const ExprPtr& a : e.items) args->push_back(Eval(*a, scope));
  for (const auto& [k, v] : e.kwargs) kwargs->emplace_back(k, Eval(*v, scope));
}

Value Interpreter::EvalInner(const Expr& e, const ScopePtr& scope) {
  Step();
  DepthGuard g(this);
  switch (e.kind) {
    case ExprKind::kLiteral: return e.value;
    case ExprKind::kName: {
      if (const Value* v = scope->Lookup(e.name)) return *v;
      return Value::Undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      ValueList items;
      items.reserve(e.items.size());
      for (const ExprPtr& i : e.items) items.push_back(Eval(*i, scope));
      return e.kind == ExprKind::kList ? Value::List(std::move(items)) : Value::Tuple(std::move(items));
    }
    case ExprKind::kDict: {
      auto d = std::make_shared<Dict>();
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value k = Eval(*e.items[i], scope);
        if (!k.is_string()) throw TemplateError(std::string("dict keys must be strings here, not ") + k.TypeName());
        d->Set(k.AsString(), Eval(*e.items[i + 1], scope));
      }
      return Value::MakeDict(std::move(d));
    }
    case ExprKind::kGetAttr: return GetAttr(Eval(*e.operand, scope), e.name);
    case ExprKind::kGetItem: return GetItem(Eval(*e.operand, scope), Eval(*e.items[0], scope));
    case ExprKind::kSlice: {
      Value obj = Eval(*e.operand, scope);
      Value b[3];
      for (int i = 0; i < 3; ++i) {
        if (e.items[i]) b[i] = Eval(*e.items[i], scope);
      }
      return Slice(obj, b[0], b[1], b[2]);
    }
    case ExprKind::kCall: return EvalCall(e, scope);
    case ExprKind::kFilter: {
      Value v = Eval(*e.operand, scope);
      ValueList args;
      KwArgs kwargs;
      EvalArgs(e, scope, &args, &kwargs);
      return ApplyFilter(*this, e.name, v, args, kwargs);
    }
    case ExprKind::kTest: {
      Value v = Eval(*e.operand, scope);
      ValueList args;
      KwArgs kwargs;
      EvalArgs(e, scope, &args, &kwargs);
      return Value::Bool(ApplyTest(*this, e.name, v, args, kwargs) != e.negated);
    }
    case ExprKind::kNeg:
    case ExprKind::kPos: return Negate(Eval(*e.operand, scope), e.kind == ExprKind::kNeg);
    case ExprKind::kNot: return Value::Bool(!Eval(*e.operand, scope).Truthy());
    case ExprKind::kBinary: {
      Value l = Eval(*e.items[0], scope);
      if (e.name == "and") return l.Truthy() ? Eval(*e.items[1], scope) : l;
      if (e.name == "or") return l.Truthy() ? l : Eval(*e.items[1], scope);
      Value r = Eval(*e.items[1], scope);
      if (e.name == "~") {
        std::string s = l.Str() + r.Str();
        if (s.size() > static_cast<size_t>(limits_.max_output_bytes)) throw TemplateError("string too large");
        return Value::String(std::move(s));
      }
      return BinaryOp(e.name, l, r);
    }
    case ExprKind::kCompare: return EvalCompare(e, scope);
    case ExprKind::kCondExpr: {
      if (Eval(*e.items[1], scope).Truthy()) return Eval(*e.items[0], scope);
      if (e.items[2]) return Eval(*e.items[2], scope);
      return Value::Undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  throw TemplateError("internal: unknown expression kind");
}

Value Interpreter::EvalCompare(const Expr& e, const ScopePtr& scope) {
  Value left = Eval(*e.items[0], scope);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = Eval(*e.items[i + 1], scope);
    const std::string& op = e.ops[i];
    bool r;
    if (op == "==") r = Equals(left, right);
    else if (op == "!=") r = !Equals(left, right);
    else if (op == "in") r = Contains(right, left);
    else if (op == "notin") r = !Contains(right, left);
    else {
      if (left.is_undefined()) FailUndefined(left);
      if (right.is_undefined()) FailUndefined(right);
      if (op == "<") r = LessThan(left, right);
      else if (op == ">") r = LessThan(right, left);
      else if (op == "<=") r = !LessThan(right, left);
      else r = !LessThan(left, right);
    }
    if (!r) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

Value Interpreter::EvalCall(const Expr& e, const ScopePtr& scope) {
  Value callee;
  if (e.operand->kind == ExprKind::kGetAttr) {
    Value obj = Eval(*e.operand->operand, scope);
    const std::string& name = e.operand->name;
    if (!obj.is_undefined() && !obj.is_namespace() && (HasMethod(obj, name) || IsUnsafeMethod(obj, name))) {
      if (IsUnsafeMethod(obj, name)) {
        throw TemplateError("access to attribute '" + name + "' of '" + obj.TypeName() + "' object is unsafe.");
      }
      ValueList args;
      KwArgs kwargs;
      EvalArgs(e, scope, &args, &kwargs);
      return CallMethod(*this, obj, name, args, kwargs);
    }
    callee = GetAttr(obj, name);
  } else {
    callee = Eval(*e.operand, scope);
  }
  ValueList args;
  KwArgs kwargs;
  EvalArgs(e, scope, &args, &kwargs);
  return Call(callee, args, kwargs);
}

Value Interpreter::NewNamespace(Dict attrs) {
  auto ns = std::make_shared<Namespace>();
  ns->attrs = std::move(attrs);
  namespaces_.push_back(ns);
  return Value::MakeNamespace(std::move(ns));
}

Value Interpreter::Call(const Value& callee, ValueList& args, KwArgs& kwargs) {
  if (callee.is_undefined()) FailUndefined(callee);
  if (!callee.is_callable()) throw TemplateError(std::string("'") + callee.TypeName() + "' object is not callable");
  return callee.AsCallable().fn(*this, args, kwargs);
}

Value Interpreter::GetAttr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) FailUndefined(obj);
  if (IsUnsafeMethod(obj, name)) {
    throw TemplateError("access to attribute '" + name + "' of '" + obj.TypeName() + "' object is unsafe.");
  }
  if (obj.is_namespace()) {
    if (const Value* v = obj.AsNamespace().attrs.Find(name)) return *v;
    return Value::Undefined("'Namespace' object has no attribute '" + name + "'");
  }
  if (HasMethod(obj, name)) return BoundMethod(obj, name);
  if (obj.is_dict()) {
    if (const Value* v = obj.AsDict().Find(name)) return *v;
    return Value::Undefined("'dict object' has no attribute '" + name + "'");
  }
  if (obj.is_none()) return Value::Undefined("'None' has no attribute '" + name + "'");
  return Value::Undefined(std::string("'") + obj.TypeName() + " object' has no attribute '" + name + "'");
}

Value Interpreter::GetItem(const Value& obj, const Value& key) {
  Value r = Subscript(obj, key);
  if (r.is_undefined() && key.is_string() && !obj.is_namespace() && HasMethod(obj, key.AsString())) {
    return BoundMethod(obj, key.AsString());
  }
  return r;
}

Value Interpreter::GetPath(const Value& obj, const std::string& path) {
  Value cur = obj;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos && part.size() < 18;
    cur = GetItem(cur, numeric ? Value::Int(std::stoll(part)) : Value::String(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

}  // namespace tarmac::chat_template
