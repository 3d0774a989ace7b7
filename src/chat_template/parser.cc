// Parser: recursive descent mirroring jinja2/parser.py (parse_condexpr, parse_or, ... ,
// parse_unary, parse_primary, parse_postfix, parse_filter_expr).
#include "chat_template/parser.h"

#include <initializer_list>
#include <string_view>

namespace tarmac::chat_template {
namespace {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& toks) : t_(toks) {}

  Body ParseTemplate() {
    std::string end;
    Body body = ParseBody({}, &end);
    return body;
  }

 private:
  const Token& Cur() const { return t_[p_]; }
  const Token& Peek(size_t n = 1) const { return t_[std::min(p_ + n, t_.size() - 1)]; }
  void Advance() {
    if (p_ + 1 < t_.size()) ++p_;
  }
  bool IsOp(std::string_view op) const { return Cur().kind == TokKind::kOp && Cur().text == op; }
  bool IsName(std::string_view n) const { return Cur().kind == TokKind::kName && Cur().text == n; }
  bool SkipOp(std::string_view op) {
    if (!IsOp(op)) return false;
    Advance();
    return true;
  }
  bool SkipName(std::string_view n) {
    if (!IsName(n)) return false;
    Advance();
    return true;
  }

  static std::string Describe(const Token& t) {
    switch (t.kind) {
      case TokKind::kName:
      case TokKind::kOp: return "'" + t.text + "'";
      case TokKind::kString: return "string literal";
      case TokKind::kInt:
      case TokKind::kFloat: return "number " + t.text;
      default: return TokKindName(t.kind);
    }
  }

  [[noreturn]] void Fail(const std::string& msg, const Token& at) const {
    throw TemplateError(msg, at.line, at.column);
  }
  [[noreturn]] void Unexpected(const std::string& expected) const {
    Fail("expected " + expected + ", got " + Describe(Cur()), Cur());
  }
  void ExpectOp(std::string_view op) {
    if (!SkipOp(op)) Unexpected("'" + std::string(op) + "'");
  }
  std::string ExpectName() {
    if (Cur().kind != TokKind::kName) Unexpected("a name");
    std::string n = Cur().text;
    Advance();
    return n;
  }
  void ExpectBlockEnd() {
    if (Cur().kind != TokKind::kBlockEnd) Unexpected("end of statement '%}'");
    Advance();
  }

  struct DepthGuard {
    DepthGuard(Parser* p, const Token& at) : p_(p) {
      if (++p_->depth_ > kMaxParseDepth) p_->Fail("template nested too deeply", at);
    }
    ~DepthGuard() { --p_->depth_; }
    Parser* p_;
  };

  template <typename T>
  static std::unique_ptr<T> At(const Token& tok) {
    auto n = std::make_unique<T>();
    n->line = tok.line;
    n->column = tok.column;
    return n;
  }

  // Parses statements until a `{% name` with name in `ends` (leaves the position on that name
  // token and stores it in *end) or the end of the template (only allowed when ends is empty).
  Body ParseBody(std::initializer_list<std::string_view> ends, std::string* end) {
    Body body;
    while (true) {
      const Token& tok = Cur();
      switch (tok.kind) {
        case TokKind::kEof:
          if (ends.size() != 0) {
            std::string list;
            for (auto e : ends) list += (list.empty() ? "'" : " or '") + std::string(e) + "'";
            Fail("unexpected end of template; expected " + list + " to close the block opened at line " +
                     std::to_string(open_line_),
                 tok);
          }
          *end = "";
          return body;
        case TokKind::kText: {
          auto s = At<Stmt>(tok);
          s->kind = StmtKind::kText;
          s->text = tok.text;
          body.push_back(std::move(s));
          Advance();
          break;
        }
        case TokKind::kVarBegin: {
          auto s = At<Stmt>(tok);
          s->kind = StmtKind::kOutput;
          Advance();
          s->expr = ParseTuple(true);
          if (Cur().kind != TokKind::kVarEnd) Unexpected("end of print statement '}}'");
          Advance();
          body.push_back(std::move(s));
          break;
        }
        case TokKind::kBlockBegin: {
          Advance();
          if (Cur().kind != TokKind::kName) Unexpected("a statement name");
          for (auto e : ends) {
            if (Cur().text == e) {
              *end = Cur().text;
              return body;
            }
          }
          body.push_back(ParseStatement());
          break;
        }
        default: Unexpected("text or a tag");
      }
    }
  }

