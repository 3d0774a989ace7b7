// CallObjectScanner: an incremental reader of one tool call written as JSON,
// {"name": "...", "arguments": <value>} ("parameters" is a synonym; keys in any order; others
// skipped), or of a bare arguments value. It checks the structure only (strings, escapes,
// nesting), and hands the arguments out as they arrive, so a streaming parser can forward
// them before the call is complete. Internal to tool_call_parser.cc.
//
// Plain state; one per call being read, one thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tarmac::grammar {

class CallObjectScanner {
 public:
  enum class Status { kNeedMore, kDone, kFailed };

  // Expects a call object (leading whitespace allowed).
  void StartObject();
  // Expects the arguments value alone; the name comes from elsewhere (SetName).
  void StartValue();
  void SetName(std::string name) {
    name_ = std::move(name);
    has_name_ = true;
  }

  // Consumes a prefix of text; *consumed is how much (on kFailed: up to the offending byte).
  // final: no more text will come (a number at the very end is then complete).
  Status Feed(std::string_view text, size_t* consumed, bool final);

  bool has_name() const { return has_name_; }
  const std::string& name() const { return name_; }
  // Argument text that arrived since the last call ("{}" once a call without arguments ends).
  std::string TakeArguments();

 private:
  enum class State { kObjectStart, kKeyOrEnd, kKey, kColon, kValueStart, kNameString, kArgsRaw, kArgsString, kSkip,
                     kAfterValue, kDone };
  enum class ValueStep { kMore, kEndsWith, kEndedBefore };
  enum class Field { kName, kArguments, kOther };

  // One byte of a raw JSON value being skipped or copied.
  ValueStep StepValue(char c);
  Status Byte(char c, bool* used);

  State state_ = State::kObjectStart;
  bool value_only_ = false;
  Field field_ = Field::kOther;
  std::string literal_;  // raw text of the key, name or string argument being read
  bool in_string_ = false, escape_ = false, scalar_ = false, value_started_ = false;
  int depth_ = 0;
  bool has_name_ = false, saw_arguments_ = false;
  std::string name_;
  std::string args_;
};

}  // namespace tarmac::grammar
