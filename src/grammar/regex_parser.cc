#include "grammar/regex_parser.h"

#include "base/utf8.h"

namespace tarmac::grammar {
namespace {

constexpr int32_t kMaxRepeat = 10000;
constexpr int kMaxNesting = 256;  // groups: bounds the parser's and the compiler's recursion

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool IsAsciiAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

std::vector<CodepointRange> DigitRanges() { return {{'0', '9'}}; }
std::vector<CodepointRange> WordRanges() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
// ECMAScript's WhiteSpace and LineTerminator.
std::vector<CodepointRange> SpaceRanges() {
  return {{0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
          {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
}

std::vector<CodepointRange> Complement(const std::vector<CodepointRange>& r) {
  return CharClass(r, true).ranges;
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view src) : src_(src) {}

  Result<ParsedRegex> Parse() {
    ParsedRegex out;
    if (!src_.empty() && src_[0] == '^') {
      out.anchored_start = true;
      begin_ = 1;
    }
    end_ = src_.size();
    if (end_ > begin_ && src_[end_ - 1] == '$') {
      size_t backslashes = 0;
      for (size_t i = end_ - 1; i > begin_ && src_[i - 1] == '\\'; --i) ++backslashes;
      if (backslashes % 2 == 0) {
        out.anchored_end = true;
        --end_;
      }
    }
    pos_ = begin_;
    TARMAC_ASSIGN_OR_RETURN(out.expr, ParseAlternation());
    if (pos_ < end_) return Error("unbalanced ')'");
    return out;
  }

 private:
  bool AtEnd() const { return pos_ >= end_; }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < end_ ? src_[pos_ + ahead] : '\0'; }

  template <typename... Args>
  Status Error(fmt::format_string<Args...> f, Args&&... args) const {
    return InvalidArgument("regex: at offset {}: {}", pos_, fmt::format(f, std::forward<Args>(args)...));
  }

  Result<Expr> ParseAlternation() {
    std::vector<Expr> alts;
    while (true) {
      TARMAC_ASSIGN_OR_RETURN(Expr seq, ParseSequence());
      alts.push_back(std::move(seq));
      if (Peek() != '|' || AtEnd()) break;
      ++pos_;
    }
    return Choice(std::move(alts));
  }

  Result<Expr> ParseSequence() {
    std::vector<Expr> items;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      TARMAC_ASSIGN_OR_RETURN(Expr atom, ParseAtom());
      TARMAC_ASSIGN_OR_RETURN(Expr rep, ParseQuantifier(std::move(atom)));
      items.push_back(std::move(rep));
    }
    return Sequence(std::move(items));
  }

  Result<Expr> ParseQuantifier(Expr atom) {
    int32_t min = 1, max = 1;
    const char c = Peek();
    if (c == '*') {
      min = 0, max = Expr::kUnbounded;
      ++pos_;
    } else if (c == '+') {
      min = 1, max = Expr::kUnbounded;
      ++pos_;
    } else if (c == '?') {
      min = 0, max = 1;
      ++pos_;
    } else if (c == '{' && IsCountedQuantifier()) {
      TARMAC_RETURN_IF_ERROR(ParseCounted(&min, &max));
    } else {
      return atom;
    }
    if (Peek() == '?') ++pos_;  // lazy: same language
    if (!AtEnd() && (Peek() == '+' || Peek() == '*' || (Peek() == '{' && IsCountedQuantifier())))
      return Error("a quantifier cannot follow a quantifier (possessive quantifiers are not supported)");
    if (!AtEnd() && Peek() == '?') return Error("nothing to repeat");
    return Repeat(std::move(atom), min, max);
  }

  // '{' starts a quantifier only as {n}, {n,} or {n,m}; otherwise it is a literal brace.
  bool IsCountedQuantifier() const {
    size_t p = pos_ + 1;
    size_t digits = 0;
    while (p < end_ && src_[p] >= '0' && src_[p] <= '9') ++p, ++digits;
    if (digits == 0) return false;
    if (p < end_ && src_[p] == '}') return true;
    if (p >= end_ || src_[p] != ',') return false;
    ++p;
    while (p < end_ && src_[p] >= '0' && src_[p] <= '9') ++p;
    return p < end_ && src_[p] == '}';
  }

  Status ParseCounted(int32_t* min, int32_t* max) {
    ++pos_;  // '{'
    TARMAC_ASSIGN_OR_RETURN(*min, ParseInt());
    *max = *min;
    if (Peek() == ',') {
      ++pos_;
      if (Peek() == '}') {
        *max = Expr::kUnbounded;
      } else {
        TARMAC_ASSIGN_OR_RETURN(*max, ParseInt());
      }
    }
    ++pos_;  // '}'
    if (*max != Expr::kUnbounded && *max < *min) return Error("quantifier {{{},{}}} has max < min", *min, *max);
    return Status::Ok();
  }

  Result<int32_t> ParseInt() {
    int64_t v = 0;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
      v = v * 10 + (Peek() - '0');
      if (v > kMaxRepeat) return Error("repetition count above {} is not supported", kMaxRepeat);
      ++pos_;
    }
    return static_cast<int32_t>(v);
  }