  StmtPtr ParseStatement() {
    const Token& tok = Cur();
    DepthGuard g(this, tok);
    const std::string& n = tok.text;
    if (n == "if") return ParseIf();
    if (n == "for") return ParseFor();
    if (n == "set") return ParseSet();
    if (n == "macro") return ParseMacro();
    if (n == "call") return ParseCall();
    if (n == "generation") {
      auto s = At<Stmt>(tok);
      s->kind = StmtKind::kScope;
      Advance();
      ExpectBlockEnd();
      s->body = ParseClosed("generation", {"endgeneration"});
      return s;
    }
    if (n == "break" || n == "continue") {
      if (loop_depth_ == 0) Fail("'" + n + "' outside of a for loop", tok);
      auto s = At<Stmt>(tok);
      s->kind = n == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      Advance();
      ExpectBlockEnd();
      return s;
    }
    if (n.rfind("end", 0) == 0 || n == "else" || n == "elif") {
      Fail("unexpected '" + n + "' tag (no open block it could close)", tok);
    }
    Fail("unsupported tag '" + n + "'", tok);
  }

  // Parses a body that must end with one of `ends`; consumes `end %}` when it is the closing
  // tag named first in ends.
  Body ParseClosed(const char* what, std::initializer_list<std::string_view> ends) {
    int saved = open_line_;
    open_line_ = Cur().line;
    std::string end;
    Body b = ParseBody(ends, &end);
    Advance();  // end name
    ExpectBlockEnd();
    open_line_ = saved;
    (void)what;
    return b;
  }

  StmtPtr ParseIf() {
    auto s = At<Stmt>(Cur());
    s->kind = StmtKind::kIf;
    int saved = open_line_;
    open_line_ = Cur().line;
    Advance();
    while (true) {
      s->conds.push_back(ParseTuple(false));
      ExpectBlockEnd();
      std::string end;
      s->bodies.push_back(ParseBody({"elif", "else", "endif"}, &end));
      Advance();
      if (end == "elif") continue;
      if (end == "else") {
        ExpectBlockEnd();
        s->else_body = ParseBody({"endif"}, &end);
        Advance();
      }
      ExpectBlockEnd();
      break;
    }
    open_line_ = saved;
    return s;
  }

  void ParseAssignTargets(std::vector<std::string>* targets) {
    bool paren = SkipOp("(");
    do {
      if (Cur().kind != TokKind::kName) Unexpected("a variable name");
      const std::string& n = Cur().text;
      if (n == "true" || n == "false" || n == "none" || n == "True" || n == "False" || n == "None") {
        Fail("cannot assign to '" + n + "'", Cur());
      }
      targets->push_back(n);
      Advance();
    } while (SkipOp(",") && !(paren && IsOp(")")) && !IsName("in") && !IsOp("="));
    if (paren) ExpectOp(")");
  }

  StmtPtr ParseFor() {
    auto s = At<Stmt>(Cur());
    s->kind = StmtKind::kFor;
    int saved = open_line_;
    open_line_ = Cur().line;
    Advance();
    ParseAssignTargets(&s->targets);
    if (!SkipName("in")) Unexpected("'in'");
    s->expr = ParseTuple(false);
    if (SkipName("if")) s->cond = ParseExpression(true);
    if (IsName("recursive")) Fail("recursive for loops are not supported", Cur());
    ExpectBlockEnd();
    ++loop_depth_;
    std::string end;
    s->body = ParseBody({"else", "endfor"}, &end);
    --loop_depth_;
    Advance();
    if (end == "else") {
      ExpectBlockEnd();
      s->else_body = ParseBody({"endfor"}, &end);
      Advance();
    }
    ExpectBlockEnd();
    open_line_ = saved;
    return s;
  }

  StmtPtr ParseSet() {
    auto s = At<Stmt>(Cur());
    Advance();
    if (Cur().kind == TokKind::kName && Peek().kind == TokKind::kOp && Peek().text == ".") {
      s->targets.push_back(Cur().text);
      Advance();
      Advance();
      s->attr = ExpectName();
    } else {
      ParseAssignTargets(&s->targets);
    }
    if (SkipOp("=")) {
      s->kind = StmtKind::kSet;
      s->expr = ParseTuple(true);
      ExpectBlockEnd();
      return s;
    }
    if (s->targets.size() != 1 || !s->attr.empty()) {
      Fail("block 'set' needs exactly one variable name", Cur());
    }
    s->kind = StmtKind::kSetBlock;
    while (SkipOp("|")) s->filter_chain.push_back(ParseFilter(nullptr, Cur()));
    ExpectBlockEnd();
    s->body = ParseClosed("set", {"endset"});
    return s;
  }

  void ParseParams(std::vector<MacroParam>* params) {
    ExpectOp("(");
    while (!IsOp(")")) {
      if (!params->empty()) ExpectOp(",");
      if (IsOp(")")) break;
      MacroParam mp;
      mp.name = ExpectName();
      if (SkipOp("=")) mp.default_value = ParseExpression(true);
      for (const auto& other : *params) {
        if (other.name == mp.name) Fail("duplicate parameter '" + mp.name + "'", Cur());
      }
      params->push_back(std::move(mp));
    }
    ExpectOp(")");
  }

