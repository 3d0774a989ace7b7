#include "grammar/tool_call_parser.h"

#include <fmt/format.h>

#include "grammar/call_object_scanner.h"

namespace tarmac::grammar {
namespace {

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Length of the longest suffix of s that is a proper prefix of marker: text that must wait.
size_t PartialMarker(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.';
}

}  // namespace

// The parser is a state machine over the text not yet consumed (buf_ from pos_). Each Step
// consumes something and/or changes mode, or reports that it must wait for more text.
class ToolCallStreamParser::Impl {
 public:
  Impl(ToolCallFormat format, ToolCallParserOptions options) : format_(format), opts_(std::move(options)) {
    if (!opts_.make_id) opts_.make_id = [](int32_t i) { return fmt::format("call_{}", i); };
    mode_ = Mode::kStart;
  }

  ToolCallEvents Feed(std::string_view text, bool final) {
    buf_.append(text);
    ToolCallEvents ev;
    while (Step(final, &ev)) {
    }
    buf_.erase(0, pos_);
    pos_ = 0;
    return ev;
  }

 private:
  enum class Mode {
    kStart,       // nothing read yet
    kContent,     // text, watching for the format's marker
    kPlain,       // text to the end (no marker can follow)
    kAfterMarker, // a marker was read; what follows decides
    kCall,        // inside a call object (or an arguments value)
    kAfterCall,   // a call ended; a separator or closing marker may follow
    kArray,       // Mistral's list of calls
    kV11Name,     // Mistral v11: the name up to [ARGS]
    kAfterClose,  // Hermes: after </tool_call>; whitespace up to what follows is dropped
    kSkipToClose, // Hermes: a broken call; drop text up to </tool_call>
    kIgnore,      // a broken call in a format without a closing marker: drop the rest
  };

  std::string_view Rest() const { return std::string_view(buf_).substr(pos_); }
  void Consume(size_t n, bool hold) {
    if (hold) held_.append(buf_, pos_, n);
    pos_ += n;
  }
  // Skips whitespace (held while a call attempt is undecided). False when the text ran out.
  bool SkipSpace(bool hold) {
    size_t n = 0;
    const std::string_view r = Rest();
    while (n < r.size() && IsSpace(r[n])) ++n;
    Consume(n, hold);
    return pos_ < buf_.size();
  }
  // A call attempt failed before its name was known: what it read is content after all.
  void GiveBack(ToolCallEvents* ev, Mode next) {
    ev->content += held_;
    held_.clear();
    mode_ = next;
  }
  Mode ContentMode() const { return format_ == ToolCallFormat::kLlama3Json ? Mode::kPlain : Mode::kContent; }

  void StartCall(ToolCallEvents* ev) {
    ToolCallDelta d;
    d.index = next_index_++;
    d.id = opts_.make_id(d.index);
    d.name = scanner_.name();
    ev->tool_calls.push_back(std::move(d));
    in_call_ = true;
    any_call_ = true;
    held_.clear();
  }
  void EmitArguments(ToolCallEvents* ev) {
    std::string args = scanner_.TakeArguments();
    if (args.empty()) return;
    if (!ev->tool_calls.empty() && ev->tool_calls.back().index == next_index_ - 1 && ev->tool_calls.back().id.empty()) {
      ev->tool_calls.back().arguments += args;  // merge fragments within one Feed
    } else {
      ToolCallDelta d;
      d.index = next_index_ - 1;
      d.arguments = std::move(args);
      ev->tool_calls.push_back(std::move(d));
    }
  }

  bool Step(bool final, ToolCallEvents* ev) {
    switch (mode_) {
      case Mode::kStart: return StepStart(final, ev);
      case Mode::kContent: return StepContent(final, ev);
      case Mode::kPlain:
        ev->content += Rest();
        pos_ = buf_.size();
        return false;
      case Mode::kAfterMarker: return StepAfterMarker(final, ev);
      case Mode::kCall: return StepCall(final, ev);
      case Mode::kAfterCall: return StepAfterCall(final, ev);
      case Mode::kArray: return StepArray(final, ev);
      case Mode::kV11Name: return StepV11Name(final, ev);
      case Mode::kAfterClose:
        if (!SkipSpace(false)) return false;
        mode_ = Mode::kContent;
        return true;
      case Mode::kSkipToClose: return StepSkipToClose(final);
      case Mode::kIgnore:
        pos_ = buf_.size();
        return false;
    }
    return false;
  }