  Result<Expr> ParseAtom() {
    const char c = Peek();
    switch (c) {
      case '(':
        return ParseGroup();
      case '[':
        return ParseClass();
      case '.':
        ++pos_;
        return CharClass({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}, true);
      case '\\': {
        TARMAC_ASSIGN_OR_RETURN(std::vector<CodepointRange> r, ParseEscape(false));
        return CharClassOrLiteral(std::move(r));
      }
      case '^':
      case '$':
        return Error("anchor '{}' is only supported at the start ('^') or end ('$') of the pattern", c);
      case '*':
      case '+':
      case '?':
        return Error("nothing to repeat before '{}'", c);
      default: {
        size_t p = pos_;
        const uint32_t cp = DecodeUtf8(src_.substr(0, end_), &p);
        pos_ = p;
        std::string s;
        AppendUtf8(cp, &s);
        return Literal(s);
      }
    }
  }

  static Expr CharClassOrLiteral(std::vector<CodepointRange> r) {
    if (r.size() == 1 && r[0].lo == r[0].hi) {
      std::string s;
      AppendUtf8(r[0].lo, &s);
      return Literal(s);
    }
    return CharClass(std::move(r));
  }

  Result<Expr> ParseGroup() {
    if (nesting_ >= kMaxNesting) return Error("groups nested deeper than {}", kMaxNesting);
    ++pos_;  // '('
    if (Peek() == '?') {
      if (Peek(1) == ':') {
        pos_ += 2;
      } else if (Peek(1) == '<' && Peek(2) != '=' && Peek(2) != '!') {
        pos_ += 2;
        while (!AtEnd() && Peek() != '>') ++pos_;
        if (AtEnd()) return Error("unterminated group name");
        ++pos_;
      } else if (Peek(1) == 'P' && Peek(2) == '<') {
        pos_ += 3;
        while (!AtEnd() && Peek() != '>') ++pos_;
        if (AtEnd()) return Error("unterminated group name");
        ++pos_;
      } else {
        return Error("lookaround and inline flags ('(?...') are not supported");
      }
    }
    ++nesting_;
    TARMAC_ASSIGN_OR_RETURN(Expr inner, ParseAlternation());
    --nesting_;
    if (Peek() != ')' || AtEnd()) return Error("missing ')'");
    ++pos_;
    return inner;
  }

