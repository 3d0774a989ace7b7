#include "grammar/gbnf_parser.h"

#include <map>
#include <string>

#include "base/utf8.h"

namespace tarmac::grammar {
namespace {

constexpr int32_t kMaxRepeat = 100000;
constexpr int kMaxNesting = 256;  // parentheses: bounds the parser's and the compiler's recursion

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view src) : src_(src) {}

  Result<Grammar> Parse() {
    SkipSpace(true);
    while (!AtEnd()) {
      TARMAC_RETURN_IF_ERROR(ParseRule());
      SkipSpace(true);
    }
    for (const auto& [name, use] : uses_) {
      if (!defined_[ids_.at(name)])
        return InvalidArgument("gbnf: line {}: rule '{}' is used but never defined", LineAt(use), name);
    }
    auto root = ids_.find("root");
    if (root == ids_.end() || !defined_[root->second]) return InvalidArgument("gbnf: no 'root' rule");
    g_.SetRoot(root->second);
    return std::move(g_);
  }

 private:
  bool AtEnd() const { return pos_ >= src_.size(); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }

  int LineAt(size_t pos) const {
    int line = 1;
    for (size_t i = 0; i < pos && i < src_.size(); ++i) line += src_[i] == '\n';
    return line;
  }
  int Line() const { return LineAt(pos_); }
  int Column() const {
    size_t start = src_.rfind('\n', pos_ == 0 ? 0 : pos_ - 1);
    start = (start == std::string_view::npos || pos_ == 0) ? 0 : start + 1;
    return static_cast<int>(pos_ - start) + 1;
  }
  template <typename... Args>
  Status Error(fmt::format_string<Args...> f, Args&&... args) const {
    return InvalidArgument("gbnf: line {}, column {}: {}", Line(), Column(),
                           fmt::format(f, std::forward<Args>(args)...));
  }

  // Spaces, tabs, carriage returns and comments; newlines too when newlines.
  void SkipSpace(bool newlines) {
    while (!AtEnd()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string ParseName() {
    const size_t start = pos_;
    while (!AtEnd() && IsNameChar(Peek())) ++pos_;
    return std::string(src_.substr(start, pos_ - start));
  }

  int32_t RuleId(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const int32_t id = g_.AddRule(name);
    ids_.emplace(name, id);
    defined_.push_back(false);
    return id;
  }

  Status ParseRule() {
    const std::string name = ParseName();
    if (name.empty()) return Error("expected a rule name, got '{}'", Peek());
    SkipSpace(false);
    if (src_.substr(pos_, 3) != "::=") return Error("expected '::=' after rule name '{}'", name);
    pos_ += 3;
    const int32_t id = RuleId(name);
    if (defined_[id]) return Error("rule '{}' is defined twice", name);
    defined_[id] = true;
    SkipSpace(true);
    TARMAC_ASSIGN_OR_RETURN(Expr body, ParseAlternates(false));
    SkipSpace(false);
    if (!AtEnd() && Peek() != '\n') return Error("unexpected '{}' in rule '{}'", Peek(), name);
    g_.SetBody(id, std::move(body));
    return Status::Ok();
  }

  Result<Expr> ParseAlternates(bool nested) {
    std::vector<Expr> alts;
    TARMAC_ASSIGN_OR_RETURN(Expr first, ParseSequence(nested));
    alts.push_back(std::move(first));
    while (true) {
      const size_t save = pos_;
      SkipSpace(true);  // a line starting with '|' continues the rule
      if (Peek() != '|') {
        pos_ = save;
        break;
      }
      ++pos_;
      SkipSpace(true);
      TARMAC_ASSIGN_OR_RETURN(Expr next, ParseSequence(nested));
      alts.push_back(std::move(next));
    }
    return Choice(std::move(alts));
  }

  Result<Expr> ParseSequence(bool nested) {
    std::vector<Expr> items;
    while (true) {
      SkipSpace(nested);
      const char c = Peek();
      if (AtEnd() || c == '|' || c == ')' || c == '\n') break;
      TARMAC_ASSIGN_OR_RETURN(Expr item, ParsePrimary());
      TARMAC_RETURN_IF_ERROR(ParseQuantifiers(&item));
      items.push_back(std::move(item));
    }
    return Sequence(std::move(items));
  }

  Result<Expr> ParsePrimary() {
    const char c = Peek();
    if (c == '"') return ParseLiteral();
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++pos_;
      return AnyChar();
    }
    if (c == '(') {
      if (nesting_ >= kMaxNesting) return Error("parentheses nested deeper than {}", kMaxNesting);
      ++pos_;
      ++nesting_;
      SkipSpace(true);
      TARMAC_ASSIGN_OR_RETURN(Expr inner, ParseAlternates(true));
      --nesting_;
      SkipSpace(true);
      if (Peek() != ')') return Error("expected ')'");
      ++pos_;
      return inner;
    }
    if (c == '<' || c == '!') return Error("token matches ('<...>', '!<...>') are not supported");
    if (IsNameChar(c)) {
      const std::string name = ParseName();
      uses_.emplace(name, pos_);
      return RuleRef(RuleId(name));
    }
    return Error("unexpected '{}'", c);
  }

  Status ParseQuantifiers(Expr* item) {
    while (true) {
      const char c = Peek();
      if (c == '*') {
        *item = Star(std::move(*item));
      } else if (c == '+') {
        *item = Plus(std::move(*item));
      } else if (c == '?') {
        *item = Optional(std::move(*item));
      } else if (c == '{') {
        ++pos_;
        int32_t min = 0, max = 0;
        TARMAC_RETURN_IF_ERROR(ParseInt(&min));
        max = min;
        SkipSpace(false);
        if (Peek() == ',') {
          ++pos_;
          SkipSpace(false);
          max = Expr::kUnbounded;
          if (Peek() != '}') TARMAC_RETURN_IF_ERROR(ParseInt(&max));
        }
        SkipSpace(false);
        if (Peek() != '}') return Error("expected '}}' to close a repetition");
        if (max != Expr::kUnbounded && max < min) return Error("repetition {{{},{}}} has max < min", min, max);
        *item = Repeat(std::move(*item), min, max);
      } else {
        return Status::Ok();
      }
      ++pos_;
    }
  }

  Status ParseInt(int32_t* out) {
    SkipSpace(false);
    int64_t v = 0;
    const size_t start = pos_;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
      v = v * 10 + (Peek() - '0');
      if (v > kMaxRepeat) return Error("repetition count above {}", kMaxRepeat);
      ++pos_;
    }
    if (pos_ == start) return Error("expected a number in a repetition");
    *out = static_cast<int32_t>(v);
    return Status::Ok();
  }