  bool StepStart(bool final, ToolCallEvents* ev) {
    if (format_ == ToolCallFormat::kNone) return mode_ = Mode::kPlain, true;
    if (format_ == ToolCallFormat::kHermes) return mode_ = Mode::kContent, true;
    if (format_ == ToolCallFormat::kMistral) return mode_ = opts_.forced ? Mode::kAfterMarker : Mode::kContent, true;
    // Llama 3: a call can only open the output, after <|python_tag|> or as a JSON object.
    if (!SkipSpace(true)) return final ? (GiveBack(ev, Mode::kPlain), true) : false;
    const std::string_view r = Rest();
    if (r.substr(0, kPythonTag.size()) == kPythonTag) {
      Consume(kPythonTag.size(), true);
      mode_ = Mode::kAfterMarker;
      return true;
    }
    if (!final && r.size() < kPythonTag.size() && kPythonTag.substr(0, r.size()) == r) return false;
    mode_ = Mode::kAfterMarker;
    return true;
  }

  bool StepContent(bool final, ToolCallEvents* ev) {
    const std::string_view marker = format_ == ToolCallFormat::kHermes ? kHermesOpen : kMistralMarker;
    const std::string_view r = Rest();
    const size_t at = r.find(marker);
    if (at == std::string_view::npos) {
      const size_t keep = final ? 0 : PartialMarker(r, marker);
      ev->content += r.substr(0, r.size() - keep);
      pos_ += r.size() - keep;
      return false;
    }
    ev->content += r.substr(0, at);
    pos_ += at;
    held_.clear();
    Consume(marker.size(), true);
    if (format_ == ToolCallFormat::kHermes) {
      scanner_.StartObject();
      mode_ = Mode::kCall;
    } else {
      mode_ = Mode::kAfterMarker;
      any_call_ = false;
    }
    return true;
  }

  bool StepAfterMarker(bool final, ToolCallEvents* ev) {
    if (!SkipSpace(true)) return final ? (GiveBack(ev, ContentMode()), true) : false;
    const char c = Rest()[0];
    if (format_ == ToolCallFormat::kMistral) {
      if (c == '[') {
        Consume(1, true);
        mode_ = Mode::kArray;
      } else if (IsNameChar(c)) {
        mode_ = Mode::kV11Name;
      } else {
        GiveBack(ev, Mode::kContent);
      }
      return true;
    }
    if (c != '{') return GiveBack(ev, Mode::kPlain), true;  // Llama 3: not a call
    scanner_.StartObject();
    mode_ = Mode::kCall;
    return true;
  }

  bool StepCall(bool final, ToolCallEvents* ev) {
    size_t used = 0;
    const CallObjectScanner::Status st = scanner_.Feed(Rest(), &used, final);
    Consume(used, !in_call_);
    if (!in_call_ && scanner_.has_name()) StartCall(ev);
    if (in_call_) EmitArguments(ev);
    const bool in_array = format_ == ToolCallFormat::kMistral && array_;
    switch (st) {
      case CallObjectScanner::Status::kNeedMore:
        if (!final) return false;
        if (!in_call_) {
          GiveBack(ev, ContentMode());
        } else {
          in_call_ = false;
          mode_ = Mode::kIgnore;  // the output ended inside a call (max_tokens)
        }
        return true;
      case CallObjectScanner::Status::kDone:
        if (!in_call_) {  // an object without a name is not a call
          GiveBack(ev, ContentMode());
          return true;
        }
        EmitArguments(ev);
        in_call_ = false;
        mode_ = in_array ? Mode::kArray : format_ == ToolCallFormat::kMistral ? Mode::kContent : Mode::kAfterCall;
        return true;
      case CallObjectScanner::Status::kFailed:
        if (!in_call_ && !(in_array && any_call_)) {
          GiveBack(ev, ContentMode());
          return true;
        }
        in_call_ = false;
        held_.clear();
        mode_ = format_ == ToolCallFormat::kHermes ? Mode::kSkipToClose : Mode::kIgnore;
        return true;
    }
    return false;
  }

  bool StepAfterCall(bool final, ToolCallEvents* ev) {
    if (!SkipSpace(false)) return false;
    const std::string_view r = Rest();
    if (format_ == ToolCallFormat::kHermes) {
      if (r.substr(0, kHermesClose.size()) == kHermesClose) {
        Consume(kHermesClose.size(), false);
        mode_ = Mode::kAfterClose;
        return true;
      }
      if (!final && r.size() < kHermesClose.size() && kHermesClose.substr(0, r.size()) == r) return false;
      mode_ = Mode::kSkipToClose;
      return true;
    }
    // Llama 3: more calls after ';' (or directly), else the rest is text.
    if (r[0] == ';') {
      Consume(1, false);
      return true;
    }
    if (r[0] == '{') {
      held_.clear();
      scanner_.StartObject();
      mode_ = Mode::kCall;
      return true;
    }
    mode_ = Mode::kPlain;
    return true;
  }

