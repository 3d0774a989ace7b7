// Parser internals shared by parser.cc (statements) and parser_expr.cc (expressions): the
// recursive-descent Parser over a token vector. Private to the module; one Parser parses one
// template on one thread. Errors throw TemplateError with the offending token's location.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat_template/ast.h"
#include "chat_template/lexer.h"
#include "chat_template/parser.h"

namespace tarmac::chat_template::internal {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& toks) : t_(toks) {}
  Body ParseTemplate();

 private:
  const Token& Cur() const { return t_[p_]; }
  const Token& Peek(size_t n = 1) const { return t_[std::min(p_ + n, t_.size() - 1)]; }
  bool IsOp(std::string_view op) const { return Cur().kind == TokKind::kOp && Cur().text == op; }
  bool IsName(std::string_view n) const { return Cur().kind == TokKind::kName && Cur().text == n; }

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

  // ---- tokens and statements (parser.cc) ----
  void Advance();
  bool SkipOp(std::string_view op);
  bool SkipName(std::string_view n);
  static std::string Describe(const Token& t);
  [[noreturn]] void Fail(const std::string& msg, const Token& at) const;
  [[noreturn]] void Unexpected(const std::string& expected) const;
  void ExpectOp(std::string_view op);
  std::string ExpectName();
  void ExpectBlockEnd();
  // Parses statements until a `{% name` with name in `ends` (leaves the position on that name
  // token and stores it in *end) or the end of the template (only allowed when ends is empty).
  Body ParseBody(std::initializer_list<std::string_view> ends, std::string* end);
  StmtPtr ParseStatement();
  // Parses a body that must end with one of `ends`; consumes `end %}` when it is the closing
  // tag named first in ends.
  Body ParseClosed(const char* what, std::initializer_list<std::string_view> ends);
  StmtPtr ParseIf();
  void ParseAssignTargets(std::vector<std::string>* targets);
  StmtPtr ParseFor();
  StmtPtr ParseSet();
  void ParseParams(std::vector<MacroParam>* params);
  StmtPtr ParseMacro();
  StmtPtr ParseCall();

  // ---- expressions (parser_expr.cc) ----
  bool IsTupleEnd() const;
  ExprPtr ParseTuple(bool with_condexpr);
  ExprPtr ParseExpression(bool with_condexpr);
  ExprPtr ParseCondExpr();
  ExprPtr Binary(const Token& at, std::string op, ExprPtr l, ExprPtr r);
  ExprPtr ParseOr();
  ExprPtr ParseAnd();
  ExprPtr ParseNot();
  ExprPtr ParseCompare();
  ExprPtr ParseMath1();
  ExprPtr ParseConcat();
  ExprPtr ParseMath2();
  ExprPtr ParsePow();
  ExprPtr ParseUnary(bool with_filter);
  ExprPtr ParsePrimary();
  ExprPtr ParsePostfix(ExprPtr node);
  ExprPtr ParseSubscript(const Token& at, ExprPtr node);
  ExprPtr ParseCallArgs(const Token& at, ExprKind kind, ExprPtr node);
  std::string ParseDottedName();
  // After '|': name[(args)]. operand may be null (set-block filters).
  ExprPtr ParseFilter(ExprPtr operand, const Token& at);
  ExprPtr ParseFilterExpr(ExprPtr node);

  const std::vector<Token>& t_;
  size_t p_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  int open_line_ = 0;
};

}  // namespace tarmac::chat_template::internal