  // An escape outside (in_class false) or inside a class: its codepoint ranges.
  Result<std::vector<CodepointRange>> ParseEscape(bool in_class) {
    ++pos_;  // '\\'
    if (AtEnd()) return Error("pattern ends with a lone '\\'");
    const char e = Peek();
    ++pos_;
    auto one = [](uint32_t cp) { return std::vector<CodepointRange>{{cp, cp}}; };
    switch (e) {
      case 'd': return DigitRanges();
      case 'D': return Complement(DigitRanges());
      case 'w': return WordRanges();
      case 'W': return Complement(WordRanges());
      case 's': return SpaceRanges();
      case 'S': return Complement(SpaceRanges());
      case 't': return one('\t');
      case 'n': return one('\n');
      case 'r': return one('\r');
      case 'f': return one('\f');
      case 'v': return one('\v');
      case '0':
        if (Peek() >= '0' && Peek() <= '9') return Error("octal escapes are not supported");
        return one(0);
      case 'b':
        if (in_class) return one('\b');
        return Error("word boundaries ('\\b') are not supported");
      case 'B': return Error("word boundaries ('\\B') are not supported");
      case 'x': {
        TARMAC_ASSIGN_OR_RETURN(uint32_t cp, ParseHex(2));
        return one(cp);
      }
      case 'u': {
        if (Peek() == '{') {
          ++pos_;
          uint32_t cp = 0;
          int n = 0;
          while (!AtEnd() && HexValue(Peek()) >= 0 && n < 7) cp = cp * 16 + HexValue(Peek()), ++pos_, ++n;
          if (n == 0 || Peek() != '}' || cp > kMaxCodepoint) return Error("malformed '\\u{{...}}' escape");
          ++pos_;
          return one(cp);
        }
        TARMAC_ASSIGN_OR_RETURN(uint32_t cp, ParseHex(4));
        if (cp >= 0xD800 && cp <= 0xDBFF && Peek() == '\\' && Peek(1) == 'u') {
          pos_ += 2;  // a surrogate pair spells one codepoint
          TARMAC_ASSIGN_OR_RETURN(uint32_t low, ParseHex(4));
          if (low < 0xDC00 || low > 0xDFFF) return Error("unpaired surrogate in '\\u' escapes");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) return Error("unpaired surrogate in '\\u' escapes");
        return one(cp);
      }
      case 'c':
        if ((Peek() >= 'a' && Peek() <= 'z') || (Peek() >= 'A' && Peek() <= 'Z')) return one(src_[pos_++] % 32);
        return Error("malformed '\\c' escape");
      case 'p':
      case 'P':
        return Error("Unicode property escapes ('\\{}') are not supported", e);
      case 'k':
        return Error("backreferences ('\\k') are not supported");
      default:
        break;
    }
    if (e >= '1' && e <= '9') return Error("backreferences ('\\{}') are not supported", e);
    if (IsAsciiAlnum(e)) return Error("unknown escape '\\{}'", e);
    pos_ -= 1;
    size_t p = pos_;
    const uint32_t cp = DecodeUtf8(src_.substr(0, end_), &p);
    pos_ = p;
    return one(cp);
  }

  Result<uint32_t> ParseHex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int h = HexValue(Peek());
      if (h < 0 || AtEnd()) return Error("expected {} hex digits in an escape", digits);
      v = v * 16 + static_cast<uint32_t>(h);
      ++pos_;
    }
    return v;
  }

  Result<Expr> ParseClass() {
    ++pos_;  // '['
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CodepointRange> ranges;
    bool first = true;
    while (!AtEnd() && (Peek() != ']' || first)) {
      first = false;
      TARMAC_ASSIGN_OR_RETURN(std::vector<CodepointRange> lo, ClassAtom());
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < end_) {
        ++pos_;
        TARMAC_ASSIGN_OR_RETURN(std::vector<CodepointRange> hi, ClassAtom());
        if (lo.size() != 1 || hi.size() != 1 || lo[0].lo != lo[0].hi || hi[0].lo != hi[0].hi)
          return Error("a class escape cannot bound a range");
        if (hi[0].lo < lo[0].lo) return Error("character range is reversed");
        ranges.push_back({lo[0].lo, hi[0].lo});
      } else {
        ranges.insert(ranges.end(), lo.begin(), lo.end());
      }
    }
    if (AtEnd()) return Error("unterminated character class");
    ++pos_;  // ']'
    Expr cls = CharClass(std::move(ranges), negated);
    if (cls.ranges.empty()) return Error("character class matches no character");
    return cls;
  }

  Result<std::vector<CodepointRange>> ClassAtom() {
    if (Peek() == '\\') return ParseEscape(true);
    size_t p = pos_;
    const uint32_t cp = DecodeUtf8(src_.substr(0, end_), &p);
    pos_ = p;
    return std::vector<CodepointRange>{{cp, cp}};
  }

  std::string_view src_;
  size_t begin_ = 0, end_ = 0, pos_ = 0;
  int nesting_ = 0;
};

}  // namespace

Result<ParsedRegex> ParseRegex(std::string_view pattern) { return RegexParser(pattern).Parse(); }

Result<Grammar> GrammarFromRegex(std::string_view pattern) {
  TARMAC_ASSIGN_OR_RETURN(ParsedRegex re, ParseRegex(pattern));
  Grammar g;
  const int32_t root = g.AddRule("root");
  g.SetBody(root, std::move(re.expr));
  g.SetRoot(root);
  return g;
}

}  // namespace tarmac::grammar
