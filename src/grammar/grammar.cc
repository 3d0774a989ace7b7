#include "grammar/grammar.h"

#include <algorithm>

#include "base/check.h"
#include "base/utf8.h"

namespace tarmac::grammar {
namespace {

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

// GBNF spelling of a name: runs of other characters become one '-'.
std::string SanitizeName(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (IsNameChar(c)) {
      out.push_back(c);
    } else if (!out.empty() && out.back() != '-') {
      out.push_back('-');
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "rule" : out;
}

void AppendEscapedCodepoint(uint32_t cp, bool in_class, std::string* out) {
  switch (cp) {
    case '\n': *out += "\\n"; return;
    case '\r': *out += "\\r"; return;
    case '\t': *out += "\\t"; return;
    case '\\': *out += "\\\\"; return;
    default: break;
  }
  if (!in_class && cp == '"') { *out += "\\\""; return; }
  if (in_class && cp == '^') {  // GBNF has no \^ escape
    *out += "\\x5E";
    return;
  }
  if (in_class && (cp == ']' || cp == '[' || cp == '-')) {
    out->push_back('\\');
    out->push_back(static_cast<char>(cp));
    return;
  }
  if (cp >= 0x20 && cp < 0x7F) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x100) {
    *out += fmt::format("\\x{:02X}", cp);
  } else if (cp < 0x10000) {
    *out += fmt::format("\\u{:04X}", cp);
  } else {
    *out += fmt::format("\\U{:08X}", cp);
  }
}

bool IsAnyChar(const std::vector<CodepointRange>& r) {
  return r.size() == 2 && r[0] == CodepointRange{0, kSurrogateLo - 1} &&
         r[1] == CodepointRange{kSurrogateHi + 1, kMaxCodepoint};
}

class GbnfPrinter {
 public:
  explicit GbnfPrinter(const Grammar& g) : g_(g) {}

  // Appends e; `atomic` asks for parentheses unless e is a single primary.
  void Print(const Expr& e, bool atomic, std::string* out) const {
    switch (e.kind) {
      case ExprKind::kEmpty:
        *out += "\"\"";
        break;
      case ExprKind::kLiteral: {
        out->push_back('"');
        size_t pos = 0;
        while (pos < e.text.size()) AppendEscapedCodepoint(DecodeUtf8(e.text, &pos), false, out);
        out->push_back('"');
        break;
      }
      case ExprKind::kCharClass:
        PrintClass(e.ranges, out);
        break;
      case ExprKind::kRuleRef:
        *out += g_.rule(e.rule).name;
        break;
      case ExprKind::kSequence:
      case ExprKind::kChoice: {
        if (atomic) out->push_back('(');
        const char* sep = e.kind == ExprKind::kSequence ? " " : " | ";
        for (size_t i = 0; i < e.items.size(); ++i) {
          if (i) *out += sep;
          Print(e.items[i], e.kind == ExprKind::kSequence, out);
        }
        if (atomic) out->push_back(')');
        break;
      }
      case ExprKind::kRepeat:
        Print(e.items[0], true, out);
        if (e.min == 0 && e.max == 1) {
          out->push_back('?');
        } else if (e.min == 0 && e.max == Expr::kUnbounded) {
          out->push_back('*');
        } else if (e.min == 1 && e.max == Expr::kUnbounded) {
          out->push_back('+');
        } else if (e.max == Expr::kUnbounded) {
          *out += fmt::format("{{{},}}", e.min);
        } else if (e.min == e.max) {
          *out += fmt::format("{{{}}}", e.min);
        } else {
          *out += fmt::format("{{{},{}}}", e.min, e.max);
        }
        break;
    }
  }

 private:
  static void PrintClass(const std::vector<CodepointRange>& ranges, std::string* out) {
    if (IsAnyChar(ranges)) {
      out->push_back('.');
      return;
    }
    out->push_back('[');
    for (const CodepointRange& r : ranges) {
      AppendEscapedCodepoint(r.lo, true, out);
      if (r.hi != r.lo) {
        out->push_back('-');
        AppendEscapedCodepoint(r.hi, true, out);
      }
    }
    out->push_back(']');
  }

