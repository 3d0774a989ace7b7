// Parser, expressions: parse_tuple, parse_condexpr, parse_or ... parse_unary, parse_primary,
// parse_postfix and parse_filter_expr of jinja2/parser.py, with the same precedence (filters and
// tests bind tighter than any binary operator; `not` looser than comparisons).
#include "chat_template/parser_internal.h"

namespace tarmac::chat_template::internal {

bool Parser::IsTupleEnd() const {
  const Token& c = Cur();
  if (c.kind == TokKind::kVarEnd || c.kind == TokKind::kBlockEnd || c.kind == TokKind::kEof) return true;
  if (c.kind == TokKind::kOp && (c.text == ")" || c.text == "=")) return true;
  return false;
}

ExprPtr Parser::ParseTuple(bool with_condexpr) {
  const Token& start = Cur();
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) {
      if (!SkipOp(",")) break;
      is_tuple = true;
    }
    if (IsTupleEnd() || (!items.empty() && IsName("if"))) break;
    items.push_back(ParseExpression(with_condexpr));
    if (!IsOp(",")) break;
  }
  if (items.empty()) Unexpected("an expression");
  if (!is_tuple && items.size() == 1) return std::move(items[0]);
  auto e = At<Expr>(start);
  e->kind = ExprKind::kTuple;
  e->items = std::move(items);
  return e;
}

ExprPtr Parser::ParseExpression(bool with_condexpr) {
  DepthGuard g(this, Cur());
  return with_condexpr ? ParseCondExpr() : ParseOr();
}

ExprPtr Parser::ParseCondExpr() {
  const Token& start = Cur();
  ExprPtr e1 = ParseOr();
  while (SkipName("if")) {
    ExprPtr e2 = ParseOr();
    ExprPtr e3;
    if (SkipName("else")) e3 = ParseCondExpr();
    auto c = At<Expr>(start);
    c->kind = ExprKind::kCondExpr;
    c->items.push_back(std::move(e1));
    c->items.push_back(std::move(e2));
    c->items.push_back(std::move(e3));
    e1 = std::move(c);
  }
  return e1;
}

ExprPtr Parser::Binary(const Token& at, std::string op, ExprPtr l, ExprPtr r) {
  auto e = At<Expr>(at);
  e->kind = ExprKind::kBinary;
  e->name = std::move(op);
  e->items.push_back(std::move(l));
  e->items.push_back(std::move(r));
  return e;
}

ExprPtr Parser::ParseOr() {
  ExprPtr l = ParseAnd();
  while (IsName("or")) {
    const Token& at = Cur();
    Advance();
    l = Binary(at, "or", std::move(l), ParseAnd());
  }
  return l;
}

ExprPtr Parser::ParseAnd() {
  ExprPtr l = ParseNot();
  while (IsName("and")) {
    const Token& at = Cur();
    Advance();
    l = Binary(at, "and", std::move(l), ParseNot());
  }
  return l;
}

ExprPtr Parser::ParseNot() {
  if (IsName("not")) {
    const Token& at = Cur();
    DepthGuard g(this, at);
    Advance();
    auto e = At<Expr>(at);
    e->kind = ExprKind::kNot;
    e->operand = ParseNot();
    return e;
  }
  return ParseCompare();
}

ExprPtr Parser::ParseCompare() {
  const Token& start = Cur();
  ExprPtr first = ParseMath1();
  std::unique_ptr<Expr> cmp;
  while (true) {
    std::string op;
    if (Cur().kind == TokKind::kOp &&
        (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" || Cur().text == "<=" ||
         Cur().text == ">" || Cur().text == ">=")) {
      op = Cur().text;
      Advance();
    } else if (IsName("in")) {
      op = "in";
      Advance();
    } else if (IsName("not") && Peek().kind == TokKind::kName && Peek().text == "in") {
      op = "notin";
      Advance();
      Advance();
    } else {
      break;
    }
    if (!cmp) {
      cmp = At<Expr>(start);
      cmp->kind = ExprKind::kCompare;
      cmp->items.push_back(std::move(first));
    }
    cmp->ops.push_back(op);
    cmp->items.push_back(ParseMath1());
  }
  return cmp ? std::move(cmp) : std::move(first);
}

