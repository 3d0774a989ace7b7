#include "grammar/json_values.h"

#include "base/check.h"
#include "base/utf8.h"
#include "grammar/regex_parser.h"

namespace tarmac::grammar {
namespace {

Expr Hex() { return CharClass({{'0', '9'}, {'A', 'F'}, {'a', 'f'}}); }

// The JSON spelling of one codepoint inside a string.
std::string EscapeCodepoint(uint32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
  }
  if (cp < 0x20) return fmt::format("\\u{:04x}", cp);
  std::string s;
  AppendUtf8(cp, &s);
  return s;
}

bool NeedsEscape(uint32_t cp) { return cp < 0x20 || cp == '"' || cp == '\\'; }

// Fixed regexes for the supported formats: strict enough that every string they allow is
// valid in the format (dates respect month lengths and leap years; year 0000 does not exist).
constexpr std::string_view kYear = "([0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)";
constexpr std::string_view kLeapYear = "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)";

std::string DateRegex() {
  const std::string y(kYear);
  return "(" + y + "-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|" + y + "-(0[13-9]|1[0-2])-(29|30)|" + y +
         "-(0[13578]|1[02])-31|" + std::string(kLeapYear) + "-02-29)";
}
constexpr std::string_view kTime =
    "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
constexpr std::string_view kUuid = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
constexpr std::string_view kEmail =
    "[A-Za-z0-9_%+-]+(\\.[A-Za-z0-9_%+-]+)*@[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"
    "(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)+";
constexpr std::string_view kIpv4Octet = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";

Expr MustRegex(const std::string& pattern) {
  auto re = ParseRegex(pattern);
  TARMAC_CHECK(re.ok());
  return std::move(re).value().expr;
}

}  // namespace

Expr JsonWhitespace(int32_t max_chars) {
  if (max_chars == 0) return Empty();
  return Repeat(CharClass({{'\t', '\n'}, {'\r', '\r'}, {' ', ' '}}), 0, max_chars);
}

Expr JsonStringChar() {
  Expr plain = CharClass({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, kMaxCodepoint}});
  // \uXXXX outside D800-DFFF: a lone surrogate escape would count as two characters in
  // validators that join pairs, and is not a character anyway.
  Expr u = Choice({Sequence({CharClass({{'0', '9'}, {'A', 'C'}, {'E', 'F'}, {'a', 'c'}, {'e', 'f'}}), Hex(), Hex(), Hex()}),
                   Sequence({CharClass({{'D', 'D'}, {'d', 'd'}}), CharClass({{'0', '7'}}), Hex(), Hex()})});
  Expr escape = Sequence({Literal("\\"), Choice({CharClass({{'"', '"'}, {'/', '/'}, {'\\', '\\'}, {'b', 'b'}, {'f', 'f'},
                                                           {'n', 'n'}, {'r', 'r'}, {'t', 't'}}),
                                                 Sequence({Literal("u"), std::move(u)})})});
  return Choice({std::move(plain), std::move(escape)});
}

Expr JsonString(int32_t min_chars, int32_t max_chars) {
  return Sequence({Literal("\""), Repeat(JsonStringChar(), min_chars, max_chars), Literal("\"")});
}

Expr JsonEscaped(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kEmpty:
    case ExprKind::kRuleRef:
      return e;
    case ExprKind::kLiteral: {
      std::string out;
      size_t pos = 0;
      while (pos < e.text.size()) out += EscapeCodepoint(DecodeUtf8(e.text, &pos));
      return Literal(out);
    }
    case ExprKind::kCharClass: {
      std::vector<CodepointRange> plain;
      std::vector<Expr> alts;
      for (const CodepointRange& r : e.ranges) {
        for (uint32_t cp = r.lo; cp <= r.hi && cp < 0x5D; ++cp)
          if (NeedsEscape(cp)) alts.push_back(Literal(EscapeCodepoint(cp)));
        plain.push_back(r);
      }
      Expr safe = CharClass({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, kMaxCodepoint}});
      // plain ∩ safe: the complement of (complement(plain) ∪ complement(safe)).
      std::vector<CodepointRange> outside = CharClass(plain, true).ranges;
      for (const CodepointRange& r : CharClass(safe.ranges, true).ranges) outside.push_back(r);
      Expr kept = CharClass(outside, true);
      if (!kept.ranges.empty()) alts.insert(alts.begin(), std::move(kept));
      return Choice(std::move(alts));
    }
    case ExprKind::kSequence:
    case ExprKind::kChoice: {
      std::vector<Expr> items;
      for (const Expr& item : e.items) items.push_back(JsonEscaped(item));
      return e.kind == ExprKind::kSequence ? Sequence(std::move(items)) : Choice(std::move(items));
    }
    case ExprKind::kRepeat:
      return Repeat(JsonEscaped(e.items[0]), e.min, e.max);
  }
  return e;
}

Result<Expr> JsonStringFormat(std::string_view format) {
  if (format == "date") return MustRegex(DateRegex());
  if (format == "time") return MustRegex(std::string(kTime));
  if (format == "date-time") return MustRegex(DateRegex() + "T" + std::string(kTime));
  if (format == "uuid") return MustRegex(std::string(kUuid));
  if (format == "email") return MustRegex(std::string(kEmail));
  if (format == "ipv4") {
    const std::string o(kIpv4Octet);
    return MustRegex(o + "(\\." + o + "){3}");
  }
  return Unimplemented("format '{}' is not supported (supported: date, time, date-time, uuid, email, ipv4)", format);
}

Expr JsonInteger() {
  return Sequence({Optional(Literal("-")),
                   Choice({Literal("0"), Sequence({CharClass({{'1', '9'}}), Star(CharClass({{'0', '9'}}))})})});
}

Expr JsonNumber() {
  Expr digits = Plus(CharClass({{'0', '9'}}));
  return Sequence({JsonInteger(), Optional(Sequence({Literal("."), digits})),
                   Optional(Sequence({CharClass({{'E', 'E'}, {'e', 'e'}}), Optional(CharClass({{'+', '+'}, {'-', '-'}})),
                                      digits}))});
}

Expr JsonLiteral(const nlohmann::ordered_json& value) {
  return Literal(value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
}

Expr JsonValueRules::AnyValue() {
  if (object_ < 0) {
    // The rules refer to each other through the value choice below.
    object_ = g_->AddRule(prefix_ + "-object");
    array_ = g_->AddRule(prefix_ + "-array");
    const int32_t obj = object_, arr = array_;
    const Expr ws = JsonWhitespace(max_ws_);
    const Expr sep = Sequence({ws, Literal(","), ws});
    Expr value = Choice({RuleRef(obj), RuleRef(arr), JsonString(0, Expr::kUnbounded), JsonNumber(), Literal("true"),
                         Literal("false"), Literal("null")});
    const Expr kv = Sequence({JsonString(0, Expr::kUnbounded), ws, Literal(":"), ws, value});
    g_->SetBody(obj, Sequence({Literal("{"), ws, Optional(Sequence({kv, Star(Sequence({sep, kv})), ws})), Literal("}")}));
    g_->SetBody(arr,
                Sequence({Literal("["), ws, Optional(Sequence({value, Star(Sequence({sep, value})), ws})), Literal("]")}));
  }
  return Choice({RuleRef(object_), RuleRef(array_), JsonString(0, Expr::kUnbounded), JsonNumber(), Literal("true"),
                 Literal("false"), Literal("null")});
}

int32_t JsonValueRules::ObjectRule() {
  AnyValue();
  return object_;
}

}  // namespace tarmac::grammar
