#include "grammar/call_object_scanner.h"

#include <nlohmann/json.hpp>

namespace tarmac::grammar {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The value of a complete JSON string literal, or false when it is not one.
bool Decode(const std::string& literal, std::string* out) {
  auto v = nlohmann::json::parse(literal, nullptr, /*allow_exceptions=*/false);
  if (!v.is_string()) return false;
  *out = v.get<std::string>();
  return true;
}

}  // namespace

void CallObjectScanner::StartObject() { *this = CallObjectScanner(); }

void CallObjectScanner::StartValue() {
  *this = CallObjectScanner();
  value_only_ = true;
  state_ = State::kValueStart;
  field_ = Field::kArguments;
}

std::string CallObjectScanner::TakeArguments() {
  if (state_ == State::kDone && !saw_arguments_) {
    saw_arguments_ = true;
    return "{}";
  }
  return std::exchange(args_, std::string());
}

CallObjectScanner::Status CallObjectScanner::Feed(std::string_view text, size_t* consumed, bool final) {
  *consumed = 0;
  size_t i = 0;
  while (i < text.size() && state_ != State::kDone) {
    bool used = true;
    const Status st = Byte(text[i], &used);
    if (st == Status::kFailed) return st;
    // A byte not used ended the value before it; the next state reads it again.
    if (used) *consumed = ++i;
  }
  if (state_ == State::kDone) return Status::kDone;
  if (final && value_only_ && state_ == State::kArgsRaw && scalar_) {
    state_ = State::kDone;  // a bare number or literal the text ends on
    saw_arguments_ = true;
    return Status::kDone;
  }
  return Status::kNeedMore;
}

CallObjectScanner::ValueStep CallObjectScanner::StepValue(char c) {
  if (!value_started_) {
    value_started_ = true;
    if (c == '{' || c == '[') {
      depth_ = 1;
    } else if (c == '"') {
      in_string_ = true;
    } else {
      scalar_ = true;
    }
    return ValueStep::kMore;
  }
  if (in_string_) {
    if (escape_) {
      escape_ = false;
    } else if (c == '\\') {
      escape_ = true;
    } else if (c == '"') {
      in_string_ = false;
      if (depth_ == 0) return ValueStep::kEndsWith;
    }
    return ValueStep::kMore;
  }
  if (scalar_) return (IsSpace(c) || c == ',' || c == '}' || c == ']') ? ValueStep::kEndedBefore : ValueStep::kMore;
  if (c == '"') {
    in_string_ = true;
  } else if (c == '{' || c == '[') {
    ++depth_;
  } else if (c == '}' || c == ']') {
    if (--depth_ == 0) return ValueStep::kEndsWith;
  }
  return ValueStep::kMore;
}

// One byte in the current state. *used false: the byte was not consumed (a scalar value
// ended before it) and must be offered again.
CallObjectScanner::Status CallObjectScanner::Byte(char c, bool* used) {
  *used = true;
  switch (state_) {
    case State::kObjectStart:
      if (IsSpace(c)) return Status::kNeedMore;
      if (c != '{') return *used = false, Status::kFailed;
      state_ = State::kKeyOrEnd;
      return Status::kNeedMore;
    case State::kKeyOrEnd:
      if (IsSpace(c) || c == ',') return Status::kNeedMore;
      if (c == '}') {
        state_ = State::kDone;
        return Status::kDone;
      }
      if (c != '"') return *used = false, Status::kFailed;
      literal_ = "\"";
      in_string_ = true;
      escape_ = false;
      state_ = State::kKey;
      return Status::kNeedMore;
    case State::kKey:
    case State::kNameString:
    case State::kArgsString: {
      literal_.push_back(c);
      if (escape_) {
        escape_ = false;
        return Status::kNeedMore;
      }
      if (c == '\\') {
        escape_ = true;
        return Status::kNeedMore;
      }
      if (c != '"') return Status::kNeedMore;
      in_string_ = false;
      std::string value;
      if (!Decode(literal_, &value)) return Status::kFailed;
      if (state_ == State::kKey) {
        field_ = value == "name" ? Field::kName
                 : (value == "arguments" || value == "parameters") ? Field::kArguments
                                                                   : Field::kOther;
        state_ = State::kColon;
      } else if (state_ == State::kNameString) {
        if (!has_name_) SetName(std::move(value));
        state_ = State::kAfterValue;
      } else {
        args_ += value;
        saw_arguments_ = true;
        if (value_only_) return state_ = State::kDone, Status::kDone;
        state_ = State::kAfterValue;
      }
      return Status::kNeedMore;
    }
    case State::kColon:
      if (IsSpace(c)) return Status::kNeedMore;
      if (c != ':') return *used = false, Status::kFailed;
      state_ = State::kValueStart;
      return Status::kNeedMore;
    case State::kValueStart:
      if (IsSpace(c)) return Status::kNeedMore;
      in_string_ = escape_ = scalar_ = value_started_ = false;
      depth_ = 0;
      if (field_ == Field::kName) {
        if (c != '"') return *used = false, Status::kFailed;
        literal_ = "\"";
        state_ = State::kNameString;
        return Status::kNeedMore;
      }
      if (field_ == Field::kArguments && c == '"') {
        literal_ = "\"";
        state_ = State::kArgsString;
        return Status::kNeedMore;
      }
      if (c == ',' || c == '}' || c == ']' || c == ':') return *used = false, Status::kFailed;
      state_ = field_ == Field::kArguments ? State::kArgsRaw : State::kSkip;
      [[fallthrough]];
    case State::kArgsRaw:
    case State::kSkip: {
      const ValueStep step = StepValue(c);
      if (step == ValueStep::kEndedBefore) *used = false;
      const bool copy = state_ == State::kArgsRaw;
      if (copy && *used) args_.push_back(c);
      if (step == ValueStep::kMore) return Status::kNeedMore;
      if (copy) saw_arguments_ = true;
      if (value_only_) return state_ = State::kDone, Status::kDone;
      state_ = State::kAfterValue;
      return Status::kNeedMore;
    }
    case State::kAfterValue:
      if (IsSpace(c)) return Status::kNeedMore;
      if (c == ',') {
        state_ = State::kKeyOrEnd;
        return Status::kNeedMore;
      }
      if (c == '}') {
        state_ = State::kDone;
        return Status::kDone;
      }
      return *used = false, Status::kFailed;
    case State::kDone:
      return Status::kDone;
  }
  return Status::kFailed;
}

}  // namespace tarmac::grammar