ExprPtr Parser::ParseMath1() {
  ExprPtr l = ParseConcat();
  while (IsOp("+") || IsOp("-")) {
    const Token& at = Cur();
    std::string op = at.text;
    Advance();
    l = Binary(at, op, std::move(l), ParseConcat());
  }
  return l;
}

ExprPtr Parser::ParseConcat() {
  ExprPtr l = ParseMath2();
  while (IsOp("~")) {
    const Token& at = Cur();
    Advance();
    l = Binary(at, "~", std::move(l), ParseMath2());
  }
  return l;
}

ExprPtr Parser::ParseMath2() {
  ExprPtr l = ParsePow();
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
    const Token& at = Cur();
    std::string op = at.text;
    Advance();
    l = Binary(at, op, std::move(l), ParsePow());
  }
  return l;
}

ExprPtr Parser::ParsePow() {
  ExprPtr l = ParseUnary(true);
  while (IsOp("**")) {
    const Token& at = Cur();
    Advance();
    l = Binary(at, "**", std::move(l), ParseUnary(true));
  }
  return l;
}

ExprPtr Parser::ParseUnary(bool with_filter) {
  const Token& at = Cur();
  DepthGuard g(this, at);
  ExprPtr node;
  if (IsOp("-") || IsOp("+")) {
    bool neg = at.text == "-";
    Advance();
    node = At<Expr>(at);
    node->kind = neg ? ExprKind::kNeg : ExprKind::kPos;
    node->operand = ParseUnary(false);
  } else {
    node = ParsePrimary();
  }
  node = ParsePostfix(std::move(node));
  if (with_filter) node = ParseFilterExpr(std::move(node));
  return node;
}

ExprPtr Parser::ParsePrimary() {
  const Token& tok = Cur();
  auto e = At<Expr>(tok);
  switch (tok.kind) {
    case TokKind::kName: {
      const std::string& n = tok.text;
      if (n == "true" || n == "True") e->value = Value::Bool(true);
      else if (n == "false" || n == "False") e->value = Value::Bool(false);
      else if (n == "none" || n == "None") e->value = Value::None();
      else {
        e->kind = ExprKind::kName;
        e->name = n;
      }
      Advance();
      return e;
    }
    case TokKind::kString: {
      std::string s;
      while (Cur().kind == TokKind::kString) {
        s += Cur().text;
        Advance();
      }
      e->value = Value::String(std::move(s));
      return e;
    }
    case TokKind::kInt:
      e->value = Value::Int(tok.ival);
      Advance();
      return e;
    case TokKind::kFloat:
      e->value = Value::Float(tok.fval);
      Advance();
      return e;
    case TokKind::kOp:
      if (tok.text == "(") {
        Advance();
        if (SkipOp(")")) {
          e->kind = ExprKind::kTuple;
          return e;
        }
        ExprPtr inner = ParseTuple(true);
        ExpectOp(")");
        return inner;
      }
      if (tok.text == "[") {
        Advance();
        e->kind = ExprKind::kList;
        while (!IsOp("]")) {
          if (!e->items.empty()) ExpectOp(",");
          if (IsOp("]")) break;
          e->items.push_back(ParseExpression(true));
        }
        ExpectOp("]");
        return e;
      }
      if (tok.text == "{") {
        Advance();
        e->kind = ExprKind::kDict;
        while (!IsOp("}")) {
          if (!e->items.empty()) ExpectOp(",");
          if (IsOp("}")) break;
          e->items.push_back(ParseExpression(true));
          ExpectOp(":");
          e->items.push_back(ParseExpression(true));
        }
        ExpectOp("}");
        return e;
      }
      break;
    default: break;
  }
  Unexpected("an expression");
}

