// Lexer: mirrors Jinja2's lexer states (root, comment, block, variable, raw).
#include "chat_template/lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "base/utf8.h"
#include "chat_template/value.h"

namespace tarmac::chat_template {
namespace {

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Python's \s on one code point at s[pos]; returns its byte length or 0.
size_t PyspaceAt(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  unsigned char c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80) return IsPyWhitespace(c) ? 1 : 0;
  size_t p = pos;
  uint32_t cp = DecodeUtf8(s, &p);
  return IsPyWhitespace(cp) ? p - pos : 0;
}

// Python str.rstrip(): strips trailing Unicode whitespace.
std::string_view PyRstrip(std::string_view s) {
  std::vector<uint32_t> cps;
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t p = start;
    uint32_t cp = DecodeUtf8(s, &p);
    if (p != end || !IsPyWhitespace(cp)) break;
    end = start;
  }
  return s.substr(0, end);
}

bool AllPyspace(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t n = PyspaceAt(s, pos);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> Run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t tag = FindTagStart(pos_);
      if (tag == std::string::npos) {
        Emit(TokKind::kText, src_.substr(pos_), pos_);
        pos_ = src_.size();
        break;
      }
      char kind = src_[tag + 1];  // '{', '%' or '#'
      char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (sign != '-' && sign != '+') sign = '\0';
      std::string_view text(src_.data() + pos_, tag - pos_);
      if (sign == '-') {
        text = PyRstrip(text);
      } else if (sign != '+' && kind != '{') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string_view::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() && AllPyspace(text.substr(l_pos))) {
          text = text.substr(0, l_pos);
        }
      }
      if (!text.empty()) Emit(TokKind::kText, std::string(text), pos_);
      size_t body = tag + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        line_starting = LexComment(tag, body);
      } else if (kind == '%' && IsRaw(body)) {
        line_starting = LexRaw(tag, body);
      } else {
        line_starting = LexTag(tag, body, kind == '%');
      }
    }
    Token eof;
    eof.kind = TokKind::kEof;
    Locate(src_.size(), &eof);
    tokens_.push_back(eof);
    return std::move(tokens_);
  }

 private:
  size_t FindTagStart(size_t from) const {
    size_t p = from;
    while (true) {
      p = src_.find('{', p);
      if (p == std::string::npos || p + 1 >= src_.size()) return std::string::npos;
      char c = src_[p + 1];
      if (c == '{' || c == '%' || c == '#') return p;
      ++p;
    }
  }

  void Locate(size_t offset, Token* t) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    size_t line = static_cast<size_t>(it - line_starts_.begin());
    size_t start = line_starts_[line - 1];
    t->line = static_cast<int>(line);
    t->column = static_cast<int>(CodepointLength(std::string_view(src_).substr(start, offset - start))) + 1;
  }

  [[noreturn]] void Fail(const std::string& msg, size_t offset) const {
    Token t;
    Locate(offset, &t);
    throw TemplateError(msg, t.line, t.column);
  }

  void Emit(TokKind k, std::string text, size_t offset) {
    Token t;
    t.kind = k;
    t.text = std::move(text);
    Locate(offset, &t);
    tokens_.push_back(std::move(t));
  }

  // After an end delimiter at `p` (pointing just past it): '-' variants eat all following
  // whitespace, block/comment ends eat one newline (trim_blocks). Returns line_starting.
  bool FinishEnd(size_t p, bool strip_after, bool trim_newline) {
    if (strip_after) {
      size_t q = p;
      while (size_t n = PyspaceAt(src_, q)) q += n;
      pos_ = q;
      return q > p && src_[q - 1] == '\n';
    }
    if (trim_newline && p < src_.size() && src_[p] == '\n') {
      pos_ = p + 1;
      return true;
    }
    pos_ = p;
    return false;
  }

  bool LexComment(size_t tag, size_t body) {
    size_t end = src_.find("#}", body);
    if (end == std::string::npos) Fail("missing end of comment tag", tag);
    if (end > body && src_[end - 1] == '-') return FinishEnd(end + 2, true, false);
    if (end > body && src_[end - 1] == '+') return FinishEnd(end + 2, false, false);
    return FinishEnd(end + 2, false, true);
  }

  // {%[-+]?\s*raw\s*(-%}|%})
  bool IsRaw(size_t body) const {
    size_t p = body;
    while (p < src_.size() && IsAsciiSpace(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < src_.size() && IsAsciiSpace(src_[p])) ++p;
    return src_.compare(p, 2, "%}") == 0 || src_.compare(p, 3, "-%}") == 0;
  }

  bool LexRaw(size_t tag, size_t body) {
    size_t p = body;
    while (IsAsciiSpace(src_[p])) ++p;
    p += 3;
    while (IsAsciiSpace(src_[p])) ++p;
    if (src_[p] == '-') {
      p += 3;
      while (size_t n = PyspaceAt(src_, p)) p += n;
    } else {
      p += 2;
    }
    // Find {%[-+]?\s*endraw\s*(+%}|-%}|%})
    size_t search = p;
    while (true) {
      size_t t = src_.find("{%", search);
      if (t == std::string::npos) Fail("missing end of raw directive", tag);
      size_t q = t + 2;
      char sign = (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ? src_[q] : '\0';
      if (sign) ++q;
      while (q < src_.size() && IsAsciiSpace(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) {
        search = t + 2;
        continue;
      }
      q += 6;
      while (q < src_.size() && IsAsciiSpace(src_[q])) ++q;
      char esign = '\0';
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) esign = src_[q++];
      if (src_.compare(q, 2, "%}") != 0) {
        search = t + 2;
        continue;
      }
      std::string_view text(src_.data() + p, t - p);
      if (sign == '-') {
        text = PyRstrip(text);
      } else if (sign != '+') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string_view::npos ? 0 : l_pos + 1;
        if (l_pos > 0 && l_pos < text.size() && AllPyspace(text.substr(l_pos))) text = text.substr(0, l_pos);
      }
      if (!text.empty()) Emit(TokKind::kText, std::string(text), p);
      return FinishEnd(q + 2, esign == '-', esign == '\0');
    }
  }

  bool LexTag(size_t tag, size_t body, bool is_block) {
    Emit(is_block ? TokKind::kBlockBegin : TokKind::kVarBegin, "", tag);
    std::vector<char> balance;
    size_t p = body;
    while (true) {
      while (size_t n = PyspaceAt(src_, p)) p += n;
      if (p >= src_.size()) Fail(is_block ? "unexpected end of template inside a {% %} tag"
                                          : "unexpected end of template inside a {{ }} tag", tag);
      if (balance.empty()) {
        if (is_block) {
          if (src_.compare(p, 3, "+%}") == 0) {
            Emit(TokKind::kBlockEnd, "", p);
            return FinishEnd(p + 3, false, false);
          }
          if (src_.compare(p, 3, "-%}") == 0) {
            Emit(TokKind::kBlockEnd, "", p);
            return FinishEnd(p + 3, true, false);
          }
          if (src_.compare(p, 2, "%}") == 0) {
            Emit(TokKind::kBlockEnd, "", p);
            return FinishEnd(p + 2, false, true);
          }
        } else {
          if (src_.compare(p, 3, "-}}") == 0) {
            Emit(TokKind::kVarEnd, "", p);
            return FinishEnd(p + 3, true, false);
          }
          if (src_.compare(p, 2, "}}") == 0) {
            Emit(TokKind::kVarEnd, "", p);
            return FinishEnd(p + 2, false, false);
          }
        }
      }
      p = LexExprToken(p, &balance);
    }
  }

  size_t LexExprToken(size_t p, std::vector<char>* balance) {
    char c = src_[p];
    if (std::isdigit(static_cast<unsigned char>(c))) return LexNumber(p);
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t q = p;
      while (q < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) ++q;
      Emit(TokKind::kName, src_.substr(p, q - p), p);
      return q;
    }
    if (c == '\'' || c == '"') return LexString(p);
    static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~",
                                 "<", ">", "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", ";"};
    for (const char* op : kOps) {
      size_t n = std::char_traits<char>::length(op);
      if (src_.compare(p, n, op) == 0) {
        std::string s(op);
        if (s == "(" || s == "[" || s == "{") {
          balance->push_back(s == "(" ? ')' : s == "[" ? ']' : '}');
        } else if (s == ")" || s == "]" || s == "}") {
          if (balance->empty()) Fail("unexpected '" + s + "'", p);
          if (balance->back() != s[0]) {
            Fail("unexpected '" + s + "', expected '" + std::string(1, balance->back()) + "'", p);
          }
          balance->pop_back();
        }
        Emit(TokKind::kOp, s, p);
        return p + n;
      }
    }
    size_t q = p;
    uint32_t cp = DecodeUtf8(src_, &q);
    std::string ch;
    AppendUtf8(cp, &ch);
    Fail("unexpected character '" + ch + "'", p);
  }

  // Jinja2: integers (digits with single underscores), floats with a fraction and/or exponent.
  size_t LexNumber(size_t p) {
    auto digits = [&](size_t q) {
      size_t start = q;
      while (q < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[q])) ||
                                 (src_[q] == '_' && q > start && q + 1 < src_.size() &&
                                  std::isdigit(static_cast<unsigned char>(src_[q + 1]))))) {
        ++q;
      }
      return q;
    };
    size_t q = digits(p);
    bool is_float = false;
    if (q + 1 < src_.size() && src_[q] == '.' && std::isdigit(static_cast<unsigned char>(src_[q + 1]))) {
      is_float = true;
      q = digits(q + 1);
    }
    if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
      size_t r = q + 1;
      if (r < src_.size() && (src_[r] == '+' || src_[r] == '-')) ++r;
      if (r < src_.size() && std::isdigit(static_cast<unsigned char>(src_[r]))) {
        is_float = true;
        q = digits(r);
      }
    }
    std::string text;
    for (size_t i = p; i < q; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    Token t;
    Locate(p, &t);
    t.text = text;
    if (is_float) {
      t.kind = TokKind::kFloat;
      t.fval = std::strtod(text.c_str(), nullptr);
    } else {
      t.kind = TokKind::kInt;
      errno = 0;
      t.ival = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) Fail("integer literal too large: " + text, p);
    }
    tokens_.push_back(std::move(t));
    return q;
  }

  size_t LexString(size_t p) {
    char quote = src_[p];
    std::string out;
    size_t q = p + 1;
    while (true) {
      if (q >= src_.size()) Fail("unterminated string literal", p);
      char c = src_[q];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++q;
        continue;
      }
      if (q + 1 >= src_.size()) Fail("unterminated string literal", p);
      char e = src_[q + 1];
      q += 2;
      switch (e) {
        case '\n': break;  // line continuation
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (q + n > src_.size()) Fail("truncated \\" + std::string(1, e) + " escape in string literal", q - 2);
          uint32_t cp = 0;
          for (int i = 0; i < n; ++i) {
            char h = src_[q + i];
            int d = std::isdigit(static_cast<unsigned char>(h)) ? h - '0'
                    : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (d < 0) Fail("truncated \\" + std::string(1, e) + " escape in string literal", q - 2);
            cp = cp * 16 + static_cast<uint32_t>(d);
          }
          q += n;
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            Fail("escape in string literal is not a valid code point", q - n - 2);
          }
          AppendUtf8(cp, &out);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int i = 0; i < 2 && q < src_.size() && src_[q] >= '0' && src_[q] <= '7'; ++i) {
              cp = cp * 8 + static_cast<uint32_t>(src_[q++] - '0');
            }
            AppendUtf8(cp, &out);
          } else if (e == 'N') {
            Fail("\\N{...} escapes are not supported", q - 2);
          } else {
            out += '\\';  // unknown escapes stay as written, like Python
            q -= 1;
          }
      }
    }
    Emit(TokKind::kString, std::move(out), p);
    return q + 1;
  }

  std::string src_;
  size_t pos_ = 0;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::string NormalizeSource(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::vector<Token> Lex(std::string_view source) {
  if (!IsValidUtf8(source)) throw TemplateError("template source is not valid UTF-8");
  return Lexer(NormalizeSource(source)).Run();
}

const char* TokKindName(TokKind k) {
  switch (k) {
    case TokKind::kText: return "text";
    case TokKind::kVarBegin: return "'{{'";
    case TokKind::kVarEnd: return "'}}'";
    case TokKind::kBlockBegin: return "'{%'";
    case TokKind::kBlockEnd: return "'%}'";
    case TokKind::kName: return "name";
    case TokKind::kString: return "string";
    case TokKind::kInt: return "integer";
    case TokKind::kFloat: return "float";
    case TokKind::kOp: return "operator";
    case TokKind::kEof: return "end of template";
  }
  return "?";
}

}  // namespace tarmac::chat_template