  StmtPtr ParseMacro() {
    auto s = At<Stmt>(Cur());
    s->kind = StmtKind::kMacro;
    Advance();
    s->text = ExpectName();
    ParseParams(&s->params);
    ExpectBlockEnd();
    int saved_loops = loop_depth_;
    loop_depth_ = 0;
    s->body = ParseClosed("macro", {"endmacro"});
    loop_depth_ = saved_loops;
    return s;
  }

  StmtPtr ParseCall() {
    auto s = At<Stmt>(Cur());
    s->kind = StmtKind::kCallBlock;
    Advance();
    if (IsOp("(")) ParseParams(&s->params);
    const Token& at = Cur();
    s->expr = ParseExpression(true);
    if (s->expr->kind != ExprKind::kCall) Fail("expected a macro call after 'call'", at);
    ExpectBlockEnd();
    int saved_loops = loop_depth_;
    loop_depth_ = 0;
    s->body = ParseClosed("call", {"endcall"});
    loop_depth_ = saved_loops;
    return s;
  }

  // ---- expressions ----

  bool IsTupleEnd() const {
    const Token& c = Cur();
    if (c.kind == TokKind::kVarEnd || c.kind == TokKind::kBlockEnd || c.kind == TokKind::kEof) return true;
    if (c.kind == TokKind::kOp && (c.text == ")" || c.text == "=")) return true;
    return false;
  }

  ExprPtr ParseTuple(bool with_condexpr) {
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

  ExprPtr ParseExpression(bool with_condexpr) {
    DepthGuard g(this, Cur());
    return with_condexpr ? ParseCondExpr() : ParseOr();
  }

  ExprPtr ParseCondExpr() {
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

  ExprPtr Binary(const Token& at, std::string op, ExprPtr l, ExprPtr r) {
    auto e = At<Expr>(at);
    e->kind = ExprKind::kBinary;
    e->name = std::move(op);
    e->items.push_back(std::move(l));
    e->items.push_back(std::move(r));
    return e;
  }

  ExprPtr ParseOr() {
    ExprPtr l = ParseAnd();
    while (IsName("or")) {
      const Token& at = Cur();
      Advance();
      l = Binary(at, "or", std::move(l), ParseAnd());
    }
    return l;
  }

  ExprPtr ParseAnd() {
    ExprPtr l = ParseNot();
    while (IsName("and")) {
      const Token& at = Cur();
      Advance();
      l = Binary(at, "and", std::move(l), ParseNot());
    }
    return l;
  }

  ExprPtr ParseNot() {
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

  ExprPtr ParseCompare() {
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

  ExprPtr ParseMath1() {
    ExprPtr l = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      const Token& at = Cur();
      std::string op = at.text;
      Advance();
      l = Binary(at, op, std::move(l), ParseConcat());
    }
    return l;
  }

  ExprPtr ParseConcat() {
    ExprPtr l = ParseMath2();
    while (IsOp("~")) {
      const Token& at = Cur();
      Advance();
      l = Binary(at, "~", std::move(l), ParseMath2());
    }
    return l;
  }

  ExprPtr ParseMath2() {
    ExprPtr l = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token& at = Cur();
      std::string op = at.text;
      Advance();
      l = Binary(at, op, std::move(l), ParsePow());
    }
    return l;
  }

  ExprPtr ParsePow() {
    ExprPtr l = ParseUnary(true);
    while (IsOp("**")) {
      const Token& at = Cur();
      Advance();
      l = Binary(at, "**", std::move(l), ParseUnary(true));
    }
    return l;
  }

  ExprPtr ParseUnary(bool with_filter) {
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

  ExprPtr ParsePrimary() {
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

  ExprPtr ParsePostfix(ExprPtr node) {
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

  ExprPtr ParseSubscript(const Token& at, ExprPtr node) {
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

  ExprPtr ParseCallArgs(const Token& at, ExprKind kind, ExprPtr node) {
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

  std::string ParseDottedName() {
    std::string n = ExpectName();
    while (IsOp(".") && Peek().kind == TokKind::kName) {
      Advance();
      n += "." + Cur().text;
      Advance();
    }
    return n;
  }

  // After '|': name[(args)]. operand may be null (set-block filters).
  ExprPtr ParseFilter(ExprPtr operand, const Token& at) {
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

  ExprPtr ParseFilterExpr(ExprPtr node) {
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

  const std::vector<Token>& t_;
  size_t p_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  int open_line_ = 0;
};

}  // namespace

Body Parse(const std::vector<Token>& tokens) {
  if (tokens.empty() || tokens.back().kind != TokKind::kEof) {
    throw TemplateError("internal: token stream without end marker");
  }
  return Parser(tokens).ParseTemplate();
}

}  // namespace tarmac::chat_template