ExprPtr Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    const Token& at = Cur();
    if (IsOp(".")) {
      Advance();
      if (Cur().kind == TokKind::kName) {
        auto e = At<Expr>(at);
        e->kind = ExprKind::kGetAttr;
        e->name = Cur().text;
        e->operand = std::move(node);
        Advance();
        node = std::move(e);
      } else if (Cur().kind == TokKind::kInt) {
        auto e = At<Expr>(at);
        e->kind = ExprKind::kGetItem;
        auto lit = At<Expr>(Cur());
        lit->value = Value::Int(Cur().ival);
        e->items.push_back(std::move(lit));
        e->operand = std::move(node);
        Advance();
        node = std::move(e);
      } else {
        Unexpected("an attribute name after '.'");
      }
    } else if (IsOp("[")) {
      Advance();
      node = ParseSubscript(at, std::move(node));
    } else if (IsOp("(")) {
      node = ParseCallArgs(at, ExprKind::kCall, std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::ParseSubscript(const Token& at, ExprPtr node) {
  DepthGuard g(this, at);
  std::vector<ExprPtr> parts;
  bool is_slice = false;
  auto e = At<Expr>(at);
  e->operand = std::move(node);
  // one index or a slice a:b:c
  ExprPtr first;
  if (!IsOp(":")) first = ParseExpression(true);
  if (IsOp(":")) {
    is_slice = true;
    Advance();
    ExprPtr stop, step;
    if (!IsOp("]") && !IsOp(":")) stop = ParseExpression(true);
    if (SkipOp(":")) {
      if (!IsOp("]")) step = ParseExpression(true);
    }
    e->kind = ExprKind::kSlice;
    e->items.push_back(std::move(first));
    e->items.push_back(std::move(stop));
    e->items.push_back(std::move(step));
  } else {
    e->kind = ExprKind::kGetItem;
    if (IsOp(",")) Fail("tuple subscripts are not supported", Cur());
    e->items.push_back(std::move(first));
  }
  (void)is_slice;
  ExpectOp("]");
  return e;
}

ExprPtr Parser::ParseCallArgs(const Token& at, ExprKind kind, ExprPtr node) {
  ExpectOp("(");
  auto e = At<Expr>(at);
  e->kind = kind;
  e->operand = std::move(node);
  bool first = true;
  while (!IsOp(")")) {
    if (!first) ExpectOp(",");
    first = false;
    if (IsOp(")")) break;
    if (IsOp("*") || IsOp("**")) Fail("*args and **kwargs in calls are not supported", Cur());
    if (Cur().kind == TokKind::kName && Peek().kind == TokKind::kOp && Peek().text == "=") {
      std::string key = Cur().text;
      Advance();
      Advance();
      for (const auto& kw : e->kwargs) {
        if (kw.first == key) Fail("keyword argument '" + key + "' repeated", Cur());
      }
      e->kwargs.emplace_back(key, ParseExpression(true));
    } else {
      if (!e->kwargs.empty()) Fail("positional argument follows keyword argument", Cur());
      e->items.push_back(ParseExpression(true));
    }
  }
  ExpectOp(")");
  return e;
}

std::string Parser::ParseDottedName() {
  std::string n = ExpectName();
  while (IsOp(".") && Peek().kind == TokKind::kName) {
    Advance();
    n += "." + Cur().text;
    Advance();
  }
  return n;
}

ExprPtr Parser::ParseFilter(ExprPtr operand, const Token& at) {
  std::string name = ParseDottedName();
  ExprPtr e;
  if (IsOp("(")) {
    e = ParseCallArgs(at, ExprKind::kFilter, std::move(operand));
  } else {
    e = At<Expr>(at);
    e->kind = ExprKind::kFilter;
    e->operand = std::move(operand);
  }
  e->name = name;
  return e;
}

ExprPtr Parser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    const Token& at = Cur();
    if (IsOp("|")) {
      Advance();
      node = ParseFilter(std::move(node), at);
    } else if (IsName("is")) {
      Advance();
      bool negated = SkipName("not");
      std::string name = ParseDottedName();
      ExprPtr e;
      if (IsOp("(")) {
        e = ParseCallArgs(at, ExprKind::kTest, std::move(node));
      } else {
        e = At<Expr>(at);
        e->kind = ExprKind::kTest;
        e->operand = std::move(node);
        const Token& c = Cur();
        bool arg_start = c.kind == TokKind::kName || c.kind == TokKind::kString ||
                         c.kind == TokKind::kInt || c.kind == TokKind::kFloat ||
                         (c.kind == TokKind::kOp && (c.text == "[" || c.text == "{"));
        if (arg_start && !IsName("else") && !IsName("or") && !IsName("and")) {
          if (IsName("is")) Fail("you cannot chain multiple tests with 'is'", c);
          DepthGuard g(this, c);
          e->items.push_back(ParsePostfix(ParsePrimary()));
        }
      }
      e->name = name;
      e->negated = negated;
      node = std::move(e);
    } else if (IsOp("(")) {
      node = ParseCallArgs(at, ExprKind::kCall, std::move(node));
    } else {
      return node;
    }
  }
}

}  // namespace tarmac::chat_template::internal