  const Grammar& g_;
};

Status ValidateExpr(const Grammar& g, const Rule& rule, const Expr& e) {
  switch (e.kind) {
    case ExprKind::kEmpty:
      return Status::Ok();
    case ExprKind::kLiteral:
      if (e.text.empty()) return InvalidArgument("grammar: rule '{}' has an empty literal", rule.name);
      return Status::Ok();
    case ExprKind::kCharClass:
      if (e.ranges.empty())
        return InvalidArgument("grammar: rule '{}' has a character class that matches nothing", rule.name);
      return Status::Ok();
    case ExprKind::kRuleRef:
      if (e.rule < 0 || e.rule >= g.num_rules())
        return InvalidArgument("grammar: rule '{}' refers to rule #{}, which does not exist", rule.name, e.rule);
      return Status::Ok();
    case ExprKind::kRepeat:
      if (e.items.size() != 1 || e.min < 0 || (e.max != Expr::kUnbounded && e.max < e.min))
        return InvalidArgument("grammar: rule '{}' has a malformed repetition {{{},{}}}", rule.name, e.min, e.max);
      return ValidateExpr(g, rule, e.items[0]);
    case ExprKind::kSequence:
    case ExprKind::kChoice:
      if (e.kind == ExprKind::kChoice && e.items.empty())
        return InvalidArgument("grammar: rule '{}' has an empty alternation", rule.name);
      for (const Expr& item : e.items) TARMAC_RETURN_IF_ERROR(ValidateExpr(g, rule, item));
      return Status::Ok();
  }
  return Status::Ok();
}

}  // namespace

Expr Empty() { return Expr{}; }

Expr Literal(std::string_view bytes) {
  Expr e;
  if (bytes.empty()) return e;
  e.kind = ExprKind::kLiteral;
  e.text = std::string(bytes);
  return e;
}

Expr CharClass(std::vector<CodepointRange> ranges, bool negated) {
  std::vector<CodepointRange> split;
  for (CodepointRange r : ranges) {
    TARMAC_DCHECK(r.lo <= r.hi);
    r.hi = std::min(r.hi, kMaxCodepoint);
    if (r.lo > r.hi) continue;
    // Surrogates are not characters: UTF-8 cannot encode them.
    if (r.lo < kSurrogateLo && r.hi >= kSurrogateLo) {
      split.push_back({r.lo, kSurrogateLo - 1});
      r.lo = kSurrogateLo;
    }
    if (r.lo <= kSurrogateHi && r.hi > kSurrogateHi) {
      split.push_back({kSurrogateHi + 1, r.hi});
      r.hi = kSurrogateHi;
    }
    if (r.lo >= kSurrogateLo && r.hi <= kSurrogateHi) continue;
    split.push_back(r);
  }
  std::sort(split.begin(), split.end(), [](auto a, auto b) { return a.lo < b.lo; });
  std::vector<CodepointRange> merged;
  for (const CodepointRange& r : split) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  if (negated) {
    std::vector<CodepointRange> comp;
    uint32_t next = 0;
    for (const CodepointRange& r : merged) {
      if (r.lo > next) comp.push_back({next, r.lo - 1});
      next = r.hi + 1;
    }
    if (next <= kMaxCodepoint) comp.push_back({next, kMaxCodepoint});
    return CharClass(std::move(comp), false);  // drops the surrogates the complement added
  }
  Expr e;
  e.kind = ExprKind::kCharClass;
  e.ranges = std::move(merged);
  return e;
}

Expr AnyChar() { return CharClass({{0, kMaxCodepoint}}); }

Expr RuleRef(int32_t rule) {
  Expr e;
  e.kind = ExprKind::kRuleRef;
  e.rule = rule;
  return e;
}

Expr Sequence(std::vector<Expr> items) {
  Expr e;
  e.kind = ExprKind::kSequence;
  for (Expr& item : items) {
    if (item.kind == ExprKind::kEmpty) continue;
    std::vector<Expr> parts;
    if (item.kind == ExprKind::kSequence) {
      parts = std::move(item.items);
    } else {
      parts.push_back(std::move(item));
    }
    for (Expr& p : parts) {
      if (p.kind == ExprKind::kLiteral && !e.items.empty() && e.items.back().kind == ExprKind::kLiteral) {
        e.items.back().text += p.text;
      } else {
        e.items.push_back(std::move(p));
      }
    }
  }
  if (e.items.empty()) return Empty();
  if (e.items.size() == 1) return std::move(e.items[0]);
  return e;
}

Expr Choice(std::vector<Expr> items) {
  TARMAC_CHECK(!items.empty());
  Expr e;
  e.kind = ExprKind::kChoice;
  for (Expr& item : items) {
    if (item.kind == ExprKind::kChoice) {
      for (Expr& sub : item.items) e.items.push_back(std::move(sub));
    } else {
      e.items.push_back(std::move(item));
    }
  }
  if (e.items.size() == 1) return std::move(e.items[0]);
  return e;
}

Expr Repeat(Expr item, int32_t min, int32_t max) {
  TARMAC_CHECK(min >= 0 && (max == Expr::kUnbounded || max >= min));
  if (max == 0 || item.kind == ExprKind::kEmpty) return Empty();
  if (min == 1 && max == 1) return item;
  Expr e;
  e.kind = ExprKind::kRepeat;
  e.min = min;
  e.max = max;
  e.items.push_back(std::move(item));
  return e;
}

bool TriviallyNullable(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kEmpty:
      return true;
    case ExprKind::kLiteral:
    case ExprKind::kCharClass:
    case ExprKind::kRuleRef:
      return false;
    case ExprKind::kSequence:
      return std::all_of(e.items.begin(), e.items.end(), TriviallyNullable);
    case ExprKind::kChoice:
      return std::any_of(e.items.begin(), e.items.end(), TriviallyNullable);
    case ExprKind::kRepeat:
      return e.min == 0 || TriviallyNullable(e.items[0]);
  }
  return false;
}

