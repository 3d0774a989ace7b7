// AST of a parsed template: expressions (Expr) and statements (Stmt).
//
// Nodes are built once by the parser and then only read; a parsed template can be rendered by
// several threads at once. Every node carries the line and column of its first token so that
// runtime errors can name where they happened. Children are owned through unique_ptr.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat_template/value.h"

namespace tarmac::chat_template {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  kLiteral,   // value
  kName,      // name
  kList,      // items
  kTuple,     // items
  kDict,      // items = alternating key, value
  kGetAttr,   // a.b: operand, name
  kGetItem,   // a[b]: operand, items[0]
  kSlice,     // a[b:c:d]: operand, items[0..2] (null = omitted)
  kCall,      // operand(args, kwargs)
  kFilter,    // operand | name(args, kwargs)
  kTest,      // operand is [not] name(args, kwargs); negated
  kNeg,       // -operand
  kPos,       // +operand
  kNot,       // not operand
  kBinary,    // items[0] op items[1]; op in + - * / // % ** ~ and or
  kCompare,   // items[0] ops[0] items[1] ops[1] items[2] ...
  kCondExpr,  // items[0] if items[1] else items[2] (items[2] may be null)
};

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  int line = 0;
  int column = 0;
  Value value;                   // kLiteral
  std::string name;              // kName, kGetAttr, kFilter, kTest; operator for kBinary
  ExprPtr operand;               // kGetAttr, kGetItem, kSlice, kCall, kFilter, kTest, unary
  std::vector<ExprPtr> items;    // see above; call/filter/test positional args
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare: == != < <= > >= in notin
  bool negated = false;          // kTest
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind {
  kText,      // text
  kOutput,    // {{ expr }}
  kIf,        // conds[i] -> bodies[i]; else_body
  kFor,       // for targets in expr [if cond] body [else else_body]
  kSet,       // set targets = expr, or set ns.attr = expr (attr non-empty)
  kSetBlock,  // set target %}body{% endset; optional filters in filter_chain
  kMacro,     // macro name(params) body
  kCallBlock, // call(caller_params) expr %}body{% endcall
  kBreak,
  kContinue,
  kScope,     // body rendered in place ({% generation %} from transformers)
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null when required
};

struct Stmt {
  StmtKind kind = StmtKind::kText;
  int line = 0;
  int column = 0;
  std::string text;                   // kText; macro name
  ExprPtr expr;                       // output, for iterable, set value, call expression
  ExprPtr cond;                       // for filter condition
  std::vector<std::string> targets;   // for / set targets (several = tuple unpacking)
  std::string attr;                   // set ns.attr
  std::vector<ExprPtr> conds;         // kIf
  std::vector<Body> bodies;           // kIf branches
  Body body;
  Body else_body;
  std::vector<MacroParam> params;     // kMacro, kCallBlock (caller params)
  std::vector<ExprPtr> filter_chain;  // kSetBlock: kFilter nodes with a null operand
};

}  // namespace tarmac::chat_template
