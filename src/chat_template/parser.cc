// Parser: recursive descent mirroring jinja2/parser.py (parse_condexpr, parse_or, ... ,
// parse_unary, parse_primary, parse_postfix, parse_filter_expr).
#include "chat_template/parser.h"

#include "chat_template/parser_internal.h"


namespace tarmac::chat_template {
namespace internal {

Body Parser::ParseTemplate() {
  std::string end;
  Body body = ParseBody({}, &end);
  return body;
}

void Parser::Advance() {
  if (p_ + 1 < t_.size()) ++p_;
}

bool Parser::SkipOp(std::string_view op) {
  if (!IsOp(op)) return false;
  Advance();
  return true;
}

bool Parser::SkipName(std::string_view n) {
  if (!IsName(n)) return false;
  Advance();
  return true;
}

std::string Parser::Describe(const Token& t) {
  switch (t.kind) {
    case TokKind::kName:
    case TokKind::kOp: return "'" + t.text + "'";
    case TokKind::kString: return "string literal";
    case TokKind::kInt:
    case TokKind::kFloat: return "number " + t.text;
    default: return TokKindName(t.kind);
  }
}

void Parser::Fail(const std::string& msg, const Token& at) const {
  throw TemplateError(msg, at.line, at.column);
}

void Parser::Unexpected(const std::string& expected) const {
  Fail("expected " + expected + ", got " + Describe(Cur()), Cur());
}

void Parser::ExpectOp(std::string_view op) {
  if (!SkipOp(op)) Unexpected("'" + std::string(op) + "'");
}

std::string Parser::ExpectName() {
  if (Cur().kind != TokKind::kName) Unexpected("a name");
  std::string n = Cur().text;
  Advance();
  return n;
}

void Parser::ExpectBlockEnd() {
  if (Cur().kind != TokKind::kBlockEnd) Unexpected("end of statement '%}'");
  Advance();
}

Body Parser::ParseBody(std::initializer_list<std::string_view> ends, std::string* end) {
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

StmtPtr Parser::ParseStatement() {
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

Body Parser::ParseClosed(const char* what, std::initializer_list<std::string_view> ends) {
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

StmtPtr Parser::ParseIf() {
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

void Parser::ParseAssignTargets(std::vector<std::string>* targets) {
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

StmtPtr Parser::ParseFor() {
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

StmtPtr Parser::ParseSet() {
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

void Parser::ParseParams(std::vector<MacroParam>* params) {
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

StmtPtr Parser::ParseMacro() {
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

StmtPtr Parser::ParseCall() {
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

}  // namespace internal

Body Parse(const std::vector<Token>& tokens) {
  if (tokens.empty() || tokens.back().kind != TokKind::kEof) {
    throw TemplateError("internal: token stream without end marker");
  }
  return internal::Parser(tokens).ParseTemplate();
}

}  // namespace tarmac::chat_template