  bool StepArray(bool final, ToolCallEvents* ev) {
    array_ = true;
    if (!SkipSpace(!any_call_)) {
      if (!final) return false;
      if (any_call_) {
        mode_ = Mode::kIgnore;  // the output ended inside the list
      } else {
        GiveBack(ev, Mode::kContent);
      }
      return true;
    }
    const char c = Rest()[0];
    if (c == ',') {
      Consume(1, !any_call_);
      return true;
    }
    if (c == ']') {
      Consume(1, !any_call_);
      array_ = false;
      if (!any_call_) return GiveBack(ev, Mode::kContent), true;  // "[TOOL_CALLS][]"
      mode_ = Mode::kContent;
      return true;
    }
    if (c == '{') {
      scanner_.StartObject();
      mode_ = Mode::kCall;
      return true;
    }
    array_ = false;
    if (!any_call_) return GiveBack(ev, Mode::kContent), true;
    mode_ = Mode::kIgnore;
    return true;
  }

  bool StepV11Name(bool final, ToolCallEvents* ev) {
    const std::string_view r = Rest();
    size_t n = 0;
    while (n < r.size() && IsNameChar(r[n])) ++n;
    if (n == r.size()) return final ? (GiveBack(ev, Mode::kContent), true) : false;
    const std::string_view after = r.substr(n);
    if (after.substr(0, kMistralArgs.size()) != kMistralArgs) {
      if (!final && after.size() < kMistralArgs.size() && kMistralArgs.substr(0, after.size()) == after) return false;
      Consume(n, true);
      GiveBack(ev, Mode::kContent);
      return true;
    }
    scanner_.StartValue();
    scanner_.SetName(std::string(r.substr(0, n)));
    Consume(n + kMistralArgs.size(), true);
    StartCall(ev);
    array_ = false;
    mode_ = Mode::kCall;
    return true;
  }

  bool StepSkipToClose(bool final) {
    const std::string_view r = Rest();
    const size_t at = r.find(kHermesClose);
    if (at == std::string_view::npos) {
      pos_ += r.size() - (final ? 0 : PartialMarker(r, kHermesClose));
      return false;
    }
    pos_ += at + kHermesClose.size();
    mode_ = Mode::kAfterClose;
    return true;
  }

  const ToolCallFormat format_;
  ToolCallParserOptions opts_;
  Mode mode_;
  std::string buf_;
  size_t pos_ = 0;
  std::string held_;  // read by an undecided call attempt; content if it fails
  CallObjectScanner scanner_;
  bool in_call_ = false;   // the current call's first delta went out
  bool any_call_ = false;  // a call of the current Mistral list went out
  bool array_ = false;     // inside Mistral's list
  int32_t next_index_ = 0;
};

ToolCallStreamParser::ToolCallStreamParser(ToolCallFormat format, ToolCallParserOptions options)
    : impl_(std::make_unique<Impl>(format, std::move(options))) {}
ToolCallStreamParser::~ToolCallStreamParser() = default;
ToolCallStreamParser::ToolCallStreamParser(ToolCallStreamParser&&) noexcept = default;
ToolCallStreamParser& ToolCallStreamParser::operator=(ToolCallStreamParser&&) noexcept = default;

ToolCallEvents ToolCallStreamParser::Feed(std::string_view text) { return impl_->Feed(text, false); }
ToolCallEvents ToolCallStreamParser::Finish() { return impl_->Feed("", true); }

void AccumulateToolCallEvents(const ToolCallEvents& events, ParsedToolCalls* out) {
  out->content += events.content;
  for (const ToolCallDelta& d : events.tool_calls) {
    if (d.index >= static_cast<int32_t>(out->tool_calls.size())) out->tool_calls.resize(d.index + 1);
    ToolCall& call = out->tool_calls[d.index];
    if (!d.id.empty()) call.id = d.id;
    if (!d.name.empty()) call.name = d.name;
    call.arguments += d.arguments;
  }
}

ParsedToolCalls ParseToolCalls(std::string_view text, ToolCallFormat format, const ToolCallParserOptions& options) {
  ToolCallStreamParser parser(format, options);
  ParsedToolCalls out;
  AccumulateToolCallEvents(parser.Feed(text), &out);
  AccumulateToolCallEvents(parser.Finish(), &out);
  return out;
}

}  // namespace tarmac::grammar