  // One codepoint of a literal or class, escapes decoded.
  Result<uint32_t> ParseChar() {
    if (AtEnd()) return Error("unexpected end of input");
    if (Peek() != '\\') {
      size_t p = pos_;
      const uint32_t cp = DecodeUtf8(src_, &p);
      pos_ = p;
      return cp;
    }
    const char e = Peek(1);
    pos_ += 2;
    switch (e) {
      case 'n': return uint32_t{'\n'};
      case 'r': return uint32_t{'\r'};
      case 't': return uint32_t{'\t'};
      case '\\': case '"': case '[': case ']': case '-':
        return static_cast<uint32_t>(e);
      case 'x': return ParseHex(2);
      case 'u': return ParseHex(4);
      case 'U': return ParseHex(8);
      default:
        pos_ -= 2;
        return Error("unknown escape '\\{}'", e);
    }
  }

  Result<uint32_t> ParseHex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int h = HexValue(Peek());
      if (h < 0) return Error("expected {} hex digits in an escape", digits);
      v = v * 16 + static_cast<uint32_t>(h);
      ++pos_;
    }
    if (v > kMaxCodepoint || (v >= 0xD800 && v <= 0xDFFF)) return Error("escape U+{:X} is not a character", v);
    return v;
  }

  Result<Expr> ParseLiteral() {
    ++pos_;  // opening quote
    std::string text;
    while (!AtEnd() && Peek() != '"') {
      TARMAC_ASSIGN_OR_RETURN(uint32_t cp, ParseChar());
      AppendUtf8(cp, &text);
    }
    if (AtEnd()) return Error("unterminated string literal");
    ++pos_;
    return Literal(text);
  }

  Result<Expr> ParseClass() {
    ++pos_;  // '['
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CodepointRange> ranges;
    while (!AtEnd() && Peek() != ']') {
      TARMAC_ASSIGN_OR_RETURN(uint32_t lo, ParseChar());
      uint32_t hi = lo;
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < src_.size()) {
        ++pos_;
        TARMAC_ASSIGN_OR_RETURN(hi, ParseChar());
        if (hi < lo) return Error("character range is reversed (U+{:X} > U+{:X})", lo, hi);
      }
      ranges.push_back({lo, hi});
    }
    if (AtEnd()) return Error("unterminated character class");
    ++pos_;
    Expr cls = CharClass(std::move(ranges), negated);
    if (cls.ranges.empty()) return Error("character class matches no character");
    return cls;
  }

  std::string_view src_;
  size_t pos_ = 0;
  int nesting_ = 0;
  Grammar g_;
  std::map<std::string, int32_t> ids_;
  std::vector<bool> defined_;
  std::map<std::string, size_t> uses_;  // where each rule name is first used
};

}  // namespace

Result<Grammar> ParseGbnf(std::string_view text) { return GbnfParser(text).Parse(); }

}  // namespace tarmac::grammar