int32_t Grammar::AddRule(std::string_view name) {
  const std::string base = SanitizeName(name);
  std::string unique = base;
  for (int n = 2; FindRule(unique) >= 0; ++n) unique = fmt::format("{}-{}", base, n);
  rules_.push_back(Rule{std::move(unique), Empty()});
  return num_rules() - 1;
}

int32_t Grammar::FindRule(std::string_view name) const {
  for (int32_t i = 0; i < num_rules(); ++i)
    if (rules_[i].name == name) return i;
  return -1;
}

void Grammar::SetBody(int32_t id, Expr body) {
  TARMAC_CHECK(id >= 0 && id < num_rules());
  rules_[id].body = std::move(body);
}

Status Grammar::Validate() const {
  if (root_ < 0 || root_ >= num_rules()) return InvalidArgument("grammar: no root rule");
  for (const Rule& r : rules_) TARMAC_RETURN_IF_ERROR(ValidateExpr(*this, r, r.body));
  return Status::Ok();
}

std::string Grammar::ToGbnf() const {
  GbnfPrinter printer(*this);
  std::string out;
  // GBNF starts at the rule named root.
  if (root_ >= 0 && rules_[root_].name != "root" && FindRule("root") < 0)
    out += "root ::= " + rules_[root_].name + "\n";
  std::vector<int32_t> order;
  if (root_ >= 0) order.push_back(root_);
  for (int32_t i = 0; i < num_rules(); ++i)
    if (i != root_) order.push_back(i);
  for (int32_t id : order) {
    out += rules_[id].name;
    out += " ::= ";
    printer.Print(rules_[id].body, false, &out);
    out.push_back('\n');
  }
  return out;
}

}  // namespace tarmac::grammar
